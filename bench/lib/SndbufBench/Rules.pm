package SndbufBench::Rules;
# bench/run's part `rules`: loopback req/s with 1, 1000 and 100,000
# SndbufTuneNetwork rules; memory and startup with 1000 vhosts x 20,000
# rules.
use strict;
use warnings;
use utf8;

use Time::HiRes ();
use SndbufBench::Common qw(:all);

our %RULES = (counts => [1, 1000, 100000], rounds => [8, 2], secs => [3, 2],
             vhosts => 1000, mem_rules => 20000);

my $RULES_BODY = "SndbufTune 64k\nSndbufTuneNetwork 127.0.0.0/8 128k\n"
               . "Include \"\@DIR\@/rules.conf\"\n";

# Rounds of fresh servers, as in the loopback part: one server per rule
# count for the whole run gave five rounds of one server from 31,131 to
# 37,929 req/s, and whichever server ran fast or slow throughout carried
# that into every median (12-05: 8.3% apart, 0.7% on 12-03, the lookup
# unchanged).  Each round starts its own, runs each once (round_order),
# and is judged by its own ratios; the control, a second server with 1
# rule, shows what is left.
sub run {
    my %builds = (new => $SO);
    $builds{old} = $opt{'old-module'} if $opt{'old-module'};
    my @builds = grep { $builds{$_} } qw(new old);
    my @counts = @{ $RULES{counts} };
    my ($rounds, $secs) = (pick($RULES{rounds}), pick($RULES{secs}));
    $RES{rules} = { builds => \@builds, counts => \@counts, reps => $rounds,
                    secs => $secs, fresh => 1 };
    $RES{rules}{old_sha256} = sha256_file($builds{old}) if $builds{old};
    say_("rules: req/s with @counts SndbufTuneNetwork rules and a control "
         . "(wrk, ${secs}s, $rounds rounds of fresh servers; builds: @builds)");
    my %make;
    for my $build (@builds) {
        for my $n (@counts) {
            $make{"$build-$n"} = [ $builds{$build}, $n ];
        }
    }
    $make{control} = [ $SO, $counts[0] ];
    my @keys = ((map { my $b = $_; map { "$b-$_" } @counts } @builds), 'control');
    for my $i (0 .. $rounds - 1) {
        my @order = round_order(\@keys, $i);
        my %srv = map { $_ => loopback_server("rules-$_-$i", module => $make{$_}[0],
            body => $RULES_BODY, rules => $make{$_}[1], start_timeout => 300) } @order;
        my $round = wrk_round(\%srv, \@order, $secs, $WRK_CONNS, $i + 1);
        $_->stop for values %srv;
        push @{ $RES{rules}{rps}{$_} }, $round->{$_} for @keys;
    }
    for my $k (@keys) {
        my $base = $k eq 'control' ? 'new' : ($k =~ /^(\w+)-/)[0];
        my @one = @{ $RES{rules}{rps}{"$base-$counts[0]"} };
        my @rps = @{ $RES{rules}{rps}{$k} };
        $RES{rules}{ratio}{$k} = median(map { $rps[$_] / $one[$_] } 0 .. $#rps);
    }

    # memory and startup: 1000 vhosts (each with a SndbufTune line) x 20000
    # rules in the main server; against the same vhosts without the module
    my ($nv, $nr) = @RULES{qw(vhosts mem_rules)};
    say_("rules: apache2 -t and a start with $nv vhosts x $nr rules");
    for my $build ('nomod', @builds) {
        my $mod = $build eq 'nomod' ? 0 : $builds{$build};
        my $vhosts = join '', map {
            "<VirtualHost \@LISTEN\@>\n    ServerName v$_.test\n"
            . ($mod ? '    SndbufTune ' . (16 + $_ % 64) . "k\n" : '')
            . "</VirtualHost>\n" } 1 .. $nv;
        my $s = SndbufTune::Server->new(name => "bench-rules-mem-$build",
            access_log => 0, log_level => 'warn', threads => 32, processes => 1,
            sndbuf_tune => $mod ? 1 : 0,
            body => ($mod ? $RULES_BODY : '') . $vhosts);
        write_rules($s->dir . '/rules.conf', $nr) if $mod;
        local $ENV{SBT_MODULE} = $mod if $mod;
        my %m;
        {
            # GNU time (the Debian package time) for the peak RSS, if here
            local $ENV{SBT_HTTPD_WRAPPER} = '/usr/bin/time -f maxrss_kb=%M'
                if -x '/usr/bin/time';
            my $t0 = Time::HiRes::time();
            my ($rc, $out) = $s->syntax_check;
            $m{check_s} = Time::HiRes::time() - $t0;
            ($m{check_rss_kb}) = $out =~ /maxrss_kb=(\d+)/;
            die "bench/run: apache2 -t ($build): $out\n" if $rc;
        }
        my $t0 = Time::HiRes::time();
        $s->start(timeout => 300)
            or die "bench/run: apache2 ($build, $nv vhosts): ${\ $s->error}\n";
        $m{start_s} = Time::HiRes::time() - $t0;
        $m{parent_rss_kb} = rss_kb($s->pid);
        $m{child_rss_kb} = max_of(map { rss_kb($_) } $s->child_pids);
        $s->stop;
        $RES{rules}{mem}{$build} = \%m;
        say_(sprintf '  %-5s apache2 -t %.2f s, peak RSS %s MiB; start %.2f s; '
             . 'RSS parent %s MiB, child %s MiB', $build, $m{check_s},
             defined $m{check_rss_kb} ? mib($m{check_rss_kb} * 1024) : 'n/a', $m{start_s},
             mib($m{parent_rss_kb} * 1024), mib(($m{child_rss_kb} // 0) * 1024));
    }
}

sub rss_kb {
    my $pid = shift or return undef;
    open my $fh, '<', "/proc/$pid/status" or return undef;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)/ }
    return undef;
}

# A count's ratio to 1 rule: the median of the rounds' own (a run of
# fresh servers), else the ratio of the medians (a run from before).
sub count_ratio {
    my ($r, $key, $one) = @_;
    return $r->{ratio}{$key} if $r->{ratio};
    return div(median(@{ $r->{rps}{$key} || [] }), median(@{ $r->{rps}{$one} || [] }));
}

sub section {
    my $r = $RES{rules};
    my @builds = @{ $r->{builds} };
    my %bl = (new => 'this build', old => 'before the fix',
              nomod => 'module not loaded');
    my $med = sub { median(@{ $r->{rps}{$_[0]} || [] }) };
    my $one = $r->{counts}[0];
    my @rows = map { my $n = $_; [ $n, map {
        (sprintf('%.0f', $med->("$_-$n") // 0),
         ratio3(count_ratio($r, "$_-$n", "$_-$one")) . 'x') } @builds ] }
        @{ $r->{counts} };
    push @rows, [ "$one (control: a second server)",
                  sprintf('%.0f', $med->('control') // 0),
                  ratio3($r->{ratio}{control}) . 'x',
                  map { ('', '') } 2 .. @builds ] if $r->{ratio};
    my @t;
    push @t, { title => 'network rules: small-file req/s by number of rules',
        intro => "Servers on loopback (as in the loopback part below: "
            . "event MPM, one process, 32 threads, pinned to CPU 0, wrk -t1 "
            . "-c$WRK_CONNS on CPU 1) with `SndbufTune 64k`, "
            . "`SndbufTuneNetwork 127.0.0.0/8 128k` (the client's rule) and 1, "
            . "1000 or 100,000 more rules (/24s in 10/8, then /32s in 11/8), "
            . ($r->{fresh}
               ? "and a control, a second server with 1 rule: $r->{reps} rounds, "
                 . "each starting fresh servers and running each for "
                 . "$r->{secs} s, in an order that rotates; req/s is the "
                 . "median of the rounds, \"vs 1 rule\" the median of the "
                 . "rounds' own ratios"
               : "$r->{secs} s runs taking turns, the median of $r->{reps}")
            . ($r->{old_sha256} ? '; before the fix: the same with the build '
               . 'given to `--old-module` (sha256 `' . substr($r->{old_sha256}, 0, 12)
               . '`…)' : '') . '.',
        head => ['rules', map { ("req/s, $bl{$_}", 'vs 1 rule') } @builds],
        align => 'l' . ('rr' x @builds),
        rows => \@rows };
    my $base = $r->{mem}{nomod} || {};
    push @t, { title => "network rules: memory and startup, $RULES{vhosts} "
                      . "vhosts x $RULES{mem_rules} rules",
        intro => "$RULES{vhosts} name-based vhosts, each with a `SndbufTune` "
            . "line, and $RULES{mem_rules} `SndbufTuneNetwork` rules in the "
            . "main server; `module not loaded`: the same vhosts without the "
            . "module's lines. `apache2 -t`: wall time and peak RSS "
            . "(`/usr/bin/time -f %M`); start: from `apache2 -k start` until "
            . "it answers; RSS of the parent and of its child (`VmRSS`).",
        head => ['build', 'apache2 -t s', '-t peak RSS MiB', 'start s',
                 'parent RSS MiB', 'child RSS MiB', 'child RSS vs no module'],
        align => 'lrrrrrr',
        rows => [ map { my $m = $r->{mem}{$_}; !$m ? () : [
            $bl{$_}, sprintf('%.2f', $m->{check_s}),
            defined $m->{check_rss_kb} ? mib($m->{check_rss_kb} * 1024) : 'n/a',
            sprintf('%.2f', $m->{start_s}), mib(($m->{parent_rss_kb} // 0) * 1024),
            mib(($m->{child_rss_kb} // 0) * 1024),
            ratio(div($m->{child_rss_kb}, $base->{child_rss_kb})) . 'x' ] }
            'nomod', @builds ] };
    return { title => 'Network rules', tables => \@t };
}

sub targets {
    my ($push) = @_;
    my $r = $RES{rules} || {};
    my @counts = @{ $RULES{counts} };
    my @x = map { count_ratio($r, "new-$_", "new-$counts[0]") } @counts;
    my @have = grep { defined } @x;
    my $spread = @have == @x ? max_of(@x) / (sort { $a <=> $b } @x)[0] - 1 : undef;
    my $ctl = ($r->{ratio} || {})->{control};
    $push->('network rules: req/s with 1, 1000 and 100,000 rules', 'within 5%',
            defined $spread ? sprintf('%.1f%%', 100 * $spread) : 'n/a',
            defined $spread ? $spread <= 0.05 : undef,
            @have ? 'vs 1 rule ' . join(' / ', map { ratio3($_) } @have)
                    . (defined $ctl ? '; control ' . ratio3($ctl) : '') : '');
}

1;
