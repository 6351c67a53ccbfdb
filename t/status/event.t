# The status page and its counters under the event MPM (SndbufTune::Status
# says what is checked).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Status ();

SndbufTune::Status::run_mpm('event');
done_testing;
