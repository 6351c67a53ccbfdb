/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_auto.c: "SndbufTune auto", a send buffer sized to the path.
 *
 * A send buffer smaller than the bandwidth-delay product caps the flow
 * at sndbuf / RTT; a larger one only holds memory (and, in a shared
 * bottleneck, queue).  So auto asks for
 *
 *     SO_SNDBUF = FACTOR x rate x RTT,   clamped to SndbufTuneLimits
 *
 * at the start of a response, from TCP_INFO's RTT and the configured
 * SndbufTuneBandwidth (or, until measured, SBT_AUTO_START_RATE), then
 * follows the connection during the response: an output filter cuts it
 * into chunks of 1/8 of the buffer, flushes each (so control comes back
 * while the data is still going out), and at most once per RTT re-reads
 * TCP_INFO and moves the buffer toward FACTOR x delivery rate x min RTT.
 * While the kernel reports the connection send-buffer-limited the
 * buffer at least doubles, as cwnd does in slow start, because a
 * limited flow's delivery rate only ever measures the buffer itself.
 * docs/auto.md explains the constants.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_request.h"
#include "util_filter.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* SO_SNDBUF = 3 x BDP.  The congestion control must never be held back
 * by the buffer: BBR's startup keeps 2.89 x BDP in flight and cannot
 * even leave startup while send-buffer-limited (the kernel marks those
 * samples app-limited); paced, MSS-sized skbs carry ~35% overhead; and
 * Linux doubles the argument.  3 x BDP gives ~4.4 x BDP of payload.
 * On the 30 Mbit/250 ms lab path 1.5, 2 and 2.5 left BBR stuck in
 * startup, 3 did not (docs/auto.md). */
#define SBT_AUTO_FACTOR         3

/* Rate assumed before anything is measured: 1 Mbit/s.  httpd fills
 * whatever buffer it gets at once, and a flow that then gets little of
 * a shared bottleneck holds that data for seconds, so the guess errs
 * low: a flow that needs more is send-buffer-limited and doubles each
 * RTT, as fast as slow start grows its window. */
#define SBT_AUTO_START_RATE     (1000000 / 8)

/* Never fewer than this many segments (x2 by Linux): with a buffer
 * below a few MSS every write waits for a delayed ACK.  Loopback's
 * 64k MSS makes this the floor there. */
#define SBT_AUTO_MIN_SEGMENTS   2

/* Never look more often than this, even on loopback. */
#define SBT_AUTO_MIN_INTERVAL   apr_time_from_msec(1)

/* The response is cut into chunks of 1/8 of the buffer (about a third
 * of the BDP at FACTOR 3, Linux doubling), so a look comes about once an
 * RTT even for a slow flow; never smaller than this, to bound the
 * number of flushes. */
#define SBT_AUTO_CHUNK_SHIFT    3
#define SBT_AUTO_MIN_CHUNK      (16 * 1024)

/* Send-buffer-limited for more than 1/8 of an interval means grow. */
#define SBT_AUTO_LIMITED_SHIFT  3

static ap_filter_rec_t *sbt_auto_filter_handle;

typedef struct {
    sbt_decision_t d;
    conn_rec *primary;
    sbt_conn_t *st;
    int shared;
    /** Bytes between two looks: half the buffer as of the last look. */
    apr_off_t chunk;
    /** Bytes passed down since the last look (< chunk). */
    apr_off_t pending;
    apr_time_t next_look;
    apr_time_t last_look;
    /** tcpi_sndbuf_limited at the last look (microseconds). */
    apr_uint64_t limited_us;
    /** Rate being sized for, bytes/s: configured or estimated. */
    apr_uint64_t rate;
    apr_uint32_t rtt_us;
    int retunes;
    /** Stop cutting the response: the size is settled. */
    int settled;
    apr_bucket_brigade *rest;
} sbt_auto_ctx_t;

/** The RTT to size for: the windowed minimum once the peer has
 *  acknowledged data; before that only the handshake sample exists,
 *  which TCP_DEFER_ACCEPT inflates by the client's idle time. */
static apr_uint32_t sbt_auto_rtt(const sbt_tcp_info_t *ti, int *from_data)
{
    *from_data = (ti->valid & SBT_TI_MIN_RTT) && (ti->valid & SBT_TI_BYTES_ACKED)
                 && ti->bytes_acked > 1 && ti->min_rtt_us;
    if (*from_data) {
        return ti->min_rtt_us;
    }
    return (ti->valid & SBT_TI_BASE) ? ti->rtt_us : 0;
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

static int sbt_auto_clamp(apr_uint64_t v, const sbt_decision_t *d,
                          apr_uint32_t mss, const char **why)
{
    apr_uint64_t floor = (apr_uint64_t)mss * SBT_AUTO_MIN_SEGMENTS;

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
    *why = NULL;
    return (int)v;
}

static apr_uint64_t sbt_auto_bdp_size(apr_uint64_t rate, apr_uint32_t rtt_us)
{
    return rate * rtt_us / 1000000 * SBT_AUTO_FACTOR;
}

/**
 * The control law: the next SO_SNDBUF for a connection now at @a cur.
 * Grows at least twofold while send-buffer-limited (measured mode
 * only: a configured rate is trusted), shrinks at most by half a look
 * and never below the data in flight, which only an ACK can release.
 */
static int sbt_auto_next(const sbt_auto_ctx_t *ctx, int cur, int limited,
                         apr_uint64_t in_flight, apr_uint32_t mss,
                         const char **why)
{
    apr_uint64_t next = sbt_auto_bdp_size(ctx->rate, ctx->rtt_us);

    if (limited && !ctx->d.tune.rate && next < 2 * (apr_uint64_t)cur) {
        next = 2 * (apr_uint64_t)cur;
    }
    if (next < (apr_uint64_t)cur) {
        apr_uint64_t floor = (apr_uint64_t)cur / 2;
        if (floor < in_flight) {
            floor = in_flight;
        }
        if (next < floor) {
            next = floor < (apr_uint64_t)cur ? floor : (apr_uint64_t)cur;
        }
    }
    return sbt_auto_clamp(next, &ctx->d, mss, why);
}

/** Resize only for a change worth a system call: +1/8 or -1/4. */
static int sbt_auto_worth_it(int cur, int next)
{
    return next > cur + cur / 8 || next < cur - cur / 4;
}

static void sbt_auto_set_chunk(sbt_auto_ctx_t *ctx)
{
    ctx->chunk = ctx->st->effective >> SBT_AUTO_CHUNK_SHIFT;
    if (ctx->chunk < SBT_AUTO_MIN_CHUNK) {
        ctx->chunk = SBT_AUTO_MIN_CHUNK;
    }
}

static int sbt_auto_current(const sbt_conn_t *st)
{
    if (st->state == SBT_SOCK_FIXED) {
        return st->requested;
    }
    return st->effective > 0 ? st->effective / 2 : 0;
}

static void sbt_auto_notes(request_rec *r, const sbt_auto_ctx_t *ctx)
{
    sbt_note_num(r, SBT_NOTE_RTT, ctx->rtt_us);
    sbt_note_num(r, SBT_NOTE_BW, (apr_int64_t)ctx->rate * 8);
    sbt_note_num(r, SBT_NOTE_RETUNES, ctx->retunes);
    sbt_note_num(r, SBT_NOTE_REQUESTED, sbt_auto_current(ctx->st));
    sbt_note_num(r, SBT_NOTE_EFFECTIVE, ctx->st->effective);
}

/** One look at the connection during the response. */
static void sbt_auto_look(request_rec *r, sbt_auto_ctx_t *ctx)
{
    sbt_tcp_info_t ti;
    apr_time_t now = apr_time_now();
    apr_uint64_t in_flight;
    int rv, from_data, limited, cur, next;
    const char *why;

    if (now < ctx->next_look) {
        return;
    }
    if ((rv = sbt_sock_tcp_info(ctx->st->fd, &ti)) != 0) {
        sbt_log_failure(r, rv, "getsockopt(TCP_INFO)");
        ctx->settled = 1;
        return;
    }
    ctx->rtt_us = sbt_auto_rtt(&ti, &from_data);
    if (!ctx->d.tune.rate) {
        ctx->rate = sbt_auto_estimate(ctx->rate, &ti);
        ctx->st->rate_estimate = ctx->rate;
    }
    limited = (ti.valid & SBT_TI_CHRONO)
              && ((ti.sndbuf_limited_us - ctx->limited_us)
                  << SBT_AUTO_LIMITED_SHIFT)
                 > (apr_uint64_t)(now - ctx->last_look);
    in_flight = (apr_uint64_t)ti.unacked * ti.snd_mss;
    ctx->limited_us = ti.sndbuf_limited_us;
    ctx->last_look = now;
    ctx->next_look = now + (ti.rtt_us > SBT_AUTO_MIN_INTERVAL
                            ? ti.rtt_us : SBT_AUTO_MIN_INTERVAL);

    if (ctx->shared && !sbt_lock_shared()) {
        return;
    }
    cur = sbt_auto_current(ctx->st);
    next = sbt_auto_next(ctx, cur, limited, in_flight, ti.snd_mss, &why);
    if (why) {
        sbt_req_t *rq = sbt_req_get(r);
        if (rq) {
            rq->clamped = 1;
        }
    }
    if (sbt_auto_worth_it(cur, next)) {
        const char *done = sbt_apply_fixed(r, ctx->st, next, ctx->shared);
        ctx->retunes++;
        ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, "SndbufTune auto "
                      "re-tune %d: rtt %uus rate %" APR_UINT64_T_FMT " B/s"
                      "%s, %d -> %d%s%s: %s, effective %d", ctx->retunes,
                      ctx->rtt_us, ctx->rate,
                      limited ? ", send-buffer-limited" : "", cur, next,
                      why ? ", " : "", why ? why : "", done,
                      ctx->st->effective);
    }
    else if (ctx->d.tune.rate && from_data) {
        /* A configured rate and a data-based RTT: nothing will move. */
        ctx->settled = 1;
    }
    sbt_auto_set_chunk(ctx);
    if (ctx->shared) {
        sbt_unlock_shared();
    }
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

static apr_status_t sbt_auto_filter(ap_filter_t *f, apr_bucket_brigade *bb)
{
    sbt_auto_ctx_t *ctx = f->ctx;
    apr_off_t left;
    apr_bucket *cut;
    apr_status_t rv;

    while (!ctx->settled) {
        left = ctx->chunk - ctx->pending;
        cut = sbt_auto_cut(bb, &left);
        if (cut == APR_BRIGADE_SENTINEL(bb) && left > 0) {
            ctx->pending = ctx->chunk - left;
            break;
        }
        /* Flush the chunk, so the core writes it now and control comes
         * back here while the rest is still queued in the kernel. */
        ctx->rest = apr_brigade_split_ex(bb, cut, ctx->rest);
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_flush_create(f->c->bucket_alloc));
        rv = ap_pass_brigade(f->next, bb);
        apr_brigade_cleanup(bb);
        APR_BRIGADE_CONCAT(bb, ctx->rest);
        if (rv != APR_SUCCESS) {
            return rv;
        }
        ctx->pending = 0;
        sbt_auto_look(f->r, ctx);
    }
    if (!APR_BRIGADE_EMPTY(bb)
        && APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(bb))) {
        ap_remove_output_filter(f);
    }
    return ap_pass_brigade(f->next, bb);
}

/** Our filter, when an internal redirect carried it over. */
static ap_filter_t *sbt_auto_filter_find(request_rec *r)
{
    ap_filter_t *f;

    for (f = r->output_filters; f; f = f->next) {
        if (f->frec == sbt_auto_filter_handle) {
            return f;
        }
    }
    return NULL;
}

const char *sbt_auto_start(request_rec *r, sbt_req_t *rq, int shared,
                           int *asked)
{
    const sbt_tcp_info_t *ti = &rq->start;
    sbt_auto_ctx_t *ctx;
    ap_filter_t *f;
    const char *why, *done;
    int from_data;

    *asked = -1;
    if (!(ti->valid & SBT_TI_BASE)) {
        return "no TCP_INFO, socket left as it was";
    }
    ctx = apr_pcalloc(r->pool, sizeof(*ctx));
    ctx->d = rq->d;
    ctx->st = rq->st;
    ctx->shared = shared;
    ctx->rate = rq->d.tune.rate ? rq->d.tune.rate
              : rq->st->rate_estimate ? rq->st->rate_estimate
              : SBT_AUTO_START_RATE;
    ctx->rtt_us = sbt_auto_rtt(ti, &from_data);
    ctx->limited_us = ti->sndbuf_limited_us;
    ctx->last_look = rq->started;
    ctx->next_look = rq->started + SBT_AUTO_MIN_INTERVAL;
    *asked = sbt_auto_clamp(sbt_auto_bdp_size(ctx->rate, ctx->rtt_us),
                            &rq->d, ti->snd_mss, &why);
    rq->clamped |= why != NULL;
    if (rq->st->state == SBT_SOCK_FIXED
        && !sbt_auto_worth_it(rq->st->requested, *asked)) {
        /* An earlier request on this connection got close enough. */
        *asked = rq->st->requested;
        done = "close to the size in force, kept";
    }
    else {
        done = sbt_apply_fixed(r, rq->st, *asked, shared);
    }
    sbt_auto_set_chunk(ctx);

    if ((f = sbt_auto_filter_find(r)) != NULL) {
        f->ctx = ctx;
    }
    else {
        ap_add_output_filter_handle(sbt_auto_filter_handle, ctx, r,
                                    r->connection);
    }
    rq->auto_ctx = ctx;
    sbt_auto_notes(r, ctx);
    return apr_psprintf(r->pool, "rtt %uus%s x rate %" APR_UINT64_T_FMT
                        " B/s (%s) x %d = %d%s%s; %s", ctx->rtt_us,
                        from_data ? "" : " (handshake)", ctx->rate,
                        rq->d.tune.rate ? "configured"
                        : rq->st->rate_estimate ? "measured earlier"
                        : "starting assumption",
                        SBT_AUTO_FACTOR, *asked,
                        why ? ", " : "", why ? why : "", done);
}

void sbt_auto_finish(request_rec *r, const sbt_req_t *rq)
{
    if (rq->auto_ctx) {
        sbt_auto_notes(r, rq->auto_ctx);
    }
}

void sbt_auto_register_hooks(void)
{
    /* After the protocol filters (chunking included), so the bytes it
     * counts are the ones the connection filters and the socket see. */
    sbt_auto_filter_handle =
        ap_register_output_filter("SNDBUF_TUNE_AUTO", sbt_auto_filter, NULL,
                                  AP_FTYPE_TRANSCODE + 5);
}
