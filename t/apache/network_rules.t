# SndbufTuneNetwork rules of the main server and of a vhost, for the
# IPv4 client 127.0.0.1, checked in the kernel and in the access log. On a
# separate apache2 instance (Setup::standalone) whose main server has
# SndbufTune 64k and SndbufTuneNetwork 127.0.0.0/8 256k:
#   main.test     no rules of its own    -> the main server's /8: 256k
#   tie.test      127.0.0.0/8 1m         -> a vhost's rule wins a tie of
#                                           prefix length: 1m
#   mapped.test   ::ffff:127.0.0.0/104 1m -> an IPv4-mapped rule is the
#                                           IPv4 127.0.0.0/8: it matches
#                                           the IPv4 client and ties as
#                                           tie.test's does: 1m
#   shorter.test  126.0.0.0/7 1m         -> the main server's longer /8
#                                           beats the vhost's /7: 256k
# (The values SndbufTuneNetwork refuses are bad_input.t's.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(standalone);
use SndbufTune::Checks;

my ($k256, $m1) = (256 * 1024, 1024 * 1024);
# host, expected size, the rule that must decide
my @cases = (
    ['main.test',    $k256, '127.0.0.0/8'],
    ['tie.test',     $m1,   '127.0.0.0/8'],
    ['mapped.test',  $m1,   '::ffff:127.0.0.0/104'],
    ['shorter.test', $k256, '127.0.0.0/8'],
);

my $srv = standalone(name => 'network_rules', body => <<'CONF');
SndbufTune 64k
SndbufTuneNetwork 127.0.0.0/8 256k
<VirtualHost *:@PORT@>
    ServerName main.test
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName tie.test
    SndbufTuneNetwork 127.0.0.0/8 1m
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName mapped.test
    SndbufTuneNetwork ::ffff:127.0.0.0/104 1m
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName shorter.test
    SndbufTuneNetwork 126.0.0.0/7 1m
</VirtualHost>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;
# tie.test's rule and the main server's read alike but for their lines
my $first_vhost_line = do {
    open my $fh, '<', $srv->conf or die $srv->conf . ": $!";
    my $n = 0;
    $n++ until (<$fh> // '<VirtualHost') =~ /^<VirtualHost/;
    $n + 1;
};

plan tests => scalar @cases;

for my $case (@cases) {
    my ($host, $bytes, $net) = @$case;
    subtest "$host: SndbufTuneNetwork $net decides, fixed $bytes" => sub {
        my $c = download_ok(port => $port, host => $host, policy => 'fixed',
                            bytes => $bytes);
        my $e = logged_ok($srv, $c, $host, vhost => $host,
                          rule => qr{^SndbufTuneNetwork \Q$net\E at \S+:\d+$});
        # which line: the main server's rule precedes the vhosts
        my ($line) = ($e->{rule} // '') =~ /:(\d+)$/;
        my $main = $host eq 'main.test' || $host eq 'shorter.test';
        ok(defined $line && ($main ? $line < $first_vhost_line
                                   : $line > $first_vhost_line),
           "$host: the " . ($main ? "main server's" : "vhost's") . ' line');
    };
}

$srv->stop;
