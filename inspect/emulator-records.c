/* emulator-records.c -- the pickle's nodes to the tree core: at STOP they
 * are sorted by span (outer first), nested with an explicit stack (no
 * recursion: depth costs memory, not C stack), and fed to the core as the
 * schema records would be (ENTER/EXIT/ATOM/TYPE/NOTE between a dump_begin
 * and a dump_end), but directly: sertrace_core_node() and its siblings
 * (core.h), no record encoded or decoded.  A node's edge label (NAME, then
 * its ENTER's label) is given here too: hidden keys are numbered in the order the
 * nodes are written, as a recording numbers them, not in the order the
 * opcodes that attach them were read (an inner SETITEMS comes first).
 * Streaming (README "Streaming"): when the stack reads as a chain of open
 * containers from the root (read_chain: an instance, its state dict, the
 * big list being filled in it ...), the nodes are fed before STOP, batch
 * by batch (emu_stream_batch): the chain's levels entered and left open,
 * every other node fed whole, with the labels their consumers will give
 * (predict_labels), the same records in the same order as at STOP; then
 * only the levels are kept (keep_chain).  The prediction is checked
 * (emu_stream_watch, wrappers, fed items that grow, addresses); a dump
 * so begun that turns out mispredicted is dropped (emu_abort_dump) and
 * the pickle read again, whole.
 */
#define _GNU_SOURCE /* qsort_r */
#include "emulator-internal.h"

/* ---- the core, fed directly (core.h sertrace_core_node) ------------------- */

static int core_failed(emu *e)
{
    return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s",
                    "");
}

/* Nodes go to the core in batches (sertrace_core_nodes: one call per
 * FEED_BATCH nodes, each node's fields written once, straight into the
 * array the core reads); anything else the core is told (TYPE, NAME,
 * NOTE, an item count) first flushes the batch, so the core sees the
 * same calls in the same order as one call per node. */
#define FEED_BATCH 64
typedef struct feed_batch {
    uint32_t n;
    sertrace_core_node_in in[FEED_BATCH];
} feed_batch;

static int flush_batch(emu *e, feed_batch *b)
{
    uint32_t n = b->n;
    b->n = 0;
    if (n && sertrace_core_nodes(e->core, e->dump, b->in, n) < 0)
        return core_failed(e);
    return 0;
}

/* The next free entry of the batch (flushed when full). */
static inline sertrace_core_node_in *batch_slot(emu *e, feed_batch *b)
{
    if (b->n == FEED_BATCH && flush_batch(e, b) < 0)
        return NULL;
    return &b->in[b->n++];
}

static __attribute__((noinline)) int feed_type(emu *e, uint32_t type)
{
    uint32_t len = e->type_len[type];
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    if (sertrace_core_define(e->core, e->dump, type, e->names + e->type_off[type], len, false) < 0)
        return core_failed(e);
    return 0;
}

/* A label name: interned in the type table as "\x01." + text (see
 * emu_label_value), defined (a NAME) without that prefix. */
static __attribute__((noinline)) int feed_name(emu *e, uint32_t index)
{
    uint32_t len = e->type_len[index], skip = len >= 2 ? 2 : len;
    len -= skip;
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    if (sertrace_core_define(e->core, e->dump, index, e->names + e->type_off[index] + skip, len,
                             true) < 0)
        return core_failed(e);
    return 0;
}

static int feed_exit(emu *e, feed_batch *b, uint64_t end, uint32_t depth)
{
    sertrace_core_node_in *in = batch_slot(e, b);
    if (!in)
        return -1;
    in->op = SERTRACE_REC_EXIT;
    in->depth = depth;
    in->pos = end;
    return 0;
}

static __attribute__((noinline)) int feed_note(emu *e, uint32_t depth, const char *key,
                                               const char *value)
{
    if (sertrace_core_note_at(e->core, e->dump, depth, key, strlen(key), value, strlen(value)) < 0)
        return core_failed(e);
    return 0;
}

/* Outer nodes first: by start, then longer first, then later-created first
 * (a node that wraps another of the same span, such as a global around its
 * extension code, is created after it). */
static int cmp_nodes(const void *a, const void *b, void *base)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const node *x = (const node *)base + i, *y = (const node *)base + j;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return i > j ? -1 : (i < j);
}

/* One stable counting pass of the radix sort: src to dst by the 16-bit
 * digit at `shift` of the node's start (by_start) or of ~end (so that later
 * ends come first).  False, with nothing moved, when every key has the
 * same digit. */
static bool radix_pass(const uint32_t *src, uint32_t *dst, uint32_t n, const node *b, bool by_start,
                       unsigned shift, uint32_t *cnt)
{
#define DIGIT(i) ((by_start ? (uint32_t)b[i].start : ~(uint32_t)b[i].end) >> shift & 0xffffu)
    uint32_t sum = 0;
    memset(cnt, 0, 65536 * sizeof *cnt);
    for (uint32_t k = 0; k < n; k++)
        cnt[DIGIT(src[k])]++;
    if (cnt[DIGIT(src[0])] == n)
        return false;
    for (uint32_t d = 0; d < 65536; d++) {
        uint32_t c = cnt[d];
        cnt[d] = sum;
        sum += c;
    }
    for (uint32_t k = 0; k < n; k++)
        dst[cnt[DIGIT(src[k])]++] = src[k];
    return true;
#undef DIGIT
}

/* Whether node i comes before node j in cmp_nodes' order (i != j). */
static inline bool node_before(const node *base, uint32_t i, uint32_t j)
{
    const node *x = base + i, *y = base + j;
    if (x->start != y->start)
        return x->start < y->start;
    if (x->end != y->end)
        return x->end > y->end;
    return i > j;
}

/* Sort order[0..n), whose first `sorted` entries are in cmp_nodes' order
 * already and the others in creation order, using that the nodes come
 * nested: a node is made either before the nodes inside it (a list at
 * EMPTY_LIST) or after all of them (a tuple at TUPLE, an object at REDUCE),
 * not between.  The sorted nodes so far are a linked list cut into groups
 * (a node and the nodes moved behind it), kept on a stack; the sorted
 * prefix is a group a node.  A node that starts after the last one is a
 * group of its own at the end; one made after its parts takes the groups at
 * the top whose first node comes after it (each group is popped once:
 * linear whatever the depth) and goes before them, after the group below,
 * whose last node must come before it.  False, order untouched, when a node
 * fits neither (then the radix sort does it) or there is no memory for the
 * list and the stack (3n words). */
static bool sort_nested(emu *e, uint32_t *order, uint32_t n, uint32_t sorted, uint64_t extra)
{
    const node *base = e->nodes;
    uint64_t mem = (uint64_t)n * 3 * sizeof(uint32_t);
    if (e->memory + extra + mem > e->lim->max_memory)
        return false;
    uint32_t *nxt = malloc((size_t)n * sizeof *nxt);
    uint32_t *stk = nxt ? malloc((size_t)n * 2 * sizeof *stk) : NULL;
    if (!stk) {
        free(nxt);
        return false;
    }
    if (e->memory + extra + mem > e->peak)
        e->peak = e->memory + extra + mem;
    /* stk[2g], stk[2g + 1]: group g's first and last positions in order[] */
    uint32_t head = 0, sp = sorted, tail = sorted - 1;
    uint64_t tail_start = base[order[tail]].start;
    for (uint32_t k = 0; k < sorted; k++) { /* a node a group */
        nxt[k] = k + 1;
        stk[2 * k] = stk[2 * k + 1] = k;
    }
    for (uint32_t k = sorted; k < n; k++) {
        uint32_t x = order[k];
        uint64_t start = base[x].start;
        uint32_t top = sp;
        if (start <= tail_start) { /* else the common case: after every node so far */
            while (top > 0 && node_before(base, x, order[stk[2 * (top - 1)]]))
                top--;
            /* after every group's first: after the last node, else inside a group */
            if (top == sp && !node_before(base, order[tail], x))
                goto fail;
        }
        if (top == sp) { /* a group of its own at the end */
            nxt[tail] = k;
            stk[2 * sp] = stk[2 * sp + 1] = k;
            sp++;
            tail = k;
            tail_start = start;
            continue;
        }
        if (top > 0) {
            uint32_t pred = stk[2 * top - 1];
            if (!node_before(base, order[pred], x))
                goto fail;
            nxt[pred] = k;
        } else {
            head = k;
        }
        nxt[k] = stk[2 * top];
        stk[2 * top] = k;
        stk[2 * top + 1] = tail;
        sp = top + 1;
    }
    for (uint32_t k = 0, p = head; k < n; k++, p = nxt[p])
        stk[k] = order[p];
    memcpy(order, stk, (size_t)n * sizeof *order);
    free(nxt);
    free(stk);
    return true;
fail:
    free(nxt);
    free(stk);
    return false;
}

/* Sort order[0..n) (the live nodes, by index) into cmp_nodes' order.  The
 * nodes are created nearly in that order: only a node made after its parts
 * (a tuple at TUPLE, an object at REDUCE or NEWOBJ) moves back, over the
 * nodes inside it.  So insertion sort first, while its moves stay within
 * the nodes sorted + 1024 (one compare a node in order).  Past that (objects
 * nested in objects: the moves grow with n times the depth), sort_nested
 * goes on from the sorted prefix, linear (dataclass-graph's call 95.1M ->
 * 82.7M instructions against the radix sort).  Without it (a node made in
 * the middle of what is nested, no memory; SERTRACE_INSPECT_NO_FAST, tests),
 * a stable LSD radix sort, linear: from index order reversed (later-created
 * first), by end descending, then by start ascending, 16 bits a pass,
 * passes where all keys agree skipped.  Positions past 4 GiB, or no memory
 * for it (its n + 64 Ki words over the limit): qsort.  The order is total,
 * so all of them give the same result. */
static void sort_nodes(emu *e, uint32_t *order, uint32_t n, uint32_t from, uint64_t extra)
{
    node *base = e->nodes;
    uint32_t nnodes = e->nnodes;
    uint64_t moves = 0;
    uint64_t last_start = n ? base[order[0]].start : 0; /* of order[k - 1] */
    for (uint32_t k = 1; k < n; k++) {
        uint32_t x = order[k], j = k;
        /* the common case, a node that starts after the one before it:
         * in place (cmp_nodes' first test) */
        uint64_t start = base[x].start;
        if (start > last_start) {
            last_start = start;
            continue;
        }
        while (j > 0 && cmp_nodes(&order[j - 1], &x, base) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
        last_start = base[order[k]].start;
        if ((moves += k - j) > (uint64_t)k + 1024) {
            /* order[0..k] is sorted: sort_nested goes on from there */
            if (!e->no_fast && sort_nested(e, order, n, k + 1, extra))
                return;
            goto radix;
        }
    }
    return;
radix:;
    uint64_t radix_mem = ((uint64_t)n + 65536) * sizeof(uint32_t);
    bool fits = e->memory + extra + radix_mem <= e->lim->max_memory;
    uint32_t *tmp = fits ? malloc((size_t)n * sizeof *tmp) : NULL;
    uint32_t *cnt = fits ? malloc(65536 * sizeof *cnt) : NULL;
    uint64_t max_pos = 0;
    for (uint32_t i = from; i < nnodes; i++)
        if (!base[i].dead && base[i].end > max_pos)
            max_pos = base[i].end;
    if (!tmp || !cnt || max_pos > UINT32_MAX) {
        free(tmp);
        free(cnt);
        qsort_r(order, n, sizeof *order, cmp_nodes, base);
        return;
    }
    if (e->memory + extra + radix_mem > e->peak)
        e->peak = e->memory + extra + radix_mem;
    uint32_t m = 0, *src = order, *dst = tmp;
    for (uint32_t i = nnodes; i-- > from;)
        if (!base[i].dead)
            order[m++] = i;
    for (int p = 0; p < 4; p++)
        if (radix_pass(src, dst, n, base, p >= 2, (p & 1) ? 16 : 0, cnt)) {
            uint32_t *t = src;
            src = dst;
            dst = t;
        }
    if (src != order)
        memcpy(order, src, (size_t)n * sizeof *order);
    free(tmp);
    free(cnt);
}

/* The address a node is fed with (schema ENTER `addr`): its object's
 * identity when that object is shared -- a memo reference's target (always:
 * it is in the memo), an It or Ext node's object (its parent, `parent_addr`),
 * an object a GET read back; in a streamed dump also any memoized object,
 * since a GET after it is fed cannot be foreseen -- else 0.  The summary
 * keeps 32 B per object with an address (analyzers/core/README.md), so
 * the others get none. */
static inline uint64_t node_address(const emu *e, uint32_t i, uint64_t parent_addr)
{
    const node *n = &e->nodes[i];
    if (n->tag == SERTRACE_TAG_MEMO)
        return n->object;
    if (n->tag == SERTRACE_TAG_ITEMS || n->tag == SERTRACE_TAG_EXT)
        return parent_addr;
    if (e->streamed && n->memoized)
        return n->object;
    uint32_t j = emu_node_of_id(e, n->object);
    return j != NO_NODE && e->nodes[j].shared ? n->object : 0;
}

/* The dump begins: its state (hidden keys, TYPE / NAME given) starts
 * afresh. */
/* The protocol dump_begin carries: PROTO's, else 0 or 1 by the opcodes
 * seen (a streamed dump's begins before STOP: emu_emit_dump checks it). */
static int dump_protocol(const emu *e)
{
    return e->protocol >= 0 ? e->protocol : (e->max_op_proto >= 1);
}

static int begin_dump(emu *e)
{
    if (e->cap_typed < e->ntypes + 1) {
        bool *t = realloc(e->typed, ((size_t)e->ntypes + 1) * sizeof *t);
        if (!t)
            return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        e->typed = t;
        e->cap_typed = e->ntypes + 1;
    }
    memset(e->typed, 0, e->cap_typed * sizeof *e->typed);
    e->begun_proto = dump_protocol(e);
    if (sertrace_core_dump_begin(e->core, -1, -1, 0, e->dump_id, "pickle", 6, e->begun_proto))
        return core_failed(e);
    e->dump = sertrace_core_live_dump(e->core, -1, e->dump_id);
    if (!e->dump)
        return core_failed(e);
    e->hidden = 0;
    e->fed = 0;
    return 0;
}

/* Its TYPE (and NAME) once per dump, then its ENTER with its label (an
 * ATOM, its EXIT too, when `atom`: nothing nests in it, it has no NOTE --
 * a NOTE goes to an open node -- and its span is not reversed; the caller
 * tests that once for both), then its NOTE.
 * e->typed holds ntypes + 1 entries (reserve_order). */
static inline __attribute__((always_inline)) int feed_enter(emu *e, feed_batch *b, uint32_t i,
                                                            uint32_t depth, uint64_t parent_addr,
                                                            bool atom, uint64_t *addr)
{
    node *n = &e->nodes[i];
    if (depth > e->lim->max_depth) {
        char msg[32];
        if (flush_batch(e, b) < 0) /* the nodes before it, as one call each fed them */
            return -1;
        snprintf(msg, sizeof msg, "%u", e->lim->max_depth);
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base, "objects nested deeper than %s levels",
                        msg);
    }
    if (n->type && !e->typed[n->type]) {
        if (flush_batch(e, b) < 0 || feed_type(e, n->type) < 0)
            return -1;
        e->typed[n->type] = true;
    }
    if (n->label_kind == SERTRACE_LABEL_KEY && n->label <= e->ntypes && !e->typed[n->label]) {
        if (flush_batch(e, b) < 0 || feed_name(e, (uint32_t)n->label) < 0)
            return -1;
        e->typed[n->label] = true;
    }
    sertrace_core_node_in *in = batch_slot(e, b);
    if (!in)
        return -1;
    in->op = SERTRACE_REC_ENTER;
    in->tag = n->tag;
    in->depth = depth;
    in->type = n->type;
    in->length = n->length;
    in->pos = n->start;
    in->label_kind = SERTRACE_LABEL_NONE;
    /* a memo reference: its target's item count, as a recording gives
     * (the target's, final at STOP; the count at the GET when the target
     * was streamed away, which only a summary, never showing it, reads) */
    if (n->tag == SERTRACE_TAG_MEMO) {
        uint32_t j = emu_node_of_id(e, n->object);
        if (j != NO_NODE && e->nodes[j].tag != SERTRACE_TAG_MEMO)
            in->length = e->nodes[j].length;
    }
    /* the root has no label (a hostile stream may have attached it) */
    if (n->label_kind != SERTRACE_LABEL_NONE && depth > 1) {
        in->label_kind = n->label_kind;
        in->label = n->label_kind == SERTRACE_LABEL_HIDDEN ? ++e->hidden : n->label;
    }
    *addr = in->addr = node_address(e, i, parent_addr); /* emu_address_of */
    if (atom) {
        in->op = SERTRACE_REC_ATOM;
        in->bytes = n->end - n->start;
    }
    e->fed++;
    if (n->note == NOTE_GETATTR &&
        (flush_batch(e, b) < 0 || feed_note(e, depth, note_key, note_getattr) < 0))
        return -1;
    return 0;
}

/* The scratch of a feed of `span` nodes: the sort order and the nesting
 * stack (e->order, e->open: grown to nnodes + 1, kept across dumps) and
 * `naddrs` addresses (malloc'd: the caller frees them), counted against
 * --max-memory as `*extra` bytes (peak included).  -1 (run failed) when
 * over the limit or out of memory. */
static int reserve_order(emu *e, uint32_t span, size_t naddrs, uint32_t **order, uint32_t **open,
                         uint64_t **addrs, uint64_t *extra)
{
    *extra = (uint64_t)span * 16 + (e->ntypes + 1);
    *addrs = NULL;
    if (e->memory + *extra > e->lim->max_memory)
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                        "memory limit reached (nesting the nodes%s; raise it with --max-memory)",
                        "");
    if (e->cap_order < e->nnodes + 1) {
        uint32_t *o2 = realloc(e->order, ((size_t)e->nnodes + 1) * sizeof *o2);
        if (o2)
            e->order = o2;
        uint32_t *p2 = o2 ? realloc(e->open, ((size_t)e->nnodes + 1) * sizeof *p2) : NULL;
        if (p2) {
            e->open = p2;
            e->cap_order = e->nnodes + 1;
        }
    }
    if (e->cap_typed < e->ntypes + 1) { /* feed_enter's TYPE / NAME once per dump */
        bool *t = realloc(e->typed, ((size_t)e->ntypes + 1) * sizeof *t);
        if (!t)
            return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        memset(t + e->cap_typed, 0, (e->ntypes + 1 - e->cap_typed) * sizeof *t);
        e->typed = t;
        e->cap_typed = e->ntypes + 1;
    }
    if (e->cap_order < e->nnodes + 1 || !(*addrs = malloc(naddrs * sizeof **addrs)))
        return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
    *order = e->order;
    *open = e->open;
    if (e->memory + *extra > e->peak)
        e->peak = e->memory + *extra;
    return 0;
}

/* Feed the live nodes of [from, nnodes), nested by span, below the `base`
 * nodes already open in the core (0 here: a dump fed whole at STOP; a
 * streamed one goes through feed_stream); they are all closed again, the
 * base ones left open. */
static int feed_nodes(emu *e, uint32_t from, uint32_t base)
{
    uint32_t *order, *open, nopen = base;
    uint64_t *addrs, extra;
    feed_batch b;
    int rc = -1;

    b.n = 0;
    if (reserve_order(e, e->nnodes - from, (size_t)e->nnodes - from + 2, &order, &open, &addrs,
                      &extra) < 0)
        return -1;
    uint32_t live = 0;
    for (uint32_t i = from; i < e->nnodes; i++)
        if (!e->nodes[i].dead)
            order[live++] = i;
    sort_nodes(e, order, live, from, extra);

    /* addrs[k]: the address the k-th open node was fed with (the base: a
     * streamed root's) */
    addrs[0] = base ? node_address(e, 0, 0) : 0;
    if (base)
        open[0] = 0;
    for (uint32_t k = 0; k < live; k++) {
        node *n = &e->nodes[order[k]];
        while (nopen > base && e->nodes[open[nopen - 1]].end <= n->start) {
            if (feed_exit(e, &b, e->nodes[open[nopen - 1]].end, nopen) < 0)
                goto end;
            nopen--;
        }
        /* A span that overlaps its container (only a hostile stream makes
         * one, e.g. DUP then mutation after use) is cut to fit. */
        if (nopen && n->end > e->nodes[open[nopen - 1]].end)
            n->end = e->nodes[open[nopen - 1]].end;
        /* nothing nests in it (the next node starts at or after its end):
         * its ENTER and EXIT in one */
        bool atom = (k + 1 == live || e->nodes[order[k + 1]].start >= n->end) &&
                    n->note != NOTE_GETATTR && n->end >= n->start;
        uint64_t addr = 0;
        if (feed_enter(e, &b, order[k], nopen + 1, nopen ? addrs[nopen - base] : 0, atom, &addr) <
            0)
            goto end;
        if (atom)
            continue;
        open[nopen++] = order[k];
        addrs[nopen - base] = addr;
    }
    while (nopen > base) {
        if (feed_exit(e, &b, e->nodes[open[nopen - 1]].end, nopen) < 0)
            goto end;
        nopen--;
    }
    rc = flush_batch(e, &b);
end:
    free(addrs);
    return rc;
}

static int end_dump(emu *e, uint64_t total)
{
    /* no records events: batches -1, or 0 with no node (a complete dump
     * of none, as a recording says it) */
    if (sertrace_core_dump_end_flags(e->core, -1, -1, 0, e->dump_id, total, SERTRACE_STATUS_OK,
                                     e->fed ? -1 : 0, 0) < 0)
        return core_failed(e);
    e->res->nodes += e->fed;
    e->streamed = false;
    e->dump = NULL;
    return 0;
}

/* ---- streaming (README "Streaming") --------------------------------------- */

/* The tags whose node can be a level of the open chain: containers that
 * take their items after their first byte, and objects that take a state. */
static bool chain_tag(uint8_t tag)
{
    return tag == SERTRACE_TAG_LIST || tag == SERTRACE_TAG_DICT || tag == SERTRACE_TAG_SET ||
           tag == SERTRACE_TAG_INSTANCE || tag == SERTRACE_TAG_REDUCE;
}

/* The stack item at `i` as a level of the chain: its node, or NO_NODE. */
static uint32_t chain_node(const emu *e, uint32_t i)
{
    const item *it = &e->stack[i];
    if (it->fed || it->kind != IK_NODE || it->node == NO_NODE || it->global)
        return NO_NODE;
    const node *n = &e->nodes[it->node];
    return !n->dead && chain_tag(n->tag) ? it->node : NO_NODE;
}

/* ---- the walk ahead (tuple levels, README "Streaming") ------------------- */

/* The length of the opcode at input offset `at`, read without a side
 * effect (the emulator's reader says what is wrong when it gets there);
 * 0 when it is unknown or cut. */
static inline __attribute__((always_inline)) size_t op_size(const uint8_t *in, size_t n, size_t at)
{
    size_t left = n - at - 1, fixed = 0, prefix = 0, lines = 0;
    const uint8_t *p = in + at + 1;
    uint8_t arg = emu_op_arg[in[at]];
    switch (PICKLE_ARG_KIND(arg)) {
    case PICKLE_ARG_FIXED(0):
        fixed = PICKLE_ARG_N(arg);
        if (!fixed)
            return 1;
        break;
    case PICKLE_ARG_PREFIX(0):
        prefix = PICKLE_ARG_N(arg);
        break;
    case PICKLE_ARG_LINES(0):
        lines = PICKLE_ARG_N(arg);
        break;
    default:
        return 0;
    }
    if (fixed)
        return left < fixed ? 0 : 1 + fixed;
    if (prefix) {
        uint64_t len = 0;
        if (left < prefix)
            return 0;
        for (size_t i = prefix; i-- > 0;)
            len = len << 8 | p[i];
        return len > left - prefix ? 0 : 1 + prefix + (size_t)len;
    }
    const uint8_t *q = p, *end = in + n;
    for (size_t l = 0; l < lines; l++) {
        const uint8_t *nl = memchr(q, '\n', (size_t)(end - q));
        if (!nl)
            return 0;
        q = nl + 1;
    }
    return (size_t)(q - in) - at;
}

/* What the opcode `code` does to a stack of `h` items whose top mark is
 * at `top_mark` (UINT32_MAX: none): the height once it popped (*to), the
 * items it pushes then (*push), and whether it pops that mark (*pops_mark)
 * or pushes one (*marks).  False when it would underflow. */
static inline __attribute__((always_inline)) bool op_effect(uint8_t code, uint32_t h,
                                                            uint32_t top_mark, uint32_t *to,
                                                            uint32_t *push, bool *pops_mark,
                                                            bool *marks)
{
    uint32_t k = 0;
    *push = 0;
    *pops_mark = *marks = false;
    switch (code) {
    case OP_MARK:
        *marks = true;
        break;
    case OP_POP:
        if (top_mark == h) {
            *pops_mark = true;
            break;
        }
        k = 1;
        break;
    case OP_POP_MARK:
    case OP_APPENDS:
    case OP_SETITEMS:
    case OP_ADDITEMS:
    case OP_LIST:
    case OP_DICT:
    case OP_TUPLE:
    case OP_FROZENSET:
    case OP_OBJ:
    case OP_INST:
        if (top_mark == UINT32_MAX)
            return false;
        *to = top_mark;
        *pops_mark = true;
        *push =
            code == OP_POP_MARK || code == OP_APPENDS || code == OP_SETITEMS || code == OP_ADDITEMS
                ? 0
                : 1;
        return true;
    case OP_PUT:
    case OP_BINPUT:
    case OP_LONG_BINPUT:
    case OP_MEMOIZE:
    case OP_FRAME:
    case OP_PROTO:
    case OP_READONLY_BUFFER:
        break;
    case OP_BINPERSID:
        k = 1, *push = 1;
        break;
    case OP_STACK_GLOBAL:
    case OP_REDUCE:
    case OP_NEWOBJ:
        k = 2, *push = 1;
        break;
    case OP_NEWOBJ_EX:
        k = 3, *push = 1;
        break;
    case OP_BUILD:
    case OP_APPEND:
        k = 1;
        break;
    case OP_SETITEM:
        k = 2;
        break;
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3:
        k = code - OP_TUPLE1 + 1, *push = 1;
        break;
    case OP_STOP:
        k = h;
        break;
    default: /* the rest push one item (atoms, GETs, globals, empty containers ...) */
        *push = 1;
        break;
    }
    if (k > h || (top_mark != UINT32_MAX && h - k < top_mark))
        return false;
    *to = h - k;
    return true;
}

/* The walk's tight loop: fixed-length opcodes (QUICK_PREFIX1: a 1-byte
 * length prefix) that push or pop plain items (no mark).  One entry per
 * opcode, packed: its length (bits 0-7), the items it pops (8-15) and
 * pushes (16-23), so that the loop reads one word an opcode. */
#define QUICK_PREFIX1 255
#define QUICK(len, pop, push) ((uint32_t)(len) | (uint32_t)(pop) << 8 | (uint32_t)(push) << 16)
static const uint32_t quick_op[256] = {
    [OP_BININT1] = QUICK(2, 0, 1),
    [OP_BININT2] = QUICK(3, 0, 1),
    [OP_BININT] = QUICK(5, 0, 1),
    [OP_BINFLOAT] = QUICK(9, 0, 1),
    [OP_NONE] = QUICK(1, 0, 1),
    [OP_NEWTRUE] = QUICK(1, 0, 1),
    [OP_NEWFALSE] = QUICK(1, 0, 1),
    [OP_EMPTY_LIST] = QUICK(1, 0, 1),
    [OP_EMPTY_DICT] = QUICK(1, 0, 1),
    [OP_EMPTY_SET] = QUICK(1, 0, 1),
    [OP_EMPTY_TUPLE] = QUICK(1, 0, 1),
    [OP_MEMOIZE] = QUICK(1, 0, 0),
    [OP_BINPUT] = QUICK(2, 0, 0),
    [OP_LONG_BINPUT] = QUICK(5, 0, 0),
    [OP_BINGET] = QUICK(2, 0, 1),
    [OP_LONG_BINGET] = QUICK(5, 0, 1),
    [OP_TUPLE1] = QUICK(1, 1, 1),
    [OP_TUPLE2] = QUICK(1, 2, 1),
    [OP_TUPLE3] = QUICK(1, 3, 1),
    [OP_APPEND] = QUICK(1, 1, 0),
    [OP_SETITEM] = QUICK(1, 2, 0),
    [OP_STACK_GLOBAL] = QUICK(1, 2, 1),
    [OP_FRAME] = QUICK(9, 0, 0),
    [OP_SHORT_BINUNICODE] = QUICK(QUICK_PREFIX1, 0, 1),
    [OP_SHORT_BINBYTES] = QUICK(QUICK_PREFIX1, 0, 1),
    [OP_SHORT_BINSTRING] = QUICK(QUICK_PREFIX1, 0, 1),
    [OP_LONG1] = QUICK(QUICK_PREFIX1, 0, 1),
};
#undef QUICK

/* Walk the bytes from input offset `at` (the next opcode, or where the
 * walk of a level above stopped), the stack of height `h` and the first
 * `nm` of its marks now (as the stack is then), up to the opcode that
 * consumes the item at `slot`, through the tuples that wrap it (TUPLE1-3,
 * TUPLE: their item takes the lowest slot, and it is followed in turn).
 * Only lengths and stack heights are read: nothing is built.  False when
 * the bytes are malformed first, too many tuples wrap it, the marks are
 * too deep to follow or the pickle's walk budget is spent. */
static bool walk_ahead(emu *e, size_t at, uint32_t h, uint32_t nm, uint32_t slot, stream_ahead *r)
{
    uint32_t cap = nm + 64;
    uint64_t budget = 4 * (uint64_t)(e->n - e->base) + (1u << 20);
    bool ok = false;
    if (nm > 65536 || e->ahead_bytes >= budget)
        return false;
    uint32_t *ms = malloc((size_t)cap * sizeof *ms);
    if (!ms)
        return false;
    for (uint32_t i = 0; i < nm; i++)
        ms[i] = e->marks[i].stack_len;
    r->slot = slot;
    r->start = e->stack[slot].start;
    r->nwrap = 0;
    r->fcode = 0;
    r->first_at = SIZE_MAX;
    size_t from = at;
    while (at < e->n) {
        /* the opcodes most bytes are, in a tight loop (their length and
         * pops from tables); the first that is none, or that reaches
         * `slot`, goes the general way below */
        uint32_t floor = nm ? ms[nm - 1] : 0;
        /* an opcode may pop down to lo, no further: not below the top
         * mark, nor the item at `slot` (h > slot, h >= floor here) */
        uint32_t lo = floor > slot ? floor : slot + 1;
        size_t left = e->n - at;
        for (;;) {
            uint32_t q = quick_op[e->in[at]];
            size_t l = q & 0xff;
            uint32_t pop = (q >> 8) & 0xff;
            if (l == QUICK_PREFIX1)
                l = left > 1 ? 2 + (size_t)e->in[at + 1] : 0;
            if (!l || l > left || pop + lo > h)
                break;
            h += (q >> 16) - pop;
            at += l;
            left -= l;
            if (!left)
                break;
        }
        if (at >= e->n)
            break;
        uint8_t code = e->in[at];
        size_t len = op_size(e->in, e->n, at);
        uint32_t to, push;
        bool pops_mark, marks;
        /* a DUP: two items of one object, which an opcode before the
         * consumer (BUILD of the copy as state) may label first -- not
         * foreseen: the walk fails (nothing streams there; no pickler
         * writes DUP) */
        if (!len || code == OP_DUP ||
            !op_effect(code, h, nm ? ms[nm - 1] : UINT32_MAX, &to, &push, &pops_mark, &marks))
            break;
        if (to <= slot) { /* the item at `slot` is taken */
            if (r->first_at == SIZE_MAX)
                r->first_at = at;
            if (code == OP_TUPLE1 || code == OP_TUPLE2 || code == OP_TUPLE3 || code == OP_TUPLE ||
                code == OP_FROZENSET || code == OP_REDUCE || code == OP_NEWOBJ ||
                code == OP_NEWOBJ_EX) {
                if (r->nwrap == AHEAD_WRAPS)
                    break;
                r->wslot[r->nwrap] = to;
                r->wcode[r->nwrap++] = code;
                slot = to;
            } else {
                r->fcode = code;
                r->fslot = to;
                r->end_h = to + push;
                r->end_nm = nm - (pops_mark ? 1 : 0);
                ok = true;
                at += len;
                r->end_at = at;
                break;
            }
        }
        if (pops_mark)
            nm--;
        if (marks) {
            if (nm == cap) {
                if (cap >= 65536 + 64)
                    break;
                uint32_t *m2 = realloc(ms, (size_t)cap * 2 * sizeof *ms);
                if (!m2)
                    break;
                ms = m2;
                cap *= 2;
            }
            ms[nm++] = h;
        }
        h = to + push;
        at += len;
    }
    free(ms);
    e->ahead_bytes += at - from;
    return ok;
}

/* The walk ahead for the item at `slot` (cached: an item is walked once
 * while none of its wraps or its consumer has run).  `above`: the walk of
 * the level above it in the chain, or NULL: none of the opcodes up to
 * that level's consumer reaches `slot` (read_chain takes `slot` below
 * where they reached), so the walk resumes where that one stopped
 * instead of reading those bytes again. */
static const stream_ahead *ahead(emu *e, size_t at, uint32_t slot, const stream_ahead *above)
{
    uint32_t free_at = e->nahead;
    for (uint32_t i = 0; i < e->nahead; i++) {
        stream_ahead *c = &e->ahead_cache[i];
        if (at > c->first_at) { /* it ran: stale */
            free_at = i;
            continue;
        }
        if (c->slot == slot && c->start == e->stack[slot].start)
            return c->fcode ? c : NULL;
    }
    if (free_at == AHEAD_CACHE)
        free_at = (uint32_t)(e->ahead_bytes % AHEAD_CACHE); /* full of live ones: any */
    stream_ahead *c = &e->ahead_cache[free_at];
    if (free_at == e->nahead)
        e->nahead++;
    size_t from = at;
    uint32_t h = e->nstack, nm = e->nmarks;
    if (above && above->end_nm <= nm && above->end_h > slot) {
        from = above->end_at;
        h = above->end_h;
        nm = above->end_nm;
    }
    if (!walk_ahead(e, from, h, nm, slot, c)) {
        c->fcode = 0;
        if (c->first_at == SIZE_MAX)
            c->first_at = at; /* a failed walk: again at the next opcode, at most */
        return NULL;
    }
    return c;
}

/* A tuple or call level found by read_chain, its placeholder not made yet. */
#define NEW_PENDING (UINT32_MAX - 2)

/* A global with its node (or fed already: a call level's callable after
 * the first feed), as a call's callable. */
static bool called_global(const item *fn)
{
    return fn->kind == IK_GLOBAL && fn->type && (fn->node != NO_NODE || fn->fed);
}

/* The tag and type of the node a REDUCE whose callable is `fn` makes
 * (emulator.c's step): `R` of the callable's name; `Se` / `FS` for `set` /
 * `frozenset` (protocols < 4), of the callable's name; `O` of the class
 * for the copyreg reconstructors (`arg0`: the type of the arguments'
 * first item, a global, or 0 when the walk cannot tell it: not read).
 * False for the callables whose REDUCE makes no node or another (bytes,
 * `_codecs.encode`, getattr, bytearray: an atom, a global, the bytes in one
 * argument). */
static bool reduce_node(emu *e, const item *fn, uint32_t arg0, uint8_t *tag, uint32_t *type)
{
    static const char *const apart[] = {"_codecs.encode", "bytes", "getattr", "bytearray"};
    static const char *const reconstructors[] = {"copyreg._reconstructor",
                                                 "copy_reg._reconstructor", "copyreg.__newobj__",
                                                 "copy_reg.__newobj__"};
    if (!called_global(fn))
        return false;
    for (size_t i = 0; i < sizeof apart / sizeof *apart; i++)
        if (emu_name_is(e, fn->type, apart[i]))
            return false;
    *type = fn->type;
    *tag = SERTRACE_TAG_REDUCE;
    if (emu_name_is(e, fn->type, "set"))
        *tag = SERTRACE_TAG_SET;
    else if (emu_name_is(e, fn->type, "frozenset"))
        *tag = SERTRACE_TAG_FROZENSET;
    else
        for (size_t i = 0; i < sizeof reconstructors / sizeof *reconstructors; i++)
            if (emu_name_is(e, fn->type, reconstructors[i])) {
                if (!arg0)
                    return false;
                *tag = SERTRACE_TAG_INSTANCE;
                *type = arg0;
                break;
            }
    return true;
}

/* Read the stack as a chain of open containers, from the top down, by
 * the walk ahead (ahead(): which opcode consumes each level's item, and
 * which tuples wrap it first): the top item is the last level (a list,
 * dict or set whose items came, or an object being given items, with its
 * open It node as one more level); the opcode that consumes it (after
 * its tuples) says its parent, the item below its group: APPEND(S) a
 * list, SETITEM(S) a dict, ADDITEMS a set, BUILD an object (the group:
 * its state), STOP none (the root).  A tuple that wraps a level is a
 * level too (SERTRACE_TAG_TUPLE, cn[] NEW_TUPLE until its placeholder is
 * made, or the kept one): its group is its elements, from the slot its
 * item will take.  Levels at cn[0..*k] (bottom up), lv[0..*k) their
 * groups.  False when the stack is not such a chain (a level's consumer
 * is another opcode, a MARK is not a group's, a DUP of a level, deeper
 * than STREAM_CHAIN_MAX, bytes the walk cannot read).  *nchain: the
 * levels (*k + 1, or *k + 2 with an It node). */
static bool read_chain(emu *e, size_t at, bool group, uint32_t *cn, stream_level *lv, uint32_t *k,
                       uint32_t *nchain)
{
    uint32_t rc[STREAM_CHAIN_MAX + 2], n = 0, q, cont, cont_slot, it_node = NO_NODE;
    stream_level rl[STREAM_CHAIN_MAX + 2];
    if (!e->nstack)
        return false;
    if (group) {
        /* a big group (emu_stream_group): the items above the top MARK,
         * whose first item's walk must find that MARK's TUPLE / FROZENSET
         * first; that tuple is the last level, its group all on the stack */
        if (!e->nmarks || (q = e->marks[e->nmarks - 1].stack_len) >= e->nstack)
            return false;
        cont = NO_NODE;
        cont_slot = e->nstack;
    } else {
        q = cont_slot = e->nstack - 1;
        if ((cont = chain_node(e, q)) == NO_NODE)
            return false;
        uint8_t top = e->nodes[cont].tag;
        if (top != SERTRACE_TAG_LIST && top != SERTRACE_TAG_DICT && top != SERTRACE_TAG_SET) {
            const item *t = &e->stack[q];
            if (t->it_node >= e->nnodes || e->nodes[t->it_node].dead || t->it_node <= cont)
                return false;
            it_node = t->it_node;
        }
        rc[n++] = cont;
    }
    stream_ahead above; /* the walk of the level above (a copy: the cache may reuse its entry) */
    bool has_above = false;
    for (;;) {
        const stream_ahead *a = ahead(e, at, q, has_above ? &above : NULL);
        uint32_t q0 = q; /* the level the tuples and calls wrap */
        uint32_t to, t, c;
        uint8_t want, f;
        bool mark = false;
        if (!a || (group && n == 0 &&
                   (!a->nwrap || (a->wcode[0] != OP_TUPLE && a->wcode[0] != OP_FROZENSET) ||
                    a->wslot[0] != q)))
            return false;
        /* the tuples and calls around it, innermost first */
        for (uint8_t w = 0; w < a->nwrap; w++) {
            uint8_t wc = a->wcode[w], tag = SERTRACE_TAG_TUPLE;
            uint32_t type = 0;
            if (n > STREAM_CHAIN_MAX)
                return false;
            if (wc == OP_FROZENSET) {
                tag = SERTRACE_TAG_FROZENSET; /* its elements, as a tuple's (protocols 4-5) */
            } else if (wc == OP_REDUCE || wc == OP_NEWOBJ || wc == OP_NEWOBJ_EX) {
                /* a call: its callable (a global) at the slot its result
                 * takes, its arguments after it */
                const item *fn = &e->stack[a->wslot[w]];
                if (wc != OP_REDUCE) {
                    if (!called_global(fn))
                        return false;
                    tag = SERTRACE_TAG_INSTANCE;
                    type = fn->type;
                } else {
                    /* a reconstructor's class: the first item of its
                     * arguments, the tuple level right inside, when it is
                     * a global, not the level that tuple wraps */
                    uint32_t arg0 = 0;
                    if (w > 0 && a->wcode[w - 1] != OP_REDUCE && a->wcode[w - 1] != OP_NEWOBJ &&
                        a->wcode[w - 1] != OP_NEWOBJ_EX && a->wcode[w - 1] != OP_FROZENSET &&
                        a->wslot[w - 1] == a->wslot[w] + 1 &&
                        a->wslot[w - 1] != (w > 1 ? a->wslot[w - 2] : q0)) {
                        const item *c0 = &e->stack[a->wslot[w - 1]];
                        if (c0->kind == IK_GLOBAL && c0->type)
                            arg0 = c0->type;
                    }
                    if (!reduce_node(e, fn, arg0, &tag, &type))
                        return false;
                }
            }
            rc[n] = NEW_PENDING;
            rl[n] = (stream_level){.index = a->wslot[w],
                                   .tag = tag,
                                   .mark = wc == OP_TUPLE || wc == OP_FROZENSET,
                                   .code = wc,
                                   .type = type};
            n++;
            q = a->wslot[w];
        }
        f = a->fcode;
        to = a->fslot;
        switch (f) {
        case OP_STOP:
            if (q != 0)
                return false;
            goto read;
        case OP_APPEND:
        case OP_BUILD:
            if (to != q || q == 0)
                return false;
            t = q - 1;
            want = f == OP_APPEND ? SERTRACE_TAG_LIST : 0;
            break;
        case OP_SETITEM:
            if (to + 1 != q || q < 2)
                return false;
            t = q - 2;
            want = SERTRACE_TAG_DICT;
            break;
        case OP_APPENDS:
        case OP_SETITEMS:
        case OP_ADDITEMS:
            if (to == 0 || to > q || (f == OP_SETITEMS && (q - to + 1) % 2))
                return false;
            t = to - 1;
            mark = true;
            want = f == OP_APPENDS    ? SERTRACE_TAG_LIST
                   : f == OP_SETITEMS ? SERTRACE_TAG_DICT
                                      : SERTRACE_TAG_SET;
            break;
        default:
            return false;
        }
        if ((c = chain_node(e, t)) == NO_NODE || n > STREAM_CHAIN_MAX)
            return false;
        uint8_t tag = e->nodes[c].tag;
        if (want ? tag != want : tag != SERTRACE_TAG_INSTANCE && tag != SERTRACE_TAG_REDUCE)
            return false;
        /* the next container came after it; the group's items too (a
         * node made before it is a DUP of a level, or of one of its parts) */
        if (cont != NO_NODE && (cont <= c || e->nodes[cont].start <= e->nodes[c].start))
            return false;
        for (uint32_t i = t + 1; i < cont_slot; i++)
            if (e->stack[i].node != NO_NODE && e->stack[i].node <= c)
                return false;
        rc[n] = c;
        rl[n] = (stream_level){
            .index = t, .tag = tag, .mark = mark, .added = e->nodes[c].added + 1, .code = 0};
        n++;
        cont = c;
        cont_slot = q = t;
        above = *a;
        has_above = true;
    }
read:
    /* bottom up; every MARK on the stack is a group's, in order (a big
     * group's last level has its group too) */
    *k = group ? n : n - 1;
    uint32_t mi = 0;
    for (uint32_t d = 0; d < n; d++) {
        cn[d] = rc[n - 1 - d];
        if (d + 1 == n && !group)
            break;
        lv[d] = rl[n - 1 - d];
        lv[d].marks = mi;
        if (lv[d].mark) {
            uint32_t slot = lv[d].code ? lv[d].index : lv[d].index + 1;
            if (mi == e->nmarks || e->marks[mi].stack_len != slot)
                return false;
            mi++;
        }
        /* a tuple or call level kept open from an earlier feed, still pending */
        if (cn[d] == NEW_PENDING && d < e->nkept && d < e->nspec && e->spec[d].code == lv[d].code &&
            e->spec[d].index == lv[d].index)
            cn[d] = d;
    }
    if (mi != e->nmarks)
        return false;
    *nchain = n;
    if (it_node != NO_NODE) {
        if (n > STREAM_CHAIN_MAX)
            return false;
        cn[(*nchain)++] = it_node;
    }
    return true;
}

/* The labels the groups' consumers will give (label_items in emulator.c,
 * BUILD's state role, a tuple's positions), given now: the first label is
 * a node's edge, so the consumer's own labelling is then a no-op.  A
 * group's last item is the next level; when that level is a tuple, the
 * label is its placeholder's (cn[]). */
static int predict_labels(emu *e, const uint32_t *cn, const stream_level *lv, uint32_t k)
{
    for (uint32_t d = 0; d < k; d++) {
        bool pending = lv[d].code != 0; /* a tuple or a call: no container item */
        bool next_tuple = d + 1 < k && lv[d + 1].code != 0;
        uint32_t from = pending ? lv[d].index : lv[d].index + 1;
        uint32_t to = d + 1 < k ? lv[d + 1].index + 1 : e->nstack;
        item last;
        if (next_tuple) {
            last = e->stack[to - 1];
            last.node = cn[d + 1];
        }
#define GROUP_ITEM(i) (next_tuple && (i) + 1 == to ? &last : &e->stack[i])
        if (lv[d].tag == SERTRACE_TAG_DICT) {
            for (uint32_t i = from; i + 1 < to; i += 2)
                if (emu_label_value(e, &e->stack[i], GROUP_ITEM(i + 1)) < 0)
                    return -1;
        } else if (lv[d].tag == SERTRACE_TAG_LIST) {
            uint64_t pos = lv[d].added - 1;
            for (uint32_t i = from; i < to; i++)
                emu_label(e, GROUP_ITEM(i), SERTRACE_LABEL_POS, pos++);
        } else if (lv[d].tag == SERTRACE_TAG_TUPLE) {
            /* (a big group's items taken off the stack came after its first two) */
            uint64_t dropped = lv[d].mark ? e->marks[lv[d].marks].dropped : 0;
            for (uint32_t i = from; i < to; i++)
                emu_label(e, GROUP_ITEM(i), SERTRACE_LABEL_POS,
                          i - from < 2 ? i - from : i - from + dropped);
        } else if (lv[d].code == OP_FROZENSET) {
            for (uint32_t i = from; i < to; i++)
                emu_label(e, GROUP_ITEM(i), SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT);
        } else if (pending) { /* a call: its callable, then its arguments */
            for (uint32_t i = from; i < to; i++)
                emu_label(e, GROUP_ITEM(i), SERTRACE_LABEL_ROLE,
                          i == from ? SERTRACE_ROLE_CALLABLE : SERTRACE_ROLE_ARGS);
        } else if (lv[d].tag == SERTRACE_TAG_SET) {
            for (uint32_t i = from; i < to; i++)
                emu_label(e, GROUP_ITEM(i), SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT);
        } else {
            emu_label(e, GROUP_ITEM(from), SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
        }
#undef GROUP_ITEM
    }
    return 0;
}

/* An open node of the chain closes: its final item count, then its EXIT;
 * a kept node must still have the address it was entered with. */
static int close_open(emu *e, feed_batch *b, uint32_t idx, uint32_t depth)
{
    if (idx < e->nkept) {
        if (node_address(e, idx, idx ? e->kept_addr[idx - 1] : 0) != e->kept_addr[idx])
            e->stream_wrong = true;
        if (flush_batch(e, b) < 0)
            return -1;
        if (sertrace_core_node_length(e->core, -1, e->dump_id, depth, e->nodes[idx].length) < 0)
            return core_failed(e);
    }
    return feed_exit(e, b, e->nodes[idx].end, depth);
}

/* Feed the live nodes not open yet ([nkept, nnodes)), nested by span,
 * below the kept ones open in the core ([0, nkept), depths 1..nkept).
 * The new chain cn[0..k] stays open: its first `common` levels are the
 * kept ones, the others are entered here (at their depth, else the
 * prediction was wrong); every other open node is closed once a node
 * starts after it, or at the end (final: every node, the chain too:
 * k + 1 == 0). */
static int feed_stream(emu *e, const uint32_t *cn, uint32_t nchain, uint32_t common,
                       uint64_t *addrs_out)
{
    uint32_t *order, *open, nopen = e->nkept, chain_open = common, next = common;
    uint64_t *addrs, extra;
    feed_batch b;
    int rc = -1;

    b.n = 0;
    if (reserve_order(e, e->nnodes - e->nkept, (size_t)e->nnodes + 2, &order, &open, &addrs,
                      &extra) < 0)
        return -1;
    uint32_t live = 0;
    for (uint32_t i = e->nkept; i < e->nnodes; i++)
        if (!e->nodes[i].dead) {
            if (e->nodes[i].start < e->stream_pos)
                e->stream_wrong = true; /* it wraps a node fed already */
            order[live++] = i;
        }
    for (uint32_t j = 0; j < e->nkept; j++) {
        open[j] = j;
        addrs[j] = e->kept_addr[j];
    }
    sort_nodes(e, order, live, e->nkept, extra);

    for (uint32_t k = 0; k < live; k++) {
        node *n = &e->nodes[order[k]];
        bool is_chain = next < nchain && order[k] == cn[next];
        while (nopen > chain_open && e->nodes[open[nopen - 1]].end <= n->start) {
            if (close_open(e, &b, open[nopen - 1], nopen) < 0)
                goto end;
            nopen--;
        }
        if (nopen > chain_open && n->end > e->nodes[open[nopen - 1]].end)
            n->end = e->nodes[open[nopen - 1]].end; /* cut to fit (a hostile stream) */
        if (is_chain) {
            if (nopen != next) /* not where the chain said: read it again */
                e->stream_wrong = true;
            if (feed_enter(e, &b, order[k], nopen + 1, nopen ? addrs[nopen - 1] : 0, false,
                           &addrs[nopen]) < 0)
                goto end;
            open[nopen++] = order[k];
            chain_open = nopen;
            next++;
            continue;
        }
        bool atom = (k + 1 == live || e->nodes[order[k + 1]].start >= n->end) &&
                    n->note != NOTE_GETATTR && n->end >= n->start;
        uint64_t addr = 0;
        if (feed_enter(e, &b, order[k], nopen + 1, nopen ? addrs[nopen - 1] : 0, atom, &addr) < 0)
            goto end;
        if (atom)
            continue;
        open[nopen] = order[k];
        addrs[nopen++] = addr;
    }
    if (next != nchain)
        e->stream_wrong = true;
    while (nopen > chain_open) {
        if (close_open(e, &b, open[nopen - 1], nopen) < 0)
            goto end;
        nopen--;
    }
    for (uint32_t j = 0; j < nchain && j < nopen; j++)
        addrs_out[j] = addrs[j];
    rc = flush_batch(e, &b);
end:
    free(addrs);
    return rc;
}

/* After a feed: only the chain's nodes stay, at indices [0, nchain) in
 * chain order; the items and marks are told (a fed item's node is gone:
 * NO_NODE, `fed`; arena bounds count the kept nodes below them). */
static void keep_chain(emu *e, const uint32_t *cn, uint32_t nchain, const uint64_t *addrs)
{
    node kept[STREAM_CHAIN_MAX + 2];
    uint32_t old_n = e->nnodes;
    for (uint32_t j = 0; j < nchain; j++)
        kept[j] = e->nodes[cn[j]];
        /* (a tuple level's placeholder, made at the feed, is past the nodes
         * of its elements: the kept nodes below x are counted, not ranked) */
#define BOUND(x)                                                                                   \
    do {                                                                                           \
        uint32_t b_ = 0;                                                                           \
        for (uint32_t c_ = 0; c_ < nchain; c_++)                                                   \
            b_ += cn[c_] < (x);                                                                    \
        (x) = b_;                                                                                  \
    } while (0)
    for (uint32_t i = 0; i < e->nstack; i++) {
        item *it = &e->stack[i];
        if (it->node != NO_NODE) {
            uint32_t j = 0;
            while (j < nchain && cn[j] != it->node)
                j++;
            if (j < nchain) {
                it->node = j;
            } else {
                it->node = NO_NODE;
                it->fed = true;
            }
        }
        if (it->it_node < old_n) { /* a kept It level, or one fed */
            uint32_t j = 0;
            while (j < nchain && cn[j] != it->it_node)
                j++;
            it->it_node = j < nchain ? j : IT_FED;
        }
        if (it->first_node > old_n)
            it->first_node = old_n;
        BOUND(it->first_node);
        if (it->atom_nodes_end > old_n)
            it->atom_nodes_end = old_n;
        BOUND(it->atom_nodes_end);
    }
    for (uint32_t i = 0; i < e->nmarks; i++) {
        if (e->marks[i].first_node > old_n)
            e->marks[i].first_node = old_n;
        BOUND(e->marks[i].first_node);
    }
#undef BOUND
    for (uint32_t j = 0; j < nchain; j++) {
        e->nodes[j] = kept[j];
        e->kept_addr[j] = addrs[j];
    }
    e->nnodes = e->nkept = nchain;
    e->id_fed = e->next_id;
    e->id_shift = e->next_id + 1 - nchain;
    e->stream_pos = e->pos;
}

/* At STOP: the pickle's nodes (those not streamed yet), nested by span,
 * to the core; a streamed dump closes its open chain (item counts, EXITs).
 * Returns 1 when a streamed dump's prediction turned out wrong: the
 * caller drops it and reads the pickle again. */
int emu_emit_dump(emu *e, uint64_t total)
{
    if (!e->core)
        return 0; /* audit only */
    if (!e->streamed) {
        if (begin_dump(e) < 0 || feed_nodes(e, 0, 0) < 0)
            return -1;
        return end_dump(e, total);
    }
    /* streamed: the root fed first is still the root (emulator.c checks);
     * a pickle without PROTO is protocol 1 once an opcode of protocol 1
     * came: a dump begun as 0 and given one later is read again */
    if (e->stream_wrong || e->nspec || dump_protocol(e) != e->begun_proto)
        return 1;
    if (feed_stream(e, NULL, 0, 0, NULL) < 0)
        return -1;
    if (e->stream_wrong)
        return 1;
    return end_dump(e, total);
}

/* After an opcode that gave items to the top item of the stack (`next`:
 * the input offset of the opcode after it): when the stack reads as a
 * chain of open containers from the root (read_chain), enough nodes are
 * held and, below the root, the top container gets another batch next, the nodes are fed to the
 * core now -- the chain's entered and left open, every other one (finished, or a group item whose
 * label its consumer will give) fed whole -- and all but the chain dropped (README "Streaming").
 * The chain is a prediction: each group's consumer is watched (emu_stream_watch), a node that
 * starts before the feed (a wrapper) or an item fed that grows is caught, and the dump is then
 * dropped and the pickle read again without streaming. */
static int stream_chain(emu *e, size_t at, bool group);

int emu_stream_batch(emu *e, size_t next)
{
    size_t at = next;
    /* a pickle without PROTO (0 or 1) says which only by its opcodes, up
     * to STOP, and dump_begin carries it: 1 once an opcode of protocol 1
     * came, else predicted 0 (checked at STOP) */
    if (e->stream_wrong || e->nnodes - e->nkept < e->stream_nodes)
        return 0;
    /* Below the root (the root alone: one item), only while the top
     * container is still being filled (a MARK next: another batch), so
     * that a small container's last batch, after which a tuple may wrap
     * it, is never a prediction (but at a threshold of 1 node, the tests'
     * setting: every batch is, so that wrong predictions are read again
     * often).  Checked first: it costs nothing, the chain's reading does. */
    if (e->nstack > 1 && e->stream_nodes > 1) {
        if (next < e->n && e->in[next] == OP_FRAME)
            next += FRAME_HEADER;
        if (next >= e->n || e->in[next] != OP_MARK)
            return 0;
    }
    /* Reading the stack costs its length: not over STREAM_STACK_MAX items,
     * and after a stack that does not read, not before stream_nodes more
     * nodes are held (so the readings cost O(nodes), not O(batches x
     * stack)). */
    if (e->nnodes < e->stream_retry || e->nstack > STREAM_STACK_MAX)
        return 0;
    int rc = stream_chain(e, at, false);
    if (rc == 1)
        e->stream_retry =
            e->stream_nodes > UINT32_MAX - e->nnodes ? UINT32_MAX : e->nnodes + e->stream_nodes;
    return rc < 0 ? -1 : 0;
}

/* After a big group's feed (stream_chain): its items fed already, but for
 * its first two (what a REDUCE reads of a tuple) and its last two (the
 * top, and one below it that an opcode taking the top's neighbour reads),
 * are taken off the stack, counted in its MARK (`dropped`).  Every opcode
 * that reaches below the last two brings the stack down to the watched
 * height (spec_watch: the top's slot, at most one below what it pops is
 * read), where the watch wants the group's TUPLE / FROZENSET; anything
 * else is a wrong prediction, and with the stack compacted the pickle is
 * read again at once (emulator.c run_pickle), so that no opcode runs on
 * a stack that is not the bytes'. */
static void compact_group(emu *e)
{
    if (!e->nspec)
        return;
    const stream_level *l = &e->spec[e->nspec - 1];
    if (!l->mark || !l->code || l->index + 2 >= e->nstack)
        return;
    mark *m = &e->marks[l->marks];
    uint32_t from = l->index + 2, keep = e->nstack - 2;
    if (keep <= from || m->dropped > UINT32_MAX - (keep - from))
        return;
    for (uint32_t i = from; i < keep; i++)
        if (e->stack[i].node != NO_NODE || e->stack[i].it_node < IT_FED)
            return; /* (fed, or an atom: nothing of it is left to feed) */
    memmove(&e->stack[from], &e->stack[keep], 2 * sizeof *e->stack);
    m->dropped += keep - from;
    e->nstack = from + 2;
    e->spec_watch = e->nstack - 1;
    e->compacted = true;
    /* the walks of the items above the group's first: slots moved */
    for (uint32_t i = 0; i < e->nahead; i++)
        if (e->ahead_cache[i].slot > l->index)
            e->ahead_cache[i].first_at = 0; /* stale */
}

/* Whether the top item looks finished: the next opcodes (at most 64, in
 * 4 KiB) neither take it nor give it anything (a memo PUT, items, a
 * state).  A heuristic for when to feed a big group: a fed item given more
 * or taken otherwise than predicted is caught anyway (the pickle is read
 * again), this only keeps that rare. */
static bool top_settled(const emu *e, size_t at)
{
    uint32_t h = e->nstack, top = h - 1, ms[64], nm = 0;
    uint32_t base = e->nmarks ? e->marks[e->nmarks - 1].stack_len : UINT32_MAX;
    size_t end = e->n - at > 4096 ? at + 4096 : e->n;
    for (int i = 0; i < 64 && at < end; i++) {
        uint8_t code = e->in[at];
        size_t len = op_size(e->in, e->n, at);
        uint32_t to, push;
        bool pops_mark, marks;
        if (!len || code == OP_STOP ||
            !op_effect(code, h, nm ? ms[nm - 1] : base, &to, &push, &pops_mark, &marks))
            return false;
        if (to <= top)
            return false; /* it takes the top */
        if (to == top + 1 &&
            (code == OP_APPEND || code == OP_SETITEM || code == OP_BUILD || code == OP_APPENDS ||
             code == OP_SETITEMS || code == OP_ADDITEMS || code == OP_REDUCE || code == OP_POP))
            return false; /* it gives the top items or a state (or calls a setter on it) */
        if (h == top + 1 && (code == OP_PUT || code == OP_BINPUT || code == OP_LONG_BINPUT ||
                             code == OP_MEMOIZE || code == OP_READONLY_BUFFER || code == OP_DUP))
            return false;
        if (pops_mark) {
            if (!nm)
                return false;
            nm--;
        }
        if (marks) {
            if (nm == 64)
                return true;
            ms[nm++] = h;
        }
        h = to + push;
        at += len;
    }
    return true;
}

/* A big group: the stack holds at least group_at items (emulator.c
 * run_pickle and run_atoms stop there).  When the items above the top
 * MARK are group_min or more, the top one looks finished (top_settled)
 * and the stack reads as a chain whose last level is that MARK's TUPLE or
 * FROZENSET (read_chain `group`: the walk ahead of the group's first
 * item), the group is fed -- a placeholder for the tuple, its items with
 * their positions -- and taken off the stack (compact_group).  Else tried
 * again after each of the next 32 opcodes (the highest stack is often
 * inside an item: a MARK of its own, a tuple being made), then once the
 * stack grew by group_min. */
int emu_stream_group(emu *e, size_t next)
{
    if (!e->stream_wrong && e->nmarks && e->nstack <= STREAM_STACK_MAX &&
        e->nstack - e->marks[e->nmarks - 1].stack_len >= e->group_min && top_settled(e, next)) {
        int rc = stream_chain(e, next, true);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            e->group_tries = 0;
            e->group_at = e->nstack + e->group_min;
            return 0;
        }
    }
    if (!e->stream_wrong && ++e->group_tries < 32) {
        e->group_at = 0; /* after the next opcode */
        return 0;
    }
    e->group_tries = 0;
    e->group_at = e->nstack > UINT32_MAX - e->group_min ? UINT32_MAX : e->nstack + e->group_min;
    return 0;
}

/* Read the stack as a chain (read_chain; `group`: from the top MARK's
 * group) and feed it: 0 fed, 1 not read, -1 failed. */
static int stream_chain(emu *e, size_t at, bool group)
{
    uint32_t cn[STREAM_CHAIN_MAX + 2], k, nchain, common = 0;
    stream_level lv[STREAM_CHAIN_MAX];
    uint64_t addrs[STREAM_CHAIN_MAX + 2] = {0};
    if (!read_chain(e, at, group, cn, lv, &k, &nchain))
        goto later;
    /* the open levels stay (at their index), the others are new nodes */
    while (common < e->nkept && common < nchain && cn[common] == common)
        common++;
    if (e->streamed && common == 0)
        goto later; /* not the root streamed: wrong, found at STOP */
    for (uint32_t j = common; j < nchain; j++)
        if (cn[j] < e->nkept)
            goto later;
    /* the levels still pending keep their predictions: the stack must read
     * them alike (a group read otherwise would label its items otherwise) */
    if (e->nspec > k)
        goto later;
    for (uint32_t j = 0; j < e->nspec; j++)
        if (cn[j] != j || lv[j].index != e->spec[j].index || lv[j].mark != e->spec[j].mark ||
            lv[j].tag != e->spec[j].tag)
            goto later;
    /* the tuple levels new here: a placeholder each (README "Streaming"),
     * from the tuple's first byte (its MARK, or its first element), made
     * now and completed by its TUPLE (emu_stream_tuple); entered with its
     * number, as a memoized object is (a GET may read the tuple back) */
    /* (innermost first: of two placeholders with the same span, the one
     * made later sorts first, outer, as a node made after its parts) */
    for (uint32_t j = nchain; j-- > 0;)
        if (cn[j] == NEW_PENDING) {
            const stream_level *l = &lv[j];
            uint64_t start = l->mark ? e->marks[l->marks].start : e->stack[l->index].start;
            uint32_t type = l->tag == SERTRACE_TAG_TUPLE ? emu_intern_type(e, "tuple")
                            : l->code == OP_FROZENSET    ? emu_intern_type(e, "frozenset")
                                                         : l->type;
            if (!type || (cn[j] = new_node(e, l->tag, type, start, 0)) == NO_NODE)
                return -1;
            e->nodes[cn[j]].memoized = true;
        }
    if (predict_labels(e, cn, lv, k) < 0)
        return -1;
    if (!e->streamed) {
        if (begin_dump(e) < 0)
            return -1;
        e->streamed = true;
    }
    if (feed_stream(e, cn, nchain, common, addrs) < 0)
        return -1;
    keep_chain(e, cn, nchain, addrs);
    memcpy(e->spec, lv, k * sizeof *lv);
    e->nspec = k;
    e->spec_watch = e->nstack - 1; /* cn[k], the top: pending in the deepest group */
    e->stream_retry = 0;
    if (group)
        compact_group(e);
    return 0;
later:
    return 1;
}

/* An opcode brought a streamed dump's stack down to its watched level:
 * it must be the predicted consumer of the deepest pending group (the
 * right opcode into the right container, its MARK, a list's positions),
 * else the dump is read again at STOP. */
void emu_stream_watch(emu *e, uint8_t code)
{
    if (e->stream_wrong)
        return;
    if (!e->nspec) {
        e->stream_wrong = e->nstack == 0;
        return;
    }
    const stream_level *l = &e->spec[e->nspec - 1];
    uint32_t j = e->nspec - 1;
    /* a TUPLE1 keeps the height: called for every tuple opcode, only the
     * pending tuple level's is looked at */
    if (e->nstack > e->spec_watch &&
        !((l->tag == SERTRACE_TAG_TUPLE || l->code == OP_FROZENSET) && e->nstack == l->index + 1))
        return;
    bool ok = e->nstack == l->index + 1 && e->nmarks == l->marks && e->stack[l->index].node == j;
    switch (l->code ? 0 : l->tag) {
    case 0: /* a tuple or a call level: its opcode */
        ok = ok && code == l->code;
        break;
    case SERTRACE_TAG_DICT:
        ok = ok && code == (l->mark ? OP_SETITEMS : OP_SETITEM);
        break;
    case SERTRACE_TAG_LIST:
        ok = ok && code == (l->mark ? OP_APPENDS : OP_APPEND) &&
             (l->mark || e->nodes[j].added == l->added);
        break;
    case SERTRACE_TAG_SET:
        ok = ok && code == OP_ADDITEMS;
        break;
    default:
        ok = ok && code == OP_BUILD;
        break;
    }
    if (!ok) {
        e->stream_wrong = true;
        return;
    }
    e->nspec--;
    e->spec_watch = l->index;
}

/* A TUPLE / TUPLE1-3 / REDUCE / NEWOBJ / NEWOBJ_EX (`code`) whose item
 * takes stack slot `slot`: the node of the pending tuple or call level it
 * completes (the placeholder entered for it), or NO_NODE (none: it gets a
 * node of its own). */
uint32_t emu_stream_pending(emu *e, uint8_t code, uint32_t slot)
{
    if (!e->streamed || !e->nspec)
        return NO_NODE;
    const stream_level *l = &e->spec[e->nspec - 1];
    uint32_t j = e->nspec - 1;
    if (l->code != code || l->index != slot || e->nodes[j].tag != l->tag)
        return NO_NODE;
    return j;
}

/* A dump begun by streaming is dropped (the pickle is read again, or it
 * turned out malformed: its dump is not fed, as any malformed pickle's). */
int emu_abort_dump(emu *e)
{
    if (!e->streamed)
        return 0;
    e->streamed = false;
    e->dump = NULL;
    return sertrace_core_dump_abort(e->core, -1, e->dump_id);
}
