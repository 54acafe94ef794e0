/* summary-internal.h -- the summary's output model, shared by the
 * aggregation (summary.c) and its two writers (summary-text.c,
 * summary-json.c); internal to analyzers/core.
 *
 * summary.c keeps the model: per live dump the counters by kind and by
 * type, the top-N heap of captured nodes (no strings) and the flags; over
 * all dumps the totals.  A writer turns the model into one output format
 * and nothing else: it appends to a sertrace_buf, whose first error
 * sticks (format.h), so a writer appends a whole section and reports the
 * buffer's error once, at its end.  The model picks its writer once, at
 * create (summary_writer below), and never tests the format again.
 */
#ifndef SERTRACE_SUMMARY_INTERNAL_H
#define SERTRACE_SUMMARY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "outbuf.h"
#include "summary.h"
#include "pathstats.h"

#define ANC_MAX 8     /* ancestry kept per top/flag entry */
#define PATH_KEPT 240 /* bytes of a top/flag entry's path kept (paths.h) */
#define FLUSH_AT (64u << 10)

typedef struct summary_writer summary_writer;

/* Nodes counted, their bytes (incl. children) and self bytes; `refs`:
 * how many of the counted nodes are memo references (SERTRACE_TAG_MEMO
 * nodes, counted on the row of the object they point back to, found by
 * address: summary-shared.c), so a type shows the objects written apart
 * from the references to them. */
typedef struct node_stat {
    uint64_t count, bytes, self, refs;
    /* Bytes owned (types only, issue 13 item 7): a node's self bytes,
     * except that the whole subtree of a reduce's arguments (a node
     * labelled ROLE ARGS, schema v5), and of the state of an object
     * rebuilt by a reduce function (tag R), is charged to the reduced
     * object's type and to none inside it -- numpy.ndarray owns its data,
     * not the bytes / tuple / PickleBuffer that carry it.  An instance's
     * state (tag O, its __dict__) is not charged: its attributes own
     * themselves.  Additive like self: each byte owned once. */
    uint64_t owned;
} node_stat;

/* A node as kept for the top-N: no strings, names resolved at render. */
typedef struct top_raw {
    uint64_t bytes, self;
    uint32_t depth, type;
    uint16_t flags;
    uint8_t tag;
    uint8_t anc_n; /* entries in anc_* (the node itself last) */
    uint8_t anc_tag[ANC_MAX];
    uint32_t anc_type[ANC_MAX];
    uint32_t anc_depth[ANC_MAX];
    /* Its path (paths.h, escaped), rendered when captured; empty when no
     * LABEL record was seen in its dump (traces before schema v5).  A longer path keeps its root
     * and its innermost end. */
    uint16_t path_len;
    char path[PATH_KEPT];
    uint64_t addr;     /* the object's address (identity) */
    uint64_t start;    /* payload offset of its first byte */
    uint64_t refs;     /* memo references to it in its dump (filled at dump close) */
    uint64_t retained; /* retained bytes (summary-shared.c), when has_retained */
    bool has_retained; /* exact retained bytes known (filled at dump close) */
} top_raw;

/* An object written in a dump (summary-shared.c): a non-reference node
 * with an address, in the order the nodes opened. */
typedef struct shared_obj {
    uint64_t addr, start, end; /* end: UINT64_MAX while its node is open */
    uint32_t type, depth;
} shared_obj;

/* Memo references to one address (`count` 0: a free slot): how many, the
 * last one's position, their own type row, what of them moves to the
 * target's row at dump close (`moved` of them, with their bytes, self
 * and owned bytes), and the target (index + 1 in objs, 0: unknown). */
typedef struct shared_ref {
    uint64_t addr, count, last;
    uint64_t moved, bytes, self, owned;
    uint32_t type, obj;
    uint32_t span; /* shared_retained: index + 1 of its target's span */
} shared_ref;

/* One memo reference with an address, in stream order (summary-shared.c:
 * the references inside a shared object, for retained bytes). */
typedef struct shared_reflog {
    uint64_t pos, addr;
} shared_reflog;

/* A rendered entry (overall top, flag) in the output's format. */
typedef struct rendered {
    uint64_t bytes;
    bool prunable; /* an oversize-percent candidate */
    char *str;
    /* A node's flag (add_flag): what it was rendered from, so that a dump
     * whose sizes turn out, at its dump_end, to be lower bounds
     * (SERTRACE_DUMPF_LOWER_BOUNDS) renders it again with "≥". */
    const char *kind; /* NULL: nothing to render again */
    top_raw raw;
    char *msg, *path;
    size_t msg_len, path_len;
} rendered;

typedef struct dump_sum {
    node_stat kinds[256];
    uint8_t touched[256]; /* kinds in use, to clear them fast */
    unsigned ntouched;
    node_stat *types; /* by per-dump type index */
    uint32_t types_cap, types_max;
    top_raw *top;     /* the top-N entries kept (opts.top), in no order */
    uint32_t *top_ix; /* indices of top: a min-heap on bytes once N are kept
                         (entries of ~400 B stay put; the heap moves 4 B) */
    unsigned ntop;
    /* v_node_exit keeps a closing node in the top-N only from this many
     * bytes: 0 while fewer than N are kept, then the smallest kept + 1
     * (a filter: the exact test follows). */
    uint64_t top_gate;
    rendered *flags;
    unsigned nflags;  /* at most max_flags */
    size_t flags_cap; /* grown as flags come (grow.h) */
    uint64_t flags_dropped;
    sertrace_buf notes; /* kept notes, rendered in the output's format
                         * (JSON: comma-separated objects; text: lines) */
    unsigned nnotes;
    uint64_t notes_dropped;
    char *died_text; /* chain of an unfinished dump */
    char *died_json;
    uint64_t root_bytes;
    bool root_exact;
    sertrace_pathstats *paths; /* opts.paths: the dump's path patterns */
    /* Shared objects (summary-shared.c): the objects written (an array,
     * in order) and the memo references by address (open addressing,
     * `refs_cap` a power of two, 0: none yet). */
    shared_obj *objs;
    size_t objs_cap, objs_n;
    shared_ref *refs;
    size_t refs_cap, refs_n;
    bool refs_dirty;          /* recycled with its slots in use: shared_reuse clears them */
    bool objs_full;           /* objects past OBJS_MAX were not recorded */
    bool unknown_ref;         /* a reference whose target is not in objs
                               * (set at node exit without an address, at
                               * shared_resolve otherwise) */
    uint64_t unknown_ref_pos; /* the last such reference's position */
    shared_reflog *reflog;    /* every reference with an address, in order */
    size_t reflog_cap, reflog_n;
    bool reflog_full; /* references past OBJS_MAX were not logged */
    /* The open chain's path (paths.h), rendered lazily: chain.data[0 ..
     * chain_end[k - 1]] is the path of the open node at depth k for k <=
     * chain_depth; a node opening at depth k cuts chain_depth to k - 1,
     * and a capture renders the missing levels.  Each level's segment is
     * rendered at most once while it is open, so a kept node's path costs
     * O(PATH_KEPT), not O(depth). */
    sertrace_buf chain;
    uint32_t *chain_end;
    uint32_t chain_cap, chain_depth;
    uint32_t args_depth; /* depth of the open reduce-arguments node whose
                          * bytes its parent's type owns (0: none) */
    struct dump_sum *next_free;
} dump_sum;

typedef struct type_total {
    struct type_total *next;
    node_stat st;
    uint32_t len;
    char name[];
} type_total;

typedef struct type_row {
    uint32_t type;
    node_stat st;
} type_row;

struct sertrace_summary {
    sertrace_summary_opts o;
    bool flagging;           /* an oversize limit set (o.oversize_bytes or _percent) */
    const summary_writer *w; /* text or JSON */
    sertrace_summary_write_fn write;
    void *write_ctx;
    sertrace_buf out;
    sertrace_buf tmp;
    sertrace_buf sz;
    sertrace_buf filter; /* JSON "filter" member (empty: null) */
    bool json_started;
    bool legend_done; /* text: the tables' legend was printed */
    bool any_dump;
    uint64_t input_off; /* o.input: byte offset of the dump being written */
    int failed;
    dump_sum *free_list; /* recycled per-dump states */
    type_row *rows;      /* scratch for a dump's type rows */
    size_t rows_cap;
    /* overall */
    uint64_t dumps, complete, unfinished, payload_bytes, nodes;
    uint64_t oob_bytes; /* out-of-band bytes of every dump (schema v5) */
    uint64_t end_lost;
    uint64_t lower_dumps; /* dumps whose sizes are lower bounds */
    bool lower;           /* the dump (or totals) being written: sizes are lower bounds */
    node_stat kinds[256];
    uint64_t kinds_used[4]; /* bit t: kinds[t] added to (reset clears those) */
    type_total **types;
    size_t types_buckets, ntypes;
    uint64_t types_overflow;
    rendered *top; /* min-heap on bytes */
    unsigned ntop;
    unsigned *order; /* a dump's top entries, sorted (opts.top slots) */
    /* Escaped type names of the dump being printed, by type index, in the
     * output's format (each name is escaped once per dump, not once per
     * row or ancestry label).  Valid while cache_on. */
    sertrace_buf esc;
    uint32_t *esc_off, *esc_len;
    uint64_t *esc_gen;
    size_t esc_cap;
    uint64_t gen;
    bool cache_on;
    time_cache tcache;
    sertrace_pathstats *paths; /* opts.paths: the patterns of every dump */
};

/* ---- what a writer provides ------------------------------------------- *
 * Each returns sertrace_buf_error() of the buffer it wrote to: 0, or -1
 * (out of memory). */
struct summary_writer {
    /* One node entry: a top entry (`kind` NULL) or a node's flag (`kind`
     * "oversized"/"unserializable", with its message and path, either may
     * be NULL). */
    int (*entry)(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                 const top_raw *r, const char *kind, const char *message, size_t message_len,
                 const char *path, size_t path_len);
    /* An unserializable flag with no node open. */
    int (*nodeless_error)(sertrace_buf *b, const char *message, size_t message_len,
                          const char *path, size_t path_len);
    /* A note on node `n` (its capture `r`), or on the dump (`n` NULL);
     * `first`: the dump's first note. */
    int (*note)(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                const sertrace_node *n, const top_raw *r, bool first, const char *key,
                size_t key_len, const char *value, size_t value_len);
    /* A closed dump's section, into s->out: `rows` its types by self,
     * `whole` the sum of its self bytes. */
    int (*dump)(sertrace_summary *s, const sertrace_dump_state *d, const dump_sum *ds,
                const type_row *rows, unsigned nrows, uint64_t whole);
    /* The totals, into s->out: `rows` the overall types by self. */
    int (*totals)(sertrace_summary *s, type_total *const *rows, size_t nrows, uint64_t whole,
                  uint64_t discarded, uint64_t lost);
};

extern const summary_writer summary_text_writer;
extern const summary_writer summary_json_writer;

/* ---- shared by the model and the writers (summary.c) ------------------- */

/* Tag text and meaning with their lengths, by tag value ("K<n>" and
 * "other" for values without a tag). */
struct tag_text {
    char text[8];
    const char *meaning;
    uint8_t len;
    uint8_t meaning_len;
};
extern struct tag_text summary_tag_texts[256];

/* The escaped name of `type` (text: sertrace_fmt_escape; JSON: the inside
 * of sertrace_fmt_json_string), from the per-dump cache.  0 or -1. */
int summary_cached_name(sertrace_summary *s, const sertrace_dump_state *d, uint32_t type,
                        const char **out, size_t *out_len);
/* Text: "a › b › … › c"; JSON: ["a", "b", "…", "c"].  0 or -1. */
int summary_ancestry(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     const top_raw *r, bool json);
/* Hand s->out to the write function when it holds FLUSH_AT bytes (or
 * any, with `force`).  0 or -1 (a write failed, remembered). */
int summary_flush(sertrace_summary *s, bool force);

/* The dump's stats of type index `type` (grown on demand); NULL: out of
 * memory.  Inline: one compare per node when the row exists (the array
 * grows, out of line in summary.c, a few times per dump). */
node_stat *summary_type_stat_grow(dump_sum *ds, uint32_t type);
static inline node_stat *summary_type_stat(dump_sum *ds, uint32_t type)
{
    if (type >= ds->types_cap)
        return summary_type_stat_grow(ds, type);
    if (type >= ds->types_max)
        ds->types_max = type + 1;
    return &ds->types[type];
}

/* Shared objects (summary-shared.c).  shared_object_enter, at node_enter:
 * record an object written (n->user: its index + 1); 0 or -1.
 * shared_object_exit: its end.  shared_count_ref: count a memo reference
 * node `n` (counted on its own type's row, `owned` of its bytes owned
 * there); 0 or -1.  At dump close: shared_resolve finds each reference's
 * target and moves the references to the target's type row (0 or -1),
 * shared_refs_of gives the references to `addr`, shared_retained fills
 * the top entries' retained bytes (has_retained; 0 or -1).  shared_reset
 * / shared_reuse / shared_free: recycle (at dump close) / take a recycled
 * state for a new dump (at dump open) / free. */
static inline int shared_object_enter(dump_sum *ds, sertrace_node *n);
static inline void shared_object_exit(dump_sum *ds, const sertrace_node *n);
static inline int shared_count_ref(dump_sum *ds, const sertrace_node *n, uint64_t owned);
int shared_resolve(dump_sum *ds);
uint64_t shared_refs_of(const dump_sum *ds, uint64_t addr);
int shared_retained(dump_sum *ds, const sertrace_dump_state *d);
void shared_reset(dump_sum *ds);
void shared_reuse(dump_sum *ds);
void shared_free(dump_sum *ds);

#define OBJS_MAX (1u << 21) /* objects recorded per dump (summary-shared.c) */
#define OPEN_END UINT64_MAX /* an object whose node has not closed */
int shared_objs_room(dump_sum *ds);

/* Inline: they run at every node (the array's growth is out of line). */
static inline int shared_object_enter(dump_sum *ds, sertrace_node *n)
{
    /* An It or Ext node carries its object's address (the pickler passes
     * the object) but is a part of it, written inside its node: the
     * object is the node that opened first at that address, not them. */
    if (n->addr == 0 || sertrace_tagclass_of(n->tag) == SERTRACE_TAGCLASS_REF ||
        n->tag == SERTRACE_TAG_ITEMS || n->tag == SERTRACE_TAG_EXT ||
        (n->flags & SERTRACE_NODE_NO_ENTER))
        return 0;
    if (ds->objs_n == ds->objs_cap) {
        int room = shared_objs_room(ds);
        if (room <= 0)
            return room;
    }
    shared_obj *o = &ds->objs[ds->objs_n++];
    o->addr = n->addr;
    o->start = n->enter_pos;
    o->end = OPEN_END;
    o->type = n->type;
    o->depth = n->depth;
    n->user = ds->objs_n; /* its index + 1, for its exit */
    return 0;
}

static inline void shared_object_exit(dump_sum *ds, const sertrace_node *n)
{
    if (n->user != 0 && n->user <= ds->objs_n)
        ds->objs[n->user - 1].end = n->enter_pos + n->bytes;
}

/* The reference table's hash of an address. */
static inline uint64_t shared_hash(uint64_t addr)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

/* Count reference `n` in the table (room for one more address: the
 * caller made sure). */
static inline void shared_ref_add(dump_sum *ds, const sertrace_node *n, uint64_t owned)
{
    size_t mask = ds->refs_cap - 1, j = (size_t)shared_hash(n->addr) & mask;
    while (ds->refs[j].count != 0 && ds->refs[j].addr != n->addr)
        j = (j + 1) & mask;
    shared_ref *r = &ds->refs[j];
    if (r->count == 0) {
        r->addr = n->addr;
        r->type = n->type;
        ds->refs_n++;
    }
    r->count++;
    if (n->enter_pos > r->last)
        r->last = n->enter_pos;
    if (n->type == r->type) { /* what moves to the target's row */
        r->bytes += n->bytes;
        r->self += n->self;
        r->owned += owned;
        r->moved++;
    }
}

int shared_count_ref_slow(dump_sum *ds, const sertrace_node *n, uint64_t owned);

/* Inline: a reference with an address, room in the log and in the table
 * (all but a few per dump); the rest, out of line in summary-shared.c. */
static inline int shared_count_ref(dump_sum *ds, const sertrace_node *n, uint64_t owned)
{
    if (n->addr == 0 || ds->reflog_n == ds->reflog_cap || (ds->refs_n + 1) * 2 > ds->refs_cap)
        return shared_count_ref_slow(ds, n, owned);
    ds->reflog[ds->reflog_n++] = (shared_reflog){n->enter_pos, n->addr};
    shared_ref_add(ds, n, owned);
    return 0;
}

/* Mark `b` failed (an error that is not the buffer's own): -1. */
static inline int summary_fail(sertrace_buf *b)
{
    b->err = -1;
    return -1;
}

static inline bool raw_exact(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_bytes_exact(&probe);
}

/* SERTRACE_BOUND_* of a kept node's bytes. */
static inline int raw_bound(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_bound(&probe);
}

static inline bool raw_self_exact(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_self_exact(&probe);
}

static inline const char *status_text(const sertrace_dump_state *d)
{
    if (!(d->flags & SERTRACE_DUMPF_END))
        return "unknown";
    return (d->flags & SERTRACE_DUMPF_STATUS_ERROR) ? "error" : "ok";
}

/* The overall kinds in use (s->kinds_used), in tag order, into `out`
 * (256 bytes): their number. */
static inline unsigned summary_kinds_used(const sertrace_summary *s, uint8_t *out)
{
    unsigned n = 0;
    for (unsigned w = 0; w < 4; w++)
        for (uint64_t m = s->kinds_used[w]; m; m &= m - 1)
            out[n++] = (uint8_t)(w * 64 + (unsigned)__builtin_ctzll(m));
    return n;
}

/* The kinds in use, in tag order: a dump's `touched` list (sorted; a
 * dump uses a few kinds) or, with `touched` NULL, all 256. */
#define FOR_KINDS(t, kinds, touched, ntouched)                                                     \
    for (unsigned k_ = 0, t = 0; k_ < ((touched) ? (ntouched) : 256u); k_++)                       \
        if ((t = (touched) ? (touched)[k_] : k_), (kinds)[t].count)

#endif /* SERTRACE_SUMMARY_INTERNAL_H */
