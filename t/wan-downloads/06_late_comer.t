# A late comer: `SndbufTune auto` reads the queue at a flow's bottleneck
# as its smoothed RTT beyond its minimum RTT. A flow that starts while
# others fill that queue takes its minimum through it and sees no queue
# at all. So auto takes the lowest minimum RTT another live connection to
# the same client address has measured (sndbuf_path.c), when it is at
# least half the flow's own (a bigger gap is more likely another path
# behind the address than a queue).
#
# Two labs of 30 Mbit/s, 100 ms (BDP 375000 bytes). In each, download A
# (auto) starts on the empty path; once ss shows it has data acknowledged,
# a cubic bulk flow (wanperf, not Apache) whose window the sink clamps
# keeps a standing queue at the bottleneck (as long as its cwnd stays
# above that window); when A's ss rtt shows it, download B (auto, 16 MB)
# starts from the same client address, through that queue. SndbufTuneLimits
# 4k 512k keeps both downloads off the ramp: a slow start lifted to 8 MiB
# overflowed the queue, cut the bulk flow's cwnd below its window, and the
# queue (and B's minimum) fell after auto's last look. The kernel's
# view (ss) of A and B against what auto sized B for (SNDBUF_TUNE_RTT_US):
#   - window 300000 (363 segments in flight: the receive window grows in
#     steps), about half a BDP of queue: B's own minrtt is 1.25-2 x A's
#     (the premise, checked); B's RTT_US is A's minrtt (within 10%), not
#     B's own, and auto re-tuned B (RETUNES > 0). The module before
#     sndbuf_path.c logged B's own minrtt.
#   - window 700000 (725 segments), about two BDPs of queue: B's own
#     minrtt is more than 2 x A's (checked); B keeps its own (RTT_US
#     within 10% of B's ss minrtt).
# B is intact both times. The server has one process: the minimum RTTs
# are shared within a process. Kernel state and the module's notes only;
# no wall-clock assertions.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use Time::HiRes ();
use Test::More;
use SndbufTune::Kernel qw(ss_sockets);
use SndbufTune::Util qw(poll_until sha256_file);
use SndbufTune::WanLab qw(plan_lab_or_skip rel_diff);

plan_lab_or_skip();
plan tests => 2 * 6 + 1;

use constant RATE_BPS => 30_000_000;
use constant RTT_MS => 100;
use constant SIZE_B => 16 << 20;
my $BDP = RATE_BPS / 8 * RTT_MS / 1000;

# ss's view of the server socket of $job, or undef.
sub view {
    my ($lab, $job) = @_;
    my ($v) = ss_sockets(ns => $lab->{ns_server}, sport => 80,
                         dport => $job->{local_port});
    return $v;
}

# Does the bulk flow keep a queue that will not drain while B runs? Its
# window is the limit (rwnd_limited grew by 0.9 s in the last second: no
# loss, no cwnd cut), and A's srtt is over $fill x A's minrtt.
my @rwnd;
sub standing_queue {
    my ($lab, $ja, $fill) = @_;
    my ($bulk) = ss_sockets(ns => $lab->{ns_server}, sport => 5201);
    my $va = view($lab, $ja);
    return 0 unless $bulk && $va && $va->{minrtt_us};
    push @rwnd, [Time::HiRes::time(), $bulk->{rwnd_limited_ms} // 0];
    shift @rwnd while $rwnd[-1][0] - $rwnd[0][0] > 1.05;
    return $rwnd[-1][0] - $rwnd[0][0] >= 0.95
           && $rwnd[-1][1] - $rwnd[0][1] >= 900
           && $va->{rtt_us} > $fill * $va->{minrtt_us};
}

# A on the empty path, the queue filled (A's srtt over $fill x its
# minrtt), then B through it. Returns (A's ss view at B's end, B's last ss
# view, B's access-log entry, B intact).
sub late_comer {
    my (%a) = @_;
    @rwnd = ();
    my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
        tag => '6', rtt_ms => RTT_MS, rate_mbit => RATE_BPS / 1e6,
        queue_bytes => 6 * $BDP,
        files => { '/a.bin' => 400 << 20, '/b.bin' => SIZE_B },
        # one process: the minimum RTTs are shared within a process;
        # limits narrower than tcp_wmem skip the ramp, so B's slow start
        # cannot overflow the queue and cut the bulk flow's cwnd below
        # its window (the queue would drain, and B's minimum with it)
        server => { name => 'late', processes => 1,
                    body => "SndbufTune auto\nSndbufTuneLimits 4k 512k\n" });
    my $ja = $lab->curl_start(url => $srv->url('/a.bin'), max_time => 180);
    ok(poll_until(20, sub { my $v = view($lab, $ja);
                            $v && ($v->{delivered} // 0) > 100 }, 0.1),
       'A has data acknowledged on the empty path');
    my $bulk = $lab->bulk_start(cc => 'cubic', seconds => 120,
                                inflight => $a{window});
    ok(poll_until(30, sub { standing_queue($lab, $ja, $a{fill}) }, 0.1),
       "the bulk flow holds a standing queue: window-limited for a second, "
       . "A's srtt over $a{fill} x its minrtt");

    my $out = File::Temp->new(TEMPLATE => '/tmp/sbt-late-XXXXXX');
    my $jb = $lab->curl_start(url => $srv->url('/b.bin'),
                              out => $out->filename, max_time => 120);
    my $samples = $lab->sample_while(job => $jb, interval => 0.2);
    my $rb = $lab->curl_wait($jb);
    my $va = view($lab, $ja);
    $lab->bulk_stop($bulk);
    $lab->curl_kill($ja);
    $lab->curl_wait($ja);
    my $sb = SndbufTune::WanLab->series($samples)->{ $jb->{local_port} } || [];
    my $vb = @$sb ? $sb->[-1][1] : undef;
    my $intact = ($rb->{http_code} // '') eq '200'
                 && -s $out->filename == SIZE_B
                 && sha256_file($out->filename) eq $sha->{'/b.bin'};
    my $e = $srv->access_entry_for($jb->{local_port});
    $srv->stop;
    $lab->down;
    ok($intact, 'B intact (length and SHA-256)');
    return ($va, $vb, $e);
}

sub rtts {
    my ($va, $vb, $e) = @_;
    diag(sprintf "ss minrtt: A %s us, B %s us; B's SNDBUF_TUNE_RTT_US %s, "
         . 'RETUNES %s', map { $_ // '-' } $va && $va->{minrtt_us},
         $vb && $vb->{minrtt_us}, $e && $e->{rtt_us}, $e && $e->{retunes});
    return ($va && $va->{minrtt_us}, $vb && $vb->{minrtt_us},
            $e && $e->{rtt_us});
}

{
    my ($va, $vb, $e) = late_comer(window => 300_000, fill => 1.3);
    my ($a, $b, $logged) = rtts($va, $vb, $e);
    ok($a && $b && $b >= 1.25 * $a && $b <= 2 * $a,
       "one BDP of queue: B's own minrtt 1.25-2 x A's (the premise)");
    ok($logged && rel_diff($logged, $a) <= 0.10,
       "B's SNDBUF_TUNE_RTT_US is A's minrtt (within 10%), not its own");
    ok($e && ($e->{retunes} // 0) > 0, 'auto re-tuned B');
}

{
    my ($va, $vb, $e) = late_comer(window => 700_000, fill => 2.2);
    my ($a, $b, $logged) = rtts($va, $vb, $e);
    ok($a && $b && $b > 2 * $a,
       "three BDPs of queue: B's own minrtt over 2 x A's (the premise)");
    ok($logged && rel_diff($logged, $b) <= 0.10,
       "B's SNDBUF_TUNE_RTT_US is its own minrtt (within 10%), not A's");
}
