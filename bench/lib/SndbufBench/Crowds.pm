package SndbufBench::Crowds;
# bench/run's part `crowds`: crowds of downloads that share one 100 Mbit/s,
# 100 ms bottleneck (a drop-tail queue of one BDP), as a download site
# sees them: from many client addresses or from one, beside a bulk flow
# Apache does not serve, spread over several child processes, mixed, and
# with half the clients behind a slower link of their own. Each cell runs
# its configurations side by side (autotuning, auto, the best fixed size
# for the crowd's size, and any added ones), one after another on the same
# lab; --repeat N runs each cell N times, the order rotating, and reports
# each figure's median and each ratio as the median of the rounds' own.
#
# Figures per cell and configuration, over the window (10-39 s of 40 s,
# from the first download's start): goodput (the sum of the flows'
# delivery rates, `delivered` x `mss` from ss in the server namespace,
# every 0.5 s), Jain's index over the crowd's flows, Σw (skmem w summed
# over the crowd's server sockets, averaged over the samples), mean srtt
# (over sockets and samples), the share of the crowd's data segments
# retransmitted, and beside a foreign flow its rate (from its own server
# socket, the same way) and the crowd's share of what the two delivered.
# Once per configuration, mid-window, ss -p says which child holds each
# download's socket.
#
# --crowds a,b: cells by name (many20, one100, many20-cubicflow,
# many20-event4, mixed20, many20-subeach, many20-stock, ...) or by tag
# (20, 100, base, foreign, procs, mixed, profiles, bbr: every cell but the
# profiles, issue: the four cells of the issue's first table). The profile
# cells (cubic, stock) change global sysctls (SndbufTune::WanLab::profile
# puts them back): run them alone.
#
# More configurations: --crowd-config NAME=BODY, or a %CONFIGS entry with
# crowds => 1 (SndbufBench::Common); both are held to the targets as auto
# is. Each configuration of a cell takes 43-48 s (a foreign flow's lead
# included): the 19 cells under bbr took 43 minutes, all 23 about 52;
# --quick runs the issue's four cells, 25 s each, in about 6.
use strict;
use warnings;
use utf8;

use Time::HiRes ();

use SndbufBench::Common qw(:all);

my %PROFILE = (cubic => { cc => 'cubic', wmem_max => undef },
               stock => { cc => 'cubic', wmem_max => 212992 });

# The path every cell shares; the queue is wanlab's default, one BDP.
my %P = (rtt => 100, rate => 100, mtu => 1500);

# [run length, window start, window end] in seconds: full, --quick
my @TIMES = ([40, 10, 39], [25, 8, 24]);

# A foreign flow starts this long before the crowd, on this port.
my $FOREIGN_LEAD = 5;
my $FOREIGN_PORT = 5201;

# Half the clients behind a link of their own: each its own 2 Mbit/s
# (queue one BDP; its fair share of the main link would be 5), or all ten
# one shared 30 Mbit/s link (a second crowd, in series with the first).
# Their addresses are 198.18.1.17-26, inside 198.18.1.16/28.
my %SUB = (each => { first => 17, link => sub { "198.18.1.$_[0]/32:2:25000" } },
           shared => { first => 17, link => sub { '198.18.1.16/28:30:375000' } });

our @CELLS = (
    (map { my $n = $_;
           ({ name => "many$n", n => $n, from => 'many', tags => ['base'] },
            { name => "one$n", n => $n, from => 'one', tags => ['base'] }) }
     20, 100),
    (map { my $n = $_; map { my $f = $_; map {
         { name => "$f$n-${_}flow", n => $n, from => $f, foreign => $_,
           tags => ['foreign'] } } qw(cubic bbr) } qw(many one) } 20, 100),
    (map { ({ name => "many$_-event4", n => $_, from => 'many', children => 4,
              tags => ['procs'] },
            { name => "many$_-prefork", n => $_, from => 'many',
              mpm => 'prefork', tags => ['procs'] }) } 20, 100),
    { name => 'mixed20', n => 20, from => 'mixed', tags => ['mixed'] },
    { name => 'many20-subeach', n => 20, from => 'sub', sub => 'each',
      tags => ['mixed'] },
    { name => 'many20-subshared', n => 20, from => 'sub', sub => 'shared',
      tags => ['mixed'] },
    (map { my $n = $_; map {
         { name => "many$n-$_", n => $n, from => 'many', profile => $_,
           tags => ['profiles'] } } qw(cubic stock) } 20, 100),
);
my %ISSUE = map { $_ => 1 } qw(many20 one20 many20-cubicflow one20-cubicflow);
for my $c (@CELLS) {
    $c->{best} = $c->{n} >= 100 ? 'fixed16k' : 'fixed64k';
    push @{ $c->{tags} }, $c->{n}, $c->{profile} ? () : 'bbr',
        $ISSUE{ $c->{name} } ? 'issue' : ();
    $c->{quick} = $ISSUE{ $c->{name} };
    $c->{label} = join ', ', "$c->{n} downloads",
        { many => "from $c->{n} addresses", one => 'from one address',
          mixed => '10 from one address, 10 from ten others',
          sub => "from $c->{n} addresses, ten behind "
                 . ($c->{sub} && $c->{sub} eq 'each'
                    ? 'a 2 Mbit/s link each' : 'one shared 30 Mbit/s link') }
            ->{ $c->{from} },
        $c->{foreign} ? "beside a $c->{foreign} flow" : (),
        $c->{children} ? "$c->{children} event children"
            : $c->{mpm} ? "$c->{mpm}" : 'one event child',
        $c->{profile} ? "profile $c->{profile}" : 'bbr';
}

# The keys of its labs' health in $RES{health} (the fidelity table).
sub health_keys { map { "crowds $_->{name}" } @CELLS }

sub run_times { @{ $TIMES[$Q ? 1 : 0] } }

# The configurations of a cell: autotuning, auto, the best fixed size,
# then those added for crowds (crowds => 1); --configs keeps some.
sub cell_configs {
    my $c = shift;
    my @extra = grep { $CONFIGS{$_}{crowds} } @CONFIG_ORDER;
    return configs_of([[qw(nomod auto), $c->{best}, @extra],
                       [qw(nomod auto), $c->{best}, @extra]]);
}

# Held to the targets: auto and the added ones.
sub judged { grep { $_ eq 'auto' || $CONFIGS{$_}{crowds} } @_ }

sub selected {
    my %want = map { $_ => 1 } split /,/, $opt{crowds} // '';
    my @known = (map({ $_->{name} } @CELLS), map { @{ $_->{tags} } } @CELLS);
    for my $w (keys %want) {
        die "bench/run: --crowds: no cell or tag '$w' (cells: "
            . join(' ', map { $_->{name} } @CELLS) . ")\n"
            unless grep { $_ eq $w } @known;
    }
    return grep { %want ? $want{ $_->{name} } || grep({ $want{$_} } @{ $_->{tags} })
                        : !$Q || $_->{quick} } @CELLS;
}

# Each download's client address (an index into the lab's client_addrs,
# from 1) and group; the lab's up options for them.
sub flows_of {
    my $c = shift;
    my $n = $c->{n};
    if ($c->{from} eq 'one') {
        return ([map { { addr => 1, group => 'one' } } 1 .. $n], clients => 1);
    }
    if ($c->{from} eq 'mixed') {
        my $h = $n / 2;
        return ([(map { { addr => 1, group => 'one' } } 1 .. $h),
                 map { { addr => 1 + $_, group => 'many' } } 1 .. $n - $h],
                clients => 1 + $n - $h);
    }
    if ($c->{from} eq 'sub') {
        my ($h, $s) = ($n / 2, $SUB{ $c->{sub} });
        my @sub = map { $s->{first} + $_ - 1 } 1 .. $n - $h;
        my %link = map { $s->{link}->($_) => 1 } @sub;
        return ([(map { { addr => $_, group => 'main' } } 1 .. $h),
                 map { { addr => $_, group => 'sub' } } @sub],
                clients => $sub[-1], sub_links => [sort keys %link]);
    }
    return ([map { { addr => $_, group => 'many' } } 1 .. $n], clients => $n);
}

sub run {
    my $t0 = Time::HiRes::time();
    my @cells = selected();
    say_('crowds: ' . join(' ', map { $_->{name} } @cells));
    run_cell($_) for @cells;
    $RES{crowds}{wall_s} = Time::HiRes::time() - $t0 if $RES{crowds};
}

sub run_cell {
    my $c = shift;
    my @configs = cell_configs($c);
    return unless @configs;
    my ($D, $W, $E) = run_times();
    my ($flows, %up) = flows_of($c);
    my $limit = goodput_limit_bps($P{rate} * 1e6, $P{mtu});
    # more than the whole link could carry in the run: no download ends
    my $file = data_file(int($limit / 8 * ($D + 10) / 1048576 + 1) * 1048576);
    my $rounds = $opt{repeat} || 1;
    say_("crowd $c->{name}: $c->{label}; window $W-$E s of $D s; @configs"
         . ($rounds > 1 ? "; $rounds rounds" : '') . '; load '
         . (split ' ', shell('cat /proc/loadavg'))[0]);
    my $lab = SndbufTune::WanLab->up(rtt_ms => $P{rtt}, rate_mbit => $P{rate},
                                     mtu => $P{mtu}, %up);
    my $profile = $c->{profile} && $lab->profile(%{ $PROFILE{ $c->{profile} } });
    my $res = $RES{crowds}{cells}{ $c->{name} } = {
        configs => \@configs, n => $c->{n}, best => $c->{best},
        label => $c->{label}, window => [$W, $E, $D], rounds => [],
        queue_bytes => $lab->status->{queue_bytes} };
    for my $i (0 .. $rounds - 1) {
        my %r;
        for my $cfg (round_order(\@configs, $i)) {
            $r{$cfg} = measure($lab, $c, $cfg, $flows, $file);
            log_run($c, $cfg, $r{$cfg});
        }
        push @{ $res->{rounds} }, \%r;
    }
    undef $profile;
    lab_down($lab, "crowds $c->{name}");
    summarise($res, $c);
}

# One configuration's run of a cell on its lab.
sub measure {
    my ($lab, $c, $cfg, $flows, $file) = @_;
    my ($D, $W, $E) = run_times();
    my %srv = (rate => $P{rate}, links => { '/data.bin' => $file },
               processes => 1);
    if (($c->{mpm} // '') eq 'prefork') {
        %srv = (%srv, mpm => 'prefork', processes => $c->{n} + 4);
    }
    elsif ($c->{children}) {
        %srv = (%srv, processes => $c->{children}, spread => $c->{n});
    }
    my $restore = config_sysctls($lab, $cfg);
    my $srv = wan_server($lab, $cfg, %srv);
    my $base = relay_reset($lab);
    my $bulk;
    if ($c->{foreign}) {
        $bulk = $lab->bulk_start(cc => $c->{foreign}, port => $FOREIGN_PORT,
                                 seconds => $D + $FOREIGN_LEAD + 10);
        sleep $FOREIGN_LEAD;
    }
    my @addrs = $lab->client_addrs;
    my @jobs = map {
        $lab->curl_start(url => $srv->url('/data.bin'), max_time => $D + 30,
                         source => $addrs[ $_->{addr} - 1 ])
    } @$flows;
    my %group = map { $jobs[$_]{local_port} => $flows->[$_]{group} } 0 .. $#jobs;
    my ($samples, $pids) = $lab->sample_crowd(jobs => \@jobs, seconds => $D,
        foreign_port => $FOREIGN_PORT, procs_at => ($W + $E) / 2);
    $lab->curl_kill($_) for @jobs;
    # a download that ended before the window closed (done or failed)
    # would make the crowd's figures undercount: say so
    my @early = grep { defined $_->{exitcode} } map { $lab->curl_wait($_) } @jobs;
    $lab->bulk_stop($bulk) if $bulk;
    my $health = cell_health($lab, $base, "crowds $c->{name}", $cfg);
    $srv->stop;
    $restore->();
    my $f = SndbufTune::WanLab->crowd_figures($samples, \%group, $W, $E);
    $f->{per_child} = $pids;
    $f->{early} = scalar @early;
    $f->{early_why} = $early[0]{error} // "curl exit $early[0]{exitcode}" if @early;
    $f->{relay} = $health->{note};
    $f->{load} = (split ' ', shell('cat /proc/loadavg'))[0];
    return $f;
}

sub log_run {
    my ($c, $cfg, $f) = @_;
    say_(sprintf '  %-9s %d flows from %d addresses: %6s Mbit/s  Jain %.3f  '
         . 'Σw %6s MiB  srtt %5.1f ms  rtx %5s%%%s  children %s%s%s', $cfg,
         $f->{flows}, $f->{peers}, mbit($f->{agg_bps}),
         $f->{jain} // 0, mib($f->{wsum_avg}), $f->{srtt_ms} // 0,
         pct($f->{rtx}),
         $c->{foreign} ? sprintf('  other %s Mbit/s, share %s%%',
                                 mbit($f->{foreign_bps}), pct($f->{share})) : '',
         per_child($f->{per_child}), $f->{relay},
         $f->{early} ? "  [$f->{early} downloads ended early: $f->{early_why}]"
                     : '');
}

my @KEYS = qw(agg_bps jain wsum_avg srtt_ms rtx minrtt_ms foreign_bps share);

# A cell's medians over its rounds (figures), and its ratios as the
# medians of the rounds' own: goodput / autotuning's, Σw / the best fixed
# size's and / autotuning's, the foreign flow's rate / beside autotuning,
# retransmitted share / autotuning's, and per group goodput / autotuning's.
sub summarise {
    my ($res, $c) = @_;
    my @R = @{ $res->{rounds} };
    for my $cfg (@{ $res->{configs} }) {
        my %m = map { my $k = $_; ($k => median(map { $_->{$cfg}{$k} } @R)) } @KEYS;
        my %gs = map { %{ $_->{$cfg}{groups} || {} } } @R;
        for my $g (keys %gs) {
            $m{groups}{$g} = { map { my $k = $_;
                ($k => median(map { (($_->{$cfg}{groups} || {})->{$g} || {})->{$k} } @R))
            } @KEYS, 'flows' };
            $m{groups}{$g}{x} = median(map {
                div((($_->{$cfg}{groups} || {})->{$g} || {})->{agg_bps},
                    (($_->{nomod}{groups} || {})->{$g} || {})->{agg_bps}) } @R);
        }
        my $ratio = sub { my ($k, $ref) = @_;
            median(map { div($_->{$cfg}{$k}, ($_->{$ref} || {})->{$k}) } @R) };
        $m{x} = $ratio->('agg_bps', 'nomod');
        $m{w_best} = $ratio->('wsum_avg', $c->{best});
        $m{w_nomod} = $ratio->('wsum_avg', 'nomod');
        $m{foreign_x} = $ratio->('foreign_bps', 'nomod');
        $m{rtx_x} = median(map { my $n = ($_->{nomod} || {})->{rtx};
            defined $n && defined $_->{$cfg}{rtx}
                ? $_->{$cfg}{rtx} / ($n || 1e-4) : undef } @R);
        $m{per_child} = $R[-1]{$cfg}{per_child};
        $m{early} = max_of(map { $_->{$cfg}{early} } @R);
        $res->{cells}{$cfg} = \%m;
    }
}

sub section {
    my $r = $RES{crowds} or return { title => 'Crowds', tables => [] };
    my (@rows, @grows, %cfgs);
    for my $c (@CELLS) {
        my $cell = $r->{cells}{ $c->{name} } or next;
        $cfgs{$_} = 1 for @{ $cell->{configs} };
        # a cell measured more often than the others (a run merged with
        # bench/run --report) says so
        my $k = @{ $cell->{rounds} || [] };
        my $name = "`$c->{name}`" . ($k > 1 ? " (median of $k)" : '');
        for my $cfg (@{ $cell->{configs} }) {
            my $m = $cell->{cells}{$cfg} or next;
            push @rows, [ $name, cfg_cell($cfg), mbit($m->{agg_bps}),
                xr($m->{x}, 3), ratio3($m->{jain}), mib($m->{wsum_avg}),
                xr($m->{w_best}), xr($m->{w_nomod}),
                fmt1($m->{srtt_ms}), fmt1($m->{minrtt_ms}), pct2($m->{rtx}),
                $c->{foreign} ? (mbit($m->{foreign_bps}),
                                 pct($m->{share}) . '%') : ('', ''),
                per_child($m->{per_child}) ];
            for my $g (sort keys %{ $m->{groups} || {} }) {
                my $x = $m->{groups}{$g};
                push @grows, [ "`$c->{name}`", cfg_cell($cfg), $g,
                    $x->{flows} // 'n/a', mbit($x->{agg_bps}),
                    xr($x->{x}, 3), ratio3($x->{jain}),
                    mib($x->{wsum_avg}), fmt1($x->{srtt_ms}),
                    fmt1($x->{minrtt_ms}), pct2($x->{rtx}) ];
            }
        }
    }
    my $any = (values %{ $r->{cells} })[0] || {};
    my ($W, $E, $D) = @{ $any->{window} || [] };
    my ($n) = sort { $b <=> $a } map { scalar @{ $_->{rounds} || [] } }
                                 values %{ $r->{cells} };
    $n //= 0;
    my @t = ({ title => 'Crowds: every cell', h => 3,
        intro => 'Cells: ' . join('; ', map { "`$_->{name}`: $_->{label}" }
                                        grep { $r->{cells}{ $_->{name} } } @CELLS) . '.',
        head => ['cell', 'config', 'goodput Mbit/s', 'vs `nomod`', 'Jain',
                 'Σw MiB', 'vs best fixed', 'vs `nomod`', 'srtt ms',
                 'min RTT ms', 'retransmitted %', 'other flow Mbit/s',
                 'crowd\'s share', 'downloads per child'],
        align => 'llrrrrrrrrrrrl', rows => \@rows });
    push @t, { title => 'Crowds: the groups of the mixed cells', h => 3,
        intro => '`one`: the downloads from one address, `many`: one each from '
            . 'the others; `main`: behind the shared bottleneck only, `sub`: '
            . 'behind a slower link of their own too. Goodput vs `nomod`: the '
            . 'group\'s against the same group\'s under autotuning.',
        head => ['cell', 'config', 'group', 'flows', 'goodput Mbit/s',
                 'vs `nomod`', 'Jain', 'Σw MiB', 'srtt ms', 'min RTT ms',
                 'retransmitted %'],
        align => 'lllrrrrrrrr', rows => \@grows } if @grows;
    return { title => 'Crowds of many clients',
        intro => sprintf('Downloads through one %d Mbit/s, %d ms path (a drop-tail '
            . 'queue of one BDP, %s KiB), started one after another as fast as '
            . 'the machine spawns them, each from its own client address of '
            . 'the client namespace (`wanlab up --clients`) or all from one; '
            . 'Apache\'s event MPM with one child unless the cell says otherwise. '
            . 'Figures over %d-%d s of %d s: goodput, the sum of the flows\' '
            . 'delivery rates (ss `delivered` × `mss`, every 0.5 s); Σw, skmem '
            . '`w` summed over the crowd\'s server sockets, averaged over the '
            . 'samples; srtt, the sockets\' smoothed RTT averaged over sockets '
            . 'and samples; retransmitted, the share of the crowd\'s data '
            . 'segments in the window; beside a foreign bulk flow (wanperf, '
            . 'started %d s before the crowd, its congestion control set on its '
            . 'socket), its rate over the same window and the crowd\'s share of '
            . 'what both delivered; downloads per child: ss -p, mid-window.%s'
            . ' Wall time of the part: %.0f s.',
            $P{rate}, $P{rtt}, kib($any->{queue_bytes}),
            $W // 0, $E // 0, $D // 0, $FOREIGN_LEAD,
            $n > 1 ? ' A cell marked (median of N) was measured N times, the '
                . 'order rotating: figures are the rounds\' medians, ratios the '
                . 'medians of the rounds\' own.'
                : '', $r->{wall_s} // 0)
            . "\n\n" . config_legend(grep { $cfgs{$_} } @CONFIG_ORDER),
        tables => \@t };
}

sub fmt1 { defined $_[0] ? sprintf('%.1f', $_[0]) : 'n/a' }
sub xr { defined $_[0] ? sprintf('%.*fx', $_[1] // 2, $_[0]) : 'n/a' }

# Downloads per process, largest first: each for a few, else how many
# processes and the most one held (prefork: one each).
sub per_child {
    my @n = @{ $_[0] || [] };
    return '?' unless @n;
    return join '/', @n if @n <= 8;
    return sprintf '%d processes, at most %d', scalar @n, $n[0];
}
sub pct2 { defined $_[0] ? sprintf('%.2f', 100 * $_[0]) : 'n/a' }

# The issue's targets, for auto and the added configurations, in every
# cell that ran.
sub targets {
    my ($push) = @_;
    my $r = $RES{crowds} or return;
    for my $c (@CELLS) {
        my $cell = $r->{cells}{ $c->{name} } or next;
        my $m = $cell->{cells};
        my ($nm, $best) = map { $m->{$_} || {} } 'nomod', $c->{best};
        for my $cfg (judged(@{ $cell->{configs} })) {
            my $x = $m->{$cfg} || {};
            my $what = "crowd $c->{name}, `$cfg`";
            my $t = sub { my ($k, $want, $got, $ok, $note) = @_;
                $push->("$what: $k", $want, $got, defined $ok ? 0 + !!$ok : undef,
                        $note) };
            # the path's min RTT: the least any configuration's crowd saw
            # (a crowd that starts beside a full queue never sees it)
            my ($min) = sort { $a <=> $b } grep { defined }
                map { (($_->{groups} || {})->{main} || $_)->{minrtt_ms} }
                values %$m;
            my $srtt = sub { my $s = shift;
                $t->('srtt vs min RTT', '<= +45 ms',
                     defined $s && defined $min ? sprintf('%+.1f ms', $s - $min)
                                                : 'n/a',
                     defined $s && defined $min ? $s <= $min + 45 : undef,
                     sprintf('%s ms, min RTT %s ms', fmt1($s), fmt1($min))) };
            my $wbest = sub {
                $t->("Σw vs the best fixed size (`$c->{best}`)", '<= 2x',
                     xr($x->{w_best}),
                     defined $x->{w_best} ? $x->{w_best} <= 2 : undef,
                     sprintf('%s MiB against %s', mib($x->{wsum_avg}),
                             mib($best->{wsum_avg}))) };
            if ($c->{profile}) {
                $t->('goodput vs autotuning', '>= 0.98x', xr($x->{x}, 3),
                     defined $x->{x} ? $x->{x} >= 0.98 : undef);
                $t->('Σw vs autotuning', '<= 0.5x', xr($x->{w_nomod}),
                     defined $x->{w_nomod} ? $x->{w_nomod} <= 0.5 : undef);
                $t->("Jain's index", '>= 0.95', ratio3($x->{jain}),
                     defined $x->{jain} ? $x->{jain} >= 0.95 : undef);
                $t->('retransmitted vs autotuning', '<= 2x', xr($x->{rtx_x}),
                     defined $x->{rtx_x} ? $x->{rtx_x} <= 2 : undef,
                     sprintf('%s%% against %s%%', pct2($x->{rtx}), pct2($nm->{rtx})));
                next;
            }
            if ($c->{foreign}) {
                my $fair = 0.9 * $c->{n} / ($c->{n} + 1);
                $t->("the crowd's share of the link", sprintf('>= %.3f', $fair),
                     ratio3($x->{share}), defined $x->{share} ? $x->{share} >= $fair
                                                              : undef,
                     sprintf('0.9 x %d/%d; the other flow %s Mbit/s', $c->{n},
                             $c->{n} + 1, mbit($x->{foreign_bps})));
                $t->("the other flow's rate vs beside autotuning", '>= 1x',
                     xr($x->{foreign_x}),
                     defined $x->{foreign_x} ? $x->{foreign_x} >= 1 : undef,
                     sprintf('%s against %s Mbit/s', mbit($x->{foreign_bps}),
                             mbit($nm->{foreign_bps})));
                $wbest->();
                $srtt->($x->{srtt_ms});
                next;
            }
            $t->('goodput vs autotuning', '>= 0.98x', xr($x->{x}, 3),
                 defined $x->{x} ? $x->{x} >= 0.98 : undef);
            $wbest->();
            if ($c->{sub}) {
                my ($mg, $sg) = map { ($x->{groups} || {})->{$_} || {} } qw(main sub);
                $t->('goodput behind their own link vs autotuning', '>= 0.98x',
                     xr($sg->{x}, 3), defined $sg->{x} ? $sg->{x} >= 0.98
                                                             : undef,
                     'not steered by the shared queue');
                $srtt->($mg->{srtt_ms});
                $t->('retransmitted', '<= 1%', pct2($x->{rtx}) . '%',
                     defined $x->{rtx} ? $x->{rtx} <= 0.01 : undef);
                my $j = (sort { $a <=> $b } grep { defined } $mg->{jain}, $sg->{jain})[0];
                $t->("Jain's index within each group", '>= 0.95', ratio3($j),
                     defined $j ? $j >= 0.95 : undef);
                next;
            }
            $srtt->($x->{srtt_ms});
            $t->('retransmitted', '<= 1%', pct2($x->{rtx}) . '%',
                 defined $x->{rtx} ? $x->{rtx} <= 0.01 : undef);
            $t->("Jain's index", '>= 0.95', ratio3($x->{jain}),
                 defined $x->{jain} ? $x->{jain} >= 0.95 : undef);
        }
    }
}

1;
