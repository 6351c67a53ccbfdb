# Large downloads from every name-based vhost on one port (and the
# <Location>/<Directory>/<Files> scopes), each checked for status, length
# and SHA-256, and for the decision the module reports through its
# notes/env (exposed as X-Sndbuf-* by mod_headers).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use Apache::TestRequest ();
use Digest::SHA ();
use LWP::UserAgent ();

use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256 vhost_port);
use SndbufTune::Checks qw(decision_ok);

my @cases = (
    # [Host, path, policy, bytes]
    ['none.test',     BIG_PATH,                 'none',  undef],
    ['fixed64k.test', BIG_PATH,                 'fixed', 64 * 1024],
    ['fixed1m.test',  BIG_PATH,                 'fixed', 1024 * 1024],
    ['unset.test',    BIG_PATH,                 'unset', undef],
    ['loc.test',      BIG_PATH,                 'fixed', 64 * 1024],
    ['loc.test',      '/gen/loc1m/big.bin',     'fixed', 1024 * 1024],
    ['loc.test',      '/gen/locunset/big.bin',  'unset', undef],
    ['none.test',     '/gen/dir256k/big.bin',   'fixed', 256 * 1024],
    ['none.test',     '/gen/files512k.bin',     'fixed', 512 * 1024],
);

plan tests => scalar @cases;

my $port = vhost_port('sndbuf');
my $ua = LWP::UserAgent->new(keep_alive => 0, timeout => 60);

for my $c (@cases) {
    my ($host, $path, $policy, $bytes) = @$c;
    subtest "$host$path" => sub {
        my $sha = Digest::SHA->new(256);
        my $len = 0;
        my $res = $ua->get("http://127.0.0.1:$port$path", Host => $host,
            ':read_size_hint' => 65536,
            ':content_cb' => sub { $sha->add($_[0]); $len += length $_[0] });
        is($res->code, 200, 'status 200');
        is($res->header('Content-Length'), BIG_SIZE, 'Content-Length');
        is($len, BIG_SIZE, 'received length');
        is($sha->hexdigest, BIG_SHA256, 'SHA-256 of the body');
        ok(!$res->header('X-Died') && !$res->header('Client-Aborted'),
           'body complete');
        decision_ok(sub { $res->header($_[0]) }, $policy, $bytes, $host);
    };
}
