/*
 * wanrelay.c -- the packet relay of the WAN lab (t/wan/wanlab).
 *
 * Opens one TUN device in each of two network namespaces (the server side
 * "s" and the client side "c") and moves IPv4 packets between them,
 * applying per direction, in this order:
 *
 *   1. bottleneck rate: a packet of L bytes (IP length) occupies the link
 *      for L*8/rate seconds; it starts when the link is free;
 *   2. drop-tail queue limited in bytes: the backlog is the number of bytes
 *      whose serialisation has not finished yet; a packet that would make
 *      it exceed the limit is dropped (a packet reaching an empty link is
 *      always accepted);
 *   3. random loss: a serialised packet is lost "on the wire" with the
 *      given probability (it used link time, it is not delivered);
 *   4. one-way propagation delay: the packet is written to the other TUN
 *      device when its serialisation has finished plus the delay.
 *
 * The server-to-client (data) direction may instead follow a schedule,
 * which starts when the counters are zeroed (at start and on SIGUSR1):
 *
 *   - rate steps (--step-bps R1,R2,... --step-ns T): the rate is R1 for T,
 *     then R2 for T, ..., then R1 again; a packet's serialisation is
 *     integrated over the steps it spans;
 *   - a trace (--trace FILE, mahimahi's format): each line is a time in ms
 *     at which the link may send 1500 bytes; the trace repeats with the
 *     period of its last line.  As in mahimahi's LinkQueue, the accounting
 *     is in bytes: small packets share an opportunity, a larger one spans
 *     several, and what an opportunity leaves unused while the queue is
 *     empty is lost.  A packet leaves at the opportunity carrying its last
 *     byte.
 *
 * The drop-tail queue (2.) stands in front of either; the client-to-server
 * direction keeps the plain rate.
 *
 * Sub-links (--sub NET/PLEN:RATE_BPS:QUEUE_BYTES[:DELAY_NS[:LO-HI]], up
 * to MAX_SUBS): a server-to-client packet whose destination is in
 * NET/PLEN (and, with LO-HI, a TCP or UDP packet whose destination port
 * is in LO..HI: the users behind one NAT address, told apart by their
 * source ports; the first sub-link that matches) goes on, once it has
 * crossed the main link and its delay, into a second link of its own: the
 * same rate and drop-tail model, no loss, then DELAY_NS more (0 by
 * default), then the client's TUN device.  It is a client's own access
 * link behind the shared bottleneck, with its own base RTT.  Each
 * sub-link keeps its own FIFO, so a packet held there does not hold back
 * the packets to other addresses.
 *
 * Packets leave in FIFO order per direction.  Timing is CLOCK_MONOTONIC;
 * one epoll loop waits on both TUN devices and a signalfd, with a timeout
 * set to the earliest pending delivery (epoll_pwait2, or a timerfd armed at
 * that absolute time where the kernel lacks it), and blocks indefinitely
 * when nothing is pending.  A packet written later than its due time by
 * more than the "late" threshold is counted as late, so a relay that falls
 * behind says so.
 *
 * Only IPv4 packets whose source and destination are in 198.18.0.0/15 are
 * relayed; everything else is dropped and counted ("filtered").
 *
 * Counters live in a small shared file (--stats FILE, mmap'ed) that
 * "wanrelay --print-stats FILE" turns into key=value lines.
 *
 * This program is driven by t/wan/wanlab; its options are internal.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#define STATS_MAGIC "WANLAB04"
#define HDR_SIZE 16                     /* struct pkt, keeps 16-byte alignment */
#define WRAP_MARK 0xffffffffu           /* pkt.len of a ring wrap marker */
#define RX_BATCH 64                     /* reads per device per loop turn */
#define TX_BATCH 256                    /* writes per direction per turn */
#define RING_MIN (4u << 20)
#define RING_MAX ((size_t)1 << 30)
#define RING_UNSHAPED (64u << 20)
#define NSEC 1000000000LL
#define MAX_STEPS 16
#define OPP_BYTES 1500u                 /* one trace opportunity (mahimahi) */
#define MSEC 1000000LL
#define MAX_SUBS 256                    /* sub-links (--sub) */
#define SUB_HASH 1024                   /* /32 sub-links by address */

/** One direction's counters, shared with --print-stats. */
struct dstats {
    uint64_t rx_packets;        /**< read from the ingress TUN */
    uint64_t rx_bytes;
    uint64_t tx_packets;        /**< written to the egress TUN */
    uint64_t tx_bytes;
    uint64_t drop_queue;        /**< drop-tail: queue limit exceeded */
    uint64_t drop_queue_bytes;
    uint64_t drop_loss;         /**< random loss */
    uint64_t drop_nobuf;        /**< relay buffer full (should stay 0) */
    uint64_t drop_filter;       /**< not IPv4 198.18.0.0/15 */
    uint64_t write_errors;
    uint64_t late;              /**< written > late_ns after due time */
    uint64_t late_sum_ns;       /**< sum of lateness over all packets */
    uint64_t late_max_ns;
    uint64_t queue_peak_bytes;  /**< highest backlog seen, incl. new packet */
    int64_t link_free_ns;       /**< when the bottleneck is next idle */
    uint64_t held_packets;      /**< in queue or in propagation right now */
    uint64_t held_bytes;
    uint64_t queue_last_bytes;  /**< backlog at the last arrival (schedules) */
};

/** A sub-link's settings and counters, shared with --print-stats. */
struct substats {
    uint32_t net;               /**< host byte order */
    uint32_t plen;
    uint64_t rate_bps;
    uint64_t queue_bytes;
    uint64_t delay_ns;          /**< after its rate, before the client */
    uint32_t port_lo;           /**< destination ports, 0-0: any packet */
    uint32_t port_hi;
    struct dstats d;
};

/** The shared stats file. */
struct stats {
    char magic[8];
    uint32_t size;
    uint32_t running;
    int64_t started_ns;
    int64_t reset_ns;
    uint64_t rate_bps;
    uint64_t delay_ns;
    uint64_t queue_bytes;
    uint64_t loss_ppb;
    uint64_t mtu;
    uint64_t late_ns;
    uint64_t ring_bytes;
    uint64_t seed;
    uint64_t rt_prio;
    uint64_t wakeups;
    uint64_t timer_wakeups;
    int64_t sched_origin_ns;    /**< rate steps and trace start here */
    uint64_t step_ns;           /**< length of one rate step, 0: no steps */
    uint64_t nsteps;
    uint64_t step_bps[MAX_STEPS];
    uint64_t trace_opps;        /**< opportunities per trace period, 0: none */
    uint64_t trace_period_ns;
    struct dstats d[2];
    uint64_t nsubs;
    struct substats sub[MAX_SUBS];
};

/** A packet in a ring, followed by its data. */
struct pkt {
    uint32_t len;
    uint32_t pad;
    int64_t due;
};

/** FIFO of variable-length packets in one contiguous buffer. */
struct ring {
    unsigned char *buf;
    size_t cap;
    size_t head;
    size_t tail;
    size_t used;
};

enum shape { SHAPE_RATE, SHAPE_STEPS, SHAPE_TRACE };

struct dir {
    const char *name;
    int in_fd;
    int out_fd;
    int readable;
    struct ring ring;
    enum shape shape;
    int64_t link_free;
    int64_t head_due;           /* a sub-link: its first packet's, or max */
    uint64_t ser_rem;
    uint64_t opp;               /* trace: opportunity of the last packet */
    uint32_t opp_left;          /* trace: bytes that opportunity has left */
    uint64_t rate_bps;          /* SHAPE_RATE's rate, 0: no limit */
    uint64_t queue_bytes;
    uint64_t delay_ns;
    uint64_t loss_ppb;
    uint32_t net;               /* a sub-link: the destinations it carries */
    uint32_t mask;
    uint32_t port_lo;           /* and their ports (0-0: any) */
    uint32_t port_hi;
    struct dir *subs;           /* s2c: the sub-links packets go on to */
    int nsubs;
    /* s2c: the sub-links holding packets (a bit each), so that a turn of
     * the loop visits those only, not all MAX_SUBS */
    uint64_t busy[MAX_SUBS / 64];
    /* s2c: a /32 sub-link without ports, by address (index + 1, 0: none;
     * the first given wins), and those that need a scan: prefixes, ports */
    uint16_t by_addr[SUB_HASH];
    uint16_t scan[MAX_SUBS];
    int nscan;
    struct dstats *st;
};

static struct stats *S;
static uint32_t *trace_ms;      /* opportunity times in one period, ms */
static uint64_t rng_state;
static FILE *log_fp;

static void vlogmsg(const char *fmt, va_list ap)
{
    FILE *f = log_fp ? log_fp : stderr;

    fprintf(f, "wanrelay: ");
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

static void logmsg(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlogmsg(fmt, ap);
    va_end(ap);
}

static void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlogmsg(fmt, ap);
    va_end(ap);
    exit(1);
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static uint64_t rng_next(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* ---- ring ---------------------------------------------------------- */

static void ring_init(struct ring *r, size_t cap)
{
    r->cap = align16(cap);
    r->buf = mmap(NULL, r->cap, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r->buf == MAP_FAILED) {
        die("cannot map %zu bytes of packet buffer: %s", r->cap,
            strerror(errno));
    }
    r->head = r->tail = r->used = 0;
}

/* Contiguous room for a packet of up to need bytes (header included). */
static struct pkt *ring_reserve(struct ring *r, size_t need)
{
    if (r->used == 0) {
        r->head = r->tail = 0;
    }
    if (r->tail >= r->head && r->used < r->cap) {
        if (r->cap - r->tail >= need) {
            return (struct pkt *)(r->buf + r->tail);
        }
        if (r->head >= need) {
            ((struct pkt *)(r->buf + r->tail))->len = WRAP_MARK;
            r->used += r->cap - r->tail;
            r->tail = 0;
            return (struct pkt *)r->buf;
        }
        return NULL;
    }
    if (r->tail < r->head && r->head - r->tail >= need) {
        return (struct pkt *)(r->buf + r->tail);
    }
    return NULL;
}

static void ring_commit(struct ring *r, uint32_t len)
{
    size_t sz = align16(HDR_SIZE + len);

    r->tail += sz;
    r->used += sz;
    if (r->tail == r->cap) {
        r->tail = 0;
    }
}

static struct pkt *ring_peek(struct ring *r)
{
    while (r->used > 0) {
        struct pkt *p = (struct pkt *)(r->buf + r->head);

        if (p->len != WRAP_MARK) {
            return p;
        }
        r->used -= r->cap - r->head;
        r->head = 0;
    }
    return NULL;
}

static void ring_pop(struct ring *r, uint32_t len)
{
    size_t sz = align16(HDR_SIZE + len);

    r->head += sz;
    r->used -= sz;
    if (r->head == r->cap) {
        r->head = 0;
    }
}

/* ---- the link ------------------------------------------------------ */

/* Relay only IPv4 within 198.18.0.0/15 (both addresses). */
static int packet_allowed(const unsigned char *p, ssize_t n)
{
    if (n < 20 || (p[0] >> 4) != 4) {
        return 0;
    }
    return p[12] == 198 && (p[13] & 0xfe) == 18
        && p[16] == 198 && (p[17] & 0xfe) == 18;
}

/* Rate steps: the rate in force at t (not before the origin), and when
 * that step ends. */
static uint64_t step_at(int64_t t, int64_t *end)
{
    uint64_t k = (uint64_t)(t - S->sched_origin_ns) / S->step_ns;

    *end = S->sched_origin_ns + (int64_t)((k + 1) * S->step_ns);
    return S->step_bps[k % S->nsteps];
}

/* Trace: the time of opportunity i, counted from the origin over all
 * repetitions. */
static int64_t opp_time(uint64_t i)
{
    return S->sched_origin_ns
        + (int64_t)(i / S->trace_opps * S->trace_period_ns)
        + trace_ms[i % S->trace_opps] * MSEC;
}

/* Trace: the first opportunity after t (those at or before t are gone). */
static uint64_t opp_after(int64_t t)
{
    uint64_t e, cycle, lo = 0, hi = S->trace_opps;

    if (t < S->sched_origin_ns) {
        return 0;
    }
    e = (uint64_t)(t - S->sched_origin_ns);
    cycle = e / S->trace_period_ns;
    e -= cycle * S->trace_period_ns;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;

        if ((uint64_t)trace_ms[mid] * MSEC <= e) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return cycle * S->trace_opps + lo;
}

/* Bytes not yet serialised at time now. */
static uint64_t backlog_bytes(const struct dir *d, int64_t now)
{
    unsigned __int128 x = 0;
    int64_t t = now, end;

    if (d->link_free <= now) {
        return 0;
    }
    switch (d->shape) {
    case SHAPE_TRACE:
        return (d->opp - opp_after(now) + 1) * OPP_BYTES - d->opp_left;
    case SHAPE_STEPS:
        while (t < d->link_free) {
            uint64_t r = step_at(t, &end);

            if (end > d->link_free) {
                end = d->link_free;
            }
            x += (unsigned __int128)(end - t) * r;
            t = end;
        }
        break;
    default:
        if (d->rate_bps == 0) {
            return 0;
        }
        x = (unsigned __int128)(d->link_free - now) * d->rate_bps;
    }
    return (uint64_t)((x + 8 * NSEC - 1) / (8 * NSEC));
}

/* Serialise len bytes over the rate steps from start; returns the end.
 * The remainder (a fraction of a nanosecond) is carried to the next
 * packet, as with a constant rate. */
static int64_t steps_finish(struct dir *d, uint32_t len, int64_t start)
{
    unsigned __int128 need = (unsigned __int128)len * 8 * NSEC + d->ser_rem;
    int64_t t = start, end;

    for (;;) {
        uint64_t r = step_at(t, &end);
        unsigned __int128 room = (unsigned __int128)(end - t) * r;

        if (need <= room) {
            d->ser_rem = (uint64_t)(need % r);
            return t + (int64_t)(need / r);
        }
        need -= room;
        t = end;
    }
}

/* Trace: the opportunity that carries the packet's last byte.  A link
 * that has gone idle lost what its past opportunities had left. */
static int64_t trace_finish(struct dir *d, uint32_t len, int64_t now)
{
    if (d->link_free <= now) {
        d->opp = opp_after(now);
        d->opp_left = OPP_BYTES;
    }
    while (len > d->opp_left) {
        len -= d->opp_left;
        d->opp++;
        d->opp_left = OPP_BYTES;
    }
    d->opp_left -= len;
    return opp_time(d->opp);
}

/* When the link has serialised a packet of len bytes arriving at now. */
static int64_t link_finish(struct dir *d, uint32_t len, int64_t now)
{
    int64_t start = d->link_free > now ? d->link_free : now;

    switch (d->shape) {
    case SHAPE_TRACE:
        return trace_finish(d, len, now);
    case SHAPE_STEPS:
        return steps_finish(d, len, start);
    default:
        if (d->rate_bps) {
            uint64_t t = (uint64_t)len * 8 * NSEC + d->ser_rem;

            start += (int64_t)(t / d->rate_bps);
            d->ser_rem = t % d->rate_bps;
        }
        return start;
    }
}

static void enqueue(struct dir *d, struct pkt *p, uint32_t len, int64_t now)
{
    struct dstats *st = d->st;
    uint64_t backlog = backlog_bytes(d, now);
    int64_t start;

    if (backlog > 0 && backlog + len > d->queue_bytes) {
        st->drop_queue++;
        st->drop_queue_bytes += len;
        return;
    }
    start = link_finish(d, len, now);
    d->link_free = start;
    st->link_free_ns = start;
    st->queue_last_bytes = backlog + len;
    if (backlog + len > st->queue_peak_bytes) {
        st->queue_peak_bytes = backlog + len;
    }
    if (d->loss_ppb
        && ((rng_next() >> 32) * 1000000000ULL >> 32) < d->loss_ppb) {
        st->drop_loss++;
        return;
    }
    p->len = len;
    p->due = start + (int64_t)d->delay_ns;
    ring_commit(&d->ring, len);
    st->held_packets++;
    st->held_bytes += len;
}

/* Read up to RX_BATCH packets; returns 0 when the device is drained. */
static int rx(struct dir *d)
{
    size_t need = align16(HDR_SIZE + S->mtu);
    static unsigned char scratch[65536];
    int i;

    for (i = 0; i < RX_BATCH; i++) {
        struct pkt *p = ring_reserve(&d->ring, need);
        unsigned char *buf = p ? (unsigned char *)(p + 1) : scratch;
        ssize_t n = read(d->in_fd, buf, S->mtu);

        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            if (errno == EINTR) {
                continue;
            }
            die("%s: read from TUN: %s", d->name, strerror(errno));
        }
        if (n == 0) {
            return 0;
        }
        d->st->rx_packets++;
        d->st->rx_bytes += (uint64_t)n;
        if (!p) {
            d->st->drop_nobuf++;
        }
        else if (!packet_allowed(buf, n)) {
            d->st->drop_filter++;
        }
        else {
            enqueue(d, p, (uint32_t)n, now_ns());
        }
    }
    return 1;
}

/* A destination address's slot in by_addr (open addressing). */
static unsigned sub_hash(uint32_t addr)
{
    return (addr * 2654435761u) >> 22;         /* 10 bits: SUB_HASH */
}

/* The destination port of a TCP or UDP packet (not a later fragment), or
 * -1. */
static int packet_dport(const unsigned char *b, uint32_t len)
{
    uint32_t ihl = (b[0] & 15u) * 4;

    if ((b[9] != 6 && b[9] != 17) || ((b[6] & 0x1f) | b[7])
        || ihl < 20 || len < ihl + 4) {
        return -1;
    }
    return b[ihl + 2] << 8 | b[ihl + 3];
}

/* The sub-link a packet leaving d goes on to, or NULL: the first given
 * that matches, a /32 found by its address, the others by a scan. */
static struct dir *sub_for(const struct dir *d, const struct pkt *p)
{
    const unsigned char *b = (const unsigned char *)(p + 1);
    uint32_t dst = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16
        | (uint32_t)b[18] << 8 | b[19];
    int best = INT_MAX, port = -2, i;
    unsigned h;

    for (h = sub_hash(dst); d->by_addr[h]; h = (h + 1) % SUB_HASH) {
        if (d->subs[d->by_addr[h] - 1].net == dst) {
            best = d->by_addr[h] - 1;
            break;
        }
    }
    for (i = 0; i < d->nscan && d->scan[i] < best; i++) {
        const struct dir *u = &d->subs[d->scan[i]];

        if ((dst & u->mask) != u->net) {
            continue;
        }
        if (u->port_hi) {
            if (port == -2) {
                port = packet_dport(b, p->len);
            }
            if (port < (int)u->port_lo || port > (int)u->port_hi) {
                continue;
            }
        }
        best = d->scan[i];
        break;
    }
    return best == INT_MAX ? NULL : &d->subs[best];
}

/* Index the sub-links for sub_for, in the order given. */
static void subs_index(struct dir *d)
{
    int i;

    for (i = 0; i < d->nsubs; i++) {
        const struct dir *u = &d->subs[i];
        unsigned h;

        if (u->mask != 0xffffffffu || u->port_hi) {
            d->scan[d->nscan++] = (uint16_t)i;
            continue;
        }
        for (h = sub_hash(u->net); d->by_addr[h]; h = (h + 1) % SUB_HASH) {
            if (d->subs[d->by_addr[h] - 1].net == u->net) {
                break;          /* an earlier one has it */
            }
        }
        if (!d->by_addr[h]) {
            d->by_addr[h] = (uint16_t)(i + 1);
        }
    }
}

/* A packet that has crossed the main link enters a sub-link at its due
 * time, not when the relay got round to it: the sub-link's queue is then
 * what it would be had the relay been on time. */
static void handoff(struct dir *d, struct dir *sub, const struct pkt *p)
{
    struct pkt *q = ring_reserve(&sub->ring, align16(HDR_SIZE + p->len));
    int k = (int)(sub - d->subs);

    sub->st->rx_packets++;
    sub->st->rx_bytes += p->len;
    if (!q) {
        sub->st->drop_nobuf++;
        return;
    }
    memcpy(q + 1, p + 1, p->len);
    enqueue(sub, q, p->len, p->due);
    if (sub->st->held_packets && !(d->busy[k / 64] & 1ull << (k % 64))) {
        d->busy[k / 64] |= 1ull << (k % 64);
        sub->head_due = q->due;         /* it was empty: q is its first */
    }
}

/* Write out the packets that are due (or hand them to their sub-link).
 * Returns the next due time. */
static int64_t tx(struct dir *d)
{
    struct dstats *st = d->st;
    struct pkt *p;
    int i;

    for (i = 0; i < TX_BATCH && (p = ring_peek(&d->ring)); i++) {
        int64_t now = now_ns();
        struct dir *sub = d->nsubs ? sub_for(d, p) : NULL;
        uint64_t late;
        ssize_t n;

        if (p->due > now) {
            return p->due;
        }
        late = (uint64_t)(now - p->due);
        if (sub) {
            handoff(d, sub, p);
            n = p->len;
        }
        else {
            n = write(d->out_fd, p + 1, p->len);
        }
        if (n < 0) {
            st->write_errors++;
        }
        else {
            st->tx_packets++;
            st->tx_bytes += p->len;
        }
        st->late_sum_ns += late;
        if (late > S->late_ns) {
            st->late++;
        }
        if (late > st->late_max_ns) {
            st->late_max_ns = late;
        }
        st->held_packets--;
        st->held_bytes -= p->len;
        ring_pop(&d->ring, p->len);
    }
    p = ring_peek(&d->ring);
    return p ? p->due : INT64_MAX;
}

/* Zero one link's counters, keeping what is held and when it is free. */
static void reset_dstats(struct dstats *st)
{
    uint64_t hp = st->held_packets, hb = st->held_bytes;
    int64_t lf = st->link_free_ns;

    memset(st, 0, sizeof(*st));
    st->held_packets = hp;
    st->held_bytes = hb;
    st->link_free_ns = lf;
}

static void reset_counters(struct dir *dirs)
{
    int i;

    for (i = 0; i < 2; i++) {
        reset_dstats(dirs[i].st);
    }
    for (i = 0; i < dirs[0].nsubs; i++) {
        reset_dstats(dirs[0].subs[i].st);
    }
    S->wakeups = S->timer_wakeups = 0;
    S->reset_ns = now_ns();
    /* the schedule starts again with the counters, so a window measured
     * from a reset sees the same steps or trace every time; packets
     * already queued keep their times */
    S->sched_origin_ns = S->reset_ns;
    for (i = 0; i < 2; i++) {
        if (dirs[i].shape == SHAPE_TRACE) {
            dirs[i].link_free = 0;      /* opportunity indices start over */
        }
    }
}

/* Deliver what is due on both directions and the sub-links that hold
 * packets (after the main link, which feeds them); returns the next due
 * time. */
static int64_t tx_all(struct dir *dirs)
{
    struct dir *d = &dirs[0];
    int64_t next = tx(d), nx, now = now_ns();
    int w;

    for (w = 0; w < MAX_SUBS / 64; w++) {
        uint64_t bits = d->busy[w];

        while (bits) {
            struct dir *u = &d->subs[w * 64 + __builtin_ctzll(bits)];

            bits &= bits - 1;
            if (u->head_due <= now) {
                u->head_due = tx(u);
                if (!u->st->held_packets) {
                    d->busy[w] &= ~(1ull << ((u - d->subs) % 64));
                }
            }
            next = u->head_due < next ? u->head_due : next;
        }
    }
    nx = tx(&dirs[1]);
    return nx < next ? nx : next;
}

/*
 * Wait for the TUN devices, the signals, or the next due time.  The due
 * time is an epoll_pwait2() timeout (nanoseconds, CLOCK_MONOTONIC); on
 * kernels without it, a timerfd armed at the absolute due time.
 */
struct waiter {
    int ep;
    int tfd;                    /* -1 while epoll_pwait2 works */
    int64_t armed;              /* timerfd: absolute expiry armed, 0 if none */
};

static int wait_events(struct waiter *w, struct epoll_event *evs, int max,
                       int64_t next)
{
    if (w->tfd < 0) {
        struct timespec ts, *tp = NULL;
        int n;

        if (next != INT64_MAX) {
            int64_t d = next - now_ns();

            if (d < 0) {
                d = 0;
            }
            ts.tv_sec = d / NSEC;
            ts.tv_nsec = d % NSEC;
            tp = &ts;
        }
        n = epoll_pwait2(w->ep, evs, max, tp, NULL);
        if (n == 0) {
            S->timer_wakeups++;
        }
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
        /* no epoll_pwait2: fall back to a timerfd from now on */
        w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (w->tfd < 0) {
            die("timerfd_create: %s", strerror(errno));
        }
        evs[0].events = EPOLLIN;
        evs[0].data.u32 = 2;
        epoll_ctl(w->ep, EPOLL_CTL_ADD, w->tfd, &evs[0]);
        w->armed = 0;
    }
    if (next != w->armed) {
        struct itimerspec its;

        memset(&its, 0, sizeof(its));
        if (next != INT64_MAX) {
            its.it_value.tv_sec = next / NSEC;
            its.it_value.tv_nsec = next % NSEC;
        }
        /* next == INT64_MAX disarms: epoll then blocks until a read */
        if (timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
            die("timerfd_settime: %s", strerror(errno));
        }
        w->armed = next == INT64_MAX ? 0 : next;
    }
    return epoll_wait(w->ep, evs, max, -1);
}

static void run(struct dir *dirs, int sfd)
{
    struct waiter w = { .ep = epoll_create1(EPOLL_CLOEXEC), .tfd = -1 };
    struct epoll_event ev;
    int64_t next = INT64_MAX;
    int i;

    if (w.ep < 0) {
        die("epoll_create1: %s", strerror(errno));
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u32 = 0;
    epoll_ctl(w.ep, EPOLL_CTL_ADD, dirs[0].in_fd, &ev);
    ev.data.u32 = 1;
    epoll_ctl(w.ep, EPOLL_CTL_ADD, dirs[1].in_fd, &ev);
    ev.data.u32 = 3;
    epoll_ctl(w.ep, EPOLL_CTL_ADD, sfd, &ev);

    for (;;) {
        struct epoll_event evs[8];
        int n = wait_events(&w, evs, 8, next);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("epoll_wait: %s", strerror(errno));
        }
        S->wakeups++;
        for (i = 0; i < n; i++) {
            uint32_t k = evs[i].data.u32;

            if (k < 2) {
                dirs[k].readable = 1;
            }
            else if (k == 2) {
                uint64_t exp;

                if (read(w.tfd, &exp, sizeof(exp)) > 0) {
                    S->timer_wakeups++;
                }
                w.armed = 0;    /* consumed: must be re-armed */
            }
            else {
                struct signalfd_siginfo si;

                if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    if (si.ssi_signo == SIGUSR1) {
                        reset_counters(dirs);
                    }
                    else {
                        logmsg("signal %u, stopping", si.ssi_signo);
                        return;
                    }
                }
            }
        }
        /* deliver what is due first: reading may take a while */
        tx_all(dirs);
        for (i = 0; i < 2; i++) {
            if (dirs[i].readable) {
                dirs[i].readable = rx(&dirs[i]);
            }
        }
        next = tx_all(dirs);
        /* a device left readable (batch limit) is reported again at once:
         * epoll is level-triggered */
    }
}

/* ---- set-up ---------------------------------------------------------- */

static int open_tun(const char *ns, const char *dev)
{
    char path[PATH_MAX];
    struct ifreq ifr;
    int nsfd, fd;

    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        die("cannot open network namespace %s: %s", path, strerror(errno));
    }
    if (setns(nsfd, CLONE_NEWNET) < 0) {
        die("setns(%s): %s", path, strerror(errno));
    }
    close(nsfd);
    /* the TUN device is created in the namespace current at open() */
    fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        die("open /dev/net/tun: %s", strerror(errno));
    }
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        die("TUNSETIFF %s in %s: %s", dev, ns, strerror(errno));
    }
    return fd;
}

static uint64_t parse_u64(const char *opt, const char *s)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        die("%s: not a non-negative integer: '%s'", opt, s);
    }
    return v;
}

/* --step-bps R1,R2,...: up to MAX_STEPS rates, each > 0. */
static void parse_steps(const char *s)
{
    char *end;

    while (*s) {
        unsigned long long v;

        if (S->nsteps == MAX_STEPS) {
            die("--step-bps: at most %d steps", MAX_STEPS);
        }
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || v == 0 || (*end && *end != ',')
            || s[0] == '-') {
            die("--step-bps: not a list of positive integers: '%s'", s);
        }
        S->step_bps[S->nsteps++] = v;
        s = *end ? end + 1 : end;
    }
}

/* mahimahi's trace format: one time in ms per line, nondecreasing, the
 * last one (the period) above 0. */
static void load_trace(const char *file)
{
    FILE *f = fopen(file, "r");
    char line[64];
    size_t n = 0, cap = 0, lineno = 0;

    if (!f) {
        die("--trace %s: %s", file, strerror(errno));
    }
    while (fgets(line, sizeof(line), f)) {
        char *end;
        unsigned long v;

        lineno++;
        errno = 0;
        v = strtoul(line, &end, 10);
        while (*end == '\r' || *end == '\n' || *end == ' ') {
            end++;
        }
        if (errno || end == line || *end || line[0] == '-' || v > UINT32_MAX
            || (n && v < trace_ms[n - 1])) {
            die("--trace %s:%zu: not a time in ms at or after the line "
                "before: '%.20s'", file, lineno, line);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            trace_ms = realloc(trace_ms, cap * sizeof(*trace_ms));
            if (!trace_ms) {
                die("--trace %s: out of memory", file);
            }
        }
        trace_ms[n++] = (uint32_t)v;
    }
    fclose(f);
    if (n == 0 || trace_ms[n - 1] == 0) {
        die("--trace %s: no opportunities, or a last time of 0 ms", file);
    }
    S->trace_opps = n;
    S->trace_period_ns = (uint64_t)trace_ms[n - 1] * MSEC;
}

/* Trace: the most bytes the link carries within any span of span_ns
 * (one period, wrap-around ignored), to size the packet buffer. */
static uint64_t trace_peak_bytes(uint64_t span_ns)
{
    uint64_t i, j = 0, best = 0;

    for (i = 0; i < S->trace_opps; i++) {
        while ((trace_ms[i] - trace_ms[j]) * (uint64_t)MSEC > span_ns) {
            j++;
        }
        if (i - j + 1 > best) {
            best = i - j + 1;
        }
    }
    return best * OPP_BYTES;
}

/* A fixed-rate link's backlog at now, from its counters. */
static uint64_t backlog_now(const struct dstats *d, uint64_t rate, int64_t now)
{
    if (!rate || d->link_free_ns <= now) {
        return 0;
    }
    return (uint64_t)((unsigned __int128)(d->link_free_ns - now) * rate
                      / (8 * NSEC));
}

/* One link's counters as PREFIX_name=value lines. */
static void dstats_print(const char *p, const struct dstats *d, uint64_t q)
{
    printf("%s_rx_packets=%" PRIu64 "\n", p, d->rx_packets);
    printf("%s_rx_bytes=%" PRIu64 "\n", p, d->rx_bytes);
    printf("%s_tx_packets=%" PRIu64 "\n", p, d->tx_packets);
    printf("%s_tx_bytes=%" PRIu64 "\n", p, d->tx_bytes);
    printf("%s_drops_queue=%" PRIu64 "\n", p, d->drop_queue);
    printf("%s_drops_queue_bytes=%" PRIu64 "\n", p, d->drop_queue_bytes);
    printf("%s_drops_loss=%" PRIu64 "\n", p, d->drop_loss);
    printf("%s_drops_nobuf=%" PRIu64 "\n", p, d->drop_nobuf);
    printf("%s_drops_filtered=%" PRIu64 "\n", p, d->drop_filter);
    printf("%s_write_errors=%" PRIu64 "\n", p, d->write_errors);
    printf("%s_late=%" PRIu64 "\n", p, d->late);
    printf("%s_late_max_us=%.1f\n", p, d->late_max_ns / 1e3);
    printf("%s_late_mean_us=%.1f\n", p, d->tx_packets + d->write_errors
           ? d->late_sum_ns / 1e3 / (d->tx_packets + d->write_errors) : 0.0);
    printf("%s_queue_peak_bytes=%" PRIu64 "\n", p, d->queue_peak_bytes);
    printf("%s_queue_now_bytes=%" PRIu64 "\n", p, q);
    printf("%s_held_packets=%" PRIu64 "\n", p, d->held_packets);
}

static void stats_print(const char *file)
{
    int fd = open(file, O_RDONLY);
    struct stats st;
    int64_t now = now_ns();
    int i;

    if (fd < 0) {
        die("%s: %s", file, strerror(errno));
    }
    if (read(fd, &st, sizeof(st)) != (ssize_t)sizeof(st)
        || memcmp(st.magic, STATS_MAGIC, 8) || st.size != sizeof(st)) {
        die("%s: not a wanrelay stats file (or another version)", file);
    }
    close(fd);
    printf("relay_running=%u\n", st.running);
    printf("uptime_s=%.3f\n", (now - st.started_ns) / 1e9);
    printf("counters_since_s=%.3f\n", (now - st.reset_ns) / 1e9);
    printf("rate_bps=%" PRIu64 "\n", st.rate_bps);
    printf("one_way_delay_us=%.3f\n", st.delay_ns / 1e3);
    printf("queue_bytes=%" PRIu64 "\n", st.queue_bytes);
    printf("loss_pct=%.4f\n", st.loss_ppb / 1e7);
    printf("mtu=%" PRIu64 "\n", st.mtu);
    printf("late_threshold_us=%.1f\n", st.late_ns / 1e3);
    printf("buffer_bytes_per_dir=%" PRIu64 "\n", st.ring_bytes);
    printf("seed=%" PRIu64 "\n", st.seed);
    printf("rt_prio=%" PRIu64 "\n", st.rt_prio);
    printf("wakeups=%" PRIu64 "\n", st.wakeups);
    printf("timer_wakeups=%" PRIu64 "\n", st.timer_wakeups);
    printf("schedule_s=%.3f\n", (now - st.sched_origin_ns) / 1e9);
    if (st.step_ns) {
        int64_t end;

        S = &st;                /* step_at() reads the schedule from S */
        printf("step_s=%.3f\n", st.step_ns / 1e9);
        printf("s2c_rate_now_bps=%" PRIu64 "\n", step_at(now, &end));
        printf("s2c_rate_next_change_s=%.3f\n", (end - now) / 1e9);
    }
    if (st.trace_opps) {
        printf("trace_opportunities=%" PRIu64 "\n", st.trace_opps);
        printf("trace_period_ms=%" PRIu64 "\n", st.trace_period_ns / (uint64_t)MSEC);
        printf("trace_mean_bps=%.0f\n",
               st.trace_opps * OPP_BYTES * 8 * 1e9 / st.trace_period_ns);
    }
    for (i = 0; i < 2; i++) {
        const struct dstats *d = &st.d[i];
        uint64_t q = 0;

        if (i == 0 && (st.step_ns || st.trace_opps)) {
            /* a schedule: the backlog as the last arrival saw it */
            q = d->link_free_ns > now ? d->queue_last_bytes : 0;
        }
        else {
            q = backlog_now(d, st.rate_bps, now);
        }
        dstats_print(i == 0 ? "s2c" : "c2s", d, q);
    }
    for (i = 0; i < (int)st.nsubs && i < MAX_SUBS; i++) {
        const struct substats *u = &st.sub[i];
        char p[16];

        snprintf(p, sizeof(p), "sub%d", i + 1);
        printf("%s_prefix=%u.%u.%u.%u/%u\n", p, u->net >> 24,
               (u->net >> 16) & 255, (u->net >> 8) & 255, u->net & 255,
               u->plen);
        printf("%s_rate_bps=%" PRIu64 "\n", p, u->rate_bps);
        printf("%s_queue_bytes=%" PRIu64 "\n", p, u->queue_bytes);
        printf("%s_delay_us=%.3f\n", p, u->delay_ns / 1e3);
        if (u->port_hi) {
            printf("%s_ports=%u-%u\n", p, u->port_lo, u->port_hi);
        }
        dstats_print(p, &u->d, backlog_now(&u->d, u->rate_bps, now));
    }
    printf("subs=%" PRIu64 "\n", st.nsubs);
}

/* --sub NET/PLEN:RATE_BPS:QUEUE_BYTES[:DELAY_NS[:LO-HI]], NET inside
 * 198.18.0.0/15 (what the relay carries), RATE_BPS above 0, DELAY_NS at
 * most 60 s, ports 1 <= LO <= HI <= 65535. */
static void parse_sub(const char *v, struct substats *u)
{
    unsigned a, b, c, d, plen, lo = 0, hi = 0;
    unsigned long long rate, queue, delay = 0;
    int n = 0, k;

    k = sscanf(v, "%u.%u.%u.%u/%u:%llu:%llu%n:%llu%n:%u-%u%n", &a, &b, &c,
               &d, &plen, &rate, &queue, &n, &delay, &n, &lo, &hi, &n);
    if ((k != 7 && k != 8 && k != 10) || v[n] || a > 255 || b > 255
        || c > 255 || d > 255 || plen > 32 || rate == 0
        || delay > 60 * NSEC || (k == 10 && (lo == 0 || lo > hi
                                             || hi > 65535))) {
        die("--sub: NET/PLEN:RATE_BPS:QUEUE_BYTES[:DELAY_NS[:LO-HI]], "
            "not '%s'", v);
    }
    u->plen = plen;
    u->net = (a << 24 | b << 16 | c << 8 | d)
        & (plen ? 0xffffffffu << (32 - plen) : 0);
    if (plen < 15 || (u->net >> 17) != (198u << 7 | 18u >> 1)) {
        die("--sub %s: not inside 198.18.0.0/15", v);
    }
    u->rate_bps = rate;
    u->queue_bytes = queue;
    u->delay_ns = delay;
    u->port_lo = lo;
    u->port_hi = hi;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: wanrelay --server-ns NS --client-ns NS --dev NAME "
            "--rate-bps N --delay-ns N\n"
            "                --queue-bytes N --mtu N --late-ns N "
            "--stats FILE [--loss-ppb N] [--seed N]\n"
            "                [--rt-prio N] [--step-bps R1,R2,... --step-ns N | "
            "--trace FILE]\n"
            "                [--sub NET/PLEN:RATE_BPS:QUEUE_BYTES"
            "[:DELAY_NS[:LO-HI]] ...]\n"
            "                [--pidfile FILE --log FILE]   "
            "(daemonises when --pidfile is given)\n"
            "       wanrelay --print-stats FILE\n"
            "Internal tool of t/wan/wanlab; use that instead.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *sns = NULL, *cns = NULL, *dev = NULL, *statsfile = NULL;
    const char *pidfile = NULL, *logfile = NULL, *steps = NULL, *trace = NULL;
    uint64_t rate = 0, delay = 0, queue = 0, loss = 0, mtu = 0, late = 0;
    uint64_t seed = 0, rtprio = 0, step_ns = 0, s2c_rate;
    int have_rate = 0, have_delay = 0, have_queue = 0, have_late = 0;
    static struct dir dirs[2], subs[MAX_SUBS];  /* large: not on the stack */
    const char *subargs[MAX_SUBS];
    int nsubs = 0;
    size_t ringcap;
    sigset_t mask;
    int i, fd, sfd, orig_ns, tun_s, tun_c;
    size_t j;
    /* each --name VALUE: a string, or a number; "given" for the required */
    const struct {
        const char *name;
        const char **str;
        uint64_t *num;
        int *given;
    } opts[] = {
        {"--server-ns", &sns, NULL, NULL},
        {"--client-ns", &cns, NULL, NULL},
        {"--dev", &dev, NULL, NULL},
        {"--stats", &statsfile, NULL, NULL},
        {"--pidfile", &pidfile, NULL, NULL},
        {"--log", &logfile, NULL, NULL},
        {"--rate-bps", NULL, &rate, &have_rate},
        {"--delay-ns", NULL, &delay, &have_delay},
        {"--queue-bytes", NULL, &queue, &have_queue},
        {"--loss-ppb", NULL, &loss, NULL},
        {"--mtu", NULL, &mtu, NULL},
        {"--late-ns", NULL, &late, &have_late},
        {"--seed", NULL, &seed, NULL},
        {"--rt-prio", NULL, &rtprio, NULL},
        {"--step-bps", &steps, NULL, NULL},
        {"--step-ns", NULL, &step_ns, NULL},
        {"--trace", &trace, NULL, NULL},
    };
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

    for (i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(o, "--print-stats") && v) {
            stats_print(v);
            return 0;
        }
        if (i == 1) {
            /* a daemon must not hold its caller's pipes (or locks) open */
            closefrom(3);
        }
        if (!v) {
            usage();
        }
        i++;
        if (!strcmp(o, "--sub")) {
            if (nsubs == MAX_SUBS) {
                die("--sub: at most %d sub-links", MAX_SUBS);
            }
            subargs[nsubs++] = v;
            continue;
        }
        for (j = 0; j < NOPTS && strcmp(o, opts[j].name); j++) {
        }
        if (j == NOPTS) {
            usage();
        }
        if (opts[j].str) {
            *opts[j].str = v;
        }
        else {
            *opts[j].num = parse_u64(o, v);
        }
        if (opts[j].given) {
            *opts[j].given = 1;
        }
    }
    if (!sns || !cns || !dev || !statsfile || !have_rate || !have_delay
        || !have_queue || !have_late || !mtu) {
        usage();
    }
    if (mtu < 576 || mtu > 65535) {
        die("--mtu must be 576..65535");
    }
    if (loss > 1000000000ULL) {
        die("--loss-ppb must be at most 1e9");
    }
    if (rtprio > 99) {
        die("--rt-prio must be 0..99");
    }
    if (delay > 60 * NSEC) {
        die("--delay-ns must be at most 60 s");
    }
    if (!steps != !step_ns || (steps && trace)) {
        die("--step-bps goes with --step-ns, and not with --trace");
    }
    if (step_ns && step_ns < MSEC) {
        die("--step-ns must be at least 1 ms");
    }

    /* stats file */
    fd = open(statsfile, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct stats)) < 0) {
        die("%s: %s", statsfile, strerror(errno));
    }
    S = mmap(NULL, sizeof(struct stats), PROT_READ | PROT_WRITE, MAP_SHARED,
             fd, 0);
    if (S == MAP_FAILED) {
        die("mmap %s: %s", statsfile, strerror(errno));
    }
    close(fd);
    memset(S, 0, sizeof(*S));
    s2c_rate = rate;
    if (steps) {
        parse_steps(steps);
        S->step_ns = step_ns;
        for (j = 0; j < S->nsteps; j++) {
            if (S->step_bps[j] > s2c_rate) {
                s2c_rate = S->step_bps[j];
            }
        }
    }
    if (trace) {
        load_trace(trace);
    }

    /* room for the queue plus one delay's worth of line-rate traffic,
     * twice over for small packets (16-byte header each) */
    {
        double inflight = (double)s2c_rate / 8 * (double)delay / 1e9;
        double cap = 2.0 * (queue + inflight) + 64.0 * (mtu + 32)
            + (1 << 20);

        if (trace) {
            /* the trace's densest stretch of one delay, either way */
            uint64_t peak = trace_peak_bytes(delay);

            cap = 2.0 * (queue + (double)(peak > inflight ? peak : inflight))
                + 64.0 * (mtu + 32) + (1 << 20);
        }
        if (rate == 0) {
            /* no rate (the reverse direction of a schedule may have none):
             * what one delay holds at 10 Gbit/s, or more */
            double unshaped = 2.0 * 10e9 / 8 * (double)delay / 1e9
                + RING_UNSHAPED;

            cap = cap > unshaped ? cap : unshaped;
        }
        ringcap = cap < RING_MIN ? RING_MIN
            : cap > RING_MAX ? RING_MAX : (size_t)cap;
    }

    memcpy(S->magic, STATS_MAGIC, 8);
    S->size = sizeof(*S);
    S->rate_bps = rate;
    S->delay_ns = delay;
    S->queue_bytes = queue;
    S->loss_ppb = loss;
    S->mtu = mtu;
    S->late_ns = late;
    S->ring_bytes = ringcap;
    S->started_ns = S->reset_ns = S->sched_origin_ns = now_ns();
    if (!seed) {
        seed = (uint64_t)S->started_ns ^ ((uint64_t)getpid() << 32);
    }
    S->seed = seed;
    rng_state = seed ? seed : 1;

    /* one TUN device in each namespace, then back home */
    orig_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (orig_ns < 0) {
        die("/proc/self/ns/net: %s", strerror(errno));
    }
    tun_s = open_tun(sns, dev);
    tun_c = open_tun(cns, dev);
    if (setns(orig_ns, CLONE_NEWNET) < 0) {
        die("setns(back): %s", strerror(errno));
    }
    close(orig_ns);

    memset(dirs, 0, sizeof(dirs));
    dirs[0].name = "s2c";
    dirs[0].in_fd = tun_s;
    dirs[0].out_fd = tun_c;
    dirs[0].st = &S->d[0];
    dirs[0].shape = steps ? SHAPE_STEPS : trace ? SHAPE_TRACE : SHAPE_RATE;
    dirs[1].name = "c2s";
    dirs[1].in_fd = tun_c;
    dirs[1].out_fd = tun_s;
    dirs[1].st = &S->d[1];
    for (i = 0; i < 2; i++) {
        dirs[i].rate_bps = rate;
        dirs[i].queue_bytes = queue;
        dirs[i].delay_ns = delay;
        dirs[i].loss_ppb = loss;
        ring_init(&dirs[i].ring, ringcap);
    }
    memset(subs, 0, sizeof(subs));
    for (i = 0; i < nsubs; i++) {
        struct substats *u = &S->sub[i];

        parse_sub(subargs[i], u);
        subs[i].name = "sub";
        subs[i].in_fd = -1;
        subs[i].out_fd = tun_c;
        subs[i].st = &u->d;
        subs[i].shape = SHAPE_RATE;
        subs[i].rate_bps = u->rate_bps;
        subs[i].queue_bytes = u->queue_bytes;
        subs[i].delay_ns = u->delay_ns;
        subs[i].net = u->net;
        subs[i].mask = u->plen ? 0xffffffffu << (32 - u->plen) : 0;
        subs[i].port_lo = u->port_lo;
        subs[i].port_hi = u->port_hi;
        /* the queue, a packet on the link and one delay's worth of the
         * link's traffic, twice over for the 16-byte header of small
         * packets */
        ring_init(&subs[i].ring, 3 * (u->queue_bytes + mtu)
                  + 2 * (size_t)((double)u->rate_bps / 8 * u->delay_ns / 1e9)
                  + 64 * (mtu + 32));
    }
    S->nsubs = (uint64_t)nsubs;
    dirs[0].subs = subs;
    dirs[0].nsubs = nsubs;
    subs_index(&dirs[0]);

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        die("signalfd: %s", strerror(errno));
    }
    /* wake up at the due time, not up to 50 us later */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    if (pidfile) {
        pid_t pid;
        char tmp[PATH_MAX];
        FILE *pf;

        if (logfile) {
            log_fp = fopen(logfile, "a");
        }
        pid = fork();
        if (pid < 0) {
            die("fork: %s", strerror(errno));
        }
        if (pid > 0) {
            snprintf(tmp, sizeof(tmp), "%s.tmp", pidfile);
            pf = fopen(tmp, "w");
            if (!pf || fprintf(pf, "%d\n", (int)pid) < 0 || fclose(pf)
                || rename(tmp, pidfile) < 0) {
                kill(pid, SIGTERM);
                die("cannot write %s: %s", pidfile, strerror(errno));
            }
            _exit(0);
        }
        setsid();
        if (chdir("/") < 0) {
            die("chdir /: %s", strerror(errno));
        }
        fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(log_fp ? fileno(log_fp) : fd, 2);
            if (fd > 2) {
                close(fd);
            }
        }
    }
    /* a link does not wait for a busy CPU: with a real-time priority the
     * relay preempts the servers and clients it carries traffic for */
    if (rtprio) {
        struct sched_param sp = { .sched_priority = (int)rtprio };

        if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0) {
            logmsg("cannot use SCHED_FIFO %d (%s); running without",
                   sp.sched_priority, strerror(errno));
            rtprio = 0;
        }
    }
    S->rt_prio = rtprio;
    S->running = 1;
    logmsg("running: rate %" PRIu64 " bit/s, one-way delay %" PRIu64
           " ns, queue %" PRIu64 " bytes, loss %" PRIu64 " ppb, mtu %" PRIu64,
           rate, delay, queue, loss, mtu);
    if (steps) {
        logmsg("server to client: rate steps %s bit/s, %" PRIu64
               " ns each, repeating", steps, step_ns);
    }
    if (trace) {
        logmsg("server to client: trace %s, %" PRIu64 " opportunities of %u"
               " bytes every %" PRIu64 " ms", trace, S->trace_opps, OPP_BYTES,
               S->trace_period_ns / (uint64_t)MSEC);
    }
    for (i = 0; i < nsubs; i++) {
        logmsg("sub-link %d: %s (bit/s, queue bytes[, delay ns[, ports]])",
               i + 1, subargs[i]);
    }
    run(dirs, sfd);
    S->running = 0;
    return 0;
}
