/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/path_cases.c: sndbuf_path.c, the shared segment in which auto's
 * flows find their crowd, on its own (TAP, make unit): who is a crowd
 * and who is not, what a crowd delivered, and the segment's robustness:
 * ids unique across processes, a slot a killed child held taken again,
 * a slot taken again never showing its last flow's figures, a full
 * table.  The clock is this file's (sbt_clock_us), so time is exact.
 */

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd.h"
#include "apr_general.h"

#include "../../sndbuf_tune.h"
#include "../helpers/httpd_stubs.h"
#include "tap.h"

#define SEC     1000000

static apr_int64_t now_us = 1000 * (apr_int64_t)SEC;

apr_int64_t sbt_clock_us(void)
{
    return now_us;
}

/* A flow's look: its queue, and @a rate B/s delivered since its last. */
static sbt_path_crowd_t look(sbt_path_flow_t *f, apr_uint32_t queue_us,
                             apr_uint64_t rate, int dt_us, int ask)
{
    sbt_path_look_t lk;
    sbt_path_crowd_t c;

    lk.queue_us = queue_us;
    lk.delivered = f->kib * 1024 + rate * (apr_uint64_t)dt_us / SEC;
    lk.ask = ask;
    sbt_path_look(f, &lk, &c);
    return c;
}

/* The queue of a crowd's bottleneck at time @a t: 20 ms, with a swell to
 * 80 ms for 2 s every 6 s (a newcomer's start, a PROBE_RTT's drain). */
static apr_uint32_t swell(apr_int64_t t)
{
    return (t / SEC) % 6 < 2 ? 80000 : 20000;
}

/* 20 s of looks every 100 ms by @a n flows: flow i sees queue(i, t) and
 * delivers 1 MB/s; the last look asks. */
static sbt_path_crowd_t crowd_run(sbt_path_flow_t *f, int n,
                                  apr_uint32_t (*queue)(int, apr_int64_t))
{
    sbt_path_crowd_t c = {0, 0, 0};
    int k, i;

    for (k = 0; k < 200; k++) {
        now_us += SEC / 10;
        for (i = 0; i < n; i++) {
            sbt_path_crowd_t got = look(&f[i], queue(i, now_us), 1000000,
                                        SEC / 10, i == 0 && k == 199);

            c = i == 0 ? got : c;
        }
    }
    return c;
}

static apr_uint32_t together(int i, apr_int64_t t)
{
    (void)i;
    return swell(t);
}

static apr_uint32_t steady(int i, apr_int64_t t)
{
    (void)i; (void)t;
    return 20000;
}

/* Each its own link: the same swells, at different times. */
static apr_uint32_t apart(int i, apr_int64_t t)
{
    return swell(t + (apr_int64_t)i * 3 * SEC / 2);
}

static void leave_all(sbt_path_flow_t *f, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        sbt_path_leave(&f[i]);
    }
    now_us += 10 * SEC;
}

static void test_crowds(void)
{
    sbt_path_flow_t f[4];
    sbt_path_crowd_t c;

    memset(f, 0, sizeof(f));
    c = crowd_run(f, 4, together);
    is_i(c.members, 3, "crowd: queues that move together: the other 3");
    ok(c.rate >= 3900000 && c.rate <= 4000000, "crowd: its rate, the "
       "members' and its own (4 MB/s, less the KiB rounding)");
    ok(c.peak >= c.rate && c.peak <= 4100000, "crowd: its peak");
    leave_all(f, 4);

    memset(f, 0, sizeof(f));
    c = crowd_run(f, 4, steady);
    is_i(c.members, 0, "crowd: the same level that never moved is no proof");
    leave_all(f, 4);

    memset(f, 0, sizeof(f));
    c = crowd_run(f, 4, apart);
    is_i(c.members, 0, "crowd: the same swells at other times are no crowd");
    leave_all(f, 4);

    memset(f, 0, sizeof(f));
    c = crowd_run(f, 1, together);
    is_i(c.members, 0, "crowd: a flow alone has none");
    leave_all(f, 1);
}

/* A flow that stops looking is no member after FRESH 2 s. */
static void test_fresh(void)
{
    sbt_path_flow_t f[2];
    sbt_path_crowd_t c;

    memset(f, 0, sizeof(f));
    crowd_run(f, 2, together);
    now_us += 2 * SEC;
    c = look(&f[0], swell(now_us), 1000000, 2 * SEC, 1);
    is_i(c.members, 1, "fresh: a member that looked 2 s ago counts");
    leave_all(f, 2);
    memset(f, 0, sizeof(f));
    crowd_run(f, 2, together);
    now_us += 2 * SEC + 1;
    c = look(&f[0], swell(now_us), 1000000, 2 * SEC, 1);
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
        look(&f, 1000, 0, 0, 0);
        if (write(pipefd[1], &f.id, sizeof(f.id)) != sizeof(f.id)) {
            _exit(1);
        }
        _exit(0);
    }
    waitpid(pid, &status, 0);
    if (read(pipefd[0], &theirs, sizeof(theirs)) != sizeof(theirs)) {
        theirs = 0;
    }
    look(&mine, 1000, 0, 0, 0);
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
    pid_t pid;
    int status, i;

    memset(f, 0, sizeof(f));
    pid = fork();
    if (pid == 0) {
        sbt_path_flow_t mine[1024];

        memset(mine, 0, sizeof(mine));
        for (i = 0; i < 1024; i++) {
            look(&mine[i], 80000, 50000000, SEC, 0);
        }
        raise(SIGKILL);
    }
    waitpid(pid, &status, 0);
    look(&f[0], 1000, 0, 0, 0);
    is_i(f[0].slot, -1, "killed: its 1024 flows hold every slot (the table "
         "is full: a new flow goes without)");
    now_us += 2 * SEC + 1;
    f[0].id = 0;
    look(&f[0], 1000, 0, 0, 0);
    ok(f[0].slot >= 0, "killed: 2 s on, their slots are free again");
    crowd_run(f, 2, together);
    c = look(&f[0], swell(now_us), 1000000, SEC / 10, 1);
    ok(c.members == 1 && c.peak <= 2100000, "killed: a slot taken again "
       "counts its new flow only");
    leave_all(f, 2);
}

int main(void)
{
    apr_pool_t *pool;
    process_rec proc;
    server_rec s;

    apr_initialize();
    apr_pool_create(&pool, NULL);
    memset(&s, 0, sizeof(s));
    memset(&proc, 0, sizeof(proc));
    proc.pool = pool;
    s.process = &proc;
    sbt_path_register_hooks();
    sbt_stubs_start(pool, &s);
    test_crowds();
    test_fresh();
    test_ids();
    test_killed();
    return done_testing();
}
