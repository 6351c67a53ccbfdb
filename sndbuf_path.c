/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_path.c: what this server's other auto flows see of the network,
 * shared by all its child processes (docs/auto.md, "Crowds"):
 *  - per client address, the lowest minimum RTT its connections measured
 *    lately (a late comer's own began in the queue the others keep), and
 *    whether another connection to it looks now;
 *  - a board of the queues flows saw lately, to any client: flows whose
 *    queues match at the same moment share a bottleneck, whatever their
 *    addresses and processes;
 *  - what the crowds' flows delivered together lately, the most they did,
 *    and until when their queue is known to be another sender's too.
 *
 * One anonymous shared-memory segment, made before the children fork and
 * kept across restarts.  No lock that could hang a worker: a path slot is
 * taken with a compare-and-swap on its sequence word, and a look that
 * finds it taken goes without it (no worse off than without the table);
 * the board's bits are set and read atomically.  The atomics are the
 * compiler's, not APR's: APR's are calls into a library ThreadSanitizer
 * does not instrument, so it would see the slot's plain fields written
 * with no ordering between threads.
 */

#include <unistd.h>             /* getpid */

#include "httpd.h"
#include "http_log.h"

#include "apr_shm.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* Direct-mapped by address: a client whose slot another address holds,
 * freshly, keeps its own minimum. */
#define SBT_PATH_SLOTS      1024

/* A minimum no connection has confirmed for this long is forgotten (as
 * BBR's), so a longer new route is not read as a queue for longer. */
#define SBT_PATH_FRESH      apr_time_from_sec(10)

/* A connection shares its path while another whose response is under way
 * looked at it within this long (about once an RTT).  One whose response
 * has ended (idle keep-alive, a crowd just ended) no longer counts. */
#define SBT_PATH_SHARED     apr_time_from_sec(2)

/* The connections that looked last.  Three: when one leaves, another of
 * a crowd is still there, so no member takes itself for alone. */
#define SBT_PATH_LOOKERS    3

/* Tries at a slot another process or thread is writing (some 100 ns). */
#define SBT_PATH_TRIES      64

/* The board: slices of 1/8 s, two seconds of them, each with a bit per
 * flow (hashed to 64) for each queue length, in quarter octaves from
 * 1 ms (4 s at the top).  A look compares with the last WINDOW_MIN
 * slices, or two of its RTTs, whichever is longer: the flows within BAND
 * quarter octaves of its queue (+-41%) are its peers. */
#define SBT_BOARD_SLICE_US  125000
#define SBT_BOARD_SLICES    16
#define SBT_BOARD_BUCKETS   48
#define SBT_BOARD_WINDOW_MIN 4
#define SBT_BOARD_BAND      2

/* The crowds' delivery: each crowd's flow keeps its delivery rate since
 * its last look in a slot of its own (open addressing, PROBES tries from
 * its hash; a slot not written for FLOW_FRESH is free).  Whoever moves the
 * board to a new slice sums them into it, and a look reads the mean of
 * the last SENT_SLICES slices (1 s).  A flow's rate covers the time since
 * its last look, which under the event MPM may be a second: summed bytes
 * per slice would come in late, and the crowd look slower than it is.
 * The peak is held over PEAK_BLOCKS blocks of PEAK_BLOCK_US (16 to 20 s),
 * longer than a contest lasts (sndbuf_law.c), so that the test after one
 * still knows what the crowd delivered during it. */
#define SBT_FLOW_SLOTS      4096
#define SBT_FLOW_PROBES     8
#define SBT_FLOW_FRESH      apr_time_from_sec(2)
#define SBT_SENT_SLICES     8
#define SBT_PEAK_BLOCK_US   4000000
#define SBT_PEAK_BLOCKS     5

#define SBT_PATH_MAGIC      0x53425450u     /* "SBTP" */
#define SBT_PATH_VERSION    2u
#define SBT_PATH_RETAINED   "mod_sndbuf_tune/paths"

typedef struct {
    apr_uint64_t conn;          /**< sbt_path_id(); 0: empty */
    apr_int64_t at;             /**< sbt_clock_us() */
} sbt_looker_t;

typedef struct {
    /** Odd while a writer holds the slot. */
    apr_uint32_t seq;
    apr_uint32_t family;        /**< 0: empty */
    unsigned char addr[16];
    apr_uint32_t min_rtt_us;
    /** When a connection last measured min_rtt_us or less. */
    apr_int64_t seen;
    sbt_looker_t looker[SBT_PATH_LOOKERS];
} sbt_path_t;

typedef struct {
    apr_uint64_t epoch;         /**< sbt_clock_us() / SLICE_US */
    apr_uint64_t flows[SBT_BOARD_BUCKETS];
    apr_uint64_t sent;          /**< the crowds' delivery then, B/s */
} sbt_slice_t;

typedef struct {
    apr_uint64_t conn;          /**< sbt_path_id(); 0: free */
    apr_uint64_t rate;          /**< B/s since its look before */
    apr_int64_t at;             /**< sbt_clock_us() */
} sbt_flow_t;

typedef struct {
    apr_uint64_t epoch;         /**< sbt_clock_us() / PEAK_BLOCK_US */
    apr_uint64_t rate;          /**< the highest read in it, bytes/s */
} sbt_peak_t;

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t version;
    apr_size_t size;
    sbt_path_t path[SBT_PATH_SLOTS];
    sbt_slice_t slice[SBT_BOARD_SLICES];
    sbt_flow_t flow[SBT_FLOW_SLOTS];
    sbt_peak_t peak[SBT_PEAK_BLOCKS];
    apr_int64_t drained_at;         /**< sbt_clock_us() */
    apr_int64_t contested_until;
} sbt_paths_t;

/* Set in post_config, inherited by the children; NULL: no segment. */
static sbt_paths_t *sbt_paths;

/* This child's pid, read once (getpid is a system call). */
static apr_uint64_t sbt_my_pid;

/** A connection's name across processes: a conn_rec's address is only
 *  unique within its process. */
static apr_uint64_t sbt_path_id(const void *conn)
{
    apr_uint64_t id = (sbt_my_pid << 32) ^ (apr_uint64_t)(apr_uintptr_t)conn;

    return id ? id : 1;
}

/* ---- per client address ---- */

/** Note @a conn's look at @a p (in its own entry, else the oldest); is
 *  the path shared with another of this server's connections? */
static int sbt_path_shared(sbt_path_t *p, apr_uint64_t conn, apr_int64_t now)
{
    sbt_looker_t *mine = NULL, *oldest = &p->looker[0];
    int i, shared = 0;

    for (i = 0; i < SBT_PATH_LOOKERS; i++) {
        sbt_looker_t *l = &p->looker[i];

        if (l->conn == conn) {
            mine = l;
        }
        else if (l->conn && now - l->at <= SBT_PATH_SHARED) {
            shared = 1;
        }
        if (l->at < oldest->at) {
            oldest = l;
        }
    }
    mine = mine ? mine : oldest;
    mine->conn = conn;
    mine->at = now;
    return shared;
}

/** The slot of @a client's path, taken (sbt_path_give); NULL: none, or
 *  another writer holds it. */
static sbt_path_t *sbt_path_take(const apr_sockaddr_t *client)
{
    sbt_path_t *p;
    apr_uint32_t seq;
    int len, i;

    if (!sbt_paths || !client
        || (len = client->ipaddr_len) <= 0 || len > 16) {
        return NULL;
    }
    p = &sbt_paths->path[sbt_hash(client->ipaddr_ptr, len) % SBT_PATH_SLOTS];
    for (i = 0; i < SBT_PATH_TRIES; i++) {
        seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
        if (!(seq & 1)
            && __atomic_compare_exchange_n(&p->seq, &seq, seq + 1, 0,
                                           __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED)) {
            return p;
        }
    }
    return NULL;
}

static void sbt_path_give(sbt_path_t *p)
{
    __atomic_fetch_add(&p->seq, 1, __ATOMIC_RELEASE);
}

/** The lowest minimum RTT to @a client lately (@a own_us if none is
 *  lower), and whether another connection to it looks (@a v). */
static void sbt_path_client(const apr_sockaddr_t *client, apr_uint64_t conn,
                            apr_uint32_t own_us, apr_int64_t now,
                            sbt_path_view_t *v)
{
    sbt_path_t *p = sbt_path_take(client);
    int stale;

    if (p == NULL) {
        return;
    }
    stale = now - p->seen > SBT_PATH_FRESH;
    if (p->family != (apr_uint32_t)client->family
        || memcmp(p->addr, client->ipaddr_ptr, client->ipaddr_len)) {
        if (p->family && !stale) {      /* another address's, fresh */
            sbt_path_give(p);
            return;
        }
        /* the slot is this address's now (seq is the taker's word) */
        p->family = (apr_uint32_t)client->family;
        memset(p->addr, 0, sizeof(p->addr));
        memcpy(p->addr, client->ipaddr_ptr, client->ipaddr_len);
        p->min_rtt_us = own_us;
        p->seen = 0;
        memset(p->looker, 0, sizeof(p->looker));
    }
    if (stale || own_us <= p->min_rtt_us) {
        p->min_rtt_us = own_us;
        p->seen = now;
    }
    v->min_rtt_us = p->min_rtt_us;
    v->shared = sbt_path_shared(p, conn, now);
    sbt_path_give(p);
}

/* ---- the board ---- */

/** The board's row for @a us (at least 1 ms): about 4 x log2(ms), from
 *  its top bit and the two below it. */
static int sbt_board_bucket(apr_uint32_t us)
{
    int top = 0, b;

    while (us >> (top + 1)) {
        top++;
    }
    /* 1000 us: top bit 9, 4 x log2(1000) = 39.9 */
    b = 4 * top + (int)((us >> (top - 2)) & 3) - 40;
    return b < 0 ? 0 : b >= SBT_BOARD_BUCKETS ? SBT_BOARD_BUCKETS - 1 : b;
}

/** The crowds' delivery now: the sum of their flows' fresh rates. */
static apr_uint64_t sbt_flows_sum(apr_int64_t now)
{
    apr_uint64_t sum = 0;
    int i;

    for (i = 0; i < SBT_FLOW_SLOTS; i++) {
        const sbt_flow_t *f = &sbt_paths->flow[i];

        if (__atomic_load_n(&f->conn, __ATOMIC_RELAXED)
            && now - __atomic_load_n(&f->at, __ATOMIC_RELAXED)
               <= SBT_FLOW_FRESH) {
            sum += __atomic_load_n(&f->rate, __ATOMIC_RELAXED);
        }
    }
    return sum;
}

/** The slice of epoch @a e, made current if it is not (its bits of two
 *  seconds ago cleared, and the crowds' delivery summed, once, by whoever
 *  moves it). */
static sbt_slice_t *sbt_board_slice(apr_uint64_t e)
{
    sbt_slice_t *sl = &sbt_paths->slice[e % SBT_BOARD_SLICES];
    apr_uint64_t was = __atomic_load_n(&sl->epoch, __ATOMIC_ACQUIRE);
    int i;

    if (was < e
        && __atomic_compare_exchange_n(&sl->epoch, &was, e, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        for (i = 0; i < SBT_BOARD_BUCKETS; i++) {
            __atomic_store_n(&sl->flows[i], 0, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&sl->sent, sbt_flows_sum((apr_int64_t)e
                                                  * SBT_BOARD_SLICE_US),
                         __ATOMIC_RELAXED);
    }
    return sl;
}

static void sbt_board_mark(apr_uint64_t *flows, apr_uint64_t bit)
{
    __atomic_fetch_or(flows, bit, __ATOMIC_RELAXED);
}

static int sbt_popcount(apr_uint64_t v)
{
    int n = 0;

    for (; v; v &= v - 1) {
        n++;
    }
    return n;
}

/** The slices a look compares with: the last WINDOW_MIN, or two RTTs. */
static int sbt_board_window(apr_uint32_t srtt_us)
{
    int window = (int)(2 * (apr_uint64_t)srtt_us / SBT_BOARD_SLICE_US) + 1;

    return window < SBT_BOARD_WINDOW_MIN ? SBT_BOARD_WINDOW_MIN
           : window > SBT_BOARD_SLICES - 1 ? SBT_BOARD_SLICES - 1 : window;
}

/** Mark flow @a bit at @a queue_us on epoch @a e's slice; how many
 *  other flows the last @a window slices have within BAND rows of it. */
static int sbt_board_look(apr_uint64_t bit, apr_uint32_t queue_us,
                          apr_uint64_t e, int window)
{
    apr_uint64_t seen = 0;
    int row = sbt_board_bucket(queue_us), k, b;

    sbt_board_mark(&sbt_board_slice(e)->flows[row], bit);
    for (k = 0; k < window && (apr_uint64_t)k <= e; k++) {
        const sbt_slice_t *sl = &sbt_paths->slice[(e - k) % SBT_BOARD_SLICES];

        if (__atomic_load_n(&sl->epoch, __ATOMIC_ACQUIRE) != e - k) {
            continue;
        }
        for (b = row - SBT_BOARD_BAND; b <= row + SBT_BOARD_BAND; b++) {
            if (b >= 0 && b < SBT_BOARD_BUCKETS) {
                seen |= __atomic_load_n(&sl->flows[b], __ATOMIC_RELAXED);
            }
        }
    }
    return sbt_popcount(seen & ~bit);
}

/* ---- the crowds' delivery ---- */

/** Raise the shared time @a at to @a t (never lower it). */
static void sbt_path_raise(apr_int64_t *at, apr_int64_t t)
{
    apr_int64_t was = __atomic_load_n(at, __ATOMIC_RELAXED);

    while (t > was
           && !__atomic_compare_exchange_n(at, &was, t, 0, __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {
    }
}

/** Keep flow @a id's delivery rate @a rate in its slot while it is a
 *  crowd's (@a member), else free the slot it has. */
static void sbt_flow_note(apr_uint64_t id, int member, apr_uint64_t rate,
                          apr_int64_t now)
{
    apr_uint64_t h = sbt_hash(&id, sizeof(id)), was = 0, owner;
    sbt_flow_t *f, *free_slot = NULL;
    int i;

    for (i = 0; i < SBT_FLOW_PROBES; i++) {
        f = &sbt_paths->flow[(h + (apr_uint64_t)i) % SBT_FLOW_SLOTS];
        owner = __atomic_load_n(&f->conn, __ATOMIC_RELAXED);
        if (owner == id) {
            break;
        }
        if (!free_slot && (!owner || now - __atomic_load_n(&f->at,
                                                           __ATOMIC_RELAXED)
                                     > SBT_FLOW_FRESH)) {
            free_slot = f;
            was = owner;
        }
        f = NULL;
    }
    if (!member) {
        if (f) {
            __atomic_store_n(&f->conn, 0, __ATOMIC_RELAXED);
        }
        return;
    }
    if (!f && free_slot
        && __atomic_compare_exchange_n(&free_slot->conn, &was, id, 0,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        f = free_slot;
    }
    if (f) {            /* else: 8 slots taken, the flow goes uncounted */
        __atomic_store_n(&f->rate, rate, __ATOMIC_RELAXED);
        __atomic_store_n(&f->at, now, __ATOMIC_RELAXED);
    }
}

/** The crowds' delivery, bytes/s: the mean of the last SENT_SLICES
 *  slices' sums, up to epoch @a e. */
static apr_uint64_t sbt_sent_rate(apr_uint64_t e)
{
    apr_uint64_t sum = 0, n = 0;
    int k;

    for (k = 0; k < SBT_SENT_SLICES && (apr_uint64_t)k <= e; k++) {
        const sbt_slice_t *sl = &sbt_paths->slice[(e - k) % SBT_BOARD_SLICES];

        if (__atomic_load_n(&sl->epoch, __ATOMIC_ACQUIRE) == e - k) {
            sum += __atomic_load_n(&sl->sent, __ATOMIC_RELAXED);
            n++;
        }
    }
    return n ? sum / n : 0;
}

/** Raise the current block's peak to @a rate; the highest of the last
 *  PEAK_BLOCKS blocks. */
static apr_uint64_t sbt_sent_peak(apr_uint64_t rate, apr_int64_t now)
{
    apr_uint64_t b = (apr_uint64_t)now / SBT_PEAK_BLOCK_US, peak = 0, was;
    sbt_peak_t *cur = &sbt_paths->peak[b % SBT_PEAK_BLOCKS];
    int k;

    was = __atomic_load_n(&cur->epoch, __ATOMIC_ACQUIRE);
    if (was < b && __atomic_compare_exchange_n(&cur->epoch, &was, b, 0,
                                               __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&cur->rate, 0, __ATOMIC_RELAXED);
    }
    was = __atomic_load_n(&cur->rate, __ATOMIC_RELAXED);
    while (rate > was
           && !__atomic_compare_exchange_n(&cur->rate, &was, rate, 0,
                                           __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {
    }
    for (k = 0; k < SBT_PEAK_BLOCKS && (apr_uint64_t)k <= b; k++) {
        const sbt_peak_t *p = &sbt_paths->peak[(b - k) % SBT_PEAK_BLOCKS];
        apr_uint64_t r = __atomic_load_n(&p->rate, __ATOMIC_RELAXED);

        if (__atomic_load_n(&p->epoch, __ATOMIC_ACQUIRE) == b - k
            && r > peak) {
            peak = r;
        }
    }
    return peak;
}

void sbt_path_look(const apr_sockaddr_t *client, const void *conn,
                   const sbt_path_seen_t *seen, sbt_path_view_t *v)
{
    apr_int64_t now = sbt_clock_us();
    apr_uint64_t id = sbt_path_id(conn), e = (apr_uint64_t)now
                                             / SBT_BOARD_SLICE_US;

    *v = (sbt_path_view_t){.min_rtt_us = seen->own_min_rtt_us};
    if (!sbt_paths || !seen->own_min_rtt_us) {
        return;
    }
    sbt_path_client(client, id, seen->own_min_rtt_us, now, v);
    if (seen->queue_us >= 1000) {
        v->peers = sbt_board_look(APR_UINT64_C(1)
                                  << (sbt_hash(&id, sizeof(id)) & 63),
                                  seen->queue_us, e,
                                  sbt_board_window(seen->srtt_us));
    }
    sbt_flow_note(id, seen->member,
                  seen->since_us && now > seen->since_us
                  ? seen->delivered * 1000000
                    / (apr_uint64_t)(now - seen->since_us) : 0, now);
    if (seen->member && !seen->queue_us) {
        sbt_path_raise(&sbt_paths->drained_at, now);
    }
    sbt_board_slice(e);
    v->crowd_rate = sbt_sent_rate(e);
    v->crowd_peak = sbt_sent_peak(v->crowd_rate, now);
    v->drained_at = __atomic_load_n(&sbt_paths->drained_at,
                                    __ATOMIC_RELAXED);
    v->contested_until = __atomic_load_n(&sbt_paths->contested_until,
                                         __ATOMIC_RELAXED);
}

void sbt_path_contest(apr_int64_t until)
{
    if (sbt_paths) {
        sbt_path_raise(&sbt_paths->contested_until, until);
    }
}

void sbt_path_leave(const apr_sockaddr_t *client, const void *conn)
{
    apr_uint64_t id = sbt_path_id(conn);
    sbt_path_t *p;
    int i;

    if (!sbt_paths) {
        return;
    }
    sbt_flow_note(id, 0, 0, 0);
    if ((p = sbt_path_take(client)) == NULL) {
        return;
    }
    /* This one is done: the others' next looks share nothing with it. */
    for (i = 0; i < SBT_PATH_LOOKERS; i++) {
        if (p->looker[i].conn == id) {
            p->looker[i] = (sbt_looker_t){0, 0};
        }
    }
    sbt_path_give(p);
}

/** The segment: this build's layout, kept across restarts so that both
 *  generations' children of a graceful restart share it. */
static int sbt_path_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                                apr_pool_t *ptemp, server_rec *s)
{
    sbt_paths_t **kept = ap_retained_data_get(SBT_PATH_RETAINED);
    apr_shm_t *shm;
    apr_status_t rv;

    (void)pconf; (void)plog; (void)ptemp;
    if (!kept) {
        kept = ap_retained_data_create(SBT_PATH_RETAINED, sizeof(*kept));
    }
    sbt_paths = *kept;
    if (sbt_paths && sbt_paths->magic == SBT_PATH_MAGIC
        && sbt_paths->version == SBT_PATH_VERSION
        && sbt_paths->size == sizeof(sbt_paths_t)) {
        return OK;
    }
    /* The old one stays mapped for the old generation's children. */
    rv = apr_shm_create(&shm, sizeof(sbt_paths_t), NULL, s->process->pool);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s, "SndbufTune auto: "
                     "no shared memory for what connections see of their "
                     "paths (%" APR_SIZE_T_FMT " bytes): each connection "
                     "keeps to its own figures", sizeof(sbt_paths_t));
        sbt_paths = *kept = NULL;
        return OK;
    }
    sbt_paths = apr_shm_baseaddr_get(shm);
    memset(sbt_paths, 0, sizeof(*sbt_paths));
    sbt_paths->magic = SBT_PATH_MAGIC;
    sbt_paths->version = SBT_PATH_VERSION;
    sbt_paths->size = sizeof(sbt_paths_t);
    *kept = sbt_paths;
    return OK;
}

static void sbt_path_child_init(apr_pool_t *pchild, server_rec *s)
{
    (void)pchild; (void)s;
    sbt_my_pid = (apr_uint64_t)getpid();
}

void sbt_path_register_hooks(void)
{
    /* The segment before the children fork, which inherit it. */
    ap_hook_post_config(sbt_path_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Each child's part of its connections' names. */
    ap_hook_child_init(sbt_path_child_init, NULL, NULL, APR_HOOK_MIDDLE);
}
