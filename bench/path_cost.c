/* SPDX-License-Identifier: Apache-2.0 */

/*
 * bench/path_cost.c: what a look at sndbuf_path.c's shared segment costs,
 * with FLOWS concurrent auto flows spread over THREADS threads (each flow
 * looked at by one, as a connection is by one worker at a time), as the
 * children of a busy server would: a look that only writes the flow's
 * slot (the crowd read at most once a second is cached), and one that
 * also reads the crowd (every slot of the segment).
 * The real sndbuf_path.c, linked with t/helpers/httpd_stubs.c for the
 * httpd calls it makes at startup.  Prints "threads flows looks
 * ns_per_look ns_per_crowd_look" (CPU time).
 *
 *   bench/path_cost [FLOWS [THREADS [LOOKS_PER_THREAD]]]
 */

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpd.h"

#include "../sndbuf_tune.h"
#include "../t/helpers/httpd_stubs.h"

static sbt_path_flow_t *sbt_flows;
static struct in_addr *sbt_addrs;   /* flow k's client: 198.18.(k/256).k */
static int sbt_nflows, sbt_threads;
static long sbt_looks;
static double sbt_cpu_ns[64][2];

static double sbt_cost_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Thread @a me's looks at its flows: without asking, then asking. */
static void *sbt_cost_thread(void *arg)
{
    int me = (int)(apr_uintptr_t)arg, ask;
    unsigned int seed = (unsigned int)me + 1;
    long i;

    for (ask = 0; ask < 2; ask++) {
        double cpu0 = sbt_cost_ns();
        long n = ask ? sbt_looks / 100 + 1 : sbt_looks;

        for (i = 0; i < n; i++) {
            int k = (int)(rand_r(&seed) % (unsigned)(sbt_nflows / sbt_threads))
                    * sbt_threads + me;
            sbt_path_flow_t *f = &sbt_flows[k];
            apr_sockaddr_t client = {0};
            /* An RTT of 20-60 ms, 10 Mbit/s delivered. */
            sbt_path_look_t lk = {0};

            client.family = AF_INET;
            client.ipaddr_ptr = &sbt_addrs[k];
            client.ipaddr_len = sizeof(sbt_addrs[k]);
            lk.min_rtt_us = 20000;
            lk.srtt_us = lk.min_rtt_us + rand_r(&seed) % 40000;
            lk.rate = 1250000;
            if (ask) {
                f->crowd_at = 0;        /* read the crowd now */
            }
            sbt_path_look(f, &client, &lk);
        }
        sbt_cpu_ns[me][ask] = (sbt_cost_ns() - cpu0) / (double)n;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t tid[64];
    double cpu[2] = {0, 0};
    int i;

    sbt_nflows = argc > 1 ? atoi(argv[1]) : 1000;
    sbt_threads = argc > 2 ? atoi(argv[2]) : 4;
    sbt_looks = argc > 3 ? atol(argv[3]) : 1000000;
    if (sbt_nflows < 1 || sbt_threads < 1 || sbt_threads > 64
        || sbt_threads > sbt_nflows || sbt_looks < 1) {
        fprintf(stderr, "usage: path_cost [FLOWS [THREADS [LOOKS]]]\n");
        return 2;
    }
    sbt_path_register_hooks();
    sbt_stubs_start();
    sbt_flows = calloc((size_t)sbt_nflows, sizeof(*sbt_flows));
    sbt_addrs = calloc((size_t)sbt_nflows, sizeof(*sbt_addrs));
    for (i = 0; i < sbt_nflows; i++) {
        sbt_addrs[i].s_addr = htonl(0xc6120000u + (apr_uint32_t)i);
    }
    for (i = 0; i < sbt_threads; i++) {
        pthread_create(&tid[i], NULL, sbt_cost_thread,
                       (void *)(apr_uintptr_t)i);
    }
    for (i = 0; i < sbt_threads; i++) {
        pthread_join(tid[i], NULL);
        cpu[0] += sbt_cpu_ns[i][0] / sbt_threads;
        cpu[1] += sbt_cpu_ns[i][1] / sbt_threads;
    }
    printf("%d %d %ld %.0f %.0f\n", sbt_threads, sbt_nflows,
           sbt_looks * sbt_threads, cpu[0], cpu[1]);
    return 0;
}
