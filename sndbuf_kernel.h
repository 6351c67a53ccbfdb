/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_kernel.h
 * @brief mod_sndbuf_tune: the only place that talks to the kernel.
 *
 * Thin errno-returning wrappers around socket options and sysctl files,
 * so the policy code needs no #ifdef.  Without Linux's SO_BUF_LOCK or
 * TCP_INFO they answer ENOTSUP and the module keeps to fixed sizes.
 */

#ifndef SNDBUF_KERNEL_H
#define SNDBUF_KERNEL_H

#include "apr.h"
#include "apr_pools.h"

/** What the kernel will grant, read once at startup. 0 = unknown. */
typedef struct {
    apr_uint32_t wmem_max;     /**< net.core.wmem_max: SO_SNDBUF ceiling */
    apr_uint32_t tcp_wmem[3];  /**< net.ipv4.tcp_wmem: min, initial, max */
    int has_buf_lock;          /**< SO_BUF_LOCK works (Linux >= 5.15) */
    int has_tcp_info;          /**< TCP_INFO works */
    int has_chrono;            /**< with the chronographs (>= 4.10) */
} sbt_kernel_t;

/** Set by sbt_kernel_probe() in post_config, before children fork. */
extern sbt_kernel_t sbt_kernel;

/** The TCP_INFO fields the module uses; a field the running kernel did
 *  not fill in (shorter optlen) has its bit clear in @c valid. */
typedef struct {
    unsigned int valid;        /**< SBT_TI_* bits */
    apr_uint32_t rtt_us;       /**< smoothed RTT (EWMA) */
    apr_uint32_t rttvar_us;    /**< its mean deviation */
    apr_uint32_t min_rtt_us;   /**< windowed minimum RTT */
    apr_uint32_t snd_mss;
    apr_uint32_t total_retrans;
    apr_uint32_t snd_cwnd;     /**< congestion window, segments */
    int app_limited;           /**< delivery_rate sample was app-limited */
    apr_uint64_t bytes_acked;
    apr_uint64_t delivery_rate;    /**< bytes per second */
    /** The sender's chronographs (Linux >= 4.10): time with data to
     *  send, and the parts of it blocked by the send buffer and by the
     *  peer's window. */
    apr_uint64_t busy_us;
    apr_uint64_t rwnd_limited_us;
    apr_uint64_t sndbuf_limited_us;
    apr_uint32_t snd_wnd;      /**< the peer's window, bytes (>= 5.4) */
    apr_uint32_t unacked;      /**< segments in flight */
    apr_uint32_t notsent;      /**< bytes queued, not yet sent (>= 4.6) */
    /** Segments delivered, SACKed ones as they are (>= 4.18): unlike
     *  bytes_acked, no jump when a retransmission fills a hole. */
    apr_uint32_t delivered;
} sbt_tcp_info_t;

#define SBT_TI_BASE        0x01  /**< every u32 field but min_rtt_us */
#define SBT_TI_BYTES_ACKED 0x02
#define SBT_TI_MIN_RTT     0x04
#define SBT_TI_DELIVERY    0x08
#define SBT_TI_CHRONO      0x10  /**< busy, rwnd- and sndbuf-limited time */
#define SBT_TI_SND_WND     0x20
#define SBT_TI_NOTSENT     0x40
#define SBT_TI_DELIVERED   0x80

/** Microseconds on a clock nothing steps (CLOCK_MONOTONIC), for every
 *  interval the module times: the wall clock (apr_time_now) moves with a
 *  VM resume or `chronyc makestep`, so it is only for what people read. */
apr_int64_t sbt_clock_us(void);

/** Fill sbt_kernel from /proc and a probe socket; unknowns stay 0. */
void sbt_kernel_probe(void);

/** Where the limits are shown. */
typedef enum {
    SBT_SHOW_LOG,               /**< the startup notice: one line */
    SBT_SHOW_HTML,              /**< the status page: a <table> */
    SBT_SHOW_AUTO,              /**< ?auto: SndbufTuneKernel* lines */
    SBT_SHOW_PROM               /**< sndbuf_tune_kernel_* gauges */
} sbt_show_e;

/** sbt_kernel as @a how shows it: the one place that names the limits. */
const char *sbt_kernel_show(apr_pool_t *p, sbt_show_e how);

/* The socket calls below return 0 or an errno, and EBADF, without a
 * system call, for the fd -1 of a closed socket. */

/** getsockopt(SO_SNDBUF): the kernel's (doubled) send buffer. */
int sbt_sock_get_sndbuf(int fd, int *bytes);
/** setsockopt(SO_SNDBUF): fixes the size and locks out autotuning. */
int sbt_sock_set_sndbuf(int fd, int bytes);
/** Turn on the kernel's own pacing (about 1.2 x cwnd per RTT, 2 x in
 *  slow start), with no real cap.  It cannot be turned off again. */
int sbt_sock_set_pacing(int fd);
/** Is the send buffer's size locked (SO_BUF_LOCK send bit)? */
int sbt_sock_sndbuf_locked(int fd, int *locked);
/** Give the buffer back to autotuning: shrink it to @a initial (autotuning
 *  only grows a buffer), then clear the SO_BUF_LOCK send bit, keeping any
 *  receive lock.  If the clear fails after the shrink, try to put back
 *  @a restore_to (0 = unknown); on any failure the socket may be left
 *  shrunk and locked: read it back. */
int sbt_sock_release_sndbuf(int fd, int initial, int restore_to);
/** TCP_CONGESTION into @a name, NUL-terminated within @a len bytes. */
int sbt_sock_congestion(int fd, char *name, int len);
/** TCP_INFO, trusting only what the kernel's optlen covers. */
int sbt_sock_tcp_info(int fd, sbt_tcp_info_t *ti);

#endif /* SNDBUF_KERNEL_H */
