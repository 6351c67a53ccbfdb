# A real Prometheus scrapes the metrics of a test apache2 (SndbufTune::Status
# says what is checked).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Status ();

SndbufTune::Status::run_prometheus();
done_testing;
