package SndbufTune::StallClient;
# The test suite's one HTTP client (the tests, SndbufTune::Status and
# bench/run all use it): a raw HTTP/1.x client over one connection (plain
# or TLS with SNI) that reads exactly as much as the caller tells it to.
#
# Stalling: after reading the headers and a little of the body it simply
# stops reading: the server's send buffer fills, the download stays open,
# and the test can look at the server's socket with SndbufTune::Kernel.
# Later it can read on (bulk), read to the end (length and SHA-256
# checked), and send the next request on the same connection.
#
# Whole responses: get() sends one request (any method, HTTP/1.1 on the
# keep-alive connection or HTTP/1.0, which then reads until the server
# closes: by then httpd has logged the request) and returns the status,
# the headers and the body, framed by Content-Length, chunked encoding or
# the connection's end.
#
#   my $c = SndbufTune::StallClient->new(port => $port);   # host, sni, timeout
#   (rcvbuf => N: SO_RCVBUF set before the handshake, so the window it
#   advertises, and its scale, come from it: a client with a small window;
#   local_port => N: the client's port, to find its socket in ss)
#   $c->request('/big', 'a.test');          # headers only; then read_body(N),
#   $c->read_body(65536);                   # finish_body(): (bytes, sha256)
#   my ($status, $headers, $body) = $c->get('/f', host => 'a.test');
#
# h2c Upgrade: h2c_upgrade_get([paths]) asks for the first path over
# HTTP/1.1 with Upgrade: h2c, takes the 101 and then asks for the others
# as HTTP/2 streams 3, 5, ... of the same connection, all in flight at
# once with stream 1 (RFC 7540, section 3.2; plain connections only).
#
# Every read has a timeout (default 20 s); nothing here sleeps.
use strict;
use warnings;

use Digest::SHA ();
use IO::Select;
use MIME::Base64 ();
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_QUICKACK SOL_SOCKET SO_RCVBUF inet_aton
              pack_sockaddr_in);

sub new {
    my ($class, %a) = @_;
    my $self = bless {
        host    => $a{host} // '127.0.0.1',
        port    => $a{port} // die('port required'),
        timeout => $a{timeout} // 20,
        ssl     => $a{sni} ? 1 : 0,
        sni     => $a{sni},
        rbuf    => '',
        received => 0,
    }, $class;
    my $sock;
    if ($self->{ssl}) {
        require IO::Socket::SSL;
        $sock = IO::Socket::SSL->new(
            PeerHost           => $self->{host},
            PeerPort           => $self->{port},
            SSL_hostname       => $a{sni},
            SSL_verify_mode    => IO::Socket::SSL::SSL_VERIFY_NONE(),
            SSL_alpn_protocols => ['http/1.1'],
            Timeout            => $self->{timeout},
        ) or die "TLS connect to $self->{host}:$self->{port} (SNI $a{sni}): "
                 . IO::Socket::SSL::errstr();
    }
    elsif ($a{rcvbuf}) {
        # the window scale is fixed by the SYN: the buffer comes first
        $sock = IO::Socket::INET->new(Proto => 'tcp',
                                      ($a{local_port}
                                       ? (LocalPort => $a{local_port}) : ()))
            or die "socket: $!";
        setsockopt($sock, SOL_SOCKET, SO_RCVBUF, $a{rcvbuf})
            or die "SO_RCVBUF $a{rcvbuf}: $!";
        $sock->connect(pack_sockaddr_in($self->{port},
                                        inet_aton($self->{host})))
            or die "connect to $self->{host}:$self->{port}: $!";
    }
    else {
        $sock = IO::Socket::INET->new(
            PeerHost => $self->{host},
            PeerPort => $self->{port},
            Proto    => 'tcp',
            Timeout  => $self->{timeout},
            ($a{local_port} ? (LocalPort => $a{local_port}) : ()),
        ) or die "connect to $self->{host}:$self->{port}: $!";
    }
    $sock->autoflush(1);
    $self->{sock} = $sock;
    $self->{local_port} = $sock->sockport;
    return $self;
}

sub local_port { $_[0]{local_port} }
sub server_port { $_[0]{port} }

# CN of the certificate the server presented (TLS only): shows which
# vhost SNI selected.
sub peer_cn {
    my $self = shift;
    return undef unless $self->{ssl};
    return $self->{sock}->peer_certificate('commonName');
}

# Bytes read on the connection so far (headers included).
sub received { $_[0]{received} }

# Up to $max bytes; at the connection's end dies, or returns undef if
# $eof_ok.
sub _read_some {
    my ($self, $max, $eof_ok) = @_;
    my $sock = $self->{sock};
    my $ready = $self->{ssl} && $sock->pending;
    unless ($ready) {
        my $sel = IO::Select->new($sock);
        $sel->can_read($self->{timeout})
            or die "read timeout ($self->{timeout}s) on port "
                   . "$self->{local_port}";
    }
    my $buf;
    my $n = sysread($sock, $buf, $max);
    # Acknowledge at once: a server buffer locked below two segments (the
    # 32k of SendBufferSize 16384 on loopback) would otherwise wait for the
    # delayed ACK (40 ms) after every segment. The kernel turns quick-ACK
    # mode off again by itself, so it is asked for after every read.
    setsockopt($sock, IPPROTO_TCP, TCP_QUICKACK, 1)
        if $n;
    if (!defined $n) {
        return '' if $self->{ssl} && $!{EAGAIN};    # TLS record incomplete
        die "read error: $!";
    }
    if ($n == 0) {
        return undef if $eof_ok;
        die "connection closed by server";
    }
    $self->{received} += $n;
    return $buf;
}

# Send GET $path with Host: $host; read status line and headers.
sub request {
    my ($self, $path, $host, @extra) = @_;
    return $self->send_request(path => $path, host => $host,
                               headers => \@extra, need_length => 1);
}

# Send a request (method GET, version 1.1, headers [lines]); read the
# status line and headers. The body is then read by read_body (with a
# Content-Length only) or finish_body. With held => BODY, the request says
# Content-Length: length(BODY) and the body is held back: httpd reads the
# request and waits in the handler, which reads the body first; this
# returns at once (undef) and release_body sends it and reads the head.
sub send_request {
    my ($self, %o) = @_;
    my $method = $o{method} // 'GET';
    my @headers = @{ $o{headers} || [] };
    push @headers, 'Content-Length: ' . length $o{held} if defined $o{held};
    $self->_write_all("$method $o{path} HTTP/" . ($o{version} // '1.1')
                      . "\r\nHost: $o{host}\r\n"
                      . join('', map { "$_\r\n" } @headers) . "\r\n");
    if (defined $o{held}) {
        $self->{held} = \%o;
        return undef;
    }
    return $self->_read_head(%o);
}

# The body send_request(held => BODY) held back: sent; the status returned.
sub release_body {
    my $self = shift;
    my $o = delete $self->{held} or die 'release_body: no body held back';
    $self->_write_all($o->{held});
    return $self->_read_head(%$o);
}

# The status line and headers of the response to the request sent (%o as
# send_request's).
sub _read_head {
    my ($self, %o) = @_;
    my $method = $o{method} // 'GET';
    # read headers
    while ($self->{rbuf} !~ /\r\n\r\n/) {
        $self->{rbuf} .= $self->_read_some(16384);
    }
    my ($head, $rest) = split /\r\n\r\n/, $self->{rbuf}, 2;
    $self->{rbuf} = '';
    my ($status_line, @lines) = split /\r\n/, $head;
    $status_line =~ m{^HTTP/\d\.\d (\d{3})} or die "bad status line: $status_line";
    my %h;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $h{lc $k} = $v;
    }
    $self->{status} = $1;
    $self->{headers} = \%h;
    $self->{clen} = $h{'content-length'};
    $self->{mode} = $method eq 'HEAD' || $1 =~ /^(1..|204|304)$/ ? 'none'
        : ($h{'transfer-encoding'} // '') =~ /chunked/i ? 'chunked'
        : defined $self->{clen} ? 'length' : 'close';
    die "no Content-Length in response to $o{path}"
        if $o{need_length} && $self->{mode} ne 'length';
    $self->{clen} = 0 if $self->{mode} eq 'none';
    $self->{got} = 0;
    $self->{sha} = Digest::SHA->new(256);
    $self->{body} = $o{keep} ? '' : undef;
    if ($self->{mode} eq 'length' || $self->{mode} eq 'none') {
        $self->_consume($rest) if length $rest;
    }
    else {
        $self->{rbuf} = $rest;
    }
    return $self->{status};
}

# One whole response: ($status, {lower-case header => value}, $body).
# Options: host (default the address), method, version ('1.0': read on
# until the server closes; whatever comes after the body, a body sent
# to HEAD among it, is then part of the body), headers.
sub get {
    my ($self, $path, %o) = @_;
    $self->send_request(%o, path => $path, host => $o{host} // $self->{host},
                        keep => 1);
    $self->finish_body;
    if (($o{version} // '') eq '1.0') {
        $self->{body} .= delete $self->{rbuf};
        $self->{rbuf} = '';
        while (defined(my $d = $self->_read_some(65536, 1))) {
            $self->{body} .= $d;
        }
    }
    return ($self->{status}, $self->{headers}, $self->{body});
}

sub status { $_[0]{status} }
sub header { $_[0]{headers}{lc $_[1]} }
sub remaining { $_[0]{clen} - $_[0]{got} }

sub _consume {
    my ($self, $data) = @_;
    die "server sent more than Content-Length"
        if defined $self->{clen} && length($data) > $self->remaining;
    $self->{sha}->add($data);
    $self->{body} .= $data if defined $self->{body};
    $self->{got} += length $data;
}

# Read $n more body bytes (fewer if the body ends first); Content-Length
# framing only.
sub read_body {
    my ($self, $n) = @_;
    die "read_body: the response has no Content-Length"
        unless defined $self->{clen};
    my $target = $self->{got} + $n;
    $target = $self->{clen} if $target > $self->{clen};
    while ($self->{got} < $target) {
        my $want = $target - $self->{got};
        $want = 262144 if $want > 262144;
        $self->_consume($self->_read_some($want));
    }
    return $self->{got};
}

# Read the rest of the body; returns (bytes received, sha256 hex).
sub finish_body {
    my $self = shift;
    my $mode = $self->{mode} // 'length';
    if ($mode eq 'chunked') {
        $self->_read_chunked;
    }
    elsif ($mode eq 'close') {
        $self->_consume(delete $self->{rbuf}) if length $self->{rbuf};
        $self->{rbuf} = '';
        while (defined(my $d = $self->_read_some(262144, 1))) {
            $self->_consume($d);
        }
    }
    else {
        $self->read_body($self->remaining);
    }
    return ($self->{got}, $self->{sha}->hexdigest);
}

# A chunked body to its last chunk (httpd sends no trailers).
sub _read_chunked {
    my $self = shift;
    my $more = sub { $self->{rbuf} .= $self->_read_some(262144) };
    while (1) {
        $more->() until $self->{rbuf} =~ /\r\n/;
        $self->{rbuf} =~ s/^([0-9a-fA-F]+)[^\r]*\r\n// or die "bad chunk";
        my $n = hex $1;
        $more->() while length $self->{rbuf} < $n + 2;
        $self->_consume(substr($self->{rbuf}, 0, $n));
        substr($self->{rbuf}, 0, $n + 2) = '';
        return unless $n;
    }
}

# ------------------------------------------------------------ h2c Upgrade --
#
# Just enough HTTP/2 for the upgrade and parallel GETs: no push (disabled),
# no priorities, windows of 2^31-1 (replenished past 1 GiB anyway). The
# requests' HPACK is literals without indexing; of the responses' HPACK
# only :status is read (the first field nghttp2 writes): the static
# table's statuses and a literal value with a static :status name;
# anything else (Huffman, the dynamic table) reads as status '?'.

my %H2_TYPE = (DATA => 0, HEADERS => 1, RST_STREAM => 3, SETTINGS => 4,
               PING => 6, GOAWAY => 7, WINDOW_UPDATE => 8,
               CONTINUATION => 9);
my ($H2_END_STREAM, $H2_ACK, $H2_END_HEADERS, $H2_PADDED, $H2_PRIORITY) =
    (0x1, 0x1, 0x4, 0x8, 0x20);
my $H2_WINDOW = 2**31 - 1;
# HPACK static table (RFC 7541, appendix A): :status entries
my %H2_STATIC_STATUS = (8 => 200, 9 => 204, 10 => 206, 11 => 304,
                        12 => 400, 13 => 404, 14 => 500);

sub _h2_frame {
    my ($type, $flags, $stream, $payload) = @_;
    $payload //= '';
    return pack('Cn', length($payload) >> 16, length($payload) & 0xffff)
        . pack('CCN', $H2_TYPE{$type}, $flags, $stream) . $payload;
}

# HPACK integer with an N-bit prefix (RFC 7541, 5.1), first byte's high
# bits $high.
sub _hpack_int {
    my ($n, $bits, $high) = @_;
    my $max = (1 << $bits) - 1;
    return chr($high | $n) if $n < $max;
    my $s = chr($high | $max);
    $n -= $max;
    while ($n >= 128) {
        $s .= chr(($n & 127) | 128);
        $n >>= 7;
    }
    return $s . chr($n);
}

# Decodes an HPACK integer at $$pos of $block; advances $$pos.
sub _hpack_int_at {
    my ($block, $pos, $bits) = @_;
    my $max = (1 << $bits) - 1;
    die "HPACK: block ends in an integer\n" if $$pos >= length $block;
    my $n = ord(substr $block, $$pos++, 1) & $max;
    return $n if $n < $max;
    my $shift = 0;
    while (1) {
        die "HPACK: block ends in an integer\n" if $$pos >= length $block;
        my $b = ord(substr $block, $$pos++, 1);
        $n += ($b & 127) << $shift;
        $shift += 7;
        return $n unless $b & 128;
    }
}

# A literal header field without indexing, new name (RFC 7541, 6.2.2).
sub _hpack_literal {
    my ($name, $value) = @_;
    return "\x00" . _hpack_int(length $name, 7, 0) . $name
        . _hpack_int(length $value, 7, 0) . $value;
}

# The :status of a response's header block: '200', ... or '?'.
sub _hpack_status {
    my $block = shift;
    my $pos = 0;
    while ($pos < length $block) {
        my $b = ord substr $block, $pos, 1;
        if (($b & 0xe0) == 0x20) {          # dynamic table size update
            _hpack_int_at($block, \$pos, 5);
            next;
        }
        if ($b & 0x80) {                    # indexed field
            my $i = _hpack_int_at($block, \$pos, 7);
            return $H2_STATIC_STATUS{$i} // '?';
        }
        # literal: with incremental indexing (6-bit index) or without /
        # never indexed (4-bit index); a static :status name, then a
        # value that is not Huffman-coded
        my $i = _hpack_int_at($block, \$pos, ($b & 0x40) ? 6 : 4);
        return '?' unless $H2_STATIC_STATUS{$i};
        return '?' if $pos >= length($block)
                      || ord(substr $block, $pos, 1) & 0x80;
        my $len = _hpack_int_at($block, \$pos, 7);
        return substr $block, $pos, $len;
    }
    return '?';
}

sub _write_all {
    my ($self, $data) = @_;
    my $sock = $self->{sock} or die "write error: not connected";
    my $off = 0;
    while ($off < length $data) {
        my $n = syswrite($sock, $data, length($data) - $off, $off);
        die "write error: $!" unless defined $n;
        $off += $n;
    }
}

# GET every path of @$paths over this connection: the first as the
# HTTP/1.1 request that upgrades it to h2c (stream 1), the others as
# streams 3, 5, ... sent right after the client preface, all in flight at
# once. Returns one hash per path, in order: { path, status ('200', ...,
# '?' when not decoded, undef when no HEADERS came), bytes (DATA payload,
# padding not counted), sha256 (hex, of the body), ok (status 200 and
# END_STREAM seen), error (RST_STREAM, GOAWAY or the connection's end,
# else undef) }. Dies when the server does not switch (its status in the
# message), on a protocol error or on a read timeout. The connection is
# closed (GOAWAY) at the end.
sub h2c_upgrade_get {
    my ($self, $paths, %o) = @_;
    die "h2c_upgrade_get: not over TLS" if $self->{ssl};
    die "h2c_upgrade_get: no path" unless @$paths;
    my $authority = $o{host} // "$self->{host}:$self->{port}";
    # SETTINGS_ENABLE_PUSH 0, SETTINGS_INITIAL_WINDOW_SIZE 2^31-1
    my $settings = pack('nN nN', 2, 0, 4, $H2_WINDOW);
    my $b64 = MIME::Base64::encode_base64url($settings);
    # The client preface goes with the request, not after the 101 (RFC
    # 7540, 3.2, says after): httpd 2.4.71 writes stream 1's first window
    # (65535 bytes) at once, and if no frame of the client has arrived by
    # then, mod_http2 hands the connection back to the event MPM, which
    # closes it (GOAWAY NO_ERROR, last stream 1, the other streams never
    # read). Measured without this module loaded: 7 connections in 40
    # with the preface after the 101; see t/README.md. A GET has
    # no body, so the preface is the next thing on the connection, which
    # mod_http2 reads once it has switched.
    $self->_write_all("GET $paths->[0] HTTP/1.1\r\nHost: $authority\r\n"
        . "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        . "HTTP2-Settings: $b64\r\n\r\n"
        . "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        . _h2_frame(SETTINGS => 0, 0, $settings)
        . _h2_frame(WINDOW_UPDATE => 0, 0,
                    pack('N', $H2_WINDOW - 65535)));
    while ($self->{rbuf} !~ /\r\n\r\n/) {
        $self->{rbuf} .= $self->_read_some(16384);
    }
    my ($head, $rest) = split /\r\n\r\n/, $self->{rbuf}, 2;
    $self->{rbuf} = '';
    my ($status) = $head =~ m{^HTTP/1\.1 (\d{3})}
        or die "bad status line: " . (split /\r\n/, $head)[0];
    die "h2c Upgrade refused: status $status\n" unless $status eq '101';

    my %st;     # stream id => result
    my @order;
    for my $i (0 .. $#$paths) {
        my $id = 2 * $i + 1;
        $st{$id} = { path => $paths->[$i], status => undef, bytes => 0,
                     sha => Digest::SHA->new(256), done => 0,
                     error => undef, unacked => 0 };
        push @order, $id;
    }
    # the other requests once the server's SETTINGS say how many streams
    # may be open at once (stream 1 is)
    my @queue = @order[1 .. $#order];
    my $max_streams;
    my $active = 1;
    my $send_more = sub {
        my $out = '';
        while (@queue && $active < $max_streams) {
            my $id = shift @queue;
            my $block = _hpack_literal(':method', 'GET')
                . _hpack_literal(':scheme', 'http')
                . _hpack_literal(':path', $st{$id}{path})
                . _hpack_literal(':authority', $authority);
            $out .= _h2_frame(HEADERS => $H2_END_STREAM | $H2_END_HEADERS,
                              $id, $block);
            $active++;
        }
        $self->_write_all($out) if length $out;
    };

    my $buf = $rest;
    my $pos = 0;
    my $conn_unacked = 0;
    my ($hblock, $hstream);     # a header block awaiting CONTINUATION
    my $open = @order;
    my $goaway;
    while ($open) {
        if (length($buf) - $pos < 9) {
            my $d = $self->_read_some(262144, 1);
            last unless defined $d;
            $buf = substr($buf, $pos) . $d;
            $pos = 0;
            next;
        }
        my ($l1, $l2, $type, $flags, $sid) =
            unpack 'CnCCN', substr($buf, $pos, 9);
        my $len = ($l1 << 16) | $l2;
        $sid &= 0x7fffffff;
        if (length($buf) - $pos < 9 + $len) {
            my $d = $self->_read_some(262144, 1);
            last unless defined $d;
            $buf = substr($buf, $pos) . $d;
            $pos = 0;
            next;
        }
        my $payload = substr($buf, $pos + 9, $len);
        $pos += 9 + $len;
        die "h2: frame type $type on stream $sid inside the header block"
            . " of stream $hstream\n"
            if defined $hblock && $type != $H2_TYPE{CONTINUATION};
        my $s = $sid ? $st{$sid} : undef;
        die "h2: frame type $type on unknown stream $sid\n"
            if $sid && !$s && $type != $H2_TYPE{WINDOW_UPDATE};
        if ($type == $H2_TYPE{DATA}) {
            $conn_unacked += $len;
            $s->{unacked} += $len;
            if ($flags & $H2_PADDED) {
                my $pad = ord $payload;
                $payload = substr($payload, 1, length($payload) - 1 - $pad);
            }
            $s->{bytes} += length $payload;
            $s->{sha}->add($payload);
            # never reached with the files of the tests; kept correct
            my $wu = '';
            if ($conn_unacked >= 2**30) {
                $wu .= _h2_frame(WINDOW_UPDATE => 0, 0,
                                 pack('N', $conn_unacked));
                $conn_unacked = 0;
            }
            if ($s->{unacked} >= 2**30) {
                $wu .= _h2_frame(WINDOW_UPDATE => 0, $sid,
                                 pack('N', $s->{unacked}));
                $s->{unacked} = 0;
            }
            $self->_write_all($wu) if length $wu;
        }
        elsif ($type == $H2_TYPE{HEADERS}) {
            my $p = 0;
            my $pad = 0;
            if ($flags & $H2_PADDED) {
                $pad = ord $payload;
                $p = 1;
            }
            $p += 5 if $flags & $H2_PRIORITY;
            $hblock = substr($payload, $p, length($payload) - $p - $pad);
            $hstream = $sid;
            $s->{hflags} = $flags;
        }
        elsif ($type == $H2_TYPE{CONTINUATION}) {
            die "h2: CONTINUATION without HEADERS\n"
                unless defined $hblock && $sid == $hstream;
            $hblock .= $payload;
            $s->{hflags} |= $flags & $H2_END_HEADERS;
        }
        elsif ($type == $H2_TYPE{SETTINGS}) {
            next if $flags & $H2_ACK;
            my %set = unpack '(nN)*', $payload;
            # SETTINGS_MAX_CONCURRENT_STREAMS; none: no limit
            $max_streams = $set{3} // $max_streams // 2**31;
            $self->_write_all(_h2_frame(SETTINGS => $H2_ACK, 0));
            $send_more->();
        }
        elsif ($type == $H2_TYPE{PING}) {
            $self->_write_all(_h2_frame(PING => $H2_ACK, 0, $payload))
                unless $flags & $H2_ACK;
        }
        elsif ($type == $H2_TYPE{RST_STREAM}) {
            $s->{error} = 'RST_STREAM ' . unpack('N', $payload);
        }
        elsif ($type == $H2_TYPE{GOAWAY}) {
            my ($last, $code) = unpack 'NN', $payload;
            $goaway = sprintf 'GOAWAY %d (last stream %d)', $code,
                              $last & 0x7fffffff;
            last;
        }
        # a header block complete: the first one is the response's
        if (defined $hblock && $s->{hflags} & $H2_END_HEADERS) {
            $s->{status} //= _hpack_status($hblock);
            $flags = $s->{hflags};
            $type = $H2_TYPE{HEADERS};
            undef $hblock;
        }
        if ($s && !$s->{done} && ($s->{error}
            || (($type == $H2_TYPE{DATA} || $type == $H2_TYPE{HEADERS})
                && !defined $hblock && $flags & $H2_END_STREAM))) {
            $s->{done} = 1;
            $open--;
            $active--;
            $send_more->() if defined $max_streams;
        }
    }
    eval { $self->_write_all(_h2_frame(GOAWAY => 0, 0, pack('NN', 0, 0))) };
    $self->close;
    return map {
        my $s = $st{$_};
        my $error = $s->{error}
            // ($s->{done} ? undef : $goaway // 'connection closed');
        +{ path => $s->{path}, status => $s->{status}, bytes => $s->{bytes},
           sha256 => $s->{sha}->hexdigest, error => $error,
           ok => (!$error && ($s->{status} // '') eq '200') ? 1 : 0 };
    } @order;
}

sub close {
    my $self = shift;
    if ($self->{sock}) {
        if ($self->{ssl}) {
            $self->{sock}->close(SSL_no_shutdown => 1);
        }
        else {
            $self->{sock}->close;
        }
        delete $self->{sock};
    }
}

sub DESTROY { $_[0]->close }

1;
