/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/path_cases.c: sndbuf_path.c, the shared segment in which auto's
 * flows find their crowd, on its own (TAP, make unit): who is a flow's
 * crowd and what it delivered, and the segment's robustness:
 * ids unique across processes, a slot a killed child held taken again,
 * a slot taken again never showing its last flow's figures, a full
 * table.  The clock is this file's (sbt_clock_us), so time is exact.
 */

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd.h"

#include "../../sndbuf_tune.h"
#include "../helpers/httpd_stubs.h"
#include "tap.h"

#define SEC     1000000

static apr_int64_t now_us = 1000 * (apr_int64_t)SEC;

apr_int64_t sbt_clock_us(void)
{
    return now_us;
}

/* The client address the next look's flow is to. */
static apr_sockaddr_t client;
static struct in_addr client_in;

static void client_is(const char *dotted)
{
    inet_pton(AF_INET, dotted, &client_in);
    client.family = AF_INET;
    client.ipaddr_ptr = &client_in;
    client.ipaddr_len = sizeof(client_in);
}

/* A flow's look at RTT @a srtt_us, delivering @a rate B/s lately, to
 * the client at client_addr; its crowd as read now (@a ask) or last. */
static sbt_path_crowd_t look(sbt_path_flow_t *f, apr_uint32_t srtt_us,
                             apr_uint64_t rate, int ask)
{
    sbt_path_look_t lk;

    lk.srtt_us = srtt_us;
    lk.min_rtt_us = srtt_us;
    lk.rate = rate;
    if (ask) {
        f->crowd_at = 0;
    }
    return *sbt_path_look(f, &client, &lk);
}

/* @a secs seconds of looks every 100 ms by @a n flows, flow i at RTT
 * rtt[i] delivering rate[i]; the last look of flow 0 asks. */
static sbt_path_crowd_t run(sbt_path_flow_t *f, int n, int secs,
                            const apr_uint32_t *rtt, const apr_uint64_t *rate)
{
    sbt_path_crowd_t c;

    memset(&c, 0, sizeof(c));
    int k, i;

    for (k = 0; k < secs * 10; k++) {
        now_us += SEC / 10;
        for (i = 0; i < n; i++) {
            sbt_path_crowd_t got = look(&f[i], rtt[i], rate[i],
                                        i == 0 && k == secs * 10 - 1);

            c = i == 0 ? got : c;
        }
    }
    return c;
}

static void leave_all(sbt_path_flow_t *f, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        sbt_path_leave(&f[i]);
    }
    now_us += 10 * SEC;
}

/* A flow's crowd: the others whose smoothed RTT is within 1/NEAR_DIV (4)
 * of its own, above or below: 75 and 125 ms of 100 are in, 74.999 and
 * 125.001 ms are not. */
static void test_crowds(void)
{
    sbt_path_flow_t f[5];
    sbt_path_crowd_t c;
    apr_uint32_t rtt[5] = {100000, 75000, 125000, 74999, 125001};
    apr_uint64_t fast[5] = {2 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20};
    apr_uint64_t slow[5] = {1 << 20, 2 << 20, 2 << 20, 1 << 20, 1 << 20};

    memset(f, 0, sizeof(f));
    run(f, 5, 5, rtt, fast);
    c = run(f, 5, 5, rtt, slow);
    is_i(c.members, 2, "crowd: the flows at its RTT (within 1/4: 75 and "
         "125 ms of 100), not those just past it");
    is_i(c.rate, 4 << 20, "crowd: their rate now");
    is_i(c.rate_then, 2 << 20, "crowd: and when its own was highest");
    is_i(c.own_then, 2 << 20, "crowd: its own then");
    leave_all(f, 5);

    memset(f, 0, sizeof(f));
    c = run(f, 1, 5, rtt, fast);
    is_i(c.members, 0, "crowd: a flow alone has none");
    leave_all(f, 1);

    memset(f, 0, sizeof(f));
    run(f, 2, 2, rtt, slow);
    sbt_path_leave(&f[1]);
    c = look(&f[0], rtt[0], 1 << 20, 1);
    is_i(c.members, 0, "crowd: a flow whose response has ended is in none, "
         "at once");
    leave_all(f, 2);

    memset(f, 0, sizeof(f));
    rtt[1] = rtt[0];
    fast[1] = 0;
    c = run(f, 2, 2, rtt, fast);
    is_i(c.members, 0, "crowd: a flow that has delivered nothing yet (its "
         "first second) is in none: it would halve the others' share");
    leave_all(f, 2);
}

/* A flow's highest second is remembered BLOCKS (16) seconds: the current
 * one and the 15 before it. */
static void test_blocks(void)
{
    sbt_path_flow_t f[2];
    sbt_path_crowd_t c;
    int b;

    memset(f, 0, sizeof(f));
    now_us = (now_us / SEC + 1) * SEC + SEC / 2;
    look(&f[0], 100000, 4 << 20, 0);
    look(&f[1], 100000, 1 << 20, 0);
    for (b = 1; b <= 16; b++) {
        now_us += SEC;
        look(&f[1], 100000, 2 << 20, 0);
        c = look(&f[0], 100000, 1 << 20, 1);
        if (b == 15) {
            ok(c.own_then == 4 << 20 && c.rate_then == 1 << 20
               && c.rate == 2 << 20, "blocks: 15 s after its highest "
               "second, its crowd's rate then is still that second's");
        }
    }
    ok(c.own_then == 1 << 20 && c.rate_then == 2 << 20, "blocks: 16 s "
       "after, the second has gone (BLOCKS 16)");
    leave_all(f, 2);
}

/* Flows to one address at one RTT take the same path: a late comer takes
 * the lowest minimum RTT among them.  Behind a NAT another path has
 * another RTT; another address, another path. */
static void test_min_rtt(void)
{
    sbt_path_flow_t f[5];
    sbt_path_look_t lk = {200000, 100000, 1 << 20};
    const sbt_path_crowd_t *c;
    int i;

    memset(f, 0, sizeof(f));
    client_is("198.18.2.1");
    sbt_path_look(&f[0], &client, &lk);
    lk.min_rtt_us = 120000;     /* another flow of that path */
    sbt_path_look(&f[4], &client, &lk);
    lk.min_rtt_us = 150000;     /* began in the queue: a late comer */
    sbt_path_look(&f[1], &client, &lk);
    lk.srtt_us = 60000;         /* behind the same NAT, a faster path */
    lk.min_rtt_us = 30000;
    sbt_path_look(&f[2], &client, &lk);
    client_is("198.18.2.2");
    lk.srtt_us = 200000;
    lk.min_rtt_us = 50000;      /* another address at the same RTT */
    sbt_path_look(&f[3], &client, &lk);
    now_us += SEC;
    client_is("198.18.2.1");
    lk.srtt_us = 200000;
    lk.min_rtt_us = 150000;
    c = sbt_path_look(&f[1], &client, &lk);
    is_i(c->members, 3, "min rtt: the late comer's crowd: the flows at its "
         "RTT, of either address");
    is_i(c->min_rtt_us, 100000, "min rtt: the lowest of those to its own "
         "address, not another path's behind its NAT, nor another "
         "address's");
    for (i = 0; i < 5; i++) {
        sbt_path_leave(&f[i]);
    }
    now_us += 10 * SEC;
}

/* A flow that stops looking is no member after FRESH 2 s. */
static void test_fresh(void)
{
    sbt_path_flow_t f[2];
    sbt_path_crowd_t c;
    apr_uint32_t rtt[2] = {100000, 100000};
    apr_uint64_t rate[2] = {1 << 20, 1 << 20};

    memset(f, 0, sizeof(f));
    run(f, 2, 3, rtt, rate);
    now_us += 2 * SEC;
    c = look(&f[0], 100000, 1 << 20, 1);
    is_i(c.members, 1, "fresh: a member that looked 2 s ago counts");
    leave_all(f, 2);
    memset(f, 0, sizeof(f));
    run(f, 2, 3, rtt, rate);
    now_us += 2 * SEC + 1;
    c = look(&f[0], 100000, 1 << 20, 1);
    is_i(c.members, 0, "fresh: not a microsecond later");
    leave_all(f, 2);
}

/* Ids come from one counter in the segment: unique across processes. */
static void test_ids(void)
{
    sbt_path_flow_t mine;
    apr_uint64_t theirs = 0;
    int pipefd[2], status;
    pid_t pid;

    memset(&mine, 0, sizeof(mine));
    if (pipe(pipefd)) {
        ok(0, "ids: pipe");
        return;
    }
    pid = fork();
    if (pid == 0) {
        sbt_path_flow_t f;

        memset(&f, 0, sizeof(f));
        look(&f, 1000, 0, 0);
        if (write(pipefd[1], &f.id, sizeof(f.id)) != sizeof(f.id)) {
            _exit(1);
        }
        _exit(0);
    }
    waitpid(pid, &status, 0);
    if (read(pipefd[0], &theirs, sizeof(theirs)) != sizeof(theirs)) {
        theirs = 0;
    }
    look(&mine, 1000, 0, 0);
    ok(theirs && mine.id && theirs != mine.id, "ids: a child's flow and the "
       "parent's, at the same address in each, have different ids");
    sbt_path_leave(&mine);
    close(pipefd[0]);
    close(pipefd[1]);
}

/* A child killed mid-look leaves no slot held for good, and a slot taken
 * again shows nothing of the flow that had it. */
static void test_killed(void)
{
    sbt_path_flow_t f[2];
    sbt_path_crowd_t c;
    apr_uint32_t rtt[2] = {100000, 100000};
    apr_uint64_t rate[2] = {1 << 20, 1 << 20};
    pid_t pid;
    int status, i;

    memset(f, 0, sizeof(f));
    pid = fork();
    if (pid == 0) {
        sbt_path_flow_t mine[1024];

        memset(mine, 0, sizeof(mine));
        for (i = 0; i < 1024; i++) {
            look(&mine[i], 100000, 50 << 20, 0);
        }
        raise(SIGKILL);
    }
    waitpid(pid, &status, 0);
    look(&f[0], 100000, 0, 0);
    is_i(f[0].slot, -1, "killed: its 1024 flows hold every slot (the table "
         "is full: a new flow goes without)");
    now_us += 2 * SEC + 1;
    c = look(&f[0], 100000, 0, 1);
    ok(f[0].slot == -1 && c.members == 0, "killed: 2 s on (FRESH), their "
       "slots count in no crowd, and are not taken yet");
    now_us += 6 * SEC;
    look(&f[0], 100000, 0, 0);
    ok(f[0].slot >= 0, "killed: 8 s on (STALE), their slots are free again, "
       "and a flow that found none takes one at its next try");
    c = run(f, 2, 3, rtt, rate);
    ok(c.members == 1 && c.rate == 1 << 20 && c.rate_then == 1 << 20,
       "killed: a slot taken again counts its new flow only");
    leave_all(f, 2);
}

int main(void)
{

    sbt_path_register_hooks();
    sbt_stubs_start();
    test_crowds();
    test_blocks();
    test_fresh();
    test_min_rtt();
    test_ids();
    test_killed();
    return done_testing();
}
