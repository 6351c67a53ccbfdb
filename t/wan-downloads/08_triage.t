# What limited each download, as the module tells it, against what the
# kernel counted for the same connection (ss -ti in the server namespace,
# sampled every 0.1 s, the samples around the moment the module read it),
# with the suite's client (t/helpers/http-get: StallClient in the client
# namespace). Each verdict below is in the access log, the status page's
# ?auto, the metrics and its words; each download's kernel times
# (sndbuf_ms, rwnd_ms, and with network_ms its busy time) are what ss
# counted, within 10% (and 50 ms: the kernel counts in jiffies).
#
# 30 Mbit/s, 250 ms (the field report's path), two servers loading the
# module with no SndbufTune line:
#   - core SendBufferSize 16384, nothing else: verdict sndbuf; the page
#     names the SendBufferSize line, file:line;
#   - autotuned, the client's SO_RCVBUF 64 KiB: verdict rwnd (the kernel
#     counts a third of the time or so as window-limited: no majority).
# 10 Mbit/s, 60 ms, autotuned: verdict network.
# Keep-alive over a lossy path (30 Mbit/s, 250 ms, 2% loss): two
# responses on one connection, idle for 1.5 s between them so that ss
# sees the connection at rest: the first 4m (megabytes still in the kernel
# when it is logged, and retransmitted meanwhile), the second 16k (a send
# buffer that limits it, and a tail of 32 KiB at most). The second's
# SNDBUF_TUNE_RETRANS and SNDBUF_TUNE_SNDBUF_LIMITED_MS are what ss
# counted from the rest before it to the moment it was logged (10% and 3
# segments or 50 ms either side): a baseline taken when the first was
# logged counts the first's tail too.
# Needs root and /dev/net/tun (skips otherwise; fails under $CI).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Util qw(capture parse_auto);
use SndbufTune::WanLab qw(plan_lab_or_skip);

plan_lab_or_skip();
plan tests => 6;

my $PAUSE = 1.5;

# The sample of series $ss ([t, ss]) last taken before epoch second $at;
# $t0: the epoch second of t = 0.
sub sample_before {
    my ($ss, $t0, $at) = @_;
    my ($last) = grep { $t0 + $_->[0] < $at } reverse @$ss;
    return $last;
}

# When the access log's entry $e was written: its request's time and
# duration (%{usec}t, %D), in epoch seconds.
sub logged_at {
    my $e = shift;
    return ($e->{time_us} + $e->{duration_us}) / 1e6;
}

# The ss hashes of get() $g's connection last before and first after
# entry $e was logged (the last sample if none is after).
sub around {
    my ($g, $e) = @_;
    my $at = logged_at($e);
    my $before = sample_before($g->{ss}, $g->{t0}, $at) || $g->{ss}[0];
    my ($after) = grep { $g->{t0} + $_->[0] >= $at } @{ $g->{ss} };
    return ($before->[1], ($after || $g->{ss}[-1])->[1]);
}

# $got within $lo .. $hi (what ss counted by the samples around the
# moment it was taken), give or take $slack plus 10%.
sub within {
    my ($got, $lo, $hi, $slack, $what) = @_;
    $got //= -1;
    cmp_ok($got, '>=', 0.9 * $lo - $slack, "$what $got: at least the $lo "
           . 'ss counted by the sample before') or return;
    cmp_ok($got, '<=', 1.1 * $hi + $slack, "$what $got: at most the $hi ss "
           . 'counted by the sample after');
}

# The status page's body at $path, asked from the server's namespace
# (not across the path).
sub page {
    my ($lab, $srv, $path) = @_;
    my ($rc, $out) = capture('ip', 'netns', 'exec', $lab->{ns_server},
                             'curl', '-s', $srv->url($path));
    return $out;
}

# One download of $path from $srv (get() options %o), then its verdict
# $want checked everywhere, and its kernel times against ss. Returns the
# HTML status page.
sub verdict_ok {
    my ($lab, $srv, $path, $size, $sha, $want, %o) = @_;
    my $g = $lab->get(srv => $srv, paths => [$path], pause => 0.5, %o);
    got_ok($g, [$path], { $path => $size }, { $path => $sha->{$path} });
    my ($e) = grep { ($_->{cport} // '') eq $g->{port} } $srv->access_entries;
    ok($e, 'logged') or return '';
    is($e->{policy}, 'none', 'no policy applied (none configured)');
    is($e->{verdict}, $want, "access log: verdict $want");
    diag(sprintf '%s: sndbuf %s rwnd %s network %s app %s ms, goodput %.2f '
         . 'Mbit/s', $path, map({ $e->{$_} // '-' }
                                qw(sndbuf_ms rwnd_ms network_ms app_ms)),
         ($e->{goodput_bps} // 0) / 1e6);
    my ($lo, $hi) = around($g, $e);
    my $busy = ($e->{sndbuf_ms} // 0) + ($e->{rwnd_ms} // 0)
             + ($e->{network_ms} // 0);
    within($e->{sndbuf_ms}, $lo->{sndbuf_limited_ms},
           $hi->{sndbuf_limited_ms}, 50, 'sndbuf_ms');
    within($e->{rwnd_ms}, $lo->{rwnd_limited_ms}, $hi->{rwnd_limited_ms}, 50,
           'rwnd_ms');
    within($busy, $lo->{busy_ms}, $hi->{busy_ms}, 50,
           'busy (sndbuf_ms + rwnd_ms + network_ms)');
    my ($kv) = parse_auto(page($lab, $srv, '/sbt-status?auto'));
    my ($slot) = map { /^(SndbufTuneVhost\[\d+\])Name$/ ? $1 : () }
                 grep { $kv->{$_} eq 'localhost' } keys %$kv;
    is($slot && $kv->{"${slot}Verdict"}, $want, "?auto: verdict $want");
    is($slot && $kv->{ "${slot}LimitedBy" . ucfirst $want }, 1,
       "?auto: one response limited by $want");
    like(page($lab, $srv, '/sbt-metrics'),
         qr/^sndbuf_tune_vhost_responses_limited_total\{vhost="localhost",by="$want"\} 1$/m,
         "metrics: one response limited by $want");
    return page($lab, $srv, '/sbt-status');
}

# Responses of a get() checked: status, length and SHA-256 of each.
sub got_ok {
    my ($g, $paths, $size, $sha) = @_;
    is(scalar @{ $g->{res} }, scalar @$paths, 'every response came')
        or diag($g->{error} // 'no error output');
    for my $i (0 .. $#$paths) {
        my $r = $g->{res}[$i] || {};
        my $p = $paths->[$i];
        ok(($r->{status} // '') eq '200' && ($r->{bytes} // -1) == $size->{$p}
           && ($r->{sha256} // '') eq $sha->{$p}, "$p: 200, whole, SHA-256");
    }
}

subtest 'keep-alive: the second response starts from its own start' => sub {
    my %size = ('/w4m/first.bin' => 8 << 20, '/w16k/second.bin' => 512 << 10);
    my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
        tag => 'k', rtt_ms => 250, rate_mbit => 30, loss => 2,
        files => \%size, server => { name => 'keepalive', body => <<'EOF' });
# The first response fits in its 8 MiB buffer: httpd is done with it, and
# keep-alive's clock runs, seconds before the client has it all over this
# lossy path (CI saw the default 5 s end first, and the second request
# find the connection closed).
KeepAliveTimeout 60
<Location /w4m/>
    SndbufTune 4m
</Location>
<Location /w16k/>
    SndbufTune 16k
</Location>
EOF
    my @paths = ('/w4m/first.bin', '/w16k/second.bin');
    my $g = $lab->get(srv => $srv, paths => \@paths, pause => $PAUSE);
    got_ok($g, \@paths, \%size, $sha);
    my ($r1, $r2) = @{ $g->{res} };
    my @e = grep { ($_->{cport} // '') eq $g->{port} } $srv->access_entries;
    is(scalar @e, 2, 'both logged, on one connection') or return;
    my $before = sample_before($g->{ss}, $g->{t0}, $r2->{sent});
    ok($before && $g->{t0} + $before->[0] > $r1->{done} + 0.5,
       'ss saw the connection at rest before the second') or return;
    my $s0 = $before->[1];
    # the second's end: when it was logged (its last bytes handed to the
    # kernel), between two samples
    my ($lo, $hi) = around($g, $e[1]);
    my $at_log1 = sample_before($g->{ss}, $g->{t0}, logged_at($e[0]));
    diag(sprintf 'retransmitted: %d by the first response\'s log, %d by '
         . 'the rest after it (its tail), %d by the second\'s log',
         $at_log1 ? $at_log1->[1]{retrans} : -1, $s0->{retrans},
         $hi->{retrans});
    within($e[1]{retrans}, $lo->{retrans} - $s0->{retrans},
           $hi->{retrans} - $s0->{retrans}, 3, 'SNDBUF_TUNE_RETRANS');
    within($e[1]{limited_ms},
           $lo->{sndbuf_limited_ms} - $s0->{sndbuf_limited_ms},
           $hi->{sndbuf_limited_ms} - $s0->{sndbuf_limited_ms}, 50,
           'SNDBUF_TUNE_SNDBUF_LIMITED_MS');
    $srv->stop;
    $lab->down;
};

{
    my %size = ('/seed.bin' => 768 << 10, '/window.bin' => 1536 << 10);
    my ($lab, $sbs, $sha) = SndbufTune::WanLab->lab_with_server(
        tag => 's', rtt_ms => 250, rate_mbit => 30, files => \%size,
        server => { name => 'sbs', status_pages => 1,
                    body => "SendBufferSize 16384\n" });
    my $auto = $lab->server(name => 'autotuned', listen => '198.18.0.1:81',
                            status_pages => 1);
    $sha->{'/window.bin'} = $auto->add_random_file('/window.bin',
                                                   $size{'/window.bin'});
    ok($auto->start, 'a second apache2, autotuned, answers')
        or BAIL_OUT($auto->error);

    subtest 'SendBufferSize 16384 over 30 Mbit/s, 250 ms: sndbuf' => sub {
        my $html = verdict_ok($lab, $sbs, '/seed.bin', $size{'/seed.bin'},
                              $sha, 'sndbuf');
        open my $fh, '<', $sbs->conf or die $sbs->conf . ": $!";
        my $line = 0;
        while (<$fh>) {
            $line = $., last if /^SendBufferSize/;
        }
        my $at = $sbs->conf . ":$line";
        ok(index($html, 'the send buffer limited 1 of 1 large responses '
                 . '(100%); the buffer in force, 16 KiB (core SendBufferSize '
                 . "at $at), allows about ") >= 0, 'the page names the '
           . "SendBufferSize line, $at") or diag($html =~ /(the send[^<]*)/);
    };

    subtest 'a client window of 64 KiB over 30 Mbit/s, 250 ms: rwnd' => sub {
        my $html = verdict_ok($lab, $auto, '/window.bin',
                              $size{'/window.bin'}, $sha, 'rwnd',
                              rcvbuf => 65536);
        ok(index($html, "clients' receive windows limited 1 of 1 large "
                 . 'responses (100%); nothing to tune here') >= 0,
           'the page: the clients\' windows, nothing to tune');
    };
    $_->stop for $sbs, $auto;
    $lab->down;
}

subtest 'autotuned over 10 Mbit/s, 60 ms: network' => sub {
    my %size = ('/path.bin' => 8 << 20);
    my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
        tag => 'n', rtt_ms => 60, rate_mbit => 10, files => \%size,
        server => { name => 'network', status_pages => 1 });
    my $html = verdict_ok($lab, $srv, '/path.bin', $size{'/path.bin'}, $sha,
                          'network');
    ok(index($html, 'the network limited 1 of 1 large responses (100%); '
             . 'nothing to tune here') >= 0, 'the page: the network, '
       . 'nothing to tune');
    $srv->stop;
    $lab->down;
};
