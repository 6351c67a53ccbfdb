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
#
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use SndbufTune::Server ();
use SndbufTune::StallClient ();
use SndbufTune::Util qw(top_dir module_path);

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
<Location /server-status>
    SetHandler server-status
</Location>
EOF
ok($srv->start, 'a server with the status pages') or diag($srv->error);
my %KEYS;
for my $path ('/sndbuf-status?auto', '/server-status?auto') {
    my (undef, undef, $body) = eval {
        SndbufTune::StallClient->new(port => $srv->port)
            ->get($path, host => 'localhost', version => '1.0');
    };
    $KEYS{$1} = 1 while ($body // '') =~ /^(SndbufTune[A-Za-z]*)/mg;
}
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

done_testing();
