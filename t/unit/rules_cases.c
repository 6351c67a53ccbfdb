/* SPDX-License-Identifier: Apache-2.0 */

/*
 * t/unit/rules_cases.c: SndbufTuneNetwork's matching (sndbuf_rules.c) on
 * its own, with APR but no httpd (TAP, make unit): which rule each client
 * address gets, and, wherever APR takes the network too, the same answer
 * as apr_ipsubnet_test, which httpd's "Require ip" (mod_authz_host) and
 * mod_remoteip's proxy lists use. httpd's convention for an IPv4 client
 * on a dual-stack listener (::ffff:a.b.c.d) is APR's: it is an IPv4
 * client, matched by IPv4 networks only, so ::/0 does not hold it.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apr_general.h"
#include "apr_network_io.h"
#include "apr_strings.h"

#include "../../sndbuf_tune.h"
#include "tap.h"

static apr_pool_t *pool;

/* Rules for the space-separated networks of @a list (NULL: no rules),
 * each named "<who> <network>". */
static sbt_rules_t *rules(const char *who, const char *list)
{
    sbt_rules_t *t;
    char *cidr, *last;

    if (!list) {
        return NULL;
    }
    t = sbt_rules_make(pool);
    for (cidr = apr_strtok(apr_pstrdup(pool, list), " ", &last); cidr;
         cidr = apr_strtok(NULL, " ", &last)) {
        sbt_network_t *net = apr_pcalloc(pool, sizeof(*net));
        const char *why = sbt_parse_cidr(cidr, &net->net);

        net->tune.policy = SBT_POLICY_FIXED;
        net->tune.rule = apr_pstrcat(pool, who, " ", cidr, NULL);
        if (why || sbt_rules_add(t, net)) {
            printf("Bail out! %s: %s\n", cidr, why ? why : "a duplicate");
            exit(1);
        }
    }
    return t;
}

/* @a ip as accept() gives it: IPv4 on an IPv4 listener, IPv6 (mapped for
 * an IPv4 client) on a dual-stack one. */
static apr_sockaddr_t *client(const char *ip)
{
    apr_sockaddr_t *sa;
    apr_int32_t family = strchr(ip, ':') ? APR_INET6 : APR_INET;

    if (apr_sockaddr_info_get(&sa, ip, family, 80, 0, pool) != APR_SUCCESS) {
        printf("Bail out! %s: not an address\n", ip);
        exit(1);
    }
    return sa;
}

/* A vhost's rules and the main server's (NULL: none), a client, and the
 * rule it gets (NULL: none). */
static const struct {
    const char *own, *base, *ip, *want;
} sbt_cases[] = {
    /* ::/0 is every IPv6 client, and no IPv4 one, on either listener. */
    {"::/0", NULL, "::1", "vhost ::/0"},
    {"::/0", NULL, "2001:db8::7", "vhost ::/0"},
    {"::/0", NULL, "127.0.0.1", NULL},
    {"::/0", NULL, "::ffff:127.0.0.1", NULL},
    /* Beside 0.0.0.0/0, each family gets its own. */
    {"::/0 0.0.0.0/0", NULL, "::ffff:192.0.2.7", "vhost 0.0.0.0/0"},
    {"::/0 0.0.0.0/0", NULL, "192.0.2.7", "vhost 0.0.0.0/0"},
    {"::/0 0.0.0.0/0", NULL, "2001:db8::7", "vhost ::/0"},
    /* A mapped network is the IPv4 one it names, for both listeners. */
    {"::ffff:10.0.0.0/104 ::ffff:0:0/96", NULL, "10.1.2.3",
     "vhost ::ffff:10.0.0.0/104"},
    {"::ffff:10.0.0.0/104 ::ffff:0:0/96", NULL, "::ffff:10.1.2.3",
     "vhost ::ffff:10.0.0.0/104"},
    {"::ffff:10.0.0.0/104 ::ffff:0:0/96", NULL, "::ffff:11.1.2.3",
     "vhost ::ffff:0:0/96"},
    {"::ffff:10.0.0.0/104 ::ffff:0:0/96", NULL, "::1", NULL},
    /* The longest prefix of the vhost's and the main server's; the
     * vhost's on a tie; a mapped client among IPv4 rules. */
    {"127.0.0.0/8", "127.0.0.0/8 127.0.0.1/32 ::/0", "::ffff:127.0.0.1",
     "main 127.0.0.1/32"},
    {"127.0.0.0/8", "127.0.0.0/8 127.0.0.1/32 ::/0", "::ffff:127.0.0.2",
     "vhost 127.0.0.0/8"},
    {"127.0.0.0/8", "127.0.0.0/8 127.0.0.1/32 ::/0", "127.0.0.2",
     "vhost 127.0.0.0/8"},
    {NULL, "127.0.0.0/8 127.0.0.1/32 ::/0", "::ffff:127.0.0.2",
     "main 127.0.0.0/8"},
    {NULL, "127.0.0.0/8 127.0.0.1/32 ::/0", "::1", "main ::/0"},
};

/* A rule of the module, the network as APR takes it (APR refuses a
 * mapped network, written as IPv4 then, and a prefix of 0: ::/1 stands
 * for ::/0, as it holds the same clients here) and a client. */
static const struct {
    const char *cidr, *apr_net, *ip;
} sbt_as_apr[] = {
    {"::/0", "::/1", "::1"},
    {"::/0", "::/1", "2001:db8::7"},
    {"::/0", "::/1", "::ffff:127.0.0.1"},
    {"::/0", "::/1", "127.0.0.1"},
    {"::1/128", "::1/128", "::1"},
    {"::1/128", "::1/128", "::ffff:127.0.0.1"},
    {"127.0.0.0/8", "127.0.0.0/8", "::ffff:127.0.0.1"},
    {"127.0.0.0/8", "127.0.0.0/8", "127.0.0.1"},
    {"127.0.0.0/8", "127.0.0.0/8", "::1"},
    {"::ffff:10.0.0.0/104", "10.0.0.0/8", "::ffff:10.1.2.3"},
    {"::ffff:10.0.0.0/104", "10.0.0.0/8", "10.1.2.3"},
    {"::ffff:10.0.0.0/104", "10.0.0.0/8", "::ffff:11.1.2.3"},
};

#define SBT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void match(unsigned int i)
{
    const sbt_network_t *got =
        sbt_rules_match(rules("vhost", sbt_cases[i].own),
                        rules("main", sbt_cases[i].base),
                        client(sbt_cases[i].ip));
    const char *name = got ? got->tune.rule : "no rule";
    const char *want = sbt_cases[i].want ? sbt_cases[i].want : "no rule";

    is_s(name, want,
         apr_psprintf(pool, "%s gets %s (vhost: %s; main server: %s)",
                      sbt_cases[i].ip, want,
                      sbt_cases[i].own ? sbt_cases[i].own : "none",
                      sbt_cases[i].base ? sbt_cases[i].base : "none"));
}

static void as_apr(unsigned int i)
{
    apr_ipsubnet_t *sub;
    char *addr = apr_pstrdup(pool, sbt_as_apr[i].apr_net);
    char *bits = strchr(addr, '/');
    apr_sockaddr_t *sa = client(sbt_as_apr[i].ip);
    int held, ours;

    *bits++ = '\0';
    if (apr_ipsubnet_create(&sub, addr, bits, pool) != APR_SUCCESS) {
        printf("Bail out! APR refuses %s\n", sbt_as_apr[i].apr_net);
        exit(1);
    }
    held = apr_ipsubnet_test(sub, sa);
    ours = sbt_rules_match(rules("vhost", sbt_as_apr[i].cidr), NULL, sa)
           != NULL;
    ok(ours == held, apr_psprintf(pool, "%s %s %s, as apr_ipsubnet_test(%s)",
                                  sbt_as_apr[i].cidr, held ? "holds"
                                  : "does not hold", sbt_as_apr[i].ip,
                                  sbt_as_apr[i].apr_net));
}

int main(void)
{
    unsigned int i;

    apr_initialize();
    apr_pool_create(&pool, NULL);
    for (i = 0; i < SBT_COUNT(sbt_cases); i++) {
        match(i);
    }
    for (i = 0; i < SBT_COUNT(sbt_as_apr); i++) {
        as_apr(i);
    }
    apr_terminate();
    return done_testing();
}
