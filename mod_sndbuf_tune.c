/* SPDX-License-Identifier: Apache-2.0 */

/*
 * mod_sndbuf_tune.c: a TCP send buffer per vhost, location and client
 * network (README.md, "Why"), decided per request once the name-based
 * vhost and the file are known; nearest scope wins, and where nothing
 * applies the socket is left alone.  HTTP/2 streams share their primary's
 * socket: there the largest size any stream asks for wins for the
 * connection's life.  Here: the hooks, the per-request state and the
 * response's figures (TCP_INFO at its start and end).
 */

/* First: APR's ring macros (APR_BRIGADE_*) take offsetof from here, or
 * else compute it through a null pointer (clang's -Wextra warns, UBSan
 * reports it). */
#include <stddef.h>

#include "httpd.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"

/* Per-request notes and environment variables (LogFormat %{..}n/%{..}e,
 * mod_headers).  The decision, set before the handler runs (in the
 * environment too: mod_headers, CGI and SSI act before it is out): */
#define SBT_NOTE_POLICY     "SNDBUF_TUNE_POLICY"
#define SBT_NOTE_REQUESTED  "SNDBUF_TUNE_REQUESTED"
#define SBT_NOTE_EFFECTIVE  "SNDBUF_TUNE_EFFECTIVE"
#define SBT_NOTE_RULE       "SNDBUF_TUNE_RULE"
/* The outcome, set once the response is written (log_transaction), when
 * REQUESTED and EFFECTIVE are brought up to date too. */
#define SBT_NOTE_RTT        "SNDBUF_TUNE_RTT_US"
#define SBT_NOTE_BW         "SNDBUF_TUNE_BW_BPS"
#define SBT_NOTE_RETUNES    "SNDBUF_TUNE_RETUNES"
#define SBT_NOTE_LIMITED_MS "SNDBUF_TUNE_SNDBUF_LIMITED_MS"
#define SBT_NOTE_DELIVERY   "SNDBUF_TUNE_DELIVERY_BPS"
#define SBT_NOTE_MIN_RTT    "SNDBUF_TUNE_MIN_RTT_US"
#define SBT_NOTE_RETRANS    "SNDBUF_TUNE_RETRANS"
/* What limited a large response (docs/status.md): the kernel's time by
 * limit (the sndbuf one is SBT_NOTE_LIMITED_MS), the goodput and the
 * verdict, one of sbt_limit_names. */
#define SBT_NOTE_RWND_MS    "SNDBUF_TUNE_RWND_LIMITED_MS"
#define SBT_NOTE_NETWORK_MS "SNDBUF_TUNE_NETWORK_MS"
#define SBT_NOTE_APP_MS     "SNDBUF_TUNE_APP_MS"
#define SBT_NOTE_GOODPUT    "SNDBUF_TUNE_GOODPUT_BPS"
#define SBT_NOTE_VERDICT    "SNDBUF_TUNE_VERDICT"

static const char *const sbt_policy_names[] = {
    "none", "unset", "fixed", "auto"
};

/* Measures the response and, for auto, carries it (sndbuf_auto.c). */
static ap_filter_rec_t *sbt_response_filter_handle;

/** The request's state (a main request on a connection of ours), or
 *  NULL. */
static sbt_req_t *sbt_req_get(request_rec *r)
{
    return ap_get_module_config(r->request_config, &sndbuf_tune_module);
}

/* Each key is added once to each table: apr_table_setn would compare it
 * with every key sharing its first four letters, all of ours.  A figure
 * nobody measured is left out: the log shows "-" for it anyway. */
static const char *sbt_num(request_rec *r, apr_int64_t v)
{
    return v >= 0 ? apr_off_t_toa(r->pool, v) : "-";
}

static void sbt_note_num(request_rec *r, const char *key, apr_int64_t v)
{
    if (v >= 0) {
        apr_table_addn(r->notes, key, sbt_num(r, v));
    }
}

/** Apply @a rq's fixed or unset policy to @a conn's socket; auto waits
 *  for the response's first bytes. */
static const char *sbt_apply(request_rec *r, sbt_req_t *rq,
                             sbt_conn_t *conn)
{
    sbt_sock_did_t did = {0};

    if (!sbt_sock_open(&conn->sock)) {
        return "no socket, nothing done";
    }
    if (rq->d.tune.policy == SBT_POLICY_FIXED) {
        sbt_sock_fix(&conn->sock, rq->d.tune.size, rq->shared, &did);
        rq->own_size = did.call ? 0 : rq->d.tune.size;
    }
    else if (rq->d.tune.policy == SBT_POLICY_UNSET) {
        sbt_sock_unset(&conn->sock, rq->shared, &did);
    }
    else {
        return "auto sizes the response once it is larger than the "
               "buffer in force";
    }
    sbt_sock_tally(r->connection, &did, &rq->tally);
    return did.done;
}

/** REQUESTED: the SO_SNDBUF argument in force, or 0.  An HTTP/2 stream
 *  says what its own policy set: another stream's size may hold the
 *  connection's socket, which its EFFECTIVE shows (auto sizes the
 *  connection, so its stream says what is in force). */
static int sbt_requested(const sbt_req_t *rq, const sbt_sock_t *sock)
{
    if (rq->shared && rq->d.tune.policy != SBT_POLICY_AUTO) {
        return rq->own_size;
    }
    return sbt_sock_locked_at(sock);
}

/** The decision's notes: @a policy, the line that said it (@a said,
 *  or NULL where none did) and, where known, REQUESTED (0: none) and
 *  EFFECTIVE (-1: unknown) as the socket stands. */
static void sbt_note_decision(request_rec *r, sbt_policy_e policy,
                              const sbt_setting_t *said, int requested,
                              int effective)
{
    apr_table_t *env = r->subprocess_env;

    apr_table_addn(env, SBT_NOTE_POLICY, sbt_policy_names[policy]);
    if (requested > 0) {
        apr_table_addn(env, SBT_NOTE_REQUESTED, sbt_num(r, requested));
    }
    if (effective >= 0) {
        apr_table_addn(env, SBT_NOTE_EFFECTIVE, sbt_num(r, effective));
    }
    apr_table_addn(r->notes, SBT_NOTE_POLICY, sbt_policy_names[policy]);
    if (said && said->rule) {
        apr_table_addn(env, SBT_NOTE_RULE, said->rule_env);
        apr_table_addn(r->notes, SBT_NOTE_RULE, said->rule);
    }
}

static int sbt_has_response_filter(request_rec *r)
{
    ap_filter_t *f;

    for (f = r->output_filters; f; f = f->next) {
        if (f->frec == sbt_response_filter_handle) {
            return 1;
        }
    }
    return 0;
}

/** An internal redirect (ErrorDocument, a per-directory RewriteRule,
 *  Action) to where no line says anything goes out on the buffer of the
 *  request it replaces, so it takes that one's policy (FALSE: none had). */
static int sbt_redirected_from(request_rec *r, sbt_decision_t *d)
{
    const sbt_req_t *prev;

    for (r = r->prev; r; r = r->prev) {
        if ((prev = sbt_req_get(r)) != NULL
            && prev->d.tune.policy != SBT_POLICY_NONE) {
            *d = prev->d;
            return 1;
        }
    }
    return 0;
}

static void sbt_insert_filter(request_rec *r)
{
    conn_rec *c = r->connection;
    sbt_decision_t d;
    sbt_conn_t *conn;
    sbt_req_t *rq;
    const char *done;
    int inherited = 0;

    /* A subrequest's socket and policy are its main request's. */
    if (r->main) {
        return;
    }
    /* A "SndbufTune none" said here leaves the socket be, redirect or not. */
    if (!sbt_decide(r, &d) && !d.tune.rule) {
        inherited = sbt_redirected_from(r, &d);
    }
    if ((conn = sbt_conn_enter(c)) == NULL) {
        sbt_note_decision(r, SBT_POLICY_NONE, NULL, 0, -1);
        return;
    }
    rq = apr_pcalloc(r->pool, sizeof(*rq));
    rq->d = d;
    rq->tally.clamped = d.clamped;
    rq->shared = c->master != NULL;
    ap_set_module_config(r->request_config, &sndbuf_tune_module, rq);
    if (d.tune.policy == SBT_POLICY_NONE) {
        sbt_note_decision(r, SBT_POLICY_NONE, &d.tune, 0, -1);
    }
    else {
        /* This response takes the socket over from any before it (HTTP/1:
         * only the primary's own thread follows a response it drains). */
        if (!rq->shared) {
            sbt_conn_follow(conn, NULL, NULL);
        }
        done = sbt_apply(r, rq, conn);
        sbt_note_decision(r, d.tune.policy, &d.tune,
                          sbt_requested(rq, &conn->sock),
                          sbt_sock_effective(&conn->sock));
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                      "SndbufTune %s for %s%s by %s%s: %s; effective %d",
                      sbt_policy_names[d.tune.policy],
                      r->server->server_hostname,
                      rq->shared ? " (HTTP/2 stream)" : "", d.tune.rule,
                      inherited ? ", the policy of the request this "
                                  "internal redirect replaces" : "", done,
                      sbt_sock_effective(&conn->sock));
    }
    /* Watched whatever the policy, "none" too: a response larger than the
     * buffer in force is measured and triaged (the size is known without
     * a system call).  No socket: nothing to watch. */
    rq->fits = sbt_sock_open(&conn->sock) ? sbt_sock_known_size(&conn->sock)
                                          : 0;
    rq->watching = rq->fits > 0;
    sbt_conn_leave(c);

    /* An internal redirect keeps the filter of the request it replaces
     * (it runs after the protocol filters); it serves this one now. */
    if (!r->prev || !sbt_has_response_filter(r)) {
        ap_add_output_filter_handle(sbt_response_filter_handle, NULL, r, c);
    }
}

/** A response that has outgrown the buffer in force: the baseline of
 *  its figures (one system call) and, for auto, its controller. */
static void sbt_response_begin(request_rec *r, sbt_req_t *rq)
{
    sbt_conn_t *conn = sbt_conn_enter(r->connection);
    const char *done = NULL;
    sbt_sock_did_t did = {0};    /* no figures: nothing to count */

    if (!conn) {
        return;
    }
    rq->measured = 1;
    /* Read now, not taken from the previous response's end: that was
     * logged when its last bytes reached the kernel, which may still be
     * sending (and retransmitting) them when this one starts. */
    sbt_sock_info(&conn->sock, &rq->start, &did);
    rq->began = sbt_clock_us();
    if (!conn->opened_at) {
        conn->opened = rq->start;
        conn->opened_at = rq->began;
    }
    if (rq->d.tune.policy == SBT_POLICY_AUTO) {
        rq->au = sbt_auto_begin(r, rq, conn, &done);
    }
    sbt_conn_leave(r->connection);
    if (done) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SndbufTune auto: %s",
                      done);
    }
}

/** Watch the response go by (the headers come in a brigade of their own)
 *  until it ends within the buffer in force, or outgrows it. */
static apr_status_t sbt_response_filter(ap_filter_t *f,
                                        apr_bucket_brigade *bb)
{
    /* f->r: after an internal redirect, the request that replaced the
     * one the filter was added for, whose policy now applies. */
    sbt_req_t *rq = sbt_req_get(f->r);
    apr_off_t len;

    if (rq && rq->watching) {
        /* -1: a bucket of unknown length (not read here: it may block). */
        apr_brigade_length(bb, 0, &len);
        if (len < 0 || (rq->passed += len) > rq->fits) {
            rq->watching = 0;
            sbt_response_begin(f->r, rq);
        }
        else {
            /* At its end it fitted: never limited by the buffer, no
             * figures, no system call (and no call to remove this). */
            rq->watching = APR_BRIGADE_EMPTY(bb)
                           || !APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(bb));
            return ap_pass_brigade(f->next, bb);
        }
    }
    if (rq && rq->au) {
        return sbt_auto_pass(f, rq->au, bb);
    }
    ap_remove_output_filter(f);
    return ap_pass_brigade(f->next, bb);
}

/** Where the figures of @a rq's response start: its own start, or that
 *  of a response begun earlier and still open, but not before what
 *  earlier responses counted (sbt_conn_t.counted). */
static apr_int64_t sbt_response_base(const sbt_conn_t *conn,
                                     const sbt_req_t *rq, sbt_tcp_info_t *base)
{
    apr_int64_t at = rq->began;

    *base = rq->start;
    if (conn->opened_at && conn->opened_at < at) {
        *base = conn->opened;
        at = conn->opened_at;
    }
    if (conn->counted_at > at) {
        *base = conn->counted;
        at = conn->counted_at;
    }
    return at;
}

/** The send buffer in force at the end for the triage (the kernel's
 *  figure: twice the size set), and where it came from; autotuning's
 *  ceiling where no lock holds it (known without a system call). */
static void sbt_buffer_in_force(const sbt_sock_t *sock, sbt_policy_e policy,
                                sbt_outcome_t *o)
{
    int locked = sbt_sock_locked_at(sock);
    int effective = sbt_sock_effective(sock);

    if (!locked) {
        o->buf_from = SBT_BUF_AUTOTUNING;
        o->buffer = sbt_kernel.tcp_wmem[2];
        return;
    }
    o->buf_from = sbt_sock_state(sock) == SBT_SOCK_LOCKED ? SBT_BUF_LISTENER
                : policy == SBT_POLICY_AUTO ? SBT_BUF_AUTO
                : SBT_BUF_SNDBUFTUNE;
    o->buffer = effective > 0 ? (apr_uint64_t)effective
                              : 2 * (apr_uint64_t)locked;
}

/** @a e's counter @a f less @a s's, or -1 if it went back (no counter of
 *  a socket does: a sign of figures that do not belong together). */
#define SBT_DIFF(e, s, f) ((e)->f >= (s)->f ? (apr_int64_t)((e)->f - (s)->f) \
                                            : -1)

/** The triage of the figures from @a s (read at @a s_at) to @a e. */
static void sbt_judge(const sbt_tcp_info_t *s, apr_int64_t s_at,
                      const sbt_tcp_info_t *e, apr_int64_t e_at,
                      sbt_outcome_t *o)
{
    sbt_triage_in_t in = {0};
    apr_int64_t busy = SBT_DIFF(e, s, busy_us);
    apr_int64_t sndbuf = SBT_DIFF(e, s, sndbuf_limited_us);
    apr_int64_t rwnd = SBT_DIFF(e, s, rwnd_limited_us);

    in.elapsed_us = e_at - s_at;
    in.chrono = (e->valid & s->valid & SBT_TI_CHRONO) && busy >= 0
                && sndbuf >= 0 && rwnd >= 0;
    in.busy_us = (apr_uint64_t)busy;
    in.sndbuf_us = (apr_uint64_t)sndbuf;
    in.rwnd_us = (apr_uint64_t)rwnd;
    if (e->valid & s->valid & SBT_TI_BYTES_ACKED) {
        in.acked = e->bytes_acked - s->bytes_acked;
    }
    if (e->valid & SBT_TI_BASE) {
        in.srtt_us = e->rtt_us;
        in.mss = e->snd_mss;
        in.cwnd = e->snd_cwnd;
    }
    if (e->valid & SBT_TI_SND_WND) {
        in.snd_wnd = e->snd_wnd;
    }
    in.buffer = o->buffer;
    sbt_triage(&in, &o->triage);
    o->srtt_us = in.srtt_us;
    o->sndbuf_limited = in.chrono && sndbuf * 10 > in.elapsed_us;
}

static void sbt_note_ms(request_rec *r, const char *key, apr_uint64_t us)
{
    sbt_note_num(r, key, (apr_int64_t)(us / 1000));
}

/** The figures the kernel kept over the response, from @a s (read at
 *  @a s_at) to @a e (at @a e_at), and its triage, as notes. */
static void sbt_note_figures(request_rec *r, const sbt_tcp_info_t *s,
                             apr_int64_t s_at, const sbt_tcp_info_t *e,
                             apr_int64_t e_at, sbt_outcome_t *o)
{
    const sbt_triage_t *t = &o->triage;

    sbt_judge(s, s_at, e, e_at, o);
    if (t->verdict != SBT_VERDICT_UNKNOWN) {
        sbt_note_ms(r, SBT_NOTE_LIMITED_MS, t->us[SBT_LIMIT_SNDBUF]);
        sbt_note_ms(r, SBT_NOTE_RWND_MS, t->us[SBT_LIMIT_RWND]);
        sbt_note_ms(r, SBT_NOTE_NETWORK_MS, t->us[SBT_LIMIT_NETWORK]);
        sbt_note_ms(r, SBT_NOTE_APP_MS, t->us[SBT_LIMIT_APP]);
    }
    if (t->goodput) {
        sbt_note_num(r, SBT_NOTE_GOODPUT, (apr_int64_t)t->goodput);
    }
    if (t->verdict != SBT_VERDICT_SHORT) {
        apr_table_addn(r->notes, SBT_NOTE_VERDICT,
                       sbt_limit_names[t->verdict]);
    }
    ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, "SndbufTune triage: "
                  "%s (%s): elapsed=%" APR_INT64_T_FMT " busy=%"
                  APR_UINT64_T_FMT " sndbuf=%" APR_UINT64_T_FMT " rwnd=%"
                  APR_UINT64_T_FMT " acked=%" APR_UINT64_T_FMT " srtt=%u "
                  "mss=%u cwnd=%u wnd=%u buffer=%" APR_UINT64_T_FMT " from=%d "
                  "unacked=%u notsent=%u applimited=%d",
                  sbt_limit_names[t->verdict], t->why, e_at - s_at,
                  e->busy_us - s->busy_us,
                  e->sndbuf_limited_us - s->sndbuf_limited_us,
                  e->rwnd_limited_us - s->rwnd_limited_us,
                  e->bytes_acked - s->bytes_acked, e->rtt_us, e->snd_mss,
                  e->snd_cwnd, e->snd_wnd, o->buffer, (int)o->buf_from,
                  e->unacked, e->notsent, e->app_limited);
    if (e->valid & SBT_TI_DELIVERY) {
        sbt_note_num(r, SBT_NOTE_DELIVERY, (apr_int64_t)e->delivery_rate * 8);
    }
    if (e->valid & SBT_TI_MIN_RTT) {
        sbt_note_num(r, SBT_NOTE_MIN_RTT, e->min_rtt_us);
    }
    if (e->valid & s->valid & SBT_TI_BASE) {
        sbt_note_num(r, SBT_NOTE_RETRANS, SBT_DIFF(e, s, total_retrans));
    }
}

/** The outcome of @a rq's response: its figures, and auto's. */
static void sbt_note_outcome(request_rec *r, sbt_req_t *rq, sbt_outcome_t *o)
{
    sbt_conn_t *conn;
    sbt_auto_outcome_t ao = {0};
    sbt_tcp_info_t start = {0}, end = {0};
    apr_int64_t start_at = 0, end_at = 0;
    sbt_sock_did_t did = {0};
    int requested;

    /* None, and it fitted: nothing to note, nothing to ask the socket. */
    if (!rq->measured && rq->d.tune.policy == SBT_POLICY_NONE) {
        return;
    }
    if (rq->au) {
        sbt_auto_end(rq->au, &ao);
    }
    if ((conn = sbt_conn_enter(r->connection)) == NULL) {
        return;
    }
    if (rq->measured && !sbt_sock_open(&conn->sock)) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SndbufTune: the "
                      "socket was closed before the response was logged; "
                      "no figures for its end");
    }
    else if (rq->measured) {
        /* The end: one system call, and its part of the connection's
         * figures counted (sbt_response_base). */
        sbt_sock_info(&conn->sock, &end, &did);
        end_at = sbt_clock_us();
        start_at = sbt_response_base(conn, rq, &start);
        if (end.valid) {
            conn->counted = end;
            conn->counted_at = end_at;
        }
        conn->opened_at = 0;
        did.call = NULL;        /* figures for the notes: not counted */
        /* None asks the socket nothing more. */
        if (rq->d.tune.policy != SBT_POLICY_NONE) {
            sbt_sock_recheck(&conn->sock, &did);
        }
        o->large = 1;
        sbt_buffer_in_force(&conn->sock, rq->d.tune.policy, o);
    }
    requested = sbt_requested(rq, &conn->sock);
    if (rq->d.tune.policy != SBT_POLICY_NONE) {
        o->effective = sbt_sock_effective(&conn->sock);
    }
    sbt_conn_leave(r->connection);

    sbt_sock_tally(r->connection, &did, &rq->tally);
    o->clamped = rq->tally.clamped | ao.tally.clamped;
    o->failures = rq->tally.failures + ao.tally.failures;
    if (rq->d.tune.policy != SBT_POLICY_NONE) {
        sbt_note_num(r, SBT_NOTE_REQUESTED, requested ? requested : -1);
        sbt_note_num(r, SBT_NOTE_EFFECTIVE, o->effective);
    }
    if (o->large) {
        sbt_note_figures(r, &start, start_at, &end, end_at, o);
    }
    if (rq->au) {
        sbt_note_num(r, SBT_NOTE_RTT, ao.rtt_us);
        sbt_note_num(r, SBT_NOTE_BW, (apr_int64_t)ao.rate * 8);
        sbt_note_num(r, SBT_NOTE_RETUNES, ao.retunes);
    }
}

static int sbt_log_transaction(request_rec *r)
{
    sbt_outcome_t o = {.effective = -1};
    sbt_req_t *rq;

    /* mod_log_config logs the final request of an internal redirect
     * chain (ErrorDocument, RewriteRule [PT], ...): so do we. */
    while (r->next) {
        r = r->next;
    }
    rq = sbt_req_get(r);
    o.server = r->server;
    o.bytes_sent = r->bytes_sent;
    if (rq) {
        o.policy = rq->d.tune.policy;
        o.network = rq->d.network;
        sbt_note_outcome(r, rq, &o);
    }
    sbt_status_record(&o);
    return DECLINED;
}

static void sbt_report_kernel(apr_pool_t *p, server_rec *s)
{
    const sbt_kernel_t *k = &sbt_kernel;
    int largest = sbt_config_largest_size();
    /* A stock kernel (212992 against 4194304): autotuning reaches further
     * than any lock may, and auto's "never worse" rule applies. */
    int narrow = k->wmem_max && k->wmem_max < k->tcp_wmem[2] / 2;

    ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s, "%s%s",
                 sbt_kernel_show(p, SBT_SHOW_LOG), narrow
                 ? "; auto leaves a connection to autotuning where its path "
                   "needs more than wmem_max grants ("
                   SBT_DOCS "troubleshooting.md)"
                 : "");
    if (k->wmem_max && (apr_uint32_t)largest > k->wmem_max) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "a SndbufTune size or limit of %d exceeds "
                     "net.core.wmem_max (%u), so the kernel grants at most "
                     "%u per socket: raise the sysctl net.core.wmem_max",
                     largest, k->wmem_max, 2 * k->wmem_max);
    }
}

static int sbt_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                           apr_pool_t *ptemp, server_rec *s)
{
    (void)pconf; (void)plog;
    sbt_kernel_probe();
    /* Once per start or restart, not again in the preflight pass. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        sbt_report_kernel(ptemp, s);
        sbt_config_warn_remoteip(ptemp, s);
    }
    return OK;
}

static void sbt_register_hooks(apr_pool_t *p)
{
    (void)p;
    /* Kernel limits once the configuration is read and the listeners are
     * open (the MPM's open_logs), before children fork to inherit them. */
    ap_hook_post_config(sbt_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* insert_filter, the last hook before the handler: only now is the
     * per-dir config final, as mod_dir (DirectoryIndex) and mod_negotiation
     * (MultiViews) swap in the chosen file's in their fixups, which do not
     * run again.  Internal redirects run it for the new request too. */
    ap_hook_insert_filter(sbt_insert_filter, NULL, NULL, APR_HOOK_MIDDLE);
    /* log_transaction: the response is written (for HTTP/1 the EOR
     * bucket is gone), so the kernel's figures cover all of it.  FIRST:
     * before mod_log_config reads the notes. */
    ap_hook_log_transaction(sbt_log_transaction, NULL, NULL, APR_HOOK_FIRST);
    /* After the protocol filters (chunking included), so the bytes it
     * sees are the ones the connection filters and the socket see. */
    sbt_response_filter_handle =
        ap_register_output_filter("SNDBUF_TUNE", sbt_response_filter, NULL,
                                  AP_FTYPE_TRANSCODE + 5);
    sbt_conn_register_hooks();
    sbt_config_register_hooks();
    sbt_auto_register_hooks();
    sbt_path_register_hooks();
    sbt_status_register_hooks();
    sbt_status_page_register_hooks();
}

AP_DECLARE_MODULE(sndbuf_tune) = {
    STANDARD20_MODULE_STUFF,
    sbt_create_dir_conf,        /* SndbufTune, -Bandwidth, -Limits */
    sbt_merge_dir_conf,
    sbt_create_srv_conf,        /* SndbufTuneNetwork rules */
    sbt_merge_srv_conf,
    sbt_cmds,
    sbt_register_hooks,
    /* Every vhost gets a merged server config of its own, even one that
     * uses none of the directives: the status page counts it apart. */
    AP_MODULE_FLAG_ALWAYS_MERGE
};
