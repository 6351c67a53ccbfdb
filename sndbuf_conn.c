/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_conn.c: a primary connection's state (sbt_conn_t) and the lock
 * its HTTP/2 streams take on it.  The hooks (mod_sndbuf_tune.c) and auto
 * (sndbuf_auto.c) both enter it here, so neither calls the other.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "ap_listen.h"

#include "apr_strings.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/** A listener core's SendBufferSize locked: every socket it accepts
 *  starts with its buffer (sk_sndbuf and the lock are copied). */
typedef struct {
    apr_sockaddr_t *addr;
    int effective;              /**< getsockopt(SO_SNDBUF) of the listener */
} sbt_listener_t;

/* Read in post_config, before the children fork; they only read them. */
static apr_array_header_t *sbt_locked_listeners;
static const char *sbt_sendbuffersize_line;

static sbt_conn_t *sbt_conn_get(const conn_rec *c)
{
    return ap_get_module_config((c->master ? c->master : c)->conn_config,
                                &sndbuf_tune_module);
}

sbt_conn_t *sbt_conn_enter(conn_rec *c)
{
    sbt_conn_t *conn = sbt_conn_get(c);

    if (!conn) {
        return NULL;
    }
#if APR_HAS_THREADS
    /* HTTP/1 takes no lock: one thread at a time.  A stream of a
     * connection whose lock could not be made is left alone. */
    if (conn->mutex ? apr_thread_mutex_lock(conn->mutex) != APR_SUCCESS
                    : c->master != NULL) {
        return NULL;
    }
#endif
    /* The event MPM may close the socket before the last response is
     * logged (a write completion that timed out). */
    sbt_sock_attach(&conn->sock, conn->csd);
    return conn;
}

void sbt_conn_leave(conn_rec *c)
{
#if APR_HAS_THREADS
    sbt_conn_t *conn = sbt_conn_get(c);

    if (conn && conn->mutex) {
        apr_thread_mutex_unlock(conn->mutex);
    }
#else
    (void)c;
#endif
}

/** What a request pool's cleanup needs to stop following its response. */
typedef struct {
    sbt_conn_t *conn;
    const sbt_auto_t *au;
} sbt_follow_t;

static apr_status_t sbt_conn_unfollow(void *data)
{
    const sbt_follow_t *f = data;

    /* A later response may have been followed since (pipelining). */
    if (f->conn->draining == f->au) {
        f->conn->draining = NULL;
    }
    return APR_SUCCESS;
}

void sbt_conn_follow(sbt_conn_t *conn, sbt_auto_t *au, apr_pool_t *pool)
{
    conn->draining = au;
    if (au) {
        sbt_follow_t *f = apr_palloc(pool, sizeof(*f));

        *f = (sbt_follow_t){conn, au};
        apr_pool_cleanup_register(pool, f, sbt_conn_unfollow,
                                  apr_pool_cleanup_null);
    }
}

sbt_auto_t *sbt_conn_draining(conn_rec *c)
{
    sbt_conn_t *conn = sbt_conn_get(c);

    return conn ? conn->draining : NULL;
}

/** Give @a c's state its own lock, in the primary connection's thread (its
 *  pool is not for other threads) and before any stream exists. */
static void sbt_conn_make_mutex(conn_rec *c)
{
#if APR_HAS_THREADS
    sbt_conn_t *conn = sbt_conn_get(c);
    apr_status_t rv;

    if (!conn || conn->mutex) {
        return;
    }
    rv = apr_thread_mutex_create(&conn->mutex, APR_THREAD_MUTEX_DEFAULT,
                                 c->pool);
    if (rv != APR_SUCCESS) {
        conn->mutex = NULL;     /* APR does not say what a failure leaves */
        ap_log_cerror(APLOG_MARK, APLOG_DEBUG, rv, c, "SndbufTune: no "
                      "lock for this connection: its HTTP/2 streams are "
                      "left alone");
    }
#else
    (void)c;
#endif
}

/** HTTP/2 by ALPN (to an SNI vhost whose Protocols differ from the
 *  address's default) or by an h2c Upgrade: the primary's thread, just
 *  before mod_http2 starts the session.  Never takes the switch. */
static int sbt_conn_protocol_switch(conn_rec *c, request_rec *r,
                                    server_rec *s, const char *protocol)
{
    (void)r; (void)s;
    if (!c->master && (!strcmp(protocol, "h2") || !strcmp(protocol, "h2c"))) {
        sbt_conn_make_mutex(c);
    }
    return DECLINED;
}

/** The buffer @a c's listener locked it at (getsockopt's figure), or 0:
 *  known without a system call. */
static int sbt_conn_listener_lock(const conn_rec *c)
{
    const sbt_listener_t *l;
    int i;

    if (!sbt_locked_listeners) {
        return 0;
    }
    l = (const sbt_listener_t *)sbt_locked_listeners->elts;
    for (i = 0; i < sbt_locked_listeners->nelts; i++) {
        if (l[i].addr->port == c->local_addr->port
            && (apr_sockaddr_is_wildcard(l[i].addr)
                || apr_sockaddr_equal(l[i].addr, c->local_addr))) {
            return l[i].effective;
        }
    }
    return 0;
}

static int sbt_conn_pre_connection(conn_rec *c, void *csd)
{
    sbt_conn_t *conn;

    /* HTTP/2 streams use their primary's state; proxy backends are not
     * ours to tune. */
    if (c->master) {
        return DECLINED;
    }
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 116)
    if (c->outgoing) {
        return DECLINED;
    }
#endif
    conn = apr_pcalloc(c->pool, sizeof(*conn));
    conn->csd = csd;
    sbt_sock_init(&conn->sock, csd, sbt_conn_listener_lock(c));
    ap_set_module_config(c->conn_config, &sndbuf_tune_module, conn);
    /* Prior-knowledge h2c and ALPN h2 to the address's default vhost
     * pass no protocol switch before their streams start. */
    if (ap_is_allowed_protocol(c, NULL, c->base_server, "h2")
        || ap_is_allowed_protocol(c, NULL, c->base_server, "h2c")) {
        sbt_conn_make_mutex(c);
    }
    return DECLINED;
}

const char *sbt_conn_sendbuffersize_line(void)
{
    return sbt_sendbuffersize_line;
}

/** The last SendBufferSize of the configuration (it is global: the last
 *  one wins), as "file:line", or NULL. */
static const char *sbt_find_sendbuffersize(apr_pool_t *p,
                                           const ap_directive_t *d)
{
    const char *at = NULL, *inner;

    for (; d; d = d->next) {
        if (!ap_cstr_casecmp(d->directive, "SendBufferSize")) {
            at = apr_psprintf(p, "%s:%d", d->filename, d->line_num);
        }
        if ((inner = sbt_find_sendbuffersize(p, d->first_child)) != NULL) {
            at = inner;
        }
    }
    return at;
}

/** Each listener core's SendBufferSize locked, read from the socket
 *  itself, and a warning for it: its sockets start without autotuning. */
static void sbt_conn_read_listeners(apr_pool_t *pconf, server_rec *s)
{
    ap_listen_rec *lr;

    sbt_sendbuffersize_line = sbt_find_sendbuffersize(pconf, ap_conftree);
    for (lr = ap_listeners; lr; lr = lr->next) {
        sbt_listener_t *l;
        int size = sbt_sock_listener_locked(lr->sd);

        if (!size) {
            continue;
        }
        if (!sbt_locked_listeners) {
            sbt_locked_listeners = apr_array_make(pconf, 2, sizeof(*l));
        }
        l = apr_array_push(sbt_locked_listeners);
        l->addr = lr->bind_addr;
        l->effective = size;
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, "listener %pI: "
                     "its send buffer is locked at %d bytes (core "
                     "SendBufferSize%s%s), so every socket it accepts "
                     "starts without kernel autotuning; SndbufTune overrides "
                     "it per request (unset gives autotuning back), where "
                     "none applies it stays: consider removing "
                     "SendBufferSize", lr->bind_addr, size,
                     sbt_sendbuffersize_line ? " at " : "",
                     sbt_sendbuffersize_line ? sbt_sendbuffersize_line : "");
    }
}

static int sbt_conn_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                                apr_pool_t *ptemp, server_rec *s)
{
    (void)plog; (void)ptemp;
    /* Statics outlive nothing: a restart reloads this module. */
    sbt_locked_listeners = NULL;
    sbt_sendbuffersize_line = NULL;
    /* Once per start or restart, not again in the preflight pass. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        sbt_conn_read_listeners(pconf, s);
    }
    return OK;
}

void sbt_conn_register_hooks(void)
{
    /* The listeners are open (the MPM's open_logs) and the children not
     * yet forked: they inherit what was read. */
    ap_hook_post_config(sbt_conn_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Made in the connection's thread: streams never allocate from c->pool. */
    ap_hook_pre_connection(sbt_conn_pre_connection, NULL, NULL,
                           APR_HOOK_MIDDLE);
    /* FIRST: the lock is made before mod_http2 (MIDDLE) takes the switch. */
    ap_hook_protocol_switch(sbt_conn_protocol_switch, NULL, NULL,
                            APR_HOOK_FIRST);
}
