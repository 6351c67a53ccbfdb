# SndbufTune auto on a generated response: mod_lua writes it in 16 KiB
# blocks, so auto's filter sees one brigade per block and cuts each (the
# limits hold the buffer at 64k, whose chunks are auto's 16 KiB minimum).
# On a separate apache2 instance, one process:
#   a 3.2 GiB stream    whole, under auto; the worker's memory stays flat
#                       (a brigade allocated per cut stayed in the
#                       request's pool until its end: 3.7-12.5 MiB)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use File::Temp ();
use Time::HiRes ();
use SndbufTune::Setup qw(standalone);
use SndbufTune::Util qw(modules_dir);

use constant BLOCK  => 16384;
use constant BLOCKS => 200_000;
# What the stream may add to the worker's resident memory: 0.2-0.3 MiB
# measured; 3.7-12.5 MiB with a brigade per cut (the less, the sooner
# auto stopped cutting: the hand-over a cut at a brigade's end set off).
use constant GROWTH_KIB => 2048;

my $lua = modules_dir() . '/mod_lua.so';
plan tests => 4, need({ 'mod_lua' => -f $lua });

# Where the children (another user) can read it: the server's directory
# may be in a clone under a directory only root can enter.
my $lua_dir = File::Temp->newdir('sbt-lua-XXXXXX', TMPDIR => 1);
chmod 0755, "$lua_dir" or die "chmod $lua_dir: $!";
my $script = "$lua_dir/stream.lua";
my $srv = standalone(name => 'auto_stream', modules => ['lua'],
                     threads => 4, processes => 1,
                     tokens => { SCRIPT => $script }, body => <<'CONF');
SndbufTune auto
SndbufTuneLimits 8k 64k
LuaMapHandler ^/stream$ @SCRIPT@ handle
CONF
open my $fh, '>', $script or die "$script: $!";
print $fh <<'LUA';
local block = string.rep("x", 16384)
function handle(r)
    r.content_type = "application/octet-stream"
    for i = 1, tonumber(r.args) do
        r:write(block)
    end
    return apache2.OK
end
LUA
close $fh;
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);

sub rss_kib {
    my $kib = 0;
    for my $pid ($srv->child_pids) {
        open my $st, '<', "/proc/$pid/status" or next;
        while (<$st>) {
            $kib += $1 if /^VmRSS:\s+(\d+)/;
        }
    }
    return $kib;
}

# warm: the process's pools, Lua's state and the lock are made
`curl -s -o /dev/null '${\ $srv->url('/stream?64') }'`;
my $base = rss_kib();
cmp_ok($base, '>', 0, 'the worker process found') or BAIL_OUT('no worker');
my $peak = $base;
my $out = $srv->dir . "/curl.out";
my $pid = fork // die "fork: $!";
if (!$pid) {
    exec 'sh', '-c', "curl -s -o /dev/null -w '%{http_code} %{size_download}' "
        . "'${\ $srv->url('/stream?' . BLOCKS) }' > $out";
}
while (waitpid($pid, 1) == 0) {
    my $now = rss_kib();
    $peak = $now if $now > $peak;
    Time::HiRes::sleep(0.05);
}
my $got = do { local (@ARGV, $/) = $out; <> } // '';
is($got, '200 ' . BLOCK * BLOCKS, 'the stream arrived whole');

my ($entry) = grep { ($_->{uri} // '') eq '/stream' && $_->{bytes}
                     && $_->{bytes} == BLOCK * BLOCKS } $srv->access_entries;
is($entry && $entry->{policy}, 'auto', 'under auto');

SKIP: {
    # ASan keeps freed memory in quarantine: resident memory grows anyway
    skip 'sanitizer build: its allocator holds freed memory', 1
        if $ENV{SBT_HTTPD_PRELOAD};
    cmp_ok($peak - $base, '<', GROWTH_KIB,
           sprintf('worker memory over the stream: %d KiB, from %d KiB',
                   $peak - $base, $base));
}

$srv->stop;
