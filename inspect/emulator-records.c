/* emulator-records.c -- the pickle's nodes to the tree core: at STOP they
 * are sorted by span (outer first), nested with an explicit stack (no
 * recursion: depth costs memory, not C stack), and encoded as schema records
 * (ENTER/EXIT/TYPE/NOTE between a dump_begin and a dump_end) fed to the core
 * in batches.  A node's edge label (schema v5: NAME then LABEL, just before
 * its ENTER) is emitted here too: hidden keys are numbered in the order the
 * nodes are written, as a recording numbers them, not in the order the
 * opcodes that attach them were read (an inner SETITEMS comes first).
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

/* A label name: interned in the type table as "\x01." + text (see
 * emu_label_value), written as a NAME record without that prefix. */
static int rec_name(emu *e, uint32_t index)
{
    uint32_t len = e->type_len[index], skip = len >= 2 ? 2 : len;
    len -= skip;
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    if (batch_room(e, 1 + 10 + 10 + len) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_NAME;
    e->batch_len += put_varint(e->batch + e->batch_len, index);
    e->batch_len += put_varint(e->batch + e->batch_len, len);
    memcpy(e->batch + e->batch_len, e->names + e->type_off[index] + skip, len);
    e->batch_len += len;
    return 0;
}

static int rec_label(emu *e, uint8_t kind, uint64_t value)
{
    if (batch_room(e, 2 + 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_LABEL;
    e->batch[e->batch_len++] = kind;
    e->batch_len += put_varint(e->batch + e->batch_len, value);
    return 0;
}

static int rec_enter(emu *e, const node *n, uint32_t depth, uint64_t addr)
{
    if (batch_room(e, 2 + 5 * 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_ENTER;
    e->batch[e->batch_len++] = n->tag;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, n->type);
    e->batch_len += put_varint(e->batch + e->batch_len, addr); /* emu_address_of */
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
static void sort_nodes(emu *e, uint32_t *order, uint32_t n, uint64_t extra)
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
    for (uint32_t i = 0; i < nnodes; i++)
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
    for (uint32_t i = nnodes; i-- > 0;)
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

/* Nest the pickle's nodes by span and feed them to the core. */
int emu_emit_dump(emu *e, uint64_t total)
{
    uint32_t *order = NULL, *open = NULL, nopen = 0;
    uint64_t hidden = 0; /* HIDDEN keys numbered so far */
    bool *typed = NULL;
    uint64_t extra = (uint64_t)e->nnodes * 8 + (e->ntypes + 1);
    int rc = -1;

    if (!e->core)
        return 0; /* audit only */
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
    sort_nodes(e, order, live, extra);

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
        if (n->label_kind == SERTRACE_LABEL_KEY && n->label <= e->ntypes && !typed[n->label]) {
            if (rec_name(e, (uint32_t)n->label) < 0)
                goto end;
            typed[n->label] = true;
        }
        /* the root has no label (a hostile stream may have attached it) */
        if (n->label_kind != SERTRACE_LABEL_NONE && nopen &&
            rec_label(e, n->label_kind,
                      n->label_kind == SERTRACE_LABEL_HIDDEN ? ++hidden : n->label) < 0)
            goto end;
        if (rec_enter(e, n, nopen + 1, emu_address_of(e, order[k])) < 0)
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
    free(typed);
    return rc;
}
