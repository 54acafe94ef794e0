/* core.c -- rebuilds sertrace size trees from decoded events.
 *
 * Live dumps sit in a small chained hash table keyed by (pid, dump_id).
 * Each records batch is decoded in place with bounds-checked LEB128
 * readers; ENTER/EXIT (and ATOM, schema v4: an ENTER and its EXIT in one
 * record) maintain the dump's stack of open nodes and every
 * decision is made by comparing the record's depth with the stack depth,
 * so a lost record costs the sizes around it, never the rest of the tree.
 * Nothing here recurses and nothing allocates per record except the
 * amortised growth of a stack or a type table (see core.h).
 */
#include "core.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sertrace/schema.h" /* SERTRACE_MAX_DEPTH */

/* Deepest node accepted: the runtime's own limit (1,000,000), beyond
 * which it writes nothing. */
#define CORE_MAX_DEPTH SERTRACE_MAX_DEPTH
/* Most ancestors one ENTER may invent ("enter lost" placeholders).  An
 * ENTER deeper than that below the open chain is skipped as malformed:
 * otherwise one 9-byte record at depth 1e6 would open a million nodes
 * (and the tree sink would print a million lines of growing indentation).
 * A real loss rarely hides more than a few levels; records resume being
 * placed as soon as they come back within this distance of the chain. */
#define CORE_MAX_INVENTED 64u
/* Largest type index accepted (the runtime's limit, schema.h). */
#define CORE_MAX_TYPES SERTRACE_MAX_TYPES
/* Type names of one dump, all together. */
#define CORE_MAX_NAMES (64u << 20)

/* Closed dump states kept for reuse (with their stack, type table and
 * name arena), so a trace of millions of small dumps does not allocate
 * per dump; buffers larger than the KEEP_* limits are released instead. */
#define FREE_DUMPS_MAX 64
#define KEEP_STACK 4096u
#define KEEP_TYPES 4096u
#define KEEP_NAMES (256u << 10)

struct sertrace_core {
    sertrace_core_visitor v;
    sertrace_dump_state *free_dumps; /* linked by hash_next */
    unsigned nfree;
    sertrace_dump_state **buckets;
    size_t nbuckets; /* power of two */
    size_t live;
    size_t lossy_live; /* live dumps with discarded > 0 */
    sertrace_core_stats stats;
    /* The processes whose events the tracer discarded (a notice for every
     * process: any_pid_lossy), for the dumps still unfinished at the end. */
    int64_t *lossy_pids;
    size_t nlossy_pids, lossy_pids_cap;
    bool any_pid_lossy;
};

/* ---- hash table of live dumps ---------------------------------------- */

static size_t dump_hash(int64_t pid, uint64_t id)
{
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull ^ id;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (size_t)h;
}

static sertrace_dump_state *find_dump(sertrace_core *c, int64_t pid, uint64_t id)
{
    sertrace_dump_state *d = c->buckets[dump_hash(pid, id) & (c->nbuckets - 1)];
    while (d && !(d->pid == pid && d->dump_id == id))
        d = d->hash_next;
    return d;
}

static int grow_buckets(sertrace_core *c)
{
    size_t n = c->nbuckets * 2;
    sertrace_dump_state **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < c->nbuckets; i++) {
        sertrace_dump_state *d = c->buckets[i];
        while (d) {
            sertrace_dump_state *next = d->hash_next;
            size_t k = dump_hash(d->pid, d->dump_id) & (n - 1);
            d->hash_next = b[k];
            b[k] = d;
            d = next;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
    return 0;
}

static void unlink_dump(sertrace_core *c, sertrace_dump_state *d)
{
    sertrace_dump_state **p = &c->buckets[dump_hash(d->pid, d->dump_id) & (c->nbuckets - 1)];
    while (*p && *p != d)
        p = &(*p)->hash_next;
    if (*p)
        *p = d->hash_next;
    c->live--;
    c->stats.live_dumps = c->live;
}

static void free_dump(sertrace_dump_state *d)
{
    free(d->stack);
    free(d->types);
    free(d->names);
    free(d);
}

/* Put a closed dump on the free list, keeping its buffers when small. */
static void recycle_dump(sertrace_core *c, sertrace_dump_state *d)
{
    if (c->nfree >= FREE_DUMPS_MAX) {
        free_dump(d);
        return;
    }
    if (d->stack_cap > KEEP_STACK) {
        free(d->stack);
        d->stack = NULL;
        d->stack_cap = 0;
    }
    if (d->types_cap > KEEP_TYPES) {
        free(d->types);
        d->types = NULL;
        d->types_cap = 0;
    } else if (d->ntypes) {
        memset(d->types, 0, (size_t)d->ntypes * sizeof *d->types);
    }
    if (d->names_cap > KEEP_NAMES) {
        free(d->names);
        d->names = NULL;
        d->names_cap = 0;
    }
    d->hash_next = c->free_dumps;
    c->free_dumps = d;
    c->nfree++;
}

/* A zeroed dump state, from the free list when possible. */
static sertrace_dump_state *new_dump(sertrace_core *c)
{
    sertrace_dump_state *d = c->free_dumps;
    if (!d)
        return calloc(1, sizeof *d);
    c->free_dumps = d->hash_next;
    c->nfree--;
    sertrace_node *stack = d->stack;
    sertrace_type_entry *types = d->types;
    char *names = d->names;
    uint32_t stack_cap = d->stack_cap, types_cap = d->types_cap, names_cap = d->names_cap;
    memset(d, 0, sizeof *d);
    d->stack = stack;
    d->stack_cap = stack_cap;
    d->types = types;
    d->types_cap = types_cap;
    d->names = names;
    d->names_cap = names_cap;
    return d;
}

sertrace_core *sertrace_core_create(const sertrace_core_visitor *v)
{
    sertrace_core *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (v)
        c->v = *v;
    c->nbuckets = 64;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    return c;
}

void sertrace_core_destroy(sertrace_core *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        sertrace_dump_state *d = c->buckets[i];
        while (d) {
            sertrace_dump_state *next = d->hash_next;
            free_dump(d);
            d = next;
        }
    }
    free(c->lossy_pids);
    while (c->free_dumps) {
        sertrace_dump_state *next = c->free_dumps->hash_next;
        free_dump(c->free_dumps);
        c->free_dumps = next;
    }
    free(c->buckets);
    free(c);
}

int sertrace_core_reset(sertrace_core *c)
{
    if (c->live != 0)
        return -1;
    memset(&c->stats, 0, sizeof c->stats);
    c->lossy_live = 0;
    c->nlossy_pids = 0;
    c->any_pid_lossy = false;
    return 0;
}

const sertrace_core_stats *sertrace_core_get_stats(const sertrace_core *c)
{
    return &c->stats;
}

/* A dump that ended ok and, by its dump_end's `batches` (schema v2),
 * emitted no records event: the serializer traced no node at all (a
 * top-level value it folds, e.g. pickle.dumps(None) at the default
 * granularity), which is complete, not a loss.  Without `batches` (v1)
 * nothing tells it from a dump whose only batch was dropped (LTTng drops
 * an event larger than a sub-buffer without counting it): incomplete. */
static bool zero_node_dump(const sertrace_dump_state *d)
{
    return (d->flags & SERTRACE_DUMPF_NO_RECORDS) && d->records_events == 0 &&
           !(d->flags & SERTRACE_DUMPF_STATUS_ERROR) && d->errors == 0 && d->depth == 0;
}

bool sertrace_dump_complete(const sertrace_dump_state *d)
{
    return (d->flags & SERTRACE_DUMPF_BEGIN) && (d->flags & SERTRACE_DUMPF_END) &&
           !(d->flags & (SERTRACE_DUMPF_UNFINISHED | SERTRACE_DUMPF_RESTARTED)) &&
           d->lost_batches == 0 && d->discarded == 0 && d->malformed == 0 && d->orphan_exits == 0 &&
           d->lost_exits == 0 && d->lost_enters == 0 && (d->nodes > 0 || zero_node_dump(d));
}

const char *sertrace_core_type_name(const sertrace_dump_state *d, uint32_t type, size_t *len)
{
    if (type == 0 || type >= d->ntypes || !d->types[type].defined) {
        *len = 0;
        return NULL;
    }
    *len = d->types[type].len;
    return d->names + d->types[type].off;
}

/* ---- dump lifecycle ------------------------------------------------- */

static sertrace_dump_state *open_dump(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                                      uint64_t id)
{
    if (c->live >= c->nbuckets && grow_buckets(c) < 0)
        return NULL;
    sertrace_dump_state *d = new_dump(c);
    if (!d)
        return NULL;
    d->pid = pid;
    d->tid = tid;
    d->dump_id = id;
    d->ts_begin = ts;
    d->ts_end = ts;
    d->protocol = -1;
    size_t k = dump_hash(pid, id) & (c->nbuckets - 1);
    d->hash_next = c->buckets[k];
    c->buckets[k] = d;
    c->live++;
    c->stats.live_dumps = c->live;
    if (c->live > c->stats.max_live_dumps)
        c->stats.max_live_dumps = c->live;
    c->stats.dumps_opened++;
    if (c->v.dump_open && c->v.dump_open(c->v.ctx, d) < 0)
        return NULL; /* stays linked; freed by destroy */
    return d;
}

/* The stack of open nodes doubles (64 first, CORE_MAX_DEPTH + 1 at the
 * most) when a node opens on a full one: rare, so out of line, off the
 * hot path of push_node_inline and place_leaf. */
static __attribute__((noinline)) int grow_stack(sertrace_dump_state *d)
{
    uint32_t cap = d->stack_cap ? d->stack_cap * 2 : 64;
    if (cap > CORE_MAX_DEPTH + 1)
        cap = CORE_MAX_DEPTH + 1;
    sertrace_node *s = realloc(d->stack, (size_t)cap * sizeof *s);
    if (!s)
        return -1;
    d->stack = s;
    d->stack_cap = cap;
    return 0;
}

/* The node opened (push_node) and closed (pop_node) by each record: their
 * bodies are inlined where a record opens or closes its own node (an
 * ATOM does both), the out-of-line copies serve the loops that close
 * nodes whose EXIT was lost or invent ancestors whose ENTER was. */
#define HOT_INLINE static inline __attribute__((always_inline))

HOT_INLINE int push_node_inline(sertrace_core *c, sertrace_dump_state *d, uint8_t tag,
                                uint32_t type, uint64_t addr, uint64_t length, uint64_t pos,
                                uint16_t flags)
{
    if (d->depth == d->stack_cap && grow_stack(d) < 0)
        return -1;
    /* The stack of open nodes: stack[i] is the open node at depth i + 1. */
    assert(d->depth < d->stack_cap && d->depth <= CORE_MAX_DEPTH);
    assert(d->depth == 0 || d->stack[d->depth - 1].depth == d->depth);
    sertrace_node *n = &d->stack[d->depth++];
    memset(n, 0, sizeof *n);
    n->tag = tag;
    n->type = type;
    n->addr = addr;
    n->length = length;
    n->enter_pos = pos;
    n->inner_max = pos;
    n->lost_at = pos;
    n->depth = d->depth;
    n->gap_epoch = d->gap_epoch;
    n->flags = flags;
    if (!(flags & SERTRACE_NODE_NO_ENTER)) { /* its own ENTER: the pending label is its */
        n->label_kind = d->label_kind;
        n->label = d->label;
        d->label_kind = SERTRACE_LABEL_NONE;
    }
    if (d->depth > d->max_depth)
        d->max_depth = d->depth;
    if (flags & SERTRACE_NODE_NO_ENTER)
        d->lost_enters++;
    if (d->depth == 1)
        d->roots++;
    if (c->v.node_enter && c->v.node_enter(c->v.ctx, d, n) < 0)
        return -1;
    return 0;
}

static __attribute__((noinline)) int push_node(sertrace_core *c, sertrace_dump_state *d,
                                               uint8_t tag, uint32_t type, uint64_t addr,
                                               uint64_t length, uint64_t pos, uint16_t flags)
{
    return push_node_inline(c, d, tag, type, addr, length, pos, flags);
}

/* Close the innermost node.  `how` is 0 (its EXIT at `pos`), or
 * SERTRACE_NODE_NO_EXIT / SERTRACE_NODE_UNFINISHED (end unknown: the
 * largest position seen inside it is used, a lower bound). */
HOT_INLINE int pop_node_inline(sertrace_core *c, sertrace_dump_state *d, uint64_t pos, uint16_t how)
{
    assert(d->depth > 0 && d->depth <= d->stack_cap);
    sertrace_node *n = &d->stack[d->depth - 1];
    assert(n->depth == d->depth); /* stack[i] is the open node at depth i + 1 */
    /* end unknown: the largest position seen inside it, or, when records
     * were lost while it was open, the largest position seen before that
     * (positions after a loss may be later nodes', wrongly placed under
     * it): a lower bound either way */
    uint64_t end = !how ? pos : d->rec_gap_at > n->gap_epoch ? n->lost_at : n->inner_max;
    n->flags |= how;
    if (how & SERTRACE_NODE_NO_EXIT)
        d->lost_exits++;
    if (how & SERTRACE_NODE_UNFINISHED)
        d->unfinished_nodes++;
    if (how & SERTRACE_NODE_FAILED)
        d->failed_open++;
    if (end < n->enter_pos) {
        n->flags |= SERTRACE_NODE_MALFORMED;
        n->bytes = 0;
        d->malformed++;
    } else {
        n->bytes = end - n->enter_pos;
    }
    if (end > n->inner_max)
        n->inner_max = end;
    if (n->gap_epoch != d->gap_epoch)
        n->flags |= SERTRACE_NODE_PARTIAL;
    /* Closed by an EXIT after records of the dump were lost while it was
     * open: the lost records may hold its own EXIT and the ENTER of a later
     * node at this depth, whose EXIT this is.  It ended at or before `pos`:
     * an upper bound.  A dump's root is the exception: one root per dump
     * (schema: depth 1 = the root node), so the EXIT at depth 1 is its
     * own, unless the dump showed a second depth-1 node. */
    if (!how && d->rec_gap_at > n->gap_epoch &&
        !(n->depth == 1 && d->roots == 1 && !(n->flags & SERTRACE_NODE_NO_ENTER))) {
        n->flags |= SERTRACE_NODE_EXIT_UNSURE;
        d->unsure_exits++;
    }
    if (n->child_bytes > n->bytes) {
        n->flags |= SERTRACE_NODE_CHILD_INEXACT;
        n->self = 0;
    } else {
        n->self = n->bytes - n->child_bytes;
    }
    d->nodes++;
    if (c->v.node_exit && c->v.node_exit(c->v.ctx, d, n) < 0)
        return -1;
    d->depth--;
    if (d->depth > 0) {
        sertrace_node *p = &d->stack[d->depth - 1];
        p->child_bytes += n->bytes;
        if (!sertrace_node_bytes_exact(n))
            p->flags |= SERTRACE_NODE_CHILD_INEXACT;
        if (n->inner_max > p->inner_max)
            p->inner_max = n->inner_max;
    }
    return 0;
}

static __attribute__((noinline)) int pop_node(sertrace_core *c, sertrace_dump_state *d,
                                              uint64_t pos, uint16_t how)
{
    return pop_node_inline(c, d, pos, how);
}

/* A node with nothing nested in it (an ATOM at one below the open chain),
 * for a visitor with node_leaf: what push_node_inline then
 * pop_node_inline at pos + bytes give, in one visitor call.  None of
 * the exit's checks can fail for a node opened and closed at once: no
 * loss while it was open (its gap_epoch is the dump's), its end not
 * before its start (place_atom checked), no child: flags 0, exact. */
HOT_INLINE int place_leaf(sertrace_core *c, sertrace_dump_state *d, uint8_t tag, uint32_t type,
                          uint64_t addr, uint64_t length, uint64_t pos, uint64_t bytes)
{
    if (d->depth == d->stack_cap && grow_stack(d) < 0)
        return -1;
    assert(d->depth < d->stack_cap && d->depth <= CORE_MAX_DEPTH);
    sertrace_node *n = &d->stack[d->depth++];
    n->addr = addr;
    n->length = length;
    n->enter_pos = pos;
    n->inner_max = pos + bytes;
    n->lost_at = pos;
    n->child_bytes = 0;
    n->bytes = bytes;
    n->self = bytes;
    n->user = 0;
    n->label = d->label;
    n->oob = 0;
    n->type = type;
    n->depth = d->depth;
    n->gap_epoch = d->gap_epoch;
    n->flags = 0;
    n->tag = tag;
    n->label_kind = d->label_kind;
    d->label_kind = SERTRACE_LABEL_NONE;
    if (d->depth > d->max_depth)
        d->max_depth = d->depth;
    if (d->depth == 1)
        d->roots++;
    /* rec_gap_at <= gap_epoch always: no loss since it opened (not
     * PARTIAL, not EXIT_UNSURE), so its size is exact */
    assert(d->rec_gap_at <= n->gap_epoch);
    d->nodes++;
    if (c->v.node_leaf(c->v.ctx, d, n) < 0)
        return -1;
    d->depth--;
    if (d->depth > 0) {
        sertrace_node *p = &d->stack[d->depth - 1];
        p->child_bytes += bytes;
        if (n->inner_max > p->inner_max)
            p->inner_max = n->inner_max;
    }
    return 0;
}

static int close_dump(sertrace_core *c, sertrace_dump_state *d, uint16_t how)
{
    while (d->depth > 0)
        if (pop_node(c, d, 0, how) < 0)
            return -1;
    unlink_dump(c, d);
    if (d->discarded)
        c->lossy_live--;
    c->stats.dumps_closed++;
    if (d->flags & SERTRACE_DUMPF_UNFINISHED)
        c->stats.dumps_unfinished++;
    int rc = 0;
    if (c->v.dump_close)
        rc = c->v.dump_close(c->v.ctx, d);
    recycle_dump(c, d);
    return rc;
}

static void copy_serializer(sertrace_dump_state *d, const char *s, size_t n)
{
    if (!s)
        n = 0;
    if (n > sizeof d->serializer - 1)
        n = sizeof d->serializer - 1;
    if (n)
        memcpy(d->serializer, s, n);
    d->serializer[n] = '\0';
    d->serializer_len = (uint32_t)n;
}

int sertrace_core_dump_begin(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                             uint64_t dump_id, const char *serializer, size_t serializer_len,
                             int32_t protocol)
{
    sertrace_dump_state *d = find_dump(c, pid, dump_id);
    if (d) {
        /* Same (pid, id) still live: the old one never ended (pid reuse,
         * or its end was lost).  Close it as unfinished. */
        d->flags |= SERTRACE_DUMPF_RESTARTED | SERTRACE_DUMPF_UNFINISHED;
        if (close_dump(c, d, SERTRACE_NODE_UNFINISHED) < 0)
            return -1;
    }
    d = open_dump(c, pid, tid, ts, dump_id);
    if (!d)
        return -1;
    d->flags |= SERTRACE_DUMPF_BEGIN;
    copy_serializer(d, serializer, serializer_len);
    d->protocol = protocol;
    return 0;
}

/* ---- record decoding -------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
    /* The delta bases of the batch (schema v6, "Compact records"). */
    uint64_t base_addr, base_pos;
    uint64_t base_far; /* the second address base (schema v8, "Tiny atoms") */
} reader;

static bool read_u8(reader *r, uint8_t *out)
{
    if (r->p >= r->end)
        return false;
    *out = *r->p++;
    return true;
}

static inline uint64_t le64(uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(w);
#else
    return w;
#endif
}

static inline bool read_varint(reader *r, uint64_t *out)
{
    if (r->p < r->end && *r->p < 0x80) { /* one byte: the common case */
        *out = *r->p++;
        return true;
    }
    if (r->end - r->p >= 8) {
        /* Up to 8 bytes (values < 2^56: addresses, positions) without a
         * loop: find the last byte from the continuation bits of one
         * 64-bit load, then pack the 7-bit groups pairwise.  Same result
         * as the loop below; it avoids a mispredicted exit per varint. */
        uint64_t w;
        memcpy(&w, r->p, 8);
        w = le64(w);
        uint64_t stop = ~w & 0x8080808080808080ull;
        if (stop) {
            unsigned len = ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
            uint64_t x = w & 0x7f7f7f7f7f7f7f7full;
            if (len < 8)
                x &= (1ull << (8 * len)) - 1;
            x = (x & 0x007f007f007f007full) | ((x & 0x7f007f007f007f00ull) >> 1);
            x = (x & 0x00003fff00003fffull) | ((x & 0x3fff00003fff0000ull) >> 2);
            x = (x & 0x000000000fffffffull) | ((x & 0x0fffffff00000000ull) >> 4);
            *out = x;
            r->p += len;
            return true;
        }
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->p >= r->end)
            return false;
        uint8_t b = *r->p++;
        if (i == 9 && b > 1)
            return false; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool read_str(reader *r, const char **s, size_t *n)
{
    uint64_t len;
    if (!read_varint(r, &len) || len > (uint64_t)(r->end - r->p))
        return false;
    *s = (const char *)r->p;
    *n = (size_t)len;
    r->p += len;
    return true;
}

static bool valid_depth(uint64_t depth)
{
    return depth >= 1 && depth <= CORE_MAX_DEPTH;
}

static void see_pos(sertrace_dump_state *d, uint64_t pos)
{
    if (pos > d->max_pos)
        d->max_pos = pos;
}

/* A LABEL (record, NODE opcode or direct feed): kept for the next ENTER. */
static void take_label(sertrace_dump_state *d, uint8_t kind, uint64_t value)
{
    d->label_kind = kind;
    d->label = value;
    d->labels++;
}

/* Bring the open chain to `open` nodes: deeper ones lost their EXIT
 * (closed, bytes a lower bound), missing ancestors lost their ENTER
 * (placeholders opened at `pos`).  The depth rules of an ENTER or ATOM
 * (to its depth - 1) and of a DEPTH record (to its depth).  Out of line:
 * a regular stream never needs it. */
static __attribute__((noinline)) int align_depth(sertrace_core *c, sertrace_dump_state *d,
                                                 uint32_t open, uint64_t pos)
{
    while (d->depth > open)
        if (pop_node(c, d, 0, SERTRACE_NODE_NO_EXIT) < 0)
            return -1;
    while (d->depth < open)
        if (push_node(c, d, SERTRACE_TAG_UNKNOWN, 0, 0, 0, pos, SERTRACE_NODE_NO_ENTER) < 0)
            return -1;
    return 0;
}

/* Result of one record: 0 ok, 1 malformed (stop the batch), 2 malformed
 * but well delimited (skip that record, go on), -1 fatal. */
static int place_enter(sertrace_core *c, sertrace_dump_state *d, uint8_t tag, uint64_t depth,
                       uint64_t type, uint64_t addr, uint64_t length, uint64_t pos)
{
    if (!valid_depth(depth) || type > CORE_MAX_TYPES)
        return 1;
    if (depth > (uint64_t)d->depth + 1 + CORE_MAX_INVENTED) {
        d->skipped_deep++;
        return 2; /* too many missing ancestors: skip this record only */
    }
    see_pos(d, pos);
    if (d->depth + 1 != depth && align_depth(c, d, (uint32_t)depth - 1, pos) < 0)
        return -1;
    return push_node_inline(c, d, tag, (uint32_t)type, addr, length, pos, 0) < 0 ? -1 : 0;
}

static int rec_enter(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint8_t tag;
    uint64_t depth, type, addr, length, pos;
    if (!read_u8(r, &tag) || !read_varint(r, &depth) || !read_varint(r, &type) ||
        !read_varint(r, &addr) || !read_varint(r, &length) || !read_varint(r, &pos))
        return 1;
    return place_enter(c, d, tag, depth, type, addr, length, pos);
}

static int place_exit(sertrace_core *c, sertrace_dump_state *d, uint64_t depth, uint64_t pos)
{
    if (!valid_depth(depth))
        return 1;
    see_pos(d, pos);
    d->label_kind = SERTRACE_LABEL_NONE; /* a label is for the next ENTER only */
    if (depth > d->depth) {
        d->orphan_exits++;
        if (d->depth > 0 && pos > d->stack[d->depth - 1].inner_max)
            d->stack[d->depth - 1].inner_max = pos;
        return 0;
    }
    while (d->depth > depth)
        if (pop_node(c, d, 0, SERTRACE_NODE_NO_EXIT) < 0)
            return -1;
    return pop_node_inline(c, d, pos, 0) < 0 ? -1 : 0;
}

static int rec_exit(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint64_t depth, pos;
    if (!read_varint(r, &depth) || !read_varint(r, &pos))
        return 1;
    return place_exit(c, d, depth, pos);
}

/* EXIT_D (schema v6): an EXIT whose position is a delta. */
static int rec_exit_d(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint64_t depth, dpos;
    if (!read_varint(r, &depth) || !read_varint(r, &dpos))
        return 1;
    r->base_pos = sertrace_unzigzag(r->base_pos, dpos);
    return place_exit(c, d, depth, r->base_pos);
}

/* ATOM (schema v4): the node an ENTER followed at once by its EXIT gives,
 * placed by the same depth rules (earlier siblings that lost their EXIT
 * are closed, lost ancestors invented), then closed at pos + bytes. */
HOT_INLINE int place_atom(sertrace_core *c, sertrace_dump_state *d, uint8_t tag, uint64_t depth,
                          uint64_t type, uint64_t addr, uint64_t length, uint64_t pos,
                          uint64_t bytes)
{
    if (!valid_depth(depth) || type > CORE_MAX_TYPES || bytes > UINT64_MAX - pos)
        return 1;
    if (depth > (uint64_t)d->depth + 1 + CORE_MAX_INVENTED) {
        d->skipped_deep++;
        return 2;
    }
    see_pos(d, pos);
    if (d->depth + 1 != depth && align_depth(c, d, (uint32_t)depth - 1, pos) < 0)
        return -1;
    if (c->v.node_leaf) {
        see_pos(d, pos + bytes);
        return place_leaf(c, d, tag, (uint32_t)type, addr, length, pos, bytes);
    }
    if (push_node_inline(c, d, tag, (uint32_t)type, addr, length, pos, 0) < 0)
        return -1;
    see_pos(d, pos + bytes);
    return pop_node_inline(c, d, pos + bytes, 0) < 0 ? -1 : 0;
}

static int rec_atom(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint8_t tag;
    uint64_t depth, type, addr, length, pos, bytes;
    if (!read_u8(r, &tag) || !read_varint(r, &depth) || !read_varint(r, &type) ||
        !read_varint(r, &addr) || !read_varint(r, &length) || !read_varint(r, &pos) ||
        !read_varint(r, &bytes))
        return 1;
    return place_atom(c, d, tag, depth, type, addr, length, pos, bytes);
}

/* NODE (schema v6): an ENTER or an ATOM with delta address and position,
 * and its label, if any, in the opcode (read as a LABEL record before
 * it). */
static int rec_node(sertrace_core *c, sertrace_dump_state *d, reader *r, uint8_t op)
{
    uint8_t tag;
    uint64_t depth, type, daddr, length, dpos, bytes = 0, label = 0;
    unsigned kind = SERTRACE_REC_NODE_KIND(op);
    bool is_atom = (op & SERTRACE_REC_NODE_ATOM) != 0;
    if (!read_u8(r, &tag) || !read_varint(r, &depth) || !read_varint(r, &type) ||
        !read_varint(r, &daddr) || !read_varint(r, &length) || !read_varint(r, &dpos) ||
        (is_atom && !read_varint(r, &bytes)) ||
        (kind != SERTRACE_LABEL_NONE && !read_varint(r, &label)))
        return 1;
    uint64_t addr = sertrace_unzigzag(r->base_addr, daddr);
    uint64_t pos = sertrace_unzigzag(r->base_pos, dpos);
    r->base_addr = addr;
    r->base_pos = pos + bytes;
    if (kind != SERTRACE_LABEL_NONE)
        take_label(d, (uint8_t)kind, label);
    if (is_atom)
        return place_atom(c, d, tag, depth, type, addr, length, pos, bytes);
    return place_enter(c, d, tag, depth, type, addr, length, pos);
}

/* SATOM (schema v7): a NODE atom in fixed-width fields, its depth from
 * the low 8 bits the record carries and the open node count. */
static int rec_satom(sertrace_core *c, sertrace_dump_state *d, reader *r, uint8_t op)
{
    uint64_t length = 0, label = 0;
    unsigned kind = SERTRACE_REC_NODE_KIND(op);
    if (r->end - r->p < SERTRACE_REC_SATOM_FIXED - 1)
        return 1;
    const uint8_t *f = r->p;
    r->p += SERTRACE_REC_SATOM_FIXED - 1;
    if (((op & SERTRACE_REC_SATOM_LEN) && !read_varint(r, &length)) ||
        (kind != SERTRACE_LABEL_NONE && !read_varint(r, &label)))
        return 1;
    uint32_t udaddr =
        (uint32_t)f[3] | (uint32_t)f[4] << 8 | (uint32_t)f[5] << 16 | (uint32_t)f[6] << 24;
    uint64_t addr = r->base_addr + (uint64_t)(int64_t)(int32_t)udaddr;
    uint64_t pos = r->base_pos + f[7];
    uint64_t bytes = f[8];
    r->base_addr = addr;
    r->base_pos = pos + bytes;
    if (kind != SERTRACE_LABEL_NONE)
        take_label(d, (uint8_t)kind, label);
    return place_atom(c, d, f[0], sertrace_satom_depth(d->depth, f[2]), f[1], addr, length, pos,
                      bytes);
}

/* TATOM (schema v8): a SATOM without depth (one below the innermost
 * open node) and its address from one of two bases, in 2 or 4 bytes. */
static int rec_tatom(sertrace_core *c, sertrace_dump_state *d, reader *r, uint8_t op)
{
    uint64_t length = 0, label = 0;
    unsigned kind = SERTRACE_REC_NODE_KIND(op);
    bool wide = (op & SERTRACE_REC_TATOM_WIDE) != 0;
    ptrdiff_t fixed = SERTRACE_REC_TATOM_FIXED - 1 + (wide ? 4 : 2);
    if (r->end - r->p < fixed)
        return 1;
    const uint8_t *f = r->p;
    r->p += fixed;
    if (((op & SERTRACE_REC_SATOM_LEN) && !read_varint(r, &length)) ||
        (kind != SERTRACE_LABEL_NONE && !read_varint(r, &label)))
        return 1;
    uint32_t u = (uint32_t)f[4] | (uint32_t)f[5] << 8;
    int64_t daddr = (int16_t)(uint16_t)u;
    if (wide)
        daddr = (int32_t)(u | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 24);
    uint64_t *base = (op & SERTRACE_REC_TATOM_FAR) ? &r->base_far : &r->base_addr;
    uint64_t addr = *base + (uint64_t)daddr;
    *base = addr;
    uint64_t pos = r->base_pos + f[2];
    uint64_t bytes = f[3];
    r->base_pos = pos + bytes;
    if (kind != SERTRACE_LABEL_NONE)
        take_label(d, (uint8_t)kind, label);
    return place_atom(c, d, f[0], (uint64_t)d->depth + 1, f[1], addr, length, pos, bytes);
}

/* DEPTH (schema v8): the writer's open node count at a batch's start;
 * the reader closes deeper nodes (lost EXITs) or invents the missing
 * ancestors (lost ENTERs), as a NODE at depth + 1 would. */
static int rec_depth(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint64_t depth;
    if (!read_varint(r, &depth))
        return 1;
    if (depth > CORE_MAX_DEPTH)
        return 1;
    if (depth > (uint64_t)d->depth + CORE_MAX_INVENTED) {
        d->skipped_deep++;
        return 2;
    }
    return align_depth(c, d, (uint32_t)depth, d->max_pos);
}

static sertrace_node *node_at(sertrace_dump_state *d, uint64_t depth);

/* OOB (schema v5): out-of-band bytes of the node open at `depth`. */
static int rec_oob(sertrace_dump_state *d, reader *r)
{
    uint64_t depth, bytes;
    if (!read_varint(r, &depth) || !read_varint(r, &bytes))
        return 1;
    sertrace_node *n = depth == 0 ? NULL : node_at(d, depth);
    if (n != NULL)
        n->oob += bytes;
    d->oob_bytes += bytes;
    return 0;
}

/* LABEL (schema v5): kept for the next ENTER. */
static int rec_label(sertrace_dump_state *d, reader *r)
{
    uint8_t kind;
    uint64_t value;
    if (!read_u8(r, &kind) || !read_varint(r, &value))
        return 1;
    take_label(d, kind, value);
    return 0;
}

/* TYPE, and NAME (schema v5: label texts share the type index space). */
static int define_type(sertrace_dump_state *d, uint64_t type, const char *name, size_t len,
                       bool label);

static int rec_type(sertrace_dump_state *d, reader *r, bool label)
{
    uint64_t type;
    const char *name;
    size_t len;
    if (!read_varint(r, &type) || !read_str(r, &name, &len))
        return 1;
    return define_type(d, type, name, len, label);
}

static int define_type(sertrace_dump_state *d, uint64_t type, const char *name, size_t len,
                       bool label)
{
    if (type == 0 || type > CORE_MAX_TYPES)
        return 1;
    if (type >= d->types_cap) {
        uint32_t cap = d->types_cap ? d->types_cap : 16;
        while (cap <= type)
            cap *= 2;
        sertrace_type_entry *t = realloc(d->types, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        memset(t + d->types_cap, 0, (size_t)(cap - d->types_cap) * sizeof *t);
        d->types = t;
        d->types_cap = cap;
    }
    if (type >= d->ntypes)
        d->ntypes = (uint32_t)type + 1;
    if (len > CORE_MAX_NAMES - d->names_len)
        return 1;
    if (d->names_len + len > d->names_cap) {
        size_t cap = d->names_cap ? d->names_cap : 256;
        while (cap < d->names_len + len)
            cap *= 2;
        char *s = realloc(d->names, cap);
        if (!s)
            return -1;
        d->names = s;
        d->names_cap = (uint32_t)cap;
    }
    if (len)
        memcpy(d->names + d->names_len, name, len);
    d->types[type].off = d->names_len;
    d->types[type].len = (uint32_t)len;
    d->types[type].defined = true;
    d->types[type].label = label;
    d->names_len += (uint32_t)len;
    return 0;
}

/* The node a NOTE/ERROR at `depth` belongs to: that depth when open, else
 * the innermost node, else none. */
static sertrace_node *node_at(sertrace_dump_state *d, uint64_t depth)
{
    if (d->depth == 0)
        return NULL;
    if (depth >= 1 && depth <= d->depth)
        return &d->stack[depth - 1];
    return &d->stack[d->depth - 1];
}

static int rec_error(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint8_t tag;
    uint64_t depth, type;
    const char *msg, *path;
    size_t msg_len, path_len;
    if (!read_u8(r, &tag) || !read_varint(r, &depth) || !read_varint(r, &type) ||
        !read_str(r, &msg, &msg_len) || !read_str(r, &path, &path_len))
        return 1;
    if (type > CORE_MAX_TYPES)
        type = 0;
    d->errors++;
    sertrace_node *n = depth == 0 ? NULL : node_at(d, depth);
    if (n)
        n->flags |= SERTRACE_NODE_ERROR;
    if (c->v.error &&
        c->v.error(c->v.ctx, d, n, tag, (uint32_t)type, msg, msg_len, path, path_len) < 0)
        return -1;
    return 0;
}

static int place_note(sertrace_core *c, sertrace_dump_state *d, uint64_t depth, const char *key,
                      size_t key_len, const char *value, size_t value_len);

static int rec_note(sertrace_core *c, sertrace_dump_state *d, reader *r)
{
    uint64_t depth;
    const char *key, *value;
    size_t key_len, value_len;
    if (!read_varint(r, &depth) || !read_str(r, &key, &key_len) || !read_str(r, &value, &value_len))
        return 1;
    return place_note(c, d, depth, key, key_len, value, value_len);
}

static int place_note(sertrace_core *c, sertrace_dump_state *d, uint64_t depth, const char *key,
                      size_t key_len, const char *value, size_t value_len)
{
    sertrace_node *n = depth == 0 ? NULL : node_at(d, depth);
    if (c->v.note && c->v.note(c->v.ctx, d, n, key, key_len, value, value_len) < 0)
        return -1;
    return 0;
}

/* Mark everything open as having lost records. */
static void mark_gap(sertrace_dump_state *d)
{
    /* the open nodes that lose records for the first time (those opened
     * since the last loss: the top of the stack; each node once, so O(1)
     * amortised) keep the last position seen: they end after it */
    for (uint32_t i = d->depth; i-- > 0 && d->stack[i].gap_epoch >= d->rec_gap_at;)
        d->stack[i].lost_at = d->max_pos;
    d->gap_epoch++;
    d->label_kind = SERTRACE_LABEL_NONE; /* its node may be lost */
    d->rec_gap_at = d->gap_epoch;        /* records lost: exits after it unsure */
}

int sertrace_core_records(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                          uint32_t seq, const uint8_t *bytes, size_t n)
{
    sertrace_dump_state *d = find_dump(c, pid, dump_id);
    if (!d) {
        d = open_dump(c, pid, tid, ts, dump_id);
        if (!d)
            return -1;
    }
    d->ts_end = ts;
    d->records_events++;
    c->stats.records_events++;
    c->stats.record_bytes += n;
    if (seq != d->next_seq || (!d->seen_records && seq != 0)) {
        if (seq > d->next_seq) {
            d->lost_batches += seq - d->next_seq;
            c->stats.lost_batches += seq - d->next_seq;
        } else {
            /* A batch out of order or repeated: its records cannot be
             * placed, skip it. */
            d->malformed++;
            c->stats.malformed++;
            mark_gap(d);
            return 0;
        }
        mark_gap(d);
    }
    d->seen_records = true;
    d->next_seq = seq + 1;

    reader r = {bytes, bytes + (bytes ? n : 0), 0, 0, 0};
    bool skipped = false; /* a record of this batch was skipped */
    while (r.p < r.end) {
        uint8_t op = *r.p++;
        int rc;
        switch (op) {
        case SERTRACE_REC_ENTER:
            rc = rec_enter(c, d, &r);
            break;
        case SERTRACE_REC_EXIT:
            rc = rec_exit(c, d, &r);
            break;
        case SERTRACE_REC_ATOM:
            rc = rec_atom(c, d, &r);
            break;
        case SERTRACE_REC_EXIT_D:
            rc = rec_exit_d(c, d, &r);
            break;
        case SERTRACE_REC_TYPE:
        case SERTRACE_REC_NAME:
            rc = rec_type(d, &r, op == SERTRACE_REC_NAME);
            break;
        case SERTRACE_REC_LABEL:
            rc = rec_label(d, &r);
            break;
        case SERTRACE_REC_OOB:
            rc = rec_oob(d, &r);
            break;
        case SERTRACE_REC_DEPTH:
            rc = rec_depth(c, d, &r);
            break;
        case SERTRACE_REC_ERROR:
            rc = rec_error(c, d, &r);
            break;
        case SERTRACE_REC_NOTE:
            rc = rec_note(c, d, &r);
            break;
        default:
            if (SERTRACE_REC_IS_NODE(op))
                rc = rec_node(c, d, &r, op);
            else if (SERTRACE_REC_IS_TATOM(op))
                rc = rec_tatom(c, d, &r, op);
            else if (SERTRACE_REC_IS_SATOM(op))
                rc = rec_satom(c, d, &r, op);
            else
                rc = 1; /* unknown opcode: a newer schema; skip the batch */
            break;
        }
        if (rc < 0)
            return -1;
        if (rc == 2) {
            if (!skipped) { /* counted once per batch */
                d->malformed++;
                c->stats.malformed++;
                mark_gap(d);
                skipped = true;
            }
            continue;
        }
        if (rc > 0) {
            if (skipped) /* already counted */
                break;
            d->malformed++;
            c->stats.malformed++;
            mark_gap(d);
            break;
        }
    }
    return 0;
}

int sertrace_core_dump_end(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                           uint64_t bytes, int status)
{
    return sertrace_core_dump_end_batches(c, pid, tid, ts, dump_id, bytes, status, -1);
}

int sertrace_core_dump_end_batches(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                                   uint64_t dump_id, uint64_t bytes, int status, int64_t batches)
{
    return sertrace_core_dump_end_flags(c, pid, tid, ts, dump_id, bytes, status, batches, 0);
}

int sertrace_core_dump_end_flags(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                                 uint64_t dump_id, uint64_t bytes, int status, int64_t batches,
                                 uint32_t end_flags)
{
    sertrace_dump_state *d = find_dump(c, pid, dump_id);
    if (!d) {
        d = open_dump(c, pid, tid, ts, dump_id);
        if (!d)
            return -1;
    }
    /* Dumps of this thread whose end was lost: no dump_end, events
     * discarded while they were live, and this dump began after their
     * last event and now ends.  A thread runs one dump at a time, except
     * nested ones (a __reduce__ dumping something else), and a nested
     * dump that ended is followed by more of its outer dump: so the outer
     * one has ended too, and its dump_end was among the discarded events.
     * Closed now (open nodes as "exit lost") rather than left live to be
     * reported as unfinished and charged with every later discard of the
     * process.  If it did go on (nested, its records lost), what follows
     * shows as a dump without dump_begin: both marked incomplete. */
    if (c->lossy_live && (d->flags & SERTRACE_DUMPF_BEGIN) && d->pid >= 0 && d->tid >= 0) {
        for (bool again = true; again;) {
            again = false;
            for (size_t i = 0; i < c->nbuckets && !again; i++)
                for (sertrace_dump_state *o = c->buckets[i]; o; o = o->hash_next)
                    if (o != d && o->discarded && o->pid == d->pid && o->tid == d->tid &&
                        o->ts_end <= d->ts_begin) {
                        o->flags |= SERTRACE_DUMPF_END_LOST;
                        if (close_dump(c, o, SERTRACE_NODE_NO_EXIT) < 0)
                            return -1;
                        again = true; /* the chain changed: scan again */
                        break;
                    }
        }
    }
    d->ts_end = ts;
    d->flags |= SERTRACE_DUMPF_END;
    d->payload_bytes = bytes;
    if (batches == 0 && d->records_events == 0)
        d->flags |= SERTRACE_DUMPF_NO_RECORDS;
    else if (batches > 0 && (uint64_t)batches > d->next_seq) {
        /* its last batches never arrived */
        uint64_t lost = (uint64_t)batches - d->next_seq;
        d->lost_batches += lost;
        c->stats.lost_batches += lost;
        mark_gap(d);
    }
    if (status != SERTRACE_STATUS_OK)
        d->flags |= SERTRACE_DUMPF_STATUS_ERROR;
    if (end_flags & SERTRACE_END_LOWER_BOUNDS)
        d->flags |= SERTRACE_DUMPF_LOWER_BOUNDS;
    see_pos(d, bytes);
    if (status != SERTRACE_STATUS_OK) {
        /* the serializer failed inside the open nodes: not a loss */
        while (d->depth > 0)
            if (pop_node(c, d, 0, SERTRACE_NODE_FAILED) < 0)
                return -1;
    }
    return close_dump(c, d, SERTRACE_NODE_NO_EXIT);
}

/* Remember that events of `pid` were discarded (< 0: of every process). */
int sertrace_core_node_length(sertrace_core *c, int64_t pid, uint64_t dump_id, uint32_t depth,
                              uint64_t length)
{
    sertrace_dump_state *d = find_dump(c, pid, dump_id);
    if (!d || depth == 0 || depth > d->depth)
        return -1;
    d->stack[depth - 1].length = length;
    return 0;
}

/* ---- nodes fed directly (core.h) ---------------------------------------- */

sertrace_dump_state *sertrace_core_live_dump(sertrace_core *c, int64_t pid, uint64_t dump_id)
{
    return find_dump(c, pid, dump_id);
}

/* A direct call placed nothing (the record it stands for is malformed):
 * counted as a malformed batch of one record, as the decoder does. */
static int direct_result(sertrace_core *c, sertrace_dump_state *d, int rc)
{
    if (rc <= 0)
        return rc;
    d->malformed++;
    c->stats.malformed++;
    mark_gap(d);
    return 0;
}

HOT_INLINE int place_in(sertrace_core *c, sertrace_dump_state *d, const sertrace_core_node_in *in)
{
    int rc;
    switch (in->op) {
    case SERTRACE_REC_ENTER:
    case SERTRACE_REC_ATOM:
        if (in->label_kind != SERTRACE_LABEL_NONE)
            take_label(d, in->label_kind, in->label);
        rc = in->op == SERTRACE_REC_ATOM
                 ? place_atom(c, d, in->tag, in->depth, in->type, in->addr, in->length, in->pos,
                              in->bytes)
                 : place_enter(c, d, in->tag, in->depth, in->type, in->addr, in->length, in->pos);
        break;
    case SERTRACE_REC_EXIT:
        rc = place_exit(c, d, in->depth, in->pos);
        break;
    default:
        rc = 1;
        break;
    }
    return direct_result(c, d, rc);
}

int sertrace_core_node(sertrace_core *c, sertrace_dump_state *d, const sertrace_core_node_in *in)
{
    return place_in(c, d, in);
}

int sertrace_core_nodes(sertrace_core *c, sertrace_dump_state *d, const sertrace_core_node_in *in,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (place_in(c, d, &in[i]) < 0)
            return -1;
    return 0;
}

int sertrace_core_define(sertrace_core *c, sertrace_dump_state *d, uint32_t index, const char *text,
                         size_t len, bool label)
{
    return direct_result(c, d, define_type(d, index, text, len, label));
}

int sertrace_core_note_at(sertrace_core *c, sertrace_dump_state *d, uint32_t depth, const char *key,
                          size_t key_len, const char *value, size_t value_len)
{
    return direct_result(c, d, place_note(c, d, depth, key, key_len, value, value_len));
}

bool sertrace_core_can_abort(const sertrace_core *c)
{
    return c->v.dump_abort != NULL ||
           (!c->v.dump_open && !c->v.node_enter && !c->v.node_exit && !c->v.node_leaf &&
            !c->v.note && !c->v.error && !c->v.dump_close);
}

int sertrace_core_dump_abort(sertrace_core *c, int64_t pid, uint64_t dump_id)
{
    sertrace_dump_state *d = find_dump(c, pid, dump_id);
    if (!d)
        return 0;
    if (!sertrace_core_can_abort(c))
        return -1;
    int rc = c->v.dump_abort ? c->v.dump_abort(c->v.ctx, d) : 0;
    d->depth = 0;
    unlink_dump(c, d);
    if (d->discarded)
        c->lossy_live--;
    c->stats.dumps_aborted++;
    recycle_dump(c, d);
    return rc;
}

static int note_lossy_pid(sertrace_core *c, int64_t pid)
{
    if (pid < 0) {
        c->any_pid_lossy = true;
        return 0;
    }
    for (size_t i = 0; i < c->nlossy_pids; i++)
        if (c->lossy_pids[i] == pid)
            return 0;
    if (c->nlossy_pids == c->lossy_pids_cap) {
        size_t cap = c->lossy_pids_cap ? 2 * c->lossy_pids_cap : 8;
        int64_t *p = realloc(c->lossy_pids, cap * sizeof *p);
        if (!p)
            return -1;
        c->lossy_pids = p;
        c->lossy_pids_cap = cap;
    }
    c->lossy_pids[c->nlossy_pids++] = pid;
    return 0;
}

static bool pid_lossy(const sertrace_core *c, int64_t pid)
{
    if (c->any_pid_lossy || pid < 0)
        return c->any_pid_lossy || c->nlossy_pids > 0;
    for (size_t i = 0; i < c->nlossy_pids; i++)
        if (c->lossy_pids[i] == pid)
            return true;
    return false;
}

int sertrace_core_discarded(sertrace_core *c, int64_t pid, uint64_t count)
{
    c->stats.discarded_events += count;
    c->stats.discarded_notices++;
    if (count && note_lossy_pid(c, pid) != 0)
        return -1;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (sertrace_dump_state *d = c->buckets[i]; d; d = d->hash_next)
            if (pid < 0 || d->pid < 0 || d->pid == pid) {
                if (!d->discarded && count)
                    c->lossy_live++;
                d->discarded += count;
                /* open nodes PARTIAL; not a records loss of this dump
                 * unless its seq numbers show one */
                d->gap_epoch++;
            }
    return 0;
}

static int cmp_dump_time(const void *a, const void *b)
{
    const sertrace_dump_state *x = *(sertrace_dump_state *const *)a;
    const sertrace_dump_state *y = *(sertrace_dump_state *const *)b;
    if (x->ts_begin != y->ts_begin)
        return x->ts_begin < y->ts_begin ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->dump_id < y->dump_id ? -1 : x->dump_id > y->dump_id;
}

int sertrace_core_finish(sertrace_core *c)
{
    if (c->live == 0)
        return 0;
    size_t n = 0;
    sertrace_dump_state **all = malloc(c->live * sizeof *all);
    if (!all)
        return -1;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (sertrace_dump_state *d = c->buckets[i]; d; d = d->hash_next)
            all[n++] = d;
    qsort(all, n, sizeof *all, cmp_dump_time);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        all[i]->flags |= SERTRACE_DUMPF_UNFINISHED;
        if (pid_lossy(c, all[i]->pid))
            all[i]->flags |= SERTRACE_DUMPF_TRACE_DISCARDS;
        rc = close_dump(c, all[i], SERTRACE_NODE_UNFINISHED);
    }
    free(all);
    return rc;
}
