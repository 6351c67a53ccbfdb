# A release to autotuning (SndbufTune unset) that the kernel refuses half
# way. An LD_PRELOAD shim (t/helpers/failsockopt.c, built by
# SndbufTune::Util::preload_library) makes
# setsockopt(SO_BUF_LOCK) fail with EPERM, as a seccomp or LSM filter
# would; in the second variant the SO_SNDBUF that puts back the size the
# release shrank fails too, which leaves the socket locked at tcp_wmem[1]
# (16 KiB). On separate apache2 instances (Setup::standalone) with core's
# SendBufferSize 16384, so that every socket starts locked at 32 KiB:
#   one keep-alive connection: /gen/loc1m/ (SndbufTune 1m), then
#       /gen/locunset/ (SndbufTune unset: the release fails), then
#       /gen/loc1m/ again, which must lock the socket at 1m once more
#   a new connection: /gen/locunset/ (the listener's lock; it fails)
# After each failed release the module's notes (SNDBUF_TUNE_REQUESTED and
# _EFFECTIVE, as headers at the decision and in the access log at the
# end) are what the kernel shows (ss tb, getsockopt SO_SNDBUF, the lock
# bit), the error log says how the socket was left, and the download
# arrives whole.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(standalone);
use SndbufTune::Kernel qw(expected_fixed_tb tcp_wmem);
use SndbufTune::Checks;
use SndbufTune::StallClient ();
use SndbufTune::Util qw(poll_until preload_library);

my $SHIM = preload_library('failsockopt');
my $M1 = 1 << 20;

plan tests => 1 + 2 * 4;
ok($SHIM, 't/helpers/failsockopt.so is built') or BAIL_OUT($@);

# The access-log entry of the $n-th response on $c's connection.
sub entry {
    my ($srv, $c, $n) = @_;
    my ($e) = poll_until(10, sub {
        my @e = grep { ($_->{cport} // '') eq $c->local_port }
                $srv->access_entries;
        @e >= $n ? $e[$n - 1] : undef;
    });
    return $e || {};
}

# A failed unset on $c (its $n-th response): the notes against the kernel,
# which holds the lock at $tb; the error log's line for it.
sub failed_unset_ok {
    my ($srv, $c, $n, $tb, $label) = @_;
    download_ok(client => $c, host => 'localhost',
                path => '/gen/locunset/big.bin', label => $label,
                check => sub {
        my $v = view_of($c);
        log_view($label, $v);
        is($v && $v->{tb}, $tb, "$label: ss tb $tb, the lock left in place");
        lock_bit_is($v, 1, $label);
      SKIP: {
            skip 'no sockinspect', 1 unless defined $v->{so_sndbuf};
            is($v->{so_sndbuf}, $tb, "$label: getsockopt SO_SNDBUF $tb");
        }
        is($c->header('X-Sndbuf-Policy'), 'unset', "$label: policy unset");
        is(join(' ', map { $c->header("X-Sndbuf-$_") // '-' }
                     qw(Requested Effective)), $tb / 2 . " $tb",
           "$label: SNDBUF_TUNE_REQUESTED and _EFFECTIVE at the decision "
           . "are the kernel's");
    });
    my $e = entry($srv, $c, $n);
    is(join(' ', map { $e->{$_} // '-' } qw(policy requested effective)),
       'unset ' . $tb / 2 . " $tb",
       "$label: the access log's REQUESTED and EFFECTIVE are the kernel's");
    my $port = $c->local_port;
    my @lines = grep { /\[client 127\.0\.0\.1:$port\]/ } split /\n/,
                $srv->log_text;
    my $said = quotemeta('clearing the SO_SNDBUF lock (SO_BUF_LOCK) failed, '
                         . "socket left locked, SO_SNDBUF $tb (read back)");
    ok(scalar(grep { /$said/ } @lines),
       "$label: the error log says how the socket was left")
        or diag(join "\n", grep { /sndbuf_tune/ } @lines);
}

# The shim's mode, and the lock each failed release leaves: the size put
# back, or the shrunk one where putting it back failed too (the sysctls
# are read as late as they can be).
for my $mode ('buf_lock', 'buf_lock,restore') {
    my $shrunk = expected_fixed_tb(int((tcp_wmem())[1] / 2));
    my ($after_fixed, $after_listener) = $mode eq 'buf_lock'
        ? (expected_fixed_tb($M1), expected_fixed_tb(16384))
        : ($shrunk, $shrunk);
    local $ENV{SBT_FAILSOCKOPT} = $mode;
    local $ENV{SBT_HTTPD_PRELOAD} = join ':', grep { $_ }
        $ENV{SBT_HTTPD_PRELOAD}, $SHIM;
    my $srv = standalone(name => "failed_release_" . ($mode =~ s/,/_/r),
                         body => <<'CONF');
SendBufferSize 16384
<Location /gen/loc1m/>
    SndbufTune 1m
</Location>
<Location /gen/locunset/>
    SndbufTune unset
</Location>
CONF
    ok($srv->start, "$mode: server starts") or diag($srv->error);

    subtest "$mode: 1m, then unset on the same connection" => sub {
        my $c = download_ok(port => $srv->port, host => 'localhost',
                            path => '/gen/loc1m/big.bin', policy => 'fixed',
                            bytes => $M1, label => '1st request: 1m');
        failed_unset_ok($srv, $c, 2, $after_fixed, '2nd request: unset');
        download_ok(client => $c, host => 'localhost',
                    path => '/gen/loc1m/big.bin', policy => 'fixed',
                    bytes => $M1, label => '3rd request: 1m again');
    };

    subtest "$mode: unset on a socket SendBufferSize locked" => sub {
        my $c = SndbufTune::StallClient->new(port => $srv->port);
        failed_unset_ok($srv, $c, 1, $after_listener, 'unset');
    };

    ok($srv->stop, "$mode: stopped") or diag($srv->error);
}
