/* emulator-records.c -- the pickle's nodes to the tree core: at STOP they
 * are sorted by span (outer first), nested with an explicit stack (no
 * recursion: depth costs memory, not C stack), and fed to the core as the
 * schema records would be (ENTER/EXIT/ATOM/TYPE/NOTE between a dump_begin
 * and a dump_end), but directly: sertrace_core_node() and its siblings
 * (core.h), no record encoded or decoded.  A node's edge label (NAME, then
 * its ENTER's label) is given here too: hidden keys are numbered in the order the
 * nodes are written, as a recording numbers them, not in the order the
 * opcodes that attach them were read (an inner SETITEMS comes first).
 * Streaming (README "Streaming"): a list, dict or set root is fed before
 * STOP, its finished items batch by batch (emu_stream_batch), with the
 * same records in the same order as at STOP; a dump so begun whose root
 * is then wrapped is dropped (emu_abort_dump) and the pickle read again.
 */
#define _GNU_SOURCE /* qsort_r */
#include "emulator-internal.h"

/* ---- the core, fed directly (core.h sertrace_core_node) ------------------- */

static int core_failed(emu *e)
{
    return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s",
                    "");
}

static int feed_type(emu *e, uint32_t type)
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
static int feed_name(emu *e, uint32_t index)
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

static int feed_exit(emu *e, uint64_t end, uint32_t depth)
{
    sertrace_core_node_in in = {.op = SERTRACE_REC_EXIT, .depth = depth, .pos = end};
    if (sertrace_core_node(e->core, e->dump, &in) < 0)
        return core_failed(e);
    return 0;
}

static int feed_note(emu *e, uint32_t depth, const char *key, const char *value)
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
 * in n.  Past it (objects nested in objects: the moves grow with n times
 * the depth), a stable LSD radix sort, linear: from index order reversed
 * (later-created first), by end descending, then by start ascending, 16
 * bits a pass, passes where all keys agree skipped.  Positions past 4 GiB,
 * or no memory for it (its n + 64 Ki words over the limit): qsort.  The order is total, so all
 * three give the same result. */
static void sort_nodes(emu *e, uint32_t *order, uint32_t n, uint32_t from, uint64_t extra)
{
    node *base = e->nodes;
    uint32_t nnodes = e->nnodes;
    uint64_t budget = 2 * (uint64_t)n + 1024;
    for (uint32_t k = 1; k < n; k++) {
        uint32_t x = order[k], j = k;
        while (j > 0 && cmp_nodes(&order[j - 1], &x, base) > 0) {
            order[j] = order[j - 1];
            j--;
            if (--budget == 0) {
                order[j] = x;
                goto radix;
            }
        }
        order[j] = x;
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
static uint64_t node_address(const emu *e, uint32_t i, uint64_t parent_addr)
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
    if (sertrace_core_dump_begin(e->core, -1, -1, 0, e->dump_id, "pickle", 6,
                                 e->protocol >= 0 ? e->protocol : (e->max_op_proto >= 1)))
        return core_failed(e);
    e->dump = sertrace_core_live_dump(e->core, -1, e->dump_id);
    if (!e->dump)
        return core_failed(e);
    e->hidden = 0;
    e->fed = 0;
    return 0;
}

/* Its TYPE (and NAME) once per dump, then its ENTER with its label (an
 * ATOM, its EXIT too, when `atom`: nothing nests in it), then its NOTE. */
static int feed_enter(emu *e, uint32_t i, uint32_t depth, uint64_t parent_addr, bool atom,
                      uint64_t *addr)
{
    node *n = &e->nodes[i];
    if (e->cap_typed < e->ntypes + 1) {
        bool *t = realloc(e->typed, ((size_t)e->ntypes + 1) * sizeof *t);
        if (!t)
            return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        memset(t + e->cap_typed, 0, (e->ntypes + 1 - e->cap_typed) * sizeof *t);
        e->typed = t;
        e->cap_typed = e->ntypes + 1;
    }
    if (depth > e->lim->max_depth) {
        char msg[32];
        snprintf(msg, sizeof msg, "%u", e->lim->max_depth);
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base, "objects nested deeper than %s levels",
                        msg);
    }
    if (n->type && !e->typed[n->type]) {
        if (feed_type(e, n->type) < 0)
            return -1;
        e->typed[n->type] = true;
    }
    if (n->label_kind == SERTRACE_LABEL_KEY && n->label <= e->ntypes && !e->typed[n->label]) {
        if (feed_name(e, (uint32_t)n->label) < 0)
            return -1;
        e->typed[n->label] = true;
    }
    sertrace_core_node_in in = {.op = SERTRACE_REC_ENTER,
                                .tag = n->tag,
                                .depth = depth,
                                .type = n->type,
                                .length = n->length,
                                .pos = n->start};
    /* a memo reference: its target's item count, as a recording gives
     * (the target's, final at STOP; the count at the GET when the target
     * was streamed away, which only a summary, never showing it, reads) */
    if (n->tag == SERTRACE_TAG_MEMO) {
        uint32_t j = emu_node_of_id(e, n->object);
        if (j != NO_NODE && e->nodes[j].tag != SERTRACE_TAG_MEMO)
            in.length = e->nodes[j].length;
    }
    /* the root has no label (a hostile stream may have attached it) */
    if (n->label_kind != SERTRACE_LABEL_NONE && depth > 1) {
        in.label_kind = n->label_kind;
        in.label = n->label_kind == SERTRACE_LABEL_HIDDEN ? ++e->hidden : n->label;
    }
    *addr = in.addr = node_address(e, i, parent_addr); /* emu_address_of */
    /* a NOTE goes to the open node: not to an atom */
    if (atom && n->note != NOTE_GETATTR && n->end >= n->start) {
        in.op = SERTRACE_REC_ATOM;
        in.bytes = n->end - n->start;
    }
    if (sertrace_core_node(e->core, e->dump, &in) < 0)
        return core_failed(e);
    if (n->note == NOTE_GETATTR && feed_note(e, depth, note_key, note_getattr) < 0)
        return -1;
    e->fed++;
    return 0;
}

/* Feed the live nodes of [from, nnodes), nested by span, below the `base`
 * nodes already open in the core (0, or 1: a streamed root, open[0]);
 * they are all closed again, the base ones left open. */
static int feed_nodes(emu *e, uint32_t from, uint32_t base)
{
    uint32_t *order = NULL, *open = NULL, nopen = base;
    uint64_t *addrs = NULL;
    uint32_t span = e->nnodes - from;
    uint64_t extra = (uint64_t)span * 16 + (e->ntypes + 1);
    int rc = -1;

    if (e->memory + extra > e->lim->max_memory)
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
    if (e->cap_order >= e->nnodes + 1) {
        order = e->order;
        open = e->open;
    }
    addrs = malloc(((size_t)span + 2) * sizeof *addrs);
    if (!order || !open || !addrs) {
        emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        goto end;
    }
    if (e->memory + extra > e->peak)
        e->peak = e->memory + extra;
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
            if (feed_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
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
        uint64_t addr;
        if (feed_enter(e, order[k], nopen + 1, nopen ? addrs[nopen - base] : 0, atom, &addr) < 0)
            goto end;
        if (atom && e->nodes[order[k]].note != NOTE_GETATTR && n->end >= n->start)
            continue;
        open[nopen++] = order[k];
        addrs[nopen - base] = addr;
    }
    while (nopen > base) {
        if (feed_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
            goto end;
        nopen--;
    }
    rc = 0;
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

/* At STOP: the pickle's nodes (those not streamed yet), nested by span,
 * to the core; a streamed dump gets its root's item count and EXIT. */
int emu_emit_dump(emu *e, uint64_t total)
{
    if (!e->core)
        return 0; /* audit only */
    if (!e->streamed) {
        if (begin_dump(e) < 0 || feed_nodes(e, 0, 0) < 0)
            return -1;
        return end_dump(e, total);
    }
    /* streamed: the root fed first is still the root (emulator.c checks) */
    if (feed_nodes(e, 1, 1) < 0)
        return -1;
    if (sertrace_core_node_length(e->core, -1, e->dump_id, 1, e->nodes[0].length) < 0)
        return core_failed(e);
    if (feed_exit(e, e->nodes[0].end, 1) < 0)
        return -1;
    return end_dump(e, total);
}

/* After an opcode that gave items to the bottom item of the stack: when
 * that item is the pickle's first node, a list, dict or set (its parts
 * come after its first byte), and enough nodes are held, its finished
 * items' nodes go to the core now (the root fed first, with the count it
 * has so far) and are dropped: the pickle is streamed (README
 * "Streaming").  Should the bottom item be wrapped or replaced later (a
 * TUPLE1 around it), emulator.c aborts the dump and reads the pickle again
 * without streaming. */
int emu_stream_batch(emu *e)
{
    const item *root = &e->stack[0];
    node *r;
    /* a pickle without PROTO (0 or 1) says which only by its opcodes, up
     * to STOP, and dump_begin carries it: not streamed */
    if (e->nstack != 1 || e->nmarks || root->node != 0 || e->nnodes - 1 < e->stream_nodes ||
        e->protocol < 0)
        return 0;
    r = &e->nodes[0];
    if (r->dead || r->object != 1 ||
        (r->tag != SERTRACE_TAG_LIST && r->tag != SERTRACE_TAG_DICT && r->tag != SERTRACE_TAG_SET))
        return 0;
    if (!e->streamed) {
        uint64_t addr;
        if (begin_dump(e) < 0)
            return -1;
        e->streamed = true;
        if (feed_enter(e, 0, 1, 0, false, &addr) < 0)
            return -1;
    }
    if (feed_nodes(e, 1, 1) < 0)
        return -1;
    /* the fed nodes are dropped: the next node takes index 1 and identity
     * next_id + 1 */
    e->nnodes = 1;
    e->id_shift = e->next_id;
    return 0;
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
