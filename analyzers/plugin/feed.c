/* feed.c -- inline or queued hand-over of decoded events to the core (see
 * feed.h).
 *
 * The queue: FEED_CHUNKS chunks of FEED_CHUNK_BYTES, each a run of ops
 * (a fixed header, then the serializer name or the record bytes, padded
 * to 8).  The babeltrace2 thread fills `cur`; a full chunk (or any chunk
 * at feed_publish) goes to the `full` FIFO and the worker takes it, runs
 * the core on each op in order, and gives the chunk back to `spare`.  The
 * producer waits for a spare chunk when all are in flight (back-pressure:
 * memory is bounded).  An op larger than a chunk (a hostile trace's huge
 * sequence) grows that one chunk.  One mutex and two condition variables;
 * each hand-over is one lock per chunk, not per event.
 *
 * Invariant (asserted in debug builds, see chunks_accounted_locked()):
 * each of the FEED_CHUNKS chunks is in exactly one place: being filled
 * (`cur`), queued (`full`), being run by the worker (`busy`) or spare.
 */
#include "feed.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEED_CHUNKS 4
#define FEED_CHUNK_BYTES (256u << 10)
/* A partly filled chunk waits at most this long for more (live mode, or
 * flush-each-dump on a slow trickle of events). */
#define FEED_STALE_NS (50 * 1000000LL)

enum op_kind { OP_BEGIN = 1, OP_RECORDS, OP_END, OP_DISCARDED };

typedef struct op {
    uint32_t kind;
    uint32_t len; /* payload bytes after the header */
    int64_t pid, tid, ts;
    uint64_t dump_id;
    uint64_t a;  /* records: seq; end: bytes; discarded: count */
    int32_t b;   /* begin: protocol; end: status */
    int32_t pad; /* end: batches (schema v2), -1 unknown */
    uint32_t c;  /* end: flags (schema v3, SERTRACE_END_*) */
} op;

typedef struct chunk {
    uint8_t *data;
    size_t len, cap;
} chunk;

struct feed {
    sertrace_core *core;
    bool worker;
    /* inline mode */
    uint8_t *rec;
    size_t rec_cap;
    op pending; /* the records op whose bytes are being written */
    /* worker mode */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv_full;  /* worker: a full chunk, or stop */
    pthread_cond_t cv_spare; /* producer: a spare chunk, or idle */
    chunk *cur;
    chunk *full[FEED_CHUNKS];
    size_t full_head, full_n;
    chunk *spare[FEED_CHUNKS];
    size_t spare_n;
    bool busy; /* the worker holds a chunk */
    bool stop;
    int64_t handed_ns; /* monotonic time of the last hand-over */
    atomic_int failed;
    chunk chunks[FEED_CHUNKS];
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

#ifndef NDEBUG
/* The queue's counts add up: every chunk is in exactly one place.  Caller
 * holds mu (the producer changes `cur` only under it). */
static bool chunks_accounted_locked(const feed *f)
{
    return f->full_n <= FEED_CHUNKS && f->spare_n <= FEED_CHUNKS && f->full_head < FEED_CHUNKS &&
           (size_t)(f->cur != NULL) + f->full_n + (size_t)f->busy + f->spare_n == FEED_CHUNKS;
}
#endif

/* ---- worker ------------------------------------------------------------ */

static int run_op(sertrace_core *core, const op *o, const uint8_t *payload)
{
    switch (o->kind) {
    case OP_BEGIN:
        return sertrace_core_dump_begin(core, o->pid, o->tid, o->ts, o->dump_id,
                                        o->len ? (const char *)payload : NULL, o->len, o->b);
    case OP_RECORDS:
        return sertrace_core_records(core, o->pid, o->tid, o->ts, o->dump_id, (uint32_t)o->a,
                                     payload, o->len);
    case OP_END:
        return sertrace_core_dump_end_flags(core, o->pid, o->tid, o->ts, o->dump_id, o->a, o->b,
                                            o->pad, o->c);
    case OP_DISCARDED:
        return sertrace_core_discarded(core, o->pid, o->a);
    default:
        return -1;
    }
}

static void *worker_main(void *arg)
{
    feed *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->full_n == 0 && !f->stop)
            pthread_cond_wait(&f->cv_full, &f->mu);
        if (f->full_n == 0) /* stop, and nothing left */
            break;
        assert(chunks_accounted_locked(f) && !f->busy);
        chunk *c = f->full[f->full_head];
        f->full_head = (f->full_head + 1) % FEED_CHUNKS;
        f->full_n--;
        f->busy = true;
        bool skip = f->stop && atomic_load(&f->failed); /* destroy: drop */
        pthread_mutex_unlock(&f->mu);
        for (size_t off = 0; !skip && off < c->len;) {
            const op *o = (const op *)(c->data + off);
            assert(off + sizeof *o + pad8(o->len) <= c->len); /* ops never straddle the end */
            if (!atomic_load_explicit(&f->failed, memory_order_relaxed) &&
                run_op(f->core, o, c->data + off + sizeof *o) < 0)
                atomic_store(&f->failed, 1);
            off += sizeof *o + pad8(o->len);
        }
        c->len = 0;
        pthread_mutex_lock(&f->mu);
        f->busy = false;
        f->spare[f->spare_n++] = c;
        assert(chunks_accounted_locked(f));
        pthread_cond_signal(&f->cv_spare);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* ---- producer ---------------------------------------------------------- */

/* Give `cur` to the worker (if it holds anything). Caller holds mu. */
static void hand_over_locked(feed *f)
{
    if (!f->cur || f->cur->len == 0)
        return;
    assert(f->full_n < FEED_CHUNKS);
    f->full[(f->full_head + f->full_n) % FEED_CHUNKS] = f->cur;
    f->full_n++;
    f->cur = NULL;
    assert(chunks_accounted_locked(f));
    f->handed_ns = now_ns();
    pthread_cond_signal(&f->cv_full);
}

/* Room for an op with `payload` bytes at the end of `cur`; NULL when out
 * of memory. */
static op *reserve(feed *f, size_t payload)
{
    size_t need = sizeof(op) + pad8(payload);
    if (payload > UINT32_MAX)
        return NULL;
    if (f->cur && f->cur->cap - f->cur->len < need) {
        pthread_mutex_lock(&f->mu);
        hand_over_locked(f);
        pthread_mutex_unlock(&f->mu);
    }
    if (!f->cur) {
        pthread_mutex_lock(&f->mu);
        while (f->spare_n == 0)
            pthread_cond_wait(&f->cv_spare, &f->mu);
        f->cur = f->spare[--f->spare_n];
        assert(chunks_accounted_locked(f));
        pthread_mutex_unlock(&f->mu);
    }
    chunk *c = f->cur;
    if (c->cap - c->len < need) { /* bigger than a whole chunk */
        uint8_t *d = realloc(c->data, c->len + need);
        if (!d)
            return NULL;
        c->data = d;
        c->cap = c->len + need;
    }
    op *o = (op *)(c->data + c->len);
    memset(o, 0, sizeof *o);
    o->len = (uint32_t)payload;
    c->len += need;
    assert(c->len <= c->cap);
    return o;
}

static int failed(feed *f)
{
    return atomic_load_explicit(&f->failed, memory_order_relaxed) ? -1 : 0;
}

feed *feed_create(sertrace_core *core, bool worker)
{
    feed *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->core = core;
    if (!worker)
        return f;
    f->handed_ns = now_ns();
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv_full, NULL);
    pthread_cond_init(&f->cv_spare, NULL);
    f->worker = true;
    for (size_t i = 0; i < FEED_CHUNKS; i++) {
        f->chunks[i].data = malloc(FEED_CHUNK_BYTES);
        if (!f->chunks[i].data)
            goto inline_after_all;
        f->chunks[i].cap = FEED_CHUNK_BYTES;
        f->spare[f->spare_n++] = &f->chunks[i];
    }
    if (pthread_create(&f->thread, NULL, worker_main, f) != 0)
        goto inline_after_all;
    f->started = true;
    return f;
inline_after_all: /* no memory or no thread for the queue: run inline */
    for (size_t i = 0; i < FEED_CHUNKS; i++)
        free(f->chunks[i].data);
    pthread_cond_destroy(&f->cv_spare);
    pthread_cond_destroy(&f->cv_full);
    pthread_mutex_destroy(&f->mu);
    memset(f, 0, sizeof *f);
    f->core = core;
    return f;
}

bool feed_has_worker(const feed *f)
{
    return f->worker;
}

static void join_worker(feed *f, bool drop)
{
    if (!f->started)
        return;
    pthread_mutex_lock(&f->mu);
    if (!drop)
        hand_over_locked(f);
    else
        atomic_store(&f->failed, 1);
    f->stop = true;
    pthread_cond_signal(&f->cv_full);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    f->started = false;
}

void feed_destroy(feed *f)
{
    if (!f)
        return;
    if (f->worker) {
        join_worker(f, true);
        for (size_t i = 0; i < FEED_CHUNKS; i++)
            free(f->chunks[i].data);
        pthread_cond_destroy(&f->cv_spare);
        pthread_cond_destroy(&f->cv_full);
        pthread_mutex_destroy(&f->mu);
    }
    free(f->rec);
    free(f);
}

/* An op without record bytes: run now (inline) or queued.  `payload`
 * holds o.len bytes that are copied after the queued op; it may be NULL
 * only when o.len is 0.  The ops that never carry bytes (end, discarded)
 * go through submit(), which has no copy at all. */
static int submit_with(feed *f, op o, const void *payload)
{
    assert(payload != NULL || o.len == 0);
    if (!f->worker)
        return run_op(f->core, &o, payload);
    if (failed(f))
        return -1;
    op *q = reserve(f, o.len);
    if (!q)
        return -1;
    *q = o;
    if (payload != NULL && o.len != 0)
        memcpy(q + 1, payload, o.len);
    return 0;
}

static int submit(feed *f, op o)
{
    o.len = 0;
    if (!f->worker)
        return run_op(f->core, &o, NULL);
    if (failed(f))
        return -1;
    op *q = reserve(f, 0);
    if (!q)
        return -1;
    *q = o;
    return 0;
}

int feed_dump_begin(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                    const char *serializer, size_t serializer_len, int32_t protocol)
{
    if (!serializer || serializer_len > UINT32_MAX)
        serializer_len = 0;
    return submit_with(
        f, (op){OP_BEGIN, (uint32_t)serializer_len, pid, tid, ts, dump_id, 0, protocol, 0, 0},
        serializer);
}

uint8_t *feed_records_begin(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                            uint32_t seq, size_t n)
{
    op p = {OP_RECORDS, (uint32_t)n, pid, tid, ts, dump_id, seq, 0, 0, 0};
    if (n > UINT32_MAX)
        return NULL;
    if (!f->worker) { /* the bytes go to a buffer of our own, run at _end */
        if (n > f->rec_cap || !f->rec) {
            size_t cap = f->rec_cap ? f->rec_cap : 4096;
            while (cap < n)
                cap *= 2;
            uint8_t *r = realloc(f->rec, cap);
            if (!r)
                return NULL;
            f->rec = r;
            f->rec_cap = cap;
        }
        f->pending = p;
        return f->rec;
    }
    if (failed(f))
        return NULL;
    op *o = reserve(f, n);
    if (!o)
        return NULL;
    *o = p;
    return (uint8_t *)(o + 1);
}

int feed_records_end(feed *f)
{
    return f->worker ? failed(f) : run_op(f->core, &f->pending, f->rec);
}

int feed_dump_end(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id, uint64_t bytes,
                  int status, int64_t batches, uint32_t end_flags)
{
    int32_t nb = batches < 0 ? -1 : batches > INT32_MAX ? INT32_MAX : (int32_t)batches;
    return submit(f, (op){OP_END, 0, pid, tid, ts, dump_id, bytes, status, nb, end_flags});
}

int feed_discarded(feed *f, int64_t pid, uint64_t count)
{
    return submit(f, (op){OP_DISCARDED, 0, pid, -1, 0, 0, count, 0, 0, 0});
}

void feed_publish(feed *f, bool now)
{
    if (!f->worker || !f->cur || f->cur->len == 0)
        return;
    if (!now && now_ns() - f->handed_ns < FEED_STALE_NS)
        return;
    pthread_mutex_lock(&f->mu);
    hand_over_locked(f);
    pthread_mutex_unlock(&f->mu);
}

int feed_finish(feed *f)
{
    if (f->worker)
        join_worker(f, false);
    return failed(f);
}
