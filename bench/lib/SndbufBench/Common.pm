package SndbufBench::Common;
# What bench/run's parts share: the run's state (%RES, the results by part,
# as the JSON file keeps them; %opt, the command line; $Q, --quick; $CPUS),
# the configurations and paths, formatting, tables, the WAN lab's helpers
# (lab up and down, relay health, a configuration's server, delivery
# rates), sparse data files and the loopback servers that wrk measures.
# Everything here is exported with the tag :all. init() sets the state
# from the command line, once, before any part runs.
use strict;
use warnings;
use utf8;

use Exporter 'import';
use File::Temp ();
use Time::HiRes ();

use SndbufTune::Kernel qw(tcp_wmem wmem_max ss_sockets);
use SndbufTune::Server ();
use SndbufTune::Util qw(top_dir module_path httpd_command sha256_file
                        capture poll_until parse_auto);
use SndbufTune::WanLab qw(lab_env_problem goodput_limit_bps mss_for_mtu jain
                          median delivered_bytes steady_rate);

our (%RES, %opt, $Q, $CPUS, %WANT_CONFIG, %CONFIGS, @CONFIG_ORDER, @PATHS, %PATH);
our $T_START = Time::HiRes::time();
our $TOP = top_dir();
our $SO = module_path();
$CPUS = 1;
# connections of every wrk run (rules and loopback)
our $WRK_CONNS = 16;

our @EXPORT_OK = qw(%RES %opt $Q $CPUS $T_START $TOP $SO $WRK_CONNS %CONFIGS
    @CONFIG_ORDER @PATHS %PATH configs_of say_ mbit kib mib pct ratio ratio3
    fmt_or div mean max_of size_label shell pick window_times data_file
    md_table print_table cfg_cell config_legend lab_up lab_down relay_reset
    cell_health config_sysctls wan_server delivered_bytes steady_rate
    loopback_server wrk_run wrk_round round_order write_rules
    tcp_wmem wmem_max ss_sockets top_dir module_path httpd_command
    sha256_file capture poll_until parse_auto lab_env_problem
    goodput_limit_bps mss_for_mtu jain median median_ci);
our %EXPORT_TAGS = (all => \@EXPORT_OK);

# The command line's options (parsed by bench/run) that the parts read.
sub init {
    my %o = @_;
    %opt = %o;
    $Q = $opt{quick};
    add_crowd_config($_) for @{ $opt{'crowd-config'} || [] };
    %WANT_CONFIG = map { $_ => 1 } split /,/, $opt{configs} // '';
    for (keys %WANT_CONFIG) {
        die "bench/run: unknown configuration '$_' (have: @CONFIG_ORDER)\n"
            unless $CONFIGS{$_};
    }
    $_->{mtu} = $opt{'lan-mtu'} // 1500 for grep { $_->{name} eq 'lan' } @PATHS;
    $_->{label} =~ s/\@LANMTU\@/$_->{mtu}/ for @PATHS;
    for (split /,/, $opt{paths} // '') {
        die "bench/run: no path '$_' (have: @{[ map { $_->{name} } @PATHS ]})\n"
            unless $PATH{$_};
    }
}

# --------------------------------------------------------- configurations --

# name => label, load the module?, the configuration's lines (may use @RATE@,
# the path's rate in Mbit/s), sysctls set in the lab's server namespace
# while it runs (and put back after)
%CONFIGS = (
    core16k  => { label => 'core SendBufferSize 16384', module => 0,
                  body => "SendBufferSize 16384\n" },
    core256k => { label => 'core SendBufferSize 262144', module => 0,
                  body => "SendBufferSize 262144\n" },
    nomod    => { label => 'kernel autotuning: module not loaded', module => 0,
                  body => '' },
    none     => { label => 'no tuning (module loaded, no directive)',
                  module => 1, body => '' },
    unset    => { label => 'SndbufTune unset', module => 1,
                  body => "SndbufTune unset\n" },
    fixed16k => { label => 'SndbufTune 16k', module => 1,
                  body => "SndbufTune 16k\n" },
    fixed64k => { label => 'SndbufTune 64k', module => 1,
                  body => "SndbufTune 64k\n" },
    auto     => { label => 'SndbufTune auto (measured)', module => 1,
                  body => "SndbufTune auto\n" },
    autobw   => { label => 'SndbufTune auto + SndbufTuneBandwidth <path rate>',
                  module => 1,
                  body => "SndbufTune auto\nSndbufTuneBandwidth \@RATE\@mbit\n" },
    lowat    => { label => 'kernel autotuning (module not loaded) + '
                           . 'net.ipv4.tcp_notsent_lowat=16384', module => 0,
                  body => '', sysctl => { 'net.ipv4.tcp_notsent_lowat' => 16384 } },
);
@CONFIG_ORDER = qw(core16k core256k nomod none unset fixed16k fixed64k auto
                 autobw lowat);

# --crowd-config NAME=BODY: one more configuration for the crowds part
# (the module loaded; BODY's \n are new lines, @RATE@ the path's rate in
# Mbit/s), held to its targets as auto is. A %CONFIGS entry with
# crowds => 1 does the same from the code.
sub add_crowd_config {
    my ($spec) = @_;
    my ($name, $body) = $spec =~ /^(\w+)=(.+)$/s
        or die "bench/run: --crowd-config NAME=BODY, not '$spec'\n";
    die "bench/run: --crowd-config $name: a configuration of that name "
        . "exists\n" if $CONFIGS{$name};
    $body =~ s/\\n/\n/g;
    $body .= "\n" unless $body =~ /\n\z/;
    $CONFIGS{$name} = { label => join(' + ', split /\n/, $body)
                                 . ' (--crowd-config)',
                        module => 1, body => $body, crowds => 1 };
    push @CONFIG_ORDER, $name;
}

# A part's configurations: [full], [quick]; --configs keeps some of them.
sub configs_of {
    my $spec = shift;
    my @c = @{ $Q ? $spec->[1] : $spec->[0] };
    return %WANT_CONFIG ? grep { $WANT_CONFIG{$_} } @c : @c;
}

# ----------------------------------------------------------------- paths --


# name, label, rtt ms, rate Mbit/s, mtu, warm-up s, steady window s
#   (full; quick).  The full window is 20 s, two of BBR's 10 s min-RTT
#   periods, so every configuration pays for two PROBE_RTTs (each drains
#   the pipe for 200 ms + 1 RTT): an 8 s window held one or none, as the
#   flow's min RTT was last refreshed, and that alone gave 92% or 98% of
#   the seed path to one configuration.
@PATHS = (
    { name => 'windchill', label => 'Windchill 30 Mbit/s, 250 ms',
      rtt => 250, rate => 30, mtu => 1500, w => [4, 20], q => [2.5, 3.5] },
    { name => 'putty', label => 'PuTTY 10 Mbit/s, 180 ms',
      rtt => 180, rate => 10, mtu => 1500, w => [3, 20], q => [2, 3.5] },
    { name => 'wan100', label => '100 Mbit/s, 50 ms',
      rtt => 50, rate => 100, mtu => 1500, w => [2, 20], q => [1.5, 2.5] },
    { name => 'lan', label => 'LAN 1 Gbit/s, 1 ms (MTU @LANMTU@)',
      rtt => 1, rate => 1000, mtu => 1500,
      w => [1.5, 20], q => [1, 2] },
    { name => 'longfat', label => 'long fat 200 Mbit/s, 250 ms',
      rtt => 250, rate => 200, mtu => 1500, w => [5, 20], q => [3.5, 4] },
);
%PATH = map { $_->{name} => $_ } @PATHS;

# ----------------------------------------------------------------- utils --

sub say_ { printf "[%5.0fs] %s\n", Time::HiRes::time() - $T_START, "@_" }
sub mbit { defined $_[0] ? sprintf('%.2f', $_[0] / 1e6) : 'n/a' }
sub kib { defined $_[0] ? sprintf('%.0f', $_[0] / 1024) : 'n/a' }
sub mib { defined $_[0] ? sprintf('%.2f', $_[0] / 1048576) : 'n/a' }
sub pct { defined $_[0] ? sprintf('%.1f', 100 * $_[0]) : 'n/a' }
sub ratio { defined $_[0] ? sprintf('%.2f', $_[0]) : 'n/a' }
sub ratio3 { defined $_[0] ? sprintf('%.3f', $_[0]) : 'n/a' }
sub fmt_or { defined $_[0] ? $_[0] : 'n/a' }
sub div { my ($x, $y) = @_; return defined $x && $y ? $x / $y : undef }
sub mean { return undef unless @_; my $s = 0; $s += $_ for @_; $s / @_ }
sub max_of { my ($m) = sort { $b <=> $a } grep { defined } @_; $m }
sub size_label { $_[0] >= 1 << 20 ? ($_[0] >> 20) . ' MiB' : ($_[0] >> 10) . ' KiB' }
# The median's 95% confidence interval from the sorted values themselves
# (the binomial's order statistics: no assumption about their spread):
# [low, high], or undef below 6 values, where no such pair exists.
sub median_ci {
    my @x = sort { $a <=> $b } grep { defined } @_;
    my $n = @x;
    my ($p, $tail, $j) = (0.5 ** $n, 0, 0);
    # P(fewer than j+1 of n fall below the median) <= 2.5%
    while (($tail += $p) <= 0.025) {
        $p *= ($n - $j) / ($j + 1);
        $j++;
    }
    return $j ? [ $x[$j - 1], $x[$n - $j] ] : undef;
}
# a shell command's output, stdout and stderr, without the last newline
sub shell { my (undef, $o) = capture('sh', '-c', "@_"); chomp $o; return $o }
# full or quick
sub pick { $Q ? $_[0][1] : $_[0][0] }
sub window_times { @{ $Q ? $_[0]{q} : $_[0]{w} } }

# A shared, sparse (all-zero) document per size: no disk, one page cache.
my $DATA;
sub data_file {
    my $size = shift;
    unless ($DATA) {
        $DATA = File::Temp::tempdir('sbt-bench-data-XXXXXX', TMPDIR => 1,
                                    CLEANUP => 1);
        chmod 0755, $DATA;
    }
    my $f = "$DATA/$size.bin";
    unless (-e $f) {
        open my $fh, '>', $f or die "$f: $!";
        truncate $fh, $size or die "truncate $f: $!";
        close $fh;
    }
    chmod 0644, $f;
    return $f;
}

# ---------------------------------------------------------------- tables --

# A table: { title, head => [...], align => 'lrr..' (a letter a column),
# rows => [[...], ...], intro/after => markdown paragraphs, h => heading
# level for its title in the docs (0: none), console => 0 to keep it out
# of the console }. Cells are markdown; the console drops ` and **.
sub md_table {
    my $t = shift;
    my @o;
    push @o, ('#' x $t->{h}) . " $t->{title}\n" if $t->{h};
    push @o, "$t->{intro}\n" if $t->{intro};
    push @o, '| ' . join(' | ', @{ $t->{head} }) . ' |';
    push @o, '|' . join('', map { $_ eq 'r' ? '---:|' : '---|' } split //, $t->{align});
    push @o, '| ' . join(' | ', map { $_ // '' } @$_) . ' |' for @{ $t->{rows} };
    push @o, '';
    push @o, "$t->{after}\n" if $t->{after};
    return @o;
}

sub print_table {
    my $t = shift;
    my @rows = map { [ map { my $c = $_ // ''; $c =~ s/`|\*\*//g; $c } @$_ ] }
        $t->{head}, @{ $t->{rows} };
    my @al = split //, $t->{align};
    my @w;
    for my $r (@rows) {
        for my $i (0 .. $#$r) {
            $w[$i] = length $r->[$i] if length $r->[$i] > ($w[$i] // 0);
        }
    }
    print "\n=== ", $t->{title} =~ s/`|\*\*//gr, "\n";
    for my $r (@rows) {
        my $line = join '  ', map {
            sprintf(($al[$_] // 'l') eq 'r' ? "%$w[$_]s" : "%-$w[$_]s", $r->[$_])
        } 0 .. $#$r;
        print $line =~ s/\s+$//r, "\n";
    }
}

sub cfg_cell { "`$_[0]`" }

# The configurations' labels, as a list under a table.
sub config_legend {
    return join "\n", 'Configurations:', '',
        map { "* `$_`: $CONFIGS{$_}{label}" } @_;
}

# ----------------------------------------------------------- lab helpers --

sub lab_up {
    my $p = shift;
    my $lab = SndbufTune::WanLab->up(rtt_ms => $p->{rtt},
                                     rate_mbit => $p->{rate}, mtu => $p->{mtu});
    $p->{queue_bytes} = $lab->status->{queue_bytes};
    return $lab;
}

# Take the lab down, keeping its status (the relay's CPU time) for the
# fidelity table under KEY.
sub lab_down {
    my ($lab, $key) = @_;
    my $st = $lab->status;
    $RES{health}{$key}{status} = { map { $_ => $st->{$_} }
                                   qw(relay_cpu_s queue_bytes mtu) };
    $lab->down;
}

# Zero the relay's counters before a cell (wanlab status --reset); returns
# the counters that --reset does not zero (the TUN devices' TX drops), so
# that cell_health can subtract them.
sub relay_reset {
    my ($lab) = @_;
    my $st = $lab->status(reset => 1);
    return { map { $_ => $st->{$_} // 0 } qw(s2c_tun_overflow c2s_tun_overflow) };
}

# Relay counters that say the lab fell behind (not the bottleneck's drops)
# since relay_reset's BASE, kept under KEY (a path or a part) for the lab
# fidelity table. Returns them, with a console note in {note}.
sub cell_health {
    my ($lab, $base, $key, $cfg) = @_;
    my $st = $lab->status;
    my %h = map { $_ => $st->{$_} // 0 } qw(s2c_late c2s_late s2c_tx_packets
        s2c_drops_nobuf c2s_drops_nobuf s2c_tun_overflow c2s_tun_overflow
        s2c_drops_queue s2c_late_max_us relay_cpu_s);
    # a sub-link's packets crossed the main link first: its lateness and
    # lost buffers count with the server-to-client direction's
    for my $k (grep { /^sub\d+_(late|drops_nobuf)$/ } keys %$st) {
        $h{ $k =~ /late$/ ? 's2c_late' : 's2c_drops_nobuf' } += $st->{$k};
    }
    $h{$_} -= $base->{$_} // 0 for qw(s2c_tun_overflow c2s_tun_overflow);
    $h{late_frac} = $h{s2c_tx_packets} ? $h{s2c_late} / $h{s2c_tx_packets} : 0;
    $h{trouble} = $h{s2c_drops_nobuf} + $h{c2s_drops_nobuf}
        + $h{s2c_tun_overflow} + $h{c2s_tun_overflow};
    push @{ $RES{health}{$key}{cells} }, [$cfg, \%h];
    my $note = $h{trouble} || $h{late_frac} > 0.01
        ? sprintf('  [relay: late %.1f%%, overflow %d]', 100 * $h{late_frac},
                  $h{trouble}) : '';
    return { %h, note => $note };
}

# Set a configuration's sysctls in the lab's server namespace; returns a
# sub that puts the old values back.
sub config_sysctls {
    my ($lab, $cfg) = @_;
    my $set = $CONFIGS{$cfg}{sysctl} or return sub {};
    my $ns = $lab->{ns_server};
    my %old;
    for my $k (sort keys %$set) {
        my ($rc, $v) = capture('ip', 'netns', 'exec', $ns, 'sysctl', '-n', $k);
        chomp $v;
        die "bench/run: sysctl $k in $ns: $v\n" if $rc;
        $old{$k} = $v;
        ($rc, $v) = capture('ip', 'netns', 'exec', $ns, 'sysctl', '-qw',
                            "$k=$set->{$k}");
        die "bench/run: sysctl -w $k=$set->{$k} in $ns: $v\n" if $rc;
    }
    return sub {
        capture('ip', 'netns', 'exec', $ns, 'sysctl', '-qw', "$_=$old{$_}")
            for sort keys %old;
    };
}

# A started apache2 with configuration CFG in the lab's server namespace.
# Options: rate (Mbit/s, for @RATE@), port (80), links => { path => file },
# text => { path => content }, extra (more configuration lines), threads,
# processes, modules, mpm (event), spread (SndbufTune::Server's),
# log_level (else $SBT_BENCH_LOG_LEVEL, else warn).
sub wan_server {
    my ($lab, $cfg, %o) = @_;
    my $c = $CONFIGS{$cfg};
    my $body = ($o{extra} // '') . $c->{body};
    my $rate = $o{rate} // '';
    $body =~ s/\@RATE\@/$rate/g;
    # SBT_BENCH_LOG_LEVEL: e.g. 'warn sndbuf_tune:trace2' (with SBT_KEEP=1)
    # to read the looks of a cell afterwards; more log costs CPU.
    my $srv = $lab->server(name => "bench-$cfg", sndbuf_tune => $c->{module},
                           body => $body,
                           log_level => $o{log_level}
                                        // $ENV{SBT_BENCH_LOG_LEVEL} // 'warn',
                           listen => "$SndbufTune::WanLab::SERVER_ADDR:"
                                     . ($o{port} // 80),
                           threads => $o{threads} // 128,
                           processes => $o{processes} // 2,
                           mpm => $o{mpm} // 'event', spread => $o{spread},
                           modules => $o{modules} || []);
    $srv->add_link($_, $o{links}{$_}, abs => 1) for keys %{ $o{links} || {} };
    $srv->add_file($_, $o{text}{$_}) for keys %{ $o{text} || {} };
    $srv->start or die "bench/run: apache2 ($cfg) did not start: ${\ $srv->error}\n";
    return $srv;
}

# ======================================================= loopback servers --

# An apache2 on loopback for wrk: event MPM, one process of 32 threads
# pinned to CPU 0 (wrk runs on CPU 1), no access log, a 2 KiB file.
# Options: module (the .so to load; 0: none), body, rules (write that many
# SndbufTuneNetwork rules to DIR/rules.conf, for the body to Include),
# start_timeout.
sub loopback_server {
    my ($name, %o) = @_;
    my $s = SndbufTune::Server->new(
        name => "bench-$name", sendfile => 1, timeout => 120,
        sndbuf_tune => $o{module} ? 1 : 0, body => $o{body} // '',
        access_log => 0, log_level => 'warn', threads => 32, processes => 1,
        cpus => $CPUS > 1 ? '0' : undef);
    $s->add_file('/small.html', 'x' x 2048);
    write_rules($s->dir . '/rules.conf', $o{rules}) if defined $o{rules};
    local $ENV{SBT_MODULE} = $o{module} if $o{module};
    $s->start(timeout => $o{start_timeout} // 30)
        or die "bench/run: loopback apache2 ($name): ${\ $s->error}\n";
    return $s;
}

sub wrk_run {
    my ($url, $secs, $conns) = @_;
    my $pin = $CPUS > 1 ? 'taskset -c 1 ' : '';
    my $out = shell("${pin}wrk -t1 -c$conns -d${secs}s '$url'");
    my ($rps) = $out =~ /Requests\/sec:\s+([\d.]+)/;
    my ($n) = $out =~ /(\d+) requests in/;
    my ($errs) = $out =~ /Non-2xx or 3xx responses: (\d+)/;
    die "bench/run: wrk failed: $out\n" unless defined $rps;
    return { rps => $rps, requests => $n, non2xx => $errs // 0 };
}

# Round I's (from 0) order of KEYS, for rounds of fresh servers: rotated
# one place a round and reversed every other cycle, so that over 2 x KEYS
# rounds each server takes each place equally often and follows each
# other one as often as it precedes it (for three: all six orders).
sub round_order {
    my ($keys, $i) = @_;
    my $turn = $i % @$keys;
    my @order = @$keys[$turn .. $#$keys, 0 .. $turn - 1];
    return int($i / @$keys) % 2 ? reverse @order : @order;
}

# One round of fresh servers: wrk against each in ORDER, after a 1 s
# warm-up each, one run of SECS; ROUND numbers the log's lines.
# { key => req/s }.
sub wrk_round {
    my ($srv, $order, $secs, $conns, $round) = @_;
    wrk_run($srv->{$_}->url('/small.html'), 1, $conns) for @$order;
    my %rps;
    for my $k (@$order) {
        my $r = wrk_run($srv->{$k}->url('/small.html'), $secs, $conns);
        $rps{$k} = $r->{rps} + 0;
        say_(sprintf '  round %d %-14s %9.0f req/s%s', $round, $k, $r->{rps},
             $r->{non2xx} ? " ($r->{non2xx} non-2xx!)" : '');
    }
    return \%rps;
}

# N SndbufTuneNetwork lines: /24s in 10/8, then /32s in 11/8 (none of them
# matches the loopback client, whose own rule is 127.0.0.0/8).
sub write_rules {
    my ($file, $n) = @_;
    open my $fh, '>', $file or die "$file: $!";
    for my $i (0 .. $n - 1) {
        my $j = $i - 65536;
        my $net = $i < 65536 ? sprintf('10.%d.%d.0/24', $i >> 8, $i & 255)
            : sprintf('11.%d.%d.%d/32', $j >> 16, ($j >> 8) & 255, $j & 255);
        print $fh "SndbufTuneNetwork $net ", 16 + $i % 64, "k\n";
    }
    close $fh or die "$file: $!";
}

1;
