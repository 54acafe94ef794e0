/* pathstats.c -- path patterns (pathstats.h).
 *
 * A pattern is interned as (its parent pattern, its own last segment):
 * entering a node formats one segment (format/'s text, pattern mode) and
 * looks (parent id, segment) up in an open-addressing table, so a node
 * costs one segment and one lookup whatever its depth, and a pattern's
 * text is never stored whole (a 10^6-deep chain has 10^6 patterns; their
 * whole texts would be 10^12 bytes).  The open chain keeps each level's
 * pattern id; closing a node adds its bytes to that id's entry.  An
 * instance's state has an empty segment: it keeps its parent's pattern.
 * Whole texts are built only for the rows written (and for ties in bytes
 * while sorting), by walking the parent links.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "outbuf.h"
#include "pathstats.h"
#include "paths.h"

#define NO_PARENT UINT32_MAX

typedef struct entry {
    uint64_t hash;
    uint32_t parent;   /* parent pattern's id, NO_PARENT for a root */
    uint32_t off, len; /* its last segment, in `text` */
    uint32_t depth;    /* segments in the pattern */
    uint64_t count, bytes, self;
    bool inexact;
} entry;

struct sertrace_pathstats {
    entry *e; /* by id, in order of creation: a parent before its children */
    size_t n, e_cap;
    uint32_t *slots; /* id + 1, 0: free; `cap` a power of two */
    size_t cap;
    sertrace_buf text; /* every pattern's last segment */
    sertrace_buf seg;  /* scratch: the segment being entered */
    uint32_t *ids;     /* pattern id of the open node at each depth */
    bool *empty;       /* the level's segment is empty (an instance's state) */
    size_t ids_cap;
};

sertrace_pathstats *sertrace_pathstats_create(void)
{
    sertrace_pathstats *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->cap = 64;
    p->slots = calloc(p->cap, sizeof *p->slots);
    if (p->slots == NULL) {
        free(p);
        return NULL;
    }
    return p;
}

void sertrace_pathstats_destroy(sertrace_pathstats *p)
{
    if (p == NULL)
        return;
    free(p->e);
    free(p->slots);
    free(p->ids);
    free(p->empty);
    sertrace_buf_free(&p->text);
    sertrace_buf_free(&p->seg);
    free(p);
}

void sertrace_pathstats_reset(sertrace_pathstats *p)
{
    memset(p->slots, 0, p->cap * sizeof *p->slots);
    p->n = 0;
    sertrace_buf_clear(&p->text);
}

size_t sertrace_pathstats_count(const sertrace_pathstats *p)
{
    return p->n;
}

static uint64_t hash_of(uint32_t parent, const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int grow(sertrace_pathstats *p)
{
    size_t cap = p->cap * 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < p->cap; i++) {
        if (p->slots[i] == 0)
            continue;
        SERTRACE_PROBE(j, p->e[p->slots[i] - 1].hash, cap, slots[j] != 0);
        slots[j] = p->slots[i];
    }
    free(p->slots);
    p->slots = slots;
    p->cap = cap;
    return 0;
}

/* Entry `id` is pattern (parent, segment s) of hash h. */
static bool same(const sertrace_pathstats *p, uint32_t id, uint64_t h, uint32_t parent,
                 const char *s, size_t n)
{
    const entry *e = &p->e[id];
    return e->hash == h && e->parent == parent && e->len == n &&
           (n == 0 || memcmp(p->text.data + e->off, s, n) == 0);
}

/* The id of pattern (parent, segment s), created empty when new; -1: out
 * of memory or too many patterns. */
static int64_t intern(sertrace_pathstats *p, uint32_t parent, const char *s, size_t n)
{
    if ((p->n + 1) * 2 > p->cap && grow(p) < 0)
        return -1;
    uint64_t h = hash_of(parent, s, n);
    SERTRACE_PROBE(i, h, p->cap, p->slots[i] != 0 && !same(p, p->slots[i] - 1, h, parent, s, n));
    if (p->slots[i] != 0)
        return p->slots[i] - 1;
    if (p->text.len > UINT32_MAX - n || p->n >= UINT32_MAX - 1)
        return -1;
    if (p->n == p->e_cap) {
        entry *e = sertrace_grow(p->e, &p->e_cap, sizeof *e, p->n + 1, 64);
        if (e == NULL)
            return -1;
        p->e = e;
    }
    uint32_t off = (uint32_t)p->text.len;
    if (n > 0 && sertrace_buf_append(&p->text, s, n) < 0)
        return -1;
    entry *e = &p->e[p->n];
    memset(e, 0, sizeof *e);
    e->hash = h;
    e->parent = parent;
    e->off = off;
    e->len = (uint32_t)n;
    e->depth = parent == NO_PARENT ? 1 : p->e[parent].depth + 1;
    p->slots[i] = (uint32_t)(p->n + 1);
    return (int64_t)p->n++;
}

int sertrace_pathstats_enter(sertrace_pathstats *p, const sertrace_dump_state *d,
                             const sertrace_node *n)
{
    uint32_t k = n->depth;
    if (k == 0)
        return 0;
    if (k > p->ids_cap) {
        /* two arrays of one capacity: the second grows to the first's */
        size_t cap = p->ids_cap, cap2 = p->ids_cap;
        uint32_t *ids = sertrace_grow(p->ids, &cap, sizeof *ids, k, 64);
        if (ids == NULL)
            return -1;
        p->ids = ids;
        bool *empty = sertrace_grow(p->empty, &cap2, sizeof *empty, cap, 64);
        if (empty == NULL)
            return -1;
        p->empty = empty;
        p->ids_cap = cap;
    }
    sertrace_buf_clear(&p->seg);
    if (sertrace_path_segment_append(&p->seg, d, d->stack, k - 1, true) < 0)
        return -1;
    p->empty[k - 1] = k > 1 && p->seg.len == 0;
    if (p->empty[k - 1]) { /* an instance's state: its parent's pattern */
        p->ids[k - 1] = p->ids[k - 2];
        return 0;
    }
    int64_t id =
        intern(p, k > 1 ? p->ids[k - 2] : NO_PARENT, p->seg.data ? p->seg.data : "", p->seg.len);
    if (id < 0)
        return -1;
    p->ids[k - 1] = (uint32_t)id;
    return 0;
}

int sertrace_pathstats_exit(sertrace_pathstats *p, const sertrace_node *n)
{
    uint32_t k = n->depth;
    if (k == 0 || k > p->ids_cap || p->ids[k - 1] >= p->n)
        return 0;
    entry *e = &p->e[p->ids[k - 1]];
    e->self += n->self;
    if (!p->empty[k - 1]) { /* an instance's state is no match of its own */
        e->count++;
        e->bytes += n->bytes;
    }
    if (!sertrace_node_self_exact(n))
        e->inexact = true;
    return 0;
}

int sertrace_pathstats_merge(sertrace_pathstats *dst, const sertrace_pathstats *src)
{
    /* src ids map to dst ids; a parent's id is smaller than its children's */
    uint32_t *map = malloc((src->n ? src->n : 1) * sizeof *map);
    if (map == NULL)
        return -1;
    for (size_t i = 0; i < src->n; i++) {
        const entry *s = &src->e[i];
        uint32_t parent = s->parent == NO_PARENT ? NO_PARENT : map[s->parent];
        int64_t id = intern(dst, parent, s->len ? src->text.data + s->off : "", s->len);
        if (id < 0) {
            free(map);
            return -1;
        }
        map[i] = (uint32_t)id;
        entry *e = &dst->e[id];
        e->count += s->count;
        e->bytes += s->bytes;
        e->self += s->self;
        e->inexact |= s->inexact;
    }
    free(map);
    return 0;
}

/* Append the whole text of pattern `id` (root segment first): its length
 * from the parent links, then each segment copied into place once. */
static int pattern_text(const sertrace_pathstats *p, uint32_t id, sertrace_buf *b)
{
    size_t total = 0;
    for (uint32_t i = id; i != NO_PARENT; i = p->e[i].parent)
        total += p->e[i].len;
    if (ensure(b, total + 1) < 0)
        return -1;
    char *end = b->data + b->len + total;
    for (uint32_t i = id; i != NO_PARENT; i = p->e[i].parent) {
        end -= p->e[i].len;
        if (p->e[i].len) /* (an empty segment: the text may have no buffer yet) */
            memcpy(end, p->text.data + p->e[i].off, p->e[i].len);
    }
    put_end(b, b->data + b->len + total);
    return 0;
}

static const sertrace_pathstats *sort_ctx;
static sertrace_buf sort_a, sort_b;

/* Largest first; ties (rare) by the patterns' texts, built for them. */
static int by_bytes(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    sertrace_buf_clear(&sort_a);
    sertrace_buf_clear(&sort_b);
    pattern_text(sort_ctx, (uint32_t)(x - sort_ctx->e), &sort_a);
    pattern_text(sort_ctx, (uint32_t)(y - sort_ctx->e), &sort_b);
    size_t n = sort_a.len < sort_b.len ? sort_a.len : sort_b.len;
    int c = n ? memcmp(sort_a.data, sort_b.data, n) : 0;
    return c != 0 ? c : (sort_a.len > sort_b.len) - (sort_a.len < sort_b.len);
}

int sertrace_pathstats_write(const sertrace_pathstats *p, sertrace_buf *b, bool json, unsigned top,
                             uint64_t payload, bool exact, unsigned indent)
{
    entry **rows = malloc((p->n ? p->n : 1) * sizeof *rows);
    if (rows == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++) /* each was entered, so closed: a row */
        rows[n++] = &p->e[i];
    sort_ctx = p;
    qsort(rows, n, sizeof *rows, by_bytes);
    sertrace_buf_free(&sort_a);
    sertrace_buf_free(&sort_b);
    sertrace_buf text = SERTRACE_BUF_INIT;
    if (top != 0 && n > top)
        n = top;
    if (json)
        sertrace_buf_append(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        const entry *e = rows[i];
        sertrace_buf_clear(&text);
        if (pattern_text(p, (uint32_t)(e - p->e), &text) < 0)
            break;
        const char *t = text.data ? text.data : "";
        double share = payload ? 100.0 * (double)e->bytes / (double)payload : 0.0;
        if (json) {
            sertrace_buf_append(b, i ? ", {\"pattern\": " : "{\"pattern\": ", i ? 14 : 12);
            sertrace_fmt_json_string(b, t, text.len);
            sertrace_buf_appendf(b,
                                 ", \"count\": %llu, \"bytes\": %llu, \"self_bytes\": %llu, "
                                 "\"share\": %.6f, \"exact\": %s}",
                                 (unsigned long long)e->count, (unsigned long long)e->bytes,
                                 (unsigned long long)e->self, share / 100.0,
                                 e->inexact ? "false" : "true");
        } else {
            sertrace_buf sz = SERTRACE_BUF_INIT;
            if (e->inexact)
                sertrace_buf_append(&sz, "\xe2\x89\xa5 ", 4); /* "≥ ": a lower bound */
            sertrace_fmt_size(&sz, e->bytes, exact);
            sertrace_buf_appendf(b, "%*s%8llu  %12s", (int)indent, "", (unsigned long long)e->count,
                                 sz.data ? sz.data : "");
            sertrace_buf_clear(&sz);
            sertrace_fmt_size(&sz, e->self, exact);
            sertrace_buf_appendf(b, "  %12s  %5.1f%%  ", sz.data ? sz.data : "", share);
            sertrace_buf_free(&sz);
            sertrace_buf_append(b, t, text.len);
            sertrace_buf_append(b, "\n", 1);
        }
    }
    if (json)
        sertrace_buf_append(b, "]", 1);
    int rc = sertrace_buf_error(&text) < 0 ? -1 : sertrace_buf_error(b);
    sertrace_buf_free(&text);
    free(rows);
    return rc;
}
