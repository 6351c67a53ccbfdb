# Issue 4's proof, continued, over the WAN lab (20 Mbit/s, 100 ms RTT; BDP
# 250000 bytes, so auto alone would ask for FACTOR x BDP, FACTOR as
# docs/auto.md states it: 750000 with 3): which size wins, as the
# kernel shows it (ss -tmi tb in the server namespace, sampled while each
# download runs) and as the access log notes it.
#   SndbufTuneLimits clamps auto: a max of 64k (configured rate) and of 96k
#     (measured rate) cap tb at 2 x max in every sample, and the download
#     ends there;
#   SndbufTuneNetwork 198.18.0.0/15 (matching the client 198.18.0.2) beats
#     the vhost's `SndbufTune 16k`: a fixed 256k gives tb == 2 x 262144, an
#     `auto 20mbit` rule gives tb within +-25% of 2 x FACTOR x BDP; the logged
#     SNDBUF_TUNE_RULE names the network rule;
#   a rule that does not match (10.0.0.0/8) leaves the vhost's 16k;
#   a <Location> SndbufTune beats the network rule;
#   every download completes intact (length and SHA-256).
# Sizes and kernel state only; no wall-clock assertions. Needs root and
# /dev/net/tun (skips otherwise; fails instead when $CI is set).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use Test::More;
use SndbufTune::Kernel qw(expected_fixed_tb);
use SndbufTune::Util qw(module_path sha256_file);
use SndbufTune::WanLab qw(plan_lab_or_skip tb_changes rel_diff auto_factor);

plan_lab_or_skip();
BAIL_OUT(module_path() . ' not built (run make)') unless -f module_path();

my @cases = (
    # name, what, size, policy, expected tb (exact) or [band centre],
    # rule pattern
    ['limits', 'SndbufTuneLimits 8k 64k caps auto 20mbit', 2 << 20, 'auto',
     2 * 65536, qr/^<VirtualHost /],
    ['limitsm', 'SndbufTuneLimits 8k 96k caps measured auto', 2 << 20, 'auto',
     2 * 98304, qr/^<VirtualHost /],
    ['net', 'SndbufTuneNetwork 198.18.0.0/15 256k beats vhost 16k', 4 << 20,
     'fixed', expected_fixed_tb(256 * 1024),
     qr{^SndbufTuneNetwork 198\.18\.0\.0/15 }],
    ['netauto', 'SndbufTuneNetwork 198.18.0.0/15 auto 20mbit beats vhost 16k',
     4 << 20, 'auto', [2 * auto_factor() * 20e6 / 8 * 0.1],
     qr{^SndbufTuneNetwork 198\.18\.0\.0/15 }],
    ['nomatch', 'SndbufTuneNetwork 10.0.0.0/8 does not match: vhost 16k',
     1 << 20, 'fixed', expected_fixed_tb(16 * 1024), qr/^<VirtualHost /],
    ['loc', '<Location> SndbufTune 64k beats the network rule', 2 << 20,
     'fixed', expected_fixed_tb(64 * 1024), qr/^<Location /],
);

plan tests => 1 + @cases;

my $lab = SndbufTune::WanLab->up(rtt_ms => 100, rate_mbit => 20);
diag(($lab->{up_text} =~ s/\s+$//r));
my $srv = $lab->server(name => 'rules', log_level => 'info sndbuf_tune:trace1',
                       body => <<'EOF');
<VirtualHost 198.18.0.1:80>
    ServerName limits.test
    SndbufTune auto
    SndbufTuneBandwidth 20mbit
    SndbufTuneLimits 8k 64k
</VirtualHost>
<VirtualHost 198.18.0.1:80>
    ServerName limitsm.test
    SndbufTune auto
    SndbufTuneLimits 8k 96k
</VirtualHost>
<VirtualHost 198.18.0.1:80>
    ServerName net.test
    SndbufTune 16k
    SndbufTuneNetwork 198.18.0.0/15 256k
</VirtualHost>
<VirtualHost 198.18.0.1:80>
    ServerName netauto.test
    SndbufTune 16k
    SndbufTuneNetwork 198.18.0.0/15 auto 20mbit
</VirtualHost>
<VirtualHost 198.18.0.1:80>
    ServerName nomatch.test
    SndbufTune 16k
    SndbufTuneNetwork 10.0.0.0/8 256k
</VirtualHost>
<VirtualHost 198.18.0.1:80>
    ServerName loc.test
    SndbufTune 16k
    SndbufTuneNetwork 198.18.0.0/15 256k
    <Location /loc/>
        SndbufTune 64k
    </Location>
</VirtualHost>
EOF
my %sha;
for my $c (@cases) {
    my ($name, undef, $size) = @$c;
    my $path = $name eq 'loc' ? '/loc/loc.bin' : "/$name.bin";
    $sha{$name} = $srv->add_random_file($path, $size);
}
ok($srv->start, 'apache2 answers from the client namespace')
    or BAIL_OUT($srv->error);

my $tmp = File::Temp->new(TEMPLATE => '/tmp/sbt-rules-XXXXXX');

for my $c (@cases) {
    my ($name, $what, $size, $policy, $want, $rule) = @$c;
    subtest $what => sub {
        my $path = $name eq 'loc' ? '/loc/loc.bin' : "/$name.bin";
        my $d = $lab->download(url => $srv->url($path), host => "$name.test",
                               out => $tmp->filename, max_time => 120,
                               interval => 0.1);
        my $r = $d->{res};
        is($r->{http_code}, 200, 'status 200') or diag(explain($r));
        is($r->{size_download}, $size, 'whole body received');
        is(sha256_file($tmp->filename), $sha{$name}, 'SHA-256 of the body');
        my @ss = @{ $d->{ss} };
        cmp_ok(scalar @ss, '>=', 5, 'ss saw the server socket ('
               . scalar(@ss) . ' samples)');
        my @tb = tb_changes(\@ss);
        diag("$name: tb seen: @tb");
        my $last = $ss[-1][1]{tb};
        if (ref $want) {
            my $centre = $want->[0];
            ok(rel_diff($last, $centre) <= 0.25, sprintf
               'tb %d within +-25%% of 2 x FACTOR x BDP = %d', $last, $centre);
        }
        elsif ($name =~ /^limits/) {
            my @over = grep { $_ > $want } @tb;
            is(scalar @over, 0, "tb never above 2 x max = $want");
            is($last, $want, "the download ends at the cap, tb == $want");
        }
        else {
            is_deeply([@tb], [$want], "tb == $want in every sample");
        }
        my $e = $srv->access_entry_for($d->{port});
        ok($e, 'access-log entry') or return;
        is($e->{policy}, $policy, "logged policy $policy");
        like($e->{rule} // '', $rule, "logged rule: " . ($e->{rule} // '-'));
        is($e->{effective}, $last, 'SNDBUF_TUNE_EFFECTIVE == the last tb ss saw');
        is($e->{bw_bps}, 20_000_000, 'SNDBUF_TUNE_BW_BPS == 20000000 (rule rate)')
            if $name eq 'netauto';
    };
}

$srv->stop;
$lab->down;
