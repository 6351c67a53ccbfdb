package SndbufBench::Loopback;
# bench/run's part `loopback`: req/s of a small file and a large one,
# nothing configured and auto each against no module (wrk), the system
# calls per request (strace -c) and the instructions per request
# (callgrind).
use strict;
use warnings;
use utf8;

use File::Temp ();
use POSIX ();
use Time::HiRes ();
use SndbufBench::Common qw(:all);

# One run's ratio swings by up to 10% either way, from one 3 s run to the
# next as much as between servers; 18 rounds of one size left the
# median's 95% interval 0.08 wide (0.926-1.007 on 12-05), 36 narrowed it
# by about 1/sqrt(2). Four servers and two sizes a round: 18 rounds take
# as long as 36 did of three servers and one size.
our %LOOPBACK = (reps => [18, 3], secs => [3, 2],
                strace_requests => 10000, callgrind_requests => [1000, 6000],
                callgrind_large => [100, 600], strace_large => 20,
                large => 1 << 20);
# The files each round asks for: a small page, and a response larger
# than any socket buffer on loopback, which the module measures.
our %LOOPBACK_FILES = (small => '/small.html', large => '/large.bin');

# Each round starts its own servers: two servers of one configuration
# differ by up to 3% in req/s for as long as they run (the mean of six
# 3 s runs: 40700 and 39417 req/s, module not loaded in either), so pairs
# from one pair of servers would carry that bias into every ratio. The
# control, a second server without the module, shows the spread left.
my %LOOPBACK_SERVERS = (
    auto => sub { loopback_server("lo-auto-$_[0]", module => $SO,
                                  body => "SndbufTune auto\n", @_[1 .. $#_]) },
    none => sub { loopback_server("lo-none-$_[0]", module => $SO, @_[1 .. $#_]) },
    nomod => sub { loopback_server("lo-nomod-$_[0]", module => 0, @_[1 .. $#_]) },
    control => sub { loopback_server("lo-control-$_[0]", module => 0,
                                     @_[1 .. $#_]) },
);

# A loopback server of $key with the large file too.
sub loopback_pair_server {
    my ($key, @args) = @_;
    my $srv = $LOOPBACK_SERVERS{$key}->(@args);
    $srv->add_file($LOOPBACK_FILES{large}, 'x' x $LOOPBACK{large});
    return $srv;
}

# The time $srv's processes ran on a CPU, every thread of each, in ns
# (/proc/PID/task/*/schedstat): a request's cost, which other load on the
# machine hardly moves, where it moves req/s as much as the module does.
sub cpu_ns {
    my ($srv) = @_;
    my $ns = 0;
    for my $pid (grep { defined } $srv->pid, $srv->child_pids) {
        for my $f (glob "/proc/$pid/task/*/schedstat") {
            open my $fh, '<', $f or next;
            $ns += (split ' ', scalar(<$fh>) // '0')[0];
        }
    }
    return $ns;
}

# One round of fresh servers: after a 1 s warm-up each, one wrk run of
# SECS per server and file, the servers in ORDER, each file in turn.
# ({ file => { key => req/s } }, { file => { key => CPU ns per request } }).
sub pair_round {
    my ($srv, $order, $secs, $conns, $round) = @_;
    wrk_run($srv->{$_}->url($LOOPBACK_FILES{small}), 1, $conns) for @$order;
    my (%rps, %cpu);
    for my $k (@$order) {
        for my $f (sort keys %LOOPBACK_FILES) {
            my $ns = cpu_ns($srv->{$k});
            my $r = wrk_run($srv->{$k}->url($LOOPBACK_FILES{$f}), $secs, $conns);
            $ns = cpu_ns($srv->{$k}) - $ns;
            $rps{$f}{$k} = $r->{rps} + 0;
            $cpu{$f}{$k} = $r->{requests} ? $ns / $r->{requests} : undef;
            say_(sprintf '  round %d %-8s %-5s %9.0f req/s, %6.1f us of CPU a '
                 . 'request%s', $round, $k, $f, $r->{rps},
                 ($cpu{$f}{$k} // 0) / 1000,
                 $r->{non2xx} ? " ($r->{non2xx} non-2xx!)" : '');
        }
    }
    return (\%rps, \%cpu);
}

sub run {
    my ($runs, $secs) = (pick($LOOPBACK{reps}), pick($LOOPBACK{secs}));
    my @keys = qw(auto none nomod control);
    my $conns = $WRK_CONNS;
    say_("loopback: requests/s of a small and a large file with wrk (1 "
         . "thread, $conns connections, ${secs}s x $runs rounds of fresh "
         . "servers, in turns that rotate the order)");
    my %L;
    # Each server takes each place in the order equally often (round_order):
    # with `nomod` always in the middle, the control, a copy of it, came
    # out at 0.985 of it over 15 rounds.
    for my $i (1 .. $runs) {
        my @order = round_order(\@keys, $i - 1);
        my %srv = map { $_ => loopback_pair_server($_, $i) } @order;
        my ($round, $cpu) = pair_round(\%srv, \@order, $secs, $conns, $i);
        for my $f (keys %LOOPBACK_FILES) {
            push @{ $L{files}{$f}{runs}{$_} }, $round->{$f}{$_} for @keys;
            push @{ $L{files}{$f}{cpu}{$_} }, $cpu->{$f}{$_} for @keys;
        }
        $_->stop for values %srv;
    }
    for my $f (sort keys %LOOPBACK_FILES) {
        my $F = $L{files}{$f};
        $F->{median}{$_} = median(@{ $F->{runs}{$_} }) for @keys;
        for my $k (qw(auto none control)) {
            $F->{pairs}{$k} = [ map { $F->{runs}{$k}[$_] / $F->{runs}{nomod}[$_] }
                                0 .. $runs - 1 ];
            $F->{pair_median}{$k} = median(@{ $F->{pairs}{$k} });
            $F->{ci}{$k} = median_ci(@{ $F->{pairs}{$k} });
            # the req/s a CPU-bound server would get: no module's CPU per
            # request over this one's, round by round
            $F->{cpu_median}{$k} = median(map {
                my ($n, $x) = ($F->{cpu}{nomod}[$_], $F->{cpu}{$k}[$_]);
                $n && $x ? $n / $x : () } 0 .. $runs - 1);
        }
        say_(sprintf '  %s: median req/s auto %.0f, none %.0f, no module %.0f; '
             . 'median of the pair ratios: auto %.3f %s, none %.3f %s, '
             . 'control %.3f %s; by CPU per request: auto %.3f, none %.3f, '
             . 'control %.3f', $f, @{ $F->{median} }{qw(auto none nomod)},
             (map { ($F->{pair_median}{$_}, ci_text($F->{ci}{$_})) }
              qw(auto none control)),
             map { $F->{cpu_median}{$_} // 0 } qw(auto none control));
    }

    # system calls per request: strace -c -f on the worker process, wrk -c4
    # runs of 2 s until at least strace_requests requests.  The control, a
    # second server without the module, shows what the MPM's own calls
    # (futex, epoll_ctl: the hand-offs between its threads) move by.
    my %srv = map { $_ => $LOOPBACK_SERVERS{$_}->('strace') } qw(auto nomod control);
    for my $k (sort keys %srv) {
        my $trace = "$srv{$k}{dir}/strace.txt";
        my $pid = strace_attach($srv{$k}, $trace, '-c');
        my ($requests, $wrk_runs) = (0, 0);
        while ($requests < $LOOPBACK{strace_requests} && $wrk_runs < 30) {
            $requests += wrk_run($srv{$k}->url('/small.html'), 2, 4)->{requests};
            $wrk_runs++;
        }
        kill 'INT', $pid;
        waitpid $pid, 0;
        my %calls;
        open my $fh, '<', $trace or die "bench/run: strace output: $!\n";
        while (<$fh>) {
            # % time  seconds  usecs/call  calls  [errors]  syscall
            if (/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/) {
                $calls{$2} = $1 unless $2 eq 'total';
            }
        }
        close $fh;
        my $tot = 0;
        $tot += $_ for values %calls;
        $L{strace}{$k} = { requests => $requests, calls => \%calls,
                           per_request => div($tot, $requests) };
        say_(sprintf '  strace %-7s %d requests (%d wrk runs), %.2f syscalls/request',
             $k, $requests, $wrk_runs, $L{strace}{$k}{per_request} // 0);
    }
    $_->stop for values %srv;
    $L{strace_large} = strace_large();
    my %cg;
    for my $f (sort keys %LOOPBACK_FILES) {
        $cg{$f}{$_} = callgrind_per_request($_, $f) for qw(auto none nomod);
    }
    $L{callgrind} = \%cg
        if !grep { !defined } map { values %$_ } values %cg;
    $RES{loopback} = \%L;
}

# strace (options @opts, output into $trace) attached to $srv's worker
# processes, following their threads; its pid, once it is attached.
sub strace_attach {
    my ($srv, $trace, @opts) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        exec 'strace', @opts, '-f', '-qq', '-o', $trace,
             map({ ('-p', $_) } $srv->child_pids) or POSIX::_exit(127);
    }
    Time::HiRes::sleep(1);          # attached (strace prints nothing on -qq)
    return $pid;
}

# The socket calls per large response with the module loaded and nothing
# configured (SndbufTune none everywhere): strace -f on the worker process
# while curl fetches a 4 MiB file strace_large times, each on a fresh
# connection. The triage reads TCP_INFO when a response outgrows the
# buffer and when it ends: 2 getsockopt(TCP_INFO), no other getsockopt,
# no setsockopt of the module's (httpd's own TCP_CORK around sendfile
# are counted apart).
sub strace_large {
    my $srv = loopback_server('lo-large', module => $SO);
    $srv->add_file('/large.bin', 'x' x (4 << 20));
    my $trace = "$srv->{dir}/strace-large.txt";
    my $pid = strace_attach($srv, $trace, '-e', 'trace=getsockopt,setsockopt');
    my $n = $LOOPBACK{strace_large};
    shell("curl -s -o /dev/null '" . $srv->url('/large.bin') . "'")
        for 1 .. $n;
    kill 'INT', $pid;
    waitpid $pid, 0;
    my %calls = map { ($_ => 0) } qw(tcp_info getsockopt setsockopt cork);
    open my $fh, '<', $trace or die "bench/run: strace output: $!\n";
    while (<$fh>) {
        next unless /\b(get|set)sockopt\(\d+, \w+, (\w+)/;
        $calls{ $2 eq 'TCP_INFO' ? 'tcp_info' : $2 eq 'TCP_CORK' ? 'cork'
                : "$1sockopt" }++;
    }
    close $fh;
    $srv->stop;
    say_(sprintf '  strace large: %d responses of 4 MiB, nothing configured: '
         . '%.2f getsockopt(TCP_INFO), %.2f other getsockopt, %.2f '
         . 'setsockopt (and httpd\'s TCP_CORK: %.2f) per response', $n,
         map { $calls{$_} / $n } qw(tcp_info getsockopt setsockopt cork));
    return { responses => $n, calls => \%calls };
}

# The instructions a server's worker runs in user space per small request,
# counted by callgrind: what the module costs, free of the noise of req/s
# (the kernel's part the system call table covers). One server for each
# count of callgrind_requests (`ab -k -c2`), the difference of their
# totals over the difference of the counts, so that starting and stopping
# cancel out. undef (and said why) if it could not be counted.
sub callgrind_per_request {
    my ($key, $file) = @_;
    my @n = @{ $LOOPBACK{$file eq 'large' ? 'callgrind_large'
                                          : 'callgrind_requests'} };
    my @ir;
    for my $n (@n) {
        my $ir = eval { callgrind_total($key, $n, $file) };
        if (!defined $ir) {
            say_("  callgrind $key: not counted: " . ($@ || "no totals\n"));
            return undef;
        }
        push @ir, $ir;
    }
    my $per = ($ir[1] - $ir[0]) / ($n[1] - $n[0]);
    say_(sprintf '  callgrind %-5s %-5s %.0f instructions per request in user '
         . 'space', $key, $file, $per);
    return $per;
}

# The worker's instruction total for $n requests of $file to a $key server.
sub callgrind_total {
    my ($key, $n, $file) = @_;
    my $dir = File::Temp::tempdir("sbt-bench-cg-XXXXXX", TMPDIR => 1,
                                  CLEANUP => 1);
    chmod 0777, $dir;
    local $ENV{SBT_HTTPD_WRAPPER} = 'valgrind --tool=callgrind '
        . "--trace-children=yes --callgrind-out-file=$dir/cg.%p "
        . "--log-file=$dir/vg.%p";
    my $srv = loopback_pair_server($key, "callgrind-$file-$n",
                                   start_timeout => 120);
    # the parent answers on its socket before its worker has forked
    my ($kids) = poll_until(60, sub {
        my @k = $srv->child_pids;
        return @k == 1 ? \@k : 0 }, 0.1);
    my $out = shell("ab -q -k -n $n -c 2 '"
                    . $srv->url($LOOPBACK_FILES{$file}) . "'");
    $srv->stop;
    my ($failed) = $out =~ /Failed requests:\s+(\d+)/;
    die "no single worker process\n" unless $kids;
    die "ab: " . ($out =~ /(\S[^\n]*)\n*\z/)[0] . "\n"
        unless defined $failed && $failed == 0;
    open my $fh, '<', "$dir/cg.$kids->[0]" or die "callgrind output: $!\n";
    my ($tot) = map { /^totals:\s+(\d+)/ ? $1 : () } <$fh>;
    close $fh;
    return $tot;
}

# "(95%: low-high)", or '' where there were too few rounds for one.
sub ci_text {
    my ($ci) = @_;
    return $ci ? sprintf('(95%%: %.3f-%.3f)', @$ci) : '';
}

sub syscall_rows {
    my $st = $RES{loopback}{strace} or return ();
    my %names;
    $names{$_} = 1 for map { keys %{ $st->{$_}{calls} } } keys %$st;
    my @rows;
    for my $n (sort keys %names) {
        my %per = map {
            $_ => $st->{$_} ? div($st->{$_}{calls}{$n} // 0, $st->{$_}{requests}) // 0
                            : undef
        } qw(auto nomod control);
        push @rows, [$n, $per{auto}, $per{nomod}, $per{auto} - $per{nomod},
                     defined $per{control} ? $per{control} - $per{nomod} : undef];
    }
    return sort { abs($b->[3]) <=> abs($a->[3]) || $a->[0] cmp $b->[0] } @rows;
}

sub section {
    my $L = $RES{loopback};
    my @t;
    for my $f (sort { $b cmp $a } keys %LOOPBACK_FILES) {
        my $F = $L->{files}{$f} or next;
        my $n = @{ $F->{runs}{auto} };
        my $r3 = sub { sprintf '%.3f', $_[0] };
        push @t, { title => "loopback: $f-file req/s, nothing configured and "
                . '`SndbufTune auto`, each vs no module',
            intro => ($f eq 'small' ? 'A 2 KiB file' : sprintf('A file of %s',
                      size_label($LOOPBACK{large}))) . ", `wrk -t1 "
                . "-c$WRK_CONNS`, in rounds: each round starts four servers "
                . '(event MPM, one process, 32 threads, no access log, '
                . '`EnableSendfile On`): one with `SndbufTune auto`, one with '
                . 'the module loaded and nothing configured (`none`), one '
                . 'without the module, and a control, a second one without '
                . 'it; after a 1 s warm-up each, one run against each for each '
                . 'size, in an order that gives each server each place equally '
                . 'often, then stops them. Fresh servers each round, because '
                . 'two servers of one configuration kept apart by up to 3% for '
                . 'as long as they ran; the control\'s ratio shows the spread '
                . 'left. With two or more CPUs, httpd is pinned to CPU 0 and '
                . 'wrk to CPU 1 (`taskset`). The targets are the medians of the '
                . 'rounds\' ratios to no module; beside each median, its 95% '
                . 'confidence interval where the rounds allow one.',
            head => ['round', 'auto req/s', 'none req/s', 'no module req/s',
                     'control req/s', 'auto / no module', 'none / no module',
                     'control / no module'],
            align => 'rrrrrrrr',
            rows => [ (map { my $i = $_; [ $i + 1,
                          (map { sprintf '%.0f', $F->{runs}{$_}[$i] }
                           qw(auto none nomod control)),
                          map { $r3->($F->{pairs}{$_}[$i]) } qw(auto none control) ] }
                       0 .. $n - 1),
                      [ 'median', (map { sprintf '%.0f', $F->{median}{$_} }
                                   qw(auto none nomod control)),
                        map { sprintf('%s%s%s %s', $_ eq 'control' ? '' : '**',
                                      $r3->($F->{pair_median}{$_}),
                                      $_ eq 'control' ? '' : '**',
                                      ci_text($F->{ci}{$_})) }
                        qw(auto none control) ],
                      [ 'by CPU a request', '', '', '', '',
                        map { $r3->($F->{cpu_median}{$_}) }
                        qw(auto none control) ] ],
            after => 'The last row: no module\'s CPU time per request (every '
                . 'thread of the server, `/proc/PID/task/*/schedstat`) over '
                . 'each server\'s, the median of the rounds: the req/s ratio '
                . 'a server that the CPU limits would get, which load from '
                . 'other processes on the machine moves far less than req/s.' };
    }
    if (my $st = $L->{strace}) {
        my $d = sub { defined $_[0] ? sprintf('%+.2f', $_[0]) : 'n/a' };
        my (@rows, $ta, $tn, $tc);
        for (syscall_rows()) {
            $ta += $_->[1];
            $tn += $_->[2];
            $tc += $_->[4] if defined $_->[4];
            next if abs($_->[3]) < 0.05 && abs($_->[4] // 0) < 0.05
                    && $_->[1] < 0.05 && $_->[2] < 0.05;
            push @rows, [ $_->[0], sprintf('%.2f', $_->[1]),
                          sprintf('%.2f', $_->[2]), $d->($_->[3]), $d->($_->[4]) ];
        }
        push @rows, [ '**total**', sprintf('%.2f', $ta // 0), sprintf('%.2f', $tn // 0),
                      sprintf('**%+.2f**', ($ta // 0) - ($tn // 0)),
                      $d->($st->{control} ? $tc // 0 : undef) ];
        push @t, { title => 'loopback: system calls per request',
            intro => sprintf('System calls per request, `strace -c -f` attached '
                . 'to the worker process during `wrk -c4` runs of 2 s, until '
                . 'at least %d requests (%d requests with auto, %d without '
                . 'the module). The control, a second server without the '
                . 'module, shows how far the same configuration moves from one '
                . 'server to the next:', $LOOPBACK{strace_requests},
                $st->{auto}{requests}, $st->{nomod}{requests}),
            head => ['syscall', 'auto', 'no module', 'added by the module',
                     'control (no module again) minus no module'],
            align => 'lrrrr', rows => \@rows };
    }
    if (my $lg = $L->{strace_large}) {
        push @t, { title => 'loopback: socket calls per large response, '
                . 'nothing configured',
            intro => sprintf('The module loaded and no `SndbufTune` line: a '
                . 'response larger than the send buffer in force is triaged '
                . '(TCP_INFO when it outgrows the buffer and when it ends), a '
                . 'small one makes no call (the table above). `strace -c -f` '
                . 'on the worker process while curl fetches a 4 MiB file %d '
                . 'times, a connection each:', $lg->{responses}),
            head => ['call', 'per response', 'expected'],
            align => 'lrr',
            rows => [ map { [ $_->[1], sprintf('%.2f', $lg->{calls}{ $_->[0] }
                                                / $lg->{responses}),
                              $_->[2] ] }
                      ['tcp_info', 'getsockopt(TCP_INFO)', '2.00'],
                      ['getsockopt', 'other getsockopt', '0.00'],
                      ['setsockopt', 'setsockopt (but TCP_CORK)', '0.00'],
                      ['cork', "httpd's own setsockopt(TCP_CORK)", ''] ] };
    }
    if (my $cg = $L->{callgrind}) {
        push @t, { title => 'loopback: instructions per request in user space',
            intro => 'What the worker process runs in user space per request '
                . '(callgrind, `ab -k -c2`): the module\'s own cost, which '
                . 'req/s measures only through the noise of a shared machine. '
                . 'For each configuration and file two servers, of '
                . join(' and ', @{ $LOOPBACK{callgrind_requests} })
                . ' small or ' . join(' and ', @{ $LOOPBACK{callgrind_large} })
                . ' large requests; the difference of their totals over the '
                . 'difference of the counts, so that start and stop cancel out. '
                . 'The kernel\'s part is in the system call tables.',
            head => ['file', 'auto', 'none', 'no module', 'added by auto',
                     'added by none'],
            align => 'lrrrrr',
            rows => [ map { my $c = $cg->{$_}; [ $_,
                (map { sprintf '%.0f', $c->{$_} } qw(auto none nomod)),
                map { my $d = $c->{$_} - $c->{nomod};
                      sprintf('**%+.0f** (%+.1f%%)', $d, 100 * $d / $c->{nomod}) }
                qw(auto none) ] } sort { $b cmp $a } keys %$cg ] };
    }
    return { title => 'Loopback: nothing configured and `SndbufTune auto` vs no module',
             tables => \@t };
}

sub targets {
    my ($push) = @_;
    my $L = $RES{loopback} || {};
    my $st = $L->{strace} || {};
    my ($au, $nm, $ct) = map { ($st->{$_} || {})->{per_request} } qw(auto nomod control);
    my $d = defined $au && defined $nm ? $au - $nm : undef;
    $push->('loopback small files: system calls added per request by auto '
            . '(strace -c, >= ' . $LOOPBACK{strace_requests} . ' keep-alive requests)',
            '<= 0.1', defined $d ? sprintf('%+.2f', $d) : 'n/a',
            defined $d ? $d <= 0.1 : undef,
            defined $d ? sprintf('auto %.2f, no module %.2f per request', $au, $nm)
                         . (defined $ct ? sprintf('; control %+.2f', $ct - $nm) : '')
                       : '');
    my $cg = $L->{callgrind};
    for my $f (sort { $b cmp $a } keys %LOOPBACK_FILES) {
        my $F = ($L->{files} || {})->{$f} || {};
        for my $k (qw(none auto)) {
            my $x = ($F->{pair_median} || {})->{$k};
            my $c = $cg ? $cg->{$f} : undef;
            $push->("loopback $f files: req/s, "
                    . ($k eq 'none' ? 'nothing configured' : 'auto')
                    . ' vs no module (median of the rounds\' ratios)',
                    '>= 0.99x', ratio3($x) . 'x', defined $x ? $x >= 0.99 : undef,
                    join('; ', grep { length }
                         ci_text(($F->{ci} || {})->{$k}) =~ s/^\((.*)\)$/median's $1/r,
                         'control ' . ratio3(($F->{pair_median} || {})->{control}),
                         'by CPU a request ' . ratio3(($F->{cpu_median} || {})->{$k})
                         . ' (control ' . ratio3(($F->{cpu_median} || {})->{control})
                         . ')')
                    . ($c ? sprintf('; %+.0f instructions per request in user '
                                    . 'space (%+.1f%%)', $c->{$k} - $c->{nomod},
                                    100 * ($c->{$k} - $c->{nomod}) / $c->{nomod})
                          : ''));
        }
    }
}

1;
