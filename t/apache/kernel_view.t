# What the KERNEL did with the server's socket, per name-based vhost, while
# a client holds a large download open by not reading (ss -tmi skmem tb,
# getsockopt SO_SNDBUF / SO_BUF_LOCK via t/helpers/sockinspect):
#   fixed N  -> tb == 2*min(N, wmem_max), locked, unchanged by a bulk read
#   unset    -> lock clear, tb none of the configured sizes, and tb grows
#               above the value the fresh socket had before the request
#   none     -> the same as unset: the module leaves the socket alone
# After the checks the client reads the rest and verifies length + SHA-256.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(vhost_port);
use SndbufTune::Kernel qw(wmem_max tcp_wmem);
use SndbufTune::Checks;

my @cases = (
    ['fixed64k.test', 'fixed', 64 * 1024],
    ['fixed1m.test',  'fixed', 1024 * 1024],
    ['unset.test',    'unset', undef],
    ['none.test',     'none',  undef],
);

plan tests => scalar @cases;

my $port = vhost_port('sndbuf');
note("kernel: wmem_max=" . wmem_max() . " tcp_wmem=" . join(' ', tcp_wmem()));

for my $case (@cases) {
    my ($host, $policy, $bytes) = @$case;
    subtest "$host ($policy)" => sub {
        download_ok(port => $port, host => $host, policy => $policy,
                    bytes => $bytes, label => $host)->close;
    };
}
