/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_status.h
 * @brief The status counters' shared-memory layout: sndbuf_status.c
 *        counts, sndbuf_status_page.c shows them.
 */

#ifndef SNDBUF_STATUS_H
#define SNDBUF_STATUS_H

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

/* Histogram of the effective send buffer (getsockopt SO_SNDBUF: on Linux
 * twice the setsockopt argument).  Bucket i counts sizes above bucket
 * i-1's bound up to 2^(12+i) (Prometheus' le), so the powers of two a
 * fixed size gives fall on a bound; the last, above 1g, has none.  One
 * more bucket counts responses whose buffer was unknown. */
#define SBT_HIST_FIRST_SHIFT    12
#define SBT_HIST_LAST_SHIFT     30
#define SBT_HIST_SIZES          (SBT_HIST_LAST_SHIFT - SBT_HIST_FIRST_SHIFT + 2)
#define SBT_HIST_UNKNOWN        SBT_HIST_SIZES
#define SBT_HIST_BUCKETS        (SBT_HIST_SIZES + 1)

#define SBT_SHM_MAGIC           0x53425453u     /* "SBTS" */
#define SBT_SHM_VERSION         3u

/* The segment outlives the module, which every restart unloads. */
#define SBT_RETAINED_KEY        "mod_sndbuf_tune/status"

/* The counters of a slot.  The first four are indexed by sbt_policy_e. */
enum {
    SBT_F_NONE, SBT_F_UNSET, SBT_F_FIXED, SBT_F_AUTO,
    SBT_F_BYTES, SBT_F_LIMITED, SBT_F_CLAMPED, SBT_F_FAILURES,
    SBT_F_COUNT
};

/* Children in several processes add at once: only the CPU's atomic
 * instructions will do.  APR 1.7's 64-bit atomics are those where APR was
 * built with the compiler's 64-bit builtins, as on every 64-bit target
 * (Debian amd64: one "lock xadd"); elsewhere they take mutexes private
 * to each process, and children adding at once may lose a count. */
typedef struct {
    apr_uint64_t v[SBT_F_COUNT];
    apr_uint64_t hist[SBT_HIST_BUCKETS];
    apr_uint64_t hist_sum;      /**< the sizes counted, added up (_sum) */
    /** What limited the large responses (64-bit words too). */
    sbt_triage_sum_t triage;
} sbt_counters_t;

typedef struct sbt_slot_t {
    char name[SBT_NAME_LEN];    /**< NUL-terminated; the parent writes it */
    apr_uint32_t seen_gen;      /**< last generation naming it; 0: free */
    sbt_counters_t c;
} sbt_slot_t;

typedef struct {
    /** The layout, checked by a graceful restart into another build. */
    apr_uint32_t magic;
    apr_uint32_t version;
    apr_size_t size;
    apr_uint32_t generation;    /**< configurations loaded since created */
    apr_time_t since;           /**< last zeroed: start or full restart */
    sbt_slot_t vhost[SBT_STATUS_SLOTS + 1];
    sbt_slot_t rule[SBT_STATUS_SLOTS + 1];
} sbt_shm_t;

/* Set in post_config, inherited by the children.  NULL: no segment, so
 * nothing is counted and the page answers 503. */
extern sbt_shm_t *sbt_shm;
/** The generation this process was configured in. */
extern apr_uint32_t sbt_my_gen;

#endif /* SNDBUF_STATUS_H */
