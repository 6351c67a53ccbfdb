package SndbufTune::Setup;
# For the Apache::Test suite (t/apache): the generated test data and what
# t/conf/extra.conf.in configures (paths, sizes, vhost ports), and the
# standalone servers beside Apache::Test's. Keep in step with
# t/conf/extra.conf.in.
use strict;
use warnings;

use Digest::SHA ();
use File::Path ();
use File::Spec;
use Exporter 'import';

use SndbufTune::Server ();
use SndbufTune::Util qw(sha256_file);

# Apache::Test's plan() points Test::More's failure output at STDOUT (for
# tests run inside mod_perl), where a harness that is not verbose drops
# it: `make test` and CI would say which check failed but never its got
# and expected. After plan(), put it back on STDERR, as under prove. The
# wrapper is compiled in package Apache::Test because test_pm_refresh
# finds the test file by skipping that package's frames. Information for
# verbose runs uses note(), not diag(), so that STDERR stays quiet.
if ($INC{'Apache/Test.pm'}) {
    package Apache::Test;
    no warnings 'redefine';
    my $refresh = \&test_pm_refresh;
    *test_pm_refresh = sub {
        $refresh->(@_);
        Test::Builder->new->failure_output(\*STDERR);
    };
}

our @EXPORT_OK = qw(
    BIG_PATH BIG_SIZE BIG_SHA256 SMALL_PATH CONFIGURED_SIZES
    generate_data vhost_port standalone
);

# Deterministic test data: SHA-256 in counter mode, 16 MiB.
use constant BIG_PATH   => '/gen/big.bin';
use constant BIG_SIZE   => 16 * 1024 * 1024;
use constant BIG_SHA256 =>
    '147e9ad06b149556787da7b1344ba5bbd2fceb02ae88dbafa8fdeba447c97909';
use constant SMALL_PATH => '/gen/small.txt';

# Every fixed size configured anywhere in extra.conf.in, in bytes.
use constant CONFIGURED_SIZES => (64 * 1024, 256 * 1024, 512 * 1024,
                                  1024 * 1024);

# A SndbufTune::Server beside Apache::Test's, for what cannot live in it
# (global settings, a SndbufTune in the main server, `apache2 -t` on bad
# configurations): it serves Apache::Test's document root (t/htdocs or the
# copy t/run staged) as Apache::Test's user, sends the module's decision
# as X-Sndbuf-* headers, and keeps its files in t/logs/standalone/NAME.
sub standalone {
    my (%a) = @_;
    require Apache::Test;
    my $dir = File::Spec->catdir(Apache::Test::vars('serverroot'), 'logs',
                                 'standalone', $a{name});
    File::Path::remove_tree($dir);
    return SndbufTune::Server->new(
        dir => $dir, docroot => Apache::Test::vars('documentroot'),
        user => Apache::Test::vars('user'),
        group => Apache::Test::vars('group'), decision_headers => 1, %a);
}

# The port Apache::Test allocated for a <VirtualHost name:KEY> key.
sub vhost_port {
    my $key = shift;
    require Apache::Test;
    my $cfg = Apache::Test::config();
    my $port = $cfg->{vhosts}{$key}{port}
        or die "no vhost port for key $key";
    return $port;
}

sub _symlink {
    my ($target, $link) = @_;
    return if -l $link && readlink($link) eq $target;
    unlink $link;
    symlink $target, $link or die "symlink $link: $!";
}

# Create DOCROOT/gen/...; idempotent (regenerates only what is wrong).
sub generate_data {
    my $docroot = shift;
    my $gen = "$docroot/gen";
    File::Path::make_path($gen, "$gen/loc1m", "$gen/locunset",
                          "$gen/dir256k", "$gen/redir/auto",
                          "$gen/redir/fixed", "$gen/index/neg",
                          { mode => 0755 });
    my $big = "$docroot" . BIG_PATH;
    unless (-s $big && -s _ == BIG_SIZE && sha256_file($big) eq BIG_SHA256) {
        my $tmp = "$big.tmp.$$";
        open my $fh, '>', $tmp or die "$tmp: $!";
        binmode $fh;
        my $buf = '';
        for my $i (0 .. BIG_SIZE / 32 - 1) {
            $buf .= Digest::SHA::sha256("mod_sndbuf_tune test data $i");
            if (length $buf >= 1 << 20) {
                print $fh $buf or die "$tmp: $!";
                $buf = '';
            }
        }
        print $fh $buf or die "$tmp: $!";
        close $fh or die "$tmp: $!";
        my $got = sha256_file($tmp);
        die "generated data has sha256 $got, expected " . BIG_SHA256
            unless $got eq BIG_SHA256;
        chmod 0644, $tmp;
        rename $tmp, $big or die "rename $tmp: $!";
    }
    my $small = "$docroot" . SMALL_PATH;
    unless (-s $small) {
        open my $fh, '>', $small or die "$small: $!";
        print $fh "small file for HTTP/2 stream tests\n" x 64;
        close $fh;
        chmod 0644, $small;
    }
    _symlink('../big.bin', "$gen/loc1m/big.bin");
    _symlink('../big.bin', "$gen/locunset/big.bin");
    _symlink('../big.bin', "$gen/dir256k/big.bin");
    _symlink('big.bin', "$gen/files512k.bin");
    # internal redirects (redirect.t): RewriteRule [PT] and ErrorDocument
    # between an auto directory and a fixed <Location>
    _symlink('../../big.bin', "$gen/redir/$_") for
        qw(fixed/big.bin fixed/notfound-big.bin auto/notfound-big.bin);
    # the file mod_dir (DirectoryIndex) and mod_negotiation (MultiViews)
    # choose, under <Files> of their own (index_files.t)
    _symlink('../big.bin', "$gen/index/$_") for
        qw(index.html page.html big.bin);
    _symlink('../../big.bin', "$gen/index/neg/page.html");
    return 1;
}

1;
