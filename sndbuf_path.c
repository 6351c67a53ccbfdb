/* SPDX-License-Identifier: Apache-2.0 */

/*
 * sndbuf_path.c: what this server's auto flows see of their paths, shared
 * by all its child processes, so that a flow can tell its crowd: the
 * other flows whose queues moved with its own lately, through the same
 * bottleneck whatever their addresses and processes (docs/auto.md,
 * "Crowds").  Each flow keeps, in a slot of its own, the queue it saw in
 * each slice of the last 16 s and what it delivered in each second; a
 * flow that asks (its delivery fell short of its peak: sndbuf_law.c)
 * reads every slot for the flows whose queues match its own and moved
 * with it, and sums what they delivered.
 *
 * One anonymous shared-memory segment, made before the children fork and
 * kept across restarts.  No lock: a slot has one writer, the flow whose
 * id it holds, taken with a compare-and-swap from a free slot or one no
 * flow wrote for FRESH (a child killed mid-look leaves nothing held); a
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

/* Flows with a slot; one whose SLOT_PROBES slots are all taken goes
 * without: it counts in no crowd, and reads its own like any other. */
#define SBT_PATH_SLOTS      1024
#define SBT_PATH_PROBES     8

/* A slot no look wrote for this long is free, and read by no one. */
#define SBT_PATH_FRESH_US   2000000

/* The queue per slice of SLICE_US, SLICES of them (16 s), in quarter
 * octaves from 1 ms (sbt_path_code).  Two flows match when, over at
 * least MATCH_MIN slices both saw, all but 1/MATCH_SHIFT of their queues
 * are within BAND quarter octaves (+-41%), and moved together: over them
 * the queue went from one level to twice it (MOVED).  Same level alone is
 * no proof: every steered flow keeps a few milliseconds, and a
 * bufferbloated access link's queue may be as long as another's. */
#define SBT_PATH_SLICE_US   250000
#define SBT_PATH_SLICES     64
#define SBT_PATH_MATCH_MIN  16
#define SBT_PATH_MATCH_SHIFT 3
#define SBT_PATH_BAND       2
#define SBT_PATH_MOVED      4

/* What a flow delivered per block of BLOCK_US, in KiB, BLOCKS of them
 * (16 s): a crowd's rate is its members' sum over the last two whole
 * blocks, its peak the most of its members' sum in one block. */
#define SBT_PATH_BLOCK_US   1000000
#define SBT_PATH_BLOCKS     16

#define SBT_PATH_MAGIC      0x53425450u     /* "SBTP" */
#define SBT_PATH_VERSION    3u
#define SBT_PATH_RETAINED   "mod_sndbuf_tune/paths"

/* Two cache lines and a half: each slot on lines of its own. */
typedef struct {
    apr_uint64_t id;            /**< its flow's; 0: free */
    apr_int64_t at;             /**< the last look, sbt_clock_us() */
    apr_uint64_t slice;         /**< the newest queue's slice */
    apr_uint64_t block;         /**< the newest delivery's block */
    unsigned char queue[SBT_PATH_SLICES];
    apr_uint32_t kib[SBT_PATH_BLOCKS];
} __attribute__((aligned(64))) sbt_path_slot_t;

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

/** The queue as a slice's code: 0 none seen, 1 under 1 ms, then about
 *  2 + 4 x log2(ms), from its top bit and the two below it. */
static unsigned char sbt_path_code(apr_uint32_t queue_us)
{
    int top = 31 - __builtin_clz(queue_us | 1), c;

    if (queue_us < 1000) {
        return 1;
    }
    /* 1000 us: top bit 9, 4 x log2(1000) = 39.9 */
    c = 4 * top + (int)((queue_us >> (top - 2)) & 3) - 38;
    return (unsigned char)(c < 2 ? 2 : c > 255 ? 255 : c);
}

/** Take a slot for a new flow (@a f): a free one, or one whose flow has
 *  not looked for FRESH, which is cleared before any reader counts it. */
static void sbt_path_take(sbt_path_flow_t *f, apr_int64_t now)
{
    int i;

    f->id = __atomic_add_fetch(&sbt_paths->next_id, 1, __ATOMIC_RELAXED);
    for (i = 0; i < SBT_PATH_PROBES; i++) {
        int k = (int)((f->id + (apr_uint64_t)i) % SBT_PATH_SLOTS);
        sbt_path_slot_t *p = &sbt_paths->slot[k];
        apr_uint64_t was = SBT_LOAD(&p->id);

        if ((was && now - SBT_LOAD(&p->at) <= SBT_PATH_FRESH_US)
            || !__atomic_compare_exchange_n(&p->id, &was, f->id, 0,
                                            __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
            continue;
        }
        SBT_STORE(&p->slice, 0);
        SBT_STORE(&p->block, 0);
        f->slot = k;
        return;
    }
    f->slot = -1;
}

/** Clear a ring's entries from its newest, @a *newest, up to @a e, which
 *  becomes the newest (released, once cleared). */
static void sbt_path_advance(apr_uint64_t *newest, apr_uint64_t e, int n,
                             unsigned char *bytes, apr_uint32_t *words)
{
    apr_uint64_t k, was = SBT_LOAD(newest);

    for (k = e > was + (apr_uint64_t)n ? e - (apr_uint64_t)n : was + 1;
         k <= e && e > was; k++) {
        if (bytes) {
            SBT_STORE(&bytes[k % (apr_uint64_t)n], 0);
        }
        else {
            SBT_STORE(&words[k % (apr_uint64_t)n], 0);
        }
    }
    if (e > was) {
        __atomic_store_n(newest, e, __ATOMIC_RELEASE);
    }
}

/** Write this look into the flow's own slot: its queue, and the KiB
 *  delivered since the last look (@a kib). */
static void sbt_path_write(sbt_path_slot_t *p, const sbt_path_look_t *lk,
                           apr_uint32_t kib_new, apr_int64_t now)
{
    apr_uint64_t e = (apr_uint64_t)now / SBT_PATH_SLICE_US;
    apr_uint64_t b = (apr_uint64_t)now / SBT_PATH_BLOCK_US;
    apr_uint32_t *kib = &p->kib[b % SBT_PATH_BLOCKS];

    sbt_path_advance(&p->slice, e, SBT_PATH_SLICES, p->queue, NULL);
    SBT_STORE(&p->queue[e % SBT_PATH_SLICES], sbt_path_code(lk->queue_us));
    sbt_path_advance(&p->block, b, SBT_PATH_BLOCKS, NULL, p->kib);
    SBT_STORE(kib, SBT_LOAD(kib) + kib_new);
    __atomic_store_n(&p->at, now, __ATOMIC_RELEASE);
}

/** The code of slot @a p's queue in slice @a e, 0 if not seen. */
static int sbt_path_queue(const sbt_path_slot_t *p, apr_uint64_t newest,
                          apr_uint64_t e)
{
    return e > newest || e + SBT_PATH_SLICES <= newest ? 0
           : SBT_LOAD(&p->queue[e % SBT_PATH_SLICES]);
}

/** Did slot @a p's queue move with @a mine's over the last SLICES?  Its
 *  newest first: most slots are another level now, and a scan stops at
 *  more disagreements than a match allows. */
static int sbt_path_match(const sbt_path_slot_t *mine,
                          const sbt_path_slot_t *p, apr_uint64_t e)
{
    apr_uint64_t n1 = __atomic_load_n(&mine->slice, __ATOMIC_ACQUIRE);
    apr_uint64_t n2 = __atomic_load_n(&p->slice, __ATOMIC_ACQUIRE);
    int k, both = 0, apart = 0, lo = 255, hi = 0;
    int a = sbt_path_queue(mine, n1, n2), b = sbt_path_queue(p, n2, n2);

    if (a && b && (a - b > SBT_PATH_BAND || b - a > SBT_PATH_BAND)) {
        return 0;
    }
    for (k = 0; k < SBT_PATH_SLICES && (apr_uint64_t)k <= e
         && apart <= SBT_PATH_SLICES >> SBT_PATH_MATCH_SHIFT; k++) {
        int a = sbt_path_queue(mine, n1, e - (apr_uint64_t)k);
        int b = sbt_path_queue(p, n2, e - (apr_uint64_t)k);

        if (!a || !b) {
            continue;
        }
        both++;
        if (a - b > SBT_PATH_BAND || b - a > SBT_PATH_BAND) {
            apart++;
            continue;
        }
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    return both >= SBT_PATH_MATCH_MIN && apart << SBT_PATH_MATCH_SHIFT <= both
           && hi - lo >= SBT_PATH_MOVED;
}

/** Add slot @a p's delivery per block, up to block @a b, into @a sum. */
static void sbt_path_add(const sbt_path_slot_t *p, apr_uint64_t b,
                         apr_uint64_t *sum)
{
    apr_uint64_t newest = __atomic_load_n(&p->block, __ATOMIC_ACQUIRE);
    int k;

    for (k = 0; k < SBT_PATH_BLOCKS && (apr_uint64_t)k <= b; k++) {
        apr_uint64_t at = b - (apr_uint64_t)k;

        if (at <= newest && at + SBT_PATH_BLOCKS > newest) {
            sum[k] += SBT_LOAD(&p->kib[at % SBT_PATH_BLOCKS]);
        }
    }
}

/** The crowd of the flow in slot @a mine: the fresh flows whose queues
 *  moved with its own, and their sum with its own delivery, into @a c. */
static void sbt_path_crowd(int mine, apr_int64_t now, sbt_path_crowd_t *c)
{
    const sbt_path_slot_t *me = &sbt_paths->slot[mine];
    apr_uint64_t e = (apr_uint64_t)now / SBT_PATH_SLICE_US;
    apr_uint64_t b = (apr_uint64_t)now / SBT_PATH_BLOCK_US;
    apr_uint64_t sum[SBT_PATH_BLOCKS] = {0};
    int i;

    for (i = 0; i < SBT_PATH_SLOTS; i++) {
        const sbt_path_slot_t *p = &sbt_paths->slot[i];

        if (i != mine && SBT_LOAD(&p->id)
            && now - __atomic_load_n(&p->at, __ATOMIC_ACQUIRE)
               <= SBT_PATH_FRESH_US
            && sbt_path_match(me, p, e)) {
            c->members++;
            sbt_path_add(p, b, sum);
        }
    }
    if (!c->members) {
        return;
    }
    sbt_path_add(me, b, sum);
    /* sum[0] is the block under way: whole ones from sum[1] on. */
    c->rate = (sum[1] + sum[2]) * 1024 * 1000000 / (2 * SBT_PATH_BLOCK_US);
    for (i = 1; i < SBT_PATH_BLOCKS; i++) {
        apr_uint64_t r = sum[i] * 1024 * 1000000 / SBT_PATH_BLOCK_US;

        c->peak = r > c->peak ? r : c->peak;
    }
}

void sbt_path_look(sbt_path_flow_t *f, const sbt_path_look_t *lk,
                   sbt_path_crowd_t *c)
{
    apr_int64_t now = sbt_clock_us();
    apr_uint64_t kib = lk->delivered >> 10, kib_new = kib - f->kib;

    *c = (sbt_path_crowd_t){0, 0, 0};
    if (!sbt_paths) {
        return;
    }
    if (!f->id) {               /* its first look: what came before is not
                                 * this response's */
        kib_new = 0;
    }
    if (!f->id || (f->slot >= 0
                   && SBT_LOAD(&sbt_paths->slot[f->slot].id) != f->id)) {
        sbt_path_take(f, now);  /* new, or its slot was taken as stale */
    }
    f->kib = kib;
    if (f->slot < 0) {
        return;
    }
    sbt_path_write(&sbt_paths->slot[f->slot], lk,
                   kib_new > 0xffffff ? 0xffffff : (apr_uint32_t)kib_new,
                   now);
    /* A crowd reads every slot: once a slice at most. */
    if (lk->ask && now - f->crowd_at >= SBT_PATH_SLICE_US) {
        f->crowd = (sbt_path_crowd_t){0, 0, 0};
        sbt_path_crowd(f->slot, now, &f->crowd);
        f->crowd_at = now;
    }
    if (lk->ask) {
        *c = f->crowd;
    }
}

void sbt_path_leave(sbt_path_flow_t *f)
{
    apr_uint64_t id = f->id;

    if (sbt_paths && f->id && f->slot >= 0) {
        sbt_path_slot_t *p = &sbt_paths->slot[f->slot];

        if (__atomic_compare_exchange_n(&p->id, &id, 0, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
            SBT_STORE(&p->at, 0);
        }
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
