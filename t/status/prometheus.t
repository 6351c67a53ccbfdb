# A real Prometheus scrapes the metrics of a test apache2, whose names
# include ones an inexact encoding would merge (SndbufTune::Status's
# run_prometheus has the named checks: the count below).  Skipped without
# the prometheus binary, except under CI, where it must be installed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Status ();

my $bin = SndbufTune::Status::prometheus_bin();
plan skip_all => 'no prometheus (apt-get install prometheus)'
    unless $bin || $ENV{CI};
plan tests => 1 + 30 + 1;
ok($bin, 'the prometheus binary is on the PATH') or exit 1;
ok(SndbufTune::Status::run_prometheus($bin),
   'prometheus scraped, was queried and stopped; apache2 stopped');
