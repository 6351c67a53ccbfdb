package SndbufBench::Stock;
# make bench, part "stock": one download at a time, auto and
# autobw against autotuning (`unset`), side by side in each cell, on the
# machines and links users have:
#   profiles:   stock (cubic, net.core.wmem_max 212992), cubic (this lab's
#               wmem_max), bbr (this lab)
#   paths:      seed (30 Mbit/s, 250 ms), putty (10, 180), wan100 (100, 50),
#               longfat (200, 250); queue one BDP
#   conditions: alone, beside a cubic or a bbr bulk flow that Apache does
#               not serve (started 5 s before), 0.1% and 1% random loss,
#               rate steps (30 <-> 10 Mbit/s every 10 s, where the lab has
#               them)
# Each download runs SECS seconds (curl --max-time) and is measured from
# the server socket (ss): goodput over [WARM, SECS] from bytes_acked, the
# median srtt, the share of segments retransmitted, the peak tb, and how
# long the sender waited for its send buffer (sndbuf_limited: counted only
# while the writer is blocked, so 0 does not rule out a writer slow to
# refill it), and the module's re-tunes (the access log's
# SNDBUF_TUNE_RETUNES). The configurations take turns in each cell, in a
# rotating order.
#
# The stock profile changes global sysctls (WanLab::profile puts them
# back), so this part runs alone.
#
#   run(\%ctx) -> { section => markdown, targets => [[what, wanted,
#   measured, ok]] } (bench/run's contract); ctx: quick => 1 (shorter
#   downloads), say => a log function, opt => { cells => 'a,b' } (the
#   profile, path and condition names to keep: bench/run --cells)
use strict;
use warnings;

use SndbufTune::Util qw(top_dir capture);
use SndbufTune::WanLab qw(median goodput_limit_bps);

# Does this lab's emulator offer --rate-steps, --trace (wanlab's usage)?
sub _lab_has {
    my (undef, $usage) = capture(top_dir() . '/t/wan/wanlab');
    return $usage =~ /--\Q$_[0]\E\b/;
}

my @PROFILES = (
    { name => 'stock', cc => 'cubic', wmem_max => 212992 },
    { name => 'cubic', cc => 'cubic', wmem_max => undef },
    { name => 'bbr',   cc => 'bbr',   wmem_max => undef },
);
my @PATHS = (
    { name => 'seed',    rtt => 250, rate => 30 },
    { name => 'putty',   rtt => 180, rate => 10 },
    { name => 'wan100',  rtt => 50,  rate => 100 },
    { name => 'longfat', rtt => 250, rate => 200 },
);
my @CONDITIONS = (
    { name => 'alone' },
    { name => 'cubic flow', bulk => 'cubic' },
    { name => 'bbr flow',   bulk => 'bbr' },
    { name => 'cubic flow later', bulk => 'cubic', later => 5 },
    { name => 'queue 1/4 BDP', queue => 0.25 },
    { name => 'queue 4 BDP',   queue => 4 },
    { name => 'loss 0.1%',  loss => 0.1 },
    { name => 'loss 1%',    loss => 1 },
    { name => 'rate steps', steps => 1 },
);
# The cellular traces (mahimahi's format) beside the checkout, each at
# 50 and 100 ms of base RTT; none where ../shared/traces is absent.
# The rate autobw is told is the trace's mean: one 1500-byte packet per
# line over the trace's period.
sub _trace_paths {
    my $dir = top_dir() . '/../shared/traces';
    return map { my $f = $_; (my $n = $f) =~ s{.*/|\.down$}{}g;
                 my $rate = _trace_mbit($f);
                 map { { name => "$n $_ ms", rtt => $_, rate => $rate,
                         trace => $f } } 50, 100 }
           sort glob("$dir/*.down");
}

sub _trace_mbit {
    my $f = shift;
    open my $fh, '<', $f or return 1;
    my ($n, $last) = (0, 1);
    while (<$fh>) { $n++, $last = $1 if /^(\d+)/ }
    my $mbit = int($n * 1500 * 8 / ($last / 1000) / 1e6 + 0.5);
    return $mbit > 0 ? $mbit : 1;
}

my @CONFIGS = (
    [unset  => "SndbufTune unset\n"],
    [auto   => "SndbufTune auto\n"],
    [autobw => "SndbufTune auto\nSndbufTuneBandwidth %dmbit\n"],
);
# --control: autotuning again, the same as `unset`: unset2 / unset is
# what the cell gives with no difference at all (its own spread).
my $CONTROL = [unset2 => "SndbufTune unset\n"];

sub _configs {
    my ($ctx) = @_;
    return ($ctx->{opt} || {})->{control} ? (@CONFIGS, $CONTROL) : @CONFIGS;
}

# One download of $path for $secs; $cond->{later}: the bulk flow starts
# that many seconds into it (else it ran from 5 s before). A link whose
# rate changes over time (rate steps, a trace) starts its schedule again
# with each download, so that every configuration sees the same link: the
# configurations of a cell take turns, and a 15 s download 16 s into a
# trace sees another link than one at 0 s.
sub _measure {
    my ($lab, $srv, $path, $secs, $warm, $cond, $timed) = @_;
    my $bulk;
    if ($cond->{bulk} && !$cond->{later}) {
        $bulk = $lab->bulk_start(cc => $cond->{bulk}, seconds => $secs + 10);
        sleep 5;
    }
    $lab->status(reset => 1) if $timed;
    my $job = $lab->curl_start(url => $srv->url($path), max_time => $secs);
    my ($n0, $n1);      # the bulk flow's [t, bytes_acked]: first, latest
    my $samples = $lab->sample_while(job => $job, interval => 0.25,
        on_sample => sub {
            my $t = $_[0]{t};
            $bulk //= $lab->bulk_start(cc => $cond->{bulk}, seconds => $secs)
                if $cond->{later} && $t >= $cond->{later};
            return unless $bulk && $t >= $warm
                          && (!$n1 || $t - $n1->[0] >= 1);
            my $acked = $lab->bulk_acked($bulk) // return;
            $n1 = [$t, $acked];
            $n0 //= $n1;
        });
    $lab->curl_wait($job);
    $lab->bulk_stop($bulk) if $bulk;
    my $e = $srv->access_entry_for($job->{local_port}, 10) || {};
    my $series = SndbufTune::WanLab->series($samples)->{ $job->{local_port} }
                 || [];
    my @s = grep { defined $_->[1]{bytes_acked} } @$series;
    my @w = grep { $_->[0] >= $warm } @s;
    return {} unless @w > 2;
    my ($s0, $s1) = map { $_->[1] } @w[0, -1];
    my $dt = $w[-1][0] - $w[0][0];
    my $segs = ($s1->{data_segs_out} // 0) - ($s0->{data_segs_out} // 0);
    my ($tb) = sort { $b <=> $a } map { $_->[1]{tb} // 0 } @s;
    my @gain = grep { defined } map { $_->[1]{bbr_pacing_gain} } @w;
    return {
        bps     => $dt > 0 ? 8 * ($s1->{bytes_acked} - $s0->{bytes_acked})
                             / $dt : undef,
        srtt_ms => median(map { ($_->[1]{rtt_us} // 0) / 1000 } @w),
        retrans => $segs > 0 ? (($s1->{retrans} // 0)
                                - ($s0->{retrans} // 0)) / $segs : undef,
        tb      => $tb,
        limited_ms => ($s1->{sndbuf_limited_ms} // 0)
                      - ($s0->{sndbuf_limited_ms} // 0),
        retunes => $e->{retunes},
        # bbr's startup paces at 2.89 x; a flow its buffer keeps
        # app-limited may never leave it (docs/auto.md)
        startup => @gain ? 100 * (grep { $_ > 2 } @gain) / @gain : undef,
        neighbour_bps => $n1 && $n1->[0] > $n0->[0]
                         ? 8 * ($n1->[1] - $n0->[1]) / ($n1->[0] - $n0->[0])
                         : undef,
    };
}

sub _cell {
    my ($ctx, $profile, $p, $cond, $secs, $warm) = @_;
    my %up = (rtt_ms => $p->{rtt}, rate_mbit => $p->{rate},
              instance => 'sbtst');
    $up{loss} = $cond->{loss} if $cond->{loss};
    $up{queue_bytes} = int($cond->{queue} * $p->{rate} * 1e6 / 8
                           * $p->{rtt} / 1000) if $cond->{queue};
    if ($p->{trace}) {
        return undef unless _lab_has('trace');
        $up{trace} = $p->{trace};
    }
    if ($cond->{steps}) {
        return undef unless _lab_has('rate-steps');
        $up{rate_steps} = "$p->{rate}," . int($p->{rate} / 3) . ':10';
    }
    my $lab = SndbufTune::WanLab->up(%up);
    my $guard = $lab->profile(cc => $profile->{cc},
                              wmem_max => $profile->{wmem_max});
    my @configs = _configs($ctx);
    my $body = join '', map {
        (my $lines = $_->[1]) =~ s/%d/$p->{rate}/;
        "<Location /$_->[0]/>\n$lines</Location>\n" } @configs;
    my $srv = $lab->server(name => 'stock', body => $body);
    my $f = $srv->add_file('/big.bin', '');
    truncate $f, 4 << 30 or die "truncate $f: $!";
    $srv->add_link("/$_->[0]/big.bin", '/big.bin') for @configs;
    $srv->start or die $srv->error;
    my @rounds;
    for (1 .. ($ctx->{opt}{repeat} || 1)) {
        my %r;
        my @order = map { $_->[0] } @configs;
        push @order, shift @order for 1 .. ($ctx->{turn}++ % @order);
        for my $name (@order) {
            $r{$name} = _measure($lab, $srv, "/$name/big.bin", $secs, $warm,
                                 $cond, $p->{trace} || $cond->{steps});
            sleep 1;
        }
        push @rounds, \%r;
    }
    $srv->stop;
    undef $guard;
    $lab->down;
    return _median_round([map { $_->[0] } @configs], @rounds);
}

# Of a cell's rounds (one or more), each figure's median, and each
# configuration's ratio to autotuning as the median of the rounds' own
# ratios (a round's configurations ran minutes apart, the rounds more).
sub _median_round {
    my ($names, @rounds) = @_;
    my %m;
    for my $c (@$names) {
        for my $k (qw(bps srtt_ms retrans tb limited_ms startup
                      neighbour_bps)) {
            $m{$c}{$k} = median(map { $_->{$c}{$k} } @rounds);
        }
        ($m{$c}{retunes}) = sort { $b <=> $a }
                            grep { defined } map { $_->{$c}{retunes} } @rounds;
        $m{$c}{x} = median(map { my $u = $_->{unset}{bps};
                                 $u && defined $_->{$c}{bps}
                                 ? $_->{$c}{bps} / $u : undef } @rounds);
        $m{$c}{rounds} = [map { $_->{$c}{bps} } @rounds];
    }
    return \%m;
}

sub _fmt { defined $_[0] ? sprintf('%.3f', $_[0]) : 'n/a' }

# --cells: names (a cell is kept when its profile, path and condition
# are all among them) and whole cells (profile/path/condition). A name
# may hold a slash itself ("queue 1/4 BDP").
sub _keep {
    my ($ctx, @names) = @_;
    my $cells = $ctx->{cells} // ($ctx->{opt} || {})->{cells};
    return 1 unless $cells;
    my @k = split /,/, $cells;
    my $cell = join '/', @names;
    return 1 if grep { $_ eq $cell } @k;
    my %k = map { $_ => 1 } @k;
    return %k && !grep { !$k{$_} } @names;
}

sub run {
    my ($ctx) = @_;
    my $secs = $ctx->{quick} ? 15 : 30;
    my $warm = $ctx->{quick} ? 6 : 10;
    my $log = $ctx->{say} // sub { print "@_\n" };
    my @shown = map { $_->[0] } _configs($ctx);
    my $control = @shown > @CONFIGS;
    my (@section, @targets);
    push @section, "## One download on the machines users have\n",
        "Each cell: one download of ${secs} s per configuration, taking "
        . "turns; goodput over ${warm}-${secs} s from the server socket; "
        . "`x` = goodput / autotuning's (`unset`) in the same cell; srtt "
        . "median over the window; rtx = segments retransmitted / sent; "
        . "`tb` = the socket's peak send buffer; buffer-limited = the "
        . "time in the window the sender waited for its send buffer "
        . "(`ss` sndbuf_limited, counted only while the writer is "
        . "blocked: 0 does not rule out a writer woken too late to keep "
        . "data queued); re-tunes = the module's changes to the socket "
        . "(SNDBUF_TUNE_RETUNES: locks, releases; the most of any round): "
        . "0 means it left every download to autotuning throughout, so "
        . "any gap to `unset` is the cell's own noise; bbr in startup = "
        . "the share of the window's `ss` samples where bbr paced at its "
        . "startup gain (2.89); the other flow = the bulk flow beside the "
        . "download, over the same window."
        . (($ctx->{opt}{repeat} || 1) > 1
           ? " Each cell measured $ctx->{opt}{repeat} times (`--repeat`), "
             . "the order rotating: each figure is the rounds' median, "
             . "`x` the median of the rounds' own ratios." : '')
        . ($control ? ' unset again x: a second download with autotuning '
             . '(`--control`), the same configuration as `unset`: its '
             . 'ratio is the gap the cell shows between two identical '
             . 'downloads.' : '')
        . "\n";
    # One table per condition, its rows profile x path, so
    # the three machines stand side by side; the traces have one of
    # their own.
    my (%rows, @order);
    for my $profile (@PROFILES) {
        for my $p (@PATHS, _trace_paths()) {
            for my $cond ($p->{trace} ? $CONDITIONS[0] : @CONDITIONS) {
                next unless _keep($ctx, $profile->{name}, $p->{name},
                                  $cond->{name});
                $log->("stock: $profile->{name} $p->{name} $cond->{name}");
                my $r = _cell($ctx, $profile, $p, $cond, $secs, $warm)
                    or next;
                my $u = $r->{unset}{bps};
                $log->('  Mbit/s: ' . join ', ', map {
                       "$_ " . (defined $r->{$_}{bps}
                                ? sprintf('%.2f', $r->{$_}{bps} / 1e6)
                                : 'n/a') } @shown);
                my %x = map { $_ => $r->{$_}{x} } qw(auto autobw);
                $log->('  rounds, Mbit/s: ' . join '; ', map {
                    my $c = $_;
                    "$c " . join ' ', map { defined $_
                        ? sprintf('%.2f', $_ / 1e6) : 'n/a' }
                        @{ $r->{$c}{rounds} } } @shown)
                    if @{ $r->{unset}{rounds} } > 1;
                my $f = sub { my ($fmt, $k, $m) = @_;
                    join ' / ', map { defined $r->{$_}{$k}
                        ? sprintf($fmt, $r->{$_}{$k} * ($m // 1)) : 'n/a' }
                        qw(unset auto autobw) };
                my $table = $p->{trace} ? 'cellular traces, alone'
                                        : $cond->{name};
                push @order, $table unless $rows{$table};
                my $again = !$control ? ''
                    : defined $r->{unset2}{x}
                    ? sprintf(' %.2f |', $r->{unset2}{x}) : ' n/a |';
                push @{ $rows{$table} }, sprintf
                    "| %s | %s | %s | %s | %s |%s %s | %s | %s | %s | %s "
                    . "| %s | %s |\n",
                    "$profile->{name} ($profile->{cc}"
                    . ($profile->{wmem_max} ? ", $profile->{wmem_max}" : '')
                    . ')', $p->{name},
                    defined $u ? sprintf('%.2f', $u / 1e6) : 'n/a',
                    map({ defined $x{$_} ? sprintf('%.2f', $x{$_}) : 'n/a' }
                        qw(auto autobw)), $again,
                    $f->('%.0f', 'srtt_ms'), $f->('%.2f', 'retrans', 100),
                    $f->('%.0f', 'tb', 1 / 1024), $f->('%.0f', 'limited_ms'),
                    join(' / ', map { $r->{$_}{retunes} // 'n/a' }
                                qw(auto autobw)),
                    $f->('%.0f', 'startup'),
                    $cond->{bulk} ? $f->('%.2f', 'neighbour_bps', 1e-6) : '-';
                my $want = $p->{name} eq 'longfat' && $cond->{name} eq 'alone'
                           && $profile->{name} ne 'stock' ? 1.3
                         : $cond->{bulk} ? 0.95 : 0.97;
                for my $c (qw(auto autobw)) {
                    push @targets, ["$profile->{name} $p->{name} "
                        . "$cond->{name}: $c / unset", ">= $want",
                        _fmt($x{$c}), defined $x{$c} ? 0 + ($x{$c} >= $want)
                                                     : undef];
                }
                if ($p->{name} eq 'seed' && $cond->{name} eq 'alone') {
                    my $lim = goodput_limit_bps(30e6, 1500);
                    for my $c (qw(auto autobw)) {
                        my $g = $r->{$c}{bps};
                        push @targets, ["$profile->{name} seed alone: $c "
                            . 'of the limit', '>= 0.90', _fmt($g && $g / $lim),
                            $g ? 0 + ($g / $lim >= 0.90) : undef];
                    }
                }
            }
        }
    }
    for my $table (@order) {
        push @section, "\n### $table\n\n| profile (cc, wmem_max) | path "
            . "| unset Mbit/s | auto x | autobw x "
            . ($control ? '| unset again x ' : '')
            . "| srtt ms unset/auto/autobw | rtx % unset/auto/autobw "
            . "| peak tb KiB unset/auto/autobw "
            . "| buffer-limited ms unset/auto/autobw "
            . "| re-tunes auto/autobw (most in a round) "
            . "| bbr in startup % unset/auto/autobw "
            . "| the other flow's Mbit/s unset/auto/autobw |\n"
            . "|---|---|---|---|---|---|---|---|---|---|---|---|"
            . ($control ? '---|' : '') . "\n",
            @{ $rows{$table} };
    }
    return { section => join('', @section), targets => \@targets };
}

1;
