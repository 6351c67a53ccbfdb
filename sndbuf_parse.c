/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_parse.c: the parsers of the directives' values, and the prefix
 * mask and hash the rules share with them.
 *
 * Syntax is checked before range: fixing the form comes first.  Characters
 * are classified by hand, not with <ctype.h>, whose answers depend on the
 * locale httpd runs under (in a Turkish locale tolower('I') is not 'i').
 */

/* inet_pton and inet_ntop are POSIX, not C99: ask for them when the
 * compiler runs in strict C99 mode (apxs builds define _GNU_SOURCE). */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200112L
#endif

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "sndbuf_parse.h"

/* Reasons used twice or passed on; the rest are written where returned. */
static const char r_size_not[] = "not a size (digits, optionally followed "
                                 "by k, m or g)";
static const char r_rate_not[] = "not a rate (a number, then bit, kbit, "
                                 "mbit or gbit)";
static const char r_rate_point[] = "a decimal point needs a digit on each "
                                   "side (0.5mbit, not .5mbit)";
static const char r_rate_large[] = "too large (at most 1000gbit)";
const char sbt_parse_cidr_partial[] = "partial IPv4 address: write all "
                                      "four parts";
const char sbt_parse_cidr_host_bits[] = "host bits are set beyond the "
                                        "prefix length";

static int sbt_isdigit(int c)
{
    return c >= '0' && c <= '9';
}

static int sbt_tolower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int sbt_caseeq(const char *a, const char *b)
{
    for (; *a && sbt_tolower((unsigned char)*a)
                  == sbt_tolower((unsigned char)*b); a++, b++)
        ;
    return *a == '\0' && *b == '\0';
}

/** White space is a typo: httpd splits lines at it, so it can only have
 *  come inside quotes. */
static const char *sbt_check_blank(const char *s)
{
    if (!*s) {
        return "empty value";
    }
    for (; *s; s++) {
        if (*s == ' ' || (*s >= '\t' && *s <= '\r')) {
            return "contains whitespace";
        }
    }
    return NULL;
}

/** The digits at *p into *v, advancing *p.  Past @a cap (< UINT64_MAX / 10)
 *  *v is cap + 1, so no number of digits wraps into range as in atoi. */
static void sbt_digits(const char **p, uint64_t cap, uint64_t *v)
{
    const char *s;
    uint64_t n = 0;

    for (s = *p; sbt_isdigit((unsigned char)*s); s++) {
        if (n <= cap) {
            n = n * 10 + (uint64_t)(*s - '0');
        }
    }
    *v = n > cap ? cap + 1 : n;
    *p = s;
}

/** What is wrong before the first digit. */
static const char *sbt_check_start(const char *arg, const char *not_a_number)
{
    const char *why;

    if ((why = sbt_check_blank(arg)) != NULL) {
        return why;
    }
    if (*arg == '-') {
        return "must not be negative";
    }
    if (*arg == '+') {
        return "must not have a '+' sign";
    }
    if (!sbt_isdigit((unsigned char)*arg)) {
        return not_a_number;
    }
    return NULL;
}

/** Forms strtol and strtod take, named rather than an unknown unit; @a p
 *  follows the digits at @a digits ("0x10mbit", "1e3kbit", "1.5E+3kbit"). */
static const char *sbt_check_foreign(const char *digits, const char *p)
{
    if ((*p == 'x' || *p == 'X') && p - digits == 1 && digits[0] == '0') {
        return "hexadecimal is not allowed (write a plain decimal number)";
    }
    if ((*p == 'e' || *p == 'E')
        && (sbt_isdigit((unsigned char)p[1]) || p[1] == '+' || p[1] == '-')) {
        return "exponents are not allowed (write a plain decimal number)";
    }
    return NULL;
}

const char *sbt_parse_size(const char *arg, int *bytes)
{
    static const char units[] = "kmg";      /* x 2^10, 2^20, 2^30 */
    const char *p = arg, *unit_at, *why;
    uint64_t v, unit = 1;

    if ((why = sbt_check_start(arg, r_size_not)) != NULL) {
        return why;
    }
    sbt_digits(&p, SBT_SIZE_MAX, &v);
    if ((why = sbt_check_foreign(arg, p)) != NULL) {
        return why;
    }
    if (*p == '.') {
        return "not a whole number";
    }
    if (*p == ',') {
        return "contains a comma (write digits only, e.g. 1048576 or 1m)";
    }
    if (*p && (unit_at = strchr(units, sbt_tolower((unsigned char)*p)))) {
        unit = UINT64_C(1) << (10 * (unit_at - units + 1));
        p++;
    }
    if (*p) {
        /* "64kb", "64KiB": the unit is there, the 'b' is the habit of
         * other programs; say so rather than only "unknown unit". */
        if (unit > 1 && (sbt_caseeq(p, "b") || sbt_caseeq(p, "ib"))) {
            return "unknown unit (k, m and g stand alone: 64k, not 64kb or "
                   "64KiB)";
        }
        return "unknown unit (use k, m or g; no unit means bytes)";
    }
    /* v is at most SBT_SIZE_MAX + 1 and unit at most 2^30: no overflow. */
    if (v * unit > SBT_SIZE_MAX) {
        return "too large (at most 1g)";
    }
    if (v * unit < SBT_SIZE_MIN) {
        return "too small (at least 4k)";
    }
    *bytes = (int)(v * unit);
    return NULL;
}

const char *sbt_parse_rate(const char *arg, uint64_t *bytes_per_s)
{
    static const char *const units[] = {"bit", "kbit", "mbit", "gbit", NULL};
    const char *p = arg, *frac = "", *why;
    size_t i;
    uint64_t whole, bits, unit = 1, scale;
    int rest = 0;

    if ((why = sbt_check_start(arg, *arg == '.' ? r_rate_point
                                                : r_rate_not)) != NULL) {
        return why;
    }
    sbt_digits(&p, SBT_RATE_MAX_BITS, &whole);
    if (*p == '.') {
        for (frac = ++p; sbt_isdigit((unsigned char)*p); p++)
            ;
        if (p == frac) {
            return r_rate_point;
        }
    }
    if ((why = sbt_check_foreign(arg, p)) != NULL) {
        return why;
    }
    if (*p == '.') {
        return "more than one decimal point";
    }
    if (*p == ',') {
        return "use a decimal point, not a comma";
    }
    if (!*p) {
        return "missing unit (bit, kbit, mbit or gbit)";
    }
    for (i = 0; units[i] && !sbt_caseeq(p, units[i]); i++) {
        unit *= 1000;           /* each unit 1000 times the one before */
    }
    if (!units[i]) {
        return "unknown unit (use bit, kbit, mbit or gbit)";
    }
    /* Exact, no floating point: fraction digits add whole bits until scale
     * reaches 0; the rest, below one bit, matters only at the top bound.
     * whole is at most SBT_RATE_MAX_BITS + 1: this also catches saturation. */
    if (whole > SBT_RATE_MAX_BITS / unit) {
        return r_rate_large;
    }
    bits = whole * unit;
    for (scale = unit; sbt_isdigit((unsigned char)*frac); frac++) {
        scale /= 10;
        if (scale) {
            bits += (uint64_t)(*frac - '0') * scale;
        }
        else {
            rest |= *frac != '0';
        }
    }
    if (bits < SBT_RATE_MIN_BITS) {
        return "too small (at least 1kbit)";
    }
    if (bits > SBT_RATE_MAX_BITS || (bits == SBT_RATE_MAX_BITS && rest)) {
        return r_rate_large;
    }
    /* floor((bits + fraction) / 8) == bits / 8 for a fraction below one. */
    *bytes_per_s = bits / 8;
    return NULL;
}

/** inet_pton of the first @a len characters of @a arg; TRUE on success. */
static int sbt_pton(int af, const char *arg, size_t len, unsigned char *addr)
{
    char ip[SBT_CIDR_STRLEN];

    if (len >= sizeof(ip)) {
        return 0;
    }
    memcpy(ip, arg, len);
    ip[len] = '\0';
    return inet_pton(af, ip, addr) == 1;
}

/** The address in the first @a len characters of @a arg.  IPv4 only as a
 *  full dotted quad: apr_ipsubnet_create reads "10", "10.1" and "10.1.2"
 *  as /8, /16 and /24, which readers easily take for something else. */
static const char *sbt_parse_address(const char *arg, size_t len,
                                     sbt_cidr_t *c)
{
    size_t i, parts = 1;
    int empty_part = 0;

    memset(c, 0, sizeof(*c));
    if (len == 0) {
        return "missing address before '/'";
    }
    /* Clients are matched without a zone, so one would silently not apply. */
    if (memchr(arg, '%', len)) {
        return "IPv6 zone ids (%eth0) are not allowed: a rule matches the "
               "address on any interface";
    }
    if (arg[0] == '[') {
        return "write an IPv6 network without brackets, e.g. 2001:db8::/32";
    }
    if (memchr(arg, ':', len)) {
        if (!sbt_pton(AF_INET6, arg, len, c->addr)) {
            return "not an IPv6 address";
        }
        c->family = 6;
        return NULL;
    }
    for (i = 0; i < len; i++) {
        if (arg[i] == '.') {
            empty_part |= i == 0 || arg[i - 1] == '.';
            parts++;
        }
        else if (!sbt_isdigit((unsigned char)arg[i])) {
            return "not an IPv4 or IPv6 address";
        }
    }
    empty_part |= arg[len - 1] == '.';
    if (parts < 4 && !empty_part) {
        return sbt_parse_cidr_partial;
    }
    /* glibc's inet_pton takes exactly four decimal parts of 0..255 and
     * refuses leading zeros, which inet_aton would read as octal. */
    if (!sbt_pton(AF_INET, arg, len, c->addr)) {
        return "not an IPv4 address (four numbers from 0 to 255, without "
               "leading zeros)";
    }
    c->family = 4;
    return NULL;
}

/** A plain decimal from 0 to @a max: no sign, no leading zero. */
static const char *sbt_parse_prefix(const char *s, int max, int *prefix)
{
    const char *p = s;
    const char *range = max == 32
        ? "prefix length must be a whole number from 0 to 32"
        : "prefix length must be a whole number from 0 to 128";
    uint64_t v;

    if (!*s) {
        return "missing prefix length after '/'";
    }
    sbt_digits(&p, (uint64_t)max, &v);
    if (p == s || *p) {
        return range;
    }
    /* "/08" reads as 8 here but as octal in some tools, and is most
     * likely a typo; one spelling per prefix keeps the rule names in
     * logs and on the status page unambiguous. */
    if (s[0] == '0' && s[1]) {
        return "leading zero in the prefix length";
    }
    if (v > (uint64_t)max) {
        return range;
    }
    *prefix = (int)v;
    return NULL;
}

int sbt_mask_prefix(const unsigned char *in, unsigned char *out, int bytes,
                    int prefix)
{
    int i, keep, set = 0;
    unsigned char mask;

    for (i = 0; i < bytes; i++) {
        keep = prefix - 8 * i;
        mask = keep >= 8 ? 0xff : keep <= 0 ? 0
             : (unsigned char)(0xff << (8 - keep));
        set |= (in[i] & ~mask) != 0;
        out[i] = in[i] & mask;
    }
    return set;
}

uint64_t sbt_hash(const void *data, size_t len)
{
    const unsigned char *b = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325);      /* FNV-1a, 64 bits */
    size_t i;

    for (i = 0; i < len; i++) {
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    }
    return h;
}

const char *sbt_parse_cidr(const char *arg, sbt_cidr_t *out)
{
    static const unsigned char v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };
    const char *slash, *why;
    sbt_cidr_t c;

    if ((why = sbt_check_blank(arg)) != NULL) {
        return why;
    }
    slash = strchr(arg, '/');
    why = sbt_parse_address(arg, slash ? (size_t)(slash - arg)
                                       : strlen(arg), &c);
    if (why) {
        return why;
    }
    c.prefix = c.family == 4 ? 32 : 128;
    if (slash && (why = sbt_parse_prefix(slash + 1, c.prefix,
                                         &c.prefix)) != NULL) {
        return why;
    }
    /* ::ffff:a.b.c.d/96+ becomes IPv4: such clients are matched as IPv4,
     * and one form per network keeps "longest prefix wins" comparing like
     * with like.  A shorter prefix would cut into the ffff. */
    if (c.family == 6 && !memcmp(c.addr, v4mapped, sizeof(v4mapped))) {
        if (c.prefix < 96) {
            return "an IPv4-mapped network needs a prefix length of 96 or "
                   "more (96 + the IPv4 prefix)";
        }
        memmove(c.addr, c.addr + 12, 4);
        memset(c.addr + 4, 0, 12);
        c.family = 4;
        c.prefix -= 96;
    }
    /* Host bits are refused, not masked: "10.1.2.3/8" is more likely a
     * mistyped /32 or /24, and a rule much wider than meant goes unnoticed.
     * The masked network still goes back, for "did you mean". */
    why = sbt_mask_prefix(c.addr, c.addr, sizeof(c.addr), c.prefix)
          ? sbt_parse_cidr_host_bits : NULL;
    *out = c;
    return why;
}

char *sbt_format_cidr(const sbt_cidr_t *c, char *buf, size_t len)
{
    char ip[SBT_CIDR_STRLEN];
    int n;

    if ((c->family != 4 && c->family != 6) || c->prefix < 0
        || c->prefix > (c->family == 4 ? 32 : 128)
        || !inet_ntop(c->family == 4 ? AF_INET : AF_INET6, c->addr, ip,
                      sizeof(ip))) {
        return NULL;
    }
    n = snprintf(buf, len, "%s/%d", ip, c->prefix);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

const char *sbt_parse_limits(const char *min, const char *max,
                             int *lo, int *hi, const char **bad)
{
    const char *why;
    int a, b;

    *bad = min;
    if ((why = sbt_parse_size(min, &a)) != NULL) {
        return why;
    }
    if ((why = sbt_parse_size(max, &b)) != NULL) {
        *bad = max;
        return why;
    }
    if (a > b) {
        return "minimum is larger than maximum";
    }
    *lo = a;
    *hi = b;
    *bad = NULL;
    return NULL;
}

const char *sbt_parse_policy(const char *arg, int *policy, int *size)
{
    const char *why;
    int n = 0;

    if (sbt_caseeq(arg, "none")) {
        /* What a scope with no SndbufTune gets, said explicitly: a
         * nearer scope can go back to leaving the socket alone. */
        *policy = SBT_POLICY_NONE;
    }
    else if (sbt_caseeq(arg, "unset")) {
        *policy = SBT_POLICY_UNSET;
    }
    else if (sbt_caseeq(arg, "auto")) {
        *policy = SBT_POLICY_AUTO;
    }
    else if ((why = sbt_parse_size(arg, &n)) != NULL) {
        return why;
    }
    else {
        *policy = SBT_POLICY_FIXED;
    }
    *size = n;
    return NULL;
}
