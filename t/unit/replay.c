/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/replay.c: real sequences of looks, recorded in the WAN lab (the
 * .looks files of t/unit/looks, made by t/unit/record from an error log
 * at LogLevel sndbuf_tune:trace3), replayed through the control law
 * (sndbuf_law.c): every decision must be the one the module made then.
 * A change of the law that changes a recorded decision fails here; if
 * the change is meant, record the scenario again (t/unit/looks/README).
 * TAP, one test per recording; run from the repository's top (make unit).
 */

#define _POSIX_C_SOURCE 200809L     /* strdup */

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../sndbuf_law.h"

#define LOOKS_DIR "t/unit/looks"

/* The first key a line lacked: a recording by a module whose trace3
 * line had fewer fields than the law reads now (record it again). */
static const char *missing;

/** The value of " key=" in @a line (0, and @a key noted, if none). */
static long long field(const char *line, const char *key)
{
    char pat[32];
    const char *p;

    snprintf(pat, sizeof(pat), " %s=", key);
    p = strstr(line, pat);
    if (!p && !missing) {
        missing = key;
    }
    return p ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

static void parse_sample(const char *l, sbt_law_sample_t *s)
{
    memset(s, 0, sizeof(*s));
    s->now_us = field(l, "now");
    s->srtt_us = (uint32_t)field(l, "srtt");
    s->rttvar_us = (uint32_t)field(l, "rttvar");
    s->mss = (uint32_t)field(l, "mss");
    s->min_rtt_us = (uint32_t)field(l, "minrtt");
    s->bytes_acked = (uint64_t)field(l, "acked");
    s->delivery_rate = (uint64_t)field(l, "rate");
    s->app_limited = (int)field(l, "applimited");
    s->total_retrans = (uint32_t)field(l, "retrans");
    s->sndbuf_limited_us = (uint64_t)field(l, "limited");
    s->has_chrono = (int)field(l, "chrono");
    s->delivered = (uint64_t)field(l, "delivered");
    s->has_delivered = (int)field(l, "hasdelivered");
    s->crowd_members = (int)field(l, "members");
    s->crowd_rate = (uint64_t)field(l, "crate");
    s->crowd_rate_then = (uint64_t)field(l, "cthen");
    s->crowd_own_then = (uint64_t)field(l, "cown");
    s->path_min_rtt_us = (uint32_t)field(l, "pathminrtt");
    s->loss_based = (int)field(l, "loss");
    s->locked_at = (int)field(l, "locked");
    s->effective = (int)field(l, "tb");
    s->cwnd = (uint32_t)field(l, "cwnd");
}

static void parse_limits(const char *l, sbt_law_limits_t *lim,
                         uint64_t *estimate)
{
    memset(lim, 0, sizeof(*lim));
    lim->limit_min = (int)field(l, "min");
    lim->limit_max = (int)field(l, "max");
    lim->conf_rate = (uint64_t)field(l, "conf");
    lim->shared = (int)field(l, "shared");
    lim->wmem_max = (uint32_t)field(l, "wmem_max");
    lim->tcp_wmem_initial = (uint32_t)field(l, "wmem1");
    lim->tcp_wmem_max = (uint32_t)field(l, "wmem2");
    lim->no_release = (int)field(l, "norelease");
    *estimate = (uint64_t)field(l, "estimate");
}

/** Replay one recording; 0 when every decision matches. */
static int replay(const char *path, int *looks)
{
    sbt_law_limits_t lim;
    sbt_law_sample_t s;
    sbt_law_out_t out;
    sbt_law_t law;
    uint64_t estimate = 0;
    char line[1024];
    FILE *f = fopen(path, "r");
    int n = 0, bad = 0;

    *looks = 0;
    if (!f) {
        printf("# %s: cannot open\n", path);
        return 1;
    }
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "limits ", 7)) {
            parse_limits(line + 6, &lim, &estimate);
        }
        else if (!strncmp(line, "begin ", 6)) {
            parse_sample(line + 5, &s);
            sbt_law_begin(&law, &lim, &s, estimate);
        }
        else if (!strncmp(line, "look ", 5)) {
            int act = (int)field(line + 4, "act");
            int size = (int)field(line + 4, "size");

            parse_sample(line + 4, &s);
            sbt_law_look(&law, &lim, &s, &out);
            n++;
            if ((int)out.act != act || out.size != size) {
                if (!bad++) {
                    printf("#   look %d: recorded act %d size %d, now act "
                           "%d size %d (%s)\n", n, act, size, (int)out.act,
                           out.size, out.why);
                }
            }
        }
    }
    fclose(f);
    *looks = n;
    if (missing) {
        printf("#   no %s= in its lines: recorded by an older module, "
               "record it again\n", missing);
    }
    return bad || !n || missing;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    DIR *d = opendir(LOOKS_DIR);
    struct dirent *e;
    char *names[256];
    int n = 0, i, failed = 0;

    if (!d) {
        printf("1..0 # SKIP no %s (run from the repository's top)\n",
               LOOKS_DIR);
        return 0;
    }
    while ((e = readdir(d)) != NULL && n < 256) {
        size_t len = strlen(e->d_name);

        if (len > 6 && !strcmp(e->d_name + len - 6, ".looks")) {
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(*names), by_name);
    printf("1..%d\n", n);
    for (i = 0; i < n; i++) {
        char path[512];
        int looks, bad;

        snprintf(path, sizeof(path), "%s/%s", LOOKS_DIR, names[i]);
        missing = NULL;
        bad = replay(path, &looks);
        printf("%sok %d - %s: %d looks, every decision as recorded\n",
               bad ? "not " : "", i + 1, names[i], looks);
        failed += bad;
        free(names[i]);
    }
    return failed != 0;
}
