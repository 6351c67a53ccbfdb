# Restarts under load under the event MPM: downloads over HTTP/1.1, h2c
# and TLS h2 through 10 graceful and 2 full restarts (SndbufTune::Restarts
# says what is checked).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Restarts ();

SndbufTune::Restarts::run('event');
done_testing;
