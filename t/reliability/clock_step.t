# The wall clock steps back an hour in the middle of an auto download (a
# VM resume, `chronyc makestep`): auto must go on looking. Every interval
# the module times runs on the monotonic clock; a wall-clock one would
# wait out the hour before the next look. t/helpers/clockstep.c steps the
# server's wall clock (gettimeofday, CLOCK_REALTIME, never the monotonic
# one) once this test creates a file, after auto's first looks. The
# client holds the download to 8 MB/s, so it goes on for seconds after.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Time::Local ();

use SndbufTune::Server ();
use SndbufTune::Util qw(preload_library poll_until exit_on_signals);

exit_on_signals();
my $shim = preload_library('clockstep')
    or plan skip_all => "no LD_PRELOAD library: $@";
plan tests => 5;

my $step_by = 3600;
my $srv = SndbufTune::Server->new(name => 'clockstep',
    log_level => 'info sndbuf_tune:trace2',
    body => qq{ErrorLogFormat "%{cu}t %M"\nSndbufTune auto\n});
my $step = $srv->dir . '/step';
$srv->add_random_file('/big.bin', 32 << 20);
{
    local $ENV{SBT_HTTPD_PRELOAD} = $shim;
    local $ENV{SBT_CLOCKSTEP_FILE} = $step;
    local $ENV{SBT_CLOCKSTEP_BY} = $step_by;
    $srv->start or BAIL_OUT($srv->error);
}
my $pid = open(my $curl, '-|', 'curl', '-sS', '--limit-rate', '8M', '-o',
               '/dev/null', '-w', '%{size_download}', $srv->url('/big.bin'))
    or BAIL_OUT("curl: $!");
poll_until(10, sub { $srv->log_text =~ /SndbufTune auto look/ });
open my $fh, '>', $step or BAIL_OUT("$step: $!");
close $fh;
my $size = do { local $/; <$curl> };
close $curl;
is($?, 0, 'the download completed');
is($size, 32 << 20, 'whole');

# "2026-12-06 03:30:01.123456 SndbufTune auto look: ..."
my (@before, @after, $first);
for (split /\n/, $srv->log_text) {
    next unless /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+)\.\d+ SndbufTune auto look/;
    my $t = Time::Local::timegm($6, $5, $4, $3, $2 - 1, $1);
    $first //= $t;
    push @{ $t < $first - $step_by / 2 ? \@after : \@before }, $t;
}
cmp_ok(scalar @before, '>', 0, 'auto looked before the step');
cmp_ok(scalar @after, '>', 0, 'auto looked after the wall clock stepped '
       . 'back an hour') or diag 'looks before the step: ' . @before;
ok($srv->stop, 'stopped') or diag $srv->error;
