/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_path.c: per client address, the lowest minimum RTT this
 * process's auto responses to it have measured lately: the path's own
 * delay, which a flow that starts while others fill the bottleneck's
 * queue cannot measure itself (docs/auto.md, "Crowds").
 *
 * Per process, not in shared memory: a crowd from one client spans a few
 * processes at most, each seeing enough of it.  A fixed table made at
 * child_init: a look costs a hash, a lock and no allocation, and no
 * stream touches a connection's pool.
 */

#include "httpd.h"
#include "http_log.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* Direct-mapped: a client whose slot another address holds, freshly,
 * keeps its own minimum; it is never worse off than without the table. */
#define SBT_PATH_SLOTS      256

/* A minimum no connection has confirmed for this long is forgotten (as
 * BBR's), so a longer new route is not read as a queue for longer. */
#define SBT_PATH_FRESH      apr_time_from_sec(10)

/* A connection shares its path while another whose response is under way
 * looked at it within this long (about once an RTT).  One whose response
 * has ended (idle keep-alive, a crowd just ended) no longer counts. */
#define SBT_PATH_SHARED     apr_time_from_sec(2)

/* The connections that looked last.  Three: when one leaves, another of
 * a crowd is still there, so no member takes itself for alone. */
#define SBT_PATH_LOOKERS    3

typedef struct {
    const void *conn;           /**< NULL: empty */
    apr_int64_t at;             /**< sbt_clock_us() */
} sbt_looker_t;

typedef struct {
    int family;                 /**< 0: empty */
    unsigned char addr[16];
    apr_uint32_t min_rtt_us;
    /** When a connection last measured min_rtt_us or less. */
    apr_int64_t seen;
    sbt_looker_t looker[SBT_PATH_LOOKERS];
} sbt_path_t;

/* Made only once its lock is (child_init). */
static sbt_path_t *sbt_paths;
#if APR_HAS_THREADS
static apr_thread_mutex_t *sbt_paths_mutex;
#endif

/** Note @a conn's look at @a p (in its own entry, else the oldest); is
 *  the path shared with another of this process's connections? */
static int sbt_path_shared(sbt_path_t *p, const void *conn, apr_int64_t now)
{
    sbt_looker_t *mine = NULL, *oldest = &p->looker[0];
    int i, shared = 0;

    for (i = 0; i < SBT_PATH_LOOKERS; i++) {
        sbt_looker_t *l = &p->looker[i];

        if (l->conn == conn) {
            mine = l;
        }
        else if (l->conn && now - l->at <= SBT_PATH_SHARED) {
            shared = 1;
        }
        if (l->at < oldest->at) {
            oldest = l;
        }
    }
    mine = mine ? mine : oldest;
    mine->conn = conn;
    mine->at = now;
    return shared;
}

/** The slot of @a client's path, locked (sbt_path_unlock); NULL: none. */
static sbt_path_t *sbt_path_lock(const apr_sockaddr_t *client)
{
    int len;

    if (!sbt_paths || !client
        || (len = client->ipaddr_len) <= 0 || len > 16) {
        return NULL;
    }
#if APR_HAS_THREADS
    if (apr_thread_mutex_lock(sbt_paths_mutex)) {
        return NULL;
    }
#endif
    return &sbt_paths[sbt_hash(client->ipaddr_ptr, len) % SBT_PATH_SLOTS];
}

static void sbt_path_unlock(void)
{
#if APR_HAS_THREADS
    apr_thread_mutex_unlock(sbt_paths_mutex);
#endif
}

apr_uint32_t sbt_path_look(const apr_sockaddr_t *client, const void *conn,
                           apr_uint32_t own_us, int *shared)
{
    apr_uint32_t min;
    apr_int64_t now = sbt_clock_us();
    sbt_path_t *p;
    int stale;

    *shared = 0;
    if (!own_us || (p = sbt_path_lock(client)) == NULL) {
        return own_us;
    }
    stale = now - p->seen > SBT_PATH_FRESH;
    if (p->family != client->family
        || memcmp(p->addr, client->ipaddr_ptr, client->ipaddr_len)) {
        if (p->family && !stale) {       /* another address's, fresh */
            sbt_path_unlock();
            return own_us;
        }
        *p = (sbt_path_t){.family = client->family, .min_rtt_us = own_us};
        memcpy(p->addr, client->ipaddr_ptr, client->ipaddr_len);
    }
    if (stale || own_us <= p->min_rtt_us) {
        p->min_rtt_us = own_us;
        p->seen = now;
    }
    min = p->min_rtt_us;
    *shared = sbt_path_shared(p, conn, now);
    sbt_path_unlock();
    return min;
}

void sbt_path_leave(const apr_sockaddr_t *client, const void *conn)
{
    sbt_path_t *p = sbt_path_lock(client);
    int i;

    if (p == NULL) {
        return;
    }
    /* This one is done: the others' next looks share nothing with it. */
    for (i = 0; i < SBT_PATH_LOOKERS; i++) {
        if (p->looker[i].conn == conn) {
            p->looker[i] = (sbt_looker_t){NULL, 0};
        }
    }
    sbt_path_unlock();
}

static void sbt_path_child_init(apr_pool_t *pchild, server_rec *s)
{
#if APR_HAS_THREADS
    /* Under prefork too: mod_http2 runs streams on threads of its own. */
    apr_status_t rv = apr_thread_mutex_create(&sbt_paths_mutex,
                                              APR_THREAD_MUTEX_DEFAULT,
                                              pchild);

    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, "SndbufTune auto: cannot "
                     "create the mutex of the paths' minimum RTTs; each "
                     "connection keeps its own");
        return;
    }
#else
    (void)s;
#endif
    sbt_paths = apr_pcalloc(pchild, SBT_PATH_SLOTS * sizeof(*sbt_paths));
}

void sbt_path_register_hooks(void)
{
    /* The table and its lock: per process, before any connection. */
    ap_hook_child_init(sbt_path_child_init, NULL, NULL, APR_HOOK_MIDDLE);
}
