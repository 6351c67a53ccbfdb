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
#   $c->request('/big', 'a.test');          # headers only; then read_body(N),
#   $c->read_body(65536);                   # finish_body(): (bytes, sha256)
#   my ($status, $headers, $body) = $c->get('/f', host => 'a.test');
#
# Every read has a timeout (default 20 s); nothing here sleeps.
use strict;
use warnings;

use Digest::SHA ();
use IO::Select;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_QUICKACK);

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
    else {
        $sock = IO::Socket::INET->new(
            PeerHost => $self->{host},
            PeerPort => $self->{port},
            Proto    => 'tcp',
            Timeout  => $self->{timeout},
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
# Content-Length only) or finish_body.
sub send_request {
    my ($self, %o) = @_;
    my $method = $o{method} // 'GET';
    my $req = "$method $o{path} HTTP/" . ($o{version} // '1.1') . "\r\n"
        . "Host: $o{host}\r\n"
        . join('', map { "$_\r\n" } @{ $o{headers} || [] }) . "\r\n";
    my $sock = $self->{sock} or die "write error: not connected";
    my $off = 0;
    while ($off < length $req) {
        my $n = syswrite($sock, $req, length($req) - $off, $off);
        die "write error: $!" unless defined $n;
        $off += $n;
    }
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
