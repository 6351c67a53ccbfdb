# .htaccess and mod_sndbuf_tune.
#
# 1. Under plain AllowOverride All (t/conf/extra.conf.in) a .htaccess
#    with SndbufTune (t/htdocs/htaccess/.htaccess) makes the request fail
#    with 500: the directives are not in any AllowOverride class.
# 2. On a separate server whose main config says SndbufTuneLimits 8k 256k
#    and whose <Directory> names the directives in AllowOverrideList (what
#    a shared host would do to let its users pick a size), the limit's
#    max is a ceiling no .htaccess gets past: SndbufTune 1g there gets
#    256k (tb 512k in ss, not the 8 MB of wmem_max), and says so in the
#    rule it logs and in the environment (SNDBUF_TUNE_RULE, which CGI,
#    SSI and mod_headers see); SndbufTuneLimits in .htaccess can only lower it; a
#    size below it is kept; and SndbufTuneNetwork stays refused (500,
#    "not allowed here") even though AllowOverrideList names it.  The
#    status page counts each clamped response (Clamped).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use Apache::TestRequest qw(GET);
use Apache::TestUtil qw(t_start_error_log_watch t_finish_error_log_watch);
use SndbufTune::Setup qw(BIG_PATH standalone);
use SndbufTune::Checks;
use SndbufTune::StallClient ();

# [directory under /gen/htcap, .htaccess, policy, bytes, rule (the note),
#  the environment's rule (no file:line, the clamp too)]
my $CLAMPED = '.htaccess, clamped to %d by SndbufTuneLimits';
my @cases = (
    ['fixed1g',   "SndbufTune 1g\n", 'fixed', 256 * 1024,
     qr/clamped to 262144 by SndbufTuneLimits/, sprintf($CLAMPED, 262144)],
    ['raise',     "SndbufTuneLimits 8k 1g\nSndbufTune 1g\n", 'fixed',
     256 * 1024, qr/clamped to 262144 by SndbufTuneLimits/,
     sprintf($CLAMPED, 262144)],
    ['narrow',    "SndbufTuneLimits 8k 128k\nSndbufTune 1g\n", 'fixed',
     128 * 1024, qr/clamped to 131072 by SndbufTuneLimits/,
     sprintf($CLAMPED, 131072)],
    ['fixed64k',  "SndbufTune 64k\n", 'fixed', 64 * 1024,
     qr/^(?!.*clamped).*\.htaccess/, '.htaccess'],
);

plan tests => 2 + @cases + 4;

Apache::TestRequest::module('sndbuf');
t_start_error_log_watch();
my $res = GET '/htaccess/index.txt', Host => 'none.test';
is($res->code, 500, '.htaccess with SndbufTune: 500');
my @log = t_finish_error_log_watch();
# this file's .htaccess: bad_input.t's, in the same log, say the same
ok(scalar(grep { m{/htaccess/\.htaccess: SndbufTune not allowed here} } @log),
   'error log: SndbufTune not allowed here') or diag(join '', @log);

my $srv = standalone(name => 'htaccess_cap', body => <<'CONF');
SndbufTuneLimits 8k 256k
Header always set X-Sndbuf-Rule "%{SNDBUF_TUNE_RULE}e"
<Directory @DOCROOT@/gen/htcap>
    AllowOverrideList SndbufTune SndbufTuneLimits SndbufTuneBandwidth SndbufTuneNetwork
</Directory>
<Location /sbt-status>
    SetHandler sndbuf-tune-status
</Location>
CONF
for my $case (@cases) {
    my ($dir, $htaccess) = @$case;
    $srv->add_file("/gen/htcap/$dir/.htaccess", $htaccess);
    $srv->add_link("/gen/htcap/$dir/big.bin", BIG_PATH);
}
$srv->add_file('/gen/htcap/network/.htaccess',
               "SndbufTuneNetwork 127.0.0.0/8 1g\n");
$srv->add_file('/gen/htcap/network/index.txt', "network\n");
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);

for my $case (@cases) {
    my ($dir, $htaccess, $policy, $bytes, $rule, $env_rule) = @$case;
    (my $what = $htaccess) =~ s/\n(?=.)/, /g;
    chomp $what;
    subtest "$dir ($what): $policy $bytes" => sub {
        my $c = download_ok(port => $srv->port, host => 'localhost',
                            path => "/gen/htcap/$dir/big.bin",
                            policy => $policy, bytes => $bytes);
        logged_ok($srv, $c, $dir, rule => $rule);
        is($c->header('X-Sndbuf-Rule'), $env_rule,
           "$dir: SNDBUF_TUNE_RULE in the environment");
    };
}

# Counted when logged, which logged_ok waited for: fixed1g, raise and
# narrow came down to the limit, fixed64k did not.
my $auto = GET('http://localhost:' . $srv->port . '/sbt-status?auto');
my $clamped = 0;
$clamped += $_ for $auto->content =~ /^SndbufTuneVhost\[\d+\]Clamped: (\d+)$/mg;
is($clamped, 3, 'status page: each .htaccess size clamped to the limit '
   . 'is counted') or diag($auto->as_string);

my $c = SndbufTune::StallClient->new(port => $srv->port);
is($c->request('/gen/htcap/network/index.txt', 'localhost'), 500,
   'SndbufTuneNetwork in .htaccess, though AllowOverrideList names it: 500');
$c->close;
my $text = $srv->log_text;
like($text, qr/SndbufTuneNetwork not allowed here/,
     'error log: SndbufTuneNetwork not allowed here');
ok($srv->stop, 'standalone server stopped') or diag($srv->error);
