/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_tune.h
 * @brief mod_sndbuf_tune: types shared by its source files.
 *
 * mod_sndbuf_tune.c   hooks: where in a request the policy is applied
 * sndbuf_config.c     directives, their parsers and the merge rules
 * sndbuf_socket.c     applying a policy to a connection's socket
 * sndbuf_auto.c       "auto": sizing from RTT x bandwidth, re-tuning
 * sndbuf_status.c     counters in shared memory (layout: sndbuf_status.h)
 * sndbuf_status_page.c  the status page: HTML, ?auto, ?json, mod_status
 * sndbuf_kernel.c     socket options and sysctls (the only syscalls)
 *
 * Names shared between files carry the prefix sbt_ (sndbuf_tune).
 */

#ifndef SNDBUF_TUNE_H
#define SNDBUF_TUNE_H

#include "httpd.h"
#include "http_config.h"
#include "apr_network_io.h"

#include "sndbuf_kernel.h"

extern module AP_MODULE_DECLARE_DATA sndbuf_tune_module;

/* Accepted sizes (SO_SNDBUF arguments; Linux stores twice as much). */
#define SBT_SIZE_MIN        (4 * 1024)
#define SBT_SIZE_MAX        (1024 * 1024 * 1024)

/* Per-request notes and environment variables (LogFormat %{..}n/%{..}e,
 * mod_headers). */
#define SBT_NOTE_POLICY     "SNDBUF_TUNE_POLICY"
#define SBT_NOTE_REQUESTED  "SNDBUF_TUNE_REQUESTED"
#define SBT_NOTE_EFFECTIVE  "SNDBUF_TUNE_EFFECTIVE"
#define SBT_NOTE_RULE       "SNDBUF_TUNE_RULE"
#define SBT_NOTE_RTT        "SNDBUF_TUNE_RTT_US"
#define SBT_NOTE_BW         "SNDBUF_TUNE_BW_BPS"
#define SBT_NOTE_RETUNES    "SNDBUF_TUNE_RETUNES"
/* Measured over the response, read at its end (log_transaction). */
#define SBT_NOTE_LIMITED_MS "SNDBUF_TUNE_SNDBUF_LIMITED_MS"
#define SBT_NOTE_DELIVERY   "SNDBUF_TUNE_DELIVERY_BPS"
#define SBT_NOTE_MIN_RTT    "SNDBUF_TUNE_MIN_RTT_US"
#define SBT_NOTE_RETRANS    "SNDBUF_TUNE_RETRANS"

typedef enum {
    SBT_POLICY_NONE = 0,        /**< nothing configured: leave the socket */
    SBT_POLICY_UNSET,           /**< "unset": kernel autotuning */
    SBT_POLICY_FIXED,           /**< a size */
    SBT_POLICY_AUTO             /**< factor x RTT x bandwidth */
} sbt_policy_e;

/** What one SndbufTune or SndbufTuneNetwork line asks for. */
typedef struct {
    sbt_policy_e policy;
    /** SO_SNDBUF argument, for SBT_POLICY_FIXED. */
    int size;
    /** Assumed path rate in bytes/s for auto; 0 = measure it. */
    apr_uint64_t rate;
    /** Where the line stands, for logs and SNDBUF_TUNE_RULE. */
    const char *rule;
} sbt_setting_t;

typedef struct {
    /** SndbufTune; policy NONE when this scope says nothing. */
    sbt_setting_t tune;
    /** The SndbufTune came from <Directory>, <Location> or <Files>, so
     *  it beats client network rules (which beat vhost-wide lines). */
    int tune_in_section;
    /** SndbufTuneBandwidth in bytes/s; 0 = not set here. */
    apr_uint64_t rate;
    /** SndbufTuneLimits; 0 = not set here. */
    int limit_min;
    int limit_max;
} sbt_dir_conf_t;

/** One SndbufTuneNetwork rule. */
typedef struct {
    /** NULL for a /0 rule, which APR cannot express: see family. */
    apr_ipsubnet_t *subnet;
    /** APR_INET or APR_INET6: the family a /0 rule matches. */
    int family;
    int prefix;                 /**< prefix length: longest match wins */
    sbt_setting_t tune;
    /** Its counters' slot on the status page (sndbuf_status.c). */
    int status_slot;
} sbt_network_t;

typedef struct {
    /** SndbufTuneNetwork rules: this server's, then inherited ones. */
    apr_array_header_t *networks;
    /** This vhost's counters' slot on the status page (sndbuf_status.c). */
    int status_slot;
} sbt_srv_conf_t;

/** The policy in force for one request, with its clamps resolved. */
typedef struct {
    sbt_setting_t tune;
    int limit_min;
    int limit_max;
    /** The SndbufTuneNetwork rule that decided, or NULL. */
    const sbt_network_t *network;
} sbt_decision_t;

/** Who governs a socket's send buffer right now, as far as we know. */
typedef enum {
    SBT_SOCK_AUTOTUNED,         /**< the kernel: no SO_SNDBUF lock */
    SBT_SOCK_INHERITED,         /**< locked by core SendBufferSize */
    SBT_SOCK_FIXED              /**< locked by us, at .requested */
} sbt_sock_state_e;

/** Per primary connection: what the module last did to its socket. */
typedef struct {
    int fd;
    sbt_sock_state_e state;
    /** Our last SO_SNDBUF argument, when state is SBT_SOCK_FIXED. */
    int requested;
    /** getsockopt(SO_SNDBUF) after our last change; -1 unknown. */
    int effective;
    /** auto's measured rate (bytes/s), carried to the next request on
     *  a keep-alive connection; 0 = nothing measured yet. */
    apr_uint64_t rate_estimate;
    /** TCP_INFO at the end of the previous response: the next one's
     *  baseline, saving a system call; valid == 0 when there is none. */
    sbt_tcp_info_t last_end;
} sbt_conn_t;

/** Per request that a policy applies to (r->request_config). */
typedef struct {
    sbt_decision_t d;
    sbt_conn_t *st;
    /** TCP_INFO when the policy was applied; valid == 0 if unknown. */
    sbt_tcp_info_t start;
    apr_time_t started;
    /** A size was clamped, for the status page. */
    int clamped;
    /** Socket calls that failed, for the status page. */
    int failures;
    /** auto's state during the response (sndbuf_auto.c), or NULL. */
    void *auto_ctx;
} sbt_req_t;

/** What became of one request, for the status page's counters. */
typedef struct {
    sbt_policy_e policy;
    /** The vhost (r->server) and the network rule (NULL: none) whose
     *  counters it adds to. */
    server_rec *server;
    const sbt_network_t *network;
    apr_off_t bytes_sent;
    /** getsockopt(SO_SNDBUF) at the end; -1 unknown. */
    int effective;
    /** Send-buffer-limited for more than 10% of the response. */
    int sndbuf_limited;
    /** A size was clamped (SndbufTuneLimits, 2 x MSS or wmem_max). */
    int clamped;
    /** Socket calls that failed while serving it. */
    int failures;
} sbt_outcome_t;

/* Process-wide facts, set in post_config before children fork. */
extern sbt_kernel_t sbt_kernel;
/** Core SendBufferSize, inherited by every accepted socket; 0 = none. */
extern int sbt_core_sndbuf;
/** Largest size asked for by any directive, to warn about wmem_max. */
extern int sbt_largest_size;

/* sndbuf_config.c */
extern const command_rec sbt_cmds[];
void *sbt_create_dir_conf(apr_pool_t *p, char *dir);
void *sbt_merge_dir_conf(apr_pool_t *p, void *basev, void *addv);
void *sbt_create_srv_conf(apr_pool_t *p, server_rec *s);
void *sbt_merge_srv_conf(apr_pool_t *p, void *basev, void *addv);
/** The policy for @a r; FALSE when none applies. */
int sbt_decide(request_rec *r, sbt_decision_t *d);

/* sndbuf_socket.c */
sbt_conn_t *sbt_conn_get(conn_rec *primary);
/** The request's state, or NULL when no policy applies to it. */
sbt_req_t *sbt_req_get(request_rec *r);
/** Fix the buffer at @a size; on a @a shared (HTTP/2) socket only grow.
 *  Returns what was done, for the debug log. */
const char *sbt_apply_fixed(request_rec *r, sbt_conn_t *st, int size,
                            int shared);
const char *sbt_apply_unset(request_rec *r, sbt_conn_t *st, int shared);
void sbt_log_failure(request_rec *r, int err, const char *what);
/** Serialise access to a shared (HTTP/2) socket; FALSE: do not touch. */
int sbt_lock_shared(void);
void sbt_unlock_shared(void);
void sbt_socket_child_init(apr_pool_t *pchild, server_rec *s);
void sbt_note(request_rec *r, const char *key, const char *val);
void sbt_note_num(request_rec *r, const char *key, apr_int64_t v);

/* sndbuf_status.c */
void sbt_status_record(request_rec *r, const sbt_outcome_t *o);
void sbt_status_register_hooks(void);

/* sndbuf_auto.c */
/** Initial auto size at the start of a response (into @a asked, -1
 *  when none), and the re-tuning filter for the rest of it.  Returns
 *  what was done, for the debug log. */
const char *sbt_auto_start(request_rec *r, sbt_req_t *rq, int shared,
                           int *asked);
/** auto's notes as they stand at the end of the response. */
void sbt_auto_finish(request_rec *r, const sbt_req_t *rq);
void sbt_auto_register_hooks(void);

#endif /* SNDBUF_TUNE_H */
