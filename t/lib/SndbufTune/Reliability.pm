package SndbufTune::Reliability;
# What the reliability tests (t/reliability/*.t) share: one server layout
# reached over HTTP/1.1, h2c and TLS h2, with a location for each policy;
# files of known SHA-256; curl downloads checked against them; the status
# page's ?auto counters; and the error log's signs of trouble.
#
#   my $lab = SndbufTune::Reliability->new(mpm => 'event',
#       sizes => { '1m' => 1 << 20, ... }, conf => 'more lines',
#       htaccess => 1, %server_options);
#   $lab->start or die $lab->srv->error;
#   $lab->protos                       h1 h2c h2tls; under prefork h1 h1tls
#   $lab->where                        the locations: @WHERE (and htaccess)
#   $lab->url($proto, $where, $name)   $where: files, fixed, unset, auto
#   my ($ok, $why) = $lab->download($proto, $where, $name, %curl);
#   my $counters = $lab->status;       # ?auto as { Key => value }
#   my @lines = $lab->log_lines(qr/.../);
#   $lab->srv                          # the SndbufTune::Server
#
# The layout: the plain port speaks HTTP/1.1 and h2c (prior knowledge),
# and its default vhost has no SndbufTune; the TLS port (h2, http/1.1) is
# a vhost whose own default is SndbufTune 64k. With htaccess => 1,
# /htaccess/ is a fifth location, whose .htaccess says SndbufTune 128k
# (AllowOverrideList names it), a size no other location gives and below
# the stock wmem_max, so its socket's tb is the same whichever profile
# the machine has: each request's thread parses it. Under prefork, mod_http2
# declares HTTP/2 inactive (AH10034) and, told H2Direct anyway, its
# children crash with slow h2c downloads (SIGSEGV, without this module
# too): there both ports speak HTTP/1.1 only. On both, /fixed/ is 256k,
# /unset/ unset and /auto/ auto; /files/ holds the files themselves and
# the other three hold links to them. /sbt-status is the status page.
use strict;
use warnings;

use File::Temp ();
use POSIX ();

use SndbufTune::Kernel ();
use SndbufTune::Server ();
use SndbufTune::Util qw(capture free_port sha256_file parse_auto);

our @WHERE = qw(files fixed unset auto);

# The policy each location gets, per port ('none': the module's note when
# no SndbufTune applies).
our %POLICY = (
    plain => { files => 'none', fixed => 'fixed', unset => 'unset',
               auto => 'auto', htaccess => 'fixed' },
    tls   => { files => 'fixed', fixed => 'fixed', unset => 'unset',
               auto => 'auto', htaccess => 'fixed' },
);

my $HTACCESS = <<'EOF';
<Directory "@DOCROOT@/htaccess">
    AllowOverrideList SndbufTune
</Directory>
EOF

my $H2 = "Protocols h2c http/1.1\nH2Direct on\n";
my $BODY = <<'EOF';
<Location /fixed/>
    SndbufTune 256k
</Location>
<Location /unset/>
    SndbufTune unset
</Location>
<Location /auto/>
    SndbufTune auto
</Location>
<Location /sbt-status>
    SetHandler sndbuf-tune-status
</Location>
Listen @ADDR@:@TLSPORT@
<VirtualHost @ADDR@:@TLSPORT@>
    ServerName tls.test
    SSLEngine on
    SSLCertificateFile "@DIR@/tls.crt"
    SSLCertificateKeyFile "@DIR@/tls.key"
    @TLSPROTOCOLS@
    SndbufTune 64k
</VirtualHost>
EOF

sub new {
    my ($class, %a) = @_;
    my $sizes = delete $a{sizes} or die 'sizes required';
    my $conf = delete $a{conf} // '';
    my $htaccess = delete $a{htaccess};
    my $h2 = ($a{mpm} // 'event') ne 'prefork';
    my $tls_port = free_port();
    my $srv = SndbufTune::Server->new(
        name => 'reliab', modules => [qw(ssl http2)],
        body => ($h2 ? $H2 : '') . $BODY . ($htaccess ? $HTACCESS : '')
                . $conf,
        # the MPM's debug lines: each child's start, stop and generation,
        # for a download cut short (Restarts.pm's served_by)
        log_level => 'info mpm_' . ($a{mpm} // 'event') . ':debug',
        timeout => 60, %a,
        tokens => { TLSPORT => $tls_port,
                    TLSPROTOCOLS => 'Protocols ' . ($h2 ? 'h2 ' : '')
                                    . 'http/1.1',
                    %{ $a{tokens} || {} } });
    my $self = bless { srv => $srv, tls_port => $tls_port, sizes => $sizes,
                       sha => {}, protos => $h2 ? [qw(h1 h2c h2tls)]
                                                : [qw(h1 h1tls)],
                       where => [@WHERE, $htaccess ? 'htaccess' : ()] },
                     $class;
    $self->_make_cert;
    for my $name (sort keys %$sizes) {
        $self->{sha}{$name} = $srv->add_random_file("/files/$name.bin",
                                                    $sizes->{$name});
        $srv->add_link("/$_/$name.bin", "/files/$name.bin")
            for grep { $_ ne 'files' } $self->where;
    }
    $srv->add_file('/htaccess/.htaccess', "SndbufTune 128k\n") if $htaccess;
    return $self;
}

sub srv { $_[0]{srv} }
sub tls_port { $_[0]{tls_port} }
sub sizes { $_[0]{sizes} }
sub sha { $_[0]{sha}{$_[1]} }
sub protos { @{ $_[0]{protos} } }
sub where { @{ $_[0]{where} } }
sub start { $_[0]{srv}->start }

# A self-signed certificate for 127.0.0.1 (clients do not verify it).
sub _make_cert {
    my $self = shift;
    my $dir = $self->{srv}->dir;
    my ($rc, $out) = capture('openssl', 'req', '-x509', '-newkey', 'ec',
        '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
        '-subj', '/CN=tls.test', '-addext',
        'subjectAltName=DNS:tls.test,IP:127.0.0.1',
        '-keyout', "$dir/tls.key", '-out', "$dir/tls.crt");
    die "openssl could not make a certificate: $out" if $rc;
}

sub port_of { $_[1] =~ /tls$/ ? 'tls' : 'plain' }

sub policy {
    my ($self, $proto, $where) = @_;
    return $POLICY{ $self->port_of($proto) }{$where};
}

sub url {
    my ($self, $proto, $where, $name) = @_;
    my $path = "/$where/$name.bin";
    return $self->port_of($proto) eq 'tls'
        ? "https://$self->{srv}{addr}:$self->{tls_port}$path"
        : $self->{srv}->url($path);
}

# curl's options for each protocol.
my %CURL = (
    h1    => ['--http1.1'],
    h2c   => ['--http2-prior-knowledge'],
    h2tls => ['--http2', '-k'],
    h1tls => ['--http1.1', '-k'],
);

# One download with curl: (1, '') when it arrived whole over the right
# protocol with status 200 and the file's SHA-256, else (0, why), why
# starting with 'curl exit' when curl failed (a cut connection) and
# naming curl's port (port=N) where curl knew it. %o:
# limit_rate (curl --limit-rate), max_time (default 120), output (the file
# to write, watched by the caller; default a temporary file).
sub download {
    my ($self, $proto, $where, $name, %o) = @_;
    my $tmp = $o{output}
        // File::Temp->new(TEMPLATE => 'sbt-dl-XXXXXX', TMPDIR => 1);
    my @cmd = ('curl', '-sS', @{ $CURL{$proto} }, '--max-time',
               $o{max_time} // 120, '-o', "$tmp", '-w',
               '%{http_code} %{http_version} %{size_download} '
               . 'port=%{local_port}');
    push @cmd, '--limit-rate', $o{limit_rate} if $o{limit_rate};
    my ($rc, $out) = capture(@cmd, $self->url($proto, $where, $name));
    my $want_version = $proto =~ /^h1/ ? '1.1' : '2';
    my $size = $self->{sizes}{$name};
    return (0, "curl exit $rc: $out" . $self->_stalled($proto, $out))
        if $rc;
    return (0, "got '$out', want '200 $want_version $size'")
        unless $out =~ /^200 \Q$want_version $size\E port=/;
    my $sha = sha256_file("$tmp");
    return (0, "SHA-256 $sha, want $self->{sha}{$name}")
        unless $sha eq $self->{sha}{$name};
    return (1, '');
}

# Why a download timed out (curl exit 28), as the server's side saw it:
# the connection's server socket (inode 0: still in the listen queue,
# never accepted), the listen queue, the error log's lines naming the
# client's port and its last ones on the listener pausing.
sub _stalled {
    my ($self, $proto, $out) = @_;
    my ($cport) = $out =~ /^curl: \(28\).*port=(\d+)/s or return '';
    my $sport = $self->port_of($proto) eq 'tls' ? $self->{tls_port}
                                                 : $self->{srv}->port;
    my (undef, $conn) = capture('ss', '-tnieH',
                                "( sport = :$sport and dport = :$cport )");
    my (undef, $listen) = capture('ss', '-ltnH', "( sport = :$sport )");
    my @why = map {
        "\n    server side: $_->{state} recv-q $_->{recv_q}, "
        . ($_->{inode} ? "inode $_->{inode}" : 'inode 0: never accepted')
    } SndbufTune::Kernel::parse_ss($conn);
    push @why, map { "\n    listen queue: $_->{recv_q}" }
        SndbufTune::Kernel::parse_ss($listen);
    # and the event MPM's listener pausing for lack of idle workers
    my @paused = $self->log_lines(qr/accepting new conn/i);
    push @why, map { "\n    error log: $_" } $self->log_lines(qr/:$cport\]/),
        @paused > 4 ? @paused[-4 .. -1] : @paused;
    return join '', @why;
}

# The status page's ?auto, as { Key => value }; undef when it did not
# answer with 200.
sub status {
    my $self = shift;
    my ($rc, $out) = capture('curl', '-sS', '--max-time', '10', '-w',
                             '\n%{http_code}', $self->{srv}->url('/sbt-status?auto'));
    return undef if $rc || $out !~ s/\n200\z//;
    return (parse_auto($out))[0];
}

# The error log's lines matching $re.
sub log_lines {
    my ($self, $re) = @_;
    return grep { /$re/ } split /\n/, $self->{srv}->log_text;
}

# A child that died of a signal (a crash) or a sanitizer that stopped one.
our $CRASH_RE = qr/exit signal|AH00052|AH00051|Sanitizer/;

1;
