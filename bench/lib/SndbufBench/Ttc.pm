package SndbufBench::Ttc;
# bench/run's part `ttc`: time to complete 256 KiB .. 16 MiB on fresh
# connections, on two paths, the configurations' servers side by side.
use strict;
use warnings;
use utf8;

use SndbufBench::Common qw(:all);

our %TTC = (paths => [qw(windchill wan100)], reps => [5, 3],
           sizes => [256 << 10, 1 << 20, 4 << 20, 16 << 20],
           configs => [[qw(nomod unset auto lowat)], [qw(nomod auto)]]);

# The keys of its labs' health in $RES{health} (the fidelity table).
sub health_keys { map { "ttc-$_" } @{ $TTC{paths} } }

sub run {
    my @configs = configs_of($TTC{configs});
    my $reps = pick($TTC{reps});
    my @sizes = @{ $TTC{sizes} };
    $RES{ttc} = { configs => \@configs, reps => $reps, sizes => \@sizes,
                  paths => [], times => {} };
    for my $name (@{ $TTC{paths} }) {
        my $p = $PATH{$name};
        my $key = "ttc-$name";
        push @{ $RES{ttc}{paths} }, $name;
        say_("time to complete, $p->{label}: " . join(', ', map { size_label($_) } @sizes)
             . " x @configs, $reps times (servers side by side on ports 80..)");
        my $lab = lab_up($p);
        my $port = 80;
        my %srv = map {
            $_ => wan_server($lab, $_, rate => $p->{rate}, port => $port++,
                             threads => 16, processes => 1,
                             links => { map { ("/$_.bin" => data_file($_)) } @sizes })
        } @configs;
        my $base = relay_reset($lab);
        my $t = $RES{ttc}{times}{$name} = {};
        for my $rep (1 .. $reps) {
            for my $size (@sizes) {
                # alternate: the configurations in turn, the other way round
                # every second repetition
                for my $cfg ($rep % 2 ? @configs : reverse @configs) {
                    my $restore = config_sysctls($lab, $cfg);
                    my $r = $lab->curl(url => $srv{$cfg}->url("/$size.bin"),
                                       max_time => 120);
                    $restore->();
                    my $ok = ($r->{http_code} // '') eq '200'
                        && ($r->{size_download} // 0) == $size;
                    say_("  warning: $cfg, ${\ size_label($size)}: curl exit "
                         . "$r->{exit}, status " . fmt_or($r->{http_code})
                         . ', ' . fmt_or($r->{size_download}) . ' bytes')
                        unless $ok;
                    push @{ $t->{$size}{$cfg} }, $ok ? $r->{time_total} + 0 : undef;
                }
            }
            say_("  repetition $rep: " . join('  ', map { my $s = $_;
                sprintf '%s %s', size_label($s), join(' ', map {
                    sprintf '%s %.2fs', $_, $t->{$s}{$_}[-1] // -1 } @configs) } @sizes));
        }
        cell_health($lab, $base, $key, 'all');
        $_->stop for values %srv;
        lab_down($lab, $key);
    }
}

sub ttc_median {
    my ($name, $size, $cfg) = @_;
    my $t = (($RES{ttc} || {})->{times} || {})->{$name} or return undef;
    return median(@{ ($t->{$size} || {})->{$cfg} || [] });
}

sub section {
    my $r = $RES{ttc};
    my @configs = @{ $r->{configs} };
    my @others = grep { $_ ne 'nomod' } @configs;
    my @t;
    for my $name (@{ $r->{paths} }) {
        my $p = $PATH{$name};
        push @t, { title => "time to complete, $p->{label} (median of $r->{reps}, s)",
            h => 3, intro => "Link $p->{rate} Mbit/s, RTT $p->{rtt} ms, queue "
                . kib($RES{health}{"ttc-$name"}{status}{queue_bytes}) . ' KiB.',
            head => ['size', map({ cfg_cell($_) . ' s' } @configs),
                     map { cfg_cell($_) . ' / `nomod`' } @others],
            align => 'l' . ('r' x (@configs + @others)),
            rows => [ map { my $s = $_; my $base = ttc_median($name, $s, 'nomod');
                [ size_label($s),
                  map({ my $m = ttc_median($name, $s, $_);
                        defined $m ? sprintf('%.3f', $m) : 'n/a' } @configs),
                  map { ratio3(div(ttc_median($name, $s, $_), $base)) . 'x' } @others ]
            } @{ $r->{sizes} } ] };
    }
    return { title => 'Time to complete, by size',
        intro => "Each download on a fresh connection (a new curl from the "
            . "client namespace; the lab keeps no TCP metrics between "
            . "connections), timed by curl from its start to the last byte. "
            . "The configurations' servers run side by side on ports 80, 81, "
            . "... of the server's address and take turns: for each size one "
            . "download from each, in the other order every second repetition; "
            . "`lowat`'s sysctl is set just for its own downloads. Times are "
            . "the median of $r->{reps}.\n\n" . config_legend(@configs),
        tables => \@t };
}

sub targets {
    my ($push) = @_;
    for my $name (@{ $TTC{paths} }) {
        my @x = map { [ $_, div(ttc_median($name, $_, 'auto'),
                                ttc_median($name, $_, 'nomod')) ] } @{ $TTC{sizes} };
        my @have = grep { defined $_->[1] } @x;
        my ($worst) = sort { $b->[1] <=> $a->[1] } @have;
        $push->("time to complete, $PATH{$name}{label}: auto vs autotuning "
                . '(worst of the sizes)', '<= 1.02x',
                $worst ? sprintf('%.3fx (%s)', $worst->[1], size_label($worst->[0])) : 'n/a',
                @have == @x ? $worst->[1] <= 1.02 : undef,
                join(', ', map { sprintf '%s %.3fx', size_label($_->[0]), $_->[1] } @have));
    }
}

1;
