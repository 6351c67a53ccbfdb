# Scopes inside and around a vhost, checked in the kernel while the
# download is held open:
#   loc.test (SndbufTune 64k) /gen/big.bin          -> fixed 64k (vhost)
#   loc.test <Location /gen/loc1m/> 1m              -> fixed 1m
#   loc.test <Location /gen/locunset/> unset        -> autotuned
#   none.test <Directory .../gen/dir256k> 256k      -> fixed 256k
#   none.test <Files files512k.bin> 512k            -> fixed 512k
#   fixed64k.test <Directory .../gen/dir256k> 256k  -> the <Directory> is
#       nearer than the vhost-level SndbufTune: fixed 256k
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(vhost_port);
use SndbufTune::Checks;

my @cases = (
    ['loc.test',      '/gen/big.bin',          'fixed', 64 * 1024],
    ['loc.test',      '/gen/loc1m/big.bin',    'fixed', 1024 * 1024],
    ['loc.test',      '/gen/locunset/big.bin', 'unset', undef],
    ['none.test',     '/gen/dir256k/big.bin',  'fixed', 256 * 1024],
    ['none.test',     '/gen/files512k.bin',    'fixed', 512 * 1024],
    ['fixed64k.test', '/gen/dir256k/big.bin',  'fixed', 256 * 1024],
);

plan tests => scalar @cases;

my $port = vhost_port('sndbuf');

for my $case (@cases) {
    my ($host, $path, $policy, $bytes) = @$case;
    subtest "$host$path ($policy)" => sub {
        download_ok(port => $port, host => $host, path => $path,
                    policy => $policy, bytes => $bytes);
    };
}
