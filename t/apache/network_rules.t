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
#   if.test       SndbufTune 1m in <If "true"> -> beats the rules, as a
#                                           <Location> does: 1m
#   limit.test    SndbufTune 1m in <LimitExcept POST> in <Location
#                 /gen/loc1m/>           -> 1m, the rule named after the
#                                           <Location> (<LimitExcept>
#                                           limits only access control)
#   none.test     127.0.0.0/8 none       -> the socket left alone, and the
#                                           access log's rule= names the
#                                           line that said none
# And behind mod_remoteip: with RemoteIPHeader and no RemoteIP*Proxy, it
# believes the header from any peer, so a client with
# "X-Forwarded-For: 203.0.113.7" gets the rule for 203.0.113.0/24 (the
# module warns at startup, naming the vhost); where a vhost lists its
# proxies, the header from 127.0.0.1 is ignored and there is no warning.
# (The values SndbufTuneNetwork refuses are bad_input.t's.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH standalone);
use SndbufTune::Checks;
use SndbufTune::StallClient ();

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
<VirtualHost *:@PORT@>
    ServerName none.test
    SndbufTuneNetwork 127.0.0.0/8 none
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName if.test
    <If "true">
        SndbufTune 1m
    </If>
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName limit.test
    <Location /gen/loc1m/>
        <LimitExcept POST>
            SndbufTune 1m
        </LimitExcept>
    </Location>
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

# host, path, expected size, the section that must decide
my @sections = (
    ['if.test',    BIG_PATH,             $m1, '<If "true">'],
    ['limit.test', '/gen/loc1m/big.bin', $m1, '<Location /gen/loc1m/>'],
);

plan tests => @cases + @sections + 7;

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

for my $case (@sections) {
    my ($host, $path, $bytes, $sect) = @$case;
    subtest "$host$path: SndbufTune in $sect decides, fixed $bytes" => sub {
        my $c = download_ok(port => $port, host => $host, path => $path,
                            policy => 'fixed', bytes => $bytes);
        logged_ok($srv, $c, $host, vhost => $host,
                  rule => qr{^\Q$sect\E at \S+:\d+$});
    };
}

subtest 'none.test: SndbufTuneNetwork 127.0.0.0/8 none decides, and says so' => sub {
    my $c = SndbufTune::StallClient->new(port => $port);
    $c->request('/gen/small.txt', 'none.test');
    is($c->header('X-Sndbuf-Policy'), 'none', 'SNDBUF_TUNE_POLICY none');
    logged_ok($srv, $c, 'none.test', vhost => 'none.test', policy => 'none',
              rule => qr{^SndbufTuneNetwork 127\.0\.0\.0/8 at \S+:\d+$});
    $c->close;
};

$srv->stop;

my $rip = standalone(name => 'network_remoteip', modules => ['remoteip'],
                     body => <<'CONF');
RemoteIPHeader X-Forwarded-For
SndbufTuneNetwork 203.0.113.0/24 256k
<VirtualHost *:@PORT@>
    ServerName open.test
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName proxied.test
    RemoteIPInternalProxy 192.0.2.1
</VirtualHost>
CONF
$rip->start or BAIL_OUT('standalone server: ' . $rip->error);
for my $case (['open.test', 'fixed', $k256], ['proxied.test', 'none', '(null)']) {
    my ($host, $policy, $req) = @$case;
    my $c = SndbufTune::StallClient->new(port => $rip->port);
    $c->request('/gen/small.txt', $host, 'X-Forwarded-For: 203.0.113.7');
    is(join(' ', map { $c->header("X-Sndbuf-$_") // '?' }
                 qw(Policy Requested)),
       "$policy $req", "$host, X-Forwarded-For 203.0.113.7: $policy $req");
    $c->close;
}
my @warn = grep { /RemoteIPHeader X-Forwarded-For without/ }
           split /\n/, $rip->log_text;
ok(scalar(grep { /\[sndbuf_tune:warn\].*SndbufTuneNetwork: vhost open\.test:/ }
          @warn), 'startup warning for open.test') or diag(join "\n", @warn);
ok(!grep({ /proxied\.test/ } @warn), 'none for proxied.test');
like($warn[0] // '', qr{docs/directives\.md}, 'it names the documentation');
ok($rip->stop, 'stopped') or diag($rip->error);
