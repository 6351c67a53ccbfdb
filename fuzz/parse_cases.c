/* SPDX-License-Identifier: Apache-2.0 */

/*
 * parse_cases.c: the exact reason and value of sndbuf_parse.c's parsers
 * for a table of inputs (make parse-check).  Deterministic, unlike the
 * fuzzer: this table is what pins down each fix (prefix overflow,
 * partial IPv4 addresses, hexadecimal and exponent rates, ...).
 *
 *   fuzz/parse_cases        check; last line "parse-check: N passed, N failed"
 *   fuzz/parse_cases -v     also print every input with its result
 */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../sndbuf_parse.h"

/* The reasons, spelled out here so that a changed wording is a
 * deliberate change to this table too. */
#define EMPTY       "empty value"
#define SPACE       "contains whitespace"
#define NEGATIVE    "must not be negative"
#define PLUS        "must not have a '+' sign"
#define HEX         "hexadecimal is not allowed (write a plain decimal number)"
#define EXPONENT    "exponents are not allowed (write a plain decimal number)"
#define S_NOT       "not a size (digits, optionally followed by k, m or g)"
#define S_FRACTION  "not a whole number"
#define S_COMMA     "contains a comma (write digits only, e.g. 1048576 or 1m)"
#define S_UNIT      "unknown unit (use k, m or g; no unit means bytes)"
#define S_UNIT_B    "unknown unit (k, m and g stand alone: 64k, not 64kb " \
                    "or 64KiB)"
#define S_LARGE     "too large (at most 1g)"
#define S_SMALL     "too small (at least 4k)"
#define R_NOT       "not a rate (a number, then bit, kbit, mbit or gbit)"
#define R_POINT     "a decimal point needs a digit on each side (0.5mbit, " \
                    "not .5mbit)"
#define R_POINTS    "more than one decimal point"
#define R_COMMA     "use a decimal point, not a comma"
#define R_NO_UNIT   "missing unit (bit, kbit, mbit or gbit)"
#define R_UNIT      "unknown unit (use bit, kbit, mbit or gbit)"
#define R_SMALL     "too small (at least 1kbit)"
#define R_LARGE     "too large (at most 1000gbit)"
#define C_NO_ADDR   "missing address before '/'"
#define C_BRACKETS  "write an IPv6 network without brackets, e.g. " \
                    "2001:db8::/32"
#define C_ZONE      "IPv6 zone ids (%eth0) are not allowed: a rule matches " \
                    "the address on any interface"
#define C_PARTIAL   "partial IPv4 address: write all four parts"
#define C_MAPPED    "an IPv4-mapped network needs a prefix length of 96 or " \
                    "more (96 + the IPv4 prefix)"
#define C_BAD4      "not an IPv4 address (four numbers from 0 to 255, " \
                    "without leading zeros)"
#define C_BAD6      "not an IPv6 address"
#define C_BAD       "not an IPv4 or IPv6 address"
#define C_NO_PREFIX "missing prefix length after '/'"
#define C_PREFIX4   "prefix length must be a whole number from 0 to 32"
#define C_PREFIX6   "prefix length must be a whole number from 0 to 128"
#define C_ZERO      "leading zero in the prefix length"
#define C_HOST      "host bits are set beyond the prefix length"
#define L_ORDER     "minimum is larger than maximum"

#define OK          NULL
#define K           1024
#define M           (1024 * 1024)
#define G           (1024 * 1024 * 1024)

static const struct {
    const char *arg, *why;
    int bytes;
} sizes[] = {
    {"4k", OK, 4 * K}, {"4K", OK, 4 * K}, {"4096", OK, 4096},
    {"64k", OK, 64 * K}, {"1m", OK, M}, {"1M", OK, M},
    {"512m", OK, 512 * M}, {"1024m", OK, G}, {"1g", OK, G}, {"1G", OK, G},
    {"1073741824", OK, G}, {"1048576k", OK, G}, {"0004k", OK, 4 * K},
    {"000000000000000000000000000000064k", OK, 64 * K},
    {"4095", S_SMALL, 0}, {"0", S_SMALL, 0}, {"0k", S_SMALL, 0},
    {"3k", S_SMALL, 0}, {"0g", S_SMALL, 0},
    {"1073741825", S_LARGE, 0}, {"2g", S_LARGE, 0}, {"1025m", S_LARGE, 0},
    {"1048577k", S_LARGE, 0},
    /* would wrap a 32-bit int to 0 or a 64-bit one past 2^64 */
    {"4294967296", S_LARGE, 0}, {"4194304k", S_LARGE, 0},
    {"18446744073709551616", S_LARGE, 0}, {"99999999999999999999", S_LARGE, 0},
    {"99999999999999999999999999999999999999999999999999g", S_LARGE, 0},
    {"", EMPTY, 0}, {"-4k", NEGATIVE, 0}, {"-1", NEGATIVE, 0},
    {"+4k", PLUS, 0}, {" 4k", SPACE, 0}, {"4k ", SPACE, 0},
    {"4 k", SPACE, 0}, {"\t4k", SPACE, 0}, {"4k\n", SPACE, 0},
    {"1.5m", S_FRACTION, 0}, {"4.0k", S_FRACTION, 0},
    {"1,5m", S_COMMA, 0}, {"1,048,576", S_COMMA, 0},
    {"0x1000", HEX, 0}, {"0X1000", HEX, 0}, {"1e6", EXPONENT, 0},
    {"1E+6", EXPONENT, 0}, {"4e-3g", EXPONENT, 0},
    {"abc", S_NOT, 0}, {"k", S_NOT, 0}, {"inf", S_NOT, 0}, {"nan", S_NOT, 0},
    {".5m", S_NOT, 0}, {"unset", S_NOT, 0},
    {"10x", S_UNIT, 0}, {"1kk", S_UNIT, 0}, {"4096b", S_UNIT, 0},
    {"1t", S_UNIT, 0}, {"4e", S_UNIT, 0}, {"64kB", S_UNIT_B, 0},
    {"64kb", S_UNIT_B, 0}, {"64KiB", S_UNIT_B, 0}, {"1mib", S_UNIT_B, 0},
    /* U+FF14 FULLWIDTH DIGIT FOUR, U+FF4B FULLWIDTH LATIN SMALL LETTER K,
     * U+00A0 NO-BREAK SPACE: bytes, not white space, to us */
    {"\xef\xbc\x94k", S_NOT, 0}, {"4\xef\xbd\x8b", S_UNIT, 0},
    {"4k\xc2\xa0", S_UNIT, 0},
};

static const struct {
    const char *arg, *why;
    uint64_t bytes_per_s;
} rates[] = {
    {"30mbit", OK, 3750000}, {"30Mbit", OK, 3750000},
    {"30MBIT", OK, 3750000}, {"1.5gbit", OK, 187500000},
    {"500kbit", OK, 62500}, {"20mbit", OK, 2500000},
    {"1kbit", OK, 125}, {"1000bit", OK, 125}, {"0.001mbit", OK, 125},
    {"0.000001gbit", OK, 125}, {"1000gbit", OK, UINT64_C(125000000000)},
    {"1000000000000bit", OK, UINT64_C(125000000000)},
    {"1000.000000000000000000000000gbit", OK, UINT64_C(125000000000)},
    /* rounded down to whole bytes: 1007 bits = 125.875 bytes */
    {"1000.5bit", OK, 125}, {"1007bit", OK, 125}, {"1008bit", OK, 126},
    {"999.999999999999999999999gbit", OK, UINT64_C(124999999999)},
    {"00030mbit", OK, 3750000}, {"1.0000000000000000000001kbit", OK, 125},
    {"999bit", R_SMALL, 0}, {"999.99999999999999999bit", R_SMALL, 0},
    {"0.999kbit", R_SMALL, 0}, {"0mbit", R_SMALL, 0}, {"0bit", R_SMALL, 0},
    {"0.0000009gbit", R_SMALL, 0},
    {"1000.0000000000000000001gbit", R_LARGE, 0}, {"1001gbit", R_LARGE, 0},
    {"1000.0000000001gbit", R_LARGE, 0}, {"1000000000000.1bit", R_LARGE, 0},
    {"2000gbit", R_LARGE, 0}, {"1000000000001bit", R_LARGE, 0},
    {"18446744073709551617bit", R_LARGE, 0},
    {"99999999999999999999999999999999mbit", R_LARGE, 0},
    {"", EMPTY, 0}, {" 30mbit", SPACE, 0}, {"30 mbit", SPACE, 0},
    {"30mbit\r", SPACE, 0}, {"-1mbit", NEGATIVE, 0}, {"+1mbit", PLUS, 0},
    /* strtod reads all of these */
    {"0x10mbit", HEX, 0}, {"0X1p4kbit", HEX, 0}, {"1e3kbit", EXPONENT, 0},
    {"1.5e3kbit", EXPONENT, 0}, {"1E3KBIT", EXPONENT, 0},
    {"1e+3kbit", EXPONENT, 0}, {"inf", R_NOT, 0}, {"infmbit", R_NOT, 0},
    {"INFINITYgbit", R_NOT, 0}, {"nanmbit", R_NOT, 0}, {"fast", R_NOT, 0},
    {"1,5mbit", R_COMMA, 0}, {".5mbit", R_POINT, 0}, {"5.mbit", R_POINT, 0},
    {"5.", R_POINT, 0}, {"1.2.3mbit", R_POINTS, 0},
    {"30", R_NO_UNIT, 0}, {"1.5", R_NO_UNIT, 0}, {"30mb", R_UNIT, 0},
    {"30xbit", R_UNIT, 0}, {"30mbps", R_UNIT, 0}, {"30Mbit/s", R_UNIT, 0},
    {"30m", R_UNIT, 0}, {"30bits", R_UNIT, 0}, {"30mbit\xc2\xa0", R_UNIT, 0},
    {"\xef\xbc\x93\xef\xbc\x90mbit", R_NOT, 0},
};

/* want: the network as sbt_format_cidr writes it; for C_HOST the
 * network handed back for the "did you mean" suggestion. */
static const struct {
    const char *arg, *why, *want;
} cidrs[] = {
    {"10.0.0.0/8", OK, "10.0.0.0/8"}, {"10.60.0.0/16", OK, "10.60.0.0/16"},
    {"192.0.2.7", OK, "192.0.2.7/32"}, {"127.0.0.1/32", OK, "127.0.0.1/32"},
    {"0.0.0.0/0", OK, "0.0.0.0/0"}, {"255.255.255.255", OK,
                                     "255.255.255.255/32"},
    {"198.18.0.0/15", OK, "198.18.0.0/15"},
    {"::/0", OK, "::/0"}, {"::1", OK, "::1/128"}, {"::1/128", OK, "::1/128"},
    {"2001:db8:42::/48", OK, "2001:db8:42::/48"},
    {"2001:DB8::/32", OK, "2001:db8::/32"}, {"fe80::/10", OK, "fe80::/10"},
    /* IPv4-mapped: the IPv4 network */
    {"::ffff:10.0.0.0/104", OK, "10.0.0.0/8"},
    {"::ffff:0:0/96", OK, "0.0.0.0/0"},
    {"::ffff:192.0.2.7", OK, "192.0.2.7/32"},
    {"::FFFF:c000:0207/128", OK, "192.0.2.7/32"},
    /* the longest text forms, 39 and 45 characters */
    {"2001:0db8:85a3:0000:0000:8a2e:0370:7334", OK,
     "2001:db8:85a3::8a2e:370:7334/128"},
    {"0000:0000:0000:0000:0000:ffff:255.255.255.255/128", OK,
     "255.255.255.255/32"},
    {"0000:0000:0000:0000:0000:0000:255.255.255.255", OK,
     "::255.255.255.255/128"},
    /* prefix overflow: atoi made these /0 and /128 */
    {"10.0.0.0/4294967296", C_PREFIX4, NULL},
    {"10.0.0.0/18446744073709551616", C_PREFIX4, NULL},
    {"::/4294967424", C_PREFIX6, NULL},
    {"10.0.0.0/33", C_PREFIX4, NULL}, {"2001:db8::/129", C_PREFIX6, NULL},
    {"10.0.0.0/x", C_PREFIX4, NULL}, {"10.0.0.0/+8", C_PREFIX4, NULL},
    {"10.0.0.0/-8", C_PREFIX4, NULL}, {"10.0.0.0/8/8", C_PREFIX4, NULL},
    {"10.0.0.0/8x", C_PREFIX4, NULL}, {"::/0x10", C_PREFIX6, NULL},
    {"10.0.0.0/08", C_ZERO, NULL}, {"10.0.0.0/00", C_ZERO, NULL},
    {"::/0128", C_ZERO, NULL}, {"10.0.0.0/", C_NO_PREFIX, NULL},
    {"/8", C_NO_ADDR, NULL},
    /* APR reads these as /8, /16, /24 networks */
    {"127", C_PARTIAL, NULL}, {"127.0", C_PARTIAL, NULL},
    {"1.2.3", C_PARTIAL, NULL}, {"10", C_PARTIAL, NULL},
    {"10/8", C_PARTIAL, NULL}, {"10.1/16", C_PARTIAL, NULL},
    {"172.16/12", C_PARTIAL, NULL},
    {"fe80::1%eth0", C_ZONE, NULL}, {"fe80::%eth0/64", C_ZONE, NULL},
    {"fe80::1%25eth0", C_ZONE, NULL}, {"fe80::1%", C_ZONE, NULL},
    {"[::1]/128", C_BRACKETS, NULL}, {"[2001:db8::]", C_BRACKETS, NULL},
    {"example.com", C_BAD, NULL}, {"localhost/8", C_BAD, NULL},
    {"0x0a.0.0.0/8", C_BAD, NULL}, {"10.0.0.0-10.255.255.255", C_BAD, NULL},
    {"\xef\xbc\x91\xef\xbc\x90.0.0.0/8", C_BAD, NULL},
    {"1.2.3.4.5", C_BAD4, NULL}, {"256.0.0.0/8", C_BAD4, NULL},
    {"010.0.0.0/8", C_BAD4, NULL}, {"1.2.3.", C_BAD4, NULL},
    {"1..2.3", C_BAD4, NULL}, {".1.2.3", C_BAD4, NULL}, {"1..2", C_BAD4, NULL},
    {"1.2.3.4444444444444444444444444444444444444444444444", C_BAD4, NULL},
    {"1:2:3:4:5:6:7:8:9", C_BAD6, NULL}, {"1::2::3", C_BAD6, NULL},
    {"::ffff:1.2.3", C_BAD6, NULL}, {"::g", C_BAD6, NULL},
    {"0000:0000:0000:0000:0000:0000:0000:0000:0", C_BAD6, NULL},
    {"0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000", C_BAD6, NULL},
    {"", EMPTY, NULL}, {" 10.0.0.0/8", SPACE, NULL},
    {"10.0.0.0 /8", SPACE, NULL}, {"10.0.0.0/8\n", SPACE, NULL},
    /* host bits: refused, the network handed back */
    {"10.1.2.3/8", C_HOST, "10.0.0.0/8"},
    {"192.168.1.1/24", C_HOST, "192.168.1.0/24"},
    {"10.1.0.0/15", C_HOST, "10.0.0.0/15"},
    {"10.0.0.1/31", C_HOST, "10.0.0.0/31"},
    {"10.0.0.128/25", OK, "10.0.0.128/25"},
    {"10.0.0.192/25", C_HOST, "10.0.0.128/25"},
    {"2001:db8:0:1::/63", C_HOST, "2001:db8::/63"},
    {"0.0.0.1/0", C_HOST, "0.0.0.0/0"},
    {"2001:db8::1/32", C_HOST, "2001:db8::/32"},
    {"::1/0", C_HOST, "::/0"},
    {"::ffff:10.1.0.0/104", C_HOST, "10.0.0.0/8"},
    {"::ffff:10.0.0.0/80", C_MAPPED, NULL},
};

static const struct {
    const char *min, *max, *why;
    int bad;                    /* 0: none, 1: min, 2: max */
    int lo, hi;
} limits[] = {
    {"16k", "4m", OK, 0, 16 * K, 4 * M}, {"64k", "64k", OK, 0, 64 * K, 64 * K},
    {"4k", "1g", OK, 0, 4 * K, G}, {"8K", "96k", OK, 0, 8 * K, 96 * K},
    {"1m", "64k", L_ORDER, 1, 0, 0}, {"3k", "1m", S_SMALL, 1, 0, 0},
    {"64k", "2g", S_LARGE, 2, 0, 0}, {"", "1m", EMPTY, 1, 0, 0},
    {"64k", "", EMPTY, 2, 0, 0}, {"2g", "1k", S_LARGE, 1, 0, 0},
    {"16k", "0x100000", HEX, 2, 0, 0},
};

static const struct {
    const char *arg, *why;
    int policy, size;
} policies[] = {
    {"unset", OK, SBT_POLICY_UNSET, 0}, {"UNSET", OK, SBT_POLICY_UNSET, 0},
    {"auto", OK, SBT_POLICY_AUTO, 0}, {"Auto", OK, SBT_POLICY_AUTO, 0},
    {"64k", OK, SBT_POLICY_FIXED, 64 * K}, {"1g", OK, SBT_POLICY_FIXED, G},
    {"autox", S_NOT, 0, 0}, {"unset ", SPACE, 0, 0}, {"", EMPTY, 0, 0},
    {"3k", S_SMALL, 0, 0}, {"-1", NEGATIVE, 0, 0},
    {"none", OK, SBT_POLICY_NONE, 0}, {"NONE", OK, SBT_POLICY_NONE, 0},
    {"nones", S_NOT, 0, 0},
};

static int verbose, passed, failed;

/** @a s with non-printable bytes as \xNN, for messages. */
static const char *show(const char *s)
{
    static char buf[4][256];
    static int n;
    char *out = buf[n++ % 4], *o = out;

    for (; *s && o < out + sizeof(buf[0]) - 5; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f) {
            o += sprintf(o, "\\x%02x", c);
        }
        else {
            *o++ = (char)c;
        }
    }
    *o = '\0';
    return out;
}

static int same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void result(int ok, const char *what, const char *arg,
                   const char *got, const char *want)
{
    if (ok) {
        passed++;
    }
    else {
        failed++;
    }
    if (!ok || verbose) {
        printf("%s %s('%s'): %s", ok ? "ok  " : "FAIL", what, show(arg),
               got ? got : "OK");
        if (!ok) {
            printf("\n       want: %s", want ? want : "OK");
        }
        printf("\n");
    }
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
    char got[256], want[256], net[SBT_CIDR_STRLEN];
    const char *why, *bad;
    size_t i;

    verbose = argc > 1 && !strcmp(argv[1], "-v");

    for (i = 0; i < N(sizes); i++) {
        int bytes = -1;

        why = sbt_parse_size(sizes[i].arg, &bytes);
        /* on failure the output must be left alone */
        snprintf(got, sizeof(got), "%s, %d", why ? why : "OK", bytes);
        snprintf(want, sizeof(want), "%s, %d",
                 sizes[i].why ? sizes[i].why : "OK",
                 sizes[i].why ? -1 : sizes[i].bytes);
        result(!strcmp(got, want), "size", sizes[i].arg, got, want);
    }

    for (i = 0; i < N(rates); i++) {
        uint64_t v = 7;

        why = sbt_parse_rate(rates[i].arg, &v);
        snprintf(got, sizeof(got), "%s, %" PRIu64, why ? why : "OK", v);
        snprintf(want, sizeof(want), "%s, %" PRIu64,
                 rates[i].why ? rates[i].why : "OK",
                 rates[i].why ? 7 : rates[i].bytes_per_s);
        result(!strcmp(got, want), "rate", rates[i].arg, got, want);
    }

    for (i = 0; i < N(cidrs); i++) {
        sbt_cidr_t c = {99, {0}, -1};
        const char *text;

        why = sbt_parse_cidr(cidrs[i].arg, &c);
        text = c.family == 99 ? "untouched"
             : sbt_format_cidr(&c, net, sizeof(net)) ? net : "unformattable";
        snprintf(got, sizeof(got), "%s, %s", why ? why : "OK", text);
        snprintf(want, sizeof(want), "%s, %s",
                 cidrs[i].why ? cidrs[i].why : "OK",
                 cidrs[i].want ? cidrs[i].want : "untouched");
        /* the host-bits reason is also the exported pointer */
        result(!strcmp(got, want)
               && (!same(why, C_HOST) || why == sbt_parse_cidr_host_bits),
               "cidr", cidrs[i].arg, got, want);
    }

    /* sbt_format_cidr refuses what sbt_parse_cidr never returns, and a
     * buffer too small for the text */
    {
        sbt_cidr_t c = {4, {10}, 8};
        char small[11];

        result(sbt_format_cidr(&c, net, sizeof(net)) == net
               && !strcmp(net, "10.0.0.0/8"), "format", "10.0.0.0/8",
               net, "10.0.0.0/8");
        result(!sbt_format_cidr(&c, small, 10), "format", "10.0.0.0/8 in 10",
               "a string", "NULL");
        result(sbt_format_cidr(&c, small, 11) == small, "format",
               "10.0.0.0/8 in 11", "NULL", "a string");
        c.prefix = 33;
        result(!sbt_format_cidr(&c, net, sizeof(net)), "format", "prefix 33",
               "a string", "NULL");
        c.prefix = -1;
        result(!sbt_format_cidr(&c, net, sizeof(net)), "format", "prefix -1",
               "a string", "NULL");
        c.family = 5;
        c.prefix = 8;
        result(!sbt_format_cidr(&c, net, sizeof(net)), "format", "family 5",
               "a string", "NULL");
    }

    for (i = 0; i < N(limits); i++) {
        int lo = -1, hi = -1;
        char arg[128];

        bad = "unchanged";
        why = sbt_parse_limits(limits[i].min, limits[i].max, &lo, &hi, &bad);
        snprintf(arg, sizeof(arg), "%s', '%s", limits[i].min, limits[i].max);
        snprintf(got, sizeof(got), "%s, bad %s, %d..%d", why ? why : "OK",
                 bad == limits[i].min ? "min" : bad == limits[i].max ? "max"
                 : bad ? "?" : "NULL", lo, hi);
        snprintf(want, sizeof(want), "%s, bad %s, %d..%d",
                 limits[i].why ? limits[i].why : "OK",
                 limits[i].bad == 1 ? "min" : limits[i].bad == 2 ? "max"
                 : "NULL", limits[i].why ? -1 : limits[i].lo,
                 limits[i].why ? -1 : limits[i].hi);
        result(!strcmp(got, want), "limits", arg, got, want);
    }

    for (i = 0; i < N(policies); i++) {
        int policy = -1, size = -1;

        why = sbt_parse_policy(policies[i].arg, &policy, &size);
        snprintf(got, sizeof(got), "%s, policy %d, size %d",
                 why ? why : "OK", policy, size);
        snprintf(want, sizeof(want), "%s, policy %d, size %d",
                 policies[i].why ? policies[i].why : "OK",
                 policies[i].why ? -1 : policies[i].policy,
                 policies[i].why ? -1 : policies[i].size);
        result(!strcmp(got, want), "policy", policies[i].arg, got, want);
    }

    printf("parse-check: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
