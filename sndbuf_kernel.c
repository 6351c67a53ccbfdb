/* SPDX-License-Identifier: Apache-2.0 */

/* sndbuf_kernel.c: Linux's own socket options are built only where the
 * headers have them, so the module builds anywhere APR does. */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>

#if defined(__linux__)
#include <linux/tcp.h>          /* the full struct tcp_info; glibc's is cut */
#include <linux/version.h>
#define SBT_HAVE_TCP_INFO 1
/* Headers older than the running kernel may lack the newest fields. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(4, 18, 0)
#define SBT_HAVE_DELIVERED 1
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 4, 0)
#define SBT_HAVE_SND_WND 1
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72          /* asm-generic value, Linux >= 5.15 */
#endif
#define SBT_HAVE_BUF_LOCK 1
#endif

#include "apr_strings.h"

#include "sndbuf_kernel.h"

sbt_kernel_t sbt_kernel;

/* SO_BUF_LOCK's send bit, the kernel's SOCK_SNDBUF_LOCK. */
#define SBT_SNDBUF_LOCK 1

apr_int64_t sbt_clock_us(void)
{
#ifdef CLOCK_MONOTONIC
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        return (apr_int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    }
#endif
    {
        struct timeval tv;      /* no monotonic clock: the best there is */

        gettimeofday(&tv, NULL);
        return (apr_int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
    }
}

static void sbt_read_sysctl_u32s(const char *path, apr_uint32_t *out, int n)
{
    FILE *f = fopen(path, "r");
    unsigned long v;
    int i = 0;

    if (!f) {
        return;
    }
    while (i < n && fscanf(f, "%lu", &v) == 1) {
        out[i++] = (apr_uint32_t)v;
    }
    fclose(f);
}

void sbt_kernel_probe(void)
{
    sbt_kernel_t *k = &sbt_kernel;
    sbt_tcp_info_t ti;
    int fd, locked;

    memset(k, 0, sizeof(*k));
    sbt_read_sysctl_u32s("/proc/sys/net/core/wmem_max", &k->wmem_max, 1);
    sbt_read_sysctl_u32s("/proc/sys/net/ipv4/tcp_wmem", k->tcp_wmem, 3);

    /* Ask a throw-away socket rather than trusting uname(): containers
     * and backports make version numbers a poor guide. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return;
    }
    k->has_buf_lock = sbt_sock_sndbuf_locked(fd, &locked) == 0;
    k->has_tcp_info = sbt_sock_tcp_info(fd, &ti) == 0;
    k->has_chrono = k->has_tcp_info && (ti.valid & SBT_TI_CHRONO);
    close(fd);
}

/* The limits as each place names them (sbt_kernel_show); a feature
 * (can/cannot set) is 1 or 0. */
static const struct {
    const char *name;           /* sysctl or socket option */
    const char *key;            /* ?auto: SndbufTuneKernel<key> */
    const char *metric;         /* Prometheus: sndbuf_tune_kernel_<metric> */
    const char *help;
    int n;                      /* values */
    const char *can, *cannot;   /* a feature: what it means, for the log */
} sbt_limits[] = {
    {"net.core.wmem_max", "WmemMax", "wmem_max_bytes", "net.core.wmem_max, "
     "the largest SO_SNDBUF argument.", 1, NULL, NULL},
    {"net.ipv4.tcp_wmem", "TcpWmem", "tcp_wmem_bytes", "net.ipv4.tcp_wmem: "
     "an autotuned buffer's min, default and max.", 3, NULL, NULL},
    {"SO_BUF_LOCK", "SoBufLock", "so_buf_lock", "1 if SO_BUF_LOCK works, "
     "which unset needs on a locked socket.", 1,
     "(unset can give autotuning back)", "(unset cannot give autotuning back)"},
    {"TCP_INFO", "TcpInfo", "tcp_info", "1 if TCP_INFO works, which auto "
     "needs.", 1, "(auto works)", "(auto leaves sockets alone)"}
};

/** Limit @a i in format @a how (the log's separator comes first). */
static const char *sbt_kernel_line(apr_pool_t *p, sbt_show_e how, int i,
                                   const apr_uint32_t *v)
{
    static const char *const label[3] = {
        "{bound=\"min\"}", "{bound=\"default\"}", "{bound=\"max\"}"
    };
    const char *m = sbt_limits[i].metric, *val, *out;
    int j, n = sbt_limits[i].n;

    val = n == 1 ? apr_psprintf(p, "%u", v[0])
        : apr_psprintf(p, "%u %u %u", v[0], v[1], v[2]);
    /* A feature is 1 or 0 to a machine, words to a person. */
    if (sbt_limits[i].can && how == SBT_SHOW_HTML) {
        val = v[0] ? "available" : "missing";
    }
    else if (sbt_limits[i].can && how == SBT_SHOW_LOG) {
        val = v[0] ? apr_pstrcat(p, "available ", sbt_limits[i].can, NULL)
                   : apr_pstrcat(p, "missing ", sbt_limits[i].cannot, NULL);
    }
    switch (how) {
    case SBT_SHOW_LOG:
        return apr_pstrcat(p, i == 0 ? " " : i == 1 ? ", " : "; ",
                           sbt_limits[i].name, " ", val, NULL);
    case SBT_SHOW_HTML:
        return apr_pstrcat(p, "<tr><th>", sbt_limits[i].name, "</th><td>",
                           val, "</td></tr>\n", NULL);
    case SBT_SHOW_AUTO:
        return apr_pstrcat(p, "SndbufTuneKernel", sbt_limits[i].key, ": ",
                           val, "\n", NULL);
    default:
        out = apr_psprintf(p, "# HELP sndbuf_tune_kernel_%s %s\n"
                           "# TYPE sndbuf_tune_kernel_%s gauge\n", m,
                           sbt_limits[i].help, m);
        for (j = 0; j < n; j++) {
            out = apr_psprintf(p, "%ssndbuf_tune_kernel_%s%s %u\n", out, m,
                               n == 1 ? "" : label[j], v[j]);
        }
        return out;
    }
}

const char *sbt_kernel_show(apr_pool_t *p, sbt_show_e how)
{
    const sbt_kernel_t *k = &sbt_kernel;
    const apr_uint32_t v[4][3] = {
        {k->wmem_max}, {k->tcp_wmem[0], k->tcp_wmem[1], k->tcp_wmem[2]},
        {k->has_buf_lock != 0}, {k->has_tcp_info != 0}
    };
    const char *out = how == SBT_SHOW_LOG ? "kernel limits:"
                    : how == SBT_SHOW_HTML ? "<table>\n" : "";
    int i;

    for (i = 0; i < 4; i++) {
        out = apr_pstrcat(p, out, sbt_kernel_line(p, how, i, v[i]), NULL);
    }
    return how == SBT_SHOW_HTML ? apr_pstrcat(p, out, "</table>\n", NULL)
                                : out;
}

/* getsockopt, or EBADF for the fd -1 of a closed socket. */
static int sbt_getsockopt(int fd, int level, int opt, void *v,
                          socklen_t *len)
{
    if (fd < 0) {
        return EBADF;
    }
    return getsockopt(fd, level, opt, v, len) ? errno : 0;
}

int sbt_sock_get_sndbuf(int fd, int *bytes)
{
    socklen_t len = sizeof(*bytes);

    return sbt_getsockopt(fd, SOL_SOCKET, SO_SNDBUF, bytes, &len);
}

int sbt_sock_set_sndbuf(int fd, int bytes)
{
    if (fd < 0) {
        return EBADF;
    }
    return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes))
           ? errno : 0;
}

int sbt_sock_set_pacing(int fd)
{
#ifdef SO_MAX_PACING_RATE
    /* Any rate but ~0 (no cap) makes TCP pace at the rate it computes.
     * A 64-bit kernel reads 8 bytes, a 32-bit one the first 4: neither
     * half is ~0, whatever the byte order. */
    apr_uint64_t rate = APR_UINT64_C(0xfffffffefffffffe);

    if (fd < 0) {
        return EBADF;
    }
    return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate,
                      sizeof(rate)) ? errno : 0;
#else
    (void)fd;
    return ENOTSUP;
#endif
}

int sbt_sock_sndbuf_locked(int fd, int *locked)
{
#ifdef SBT_HAVE_BUF_LOCK
    int locks = 0, rv;
    socklen_t len = sizeof(locks);

    if ((rv = sbt_getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &locks, &len))) {
        return rv;
    }
    *locked = (locks & SBT_SNDBUF_LOCK) != 0;
    return 0;
#else
    (void)fd; (void)locked;
    return ENOTSUP;
#endif
}

int sbt_sock_release_sndbuf(int fd, int initial, int restore_to)
{
#ifdef SBT_HAVE_BUF_LOCK
    int locks = 0, rv;
    socklen_t len = sizeof(locks);

    if ((rv = sbt_getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &locks, &len))) {
        return rv;
    }
    /* The shrink itself sets the lock again; clearing it comes last. */
    if (initial > 0 && (rv = sbt_sock_set_sndbuf(fd, initial / 2)) != 0) {
        return rv;
    }
    locks &= ~SBT_SNDBUF_LOCK;
    rv = setsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &locks, sizeof(locks))
         ? errno : 0;
    /* A lock that stays is better at its old size than at the shrunk one;
     * whether this takes, the caller reads back. */
    if (rv && initial > 0 && restore_to > 0) {
        (void)sbt_sock_set_sndbuf(fd, restore_to);
    }
    return rv;
#else
    (void)fd; (void)initial; (void)restore_to;
    return ENOTSUP;
#endif
}

int sbt_sock_congestion(int fd, char *name, int len)
{
#ifdef TCP_CONGESTION
    socklen_t optlen = (socklen_t)len - 1;

    memset(name, 0, (size_t)len);
    return sbt_getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &optlen);
#else
    (void)fd; (void)name; (void)len;
    return ENOTSUP;
#endif
}

/* True when the kernel's answer reaches to the end of member m. */
#define SBT_TI_HAS(len, m) ((size_t)(len) >= offsetof(struct tcp_info, m) \
                            + sizeof(((struct tcp_info *)0)->m))

int sbt_sock_tcp_info(int fd, sbt_tcp_info_t *out)
{
#ifdef SBT_HAVE_TCP_INFO
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int rv;

    memset(out, 0, sizeof(*out));
    memset(&ti, 0, sizeof(ti));
    if ((rv = sbt_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len)) != 0) {
        return rv;
    }
    /* ti was zeroed: a field past the kernel's answer reads 0. */
    out->valid = (SBT_TI_HAS(len, tcpi_total_retrans) ? SBT_TI_BASE : 0)
                 | (SBT_TI_HAS(len, tcpi_bytes_acked) ? SBT_TI_BYTES_ACKED : 0)
                 | (SBT_TI_HAS(len, tcpi_min_rtt) ? SBT_TI_MIN_RTT : 0)
                 | (SBT_TI_HAS(len, tcpi_delivery_rate) ? SBT_TI_DELIVERY : 0)
                 | (SBT_TI_HAS(len, tcpi_sndbuf_limited) ? SBT_TI_CHRONO : 0)
                 | (SBT_TI_HAS(len, tcpi_notsent_bytes) ? SBT_TI_NOTSENT : 0);
    out->rtt_us = ti.tcpi_rtt;
    out->rttvar_us = ti.tcpi_rttvar;
    out->snd_mss = ti.tcpi_snd_mss;
    out->total_retrans = ti.tcpi_total_retrans;
    out->snd_cwnd = ti.tcpi_snd_cwnd;
    out->unacked = ti.tcpi_unacked;
    out->notsent = ti.tcpi_notsent_bytes;
    out->bytes_acked = ti.tcpi_bytes_acked;
    out->min_rtt_us = ti.tcpi_min_rtt;
    out->delivery_rate = ti.tcpi_delivery_rate;
    out->app_limited = ti.tcpi_delivery_rate_app_limited;
    out->busy_us = ti.tcpi_busy_time;
    out->rwnd_limited_us = ti.tcpi_rwnd_limited;
    out->sndbuf_limited_us = ti.tcpi_sndbuf_limited;
#ifdef SBT_HAVE_DELIVERED
    if (SBT_TI_HAS(len, tcpi_delivered)) {
        out->valid |= SBT_TI_DELIVERED;
        out->delivered = ti.tcpi_delivered;
    }
#endif
#ifdef SBT_HAVE_SND_WND
    if (SBT_TI_HAS(len, tcpi_snd_wnd)) {
        out->valid |= SBT_TI_SND_WND;
        out->snd_wnd = ti.tcpi_snd_wnd;
    }
#endif
    return 0;
#else
    (void)fd;
    memset(out, 0, sizeof(*out));
    return ENOTSUP;
#endif
}
