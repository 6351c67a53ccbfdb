/*
 * wanperf.c -- tiny measuring tools for the WAN lab self-test.
 *
 *   wanperf source --bind ADDR [--port N] [--time S] [--sndbuf N] [--cc NAME]
 *       Listen, accept one connection, send zeros until the peer closes
 *       its side (or S seconds pass), then print the sender's TCP_INFO.
 *   wanperf sink --connect ADDR [--port N] --time S [--warmup S]
 *                [--interval S] [--clamp N] [--from ADDR] [--from-port N]
 *       Connect (retrying while refused, up to 5 s; from the local
 *       address ADDR and port N if given), receive for S seconds,
 *       print total bytes and the goodput between t=warmup and t=S, where
 *       t=0 is the first byte received.  --clamp: TCP_WINDOW_CLAMP, so
 *       a sender that fills its window keeps a standing queue that never
 *       drains, losses or not (the window comes in the receive window's
 *       steps: 300000 gave 363 segments in flight, 700000 gave 725).
 *   wanperf rtt --connect ADDR [--port N] [--count N] [--interval-ms N]
 *               [--timeout-ms N] [--from ADDR] [--from-port N]
 *       Round-trip time of a TCP SYN answered by a RST (connect() to a
 *       closed port: no server needed).  Exit 0 if any probe was answered.
 *
 * Results are key=value lines on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/tcp.h>

#define BUFSZ (256 * 1024)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "wanperf: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: wanperf source --bind ADDR [--port N] [--time S] "
            "[--sndbuf N] [--cc NAME]\n"
            "       wanperf sink --connect ADDR [--port N] --time S "
            "[--warmup S] [--interval S] [--clamp N] [--from ADDR]\n"
            "                    [--from-port N]\n"
            "       wanperf rtt --connect ADDR [--port N] [--count N] "
            "[--interval-ms N] [--timeout-ms N] [--from ADDR]\n"
            "                   [--from-port N]\n");
    exit(2);
}

struct opts {
    const char *addr;
    const char *from;
    const char *cc;
    int port;
    int from_port;
    double time;
    double warmup;
    double interval;
    int sndbuf;
    int clamp;
    int count;
    int interval_ms;
    int timeout_ms;
};

static void make_addr(const struct opts *o, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons(o->port);
    if (!o->addr || inet_pton(AF_INET, o->addr, &sa->sin_addr) != 1) {
        fprintf(stderr, "wanperf: need an IPv4 address\n");
        exit(2);
    }
}

/* Bind s to the local address o->from and port o->from_port (any
 * address, any port), if either is given: the port picks a NAT user's
 * sub-link (wanlab --sub-link NET,ports=LO-HI:...). */
static void bind_from(int s, const struct opts *o)
{
    struct sockaddr_in sa;
    int one = 1;

    if (!o->from && !o->from_port) {
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(o->from_port);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (o->from && inet_pton(AF_INET, o->from, &sa.sin_addr) != 1) {
        fprintf(stderr, "wanperf: --from: need an IPv4 address\n");
        exit(2);
    }
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("bind --from");
    }
}

static int do_source(const struct opts *o)
{
    struct sockaddr_in sa;
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    static char buf[BUFSZ];
    unsigned long long sent = 0;
    int one = 1, ls, s, v;
    socklen_t vl = sizeof(v);
    double t0, end;

    make_addr(o, &sa);
    ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) {
        die("socket");
    }
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("bind");
    }
    if (listen(ls, 1) < 0) {
        die("listen");
    }
    s = accept(ls, NULL, NULL);
    if (s < 0) {
        die("accept");
    }
    close(ls);
    if (o->sndbuf > 0
        && setsockopt(s, SOL_SOCKET, SO_SNDBUF, &o->sndbuf,
                      sizeof(o->sndbuf)) < 0) {
        die("SO_SNDBUF");
    }
    if (o->cc && setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, o->cc,
                            strlen(o->cc)) < 0) {
        die("TCP_CONGESTION");
    }
    t0 = now_s();
    end = t0 + o->time;
    for (;;) {
        struct pollfd pf = { .fd = s, .events = POLLIN | POLLOUT };
        int left = (int)((end - now_s()) * 1000);

        if (left <= 0) {
            break;
        }
        if (poll(&pf, 1, left) < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("poll");
        }
        if (pf.revents & (POLLIN | POLLERR | POLLHUP)) {
            break;              /* the sink is done */
        }
        if (pf.revents & POLLOUT) {
            ssize_t n = send(s, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);

            if (n > 0) {
                sent += (unsigned long long)n;
            }
            else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                break;
            }
        }
    }
    memset(&ti, 0, sizeof(ti));
    getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &tl);
    getsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, &vl);
    printf("src_bytes=%llu\n", sent);
    printf("src_seconds=%.3f\n", now_s() - t0);
    printf("src_mss=%u\n", ti.tcpi_snd_mss);
    printf("src_total_retrans=%u\n", ti.tcpi_total_retrans);
    printf("src_min_rtt_us=%u\n", ti.tcpi_min_rtt);
    printf("src_snd_cwnd=%u\n", ti.tcpi_snd_cwnd);
    printf("src_sndbuf=%d\n", v);
    printf("src_busy_us=%llu\n", (unsigned long long)ti.tcpi_busy_time);
    printf("src_sndbuf_limited_us=%llu\n",
           (unsigned long long)ti.tcpi_sndbuf_limited);
    printf("src_rwnd_limited_us=%llu\n",
           (unsigned long long)ti.tcpi_rwnd_limited);
    close(s);
    return 0;
}

static int connect_retry(const struct sockaddr_in *sa, const struct opts *o)
{
    double give_up = now_s() + 5;

    for (;;) {
        int s = socket(AF_INET, SOCK_STREAM, 0);

        if (s < 0) {
            die("socket");
        }
        if (o->clamp > 0
            && setsockopt(s, IPPROTO_TCP, TCP_WINDOW_CLAMP, &o->clamp,
                          sizeof(o->clamp)) < 0) {
            die("setsockopt(TCP_WINDOW_CLAMP)");
        }
        bind_from(s, o);
        if (connect(s, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
            return s;
        }
        if (errno != ECONNREFUSED || now_s() > give_up) {
            die("connect");
        }
        close(s);
        usleep(50000);
    }
}

static int do_sink(const struct opts *o)
{
    struct sockaddr_in sa;
    static char buf[BUFSZ];
    unsigned long long total = 0, b0 = 0, b1 = 0, bi = 0;
    double t0 = 0, tw = 0, t1 = 0, ti = 0;
    int s, started = 0, inwin = 0;

    make_addr(o, &sa);
    s = connect_retry(&sa, o);
    for (;;) {
        ssize_t n = recv(s, buf, sizeof(buf), 0);
        double t = now_s();

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("recv");
        }
        if (n == 0) {
            break;
        }
        if (!started) {
            started = 1;
            t0 = ti = t;
        }
        if (!inwin && t - t0 >= o->warmup) {
            inwin = 1;
            tw = t;
            b0 = total;         /* bytes before this read */
        }
        total += (unsigned long long)n;
        if (o->interval > 0 && t - ti >= o->interval) {
            fprintf(stderr, "t=%.1f mbit=%.3f\n", t - t0,
                    (total - bi) * 8 / (t - ti) / 1e6);
            ti = t;
            bi = total;
        }
        t1 = t;
        b1 = total;
        if (t - t0 >= o->time) {
            break;
        }
    }
    printf("sink_bytes=%llu\n", total);
    printf("sink_seconds=%.3f\n", t1 - t0);
    if (inwin && t1 > tw) {
        printf("sink_window_s=%.3f\n", t1 - tw);
        printf("sink_window_bytes=%llu\n", b1 - b0);
        printf("sink_goodput_bps=%.0f\n", (b1 - b0) * 8 / (t1 - tw));
    }
    else {
        printf("sink_goodput_bps=0\n");
    }
    fflush(stdout);
    /* let the source see our FIN, read its TCP_INFO and close first */
    shutdown(s, SHUT_WR);
    {
        double give_up = now_s() + 10;

        while (now_s() < give_up) {
            struct pollfd pf = { .fd = s, .events = POLLIN };

            if (poll(&pf, 1, 200) > 0 && recv(s, buf, sizeof(buf), 0) <= 0) {
                break;
            }
        }
    }
    close(s);
    return 0;
}

static int do_rtt(const struct opts *o)
{
    struct sockaddr_in sa;
    double sum = 0, min = 1e9, max = 0;
    int i, got = 0;

    make_addr(o, &sa);
    for (i = 0; i < o->count; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct pollfd pf;
        double t0, dt;
        int r;

        if (s < 0) {
            die("socket");
        }
        bind_from(s, o);
        if (i > 0) {
            usleep(o->interval_ms * 1000);
        }
        t0 = now_s();
        r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
        if (r < 0 && errno != EINPROGRESS && errno != ECONNREFUSED) {
            die("connect");
        }
        if (r < 0 && errno == EINPROGRESS) {
            pf.fd = s;
            pf.events = POLLOUT;
            r = poll(&pf, 1, o->timeout_ms);
            if (r <= 0) {
                close(s);
                continue;       /* no answer within the timeout */
            }
        }
        dt = now_s() - t0;
        close(s);
        got++;
        sum += dt;
        min = dt < min ? dt : min;
        max = dt > max ? dt : max;
    }
    printf("rtt_samples=%d\n", got);
    printf("rtt_lost=%d\n", o->count - got);
    if (got) {
        printf("rtt_min_us=%.0f\n", min * 1e6);
        printf("rtt_avg_us=%.0f\n", sum / got * 1e6);
        printf("rtt_max_us=%.0f\n", max * 1e6);
    }
    return got ? 0 : 1;
}

/* The options, each --name VALUE: where it goes and what type it is. */
static const struct opt_def {
    const char *name;
    char type;                  /* 's' string, 'i' int, 'd' double */
    size_t off;
} opt_defs[] = {
    {"--bind", 's', offsetof(struct opts, addr)},
    {"--connect", 's', offsetof(struct opts, addr)},
    {"--from", 's', offsetof(struct opts, from)},
    {"--cc", 's', offsetof(struct opts, cc)},
    {"--port", 'i', offsetof(struct opts, port)},
    {"--from-port", 'i', offsetof(struct opts, from_port)},
    {"--sndbuf", 'i', offsetof(struct opts, sndbuf)},
    {"--clamp", 'i', offsetof(struct opts, clamp)},
    {"--count", 'i', offsetof(struct opts, count)},
    {"--interval-ms", 'i', offsetof(struct opts, interval_ms)},
    {"--timeout-ms", 'i', offsetof(struct opts, timeout_ms)},
    {"--time", 'd', offsetof(struct opts, time)},
    {"--warmup", 'd', offsetof(struct opts, warmup)},
    {"--interval", 'd', offsetof(struct opts, interval)},
};

static void set_opt(struct opts *o, const char *name, const char *v)
{
    size_t i;

    for (i = 0; i < sizeof(opt_defs) / sizeof(opt_defs[0]); i++) {
        const struct opt_def *d = &opt_defs[i];
        char *field = (char *)o + d->off;

        if (strcmp(name, d->name)) {
            continue;
        }
        if (d->type == 's') {
            *(const char **)field = v;
        }
        else if (d->type == 'i') {
            *(int *)field = atoi(v);
        }
        else {
            *(double *)field = atof(v);
        }
        return;
    }
    usage();
}

int main(int argc, char **argv)
{
    struct opts o = {
        .port = 5001, .time = 10, .warmup = 0, .count = 5,
        .interval_ms = 100, .timeout_ms = 2000,
    };
    int i;

    if (argc < 2) {
        usage();
    }
    for (i = 2; i + 1 < argc; i += 2) {
        set_opt(&o, argv[i], argv[i + 1]);
    }
    if (i < argc) {
        usage();                /* an option without its value */
    }
    if (!strcmp(argv[1], "source")) {
        return do_source(&o);
    }
    if (!strcmp(argv[1], "sink")) {
        return do_sink(&o);
    }
    if (!strcmp(argv[1], "rtt")) {
        return do_rtt(&o);
    }
    usage();
    return 2;
}
