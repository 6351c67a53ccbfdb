package SndbufTune::WanLab;
# The WAN lab (t/wan/wanlab) from Perl, for t/wan-downloads/*.t and bench/run:
#
#   plan_lab_or_skip();                # in a .t: root + TUN, or skip (CI: fail)
#   my $lab = SndbufTune::WanLab->up(rtt_ms => 250, rate_mbit => 30);
#   my $srv = $lab->server(body => "SndbufTune 16k\n");  # apache2 in the
#   my $sha = $srv->add_random_file('/data.bin', 4 << 20); # server namespace
#   $srv->start or die $srv->{error};  # returns once it answers the client
#   my $d = $lab->download(url => $srv->url('/data.bin'), out => $file);
#   # $d->{res}: curl's -w values; $d->{ss}: [t, ss -tmi hash] samples of
#   # the server socket taken while the download ran; $d->{port}: its port
#   my $e = $srv->access_entry_for($d->{port});   # the SNDBUF_TUNE_* notes
#   $srv->stop; $lab->down;            # (also on DESTROY, END and signals)
#
# curl_start/sample_while/curl_wait do the same for many downloads at once.
# Also, without a lab: SndbufTune::WanLab::Server->new(listen =>
# '127.0.0.1:PORT', ...) runs the same server on loopback (bench's wrk runs).
#
# The lab is one per machine (fixed namespace names), so up() waits, bounded,
# while someone else's lab is up, and down() only takes down a lab this
# object brought up (checked by the relay's pid).
#
# Reuses SndbufTune::Kernel (poll_until, sysctls, expected_fixed_tb, and
# ss_sockets, here in the server namespace for every socket at once).
# SndbufTune::Standalone is tied to Apache::Test's configuration and
# 127.0.0.1; this server is its namespace-aware sibling with the same
# new/start/stop/log_text interface, and needs no Apache::Test.
use strict;
use warnings;

use Cwd ();
use Digest::SHA ();
use Exporter 'import';
use File::Basename ();
use File::Path ();
use File::Spec;
use File::Temp ();
use POSIX ();
use Time::HiRes ();

use SndbufTune::Kernel qw(poll_until wmem_max tcp_wmem expected_fixed_tb
                          ss_sockets);

our @EXPORT_OK = qw(
    top_dir lab_env_problem plan_lab_or_skip
    wmem_max tcp_wmem expected_fixed_tb poll_until sha256_file
    goodput_limit_bps mss_for_mtu jain median rel_diff tb_changes
    auto_factor
);

my $NS_SERVER_DEFAULT = 'sbt-server';
my $NS_CLIENT_DEFAULT = 'sbt-client';
our $SERVER_ADDR = '198.18.0.1';
our $CLIENT_ADDR = '198.18.0.2';

# ---------------------------------------------------------------- paths --

# The repository's top directory (this file is t/lib/SndbufTune/WanLab.pm).
sub top_dir {
    my $here = File::Basename::dirname(Cwd::abs_path(__FILE__));
    return Cwd::abs_path("$here/../../..");
}

sub wanlab_bin { $ENV{WANLAB} // top_dir() . '/t/wan/wanlab' }
sub module_so  { $ENV{SNDBUF_TUNE_SO} // top_dir() . '/.libs/mod_sndbuf_tune.so' }

sub httpd_bin {
    return $ENV{APACHE_TEST_HTTPD} if $ENV{APACHE_TEST_HTTPD};
    for my $b (qw(/usr/sbin/apache2 /usr/sbin/httpd)) {
        return $b if -x $b;
    }
    return 'apache2';
}

sub modules_dir {
    my $d = '/usr/lib/apache2/modules';
    return $d if -d $d;
    my $q = `apxs -q LIBEXECDIR 2>/dev/null`;
    chomp $q;
    return $q;
}

# ------------------------------------------------------------- helpers --

sub _log { print STDERR "# wanlab: @_\n" if $ENV{WANLAB_VERBOSE} }

# Run a command, return (exit code, combined stdout+stderr).
sub _capture {
    my @cmd = @_;
    my $pid = open(my $fh, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec @cmd or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? == -1 ? 127 : $? >> 8, $out);
}

sub sha256_file {
    my $path = shift;
    my $sha = Digest::SHA->new(256);
    $sha->addfile($path, 'b');
    return $sha->hexdigest;
}

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

# auto's FACTOR as docs/auto.md states the law ("FACTOR = 3" or "3/2"):
# the tests hold the module to its documentation.
sub auto_factor {
    my $doc = top_dir() . '/docs/auto.md';
    open my $fh, '<', $doc or die "$doc: $!";
    while (<$fh>) {
        return $2 ? $1 / $2 : $1 if /\bFACTOR\s*=\s*(\d+)(?:\s*\/\s*(\d+))?/;
    }
    die "$doc: no 'FACTOR = N' in the law\n";
}

sub median {
    my @x = sort { $a <=> $b } grep { defined } @_;
    return undef unless @x;
    return @x % 2 ? $x[$#x / 2] : ($x[@x / 2 - 1] + $x[@x / 2]) / 2;
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
my %JOBS;           # curl processes still running (for END)

sub _wanlab {
    my @args = @_;
    return _capture(wanlab_bin(), @args);
}

# `wanlab status` as a hash (state => 'down' when nothing is up).
sub status {
    my $self = shift;
    my ($rc, $out) = _wanlab('status');
    my %s;
    for (split /\n/, $out) {
        $s{$1} = $2 if /^(\w+)=(.*)$/;
    }
    $s{state} //= 'unknown';
    $s{_rc} = $rc;
    $s{_text} = $out;
    return \%s;
}

# Bring the lab up. Options: rtt_ms, rate_mbit, queue_bytes, loss, mtu
# (passed to wanlab up); wait (seconds to wait while another lab is up,
# default 600); quiet_s (how long the lab must have been down before we
# take it, so a running selftest can go from one path to the next; 3).
sub up {
    my ($class, %a) = @_;
    defined $a{rtt_ms} && defined $a{rate_mbit}
        or die "WanLab->up needs rtt_ms and rate_mbit";
    my $self = bless { params => {%a}, ours => 0 }, ref $class || $class;
    my @args = ('up', '--rtt-ms', $a{rtt_ms}, '--rate-mbit', $a{rate_mbit});
    push @args, '--queue-bytes', $a{queue_bytes} if defined $a{queue_bytes};
    push @args, '--loss', $a{loss} if defined $a{loss};
    push @args, '--mtu', $a{mtu} if defined $a{mtu};
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
                my ($rc, $out) = _wanlab(@args);
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
    $self->{status_up} = $st;
    ($self->{ns_server}) = ($st->{server} // '') =~ /^(\S+)/;
    ($self->{ns_client}) = ($st->{client} // '') =~ /^(\S+)/;
    $self->{ns_server} ||= $NS_SERVER_DEFAULT;
    $self->{ns_client} ||= $NS_CLIENT_DEFAULT;
    $self->{mtu} = $st->{mtu} // $a{mtu} // 1500;
    $LIVE{$self} = $self;
    _cleanup_on_signals();
    _log('up: ' . ($self->{up_text} =~ s/\s+$//r));
    return $self;
}

sub ns { my ($self, $side) = @_; return $self->{"ns_$side"} }
sub mtu { $_[0]{mtu} }
sub rtt_ms { $_[0]{params}{rtt_ms} }
sub rate_bps { $_[0]{params}{rate_mbit} * 1e6 }
sub limit_bps { goodput_limit_bps($_[0]->rate_bps, $_[0]->mtu) }
sub bdp_bytes { $_[0]->rate_bps / 8 * $_[0]->rtt_ms / 1000 }

sub is_ours {
    my $self = shift;
    return 0 unless $self->{ours};
    my $st = $self->status;
    return $st->{state} eq 'up' && ($st->{relay_pid} // '') eq $self->{relay_pid};
}

# Take the lab down, if it is the one this object brought up.
sub down {
    my $self = shift;
    return unless $self->{ours};
    $_->stop for grep { $_ } values %{ $self->{servers} || {} };
    $self->{ours} = 0;
    delete $LIVE{$self};
    my $st = $self->status;
    if ($st->{state} eq 'up' && ($st->{relay_pid} // '') ne $self->{relay_pid}) {
        warn "wanlab: the lab now up (relay $st->{relay_pid}) is not ours "
            . "($self->{relay_pid}); leaving it\n";
        return;
    }
    return if $st->{state} ne 'up';
    my ($rc, $out) = _wanlab('down');
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

# A signal (Ctrl-C, prove killed, a closed pipe) must not leave a lab or an
# apache2 behind: turn it into exit(), so END blocks and DESTROY clean up.
# Handlers the caller set itself are left alone.
sub _cleanup_on_signals {
    for my $sig (qw(INT TERM HUP PIPE)) {
        next if defined $SIG{$sig} && $SIG{$sig} ne 'DEFAULT';
        $SIG{$sig} = sub {
            $SIG{$sig} = 'IGNORE';
            $SIG{PIPE} = 'IGNORE';
            print STDERR "# wanlab: SIG$sig: cleaning up\n" unless $sig eq 'PIPE';
            exit($sig eq 'INT' ? 130 : 143);
        };
    }
}

# Run a command in the server or client namespace (via wanlab exec);
# returns (exit code, output).
sub exec_capture {
    my ($self, $side, @cmd) = @_;
    return _capture(wanlab_bin(), 'exec', $side, '--', @cmd);
}

sub sysctl {
    my ($self, $side, $name, $value) = @_;
    (my $path = $name) =~ s{\.}{/}g;
    my ($rc, $out) = $self->exec_capture($side, 'sh', '-c',
        "echo '$value' > /proc/sys/$path");
    die "sysctl $name=$value in $side: $out" if $rc != 0;
}

sub relay_stats { $_[0]->status }

# ------------------------------------------------------------- curl --

my $PORT_NEXT = 20000 + ($$ % 1000) * 20;

# Start curl in the client namespace. Options: url, host (Host: header),
# out (file; default /dev/null), max_time, local_port (default: a fresh
# one, so the server's socket can be found in ss by its peer port).
# Returns a job hash (pid, local_port, wfile, t0).
sub curl_start {
    my ($self, %a) = @_;
    my $port = $a{local_port} // do {
        $PORT_NEXT = 20000 if $PORT_NEXT > 60000;
        $PORT_NEXT++;
    };
    my $wfile = File::Temp->new(TEMPLATE => '/tmp/wanlab-curl-XXXXXX');
    my @cmd = ('curl', '-s', '-S', '-o', $a{out} // '/dev/null',
               '--local-port', $port,
               '-w', join("\\n", map { "$_=%{$_}" } qw(
                   http_code size_download time_total time_starttransfer
                   time_connect speed_download local_port exitcode
                   num_connects)) . "\\n");
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
                url => $a{url}, out => $a{out} };
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

# Start an apache2 server in the server namespace (see the Server package).
sub server {
    my ($self, %a) = @_;
    my $srv = SndbufTune::WanLab::Server->new(lab => $self, %a);
    $self->{servers}{"$srv"} = $srv;
    return $srv;
}

# =================================================================== server ==
package SndbufTune::WanLab::Server;
# apache2 with a generated configuration in a temporary ServerRoot that
# `User nobody` / `Group nogroup` can read; in the lab's server namespace
# (Listen 198.18.0.1:80) or, without a lab, on the given listen address.
#
#   new(lab => $lab | listen => 'ADDR:PORT', body => $conf, name => 'x',
#       module => 1 (load mod_sndbuf_tune; 0: do not), threads => 128,
#       processes => 2, log_level => 'info sndbuf_tune:debug',
#       sendfile => 1, access_log => 1, cpus => '0' (taskset -c))
#   body may use @DOCROOT@ and @DIR@.
use strict;
use warnings;

use File::Path ();
use File::Temp ();
use POSIX ();
use Time::HiRes ();

use SndbufTune::Kernel qw(poll_until);
use SndbufTune::Standalone ();

# stop, log_text and the pid file work as for the loopback servers.
our @ISA = ('SndbufTune::Standalone');
sub httpd { SndbufTune::WanLab::httpd_bin() }

my %LIVE_SERVERS;    # started by this process (for END)

our $LOG_FIELDS = [
    [time_us => '%{usec}t'],  [client => '%a'], [cport => '%{remote}p'],
    [status => '%>s'],      [bytes => '%B'], [host => '%{Host}i'],
    [uri => '%U'],          [duration_us => '%D'],
    [policy => '%{SNDBUF_TUNE_POLICY}n'],
    [requested => '%{SNDBUF_TUNE_REQUESTED}n'],
    [effective => '%{SNDBUF_TUNE_EFFECTIVE}n'],
    [rtt_us => '%{SNDBUF_TUNE_RTT_US}n'],
    [bw_bps => '%{SNDBUF_TUNE_BW_BPS}n'],
    [retunes => '%{SNDBUF_TUNE_RETUNES}n'],
    [limited_ms => '%{SNDBUF_TUNE_SNDBUF_LIMITED_MS}n'],
    [delivery_bps => '%{SNDBUF_TUNE_DELIVERY_BPS}n'],
    [min_rtt_us => '%{SNDBUF_TUNE_MIN_RTT_US}n'],
    [retrans => '%{SNDBUF_TUNE_RETRANS}n'],
    [rule => '%{SNDBUF_TUNE_RULE}n'],
];

sub new {
    my ($class, %a) = @_;
    my $name = $a{name} // 'wan';
    my $dir = File::Temp::tempdir("sbt-$name-XXXXXX", TMPDIR => 1,
                                  CLEANUP => !$ENV{WANLAB_KEEP});
    chmod 0755, $dir;
    File::Path::make_path("$dir/htdocs", "$dir/logs", { mode => 0755 });
    my $self = bless {
        %a,
        name => $name,
        dir => $dir,
        listen => $a{listen} // "$SndbufTune::WanLab::SERVER_ADDR:80",
        conf => "$dir/httpd.conf",
    }, $class;
    $self->add_file('/ready.txt', "ready\n");
    return $self;
}

sub dir { $_[0]{dir} }
sub docroot { "$_[0]{dir}/htdocs" }
sub error_log { "$_[0]{dir}/logs/error_log" }
sub access_log { "$_[0]{dir}/logs/access_log" }
sub host_port { $_[0]{listen} }

sub url {
    my ($self, $path) = @_;
    return "http://$self->{listen}$path";
}

sub _docpath {
    my ($self, $path) = @_;
    my $f = $self->docroot . $path;
    File::Path::make_path(File::Basename::dirname($f), { mode => 0755 });
    return $f;
}

sub add_file {
    my ($self, $path, $content) = @_;
    my $f = $self->_docpath($path);
    open my $fh, '>', $f or die "$f: $!";
    print $fh $content;
    close $fh;
    chmod 0644, $f;
    return $f;
}

# A file of SIZE random bytes; returns its SHA-256 (hex).
sub add_random_file {
    my ($self, $path, $size) = @_;
    my $f = $self->_docpath($path);
    open my $in, '<', '/dev/urandom' or die "/dev/urandom: $!";
    open my $out, '>', $f or die "$f: $!";
    binmode $_ for $in, $out;
    my $sha = Digest::SHA->new(256);
    my $left = $size;
    while ($left > 0) {
        my $n = $left < (1 << 20) ? $left : 1 << 20;
        read($in, my $buf, $n) == $n or die "short read from /dev/urandom";
        print $out $buf or die "$f: $!";
        $sha->add($buf);
        $left -= $n;
    }
    close $out or die "$f: $!";
    chmod 0644, $f;
    return $sha->hexdigest;
}

# A sparse file of SIZE bytes (zeros; costs no disk), for benchmarks.
sub add_sparse_file {
    my ($self, $path, $size) = @_;
    my $f = $self->_docpath($path);
    truncate_file($f, $size);
    chmod 0644, $f;
    return $f;
}

sub truncate_file {
    my ($f, $size) = @_;
    open my $fh, '>', $f or die "$f: $!";
    truncate $fh, $size or die "truncate $f: $!";
    close $fh;
}

# Another path for the same file (a symlink; FollowSymLinks is on).
# TARGET is a path under the document root, or (abs => 1) any absolute
# path `nobody` can read, e.g. a large file shared between servers.
sub add_link {
    my ($self, $path, $target, %o) = @_;
    my $f = $self->_docpath($path);
    unlink $f;
    my $to = $o{abs} ? $target : $self->docroot . $target;
    symlink $to, $f or die "symlink $f: $!";
}

sub _write_conf {
    my $self = shift;
    my $dir = $self->{dir};
    my $mods = SndbufTune::WanLab::modules_dir();
    my $so = SndbufTune::WanLab::module_so();
    my $threads = $self->{threads} // 128;
    my $procs = $self->{processes} // 2;
    my $workers = $threads * $procs;
    my $body = $self->{body} // '';
    my %tok = (DOCROOT => $self->docroot, DIR => $dir);
    $body =~ s/\@(DOCROOT|DIR)\@/$tok{$1}/g;
    my $load = ($self->{module} // 1)
        ? "LoadModule sndbuf_tune_module $so\n" : "# mod_sndbuf_tune not loaded\n";
    my $level = $self->{log_level} // 'info sndbuf_tune:debug';
    my $sendfile = ($self->{sendfile} // 1) ? 'On' : 'Off';
    my $fmt = join '\t', map { "$_->[0]=$_->[1]" } @$LOG_FIELDS;
    my $access = ($self->{access_log} // 1)
        ? qq{LogFormat "$fmt" sbt_wan\nCustomLog "$dir/logs/access_log" sbt_wan\n}
        : '';
    my $user = $> == 0 ? "User nobody\nGroup nogroup\n" : '';
    open my $fh, '>', $self->{conf} or die "$self->{conf}: $!";
    print $fh <<"EOF";
# generated by t/lib/SndbufTune/WanLab.pm ('$self->{name}')
ServerRoot "$dir"
LoadModule mpm_event_module $mods/mod_mpm_event.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule mime_module $mods/mod_mime.so
<IfModule !log_config_module>
LoadModule log_config_module $mods/mod_log_config.so
</IfModule>
$load${user}ServerName sbt-wan.test
Listen $self->{listen}
PidFile "$dir/httpd.pid"
ErrorLog "$dir/logs/error_log"
DefaultRuntimeDir "$dir"
DocumentRoot "${\ $self->docroot}"
TypesConfig /etc/mime.types
LogLevel $level
EnableSendfile $sendfile
Timeout 120
KeepAlive On
MaxKeepAliveRequests 0
StartServers $procs
ServerLimit $procs
ThreadsPerChild $threads
ThreadLimit $threads
MinSpareThreads $threads
MaxSpareThreads $workers
MaxRequestWorkers $workers
MaxConnectionsPerChild 0
ListenBacklog 1024
<Directory />
    Options FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
$access
# ---- body ----
$body
EOF
    close $fh;
}

# Worker (child) pids of the running server.
sub child_pids {
    my $self = shift;
    my $ppid = $self->{pid} or return ();
    my @kids;
    opendir my $d, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $st = <$fh>;
        close $fh;
        next unless $st && $st =~ /\)\s+\S+\s+(\d+)/;
        push @kids, $p if $1 == $ppid;
    }
    return sort { $a <=> $b } @kids;
}

sub configtest {
    my $self = shift;
    $self->_write_conf;
    my @pre = $self->{lab} ? ('ip', 'netns', 'exec', $self->{lab}->ns('server')) : ();
    return SndbufTune::WanLab::_capture(@pre, SndbufTune::WanLab::httpd_bin(),
                                        '-t', '-f', $self->{conf});
}

# Start, then wait (bounded) until /ready.txt answers: from the client
# namespace through the path when in a lab, directly otherwise.
sub start {
    my $self = shift;
    my %a = @_;
    $self->_write_conf;
    unlink $self->error_log, $self->access_log;
    my @pre = $self->{lab} ? ('ip', 'netns', 'exec', $self->{lab}->ns('server')) : ();
    push @pre, 'taskset', '-c', $self->{cpus} if defined $self->{cpus};
    my ($rc, $out) = SndbufTune::WanLab::_capture(@pre,
        SndbufTune::WanLab::httpd_bin(), '-f', $self->{conf}, '-k', 'start');
    if ($rc != 0) {
        $self->{error} = "apache2 -k start exit $rc: $out" . $self->log_text;
        return 0;
    }
    my ($pid) = poll_until(10, sub { $self->_pid }, 0.05);
    $self->{pid} = $pid;
    $LIVE_SERVERS{"$self"} = $self;
    SndbufTune::WanLab::_cleanup_on_signals();
    my $timeout = $a{timeout} // 20;
    my $url = $self->url('/ready.txt');
    my $probe = $self->{lab}
        ? sub {
            my $r = $self->{lab}->curl(url => $url, max_time => 3);
            return ($r->{http_code} // '') eq '200';
        }
        : sub {
            my ($rc2, $o) = SndbufTune::WanLab::_capture('curl', '-s', '-o',
                '/dev/null', '-w', '%{http_code}', '--max-time', '2', $url);
            return $o eq '200';
        };
    my ($ok) = poll_until($timeout, sub {
        return 0 unless $self->{pid} && kill(0, $self->{pid});
        return $probe->();
    }, 0.1);
    unless ($ok) {
        $self->{error} = "server did not answer $url within ${timeout}s: "
            . $self->log_text;
        $self->stop;
        return 0;
    }
    $self->{access_skip} = -s $self->access_log // 0;   # the probes
    return 1;
}

# Access-log lines (after the readiness probes) as hashes; '-' -> undef.
sub access_entries {
    my $self = shift;
    open my $fh, '<', $self->access_log or return ();
    seek $fh, $self->{access_skip} // 0, 0;
    my @e;
    while (my $l = <$fh>) {
        chomp $l;
        my %h;
        for my $kv (split /\t/, $l) {
            my ($k, $v) = split /=/, $kv, 2;
            $h{$k} = (defined $v && $v ne '-') ? $v : undef;
        }
        push @e, \%h;
    }
    close $fh;
    return @e;
}

# Wait (bounded) for the access-log entry of the request from client port
# CPORT (the log is written after the response is complete).
sub access_entry_for {
    my ($self, $cport, $timeout) = @_;
    my ($e) = poll_until($timeout // 5, sub {
        my @m = grep { ($_->{cport} // '') eq $cport && ($_->{uri} // '') ne '/ready.txt' }
            $self->access_entries;
        return $m[-1];
    }, 0.05);
    return $e;
}

sub stop {
    my $self = shift;
    delete $LIVE_SERVERS{"$self"};
    $self->SUPER::stop(@_);
}

sub DESTROY {
    my $self = shift;
    local ($?, $@, $!);
    $self->stop if $self->{pid};
}

END {
    local ($?, $@, $!);
    $_->stop for grep { $_->{pid} } values %LIVE_SERVERS;
}

1;
