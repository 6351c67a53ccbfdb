/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_socket.c: what the module does to a connection's socket, and
 * what it remembers about it so that a keep-alive connection whose next
 * request wants the same thing costs no system call.
 *
 * A failing socket call never fails the request: the socket is left as
 * it was, and the failure is logged (one warning a minute per child,
 * the rest at debug).
 */

#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"

#include "apr_atomic.h"
#include "apr_strings.h"
#include "apr_thread_mutex.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* The kernel's initial send buffer when tcp_wmem cannot be read. */
#define SBT_DEFAULT_INITIAL 16384

#define SBT_WARN_INTERVAL   60  /* seconds between warnings, per child */

sbt_kernel_t sbt_kernel;
int sbt_core_sndbuf;

#if APR_HAS_THREADS
/** Serialises the HTTP/2 streams that share a primary connection. */
static apr_thread_mutex_t *sbt_shared_mutex;
#endif

static apr_uint32_t sbt_warned_at;
static apr_uint32_t sbt_failures_hushed;

sbt_req_t *sbt_req_get(request_rec *r)
{
    return ap_get_module_config(r->request_config, &sndbuf_tune_module);
}

void sbt_log_failure(request_rec *r, int err, const char *what)
{
    apr_uint32_t now = (apr_uint32_t)apr_time_sec(apr_time_now());
    apr_uint32_t last = apr_atomic_read32(&sbt_warned_at);
    sbt_req_t *rq = sbt_req_get(r);

    if (rq) {
        rq->failures++;
    }
    if ((last == 0 || now - last >= SBT_WARN_INTERVAL)
        && apr_atomic_cas32(&sbt_warned_at, now, last) == last) {
        apr_uint32_t hushed = apr_atomic_xchg32(&sbt_failures_hushed, 0);
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, APR_FROM_OS_ERROR(err), r,
                      "%s failed, socket left as it was (%u more such "
                      "failures logged only at debug level since the last "
                      "warning)", what, hushed);
        return;
    }
    apr_atomic_inc32(&sbt_failures_hushed);
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, APR_FROM_OS_ERROR(err), r,
                  "%s failed, socket left as it was", what);
}

sbt_conn_t *sbt_conn_get(conn_rec *primary)
{
    sbt_conn_t *st = ap_get_module_config(primary->conn_config,
                                          &sndbuf_tune_module);

    /* Made on first use, so connections no policy applies to cost
     * nothing at all. */
    if (!st) {
        st = apr_palloc(primary->pool, sizeof(*st));
        st->fd = sbt_sock_fd(ap_get_conn_socket(primary));
        st->state = sbt_core_sndbuf ? SBT_SOCK_INHERITED : SBT_SOCK_AUTOTUNED;
        st->requested = 0;
        st->effective = -1;
        st->rate_estimate = 0;
        st->last_end.valid = 0;
        ap_set_module_config(primary->conn_config, &sndbuf_tune_module, st);
    }
    return st;
}

static void sbt_read_effective(sbt_conn_t *st)
{
    if (sbt_sock_get_sndbuf(st->fd, &st->effective)) {
        st->effective = -1;
    }
}

const char *sbt_apply_fixed(request_rec *r, sbt_conn_t *st, int size,
                            int shared)
{
    int rv;

    if (st->state == SBT_SOCK_FIXED && st->requested == size) {
        return "unchanged";
    }
    if (shared && st->state == SBT_SOCK_FIXED && st->requested > size) {
        return "kept the larger size of another HTTP/2 stream";
    }
    if ((rv = sbt_sock_set_sndbuf(st->fd, size)) != 0) {
        sbt_log_failure(r, rv, apr_psprintf(r->pool,
                        "setsockopt(SO_SNDBUF, %d)", size));
        return "setsockopt failed";
    }
    st->state = SBT_SOCK_FIXED;
    st->requested = size;
    sbt_read_effective(st);
    if (sbt_kernel.wmem_max && (apr_uint32_t)size > sbt_kernel.wmem_max) {
        sbt_req_t *rq = sbt_req_get(r);
        if (rq) {
            rq->clamped = 1;
        }
        return "set, capped by net.core.wmem_max";
    }
    return "set";
}

const char *sbt_apply_unset(request_rec *r, sbt_conn_t *st, int shared)
{
    int initial, restore_to, rv;

    if (st->state == SBT_SOCK_AUTOTUNED) {
        /* Autotuning moves the size under us: report the current one. */
        sbt_read_effective(st);
        return "autotuning";
    }
    if (shared && st->state == SBT_SOCK_FIXED) {
        return "kept the fixed size of another HTTP/2 stream";
    }
    if (!sbt_kernel.has_buf_lock) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "cannot give the send "
                      "buffer back to autotuning: this kernel lacks "
                      "SO_BUF_LOCK (Linux >= 5.15)");
        return "left locked (no SO_BUF_LOCK)";
    }
    /* Autotuning only ever grows a buffer: start it where the kernel
     * starts a new socket. */
    initial = sbt_kernel.tcp_wmem[1] ? (int)sbt_kernel.tcp_wmem[1]
                                     : SBT_DEFAULT_INITIAL;
    restore_to = (st->state == SBT_SOCK_FIXED) ? st->requested
                                               : sbt_core_sndbuf;
    if ((rv = sbt_sock_release_sndbuf(st->fd, initial, restore_to)) != 0) {
        sbt_log_failure(r, rv, "clearing the SO_SNDBUF lock (SO_BUF_LOCK)");
        return "unlock failed";
    }
    st->state = SBT_SOCK_AUTOTUNED;
    st->requested = 0;
    sbt_read_effective(st);
    return "released to autotuning";
}

int sbt_lock_shared(void)
{
#if APR_HAS_THREADS
    return sbt_shared_mutex
           && apr_thread_mutex_lock(sbt_shared_mutex) == APR_SUCCESS;
#else
    return 1;
#endif
}

void sbt_unlock_shared(void)
{
#if APR_HAS_THREADS
    if (sbt_shared_mutex) {
        apr_thread_mutex_unlock(sbt_shared_mutex);
    }
#endif
}

void sbt_socket_child_init(apr_pool_t *pchild, server_rec *s)
{
#if APR_HAS_THREADS
    apr_status_t rv = apr_thread_mutex_create(&sbt_shared_mutex,
                                              APR_THREAD_MUTEX_DEFAULT,
                                              pchild);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s, "cannot create the "
                     "mutex for HTTP/2 connections; their streams will "
                     "not be tuned");
        sbt_shared_mutex = NULL;
    }
#else
    (void)pchild; (void)s;
#endif
}

void sbt_note(request_rec *r, const char *key, const char *val)
{
    apr_table_setn(r->notes, key, val);
    apr_table_setn(r->subprocess_env, key, val);
}

void sbt_note_num(request_rec *r, const char *key, apr_int64_t v)
{
    sbt_note(r, key, v >= 0 ? apr_off_t_toa(r->pool, v) : "-");
}
