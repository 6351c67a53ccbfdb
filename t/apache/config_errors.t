# SndbufTune values and contexts checked by `apache2 -t` on a minimal
# config that loads the module (t/lib/SndbufTune/Standalone.pm):
#   bad values  -> exit != 0, message names SndbufTune and the value
#   bad arity   -> exit != 0, message names SndbufTune
#   good values and every allowed context -> Syntax OK
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Standalone;

my @bad = ('0', '-1', '3k', '4095', '2g', '1073741825', 'abc', '10x',
           '99999999999999999999', '1.5m', '1kk', '64kb', '-4k', 'k');
my @arity = ('SndbufTune', 'SndbufTune 64k 1m', 'SndbufTune ""');
my @good = ('4k', '4K', '4096', '64k', '1m', '1M', '512m', '1g', '1G',
            '1073741824', 'unset',
            # issue 2 had `auto` rejected until issue 4 landed; it has
            # (docs/auto.md), so it is a valid value now
            'auto');
my @contexts = (
    "SndbufTune 64k",
    "<VirtualHost *:\@PORT\@>\n  ServerName v.test\n  SndbufTune 64k\n</VirtualHost>",
    "<Directory \"\@DOCROOT\@\">\n  SndbufTune 64k\n</Directory>",
    "<Location /x>\n  SndbufTune unset\n</Location>",
    "<Files \"x.bin\">\n  SndbufTune 1m\n</Files>",
    "<VirtualHost *:\@PORT\@>\n  ServerName v.test\n  <Location /y>\n    SndbufTune 4k\n  </Location>\n</VirtualHost>",
);

plan tests => @bad + @arity + @good + @contexts;

my $n = 0;
sub check { SndbufTune::Standalone->syntax_check(name => 'syntax' . $n++, body => shift) }

for my $v (@bad) {
    my ($rc, $out) = check("SndbufTune $v");
    chomp $out;
    ok($rc != 0 && $out =~ /SndbufTune/ && index($out, $v) >= 0,
       "SndbufTune $v rejected, message names directive and value")
        or diag("exit $rc: $out");
}

for my $line (@arity) {
    my ($rc, $out) = check($line);
    chomp $out;
    ok($rc != 0 && $out =~ /SndbufTune/, "'$line' rejected naming SndbufTune")
        or diag("exit $rc: $out");
}

for my $v (@good) {
    my ($rc, $out) = check("SndbufTune $v");
    chomp $out;
    ok($rc == 0 && $out =~ /Syntax OK/, "SndbufTune $v accepted")
        or diag("exit $rc: $out");
}

for my $body (@contexts) {
    my ($rc, $out) = check($body);
    chomp $out;
    (my $one = $body) =~ s/\s*\n\s*/ /g;
    ok($rc == 0 && $out =~ /Syntax OK/, "accepted in context: $one")
        or diag("exit $rc: $out");
}
