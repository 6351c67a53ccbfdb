# Core SendBufferSize 16384 is global: it locks every accepted socket at
# 2*16384. A separate apache2 instance (Setup::standalone):
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
use SndbufTune::Setup qw(standalone);
use SndbufTune::Checks;

plan tests => 5;

my $srv = standalone(name => 'sendbuffersize', body => <<'CONF');
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
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;
my $locked = 2 * 16384;

subtest 'no SndbufTune: socket stays locked at 2*SendBufferSize' => sub {
    download_ok(port => $port, host => 'plain.sbs.test', policy => 'none',
                check => sub { untouched_locked_ok($_[0], $locked,
                                                   'plain.sbs.test') });
};

subtest 'SndbufTune unset: lock cleared, autotuning restored' => sub {
    download_ok(port => $port, host => 'unset.sbs.test', policy => 'unset',
                baseline => $locked);
};

subtest 'SndbufTune 64k over SendBufferSize' => sub {
    download_ok(port => $port, host => 'fixed.sbs.test', policy => 'fixed',
                bytes => 65536);
};

subtest 'keep-alive: plain -> unset on one connection' => sub {
    my $c = download_ok(port => $port, host => 'plain.sbs.test',
                        label => 'plain (1st request)', check => sub {
        untouched_locked_ok($_[0], $locked, 'plain (1st request)') });
    download_ok(client => $c, host => 'unset.sbs.test', baseline => $locked,
                label => 'unset (2nd request)');
};

subtest 'startup warning about SendBufferSize' => sub {
    my $log = $srv->log_text;
    ok(scalar(grep { /\bwarn\b/ && /SendBufferSize/ } split /\n/, $log),
       'error_log has a warning naming SendBufferSize')
        or diag($log);
};

$srv->stop;
