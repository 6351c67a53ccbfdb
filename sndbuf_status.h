/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_status.h
 * @brief The status counters' shared-memory layout, for the two files
 *        that use it: sndbuf_status.c (counting, the segment, the slot
 *        map) and sndbuf_status_page.c (the page in its formats).
 */

#ifndef SNDBUF_STATUS_H
#define SNDBUF_STATUS_H

#include "apr.h"
#include "apr_atomic.h"

#include "sndbuf_tune.h"

#define SBT_STATUS_HANDLER      "sndbuf-tune-status"
#define SBT_METRICS_HANDLER     "sndbuf-tune-metrics"

/* Named slots per table; slot SBT_STATUS_OTHER counts the rest. */
#define SBT_STATUS_SLOTS        256
#define SBT_STATUS_OTHER        SBT_STATUS_SLOTS
#define SBT_STATUS_OTHER_NAME   "(other)"

/* Room for a name, NUL included.  A longer one is stored as its start,
 * "...#" and a 64-bit hash of the whole, so it stays unique. */
#define SBT_NAME_LEN            256
#define SBT_NAME_HASH_LEN       (4 + 16)

/* Histogram of the effective send buffer (getsockopt SO_SNDBUF, what
 * the kernel really holds: twice the setsockopt argument on Linux).
 * Bucket i counts sizes up to and including 2^(12+i), above the bound
 * of bucket i-1: bucket 0 from 0 to 4k, the last one above 1g, with no
 * bound.  So a bucket is Prometheus' le="2^(12+i)", and the exact
 * powers of two a fixed size gives are its bound.  One more bucket
 * counts responses whose buffer was unknown (no policy applied, or no
 * socket to ask). */
#define SBT_HIST_FIRST_SHIFT    12
#define SBT_HIST_LAST_SHIFT     30
#define SBT_HIST_SIZES          (SBT_HIST_LAST_SHIFT - SBT_HIST_FIRST_SHIFT + 2)
#define SBT_HIST_UNKNOWN        SBT_HIST_SIZES
#define SBT_HIST_BUCKETS        (SBT_HIST_SIZES + 1)

#define SBT_SHM_MAGIC           0x53425453u     /* "SBTS" */
#define SBT_SHM_VERSION         2u

/* ap_retained_data key: the segment outlives the module, which every
 * restart unloads. */
#define SBT_RETAINED_KEY        "mod_sndbuf_tune/status"

/* The counters of a slot.  The first four are indexed by sbt_policy_e. */
enum {
    SBT_F_NONE, SBT_F_UNSET, SBT_F_FIXED, SBT_F_AUTO,
    SBT_F_BYTES, SBT_F_LIMITED, SBT_F_CLAMPED, SBT_F_FAILURES,
    SBT_F_COUNT
};

/* Children add to the counters from several processes at once, so only
 * the CPU's atomic instructions will do.  APR's 64-bit atomics (APR 1.7)
 * are those where APR was built with the compiler's 64-bit atomic
 * builtins, as on every 64-bit target (Debian's amd64 libapr1:
 * apr_atomic_add64 is one "lock xadd").  Without them APR uses mutexes
 * private to each process, and children adding at the same moment may
 * lose a count. */
typedef struct {
    apr_uint64_t v[SBT_F_COUNT];
    apr_uint64_t hist[SBT_HIST_BUCKETS];
    /** The sizes the histogram counts, added up (Prometheus' _sum). */
    apr_uint64_t hist_sum;
} sbt_counters_t;

typedef struct {
    /** NUL-terminated; written by the parent only. */
    char name[SBT_NAME_LEN];
    /** Last generation whose configuration names this slot; 0: free. */
    apr_uint32_t seen_gen;
    sbt_counters_t c;
} sbt_slot_t;

typedef struct {
    /** What made the segment: a graceful restart into a build with
     *  another layout must not use it. */
    apr_uint32_t magic;
    apr_uint32_t version;
    apr_size_t size;
    /** Configurations loaded since the segment was created. */
    apr_uint32_t generation;
    /** When the counters were last zeroed (start, full restart). */
    apr_time_t since;
    sbt_slot_t vhost[SBT_STATUS_SLOTS + 1];
    sbt_slot_t rule[SBT_STATUS_SLOTS + 1];
} sbt_shm_t;

/* Set in post_config, inherited by the children.  NULL: no segment, so
 * nothing is counted and the page answers 503. */
extern sbt_shm_t *sbt_shm;
/** The generation this process was configured in. */
extern apr_uint32_t sbt_my_gen;

#endif /* SNDBUF_STATUS_H */
