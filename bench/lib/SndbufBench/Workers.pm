package SndbufBench::Workers;
# bench/run's part `workers`: event MPM with 16 workers, 200 downloads of
# 4 MB on 50 Mbit/s, 100 ms: BusyWorkers, ConnsAsyncWriting, a small
# request's wait; and the keep-alive client it polls with (bench/run
# --ka-client, on SndbufTune::StallClient).
use strict;
use warnings;
use utf8;

use FindBin;
use IPC::Open2 ();
use Time::HiRes ();
use SndbufTune::StallClient ();
use SndbufBench::Common qw(:all);

our %WORKERS = (rtt => 100, rate => 50, mtu => 1500, downloads => 200,
               size => 4 << 20, threads => 16, factor => 8,
               polls => [10, 6], probes => [5, 3], first_poll_s => 3,
               configs => [[qw(nomod unset fixed64k auto lowat)],
                           [qw(nomod unset fixed64k auto lowat)]]);

# ------------------------------------------------------ keep-alive client --

# A request that must not wait for a new connection: the event MPM stops
# accepting connections once it holds ThreadsPerChild + idle workers x
# AsyncRequestWorkerFactor of them (about 140 here), so a probe or a poll
# on a fresh connection would wait behind the downloads in the listen
# queue whatever the module does. ka_open starts `bench/run --ka-client
# ADDR:PORT` in a namespace: it opens one keep-alive connection at once
# and, for each path written to it, GETs it on that connection and answers
# "ok SECONDS STATUS LENGTH RECONNECTED\n" and the body, or "err MESSAGE\n".
# When the server has closed the connection (the event MPM closes idle
# keep-alive connections when no worker is idle), it connects again and
# the time counts the wait for the new connection (RECONNECTED 1).
sub ka_open {
    my ($ns, $addr) = @_;
    my ($from, $to);
    my $pid = IPC::Open2::open2($from, $to, 'ip', 'netns', 'exec', $ns, $^X,
                                "$FindBin::Bin/run", '--ka-client', $addr);
    $to->autoflush(1);
    my $ka = { pid => $pid, from => $from, to => $to, addr => $addr };
    my $l = readline($from) // 'err no answer';
    die "bench/run: keep-alive client in $ns to $addr: $l" unless $l =~ /^ready/;
    return $ka;
}

# GET PATH on the connection: { secs, status, body, reconnected } or
# { error }.
sub ka_get {
    my ($ka, $path) = @_;
    return { error => $ka->{error} } if $ka->{error};
    print { $ka->{to} } "$path\n";
    my $l = readline($ka->{from}) // 'err the client is gone';
    if ($l =~ /^ok (\S+) (\d+) (\d+) (\d)$/) {
        my %r = (secs => $1, status => $2, reconnected => $4);
        my $n = $3;
        $r{body} = '';
        while (length $r{body} < $n) {
            read($ka->{from}, $r{body}, $n - length $r{body}, length $r{body})
                or last;
        }
        return \%r;
    }
    chomp $l;
    $ka->{error} = $l;
    return { error => $l };
}

sub ka_close {
    my $ka = shift;
    close $ka->{to};
    close $ka->{from};
    waitpid $ka->{pid}, 0;
}

# The --ka-client side (runs alone: bench/run calls it before anything
# else), on the suite's client.
sub ka_client_main {
    my $addr = shift;
    my ($host, $port) = $addr =~ /^(.*):(\d+)$/ or die "ADDR:PORT, not $addr\n";
    $| = 1;
    $SIG{PIPE} = 'IGNORE';
    my $connect = sub {
        SndbufTune::StallClient->new(host => $host, port => $port, timeout => 60)
    };
    my $c = eval { $connect->() }
        or do { print "err $@"; return 1 };
    print "ready\n";
    while (defined(my $path = <STDIN>)) {
        chomp $path;
        my $t0 = Time::HiRes::time();
        my $again = 0;
        my ($status, $body);
        my $from = $c->received;
        eval { ($status, undef, $body) = $c->get($path, host => $addr) };
        # the server closed the keep-alive connection before answering:
        # connect again (the wait counts)
        if (!defined $status && ($@ =~ /^write error/
                                 || ($@ =~ /closed by server|reset by peer/
                                     && $c->received == $from))) {
            $again = 1;
            eval {
                $c = $connect->();
                ($status, undef, $body) = $c->get($path, host => $addr);
            };
        }
        if (!defined $status) {
            (my $e = $@ || 'failed') =~ s/\s+/ /g;
            print "err $e\n";
            return 1;
        }
        printf "ok %.6f %s %d %d\n%s", Time::HiRes::time() - $t0, $status,
            length $body, $again, $body;
    }
    return 0;
}

# ========================================================= part: workers --

sub run {
    my $p = \%WORKERS;
    my @configs = configs_of($p->{configs});
    my ($polls, $probes) = (pick($p->{polls}), pick($p->{probes}));
    my $file = data_file($p->{size});
    $RES{workers} = { configs => \@configs, cells => {}, polls => $polls,
                      probes => $probes };
    say_("workers: $p->{downloads} downloads of ${\ mib($p->{size})} MiB over "
         . "$p->{rate} Mbit/s, $p->{rtt} ms; MaxRequestWorkers $p->{threads}; "
         . "$polls polls a second apart, $probes small requests");
    my $lab = lab_up($p);
    my $addr = "$SndbufTune::WanLab::SERVER_ADDR:80";
    for my $cfg (@configs) {
        my $restore = config_sysctls($lab, $cfg);
        my $srv = wan_server($lab, $cfg, rate => $p->{rate},
            threads => $p->{threads}, processes => 1, modules => ['status'],
            links => { '/data.bin' => $file }, text => { '/small.txt' => "hi\n" },
            extra => "ExtendedStatus On\nKeepAliveTimeout 2\n"
                . "AsyncRequestWorkerFactor $p->{factor}\n"
                . "<Location /server-status>\n    SetHandler server-status\n"
                . "</Location>\n");
        # status polls from the server's namespace (they do not queue behind
        # the downloads at the bottleneck), small requests through the path.
        # mod_status's connection counts are those of the MPM's last queue
        # maintenance, which runs when an entry of a queue is due to time
        # out: both connections make a request every second (a tick), so
        # that with KeepAliveTimeout 2 it runs every 2 s at least, and
        # neither connection is ever idle long enough to be closed.
        my $poller = ka_open($lab->{ns_server}, $addr);
        my $prober = ka_open($lab->{ns_client}, $addr);
        my $t0 = 0;             # the last request on both connections
        my $ping = sub {
            return if Time::HiRes::time() - $t0 < 0.5;
            for ($poller, $prober) {
                my $r = ka_get($_, '/small.txt');
                die "bench/run: keep-alive request to $addr: $r->{error}\n"
                    if $r->{error};
            }
            $t0 = Time::HiRes::time();
        };
        $ping->();
        my $base = relay_reset($lab);
        my @jobs = map { $ping->(); $lab->curl_start(url => $srv->url('/data.bin'),
                                                     max_time => 600) } 1 .. $p->{downloads};
        my %mine = map { $_->{local_port} => 1 } @jobs;
        my (@polls, @lat);
        my $reconnects = 0;
        my $every = $RES{workers}{every} = int($polls / $probes) || 1;
        my $first = $p->{first_poll_s};
        for my $tick (1 .. $first + $polls - 1) {
            my $wait = $t0 + $tick - Time::HiRes::time();
            Time::HiRes::sleep($wait) if $wait > 0;
            my $i = $tick - $first + 1;         # the poll's number, from 1
            if ($i < 1) {
                ka_get($_, '/small.txt') for $poller, $prober;
                next;
            }
            my $r = ka_get($poller, '/server-status?auto');
            my ($st) = parse_auto($r->{body});
            my %st = %$st;
            my @socks = grep { $mine{ $_->{pport} // '' } }
                ss_sockets(ns => $lab->{ns_server}, sport => 80);
            my $sending = grep { ($_->{bytes_sent} // 0) > 0 } @socks;
            push @polls, { t => Time::HiRes::time() - $t0, secs => $r->{secs},
                           error => $r->{error}, reconnected => $r->{reconnected},
                           busy => $st{BusyWorkers}, idle => $st{IdleWorkers},
                           conns => $st{ConnsTotal},
                           writing => $st{ConnsAsyncWriting},
                           keepalive => $st{ConnsAsyncKeepAlive},
                           closing => $st{ConnsAsyncClosing},
                           open => $sending, waiting => @socks - $sending };
            my $pr = ka_get($prober, '/small.txt');
            $reconnects += $pr->{reconnected} // 0;
            push @lat, $pr->{error} ? undef : $pr->{secs}
                unless $i % $every || @lat >= $probes;
        }
        $lab->curl_kill($_) for @jobs;
        $lab->curl_wait($_) for @jobs;
        my $health = cell_health($lab, $base, 'workers', $cfg);
        ka_close($_) for $poller, $prober;
        # the aborted downloads' entries, once httpd has written them
        my $sent = @polls ? $polls[-1]{open} // 0 : 0;
        my ($logged) = poll_until(10, sub {
            my @e = grep { ($_->{uri} // '') eq '/data.bin' } $srv->access_entries;
            @e >= $sent ? \@e : 0 }, 0.2);
        $logged ||= [ grep { ($_->{uri} // '') eq '/data.bin' } $srv->access_entries ];
        $srv->stop;
        $restore->();
        $reconnects += $_->{reconnected} // 0 for @polls;
        # the issue's measure: downloads that lasted 3 RTTs or more (%D);
        # those accepted only as the clients were stopped last less
        my @long = grep { ($_->{duration_us} // 0) >= 3 * $p->{rtt} * 1000 }
                   @$logged;
        my %c = (polls => \@polls, probes => \@lat, reconnects => $reconnects,
                 logged => scalar @$logged, long => scalar @long,
                 retuned => scalar(grep { ($_->{retunes} // 0) > 0 } @long));
        workers_summary(\%c);
        $RES{workers}{cells}{$cfg} = \%c;
        say_(sprintf '  %-8s BusyWorkers %s (max %s)  ConnsAsyncWriting %s of %s '
             . 'open downloads (%s waiting)  small request %s ms  re-tuned %d '
             . 'of %d that lasted 3 RTTs%s%s%s', $cfg, fmt_or($c{busy}), fmt_or($c{busy_max}),
             fmt_or($c{writing}), fmt_or($c{open}), fmt_or($c{waiting}),
             defined $c{probe_s} ? sprintf('%.0f', 1000 * $c{probe_s}) : 'n/a',
             $c{retuned}, $c{long},
             $reconnects ? " ($reconnects keep-alive connections lost)" : '',
             (grep { $_->{error} } @polls) ? " (poll failed: $polls[-1]{error})" : '',
             $health->{note});
    }
    lab_down($lab, 'workers');
}

# Medians over the polls; the share written in write completion is the
# median of each poll's ConnsAsyncWriting / open downloads.
sub workers_summary {
    my $c = shift;
    my @p = grep { !$_->{error} && defined $_->{busy} } @{ $c->{polls} };
    for my $k (qw(busy writing open waiting conns)) {
        $c->{$k} = median(map { $_->{$k} } @p);
    }
    $c->{busy_max} = max_of(map { $_->{busy} } @p);
    $c->{writing_share} = median(map { div($_->{writing}, $_->{open}) } @p);
    $c->{probe_s} = median(@{ $c->{probes} });
    $c->{probes_ok} = grep { defined } @{ $c->{probes} };
}

sub section {
    my $r = $RES{workers};
    my @configs = @{ $r->{configs} };
    my $base = $r->{cells}{nomod} || {};
    my $p = \%WORKERS;
    my $rows = [ map { my $c = $r->{cells}{$_}; !$c ? () : [
        cfg_cell($_), fmt_or($c->{open}), fmt_or($c->{waiting}),
        fmt_or($c->{conns}), fmt_or($c->{writing}),
        defined $c->{writing_share} ? pct($c->{writing_share}) . '%' : 'n/a',
        sprintf('%s (%s)', fmt_or($c->{busy}), fmt_or($c->{busy_max})),
        defined $c->{busy} && defined $base->{busy}
            ? sprintf('%+g', $c->{busy} - $base->{busy}) : 'n/a',
        defined $c->{probe_s} ? sprintf('%.0f', 1000 * $c->{probe_s}) : 'n/a',
        ratio(div($c->{probe_s}, $base->{probe_s})) . 'x',
        $CONFIGS{$_}{module} ? sprintf('%d / %d', $c->{retuned},
                                       $c->{long} // $c->{logged}) : '',
        $c->{reconnects} // 0 ] } @configs ];
    return { title => 'Workers held: 200 downloads, 16 workers (event MPM)',
        tables => [ { title => 'workers held: 200 downloads of 4 MB, '
                             . 'MaxRequestWorkers 16, 50 Mbit/s, 100 ms',
            intro => sprintf('%d curl downloads of %s MiB started together '
                . 'through one %d Mbit/s, %d ms path (queue %s KiB) from a '
                . 'server with the event MPM, ThreadsPerChild %d, '
                . 'MaxRequestWorkers %d and AsyncRequestWorkerFactor %d. From '
                . '%d s on, `server-status?auto` is polled once a second (%d '
                . 'polls; figures are their medians, the largest BusyWorkers in '
                . 'brackets) and after each poll a 3-byte file is requested '
                . 'from the client namespace (the median time from request to '
                . 'last byte of those after every %spoll: %d requests). Both go '
                . 'over keep-alive connections, with a request every second '
                . 'from the start (KeepAliveTimeout 2: the MPM refreshes the '
                . 'connection counts mod_status shows when a queue entry is due '
                . 'to time out, so every 2 s at least), opened before the '
                . 'downloads: the MPM accepts connections '
                . 'only up to ThreadsPerChild + idle workers × '
                . 'AsyncRequestWorkerFactor (ConnsTotal) and leaves the rest in '
                . 'the listen queue, where a new connection would wait for '
                . 'downloads to end whatever the module does (the event MPM '
                . 'closes idle keep-alive connections when no worker is idle: '
                . 'keep-alive lost counts the requests that had to connect '
                . 'again, and their wait is in their time). Open downloads: '
                . 'the download sockets the server has sent data on, from `ss` '
                . 'at each poll; waiting: the other ones (not accepted yet). '
                . 'The downloads are stopped after the last poll; re-tuned: the '
                . 'logged downloads with SNDBUF_TUNE_RETUNES > 0, of those that '
                . 'lasted 3 RTTs or more (%%D in the access log).',
                $p->{downloads}, mib($p->{size}), $p->{rate}, $p->{rtt},
                kib($RES{health}{workers}{status}{queue_bytes}), $p->{threads},
                $p->{threads}, $p->{factor}, $p->{first_poll_s}, $r->{polls},
                ('', '', 'second ', 'third ', 'fourth ')[$r->{every}] // "$r->{every}th ",
                $r->{probes}),
            head => ['config', 'open downloads', 'waiting', 'ConnsTotal',
                     'ConnsAsyncWriting', 'writing / open', 'BusyWorkers (max)',
                     'BusyWorkers vs `nomod`', 'small request ms',
                     'vs `nomod`', 're-tuned / lasted 3 RTTs', 'keep-alive lost'],
            align => 'lrrrrrrrrrrr', rows => $rows,
            after => config_legend(@configs) } ] };
}

sub targets {
    my ($push) = @_;
    my $r = $RES{workers} || {};
    my $cells = $r->{cells} || {};
    my $base = $cells->{nomod};
    my @mod = grep { $CONFIGS{$_}{module} } @{ $r->{configs} || [qw(auto)] };
    for my $cfg (@mod) {
        my $c = $cells->{$cfg} || {};
        my $ok = $base && defined $c->{busy} && defined $base->{busy}
            ? $c->{busy} <= $base->{busy} + 1 : undef;
        $push->("workers: BusyWorkers with `$cfg` (median of the polls)",
                '<= no module + 1', sprintf('%s (no module %s)', fmt_or($c->{busy}),
                fmt_or(($base || {})->{busy})), $ok);
        $push->("workers: ConnsAsyncWriting with `$cfg` / open downloads",
                '>= 90%', pct($c->{writing_share}) . '%',
                defined $c->{writing_share} ? $c->{writing_share} >= 0.9 : undef);
        my $rt = div($c->{retuned}, $c->{long});
        $push->("workers: `$cfg` downloads that lasted 3 RTTs with "
                . 'SNDBUF_TUNE_RETUNES > 0', '>= 90%',
                defined $rt ? pct($rt) . '%' : 'n/a',
                defined $rt ? $rt >= 0.9 : undef) if $cfg eq 'auto';
        my $x = div($c->{probe_s}, ($base || {})->{probe_s});
        $push->("workers: small request with `$cfg` vs no module (median of "
                . ($c->{probes_ok} // 5) . ')', '<= 1.2x', ratio($x) . 'x',
                defined $x ? $x <= 1.2 : undef);
    }
}

1;
