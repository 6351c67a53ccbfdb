/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/helpers/clockstep.c: an LD_PRELOAD library (SBT_HTTPD_PRELOAD) that
 * steps the wall clock, as a VM resume or `chronyc makestep` does: once
 * the file SBT_CLOCKSTEP_FILE exists (looked for at most every 50 ms),
 * every gettimeofday, time and CLOCK_REALTIME reads SBT_CLOCKSTEP_BY
 * seconds earlier.  The monotonic clocks are left alone, as the kernel
 * leaves them.  For t/reliability/clock_step.t.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

static long sbt_step_by = -1;
static int sbt_stepped;
static struct timespec sbt_looked;

/* The step, once the file is there; the monotonic clock paces the
 * look (a stat per read of the clock would slow the server down). */
static long sbt_offset(void)
{
    const char *file = getenv("SBT_CLOCKSTEP_FILE");
    struct timespec now;
    struct stat st;

    if (sbt_stepped || !file) {
        return sbt_stepped ? sbt_step_by : 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - sbt_looked.tv_sec) * 1000000000L
        + (now.tv_nsec - sbt_looked.tv_nsec) < 50000000L) {
        return 0;
    }
    sbt_looked = now;
    if (stat(file, &st) == 0) {
        const char *by = getenv("SBT_CLOCKSTEP_BY");

        sbt_step_by = by ? atol(by) : 0;
        sbt_stepped = 1;
    }
    return sbt_stepped ? sbt_step_by : 0;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    static int (*real)(struct timeval *, void *);
    int rv;

    if (!real) {
        real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT,
                                                        "gettimeofday");
    }
    rv = real(tv, tz);
    if (rv == 0 && tv) {
        tv->tv_sec -= sbt_offset();
    }
    return rv;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    int rv;

    if (!real) {
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT,
                                                            "clock_gettime");
    }
    rv = real(id, ts);
    if (rv == 0 && ts && (id == CLOCK_REALTIME
                          || id == CLOCK_REALTIME_COARSE)) {
        ts->tv_sec -= sbt_offset();
    }
    return rv;
}

time_t time(time_t *t)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    if (t) {
        *t = tv.tv_sec;
    }
    return tv.tv_sec;
}
