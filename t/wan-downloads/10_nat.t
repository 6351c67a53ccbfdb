# Two users behind one NAT address, on paths of their own: a shared
# address is not a shared path. The lab's client address 198.18.1.1
# stands for the NAT; its source ports 10000-19999 take a 50 Mbit/s link
# with 30 ms of base RTT, 20000-29999 a 50 Mbit/s link with 50 ms (one
# BDP of queue each; wanlab --sub-link ADDR/32,ports=LO-HI:...:delay=MS),
# both behind a 200 Mbit/s, 10 ms link that is not the bottleneck. Each
# user downloads with `SndbufTune auto` from one event child, both at
# once, for 19 s; ss in the server namespace every 0.5 s, figures over
# t = 7..18 s (delivery: ss `delivered` x `mss`).
#
# The lab first (its premise): ss sees both downloads from the one
# address, each at its own path's minimum RTT. Then what the module must
# give: each user at least 0.6 of what its link carries (rate x MSS/MTU;
# autotuning gets 0.97 of it here), and the 50 ms user at least 0.8 of
# what the 30 ms user gets (autotuning: 1.00). Bounds a loaded 2-core
# machine cannot break: load moves both users alike. The module that
# takes another connection's lower minimum RTT to the same address for
# its own (sndbuf_law.c, sndbuf_path.c) reads the 50 ms user's 20 ms of
# path as a queue and locks its buffer at about 21 KB: 8-9 Mbit/s, 0.18
# of its link and 0.21 of the other user's (bench/run --parts internet
# --cell nat). Needs root and /dev/net/tun.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::WanLab qw(plan_lab_or_skip goodput_limit_bps);

plan_lab_or_skip();
plan tests => 8;

use constant RATE_MBIT => 50;
use constant FROM => 7;
use constant SECS => 19;
use constant LINK_SHARE_MIN => 0.6;
use constant PAIR_MIN => 0.8;

# user => [base RTT ms, source ports]
my %USER = (u30 => [30, [10000, 19999]], u50 => [50, [20000, 29999]]);
my $NAT = '198.18.1.1';

# one BDP of queue at each user's RTT
my @subs = map {
    my ($rtt, $p) = @{ $USER{$_} };
    sprintf '%s/32,ports=%d-%d:%d:%d:delay=%d', $NAT, @$p, RATE_MBIT,
        RATE_MBIT * 1e6 / 8 * $rtt / 1e3, $rtt - 10
} sort keys %USER;
my ($lab, $srv) = SndbufTune::WanLab->lab_with_server(
    tag => 'a', rtt_ms => 10, rate_mbit => 200, clients => 1,
    sub_links => \@subs,
    server => { name => 'nat', body => "SndbufTune auto\n", processes => 1,
                log_level => 'warn' });
truncate $srv->add_file('/big.bin', ''), 4 << 30 or die "truncate: $!";

my %job = map {
    $_ => $lab->curl_start(url => $srv->url('/big.bin'), max_time => SECS + 30,
                           source => $NAT, port_range => $USER{$_}[1])
} sort keys %USER;
my ($samples) = $lab->sample_crowd(jobs => [values %job], seconds => SECS);
$lab->curl_kill($_) for values %job;
my $ended = grep { defined $_->{exitcode} } map { $lab->curl_wait($_) } values %job;
my %group = map { $job{$_}{local_port} => $_ } keys %job;
my $f = SndbufTune::WanLab->crowd_figures($samples, \%group, FROM, SECS - 1);
my %u = %{ $f->{groups} };
my $limit = goodput_limit_bps(RATE_MBIT * 1e6, 1500);
diag(sprintf '%s: %.1f Mbit/s (%.2f of the link), min RTT %.1f ms, srtt %.1f ms',
             $_, $u{$_}{agg_bps} / 1e6, $u{$_}{agg_bps} / $limit,
             $u{$_}{minrtt_ms} // 0, $u{$_}{srtt_ms} // 0) for sort keys %u;

is($f->{peers}, 1, 'ss saw both users from one address');
is($ended, 0, 'both downloads ran through the window');
for my $id (sort keys %USER) {
    my $rtt = $USER{$id}[0];
    my $m = $u{$id}{minrtt_ms} // 0;
    ok($m >= $rtt && $m <= $rtt * 1.2 + 2,
       sprintf('%s has its own path: min RTT %.1f ms, set %d ms', $id, $m, $rtt));
}
my ($worst) = sort { $u{$a}{agg_bps} <=> $u{$b}{agg_bps} } keys %u;
cmp_ok($u{$worst}{agg_bps} / $limit, '>=', LINK_SHARE_MIN,
       sprintf('each user gets at least %.1f of its link (the slower, %s: '
               . '%.1f Mbit/s of %.1f)', LINK_SHARE_MIN, $worst,
               $u{$worst}{agg_bps} / 1e6, $limit / 1e6));
cmp_ok($u{u50}{agg_bps} / ($u{u30}{agg_bps} || 1), '>=', PAIR_MIN,
       sprintf('the 50 ms user gets at least %.1f of the 30 ms user\'s '
               . '(%.1f against %.1f Mbit/s)', PAIR_MIN,
               $u{u50}{agg_bps} / 1e6, $u{u30}{agg_bps} / 1e6));

ok($srv->stop, 'apache2 stopped') or diag($srv->error);
$lab->down;
