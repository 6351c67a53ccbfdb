# `SndbufTune auto` in a crowd of many clients: 20 bbr downloads through
# one 100 Mbit/s, 100 ms bottleneck (a drop-tail queue of one BDP), each
# from its own client address (the lab's --clients), served by one event
# child. A download site's crowd is many addresses; auto must see it as one
# crowd whatever the addresses, and steer it by the queue as it does a
# crowd from one address:
#   1. 20 downloads from 20 addresses: Σw (skmem w summed over the
#      server's sockets, averaged over the samples) at most 6 MiB, and the
#      sockets' mean srtt at most the min RTT + 60 ms. Autotuning keeps
#      16-20 MiB there and today's auto 11 MiB, both at 195 ms (bbr fills
#      the queue: 10-12% of the segments retransmitted); a fixed 64k 2.1
#      MiB and 131 ms.
#   2. The same beside one cubic bulk flow Apache does not serve, started
#      5 s before: Σw at most 6 MiB (autotuning 27 MiB, today's auto 11-13,
#      a fixed 64k 2.1), the crowd keeps at least 0.7 of what both deliver,
#      and the other flow at least 1 Mbit/s (a fifth of a fair share:
#      beside autotuning it starves, 0.2 Mbit/s; beside a fixed 64k it
#      gets 16-21). No srtt bound: cubic fills the queue whatever the
#      crowd does (a fixed 64k's crowd sees 155-165 ms).
#   3. 20 downloads from ONE address beside a cubic bulk flow: the crowd
#      keeps at least 0.8 of what both deliver (N/(N+1) = 0.95 is fair,
#      0.9 of it 0.857; today's auto steers that crowd down to 0.48-0.69,
#      a scavenger, and once in seven runs kept 0.775; a fixed 64k keeps
#      0.78-0.84).
# Figures over t = 10..29 s of 30 s from the first download's start (ss in
# the server namespace every 0.5 s). Bounds a loaded 2-core machine cannot
# break: they sit between autotuning's figures and a fixed size's.
#
# Until auto recognises a crowd of many addresses, the bounds today's
# module breaks are TODO tests (prove reports them as "TODO passed" once
# they pass); set SBT_CROWDS=1 to run them as plain tests. The crowd's
# share in 2 (autotuning keeps it already), and what the lab itself must
# give (20 distinct peers, every download running through the window, the
# bulk flow seen) are plain tests. Needs root and /dev/net/tun.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::WanLab qw(plan_lab_or_skip);

plan_lab_or_skip();
plan tests => 16;

use constant N => 20;
use constant SECS => 30;
use constant FROM => 10;
use constant TO => 29;
use constant LEAD => 5;
use constant PORT => 5201;
use constant WSUM_MAX => 6 << 20;
use constant SRTT_OVER_MS => 60;

our $TODO;
my $todo = $ENV{SBT_CROWDS} ? undef
    : 'auto does not yet recognise a crowd of many client addresses';

my ($lab, $srv) = SndbufTune::WanLab->lab_with_server(
    tag => '8', rtt_ms => 100, rate_mbit => 100, clients => N,
    server => { name => 'crowds', body => "SndbufTune auto\n",
                processes => 1, log_level => 'warn' });
truncate $srv->add_file('/big.bin', ''), 4 << 30 or die "truncate: $!";
my @addrs = $lab->client_addrs;

# N downloads (from one address, or each from its own), beside a cubic
# bulk flow if $foreign; their figures over the window.
sub crowd {
    my (%a) = @_;
    my $bulk;
    if ($a{foreign}) {
        $bulk = $lab->bulk_start(cc => 'cubic', port => PORT,
                                 seconds => SECS + LEAD + 10);
        sleep LEAD;
    }
    my @jobs = map {
        $lab->curl_start(url => $srv->url('/big.bin'), max_time => SECS + 30,
                         source => $addrs[ $a{one} ? 0 : $_ ])
    } 0 .. N - 1;
    my ($samples) = $lab->sample_crowd(jobs => \@jobs, seconds => SECS,
                                       foreign_port => PORT);
    $lab->curl_kill($_) for @jobs;
    my $ended = grep { defined $_->{exitcode} } map { $lab->curl_wait($_) } @jobs;
    $lab->bulk_stop($bulk) if $bulk;
    my $f = SndbufTune::WanLab->crowd_figures(
        $samples, { map { $_->{local_port} => 'crowd' } @jobs }, FROM, TO);
    diag(sprintf '%s: %.1f Mbit/s, Jain %.3f, Σw %.2f MiB, srtt %.1f ms '
         . '(min RTT %.1f), %.2f%% retransmitted%s', $a{name},
         $f->{agg_bps} / 1e6, $f->{jain} // 0, ($f->{wsum_avg} // 0) / 1048576,
         $f->{srtt_ms} // 0, $f->{minrtt_ms} // 0, 100 * ($f->{rtx} // 0),
         $bulk ? sprintf(', the other flow %.2f Mbit/s, the crowd\'s share %.3f',
                         ($f->{foreign_bps} // 0) / 1e6, $f->{share} // 0) : '');
    is($f->{peers}, $a{one} ? 1 : N, "$a{name}: ss saw the crowd from "
       . ($a{one} ? 'one address' : N . ' addresses'));
    is($ended, 0, "$a{name}: every download ran through the window");
    ok(defined $f->{foreign_bps}, "$a{name}: the bulk flow was sampled")
        if $bulk;
    return $f;
}

# Σw within a bound autotuning breaks.
sub wsum_ok {
    my ($name, $f) = @_;
    local $TODO = $todo;
    cmp_ok($f->{wsum_avg} // 1e12, '<=', WSUM_MAX,
           sprintf("$name: Σw %.2f MiB at most %d MiB",
                   ($f->{wsum_avg} // 0) / 1048576, WSUM_MAX >> 20));
}

my $many = crowd(name => N . ' addresses');
wsum_ok(N . ' addresses', $many);
{
    local $TODO = $todo;
    cmp_ok($many->{srtt_ms} // 1e9, '<=', ($many->{minrtt_ms} // 0) + SRTT_OVER_MS,
           sprintf('%d addresses: mean srtt %.1f ms at most min RTT %.1f + %d ms',
                   N, $many->{srtt_ms} // 0, $many->{minrtt_ms} // 0,
                   SRTT_OVER_MS));
}

my $beside = crowd(name => N . ' addresses beside cubic', foreign => 1);
wsum_ok(N . ' addresses beside cubic', $beside);
# autotuning's crowd keeps it already: a plain test (a crowd steered to
# yield must not become the scavenger that case 3 is about)
cmp_ok($beside->{share} // 0, '>=', 0.7, sprintf(
       "the crowd of %d addresses keeps %.3f of the link beside cubic, "
       . "at least 0.7", N, $beside->{share} // 0));
{
    local $TODO = $todo;
    cmp_ok($beside->{foreign_bps} // 0, '>=', 1e6, sprintf(
           'the cubic flow beside it gets %.2f Mbit/s, at least 1',
           ($beside->{foreign_bps} // 0) / 1e6));
}

my $one = crowd(name => 'one address beside cubic', foreign => 1, one => 1);
{
    local $TODO = $todo;
    cmp_ok($one->{share} // 0, '>=', 0.8, sprintf(
           "the crowd from one address keeps %.3f of the link beside cubic, "
           . "at least 0.8", $one->{share} // 0));
}

ok($srv->stop, 'apache2 stopped') or diag($srv->error);
$lab->down;
