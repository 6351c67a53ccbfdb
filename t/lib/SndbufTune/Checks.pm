package SndbufTune::Checks;
# Assertions on the kernel's view of the server socket, shared by the .t
# files (Test::More functions; call them inside a subtest).
#
#   fixed_ok($client, $bytes, $label)
#       tb == 2*min(bytes, wmem_max) (ss skmem), getsockopt SO_SNDBUF the
#       same, SO_BUF_LOCK send bit set; and still so after the client has
#       pulled more data through (the lock stops autotuning).
#   autotuned_ok($client, $baseline_tb, $label)
#       SO_BUF_LOCK send bit clear; tb differs from 2*size of every fixed
#       size configured; and tb grows above $baseline_tb (default: the
#       kernel's initial tcp_wmem[1]) while the client pulls a bulk
#       transfer through (bounded poll).
#   untouched_locked_ok($client, $tb, $label)
#       tb == $tb and locked, not changed by the module (core SendBufferSize)
# $client is a SndbufTune::StallClient whose response headers have been
# read and which then stopped reading.
#
#   decision_ok($header_sub, $policy, $bytes, $label)
#       what the module reported (X-Sndbuf-* headers from its notes)
#   download_ok(%args)
#       the whole round: request a large file, check the decision, read
#       32k and stall, check the kernel's view (fixed_ok or autotuned_ok,
#       or the caller's check), read the rest: length and SHA-256
#   logged_ok($server, $client, $label, %want)
#       what a SndbufTune::Server's access log says of the last response
#       on $client's connection: each field of %want (policy, requested,
#       effective, rule, vhost, ...) equal, or matching where it is a qr//
use strict;
use warnings;

use Test::More;
use SndbufTune::Kernel qw(server_view view_str expected_fixed_tb
                          have_sockinspect lock_unknown
                          tcp_wmem wmem_max);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256);
use SndbufTune::StallClient ();
use SndbufTune::Util qw(poll_until);
use Exporter 'import';

our @EXPORT = qw(fixed_ok autotuned_ok untouched_locked_ok view_of
                 decision_ok download_ok logged_ok log_view lock_bit_is);

our $BULK = 4 * 1024 * 1024;    # bytes pulled through for the growth checks
our $POLL = 10;                 # seconds, upper bound for any kernel poll

sub view_of {
    my $c = shift;
    my ($v) = poll_until($POLL, sub { server_view($c->server_port,
                                                  $c->local_port) });
    return $v;
}

sub log_view {
    my ($label, $v) = @_;
    note("kernel view [$label]: " . view_str($v));
}

sub _lock_checks {
    my ($v, $want, $label) = @_;
  SKIP: {
        skip "not root: cannot read the server's socket (sockinspect)", 1
            unless have_sockinspect();
        ok(defined $v->{so_sndbuf}, "$label: sockinspect read the socket")
            or diag($v->{sockinspect_error} // 'no data');
    }
    lock_bit_is($v, $want, $label);
}

# One check: view $v's SO_BUF_LOCK send bit is $want. Skipped only where
# it cannot be read (not root, or a kernel before 5.15); a sockinspect
# that failed fails it.
sub lock_bit_is {
    my ($v, $want, $label) = @_;
  SKIP: {
        skip lock_unknown($v), 1
            unless have_sockinspect()
                && (($v || {})->{so_buf_lock} // '') ne 'unsupported';
        is(($v || {})->{sndbuf_locked}, $want,
           "$label: SO_BUF_LOCK send bit $want")
            or diag($v ? 'kernel view: ' . view_str($v)
                       : 'no kernel view: ' . lock_unknown($v));
    }
}

# A locked buffer at $want: in ss (and, with $so_sndbuf, getsockopt),
# with the lock bit set, and unmoved after a bulk transfer.
sub _locked_at_ok {
    my ($c, $want, $label, $what, $so_sndbuf) = @_;
    my $v = view_of($c);
    ok($v, "$label: server socket found in ss") or return;
    log_view("$label, stalled", $v);
    is($v->{tb}, $want, "$label: $what");
    if ($so_sndbuf) {
      SKIP: {
            skip 'no sockinspect', 1 unless defined $v->{so_sndbuf};
            is($v->{so_sndbuf}, $want, "$label: getsockopt SO_SNDBUF == $want");
        }
    }
    _lock_checks($v, 1, $label);

    # pull a bulk transfer through: a locked buffer must not move
    my $n = $c->remaining > $BULK ? $BULK : $c->remaining - 1;
    $c->read_body($n) if $n > 0;
    my $v2 = view_of($c);
    log_view("$label, after bulk read", $v2);
    is($v2 && $v2->{tb}, $want, "$label: tb still $want after a bulk read");
}

sub fixed_ok {
    my ($c, $bytes, $label) = @_;
    my $want = expected_fixed_tb($bytes);
    _locked_at_ok($c, $want, $label,
                  "ss tb == 2*min($bytes, wmem_max) = $want", 1);
}

sub autotuned_ok {
    my ($c, $baseline, $label) = @_;
    # a fresh socket starts at tcp_wmem[1] (tcp(7): "the initial size of a
    # TCP send buffer"); with Apache's default AcceptFilter (TCP_DEFER_ACCEPT)
    # the server end is not even established before the request arrives, so
    # that is the earliest value there is to compare with
    $baseline //= (tcp_wmem())[1];
    my $v = view_of($c);
    ok($v, "$label: server socket found in ss") or return;
    log_view("$label, stalled", $v);
    # the proof that nothing fixed the buffer: the lock bit is clear
    # (skipped, with the reason, where it cannot be read); then the
    # buffer must grow
    _lock_checks($v, 0, $label);

    # autotuning grows sk_sndbuf with cwnd, up to tcp_wmem[2]
    my $max = (tcp_wmem())[2];
  SKIP: {
        skip "baseline tb $baseline is already tcp_wmem[2] $max", 1
            if $baseline >= $max;
        my ($grown, $last);
        my $pulled = 0;
        # read in bulk steps until the kernel has grown the buffer; bounded
        # by the file size and by $POLL seconds of polling per step
        while (!$grown && $c->remaining > 1) {
            my $n = $c->remaining > $BULK ? $BULK : $c->remaining - 1;
            $c->read_body($n);
            $pulled += $n;
            ($grown) = poll_until(1, sub {
                $last = server_view($c->server_port, $c->local_port);
                $last && $last->{tb} > $baseline;
            });
        }
        log_view("$label, after bulk read of $pulled bytes", $last);
        ok($grown, "$label: tb grew above $baseline under a bulk transfer "
           . "(now " . ($last ? $last->{tb} : '?') . ", tcp_wmem max $max)");
    }
}

sub untouched_locked_ok {
    my ($c, $want, $label) = @_;
    _locked_at_ok($c, $want, $label, "tb == $want", 0);
}

# The module's own report (notes/env via mod_headers) for one response.
sub decision_ok {
    my ($hdr, $policy, $bytes, $label) = @_;
    is($hdr->('X-Sndbuf-Policy'), $policy, "$label: SNDBUF_TUNE_POLICY");
    if ($policy eq 'fixed') {
        is($hdr->('X-Sndbuf-Requested'), $bytes,
           "$label: SNDBUF_TUNE_REQUESTED");
        is($hdr->('X-Sndbuf-Effective'), expected_fixed_tb($bytes),
           "$label: SNDBUF_TUNE_EFFECTIVE is getsockopt's doubled value");
    }
    elsif ($policy eq 'unset') {
        # not set: nothing requested (mod_headers writes "(null)")
        is($hdr->('X-Sndbuf-Requested'), '(null)',
           "$label: SNDBUF_TUNE_REQUESTED");
        # the buffer as autotuning (or core's SendBufferSize) left it:
        # neither goes below tcp_wmem[0] nor above tcp_wmem[2] and
        # 2 x wmem_max
        my $eff = $hdr->('X-Sndbuf-Effective') // '';
        my ($lo, undef, $hi) = tcp_wmem();
        $hi = 2 * wmem_max() if 2 * wmem_max() > $hi;
        ok($eff =~ /^\d+$/ && $eff >= $lo && $eff <= $hi,
           "$label: SNDBUF_TUNE_EFFECTIVE $eff within [tcp_wmem[0] $lo, $hi]");
    }
    else {
        # auto (nothing asked yet, nothing read) and none: not set
        is($hdr->('X-Sndbuf-Requested'), '(null)',
           "$label: SNDBUF_TUNE_REQUESTED");
        is($hdr->('X-Sndbuf-Effective'), '(null)',
           "$label: SNDBUF_TUNE_EFFECTIVE");
    }
}

# The access-log entry (SndbufTune::Server's fields) of the last response
# on $c's connection, once written, checked against %want; mod_log_config
# writes a quote as \", which a qr// sees as ". Returns it ({} if none).
sub logged_ok {
    my ($srv, $c, $label, %want) = @_;
    my $e = $srv->access_entry_for($c->local_port, $POLL);
    ok($e, "$label: access log entry") or return {};
    for my $k (sort keys %want) {
        if (ref $want{$k} eq 'Regexp') {
            like(($e->{$k} // '') =~ s/\\"/"/gr, $want{$k}, "$label: logged $k");
        }
        else {
            is($e->{$k}, $want{$k}, "$label: logged $k $want{$k}");
        }
    }
    return $e;
}

# One large download, checked from start to end:
#   port, host, path (default BIG_PATH), label (default host.path)
#   status   the status the response must have (default 200; an
#            ErrorDocument's body comes with the error's status)
#   client   a StallClient to reuse (keep-alive; default: a new one, with
#            sni => NAME for TLS)
#   policy, bytes    the decision the module must report (decision_ok);
#            without policy, none is checked
#   check    sub { $client } for the kernel's view while the client stalls;
#            default fixed_ok($bytes) for 'fixed', else autotuned_ok
#            (baseline => tb the socket had before, default a fresh one's)
#   also     sub { $client }, run before that check, while stalled
# The status, then 32k read, the check, the rest: BIG_SIZE bytes whose
# SHA-256 is BIG_SHA256. Returns the client.
sub download_ok {
    my (%a) = @_;
    my $path = $a{path} // BIG_PATH;
    my $label = $a{label} // "$a{host}$path";
    my $c = $a{client} // SndbufTune::StallClient->new(port => $a{port},
                                                       sni => $a{sni});
    my $status = $a{status} // 200;
    is($c->request($path, $a{host}), $status, "$label: status $status");
    decision_ok(sub { $c->header($_[0]) }, $a{policy}, $a{bytes}, $label)
        if defined $a{policy};
    $c->read_body(32 * 1024);           # a little, then stall
    $a{also}->($c) if $a{also};
    if ($a{check}) {
        $a{check}->($c);
    }
    elsif (($a{policy} // '') eq 'fixed') {
        fixed_ok($c, $a{bytes}, $label);
    }
    else {
        autotuned_ok($c, $a{baseline}, $label);
    }
    my ($len, $sha) = $c->finish_body;
    is($len, BIG_SIZE, "$label: whole body received");
    is($sha, BIG_SHA256, "$label: SHA-256 of the body");
    return $c;
}

1;
