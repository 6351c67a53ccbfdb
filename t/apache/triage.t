# What limited a response, as the module tells it with nothing configured:
# an apache2 that loads it and has no SndbufTune line (Setup::standalone),
# whose only vhost has a hostile name (a quote, a backslash, <, &, >, a
# byte that is not UTF-8, a control byte and %), serves a 16 MiB file
# through mod_ratelimit at 8 MiB/s over loopback: the server itself has
# nothing to send most of the time.
#   - the access log: verdict app, app_ms most of the response's time; its
#     busy time (sndbuf_ms + rwnd_ms + network_ms) is what ss counted for
#     the connection by the moment it was logged (the samples around it,
#     10% and 20 ms either side: the kernel counts in jiffies);
#   - ?auto and the metrics: one large response of the vhost, limited by
#     app, the seconds by limit; mod_status's ?auto the same;
#   - the page and mod_status's: the vhost's row in "What limited the
#     large responses", its name %-encoded and HTML-escaped as the
#     counters' row shows it, none of its raw bytes, and the verdict in
#     words.
# A small file on the same server makes no notes (no system call for it).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use POSIX ();
use Time::HiRes ();
use SndbufTune::Setup qw(standalone BIG_PATH BIG_SIZE BIG_SHA256 SMALL_PATH);
use SndbufTune::Kernel qw(ss_view);
use SndbufTune::StallClient;
use SndbufTune::Util qw(free_port parse_auto);

plan tests => 5;

my $odd = "odd\"q\\<&>\xe9\x01%.test";
my $srv = standalone(name => 'triage', modules => [qw(ratelimit env status)],
                     status_pages => 1, body => <<"CONF");
ExtendedStatus On
<VirtualHost *:\@PORT\@>
    ServerName $odd
    <Location /gen/>
        SetOutputFilter RATE_LIMIT
        SetEnv rate-limit 8192
    </Location>
    <Location /server-status>
        SetHandler server-status
    </Location>
</VirtualHost>
CONF
$srv->start or BAIL_OUT('standalone server: ' . $srv->error);
my $port = $srv->port;
# the name as every format shows it, then as HTML escapes it
my $shown = "odd\"q\\<&>%E9%01%25.test:$port";
my $html = $shown =~ s/&/&amp;/gr =~ s/</&lt;/gr =~ s/>/&gt;/gr
                  =~ s/"/&quot;/gr;

sub get {
    my $path = shift;
    my $c = SndbufTune::StallClient->new(port => $port);
    my (undef, undef, $body) = $c->get($path, host => 'localhost');
    return $body;
}

my $e;
subtest 'a slow response with nothing configured: verdict app' => sub {
    my $cport = free_port();
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $c = SndbufTune::StallClient->new(port => $port,
                                             local_port => $cport);
        $c->send_request(path => BIG_PATH, host => 'localhost');
        my ($n, $sha) = $c->finish_body;
        # open a little longer: ss sees the connection once it is logged
        Time::HiRes::sleep(0.3);
        POSIX::_exit($n == BIG_SIZE && $sha eq BIG_SHA256 ? 0 : 1);
    }
    my @ss;
    while (waitpid($pid, POSIX::WNOHANG()) == 0) {
        my $v = ss_view($port, $cport);
        push @ss, [Time::HiRes::time(), $v] if $v;
        Time::HiRes::sleep(0.05);
    }
    is($?, 0, 'the whole body, its SHA-256');
    $e = $srv->access_entry_for($cport);
    ok($e, 'logged') or return;
    is($e->{policy}, 'none', 'no policy applied');
    is($e->{verdict}, 'app', 'verdict app');
    my $ms = $e->{duration_us} / 1000;
    cmp_ok($e->{app_ms} // 0, '>=', $ms / 2, "app_ms $e->{app_ms}: at least "
           . "half of the response's $ms ms");
    my $busy = ($e->{sndbuf_ms} // -1e6) + ($e->{rwnd_ms} // 0)
             + ($e->{network_ms} // 0);
    my $at = ($e->{time_us} + $e->{duration_us}) / 1e6;
    my ($lo) = grep { $_->[0] < $at } reverse @ss;
    my ($hi) = grep { $_->[0] >= $at } @ss;
    ok($lo && $hi, 'ss saw the connection around the moment it was logged')
        or return;
    note("busy: logged $busy ms; ss $lo->[1]{busy_ms} ms before, "
         . "$hi->[1]{busy_ms} ms after");
    cmp_ok($busy, '>=', 0.9 * $lo->[1]{busy_ms} - 20,
           'the logged busy time is what ss counted (-10%)');
    cmp_ok($busy, '<=', 1.1 * $hi->[1]{busy_ms} + 20, 'and (+10%)');
    ok(defined $e->{goodput_bps}, 'goodput noted');
};

subtest 'a small response: no notes' => sub {
    my $c = SndbufTune::StallClient->new(port => $port);
    my ($st) = $c->get(SMALL_PATH, host => 'localhost');
    is($st, 200, 'served');
    my $s = $srv->access_entry_for($c->local_port);
    ok($s && !defined $s->{verdict} && !defined $s->{network_ms}
       && !defined $s->{goodput_bps}, 'no verdict, no figures');
};

subtest '?auto, the metrics and mod_status\'s ?auto' => sub {
    my ($kv) = parse_auto(get('/sbt-status?auto'));
    my ($slot) = map { /^(SndbufTuneVhost\[\d+\])Name$/ ? $1 : () }
                 grep { $kv->{$_} eq $shown } keys %$kv;
    ok($slot, 'the vhost has a slot, its name %-encoded') or return;
    is($kv->{"${slot}LargeResponses"}, 1, 'one large response');
    is($kv->{"${slot}LimitedByApp"}, 1, 'limited by app');
    is($kv->{"${slot}Verdict"}, 'app', 'verdict app');
    cmp_ok(abs($kv->{"${slot}SendMsApp"} - $e->{app_ms}), '<=', 1,
           'app time, as logged');
    my $m = get('/sbt-metrics');
    my $l = 'vhost="' . ($shown =~ s/([\\"])/\\$1/gr) . '"';
    like($m, qr/^sndbuf_tune_vhost_responses_limited_total\{\Q$l\E,by="app"\} 1$/m,
         'metrics: responses_limited_total by app 1');
    like($m, qr/^sndbuf_tune_vhost_send_seconds_total\{\Q$l\E,limit="app"\} \d+\.\d{6}$/m,
         'metrics: send_seconds_total for app');
    like($m, qr/^sndbuf_tune_vhost_large_responses_total\{\Q$l\E\} 1$/m,
         'metrics: large_responses_total 1');
    my ($st) = parse_auto(get('/server-status?auto'));
    is($st->{"${slot}Verdict"}, 'app', 'mod_status ?auto: the vhost\'s '
       . 'verdict');
    is($st->{SndbufTuneTotalLimitedByApp}, 1, 'mod_status ?auto: in the '
       . 'totals');
};

# The triage's rows of an HTML page: from its heading to the end.
sub triage_rows {
    my $page = shift;
    my $at = index $page, 'What limited the large responses</h';
    return $at < 0 ? '' : substr $page, $at;
}

subtest 'the page: the vhost\'s row, escaped, and its verdict' => sub {
    my $t = triage_rows(get('/sbt-status'));
    ok(length $t, 'a section "What limited the large responses"') or return;
    like($t, qr{<td class="n">\Q$html\E</td><td>1</td>}, 'the vhost\'s '
         . 'row: its name %-encoded and escaped, one large response');
    unlike($t, qr/odd"|<&|\xe9|\x01/, 'none of the name\'s raw bytes');
    ok(index($t, 'the server itself (nothing to send for half the time or '
             . 'more) limited 1 of 1 large responses') >= 0,
       'the verdict in words');
    like($t, qr/<span title="app \d+%" style="[^"]*background:/,
         'a bar, its app share');
    unlike($t, qr/<script/i, 'no script');
};

subtest 'mod_status\'s page: the same row' => sub {
    my $t = triage_rows(get('/server-status'));
    like($t, qr{<td class="n">\Q$html\E</td><td>1</td>}, 'the vhost\'s '
         . 'row, escaped');
    unlike($t, qr/odd"|<&|\xe9|\x01/, 'none of the name\'s raw bytes');
};

$srv->stop;
