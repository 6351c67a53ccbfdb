# HTTP/2 under load, for the sanitizer runs (t/sanitized asan|tsan; it
# passes on the ordinary build too). h2load opens CLIENTS connections with
# STREAMS concurrent streams each, over h2c and then over TLS, to a mix of
# fixed, unset and auto locations, of a directory whose .htaccess says
# SndbufTune 128k (parsed in each request's thread, where the module must
# write nothing shared) and of the vhosts' own default (none on the plain
# port, 64k on TLS), files of 1 kB to 8 MB. Meanwhile curl
# downloads every file from every location over the same transport and
# checks its SHA-256. Then:
#   - h2load: every request done and 2xx, none failed, errored or timed
#     out, and exactly the bytes of the files it asked for;
#   - the access log: one entry per request, the policy of its location,
#     status 200 and the file's size;
#   - the error log: no child died of a signal;
#   - stop: no process of the server left.
# Then h2c Upgrade: UPGRADES connections one after the other, each an
# HTTP/1.1 GET of an 8 MB file (from each location in turn) upgraded to
# h2c (stream 1), with every location's 8m, 1m and 256k files as 12 more
# streams in flight at once (SndbufTune::StallClient::h2c_upgrade_get):
# each stream 200 and the file (size and SHA-256); the access log has the
# 13 streams' entries and the upgrade request's own (status 101, no bytes,
# the location's policy), which httpd logs on the primary connection.
# The streams of a connection share its primary's per-connection state:
# under ThreadSanitizer this is where an access outside the module's
# mutex shows up.
# Before all that, .htaccess: four connections each ask for a file of the
# directory whose .htaccess says SndbufTune 128k and hold the request's
# body back, so that httpd parses the .htaccess (the socket's lock in ss
# shows it) and waits in the handler: the thread whose parse was the
# first of its child synchronises with no other from then on. Then 50 new
# connections ask for the file over HTTP/1.1: under ThreadSanitizer,
# anything shared that a parse writes is a data race in each child that
# holds such a request. Each request: 200 and the whole file.
#
# Environment: SBT_STRESS_CLIENTS (default 50), SBT_STRESS_STREAMS
# (default 100; each connection makes that many requests, all in flight
# at once), SBT_STRESS_BIG (the count of 8 MB files in each connection's
# 100 URIs, default 4, one per location), SBT_STRESS_UPGRADES (h2c
# Upgrade connections, default 10; 0: none).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use List::Util qw(shuffle sum);
use POSIX ();
use Test::More;
use SndbufTune::Kernel qw(expected_fixed_tb ss_view);
use SndbufTune::Reliability ();
use SndbufTune::StallClient ();
use SndbufTune::Util qw(capture poll_until);

my $CLIENTS = $ENV{SBT_STRESS_CLIENTS} || 50;
my $STREAMS = $ENV{SBT_STRESS_STREAMS} || 100;
my $UPGRADES = $ENV{SBT_STRESS_UPGRADES} // 10;

# Under CI (this file is the whole TSan run) a missing h2load fails.
my $have_h2load = !system('sh', '-c', 'command -v h2load >/dev/null');
plan skip_all => 'h2load not found (apt-get install nghttp2-client)'
    unless $have_h2load || $ENV{CI};
ok($have_h2load, 'h2load is on the PATH') or BAIL_OUT('no h2load under CI');

my %SIZE = ('1k' => 1000, '16k' => 16 * 1024, '256k' => 256 * 1024 + 3,
            '1m' => 1 << 20, '8m' => 8 << 20);

my $lab = SndbufTune::Reliability->new(
    name => 'h2stress', sizes => \%SIZE, threads => 25, processes => 2,
    htaccess => 1,
    # every stream of a connection may be in flight at once
    conf => "H2MaxSessionStreams $STREAMS\n");
my @WHERE = $lab->where;

# Each connection's URIs: for each location, 8m once, 1m twice, 256k 4
# times, 16k 8 times and 1k 10 times (25 URIs), shuffled the same way each
# run; repeated or cut to STREAMS. About 45 MB per connection.
my %COUNT = ('8m' => 1, '1m' => 2, '256k' => 4, '16k' => 8, '1k' => 10);
srand 8;
my @MIX = shuffle map { my $w = $_; map { [$w, $_] } map { ($_) x $COUNT{$_} }
                        sort keys %COUNT } @WHERE;
ok($lab->start, 'server starts (event MPM, h2c and TLS h2)')
    or BAIL_OUT($lab->srv->error);

my $tmp = File::Temp->newdir('sbt-h2stress-XXXXXX', TMPDIR => 1);

subtest '.htaccess: parsed beside requests that wait for their body' => sub {
    my ($held, $burst, $path) = (4, 50, '/htaccess/16k.bin');
    my $tb = expected_fixed_tb(128 << 10);
    my $log_from = -s $lab->srv->access_log;
    my @held = map { SndbufTune::StallClient->new(port => $lab->srv->port) }
        1 .. $held;
    $_->send_request(path => $path, host => 'localhost', held => 'x')
        for @held;
    for my $c (@held) {
        my ($v) = poll_until(30, sub {
            my $v = ss_view($lab->srv->port, $c->local_port);
            $v && $v->{tb} == $tb ? $v : undef;
        }, 0.05);
        ok($v, 'held request from port ' . $c->local_port . ': .htaccess '
           . "parsed, its socket locked at tb $tb");
    }
    my ($rc, $out) = capture('h2load', '--h1', '-c', $burst, '-n', $burst,
                             $lab->srv->url($path));
    my $n = h2load_numbers($out);
    is_deeply([@$n{qw(done succeeded s2xx)}], [$burst, $burst, $burst],
              "a burst of $burst connections over HTTP/1.1: each 200")
        or diag($out);
    for my $c (@held) {
        my $status = $c->release_body;
        my ($len, $sha) = $c->finish_body;
        is("$status $len $sha", "200 $SIZE{'16k'} " . $lab->sha('16k'),
           'held request from port ' . $c->local_port . ': 200 and the '
           . 'whole file once its body is sent');
    }
    # Each logged, with the .htaccess's policy; and logged before the
    # next subtest counts its own entries (httpd logs a request after its
    # client may have read the whole response).
    my $want = $held + $burst;
    my ($entries) = poll_until(30, sub {
        my @e = grep { ($_->{uri} // '') eq $path }
                $lab->srv->access_entries(from => $log_from);
        return @e >= $want ? \@e : undef;
    }, 0.1);
    $entries ||= [];
    is(scalar(grep { ($_->{policy} // '') eq 'fixed' } @$entries), $want,
       "each of the $want requests logged, policy fixed");
};

# h2load in the background; its output goes to a file.
sub h2load_bg {
    my ($proto, $uris) = @_;
    my $list = "$tmp/$proto.uris";
    open my $fh, '>', $list or die "$list: $!";
    print $fh map { "$_\n" } @$uris;
    close $fh;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', "$tmp/$proto.out";
        open STDERR, '>&', \*STDOUT;
        exec 'timeout', '-k', '10', 600 * ($ENV{SBT_TIMEOUT_SCALE} || 1),
             'h2load', '-c', $CLIENTS, '-m', $STREAMS,
             '-n', $CLIENTS * $STREAMS, '-i', $list
            or POSIX::_exit(127);
    }
    return $pid;
}

sub h2load_numbers {
    my $out = shift;
    my %n;
    @n{qw(total started done succeeded failed errored timeout)} =
        $out =~ /^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/m;
    @n{qw(s2xx s3xx s4xx s5xx)} =
        $out =~ /^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/m;
    ($n{data}) = $out =~ /^traffic: .*\((\d+)\) data$/m;
    return \%n;
}

for my $proto (qw(h2c h2tls)) {
    subtest "$proto: $CLIENTS connections x $STREAMS streams" => sub {
        my @uris = map { $lab->url($proto, @{ $MIX[$_ % @MIX] }) }
            0 .. $STREAMS - 1;
        my $want_bytes = $CLIENTS * sum(map { $SIZE{ $MIX[$_ % @MIX][1] } }
                                        0 .. $STREAMS - 1);
        my $log_from = -s $lab->srv->access_log;
        my $pid = h2load_bg($proto, \@uris);

        # every file from every location, whole, while h2load runs
        my @bad;
        for my $where (@WHERE) {
            for my $name (sort keys %SIZE) {
                my ($ok, $why) = $lab->download($proto, $where, $name);
                push @bad, "/$where/$name.bin: $why" unless $ok;
            }
        }
        ok(!@bad, "$proto: curl downloads under load arrive whole (SHA-256)")
            or diag(join "\n", @bad);

        waitpid $pid, 0;
        my $rc = $? >> 8;
        my $out = do { local (@ARGV, $/) = "$tmp/$proto.out"; <> } // '';
        is($rc, 0, "$proto: h2load exit 0") or diag($out);
        my $n = h2load_numbers($out);
        my $N = $CLIENTS * $STREAMS;
        is_deeply([@$n{qw(done succeeded failed errored timeout s2xx)}],
                  [$N, $N, 0, 0, 0, $N],
                  "$proto: h2load: $N done, succeeded and 2xx; none failed,"
                  . " errored or timed out") or diag($out);
        is($n->{data}, $want_bytes, "$proto: h2load received every byte")
            or diag($out);

        # the access log: every request, with its location's policy
        my $want = $N + @WHERE * keys %SIZE;
        my ($entries) = poll_until(30, sub {
            my @e = $lab->srv->access_entries(from => $log_from);
            return @e >= $want ? \@e : undef;
        }, 0.1);
        $entries ||= [$lab->srv->access_entries(from => $log_from)];
        is(scalar @$entries, $want, "$proto: one access log entry per request");
        my @wrong = grep {
            my ($where, $name) = ($_->{uri} // '') =~ m{^/(\w+)/(\w+)\.bin$};
            !$where || ($_->{status} // '') ne '200'
                || ($_->{bytes} // '') ne $SIZE{$name}
                || ($_->{policy} // '') ne $lab->policy($proto, $where);
        } @$entries;
        ok(!@wrong, "$proto: each entry: 200, the file's size, its "
           . "location's policy") or diag(join "\n", map {
               join ' ', map { "$_=" . ($wrong[0]{$_} // '-') }
                   qw(uri status bytes policy)
           } @wrong[0 .. ($#wrong > 4 ? 4 : $#wrong)]);
        my %policies;
        $policies{ $_->{policy} // '-' }++ for @$entries;
        diag("$proto: policies: "
             . join(', ', map { "$_ $policies{$_}" } sort keys %policies));
    };
}

# h2c Upgrade: stream 1 is the HTTP/1.1 request the connection upgraded
# with; httpd logs it (101) in the primary connection's own thread.
my @PARALLEL = map { my $w = $_; map { "/$w/$_.bin" } qw(8m 1m 256k) } @WHERE;
subtest "h2c Upgrade: $UPGRADES connections x " . (1 + @PARALLEL) . " streams"
    => sub {
    plan skip_all => 'SBT_STRESS_UPGRADES=0' unless $UPGRADES;
    my $log_from = -s $lab->srv->access_log;
    my (@bad, @want);
    for my $i (0 .. $UPGRADES - 1) {
        my $where = $WHERE[$i % @WHERE];
        my @paths = ("/$where/8m.bin", @PARALLEL);
        my @got = eval {
            SndbufTune::StallClient->new(port => $lab->srv->port)
                ->h2c_upgrade_get(\@paths);
        };
        push @bad, "connection $i: $@" unless @got;
        for my $r (@got) {
            my ($name) = $r->{path} =~ m{/(\w+)\.bin$};
            push @bad, "connection $i, $r->{path}: status "
                . ($r->{status} // '-') . ", $r->{bytes} bytes (want "
                . "$SIZE{$name}), " . ($r->{error} // 'END_STREAM')
                unless $r->{ok} && $r->{bytes} == $SIZE{$name}
                    && $r->{sha256} eq $lab->sha($name);
        }
        push @want, "/$where/8m.bin 101 0 " . $lab->policy('h2c', $where),
            map {
                my ($w, $name) = m{^/(\w+)/(\w+)\.bin$};
                "$_ 200 $SIZE{$name} " . $lab->policy('h2c', $w);
            } @paths;
    }
    ok(!@bad, 'h2c Upgrade: every stream 200 with the whole file '
       . '(size, SHA-256)') or diag(join "\n", @bad[0 .. ($#bad > 9 ? 9 : $#bad)]);

    my ($entries) = poll_until(30, sub {
        my @e = $lab->srv->access_entries(from => $log_from);
        return @e >= @want ? \@e : undef;
    }, 0.1);
    $entries ||= [$lab->srv->access_entries(from => $log_from)];
    is_deeply([sort map {
                  join ' ', map { $_ // '-' } @$_{qw(uri status)},
                      $_->{bytes} // 0, $_->{policy} // '-';
              } @$entries],
              [sort @want],
              'h2c Upgrade: the access log has each stream (200, the '
              . "file's size, its location's policy) and each upgrade "
              . 'request (101, 0 bytes)');
};

is_deeply([$lab->log_lines($SndbufTune::Reliability::CRASH_RE)], [],
          'error log: no child died of a signal');
ok($lab->srv->stop, 'stop: no process of the server left')
    or diag($lab->srv->error);
done_testing;
