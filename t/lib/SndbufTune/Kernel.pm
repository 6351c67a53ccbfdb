package SndbufTune::Kernel;
# The kernel's view of the server's end of a test connection:
#   ss -tmni      skmem tb (sk_sndbuf), w (queued), cwnd, Send-Q
#   sockinspect   SO_SNDBUF, SO_BUF_LOCK, TCP_INFO, read from the httpd
#                 child's own socket via pidfd_getfd (root only)
# and bounded polling, so that tests wait for a kernel state instead of
# sleeping.
use strict;
use warnings;

use File::Spec;
use Time::HiRes ();
use Exporter 'import';

our @EXPORT_OK = qw(
    wmem_max tcp_wmem expected_fixed_tb ss_view sockinspect server_view
    poll_until wait_server_socket have_sockinspect view_str lock_supported
);

sub _read_sysctl {
    my $f = shift;
    open my $fh, '<', $f or die "$f: $!";
    my $line = <$fh>;
    close $fh;
    chomp $line;
    return split ' ', $line;
}

sub wmem_max { (_read_sysctl('/proc/sys/net/core/wmem_max'))[0] }

# (min, default, max)
sub tcp_wmem { _read_sysctl('/proc/sys/net/ipv4/tcp_wmem') }

# What the kernel stores for setsockopt(SO_SNDBUF, size): it doubles the
# value after capping it at net.core.wmem_max (and has a floor of
# SOCK_MIN_SNDBUF, ~4.5k, below the module's 4k minimum doubled).
sub expected_fixed_tb {
    my $size = shift;
    my $max = wmem_max();
    my $v = $size < $max ? $size : $max;
    return 2 * $v;
}

# ss for the server socket local:SPORT <-> peer:CPORT (ESTABLISHED).
# Returns a hash (tb, rb, w, t, cwnd, send_q, recv_q, raw) or undef.
sub ss_view {
    my ($sport, $cport) = @_;
    my @cmd = ('ss', '-H', '-tmni', 'state', 'established',
               "( sport = :$sport and dport = :$cport )");
    open my $fh, '-|', @cmd or die "ss: $!";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return undef unless $out =~ /\S/;
    (my $flat = $out) =~ s/\s+/ /g;
    my %v = (raw => $flat);
    # with a state filter ss drops the State column: Recv-Q Send-Q Local Peer
    if ($flat =~ /^\s*(\d+)\s+(\d+)\s+\S+:(\d+)\s+\S+:(\d+)/) {
        @v{qw(recv_q send_q)} = ($1, $2);
    }
    if ($flat =~ /skmem:\(([^)]*)\)/) {
        for my $kv (split /,/, $1) {
            $v{$1} = $2 if $kv =~ /^([a-z_]+)(\d+)$/;
        }
    }
    $v{cwnd} = $1 if $flat =~ /\bcwnd:(\d+)/;
    $v{mss}  = $1 if $flat =~ /\bmss:(\d+)/;
    return defined $v{tb} ? \%v : undef;
}

my $SOCKINSPECT;
sub _sockinspect_bin {
    return $SOCKINSPECT if defined $SOCKINSPECT;
    my $bin = $ENV{SOCKINSPECT};
    unless ($bin) {
        require Apache::Test;
        $bin = File::Spec->catfile(Apache::Test::vars('serverroot'),
                                   'helpers', 'sockinspect');
    }
    return $SOCKINSPECT = $bin;
}

sub have_sockinspect {
    return $> == 0 && -x _sockinspect_bin();
}

# sockinspect output as a hash, or undef (with the reason in $@).
sub sockinspect {
    my ($sport, $cport) = @_;
    my $bin = _sockinspect_bin();
    open my $fh, '-|', "$bin --local-port $sport --remote-port $cport 2>&1"
        or die "$bin: $!";
    my %v;
    my $raw = '';
    while (my $l = <$fh>) {
        $raw .= $l;
        chomp $l;
        $v{$1} = $2 if $l =~ /^(\w+)=(.*)$/;
    }
    close $fh;
    if ($? != 0 || !defined $v{so_sndbuf}) {
        $@ = "sockinspect exit " . ($? >> 8) . ": $raw";
        return undef;
    }
    return \%v;
}

sub lock_supported {
    my $si = shift;
    return $si && defined $si->{so_buf_lock}
        && $si->{so_buf_lock} ne 'unsupported';
}

# ss + sockinspect merged; sockinspect keys are kept as printed
# (so_sndbuf, so_buf_lock, sndbuf_locked, tcpi_*). undef if ss does not
# show the socket.
sub server_view {
    my ($sport, $cport) = @_;
    my $v = ss_view($sport, $cport) or return undef;
    if (have_sockinspect()) {
        my $si = sockinspect($sport, $cport);
        if ($si) {
            $v->{$_} = $si->{$_} for keys %$si;
        }
        else {
            $v->{sockinspect_error} = $@;
        }
    }
    return $v;
}

sub view_str {
    my $v = shift;
    return 'no socket' unless $v;
    return join ' ', map { "$_=$v->{$_}" }
        grep { defined $v->{$_} }
        qw(tb w send_q cwnd so_sndbuf so_buf_lock sndbuf_locked
           tcpi_snd_cwnd tcpi_min_rtt tcpi_delivery_rate
           tcpi_sndbuf_limited sockinspect_error);
}

# Call $probe until it returns a true value or $timeout seconds pass.
# Returns (value, tries); value is undef on timeout. Bounded, never sleeps
# longer than $interval between probes.
sub poll_until {
    my ($timeout, $probe, $interval) = @_;
    $interval //= 0.01;
    my $deadline = Time::HiRes::time() + $timeout;
    my $tries = 0;
    while (1) {
        $tries++;
        my $r = $probe->();
        return ($r, $tries) if $r;
        last if Time::HiRes::time() > $deadline;
        Time::HiRes::sleep($interval);
    }
    return (undef, $tries);
}

# Wait until the server end of the connection from CPORT shows up in ss
# (the handshake completes on the server side asynchronously).
sub wait_server_socket {
    my ($sport, $cport, $timeout) = @_;
    my ($v) = poll_until($timeout // 5, sub { ss_view($sport, $cport) });
    return $v;
}

1;
