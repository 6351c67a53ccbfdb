/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file  sndbuf_tune.h
 * @brief mod_sndbuf_tune: types shared by its source files (README.md's
 *        Layout says what each holds).  Each file writes only its own
 *        state; names shared between files carry the prefix sbt_.
 */

#ifndef SNDBUF_TUNE_H
#define SNDBUF_TUNE_H

#include "httpd.h"
#include "http_config.h"
#include "util_filter.h"
#include "apr_network_io.h"
#include "apr_thread_mutex.h"

#include "sndbuf_kernel.h"
#include "sndbuf_parse.h"
#include "sndbuf_triage.h"

extern module AP_MODULE_DECLARE_DATA sndbuf_tune_module;

/* Where the Debian package installs the pages the messages name. */
#define SBT_DOCS "/usr/share/doc/libapache2-mod-sndbuf-tune/docs/"

/** What one SndbufTune or SndbufTuneNetwork line asks for. */
typedef struct {
    sbt_policy_e policy;
    int size;                   /**< SO_SNDBUF argument, for FIXED */
    apr_uint64_t rate;          /**< auto's path rate (bytes/s); 0: measure */
    const char *rule;           /**< where the line stands: logs, the note */
    /** The same without " at file:line", for the environment: CGI and SSI
     *  have no business knowing the configuration's paths. */
    const char *rule_env;
} sbt_setting_t;

/** One SndbufTuneNetwork rule. */
typedef struct {
    sbt_cidr_t net;             /**< host bits clear */
    sbt_setting_t tune;
    struct sbt_slot_t *counters;    /**< sndbuf_status.c's; NULL: none */
} sbt_network_t;

/** A server's rules (sndbuf_rules.c). */
typedef struct sbt_rules_t sbt_rules_t;

typedef struct sbt_srv_conf_t {
    sbt_rules_t *rules;         /**< its own SndbufTuneNetwork; NULL: none */
    /** The main server's rules, shared by every vhost, not copied. */
    const sbt_rules_t *base_rules;
    struct sbt_slot_t *counters;    /**< sndbuf_status.c's; NULL: none */
} sbt_srv_conf_t;

/** The policy in force for one request, with its clamps resolved. */
typedef struct {
    sbt_setting_t tune;
    int limit_min;
    int limit_max;
    const sbt_network_t *network; /**< the rule that decided, or NULL */
    int clamped;                /**< a .htaccess size cut to limit_max */
} sbt_decision_t;

/* sndbuf_socket.c: the socket */

/** Who governs a socket's send buffer, as far as the module knows. */
typedef enum {
    SBT_SOCK_UNKNOWN,           /**< as accepted: autotuned, or locked
                                 *   by the listener (SendBufferSize) */
    SBT_SOCK_AUTOTUNED,         /**< the kernel: no SO_SNDBUF lock */
    SBT_SOCK_LOCKED,            /**< locked, not by us, at effective/2 */
    SBT_SOCK_FIXED              /**< locked by us, at .requested */
} sbt_sock_state_e;

/** What the module has done to one connection's socket; its fields are
 *  sndbuf_socket.c's alone (the functions below read them). */
typedef struct {
    int fd;                     /**< -1: no socket to act on */
    sbt_sock_state_e state;
    int requested;              /**< our last SO_SNDBUF argument, if FIXED */
    int effective;              /**< getsockopt(SO_SNDBUF); -1 unknown */
    int paced;                  /**< pacing asked for (it stays on) */
} sbt_sock_t;

/** What one operation on a socket did, for the caller to log and count. */
typedef struct {
    const char *done;           /**< for the debug log */
    const char *call;           /**< the socket call that failed, or NULL */
    int err;                    /**< its errno */
    /** NULL: the failure left the socket as it was; else it may not have,
     *  and the socket was read back: "locked" or "not locked", with
     *  SO_SNDBUF @c left_size (-1 unknown). */
    const char *left;
    int left_size;
    int clamped;                /**< net.core.wmem_max capped the size */
    int paced;                  /**< the kernel's pacing was turned on */
} sbt_sock_did_t;

/** A socket as accepted: autotuned, or locked by its listener at
 *  @a locked (getsockopt's figure; 0: not locked, or unknown). */
void sbt_sock_init(sbt_sock_t *s, apr_socket_t *csd, int locked);
/** Re-read the descriptor of @a csd: -1 once the MPM has closed it (the
 *  bare number may already be another connection's). */
void sbt_sock_attach(sbt_sock_t *s, apr_socket_t *csd);
int sbt_sock_open(const sbt_sock_t *s);
/** getsockopt(SO_SNDBUF) after the last look; -1 unknown. */
int sbt_sock_effective(const sbt_sock_t *s);
/** Fix the buffer at @a size; on a @a shared (HTTP/2) socket only grow. */
void sbt_sock_fix(sbt_sock_t *s, int size, int shared, sbt_sock_did_t *did);
/** Turn on the kernel's pacing, once per socket. */
void sbt_sock_pace(sbt_sock_t *s, sbt_sock_did_t *did);
/** Give the buffer to autotuning; a @a shared socket keeps another
 *  stream's size. */
void sbt_sock_unset(sbt_sock_t *s, int shared, sbt_sock_did_t *did);
/** Learn who governs an UNKNOWN socket (one system call). */
void sbt_sock_resolve(sbt_sock_t *s, sbt_sock_did_t *did);
/** Re-read .effective (autotuning moves it).  FALSE on failure. */
int sbt_sock_refresh(sbt_sock_t *s, sbt_sock_did_t *did);
/** Re-read .effective unless our own lock holds it. */
void sbt_sock_recheck(sbt_sock_t *s, sbt_sock_did_t *did);
/** The SO_SNDBUF argument in force if a lock holds it, else 0. */
int sbt_sock_locked_at(const sbt_sock_t *s);
/** Who governs the socket's buffer, as far as the module knows. */
sbt_sock_state_e sbt_sock_state(const sbt_sock_t *s);
/** The kernel's buffer as last seen, or its initial size if unknown. */
int sbt_sock_known_size(const sbt_sock_t *s);
/** Give a lock worse than autotuning back to it, at the size it has. */
void sbt_sock_give_back(sbt_sock_t *s, sbt_sock_did_t *did);
/** TCP_INFO of the socket.  FALSE (and @a did says why) on failure. */
int sbt_sock_info(const sbt_sock_t *s, sbt_tcp_info_t *ti,
                  sbt_sock_did_t *did);
/** The size core's SendBufferSize locked listener @a sd at, or 0. */
int sbt_sock_listener_locked(apr_socket_t *sd);
/** Does the socket's congestion control fill queues by design (not
 *  bbr)?  Unknown counts as loss-based, the kernel's default. */
int sbt_sock_loss_based(const sbt_sock_t *s);

/** What the socket calls for one response came to, for the status page. */
typedef struct {
    int clamped;                /**< limits, 2 x MSS or wmem_max cut a size */
    int failures;               /**< socket calls that failed */
} sbt_tally_t;

/** Add @a did to @a t; log a failure (a warning a minute per child, the
 *  rest at debug). */
void sbt_sock_tally(conn_rec *c, const sbt_sock_did_t *did, sbt_tally_t *t);

/* sndbuf_conn.c: per connection */

typedef struct sbt_auto_t sbt_auto_t;

/** Per primary connection, made in its own thread at pre_connection.
 *  HTTP/2 streams, and the primary's thread once the connection speaks
 *  HTTP/2, reach it only between sbt_conn_enter and sbt_conn_leave,
 *  under the connection's lock; each part has one writer file. */
typedef struct {
    /** sndbuf_socket.c's; re-read from @c csd at each sbt_conn_enter. */
    sbt_sock_t sock;
    /** The connection's socket: APR sets its descriptor to -1 when the
     *  MPM closes it, which the bare number cannot tell. */
    apr_socket_t *csd;
#if APR_HAS_THREADS
    /** sndbuf_conn.c: serialises the HTTP/2 streams and the primary's
     *  thread; NULL for HTTP/1 (where it failed, streams are not tuned). */
    apr_thread_mutex_t *mutex;
#endif
    /** sndbuf_auto.c: the measured rate (bytes/s; 0: none yet), carried
     *  to the next response. */
    apr_uint64_t rate_estimate;
    /** sndbuf_conn.c: the HTTP/1 response auto follows while the event
     *  MPM writes it without a worker, or NULL; never past its pool. */
    sbt_auto_t *draining;
    /** mod_sndbuf_tune.c: TCP_INFO (and when it was read, sbt_clock_us;
     *  0: never) as far as responses have counted it, and where the
     *  earliest response begun since the last one ended started.  A
     *  response's figures run from the earlier of its own start and
     *  that one, but not before what was counted: HTTP/2 streams and
     *  pipelined responses overlap, and never count the connection's
     *  time twice. */
    sbt_tcp_info_t counted;
    apr_int64_t counted_at;
    sbt_tcp_info_t opened;
    apr_int64_t opened_at;
} sbt_conn_t;

/** The primary connection's state for @a c (a stream's: its primary's),
 *  locked for HTTP/2 streams; NULL: leave this connection alone. */
sbt_conn_t *sbt_conn_enter(conn_rec *c);
void sbt_conn_leave(conn_rec *c);
/** HTTP/1: follow @a au (NULL: none) while the MPM drains its response,
 *  until @a pool, its request's, is cleared or another is followed. */
void sbt_conn_follow(sbt_conn_t *conn, sbt_auto_t *au, apr_pool_t *pool);
/** The response @a c (a primary connection) follows, or NULL. */
sbt_auto_t *sbt_conn_draining(conn_rec *c);
/** Where core's SendBufferSize stands ("file:line"), or NULL. */
const char *sbt_conn_sendbuffersize_line(void);
void sbt_conn_register_hooks(void);

/* mod_sndbuf_tune.c: per request */

/** Per request a policy applies to (r->request_config). */
typedef struct {
    sbt_decision_t d;
    int shared;                 /**< HTTP/2 stream: the socket is shared */
    /** The buffer in force when the policy was applied (0: no socket),
     *  the response's bytes passed so far, and whether it is still to be
     *  seen if the response fits in it. */
    apr_off_t fits;
    apr_off_t passed;
    int watching;
    /** The response outgrew the buffer at @c began (it cannot have been
     *  limited by it before): @c start is its baseline. */
    int measured;
    apr_int64_t began;          /**< sbt_clock_us() */
    sbt_tcp_info_t start;
    sbt_tally_t tally;
    sbt_auto_t *au;             /**< auto's controller, or NULL */
    /** The SO_SNDBUF argument this response's own fixed size set (0:
     *  none): on a shared socket another stream's may be in force. */
    int own_size;
} sbt_req_t;

/* sndbuf_config.c */
extern const command_rec sbt_cmds[];
void *sbt_create_dir_conf(apr_pool_t *p, char *dir);
void *sbt_merge_dir_conf(apr_pool_t *p, void *basev, void *addv);
void *sbt_create_srv_conf(apr_pool_t *p, server_rec *s);
void *sbt_merge_srv_conf(apr_pool_t *p, void *basev, void *addv);
/** The policy for @a r; FALSE when none applies, and then @a d->tune.rule
 *  names the line that said none, or is NULL where no line did. */
int sbt_decide(request_rec *r, sbt_decision_t *d);
/** The largest size any directive of this configuration asks for. */
int sbt_config_largest_size(void);
/** Warn where mod_remoteip lets any client choose its network rule. */
void sbt_config_warn_remoteip(apr_pool_t *ptemp, server_rec *main_s);
void sbt_config_register_hooks(void);

/* sndbuf_rules.c */
sbt_rules_t *sbt_rules_make(apr_pool_t *p);
/** Add @a rule (kept by pointer); the rule it duplicates, or NULL. */
const sbt_network_t *sbt_rules_add(sbt_rules_t *t, const sbt_network_t *rule);
/** Every rule in configuration order (const sbt_network_t *). */
const apr_array_header_t *sbt_rules_all(const sbt_rules_t *t);
/** The longest rule of @a own or @a base (either may be NULL) holding
 *  @a client; @a own wins ties. */
const sbt_network_t *sbt_rules_match(const sbt_rules_t *own,
                                     const sbt_rules_t *base,
                                     const apr_sockaddr_t *client);

/* sndbuf_auto.c */
/** Start auto for a response larger than the buffer in force: its
 *  controller, or NULL; @a done says what was done (debug log). */
sbt_auto_t *sbt_auto_begin(request_rec *r, const sbt_req_t *rq,
                           sbt_conn_t *conn, const char **done);
/** Pass @a bb on, cut so that auto can look between the pieces. */
apr_status_t sbt_auto_pass(ap_filter_t *f, sbt_auto_t *au,
                           apr_bucket_brigade *bb);
/** auto's part of the outcome. */
typedef struct {
    apr_uint32_t rtt_us;
    apr_uint64_t rate;          /**< bytes/s */
    int retunes;
    sbt_tally_t tally;
} sbt_auto_outcome_t;
void sbt_auto_end(const sbt_auto_t *au, sbt_auto_outcome_t *o);
void sbt_auto_register_hooks(void);

/* sndbuf_path.c */
/** What one look saw, for the others. */
typedef struct {
    apr_uint32_t srtt_us;
    apr_uint32_t min_rtt_us;    /**< the flow's own */
    apr_uint64_t rate;          /**< its delivery rate lately, bytes/s */
} sbt_path_look_t;

/** A flow's crowd, read at most once a second: this server's other flows
 *  at its RTT (0: none), their rates summed now and in the second of the
 *  last 16 in which its own was highest, its own then (bytes/s), and the
 *  lowest minimum RTT of those to its client's address (0: none). */
typedef struct {
    int members;
    apr_uint64_t rate;
    apr_uint64_t rate_then;
    apr_uint64_t own_then;
    apr_uint32_t min_rtt_us;
} sbt_path_crowd_t;

/** One auto flow's place in the shared segment (sndbuf_path.c's fields;
 *  zeroed before its first look). */
typedef struct {
    apr_uint64_t id;            /**< 0: not placed yet */
    int slot;                   /**< -1: none to be had */
    sbt_path_crowd_t crowd;     /**< its crowd when last read, and when */
    apr_int64_t crowd_at;
} sbt_path_flow_t;

/** Record flow @a f's look @a lk at the path to @a client, for every
 *  process of the server; its crowd as last read. */
const sbt_path_crowd_t *sbt_path_look(sbt_path_flow_t *f,
                                      const apr_sockaddr_t *client,
                                      const sbt_path_look_t *lk);
/** Flow @a f's response has ended: its slot is free. */
void sbt_path_leave(sbt_path_flow_t *f);
void sbt_path_register_hooks(void);

/** What became of one request, for the status page's counters. */
typedef struct {
    sbt_policy_e policy;
    server_rec *server;         /**< the vhost (r->server) it counts for */
    const sbt_network_t *network; /**< the rule it counts for, or NULL */
    apr_off_t bytes_sent;
    int effective;              /**< SO_SNDBUF at the end; -1 unknown */
    int sndbuf_limited;         /**< for over 10% of the response time */
    int clamped;
    int failures;
    /** A large response (outgrew the buffer in force): its triage, and
     *  for the buffer's verdict, the buffer (as in sbt_triage_in_t), where
     *  it came from and the RTT. */
    int large;
    sbt_triage_t triage;
    apr_uint64_t buffer;
    sbt_buf_source_e buf_from;
    apr_uint32_t srtt_us;
} sbt_outcome_t;

/* sndbuf_status.c */
void sbt_status_record(const sbt_outcome_t *o);
void sbt_status_register_hooks(void);
/* sndbuf_status_page.c: the handler and mod_status's section */
void sbt_status_page_register_hooks(void);

#endif /* SNDBUF_TUNE_H */
