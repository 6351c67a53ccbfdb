package SndbufBench::Single;
# bench/run's part `single`: one curl download per path x configuration
# through the WAN lab; steady goodput as % of the link, memory.
use strict;
use warnings;
use utf8;

use SndbufBench::Common qw(:all);

our @SINGLE_CONFIGS = ([qw(core16k core256k none unset fixed16k auto autobw)],
                      [qw(core16k none auto autobw)]);

sub run {
    my @configs = configs_of(\@SINGLE_CONFIGS);
    my @paths = $opt{paths} ? map { $PATH{$_} } split /,/, $opt{paths} : @PATHS;
    $RES{single} = { configs => \@configs, paths => [ map { $_->{name} } @paths ],
                     cells => {} };
    run_path($_, \@configs) for @paths;
}

sub run_path {
    my ($p, $configs) = @_;
    my ($W, $S) = window_times($p);
    my $limit = goodput_limit_bps($p->{rate} * 1e6, $p->{mtu});
    my $size = int($limit / 8 * ($W + $S) / 1048576 + 1) * 1048576;
    my $cap = $W + $S + ($Q ? 1.5 : 3);
    my $file = data_file($size);
    say_("path $p->{label}: up (limit ${\ mbit($limit)} Mbit/s goodput; "
         . "download ${\ mib($size)} MiB, warm-up ${W}s, window ${S}s, "
         . "cap ${cap}s)");
    my $lab = lab_up($p);
    for my $cfg (@$configs) {
        my $srv = wan_server($lab, $cfg, rate => $p->{rate},
                             links => { '/data.bin' => $file });
        my $base = relay_reset($lab);
        my $d = $lab->download(url => $srv->url('/data.bin'),
                               max_time => $cap, interval => 0.2);
        my $health = cell_health($lab, $base, $p->{name}, $cfg);
        my $e = $srv->access_entry_for($d->{port}, 1);
        $srv->stop;
        my $ss = $d->{ss};
        my ($steady, $dt) = steady_rate($ss, $W, $W + $S);
        my $res = $d->{res};
        my $avg = $res->{time_total} && $res->{time_total} > 0
            ? $res->{size_download} / $res->{time_total} : undef;
        my $wmax = max_of(0, map { $_->[1]{w} } @$ss);
        my $tbmax = max_of(0, map { $_->[1]{tb} } @$ss);
        my $last = @$ss ? $ss->[-1][1] : {};
        my %c = (
            steady_bps => defined $steady ? $steady * 8 : undef,
            steady_s => $dt,
            avg_bps => defined $avg ? $avg * 8 : undef,
            complete => ($res->{size_download} // 0) == $size ? 1 : 0,
            bytes => $res->{size_download}, size => $size, cap_s => $cap,
            time_total => $res->{time_total},
            limit_bps => $limit,
            w_peak => $wmax, tb_peak => $tbmax, tb_last => $last->{tb},
            retrans => $last->{retrans} // 0,
            segs => $last->{data_segs_out},
            sndbuf_limited => div($last->{sndbuf_limited_ms}, $last->{busy_ms}),
            samples => scalar @$ss,
            notes => $e ? { map { $_ => $e->{$_} } qw(policy effective
                            rtt_us bw_bps retunes limited_ms) } : undef,
        );
        $c{pct} = div($c{steady_bps}, $limit);
        $RES{single}{cells}{ $p->{name} }{$cfg} = \%c;
        say_(sprintf '  %-9s steady %8s Mbit/s (%5s%% of limit)  avg %8s%s  '
             . 'peak w %6s KiB  tb %6s KiB  retrans %d%s', $cfg,
             mbit($c{steady_bps}), pct($c{pct}), mbit($c{avg_bps}),
             $c{complete} ? '' : ' (capped)', kib($wmax), kib($tbmax),
             $c{retrans}, $health->{note});
    }
    $RES{single}{queue_bytes}{ $p->{name} } = $p->{queue_bytes};
    lab_down($lab, $p->{name});
}

sub section {
    my $r = $RES{single};
    my @configs = @{ $r->{configs} };
    my @paths = map { $PATH{$_} } @{ $r->{paths} };
    my $cell = sub { $r->{cells}{ $_[0]{name} }{ $_[1] } };
    my @t;
    push @t, { title => "single downloads: % of the link's goodput limit "
                      . '(steady state)',
        intro => "Steady-state goodput (data the server socket saw "
            . "delivered, `delivered` × `mss` from `ss -tmi`, over the window "
            . "after the warm-up) as a percentage of rate × MSS/MTU. One curl "
            . "download per cell, from the client namespace.",
        head => ['path', map { cfg_cell($_) } @configs],
        align => 'l' . ('r' x @configs),
        rows => [ map { my $p = $_; [ $p->{label}, map {
            my $c = $cell->($p, $_); $c ? pct($c->{pct}) . '%' : '' } @configs ] } @paths ],
        after => config_legend(@configs) };
    if (grep { $_ eq 'none' } @configs) {
        push @t, { title => 'single downloads relative to kernel autotuning '
                          . '(`none`): goodput (peak w)',
            intro => "Side by side, relative to kernel autotuning (`none`): "
                . "steady goodput, and in brackets the per-socket peak of `w` "
                . "(send-buffer memory).",
            head => ['path', map { cfg_cell($_) } @configs],
            align => 'l' . ('r' x @configs),
            rows => [ map { my $p = $_; my $base = $cell->($p, 'none') || {};
                [ $p->{label}, map { my $c = $cell->($p, $_);
                    $c && $base->{steady_bps} && $base->{w_peak}
                        ? sprintf('%.2fx (%.2fx)', ($c->{steady_bps} // 0) / $base->{steady_bps},
                                  $c->{w_peak} / $base->{w_peak}) : '' } @configs ] } @paths ],
            after => "Reading the figures: BBR (the host's congestion control) "
                . "drains its pipe for about 200 ms + 1 RTT every 10 s "
                . "(PROBE_RTT): the 20 s window holds two for every "
                . "configuration, 4–5% of it at 250 ms unless a standing "
                . "queue drains into the link meanwhile; a send buffer carries "
                . "about two thirds of its `tb` (2 × `SO_SNDBUF`; [the rule]"
                . "(auto.md#how-much-a-send-buffer-carries)), and a small one "
                . "up to one packet of 64 KB more, so `core16k` (`tb` 32 KiB) "
                . "moves less than 3 Mbit/s at 250 ms whatever the link." };
    }
    for my $p (@paths) {
        my ($W, $S) = window_times($p);
        my $limit = goodput_limit_bps($p->{rate} * 1e6, $p->{mtu});
        my $bdp = $p->{rate} * 1e6 / 8 * $p->{rtt} / 1000;
        my ($any) = grep { defined } map { $cell->($p, $_) } @configs;
        push @t, { title => $p->{label}, h => 3, console => 0,
            intro => sprintf('Link %s Mbit/s, RTT %s ms, MTU %d (MSS %d): '
                . 'goodput limit %s Mbit/s; BDP %s KiB; bottleneck queue %s '
                . 'KiB. Warm-up %s s, steady window %s s; each download %s MiB, '
                . 'stopped after %s s if not done ("capped").', $p->{rate},
                $p->{rtt}, $p->{mtu}, mss_for_mtu($p->{mtu}), mbit($limit),
                kib($bdp), kib($r->{queue_bytes}{ $p->{name} }), $W, $S,
                mib(($any || {})->{size}), fmt_or(($any || {})->{cap_s})),
            head => ['config', 'steady Mbit/s', '% of limit',
                     'whole download Mbit/s', 'peak `w` KiB', 'peak `tb` KiB',
                     'retransmitted / sent segments',
                     'sndbuf-limited (share of busy time)',
                     'auto notes: effective / bw / retunes'],
            align => 'lrrrrrrrl',
            rows => [ map { my $c = $cell->($p, $_); !$c ? () : do {
                my $n = $c->{notes};
                [ cfg_cell($_), mbit($c->{steady_bps}), pct($c->{pct}) . '%',
                  mbit($c->{avg_bps}) . ($c->{complete} ? '' : ' (capped)'),
                  kib($c->{w_peak}), kib($c->{tb_peak}),
                  "$c->{retrans} / " . fmt_or($c->{segs}),
                  pct($c->{sndbuf_limited}) . '%',
                  $n && ($n->{policy} // '') eq 'auto'
                      ? sprintf('%s KiB / %s Mbit/s / %s', kib($n->{effective}),
                                mbit($n->{bw_bps}), fmt_or($n->{retunes})) : '' ] } } @configs ] };
    }
    return { title => "Single downloads: % of the link's goodput limit",
             tables => \@t };
}

sub targets {
    my ($push) = @_;
    my $c = ($RES{single} || {})->{cells} || {};
    my $w = $c->{windchill} || {};
    my $x = ($w->{autobw} || {})->{pct};
    $push->('seed path, auto (SndbufTuneBandwidth 30mbit): % of limit',
            '>= 95%', pct($x) . '%', defined $x ? $x >= 0.95 : undef,
            sprintf('same window: `none` %s%%, `auto` %s%%. BBR drains the '
                . 'pipe for ~200 ms + 1 RTT every 10 s (PROBE_RTT): the 20 s '
                . 'window holds two, ~4.5%% of it at 250 ms without a '
                . 'standing queue',
                pct(($w->{none} || {})->{pct}), pct(($w->{auto} || {})->{pct})));
    my $core = ($w->{core16k} || {})->{steady_bps};
    my $r = div(($w->{autobw} || {})->{steady_bps}, $core);
    $push->('seed path, auto vs core SendBufferSize 16384', '>= 20x',
            ratio($r) . 'x', defined $r ? $r >= 20 : undef,
            $core ? sprintf('core 16384 moves %s Mbit/s (two thirds of tb 32 '
                . 'KiB per RTT, plus a packet): the ratio is bounded by the link '
                . 'at about %.1fx', mbit($core),
                (($w->{autobw} || {})->{limit_bps} // 0) / $core) : '');
    $x = ($w->{auto} || {})->{pct};
    $push->('seed path, auto measured (no bandwidth): % of limit', '>= 90%',
            pct($x) . '%', defined $x ? $x >= 0.90 : undef);
    my $lf = $c->{longfat} || {};
    for my $cfg (qw(auto autobw)) {
        $r = div(($lf->{$cfg} || {})->{steady_bps}, ($lf->{none} || {})->{steady_bps});
        $push->("long fat path, $cfg vs kernel autotuning", '>= 1.3x',
                ratio($r) . 'x', defined $r ? $r >= 1.3 : undef);
    }
}

1;
