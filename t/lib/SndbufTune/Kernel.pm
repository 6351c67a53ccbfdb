package SndbufTune::Kernel;
# The kernel's view of a server socket:
#   ss -tmnie     skmem tb (sk_sndbuf), w (queued), the tcp_info counters
#                 (cwnd, rtt, bytes_acked, sndbuf_limited, ...), the inode;
#                 parse_ss is the one parser of ss's output
#   sockinspect   SO_SNDBUF, SO_BUF_LOCK, TCP_INFO, read from the httpd
#                 child's own socket via pidfd_getfd (root only;
#                 t/helpers/sockinspect, built by t/run)
# and the sysctls that decide what a size becomes; sockstat_tcp_mem,
# tcp_mem and tcp_memory_pressures: what TCP holds in all, its limits,
# and whether it went over them.
use strict;
use warnings;

use Exporter 'import';
use SndbufTune::Util qw(capture top_dir);

our @EXPORT_OK = qw(
    wmem_max tcp_wmem expected_fixed_tb parse_ss ss_sockets ss_view
    sockinspect have_sockinspect lock_unknown server_view
    view_str sockstat_tcp_mem tcp_mem tcp_memory_pressures
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

# (low, pressure, high), pages: TCP's memory limits, for all sockets.
sub tcp_mem { _read_sysctl('/proc/sys/net/ipv4/tcp_mem') }

# The pages every TCP socket holds (/proc/net/sockstat "TCP: ... mem";
# system-wide, not per network namespace).
sub sockstat_tcp_mem {
    open my $fh, '<', '/proc/net/sockstat' or die "/proc/net/sockstat: $!";
    while (my $line = <$fh>) {
        return $1 if $line =~ /^TCP:.*\bmem (\d+)/;
    }
    die "/proc/net/sockstat: no TCP mem";
}

# How often TCP entered memory pressure (over tcp_mem[1]), in this
# network namespace (/proc/net/netstat TcpExt TCPMemoryPressures).
sub tcp_memory_pressures {
    open my $fh, '<', '/proc/net/netstat' or die "/proc/net/netstat: $!";
    my @names;
    while (my $line = <$fh>) {
        my ($tag, @f) = split ' ', $line;
        next unless $tag eq 'TcpExt:';
        if (!@names) {
            @names = @f;
            next;
        }
        my %v;
        @v{@names} = @f;
        return $v{TCPMemoryPressures};
    }
    die "/proc/net/netstat: no TcpExt TCPMemoryPressures";
}

# What the kernel stores for setsockopt(SO_SNDBUF, size): it doubles the
# value after capping it at net.core.wmem_max (and has a floor of
# SOCK_MIN_SNDBUF, ~4.5k, below the module's 4k minimum doubled).
sub expected_fixed_tb {
    my $size = shift;
    my $max = wmem_max();
    my $v = $size < $max ? $size : $max;
    return 2 * $v;
}

my %BW_UNIT = ('' => 1, K => 1e3, k => 1e3, M => 1e6, G => 1e9, T => 1e12);
sub _bw { my ($n, $u) = @_; return $n * ($BW_UNIT{$u // ''} // 1) }

# Parse `ss -t` output (any of -m -i -e -p -n -H; with or without the State
# column) into a list of hashes, one per socket:
#   local, peer, lport, pport, state, recv_q, send_q, inode, pid (-p),
#   skmem: r rb t tb f w o bl d,
#   cwnd mss rtt_us rttvar_us minrtt_us bytes_sent bytes_acked
#   bytes_retrans bytes_received unacked notsent data_segs_out delivered
#   retrans (total) retrans_now delivery_rate pacing_rate send_bps (bit/s)
#   max_pacing_rate (bit/s; only where SO_MAX_PACING_RATE set one, which
#   also turns the kernel's pacing on: ss shows "pacing_rate R/MAX")
#   busy_ms sndbuf_limited_ms rwnd_limited_ms app_limited (0/1),
#   bbr_pacing_gain (bbr's own state: 2.89 in startup, 0.75-1.25 after),
#   raw (the socket's text on one line).
sub parse_ss {
    my $text = shift;
    my @socks;
    my $cur;
    for my $line (split /\n/, $text) {
        next if $line =~ /^\s*$/;
        next if $line =~ /^(State|Recv-Q|Netid)\s/;
        if ($line =~ /^\S/) {
            push @socks, $cur if $cur;
            $cur = { raw => $line };
            my @f = split ' ', $line;
            # optional State column, then Recv-Q Send-Q Local Peer
            my $state = $f[0] =~ /^\d+$/ ? undef : shift @f;
            @$cur{qw(state recv_q send_q local peer)} = ($state, @f[0 .. 3]);
            $cur->{lport} = $1 if ($cur->{local} // '') =~ /:(\d+)$/;
            $cur->{pport} = $1 if ($cur->{peer} // '') =~ /:(\d+)$/;
        }
        elsif ($cur) {
            $cur->{raw} .= ' ' . ($line =~ s/^\s+//r);
        }
    }
    push @socks, $cur if $cur;
    for my $s (@socks) {
        my $r = $s->{raw};
        if ($r =~ /skmem:\(([^)]*)\)/) {
            for my $kv (split /,/, $1) {
                $s->{$1} = $2 if $kv =~ /^([a-z_]+)(\d+)$/;
            }
        }
        $s->{inode} = $1 if $r =~ /\bino:(\d+)/;
        $s->{pid} = $1 if $r =~ /\busers:\(\("[^"]*",pid=(\d+)/;
        $s->{cwnd} = $1 if $r =~ /\bcwnd:(\d+)/;
        $s->{mss} = $1 if $r =~ /\bmss:(\d+)/;
        if ($r =~ /\brtt:([\d.]+)\/([\d.]+)/) {
            $s->{rtt_us} = $1 * 1000;
            $s->{rttvar_us} = $2 * 1000;
        }
        $s->{minrtt_us} = $1 * 1000 if $r =~ /\bminrtt:([\d.]+)/;
        for my $k (qw(bytes_sent bytes_acked bytes_retrans bytes_received
                      unacked notsent data_segs_out delivered)) {
            $s->{$k} = $1 if $r =~ /\b$k:(\d+)/;
        }
        if ($r =~ /\bretrans:(\d+)\/(\d+)/) {
            @$s{qw(retrans_now retrans)} = ($1, $2);
        }
        $s->{retrans} //= 0;
        $s->{delivery_rate} = _bw($1, $2)
            if $r =~ /\bdelivery_rate ([\d.]+)([KMGT]?)bps/;
        $s->{pacing_rate} = _bw($1, $2)
            if $r =~ /\bpacing_rate ([\d.]+)([KMGT]?)bps/;
        $s->{max_pacing_rate} = _bw($1, $2)
            if $r =~ /\bpacing_rate [\d.]+[KMGT]?bps\/([\d.e+]+)([KMGT]?)bps/;
        $s->{send_bps} = _bw($1, $2) if $r =~ /\bsend ([\d.]+)([KMGT]?)bps/;
        for my $k (qw(busy sndbuf_limited rwnd_limited)) {
            $s->{"${k}_ms"} = $r =~ /\b$k:(\d+)ms/ ? $1 : 0;
        }
        $s->{app_limited} = $r =~ /\bapp_limited\b/ ? 1 : 0;
        $s->{bbr_pacing_gain} = $1 if $r =~ /\bpacing_gain:([\d.]+)/;
    }
    return @socks;
}

# TCP sockets that still hold memory (not TIME-WAIT), parsed. Filters:
#   ns     network namespace (ss -N; default: the current one)
#   state  ss state filter (default 'connected': ESTABLISHED, FIN-WAIT-1,
#          ... -- a socket httpd has closed may still be sending)
#   sport, dport   local / peer port;  dst  peer address, e.g. '[::1]'
#   procs  1: ask for the owning process too (ss -p: pid)
sub ss_sockets {
    my (%a) = @_;
    my @cmd = ('ss');
    push @cmd, '-N', $a{ns} if defined $a{ns};
    push @cmd, '-H', $a{procs} ? '-tmniep' : '-tmnie', 'state',
        $a{state} // 'connected';
    my @f;
    push @f, "sport = :$a{sport}" if $a{sport};
    push @f, "dport = :$a{dport}" if $a{dport};
    push @f, "dst $a{dst}" if $a{dst};
    push @cmd, '( ' . join(' and ', @f) . ' )' if @f;
    my ($rc, $out) = capture(@cmd);
    die "ss failed (exit $rc): $out" if $rc != 0;
    return grep { defined $_->{tb} } parse_ss($out);
}

# The ESTABLISHED server socket local:SPORT <-> peer:CPORT, or undef.
sub ss_view {
    my ($sport, $cport) = @_;
    my ($v) = ss_sockets(sport => $sport, dport => $cport,
                         state => 'established');
    return $v;
}

my $SOCKINSPECT = $ENV{SOCKINSPECT} || top_dir() . '/t/helpers/sockinspect';

sub have_sockinspect {
    return $> == 0 && -x $SOCKINSPECT;
}

# sockinspect output as a hash, or undef (with the reason in $@).
sub sockinspect {
    my ($sport, $cport) = @_;
    my ($rc, $raw) = capture($SOCKINSPECT, '--local-port', $sport,
                             '--remote-port', $cport);
    my %v = map { /^(\w+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $raw;
    if ($rc != 0 || !defined $v{so_sndbuf}) {
        $@ = "sockinspect exit $rc: $raw";
        return undef;
    }
    return \%v;
}

# Why view $v (server_view) holds no lock state: the reason a check of it
# is skipped with.
sub lock_unknown {
    my $v = shift;
    return "not root: cannot read the server's socket (sockinspect)"
        unless have_sockinspect();
    return 'the kernel cannot report SO_BUF_LOCK (< 5.15)'
        if $v && ($v->{so_buf_lock} // '') eq 'unsupported';
    return 'sockinspect: ' . (($v || {})->{sockinspect_error} // 'no data');
}

# ss + sockinspect merged; sockinspect keys are kept as printed
# (so_sndbuf, so_buf_lock, sndbuf_locked, tcpi_*, pid, fd; its inode
# replaces ss's, they are the same). undef if ss does not show the socket.
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
        qw(tb w send_q cwnd bytes_acked so_sndbuf so_buf_lock sndbuf_locked
           tcpi_snd_cwnd tcpi_min_rtt tcpi_delivery_rate
           tcpi_sndbuf_limited sockinspect_error);
}

1;
