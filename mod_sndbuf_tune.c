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
    sbt_conn_t *st = sbt_conn_get(primary);
    const char *done;
    int asked = -1;

    if (st->fd < 0) {
        done = "no socket, nothing done";
    }
    else if (d->tune.policy == SBT_POLICY_FIXED) {
        asked = d->tune.size;
        done = sbt_apply_fixed(r, st, asked, shared);
    }
    else if (d->tune.policy == SBT_POLICY_UNSET) {
        done = sbt_apply_unset(r, st, shared);
    }
    else {
        done = sbt_auto_start(r, d, st, shared, &asked);
    }
    sbt_note(r, SBT_NOTE_POLICY, sbt_policy_names[d->tune.policy]);
    sbt_note(r, SBT_NOTE_RULE, d->tune.rule);
    sbt_note_num(r, SBT_NOTE_REQUESTED, asked);
    sbt_note_num(r, SBT_NOTE_EFFECTIVE, st->fd < 0 ? -1 : st->effective);
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                  "SndbufTune %s for %s%s by %s: %s; effective %d",
                  sbt_policy_names[d->tune.policy],
                  r->server->server_hostname,
                  shared ? " (HTTP/2 stream)" : "", d->tune.rule, done,
                  st->effective);
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

static void sbt_warn_kernel_limits(server_rec *s)
{
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
        sbt_warn_kernel_limits(s);
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
    sbt_auto_register_hooks();
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
