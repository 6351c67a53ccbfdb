/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/tap.h: the checks make unit's C tests share, printed as TAP
 * (prove reads them): ok(), is_i(), is_s(), and at the end
 * done_testing().  Static inline, so a test that needs one of them only
 * builds warning-free.
 */

#ifndef SBT_UNIT_TAP_H
#define SBT_UNIT_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int sbt_t_n, sbt_t_failed;

static inline void ok(int cond, const char *name)
{
    printf("%sok %d - %s\n", cond ? "" : "not ", ++sbt_t_n, name);
    sbt_t_failed += !cond;
}

static inline void is_i(int64_t got, int64_t want, const char *name)
{
    ok(got == want, name);
    if (got != want) {
        printf("#   got %" PRId64 ", expected %" PRId64 "\n", got, want);
    }
}

static inline void is_s(const char *got, const char *want, const char *name)
{
    ok(!strcmp(got, want), name);
    if (strcmp(got, want)) {
        printf("#   got      '%s'\n#   expected '%s'\n", got, want);
    }
}

/** The plan, after the checks; main's exit status. */
static inline int done_testing(void)
{
    printf("1..%d\n", sbt_t_n);
    return sbt_t_failed != 0;
}

#endif /* SBT_UNIT_TAP_H */
