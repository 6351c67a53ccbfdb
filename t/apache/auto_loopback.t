# SndbufTune auto and SndbufTuneNetwork on loopback (the WAN lab suites in
# t/wan-downloads/ cover real paths), on a separate apache2 instance that
# also listens on [::1]:
#   auto.test     auto, limits 8k 1m (so no slow start left to autotuning):
#                 loopback's tiny RTT gives the 2 x MSS floor or a little
#                 more; kernel, access log and lock agree
#   limits.test   auto with SndbufTuneLimits 1m 2m: within them
#   net.test      SndbufTune 64k, but network rules 127.0.0.0/8 96k,
#                 127.0.0.1/32 128k, ::1/128 192k, ::/0 unset: the longest
#                 matching prefix wins, for IPv4 and IPv6 clients; a
#                 <Location> beats every rule
# Every figure is read from the kernel (ss tb, sockinspect) and compared
# with what the module logged for the same response.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256 standalone);
use SndbufTune::Kernel qw(expected_fixed_tb ss_sockets);
use SndbufTune::Checks;
use SndbufTune::StallClient;
use SndbufTune::Util qw(poll_until);

my $srv = standalone(name => 'auto', body => <<'CONF');
Listen [::1]:@PORT@
<VirtualHost *:@PORT@>
    ServerName auto.test
    SndbufTune auto
    # narrower than tcp_wmem: auto sizes from its first look instead of
    # leaving slow start to autotuning, which a loopback download at
    # gigabytes a second would outlast
    SndbufTuneLimits 8k 1m
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName limits.test
    SndbufTune auto
    SndbufTuneLimits 1m 2m
</VirtualHost>
<VirtualHost *:@PORT@>
    ServerName net.test
    SndbufTune 64k
    SndbufTuneNetwork 127.0.0.0/8 96k
    SndbufTuneNetwork 127.0.0.1/32 128k
    SndbufTuneNetwork ::1/128 192k
    SndbufTuneNetwork ::/0 unset
    <Location /gen/loc1m/>
        SndbufTune 1m
    </Location>
</VirtualHost>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

plan tests => 6;

# Download all of BIG_PATH (or $path) on one connection, then, with the
# connection still open, return the kernel's view and the access-log entry.
sub download {
    my ($host, $path) = @_;
    $path //= BIG_PATH;
    my $c = SndbufTune::StallClient->new(port => $port);
    is($c->request($path, $host), 200, "$host$path: status 200");
    my ($len, $sha) = $c->finish_body;
    is($len, BIG_SIZE, "$host$path: whole body");
    is($sha, BIG_SHA256, "$host$path: SHA-256");
    my $v = view_of($c);
    log_view("$host$path", $v);
    my $f = $srv->access_entry_for($c->local_port, 10);
    return ($c, $v, $f);
}

subtest 'auto on loopback: at least the 2 x MSS floor, as the kernel shows' => sub {
    my ($c, $v, $f) = download('auto.test');
    ok($v && $f, 'kernel view and log line') or return;
    is($f->{policy}, 'auto', 'SNDBUF_TUNE_POLICY auto');
    is($f->{effective}, $v->{tb}, 'SNDBUF_TUNE_EFFECTIVE == ss tb');
    is($f->{effective}, 2 * $f->{requested}, 'effective == 2 x requested');
    cmp_ok($v->{tb}, '>=', 4 * $v->{mss},
           "tb $v->{tb} >= 2 x (2 x MSS $v->{mss})");
    cmp_ok($v->{tb}, '<', 4 * 1024 * 1024,
           'but nowhere near autotuning\'s 4 MiB on a microsecond RTT');
    lock_bit_is($v, 1, 'auto fixes it');
};

# Loopback's own rate x RTT is anywhere from a few KiB to about 1.5 MiB,
# depending on the machine's speed and load: below 1m it must be raised to
# the minimum, above it stay within the limits; never autotuning's.
subtest 'SndbufTuneLimits: loopback stays within 1m..2m' => sub {
    my ($c, $v, $f) = download('limits.test');
    ok($v && $f, 'kernel view and log line') or return;
    cmp_ok($v->{tb}, '>=', expected_fixed_tb(1024 * 1024),
           'ss tb >= 2 x 1m (the minimum)');
    cmp_ok($v->{tb}, '<=', expected_fixed_tb(2 * 1024 * 1024),
           'ss tb <= 2 x 2m (the maximum)');
    lock_bit_is($v, 1, 'auto fixed it');
    is($f->{effective}, $v->{tb}, 'SNDBUF_TUNE_EFFECTIVE == ss tb');
};

subtest 'IPv4 client: the longest prefix (/32) beats /8 and the vhost' => sub {
    my ($c, $v, $f) = download('net.test');
    ok($v && $f, 'kernel view and log line') or return;
    is($v->{tb}, expected_fixed_tb(128 * 1024), 'ss tb == 2 x 128k');
    like($f->{rule}, qr{^SndbufTuneNetwork 127\.0\.0\.1/32 at },
         'SNDBUF_TUNE_RULE names the /32 rule');
};

subtest '<Location> beats every network rule' => sub {
    my ($c, $v, $f) = download('net.test', '/gen/loc1m/big.bin');
    ok($v && $f, 'kernel view and log line') or return;
    is($v->{tb}, expected_fixed_tb(1024 * 1024), 'ss tb == 2 x 1m');
    like($f->{rule}, qr{^<Location /gen/loc1m/> at }, 'rule is the Location');
};

# IPv6: curl from [::1], held open by a slow read rate while we look.
subtest 'IPv6 client: ::1/128 beats ::/0 and the vhost' => sub {
    my $pid = open my $curl, '-|', 'curl', '-s', '-6', '-o', '/dev/null',
        '--limit-rate', '200k', '--max-time', '60', '-H', 'Host: net.test',
        '-w', '%{http_code} %{size_download}', "http://[::1]:$port" . BIG_PATH
        or die "curl: $!";
    # The connection shows in ss as soon as curl connects, before httpd
    # has read the request and chosen net.test's rule: wait for the
    # response's first bytes (send queue not empty), as http2.t does.
    my ($v) = poll_until(10, sub {
        my ($s) = ss_sockets(sport => $port, dst => '[::1]',
                             state => 'established');
        return $s && $s->{send_q} ? $s : undef;
    });
    kill 'TERM', $pid;
    close $curl;
    ok($v, 'the IPv6 response is under way in ss') or return;
    is($v->{tb}, expected_fixed_tb(192 * 1024), 'ss tb == 2 x 192k');
    my ($f) = poll_until(10, sub {
        (grep { ($_->{client} // '') eq '::1' } $srv->access_entries)[-1];
    });
    ok($f && $f->{client} eq '::1', 'logged for the IPv6 client');
    like($f && $f->{rule}, qr{^SndbufTuneNetwork ::1/128 at },
         'SNDBUF_TUNE_RULE names the ::1/128 rule');
};

subtest 'startup: no warning for sizes within wmem_max' => sub {
    unlike($srv->log_text, qr/exceeds net\.core\.wmem_max/,
           'no wmem_max warning');
    like($srv->log_text, qr/\[sndbuf_tune:notice\].*kernel limits: net\.core\.wmem_max \d+/,
         'startup notice reports the kernel limits');
};

$srv->stop;
