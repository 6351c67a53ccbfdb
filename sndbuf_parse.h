/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_parse.h
 * @brief mod_sndbuf_tune: the parsers of the directives' values.
 *
 * C99 and POSIX only, no httpd or APR, so that fuzz/ links this file alone.
 * A parser returns NULL or a static reason, which the handler prints as
 * "<Directive>: '<value>': <reason>".  On failure the outputs are left
 * alone (except for sbt_parse_cidr's host bits), so a handler never keeps
 * half a value.  Numbers are read by hand: strtol, strtod and atoi accept
 * signs, white space, hex, exponents, "inf" and locale commas, and atoi
 * overflows.
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

/* sbt_format_cidr's longest output: a 45-character IPv6, "/128", NUL. */
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
    /** Network order, IPv4 in addr[0..3]; bits past the prefix are 0. */
    unsigned char addr[16];
    int prefix;                 /**< 0..32 or 0..128 */
} sbt_cidr_t;

/** "<digits>[kKmMgG]" (x1024): bytes, SBT_SIZE_MIN to SBT_SIZE_MAX; leading
 *  zeros allowed, no sign, white space, fraction or other unit. */
const char *sbt_parse_size(const char *arg, int *bytes);

/** "<digits>[.<digits>](bit|kbit|mbit|gbit)", unit case-insensitive and
 *  x1000, 1kbit to 1000gbit, checked exactly, then divided by 8 rounding
 *  down into bytes/s (at least 125, never 0, which means "measure"). */
const char *sbt_parse_rate(const char *arg, uint64_t *bytes_per_s);

/**
 * "<address>[/<prefix>]": a full dotted-quad IPv4 or an IPv6 address, and a
 * decimal prefix without sign or leading zero (default /32 or /128).  Host
 * bits ("10.1.2.3/8") are an error that still writes *out, with the network
 * probably meant.  "::ffff:10.0.0.0/104" (IPv4-mapped) becomes 10.0.0.0/8.
 */
const char *sbt_parse_cidr(const char *arg, sbt_cidr_t *out);

/** Reasons the caller compares by pointer, to add advice. */
extern const char sbt_parse_cidr_partial[];
extern const char sbt_parse_cidr_host_bits[];

/** @a c as "<address>/<prefix>" (inet_ntop's form, which sbt_parse_cidr
 *  reads back) into @a buf; NULL if @a len is short or @a c invalid. */
char *sbt_format_cidr(const sbt_cidr_t *c, char *buf, size_t len);

/** SndbufTuneLimits' two sizes, as sbt_parse_size, min <= max; *bad is the
 *  token to quote (@a min if larger than @a max), NULL on success. */
const char *sbt_parse_limits(const char *min, const char *max,
                             int *lo, int *hi, const char **bad);

/** "none", "unset", "auto" (any case) or a size: *policy an sbt_policy_e,
 *  *size the size for SBT_POLICY_FIXED, 0 otherwise. */
const char *sbt_parse_policy(const char *arg, int *policy, int *size);

/** @a out = the first @a bytes of @a in (may be the same) with every
 *  bit past @a prefix cleared; were any of those bits set? */
int sbt_mask_prefix(const unsigned char *in, unsigned char *out, int bytes,
                    int prefix);

/** FNV-1a (64 bits) of @a len bytes: the module's one hash. */
uint64_t sbt_hash(const void *data, size_t len);

#endif /* SNDBUF_PARSE_H */
