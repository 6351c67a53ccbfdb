package SndbufBench::Internet;
# bench/run's part `internet`: downloads as the Internet shapes them. Each
# client sits behind an access link of its own (its rate, drop-tail queue
# and extra RTT: wanlab's --sub-link ...:delay=MS) behind a shared
# 400 Mbit/s, 10 ms link that is not the bottleneck; users behind one NAT
# address take different paths (their source ports: --sub-link
# ADDR/32,ports=LO-HI:...); some links carry another sender's bulk flow.
#
# Cells (--cell picks some, by name or tag):
#   nat-together, nat-stagger (tag nat): two users behind one address,
#     50 Mbit/s at 30 ms and 50 Mbit/s at 50 ms (one BDP of queue each),
#     starting together, or the second 5 s after the first;
#   inet20: twenty clients behind links of their own (2, 5, 10 or 20
#     Mbit/s; +10 to +190 ms; queues 1/2 to 4 BDP), all at once;
#   home-cubic, home-bbr (tag home): ten homes behind 20 Mbit/s, 100 ms
#     links with 2 BDP of queue; in five a bulk flow Apache does not serve
#     (wanperf, cubic or bbr on its socket) starts 5 s before the download;
#   office: ten users behind one address sharing a 30 Mbit/s, 250 ms link
#     (one BDP), beside ten clients behind 20 Mbit/s, 100 ms links (2 BDP);
#   twocrowds: two crowds of ten on two 50 Mbit/s, 50 ms links (one BDP
#     each), a bbr bulk flow beside the second; and the first crowd alone
#     (the runs marked `alone`), the yardstick for it;
#   scale200 (tag scale): 200 downloads from 200 addresses, each behind
#     its own 0.75 or 1 Mbit/s link (+10 to +190 ms, 1 or 2 BDP), over 4
#     event children;
#   scale1500 (tag scale): 20 clients as inet20's at 1, 2, 5 and 10
#     Mbit/s, measured, while 1,500 more addresses (more than the
#     module's 1,024 address slots) churn through short downloads (128
#     KiB, three at a time on each of six 20 Mbit/s, 40 ms links, one per
#     /24: about 90 a second), from a 10 s lead on; 4 event children.
# Each cell runs its configurations side by side on one lab: autotuning
# (`nomod`: the module not loaded), `SndbufTune auto`, and in nat and
# inet20 `SndbufTune 64k`; under each profile (--cc: bbr, this lab's;
# cubic; stock: cubic with net.core.wmem_max 212992 for the whole machine,
# put back after; default bbr and cubic, --quick bbr); --repeat N rounds
# (default 3, --quick 1), the order
# rotating; figures are the rounds' medians, ratios the medians of the
# rounds' own. --secs N: each run's length (30 s, --quick 20 s), the
# window from N/3 to N-2 s after the first download started.
#
# Per download, from ss in the server namespace every 0.5 s (a loop of
# its own at a real-time priority, so that a sample's time is its own):
# goodput (bytes_acked over the window), tb and srtt (averaged over the
# window's samples); per group: the sum of goodput, Σtb (tb summed over
# the group's sockets, averaged over the samples), the median of the
# downloads' srtt, Jain's index, and beside foreign flows what they
# delivered and the group's share. The downloads that start together come
# from one curl (--parallel, an --interface and a --local-port each).
# With the module loaded the server logs at sndbuf_tune:trace2, and each
# look that says `in a crowd` is counted for its download.
use strict;
use warnings;
use utf8;

use File::Temp ();
use POSIX ();
use Time::HiRes ();

use SndbufBench::Common qw(:all);
use SndbufTune::Kernel qw(parse_ss);

# The shared link every cell's clients sit behind; not the bottleneck.
my %MAIN = (rtt => 10, rate => 400, mtu => 1500);

my %PROFILE = (bbr => undef,
               cubic => { cc => 'cubic', wmem_max => undef },
               stock => { cc => 'cubic', wmem_max => 212992 });

# A foreign flow, or the churn, starts this long before the downloads.
my $LEAD = 5;
my $CHURN_LEAD = 10;
my $FOREIGN_PORT = 5201;
my $CHURN_SIZE = 128 * 1024;
my $CHURN_PAR = 3;

# NAT users' source ports, a range each (wanlab's ports=LO-HI).
my @NAT_PORTS = ([10000, 19999], [20000, 29999]);

# The module's look says so where its crowd excused a shortfall (a
# share that went to the crowd: sndbuf_auto.c, trace2).
my $LOOK_RE = qr/SndbufTune auto look: /;
my $CROWD_RE = qr/, in a crowd/;

# A sub-link of wanlab: NET (a /32 address or a prefix, with ports:
# [LO, HI]) at RATE Mbit/s, EXTRA ms more RTT, a queue of Q BDPs at the
# client's RTT (the main link's + EXTRA), at least 4 packets.
sub link_spec {
    my ($net, $rate, $extra, $q, $ports) = @_;
    my $bdp = $rate * 1e6 / 8 * ($MAIN{rtt} + $extra) / 1e3;
    my $bytes = $q * $bdp > 4 * $MAIN{mtu} ? $q * $bdp : 4 * $MAIN{mtu};
    return sprintf '%s%s:%s:%.0f:delay=%s', $net,
        $ports ? ",ports=$ports->[0]-$ports->[1]" : '', $rate, $bytes, $extra;
}

# The lab's client address number N (from 1), as wanlab numbers them.
sub addr_of { my $i = $_[0] - 1; sprintf '198.18.%d.%d', 1 + int($i / 254), 1 + $i % 254 }

# inet20's clients: rate, extra RTT and queue (BDPs), one of each kind in
# turn; the last is the issue's 20 Mbit/s, 200 ms client behind 4 BDP.
sub inet20_links {
    my @rates = @_ ? @_ : (2, 5, 10, 20);
    my @q = (0.5, 1, 2, 4);
    return map { { rate => $rates[$_ % 4], extra => 10 + int($_ * 180 / 19 + 0.5),
                   q => $q[($_ + int($_ / 4)) % 4] } } 0 .. 19;
}

# Flows: id (a short name), label, addr (client address number), ports
# (a NAT user's range), start (s after the first), group.
sub cell_nat {
    my $stagger = shift;
    my @l = ([30, 20], [50, 40]);
    return {
        clients => 1,
        sub_links => [ map { link_spec('198.18.1.1/32', 50, $l[$_][1], 1,
                                       $NAT_PORTS[$_]) } 0, 1 ],
        flows => [ map { { id => "nat$l[$_][0]", addr => 1,
                           ports => $NAT_PORTS[$_],
                           start => $_ && $stagger ? 5 : 0, group => 'nat',
                           label => "NAT user at $l[$_][0] ms (50 Mbit/s)" } } 0, 1 ],
    };
}

sub cell_inet20 {
    my @l = inet20_links(@_);
    return {
        clients => 20,
        sub_links => [ map { link_spec(addr_of($_ + 1) . '/32', $l[$_]{rate},
                                       $l[$_]{extra}, $l[$_]{q}) } 0 .. 19 ],
        flows => [ map { { id => sprintf('c%02d', $_ + 1), addr => $_ + 1,
                           group => 'all',
                           label => sprintf('%s Mbit/s, %d ms, %s BDP',
                                            $l[$_]{rate}, 10 + $l[$_]{extra},
                                            $l[$_]{q}) } } 0 .. 19 ],
    };
}

sub cell_home {
    my $cc = shift;
    return {
        clients => 10,
        sub_links => [ map { link_spec(addr_of($_) . '/32', 20, 90, 2) } 1 .. 10 ],
        flows => [ map { { id => sprintf('h%02d', $_), addr => $_,
                           group => $_ <= 5 ? 'busy' : 'quiet',
                           label => "home $_, 20 Mbit/s, 100 ms"
                               . ($_ <= 5 ? ", beside a $cc flow" : '') } } 1 .. 10 ],
        foreign => [ map { { cc => $cc, addr => $_, port => $FOREIGN_PORT + $_ - 1,
                             beside => sprintf('h%02d', $_) } } 1 .. 5 ],
    };
}

sub cell_office {
    return {
        clients => 11,
        sub_links => [ link_spec('198.18.1.1/32', 30, 240, 1),
                       map { link_spec(addr_of($_) . '/32', 20, 90, 2) } 2 .. 11 ],
        flows => [ (map { { id => sprintf('o%02d', $_), addr => 1,
                            ports => $NAT_PORTS[0], group => 'office',
                            label => "office user $_ (one address, one 30 Mbit/s, 250 ms link)" } } 1 .. 10),
                   map { { id => sprintf('x%02d', $_ - 1), addr => $_,
                           group => 'others',
                           label => 'own 20 Mbit/s, 100 ms link' } } 2 .. 11 ],
    };
}

# Crowd A: 198.18.1.1-10 behind 198.18.1.0/28; crowd B: .17-.26 behind
# 198.18.1.16/28, its foreign flow to .27.
sub cell_twocrowds {
    return {
        clients => 27,
        sub_links => [ link_spec('198.18.1.0/28', 50, 40, 1),
                       link_spec('198.18.1.16/28', 50, 40, 1) ],
        flows => [ (map { { id => sprintf('a%02d', $_), addr => $_, group => 'A',
                            label => 'crowd A, 50 Mbit/s, 50 ms' } } 1 .. 10),
                   map { { id => sprintf('b%02d', $_ - 16), addr => $_, group => 'B',
                           variant => 'both',
                           label => 'crowd B, beside a bbr flow' } } 17 .. 26 ],
        foreign => [ { cc => 'bbr', addr => 27, port => $FOREIGN_PORT,
                       variant => 'both', beside => 'B' } ],
        variants => ['both', 'alone'],
    };
}

# 175 Mbit/s in all: the relay keeps up with 200 links at that rate on
# two cores (at 250 it fell behind, 86% of the packets late).
sub cell_scale200 {
    my @f = map { { rate => $_ % 2 ? 1 : 0.75, extra => 10 + ($_ * 37) % 181,
                    q => int($_ / 2) % 2 ? 2 : 1 } } 0 .. 199;
    return {
        clients => 200, processes => 4, spread => 200,
        sub_links => [ map { link_spec(addr_of($_ + 1) . '/32', $f[$_]{rate},
                                       $f[$_]{extra}, $f[$_]{q}) } 0 .. 199 ],
        flows => [ map { { id => sprintf('s%03d', $_ + 1), addr => $_ + 1,
                           group => 'all',
                           label => "$f[$_]{rate} Mbit/s" } } 0 .. 199 ],
    };
}

# The churn's addresses, 21 to 1520, by /24 (198.18.1.0/24 after the
# measured clients' /32s, first match wins): a link and a loop each.
sub cell_scale1500 {
    my $c = cell_inet20(1, 2, 5, 10);
    my $first = 21;
    my $last = 1520;
    my %block;
    push @{ $block{ (split /\./, addr_of($_))[2] } }, $_ for $first .. $last;
    my @loops;
    for my $blk (sort { $a <=> $b } keys %block) {
        push @loops, [ map { addr_of($_) } @{ $block{$blk} } ];
        push @{ $c->{sub_links} }, link_spec("198.18.$blk.0/24", 20, 30, 1);
    }
    $c->{clients} = $last;
    $c->{processes} = 4;
    $c->{spread} = 100;
    $c->{churn} = { loops => \@loops, addrs => $last - $first + 1 };
    return $c;
}

our @CELLS = (
    { name => 'nat-together', tags => ['nat'], build => sub { cell_nat(0) },
      configs => [qw(nomod auto fixed64k)], profiles => [qw(bbr cubic stock)],
      label => 'two users behind one address: 50 Mbit/s at 30 ms and at 50 ms, together' },
    { name => 'nat-stagger', tags => ['nat'], build => sub { cell_nat(1) },
      configs => [qw(nomod auto fixed64k)], profiles => [qw(bbr cubic stock)],
      label => 'the same, the 50 ms user 5 s after the other' },
    { name => 'inet20', tags => [], build => \&cell_inet20,
      configs => [qw(nomod auto fixed64k)], profiles => [qw(bbr cubic stock)],
      label => 'twenty clients behind links of their own (2-20 Mbit/s, 20-200 ms, 1/2-4 BDP)' },
    { name => 'home-cubic', tags => ['home'], build => sub { cell_home('cubic') },
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic stock)],
      label => 'ten homes (20 Mbit/s, 100 ms, 2 BDP), five with a cubic bulk flow' },
    { name => 'home-bbr', tags => ['home'], build => sub { cell_home('bbr') },
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic)],
      label => 'ten homes (20 Mbit/s, 100 ms, 2 BDP), five with a bbr bulk flow' },
    { name => 'office', tags => [], build => \&cell_office,
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic stock)],
      label => 'ten users behind one address on one 30 Mbit/s, 250 ms link, '
               . 'beside ten clients on 20 Mbit/s, 100 ms links' },
    { name => 'twocrowds', tags => [], build => \&cell_twocrowds,
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic)],
      label => 'two crowds of ten on two 50 Mbit/s, 50 ms links, a bbr flow '
               . 'beside the second (and the first alone)' },
    { name => 'scale200', tags => ['scale'], build => \&cell_scale200,
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic)],
      label => '200 addresses behind 0.75-1 Mbit/s links of their own, 4 children' },
    { name => 'scale1500', tags => ['scale'], build => \&cell_scale1500,
      configs => [qw(nomod auto)], profiles => [qw(bbr cubic)],
      label => "twenty clients as inet20's (1-10 Mbit/s) while 1,500 more "
               . 'addresses churn through short downloads, 4 children' },
);
my %CELL = map { $_->{name} => $_ } @CELLS;

sub health_keys { map { "internet $_->{name}" } @CELLS }

# [run length, window start, window end] in seconds
sub times_ {
    my $d = $opt{secs} || ($Q ? 20 : 30);
    return ($d, int($d / 3 + 0.5), $d - 2);
}

sub rounds { $opt{repeat} || ($Q ? 1 : 3) }

sub selected {
    my @want = split /,/, $opt{cell} // '';
    for my $w (@want) {
        die "bench/run: --cell: no internet cell or tag '$w' (cells: "
            . join(' ', map { $_->{name} } @CELLS) . "; tags: nat home scale)\n"
            unless $CELL{$w} || grep { grep { $_ eq $w } @{ $_->{tags} } } @CELLS;
    }
    my %w = map { $_ => 1 } @want;
    return grep { !@want || $w{ $_->{name} } || grep { $w{$_} } @{ $_->{tags} } }
        @CELLS;
}

# The profiles --cc names: default bbr and cubic (--quick: bbr); stock
# only when asked, as it changes the machine's wmem_max.
sub cc_list { $opt{cc} // ($Q ? 'bbr' : 'bbr,cubic') }

# The profiles a cell runs under: its own, of those --cc names.
sub profiles_of {
    my $c = shift;
    my %want = map { $_ => 1 } split /,/, cc_list();
    for (keys %want) {
        die "bench/run: --cc: bbr, cubic or stock, not '$_'\n"
            unless exists $PROFILE{$_};
    }
    return grep { $want{$_} } @{ $c->{profiles} };
}

# A cell's runs: [key, configuration, variant]; a variant's runs other
# than the cell's first are keyed 'CFG VARIANT'.
sub runs_of {
    my ($c, $spec) = @_;
    my @cfgs = configs_of([$c->{configs}, $c->{configs}]);
    my @v = @{ $spec->{variants} || [undef] };
    return map { my $v = $_; map { [ $v && $v ne $v[0] ? "$_ $v" : $_, $_, $v ] } @cfgs } @v;
}

sub run {
    my $t0 = Time::HiRes::time();
    my @cells = selected();
    say_('internet: ' . join(' ', map { $_->{name} } @cells) . '; profiles '
         . cc_list() . '; ' . rounds() . ' round(s) of '
         . (times_())[0] . ' s');
    for my $c (@cells) {
        run_cell($c, $_) for profiles_of($c);
    }
    $RES{internet}{wall_s} = Time::HiRes::time() - $t0 if $RES{internet};
}

sub run_cell {
    my ($c, $prof) = @_;
    my $t0 = Time::HiRes::time();
    my $spec = $c->{build}->();
    my @runs = runs_of($c, $spec);
    return unless @runs;
    my ($D, $W0, $W1) = times_();
    my $file = data_file(int(50e6 / 8 * ($D + 20) / 1048576 + 1) * 1048576);
    my $key = "$c->{name}/$prof";
    say_("internet $key: $c->{label}; window $W0-$W1 s of $D s; "
         . join(', ', map { $_->[0] } @runs) . '; ' . rounds() . ' round(s); load '
         . (split ' ', shell('cat /proc/loadavg'))[0]);
    my $lab = SndbufTune::WanLab->up(rtt_ms => $MAIN{rtt}, rate_mbit => $MAIN{rate},
                                     mtu => $MAIN{mtu}, clients => $spec->{clients},
                                     sub_links => $spec->{sub_links});
    my $guard = $PROFILE{$prof} && $lab->profile(%{ $PROFILE{$prof} });
    my $res = $RES{internet}{cells}{$key} = {
        cell => $c->{name}, profile => $prof, label => $c->{label},
        runs => [ map { $_->[0] } @runs ], window => [$W0, $W1, $D],
        flows => [ map { { %$_, ports => undef } } @{ $spec->{flows} } ],
        rounds => [] };
    my $churn = $spec->{churn} ? data_file($CHURN_SIZE) : undef;
    for my $i (0 .. rounds() - 1) {
        my %r;
        for my $k (round_order([ map { $_->[0] } @runs ], $i)) {
            my ($run) = grep { $_->[0] eq $k } @runs;
            $r{$k} = measure($lab, $c, $spec, $run, $file, $churn);
            log_run($key, $k, $r{$k});
        }
        push @{ $res->{rounds} }, \%r;
    }
    undef $guard;
    lab_down($lab, "internet $c->{name}");
    summarise($res);
    $res->{wall_s} = Time::HiRes::time() - $t0;
    say_(sprintf 'internet %s: %.0f s', $key, $res->{wall_s});
}

sub min_of { my ($m) = sort { $a <=> $b } grep { defined } @_; $m }

# ss in the server namespace every 0.5 s, from a loop of its own at a
# real-time priority (SCHED_FIFO 5, under the relay's 10): on a loaded
# machine an ss started from here waited up to 6 s for a CPU, and a
# sample taken then is not where its time says it is. Each sample is
# "@@ <epoch seconds>" and ss's lines, in a file.
sub sampler_start {
    my ($lab) = @_;
    my $out = File::Temp->new(TEMPLATE => '/tmp/sbt-inet-ss-XXXXXX');
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', $out->filename or POSIX::_exit(126);
        open STDERR, '>', '/dev/null';
        open STDIN, '<', '/dev/null';
        POSIX::setsid();
        exec('chrt', '-f', '5', 'ip', 'netns', 'exec', $lab->{ns_server},
             'bash', '-c', 'while :; do echo "@@ $EPOCHREALTIME"; '
             . 'ss -H -tmnie state connected; sleep 0.5; done')
            or POSIX::_exit(127);
    }
    return { pid => $pid, out => $out };
}

sub sampler_stop {
    my ($smp) = @_;
    kill 'TERM', -$smp->{pid};
    waitpid($smp->{pid}, 0);
}

# The sampler's samples from $t0 on: { t, socks => { download id => ss },
# foreign => { local port => ss } }.
sub sampler_read {
    my ($smp, $t0, $peer, $fport) = @_;
    open my $fh, '<', $smp->{out}->filename or die "ss samples: $!";
    local $/ = "@@ ";
    my @samples;
    while (my $chunk = <$fh>) {
        chomp $chunk;
        my ($t, $text) = split /\n/, $chunk, 2;
        next unless defined $text && $t =~ /^[\d.]+$/ && $t >= $t0;
        my (%socks, %fs);
        for my $s (grep { defined $_->{tb} } parse_ss($text)) {
            if (($s->{lport} // 0) == 80) {
                my $id = $peer->{ $s->{peer} // '' };
                $socks{$id} = $s if defined $id;
            }
            elsif ($fport->{ $s->{lport} // 0 }) {
                $fs{ $s->{lport} } = $s;
            }
        }
        push @samples, { t => $t - $t0, socks => \%socks, foreign => \%fs };
    }
    return @samples;
}

# A fresh source port for a download: from its NAT user's range, else
# from 30000-59999, each in turn (a port a killed download left in
# TIME_WAIT comes round again after 30,000 more).
my %PORT_NEXT;
sub next_port {
    my ($lo, $hi) = @{ $_[0] || [30000, 59999] };
    my $n = $PORT_NEXT{"$lo-$hi"} // $lo + $$ % ($hi - $lo + 1);
    $PORT_NEXT{"$lo-$hi"} = $n >= $hi ? $lo : $n + 1;
    return $n;
}

# The downloads that start together: one curl for all of them
# (--parallel, each its own --interface and --local-port), a process for
# 200 downloads rather than 200 (whose wake-ups starved ss, the relay
# and Apache on two cores). Returns { pid, out, cfg, peers =>
# { "addr:port" => download id } }.
sub curl_batch {
    my ($lab, $url, $max_time, @flows) = @_;
    my $out = File::Temp->new(TEMPLATE => '/tmp/sbt-inet-XXXXXX');
    my $cfg = File::Temp->new(TEMPLATE => '/tmp/sbt-inet-XXXXXX');
    my %peers;
    my @blocks = map {
        my ($ip, $port) = (addr_of($_->{addr}), next_port($_->{ports}));
        $peers{"$ip:$port"} = $_->{id};
        qq{url = "$url"\ninterface = "$ip"\nlocal-port = $port\n}
        . qq{output = "/dev/null"\nmax-time = $max_time\n}
        . qq{write-out = "%{local_ip}:%{local_port} %{http_code} }
        . qq{%{size_download} %{exitcode}\\n"\n}
    } @flows;
    print $cfg "parallel\nparallel-immediate\nparallel-max = ", scalar @flows,
        "\nsilent\n", join("next\n", @blocks);
    close $cfg;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', $out->filename or POSIX::_exit(126);
        open STDERR, '>', '/dev/null';
        open STDIN, '<', '/dev/null';
        exec('ip', 'netns', 'exec', $lab->{ns_client}, 'stdbuf', '-oL', 'curl',
             '-K', $cfg->filename) or POSIX::_exit(127);
    }
    return { pid => $pid, out => $out, cfg => $cfg, peers => \%peers };
}

# Stop a batch; the downloads that had ended already (done or failed),
# as { peer, code, bytes, exit }.
sub curl_batch_stop {
    my ($j) = @_;
    kill 'TERM', $j->{pid};
    waitpid($j->{pid}, 0);
    open my $fh, '<', $j->{out}->filename or return;
    my @ended;
    while (<$fh>) {
        my ($peer, $code, $bytes, $exit) = split;
        push @ended, { peer => $peer, code => $code, bytes => $bytes,
                       exit => $exit } if defined $exit;
    }
    return @ended;
}

# Churn: each loop is one curl at a time downloading from every address
# of its block, CHURN_PAR at once (--parallel, an --interface each), again
# and again until killed; curl's -w says what each got.
sub churn_start {
    my ($lab, $spec, $url) = @_;
    my @jobs;
    for my $addrs (@{ $spec->{churn}{loops} }) {
        my $out = File::Temp->new(TEMPLATE => '/tmp/sbt-churn-XXXXXX');
        my $cfg = File::Temp->new(TEMPLATE => '/tmp/sbt-churn-XXXXXX');
        # Connection: close, or curl's cache of idle connections holds the
        # event MPM's room for connections (2 x ThreadsPerChild a child)
        print $cfg "parallel\nparallel-max = $CHURN_PAR\nsilent\n",
            join("next\n", map { qq{url = "$url"\ninterface = "$_"\n}
                                 . qq{header = "Connection: close"\n}
                                 . qq{output = "/dev/null"\nmax-time = 20\n}
                                 . qq{write-out = "%{http_code} %{size_download} %{local_ip}\\n"\n} }
                             @$addrs);
        close $cfg;
        # stdbuf: curl's -w lines reach the file as each download ends, not
        # when a pass over the block does (the last one is killed)
        my $script = "while :; do stdbuf -oL curl -K '" . $cfg->filename . "' >> '"
            . $out->filename . "'; done";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            open STDOUT, '>', '/dev/null';
            open STDERR, '>&', \*STDOUT;
            open STDIN, '<', '/dev/null';
            POSIX::setsid();
            exec('ip', 'netns', 'exec', $lab->{ns_client}, 'bash', '-c', $script)
                or POSIX::_exit(127);
        }
        push @jobs, { pid => $pid, out => $out, cfg => $cfg };
    }
    return \@jobs;
}

# Stop the churn; how many downloads it finished whole, how many not, and
# from how many addresses.
sub churn_stop {
    my ($jobs) = @_;
    my ($n, $bad, %addr) = (0, 0);
    for my $j (@$jobs) {
        kill 'TERM', -$j->{pid};
        waitpid($j->{pid}, 0);
        open my $fh, '<', $j->{out}->filename or next;
        while (<$fh>) {
            my ($code, $size, $ip) = split;
            if (($code // '') eq '200' && ($size // 0) == $CHURN_SIZE) {
                $n++;
                $addr{$ip} = 1;
            }
            else {
                $bad++;
            }
        }
    }
    return ($n, $bad, scalar keys %addr);
}

# One run of a cell: its configuration's server, the foreign flows and the
# churn first, then the downloads, each at its start; ss every 0.5 s.
sub measure {
    my ($lab, $c, $spec, $run, $file, $churn_file) = @_;
    my ($k, $cfg, $variant) = @$run;
    my ($D, $W0, $W1) = times_();
    my $in = sub { !$_[0]{variant} || !$variant || $_[0]{variant} eq $variant };
    my @flows = grep { $in->($_) } @{ $spec->{flows} };
    my @foreign = grep { $in->($_) } @{ $spec->{foreign} || [] };
    my $restore = config_sysctls($lab, $cfg);
    my $srv = wan_server($lab, $cfg, links => { '/data.bin' => $file,
                                                $churn_file ? ('/churn.bin' => $churn_file) : () },
                         processes => $spec->{processes} // 1,
                         threads => $spec->{spread} ? undef : 128,
                         spread => $spec->{spread},
                         log_level => $CONFIGS{$cfg}{module}
                             ? 'warn sndbuf_tune:trace2' : undef);
    my $base = relay_reset($lab);
    my @bulk = map { $lab->bulk_start(cc => $_->{cc}, port => $_->{port},
                                      from => addr_of($_->{addr}),
                                      seconds => $D + $LEAD + 10) } @foreign;
    my $churn = $spec->{churn} && churn_start($lab, $spec, $srv->url('/churn.bin'));
    sleep($churn ? $CHURN_LEAD : @bulk ? $LEAD : 0);
    my $sampler = sampler_start($lab);
    my $t0 = Time::HiRes::time();
    my (@jobs, %peer);
    my @todo = sort { ($a->{start} // 0) <=> ($b->{start} // 0) } @flows;
    while ((my $now = Time::HiRes::time() - $t0) < $D) {
        my @now;
        push @now, shift @todo while @todo && ($todo[0]{start} // 0) <= $now;
        if (@now) {
            my $j = curl_batch($lab, $srv->url('/data.bin'), $D + 30, @now);
            push @jobs, $j;
            %peer = (%peer, %{ $j->{peers} });
        }
        my $next = @todo ? $todo[0]{start} : $D;
        Time::HiRes::sleep(min_of(0.1, $next - $now)) if $next > $now;
    }
    # everything stops first: reading the samples takes a while
    sampler_stop($sampler);
    my @churned = $churn ? churn_stop($churn) : ();
    my @early = map { curl_batch_stop($_) } @jobs;
    $lab->bulk_stop($_) for @bulk;
    my @samples = sampler_read($sampler, $t0, \%peer,
                               { map { $_->{port} => 1 } @foreign });
    my $health = cell_health($lab, $base, "internet $c->{name}", $k);
    $srv->stop;
    my $looks = count_looks($srv, \%peer);
    $restore->();
    my $r = figures(\@samples, \@flows, \@foreign, $W0, $W1);
    # the longest gap between samples (0.5 s and ss's time when all is well)
    $r->{ss_max_s} = max_of(map { $samples[$_]{t} - $samples[$_ - 1]{t} } 1 .. $#samples);
    for my $id (keys %{ $r->{flows} }) {
        $r->{flows}{$id}{$_} = ($looks->{$id} || {})->{$_} // 0 for qw(looks crowd);
    }
    $r->{crowd_looks} = 0;
    $r->{crowd_looks} += $_->{crowd} // 0 for values %$looks;
    $r->{looks} = 0;
    $r->{looks} += $_->{looks} // 0 for values %$looks;
    $r->{early} = scalar @early;
    $r->{early_why} = "$early[0]{peer}: HTTP $early[0]{code}, curl exit "
        . "$early[0]{exit} after $early[0]{bytes} bytes" if @early;
    $r->{relay} = $health->{note};
    $r->{relay_late_pct} = 100 * $health->{late_frac};
    $r->{relay_cpu_s} = $health->{relay_cpu_s};
    @$r{qw(churn_done churn_bad churn_addrs)} = @churned if $churn;
    $r->{load} = (split ' ', shell('cat /proc/loadavg'))[0];
    return $r;
}

# Looks per download, and those in a crowd, from the error log (trace2:
# "[client ADDR:PORT] SndbufTune auto look: ..., in a crowd ...").
sub count_looks {
    my ($srv, $peer) = @_;
    my %n;
    open my $fh, '<', $srv->error_log or return {};
    while (my $l = <$fh>) {
        next unless $l =~ $LOOK_RE && $l =~ /\[client ([\d.]+:\d+)\]/;
        my $id = $peer->{$1} // next;
        $n{$id}{looks}++;
        $n{$id}{crowd}++ if $l =~ $CROWD_RE;
    }
    return \%n;
}

sub _mean { my $s = 0; $s += $_ for @_; @_ ? $s / @_ : undef }

# A series' bytes_acked rate over [t0, t1] (bit/s), or undef.
sub acked_rate {
    my ($series, $t0, $t1) = @_;
    my @in = grep { $_->[0] >= $t0 && $_->[0] <= $t1
                    && defined $_->[1]{bytes_acked} } @$series;
    return undef if @in < 2 || $in[-1][0] <= $in[0][0];
    return 8 * ($in[-1][1]{bytes_acked} - $in[0][1]{bytes_acked})
        / ($in[-1][0] - $in[0][0]);
}

# One run's figures over [W0, W1]: per download, per group (and 'all'),
# per foreign flow.
sub figures {
    my ($samples, $flows, $foreign, $W0, $W1) = @_;
    my @win = grep { $_->{t} >= $W0 && $_->{t} <= $W1 } @$samples;
    my (%f, %g);
    for my $fl (@$flows) {
        my $id = $fl->{id};
        my @s = map { [$_->{t}, $_->{socks}{$id}] } grep { $_->{socks}{$id} } @$samples;
        my @w = grep { $_->[0] >= $W0 && $_->[0] <= $W1 } @s;
        $f{$id} = { bps => acked_rate(\@s, $W0, $W1) // 0,
                    tb => _mean(map { $_->[1]{tb} // 0 } @w),
                    srtt_ms => _mean(map { ($_->[1]{rtt_us} // 0) / 1000 } @w),
                    minrtt_ms => @w ? ($w[-1][1]{minrtt_us} // 0) / 1000 : undef,
                    seen => scalar @s };
        push @{ $g{$_} }, $id for 'all', $fl->{group} // 'all';
    }
    my %groups;
    for my $gn (keys %g) {
        my %ids = map { $_ => 1 } @{ $g{$gn} };
        my @ids = sort keys %ids;
        my $sum = 0;
        $sum += $f{$_}{bps} for @ids;
        my @tbs = map { my $smp = $_; my $x = 0;
                        $x += ($smp->{socks}{$_} || {})->{tb} // 0 for @ids; $x } @win;
        $groups{$gn} = { bps => $sum, sumtb => _mean(@tbs),
                         srtt_ms => median(map { $f{$_}{srtt_ms} } @ids),
                         jain => jain(map { $f{$_}{bps} } @ids), n => scalar @ids };
    }
    my %fo;
    my %gof = map { $_->{id} => $_->{group} // 'all' } @$flows;
    for my $x (@$foreign) {
        my @s = map { [$_->{t}, $_->{foreign}{ $x->{port} }] }
            grep { $_->{foreign}{ $x->{port} } } @$samples;
        $fo{ $x->{beside} } = acked_rate(\@s, $W0, $W1);
        # beside a download (its group) or a group: what the group's
        # links carried besides, and the group's share of it all
        my $g = $groups{ $gof{ $x->{beside} } // $x->{beside} } or next;
        $g->{foreign_bps} += $fo{ $x->{beside} } // 0;
    }
    for my $g (grep { defined $_->{foreign_bps} } values %groups) {
        my $all = $g->{bps} + $g->{foreign_bps};
        $g->{share} = $all ? $g->{bps} / $all : undef;
    }
    return { flows => \%f, groups => \%groups, foreign => \%fo };
}

sub log_run {
    my ($key, $k, $r) = @_;
    my $all = $r->{groups}{all};
    my @g = grep { $_ ne 'all' } sort keys %{ $r->{groups} };
    say_(sprintf '  %-13s %s Mbit/s in all (%s), Σtb %s MiB, median srtt %.1f ms, '
         . 'Jain %.3f, crowd looks %d of %d%s%s%s%s%s', $k, mbit($all->{bps}),
         join(' ', map { my $x = $r->{groups}{$_};
                         "$_ " . mbit($x->{bps}) . (defined $x->{share}
                             ? sprintf(' (share %.2f)', $x->{share}) : '') } @g) || '-',
         mib($all->{sumtb}), $all->{srtt_ms} // 0, $all->{jain} // 0,
         $r->{crowd_looks}, $r->{looks},
         %{ $r->{foreign} } ? '; beside: ' . join(' ', map {
             "$_ " . mbit($r->{foreign}{$_}) } sort keys %{ $r->{foreign} }) : '',
         defined $r->{churn_done} ? "; churn $r->{churn_done} downloads from "
             . "$r->{churn_addrs} addresses"
             . ($r->{churn_bad} ? " ($r->{churn_bad} failed)" : '') : '',
         $r->{relay}, ($r->{ss_max_s} // 0) > 1
             ? sprintf('  [samples up to %.2f s apart]', $r->{ss_max_s}) : '',
         $r->{early} ? "  [$r->{early} downloads ended early: $r->{early_why}]" : '');
    return if keys %{ $r->{flows} } > 20;
    say_('    ' . join('  ', map { sprintf '%s %s', $_, mbit($r->{flows}{$_}{bps}) }
                             sort keys %{ $r->{flows} }));
}

# What a run is held against: autotuning's run of the same variant.
sub base_of {
    my $k = shift;
    return $k =~ / (\S+)$/ ? "nomod $1" : 'nomod';
}

# A cell's medians over its rounds and its ratios as the medians of the
# rounds' own: per download goodput / the base's; per group goodput,
# Σtb and median srtt / the base's; and for twocrowds each run against
# the same configuration's run of crowd A alone.
sub summarise {
    my ($res) = @_;
    my @R = @{ $res->{rounds} };
    my %group = map { $_->{id} => $_->{group} // 'all' } @{ $res->{flows} };
    my %S;
    for my $k (@{ $res->{runs} }) {
        my $base = base_of($k);
        my %m;
        my %ids = map { %{ $_->{$k}{flows} || {} } } @R;
        for my $id (keys %ids) {
            my $at = sub { my ($r, $x, $f) = @_; (($r->{$x}{flows} || {})->{$id} || {})->{$f} };
            $m{flows}{$id} = {
                (map { my $f = $_; ($f => median(map { $at->($_, $k, $f) } @R)) }
                 qw(bps tb srtt_ms minrtt_ms looks crowd)),
                x => median(map { div($at->($_, $k, 'bps'), $at->($_, $base, 'bps')) } @R) };
        }
        my %gs = map { %{ $_->{$k}{groups} || {} } } @R;
        my $alone = $k =~ / / ? undef : "$k alone";
        undef $alone unless $alone && grep { $_ eq $alone } @{ $res->{runs} };
        for my $g (keys %gs) {
            my $at = sub { my ($r, $x, $f) = @_; (($r->{$x}{groups} || {})->{$g} || {})->{$f} };
            my $x = $m{groups}{$g} = {
                (map { my $f = $_; ($f => median(map { $at->($_, $k, $f) } @R)) }
                 qw(bps sumtb srtt_ms jain n foreign_bps share)) };
            for my $f (qw(bps sumtb srtt_ms share)) {
                $x->{"${f}_x"} = median(map { div($at->($_, $k, $f), $at->($_, $base, $f)) } @R);
                $x->{"${f}_alone"} = median(map { div($at->($_, $k, $f), $at->($_, $alone, $f)) } @R)
                    if $alone;
            }
            my @ids = grep { defined $m{flows}{$_}{x}
                             && ($g eq 'all' || ($group{$_} // '') eq $g) }
                      sort keys %{ $m{flows} };
            ($x->{worst}) = sort { $m{flows}{$a}{x} <=> $m{flows}{$b}{x} } @ids;
            $x->{worst_x} = $m{flows}{ $x->{worst} }{x} if defined $x->{worst};
        }
        my %fo = map { %{ $_->{$k}{foreign} || {} } } @R;
        for my $fk (keys %fo) {
            $m{foreign}{$fk} = median(map { $_->{$k}{foreign}{$fk} } @R);
        }
        for my $f (qw(crowd_looks looks early churn_done churn_bad churn_addrs
                      relay_late_pct ss_max_s)) {
            $m{$f} = median(map { $_->{$k}{$f} } @R);
        }
        $m{crowd_looks_max} = max_of(map { $_->{$k}{crowd_looks} } @R);
        $S{$k} = \%m;
    }
    $res->{summary} = \%S;
}

# --------------------------------------------------------------- report --

sub xr { defined $_[0] ? sprintf('%.*fx', $_[1] // 2, $_[0]) : 'n/a' }
sub fmt1 { defined $_[0] ? sprintf('%.1f', $_[0]) : 'n/a' }

sub cell_keys {
    my $r = shift;
    return grep { $r->{cells}{$_} } map { my $c = $_; map { "$c->{name}/$_" } qw(bbr cubic stock) } @CELLS;
}

sub section {
    my $r = $RES{internet} or return { title => 'The Internet\'s shapes', tables => [] };
    my (@rows, @frows, %cfgs);
    for my $key (cell_keys($r)) {
        my $cell = $r->{cells}{$key};
        my $n = @{ $cell->{rounds} };
        my $name = "`$key`" . ($n > 1 ? " (median of $n)" : '');
        my @labels = map { $_->{id} } @{ $cell->{flows} };
        for my $k (@{ $cell->{runs} }) {
            my $m = $cell->{summary}{$k} or next;
            $cfgs{ (split ' ', $k)[0] } = 1;
            for my $g ('all', grep { $_ ne 'all' } sort keys %{ $m->{groups} }) {
                my $x = $m->{groups}{$g} or next;
                next if $g ne 'all' && keys %{ $m->{groups} } == 2;
                push @rows, [ $name, "`$k`", $g, $x->{n} // '', mbit($x->{bps}),
                    xr($x->{bps_x}, 3),
                    defined $x->{worst_x} ? sprintf('%s (%s)', xr($x->{worst_x}, 2), $x->{worst}) : 'n/a',
                    mib($x->{sumtb}), xr($x->{sumtb_x}), fmt1($x->{srtt_ms}), xr($x->{srtt_ms_x}),
                    ratio3($x->{jain}),
                    $g eq 'all' ? sprintf('%d of %d', $m->{crowd_looks} // 0, $m->{looks} // 0) : '',
                    $g ne 'all' && defined $x->{foreign_bps}
                        ? sprintf('%s (%s, %s)', mbit($x->{foreign_bps}),
                                  ratio3($x->{share}), xr($x->{share_x}))
                        : '' ];
            }
        }
        next if @labels > 20;
        for my $fl (@{ $cell->{flows} }) {
            my @c;
            for my $k (@{ $cell->{runs} }) {
                my $x = ($cell->{summary}{$k}{flows} || {})->{ $fl->{id} } or next;
                push @c, sprintf('`%s` %s (%s) tb %s KiB srtt %s', $k, mbit($x->{bps}),
                                 xr($x->{x}), kib($x->{tb}), fmt1($x->{srtt_ms}));
            }
            push @frows, [ "`$key`", $fl->{id}, $fl->{label}, join('; ', @c) ];
        }
    }
    my $any = (values %{ $r->{cells} })[0] || {};
    my ($W0, $W1, $D) = @{ $any->{window} || [] };
    return { title => 'The Internet\'s shapes',
        intro => sprintf('Each client behind an access link of its own (its '
            . 'rate, drop-tail queue and extra RTT), behind a shared %d Mbit/s, '
            . '%d ms link that is not the bottleneck; users behind one NAT address '
            . 'on different paths (by source port). Cells: %s. Goodput from the '
            . 'server\'s `ss` (bytes_acked) over %s-%s s of each %s s run; Σtb, '
            . 'tb summed over the group\'s sockets and averaged over the samples; '
            . 'srtt, the median of the downloads\' mean srtt; crowd looks, the '
            . 'looks of the module (trace2) at which a download\'s shortfall was '
            . 'excused as a share its crowd took (`in a crowd`), of all its '
            . 'looks. `vs nomod`: against autotuning (the module not loaded) in '
            . 'the same round, or for `... alone` runs against autotuning\'s crowd '
            . 'alone. Wall time of the part: %.0f s.',
            $MAIN{rate}, $MAIN{rtt},
            join('; ', map { "`$_->{name}`: $_->{label}" } @CELLS),
            $W0 // '?', $W1 // '?', $D // '?', $r->{wall_s} // 0)
            . "\n\n" . config_legend(grep { $cfgs{$_} } @CONFIG_ORDER),
        tables => [
            { title => 'Internet: cells', h => 3,
              head => ['cell/profile', 'run', 'group', 'downloads', 'goodput Mbit/s',
                       'vs `nomod`', 'worst download vs `nomod`', 'Σtb MiB',
                       'vs `nomod`', 'srtt ms', 'vs `nomod`', 'Jain',
                       'crowd looks',
                       'beside: other flows Mbit/s (the group\'s share, vs `nomod`)'],
              align => 'lllrrrlrrrrrll', rows => \@rows },
            @frows ? { title => 'Internet: each download', h => 3,
              head => ['cell/profile', 'download', 'its link', 'per run: goodput Mbit/s (vs `nomod`), tb, srtt ms'],
              align => 'llll', rows => \@frows } : () ] };
}

# The issue's targets, for auto, in every cell that ran.
sub targets {
    my ($push) = @_;
    my $r = $RES{internet} or return;
    for my $key (cell_keys($r)) {
        my $cell = $r->{cells}{$key};
        my $S = $cell->{summary};
        for my $k (grep { /^auto\b/ } @{ $cell->{runs} }) {
            next if $k =~ / alone$/;
            my $m = $S->{$k};
            my $t = sub { my ($what, $want, $got, $ok, $note) = @_;
                $push->("internet $key `$k`: $what", $want, $got,
                        defined $ok ? 0 + !!$ok : undef, $note) };
            my $g = sub { $m->{groups}{ $_[0] } || {} };
            my $each = sub { my ($grp, $min, $what) = @_;
                my $x = $g->($grp);
                $t->($what, sprintf('>= %.2fx', $min), xr($x->{worst_x}),
                     defined $x->{worst_x} ? $x->{worst_x} >= $min : undef,
                     defined $x->{worst} ? "the worst: $x->{worst}" : '') };
            my $c = $cell->{cell};
            if ($c =~ /^nat/) {
                $each->('all', 0.95, 'each user vs autotuning');
            }
            elsif ($c eq 'inet20' || $c =~ /^scale/) {
                $each->('all', 0.95, 'every client vs autotuning');
                if ($c eq 'inet20') {
                    my $all = $g->('all');
                    $t->('total vs autotuning', '>= 0.98x', xr($all->{bps_x}, 3),
                         defined $all->{bps_x} ? $all->{bps_x} >= 0.98 : undef);
                    $t->('Σtb vs autotuning', '<= 0.3x', xr($all->{sumtb_x}),
                         defined $all->{sumtb_x} ? $all->{sumtb_x} <= 0.3 : undef);
                    $t->('median srtt vs autotuning', '<= 0.8x', xr($all->{srtt_ms_x}),
                         defined $all->{srtt_ms_x} ? $all->{srtt_ms_x} <= 0.8 : undef);
                }
                else {
                    $t->('looks excused by a crowd (none shares a link)', '0',
                         $m->{crowd_looks_max} // 'n/a',
                         defined $m->{crowd_looks_max} ? $m->{crowd_looks_max} == 0 : undef,
                         sprintf('of %s looks (the most of any round)', $m->{looks} // 0));
                }
            }
            elsif ($c =~ /^home/) {
                $each->('busy', 0.9, 'busy homes vs autotuning beside the same flow');
                $each->('quiet', 0.95, 'quiet homes vs autotuning');
            }
            elsif ($c eq 'office') {
                my $o = $g->('office');
                $t->('the office\'s total vs autotuning', '>= 0.95x', xr($o->{bps_x}, 3),
                     defined $o->{bps_x} ? $o->{bps_x} >= 0.95 : undef);
                $t->('Jain within the office', '>= 0.95', ratio3($o->{jain}),
                     defined $o->{jain} ? $o->{jain} >= 0.95 : undef);
                $t->('the office\'s Σtb vs autotuning', '<= 0.5x', xr($o->{sumtb_x}),
                     defined $o->{sumtb_x} ? $o->{sumtb_x} <= 0.5 : undef);
                $each->('others', 0.95, 'the 10 others vs autotuning');
            }
            elsif ($c eq 'twocrowds') {
                my $ga = $g->('A');
                my ($alone) = $S->{"$k alone"} ? ($S->{"$k alone"}{groups}{A} || {}) : ({});
                $t->('crowd A\'s goodput vs alone', '>= 0.95x', xr($ga->{bps_alone}, 3),
                     defined $ga->{bps_alone} ? $ga->{bps_alone} >= 0.95 : undef);
                $t->('crowd A\'s Σtb vs alone', '<= 1.25x', xr($ga->{sumtb_alone}),
                     defined $ga->{sumtb_alone} ? $ga->{sumtb_alone} <= 1.25 : undef,
                     sprintf('%s MiB against %s', mib($ga->{sumtb}), mib($alone->{sumtb})));
                $t->('crowd A\'s median srtt vs alone', '<= 1.1x', xr($ga->{srtt_ms_alone}),
                     defined $ga->{srtt_ms_alone} ? $ga->{srtt_ms_alone} <= 1.1 : undef,
                     sprintf('%s ms against %s', fmt1($ga->{srtt_ms}), fmt1($alone->{srtt_ms})));
                $t->('crowd A\'s Jain vs alone', '>= alone - 0.03', ratio3($ga->{jain}),
                     defined $ga->{jain} && defined $alone->{jain}
                         ? $ga->{jain} >= $alone->{jain} - 0.03 : undef,
                     'alone ' . ratio3($alone->{jain}));
            }
        }
    }
}

1;
