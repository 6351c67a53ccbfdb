# The status page and its counters under the prefork MPM, against one apache2,
# in phases: each is the SndbufTune::Status subroutine of that name, with
# its own named checks (the counts below); this file runs them in order
# and checks that each got to its end.  A phase that cannot go on ends
# the file early, which the plan then reports too.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More tests => 3 + 7 + 114 + 192 + 183 + 3 + 6;
use SndbufTune::Status ();

my $mpm = 'prefork';
my $N = SndbufTune::Status::mpm_server($mpm);

# 3: configuration 1 is valid, starts, ?auto answers
my $gen1 = SndbufTune::Status::start_gen1($mpm);
ok($gen1, "$mpm: configuration 1 serves") or exit 1;
# 7: Require, 404 without SetHandler, 405 for POST, HEAD, mod_status ?auto
ok(SndbufTune::Status::access_and_formats($mpm),
   "$mpm: access control and formats");
# 114: a load from several clients; counters per vhost, policy and rule in
# every format, odd names, (other), mod_status's section
ok(SndbufTune::Status::load_gen1($mpm, $N), "$mpm: load 1 counted")
    or exit 1;
# 192: apache2 -k graceful into a reordered configuration; counters kept
ok(SndbufTune::Status::graceful_gen2($mpm, $N, $gen1),
   "$mpm: graceful restart keeps the counters") or exit 1;
# 183: apache2 -k restart; counters start over
ok(SndbufTune::Status::restart_gen3($mpm, $gen1),
   "$mpm: full restart zeroes the counters") or exit 1;
# 3: apache2 -k stop, no crash in the error log
ok(SndbufTune::Status::stop_mpm($mpm), "$mpm: stopped, no process left");
