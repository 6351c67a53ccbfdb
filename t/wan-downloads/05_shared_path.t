# A configured rate on a path the downloads share: `SndbufTune auto` with
# `SndbufTuneBandwidth 20mbit`, and 10 downloads at once over the WAN lab's
# 20 Mbit/s, 100 ms (BDP 250000 bytes). Each flow gets about a tenth of
# the configured rate, so auto sizes it from its measured rate (a flow
# that gets less than half a configured rate shares its path): over the
# second half of each download (auto has taken over from slow start
# long before: 32 RTTs at most), ss shows
#   - the median tb of each flow at most half of what the configured rate
#     gives (2 x FACTOR x BDP), for at least 9 of the 10 flows;
#   - the summed median tb of all flows but the largest below that of
#     three flows sized for the configured rate (under load one flow may
#     have the path to itself through its ramp, and keep a peak rate above
#     half the configured one: the check above allows it). Under a queue
#     each flow settles where it keeps STEP (8 MSS) in it: 2 x STEP x RTT
#     / queue of tb, so nine of ten sum to about 2 x 0.9 x (BDP + 10 x
#     STEP) = 2.6 BDP at most (the step shrinks past a quarter of the
#     minimum RTT of queue), two such flows being 3.5 BDP; CI saw 3.53 BDP
#     (flows still shrinking), so the bound is three (5.25 BDP). Sized
#     for the configured rate, nine flows hold 15.75 BDP;
# and every download is intact, and logged SNDBUF_TUNE_BW_BPS below half
# the configured rate on all but one of the seven that finish first (the
# last three end with the path to themselves or beside one or two
# others). A module that sizes every flow for the configured rate holds
# each near 2 x FACTOR x BDP and fails all three checks.
# Kernel state and the module's notes only; no wall-clock assertions.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use Test::More;
use SndbufTune::Util qw(sha256_file);
use SndbufTune::WanLab qw(plan_lab_or_skip median AUTO_FACTOR);

plan_lab_or_skip();
plan tests => 5;

use constant DOWNLOADS => 10;
use constant SIZE => 4 << 20;
use constant RATE_BPS => 20_000_000;
use constant RTT_MS => 100;
my $LAW = 2 * AUTO_FACTOR * RATE_BPS / 8 * RTT_MS / 1000;

my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
    tag => '5', rtt_ms => RTT_MS, rate_mbit => RATE_BPS / 1e6,
    files => { '/f.bin' => SIZE },
    server => { name => 'shared', body => <<'EOF' });
SndbufTune auto
SndbufTuneBandwidth 20mbit
EOF

my @out = map { File::Temp->new(TEMPLATE => '/tmp/sbt-shared-XXXXXX') }
    1 .. DOWNLOADS;
my @jobs = map { $lab->curl_start(url => $srv->url('/f.bin'),
                                  out => $out[$_]->filename, max_time => 180) }
    0 .. DOWNLOADS - 1;
my $series = SndbufTune::WanLab->series(
    $lab->sample_while(jobs => \@jobs, interval => 0.2));
my @r = map { $lab->curl_wait($_) } @jobs;

my $intact = grep { ($r[$_]{http_code} // '') eq '200'
                    && -s $out[$_]->filename == SIZE
                    && sha256_file($out[$_]->filename) eq $sha->{'/f.bin'} }
    0 .. DOWNLOADS - 1;
is($intact, DOWNLOADS, 'every download intact (length and SHA-256)');

# Each flow's median tb over the second half of its samples.
my @median = map {
    my $ss = $series->{ $_->{local_port} } || [];
    my @tb = grep { defined } map { $_->[1]{tb} } @$ss[@$ss / 2 .. $#$ss];
    @tb ? median(@tb) : undef } @jobs;
diag(sprintf 'median tb per flow (second half): %s; configured rate\'s '
     . 'law %d', join(' ', map { $_ // '-' } @median), $LAW);
my $small = grep { defined && $_ <= $LAW / 2 } @median;
cmp_ok($small, '>=', DOWNLOADS - 1,
       "median tb at most half the configured rate's law on $small of "
       . DOWNLOADS . ' flows');
my @sorted = sort { $a <=> $b } map { $_ // $LAW } @median;
my $sum = 0;
$sum += $_ for @sorted[0 .. $#sorted - 1];
cmp_ok($sum, '<', 3 * $LAW, "the median tb of all flows but the largest "
       . "sum to $sum, below three flows sized for the configured rate");

# The note is auto's last look. The last downloads to finish end with
# the path to themselves or nearly: there going back to the configured
# rate is right (CI saw the last one do it, a run here the last two).
# The third to last ends beside two others, a third of the path each on
# average (CI saw one of the first eight log half the configured rate or
# more, and did not say which; a run here saw the third to last log 9.4
# Mbit/s). The others ended in a crowd of four or more, a quarter of the
# path each (5 Mbit/s) or less, and must log less than half the
# configured rate, twice that share. One of them may not: the estimate
# holds a peak of the kernel's delivery rate, and under CPU load one
# flow of seven logged 9.0 Mbit/s beside six at 2.9-5.0 (ten runs here,
# none at 10). A module that sizes for the configured rate logs it on
# every download.
my @order = sort { $jobs[$a]{t1} <=> $jobs[$b]{t1} } 0 .. DOWNLOADS - 1;
my @crowd = @order[0 .. DOWNLOADS - 4];
my @e = map { $srv->access_entry_for($_->{local_port}) } @jobs;
my $shared = grep { $_ && defined $_->{bw_bps}
                    && $_->{bw_bps} < RATE_BPS / 2 } @e[@crowd];
# The rates go into the check's name: t/all's summary keeps that line.
my $logged = join ' ', map { $_ ? $_->{bw_bps} // '-' : '-' } @e[@order];
cmp_ok($shared, '>=', @crowd - 1, "SNDBUF_TUNE_BW_BPS below half the "
       . "configured rate on $shared of the " . @crowd . ' downloads that '
       . "ended in a crowd of four or more (all, in finishing order: "
       . "$logged)");

$srv->stop;
$lab->down;
