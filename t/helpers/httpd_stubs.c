/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/helpers/httpd_stubs.c: the httpd calls sndbuf_path.c makes at
 * startup, for a program that links sndbuf_path.c without httpd
 * (t/unit/path_cases.c, t/unit/law_paths.c, bench/path_cost.c): the
 * hook it registers is kept and run by sbt_stubs_start(), the retained
 * data is one calloc, and a log line goes to stderr.
 */

#include <stdio.h>
#include <stdlib.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"

#include "httpd_stubs.h"

module AP_MODULE_DECLARE_DATA sndbuf_tune_module;

typedef int (*sbt_post_config_f)(apr_pool_t *, apr_pool_t *, apr_pool_t *,
                                 server_rec *);
static sbt_post_config_f sbt_stub_post_config;
static void *sbt_stub_retained;

AP_DECLARE(void) ap_hook_post_config(sbt_post_config_f f,
                                     const char *const *pre,
                                     const char *const *succ, int order)
{
    (void)pre; (void)succ; (void)order;
    sbt_stub_post_config = f;
}

AP_DECLARE(void *) ap_retained_data_get(const char *key)
{
    (void)key;
    return sbt_stub_retained;
}

AP_DECLARE(void *) ap_retained_data_create(const char *key, apr_size_t size)
{
    (void)key;
    return sbt_stub_retained = calloc(1, size);
}

AP_DECLARE(void) ap_log_error_(const char *file, int line, int module_index,
                               int level, apr_status_t status,
                               const server_rec *s, const char *fmt, ...)
{
    (void)file; (void)line; (void)module_index; (void)level; (void)s;
    fprintf(stderr, "httpd_stubs: %s (%d)\n", fmt, status);
}

void sbt_stubs_start(void)
{
    static process_rec proc;
    static server_rec s;
    apr_pool_t *pool;

    apr_initialize();
    apr_pool_create(&pool, NULL);
    proc.pool = pool;
    s.process = &proc;
    sbt_stub_post_config(pool, pool, pool, &s);
}
