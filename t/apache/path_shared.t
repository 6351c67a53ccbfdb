# When does auto take a path to be shared (sndbuf_path.c)? Only while
# another connection's response to the same client is under way: that is
# when a queue may be theirs and this flow's (a crowd's queue steers each
# flow; a flow alone never steers by a queue, and is not locked below its
# window). One apache2 process (the table is per process), auto, and the
# looks as LogLevel sndbuf_tune:trace3 prints them (path=, shared=):
#   - A downloads a file whole and stays open (keep-alive, idle); then B,
#     a new connection, downloads it: B consulted the path and never took
#     it for shared. The module before sbt_path_leave paired B's first
#     looks with A's last, within 2 s, and said shared=1.
#   - C and D download at once, read in turns: some look says shared=1
#     (the checks above and below can fail).
#   - Right after C and D end, E downloads alone: it never took the path
#     for shared. The module of 8c43696 kept a path shared for 2 s after
#     the last two looks of a crowd, and said shared=1 in E's first looks.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(BIG_PATH BIG_SIZE BIG_SHA256 standalone);
use SndbufTune::StallClient;

my $srv = standalone(name => 'path', processes => 1,
                     log_level => 'info sndbuf_tune:trace3', body => <<'CONF');
<VirtualHost *:@PORT@>
    ServerName path.test
    SndbufTune auto
</VirtualHost>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;

plan tests => 16;

# The looks of the connection from client port $cport: [path, shared].
sub looks {
    my $cport = shift;
    return map { /\bpath=(\d+) shared=([01])\b/ ? [$1, $2] : () }
           grep { /\[client [^\]]*:\Q$cport\E\] SndbufTune auto look: / }
           split /\n/, $srv->log_text;
}

sub open_download {
    my $c = SndbufTune::StallClient->new(port => $port);
    is($c->request(BIG_PATH, 'path.test'), 200, 'status 200');
    return $c;
}

# One download, alone and read whole, on a new connection named $name,
# left open; returns the connection and its looks.
sub alone {
    my $name = shift;
    my $c = open_download();
    my ($len, $sha) = $c->finish_body;
    ok($len == BIG_SIZE && $sha eq BIG_SHA256, "$name: whole body");
    # httpd logs the request as its response ends, just before its pool
    # (and with it the path's note of this connection) goes.
    ok($srv->access_entry_for($c->local_port, 10), "$name: logged");
    my @l = looks($c->local_port);
    note(scalar(@l) . " looks of $name; shared=1 in " . grep { $_->[1] } @l);
    return ($c, @l);
}

my ($a) = alone('A');
my ($b, @b) = alone('B');
ok((grep { $_->[0] } @b), 'B looked at its path (path= its minimum RTT)');
is(scalar(grep { $_->[1] } @b), 0,
   'B never took the path for shared: A, open but idle, shares nothing');

my ($c, $d) = (open_download(), open_download());
for (1 .. BIG_SIZE / (1 << 20)) {
    $_->read_body(1 << 20) for $c, $d;
}
$_->finish_body for $c, $d;
$srv->access_entry_for($_->local_port, 10) for $c, $d;
my @cd = map { looks($_->local_port) } $c, $d;
ok((grep { $_->[1] } @cd), 'C and D, under way at once, shared the path');

my ($e, @e) = alone('E');
ok(scalar(@e), 'E looked');
is(scalar(grep { $_->[1] } @e), 0,
   'E, alone right after the crowd of C and D, never took the path for '
   . 'shared');
$_->close for $a, $b, $c, $d, $e;
