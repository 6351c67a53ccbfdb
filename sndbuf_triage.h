/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_triage.h
 * @brief mod_sndbuf_tune: what limited a response: the send buffer, the
 *        client's window, the network or the server itself.
 *
 * Pure (no httpd, APR or system call), so that t/unit/triage_cases.c can
 * check every verdict exactly.  mod_sndbuf_tune.c gives it the kernel's
 * figures over a response (TCP_INFO at its start and end), the status
 * page sums its verdicts; docs/status.md explains the rule.
 */

#ifndef SNDBUF_TRIAGE_H
#define SNDBUF_TRIAGE_H

#include <stddef.h>
#include <stdint.h>

/** The four limits, in this order everywhere (notes, counters, page). */
typedef enum {
    SBT_LIMIT_SNDBUF,           /**< the send buffer in force */
    SBT_LIMIT_RWND,             /**< the client's receive window */
    SBT_LIMIT_NETWORK,          /**< congestion window, pacing, the path */
    SBT_LIMIT_APP,              /**< the server had nothing to send */
    SBT_LIMITS,
    /** No verdict: the kernel lacks the chronographs (< 4.10, or a short
     *  TCP_INFO). */
    SBT_VERDICT_UNKNOWN = SBT_LIMITS,
    /** No verdict: too short to tell (below the chronographs' grain). */
    SBT_VERDICT_SHORT
} sbt_limit_e;

/** "sndbuf", "rwnd", "network", "app", then "unknown" and "-". */
extern const char *const sbt_limit_names[SBT_VERDICT_SHORT + 1];

/** What the kernel counted over one response, and its socket at the end. */
typedef struct {
    int64_t elapsed_us;         /**< from its start to its end */
    int chrono;                 /**< the three times below are known */
    uint64_t busy_us;           /**< tcpi_busy_time: data to send */
    uint64_t sndbuf_us;         /**< tcpi_sndbuf_limited, part of busy */
    uint64_t rwnd_us;           /**< tcpi_rwnd_limited, part of busy */
    uint64_t acked;             /**< bytes the client acknowledged */
    uint32_t srtt_us;           /**< at the end; 0 unknown */
    uint32_t mss;
    uint32_t cwnd;              /**< segments */
    uint32_t snd_wnd;           /**< the client's window, bytes; 0 unknown */
    /** The send buffer in force (SO_SNDBUF as the kernel reports it,
     *  twice what was set); where autotuning governs, its ceiling
     *  (tcp_wmem[2]); 0 unknown. */
    uint64_t buffer;
} sbt_triage_in_t;

/** One response's triage. */
typedef struct {
    /** The response's time by limit: the kernel's sndbuf- and
     *  rwnd-limited time, the rest of its busy time (network), and the
     *  time it was not busy (app). */
    uint64_t us[SBT_LIMITS];
    uint64_t goodput;           /**< bit/s: acknowledged bytes / time */
    /** The rate (bit/s) the buffer, the client's window and the
     *  congestion window allow at the RTT of the end; 0 unknown. */
    uint64_t allows[SBT_LIMIT_NETWORK + 1];
    sbt_limit_e verdict;
    const char *why;            /**< for the debug log; never NULL */
} sbt_triage_t;

/** The verdict on the figures @a in. */
void sbt_triage(const sbt_triage_in_t *in, sbt_triage_t *out);

/** Where the send buffer of the responses the buffer limited came from. */
typedef enum {
    SBT_BUF_LISTENER,           /**< core's SendBufferSize */
    SBT_BUF_SNDBUFTUNE,         /**< a SndbufTune size */
    SBT_BUF_AUTO,               /**< auto's size */
    SBT_BUF_AUTOTUNING,         /**< autotuning, up to tcp_wmem[2] */
    SBT_BUF_SOURCES
} sbt_buf_source_e;

/** A vhost's or a rule's verdicts added up, for its words. */
typedef struct {
    uint64_t large;                     /**< responses measured */
    uint64_t by[SBT_LIMITS];            /**< of them, by verdict */
    uint64_t us[SBT_LIMITS];            /**< their time by limit */
    /** Of the responses the buffer limited: where their buffer came
     *  from, and their buffers (bytes, as the kernel reports them) and
     *  RTTs (us) added up. */
    uint64_t buf_from[SBT_BUF_SOURCES];
    uint64_t buf_sum;
    uint64_t rtt_sum;
} sbt_triage_sum_t;

/** The most frequent verdict of @a sum (the first of equals), or -1
 *  before any response was judged. */
int sbt_triage_top(const sbt_triage_sum_t *sum);

/** What @a sum says in plain words, with what to change, into @a buf
 *  (@a len bytes, NUL-terminated, cut if need be); @a chrono: the kernel
 *  reports the chronographs; @a sendbuffersize_at: where core's
 *  SendBufferSize stands ("file:line"), or NULL; @a rule: the
 *  SndbufTuneNetwork line these responses came under, or NULL. */
void sbt_triage_words(char *buf, size_t len, const sbt_triage_sum_t *sum,
                      int chrono, const char *sendbuffersize_at,
                      const char *rule);

#endif /* SNDBUF_TRIAGE_H */
