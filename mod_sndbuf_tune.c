/* SPDX-License-Identifier: Apache-2.0 */

/*
 * mod_sndbuf_tune.c: a TCP send buffer per vhost, location and client
 * network, decided per request.
 *
 * A TCP sender never has more than one send buffer in flight, so a
 * fixed SO_SNDBUF caps a download at sndbuf / RTT.  Core's
 * SendBufferSize sets one size for every socket, on the listener, and
 * on Linux that also switches kernel autotuning off.  This module
 * decides once the name-based vhost (Host:/SNI) and the location are
 * known:
 *
 *   SndbufTune <size>   fix the send buffer (setsockopt SO_SNDBUF)
 *   SndbufTune unset    leave it to kernel autotuning, undoing any lock
 *                       a listener or an earlier request left behind
 *   SndbufTune auto     size it from the connection's RTT x bandwidth
 *
 * Nearest scope wins; where nothing applies the socket is not touched.
 * HTTP/2 streams share their primary connection's socket, so there the
 * largest size any stream asks for wins for the connection's life.
 *
 * This file holds the hooks; sndbuf_tune.h lists the other files.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_main.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_cfgtree.h"
#include "ap_mmn.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"

static const char *const sbt_policy_names[] = {
    "none", "unset", "fixed", "auto"
};

static void sbt_note_none(request_rec *r)
{
    sbt_note(r, SBT_NOTE_POLICY, "none");
    sbt_note(r, SBT_NOTE_REQUESTED, "-");
    sbt_note(r, SBT_NOTE_EFFECTIVE, "-");
}

/** Apply @a d to @a primary's socket; @a shared: HTTP/2, lock held. */
static void sbt_apply(request_rec *r, const sbt_decision_t *d,
                      conn_rec *primary, int shared)
{
    sbt_req_t *rq = apr_pcalloc(r->pool, sizeof(*rq));
    const char *done;
    int asked = -1;

    rq->d = *d;
    rq->st = sbt_conn_get(primary);
    rq->started = apr_time_now();
    ap_set_module_config(r->request_config, &sndbuf_tune_module, rq);
    if (rq->st->fd < 0) {
        done = "no socket, nothing done";
    }
    else {
        /* The baseline for this response's figures (log_transaction):
         * where the previous response on this connection ended, as an
         * idle keep-alive connection adds nothing, else a fresh read
         * (on failure valid stays 0 and every figure reads "-").
         * HTTP/2 streams overlap, so they always read. */
        if (shared || !rq->st->last_end.valid) {
            sbt_sock_tcp_info(rq->st->fd, &rq->start);
        }
        else {
            rq->start = rq->st->last_end;
        }
        if (d->tune.policy == SBT_POLICY_FIXED) {
            asked = d->tune.size;
            done = sbt_apply_fixed(r, rq->st, asked, shared);
        }
        else if (d->tune.policy == SBT_POLICY_UNSET) {
            done = sbt_apply_unset(r, rq->st, shared);
        }
        else {
            done = sbt_auto_start(r, rq, shared, &asked);
        }
    }
    sbt_note(r, SBT_NOTE_POLICY, sbt_policy_names[d->tune.policy]);
    sbt_note(r, SBT_NOTE_RULE, d->tune.rule);
    sbt_note_num(r, SBT_NOTE_REQUESTED, asked);
    sbt_note_num(r, SBT_NOTE_EFFECTIVE,
                 rq->st->fd < 0 ? -1 : rq->st->effective);
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                  "SndbufTune %s for %s%s by %s: %s; effective %d",
                  sbt_policy_names[d->tune.policy],
                  r->server->server_hostname,
                  shared ? " (HTTP/2 stream)" : "", d->tune.rule, done,
                  rq->st->effective);
}

static int sbt_fixups(request_rec *r)
{
    sbt_decision_t d;
    conn_rec *c = r->connection;

    /* A subrequest's socket and policy are its main request's. */
    if (r->main) {
        return DECLINED;
    }
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 116)
    if (c->outgoing) {
        return DECLINED;
    }
#endif
    if (!sbt_decide(r, &d)) {
        sbt_note_none(r);
        return DECLINED;
    }
    if (!c->master) {
        sbt_apply(r, &d, c, 0);
    }
    /* HTTP/2: a secondary connection's socket is a dummy, and the
     * streams of one primary connection run in parallel workers. */
    else if (sbt_lock_shared()) {
        sbt_apply(r, &d, c->master, 1);
        sbt_unlock_shared();
    }
    return DECLINED;
}

/** This response's figures from the kernel, as notes; fills @a o. */
static void sbt_note_response(request_rec *r, const sbt_req_t *rq,
                              sbt_outcome_t *o)
{
    const sbt_tcp_info_t *s = &rq->start;
    sbt_tcp_info_t e;
    apr_int64_t limited = -1, retrans = -1, delivery = -1, min_rtt = -1;
    apr_time_t elapsed = apr_time_now() - rq->started;

    if (rq->st->fd >= 0 && sbt_sock_tcp_info(rq->st->fd, &e) == 0) {
        rq->st->last_end = e;
        if ((e.valid & s->valid & SBT_TI_CHRONO)) {
            limited = (apr_int64_t)(e.sndbuf_limited_us - s->sndbuf_limited_us);
            o->sndbuf_limited = limited * 10 > elapsed;
        }
        if (e.valid & s->valid & SBT_TI_BASE) {
            retrans = (apr_int64_t)e.total_retrans - s->total_retrans;
        }
        if (e.valid & SBT_TI_DELIVERY) {
            delivery = (apr_int64_t)e.delivery_rate * 8;
        }
        if (e.valid & SBT_TI_MIN_RTT) {
            min_rtt = e.min_rtt_us;
        }
    }
    if (rq->st->fd >= 0 && rq->st->state == SBT_SOCK_AUTOTUNED) {
        sbt_sock_get_sndbuf(rq->st->fd, &rq->st->effective);
    }
    o->effective = rq->st->fd >= 0 ? rq->st->effective : -1;
    sbt_auto_finish(r, rq);
    sbt_note_num(r, SBT_NOTE_LIMITED_MS, limited < 0 ? -1 : limited / 1000);
    sbt_note_num(r, SBT_NOTE_DELIVERY, delivery);
    sbt_note_num(r, SBT_NOTE_MIN_RTT, min_rtt);
    sbt_note_num(r, SBT_NOTE_RETRANS, retrans);
    sbt_note_num(r, SBT_NOTE_EFFECTIVE, o->effective);
}

static int sbt_log_transaction(request_rec *r)
{
    const sbt_req_t *rq = sbt_req_get(r);
    sbt_outcome_t o;

    memset(&o, 0, sizeof(o));
    o.server = r->server;
    o.bytes_sent = r->bytes_sent;
    o.effective = -1;
    if (rq) {
        o.policy = rq->d.tune.policy;
        o.network = rq->d.network;
        o.clamped = rq->clamped;
        o.failures = rq->failures;
        sbt_note_response(r, rq, &o);
    }
    sbt_status_record(r, &o);
    return DECLINED;
}

static int sbt_pre_config(apr_pool_t *pconf, apr_pool_t *plog,
                          apr_pool_t *ptemp)
{
    (void)pconf; (void)plog; (void)ptemp;
    /* Statics outlive a restart's re-read of the configuration. */
    sbt_largest_size = 0;
    sbt_core_sndbuf = 0;
    return OK;
}

/** Core's SendBufferSize (its own variable is private to listen.c). */
static int sbt_find_core_sndbuf(const ap_directive_t *d)
{
    int found;

    for (; d; d = d->next) {
        if (!strcasecmp(d->directive, "SendBufferSize")) {
            return atoi(d->args);
        }
        if (d->first_child
            && (found = sbt_find_core_sndbuf(d->first_child)) != 0) {
            return found;
        }
    }
    return 0;
}

static void sbt_report_kernel(server_rec *s)
{
    const sbt_kernel_t *k = &sbt_kernel;

    ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                 "kernel limits: net.core.wmem_max %u, net.ipv4.tcp_wmem "
                 "%u %u %u; SO_BUF_LOCK %s (unset %s give autotuning "
                 "back); TCP_INFO %s (auto %s)", k->wmem_max,
                 k->tcp_wmem[0], k->tcp_wmem[1], k->tcp_wmem[2],
                 k->has_buf_lock ? "available" : "missing",
                 k->has_buf_lock ? "can" : "cannot",
                 k->has_tcp_info ? "available" : "missing",
                 k->has_tcp_info ? "works" : "leaves sockets alone");
    if (sbt_core_sndbuf) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "core SendBufferSize %d locks the send buffer of every "
                     "accepted socket and switches kernel autotuning off; "
                     "SndbufTune overrides it per request (unset gives "
                     "autotuning back%s), where none applies it stays: "
                     "consider removing SendBufferSize", sbt_core_sndbuf,
                     sbt_kernel.has_buf_lock ? "" : ", but not on this "
                     "kernel, which lacks SO_BUF_LOCK");
    }
    if (sbt_kernel.wmem_max
        && (apr_uint32_t)sbt_largest_size > sbt_kernel.wmem_max) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "a SndbufTune size or limit of %d exceeds "
                     "net.core.wmem_max (%u), so the kernel grants at most "
                     "%u per socket: raise the sysctl net.core.wmem_max",
                     sbt_largest_size, sbt_kernel.wmem_max,
                     2 * sbt_kernel.wmem_max);
    }
}

static int sbt_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                           apr_pool_t *ptemp, server_rec *s)
{
    (void)pconf; (void)plog; (void)ptemp;
    sbt_kernel_probe(&sbt_kernel);
    sbt_core_sndbuf = sbt_find_core_sndbuf(ap_conftree);
    /* Once per start or restart, not again in the preflight pass. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        sbt_report_kernel(s);
    }
    return OK;
}

static void sbt_child_init(apr_pool_t *pchild, server_rec *s)
{
    sbt_socket_child_init(pchild, s);
}

static void sbt_register_hooks(apr_pool_t *p)
{
    (void)p;
    /* Reset per-read statics before the directives are parsed. */
    ap_hook_pre_config(sbt_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Kernel limits and core's SendBufferSize, once the tree is built
     * and before children fork, so they inherit the answers. */
    ap_hook_post_config(sbt_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* The HTTP/2 mutex is per process. */
    ap_hook_child_init(sbt_child_init, NULL, NULL, APR_HOOK_MIDDLE);
    /* fixups: the first point where both the name-based vhost (Host: or
     * SNI, in r->server) and the final per-dir config (<Location>) are
     * known, and still before the handler writes a byte.  Not
     * pre_connection: there only the IP-based default vhost is known,
     * and proxy backend connections pass through it too.  FIRST, so the
     * notes exist before other fixups (mod_headers' early headers, ...)
     * read them. */
    ap_hook_fixups(sbt_fixups, NULL, NULL, APR_HOOK_FIRST);
    /* log_transaction: the response is written (for HTTP/1 the EOR
     * bucket is gone), so the kernel's figures cover all of it.  FIRST:
     * before mod_log_config reads the notes. */
    ap_hook_log_transaction(sbt_log_transaction, NULL, NULL, APR_HOOK_FIRST);
    sbt_auto_register_hooks();
    sbt_status_register_hooks();
}

AP_DECLARE_MODULE(sndbuf_tune) = {
    STANDARD20_MODULE_STUFF,
    sbt_create_dir_conf,        /* SndbufTune, -Bandwidth, -Limits */
    sbt_merge_dir_conf,
    sbt_create_srv_conf,        /* SndbufTuneNetwork rules */
    sbt_merge_srv_conf,
    sbt_cmds,
    sbt_register_hooks,
#if defined(AP_MODULE_FLAG_NONE)
    AP_MODULE_FLAG_NONE
#endif
};
