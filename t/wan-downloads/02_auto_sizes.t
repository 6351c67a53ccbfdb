# The proof of `SndbufTune auto`, over the WAN lab: 20 Mbit/s, 100 ms
# RTT (BDP = 20e6/8 x 0.1 = 250000 bytes). Apache in the server namespace,
# curl in the client namespace; the kernel's view is ss -tmi in the server
# namespace, sampled while each download runs.
# ALONE and FACTOR are the suite's own (WanLab.pm; the law: a flow alone
# is never below SO_SNDBUF = ALONE x rate x min RTT, 11/8, and with no
# queue is sized FACTOR x rate x (srtt + rttvar + 1 ms), 7/8, which is
# less here; Linux doubles it). auto leaves slow start to kernel
# autotuning and takes the buffer over once the rate levels off, so the
# downloads are long enough for that (about 130 RTTs: on a loaded machine
# the lab's late packets look like a queue, and auto comes down from the
# ramp in small steps; at 65 RTTs it once took over only at 5.1 s of 7.6):
#   configured (SndbufTuneBandwidth 20mbit): auto takes the kernel's
#     buffer (ss tb) over from slow start in the first half of the
#     download (a sample within +-25% of 2 x ALONE x BDP, WanLab's
#     alone_tb); once settled (no retransmission for 16 RTTs: a flow
#     recovering from slow start's losses is sized for more, WanLab's
#     settled), the median tb is within +-25% of that and every sample
#     within [0.75, 1.5] x it: the floor holds under a queue the load
#     makes. The earlier law's lock at the window (2 x cwnd x mss, BBR's
#     cwnd 2 x BDP) measured 3.1 x that; a floor of half (FACTOR x rate
#     x RTT then sizes the flow) 0.65 x, one of twice 2 x;
#     the module's notes obey the law (REQUESTED at least 15/16 of ALONE
#     x BW_BPS x RTT_US, all three as it logged them: the minimum RTT
#     only falls, so no look's floor was lower, and a re-tune waits for a
#     change of up to 1/16; at most 1.25 x the larger of that and FACTOR
#     x BW x the RTT the flow saw last);
#   measured (no bandwidth configured), a long download: the same against
#     2 x ALONE x the measured BDP (ss delivery_rate x ss minrtt), the
#     takeover within the first three quarters, and once tuned the flow
#     leaves the bottleneck's queue (one BDP) at most half full: median
#     ss rtt <= 1.5 x minrtt;
#   both: the access-log notes agree with ss (SNDBUF_TUNE_EFFECTIVE == the
#     last tb, == 2 x REQUESTED; RTT_US within 5% of ss minrtt; BW_BPS the
#     configured rate, or within 25% of ss's delivery rate; RETUNES at least
#     the number of size changes ss saw);
#   every download completes intact (length and SHA-256).
# Sizes and kernel state only; no wall-clock assertions. Needs root and
# /dev/net/tun (skips otherwise; fails instead when $CI is set).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::WanLab qw(plan_lab_or_skip tb_changes tuned_from median
                          rel_diff alone_tb tb_ratios settled AUTO_FACTOR
                          AUTO_ALONE);

plan_lab_or_skip();
plan tests => 3;

use constant RATE_BPS => 20_000_000;
use constant RTT_MS => 100;
use constant BAND => 0.25;
my %size = (configured => 32 << 20, measured => 32 << 20);

my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
    tag => '2', rtt_ms => RTT_MS, rate_mbit => RATE_BPS / 1e6,
    files => { map { ("/$_.bin" => $size{$_}) } keys %size },
    server => { name => 'auto', body => <<'EOF' });
<VirtualHost @LISTEN@>
    ServerName configured.test
    SndbufTune auto
    SndbufTuneBandwidth 20mbit
</VirtualHost>
<VirtualHost @LISTEN@>
    ServerName measured.test
    SndbufTune auto
</VirtualHost>
EOF

sub fetch {
    my $name = shift;
    return $lab->download_ok(srv => $srv, path => "/$name.bin",
                             host => "$name.test", size => $size{$name},
                             sha => $sha->{"/$name.bin"}, samples => 10);
}

# Once auto has the buffer (from the sample tuned_from finds, which must
# come by $by x the download) and the flow has settled: the median of tb
# / $want (alone_tb) within the band, and every sample within [0.75, 1.5]
# x $want (the floor, with room for a measured rate's noise).
sub tuned_ok {
    my ($ss, $want, $what, $by) = @_;
    my $i = tuned_from($ss, $want, BAND);
    ok(defined $i && $i < @$ss * $by, sprintf 'auto took over from slow '
       . 'start by t=%.1fs (sample %d of %d)', defined $i ? $ss->[$i][0] : -1,
       $i // -1, scalar @$ss);
    $i //= $#$ss;
    my @calm = settled($ss, $i, RTT_MS / 1000);
    diag(sprintf '%d of %d samples from the takeover settled, from t=%.1fs',
         scalar @calm, @$ss - $i, @calm ? $ss->[$calm[0]][0] : -1);
    cmp_ok(scalar @calm, '>=', 10, 'settled for 10 samples or more');
    my @r = tb_ratios($ss, $want, @calm);
    my $r = median(@r) // 0;
    ok(abs($r - 1) <= BAND, sprintf 'median tb of the settled samples is '
       . "%.2f x the law's (%s) (within +-25%%)", $r, $what);
    my @off = grep { $_ < 0.75 || $_ > 1.5 } @r;
    is(scalar @off, 0, "every settled sample within [0.75 x law, 1.5 x law]")
        or diag('outside (x law): ' . join ' ', map { sprintf '%.2f', $_ }
                @off);
    diag(sprintf 'settled tb / law: %.2f .. %.2f', (sort { $a <=> $b } @r)[0]
         // 0, (sort { $b <=> $a } @r)[0] // 0);
    return $i;
}

# The access-log notes against what ss showed.
sub notes_agree {
    my ($d, %want) = @_;
    my $e = $srv->access_entry_for($d->{port});
    ok($e, 'access-log entry for the download') or return;
    my $last = $d->{ss}[-1][1];
    is($e->{policy}, 'auto', 'logged policy auto');
    is($e->{effective}, $last->{tb},
       'SNDBUF_TUNE_EFFECTIVE == tb in the last ss sample');
    is($e->{effective}, 2 * ($e->{requested} // 0),
       'SNDBUF_TUNE_EFFECTIVE == 2 x SNDBUF_TUNE_REQUESTED');
    my $minrtt = $last->{minrtt_us};
    ok(defined $e->{rtt_us} && rel_diff($e->{rtt_us}, $minrtt) <= 0.05,
       "SNDBUF_TUNE_RTT_US $e->{rtt_us} within 5% of ss minrtt ${minrtt}us");
    if (defined $want{bw_bps}) {
        is($e->{bw_bps}, $want{bw_bps}, "SNDBUF_TUNE_BW_BPS == $want{bw_bps}");
    }
    else {
        ok(defined $e->{bw_bps}
           && rel_diff($e->{bw_bps}, $want{delivery_bps}) <= 0.25,
           "SNDBUF_TUNE_BW_BPS $e->{bw_bps} within 25% of ss delivery rate "
           . int($want{delivery_bps}));
    }
    # ss also sees autotuning's steps before auto takes over: count from
    # the first sample in the band
    my @mine = @{ $d->{ss} }[($want{tuned_at} // 0) .. $#{ $d->{ss} }];
    my $changes = tb_changes(\@mine) - 1;
    cmp_ok($e->{retunes} // -1, '>=', $changes,
           "SNDBUF_TUNE_RETUNES ($e->{retunes}) >= size changes ss saw "
           . "once tuned ($changes)");
    cmp_ok($e->{retunes} // -1, '>=', $want{min_retunes},
           "SNDBUF_TUNE_RETUNES >= $want{min_retunes}")
        if $want{min_retunes};
    return $e;
}

subtest 'configured: SndbufTuneBandwidth 20mbit' => sub {
    my $d = fetch('configured');
    my $i = tuned_ok($d->{ss}, alone_tb(RATE_BPS / 8, RTT_MS / 1000),
                     "2 x ${\ AUTO_ALONE} x BDP", 1 / 2);
    my $e = notes_agree($d, bw_bps => RATE_BPS, tuned_at => $i,
                        min_retunes => 1) or return;
    # the law in the module's own figures: a flow alone is never below
    # ALONE x BW x RTT_US (the minimum, which only falls: no look's floor
    # was lower), kept within the re-tune hysteresis of 1/16; with no
    # queue it is sized FACTOR x BW x the RTT it sees (its smoothed RTT,
    # variation and 1 ms of refill; ss's last sample), where that is
    # larger
    my $lo = AUTO_ALONE * $e->{bw_bps} / 8 * $e->{rtt_us} / 1e6;
    my $last = $d->{ss}[-1][1];
    my $seen = ($last->{rtt_us} // 0) + ($last->{rttvar_us} // 0) + 1000;
    my $hi = AUTO_FACTOR * $e->{bw_bps} / 8 * $seen / 1e6;
    $hi = $lo if $hi < $lo;
    ok($e->{requested} >= 15 / 16 * $lo
       && $e->{requested} <= (1 + BAND) * $hi,
       sprintf 'SNDBUF_TUNE_REQUESTED %d from 15/16 x %s x BW_BPS/8 x '
       . 'RTT_US (%d) to 1.25 x the larger of that and %s x BW_BPS/8 x '
       . 'the RTT seen, %d us (%d)', $e->{requested}, AUTO_ALONE, $lo,
       AUTO_FACTOR, $seen, $hi);
};

subtest 'measured: no SndbufTuneBandwidth, a long download' => sub {
    my $d = fetch('measured');
    my @ss = @{ $d->{ss} };
    my $last = $ss[-1][1];
    # the measured BDP: ss delivery_rate (median over the last third of the
    # download, the tail sample excluded) x ss minrtt
    my @tail = @ss[int(@ss * 2 / 3) .. $#ss - 1];
    my $rate = median(map { $_->[1]{delivery_rate} } @tail);
    my $bdp = $rate / 8 * $last->{minrtt_us} / 1e6;
    diag(sprintf 'measured: delivery_rate %.2f Mbit/s x minrtt %.1f ms = '
         . 'BDP %d bytes', $rate / 1e6, $last->{minrtt_us} / 1000, $bdp);
    # by three quarters: on a starved CPU the lab's relay delays packets,
    # auto sees that as a queue and comes down from the ramp in small
    # steps (with the earlier 16 MB download: sample 30-36 of 76 here,
    # once 50 of 75 under three CPU hogs)
    my $i = tuned_ok(\@ss, alone_tb($rate / 8, $last->{minrtt_us} / 1e6),
                     "2 x ${\ AUTO_ALONE} x measured BDP", 3 / 4);
    # the bottleneck's queue (one BDP) is what a buffer above the law
    # fills, doubling the RTT: once tuned, the flow keeps it at most half
    # full.  Halfway, not nearer: a loaded CPU delays the lab's relay too
    # (1.32 once in a fresh-clone CI run, 2026-12-04)
    my @rtt = map { $_->[1]{rtt_us} } @ss[$i .. $#ss];
    my $q = median(@rtt) / $last->{minrtt_us};
    ok($q <= 1.5, sprintf 'once tuned: median ss rtt %.1f ms is %.2f x '
       . 'minrtt (<= 1.5: the bottleneck queue stays short)',
       median(@rtt) / 1000, $q);
    notes_agree($d, delivery_bps => $rate, min_retunes => 1, tuned_at => $i);
};

$srv->stop;
$lab->down;
