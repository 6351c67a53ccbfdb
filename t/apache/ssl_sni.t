# HTTPS with SNI: two names on one port (key sndbuf_ssl), each with its own
# certificate (made by t/run with openssl) and policy:
#   a.ssl.test  SndbufTune 64k   -> 131072 locked
#   b.ssl.test  SndbufTune unset -> lock clear, autotuned
# The certificate's CN proves SNI chose the vhost; the kernel view is read
# while the TLS download is held open; then length + SHA-256 are checked.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(vhost_port);
use SndbufTune::Checks;
use SndbufTune::StallClient;

my @cases = (
    ['a.ssl.test', 'fixed', 64 * 1024],
    ['b.ssl.test', 'unset', undef],
);

plan tests => scalar(@cases) + 1;

my $port = vhost_port('sndbuf_ssl');

for my $case (@cases) {
    my ($name, $policy, $bytes) = @$case;
    subtest "https://$name ($policy)" => sub {
        my $c = SndbufTune::StallClient->new(port => $port, sni => $name);
        is($c->peer_cn, $name, 'SNI selected the certificate of the vhost');
        download_ok(client => $c, host => $name, policy => $policy,
                    bytes => $bytes, label => $name);
    };
}

# the same vhosts through curl (an independent TLS client)
subtest 'curl --resolve: both names' => sub {
    for my $case (@cases) {
        my ($name, $policy) = @$case;
        my $out = `curl -sk --http1.1 --resolve $name:$port:127.0.0.1 -o /dev/null -D - -w 'code=%{http_code} size=%{size_download}\\n' https://$name:$port/gen/small.txt 2>&1`;
        like($out, qr/^code=200 /m, "$name: 200");
        like($out, qr/^x-sndbuf-policy: \Q$policy\E\r?$/mi, "$name: policy $policy");
    }
};
