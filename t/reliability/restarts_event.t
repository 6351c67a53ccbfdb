# Restarts under load under the event MPM: downloads over HTTP/1.1, h2c
# and TLS h2 through 10 graceful and 2 full restarts (SndbufTune::Restarts
# says what each check is), in phases that each make a fixed number of
# checks; each phase passes only if all of its checks did.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

# Each phase's checks (SndbufTune::Restarts), and one for the phase:
# start 3, 10 graceful restarts 5 each, 2 full restarts 9 each, finish 6.
use Test::More tests => (3 + 1) + 10 * (5 + 1) + 2 * (9 + 1) + (6 + 1);
use SndbufTune::Restarts ();

my @events = @SndbufTune::Restarts::EVENTS;
ok(SndbufTune::Restarts::start('event'),
   'event: server, status page and clients up') or exit 1;
for my $i (0 .. $#events) {
    ok(SndbufTune::Restarts::event($i),
       "event: $events[$i] ${\ ($i + 1)}: every check passed");
}
ok(SndbufTune::Restarts::finish(),
   'event: downloads whole, counters exact, error log clean, stopped');
