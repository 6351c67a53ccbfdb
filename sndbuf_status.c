/* SPDX-License-Identifier: Apache-2.0 */

/* sndbuf_status.c: placeholder until the status page lands. */

#include "httpd.h"

#include "sndbuf_tune.h"

void sbt_status_record(request_rec *r, const sbt_outcome_t *o)
{
    (void)r; (void)o;
}

void sbt_status_register_hooks(void)
{
}
