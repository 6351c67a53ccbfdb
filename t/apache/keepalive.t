# One keep-alive connection moving between vhosts / locations gets each
# one's policy, checked in the kernel during each response:
#   fixed64k.test then unset.test : 131072 locked, then lock clear and tb
#                                   grows above 131072 (autotuning back)
#   unset.test then fixed64k.test : autotuned, then exactly 131072, locked
#   loc.test /gen/loc1m/ then /gen/: 2*1m locked, then 131072 locked
#   fixed1m.test then unset.test then fixed64k.test (three hops)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256 vhost_port);
use SndbufTune::Kernel qw(expected_fixed_tb server_view);
use SndbufTune::Checks;
use SndbufTune::StallClient;

my @sequences = (
    [['fixed64k.test', BIG_PATH, 'fixed', 64 * 1024],
     ['unset.test',    BIG_PATH, 'unset', undef]],
    [['unset.test',    BIG_PATH, 'unset', undef],
     ['fixed64k.test', BIG_PATH, 'fixed', 64 * 1024]],
    [['loc.test', '/gen/loc1m/big.bin', 'fixed', 1024 * 1024],
     ['loc.test', BIG_PATH,             'fixed', 64 * 1024]],
    [['fixed1m.test',  BIG_PATH, 'fixed', 1024 * 1024],
     ['unset.test',    BIG_PATH, 'unset', undef],
     ['fixed64k.test', BIG_PATH, 'fixed', 64 * 1024]],
);

plan tests => scalar @sequences;

my $port = vhost_port('sndbuf');

for my $seq (@sequences) {
    my $name = join ' -> ', map { "$_->[0]$_->[1]" } @$seq;
    subtest $name => sub {
        my $c = SndbufTune::StallClient->new(port => $port);
        my $baseline;        # undef: a fresh socket (kernel's tcp_wmem[1])
        my $inode;
        my $i = 0;
        for my $step (@$seq) {
            my ($host, $path, $policy, $bytes) = @$step;
            my $label = "request " . ++$i . " $host$path";
            is($c->request($path, $host), 200, "$label: status 200");
            decision_ok(sub { $c->header($_[0]) }, $policy, $bytes, $label);
            $c->read_body(32 * 1024);
            my $v = server_view($port, $c->local_port);
            if ($v && defined $v->{inode}) {
                $inode //= $v->{inode};
                is($v->{inode}, $inode, "$label: same server socket");
            }
            if ($policy eq 'fixed') {
                fixed_ok($c, $bytes, $label);
                $baseline = expected_fixed_tb($bytes);
            }
            else {
                autotuned_ok($c, $baseline, $label);
                $baseline = undef;
            }
            my ($len, $sha) = $c->finish_body;
            is($len, BIG_SIZE, "$label: whole body");
            is($sha, BIG_SHA256, "$label: SHA-256");
            isnt(lc($c->header('Connection') // ''), 'close',
                 "$label: connection kept alive");
        }
    };
}
