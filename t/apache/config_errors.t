# SndbufTune* values and contexts checked by `apache2 -t` on a minimal
# config that loads the module (Setup::standalone):
#   bad values  -> exit != 0, message names the directive and the value
#   bad arity   -> exit != 0, message names SndbufTune
#   good values and every allowed context -> Syntax OK
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use SndbufTune::Setup qw(standalone);

my @bad = ('0', '-1', '3k', '4095', '2g', '1073741825', 'abc', '10x',
           '99999999999999999999', '1.5m', '1kk', '64kb', '-4k', 'k');
my @arity = ('SndbufTune', 'SndbufTune 64k 1m', 'SndbufTune ""');
my @good = ('4k', '4K', '4096', '64k', '1m', '1M', '512m', '1g', '1G',
            '1073741824', 'unset', 'auto');
# [line, the token the message must quote] for the other directives
my @bad_other = (
    ['SndbufTuneBandwidth 30', '30'],
    ['SndbufTuneBandwidth 30mb', '30mb'],
    ['SndbufTuneBandwidth 0mbit', '0mbit'],
    ['SndbufTuneBandwidth -1mbit', '-1mbit'],
    ['SndbufTuneBandwidth 2000gbit', '2000gbit'],
    ['SndbufTuneBandwidth fast', 'fast'],
    ['SndbufTuneLimits 1m 64k', '1m'],
    ['SndbufTuneLimits 3k 1m', '3k'],
    ['SndbufTuneLimits 64k 2g', '2g'],
    ['SndbufTuneLimits 64k', 'SndbufTuneLimits'],
    ['SndbufTuneNetwork 10.0.0.0/33 64k', '10.0.0.0/33'],
    ['SndbufTuneNetwork 2001:db8::/129 64k', '2001:db8::/129'],
    ['SndbufTuneNetwork 10.0.0.0/x 64k', '10.0.0.0/x'],
    ['SndbufTuneNetwork example.com 64k', 'example.com'],
    ['SndbufTuneNetwork 10.0.0.0/8 fast', 'fast'],
    ['SndbufTuneNetwork 10.0.0.0/8 64k 30mbit', '30mbit'],
    ['SndbufTuneNetwork 10.0.0.0/8 auto 30xbit', '30xbit'],
    ['SndbufTuneNetwork 10.0.0.0/8', 'SndbufTuneNetwork'],
    ["<Location /x>\n  SndbufTuneNetwork 10.0.0.0/8 64k\n</Location>",
     'SndbufTuneNetwork'],
);
my @good_other = ('SndbufTuneBandwidth 30mbit', 'SndbufTuneBandwidth 1.5gbit',
                  'SndbufTuneBandwidth 500kbit', 'SndbufTuneLimits 16k 4m',
                  'SndbufTuneLimits 64k 64k',
                  'SndbufTuneNetwork 10.60.0.0/16 auto 30mbit',
                  'SndbufTuneNetwork 0.0.0.0/0 unset',
                  'SndbufTuneNetwork ::/0 auto',
                  'SndbufTuneNetwork 2001:db8:42::/48 1M',
                  'SndbufTuneNetwork 192.0.2.7 64k');
my @contexts = (
    "SndbufTune 64k",
    "<VirtualHost *:\@PORT\@>\n  ServerName v.test\n  SndbufTune 64k\n</VirtualHost>",
    "<Directory \"\@DOCROOT\@\">\n  SndbufTune 64k\n</Directory>",
    "<Location /x>\n  SndbufTune unset\n</Location>",
    "<Files \"x.bin\">\n  SndbufTune 1m\n</Files>",
    "<VirtualHost *:\@PORT\@>\n  ServerName v.test\n  <Location /y>\n    SndbufTune 4k\n  </Location>\n</VirtualHost>",
);

plan tests => @bad + @arity + @good + @contexts + @bad_other + @good_other;

my $n = 0;
sub check { standalone(name => 'syntax' . $n++, body => shift)->syntax_check }

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

for my $case (@bad_other) {
    my ($line, $token) = @$case;
    my ($directive) = $line =~ /(SndbufTune\w+)/;
    my ($rc, $out) = check($line);
    chomp $out;
    (my $one = $line) =~ s/\s*\n\s*/ /g;
    ok($rc != 0 && index($out, $directive) >= 0 && index($out, $token) >= 0,
       "'$one' rejected, message names $directive and '$token'")
        or diag("exit $rc: $out");
}

for my $line (@good_other) {
    my ($rc, $out) = check($line);
    chomp $out;
    ok($rc == 0 && $out =~ /Syntax OK/, "'$line' accepted")
        or diag("exit $rc: $out");
}
