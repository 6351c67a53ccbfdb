/* SPDX-License-Identifier: Apache-2.0 */

/*
 * tsan_pools.c: make ThreadSanitizer see APR pools (t/README.md).
 *
 * An APR pool belongs to one thread at a time: two threads allocating
 * from it without a lock or a hand-over between them corrupt it.  APR is
 * not instrumented, so TSan cannot see that.  Preloaded after the TSan
 * runtime, this library puts itself in front of apr_palloc and
 * apr_pcalloc and tells TSan that each call writes a byte of the pool
 * (its first), so two unordered allocations from one pool in two threads
 * are a data race with both callers' stacks: for instance a module's
 * HTTP/2 stream thread allocating from the primary connection's pool.
 *
 * Built by make sanitize (build/tsan/tsan_pools.so), preloaded by
 * t/sanitized tsan.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct apr_pool_t apr_pool_t;
typedef void *(*alloc_fn)(apr_pool_t *, size_t);

void __tsan_write1(void *addr);

static alloc_fn real_palloc, real_pcalloc;

/* Before any thread exists: the pointers are only read afterwards. */
__attribute__((constructor)) static void tsan_pools_init(void)
{
    real_palloc = (alloc_fn)dlsym(RTLD_NEXT, "apr_palloc");
    real_pcalloc = (alloc_fn)dlsym(RTLD_NEXT, "apr_pcalloc");
}

static alloc_fn resolved(alloc_fn fn, const char *name)
{
    if (!fn) {
        /* Loaded before libapr: the process cannot go on. */
        fprintf(stderr, "tsan_pools: no %s after this library\n", name);
        abort();
    }
    return fn;
}

void *apr_palloc(apr_pool_t *p, size_t size)
{
    __tsan_write1(p);
    return resolved(real_palloc, "apr_palloc")(p, size);
}

void *apr_pcalloc(apr_pool_t *p, size_t size)
{
    __tsan_write1(p);
    return resolved(real_pcalloc, "apr_pcalloc")(p, size);
}
