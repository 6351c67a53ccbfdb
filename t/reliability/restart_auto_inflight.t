# apache2 -k restart under the event MPM with slow HTTP/1.1 auto downloads
# in flight, ten times: every child must exit at the first SIGTERM, as
# stock httpd's do (no AH00045 "still did not exit"). See
# SndbufTune::Restarts::run_auto_inflight.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Restarts ();

SndbufTune::Restarts::run_auto_inflight('event', 10);
done_testing;
