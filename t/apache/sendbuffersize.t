# Core SendBufferSize 16384 is global: it locks every accepted socket at
# 2*16384. A separate apache2 instance (t/lib/SndbufTune/Standalone.pm):
#   plain.sbs.test  no SndbufTune    -> module leaves it: tb 32768, locked,
#                                       unchanged by a bulk read
#   unset.sbs.test  SndbufTune unset -> lock cleared, tb grows beyond 32768
#   fixed.sbs.test  SndbufTune 64k   -> 131072 locked
#   keep-alive plain -> unset on one connection
#   startup warning about SendBufferSize in the error log
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256);
use SndbufTune::Checks;
use SndbufTune::Standalone;
use SndbufTune::StallClient;

plan tests => 5;

my $srv = SndbufTune::Standalone->new(name => 'sendbuffersize', body => <<'CONF');
SendBufferSize 16384
<VirtualHost *:@PORT@>
    ServerName plain.sbs.test
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName unset.sbs.test
    SndbufTune unset
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName fixed.sbs.test
    SndbufTune 64k
</VirtualHost>
CONF
$srv->start or BAIL_OUT("standalone server: $srv->{error}");
my $port = $srv->port;
my $locked = 2 * 16384;

sub fetch_held {
    my ($host, $policy, $bytes, $check) = @_;
    my $c = SndbufTune::StallClient->new(port => $port);
    is($c->request(BIG_PATH, $host), 200, "$host: 200");
    decision_ok(sub { $c->header($_[0]) }, $policy, $bytes, $host);
    $c->read_body(32 * 1024);
    $check->($c);
    my ($len, $sha) = $c->finish_body;
    is($len, BIG_SIZE, "$host: whole body");
    is($sha, BIG_SHA256, "$host: SHA-256");
    return $c;
}

subtest 'no SndbufTune: socket stays locked at 2*SendBufferSize' => sub {
    fetch_held('plain.sbs.test', 'none', undef,
               sub { untouched_locked_ok($_[0], $locked, 'plain.sbs.test') });
};

subtest 'SndbufTune unset: lock cleared, autotuning restored' => sub {
    fetch_held('unset.sbs.test', 'unset', undef,
               sub { autotuned_ok($_[0], $locked, 'unset.sbs.test') });
};

subtest 'SndbufTune 64k over SendBufferSize' => sub {
    fetch_held('fixed.sbs.test', 'fixed', 65536,
               sub { fixed_ok($_[0], 65536, 'fixed.sbs.test') });
};

subtest 'keep-alive: plain -> unset on one connection' => sub {
    my $c = SndbufTune::StallClient->new(port => $port);
    is($c->request(BIG_PATH, 'plain.sbs.test'), 200, 'plain: 200');
    $c->read_body(32 * 1024);
    untouched_locked_ok($c, $locked, 'plain (1st request)');
    $c->finish_body;
    is($c->request(BIG_PATH, 'unset.sbs.test'), 200, 'unset: 200');
    $c->read_body(32 * 1024);
    autotuned_ok($c, $locked, 'unset (2nd request)');
    my ($len, $sha) = $c->finish_body;
    is($sha, BIG_SHA256, 'SHA-256');
};

subtest 'startup warning about SendBufferSize' => sub {
    my $log = $srv->log_text;
    ok(scalar(grep { /\bwarn\b/ && /SendBufferSize/ } split /\n/, $log),
       'error_log has a warning naming SendBufferSize')
        or diag($log);
};

$srv->stop;
