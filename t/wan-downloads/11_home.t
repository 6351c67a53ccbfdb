# Homes whose link carries another sender's bulk flow: a download must not
# become that flow's scavenger. Six client addresses, each a home behind
# its own 20 Mbit/s link with 100 ms of base RTT and two BDPs of
# drop-tail queue (wanlab --sub-link ADDR/32:20:500000:delay=90), behind a
# 200 Mbit/s, 10 ms link that is not the bottleneck. Into three of them a
# bbr bulk flow Apache does not serve (wanperf, bbr on its socket, as a
# video service's would be) starts 5 s before the downloads; then each of
# the six homes downloads from `SndbufTune auto` (bbr, one event child);
# ss in the server namespace every 0.5 s for 22 s, figures over t = 8..21
# s (delivery: ss `delivered` x `mss`, the bulk flows' from their own
# server sockets).
#
# The busy homes' downloads' share of what their links delivered, summed
# over the three: at least 0.2. Autotuning's downloads keep 0.35 there
# (bbr against bbr, both at 100 ms; 0.35-0.46 in this lab); the module
# that takes the homes' queues for a crowd of its flows (three busy homes
# beside three quiet ones; with fewer it did not) locks each busy home's
# download near its floor: about 2 Mbit/s, a share of 0.12 (bench/run
# --parts internet --cell home-bbr). A share is a ratio of two flows on
# one link, which load moves alike. Needs root and /dev/net/tun.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::WanLab qw(plan_lab_or_skip);

plan_lab_or_skip();

use constant HOMES => 3;
use constant QUIET => 3;
use constant LEAD => 5;
use constant FROM => 8;
use constant SECS => 22;
use constant SHARE_MIN => 0.2;
use constant BULK_PORT => 5201;

plan tests => 5;

my @homes = map { "198.18.1.$_" } 1 .. HOMES;
my @quiet = map { "198.18.1.$_" } HOMES + 1 .. HOMES + QUIET;
my ($lab, $srv) = SndbufTune::WanLab->lab_with_server(
    tag => 'b', rtt_ms => 10, rate_mbit => 200, clients => HOMES + QUIET,
    sub_links => [ map { "$_/32:20:500000:delay=90" } @homes, @quiet ],
    server => { name => 'home', body => "SndbufTune auto\n", processes => 1,
                log_level => 'warn' });
truncate $srv->add_file('/big.bin', ''), 4 << 30 or die "truncate: $!";

my @bulk = map {
    $lab->bulk_start(cc => 'bbr', port => BULK_PORT + $_, from => $homes[$_],
                     seconds => SECS + LEAD + 10)
} 0 .. $#homes;
sleep LEAD;
my @jobs = map {
    $lab->curl_start(url => $srv->url('/big.bin'), max_time => SECS + 30,
                     source => $_)
} @homes, @quiet;
my ($samples) = $lab->sample_crowd(jobs => \@jobs, seconds => SECS,
    bulk_ports => [ map { BULK_PORT + $_ } 0 .. $#homes ]);
$lab->curl_kill($_) for @jobs;
my $ended = grep { defined $_->{exitcode} } map { $lab->curl_wait($_) } @jobs;
$lab->bulk_stop($_) for @bulk;

# per home: its download's and its bulk flow's delivery
my ($down, $other, $seen) = (0, 0, 0);
for my $i (0 .. $#homes) {
    my $d = SndbufTune::WanLab->crowd_figures($samples,
        { $jobs[$i]{local_port} => 'download' }, FROM, SECS - 1);
    my ($b) = SndbufTune::WanLab::steady_rate(
        [ map { [$_->{t}, $_->{bulk}{ BULK_PORT + $i }] }
          grep { $_->{bulk}{ BULK_PORT + $i } } @$samples ], FROM, SECS - 1);
    $b = 8 * ($b // 0);
    $seen++ if $b > 0;
    $down += $d->{agg_bps};
    $other += $b;
    diag(sprintf 'home %s: the download %.1f Mbit/s, the bulk flow %.1f, '
         . 'share %.2f; srtt %.1f ms', $homes[$i], $d->{agg_bps} / 1e6,
         $b / 1e6, $d->{agg_bps} / (($d->{agg_bps} + $b) || 1),
         $d->{srtt_ms} // 0);
}
my $share = $down / (($down + $other) || 1);
for my $i (0 .. $#quiet) {
    my $q = SndbufTune::WanLab->crowd_figures($samples,
        { $jobs[HOMES + $i]{local_port} => 'download' }, FROM, SECS - 1);
    diag(sprintf 'quiet home %s: the download %.1f Mbit/s; srtt %.1f ms',
         $quiet[$i], $q->{agg_bps} / 1e6, $q->{srtt_ms} // 0);
}

is($ended, 0, 'every download ran through the window');
is($seen, HOMES, 'ss saw every home\'s bulk flow deliver');
cmp_ok($share, '>=', SHARE_MIN,
       sprintf('the downloads keep %.2f of what the homes\' links '
               . 'delivered, at least %.2f (%.1f against the bulk flows\' '
               . '%.1f Mbit/s)', $share, SHARE_MIN, $down / 1e6, $other / 1e6));

ok($srv->stop, 'apache2 stopped') or diag($srv->error);
$lab->down;
