package SndbufTune::Server;
# The one launcher for every apache2 the tests, the demo and the benchmarks
# start themselves (Apache::Test starts its own, from t/run): it writes the
# configuration, runs apache2 through t/bin/httpd (SBT_HTTPD_PRELOAD,
# SBT_HTTPD_WRAPPER) with the module under test (SBT_MODULE), and makes sure
# nothing of it outlives the test.
#
#   my $srv = SndbufTune::Server->new(name => 'x', body => $conf, %options);
#   my ($rc, $out) = $srv->syntax_check;     # apache2 -t
#   $srv->start or die $srv->error;          # returns once it answers
#   $srv->url('/f'), $srv->port, $srv->access_entry_for($client_port)
#   my ($rc, $out) = $srv->graceful(body => $new);     # or ->restart
#   $srv->stop or die $srv->error;           # no process of it left
#   (stop also runs at DESTROY, at exit and on INT/TERM/HUP/PIPE)
#
# Options, all optional:
#   name        names the directory and the configuration ('sbt')
#   dir         ServerRoot, logs in DIR/logs (default: a new temporary
#               directory, removed at exit unless SBT_KEEP=1)
#   docroot     DocumentRoot (default DIR/htdocs)
#   listen      'ADDR:PORT' (default '127.0.0.1:' . free port); or port
#   netns       run apache2 in this network namespace (ip netns exec)
#   cpus        pin it: taskset -c CPUS
#   mpm         event (default), worker or prefork
#   mpm_conf    the MPM's tuning lines (default: from threads, processes:
#               8 and 2; for prefork, processes; see spread)
#   spread      N: the event MPM's children share a crowd of N connections
#               (below), instead of threads per child
#   modules     more modules by name: [qw(status http2 ssl headers dir ...)]
#   sndbuf_tune 0: do not load mod_sndbuf_tune (default 1)
#   user, group who the children run as when started as root
#               (nobody, nogroup)
#   log_level   LogLevel ('info sndbuf_tune:debug')
#   access_log  1 (default): DIR/logs/access_log with @LOG_FIELDS; 0: none
#   decision_headers  1: X-Sndbuf-Policy/-Requested/-Effective headers
#   status_pages  1: the module's status page at /sbt-status and its
#               metrics at /sbt-metrics
#   sendfile    1/0: EnableSendfile On/Off (default: httpd's, Off)
#   timeout     Timeout (30)
#   keep        1: the server and its directory outlive this process (demo)
#   tokens      { NAME => value }: more @NAME@ for the body
#   body        the caller's configuration, last; it may use @PORT@,
#               @LISTEN@, @ADDR@, @DIR@, @DOCROOT@ and the tokens
#   probe       sub { $srv } true once the server answers (default: a TCP
#               connect to the listen address, inside netns if any)
#   ready_path  a path the probe requests; access_entries leaves it out
use strict;
use warnings;

use Digest::SHA ();
use File::Basename ();
use File::Path ();
use File::Temp ();
use IO::Socket::IP;
use POSIX ();

use SndbufTune::Util qw(module_path httpd_command modules_dir free_port
                        poll_until capture exit_on_signals);

# The access log: name => LogFormat item, written as name=value, tab
# separated; access_entries reads it back ('-' becomes undef).
our @LOG_FIELDS = (
    [time_us => '%{usec}t'],  [pid => '%P'],          [client => '%{c}a'],
    [cport => '%{remote}p'],  [vhost => '%v'],        [host => '%{Host}i'],
    [method => '%m'],         [uri => '%U'],          [status => '%>s'],
    [bytes => '%B'],          [ka => '%k'],           [duration_us => '%D'],
    [policy => '%{SNDBUF_TUNE_POLICY}n'],
    [requested => '%{SNDBUF_TUNE_REQUESTED}n'],
    [effective => '%{SNDBUF_TUNE_EFFECTIVE}n'],
    [rule => '%{SNDBUF_TUNE_RULE}n'],
    [rtt_us => '%{SNDBUF_TUNE_RTT_US}n'],
    [bw_bps => '%{SNDBUF_TUNE_BW_BPS}n'],
    [retunes => '%{SNDBUF_TUNE_RETUNES}n'],
    [limited_ms => '%{SNDBUF_TUNE_SNDBUF_LIMITED_MS}n'],
    [delivery_bps => '%{SNDBUF_TUNE_DELIVERY_BPS}n'],
    [min_rtt_us => '%{SNDBUF_TUNE_MIN_RTT_US}n'],
    [retrans => '%{SNDBUF_TUNE_RETRANS}n'],
    [sndbuf_ms => '%{SNDBUF_TUNE_SNDBUF_LIMITED_MS}n'],
    [rwnd_ms => '%{SNDBUF_TUNE_RWND_LIMITED_MS}n'],
    [network_ms => '%{SNDBUF_TUNE_NETWORK_MS}n'],
    [app_ms => '%{SNDBUF_TUNE_APP_MS}n'],
    [goodput_bps => '%{SNDBUF_TUNE_GOODPUT_BPS}n'],
    [verdict => '%{SNDBUF_TUNE_VERDICT}n'],
);

my %LIVE;           # started by this process and not stopped (for END)

sub new {
    my ($class, %a) = @_;
    my $self = bless { name => 'sbt', mpm => 'event', %a }, $class;
    unless ($self->{dir}) {
        $self->{dir} = File::Temp::tempdir("sbt-$self->{name}-XXXXXX",
            TMPDIR => 1, CLEANUP => !$ENV{SBT_KEEP} && !$self->{keep});
        chmod 0755, $self->{dir};       # the children's user reads it
    }
    $self->{docroot} //= "$self->{dir}/htdocs";
    $self->{listen} //= '127.0.0.1:' . ($self->{port} // free_port());
    ($self->{addr}, $self->{port}) = $self->{listen} =~ /^(.*):(\d+)$/
        or die "listen: ADDR:PORT, not '$self->{listen}'";
    $self->{conf} = "$self->{dir}/httpd.conf";
    File::Path::make_path("$self->{dir}/logs", $self->{docroot},
                          { mode => 0755 });
    return $self;
}

sub dir { $_[0]{dir} }
sub docroot { $_[0]{docroot} }
sub conf { $_[0]{conf} }
sub port { $_[0]{port} }
sub error { $_[0]{error} }
sub error_log { "$_[0]{dir}/logs/error_log" }
sub access_log { "$_[0]{dir}/logs/access_log" }
sub pid_file { "$_[0]{dir}/httpd.pid" }
sub url { "http://$_[0]{listen}$_[1]" }

# ------------------------------------------------------ configuration --

# LoadModule lines for apache2's own modules, by name ('status' is
# mod_status.so, status_module). With $guard, each in <IfModule !...>, so
# that a module built in or loaded twice does no harm.
sub load_module_lines {
    my ($guard, @names) = @_;
    my $mods = modules_dir();
    return join '', map {
        my $line = "LoadModule ${_}_module $mods/mod_$_.so\n";
        $guard ? "<IfModule !${_}_module>\n    $line</IfModule>\n" : $line;
    } @names;
}

# spread => N under event: one listening socket shared by several
# children hands each new connection to the child whose listener wakes
# first, and on 2 cores one child often takes half a crowd and another
# none (4 children, 20 downloads: 9/8/3/0). SO_REUSEPORT
# (ListenCoresBucketsRatio) makes at most one bucket a CPU, so no more
# than 2 here. What spreads a crowd is event's own limit: a child stops
# accepting while it holds ThreadsPerChild + idle workers x
# AsyncRequestWorkerFactor connections or more. Downloads in write
# completion hold no worker, so with a factor of 1 the limit is 2 x
# ThreadsPerChild: ThreadsPerChild is set so that it is N / children + 1
# or 2, and the others take the rest (4 children: 20 downloads 5/5/6/4,
# 6/5/3/6; 100: 26/26/23/25). Room for N + children at least, so that
# no download waits in the backlog for long.
sub _spread_conf {
    my ($self, $p) = @_;
    my $t = POSIX::ceil((POSIX::ceil($self->{spread} / $p) + 1) / 2);
    my $n = $p * $t;
    return "StartServers $p\nServerLimit $p\nThreadsPerChild $t\n"
         . "ThreadLimit $t\nMinSpareThreads 1\nMaxSpareThreads $n\n"
         . "MaxRequestWorkers $n\nAsyncRequestWorkerFactor 1\n"
         . "MaxConnectionsPerChild 0\n";
}

sub _mpm_conf {
    my $self = shift;
    return $self->{mpm_conf} if defined $self->{mpm_conf};
    my $p = $self->{processes} // 2;
    return $self->_spread_conf($p)
        if $self->{spread} && $self->{mpm} eq 'event';
    return "StartServers $p\nMinSpareServers 1\nMaxSpareServers $p\n"
         . "ServerLimit $p\nMaxRequestWorkers $p\nMaxConnectionsPerChild 0\n"
        if $self->{mpm} eq 'prefork';
    my $t = $self->{threads} // 8;
    my $n = $p * $t;
    return "StartServers $p\nServerLimit $p\nThreadsPerChild $t\n"
         . "ThreadLimit $t\nMinSpareThreads $t\nMaxSpareThreads $n\n"
         . "MaxRequestWorkers $n\nMaxConnectionsPerChild 0\n";
}

sub _body {
    my $self = shift;
    my %tok = (PORT => $self->{port}, LISTEN => $self->{listen},
               ADDR => $self->{addr}, DIR => $self->{dir},
               DOCROOT => $self->{docroot}, %{ $self->{tokens} || {} });
    my $re = join '|', map { quotemeta } keys %tok;
    return ($self->{body} // '') =~ s/\@($re)\@/$tok{$1}/gr;
}

sub conf_text {
    my $self = shift;
    my ($dir, $log) = ($self->{dir}, "$self->{dir}/logs");
    die "mpm: event, worker or prefork, not '$self->{mpm}'"
        unless $self->{mpm} =~ /^(event|worker|prefork)$/;
    my @mods = ('authz_core', 'mime', 'log_config', @{ $self->{modules} || [] });
    push @mods, 'headers' if $self->{decision_headers};
    my %seen;
    my $text = "# generated by t/lib/SndbufTune/Server.pm ('$self->{name}')\n"
        . qq{ServerRoot "$dir"\n}
        . load_module_lines(0, "mpm_$self->{mpm}")
        . load_module_lines(1, grep { !$seen{$_}++ } @mods);
    $text .= 'LoadModule sndbuf_tune_module ' . module_path() . "\n"
        if $self->{sndbuf_tune} // 1;
    $text .= 'User ' . ($self->{user} // 'nobody') . "\n"
           . 'Group ' . ($self->{group} // 'nogroup') . "\n" if $> == 0;
    $text .= <<"EOF";
ServerName localhost
Listen $self->{listen}
PidFile "$dir/httpd.pid"
DefaultRuntimeDir "$dir"
ErrorLog "$log/error_log"
LogLevel ${\ ($self->{log_level} // 'info sndbuf_tune:debug') }
DocumentRoot "$self->{docroot}"
TypesConfig /etc/mime.types
Timeout ${\ ($self->{timeout} // 30) }
KeepAlive On
MaxKeepAliveRequests 0
ListenBacklog 1024
${\ $self->_mpm_conf }<Directory />
    Options FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
EOF
    $text .= 'EnableSendfile ' . ($self->{sendfile} ? 'On' : 'Off') . "\n"
        if defined $self->{sendfile};
    if ($self->{access_log} // 1) {
        my $fmt = join '\t', map { "$_->[0]=$_->[1]" } @LOG_FIELDS;
        $text .= qq{LogFormat "$fmt" sbt_fields\n}
               . qq{CustomLog "$log/access_log" sbt_fields\n};
    }
    $text .= join '', map { qq{Header always set X-Sndbuf-$_ "%{SNDBUF_TUNE_\U$_\E}e"\n} }
        qw(Policy Requested Effective) if $self->{decision_headers};
    $text .= join '', map { "<Location /sbt-$_->[0]>\n    SetHandler "
                            . "sndbuf-tune-$_->[1]\n</Location>\n" }
        [status => 'status'], [metrics => 'metrics'] if $self->{status_pages};
    return $text . "# ---- the caller's configuration ----\n" . $self->_body . "\n";
}

sub write_conf {
    my $self = shift;
    open my $fh, '>', $self->{conf} or die "$self->{conf}: $!";
    print $fh $self->conf_text;
    close $fh or die "$self->{conf}: $!";
}

# ------------------------------------------------------------ running --

# apache2 with our configuration, in the namespace, pinned (for start).
sub _cmd {
    my ($self, @args) = @_;
    my @pre;
    push @pre, 'ip', 'netns', 'exec', $self->{netns} if $self->{netns};
    push @pre, 'taskset', '-c', $self->{cpus} if defined $self->{cpus};
    return (@pre, httpd_command('-f', $self->{conf}, @args));
}

# `apache2 -t`: (exit code, output).
sub syntax_check {
    my $self = shift;
    $self->write_conf;
    return capture($self->_cmd('-t'));
}

# Every process running with our configuration file: the parent and its
# children (whatever wrapper they run under).
sub processes {
    my $self = shift;
    my @pids;
    for my $p (glob '/proc/[0-9]*') {
        open my $fh, '<', "$p/cmdline" or next;
        local $/;
        my $cmd = <$fh> // '';
        close $fh;
        push @pids, $p =~ m{(\d+)$} if index($cmd, "\0$self->{conf}\0") >= 0;
    }
    return grep { $_ != $$ } @pids;
}

sub _pidfile_pid {
    my $self = shift;
    open my $fh, '<', $self->pid_file or return undef;
    my $pid = <$fh>;
    close $fh;
    return undef unless ($pid // '') =~ /^(\d+)/;
    $pid = $1;
    return (grep { $_ == $pid } $self->processes) ? $pid : undef;
}

sub pid { $_[0]{pid} // $_[0]->_pidfile_pid }

# The parent's children (workers).
sub child_pids {
    my $self = shift;
    my $ppid = $self->pid or return ();
    my @kids;
    for my $p ($self->processes) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $st = <$fh> // '';
        close $fh;
        push @kids, $p if $st =~ /\)\s+\S+\s+(\d+)/ && $1 == $ppid;
    }
    return sort { $a <=> $b } @kids;
}

sub _connect_probe {
    my $self = shift;
    if ($self->{netns}) {
        my ($a, $p) = ($self->{addr} =~ s/^\[(.*)\]$/$1/r, $self->{port});
        my ($rc) = capture('ip', 'netns', 'exec', $self->{netns}, 'bash',
                           '-c', "exec 3<>/dev/tcp/$a/$p");
        return $rc == 0;
    }
    my $s = IO::Socket::IP->new(PeerHost => $self->{addr} =~ s/^\[(.*)\]$/$1/r,
                                PeerPort => $self->{port}, Proto => 'tcp',
                                Timeout => 2) or return 0;
    close $s;
    return 1;
}

# Start; true once the probe says the server answers (bounded: $o{timeout},
# default 30 s). On failure: false, the reason in ->error, nothing left
# running.
sub start {
    my ($self, %o) = @_;
    delete $self->{error};
    $self->write_conf;
    my ($rc, $out) = capture($self->_cmd('-k', 'start'));
    if ($rc != 0) {
        $self->{error} = "apache2 -k start: exit $rc: $out" . $self->log_tail;
        $self->stop;
        return 0;
    }
    $LIVE{"$self"} = $self unless $self->{keep};
    exit_on_signals();
    my $probe = $self->{probe} || \&_connect_probe;
    my ($state) = poll_until($o{timeout} // 30, sub {
        my $pid = $self->_pidfile_pid or return 0;
        return 'died' unless kill 0, $pid;
        $self->{pid} = $pid;
        return $probe->($self) ? 'up' : 0;
    }, 0.05);
    return 1 if ($state // '') eq 'up';
    $self->{error} = "apache2 did not answer on $self->{listen} ("
        . ($state // 'timeout') . "):\n" . $self->log_tail;
    $self->stop;
    return 0;
}

# Stop; true when no process with our configuration is left (each one
# that lingers for 30 s is killed, and named in ->error).
sub stop {
    my $self = shift;
    delete $LIVE{"$self"};
    my $pid = $self->pid;
    if ($pid) {
        capture(httpd_command('-f', $self->{conf}, '-k', 'stop'));
        my ($gone) = poll_until(30, sub { !kill 0, $pid }, 0.05);
        kill 'KILL', $pid unless $gone;
    }
    delete $self->{pid};
    my ($clean) = poll_until(30, sub { !$self->processes }, 0.05);
    return 1 if $clean;
    my @left = $self->processes;
    kill 'KILL', @left;
    $self->{error} = "processes left after apache2 -k stop: @left";
    return 0;
}

# apache2 -k graceful / restart after applying %changes (body, ...) and
# rewriting the configuration: (exit code, output).
sub _signal {
    my ($self, $how, %changes) = @_;
    @$self{keys %changes} = values %changes;
    $self->write_conf;
    return capture($self->_cmd('-k', $how));
}
sub graceful { shift->_signal('graceful', @_) }
sub restart { shift->_signal('restart', @_) }

sub DESTROY {
    my $self = shift;
    local ($?, $@, $!);
    $self->stop if $LIVE{"$self"};
}

END {
    local ($?, $@, $!);
    $_->stop for values %LIVE;
}

# ---------------------------------------------------------------- logs --

sub log_text {
    my $self = shift;
    open my $fh, '<', $self->error_log or return '';
    local $/;
    my $t = <$fh> // '';
    close $fh;
    return $t;
}

sub log_tail {
    my @l = split /\n/, $_[0]->log_text;
    splice @l, 0, @l - 30 if @l > 30;
    return join '', map { "$_\n" } @l;
}

# The access log's entries as hashes (from byte offset $o{from}), without
# the probe's requests.
sub access_entries {
    my ($self, %o) = @_;
    open my $fh, '<', $self->access_log or return ();
    seek $fh, $o{from}, 0 if $o{from};
    my @e;
    while (my $l = <$fh>) {
        chomp $l;
        my %h = map {
            my ($k, $v) = split /=/, $_, 2;
            ($k => (defined $v && $v ne '-') ? $v : undef);
        } split /\t/, $l;
        push @e, \%h unless $self->{ready_path}
            && ($h{uri} // '') eq $self->{ready_path};
    }
    close $fh;
    return @e;
}

# The entry of the last request from client port $cport, once it is
# written (after the response; bounded wait, default 5 s).
sub access_entry_for {
    my ($self, $cport, $timeout) = @_;
    my ($e) = poll_until($timeout // 5, sub {
        (grep { ($_->{cport} // '') eq $cport } $self->access_entries)[-1];
    }, 0.05);
    return $e;
}

# ----------------------------------------------------------- documents --

sub _docpath {
    my ($self, $path) = @_;
    my $f = $self->{docroot} . $path;
    File::Path::make_path(File::Basename::dirname($f), { mode => 0755 });
    return $f;
}

sub add_file {
    my ($self, $path, $content) = @_;
    my $f = $self->_docpath($path);
    open my $fh, '>', $f or die "$f: $!";
    print $fh $content;
    close $fh or die "$f: $!";
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
    for (my $left = $size; $left > 0; $left -= 1 << 20) {
        my $n = $left < (1 << 20) ? $left : 1 << 20;
        read($in, my $buf, $n) == $n or die "short read from /dev/urandom";
        print $out $buf or die "$f: $!";
        $sha->add($buf);
    }
    close $out or die "$f: $!";
    chmod 0644, $f;
    return $sha->hexdigest;
}

# Another path for a file (a symlink): TARGET under the document root, or
# (abs => 1) any absolute path the children can read.
sub add_link {
    my ($self, $path, $target, %o) = @_;
    my $f = $self->_docpath($path);
    unlink $f;
    symlink $o{abs} ? $target : $self->{docroot} . $target, $f
        or die "symlink $f: $!";
    return $f;
}

1;
