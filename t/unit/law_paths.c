/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/law_paths.c: the promise of SndbufTune auto, on modelled paths
 * (TAP, make unit): never slower than doing nothing.  A flow the law
 * holds below its window must not deliver short of its peak for long
 * unless its crowd (this server's flows in the same bottleneck) does not;
 * else it is released.  Each case runs the real law (sndbuf_law.c) for
 * every flow of a fluid model of the paths issue reports measured: two
 * users behind one NAT on paths of their own, a long fat link with a
 * bloated queue, a home link that carries another sender's bulk flow, a
 * crowd of downloads through one bottleneck, alone and beside such a
 * flow.  The kernel's dynamics are not modelled closely (the WAN tests
 * and make bench measure them); what is checked is the law's answer to
 * what each look shows.
 *
 * The model, per link of capacity C, each flow i with base RTT R_i: its
 * window W_i is the least of its congestion window (2 x its share of C
 * x R_i, as BBR's) and what its buffer holds (4/3 of a locked size: the
 * kernel doubles it, and a third goes to overhead); the queue is what
 * the windows hold beyond the path (at most the link's queue limit),
 * and each flow gets its window's part of C.  Another sender keeps the
 * queue at least at its standing level, and takes what is left.
 */

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../sndbuf_law.h"
#include "tap.h"

#define MSS         1448
#define TICK_US     10000
#define MAX_FLOWS   16
#define MAX_SECONDS 120

typedef struct {
    double cap;                 /* B/s */
    double limit;               /* queue limit, bytes */
    double foreign;             /* another sender's standing queue, bytes */
    int foreign_from_s;
    double queue;               /* now, bytes */
    double sum[MAX_SECONDS];    /* what our flows delivered each second */
} link_t;

typedef struct {
    int link;
    int64_t start_us;           /* its request arrives */
    uint32_t rtt_us;
    sbt_law_limits_t lim;
    sbt_law_t law;
    int cur;                    /* SO_SNDBUF locked; 0: autotuned */
    int64_t next_us;
    double delivered, rate, limited_us;
    /* For the checks, from 10 s on: delivered, time steered and short of
     * the flow's own peak (the longest stretch), and looks contested. */
    double got;
    int64_t short_since_us, longest_short_us;
    int contested_looks;
    double peak_s[MAX_SECONDS];
    double sec[MAX_SECONDS];    /* delivered in each second */
} flow_t;

typedef struct {
    link_t link[2];
    flow_t flow[MAX_FLOWS];
    int nflows;
    int64_t now_us;
} world_t;

/* ok(), its name a format: the figure it judged said either way. */
static void okf(int cond, const char *fmt, ...)
{
    char name[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    ok(cond, name);
}

static sbt_law_limits_t lab(void)
{
    sbt_law_limits_t lim = {0};

    lim.limit_min = 8192;
    lim.limit_max = 4194304;
    lim.wmem_max = 4194304;
    lim.tcp_wmem_initial = 16384;
    lim.tcp_wmem_max = 4194304;
    return lim;
}

static int on(const world_t *w, const flow_t *f, int k)
{
    return f->link == k && w->now_us >= f->start_us;
}

static int link_flows(const world_t *w, int k)
{
    int i, n = 0;

    for (i = 0; i < w->nflows; i++) {
        n += on(w, &w->flow[i], k);
    }
    return n;
}

static int foreign_on(const world_t *w, const link_t *l)
{
    return l->foreign > 0 && w->now_us >= (int64_t)l->foreign_from_s * 1000000;
}

/* The congestion window: BBR's two BDPs of its share of the link. */
static double cwnd_of(const world_t *w, const flow_t *f)
{
    const link_t *l = &w->link[f->link];
    int n = link_flows(w, f->link) + foreign_on(w, l);

    return 2.0 * l->cap / n * f->rtt_us / 1e6;
}

static double window_of(const world_t *w, const flow_t *f)
{
    double cwnd = cwnd_of(w, f);
    double held = f->cur ? f->cur * 10.0 / 9.0 : cwnd;

    return held < cwnd ? held : cwnd;
}

/* One tick of the links: queues and each flow's rate. */
static void tick(world_t *w)
{
    int k, i;

    for (k = 0; k < 2; k++) {
        link_t *l = &w->link[k];
        double sum = 0, bdp = 0;
        int n = 0;

        for (i = 0; i < w->nflows; i++) {
            if (on(w, &w->flow[i], k)) {
                sum += window_of(w, &w->flow[i]);
                bdp += l->cap * w->flow[i].rtt_us / 1e6;
                n++;
            }
        }
        if (!n) {
            continue;
        }
        bdp /= n;
        l->queue = sum > bdp ? sum - bdp : 0;
        if (foreign_on(w, l) && l->queue < l->foreign) {
            l->queue = l->foreign;
        }
        l->queue = l->queue > l->limit ? l->limit : l->queue;
        for (i = 0; i < w->nflows; i++) {
            flow_t *f = &w->flow[i];

            if (!on(w, f, k)) {
                continue;
            }
            f->rate = window_of(w, f) / (f->rtt_us / 1e6 + l->queue / l->cap);
            if (!foreign_on(w, l) && sum > bdp) {
                f->rate = l->cap * window_of(w, f) / sum;
            }
            f->delivered += f->rate * TICK_US / 1e6;
            f->sec[w->now_us / 1000000] += f->rate * TICK_US / 1e6;
            if (f->cur && f->cur * 4.0 / 3.0 < cwnd_of(w, f)) {
                f->limited_us += TICK_US;
            }
            l->sum[w->now_us / 1000000] += f->rate * TICK_US / 1e6;
        }
    }
}

/* The crowd's figures sndbuf_path.c would give flow @a f: the other
 * flows on its link (at its RTT), their rate in the last whole second
 * and in the one of the last 16 in which @a f's was highest. */
static void crowd_of(const world_t *w, const flow_t *f, sbt_law_sample_t *s)
{
    int now = (int)(w->now_us / 1000000) - 1, then = now, k, i;

    for (k = now; k >= 0 && k > now - 16; k--) {
        then = f->sec[k] > f->sec[then] ? k : then;
    }
    s->crowd_own_then = now >= 0 ? (uint64_t)f->sec[then] : 0;
    for (i = 0; i < w->nflows && now >= 0; i++) {
        const flow_t *o = &w->flow[i];

        if (o != f && on(w, o, f->link)) {
            s->crowd_members++;
            s->crowd_rate += (uint64_t)o->sec[now];
            s->crowd_rate_then += (uint64_t)o->sec[then];
        }
    }
}

static sbt_law_sample_t sample_of(const world_t *w, const flow_t *f)
{
    const link_t *l = &w->link[f->link];
    sbt_law_sample_t s = {0};

    s.now_us = w->now_us + 2500000;     /* a running kernel's clock */
    s.srtt_us = f->rtt_us + (uint32_t)(l->queue / l->cap * 1e6);
    s.min_rtt_us = f->rtt_us;
    s.mss = MSS;
    s.bytes_acked = (uint64_t)f->delivered + 2;
    s.delivery_rate = (uint64_t)f->rate;
    s.cwnd = (uint32_t)(cwnd_of(w, f) / MSS);
    s.has_chrono = 1;
    s.sndbuf_limited_us = (uint64_t)f->limited_us;
    s.delivered = (uint64_t)f->delivered;
    s.has_delivered = 1;
    s.locked_at = f->cur;
    s.effective = f->cur ? -1 : (int)(3 * cwnd_of(w, f));
    crowd_of(w, f, &s);
    return s;
}

/* The flow's look: the law's decision, applied; the checks' counts. */
static void look(world_t *w, flow_t *f)
{
    sbt_law_sample_t s = sample_of(w, f), crowd;
    sbt_law_out_t out;
    int sec = (int)(w->now_us / 1000000), k;
    double peak = 0;

    sbt_law_look(&f->law, &f->lim, &s, &out);
    f->cur = out.act == SBT_LAW_SET ? out.size
             : out.act == SBT_LAW_RELEASE ? 0 : f->cur;
    f->next_us = w->now_us + s.srtt_us;
    f->peak_s[sec] = f->rate > f->peak_s[sec] ? f->rate : f->peak_s[sec];
    for (k = sec; k >= 0 && k > sec - 16; k--) {
        peak = f->peak_s[k] > peak ? f->peak_s[k] : peak;
    }
    /* Held below its window and delivering short of its peak, while the
     * other flows on its link did not gain half of that: how long at a
     * stretch. */
    memset(&crowd, 0, sizeof(crowd));
    crowd_of(w, f, &crowd);
    if (f->cur && f->cur * 4.0 / 3.0 < cwnd_of(w, f) && f->rate < peak * 7 / 8
        && crowd.crowd_rate < crowd.crowd_rate_then + (peak - f->rate) / 2) {
        if (!f->short_since_us) {
            f->short_since_us = w->now_us;
        }
        if (w->now_us - f->short_since_us > f->longest_short_us) {
            f->longest_short_us = w->now_us - f->short_since_us;
        }
    }
    else {
        f->short_since_us = 0;
    }
    f->contested_looks += out.contested;
}

/* A flow on @a link of @a rtt_ms, its request at @a start_s. */
static void add_flow(world_t *w, int link, uint32_t rtt_ms, int start_s)
{
    flow_t *f = &w->flow[w->nflows++];

    memset(f, 0, sizeof(*f));
    f->link = link;
    f->rtt_us = rtt_ms * 1000;
    f->start_us = (int64_t)start_s * 1000000;
    f->next_us = f->start_us;
    f->lim = lab();
}

/* Its response begins: the law follows an autotuned socket. */
static void begin(world_t *w, flow_t *f)
{
    sbt_law_sample_t s = sample_of(w, f);

    s.srtt_us = s.min_rtt_us;
    sbt_law_begin(&f->law, &f->lim, &s, 0);
    f->next_us = w->now_us + f->rtt_us;
}

/* Run to @a seconds; flows' delivery counted from @a from_s on. */
static void run(world_t *w, int from_s, int seconds)
{
    int i;
    double at10[MAX_FLOWS] = {0};

    for (; w->now_us < (int64_t)seconds * 1000000; w->now_us += TICK_US) {
        if (w->now_us == (int64_t)from_s * 1000000) {
            for (i = 0; i < w->nflows; i++) {
                at10[i] = w->flow[i].delivered;
            }
        }
        tick(w);
        for (i = 0; i < w->nflows; i++) {
            if (w->now_us == w->flow[i].start_us) {
                begin(w, &w->flow[i]);
            }
            else if (w->now_us >= w->flow[i].next_us
                     && w->now_us > w->flow[i].start_us) {
                look(w, &w->flow[i]);
            }
        }
    }
    for (i = 0; i < w->nflows; i++) {
        w->flow[i].got = (w->flow[i].delivered - at10[i]) / (seconds - from_s);
    }
}

static link_t link_at(double mbit, uint32_t rtt_ms, double bdps)
{
    link_t l;

    memset(&l, 0, sizeof(l));
    l.cap = mbit * 1e6 / 8;
    l.limit = bdps * l.cap * rtt_ms / 1e3;
    return l;
}

/* Two users behind one NAT, each on a path of its own (50 Mbit/s; 30 and
 * 50 ms): each keeps its link, whatever the other measures. */
static void test_nat(void)
{
    static world_t w;

    memset(&w, 0, sizeof(w));
    w.link[0] = link_at(50, 30, 1);
    w.link[1] = link_at(50, 50, 1);
    add_flow(&w, 0, 30, 0);
    add_flow(&w, 1, 50, 0);
    run(&w, 10, 40);
    okf(w.flow[0].got >= 0.95 * w.link[0].cap, "nat: the 30 ms user keeps "
       "0.95 of its link (%.0f of %.0f B/s)", w.flow[0].got, w.link[0].cap);
    okf(w.flow[1].got >= 0.95 * w.link[1].cap, "nat: the 50 ms user keeps "
       "0.95 of its link (%.0f of %.0f B/s)", w.flow[1].got, w.link[1].cap);
    okf(w.flow[1].cur * 4 / 3 >= (int)(w.link[1].cap * 0.05), "nat: the "
       "50 ms user's buffer holds its own BDP (%d)", w.flow[1].cur);
}

/* A long fat link with a bloated queue (20 Mbit/s, 200 ms, 4 BDPs): the
 * law keeps the rate, and takes the queue the window would keep. */
static void test_bloated(void)
{
    static world_t w;

    memset(&w, 0, sizeof(w));
    w.link[0] = link_at(20, 200, 4);
    add_flow(&w, 0, 200, 0);
    run(&w, 10, 60);
    okf(w.flow[0].got >= 0.95 * w.link[0].cap, "bloated: 0.95 of the link "
       "(%.0f of %.0f B/s)", w.flow[0].got, w.link[0].cap);
    okf(w.link[0].queue < 0.3 * w.link[0].cap * 0.2, "bloated: under 0.3 "
       "of a BDP queued (%.0f bytes)", w.link[0].queue);
    is_i(w.flow[0].contested_looks, 0, "bloated: never contested");
}

/* A home link (20 Mbit/s, 100 ms, a queue of 2 BDPs) whose other sender
 * keeps @a standing BDPs queued from 0 s on.  Doing nothing, the download
 * gets half the link (its window against the other's); auto, at least
 * 0.9 of that. */
static void test_home(double standing, const char *what)
{
    static world_t w;
    double half;

    memset(&w, 0, sizeof(w));
    w.link[0] = link_at(20, 100, 2);
    w.link[0].foreign = standing * w.link[0].cap * 0.1;
    add_flow(&w, 0, 100, 0);
    run(&w, 10, 60);
    half = w.link[0].cap / 2 * 0.2 / (0.1 + w.link[0].foreign
                                            / w.link[0].cap);
    okf(w.flow[0].got >= 0.9 * half, "home beside %s: 0.9 of what its "
       "window gets (%.0f of %.0f B/s)", what, w.flow[0].got, half);
    okf(w.flow[0].longest_short_us <= 4000000, "home beside %s: steered and "
       "short of its peak at most 4 s at a stretch (%.1f s)", what,
       w.flow[0].longest_short_us / 1e6);
    if (standing >= 1) {
        okf(w.flow[0].contested_looks > 0, "home beside %s: contested", what);
    }
}

/* Ten downloads through one bottleneck (100 Mbit/s, 100 ms, one BDP),
 * one more every 2 s: each member's share falls as the next comes, the
 * crowd's sum holds: never released, equal shares, a short queue.
 * Beside another sender, released. */
static void test_crowd(void)
{
    static world_t w;
    double sum = 0, sq = 0;
    int i, contested = 0;

    memset(&w, 0, sizeof(w));
    w.link[0] = link_at(100, 100, 1);
    for (i = 0; i < 10; i++) {
        add_flow(&w, 0, 100, 2 * i);
    }
    run(&w, 30, 60);
    for (i = 0; i < 10; i++) {
        sum += w.flow[i].got;
        sq += w.flow[i].got * w.flow[i].got;
        contested += w.flow[i].contested_looks;
    }
    okf(sum >= 0.95 * w.link[0].cap, "crowd: the link kept (%.0f of %.0f)",
       sum, w.link[0].cap);
    okf(sum * sum / (10 * sq) >= 0.95, "crowd: Jain's index at least 0.95 "
       "(%.3f)", sum * sum / (10 * sq));
    is_i(contested, 0, "crowd: its members' shares move, its sum holds: "
         "never contested");
    okf(w.link[0].queue < 0.3 * w.link[0].cap * 0.1, "crowd: under 0.3 BDP "
       "queued (%.0f bytes)", w.link[0].queue);

    memset(&w, 0, sizeof(w));
    w.link[0] = link_at(100, 100, 1);
    w.link[0].foreign = 0.8 * w.link[0].cap * 0.1;
    w.link[0].foreign_from_s = 20;
    for (i = 0; i < 10; i++) {
        add_flow(&w, 0, 100, 2 * i);
    }
    run(&w, 30, 60);
    for (i = 0, contested = 0; i < 10; i++) {
        contested += w.flow[i].contested_looks > 0;
        okf(w.flow[i].longest_short_us <= 4000000, "crowd beside another "
           "sender: flow %d short at most 4 s at a stretch (%.1f s)", i,
           w.flow[i].longest_short_us / 1e6);
    }
    is_i(contested, 10, "crowd beside another sender: every member "
         "contested");
}

int main(void)
{
    test_nat();
    test_bloated();
    test_home(1, "a standing BDP");
    test_home(0.5, "half a BDP");
    test_crowd();
    return done_testing();
}
