/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_config.c: the directives, their merge, and sbt_decide, which
 * turns them into a request's policy.
 */

#include "httpd.h"
#include "http_log.h"

#include "apr_hash.h"
#include "apr_strings.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/** A field a scope leaves to the scopes around it (mod_reqtimeout's
 *  UNSET), so that 0 and NONE can be said. */
#define SBT_UNSET (-1)

typedef struct {
    sbt_setting_t tune;         /**< SndbufTune; NONE: leave the socket */
    /** SBT_UNSET: no SndbufTune here.  1: in <Directory>, <Location> or
     *  <Files>, so it beats network rules (which beat vhost-wide lines). */
    int tune_in_section;
    /** From a .htaccess: its size is held to the limits' max, as auto's. */
    int tune_in_htaccess;
    apr_int64_t rate;           /**< SndbufTuneBandwidth; 0: measure */
    int limit_min;              /**< SndbufTuneLimits, set together */
    int limit_max;
    /** The max of a SndbufTuneLimits outside .htaccess, which no
     *  .htaccess raises the limits past. */
    int limit_cap;
} sbt_dir_conf_t;

/* Auto's default clamps: below the kernel's own initial 16k buffer
 * (tcp_wmem[1]) nothing is gained; above wmem_max the kernel refuses.
 * SBT_AUTO_MAX_FALLBACK only applies where wmem_max cannot be read. */
#define SBT_AUTO_MIN_DEFAULT   (8 * 1024)
#define SBT_AUTO_MAX_FALLBACK  (4 * 1024 * 1024)

/* The largest size any directive of the configuration being read asks
 * for, for the startup warning about net.core.wmem_max. */
static int sbt_largest_size;

int sbt_config_largest_size(void)
{
    return sbt_largest_size;
}

/* The server's own files run directives with RSRC_CONF or ACCESS_CONF in
 * cmd->override; a .htaccess only with AllowOverride's OR_* classes (in
 * its <Files> and <If> too), or none for one AllowOverrideList names. */
static int sbt_in_htaccess(const cmd_parms *cmd)
{
    return !(cmd->override & (RSRC_CONF | ACCESS_CONF));
}

/** Note @a size for the startup warning.  Not from a .htaccess: request
 *  threads read those, after the warning, and must write no global. */
static void sbt_note_size(const cmd_parms *cmd, int size)
{
    if (!sbt_in_htaccess(cmd) && size > sbt_largest_size) {
        sbt_largest_size = size;
    }
}

/** "<directive>: '<value>': <reason>": httpd does not name the directive
 *  or the offending token in a module's message for it. */
static const char *sbt_bad(cmd_parms *cmd, const char *value, const char *why)
{
    return apr_psprintf(cmd->pool, "%s: '%s': %s", cmd->cmd->name, value,
                        why);
}

/** "none", "unset", "auto" or a size, into @a t. */
static const char *sbt_parse_setting(cmd_parms *cmd, const char *arg,
                                     sbt_setting_t *t)
{
    int policy, size;
    const char *why = sbt_parse_policy(arg, &policy, &size);

    if (why) {
        return apr_pstrcat(cmd->pool, why, "; expected none, unset, auto or "
                           "a size from 4k to 1g such as 256k", NULL);
    }
    t->policy = (sbt_policy_e)policy;
    t->size = size;
    sbt_note_size(cmd, size);
    return NULL;
}

/** Where @a cmd's line stands, into @a t: rule_env @a env, or else
 *  "<Location /bulk>", "server config" or ".htaccess"; rule the same with
 *  " at file:line". */
static void sbt_rule_name(cmd_parms *cmd, const char *env, sbt_setting_t *t)
{
    const ap_directive_t *d = cmd->directive, *sect = d->parent;

    /* <Limit> and <LimitExcept> hold only access control to their
     * methods: a line in one applies to every method, so it is named
     * after the section around. */
    while (sect && !ap_cstr_casecmpn(sect->directive, "<Limit", 6)) {
        sect = sect->parent;
    }
    t->rule_env = env ? env
                : sect ? apr_pstrcat(cmd->pool, sect->directive, " ",
                                     sect->args, NULL)
                : sbt_in_htaccess(cmd) ? ".htaccess" : "server config";
    t->rule = apr_psprintf(cmd->pool, "%s at %s:%d", t->rule_env,
                           d->filename, d->line_num);
}

static const char *sbt_cmd_tune(cmd_parms *cmd, void *dconf, const char *arg)
{
    sbt_dir_conf_t *conf = dconf;
    const char *why;

    if ((why = sbt_parse_setting(cmd, arg, &conf->tune)) != NULL) {
        return sbt_bad(cmd, arg, why);
    }
    sbt_rule_name(cmd, NULL, &conf->tune);
    /* cmd->path is set inside <Directory>, <Location>, <Files>, <Proxy>
     * and <If> (<ElseIf>, <Else>), which httpd merges after all the
     * others: each is nearer than a network rule. */
    conf->tune_in_section = cmd->path != NULL;
    conf->tune_in_htaccess = sbt_in_htaccess(cmd);
    return NULL;
}

static const char *sbt_cmd_bandwidth(cmd_parms *cmd, void *dconf,
                                     const char *arg)
{
    sbt_dir_conf_t *conf = dconf;
    apr_uint64_t rate;
    const char *why;

    /* The default, said explicitly: a nearer scope can go back to it. */
    if (!ap_cstr_casecmp(arg, "measure")) {
        conf->rate = 0;
        return NULL;
    }
    if ((why = sbt_parse_rate(arg, &rate)) != NULL) {
        return sbt_bad(cmd, arg, why);
    }
    conf->rate = (apr_int64_t)rate;
    return NULL;
}

static const char *sbt_cmd_limits(cmd_parms *cmd, void *dconf,
                                  const char *min, const char *max)
{
    sbt_dir_conf_t *conf = dconf;
    const char *bad, *why = sbt_parse_limits(min, max, &conf->limit_min,
                                             &conf->limit_max, &bad);

    if (why) {
        return sbt_bad(cmd, bad, why);
    }
    /* A .htaccess may narrow the limits, never widen them: its max only
     * counts below the administrator's (sbt_decide). */
    if (!sbt_in_htaccess(cmd)) {
        conf->limit_cap = conf->limit_max;
    }
    sbt_note_size(cmd, conf->limit_max);
    return NULL;
}

/** "127" or "10.1/16" as the network other software reads it
 *  (127.0.0.0/8, 10.1.0.0/16), for a suggestion. */
static const char *sbt_full_form(apr_pool_t *p, const char *arg)
{
    const char *slash = strchr(arg, '/'), *c;
    apr_size_t len = slash ? (apr_size_t)(slash - arg) : strlen(arg);
    int parts = 1;

    for (c = arg; c < arg + len; c++) {
        parts += *c == '.';
    }
    return apr_psprintf(p, "%.*s%s/%s", (int)len, arg,
                        parts == 1 ? ".0.0.0" : parts == 2 ? ".0.0" : ".0",
                        slash ? slash + 1 : apr_itoa(p, 8 * parts));
}

/** The network of a SndbufTuneNetwork line, with a suggestion when its
 *  address is partial or its host bits are set: a network this directive
 *  takes ("10.1/8" is 10.0.0.0/8), or none where the prefix is bad too. */
static const char *sbt_cmd_cidr(cmd_parms *cmd, const char *arg,
                                sbt_cidr_t *net)
{
    const char *why = sbt_parse_cidr(arg, net), *meant = NULL, *again;
    char text[SBT_CIDR_STRLEN];

    if (why == sbt_parse_cidr_partial) {
        again = sbt_parse_cidr(sbt_full_form(cmd->pool, arg), net);
        if (!again || again == sbt_parse_cidr_host_bits) {
            meant = sbt_format_cidr(net, text, sizeof(text));
        }
    }
    else if (why == sbt_parse_cidr_host_bits) {
        meant = sbt_format_cidr(net, text, sizeof(text));
    }
    return meant ? apr_psprintf(cmd->pool, "%s: did you mean %s?", why, meant)
                 : why;
}

static const char *sbt_cmd_network(cmd_parms *cmd, void *dummy,
                                   const char *cidr, const char *policy,
                                   const char *rate)
{
    sbt_srv_conf_t *sconf = ap_get_module_config(cmd->server->module_config,
                                                 &sndbuf_tune_module);
    sbt_network_t *net = apr_pcalloc(cmd->pool, sizeof(*net));
    const sbt_network_t *dup;
    const char *why, *bad = cidr;

    (void)dummy;
    /* Refused there, as httpd does, even when AllowOverrideList names it:
     * a request would add a rule from its own pool to the server's table. */
    if (sbt_in_htaccess(cmd)) {
        return apr_pstrcat(cmd->pool, cmd->cmd->name, " not allowed here",
                           NULL);
    }
    if ((why = sbt_cmd_cidr(cmd, cidr, &net->net)) == NULL) {
        bad = policy;
        why = sbt_parse_setting(cmd, policy, &net->tune);
    }
    if (!why && rate) {
        bad = rate;
        why = (net->tune.policy != SBT_POLICY_AUTO)
              ? "a rate only goes with auto"
              : sbt_parse_rate(rate, &net->tune.rate);
    }
    if (why) {
        return sbt_bad(cmd, bad, why);
    }
    sbt_rule_name(cmd, apr_pstrcat(cmd->pool, "SndbufTuneNetwork ", cidr,
                                   NULL), &net->tune);
    if (!sconf->rules) {
        sconf->rules = sbt_rules_make(cmd->pool);
    }
    if ((dup = sbt_rules_add(sconf->rules, net)) != NULL) {
        return apr_psprintf(cmd->pool, "%s: '%s': the same network as %s",
                            cmd->cmd->name, cidr, dup->tune.rule);
    }
    return NULL;
}

const command_rec sbt_cmds[] = {
    /* In no AllowOverride class, where any user could pin server memory;
     * a .htaccess let through by AllowOverrideList stays under the max of
     * the SndbufTuneLimits in force outside it. */
    AP_INIT_TAKE1("SndbufTune", sbt_cmd_tune, NULL, RSRC_CONF | ACCESS_CONF,
                  "none (leave the socket alone), unset (kernel "
                  "autotuning), auto (RTT x bandwidth) or a send buffer "
                  "size such as 256k"),
    AP_INIT_TAKE1("SndbufTuneBandwidth", sbt_cmd_bandwidth, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "path rate auto assumes, e.g. 30mbit, or measure (the "
                  "default)"),
    AP_INIT_TAKE2("SndbufTuneLimits", sbt_cmd_limits, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "smallest and largest size auto may choose, e.g. 16k 4m"),
    /* Client networks belong to a server, not to a path. */
    AP_INIT_TAKE23("SndbufTuneNetwork", sbt_cmd_network, NULL, RSRC_CONF,
                   "client network (CIDR), then none, unset, auto or a "
                   "size, and for auto optionally a rate"),
    {NULL, {NULL}, NULL, 0, 0, NULL}    /* every field: clang -Wextra */
};

void *sbt_create_dir_conf(apr_pool_t *p, char *dir)
{
    sbt_dir_conf_t *conf = apr_pcalloc(p, sizeof(*conf));

    (void)dir;
    /* Nothing said here: every scope around may still decide. */
    conf->tune_in_section = SBT_UNSET;
    conf->rate = SBT_UNSET;
    conf->limit_min = conf->limit_max = conf->limit_cap = SBT_UNSET;
    return conf;
}

void *sbt_merge_dir_conf(apr_pool_t *p, void *basev, void *addv)
{
    const sbt_dir_conf_t *base = basev, *add = addv;
    /* A SndbufTune line travels whole (a nearer scope's size never
     * combines with a farther scope's policy), and so do the limits. */
    const sbt_dir_conf_t *tune = add->tune_in_section != SBT_UNSET ? add
                                                                   : base;
    const sbt_dir_conf_t *limits = add->limit_max != SBT_UNSET ? add : base;
    sbt_dir_conf_t *conf = apr_pmemdup(p, tune, sizeof(*conf));

    conf->rate = add->rate != SBT_UNSET ? add->rate : base->rate;
    conf->limit_min = limits->limit_min;
    conf->limit_max = limits->limit_max;
    conf->limit_cap = add->limit_cap != SBT_UNSET ? add->limit_cap
                                                  : base->limit_cap;
    return conf;
}

void *sbt_create_srv_conf(apr_pool_t *p, server_rec *s)
{
    (void)s;
    return apr_pcalloc(p, sizeof(sbt_srv_conf_t));
}

void *sbt_merge_srv_conf(apr_pool_t *p, void *basev, void *addv)
{
    const sbt_srv_conf_t *base = basev, *add = addv;
    sbt_srv_conf_t *conf = apr_pcalloc(p, sizeof(*conf));

    /* Every vhost points at the main server's rules rather than copying
     * them: a thousand vhosts cost one table. */
    conf->rules = add->rules;
    conf->base_rules = base->rules;
    return conf;
}

/** A .htaccess size above the limits' max comes down to it, and the rule
 *  says so: the administrator's SndbufTuneLimits bounds what any site
 *  owner's .htaccess can pin. */
static void sbt_clamp_htaccess(request_rec *r, sbt_decision_t *d)
{
    const char *clamp;

    if (d->tune.policy != SBT_POLICY_FIXED || d->tune.size <= d->limit_max) {
        return;
    }
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SndbufTune %d from %s: "
                  "clamped to %d, the maximum of SndbufTuneLimits",
                  d->tune.size, d->tune.rule, d->limit_max);
    clamp = apr_psprintf(r->pool, ", clamped to %d by SndbufTuneLimits",
                         d->limit_max);
    d->tune.rule = apr_pstrcat(r->pool, d->tune.rule, clamp, NULL);
    d->tune.rule_env = apr_pstrcat(r->pool, d->tune.rule_env, clamp, NULL);
    d->tune.size = d->limit_max;
    d->clamped = 1;
}

int sbt_decide(request_rec *r, sbt_decision_t *d)
{
    const sbt_dir_conf_t *dc = ap_get_module_config(r->per_dir_config,
                                                    &sndbuf_tune_module);
    const sbt_srv_conf_t *sc = ap_get_module_config(r->server->module_config,
                                                    &sndbuf_tune_module);
    const sbt_network_t *net = NULL;
    int cap;

    /* useragent_addr: the client as mod_remoteip sees it, when loaded;
     * otherwise the connection's peer. */
    if (dc->tune_in_section != 1 && (sc->rules || sc->base_rules)
        && r->useragent_addr) {
        net = sbt_rules_match(sc->rules, sc->base_rules, r->useragent_addr);
    }
    d->network = net;
    d->clamped = 0;
    d->tune = net ? net->tune : dc->tune;
    if (d->tune.policy == SBT_POLICY_NONE) {
        return 0;
    }
    if (!d->tune.rate && dc->rate != SBT_UNSET) {
        d->tune.rate = (apr_uint64_t)dc->rate;
    }
    cap = dc->limit_cap != SBT_UNSET ? dc->limit_cap
        : sbt_kernel.wmem_max ? (int)sbt_kernel.wmem_max
        : SBT_AUTO_MAX_FALLBACK;
    d->limit_max = dc->limit_max != SBT_UNSET && dc->limit_max < cap
                   ? dc->limit_max : cap;
    d->limit_min = dc->limit_max != SBT_UNSET ? dc->limit_min
                                              : SBT_AUTO_MIN_DEFAULT;
    if (d->limit_min > d->limit_max) {
        d->limit_min = d->limit_max;
    }
    if (!net && dc->tune_in_htaccess) {
        sbt_clamp_htaccess(r, d);
    }
    return 1;
}

static int sbt_config_pre_config(apr_pool_t *pconf, apr_pool_t *plog,
                                 apr_pool_t *ptemp)
{
    (void)pconf; (void)plog; (void)ptemp;
    /* A restart reads the configuration again from scratch. */
    sbt_largest_size = 0;
    return OK;
}

/** mod_remoteip's directives among one server's own lines (mod_remoteip
 *  keeps its configuration to itself; the tree of directives is public). */
typedef struct {
    const char *header;         /**< RemoteIPHeader's header, or NULL */
    int proxies;                /**< a RemoteIP*Proxy* line */
} sbt_remoteip_seen_t;

static void sbt_remoteip_scan(const ap_directive_t *d,
                              sbt_remoteip_seen_t *seen)
{
    for (; d; d = d->next) {
        if (!ap_cstr_casecmp(d->directive, "RemoteIPHeader")) {
            seen->header = d->args;
        }
        /* RemoteIPInternalProxy, RemoteIPTrustedProxy and their *List */
        else if (!ap_cstr_casecmpn(d->directive, "RemoteIPInternalProxy", 21)
                 || !ap_cstr_casecmpn(d->directive, "RemoteIPTrustedProxy",
                                      20)) {
            seen->proxies = 1;
        }
    }
}

/** Every top-level <VirtualHost> section by "file:line", where a
 *  server_rec says it was defined (the first, should two share one):
 *  one walk of the tree, however many vhosts look themselves up. */
static apr_hash_t *sbt_vhost_sections(apr_pool_t *p)
{
    apr_hash_t *sections = apr_hash_make(p);
    const ap_directive_t *d;
    const char *key;

    for (d = ap_conftree; d; d = d->next) {
        if (ap_cstr_casecmp(d->directive, "<VirtualHost")) {
            continue;
        }
        key = apr_psprintf(p, "%s:%d", d->filename, d->line_num);
        if (!apr_hash_get(sections, key, APR_HASH_KEY_STRING)) {
            apr_hash_set(sections, key, APR_HASH_KEY_STRING, d);
        }
    }
    return sections;
}

/** The <VirtualHost> section @a s was defined by, or NULL (the main
 *  server). */
static const ap_directive_t *sbt_vhost_section(apr_pool_t *p,
                                               apr_hash_t *sections,
                                               const server_rec *s)
{
    if (!s->defn_name) {
        return NULL;
    }
    return apr_hash_get(sections, apr_psprintf(p, "%s:%u", s->defn_name,
                                               s->defn_line_number),
                        APR_HASH_KEY_STRING);
}

/* With RemoteIPHeader and no proxy listed, mod_remoteip believes the
 * header from every peer, so any client picks its SndbufTuneNetwork rule
 * with one header line.  mod_remoteip's merge: a vhost's header or proxy
 * list, if it has one, else the main server's. */
void sbt_config_warn_remoteip(apr_pool_t *ptemp, server_rec *main_s)
{
    sbt_remoteip_seen_t top = {NULL, 0};
    apr_hash_t *sections;
    server_rec *s;

    if (!ap_find_linked_module("mod_remoteip.c")) {
        return;
    }
    sbt_remoteip_scan(ap_conftree, &top);
    sections = sbt_vhost_sections(ptemp);
    for (s = main_s; s; s = s->next) {
        const sbt_srv_conf_t *sc = ap_get_module_config(s->module_config,
                                                        &sndbuf_tune_module);
        const ap_directive_t *sect;
        sbt_remoteip_seen_t own = {NULL, 0};

        if (!sc->rules && !sc->base_rules) {
            continue;
        }
        sect = sbt_vhost_section(ptemp, sections, s);
        sbt_remoteip_scan(sect ? sect->first_child : NULL, &own);
        if (!own.header) {
            own.header = top.header;
        }
        if (own.header && !own.proxies && !top.proxies) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                         "SndbufTuneNetwork: %s%s: RemoteIPHeader %s "
                         "without RemoteIPInternalProxy or "
                         "RemoteIPTrustedProxy: any client chooses the "
                         "network rule it gets by sending that header (see "
                         "SndbufTuneNetwork in " SBT_DOCS "directives.md)",
                         sect ? "vhost " : "the main server",
                         sect && s->server_hostname ? s->server_hostname
                                                    : "", own.header);
        }
    }
}

void sbt_config_register_hooks(void)
{
    /* Before the directives are read. */
    ap_hook_pre_config(sbt_config_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
}
