/* SPDX-License-Identifier: Apache-2.0 */

/*
 * bench/path_cost.c: what one look at sndbuf_path.c's shared table costs
 * (its address slot and the board of queues and RTTs), with FLOWS
 * concurrent downloads to as many client addresses, looked at by THREADS
 * threads at once, as the children of a busy server would.  The real
 * sndbuf_path.c, linked with bench/httpd_stubs.c for the few httpd calls
 * it makes at startup.  Prints "threads flows looks cpu_ns_per_look".
 *
 *   bench/path_cost [FLOWS [THREADS [LOOKS_PER_THREAD]]]
 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpd.h"
#include "apr_general.h"
#include "apr_network_io.h"

#include "../sndbuf_tune.h"
#include "../sndbuf_kernel.h"
#include "httpd_stubs.h"

/* ---- the flows ---- */

typedef struct {
    apr_sockaddr_t addr;
    struct sockaddr_in sin;
    char conn;                  /* its address is the connection's name */
} sbt_cost_flow_t;

static sbt_cost_flow_t *sbt_flows;
static int sbt_nflows;
static long sbt_looks;

static double sbt_cpu_ns[64];

static double sbt_cost_ns(clockid_t clock)
{
    struct timespec t;

    clock_gettime(clock, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *sbt_cost_thread(void *arg)
{
    int me = (int)(apr_uintptr_t)arg;
    unsigned int seed = (unsigned int)me + 1;
    double cpu0 = sbt_cost_ns(CLOCK_THREAD_CPUTIME_ID);
    long i;

    for (i = 0; i < sbt_looks; i++) {
        sbt_cost_flow_t *f = &sbt_flows[rand_r(&seed) % sbt_nflows];
        /* A crowd's queue: 20-60 ms over a 100 ms path; what the flow
         * delivered in its last RTT, counted for the crowds. */
        apr_uint32_t queue = 20000 + rand_r(&seed) % 40000;
        sbt_path_seen_t seen = {100000, 100000 + queue, queue, 125000,
                                sbt_clock_us() - 100000 - queue, 1};
        sbt_path_view_t v;

        sbt_path_look(&f->addr, &f->conn, &seen, &v);
    }
    sbt_cpu_ns[me] = sbt_cost_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 2 ? atoi(argv[2]) : 4, i;
    pthread_t tid[64];
    apr_pool_t *pool;
    process_rec proc;
    server_rec s;
    double cpu = 0;

    sbt_nflows = argc > 1 ? atoi(argv[1]) : 1000;
    sbt_looks = argc > 3 ? atol(argv[3]) : 1000000;
    if (sbt_nflows < 1 || threads < 1 || threads > 64 || sbt_looks < 1) {
        fprintf(stderr, "usage: path_cost [FLOWS [THREADS [LOOKS]]]\n");
        return 2;
    }
    apr_initialize();
    apr_pool_create(&pool, NULL);
    memset(&s, 0, sizeof(s));
    memset(&proc, 0, sizeof(proc));
    proc.pool = pool;
    s.process = &proc;
    sbt_path_register_hooks();
    sbt_stubs_start(pool, &s);
    sbt_flows = calloc((size_t)sbt_nflows, sizeof(*sbt_flows));
    for (i = 0; i < sbt_nflows; i++) {
        sbt_cost_flow_t *f = &sbt_flows[i];

        f->sin.sin_family = AF_INET;
        f->sin.sin_addr.s_addr = htonl(0xc6120000u + (apr_uint32_t)i);
        f->addr.family = AF_INET;
        f->addr.ipaddr_ptr = &f->sin.sin_addr;
        f->addr.ipaddr_len = sizeof(f->sin.sin_addr);
    }
    for (i = 0; i < threads; i++) {
        pthread_create(&tid[i], NULL, sbt_cost_thread, (void *)(apr_uintptr_t)i);
    }
    for (i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        cpu += sbt_cpu_ns[i];
    }
    printf("%d %d %ld %.0f\n", threads, sbt_nflows, sbt_looks * threads,
           cpu / ((double)sbt_looks * threads));
    return 0;
}
