package SndbufTune::WanLab;
# The WAN lab (t/wan/wanlab) from Perl, for t/wan-downloads/*.t and bench/run:
#
#   plan_lab_or_skip();                # in a .t: root + TUN, or skip (CI: fail)
#   my $lab = SndbufTune::WanLab->up(rtt_ms => 250, rate_mbit => 30);
#   my $srv = $lab->server(body => "SndbufTune 16k\n");  # a SndbufTune::Server
#   my $sha = $srv->add_random_file('/data.bin', 4 << 20); # in the server
#   $srv->start or die $srv->error;    # namespace; returns once it answers
#                                      # the client through the path
#   my $d = $lab->download(url => $srv->url('/data.bin'), out => $file);
#   # $d->{res}: curl's -w values; $d->{ss}: [t, ss hash] samples of the
#   # server socket taken while the download ran; $d->{port}: its port
#   my $e = $srv->access_entry_for($d->{port});   # the SNDBUF_TUNE_* notes
#   $srv->stop; $lab->down;            # (also on DESTROY, END and signals)
#
# curl_start/sample_while/curl_wait do the same for many downloads at once.
# get() is download() with the suite's own client (t/helpers/http-get):
# several responses on one connection, idle pauses between them, a small
# receive window (rcvbuf).
#
# Many clients: up(clients => N) gives the client namespace N more
# addresses ($lab->client_addrs), routed through the same path, and
# curl_start(source => ADDR) binds a download to one of them;
# up(sub_links => ['198.18.1.0/29:10']) puts those addresses behind a
# second, slower link of their own (t/wan/README.md), with a delay of its
# own (':delay=MS'), or only some ports of an address (',ports=LO-HI':
# users behind one NAT; curl_start(port_range => [LO, HI])). bulk_start
# runs a TCP flow Apache does not serve beside the downloads.
#
# WANLAB_INSTANCE=NAME (see t/wan/README.md) selects the lab: its
# namespaces are the ones `wanlab status` names, so two engineers' labs
# (or a bench and a self-test) do not meet. up() waits, bounded, while
# this instance's lab is up for someone else, and down() only takes down
# a lab this object brought up (checked by the relay's pid).
use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use POSIX ();
use Time::HiRes ();

use SndbufTune::Kernel qw(ss_sockets);
use SndbufTune::Server ();
use SndbufTune::Util qw(top_dir module_path capture sha256_file
                        exit_on_signals);

our @EXPORT_OK = qw(
    lab_env_problem plan_lab_or_skip goodput_limit_bps mss_for_mtu jain
    median rel_diff tb_changes responding tuned_from alone_tb tb_ratios
    settled delivered_bytes steady_rate AUTO_FACTOR AUTO_ALONE
);

our $SERVER_ADDR = '198.18.0.1';

# The law `SndbufTune auto` is held to once slow start is over
# (sndbuf_law.c): with no queue, SO_SNDBUF = FACTOR x rate x RTT; a flow
# alone (no other flow of the server at its RTT) never below ALONE x its
# rate x its minimum RTT, queue or not. On the lab's paths ALONE is the
# larger, so a download alone settles at 2 x ALONE x rate x min RTT of tb
# (alone_tb). The tests own these numbers on purpose: they do not read
# them from the code or the docs, so a change of the law has to be made
# here too, deliberately.
# Kept although make unit (t/unit/law_cases.c) tests the law's exact
# decisions: those feed it constructed samples, while the WAN tests check
# that the real kernel's figures (delivery rate, min RTT, tb = 2 x
# SO_SNDBUF) bring a live socket to it. They assert bounds only (within
# 25% or so of the law's tb, on a loaded machine); a bound without the
# factor (say BDP .. 4 x BDP) would pass a law off by half.
use constant AUTO_FACTOR => 0.875;    # SBT_LAW_FACTOR_NUM / _DEN
use constant AUTO_ALONE => 1.375;     # SBT_LAW_ALONE_NUM / 8
# After a retransmission a flow with no queue is sized for twice FACTOR x
# rate x RTT for 8 looks, a smoothed RTT or more apart (its buffer also
# holds what the receiver SACKed past the hole), more than ALONE here:
# settled() leaves out the samples of LOSS_RTTS minimum RTTs after one.
use constant AUTO_LOSS_RTTS => 16;

# t/wan/wanlab for this object's lab instance.
sub _wanlab {
    my ($self, @args) = @_;
    local $ENV{WANLAB_INSTANCE} = $self->{instance};
    delete $ENV{WANLAB_INSTANCE} unless length($self->{instance} // '');
    return capture(top_dir() . '/t/wan/wanlab', @args);
}

sub _log { print STDERR "# wanlab: @_\n" if $ENV{WANLAB_VERBOSE} }

# MSS with TCP timestamps: MTU - 20 (IP) - 20 (TCP) - 12 (timestamps).
sub mss_for_mtu { $_[0] - 52 }

# What TCP can deliver on a link of RATE bits/s carrying IP packets of MTU
# bytes: rate x MSS/MTU (bits/s of payload).
sub goodput_limit_bps {
    my ($rate_bps, $mtu) = @_;
    return $rate_bps * mss_for_mtu($mtu) / $mtu;
}

# Jain's fairness index of a list of rates: (sum x)^2 / (n sum x^2).
sub jain {
    my @x = @_;
    return undef unless @x;
    my ($s, $s2) = (0, 0);
    for (@x) { $s += $_; $s2 += $_ * $_ }
    return $s2 > 0 ? $s * $s / (@x * $s2) : undef;
}

sub median {
    my @x = sort { $a <=> $b } grep { defined } @_;
    return undef unless @x;
    return @x % 2 ? $x[$#x / 2] : ($x[@x / 2 - 1] + $x[@x / 2]) / 2;
}

# Bytes delivered to the client so far, as the server's socket knows it:
# tcpi_delivered (segments cumulatively or selectively acknowledged) x MSS.
# Unlike bytes_acked it does not lag behind a loss: SACKed data counts when
# it arrives, not when the hole before it is repaired (which made windowed
# rates overshoot the link by up to 20% with 100 lossy flows).
sub delivered_bytes {
    my $s = shift;
    return $s->{delivered} * $s->{mss} if defined $s->{delivered} && $s->{mss};
    return $s->{bytes_acked};
}

# Delivery rate of a series ([t, ss] pairs) between the first sample
# at/after T0 and the last at/before T1: (bytes/s, seconds covered).
sub steady_rate {
    my ($series, $t0, $t1) = @_;
    my @in = grep { $_->[0] >= $t0 && $_->[0] <= $t1
                    && defined delivered_bytes($_->[1]) } @$series;
    return (undef, 0) if @in < 2;
    my $dt = $in[-1][0] - $in[0][0];
    return (undef, 0) if $dt <= 0;
    return ((delivered_bytes($in[-1][1]) - delivered_bytes($in[0][1])) / $dt, $dt);
}

# |got - want| / want
sub rel_diff {
    my ($got, $want) = @_;
    return abs($got - $want) / $want;
}

# The distinct successive tb values of a socket's series ([t, ss] pairs).
sub tb_changes {
    my $series = shift;
    my @v;
    for (@$series) {
        my $tb = $_->[1]{tb};
        push @v, $tb if defined $tb && (!@v || $v[-1] != $tb);
    }
    return @v;
}

# The samples of a series ([t, ss] pairs) taken once the server had sent
# bytes. Before that, ss can catch an accepted socket whose request httpd
# has not yet read (the location, and so the size, is not known yet): its
# buffer then is the kernel's initial one and holds nothing back. Once
# bytes are sent the size in force is the module's.
sub responding {
    my $series = shift;
    return grep { ($_->[1]{bytes_sent} // 0) > 0 } @$series;
}

# The tb the law gives a flow alone once it has settled: 2 x the
# SO_SNDBUF of ALONE x $rate (bytes/s) x $min_rtt (seconds).
sub alone_tb {
    my ($rate, $min_rtt) = @_;
    return 2 * AUTO_ALONE * $rate * $min_rtt;
}

# tb / $want for each sample of a series ([t, ss] pairs) at the indices
# @idx that has a tb.
sub tb_ratios {
    my ($series, $want, @idx) = @_;
    return map { $series->[$_][1]{tb} / $want }
           grep { defined $series->[$_][1]{tb} } @idx;
}

# Where auto took the buffer over from slow start in a series ([t, ss]
# pairs): the first sample after the one with the series' largest tb
# (autotuning's peak, or the lift's), within $band of $want; undef if
# none. Startup's losses may still be in recovery there: callers judge
# the settled samples from it on.
sub tuned_from {
    my ($series, $want, $band) = @_;
    my $peak = 0;
    for my $i (0 .. $#$series) {
        $peak = $i if ($series->[$i][1]{tb} // 0)
                      > ($series->[$peak][1]{tb} // 0);
    }
    for my $i ($peak + 1 .. $#$series) {
        my $tb = $series->[$i][1]{tb};
        return $i if defined $tb && rel_diff($tb, $want) <= $band;
    }
    return undef;
}

# The indices from $from on of a series ([t, ss] pairs) whose samples saw
# no retransmission in the LOSS_RTTS x $min_rtt seconds before them (the
# retransmission counter rose in no sample since): there a flow alone is
# sized by the floor, not for its recovery.
sub settled {
    my ($series, $from, $min_rtt) = @_;
    my ($last_rtx, @idx) = (undef);
    for my $i (1 .. $#$series) {
        my ($t, $s) = @{ $series->[$i] };
        $last_rtx = $t if ($s->{retrans} // 0)
                          > ($series->[$i - 1][1]{retrans} // 0);
        push @idx, $i if $i >= $from && (!defined $last_rtx
                          || $t - $last_rtx > AUTO_LOSS_RTTS * $min_rtt);
    }
    return @idx;
}

# Why the lab cannot run here, or undef when it can (root and TUN).
sub lab_env_problem {
    return 'needs root (network namespaces, TUN devices)' if $> != 0;
    return 'no /dev/net/tun (TUN support missing; try modprobe tun)'
        unless -c '/dev/net/tun';
    for my $tool (qw(ip ss curl)) {
        my $found = grep { -x "$_/$tool" } split /:/, ($ENV{PATH} // '');
        return "$tool not found (run scripts/ensure-deps)" unless $found;
    }
    return undef;
}

# For a .t file: plan nothing and return if the lab can run; otherwise
# skip_all with the reason -- unless $ENV{CI} is set, where a skip must not
# hide the suite: then it is one failing test.
sub plan_lab_or_skip {
    my $why = lab_env_problem();
    return 1 unless defined $why;
    require Test::More;
    if ($ENV{CI}) {
        Test::More::plan(tests => 1);
        Test::More::fail("WAN lab unavailable under CI ($why): these "
                         . "tests must not be skipped in CI");
        exit 1;
    }
    Test::More::plan(skip_all => "WAN lab unavailable: $why");
    exit 0;
}

# ----------------------------------------------------------------- lab --

my %LIVE;           # labs this process brought up (for END)
my %JOBS;           # curl and wanperf processes still running (for END)

# `wanlab status` as a hash (state => 'down' when nothing is up); with
# reset => 1, the relay's counters start again from zero.
sub status {
    my ($self, %o) = @_;
    my ($rc, $out) = $self->_wanlab('status', $o{reset} ? '--reset' : ());
    my %s;
    for (split /\n/, $out) {
        $s{$1} = $2 if /^(\w+)=(.*)$/;
    }
    $s{state} //= 'unknown';
    $s{_rc} = $rc;
    $s{_text} = $out;
    return \%s;
}

# Bring the lab up. Options: rtt_ms, rate_mbit, queue_bytes, loss, mtu,
# rate_steps ('30,10:10': the server-to-client rate alternates 30 and 10
# Mbit/s every 10 s), trace (a mahimahi trace file for that direction),
# clients (N more client addresses: client_addrs), sub_links (a list of
# 'NET/PLEN[,ports=LO-HI]:RATE_MBIT[:QUEUE_BYTES][:delay=MS]')
# (passed to wanlab up; with rate_steps or trace, rate_mbit is the reverse
# direction's and may be left out: t/wan/README.md); instance (default
# $WANLAB_INSTANCE); wait
# (seconds to wait while another lab is up, default 600); quiet_s (how long
# the lab must have been down before we take it, so a running selftest can
# go from one path to the next; 3).
sub up {
    my ($class, %a) = @_;
    defined $a{rtt_ms}
        && (defined $a{rate_mbit} || defined $a{rate_steps} || defined $a{trace})
        or die "WanLab->up needs rtt_ms and rate_mbit (or rate_steps or trace)";
    my $self = bless { params => {%a}, ours => 0,
                       instance => $a{instance} // $ENV{WANLAB_INSTANCE} },
        ref $class || $class;
    my @args = ('up', '--rtt-ms', $a{rtt_ms});
    push @args, '--rate-mbit', $a{rate_mbit} if defined $a{rate_mbit};
    push @args, '--rate-steps', $a{rate_steps} if defined $a{rate_steps};
    push @args, '--trace', $a{trace} if defined $a{trace};
    push @args, '--queue-bytes', $a{queue_bytes} if defined $a{queue_bytes};
    push @args, '--loss', $a{loss} if defined $a{loss};
    push @args, '--mtu', $a{mtu} if defined $a{mtu};
    push @args, '--clients', $a{clients} if $a{clients};
    push @args, map { ('--sub-link', $_) } @{ $a{sub_links} || [] };
    my $wait = $a{wait} // $ENV{WANLAB_WAIT} // 600;
    my $quiet = $a{quiet_s} // 3;
    my $deadline = Time::HiRes::time() + $wait;
    my ($down_since, $said) = (undef, 0);
    while (1) {
        my $st = $self->status;
        my $now = Time::HiRes::time();
        if ($st->{state} eq 'up') {
            undef $down_since;
            print STDERR "# wanlab: another lab is up (relay $st->{relay_pid},"
                . " rtt $st->{rtt_ms} ms, $st->{rate_mbit} Mbit/s); waiting "
                . "up to ${wait}s for it to go down\n" unless $said++;
        }
        else {
            $down_since //= $now;
            if ($now - $down_since >= $quiet || $said == 0) {
                my ($rc, $out) = $self->_wanlab(@args);
                if ($rc == 0) {
                    $self->{up_text} = $out;
                    last;
                }
                die "wanlab up failed (exit $rc): $out"
                    unless $out =~ /already up/;
                undef $down_since;
            }
        }
        die "wanlab: lab busy (another lab stayed up for ${wait}s); not "
            . "taking it over\n" if $now > $deadline;
        Time::HiRes::sleep(0.5);
    }
    my $st = $self->status;
    die "wanlab up returned but status says $st->{state}: $st->{_text}"
        unless $st->{state} eq 'up';
    $self->{relay_pid} = $st->{relay_pid};
    $self->{ours} = 1;
    # this instance's namespaces, as wanlab names them
    for my $side (qw(server client)) {
        ($self->{"ns_$side"}) = ($st->{$side} // '') =~ /^(\S+)/
            or die "wanlab status names no $side namespace: $st->{_text}";
    }
    $self->{mtu} = $st->{mtu} // $a{mtu} // 1500;
    $self->{client_addrs} = [ split /,/, $st->{client_addrs} // '' ];
    $LIVE{$self} = $self;
    exit_on_signals();
    _log('up: ' . ($self->{up_text} =~ s/\s+$//r));
    return $self;
}

# The client namespace's extra addresses (up's clients), in order:
# 198.18.1.1, 198.18.1.2, ...
sub client_addrs { @{ $_[0]{client_addrs} || [] } }

# Take the lab down, if it is the one this object brought up.
sub down {
    my $self = shift;
    return unless $self->{ours};
    $_->stop for @{ delete $self->{servers} || [] };
    $self->{ours} = 0;
    delete $LIVE{$self};
    my $st = $self->status;
    if ($st->{state} eq 'up' && ($st->{relay_pid} // '') ne $self->{relay_pid}) {
        warn "wanlab: the lab now up (relay $st->{relay_pid}) is not ours "
            . "($self->{relay_pid}); leaving it\n";
        return;
    }
    return if $st->{state} ne 'up';
    my ($rc, $out) = $self->_wanlab('down');
    warn "wanlab down failed (exit $rc): $out" if $rc != 0;
}

sub DESTROY {
    my $self = shift;
    local ($?, $@, $!);
    $self->down if $self->{ours};
}

END {
    local ($?, $@, $!);
    for my $job (values %JOBS) {
        kill 'TERM', $job->{pid};
        waitpid($job->{pid}, 0);
    }
    $_->down for values %LIVE;
}

# For a .t file, after plan_lab_or_skip: a lab of its own up (%a: up's
# options; tag => one letter or digit: the lab is the instance
# $WANLAB_INSTANCE (or 'sbt') with the tag added, so that `prove -j` can
# run the WAN test files side by side), a server in it (server => {
# SndbufTune::Server options }) serving random files (files => { path =>
# size }), started -- one test. Returns ($lab, $srv, { path => SHA-256 }).
sub lab_with_server {
    my ($class, %a) = @_;
    my ($server, $files, $tag) = delete @a{qw(server files tag)};
    require Test::More;
    Test::More::BAIL_OUT(module_path() . ' not built (run make)')
        unless -f module_path();
    my $base = $ENV{WANLAB_INSTANCE} || 'sbt';
    my $lab = $class->up(%a, instance => substr($base, 0, 8 - length $tag) . $tag);
    Test::More::diag($lab->{up_text} =~ s/\s+$//r);
    # every re-tune in the error log (trace1), for whoever reads a failure
    my $srv = $lab->server(log_level => 'info sndbuf_tune:trace1', %$server);
    my %sha = map { $_ => $srv->add_random_file($_, $files->{$_}) }
        keys %$files;
    Test::More::ok($srv->start, 'apache2 answers from the client namespace')
        or Test::More::BAIL_OUT($srv->error);
    return ($lab, $srv, \%sha);
}

# One download of $a{path} from $a{srv} (Host: $a{host}) through the path,
# checked: status 200, every byte (length and SHA-256 $a{sha} of $a{size}
# bytes), and ss saw the server socket in at least $a{samples} (5)
# samples. Returns download()'s hash.
sub download_ok {
    my ($self, %a) = @_;
    require Test::More;
    my $tmp = File::Temp->new(TEMPLATE => '/tmp/sbt-wan-XXXXXX');
    my $d = $self->download(url => $a{srv}->url($a{path}), host => $a{host},
                            out => $tmp->filename, max_time => 180,
                            interval => 0.1);
    my $r = $d->{res};
    Test::More::is($r->{http_code}, 200, 'status 200')
        or Test::More::diag(Test::More::explain($r));
    Test::More::is($r->{size_download}, $a{size}, 'whole body received');
    Test::More::is(-s $tmp->filename, $a{size}, 'file length');
    Test::More::is(sha256_file($tmp->filename), $a{sha}, 'SHA-256 of the body');
    my $n = @{ $d->{ss} };
    Test::More::cmp_ok($n, '>=', $a{samples} // 5,
        "ss saw the server socket while the download ran ($n samples)");
    Test::More::diag('tb seen: ' . join(' ', tb_changes($d->{ss})));
    return $d;
}

# ------------------------------------------------------------- curl --

my $PORT_NEXT = 20000 + ($$ % 1000) * 20;

# Ports handed out in each port_range so far ("LO-HI" => the next).
my %RANGE_NEXT;

# Start curl in the client namespace. Options: url, host (Host: header),
# out (file; default /dev/null), max_time, local_port (default: a fresh
# one, so the server's socket can be found in ss by its peer port),
# port_range ([LO, HI]: a fresh one from these, each in turn, as a NAT
# gives its users' connections; a wanlab sub-link with ports=LO-HI takes
# them), source (the client address to download from: one of
# client_addrs; default the namespace's own, 198.18.0.2).
# Returns a job hash (pid, local_port, wfile, t0).
sub curl_start {
    my ($self, %a) = @_;
    my $port = $a{local_port} // ($a{port_range} ? do {
        my ($lo, $hi) = @{ $a{port_range} };
        my $n = $RANGE_NEXT{"$lo-$hi"} // $lo + $$ % ($hi - $lo + 1);
        $RANGE_NEXT{"$lo-$hi"} = $n >= $hi ? $lo : $n + 1;
        $n;
    } : do {
        $PORT_NEXT = 20000 if $PORT_NEXT > 60000;
        $PORT_NEXT++;
    });
    my $wfile = File::Temp->new(TEMPLATE => '/tmp/wanlab-curl-XXXXXX');
    my @cmd = ('curl', '-s', '-S', '-o', $a{out} // '/dev/null',
               '--local-port', $port,
               '-w', join("\\n", map { "$_=%{$_}" } qw(
                   http_code size_download time_total time_starttransfer
                   time_connect speed_download local_port exitcode
                   num_connects)) . "\\n");
    push @cmd, '--interface', $a{source} if $a{source};
    push @cmd, '--max-time', $a{max_time} if $a{max_time};
    push @cmd, '-H', "Host: $a{host}" if $a{host};
    push @cmd, @{ $a{curl_args} || [] };
    push @cmd, $a{url};
    my $t0 = Time::HiRes::time();
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDOUT, '>', $wfile->filename or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        # ip netns exec execs the command itself: this pid becomes curl's
        exec('ip', 'netns', 'exec', $self->{ns_client}, @cmd)
            or POSIX::_exit(127);
    }
    my $job = { pid => $pid, local_port => $port, wfile => $wfile, t0 => $t0,
                url => $a{url}, out => $a{out}, source => $a{source} };
    $JOBS{$pid} = $job;
    return $job;
}

sub curl_running {
    my ($self, $job) = @_;
    return 0 if defined $job->{status};
    my $r = waitpid($job->{pid}, POSIX::WNOHANG());
    if ($r == $job->{pid}) {
        delete $JOBS{ $job->{pid} };
        $job->{status} = $?;
        $job->{t1} = Time::HiRes::time();
        return 0;
    }
    return 1;
}

sub curl_kill {
    my ($self, $job) = @_;
    kill 'TERM', $job->{pid} if $self->curl_running($job);
}

# Wait for a curl job; returns a hash of its -w values (http_code,
# size_download, time_total, ..., exitcode) plus wall (seconds) and
# error (curl's message, if any).
sub curl_wait {
    my ($self, $job) = @_;
    unless (defined $job->{status}) {
        waitpid($job->{pid}, 0);
        delete $JOBS{ $job->{pid} };
        $job->{status} = $?;
        $job->{t1} = Time::HiRes::time();
    }
    my %r = (local_port => $job->{local_port});
    open my $fh, '<', $job->{wfile}->filename or die "curl output: $!";
    my @err;
    while (my $l = <$fh>) {
        chomp $l;
        if ($l =~ /^(\w+)=(.*)$/) { $r{$1} = $2 }
        elsif ($l =~ /\S/) { push @err, $l }
    }
    close $fh;
    $r{error} = join(' ', @err) if @err;
    $r{exit} = $job->{status} >> 8;
    $r{wall} = $job->{t1} - $job->{t0};
    return \%r;
}

sub curl {
    my ($self, %a) = @_;
    return $self->curl_wait($self->curl_start(%a));
}

# ------------------------------------------------------------ profiles --

# A stock Debian 12 / Ubuntu / RHEL server's TCP settings, for this lab's
# server namespace: cubic, net.core.wmem_max 212992 (Linux's default),
# tcp_wmem 4096 16384 4194304. wmem_max is global on this kernel (read-only
# in a namespace), and a namespace may only default to a congestion
# control in the global allowed list: both are changed for the whole
# machine, so such a lab runs alone (t/all runs the WAN files one at a
# time), and both are put back by the returned guard's DESTROY, at END
# and on a signal, failed test or not. Options: cc ('cubic'), wmem_max
# (212992; undef: leave it). Start Apache after this: the module reads
# wmem_max at startup.
my @RESTORE;        # [file, old value] still to be put back (END)

sub _sysctl_set {
    my ($file, $value) = @_;
    open my $in, '<', $file or die "$file: $!";
    chomp(my $old = <$in>);
    close $in;
    return if $old eq $value;
    push @RESTORE, [$file, $old];
    open my $out, '>', $file or die "$file: $!";
    print $out "$value\n" or die "$file: $!";
    close $out or die "$file: $value: $!";
}

sub _sysctl_restore {
    while (my $r = pop @RESTORE) {
        if (open my $out, '>', $r->[0]) {
            print $out "$r->[1]\n";
            close $out or warn "restoring $r->[0] to '$r->[1]': $!\n";
        }
        else {
            warn "restoring $r->[0] to '$r->[1]': $!\n";
        }
    }
}

END { local ($?, $@, $!); _sysctl_restore() }

sub profile {
    my ($self, %a) = @_;
    my $cc = $a{cc} // 'cubic';
    my $wmem_max = exists $a{wmem_max} ? $a{wmem_max} : 212992;
    exit_on_signals();
    my $allowed = '/proc/sys/net/ipv4/tcp_allowed_congestion_control';
    open my $in, '<', $allowed or die "$allowed: $!";
    chomp(my $list = <$in>);
    close $in;
    _sysctl_set($allowed, join ' ', split(' ', $list), $cc)
        unless grep { $_ eq $cc } split ' ', $list;
    _sysctl_set('/proc/sys/net/core/wmem_max', $wmem_max)
        if defined $wmem_max;
    for (["net.ipv4.tcp_congestion_control=$cc"],
         ['net.ipv4.tcp_wmem=4096 16384 4194304']) {
        my ($rc, $out) = capture('ip', 'netns', 'exec', $self->{ns_server},
                                 'sysctl', '-w', @$_);
        die "sysctl -w @$_ in $self->{ns_server}: $out" if $rc;
    }
    return bless {}, 'SndbufTune::WanLab::Profile';
}

sub SndbufTune::WanLab::Profile::DESTROY {
    local ($?, $@, $!);
    _sysctl_restore();
}

# ---------------------------------------------------------- wanperf --

# t/wan/wanperf, where `wanlab up` built it (the rule of t/wan/wanlab).
sub _wanperf {
    my $here = top_dir() . '/t/wan';
    return ($ENV{WANLAB_BIN_DIR} // (-w $here ? $here : '/run/wanlab-bin'))
        . '/wanperf';
}

# Run a command in namespace $ns in the background, output discarded;
# killed at END if still running. Returns its pid.
sub _spawn {
    my ($self, $ns, @cmd) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDOUT, '>', '/dev/null' or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        exec('ip', 'netns', 'exec', $ns, @cmd) or POSIX::_exit(127);
    }
    $JOBS{$pid} = { pid => $pid };
    return $pid;
}

# A bulk TCP flow through the path that is not Apache's: wanperf source
# in the server namespace (congestion control cc, default the kernel's)
# into wanperf sink in the client namespace, for seconds (60), on port
# (5201); with inflight, the sink clamps its window near that many bytes
# (wanperf --clamp), so a flow that fills it keeps a standing queue at the
# bottleneck, through losses; from: the sink's client address (default
# 198.18.0.2). The congestion control is set on the socket
# (TCP_CONGESTION), which root may do for any the kernel has, allowed
# list or not. Returns a handle for bulk_stop.
sub bulk_start {
    my ($self, %a) = @_;
    my $port = $a{port} // 5201;
    my $secs = $a{seconds} // 60;
    my @src = ('source', '--bind', $SERVER_ADDR, '--port', $port,
               '--time', $secs + 10);
    push @src, '--cc', $a{cc} if $a{cc};
    return { port => $port, pids => [
        $self->_spawn($self->{ns_server}, _wanperf(), @src),
        $self->_spawn($self->{ns_client}, _wanperf(), 'sink', '--connect',
                      $SERVER_ADDR, '--port', $port, '--time', $secs,
                      '--clamp', int($a{inflight} // 0),
                      $a{from} ? ('--from', $a{from}) : ()) ] };
}

# The bytes a bulk flow has delivered so far (its source's bytes_acked),
# or undef while it has no connection.
sub bulk_acked {
    my ($self, $bulk) = @_;
    my ($s) = ss_sockets(ns => $self->{ns_server}, sport => $bulk->{port});
    return $s && $s->{bytes_acked};
}

sub bulk_stop {
    my ($self, $bulk) = @_;
    for my $pid (@{ $bulk->{pids} }) {
        kill 'TERM', $pid;
        waitpid($pid, 0);
        delete $JOBS{$pid};
    }
}

# Sample ss in the server namespace every INTERVAL seconds while the job(s)
# run (or until DURATION seconds passed). Returns a list of samples
# { t => seconds since the first job started, socks => { pport => ss hash } }.
# Options: interval (0.1), sport (80), duration, jobs (array ref) or job.
sub sample_while {
    my ($self, %a) = @_;
    my @jobs = $a{jobs} ? @{ $a{jobs} } : $a{job} ? ($a{job}) : ();
    my $interval = $a{interval} // 0.1;
    my $sport = $a{sport} // 80;
    my %want = map { $_->{local_port} => 1 } @jobs;
    my $t0 = @jobs ? (sort { $a <=> $b } map { $_->{t0} } @jobs)[0]
                   : Time::HiRes::time();
    my @samples;
    while (1) {
        my $ts = Time::HiRes::time();
        my @running = grep { $self->curl_running($_) } @jobs;
        last if @jobs && !@running;
        last if defined $a{duration} && $ts - $t0 >= $a{duration};
        my %socks;
        for my $s (ss_sockets(ns => $self->{ns_server}, sport => $sport)) {
            next if @jobs && !$want{ $s->{pport} // '' };
            $socks{ $s->{pport} } = $s;
        }
        push @samples, { t => $ts - $t0, socks => \%socks } if %socks;
        $a{on_sample}->($samples[-1]) if $a{on_sample} && %socks;
        my $left = $interval - (Time::HiRes::time() - $ts);
        Time::HiRes::sleep($left) if $left > 0;
    }
    return \@samples;
}

# Per-socket series from samples: { pport => [ [t, ss hash], ... ] }.
sub series {
    my ($class, $samples) = @_;
    my %s;
    for my $smp (@$samples) {
        for my $p (keys %{ $smp->{socks} }) {
            push @{ $s{$p} }, [ $smp->{t}, $smp->{socks}{$p} ];
        }
    }
    return \%s;
}

# One download with ss sampled while it runs: curl_start + sample_while +
# curl_wait. Returns { res => curl's values, ss => [ [t, ss hash], ... ]
# for this connection's server socket, port => the client's port }.
sub download {
    my ($self, %a) = @_;
    my $job = $self->curl_start(%a);
    my $samples = $self->sample_while(job => $job,
                                      interval => $a{interval} // 0.1,
                                      sport => $a{sport} // 80);
    my $res = $self->curl_wait($job);
    my $series = ref($self)->series($samples)->{ $job->{local_port} } || [];
    return { res => $res, ss => $series, port => $job->{local_port} };
}

# GET each of $a{paths} in turn on one connection from the client
# namespace with t/helpers/http-get (the suite's client, StallClient), to
# $a{srv} (Host: $a{host}); rcvbuf: its SO_RCVBUF; pause: seconds idle
# (connection open) after each response. ss samples the server socket
# meanwhile (interval, 0.1 s). Returns { res => [ per response: req status
# bytes sha256 sent done (epoch seconds) ], ss => [ [t, ss hash] ], port,
# t0 => the epoch second of t = 0, error => its stderr if it failed }.
sub get {
    my ($self, %a) = @_;
    $PORT_NEXT = 20000 if $PORT_NEXT > 60000;
    my $port = $PORT_NEXT++;
    my $out = File::Temp->new(TEMPLATE => '/tmp/wanlab-get-XXXXXX');
    my @cmd = (top_dir() . '/t/helpers/http-get', '--addr', $a{srv}{addr},
               '--port', $a{srv}->port, '--local-port', $port);
    push @cmd, '--host', $a{host} if $a{host};
    push @cmd, '--rcvbuf', $a{rcvbuf} if $a{rcvbuf};
    push @cmd, '--pause', $a{pause} if $a{pause};
    my $job = { local_port => $port, t0 => Time::HiRes::time() };
    $job->{pid} = fork // die "fork: $!";
    if (!$job->{pid}) {
        open STDOUT, '>', $out->filename or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        exec('ip', 'netns', 'exec', $self->{ns_client}, @cmd, @{ $a{paths} })
            or POSIX::_exit(127);
    }
    $JOBS{ $job->{pid} } = $job;
    my $samples = $self->sample_while(job => $job,
                                      interval => $a{interval} // 0.1,
                                      sport => $a{srv}->port);
    my (@res, @err);
    open my $fh, '<', $out->filename or die "http-get output: $!";
    while (my $l = <$fh>) {
        chomp $l;
        if ($l =~ /^req=/) { push @res, { map { split /=/, $_, 2 } split ' ', $l } }
        elsif ($l =~ /\S/) { push @err, $l }
    }
    close $fh;
    return { res => \@res, port => $port, t0 => $job->{t0},
             error => ($job->{status} || @err) ? join(' ', @err) : undef,
             ss => ref($self)->series($samples)->{$port} || [] };
}

# ------------------------------------------------------------- crowds --

# ss in the server namespace every $a{interval} (0.5) s for $a{seconds}
# from the first of $a{jobs}' start: the crowd's sockets (local port
# $a{sport}, 80; the jobs' client ports), a foreign flow's (local port
# $a{foreign_port}, if given: bulk_start's) and more foreign flows' (local
# ports $a{bulk_ports}). Once, at $a{procs_at} s (if given), ss -p: how
# many of the crowd's sockets each process holds.
# Returns ([{ t, socks => { client port => ss }, foreign => ss,
# bulk => { local port => ss } }], [sockets per process, largest first]).
sub sample_crowd {
    my ($self, %a) = @_;
    my %want = map { $_->{local_port} => 1 } @{ $a{jobs} };
    my %bulk = map { $_ => 1 } @{ $a{bulk_ports} || [] };
    my $sport = $a{sport} // 80;
    my $fport = $a{foreign_port} // -1;
    my $t0 = (sort { $a <=> $b } map { $_->{t0} } @{ $a{jobs} })[0];
    my ($per_proc, @samples);
    while ((my $ts = Time::HiRes::time()) - $t0 < $a{seconds}) {
        my (%socks, $foreign, %b);
        for my $s (ss_sockets(ns => $self->{ns_server})) {
            my $lp = $s->{lport} // 0;
            $socks{ $s->{pport} } = $s
                if $lp == $sport && $want{ $s->{pport} // '' };
            $foreign = $s if $lp == $fport;
            $b{$lp} = $s if $bulk{$lp};
        }
        push @samples, { t => $ts - $t0, socks => \%socks, foreign => $foreign,
                         bulk => \%b };
        if (defined $a{procs_at} && !$per_proc && $ts - $t0 >= $a{procs_at}) {
            my %n;
            $n{ $_->{pid} // '?' }++ for grep { $want{ $_->{pport} // '' } }
                ss_sockets(ns => $self->{ns_server}, sport => $sport,
                           procs => 1);
            $per_proc = [sort { $b <=> $a } values %n];
        }
        my $left = ($a{interval} // 0.5) - (Time::HiRes::time() - $ts);
        Time::HiRes::sleep($left) if $left > 0;
    }
    return (\@samples, $per_proc || []);
}

sub _mean { my $s = 0; $s += $_ for @_; @_ ? $s / @_ : undef }

# A crowd's figures over [T0, T1] from sample_crowd's samples, for the
# flows whose client ports are the keys of %$group (its values name each
# flow's group; with more than one group, each gets the same figures in
# {groups}{NAME}):
#   flows       sockets seen
#   agg_bps     goodput: the sum of the flows' delivery rates (bit/s)
#   jain        Jain's index of those rates
#   wsum_avg    skmem w summed over the sockets, averaged over the samples
#   srtt_ms     srtt averaged over the sockets, then over the samples
#   rtx         retransmitted / data segments sent in the window
#   minrtt_ms   the smallest min RTT of the sockets
#   peers       distinct client addresses
# and the foreign flow's foreign_bps (bit/s) and the crowd's share of what
# both delivered (share), where it was sampled.
sub crowd_figures {
    my ($class, $samples, $group, $t0, $t1) = @_;
    my $series = $class->series($samples);
    my $f = _crowd_part($series, $samples, [keys %$group], $t0, $t1);
    my %g;
    push @{ $g{ $group->{$_} } }, $_ for keys %$group;
    if (keys %g > 1) {
        $f->{groups}{$_} = _crowd_part($series, $samples, $g{$_}, $t0, $t1)
            for keys %g;
    }
    my @fs = map { [$_->{t}, $_->{foreign}] } grep { $_->{foreign} } @$samples;
    if (@fs) {
        my ($r) = steady_rate(\@fs, $t0, $t1);
        $f->{foreign_bps} = defined $r ? 8 * $r : undef;
        my $all = $f->{agg_bps} + ($f->{foreign_bps} // 0);
        $f->{share} = $all ? $f->{agg_bps} / $all : undef;
    }
    return $f;
}

sub _crowd_part {
    my ($series, $samples, $ports, $t0, $t1) = @_;
    my (@rates, $segs, $rtx, @minrtt, %peers);
    for my $p (@$ports) {
        my $s = $series->{$p} || [];
        my ($r) = steady_rate($s, $t0, $t1);
        push @rates, $r // 0;
        $peers{ $_->[1]{peer} =~ s/:\d+$//r } = 1 for grep { $_->[1]{peer} } @$s;
        my @w = grep { $_->[0] >= $t0 && $_->[0] <= $t1 } @$s;
        next unless @w >= 2;
        my ($first, $last) = map { $_->[1] } @w[0, -1];
        $segs += ($last->{data_segs_out} // 0) - ($first->{data_segs_out} // 0);
        $rtx += ($last->{retrans} // 0) - ($first->{retrans} // 0);
        push @minrtt, $last->{minrtt_us} if $last->{minrtt_us};
    }
    my (@wsum, @srtt);
    for my $smp (grep { $_->{t} >= $t0 && $_->{t} <= $t1 } @$samples) {
        my @s = grep { defined } @{ $smp->{socks} }{@$ports};
        next unless @s;
        my $w = 0;
        $w += $_->{w} // 0 for @s;
        push @wsum, $w;
        my @rtt = grep { defined } map { $_->{rtt_us} } @s;
        push @srtt, _mean(@rtt) / 1000 if @rtt;
    }
    my $agg = 0;
    $agg += $_ for @rates;
    return { flows => scalar(grep { $series->{$_} } @$ports),
             peers => scalar(keys %peers), agg_bps => 8 * $agg,
             jain => jain(@rates), wsum_avg => _mean(@wsum),
             srtt_ms => _mean(@srtt), rtx => $segs ? $rtx / $segs : undef,
             minrtt_ms => @minrtt ? (sort { $a <=> $b } @minrtt)[0] / 1000
                                  : undef };
}

# A SndbufTune::Server in the server namespace on 198.18.0.1:80, run as
# the benchmarks want it (event MPM, 2 x 128 threads, sendfile), ready once
# /ready.txt answers from the client namespace through the path. Options
# are SndbufTune::Server's.
sub server {
    my ($self, %a) = @_;
    my $srv = SndbufTune::Server->new(
        name => 'wan', netns => $self->{ns_server},
        listen => "$SERVER_ADDR:80", threads => 128, processes => 2,
        sendfile => 1, timeout => 120, ready_path => '/ready.txt',
        probe => sub {
            my $r = $self->curl(url => $_[0]->url('/ready.txt'), max_time => 3);
            return ($r->{http_code} // '') eq '200';
        }, %a);
    $srv->add_file('/ready.txt', "ready\n");
    push @{ $self->{servers} }, $srv;
    return $srv;
}

1;
