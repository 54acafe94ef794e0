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

/* Sort order[0..n) (the live nodes, by index) into cmp_nodes' order.  The
 * nodes are created nearly in that order: only a node made after its parts
 * (a tuple at TUPLE, an object at REDUCE or NEWOBJ) moves back, over the
 * nodes inside it.  So insertion sort first, with a budget of moves linear
 * in n (2n + 1024: 8n made dataclass-graph's feed 26.4M -> 33.2M
 * instructions a call, its moves past even that).  Past it (objects nested in objects: the moves
 * grow with n times the depth), a stable LSD radix sort, linear: from index order reversed
 * (later-created first), by end descending, then by start ascending, 16
 * bits a pass, passes where all keys agree skipped.  Positions past 4 GiB,
 * or no memory for it (its n + 64 Ki words over the limit): qsort.  The order is total, so all
 * three give the same result. */
static void sort_nodes(emu *e, uint32_t *order, uint32_t n, uint32_t from, uint64_t extra)
{
    node *base = e->nodes;
    uint32_t nnodes = e->nnodes;
    uint64_t budget = 2 * (uint64_t)n + 1024;
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
            if (--budget == 0) {
                order[j] = x;
                goto radix;
            }
        }
        order[j] = x;
        last_start = base[order[k]].start;
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
 * ATOM, its EXIT too, when `atom`: nothing nests in it), then its NOTE.
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
    /* a NOTE goes to the open node: not to an atom */
    if (atom && n->note != NOTE_GETATTR && n->end >= n->start) {
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
        bool atom = k + 1 == live || e->nodes[order[k + 1]].start >= n->end;
        uint64_t addr = 0;
        if (feed_enter(e, &b, order[k], nopen + 1, nopen ? addrs[nopen - base] : 0, atom, &addr) <
            0)
            goto end;
        if (atom && e->nodes[order[k]].note != NOTE_GETATTR && n->end >= n->start)
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

/* Read the stack as a chain of open containers, bottom up: stack[0] the
 * root; above each level's container, its group (after a MARK at once
 * above it, or none), whose last item is the next level's container; the
 * top item the last level (with its It node after it when an object).  A group is: a dict's
 * key/value pairs (one pair without a MARK), a list's items (one without a MARK), a set's items
 * (after a MARK), an object's state (one item, no MARK).  Levels at
 * cn[0..*k] (their nodes), lv[0..*k) (the groups below the top).  False
 * when the stack is not such a chain (a container not below its group, a
 * MARK not right above a container, a tuple or a call being built).
 * *nchain: the levels (*k + 1, or *k + 2 with an It node). */
static bool read_chain(emu *e, uint32_t *cn, stream_level *lv, uint32_t *k, uint32_t *nchain)
{
    uint32_t s = 0, mi = 0, depth = 0;
    if (!e->nstack || (cn[0] = chain_node(e, 0)) == NO_NODE)
        return false;
    if (e->nmarks && e->marks[0].stack_len == 0)
        return false;
    while (s + 1 < e->nstack) {
        uint32_t end, next;
        uint8_t tag = e->nodes[cn[depth]].tag;
        bool mark = mi < e->nmarks && e->marks[mi].stack_len == s + 1;
        if (depth == STREAM_CHAIN_MAX)
            return false;
        if (mark)
            mi++;
        end = mi < e->nmarks ? e->marks[mi].stack_len : e->nstack; /* the group: [s + 1, end) */
        if (end <= s + 1)
            return false;
        /* an object then a container: the object's state, BUILD next (as
         * the pickler writes it), not two items of this group */
        if (end - (s + 1) >= 2 && tag != SERTRACE_TAG_INSTANCE && tag != SERTRACE_TAG_REDUCE &&
            chain_node(e, end - 2) != NO_NODE &&
            (e->nodes[e->stack[end - 2].node].tag == SERTRACE_TAG_INSTANCE ||
             e->nodes[e->stack[end - 2].node].tag == SERTRACE_TAG_REDUCE) &&
            chain_node(e, end - 1) != NO_NODE)
            end--;
        uint32_t len = end - (s + 1);
        if (tag == SERTRACE_TAG_DICT   ? (len % 2 || (!mark && len != 2))
            : tag == SERTRACE_TAG_LIST ? !mark && len != 1
            : tag == SERTRACE_TAG_SET  ? !mark
                                       : mark || len != 1) /* an object: its state */
            return false;
        next = chain_node(e, end - 1);
        if (next == NO_NODE || next <= cn[depth] ||
            e->nodes[next].start <= e->nodes[cn[depth]].start)
            return false;
        /* a group's items came after its container: a node made before
         * it is a DUP of a level (or of one of its parts): not read */
        for (uint32_t i = s + 1; i + 1 < end; i++)
            if (e->stack[i].node != NO_NODE && e->stack[i].node <= cn[depth])
                return false;
        lv[depth].index = s;
        lv[depth].marks = mi - (mark ? 1 : 0);
        lv[depth].tag = tag;
        lv[depth].mark = mark;
        lv[depth].added = e->nodes[cn[depth]].added + 1;
        cn[++depth] = next;
        s = end - 1;
    }
    if (mi != e->nmarks)
        return false;
    /* the top: a container whose items came, or an object whose items
     * came (an OrderedDict, a defaultdict, a list subclass being filled):
     * its open It node, which grows over batches, is one more level, with
     * no group (README "Streaming") */
    uint8_t top = e->nodes[cn[depth]].tag;
    *k = depth;
    *nchain = depth + 1;
    if (top == SERTRACE_TAG_LIST || top == SERTRACE_TAG_DICT || top == SERTRACE_TAG_SET)
        return true;
    const item *t = &e->stack[e->nstack - 1];
    if (t->it_node >= e->nnodes || depth == STREAM_CHAIN_MAX || e->nodes[t->it_node].dead ||
        t->it_node <= cn[depth])
        return false;
    cn[++*nchain - 1] = t->it_node;
    return true;
}

/* The labels the groups' consumers will give (label_items in emulator.c,
 * BUILD's state role), given now: the first label is a node's edge, so
 * the consumer's own labelling is then a no-op. */
static int predict_labels(emu *e, const stream_level *lv, uint32_t k)
{
    for (uint32_t d = 0; d < k; d++) {
        uint32_t from = lv[d].index + 1;
        uint32_t to = d + 1 < k ? lv[d + 1].index + 1 : e->nstack;
        if (lv[d].tag == SERTRACE_TAG_DICT) {
            for (uint32_t i = from; i + 1 < to; i += 2)
                if (emu_label_value(e, &e->stack[i], &e->stack[i + 1]) < 0)
                    return -1;
        } else if (lv[d].tag == SERTRACE_TAG_LIST) {
            uint64_t pos = lv[d].added - 1;
            for (uint32_t i = from; i < to; i++)
                emu_label(e, &e->stack[i], SERTRACE_LABEL_POS, pos++);
        } else if (lv[d].tag == SERTRACE_TAG_SET) {
            for (uint32_t i = from; i < to; i++)
                emu_label(e, &e->stack[i], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT);
        } else {
            emu_label(e, &e->stack[from], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
        }
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
        bool atom = k + 1 == live || e->nodes[order[k + 1]].start >= n->end;
        uint64_t addr = 0;
        if (feed_enter(e, &b, order[k], nopen + 1, nopen ? addrs[nopen - 1] : 0, atom, &addr) < 0)
            goto end;
        if (atom && n->note != NOTE_GETATTR && n->end >= n->start)
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
#define BOUND(x)                                                                                   \
    do {                                                                                           \
        uint32_t b_ = 0;                                                                           \
        while (b_ < nchain && cn[b_] < (x))                                                        \
            b_++;                                                                                  \
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
int emu_stream_batch(emu *e, size_t next)
{
    uint32_t cn[STREAM_CHAIN_MAX + 2], k, nchain, common = 0;
    stream_level lv[STREAM_CHAIN_MAX];
    uint64_t addrs[STREAM_CHAIN_MAX + 2] = {0};
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
    if (!read_chain(e, cn, lv, &k, &nchain))
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
    if (predict_labels(e, lv, k) < 0)
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
    return 0;
later:
    e->stream_retry =
        e->stream_nodes > UINT32_MAX - e->nnodes ? UINT32_MAX : e->nnodes + e->stream_nodes;
    return 0;
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
    bool ok = e->nstack == l->index + 1 && e->nmarks == l->marks && e->stack[l->index].node == j;
    switch (l->tag) {
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
