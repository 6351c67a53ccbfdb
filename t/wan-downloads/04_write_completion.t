# `SndbufTune auto` under the event MPM holds no worker once the handler
# has returned: the MPM writes the rest of each response in write
# completion, and auto still follows each connection from there.
#
# 24 downloads of 8 MB at once over the WAN lab (50 Mbit/s, 100 ms RTT,
# about 30 s: long enough for several status polls on a busy machine),
# from a server with 16 worker threads (MaxRequestWorkers 16): while every
# download is still running, mod_status (polled through the path) shows
#   - BusyWorkers below MaxRequestWorkers (16) in every poll: a module
#     that keeps a worker per download holds all 16 (24 downloads) in
#     every poll; and at most 2 (the worker answering the poll, plus one)
#     in the median poll, as without the module;
#   - ConnsAsyncWriting above 0 in every poll, at least 90% of the
#     downloads still running in the median poll.
# and afterwards
#   - every download is intact (SHA-256);
#   - at least 90% of them logged SNDBUF_TUNE_RETUNES > 0, and ss saw the
#     send buffer (tb) of at least 90% of their sockets change after every
#     handler had returned: the re-tunes happened in write completion.
# A module that flushes its chunks keeps a worker per download (16 busy,
# no connection in write completion) and fails the first two checks.
# Kernel and server state only; no wall-clock assertions.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use Test::More;
use SndbufTune::Kernel ();
use SndbufTune::Util qw(sha256_file parse_auto);
use SndbufTune::WanLab qw(plan_lab_or_skip tb_changes median);

plan_lab_or_skip();
plan tests => 10;

use constant DOWNLOADS => 24;
use constant SIZE => 8 << 20;

my ($lab, $srv, $sha) = SndbufTune::WanLab->lab_with_server(
    tag => '4', rtt_ms => 100, rate_mbit => 50,
    files => { '/auto/f.bin' => SIZE },
    server => { name => 'wc', threads => 16, processes => 1,
                modules => ['status'], body => <<'EOF' });
ExtendedStatus On
AsyncRequestWorkerFactor 8
<Location /server-status>
    SetHandler server-status
</Location>
<Location /auto/>
    SndbufTune auto
</Location>
EOF

my $status_file = File::Temp->new(TEMPLATE => '/tmp/sbt-wc-status-XXXXXX');

# mod_status's ?auto, fetched through the path: { key => value }.
sub server_status {
    my $r = $lab->curl(url => $srv->url('/server-status?auto'),
                       out => $status_file->filename, max_time => 30);
    open my $fh, '<', $status_file->filename or return {};
    local $/;
    my ($kv) = parse_auto(scalar <$fh>);
    return $kv;
}

my @out = map { File::Temp->new(TEMPLATE => '/tmp/sbt-wc-XXXXXX') }
    1 .. DOWNLOADS;
my @jobs = map { $lab->curl_start(url => $srv->url('/auto/f.bin'),
                                  out => $out[$_]->filename, max_time => 180) }
    0 .. DOWNLOADS - 1;
my %mine = map { $_->{local_port} => 1 } @jobs;

# Poll mod_status and ss, one after the other, until the downloads end.
my (@polls, %tb_after);
my $handlers_done;
while (grep { $lab->curl_running($_) } @jobs) {
    my $running = grep { $lab->curl_running($_) } @jobs;
    my $st = server_status();
    push @polls, { running => $running, busy => $st->{BusyWorkers},
                   writing => $st->{ConnsAsyncWriting} }
        if $running == DOWNLOADS;
    $handlers_done ||= $running == DOWNLOADS && defined $st->{BusyWorkers}
                       && $st->{BusyWorkers} <= 2
                       && ($st->{ConnsAsyncWriting} // 0) > 0;
    next unless $handlers_done;
    for my $s (SndbufTune::Kernel::ss_sockets(ns => $lab->{ns_server},
                                              sport => 80)) {
        push @{ $tb_after{ $s->{pport} } }, [0, $s] if $mine{ $s->{pport} };
    }
}
my @r = map { $lab->curl_wait($_) } @jobs;

# The first poll can come before every request has reached its handler.
shift @polls while @polls > 1 && ($polls[0]{writing} // 0) == 0;
diag(join ' ', map { "busy=$_->{busy} writing=$_->{writing}" } @polls);
cmp_ok(scalar @polls, '>=', 2, 'mod_status polled at least twice while '
       . 'every download ran');
# What the module controls is whether its handler returns with the
# response queued (the connection then waits in write completion) or
# keeps a worker until the last byte: that shows in every poll, as all 16
# workers busy and no connection in write completion. A single poll's
# figures beyond that are the MPM's: the listener hands writable sockets
# to workers for a moment, several at once on a starved CPU, module or
# not (one poll of 30 saw 8 busy under three CPU hogs), and mod_status's
# connection counts are those of the last queue maintenance. So every
# poll is held to the bounds the module controls, the median poll to
# the tight ones.
my @busy = map { $_->{busy} // 99 } @polls;
my ($busy_max) = sort { $b <=> $a } @busy;
cmp_ok($busy_max // 99, '<', 16, 'BusyWorkers below MaxRequestWorkers (16) '
       . 'in every poll: no worker kept per download');
cmp_ok(median(@busy) // 99, '<=', 2, 'BusyWorkers at most 2 in the median poll');
my $none = grep { ($_->{writing} // 0) == 0 } @polls;
is($none, 0, 'ConnsAsyncWriting above 0 in every poll');
my $share = median(map { ($_->{writing} // 0) / $_->{running} } @polls);
cmp_ok($share // 0, '>=', 0.9, 'ConnsAsyncWriting at least 90% of the '
       . 'running downloads in the median poll');

my $intact = grep { ($r[$_]{http_code} // '') eq '200'
                    && -s $out[$_]->filename == SIZE
                    && sha256_file($out[$_]->filename) eq $sha->{'/auto/f.bin'} }
    0 .. DOWNLOADS - 1;
is($intact, DOWNLOADS, 'every download intact (length and SHA-256)');

my @e = map { $srv->access_entry_for($_->{local_port}) } @jobs;
is(scalar(grep { $_ && ($_->{policy} // '') eq 'auto' } @e), DOWNLOADS,
   'every download logged with policy auto');
my $retuned = grep { $_ && ($_->{retunes} // 0) > 0 } @e;
cmp_ok($retuned, '>=', 0.9 * DOWNLOADS,
       "SNDBUF_TUNE_RETUNES > 0 on $retuned of " . DOWNLOADS . ' downloads');
my $moved = grep { tb_changes($tb_after{ $_->{local_port} } || []) > 1 } @jobs;
cmp_ok($moved, '>=', 0.9 * DOWNLOADS, "tb changed after every handler had "
       . "returned on $moved of " . DOWNLOADS . ' sockets');

$srv->stop;
$lab->down;
