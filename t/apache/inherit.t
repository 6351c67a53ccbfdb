# Inheritance between scopes, on a separate apache2 instance whose main
# server has SndbufTune 256k (impossible in the Apache::Test server, whose
# vhost none.test must stay untouched):
#   inherit.test (no SndbufTune)            -> main server's 256k
#   inherit.test <Location /gen/locunset/>  -> unset
#   own.test SndbufTune 1m                  -> 1m
#   own.test <Location /gen/loc1m/> without SndbufTune -> the vhost's 1m
# and a nearer scope going back to a default that 0 used to stand for:
#   inherit.test <Location /gen/inh_none/> SndbufTune none -> untouched
#                (policy none, the kernel's autotuning)
#   auto.test    auto under the main server's SndbufTuneBandwidth 1kbit:
#                sized for the configured 1000 bit/s, and in
#                <Location /gen/inh_measure/> SndbufTuneBandwidth measure:
#                for the rate measured on loopback, far above it
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH standalone);
use SndbufTune::Checks;

my @cases = (
    ['inherit.test', '/gen/inh_none/big.bin', 'none',  undef],
    ['inherit.test', BIG_PATH,                'fixed', 256 * 1024],
    ['inherit.test', '/gen/locunset/big.bin', 'unset', undef],
    ['own.test',     BIG_PATH,                'fixed', 1024 * 1024],
    ['own.test',     '/gen/loc1m/big.bin',    'fixed', 1024 * 1024],
);

plan tests => @cases + 2;

my $srv = standalone(name => 'inherit', body => <<'CONF');
SndbufTune 256k
SndbufTuneBandwidth 1kbit
<VirtualHost *:@PORT@>
    ServerName inherit.test
    <Location /gen/locunset/>
        SndbufTune unset
    </Location>
    <Location /gen/inh_none/>
        SndbufTune none
    </Location>
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName auto.test
    SndbufTune auto
    # narrower than tcp_wmem, so auto sizes at its first look
    SndbufTuneLimits 8k 1m
    <Location /gen/inh_measure/>
        SndbufTuneBandwidth measure
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
$srv->add_link($_, BIG_PATH)
    for '/gen/inh_none/big.bin', '/gen/inh_measure/big.bin';
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

for my $case (@cases) {
    my ($host, $path, $policy, $bytes) = @$case;
    subtest "$host$path ($policy)" => sub {
        download_ok(port => $port, host => $host, path => $path,
                    policy => $policy, bytes => $bytes);
    };
}

# auto's rate: the configured one, or measured where a nearer scope says
# so (the access log's SNDBUF_TUNE_BW_BPS, bits/s: loopback's is far
# above 1 Mbit/s)
for my $case (['configured', BIG_PATH, qr/^1000$/],
              ['measure', '/gen/inh_measure/big.bin', qr/^\d{7,}$/]) {
    my ($what, $path, $bw) = @$case;
    subtest "auto.test$path: rate $what" => sub {
        my $c = download_ok(port => $port, host => 'auto.test',
                            path => $path, check => sub {});
        logged_ok($srv, $c, $what, policy => 'auto', bw_bps => $bw);
    };
}

$srv->stop;
