# Internal redirects: the final request's policy is the one applied to
# the socket, held for the whole body and logged. On a separate apache2
# instance (Setup::standalone: SndbufTune auto server-wide, mod_rewrite):
#   RewriteRule [PT] from an auto directory into <Location> 256k
#       /gen/redir/auto/tofixed/big.bin -> /gen/redir/fixed/big.bin
#   ErrorDocument 404 from an auto directory to a file under the 256k
#       <Location>  /gen/redir/auto/missing -> .../fixed/notfound-big.bin
#   and the reverse: ErrorDocument 404 from the 256k <Location> to a file
#       in the auto directory  /gen/redir/fixed/missing
#       -> /gen/redir/auto/notfound-big.bin
# A fixed final request must show 2*min(256k, wmem_max) in the kernel,
# locked, while stalled, after a bulk read and again once most of the
# body has been pulled (an auto controller carried over from the first
# request would have resized it by then); the access log (mod_log_config
# logs the final request) must name the <Location>'s line with the
# effective size the kernel has. An auto final request must be auto in
# the kernel: locked at twice what it logged as requested, not at the
# first request's fixed size.
#
# A second instance has no server-wide SndbufTune: a redirect from the
# 256k <Location> to /gen/big.bin, where nothing applies, is served on
# the 256k buffer the first request set, so it is noted and logged as
# that request's policy and rule (not "none"): ErrorDocument 404, a
# per-directory RewriteRule and Action (mod_actions). A RewriteRule to a
# <Location> that says "SndbufTune none" is none: logged so, and the
# socket left as the first request set it. There too, SNDBUF_TUNE_RULE in
# the environment carries no configuration path.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(standalone);
use SndbufTune::Kernel qw(expected_fixed_tb);
use SndbufTune::Checks;

my $fixed = 256 * 1024;

my $srv = standalone(name => 'redirect', modules => ['rewrite'],
                     body => <<'CONF');
SndbufTune auto
<Directory "@DOCROOT@/gen/redir/auto">
    RewriteEngine on
    RewriteRule ^tofixed/(.*)$ /gen/redir/fixed/$1 [PT]
    ErrorDocument 404 /gen/redir/fixed/notfound-big.bin
</Directory>
<Location /gen/redir/fixed/>
    SndbufTune 256k
    ErrorDocument 404 /gen/redir/auto/notfound-big.bin
</Location>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

plan tests => 8;

# The access log (the final request's notes) for the response on $c's
# connection; as effective, what the kernel still shows (the connection
# is open, nothing has changed it since).
sub logged_as_kernel_ok {
    my ($c, $label, %want) = @_;
    my $e = logged_ok($srv, $c, $label, %want);
    my $v = view_of($c);
    is($e->{effective}, $v && $v->{tb}, "$label: logged effective == ss tb");
    return $e;
}

# The whole download; the final request is fixed by the <Location>.
sub fixed_download_ok {
    my ($path, $status) = @_;
    my $want = expected_fixed_tb($fixed);
    my $c = download_ok(port => $port, host => 'localhost', path => $path,
                        status => $status, policy => 'fixed',
                        bytes => $fixed, check => sub {
        my $c = shift;
        fixed_ok($c, $fixed, $path);
        # most of the body: whatever resizes during the response has
        # had its chance by now
        $c->read_body($c->remaining - 1024 * 1024);
        my $v = view_of($c);
        log_view("$path, most of the body read", $v);
        is($v && $v->{tb}, $want,
           "$path: tb still $want with 1 MiB of the body left");
    });
    logged_as_kernel_ok($c, $path, policy => 'fixed', requested => $fixed,
                        effective => $want,
                        rule => qr{^<Location /gen/redir/fixed/> at \S+:\d+$});
}

subtest 'RewriteRule [PT] from auto into a fixed <Location>' => sub {
    fixed_download_ok('/gen/redir/auto/tofixed/big.bin', 200);
};

subtest 'ErrorDocument under a fixed <Location>, from an auto 404' => sub {
    fixed_download_ok('/gen/redir/auto/missing', 404);
};

subtest 'ErrorDocument in the auto directory, from a fixed 404' => sub {
    my $path = '/gen/redir/fixed/missing';
    my $tb;
    my $c = download_ok(port => $port, host => 'localhost', path => $path,
                        status => 404, check => sub {
        my $c = shift;
        $c->read_body($c->remaining - 1024 * 1024);
        my $v = view_of($c);
        log_view("$path, most of the body read", $v);
        $tb = $v && $v->{tb};
        lock_bit_is($v, 1, "$path: auto's size is locked");
    });
    my $e = logged_as_kernel_ok($c, $path, policy => 'auto',
                                rule => qr{^server config at \S+:\d+$});
    is($e->{effective}, 2 * ($e->{requested} // 0),
       "$path: effective == 2 x requested");
    isnt($tb, expected_fixed_tb($fixed),
         "$path: not the first request's fixed 256k");
};

$srv->stop;

my $none = standalone(name => 'redirect_none',
                      modules => ['rewrite', 'actions'], body => <<'CONF');
Header always set X-Sndbuf-Rule "%{SNDBUF_TUNE_RULE}e"
AcceptPathInfo On
Action sbt-action /gen/big.bin virtual
<Directory "@DOCROOT@/gen/redir/fixed">
    RewriteEngine on
    RewriteRule ^tonone/(.*)$ /gen/$1 [PT]
    RewriteRule ^tosaidnone/(.*)$ /gen/redir/auto/$1 [PT]
</Directory>
<Location /gen/redir/auto/>
    SndbufTune none
</Location>
<Location /gen/redir/fixed/>
    SndbufTune 256k
    ErrorDocument 404 /gen/big.bin
</Location>
<Location /gen/redir/fixed/action/>
    SetHandler sbt-action
</Location>
CONF
$none->start or BAIL_OUT('standalone server: ' . $none->error);

for my $case (['ErrorDocument 404 to a file no SndbufTune covers',
               '/gen/redir/fixed/missing', 404],
              ['per-directory RewriteRule to a file no SndbufTune covers',
               '/gen/redir/fixed/tonone/big.bin', 200],
              ['Action to a file no SndbufTune covers',
               '/gen/redir/fixed/action/x', 200]) {
    my ($name, $path, $status) = @$case;
    subtest $name => sub {
        my $c = download_ok(port => $none->port, host => 'localhost',
                            path => $path, status => $status,
                            policy => 'fixed', bytes => $fixed);
        logged_ok($none, $c, $path, policy => 'fixed',
                          requested => $fixed,
                          effective => expected_fixed_tb($fixed),
                          rule => qr{^<Location /gen/redir/fixed/> at \S+:\d+$});
    };
}

subtest 'RewriteRule to a <Location> that says none' => sub {
    my $path = '/gen/redir/fixed/tosaidnone/notfound-big.bin';
    my $c = download_ok(port => $none->port, host => 'localhost',
                        path => $path, policy => 'none', check => sub {
        fixed_ok($_[0], $fixed, "$path: the first request's size, left");
    });
    logged_ok($none, $c, $path, policy => 'none');
};

# The environment (what CGI and SSI get, as mod_headers reads it here)
# names the rule without the configuration file's path; the note (the
# access log) keeps file:line.
subtest 'SNDBUF_TUNE_RULE in the environment: no file path' => sub {
    my $path = '/gen/redir/fixed/big.bin';
    my $c = download_ok(port => $none->port, host => 'localhost',
                        path => $path, policy => 'fixed', bytes => $fixed);
    is($c->header('X-Sndbuf-Rule'), '<Location /gen/redir/fixed/>',
       'environment: the rule, without file:line');
    logged_ok($none, $c, $path,
              rule => qr{^<Location /gen/redir/fixed/> at /\S+:\d+$});
};

$none->stop;
