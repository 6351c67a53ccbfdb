/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/law_cases.c: the control law of SndbufTune auto (sndbuf_law.c),
 * on its own: constructed looks in, exact decisions out (TAP, make unit).
 * Every rule of docs/auto.md has a case here that fails when its constant
 * or its branch changes.
 */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../../sndbuf_law.h"
#include "tap.h"


#define MSS     1448
#define MS      1000
/* Looks start 2.5 s into the clock: a kernel's monotonic clock is never
 * at 0 while a server runs. */
#define T0_MS   2500

/* This lab's kernel: wmem_max = tcp_wmem[2] = 4 MiB. */
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

/* A stock Debian 12 kernel: wmem_max 212992, autotuning to 4 MiB; auto's
 * default maximum is wmem_max. */
static sbt_law_limits_t stock(void)
{
    sbt_law_limits_t lim = lab();

    lim.wmem_max = 212992;
    lim.limit_max = 212992;
    return lim;
}

/* A look on a path of @rtt_ms with the data acknowledged, @rate B/s
 * delivered (and as much each second so far), the buffer locked at
 * @locked (0: autotuned, tb @tb). */
static sbt_law_sample_t look_at(int64_t t_ms, uint32_t rtt_ms, uint64_t rate,
                                int locked, int tb)
{
    sbt_law_sample_t s = {0};

    s.now_us = (t_ms + T0_MS) * MS;
    s.srtt_us = rtt_ms * MS;
    s.rttvar_us = 0;
    s.mss = MSS;
    s.min_rtt_us = rtt_ms * MS;
    s.bytes_acked = 1 << 20;
    s.delivery_rate = rate;
    s.has_chrono = 1;
    s.delivered = rate * (uint64_t)(t_ms + T0_MS) / 1000;
    s.has_delivered = 1;
    s.locked_at = locked;
    s.effective = locked ? -1 : tb;
    return s;
}

/* The same look with a crowd: another flow of this server at its RTT,
 * delivering as much (now and then). */
static sbt_law_sample_t crowd_at(int64_t t_ms, uint32_t rtt_ms,
                                 uint64_t rate, int locked, int tb)
{
    sbt_law_sample_t s = look_at(t_ms, rtt_ms, rate, locked, tb);

    s.crowd_members = 1;
    s.crowd_rate = s.crowd_rate_then = s.crowd_own_then = rate;
    return s;
}

/* The same look where the kernel counts no delivered segments (< 4.18):
 * the law cannot check that steering costs nothing, so it never steers
 * (sized as a contested flow is). */
static sbt_law_sample_t unchecked_at(int64_t t_ms, uint32_t rtt_ms,
                                     uint64_t rate, int locked, int tb)
{
    sbt_law_sample_t s = look_at(t_ms, rtt_ms, rate, locked, tb);

    s.has_delivered = 0;
    return s;
}

/* A law past its ramp (a socket locked when auto began), at rate. */
static void begin_locked(sbt_law_t *l, const sbt_law_limits_t *lim,
                         uint32_t rtt_ms, uint64_t rate, int locked)
{
    sbt_law_sample_t s = look_at(0, rtt_ms, rate, locked, -1);

    sbt_law_begin(l, lim, &s, rate);
}

/* Past its ramp, its delivery flat for an hour (GROW_US): steered. */
static void past_ramp(sbt_law_t *l)
{
    l->ramping = 0;
    l->grew_us = -3600 * (int64_t)1000000;
}

static const uint64_t R30M = 30000000 / 8;      /* 30 Mbit/s in B/s */

/* ---------------------------------------------------------------- */

static void test_estimate(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    begin_locked(&l, &lim, 100, 1000000, 100000);
    s = look_at(100, 100, 2000000, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.measured, 2000000, "estimate: a higher sample is taken at once");
    s = look_at(200, 100, 1000000, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.measured, 1500000, "estimate: a lower one halves the gap");
    s = look_at(300, 100, 500000, 100000, 0);
    s.app_limited = 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.measured, 1500000, "estimate: an app-limited lower one is no news");
    s = look_at(400, 100, 0, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.measured, 1500000, "estimate: no sample (0) is no news");
}

static void test_unknown_rate(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    int i;

    /* Issue 21 item 3: a locked socket, no delivery sample yet. */
    begin_locked(&l, &lim, 250, 0, 100000);
    ok(!l.ramping, "unknown rate: a locked socket does not ramp");
    for (i = 1; i <= 3; i++) {
        s = look_at(250 * i, 250, 0, 100000, 0);
        sbt_law_look(&l, &lim, &s, &out);
    }
    is_i(out.act, SBT_LAW_KEEP, "unknown rate: three looks keep the buffer "
         "(was: halved at each)");
}

static void test_ramp(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s = look_at(0, 100, 0, 0, 16384);
    int i;

    s.bytes_acked = 0;                  /* handshake RTT only */
    sbt_law_begin(&l, &lim, &s, 0);
    ok(l.ramping, "ramp: an autotuned socket ramps");
    ok(l.from_handshake, "ramp: the RTT is the handshake's");
    s = look_at(100, 100, 100000, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    ok(l.ramping && out.act == SBT_LAW_KEEP, "ramp: growing rate, kept");
    s = look_at(200, 100, 124000, 0, 65536);    /* < 1/4 more */
    sbt_law_look(&l, &lim, &s, &out);
    ok(l.ramping, "ramp: one flat look, still ramping");
    s = look_at(300, 100, 124000, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    ok(l.ramping, "ramp: two flat looks, still ramping");
    s = look_at(400, 100, 124000, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    ok(!l.ramping, "ramp: three flat looks (RAMP_FLAT) end it");

    /* RAMP_RTTS: 32 RTTs end a ramp whose rate still grows. */
    s = look_at(0, 10, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 1000);
    for (i = 1; i < 32; i++) {
        s = look_at(10 * i, 10, 1000ull << i, 0, 65536);
        sbt_law_look(&l, &lim, &s, &out);
    }
    ok(l.ramping, "ramp: growing for 31 RTTs, still ramping");
    s = look_at(320, 10, 1000ull << 33, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    ok(!l.ramping, "ramp: 32 RTTs end it");

    /* Limits narrower than the kernel's range: no ramp. */
    lim.limit_max = 1 << 20;
    s = look_at(0, 100, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 0);
    ok(!l.ramping, "ramp: not when SndbufTuneLimits' max is below "
       "tcp_wmem[2]");
    lim = lab();
    s = look_at(0, 100, 0, 65536, -1);
    sbt_law_begin(&l, &lim, &s, 0);
    ok(!l.ramping, "ramp: not on a locked socket");
}

/* A queue does not end the ramp (what doing nothing gets, the measure of
 * what steering may not cost), unless it is a crowd's to the same client
 * (another flow to its address at its RTT: sndbuf_path.c) and the flow is
 * a bbr one, whose startup ignores losses: then a queue over a quarter
 * of the minimum RTT (CROWD_SHIFT 2) ends it.  1: still ramping (left to
 * autotuning); 0: ended. */
static int ramping_through(uint32_t srtt_us, uint32_t path_min_rtt_us,
                           int members, int loss_based)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s = look_at(0, 100, 0, 0, 16384);

    sbt_law_begin(&l, &lim, &s, 0);
    s = look_at(100, 100, 1000000, 0, 262144);
    s.srtt_us = srtt_us;
    s.path_min_rtt_us = path_min_rtt_us;
    s.crowd_members = members;
    s.loss_based = loss_based;
    sbt_law_look(&l, &lim, &s, &out);
    return l.ramping && out.act == SBT_LAW_KEEP;
}

static void test_ramp_queue(void)
{
    is_i(ramping_through(200 * MS, 0, 0, 0), 1, "ramp: through a queue of "
         "its own");
    is_i(ramping_through(200 * MS, 0, 3, 0), 1, "ramp: through another "
         "client's crowd's");
    is_i(ramping_through(125 * MS, 100 * MS, 1, 0), 1, "ramp: through a "
         "quarter of the minimum RTT of a crowd's to its own client");
    is_i(ramping_through(125 * MS + 1, 100 * MS, 1, 0), 0, "ramp: a "
         "microsecond more ends it (CROWD_SHIFT 2)");
    is_i(ramping_through(200 * MS, 100 * MS, 1, 1), 1, "ramp: not a cubic "
         "flow's (its first loss ends it)");
}

/* A late comer's own minimum RTT began in the queue the others keep: the
 * lowest of another flow to its address at its RTT (sndbuf_path.c) is
 * taken when it is at least 1/PATH_TRUST (1/2) of its own. */
static uint32_t queue_seen(uint32_t path_min_rtt_us, uint64_t bytes_acked)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    begin_locked(&l, &lim, 100, 1000000, 200000);
    s = look_at(100, 100, 1000000, 200000, 0);
    s.srtt_us = 110 * MS;
    s.path_min_rtt_us = path_min_rtt_us;
    s.bytes_acked = bytes_acked;
    sbt_law_look(&l, &lim, &s, &out);
    return out.queue_us;
}

static void test_path_min_rtt(void)
{
    is_i(queue_seen(50 * MS, 1 << 20), 60 * MS, "path: half its own "
         "minimum RTT is taken (PATH_TRUST 2): a queue of 60 ms");
    is_i(queue_seen(50 * MS - 1, 1 << 20), 10 * MS, "path: less is another "
         "path's: its own, 10 ms");
    is_i(queue_seen(60 * MS, 1), 0, "path: not while its RTT is the "
         "handshake's");
}

/* Ramping on the seed path until autotuning's ceiling, rate @rate. */
static void ramp_to_ceiling(sbt_law_t *l, const sbt_law_limits_t *lim,
                            uint32_t rtt_ms, uint64_t rate,
                            sbt_law_out_t *out)
{
    sbt_law_sample_t s = look_at(0, rtt_ms, 0, 0, 16384);

    sbt_law_begin(l, lim, &s, 0);
    s = look_at(rtt_ms, rtt_ms, rate / 4, 0, 1 << 20);
    sbt_law_look(l, lim, &s, out);
    s = look_at(2 * rtt_ms, rtt_ms, rate, 0, (int)lim->tcp_wmem_max);
    sbt_law_look(l, lim, &s, out);
}

static void test_lift(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    uint64_t bdp = R30M / 4;            /* 250 ms */

    ramp_to_ceiling(&l, &lim, 250, R30M, &out);
    ok(l.ramping, "lift: still ramping at tcp_wmem[2]");
    is_i(out.act, SBT_LAW_SET, "lift: set");
    is_i(out.size, (int)(4 * (bdp * 7 / 8)),
         "lift: LIFT_MEASURED 4 x FACTOR x measured rate x RTT (was: the "
         "maximum)");
    sbt_law_sample_t s = look_at(750, 250, R30M * 2, 0, 1 << 22);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "lift: once per response");

    lim.conf_rate = R30M;
    ramp_to_ceiling(&l, &lim, 250, R30M * 9 / 10, &out);
    is_i(out.size, (int)(3 * (bdp * 7 / 8)),
         "lift: LIFT 3 x the target of a configured rate");
    lim.conf_rate = 0;

    /* Loopback: 3 GB/s x 50 us needs far less than tcp_wmem[2]. */
    {
        sbt_law_sample_t s0 = look_at(0, 0, 0, 0, 16384);

        s0.srtt_us = s0.min_rtt_us = 50;
        sbt_law_begin(&l, &lim, &s0, 0);
        s0.now_us = 50;
        s0.delivery_rate = 3000000000ull;
        s0.effective = 4194304;
        sbt_law_look(&l, &lim, &s0, &out);
        is_i(out.act, SBT_LAW_KEEP, "lift: none where rate x RTT is small "
             "(issue 21 item 1: stalled readers on loopback)");
    }

    lim = stock();
    ramp_to_ceiling(&l, &lim, 250, R30M, &out);
    is_i(out.act, SBT_LAW_KEEP, "lift: none on a stock kernel (wmem_max "
         "grants less than autotuning reached)");
    lim = lab();
    lim.shared = 1;
    ramp_to_ceiling(&l, &lim, 250, R30M, &out);
    is_i(out.act, SBT_LAW_KEEP, "lift: none on an HTTP/2 socket");
}

static void test_no_queue(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    /* An RTT that varies by 60 ms around 100: the target passes the
     * floor (11/8 x rate x minimum RTT). */
    begin_locked(&l, &lim, 100, 1000000, 50000);
    s = look_at(100, 100, 1000000, 50000, 0);
    s.rttvar_us = 60 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "no queue: set");
    is_i(out.size, (int)(1000000ull * 161000 / 1000000 * 7 / 8),
         "no queue: FACTOR 7/8 x rate x (srtt + rttvar + REFILL 1 ms)");
    ok(!out.queued, "no queue: rttvar is not a queue");
    s.rttvar_us = 5 * MS;
    begin_locked(&l, &lim, 100, 1000000, 50000);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 137500, "no queue: a flow alone never below ALONE 11/8 "
         "x rate x minimum RTT (7/8 x 106 ms would be 92,750)");

    begin_locked(&l, &lim, 100, 100000, 50000);
    s = look_at(100, 100, 100000, 50000, 0);
    s.sndbuf_limited_us = 50 * MS;      /* half the interval */
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.limited, "no queue: send-buffer-limited over 1/8 of the time");
    is_i(out.size, 62500, "no queue: a limited buffer grows by a quarter");

    begin_locked(&l, &lim, 100, 100000, 50000);
    s = look_at(100, 100, 100000, 50000, 0);
    s.sndbuf_limited_us = 12 * MS;      /* under 1/8 */
    sbt_law_look(&l, &lim, &s, &out);
    ok(!out.limited, "no queue: limited 12% of the time is not limited");

    begin_locked(&l, &lim, 100, 10000, 400000);
    s = look_at(100, 100, 10000, 400000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 200000, "no queue: down by half a look at most");

    begin_locked(&l, &lim, 100, 1000000, 136600);
    s = look_at(100, 100, 1000000, 136600, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "no queue: a move under 1/16 and a "
         "segment is not worth a system call");
}

static void test_loss(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    /* rttvar 60 ms: the target (7/8 x 161 ms) passes the floor. */
    int i, base = (int)(1000000ull * 161000 / 1000000 * 7 / 8);

    begin_locked(&l, &lim, 100, 1000000, base);
    s = look_at(100, 100, 1000000, base, 0);
    s.rttvar_us = 60 * MS;
    s.total_retrans = 3;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 2 * base, "loss: a flow that retransmitted is sized for "
         "LOSS_FACTOR 2 x the target (room for a SACK hole)");
    for (i = 2; i <= 8; i++) {
        s = look_at(100 * i, 100, 1000000, 2 * base, 0);
        s.rttvar_us = 60 * MS;
        s.total_retrans = 3;
        sbt_law_look(&l, &lim, &s, &out);
    }
    is_i(out.act, SBT_LAW_KEEP, "loss: for LOSS_LOOKS 8 looks after");
    s = look_at(900, 100, 1000000, 2 * base, 0);
    s.rttvar_us = 60 * MS;
    s.total_retrans = 3;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, base, "loss: then the target again");

    begin_locked(&l, &lim, 100, 1000000, base);
    s = crowd_at(100, 100, 1000000, base, 0);
    s.total_retrans = 3;
    s.srtt_us = 150 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.queued && out.size < base, "loss: not under a queue (the "
       "losses are that queue overflowing): steered");
}

static void test_clamps(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    begin_locked(&l, &lim, 1, 1000, 12000);
    s = look_at(10, 1, 1000, 12000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 8192, "clamp: SndbufTuneLimits' min");
    ok(out.clamped, "clamp: said");

    lim.limit_min = 1024;
    begin_locked(&l, &lim, 1, 1000, 4096);
    s = look_at(10, 1, 1000, 4096, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 2 * MSS, "clamp: never under MIN_SEGMENTS 2 x MSS");

    lim = lab();
    lim.limit_max = 100000;             /* the administrator's cap */
    begin_locked(&l, &lim, 250, R30M, 80000);
    s = look_at(250, 250, R30M, 80000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "clamp: the administrator's max is a lock");
    is_i(out.size, 100000, "clamp: at SndbufTuneLimits' max");

    /* The clamp is the last step: autotuning's ceiling (tcp_wmem[2] / 2,
     * where rate x minimum RTT fits in it) never takes a size below the
     * administrator's minimum.  A lone cubic flow at 1 MB/s, 10 ms. */
    lim = lab();
    lim.wmem_max = 16777216;
    lim.limit_min = 4194304;
    lim.limit_max = 8388608;
    begin_locked(&l, &lim, 10, 1000000, 4194304);
    s = look_at(10, 10, 1000000, 4194304, 0);
    s.loss_based = 1;
    s.rttvar_us = 5 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act != SBT_LAW_SET || out.size >= lim.limit_min,
       "clamp: never below SndbufTuneLimits' min, whatever came before");
}

static void test_stock(void)
{
    sbt_law_limits_t lim = stock();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    /* Issue 20: the seed path on a stock kernel: 820 KB wanted, 208 KiB
     * granted: a lock would cap the flow at 0.44 of autotuning. */
    begin_locked(&l, &lim, 250, R30M, 0);
    s = look_at(250, 250, R30M, 0, 1 << 22);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "stock: an autotuned socket stays so "
         "where wmem_max is below the size wanted");
    s = look_at(0, 250, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 0);
    ok(l.ramping, "stock: the default maximum (wmem_max) leaves the ramp "
       "to autotuning");
    lim.limit_max = 212991;
    sbt_law_begin(&l, &lim, &s, 0);
    ok(!l.ramping, "stock: one byte under wmem_max is the administrator's "
       "cap");
    lim = stock();
    begin_locked(&l, &lim, 250, R30M, 212992);
    s = look_at(250, 250, R30M, 212992, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_RELEASE, "stock: a locked one is given back");
    lim.shared = 1;
    begin_locked(&l, &lim, 250, R30M, 212992);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "stock: never released on an HTTP/2 socket");

    lim = stock();
    begin_locked(&l, &lim, 20, R30M, 50000);
    s = look_at(20, 20, R30M, 50000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "stock: a size wmem_max grants is set");

    /* A queue takes an autotuned buffer down: locked at wmem_max (below
     * both), not left where autotuning has it. */
    lim = stock();
    begin_locked(&l, &lim, 100, R30M, 0);
    past_ramp(&l);
    s = look_at(100, 100, R30M, 0, 1 << 21);
    s.srtt_us = 150 * MS;
    s.loss_based = 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "stock: a queue locks an autotuned buffer");
    is_i(out.size, 212992, "stock: (at wmem_max)");
    s.has_delivered = 0;
    s.loss_based = 0;
    begin_locked(&l, &lim, 100, R30M, 0);
    past_ramp(&l);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "stock: not a contested flow's");

    /* wmem_max 2 MiB or more: a lock at it is above autotuning's. */
    lim = stock();
    lim.wmem_max = lim.limit_max = 2097152;
    begin_locked(&l, &lim, 250, 4 * R30M, 1 << 20);
    s = look_at(250, 250, 4 * R30M, 1 << 20, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "stock: wmem_max at tcp_wmem[2]/2 still "
         "locks, at wmem_max");
    is_i(out.size, 2097152, "stock: (that size)");
}

/* A kernel without SO_BUF_LOCK (< 5.15): where the law would give a lock
 * back, it locks as near autotuning's reach as it may instead. */
static void test_no_release(void)
{
    sbt_law_limits_t lim = stock();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    lim.no_release = 1;
    begin_locked(&l, &lim, 250, R30M, 100000);
    s = look_at(250, 250, R30M, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "no SO_BUF_LOCK, stock: not given back but "
         "locked higher");
    is_i(out.size, 212992, "no SO_BUF_LOCK, stock: (at wmem_max)");
    begin_locked(&l, &lim, 250, R30M, 212992);
    s = look_at(250, 250, R30M, 212992, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "no SO_BUF_LOCK: a lock already at the most "
         "allowed stays");

    lim = lab();
    lim.no_release = 1;
    begin_locked(&l, &lim, 250, R30M, 1 << 20);
    s = unchecked_at(250, 250, R30M, 1 << 20, 0);
    s.loss_based = 1;
    s.srtt_us = 400 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "no SO_BUF_LOCK, cubic: locked where "
         "autotuning would reach");
    is_i(out.size, 2097152, "no SO_BUF_LOCK, cubic: (tcp_wmem[2] / 2)");

    /* Not below SndbufTuneLimits' minimum either, though the kernel will
     * grant no more than wmem_max. */
    lim = stock();
    lim.no_release = 1;
    lim.limit_min = 1 << 20;
    lim.limit_max = 4 << 20;
    begin_locked(&l, &lim, 250, R30M, 100000);
    s = look_at(250, 250, R30M, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 1 << 20, "no SO_BUF_LOCK: at the limits' minimum");
}

static void test_loss_based(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    /* Its queue steers it, as a bbr flow's does, and its buffer then
     * holds it below its window: paced, since cubic does not pace. */
    begin_locked(&l, &lim, 100, 1000000, 200000);
    s = look_at(100, 100, 1000000, 200000, 0);
    s.loss_based = 1;
    s.srtt_us = 150 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_SET && out.queued && out.size < 200000,
       "cubic: its queue steers it");
    ok(out.pace, "cubic: steered, its buffer holds it: paced");
    s.srtt_us = 100 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_SET && out.pace, "cubic: locked at the target "
       "with no queue, and paced");
    s.loss_based = 0;
    s.srtt_us = 150 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_SET && !out.pace, "bbr: steered, and paced by "
       "bbr itself, not asked to");

    /* Contested, it needs the queue it fills and room to recover from
     * each cycle's loss: given back to autotuning within its reach. */
    begin_locked(&l, &lim, 250, R30M, 1 << 20);
    s = unchecked_at(250, 250, R30M, 1 << 20, 0);
    s.loss_based = 1;
    s.srtt_us = 400 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_RELEASE, "cubic, contested: within autotuning's "
         "reach, given back to it");
    ok(!out.queued, "cubic, contested: its queue does not steer it");

    s = unchecked_at(0, 250, 8 * R30M, 0, 1 << 22);     /* 240 Mbit/s */
    sbt_law_begin(&l, &lim, &s, 8 * R30M);
    past_ramp(&l);
    s = unchecked_at(250, 250, 8 * R30M, 0, 1 << 22);
    s.loss_based = 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "cubic, contested: a long fat path still "
         "gets more than tcp_wmem[2]");
    is_i(out.size, 4194304, "cubic, contested: (its maximum)");
    ok(!out.pace, "cubic, contested: its window holds it: not paced");

    /* A window past tcp_wmem[2] / 2 (loopback: MSS 65483) is no reason
     * to lock: autotuning gives three times the floor. */
    s = unchecked_at(0, 1, 1000000, 0, 1 << 22);
    sbt_law_begin(&l, &lim, &s, 1000000);
    past_ramp(&l);
    s = unchecked_at(1, 1, 1000000, 0, 1 << 22);
    s.loss_based = 1;
    s.mss = 65483;
    s.cwnd = 100;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "cubic, contested: a window past "
         "autotuning's ceiling alone does not lock it");

    /* An administrator's cap: locked within it, never given back. */
    lim.limit_max = 65536;
    begin_locked(&l, &lim, 250, R30M, 65536);
    s = unchecked_at(250, 250, R30M, 65536, 0);
    s.loss_based = 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_KEEP, "cubic: under SndbufTuneLimits 8k 64k, "
         "kept at the cap, not given back");
    s = look_at(0, 250, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 0);
    past_ramp(&l);
    s = unchecked_at(250, 250, R30M, 0, 1 << 20);
    s.loss_based = 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "cubic: an autotuned socket under the cap "
         "is locked");
    ok(!out.pace, "cubic: (contested: not paced)");
    is_i(out.size, 65536, "cubic: (at the cap)");
}

/* Steering's floor: a flow alone never below ALONE 11/8 x its rate x
 * its minimum RTT (Linux wakes the writer only once a third of the
 * buffer is free: less runs its pipe dry before the refill comes); a
 * crowd's member never below CROWD 9/8 x its share (the others' queued
 * data covers its refill), and a member above the mean is steered down
 * to it. */
static void test_floors(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    int i, cur;

    begin_locked(&l, &lim, 100, 1000000, 150000);
    s = look_at(100, 100, 1000000, 150000, 0);
    s.srtt_us = 300 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.queued, "floor: a flow with no crowd steers by its queue too");
    is_i(out.size, 137500, "floor: never below ALONE 11/8 x rate x "
         "minimum RTT (1 MB/s, 100 ms)");

    /* A second's looks, then the member's own rate is known. */
    begin_locked(&l, &lim, 100, 1000000, 150000);
    for (i = 1, cur = 150000; i <= 10; i++) {
        s = crowd_at(100 * i, 100, 1000000, cur, 0);
        s.srtt_us = 300 * MS;
        sbt_law_look(&l, &lim, &s, &out);
        cur = out.act == SBT_LAW_SET ? out.size : cur;
    }
    is_i(cur, 112500, "floor: a crowd's member never below CROWD 9/8 x "
         "its rate x minimum RTT");
    s = crowd_at(1100, 100, 1000000, cur, 0);
    s.srtt_us = 300 * MS;
    s.crowd_rate = 500000;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_KEEP && cur == 112500, "floor: one above the "
       "crowd's mean too: the mean is no share where members have links "
       "of their own");
}

/* Steer a flow by its queue: srtt - min rtt. */
static void test_queue(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    int cur = 400000, i;
    uint64_t want;

    begin_locked(&l, &lim, 100, 500000, cur);
    s = crowd_at(100, 100, 500000, cur, 0);
    s.srtt_us = 150 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.queued, "queue: 50 ms over a 100 ms minimum steers");
    is_i(out.queue_us, 50 * MS, "queue: srtt - (min rtt + rttvar)");
    /* 50 ms of queue is twice the room (a quarter of the 100 ms
     * minimum): half the step. */
    want = ((uint64_t)cur + (uint64_t)cur * 100 / 150 + 4 * MSS) / 2;
    is_i(out.size, (int)want, "queue: FAST's step, halfway to "
         "cur x base / srtt + STEP, 8 MSS x room 25 ms / queue 50 ms");

    /* Its fixed point: cur = cur x base / srtt + STEP; from within twice
     * it, as a queue that does not shrink while the buffer halves is
     * another sender's (test_compete). */
    for (i = 0, cur = 130000; i < 200; i++) {
        s = crowd_at(200 + 10 * i, 100, 500000, cur, 0);
        s.srtt_us = 120 * MS;
        sbt_law_look(&l, &lim, &s, &out);
        if (out.act == SBT_LAW_SET) {
            cur = out.size;
        }
    }
    /* Moves under 1/128 are not made (STEER_SHIFT), and each look goes
     * 1/12 of the way here: it stops where 1/12 of the gap is 1/128 of
     * the buffer, 1/0.906 of the fixed point. */
    ok(cur >= 6 * 8 * MSS && cur < 6 * 8 * MSS * 111 / 100,
       "queue: the fixed point keeps STEP in the queue (cur = 6 STEP at "
       "srtt 1.2 x base), up to 1/0.906 above");

    /* Within the room, the full step: 25 ms of queue over 100. */
    begin_locked(&l, &lim, 100, 500000, 400000);
    s = crowd_at(100, 100, 500000, 400000, 0);
    s.srtt_us = 125 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    want = (400000 + (uint64_t)400000 * 100 / 125 + 8 * MSS) / 2;
    is_i(out.size, (int)want, "queue: within a quarter of the minimum "
         "RTT, the full STEP 8 MSS");
    /* A crowd's fixed point past the room: cur x queue / srtt = STEP x
     * room / queue, so 50 ms of queue (two rooms) over 100 keeps half
     * of STEP per flow queued: cur = 12 MSS, against 24 at a full step
     * (at 100 kB/s, above the crowd's floor: 9/8 x 10 kB). */
    begin_locked(&l, &lim, 100, 100000, 34000);
    for (i = 0, cur = 34000; i < 400; i++) {
        s = crowd_at(200 + 10 * i, 100, 100000, cur, 0);
        s.srtt_us = 150 * MS;
        sbt_law_look(&l, &lim, &s, &out);
        if (out.act == SBT_LAW_SET) {
            cur = out.size;
        }
    }
    ok(cur >= 12 * MSS && cur < 12 * MSS * 111 / 100,
       "queue: past the room the step shrinks, so N flows keep less "
       "than N x STEP queued (cur = 12 MSS at 50 ms over 100, not 24)");

    begin_locked(&l, &lim, 100, 500000, 400000);
    s = crowd_at(100, 100, 500000, 400000, 0);
    s.srtt_us = 105 * MS;               /* 5 ms: under 1/16 of 100 */
    sbt_law_look(&l, &lim, &s, &out);
    ok(!out.queued, "queue: under min rtt / 16 is room, not a queue");
    s.srtt_us = 1500;
    s.min_rtt_us = 200;
    begin_locked(&l, &lim, 0, 500000, 400000);
    s.now_us = 100 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(!out.queued, "queue: under QUEUE_MIN 2 ms is host jitter");

    /* Slow start's overshoot never steers below the target (87,500): a
     * crowd's member stops at CROWD 9/8 x its rate x minimum RTT. */
    begin_locked(&l, &lim, 100, 1000000, 100000);
    s = crowd_at(100, 100, 1000000, 100000, 0);
    s.srtt_us = 300 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 112500, "floor: never below the target, nor a member "
         "below CROWD 9/8 x its rate x minimum RTT");
}

/* The promise: a flow past its ramp on a 100 ms path, locked at 400,000
 * (0: left to autotuning, which has it at 400,000), looked at every
 * 100 ms under a queue of @a srtt_ms; its delivery counted as the kernel
 * would, its crowd's figures as sndbuf_path.c would give them.  A queue
 * of 7 ms (just past 1/16 of the minimum) steers it slowly, so that its
 * buffer stays well above the floor and a step down shows. */
typedef struct {
    sbt_law_limits_t lim;
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    int64_t t_ms;
    uint64_t delivered, limited_us;
    int cur;
    int limited;                /* its buffer holds it back half the time */
    uint32_t rttvar_ms;
    int members;                /* its crowd: how many, what they deliver */
    uint64_t crowd_rate, crowd_then, own_then;
} promise_t;

#define PROMISE_TB      800000

static void promise_begin(promise_t *p)
{
    memset(p, 0, sizeof(*p));
    p->lim = lab();
    p->cur = 400000;
    begin_locked(&p->l, &p->lim, 100, 1000000, p->cur);
    p->delivered = look_at(0, 100, 1000000, p->cur, 0).delivered;
}

/* A crowd of one other flow that delivered @a then when this one was at
 * its peak of @a own_then, and delivers @a now. */
static void promise_crowd(promise_t *p, uint64_t now, uint64_t then,
                          uint64_t own_then)
{
    p->members = 1;
    p->crowd_rate = now;
    p->crowd_then = then;
    p->own_then = own_then;
}

/* @a n looks at @a rate B/s and an RTT of @a srtt_ms; the last one's
 * decision in p->out (and applied). */
static void promise_looks(promise_t *p, int n, uint64_t rate,
                          uint32_t srtt_ms)
{
    while (n-- > 0) {
        p->t_ms += 100;
        p->delivered += rate / 10;
        p->limited_us += p->limited ? 50 * MS : 0;
        p->s = look_at(p->t_ms, 100, rate, p->cur, PROMISE_TB);
        p->s.srtt_us = srtt_ms * MS;
        p->s.rttvar_us = p->rttvar_ms * MS;
        p->s.cwnd = 400;
        p->s.delivered = p->delivered;
        p->s.sndbuf_limited_us = p->limited_us;
        p->s.crowd_members = p->members;
        p->s.crowd_rate = p->crowd_rate;
        p->s.crowd_rate_then = p->crowd_then;
        p->s.crowd_own_then = p->own_then;
        sbt_law_look(&p->l, &p->lim, &p->s, &p->out);
        p->cur = p->out.act == SBT_LAW_SET ? p->out.size
                 : p->out.act == SBT_LAW_RELEASE ? 0 : p->cur;
    }
}

/* 2 s at 1 MB/s, its peak, then @a n looks at @a rate. */
static void promise_peak_then(promise_t *p, int n, uint64_t rate)
{
    promise_begin(p);
    promise_looks(p, 20, 1000000, 107);
    promise_looks(p, n, rate, 107);
}

/* Short: delivering less than CONTEST_NUM/DEN (7/8) of its peak in its
 * last whole second (RATE_BLOCK 1 s).  While its queue stands and its
 * crowd did not gain what it lost, it is losing: its buffer is not
 * steered down. */
static void test_promise_short(void)
{
    promise_t p;
    int was;

    promise_peak_then(&p, 9, 875000);
    was = p.cur;
    promise_looks(&p, 1, 875000, 107);
    is_i(p.l.rate_now, 875000, "short: the delivery per RATE_BLOCK 1 s");
    ok(p.out.queued && p.out.act == SBT_LAW_SET && p.out.size < was,
       "short: at 7/8 of its peak, steered down still");
    promise_peak_then(&p, 9, 874990);
    was = p.cur;
    promise_looks(&p, 1, 874990, 107);
    ok(p.out.queued && p.out.act == SBT_LAW_KEEP && p.cur == was,
       "short: just under 7/8 (CONTEST 7/8), with no crowd to have gained "
       "it, it loses: not steered down");
    promise_looks(&p, 10, 874990, 150);
    ok(p.out.act == SBT_LAW_KEEP && p.cur == was, "short: not even under a "
       "queue seven times as long");
}

/* Its peak: the best of its seconds, remembered PEAK_BLOCKS (4) blocks of
 * PEAK_BLOCK (4 s), 12 to 16 s.  The queue drains every second here
 * (never a contest), and each drained look's varied RTT lifts the buffer
 * (7/8 x rate x (srtt + rttvar)): steered, the queue takes it down again
 * unless the flow loses. */
static void test_promise_peak(void)
{
    promise_t p;
    int i, was = 0;

    promise_begin(&p);
    promise_looks(&p, 10, 1000000, 107);
    for (i = 11; i <= 140; i++) {
        p.rttvar_ms = i % 10 == 5 ? 200 : 0;
        was = p.cur;
        promise_looks(&p, 1, 874990, i % 10 == 5 ? 104 : 150);
        if (i == 139) {
            ok(p.out.queued && p.out.act == SBT_LAW_KEEP, "peak: its best "
               "second, 12 s before, still counts (it fell in a 4 s block "
               "that began 15.5 s before): losing, not steered down");
        }
    }
    ok(p.out.act == SBT_LAW_SET && p.out.size < was, "peak: a second "
       "later that block began 16.5 s before: forgotten (PEAK_BLOCKS 4 x "
       "PEAK_BLOCK 4 s), steered down");
}

/* Contested: losing at every look for CONTEST_LASTS 1.5 s, its queue
 * standing for CONTEST_STOOD 2 s before that; left to autotuning for
 * CONTEST_HOLD 8 s, then steered again. */
static void test_promise_contest(void)
{
    promise_t p;

    /* Losing from its block at 3 s on; the queue stood since 0 s. */
    promise_peak_then(&p, 10, 874990);
    promise_looks(&p, 14, 874990, 107);
    ok(!p.out.contested && p.out.act == SBT_LAW_KEEP, "contest: losing "
       "1.4 s, not contested yet");
    promise_looks(&p, 1, 874990, 107);
    ok(p.out.contested && !p.out.queued, "contest: losing at every look for "
       "CONTEST_LASTS 1.5 s: contested, not steered");
    is_s(p.out.why, "steering cost the flow delivery (another sender shares "
         "its queue): left to autotuning", "contest: the debug log says so");
    is_i(p.out.act, SBT_LAW_RELEASE, "contest: given back to autotuning");
    promise_looks(&p, 79, 874990, 107);
    ok(p.out.contested && p.out.act == SBT_LAW_KEEP, "contest: left to "
       "autotuning 7.9 s later");
    promise_looks(&p, 1, 874990, 107);
    ok(!p.out.contested && p.out.queued && p.out.act == SBT_LAW_SET
       && p.out.size == PROMISE_TB / 2, "contest: after CONTEST_HOLD 8 s "
       "steered again, locked where autotuning had it (losing still: not "
       "below)");

    /* The queue drained at 3 s (4 ms: not a queue), stood again from
     * 3.1 s: the loss counts from 5 s on, a contest at 6.5 s. */
    promise_begin(&p);
    promise_looks(&p, 20, 1000000, 107);
    promise_looks(&p, 10, 874990, 104);
    promise_looks(&p, 34, 874990, 107);
    ok(!p.out.contested, "contest: not until its queue has stood "
       "CONTEST_STOOD 2 s (BBR's PROBE_RTT drains a queue and its delivery "
       "at once), then lost 1.5 s: not at 6.4 s");
    promise_looks(&p, 1, 874990, 107);
    ok(p.out.contested, "contest: at 6.5 s");

    /* Where the kernel counts no delivery, steering is never checked,
     * so never done. */
    promise_begin(&p);
    p.s = unchecked_at(100, 100, 1000000, p.cur, 0);
    p.s.srtt_us = 150 * MS;
    sbt_law_look(&p.l, &p.lim, &p.s, &p.out);
    ok(p.out.contested && !p.out.queued, "contest: no delivered count (a "
       "kernel before 4.18): never steered");
}

/* Looks at @a rate under a standing queue until one is contested: the
 * hold it got, in seconds (0: none in 30 s). */
static int64_t promise_contest(promise_t *p, uint64_t rate)
{
    int i;

    for (i = 0; i < 300; i++) {
        promise_looks(p, 1, rate, 107);
        if (p->out.contested && p->l.short_since_us == 0
            && p->l.contested_until_us - p->s.now_us > 7000000) {
            return (p->l.contested_until_us - p->s.now_us) / 1000000;
        }
    }
    return 0;
}

/* Each contest holds twice as long as the one before, HOLD_DOUBLINGS 3
 * times; each rate a new loss of the one before. */
static void test_promise_doublings(void)
{
    promise_t p;

    promise_peak_then(&p, 0, 1000000);
    is_i(promise_contest(&p, 874990), 8, "doublings: the first contest "
         "holds 8 s");
    promise_looks(&p, 80, 874990, 107);
    is_i(promise_contest(&p, 500000), 16, "doublings: the second twice as "
         "long");
    promise_looks(&p, 160, 500000, 107);
    is_i(promise_contest(&p, 100000), 32, "doublings: the third 4 times");
    promise_looks(&p, 320, 100000, 107);
    is_i(promise_contest(&p, 10000), 64, "doublings: the fourth 8 times");
    promise_looks(&p, 640, 10000, 107);
    is_i(promise_contest(&p, 1000), 64, "doublings: and no longer "
         "(HOLD_DOUBLINGS 3)");
}

/* A crowd's member (another flow of this server at its RTT): what it
 * lost is traded, not lost, while it and its crowd deliver CONTEST 7/8
 * of what they did at its peak; a contest needs the loss to last
 * CROWD_LASTS 4 s (their sum, read once a second, is noisier). */
static void test_promise_crowd(void)
{
    promise_t p;
    int was;

    /* 0.5 MB/s of its 1: the other went from 1 to 1.25 (7/8 of 2). */
    promise_begin(&p);
    promise_crowd(&p, 1000000, 1000000, 1000000);
    promise_looks(&p, 20, 1000000, 107);
    promise_crowd(&p, 1250000, 1000000, 1000000);
    promise_looks(&p, 9, 500000, 107);
    was = p.cur;
    promise_looks(&p, 1, 500000, 107);
    ok(p.out.act == SBT_LAW_SET && p.out.size < was, "crowd: what it lost "
       "its crowd gained (their sum held 7/8): traded, steered down");
    promise_looks(&p, 60, 500000, 107);
    ok(!p.out.contested, "crowd: and never contested");

    promise_begin(&p);
    promise_crowd(&p, 1000000, 1000000, 1000000);
    promise_looks(&p, 20, 1000000, 107);
    promise_crowd(&p, 1249999, 1000000, 1000000);
    promise_looks(&p, 9, 500000, 107);
    was = p.cur;
    promise_looks(&p, 1, 500000, 107);
    ok(p.out.act == SBT_LAW_KEEP && p.cur == was, "crowd: a byte a second "
       "less: losing, not steered down");
    promise_looks(&p, 39, 500000, 107);
    ok(!p.out.contested, "crowd: losing 3.9 s, not contested");
    promise_looks(&p, 1, 500000, 107);
    ok(p.out.contested, "crowd: losing CROWD_LASTS 4 s: contested");

    /* Its others lost too (half of what they delivered then): no trade
     * under way, each loses to a sender this server does not know of;
     * contested after CONTEST_LASTS (1.5 s), as a flow alone. */
    promise_begin(&p);
    promise_crowd(&p, 1000000, 1000000, 1000000);
    promise_looks(&p, 20, 1000000, 107);
    promise_crowd(&p, 500000, 1000000, 1000000);
    promise_looks(&p, 24, 500000, 107);
    ok(!p.out.contested, "crowd, all losing: 1.4 s short, not contested");
    promise_looks(&p, 2, 500000, 107);
    ok(p.out.contested, "crowd, all losing: contested at CONTEST_LASTS "
       "1.5 s");
}

/* Once its buffer holds it back, and until a block in which it did has
 * shown that this costs nothing (proven), down by DOWN_SHIFT (1/8) at
 * most per block; a loss, or a contest, takes the proof back. */
static void test_promise_down(void)
{
    promise_t p;
    int was;

    promise_begin(&p);
    p.limited = 1;
    promise_looks(&p, 1, 1000000, 150);
    is_i(p.out.size, 350000, "down: held back, 1/8 down at most (DOWN_SHIFT "
         "3; steering wanted 336,229)");
    promise_looks(&p, 8, 1000000, 150);
    ok(p.out.act == SBT_LAW_KEEP && p.cur == 350000, "down: and no further "
       "in the same block");
    was = p.cur;
    promise_looks(&p, 1, 1000000, 150);
    is_i(p.out.size, was * 5 / 6 + 8 * MSS / 4, "down: a block held back "
         "that cost nothing: steered freely (5/6 of it, and the step)");

    /* Proven at 1 s, losing at 2 s (0.8 MB/s), recovered at 3 s in a
     * block its buffer did not hold it back: unproven still. */
    promise_begin(&p);
    p.limited = 1;
    promise_looks(&p, 10, 1000000, 107);
    p.limited = 0;
    promise_looks(&p, 10, 800000, 107);
    promise_looks(&p, 9, 1000000, 107);
    p.limited = 1;
    was = p.cur;
    promise_looks(&p, 1, 1000000, 150);
    is_i(p.out.size, was - was / 8, "down: a loss since takes the proof "
         "back: 1/8 down at most again");

    /* A crowd's member contested at 7 s (its others deliver as before:
     * CROWD_LASTS), the end of a block its buffer held it back; then it
     * delivers as before, unlimited, and at 15 s steers again from
     * autotuning's 400,000. */
    promise_begin(&p);
    promise_crowd(&p, 1000000, 1000000, 1000000);
    p.limited = 1;
    promise_looks(&p, 20, 1000000, 107);
    promise_looks(&p, 50, 500000, 107);
    ok(p.out.contested, "down: (contested at 7 s)");
    p.limited = 0;
    promise_crowd(&p, 1000000, 1000000, 1000000);
    promise_looks(&p, 79, 1000000, 107);
    p.limited = 1;
    promise_looks(&p, 1, 1000000, 150);
    ok(!p.out.contested && p.out.size == 350000, "down: a contest takes "
       "the proof back: 1/8 down at most from autotuning's size");
}

/* Held back by its buffer in its last block, a flow is not shrunk by a
 * look with no queue: another sender's PROBE_RTT can empty it for 200 ms,
 * and the flow's minimum RTT then sizes it below what it carries. */
static void test_bound_no_queue(void)
{
    promise_t p;
    int was;

    promise_begin(&p);
    p.limited = 1;
    promise_looks(&p, 10, 1000000, 107);
    p.limited = 0;
    was = p.cur;
    promise_looks(&p, 1, 1000000, 100);
    ok(p.out.act == SBT_LAW_KEEP && p.cur == was, "bound, then no queue: "
       "kept (the no-queue size, 11/8 x rate x minimum RTT, is 137,500)");
}

/* After its ramp, a loss-based flow left to autotuning whose delivery
 * still passes its peak by 1/16 (GROW_PEAK_SHIFT) within GROW_US (3 s)
 * stays there, queue or not: its ramp ends at its first loss, beside
 * another sender at a fraction of the share it then wins; before its
 * first whole block it is not known.  Growing by 1/8 a second to 3 s
 * under a queue of 50 ms over 100: the block that ends at 4 s shows the
 * last growth, so it is left to autotuning to 6.9 s, steered at 7 s. */
static int growing_steered_at(int loss_based, uint32_t path_min_rtt_us,
                              int *kept_to)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s = look_at(0, 100, 500000, 0, 800000);
    uint64_t rate = 500000, delivered = s.delivered;
    int t, steered_at = 0;

    sbt_law_begin(&l, &lim, &s, rate);
    l.ramping = 0;
    for (t = 1; t <= 80 && !steered_at; t++) {
        if (t <= 30 && t % 10 == 0) {
            rate += rate / 8;
        }
        delivered += rate / 10;
        s = look_at(t * 100, 100, rate, 0, 800000);
        s.srtt_us = 150 * MS;
        s.delivered = delivered;
        s.loss_based = loss_based;
        s.path_min_rtt_us = path_min_rtt_us;
        sbt_law_look(&l, &lim, &s, &out);
        if (out.act == SBT_LAW_KEEP
            && !strcmp(out.why, "its delivery still grows: left to "
                                "autotuning")) {
            *kept_to = t;
        }
        else if (out.act == SBT_LAW_SET && out.queued) {
            steered_at = t;
        }
    }
    return steered_at;
}

static void test_still_growing(void)
{
    int kept_to = 0, steered_at = growing_steered_at(1, 0, &kept_to);

    printf("# growing: left to autotuning to look %d, steered at %d\n",
           kept_to, steered_at);
    ok(kept_to == 69 && steered_at == 70, "growing: a loss-based flow is "
       "left to autotuning while it passes its peak by 1/16 and 3 s more, "
       "then steered");
    kept_to = 0;
    steered_at = growing_steered_at(0, 0, &kept_to);
    ok(kept_to == 0 && steered_at == 1, "growing: a bbr flow is steered "
       "from its first look after its ramp");
    kept_to = 0;
    steered_at = growing_steered_at(1, 100 * MS, &kept_to);
    ok(kept_to == 0 && steered_at == 1, "growing: so is a member of a "
       "crowd to its own client (what it gains, the crowd trades)");
}

/* Contested, a flow is left as doing nothing leaves it: to autotuning,
 * unless autotuning cannot reach its rate x RTT or the limits forbid it:
 * then that, queue or not. */
static void test_contested(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    begin_locked(&l, &lim, 100, 1000000, 100000);
    s = unchecked_at(100, 100, 1000000, 100000, 0);
    s.srtt_us = 150 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.contested && out.act == SBT_LAW_RELEASE, "contested: given back "
       "to autotuning");
    lim.limit_max = 262144;
    begin_locked(&l, &lim, 100, 1000000, 100000);
    s = unchecked_at(100, 100, 1000000, 100000, 0);
    s.srtt_us = 200 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_SET && out.size == 175875 && !out.queued,
       "contested: within the administrator's narrower limits, 7/8 x rate "
       "x (srtt + REFILL), not steered by its queue");
    lim = lab();
    begin_locked(&l, &lim, 250, 8 * R30M, 1 << 20);
    s = unchecked_at(250, 250, 8 * R30M, 1 << 20, 0);
    s.srtt_us = 300 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.act == SBT_LAW_SET && out.size > 2097152 && !out.queued,
       "contested: past autotuning's reach (240 Mbit/s, 250 ms), rate x "
       "RTT, not steered");
}

static void test_rates(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    lim.conf_rate = 20000000 / 8;
    begin_locked(&l, &lim, 100, 0, 100000);
    is_i(l.rate, lim.conf_rate, "rate: a configured rate is sized for");
    s = look_at(100, 100, lim.conf_rate * 6 / 10, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.rate, lim.conf_rate, "rate: kept while the flow gets half");
    ok(!out.rate_switched, "rate: no switch");

    begin_locked(&l, &lim, 100, 0, 100000);
    s = look_at(100, 100, lim.conf_rate / 3, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.rate, lim.conf_rate / 3, "rate: under half (SHARE_DIV 2), the "
         "measured one");
    ok(out.rate_switched, "rate: the switch is said");
}

static void test_loopback_cap(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    /* 3 GB/s: rate x (srtt + REFILL 1 ms) is 2.7 MB, rate x min rtt
     * 130 KB: never locked above what autotuning gives (issue 21 item 1). */
    begin_locked(&l, &lim, 0, 3000000000ull, 1 << 20);
    s = look_at(0, 0, 3000000000ull, 1 << 20, 0);
    s.min_rtt_us = 50;
    s.srtt_us = 1500;
    s.now_us = 10 * MS;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "loopback: set");
    ok(out.size * 2 <= (int)lim.tcp_wmem_max, "loopback: not above "
       "autotuning's ceiling (tcp_wmem[2] / 2)");
}

/* Each constant at its edge: one side of it, then the other. */
static int queued_at(uint32_t min_rtt_us, uint32_t srtt_us)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s = look_at(0, 0, 1000000, 400000, 0);

    s.min_rtt_us = min_rtt_us;
    s.srtt_us = min_rtt_us;
    sbt_law_begin(&l, &lim, &s, 1000000);
    s.now_us = 5000 * MS;
    s.srtt_us = srtt_us;
    sbt_law_look(&l, &lim, &s, &out);
    return out.queued;
}

/* The rate sized for when the flow gets @a measured B/s of a configured
 * 1,000,000. */
static uint64_t sized_for(uint64_t measured)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    lim.conf_rate = 1000000;
    begin_locked(&l, &lim, 100, 0, 100000);
    s = look_at(100, 100, measured, 100000, 0);
    sbt_law_look(&l, &lim, &s, &out);
    return l.rate;
}

static void test_edges(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;

    ok(queued_at(100 * MS, 106300), "edge: 6.3 ms over 100 ms is a queue "
       "(QUEUE_SHIFT 4: 6.25)");
    ok(!queued_at(100 * MS, 106250), "edge: 6.25 ms is not");
    ok(queued_at(200, 2201), "edge: 2001 us on a short path is a queue "
       "(QUEUE_MIN 2000)");
    ok(!queued_at(200, 2200), "edge: 2000 us is not");

    /* RAMP_SHIFT 2: growth over a quarter is growth. */
    s = look_at(0, 100, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 100000);
    s = look_at(100, 100, 125001, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.ramp_flat, 0, "edge: 1/4 + 1 B/s more is growth (RAMP_SHIFT 2)");
    s = look_at(200, 100, 125001 + 31250 + 1, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.ramp_flat, 0, "edge: again");
    s = look_at(300, 100, 156252 + 39063, 0, 65536);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(l.ramp_flat, 1, "edge: exactly 1/4 more is not");

    /* STEER_SHIFT 7: at 256 KiB and a 100 ms minimum, srtt 106.361 ms
     * moves the buffer 2047 B (under 1/128: 2048), 106.362 ms 2049 B. */
    begin_locked(&l, &lim, 100, 1000000, 262144);
    s = look_at(100, 100, 1000000, 262144, 0);
    s.srtt_us = 106362;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.queued && out.act == SBT_LAW_SET && out.size == 262144 - 2049,
       "edge: a steering move over 1/128 is made");
    begin_locked(&l, &lim, 100, 1000000, 262144);
    s.srtt_us = 106361;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.queued && out.act == SBT_LAW_KEEP,
       "edge: one under 1/128 is not (STEER_SHIFT 7)");

    /* REFILL_US 1000 on a fast flow: 1 GB/s x 1 us = 1000 B. */
    begin_locked(&l, &lim, 1, 1000000000ull, 65536);
    s = look_at(10, 1, 1000000000ull, 65536, 0);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, 1750000, "edge: REFILL 1 ms: 7/8 x 1 GB/s x 2 ms");

    /* SHARE_DIV 2: under half the configured rate the flow is sized for
     * what it gets; at exactly half, still for the configured rate. */
    is_i(sized_for(400000), 400000, "edge: 0.4 of the configured rate: "
         "measured");
    is_i(sized_for(500000), 1000000, "edge: half the configured rate: "
         "configured");

    /* The handshake: Linux counts its SYN as one byte acknowledged, so
     * only more than that is data (a deferred accept inflates the
     * handshake's RTT by the client's idle time). */
    {
        int handshake;

        s = look_at(0, 80, 0, 0, 16384);
        s.min_rtt_us = 50 * MS;
        s.bytes_acked = 1;
        is_i(sbt_law_own_min_rtt(&s, &handshake), 80 * MS,
             "edge: 1 byte acknowledged: the handshake's RTT");
        is_i(handshake, 1, "edge: and it says so");
        s.bytes_acked = 2;
        is_i(sbt_law_own_min_rtt(&s, &handshake), 50 * MS,
             "edge: 2 bytes: the data's minimum RTT");
    }

    /* Autotuning may govern where the limits' max reaches what it does:
     * a max of tcp_wmem[2] / 2 (SO_SNDBUF's half) is enough, one byte
     * less is the administrator's narrower range (no ramp). */
    lim.wmem_max = 8388608;
    lim.limit_max = 2097152;
    s = look_at(0, 100, 0, 0, 16384);
    sbt_law_begin(&l, &lim, &s, 0);
    is_i(l.ramping, 1, "edge: max tcp_wmem[2] / 2: autotuning ramps");
    lim.limit_max = 2097151;
    sbt_law_begin(&l, &lim, &s, 0);
    is_i(l.ramping, 0, "edge: one byte less: the administrator's range");
    lim = lab();

    /* LIMITED_SHIFT 3: 13 ms of 100 is limited, 12.5 is not. */
    begin_locked(&l, &lim, 100, 100000, 50000);
    s = look_at(100, 100, 100000, 50000, 0);
    s.sndbuf_limited_us = 12501;
    sbt_law_look(&l, &lim, &s, &out);
    ok(out.limited, "edge: limited 12.501 ms of 100 (LIMITED_SHIFT 3)");
    begin_locked(&l, &lim, 100, 100000, 50000);
    s.sndbuf_limited_us = 12500;
    sbt_law_look(&l, &lim, &s, &out);
    ok(!out.limited, "edge: 12.5 ms is not");
}

/* Rate x RTT saturates: at the largest configurable rate (1 Tbit/s) an
 * RTT of 147.573953 s takes the product just past 2^64, where a wrapped
 * one would lock a huge need at 44,879 bytes. */
#define WRAP_US 147573953u

static sbt_law_sample_t wrap_look(int64_t t_us, uint64_t rate, int locked,
                                  int tb)
{
    sbt_law_sample_t s = look_at(0, 0, rate, locked, tb);

    s.now_us = t_us;
    s.min_rtt_us = WRAP_US;
    s.srtt_us = WRAP_US - 1000;         /* + REFILL_US 1 ms */
    return s;
}

static void test_overflow(void)
{
    sbt_law_limits_t lim = lab();
    sbt_law_t l;
    sbt_law_out_t out;
    sbt_law_sample_t s;
    const uint64_t r1t = UINT64_C(1000000000000) / 8;

    lim.conf_rate = r1t;
    s = wrap_look(0, r1t, 65536, -1);
    sbt_law_begin(&l, &lim, &s, r1t);
    s = wrap_look(WRAP_US, r1t, 65536, -1);
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "overflow: 1 Tbit/s x 147.6 s is set");
    is_i(out.size, lim.limit_max, "overflow: at the max, not wrapped small");

    /* Recovering doubles the target. */
    s.srtt_us = WRAP_US / 2 - 1000;
    s.total_retrans = 5;
    sbt_law_begin(&l, &lim, &s, r1t);
    s.total_retrans = 6;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.size, lim.limit_max, "overflow: doubled for recovery, the max");

    /* The lift (4 x the target) from a measured rate, on an autotuned
     * socket at tcp_wmem[2]. */
    lim = lab();
    lim.wmem_max = 16777216;
    lim.limit_max = 16777216;
    s = wrap_look(0, 0, 0, 16384);
    s.min_rtt_us = WRAP_US / 2 + 1;
    sbt_law_begin(&l, &lim, &s, r1t);
    s = wrap_look(1000, r1t * 2, 0, 4194304);
    s.min_rtt_us = WRAP_US / 2 + 1;
    sbt_law_look(&l, &lim, &s, &out);
    is_i(out.act, SBT_LAW_SET, "overflow: the lift is set");
    is_i(out.size, lim.limit_max, "overflow: the lift at the max");
}

int main(void)
{
    test_estimate();
    test_unknown_rate();
    test_ramp();
    test_ramp_queue();
    test_path_min_rtt();
    test_lift();
    test_no_queue();
    test_loss();
    test_clamps();
    test_stock();
    test_no_release();
    test_loss_based();
    test_queue();
    test_floors();
    test_promise_short();
    test_promise_peak();
    test_promise_contest();
    test_promise_doublings();
    test_promise_crowd();
    test_promise_down();
    test_bound_no_queue();
    test_still_growing();
    test_contested();
    test_rates();
    test_loopback_cap();
    test_edges();
    test_overflow();
    return done_testing();
}
