package SndbufBench::Flows;
# bench/run's part `flows`: 100 and 20 downloads through one 100 Mbit/s,
# 100 ms bottleneck: goodput, sum of skmem w, Jain, srtt.
use strict;
use warnings;
use utf8;

use SndbufBench::Common qw(:all);

# n flows at once; best: the best fixed size for that many flows (found by a
# sweep of fixed sizes outside this bench), the yardstick for auto's memory
our @FLOWS = (
    { name => 'flows100', n => 100, best => 'fixed16k',
      configs => [[qw(nomod auto lowat fixed16k unset autobw)],
                  [qw(nomod auto lowat fixed16k)]] },
    { name => 'flows20', n => 20, best => 'fixed64k',
      configs => [[qw(nomod auto lowat fixed64k unset)],
                  [qw(nomod auto lowat fixed64k)]] },
);
# The same crowds on a stock server (cubic, net.core.wmem_max 212992) and
# under cubic with this lab's wmem_max (issue 20); WanLab::profile sets
# the server namespace's congestion control and the global wmem_max, and
# puts them back.
my %PROFILE = (cubic => { cc => 'cubic', wmem_max => undef },
               stock => { cc => 'cubic', wmem_max => 212992 });
push @FLOWS, map { my ($n, $best, $prof) = @$_;
    { name => "flows$n$prof", n => $n, best => $best, profile => $prof,
      configs => [[nomod => 'auto', 'lowat', $best], [qw(nomod auto)]] } }
    [20, 'fixed64k', 'cubic'], [20, 'fixed64k', 'stock'],
    [100, 'fixed16k', 'cubic'], [100, 'fixed16k', 'stock'];
for (@FLOWS) {
    my $tag = "$_->{n} flows" . ($_->{profile} ? " ($_->{profile})" : '');
    %$_ = (label => "$tag, 100 Mbit/s, 100 ms", tag => $tag, rtt => 100,
           rate => 100, mtu => 1500, w => [10, 41], q => [5, 12], %$_);
}

# The keys of its labs' health in $RES{health} (the fidelity table).
sub health_keys { map { $_->{name} } @FLOWS }

# --flows a,b: only these crowds (their names: flows100, flows20cubic, ...)
sub run {
    my %want = map { $_ => 1 } split /,/, $opt{flows} // '';
    run_flow($_) for grep { !%want || $want{ $_->{name} } } @FLOWS;
}

sub run_flow {
    my $p = shift;
    my @configs = configs_of($p->{configs});
    return unless @configs;
    my ($W, $S) = window_times($p);
    my $limit = goodput_limit_bps($p->{rate} * 1e6, $p->{mtu});
    # more than the whole link could carry to one flow in the whole run: no
    # download ends, however unfair (sparse: it costs nothing)
    my $size = int($limit / 8 * ($W + $S + 10) / 1048576 + 1) * 1048576;
    my $file = data_file($size);
    say_("$p->{label}: $p->{n} downloads at once; warm-up ${W}s, window ${S}s; "
         . "@configs");
    my $lab = lab_up($p);
    my $profile = $p->{profile} && $lab->profile(%{ $PROFILE{ $p->{profile} } });
    my $res = $RES{flows}{ $p->{name} } = { configs => \@configs, n => $p->{n},
        best => $p->{best}, warm => $W, window => $S, limit_bps => $limit,
        queue_bytes => $p->{queue_bytes}, cells => {} };
    for my $cfg (@configs) {
        my $restore = config_sysctls($lab, $cfg);
        my $srv = wan_server($lab, $cfg, rate => $p->{rate},
                             links => { '/data.bin' => $file });
        my $base = relay_reset($lab);
        my @jobs = map {
            $lab->curl_start(url => $srv->url('/data.bin'),
                             max_time => $W + $S + 30)
        } 1 .. $p->{n};
        my $samples = $lab->sample_while(jobs => \@jobs, interval => 0.5,
                                         duration => $W + $S);
        $lab->curl_kill($_) for @jobs;
        my @cres = map { $lab->curl_wait($_) } @jobs;
        # a flow that ended before the window closed (done or failed) would
        # make the aggregate undercount: say so
        my @early = grep { defined $_->{exitcode} } @cres;
        say_(sprintf '  warning: %d of %d downloads ended before the window '
             . 'closed (first: curl exit %s%s)', scalar @early, $p->{n},
             $early[0]{exitcode}, $early[0]{error} ? ", $early[0]{error}" : '')
            if @early;
        my $health = cell_health($lab, $base, $p->{name}, $cfg);
        $srv->stop;
        $restore->();
        my $c = flows_cell(SndbufTune::WanLab->series($samples), $samples,
                           $W, $W + $S);
        $c->{pct} = $c->{agg_bps} / $limit;
        $res->{cells}{$cfg} = $c;
        say_(sprintf '  %-9s %3d flows: %7s Mbit/s (%5s%%)  sum w %6s MiB '
             . '(peak %6s)  Jain %.3f  srtt %5.1f ms  retrans %d%s', $cfg,
             $c->{flows}, mbit($c->{agg_bps}), pct($c->{pct}), mib($c->{wsum_avg}),
             mib($c->{wsum_peak}), $c->{jain} // 0, $c->{srtt_ms} // 0,
             $c->{retrans}, $health->{note});
    }
    undef $profile;
    lab_down($lab, $p->{name});
}

# The figures of many flows over the window [T0, T1]: each flow's steady
# rate, their sum and Jain's index; the sum over the server's sockets of
# skmem w (and tb) at each sample, averaged and at its peak; the mean of
# the sockets' smoothed RTT at each sample, averaged.
sub flows_cell {
    my ($series, $samples, $t0, $t1) = @_;
    my (@rates, @wpeaks);
    my $retrans = 0;
    for my $port (keys %$series) {
        my ($r) = steady_rate($series->{$port}, $t0, $t1);
        push @rates, $r // 0;
        push @wpeaks, max_of(0, map { $_->[1]{w} } @{ $series->{$port} });
        $retrans += $series->{$port}[-1][1]{retrans} // 0;
    }
    my (@wsum, @tbsum, @srtt);
    for my $smp (grep { $_->{t} >= $t0 && $_->{t} <= $t1 } @$samples) {
        my @s = values %{ $smp->{socks} };
        my ($ws, $tbs) = (0, 0);
        $ws += $_->{w} // 0 for @s;
        $tbs += $_->{tb} // 0 for @s;
        push @wsum, $ws;
        push @tbsum, $tbs;
        my @rtt = grep { defined } map { $_->{rtt_us} } @s;
        push @srtt, mean(@rtt) / 1000 if @rtt;
    }
    my $agg = 0;
    $agg += $_ for @rates;
    return { flows => scalar(keys %$series), agg_bps => $agg * 8,
             jain => jain(@rates),
             min_flow_bps => @rates ? (sort { $a <=> $b } @rates)[0] * 8 : undef,
             wsum_avg => mean(@wsum), wsum_peak => max_of(@wsum),
             tbsum_avg => mean(@tbsum), srtt_ms => mean(@srtt),
             w_peak_max => max_of(@wpeaks), w_peak_median => median(@wpeaks),
             retrans => $retrans };
}

sub section {
    my @t;
    for my $p (@FLOWS) {
        my $r = $RES{flows}{ $p->{name} } or next;
        my $base = $r->{cells}{nomod} || {};
        push @t, { title => "$r->{n} downloads through one 100 Mbit/s, 100 ms "
                          . 'bottleneck' . ($p->{profile}
                             ? ", server profile `$p->{profile}`" : ''), h => 3,
            intro => sprintf('%d curl downloads started together; warm-up %s s, '
                . 'then the %s s window. Goodput limit %s Mbit/s, a fair share '
                . '%s Mbit/s and a per-flow BDP %s KiB; the best fixed size '
                . 'here is `%s`.', $r->{n}, $r->{warm}, $r->{window},
                mbit($r->{limit_bps}), mbit($r->{limit_bps} / $r->{n}),
                kib($p->{rate} * 1e6 / 8 * $p->{rtt} / 1000 / $r->{n}), $r->{best}),
            head => ['config', 'goodput Mbit/s', '% of limit', 'vs `nomod`',
                     'Σw avg MiB', 'vs `nomod`', 'Σw peak MiB', 'Jain',
                     'slowest flow Mbit/s', 'mean srtt ms',
                     'per-socket peak w KiB (max / median)', 'retrans'],
            align => 'lrrrrrrrrrrr',
            rows => [ map { my $c = $r->{cells}{$_}; !$c ? () : [
                cfg_cell($_), mbit($c->{agg_bps}), pct($c->{pct}) . '%',
                ratio(div($c->{agg_bps}, $base->{agg_bps})) . 'x',
                mib($c->{wsum_avg}), ratio(div($c->{wsum_avg}, $base->{wsum_avg})) . 'x',
                mib($c->{wsum_peak}), ratio3($c->{jain}), mbit($c->{min_flow_bps}),
                sprintf('%.1f', $c->{srtt_ms} // 0),
                kib($c->{w_peak_max}) . ' / ' . kib($c->{w_peak_median}),
                $c->{retrans} ] } @{ $r->{configs} } ] };
    }
    my %cfgs = map { map { $_ => 1 } @{ $_->{configs} } } values %{ $RES{flows} };
    return { title => 'Many flows through one bottleneck',
        intro => sprintf('Downloads started one after another, as fast as the '
            . 'machine spawns them (on 2 cores 100 requests reach the server '
            . 'over about 7 s, so the warm-up after the last is about 3 s), '
            . 'from the client namespace '
            . 'through one 100 Mbit/s, 100 ms path (a drop-tail queue of one '
            . 'BDP, %s KiB; BBR). Goodput: the sum of the flows\' steady rates '
            . '(`delivered` × `mss` from `ss -tmi` in the server namespace, '
            . 'every 0.5 s) over the window after the warm-up; Σw: skmem `w` '
            . '(bytes queued) summed over the server\'s sockets, averaged over '
            . 'the window (and its peak); Jain: fairness of the flows\' rates; '
            . 'mean srtt: the sockets\' smoothed RTT, averaged over sockets and '
            . 'samples (100 ms of it is the path, the rest queue).',
            kib((grep { $_ } map { $_->{queue_bytes} } values %{ $RES{flows} })[0]))
            . "\n\n"
            . config_legend(grep { $cfgs{$_} } @CONFIG_ORDER),
        tables => \@t };
}

sub targets {
    my ($push) = @_;
    for my $p (@FLOWS) {
        my $r = ($RES{flows} || {})->{ $p->{name} } || { cells => {} };
        my $c = $r->{cells};
        my ($au, $nm, $lw, $fx) = map { $c->{$_} || {} } 'auto', 'nomod', 'lowat', $p->{best};
        my $g = div($au->{agg_bps}, $nm->{agg_bps});
        $push->("$p->{tag}, auto: goodput vs autotuning", '>= 0.98x',
                ratio3($g) . 'x', defined $g ? $g >= 0.98 : undef);
        my $x = div($au->{retrans}, $nm->{retrans} || 1);
        $push->("$p->{tag}, auto: retransmissions vs autotuning", '<= 2x',
                ratio($x) . 'x', defined $au->{retrans} ? $x <= 2 : undef,
                sprintf('%s against %s segments', $au->{retrans} // 'n/a',
                        $nm->{retrans} // 'n/a'));
        my $m = div($au->{wsum_avg}, $fx->{wsum_avg});
        $push->("$p->{tag}, auto: Σw vs the best fixed size (`$p->{best}`)",
                '<= 2x', ratio($m) . 'x', defined $m ? $m <= 2 : undef,
                sprintf('Σw %s MiB, `%s` %s MiB', mib($au->{wsum_avg}),
                        $p->{best}, mib($fx->{wsum_avg})));
        $m = div($au->{wsum_avg}, $lw->{wsum_avg});
        $push->("$p->{tag}, auto: Σw vs autotuning + notsent_lowat 16384",
                '< 1x', ratio($m) . 'x', defined $m ? $m < 1 : undef,
                sprintf('`lowat` %s MiB, autotuning %s MiB', mib($lw->{wsum_avg}),
                        mib($nm->{wsum_avg})));
        $push->("$p->{tag}, auto: Jain's fairness index", '>= 0.95',
                ratio3($au->{jain}), defined $au->{jain} ? $au->{jain} >= 0.95 : undef);
    }
}

1;
