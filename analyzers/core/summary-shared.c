/* summary-shared.c -- shared objects in the summary (issue 13 item 5):
 * how many memo references point to each object, which type row a
 * reference counts on, and the retained bytes of the top entries.
 *
 * A memo reference (a node of class SERTRACE_TAGCLASS_REF) carries the
 * address of the object it points back to (schema.h `addr`: the C pickler
 * and the pyhook both pass the referenced object), and the object itself
 * was written, once, as a node with that address.  So one dump needs two
 * tables keyed by address:
 *   - the objects written (`objs`): where each was written (its node's
 *     [start, end) in the payload), its type index and depth.  Entered at
 *     node_enter, so a reference from inside the object itself (a list
 *     that holds itself) finds it; `end` is set at its node_exit.  A
 *     memoized object stays alive for the whole dump (the memo holds it),
 *     so its address is never reused while references to it can come;
 *     an address written again (a temporary that was not memoized) takes
 *     the slot over, which is the object later references mean.
 *   - the references (`refs`): per referenced address, how many and the
 *     position of the last one.
 * A reference counts on its target's type row (a reference to a function
 * on the function's row, not on a row of its own), or on its own type's
 * when the target is unknown.
 *
 * Retained bytes of a top entry X (README: the definition): its bytes
 * less the bytes of the maximal objects written inside it (strictly) that
 * a reference outside X points to -- they would still be written, where
 * that reference is.  A reference to Y inside X's subtree can only come
 * after Y was written, so "outside X" is "at or after X's end": Y is
 * shared out when its last reference is at or after X's end.  Computed
 * at dump close, only for a complete dump whose sizes are exact (not a
 * lower-bound dump) and for entries whose bytes are exact; unknown (null,
 * nothing in text) when a reference at or after X's end points to an
 * object this table does not know (its table was full, or the reference
 * has no address: `sertrace inspect` records none).
 *
 * Cost: two hash probes per node with an address, one per reference; at
 * close, the referenced objects sorted by start once (O(R log R), R
 * distinct referenced objects), then per top entry a binary search and a
 * sweep over the referenced objects written inside it, at most
 * SWEEP_BUDGET steps per dump (entries past the budget get no retained).
 * Memory: 32 B per object slot, the table at most 3/4 full (43 B per
 * object at worst), at most OBJS_MAX objects per dump (2^21 slots: 64
 * MiB); beyond it objects are not recorded, and references to them are
 * "unknown" as above.
 */
#include <stdlib.h>
#include <string.h>

#include "summary-internal.h"

#define OBJS_MAX (3u << 19)     /* objects recorded per dump (3/4 of 2^21 slots) */
#define KEEP_SLOTS (1u << 14)   /* a recycled dump keeps tables this small */
#define SWEEP_BUDGET (1u << 24) /* retained: sweep steps per dump */
#define OPEN_END UINT64_MAX     /* an object whose node has not closed */

static inline size_t slot_of(uint64_t addr, size_t cap)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* ---- objects written ------------------------------------------------------- */

static shared_obj *obj_find(const dump_sum *ds, uint64_t addr)
{
    if (ds->objs_cap == 0)
        return NULL;
    for (size_t j = slot_of(addr, ds->objs_cap);; j = (j + 1) & (ds->objs_cap - 1)) {
        shared_obj *o = &ds->objs[j];
        if (o->addr == addr)
            return o;
        if (o->addr == 0)
            return NULL;
    }
}

static int objs_grow(dump_sum *ds)
{
    size_t cap = ds->objs_cap ? ds->objs_cap * 2 : 256;
    shared_obj *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    for (size_t i = 0; i < ds->objs_cap; i++) {
        if (ds->objs[i].addr == 0)
            continue;
        size_t j = slot_of(ds->objs[i].addr, cap);
        while (t[j].addr != 0)
            j = (j + 1) & (cap - 1);
        t[j] = ds->objs[i];
    }
    free(ds->objs);
    ds->objs = t;
    ds->objs_cap = cap;
    return 0;
}

int shared_object_enter(dump_sum *ds, const sertrace_node *n)
{
    if (n->addr == 0 || sertrace_tagclass_of(n->tag) == SERTRACE_TAGCLASS_REF ||
        (n->flags & SERTRACE_NODE_NO_ENTER))
        return 0;
    shared_obj *o = obj_find(ds, n->addr);
    if (o == NULL) {
        if (ds->objs_n >= OBJS_MAX) {
            ds->objs_full = true;
            return 0;
        }
        if ((ds->objs_n + 1) * 4 > ds->objs_cap * 3 && objs_grow(ds) < 0)
            return -1;
        size_t j = slot_of(n->addr, ds->objs_cap);
        while (ds->objs[j].addr != 0)
            j = (j + 1) & (ds->objs_cap - 1);
        o = &ds->objs[j];
        ds->objs_n++;
    }
    o->addr = n->addr;
    o->start = n->enter_pos;
    o->end = OPEN_END;
    o->type = n->type;
    o->depth = n->depth;
    return 0;
}

void shared_object_exit(dump_sum *ds, const sertrace_node *n)
{
    if (n->addr == 0 || sertrace_tagclass_of(n->tag) == SERTRACE_TAGCLASS_REF)
        return;
    shared_obj *o = obj_find(ds, n->addr);
    if (o != NULL && o->depth == n->depth && o->start == n->enter_pos)
        o->end = n->enter_pos + n->bytes;
}

/* ---- references ------------------------------------------------------------ */

static int refs_grow(dump_sum *ds)
{
    size_t cap = ds->refs_cap ? ds->refs_cap * 2 : 64;
    shared_ref *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    for (size_t i = 0; i < ds->refs_cap; i++) {
        if (ds->refs[i].count == 0)
            continue;
        size_t j = slot_of(ds->refs[i].addr, cap);
        while (t[j].count != 0)
            j = (j + 1) & (cap - 1);
        t[j] = ds->refs[i];
    }
    free(ds->refs);
    ds->refs = t;
    ds->refs_cap = cap;
    return 0;
}

int shared_count_ref(dump_sum *ds, const sertrace_node *n, uint32_t *target_type)
{
    *target_type = 0;
    if (n->addr == 0) { /* no address (sertrace inspect): its target is unknown */
        if (!ds->unknown_ref || n->enter_pos > ds->unknown_ref_pos)
            ds->unknown_ref_pos = n->enter_pos;
        ds->unknown_ref = true;
        return 0;
    }
    if ((ds->refs_n + 1) * 2 > ds->refs_cap && refs_grow(ds) < 0)
        return -1;
    size_t j = slot_of(n->addr, ds->refs_cap);
    while (ds->refs[j].count != 0 && ds->refs[j].addr != n->addr)
        j = (j + 1) & (ds->refs_cap - 1);
    shared_ref *r = &ds->refs[j];
    if (r->count == 0) {
        r->addr = n->addr;
        ds->refs_n++;
    }
    r->count++;
    if (n->enter_pos > r->last)
        r->last = n->enter_pos;
    const shared_obj *o = obj_find(ds, n->addr);
    if (o != NULL) {
        *target_type = o->type;
    } else { /* its target was never recorded */
        if (!ds->unknown_ref || n->enter_pos > ds->unknown_ref_pos)
            ds->unknown_ref_pos = n->enter_pos;
        ds->unknown_ref = true;
    }
    return 0;
}

uint64_t shared_refs_of(const dump_sum *ds, uint64_t addr)
{
    if (ds->refs_cap == 0 || addr == 0)
        return 0;
    for (size_t j = slot_of(addr, ds->refs_cap); ds->refs[j].count != 0;
         j = (j + 1) & (ds->refs_cap - 1))
        if (ds->refs[j].addr == addr)
            return ds->refs[j].count;
    return 0;
}

/* ---- retained bytes ------------------------------------------------------- */

/* A referenced object, for the sweep: where it was written, its last
 * reference. */
typedef struct shared_span {
    uint64_t start, end, last;
    uint32_t depth;
} shared_span;

static int cmp_span(const void *a, const void *b)
{
    const shared_span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth; /* outer first */
}

/* Retained bytes of `r` from the sorted spans; false when unknown (the
 * budget ran out or a span is not a closed subtree of it). */
static bool retained_of(const top_raw *r, const shared_span *sp, size_t nsp, uint64_t *budget,
                        uint64_t *out)
{
    uint64_t xs = r->start, xe = r->start + r->bytes, shared = 0, chosen_end = 0;
    bool chosen = false;
    size_t lo = 0, hi = nsp; /* first span starting at or after xs */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].start < xs)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nsp && sp[i].start < xe; i++) {
        if (*budget == 0)
            return false;
        (*budget)--;
        const shared_span *y = &sp[i];
        if (y->depth <= r->depth)
            continue; /* the entry itself (or a wrapper as long as it) */
        if (chosen && y->start < chosen_end)
            continue; /* inside an object already taken out */
        if (y->end == OPEN_END || y->end > xe || y->end < y->start)
            return false; /* not a closed subtree of it: not exact */
        if (y->last >= xe) { /* referenced from after X: written there */
            shared += y->end - y->start;
            chosen = true;
            chosen_end = y->end;
        }
    }
    if (shared > r->bytes)
        return false;
    *out = r->bytes - shared;
    return true;
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
            const shared_obj *o = obj_find(ds, ds->refs[j].addr);
            if (o == NULL)
                continue; /* counted in unknown_ref */
            sp[nsp++] = (shared_span){o->start, o->end, ds->refs[j].last, o->depth};
        }
        qsort(sp, nsp, sizeof *sp, cmp_span);
    }
    uint64_t budget = SWEEP_BUDGET;
    for (unsigned i = 0; i < ds->ntop; i++) {
        top_raw *r = &ds->top[i];
        if (sertrace_tagclass_of(r->tag) == SERTRACE_TAGCLASS_REF || !raw_exact(r))
            continue;
        if (ds->unknown_ref && ds->unknown_ref_pos >= r->start + r->bytes)
            continue; /* a reference after it to an object not recorded */
        r->has_retained = retained_of(r, sp, nsp, &budget, &r->retained);
    }
    free(sp);
    return 0;
}

/* ---- per-dump state -------------------------------------------------------- */

void shared_reset(dump_sum *ds)
{
    if (ds->objs_cap > KEEP_SLOTS) {
        free(ds->objs);
        ds->objs = NULL;
        ds->objs_cap = 0;
    } else if (ds->objs_n) {
        memset(ds->objs, 0, ds->objs_cap * sizeof *ds->objs);
    }
    if (ds->refs_cap > KEEP_SLOTS) {
        free(ds->refs);
        ds->refs = NULL;
        ds->refs_cap = 0;
    } else if (ds->refs_n) {
        memset(ds->refs, 0, ds->refs_cap * sizeof *ds->refs);
    }
    ds->objs_n = ds->refs_n = 0;
    ds->objs_full = ds->unknown_ref = false;
    ds->unknown_ref_pos = 0;
}

void shared_free(dump_sum *ds)
{
    free(ds->objs);
    free(ds->refs);
    ds->objs = NULL;
    ds->refs = NULL;
    ds->objs_cap = ds->refs_cap = 0;
}
