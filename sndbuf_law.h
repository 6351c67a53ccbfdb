/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_law.h
 * @brief mod_sndbuf_tune: the control law of "SndbufTune auto".
 *
 * Pure: a look's sample and the law's state in, the next send buffer
 * and the reason out.  No httpd, no APR, no system call, so that
 * t/unit/law_cases.c can replay any sequence of looks exactly
 * (make unit).  sndbuf_auto.c reads the samples and applies the result;
 * docs/auto.md explains the law and its constants.
 */

#ifndef SNDBUF_LAW_H
#define SNDBUF_LAW_H

#include <stdint.h>

/** What bounds auto's sizes: the request's decision and the kernel. */
typedef struct {
    /** SndbufTuneLimits, as SO_SNDBUF arguments. */
    int limit_min;
    int limit_max;
    /** SndbufTuneBandwidth in bytes/s; 0: measure. */
    uint64_t conf_rate;
    /** HTTP/2: one socket for every stream; its buffer only grows. */
    int shared;
    /** net.core.wmem_max: the largest SO_SNDBUF argument granted. */
    uint32_t wmem_max;
    /** tcp_wmem[1] and [2]: where autotuning starts, and the largest
     *  buffer (tb) it grows to; 0 unknown. */
    uint32_t tcp_wmem_initial;
    uint32_t tcp_wmem_max;
} sbt_law_limits_t;

/** One look at a connection: what TCP_INFO said (0 where the kernel
 *  did not fill a field in), the time, and the socket's buffer. */
typedef struct {
    int64_t now_us;
    uint32_t srtt_us;
    uint32_t rttvar_us;
    uint32_t mss;
    /** Windowed minimum RTT; the handshake's RTT is srtt_us until the
     *  peer has acknowledged data (bytes_acked > 1). */
    uint32_t min_rtt_us;
    uint64_t bytes_acked;
    /** tcpi_delivery_rate, bytes/s (0: no sample yet), and whether that
     *  sample was app-limited. */
    uint64_t delivery_rate;
    int app_limited;
    /** tcpi_snd_cwnd: the congestion window, segments. */
    uint32_t cwnd;
    /** tcpi_total_retrans: segments retransmitted so far. */
    uint32_t total_retrans;
    /** tcpi_sndbuf_limited, microseconds; has_chrono: present. */
    uint64_t sndbuf_limited_us;
    int has_chrono;
    /** The lowest minimum RTT other connections to this client measured
     *  lately (sndbuf_path.c); 0: none. */
    uint32_t path_min_rtt_us;
    /** Other connections of this server look at the same client address
     *  now (sndbuf_path.c): a queue may be theirs and this flow's. */
    int path_shared;
    /** The congestion control fills the bottleneck queue by design
     *  (cubic, reno: not bbr). */
    int loss_based;
    /** The SO_SNDBUF argument a lock holds the buffer at; 0: the
     *  kernel autotunes it. */
    int locked_at;
    /** getsockopt(SO_SNDBUF) (ss's tb); read when not locked, else -1. */
    int effective;
} sbt_law_sample_t;

/** The law's memory of one response. */
typedef struct {
    int64_t began_us;
    int64_t last_us;
    uint64_t limited_us;
    /** Delivery rate, peak-held (bytes/s), and the rate sized for:
     *  configured or measured. */
    uint64_t measured;
    uint64_t rate;
    /** While ramping: the rate when it last grew by a quarter, and the
     *  looks since. */
    uint64_t ramp_rate;
    int ramp_flat;
    int ramping;
    int lifted;
    /** Looks left after the ramp that a queue never takes below the
     *  target. */
    int settling;
    /** The minimum RTT sized for (the path's or the flow's own), the
     *  flow's own, and whether that is still the handshake's. */
    uint32_t min_rtt_us;
    uint32_t own_min_rtt_us;
    int from_handshake;
    /** Retransmissions at the last look, and the looks left that size
     *  for recovery (SBT_LAW_LOSS_LOOKS). */
    uint32_t retrans;
    int recovering;
    /** The largest CWND_FLOOR x cwnd x MSS of the looks since window_us
     *  (the floor of a flow alone, held through BBR's PROBE_RTT). */
    uint64_t window;
    int64_t window_us;
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
    /** Why, for the debug log (never NULL). */
    const char *why;
    /** A clamp (limits, wmem_max, 2 x MSS) shaped the size. */
    int clamped;
    /** The queue the flow saw, microseconds, and whether it steered. */
    uint32_t queue_us;
    int queued;
    /** A flow alone, sized by its congestion window, not rate x RTT. */
    int windowed;
    int limited;
    /** The rate sized for switched between configured and measured. */
    int rate_switched;
    /** Have the kernel pace the flow (with SBT_LAW_SET): a loss-based
     *  flow of a crowd, which its buffer holds below its window. */
    int pace;
} sbt_law_out_t;

/** Start following a response; @a estimate: the rate an earlier
 *  response on the connection measured (0: none); @a s: the socket as
 *  auto found it. */
void sbt_law_begin(sbt_law_t *l, const sbt_law_limits_t *lim,
                   const sbt_law_sample_t *s, uint64_t estimate);

/** The flow's own minimum RTT in @a s, and whether it is only the
 *  handshake's (the caller asks sndbuf_path.c with it). */
uint32_t sbt_law_own_min_rtt(const sbt_law_sample_t *s, int *handshake);

/** One look. */
void sbt_law_look(sbt_law_t *l, const sbt_law_limits_t *lim,
                  const sbt_law_sample_t *s, sbt_law_out_t *out);

#endif /* SNDBUF_LAW_H */
