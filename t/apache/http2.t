# HTTP/2 with the module active (curl, built with nghttp2). Streams run on
# secondary connections; the policy must land on the PRIMARY connection's
# socket, which is what ss/sockinspect look at (the server end of curl's
# one TCP connection).
#   h2 over TLS (ALPN) a.ssl.test       : full download, SHA-256, decision
#   h2 over TLS a.ssl.test, slow reader : primary socket 131072, locked
#   h2c prior knowledge fixed1m.test    : full download, SHA-256
#   h2c unset.test, slow reader         : lock clear, not a configured size
#   h2 (TLS), one connection, streams to a (64k), c (1m), d (unset), then
#       a held download from a         : 2*1m locked: the largest fixed size
#       wins for the connection's life; a smaller size never shrinks it
#   h2, one connection, c (1m) then held d (unset): 2*1m locked: unset
#       never shrinks a fixed size
#   h2, one connection, d (unset) then held a (64k): 131072 locked
#   each held stream's REQUESTED is its own policy's size (unset: none),
#       not the size another stream holds the connection at; EFFECTIVE is
#       the connection's
#   h2, two downloads at once on one connection, read at 4 MB/s each: the
#       kernel's time, which belongs to the connection, is counted once:
#       the streams' busy times (sndbuf + rwnd + network notes) add up to
#       what ss counted for the connection, within 10%, and all their
#       time to the download's, not twice
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use File::Temp ();
use POSIX ();
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256 SMALL_PATH
                         CONFIGURED_SIZES vhost_port);
use SndbufTune::Checks qw(decision_ok lock_bit_is);
use SndbufTune::Kernel qw(ss_sockets server_view view_str expected_fixed_tb);
use SndbufTune::Util qw(poll_until sha256_file);
use Time::HiRes ();

my $curl_h2 = (`curl -V 2>/dev/null` =~ /^Features:.*\bHTTP2\b/m);

# mod_http2 and mod_ssl are loaded unconditionally (t/run's base config)
plan tests => 8, need({ 'curl with HTTP/2 support' => $curl_h2 });

my $port    = vhost_port('sndbuf');
my $sslport = vhost_port('sndbuf_ssl');
my $tmp = File::Temp->newdir('sndbuf-h2-XXXXXX', TMPDIR => 1);
my @tls = ('-sk', '--http2', '--resolve', "a.ssl.test:$sslport:127.0.0.1");
my $tls_url = "https://a.ssl.test:$sslport";

sub headers_of {
    my $file = shift;
    open my $fh, '<', $file or return {};
    my %h;
    while (<$fh>) {
        s/\r?\n$//;
        $h{lc $1} = $2 if /^([^:\s]+):\s*(.*)$/;
    }
    return \%h;
}

# start curl in the background, output to files; returns pid
sub curl_bg {
    my @args = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', "$tmp/bg.out";
        open STDERR, '>', "$tmp/bg.err";
        exec 'curl', @args or POSIX::_exit(127);
    }
    return $pid;
}

sub stop_curl {
    my $pid = shift;
    kill 'TERM', $pid;
    waitpid $pid, 0;
}

# the local port of curl's TCP connection to $sport
sub curl_port {
    my ($pid, $sport) = @_;
    my ($cport) = poll_until(10, sub {
        my ($s) = grep { ($_->{pid} // 0) == $pid }
            ss_sockets(dport => $sport, state => 'established', procs => 1);
        return $s && $s->{lport};
    });
    return $cport;
}

# wait until the server socket's send queue is non-empty: the stream's data
# is on the primary socket and curl is throttling
sub held_view {
    my ($cport, $sport) = @_;
    my ($v) = poll_until(10, sub {
        my $v = server_view($sport, $cport);
        return $v && $v->{send_q} && $v->{send_q} > 0 ? $v : undef;
    });
    return $v;
}

# A whole download over HTTP/2 with curl: HTTP/2, 200, length, SHA-256, and
# the decision the module reported for the stream.
sub h2_download_ok {
    my ($label, $url, $policy, $bytes, @curl) = @_;
    my ($h, $b) = ("$tmp/h", "$tmp/b");
    my $out = `curl @curl -D $h -o $b -w '%{http_version} %{http_code} %{size_download}' $url 2>&1`;
    is($out, '2 200 ' . BIG_SIZE, 'HTTP/2, 200, full size');
    is(sha256_file($b), BIG_SHA256, 'SHA-256');
    my $hdr = headers_of($h);
    decision_ok(sub { $hdr->{lc $_[0]} }, $policy, $bytes, $label);
    unlink $b;
}

# curl, whose (last) download reads slowly (@slow) and so stays open:
# $check gets the kernel's view of the server's primary socket meanwhile.
# $check may be [$ready, $check]: the view is taken once $ready is true
# (the held stream itself has begun, not an earlier one still draining).
# False if curl's connection was not found.
my @slow = ('--limit-rate', '64k', '-o', '/dev/null');
sub h2_held_ok {
    my ($label, $sport, $check, @curl) = @_;
    my $ready;
    ($ready, $check) = @$check if ref $check eq 'ARRAY';
    my $pid = curl_bg(@curl);
    my $cport = curl_port($pid, $sport);
    ok($cport, "curl's connection found") or do { stop_curl($pid); return 0 };
    poll_until(10, $ready) if $ready;
    my $v = held_view($cport, $sport);
    note("kernel view [$label]: " . view_str($v));
    $check->($v);
    stop_curl($pid);
    return 1;
}

# 1. h2 over TLS, full download
subtest 'h2 (TLS, ALPN) full download a.ssl.test' => sub {
    h2_download_ok('h2 TLS a.ssl.test', $tls_url . BIG_PATH, 'fixed', 65536,
                   @tls);
};

# 2. h2 over TLS, slow reader: kernel view of the primary socket
subtest 'h2 (TLS) held download: primary socket' => sub {
    # the TLS handshake and the h2 preface fill the send queue too: look
    # once the stream's headers (which leave after its policy) are in
    my $h = "$tmp/held2";
    unlink $h;
    my $began = sub { headers_of($h)->{'x-sndbuf-policy'} };
    h2_held_ok('h2 TLS a.ssl.test', $sslport, [$began, sub {
        my $v = shift;
        is($v && $v->{tb}, expected_fixed_tb(65536), 'tb == 2*64k');
        lock_bit_is($v, 1, 'a.ssl.test h2');
    }], @slow, @tls, '-D', $h, $tls_url . BIG_PATH);
};

# 3. h2c prior knowledge, full download from the 1m vhost
subtest 'h2c full download fixed1m.test' => sub {
    h2_download_ok('h2c fixed1m.test', "http://127.0.0.1:$port" . BIG_PATH,
                   'fixed', 1024 * 1024, '-s', '--http2-prior-knowledge',
                   '-H', "'Host: fixed1m.test'");
};

# 4. h2c unset vhost, slow reader
subtest 'h2c held download unset.test: primary socket' => sub {
    h2_held_ok('h2c unset.test', $port, sub {
        my $v = shift;
        my %fixed = map { (expected_fixed_tb($_) => 1) } CONFIGURED_SIZES;
        ok($v && !$fixed{$v->{tb}}, 'tb is none of the configured fixed sizes');
        lock_bit_is($v, 0, 'unset.test h2c');
    }, @slow, '-s', '--http2-prior-knowledge', '-H', 'Host: unset.test',
       "http://127.0.0.1:$port" . BIG_PATH);
};

# Streams of several vhosts on ONE connection. curl 7.88's h2c
# prior-knowledge mode cannot reuse its connection (the second transfer
# fails with exit 16), so this runs over TLS: the connection's SNI is
# a.ssl.test, and c.ssl.test/d.ssl.test share its certificate, so mod_ssl
# accepts their streams on it. The last stream is a held download.
sub multi_stream {
    my ($label, $hosts, $held, $want_tb, $want_req) = @_;
    my @args;
    my $i = 0;
    # no headers of an earlier call's streams may pass for this one's
    unlink map { "$tmp/mh$_" } 0 .. @$hosts;
    for my $h (@$hosts) {
        push @args, '--next' if $i;
        push @args, @tls, '-H', "Host: $h", '-D', "$tmp/mh$i",
            '-o', '/dev/null',
            # %{stderr}: unbuffered, survives the SIGTERM that ends curl
            '-w', '%{stderr}W %{num_connects} %{http_version} %{http_code}\n',
            $tls_url . SMALL_PATH;
        $i++;
    }
    push @args, '--next', @slow, @tls, '-H', "Host: $held", '-D', "$tmp/mh$i",
        $tls_url . BIG_PATH;
    # the held stream's headers leave after its policy was applied
    my $held_h;
    my $held_began = sub {
        my $h = headers_of("$tmp/mh$i");
        $held_h = $h->{'x-sndbuf-policy'} ? $h : undef;
    };
    h2_held_ok("h2 $label, held $held", $sslport, [$held_began, sub {
        my $v = shift;
        is($v && $v->{tb}, $want_tb, "tb == $want_tb");
        lock_bit_is($v, 1, $label);
    }], @args) or return;
    open my $fh, '<', "$tmp/bg.err";
    my @w = map { s/^W //r } grep { /^W / } <$fh>;
    close $fh;
    is(scalar(@w), scalar(@$hosts), 'small streams all completed');
    is_deeply([map { (split ' ', $_)[0] } @w],
              [1, (0) x (@$hosts - 1)],
              'all streams on one connection (num_connects 1,0,...)');
    ok(!grep({ !/^\d 2 200$/ } @w), 'every small stream: HTTP/2 200')
        or diag(join '', @w);
    for my $j (0 .. $i) {
        my $h = $j == $i ? ($held_h || {}) : headers_of("$tmp/mh$j");
        note("stream " . ($j + 1) . " to "
             . ($j == $i ? "$held (held)" : $hosts->[$j])
             . ": policy=" . ($h->{'x-sndbuf-policy'} // '?')
             . ' requested=' . ($h->{'x-sndbuf-requested'} // '?')
             . ' effective=' . ($h->{'x-sndbuf-effective'} // '?'));
    }
    is($held_h && $held_h->{'x-sndbuf-effective'}, $want_tb,
       'held stream reports the primary socket\'s SO_SNDBUF');
    is($held_h && $held_h->{'x-sndbuf-requested'}, $want_req,
       "held stream's REQUESTED is its own policy's ($want_req), not the "
       . 'size another stream set');
}

# 5. the largest fixed size wins; a smaller one does not shrink it
subtest 'h2 one connection: 64k, 1m, unset, then held 64k' => sub {
    multi_stream('64k,1m,unset', ['a.ssl.test', 'c.ssl.test', 'd.ssl.test'],
                 'a.ssl.test', expected_fixed_tb(1024 * 1024), 65536);
};

# 6. unset never shrinks a fixed size
subtest 'h2 one connection: 1m, then held unset' => sub {
    multi_stream('1m', ['c.ssl.test'], 'd.ssl.test',
                 expected_fixed_tb(1024 * 1024), '(null)');
};

# 7. a fixed size after unset applies
subtest 'h2 one connection: unset, then held 64k' => sub {
    multi_stream('unset', ['d.ssl.test'], 'a.ssl.test',
                 expected_fixed_tb(65536), 65536);
};

# 8. two streams at once: the connection's time counted once
subtest 'h2 two streams at once: the connection\'s seconds counted once' => sub {
    my $log = Apache::Test::vars('serverroot') . '/logs/sndbuf_log';
    my $from = -s $log // 0;
    my $url = $tls_url . BIG_PATH;
    my $t0 = Time::HiRes::time();
    # -Z: both transfers at once, multiplexed on one connection
    my $pid = curl_bg(@tls, '-Z', '--limit-rate', '4M', '-o', '/dev/null',
                      '-o', '/dev/null', $url, $url);
    my $cport = curl_port($pid, $sslport);
    ok($cport, "curl's connection found") or do { stop_curl($pid); return };
    my ($last, %conns);
    while (waitpid($pid, POSIX::WNOHANG()) == 0) {
        for my $v (ss_sockets(sport => $sslport, state => 'established')) {
            $conns{ $v->{pport} } = 1 if ($v->{pid} // 0) == 0;
            $last = $v if $v->{pport} == $cport;
        }
        Time::HiRes::sleep(0.1);
    }
    my $wall_ms = 1000 * (Time::HiRes::time() - $t0);
    is(scalar keys %conns, 1, 'one connection') or return;
    my ($e) = poll_until(10, sub {
        open my $fh, '<', $log or return undef;
        seek $fh, $from, 0;
        my @l = grep { /:$cport "GET \Q${\ BIG_PATH}\E / } <$fh>;
        return @l == 2 ? \@l : undef;
    });
    my @e = @{ $e || [] };
    is(scalar @e, 2, 'both streams logged') or return;
    my ($busy, $all) = (0, 0);
    for (@e) {
        my %f = /\b(\w+_ms)=(\d+)/g;
        note("stream: $_");
        $busy += ($f{sndbuf_ms} // 0) + ($f{rwnd_ms} // 0)
               + ($f{network_ms} // 0);
        $all += ($f{sndbuf_ms} // 0) + ($f{rwnd_ms} // 0)
              + ($f{network_ms} // 0) + ($f{app_ms} // 0);
    }
    my $ss_busy = $last ? $last->{busy_ms} : -1;
    note("streams' busy $busy ms, all $all ms; ss busy $ss_busy ms by its "
         . "last sample; the download took $wall_ms ms");
    cmp_ok($busy, '<=', 1.1 * $ss_busy + 100, 'the streams\' busy time: at '
           . 'most what ss counted for the connection (+10%)');
    cmp_ok($busy, '>=', 0.9 * $ss_busy - 100, 'and at least (-10%)');
    cmp_ok($all, '<=', $wall_ms, 'all their time: no more than the '
           . 'download took');
};
