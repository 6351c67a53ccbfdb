package SndbufTune::Restarts;
# Restarts under load (t/reliability/restarts_*.t, one file per MPM):
#
#   use Test::More tests => ...;       # the counts below add up
#   SndbufTune::Restarts::start('event');               # 3 checks
#   SndbufTune::Restarts::event($_) for 0 .. $#EVENTS;  # graceful 5, restart 9
#   SndbufTune::Restarts::finish();                     # 6 checks
#   (restart_auto_inflight.t: auto_inflight_start 1, _round 5 each, _stop 1)
# Each phase makes that fixed number of checks unless it cannot go on,
# and returns true when all of them passed.
#
# CLIENTS client processes download a file over and over, each over one of
# HTTP/1.1, h2c and TLS h2 (under prefork, where mod_http2 does no HTTP/2:
# HTTP/1.1 plain and over TLS), from the fixed, unset and auto locations
# in turn (SndbufTune::Reliability's server), at a limited rate so that
# downloads are always in flight. Meanwhile the test runs through EVENTS:
#
#   graceful  apache2 -k graceful with every client downloading. Every
#             download must arrive whole (SHA-256), but for one that
#             httpd's own race cut (cut_by_httpd_race); the status page's
#             counters (?auto) never go down; the old generation's
#             children exit once their downloads are done.
#   restart   apache2 -k restart with downloads in flight: the clients
#             hold (finish what they do, start nothing new), the test
#             starts its own rate-limited downloads from each location
#             (auto among them) over every protocol but HTTP/2 and, once each
#             has bytes, restarts. Only these may be cut; one that ends
#             well must be whole. The first status page of the new
#             generation shows every counter at zero; none of the old
#             children is left; no child had to be sent SIGTERM again or
#             SIGKILL (AH00045-AH00047: "still did not exit"); the clients
#             go on. No HTTP/2 download is in flight then: stock httpd
#             2.4.71 (mod_http2), without this module, takes 3 to 7 s, and
#             under load more than 9 s, to end a child with h2c streams in
#             flight (AH00045, AH00046), which would hide the module's own
#             delays; TLS h2 waits as long for a download larger than the
#             socket buffers, in mod_http2's blocking write through
#             mod_ssl. HTTP/1.1 (sendfile, write completion) ends at once.
#
# At the end: after the last restart every counter went on through the
# graceful restarts that followed, so the requests counted per policy are
# exactly the clients' downloads since then; the error log shows no child
# that had to be killed (AH00046, AH00047) and none that died of a
# signal; stop leaves no process. Synchronisation is by bounded polling on what the clients, the
# status page and /proc say; nothing sleeps for a fixed time and nothing is
# asserted about wall-clock time.
#
# Environment: SBT_RESTART_CLIENTS (default 6), SBT_RESTART_RATE (curl
# --limit-rate of each download, default 8M), SBT_KEEP=1 keeps the
# server's directory.
use strict;
use warnings;

use File::Temp ();
use POSIX ();
use Test::More;
use Time::HiRes ();

use SndbufTune::Reliability ();
use SndbufTune::Util qw(poll_until);

my $CLIENTS = $ENV{SBT_RESTART_CLIENTS} || 6;
my $RATE = $ENV{SBT_RESTART_RATE} || '8M';
my $FILE = '4m';
my %SIZE = ($FILE => 4 << 20, '8m' => 8 << 20);
my @LOCATIONS = qw(fixed unset auto);
# 10 graceful, 2 full restarts; several graceful after the last restart
our @EVENTS = qw(graceful graceful graceful restart graceful graceful graceful
                 restart graceful graceful graceful graceful);

my $KILLED = qr/AH0004[67]|could not make child/;
our $VICTIM_RATE = '512k';

# Event MPM with EnableSendfile On: files then leave the handler and drain
# in write completion. With Off (httpd's default) the core reads a file
# into memory and writes it in blocking mode while more than
# FlushMaxThreshold is unsent (server/core_filters.c), so a worker stays
# with every download its socket buffers cannot hold, and -k restart waits
# for it: stock httpd, without this module, logs AH00045 for 8 slow 8 MiB
# downloads (t/README.md).
my %MPM_CONF = (
    event => { processes => 2, threads => 16, sendfile => 1 },
    prefork => { processes => 16 },
);

my ($LAB, $CTL, @KIDS);

sub now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) }

my $FAILED = 0;         # checks failed so far: a phase's result

sub check {
    my ($cond, $name, @why) = @_;
    ok($cond, $name) or do {
        diag(join "\n", grep { defined } @why);
        $FAILED++;
    };
    return $cond;
}

# Run a phase; true if every check it made passed.
sub _phase {
    my $code = shift;
    my $before = $FAILED;
    $code->(@_);
    return $FAILED == $before;
}

# ------------------------------------------------------------- clients --

sub _write_state {
    my ($i, $state) = @_;
    open my $fh, '>', "$CTL/state.$i.tmp" or return;
    print $fh $state;
    close $fh;
    rename "$CTL/state.$i.tmp", "$CTL/state.$i";
}

# A client process: downloads until told to stop, holding while told to.
# Each download is a line in results.I: start end proto location ok why.
sub _client {
    my $i = shift;
    $SIG{$_} = sub { POSIX::_exit(1) } for qw(INT TERM HUP PIPE);
    my @protos = $LAB->protos;
    my $proto = $protos[$i % @protos];
    my $n = $i;
    open my $out, '>>', "$CTL/results.$i" or POSIX::_exit(2);
    $out->autoflush(1);
    until (-e "$CTL/stop") {
        # "busy" is written before hold is looked at: once the test sees a
        # client idle under hold, it starts nothing until hold goes
        _write_state($i, 'busy');
        if (-e "$CTL/hold") {
            _write_state($i, 'idle');
            poll_until(600, sub { !-e "$CTL/hold" || -e "$CTL/stop" }, 0.01);
            next;
        }
        my $where = $LOCATIONS[$n++ % @LOCATIONS];
        my $t0 = now();
        my ($ok, $why) = $LAB->download($proto, $where, $FILE,
                                        limit_rate => $RATE);
        printf $out "%.6f %.6f %s %s %d %s\n", $t0, now(), $proto, $where,
            $ok, $why =~ s/\s+/ /gr;
    }
    _write_state($i, 'done');
    POSIX::_exit(0);
}

sub start_clients {
    for my $i (0 .. $CLIENTS - 1) {
        my $pid = fork // die "fork: $!";
        _client($i) unless $pid;
        push @KIDS, $pid;
    }
}

sub results {
    my @r;
    for my $i (0 .. $CLIENTS - 1) {
        open my $fh, '<', "$CTL/results.$i" or next;
        while (<$fh>) {
            chomp;
            my %h;
            @h{qw(t0 t1 proto where ok why)} = split ' ', $_, 6;
            $h{client} = $i;
            push @r, \%h;
        }
    }
    return @r;
}

sub done_counts {
    my %n = map { ($_ => 0) } 0 .. $CLIENTS - 1;
    $n{ $_->{client} }++ for results();
    return \%n;
}

# Every client finishes $more downloads from now on (bounded).
sub progress {
    my ($more, $label) = @_;
    my $from = done_counts();
    my ($ok) = poll_until(120, sub {
        my $now = done_counts();
        return !grep { $now->{$_} < $from->{$_} + $more } keys %$now;
    }, 0.05);
    return check($ok, "$label: every client finished $more more download(s)");
}

sub states {
    return map {
        open my $fh, '<', "$CTL/state.$_" or return '';
        my $s = <$fh> // '';
        close $fh;
        $s;
    } 0 .. $CLIENTS - 1;
}

# ------------------------------------------------------------ counters --

my $COUNTER = qr/^(Requests\w+|BytesSent|SndbufLimited|Clamped|SetsockoptFailures|Effective\w+)$/;

# ?auto's counters as { "Vhost NAME Counter" => value } (by name, not by
# slot), and the generation.
sub counters {
    my $s = $LAB->status or return;
    my (%name, %c);
    for my $k (keys %$s) {
        $name{"$1 $2"} = $s->{$k} if $k =~ /^SndbufTune(Vhost|Network)\[(\d+)\]Name$/;
    }
    for my $k (keys %$s) {
        next unless $k =~ /^SndbufTune(Vhost|Network)\[(\d+)\](\w+)$/;
        my ($t, $slot, $what) = ($1, $2, $3);
        next unless $what =~ $COUNTER;
        $c{"$t " . ($name{"$t $slot"} // "#$slot") . " $what"} = $s->{$k};
    }
    return ($s->{SndbufTuneGeneration}, \%c);
}

# The counters once the server serves generation $gen (bounded).
sub counters_of {
    my $gen = shift;
    my $c;
    my ($ok) = poll_until(60, sub {
        (my $g, $c) = counters();
        return defined $g && $g == $gen;
    }, 0.02);
    return $ok ? $c : undef;
}

sub policy_totals {
    my $c = shift;
    my %t = map { ($_ => 0) } @LOCATIONS;
    for my $k (keys %$c) {
        $t{lc $1} += $c->{$k} if $k =~ /^Vhost .* Requests(Fixed|Unset|Auto)$/;
    }
    return \%t;
}

# ------------------------------------------------------------- events --

sub alive { grep { kill 0, $_ } @_ }

# When each apache2 -k graceful ran: [start, end], monotonic seconds.
my @GRACEFULS;

# httpd 2.4.71's event MPM, with or without this module, ends a child
# with a connection in it about once in a hundred graceful restarts under
# this load (t/README.md, bench/graceful_race): its listener
# accepted the connection, and the worker had not yet counted it, when
# the graceful came, so the listener saw no connection left and the
# child ended; the kernel sent what the socket held, then FIN. Such a
# download: curl saw a clean close (exit 18), the request never reached
# the access log (httpd logs it when the response is done, whichever
# way the connection ends, unless the process ends first), and a
# graceful restart ran while it was in flight. When the child ends before
# any worker read the request, the kernel closes a socket with unread
# data by a reset, with no status and no byte (000 ... 0): curl exit 56
# where it was reading, 55 (broken pipe) where it was still sending, as
# an h2c client sending its preface and settings is.
sub cut_by_httpd_race {
    my ($mpm, $r) = @_;
    return 0 unless $mpm eq 'event'
        && $r->{why} =~ /^curl exit (?:18:|5[56]: .* 000 \S+ 0 port=)/;
    my ($port) = $r->{why} =~ /port=(\d+)/ or return 0;
    return 0 if $LAB->srv->access_entry_for($port, 0);
    return scalar grep { $r->{t0} <= $_->[1] && $r->{t1} >= $_->[0] }
        @GRACEFULS;
}

sub graceful {
    my ($label, $gen, $before) = @_;
    my @old = $LAB->srv->child_pids;
    my $t0 = now();
    my ($rc, $out) = $LAB->srv->graceful;
    push @GRACEFULS, [$t0, now()];
    check(!$rc, "$label: apache2 -k graceful", $out);
    my $c = counters_of($gen);
    check($c, "$label: generation $gen serves", $LAB->srv->log_tail)
        or return;
    my @down = grep { !defined $c->{$_} || $c->{$_} < $before->{$_} }
        sort keys %$before;
    check(!@down, "$label: no counter went down",
          map { "$_: $before->{$_} -> " . ($c->{$_} // 'gone') } @down);
    progress(2, $label);
    my ($gone) = poll_until(120, sub { !alive(@old) }, 0.05);
    check($gone, "$label: the old generation's children exited",
          'left: ' . join(' ', alive(@old)));
    return counters_of($gen);
}

# Rate-limited downloads of the 8 MB file, [protocol, location] each, in
# separate processes; each writes a file of its own (the test waits for
# its first bytes).
my $VICTIMS = 0;
sub start_victims {
    my @v;
    for (@_) {
        my ($proto, $where) = @$_;
        {
            my $file = "$CTL/victim." . $VICTIMS++ . ".$proto.$where";
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                $SIG{$_} = sub { POSIX::_exit(1) } for qw(INT TERM HUP PIPE);
                setpgrp;            # its curl goes with it (kill_victims)
                my ($ok, $why) = $LAB->download($proto, $where, '8m',
                    limit_rate => $VICTIM_RATE, output => $file);
                open my $fh, '>', "$file.result";
                print $fh "$ok $why";
                close $fh;
                POSIX::_exit(0);
            }
            push @v, { pid => $pid, proto => $proto, where => $where,
                       file => $file };
        }
    }
    return @v;
}

sub restart {
    my ($label, $gen) = @_;
    open my $fh, '>', "$CTL/hold" or die "$CTL/hold: $!";
    close $fh;
    my ($idle) = poll_until(120, sub { !grep { $_ ne 'idle' } states() }, 0.02);
    check($idle, "$label: every client holds") or return;

    # auto three times: what a restart must not wait for; no HTTP/2
    # (above, and t/README.md)
    my @protos = grep { !/^h2/ } $LAB->protos;
    my ($c, $victims, $log_from) = restart_cutting($label, $gen, 0,
        map { my $p = $_; map { [$p, $_] } @LOCATIONS, 'auto', 'auto' }
        @protos) or return;
    my @victims = @$victims;
    my @nonzero = grep { $c->{$_} } sort keys %$c;
    check(!@nonzero, "$label: every counter is zero",
          map { "$_: $c->{$_}" } @nonzero);

    my @bad;
    for my $v (@victims) {
        my $r = do { local (@ARGV, $/) = "$v->{file}.result"; <> } // '0 no result';
        my ($ok, $why) = split ' ', $r, 2;
        # cut by the restart (curl failed), or whole; never short or
        # wrong with curl content
        push @bad, "$v->{proto} /$v->{where}/: $why"
            if !$ok && $why !~ /^curl exit/;
    }
    check(!@bad, "$label: the downloads in flight were cut or arrived whole",
          @bad);
    my @killed = grep { /$KILLED|AH00045|still did not exit/ }
        split /\n/, substr($LAB->srv->log_text, $log_from);
    check(!@killed, "$label: every child exited at the first signal",
          @killed);
    # before the clients can start: every download after this is counted
    # by the new generation
    my $released = now();
    unlink "$CTL/hold";
    progress(1, "$label, after");
    return $released;
}

# apache2 -k restart once downloads ([protocol, location] each) are in
# flight: (counters of generation $gen, the downloads, error log offset
# before the restart), once they ended (or, with $kill, were ended: the
# kernel may still hold a whole file for one whose server is gone); () if
# the new generation does not serve. Checks that no old child is left.
sub restart_cutting {
    my ($label, $gen, $kill, @pairs) = @_;
    my @victims = start_victims(@pairs);
    my ($flowing) = poll_until(60, sub {
        !grep { !-s $_->{file} } @victims }, 0.01);
    check($flowing, "$label: " . @victims . ' downloads in flight ('
          . join(', ', map { "$_->[0] /$_->[1]/" } @pairs) . ')');
    my @old = $LAB->srv->child_pids;
    my $log_from = length $LAB->srv->log_text;
    my ($rc, $out) = $LAB->srv->restart;
    check(!$rc, "$label: apache2 -k restart", $out);
    my $c = counters_of($gen);
    check($c, "$label: generation $gen serves", $LAB->srv->log_tail);
    check(!alive(@old), "$label: none of the old children is left",
          'left: ' . join(' ', alive(@old)));
    kill 'TERM', map { -$_->{pid} } @victims if $kill;
    waitpid $_->{pid}, 0 for @victims;
    return $c ? ($c, \@victims, $log_from) : ();
}

# Only restarts, each with 8 slow HTTP/1.1 auto downloads in flight, and
# SndbufTuneLimits 1m 4m on /auto/ (auto sizes at once, so its chunks are
# large, and the socket holds less than a file): no child may outlive the
# first SIGTERM. auto_inflight_start, then auto_inflight_round for each
# round, then auto_inflight_stop.
my ($MPM, $GEN, $COUNTERS, $RELEASED, $TMP, $T0);
# The events so far, "label at N s", for a report on a cut download.
my @TIMELINE;

sub auto_inflight_start {
    $MPM = shift;
    return _phase(sub {
        $LAB = SndbufTune::Reliability->new(
            name => "restart-auto-$MPM", mpm => $MPM, sizes => \%SIZE,
            conf => "<Location /auto/>\n    SndbufTuneLimits 1m 4m\n"
                  . "</Location>\n",
            %{ $MPM_CONF{$MPM} });
        check($LAB->start, "$MPM: server starts", $LAB->srv->error)
            or return;
        $TMP = File::Temp->newdir('sbt-restarts-XXXXXX', TMPDIR => 1);
        $CTL = "$TMP";
        ($GEN) = counters();
    });
}

sub auto_inflight_round {
    my $round = shift;
    local $VICTIM_RATE = '128k';
    return _phase(sub {
        my $label = "$MPM: restart $round";
        my (undef, undef, $log_from) =
            restart_cutting($label, ++$GEN, 1, (['h1', 'auto']) x 8) or return;
        my @killed = grep { /$KILLED|AH00045|still did not exit/ }
            split /\n/, substr($LAB->srv->log_text, $log_from);
        check(!@killed, "$label: every child exited at the first signal",
              @killed);
    });
}

sub auto_inflight_stop {
    return _phase(sub {
        check($LAB->srv->stop, "$MPM: stop: no process of the server left",
              $LAB->srv->error);
    });
}

# ---------------------------------------------------------------- run --

# The server, the status page, the clients downloading.
sub start {
    $MPM = shift;
    return _phase(sub {
        $LAB = SndbufTune::Reliability->new(
            name => "restarts-$MPM", mpm => $MPM, sizes => \%SIZE,
            %{ $MPM_CONF{$MPM} });
        check($LAB->start, "$MPM: server starts", $LAB->srv->error)
            or return;
        $TMP = File::Temp->newdir('sbt-restarts-XXXXXX', TMPDIR => 1);
        $CTL = "$TMP";
        ($GEN, $COUNTERS) = counters();
        check(defined $GEN, "$MPM: status page answers") or return;
        $T0 = now();
        @TIMELINE = ();
        @GRACEFULS = ();
        start_clients();
        progress(1, "$MPM: start");
        $RELEASED = now();
    });
}

# $EVENTS[$i]: a graceful restart or a full one.
sub event {
    my $i = shift;
    my $label = sprintf '%s: %s %d', $MPM, $EVENTS[$i], $i + 1;
    push @TIMELINE, sprintf '%s at %.2f s', $label, now() - $T0;
    note($TIMELINE[-1]);
    $GEN++;
    return _phase(sub {
        if ($EVENTS[$i] eq 'graceful') {
            $COUNTERS = graceful($label, $GEN, $COUNTERS) // $COUNTERS;
        }
        else {
            $RELEASED = restart($label, $GEN) // $RELEASED;
            $COUNTERS = (counters())[1] // $COUNTERS;
        }
    });
}

# The clients stop; what they got, the counters since the last restart,
# the error log, stop.
sub finish {
    return _phase(\&_finish);
}

# For a download cut short (curl's port in $why): the child that served
# it (the access log) and what the error log says of that child (the
# MPM's debug lines: started, generation, graceful or not, stopped).
# With no access-log entry (the child never logged it), the events' times
# and the MPM's last lines of every child instead.
sub served_by {
    my $why = shift;
    my ($port) = $why =~ /port=(\d+)/ or return '  (curl named no port)';
    my $e = $LAB->srv->access_entry_for($port, 0);
    if (!$e) {
        my @mpm = $LAB->log_lines(qr/\[mpm_\w+:/);
        splice @mpm, 0, @mpm - 30 if @mpm > 30;
        return "  (no access-log entry for port $port); events: "
            . join(', ', @TIMELINE) . "; the MPM's last lines:\n"
            . join '', map { "    $_\n" } @mpm;
    }
    my $at = POSIX::strftime('%H:%M:%S', localtime($e->{time_us} / 1e6))
        . sprintf('.%06d', $e->{time_us} % 1e6);
    return "  served by pid $e->{pid}, its handler done at $at; the MPM's "
        . "lines of that pid:\n"
        . join '', map { "    $_\n" }
            $LAB->log_lines(qr/\[mpm_\w+:.*\bpid $e->{pid}\b/);
}

sub _finish {
    my $mpm = $MPM;
    open my $fh, '>', "$CTL/stop" or die "$CTL/stop: $!";
    close $fh;
    my ($ended) = poll_until(300, sub {
        @KIDS = grep { waitpid($_, POSIX::WNOHANG()) == 0 } @KIDS;
        !@KIDS }, 0.05);
    check($ended, "$mpm: every client ended");
    kill 'KILL', @KIDS;

    my @r = results();
    my (@race, @bad);
    push @{ cut_by_httpd_race($mpm, $_) ? \@race : \@bad }, $_
        for grep { !$_->{ok} } @r;
    note("$mpm: cut by httpd's own race at a graceful restart (not "
         . "counted against the module): client $_->{client} $_->{proto} "
         . "/$_->{where}/, " . sprintf('%.2f-%.2f s: ', $_->{t0} - $T0,
                                       $_->{t1} - $T0) . $_->{why})
        for @race;
    check(@r && !@bad, "$mpm: all " . (@r - @race) . " client downloads "
          . "(HTTP/1.1, h2c, TLS h2; fixed, unset, auto) arrived whole"
          . (@race ? ', and ' . @race . " more cut by httpd's race" : ''),
          map { "client $_->{client} $_->{proto} /$_->{where}/, "
                . sprintf('%.2f-%.2f s after the start: ', $_->{t0} - $T0,
                          $_->{t1} - $T0)
                . "$_->{why}\n" . served_by($_->{why}) }
          @bad[0 .. ($#bad > 9 ? 9 : $#bad)]);
    my %want = map { ($_ => 0) } @LOCATIONS;
    $want{ $_->{where} }++ for grep { $_->{ok} && $_->{t0} > $RELEASED } @r;
    my $got;
    poll_until(30, sub {
        my (undef, $c) = counters();
        $got = $c && policy_totals($c);
        return $got && !grep { $got->{$_} != $want{$_} } @LOCATIONS;
    }, 0.05);
    is_deeply($got, \%want, "$mpm: the counters went on through the graceful"
              . " restarts: requests per policy since the last restart are"
              . " the clients' downloads") or $FAILED++;

    my @killed = $LAB->log_lines($KILLED);
    check(!@killed, "$mpm: error log: no child had to be killed", @killed);
    my @crash = $LAB->log_lines($SndbufTune::Reliability::CRASH_RE);
    check(!@crash, "$mpm: error log: no child died of a signal", @crash);
    check($LAB->srv->stop, "$mpm: stop: no process of the server left",
          $LAB->srv->error);
}

1;
