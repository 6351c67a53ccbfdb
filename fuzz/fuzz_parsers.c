/* SPDX-License-Identifier: Apache-2.0 */

/*
 * fuzz_parsers.c: one libFuzzer target for every parser in
 * sndbuf_parse.c (make fuzz; fuzz/README.md).
 *
 * The input, as a NUL-terminated string, goes to each parser; for
 * sbt_parse_limits it is split at its first space into min and max
 * (without a space both are the whole input).  Any broken invariant
 * abort()s, which libFuzzer reports as a crash with the input saved.
 *
 * Beyond "no memory error, no undefined behaviour" (ASan, UBSan), each
 * result is checked against a property that does not trust the parser:
 * ranges, an independent reference reading of the same syntax,
 * round trips through a printed form, ASCII case not mattering, and
 * outputs left alone on failure.
 */

#include <arpa/inet.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sndbuf_parse.h"

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "invariant broken: %s (%s:%d)\n", #cond,      \
                    __FILE__, __LINE__);                                  \
            abort();                                                      \
        }                                                                 \
    } while (0)

/* The input and its case variants, for the reason check. */
static const char *in_bufs[4];
static size_t in_len;

static int isdig(int c)
{
    return c >= '0' && c <= '9';
}

/** A reason is a short static string, never a pointer into the input. */
static void check_reason(const char *why)
{
    uintptr_t w = (uintptr_t)why;
    size_t i, n;

    for (i = 0; i < 4; i++) {
        uintptr_t b = (uintptr_t)in_bufs[i];
        CHECK(!b || w < b || w > b + in_len);
    }
    n = strlen(why);
    CHECK(n >= 5 && n < 100);
}

static int has_space(const char *s)
{
    for (; *s; s++) {
        if (*s == ' ' || (*s >= '\t' && *s <= '\r')) {
            return 1;
        }
    }
    return 0;
}

/**
 * The reason names the first thing wrong, for the classes a reader
 * most needs told apart: white space anywhere, then (for numbers) a
 * sign or hexadecimal at the start.
 */
static void check_reason_class(const char *arg, const char *why, int number)
{
    if (has_space(arg)) {
        CHECK(why && strstr(why, "whitespace"));
    }
    else if (number && arg[0] == '-') {
        CHECK(why && strstr(why, "negative"));
    }
    else if (number && arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X')) {
        CHECK(why && strstr(why, "hexadecimal"));
    }
}

static char *case_copy(const char *s, size_t len, int upper)
{
    char *c = malloc(len + 1);
    size_t i;

    for (i = 0; i <= len; i++) {
        c[i] = s[i];
        if (upper && c[i] >= 'a' && c[i] <= 'z') {
            c[i] = (char)(c[i] - 'a' + 'A');
        }
        else if (!upper && c[i] >= 'A' && c[i] <= 'Z') {
            c[i] = (char)(c[i] - 'A' + 'a');
        }
    }
    return c;
}

/* ---------------------------------------------------------------- */
/* Sizes                                                            */
/* ---------------------------------------------------------------- */

/**
 * Reference reading of "<digits>[kKmMgG]" in range, written differently
 * from the parser (leading zeros stripped, digits counted): TRUE and
 * *bytes when valid.
 */
static int ref_size(const char *s, int *bytes)
{
    size_t n = strlen(s), d = 0, z = 0, i;
    uint64_t v = 0, unit = 1;

    while (d < n && isdig((unsigned char)s[d])) {
        d++;
    }
    if (d == 0) {
        return 0;
    }
    if (d + 1 == n) {
        static const char units[] = "kKmMgG";
        const char *u = strchr(units, s[d]);
        if (!u) {
            return 0;
        }
        unit = UINT64_C(1) << (10 * (1 + (u - units) / 2));
    }
    else if (d != n) {
        return 0;
    }
    while (z + 1 < d && s[z] == '0') {
        z++;
    }
    if (d - z > 10) {
        return 0;
    }
    for (i = z; i < d; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    v *= unit;
    if (v < SBT_SIZE_MIN || v > SBT_SIZE_MAX) {
        return 0;
    }
    *bytes = (int)v;
    return 1;
}

static void size_roundtrip(int bytes)
{
    static const struct { int shift; char unit; } u[] = {
        {30, 'g'}, {20, 'M'}, {10, 'k'}, {0, 0}
    };
    char buf[32];
    int i, again = -1;

    for (i = 0; u[i].shift && bytes % (1 << u[i].shift); i++)
        ;
    if (u[i].unit) {
        snprintf(buf, sizeof(buf), "%d%c", bytes >> u[i].shift, u[i].unit);
    }
    else {
        snprintf(buf, sizeof(buf), "%d", bytes);
    }
    CHECK(sbt_parse_size(buf, &again) == NULL && again == bytes);
    snprintf(buf, sizeof(buf), "%d", bytes);
    CHECK(sbt_parse_size(buf, &again) == NULL && again == bytes);
}

static void check_size(const char *arg, const char *up, const char *lo)
{
    int bytes = -7, b2 = -7, b3 = -7, ref = 0;
    const char *why = sbt_parse_size(arg, &bytes);

    if (why) {
        check_reason(why);
        CHECK(bytes == -7);
    }
    else {
        CHECK(bytes >= SBT_SIZE_MIN && bytes <= SBT_SIZE_MAX);
        size_roundtrip(bytes);
    }
    check_reason_class(arg, why, 1);
    CHECK(ref_size(arg, &ref) == !why);
    CHECK(why || ref == bytes);
    CHECK(sbt_parse_size(up, &b2) == why && b2 == bytes);
    CHECK(sbt_parse_size(lo, &b3) == why && b3 == bytes);
}

/* ---------------------------------------------------------------- */
/* Rates                                                            */
/* ---------------------------------------------------------------- */

/**
 * Reference: the syntax checked by hand, the value read with strtold
 * (which the parser must not use, and which is inexact).  Returns -1
 * when the syntax is wrong, otherwise the rate in bits/s.
 */
static long double ref_rate(const char *s)
{
    static const struct { const char *name; long double scale; } u[] = {
        {"bit", 1}, {"kbit", 1e3L}, {"mbit", 1e6L}, {"gbit", 1e9L}
    };
    const char *p = s;
    char *num;
    long double v;
    size_t i, j;

    while (isdig((unsigned char)*p)) {
        p++;
    }
    if (p == s) {
        return -1;
    }
    if (*p == '.') {
        const char *f = ++p;
        while (isdig((unsigned char)*p)) {
            p++;
        }
        if (p == f) {
            return -1;
        }
    }
    for (i = 0; i < 4; i++) {
        const char *a = p, *b = u[i].name;
        for (j = 0; a[j] && b[j]; j++) {
            char c = a[j];
            if (c >= 'A' && c <= 'Z') {
                c = (char)(c - 'A' + 'a');
            }
            if (c != b[j]) {
                break;
            }
        }
        if (!a[j] && !b[j]) {
            break;
        }
    }
    if (i == 4) {
        return -1;
    }
    num = malloc((size_t)(p - s) + 1);
    memcpy(num, s, (size_t)(p - s));
    num[p - s] = '\0';
    v = strtold(num, NULL) * u[i].scale;
    free(num);
    return v;
}

static void check_rate(const char *arg, const char *up, const char *lo)
{
    uint64_t v = 7, v2 = 7, v3 = 7, again = 7;
    const char *why = sbt_parse_rate(arg, &v);
    long double ref = ref_rate(arg);
    /* strtold is correctly rounded; its error and the scale's stay far
     * below this, so only values this close to a bound go unjudged. */
    const long double eps = 1e-15L;
    char buf[64];

    if (why) {
        check_reason(why);
        CHECK(v == 7);
    }
    else {
        CHECK(v >= SBT_RATE_MIN_BITS / 8 && v <= SBT_RATE_MAX_BITS / 8);
        /* bytes/s = bits / 8 rounded down */
        CHECK(ref >= 0);
        CHECK(fabsl((long double)v - ref / 8) < 1 + ref * eps);
        CHECK((long double)v <= ref / 8 * (1 + eps));
        /* printed back exactly, in bits and in decimal kbit */
        snprintf(buf, sizeof(buf), "%llubit", (unsigned long long)v * 8);
        CHECK(sbt_parse_rate(buf, &again) == NULL && again == v);
        snprintf(buf, sizeof(buf), "%llu.%03lluKbit",
                 (unsigned long long)v * 8 / 1000,
                 (unsigned long long)v * 8 % 1000);
        CHECK(sbt_parse_rate(buf, &again) == NULL && again == v);
    }
    check_reason_class(arg, why, 1);
    if (ref < 0) {
        CHECK(why);
    }
    else if (ref < SBT_RATE_MIN_BITS * (1 - eps)
             || ref > SBT_RATE_MAX_BITS * (1 + eps)) {
        CHECK(why);
    }
    else if (ref > SBT_RATE_MIN_BITS * (1 + eps)
             && ref < SBT_RATE_MAX_BITS * (1 - eps)) {
        CHECK(!why);
    }
    CHECK(sbt_parse_rate(up, &v2) == why && v2 == v);
    CHECK(sbt_parse_rate(lo, &v3) == why && v3 == v);
}

/* ---------------------------------------------------------------- */
/* Networks                                                         */
/* ---------------------------------------------------------------- */

static int cidr_eq(const sbt_cidr_t *a, const sbt_cidr_t *b)
{
    return a->family == b->family && a->prefix == b->prefix
           && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/** A network sbt_parse_cidr may hand back: ranges, zero host bits. */
static void check_network(const sbt_cidr_t *c)
{
    int i, bits = c->family == 4 ? 32 : 128;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0xff, 0xff};

    CHECK(c->family == 4 || c->family == 6);
    CHECK(c->prefix >= 0 && c->prefix <= bits);
    for (i = c->prefix; i < 128; i++) {
        CHECK(!(c->addr[i / 8] & (0x80 >> (i % 8))));
    }
    /* IPv4-mapped networks of /96 or longer come back as IPv4 */
    CHECK(!(c->family == 6 && c->prefix >= 96
            && !memcmp(c->addr, mapped, sizeof(mapped))));
}

/** Printed with inet_ntop and read back: the same network. */
static void cidr_roundtrip(const sbt_cidr_t *c)
{
    char buf[SBT_CIDR_STRLEN], small[8];
    sbt_cidr_t again;

    CHECK(sbt_format_cidr(c, buf, sizeof(buf)) == buf);
    memset(&again, 0x55, sizeof(again));
    CHECK(sbt_parse_cidr(buf, &again) == NULL && cidr_eq(c, &again));
    /* too small a buffer is refused, not overrun (ASan watches) */
    CHECK(strlen(buf) < sizeof(small) || !sbt_format_cidr(c, small,
                                                          sizeof(small)));
}

/**
 * Reference: inet_pton on the address and a canonical decimal prefix
 * in range mean a network, or a host-bits refusal, and nothing else
 * does.  On success the parser's address is inet_pton's.
 */
static void check_cidr_ref(const char *arg, const char *why,
                           const sbt_cidr_t *c)
{
    const char *slash = strchr(arg, '/');
    size_t len = slash ? (size_t)(slash - arg) : strlen(arg);
    unsigned char a[16];
    char *ip = malloc(len + 1), canon[16];
    int v6 = memchr(arg, ':', len) != NULL, ok, prefix;

    memcpy(ip, arg, len);
    ip[len] = '\0';
    memset(a, 0, sizeof(a));
    ok = inet_pton(v6 ? AF_INET6 : AF_INET, ip, a) == 1;
    free(ip);
    prefix = v6 ? 128 : 32;
    if (ok && slash) {
        long n = 0;
        const char *p = slash + 1;

        for (; isdig((unsigned char)*p) && n <= 1000; p++) {
            n = n * 10 + (*p - '0');
        }
        snprintf(canon, sizeof(canon), "%ld", n);
        ok = !*p && p > slash + 1 && n <= prefix && !strcmp(canon, slash + 1);
        prefix = (int)n;
    }
    /* An IPv4-mapped network shorter than /96 cuts into the ffff. */
    if (ok && v6 && prefix < 96
        && !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
        CHECK(why && strstr(why, "IPv4-mapped"));
        return;
    }
    CHECK(ok == (!why || why == sbt_parse_cidr_host_bits));
    check_reason_class(arg, why, 0);
    if (!has_space(arg)) {
        /* the address classes: zone ids, then partial IPv4 ("10.1") */
        size_t i, parts = 1, digits = 0;
        int partial = len > 0;

        for (i = 0; i < len && partial; i++) {
            if (arg[i] == '.') {
                partial = digits > 0;
                parts++;
                digits = 0;
            }
            else {
                partial = isdig((unsigned char)arg[i]);
                digits++;
            }
        }
        partial = partial && digits > 0 && parts < 4;
        if (memchr(arg, '%', len)) {
            CHECK(why && strstr(why, "zone"));
        }
        else if (partial) {
            CHECK(why && strstr(why, "partial"));
        }
    }
    if (!why) {
        if (c->family == 4 && v6) {
            CHECK(prefix == c->prefix + 96 && !memcmp(a + 12, c->addr, 4));
        }
        else {
            CHECK(c->family == (v6 ? 6 : 4) && prefix == c->prefix);
            CHECK(!memcmp(a, c->addr, 16));
        }
    }
}

static void check_cidr(const char *arg, const char *up, const char *lo)
{
    sbt_cidr_t c, c2, c3, untouched;
    const char *why;

    memset(&untouched, 0xaa, sizeof(untouched));
    c = c2 = c3 = untouched;
    why = sbt_parse_cidr(arg, &c);
    if (why) {
        check_reason(why);
    }
    if (!why || why == sbt_parse_cidr_host_bits) {
        /* the host-bits refusal hands back the network meant */
        check_network(&c);
        cidr_roundtrip(&c);
    }
    else {
        CHECK(!memcmp(&c, &untouched, sizeof(c)));
    }
    check_cidr_ref(arg, why, &c);
    CHECK(sbt_parse_cidr(up, &c2) == why && !memcmp(&c2, &c, sizeof(c)));
    CHECK(sbt_parse_cidr(lo, &c3) == why && !memcmp(&c3, &c, sizeof(c)));
}

/* ---------------------------------------------------------------- */
/* Limits and policies                                              */
/* ---------------------------------------------------------------- */

static void check_limits(const char *min, const char *max)
{
    int lo = -7, hi = -7, a = -1, b = -1;
    const char *bad = "x", *why = sbt_parse_limits(min, max, &lo, &hi, &bad);
    const char *wa = sbt_parse_size(min, &a), *wb = sbt_parse_size(max, &b);

    /* min is read first */
    if (has_space(min) || (!wa && has_space(max))) {
        CHECK(why && strstr(why, "whitespace"));
    }
    if (why) {
        check_reason(why);
        CHECK(lo == -7 && hi == -7);
        CHECK(bad == min || bad == max);
        if (bad == min && why == wa) {
            /* min itself is bad */
        }
        else if (bad == max) {
            CHECK(!wa && why == wb);
        }
        else {
            /* both good, in the wrong order */
            CHECK(bad == min && !wa && !wb && a > b);
        }
    }
    else {
        CHECK(bad == NULL && !wa && !wb && lo == a && hi == b && lo <= hi);
        CHECK(lo >= SBT_SIZE_MIN && hi <= SBT_SIZE_MAX);
    }
}

static void check_policy(const char *arg)
{
    int policy = -7, size = -7, bytes = -1;
    const char *why = sbt_parse_policy(arg, &policy, &size);
    const char *wsize = sbt_parse_size(arg, &bytes);

    check_reason_class(arg, why, 1);
    if (why) {
        check_reason(why);
        CHECK(policy == -7 && size == -7 && why == wsize);
    }
    else if (policy == SBT_POLICY_FIXED) {
        CHECK(!wsize && size == bytes);
    }
    else {
        CHECK(policy == SBT_POLICY_UNSET || policy == SBT_POLICY_AUTO
              || policy == SBT_POLICY_NONE);
        CHECK(size == 0 && wsize);
        CHECK(strlen(arg) == (policy == SBT_POLICY_UNSET ? 5 : 4));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *arg = malloc(size + 1), *two = malloc(size + 1), *up, *lo, *sep;

    memcpy(arg, data, size);
    arg[size] = '\0';
    /* Parsers see a C string: it ends at the first NUL. */
    in_len = strlen(arg);
    up = case_copy(arg, in_len, 1);
    lo = case_copy(arg, in_len, 0);
    memcpy(two, arg, in_len + 1);
    in_bufs[0] = arg;
    in_bufs[1] = up;
    in_bufs[2] = lo;
    in_bufs[3] = two;

    check_size(arg, up, lo);
    check_rate(arg, up, lo);
    check_cidr(arg, up, lo);
    check_policy(arg);
    check_policy(up);
    if ((sep = strchr(two, ' ')) != NULL) {
        *sep = '\0';
        check_limits(two, sep + 1);
    }
    else {
        check_limits(arg, arg);
    }

    free(arg);
    free(two);
    free(up);
    free(lo);
    return 0;
}
