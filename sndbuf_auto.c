/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_auto.c: "SndbufTune auto", a send buffer sized to the path.
 *
 * A send buffer smaller than the bandwidth-delay product caps the flow
 * at sndbuf / RTT; a larger one only holds memory and, in a shared
 * bottleneck, queue.  So auto aims at
 *
 *     SO_SNDBUF = FACTOR x rate x RTT,   clamped to SndbufTuneLimits
 *
 * (the rate configured or measured; in a shared bottleneck, the queue it
 * sees steers it instead) and follows the connection while the
 * response is written: at most once per RTT it reads TCP_INFO and moves
 * the buffer (the control law is sbt_auto_next; docs/auto.md explains it
 * and its constants).
 *
 * When it looks depends on who writes the response:
 *  - event MPM, HTTP/1, a file sent with sendfile: the handler hands the
 *    response to the core and returns, and the MPM writes the rest
 *    without a worker (write completion), calling no filter of ours.  It
 *    does resume the connection on a worker each time the socket drains:
 *    the resume_connection hook looks then.  Anything else (no sendfile,
 *    TLS) the core writes in blocking mode: chunks, without flushes.
 *  - prefork and worker MPMs: a worker stays with the response anyway,
 *    so the response is cut into chunks and each is flushed; control
 *    comes back between chunks while the kernel still holds data.
 *  - HTTP/2 streams: mod_http2 takes each chunk at the pace the shared
 *    connection drains; auto only grows the shared buffer.
 * A response that fits in the buffer in force never gets here
 * (mod_sndbuf_tune.c): it costs no system call.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_log.h"
#include "http_request.h"
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 102)
#include "http_ssl.h"
#endif
#include "ap_mpm.h"
#include "mpm_common.h"
#include "util_filter.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* SO_SNDBUF = FACTOR x rate x RTT, FACTOR = 7/8: Linux doubles the
 * argument and MSS-sized skbs carry about a third of overhead, so the
 * socket holds about 1.2 x BDP of payload.  That fills the pipe while the
 * writer refills the buffer, and no more: a BBR flow that its buffer
 * holds back never leaves startup (its 2.89 gain), and a larger buffer
 * lets each burst after a loss overflow a bottleneck queue of one BDP,
 * and the next loss follows (docs/auto.md). */
#define SBT_AUTO_FACTOR_NUM     7
#define SBT_AUTO_FACTOR_DEN     8

/* While the flow's delivery rate still grows by a quarter per look it
 * is in slow start (or BBR's startup) and the kernel's autotuning is as
 * fast as anything: auto takes over once the rate has not grown so for
 * three looks in a row (BBR's own test for a full pipe), or RAMP_RTTS
 * RTTs after the response began.  Slow start doubles per RTT (ten
 * segments to 4 MiB in nine); a flow still "growing" long after is
 * winning its share through a crowded bottleneck, where write completion
 * may give auto one look in ten RTTs, and none once autotuning's buffer
 * holds the rest of the file. */
#define SBT_AUTO_RAMP_SHIFT     2
#define SBT_AUTO_RAMP_FLAT      3
#define SBT_AUTO_RAMP_RTTS      32

/* A ramp that reaches tcp_wmem[2] may grow to this many times a
 * configured rate's target (sbt_auto_lift): SO_SNDBUF 3 x 7/8 x BDP
 * holds about 3.5 x BDP of payload, more than startup's 2.89 x BDP in
 * flight. */
#define SBT_AUTO_LIFT           3

/* A flow reads the queue at its bottleneck from its own RTT: what the
 * smoothed RTT has beyond the minimum and beyond its own variation (the
 * jitter of a short path is no queue).  Below 1/16 of the minimum RTT
 * the path has room: a send-buffer-limited flow grows by a quarter per
 * look, and one that is not moves to the target.  Above, the buffer is
 * steered as FAST TCP steers its window: halfway each look toward
 *     cur x (min RTT + variation) / RTT + STEP,
 * whose fixed point leaves STEP bytes of each flow in the queue.  All
 * flows through one bottleneck see the same queueing delay, so they
 * settle at equal rates, however unequal they started; a target made
 * of each flow's own rate would keep whatever split they had.  A queue
 * shorter than SBT_AUTO_QUEUE_MIN is not steered: on a fast path the
 * delay that load adds in NICs and hosts (interrupt coalescing, a busy
 * relay) is of that order, and steering by it would starve the flow. */
#define SBT_AUTO_QUEUE_SHIFT    4
#define SBT_AUTO_QUEUE_MIN      2000    /* microseconds */
#define SBT_AUTO_GROW_SHIFT     2
#define SBT_AUTO_STEP_SEGMENTS  8

/* While a queue steers the buffer, every move of the law is made, down
 * to 1/128 of the buffer.  Each look moves the buffer only a tenth of
 * its way to the fixed point (halfway to a FAST step, which itself goes
 * a fifth of the way when the queue is a fifth of the RTT), so skipping
 * moves under the 1/16 or one MSS that other re-tunes must exceed left
 * each flow anywhere within about 25% of the common fixed point, and its
 * rate with it (20 flows through 100 Mbit/s: buffers 107-149 KB, Jain
 * 0.95; with every move 126-138 KB, 0.99).  It costs one system call an
 * RTT for a flow in a crowd. */
#define SBT_AUTO_STEER_SHIFT    7

/* With no queue, the target is for the RTT the flow may see: the smoothed
 * one, its variation, and the time the writer takes to refill the buffer
 * (a wakeup and a sendfile), which on a 1 ms path is as long as the path. */
#define SBT_AUTO_REFILL_US      1000

/* For this many looks after slow start a queue never steers the buffer
 * below the target: that queue is slow start's own overshoot draining,
 * and a flow cut below one BDP then has no room for its retransmissions
 * when the overshoot's losses come in. */
#define SBT_AUTO_SETTLE_LOOKS   8

/* A configured rate is the client's, and auto sizes for it while the
 * flow gets at least half of it.  A flow that gets less once its ramp
 * is over shares its path with others, and its buffer is sized from its
 * measured rate like any other's: sized for the configured rate, each
 * flow of a crowd held several times its share (100 flows through
 * 100 Mbit/s: 6.6 x the memory of autotuning, Jain 0.83).  Half, not
 * nearly all: one flow's measured rate dips after a loss or in BBR's
 * drain phase (on the seed path to 73% of the configured rate), and a
 * flow of three or more through one bottleneck gets a third at most. */
#define SBT_AUTO_SHARE_DIV      2

/* A lower minimum RTT that another connection to the same client
 * address measured (sndbuf_path.c) is taken for the flow's own when it
 * is at least 1/TRUST of it: the flow then started in a queue of up to
 * one BDP (the 100-flow bench's start fills that much).  A larger gap
 * more likely means another path behind the address (a NAT's), whose
 * extra delay would read as a queue and steer this flow down for good. */
#define SBT_AUTO_PATH_TRUST     2

/* Never fewer than this many segments (x2 by Linux): with a buffer
 * below a few MSS every write waits for a delayed ACK.  Loopback's
 * 64k MSS makes this the floor there. */
#define SBT_AUTO_MIN_SEGMENTS   2

/* Never look more often than this, even on loopback. */
#define SBT_AUTO_MIN_INTERVAL   apr_time_from_msec(1)

/* Chunks of 1/8 of the buffer, so a look comes about once an RTT even
 * for a slow flow; never smaller than this, to bound the passes. */
#define SBT_AUTO_CHUNK_SHIFT    3
#define SBT_AUTO_MIN_CHUNK      (16 * 1024)

/* Send-buffer-limited for more than 1/8 of an interval means limited. */
#define SBT_AUTO_LIMITED_SHIFT  3

struct sbt_auto_t {
    /** The request it serves (same pool): its decision, and whether
     *  it is an HTTP/2 stream, whose socket is shared. */
    const sbt_req_t *rq;
    /** Flush each chunk: the MPM keeps the worker (prefork, worker). */
    int flush;
    /** Bytes between two passes, and passed since the last cut. */
    apr_off_t chunk;
    apr_off_t pending;
    /** The rest went down whole: the MPM writes it (event). */
    int handed_over;
    /** Said (debug) why the rest could not go down whole. */
    int said_kept;
    apr_time_t next_look;
    apr_time_t last_look;
    /** tcpi_sndbuf_limited at the last look (microseconds). */
    apr_uint64_t limited_us;
    /** The rate being sized for, bytes/s: configured or measured. */
    apr_uint64_t rate;
    /** The delivery rate measured (peak hold), bytes/s. */
    apr_uint64_t measured;
    /** The rate when it last grew by a quarter, while ramping up, and
     *  the looks since. */
    apr_uint64_t ramp_rate;
    int ramp_flat;
    /** When the response outgrew the buffer in force (auto began). */
    apr_time_t began;
    /** Looks left, after the ramp, that a queue never takes below the
     *  target (SBT_AUTO_SETTLE_LOOKS). */
    int settling;
    /** The minimum RTT sized for: the path's, or the flow's own. */
    apr_uint32_t min_rtt_us;
    apr_uint32_t own_min_rtt_us;
    /** The RTT is the handshake's (no data acknowledged yet). */
    int rtt_from_handshake;
    /** Left to kernel autotuning until the rate levels off. */
    int ramping;
    /** The ramp reached tcp_wmem[2], and had its ceiling lifted if the
     *  lift was higher (sbt_auto_lift): not looked at again. */
    int lifted;
    /** No more looks: TCP_INFO failed. */
    int stopped;
    int retunes;
    sbt_tally_t tally;
};

/** What one look saw. */
typedef struct {
    apr_uint32_t srtt_us;
    apr_uint32_t rttvar_us;
    apr_uint32_t mss;
    int limited;
} sbt_auto_seen_t;

static int sbt_async_mpm;

/** The RTT to size for: the windowed minimum once the peer has
 *  acknowledged data, or the path's if another connection to the same
 *  client measured a lower one (sndbuf_path.c); before that only the
 *  handshake sample exists, which TCP_DEFER_ACCEPT inflates by the
 *  client's idle time. */
static void sbt_auto_rtt(sbt_auto_t *a, const sbt_tcp_info_t *ti,
                         const conn_rec *c)
{
    int from_data = (ti->valid & SBT_TI_MIN_RTT)
                    && (ti->valid & SBT_TI_BYTES_ACKED)
                    && ti->bytes_acked > 1 && ti->min_rtt_us;
    apr_uint32_t path;

    a->rtt_from_handshake = !from_data;
    a->own_min_rtt_us = from_data ? ti->min_rtt_us : ti->rtt_us;
    a->min_rtt_us = a->own_min_rtt_us;
    if (from_data) {
        path = sbt_path_min_rtt(c->master ? c->master->client_addr
                                          : c->client_addr,
                                a->own_min_rtt_us);
        if ((apr_uint64_t)path * SBT_AUTO_PATH_TRUST >= a->own_min_rtt_us) {
            a->min_rtt_us = path;
        }
    }
}

/** Peak-hold with decay: a flow's delivery rate drops whenever it is
 *  briefly starved, so follow rises at once and falls by half the gap
 *  per look.  App-limited samples only ever raise it. */
static apr_uint64_t sbt_auto_estimate(apr_uint64_t est,
                                      const sbt_tcp_info_t *ti)
{
    apr_uint64_t sample = ti->delivery_rate;

    if (!(ti->valid & SBT_TI_DELIVERY) || !sample || sample >= est) {
        return sample > est ? sample : est;
    }
    if (ti->app_limited) {
        return est;
    }
    return est - (est - sample) / 2;
}

/** Size for the configured rate while the flow gets at least half of it
 *  (SBT_AUTO_SHARE_DIV), else for the measured one; say when it switches. */
static void sbt_auto_set_rate(sbt_auto_t *a, conn_rec *c)
{
    apr_uint64_t conf = a->rq->d.tune.rate;
    int was_sharing = conf && a->rate != conf, sharing;

    if (!conf) {
        a->rate = a->measured;
        return;
    }
    sharing = !a->ramping && a->measured * SBT_AUTO_SHARE_DIV < conf;
    a->rate = sharing ? a->measured : conf;
    if (sharing != was_sharing) {
        ap_log_cerror(APLOG_MARK, APLOG_DEBUG, 0, c, "SndbufTune auto: "
                      "the flow gets %" APR_UINT64_T_FMT " B/s, %s half "
                      "the configured %" APR_UINT64_T_FMT " B/s: sized from "
                      "the %s rate", a->measured,
                      sharing ? "under" : "again at least", conf,
                      sharing ? "measured" : "configured");
    }
}

static int sbt_auto_clamp(apr_uint64_t v, const sbt_decision_t *d,
                          apr_uint32_t mss, const char **why)
{
    apr_uint64_t floor = (apr_uint64_t)mss * SBT_AUTO_MIN_SEGMENTS;

    *why = NULL;
    if (floor > (apr_uint64_t)d->limit_min && v < floor
        && floor <= (apr_uint64_t)d->limit_max) {
        *why = "raised to " APR_STRINGIFY(SBT_AUTO_MIN_SEGMENTS) " x MSS";
        return (int)floor;
    }
    if (v < (apr_uint64_t)d->limit_min) {
        *why = "raised to the minimum";
        return d->limit_min;
    }
    if (v > (apr_uint64_t)d->limit_max) {
        *why = (sbt_kernel.wmem_max
                && (apr_uint32_t)d->limit_max == sbt_kernel.wmem_max)
               ? "capped at net.core.wmem_max" : "capped at the maximum";
        return d->limit_max;
    }
    return (int)v;
}

static apr_uint64_t sbt_auto_target(const sbt_auto_t *a, apr_uint32_t rtt_us)
{
    return a->rate * rtt_us / 1000000 * SBT_AUTO_FACTOR_NUM
           / SBT_AUTO_FACTOR_DEN;
}

/** Does the RTT show a queue at the bottleneck worth steering by? */
static int sbt_auto_queued(const sbt_auto_t *a, const sbt_auto_seen_t *s)
{
    apr_uint32_t base = a->min_rtt_us + s->rttvar_us;
    apr_uint32_t queue = s->srtt_us > base ? s->srtt_us - base : 0;

    return queue > a->min_rtt_us >> SBT_AUTO_QUEUE_SHIFT
           && queue > SBT_AUTO_QUEUE_MIN;
}

/**
 * The control law: the next SO_SNDBUF for a connection now at @a cur.
 * A queue at the bottleneck (@a queued, sbt_auto_queued) steers it, the
 * rate being configured or measured; with none, it is FACTOR x rate x RTT.
 * It shrinks at most by half a look.
 */
static int sbt_auto_next(const sbt_auto_t *a, const sbt_auto_seen_t *s,
                         int queued, int cur, const char **why)
{
    apr_uint64_t c = (apr_uint64_t)cur, next;
    apr_uint32_t base = a->min_rtt_us + s->rttvar_us;

    if (queued) {
        next = (c + c * base / s->srtt_us
                + (apr_uint64_t)s->mss * SBT_AUTO_STEP_SEGMENTS) / 2;
        if (a->settling && next < sbt_auto_target(a, a->min_rtt_us)) {
            next = sbt_auto_target(a, a->min_rtt_us);
        }
    }
    else {
        /* No queue to speak of: let a buffer that holds the flow back
         * grow. */
        next = sbt_auto_target(a, s->srtt_us + s->rttvar_us
                                  + SBT_AUTO_REFILL_US);
        if (s->limited && next < c + (c >> SBT_AUTO_GROW_SHIFT)) {
            next = c + (c >> SBT_AUTO_GROW_SHIFT);
        }
    }
    if (next < c / 2) {
        next = c / 2;
    }
    return sbt_auto_clamp(next, &a->rq->d, s->mss, why);
}

/** Resize only for a change worth a system call: 1/16 either way, or
 *  a step; while a queue steers it, any move the law makes
 *  (SBT_AUTO_STEER_SHIFT). */
static int sbt_auto_worth_it(int cur, int next, apr_uint32_t mss,
                             int steering)
{
    int d = next > cur ? next - cur : cur - next;

    if (steering) {
        return d > cur >> SBT_AUTO_STEER_SHIFT;
    }
    return d > cur / 16 || d >= (int)mss;
}

static void sbt_auto_set_chunk(sbt_auto_t *a, const sbt_sock_t *sock)
{
    a->chunk = sbt_sock_known_size(sock) >> SBT_AUTO_CHUNK_SHIFT;
    if (a->chunk < SBT_AUTO_MIN_CHUNK) {
        a->chunk = SBT_AUTO_MIN_CHUNK;
    }
}

/** Still ramping up: leave the buffer to autotuning? */
static int sbt_auto_ramping(sbt_auto_t *a, apr_time_t now)
{
    int too_long = now - a->began
                   >= (apr_time_t)a->min_rtt_us * SBT_AUTO_RAMP_RTTS;

    if (!too_long
        && (a->rtt_from_handshake
            || a->measured
               > a->ramp_rate + (a->ramp_rate >> SBT_AUTO_RAMP_SHIFT))) {
        a->ramp_rate = a->measured;
        a->ramp_flat = 0;
        return 1;
    }
    if (!too_long && ++a->ramp_flat < SBT_AUTO_RAMP_FLAT) {
        return 1;
    }
    a->ramping = 0;
    a->settling = SBT_AUTO_SETTLE_LOOKS;
    return 0;
}

/**
 * A fresh socket is the kernel's: it grows the buffer with the
 * congestion window, as fast as slow start (and BBR's startup, which
 * keeps 2.89 x BDP in flight) needs, up to tcp_wmem[2] (sbt_auto_lift
 * goes on from there), so auto lets it and takes over once the delivery
 * rate levels off, configured rate or not.  Not when
 * an earlier response or the listener locked the socket, or when
 * SndbufTuneLimits is narrower than the kernel's own range (tcp_wmem),
 * which autotuning would step out of.
 */
static int sbt_auto_may_ramp(const sbt_auto_t *a, const sbt_sock_t *sock)
{
    const apr_uint32_t *w = sbt_kernel.tcp_wmem;

    return sock->state == SBT_SOCK_AUTOTUNED
           && w[2] && 2 * (apr_uint64_t)a->rq->d.limit_max >= w[2]
           && 2 * (apr_uint64_t)a->rq->d.limit_min <= w[1];
}

/**
 * Autotuning stops at tcp_wmem[2], which on a long path is no more than
 * BBR's startup keeps in flight (2.89 x BDP).  A flow that reaches it is
 * held back by its buffer, so BBR never sees the full pipe it needs to
 * leave startup: it goes on sending every refill of the buffer at 2.89 x
 * the rate, and after each loss or PROBE_RTT that burst overflows a
 * queue of one BDP again.  So a flow whose buffer autotuning has grown
 * to its ceiling while the rate still grows gets a higher one for the
 * rest of the ramp: SBT_AUTO_LIFT x the target of a configured rate,
 * else the maximum (a measured rate is not yet the path's).  In a crowd
 * no flow grows that far.  Not on an HTTP/2 connection, whose buffer
 * only ever grows: the lift would outlast the ramp.  (Whether the buffer
 * holds the flow back, tcpi_sndbuf_limited does not tell: on the seed
 * path it grew by less than 1/8 of the interval at every look.)
 */
static void sbt_auto_lift(sbt_auto_t *a, sbt_conn_t *conn, conn_rec *c,
                          const sbt_auto_seen_t *s)
{
    sbt_sock_did_t did = {0};
    const char *why = NULL;
    int lift;

    if (a->lifted || a->rq->shared
        || conn->sock.state != SBT_SOCK_AUTOTUNED) {
        return;
    }
    if (!sbt_sock_refresh(&conn->sock, &did)
        || (apr_uint32_t)conn->sock.effective < sbt_kernel.tcp_wmem[2]) {
        sbt_sock_tally(c, &did, &a->tally);
        return;
    }
    a->lifted = 1;
    lift = a->rq->d.tune.rate
           ? sbt_auto_clamp(SBT_AUTO_LIFT
                            * sbt_auto_target(a, a->min_rtt_us),
                            &a->rq->d, s->mss, &why)
           : a->rq->d.limit_max;
    if (2 * (apr_uint64_t)lift <= (apr_uint64_t)conn->sock.effective) {
        return;
    }
    sbt_sock_fix(&conn->sock, lift, 0, &did);
    sbt_sock_tally(c, &did, &a->tally);
    ap_log_cerror(APLOG_MARK, APLOG_DEBUG, 0, c, "SndbufTune auto: "
                  "autotuning reached its ceiling (tcp_wmem[2]) while the "
                  "rate still grows: lifted to %d%s%s: %s, effective %d",
                  lift, why ? ", " : "", why ? why : "", did.done,
                  conn->sock.effective);
}

/** Move the buffer as the law says; @a conn is entered. */
static void sbt_auto_retune(sbt_auto_t *a, sbt_conn_t *conn, conn_rec *c,
                             const sbt_auto_seen_t *s)
{
    sbt_sock_did_t did = {0};
    const char *why;
    int cur, next, queued;

    cur = sbt_sock_locked_at(&conn->sock);
    if (!cur) {
        /* Taking over from autotuning: from the size it reached. */
        if (!sbt_sock_refresh(&conn->sock, &did)) {
            sbt_sock_tally(c, &did, &a->tally);
            return;
        }
        cur = conn->sock.effective / 2;
    }
    queued = sbt_auto_queued(a, s);
    next = sbt_auto_next(a, s, queued, cur, &why);
    a->tally.clamped |= why != NULL;
    if (sbt_sock_locked_at(&conn->sock)
        && !sbt_auto_worth_it(cur, next, s->mss, queued)) {
        return;
    }
    sbt_sock_fix(&conn->sock, next, a->rq->shared, &did);
    sbt_sock_tally(c, &did, &a->tally);
    a->retunes++;
    ap_log_cerror(APLOG_MARK, APLOG_TRACE1, 0, c, "SndbufTune auto re-tune "
                  "%d: min rtt %uus srtt %uus/%uus rate %" APR_UINT64_T_FMT
                  " B/s%s, %d -> %d%s%s: %s, effective %d", a->retunes,
                  a->min_rtt_us, s->srtt_us, s->rttvar_us, a->rate,
                  s->limited ? ", send-buffer-limited" : "", cur, next,
                  why ? ", " : "", why ? why : "", did.done,
                  conn->sock.effective);
}

/** One look at the connection, at most once per RTT. */
static void sbt_auto_look(sbt_auto_t *a, conn_rec *c)
{
    apr_time_t now = apr_time_now();
    sbt_auto_seen_t s;
    sbt_tcp_info_t ti;
    sbt_conn_t *conn;
    int rv, ramp;

    if (a->stopped || now < a->next_look
        || (conn = sbt_conn_enter(c)) == NULL) {
        return;
    }
    if ((rv = sbt_sock_tcp_info(conn->sock.fd, &ti)) != 0) {
        sbt_sock_did_t did = {0};

        did.call = "getsockopt(TCP_INFO)";
        did.err = rv;
        sbt_sock_tally(c, &did, &a->tally);
        a->stopped = 1;
        sbt_conn_leave(c);
        return;
    }
    sbt_auto_rtt(a, &ti, c);
    a->measured = sbt_auto_estimate(a->measured, &ti);
    conn->rate_estimate = a->measured;
    s.srtt_us = ti.rtt_us;
    s.rttvar_us = ti.rttvar_us;
    s.mss = ti.snd_mss;
    s.limited = (ti.valid & SBT_TI_CHRONO)
                && ((ti.sndbuf_limited_us - a->limited_us)
                    << SBT_AUTO_LIMITED_SHIFT)
                   > (apr_uint64_t)(now - a->last_look);
    a->limited_us = ti.sndbuf_limited_us;
    a->last_look = now;
    a->next_look = now + (ti.rtt_us > SBT_AUTO_MIN_INTERVAL
                          ? ti.rtt_us : SBT_AUTO_MIN_INTERVAL);
    ap_log_cerror(APLOG_MARK, APLOG_TRACE2, 0, c, "SndbufTune auto look: "
                  "min rtt %uus (own %uus%s) srtt %uus measured %"
                  APR_UINT64_T_FMT " B/s%s%s", a->min_rtt_us,
                  a->own_min_rtt_us,
                  a->rtt_from_handshake ? ", handshake" : "", s.srtt_us,
                  a->measured, s.limited ? ", send-buffer-limited" : "",
                  a->ramping ? ", ramping" : "");
    ramp = a->ramping && sbt_auto_ramping(a, now);
    sbt_auto_set_rate(a, c);
    if (ramp) {
        sbt_auto_lift(a, conn, c, &s);
    }
    else {
        sbt_auto_retune(a, conn, c, &s);
    }
    if (!a->ramping && a->settling) {
        a->settling--;
    }
    sbt_auto_set_chunk(a, &conn->sock);
    sbt_conn_leave(c);
}

const char *sbt_auto_begin(request_rec *r, sbt_req_t *rq, sbt_conn_t *conn)
{
    sbt_auto_t *a;
    sbt_sock_did_t did = {0};

    if (!(rq->start.valid & SBT_TI_BASE)) {
        return "no TCP_INFO, socket left as it was";
    }
    a = apr_pcalloc(r->pool, sizeof(*a));
    a->rq = rq;
    a->flush = !rq->shared && !sbt_async_mpm;
    a->measured = conn->rate_estimate;
    a->rate = rq->d.tune.rate ? rq->d.tune.rate : a->measured;
    a->ramp_rate = a->measured;
    sbt_auto_rtt(a, &rq->start, r->connection);
    a->limited_us = rq->start.sndbuf_limited_us;
    a->began = a->last_look = apr_time_now();
    rq->au = a;

    sbt_sock_resolve(&conn->sock, &did);
    sbt_sock_tally(r->connection, &did, &a->tally);
    a->ramping = sbt_auto_may_ramp(a, &conn->sock);
    sbt_auto_set_chunk(a, &conn->sock);
    if (a->ramping) {
        a->next_look = a->last_look + (a->min_rtt_us > SBT_AUTO_MIN_INTERVAL
                                       ? a->min_rtt_us : SBT_AUTO_MIN_INTERVAL);
    }
    else if (a->rq->d.tune.rate) {
        sbt_auto_seen_t s = {0};

        s.mss = rq->start.snd_mss;
        s.srtt_us = rq->start.rtt_us;
        sbt_auto_retune(a, conn, r->connection, &s);
        a->next_look = a->last_look + SBT_AUTO_MIN_INTERVAL;
    }
    else {
        /* Resized at the first look, with the first chunk. */
        a->next_look = a->last_look;
    }
    if (!a->rq->shared && sbt_async_mpm) {
        conn->draining = a;
    }
    return apr_psprintf(r->pool, "%s; rtt %uus%s, rate %" APR_UINT64_T_FMT
                        " B/s (%s)%s",
                        a->ramping ? "left to autotuning while the rate "
                                     "ramps up"
                                   : "sized from the rate and RTT",
                        a->min_rtt_us,
                        a->rtt_from_handshake ? " (handshake)" : "",
                        a->rate, rq->d.tune.rate ? "configured"
                                 : conn->rate_estimate ? "measured earlier"
                                 : "to be measured",
                        a->flush ? "; chunks flushed" : "");
}

void sbt_auto_end(sbt_auto_t *a, sbt_conn_t *conn, sbt_auto_outcome_t *o)
{
    if (!a->rq->shared && conn->draining == a) {
        conn->draining = NULL;
    }
    o->rtt_us = a->min_rtt_us;
    o->rate = a->rate;
    o->retunes = a->retunes;
    o->tally = a->tally;
}

/**
 * The first bucket past @a left bytes, splitting one if needed (then
 * @a left becomes 0); the sentinel when the brigade is shorter (then
 * @a left keeps what is missing).  Buckets of unknown length
 * (pipes, sockets) count as empty: reading them here would block.
 */
static apr_bucket *sbt_auto_cut(apr_bucket_brigade *bb, apr_off_t *left)
{
    apr_bucket *e;

    for (e = APR_BRIGADE_FIRST(bb); e != APR_BRIGADE_SENTINEL(bb);
         e = APR_BUCKET_NEXT(e)) {
        if (APR_BUCKET_IS_METADATA(e) || e->length == (apr_size_t)-1) {
            continue;
        }
        if ((apr_off_t)e->length >= *left) {
            if ((apr_off_t)e->length > *left) {
                /* A bucket type that cannot split goes out whole. */
                apr_bucket_split(e, (apr_size_t)*left);
            }
            *left = 0;
            return APR_BUCKET_NEXT(e);
        }
        *left -= e->length;
    }
    return e;
}

/** Does @a bb hold no data but files the core will send with sendfile?
 *  Any other file (EnableSendfile Off, or read by mod_ssl to encrypt it)
 *  the core gets in memory and writes in blocking mode while more than
 *  FlushMaxThreshold of it is unsent, holding the worker to the end
 *  whoever asked it to. */
static int sbt_auto_only_sendfile(conn_rec *c, apr_bucket_brigade *bb)
{
    apr_bucket *e;
    apr_file_t *fd;

#if AP_MODULE_MAGIC_AT_LEAST(20120211, 102)
    if (ap_ssl_conn_is_ssl(c)) {
        return 0;
    }
#else
    (void)c;
#endif

    for (e = APR_BRIGADE_FIRST(bb); e != APR_BRIGADE_SENTINEL(bb);
         e = APR_BUCKET_NEXT(e)) {
        if (APR_BUCKET_IS_METADATA(e)) {
            continue;
        }
        if (!APR_BUCKET_IS_FILE(e)) {
            return 0;
        }
        fd = ((apr_bucket_file *)e->data)->fd;
        if (!(apr_file_flags_get(fd) & APR_SENDFILE_ENABLED)) {
            return 0;
        }
    }
    return 1;
}

/** Tell an operator, once per response, why auto keeps the worker
 *  under event MPM. */
static void sbt_auto_say_kept(sbt_auto_t *a, request_rec *r)
{
    if (a->handed_over || a->said_kept) {
        return;
    }
    a->said_kept = 1;
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                  "SndbufTune auto: the rest of this response is not a file "
                  "sent with sendfile (EnableSendfile Off, TLS or generated), "
                  "so the core writes it in blocking mode: the worker stays "
                  "with it and auto goes on looking");
}

apr_status_t sbt_auto_pass(ap_filter_t *f, sbt_auto_t *a,
                           apr_bucket_brigade *bb)
{
    apr_bucket_brigade *rest = NULL;
    apr_off_t left;
    apr_bucket *cut;
    apr_status_t rv;

    while (!a->handed_over) {
        left = a->chunk - a->pending;
        cut = sbt_auto_cut(bb, &left);
        if (cut == APR_BRIGADE_SENTINEL(bb) && left > 0) {
            a->pending = a->chunk - left;
            break;
        }
        rest = apr_brigade_split_ex(bb, cut, rest);
        if (a->flush) {
            /* Written now, so control comes back here while the rest is
             * still queued in the kernel. */
            APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_flush_create(
                                            f->c->bucket_alloc));
        }
        rv = ap_pass_brigade(f->next, bb);
        apr_brigade_cleanup(bb);
        APR_BRIGADE_CONCAT(bb, rest);
        if (rv != APR_SUCCESS) {
            return rv;
        }
        a->pending = 0;
        sbt_auto_look(a, f->c);
        /* Event MPM: once the socket is full the core sets sendfile
         * buckets aside and the MPM writes them without a worker, while
         * resume_connection looks.  The core writes data in memory (files
         * without sendfile, TLS) in blocking mode anyway: keep cutting it,
         * and looking. */
        if (!a->flush && !a->rq->shared && f->c->data_in_output_filters) {
            a->handed_over = sbt_auto_only_sendfile(f->c, bb);
            sbt_auto_say_kept(a, f->r);
        }
    }
    if (!APR_BRIGADE_EMPTY(bb) && APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(bb))) {
        ap_remove_output_filter(f);
    }
    return ap_pass_brigade(f->next, bb);
}

/** Event MPM: a worker resumes the connection to write more of a
 *  response in write completion, the socket having drained. */
static void sbt_auto_resume_connection(conn_rec *c, request_rec *r)
{
    sbt_conn_t *conn;

    (void)r;
    if (c->master || !c->cs || c->cs->state != CONN_STATE_WRITE_COMPLETION) {
        return;
    }
    conn = ap_get_module_config(c->conn_config, &sndbuf_tune_module);
    if (conn && conn->draining) {
        sbt_auto_look(conn->draining, c);
    }
}

static int sbt_auto_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                                apr_pool_t *ptemp, server_rec *s)
{
    (void)pconf; (void)plog; (void)ptemp; (void)s;
    if (ap_mpm_query(AP_MPMQ_IS_ASYNC, &sbt_async_mpm) != APR_SUCCESS) {
        sbt_async_mpm = 0;
    }
    return OK;
}

void sbt_auto_register_hooks(void)
{
    /* Which MPM writes the responses, before children fork. */
    ap_hook_post_config(sbt_auto_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Event MPM's write completion calls no request filter: the
     * connection's resumption on a worker is the only moment auto can
     * look, just before the core writes more. */
    ap_hook_resume_connection(sbt_auto_resume_connection, NULL, NULL,
                              APR_HOOK_MIDDLE);
}
