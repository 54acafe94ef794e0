/* summary-shared.c -- shared objects in the summary (issue 13 item 5):
 * how many memo references point to each object, which type row a
 * reference counts on, and the retained bytes of the top entries.
 *
 * A memo reference (a node of class SERTRACE_TAGCLASS_REF) carries the
 * address of the object it points back to (schema.h `addr`: the C pickler
 * and the pyhook both pass the referenced object), and the object itself
 * was written, once, as a node with that address.  So one dump keeps:
 *   - the objects written (`objs`), an array in the order their nodes
 *     opened: address, where the node was written ([start, end) in the
 *     payload), type index, depth.  Appended at node_enter, so a
 *     reference from inside the object itself (a list that holds itself)
 *     finds it; `end` is set at its node_exit (n->user holds its index).
 *   - the references (`refs`), by address: how many, the position of the
 *     last one, and their bytes on their own type row.
 * At dump close each referenced address is matched with the last object
 * written at it (a memoized object stays alive for the whole dump, the
 * memo holds it, so its address is never reused while references to it
 * can come), and the references move from their own type row to their
 * target's (a reference to a function counts on the function's row, not
 * on a "function X" row of its own).  Matching at close keeps the node
 * path to an append and, per reference, one probe of the (small)
 * reference table: no hash probe per node.
 *
 * Retained bytes of a top entry X (README: the definition): its bytes
 * less the bytes of the maximal objects written inside it (strictly) that
 * a reference outside X points to -- they would still be written, where
 * that reference is.  A reference to Y inside X's subtree can only come
 * after Y was written, so "outside X" is "at or after X's end": Y is
 * shared out when its last reference is at or after X's end; and so,
 * transitively, is an object inside X that a reference inside a
 * shared-out Y points to (Y is still written, and it with it).  For that
 * the references are also logged in stream order (`reflog`: position and
 * address; they are leaves, so they close in order), and the sweep looks
 * up the references inside each object it takes out.  Computed
 * at dump close, only for a complete dump whose sizes are exact (not a
 * lower-bound dump) and for entries whose bytes are exact; unknown (null,
 * nothing in text) when a reference at or after X's end, or inside an
 * object taken out of X, points to an object this table does not know
 * (its table was full, or the reference has no address; `sertrace
 * inspect` gives object numbers to what a memo reference points to).
 *
 * Cost: per node with an address one append to `objs`, per reference
 * one probe of `refs`; at close one pass over `objs` probing `refs`, the
 * referenced objects sorted by start once (O(R log R), R distinct
 * referenced objects), then per top entry a binary search and a sweep
 * over the referenced objects written inside it and the references
 * inside those it takes out, at most SWEEP_BUDGET steps per dump
 * (entries past the budget get no retained bytes).  Memory: 32 B per
 * object and 16 B per reference, at most OBJS_MAX of each per dump (64
 * MiB, 32 MiB); beyond it objects are not recorded, and references to
 * them are "unknown" as above (references not logged: no retained bytes
 * for an entry that takes an object out).
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "summary-internal.h"

#define KEEP_SLOTS (1u << 14) /* a recycled dump keeps a reference table this small */
/* ... and its objects and reference log up to this many (8 MiB, 4 MiB):
 * a stream of dumps of ~10^5 objects each (a workload dumped in a loop)
 * grows them once, not at every dump (18 M instructions over 10 dumps of
 * ~99k nodes); the reference table is cleared at reuse, so it stays
 * small. */
#define KEEP_LOG (1u << 18)
#define SWEEP_BUDGET (1u << 24) /* retained: sweep steps per dump */

/* ---- objects written ------------------------------------------------------- */

/* The objects array full (objs_n == objs_cap), at shared_object_enter:
 * grown, or marked full past OBJS_MAX (0, the object is not recorded);
 * 1: room for one more; -1 out of memory. */
int shared_objs_room(dump_sum *ds)
{
    if (ds->objs_n >= OBJS_MAX) {
        ds->objs_full = true;
        return 0;
    }
    shared_obj *t = sertrace_grow(ds->objs, &ds->objs_cap, sizeof *t, ds->objs_n + 1, 256);
    if (t == NULL)
        return -1;
    ds->objs = t;
    return 1;
}

/* ---- references ------------------------------------------------------------ */

static inline __attribute__((always_inline)) shared_ref *ref_find(const dump_sum *ds, uint64_t addr)
{
    if (ds->refs_cap == 0)
        return NULL;
    SERTRACE_PROBE(j, shared_hash(addr), ds->refs_cap,
                   ds->refs[j].count != 0 && ds->refs[j].addr != addr);
    return ds->refs[j].count != 0 ? &ds->refs[j] : NULL;
}

static int refs_grow(dump_sum *ds)
{
    size_t cap = ds->refs_cap ? ds->refs_cap * 2 : 64;
    shared_ref *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    for (size_t i = 0; i < ds->refs_cap; i++) {
        if (ds->refs[i].count == 0)
            continue;
        SERTRACE_PROBE(j, shared_hash(ds->refs[i].addr), cap, t[j].count != 0);
        t[j] = ds->refs[i];
    }
    free(ds->refs);
    ds->refs = t;
    ds->refs_cap = cap;
    return 0;
}

/* shared_count_ref's slow path: no address, a full reference log, or a
 * table at half its slots (summary-internal.h has the common case). */
int shared_count_ref_slow(dump_sum *ds, const sertrace_node *n, uint64_t owned)
{
    if (n->addr == 0) { /* no address: its target is unknown */
        if (!ds->unknown_ref || n->enter_pos > ds->unknown_ref_pos)
            ds->unknown_ref_pos = n->enter_pos;
        ds->unknown_ref = true;
        return 0;
    }
    if (ds->reflog_n == ds->reflog_cap) {
        if (ds->reflog_n >= OBJS_MAX) {
            ds->reflog_full = true;
        } else {
            shared_reflog *t =
                sertrace_grow(ds->reflog, &ds->reflog_cap, sizeof *t, ds->reflog_n + 1, 64);
            if (t == NULL)
                return -1;
            ds->reflog = t;
        }
    }
    if (ds->reflog_n < ds->reflog_cap) /* refs are leaves: they close in stream order */
        ds->reflog[ds->reflog_n++] = (shared_reflog){n->enter_pos, n->addr};
    if ((ds->refs_n + 1) * 2 > ds->refs_cap && refs_grow(ds) < 0)
        return -1;
    shared_ref_add(ds, n, owned);
    return 0;
}

uint64_t shared_refs_of(const dump_sum *ds, uint64_t addr)
{
    const shared_ref *r = addr ? ref_find(ds, addr) : NULL;
    return r ? r->count : 0;
}

int shared_resolve(dump_sum *ds)
{
    if (ds->refs_n == 0)
        return 0;
    /* each referenced address's object: the last one written there (a
     * memoized object stays alive, so nothing reuses its address later) */
    for (size_t i = 0; i < ds->objs_n; i++) {
        shared_ref *r = ref_find(ds, ds->objs[i].addr);
        if (r != NULL)
            r->obj = (uint32_t)(i + 1);
    }
    for (size_t j = 0; j < ds->refs_cap; j++) {
        shared_ref *r = &ds->refs[j];
        if (r->count == 0)
            continue;
        if (r->obj == 0) { /* its target was never recorded */
            if (!ds->unknown_ref || r->last > ds->unknown_ref_pos)
                ds->unknown_ref_pos = r->last;
            ds->unknown_ref = true;
            continue;
        }
        uint32_t target = ds->objs[r->obj - 1].type;
        if (target == 0 || target == r->type || r->moved == 0)
            continue;
        /* its references count on the target's row, not on their own */
        node_stat *to = summary_type_stat(ds, target);
        if (to == NULL)
            return -1;
        if (r->type != 0) {
            node_stat *from = &ds->types[r->type];
            from->count -= r->moved;
            from->refs -= r->moved;
            from->bytes -= r->bytes;
            from->self -= r->self;
            from->owned -= r->owned;
        }
        to->count += r->moved;
        to->refs += r->moved;
        to->bytes += r->bytes;
        to->self += r->self;
        to->owned += r->owned;
    }
    return 0;
}

/* ---- retained bytes ------------------------------------------------------- */

/* A referenced object, for the sweep: where it was written, its last
 * reference. */
typedef struct shared_span {
    uint64_t start, end, last, addr;
    uint32_t depth;
    uint32_t stamp; /* the entry whose sweep reached it last */
} shared_span;

static int cmp_span(const void *a, const void *b)
{
    const shared_span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth; /* outer first */
}

/* The sweep's scratch: the spans taken out of the entry being computed
 * (indices into the sorted spans), the generation that marks them. */
typedef struct sweep {
    uint32_t *out;
    size_t n;
    uint32_t gen;
    uint64_t budget;
    /* per logged reference (ds->reflog, same order), its target's span
     * index + 1 (0: not known), looked up once per dump, when the first
     * entry takes an object out (not once per entry and step) */
    uint32_t *ref_span;
} sweep;

/* w->ref_span, filled on first use: 0 or -1 (out of memory). */
static int sweep_ref_spans(const dump_sum *ds, sweep *w)
{
    if (w->ref_span != NULL || ds->reflog_n == 0)
        return 0;
    w->ref_span = malloc(ds->reflog_n * sizeof *w->ref_span);
    if (w->ref_span == NULL)
        return -1;
    for (size_t j = 0; j < ds->reflog_n; j++) {
        const shared_ref *t = ref_find(ds, ds->reflog[j].addr);
        w->ref_span[j] = t != NULL ? t->span : 0;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Take span i out of X (which ends at xe): false when it is not a
 * closed subtree of X (not exact).  A span inside `within` (the taken-out
 * span whose references are being walked, or NULL) is only marked: its
 * references are among those being walked, and its bytes among
 * `within`'s, so it needs no walk and no place in w->out. */
static bool take_out(shared_span *sp, size_t i, uint64_t xe, sweep *w, const shared_span *within)
{
    if (sp[i].end == OPEN_END || sp[i].end > xe || sp[i].end < sp[i].start)
        return false;
    sp[i].stamp = w->gen;
    if (within == NULL || sp[i].start < within->start || sp[i].end > within->end)
        w->out[w->n++] = (uint32_t)i;
    return true;
}

/* Retained bytes of `r` from the sorted spans: 1, or 0 when unknown (the
 * budget ran out, a span is not a closed subtree of it, or a reference
 * inside a taken-out object has a target this table does not know), -1
 * out of memory. */
static int retained_of(const dump_sum *ds, const top_raw *r, shared_span *sp, size_t nsp, sweep *w,
                       uint64_t *out)
{
    uint64_t xs = r->start, xe = r->start + r->bytes, shared = 0, chosen_end = 0;
    bool chosen = false;
    size_t lo = 0, hi = nsp; /* first span starting at or after xs */
    w->n = 0;
    w->gen++;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].start < xs)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* the objects inside X that a reference after X's end points to */
    for (size_t i = lo; i < nsp && sp[i].start < xe; i++) {
        if (w->budget == 0)
            return 0;
        w->budget--;
        const shared_span *y = &sp[i];
        if (y->depth <= r->depth)
            continue; /* the entry itself (or a wrapper as long as it) */
        if (chosen && y->start < chosen_end)
            continue; /* inside an object already taken out */
        if (y->end == OPEN_END || y->end > xe || y->end < y->start)
            return 0;        /* not a closed subtree of it: not exact */
        if (y->last >= xe) { /* referenced from after X: written there */
            if (!take_out(sp, i, xe, w, NULL))
                return 0;
            chosen = true;
            chosen_end = y->end;
        }
    }
    /* and, transitively, those inside X that a reference inside a
     * taken-out object points to: they are still written too (where
     * that object now is).  A reference without an address in X (not
     * logged: `sertrace inspect` gives none, so its memory stays
     * O(depth + memo)) may be one of them: unknown. */
    if (w->n > 0 && ds->unknown_ref && ds->unknown_ref_pos >= xs)
        return 0;
    if (w->n > 0 && !ds->reflog_full && sweep_ref_spans(ds, w) < 0)
        return -1;
    for (size_t k = 0; k < w->n; k++) {
        const shared_span *y = &sp[w->out[k]];
        if (ds->reflog_full) /* its references may not all be logged */
            return 0;
        /* the first reference at or after y's start */
        size_t a = 0, b = ds->reflog_n;
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (ds->reflog[mid].pos < y->start)
                a = mid + 1;
            else
                b = mid;
        }
        for (size_t j = a; j < ds->reflog_n && ds->reflog[j].pos < y->end; j++) {
            if (w->budget == 0)
                return 0;
            w->budget--;
            if (w->ref_span[j] == 0)
                return 0; /* its target is not known: it may be inside X */
            size_t z = w->ref_span[j] - 1;
            if (sp[z].start < xs || sp[z].start >= xe || sp[z].depth <= r->depth ||
                sp[z].stamp == w->gen)
                continue; /* outside X, X itself, or taken out already */
            if (!take_out(sp, z, xe, w, y))
                return 0;
        }
    }
    /* the bytes of the maximal ones (spans nest or are disjoint; sorted
     * by start, outer first) */
    if (w->n > 1)
        qsort(w->out, w->n, sizeof *w->out, cmp_u32);
    chosen_end = 0;
    for (size_t k = 0; k < w->n; k++) {
        const shared_span *y = &sp[w->out[k]];
        if (k > 0 && y->start < chosen_end)
            continue;
        shared += y->end - y->start;
        chosen_end = y->end;
    }
    if (shared > r->bytes)
        return 0;
    *out = r->bytes - shared;
    return 1;
}

int shared_retained(dump_sum *ds, const sertrace_dump_state *d)
{
    for (unsigned i = 0; i < ds->ntop; i++)
        ds->top[i].has_retained = false;
    if (!sertrace_dump_complete(d) || (d->flags & SERTRACE_DUMPF_LOWER_BOUNDS))
        return 0; /* sizes not all exact: no retained bytes */
    shared_span *sp = NULL;
    size_t nsp = 0;
    if (ds->refs_n > 0) {
        sp = malloc(ds->refs_n * sizeof *sp);
        if (sp == NULL)
            return -1;
        for (size_t j = 0; j < ds->refs_cap; j++) {
            if (ds->refs[j].count == 0)
                continue;
            if (ds->refs[j].obj == 0)
                continue; /* counted in unknown_ref */
            const shared_obj *o = &ds->objs[ds->refs[j].obj - 1];
            sp[nsp++] =
                (shared_span){o->start, o->end, ds->refs[j].last, ds->refs[j].addr, o->depth, 0};
        }
        qsort(sp, nsp, sizeof *sp, cmp_span);
        for (size_t i = 0; i < nsp; i++)
            ref_find(ds, sp[i].addr)->span = (uint32_t)(i + 1);
    }
    sweep w = {.out = nsp ? malloc(nsp * sizeof *w.out) : NULL, .budget = SWEEP_BUDGET};
    if (nsp && w.out == NULL) {
        free(sp);
        return -1;
    }
    unsigned i;
    for (i = 0; i < ds->ntop; i++) {
        top_raw *r = &ds->top[i];
        if (sertrace_tagclass_of(r->tag) == SERTRACE_TAGCLASS_REF || !raw_exact(r))
            continue;
        if (ds->unknown_ref && ds->unknown_ref_pos >= r->start + r->bytes)
            continue; /* a reference after it to an object not recorded */
        int got = retained_of(ds, r, sp, nsp, &w, &r->retained);
        if (got < 0)
            break;
        r->has_retained = got > 0;
    }
    free(w.ref_span);
    free(w.out);
    free(sp);
    return i < ds->ntop ? -1 : 0;
}

/* ---- per-dump state -------------------------------------------------------- */

void shared_reset(dump_sum *ds)
{
    if (ds->objs_cap > KEEP_LOG) {
        free(ds->objs);
        ds->objs = NULL;
        ds->objs_cap = 0;
    }
    if (ds->refs_cap > KEEP_SLOTS) {
        free(ds->refs);
        ds->refs = NULL;
        ds->refs_cap = 0;
    } else if (ds->refs_n) {
        ds->refs_dirty = true; /* cleared when reused (a one-shot summary never is) */
    }
    if (ds->reflog_cap > KEEP_LOG) {
        free(ds->reflog);
        ds->reflog = NULL;
        ds->reflog_cap = 0;
    }
    ds->objs_n = ds->refs_n = ds->reflog_n = 0;
    ds->objs_full = ds->unknown_ref = ds->reflog_full = false;
    ds->unknown_ref_pos = 0;
}

void shared_reuse(dump_sum *ds)
{
    if (ds->refs_dirty)
        memset(ds->refs, 0, ds->refs_cap * sizeof *ds->refs);
    ds->refs_dirty = false;
}

void shared_free(dump_sum *ds)
{
    free(ds->objs);
    free(ds->refs);
    free(ds->reflog);
    ds->objs = NULL;
    ds->refs = NULL;
    ds->reflog = NULL;
    ds->objs_cap = ds->refs_cap = ds->reflog_cap = 0;
}
