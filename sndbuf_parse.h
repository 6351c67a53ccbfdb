/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_parse.h
 * @brief mod_sndbuf_tune: the parsers of the directives' values.
 *
 * Plain C99 and libc (plus POSIX inet_pton), no httpd or APR headers, so
 * that the fuzzer and the unit check (fuzz/) link this one file alone.
 *
 * Every parser returns NULL on success or a short static reason, which
 * the directive handler prefixes as "<Directive>: '<value>': <reason>";
 * nothing is allocated.  On failure the parsed values are left as they
 * were (one exception: sbt_parse_cidr's host-bits reason, see there), so
 * a handler never keeps half a value.
 *
 * Numbers are read digit by digit with overflow checks, never with
 * strtol/strtod/atoi: those accept signs, white space, hexadecimal,
 * exponents, "inf" and locale decimal commas, and atoi overflows.
 */

#ifndef SNDBUF_PARSE_H
#define SNDBUF_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Accepted sizes (SO_SNDBUF arguments; Linux stores twice as much). */
#define SBT_SIZE_MIN        (4 * 1024)
#define SBT_SIZE_MAX        (1024 * 1024 * 1024)

/* Accepted rates in bits/s: 1kbit to 1000gbit. */
#define SBT_RATE_MIN_BITS   UINT64_C(1000)
#define SBT_RATE_MAX_BITS   UINT64_C(1000000000000)

/* Room for sbt_format_cidr's output: the longest IPv6 text form (45
 * characters, INET6_ADDRSTRLEN - 1), "/128" and the NUL. */
#define SBT_CIDR_STRLEN     50

typedef enum {
    SBT_POLICY_NONE = 0,        /**< nothing configured: leave the socket */
    SBT_POLICY_UNSET,           /**< "unset": kernel autotuning */
    SBT_POLICY_FIXED,           /**< a size */
    SBT_POLICY_AUTO             /**< factor x RTT x bandwidth */
} sbt_policy_e;

/** A client network, as SndbufTuneNetwork names it. */
typedef struct {
    int family;                 /**< 4 or 6 */
    /** Network order; IPv4 in addr[0..3], the rest zero.  Bits beyond
     *  the prefix are always zero. */
    unsigned char addr[16];
    int prefix;                 /**< 0..32 or 0..128 */
} sbt_cidr_t;

/**
 * "<digits>[kKmMgG]" (x1024), a whole number of bytes from SBT_SIZE_MIN
 * to SBT_SIZE_MAX inclusive.  Any number of digits, leading zeros
 * allowed; no sign, white space, fraction or other unit.
 */
const char *sbt_parse_size(const char *arg, int *bytes);

/**
 * "<digits>[.<digits>](bit|kbit|mbit|gbit)", unit case-insensitive and
 * decimal (x1000), from 1kbit to 1000gbit inclusive, into bytes/s.
 * The rate is checked exactly, then divided by 8 rounding down (at
 * least 125 bytes/s, so never 0, which means "measure").
 */
const char *sbt_parse_rate(const char *arg, uint64_t *bytes_per_s);

/**
 * "<address>[/<prefix>]": a full dotted-quad IPv4 address or an IPv6
 * address (inet_pton), and a decimal prefix length without sign or
 * leading zeros; no prefix means /32 or /128.
 *
 * Host bits beyond the prefix are an error (sbt_parse_cidr_host_bits):
 * "10.1.2.3/8" is rejected, not read as 10.0.0.0/8.  Only for that
 * reason *out is written, with the network the value probably meant,
 * so the caller can suggest it (sbt_format_cidr).
 *
 * An IPv4-mapped IPv6 network with a prefix of 96 or more
 * ("::ffff:10.0.0.0/104") becomes the IPv4 network ("10.0.0.0/8").
 */
const char *sbt_parse_cidr(const char *arg, sbt_cidr_t *out);

/** sbt_parse_cidr's reason for host bits set beyond the prefix; the
 *  caller may compare the pointer to add "did you mean <network>?". */
extern const char sbt_parse_cidr_partial[];
extern const char sbt_parse_cidr_host_bits[];

/**
 * "<address>/<prefix>" of @a c into @a buf (SBT_CIDR_STRLEN bytes are
 * always enough), in inet_ntop's form, which sbt_parse_cidr reads back
 * as the same network.  Returns @a buf, or NULL if @a len is too small
 * or @a c's family or prefix is out of range.
 */
char *sbt_format_cidr(const sbt_cidr_t *c, char *buf, size_t len);

/**
 * SndbufTuneLimits' two sizes, each as sbt_parse_size, and min <= max.
 * On failure *bad is the token to quote (@a min or @a max; @a min when
 * the minimum is larger than the maximum), on success NULL.
 */
const char *sbt_parse_limits(const char *min, const char *max,
                             int *lo, int *hi, const char **bad);

/**
 * "none", "unset" or "auto" (case-insensitive), or a size as
 * sbt_parse_size.  *policy becomes an sbt_policy_e ("none":
 * SBT_POLICY_NONE, leave the socket alone); *size the size for
 * SBT_POLICY_FIXED, 0 otherwise.
 */
const char *sbt_parse_policy(const char *arg, int *policy, int *size);

/** @a out = the first @a bytes of @a in (may be the same) with every
 *  bit past @a prefix cleared; were any of those bits set? */
int sbt_mask_prefix(const unsigned char *in, unsigned char *out, int bytes,
                    int prefix);

/** FNV-1a (64 bits) of @a len bytes: the module's one hash. */
uint64_t sbt_hash(const void *data, size_t len);

#endif /* SNDBUF_PARSE_H */
