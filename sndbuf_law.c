/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_law.c: the control law of "SndbufTune auto" (sndbuf_law.h).
 * A buffer below the bandwidth-delay product caps the flow at sndbuf /
 * RTT; a larger one only holds memory and, in a shared bottleneck, queue.
 * So auto aims at FACTOR x rate x RTT, or lets the flow's queue steer it
 * while that costs the flow (or its crowd) no delivery, and leaves the
 * buffer to autotuning where a lock is slower.
 */

#include <stddef.h>

#include "sndbuf_law.h"

/* FACTOR = 7/8: Linux doubles the argument and MSS-sized skbs carry about
 * a third of overhead, so the socket holds 1.2 x BDP of payload, filling
 * the pipe while the writer refills it.  Less holds BBR in startup (its
 * 2.89 gain); more lets each burst after a loss overflow a BDP of queue. */
#define SBT_LAW_FACTOR_NUM      7
#define SBT_LAW_FACTOR_DEN      8

/* While the delivery rate grows by a quarter per look the flow is in slow
 * start (or BBR's startup), where autotuning is as fast as anything: auto
 * takes over after RAMP_FLAT looks without such growth (BBR's full-pipe
 * test) or RAMP_RTTS RTTs in.  Slow start's overshoot, draining then,
 * never steers the buffer below the floor (below), which is above the
 * target. */
#define SBT_LAW_RAMP_SHIFT      2
#define SBT_LAW_RAMP_FLAT       3
#define SBT_LAW_RAMP_RTTS       32

/* Autotuning stops at tcp_wmem[2], on a long path no more than BBR's
 * startup keeps in flight (2.89 x BDP): a flow held there never leaves
 * startup.  LIFT x the target is 3.5 x BDP of payload; a measured rate
 * lags the path's there, so 4 x its target (3 x left BBR in startup). */
#define SBT_LAW_LIFT            3
#define SBT_LAW_LIFT_MEASURED   4

/* A queue below 1/16 of the minimum RTT or QUEUE_MIN (what load adds in
 * NICs and hosts) leaves room: a send-buffer-limited flow grows by a
 * quarter per look, another moves to the target.  A longer one steers the
 * buffer as FAST TCP steers its window, halfway each look toward cur x
 * (min RTT + variation) / RTT + STEP: STEP bytes of each flow stay queued,
 * so flows through one bottleneck settle at equal rates.  Past STEP_ROOM
 * (1/4 of the minimum RTT) the step shrinks in proportion, alike for all:
 * N flows queue sqrt(N) x STEP, not N x (nearly a BDP for 100).  Steered,
 * every move over 1/128 is made: at 1/16 a crowd stayed up to 25% off.
 * Never steered below ALONE/8 x its rate x its minimum RTT, a crowd's
 * member below CROWD/8 x it (not its crowd's mean: a crowd by RTT may be
 * flows on links of their own): Linux wakes the writer only once a
 * third of the buffer is free, and less runs a flow's pipe dry before the
 * refill comes (0.91-0.94 of autotuning's goodput at 9/8 alone); in a
 * crowd the others' queued data covers one member's refill. */
#define SBT_LAW_QUEUE_SHIFT     4
#define SBT_LAW_QUEUE_MIN       2000    /* microseconds */
#define SBT_LAW_GROW_SHIFT      2
#define SBT_LAW_STEP_SEGMENTS   8
#define SBT_LAW_STEP_ROOM_SHIFT 2
#define SBT_LAW_STEER_SHIFT     7
#define SBT_LAW_ALONE_NUM       11
#define SBT_LAW_CROWD_NUM       9

/* With no queue the target also covers the writer's refill time (a
 * wakeup and a sendfile), which on a 1 ms path is as long as the path. */
#define SBT_LAW_REFILL_US       1000

/* The queue of a crowd to the same client (the RTT a quarter of the
 * minimum above it and its variation) ends a bbr flow's ramp: BBR's
 * startup ignores losses, and growing only fills the queue the crowd's
 * late flows must then cross.  Not another client's
 * crowd: a ramp is what doing nothing gets, the measure of what steering
 * may not cost.  A loss-based flow's slow start ends at its first loss. */
#define SBT_LAW_CROWD_SHIFT     2

/* A configured rate is the client's: sized for while the flow gets at
 * least half of it, else (a crowd) from the measured rate. */
#define SBT_LAW_SHARE_DIV       2

/* A flow that retransmitted in the last LOSS_LOOKS looks and sees no queue
 * is sized for LOSS_FACTOR x the target: its buffer also holds what the
 * receiver SACKed past a hole until the retransmission fills it.  Under a
 * queue the losses are that queue overflowing, and more buffer only adds
 * to it. */
#define SBT_LAW_LOSS_LOOKS      8
#define SBT_LAW_LOSS_FACTOR     2

/* The lower minimum RTT of another flow to the same client at the same
 * RTT (sndbuf_path.c) is taken if it is at least 1/TRUST of the flow's
 * own, which began in the queue the others keep. */
#define SBT_LAW_PATH_TRUST      2

/* Never fewer than this many segments (x2 by Linux): below a few MSS
 * every write waits for a delayed ACK. */
#define SBT_LAW_MIN_SEGMENTS    2

/* The promise: steering (the queue term) must cost the flow nothing.  A
 * flow's delivery is counted per block of RATE_BLOCK_US (its last whole
 * block's rate) and its peak held over PEAK_BLOCKS blocks of PEAK_BLOCK_US
 * (12 to 16 s).  Delivering less than CONTEST_NUM/DEN of that peak, it is
 * short, unless its crowd (sndbuf_path.c: this server's other flows at
 * its RTT now) and it deliver CONTEST_NUM/DEN of what they did when its
 * rate was highest: then its share went to them, not away (flows in one
 * bottleneck trade shares while their sum holds), and a contest is the
 * whole crowd's, each member short with the others.  While short it
 * never steers down.
 * Short at every look for CONTEST_LASTS_US (CROWD_LASTS_US in a crowd
 * whose others still deliver CONTEST_NUM/DEN of what they did then: a
 * trade may be under way, and their sum a flow sees now is noisier than
 * one flow's rate: four reads) while its queue stands and has
 * stood CONTEST_STOOD_US, longer than a block, steering has only given
 * the link to another sender (a delay-based controller yields to a
 * loss-based one without end, and BBR's PROBE_RTT drains a queue and its
 * delivery at once): the flow is contested, left to autotuning for
 * CONTEST_HOLD_US, doubled at each contest up to HOLD_DOUBLINGS times,
 * then steers again. */
#define SBT_LAW_RATE_BLOCK_US   1000000
#define SBT_LAW_PEAK_BLOCK_US   4000000
#define SBT_LAW_PEAK_BLOCKS     4
#define SBT_LAW_CONTEST_NUM     7
#define SBT_LAW_CONTEST_DEN     8
#define SBT_LAW_CONTEST_STOOD_US 2000000
#define SBT_LAW_CONTEST_LASTS_US 1500000
#define SBT_LAW_CROWD_LASTS_US  4000000
#define SBT_LAW_CONTEST_HOLD_US 8000000
#define SBT_LAW_HOLD_DOUBLINGS  3
#define SBT_LAW_DOWN_SHIFT      3

/* A loss-based flow's ramp ends at its first loss, which in a queue
 * another sender keeps full comes at a fraction of the share its
 * congestion avoidance then wins over seconds; steered from there, its
 * peak is the rate the buffer held it at, and the promise never sees the
 * loss.  So until its first whole block, and while its delivery passes
 * its peak by 1/GROW_PEAK (1/16) within GROW_US, it is left to autotuning
 * after its ramp too.  Not a bbr flow: its startup ends at a full pipe,
 * or at its crowd's queue (CROWD_SHIFT), which growing would refill.  Nor
 * one with others to its client at its RTT: what it gains there its
 * crowd trades, and their queue is theirs to steer. */
#define SBT_LAW_GROW_PEAK_SHIFT 4
#define SBT_LAW_GROW_US         3000000

/* Send-buffer-limited for more than 1/8 of an interval means limited. */
#define SBT_LAW_LIMITED_SHIFT   3

/** FACTOR x rate x RTT, saturating where rate x RTT passes 2^64 (a need
 *  of terabytes, which the limits then clamp).  At most 2^64 / 10^6: the
 *  small multiples the callers take of it cannot wrap either. */
static uint64_t sbt_law_target(uint64_t rate, uint64_t rtt_us)
{
    uint64_t bytes = rtt_us && rate > UINT64_MAX / rtt_us
                     ? UINT64_MAX / 1000000 : rate * rtt_us / 1000000;

    return bytes / SBT_LAW_FACTOR_DEN * SBT_LAW_FACTOR_NUM
           + bytes % SBT_LAW_FACTOR_DEN * SBT_LAW_FACTOR_NUM
             / SBT_LAW_FACTOR_DEN;
}

/** Peak-hold: follow rises at once, fall by half the gap per look; an
 *  app-limited sample only raises it; no sample (0) is no news. */
static uint64_t sbt_law_estimate(uint64_t est, const sbt_law_sample_t *s)
{
    uint64_t sample = s->delivery_rate;

    if (sample > est) {
        return sample;
    }
    return !sample || s->app_limited ? est : est - (est - sample) / 2;
}

uint32_t sbt_law_own_min_rtt(const sbt_law_sample_t *s, int *handshake)
{
    int from_data = s->min_rtt_us && s->bytes_acked > 1;

    /* Before data is acknowledged only the handshake sample exists,
     * which TCP_DEFER_ACCEPT inflates by the client's idle time. */
    *handshake = !from_data;
    return from_data ? s->min_rtt_us : s->srtt_us;
}


static void sbt_law_rtt(sbt_law_t *l, const sbt_law_sample_t *s)
{
    uint32_t path = s->path_min_rtt_us;

    l->own_min_rtt_us = sbt_law_own_min_rtt(s, &l->from_handshake);
    l->min_rtt_us = l->own_min_rtt_us;
    if (!l->from_handshake && path && path < l->own_min_rtt_us
        && (uint64_t)path * SBT_LAW_PATH_TRUST >= l->own_min_rtt_us) {
        l->min_rtt_us = path;
    }
}

/** May the buffer be left to autotuning?  Only where SndbufTuneLimits
 *  leaves it the kernel's range: a narrower range is the administrator's,
 *  and a release let autotuning pass it (03). */
static int sbt_law_autotuning_allowed(const sbt_law_limits_t *lim)
{
    return lim->tcp_wmem_max
           && ((lim->wmem_max && (uint64_t)lim->limit_max >= lim->wmem_max)
               || 2 * (uint64_t)lim->limit_max >= lim->tcp_wmem_max)
           && 2 * (uint64_t)lim->limit_min <= lim->tcp_wmem_initial;
}

void sbt_law_begin(sbt_law_t *l, const sbt_law_limits_t *lim,
                   const sbt_law_sample_t *s, uint64_t estimate)
{
    *l = (sbt_law_t){0};
    l->began_us = l->last_us = s->now_us;
    l->limited_us = s->sndbuf_limited_us;
    l->retrans = s->total_retrans;
    l->measured = l->ramp_rate = estimate;
    l->rate = lim->conf_rate ? lim->conf_rate : estimate;
    /* Autotuning carries the ramp only on a socket it governs. */
    l->ramping = !s->locked_at && sbt_law_autotuning_allowed(lim);
    sbt_law_rtt(l, s);
    l->block_us = l->drained_us = s->now_us;
    l->block_delivered = s->delivered;
    l->block_limited_us = s->sndbuf_limited_us;
}

/** The queue: the smoothed RTT beyond the minimum and its variation. */
static uint32_t sbt_law_queue_us(const sbt_law_t *l, const sbt_law_sample_t *s)
{
    uint64_t base = (uint64_t)l->min_rtt_us + s->rttvar_us;

    return s->srtt_us > base ? (uint32_t)(s->srtt_us - base) : 0;
}

/** Still ramping up (updates the ramp's state)? */
static int sbt_law_ramping(sbt_law_t *l, const sbt_law_sample_t *s)
{
    int too_long = s->now_us - l->began_us
                   >= (int64_t)l->min_rtt_us * SBT_LAW_RAMP_RTTS;
    int grew = l->measured
               > l->ramp_rate + (l->ramp_rate >> SBT_LAW_RAMP_SHIFT);

    if (s->path_min_rtt_us && !s->loss_based && !l->from_handshake
        && sbt_law_queue_us(l, s) > l->min_rtt_us >> SBT_LAW_CROWD_SHIFT) {
        l->ramping = 0;
        return 0;
    }
    if (!too_long && (l->from_handshake || grew)) {
        l->ramp_rate = l->measured;
        l->ramp_flat = 0;
        return 1;
    }
    if (!too_long && ++l->ramp_flat < SBT_LAW_RAMP_FLAT) {
        return 1;
    }
    l->ramping = 0;
    return 0;
}

/** Sets the rate sized for (SHARE_DIV); TRUE when it switched. */
static int sbt_law_set_rate(sbt_law_t *l, const sbt_law_limits_t *lim)
{
    uint64_t conf = lim->conf_rate;
    int was_sharing = l->rate != conf;
    int sharing = !l->ramping && l->measured * SBT_LAW_SHARE_DIV < conf;

    l->rate = sharing || !conf ? l->measured : conf;
    return conf && sharing != was_sharing;
}

static int sbt_law_clamp(uint64_t v, const sbt_law_limits_t *lim,
                         uint32_t mss, sbt_law_out_t *out)
{
    uint64_t min = (uint64_t)lim->limit_min, max = (uint64_t)lim->limit_max;
    uint64_t floor = (uint64_t)mss * SBT_LAW_MIN_SEGMENTS;
    /* The segments' floor where the limits leave room for it. */
    uint64_t lo = floor > min && floor <= max ? floor : min;
    uint64_t size = v < lo ? lo : v > max ? max : v;

    out->clamped |= size != v;
    return (int)size;
}

/** The kernel, not the administrator, would cut @a want: a lock at
 *  wmem_max that autotuning could outgrow. */
static int sbt_law_kernel_binds(uint64_t want, const sbt_law_limits_t *lim)
{
    return lim->wmem_max && want > lim->wmem_max
           && (uint64_t)lim->limit_max >= lim->wmem_max
           && 2 * (uint64_t)lim->wmem_max < lim->tcp_wmem_max;
}

/** Long enough to steer by (QUEUE_SHIFT, QUEUE_MIN)? */
static int sbt_law_queue_steers(uint32_t min_rtt_us, uint32_t queue_us)
{
    return queue_us > min_rtt_us >> SBT_LAW_QUEUE_SHIFT
           && queue_us > SBT_LAW_QUEUE_MIN;
}

/** The peak-held delivery over the last PEAK_BLOCKS blocks. */
static uint64_t sbt_law_peak(const sbt_law_t *l)
{
    uint64_t peak = 0;
    int i;

    for (i = 0; i < SBT_LAW_PEAK_BLOCKS; i++) {
        peak = l->peak[i] > peak ? l->peak[i] : peak;
    }
    return peak;
}

/** Count what the flow delivered: a block ends at the first look a
 *  RATE_BLOCK_US after it began, its rate raising its PEAK_BLOCK's. */
static void sbt_law_count(sbt_law_t *l, const sbt_law_sample_t *s)
{
    int64_t span = s->now_us - l->block_us, epoch, e;
    uint64_t peak;
    int bound = ((s->sndbuf_limited_us - l->block_limited_us)
                 << SBT_LAW_LIMITED_SHIFT) > (uint64_t)span;

    if (span < SBT_LAW_RATE_BLOCK_US || s->delivered < l->block_delivered) {
        return;
    }
    l->rate_now = (s->delivered - l->block_delivered) * 1000000
                  / (uint64_t)span;
    peak = sbt_law_peak(l);
    if (l->rate_now > peak + (peak >> SBT_LAW_GROW_PEAK_SHIFT)) {
        l->grew_us = s->now_us;
    }
    l->block_us = s->now_us;
    l->block_delivered = s->delivered;
    l->block_limited_us = s->sndbuf_limited_us;
    l->bound = bound;
    epoch = s->now_us / SBT_LAW_PEAK_BLOCK_US;
    for (e = l->peak_epoch + 1; e <= epoch
         && e <= l->peak_epoch + SBT_LAW_PEAK_BLOCKS; e++) {
        l->peak[e % SBT_LAW_PEAK_BLOCKS] = 0;
    }
    l->peak_epoch = epoch > l->peak_epoch ? epoch : l->peak_epoch;
    if (l->rate_now > l->peak[epoch % SBT_LAW_PEAK_BLOCKS]) {
        l->peak[epoch % SBT_LAW_PEAK_BLOCKS] = l->rate_now;
    }
}

/** Is @a rate short of @a peak (CONTEST_NUM/DEN)? */
static int sbt_law_below(uint64_t rate, uint64_t peak)
{
    return peak && rate / SBT_LAW_CONTEST_NUM * SBT_LAW_CONTEST_DEN < peak;
}

/** Did what the flow lost since its peak (in sndbuf_path.c's 16 s) go
 *  to its crowd: do they and it still deliver CONTEST_NUM/DEN of what
 *  they did then? */
static int sbt_law_traded(const sbt_law_t *l, const sbt_law_sample_t *s)
{
    return s->crowd_members
           && !sbt_law_below(s->crowd_rate + l->rate_now,
                             s->crowd_rate_then + s->crowd_own_then);
}

/** Does the flow deliver short of its peak what its crowd did not gain?
 *  (Its queue may be another sender's.) */
static int sbt_law_losing(const sbt_law_t *l, const sbt_law_sample_t *s)
{
    return sbt_law_below(l->rate_now, sbt_law_peak(l))
           && !sbt_law_traded(l, s);
}

/** Is the flow contested now (updates the contest's state)?  Short of
 *  its peak, and its crowd did not gain what it lost. */
static int sbt_law_contested(sbt_law_t *l, const sbt_law_sample_t *s,
                             int queue_stands)
{
    int hold = l->contests < SBT_LAW_HOLD_DOUBLINGS
               ? l->contests : SBT_LAW_HOLD_DOUBLINGS;

    if (!queue_stands) {
        l->drained_us = s->now_us;
    }
    if (!s->has_delivered || s->now_us < l->contested_until_us) {
        return 1;
    }
    if (!queue_stands || s->now_us - l->drained_us < SBT_LAW_CONTEST_STOOD_US
        || !sbt_law_losing(l, s)) {
        l->short_since_us = 0;
        return 0;
    }
    if (!l->short_since_us) {
        l->short_since_us = s->now_us;
    }
    if (s->now_us - l->short_since_us
        < (s->crowd_members && !sbt_law_below(s->crowd_rate,
                                              s->crowd_rate_then)
           ? SBT_LAW_CROWD_LASTS_US : SBT_LAW_CONTEST_LASTS_US)) {
        return 0;
    }
    l->contested_until_us = s->now_us
                            + ((int64_t)SBT_LAW_CONTEST_HOLD_US << hold);
    l->contests++;
    l->proven = 0;
    l->short_since_us = 0;
    return 1;
}

/** FAST's step: the bytes each flow leaves in a queue of @a queue_us. */
static uint64_t sbt_law_step(const sbt_law_t *l, const sbt_law_sample_t *s,
                             uint32_t queue_us)
{
    uint64_t step = (uint64_t)s->mss * SBT_LAW_STEP_SEGMENTS;
    uint32_t room = l->min_rtt_us >> SBT_LAW_STEP_ROOM_SHIFT;

    return room && queue_us > room ? step * room / queue_us : step;
}

/** The law proper: the next size for a buffer now at @a cur, unclamped;
 *  @a queue_us: the queue that steers it (0: none). */
static uint64_t sbt_law_next(const sbt_law_t *l, const sbt_law_sample_t *s,
                             uint32_t queue_us, int limited, uint64_t cur)
{
    uint64_t next, floor = sbt_law_target(l->rate, l->min_rtt_us);

    floor = floor / SBT_LAW_FACTOR_NUM
            * (s->crowd_members ? SBT_LAW_CROWD_NUM : SBT_LAW_ALONE_NUM);
    if (queue_us) {
        next = (cur + cur * ((uint64_t)l->min_rtt_us + s->rttvar_us)
                      / s->srtt_us
                + sbt_law_step(l, s, queue_us)) / 2;
    }
    else {
        next = sbt_law_target(l->rate, (uint64_t)s->srtt_us + s->rttvar_us
                                       + SBT_LAW_REFILL_US);
        if (l->recovering) {
            next *= SBT_LAW_LOSS_FACTOR;
        }
        if (limited && next < cur + (cur >> SBT_LAW_GROW_SHIFT)) {
            next = cur + (cur >> SBT_LAW_GROW_SHIFT);
        }
        /* Held back in its last block: a look with no queue (another
         * sender's PROBE_RTT can empty it for 200 ms) is no reason to
         * hold it back further. */
        else if (l->bound && next < cur) {
            next = cur;
        }
    }
    next = next < floor ? floor : next;
    return next < cur / 2 ? cur / 2 : next;
}

/** Is the move from @a cur to @a next worth a system call? */
static int sbt_law_worth_it(int cur, int next, uint32_t mss, int steering)
{
    int d = next > cur ? next - cur : cur - next;

    return steering ? d > cur >> SBT_LAW_STEER_SHIFT
                    : d > cur / 16 || d >= (int)mss;
}

/** After the ramp: the law's size, or why the buffer is better left to
 *  autotuning (returned; NULL: out->size holds the size). */
static const char *sbt_law_size(sbt_law_t *l, const sbt_law_limits_t *lim,
                                const sbt_law_sample_t *s, uint64_t cur,
                                sbt_law_out_t *out)
{
    uint64_t law, want;

    /* A loss-based flow still winning its share (GROW_PEAK, GROW_US). */
    if (s->loss_based && !s->locked_at && !s->path_min_rtt_us
        && (!l->grew_us || s->now_us - l->grew_us < SBT_LAW_GROW_US)) {
        return "its delivery still grows: left to autotuning";
    }
    /* The queue steers unless that has cost delivery (a contest); while
     * the flow delivers short of its peak, before that makes one, or its
     * latest samples say it loses delivery, the queue may be another
     * sender's: no steering down. */
    out->queue_us = sbt_law_queue_us(l, s);
    out->queued = !out->contested
                  && sbt_law_queue_steers(l->min_rtt_us, out->queue_us);
    want = law = sbt_law_next(l, s, out->queued ? out->queue_us : 0,
                              out->limited, cur);
    if (out->queued && sbt_law_losing(l, s)) {
        l->proven = 0;
        want = law = want < cur ? cur : want;
    }
    /* Once the buffer holds the flow back, and until a block in which it
     * did has shown that this costs nothing, down by DOWN_SHIFT at most
     * per block: the next block tells before the next step. */
    if (l->floor_us != l->block_us) {
        l->floor = cur - (cur >> SBT_LAW_DOWN_SHIFT);
        l->floor_us = l->block_us;
    }
    if (out->queued && (l->bound || out->limited) && !l->proven
        && want < l->floor) {
        want = law = l->floor;
    }
    /* Contested, the flow is left as doing nothing would leave it, to
     * autotuning, unless autotuning cannot reach what it needs (a long
     * fat path) or the limits forbid it: then rate x RTT, queue or not. */
    if (out->contested && sbt_law_autotuning_allowed(lim)
        && 2 * law <= lim->tcp_wmem_max) {
        return "steering cost the flow delivery (another sender shares its "
               "queue): left to autotuning";
    }
    if (sbt_law_kernel_binds(want, lim)) {
        /* Locked at wmem_max where a queue takes the buffer down from
         * autotuning's size, and given back at a look without one: else
         * a flow on a stock kernel would never leave autotuning. */
        if (!out->queued || want >= cur) {
            return "net.core.wmem_max is below the size wanted: left to "
                   "autotuning";
        }
        want = lim->wmem_max;
    }
    /* Past autotuning's ceiling only where rate x minimum RTT needs it:
     * on a fast path the smoothed RTT and the refill time would lock
     * more than autotuning gives, which a reader that stalls then pins. */
    if (lim->tcp_wmem_max && 2 * want > lim->tcp_wmem_max
        && 2 * sbt_law_target(l->rate, l->min_rtt_us) <= lim->tcp_wmem_max) {
        want = lim->tcp_wmem_max / 2;
    }
    /* Last: the limits are the administrator's, in either direction. */
    out->size = sbt_law_clamp(want, lim, s->mss, out);
    return NULL;
}

/** After the ramp: resize, keep, or give the buffer back to autotuning. */
static void sbt_law_retune(sbt_law_t *l, const sbt_law_limits_t *lim,
                           const sbt_law_sample_t *s, sbt_law_out_t *out)
{
    uint64_t cur = s->locked_at ? (uint64_t)s->locked_at
                   : s->effective > 0 ? (uint64_t)s->effective / 2 : 0;

    if (!l->rate || !cur) {
        out->why = "rate or size not known yet";
        return;
    }
    out->why = sbt_law_size(l, lim, s, cur, out);
    if (out->why != NULL) {
        out->size = 0;
        out->act = (s->locked_at && !lim->shared) ? SBT_LAW_RELEASE
                                                  : SBT_LAW_KEEP;
        return;
    }
    if (s->locked_at && !sbt_law_worth_it((int)cur, out->size, s->mss,
                                          out->queued)) {
        out->why = "no change worth a system call";
        return;
    }
    out->act = SBT_LAW_SET;
    /* A steered buffer holds the flow below its window; a loss-based
     * sender, unlike bbr, does not pace, so each refill would leave at
     * once and the bursts overflow the queue that steers it. */
    out->pace = s->loss_based && !out->contested;
    out->why = out->queued ? "steered by the queue" : "rate x RTT";
}

/** At tcp_wmem[2] while the rate grows, the ramp gets LIFT x the target
 *  where the kernel grants more (from the rate, not the limits: a stalled
 *  reader keeps it).  Not on HTTP/2, where it would outlast the ramp. */
static void sbt_law_lift(sbt_law_t *l, const sbt_law_limits_t *lim,
                         const sbt_law_sample_t *s, sbt_law_out_t *out)
{
    uint64_t want;

    out->why = "ramping: left to autotuning";
    if (l->lifted || lim->shared || s->locked_at
        || s->effective < 0 || (uint32_t)s->effective < lim->tcp_wmem_max) {
        return;
    }
    l->lifted = 1;
    want = (lim->conf_rate ? SBT_LAW_LIFT : SBT_LAW_LIFT_MEASURED)
           * sbt_law_target(l->rate, l->min_rtt_us);
    if (sbt_law_kernel_binds(want, lim)) {
        out->why = "ramping at tcp_wmem[2]: net.core.wmem_max grants "
                   "no more, left to autotuning";
        return;
    }
    out->size = sbt_law_clamp(want, lim, s->mss, out);
    if (2 * (uint64_t)out->size <= (uint64_t)s->effective) {
        out->why = "ramping at tcp_wmem[2], which is enough for the rate";
        return;
    }
    out->act = SBT_LAW_SET;
    out->why = "ramping at tcp_wmem[2] while the rate grows: lifted";
}

/** A kernel without SO_BUF_LOCK (Linux < 5.15) cannot give a lock back:
 *  lock as near autotuning's reach (tcp_wmem[2]) as wmem_max lets (a
 *  release is only wanted where that reach is known).  Only ever up: the
 *  lock in force may already be as near. */
static void sbt_law_no_release(const sbt_law_limits_t *lim,
                               const sbt_law_sample_t *s, sbt_law_out_t *out)
{
    uint64_t reach = lim->tcp_wmem_max / 2;

    int size;

    if (lim->wmem_max && reach > lim->wmem_max) {
        reach = lim->wmem_max;
    }
    size = sbt_law_clamp(reach, lim, s->mss, out);
    out->act = size > s->locked_at ? SBT_LAW_SET : SBT_LAW_KEEP;
    out->size = out->act == SBT_LAW_SET ? size : 0;
    out->why = "autotuning would do better, but this kernel cannot give a "
               "lock back (no SO_BUF_LOCK): as near its reach as allowed";
}

void sbt_law_look(sbt_law_t *l, const sbt_law_limits_t *lim,
                  const sbt_law_sample_t *s, sbt_law_out_t *out)
{
    int ramp;

    *out = (sbt_law_out_t){.why = ""};
    sbt_law_rtt(l, s);
    l->measured = sbt_law_estimate(l->measured, s);
    out->limited = s->has_chrono
                   && ((s->sndbuf_limited_us - l->limited_us)
                       << SBT_LAW_LIMITED_SHIFT)
                      > (uint64_t)(s->now_us - l->last_us);
    l->limited_us = s->sndbuf_limited_us;
    l->last_us = s->now_us;
    if (s->total_retrans > l->retrans) {
        l->recovering = SBT_LAW_LOSS_LOOKS;
    }
    else if (l->recovering) {
        l->recovering--;
    }
    l->retrans = s->total_retrans;
    sbt_law_count(l, s);
    /* A block in which the buffer held the flow back and it lost
     * nothing proves that holding it costs nothing. */
    l->proven |= l->bound && !sbt_law_losing(l, s);
    out->crowd = s->crowd_members;
    out->excused = sbt_law_below(l->rate_now, sbt_law_peak(l))
                   && sbt_law_traded(l, s);
    out->contested = sbt_law_contested(l, s, sbt_law_queue_steers(
                                           l->min_rtt_us,
                                           sbt_law_queue_us(l, s)));
    ramp = l->ramping && sbt_law_ramping(l, s);
    out->rate_switched = sbt_law_set_rate(l, lim);
    if (ramp) {
        sbt_law_lift(l, lim, s, out);
    }
    else {
        sbt_law_retune(l, lim, s, out);
    }
    if (out->act == SBT_LAW_RELEASE && lim->no_release) {
        sbt_law_no_release(lim, s, out);
    }
}
