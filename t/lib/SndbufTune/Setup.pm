package SndbufTune::Setup;
# What t/conf/extra.conf.in configures (vhost names, policies, paths) and the
# generated test data, in one place for the .t files. Keep in step with
# t/conf/extra.conf.in.
use strict;
use warnings;

use Digest::SHA ();
use File::Path ();
use File::Spec;
use Exporter 'import';

our @EXPORT_OK = qw(
    %POLICY BIG_PATH BIG_SIZE BIG_SHA256 SMALL_PATH CONFIGURED_SIZES
    generate_data parse_size t_dir module_path vhost_port docroot
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

# name-based vhost => [expected policy, requested bytes or undef]
our %POLICY = (
    'none.test'     => ['none',  undef],
    'fixed64k.test' => ['fixed', 64 * 1024],
    'fixed1m.test'  => ['fixed', 1024 * 1024],
    'unset.test'    => ['unset', undef],
    'loc.test'      => ['fixed', 64 * 1024],
    'a.ssl.test'    => ['fixed', 64 * 1024],
    'b.ssl.test'    => ['unset', undef],
    'c.ssl.test'    => ['fixed', 1024 * 1024],
    'd.ssl.test'    => ['unset', undef],
);

sub parse_size {
    my $s = shift;
    my %mult = (k => 1024, m => 1024**2, g => 1024**3);
    $s =~ /^(\d+)([kmg]?)$/i or die "bad size $s";
    return $1 * ($2 ? $mult{lc $2} : 1);
}

sub t_dir {
    require Apache::Test;
    return Apache::Test::vars('serverroot');
}

sub docroot {
    require Apache::Test;
    return Apache::Test::vars('documentroot');
}

sub module_path {
    return File::Spec->catfile(t_dir(), File::Spec->updir, '.libs',
                               'mod_sndbuf_tune.so');
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

sub _sha_file {
    my $path = shift;
    my $sha = Digest::SHA->new(256);
    $sha->addfile($path, 'b');
    return $sha->hexdigest;
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
                          "$gen/dir256k", { mode => 0755 });
    my $big = "$docroot" . BIG_PATH;
    unless (-s $big && -s _ == BIG_SIZE && _sha_file($big) eq BIG_SHA256) {
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
        my $got = _sha_file($tmp);
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
    return 1;
}

1;
