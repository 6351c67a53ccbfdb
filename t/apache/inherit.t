# Inheritance between scopes, on a separate apache2 instance whose main
# server has SndbufTune 256k (impossible in the Apache::Test server, whose
# vhost none.test must stay untouched):
#   inherit.test (no SndbufTune)            -> main server's 256k
#   inherit.test <Location /gen/locunset/>  -> unset
#   own.test SndbufTune 1m                  -> 1m
#   own.test <Location /gen/loc1m/> without SndbufTune -> the vhost's 1m
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH standalone);
use SndbufTune::Checks;

my @cases = (
    ['inherit.test', BIG_PATH,                'fixed', 256 * 1024],
    ['inherit.test', '/gen/locunset/big.bin', 'unset', undef],
    ['own.test',     BIG_PATH,                'fixed', 1024 * 1024],
    ['own.test',     '/gen/loc1m/big.bin',    'fixed', 1024 * 1024],
);

plan tests => scalar @cases;

my $srv = standalone(name => 'inherit', body => <<'CONF');
SndbufTune 256k
<VirtualHost *:@PORT@>
    ServerName inherit.test
    <Location /gen/locunset/>
        SndbufTune unset
    </Location>
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName own.test
    SndbufTune 1m
    <Location /gen/loc1m/>
        Header always set X-Location yes
    </Location>
</VirtualHost>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

for my $case (@cases) {
    my ($host, $path, $policy, $bytes) = @$case;
    subtest "$host$path ($policy)" => sub {
        download_ok(port => $port, host => $host, path => $path,
                    policy => $policy, bytes => $bytes);
    };
}

$srv->stop;
