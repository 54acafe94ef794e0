/* pathstats.c -- path patterns (pathstats.h).
 *
 * The open chain's pattern is kept as one string with the end of each
 * level's segment (`ends[depth - 1]`), so a node's pattern is a prefix of
 * that string: entering a node truncates to its parent's end and appends
 * one segment (format/'s text, pattern mode), closing it looks the prefix
 * up in an open-addressing table (FNV-1a over the text) -- one segment
 * and one lookup per node, no per-node allocation once warm.
 */
#include <stdlib.h>
#include <string.h>

#include "pathstats.h"
#include "paths.h"

typedef struct entry {
    uint64_t hash;
    uint32_t off, len; /* the pattern, in `text` */
    uint64_t count, bytes, self;
    bool used;
    bool inexact;
} entry;

struct sertrace_pathstats {
    entry *slots;
    size_t cap, n;      /* cap: power of two */
    sertrace_buf text;  /* every pattern's text */
    sertrace_buf chain; /* the open chain's pattern */
    uint32_t *ends;
    bool *empty; /* the level's segment is empty (an instance's state) */
    size_t ends_cap;
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
    free(p->slots);
    free(p->ends);
    free(p->empty);
    sertrace_buf_free(&p->text);
    sertrace_buf_free(&p->chain);
    free(p);
}

void sertrace_pathstats_reset(sertrace_pathstats *p)
{
    memset(p->slots, 0, p->cap * sizeof *p->slots);
    p->n = 0;
    sertrace_buf_clear(&p->text);
    sertrace_buf_clear(&p->chain);
}

size_t sertrace_pathstats_count(const sertrace_pathstats *p)
{
    return p->n;
}

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int grow(sertrace_pathstats *p)
{
    size_t cap = p->cap * 2;
    entry *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->slots[i].used)
            continue;
        size_t j = p->slots[i].hash & (cap - 1);
        while (slots[j].used)
            j = (j + 1) & (cap - 1);
        slots[j] = p->slots[i];
    }
    free(p->slots);
    p->slots = slots;
    p->cap = cap;
    return 0;
}

/* The entry of pattern `s`, created empty when new; NULL: out of memory. */
static entry *lookup(sertrace_pathstats *p, const char *s, size_t n)
{
    if ((p->n + 1) * 2 > p->cap && grow(p) < 0)
        return NULL;
    uint64_t h = fnv(s, n);
    size_t i = h & (p->cap - 1);
    for (;; i = (i + 1) & (p->cap - 1)) {
        entry *e = &p->slots[i];
        if (!e->used)
            break;
        if (e->hash == h && e->len == n && memcmp(p->text.data + e->off, s, n) == 0)
            return e;
    }
    if (p->text.len > UINT32_MAX - n)
        return NULL;
    entry *e = &p->slots[i];
    uint32_t off = (uint32_t)p->text.len;
    if (sertrace_buf_append(&p->text, s, n) < 0)
        return NULL;
    memset(e, 0, sizeof *e);
    e->used = true;
    e->hash = h;
    e->off = off;
    e->len = (uint32_t)n;
    p->n++;
    return e;
}

int sertrace_pathstats_enter(sertrace_pathstats *p, const sertrace_dump_state *d,
                             const sertrace_node *n)
{
    uint32_t k = n->depth;
    if (k == 0)
        return 0;
    if (k > p->ends_cap) {
        size_t cap = p->ends_cap ? p->ends_cap * 2 : 64;
        while (cap < k)
            cap *= 2;
        uint32_t *ends = realloc(p->ends, cap * sizeof *ends);
        if (ends == NULL)
            return -1;
        p->ends = ends;
        bool *empty = realloc(p->empty, cap * sizeof *empty);
        if (empty == NULL)
            return -1;
        p->empty = empty;
        p->ends_cap = cap;
    }
    size_t start = k > 1 ? p->ends[k - 2] : 0;
    p->chain.len = start; /* the parent's pattern */
    if (k == 1) {
        sertrace_path_append(&p->chain, d, n, 1, true);
    } else if (n->label_kind == SERTRACE_LABEL_NONE) {
        sertrace_buf_append(&p->chain, "/?", 2);
    } else {
        sertrace_label_append(&p->chain, d, n->label_kind, n->label,
                              sertrace_node_is_state(&d->stack[k - 2]),
                              SERTRACE_FMT_LABEL_PATH | SERTRACE_FMT_LABEL_PATTERN);
    }
    if (sertrace_buf_error(&p->chain) < 0 || p->chain.len > UINT32_MAX)
        return -1;
    p->ends[k - 1] = (uint32_t)p->chain.len;
    p->empty[k - 1] = k > 1 && p->chain.len == start;
    return 0;
}

int sertrace_pathstats_exit(sertrace_pathstats *p, const sertrace_node *n)
{
    uint32_t k = n->depth;
    if (k == 0 || k > p->ends_cap)
        return 0;
    entry *e = lookup(p, p->chain.data ? p->chain.data : "", p->ends[k - 1]);
    if (e == NULL)
        return -1;
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
    for (size_t i = 0; i < src->cap; i++) {
        const entry *s = &src->slots[i];
        if (!s->used)
            continue;
        entry *e = lookup(dst, src->text.data + s->off, s->len);
        if (e == NULL)
            return -1;
        e->count += s->count;
        e->bytes += s->bytes;
        e->self += s->self;
        e->inexact |= s->inexact;
    }
    return 0;
}

static const sertrace_pathstats *sort_ctx;

static int by_bytes(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_ctx->text.data + x->off, sort_ctx->text.data + y->off, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

int sertrace_pathstats_write(const sertrace_pathstats *p, sertrace_buf *b, bool json, unsigned top,
                             uint64_t payload, bool exact, unsigned indent)
{
    entry **rows = malloc((p->n ? p->n : 1) * sizeof *rows);
    if (rows == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->cap; i++)
        if (p->slots[i].used)
            rows[n++] = &p->slots[i];
    sort_ctx = p;
    qsort(rows, n, sizeof *rows, by_bytes);
    if (top != 0 && n > top)
        n = top;
    if (json)
        sertrace_buf_append(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        const entry *e = rows[i];
        double share = payload ? 100.0 * (double)e->bytes / (double)payload : 0.0;
        if (json) {
            sertrace_buf_append(b, i ? ", {\"pattern\": " : "{\"pattern\": ", i ? 14 : 12);
            sertrace_fmt_json_string(b, p->text.data + e->off, e->len);
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
            sertrace_buf_append(b, p->text.data + e->off, e->len);
            sertrace_buf_append(b, "\n", 1);
        }
    }
    if (json)
        sertrace_buf_append(b, "]", 1);
    free(rows);
    return sertrace_buf_error(b);
}
