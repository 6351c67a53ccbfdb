/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_socket.c: what the module does to a connection's socket, and
 * what it remembers of it (sbt_sock_t), so that a keep-alive request
 * wanting the same again costs no system call.  A failing socket call
 * never fails the request: the socket is left as it was, or, where a
 * release fails half-way, as the kernel says it is.
 */

#include "httpd.h"
#include "http_log.h"

#include "apr_atomic.h"
#include "apr_portable.h"
#include "apr_strings.h"

#include <string.h>

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* The kernel's initial send buffer when tcp_wmem cannot be read. */
#define SBT_DEFAULT_INITIAL 16384

#define SBT_WARN_INTERVAL   60  /* seconds between warnings, per child */

static apr_uint32_t sbt_warned_at;
static apr_uint32_t sbt_failures_hushed;

/* The raw descriptor behind an APR socket, or -1. */
static int sbt_sock_fd(apr_socket_t *sock)
{
    apr_os_sock_t fd;

    if (!sock || apr_os_sock_get(&fd, sock) != APR_SUCCESS) {
        return -1;
    }
    return (int)fd;
}

static int sbt_initial_size(void)
{
    return sbt_kernel.tcp_wmem[1] ? (int)sbt_kernel.tcp_wmem[1]
                                  : SBT_DEFAULT_INITIAL;
}

void sbt_sock_init(sbt_sock_t *s, apr_socket_t *csd, int locked)
{
    *s = (sbt_sock_t){.fd = sbt_sock_fd(csd), .state = SBT_SOCK_UNKNOWN,
                      .effective = -1};
    if (locked > 0) {
        s->state = SBT_SOCK_LOCKED;
        s->effective = locked;
    }
}

void sbt_sock_attach(sbt_sock_t *s, apr_socket_t *csd)
{
    int fd = sbt_sock_fd(csd);

    /* Written only when it changes: HTTP/2 streams read it. */
    if (fd != s->fd) {
        s->fd = fd;
    }
}

int sbt_sock_open(const sbt_sock_t *s)
{
    return s->fd >= 0;
}

int sbt_sock_effective(const sbt_sock_t *s)
{
    return s->effective;
}

static void sbt_failed(sbt_sock_did_t *did, const char *call, int err,
                       const char *done)
{
    did->call = call;
    did->err = err;
    did->done = done;
}

int sbt_sock_refresh(sbt_sock_t *s, sbt_sock_did_t *did)
{
    int rv = sbt_sock_get_sndbuf(s->fd, &s->effective);

    if (rv) {
        s->effective = -1;
        sbt_failed(did, "getsockopt(SO_SNDBUF)", rv, "size unknown");
    }
    return rv == 0;
}

void sbt_sock_resolve(sbt_sock_t *s, sbt_sock_did_t *did)
{
    int locked = 0, rv;

    if (s->state != SBT_SOCK_UNKNOWN) {
        return;
    }
    /* No lock to read means no SO_BUF_LOCK, so no way to undo one
     * either: treat the socket as the kernel's. */
    if (sbt_kernel.has_buf_lock
        && (rv = sbt_sock_sndbuf_locked(s->fd, &locked)) != 0) {
        sbt_failed(did, "getsockopt(SO_BUF_LOCK)", rv, "lock unknown");
        return;
    }
    s->state = locked ? SBT_SOCK_LOCKED : SBT_SOCK_AUTOTUNED;
    sbt_sock_refresh(s, did);
}

void sbt_sock_recheck(sbt_sock_t *s, sbt_sock_did_t *did)
{
    /* Our own lock holds the size we read when we set it. */
    if (s->state != SBT_SOCK_FIXED) {
        sbt_sock_refresh(s, did);
    }
}

int sbt_sock_locked_at(const sbt_sock_t *s)
{
    if (s->state == SBT_SOCK_FIXED) {
        return s->requested;
    }
    if (s->state == SBT_SOCK_LOCKED && s->effective > 0) {
        return s->effective / 2;
    }
    return 0;
}

sbt_sock_state_e sbt_sock_state(const sbt_sock_t *s)
{
    return s->state;
}

int sbt_sock_known_size(const sbt_sock_t *s)
{
    return s->effective > 0 ? s->effective : sbt_initial_size();
}

void sbt_sock_fix(sbt_sock_t *s, int size, int shared, sbt_sock_did_t *did)
{
    int rv;

    did->done = "set";
    if (s->state == SBT_SOCK_FIXED && s->requested == size) {
        did->done = "unchanged";
        return;
    }
    if (shared && s->state == SBT_SOCK_FIXED && s->requested > size) {
        did->done = "kept the larger size of another HTTP/2 stream";
        return;
    }
    if ((rv = sbt_sock_set_sndbuf(s->fd, size)) != 0) {
        sbt_failed(did, "setsockopt(SO_SNDBUF)", rv, "setsockopt failed");
        return;
    }
    s->state = SBT_SOCK_FIXED;
    s->requested = size;
    sbt_sock_refresh(s, did);
    if (sbt_kernel.wmem_max && (apr_uint32_t)size > sbt_kernel.wmem_max) {
        did->clamped = 1;
        did->done = "set, capped by net.core.wmem_max";
    }
}

/** A release that failed half-way leaves the buffer shrunk and still
 *  locked, neither as it was nor released: forget what we knew and read
 *  the socket back, so that the notes and the next request go by the
 *  kernel's state, and @a did says what that is. */
static void sbt_sock_reread(sbt_sock_t *s, sbt_sock_did_t *did)
{
    sbt_sock_did_t again = {0};

    s->state = SBT_SOCK_UNKNOWN;
    s->requested = 0;
    s->effective = -1;
    sbt_sock_resolve(s, &again);
    did->left = s->state == SBT_SOCK_LOCKED ? "locked"
              : s->state == SBT_SOCK_AUTOTUNED ? "not locked"
              : "with its lock unknown";
    did->left_size = s->effective;
}

/** Clear the lock, shrinking the buffer to @a initial first (0: as it
 *  is); @a done says so. */
static void sbt_sock_release(sbt_sock_t *s, int initial, const char *done,
                             sbt_sock_did_t *did)
{
    int rv;

    if (!sbt_kernel.has_buf_lock) {
        did->done = "left locked: this kernel lacks SO_BUF_LOCK "
                    "(Linux >= 5.15)";
        return;
    }
    rv = sbt_sock_release_sndbuf(s->fd, initial, sbt_sock_locked_at(s));
    if (rv) {
        sbt_failed(did, "clearing the SO_SNDBUF lock (SO_BUF_LOCK)", rv,
                   "unlock failed");
        sbt_sock_reread(s, did);
        return;
    }
    s->state = SBT_SOCK_AUTOTUNED;
    s->requested = 0;
    did->done = done;
    sbt_sock_refresh(s, did);
}

void sbt_sock_unset(sbt_sock_t *s, int shared, sbt_sock_did_t *did)
{
    sbt_sock_resolve(s, did);
    if (did->call) {
        return;
    }
    if (s->state == SBT_SOCK_AUTOTUNED) {
        /* Autotuning moves the size under us: report the current one. */
        did->done = "autotuning";
        sbt_sock_refresh(s, did);
        return;
    }
    if (shared && s->state == SBT_SOCK_FIXED) {
        did->done = "kept the fixed size of another HTTP/2 stream";
        return;
    }
    /* Autotuning only ever grows a buffer: start it where the kernel
     * starts a new socket. */
    sbt_sock_release(s, sbt_initial_size(), "released to autotuning", did);
}

void sbt_sock_pace(sbt_sock_t *s, sbt_sock_did_t *did)
{
    int rv;

    /* Asked once: pacing cannot be turned off, and a kernel that
     * refuses it once refuses it again. */
    if (s->paced) {
        return;
    }
    s->paced = 1;
    if ((rv = sbt_sock_set_pacing(s->fd)) != 0) {
        sbt_failed(did, "setsockopt(SO_MAX_PACING_RATE)", rv,
                   "set, not paced");
        return;
    }
    did->paced = 1;
}

void sbt_sock_give_back(sbt_sock_t *s, sbt_sock_did_t *did)
{
    did->done = "left to autotuning";
    /* No shrink: autotuning grows the buffer from where it is. */
    if (s->state == SBT_SOCK_FIXED || s->state == SBT_SOCK_LOCKED) {
        sbt_sock_release(s, 0, "given back to autotuning", did);
    }
}

int sbt_sock_info(const sbt_sock_t *s, sbt_tcp_info_t *ti,
                  sbt_sock_did_t *did)
{
    int rv = sbt_sock_tcp_info(s->fd, ti);

    if (rv) {
        sbt_failed(did, "getsockopt(TCP_INFO)", rv, "no TCP_INFO");
    }
    return rv == 0;
}

int sbt_sock_listener_locked(apr_socket_t *sd)
{
    int fd = sbt_sock_fd(sd), locked = 0, size = 0;

    if (fd < 0 || sbt_sock_sndbuf_locked(fd, &locked) || !locked
        || sbt_sock_get_sndbuf(fd, &size)) {
        return 0;
    }
    return size;
}

int sbt_sock_loss_based(const sbt_sock_t *s)
{
    char name[16];

    /* bbr (and its later versions) model the path; cubic, reno and the
     * rest back off only on loss, so they fill the bottleneck queue. */
    return sbt_sock_congestion(s->fd, name, sizeof(name)) != 0
           || strncmp(name, "bbr", 3) != 0;
}

/** How a failed call left the socket, for the log. */
static const char *sbt_sock_left(const sbt_sock_did_t *did, char *buf,
                                 apr_size_t len)
{
    if (!did->left) {
        return "as it was";
    }
    if (did->left_size < 0) {
        apr_snprintf(buf, len, "%s, its size unknown", did->left);
    }
    else {
        apr_snprintf(buf, len, "%s, SO_SNDBUF %d (read back)", did->left,
                     did->left_size);
    }
    return buf;
}

void sbt_sock_tally(conn_rec *c, const sbt_sock_did_t *did, sbt_tally_t *t)
{
    apr_uint32_t now, last;
    char buf[64];
    const char *left;

    t->clamped |= did->clamped;
    if (!did->call) {
        return;
    }
    t->failures++;
    left = sbt_sock_left(did, buf, sizeof(buf));
    now = (apr_uint32_t)(sbt_clock_us() / APR_USEC_PER_SEC);
    last = apr_atomic_read32(&sbt_warned_at);
    if ((last == 0 || now - last >= SBT_WARN_INTERVAL)
        && apr_atomic_cas32(&sbt_warned_at, now, last) == last) {
        apr_uint32_t hushed = apr_atomic_xchg32(&sbt_failures_hushed, 0);

        ap_log_cerror(APLOG_MARK, APLOG_WARNING, APR_FROM_OS_ERROR(did->err),
                      c, "%s failed, socket left %s (%u more such "
                      "failures logged only at debug level since the last "
                      "warning)", did->call, left, hushed);
        return;
    }
    apr_atomic_inc32(&sbt_failures_hushed);
    ap_log_cerror(APLOG_MARK, APLOG_DEBUG, APR_FROM_OS_ERROR(did->err), c,
                  "%s failed, socket left %s", did->call, left);
}
