/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_status.c: counters of what the module did, in shared memory,
 * for sndbuf_status_page.c to show.
 *
 * Memory.  One segment per parent, in the process pool, which outlives
 * restarts; ap_retained_data hands it to the next generation and the
 * children inherit the mapping, so a graceful restart keeps the counts.
 * pre_mpm zeroes them: the Unix MPMs run it only with a fresh scoreboard
 * (start, full restart), just when mod_status's counters start over.
 *
 * Slots.  Two tables, vhosts and SndbufTuneNetwork rules, of
 * SBT_STATUS_SLOTS named slots and an "(other)" for the rest, keyed by
 * name ("ServerName:port", "<network> in <its vhost>": no file or line).
 * post_config finds each one's slot by name, so a graceful restart keeps
 * the counts of all still configured, in any order, and leaves it in the
 * vhost's or rule's "counters" (this file's field): no lookup per request.
 *
 * Concurrency.  Only the parent writes names, between generations;
 * children only add, atomically, and readers read each counter
 * atomically: a page is not one snapshot, the counters move meanwhile.
 */

#include <unistd.h>             /* getpid */

#include "httpd.h"
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

/** A vhost or a rule: its name, and where its slot is to be left. */
typedef struct {
    struct sbt_slot_t **counters;
    const char *name;
} sbt_named_t;

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

/** Add @a n, if any: an atomic add is a locked bus cycle. */
static void sbt_add(apr_uint64_t *counter, apr_int64_t n)
{
    if (n > 0) {
        apr_atomic_add64(counter, (apr_uint64_t)n);
    }
}

/** A large response's triage: its verdict, its time by limit, and what
 *  the buffer's verdict needs for its words. */
static void sbt_count_triage(sbt_triage_sum_t *t, const sbt_outcome_t *o)
{
    int i;

    sbt_add(&t->large, 1);
    for (i = 0; i < SBT_LIMITS; i++) {
        sbt_add(&t->us[i], (apr_int64_t)o->triage.us[i]);
    }
    if (o->triage.verdict < SBT_LIMITS) {
        sbt_add(&t->by[o->triage.verdict], 1);
    }
    if (o->triage.verdict == SBT_LIMIT_SNDBUF) {
        sbt_add(&t->buf_from[o->buf_from], 1);
        sbt_add(&t->buf_sum, (apr_int64_t)o->buffer);
        sbt_add(&t->rtt_sum, o->srtt_us);
    }
}

/** Add @a o to @a slot (NULL: none). */
static void sbt_count(sbt_slot_t *slot, const sbt_outcome_t *o)
{
    if (!slot) {
        return;
    }
    sbt_add(&slot->c.v[SBT_F_NONE + o->policy], 1);
    sbt_add(&slot->c.v[SBT_F_BYTES], o->bytes_sent);
    sbt_add(&slot->c.v[SBT_F_LIMITED], o->sndbuf_limited);
    sbt_add(&slot->c.v[SBT_F_CLAMPED], o->clamped);
    sbt_add(&slot->c.v[SBT_F_FAILURES], o->failures);
    sbt_add(&slot->c.hist[sbt_bucket(o->effective)], 1);
    sbt_add(&slot->c.hist_sum, o->effective);
    if (o->large) {
        sbt_count_triage(&slot->c.triage, o);
    }
}

void sbt_status_record(const sbt_outcome_t *o)
{
    const sbt_srv_conf_t *sc = ap_get_module_config(o->server->module_config,
                                                    &sndbuf_tune_module);

    if ((unsigned)o->policy <= (unsigned)SBT_POLICY_AUTO) {
        sbt_count(sc->counters, o);
        if (o->network) {
            sbt_count(o->network->counters, o);
        }
    }
}

/* ---- The segment and the slot map (parent only) ---- */

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
    if ((base = *kept) != NULL) {
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

/** A free slot of @a table, else the one longest absent from the
 *  configuration; -1 if this one uses every slot. */
static int sbt_free_slot(const sbt_slot_t *table)
{
    int i, best = -1;

    for (i = 0; i < SBT_STATUS_SLOTS; i++) {
        if (table[i].seen_gen == 0) {
            return i;
        }
        if (table[i].seen_gen != sbt_my_gen
            && (best < 0 || table[i].seen_gen < table[best].seen_gen)) {
            best = i;
        }
    }
    return best;
}

/** Give each of @a all a slot of @a table.  Known names keep their
 *  slots; new ones, in configuration order, take a free slot, else the one
 *  longest absent (zeroed; an old-generation child still ending a request
 *  of the departed name may add there), else "(other)", counted in
 *  @a overflow.  Objects of one name (IP-based vhosts with one ServerName
 *  and port) share it. */
static void sbt_map_table(sbt_slot_t *table, apr_array_header_t *all,
                          apr_pool_t *ptemp, int *overflow)
{
    sbt_named_t *e = (sbt_named_t *)all->elts;
    /* name -> slot, the names copied: reclaiming a slot overwrites them */
    apr_hash_t *by_name = apr_hash_make(ptemp);
    sbt_slot_t *t;
    int i, slot;

    for (i = 0; i < SBT_STATUS_SLOTS; i++) {
        if (table[i].seen_gen) {
            apr_hash_set(by_name, apr_pstrdup(ptemp, table[i].name),
                         APR_HASH_KEY_STRING, &table[i]);
        }
    }
    for (i = 0; i < all->nelts; i++) {
        if ((t = apr_hash_get(by_name, e[i].name, APR_HASH_KEY_STRING))) {
            t->seen_gen = sbt_my_gen;
        }
    }
    /* Only once every known name is marked may new ones take slots. */
    for (i = 0; i < all->nelts; i++) {
        if (!(t = apr_hash_get(by_name, e[i].name, APR_HASH_KEY_STRING))) {
            if ((slot = sbt_free_slot(table)) < 0) {
                slot = SBT_STATUS_OTHER;
                ++*overflow;
            }
            else {
                memset(&table[slot], 0, sizeof(table[slot]));
                apr_cpystrn(table[slot].name, e[i].name, SBT_NAME_LEN);
            }
            t = &table[slot];
            t->seen_gen = sbt_my_gen;
            apr_hash_set(by_name, e[i].name, APR_HASH_KEY_STRING, t);
        }
        *e[i].counters = t;
    }
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

/** Every server of the configuration in the order it was written: the
 *  main server, then the vhosts, which core prepends to its list. */
static apr_array_header_t *sbt_vhosts(apr_pool_t *p, server_rec *main_s)
{
    apr_array_header_t *all = apr_array_make(p, 16, sizeof(sbt_named_t));
    sbt_named_t *e;
    server_rec *s;
    int i;

    for (s = main_s; s; s = s->next) {
        sbt_srv_conf_t *sc = ap_get_module_config(s->module_config,
                                                  &sndbuf_tune_module);

        e = apr_array_push(all);
        e->counters = &sc->counters;
        e->name = sbt_vhost_name(p, s);
    }
    e = (sbt_named_t *)all->elts;
    for (i = 1; i < all->nelts - i; i++) {
        sbt_named_t last = e[all->nelts - i];

        e[all->nelts - i] = e[i];
        e[i] = last;
    }
    return all;
}

/** Every rule of the configuration, once: each server's own, the main
 *  server's (which the vhosts share, not copy) among them, named
 *  "<network> in <its server's name>". */
static apr_array_header_t *sbt_rules(apr_pool_t *p, server_rec *main_s)
{
    apr_array_header_t *all = apr_array_make(p, 16, sizeof(sbt_named_t));
    char net[SBT_CIDR_STRLEN];
    server_rec *s;
    int j;

    for (s = main_s; s; s = s->next) {
        const sbt_srv_conf_t *sc = ap_get_module_config(s->module_config,
                                                        &sndbuf_tune_module);
        const apr_array_header_t *own = sc->rules ? sbt_rules_all(sc->rules)
                                                  : NULL;

        for (j = 0; own && j < own->nelts; j++) {
            /* Its counters are this file's to set. */
            sbt_network_t *rule = ((sbt_network_t **)own->elts)[j];
            sbt_named_t *e = apr_array_push(all);

            e->counters = &rule->counters;
            e->name = sbt_slot_name(p, apr_pstrcat(p,
                sbt_format_cidr(&rule->net, net, sizeof(net)), " in ",
                sbt_vhost_name(p, s), NULL));
        }
    }
    return all;
}

static int sbt_status_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                                  apr_pool_t *ptemp, server_rec *s)
{
    apr_array_header_t *vhosts;
    int vover = 0, rover = 0;

    (void)pconf; (void)plog;
    /* Statics outlive nothing: a restart reloads this module. */
    sbt_shm = NULL;
    sbt_my_gen = 0;
    /* The preflight pass serves nothing; before the second one the
     * parent may still detach (fork) itself. */
    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG
        || (sbt_shm = sbt_shm_attach(s)) == NULL) {
        return OK;
    }
    sbt_my_gen = ++sbt_shm->generation;
    vhosts = sbt_vhosts(ptemp, s);
    sbt_map_table(sbt_shm->vhost, vhosts, ptemp, &vover);
    sbt_map_table(sbt_shm->rule, sbt_rules(ptemp, s), ptemp, &rover);
    if (vover || rover) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     "status page: %d vhost name(s) and %d SndbufTuneNetwork "
                     "rule(s) found none of the %d slots free and are "
                     "counted together as \"" SBT_STATUS_OTHER_NAME "\"",
                     vover, rover, SBT_STATUS_SLOTS);
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 "status page: counters generation %u, %d server(s)",
                 sbt_my_gen, vhosts->nelts);
    return OK;
}

/** Zero @a table's counters, forget the names this configuration has not. */
static void sbt_zero_table(sbt_slot_t *table)
{
    int i;

    for (i = 0; i <= SBT_STATUS_OTHER; i++) {
        if (table[i].seen_gen == sbt_my_gen) {
            memset(&table[i].c, 0, sizeof(table[i].c));
        }
        else {
            memset(&table[i], 0, sizeof(table[i]));
        }
    }
}

/** Start and full restart, never a graceful one; no child is running. */
static int sbt_status_pre_mpm(apr_pool_t *p, ap_scoreboard_e sb_type)
{
    (void)p; (void)sb_type;
    if (sbt_shm) {
        sbt_zero_table(sbt_shm->vhost);
        sbt_zero_table(sbt_shm->rule);
        sbt_shm->since = apr_time_now();
    }
    return OK;
}

void sbt_status_register_hooks(void)
{
    /* The configuration is complete and this generation's children not
     * yet forked: they inherit the segment and the slot numbers. */
    ap_hook_post_config(sbt_status_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_pre_mpm(sbt_status_pre_mpm, NULL, NULL, APR_HOOK_MIDDLE);
}
