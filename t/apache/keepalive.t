# One keep-alive connection moving between vhosts / locations gets each
# one's policy, checked in the kernel during each response:
#   fixed64k.test then unset.test : 131072 locked, then lock clear and tb
#                                   grows above 131072 (autotuning back)
#   unset.test then fixed64k.test : autotuned, then exactly 131072, locked
#   loc.test /gen/loc1m/ then /gen/: 2*1m locked, then 131072 locked
#   fixed1m.test then unset.test then fixed64k.test (three hops)
# That every request after the first really rode the same connection is
# shown by the server, not assumed from the client: the server socket
# being looked at has already had the earlier responses acknowledged
# (ss bytes_acked), and httpd logs the request as the connection's
# (n-1)th keep-alive request (%k in t/logs/sndbuf_log).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE vhost_port);
use SndbufTune::Kernel qw(expected_fixed_tb view_str);
use SndbufTune::Checks;
use SndbufTune::StallClient;
use SndbufTune::Util qw(poll_until);

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
my $log = Apache::Test::vars('serverroot') . '/logs/sndbuf_log';

# httpd's keep-alive count (%k) for the $n-th request from client port
# $cport logged after byte $from, once that line is written.
sub keepalive_count {
    my ($from, $cport, $n) = @_;
    my ($ka) = poll_until(10, sub {
        open my $fh, '<', $log or return undef;
        seek $fh, $from, 0;
        my @ka = map { /:$cport "GET .* ka=(\d+)$/ ? $1 : () } <$fh>;
        close $fh;
        return @ka >= $n ? \@ka : undef;
    });
    return $ka && $ka->[$n - 1];
}

for my $seq (@sequences) {
    my $name = join ' -> ', map { "$_->[0]$_->[1]" } @$seq;
    subtest $name => sub {
        my $from = -s $log // 0;
        my $c = SndbufTune::StallClient->new(port => $port);
        my $baseline;        # undef: a fresh socket (kernel's tcp_wmem[1])
        my $i = 0;
        for my $step (@$seq) {
            my ($host, $path, $policy, $bytes) = @$step;
            my $label = "request " . ++$i . " $host$path";
            my $earlier = ($i - 1) * BIG_SIZE;
            download_ok(client => $c, host => $host, path => $path,
                        policy => $policy, bytes => $bytes, label => $label,
                        baseline => $baseline, also => sub {
                my $v = view_of($c);
                cmp_ok($v ? $v->{bytes_acked} // -1 : -1, '>=', $earlier,
                       "$label: the server socket has delivered the "
                       . "$earlier bytes of the earlier responses")
                    or diag('kernel view: ' . view_str($v));
            });
            isnt(lc($c->header('Connection') // ''), 'close',
                 "$label: connection kept alive");
            is(keepalive_count($from, $c->local_port, $i), $i - 1,
               "$label: httpd logged it as keep-alive request " . ($i - 1));
            $baseline = $policy eq 'fixed' ? expected_fixed_tb($bytes) : undef;
        }
    };
}
