package SndbufTune::StallClient;
# A raw HTTP/1.1 client over one keep-alive connection (plain or TLS with
# SNI) that reads exactly as much as the test tells it to. After reading the
# headers and a little of the body it simply stops reading: the server's
# send buffer fills, the download stays open, and the test can look at the
# server's socket with SndbufTune::Kernel. Later it can read on (bulk), read
# to the end (length and SHA-256 checked), and send the next request on the
# same connection.
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

sub _read_some {
    my ($self, $max) = @_;
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
    die "connection closed by server" if $n == 0;
    return $buf;
}

# Send GET $path with Host: $host; read status line and headers.
sub request {
    my ($self, $path, $host, @extra) = @_;
    my $req = "GET $path HTTP/1.1\r\nHost: $host\r\n"
        . join('', map { "$_\r\n" } @extra) . "\r\n";
    my $sock = $self->{sock};
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
    die "no Content-Length in response to $path" unless defined $self->{clen};
    $self->{got} = 0;
    $self->{sha} = Digest::SHA->new(256);
    $self->_consume($rest) if length $rest;
    return $self->{status};
}

sub status { $_[0]{status} }
sub header { $_[0]{headers}{lc $_[1]} }
sub remaining { $_[0]{clen} - $_[0]{got} }

sub _consume {
    my ($self, $data) = @_;
    my $rem = $self->remaining;
    die "server sent more than Content-Length" if length($data) > $rem;
    $self->{sha}->add($data);
    $self->{got} += length $data;
}

# Read $n more body bytes (fewer if the body ends first).
sub read_body {
    my ($self, $n) = @_;
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
    $self->read_body($self->remaining);
    return ($self->{got}, $self->{sha}->hexdigest);
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
