/* emulator-records.c -- the pickle's nodes to the tree core: at STOP they
 * are sorted by span (outer first), nested with an explicit stack (no
 * recursion: depth costs memory, not C stack), and encoded as schema records
 * (ENTER/EXIT/TYPE/NOTE between a dump_begin and a dump_end) fed to the core
 * in batches.
 */
#define _GNU_SOURCE /* qsort_r */
#include "emulator-internal.h"

/* ---- records --------------------------------------------------------------- */

static int flush_batch(emu *e)
{
    if (!e->batch_len)
        return 0;
    if (sertrace_core_records(e->core, -1, -1, 0, e->dump_id, e->seq++, e->batch, e->batch_len) < 0)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base,
                        "the tree core failed (out of memory?)%s", "");
    e->batch_len = 0;
    return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* Room for a record of at most `need` bytes. */
static int batch_room(emu *e, size_t need)
{
    if (e->batch_len + need > sizeof e->batch)
        return flush_batch(e);
    return 0;
}

static int rec_type(emu *e, uint32_t type)
{
    uint32_t len = e->type_len[type];
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    if (batch_room(e, 1 + 10 + 10 + len) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_TYPE;
    e->batch_len += put_varint(e->batch + e->batch_len, type);
    e->batch_len += put_varint(e->batch + e->batch_len, len);
    memcpy(e->batch + e->batch_len, e->names + e->type_off[type], len);
    e->batch_len += len;
    return 0;
}

static int rec_enter(emu *e, const node *n, uint32_t depth)
{
    if (batch_room(e, 2 + 5 * 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_ENTER;
    e->batch[e->batch_len++] = n->tag;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, n->type);
    e->batch_len += put_varint(e->batch + e->batch_len, 0); /* no address */
    e->batch_len += put_varint(e->batch + e->batch_len, n->length);
    e->batch_len += put_varint(e->batch + e->batch_len, n->start);
    return 0;
}

static int rec_exit(emu *e, uint64_t end, uint32_t depth)
{
    if (batch_room(e, 1 + 2 * 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_EXIT;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, end);
    return 0;
}

static int rec_note(emu *e, uint32_t depth, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value);
    if (batch_room(e, 1 + 10 + 10 + kl + 10 + vl) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_NOTE;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, kl);
    memcpy(e->batch + e->batch_len, key, kl);
    e->batch_len += kl;
    e->batch_len += put_varint(e->batch + e->batch_len, vl);
    memcpy(e->batch + e->batch_len, value, vl);
    e->batch_len += vl;
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

/* Sort order[0..n) by cmp_nodes.  The nodes are created nearly in that
 * order: only a node made after its parts (a tuple at TUPLE, an object at
 * REDUCE) moves back, over the nodes inside it.  So insertion sort first,
 * with a budget of moves linear in n; a hostile stream that needs more
 * (tuples nested 10^6 deep) gets the O(n log n) sort instead. */
static void sort_nodes(uint32_t *order, uint32_t n, node *base)
{
    uint64_t budget = 8 * (uint64_t)n + 1024;
    for (uint32_t k = 1; k < n; k++) {
        uint32_t x = order[k], j = k;
        while (j > 0 && cmp_nodes(&order[j - 1], &x, base) > 0) {
            order[j] = order[j - 1];
            j--;
            if (--budget == 0) {
                order[j] = x;
                qsort_r(order, n, sizeof *order, cmp_nodes, base);
                return;
            }
        }
        order[j] = x;
    }
}

/* Nest the pickle's nodes by span and feed them to the core. */
int emu_emit_dump(emu *e, uint64_t total)
{
    uint32_t *order = NULL, *open = NULL, nopen = 0;
    bool *typed = NULL;
    uint64_t extra = (uint64_t)e->nnodes * 8 + (e->ntypes + 1);
    int rc = -1;

    if (!e->core)
        return 0; /* audit only */
    if (e->memory + extra > e->lim->max_memory)
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                        "memory limit reached (nesting the nodes%s; raise it with --max-memory)",
                        "");
    order = malloc(((size_t)e->nnodes + 1) * sizeof *order);
    open = malloc(((size_t)e->nnodes + 1) * sizeof *open);
    typed = calloc(e->ntypes + 1, 1);
    if (!order || !open || !typed) {
        emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        goto end;
    }
    if (e->memory + extra > e->peak)
        e->peak = e->memory + extra;
    uint32_t live = 0;
    for (uint32_t i = 0; i < e->nnodes; i++)
        if (!e->nodes[i].dead)
            order[live++] = i;
    sort_nodes(order, live, e->nodes);

    if (sertrace_core_dump_begin(e->core, -1, -1, 0, e->dump_id, "pickle", 6,
                                 e->protocol >= 0 ? e->protocol : (e->max_op_proto >= 1))) {
        emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s",
                 "");
        goto end;
    }
    e->seq = 0;
    e->batch_len = 0;
    for (uint32_t k = 0; k < live; k++) {
        node *n = &e->nodes[order[k]];
        while (nopen && e->nodes[open[nopen - 1]].end <= n->start) {
            if (rec_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
                goto end;
            nopen--;
        }
        /* A span that overlaps its container (only a hostile stream makes
         * one, e.g. DUP then mutation after use) is cut to fit. */
        if (nopen && n->end > e->nodes[open[nopen - 1]].end)
            n->end = e->nodes[open[nopen - 1]].end;
        if (nopen + 1 > e->lim->max_depth) {
            char msg[32];
            snprintf(msg, sizeof msg, "%u", e->lim->max_depth);
            emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base, "objects nested deeper than %s levels",
                     msg);
            goto end;
        }
        if (n->type && !typed[n->type]) {
            if (rec_type(e, n->type) < 0)
                goto end;
            typed[n->type] = true;
        }
        if (rec_enter(e, n, nopen + 1) < 0)
            goto end;
        if (n->note == NOTE_GETATTR && rec_note(e, nopen + 1, note_key, note_getattr) < 0)
            goto end;
        open[nopen++] = order[k];
    }
    while (nopen) {
        if (rec_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
            goto end;
        nopen--;
    }
    if (flush_batch(e) < 0)
        goto end;
    if (sertrace_core_dump_end_flags(e->core, -1, -1, 0, e->dump_id, total, SERTRACE_STATUS_OK,
                                     e->seq, 0) < 0) {
        emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s",
                 "");
        goto end;
    }
    e->res->nodes += live;
    rc = 0;
end:
    free(order);
    free(open);
    free(typed);
    return rc;
}
