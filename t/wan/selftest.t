# The WAN lab's own accuracy check, `t/wan/selftest --quick`, as tests:
# each of its PASS/FAIL lines is one test (RTT, goodput, loss, client
# addresses and a sub-link against the lab's settings), its figures are
# notes, and its exit status is one more. Rate steps and traces, which
# only the bench uses, are left to make bench (the full self-test). Needs root
# and /dev/net/tun (skips otherwise; fails instead when $CI is set).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Util qw(top_dir);
use SndbufTune::WanLab qw(plan_lab_or_skip);

plan_lab_or_skip();

my $selftest = top_dir() . '/t/wan/selftest';
open my $out, '-|', "$selftest --quick 2>&1" or die "$selftest: $!";
while (my $line = <$out>) {
    chomp $line;
    if ($line =~ /^\s*(\S.*?)\s+(PASS|FAIL)(?: \((.*)\))?$/) {
        ok($2 eq 'PASS', $1) or diag($3 // 'failed');
    }
    else {
        note($line);
    }
}
close $out;
is($? >> 8, 0, 't/wan/selftest --quick exits 0');
done_testing;
