/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_status_page.c: sndbuf_status.c's counters shown: SetHandler
 * sndbuf-tune-status in HTML or ?auto (mod_status's "Key: value"),
 * sndbuf-tune-metrics for Prometheus, and totals on mod_status's page.
 */

#include <stddef.h>              /* offsetof */

#include "httpd.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"

#include "apr_atomic.h"
#include "apr_optional_hooks.h"
#include "apr_strings.h"

#include "mod_status.h"

#include "sndbuf_status.h"

APLOG_USE_MODULE(sndbuf_tune);

/* Their names in each format; docs/status.md explains them.  The four
 * policies are one Prometheus metric, with their title as its label. */
static const struct {
    const char *key;            /**< ?auto, after the slot's prefix */
    const char *title;          /**< HTML column */
    const char *metric;         /**< Prometheus, after the table's prefix */
    const char *help;
} sbt_fields[SBT_F_COUNT] = {
    {"RequestsNone",       "none", NULL, NULL},
    {"RequestsUnset",      "unset", NULL, NULL},
    {"RequestsFixed",      "fixed", NULL, NULL},
    {"RequestsAuto",       "auto", NULL, NULL},
    {"BytesSent",          "bytes sent", "sent_bytes_total",
     "Response body bytes sent, as %B logs them."},
    {"SndbufLimited",      "send-buffer-limited",
     "sndbuf_limited_responses_total", "Responses limited by the send "
     "buffer for more than 10% of their time."},
    {"Clamped",            "clamped", "clamped_responses_total",
     "Responses whose wanted size was cut (wmem_max, SndbufTuneLimits, "
     "2 x MSS)."},
    {"SetsockoptFailures", "setsockopt failures",
     "socket_call_failures_total", "Socket calls that failed (SO_SNDBUF, "
     "SO_BUF_LOCK, TCP_INFO, SO_MAX_PACING_RATE)."}
};

/** The bound of histogram bucket @a i as a power of two; the last bucket
 *  has none: its lower bound, the one before. */
static int sbt_bucket_shift(int i)
{
    return SBT_HIST_FIRST_SHIFT + i - (i == SBT_HIST_SIZES - 1);
}

/* ---- Reading ---- */

/** One slot's counters as read, for one page. */
typedef struct {
    int slot;
    const char *name;           /**< as shown (sbt_show_name) */
    int configured;             /**< named by this process's configuration */
    sbt_counters_t c;
} sbt_view_t;

/** Length of the well-formed UTF-8 sequence at @a s, 0 if none.  After
 *  E0, ED, F0 and F4 the next byte's range narrows: no overlongs,
 *  surrogates or values past U+10FFFF (RFC 3629). */
static int sbt_utf8_len(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2
            : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;
    unsigned char lo = s[0] == 0xe0 ? 0xa0 : s[0] == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = s[0] == 0xed ? 0x9f : s[0] == 0xf4 ? 0x8f : 0xbf;
    int i;

    if (n > 1 && (s[1] < lo || s[1] > hi)) {
        return 0;
    }
    for (i = 2; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return n;
}

/** @a s as one line of UTF-8 that no other name shows as, though names
 *  from the configuration (ServerName, an Include's file name) may hold
 *  any byte.  Bytes outside well-formed UTF-8, control characters (C0,
 *  DEL, C1), "%" and a leading "(" (names in parentheses are the module's
 *  own) become %XX, which reads back.  Each format escapes its own. */
static const char *sbt_show_name(apr_pool_t *p, const char *s)
{
    const unsigned char *c = (const unsigned char *)s;
    char *o = apr_palloc(p, strlen(s) * 3 + 1), *w = o;

    while (*c) {
        int n = sbt_utf8_len(c);

        /* 0xc2 0x80..0x9f: the C1 controls, U+0080..U+009F. */
        if (n == 0 || *c < 0x20 || *c == 0x7f || *c == '%'
            || (*c == '(' && c == (const unsigned char *)s)
            || (*c == 0xc2 && c[1] < 0xa0)) {
            for (n = n ? n : 1; n > 0; n--, c++) {
                w += apr_snprintf(w, 4, "%%%02X", *c);
            }
        }
        else {
            memcpy(w, c, n);
            w += n;
            c += n;
        }
    }
    *w = '\0';
    return o;
}

/** Add a slot's counters, each read atomically, to @a to's: all alike,
 *  as 64-bit words. */
static void sbt_add_counters(sbt_counters_t *to, sbt_counters_t *from)
{
    int i;

    for (i = 0; i < (int)(sizeof(*to) / sizeof(apr_uint64_t)); i++) {
        ((apr_uint64_t *)to)[i] +=
            apr_atomic_read64(&((apr_uint64_t *)from)[i]);
    }
}

/** The slots in use in @a table: named ones, and "(other)" if anything
 *  maps or was counted there. */
static apr_array_header_t *sbt_read_table(apr_pool_t *p, sbt_slot_t *table)
{
    apr_array_header_t *views = apr_array_make(p, 16, sizeof(sbt_view_t));
    char name[SBT_NAME_LEN];
    int i;

    for (i = 0; i <= SBT_STATUS_OTHER; i++) {
        sbt_view_t *v;

        if (!table[i].seen_gen && i != SBT_STATUS_OTHER) {
            continue;
        }
        /* The parent may be renaming a departed slot right now: copy at
         * most the buffer, whose last byte is never written. */
        apr_cpystrn(name, table[i].name, sizeof(name));
        v = apr_array_push(views);
        *v = (sbt_view_t){.slot = i,
                          .configured = table[i].seen_gen == sbt_my_gen};
        v->name = i == SBT_STATUS_OTHER ? SBT_STATUS_OTHER_NAME
                                        : sbt_show_name(p, name);
        sbt_add_counters(&v->c, &table[i].c);
        if (!table[i].seen_gen && !v->c.v[SBT_F_NONE] && !v->c.v[SBT_F_UNSET]
            && !v->c.v[SBT_F_FIXED] && !v->c.v[SBT_F_AUTO]) {
            apr_array_pop(views);
        }
    }
    return views;
}

/** The vhost slots this configuration names added up, as one view: a
 *  request counts in one.  A name no longer configured is left out (its
 *  counts stay on the sndbuf-tune-status page until its slot is needed),
 *  and so is a free slot, which a child of a generation before the last
 *  full restart may still add to. */
static apr_array_header_t *sbt_read_totals(apr_pool_t *p)
{
    apr_array_header_t *one = apr_array_make(p, 1, sizeof(sbt_view_t));
    sbt_view_t *total = apr_array_push(one);
    int i;

    *total = (sbt_view_t){.name = "all vhosts", .configured = 1};
    for (i = 0; i <= SBT_STATUS_OTHER; i++) {
        if (sbt_shm->vhost[i].seen_gen == sbt_my_gen) {
            sbt_add_counters(&total->c, &sbt_shm->vhost[i].c);
        }
    }
    return one;
}

/* ---- What limited the large responses (sndbuf_triage.c) ---- */

/** The words for view @a v (a rule's when @a rule); with @a paths, where
 *  core's SendBufferSize stands (file:line), not on mod_status's page. */
static const char *sbt_triage_text(apr_pool_t *p, const sbt_view_t *v,
                                   int rule, int paths)
{
    const char *at = paths ? sbt_conn_sendbuffersize_line() : NULL;
    char words[1024];

    /* The file names shown as every name is: no control byte. */
    sbt_triage_words(words, sizeof(words), &v->c.triage,
                     sbt_kernel.has_chrono, at ? sbt_show_name(p, at) : NULL,
                     rule ? apr_pstrcat(p, "SndbufTuneNetwork ", v->name, NULL)
                          : NULL);
    return apr_pstrdup(p, words);
}

/* ---- ?auto: mod_status's "Key: value" lines ---- */

static void sbt_auto_counters(request_rec *r, const char *prefix,
                              const sbt_view_t *v)
{
    int i;

    for (i = 0; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "%s%s: %" APR_UINT64_T_FMT "\n", prefix,
                   sbt_fields[i].key, v->c.v[i]);
    }
    ap_rprintf(r, "%sEffectiveUnknown: %" APR_UINT64_T_FMT "\n", prefix,
               v->c.hist[SBT_HIST_UNKNOWN]);
    for (i = 0; i < SBT_HIST_SIZES; i++) {
        ap_rprintf(r, "%sEffective%s%" APR_UINT64_T_FMT ": %" APR_UINT64_T_FMT
                   "\n", prefix, i < SBT_HIST_SIZES - 1 ? "" : "Above",
                   (apr_uint64_t)1 << sbt_bucket_shift(i), v->c.hist[i]);
    }
    ap_rprintf(r, "%sEffectiveSum: %" APR_UINT64_T_FMT "\n", prefix,
               v->c.hist_sum);
}

/** ?auto: @a v's triage as "<prefix>Key: value" lines; the kernel's
 *  figures "unknown" where it has no chronographs (never 0). */
static void sbt_auto_triage(request_rec *r, const char *prefix,
                            const sbt_view_t *v)
{
    static const char *const key[SBT_LIMITS] = {
        "Sndbuf", "Rwnd", "Network", "App"
    };
    const sbt_triage_sum_t *t = &v->c.triage;
    int i;

    ap_rprintf(r, "%sLargeResponses: %" APR_UINT64_T_FMT "\n", prefix,
               t->large);
    for (i = 0; i < 2 * SBT_LIMITS; i++) {
        ap_rprintf(r, "%s%s%s: %s\n", prefix, i < SBT_LIMITS ? "LimitedBy"
                   : "SendMs", key[i % SBT_LIMITS], !sbt_kernel.has_chrono
                   ? "unknown"
                   : apr_psprintf(r->pool, "%" APR_UINT64_T_FMT, i < SBT_LIMITS
                                  ? t->by[i] : t->us[i - SBT_LIMITS] / 1000));
    }
    /* The most frequent: "-" before any, "unknown" where the kernel
     * cannot tell. */
    i = sbt_triage_top(t);
    ap_rprintf(r, "%sVerdict: %s\n", prefix,
               !sbt_kernel.has_chrono && t->large
               ? sbt_limit_names[SBT_VERDICT_UNKNOWN]
               : i < 0 ? "-" : sbt_limit_names[i]);
}

/** Each slot in use of @a table, its name and triage; with @a counters
 *  (our page) the rest of its counters too, not on mod_status's. */
static void sbt_auto_table(request_rec *r, const char *what,
                           sbt_slot_t *table, int counters)
{
    apr_array_header_t *views = sbt_read_table(r->pool, table);
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int i;

    for (i = 0; i < views->nelts; i++) {
        const char *prefix = apr_psprintf(r->pool, "SndbufTune%s[%d]", what,
                                          v[i].slot);

        ap_rprintf(r, "%sName: %s\n", prefix, v[i].name);
        if (counters) {
            ap_rprintf(r, "%sConfigured: %d\n", prefix, v[i].configured);
            sbt_auto_counters(r, prefix, &v[i]);
        }
        sbt_auto_triage(r, prefix, &v[i]);
    }
}

static void sbt_page_auto(request_rec *r)
{
    ap_rprintf(r, "SndbufTuneGeneration: %u\nSndbufTuneCountersSince: %"
               APR_TIME_T_FMT "\nSndbufTuneSlots: %d\n", sbt_my_gen,
               apr_time_sec(sbt_shm->since), SBT_STATUS_SLOTS);
    ap_rputs(sbt_kernel_show(r->pool, SBT_SHOW_AUTO), r);
    sbt_auto_table(r, "Vhost", sbt_shm->vhost, 1);
    sbt_auto_table(r, "Network", sbt_shm->rule, 1);
}

/* ---- HTML ---- */

/** Bucket @a i's column head: "4k" ... "1g", "&gt; 1g", "unknown". */
static const char *sbt_bucket_label(apr_pool_t *p, int i)
{
    int shift = sbt_bucket_shift(i);

    if (i == SBT_HIST_UNKNOWN) {
        return "unknown";
    }
    return apr_psprintf(p, "%s%d%c", i == SBT_HIST_SIZES - 1 ? "&gt; " : "",
                        1 << (shift % 10), "kmg"[shift / 10 - 1]);
}

/** A row a slot: its counters, then the buckets that any row uses. */
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
    for (j = 0; j < SBT_HIST_BUCKETS; j++) {
        for (i = 0; i < views->nelts && !used[j]; i++) {
            used[j] = v[i].c.hist[j] != 0;
        }
        nused += used[j];
    }
    ap_rprintf(r, "<table border=\"1\">\n<tr><th rowspan=\"2\">%s</th>"
               "<th colspan=\"4\">requests by policy</th>", what);
    for (i = SBT_F_BYTES; i < SBT_F_COUNT; i++) {
        ap_rprintf(r, "<th rowspan=\"2\">%s</th>", sbt_fields[i].title);
    }
    if (nused) {
        ap_rprintf(r, "<th colspan=\"%d\">responses by effective send "
                   "buffer at their end (bytes, up to)</th>", nused);
    }
    ap_rputs("</tr>\n<tr>", r);
    for (i = SBT_F_NONE; i <= SBT_F_AUTO; i++) {
        ap_rprintf(r, "<th>%s</th>", sbt_fields[i].title);
    }
    for (j = 0; j < SBT_HIST_BUCKETS; j++) {
        if (used[j]) {
            ap_rprintf(r, "<th>%s</th>", sbt_bucket_label(r->pool, j));
        }
    }
    ap_rputs("</tr>\n", r);
    for (i = 0; i < views->nelts; i++) {
        ap_rprintf(r, "<tr><td class=\"n\">%s%s</td>",
                   ap_escape_html(r->pool, v[i].name),
                   v[i].configured ? "" : " <i>(not configured now)</i>");
        for (j = 0; j < SBT_F_COUNT; j++) {
            ap_rprintf(r, "<td>%" APR_UINT64_T_FMT "</td>", v[i].c.v[j]);
        }
        for (j = 0; j < SBT_HIST_BUCKETS; j++) {
            if (used[j]) {
                ap_rprintf(r, "<td>%" APR_UINT64_T_FMT "</td>",
                           v[i].c.hist[j]);
            }
        }
        ap_rputs("</tr>\n", r);
    }
    ap_rputs("</table>\n", r);
}

/** The share of each limit in @a t's time as a bar of four colours (HTML
 *  and inline CSS: no script, no file), with the shares in words. */
static const char *sbt_html_bar(apr_pool_t *p, const sbt_triage_sum_t *t)
{
    static const char *const colour[SBT_LIMITS] = {
        "#c0392b", "#e67e22", "#2980b9", "#95a5a6"
    };
    apr_uint64_t total = 0;
    const char *bar = "", *words = "";
    int i;

    if (!sbt_kernel.has_chrono) {
        return "unknown";
    }
    for (i = 0; i < SBT_LIMITS; i++) {
        total += t->us[i];
    }
    if (!total) {
        return "-";
    }
    for (i = 0; i < SBT_LIMITS; i++) {
        double share = 100.0 * t->us[i] / total;

        if (t->us[i]) {
            bar = apr_psprintf(p, "%s<span title=\"%s %.0f%%\" style=\""
                               "display:inline-block;height:1em;width:%.1f%%;"
                               "background:%s\"></span>", bar,
                               sbt_limit_names[i], share, share, colour[i]);
        }
        words = apr_psprintf(p, "%s%s%s %.0f%%", words, i ? " &middot; " : "",
                             sbt_limit_names[i], share);
    }
    return apr_psprintf(p, "<div style=\"width:16em;border:1px solid #444;"
                        "line-height:0;white-space:nowrap\">%s</div>"
                        "<small>%s</small>", bar, words);
}

/** What limited the large responses of each of @a views, a row each: the
 *  time by limit as a bar and the verdict in words; @a rule: the views
 *  are SndbufTuneNetwork rules; @a paths: sbt_triage_text's. */
static void sbt_html_triage(request_rec *r, const char *what,
                            apr_array_header_t *views, int rule, int paths)
{
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    int i;

    if (!views->nelts) {
        return;
    }
    ap_rprintf(r, "<table border=\"1\">\n<tr><th>%s</th><th>large "
               "responses</th><th>their time by limit</th><th>verdict</th>"
               "</tr>\n", what);
    for (i = 0; i < views->nelts; i++) {
        ap_rprintf(r, "<tr><td class=\"n\">%s%s</td><td>%" APR_UINT64_T_FMT
                   "</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                   "</tr>\n", ap_escape_html(r->pool, v[i].name),
                   v[i].configured ? "" : " <i>(not configured now)</i>",
                   v[i].c.triage.large, sbt_html_bar(r->pool, &v[i].c.triage),
                   ap_escape_html(r->pool, sbt_triage_text(r->pool, &v[i],
                                                           rule, paths)));
    }
    ap_rputs("</table>\n", r);
}

/** The triage of every vhost and rule, for both pages: under heading
 *  @a h, with file paths (sbt_triage_text) only on our own. */
static void sbt_html_triage_all(request_rec *r, const char *h, int paths)
{
    ap_rprintf(r, "<%s>What limited the large responses</%s>\n<p>Responses "
               "larger than the send buffer in force: the kernel's time "
               "for each (sndbuf: blocked by the send buffer; rwnd: by the "
               "client's window; network: the rest of the time it had "
               "data to send; app: the time it had none), and the verdict "
               "(" SBT_DOCS "status.md).</p>\n", h, h);
    sbt_html_triage(r, "vhost", sbt_read_table(r->pool, sbt_shm->vhost), 0,
                    paths);
    sbt_html_triage(r, "rule", sbt_read_table(r->pool, sbt_shm->rule), 1,
                    paths);
}

static void sbt_page_html(request_rec *r)
{
    ap_rputs(DOCTYPE_HTML_4_01 "<html><head>\n"
             "<title>mod_sndbuf_tune status</title>\n"
             "<style>td { text-align: right } td.n { text-align: left }"
             "</style>\n</head><body>\n<h1>mod_sndbuf_tune status for ", r);
    ap_rputs(ap_escape_html(r->pool, sbt_show_name(r->pool,
                                                   ap_get_server_name(r))),
             r);
    ap_rprintf(r, "</h1>\n<p>Counters since %s (the last start or full "
               "restart; graceful restarts keep them). Configuration "
               "generation %u. %d slots per table; what finds none is "
               "counted as " SBT_STATUS_OTHER_NAME ".</p>\n",
               ap_ht_time(r->pool, sbt_shm->since, "%Y-%m-%d %H:%M:%S %Z", 0),
               sbt_my_gen, SBT_STATUS_SLOTS);
    ap_rputs("<h2>Kernel limits read at startup</h2>\n", r);
    ap_rputs(sbt_kernel_show(r->pool, SBT_SHOW_HTML), r);
    ap_rputs("<h2>Virtual hosts</h2>\n", r);
    sbt_html_table(r, "vhost", sbt_read_table(r->pool, sbt_shm->vhost));
    ap_rputs("<h2>SndbufTuneNetwork rules</h2>\n", r);
    sbt_html_table(r, "rule", sbt_read_table(r->pool, sbt_shm->rule));
    sbt_html_triage_all(r, "h2", 1);
    ap_rputs("<p>Also as <a href=\"?auto\">?auto</a>, and for Prometheus "
             "with <code>SetHandler " SBT_METRICS_HANDLER "</code>.</p>\n"
             "</body></html>\n", r);
}

/* ---- Prometheus text format 0.0.4 ---- */

/** @a s as a label value: backslash and double quote escaped.  A shown
 *  name has no newline, the format's third special. */
static const char *sbt_prom_label(apr_pool_t *p, const char *s)
{
    char *o = apr_palloc(p, strlen(s) * 2 + 1), *w = o;

    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            *w++ = '\\';
        }
        *w++ = *s;
    }
    *w = '\0';
    return o;
}

static void sbt_prom_head(request_rec *r, const char *metric,
                          const char *type, const char *help)
{
    ap_rprintf(r, "# HELP sndbuf_tune_%s %s\n# TYPE sndbuf_tune_%s %s\n",
               metric, help, metric, type);
}

static void sbt_prom_gauge(request_rec *r, const char *metric,
                           const char *help, apr_uint64_t value)
{
    sbt_prom_head(r, metric, "gauge", help);
    ap_rprintf(r, "sndbuf_tune_%s %" APR_UINT64_T_FMT "\n", metric, value);
}

/** The labels of each of @a views: vhost="..." for a vhost; for a rule,
 *  named "<network> in <vhost>", network="..." and vhost="...": no file
 *  or line, so that editing the configuration renames no series. */
static const char **sbt_prom_labels(apr_pool_t *p,
                                    const apr_array_header_t *views, int rule)
{
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    const char **label = apr_palloc(p, sizeof(*label) * views->nelts);
    int i;

    for (i = 0; i < views->nelts; i++) {
        const char *name = v[i].name, *in = strstr(name, " in ");

        label[i] = !rule || !in
            ? apr_psprintf(p, "%s=\"%s\"", rule ? "network" : "vhost",
                           sbt_prom_label(p, name))
            : apr_psprintf(p, "network=\"%s\",vhost=\"%s\"",
                           sbt_prom_label(p, apr_pstrndup(p, name, in - name)),
                           sbt_prom_label(p, in + 4));
    }
    return label;
}

/** Counter sndbuf_tune_<what>_<name> of @a views: @a n series a view
 *  (labelled @a by, @a names, where n > 1) from the counters' 64-bit
 *  words at @a off; with @a us, microseconds shown as seconds. */
static void sbt_prom_counter(request_rec *r, const char *what,
                             const char *name, const char *help,
                             const apr_array_header_t *views,
                             const char **label, size_t off, int n,
                             const char *by, const char *const *names, int us)
{
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    const char *m = apr_pstrcat(r->pool, what, "_", name, NULL);
    int i, k;

    sbt_prom_head(r, m, "counter", help);
    for (i = 0; i < views->nelts; i++) {
        const apr_uint64_t *w = (const apr_uint64_t *)&v[i].c
                                + off / sizeof(apr_uint64_t);

        for (k = 0; k < n; k++) {
            ap_rprintf(r, "sndbuf_tune_%s{%s%s} %" APR_UINT64_T_FMT, m,
                       label[i], n > 1 ? apr_psprintf(r->pool, ",%s=\"%s\"",
                                                      by, names[k]) : "",
                       us ? w[k] / 1000000 : w[k]);
            ap_rprintf(r, us ? ".%06" APR_UINT64_T_FMT "\n" : "\n",
                       w[k] % 1000000);
        }
    }
}

/** One table's metrics, sndbuf_tune_<what>_..., @a what "vhost" or
 *  "network" (the rules).  The format wants each metric's lines
 *  together: one loop a metric.  The kernel's figures are left out where
 *  it has no chronographs (unknown, not 0). */
static void sbt_prom_table(request_rec *r, const char *what,
                           sbt_slot_t *table)
{
    static const char *const policies[] = {"none", "unset", "fixed", "auto"};
    apr_array_header_t *views = sbt_read_table(r->pool, table);
    const sbt_view_t *v = (const sbt_view_t *)views->elts;
    const char **label = sbt_prom_labels(r->pool, views, *what == 'n');
    const char *m;
    int i, j;

    sbt_prom_counter(r, what, "requests_total", "Requests, by the policy "
                     "that applied (none: the module left the socket "
                     "alone).", views, label, 0, 4, "policy", policies, 0);
    for (j = SBT_F_BYTES; j < SBT_F_COUNT; j++) {
        sbt_prom_counter(r, what, sbt_fields[j].metric, sbt_fields[j].help,
                         views, label, j * sizeof(apr_uint64_t), 1, NULL,
                         NULL, 0);
    }
    m = apr_pstrcat(r->pool, what, "_effective_sndbuf_bytes", NULL);
    sbt_prom_head(r, m, "histogram", "The send buffer at the end of each "
                  "response: getsockopt SO_SNDBUF, twice the size set.");
    for (i = 0; i < views->nelts; i++) {
        apr_uint64_t count = 0;

        for (j = 0; j < SBT_HIST_SIZES; j++) {
            count += v[i].c.hist[j];
            ap_rprintf(r, "sndbuf_tune_%s_bucket{%s,le=\"%s\"} %"
                       APR_UINT64_T_FMT "\n", m, label[i],
                       j < SBT_HIST_SIZES - 1
                       ? apr_ltoa(r->pool, 1L << sbt_bucket_shift(j)) : "+Inf",
                       count);
        }
        ap_rprintf(r, "sndbuf_tune_%s_sum{%s} %" APR_UINT64_T_FMT "\n"
                   "sndbuf_tune_%s_count{%s} %" APR_UINT64_T_FMT "\n",
                   m, label[i], v[i].c.hist_sum, m, label[i], count);
    }
    sbt_prom_counter(r, what, "effective_sndbuf_unknown_total", "Responses "
                     "the histogram leaves out: no policy applied, or no "
                     "socket to ask.", views, label,
                     offsetof(sbt_counters_t, hist[SBT_HIST_UNKNOWN]), 1,
                     NULL, NULL, 0);
    sbt_prom_counter(r, what, "large_responses_total", "Responses larger "
                     "than the send buffer in force, measured from TCP_INFO "
                     "at their start and end.", views, label,
                     offsetof(sbt_counters_t, triage.large), 1, NULL,
                     NULL, 0);
    if (sbt_kernel.has_chrono) {
        sbt_prom_counter(r, what, "send_seconds_total", "The kernel's time "
                         "sending the large responses, by what limited it: "
                         "the send buffer, the client's window, the network "
                         "(the rest of the time with data to send), the "
                         "server (the time with none).", views, label,
                         offsetof(sbt_counters_t, triage.us), SBT_LIMITS,
                         "limit", sbt_limit_names, 1);
        sbt_prom_counter(r, what, "responses_limited_total", "Large "
                         "responses by the verdict on what limited them (too "
                         "short to tell: none).", views, label,
                         offsetof(sbt_counters_t, triage.by), SBT_LIMITS,
                         "by", sbt_limit_names, 0);
    }
}

static void sbt_page_metrics(request_rec *r)
{
    sbt_prom_gauge(r, "config_generation", "Configurations loaded since "
                   "the counters' memory was created.", sbt_my_gen);
    sbt_prom_gauge(r, "counters_reset_timestamp_seconds", "When the "
                   "counters were last zeroed: start or full restart.",
                   (apr_uint64_t)apr_time_sec(sbt_shm->since));
    ap_rputs(sbt_kernel_show(r->pool, SBT_SHOW_PROM), r);
    sbt_prom_table(r, "vhost", sbt_shm->vhost);
    sbt_prom_table(r, "network", sbt_shm->rule);
}

/* ---- Handler and mod_status section ---- */

/** Is @a word, alone or as word=..., one of the &- or ;-separated
 *  words of the query string @a args? */
static int sbt_has_arg(apr_pool_t *p, const char *args, const char *word)
{
    apr_size_t len = strlen(word);
    char *last, *a = apr_pstrdup(p, args ? args : "");

    for (a = apr_strtok(a, "&;", &last); a;
         a = apr_strtok(NULL, "&;", &last)) {
        if (!strncasecmp(a, word, len) && (!a[len] || a[len] == '=')) {
            return 1;
        }
    }
    return 0;
}

static int sbt_status_handler(request_rec *r)
{
    void (*page)(request_rec *r) = sbt_page_html;
    const char *type = "text/html; charset=utf-8";
    int metrics;

    /* Every request comes here: one comparison for most. */
    if (!r->handler || r->handler[0] != 's'
        || (!(metrics = !strcmp(r->handler, SBT_METRICS_HANDLER))
            && strcmp(r->handler, SBT_STATUS_HANDLER))) {
        return DECLINED;
    }
    r->allowed = (AP_METHOD_BIT << M_GET);
    if (r->method_number != M_GET) {
        return HTTP_METHOD_NOT_ALLOWED;
    }
    if (!sbt_shm) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, "%s: no counters, see "
                      "the error at startup", r->handler);
        return HTTP_SERVICE_UNAVAILABLE;
    }
    if (metrics) {
        page = sbt_page_metrics;
        type = "text/plain; version=0.0.4; charset=utf-8";
    }
    else if (sbt_has_arg(r->pool, r->args, "auto")) {
        page = sbt_page_auto;
        type = "text/plain; charset=utf-8";
    }
    ap_set_content_type(r, type);
    if (!r->header_only) {
        page(r);
    }
    return OK;
}

/** mod_status: totals and kernel limits; the detail is on our page. */
static int sbt_mod_status_hook(request_rec *r, int flags)
{
    if (!sbt_shm) {
        return OK;
    }
    if (flags & AP_STATUS_SHORT) {
        const sbt_view_t *total =
            (const sbt_view_t *)sbt_read_totals(r->pool)->elts;

        sbt_auto_counters(r, "SndbufTuneTotal", total);
        sbt_auto_triage(r, "SndbufTuneTotal", total);
        ap_rputs(sbt_kernel_show(r->pool, SBT_SHOW_AUTO), r);
        sbt_auto_table(r, "Vhost", sbt_shm->vhost, 0);
        sbt_auto_table(r, "Network", sbt_shm->rule, 0);
        return OK;
    }
    ap_rputs("<hr />\n<h2>mod_sndbuf_tune</h2>\n", r);
    sbt_html_table(r, "", sbt_read_totals(r->pool));
    ap_rprintf(r, "<p>Since %s; the other counters per vhost and rule on a "
               "<code>SetHandler " SBT_STATUS_HANDLER "</code> page.</p>\n",
               ap_ht_time(r->pool, sbt_shm->since, "%Y-%m-%d %H:%M:%S %Z", 0));
    ap_rputs(sbt_kernel_show(r->pool, SBT_SHOW_HTML), r);
    sbt_html_triage_all(r, "h3", 0);
    return OK;
}

void sbt_status_page_register_hooks(void)
{
    ap_hook_handler(sbt_status_handler, NULL, NULL, APR_HOOK_MIDDLE);
    /* A section on mod_status's page; inert when mod_status is absent. */
    APR_OPTIONAL_HOOK(ap, status_hook, sbt_mod_status_hook, NULL, NULL,
                      APR_HOOK_MIDDLE);
}
