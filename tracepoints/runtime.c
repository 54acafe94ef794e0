/* tracepoints/runtime.c -- the sertrace runtime behind sertrace/sertrace.h.
 *
 * A serializer brackets each dump and each object with the API calls; this
 * file turns them into the batched records of sertrace/schema.h and, when
 * DISPATCH_TRACE is on, into live tree lines (probes/text.c).
 *
 * Shape, and why:
 * - sertrace_dump_begin() asks LTTng whether `sertrace:records` is enabled
 *   (one load, checked at every dump begin, so a session may enable
 *   sertrace:* at any time) and whether the text probe is on.  If nobody
 *   listens it returns NULL and the serializer skips every other call with
 *   one branch per object: that is the dormant cost.
 * - Dump handles are pooled per thread (a free list in TLS), so a steady
 *   stream of dumps allocates nothing.  Each handle owns a node stack
 *   (grows by doubling up to the depth cap; only a dump the text tree
 *   prints fills it: a dump that only records needs nothing of an open
 *   node but its depth, so sertrace_enter_fast() is the record and the
 *   depth, inline in the serializer), a type intern table (open
 *   addressing keyed by the type pointer, entries stamped with a per-dump
 *   generation so a new dump needs no clearing), an arena for type names
 *   (the text probe prints them), and a 4 KiB batch buffer.
 * - Each call appends one LEB128 record (a few ns) to the batch; the batch
 *   goes out as ONE `sertrace:records` event when the next record would not
 *   fit and at dump end.  No allocation, no lock, no lookup by name on the
 *   hot path (a node stack or type table only grows the first time a dump
 *   goes deeper or wider than any before it on that handle).
 * - Misuse (exit without enter, too deep, enters left open by a dump that
 *   claims success, a dump ended on another thread) is recorded as an
 *   ERROR record and a text flag, then ignored.  A NULL handle is the
 *   documented "not tracing" value and is a no-op everywhere.
 *
 * Ownership.  A handle belongs to the thread that began it (`owner`): it
 * sits in that thread's chain of open dumps (what sertrace_current_dump()
 * returns) and goes back to that thread's pool.  A dump ended on another
 * thread is reported, finished (footer, last records) by the ending
 * thread, and handed back through one atomic `state` (LIVE ->
 * ENDING_ELSEWHERE -> ENDED_ELSEWHERE, release); the owner unlinks it and
 * pools it at its next begin/end/current_dump (acquire), so the owner's
 * chain never points at a handle reused by someone else.  After fork(), the
 * child's handler marks the forking thread's open dumps dead (buffered text
 * and records dropped, every later call a no-op: the parent writes them),
 * a fork generation stamped in each handle keeps any other inherited
 * handle from emitting anything in the child, and the child gets its own
 * pid, tid and dump numbers (from 1) in what it emits: events carry the
 * emitter's pid and tid themselves (schema v2; why not LTTng's contexts:
 * "Fork" below) and `scope`, $SERTRACE_SCOPE, which `sertrace record`
 * filters on.
 *
 * The process-wide settings -- the environment knobs read once, the
 * in-process listener and the test hooks -- live in config.c (config.h);
 * this file is the per-dump work.
 */
#define _GNU_SOURCE /* gettid() */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sertrace-tp.h"
#include "sertrace/sertrace.h"
#include "config.h"
#include "runtime-internal.h"
#include "text.h"

#define NODE_STACK_INITIAL 64
#define TYPE_TABLE_INITIAL 64 /* slots; always a power of two */
#define SERIALIZER_MAX 63
/* The longest fixed-size record: a labelled NODE (schema v6), op + tag +
 * two 32-bit varints (5 bytes) + five 64-bit ones (10 bytes) = 62. */
#define RECORD_FIXED_MAX 64

struct node {
    uint64_t pos;
    uint64_t addr;
    uint64_t length;
    uint32_t type;
    uint8_t tag;
    bool state;   /* labelled ROLE STATE: its str-key children are attributes */
    uint64_t oob; /* out-of-band bytes (sertrace_oob), for the text tree */
};

struct type_slot {
    const void *key;
    uint32_t gen;   /* valid for the dump whose generation this is */
    uint32_t index; /* 1-based type index */
};

struct type_name {
    uint32_t off; /* into the arena */
    uint32_t len; /* UINT32_MAX: no name given */
};

/* Life of a handle (sertrace_dump.state), see "Ownership" above. */
enum dump_state {
    DUMP_FREE,             /* in its owner's pool, or ended by its owner */
    DUMP_LIVE,             /* begun, not yet ended */
    DUMP_ENDING_ELSEWHERE, /* another thread is ending it */
    DUMP_ENDED_ELSEWHERE,  /* ended by another thread: the owner reclaims it */
};

struct thread_state;

struct sertrace_dump {
    /* What sertrace.h's inline sertrace_atom_fast() reads and writes: the
     * first member, so that a handle's address is its address.  fast.len
     * is the batch's fill and fast.depth the open node count, for the
     * whole runtime; fast.batch points at `batch` below. */
    struct sertrace_dump_fast fast;
    uint64_t id;
    unsigned flags;
    bool lttng_on;   /* an LTTng session enabled sertrace:records */
    bool records_on; /* LTTng or test hooks */
    bool text_on;
    bool failed;                      /* sertrace_error() was called */
    bool dead;                        /* inherited through fork: every call is a no-op */
    _Atomic int state;                /* enum dump_state */
    const struct thread_state *owner; /* the thread that began it */
    unsigned fork_gen;                /* fork_generation when begun */
    int protocol;
    char serializer[SERIALIZER_MAX + 1];
    struct sertrace_internal_hooks hooks;
    sertrace_listener listener; /* sertrace_set_listener(), copied at begin */

    struct node *stack;
    uint32_t stack_cap;
    uint32_t overflow; /* enters beyond the depth cap, not yet exited */
    uint32_t max_depth;
    bool too_deep_reported;

    struct type_slot *slots;
    uint32_t slot_cap;
    uint32_t gen;
    uint32_t ntypes;
    struct type_name *names; /* names[1..ntypes] */
    uint32_t names_cap;
    char *arena;
    size_t arena_len;
    size_t arena_cap;

    /* The label given by sertrace_label() for the next node: the text
     * tree shows it, and the node's record carries it (schema v6 NODE)
     * unless `label_fold` is false (a kind beyond the NODE opcode's 3
     * bits, already written as a LABEL record). */
    uint8_t label_kind; /* SERTRACE_LABEL_NONE: none pending */
    bool label_fold;
    uint64_t label_value;

    uint32_t seq;
    uint8_t batch[SERTRACE_BATCH_BYTES];

    struct sertrace_text_dump text;

    struct sertrace_dump *outer;     /* enclosing dump on this thread */
    struct sertrace_dump *next_free; /* pool link */
};

/* Per-thread state: the chain of dumps begun on this thread and not yet
 * ended (innermost first, linked by `outer`), and the pool of free
 * handles.  Its address identifies the thread as a handle's owner. */
struct thread_state {
    struct sertrace_dump *current;
    struct sertrace_dump *free;
    bool key_set;
    int32_t tid; /* gettid(), 0 until first needed (and after fork) */
};

static pthread_key_t pool_key;
/* Bumped in the child of every fork: handles begun before are dead. */
static atomic_uint fork_generation;
static atomic_uint_fast64_t next_dump_id;

static __thread struct thread_state tls;

/* ---- handle pool ------------------------------------------------------- */

static void dump_free(struct sertrace_dump *d)
{
    free(d->stack);
    free(d->slots);
    free(d->names);
    free(d->arena);
    sertrace_text_free(&d->text);
    free(d);
}

static void pool_put(struct sertrace_dump *d);

/* Reclaim the handles of this thread's chain that another thread ended
 * (misuse, reported there): unlink them and return them to this thread's
 * pool.  The acquire load pairs with the ender's release store, after
 * which the ender never touches the handle again. */
static void prune_ended_elsewhere(void)
{
    struct sertrace_dump **link = &tls.current;

    while (*link != NULL) {
        struct sertrace_dump *d = *link;
        if (atomic_load_explicit(&d->state, memory_order_acquire) == DUMP_ENDED_ELSEWHERE) {
            *link = d->outer;
            atomic_store_explicit(&d->state, DUMP_FREE, memory_order_relaxed);
            pool_put(d);
        } else {
            link = &d->outer;
        }
    }
}

/* Thread exit: free the pooled handles of that thread (and those of its
 * chain another thread ended; dumps still open are left alone, since
 * another thread might still end them). */
static void pool_destroy(void *unused)
{
    (void)unused;
    prune_ended_elsewhere();
    while (tls.free != NULL) {
        struct sertrace_dump *d = tls.free;
        tls.free = d->next_free;
        dump_free(d);
    }
}

/* In the child of a fork: the dumps the forking thread had open were
 * begun by the parent, whose buffered text and records the parent itself
 * will write.  Drop them here and make every later call on those handles
 * a no-op (the child's own new dumps trace normally).  Handles of the
 * parent's other threads are caught by fork_generation where output
 * happens (batch_flush, sertrace_dump_end; the text probe checks the pid). */
static void make_dead(struct sertrace_dump *d)
{
    d->dead = true;
    d->fast.fast_end = 0;
    d->lttng_on = false;
    d->records_on = false;
    d->text_on = false;
    d->flags &= ~(unsigned)(SERTRACE_DUMP_LTTNG | SERTRACE_DUMP_TEXT);
    d->fast.len = 0;
    memset(&d->hooks, 0, sizeof d->hooks);
    sertrace_text_drop(&d->text);
}

/* Fork.  LTTng-UST caches the vpid (per process) and the vtid (per
 * thread) it records as context, and does not refresh them in a forked
 * child unless liblttng-ust-fork.so is preloaded: a child forked after its
 * parent recorded shows the parent's pid and tid (measured: a
 * multiprocessing Pool's workers all under the parent's pid, a parent and
 * a child pickling at once interleaved into one corrupt stream).  Its
 * exported remedy (lttng_ust_before_fork / _after_fork_parent /
 * _after_fork_child, what the preloaded helper calls around fork()) was
 * tried from pthread_atfork handlers and rejected: the child re-registers
 * with the session daemon at once (its start was 2.2 ms later), and a
 * child that closes its file descriptors before exec -- Python's
 * subprocess with preexec_fn, Criterion's test runner -- then aborted on
 * LTTng-UST's own assertions (3 of 5 subprocess children killed by SIGABRT
 * under a session; the same with the helper preloaded).  So libsertrace
 * does not touch LTTng-UST's fork handling: every event carries the pid
 * and tid as libsertrace sees them (schema v2 fields `pid`, `tid`), cached
 * here and forgotten in the child of a fork, and readers prefer those to
 * the contexts.  The child writes into the buffers it inherited, which is
 * how LTTng-UST records a forked child anyway; a session started only
 * after the fork does not reach a child that never exec'd (LTTng's rule:
 * preload liblttng-ust-fork.so for that, see tracepoints/README.md). */
static atomic_int cached_pid; /* 0: not known yet in this process */

static inline int32_t current_pid(void)
{
    int pid = atomic_load_explicit(&cached_pid, memory_order_relaxed);

    if (pid == 0) {
        pid = (int)getpid();
        atomic_store_explicit(&cached_pid, pid, memory_order_relaxed);
    }
    return pid;
}

static inline int32_t current_tid(void)
{
    if (tls.tid == 0)
        tls.tid = (int32_t)gettid();
    return tls.tid;
}

static void atfork_child(void)
{
    atomic_fetch_add(&fork_generation, 1);
    for (struct sertrace_dump *d = tls.current; d != NULL; d = d->outer)
        make_dead(d);
    /* A new process: its own pid and tid, and its own dump numbers from 1
     * (dump ids are unique per pid). */
    atomic_store_explicit(&cached_pid, 0, memory_order_relaxed);
    tls.tid = 0;
    atomic_store(&next_dump_id, 0);
}

void sertrace_runtime_process_init(void)
{
    pthread_key_create(&pool_key, pool_destroy);
    pthread_atfork(NULL, NULL, atfork_child);
}

static struct sertrace_dump *pool_get(void)
{
    struct sertrace_dump *d = tls.free;

    if (d != NULL) {
        tls.free = d->next_free;
        return d;
    }
    d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->stack = malloc(NODE_STACK_INITIAL * sizeof *d->stack);
    d->slots = calloc(TYPE_TABLE_INITIAL, sizeof *d->slots);
    if (d->stack == NULL || d->slots == NULL) {
        dump_free(d);
        return NULL;
    }
    d->stack_cap = NODE_STACK_INITIAL;
    d->fast.batch = d->batch;
    d->slot_cap = TYPE_TABLE_INITIAL;
    if (!tls.key_set) {
        pthread_setspecific(pool_key, (void *)1);
        tls.key_set = true;
    }
    return d;
}

static void pool_put(struct sertrace_dump *d)
{
    d->next_free = tls.free;
    tls.free = d;
}

/* ---- records ----------------------------------------------------------- */

/* LEB128, one byte first (depths, types, lengths, small sizes).  (A
 * loop-free encoder for long values was tried: more instructions per atom
 * record on `builtins` at every-object granularity, so the loop stays.) */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    return sertrace_put_varint(p, v); /* the one encoder, sertrace.h */
}

static inline size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void batch_flush(struct sertrace_dump *d)
{
    assert(d->fast.len <= SERTRACE_BATCH_BYTES);
    if (d->fast.len == 0)
        return;
    if (d->fork_gen != atomic_load_explicit(&fork_generation, memory_order_relaxed)) {
        make_dead(d); /* begun in the parent of a fork: not ours to emit */
        return;
    }
    if (d->lttng_on)
        lttng_ust_tracepoint(sertrace, records, d->id, d->seq, d->batch, d->fast.len, current_pid(),
                             current_tid(), sertrace_cfg_scope);
    if (d->hooks.records != NULL)
        d->hooks.records(d->hooks.ctx, d->id, d->seq, d->batch, d->fast.len);
    if (d->listener.records != NULL)
        d->listener.records(d->listener.ctx, d->id, d->seq, d->batch, d->fast.len);
    d->seq++;
    d->fast.len = 0;
    d->fast.base_addr = 0;
    d->fast.base_pos = 0;
    d->fast.base_far = 0;
}

/* batch_flush() where a record follows at once: the new batch opens with
 * a DEPTH record (schema v8, "Tiny atoms"), so that a reader that lost
 * the batch before is in step for the TATOMs of this one.  `open`: the
 * open nodes before the record to come (an enter's caller has counted
 * its node already). */
static void batch_next(struct sertrace_dump *d, uint32_t open)
{
    if (d->fast.len == 0)
        return; /* an empty batch: nothing to flush, none begins */
    batch_flush(d);
    uint8_t *p = d->batch;
    *p++ = SERTRACE_REC_DEPTH;
    p = put_varint(p, open);
    d->fast.len = (uint32_t)(p - d->batch);
}

/* Room for `n` more bytes in the batch (flushing first if needed). */
static inline uint8_t *batch_reserve(struct sertrace_dump *d, size_t n)
{
    if (d->fast.len + n > SERTRACE_BATCH_BYTES)
        batch_next(d, d->fast.depth);
    return d->batch + d->fast.len;
}

/* Where to encode a fixed-size record (at most RECORD_FIXED_MAX bytes):
 * straight into the batch when even the longest record fits (the common
 * case: no copy), else into `tmp`, then batch_commit_fixed() copies it, so
 * a batch is flushed only when the actual record would not fit.  (The v6
 * node records use node_begin() instead: their deltas depend on the batch
 * they land in.) */
static inline uint8_t *batch_fixed_begin(struct sertrace_dump *d, uint8_t *tmp)
{
    if (d->fast.len + RECORD_FIXED_MAX <= SERTRACE_BATCH_BYTES)
        return d->batch + d->fast.len;
    return tmp;
}

static inline void batch_fixed_commit(struct sertrace_dump *d, const uint8_t *start,
                                      const uint8_t *end)
{
    size_t n = (size_t)(end - start);
    assert(n <= RECORD_FIXED_MAX);
    if (start != d->batch + d->fast.len) {
        uint8_t *p = batch_reserve(d, n);
        memcpy(p, start, n);
    }
    d->fast.len += (uint32_t)n;
    assert(d->fast.len <= SERTRACE_BATCH_BYTES);
}

/* Where to encode a v6 NODE or EXIT_D record: its deltas are taken from
 * the bases of the batch it lands in, so the batch is flushed first when
 * the longest record might not fit (a batch then ends up to
 * RECORD_FIXED_MAX - 1 bytes short of SERTRACE_BATCH_BYTES). */
static inline uint8_t *node_begin(struct sertrace_dump *d, uint32_t open)
{
    if (d->fast.len + RECORD_FIXED_MAX > SERTRACE_BATCH_BYTES)
        batch_next(d, open);
    return d->batch + d->fast.len;
}

static inline void node_commit(struct sertrace_dump *d, const uint8_t *end)
{
    d->fast.len = (uint32_t)(end - d->batch);
    assert(d->fast.len <= SERTRACE_BATCH_BYTES);
}

/* Whether sertrace_atom_fast() (sertrace.h) may write the next ATOM
 * itself: records only (no text tree), nothing pending, within the depth
 * cap, and room for the longest record (fast_end).  Called wherever one
 * of these changes. */
static inline void fast_update(struct sertrace_dump *d)
{
    bool ok = d->records_on && !d->text_on && !d->dead && d->overflow == 0 &&
              d->label_kind == SERTRACE_LABEL_NONE && d->fast.depth < d->max_depth;
    d->fast.fast_end = ok ? SERTRACE_BATCH_BYTES - RECORD_FIXED_MAX + 1 : 0;
}

static size_t cut(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > SERTRACE_STRING_MAX ? SERTRACE_STRING_MAX : n;
}

static uint8_t *put_str(uint8_t *p, const char *s, size_t n)
{
    p = put_varint(p, n);
    if (n > 0)
        memcpy(p, s, n);
    return p + n;
}

/* ERROR and NOTE records: header fields then two strings. */
static void record_error(struct sertrace_dump *d, uint8_t tag, uint32_t type, const char *m,
                         size_t mn, const char *path, size_t pn)
{
    size_t need = 2 + varint_len(d->fast.depth) + varint_len(type) + varint_len(mn) + mn +
                  varint_len(pn) + pn;
    uint8_t *p = batch_reserve(d, need);
    uint8_t *start = p;

    *p++ = SERTRACE_REC_ERROR;
    *p++ = tag;
    p = put_varint(p, d->fast.depth);
    p = put_varint(p, type);
    p = put_str(p, m, mn);
    p = put_str(p, path, pn);
    d->fast.len += (uint32_t)(p - start);
    assert(d->fast.len <= SERTRACE_BATCH_BYTES);
}

/* ---- misuse ------------------------------------------------------------ */

static void report_misuse(struct sertrace_dump *d, const char *what)
{
    if (d->records_on)
        record_error(d, SERTRACE_TAG_UNKNOWN, 0, what, strlen(what), "", 0);
    if (d->text_on)
        sertrace_text_misuse(&d->text, d->fast.depth, what);
}

/* ---- public API -------------------------------------------------------- */

sertrace_dump *sertrace_dump_begin(const char *serializer, int protocol)
{
    struct sertrace_dump *d;
    bool lttng, hooked, text;
    size_t n;

    sertrace_config_ensure();
    prune_ended_elsewhere();
    lttng = lttng_ust_tracepoint_enabled(sertrace, records);
    hooked = sertrace_config_hooked();
    text = sertrace_text_enabled();
    if (!lttng && !hooked && !text)
        return NULL;
    d = pool_get();
    if (d == NULL)
        return NULL;

    d->id = atomic_fetch_add(&next_dump_id, 1) + 1;
    d->flags = SERTRACE_DUMP_ACTIVE;
    if (atomic_load_explicit(&sertrace_cfg_atoms, memory_order_relaxed))
        d->flags |= SERTRACE_DUMP_ATOMS;
    if (atomic_load_explicit(&sertrace_cfg_keys_all, memory_order_relaxed))
        d->flags |= SERTRACE_DUMP_KEYS_ALL;
    if (lttng)
        d->flags |= SERTRACE_DUMP_LTTNG;
    if (text)
        d->flags |= SERTRACE_DUMP_TEXT;
    d->lttng_on = lttng;
    d->records_on = lttng || hooked;
    d->text_on = text;
    d->failed = false;
    d->dead = false;
    d->owner = &tls;
    d->fork_gen = atomic_load_explicit(&fork_generation, memory_order_relaxed);
    atomic_store_explicit(&d->state, DUMP_LIVE, memory_order_relaxed);
    d->protocol = protocol;
    n = serializer ? strlen(serializer) : 0;
    if (n > SERIALIZER_MAX)
        n = SERIALIZER_MAX;
    if (n > 0)
        memcpy(d->serializer, serializer, n);
    d->serializer[n] = '\0';
    memset(&d->hooks, 0, sizeof d->hooks);
    memset(&d->listener, 0, sizeof d->listener);
    if (hooked) {
        sertrace_config_copy_listeners(&d->hooks, &d->listener);
    }
    d->fast.depth = 0;
    d->overflow = 0;
    d->max_depth = atomic_load_explicit(&sertrace_cfg_max_depth, memory_order_relaxed);
    d->fast.depth_cap = d->max_depth;
    d->too_deep_reported = false;
    if (++d->gen == 0) { /* wrapped: stale stamps could match, clear them */
        memset(d->slots, 0, d->slot_cap * sizeof *d->slots);
        d->gen = 1;
    }
    d->ntypes = 0;
    d->label_kind = SERTRACE_LABEL_NONE;
    d->label_fold = false;
    d->arena_len = 0;
    d->seq = 0;
    d->fast.len = 0;
    d->fast.base_addr = 0;
    d->fast.base_pos = 0;
    d->fast.base_far = 0;

    /* Nested dump: what the outer dump printed so far goes out first. */
    if (tls.current != NULL && tls.current->text_on)
        sertrace_text_flush(&tls.current->text);
    d->outer = tls.current;
    tls.current = d;

    if (lttng)
        lttng_ust_tracepoint(sertrace, dump_begin, d->id, d->serializer, (int32_t)protocol,
                             current_pid(), current_tid(), sertrace_cfg_scope);
    if (d->hooks.dump_begin != NULL)
        d->hooks.dump_begin(d->hooks.ctx, d->id, d->serializer, (int32_t)protocol);
    if (d->listener.dump_begin != NULL)
        d->listener.dump_begin(d->listener.ctx, d->id, d->serializer, (int32_t)protocol);
    if (text)
        sertrace_text_begin(&d->text, d->id, d->serializer, protocol);
    fast_update(d);
    return d;
}

unsigned sertrace_dump_flags(const sertrace_dump *d)
{
    return d ? d->flags : 0;
}

void sertrace_dump_lower_bounds(sertrace_dump *d)
{
    if (d == NULL || d->dead)
        return;
    d->flags |= SERTRACE_DUMP_LOWER_BOUNDS;
    if (d->text_on)
        sertrace_text_lower_bounds(&d->text);
}

static void unlink_current(struct sertrace_dump *d)
{
    if (tls.current == d) {
        tls.current = d->outer;
        return;
    }
    /* Ended out of order: unlink it from this thread's chain. */
    for (struct sertrace_dump *it = tls.current; it != NULL; it = it->outer) {
        if (it->outer == d) {
            it->outer = d->outer;
            return;
        }
    }
}

static const char *type_name(const struct sertrace_dump *d, uint32_t type, size_t *len)
{
    if (type == 0 || type > d->ntypes || d->names[type].len == UINT32_MAX) {
        *len = 0;
        return NULL;
    }
    *len = d->names[type].len;
    return d->arena + d->names[type].off;
}

/* Output of a dump's end: close what is open, footer, last records. */
static void dump_finish(struct sertrace_dump *d, uint64_t total_bytes, int status)
{
    uint8_t st;
    uint32_t open;

    d->fast.fast_end = 0; /* every later record through the library */
    st = status == SERTRACE_STATUS_OK ? SERTRACE_STATUS_OK : SERTRACE_STATUS_ERROR;
    open = d->fast.depth + d->overflow;
    if (open > 0 && st == SERTRACE_STATUS_OK && !d->failed)
        report_misuse(d, "enter without exit");
    if (d->text_on) {
        /* Close what an error (or a misuse) left open, innermost first. */
        for (uint32_t i = d->fast.depth; i > 0; i--) {
            const struct node *nd = &d->stack[i - 1];
            uint64_t bytes = total_bytes > nd->pos ? total_bytes - nd->pos : 0;
            sertrace_text_exit(&d->text, i, nd->tag, bytes, true);
        }
        sertrace_text_end(&d->text, d->id, total_bytes, st, open);
    }
    if (d->records_on) {
        batch_flush(d);
        if (d->lttng_on)
            lttng_ust_tracepoint(sertrace, dump_end, d->id, total_bytes, st, d->seq, current_pid(),
                                 current_tid(), sertrace_cfg_scope,
                                 (d->flags & SERTRACE_DUMP_LOWER_BOUNDS) ? SERTRACE_END_LOWER_BOUNDS
                                                                         : 0u);
        if (d->hooks.dump_end != NULL)
            d->hooks.dump_end(d->hooks.ctx, d->id, total_bytes, st);
        if (d->listener.dump_end != NULL)
            d->listener.dump_end(d->listener.ctx, d->id, total_bytes, st, d->seq,
                                 (d->flags & SERTRACE_DUMP_LOWER_BOUNDS) ? SERTRACE_END_LOWER_BOUNDS
                                                                         : 0u);
    }
}

/* Ended by a thread that did not begin it (misuse): the dump is reported
 * and finished here, but it stays in its owner's chain and goes back to
 * its owner's pool, which only the owner may touch; the owner unlinks it
 * lazily (prune_ended_elsewhere) at its next sertrace_dump_begin/_end or
 * sertrace_current_dump.  After the release store below this thread
 * never touches the handle again. */
static void dump_end_elsewhere(struct sertrace_dump *d, uint64_t total_bytes, int status)
{
    int live = DUMP_LIVE;

    if (!atomic_compare_exchange_strong(&d->state, &live, DUMP_ENDING_ELSEWHERE))
        return; /* ended twice, or being ended by yet another thread */
    report_misuse(d, "dump ended on a thread other than the one that began it");
    dump_finish(d, total_bytes, status);
    /* Later calls through a stale pointer on the owner are no-ops. */
    d->records_on = false;
    d->text_on = false;
    d->fast.fast_end = 0;
    atomic_store_explicit(&d->state, DUMP_ENDED_ELSEWHERE, memory_order_release);
}

void sertrace_dump_end(sertrace_dump *d, uint64_t total_bytes, int status)
{
    int live = DUMP_LIVE;

    if (d == NULL)
        return;
    if (d->fork_gen != atomic_load_explicit(&fork_generation, memory_order_relaxed))
        make_dead(d); /* begun before a fork, ended in the child */
    if (d->owner != &tls) {
        if (!d->dead) {
            dump_end_elsewhere(d, total_bytes, status);
            return;
        }
        /* Begun by another thread of the parent of a fork: that thread
         * does not exist here, so nothing else can reach the handle. */
        if (atomic_compare_exchange_strong(&d->state, &live, DUMP_FREE))
            pool_put(d);
        return;
    }
    prune_ended_elsewhere();
    if (!atomic_compare_exchange_strong(&d->state, &live, DUMP_FREE))
        return; /* ended twice: nothing to do */
    dump_finish(d, total_bytes, status);
    unlink_current(d);
    pool_put(d);
}

static inline uint32_t slot_of(const void *key, uint32_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ULL;
    return (uint32_t)(h >> 32) & (cap - 1);
}

/* The lookup behind sertrace_type_known(); static so that sertrace_type()
 * calls it directly, not through the PLT (the exported function could be
 * interposed). */
static uint32_t type_lookup(const sertrace_dump *d, const void *key)
{
    uint32_t mask, i;

    if (d == NULL)
        return 0;
    mask = d->slot_cap - 1;
    for (i = slot_of(key, d->slot_cap);; i = (i + 1) & mask) {
        const struct type_slot *s = &d->slots[i];
        if (s->gen != d->gen)
            return 0;
        if (s->key == key)
            return s->index;
    }
}

uint32_t sertrace_type_known(const sertrace_dump *d, const void *key)
{
    return type_lookup(d, key);
}

/* Double the slot table, keeping this dump's entries. */
static int types_grow(struct sertrace_dump *d)
{
    uint32_t cap = d->slot_cap * 2;
    struct type_slot *slots = calloc(cap, sizeof *slots);

    if (slots == NULL)
        return -1;
    for (uint32_t i = 0; i < d->slot_cap; i++) {
        const struct type_slot *s = &d->slots[i];
        if (s->gen != d->gen)
            continue;
        uint32_t j = slot_of(s->key, cap);
        while (slots[j].gen == d->gen)
            j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(d->slots);
    d->slots = slots;
    d->slot_cap = cap;
    return 0;
}

/* Intern `name` (`n` bytes; NULL: no name) under `key`: the one string
 * table of a dump, for type names (TYPE records) and label texts (NAME
 * records, schema v5) alike. */
static uint32_t intern(sertrace_dump *d, const void *key, const char *name, size_t n, uint8_t op)
{
    uint32_t index, i;

    if (d == NULL)
        return 0;
    index = type_lookup(d, key);
    if (index != 0)
        return index;
    if (d->ntypes >= SERTRACE_MAX_TYPES)
        return 0;
    if ((d->ntypes + 1) * 2 > d->slot_cap && types_grow(d) != 0)
        return 0;
    if (d->ntypes + 2 > d->names_cap) {
        uint32_t cap = d->names_cap ? d->names_cap * 2 : 64;
        struct type_name *names = realloc(d->names, cap * sizeof *names);
        if (names == NULL)
            return 0;
        d->names = names;
        d->names_cap = cap;
    }
    if (d->arena_len + n > d->arena_cap) {
        size_t cap = d->arena_cap ? d->arena_cap : 4096;
        while (cap < d->arena_len + n)
            cap *= 2;
        char *arena = realloc(d->arena, cap);
        if (arena == NULL)
            return 0;
        d->arena = arena;
        d->arena_cap = cap;
    }
    index = ++d->ntypes;
    d->names[index].off = (uint32_t)d->arena_len;
    d->names[index].len = name ? (uint32_t)n : UINT32_MAX;
    if (n > 0)
        memcpy(d->arena + d->arena_len, name, n);
    d->arena_len += n;
    for (i = slot_of(key, d->slot_cap); d->slots[i].gen == d->gen; i = (i + 1) & (d->slot_cap - 1))
        ;
    d->slots[i].key = key;
    d->slots[i].gen = d->gen;
    d->slots[i].index = index;

    if (d->records_on) {
        uint8_t *p = batch_reserve(d, 1 + varint_len(index) + varint_len(n) + n);
        uint8_t *start = p;
        *p++ = op;
        p = put_varint(p, index);
        p = put_str(p, name, n);
        d->fast.len += (uint32_t)(p - start);
    }
    return index;
}

uint32_t sertrace_type(sertrace_dump *d, const void *key, const char *name)
{
    return intern(d, key, name, cut(name), SERTRACE_REC_TYPE);
}

uint32_t sertrace_name_known(const sertrace_dump *d, const void *key)
{
    return type_lookup(d, key);
}

uint32_t sertrace_name(sertrace_dump *d, const void *key, const char *text, size_t len)
{
    if (text == NULL)
        len = 0;
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    return intern(d, key, text != NULL ? text : "", len, SERTRACE_REC_NAME);
}

void sertrace_oob(sertrace_dump *d, uint64_t bytes)
{
    if (d == NULL)
        return;
    if (d->records_on) {
        uint8_t tmp[RECORD_FIXED_MAX];
        uint8_t *start = batch_fixed_begin(d, tmp);
        uint8_t *p = start;
        *p++ = SERTRACE_REC_OOB;
        p = put_varint(p, d->fast.depth);
        p = put_varint(p, bytes);
        batch_fixed_commit(d, start, p);
    }
    if (d->text_on && d->overflow == 0 && d->fast.depth > 0)
        d->stack[d->fast.depth - 1].oob += bytes;
}

/* The pending label of the next node (sertrace_label() and the labelled
 * enter and atom). */
static inline void label_set(sertrace_dump *d, uint8_t kind, uint64_t value)
{
    /* Kept for the next node's record (v6 NODE); a kind the opcode cannot
     * hold goes out now as a v5 LABEL record. */
    d->label_fold = kind <= SERTRACE_REC_NODE_KIND_MAX;
    if (d->records_on && !d->label_fold) {
        uint8_t tmp[RECORD_FIXED_MAX];
        uint8_t *start = batch_fixed_begin(d, tmp);
        uint8_t *p = start;
        *p++ = SERTRACE_REC_LABEL;
        *p++ = kind;
        p = put_varint(p, value);
        batch_fixed_commit(d, start, p);
    }
    d->label_kind = kind;
    d->label_value = value;
    fast_update(d);
}

void sertrace_label(sertrace_dump *d, uint8_t kind, uint64_t value)
{
    if (d == NULL)
        return;
    label_set(d, kind, value);
}

/* One v6 NODE record (schema.h, "Compact records"): an ENTER (`atom`
 * false) or an ATOM of `bytes` bytes, with the pending label folded in. */
static inline __attribute__((always_inline)) void
node_record(struct sertrace_dump *d, unsigned atom, uint8_t tag, uint32_t depth, uint32_t type,
            uint64_t addr, uint64_t length, uint64_t pos, uint64_t bytes)
{
    unsigned kind = d->label_fold ? d->label_kind : SERTRACE_LABEL_NONE;
    uint8_t *p = node_begin(d, depth - 1); /* open nodes before it */

    *p++ = (uint8_t)(SERTRACE_REC_NODE | kind << SERTRACE_REC_NODE_KIND_SHIFT | atom);
    *p++ = tag;
    p = put_varint(p, depth);
    p = put_varint(p, type);
    p = put_varint(p, sertrace_zigzag(addr, d->fast.base_addr));
    p = put_varint(p, length);
    p = put_varint(p, sertrace_zigzag(pos, d->fast.base_pos));
    if (atom)
        p = put_varint(p, bytes);
    if (kind != SERTRACE_LABEL_NONE)
        p = put_varint(p, d->label_value);
    node_commit(d, p);
    d->fast.base_addr = addr;
    d->fast.base_pos = pos + bytes;
}

/* The node stack is full: grow it, or refuse beyond the cap. */
static bool stack_grow(struct sertrace_dump *d)
{
    uint32_t cap;
    struct node *stack;

    if (d->stack_cap >= d->max_depth)
        return false;
    cap = d->stack_cap > d->max_depth / 2 ? d->max_depth : d->stack_cap * 2;
    stack = realloc(d->stack, (size_t)cap * sizeof *stack);
    if (stack == NULL)
        return false;
    d->stack = stack;
    d->stack_cap = cap;
    return true;
}

/* The live text of the pending label of a node at `depth` (its parent at
 * depth - 1), for an enter and for an atom alike. */
static void text_pending_label(sertrace_dump *d, uint32_t depth)
{
    size_t ln = 0;
    const char *text = NULL;

    if (d->label_kind == SERTRACE_LABEL_NONE)
        return;
    if (d->label_kind == SERTRACE_LABEL_KEY || d->label_kind == SERTRACE_LABEL_ATTR)
        text = type_name(d, (uint32_t)d->label_value, &ln);
    bool in_state = depth >= 2 && d->stack[depth - 2].state;
    sertrace_text_label(&d->text, d->label_kind, d->label_value, text, ln, in_state);
}

static inline void enter(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                         uint64_t length, uint64_t pos)
{
    struct node *nd;

    assert(!d->text_on || d->fast.depth <= d->stack_cap);
    assert(d->fast.depth <= d->max_depth);
    if (d->overflow > 0 || d->fast.depth >= d->max_depth ||
        (d->text_on && d->fast.depth >= d->stack_cap && !stack_grow(d))) {
        if (!d->too_deep_reported) {
            d->too_deep_reported = true;
            report_misuse(d, "too deep: node not recorded (depth cap reached)");
        }
        d->label_kind = SERTRACE_LABEL_NONE;
        d->overflow++;
        fast_update(d);
        return;
    }
    d->fast.depth++;
    if (d->text_on) { /* only the text tree reads the stack */
        nd = &d->stack[d->fast.depth - 1];
        nd->pos = pos;
        nd->addr = addr;
        nd->length = length;
        nd->type = type;
        nd->tag = tag;
        nd->state = d->label_kind == SERTRACE_LABEL_ROLE && d->label_value == SERTRACE_ROLE_STATE;
        nd->oob = 0;
    }
    if (d->records_on)
        node_record(d, 0, tag, d->fast.depth, type, addr, length, pos, 0);
    if (d->text_on) {
        size_t n;
        const char *name = type_name(d, type, &n);
        text_pending_label(d, d->fast.depth);
        /* An index not interned (yet) shows "?": not cached under it. */
        sertrace_text_enter(&d->text, d->fast.depth, tag, type <= d->ntypes ? type : 0, name, n,
                            addr, length);
    }
    d->label_kind = SERTRACE_LABEL_NONE;
    fast_update(d);
}

void sertrace_enter(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr, uint64_t length,
                    uint64_t pos)
{
    if (d == NULL)
        return;
    enter(d, tag, type, addr, length, pos);
}

void sertrace_enter_labelled(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                             uint64_t length, uint64_t pos, uint8_t label_kind,
                             uint64_t label_value)
{
    if (d == NULL)
        return;
    if (label_kind != SERTRACE_LABEL_NONE)
        label_set(d, label_kind, label_value);
    enter(d, tag, type, addr, length, pos);
}

void sertrace_exit(sertrace_dump *d, uint64_t pos)
{
    const struct node *nd;

    if (d == NULL)
        return;
    d->label_kind = SERTRACE_LABEL_NONE;
    if (d->overflow > 0) {
        d->overflow--;
        fast_update(d);
        return;
    }
    if (d->fast.depth == 0) {
        report_misuse(d, "exit without enter");
        return;
    }
    if (d->records_on) {
        uint8_t *p = node_begin(d, d->fast.depth);
        *p++ = SERTRACE_REC_EXIT_D;
        p = put_varint(p, d->fast.depth);
        p = put_varint(p, sertrace_zigzag(pos, d->fast.base_pos));
        node_commit(d, p);
        d->fast.base_pos = pos;
    }
    if (d->text_on) {
        assert(d->fast.depth <= d->stack_cap);
        nd = &d->stack[d->fast.depth - 1];
        if (pos < nd->pos)
            sertrace_text_misuse(&d->text, d->fast.depth, "exit position before enter position");
        if (nd->oob > 0)
            sertrace_text_oob(&d->text, nd->oob);
        sertrace_text_exit(&d->text, d->fast.depth, nd->tag, pos >= nd->pos ? pos - nd->pos : 0,
                           false);
    }
    d->fast.depth--;
    fast_update(d);
}

static inline void atom(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                        uint64_t length, uint64_t pos, uint64_t end_pos)
{
    uint32_t depth;

    if (d->overflow > 0 || d->fast.depth >= d->max_depth) {
        /* As an enter beyond the cap: reported once, not recorded; no
         * exit will follow, so nothing is counted in `overflow`. */
        if (!d->too_deep_reported) {
            d->too_deep_reported = true;
            report_misuse(d, "too deep: node not recorded (depth cap reached)");
        }
        d->label_kind = SERTRACE_LABEL_NONE;
        fast_update(d);
        return;
    }
    depth = d->fast.depth + 1;
    if (d->records_on) /* a v8 TATOM or a v6 NODE: sertrace_atom_fast()'s bytes */
        node_commit(d, sertrace_put_atom(node_begin(d, d->fast.depth), &d->fast,
                                         d->label_fold ? d->label_kind : SERTRACE_LABEL_NONE, tag,
                                         depth, type, addr, length, pos,
                                         end_pos >= pos ? end_pos - pos : 0, d->label_value));
    if (d->text_on) {
        size_t n;
        const char *name = type_name(d, type, &n);
        uint32_t known = type <= d->ntypes ? type : 0;
        text_pending_label(d, depth);
        if (end_pos >= pos) {
            sertrace_text_atom(&d->text, depth, tag, known, name, n, addr, length, end_pos - pos);
        } else { /* misuse: the lines of sertrace_exit()'s check */
            sertrace_text_enter(&d->text, depth, tag, known, name, n, addr, length);
            sertrace_text_misuse(&d->text, depth, "exit position before enter position");
            sertrace_text_exit(&d->text, depth, tag, 0, false);
        }
    }
    d->label_kind = SERTRACE_LABEL_NONE; /* the atom took it, as an enter does */
    fast_update(d);
}

void sertrace_atom(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr, uint64_t length,
                   uint64_t pos, uint64_t end_pos)
{
    if (d == NULL)
        return;
    atom(d, tag, type, addr, length, pos, end_pos);
}

void sertrace_atom_labelled(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                            uint64_t length, uint64_t pos, uint64_t end_pos, uint8_t label_kind,
                            uint64_t label_value)
{
    if (d == NULL)
        return;
    if (label_kind != SERTRACE_LABEL_NONE)
        label_set(d, label_kind, label_value);
    atom(d, tag, type, addr, length, pos, end_pos);
}

void sertrace_error(sertrace_dump *d, uint8_t tag, uint32_t type, const char *message,
                    const char *path)
{
    size_t mn, pn;

    if (d == NULL)
        return;
    d->failed = true;
    mn = cut(message);
    pn = cut(path);
    if (d->records_on)
        record_error(d, tag, type, message, mn, path, pn);
    if (d->text_on) {
        size_t n;
        const char *name = type_name(d, type, &n);
        sertrace_text_error(&d->text, d->fast.depth, tag, name, n, message, mn, path, pn);
    }
}

void sertrace_note(sertrace_dump *d, const char *key, const char *value)
{
    size_t kn, vn;

    if (d == NULL)
        return;
    kn = cut(key);
    vn = cut(value);
    if (d->records_on) {
        size_t need = 1 + varint_len(d->fast.depth) + varint_len(kn) + kn + varint_len(vn) + vn;
        uint8_t *p = batch_reserve(d, need);
        uint8_t *start = p;
        *p++ = SERTRACE_REC_NOTE;
        p = put_varint(p, d->fast.depth);
        p = put_str(p, key, kn);
        p = put_str(p, value, vn);
        d->fast.len += (uint32_t)(p - start);
    }
    if (d->text_on)
        sertrace_text_note(&d->text, d->fast.depth, key ? key : "", kn, value ? value : "", vn);
}

sertrace_dump *sertrace_current_dump(void)
{
    struct sertrace_dump *d = tls.current;

    if (d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) != DUMP_LIVE) {
        prune_ended_elsewhere();
        d = tls.current;
    }
    return d;
}

uint32_t sertrace_depth(const sertrace_dump *d)
{
    return d ? d->fast.depth + d->overflow : 0;
}
