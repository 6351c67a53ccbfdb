# <Files> decides for the file mod_dir and mod_negotiation choose, as for
# the same file named in the URL. On a separate apache2 instance (with
# mod_dir and mod_negotiation), in a directory with SndbufTune 64k:
#   <Files "index.html"> SndbufTune 1m, <Files "page.html"> SndbufTune 512k
#   /gen/index/             DirectoryIndex index.html  -> fixed 1m
#   /gen/index/index.html                              -> fixed 1m
#   /gen/index/page         MultiViews: page.html      -> fixed 512k
#   /gen/index/page.html                               -> fixed 512k
#   /gen/index/neg/         DirectoryIndex page, negotiated to page.html
#                                                      -> fixed 512k
#   /gen/index/big.bin      the directory's own        -> fixed 64k
# mod_dir picks the index in a late fixup and copies its subrequest into
# the request (ap_internal_fast_redirect: no fixups run again), so only a
# decision taken after the fixups sees the file's <Files>. (MultiViews
# alone chooses earlier, in a type_checker hook; behind a DirectoryIndex
# it chooses inside mod_dir's subrequest.) Each download
# is checked in the kernel (tb, lock) and in the access log (policy, rule).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(standalone);
use SndbufTune::Checks;

my @cases = (
    ['/gen/index/',           1024 * 1024, 'index.html'],
    ['/gen/index/index.html', 1024 * 1024, 'index.html'],
    ['/gen/index/page',       512 * 1024,  'page.html'],
    ['/gen/index/page.html',  512 * 1024,  'page.html'],
    ['/gen/index/neg/',       512 * 1024,  'page.html'],
    ['/gen/index/big.bin',    64 * 1024,   undef],
);

my $srv = standalone(name => 'index_files', modules => [qw(dir negotiation)],
                     body => <<'CONF');
<Directory "@DOCROOT@/gen/index">
    Options +MultiViews
    DirectoryIndex index.html
    SndbufTune 64k
    <Files "index.html">
        SndbufTune 1m
    </Files>
    <Files "page.html">
        SndbufTune 512k
    </Files>
</Directory>
<Directory "@DOCROOT@/gen/index/neg">
    DirectoryIndex page
</Directory>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

plan tests => scalar @cases;

for my $case (@cases) {
    my ($path, $bytes, $file) = @$case;
    subtest "$path: fixed $bytes" => sub {
        my $c = download_ok(port => $port, host => 'localhost', path => $path,
                            label => $path, policy => 'fixed',
                            bytes => $bytes);
        logged_ok($srv, $c, $path, policy => 'fixed', requested => $bytes,
                  rule => $file ? qr{^<Files "\Q$file\E"> at \S+:\d+$}
                                : qr{^<Directory "\S+/gen/index"> at \S+:\d+$});
    };
}

$srv->stop;
