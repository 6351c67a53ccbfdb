/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_rules.c: one server's SndbufTuneNetwork rules, and the longest
 * prefix among them that holds a client address.
 *
 * As in routing tables, a hash table per prefix length, keyed by network:
 * a lookup masks and probes once per length in use, longest first, so its
 * cost grows with the distinct lengths (at most 33 or 129), not the rules.
 * Built while the configuration is read, then only read, by any number of
 * threads; a vhost shares the main server's (sndbuf_config.c).
 */

#include <string.h>

#include "httpd.h"

#include "sndbuf_tune.h"

/* Open addressing, linear probing; grown at half full. */
#define SBT_RULES_MIN_SLOTS 8

typedef struct {
    const sbt_network_t **slot;
    apr_uint32_t mask;           /**< slots - 1 (a power of two) */
    apr_uint32_t used;
} sbt_len_table_t;

/** One address family: a table per prefix length in use. */
typedef struct {
    int bytes;                   /**< 4 or 16 */
    sbt_len_table_t *len[129];   /**< NULL where no rule has that length */
    int lens[129];               /**< the lengths in use, longest first */
    int nlens;
} sbt_family_t;

struct sbt_rules_t {
    apr_pool_t *pool;
    sbt_family_t v4, v6;
    /** Every rule in configuration order (the status page maps them). */
    apr_array_header_t *all;
};

sbt_rules_t *sbt_rules_make(apr_pool_t *p)
{
    sbt_rules_t *t = apr_pcalloc(p, sizeof(*t));

    t->pool = p;
    t->v4.bytes = 4;
    t->v6.bytes = 16;
    t->all = apr_array_make(p, 4, sizeof(const sbt_network_t *));
    return t;
}

const apr_array_header_t *sbt_rules_all(const sbt_rules_t *t)
{
    return t->all;
}

static const sbt_network_t **sbt_rules_probe(const sbt_len_table_t *lt,
                                             const unsigned char *key,
                                             int bytes)
{
    apr_uint32_t i = (apr_uint32_t)sbt_hash(key, bytes) & lt->mask;

    while (lt->slot[i] && memcmp(lt->slot[i]->net.addr, key, bytes)) {
        i = (i + 1) & lt->mask;
    }
    return &lt->slot[i];
}

static void sbt_rules_grow(apr_pool_t *p, sbt_len_table_t *lt, int bytes)
{
    const sbt_network_t **old = lt->slot;
    apr_uint32_t n = lt->mask + 1, i;

    lt->mask = 2 * n - 1;
    lt->slot = apr_pcalloc(p, 2 * n * sizeof(*lt->slot));
    for (i = 0; i < n; i++) {
        if (old[i]) {
            *sbt_rules_probe(lt, old[i]->net.addr, bytes) = old[i];
        }
    }
}

static sbt_len_table_t *sbt_rules_len(apr_pool_t *p, sbt_family_t *fam,
                                      int prefix)
{
    int i;

    if (!fam->len[prefix]) {
        sbt_len_table_t *lt = apr_pcalloc(p, sizeof(*lt));

        lt->mask = SBT_RULES_MIN_SLOTS - 1;
        lt->slot = apr_pcalloc(p, SBT_RULES_MIN_SLOTS * sizeof(*lt->slot));
        fam->len[prefix] = lt;
        for (i = fam->nlens; i > 0 && fam->lens[i - 1] < prefix; i--) {
            fam->lens[i] = fam->lens[i - 1];
        }
        fam->lens[i] = prefix;
        fam->nlens++;
    }
    return fam->len[prefix];
}

const sbt_network_t *sbt_rules_add(sbt_rules_t *t, const sbt_network_t *rule)
{
    sbt_family_t *fam = rule->net.family == 4 ? &t->v4 : &t->v6;
    sbt_len_table_t *lt = sbt_rules_len(t->pool, fam, rule->net.prefix);
    const sbt_network_t **at;

    at = sbt_rules_probe(lt, rule->net.addr, fam->bytes);
    if (*at) {
        return *at;
    }
    *at = rule;
    *(const sbt_network_t **)apr_array_push(t->all) = rule;
    if (++lt->used * 2 > lt->mask + 1) {
        sbt_rules_grow(t->pool, lt, fam->bytes);
    }
    return NULL;
}

/** The longest rule of @a fam that holds @a addr if longer than @a hit
 *  (NULL: any), else @a hit. */
static const sbt_network_t *sbt_rules_find(const sbt_family_t *fam,
                                           const unsigned char *addr,
                                           const sbt_network_t *hit)
{
    const sbt_network_t *found;
    unsigned char key[16];
    int than = hit ? hit->net.prefix : -1;
    int i;

    for (i = 0; i < fam->nlens && fam->lens[i] > than; i++) {
        sbt_mask_prefix(addr, key, fam->bytes, fam->lens[i]);
        found = *sbt_rules_probe(fam->len[fam->lens[i]], key, fam->bytes);
        if (found) {
            return found;
        }
    }
    return hit;
}

const sbt_network_t *sbt_rules_match(const sbt_rules_t *own,
                                     const sbt_rules_t *base,
                                     const apr_sockaddr_t *client)
{
    const unsigned char *addr;
    const sbt_network_t *hit;
    int v4 = client->family == APR_INET;

    if (v4) {
        addr = (const unsigned char *)&client->sa.sin.sin_addr;
    }
#if APR_HAVE_IPV6
    else if (client->family == APR_INET6) {
        addr = (const unsigned char *)&client->sa.sin6.sin6_addr;
        /* An IPv4 client on a dual-stack listener. */
        if (IN6_IS_ADDR_V4MAPPED(&client->sa.sin6.sin6_addr)) {
            addr += 12;
            v4 = 1;
        }
    }
#endif
    else {
        return NULL;
    }
    /* The vhost's own rules first, so that they win ties of length. */
    hit = own ? sbt_rules_find(v4 ? &own->v4 : &own->v6, addr, NULL) : NULL;
    if (base && base != own) {
        hit = sbt_rules_find(v4 ? &base->v4 : &base->v6, addr, hit);
    }
    return hit;
}
