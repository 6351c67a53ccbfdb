# Every directive against every class of bad value, with the exact
# message httpd gives, and the edges each directive accepts. The tables
# below are the specification; t/apache/bad_input.md is generated from them,
# and this test fails when the committed file differs from what it would
# write:
#
#   SBT_WRITE_DOCS=1 t/run t/apache/bad_input.t     regenerates it
#
#   @REFUSED    `apache2 -t` on a configuration that Includes the case
#               (Setup::standalone): exit status non-zero and, exactly,
#               the message on the line after "AH00526: Syntax error on
#               line N of FILE:"
#   @HTACCESS   a .htaccess with the directive, under AllowOverride All
#               (t/conf/extra.conf.in): the request to the Apache::Test
#               server fails with 500 and its error log's line ends in
#               exactly the message
#   @ACCEPTED   `apache2 -t` says Syntax OK
#
# In a message, <file> stands for the path of the file with the case.
# httpd escapes non-ASCII bytes in what it prints (\xef\xbc\x96), so the
# expected messages are written that way. The cases run in two processes
# side by side (each `apache2 -t` is its own short process); the results
# are checked here in table order.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use Apache::TestRequest qw(GET);
use Apache::TestUtil qw(t_start_error_log_watch t_finish_error_log_watch);
use File::Path ();
use POSIX ();
use Storable ();
use SndbufTune::Setup qw(standalone);
use SndbufTune::Util qw(top_dir);

my $DOC = 't/apache/bad_input.md';
my $REGENERATE = "SBT_WRITE_DOCS=1 t/run t/apache/bad_input.t";

# The hint SndbufTune adds to every complaint about its value.
my $H = '; expected none, unset, auto or a size from 4k to 1g such as '
      . '256k';
# httpd's own arity messages: "<name> takes ..., <the directive's help>".
my %ARITY = (
    SndbufTune => 'SndbufTune takes one argument, none (leave the socket '
        . 'alone), unset (kernel autotuning), auto (RTT x bandwidth) or a '
        . 'send buffer size such as 256k',
    SndbufTuneBandwidth => 'SndbufTuneBandwidth takes one argument, path '
        . 'rate auto assumes, e.g. 30mbit, or measure (the default)',
    SndbufTuneLimits => 'SndbufTuneLimits takes two arguments, smallest '
        . 'and largest size auto may choose, e.g. 16k 4m',
    SndbufTuneNetwork => 'SndbufTuneNetwork takes two or three arguments, '
        . 'client network (CIDR), then none, unset, auto or a size, and for '
        . 'auto optionally a rate',
);
my $NET_CONTEXT = 'SndbufTuneNetwork not allowed in <%s> context';
my $PARTIAL = 'partial IPv4 address: write all four parts: did you mean';
my $HOST_BITS = 'host bits are set beyond the prefix length: did you mean';
my $ZONE = 'IPv6 zone ids (%eth0) are not allowed: a rule matches the '
         . 'address on any interface';
my $BAD4 = 'not an IPv4 address (four numbers from 0 to 255, without '
         . 'leading zeros)';
my $PREFIX4 = 'prefix length must be a whole number from 0 to 32';
my $HEX = 'hexadecimal is not allowed (write a plain decimal number)';
my $EXP = 'exponents are not allowed (write a plain decimal number)';
my $NOT_SIZE = 'not a size (digits, optionally followed by k, m or g)';
my $SIZE_UNIT = 'unknown unit (use k, m or g; no unit means bytes)';
my $NOT_RATE = 'not a rate (a number, then bit, kbit, mbit or gbit)';
my $RATE_UNIT = 'unknown unit (use bit, kbit, mbit or gbit)';
my $SAME = 'the same network as SndbufTuneNetwork';

# [directive, class, configuration text, message]
my @REFUSED = (
    # --- SndbufTune ----------------------------------------------------
    map({ ['SndbufTune', @$_] }
    ['overflow', 'SndbufTune 99999999999999999999',
     "SndbufTune: '99999999999999999999': too large (at most 1g)$H"],
    ['overflow: 2^32, 0 in 32 bits', 'SndbufTune 4294967296',
     "SndbufTune: '4294967296': too large (at most 1g)$H"],
    ['overflow: 2^64 + 1', 'SndbufTune 18446744073709551617',
     "SndbufTune: '18446744073709551617': too large (at most 1g)$H"],
    ['overflow: 2^32 bytes as k', 'SndbufTune 4194304k',
     "SndbufTune: '4194304k': too large (at most 1g)$H"],
    ['range: above 1g', 'SndbufTune 1073741825',
     "SndbufTune: '1073741825': too large (at most 1g)$H"],
    ['range: above 1g', 'SndbufTune 2g',
     "SndbufTune: '2g': too large (at most 1g)$H"],
    ['range: below 4k', 'SndbufTune 4095',
     "SndbufTune: '4095': too small (at least 4k)$H"],
    ['range: below 4k', 'SndbufTune 3k',
     "SndbufTune: '3k': too small (at least 4k)$H"],
    ['negative', 'SndbufTune -1',
     "SndbufTune: '-1': must not be negative$H"],
    ['negative', 'SndbufTune -4k',
     "SndbufTune: '-4k': must not be negative$H"],
    ['negative zero', 'SndbufTune -0',
     "SndbufTune: '-0': must not be negative$H"],
    ['sign', 'SndbufTune +64k',
     "SndbufTune: '+64k': must not have a '+' sign$H"],
    ['zero', 'SndbufTune 0',
     "SndbufTune: '0': too small (at least 4k)$H"],
    ['zero', 'SndbufTune 0k',
     "SndbufTune: '0k': too small (at least 4k)$H"],
    ['zero', 'SndbufTune 00',
     "SndbufTune: '00': too small (at least 4k)$H"],
    ['empty', 'SndbufTune ""', $ARITY{SndbufTune}],
    ['whitespace', 'SndbufTune "64 k"',
     "SndbufTune: '64 k': contains whitespace$H"],
    ['whitespace', 'SndbufTune " 64k"',
     "SndbufTune: ' 64k': contains whitespace$H"],
    ['hexadecimal', 'SndbufTune 0x10000',
     "SndbufTune: '0x10000': $HEX$H"],
    ['hexadecimal', 'SndbufTune 0x40k',
     "SndbufTune: '0x40k': $HEX$H"],
    ['exponent', 'SndbufTune 1e6',
     "SndbufTune: '1e6': $EXP$H"],
    ['exponent', 'SndbufTune 64E3',
     "SndbufTune: '64E3': $EXP$H"],
    ['infinity', 'SndbufTune inf',
     "SndbufTune: 'inf': $NOT_SIZE$H"],
    ['fraction', 'SndbufTune 1.5m',
     "SndbufTune: '1.5m': not a whole number$H"],
    ['comma', 'SndbufTune 1,024k',
     "SndbufTune: '1,024k': contains a comma (write digits only, e.g. "
     . "1048576 or 1m)$H"],
    ['unit', 'SndbufTune 64kb',
     "SndbufTune: '64kb': unknown unit (k, m and g stand alone: 64k, not "
     . "64kb or 64KiB)$H"],
    ['unit', 'SndbufTune 64KiB',
     "SndbufTune: '64KiB': unknown unit (k, m and g stand alone: 64k, not "
     . "64kb or 64KiB)$H"],
    ['unit', 'SndbufTune 1kk', "SndbufTune: '1kk': $SIZE_UNIT$H"],
    ['unit', 'SndbufTune 10x', "SndbufTune: '10x': $SIZE_UNIT$H"],
    ['unit', 'SndbufTune 1t', "SndbufTune: '1t': $SIZE_UNIT$H"],
    ['not a number', 'SndbufTune abc', "SndbufTune: 'abc': $NOT_SIZE$H"],
    ['not a number', 'SndbufTune k', "SndbufTune: 'k': $NOT_SIZE$H"],
    ['not a number', 'SndbufTune fast', "SndbufTune: 'fast': $NOT_SIZE$H"],
    ['unicode: fullwidth digits', 'SndbufTune ６４k',
     q{SndbufTune: '\xef\xbc\x96\xef\xbc\x94k': } . "$NOT_SIZE$H"],
    ['unicode: Arabic-Indic digits', 'SndbufTune ٦٤k',
     q{SndbufTune: '\xd9\xa6\xd9\xa4k': } . "$NOT_SIZE$H"],
    ['unicode: fullwidth k', 'SndbufTune 64ｋ',
     q{SndbufTune: '64\xef\xbd\x8b': } . "$SIZE_UNIT$H"],
    ['unicode: Cyrillic ka', 'SndbufTune 64к',
     q{SndbufTune: '64\xd0\xba': } . "$SIZE_UNIT$H"],
    ['unicode: minus sign U+2212', 'SndbufTune −64k',
     q{SndbufTune: '\xe2\x88\x9264k': } . "$NOT_SIZE$H"],
    ['unicode: zero-width space after', "SndbufTune 64k\xe2\x80\x8b",
     q{SndbufTune: '64k\xe2\x80\x8b': } . "$SIZE_UNIT$H"],
    ['arity: none', 'SndbufTune', $ARITY{SndbufTune}],
    ['arity: two', 'SndbufTune 64k 1m', $ARITY{SndbufTune}],
    ),

    # --- SndbufTuneBandwidth -------------------------------------------
    map({ ['SndbufTuneBandwidth', @$_] }
    ['overflow: 2^64 bit', 'SndbufTuneBandwidth 18446744073709551616bit',
     "SndbufTuneBandwidth: '18446744073709551616bit': too large (at most "
     . "1000gbit)"],
    ['overflow', 'SndbufTuneBandwidth 99999999999999999999999gbit',
     "SndbufTuneBandwidth: '99999999999999999999999gbit': too large (at "
     . "most 1000gbit)"],
    ['range: above 1000gbit', 'SndbufTuneBandwidth 1000000000001bit',
     "SndbufTuneBandwidth: '1000000000001bit': too large (at most "
     . "1000gbit)"],
    ['range: above 1000gbit', 'SndbufTuneBandwidth 1000.000000000001gbit',
     "SndbufTuneBandwidth: '1000.000000000001gbit': too large (at most "
     . "1000gbit)"],
    ['range: above 1000gbit', 'SndbufTuneBandwidth 2000gbit',
     "SndbufTuneBandwidth: '2000gbit': too large (at most 1000gbit)"],
    ['range: below 1kbit', 'SndbufTuneBandwidth 999bit',
     "SndbufTuneBandwidth: '999bit': too small (at least 1kbit)"],
    ['range: below 1kbit', 'SndbufTuneBandwidth 0.999kbit',
     "SndbufTuneBandwidth: '0.999kbit': too small (at least 1kbit)"],
    ['negative', 'SndbufTuneBandwidth -1mbit',
     "SndbufTuneBandwidth: '-1mbit': must not be negative"],
    ['sign', 'SndbufTuneBandwidth +1mbit',
     "SndbufTuneBandwidth: '+1mbit': must not have a '+' sign"],
    ['zero', 'SndbufTuneBandwidth 0mbit',
     "SndbufTuneBandwidth: '0mbit': too small (at least 1kbit)"],
    ['zero', 'SndbufTuneBandwidth 0.0mbit',
     "SndbufTuneBandwidth: '0.0mbit': too small (at least 1kbit)"],
    ['zero', 'SndbufTuneBandwidth 0bit',
     "SndbufTuneBandwidth: '0bit': too small (at least 1kbit)"],
    ['empty', 'SndbufTuneBandwidth ""', $ARITY{SndbufTuneBandwidth}],
    ['whitespace', 'SndbufTuneBandwidth "30 mbit"',
     "SndbufTuneBandwidth: '30 mbit': contains whitespace"],
    ['hexadecimal', 'SndbufTuneBandwidth 0x10mbit',
     "SndbufTuneBandwidth: '0x10mbit': $HEX"],
    ['hexadecimal', 'SndbufTuneBandwidth 0X1Fmbit',
     "SndbufTuneBandwidth: '0X1Fmbit': $HEX"],
    ['exponent', 'SndbufTuneBandwidth 1e3kbit',
     "SndbufTuneBandwidth: '1e3kbit': $EXP"],
    ['exponent', 'SndbufTuneBandwidth 1.5E+3kbit',
     "SndbufTuneBandwidth: '1.5E+3kbit': $EXP"],
    ['infinity', 'SndbufTuneBandwidth inf',
     "SndbufTuneBandwidth: 'inf': $NOT_RATE"],
    ['infinity', 'SndbufTuneBandwidth infinity',
     "SndbufTuneBandwidth: 'infinity': $NOT_RATE"],
    ['not a number', 'SndbufTuneBandwidth nan',
     "SndbufTuneBandwidth: 'nan': $NOT_RATE"],
    ['not a number', 'SndbufTuneBandwidth fast',
     "SndbufTuneBandwidth: 'fast': $NOT_RATE"],
    ['comma', 'SndbufTuneBandwidth 1,5mbit',
     "SndbufTuneBandwidth: '1,5mbit': use a decimal point, not a comma"],
    ['decimal point', 'SndbufTuneBandwidth .5mbit',
     "SndbufTuneBandwidth: '.5mbit': a decimal point needs a digit on "
     . "each side (0.5mbit, not .5mbit)"],
    ['decimal point', 'SndbufTuneBandwidth 5.mbit',
     "SndbufTuneBandwidth: '5.mbit': a decimal point needs a digit on "
     . "each side (0.5mbit, not .5mbit)"],
    ['decimal point', 'SndbufTuneBandwidth 1.2.3mbit',
     "SndbufTuneBandwidth: '1.2.3mbit': more than one decimal point"],
    ['unit', 'SndbufTuneBandwidth 30',
     "SndbufTuneBandwidth: '30': missing unit (bit, kbit, mbit or gbit)"],
    ['unit', 'SndbufTuneBandwidth 30mb',
     "SndbufTuneBandwidth: '30mb': $RATE_UNIT"],
    ['unit', 'SndbufTuneBandwidth 30mbps',
     "SndbufTuneBandwidth: '30mbps': $RATE_UNIT"],
    ['unit', 'SndbufTuneBandwidth 30Mbit/s',
     "SndbufTuneBandwidth: '30Mbit/s': $RATE_UNIT"],
    ['unicode: fullwidth digits', 'SndbufTuneBandwidth ３０mbit',
     q{SndbufTuneBandwidth: '\xef\xbc\x93\xef\xbc\x90mbit': } . $NOT_RATE],
    ['unicode: fullwidth m', 'SndbufTuneBandwidth 30ｍbit',
     q{SndbufTuneBandwidth: '30\xef\xbd\x8dbit': } . $RATE_UNIT],
    ['unicode: middle dot as point', 'SndbufTuneBandwidth 1·5mbit',
     q{SndbufTuneBandwidth: '1\xc2\xb75mbit': } . $RATE_UNIT],
    ['unicode: micro sign', 'SndbufTuneBandwidth 30µbit',
     q{SndbufTuneBandwidth: '30\xc2\xb5bit': } . $RATE_UNIT],
    ['arity: none', 'SndbufTuneBandwidth', $ARITY{SndbufTuneBandwidth}],
    ['arity: two', 'SndbufTuneBandwidth 1mbit 2mbit',
     $ARITY{SndbufTuneBandwidth}],
    ),

    # --- SndbufTuneLimits ----------------------------------------------
    map({ ['SndbufTuneLimits', @$_] }
    ['overflow: maximum', 'SndbufTuneLimits 4k 99999999999999999999',
     "SndbufTuneLimits: '99999999999999999999': too large (at most 1g)"],
    ['overflow: minimum', 'SndbufTuneLimits 99999999999999999999 4k',
     "SndbufTuneLimits: '99999999999999999999': too large (at most 1g)"],
    ['range: above 1g', 'SndbufTuneLimits 64k 2g',
     "SndbufTuneLimits: '2g': too large (at most 1g)"],
    ['range: below 4k', 'SndbufTuneLimits 3k 1m',
     "SndbufTuneLimits: '3k': too small (at least 4k)"],
    ['order', 'SndbufTuneLimits 1m 64k',
     "SndbufTuneLimits: '1m': minimum is larger than maximum"],
    ['negative: minimum', 'SndbufTuneLimits -4k 1m',
     "SndbufTuneLimits: '-4k': must not be negative"],
    ['negative: maximum', 'SndbufTuneLimits 4k -1m',
     "SndbufTuneLimits: '-1m': must not be negative"],
    ['zero: minimum', 'SndbufTuneLimits 0 1m',
     "SndbufTuneLimits: '0': too small (at least 4k)"],
    ['zero: maximum', 'SndbufTuneLimits 4k 0',
     "SndbufTuneLimits: '0': too small (at least 4k)"],
    ['empty: minimum', 'SndbufTuneLimits "" 1m', $ARITY{SndbufTuneLimits}],
    ['empty: maximum', 'SndbufTuneLimits 4k ""', $ARITY{SndbufTuneLimits}],
    ['hexadecimal', 'SndbufTuneLimits 0x1000 1m',
     "SndbufTuneLimits: '0x1000': $HEX"],
    ['exponent', 'SndbufTuneLimits 4k 1e6',
     "SndbufTuneLimits: '1e6': $EXP"],
    ['fraction', 'SndbufTuneLimits 64k 1.5m',
     "SndbufTuneLimits: '1.5m': not a whole number"],
    ['not a size', 'SndbufTuneLimits auto 1m',
     "SndbufTuneLimits: 'auto': $NOT_SIZE"],
    ['unicode: fullwidth digits', 'SndbufTuneLimits ６４k 1m',
     q{SndbufTuneLimits: '\xef\xbc\x96\xef\xbc\x94k': } . $NOT_SIZE],
    ['unicode: fullwidth m', 'SndbufTuneLimits 64k 1ｍ',
     q{SndbufTuneLimits: '1\xef\xbd\x8d': } . $SIZE_UNIT],
    ['arity: none', 'SndbufTuneLimits', $ARITY{SndbufTuneLimits}],
    ['arity: one', 'SndbufTuneLimits 64k', $ARITY{SndbufTuneLimits}],
    ['arity: three', 'SndbufTuneLimits 64k 1m 2m', $ARITY{SndbufTuneLimits}],
    ),

    # --- SndbufTuneNetwork ---------------------------------------------
    map({ ['SndbufTuneNetwork', @$_] }
    ['overflow: prefix 2^32', 'SndbufTuneNetwork 10.0.0.0/4294967296 64k',
     "SndbufTuneNetwork: '10.0.0.0/4294967296': $PREFIX4"],
    ['overflow: prefix 2^32 + 8', 'SndbufTuneNetwork 10.0.0.0/4294967304 64k',
     "SndbufTuneNetwork: '10.0.0.0/4294967304': $PREFIX4"],
    ['overflow: prefix',
     'SndbufTuneNetwork 10.0.0.0/99999999999999999999 64k',
     "SndbufTuneNetwork: '10.0.0.0/99999999999999999999': $PREFIX4"],
    ['overflow: address part', 'SndbufTuneNetwork 10.0.0.256/32 64k',
     "SndbufTuneNetwork: '10.0.0.256/32': $BAD4"],
    ['overflow: size', 'SndbufTuneNetwork 10.0.0.0/8 99999999999999999999',
     "SndbufTuneNetwork: '99999999999999999999': too large (at most 1g)$H"],
    ['overflow: rate',
     'SndbufTuneNetwork 10.0.0.0/8 auto 99999999999999999999gbit',
     "SndbufTuneNetwork: '99999999999999999999gbit': too large (at most "
     . "1000gbit)"],
    ['range: IPv4 prefix', 'SndbufTuneNetwork 10.0.0.0/33 64k',
     "SndbufTuneNetwork: '10.0.0.0/33': $PREFIX4"],
    ['range: IPv6 prefix', 'SndbufTuneNetwork 2001:db8::/129 64k',
     "SndbufTuneNetwork: '2001:db8::/129': prefix length must be a whole "
     . "number from 0 to 128"],
    ['negative: address', 'SndbufTuneNetwork -10.0.0.0/8 64k',
     "SndbufTuneNetwork: '-10.0.0.0/8': not an IPv4 or IPv6 address"],
    ['negative: prefix', 'SndbufTuneNetwork 10.0.0.0/-8 64k',
     "SndbufTuneNetwork: '10.0.0.0/-8': $PREFIX4"],
    ['negative: size', 'SndbufTuneNetwork 10.0.0.0/8 -64k',
     "SndbufTuneNetwork: '-64k': must not be negative$H"],
    ['negative: rate', 'SndbufTuneNetwork 10.0.0.0/8 auto -1mbit',
     "SndbufTuneNetwork: '-1mbit': must not be negative"],
    ['zero: prefix with host bits', 'SndbufTuneNetwork 10.0.0.0/0 64k',
     "SndbufTuneNetwork: '10.0.0.0/0': $HOST_BITS 0.0.0.0/0?"],
    ['zero: size', 'SndbufTuneNetwork 10.0.0.0/8 0',
     "SndbufTuneNetwork: '0': too small (at least 4k)$H"],
    ['zero: rate', 'SndbufTuneNetwork 10.0.0.0/8 auto 0kbit',
     "SndbufTuneNetwork: '0kbit': too small (at least 1kbit)"],
    ['empty: network', 'SndbufTuneNetwork "" 64k', $ARITY{SndbufTuneNetwork}],
    ['empty: policy', 'SndbufTuneNetwork 10.0.0.0/8 ""',
     $ARITY{SndbufTuneNetwork}],
    ['empty: rate', 'SndbufTuneNetwork 10.0.0.0/8 auto ""',
     "SndbufTuneNetwork: '': empty value"],
    ['empty: prefix', 'SndbufTuneNetwork 10.0.0.0/ 64k',
     "SndbufTuneNetwork: '10.0.0.0/': missing prefix length after '/'"],
    ['empty: address', 'SndbufTuneNetwork /8 64k',
     "SndbufTuneNetwork: '/8': missing address before '/'"],
    ['hexadecimal: address', 'SndbufTuneNetwork 0x0a.0.0.0/8 64k',
     "SndbufTuneNetwork: '0x0a.0.0.0/8': not an IPv4 or IPv6 address"],
    ['hexadecimal: prefix', 'SndbufTuneNetwork 10.0.0.0/0x8 64k',
     "SndbufTuneNetwork: '10.0.0.0/0x8': $PREFIX4"],
    ['hexadecimal: size', 'SndbufTuneNetwork 10.0.0.0/8 0x10000',
     "SndbufTuneNetwork: '0x10000': $HEX$H"],
    ['exponent: prefix', 'SndbufTuneNetwork 10.0.0.0/1e1 64k',
     "SndbufTuneNetwork: '10.0.0.0/1e1': $PREFIX4"],
    ['exponent: rate', 'SndbufTuneNetwork 10.0.0.0/8 auto 1e6bit',
     "SndbufTuneNetwork: '1e6bit': $EXP"],
    ['leading zero: octal to inet_aton', 'SndbufTuneNetwork 012.0.0.0/8 64k',
     "SndbufTuneNetwork: '012.0.0.0/8': $BAD4"],
    ['leading zero: prefix', 'SndbufTuneNetwork 10.0.0.0/08 64k',
     "SndbufTuneNetwork: '10.0.0.0/08': leading zero in the prefix length"],
    ['bad CIDR: prefix', 'SndbufTuneNetwork 10.0.0.0/x 64k',
     "SndbufTuneNetwork: '10.0.0.0/x': $PREFIX4"],
    ['bad CIDR: two prefixes', 'SndbufTuneNetwork 10.0.0.0/8/8 64k',
     "SndbufTuneNetwork: '10.0.0.0/8/8': $PREFIX4"],
    ['bad CIDR: host name', 'SndbufTuneNetwork example.com 64k',
     "SndbufTuneNetwork: 'example.com': not an IPv4 or IPv6 address"],
    ['bad CIDR: five parts', 'SndbufTuneNetwork 1.2.3.4.5 64k',
     "SndbufTuneNetwork: '1.2.3.4.5': $BAD4"],
    ['bad CIDR: empty part', 'SndbufTuneNetwork 10..0.0 64k',
     "SndbufTuneNetwork: '10..0.0': $BAD4"],
    ['bad CIDR: trailing dot', 'SndbufTuneNetwork 10.0.0. 64k',
     "SndbufTuneNetwork: '10.0.0.': $BAD4"],
    ['bad CIDR: brackets', 'SndbufTuneNetwork [2001:db8::]/32 64k',
     "SndbufTuneNetwork: '[2001:db8::]/32': write an IPv6 network without "
     . "brackets, e.g. 2001:db8::/32"],
    ['bad CIDR: IPv6', 'SndbufTuneNetwork 2001:db8:::/32 64k',
     "SndbufTuneNetwork: '2001:db8:::/32': not an IPv6 address"],
    ['zone id', 'SndbufTuneNetwork fe80::1%eth0 64k',
     "SndbufTuneNetwork: 'fe80::1%eth0': $ZONE"],
    ['zone id', 'SndbufTuneNetwork fe80::%eth0/64 64k',
     "SndbufTuneNetwork: 'fe80::%eth0/64': $ZONE"],
    ['zone id: URI-encoded', 'SndbufTuneNetwork fe80::1%25eth0/128 64k',
     "SndbufTuneNetwork: 'fe80::1%25eth0/128': $ZONE"],
    ['partial address', 'SndbufTuneNetwork 127 64k',
     "SndbufTuneNetwork: '127': $PARTIAL 127.0.0.0/8?"],
    ['partial address', 'SndbufTuneNetwork 127/8 64k',
     "SndbufTuneNetwork: '127/8': $PARTIAL 127.0.0.0/8?"],
    ['partial address', 'SndbufTuneNetwork 10.1 64k',
     "SndbufTuneNetwork: '10.1': $PARTIAL 10.1.0.0/16?"],
    ['partial address', 'SndbufTuneNetwork 10.1/16 64k',
     "SndbufTuneNetwork: '10.1/16': $PARTIAL 10.1.0.0/16?"],
    ['partial address', 'SndbufTuneNetwork 10.1.2/24 64k',
     "SndbufTuneNetwork: '10.1.2/24': $PARTIAL 10.1.2.0/24?"],
    ['partial address: 127.0.0.1 to inet_aton',
     'SndbufTuneNetwork 127.1 64k',
     "SndbufTuneNetwork: '127.1': $PARTIAL 127.1.0.0/16?"],
    ['partial address, prefix shorter than written: the network meant',
     'SndbufTuneNetwork 10.1/8 64k',
     "SndbufTuneNetwork: '10.1/8': $PARTIAL 10.0.0.0/8?"],
    ['partial address, bad prefix: no suggestion',
     'SndbufTuneNetwork 10.1/99 64k',
     "SndbufTuneNetwork: '10.1/99': partial IPv4 address: write all four "
     . "parts"],
    ['partial address, part above 255: no suggestion',
     'SndbufTuneNetwork 300.1 64k',
     "SndbufTuneNetwork: '300.1': partial IPv4 address: write all four "
     . "parts"],
    ['partial address: beside a /32',
     "SndbufTuneNetwork 127.0.0.1/32 1m\nSndbufTuneNetwork 127 64k",
     "SndbufTuneNetwork: '127': $PARTIAL 127.0.0.0/8?"],
    ['host bits', 'SndbufTuneNetwork 10.1.2.3/8 64k',
     "SndbufTuneNetwork: '10.1.2.3/8': $HOST_BITS 10.0.0.0/8?"],
    ['host bits: IPv6', 'SndbufTuneNetwork 2001:db8::1/32 64k',
     "SndbufTuneNetwork: '2001:db8::1/32': $HOST_BITS 2001:db8::/32?"],
    ['host bits: IPv4-mapped', 'SndbufTuneNetwork ::ffff:127.0.0.1/104 64k',
     "SndbufTuneNetwork: '::ffff:127.0.0.1/104': $HOST_BITS 127.0.0.0/8?"],
    ['host bits: IPv4-mapped below /96',
     'SndbufTuneNetwork ::ffff:127.0.0.0/95 64k',
     "SndbufTuneNetwork: '::ffff:127.0.0.0/95': an IPv4-mapped network needs a "
     . 'prefix length of 96 or more (96 + the IPv4 prefix)'],
    ['policy', 'SndbufTuneNetwork 10.0.0.0/8 fast',
     "SndbufTuneNetwork: 'fast': $NOT_SIZE$H"],
    ['rate without auto', 'SndbufTuneNetwork 10.0.0.0/8 64k 30mbit',
     "SndbufTuneNetwork: '30mbit': a rate only goes with auto"],
    ['rate without auto', 'SndbufTuneNetwork 10.0.0.0/8 unset 30mbit',
     "SndbufTuneNetwork: '30mbit': a rate only goes with auto"],
    ['rate without auto', 'SndbufTuneNetwork 10.0.0.0/8 none 30mbit',
     "SndbufTuneNetwork: '30mbit': a rate only goes with auto"],
    ['rate', 'SndbufTuneNetwork 10.0.0.0/8 auto 30xbit',
     "SndbufTuneNetwork: '30xbit': $RATE_UNIT"],
    ['unicode: fullwidth digits', 'SndbufTuneNetwork １０.0.0.0/8 64k',
     q{SndbufTuneNetwork: '\xef\xbc\x91\xef\xbc\x90.0.0.0/8': not an IPv4 }
     . 'or IPv6 address'],
    ['unicode: fullwidth solidus', 'SndbufTuneNetwork 10.0.0.0／8 64k',
     q{SndbufTuneNetwork: '10.0.0.0\xef\xbc\x8f8': not an IPv4 or IPv6 }
     . 'address'],
    ['unicode: fullwidth prefix', 'SndbufTuneNetwork 10.0.0.0/８ 64k',
     q{SndbufTuneNetwork: '10.0.0.0/\xef\xbc\x98': } . $PREFIX4],
    ['unicode: fullwidth size', 'SndbufTuneNetwork 2001:db8::/32 ６４k',
     q{SndbufTuneNetwork: '\xef\xbc\x96\xef\xbc\x94k': } . "$NOT_SIZE$H"],
    ['unicode: zone id', 'SndbufTuneNetwork fe80::1%ｅth0 64k',
     q{SndbufTuneNetwork: 'fe80::1%\xef\xbd\x85th0': } . $ZONE],
    ['duplicate', "SndbufTuneNetwork 10.0.0.0/8 64k\n"
     . "SndbufTuneNetwork 10.0.0.0/8 1m",
     "SndbufTuneNetwork: '10.0.0.0/8': $SAME 10.0.0.0/8 at <file>:1"],
    ['duplicate: IPv4-mapped form', "SndbufTuneNetwork 10.0.0.0/8 64k\n"
     . "SndbufTuneNetwork ::ffff:10.0.0.0/104 1m",
     "SndbufTuneNetwork: '::ffff:10.0.0.0/104': $SAME 10.0.0.0/8 at "
     . "<file>:1"],
    ['duplicate: IPv4-mapped /96', "SndbufTuneNetwork 0.0.0.0/0 unset\n"
     . "SndbufTuneNetwork ::ffff:0:0/96 64k",
     "SndbufTuneNetwork: '::ffff:0:0/96': $SAME 0.0.0.0/0 at <file>:1"],
    ['duplicate: another IPv6 spelling', "SndbufTuneNetwork 2001:db8::/32 64k\n"
     . "SndbufTuneNetwork 2001:0db8:0::/32 1m",
     "SndbufTuneNetwork: '2001:0db8:0::/32': $SAME 2001:db8::/32 at "
     . "<file>:1"],
    ['duplicate: /32 written out', "SndbufTuneNetwork 192.0.2.7 64k\n"
     . "SndbufTuneNetwork 192.0.2.7/32 1m",
     "SndbufTuneNetwork: '192.0.2.7/32': $SAME 192.0.2.7 at <file>:1"],
    ['duplicate: in a vhost', "<VirtualHost *:80>\n"
     . "    SndbufTuneNetwork 10.0.0.0/8 1m\n"
     . "    SndbufTuneNetwork 10.0.0.0/8 auto\n</VirtualHost>",
     "SndbufTuneNetwork: '10.0.0.0/8': $SAME 10.0.0.0/8 at <file>:2"],
    (map { ["wrong context: <$_->[0]>",
            "<$_->[0] $_->[1]>\n    SndbufTuneNetwork 10.0.0.0/8 64k\n"
            . "</$_->[0]>", sprintf($NET_CONTEXT, $_->[0])] }
         ['Location', '/x'], ['LocationMatch', '"^/x"'],
         ['Directory', '/var/www'], ['DirectoryMatch', '"^/var/www"'],
         ['Files', 'x.bin'], ['FilesMatch', '"\.bin$"'],
         ['If', '"%{REMOTE_ADDR} -ipmatch \'10.0.0.0/8\'"']),
    ['wrong context: <Location> in a vhost', "<VirtualHost *:80>\n"
     . "    <Location /y>\n        SndbufTuneNetwork 10.0.0.0/8 64k\n"
     . "    </Location>\n</VirtualHost>", sprintf($NET_CONTEXT, 'Location')],
    ['wrong context: <Limit>', "<Directory /var/www>\n    <Limit GET>\n"
     . "        SndbufTuneNetwork 10.0.0.0/8 64k\n    </Limit>\n"
     . "</Directory>", sprintf($NET_CONTEXT, 'Limit')],
    ['arity: none', 'SndbufTuneNetwork', $ARITY{SndbufTuneNetwork}],
    ['arity: one', 'SndbufTuneNetwork 10.0.0.0/8', $ARITY{SndbufTuneNetwork}],
    ['arity: four', 'SndbufTuneNetwork 10.0.0.0/8 auto 1mbit 2',
     $ARITY{SndbufTuneNetwork}],
    ),
);

# [directive, .htaccess line, message]: each directive in a .htaccess
my @HTACCESS = map { [$_->[0], "$_->[0] $_->[1]",
                      "<file>: $_->[0] not allowed here"] }
    ['SndbufTune', '64k'], ['SndbufTuneBandwidth', '30mbit'],
    ['SndbufTuneLimits', '16k 4m'], ['SndbufTuneNetwork', '10.0.0.0/8 64k'];

# [directive, configuration text, what it means]
my @ACCEPTED = (
    map({ ['SndbufTune', "SndbufTune $_->[0]", $_->[1]] }
        ['4k', 'the smallest size'], ['4K', 'units in either case'],
        ['4096', 'bytes without a unit'], ['0004k', 'leading zeros'],
        ['64k', ''], ['1m', ''], ['1M', ''], ['512m', ''],
        ['1g', 'the largest size'], ['1G', ''], ['1073741824', '1g in bytes'],
        ['unset', ''], ['auto', ''], ['AUTO', 'keywords in any case'],
        ['Unset', ''], ['none', 'leave the socket alone'], ['NONE', '']),
    ['SndbufTune', "SndbufTune 64k\nSndbufTune 1m",
     'twice in one scope: the later line wins, as for any httpd directive'],
    ['SndbufTune', "<VirtualHost *:80>\n    ServerName v.test\n"
     . "    SndbufTune 64k\n</VirtualHost>", 'in a vhost'],
    ['SndbufTune', "<Directory /var/www>\n    SndbufTune 64k\n</Directory>",
     'in a <Directory>'],
    ['SndbufTune', "<Location /x>\n    SndbufTune unset\n</Location>",
     'in a <Location>'],
    ['SndbufTune', "<Files \"x.bin\">\n    SndbufTune 1m\n</Files>",
     'in a <Files>'],
    ['SndbufTune', "<VirtualHost *:80>\n    ServerName v.test\n"
     . "    <Location /y>\n        SndbufTune 4k\n    </Location>\n"
     . "</VirtualHost>", 'in a <Location> in a vhost'],
    map({ ['SndbufTuneBandwidth', "SndbufTuneBandwidth $_->[0]", $_->[1]] }
        ['1kbit', 'the smallest rate'], ['1000gbit', 'the largest rate'],
        ['1000000000000bit', '1000gbit in bits'],
        ['1000.0000000000gbit', 'zeros after the point'],
        ['0.001mbit', '1kbit'], ['1.0000000001kbit', 'kept in bytes/s, '
         . 'rounded down: 125'],
        ['30mbit', ''], ['30MBIT', 'units in any case'], ['1.5mbit', ''],
        ['1.5gbit', ''], ['500kbit', ''],
        ['measure', 'the default, said explicitly'], ['Measure', '']),
    map({ ['SndbufTuneLimits', "SndbufTuneLimits $_->[0]", $_->[1]] }
        ['16k 4m', ''], ['64k 64k', 'minimum equal to maximum'],
        ['4k 4k', 'the smallest'], ['4k 1g', 'the widest']),
    map({ ['SndbufTuneNetwork', "SndbufTuneNetwork $_->[0]", $_->[1]] }
        ['10.60.0.0/16 auto 30mbit', 'a rate with auto'],
        ['0.0.0.0/0 unset', 'every IPv4 client'],
        ['::/0 auto', 'every IPv6 client'],
        ['::/0 auto 1kbit', ''],
        ['10.0.0.0/8 none', 'these clients\' sockets left alone'],
        ['2001:db8:42::/48 1M', ''],
        ['192.0.2.7 64k', 'no prefix: one address (/32)'],
        ['255.255.255.255/32 1g', ''],
        ['::ffff:10.0.0.0/104 64k', 'IPv4-mapped: the rule for 10.0.0.0/8'],
        ['::ffff:0:0/96 64k', 'IPv4-mapped: the rule for 0.0.0.0/0']),
    ['SndbufTuneNetwork', "SndbufTuneNetwork 0.0.0.0/0 unset\n"
     . "SndbufTuneNetwork ::/0 unset", 'one rule per family'],
    ['SndbufTuneNetwork', "SndbufTuneNetwork 10.0.0.0/8 64k\n"
     . "<VirtualHost *:80>\n    SndbufTuneNetwork 10.0.0.0/8 1m\n"
     . "</VirtualHost>", 'the same network in the main server and a vhost: '
     . 'the vhost\'s wins for its requests'],
);

plan tests => @REFUSED + @HTACCESS + @ACCEPTED + 1;

# --------------------------------------------------------------- run --

# `apache2 -t` on each configuration text, two at a time: a list of
# [exit code, output, the case file's path], in the order given.
sub syntax_checks {
    my @texts = @_;
    my $workers = 2;
    my (@pids, @servers);
    for my $w (0 .. $workers - 1) {
        my $srv = standalone(name => "bad_input$w",
                             body => "Include \@DIR\@/case.conf\n");
        push @servers, $srv;
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            # no END blocks here (POSIX::_exit): they are the parent's
            eval {
                my %res;
                for (my $i = $w; $i < @texts; $i += $workers) {
                    my $case = $srv->dir . '/case.conf';
                    open my $fh, '>', $case or die "$case: $!";
                    print $fh "$texts[$i]\n";
                    close $fh or die "$case: $!";
                    $res{$i} = [$srv->syntax_check, $case];
                }
                Storable::store(\%res, $srv->dir . '/results');
                1;
            } or do { print STDERR "syntax check worker $w: $@"; POSIX::_exit(1) };
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    my @all;
    for my $w (0 .. $workers - 1) {
        waitpid $pids[$w], 0;
        die "syntax check worker $w failed (exit " . ($? >> 8) . ")\n" if $?;
        my $res = Storable::retrieve($servers[$w]->dir . '/results');
        $all[$_] = $res->{$_} for keys %$res;
    }
    return @all;
}

# The message of an AH00526 syntax error, with the case file's path
# written as <file>; "accepted" when apache2 -t exits 0.
sub message_of {
    my ($rc, $out, $case) = @_;
    return 'accepted (exit 0)' if $rc == 0;
    my ($file, $msg) = $out =~ /^AH00526: Syntax error on line \d+ of (.*):\n(.*)$/m
        or return "exit $rc, no AH00526 line: $out";
    $msg =~ s/\Q$file\E/<file>/g if $file eq $case;
    return $msg;
}

sub one_line { join ' ; ', map { s/^\s+//r } split /\n/, $_[0] }

my @results = syntax_checks((map { $_->[2] } @REFUSED),
                            (map { $_->[1] } @ACCEPTED));
for my $case (@REFUSED) {
    my ($directive, $class, $text, $want) = @$case;
    is(message_of(@{ shift @results }), $want,
       "refused ($class): " . one_line($text));
}
for my $case (@ACCEPTED) {
    my ($directive, $text) = @$case;
    my ($rc, $out) = @{ shift @results };
    ok($rc == 0 && $out =~ /Syntax OK/, 'accepted: ' . one_line($text))
        or diag("exit $rc: $out");
}

# .htaccess: each directive in a directory of its own, under the
# Apache::Test server's <Directory .../gen/bad_input> (AllowOverride All)
{
    my $docroot = Apache::Test::vars('documentroot');
    my $base = '/gen/bad_input';
    my @files;
    for my $i (0 .. $#HTACCESS) {
        my $dir = "$docroot$base/h$i";
        File::Path::make_path($dir, { mode => 0755 });
        open my $fh, '>', "$dir/.htaccess" or die "$dir/.htaccess: $!";
        print $fh "$HTACCESS[$i][1]\n";
        close $fh or die "$dir/.htaccess: $!";
        chmod 0644, "$dir/.htaccess";
        push @files, "$dir/.htaccess";
    }
    Apache::TestRequest::module('sndbuf');
    t_start_error_log_watch();
    my @status = map { GET("$base/h$_/", Host => 'none.test')->code }
        0 .. $#HTACCESS;
    my @log = t_finish_error_log_watch();
    for my $i (0 .. $#HTACCESS) {
        my ($directive, $line, $want) = @{ $HTACCESS[$i] };
        my ($msg) = map { /\] \Q$files[$i]\E: (.*)$/ ? $1 : () } @log;
        is("$status[$i] " . (defined $msg ? "<file>: $msg" : '(not logged)'),
           "500 $want", "refused in .htaccess: $line");
    }
}

# ------------------------------------------------------ the document --

sub md_code {
    return join '<br>', map { '`' . (s/^\s+//r =~ s/\|/\\|/gr) . '`' }
        split /\n/, $_[0];
}
sub md_text { $_[0] =~ s/\|/\\|/gr }

sub document {
    my $doc = <<'EOF';
# What each directive refuses, word for word

<!-- Generated by t/apache/bad_input.t from its tables; do not edit.
     Regenerate: SBT_WRITE_DOCS=1 t/run t/apache/bad_input.t -->

Every row below is a case of `t/apache/bad_input.t`, which fails if
`apache2 -t` (or, for `.htaccess`, the request) does not give exactly
this message, and fails again if this file differs from what its tables
generate. The message is the line `apache2 -t` prints after
`AH00526: Syntax error on line N of FILE:`; httpd stops at the first
error, so only one is ever reported. In a message, `<file>` stands for
the path of the file with the offending line. httpd escapes non-ASCII
bytes in what it prints, so a message shows `６４k` as
`\xef\xbc\x96\xef\xbc\x94k`.

The value syntax is in [docs/directives.md](../../docs/directives.md).
EOF
    my %seen;
    my @order = grep { !$seen{$_}++ } map { $_->[0] } @REFUSED;
    for my $d (@order) {
        $doc .= "\n## $d: refused by `apache2 -t`\n\n"
              . "| Class | Written | `apache2 -t` says |\n|---|---|---|\n";
        $doc .= join '', map { '| ' . md_text($_->[1]) . ' | '
                                   . md_code($_->[2]) . ' | '
                                   . md_code($_->[3]) . " |\n" }
            grep { $_->[0] eq $d } @REFUSED;
    }
    $doc .= <<'EOF';

## Refused in .htaccess

`apache2 -t` does not read `.htaccess` files. None of the directives is
allowed there; a request that reaches one using them fails with 500, and
the error log says (`<file>` is the `.htaccess`):

| Written in .htaccess | The error log says |
|---|---|
EOF
    $doc .= join '', map { '| ' . md_code($_->[1]) . ' | '
                               . md_code($_->[2]) . " |\n" } @HTACCESS;
    $doc .= "\n## Accepted at the edges\n\n"
          . "| Directive | Written | Note |\n|---|---|---|\n";
    $doc .= join '', map { "| $_->[0] | " . md_code($_->[1]) . ' | '
                               . md_text($_->[2]) . " |\n" } @ACCEPTED;
    return $doc;
}

{
    my $path = top_dir() . "/$DOC";
    my $want = document();
    if ($ENV{SBT_WRITE_DOCS}) {
        open my $fh, '>', $path or die "$path: $!";
        print $fh $want;
        close $fh or die "$path: $!";
        diag("wrote $DOC");
    }
    my $have = '';
    if (open my $fh, '<', $path) {
        local $/;
        $have = <$fh>;
        close $fh;
    }
    my @h = split /\n/, $have, -1;
    my @w = split /\n/, $want, -1;
    my ($i) = grep { ($h[$_] // '') ne ($w[$_] // '') } 0 .. $#w;
    $i //= @h > @w ? scalar @w : undef;
    ok(!defined $i, "$DOC is what the tables generate")
        or diag("$DOC line " . ($i + 1) . ":\n  has:       "
                . ($h[$i] // '(end of file)') . "\n  generated: "
                . ($w[$i] // '(end of file)') . "\nregenerate it: $REGENERATE");
}
