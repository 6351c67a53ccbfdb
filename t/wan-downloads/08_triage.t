# What limited each download, as the module tells it, against what the
# kernel counted for the same connection (ss -ti in the server namespace).
#
# Keep-alive over a lossy path (30 Mbit/s, 250 ms, 2% loss): two
# responses on one connection (the suite's client, t/helpers/http-get),
# idle for 1.5 s between them so that ss sees the connection at rest: the
# first 4m (megabytes still in the kernel when it is logged, and
# retransmitted meanwhile), the second 16k (a send buffer
# that limits it, and a tail of 32 KiB at most). The second's
# SNDBUF_TUNE_RETRANS and SNDBUF_TUNE_SNDBUF_LIMITED_MS are what ss
# counted from the rest before it to the moment it was logged (between
# the samples around that moment, 10% and 3 segments or 50 ms either
# side): a baseline taken when the first was logged counts the first's
# tail too.
# Needs root and /dev/net/tun (skips otherwise; fails under $CI).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::WanLab qw(plan_lab_or_skip);

plan_lab_or_skip();
plan tests => 2;

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

pass('labs down');
