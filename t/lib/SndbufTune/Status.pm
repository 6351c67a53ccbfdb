package SndbufTune::Status;
# The status page suite (t/status/*.t, one file per MPM): the status page
# (SetHandler sndbuf-tune-status), the metrics (sndbuf-tune-metrics) and
# their shared-memory counters, against a real apache2
# (SndbufTune::Server) under one MPM: t/status/<mpm>.t calls
# mpm_server, then the phases start_gen1 ... restart_gen3 and stop_mpm,
# each with its checks, in a fixed number (a check the kernel's limits
# rule out is skipped, not left out), which that file's plan adds up;
# and t/status/prometheus.t, run_prometheus(): a real Prometheus scrapes
# an apache2 (see there).
#
# One server goes through the whole life of the counters: access control
# and formats; a load from several client processes spread over several
# server processes, then the counters per vhost, policy and rule, the
# histogram, every format (?auto, HTML, metrics checked by promtool) with
# names that need escaping, mod_status's section and ?auto;
# `apache2 -k graceful` into a configuration with the vhosts reordered,
# some gone and one new (counters survive); `apache2 -k restart`
# (counters start over); stop, with no process left.
#
# Environment: SBT_STATUS_PROCS / SBT_STATUS_ROUNDS (client processes,
# default 6, and rounds each, default 3) for a heavier load; SBT_KEEP=1
# keeps the server's directory. Synchronisation is by bounded polling,
# never by sleeping, and nothing is asserted about wall-clock time.
use strict;
use warnings;

use Encode ();
use HTTP::Tiny ();
use JSON::PP ();
use POSIX ();
use Test::More ();

use SndbufTune::Reliability ();
use SndbufTune::Server ();
use SndbufTune::StallClient ();
use SndbufTune::Util qw(poll_until capture);

# Load: every client process makes ROUNDS x 2 requests to each test vhost.
my $PROCS = $ENV{SBT_STATUS_PROCS} || 6;
my $ROUNDS = $ENV{SBT_STATUS_ROUNDS} || 3;
my %FILE = (small => 1234, big => 256 * 1024 + 7);

# The counters: as ?auto names them, and as these checks do.
my @FIELDS = (
    [RequestsNone => 'requests_none'], [RequestsUnset => 'requests_unset'],
    [RequestsFixed => 'requests_fixed'], [RequestsAuto => 'requests_auto'],
    [BytesSent => 'bytes_sent'], [SndbufLimited => 'sndbuf_limited'],
    [Clamped => 'clamped'], [SetsockoptFailures => 'setsockopt_failures'],
);

# Filler vhosts: with the test's own, more names than the 256 slots.
my $FILLERS = 249;

# A ServerName and the rule file's name hold these bytes, which every
# format must make safe, each with the text it must show: quotes, a
# backslash and HTML's specials (as they are: each format escapes them
# its own way), valid UTF-8 (kept), and as %XX: a byte that is not UTF-8
# (Latin-1 among them), the bytes of control characters, C0, DEL and C1,
# and "%" itself (docs/status.md).
my @ODD = (['"q\\<&>' => '"q\\<&>'], ["\xc3\xa9" => "\x{e9}"],
           ["\xff" => '%FF'], ["\xe9" => '%E9'], ["\x01" => '%01'],
           ["\x1b" => '%1B'], ["\x7f" => '%7F'], ["\xc2\x9b" => '%C2%9B'],
           ['%' => '%25']);
my $ODD_BYTES = join '', map { $_->[0] } @ODD;
my $ODD_TEXT = join '', map { $_->[1] } @ODD;
# The odd vhost's own rule (never matched).
my $ODD_NET = '192.0.2.0/24';

# The MPMs' tuning: several processes, and processes that exit and are
# replaced during the load (MaxConnectionsPerChild).
my $THREADED = "StartServers 3\nServerLimit 8\nThreadLimit 4\n"
    . "ThreadsPerChild 4\nMaxRequestWorkers 32\nMinSpareThreads 4\n"
    . "MaxSpareThreads 32\nMaxConnectionsPerChild 30\n";
my %MPM_CONF = (
    prefork => "StartServers 3\nMinSpareServers 2\nMaxSpareServers 8\n"
             . "ServerLimit 10\nMaxRequestWorkers 10\n"
             . "MaxConnectionsPerChild 20\n",
    event => $THREADED,
    worker => $THREADED,
);

my ($SRV, $PORT, $RULES);   # the server under test, its port, rule file

# A check that says why it failed.
sub check {
    my ($cond, $name, @why) = @_;
    Test::More::ok($cond, $name)
        or Test::More::diag(join "\n", grep { defined } @why);
    return $cond;
}

# Checks failed so far in this file: a phase passed if it adds none.
sub failures {
    return scalar grep { !$_ } Test::More->builder->summary;
}

# $code's $n checks if $cond, else $n skips: a test file's plan holds
# whatever the kernel's limits.
sub checks_if {
    my ($cond, $n, $why, $code) = @_;
  SKIP: {
        Test::More::skip($why, $n) unless $cond;
        $code->();
    }
}

sub is_num {
    my ($got, $want, $name) = @_;
    return check(defined $got && $got =~ /^\d+$/ && $got == $want, $name,
                 "got " . ($got // 'undef') . ", want $want");
}

# ---------------------------------------------------------------------------
# HTTP/1.0, so that every response ends with the server closing: by then
# the request went through log_transaction and is counted.

sub http_get { return http_req('GET', @_) }

sub http_req {
    my ($method, $host, $path) = @_;
    my $c;
    my @r = eval {
        $c = SndbufTune::StallClient->new(port => $SRV->port, timeout => 60);
        $c->get($path, host => $host, method => $method, version => '1.0',
                headers => [$method eq 'POST' ? 'Content-Length: 0' : ()]);
    };
    return (0, {'x-received' => $c ? $c->received : 0}, $@) unless @r;
    return @r;
}

# A request refused before the server read it: the event MPM resets
# connections its listener had accepted when the process then exits
# (MaxConnectionsPerChild).  No response byte came back and the server
# never processed the request (it would have read it all and answered
# before closing), so it was not counted and may be made again.
sub http_get_retry {
    my ($host, $path, $retried) = @_;
    for (1 .. 5) {
        my @r = http_get($host, $path);
        return @r unless $r[0] == 0 && !$r[1]{'x-received'}
            && $r[2] =~ /reset by peer|refused/;
        $$retried++;
    }
    return http_get($host, $path);
}

# PROCS forked clients; each requests every target ROUNDS times.
sub load {
    my ($procs, $rounds, @targets) = @_;
    my @pids;
    for my $i (0 .. $procs - 1) {
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if (!$pid) {
            my $bad = 0;
            # Each client starts somewhere else in the list.
            my @t = (@targets[$i % @targets .. $#targets],
                     @targets[0 .. $i % @targets - 1]);
            for (1 .. $rounds) {
                for my $t (@t) {
                    my ($st, undef, $body) =
                        http_get_retry($t->[0], $t->[1], \my $retried);
                    print STDERR "# client: $t->[0] $t->[1]: made again "
                        . "$retried time(s), the server reset it unread\n"
                        if $retried;
                    next if $st == 200 && length($body) == $t->[2];
                    $bad++;
                    print STDERR "# client: $t->[0] $t->[1]: status $st, "
                        . length($body) . " bytes"
                        . ($st ? '' : " ($body)") . "\n";
                }
            }
            POSIX::_exit($bad > 255 ? 255 : $bad);
        }
        push @pids, $pid;
    }
    my $bad = 0;
    for (@pids) {
        waitpid($_, 0);
        $bad += ($? & 127) ? 1000 : $? >> 8;
    }
    return $bad;
}

# The test vhosts: name => [SndbufTune line or '', policy they count as].
my @TEST_VHOSTS = (
    ['fixed.test', 'SndbufTune 64k', 'fixed'],
    ['unset.test', 'SndbufTune unset', 'unset'],
    ['auto.test', 'SndbufTune auto', 'auto'],
    ['none.test', '', 'none'],
    ['net.test', 'Include <the rule file>', 'fixed'],
    ['clamp.test', 'SndbufTune 8m', 'fixed'],
);

sub vhost {
    my ($name, @lines) = @_;
    return join "\n    ", '<VirtualHost @LISTEN@>',
        "ServerName $name", @lines, "</VirtualHost>\n";
}

# The body of generation 1: the status pages, the test vhosts, one with an
# odd name, then FILLERS fillers. Generation 2 (graceful): the test vhosts
# reversed, a new one, the first ten fillers gone.
sub body {
    my $gen = shift;
    my @tests = map {
        my ($name, $line) = @$_;
        $line = "Include $RULES" if $name eq 'net.test';
        vhost($name, $line ? ($line) : ());
    } @TEST_VHOSTS;
    # a rule of the odd vhost: its name carries the vhost's
    push @tests, vhost("odd$ODD_BYTES.test", "SndbufTuneNetwork $ODD_NET unset");
    @tests = reverse @tests if $gen > 1;
    push @tests, vhost('new.test', 'SndbufTune 32k') if $gen > 1;
    my @fill = map { vhost(sprintf 'fill-%03d.test', $_) }
        ($gen > 1 ? 11 : 1) .. $FILLERS;
    return <<"EOF" . join("\n", @tests, @fill);
# configuration $gen
# The first vhost: the status pages, and the default for unknown names.
<VirtualHost \@LISTEN\@>
    ServerName status.test
    <Location /sbt-status>
        SetHandler sndbuf-tune-status
        Require ip 127.0.0.1
    </Location>
    <Location /sbt-other-ip>
        SetHandler sndbuf-tune-status
        Require ip 192.0.2.1
    </Location>
    <Location /sbt-metrics>
        SetHandler sndbuf-tune-metrics
        Require ip 127.0.0.1
    </Location>
    <Location /sbt-denied>
        SetHandler sndbuf-tune-status
        Require all denied
    </Location>
    <Location /server-status>
        SetHandler server-status
        Require ip 127.0.0.1
    </Location>
</VirtualHost>

EOF
}

# The page's ?auto as a structure: {generation, since, slots, kernel =>
# {wmem_max, tcp_wmem => [3], ...}, vhosts => [...], networks => [...]}, a
# slot as {slot, name, configured, requests_none, ..., effective_sndbuf =>
# {<bound> => n, above => n, unknown => n}, effective_sum}, in slot order;
# names as text (bytes if they are not clean UTF-8). undef unless every
# line is Key: value.
sub status_auto {
    my ($st, undef, $body) = http_get('status.test', '/sbt-status?auto');
    return undef unless $st == 200;
    my ($kv, $bad) = parse_auto($body);
    return undef if @$bad;
    my %field = map { ($_->[0] => $_->[1]) } @FIELDS;
    my %j = (generation => $kv->{SndbufTuneGeneration},
             since => $kv->{SndbufTuneCountersSince},
             slots => $kv->{SndbufTuneSlots},
             kernel => { wmem_max => $kv->{SndbufTuneKernelWmemMax},
                         so_buf_lock => $kv->{SndbufTuneKernelSoBufLock},
                         tcp_info => $kv->{SndbufTuneKernelTcpInfo},
                         tcp_wmem => [split ' ',
                                      $kv->{SndbufTuneKernelTcpWmem} // ''] });
    my %slot;
    for my $key (keys %$kv) {
        my ($t, $n, $k) = $key =~ /^SndbufTune(Vhost|Network)\[(\d+)\](\w+)$/
            or next;
        my $v = $slot{$t}{$n} //= { slot => $n };
        if ($k eq 'Name') { $v->{name} = utf8_text($kv->{$key}) // $kv->{$key} }
        elsif ($k eq 'Configured') { $v->{configured} = $kv->{$key} }
        elsif ($k eq 'EffectiveSum') { $v->{effective_sum} = $kv->{$key} }
        elsif ($k =~ /^(LargeResponses|LimitedBy\w+|SendMs\w+|Verdict)$/) {
            $v->{triage}{$k} = $kv->{$key};
        }
        elsif ($k =~ /^Effective(Unknown|Above\d+|\d+)$/) {
            # by its bound; 'above' and 'unknown' for the last two
            my $b = $1;
            $b = lc($b =~ s/\d+//r) unless $b =~ /^\d/;
            $v->{effective_sndbuf}{$b} = $kv->{$key};
        }
        elsif ($field{$k}) { $v->{ $field{$k} } = $kv->{$key} }
    }
    for ([Vhost => 'vhosts'], [Network => 'networks']) {
        my $s = $slot{ $_->[0] } || {};
        $j{ $_->[1] } = [map { $s->{$_} } sort { $a <=> $b } keys %$s];
    }
    return \%j;
}

sub by_name {
    my ($list, $name) = @_;
    my @m = grep { $_->{name} eq $name } @$list;
    return $m[0];
}

sub hist_sum {
    my $e = shift;
    my $s = 0;
    $s += $_ for values %$e;
    return $s;
}

sub requests {
    my $v = shift;
    return $v->{requests_none} + $v->{requests_unset}
         + $v->{requests_fixed} + $v->{requests_auto};
}

# The targets of one load run over the test vhosts (and more).
sub targets {
    my @names = @_;
    return map { my $n = $_; map { [$n, "/$_.bin", $FILE{$_}] } sort keys %FILE }
        @names;
}

# Distinct child pids in the access log since byte offset $from, for
# requests to @names.
sub pids_since {
    my ($from, @names) = @_;
    my %want = map { ("$_" => 1) } @names;
    my %pid = map { $want{ $_->{vhost} } ? ($_->{pid} => 1) : () }
        $SRV->access_entries(from => $from);
    return scalar keys %pid;
}

# Where in the access log the counters' current period starts.
my $LOG_PERIOD = 0;

# Access-log lines per vhost since the counters were last zeroed: one per
# request that went through log_transaction, so one per count.
sub log_lines {
    my %n;
    $n{ $_->{vhost} }++ for $SRV->access_entries(from => $LOG_PERIOD);
    return \%n;
}

# Check every test vhost against the expected count per policy (the same
# N for each vhost), and the rules.
sub check_counts {
    my ($j, $label, $N, %o) = @_;
    my $k = $j->{kernel};
    my $per_bytes = $N / 2 * ($FILE{small} + $FILE{big});
    my @names = map { $_->[0] } @TEST_VHOSTS;
    push @names, 'new.test' if exists $o{new};
    my $logged = log_lines();
    for my $name (@names) {
        my ($policy) = map { $_->[2] } grep { $_->[0] eq $name } @TEST_VHOSTS;
        $policy //= 'fixed';
        my $n = $name eq 'new.test' ? $o{new} : $N;
        my $bytes = $n / 2 * ($FILE{small} + $FILE{big});
        my $v = by_name($j->{vhosts}, "$name:$PORT");
        next unless check($v, "$label: $name has a slot");
        check($v->{configured}, "$label: $name is configured");
        for my $p (qw(none unset fixed auto)) {
            is_num($v->{"requests_$p"}, $p eq $policy ? $n : 0,
                   "$label: $name requests_$p");
        }
        is_num($v->{bytes_sent}, $bytes, "$label: $name bytes_sent");
        is_num(requests($v), $logged->{$name} // 0,
               "$label: $name requests equal its access-log lines");
        is_num($v->{setsockopt_failures}, 0,
               "$label: $name setsockopt_failures");
        is_num(hist_sum($v->{effective_sndbuf}), $n,
               "$label: $name histogram adds up to its requests");
        my %sizes = ('fixed.test' => 65536, 'net.test' => 131072,
                     'new.test' => 32768);
        if (my $size = $sizes{$name}) {
            checks_if($k->{wmem_max} >= $size, 2, "wmem_max < $size", sub {
                is_num($v->{effective_sndbuf}{2 * $size}, $n,
                       "$label: $name effective buffer 2 x $size");
                is_num($v->{effective_sum}, $n * 2 * $size,
                       "$label: $name effective buffers add up");
            });
            is_num($v->{clamped}, 0, "$label: $name clamped");
        }
        if ($name eq 'none.test') {
            is_num($v->{effective_sndbuf}{unknown}, $n,
                   "$label: none.test effective buffer unknown");
        }
        if ($name eq 'clamp.test') {
            my $clamps = $k->{wmem_max} && $k->{wmem_max} < 8 << 20;
            is_num($v->{clamped}, $clamps ? $n : 0,
                   "$label: clamp.test clamped to wmem_max $k->{wmem_max}");
            checks_if($clamps && $k->{wmem_max} >= 4096, 1,
                      'wmem_max does not clamp 8m', sub {
                # The bucket of 2 x wmem_max: the power of two at or
                # above it.
                my $b = 4096;
                $b *= 2 while $b < 2 * $k->{wmem_max} && $b < 1 << 30;
                is_num($v->{effective_sndbuf}{$b}, $n,
                       "$label: clamp.test effective buffer in bucket $b");
            });
        }
    }
    my $rule = by_name($j->{networks}, rule_name(1));
    if (check($rule, "$label: rule 127.0.0.0/8 has a slot")) {
        is_num($rule->{requests_fixed}, $N, "$label: rule requests_fixed");
        is_num(requests($rule), $N, "$label: rule requests in all");
        is_num($rule->{bytes_sent}, $per_bytes, "$label: rule bytes_sent");
        checks_if($k->{wmem_max} >= 131072, 1, 'wmem_max < 128k', sub {
            is_num($rule->{effective_sndbuf}{262144}, $N,
                   "$label: rule effective buffer 2 x 128k");
        });
    }
    my $idle = by_name($j->{networks}, rule_name(2));
    if (check($idle, "$label: rule 10.0.0.0/8 has a slot")) {
        is_num(requests($idle), 0, "$label: rule 10.0.0.0/8 never matched");
    }
}

# The name of the rule of line 1 or 2 of the rule file, as every format
# shows it: its network and its vhost's name, no file or line.
sub rule_name {
    my $line = shift;
    my $net = $line == 1 ? '127.0.0.0/8' : '10.0.0.0/8';
    return "$net in net.test:$PORT";
}

# A rule's metric labels: network and vhost, from its name ("(other)":
# network only).
sub rule_labels {
    my ($net, $vhost) = split / in /, shift, 2;
    return (network => $net, defined $vhost ? (vhost => $vhost) : ());
}

# A slot's name from a metric's labels (parse_prom's key, or a label hash).
sub prom_name {
    my ($table, %l) = @_;
    return $l{vhost} if $table eq 'vhost';
    return defined $l{vhost} ? "$l{network} in $l{vhost}" : $l{network};
}

# The slot names of one table in the parsed metrics $m.
sub prom_names {
    my ($m, $table) = @_;
    my $family = $table eq 'vhost' ? 'vhost' : 'network';
    return map {
        my ($name, @l) = split /\0/;
        $name eq "sndbuf_tune_${family}_requests_total" && "@l" =~ /policy=none/
            ? prom_name($table, map { split /=/, $_, 2 } @l) : ();
    } keys %$m;
}

sub parse_auto {
    my ($kv, $bad, $host) = SndbufTune::Util::parse_auto(shift);
    return ($kv, [defined $host ? $host : (), @$bad]);
}

# Prometheus' text format: ({"name\0label=value\0..." => value}, [lines
# it does not allow, and series given twice]), label values unescaped,
# labels sorted by name.
sub parse_prom {
    my $text = utf8_text(shift) // return ({}, ['not UTF-8']);
    my (%m, @bad);
    for my $line (split /\n/, $text) {
        next if $line =~ /^# (HELP|TYPE) \w+ ./;
        my ($name, $labels, $value) =
            $line =~ /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/
            or do { push @bad, $line; next };
        my %l;
        while (($labels // '')
               =~ /\G([a-zA-Z_]\w*)="((?:[^"\\]|\\[\\"n])*)"(,|$)/gc) {
            my ($k, $v) = ($1, $2);
            $l{$k} = $v =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/gre;
        }
        push @bad, $line
            if defined $labels && (pos($labels) // 0) < length $labels;
        my $key = prom_key($name, %l);
        push @bad, "series twice: $line" if exists $m{$key};
        $m{$key} = $value;
    }
    return (\%m, \@bad);
}

sub prom_key {
    my ($name, %l) = @_;
    return join "\0", $name, map { "$_=$l{$_}" } sort keys %l;
}

# The metrics say what ?auto ($j, read just before) says, for every slot
# but the status pages' own (which counts these pages); promtool accepts
# them.
sub check_prom {
    my ($label, $text, $j) = @_;
    my $m = prom_valid($label, $text);
    my (@why, %seen);
    my $want = sub {
        my ($value, $name, %l) = @_;
        my $key = prom_key("sndbuf_tune_$name", %l);
        $seen{$key} = 1;
        my $got = $m->{$key};
        push @why, "$key: " . ($got // 'none') . ", ?auto: $value"
            unless defined $got && $got eq $value;
    };
    $want->($j->{generation}, 'config_generation');
    $want->($j->{since}, 'counters_reset_timestamp_seconds');
    $want->($j->{kernel}{wmem_max}, 'kernel_wmem_max_bytes');
    $want->($j->{kernel}{$_}, "kernel_$_") for qw(so_buf_lock tcp_info);
    my @w = @{ $j->{kernel}{tcp_wmem} };
    $want->($w[$_], 'kernel_tcp_wmem_bytes', bound => (qw(min default max))[$_])
        for 0 .. 2;
    for ([vhost => 'vhosts'], [network => 'networks']) {
        my ($what, $list) = @$_;
        for my $v (@{ $j->{$list} }) {
            next if $v->{name} eq "status.test:$PORT";
            my @l = $what eq 'vhost' ? (vhost => $v->{name})
                                     : rule_labels($v->{name});
            $want->($v->{"requests_$_"}, "${what}_requests_total", @l,
                    policy => $_) for qw(none unset fixed auto);
            $want->($v->{bytes_sent}, "${what}_sent_bytes_total", @l);
            $want->($v->{sndbuf_limited},
                    "${what}_sndbuf_limited_responses_total", @l);
            $want->($v->{clamped}, "${what}_clamped_responses_total", @l);
            $want->($v->{setsockopt_failures},
                    "${what}_socket_call_failures_total", @l);
            my $e = $v->{effective_sndbuf};
            my $count = 0;
            for my $b (sort { $a <=> $b } grep { /^\d+$/ } keys %$e) {
                $count += $e->{$b};
                $want->($count, "${what}_effective_sndbuf_bytes_bucket", @l,
                        le => $b);
            }
            $count += $e->{above};
            $want->($count, "${what}_effective_sndbuf_bytes_bucket", @l,
                    le => '+Inf');
            $want->($count, "${what}_effective_sndbuf_bytes_count", @l);
            $want->($v->{effective_sum},
                    "${what}_effective_sndbuf_bytes_sum", @l);
            $want->($e->{unknown},
                    "${what}_effective_sndbuf_unknown_total", @l);
            # the triage, in the same families
            my ($tw, @tl) = ($what, @l);
            my $t = $v->{triage} || {};
            $want->($t->{LargeResponses}, "${tw}_large_responses_total", @tl);
            for my $lim (qw(Sndbuf Rwnd Network App)) {
                $want->($t->{"LimitedBy$lim"}, "${tw}_responses_limited_total",
                        @tl, by => lc $lim);
                # ?auto in ms, the metric in seconds to the microsecond
                my $k = prom_key("sndbuf_tune_${tw}_send_seconds_total", @tl,
                                 limit => lc $lim);
                $seen{$k} = 1;
                push @why, "$k: " . ($m->{$k} // 'none') . ", ?auto: "
                    . ($t->{"SendMs$lim"} // 'none') . ' ms'
                    unless defined $m->{$k} && defined $t->{"SendMs$lim"}
                        && int($m->{$k} * 1000 + 1e-6) == $t->{"SendMs$lim"};
            }
        }
    }
    my @extra = grep { !$seen{$_} && !/\Q=status.test:$PORT\E(\0|$)/ } keys %$m;
    check(!@why && !@extra && keys %seen > 1000,
          "$label: metrics say what ?auto says, for every slot",
          @why[0 .. ($#why > 9 ? 9 : $#why)],
          map { "not in ?auto: " . Encode::encode('UTF-8', s/\0/ /gr) }
          @extra[0 .. ($#extra > 4 ? 4 : $#extra)]);
}

# The metrics parse, every series once, and promtool accepts them; the
# parsed series (parse_prom).
sub prom_valid {
    my ($label, $text) = @_;
    my ($m, $bad) = parse_prom($text);
    check(!@$bad, "$label: metrics parse, each series once",
          map { "bad line: " . Encode::encode('UTF-8', $_) }
          @$bad[0 .. ($#$bad > 4 ? 4 : $#$bad)]);
    my ($rc, $out) = (127, '');
    if (open my $fh, '>', $SRV->dir . '/metrics.txt') {
        print $fh $text;
        close $fh;
        ($rc, $out) = capture('bash', '-c', 'promtool check metrics <"$1" 2>&1',
                              'promtool', $SRV->dir . '/metrics.txt');
    }
    checks_if($rc != 127 || $ENV{CI}, 1,
              'no promtool (apt-get install prometheus)', sub {
        check($rc == 0, "$label: promtool check metrics", $out);
    });
    return $m;
}

# $bytes as text if they are well-formed UTF-8 without a control character
# other than a newline, else undef.
sub utf8_text {
    my $bytes = shift;
    my $t = eval { Encode::decode('UTF-8', $bytes, Encode::FB_CROAK) };
    return defined $t && $t !~ /[\x00-\x09\x0b-\x1f\x7f-\x9f]/ ? $t : undef;
}

sub html_escape {
    return shift =~ s/&/&amp;/gr =~ s/</&lt;/gr =~ s/>/&gt;/gr =~ s/"/&quot;/gr;
}

# The odd names in every format: exact UTF-8 text, each format's escaping.
sub check_names {
    my ($mpm, $auto, $html, $metrics) = @_;
    my ($kv) = parse_auto(utf8_text($auto) // '');
    my %names = map { ($_ => 1) } @$kv{ grep { /Name$/ } keys %$kv };
    for (["odd$ODD_TEXT.test:$PORT", 'vhost'],
         ["$ODD_NET in odd$ODD_TEXT.test:$PORT", 'rule']) {
        my ($name, $what) = @$_;
        check($names{$name}, "$mpm: ?auto: the ${what}'s odd name, %-encoded",
              "names: " . join ', ', map { Encode::encode('UTF-8', $_) }
              grep { /odd|rules/ } sort keys %names);
        my $t = utf8_text($html) // '';
        check(index($t, html_escape($name)) >= 0 && index($t, $name) < 0,
              "$mpm: HTML: the ${what}'s odd name, %-encoded and escaped",
              "want " . Encode::encode('UTF-8', html_escape($name)));
        my %pl = $what eq 'vhost' ? (vhost => $name) : rule_labels($name);
        my $l = join ',', map { $_ . '="' . ($pl{$_} =~ s/([\\"])/\\$1/gr) . '"' }
            sort keys %pl;
        check(index(utf8_text($metrics) // '', "{$l") >= 0,
              "$mpm: metrics: the ${what}'s odd name, %-encoded and escaped",
              "want " . Encode::encode('UTF-8', $l));
    }
    check(defined utf8_text($auto), "$mpm: ?auto is UTF-8, no control bytes");
    check(defined utf8_text($html), "$mpm: HTML is UTF-8, no control bytes");
    check(defined utf8_text($metrics),
          "$mpm: metrics are UTF-8, no control bytes");
    my (undef, undef, $shtml) = http_get('status.test', '/server-status');
    my $at = index $shtml, '<h2>mod_sndbuf_tune</h2>';
    check($at >= 0 && defined utf8_text(substr $shtml, $at),
          "$mpm: mod_status HTML: our section is UTF-8, no control bytes");
    # mod_status's page is anyone's its Require lets in: no file of the
    # configuration there (core SendBufferSize's line, a rule's file),
    # while our own page names them
    my $dir = $SRV->dir;
    check($at >= 0 && index(substr($shtml, $at), $dir) < 0
          && index($shtml, '127.0.0.0/8 in net.test') >= 0,
          "$mpm: mod_status HTML: its rows name no file of the configuration",
          map { "at: $_" } substr($shtml, $at) =~ /([^<>]*\Q$dir\E[^<>]*)/g);
}

# ---------------------------------------------------------------------------

# The server for one MPM (event, worker or prefork), not started; the
# requests each test vhost gets in a load.  t/status/<mpm>.t then runs
# start_gen1, access_and_formats, load_gen1, graceful_gen2, restart_gen3
# and stop_mpm.
sub mpm_server {
    my $mpm = shift;
    $LOG_PERIOD = 0;
    $SIG{PIPE} = 'IGNORE';      # socket writes report EPIPE instead
    $SRV = SndbufTune::Server->new(
        name => "status-$mpm", mpm => $mpm, mpm_conf => $MPM_CONF{$mpm},
        modules => [qw(authz_host status)], log_level => 'info');
    $PORT = $SRV->port;
    $RULES = $SRV->dir . "/rules$ODD_BYTES.conf";
    Test::More::diag("$mpm MPM: ServerRoot " . $SRV->dir . ", port $PORT");
    $SRV->add_file("/$_.bin", 'x' x $FILE{$_}) for keys %FILE;
    open my $rf, '>', $RULES or die "$RULES: $!";
    print $rf "SndbufTuneNetwork 127.0.0.0/8 128k\n"
        . "SndbufTuneNetwork 10.0.0.0/8 auto\n";
    close $rf;
    return $PROCS * $ROUNDS * 2;
}

# Stop; true if no apache2 process is left.
sub stop_mpm {
    my $mpm = shift;
    Test::More::diag("error_log tail:\n" . $SRV->log_tail)
        unless Test::More->builder->is_passing;
    check($SRV->stop, "$mpm: apache2 -k stop", $SRV->error);
    my @left = $SRV->processes;
    # http_get_retry repeats a request reset before any answer, which a
    # child that crashed would look like too
    my @crash = grep { /$SndbufTune::Reliability::CRASH_RE/ }
                split /\n/, $SRV->log_text;
    check(!@crash, "$mpm: no child died of a signal",
          @crash[0 .. ($#crash > 4 ? 4 : $#crash)]);
    return check(!@left, "$mpm: no apache2 process left", "left: @left");
}

# ---------------------------------------------------------------------------
# A real Prometheus (t/status/prometheus.t): it scrapes a test apache2's
# sndbuf-tune-metrics every second; its HTTP API must then give, for rate()
# per policy and histogram_quantile over the effective sizes, the values
# the test's requests imply. The server is the prometheus binary run as
# this process's child, with a configuration, a TSDB and a web port of its
# own on 127.0.0.1, in the server's temporary directory: never the
# system's service (Debian's package starts one on 0.0.0.0:9090 where
# services start on install), which the test neither needs nor touches.

# The requests: vhost => [its SndbufTune line, requests]. 32k and 64k give
# buffers of 65536 and 131072 (Linux doubles), within Linux's default
# wmem_max (212992).
my %PROM_LOAD = ('small.test' => ['SndbufTune 32k', 30],
                 'large.test' => ['SndbufTune 64k', 10],
                 'unset.test' => ['SndbufTune unset', 20],
                 'none.test' => ['', 5]);

my %PROM_PIDS;      # Prometheus servers running, stopped at exit
END {
    local ($?, $!);
    prom_stop($_) for keys %PROM_PIDS;
}

sub prom_stop {
    my $pid = shift;
    delete $PROM_PIDS{$pid};
    kill 'TERM', $pid;
    my ($gone) = poll_until(30, sub {
        waitpid($pid, POSIX::WNOHANG()) == $pid }, 0.05);
    return 1 if $gone;
    kill 'KILL', $pid;
    waitpid($pid, 0);
    return 0;
}

# The API's answer to an instant query at $time (undef: now): its
# data.result, or undef.
sub prom_query {
    my ($api, $query, $time) = @_;
    my %form = (query => $query, defined $time ? (time => $time) : ());
    my $r = HTTP::Tiny->new(timeout => 10)->get("$api/api/v1/query?"
        . HTTP::Tiny->www_form_urlencode(\%form));
    return undef unless $r->{success};
    my $j = eval { JSON::PP->new->utf8->decode($r->{content}) };
    return $j && $j->{status} eq 'success' ? $j->{data}{result} : undef;
}

# histogram_quantile's answer for sizes given as {size => count}: the
# bucket (le) where the rank falls, interpolated linearly inside it.
sub implied_quantile {
    my ($q, %n) = @_;
    my @bounds = map { 1 << $_ } 12 .. 30;
    my ($total, $below, $lower) = (0, 0, 0);
    $total += $_ for values %n;
    for my $b (@bounds) {
        my $in = 0;
        $in += $n{$_} for grep { $_ > $lower && $_ <= $b } keys %n;
        return $lower + ($b - $lower) * ($q * $total - $below) / $in
            if $in && $below + $in >= $q * $total;
        ($below, $lower) = ($below + $in, $b);
    }
    return undef;
}

sub close_to {
    my ($got, $want, $name) = @_;
    return check(defined $got && abs($got - $want) <= 1e-9 * abs($want),
                 $name, "got " . ($got // 'undef') . ", want $want");
}

# Names an inexact encoding would merge: vhosts that differ in one Latin-1
# byte (each with a rule, whose name then differs the same way), or in
# one control byte; and the main server named "(other)" like the
# overflow row, which the fillers make appear.  Each as it must show.
my @TWINS = (["caf\xe9.test", 'caf%E9.test', "rules\xe9.conf"],
             ["caf\xe8.test", 'caf%E8.test', "rules\xe8.conf"],
             ["c\x01.test", 'c%01.test'], ["c\x02.test", 'c%02.test']);
my $PROM_FILLERS = 250;

sub prom_body {
    my @twins = map {
        my $rules = $_->[2] && $SRV->dir . "/$_->[2]";
        if ($rules) {
            open my $rf, '>', $rules or die "$rules: $!";
            print $rf "SndbufTuneNetwork 10.0.0.0/8 64k\n";
            close $rf;
        }
        vhost($_->[0], $rules ? ("Include $rules") : ());
    } @TWINS;
    return join "\n", 'ServerName (other)',
        # the first vhost: the one the scraper's Host: 127.0.0.1 finds
        vhost('metrics.test', '<Location /metrics>',
              '    SetHandler sndbuf-tune-metrics',
              '    Require ip 127.0.0.1', '</Location>',
              '<Location /status>', '    SetHandler sndbuf-tune-status',
              '    Require ip 127.0.0.1', '</Location>'),
        (map { vhost($_, $PROM_LOAD{$_}[0] || ()) } sort keys %PROM_LOAD),
        vhost('mark.test'), vhost("odd$ODD_BYTES.test"), @twins,
        map { vhost(sprintf 'fill-%03d.test', $_) } 1 .. $PROM_FILLERS;
}

# The twins in every format: each name once, as it must show.  Returns
# how many series the metrics have, and the series (parse_prom).
sub check_twins {
    my %want = (vhost => ['(other)', '%28other)',
                          map { "$_->[1]:$PORT" } @TWINS],
                rule => [map { "10.0.0.0/8 in $_->[1]:$PORT" }
                         grep { $_->[2] } @TWINS]);
    my (undef, undef, $metrics) = http_get('metrics.test', '/metrics');
    my $m = prom_valid('twins', $metrics);
    my $samples = grep { !/^#/ } split /\n/, $metrics;
    my (undef, undef, $auto) = http_get('metrics.test', '/status?auto');
    my ($kv) = parse_auto(utf8_text($auto) // '');
    my (undef, undef, $html) = http_get('metrics.test', '/status');
    $html = utf8_text($html) // '';
    my %html;
    ($html{vhost}) = $html =~ m{<h2>Virtual hosts</h2>(.*?)<h2>}s;
    ($html{rule}) = $html =~ m{<h2>SndbufTuneNetwork rules</h2>(.*)}s;
    for my $table (qw(vhost rule)) {
        my @prom = prom_names($m, $table);
        my $akey = $table eq 'vhost' ? 'Vhost' : 'Network';
        my @auto = @$kv{ grep { /^SndbufTune$akey\[\d+\]Name$/ } keys %$kv };
        # the counters table, the first in the section: one row a name
        my ($rows) = ($html{$table} // '') =~ m{(<table.*?</table>)}s;
        my @html = ($rows // '') =~ m{<td class="n">(.*?)</td>}g;
        for (['metrics', \@prom], ['?auto', \@auto],
             ['HTML', \@html, sub { html_escape(shift) }]) {
            my ($fmt, $names, $esc) = @$_;
            my %n;
            $n{$_}++ for @$names;
            my @twice = grep { $n{$_} > 1 } sort keys %n;
            my @missing = grep { !$n{ $esc ? $esc->($_) : $_ } } @{ $want{$table} };
            check(@$names > 1 && !@twice && !@missing,
                  "twins: $fmt: every $table name once, exact",
                  map { Encode::encode('UTF-8', $_) }
                  (map { "twice: $_" } @twice), map { "missing: $_" } @missing);
        }
    }
    return ($samples, $m);
}

# The prometheus binary on the PATH, or undef.
sub prometheus_bin {
    return (grep { -x } map { "$_/prometheus" } split /:/, $ENV{PATH})[0];
}

# The whole Prometheus run with prometheus $bin; true if it got to its end.
sub run_prometheus {
    my $bin = shift;
    $SIG{PIPE} = 'IGNORE';
    $SRV = SndbufTune::Server->new(name => 'status-prometheus',
                                   modules => ['authz_host']);
    $PORT = $SRV->port;
    $SRV->{body} = prom_body();
    $SRV->add_file('/f', 'x' x 1000);
    check($SRV->start, 'apache2 -k start', $SRV->error) or return;
    my ($samples, $page) = check_twins();

    my $dir = $SRV->dir . '/prometheus';
    mkdir $dir or die "$dir: $!";
    open my $fh, '>', "$dir/prometheus.yml" or die "$dir: $!";
    print $fh "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        . "scrape_configs:\n  - job_name: sbt\n    static_configs:\n"
        . "      - targets: ['127.0.0.1:$PORT']\n";
    close $fh;
    my $listen = '127.0.0.1:' . SndbufTune::Util::free_port();
    my $api = "http://$listen";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$dir/log";
        open STDERR, '>&', \*STDOUT;
        exec($bin, "--config.file=$dir/prometheus.yml",
             "--storage.tsdb.path=$dir/data", "--web.listen-address=$listen")
            or POSIX::_exit(127);
    }
    $PROM_PIDS{$pid} = 1;
    my $log = sub { open my $l, '<', "$dir/log" or return ''; local $/; <$l> };
    # Ready, and a first scrape stored: every series starts from zero.
    # (Prometheus starts its scrapes some 5 s after it starts.)
    my ($first) = poll_until(60, sub {
        return 'died' if waitpid($pid, POSIX::WNOHANG()) == $pid;
        my $r = prom_query($api, 'sndbuf_tune_config_generation');
        return $r && @$r ? 'scraped' : 0;
    }, 0.1);
    check(($first // '') eq 'scraped', 'prometheus starts and scrapes',
          $log->()) or return;
    my (undef, $ss) = capture('ss', '-Hltnp');
    my @socks = grep { /pid=$pid,/ } split /\n/, $ss;
    check(@socks && !grep({ !/\s127\.0\.0\.1:\d+\s/ } @socks),
          'prometheus listens on 127.0.0.1 only', @socks);

    my $bad = 0;
    for my $host (sort keys %PROM_LOAD) {
        for (1 .. $PROM_LOAD{$host}[1]) {
            my ($st, undef, $body) = http_get($host, '/f');
            $bad++ unless $st == 200 && length $body == 1000;
        }
    }
    is_num($bad, 0, 'every request answered in full');
    # The marker: counted after every request above, so a scrape that
    # saw it saw them all. That scrape's time is the time the queries use.
    http_get('mark.test', '/f');
    my $mark = 'sndbuf_tune_vhost_requests_total'
        . qq{{vhost="mark.test:$PORT",policy="none"}};
    my ($t) = poll_until(60, sub {
        # timestamp() of the selector itself: the scrape's time
        my $r = prom_query($api, "timestamp($mark) and $mark == 1");
        return $r && @$r ? $r->[0]{value}[1] : 0;
    }, 0.1);
    check($t, 'prometheus scraped the requests', $log->()) or return;

    my $r = prom_query($api,
        'count_over_time(sndbuf_tune_config_generation[1h])', $t);
    check($r && @$r && $r->[0]{value}[1] >= 2,
          'prometheus scraped at least twice');
    $r = prom_query($api, 'up{job="sbt"}', $t);
    check($r && @$r == 1 && $r->[0]{value}[1] eq '1', 'its target is up');

    # Requests per second per policy over the hour up to the last scrape:
    # the counts / 3600 exactly, as every series started at 0 in a scrape
    # and the hour ends at a scrape (nothing to extrapolate).
    my %n = map { ($_ => $PROM_LOAD{$_}[1]) } keys %PROM_LOAD;
    my %want = (none => 1 + $n{'none.test'}, auto => 0,
                unset => $n{'unset.test'},
                fixed => $n{'small.test'} + $n{'large.test'});
    $r = prom_query($api, 'sum by (policy) (rate('
        . 'sndbuf_tune_vhost_requests_total'
        . qq{{vhost!="metrics.test:$PORT"}[1h]))}, $t) || [];
    my %got = map { ($_->{metric}{policy} => $_->{value}[1]) } @$r;
    close_to($got{$_}, $want{$_} / 3600,
             "rate() of the $_ requests: $want{$_} in the hour")
        for sort keys %want;

    # Quantiles of the effective buffer over the two fixed vhosts.
    my %sizes = (65536 => $n{'small.test'}, 131072 => $n{'large.test'});
    for my $q (0.5, 0.75, 0.9) {
        $r = prom_query($api, "histogram_quantile($q, sum by (le) (rate("
            . 'sndbuf_tune_vhost_effective_sndbuf_bytes_bucket'
            . qq{{vhost=~"(small|large)\\\\.test:$PORT"}[1h])))}, $t);
        close_to($r && @$r ? $r->[0]{value}[1] : undef,
                 implied_quantile($q, %sizes), "histogram_quantile($q)");
    }
    $r = prom_query($api, 'increase('
        . 'sndbuf_tune_vhost_effective_sndbuf_bytes_sum'
        . qq{{vhost="small.test:$PORT"}[1h])}, $t);
    close_to($r && @$r ? $r->[0]{value}[1] : undef, $n{'small.test'} * 65536,
             "increase() of the histogram sum: $n{'small.test'} x 65536");

    # The odd name came through Prometheus' parser as the exact text.
    $r = prom_query($api, 'sndbuf_tune_vhost_requests_total{policy="none"}',
                    $t) || [];
    check((grep { $_->{metric}{vhost} eq "odd$ODD_TEXT.test:$PORT" } @$r),
          'prometheus has the odd name, %-encoded');
    # Every series of the page, each once: none lost as a duplicate.
    $r = prom_query($api, 'count({__name__=~"sndbuf_tune_.+"})', $t);
    is_num($r && @$r ? $r->[0]{value}[1] : undef, $samples,
           "prometheus stored each of the page's $samples series");
    my %names;
    for my $table (qw(vhost rule)) {
        my $family = $table eq 'vhost' ? 'vhost' : 'network';
        $r = prom_query($api, "sndbuf_tune_${family}_requests_total"
                        . '{policy="none"}', $t) || [];
        $names{$table} = join "\n", sort map {
            prom_name($table, %{ $_->{metric} }) } @$r;
    }
    for my $table (qw(vhost rule)) {
        my $want = join "\n", sort(prom_names($page, $table));
        check($names{$table} eq $want,
              "prometheus has the page's ${table}s, each once",
              Encode::encode('UTF-8', "got:\n$names{$table}\nwant:\n$want"));
    }

    check(prom_stop($pid), 'prometheus stops on SIGTERM', $log->());
    check(!kill(0, $pid), 'no prometheus process left');
    return check($SRV->stop, 'apache2 -k stop', $SRV->error);
}

# Configuration 1, started; its generation, or undef.
sub start_gen1 {
    my $mpm = shift;
    $SRV->{body} = body(1);
    my ($rc, $out) = $SRV->syntax_check;
    check(!$rc, "$mpm: configuration 1 is valid", $out) or return undef;
    check($SRV->start, "$mpm: apache2 -k start", $SRV->error) or return undef;
    my ($j) = poll_until(30, \&status_auto, 0.05);
    check($j, "$mpm: server up, ?auto answers", $SRV->log_tail)
        or return undef;
    return $j->{generation};
}

# Access control and formats, before any load.
sub access_and_formats {
    my $mpm = shift;
    my ($st) = http_get('status.test', '/sbt-other-ip?auto');
    is_num($st, 403, "$mpm: Require ip 192.0.2.1 forbids the page");
    ($st) = http_get('status.test', '/sbt-denied');
    is_num($st, 403, "$mpm: Require all denied forbids the page");
    ($st) = http_get('status.test', '/sbt-nothing?auto');
    is_num($st, 404, "$mpm: no SetHandler, no page");
    ($st) = http_req('POST', 'status.test', '/sbt-status');
    is_num($st, 405, "$mpm: POST is not allowed");
    my ($head_h, $hbody);
    ($st, $head_h, $hbody) = http_req('HEAD', 'status.test',
                                      '/sbt-status?auto');
    check($st == 200 && $hbody eq ''
          && ($head_h->{'content-type'} // '') eq 'text/plain; charset=utf-8',
          "$mpm: HEAD answers without a body");
    my $s = check_mod_status_auto("$mpm before any load");
    is_num($s->{SndbufTuneTotalRequestsFixed}, 0,
           "$mpm: mod_status ?auto section before any load: no fixed requests");
}

# mod_status's own ?auto, which apache_exporter and scripts read: its first
# line is the name the request used, every other one "Key: value", no key
# twice, mod_status's keys and our section's among them. Returns the keys.
sub check_mod_status_auto {
    my $label = shift;
    my ($st, undef, $body) = http_get('status.test', '/server-status?auto');
    my ($kvr, $badr, $host) = SndbufTune::Util::parse_auto($body);
    my %kv = %$kvr;
    my @bad = map { "bad line: $_" } @$badr;
    my @missing = grep { !defined $kv{$_} } 'Total Accesses', 'BusyWorkers',
        'Scoreboard', map({ "SndbufTuneTotal$_->[0]" } @FIELDS),
        'SndbufTuneKernelWmemMax', 'SndbufTuneKernelTcpWmem';
    check($st == 200 && ($host // '') eq 'status.test' && !@bad && !@missing,
          "$label: mod_status ?auto: the server's name, then Key: value lines",
          "status $st, first line " . ($host // 'undef'),
          @bad[0 .. ($#bad > 4 ? 4 : $#bad)], map { "missing: $_" } @missing);
    return \%kv;
}

# The first load, and every format's view of the counters after it.
sub load_gen1 {
    my ($mpm, $N) = @_;
    my $failed = failures();
    my $log_from = -s $SRV->access_log // 0;
    my @names = map { $_->[0] } @TEST_VHOSTS;
    my $bad = load($PROCS, $ROUNDS, targets(@names));
    is_num($bad, 0, "$mpm: load 1: every response complete");
    my $pids = pids_since($log_from, @names);
    check($pids >= 2, "$mpm: load 1 served by several processes ($pids)");
    # The last filler has no slot: "(other)" counts it.
    my $fill_ok = 0;
    for (1 .. 3) {
        my ($st) = http_get_retry(sprintf('fill-%03d.test', $FILLERS),
                                  '/small.bin', \my $retried);
        $fill_ok++ if $st == 200;
    }
    is_num($fill_ok, 3, "$mpm: 3 requests to the last filler");

    my $j = status_auto();
    check($j, "$mpm: ?auto parses after load 1") or return 0;
    is_num($j->{slots}, 256, "$mpm: 256 slots");
    open my $fh, '<', '/proc/sys/net/core/wmem_max' or die "wmem_max: $!";
    chomp(my $w = <$fh>);
    is_num($j->{kernel}{wmem_max}, $w, "$mpm: kernel wmem_max");
    open $fh, '<', '/proc/sys/net/ipv4/tcp_wmem' or die "tcp_wmem: $!";
    my @w = split ' ', scalar <$fh>;
    Test::More::is(join(' ', @{ $j->{kernel}{tcp_wmem} }), "@w",
                   "$mpm: kernel tcp_wmem");
    check_counts($j, "$mpm gen 1", $N);
    my $other = by_name($j->{vhosts}, '(other)');
    check(!by_name($j->{vhosts}, sprintf('fill-%03d.test:%d', $FILLERS, $PORT)),
          "$mpm: the last filler has no slot of its own");
    check($other && $other->{requests_none} == 3 && $other->{configured},
          "$mpm: (other) counted its 3 requests",
          "got " . join ', ',
          map { "$_=$other->{$_}" } sort keys %{ $other // {} });
    is_num(scalar(grep { $_->{name} ne '(other)' } @{ $j->{vhosts} }), 256,
           "$mpm: every slot in use");

    my ($ast, $ah, $abody) = http_get('status.test', '/sbt-status?auto');
    is_num($ast, 200, "$mpm: ?auto answers");
    check(($ah->{'content-type'} // '') =~ m{^text/plain},
          "$mpm: ?auto is text/plain");
    my ($auto, $badlines) = parse_auto($abody);
    check(!@$badlines && keys %$auto > 100,
          "$mpm: ?auto parses as Key: value lines", map { "bad line: $_" }
          @$badlines[0 .. ($#$badlines > 4 ? 4 : $#$badlines)]);

    my ($hst, $hh, $html) = http_get('status.test', '/sbt-status');
    is_num($hst, 200, "$mpm: HTML page answers");
    check(($hh->{'content-type'} // '') =~ m{^text/html},
          "$mpm: HTML is text/html");
    check(index($html, "fixed.test:$PORT") >= 0, "$mpm: HTML names the vhosts");
    my ($mst, $mh, $metrics) = http_get('status.test', '/sbt-metrics');
    check($mst == 200 && ($mh->{'content-type'} // '') eq
          'text/plain; version=0.0.4; charset=utf-8',
          "$mpm: metrics answer, in Prometheus' text format 0.0.4");
    check_prom("$mpm gen 1", $metrics, $j);
    check_names($mpm, $abody, $html, $metrics);

    my $s = check_mod_status_auto("$mpm after load 1");
    is_num($s->{SndbufTuneTotalRequestsFixed}, 3 * $N,
           "$mpm: mod_status ?auto section: fixed requests in all");
    is_num($s->{SndbufTuneTotalRequestsUnset}, $N,
           "$mpm: mod_status ?auto section: unset requests in all");
    is_num($s->{SndbufTuneTotalRequestsAuto}, $N,
           "$mpm: mod_status ?auto section: auto requests in all");
    check(defined $s->{SndbufTuneKernelWmemMax},
          "$mpm: mod_status ?auto section: kernel limits");
    my $requests = 0;
    $requests += $s->{"SndbufTuneTotalRequests$_"} // 0
        for qw(None Unset Fixed Auto);
    my $in_hist = 0;
    $in_hist += $s->{$_}
        for grep { /^SndbufTuneTotalEffective(Unknown|Above\d+|\d+)$/ } keys %$s;
    is_num($in_hist, $requests, "$mpm: mod_status ?auto section: the "
           . "histogram adds up to the requests");
    my (undef, undef, $shtml) = http_get('status.test', '/server-status');
    check(index($shtml, '<h2>mod_sndbuf_tune</h2>') >= 0
          && index($shtml, '<td class="n">all vhosts</td>') >= 0,
          "$mpm: mod_status HTML page has a section, with the totals' row");
    return failures() == $failed;
}

# ?auto once the server serves generation $gen.
sub generation_auto {
    my $gen = shift;
    my ($j) = poll_until(30, sub {
        my $j = status_auto();
        return $j && $j->{generation} == $gen ? $j : undef;
    }, 0.05);
    return $j;
}

# Graceful restart into configuration 2: counters survive it.
sub graceful_gen2 {
    my ($mpm, $N, $gen1) = @_;
    my $failed = failures();
    my @names = map { $_->[0] } @TEST_VHOSTS;
    my ($rc, $out) = $SRV->graceful(body => body(2));
    check(!$rc, "$mpm: apache2 -k graceful", $out);
    my $j = generation_auto($gen1 + 1);
    check($j, "$mpm: generation 2 serves", $SRV->log_tail) or return 0;
    check_counts($j, "$mpm gen 2 (graceful)", $N, new => 0);
    my $departed = qr/^fill-0(0[1-9]|10)\.test:/;
    my $stale = grep { $_->{name} =~ $departed } @{ $j->{vhosts} };
    my $stale_off = grep { $_->{name} =~ $departed && !$_->{configured} }
        @{ $j->{vhosts} };
    is_num($stale, 7, "$mpm: 3 departed fillers' slots went to new names");
    is_num($stale_off, 7, "$mpm: the other 7 show as not configured");
    my $last = by_name($j->{vhosts}, sprintf('fill-%03d.test:%d', $FILLERS, $PORT));
    check($last && $last->{configured} && requests($last) == 0,
          "$mpm: the last filler has a slot now, from zero");
    my $other = by_name($j->{vhosts}, '(other)');
    check($other && $other->{requests_none} == 3 && !$other->{configured},
          "$mpm: (other) kept its counts, nothing maps there now");
    # mod_status's totals: the names configured now, so not (other)'s 3
    # (the ?auto request just made may count or not yet)
    my $configured = 0;
    $configured += $_->{requests_none}
        for grep { $_->{configured} } @{ $j->{vhosts} };
    my $total = check_mod_status_auto("$mpm gen 2")->{SndbufTuneTotalRequestsNone};
    check(defined $total && ($total == $configured || $total == $configured + 1),
          "$mpm: mod_status totals count only the vhosts configured now",
          "total $total, configured vhosts $configured (+1)");

    my $log_from = -s $SRV->access_log;
    my $bad = load($PROCS, $ROUNDS, targets(@names, 'new.test'));
    is_num($bad, 0, "$mpm: load 2: every response complete");
    my $pids = pids_since($log_from, @names);
    check($pids >= 2, "$mpm: load 2 served by several processes ($pids)");
    $j = status_auto();
    check($j, "$mpm: ?auto parses after load 2");
    check_counts($j, "$mpm gen 2 after load", 2 * $N, new => $N) if $j;
    my (undef, undef, $metrics) = http_get('status.test', '/sbt-metrics');
    check_prom("$mpm gen 2", $metrics, $j) if $j;
    return failures() == $failed;
}

# Full restart: counters start over.
sub restart_gen3 {
    my ($mpm, $gen1) = @_;
    my $failed = failures();
    my @names = map { $_->[0] } @TEST_VHOSTS;
    $LOG_PERIOD = -s $SRV->access_log;
    my ($rc, $out) = $SRV->restart;
    check(!$rc, "$mpm: apache2 -k restart", $out);
    my $j = generation_auto($gen1 + 2);
    check($j, "$mpm: generation 3 serves", $SRV->log_tail) or return 0;
    check_counts($j, "$mpm gen 3 (full restart)", 0, new => 0);
    my $stale = grep { !$_->{configured} } @{ $j->{vhosts} }, @{ $j->{networks} };
    is_num($stale, 0, "$mpm: full restart forgets departed names");
    check(!by_name($j->{vhosts}, '(other)'), "$mpm: (other) is empty and hidden");
    my $bad = load(2, 1, targets(@names, 'new.test'));
    is_num($bad, 0, "$mpm: load 3: every response complete");
    $j = status_auto();
    check_counts($j, "$mpm gen 3 after load", 4, new => 4) if $j;
    return failures() == $failed;
}

1;
