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
#     steps), about half a BDP of queue: B's own minrtt is 1.2-2 x A's
#     (the premise, checked); B's RTT_US is A's minrtt (within 10%), not
#     B's own, and auto re-tuned B (RETUNES > 0). The module before
#     sndbuf_path.c logged B's own minrtt.
#   - window 700000 (725 segments), about two BDPs of queue: B's own
#     minrtt is more than 2 x A's (checked); B keeps its own (RTT_US
#     within 10% of B's ss minrtt).
# A lab whose premises missed is tried again (late_comer_tries). B is
# intact every time. The server has one process: the minimum RTTs
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

use constant RATE_BPS => 30_000_000;
use constant RTT_MS => 100;
use constant SIZE_B => 16 << 20;
use constant TRIES => 3;
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

# One lab: A on the empty path, the queue filled (A's srtt over $fill x
# its minrtt), then B through it. Returns a hash: the lab's own premises
# (A had data acknowledged, the queue stood), A's and B's ss minrtt at
# B's end, B's access-log entry, whether B arrived intact, the bulk flow's
# retransmits (a loss cuts its cwnd below its window and drains the queue).
sub late_comer {
    my (%a) = @_;
    my %r;
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
    $r{acked} = poll_until(20, sub { my $v = view($lab, $ja);
                                     $v && ($v->{delivered} // 0) > 100 },
                           0.1);
    my $bulk = $lab->bulk_start(cc => 'cubic', seconds => 120,
                                inflight => $a{window});
    $r{queue} = $r{acked}
        && poll_until(30, sub { standing_queue($lab, $ja, $a{fill}) }, 0.1);
    if ($r{queue}) {
        my $out = File::Temp->new(TEMPLATE => '/tmp/sbt-late-XXXXXX');
        my $jb = $lab->curl_start(url => $srv->url('/b.bin'),
                                  out => $out->filename, max_time => 120);
        my $samples = $lab->sample_while(job => $jb, interval => 0.2);
        my $rb = $lab->curl_wait($jb);
        my $va = view($lab, $ja);
        my ($vbulk) = ss_sockets(ns => $lab->{ns_server}, sport => 5201);
        my $sb = SndbufTune::WanLab->series($samples)->{ $jb->{local_port} }
                 || [];
        $r{a} = $va && $va->{minrtt_us};
        $r{b} = @$sb && $sb->[-1][1]{minrtt_us};
        $r{bulk_retrans} = $vbulk && $vbulk->{retrans};
        $r{intact} = ($rb->{http_code} // '') eq '200'
                     && -s $out->filename == SIZE_B
                     && sha256_file($out->filename) eq $sha->{'/b.bin'};
        $r{e} = $srv->access_entry_for($jb->{local_port});
    }
    $lab->bulk_stop($bulk);
    $lab->curl_kill($ja);
    $lab->curl_wait($ja);
    $srv->stop;
    $lab->down;
    return \%r;
}

# The lab's premises can miss: once in CI (not seen in 8 runs here, nor
# with both cores kept busy), B's own minrtt came out of the first lab's
# range while auto shared A's; the diag and the check's name now give the
# figures, and the bulk flow's retransmits. So each lab is
# tried up to TRIES times until A had data acknowledged, the queue stood
# and B's own minrtt came out in $ratio (min, max) x A's. The module is
# judged on the try that met them; B must arrive intact in every try.
sub late_comer_tries {
    my (%a) = @_;
    my ($r, $intact) = (undef, 1);
    for my $try (1 .. TRIES) {
        $r = late_comer(%a);
        $intact &&= $r->{intact} if $r->{queue};
        my ($ma, $mb, $e) = @$r{qw(a b e)};
        diag(sprintf "window %d, try %d: A had data acknowledged %s, queue "
             . "stood %s; ss minrtt A %s us, B %s us; B's "
             . 'SNDBUF_TUNE_RTT_US %s, RETUNES %s; bulk flow retransmits %s',
             $a{window}, $try, (map { $_ ? 'yes' : 'no' } @$r{qw(acked queue)}),
             map { $_ // '-' } $ma, $mb, $e && $e->{rtt_us},
             $e && $e->{retunes}, $r->{bulk_retrans});
        $r->{premise} = $r->{queue} && $ma && $mb
                        && $mb >= $a{ratio}[0] * $ma
                        && $mb <= $a{ratio}[1] * $ma;
        $r->{tries} = $try;
        last if $r->{premise};
    }
    $r->{intact} = $intact;
    return $r;
}

sub premise_name {
    my ($r, $what) = @_;
    return sprintf "%s (the premise; try %d of %d: A %s us, B %s us)",
        $what, $r->{tries}, TRIES, map { $_ // '-' } @$r{qw(a b)};
}

{
    # the old module logged B's own minrtt: at 1.2 x A's or more it is
    # over 10% away from A's, so check 2 tells the two apart
    my $r = late_comer_tries(window => 300_000, fill => 1.3,
                             ratio => [1.2, 2]);
    ok($r->{premise}, premise_name($r, "half a BDP of queue: B's own "
                                   . "minrtt 1.2-2 x A's"));
    ok($r->{intact}, 'B intact (length and SHA-256) in every try');
    my $logged = $r->{e} && $r->{e}{rtt_us};
    ok($r->{premise} && $logged && rel_diff($logged, $r->{a}) <= 0.10,
       "B's SNDBUF_TUNE_RTT_US is A's minrtt (within 10%), not its own");
    ok($r->{e} && ($r->{e}{retunes} // 0) > 0, 'auto re-tuned B');
}

{
    my $r = late_comer_tries(window => 700_000, fill => 2.2,
                             ratio => [2, 1e9]);
    ok($r->{premise}, premise_name($r, "two BDPs of queue: B's own "
                                   . "minrtt over 2 x A's"));
    ok($r->{intact}, 'B intact (length and SHA-256) in every try');
    my $logged = $r->{e} && $r->{e}{rtt_us};
    ok($r->{premise} && $logged && rel_diff($logged, $r->{b}) <= 0.10,
       "B's SNDBUF_TUNE_RTT_US is its own minrtt (within 10%), not A's");
}

# each try starts a server, and checks it answers
done_testing();
