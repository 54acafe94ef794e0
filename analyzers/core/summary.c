/* summary.c -- the summary's model: aggregates of sertrace trees.
 *
 * Per node exit (the hot path) this does a few array updates: kind and
 * type counters, a comparison with the smallest of the top-N heap (a
 * candidate is copied with its short ancestry, no string is built), and a
 * comparison with the oversize threshold.  Strings are rendered only for
 * flags (rare), for each dump's top-N when the dump closes, and for the
 * few entries that enter the overall top-N.  Only the output format asked
 * for is rendered, numbers are formatted without printf, and the per-dump
 * state is recycled, so the cost per dump stays small next to decoding it.
 * The output itself is the writers' (summary-text.c, summary-json.c,
 * over the model in summary-internal.h): this file decides what is kept
 * and when a piece is rendered, a writer how it reads.
 * See summary.h for the memory bound and analyzers/README.md for the JSON
 * schema.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "losses.h"
#include "paths.h"
#include "summary-internal.h"

#define OVERALL_TYPES_MAX 100000u
#define NOTES_MAX 64 /* notes kept per dump (the rest counted) */
#define NOTE_STRING_MAX                                                                            \
    1000 /* bytes kept of a note's key and value (the                                              \
          * runtime's SERTRACE_STRING_MAX) */
#define KEEP_NOTES                                                                                 \
    (256u << 10) /* a recycled dump keeps its notes buffer                                         \
                  * up to this size */

#define HOT_INLINE static inline __attribute__((always_inline))

/* ---- small helpers ---------------------------------------------------- */

int summary_flush(sertrace_summary *s, bool force)
{
    /* a section that failed half-way is never written: the error sticks
     * in s->failed, as the buffer's own would be forgotten by the clear */
    if (sertrace_buf_error(&s->out) < 0) {
        s->failed = -1;
        sertrace_buf_clear(&s->out);
        return -1;
    }
    if (s->out.len && (force || s->out.len >= FLUSH_AT)) {
        if (s->write(s->write_ctx, s->out.data, s->out.len) < 0)
            s->failed = -1;
        sertrace_buf_clear(&s->out);
    }
    return s->failed;
}

int sertrace_summary_write_file(void *ctx, const char *s, size_t n)
{
    return fwrite(s, 1, n, (FILE *)ctx) == n ? 0 : -1;
}

int sertrace_summary_flush_file(void *ctx)
{
    return fflush((FILE *)ctx) == 0 ? 0 : -1;
}

static char *buf_steal(sertrace_buf *b)
{
    char *r = malloc(b->len + 1);
    if (r) {
        if (b->len)
            memcpy(r, b->data, b->len);
        r[b->len] = '\0';
    }
    sertrace_buf_clear(b);
    return r;
}

struct tag_text summary_tag_texts[256];

static void init_tag_texts(void)
{
    if (summary_tag_texts[0].len)
        return;
    for (unsigned t = 0; t < 256; t++) {
        char tmp[8];
        const char *tt = sertrace_tag_text((uint8_t)t, tmp);
        size_t n = strlen(tt);
        if (n > 7)
            n = 7;
        memcpy(summary_tag_texts[t].text, tt, n);
        summary_tag_texts[t].text[n] = '\0';
        summary_tag_texts[t].len = (uint8_t)n;
        summary_tag_texts[t].meaning = "other";
        summary_tag_texts[t].meaning_len = 5;
    }
#define MEANING_(name, value, text, m_, class_)                                                    \
    summary_tag_texts[value].meaning = m_;                                                         \
    summary_tag_texts[value].meaning_len = (uint8_t)(sizeof(m_) - 1);
    SERTRACE_TAGS(MEANING_)
#undef MEANING_
}

int summary_cached_name(sertrace_summary *s, const sertrace_dump_state *d, uint32_t type,
                        const char **out, size_t *out_len)
{
    if (type >= s->esc_cap) {
        size_t cap = s->esc_cap ? s->esc_cap : 64;
        while (cap <= type)
            cap *= 2;
        uint32_t *o = realloc(s->esc_off, cap * sizeof *o);
        if (!o)
            return -1;
        s->esc_off = o;
        uint32_t *l = realloc(s->esc_len, cap * sizeof *l);
        if (!l)
            return -1;
        s->esc_len = l;
        uint64_t *g = realloc(s->esc_gen, cap * sizeof *g);
        if (!g)
            return -1;
        memset(g + s->esc_cap, 0, (cap - s->esc_cap) * sizeof *g);
        s->esc_gen = g;
        s->esc_cap = cap;
    }
    if (s->esc_gen[type] != s->gen) {
        size_t len;
        const char *name = sertrace_core_type_name(d, type, &len);
        if (!name) {
            name = "?";
            len = 1;
        }
        size_t start = s->esc.len;
        int rc = s->o.json ? sertrace_fmt_json_string(&s->esc, name, len)
                           : sertrace_fmt_escape(&s->esc, name, len);
        if (rc < 0 || s->esc.len > UINT32_MAX)
            return -1;
        size_t skip = s->o.json ? 1 : 0; /* the quotes */
        s->esc_off[type] = (uint32_t)(start + skip);
        s->esc_len[type] = (uint32_t)(s->esc.len - start - 2 * skip);
        s->esc_gen[type] = s->gen;
    }
    *out = s->esc.data + s->esc_off[type];
    *out_len = s->esc_len[type];
    return 0;
}

/* "TAG name" of a node, escaped for text or as a JSON string. */
static int put_label(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     uint8_t tag, uint32_t type, bool json)
{
    char tmp[8];
    size_t len;
    if (s->cache_on && json == s->o.json) {
        const char *esc;
        if (summary_cached_name(s, d, type, &esc, &len) < 0)
            return summary_fail(b);
        /* tag texts are plain ASCII: no escaping needed */
        const struct tag_text *tx = &summary_tag_texts[tag];
        if (ensure(b, tx->len + len + 3) < 0)
            return -1;
        char *p = b->data + b->len;
        if (json)
            *p++ = '"';
        memcpy(p, tx->text, tx->len);
        p += tx->len;
        *p++ = ' ';
        memcpy(p, esc, len);
        p += len;
        if (json)
            *p++ = '"';
        *p = '\0';
        b->len = (size_t)(p - b->data);
        return 0;
    }
    const char *tt = sertrace_tag_text(tag, tmp);
    const char *name = sertrace_core_type_name(d, type, &len);
    if (!name) {
        name = "?";
        len = 1;
    }
    if (!json) {
        put_str(b, tt);
        buf_lit(b, " ");
        sertrace_fmt_escape(b, name, len);
        return sertrace_buf_error(b);
    }
    sertrace_buf *lab = &s->sz;
    sertrace_buf_clear(lab);
    put_str(lab, tt);
    buf_lit(lab, " ");
    app(lab, name, len);
    if (sertrace_buf_error(lab) < 0)
        return summary_fail(b);
    return sertrace_fmt_json_string(b, lab->data, lab->len);
}

/* The path of the open node at `depth` (ds->chain: the levels not yet
 * rendered are rendered now).  0 or -1. */
static int chain_path(dump_sum *ds, const sertrace_dump_state *d, uint32_t depth)
{
    if (depth > ds->chain_cap) {
        uint32_t cap = ds->chain_cap ? ds->chain_cap : 64;
        while (cap < depth)
            cap *= 2;
        uint32_t *e = realloc(ds->chain_end, (size_t)cap * sizeof *e);
        if (e == NULL)
            return -1;
        ds->chain_end = e;
        ds->chain_cap = cap;
    }
    if (ds->chain_depth >= depth)
        return 0; /* rendered, and still open (a new node cuts it at enter) */
    ds->chain.len = ds->chain_depth ? ds->chain_end[ds->chain_depth - 1] : 0;
    for (uint32_t k = ds->chain_depth + 1; k <= depth; k++) {
        if (sertrace_path_segment_append(&ds->chain, d, d->stack, k - 1, false) < 0 ||
            ds->chain.len > UINT32_MAX)
            return -1;
        ds->chain_end[k - 1] = (uint32_t)ds->chain.len;
    }
    ds->chain_depth = depth;
    return 0;
}

/* Ancestry kept for a node: the root, then up to ANC_MAX-1 closest
 * ancestors, ending with the node itself (stack[depth-1]). */
static void capture(const sertrace_dump_state *d, const sertrace_node *n, top_raw *r)
{
    r->bytes = n->bytes;
    r->self = n->self;
    r->depth = n->depth;
    r->type = n->type;
    r->flags = n->flags;
    r->tag = n->tag;
    uint32_t first_close = n->depth > ANC_MAX ? n->depth - (ANC_MAX - 2) : 2;
    uint8_t k = 0;
    /* the root, then the closest ancestors: O(ANC_MAX), not O(depth) */
    for (uint32_t i = 1; i <= n->depth; i = i == 1 ? first_close : i + 1) {
        const sertrace_node *a = &d->stack[i - 1];
        r->anc_tag[k] = a->tag;
        r->anc_type[k] = a->type;
        r->anc_depth[k] = i;
        k++;
    }
    r->anc_n = k;
    r->addr = n->addr;
    r->start = n->enter_pos;
    r->refs = 0;
    r->retained = 0;
    r->has_retained = false;
    r->path_len = 0;
    dump_sum *ds = d->user;
    /* a dump with labels (schema v5): every node has a path */
    if (d->labels > 0 && ds != NULL && n->depth > 0 && chain_path(ds, d, n->depth) == 0) {
        sertrace_buf p = ds->chain; /* a view: its first chain_end[depth - 1] bytes */
        p.len = ds->chain_end[n->depth - 1];
        {
            if (p.len <= PATH_KEPT) {
                memcpy(r->path, p.data, p.len);
                r->path_len = (uint16_t)p.len;
            } else { /* root segment … innermost end (cut at a UTF-8 start) */
                size_t head = 0, tail = p.len - (PATH_KEPT - 80 - 3);
                while (head < 80 && p.data[head] != '.' && p.data[head] != '[')
                    head++;
                while (tail < p.len && ((unsigned char)p.data[tail] & 0xC0) == 0x80)
                    tail++;
                memcpy(r->path, p.data, head);
                memcpy(r->path + head, "\xe2\x80\xa6", 3);
                memcpy(r->path + head + 3, p.data + tail, p.len - tail);
                r->path_len = (uint16_t)(head + 3 + p.len - tail);
            }
        }
    }
}

int summary_ancestry(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     const top_raw *r, bool json)
{
    if (s->cache_on && json == s->o.json) {
        /* names from the per-dump cache: one ensure for the whole line */
        const char *esc[ANC_MAX];
        size_t len[ANC_MAX], need = 8;
        for (uint8_t k = 0; k < r->anc_n; k++) {
            if (summary_cached_name(s, d, r->anc_type[k], &esc[k], &len[k]) < 0)
                return -1;
            need += len[k] + summary_tag_texts[r->anc_tag[k]].len + 16;
        }
        /* A later lookup may have grown s->esc (realloc): take every
         * name's place again now that all are cached (no growth). */
        for (uint8_t k = 0; k < r->anc_n; k++)
            if (summary_cached_name(s, d, r->anc_type[k], &esc[k], &len[k]) < 0)
                return -1;
        if (ensure(b, need) < 0)
            return -1;
        char *p = b->data + b->len;
        if (json)
            *p++ = '[';
        for (uint8_t k = 0; k < r->anc_n; k++) {
            if (k > 0)
                p = json ? p_lit(p, ", ") : p_lit(p, " \xe2\x80\xba ");
            if (k > 0 && r->anc_depth[k] > r->anc_depth[k - 1] + 1)
                p = json ? p_lit(p, "\"\xe2\x80\xa6\", ") : p_lit(p, "\xe2\x80\xa6 \xe2\x80\xba ");
            const struct tag_text *tx = &summary_tag_texts[r->anc_tag[k]];
            if (json)
                *p++ = '"';
            p = p_mem(p, tx->text, tx->len);
            *p++ = ' ';
            p = p_mem(p, esc[k], len[k]);
            if (json)
                *p++ = '"';
        }
        if (json)
            *p++ = ']';
        put_end(b, p);
        return 0;
    }
    if (json)
        buf_lit(b, "[");
    for (uint8_t k = 0; k < r->anc_n && !b->err; k++) {
        if (k > 0 && json)
            buf_lit(b, ", ");
        else if (k > 0)
            buf_lit(b, " \xe2\x80\xba ");
        if (k > 0 && r->anc_depth[k] > r->anc_depth[k - 1] + 1) {
            if (json)
                buf_lit(b, "\"\xe2\x80\xa6\", ");
            else
                buf_lit(b, "\xe2\x80\xa6 \xe2\x80\xba ");
        }
        put_label(s, b, d, r->anc_tag[k], r->anc_type[k], json);
    }
    if (json)
        buf_lit(b, "]");
    return sertrace_buf_error(b);
}

static void free_rendered(rendered *r)
{
    free(r->str);
    r->str = NULL;
    free(r->msg);
    free(r->path);
    r->msg = r->path = NULL;
    r->kind = NULL;
}

static char *memdup_z(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        if (n)
            memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

/* Min-heaps on .bytes, for both entry types. */
#define HEAP_FUNCS(T, name)                                                                        \
    static __attribute__((unused)) void name##_down(T *h, unsigned n, unsigned i)                  \
    {                                                                                              \
        for (;;) {                                                                                 \
            unsigned l = 2 * i + 1, m = i;                                                         \
            if (l < n && h[l].bytes < h[m].bytes)                                                  \
                m = l;                                                                             \
            if (l + 1 < n && h[l + 1].bytes < h[m].bytes)                                          \
                m = l + 1;                                                                         \
            if (m == i)                                                                            \
                return;                                                                            \
            T t = h[i];                                                                            \
            h[i] = h[m];                                                                           \
            h[m] = t;                                                                              \
            i = m;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    static __attribute__((unused)) void name##_up(T *h, unsigned i)                                \
    {                                                                                              \
        while (i > 0) {                                                                            \
            unsigned p = (i - 1) / 2;                                                              \
            if (h[p].bytes <= h[i].bytes)                                                          \
                return;                                                                            \
            T t = h[i];                                                                            \
            h[i] = h[p];                                                                           \
            h[p] = t;                                                                              \
            i = p;                                                                                 \
        }                                                                                          \
    }
HEAP_FUNCS(rendered, rheap)

/* The top-N's heap (ds->top_ix, min on the entries' bytes): sift entry i
 * down. */
static void topheap_down(const top_raw *top, uint32_t *ix, unsigned n, unsigned i)
{
    uint32_t x = ix[i];
    uint64_t b = top[x].bytes;
    for (;;) {
        unsigned l = 2 * i + 1, m = l;
        if (l >= n)
            break;
        if (l + 1 < n && top[ix[l + 1]].bytes < top[ix[l]].bytes)
            m = l + 1;
        if (top[ix[m]].bytes >= b)
            break;
        ix[i] = ix[m];
        i = m;
    }
    ix[i] = x;
}

static bool heap_wants(uint64_t min, unsigned n, unsigned cap, uint64_t bytes)
{
    return cap > 0 && (n < cap || bytes > min);
}

static int cmp_raw_desc(const void *a, const void *b)
{
    const top_raw *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static int cmp_rendered_desc(const void *a, const void *b)
{
    const rendered *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* ---- visitor ------------------------------------------------------------ */

/* Insertion sort: the per-dump arrays are short (top-N, a dump's types),
 * and glibc's qsort allocates. */
#define INSERTION_SORT(T, a, n, cmp)                                                               \
    for (size_t i_ = 1; i_ < (n); i_++) {                                                          \
        T x_ = (a)[i_];                                                                            \
        size_t j_ = i_;                                                                            \
        while (j_ > 0 && cmp(&(a)[j_ - 1], &x_) > 0) {                                             \
            (a)[j_] = (a)[j_ - 1];                                                                 \
            j_--;                                                                                  \
        }                                                                                          \
        (a)[j_] = x_;                                                                              \
    }

static int v_dump_open(void *ctx, sertrace_dump_state *d)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = s->free_list;
    if (ds) {
        s->free_list = ds->next_free;
        ds->next_free = NULL;
        shared_reuse(ds);
    } else {
        ds = calloc(1, sizeof *ds);
        if (!ds)
            return -1;
        ds->top = calloc(s->o.top ? s->o.top : 1, sizeof *ds->top);
        ds->top_ix = calloc(s->o.top ? s->o.top : 1, sizeof *ds->top_ix);
        if (!ds->top || !ds->top_ix) {
            free(ds->top);
            free(ds->top_ix);
            free(ds);
            return -1;
        }
    }
    if (s->o.paths) {
        if (ds->paths == NULL && (ds->paths = sertrace_pathstats_create()) == NULL)
            return -1;
        sertrace_pathstats_reset(ds->paths);
    }
    d->user = ds;
    return 0;
}

/* A node opens (before its paths' count): the reduce's arguments it
 * may start, its path level's cut, its object. */
HOT_INLINE int node_opened(sertrace_dump_state *d, dump_sum *ds, sertrace_node *n)
{
    /* the outermost reduce-arguments node open (and the state of an
     * object rebuilt by a reduce function, tag R: numpy keeps its data
     * there below protocol 5), owned by its parent's type; an instance's
     * state (tag O: its __dict__) stays its attributes' own */
    if (ds->args_depth == 0 && n->depth >= 2 && n->label_kind == SERTRACE_LABEL_ROLE &&
        (n->label == SERTRACE_ROLE_ARGS ||
         (n->label == SERTRACE_ROLE_STATE && d->stack[n->depth - 2].tag == SERTRACE_TAG_REDUCE)))
        ds->args_depth = n->depth;
    if (ds->chain_depth >= n->depth) /* a new node at this depth: its path is not rendered */
        ds->chain_depth = n->depth - 1;
    return shared_object_enter(ds, n);
}

static int v_node_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    if (node_opened(d, ds, n) < 0)
        return -1;
    return s->o.paths ? sertrace_pathstats_enter(ds->paths, d, n) : 0;
}

node_stat *summary_type_stat_grow(dump_sum *ds, uint32_t type)
{
    if (type >= ds->types_cap) {
        uint32_t cap = ds->types_cap ? ds->types_cap : 16;
        while (cap <= type)
            cap *= 2;
        node_stat *t = realloc(ds->types, (size_t)cap * sizeof *t);
        if (!t)
            return NULL;
        memset(t + ds->types_cap, 0, (cap - ds->types_cap) * sizeof *t);
        ds->types = t;
        ds->types_cap = cap;
    }
    if (type >= ds->types_max)
        ds->types_max = type + 1;
    return &ds->types[type];
}

/* Owned bytes (node_stat.owned) of a closing node. */
HOT_INLINE int charge_owned(sertrace_dump_state *d, dump_sum *ds, const sertrace_node *n,
                            uint32_t row, uint64_t *to_row)
{
    *to_row = 0;
    if (ds->args_depth != 0 && n->depth > ds->args_depth)
        return 0; /* inside a reduce's arguments: its parent's type owns it */
    if (ds->args_depth != 0 && n->depth == ds->args_depth) {
        ds->args_depth = 0;
        uint32_t owner = n->depth >= 2 ? d->stack[n->depth - 2].type : 0;
        if (owner == 0)
            return 0;
        node_stat *t = summary_type_stat(ds, owner);
        if (!t)
            return -1;
        t->owned += n->bytes;
        return 0;
    }
    if (row) {
        ds->types[row].owned += n->self; /* its row: grown by the caller */
        *to_row = n->self;
    }
    return 0;
}

/* Room for one more flag (the array grows as flags come: most dumps have
 * none, and max_flags of them up front cost a dump's set-up). */
static int flag_room(dump_sum *ds)
{
    rendered *f = sertrace_grow(ds->flags, &ds->flags_cap, sizeof *f, (size_t)ds->nflags + 1, 16);
    if (!f)
        return -1;
    ds->flags = f;
    return 0;
}

static int add_flag(sertrace_summary *s, sertrace_dump_state *d, const sertrace_node *n,
                    const char *kind, const char *message, size_t message_len, const char *path,
                    size_t path_len)
{
    dump_sum *ds = d->user;
    if (ds->nflags >= s->o.max_flags) {
        ds->flags_dropped++;
        return 0;
    }
    top_raw r;
    capture(d, n, &r);
    sertrace_buf_clear(&s->tmp);
    if (s->w->entry(s, &s->tmp, d, &r, kind, message, message_len, path, path_len) < 0)
        return -1;
    rendered f = {.bytes = n->bytes, .str = buf_steal(&s->tmp)};
    if (!f.str)
        return -1;
    f.prunable = s->o.oversize_percent > 0 && strcmp(kind, "oversized") == 0;
    f.kind = kind;
    f.raw = r;
    if ((message && !(f.msg = memdup_z(message, message_len))) ||
        (path && !(f.path = memdup_z(path, path_len)))) {
        free_rendered(&f);
        return -1;
    }
    f.msg_len = message ? message_len : 0;
    f.path_len = path ? path_len : 0;
    if (flag_room(ds) < 0) {
        free_rendered(&f);
        return -1;
    }
    ds->flags[ds->nflags++] = f;
    return 0;
}

/* Percentage threshold: drop candidates that can no longer qualify. */
static void prune_percent(sertrace_summary *s, dump_sum *ds, uint64_t whole)
{
    double thr = s->o.oversize_percent / 100.0 * (double)whole;
    unsigned k = 0;
    for (unsigned i = 0; i < ds->nflags; i++) {
        if (ds->flags[i].prunable && (double)ds->flags[i].bytes < thr)
            free_rendered(&ds->flags[i]);
        else
            ds->flags[k++] = ds->flags[i];
    }
    ds->nflags = k;
}

/* Top-N, for a node that passed ds->top_gate: entries are appended
 * until N are kept, then made a min-heap once; a dump with at most N
 * nodes (the common small dump) does no heap work at all.  Out of line:
 * in a large dump few nodes pass the gate. */
static __attribute__((noinline)) void top_keep(sertrace_summary *s, sertrace_dump_state *d,
                                               dump_sum *ds, const sertrace_node *n)
{
    if (ds->ntop < s->o.top) {
        ds->top_ix[ds->ntop] = ds->ntop;
        capture(d, n, &ds->top[ds->ntop++]);
        if (ds->ntop == s->o.top)
            for (unsigned i = ds->ntop / 2; i-- > 0;)
                topheap_down(ds->top, ds->top_ix, ds->ntop, i);
        else
            return; /* the gate stays 0 */
    } else if (s->o.top && n->bytes > ds->top[ds->top_ix[0]].bytes) {
        capture(d, n, &ds->top[ds->top_ix[0]]);
        topheap_down(ds->top, ds->top_ix, ds->ntop, 0);
    }
    uint64_t min = s->o.top ? ds->top[ds->top_ix[0]].bytes : UINT64_MAX;
    ds->top_gate = min < UINT64_MAX ? min + 1 : UINT64_MAX;
}

/* The innermost open node of a dump that died: its chain is the stack. */
static __attribute__((noinline)) int died_at(sertrace_summary *s, sertrace_dump_state *d,
                                             dump_sum *ds, const sertrace_node *n)
{
    top_raw r;
    capture(d, n, &r);
    sertrace_buf *b = &s->tmp;
    sertrace_buf_clear(b);
    if (summary_ancestry(s, b, d, &r, false) < 0 || !(ds->died_text = buf_steal(b)))
        return -1;
    if (summary_ancestry(s, b, d, &r, true) < 0 || !(ds->died_json = buf_steal(b)))
        return -1;
    return 0;
}

/* A node closes (after its paths' count): its rows, its object, the
 * top-N and the flags. */
HOT_INLINE int node_closed(sertrace_summary *s, sertrace_dump_state *d, dump_sum *ds,
                           sertrace_node *n)
{
    node_stat *k = &ds->kinds[n->tag];
    if (!k->count)
        ds->touched[ds->ntouched++] = n->tag;
    k->count++;
    k->bytes += n->bytes;
    k->self += n->self;
    /* a memo reference counts on its own type's row here, and moves to the
     * row of the object it points to at dump close (summary-shared.c) */
    bool ref = sertrace_tagclass_of(n->tag) == SERTRACE_TAGCLASS_REF;
    if (!ref)
        shared_object_exit(ds, n);
    if (n->type) {
        node_stat *t = summary_type_stat(ds, n->type);
        if (!t)
            return -1;
        t->count++;
        t->bytes += n->bytes;
        t->self += n->self;
        t->refs += ref;
    }
    uint64_t owned_row;
    if (charge_owned(d, ds, n, n->type, &owned_row) < 0)
        return -1;
    if (ref && shared_count_ref(ds, n, owned_row) < 0)
        return -1;
    if (n->depth == 1) {
        ds->root_bytes += n->bytes;
        ds->root_exact = sertrace_node_bytes_exact(n);
    }
    if (n->bytes >= ds->top_gate)
        top_keep(s, d, ds, n);
    if (!s->flagging) {
        if ((n->flags & SERTRACE_NODE_UNFINISHED) && !ds->died_text)
            return died_at(s, d, ds, n);
        return 0;
    }
    if (s->o.oversize_bytes && n->bytes >= s->o.oversize_bytes) {
        if (add_flag(s, d, n, "oversized", NULL, 0, NULL, 0) < 0)
            return -1;
    } else if (s->o.oversize_percent > 0 && n->bytes > 0 &&
               (double)n->bytes >= s->o.oversize_percent / 100.0 * (double)d->max_pos) {
        if (ds->nflags >= s->o.max_flags)
            prune_percent(s, ds, d->max_pos);
        if (add_flag(s, d, n, "oversized", NULL, 0, NULL, 0) < 0)
            return -1;
    }
    if ((n->flags & SERTRACE_NODE_UNFINISHED) && !ds->died_text)
        return died_at(s, d, ds, n);
    return 0;
}

static int v_node_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    if (s->o.paths && sertrace_pathstats_exit(ds->paths, n) < 0)
        return -1;
    return node_closed(s, d, ds, n);
}

/* A node with nothing nested in it (core.h node_leaf): v_node_enter then
 * v_node_exit, in one call (both calls when paths are counted). */
static int v_node_leaf(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    if (s->o.paths) {
        if (v_node_enter(ctx, d, n) < 0)
            return -1;
        return v_node_exit(ctx, d, n);
    }
    if (node_opened(d, ds, n) < 0)
        return -1;
    return node_closed(s, d, ds, n);
}

static int v_error(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                   const char *msg, size_t msg_len, const char *path, size_t path_len)
{
    (void)tag;
    (void)type;
    sertrace_summary *s = ctx;
    if (n)
        return add_flag(s, d, n, "unserializable", msg, msg_len, path, path_len);
    /* no node open: a node-less flag */
    dump_sum *ds = d->user;
    if (ds->nflags >= s->o.max_flags) {
        ds->flags_dropped++;
        return 0;
    }
    sertrace_buf *b = &s->tmp;
    sertrace_buf_clear(b);
    int rc = s->w->nodeless_error(b, msg, msg_len, path, path_len);
    rendered f = {.bytes = 0};
    if (rc < 0 || !(f.str = buf_steal(b)))
        return -1;
    if (flag_room(ds) < 0) {
        free_rendered(&f);
        return -1;
    }
    ds->flags[ds->nflags++] = f;
    return 0;
}

/* A note (sertrace_note(), e.g. from a __reduce__) on node `n`, or on the
 * dump when `n` is NULL: rendered at once with the node's tag, type, depth
 * and ancestry (the chain is on the stack now, not at dump close).  At
 * most NOTES_MAX per dump, key and value cut to NOTE_STRING_MAX bytes, so
 * a dump's notes stay under ~1 MiB whatever the trace holds. */
static int v_note(void *ctx, sertrace_dump_state *d, sertrace_node *n, const char *key,
                  size_t key_len, const char *value, size_t value_len)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    if (!ds || (!s->o.json && !s->o.per_dump))
        return 0; /* text without per-dump sections prints no notes */
    if (ds->nnotes >= NOTES_MAX) {
        ds->notes_dropped++;
        return 0;
    }
    if (key_len > NOTE_STRING_MAX)
        key_len = NOTE_STRING_MAX;
    if (value_len > NOTE_STRING_MAX)
        value_len = NOTE_STRING_MAX;
    top_raw r;
    if (n)
        capture(d, n, &r);
    sertrace_buf *b = &ds->notes;
    int rc = s->w->note(s, b, d, n, &r, ds->nnotes == 0, key, key_len, value, value_len);
    if (rc < 0)
        return -1;
    ds->nnotes++;
    return 0;
}

/* ---- dump section ------------------------------------------------------ */

static int cmp_type_row(const void *a, const void *b)
{
    const type_row *x = a, *y = b;
    if (x->st.self != y->st.self)
        return x->st.self < y->st.self ? 1 : -1;
    return x->type < y->type ? -1 : x->type > y->type;
}

/* Hash of a type name, 8 bytes at a time (runs once per type per dump). */
static uint64_t name_hash(const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, name + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, name + i, len - i);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

static int add_overall_type(sertrace_summary *s, const char *name, size_t len, const node_stat *st)
{
    if (!name) {
        name = "?";
        len = 1;
    }
    if (s->ntypes >= s->types_buckets) {
        size_t nb = s->types_buckets ? s->types_buckets * 2 : 256;
        type_total **nbk = calloc(nb, sizeof *nbk);
        if (!nbk)
            return -1;
        for (size_t i = 0; i < s->types_buckets; i++) {
            type_total *t = s->types[i];
            while (t) {
                type_total *next = t->next;
                uint64_t th = name_hash(t->name, t->len);
                t->next = nbk[th & (nb - 1)];
                nbk[th & (nb - 1)] = t;
                t = next;
            }
        }
        free(s->types);
        s->types = nbk;
        s->types_buckets = nb;
    }
    type_total **p = &s->types[name_hash(name, len) & (s->types_buckets - 1)];
    for (type_total *t = *p; t; t = t->next)
        if (t->len == len && memcmp(t->name, name, len) == 0) {
            t->st.count += st->count;
            t->st.bytes += st->bytes;
            t->st.self += st->self;
            t->st.refs += st->refs;
            t->st.owned += st->owned;
            return 0;
        }
    if (s->ntypes >= OVERALL_TYPES_MAX) {
        s->types_overflow++;
        return 0;
    }
    type_total *t = malloc(sizeof *t + len + 1);
    if (!t)
        return -1;
    t->st = *st;
    t->len = (uint32_t)len;
    memcpy(t->name, name, len);
    t->name[len] = '\0';
    t->next = *p;
    *p = t;
    s->ntypes++;
    return 0;
}

/* Reset a per-dump state and put it on the free list. */
static void recycle_dump_sum(sertrace_summary *s, dump_sum *ds)
{
    for (unsigned i = 0; i < ds->nflags; i++)
        free_rendered(&ds->flags[i]);
    for (unsigned i = 0; i < ds->ntouched; i++)
        memset(&ds->kinds[ds->touched[i]], 0, sizeof ds->kinds[0]);
    if (ds->types_max)
        memset(ds->types, 0, ds->types_max * sizeof *ds->types);
    free(ds->died_text);
    free(ds->died_json);
    if (ds->notes.cap > KEEP_NOTES)
        sertrace_buf_free(&ds->notes);
    else
        sertrace_buf_clear(&ds->notes);
    ds->nnotes = 0;
    ds->notes_dropped = 0;
    ds->ntouched = 0;
    ds->types_max = 0;
    ds->ntop = 0;
    ds->top_gate = 0;
    ds->nflags = 0;
    ds->flags_dropped = 0;
    ds->died_text = ds->died_json = NULL;
    ds->root_bytes = 0;
    ds->root_exact = false;
    ds->args_depth = 0;
    ds->chain_depth = 0;
    if (ds->chain.cap > KEEP_NOTES) {
        sertrace_buf_free(&ds->chain);
        free(ds->chain_end);
        ds->chain_end = NULL;
        ds->chain_cap = 0;
    } else {
        sertrace_buf_clear(&ds->chain);
    }
    shared_reset(ds);
    ds->next_free = s->free_list;
    s->free_list = ds;
}

static void free_dump_sum(dump_sum *ds)
{
    for (unsigned i = 0; i < ds->nflags; i++)
        free_rendered(&ds->flags[i]);
    free(ds->top);
    free(ds->top_ix);
    free(ds->flags);
    free(ds->types);
    free(ds->died_text);
    free(ds->died_json);
    sertrace_buf_free(&ds->notes);
    sertrace_pathstats_destroy(ds->paths);
    shared_free(ds);
    sertrace_buf_free(&ds->chain);
    free(ds->chain_end);
    free(ds);
}

/* Offer a dump's top entries to the overall top-N (rendered only when
 * they get in). */
static int merge_top(sertrace_summary *s, const sertrace_dump_state *d, const dump_sum *ds)
{
    for (unsigned i = 0; i < ds->ntop; i++) {
        const top_raw *r = &ds->top[i];
        if (!heap_wants(s->ntop ? s->top[0].bytes : 0, s->ntop, s->o.top, r->bytes))
            continue;
        sertrace_buf_clear(&s->tmp);
        if (s->w->entry(s, &s->tmp, d, r, NULL, NULL, 0, NULL, 0) < 0)
            return -1;
        rendered e = {.bytes = r->bytes, .str = buf_steal(&s->tmp)};
        if (!e.str)
            return -1;
        if (s->ntop < s->o.top) {
            s->top[s->ntop] = e;
            rheap_up(s->top, s->ntop++);
        } else {
            free_rendered(&s->top[0]);
            s->top[0] = e;
            rheap_down(s->top, s->ntop, 0);
        }
    }
    return 0;
}

/* The producer dropped the dump (sertrace inspect feeds it again): what
 * it kept goes back to the free list, nothing is merged or written. */
static int v_dump_abort(void *ctx, sertrace_dump_state *d)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    d->user = NULL;
    if (ds)
        recycle_dump_sum(s, ds);
    s->lower = false;
    return 0;
}

/* The kept entries moved to their heap's order (top[k] = top[ix[k]], in
 * place, cycle by cycle): the order a heap of the entries themselves
 * left them in, which the sorts below keep for equal keys. */
static void top_in_heap_order(dump_sum *ds)
{
    top_raw *top = ds->top;
    uint32_t *ix = ds->top_ix;
    for (unsigned k = 0; k < ds->ntop; k++) {
        if (ix[k] == k)
            continue;
        top_raw t = top[k];
        unsigned j = k;
        for (;;) {
            unsigned src = ix[j];
            ix[j] = j;
            if (src == k) {
                top[j] = t;
                break;
            }
            top[j] = top[src];
            j = src;
        }
    }
}

static int v_dump_close(void *ctx, sertrace_dump_state *d)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    d->user = NULL;
    if (!ds)
        return 0;
    int rc = 0;
    top_in_heap_order(ds);
    /* how many memo references point to each kept object (they all come
     * after its first writing, so only now are they all known) */
    for (unsigned i = 0; i < ds->ntop; i++)
        if (sertrace_tagclass_of(ds->top[i].tag) != SERTRACE_TAGCLASS_REF)
            ds->top[i].refs = shared_refs_of(ds, ds->top[i].addr);
    if (shared_resolve(ds) < 0 || shared_retained(ds, d) < 0) {
        rc = -1;
        goto end;
    }
    uint64_t whole = 0; /* sum of self bytes = root bytes when exact */
    for (unsigned i = 0; i < ds->ntouched; i++)
        whole += ds->kinds[ds->touched[i]].self;
    s->lower = (d->flags & SERTRACE_DUMPF_LOWER_BOUNDS) != 0;
    if (s->lower) {
        /* dump_end said its sizes fall short: every kept node says "≥" */
        s->lower_dumps++;
        ds->root_exact = false;
        for (unsigned i = 0; i < ds->ntop; i++)
            ds->top[i].flags |= SERTRACE_NODE_LOWER_BOUND;
        for (unsigned i = 0; i < ds->nflags; i++) {
            rendered *f = &ds->flags[i];
            if (!f->kind)
                continue;
            f->raw.flags |= SERTRACE_NODE_LOWER_BOUND;
            sertrace_buf_clear(&s->tmp);
            if (s->w->entry(s, &s->tmp, d, &f->raw, f->kind, f->msg, f->msg_len, f->path,
                            f->path_len) < 0) {
                rc = -1;
                goto end;
            }
            char *str = buf_steal(&s->tmp);
            if (!str) {
                rc = -1;
                goto end;
            }
            free(f->str);
            f->str = str;
        }
    }
    /* percentage flags: final filter against the whole dump */
    if (s->o.oversize_percent > 0) {
        uint64_t all = d->max_pos;
        if ((d->flags & SERTRACE_DUMPF_END) && d->payload_bytes > all)
            all = d->payload_bytes;
        prune_percent(s, ds, all);
    }
    /* type rows sorted by self */
    unsigned nrows = 0;
    if (ds->types_max > s->rows_cap) {
        type_row *r = realloc(s->rows, ds->types_max * sizeof *r);
        if (!r) {
            rc = -1;
            goto end;
        }
        s->rows = r;
        s->rows_cap = ds->types_max;
    }
    for (uint32_t t = 1; t < ds->types_max; t++)
        if (ds->types[t].count)
            s->rows[nrows++] = (type_row){t, ds->types[t]};
    if (nrows > 64)
        qsort(s->rows, nrows, sizeof *s->rows, cmp_type_row);
    else
        INSERTION_SORT(type_row, s->rows, nrows, cmp_type_row)
#define CMP_U8_(a, b) ((int)*(a) - (int)*(b))
    INSERTION_SORT(uint8_t, ds->touched, ds->ntouched, CMP_U8_)
#undef CMP_U8_
    /* The dump's top entries, largest first, as indices (the entries are
     * ~100 B each; only printed sections need the order). */
    if (s->o.json || s->o.per_dump) {
        if (ds->ntop > 64)
            qsort(ds->top, ds->ntop, sizeof *ds->top, cmp_raw_desc);
        for (unsigned i = 0; i < ds->ntop; i++)
            s->order[i] = i;
        if (ds->ntop <= 64) {
#define CMP_TOP_(a, b) cmp_raw_desc(&ds->top[*(a)], &ds->top[*(b)])
            INSERTION_SORT(unsigned, s->order, ds->ntop, CMP_TOP_)
#undef CMP_TOP_
        }
    }
    s->gen++;
    sertrace_buf_clear(&s->esc);
    s->cache_on = true;
    rc = s->w->dump(s, d, ds, s->rows, nrows, whole);
    s->input_off += (d->flags & SERTRACE_DUMPF_END) ? d->payload_bytes : d->max_pos;
    if (rc == 0 && s->o.paths) {
        if (s->paths == NULL && (s->paths = sertrace_pathstats_create()) == NULL)
            rc = -1;
        else
            rc = sertrace_pathstats_merge(s->paths, ds->paths);
    }
    /* fold into the overall totals */
    s->dumps++;
    if (sertrace_dump_complete(d))
        s->complete++;
    if (d->flags & SERTRACE_DUMPF_UNFINISHED)
        s->unfinished++;
    if (d->flags & SERTRACE_DUMPF_END_LOST)
        s->end_lost++;
    if (d->flags & SERTRACE_DUMPF_END)
        s->payload_bytes += d->payload_bytes;
    s->nodes += d->nodes;
    s->oob_bytes += d->oob_bytes;
    for (unsigned i = 0; i < ds->ntouched; i++) {
        unsigned t = ds->touched[i];
        s->kinds[t].count += ds->kinds[t].count;
        s->kinds[t].bytes += ds->kinds[t].bytes;
        s->kinds[t].self += ds->kinds[t].self;
        s->kinds_used[t >> 6] |= 1ull << (t & 63);
    }
    for (unsigned i = 0; i < nrows && rc == 0; i++) {
        size_t len;
        const char *name = sertrace_core_type_name(d, s->rows[i].type, &len);
        rc = add_overall_type(s, name, len, &s->rows[i].st);
    }
    if (rc == 0)
        rc = merge_top(s, d, ds);
    s->cache_on = false;
end:
    s->lower = false;
    recycle_dump_sum(s, ds);
    if (rc == 0)
        summary_flush(s, false);
    return rc < 0 || s->failed ? -1 : 0;
}

#define RESET_KEEP_BUF (256u << 10) /* a buffer kept by reset */

/* ---- public ----------------------------------------------------------- */

sertrace_summary *sertrace_summary_create(const sertrace_summary_opts *opts,
                                          sertrace_summary_write_fn write, void *write_ctx)
{
    sertrace_summary *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = *opts;
    s->flagging = s->o.oversize_bytes != 0 || s->o.oversize_percent > 0;
    s->write = write;
    s->write_ctx = write_ctx;
    s->w = s->o.json ? &summary_json_writer : &summary_text_writer;
    s->tcache = (time_cache)TIME_CACHE_INIT;
    init_tag_texts();
    s->top = calloc(s->o.top ? s->o.top : 1, sizeof *s->top);
    s->order = calloc(s->o.top ? s->o.top : 1, sizeof *s->order);
    if (!s->top || !s->order) {
        free(s->top);
        free(s->order);
        free(s);
        return NULL;
    }
    return s;
}

void sertrace_summary_visitor(sertrace_summary *s, sertrace_core_visitor *v)
{
    memset(v, 0, sizeof *v);
    v->ctx = s;
    v->dump_open = v_dump_open;
    v->node_exit = v_node_exit;
    v->node_enter = v_node_enter;
    v->node_leaf = v_node_leaf;
    v->note = v_note;
    v->error = v_error;
    v->dump_close = v_dump_close;
    v->dump_abort = v_dump_abort;
}

static int cmp_total(const void *a, const void *b)
{
    const type_total *x = *(const type_total *const *)a;
    const type_total *y = *(const type_total *const *)b;
    if (x->st.self != y->st.self)
        return x->st.self < y->st.self ? 1 : -1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int sertrace_summary_finish(sertrace_summary *s, const sertrace_core_stats *stats)
{
    uint64_t whole = 0;
    for (unsigned t = 0; t < 256; t++)
        whole += s->kinds[t].self;
    type_total **rows = calloc(s->ntypes ? s->ntypes : 1, sizeof *rows);
    if (!rows)
        return -1;
    size_t nrows = 0;
    for (size_t i = 0; i < s->types_buckets; i++)
        for (type_total *t = s->types[i]; t; t = t->next)
            rows[nrows++] = t;
    qsort(rows, nrows, sizeof *rows, cmp_total);
    qsort(s->top, s->ntop, sizeof *s->top, cmp_rendered_desc);
    uint64_t discarded = stats ? stats->discarded_events : 0;
    uint64_t lost = stats ? stats->lost_batches : 0;
    int rc = s->w->totals(s, rows, nrows, whole, discarded, lost);
    free(rows);
    s->lower = false;
    if (rc == 0)
        summary_flush(s, true);
    return rc < 0 || s->failed ? -1 : 0;
}

/* Frees every type row, leaving the buckets' heads as they were. */
static void free_type_totals(sertrace_summary *s)
{
    for (size_t i = 0; i < s->types_buckets; i++) {
        type_total *t = s->types[i];
        while (t) {
            type_total *next = t->next;
            free(t);
            t = next;
        }
    }
}

void sertrace_summary_destroy(sertrace_summary *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->ntop; i++)
        free_rendered(&s->top[i]);
    free(s->top);
    free(s->order);
    sertrace_pathstats_destroy(s->paths);
    while (s->free_list) {
        dump_sum *next = s->free_list->next_free;
        free_dump_sum(s->free_list);
        s->free_list = next;
    }
    free_type_totals(s);
    free(s->types);
    free(s->rows);
    free(s->esc_off);
    free(s->esc_len);
    free(s->esc_gen);
    sertrace_buf_free(&s->esc);
    sertrace_buf_free(&s->out);
    sertrace_buf_free(&s->tmp);
    sertrace_buf_free(&s->sz);
    sertrace_buf_free(&s->filter);
    free(s);
}

/* Back to the state sertrace_summary_create left, keeping what it
 * allocated: the recycled per-dump states (free list), the type buckets,
 * the top arrays, the buffers (trimmed when a big summary grew them). */
void sertrace_summary_reset(sertrace_summary *s)
{
    for (unsigned i = 0; i < s->ntop; i++)
        free_rendered(&s->top[i]);
    s->ntop = 0;
    if (s->ntypes) {
        free_type_totals(s);
        memset(s->types, 0, s->types_buckets * sizeof *s->types);
        s->ntypes = 0;
    }
    s->types_overflow = 0;
    uint8_t used[256];
    for (unsigned i = 0, n = summary_kinds_used(s, used); i < n; i++)
        memset(&s->kinds[used[i]], 0, sizeof s->kinds[0]);
    memset(s->kinds_used, 0, sizeof s->kinds_used);
    if (s->paths)
        sertrace_pathstats_reset(s->paths);
    sertrace_buf *bufs[] = {&s->out, &s->tmp, &s->sz, &s->filter};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (bufs[i]->cap > RESET_KEEP_BUF)
            sertrace_buf_free(bufs[i]);
        else
            sertrace_buf_clear(bufs[i]);
    }
    s->json_started = s->legend_done = s->any_dump = false;
    s->input_off = 0;
    s->failed = 0;
    s->dumps = s->complete = s->unfinished = s->payload_bytes = s->nodes = 0;
    s->oob_bytes = s->end_lost = s->lower_dumps = 0;
    s->lower = false;
    s->cache_on = false;
    s->tcache = (time_cache)TIME_CACHE_INIT;
}

int sertrace_summary_set_filter(sertrace_summary *s, const char *json, size_t len)
{
    sertrace_buf_clear(&s->filter);
    return sertrace_buf_append(&s->filter, json, len);
}
