/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_status.c: counters of what the module did, kept in shared
 * memory, and the page that shows them (SetHandler sndbuf-tune-status,
 * plus a summary on mod_status's page when that module is loaded).
 *
 * Memory.  One shared memory segment per parent process, created the
 * first time the configuration is loaded and kept in the process pool,
 * which outlives every restart; the children inherit its mapping when
 * they fork.  So the counters survive a graceful restart.  A full
 * restart (or a start) zeroes them in pre_mpm, which the Unix MPMs run
 * only when they build a fresh scoreboard, i.e. exactly when
 * mod_status's own counters start over.
 *
 * Slots.  The segment holds two tables of fixed size, one for vhosts and
 * one for SndbufTuneNetwork rules: SBT_STATUS_SLOTS named slots each,
 * then one "(other)" slot that counts whatever found no room.  A slot
 * is keyed by its name, "ServerName:port" for a vhost and the rule's
 * "SndbufTuneNetwork <net> at <file>:<line>" for a rule.  In
 * post_config, in the parent before the new generation forks, every
 * vhost and rule of the configuration is mapped by that name to its
 * slot, which goes into the status_slot fields of sbt_srv_conf_t and
 * sbt_network_t; a name the table does not know yet takes a free slot,
 * else the slot longest absent from the configuration, else "(other)".
 * A graceful restart therefore keeps the counters of every vhost and
 * rule that is still configured, whatever order they now come in.  (A
 * vhost using none of the module's directives shares the main server's
 * sbt_srv_conf_t; post_config gives it a copy, so it has a slot of its
 * own.)
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
#include "http_protocol.h"
#include "http_request.h"
#include "scoreboard.h"
#include "util_time.h"

#include "apr_atomic.h"
#include "apr_hash.h"
#include "apr_optional_hooks.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include "mod_status.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

#define SBT_STATUS_HANDLER      "sndbuf-tune-status"

/* Named slots per table; slot SBT_STATUS_OTHER counts the rest. */
#define SBT_STATUS_SLOTS        256
#define SBT_STATUS_OTHER        SBT_STATUS_SLOTS
#define SBT_STATUS_OTHER_NAME   "(other)"

/* Room for a name, NUL included.  A longer one is stored as its start,
 * "...#" and a 64-bit hash of the whole, so it stays unique. */
#define SBT_NAME_LEN            256
#define SBT_NAME_HASH_LEN       (4 + 16)

/* Histogram of the effective send buffer (getsockopt SO_SNDBUF, what
 * the kernel really holds: twice the setsockopt argument on Linux).
 * Bucket 0 is below 4k; bucket i >= 1 counts sizes from 2^(11+i) to
 * twice that, and the last, from 1g, has no upper bound.  One more
 * bucket counts responses whose buffer was unknown (no policy applied,
 * or no socket to ask). */
#define SBT_HIST_FIRST_SHIFT    12
#define SBT_HIST_LAST_SHIFT     30
#define SBT_HIST_SIZES          (SBT_HIST_LAST_SHIFT - SBT_HIST_FIRST_SHIFT + 2)
#define SBT_HIST_UNKNOWN        SBT_HIST_SIZES
#define SBT_HIST_BUCKETS        (SBT_HIST_SIZES + 1)

#define SBT_SHM_MAGIC           0x53425453u     /* "SBTS" */
#define SBT_SHM_VERSION         1u

/* The segment's address, in the process pool's userdata. */
#define SBT_SHM_USERDATA        "mod_sndbuf_tune/status_shm"

/* ---------------------------------------------------------------- */
/* Counters                                                         */
/* ---------------------------------------------------------------- */

/* The counters are shared by processes, so only lock-free atomics will
 * do (a mutex inside one process protects nothing here).  Where gcc or
 * clang has lock-free 64-bit atomics (64-bit targets, i686, ARMv7), a
 * counter is one word.  Otherwise it is two 32-bit halves added with
 * APR's 32-bit atomics, which are the CPU's atomic instructions where
 * APR has them: the carry out of the low half is added to the high
 * half right after, so the stored total is always right, but a reader
 * racing that carry can see one value 2^32 short.  Define
 * SBT_STATUS_SPLIT_COUNTERS to build the second form anywhere. */
#if !defined(SBT_STATUS_SPLIT_COUNTERS) && defined(__GCC_ATOMIC_LLONG_LOCK_FREE) \
    && __GCC_ATOMIC_LLONG_LOCK_FREE == 2 && defined(__ATOMIC_RELAXED)

typedef apr_uint64_t sbt_counter_t;

static void sbt_add(sbt_counter_t *c, apr_uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static apr_uint64_t sbt_get(sbt_counter_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

#else

typedef struct {
    apr_uint32_t lo;
    apr_uint32_t hi;
} sbt_counter_t;

static void sbt_add(sbt_counter_t *c, apr_uint64_t v)
{
    apr_uint32_t lo = (apr_uint32_t)v, hi = (apr_uint32_t)(v >> 32);

    /* apr_atomic_add32 returns the old value: a sum below it wrapped. */
    if (lo && apr_atomic_add32(&c->lo, lo) > APR_UINT32_MAX - lo) {
        hi++;
    }
    if (hi) {
        apr_atomic_add32(&c->hi, hi);
    }
}

static apr_uint64_t sbt_get(sbt_counter_t *c)
{
    apr_uint32_t hi, lo;

    do {
        hi = apr_atomic_read32(&c->hi);
        lo = apr_atomic_read32(&c->lo);
    } while (hi != apr_atomic_read32(&c->hi));
    return ((apr_uint64_t)hi << 32) | lo;
}

#endif

/* The counters of a slot.  The first four are indexed by sbt_policy_e. */
enum {
    SBT_F_NONE,
    SBT_F_UNSET,
    SBT_F_FIXED,
    SBT_F_AUTO,
    SBT_F_BYTES,
    SBT_F_LIMITED,
    SBT_F_CLAMPED,
    SBT_F_FAILURES,
    SBT_F_COUNT
};

/* Their names in each format; docs/status.md explains them. */
static const struct {
    const char *key;            /**< ?auto, after the slot's prefix */
    const char *json;           /**< ?json member */
    const char *title;          /**< HTML column */
} sbt_fields[SBT_F_COUNT] = {
    {"RequestsNone",       "requests_none",       "none"},
    {"RequestsUnset",      "requests_unset",      "unset"},
    {"RequestsFixed",      "requests_fixed",      "fixed"},
    {"RequestsAuto",       "requests_auto",       "auto"},
    {"BytesSent",          "bytes_sent",          "bytes sent"},
    {"SndbufLimited",      "sndbuf_limited",      "send-buffer-limited"},
    {"Clamped",            "clamped",             "clamped"},
    {"SetsockoptFailures", "setsockopt_failures", "setsockopt failures"}
};

typedef struct {
    sbt_counter_t v[SBT_F_COUNT];
    sbt_counter_t hist[SBT_HIST_BUCKETS];
} sbt_counters_t;

typedef struct {
    /** NUL-terminated; written by the parent only. */
    char name[SBT_NAME_LEN];
    /** Last generation whose configuration names this slot; 0: free. */
    apr_uint32_t seen_gen;
    sbt_counters_t c;
} sbt_slot_t;

typedef struct {
    /** What made the segment: a graceful restart into a build with
     *  another layout must not use it. */
    apr_uint32_t magic;
    apr_uint32_t version;
    apr_size_t size;
    /** Configurations loaded since the segment was created. */
    apr_uint32_t generation;
    /** When the counters were last zeroed (start, full restart). */
    apr_time_t since;
    sbt_slot_t vhost[SBT_STATUS_SLOTS + 1];
    sbt_slot_t rule[SBT_STATUS_SLOTS + 1];
} sbt_shm_t;

/* Set in post_config, inherited by the children.  NULL: no segment, so
 * nothing is counted and the page answers 503. */
static sbt_shm_t *sbt_shm;
/** The generation this process was configured in. */
static apr_uint32_t sbt_my_gen;

/** The histogram bucket of an effective size (-1: unknown). */
static int sbt_bucket(int effective)
{
    int shift;

    if (effective < 0) {
        return SBT_HIST_UNKNOWN;
    }
    if (effective < (1 << SBT_HIST_FIRST_SHIFT)) {
        return 0;
    }
    for (shift = SBT_HIST_FIRST_SHIFT;
         shift < SBT_HIST_LAST_SHIFT && effective >= (1 << (shift + 1));
         shift++)
        ;
    return shift - SBT_HIST_FIRST_SHIFT + 1;
}

/** The smallest size bucket @a i counts. */
static apr_uint64_t sbt_bucket_min(int i)
{
    return i == 0 ? 0 : (apr_uint64_t)1 << (SBT_HIST_FIRST_SHIFT + i - 1);
}

static void sbt_count(sbt_slot_t *table, int slot, const sbt_outcome_t *o)
{
    sbt_counters_t *c;

    if (slot < 0 || slot > SBT_STATUS_OTHER) {
        return;
    }
    c = &table[slot].c;
    sbt_add(&c->v[SBT_F_NONE + o->policy], 1);
    if (o->bytes_sent > 0) {
        sbt_add(&c->v[SBT_F_BYTES], (apr_uint64_t)o->bytes_sent);
    }
    if (o->sndbuf_limited) {
        sbt_add(&c->v[SBT_F_LIMITED], 1);
    }
    if (o->clamped) {
        sbt_add(&c->v[SBT_F_CLAMPED], 1);
    }
    if (o->failures > 0) {
        sbt_add(&c->v[SBT_F_FAILURES], (apr_uint64_t)o->failures);
    }
    sbt_add(&c->hist[sbt_bucket(o->effective)], 1);
}

void sbt_status_record(request_rec *r, const sbt_outcome_t *o)
{
    const sbt_srv_conf_t *sc;

    (void)r;
    if (!sbt_shm || !o->server
        || (unsigned)o->policy > (unsigned)SBT_POLICY_AUTO) {
        return;
    }
    sc = ap_get_module_config(o->server->module_config, &sndbuf_tune_module);
    if (sc) {
        sbt_count(sbt_shm->vhost, sc->status_slot, o);
    }
    if (o->network) {
        sbt_count(sbt_shm->rule, o->network->status_slot, o);
    }
}

/* ---------------------------------------------------------------- */
/* The segment and the slot map (parent only)                       */
/* ---------------------------------------------------------------- */

/** The segment, created on the first real configuration pass. */
static sbt_shm_t *sbt_shm_attach(server_rec *s)
{
    apr_pool_t *pproc = s->process->pool;
    apr_shm_t *shm;
    sbt_shm_t *base;
    void *data = NULL;
    const char *fname = NULL;
    apr_status_t rv;

    apr_pool_userdata_get(&data, SBT_SHM_USERDATA, pproc);
    if (data) {
        base = data;
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
    /* The key is copied; the cleanup must not point into this module,
     * which a restart unloads. */
    apr_pool_userdata_set(base, SBT_SHM_USERDATA, apr_pool_cleanup_null,
                          pproc);
    return base;
}

/** @a name as stored: shortened and made unique by a hash if long. */
static const char *sbt_slot_name(apr_pool_t *p, const char *name)
{
    apr_size_t len = strlen(name), keep, i;
    apr_uint64_t h = APR_UINT64_C(0xcbf29ce484222325);     /* FNV-1a */

    if (len < SBT_NAME_LEN) {
        return name;
    }
    for (i = 0; i < len; i++) {
        h = (h ^ (unsigned char)name[i]) * APR_UINT64_C(0x100000001b3);
    }
    keep = SBT_NAME_LEN - 1 - SBT_NAME_HASH_LEN;
    return apr_psprintf(p, "%.*s...#%016" APR_UINT64_T_HEX_FMT, (int)keep,
                        name, h);
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
            int *n = apr_palloc(p, sizeof(*n));

            *n = i;
            apr_hash_set(m->slots, apr_pstrdup(p, table[i].name),
                         APR_HASH_KEY_STRING, n);
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
        {
            int *n = apr_palloc(m->p, sizeof(*n));

            *n = slot;
            apr_hash_set(m->slots, names[i], APR_HASH_KEY_STRING, n);
        }
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

/** Core gives a vhost that uses none of this module's directives the
 *  main server's configuration itself, not a merged copy; such a vhost
 *  gets a copy of its own here, so that it has a status_slot of its
 *  own.  The copy shares the rules (same names, so same slots). */
static void sbt_own_srv_confs(apr_pool_t *pconf, apr_array_header_t *servers)
{
    apr_hash_t *seen = apr_hash_make(pconf);
    int i;

    for (i = 0; i < servers->nelts; i++) {
        server_rec *s = ((server_rec **)servers->elts)[i];
        sbt_srv_conf_t *sc = sbt_srv_conf(s);

        if (apr_hash_get(seen, &sc, sizeof(sc))) {
            sc = apr_pmemdup(pconf, sc, sizeof(*sc));
            ap_set_module_config(s->module_config, &sndbuf_tune_module, sc);
        }
        apr_hash_set(seen, apr_pmemdup(pconf, &sc, sizeof(sc)), sizeof(sc),
                     s);
    }
}

/** Without a segment: count nothing. */
static void sbt_unmap_all(apr_array_header_t *servers)
{
    int i, j;

    for (i = 0; i < servers->nelts; i++) {
        sbt_srv_conf_t *sc = sbt_srv_conf(((server_rec **)servers->elts)[i]);
        sbt_network_t *nets = (sbt_network_t *)sc->networks->elts;

        sc->status_slot = -1;
        for (j = 0; j < sc->networks->nelts; j++) {
            nets[j].status_slot = -1;
        }
    }
}

static void sbt_map_all(apr_array_header_t *servers, apr_uint32_t gen,
                        apr_pool_t *ptemp, server_rec *main_s)
{
    server_rec **sv = (server_rec **)servers->elts;
    sbt_map_t vm, rm;
    int i, j;

    /* Vhosts.  A name shared by several server_recs (IP-based vhosts
     * with one ServerName and port) shares their slot. */
    sbt_map_begin(&vm, sbt_shm->vhost, gen, ptemp);
    for (i = 0; i < servers->nelts; i++) {
        sbt_map_want(&vm, sbt_vhost_name(ptemp, sv[i]));
    }
    sbt_map_place(&vm);
    for (i = 0; i < servers->nelts; i++) {
        sbt_srv_conf(sv[i])->status_slot =
            sbt_map_slot(&vm, sbt_vhost_name(ptemp, sv[i]));
    }

    /* Rules.  A vhost holds copies of the main server's rules: same
     * name, so one slot. */
    sbt_map_begin(&rm, sbt_shm->rule, gen, ptemp);
    for (i = 0; i < servers->nelts; i++) {
        sbt_srv_conf_t *sc = sbt_srv_conf(sv[i]);
        sbt_network_t *nets = (sbt_network_t *)sc->networks->elts;

        for (j = 0; j < sc->networks->nelts; j++) {
            sbt_map_want(&rm, sbt_slot_name(ptemp, nets[j].tune.rule));
        }
    }
    sbt_map_place(&rm);
    for (i = 0; i < servers->nelts; i++) {
        sbt_srv_conf_t *sc = sbt_srv_conf(sv[i]);
        sbt_network_t *nets = (sbt_network_t *)sc->networks->elts;

        for (j = 0; j < sc->networks->nelts; j++) {
            nets[j].status_slot =
                sbt_map_slot(&rm, sbt_slot_name(ptemp, nets[j].tune.rule));
        }
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
    sbt_own_srv_confs(pconf, servers);
    sbt_unmap_all(servers);
    /* The preflight pass serves nothing; before the second one the
     * parent may still detach (fork) itself. */
    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    if ((sbt_shm = sbt_shm_attach(s)) == NULL) {
        return OK;
    }
    sbt_my_gen = ++sbt_shm->generation;
    sbt_map_all(servers, sbt_my_gen, ptemp, s);
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

/* ---------------------------------------------------------------- */
/* Reading                                                          */
/* ---------------------------------------------------------------- */

/** One slot's counters as read, for one page. */
typedef struct {
    int slot;
    const char *name;
    /** Named by the configuration of the process that serves the page. */
    int configured;
    apr_uint64_t v[SBT_F_COUNT];
    apr_uint64_t hist[SBT_HIST_BUCKETS];
} sbt_view_t;

static void sbt_read_slot(apr_pool_t *p, sbt_slot_t *s, int slot,
                          sbt_view_t *v)
{
    char name[SBT_NAME_LEN];
    int i;

    v->slot = slot;
    /* The parent may be renaming a departed slot right now: copy at
     * most the buffer, whose last byte is never written. */
    apr_cpystrn(name, slot == SBT_STATUS_OTHER ? SBT_STATUS_OTHER_NAME
                                               : s->name, sizeof(name));
    v->name = apr_pstrdup(p, name);
    v->configured = s->seen_gen == sbt_my_gen;
    for (i = 0; i < SBT_F_COUNT; i++) {
        v->v[i] = sbt_get(&s->c.v[i]);
    }
    for (i = 0; i < SBT_HIST_BUCKETS; i++) {
        v->hist[i] = sbt_get(&s->c.hist[i]);
    }
}

/** The slots in use in @a table: named ones, and "(other)" if anything
 *  maps or was counted there. */
static apr_array_header_t *sbt_read_table(apr_pool_t *p, sbt_slot_t *table)
{
    apr_array_header_t *views = apr_array_make(p, 16, sizeof(sbt_view_t));
    int i, j;

    for (i = 0; i <= SBT_STATUS_OTHER; i++) {
        sbt_view_t *v;
        apr_uint64_t any = 0;

        if (!table[i].seen_gen && i != SBT_STATUS_OTHER) {
            continue;
        }
        v = apr_array_push(views);
        sbt_read_slot(p, &table[i], i, v);
        if (i == SBT_STATUS_OTHER && !table[i].seen_gen) {
            for (j = SBT_F_NONE; j <= SBT_F_AUTO; j++) {
                any += v->v[j];
            }
            if (!any) {
                apr_array_pop(views);
            }
        }
    }
    return views;
}

/** Every vhost slot added up: each request counts in exactly one. */
static void sbt_read_totals(apr_pool_t *p, sbt_view_t *total)
{
    apr_array_header_t *views = sbt_read_table(p, sbt_shm->vhost);
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int i, j;

    memset(total, 0, sizeof(*total));
    for (i = 0; i < views->nelts; i++) {
        for (j = 0; j < SBT_F_COUNT; j++) {
            total->v[j] += v[i].v[j];
        }
        for (j = 0; j < SBT_HIST_BUCKETS; j++) {
            total->hist[j] += v[i].hist[j];
        }
    }
}

/* ---------------------------------------------------------------- */
/* ?auto: mod_status's "Key: value" lines                           */
/* ---------------------------------------------------------------- */

/** A name on one line: control characters become '?'. */
static const char *sbt_one_line(apr_pool_t *p, const char *s)
{
    char *o = apr_pstrdup(p, s), *c;

    for (c = o; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            *c = '?';
        }
    }
    return o;
}

static void sbt_auto_kernel(request_rec *r, const char *prefix)
{
    const sbt_kernel_t *k = &sbt_kernel;

    ap_rprintf(r, "%sKernelWmemMax: %u\n", prefix, k->wmem_max);
    ap_rprintf(r, "%sKernelTcpWmem: %u %u %u\n", prefix, k->tcp_wmem[0],
               k->tcp_wmem[1], k->tcp_wmem[2]);
    ap_rprintf(r, "%sKernelSoBufLock: %d\n", prefix, k->has_buf_lock ? 1 : 0);
    ap_rprintf(r, "%sKernelTcpInfo: %d\n", prefix, k->has_tcp_info ? 1 : 0);
}

static void sbt_auto_counters(request_rec *r, const char *prefix,
                              const sbt_view_t *v)
{
    int i;

    for (i = 0; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "%s%s: %" APR_UINT64_T_FMT "\n", prefix,
                   sbt_fields[i].key, v->v[i]);
    }
    ap_rprintf(r, "%sEffectiveUnknown: %" APR_UINT64_T_FMT "\n", prefix,
               v->hist[SBT_HIST_UNKNOWN]);
    for (i = 0; i < SBT_HIST_SIZES; i++) {
        ap_rprintf(r, "%sEffective%" APR_UINT64_T_FMT ": %" APR_UINT64_T_FMT
                   "\n", prefix, sbt_bucket_min(i), v->hist[i]);
    }
}

static void sbt_auto_table(request_rec *r, const char *what,
                           sbt_slot_t *table)
{
    apr_array_header_t *views = sbt_read_table(r->pool, table);
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int i;

    for (i = 0; i < views->nelts; i++) {
        const char *prefix = apr_psprintf(r->pool, "SndbufTune%s[%d]", what,
                                          v[i].slot);

        ap_rprintf(r, "%sName: %s\n", prefix,
                   sbt_one_line(r->pool, v[i].name));
        ap_rprintf(r, "%sConfigured: %d\n", prefix, v[i].configured);
        sbt_auto_counters(r, prefix, &v[i]);
    }
}

static void sbt_page_auto(request_rec *r)
{
    ap_rprintf(r, "SndbufTuneGeneration: %u\n", sbt_my_gen);
    ap_rprintf(r, "SndbufTuneCountersSince: %" APR_TIME_T_FMT "\n",
               apr_time_sec(sbt_shm->since));
    ap_rprintf(r, "SndbufTuneSlots: %d\n", SBT_STATUS_SLOTS);
    sbt_auto_kernel(r, "SndbufTune");
    sbt_auto_table(r, "Vhost", sbt_shm->vhost);
    sbt_auto_table(r, "Network", sbt_shm->rule);
}

/* ---------------------------------------------------------------- */
/* ?json                                                            */
/* ---------------------------------------------------------------- */

/** Length of the well-formed UTF-8 sequence at @a s, 0 if there is
 *  none (RFC 3629: no overlongs, surrogates or values past U+10FFFF). */
static int sbt_utf8_len(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    int n, i;

    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
    }
    else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        if (s[0] == 0xe0) {
            lo = 0xa0;
        }
        else if (s[0] == 0xed) {
            hi = 0x9f;
        }
    }
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        if (s[0] == 0xf0) {
            lo = 0x90;
        }
        else if (s[0] == 0xf4) {
            hi = 0x8f;
        }
    }
    else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (i = 2; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return n;
}

/** @a s as a JSON string: quoted, escaped, and valid UTF-8 (a byte
 *  that is not part of a well-formed sequence becomes U+FFFD). */
static const char *sbt_json_str(apr_pool_t *p, const char *s)
{
    const unsigned char *c = (const unsigned char *)s;
    char *o = apr_palloc(p, strlen(s) * 6 + 3), *w = o;
    int n;

    *w++ = '"';
    while (*c) {
        if (*c == '"' || *c == '\\') {
            *w++ = '\\';
            *w++ = (char)*c++;
        }
        else if (*c < 0x20) {
            w += apr_snprintf(w, 7, "\\u%04x", (unsigned)*c++);
        }
        else if (*c < 0x80) {
            *w++ = (char)*c++;
        }
        else if ((n = sbt_utf8_len(c)) > 0) {
            memcpy(w, c, n);
            w += n;
            c += n;
        }
        else {
            memcpy(w, "\\ufffd", 6);
            w += 6;
            c++;
        }
    }
    *w++ = '"';
    *w = '\0';
    return o;
}

static void sbt_json_counters(request_rec *r, const sbt_view_t *v)
{
    int i;

    for (i = 0; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "\"%s\": %" APR_UINT64_T_FMT ", ", sbt_fields[i].json,
                   v->v[i]);
    }
    ap_rprintf(r, "\"effective_sndbuf\": {\"unknown\": %" APR_UINT64_T_FMT,
               v->hist[SBT_HIST_UNKNOWN]);
    for (i = 0; i < SBT_HIST_SIZES; i++) {
        ap_rprintf(r, ", \"%" APR_UINT64_T_FMT "\": %" APR_UINT64_T_FMT,
                   sbt_bucket_min(i), v->hist[i]);
    }
    ap_rputs("}", r);
}

static void sbt_json_table(request_rec *r, sbt_slot_t *table)
{
    apr_array_header_t *views = sbt_read_table(r->pool, table);
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int i;

    ap_rputs("[", r);
    for (i = 0; i < views->nelts; i++) {
        ap_rprintf(r, "%s\n    {\"slot\": %d, \"name\": %s, "
                   "\"configured\": %s, ", i ? "," : "", v[i].slot,
                   sbt_json_str(r->pool, v[i].name),
                   v[i].configured ? "true" : "false");
        sbt_json_counters(r, &v[i]);
        ap_rputs("}", r);
    }
    ap_rputs(views->nelts ? "\n  ]" : "]", r);
}

static void sbt_page_json(request_rec *r)
{
    const sbt_kernel_t *k = &sbt_kernel;
    int i;

    ap_rprintf(r, "{\n  \"generation\": %u,\n  \"counters_since\": %"
               APR_TIME_T_FMT ",\n  \"slots\": %d,\n", sbt_my_gen,
               apr_time_sec(sbt_shm->since), SBT_STATUS_SLOTS);
    ap_rprintf(r, "  \"kernel\": {\"wmem_max\": %u, \"tcp_wmem\": "
               "[%u, %u, %u], \"so_buf_lock\": %s, \"tcp_info\": %s},\n",
               k->wmem_max, k->tcp_wmem[0], k->tcp_wmem[1], k->tcp_wmem[2],
               k->has_buf_lock ? "true" : "false",
               k->has_tcp_info ? "true" : "false");
    ap_rputs("  \"effective_sndbuf_buckets\": [", r);
    for (i = 0; i < SBT_HIST_SIZES; i++) {
        ap_rprintf(r, "%s%" APR_UINT64_T_FMT, i ? ", " : "",
                   sbt_bucket_min(i));
    }
    ap_rputs("],\n  \"vhosts\": ", r);
    sbt_json_table(r, sbt_shm->vhost);
    ap_rputs(",\n  \"networks\": ", r);
    sbt_json_table(r, sbt_shm->rule);
    ap_rputs("\n}\n", r);
}

/* ---------------------------------------------------------------- */
/* HTML                                                             */
/* ---------------------------------------------------------------- */

/** 4096 -> "4k", for column heads. */
static const char *sbt_size_label(apr_pool_t *p, apr_uint64_t bytes)
{
    if (bytes >= (1u << 30) && !(bytes % (1u << 30))) {
        return apr_psprintf(p, "%" APR_UINT64_T_FMT "g", bytes >> 30);
    }
    if (bytes >= (1u << 20) && !(bytes % (1u << 20))) {
        return apr_psprintf(p, "%" APR_UINT64_T_FMT "m", bytes >> 20);
    }
    if (bytes >= (1u << 10) && !(bytes % (1u << 10))) {
        return apr_psprintf(p, "%" APR_UINT64_T_FMT "k", bytes >> 10);
    }
    return apr_psprintf(p, "%" APR_UINT64_T_FMT, bytes);
}

static const char *sbt_bucket_label(apr_pool_t *p, int i)
{
    if (i == SBT_HIST_UNKNOWN) {
        return "unknown";
    }
    if (i == 0) {
        return apr_pstrcat(p, "&lt; ", sbt_size_label(p, sbt_bucket_min(1)),
                           NULL);
    }
    if (i == SBT_HIST_SIZES - 1) {
        return apr_pstrcat(p, sbt_size_label(p, sbt_bucket_min(i)), " +",
                           NULL);
    }
    return sbt_size_label(p, sbt_bucket_min(i));
}

static void sbt_html_kernel(request_rec *r)
{
    const sbt_kernel_t *k = &sbt_kernel;

    ap_rprintf(r, "<table>\n<tr><th>net.core.wmem_max</th><td>%u</td></tr>\n"
               "<tr><th>net.ipv4.tcp_wmem</th><td>%u %u %u</td></tr>\n"
               "<tr><th>SO_BUF_LOCK</th><td>%s</td></tr>\n"
               "<tr><th>TCP_INFO</th><td>%s</td></tr>\n</table>\n",
               k->wmem_max, k->tcp_wmem[0], k->tcp_wmem[1], k->tcp_wmem[2],
               k->has_buf_lock ? "available" : "missing",
               k->has_tcp_info ? "available" : "missing");
}

static void sbt_html_name(request_rec *r, const sbt_view_t *v)
{
    ap_rprintf(r, "<tr><td class=\"n\">%s%s</td>",
               ap_escape_html(r->pool, v->name),
               v->configured ? "" : " <i>(not configured now)</i>");
}

/** Two tables: the counters, then the histogram's non-empty columns. */
static void sbt_html_table(request_rec *r, const char *what,
                           apr_array_header_t *views)
{
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int used[SBT_HIST_BUCKETS] = {0};
    int i, j, nused = 0;

    if (!views->nelts) {
        ap_rputs("<p>None configured.</p>\n", r);
        return;
    }
    ap_rprintf(r, "<table border=\"1\">\n<tr><th rowspan=\"2\">%s</th>"
               "<th colspan=\"4\">requests by policy</th>", what);
    for (i = SBT_F_BYTES; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "<th rowspan=\"2\">%s</th>", sbt_fields[i].title);
    }
    ap_rputs("</tr>\n<tr>", r);
    for (i = SBT_F_NONE; i <= SBT_F_AUTO; i++) {
        ap_rprintf(r, "<th>%s</th>", sbt_fields[i].title);
    }
    ap_rputs("</tr>\n", r);
    for (i = 0; i < views->nelts; i++) {
        sbt_html_name(r, &v[i]);
        for (j = 0; j < SBT_F_COUNT; j++) {
            ap_rprintf(r, "<td>%" APR_UINT64_T_FMT "</td>", v[i].v[j]);
        }
        ap_rputs("</tr>\n", r);
        for (j = 0; j < SBT_HIST_BUCKETS; j++) {
            if (v[i].hist[j] && !used[j]) {
                used[j] = 1;
                nused++;
            }
        }
    }
    ap_rputs("</table>\n", r);

    ap_rprintf(r, "<p>Effective send buffer at the end of each response "
               "(bytes, buckets from a power of two to the next):</p>\n");
    if (!nused) {
        ap_rputs("<p>No responses yet.</p>\n", r);
        return;
    }
    ap_rprintf(r, "<table border=\"1\">\n<tr><th>%s</th>", what);
    for (j = 0; j < SBT_HIST_BUCKETS; j++) {
        if (used[j]) {
            ap_rprintf(r, "<th>%s</th>", sbt_bucket_label(r->pool, j));
        }
    }
    ap_rputs("</tr>\n", r);
    for (i = 0; i < views->nelts; i++) {
        sbt_html_name(r, &v[i]);
        for (j = 0; j < SBT_HIST_BUCKETS; j++) {
            if (used[j]) {
                ap_rprintf(r, "<td>%" APR_UINT64_T_FMT "</td>", v[i].hist[j]);
            }
        }
        ap_rputs("</tr>\n", r);
    }
    ap_rputs("</table>\n", r);
}

static void sbt_page_html(request_rec *r)
{
    ap_rputs(DOCTYPE_HTML_4_01 "<html><head>\n"
             "<title>mod_sndbuf_tune status</title>\n"
             "<style>td { text-align: right } td.n { text-align: left }"
             "</style>\n</head><body>\n<h1>mod_sndbuf_tune status for ", r);
    ap_rputs(ap_escape_html(r->pool, ap_get_server_name(r)), r);
    ap_rprintf(r, "</h1>\n<p>Counters since %s (the last start or full "
               "restart; graceful restarts keep them). Configuration "
               "generation %u. %d slots per table; what finds none is "
               "counted as " SBT_STATUS_OTHER_NAME ".</p>\n",
               ap_ht_time(r->pool, sbt_shm->since, "%Y-%m-%d %H:%M:%S %Z", 0),
               sbt_my_gen, SBT_STATUS_SLOTS);
    ap_rputs("<h2>Kernel limits read at startup</h2>\n", r);
    sbt_html_kernel(r);
    ap_rputs("<h2>Virtual hosts</h2>\n", r);
    sbt_html_table(r, "vhost", sbt_read_table(r->pool, sbt_shm->vhost));
    ap_rputs("<h2>SndbufTuneNetwork rules</h2>\n", r);
    sbt_html_table(r, "rule", sbt_read_table(r->pool, sbt_shm->rule));
    ap_rputs("<p>Also as <a href=\"?auto\">?auto</a> and "
             "<a href=\"?json\">?json</a>.</p>\n</body></html>\n", r);
}

/* ---------------------------------------------------------------- */
/* Handler and mod_status section                                   */
/* ---------------------------------------------------------------- */

/** @a word among the &- or ;-separated words of the query string. */
static int sbt_has_arg(const char *args, const char *word)
{
    apr_size_t len = strlen(word);
    const char *a = args;

    while (a && *a) {
        apr_size_t n = strcspn(a, "&;");

        if (!strncasecmp(a, word, len) && (n == len || a[len] == '=')) {
            return 1;
        }
        a += n;
        if (*a) {
            a++;
        }
    }
    return 0;
}

static int sbt_status_handler(request_rec *r)
{
    if (!r->handler || strcmp(r->handler, SBT_STATUS_HANDLER)) {
        return DECLINED;
    }
    r->allowed = (AP_METHOD_BIT << M_GET);
    if (r->method_number != M_GET) {
        return HTTP_METHOD_NOT_ALLOWED;
    }
    if (!sbt_shm) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, "%s: no counters, see "
                      "the error at startup", SBT_STATUS_HANDLER);
        return HTTP_SERVICE_UNAVAILABLE;
    }
    if (sbt_has_arg(r->args, "json")) {
        ap_set_content_type(r, "application/json");
        if (!r->header_only) {
            sbt_page_json(r);
        }
    }
    else if (sbt_has_arg(r->args, "auto")) {
        ap_set_content_type(r, "text/plain; charset=utf-8");
        if (!r->header_only) {
            sbt_page_auto(r);
        }
    }
    else {
        ap_set_content_type(r, "text/html; charset=utf-8");
        if (!r->header_only) {
            sbt_page_html(r);
        }
    }
    return OK;
}

/** mod_status: totals and kernel limits; the detail is on our page. */
static int sbt_mod_status_hook(request_rec *r, int flags)
{
    sbt_view_t total;
    int i;

    if (!sbt_shm) {
        return OK;
    }
    sbt_read_totals(r->pool, &total);
    if (flags & AP_STATUS_SHORT) {
        for (i = 0; i < SBT_F_COUNT; i++) {
            ap_rprintf(r, "SndbufTuneTotal%s: %" APR_UINT64_T_FMT "\n",
                       sbt_fields[i].key, total.v[i]);
        }
        sbt_auto_kernel(r, "SndbufTune");
        return OK;
    }
    ap_rputs("<hr />\n<h2>mod_sndbuf_tune</h2>\n<table border=\"1\">\n<tr>",
             r);
    for (i = 0; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "<th>%s%s</th>", i <= SBT_F_AUTO ? "requests " : "",
                   sbt_fields[i].title);
    }
    ap_rputs("</tr>\n<tr>", r);
    for (i = 0; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "<td>%" APR_UINT64_T_FMT "</td>", total.v[i]);
    }
    ap_rprintf(r, "</tr>\n</table>\n<p>All vhosts since %s; per vhost and "
               "rule on a <code>SetHandler " SBT_STATUS_HANDLER "</code> "
               "page.</p>\n",
               ap_ht_time(r->pool, sbt_shm->since, "%Y-%m-%d %H:%M:%S %Z", 0));
    sbt_html_kernel(r);
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
    ap_hook_handler(sbt_status_handler, NULL, NULL, APR_HOOK_MIDDLE);
    /* A section on mod_status's page; inert when mod_status is absent. */
    APR_OPTIONAL_HOOK(ap, status_hook, sbt_mod_status_hook, NULL, NULL,
                      APR_HOOK_MIDDLE);
}
