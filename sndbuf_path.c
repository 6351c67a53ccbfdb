/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_path.c: what this server's auto flows deliver, shared by all its
 * child processes, so that a flow that delivers short of its peak can
 * tell whether its loss went to its crowd: this server's other flows at
 * its RTT now, whatever their addresses and processes (docs/auto.md,
 * "Crowds").  Flows through one bottleneck share its queue, so their RTTs
 * move together; and what one loses to the others there, they gain: the
 * sum holds.  A flow whose loss no such flow gained has lost it to a
 * sender this server does not know of, or to a path of its own.  Flows
 * to one client address at one RTT take the same path: a late comer,
 * whose own minimum RTT began in the queue the others keep, takes theirs
 * (behind a NAT, another path has another RTT).  Each flow keeps its RTT,
 * its minimum and its delivery rate in each second of the last 16 in a
 * slot of its own, and reads them all once a second.
 *
 * One anonymous shared-memory segment, made before the children fork and
 * kept across restarts.  No lock: a slot has one writer, the flow whose
 * id it holds, taken with a compare-and-swap from a free slot or one no
 * flow wrote for STALE (a child killed mid-look leaves nothing held); a
 * reader skips slots not written for FRESH, and reads each field whole.
 * Ids come from one counter in the segment: unique across children and
 * restarts, and no client chooses where its flow's slot is.  The atomics
 * are the compiler's: ThreadSanitizer sees them, not APR's library calls.
 */

#include "httpd.h"
#include "http_log.h"

#include "apr_shm.h"

#include "sndbuf_tune.h"

APLOG_USE_MODULE(sndbuf_tune);

/* Flows with a slot; one whose PROBES slots are all taken goes without:
 * it counts in no crowd, and has none. */
#define SBT_PATH_SLOTS      1024
#define SBT_PATH_PROBES     8

/* A slot no look wrote for FRESH is read by no one; for STALE it may be
 * taken (its flow's child was killed, or its client stopped reading: a
 * look after that finds its slot gone and takes another). */
#define SBT_PATH_FRESH_US   2000000
#define SBT_PATH_STALE_US   (4 * SBT_PATH_FRESH_US)

/* Another flow is at this flow's RTT when its smoothed RTT is within
 * 1/NEAR_DIV of this one's: smoothed RTTs read once an RTT or less often
 * differ that much in one queue. */
#define SBT_PATH_NEAR_DIV   4

/* A flow's delivery rate (sndbuf_law.c's, over about a second) in KiB/s
 * per block of BLOCK_US, BLOCKS of them (16 s), a block it did not look
 * in holding the one before. */
#define SBT_PATH_BLOCK_US   1000000
#define SBT_PATH_BLOCKS     16

#define SBT_PATH_MAGIC      0x53425450u     /* "SBTP" */
#define SBT_PATH_VERSION    5u
#define SBT_PATH_RETAINED   "mod_sndbuf_tune/paths"

/* Two cache lines, each slot on lines of its own. */
typedef struct {
    apr_uint64_t id;            /**< its flow's; 0: free */
    apr_int64_t at;             /**< the last look, sbt_clock_us() */
    apr_uint64_t block;         /**< the newest rate's block */
    apr_uint32_t srtt_us;       /**< at the last look */
    apr_uint32_t min_rtt_us;    /**< its own */
    apr_uint32_t family;        /**< its client's address */
    apr_uint64_t addr[2];
    apr_uint32_t rate[SBT_PATH_BLOCKS];
} __attribute__((aligned(64))) sbt_path_slot_t;

/* The children share the atomics: no lock of one process's may stand in. */
_Static_assert(__atomic_always_lock_free(sizeof(apr_uint64_t), 0),
               "sndbuf_path.c needs lock-free 64-bit atomics");

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t version;
    apr_size_t size;
    apr_uint64_t next_id;
    sbt_path_slot_t slot[SBT_PATH_SLOTS];
} sbt_paths_t;

/* Set in post_config, inherited by the children; NULL: no segment. */
static sbt_paths_t *sbt_paths;

#define SBT_LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define SBT_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/** Take a slot for a new flow (@a f) to @a client: a free one, or one
 *  whose flow has not looked for STALE.  It is fresh at once, so that no
 *  other taker counts it stale, and at no one's RTT until its first
 *  write: a reader that sees this look's time sees its address too. */
static void sbt_path_take(sbt_path_flow_t *f, const apr_sockaddr_t *client,
                          apr_int64_t now)
{
    apr_uint64_t addr[2] = {0, 0};
    int i;

    if (client && client->ipaddr_len > 0
        && client->ipaddr_len <= (int)sizeof(addr)) {
        memcpy(addr, client->ipaddr_ptr, client->ipaddr_len);
    }
    f->id = __atomic_add_fetch(&sbt_paths->next_id, 1, __ATOMIC_RELAXED);
    f->slot = -1;
    for (i = 0; i < SBT_PATH_PROBES; i++) {
        int k = (int)((f->id + (apr_uint64_t)i) % SBT_PATH_SLOTS);
        sbt_path_slot_t *p = &sbt_paths->slot[k];
        apr_uint64_t was = SBT_LOAD(&p->id);

        if ((was && now - SBT_LOAD(&p->at) <= SBT_PATH_STALE_US)
            || !__atomic_compare_exchange_n(&p->id, &was, f->id, 0,
                                            __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
            continue;
        }
        SBT_STORE(&p->srtt_us, 0);
        SBT_STORE(&p->block, 0);
        SBT_STORE(&p->addr[0], addr[0]);
        SBT_STORE(&p->addr[1], addr[1]);
        SBT_STORE(&p->family, client ? (apr_uint32_t)client->family : 0);
        __atomic_store_n(&p->at, now, __ATOMIC_RELEASE);
        f->slot = k;
        return;
    }
}

/** Write this look into the flow's own slot: its RTT, and its rate in
 *  this block and (its last rate) in any it did not look in since. */
static void sbt_path_write(sbt_path_slot_t *p, const sbt_path_look_t *lk,
                           apr_int64_t now)
{
    apr_uint64_t b = (apr_uint64_t)now / SBT_PATH_BLOCK_US, k;
    apr_uint64_t was = SBT_LOAD(&p->block), kib = lk->rate >> 10;
    apr_uint32_t carry = was ? SBT_LOAD(&p->rate[was % SBT_PATH_BLOCKS]) : 0;

    for (k = b > was + SBT_PATH_BLOCKS ? b - SBT_PATH_BLOCKS : was + 1;
         k < b; k++) {
        SBT_STORE(&p->rate[k % SBT_PATH_BLOCKS], carry);
    }
    SBT_STORE(&p->rate[b % SBT_PATH_BLOCKS],
              kib > 0xffffffff ? 0xffffffff : (apr_uint32_t)kib);
    __atomic_store_n(&p->block, b, __ATOMIC_RELEASE);
    SBT_STORE(&p->srtt_us, lk->srtt_us);
    SBT_STORE(&p->min_rtt_us, lk->min_rtt_us);
    __atomic_store_n(&p->at, now, __ATOMIC_RELEASE);
}

/** Slot @a p's rate in block @a b (B/s): a block past its newest has the
 *  newest's; one older than BLOCKS none. */
static apr_uint64_t sbt_path_rate(const sbt_path_slot_t *p, apr_uint64_t b)
{
    apr_uint64_t newest = __atomic_load_n(&p->block, __ATOMIC_ACQUIRE);

    b = b > newest ? newest : b;
    return b + SBT_PATH_BLOCKS > newest
           ? (apr_uint64_t)SBT_LOAD(&p->rate[b % SBT_PATH_BLOCKS]) << 10 : 0;
}

/** The block of the last BLOCKS in which slot @a p's rate was highest. */
static apr_uint64_t sbt_path_peak(const sbt_path_slot_t *p, apr_uint64_t b)
{
    apr_uint64_t best = b, k;

    for (k = b; k + SBT_PATH_BLOCKS > b && k > 0; k--) {
        best = sbt_path_rate(p, k) > sbt_path_rate(p, best) ? k : best;
    }
    return best;
}

/** Is @a rtt within 1/NEAR_DIV of @a mine? */
static int sbt_path_near(apr_uint32_t rtt, apr_uint32_t mine)
{
    apr_uint32_t near = mine / SBT_PATH_NEAR_DIV;

    return rtt + near >= mine && rtt <= mine + near;
}

/** The crowd of the flow in slot @a mine: the fresh flows at its RTT,
 *  their rate now and when its own was highest, and the lowest minimum
 *  RTT of those to its client's address. */
static void sbt_path_crowd(int mine, apr_int64_t now, sbt_path_crowd_t *c)
{
    const sbt_path_slot_t *me = &sbt_paths->slot[mine];
    apr_uint64_t b = (apr_uint64_t)now / SBT_PATH_BLOCK_US;
    apr_uint64_t then = sbt_path_peak(me, b), rate;
    apr_uint32_t srtt = SBT_LOAD(&me->srtt_us);
    int i;

    c->own_then = sbt_path_rate(me, then);
    for (i = 0; i < SBT_PATH_SLOTS; i++) {
        const sbt_path_slot_t *p = &sbt_paths->slot[i];
        apr_uint32_t min_rtt;

        /* The look's time first: what was written before it comes with
         * it.  A flow that has not delivered yet is at no bottleneck. */
        if (i == mine
            || now - __atomic_load_n(&p->at, __ATOMIC_ACQUIRE)
               > SBT_PATH_FRESH_US
            || !SBT_LOAD(&p->id)
            || !sbt_path_near(SBT_LOAD(&p->srtt_us), srtt)
            || !(rate = sbt_path_rate(p, b))) {
            continue;
        }
        min_rtt = SBT_LOAD(&p->min_rtt_us);
        c->members++;
        c->rate += rate;
        c->rate_then += sbt_path_rate(p, then);
        if (SBT_LOAD(&p->family) == SBT_LOAD(&me->family)
            && SBT_LOAD(&p->addr[0]) == SBT_LOAD(&me->addr[0])
            && SBT_LOAD(&p->addr[1]) == SBT_LOAD(&me->addr[1])
            && (!c->min_rtt_us || min_rtt < c->min_rtt_us)) {
            c->min_rtt_us = min_rtt;
        }
    }
}

const sbt_path_crowd_t *sbt_path_look(sbt_path_flow_t *f,
                                      const apr_sockaddr_t *client,
                                      const sbt_path_look_t *lk)
{
    apr_int64_t now = sbt_clock_us();

    if (!sbt_paths) {
        return &f->crowd;
    }
    /* New, its slot taken, or none to be had at its last try a block
     * ago. */
    if (!f->id || (f->slot >= 0
                   && SBT_LOAD(&sbt_paths->slot[f->slot].id) != f->id)
        || (f->slot < 0 && now - f->crowd_at >= SBT_PATH_BLOCK_US)) {
        sbt_path_take(f, client, now);
    }
    if (f->slot < 0) {
        f->crowd_at = now;
        return &f->crowd;
    }
    sbt_path_write(&sbt_paths->slot[f->slot], lk, now);
    /* A crowd reads every slot: once a block at most. */
    if (now - f->crowd_at >= SBT_PATH_BLOCK_US) {
        memset(&f->crowd, 0, sizeof(f->crowd));
        sbt_path_crowd(f->slot, now, &f->crowd);
        f->crowd_at = now;
    }
    return &f->crowd;
}

void sbt_path_leave(sbt_path_flow_t *f)
{
    apr_uint64_t id = f->id;

    if (sbt_paths && f->id && f->slot >= 0) {
        sbt_path_slot_t *p = &sbt_paths->slot[f->slot];

        __atomic_compare_exchange_n(&p->id, &id, 0, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
    }
    f->slot = -1;
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
    /* The old one stays mapped for the old generation's children.  The
     * base APR returns is not a cache line's: one more for that. */
    rv = apr_shm_create(&shm, sizeof(sbt_paths_t) + 64, NULL,
                        s->process->pool);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s, "SndbufTune auto: "
                     "no shared memory for what flows see of their paths "
                     "(%" APR_SIZE_T_FMT " bytes): each flow keeps to its "
                     "own figures", sizeof(sbt_paths_t));
        sbt_paths = *kept = NULL;
        return OK;
    }
    sbt_paths = (sbt_paths_t *)APR_ALIGN((apr_uintptr_t)
                                         apr_shm_baseaddr_get(shm), 64);
    memset(sbt_paths, 0, sizeof(*sbt_paths));
    sbt_paths->magic = SBT_PATH_MAGIC;
    sbt_paths->version = SBT_PATH_VERSION;
    sbt_paths->size = sizeof(sbt_paths_t);
    *kept = sbt_paths;
    return OK;
}

void sbt_path_register_hooks(void)
{
    /* The segment before the children fork, which inherit it. */
    ap_hook_post_config(sbt_path_post_config, NULL, NULL, APR_HOOK_MIDDLE);
}
