# apache2 -k restart under the event MPM with slow HTTP/1.1 auto downloads
# in flight, ten times: every child must exit at the first SIGTERM, as
# stock httpd's do (no AH00045 "still did not exit"). See
# SndbufTune::Restarts (auto_inflight_*).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

# Each phase's checks (SndbufTune::Restarts), and one for the phase:
# start 1, 10 rounds 5 each, stop 1.
use Test::More tests => (1 + 1) + 10 * (5 + 1) + (1 + 1);
use SndbufTune::Restarts ();

ok(SndbufTune::Restarts::auto_inflight_start('event'), 'event: server up')
    or exit 1;
for my $round (1 .. 10) {
    ok(SndbufTune::Restarts::auto_inflight_round($round),
       "event: restart $round with 8 auto downloads in flight: no child "
       . 'outlived the first SIGTERM') or last;
}
ok(SndbufTune::Restarts::auto_inflight_stop(), 'event: stopped');
