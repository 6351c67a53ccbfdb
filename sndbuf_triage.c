/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_triage.c: the verdict on a response (what limited it) and the
 * words for a vhost's verdicts; pure, as sndbuf_law.c.  docs/status.md,
 * "What limited the downloads", explains the rule (a limit judged by the
 * rate it allows, as the kernel's chronographs alone cannot name it) and
 * the measurements behind its constants.
 */

#include <stdio.h>
#include <string.h>

#include "sndbuf_triage.h"

const char *const sbt_limit_names[SBT_VERDICT_SHORT + 1] = {
    "sndbuf", "rwnd", "network", "app", "unknown", "-"
};

/* Shorter responses get no verdict: the kernel counts its chronographs
 * in jiffies (1 to 10 ms), and a response this short is not slow. */
#define SBT_TRIAGE_MIN_US       100000

/* The server's own: not busy (nothing to send) for this share (%) of the
 * response's time or more. */
#define SBT_TRIAGE_APP          50

/* The buffer or the window: the response got this share (%) of the rate
 * it allows while busy, or NEAR of it while the sender was blocked by it
 * for BLOCKED of its busy time; where the rate is unknown (a window
 * before Linux 5.4), blocked for ALONE of the busy time. */
#define SBT_TRIAGE_AT           90
#define SBT_TRIAGE_NEAR         40
#define SBT_TRIAGE_BLOCKED      10
#define SBT_TRIAGE_ALONE        50

/* The data a send buffer of @a tb bytes (as the kernel reports it) carries
 * in flight: about two thirds (docs/auto.md, "How much a send buffer
 * carries"). */
#define SBT_CARRIED(tb)         ((tb) / 3 * 2)

/** @a bytes per @a us as bit/s; 0 if either is unknown. */
static uint64_t sbt_rate(uint64_t bytes, uint64_t us)
{
    if (!us || !bytes) {
        return 0;
    }
    /* No wrap: below 2^40 bytes, x 8e6 fits; above, divide first. */
    return bytes < (UINT64_C(1) << 40) ? bytes * 8000000 / us
                                       : bytes / us * 8000000;
}

/** How near a limit that allows @a allows bit/s, and blocked the sender
 *  for @a blocked of its @a busy time, came to holding a response sent at
 *  @a rate while busy: that rate as a % of the limit's, if the rule counts
 *  the limit as holding it (0 where its rate is unknown), else -1. */
static int64_t sbt_held(uint64_t blocked, uint64_t busy, uint64_t allows,
                        uint64_t rate)
{
    uint64_t near;

    if (!allows) {
        return busy && blocked * 100 >= busy * SBT_TRIAGE_ALONE ? 0 : -1;
    }
    near = rate / allows >= 100 ? 10000 : rate * 100 / allows;
    if (near >= SBT_TRIAGE_AT
        || (near >= SBT_TRIAGE_NEAR
            && blocked * 100 >= busy * SBT_TRIAGE_BLOCKED)) {
        return (int64_t)near;
    }
    return -1;
}

/** The verdict on a response long enough to judge. */
static void sbt_verdict(const sbt_triage_in_t *in, sbt_triage_t *out,
                        uint64_t elapsed)
{
    uint64_t rate;
    int64_t buf, wnd;

    if (out->us[SBT_LIMIT_APP] * 100 >= elapsed * SBT_TRIAGE_APP) {
        out->verdict = SBT_LIMIT_APP;
        out->why = "not busy for half its time or more";
        return;
    }
    /* The limits apply while there was something to send. */
    rate = sbt_rate(in->acked, in->busy_us);
    buf = sbt_held(in->sndbuf_us, in->busy_us,
                   out->allows[SBT_LIMIT_SNDBUF], rate);
    wnd = sbt_held(in->rwnd_us, in->busy_us, out->allows[SBT_LIMIT_RWND],
                   rate);
    /* Both: the one whose rate is the lower, which the goodput is the
     * nearer to. */
    if (buf >= 0 && buf >= wnd) {
        out->verdict = SBT_LIMIT_SNDBUF;
        out->why = "at the rate the send buffer allows";
    }
    else if (wnd >= 0) {
        out->verdict = SBT_LIMIT_RWND;
        out->why = "at the rate the client's window allows";
    }
    else {
        out->verdict = SBT_LIMIT_NETWORK;
        out->why = "busy, below what the buffer and the window allow";
    }
}

void sbt_triage(const sbt_triage_in_t *in, sbt_triage_t *out)
{
    uint64_t elapsed = in->elapsed_us > 0 ? (uint64_t)in->elapsed_us : 0;
    uint64_t busy, limited;

    memset(out, 0, sizeof(*out));
    out->verdict = SBT_VERDICT_UNKNOWN;
    out->why = "no chronographs in TCP_INFO (Linux < 4.10)";
    out->goodput = sbt_rate(in->acked, elapsed);
    out->allows[SBT_LIMIT_SNDBUF] = sbt_rate(SBT_CARRIED(in->buffer),
                                             in->srtt_us);
    out->allows[SBT_LIMIT_RWND] = sbt_rate(in->snd_wnd, in->srtt_us);
    out->allows[SBT_LIMIT_NETWORK] =
        sbt_rate((uint64_t)in->cwnd * in->mss, in->srtt_us);
    if (!in->chrono) {
        return;
    }
    /* The kernel's times are in jiffies, the elapsed time is not: busy
     * may come out a jiffy above it. */
    busy = in->busy_us < elapsed ? in->busy_us : elapsed;
    limited = in->sndbuf_us + in->rwnd_us;
    out->us[SBT_LIMIT_SNDBUF] = in->sndbuf_us;
    out->us[SBT_LIMIT_RWND] = in->rwnd_us;
    out->us[SBT_LIMIT_NETWORK] = busy > limited ? busy - limited : 0;
    out->us[SBT_LIMIT_APP] = elapsed - busy;
    if (elapsed < SBT_TRIAGE_MIN_US) {
        out->verdict = SBT_VERDICT_SHORT;
        out->why = "too short to tell";
        return;
    }
    sbt_verdict(in, out, elapsed);
}

/* ---- Words ---- */

/** @a bytes for people: "16 KiB", "4 MiB", "1.5 MiB", "900 bytes". */
static void sbt_size_words(char *buf, size_t len, uint64_t bytes)
{
    if (bytes >= (1 << 20)) {
        snprintf(buf, len, bytes % (1 << 20) ? "%.1f MiB" : "%.0f MiB",
                 bytes / 1048576.0);
    }
    else if (bytes >= 1024) {
        snprintf(buf, len, "%.0f KiB", bytes / 1024.0);
    }
    else {
        snprintf(buf, len, "%u bytes", (unsigned)bytes);
    }
}

/** @a bps for people, to two figures or so: "1 Mbit/s", "2.5 Mbit/s",
 *  "134 Mbit/s", "800 kbit/s", "1.2 Gbit/s". */
static void sbt_rate_words(char *buf, size_t len, uint64_t bps)
{
    double v = (double)bps;
    const char *unit = "kbit/s";

    if (bps >= 1000000000) {
        v /= 1e9;
        unit = "Gbit/s";
    }
    else if (bps >= 1000000) {
        v /= 1e6;
        unit = "Mbit/s";
    }
    else {
        v /= 1e3;
    }
    snprintf(buf, len, v < 9.95 && (int)(v * 10 + 0.5) % 10 ? "%.1f %s"
                                                             : "%.0f %s",
             v, unit);
}

int sbt_triage_top(const sbt_triage_sum_t *sum)
{
    int i, top = -1;

    for (i = 0; i < SBT_LIMITS; i++) {
        if (sum->by[i] && (top < 0 || sum->by[i] > sum->by[top])) {
            top = i;
        }
    }
    return top;
}

/** Where the buffer the send-buffer verdicts met came from (the most
 *  frequent source), in words, with what to change. */
static void sbt_buffer_words(char *buf, size_t len,
                             const sbt_triage_sum_t *sum,
                             const char *sendbuffersize_at, const char *rule)
{
    uint64_t n = sum->by[SBT_LIMIT_SNDBUF];
    uint64_t tb = sum->buf_sum / n, rtt = sum->rtt_sum / n;
    char size[32], rate[32];
    int i, from = 0;

    for (i = 1; i < SBT_BUF_SOURCES; i++) {
        if (sum->buf_from[i] > sum->buf_from[from]) {
            from = i;
        }
    }
    sbt_rate_words(rate, sizeof(rate), sbt_rate(SBT_CARRIED(tb), rtt));
    if (from == SBT_BUF_AUTOTUNING) {
        sbt_size_words(size, sizeof(size), tb);
        snprintf(buf, len, "autotuning stops at net.ipv4.tcp_wmem's maximum, "
                 "%s, which allows about %s at the %.0f ms these clients "
                 "see: raise it (and net.core.wmem_max), or try SndbufTune "
                 "auto", size, rate, rtt / 1000.0);
        return;
    }
    /* A lock: the size set, half what the kernel reports. */
    sbt_size_words(size, sizeof(size), tb / 2);
    if (from == SBT_BUF_LISTENER) {
        snprintf(buf, len, "the buffer in force, %s (core SendBufferSize%s"
                 "%s), allows about %s at the %.0f ms these clients see: try "
                 "SndbufTune auto or remove the line", size,
                 sendbuffersize_at ? " at " : "",
                 sendbuffersize_at ? sendbuffersize_at : "", rate,
                 rtt / 1000.0);
    }
    else if (from == SBT_BUF_AUTO) {
        snprintf(buf, len, "the buffer in force, %s (SndbufTune auto's size, "
                 "held by SndbufTuneLimits or net.core.wmem_max), allows "
                 "about %s at the %.0f ms these clients see: raise "
                 "SndbufTuneLimits' maximum or net.core.wmem_max", size, rate,
                 rtt / 1000.0);
    }
    else {
        snprintf(buf, len, "the buffer in force, %s (%s), allows about %s "
                 "at the %.0f ms these clients see: raise that size or try "
                 "SndbufTune auto", size, rule ? rule : "a SndbufTune size: "
                 "the access log's SNDBUF_TUNE_RULE names its line", rate,
                 rtt / 1000.0);
    }
}

void sbt_triage_words(char *buf, size_t len, const sbt_triage_sum_t *sum,
                      int chrono, const char *sendbuffersize_at,
                      const char *rule)
{
    static const char *const who[SBT_LIMITS] = {
        "the send buffer", "clients' receive windows", "the network",
        "the server itself (nothing to send for half the time or more)"
    };
    static const char *const then[SBT_LIMITS] = {
        NULL,
        "nothing to tune here: the clients' own buffers set the pace",
        "nothing to tune here: the buffer is not what limits these "
        "downloads",
        "nothing to tune here: the handler, the disk or a backend is slower "
        "than the network"
    };
    char more[512] = "";
    uint64_t judged = 0;
    int i, top = sbt_triage_top(sum);

    if (!sum->large) {
        snprintf(buf, len, "no large responses yet (larger than the send "
                 "buffer in force)");
        return;
    }
    if (!chrono) {
        snprintf(buf, len, "unknown: this kernel does not report what "
                 "limited a sender (TCP_INFO's chronographs, Linux 4.10)");
        return;
    }
    for (i = 0; i < SBT_LIMITS; i++) {
        judged += sum->by[i];
    }
    if (top < 0) {
        snprintf(buf, len, "none of the %llu large responses took long "
                 "enough to tell (0.1 s)", (unsigned long long)sum->large);
        return;
    }
    if (top == SBT_LIMIT_SNDBUF) {
        sbt_buffer_words(more, sizeof(more), sum, sendbuffersize_at, rule);
    }
    snprintf(buf, len, "%s limited %llu of %llu large responses (%.0f%%)"
             "; %s", who[top], (unsigned long long)sum->by[top],
             (unsigned long long)judged, 100.0 * sum->by[top] / judged,
             top == SBT_LIMIT_SNDBUF ? more : then[top]);
}
