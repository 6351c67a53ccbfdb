/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_law.h
 * @brief mod_sndbuf_tune: the control law of "SndbufTune auto".
 *
 * Pure (no httpd, APR or system call), so that t/unit/law_cases.c can
 * replay any sequence of looks exactly.  sndbuf_auto.c reads the samples
 * and applies the result; docs/auto.md explains the law, and
 * docs/design/auto-law.md the reasons for its constants.
 */

#ifndef SNDBUF_LAW_H
#define SNDBUF_LAW_H

#include <stdint.h>

/** What bounds auto's sizes: the request's decision and the kernel. */
typedef struct {
    int limit_min;              /**< SndbufTuneLimits, as SO_SNDBUF args */
    int limit_max;
    uint64_t conf_rate;         /**< SndbufTuneBandwidth, B/s; 0: measure */
    int shared;                 /**< HTTP/2's, for all streams: grows only */
    uint32_t wmem_max;          /**< net.core.wmem_max: SO_SNDBUF's max */
    uint32_t tcp_wmem_initial;  /**< tcp_wmem[1]: autotuning's start */
    uint32_t tcp_wmem_max;      /**< tcp_wmem[2]: its ceiling; 0 unknown */
    int no_release;             /**< no SO_BUF_LOCK: a lock stays */
} sbt_law_limits_t;

/** One look at a connection: TCP_INFO's fields (0 where the kernel did
 *  not fill one in), the time, and the socket's buffer. */
typedef struct {
    int64_t now_us;
    uint32_t srtt_us;
    uint32_t rttvar_us;
    uint32_t mss;
    /** Windowed minimum RTT; the handshake's RTT is srtt_us until the
     *  peer has acknowledged data (bytes_acked > 1). */
    uint32_t min_rtt_us;
    uint64_t bytes_acked;
    uint64_t delivery_rate;     /**< bytes/s; 0: no sample yet */
    int app_limited;            /**< that sample was app-limited */
    uint32_t cwnd;              /**< congestion window, segments */
    uint32_t total_retrans;     /**< segments retransmitted so far */
    uint64_t sndbuf_limited_us; /**< tcpi_sndbuf_limited */
    int has_chrono;             /**< sndbuf_limited_us is present */
    /** Bytes delivered so far (tcpi_delivered, each look's new segments
     *  at that look's MSS), if the kernel counts them (@a has_delivered):
     *  a flow's own delivery, by which the law checks that steering costs
     *  it nothing. */
    uint64_t delivered;
    int has_delivered;
    /** From sndbuf_path.c (read once a second): this server's other flows
     *  at this flow's RTT (0: none), what they deliver now and did when
     *  this flow delivered most lately, what it did then (bytes/s), and
     *  the lowest minimum RTT of those to its client's address (0: none). */
    int crowd_members;
    uint64_t crowd_rate;
    uint64_t crowd_rate_then;
    uint64_t crowd_own_then;
    uint32_t path_min_rtt_us;
    int loss_based;             /**< cubic, reno (not bbr): fill the queue */
    int locked_at;              /**< SO_SNDBUF a lock holds; 0: autotuned */
    int effective;              /**< SO_SNDBUF read (ss's tb); -1: locked */
} sbt_law_sample_t;

/** The law's memory of one response. */
typedef struct {
    int64_t began_us;
    int64_t last_us;
    uint64_t limited_us;
    uint64_t measured;          /**< delivery rate, peak-held, bytes/s */
    uint64_t rate;              /**< sized for: configured or measured */
    uint64_t ramp_rate;         /**< the rate when it last grew by 1/4 */
    int ramp_flat;              /**< looks since */
    int ramping;
    int lifted;
    uint32_t min_rtt_us;        /**< sized for: the path's or the flow's */
    uint32_t own_min_rtt_us;    /**< the flow's own */
    int from_handshake;         /**< which is still the handshake's */
    uint32_t retrans;           /**< at the last look */
    int recovering;             /**< looks left sized for recovery */
    /** Its delivery: per block of about 1 s (the last whole one's rate),
     *  and the most per block over the last 12-16 s. */
    int64_t block_us;
    uint64_t block_delivered;
    uint64_t rate_now;
    uint64_t peak[4];
    int64_t peak_epoch;
    int64_t grew_us;            /**< a block last passed the peak by 1/16 */
    int64_t drained_us;         /**< its queue last too short to steer by */
    int64_t short_since_us;     /**< delivers short of its peak since; 0 */
    int64_t contested_until_us; /**< left to autotuning until */
    uint64_t floor;             /**< steering's floor in this rate block */
    int64_t floor_us;           /**< the block's (block_us) */
    uint64_t block_limited_us;  /**< sndbuf_limited_us at its start */
    int bound;                  /**< its buffer held it back last block */
    int proven;                 /**< a bound block cost it nothing */
    int contests;               /**< so far: each holds twice as long */
} sbt_law_t;

typedef enum {
    SBT_LAW_KEEP,               /**< leave the socket as it is */
    SBT_LAW_SET,                /**< lock the buffer at .size */
    SBT_LAW_RELEASE             /**< give the buffer back to autotuning */
} sbt_law_act_e;

/** What one look decided. */
typedef struct {
    sbt_law_act_e act;
    int size;
    const char *why;            /**< for the debug log; never NULL */
    int clamped;                /**< limits, wmem_max or 2 x MSS shaped it */
    uint32_t queue_us;          /**< the queue the flow saw */
    int queued;                 /**< and it steered */
    int limited;                /**< send-buffer-limited since last look */
    int rate_switched;          /**< between configured and measured */
    int pace;                   /**< have the kernel pace it (with SET) */
    int crowd;                  /**< the crowd's other members */
    int excused;                /**< short of its peak, but its crowd
                                 *   took the share: not short */
    int contested;              /**< steering cost delivery: autotuning */
} sbt_law_out_t;

/** Start following a response; @a estimate: the rate an earlier response
 *  on the connection measured (0: none); @a s: the socket as found. */
void sbt_law_begin(sbt_law_t *l, const sbt_law_limits_t *lim,
                   const sbt_law_sample_t *s, uint64_t estimate);

/** The flow's own minimum RTT in @a s, and whether it is only the
 *  handshake's (no queue to tell yet). */
uint32_t sbt_law_own_min_rtt(const sbt_law_sample_t *s, int *handshake);

void sbt_law_look(sbt_law_t *l, const sbt_law_limits_t *lim,
                  const sbt_law_sample_t *s, sbt_law_out_t *out);

#endif /* SNDBUF_LAW_H */
