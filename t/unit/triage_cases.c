/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/triage_cases.c: the triage (sndbuf_triage.c) on its own: figures
 * recorded in the WAN lab and constructed ones in, exact verdicts and
 * words out (TAP, make unit).  Each cause has a case at each edge of its
 * rule, which fails when a constant or a branch changes.
 */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../../sndbuf_triage.h"
#include "tap.h"

static sbt_limit_e verdict(const sbt_triage_in_t *in)
{
    sbt_triage_t t;

    sbt_triage(in, &t);
    return t.verdict;
}

static void is_v(const sbt_triage_in_t *in, sbt_limit_e want,
                 const char *name)
{
    sbt_limit_e got = verdict(in);

    ok(got == want, name);
    if (got != want) {
        printf("#   got %s, expected %s\n", sbt_limit_names[got],
               sbt_limit_names[want]);
    }
}

/* ---------------------------------------------------------------- */

/* Recorded: the trace1 line "SndbufTune triage: ..." of one download from
 * an apache2 in the WAN lab's server namespace (bbr, tcp_wmem[2] 4 MiB),
 * with what held it (the path, the buffer, the client's SO_RCVBUF) and
 * the verdict it must get. */
static const struct {
    const char *what;
    int64_t elapsed;
    uint64_t busy, sndbuf, rwnd, acked;
    uint32_t srtt, cwnd, wnd;
    uint64_t buffer;
    sbt_limit_e want;
} sbt_recorded[] = {
    {"30 Mbit/s 250 ms, SendBufferSize 16384: 1.45 of 0.70 Mbit/s, "
     "blocked 51%", 5653509, 5652000, 2876000, 0, 1023736, 250802, 110,
     273408, 32768, SBT_LIMIT_SNDBUF},
    {"the same, the client's SO_RCVBUF 64 KiB: the buffer's rate is the "
     "lower", 7561167, 7560000, 4664000, 0, 996224, 250786, 84, 80480, 32768,
     SBT_LIMIT_SNDBUF},
    {"30 Mbit/s 250 ms, SndbufTune 64k: 75% of its rate, blocked 68%",
     11764569, 11764000, 8024000, 0, 3066864, 250779, 212, 510976, 131072,
     SBT_LIMIT_SNDBUF},
    {"30 Mbit/s 250 ms, SndbufTune 256k: 9.7 of 11 Mbit/s, blocked 55%",
     9952936, 9952000, 5456000, 0, 12119760, 256436, 768, 1935360, 524288,
     SBT_LIMIT_SNDBUF},
    {"30 Mbit/s 250 ms, SndbufTune 1m: 65% of its rate, never blocked",
     4624637, 4624000, 0, 0, 10958464, 382154, 1828, 5642240, 2097152,
     SBT_LIMIT_NETWORK},
    {"30 Mbit/s 250 ms, SO_RCVBUF 64 KiB: 91% of the window's rate, "
     "blocked 33% (no majority)", 7776929, 7780000, 0, 2532000, 2263344,
     250589, 128, 80480, 4194304, SBT_LIMIT_RWND},
    {"30 Mbit/s 250 ms, SO_RCVBUF 256 KiB: 86%, blocked 45%", 8563805,
     8564000, 0, 3876000, 9560336, 250715, 472, 326880, 4194304,
     SBT_LIMIT_RWND},
    {"30 Mbit/s 250 ms, SO_RCVBUF 1 MiB (above the path's BDP): 58%, "
     "blocked 8%", 12750423, 12752000, 0, 972000, 38422216, 250927, 1276,
     1309920, 4194304, SBT_LIMIT_NETWORK},
    {"30 Mbit/s 250 ms, autotuned", 12358819, 12360000, 0, 0, 38408200,
     250701, 1264, 20971520, 4194304, SBT_LIMIT_NETWORK},
    {"30 Mbit/s 250 ms, mod_ratelimit 100 KiB/s: busy all along (the "
     "path holds more than a write's gap)", 10215758, 10216000, 0, 0,
     1024000, 250827, 88, 171008, 4194304, SBT_LIMIT_NETWORK},
    {"10 Mbit/s 60 ms, autotuned", 9702988, 9704000, 0, 0, 11505808, 70582,
     110, 2790400, 4194304, SBT_LIMIT_NETWORK},
    {"10 Mbit/s 60 ms, SndbufTune 16k: never blocked (bbr's pacing keeps "
     "a queue), 222% of its rate", 4823416, 4824000, 0, 0, 3078448, 76016,
     92, 266240, 32768, SBT_LIMIT_SNDBUF},
    {"10 Mbit/s 60 ms, SO_RCVBUF 64 KiB", 9863452, 9864000, 0, 5512000,
     11680720, 66097, 118, 80480, 4194304, SBT_LIMIT_RWND},
    {"10 Mbit/s 60 ms, SndbufTune auto", 10440586, 10440000, 0, 0,
     12053152, 63155, 112, 2807808, 660288, SBT_LIMIT_NETWORK},
    {"10 Mbit/s 60 ms, SndbufTune 64k: 106% of its rate, blocked 36% "
     "(87% of the path)", 2950488, 2952000, 1076000, 0, 3072656, 88695, 154,
     371712, 131072, SBT_LIMIT_SNDBUF},
    {"30 Mbit/s 180 ms, SndbufTune 16k", 4068817, 4068000, 2080000, 0,
     1025184, 181576, 110, 304128, 32768, SBT_LIMIT_SNDBUF},
    {"30 Mbit/s 180 ms, SO_RCVBUF 128 KiB", 1920474, 1920000, 0, 612000,
     1093552, 180772, 246, 163040, 4194304, SBT_LIMIT_RWND},
    {"30 Mbit/s 180 ms, SndbufTune auto", 3759660, 3760000, 0, 0, 9746488,
     182365, 934, 14854144, 4194304, SBT_LIMIT_NETWORK},
    {"loopback, SendBufferSize 16384, mod_ratelimit 100 KiB/s: never busy",
     3010917, 0, 0, 0, 307451, 177, 18, 124928, 32768, SBT_LIMIT_APP},
    {"loopback, mod_ratelimit 8 MiB/s: busy 2% (its access-log line)",
     2047000, 48000, 0, 4000, 16777216, 30, 18, 65483, 4194304,
     SBT_LIMIT_APP},
};

static void test_recorded(void)
{
    sbt_triage_in_t in = {0};
    char name[256];
    size_t i;

    for (i = 0; i < sizeof(sbt_recorded) / sizeof(sbt_recorded[0]); i++) {
        in.elapsed_us = sbt_recorded[i].elapsed;
        in.chrono = 1;
        in.busy_us = sbt_recorded[i].busy;
        in.sndbuf_us = sbt_recorded[i].sndbuf;
        in.rwnd_us = sbt_recorded[i].rwnd;
        in.acked = sbt_recorded[i].acked;
        in.srtt_us = sbt_recorded[i].srtt;
        in.mss = 1448;
        in.cwnd = sbt_recorded[i].cwnd;
        in.snd_wnd = sbt_recorded[i].wnd;
        in.buffer = sbt_recorded[i].buffer;
        snprintf(name, sizeof(name), "recorded: %s: %s", sbt_recorded[i].what,
                 sbt_limit_names[sbt_recorded[i].want]);
        is_v(&in, sbt_recorded[i].want, name);
    }
}

/* ---------------------------------------------------------------- */

/* Constructed: 10 s busy all along at 10 Mbit/s (12.5 MB acked), 100 ms
 * RTT; the buffer allows 20 Mbit/s (two thirds of 375 000 bytes), the
 * window 40 Mbit/s (500 000), the congestion window 16 Mbit/s; never
 * blocked. */
static sbt_triage_in_t busy_10s(void)
{
    sbt_triage_in_t in = {0};

    in.elapsed_us = 10000000;
    in.chrono = 1;
    in.busy_us = 10000000;
    in.acked = 12500000;
    in.srtt_us = 100000;
    in.mss = 1000;
    in.cwnd = 200;
    in.snd_wnd = 500000;
    in.buffer = 375000;
    return in;
}

static void test_figures(void)
{
    sbt_triage_in_t in = busy_10s();
    sbt_triage_t t;

    in.sndbuf_us = 3000000;
    in.rwnd_us = 1000000;
    in.busy_us = 9000000;
    sbt_triage(&in, &t);
    is_i(t.us[SBT_LIMIT_SNDBUF], 3000000, "figures: sndbuf is the kernel's");
    is_i(t.us[SBT_LIMIT_RWND], 1000000, "figures: rwnd is the kernel's");
    is_i(t.us[SBT_LIMIT_NETWORK], 5000000, "figures: network, the rest of "
         "busy");
    is_i(t.us[SBT_LIMIT_APP], 1000000, "figures: app, the time not busy");
    is_i((int64_t)t.goodput, 10000000, "figures: goodput, acked bits / time");
    is_i((int64_t)t.allows[SBT_LIMIT_SNDBUF], 20000000, "figures: the "
         "buffer's rate, two thirds of it / RTT");
    is_i((int64_t)t.allows[SBT_LIMIT_RWND], 40000000, "figures: the "
         "window's rate");
    is_i((int64_t)t.allows[SBT_LIMIT_NETWORK], 16000000, "figures: the "
         "congestion window's rate");
    in = busy_10s();
    in.busy_us = 10004000;
    sbt_triage(&in, &t);
    is_i(t.us[SBT_LIMIT_APP], 0, "figures: busy a jiffy above the time: no "
         "negative app time");
    is_i(t.us[SBT_LIMIT_NETWORK], 10000000, "figures: and network no more "
         "than the time");
    in = busy_10s();
    in.sndbuf_us = 6000000;
    in.rwnd_us = 6000000;
    sbt_triage(&in, &t);
    is_i(t.us[SBT_LIMIT_NETWORK], 0, "figures: limited times above busy: "
         "network 0, not a wrap");
    in = busy_10s();
    in.acked = UINT64_C(1) << 50;
    sbt_triage(&in, &t);
    is_i((int64_t)t.goodput, (int64_t)((UINT64_C(1) << 50) / 10000000
                                       * 8000000),
         "figures: 2^50 bytes: divided first, no wrap");
    in = busy_10s();
    in.srtt_us = 0;
    sbt_triage(&in, &t);
    is_i((int64_t)t.allows[SBT_LIMIT_SNDBUF], 0, "figures: no RTT: no rate");
}

static void test_unknown_short(void)
{
    sbt_triage_in_t in = busy_10s();
    sbt_triage_t t;

    in.chrono = 0;
    in.sndbuf_us = 9000000;
    sbt_triage(&in, &t);
    is_v(&in, SBT_VERDICT_UNKNOWN, "unknown: no chronographs");
    is_i(t.us[SBT_LIMIT_SNDBUF] + t.us[SBT_LIMIT_NETWORK]
         + t.us[SBT_LIMIT_APP], 0, "unknown: no times (not 0 as a figure: "
         "the caller leaves them out)");
    is_i((int64_t)t.goodput, 10000000, "unknown: the goodput still");
    in = busy_10s();
    in.elapsed_us = in.busy_us = 99999;
    is_v(&in, SBT_VERDICT_SHORT, "short: 99.999 ms");
    in.elapsed_us = in.busy_us = 100000;
    in.acked = 125000;
    is_v(&in, SBT_LIMIT_NETWORK, "short: 100 ms is judged");
    in.elapsed_us = 0;
    is_v(&in, SBT_VERDICT_SHORT, "short: no time at all");
    is_s(sbt_limit_names[SBT_VERDICT_UNKNOWN], "unknown", "names: unknown");
    is_s(sbt_limit_names[SBT_LIMIT_RWND], "rwnd", "names: rwnd");
}

static void test_app(void)
{
    sbt_triage_in_t in = busy_10s();

    in.busy_us = 5000000;
    in.sndbuf_us = 5000000;
    in.acked = 12500000;        /* at the buffer's rate while busy */
    is_v(&in, SBT_LIMIT_APP, "app: not busy for exactly half the time, "
         "whatever held the rest");
    in.busy_us = 5000001;
    is_v(&in, SBT_LIMIT_SNDBUF, "app: not busy for just under half: the "
         "buffer");
    in = busy_10s();
    in.busy_us = 0;
    in.acked = 0;
    is_v(&in, SBT_LIMIT_APP, "app: never busy");
}

static void test_sndbuf(void)
{
    sbt_triage_in_t in = busy_10s();

    in.acked = 22500000;        /* 18 Mbit/s: 90% of 20 */
    is_v(&in, SBT_LIMIT_SNDBUF, "sndbuf: 90% of its rate, never blocked");
    in.acked = 22499999;
    is_v(&in, SBT_LIMIT_NETWORK, "sndbuf: just under 90%, never blocked: "
         "the network");
    in.acked = 10000000;        /* 8 Mbit/s: 40% */
    in.sndbuf_us = 1000000;     /* 10% of busy */
    is_v(&in, SBT_LIMIT_SNDBUF, "sndbuf: 40% of its rate, blocked 10%");
    in.sndbuf_us = 999999;
    is_v(&in, SBT_LIMIT_NETWORK, "sndbuf: 40%, blocked just under 10%");
    in.sndbuf_us = 9000000;
    in.acked = 9999999;
    is_v(&in, SBT_LIMIT_NETWORK, "sndbuf: blocked 90% but just under 40% "
         "of its rate (autotuning's ceiling far above): the network");
    in = busy_10s();
    in.buffer = 0;
    in.sndbuf_us = 5000000;
    in.acked = 1;
    is_v(&in, SBT_LIMIT_SNDBUF, "sndbuf: size unknown, blocked half the "
         "busy time");
    in.sndbuf_us = 4999999;
    is_v(&in, SBT_LIMIT_NETWORK, "sndbuf: size unknown, blocked just under "
         "half");
}

static void test_rwnd(void)
{
    sbt_triage_in_t in = busy_10s();

    in.buffer = 50000000;       /* far above: only the window counts */
    in.acked = 45000000;        /* 36 Mbit/s: 90% of 40 */
    is_v(&in, SBT_LIMIT_RWND, "rwnd: 90% of its rate, never blocked");
    in.acked = 44999999;
    is_v(&in, SBT_LIMIT_NETWORK, "rwnd: just under 90%");
    in.acked = 20000000;        /* 40% */
    in.rwnd_us = 1000000;
    is_v(&in, SBT_LIMIT_RWND, "rwnd: 40% of its rate, blocked 10%");
    in.acked = 19999999;
    is_v(&in, SBT_LIMIT_NETWORK, "rwnd: just under 40%, blocked 10%");
    in = busy_10s();
    in.buffer = 50000000;
    in.snd_wnd = 0;             /* Linux < 5.4: the window is not known */
    in.rwnd_us = 5000000;
    is_v(&in, SBT_LIMIT_RWND, "rwnd: window unknown, blocked half the "
         "busy time");
    in.rwnd_us = 4999999;
    is_v(&in, SBT_LIMIT_NETWORK, "rwnd: window unknown, blocked just under "
         "half");
}

static void test_both(void)
{
    sbt_triage_in_t in = busy_10s();

    /* 10 Mbit/s got; the buffer allows 20 (50%), the window 12.5 (80%) */
    in.snd_wnd = 156250;
    in.sndbuf_us = 2000000;
    in.rwnd_us = 2000000;
    is_v(&in, SBT_LIMIT_RWND, "both: the window, whose rate is the lower");
    in.buffer = 234375;         /* carries 156 250 */
    is_v(&in, SBT_LIMIT_SNDBUF, "both: equal rates: the buffer (the "
         "server's to change)");
    in.buffer = 150000;         /* 8 Mbit/s: 125% */
    in.sndbuf_us = 0;
    is_v(&in, SBT_LIMIT_SNDBUF, "both: the buffer's rate the lower, never "
         "blocked on it");
}

/* ---------------------------------------------------------------- */

static void test_words(void)
{
    sbt_triage_sum_t sum;
    char w[512];

    memset(&sum, 0, sizeof(sum));
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "no large responses yet (larger than the send buffer in force)",
         "words: nothing yet");
    sum.large = 230;
    sbt_triage_words(w, sizeof(w), &sum, 0, NULL, NULL);
    is_s(w, "unknown: this kernel does not report what limited a sender "
         "(TCP_INFO's chronographs, Linux 4.10)", "words: no chronographs");
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "none of the 230 large responses took long enough to tell "
         "(0.1 s)", "words: all too short");
    sum.by[SBT_LIMIT_SNDBUF] = 212;
    sum.by[SBT_LIMIT_NETWORK] = 18;
    sum.buf_from[SBT_BUF_LISTENER] = 212;
    sum.buf_sum = 212 * UINT64_C(32768);
    sum.rtt_sum = 212 * UINT64_C(250000);
    sbt_triage_words(w, sizeof(w), &sum, 1, "/etc/apache2/httpd.conf:12",
                     NULL);
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); the "
         "buffer in force, 16 KiB (core SendBufferSize at "
         "/etc/apache2/httpd.conf:12), allows about 699 kbit/s at the 250 "
         "ms these clients see: try SndbufTune auto or remove the line",
         "words: SendBufferSize, its line");
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); the "
         "buffer in force, 16 KiB (core SendBufferSize), allows about 699 "
         "kbit/s at the 250 ms these clients see: try SndbufTune auto or "
         "remove the line", "words: SendBufferSize, no line known");
    sum.buf_from[SBT_BUF_LISTENER] = 0;
    sum.buf_from[SBT_BUF_SNDBUFTUNE] = 212;
    sum.buf_sum = 212 * UINT64_C(131072);
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL,
                     "SndbufTuneNetwork 10.0.0.0/8 at /etc/a.conf:4");
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); the "
         "buffer in force, 64 KiB (SndbufTuneNetwork 10.0.0.0/8 at "
         "/etc/a.conf:4), allows about 2.8 Mbit/s at the 250 ms these "
         "clients see: raise that size or try SndbufTune auto",
         "words: a rule's size");
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); the "
         "buffer in force, 64 KiB (a SndbufTune size: the access log's "
         "SNDBUF_TUNE_RULE names its line), allows about 2.8 Mbit/s at the "
         "250 ms these clients see: raise that size or try SndbufTune auto",
         "words: a vhost's SndbufTune size");
    sum.buf_from[SBT_BUF_SNDBUFTUNE] = 0;
    sum.buf_from[SBT_BUF_AUTO] = 212;
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); the "
         "buffer in force, 64 KiB (SndbufTune auto's size, held by "
         "SndbufTuneLimits or net.core.wmem_max), allows about 2.8 Mbit/s "
         "at the 250 ms these clients see: raise SndbufTuneLimits' maximum "
         "or net.core.wmem_max", "words: auto's size");
    sum.buf_from[SBT_BUF_AUTO] = 0;
    sum.buf_from[SBT_BUF_AUTOTUNING] = 212;
    sum.buf_sum = 212 * UINT64_C(4194304);
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the send buffer limited 212 of 230 large responses (92%); "
         "autotuning stops at net.ipv4.tcp_wmem's maximum, 4 MiB, which "
         "allows about 89 Mbit/s at the 250 ms these clients see: raise it "
         "(and net.core.wmem_max), or try SndbufTune auto",
         "words: autotuning's ceiling");
    memset(&sum, 0, sizeof(sum));
    sum.large = 100;
    sum.by[SBT_LIMIT_RWND] = 84;
    sum.by[SBT_LIMIT_NETWORK] = 16;
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "clients' receive windows limited 84 of 100 large responses "
         "(84%); nothing to tune here: the clients' own buffers set the "
         "pace", "words: rwnd");
    sum.by[SBT_LIMIT_NETWORK] = 84;
    sum.by[SBT_LIMIT_RWND] = 16;
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the network limited 84 of 100 large responses (84%); nothing "
         "to tune here: the buffer is not what limits these downloads",
         "words: network");
    sum.by[SBT_LIMIT_APP] = 84;
    sum.by[SBT_LIMIT_NETWORK] = 16;
    sum.by[SBT_LIMIT_RWND] = 0;
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    is_s(w, "the server itself (nothing to send for half the time or more) "
         "limited 84 of 100 large responses (84%); nothing to tune here: "
         "the handler, the disk or a backend is slower than the network",
         "words: app");
    sum.by[SBT_LIMIT_SNDBUF] = 84;
    sbt_triage_words(w, sizeof(w), &sum, 1, NULL, NULL);
    ok(!strncmp(w, "the send buffer limited 84 of", 29), "words: a tie: the "
       "first of equals, the buffer");
    sbt_triage_words(w, 20, &sum, 1, NULL, NULL);
    is_i((int64_t)strlen(w), 19, "words: cut to the room given, "
         "NUL-terminated");
}

int main(void)
{
    test_recorded();
    test_figures();
    test_unknown_short();
    test_app();
    test_sndbuf();
    test_rwnd();
    test_both();
    test_words();
    return done_testing();
}
