/* treeprint.c -- per-dump node buffer and dill-style tree printer.
 *
 * node_enter appends a record (pre-order), node_exit fills in its size,
 * flags and the index where its subtree ends; notes and errors hang off
 * their node in a singly linked list of "extras" whose strings live in a
 * per-dump arena.  At dump_close the buffer is printed iteratively (see
 * treeprint.h) and freed.
 */
#include "treeprint.h"
#include "paths.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "grow.h"
#include "lines.h"
#include "losses.h"
#include "nodebuf.h"
#include "outbuf.h"

#define FLUSH_AT (64u << 10)
#define NO_EXTRA UINT32_MAX

typedef struct tnode {
    uint64_t bytes, addr, length;
    uint32_t type, depth;
    uint32_t end;        /* index just past its subtree */
    uint32_t extra_head; /* first note/error, or NO_EXTRA */
    uint32_t extra_tail;
    uint16_t flags;
    uint8_t tag;
    uint8_t keep;       /* print pass: its subtree holds a flagged node */
    uint8_t label_kind; /* its edge label (schema v5), shown after the repr */
    bool in_state;      /* its parent is an instance's state */
    uint64_t label;
    uint64_t oob; /* out-of-band bytes, shown in its exit line's brackets */
} tnode;

typedef struct extra {
    uint32_t next;
    uint32_t a_off, a_len; /* note key / error message */
    uint32_t b_off, b_len; /* note value / error path */
    bool is_error;
} extra;

typedef struct dump_buf {
    tnode *nodes;
    uint32_t n, cap;
    extra *extras;
    uint32_t nextras, extras_cap;
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t dump_extra_head, dump_extra_tail; /* notes on the dump itself */
    char *died;                                /* chain of an unfinished dump */
    bool overflow;                             /* more than UINT32_MAX-1 nodes: stopped buffering */
    struct dump_buf *next_free;
} dump_buf;

/* Per-dump buffers kept for reuse (a trace of millions of small dumps
 * then allocates nothing per dump); larger ones are released. */
#define FREE_BUFS_MAX 16
#define KEEP_NODES (64u << 10)
#define KEEP_EXTRAS 4096u
#define KEEP_ARENA (256u << 10)

struct sertrace_treeprint {
    sertrace_treeprint_opts o;
    sertrace_summary_write_fn write;
    void *write_ctx;
    sertrace_buf out;
    sertrace_buf tmp;
    uint64_t dumps;
    uint64_t input_off; /* o.input: byte offset of the next dump */
    int failed;
    bool lower; /* the dump being printed: its sizes are lower bounds */
    /* print stack, reused across dumps */
    struct open_entry {
        uint32_t idx;
        uint64_t fold_n, fold_bytes;
        uint64_t deep_n, deep_bytes;
        bool fold_inexact;
    } * stack;
    size_t stack_cap;
    time_cache tcache;
    /* enter-line heads per (type, tag) of the dump being printed */
    sertrace_lines lines;
    dump_buf *free_bufs; /* recycled per-dump buffers */
    unsigned nfree;
};

static int flush_out(sertrace_treeprint *t, bool force)
{
    if (t->out.len && (force || t->out.len >= FLUSH_AT)) {
        if (t->write(t->write_ctx, t->out.data, t->out.len) < 0)
            t->failed = -1;
        sertrace_buf_clear(&t->out);
    }
    return t->failed;
}

/* flush-each-dump: everything buffered goes out now, through stdio too. */
static int flush_now(sertrace_treeprint *t)
{
    flush_out(t, true);
    if (t->o.flush && t->o.flush(t->write_ctx) < 0)
        t->failed = -1;
    return t->failed;
}

static int arena_add(dump_buf *db, const char *s, size_t n, uint32_t *off)
{
    if (n > UINT32_MAX || db->arena_len + n > UINT32_MAX)
        return -1;
    if (db->arena_len + n > db->arena_cap) {
        char *a = sertrace_grow(db->arena, &db->arena_cap, 1, db->arena_len + n, 256);
        if (!a)
            return -1;
        db->arena = a;
    }
    if (n)
        memcpy(db->arena + db->arena_len, s, n);
    *off = (uint32_t)db->arena_len;
    db->arena_len += n;
    return 0;
}

static int add_extra(dump_buf *db, sertrace_node *n, bool is_error, const char *a, size_t a_len,
                     const char *b, size_t b_len)
{
    if (db->nextras == db->extras_cap) {
        size_t cap = db->extras_cap;
        extra *e = sertrace_grow(db->extras, &cap, sizeof *e, (size_t)db->nextras + 1, 16);
        if (!e || cap > UINT32_MAX)
            return -1;
        db->extras = e;
        db->extras_cap = (uint32_t)cap;
    }
    extra *e = &db->extras[db->nextras];
    memset(e, 0, sizeof *e);
    e->next = NO_EXTRA;
    e->is_error = is_error;
    e->a_len = (uint32_t)a_len;
    e->b_len = (uint32_t)b_len;
    if (arena_add(db, a, a_len, &e->a_off) < 0 || arena_add(db, b, b_len, &e->b_off) < 0)
        return -1;
    uint32_t *head, *tail;
    if (n && n->user < db->n) {
        tnode *tn = &db->nodes[n->user];
        head = &tn->extra_head;
        tail = &tn->extra_tail;
    } else {
        head = &db->dump_extra_head;
        tail = &db->dump_extra_tail;
    }
    if (*head == NO_EXTRA)
        *head = db->nextras;
    else
        db->extras[*tail].next = db->nextras;
    *tail = db->nextras;
    db->nextras++;
    return 0;
}

/* ---- visitor ------------------------------------------------------------ */

static int v_dump_open(void *ctx, sertrace_dump_state *d)
{
    sertrace_treeprint *t = ctx;
    dump_buf *db = t->free_bufs;
    if (db) {
        t->free_bufs = db->next_free;
        t->nfree--;
        db->next_free = NULL;
    } else {
        db = calloc(1, sizeof *db);
        if (!db)
            return -1;
    }
    db->dump_extra_head = db->dump_extra_tail = NO_EXTRA;
    d->user = db;
    return 0;
}

static int v_node_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)ctx;
    dump_buf *db = d->user;
    int kept = SERTRACE_NODEBUF_KEEP(db, n);
    if (kept <= 0)
        return kept;
    tnode *tn = &db->nodes[n->user];
    SERTRACE_NODEBUF_COPY(tn, d, n);
    tn->addr = n->addr;
    tn->length = n->length;
    tn->extra_head = tn->extra_tail = NO_EXTRA;
    tn->end = UINT32_MAX;
    return 0;
}

static int put_chain(sertrace_buf *b, const sertrace_dump_state *d, uint32_t depth);

static int v_node_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    sertrace_treeprint *t = ctx;
    dump_buf *db = d->user;
    if (n->user >= db->n)
        return 0;
    tnode *tn = &db->nodes[n->user];
    tn->bytes = n->bytes;
    tn->flags = n->flags;
    tn->oob = n->oob;
    tn->end = db->n;
    if ((n->flags & SERTRACE_NODE_UNFINISHED) && !db->died) {
        sertrace_buf_clear(&t->tmp);
        if (put_chain(&t->tmp, d, n->depth) < 0)
            return -1;
        db->died = strdup(t->tmp.data ? t->tmp.data : "");
        if (!db->died)
            return -1;
    }
    return 0;
}

static int v_note(void *ctx, sertrace_dump_state *d, sertrace_node *n, const char *key,
                  size_t key_len, const char *value, size_t value_len)
{
    (void)ctx;
    return add_extra(d->user, n, false, key, key_len, value, value_len);
}

static int v_error(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                   const char *msg, size_t msg_len, const char *path, size_t path_len)
{
    (void)ctx;
    (void)tag;
    (void)type;
    return add_extra(d->user, n, true, msg, msg_len, path, path_len);
}

/* ---- printing ------------------------------------------------------------ */

static int bars(sertrace_buf *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (buf_lit(b, "\xe2\x94\x82") < 0) /* "│" */
            return -1;
    return 0;
}

/* Deep lines.  dill's grammar indents a line by one "│" per level, so a
 * tree N levels deep prints O(N²) bytes (a 100,000-deep chain: 30 GB).
 * Past TREE_DEEP bars a line is indented compactly instead: TREE_DEEP_BARS
 * bars, then "[depth N]" (N = the node's depth), then the line as usual;
 * a line then never exceeds ~100 bytes plus its text.  `nbars` is the
 * indentation the grammar wants; returns true when the compact prefix was
 * written, and the caller formats the rest of the line with no bars. */
#define TREE_DEEP 256u
#define TREE_DEEP_BARS 16u

static int deep_prefix(sertrace_buf *b, uint32_t nbars, uint32_t depth, bool *compact)
{
    *compact = nbars > TREE_DEEP;
    if (!*compact)
        return 0;
    if (bars(b, TREE_DEEP_BARS) < 0 || buf_lit(b, "[depth ") < 0 || put_u64(b, depth) < 0 ||
        buf_lit(b, "]") < 0)
        return -1;
    return 0;
}

/* "│"*nbars, or the compact prefix. */
static int indent(sertrace_buf *b, uint32_t nbars, uint32_t depth)
{
    bool compact;
    if (deep_prefix(b, nbars, depth, &compact) < 0)
        return -1;
    return compact ? 0 : bars(b, nbars);
}

static int put_enter_line(sertrace_treeprint *t, const sertrace_dump_state *d, const tnode *tn)
{
    sertrace_buf *b = &t->out;
    size_t len;
    const char *name = sertrace_core_type_name(d, tn->type, &len);
    bool compact;
    if (deep_prefix(b, tn->depth >= 2 ? tn->depth - 2 : 0, tn->depth, &compact) < 0)
        return -1;
    /* an index with no TYPE record shows "?": not cached (type 0) */
    if (sertrace_lines_enter(&t->lines, b, compact ? 2 : tn->depth, tn->tag, name ? tn->type : 0,
                             name, len, tn->addr, tn->length) < 0)
        return -1;
    if (tn->label_kind == SERTRACE_LABEL_NONE)
        return 0;
    /* the label after the repr, two spaces apart, as the live tree */
    b->len--; /* the enter line's newline */
    sertrace_buf_append(b, "  ", 2);
    sertrace_label_append(b, d, tn->label_kind, tn->label, tn->in_state, 0);
    sertrace_buf_append(b, "\n", 1);
    return sertrace_buf_error(b);
}

static int put_exit_line(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes, bool exact,
                         const char *flags)
{
    bool compact;
    if (deep_prefix(b, depth >= 1 ? depth - 1 : 0, depth, &compact) < 0)
        return -1;
    if (flags == NULL)
        return sertrace_lines_exit(b, compact ? 1 : depth, tag, bytes, exact);
    return sertrace_fmt_exit(b, compact ? 1 : depth, tag, bytes, exact, flags);
}

/* "TAG name › TAG name ..." of the open chain stack[0 .. depth-1], raw
 * (escaped when printed). */
static int put_chain(sertrace_buf *b, const sertrace_dump_state *d, uint32_t depth)
{
    uint32_t skip_from = depth > 16 ? 2 : depth + 1;
    uint32_t skip_to = depth > 16 ? depth - 13 : 0;
    for (uint32_t i = 1; i <= depth; i++) {
        if (i >= skip_from && i <= skip_to) {
            if (i == skip_from && sertrace_buf_appendf(b, " \xe2\x80\xba \xe2\x80\xa6 (%u levels)",
                                                       skip_to - skip_from + 1) < 0)
                return -1;
            continue;
        }
        const sertrace_node *a = &d->stack[i - 1];
        char tmp[8];
        size_t len;
        const char *name = sertrace_core_type_name(d, a->type, &len);
        if (sertrace_buf_appendf(b, "%s%s ", i > 1 ? " \xe2\x80\xba " : "",
                                 sertrace_tag_text(a->tag, tmp)) < 0 ||
            sertrace_buf_append(b, name ? name : "?", name ? len : 1) < 0)
            return -1;
    }
    return 0;
}

static int put_header(sertrace_treeprint *t, const sertrace_dump_state *d, const dump_buf *db)
{
    sertrace_buf *b = &t->out;
    int rc;
    if (t->o.input) { /* "── dump 2 · FILE · byte 188 · pickle ..." */
        rc = buf_lit(b, "\xe2\x94\x80\xe2\x94\x80 dump ") || put_u64(b, d->dump_id) ||
                     buf_lit(b, " \xc2\xb7 ") ||
                     sertrace_fmt_escape(b, t->o.input, strlen(t->o.input)) ||
                     buf_lit(b, " \xc2\xb7 byte ") || put_u64(b, t->input_off) ||
                     buf_lit(b, " \xc2\xb7 ")
                 ? -1
                 : 0;
        t->input_off += (d->flags & SERTRACE_DUMPF_END) ? d->payload_bytes : d->max_pos;
    } else {
        rc = buf_lit(b, "\xe2\x94\x80\xe2\x94\x80 dump ") || put_u64(b, d->dump_id) ||
                     buf_lit(b, " \xc2\xb7 pid ") || put_i64(b, d->pid) ||
                     buf_lit(b, " \xc2\xb7 tid ") || put_i64(b, d->tid) ||
                     buf_lit(b, " \xc2\xb7 ") || put_time(b, d->ts_begin, &t->tcache) ||
                     buf_lit(b, " \xc2\xb7 ")
                 ? -1
                 : 0;
    }
    if (rc == 0)
        rc = d->serializer_len ? sertrace_fmt_escape(b, d->serializer, d->serializer_len)
                               : buf_lit(b, "?");
    if (rc == 0)
        rc = buf_lit(b, " protocol ") || put_i64(b, d->protocol) || buf_lit(b, " \xc2\xb7 payload ")
                 ? -1
                 : 0;
    if (rc == 0) {
        if (d->flags & SERTRACE_DUMPF_END) {
            const char *ge = t->lower ? "\xe2\x89\xa5 " : ""; /* "≥ " */
            rc = sertrace_buf_append(b, ge, strlen(ge)) ||
                         sertrace_fmt_size(b, d->payload_bytes, t->o.exact)
                     ? -1
                     : 0;
            if (rc == 0 && !t->o.exact && d->payload_bytes >= 1024)
                rc = buf_lit(b, " (") || sertrace_buf_append(b, ge, strlen(ge)) ||
                             put_u64(b, d->payload_bytes) || buf_lit(b, " B)")
                         ? -1
                         : 0;
        } else {
            rc = buf_lit(b, "unknown \xe2\x89\xa5 ");
            if (rc == 0)
                rc = sertrace_fmt_size(b, d->max_pos, t->o.exact);
        }
    }
    if (rc == 0 && (d->flags & SERTRACE_DUMPF_STATUS_ERROR))
        rc = buf_lit(b, " \xc2\xb7 status error");
    if (rc == 0 && t->lower)
        rc = buf_lit(b, " \xc2\xb7 sizes are lower bounds");
    if (rc == 0 && !sertrace_dump_complete(d)) {
        rc = buf_lit(b, "  !! INCOMPLETE:");
        if (rc == 0)
            rc = buf_lit(b, " ");
        if (rc == 0)
            rc = sertrace_dump_losses(b, d);
        if (rc == 0)
            rc = buf_lit(b, "; sizes marked \xe2\x89\xa5 are lower bounds");
        if (rc == 0 && d->unsure_exits)
            rc = buf_lit(b, ", \xe2\x89\xa4 upper bounds");
    }
    if (rc == 0)
        rc = buf_lit(b, "\n");
    if (rc == 0 && db->died) {
        /* the chain open at the last record that reached the trace: a
         * SIGKILL loses the runtime's unflushed batch (README, Exactness) */
        rc = buf_lit(b, "!! died in (as of its last recorded event): ");
        if (rc == 0)
            rc = sertrace_fmt_escape(b, db->died, strlen(db->died));
        if (rc == 0)
            rc = buf_lit(b, "\n");
    }
    if (rc == 0 && db->overflow)
        rc = buf_lit(b, "!! too many nodes: tree truncated\n");
    return rc;
}

static int put_extras(sertrace_treeprint *t, const dump_buf *db, uint32_t head, uint32_t depth,
                      const sertrace_dump_state *d, const tnode *tn)
{
    int rc = 0;
    for (uint32_t i = head; i != NO_EXTRA && rc == 0; i = db->extras[i].next) {
        const extra *e = &db->extras[i];
        const char *a = db->arena + e->a_off, *bb = db->arena + e->b_off;
        bool compact;
        if (deep_prefix(&t->out, depth, depth, &compact) < 0)
            return -1;
        uint32_t nb = compact ? 0 : depth;
        if (!e->is_error) {
            rc = sertrace_fmt_note(&t->out, nb, a, e->a_len, bb, e->b_len);
            if (rc == 0)
                rc = flush_out(t, false);
            continue;
        }
        sertrace_buf *m = &t->tmp;
        sertrace_buf_clear(m);
        /* one wording with the live tree (format.h): the node's tag and
         * type, then the message and the path */
        size_t len = 0;
        const char *name = tn ? sertrace_core_type_name(d, tn->type, &len) : NULL;
        rc =
            sertrace_fmt_unserializable(m, tn ? tn->tag : -1, name, len, a, e->a_len, bb, e->b_len);
        if (rc == 0)
            rc = sertrace_fmt_flag_line(&t->out, nb, m->data, m->len);
        if (rc == 0)
            rc = flush_out(t, false);
    }
    return rc;
}

/* The core's node flags and the words format/ prints for them on an exit
 * line (sertrace_fmt_exit_flags: one wording with the live tree). */
static const struct {
    unsigned node;  /* SERTRACE_NODE_* */
    unsigned words; /* SERTRACE_FMT_FLAG_* */
} node_flag_words[] = {
    {SERTRACE_NODE_UNFINISHED, SERTRACE_FMT_FLAG_UNFINISHED},
    {SERTRACE_NODE_FAILED, SERTRACE_FMT_FLAG_FAILED},
    {SERTRACE_NODE_ERROR, SERTRACE_FMT_FLAG_UNSERIALIZABLE},
    {SERTRACE_NODE_NO_EXIT, SERTRACE_FMT_FLAG_EXIT_LOST},
    {SERTRACE_NODE_NO_ENTER, SERTRACE_FMT_FLAG_ENTER_LOST},
    {SERTRACE_NODE_PARTIAL, SERTRACE_FMT_FLAG_PARTIAL},
    {SERTRACE_NODE_MALFORMED, SERTRACE_FMT_FLAG_MALFORMED},
    {SERTRACE_NODE_EXIT_UNSURE, SERTRACE_FMT_FLAG_EXIT_UNSURE},
};

static int put_exit(sertrace_treeprint *t, const sertrace_dump_state *d, const tnode *tn,
                    uint64_t oversize)
{
    sertrace_buf *b = &t->out;
    sertrace_buf *f = &t->tmp;
    sertrace_node probe = {0};
    probe.flags = tn->flags;
    bool exact = sertrace_node_bytes_exact(&probe);
    int rc = 0;
    if (exact && tn->flags == 0 && tn->end != UINT32_MAX && !(oversize && tn->bytes >= oversize))
        return put_exit_line(b, tn->depth, tn->tag, tn->bytes, t->o.exact,
                             NULL); /* the common case: no flag */
    sertrace_buf_clear(f);
    /* one wording with the live tree (format.h) */
    unsigned ff = 0;
    if (tn->end == UINT32_MAX)
        ff |= SERTRACE_FMT_FLAG_NEVER_CLOSED;
    if (oversize && tn->bytes >= oversize)
        ff |= SERTRACE_FMT_FLAG_OVERSIZED;
    for (size_t i = 0; i < sizeof node_flag_words / sizeof *node_flag_words; i++)
        if (tn->flags & node_flag_words[i].node)
            ff |= node_flag_words[i].words;
    rc = sertrace_fmt_exit_flags(f, ff, oversize, t->o.exact);
    if (rc < 0)
        return -1;
    (void)d;
    if (exact)
        return put_exit_line(b, tn->depth, tn->tag, tn->bytes, t->o.exact, f->data);
    char tmp[8];
    int bound = sertrace_node_bound(&probe);
    rc = indent(b, tn->depth >= 1 ? tn->depth - 1 : 0, tn->depth);
    if (rc == 0) /* "≥ " lower bound, "≤ " upper bound, "? " neither */
        rc = sertrace_buf_appendf(
            b, "\xe2\x94\x94 # %s [%s", sertrace_tag_text(tn->tag, tmp),
            sertrace_fmt_bound_text(bound == SERTRACE_BOUND_UPPER     ? SERTRACE_FMT_UPPER
                                    : bound == SERTRACE_BOUND_UNKNOWN ? SERTRACE_FMT_UNKNOWN
                                                                      : SERTRACE_FMT_LOWER));
    if (rc == 0)
        rc = sertrace_fmt_size(b, tn->bytes, t->o.exact);
    if (rc == 0)
        rc = buf_lit(b, "]");
    if (rc == 0 && f->len) {
        rc = buf_lit(b, "  ");
        if (rc == 0)
            rc = sertrace_buf_append(b, f->data, f->len);
    }
    if (rc == 0)
        rc = buf_lit(b, "\n");
    return rc;
}

/* put_exit, with the node's out-of-band bytes in the brackets (v5). */
static int put_exit_oob(sertrace_treeprint *t, const sertrace_dump_state *d, const tnode *tn,
                        uint64_t oversize)
{
    size_t start = t->out.len;
    int rc = put_exit(t, d, tn, oversize);
    if (rc == 0 && tn->oob > 0)
        rc = sertrace_fmt_exit_oob(&t->out, start, tn->oob, t->o.exact);
    return rc;
}

/* One fold line: "├ … N WHAT, [≥ ]SIZE" at the children's indentation. */
static int put_fold_line(sertrace_treeprint *t, uint32_t nbars, uint32_t child_depth, uint64_t n,
                         const char *what, bool inexact, uint64_t bytes)
{
    sertrace_buf *b = &t->out;
    int rc = indent(b, nbars, child_depth);
    if (rc == 0)
        rc = sertrace_buf_appendf(b, "\xe2\x94\x9c \xe2\x80\xa6 %llu %s, %s", (unsigned long long)n,
                                  what, inexact ? "\xe2\x89\xa5 " : "");
    if (rc == 0)
        rc = sertrace_fmt_size(b, bytes, t->o.exact);
    if (rc == 0)
        rc = buf_lit(b, "\n");
    return rc;
}

static int put_folds(sertrace_treeprint *t, const struct open_entry *e, uint32_t child_depth)
{
    int rc = 0;
    uint32_t nbars = child_depth >= 2 ? child_depth - 2 : 0;
    if (e->fold_n)
        rc =
            put_fold_line(t, nbars, child_depth, e->fold_n, "more", e->fold_inexact, e->fold_bytes);
    if (rc == 0 && e->deep_n)
        rc = put_fold_line(t, nbars, child_depth, e->deep_n, "nodes below max-depth", t->lower,
                           e->deep_bytes);
    return rc;
}

/* Flags that a node's exit line shows (CHILD_INEXACT shows nothing: the
 * inexact child carries its own flag). */
#define SHOWN_FLAGS                                                                                \
    (SERTRACE_NODE_NO_ENTER | SERTRACE_NODE_NO_EXIT | SERTRACE_NODE_UNFINISHED |                   \
     SERTRACE_NODE_PARTIAL | SERTRACE_NODE_ERROR | SERTRACE_NODE_MALFORMED |                       \
     SERTRACE_NODE_FAILED | SERTRACE_NODE_EXIT_UNSURE)

static bool node_flagged(const tnode *tn, uint64_t oversize)
{
    return tn->end == UINT32_MAX || (tn->flags & SHOWN_FLAGS) ||
           (oversize && tn->bytes >= oversize);
}

/* Folding never hides a flag: mark every node whose subtree [i, end)
 * holds a flagged node (itself included), so the printer keeps it and
 * with it the chain of ancestors down to the flag.  One backward pass:
 * `next` is the smallest flagged index >= i, and the subtree of i holds a
 * flag iff next < end. */
static void mark_flagged_subtrees(dump_buf *db, uint64_t oversize)
{
    uint32_t next = UINT32_MAX;
    for (uint32_t i = db->n; i-- > 0;) {
        tnode *tn = &db->nodes[i];
        if (node_flagged(tn, oversize))
            next = i;
        uint32_t end = tn->end == UINT32_MAX || tn->end <= i ? i + 1 : tn->end;
        tn->keep = next < end;
    }
}

/* Close the open node `e`: its children's fold lines, its exit line, and
 * the output flushed when full. */
static int close_open(sertrace_treeprint *t, const sertrace_dump_state *d, const dump_buf *db,
                      const struct open_entry *e, uint64_t oversize)
{
    const tnode *on = &db->nodes[e->idx];
    int rc = put_folds(t, e, on->depth + 1);
    if (rc == 0)
        rc = put_exit_oob(t, d, on, oversize);
    if (rc == 0)
        rc = flush_out(t, false);
    return rc;
}

static int print_dump(sertrace_treeprint *t, const sertrace_dump_state *d, dump_buf *db)
{
    sertrace_lines_new_dump(&t->lines); /* its type indexes name other types */
    int rc = put_header(t, d, db);
    if (rc == 0)
        rc = put_extras(t, db, db->dump_extra_head, 0, d, NULL);
    uint64_t whole = (d->flags & SERTRACE_DUMPF_END) ? d->payload_bytes : d->max_pos;
    uint64_t oversize = t->o.oversize_bytes;
    if (t->o.oversize_percent > 0) {
        uint64_t p = (uint64_t)(t->o.oversize_percent / 100.0 * (double)whole);
        oversize = p ? p : 1;
    }
    bool folding = t->o.max_depth || t->o.min_size;
    if (folding)
        mark_flagged_subtrees(db, oversize);
    size_t sp = 0;
    uint32_t i = 0;
    while (i < db->n && rc == 0) {
        tnode *tn = &db->nodes[i];
        while (sp > 0 && db->nodes[t->stack[sp - 1].idx].depth >= tn->depth && rc == 0)
            rc = close_open(t, d, db, &t->stack[--sp], oversize);
        if (rc < 0)
            break;
        uint32_t end = tn->end == UINT32_MAX || tn->end <= i ? i + 1 : tn->end;
        if (sp > 0 && t->o.max_depth && tn->depth > t->o.max_depth && !tn->keep) {
            t->stack[sp - 1].deep_n += end - i;
            t->stack[sp - 1].deep_bytes += tn->bytes;
            i = end;
            continue;
        }
        if (sp > 0 && t->o.min_size && tn->bytes < t->o.min_size && !tn->keep) {
            sertrace_node probe = {0};
            probe.flags = tn->flags;
            if (!sertrace_node_bytes_exact(&probe))
                t->stack[sp - 1].fold_inexact = true;
            t->stack[sp - 1].fold_n++;
            t->stack[sp - 1].fold_bytes += tn->bytes;
            i = end;
            continue;
        }
        rc = put_enter_line(t, d, tn);
        if (rc == 0) /* output stays bounded: a deep chain has no exits */
            rc = flush_out(t, false);
        if (rc == 0)
            rc = put_extras(t, db, tn->extra_head, tn->depth, d, tn);
        if (rc < 0)
            break;
        if (sp == t->stack_cap) {
            struct open_entry *s = sertrace_grow(t->stack, &t->stack_cap, sizeof *s, sp + 1, 64);
            if (!s) {
                rc = -1;
                break;
            }
            t->stack = s;
        }
        t->stack[sp++] = (struct open_entry){i, 0, 0, 0, 0, false};
        i++;
    }
    while (sp > 0 && rc == 0)
        rc = close_open(t, d, db, &t->stack[--sp], oversize);
    return rc;
}

static void free_dump_buf(dump_buf *db)
{
    free(db->nodes);
    free(db->extras);
    free(db->arena);
    free(db->died);
    free(db);
}

/* Reset a printed dump's buffer and keep it for the next dump. */
static void recycle_dump_buf(sertrace_treeprint *t, dump_buf *db)
{
    if (t->nfree >= FREE_BUFS_MAX) {
        free_dump_buf(db);
        return;
    }
    if (db->cap > KEEP_NODES) {
        free(db->nodes);
        db->nodes = NULL;
        db->cap = 0;
    }
    if (db->extras_cap > KEEP_EXTRAS) {
        free(db->extras);
        db->extras = NULL;
        db->extras_cap = 0;
    }
    if (db->arena_cap > KEEP_ARENA) {
        free(db->arena);
        db->arena = NULL;
        db->arena_cap = 0;
    }
    free(db->died);
    db->died = NULL;
    db->n = 0;
    db->nextras = 0;
    db->arena_len = 0;
    db->overflow = false;
    db->next_free = t->free_bufs;
    t->free_bufs = db;
    t->nfree++;
}

static int v_dump_close(void *ctx, sertrace_dump_state *d)
{
    sertrace_treeprint *t = ctx;
    dump_buf *db = d->user;
    d->user = NULL;
    if (!db)
        return 0;
    /* Sizes that fall short (dump_end said so): every node shows "≥". */
    t->lower = (d->flags & SERTRACE_DUMPF_LOWER_BOUNDS) != 0;
    if (t->lower)
        for (uint32_t i = 0; i < db->n; i++)
            db->nodes[i].flags |= SERTRACE_NODE_LOWER_BOUND;
    int rc = print_dump(t, d, db);
    t->lower = false;
    recycle_dump_buf(t, db);
    t->dumps++;
    if (rc == 0) {
        if (t->o.flush_each_dump)
            flush_now(t);
        else
            flush_out(t, false);
    }
    return rc < 0 || t->failed ? -1 : 0;
}

/* ---- public ----------------------------------------------------------- */

sertrace_treeprint *sertrace_treeprint_create(const sertrace_treeprint_opts *opts,
                                              sertrace_summary_write_fn write, void *write_ctx)
{
    sertrace_treeprint *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->o = *opts;
    t->write = write;
    t->write_ctx = write_ctx;
    t->tcache = (time_cache)TIME_CACHE_INIT;
    return t;
}

void sertrace_treeprint_visitor(sertrace_treeprint *t, sertrace_core_visitor *v)
{
    SERTRACE_NODEBUF_VISITOR(v, t);
}

int sertrace_treeprint_finish(sertrace_treeprint *t, const sertrace_core_stats *stats)
{
    int rc = 0;
    if (stats && (stats->discarded_events || stats->lost_batches))
        rc =
            buf_lit(&t->out, "!! ") ||
                    sertrace_stream_losses(&t->out, stats->discarded_events, stats->lost_batches) ||
                    buf_lit(&t->out, "\n")
                ? -1
                : 0;
    if (rc == 0) {
        if (t->o.flush_each_dump)
            flush_now(t);
        else
            flush_out(t, true);
    }
    return rc < 0 || t->failed ? -1 : 0;
}

void sertrace_treeprint_destroy(sertrace_treeprint *t)
{
    if (!t)
        return;
    while (t->free_bufs) {
        dump_buf *next = t->free_bufs->next_free;
        free_dump_buf(t->free_bufs);
        t->free_bufs = next;
    }
    sertrace_buf_free(&t->out);
    sertrace_buf_free(&t->tmp);
    sertrace_lines_free(&t->lines);
    free(t->stack);
    free(t);
}
