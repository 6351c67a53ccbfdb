/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_status.c: counters of what the module did, kept in shared
 * memory.  sndbuf_status_page.c shows them (SetHandler
 * sndbuf-tune-status, and a summary on mod_status's page when that
 * module is loaded); sndbuf_status.h has the layout both use.
 *
 * Memory.  One shared memory segment per parent process, created the
 * first time the configuration is loaded, in the process pool, which
 * outlives every restart; ap_retained_data keeps its address for the
 * next generation, and the children inherit its mapping when they
 * fork.  So the counters survive a graceful restart.  A full restart
 * (or a start) zeroes them in pre_mpm, which the Unix MPMs run only
 * when they build a fresh scoreboard, i.e. exactly when
 * mod_status's own counters start over.
 *
 * Slots.  The segment holds two tables of fixed size, one for vhosts and
 * one for SndbufTuneNetwork rules: SBT_STATUS_SLOTS named slots each,
 * then one "(other)" slot that counts whatever found no room.  A slot
 * is keyed by its name, "ServerName:port" for a vhost and the rule's
 * "SndbufTuneNetwork <net> at <file>:<line>" for a rule.  In
 * post_config, in the parent before the new generation forks, every
 * vhost and rule of the configuration is mapped by that name to its
 * slot, which this file keeps in a map of its own, by server_rec and
 * by rule: the configuration's structures stay the configuration's.  A
 * name the table does not know yet takes a free slot, else the slot
 * longest absent from the configuration, else "(other)".  A graceful
 * restart therefore keeps the counters of every vhost and rule that is
 * still configured, whatever order they now come in.
 *
 * Concurrency.  Only the parent writes names, between generations;
 * children (and their threads) only add to counters, with lock-free
 * atomic adds, and readers read each counter atomically.  A page is
 * not one atomic snapshot: counters keep moving while it is written.
 */

#include "apr.h"
#if APR_HAVE_UNISTD_H
#include <unistd.h>             /* getpid */
#endif

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "scoreboard.h"

#include "apr_atomic.h"
#include "apr_hash.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include "sndbuf_status.h"

APLOG_USE_MODULE(sndbuf_tune);

sbt_shm_t *sbt_shm;
apr_uint32_t sbt_my_gen;

/* This configuration's slot numbers: server_rec -> vhost slot, rule
 * (sbt_network_t) -> rule slot.  Built in post_config, in pconf, before
 * the children fork; they only read them. */
static apr_hash_t *sbt_vhost_slots;
static apr_hash_t *sbt_rule_slots;

/** A map entry, keyed by the bytes of its own @a obj pointer. */
typedef struct {
    const void *obj;
    int slot;
} sbt_slot_ref_t;

static void sbt_slot_put(apr_hash_t *h, const void *obj, int slot)
{
    sbt_slot_ref_t *ref = apr_palloc(apr_hash_pool_get(h), sizeof(*ref));

    ref->obj = obj;
    ref->slot = slot;
    apr_hash_set(h, &ref->obj, sizeof(ref->obj), ref);
}

/** The slot of @a obj; -1 if this configuration has none for it. */
static int sbt_slot_of(apr_hash_t *h, const void *obj)
{
    const sbt_slot_ref_t *ref = h ? apr_hash_get(h, &obj, sizeof(obj))
                                  : NULL;

    return ref ? ref->slot : -1;
}

/** The histogram bucket of an effective size (-1: unknown). */
static int sbt_bucket(int effective)
{
    int shift = SBT_HIST_FIRST_SHIFT;

    if (effective < 0) {
        return SBT_HIST_UNKNOWN;
    }
    while (shift <= SBT_HIST_LAST_SHIFT && effective > (1 << shift)) {
        shift++;
    }
    return shift - SBT_HIST_FIRST_SHIFT;
}

static void sbt_count(sbt_slot_t *table, int slot, const sbt_outcome_t *o)
{
    sbt_counters_t *c;

    if (slot < 0 || slot > SBT_STATUS_OTHER) {
        return;
    }
    c = &table[slot].c;
    apr_atomic_add64(&c->v[SBT_F_NONE + o->policy], 1);
    if (o->bytes_sent > 0) {
        apr_atomic_add64(&c->v[SBT_F_BYTES], (apr_uint64_t)o->bytes_sent);
    }
    if (o->sndbuf_limited) {
        apr_atomic_add64(&c->v[SBT_F_LIMITED], 1);
    }
    if (o->clamped) {
        apr_atomic_add64(&c->v[SBT_F_CLAMPED], 1);
    }
    if (o->failures > 0) {
        apr_atomic_add64(&c->v[SBT_F_FAILURES], (apr_uint64_t)o->failures);
    }
    apr_atomic_add64(&c->hist[sbt_bucket(o->effective)], 1);
    if (o->effective >= 0) {
        apr_atomic_add64(&c->hist_sum, (apr_uint64_t)o->effective);
    }
}

void sbt_status_record(const sbt_outcome_t *o)
{
    if (!sbt_shm || !o->server
        || (unsigned)o->policy > (unsigned)SBT_POLICY_AUTO) {
        return;
    }
    sbt_count(sbt_shm->vhost, sbt_slot_of(sbt_vhost_slots, o->server), o);
    if (o->network) {
        sbt_count(sbt_shm->rule, sbt_slot_of(sbt_rule_slots, o->network), o);
    }
}

/* ---------------------------------------------------------------- */
/* The segment and the slot map (parent only)                       */
/* ---------------------------------------------------------------- */

/** The segment, created on the first real configuration pass. */
static sbt_shm_t *sbt_shm_attach(server_rec *s)
{
    apr_pool_t *pproc = s->process->pool;
    sbt_shm_t **kept = ap_retained_data_get(SBT_RETAINED_KEY);
    apr_shm_t *shm;
    sbt_shm_t *base;
    const char *fname = NULL;
    apr_status_t rv;

    if (!kept) {
        kept = ap_retained_data_create(SBT_RETAINED_KEY, sizeof(*kept));
    }
    if (*kept) {
        base = *kept;
        if (base->magic == SBT_SHM_MAGIC && base->version == SBT_SHM_VERSION
            && base->size == sizeof(sbt_shm_t)) {
            return base;
        }
        /* The old one stays mapped for the old generation's children. */
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s, "status page: this "
                     "build of the module lays its counters out differently; "
                     "they start over");
    }
    /* Anonymous where the system has it: nothing to clean up on disk. */
    rv = apr_shm_create(&shm, sizeof(sbt_shm_t), NULL, pproc);
    if (APR_STATUS_IS_ENOTIMPL(rv)) {
        fname = ap_runtime_dir_relative(pproc, apr_psprintf(pproc,
                    "sndbuf_tune_status.%" APR_PID_T_FMT ".shm", getpid()));
        apr_shm_remove(fname, pproc);
        rv = apr_shm_create(&shm, sizeof(sbt_shm_t), fname, pproc);
    }
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, "cannot create the "
                     "shared memory for the SndbufTune status counters "
                     "(%" APR_SIZE_T_FMT " bytes%s%s): nothing will be "
                     "counted and %s pages answer 503",
                     sizeof(sbt_shm_t), fname ? " at " : "",
                     fname ? fname : "", SBT_STATUS_HANDLER);
        return NULL;
    }
    base = apr_shm_baseaddr_get(shm);
    memset(base, 0, sizeof(*base));
    base->magic = SBT_SHM_MAGIC;
    base->version = SBT_SHM_VERSION;
    base->size = sizeof(sbt_shm_t);
    base->since = apr_time_now();
    *kept = base;
    return base;
}

/** @a name as stored: shortened and made unique by a hash if long. */
static const char *sbt_slot_name(apr_pool_t *p, const char *name)
{
    apr_size_t len = strlen(name), keep;

    if (len < SBT_NAME_LEN) {
        return name;
    }
    keep = SBT_NAME_LEN - 1 - SBT_NAME_HASH_LEN;
    return apr_psprintf(p, "%.*s...#%016" APR_UINT64_T_HEX_FMT, (int)keep,
                        name, (apr_uint64_t)sbt_hash(name, len));
}

/** Maps the names of one configuration onto one table. */
typedef struct {
    sbt_slot_t *table;
    apr_uint32_t gen;
    apr_pool_t *p;
    /** Stored name -> its slot (int *), for the names in the table. */
    apr_hash_t *slots;
    /** Names of this configuration the table did not have. */
    apr_array_header_t *missing;
    apr_hash_t *missing_set;
    /** No free or reclaimable slot is left. */
    int full;
    /** Names sent to "(other)". */
    int overflow;
} sbt_map_t;

static void sbt_map_set(sbt_map_t *m, const char *name, int slot)
{
    int *n = apr_palloc(m->p, sizeof(*n));

    *n = slot;
    apr_hash_set(m->slots, name, APR_HASH_KEY_STRING, n);
}

static void sbt_map_begin(sbt_map_t *m, sbt_slot_t *table,
                          apr_uint32_t gen, apr_pool_t *p)
{
    int i;

    m->table = table;
    m->gen = gen;
    m->p = p;
    m->slots = apr_hash_make(p);
    m->missing = apr_array_make(p, 8, sizeof(const char *));
    m->missing_set = apr_hash_make(p);
    m->full = 0;
    m->overflow = 0;
    for (i = 0; i < SBT_STATUS_SLOTS; i++) {
        if (table[i].seen_gen) {
            sbt_map_set(m, apr_pstrdup(p, table[i].name), i);
        }
    }
}

/** First pass: @a name is part of this configuration. */
static void sbt_map_want(sbt_map_t *m, const char *name)
{
    int *n = apr_hash_get(m->slots, name, APR_HASH_KEY_STRING);

    if (n) {
        m->table[*n].seen_gen = m->gen;
    }
    else if (!apr_hash_get(m->missing_set, name, APR_HASH_KEY_STRING)) {
        apr_hash_set(m->missing_set, name, APR_HASH_KEY_STRING, name);
        *(const char **)apr_array_push(m->missing) = name;
    }
}

/** A free slot, else the one longest absent from the configuration;
 *  -1 if every slot is in use by this configuration. */
static int sbt_map_free_slot(sbt_map_t *m)
{
    int i, best = -1;

    for (i = 0; i < SBT_STATUS_SLOTS; i++) {
        apr_uint32_t seen = m->table[i].seen_gen;

        if (seen == 0) {
            return i;
        }
        if (seen != m->gen
            && (best < 0 || seen < m->table[best].seen_gen)) {
            best = i;
        }
    }
    return best;
}

/** Second pass, once every wanted name is marked: give the new names
 *  their slots.  A reclaimed slot starts from zero; an old-generation
 *  child still finishing a request of the departed name may add that
 *  request to it. */
static void sbt_map_place(sbt_map_t *m)
{
    const char **names = (const char **)m->missing->elts;
    int i, slot;

    for (i = 0; i < m->missing->nelts; i++) {
        if (m->full || (slot = sbt_map_free_slot(m)) < 0) {
            m->full = 1;
            m->overflow++;
            continue;
        }
        memset(&m->table[slot].c, 0, sizeof(m->table[slot].c));
        memset(m->table[slot].name, 0, sizeof(m->table[slot].name));
        apr_cpystrn(m->table[slot].name, names[i], SBT_NAME_LEN);
        m->table[slot].seen_gen = m->gen;
        sbt_map_set(m, names[i], slot);
    }
}

/** Last pass: the slot of @a name, "(other)" if it found none. */
static int sbt_map_slot(sbt_map_t *m, const char *name)
{
    int *n = apr_hash_get(m->slots, name, APR_HASH_KEY_STRING);

    if (n) {
        return *n;
    }
    m->table[SBT_STATUS_OTHER].seen_gen = m->gen;
    return SBT_STATUS_OTHER;
}

/** "ServerName:port": the port of ServerName, else of the vhost's
 *  (first) address; no port for "*" or the main server. */
static const char *sbt_vhost_name(apr_pool_t *p, const server_rec *s)
{
    const char *host = s->server_hostname ? s->server_hostname : "(unnamed)";
    apr_port_t port = s->port;

    if (!port && s->is_virtual && s->addrs) {
        port = s->addrs->host_port;
    }
    return sbt_slot_name(p, port ? apr_psprintf(p, "%s:%u", host,
                                                (unsigned)port)
                                 : host);
}

static sbt_srv_conf_t *sbt_srv_conf(server_rec *s)
{
    return ap_get_module_config(s->module_config, &sndbuf_tune_module);
}

/** Every server of the configuration in the order it was written: the
 *  main server, then the vhosts (core prepends each to the list). */
static apr_array_header_t *sbt_servers(apr_pool_t *p, server_rec *main_s)
{
    apr_array_header_t *vhosts = apr_array_make(p, 16, sizeof(server_rec *));
    apr_array_header_t *all = apr_array_make(p, 16, sizeof(server_rec *));
    server_rec *s;
    int i;

    for (s = main_s->next; s; s = s->next) {
        *(server_rec **)apr_array_push(vhosts) = s;
    }
    *(server_rec **)apr_array_push(all) = main_s;
    for (i = vhosts->nelts - 1; i >= 0; i--) {
        *(server_rec **)apr_array_push(all) =
            ((server_rec **)vhosts->elts)[i];
    }
    return all;
}

/** Every rule of the configuration, once: the vhosts' own, and the
 *  main server's, which the vhosts share. */
static apr_array_header_t *sbt_all_rules(apr_pool_t *p,
                                         apr_array_header_t *servers)
{
    apr_array_header_t *all = apr_array_make(p, 16, sizeof(sbt_network_t *));
    int i, j;

    for (i = 0; i < servers->nelts; i++) {
        const sbt_srv_conf_t *sc = sbt_srv_conf(((server_rec **)servers->elts)[i]);
        const apr_array_header_t *own;

        if (!sc->rules) {
            continue;
        }
        own = sbt_rules_all(sc->rules);
        for (j = 0; j < own->nelts; j++) {
            *(const sbt_network_t **)apr_array_push(all) =
                ((const sbt_network_t **)own->elts)[j];
        }
    }
    return all;
}

static void sbt_map_all(apr_array_header_t *servers, apr_uint32_t gen,
                        apr_pool_t *pconf, apr_pool_t *ptemp,
                        server_rec *main_s)
{
    server_rec **sv = (server_rec **)servers->elts;
    apr_array_header_t *rules = sbt_all_rules(ptemp, servers);
    const sbt_network_t **nets = (const sbt_network_t **)rules->elts;
    sbt_map_t vm, rm;
    int i;

    /* Vhosts.  A name shared by several server_recs (IP-based vhosts
     * with one ServerName and port) shares their slot. */
    sbt_map_begin(&vm, sbt_shm->vhost, gen, ptemp);
    for (i = 0; i < servers->nelts; i++) {
        sbt_map_want(&vm, sbt_vhost_name(ptemp, sv[i]));
    }
    sbt_map_place(&vm);
    sbt_vhost_slots = apr_hash_make(pconf);
    for (i = 0; i < servers->nelts; i++) {
        sbt_slot_put(sbt_vhost_slots, sv[i],
                     sbt_map_slot(&vm, sbt_vhost_name(ptemp, sv[i])));
    }

    sbt_map_begin(&rm, sbt_shm->rule, gen, ptemp);
    for (i = 0; i < rules->nelts; i++) {
        sbt_map_want(&rm, sbt_slot_name(ptemp, nets[i]->tune.rule));
    }
    sbt_map_place(&rm);
    sbt_rule_slots = apr_hash_make(pconf);
    for (i = 0; i < rules->nelts; i++) {
        const char *name = sbt_slot_name(ptemp, nets[i]->tune.rule);

        sbt_slot_put(sbt_rule_slots, nets[i], sbt_map_slot(&rm, name));
    }

    if (vm.overflow || rm.overflow) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, main_s,
                     "status page: %d vhost name(s) and %d SndbufTuneNetwork "
                     "rule(s) found none of the %d slots free and are "
                     "counted together as \"" SBT_STATUS_OTHER_NAME "\"",
                     vm.overflow, rm.overflow, SBT_STATUS_SLOTS);
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, main_s,
                 "status page: counters generation %u, %d server(s)",
                 gen, servers->nelts);
}

static int sbt_status_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                                  apr_pool_t *ptemp, server_rec *s)
{
    apr_array_header_t *servers = sbt_servers(ptemp, s);

    (void)plog;
    /* Statics outlive nothing: a restart reloads this module. */
    sbt_shm = NULL;
    sbt_my_gen = 0;
    sbt_vhost_slots = sbt_rule_slots = NULL;
    /* The preflight pass serves nothing; before the second one the
     * parent may still detach (fork) itself. */
    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    if ((sbt_shm = sbt_shm_attach(s)) == NULL) {
        return OK;
    }
    sbt_my_gen = ++sbt_shm->generation;
    sbt_map_all(servers, sbt_my_gen, pconf, ptemp, s);
    return OK;
}

/** Start and full restart: zero the counters, forget the names this
 *  configuration no longer has.  No child is running. */
static int sbt_status_pre_mpm(apr_pool_t *p, ap_scoreboard_e sb_type)
{
    sbt_slot_t *tables[2];
    int t, i;

    (void)p; (void)sb_type;
    if (!sbt_shm) {
        return OK;
    }
    tables[0] = sbt_shm->vhost;
    tables[1] = sbt_shm->rule;
    for (t = 0; t < 2; t++) {
        for (i = 0; i <= SBT_STATUS_OTHER; i++) {
            if (tables[t][i].seen_gen == sbt_my_gen) {
                memset(&tables[t][i].c, 0, sizeof(tables[t][i].c));
            }
            else {
                memset(&tables[t][i], 0, sizeof(tables[t][i]));
            }
        }
    }
    sbt_shm->since = apr_time_now();
    return OK;
}

void sbt_status_register_hooks(void)
{
    /* post_config: the configuration is complete, the vhosts merged,
     * and the children of this generation not yet forked, so they
     * inherit the segment and the slot numbers. */
    ap_hook_post_config(sbt_status_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* pre_mpm: run by the MPM at start and full restart only, never on a
     * graceful one: the moment to zero the counters. */
    ap_hook_pre_mpm(sbt_status_pre_mpm, NULL, NULL, APR_HOOK_MIDDLE);
}
