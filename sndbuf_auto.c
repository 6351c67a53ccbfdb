/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_auto.c: "SndbufTune auto" on a connection.  At most once per RTT
 * a look reads TCP_INFO (and the buffer's size while autotuning governs
 * it), gives it to the control law (sndbuf_law.c, pure) and sets, keeps
 * or gives back the buffer.  Looks come between chunks of the response,
 * flushed under prefork and worker (a worker stays anyway) so that control
 * comes back while the kernel still holds data; under event MPM a file
 * sent with sendfile goes to write completion, which calls no filter but
 * resumes the connection on a worker each time the socket drains:
 * resume_connection looks then.  On HTTP/2 the shared buffer only grows.
 */

/* First: APR's ring macros (APR_BRIGADE_*) take offsetof from here, or
 * else compute it through a null pointer (clang's -Wextra warns, UBSan
 * reports it). */
#include <stddef.h>

#include "httpd.h"
#include "http_log.h"
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 102)
#include "http_ssl.h"
#endif
#include "ap_mpm.h"
#include "mpm_common.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"
#include "sndbuf_law.h"

APLOG_USE_MODULE(sndbuf_tune);

/* Never look more often than this, even on loopback. */
#define SBT_AUTO_MIN_INTERVAL   apr_time_from_msec(1)

/* Chunks of 1/8 of the buffer, so a look comes about once an RTT even
 * for a slow flow; never smaller than this, to bound the passes. */
#define SBT_AUTO_CHUNK_SHIFT    3
#define SBT_AUTO_MIN_CHUNK      (16 * 1024)

struct sbt_auto_t {
    int flush;                  /**< flush chunks: the worker stays anyway */
    /** Bytes between two passes, and passed since the last cut. */
    apr_off_t chunk;
    apr_off_t pending;
    /** What follows a cut, reused: a brigade made per pass would stay in
     *  the request's pool until its end, however long it streams. */
    apr_bucket_brigade *rest;
    int handed_over;            /**< the rest went down whole (event) */
    int said_kept;              /**< said (debug) why it could not */
    apr_int64_t next_look;      /**< sbt_clock_us() */
    int loss_based;             /**< cubic, reno: fills queues; read once */
    int stopped;                /**< no more looks: TCP_INFO failed */
    /** Bytes delivered since auto began, each look's new segments at
     *  that look's MSS, and tcpi_delivered then. */
    apr_uint64_t delivered;
    apr_uint32_t delivered_segs;
    sbt_path_flow_t flow;
    int retunes;
    sbt_tally_t tally;
    sbt_law_limits_t lim;
    sbt_law_t law;
};

static int sbt_async_mpm;

static void sbt_auto_limits(sbt_law_limits_t *lim, const sbt_req_t *rq)
{
    lim->limit_min = rq->d.limit_min;
    lim->limit_max = rq->d.limit_max;
    lim->conf_rate = rq->d.tune.rate;
    lim->shared = rq->shared;
    lim->wmem_max = sbt_kernel.wmem_max;
    lim->tcp_wmem_initial = sbt_kernel.tcp_wmem[1];
    lim->tcp_wmem_max = sbt_kernel.tcp_wmem[2];
    lim->no_release = !sbt_kernel.has_buf_lock;
}

/** Count the segments delivered since the last look (SACKed ones as
 *  they arrive) at this look's MSS: a change of MSS revalues nothing
 *  before it.  FALSE where the kernel does not count them (< 4.18). */
static int sbt_auto_count(sbt_auto_t *a, const sbt_tcp_info_t *ti)
{
    if (!(ti->valid & SBT_TI_DELIVERED)) {
        return 0;
    }
    a->delivered += (apr_uint64_t)(ti->delivered - a->delivered_segs)
                    * ti->snd_mss;
    a->delivered_segs = ti->delivered;
    return 1;
}

/** Tell sndbuf_path.c what this flow sees, and bring its crowd into @a s.
 *  Not on HTTP/2, whose streams share one socket. */
static void sbt_auto_path_look(sbt_auto_t *a, conn_rec *c,
                               sbt_law_sample_t *s)
{
    sbt_path_look_t lk;
    const sbt_path_crowd_t *crowd;
    int handshake;

    lk.min_rtt_us = sbt_law_own_min_rtt(s, &handshake);
    if (a->lim.shared || !s->has_delivered || handshake) {
        return;
    }
    lk.srtt_us = s->srtt_us;
    lk.rate = a->law.rate_now;
    crowd = sbt_path_look(&a->flow, c->client_addr, &lk);
    s->crowd_members = crowd->members;
    s->crowd_rate = crowd->rate;
    s->crowd_rate_then = crowd->rate_then;
    s->crowd_own_then = crowd->own_then;
    s->path_min_rtt_us = crowd->min_rtt_us;
}

/** The law's sample from TCP_INFO @a ti and the socket. */
static void sbt_auto_sample(sbt_auto_t *a, const sbt_tcp_info_t *ti,
                            sbt_sock_t *sock, conn_rec *c,
                            sbt_law_sample_t *s)
{
    memset(s, 0, sizeof(*s));
    s->now_us = sbt_clock_us();
    s->srtt_us = ti->rtt_us;
    s->rttvar_us = ti->rttvar_us;
    s->mss = ti->snd_mss;
    if ((ti->valid & SBT_TI_MIN_RTT) && (ti->valid & SBT_TI_BYTES_ACKED)) {
        s->min_rtt_us = ti->min_rtt_us;
        s->bytes_acked = ti->bytes_acked;
    }
    if (ti->valid & SBT_TI_DELIVERY) {
        s->delivery_rate = ti->delivery_rate;
        s->app_limited = ti->app_limited;
    }
    s->total_retrans = ti->total_retrans;
    s->cwnd = ti->snd_cwnd;
    s->has_chrono = (ti->valid & SBT_TI_CHRONO) != 0;
    s->sndbuf_limited_us = ti->sndbuf_limited_us;
    s->loss_based = a->loss_based;
    s->locked_at = sbt_sock_locked_at(sock);
    s->effective = s->locked_at ? -1 : sbt_sock_known_size(sock);
    s->has_delivered = sbt_auto_count(a, ti);
    s->delivered = a->delivered;
    sbt_auto_path_look(a, c, s);
}

static void sbt_auto_set_chunk(sbt_auto_t *a, const sbt_sock_t *sock)
{
    a->chunk = sbt_sock_known_size(sock) >> SBT_AUTO_CHUNK_SHIFT;
    if (a->chunk < SBT_AUTO_MIN_CHUNK) {
        a->chunk = SBT_AUTO_MIN_CHUNK;
    }
}

/** Apply the law's decision @a out to the entered connection. */
static void sbt_auto_apply(sbt_auto_t *a, sbt_conn_t *conn, conn_rec *c,
                           const sbt_law_sample_t *s, const sbt_law_out_t *out)
{
    sbt_sock_did_t did = {0};
    int cur = s->locked_at ? s->locked_at : s->effective / 2;

    a->tally.clamped |= out->clamped;
    if (out->rate_switched) {
        ap_log_cerror(APLOG_MARK, APLOG_DEBUG, 0, c, "SndbufTune auto: the "
                      "flow gets %" APR_UINT64_T_FMT " B/s against the "
                      "configured %" APR_UINT64_T_FMT " B/s: sized from the "
                      "%s rate", a->law.measured, a->lim.conf_rate,
                      a->law.rate == a->lim.conf_rate ? "configured"
                                                      : "measured");
    }
    if (out->act == SBT_LAW_KEEP) {
        return;
    }
    if (out->act == SBT_LAW_RELEASE) {
        sbt_sock_give_back(&conn->sock, &did);
    }
    else {
        sbt_sock_fix(&conn->sock, out->size, a->lim.shared, &did);
        if (out->pace && !did.call) {
            sbt_sock_pace(&conn->sock, &did);
        }
    }
    sbt_sock_tally(c, &did, &a->tally);
    a->retunes++;
    ap_log_cerror(APLOG_MARK, (out->act == SBT_LAW_RELEASE || did.paced
                              || (a->law.lifted && a->law.ramping))
                             ? APLOG_DEBUG : APLOG_TRACE1,
                  0, c, "SndbufTune auto re-tune %d: min rtt %uus srtt "
                  "%uus/%uus queue %uus rate %" APR_UINT64_T_FMT " B/s%s, "
                  "%d -> %d: %s%s: %s%s, effective %d", a->retunes,
                  a->law.min_rtt_us, s->srtt_us, s->rttvar_us, out->queue_us,
                  a->law.rate, out->limited ? ", send-buffer-limited" : "",
                  cur, out->size, out->why, out->clamped ? " (clamped)" : "",
                  did.done, did.paced ? ", and paced by the kernel from "
                  "now on (a loss-based flow its buffer holds)" : "",
                  sbt_sock_known_size(&conn->sock));
}

/** At trace3, a sample and its decision as t/unit/replay reads them, to
 *  replay a lab run's looks through the law (t/unit/looks/README). */
static void sbt_auto_trace_sample(conn_rec *c, const char *what,
                                  const sbt_law_sample_t *s,
                                  const sbt_law_out_t *out)
{
    ap_log_cerror(APLOG_MARK, APLOG_TRACE3, 0, c, "SndbufTune auto %s: "
                  "now=%" APR_INT64_T_FMT " srtt=%u rttvar=%u mss=%u "
                  "minrtt=%u acked=%" APR_UINT64_T_FMT " rate=%"
                  APR_UINT64_T_FMT " applimited=%d retrans=%u limited=%"
                  APR_UINT64_T_FMT " chrono=%d delivered=%" APR_UINT64_T_FMT
                  " hasdelivered=%d members=%d crate=%" APR_UINT64_T_FMT
                  " cthen=%" APR_UINT64_T_FMT " cown=%" APR_UINT64_T_FMT
                  " pathminrtt=%u loss=%d locked=%d tb=%d cwnd=%u act=%d "
                  "size=%d", what,
                  (apr_int64_t)s->now_us, s->srtt_us, s->rttvar_us, s->mss,
                  s->min_rtt_us, (apr_uint64_t)s->bytes_acked,
                  (apr_uint64_t)s->delivery_rate, s->app_limited,
                  s->total_retrans, (apr_uint64_t)s->sndbuf_limited_us,
                  s->has_chrono, (apr_uint64_t)s->delivered,
                  s->has_delivered, s->crowd_members,
                  (apr_uint64_t)s->crowd_rate,
                  (apr_uint64_t)s->crowd_rate_then,
                  (apr_uint64_t)s->crowd_own_then, s->path_min_rtt_us,
                  s->loss_based, s->locked_at, s->effective, s->cwnd,
                  out ? (int)out->act : -1, out ? out->size : 0);
}

/** One look at the connection, at most once per RTT. */
static void sbt_auto_look(sbt_auto_t *a, conn_rec *c)
{
    apr_int64_t now = sbt_clock_us();
    sbt_law_sample_t s;
    sbt_law_out_t out;
    sbt_tcp_info_t ti;
    sbt_conn_t *conn;
    sbt_sock_did_t did = {0};

    /* The look's socket calls (none waits on the network) run under the
     * connection's lock, so another stream's fix cannot come between what
     * is read and what is set; only its streams wait, HTTP/1 takes none. */
    if (a->stopped || now < a->next_look
        || (conn = sbt_conn_enter(c)) == NULL) {
        return;
    }
    if (!sbt_sock_info(&conn->sock, &ti, &did)
        || (!sbt_sock_locked_at(&conn->sock)
            && !sbt_sock_refresh(&conn->sock, &did))) {
        sbt_sock_tally(c, &did, &a->tally);
        a->stopped = 1;
        sbt_conn_leave(c);
        return;
    }
    sbt_auto_sample(a, &ti, &conn->sock, c, &s);
    sbt_law_look(&a->law, &a->lim, &s, &out);
    conn->rate_estimate = a->law.measured;
    a->next_look = now + (s.srtt_us > SBT_AUTO_MIN_INTERVAL
                          ? s.srtt_us : SBT_AUTO_MIN_INTERVAL);
    ap_log_cerror(APLOG_MARK, APLOG_TRACE2, 0, c, "SndbufTune auto look: "
                  "min rtt %uus%s srtt %uus rttvar %uus measured %"
                  APR_UINT64_T_FMT " B/s, delivering %" APR_UINT64_T_FMT
                  " B/s%s%s%s; %d more at its RTT delivering %" APR_UINT64_T_FMT
                  " B/s (%" APR_UINT64_T_FMT " at its peak), locked at %d, tb "
                  "%d: %s", a->law.min_rtt_us,
                  a->law.from_handshake ? " (handshake)" : "", s.srtt_us,
                  s.rttvar_us, a->law.measured, a->law.rate_now,
                  out.limited ? ", send-buffer-limited" : "",
                  a->law.ramping ? ", ramping" : "",
                  out.contested ? ", contested (steering cost delivery)"
                  : out.excused ? ", in a crowd that took its share" : "",
                  out.crowd, (apr_uint64_t)s.crowd_rate,
                  (apr_uint64_t)s.crowd_rate_then, s.locked_at, s.effective,
                  out.why);
    sbt_auto_trace_sample(c, "look", &s, &out);
    sbt_auto_apply(a, conn, c, &s, &out);
    sbt_auto_set_chunk(a, &conn->sock);
    sbt_conn_leave(c);
}

/** The response has ended (its pool goes, after write completion): its
 *  flow's slot is free. */
static apr_status_t sbt_auto_leave_path(void *data)
{
    sbt_auto_t *a = data;

    sbt_path_leave(&a->flow);
    return APR_SUCCESS;
}

sbt_auto_t *sbt_auto_begin(request_rec *r, const sbt_req_t *rq,
                           sbt_conn_t *conn, const char **done)
{
    sbt_auto_t *a;
    sbt_sock_did_t did = {0};
    sbt_law_sample_t s;

    if (!(rq->start.valid & SBT_TI_BASE)) {
        *done = "no TCP_INFO, socket left as it was";
        return NULL;
    }
    a = apr_pcalloc(r->pool, sizeof(*a));
    a->flush = !rq->shared && !sbt_async_mpm;
    sbt_auto_limits(&a->lim, rq);
    sbt_sock_resolve(&conn->sock, &did);
    sbt_sock_tally(r->connection, &did, &a->tally);
    a->loss_based = sbt_sock_loss_based(&conn->sock);
    a->delivered_segs = rq->start.delivered;
    sbt_auto_sample(a, &rq->start, &conn->sock, r->connection, &s);
    sbt_law_begin(&a->law, &a->lim, &s, conn->rate_estimate);
    ap_log_cerror(APLOG_MARK, APLOG_TRACE3, 0, r->connection,
                  "SndbufTune auto limits: min=%d max=%d conf=%"
                  APR_UINT64_T_FMT " shared=%d wmem_max=%u wmem1=%u "
                  "wmem2=%u norelease=%d estimate=%" APR_UINT64_T_FMT,
                  a->lim.limit_min, a->lim.limit_max,
                  (apr_uint64_t)a->lim.conf_rate, a->lim.shared,
                  a->lim.wmem_max, a->lim.tcp_wmem_initial,
                  a->lim.tcp_wmem_max, a->lim.no_release, conn->rate_estimate);
    sbt_auto_trace_sample(r->connection, "begin", &s, NULL);
    sbt_auto_set_chunk(a, &conn->sock);
    /* Ramping: the first look an RTT on; else with the first chunk. */
    a->next_look = s.now_us;
    if (a->law.ramping) {
        a->next_look += a->law.min_rtt_us > SBT_AUTO_MIN_INTERVAL
                        ? a->law.min_rtt_us : SBT_AUTO_MIN_INTERVAL;
    }
    if (!rq->shared && sbt_async_mpm) {
        sbt_conn_follow(conn, a, r->pool);
    }
    apr_pool_cleanup_register(r->pool, a, sbt_auto_leave_path,
                              apr_pool_cleanup_null);
    *done = apr_psprintf(r->pool, "%s; rtt %uus%s, rate %" APR_UINT64_T_FMT
                         " B/s (%s), %s congestion control%s",
                         a->law.ramping ? "left to autotuning while the rate "
                                          "ramps up"
                                        : "sized from the rate and RTT",
                         a->law.min_rtt_us,
                         a->law.from_handshake ? " (handshake)" : "",
                         a->law.rate,
                         rq->d.tune.rate ? "configured"
                         : conn->rate_estimate ? "measured earlier"
                         : "to be measured",
                         a->loss_based ? "loss-based" : "model-based",
                         a->flush ? "; chunks flushed" : "");
    return a;
}

void sbt_auto_end(const sbt_auto_t *a, sbt_auto_outcome_t *o)
{
    o->rtt_us = a->law.min_rtt_us;
    o->rate = a->law.rate;
    o->retunes = a->retunes;
    o->tally = a->tally;
}

/** The first bucket past @a left bytes, split off if needed (@a left
 *  becomes 0), or the sentinel (@a left keeps what is missing).  Buckets
 *  of unknown length (pipes, sockets) count as empty: reading blocks. */
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

/** Is the data in @a bb all files the core will sendfile (1), or not (0)?
 *  -1: no data to tell by (a cut at a brigade's end). */
static int sbt_auto_only_sendfile(conn_rec *c, apr_bucket_brigade *bb)
{
    apr_bucket *e;
    int files = 0;

    for (e = APR_BRIGADE_FIRST(bb); e != APR_BRIGADE_SENTINEL(bb);
         e = APR_BUCKET_NEXT(e)) {
        if (APR_BUCKET_IS_METADATA(e)) {
            continue;
        }
        if (!APR_BUCKET_IS_FILE(e)
            || !(apr_file_flags_get(((apr_bucket_file *)e->data)->fd)
                 & APR_SENDFILE_ENABLED)) {
            return 0;
        }
        files++;
    }
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 102)
    if (files && ap_ssl_conn_is_ssl(c)) {
        return 0;
    }
#else
    (void)c;
#endif
    return files ? 1 : -1;
}

apr_status_t sbt_auto_pass(ap_filter_t *f, sbt_auto_t *a,
                           apr_bucket_brigade *bb)
{
    apr_off_t left;
    apr_bucket *cut;
    apr_status_t rv;
    int only_sendfile;

    while (!a->handed_over) {
        left = a->chunk - a->pending;
        cut = sbt_auto_cut(bb, &left);
        if (cut == APR_BRIGADE_SENTINEL(bb) && left > 0) {
            a->pending = a->chunk - left;
            break;
        }
        if (!a->rest) {
            /* Not bb->p: whoever made bb may clear that pool earlier. */
            a->rest = apr_brigade_create(f->r->pool, f->c->bucket_alloc);
        }
        apr_brigade_split_ex(bb, cut, a->rest);
        if (a->flush) {
            /* Flushed: control comes back while the kernel holds the rest. */
            APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_flush_create(
                                            f->c->bucket_alloc));
        }
        rv = ap_pass_brigade(f->next, bb);
        apr_brigade_cleanup(bb);
        APR_BRIGADE_CONCAT(bb, a->rest);
        if (rv != APR_SUCCESS) {
            return rv;
        }
        a->pending = 0;
        sbt_auto_look(a, f->c);
        /* Event MPM: once the socket is full the core sets sendfile
         * buckets aside for the MPM (resume_connection looks); data in
         * memory it writes in blocking mode anyway: keep cutting it. */
        if (!a->flush && !a->lim.shared && f->c->data_in_output_filters
            && (only_sendfile = sbt_auto_only_sendfile(f->c, bb)) >= 0) {
            a->handed_over = only_sendfile;
            if (!a->handed_over && !a->said_kept) {
                a->said_kept = 1;
                ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, f->r,
                              "SndbufTune auto: the rest of this response is "
                              "not a file sent with sendfile (EnableSendfile "
                              "Off, TLS or generated), so the core writes it "
                              "in blocking mode: the worker stays with it and "
                              "auto goes on looking");
            }
        }
    }
    if (!APR_BRIGADE_EMPTY(bb) && APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(bb))) {
        ap_remove_output_filter(f);
    }
    return ap_pass_brigade(f->next, bb);
}

/** Event MPM, write completion: a worker resumes a drained connection. */
static void sbt_auto_resume_connection(conn_rec *c, request_rec *r)
{
    sbt_auto_t *a;

    (void)r;
    if (!c->master && c->cs && c->cs->state == CONN_STATE_WRITE_COMPLETION
        && (a = sbt_conn_draining(c)) != NULL) {
        sbt_auto_look(a, c);
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
    /* Write completion calls no request filter: a connection resumed on
     * a worker is auto's only moment to look before the core writes. */
    ap_hook_resume_connection(sbt_auto_resume_connection, NULL, NULL,
                              APR_HOOK_MIDDLE);
}
