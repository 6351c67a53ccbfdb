# Whom does auto count in a flow's crowd (sndbuf_path.c)? This server's
# other flows whose responses are under way: a connection's slot goes as
# its response ends, so an idle keep-alive connection, or a crowd that has
# just ended, is no one's crowd. One apache2 process, auto, and the looks
# as LogLevel sndbuf_tune:trace3 prints them (members=):
#   - A downloads a file whole and stays open (keep-alive, idle); then B,
#     a new connection, downloads it: no look of B's counts a member.
#   - C and D download at once, read in turns.
#   - Right after C and D end, E downloads alone: no look of E's counts a
#     member.
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

plan tests => 15;

# The looks of the connection from client port $cport: their members=.
sub looks {
    my $cport = shift;
    return map { /\bmembers=(\d+) / ? $1 : () }
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
    note(scalar(@l) . " looks of $name; a member in " . grep { $_ } @l);
    return ($c, @l);
}

my ($a) = alone('A');
my ($b, @b) = alone('B');
ok(scalar(@b), 'B looked');
is(scalar(grep { $_ } @b), 0,
   'B counted no member: A, open but idle, is no one\'s crowd');

# Read in turns, under way at once (on loopback their smoothed RTTs are
# too noisy to say whether they count each other: t/unit/path_cases.c
# says when flows do).
my ($c, $d) = (open_download(), open_download());
for (1 .. BIG_SIZE / (1 << 20)) {
    $_->read_body(1 << 20) for $c, $d;
}
$_->finish_body for $c, $d;
$srv->access_entry_for($_->local_port, 10) for $c, $d;
note(scalar(map { looks($_->local_port) } $c, $d) . ' looks of C and D');

my ($e, @e) = alone('E');
ok(scalar(@e), 'E looked');
is(scalar(grep { $_ } @e), 0,
   'E, alone right after the crowd of C and D, counted no member');
$_->close for $a, $b, $c, $d, $e;
