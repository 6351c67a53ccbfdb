/* SPDX-License-Identifier: Apache-2.0 */

/*
 * mod_sndbuf_tune.c: a per-vhost, per-location TCP send buffer.
 *
 * A TCP sender never has more than one send buffer in flight, so a fixed
 * SO_SNDBUF caps a download at sndbuf / RTT.  Core's SendBufferSize sets
 * one size for every socket, on the listener, and on Linux that also
 * switches kernel autotuning off.  This module decides per request,
 * once the name-based vhost (Host:/SNI) and the location are known:
 *
 *   SndbufTune <size>   fix the send buffer (setsockopt SO_SNDBUF)
 *   SndbufTune unset    leave it to kernel autotuning, undoing any lock
 *                       a listener or an earlier request left behind
 *
 * Nearest scope wins; where no SndbufTune applies the socket is not
 * touched.  HTTP/2 streams share their primary connection's socket, so
 * there the largest fixed size asked for wins for the connection's life.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"
#include "http_main.h"
#include "http_request.h"
#include "util_cfgtree.h"
#include "ap_mmn.h"

#include "apr_atomic.h"
#include "apr_lib.h"
#include "apr_strings.h"
#include "apr_thread_mutex.h"

#include "sndbuf_kernel.h"

module AP_MODULE_DECLARE_DATA sndbuf_tune_module;

/* Accepted SndbufTune sizes: below 4k TCP stalls on tiny windows, and
 * nothing sane needs a gigabyte per socket. */
#define SBT_SIZE_MIN      (4 * 1024)
#define SBT_SIZE_MAX      (1024 * 1024 * 1024)

/* The kernel's initial send buffer when tcp_wmem cannot be read. */
#define SBT_DEFAULT_INITIAL 16384

/* At most one warning per child per interval for failing socket calls;
 * the rest go to debug, so a broken kernel cannot flood the error log. */
#define SBT_WARN_INTERVAL 60

/* Per-request notes and environment variables, for LogFormat and
 * mod_headers. */
#define SBT_NOTE_POLICY    "SNDBUF_TUNE_POLICY"
#define SBT_NOTE_REQUESTED "SNDBUF_TUNE_REQUESTED"
#define SBT_NOTE_EFFECTIVE "SNDBUF_TUNE_EFFECTIVE"

typedef enum {
    SBT_POLICY_NONE = 0,        /* this scope says nothing: inherit */
    SBT_POLICY_UNSET,           /* "unset": kernel autotuning */
    SBT_POLICY_FIXED,           /* a size */
    SBT_POLICY_AUTO             /* reserved: RTT x bandwidth */
} sbt_policy_e;

static const char *const sbt_policy_names[] = {
    "none", "unset", "fixed", "auto"
};

typedef struct {
    /** What SndbufTune said here; NONE = not configured in this scope. */
    sbt_policy_e policy;
    /** Bytes to pass to setsockopt(SO_SNDBUF), for SBT_POLICY_FIXED. */
    int size;
    /** Where the directive stands, for the debug log. */
    const char *rule;
} sbt_dir_conf_t;

/** Who governs a socket's send buffer right now, as far as we know. */
typedef enum {
    SBT_SOCK_AUTOTUNED,         /* the kernel: no SO_SNDBUF lock */
    SBT_SOCK_INHERITED,         /* locked by core SendBufferSize */
    SBT_SOCK_FIXED              /* locked by us, at sbt_conn_t.requested */
} sbt_sock_state_e;

/** Per primary connection: what we last did to its socket. */
typedef struct {
    int fd;
    sbt_sock_state_e state;
    /** Our last SO_SNDBUF argument, when state is SBT_SOCK_FIXED. */
    int requested;
    /** getsockopt(SO_SNDBUF) after our last change; -1 unknown. */
    int effective;
} sbt_conn_t;

/* Process-wide facts, set in post_config before any child forks. */
static sbt_kernel_t sbt_kernel;
/** Core SendBufferSize, which every accepted socket inherits; 0 = none. */
static int sbt_core_sndbuf;
/** Largest size any SndbufTune asks for, to warn about wmem_max. */
static int sbt_largest_size;

#if APR_HAS_THREADS
/** Serialises HTTP/2 streams of one primary connection; per child. */
static apr_thread_mutex_t *sbt_shared_mutex;
#endif

static apr_uint32_t sbt_warned_at;
static apr_uint32_t sbt_failures_hushed;

/* ---------------------------------------------------------------- */
/* Configuration                                                    */
/* ---------------------------------------------------------------- */

static void *sbt_create_dir_conf(apr_pool_t *p, char *dir)
{
    (void)dir;
    /* apr_pcalloc: policy NONE, no rule. */
    return apr_pcalloc(p, sizeof(sbt_dir_conf_t));
}

static void *sbt_merge_dir_conf(apr_pool_t *p, void *basev, void *addv)
{
    const sbt_dir_conf_t *base = basev, *add = addv;
    sbt_dir_conf_t *conf = apr_palloc(p, sizeof(*conf));

    /* The whole decision travels together: a nearer scope's size must
     * never be combined with a farther scope's policy. */
    *conf = (add->policy != SBT_POLICY_NONE) ? *add : *base;
    return conf;
}

/**
 * Parse "<digits>[kKmMgG]" into bytes within SBT_SIZE_MIN..SBT_SIZE_MAX.
 * Returns NULL or why the value is bad.
 */
static const char *sbt_parse_size(const char *arg, int *bytes)
{
    apr_uint64_t v = 0, unit = 1;
    const char *p = arg;

    if (!apr_isdigit(*p)) {
        return "not a size";
    }
    for (; apr_isdigit(*p); p++) {
        v = v * 10 + (apr_uint64_t)(*p - '0');
        if (v > SBT_SIZE_MAX) {
            return "too large (at most 1g)";
        }
    }
    switch (*p) {
    case '\0':                      break;
    case 'k': case 'K': unit <<= 10; p++; break;
    case 'm': case 'M': unit <<= 20; p++; break;
    case 'g': case 'G': unit <<= 30; p++; break;
    default:
        return "unknown unit (use k, m or g)";
    }
    if (*p) {
        return "trailing characters after the size";
    }
    if (v * unit > SBT_SIZE_MAX) {
        return "too large (at most 1g)";
    }
    if (v * unit < SBT_SIZE_MIN) {
        return "too small (at least 4k)";
    }
    *bytes = (int)(v * unit);
    return NULL;
}

/** "<Location /bulk> at file:line", or "server config at file:line". */
static const char *sbt_rule_name(cmd_parms *cmd)
{
    const ap_directive_t *d = cmd->directive, *sect = d->parent;

    if (!sect) {
        return apr_psprintf(cmd->pool, "server config at %s:%d",
                            d->filename, d->line_num);
    }
    return apr_psprintf(cmd->pool, "%s %s at %s:%d", sect->directive,
                        sect->args, d->filename, d->line_num);
}

static const char *sbt_cmd_sndbuf_tune(cmd_parms *cmd, void *dconf,
                                       const char *arg)
{
    sbt_dir_conf_t *conf = dconf;
    const char *why;

    if (!strcasecmp(arg, "unset")) {
        conf->policy = SBT_POLICY_UNSET;
    }
    else if (!strcasecmp(arg, "auto")) {
        return apr_psprintf(cmd->pool, "%s: '%s' is not supported yet "
                            "(use unset or a size such as 256k)",
                            cmd->cmd->name, arg);
    }
    else if ((why = sbt_parse_size(arg, &conf->size)) != NULL) {
        return apr_psprintf(cmd->pool, "%s: '%s': %s; expected unset or a "
                            "size from 4k to 1g such as 256k",
                            cmd->cmd->name, arg, why);
    }
    else {
        conf->policy = SBT_POLICY_FIXED;
        if (conf->size > sbt_largest_size) {
            sbt_largest_size = conf->size;
        }
    }
    conf->rule = sbt_rule_name(cmd);
    return NULL;
}

static const command_rec sbt_cmds[] = {
    /* RSRC_CONF|ACCESS_CONF: server, <VirtualHost>, <Directory>,
     * <Location>, <Files>; deliberately not .htaccess, where any user
     * could pin server memory. */
    AP_INIT_TAKE1("SndbufTune", sbt_cmd_sndbuf_tune, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "unset (kernel autotuning) or a send buffer size, "
                  "e.g. 256k"),
    {NULL}
};

/* ---------------------------------------------------------------- */
/* Applying a policy to a socket                                    */
/* ---------------------------------------------------------------- */

static void sbt_log_failure(request_rec *r, int err, const char *what)
{
    apr_uint32_t now = (apr_uint32_t)apr_time_sec(apr_time_now());
    apr_uint32_t last = apr_atomic_read32(&sbt_warned_at);

    if ((last == 0 || now - last >= SBT_WARN_INTERVAL)
        && apr_atomic_cas32(&sbt_warned_at, now, last) == last) {
        apr_uint32_t hushed = apr_atomic_xchg32(&sbt_failures_hushed, 0);
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, APR_FROM_OS_ERROR(err), r,
                      "%s failed, socket left as it was (%u more such "
                      "failures logged only at debug level since the last "
                      "warning)", what, hushed);
        return;
    }
    apr_atomic_inc32(&sbt_failures_hushed);
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, APR_FROM_OS_ERROR(err), r,
                  "%s failed, socket left as it was", what);
}

static sbt_conn_t *sbt_conn_get(conn_rec *c)
{
    sbt_conn_t *st = ap_get_module_config(c->conn_config, &sndbuf_tune_module);

    if (!st) {
        st = apr_palloc(c->pool, sizeof(*st));
        st->fd = sbt_sock_fd(ap_get_conn_socket(c));
        st->state = sbt_core_sndbuf ? SBT_SOCK_INHERITED : SBT_SOCK_AUTOTUNED;
        st->requested = 0;
        st->effective = -1;
        ap_set_module_config(c->conn_config, &sndbuf_tune_module, st);
    }
    return st;
}

static void sbt_read_effective(sbt_conn_t *st)
{
    if (sbt_sock_get_sndbuf(st->fd, &st->effective)) {
        st->effective = -1;
    }
}

/**
 * Fix the send buffer at @a size.  On a shared (HTTP/2) socket a larger
 * size already in force is kept: another stream may still need it.
 * Returns what was done, for the debug log.
 */
static const char *sbt_apply_fixed(request_rec *r, sbt_conn_t *st, int size,
                                   int shared)
{
    int rv;

    if (st->state == SBT_SOCK_FIXED && st->requested == size) {
        return "unchanged";
    }
    if (shared && st->state == SBT_SOCK_FIXED && st->requested > size) {
        return "kept the larger size of another HTTP/2 stream";
    }
    if ((rv = sbt_sock_set_sndbuf(st->fd, size)) != 0) {
        sbt_log_failure(r, rv, apr_psprintf(r->pool,
                        "setsockopt(SO_SNDBUF, %d)", size));
        return "setsockopt failed";
    }
    st->state = SBT_SOCK_FIXED;
    st->requested = size;
    sbt_read_effective(st);
    if (sbt_kernel.wmem_max && (apr_uint32_t)size > sbt_kernel.wmem_max) {
        return "set, capped by net.core.wmem_max";
    }
    return "set";
}

/** Hand the send buffer (back) to kernel autotuning. */
static const char *sbt_apply_unset(request_rec *r, sbt_conn_t *st, int shared)
{
    int initial, restore_to, rv;

    if (st->state == SBT_SOCK_AUTOTUNED) {
        /* Autotuning moves the size under us: report the current one. */
        sbt_read_effective(st);
        return "autotuning";
    }
    if (shared && st->state == SBT_SOCK_FIXED) {
        return "kept the fixed size of another HTTP/2 stream";
    }
    if (!sbt_kernel.has_buf_lock) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "cannot give the send "
                      "buffer back to autotuning: this kernel lacks "
                      "SO_BUF_LOCK (Linux >= 5.15)");
        return "left locked (no SO_BUF_LOCK)";
    }
    initial = sbt_kernel.tcp_wmem[1] ? (int)sbt_kernel.tcp_wmem[1]
                                     : SBT_DEFAULT_INITIAL;
    restore_to = (st->state == SBT_SOCK_FIXED) ? st->requested
                                               : sbt_core_sndbuf;
    if ((rv = sbt_sock_release_sndbuf(st->fd, initial, restore_to)) != 0) {
        sbt_log_failure(r, rv, "clearing the SO_SNDBUF lock (SO_BUF_LOCK)");
        return "unlock failed";
    }
    st->state = SBT_SOCK_AUTOTUNED;
    st->requested = 0;
    sbt_read_effective(st);
    return "released to autotuning";
}

static void sbt_note(request_rec *r, const char *key, const char *val)
{
    apr_table_setn(r->notes, key, val);
    apr_table_setn(r->subprocess_env, key, val);
}

static void sbt_note_int(request_rec *r, const char *key, int v)
{
    sbt_note(r, key, v >= 0 ? apr_itoa(r->pool, v) : "-");
}

static void sbt_apply(request_rec *r, const sbt_dir_conf_t *conf,
                      conn_rec *primary, int shared)
{
    sbt_conn_t *st = sbt_conn_get(primary);
    const char *done;

    if (st->fd < 0) {
        done = "no socket";
        st->effective = -1;
    }
    else if (conf->policy == SBT_POLICY_FIXED) {
        done = sbt_apply_fixed(r, st, conf->size, shared);
    }
    else {
        done = sbt_apply_unset(r, st, shared);
    }
    sbt_note(r, SBT_NOTE_POLICY, sbt_policy_names[conf->policy]);
    sbt_note_int(r, SBT_NOTE_REQUESTED,
                 conf->policy == SBT_POLICY_FIXED ? conf->size : -1);
    sbt_note_int(r, SBT_NOTE_EFFECTIVE, st->effective);
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                  "SndbufTune %s (%s) for %s%s: %s, effective %d",
                  conf->policy == SBT_POLICY_FIXED
                      ? apr_itoa(r->pool, conf->size) : "unset",
                  conf->rule, r->server->server_hostname,
                  shared ? " (HTTP/2 stream)" : "", done, st->effective);
}

/* ---------------------------------------------------------------- */
/* Hooks                                                            */
/* ---------------------------------------------------------------- */

static int sbt_fixups(request_rec *r)
{
    const sbt_dir_conf_t *conf;
    conn_rec *c = r->connection;

    /* A subrequest's socket and policy are its main request's. */
    if (r->main) {
        return DECLINED;
    }
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 116)
    if (c->outgoing) {
        return DECLINED;
    }
#endif
    conf = ap_get_module_config(r->per_dir_config, &sndbuf_tune_module);
    if (conf->policy == SBT_POLICY_NONE) {
        sbt_note(r, SBT_NOTE_POLICY, "none");
        sbt_note(r, SBT_NOTE_REQUESTED, "-");
        sbt_note(r, SBT_NOTE_EFFECTIVE, "-");
        return DECLINED;
    }
    if (!c->master) {
        sbt_apply(r, conf, c, 0);
        return DECLINED;
    }
    /* HTTP/2: a secondary connection's socket is a dummy; the streams
     * of one primary connection run in parallel worker threads. */
#if APR_HAS_THREADS
    apr_thread_mutex_lock(sbt_shared_mutex);
#endif
    sbt_apply(r, conf, c->master, 1);
#if APR_HAS_THREADS
    apr_thread_mutex_unlock(sbt_shared_mutex);
#endif
    return DECLINED;
}

static int sbt_pre_config(apr_pool_t *pconf, apr_pool_t *plog,
                          apr_pool_t *ptemp)
{
    (void)pconf; (void)plog; (void)ptemp;
    /* Statics survive a restart's re-read of the configuration. */
    sbt_largest_size = 0;
    sbt_core_sndbuf = 0;
    return OK;
}

/** Core's SendBufferSize value (its own variable is private). */
static int sbt_find_core_sndbuf(const ap_directive_t *d)
{
    int found;

    for (; d; d = d->next) {
        if (!strcasecmp(d->directive, "SendBufferSize")) {
            return atoi(d->args);
        }
        if (d->first_child && (found = sbt_find_core_sndbuf(d->first_child))) {
            return found;
        }
    }
    return 0;
}

static void sbt_warn_kernel_limits(server_rec *s)
{
    if (sbt_core_sndbuf) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "core SendBufferSize %d locks the send buffer of every "
                     "accepted socket and switches kernel autotuning off; "
                     "SndbufTune replaces it per request (unset gives "
                     "autotuning back%s): consider removing SendBufferSize",
                     sbt_core_sndbuf, sbt_kernel.has_buf_lock ? ""
                     : ", but this kernel lacks SO_BUF_LOCK, so unset cannot");
    }
    if (sbt_kernel.wmem_max
        && (apr_uint32_t)sbt_largest_size > sbt_kernel.wmem_max) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "SndbufTune %d exceeds net.core.wmem_max (%u): the "
                     "kernel grants at most %u; raise the sysctl "
                     "net.core.wmem_max to get more", sbt_largest_size,
                     sbt_kernel.wmem_max, 2 * sbt_kernel.wmem_max);
    }
}

static int sbt_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                           apr_pool_t *ptemp, server_rec *s)
{
    (void)pconf; (void)plog; (void)ptemp;
    sbt_kernel_probe(&sbt_kernel);
    sbt_core_sndbuf = sbt_find_core_sndbuf(ap_conftree);
    /* Warn once per (re)start, not again in the preflight pass. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        sbt_warn_kernel_limits(s);
    }
    return OK;
}

static void sbt_child_init(apr_pool_t *pchild, server_rec *s)
{
#if APR_HAS_THREADS
    apr_status_t rv = apr_thread_mutex_create(&sbt_shared_mutex,
                                              APR_THREAD_MUTEX_DEFAULT,
                                              pchild);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                     "cannot create the HTTP/2 stream mutex");
    }
#else
    (void)pchild; (void)s;
#endif
}

static void sbt_register_hooks(apr_pool_t *p)
{
    (void)p;
    /* Reset per-read statics before the directives are parsed. */
    ap_hook_pre_config(sbt_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Kernel limits and core's SendBufferSize, once the tree is built. */
    ap_hook_post_config(sbt_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_child_init(sbt_child_init, NULL, NULL, APR_HOOK_MIDDLE);
    /* fixups: the first point where both the name-based vhost (Host: or
     * SNI, in r->server) and the final per-dir config (<Location>) are
     * known, and still before the handler writes a byte.  Not
     * pre_connection: there only the IP-based default vhost is known,
     * and proxy backend connections pass through it too.  FIRST, so the
     * notes exist before other fixups (mod_headers' early headers, ...)
     * look at them. */
    ap_hook_fixups(sbt_fixups, NULL, NULL, APR_HOOK_FIRST);
}

AP_DECLARE_MODULE(sndbuf_tune) = {
    STANDARD20_MODULE_STUFF,
    sbt_create_dir_conf,        /* per-directory config: the policy */
    sbt_merge_dir_conf,
    NULL,                       /* per-server config: none yet */
    NULL,
    sbt_cmds,
    sbt_register_hooks,
#if defined(AP_MODULE_FLAG_NONE)
    AP_MODULE_FLAG_NONE
#endif
};
