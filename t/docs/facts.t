#!/usr/bin/perl
# What README.md, CONTRIBUTING.md, docs/ and conf/ tell an administrator,
# held to the code (make test runs it; a few seconds, no network):
#
#   names     every SndbufTune... name in their text is a directive of
#             sbt_cmds (sndbuf_config.c), or the start of a key that the
#             status pages print (read from a running server: ?auto of the
#             module's page and of mod_status'); every directive of a
#             ```apache block is the module's or one of @OTHER (httpd's own
#             and the modules the examples use, each listed on purpose).
#   examples  every ```apache block, and each file of conf/ with the
#             examples it has commented out (lines "#   <directive> ..."),
#             passes `apache2 -t` with the module loaded (SndbufTune::Server,
#             t/bin/httpd). Paths an example names need not exist;
#             ${APACHE_LOG_DIR} is defined. A block that shows a mistake on
#             purpose is not ```apache (```text).
#   links     every relative link of a page leads to a file, and to a heading
#             of it where it names one.
#   fields    every access log field a page names in backquotes, as the log
#             writes it (`sndbuf_ms=`) or by a name that ends like one
#             (`rwnd_ms`, `goodput_bps`, `rtt_us`), is a field of the
#             sndbuf_tune LogFormat of conf/sndbuf_tune.conf.
#   messages  every line of a ```log block, and of an unlabelled block whose
#             lines look like the module's log ("[... sndbuf_tune:...]" or
#             "SndbufTune ..."), is a message the code can print. The error
#             log's prefix ([date] [module:level] [pid] file.c(N): [client])
#             is left out; a line that starts with spaces continues the one
#             before. The message must match one of the code's format
#             strings (C string literals, adjacent ones joined, of
#             mod_sndbuf_tune.c and sndbuf_*.[ch]; or httpd's own, @HTTPD
#             below), from its start to its end, where
#               %d, %u, ... are a number, %pI an address;
#               %s (and %pm ...) is a value: a word without spaces, or
#               one or two of the code's own strings (whose own %s are
#               words), or "...";
#               "..." (or "…") at the end of a quote: the message goes on.
#             So a value may be elided, and a long message cut short, but
#             the words the code prints may not be changed.
#   figures   every rate the pages derive from a buffer, and every buffer
#             they derive from a rate, is recomputed from the one rule of
#             docs/auto.md ("How much a send buffer carries": a tb carries
#             two thirds of it in data) and must round to what the page
#             says; no page turns a buffer into a rate any other way
#             ("buffer / RTT" without the two thirds).
#   costs     README.md's shared memory is what a server with the module
#             maps beside one without it (/proc/PID/maps), and its first
#             40 lines name `make demo` and `make test`.
#   lists     docs/status.md lists every ?auto key (the page's and
#             mod_status's) and every metric a live server prints, and no
#             other; its alert examples pass `promtool check rules`.
#
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use File::Temp ();
use Test::More;
use SndbufTune::Server ();
use SndbufTune::StallClient ();
use SndbufTune::Util qw(top_dir module_path);

binmode Test::More->builder->$_, q(:encoding(UTF-8))
    for qw(output failure_output todo_output);
my $TOP = top_dir();
plan skip_all => module_path() . ' not built (run make)' unless -f module_path();

# Directives of httpd and of the modules the examples load, which the
# pages may use in a ```apache block.
my @OTHER = qw(
    VirtualHost Location LocationMatch Directory DirectoryMatch Files
    FilesMatch IfModule IfDefine ServerName ServerAlias DocumentRoot Listen
    LoadModule Include IncludeOptional Define SendBufferSize EnableSendfile
    EnableMMAP LogLevel LogFormat CustomLog ErrorLog SetHandler Require
    AllowOverride AllowOverrideList Options KeepAlive Timeout Protocols
    RemoteIPHeader RemoteIPInternalProxy RemoteIPTrustedProxy
    RemoteIPInternalProxyList RemoteIPTrustedProxyList Header
    ExtendedStatus ErrorDocument Alias
);
my @MODULES = qw(authz_host remoteip headers status alias);

# httpd's own messages about a directive (server/config.c, core.c).
my @HTTPD = (
    '%s takes one argument, %s',
    '%s takes two arguments, %s',
    '%s takes two or three arguments, %s',
    '%s not allowed here',
    'AH00526: Syntax error on line %d of %s:',
);

# ------------------------------------------------------------ the code --

# The C's string macros (#define NAME "..."), which c_strings joins in
# where they stand between literals.
my %STRMACRO;

# C source: (string literals joined, in order), comments left out;
# APR's *_FMT macros between two literals stand for a number's format.
sub c_strings {
    my $src = shift;
    my (@out, $cur);
    my $end = sub { push @out, $cur if defined $cur; undef $cur };
    pos($src) = 0;
    while (pos($src) < length $src) {
        if ($src =~ /\G\/\*.*?\*\//gcs || $src =~ /\G\/\/[^\n]*/gc) {
            next;
        }
        if ($src =~ /\G'(?:\\.|[^'\\])*'/gc) {
            $end->();
            next;
        }
        if ($src =~ /\G"((?:\\.|[^"\\])*)"/gcs) {
            my $s = $1;
            $s =~ s/\\n/\n/g;
            $s =~ s/\\t/\t/g;
            $s =~ s/\\(["\\'])/$1/g;
            $cur = ($cur // '') . $s;
            next;
        }
        if ($src =~ /\G\s+/gc) {
            next;
        }
        if ($src =~ /\GAPR_\w+_FMT\b/gc) {
            $cur .= 'ld' if defined $cur;
            next;
        }
        if ($src =~ /\G([A-Za-z_]\w*)/gc) {
            if (exists $STRMACRO{$1}) {
                $cur = ($cur // '') . $STRMACRO{$1};
            }
            else {
                $end->();
            }
            next;
        }
        $src =~ /\G[A-Za-z_]\w*|\G./gcs;
        $end->();
    }
    $end->();
    return @out;
}

my (%SBT, @FORMATS, %SRC);
for my $file (glob("$TOP/mod_sndbuf_tune.c $TOP/sndbuf_*.c $TOP/sndbuf_*.h")) {
    open my $fh, '<', $file or die "$file: $!";
    $SRC{$file} = do { local $/; <$fh> };
    close $fh;
    $STRMACRO{$1} = $2
        while $SRC{$file} =~ /^#define\s+(\w+)\s+"((?:\\.|[^"\\])*)"\s*$/mg;
}
for my $file (sort keys %SRC) {
    my $src = $SRC{$file};
    $SBT{$1} = 1 while $src =~ /AP_INIT_\w+\(\s*"(\w+)"/g;
    push @FORMATS, grep { /[A-Za-z]{2}|%/ } c_strings($src);
}
ok(%SBT >= 4 && @FORMATS > 100, scalar(keys %SBT) . ' directives and '
   . @FORMATS . ' strings read from the C');
push @FORMATS, @HTTPD;
my %KNOWN = (%SBT, map { $_ => 1 } @OTHER);

# A format string as a regex; its %s become $value.
sub format_re {
    my ($fmt, $value) = @_;
    my $re = '';
    while (length $fmt) {
        if ($fmt =~ s/^%%//) {
            $re .= '%';
        }
        elsif ($fmt =~ s/^%pI//) {
            $re .= '\S+';
        }
        elsif ($fmt =~ s/^%p[A-Za-z]// || $fmt =~ s/^%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?s//) {
            $re .= $value;
        }
        elsif ($fmt =~ s/^%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|j|z|t)?([diouxXfeEgGc])//) {
            $re .= $1 =~ /[xX]/ ? '[0-9a-fA-F]+' : $1 eq 'c' ? '.'
                 : $1 =~ /[feEgG]/ ? '[-+0-9.eE]+' : '-?\d+';
        }
        else {
            $fmt =~ s/^(.)//s;
            $re .= quotemeta $1;
        }
    }
    return $re;
}

# The same, but a prefix of it may end the text (a quote cut short).
sub prefix_re {
    my ($fmt, $value) = @_;
    my @t;
    while (length $fmt) {
        my $one = $fmt =~ /^(%(?:%|p[A-Za-z]|[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|j|z|t)?[diouxXfeEgGcs]))/
            ? $1 : substr($fmt, 0, 1);
        substr($fmt, 0, length $one) = '';
        push @t, format_re($one, $value);
    }
    my $re = '\\z';
    $re = "$_(?:\\z|$re)" for reverse @t;
    return $re;
}

# The literal pieces of a format, between its conversions.
sub pieces {
    return grep { length } split /%(?:%|p[A-Za-z]|[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|j|z|t)?[diouxXfeEgGcs])/, $_[0];
}

# Can the code print $msg?  Only the formats whose pieces the message
# holds are tried (else the regex backtracks for ever).
sub printable {
    my $msg = shift;
    $msg =~ s/\.\.\./…/g;
    my $cut = $msg =~ s/\s*…\s*\z//;
    # Inside a value: the code's strings with words of their own (a
    # format of conversions alone would only split a word in more ways).
    my @inner = grep { my @p = pieces($_);
                       join('', @p) =~ /[A-Za-z]{2}/
                       && !grep { index($msg, $_) < 0 } @p } @FORMATS;
    my @plain = grep { !/%/ } @inner;
    my @top = grep {
        my @p = pieces($_);
        my $head = !@p || /^%/ || index($msg, $p[0]) == 0
                   || ($cut && index($p[0], $msg) == 0);
        $head && ($cut || !@p || !/\Q$p[-1]\E\z/
                  || substr($msg, -length $p[-1]) eq $p[-1]);
    } @FORMATS;
    return 0 unless @top;
    my $l0 = join('|', map { quotemeta } @plain) || '(*FAIL)';
    my $l1 = join('|', map { format_re($_, '(?:(?&T)|(?&L0)|…|)') } @inner)
             || '(*FAIL)';
    my $define = "(?(DEFINE)(?<T><[^>\\n]*>|[^\\s…]+)(?<L0>$l0)(?<L1>$l1)"
               . "(?<S>(?&L1)(?&L1)?(?:\\s?…)?|(?&T)|…|))";
    my $top = join '|', map { $cut ? prefix_re($_, '(?&S)')
                                   : format_re($_, '(?&S)') . '\z' } @top;
    my $ok = eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        alarm 10;
        my $m = $msg =~ /\A(?:$top)$define/;
        alarm 0;
        $m;
    };
    diag("$@: $msg") if $@;
    return $ok;
}

# ----------------------------------------------------------- the pages --

my @PAGES = grep { -f "$TOP/$_" } ('README.md', 'CONTRIBUTING.md',
    map { s/^\Q$TOP\E\///r } glob("$TOP/docs/*.md $TOP/docs/*/*.md"));
my @CONF = map { s/^\Q$TOP\E\///r } glob("$TOP/conf/*");

# Fenced blocks of a page: { lang, line (of the first), text }.
sub blocks {
    my $text = shift;
    my (@b, $open);
    my $n = 0;
    for my $line (split /\n/, $text) {
        $n++;
        if (!$open && $line =~ /^(\s*)```\s*(\S*)\s*$/) {
            $open = { indent => length $1, lang => $2, line => $n + 1,
                      text => '' };
        }
        elsif ($open && $line =~ /^\s*```\s*$/) {
            push @b, $open;
            undef $open;
        }
        elsif ($open) {
            my $in = $open->{indent};
            $line =~ s/^ {0,$in}//;
            $open->{text} .= "$line\n";
        }
    }
    return @b;
}

sub slurp {
    my $path = shift;
    open my $fh, '<:encoding(UTF-8)', "$TOP/$path" or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

my %TEXT = map { $_ => slurp($_) } @PAGES;

# -------------------------------------------------- a server, to read --

# Its status pages' keys, and the startup messages (for a look at them).
my $srv = SndbufTune::Server->new(name => 'facts', modules => \@MODULES,
    body => <<'EOF');
SndbufTune auto
SndbufTuneNetwork 192.0.2.0/24 16k
<Location /sndbuf-status>
    SetHandler sndbuf-tune-status
</Location>
<Location /metrics>
    SetHandler sndbuf-tune-metrics
</Location>
<Location /server-status>
    SetHandler server-status
</Location>
EOF
ok($srv->start, 'a server with the status pages') or diag($srv->error);
my (%KEYS, %PAGE);
for my $path ('/sndbuf-status?auto', '/server-status?auto', '/metrics') {
    my (undef, undef, $body) = eval {
        SndbufTune::StallClient->new(port => $srv->port)
            ->get($path, host => 'localhost', version => '1.0');
    };
    $PAGE{$path} = $body // '';
    $KEYS{$1} = 1 while $PAGE{$path} =~ /^(SndbufTune[A-Za-z]*)/mg;
}
my @MAPPED = shared_maps($srv);
$srv->stop;
ok(grep({ /^SndbufTuneKernel/ } keys %KEYS)
   && grep({ /^SndbufTuneTotal/ } keys %KEYS),
   'the status pages\' keys, from both pages: ' . join(' ', sort keys %KEYS));

# ------------------------------------------------------------- names --

for my $page (@PAGES) {
    my (%bad, $n);
    for my $line (split /\n/, $TEXT{$page}) {
        $n++;
        while ($line =~ /\b(SndbufTune[A-Za-z]*)/g) {
            my $name = $1;
            next if $SBT{$name} || grep { index($_, $name) == 0 } keys %KEYS;
            push @{ $bad{$name} }, $n;
        }
    }
    for my $b (grep { $_->{lang} eq 'apache' } blocks($TEXT{$page})) {
        my $i = $b->{line} - 1;
        for (split /\n/, $b->{text}) {
            $i++;
            next unless m{^\s*<?/?([A-Za-z]\w*)};
            push @{ $bad{$1} }, $i unless $KNOWN{$1};
        }
    }
    ok(!%bad, "$page names only directives that exist")
        or diag(join "\n", map { "$page:@{ $bad{$_} }: $_" } sort keys %bad);
}

# ------------------------------------------------------------ fields --

my %FIELDS;
{
    my ($format) = slurp('conf/sndbuf_tune.conf')
        =~ /^\s*LogFormat\s+"(.*)"\s+sndbuf_tune\s*$/m;
    $FIELDS{$1} = 1 while ($format // '') =~ /\b([a-z_]+)=(?:\\")?%/g;
}
ok(keys %FIELDS >= 10, 'the sndbuf_tune LogFormat\'s fields: '
   . join(' ', sort keys %FIELDS));
for my $page (@PAGES) {
    my %bad;
    my $n = 0;
    for my $line (split /\n/, $TEXT{$page}) {
        $n++;
        while ($line =~ /`([a-z][a-z_]*)=`|`([a-z][a-z_]*_(?:ms|bps|us))`/g) {
            my $name = $1 // $2;
            push @{ $bad{$name} }, $n unless $FIELDS{$name};
        }
    }
    ok(!%bad, "$page names only the sndbuf_tune LogFormat's fields")
        or diag(join "\n", map { "$page:@{ $bad{$_} }: $_" } sort keys %bad);
}

# ------------------------------------------------------------- links --

# GitHub's anchor for a heading: lower case, punctuation but - and _ gone,
# spaces to -.
sub anchor {
    my $h = lc shift;
    $h =~ s/`//g;
    $h =~ s/[^\w\- ]//g;
    $h =~ tr/ /-/;
    return $h;
}

for my $page (@PAGES) {
    my @bad;
    (my $dir = $page) =~ s{[^/]*$}{};
    my $text = $TEXT{$page} =~ s/^\s*```.*?^\s*```//msgr;
    while ($text =~ /\]\(([^)\s]+)\)/g) {
        my $link = $1;
        next if $link =~ m{^[a-z]+:};
        my ($path, $frag) = $link =~ /^([^#]*)(?:#(.*))?$/;
        my $target = length $path ? $dir . $path : $page;
        1 while $target =~ s{[^/]+/\.\./}{};
        if (!-e "$TOP/$target") {
            push @bad, "$link: no file $target";
            next;
        }
        next unless defined $frag && $target =~ /\.md$/;
        my $t = $TEXT{$target} // slurp($target);
        push @bad, "$link: no heading #$frag in $target"
            unless grep { anchor($_) eq $frag } $t =~ /^#+\s+(.*?)\s*$/mg;
    }
    ok(!@bad, "$page: every relative link leads somewhere")
        or diag(join "\n", map { "$page: $_" } @bad);
}

# ---------------------------------------------------------- examples --

# apache2 -t on $conf (after the module's LoadModule unless $load is 0);
# the message names $where's line for the error's line.
sub syntax_ok {
    my ($conf, $file, $first, $load, $what) = @_;
    my $s = SndbufTune::Server->new(name => 'facts-t', modules => \@MODULES,
        sndbuf_tune => $load // 1, access_log => 0,
        body => "Define APACHE_LOG_DIR \@DIR\@/logs\n$conf");
    my ($rc, $out) = $s->syntax_check;
    my @lines = split /\n/, $s->conf_text;
    my ($marker) = grep { $lines[$_] =~ /^# ---- the caller/ } 0 .. $#lines;
    # the configuration's line N is the example's line N - marker - 2
    my $line = $out =~ /Syntax error on line (\d+)/ && $first
        ? $first + $1 - $marker - 3 : undef;
    ok($rc == 0, ($first ? "$file:$first" : $file) . ": $what passes apache2 -t")
        or diag((defined $line ? "$file:$line: " : '') . $out);
}

for my $page (@PAGES) {
    for my $b (grep { $_->{lang} eq 'apache' } blocks($TEXT{$page})) {
        syntax_ok($b->{text}, $page, $b->{line}, 1, 'the example');
    }
}

{
    my $mod = module_path();
    my $load = join '', map { slurp($_) =~ s{(LoadModule\s+\S+\s+)\S+}{$1$mod}r }
        grep { /\.load$/ } @CONF;
    ok($load =~ /LoadModule sndbuf_tune_module \Q$mod\E/,
       'conf/sndbuf_tune.load loads the module');
    for my $file (grep { !/\.load$/ } @CONF) {
        my ($text, @ex) = (slurp($file));
        for (split /\n/, $text) {
            push @ex, $1 if /^\s*#\s?(\s*<?\/?([A-Za-z]\w*).*)$/ && $KNOWN{$2};
        }
        syntax_ok("$load$text", $file, 0, 0, 'the file');
        syntax_ok($load . $text . join("\n", @ex) . "\n", $file, 0, 0,
                  'the file with its ' . @ex . ' example lines uncommented');
    }
}

# ---------------------------------------------------------- messages --

my @quotes;
for my $page (@PAGES) {
    for my $b (blocks($TEXT{$page})) {
        my @lines = split /\n/, $b->{text};
        next unless $b->{lang} eq 'log'
            || ($b->{lang} eq '' && grep { /^\[[^\]]*sndbuf_tune:|^SndbufTune / } @lines);
        my $n = $b->{line} - 1;
        for my $l (@lines) {
            $n++;
            next unless $l =~ /\S/;
            if ($l =~ /^\s/ && @quotes && $quotes[-1][0] eq $page) {
                $quotes[-1][2] .= ' ' . ($l =~ s/^\s+//r);
                next;
            }
            push @quotes, [$page, $n, $l];
        }
    }
}
ok(@quotes >= 3, scalar(@quotes) . ' quoted log lines found');
for my $q (@quotes) {
    my ($page, $n, $msg) = @$q;
    1 while $msg =~ s/^\[[^\]]*\]\s*// || $msg =~ s/^[\w.]+\.c\(\d+\):\s*//;
    ok(printable($msg), "$page:$n: the code can print this message")
        or diag("not a message of the code: $msg");
}

# ----------------------------------------------------------- figures --

# The rule (docs/auto.md, "How much a send buffer carries"): a send buffer
# of tb bytes carries two thirds of it (as the triage counts it).
sub carried { my $tb = shift; return int($tb / 3) * 2 }
# bit/s carried at $rtt_ms; the tb a rate of $bps needs at $rtt_ms
sub rule_rate { my ($tb, $rtt_ms) = @_; return carried($tb) * 8 / ($rtt_ms / 1000) }
sub rule_tb { my ($bps, $rtt_ms) = @_; return 1.5 * $bps / 8 * $rtt_ms / 1000 }

my %UNIT = (KiB => 1024, MiB => 1 << 20, KB => 1e3, MB => 1e6, bytes => 1,
            'kbit/s' => 1e3, 'Mbit/s' => 1e6, 'kB/s' => 8e3);

# Does $want, in units of $unit, round to the figure $text as written,
# given to two significant digits at least (one would let 0.7 pass as 1)?
sub rounds_to {
    my ($text, $unit, $want) = @_;
    my ($dec) = $text =~ /\.(\d+)$/;
    my $places = length($dec // '');
    return length($text =~ s/\.//r =~ s/^0+//r) >= 2
        && sprintf("%.${places}f", $want / $UNIT{$unit}) eq $text;
}

# A page's text on one line: markdown quotes and line breaks as spaces.
sub flat {
    return join(' ', map { s/^\s*>\s?//r } split /\n/, $_[0]) =~ s/\s+/ /gr;
}

# Each statement: the page, what it says (a regex whose captures are the
# figures as written), and the checks ([figure, unit, want]) from them.
my @FIGURES = (
    ['README.md', 'autotuning\'s ceiling',
     qr/4 MiB in turn carries about ([\d.]+) (MB)\b.*?([\d.]+) (Mbit\/s) at (\d+) ms/,
     sub { ([$_[0], $_[1], carried(4 << 20)],
            [$_[2], $_[3], rule_rate(4 << 20, $_[4])]) }],
    ['README.md', 'the rate a lock cannot carry',
     qr/\((\d+) Mbit\/s at (\d+) ms needs a `tb` of about ([\d.]+) (MB)\)/,
     sub { [$_[2], $_[3], rule_tb($_[0] * 1e6, $_[1])] }],
    ['README.md', 'SndbufTuneLimits 16k 192k',
     qr/at most (\d+) (KiB) of kernel memory.*?reach about ([\d.]+) (Mbit\/s) at (\d+) ms, ([\d.]+) (Mbit\/s) at (\d+) ms/,
     sub { my $tb = $_[0] * $UNIT{$_[1]};
           ([$_[2], $_[3], rule_rate($tb, $_[4])],
            [$_[5], $_[6], rule_rate($tb, $_[7])]) }],
    ['docs/troubleshooting.md', 'SendBufferSize 16384',
     qr/16384 (?:\(`tb` 32 KiB\) )?allows\s+about ([\d.]+) (Mbit\/s) at (\d+) ms/,
     sub { [$_[0], $_[1], rule_rate(32768, $_[2])] }],
    ['docs/troubleshooting.md', 'autotuning\'s ceiling',
     qr/\(4 MiB on Debian, Ubuntu and RHEL: about ([\d.]+) (Mbit\/s) at (\d+) ms\)/,
     sub { [$_[0], $_[1], rule_rate(4 << 20, $_[2])] }],
    ['docs/troubleshooting.md', 'a long fat path',
     qr/(\d+) Mbit\/s at (\d+) ms needs (?:a `tb` of )?about ([\d.]+) (MB)/,
     sub { [$_[2], $_[3], rule_tb($_[0] * 1e6, $_[1])] }],
    ['docs/troubleshooting.md', 'what auto sets carries',
     qr/auto sets `tb` to at least about ([\d.]+) \x{d7} rate \x{d7} minimum RTT .*?which carries about ([\d.]+) \x{d7} rate/,
     sub { [$_[1], 'bytes', carried($_[0] * 3e6) / 3e6] }],
    ['docs/auto.md', 'what auto\'s target carries',
     qr/7\/8 \x{d7} rate \x{d7} RTT.*?Linux doubles it, and the buffer carries two thirds of that.*?about ([\d.]+) \x{d7} the BDP/,
     sub { [$_[0], 'bytes', carried(2 * 7 / 8 * 3e6) / 3e6] }],
    ['docs/status.md', 'the words\' example',
     qr/force, 16 KiB \(core SendBufferSize at \S+\), allows about ([\d.]+) (kbit\/s|Mbit\/s) at the (\d+) ms/,
     sub { [$_[0], $_[1], rule_rate(32768, $_[2])] }],
);
push @FIGURES, map {
    my $row = $_;
    ['docs/status.md', "the table's $_",
     qr/\| \Q$row\E \|[^|]*\| ([\d.]+) \/ ([\d.]+) (Mbit\/s) \(tb (\d+) (KiB|MiB), (\d+) ms\)/,
     sub { [$_[1], $_[2], rule_rate($_[3] * $UNIT{$_[4]}, $_[5])] }]
} '`SendBufferSize 16384`', '`SndbufTune 64k`', '`SndbufTune 256k`',
  '`SndbufTune 16k`', 'autotuned', '`SndbufTune 1m`', '`SndbufTune auto`';
push @FIGURES, map {
    my ($set, $tb) = @$_;
    ['docs/migrating-from-SendBufferSize.md', "SendBufferSize $set",
     qr/\| $set \| [^|]*\| (\d+) ms \| about ([\d.]+) (Mbit\/s) \|/,
     sub { [$_[1], $_[2], rule_rate($tb, $_[0])] }]
} [16384, 32768], [65536, 131072];

for my $f (@FIGURES) {
    my ($page, $what, $re, $checks) = @$f;
    my @m = flat($TEXT{$page}) =~ $re;
    ok(@m, "$page: $what: the statement is there") or do {
        diag("not found: $re");
        next;
    };
    my @bad = map { "says $_->[0] $_->[1], the rule gives "
                    . sprintf('%.3g', $_->[2] / $UNIT{$_->[1]}) }
              grep { !rounds_to(@$_) } $checks->(@m);
    ok(!@bad, "$page: $what: as the rule gives it") or diag(join "\n", @bad);
}

# No page turns a buffer into a rate another way: "/ RTT" comes after the
# two thirds, or divides a window. And every "<rate> at N ms" of a page
# is one of the statements above (the path rates of a table are not).
for my $page (grep { !m{^docs/(design|benchmarks)} } @PAGES) {
    my $text = flat($TEXT{$page});
    my @other = grep { !/\x{2154}/ } $text
        =~ /(.{0,40}(?:buffer|tb|\*B\*)\W{0,3}\s*\/\s*(?:RTT|round-trip|`rtt`))/g;
    ok(!@other, "$page: every buffer / RTT is two thirds of the buffer")
        or diag(join "\n", @other);
    my %covered;
    for my $f (grep { $_->[0] eq $page } @FIGURES) {
        while ($text =~ /$f->[2]/g) {
            $covered{$_} = 1 for $-[0] .. $+[0];
        }
    }
    my @loose;
    while ($text =~ /(\d[\d.]* (?:Mbit|kbit|kB|MB)\/s at (?:the )?\d+ ms)/g) {
        push @loose, $1 unless $covered{$-[1]};
    }
    ok(!@loose, "$page: every rate at an RTT is a checked figure")
        or diag(join "\n", @loose);
}

# ------------------------------------------------------------- costs --

# The sizes (KiB) of the shared anonymous mappings of $srv's parent.
sub shared_maps {
    no warnings q(portable);
    my $s = shift;
    my $pid = $s->pid or return;
    open my $fh, '<', "/proc/$pid/maps" or return;
    return map { /^([0-9a-f]+)-([0-9a-f]+) rw-s .*\/dev\/zero/
                 ? (hex($2) - hex($1)) / 1024 : () } <$fh>;
}

{
    my $bare = SndbufTune::Server->new(name => 'facts-bare', sndbuf_tune => 0,
                                       log_level => 'info',
                                       modules => \@MODULES);
    ok($bare->start, 'a server without the module') or diag($bare->error);
    my %without;
    $without{$_}++ for shared_maps($bare);
    $bare->stop;
    my @ours = sort { $b <=> $a } grep { !($without{$_} && $without{$_}--) }
        @MAPPED;
    my ($status, $paths, $all) = flat($TEXT{'README.md'})
        =~ /(\d+) KiB for the status counters and (\d+) KiB for `auto`'s table of the flows it steers, (\d+) KiB in all/;
    my $sum = 0;
    $sum += $_ for @ours;
    is(join(' ', sort { $b <=> $a } grep { defined } $status, $paths)
       . " = " . ($all // '?'), "@ours = $sum",
       'README.md: the shared memory it names is what the module maps');
    my @head = (split /\n/, $TEXT{'README.md'})[0 .. 39];
    ok((grep { /^make demo\b/ } @head) && (grep { /^make test\b/ } @head),
       'README.md names make demo and make test in its first 40 lines');
}

# ------------------------------------------------------------- lists --

{
    my $doc = $TEXT{'docs/status.md'};
    my ($every) = $doc =~ /^## Every key and metric\n(.*)/ms;
    $every //= '';
    my ($auto_part, $metric_part) = split /^### The metrics$/m, $every;
    $metric_part //= '';
    my %doc_keys = map { $_ => 1 } $auto_part =~ /`(\w+)(?:\[N\])?`/g;
    # the page's ?auto and mod_status', by key, slot numbers left out
    my (%live, @undocumented);
    for my $path ('/sndbuf-status?auto', '/server-status?auto') {
        for ($PAGE{$path} =~ /^(SndbufTune\w*(?:\[\d+\]\w+)?):/mg) {
            my ($table, $key) = /^SndbufTune(Vhost|Network)\[\d+\](\w+)$/
                ? ($1, $2) : /^SndbufTuneTotal(\w+)$/ ? ('Total', $1)
                : (undef, $_);
            $live{$key} = 1;
            push @undocumented, $_ unless $doc_keys{$key};
        }
    }
    my @prefixes = grep { /^SndbufTune(Vhost|Network|Total)$/ } keys %doc_keys;
    my @gone = grep { !$live{$_} && !/^SndbufTune(Vhost|Network|Total|Kernel)$|^[A-Z_]+$/
                      && /^[A-Z]/ } sort keys %doc_keys;
    ok(keys %live > 40 && @prefixes == 3 && !@undocumented && !@gone,
       'docs/status.md lists every ?auto key a server prints, and no other')
        or diag(join "\n", (map { "not listed: $_" } @undocumented),
                map { "listed, not printed: $_" } @gone);
    my %doc_metrics = map { $_ => 1 } $metric_part =~ /`(sndbuf_tune_\w+)`/g;
    my %live_metrics = map { s/_(bucket|sum|count)$//r => 1 }
        $PAGE{'/metrics'} =~ /^(sndbuf_tune_\w+)/mg;
    my @missing = grep { !$doc_metrics{$_} } sort keys %live_metrics;
    my @extra = grep { !$live_metrics{$_} } sort keys %doc_metrics;
    ok(keys %live_metrics > 20 && !@missing && !@extra,
       'docs/status.md lists every metric a server prints, and no other')
        or diag(join "\n", (map { "not listed: $_" } @missing),
                map { "listed, not printed: $_" } @extra);
    my ($labels) = $PAGE{'/metrics'} =~ /^sndbuf_tune_network_requests_total\{([^}]*)\}/m;
    is(join(',', map { /^(\w+)=/ } split /,(?=\w+=)/, $labels // ''),
       'network,vhost,policy', 'a rule\'s series: network and vhost labels, '
       . 'no file or line');
    my @rules = $doc =~ /^```yaml\n(groups:.*?)^```/msg;
    my ($promtool) = grep { -x } map { "$_/promtool" } split /:/, $ENV{PATH};
  SKIP: {
        skip 'no promtool (apt-get install prometheus)', 1
            unless $promtool || $ENV{CI};
        my $file = File::Temp->new(SUFFIX => '.yml');
        print $file @rules;
        close $file;
        my $out = `promtool check rules $file 2>&1`;
        ok(@rules == 1 && $? == 0 && $out =~ /SUCCESS: 2 rules found/,
           'docs/status.md: its alert rules pass promtool check rules')
            or diag($out);
    }
}

done_testing();
