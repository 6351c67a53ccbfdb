# A late comer: `SndbufTune auto` reads the queue at a flow's bottleneck
# as its smoothed RTT beyond its minimum RTT. A flow that starts while
# others fill that queue takes its minimum through it and sees no queue
# at all. So auto takes the lowest minimum RTT another live connection to
# the same client address has measured (sndbuf_path.c), when it is at
# least half the flow's own (a bigger gap is more likely another path
# behind the address than a queue).
#
# A lab of 30 Mbit/s, 100 ms (BDP 375000 bytes). Download A
# (auto) starts on the empty path; once ss shows it has data acknowledged,
# a cubic bulk flow (wanperf, not Apache) whose window the sink clamps
# keeps a standing queue at the bottleneck (as long as its cwnd stays
# above that window); when A's ss rtt shows it, download B (auto, 4 MB)
# starts from the same client address, through that queue. SndbufTuneLimits
# 4k 64k keeps both downloads off the ramp (a slow start lifted to 8 MiB
# overflowed the queue, cut the bulk flow's cwnd below its window, and the
# queue, and B's minimum, fell after auto's last look) and A's part of the
# queue small: a flow alone is never locked below its window, and A's BBR
# window (2 x its BDP estimate) built most of the queue under 512k, then
# its PROBE_RTT drained it as B started (B's own minrtt 1.05 x A's). The
# kernel's view (ss) of A and B against what auto sized B for
# (SNDBUF_TUNE_RTT_US):
# with the bulk flow's window at 300000 (363 segments in flight: the
# receive window grows in steps), about half a BDP of queue: B's own
# minrtt is 1.2-2 x A's (the premise, checked); B's RTT_US is A's minrtt
# (within 10%), not B's own, and auto re-tuned B (RETUNES > 0). The module
# before sndbuf_path.c logged B's own minrtt. A gap over 2 x (another
# path behind the address: B keeps its own) is t/unit/law_cases.c's
# (PATH_TRUST), and two paths behind one address 10_nat.t's.
# The lab runs once. Its premises (A had data acknowledged, the queue
# stood, B's own minrtt in the range above) are preconditions, not
# results: a lab that misses one skips the module's checks and says why,
# with the figures. B is intact whenever it ran. The server is prefork with
# two processes, so A and B are served by different ones: the minimum RTTs
# are shared across processes. Kernel state and the module's notes only;
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
use constant SIZE_B => 4 << 20;
my $BDP = RATE_BPS / 8 * RTT_MS / 1000;

# ss's view of the server socket of $job, or undef.
sub view {
    my ($lab, $job) = @_;
    my ($v) = ss_sockets(ns => $lab->{ns_server}, sport => 80,
                         dport => $job->{local_port});
    return $v;
}

# Does the bulk flow keep a queue that will not drain while B runs? Its
# window is the limit (rwnd_limited grew by half a second or more in the
# last second: no loss has cut its cwnd below it; 0.6-0.8 s in the lab,
# where cwnd stays at 651 segments over 363 in flight), and A's srtt is
# over $fill x A's minrtt.
my @rwnd;
sub standing_queue {
    my ($lab, $ja, $fill) = @_;
    my ($bulk) = ss_sockets(ns => $lab->{ns_server}, sport => 5201);
    my $va = view($lab, $ja);
    return 0 unless $bulk && $va && $va->{minrtt_us};
    push @rwnd, [Time::HiRes::time(), $bulk->{rwnd_limited_ms} // 0];
    shift @rwnd while $rwnd[-1][0] - $rwnd[0][0] > 1.05;
    return $rwnd[-1][0] - $rwnd[0][0] >= 0.95
           && $rwnd[-1][1] - $rwnd[0][1] >= 500
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
        # prefork, two processes: A and B in different ones, whose
        # minimum RTTs sndbuf_path.c's shared table joins; limits narrower than tcp_wmem skip the ramp, so B's slow start
        # cannot overflow the queue and cut the bulk flow's cwnd below
        # its window (the queue would drain, and B's minimum with it)
        server => { name => 'late', mpm => 'prefork', processes => 2,
                    body => "SndbufTune auto\nSndbufTuneLimits 4k 64k\n" });
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

# What the lab measured, for the log.
sub report {
    my ($r, %a) = @_;
    diag(sprintf "window %d: A had data acknowledged %s, queue stood %s; "
         . "ss minrtt A %s us, B %s us; B's SNDBUF_TUNE_RTT_US %s, RETUNES "
         . '%s; bulk flow retransmits %s', $a{window},
         (map { $_ ? 'yes' : 'no' } @$r{qw(acked queue)}),
         map { $_ // '-' } @$r{qw(a b)}, $r->{e} && $r->{e}{rtt_us},
         $r->{e} && $r->{e}{retunes}, $r->{bulk_retrans});
}

# Why the lab's premises missed (undef if they held): B's own minrtt
# must be in $a{ratio} (min, max) x A's. (Once in CI, not seen in 8 runs
# here nor with both cores kept busy, B's came out of the first lab's
# range: a loss of the bulk flow, shown by its retransmits, drains the
# queue.)
sub premise_missed {
    my ($r, %a) = @_;
    my ($ma, $mb) = @$r{qw(a b)};
    return 'A had no data acknowledged in 20 s' unless $r->{acked};
    return 'the bulk flow kept no standing queue in 30 s' unless $r->{queue};
    return 'no minrtt in ss for A or B' unless $ma && $mb;
    return undef if $mb >= $a{ratio}[0] * $ma && $mb <= $a{ratio}[1] * $ma;
    return sprintf "the lab missed its premise: B's own minrtt %d us is not "
        . "%s-%s x A's %d us (bulk flow retransmits %s)", $mb, $a{ratio}[0],
        $a{ratio}[1], $ma, $r->{bulk_retrans} // '-';
}

{
    # the old module logged B's own minrtt: at 1.2 x A's or more it is
    # over 10% away from A's, so the RTT_US check tells the two apart
    my %a = (window => 300_000, fill => 1.3, ratio => [1.2, 2]);
    my $r = late_comer(%a);
    report($r, %a);
    # A is the module's own download: a premise it cannot miss
    ok($r->{acked}, 'half a BDP of queue: A (auto) had data acknowledged');
  SKIP: {
        skip 'half a BDP of queue: ' . premise_missed($r, %a), 3
            unless $r->{queue};
        ok($r->{intact}, 'half a BDP of queue: B intact (length and SHA-256)');
        my $why = premise_missed($r, %a);
        skip "half a BDP of queue: $why", 2 if $why;
        my $logged = $r->{e} && $r->{e}{rtt_us};
        ok($logged && rel_diff($logged, $r->{a}) <= 0.10,
           "B's SNDBUF_TUNE_RTT_US is A's minrtt (within 10%), not its own");
        ok($r->{e} && ($r->{e}{retunes} // 0) > 0, 'auto re-tuned B');
    }
}

# the lab starts a server, and checks it answers
done_testing();
