# Stalled readers (issue 21 item 1): a client that stops reading must not
# pin more send buffer under "SndbufTune auto" than autotuning gives it.
#
# The old module lifted a ramp that reached tcp_wmem[2] to SndbufTuneLimits'
# max (net.core.wmem_max), and no later look takes a buffer back once its
# reader stalls (nothing drains, so nothing resumes the connection): with
# wmem_max 4 MiB a stalled socket kept tb 8 MiB where autotuning stops at
# tcp_wmem[2], 4 MiB.
#
# On loopback, one event-MPM server (sendfile, so stalled responses sit in
# write completion without a worker) and a sparse 1 GiB file that no client
# gets near the end of, three phases:
#   unset  N clients GET /unset/big (SndbufTune unset: autotuning), each
#          reads M MiB and stops reading;
#   auto   the same for /auto/big (SndbufTune auto);
#   unset  again, so that autotuning's figures bracket auto's.
# Each phase waits (bounded polling) until the server's sockets stop
# changing, then records every server socket's tb (ss -tm) and TCP "mem"
# in /proc/net/sockstat (pages: system-wide and both ends, so the clients'
# receive queues and other tests on the machine add a little), closes its
# clients and waits for the sockets to go.
#
# Asserted: every auto socket's tb is at most 1.05 x the largest autotuned
# tb and at most 1.05 x tcp_wmem[2]; what sockstat's mem grew by in the
# auto phase is at most 1.10 x the larger growth of the unset phases plus
# 4096 pages (16 MiB, for the neighbours); TCP never entered memory
# pressure (tcp_mem[1]), which would trim both and make the comparison
# meaningless; the sysctls did not change meanwhile (net.core.wmem_max is
# global: a WAN test's stock profile sets it for a while).
#
# Measured (2 cores shared with other tests, loopback, bbr, wmem_max
# 4 MiB, tcp_wmem[2] 4 MiB, N 100, M 4), sockstat growth in pages:
#   autotuning  tb 4194304 for every socket; +102705..109711 (401-429 MiB)
#   new module  tb 0.76..4.19 MB, median 4194304; 0.87..0.94 x autotuning
#   old module  tb 0.96..8.39 MB, median 5.3..8.4 MB, 67-80 of 100 over
#               4 MiB; 1.20..1.58 x autotuning (1.18 once at M 2): fails
#               both checks. Hence 1.10, not 1.25: the old module's
#               memory is only 1.2 x in some runs, the new one's at most
#               1.02 x (with wmem_max 212992, where auto leaves every
#               buffer to autotuning).
# The old module's lift shows once autotuning has reached tcp_wmem[2],
# which on loopback takes less than 1 MiB: M 1, 2, 4, 8 all show it, so
# the issue's 64 MiB is not needed. With 2 x wmem_max <= tcp_wmem[2]
# (stock kernels: wmem_max 212992) the lift cannot pass autotuning and
# the old module passes too; the test says so.
#
# N is 100, not the issue's 1,000: each stalled reader holds about 4.2 MiB
# under autotuning alone (server tb 4 MiB, plus the client's receive
# queue), so 1,000 would need 4.2 GiB, past tcp_mem[2] (575784 pages,
# 2.2 GiB, here) and far past the pressure line tcp_mem[1] (1.5 GiB).
# Under pressure the kernel trims every socket's buffer, autotuned or
# not, which hides the difference, and it would do so for every other
# test on the machine (tcp_mem is global). 100 keeps the old module's
# peak (~650 MiB) below tcp_mem[0]. SBT_STALL_N and SBT_STALL_MIB
# override N and M.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use List::Util qw(max min sum);
use Test::More;

use SndbufTune::Kernel qw(ss_sockets tcp_wmem wmem_max tcp_mem
                          sockstat_tcp_mem tcp_memory_pressures);
use SndbufTune::Server ();
use SndbufTune::StallClient ();
use SndbufTune::Util qw(poll_until);

my $N = $ENV{SBT_STALL_N} || 100;
my $M = $ENV{SBT_STALL_MIB} || 4;
my $MIB = 1 << 20;
my $FILE_SIZE = 1 << 30;
my $TB_SLACK = 1.05;
my ($MEM_RATIO, $MEM_SLACK) = (1.10, 4096);

sub sysctls {
    return join ' ', 'wmem_max', wmem_max(), 'tcp_wmem', tcp_wmem(),
                     'tcp_mem', tcp_mem();
}

my $srv = SndbufTune::Server->new(
    name => 'stall', sendfile => 1, timeout => 120, log_level => 'info',
    # Stalled responses wait in write completion, without a worker, but
    # event accepts at most ThreadsPerChild + AsyncRequestWorkerFactor x
    # idle workers connections per process: room for N in one.
    mpm_conf => "StartServers 2\nServerLimit 2\nThreadsPerChild 32\n"
              . "ThreadLimit 32\nMinSpareThreads 32\nMaxSpareThreads 64\n"
              . "MaxRequestWorkers 64\nAsyncRequestWorkerFactor "
              . (int($N / 16) + 2) . "\nMaxConnectionsPerChild 0\n",
    body => <<'EOF');
<Location /auto/>
    SndbufTune auto
</Location>
<Location /unset/>
    SndbufTune unset
</Location>
EOF
for my $where (qw(auto unset)) {
    my $f = $srv->add_file("/$where/big", '');
    truncate $f, $FILE_SIZE or die "truncate $f: $!";
}
ok($srv->start, 'server starts (event MPM, sendfile)')
    or BAIL_OUT($srv->error);

my $sysctls = sysctls();
my $pressures = tcp_memory_pressures();
my $wmem2 = (tcp_wmem())[2];
diag("N $N clients, M $M MiB read by each; $sysctls");
diag('2 x wmem_max <= tcp_wmem[2]: no lift can pass autotuning here, '
     . 'so this run cannot tell the old module from the new')
    if 2 * wmem_max() <= $wmem2;

my @clients;
sub close_all {
    $_->close for @clients;
    @clients = ();
}
END { close_all() }

# The server's sockets, once they stop changing (count, sum of w and of tb
# the same three looks in a row); () if they never do.
sub settled_sockets {
    my ($last, $same, @socks) = ('', 0);
    my ($ok) = poll_until(60, sub {
        @socks = ss_sockets(sport => $srv->port, state => 'established');
        my $key = join ',', scalar(@socks), sum(0, map { $_->{w} } @socks),
                  sum(0, map { $_->{tb} } @socks);
        $same = $key eq $last ? $same + 1 : 0;
        $last = $key;
        return @socks == $N && $same >= 2;
    }, 0.1);
    return $ok ? @socks : ();
}

sub median {
    my @s = sort { $a <=> $b } @_;
    return @s ? $s[$#s / 2] : 0;
}

sub run_phase {
    my ($where) = @_;
    my $base;
    my ($gone) = poll_until(30, sub {
        $base = sockstat_tcp_mem();
        return !ss_sockets(sport => $srv->port);
    }, 0.1);
    die "the previous phase's sockets are still there" unless $gone;
    for (1 .. $N) {
        my $c = SndbufTune::StallClient->new(port => $srv->port);
        push @clients, $c;
        my $st = $c->request("/$where/big", 'localhost');
        die "/$where/big: status $st" unless $st == 200;
        $c->read_body($M * $MIB);
    }
    my @socks = settled_sockets();
    my $mem = sockstat_tcp_mem();
    my @peers = ss_sockets(dport => $srv->port, state => 'established');
    close_all();
    my @tb = map { $_->{tb} } @socks;
    my %r = (where => $where, n => scalar @socks, grow => $mem - $base,
             tb => \@tb);
    diag(sprintf '%-5s: %d sockets, tb min %d median %d max %d, w sum '
         . '%.1f MiB; sockstat mem %d -> %d pages (+%d, %.1f MiB); the '
         . "clients' r sum %.1f MiB",
         $where, scalar @tb, min(@tb) // 0, median(@tb), max(@tb) // 0,
         sum(0, map { $_->{w} } @socks) / $MIB, $base, $mem, $r{grow},
         $r{grow} * 4096 / $MIB, sum(0, map { $_->{r} } @peers) / $MIB);
    return \%r;
}

my %phase;
for my $where (qw(unset auto unset2)) {
    my $p = run_phase($where =~ s/2$//r);
    is($p->{n}, $N, "$where: the server's $N sockets, settled")
        or last;
    $phase{$where} = $p;
}

SKIP: {
    skip 'a phase did not settle', 2 unless keys %phase == 3;
    my $auto = $phase{auto};
    my $unset_tb = max(map { @{ $phase{$_}{tb} } } qw(unset unset2));
    my $bound = int(min($TB_SLACK * $unset_tb, $TB_SLACK * $wmem2));
    my @over = grep { $_ > $bound } @{ $auto->{tb} };
    ok(!@over, "every auto socket's tb <= $bound ($TB_SLACK x the "
       . "smaller of autotuning's largest, $unset_tb, and tcp_wmem[2])")
        or diag(scalar(@over) . " of $N over, up to " . max(@over));

    my $unset_grow = max($phase{unset}{grow}, $phase{unset2}{grow});
    my $limit = int($MEM_RATIO * $unset_grow + $MEM_SLACK);
    diag(sprintf 'sockstat mem growth: auto %d pages, autotuning %d '
         . '(the larger phase): ratio %.2f', $auto->{grow}, $unset_grow,
         $unset_grow ? $auto->{grow} / $unset_grow : 0);
    cmp_ok($auto->{grow}, '<=', $limit, "auto's sockstat mem growth <= "
           . "$MEM_RATIO x autotuning's + $MEM_SLACK pages");
}

is(tcp_memory_pressures() - $pressures, 0,
   'TCP never entered memory pressure (it trims every buffer)');
is(sysctls(), $sysctls, 'the sysctls did not change during the test');
ok($srv->stop, 'server stops, no process left') or diag($srv->error);

done_testing;
