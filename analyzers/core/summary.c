/* summary.c -- aggregates of sertrace trees, text and JSON.
 *
 * Per node exit (the hot path) this does a few array updates: kind and
 * type counters, a comparison with the smallest of the top-N heap (a
 * candidate is copied with its short ancestry, no string is built), and a
 * comparison with the oversize threshold.  Strings are rendered only for
 * flags (rare), for each dump's top-N when the dump closes, and for the
 * few entries that enter the overall top-N.  Only the output format asked
 * for is rendered, numbers are formatted without printf, and the per-dump
 * state is recycled, so the cost per dump stays small next to decoding it.
 * See summary.h for the memory bound and analyzers/README.md for the JSON
 * schema.
 */
#include "summary.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"

#include "outbuf.h"

#define ANC_MAX 8          /* ancestry kept per top/flag entry */
#define TEXT_TYPES_MAX 10  /* type rows per dump in the text output */
#define FLUSH_AT (64u << 10)
#define OVERALL_TYPES_MAX 100000u
#define NOTES_MAX 64       /* notes kept per dump (the rest counted) */
#define NOTE_STRING_MAX 1000 /* bytes kept of a note's key and value (the
                              * runtime's SERTRACE_STRING_MAX) */
#define KEEP_NOTES (256u << 10) /* a recycled dump keeps its notes buffer
                                 * up to this size */
#define LABEL_MIN 16       /* text tables: label column width */
#define LABEL_MAX 40       /* ... widened up to this for long type names */

typedef struct stat3 {
    uint64_t count, bytes, self;
} stat3;

/* A node as kept for the top-N: no strings, names resolved at render. */
typedef struct top_raw {
    uint64_t bytes, self;
    uint32_t depth, type;
    uint16_t flags;
    uint8_t tag;
    uint8_t anc_n; /* entries in anc_* (the node itself last) */
    uint8_t anc_tag[ANC_MAX];
    uint32_t anc_type[ANC_MAX];
    uint32_t anc_depth[ANC_MAX];
} top_raw;

/* A rendered entry (overall top, flag) in the output's format. */
typedef struct rendered {
    uint64_t bytes;
    bool prunable; /* an oversize-percent candidate */
    char *str;
    /* A node's flag (add_flag): what it was rendered from, so that a dump
     * whose sizes turn out, at its dump_end, to be lower bounds
     * (SERTRACE_DUMPF_LOWER_BOUNDS) renders it again with "≥". */
    const char *kind; /* NULL: nothing to render again */
    top_raw raw;
    char *msg, *path;
    size_t msg_len, path_len;
} rendered;

typedef struct dump_sum {
    stat3 kinds[256];
    uint8_t touched[256]; /* kinds in use, to clear them fast */
    unsigned ntouched;
    stat3 *types; /* by per-dump type index */
    uint32_t types_cap, types_max;
    top_raw *top; /* min-heap on bytes, opts.top entries */
    unsigned ntop;
    rendered *flags;
    unsigned nflags;
    uint64_t flags_dropped;
    sertrace_buf notes; /* kept notes, rendered in the output's format
                         * (JSON: comma-separated objects; text: lines) */
    unsigned nnotes;
    uint64_t notes_dropped;
    char *died_text; /* chain of an unfinished dump */
    char *died_json;
    uint64_t root_bytes;
    bool root_exact;
    struct dump_sum *next_free;
} dump_sum;

typedef struct type_total {
    struct type_total *next;
    stat3 st;
    uint32_t len;
    char name[];
} type_total;

typedef struct type_row {
    uint32_t type;
    stat3 st;
} type_row;

struct sertrace_summary {
    sertrace_summary_opts o;
    sertrace_summary_write_fn write;
    void *write_ctx;
    sertrace_buf out;
    sertrace_buf tmp;
    sertrace_buf sz;
    sertrace_buf filter; /* JSON "filter" member (empty: null) */
    bool json_started;
    bool legend_done; /* text: the tables' legend was printed */
    bool any_dump;
    int failed;
    dump_sum *free_list; /* recycled per-dump states */
    type_row *rows;      /* scratch for a dump's type rows */
    size_t rows_cap;
    /* overall */
    uint64_t dumps, complete, unfinished, payload_bytes, nodes;
    uint64_t end_lost;
    uint64_t lower_dumps; /* dumps whose sizes are lower bounds */
    bool lower;           /* the dump (or totals) being written: sizes are lower bounds */
    stat3 kinds[256];
    type_total **types;
    size_t types_buckets, ntypes;
    uint64_t types_overflow;
    rendered *top; /* min-heap on bytes */
    unsigned ntop;
    unsigned *order; /* a dump's top entries, sorted (opts.top slots) */
    /* Escaped type names of the dump being printed, by type index, in the
     * output's format (each name is escaped once per dump, not once per
     * row or ancestry label).  Valid while cache_on. */
    sertrace_buf esc;
    uint32_t *esc_off, *esc_len;
    uint64_t *esc_gen;
    size_t esc_cap;
    uint64_t gen;
    bool cache_on;
    time_cache tcache;
};

/* ---- small helpers ---------------------------------------------------- */

static int put_u64_field(sertrace_buf *b, const char *name, uint64_t v);

static int flush_out(sertrace_summary *s, bool force)
{
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




static int put_spaces(sertrace_buf *b, size_t n)
{
    static const char sp[] = "                                ";
    while (n > 0) {
        size_t k = n < sizeof sp - 1 ? n : sizeof sp - 1;
        if (app(b, sp, k) < 0)
            return -1;
        n -= k;
    }
    return 0;
}

/* `s` (n bytes, `cols` display columns) padded to `width` columns. */
static int put_padded(sertrace_buf *b, const char *s, size_t n, size_t cols,
                      size_t width, bool right)
{
    size_t pad = cols < width ? width - cols : 0;
    if (right && put_spaces(b, pad) < 0)
        return -1;
    if (app(b, s, n) < 0)
        return -1;
    return right ? 0 : put_spaces(b, pad);
}

static size_t utf8_cols(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* Label column wide enough for `s` (one space after it), up to LABEL_MAX;
 * a longer name just pushes its own row's numbers right. */
static size_t label_width(size_t width, const char *s, size_t n)
{
    size_t want = utf8_cols(s, n) + 1;
    if (want > LABEL_MAX)
        want = LABEL_MAX;
    return want > width ? want : width;
}

/* part/whole as a JSON number with 4 decimals, at p (room for 26 bytes). */
static char *p_ratio(char *p, uint64_t part, uint64_t whole)
{
    uint64_t q = whole ? (uint64_t)((double)part * 10000.0 / (double)whole + 0.5) : 0;
    p = p_u64(p, q / 10000);
    *p++ = '.';
    uint32_t f = (uint32_t)(q % 10000);
    for (int i = 3; i >= 0; i--, f /= 10u)
        p[i] = (char)('0' + f % 10u);
    return p + 4;
}

/* Tag text and meaning with their lengths, by tag value ("K<n>" and
 * "other" for values without a tag), filled once. */
static struct tag_text {
    char text[8];
    const char *meaning;
    uint8_t len;
    uint8_t meaning_len;
} tag_texts[256];

static void init_tag_texts(void)
{
    if (tag_texts[0].len)
        return;
    for (unsigned t = 0; t < 256; t++) {
        char tmp[8];
        const char *tt = sertrace_tag_text((uint8_t)t, tmp);
        size_t n = strlen(tt);
        if (n > 7)
            n = 7;
        memcpy(tag_texts[t].text, tt, n);
        tag_texts[t].text[n] = '\0';
        tag_texts[t].len = (uint8_t)n;
        tag_texts[t].meaning = "other";
        tag_texts[t].meaning_len = 5;
    }
#define MEANING_(name, value, text, m_)                                        \
    tag_texts[value].meaning = m_;                                             \
    tag_texts[value].meaning_len = (uint8_t)(sizeof(m_) - 1);
    SERTRACE_TAGS(MEANING_)
#undef MEANING_
}


/* "≥ " prefix when inexact, then the size. */
static int put_size(sertrace_buf *b, uint64_t bytes, bool exact, bool exact_fmt)
{
    if (!exact && buf_lit(b, "\xe2\x89\xa5 ") < 0)
        return -1;
    return sertrace_fmt_size(b, bytes, exact_fmt);
}

/* "TAG name" of a node, escaped for text or as a JSON string. */
/* The escaped name of `type` (text: sertrace_fmt_escape; JSON: the inside
 * of sertrace_fmt_json_string), from the per-dump cache. */
static int cached_name(sertrace_summary *s, const sertrace_dump_state *d,
                       uint32_t type, const char **out, size_t *out_len)
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
static int put_label(sertrace_summary *s, sertrace_buf *b,
                     const sertrace_dump_state *d, uint8_t tag, uint32_t type,
                     bool json)
{
    char tmp[8];
    size_t len;
    if (s->cache_on && json == s->o.json) {
        const char *esc;
        if (cached_name(s, d, type, &esc, &len) < 0)
            return -1;
        /* tag texts are plain ASCII: no escaping needed */
        const struct tag_text *tx = &tag_texts[tag];
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
    if (!json)
        return put_str(b, tt) || buf_lit(b, " ") ||
                       sertrace_fmt_escape(b, name, len)
                   ? -1
                   : 0;
    sertrace_buf *lab = &s->sz;
    sertrace_buf_clear(lab);
    if (put_str(lab, tt) || buf_lit(lab, " ") || sertrace_buf_append(lab, name, len))
        return -1;
    return sertrace_fmt_json_string(b, lab->data, lab->len);
}

/* Ancestry kept for a node: the root, then up to ANC_MAX-1 closest
 * ancestors, ending with the node itself (stack[depth-1]). */
static void capture(const sertrace_dump_state *d, const sertrace_node *n,
                    top_raw *r)
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
}

/* Text: "a › b › … › c"; JSON: ["a", "b", "…", "c"]. */
static int put_ancestry(sertrace_summary *s, sertrace_buf *b,
                        const sertrace_dump_state *d, const top_raw *r,
                        bool json)
{
    if (s->cache_on && json == s->o.json) {
        /* names from the per-dump cache: one ensure for the whole line */
        const char *esc[ANC_MAX];
        size_t len[ANC_MAX], need = 8;
        for (uint8_t k = 0; k < r->anc_n; k++) {
            if (cached_name(s, d, r->anc_type[k], &esc[k], &len[k]) < 0)
                return -1;
            need += len[k] + tag_texts[r->anc_tag[k]].len + 16;
        }
        /* A later lookup may have grown s->esc (realloc): take every
         * name's place again now that all are cached (no growth). */
        for (uint8_t k = 0; k < r->anc_n; k++)
            if (cached_name(s, d, r->anc_type[k], &esc[k], &len[k]) < 0)
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
                p = json ? p_lit(p, "\"\xe2\x80\xa6\", ")
                         : p_lit(p, "\xe2\x80\xa6 \xe2\x80\xba ");
            const struct tag_text *tx = &tag_texts[r->anc_tag[k]];
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
    int rc = json ? buf_lit(b, "[") : 0;
    for (uint8_t k = 0; k < r->anc_n && rc == 0; k++) {
        if (k > 0)
            rc = json ? buf_lit(b, ", ") : buf_lit(b, " \xe2\x80\xba ");
        if (rc == 0 && k > 0 && r->anc_depth[k] > r->anc_depth[k - 1] + 1)
            rc = json ? buf_lit(b, "\"\xe2\x80\xa6\", ")
                      : buf_lit(b, "\xe2\x80\xa6 \xe2\x80\xba ");
        if (rc == 0)
            rc = put_label(s, b, d, r->anc_tag[k], r->anc_type[k], json);
    }
    if (rc == 0 && json)
        rc = buf_lit(b, "]");
    return rc;
}

static bool raw_exact(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_bytes_exact(&probe);
}

/* SERTRACE_BOUND_* of a kept node's bytes. */
static int raw_bound(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_bound(&probe);
}

/* JSON: ", \"bound\": \"...\"" of an inexact node ("" when exact). */
static const char *bound_json(int bound)
{
    return bound == SERTRACE_BOUND_UPPER     ? ", \"bound\": \"upper\""
           : bound == SERTRACE_BOUND_UNKNOWN ? ", \"bound\": \"unknown\""
           : bound == SERTRACE_BOUND_LOWER   ? ", \"bound\": \"lower\""
                                             : "";
}

static bool raw_self_exact(const top_raw *r)
{
    sertrace_node probe = {0};
    probe.flags = r->flags;
    return sertrace_node_self_exact(&probe);
}

/* One node entry (top or flag) in the output format.  `kind` NULL for a
 * top entry, else "oversized"/"unserializable". */
static int render(sertrace_summary *s, sertrace_buf *b,
                  const sertrace_dump_state *d, const top_raw *r,
                  const char *kind, const char *message, size_t message_len,
                  const char *path, size_t path_len)
{
    bool exact = raw_exact(r);
    int bound = raw_bound(r);
    int rc = 0;
    if (!s->o.json) {
        if (kind) {
            rc = buf_lit(b, "!! ");
            for (const char *k = kind; *k && rc == 0; k++) {
                char up = (char)(*k >= 'a' && *k <= 'z' ? *k - 32 : *k);
                rc = sertrace_buf_append(b, &up, 1);
            }
            if (rc == 0)
                rc = buf_lit(b, " ");
        }
        if (rc == 0 && bound == SERTRACE_BOUND_UPPER)
            rc = buf_lit(b, "\xe2\x89\xa4 "); /* "≤ ": an upper bound */
        else if (rc == 0 && bound == SERTRACE_BOUND_UNKNOWN)
            rc = buf_lit(b, "? ");
        if (rc == 0)
            rc = put_size(b, r->bytes, bound != SERTRACE_BOUND_LOWER,
                          s->o.exact);
        if (rc == 0 && !kind) {
            rc = buf_lit(b, " (self ");
            /* self of a node whose exit may be another's: no bound */
            if (rc == 0 && (bound == SERTRACE_BOUND_UPPER ||
                            bound == SERTRACE_BOUND_UNKNOWN))
                rc = buf_lit(b, "? ");
            if (rc == 0)
                rc = put_size(b, r->self,
                              raw_self_exact(r) || bound == SERTRACE_BOUND_UPPER ||
                                  bound == SERTRACE_BOUND_UNKNOWN,
                              s->o.exact);
            if (rc == 0)
                rc = buf_lit(b, ")");
        }
        if (rc == 0)
            rc = buf_lit(b, "  ");
        if (rc == 0)
            rc = put_ancestry(s, b, d, r, false);
        if (rc == 0 && message) {
            rc = buf_lit(b, ": ");
            if (rc == 0)
                rc = sertrace_fmt_escape(b, message, message_len);
        }
        if (rc == 0 && path && path_len) {
            rc = buf_lit(b, " at ");
            if (rc == 0)
                rc = sertrace_fmt_escape(b, path, path_len);
        }
        return rc;
    }
    char tmp[8];
    size_t name_len;
    const char *name = sertrace_core_type_name(d, r->type, &name_len);
    if (!kind && s->cache_on) {
        /* a top entry: one ensure, written through a pointer */
        const char *esc = NULL;
        size_t esc_len = 0;
        if (name && cached_name(s, d, r->type, &esc, &esc_len) < 0)
            return -1;
        const struct tag_text *tx = &tag_texts[r->tag];
        if (ensure(b, 160 + 3 * 20 + tx->len + esc_len) < 0)
            return -1;
        char *p = b->data + b->len;
        p = p_lit(p, "{\"bytes\": ");
        p = p_u64(p, r->bytes);
        p = p_lit(p, ", \"self\": ");
        p = p_u64(p, r->self);
        if (exact) {
            p = p_lit(p, ", \"exact\": true, \"depth\": ");
        } else {
            const char *bj = bound_json(bound);
            p = p_lit(p, ", \"exact\": false");
            p = p_mem(p, bj, strlen(bj));
            p = p_lit(p, ", \"depth\": ");
        }
        p = p_u64(p, r->depth);
        p = p_lit(p, ", \"tag\": \"");
        p = p_mem(p, tx->text, tx->len);
        p = p_lit(p, "\", \"type\": ");
        if (name) {
            *p++ = '"';
            p = p_mem(p, esc, esc_len);
            *p++ = '"';
        } else {
            p = p_lit(p, "null");
        }
        p = p_lit(p, ", \"ancestry\": ");
        put_end(b, p);
        rc = put_ancestry(s, b, d, r, true);
        return rc == 0 ? buf_lit(b, "}") : rc;
    }
    rc = buf_lit(b, "{");
    if (rc == 0 && kind) {
        rc = buf_lit(b, "\"kind\": \"");
        if (rc == 0)
            rc = put_str(b, kind);
        if (rc == 0)
            rc = buf_lit(b, "\", \"path\": ");
        if (rc == 0) {
            if (path && path_len) {
                rc = sertrace_fmt_json_string(b, path, path_len);
            } else {
                sertrace_buf p = SERTRACE_BUF_INIT;
                bool json = s->o.json;
                s->o.json = false;
                rc = put_ancestry(s, &p, d, r, false);
                s->o.json = json;
                if (rc == 0)
                    rc = sertrace_fmt_json_string(b, p.data ? p.data : "", p.len);
                sertrace_buf_free(&p);
            }
        }
        if (rc == 0)
            rc = buf_lit(b, ", \"message\": ");
        if (rc == 0)
            rc = message ? sertrace_fmt_json_string(b, message, message_len)
                         : sertrace_fmt_json_string(b, kind, strlen(kind));
        if (rc == 0)
            rc = buf_lit(b, ", ");
    }
    if (rc == 0)
        rc = buf_lit(b, "\"bytes\": ");
    if (rc == 0)
        rc = put_u64(b, r->bytes);
    if (rc == 0)
        rc = buf_lit(b, ", \"self\": ");
    if (rc == 0)
        rc = put_u64(b, r->self);
    if (rc == 0)
        rc = exact ? buf_lit(b, ", \"exact\": true, \"depth\": ")
                   : sertrace_buf_appendf(b, ", \"exact\": false%s, \"depth\": ",
                                          bound_json(bound));
    if (rc == 0)
        rc = put_u64(b, r->depth);
    if (rc == 0)
        rc = buf_lit(b, ", \"tag\": \"");
    if (rc == 0)
        rc = put_str(b, sertrace_tag_text(r->tag, tmp));
    if (rc == 0)
        rc = buf_lit(b, "\", \"type\": ");
    if (rc == 0)
        rc = name ? sertrace_fmt_json_string(b, name, name_len)
                  : buf_lit(b, "null");
    if (rc == 0)
        rc = buf_lit(b, ", \"ancestry\": ");
    if (rc == 0)
        rc = put_ancestry(s, b, d, r, true);
    if (rc == 0)
        rc = buf_lit(b, "}");
    return rc;
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
#define HEAP_FUNCS(T, name)                                                    \
    static __attribute__((unused)) void name##_down(T *h, unsigned n,        \
                                                    unsigned i)                \
    {                                                                          \
        for (;;) {                                                             \
            unsigned l = 2 * i + 1, m = i;                                     \
            if (l < n && h[l].bytes < h[m].bytes)                              \
                m = l;                                                         \
            if (l + 1 < n && h[l + 1].bytes < h[m].bytes)                      \
                m = l + 1;                                                     \
            if (m == i)                                                        \
                return;                                                        \
            T t = h[i];                                                        \
            h[i] = h[m];                                                       \
            h[m] = t;                                                          \
            i = m;                                                             \
        }                                                                      \
    }                                                                          \
    static __attribute__((unused)) void name##_up(T *h, unsigned i)            \
    {                                                                          \
        while (i > 0) {                                                        \
            unsigned p = (i - 1) / 2;                                          \
            if (h[p].bytes <= h[i].bytes)                                      \
                return;                                                        \
            T t = h[i];                                                        \
            h[i] = h[p];                                                       \
            h[p] = t;                                                          \
            i = p;                                                             \
        }                                                                      \
    }
HEAP_FUNCS(top_raw, rawheap)
HEAP_FUNCS(rendered, rheap)

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
#define INSERTION_SORT(T, a, n, cmp)                                           \
    for (size_t i_ = 1; i_ < (n); i_++) {                                      \
        T x_ = (a)[i_];                                                        \
        size_t j_ = i_;                                                        \
        while (j_ > 0 && cmp(&(a)[j_ - 1], &x_) > 0) {                         \
            (a)[j_] = (a)[j_ - 1];                                             \
            j_--;                                                              \
        }                                                                      \
        (a)[j_] = x_;                                                          \
    }

static int v_dump_open(void *ctx, sertrace_dump_state *d)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = s->free_list;
    if (ds) {
        s->free_list = ds->next_free;
        ds->next_free = NULL;
    } else {
        ds = calloc(1, sizeof *ds);
        if (!ds)
            return -1;
        ds->top = calloc(s->o.top ? s->o.top : 1, sizeof *ds->top);
        ds->flags = calloc(s->o.max_flags ? s->o.max_flags : 1, sizeof *ds->flags);
        if (!ds->top || !ds->flags) {
            free(ds->top);
            free(ds->flags);
            free(ds);
            return -1;
        }
    }
    d->user = ds;
    return 0;
}

static int add_flag(sertrace_summary *s, sertrace_dump_state *d,
                    const sertrace_node *n, const char *kind,
                    const char *message, size_t message_len, const char *path,
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
    if (render(s, &s->tmp, d, &r, kind, message, message_len, path, path_len) < 0)
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

static int v_node_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    stat3 *k = &ds->kinds[n->tag];
    if (!k->count)
        ds->touched[ds->ntouched++] = n->tag;
    k->count++;
    k->bytes += n->bytes;
    k->self += n->self;
    if (n->type) {
        if (n->type >= ds->types_cap) {
            uint32_t cap = ds->types_cap ? ds->types_cap : 16;
            while (cap <= n->type)
                cap *= 2;
            stat3 *t = realloc(ds->types, (size_t)cap * sizeof *t);
            if (!t)
                return -1;
            memset(t + ds->types_cap, 0, (cap - ds->types_cap) * sizeof *t);
            ds->types = t;
            ds->types_cap = cap;
        }
        if (n->type >= ds->types_max)
            ds->types_max = n->type + 1;
        stat3 *t = &ds->types[n->type];
        t->count++;
        t->bytes += n->bytes;
        t->self += n->self;
    }
    if (n->depth == 1) {
        ds->root_bytes += n->bytes;
        ds->root_exact = sertrace_node_bytes_exact(n);
    }
    /* Top-N: entries are appended until N are kept, then made a min-heap
     * once; a dump with at most N nodes (the common small dump) does no
     * heap work at all. */
    if (ds->ntop < s->o.top) {
        capture(d, n, &ds->top[ds->ntop++]);
        if (ds->ntop == s->o.top)
            for (unsigned i = ds->ntop / 2; i-- > 0;)
                rawheap_down(ds->top, ds->ntop, i);
    } else if (s->o.top && n->bytes > ds->top[0].bytes) {
        capture(d, n, &ds->top[0]);
        rawheap_down(ds->top, ds->ntop, 0);
    }
    if (s->o.oversize_bytes && n->bytes >= s->o.oversize_bytes) {
        if (add_flag(s, d, n, "oversized", NULL, 0, NULL, 0) < 0)
            return -1;
    } else if (s->o.oversize_percent > 0 && n->bytes > 0 &&
               (double)n->bytes >=
                   s->o.oversize_percent / 100.0 * (double)d->max_pos) {
        if (ds->nflags >= s->o.max_flags)
            prune_percent(s, ds, d->max_pos);
        if (add_flag(s, d, n, "oversized", NULL, 0, NULL, 0) < 0)
            return -1;
    }
    if ((n->flags & SERTRACE_NODE_UNFINISHED) && !ds->died_text) {
        /* innermost open node: its chain is the stack */
        top_raw r;
        capture(d, n, &r);
        sertrace_buf *b = &s->tmp;
        sertrace_buf_clear(b);
        if (put_ancestry(s, b, d, &r, false) < 0 || !(ds->died_text = buf_steal(b)))
            return -1;
        if (put_ancestry(s, b, d, &r, true) < 0 || !(ds->died_json = buf_steal(b)))
            return -1;
    }
    return 0;
}

static int v_error(void *ctx, sertrace_dump_state *d, sertrace_node *n,
                   uint8_t tag, uint32_t type, const char *msg, size_t msg_len,
                   const char *path, size_t path_len)
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
    int rc;
    if (s->o.json) {
        rc = buf_lit(b, "{\"kind\": \"unserializable\", \"path\": ");
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, path, path_len);
        if (rc == 0)
            rc = buf_lit(b, ", \"message\": ");
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, msg, msg_len);
        if (rc == 0)
            rc = buf_lit(b, ", \"bytes\": null}");
    } else {
        rc = buf_lit(b, "!! UNSERIALIZABLE: ");
        if (rc == 0)
            rc = sertrace_fmt_escape(b, msg, msg_len);
        if (rc == 0 && path_len) {
            rc = buf_lit(b, " at ");
            if (rc == 0)
                rc = sertrace_fmt_escape(b, path, path_len);
        }
    }
    rendered f = {.bytes = 0};
    if (rc < 0 || !(f.str = buf_steal(b)))
        return -1;
    ds->flags[ds->nflags++] = f;
    return 0;
}

/* A note (sertrace_note(), e.g. from a __reduce__) on node `n`, or on the
 * dump when `n` is NULL: rendered at once with the node's tag, type, depth
 * and ancestry (the chain is on the stack now, not at dump close).  At
 * most NOTES_MAX per dump, key and value cut to NOTE_STRING_MAX bytes, so
 * a dump's notes stay under ~1 MiB whatever the trace holds. */
static int v_note(void *ctx, sertrace_dump_state *d, sertrace_node *n,
                  const char *key, size_t key_len, const char *value,
                  size_t value_len)
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
    size_t old = b->len;
    int rc;
    if (s->o.json) {
        rc = ds->nnotes ? buf_lit(b, ", {\"key\": ") : buf_lit(b, "{\"key\": ");
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, key, key_len);
        if (rc == 0)
            rc = buf_lit(b, ", \"value\": ");
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, value, value_len);
        if (rc == 0 && !n)
            rc = buf_lit(b, ", \"tag\": null, \"type\": null, \"depth\": 0, "
                            "\"ancestry\": []}");
        if (rc == 0 && n) {
            char tmp[8];
            size_t name_len;
            const char *name = sertrace_core_type_name(d, n->type, &name_len);
            rc = buf_lit(b, ", \"tag\": \"");
            if (rc == 0)
                rc = put_str(b, sertrace_tag_text(n->tag, tmp));
            if (rc == 0)
                rc = buf_lit(b, "\", \"type\": ");
            if (rc == 0)
                rc = name ? sertrace_fmt_json_string(b, name, name_len)
                          : buf_lit(b, "null");
            if (rc == 0)
                rc = put_u64_field(b, ", \"depth\": ", n->depth);
            if (rc == 0)
                rc = buf_lit(b, ", \"ancestry\": ");
            if (rc == 0)
                rc = put_ancestry(s, b, d, &r, true);
            if (rc == 0)
                rc = buf_lit(b, "}");
        }
    } else {
        rc = buf_lit(b, "    @ ");
        if (rc == 0)
            rc = sertrace_fmt_escape(b, key, key_len);
        if (rc == 0)
            rc = buf_lit(b, " = ");
        if (rc == 0)
            rc = sertrace_fmt_escape(b, value, value_len);
        if (rc == 0)
            rc = n ? buf_lit(b, "  (on ") : buf_lit(b, "  (on the dump)\n");
        if (rc == 0 && n) {
            rc = put_ancestry(s, b, d, &r, false);
            if (rc == 0)
                rc = buf_lit(b, ")\n");
        }
    }
    if (rc < 0) {
        b->len = old;
        if (b->data)
            b->data[old] = '\0';
        return -1;
    }
    ds->nnotes++;
    return 0;
}

/* ---- dump section ------------------------------------------------------ */


static const char *status_text(const sertrace_dump_state *d)
{
    if (!(d->flags & SERTRACE_DUMPF_END))
        return "unknown";
    return (d->flags & SERTRACE_DUMPF_STATUS_ERROR) ? "error" : "ok";
}

/* One line describing what the dump lost, or nothing. */
static int put_losses(sertrace_buf *b, const sertrace_dump_state *d)
{
    int rc = 0;
    const char *sep = "";
#define LOSS_(cond, ...)                                                       \
    if (rc == 0 && (cond)) {                                                   \
        rc = put_str(b, sep);                                                  \
        if (rc == 0)                                                           \
            rc = sertrace_buf_appendf(b, __VA_ARGS__);                         \
        sep = "; ";                                                            \
    }
    LOSS_((d->flags & SERTRACE_DUMPF_UNFINISHED) && !d->discarded,
          "unfinished (no dump_end: the process stopped inside it)")
    LOSS_((d->flags & SERTRACE_DUMPF_UNFINISHED) && d->discarded,
          "unfinished (no dump_end: the process stopped inside it, or its "
          "end was among the discarded events)")
    LOSS_(d->flags & SERTRACE_DUMPF_END_LOST,
          "end lost (no dump_end: events were discarded, and a later dump of "
          "its thread began after its last event and ended)")
    LOSS_(!(d->flags & SERTRACE_DUMPF_BEGIN), "dump_begin missing")
    LOSS_(d->lost_batches, "%llu records events lost",
          (unsigned long long)d->lost_batches)
    LOSS_(d->discarded, "%llu events discarded by the tracer while it was live",
          (unsigned long long)d->discarded)
    LOSS_(d->malformed, "%llu malformed or unknown records batches",
          (unsigned long long)d->malformed)
    LOSS_(d->orphan_exits, "%llu exits without an enter",
          (unsigned long long)d->orphan_exits)
    LOSS_(d->lost_exits, "%llu nodes closed without their exit",
          (unsigned long long)d->lost_exits)
    LOSS_(d->lost_enters, "%llu ancestors without their enter",
          (unsigned long long)d->lost_enters)
    LOSS_(d->skipped_deep, "%llu enters skipped (over 64 levels below the "
          "open chain)", (unsigned long long)d->skipped_deep)
    LOSS_(d->nodes == 0 && !(d->flags & SERTRACE_DUMPF_UNFINISHED),
          "no node recorded")
#undef LOSS_
    return rc;
}

static int cmp_type_row(const void *a, const void *b)
{
    const type_row *x = a, *y = b;
    if (x->st.self != y->st.self)
        return x->st.self < y->st.self ? 1 : -1;
    return x->type < y->type ? -1 : x->type > y->type;
}

/* "  by WHAT ... count incl. self share"; `width` is the label column's
 * (16, or the longest type name shown, up to LABEL_MAX). */
static int put_table_header(sertrace_buf *b, const char *what, size_t width)
{
    int rc = buf_lit(b, "  by ");
    if (rc == 0)
        rc = put_padded(b, what, strlen(what), strlen(what), width - 1, false);
    if (rc == 0)
        rc = buf_lit(b, "    count        incl.         self   share\n");
    return rc;
}

/* Once per output, before the first table. */
static int put_legend(sertrace_summary *s, sertrace_buf *b)
{
    if (s->legend_done)
        return 0;
    s->legend_done = true;
    return buf_lit(b, "  (incl. = bytes including children; self = own bytes; "
                      "share = self / payload)\n");
}

/* One row: "    LABEL            COUNT        INCL.         SELF  SHARE  TAIL",
 * the label padded to `width` columns.
 * The fixed part is written through a pointer after one ensure(): this
 * runs for every row of every dump's tables. */
static int put_row(sertrace_summary *s, sertrace_buf *b, const char *label,
                   size_t ll, size_t width, const stat3 *st, uint64_t whole,
                   const char *tail, size_t tail_len, bool escape_tail)
{
    char cnt[24], pct[32], tot[32], self[32];
    size_t ci = sizeof cnt, pi = sizeof pct;
    uint64_t v = st->count;
    do {
        cnt[--ci] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    uint64_t p10 = whole ? (uint64_t)((double)st->self * 1000.0 / (double)whole) : 0;
    pct[--pi] = '%';
    pct[--pi] = (char)('0' + p10 % 10);
    pct[--pi] = '.';
    p10 /= 10;
    do {
        pct[--pi] = (char)('0' + p10 % 10);
        p10 /= 10;
    } while (p10);
    sertrace_buf tb = {tot, 0, sizeof tot}, sb = {self, 0, sizeof self};
    if (put_size(&tb, st->bytes, !s->lower, s->o.exact) < 0 ||
        put_size(&sb, st->self, !s->lower, s->o.exact) < 0)
        return -1;
    size_t cols = utf8_cols(label, ll);
    if (ensure(b, 4 + ll + width + 1 + 24 + 1 + 2 * 35 + 32 + 2 + (escape_tail ? 0 : tail_len) +
                      1) < 0)
        return -1;
    char *p = b->data + b->len;
    p = pad_left_to(p, "    ", 4, 4);
    memcpy(p, label, ll);
    p += ll;
    if (cols < width) {
        memset(p, ' ', width - cols);
        p += width - cols;
    }
    *p++ = ' ';
    p = pad_left_to(p, cnt + ci, sizeof cnt - ci, 8);
    *p++ = ' ';
    /* "≥ " is 3 bytes for 1 column: pad by columns */
    size_t szw = s->lower ? 14 : 12;
    p = pad_left_to(p, tb.data, tb.len, szw);
    *p++ = ' ';
    p = pad_left_to(p, sb.data, sb.len, szw);
    *p++ = ' ';
    p = pad_left_to(p, pct + pi, sizeof pct - pi, 7);
    if (tail_len) {
        *p++ = ' ';
        *p++ = ' ';
    }
    if (!escape_tail) {
        memcpy(p, tail, tail_len);
        p += tail_len;
        *p++ = '\n';
        *p = '\0';
        b->len = (size_t)(p - b->data);
        return 0;
    }
    *p = '\0';
    b->len = (size_t)(p - b->data);
    return sertrace_fmt_escape(b, tail, tail_len) || buf_lit(b, "\n") ? -1 : 0;
}

/* The kinds in use, in tag order: a dump's `touched` list (sorted; a
 * dump uses a few kinds) or, with `touched` NULL, all 256. */
#define FOR_KINDS(t, kinds, touched, ntouched)                                 \
    for (unsigned k_ = 0, t = 0; k_ < ((touched) ? (ntouched) : 256u); k_++)   \
        if ((t = (touched) ? (touched)[k_] : k_), (kinds)[t].count)

static int put_kinds_text(sertrace_summary *s, sertrace_buf *b,
                          const stat3 *kinds, const uint8_t *touched,
                          unsigned ntouched, uint64_t whole)
{
    int rc = put_legend(s, b);
    if (rc == 0)
        rc = put_table_header(b, "kind", LABEL_MIN);
    FOR_KINDS(t, kinds, touched, ntouched) {
        if (rc != 0)
            break;
        rc = put_row(s, b, tag_texts[t].text, tag_texts[t].len, LABEL_MIN,
                     &kinds[t], whole, tag_texts[t].meaning, tag_texts[t].meaning_len,
                     false);
    }
    return rc;
}

/* ", \"count\": N, \"bytes\": N, \"self\": N, \"share\": R}": one ensure,
 * written through a pointer (runs for every kind and type row of every
 * dump). */
static int put_stat_json(sertrace_buf *b, const stat3 *st, uint64_t whole)
{
    if (ensure(b, 48 + 3 * 20 + 32) < 0)
        return -1;
    char *p = b->data + b->len;
    p = p_lit(p, ", \"count\": ");
    p = p_u64(p, st->count);
    p = p_lit(p, ", \"bytes\": ");
    p = p_u64(p, st->bytes);
    p = p_lit(p, ", \"self\": ");
    p = p_u64(p, st->self);
    p = p_lit(p, ", \"share\": ");
    p = p_ratio(p, st->self, whole);
    *p++ = '}';
    put_end(b, p);
    return 0;
}

static int put_kinds_json(sertrace_buf *b, const stat3 *kinds,
                          const uint8_t *touched, unsigned ntouched,
                          uint64_t whole)
{
    int rc = buf_lit(b, "[");
    bool first = true;
    FOR_KINDS(t, kinds, touched, ntouched) {
        if (rc != 0)
            break;
        const struct tag_text *tx = &tag_texts[t];
        if (ensure(b, 40 + tx->len + tx->meaning_len) < 0)
            return -1;
        char *p = b->data + b->len;
        if (!first)
            p = p_lit(p, ", ");
        p = p_lit(p, "{\"tag\": \"");
        p = p_mem(p, tx->text, tx->len);
        p = p_lit(p, "\", \"kind\": \"");
        p = p_mem(p, tx->meaning, tx->meaning_len);
        *p++ = '"';
        put_end(b, p);
        rc = put_stat_json(b, &kinds[t], whole);
        first = false;
    }
    if (rc == 0)
        rc = buf_lit(b, "]");
    return rc;
}

static int put_type_row_json(sertrace_buf *b, bool first, const char *name,
                             size_t len, const stat3 *st, uint64_t whole)
{
    int rc = first ? buf_lit(b, "{\"type\": ") : buf_lit(b, ", {\"type\": ");
    if (rc == 0)
        rc = name ? sertrace_fmt_json_string(b, name, len) : buf_lit(b, "null");
    if (rc == 0)
        rc = put_stat_json(b, st, whole);
    return rc;
}

static int put_type_row_cached(sertrace_summary *s, sertrace_buf *b,
                               const sertrace_dump_state *d, bool first,
                               uint32_t type, const stat3 *st, uint64_t whole)
{
    const char *esc;
    size_t len;
    if (cached_name(s, d, type, &esc, &len) < 0 || ensure(b, len + 16) < 0)
        return -1;
    char *p = b->data + b->len;
    p = first ? p_lit(p, "{\"type\": \"") : p_lit(p, ", {\"type\": \"");
    p = p_mem(p, esc, len);
    *p++ = '"';
    put_end(b, p);
    return put_stat_json(b, st, whole);
}

static int start_json(sertrace_summary *s)
{
    if (s->json_started)
        return 0;
    s->json_started = true;
    return buf_lit(&s->out,
                   "{\"format\": \"sertrace-summary\", \"version\": 1, \"dumps\": [");
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

static int add_overall_type(sertrace_summary *s, const char *name, size_t len,
                            const stat3 *st)
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
    ds->nflags = 0;
    ds->flags_dropped = 0;
    ds->died_text = ds->died_json = NULL;
    ds->root_bytes = 0;
    ds->root_exact = false;
    ds->next_free = s->free_list;
    s->free_list = ds;
}

static void free_dump_sum(dump_sum *ds)
{
    for (unsigned i = 0; i < ds->nflags; i++)
        free_rendered(&ds->flags[i]);
    free(ds->top);
    free(ds->flags);
    free(ds->types);
    free(ds->died_text);
    free(ds->died_json);
    sertrace_buf_free(&ds->notes);
    free(ds);
}

static int dump_text(sertrace_summary *s, sertrace_dump_state *d, dump_sum *ds,
                     const type_row *rows, unsigned nrows, uint64_t whole)
{
    sertrace_buf *b = &s->out;
    bool complete = sertrace_dump_complete(d);
    int rc = buf_lit(b, "dump ");
    if (rc == 0)
        rc = put_u64(b, d->dump_id);
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 pid ");
    if (rc == 0)
        rc = put_i64(b, d->pid);
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 tid ");
    if (rc == 0)
        rc = put_i64(b, d->tid);
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 ");
    if (rc == 0)
        rc = d->serializer_len
                 ? sertrace_fmt_escape(b, d->serializer, d->serializer_len)
                 : buf_lit(b, "?");
    if (rc == 0)
        rc = buf_lit(b, " protocol ");
    if (rc == 0)
        rc = put_i64(b, d->protocol);
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 ");
    if (rc == 0)
        rc = put_time(b, d->ts_begin, &s->tcache);
    if (rc == 0)
        rc = buf_lit(b, "\n  payload ");
    if (rc == 0 && s->lower)
        rc = buf_lit(b, "\xe2\x89\xa5 ");
    if (rc == 0) {
        if (d->flags & SERTRACE_DUMPF_END) {
            rc = put_u64(b, d->payload_bytes);
            if (rc == 0)
                rc = buf_lit(b, " B");
        } else {
            rc = buf_lit(b, "unknown (\xe2\x89\xa5 ");
            if (rc == 0)
                rc = put_u64(b, d->max_pos);
            if (rc == 0)
                rc = buf_lit(b, " B seen)");
        }
    }
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 ");
    if (rc == 0)
        rc = put_u64(b, d->nodes);
    if (rc == 0)
        rc = buf_lit(b, " nodes \xc2\xb7 depth ");
    if (rc == 0)
        rc = put_u64(b, d->max_depth);
    if (rc == 0)
        rc = buf_lit(b, " \xc2\xb7 status ");
    if (rc == 0)
        rc = put_str(b, status_text(d));
    if (rc == 0)
        rc = complete ? buf_lit(b, " \xc2\xb7 complete")
                      : buf_lit(b, " \xc2\xb7 INCOMPLETE (sizes marked \xe2\x89\xa5 are "
                                   "lower bounds, self sizes not exact)");
    if (rc == 0 && s->lower)
        rc = buf_lit(b, "\n  sizes are lower bounds (\xe2\x89\xa5): the serializer could not "
                        "count every byte it wrote (see the dump's notes)");
    if (rc == 0)
        rc = buf_lit(b, "\n");
    if (rc == 0 && !complete) {
        rc = buf_lit(b, "  !! incomplete: ");
        if (rc == 0)
            rc = put_losses(b, d);
        if (rc == 0)
            rc = buf_lit(b, "\n");
    }
    if (rc == 0 && ds->died_text) {
        rc = buf_lit(b, "  !! died in (as of its last recorded event): ");
        if (rc == 0)
            rc = put_str(b, ds->died_text);
        if (rc == 0)
            rc = buf_lit(b, "\n");
    }
    if (s->o.per_dump) {
        if (rc == 0 && d->nodes)
            rc = put_kinds_text(s, b, ds->kinds, ds->touched, ds->ntouched, whole);
        if (rc == 0 && nrows) {
            size_t width = LABEL_MIN;
            for (unsigned i = 0; i < nrows && i < TEXT_TYPES_MAX && rc == 0; i++) {
                size_t len;
                const char *esc;
                rc = cached_name(s, d, rows[i].type, &esc, &len);
                if (rc == 0)
                    width = label_width(width, esc, len);
            }
            if (rc == 0)
                rc = put_legend(s, b);
            if (rc == 0)
                rc = put_table_header(b, "type", width);
            for (unsigned i = 0; i < nrows && i < TEXT_TYPES_MAX && rc == 0; i++) {
                size_t len;
                const char *esc;
                rc = cached_name(s, d, rows[i].type, &esc, &len);
                if (rc == 0)
                    rc = put_row(s, b, esc, len, width, &rows[i].st, whole, "",
                                 0, false);
            }
            if (rc == 0 && nrows > TEXT_TYPES_MAX)
                rc = sertrace_buf_appendf(b, "    \xe2\x80\xa6 %u more types\n",
                                          nrows - TEXT_TYPES_MAX);
        }
        if (rc == 0 && ds->ntop) {
            rc = buf_lit(b, "  top ");
            if (rc == 0)
                rc = put_u64(b, ds->ntop);
            if (rc == 0)
                rc = buf_lit(b, " largest nodes\n");
            for (unsigned i = 0; i < ds->ntop && rc == 0; i++) {
                rc = buf_lit(b, "    ");
                if (rc == 0)
                    rc = render(s, b, d, &ds->top[s->order[i]], NULL, NULL, 0, NULL, 0);
                if (rc == 0)
                    rc = buf_lit(b, "\n");
            }
        }
    }
    if (rc == 0 && s->o.per_dump && (ds->nnotes || ds->notes_dropped)) {
        rc = buf_lit(b, "  notes (");
        if (rc == 0)
            rc = put_u64(b, ds->nnotes + ds->notes_dropped);
        if (rc == 0)
            rc = buf_lit(b, ")\n");
        if (rc == 0 && ds->notes.len)
            rc = app(b, ds->notes.data, ds->notes.len);
        if (rc == 0 && ds->notes_dropped)
            rc = sertrace_buf_appendf(b, "    \xe2\x80\xa6 %llu more notes not kept\n",
                                      (unsigned long long)ds->notes_dropped);
    }
    if (rc == 0 && (ds->nflags || ds->flags_dropped)) {
        rc = sertrace_buf_appendf(b, "  flags (%u)\n",
                                  ds->nflags + (unsigned)ds->flags_dropped);
        for (unsigned i = 0; i < ds->nflags && rc == 0; i++) {
            rc = buf_lit(b, "    ");
            if (rc == 0)
                rc = put_str(b, ds->flags[i].str);
            if (rc == 0)
                rc = buf_lit(b, "\n");
        }
        if (rc == 0 && ds->flags_dropped)
            rc = sertrace_buf_appendf(b, "    \xe2\x80\xa6 %llu more flags not kept\n",
                                      (unsigned long long)ds->flags_dropped);
    }
    if (rc == 0 && s->o.per_dump)
        rc = buf_lit(b, "\n");
    return rc;
}

static int put_u64_field(sertrace_buf *b, const char *name, uint64_t v)
{
    return put_str(b, name) || put_u64(b, v) ? -1 : 0;
}

static int dump_json(sertrace_summary *s, sertrace_dump_state *d, dump_sum *ds,
                     const type_row *rows, unsigned nrows, uint64_t whole)
{
    sertrace_buf *b = &s->out;
    bool complete = sertrace_dump_complete(d);
    int rc = start_json(s);
    if (rc == 0)
        rc = s->any_dump ? buf_lit(b, ",\n{\"pid\": ") : buf_lit(b, "\n{\"pid\": ");
    s->any_dump = true;
    if (rc == 0)
        rc = put_i64(b, d->pid);
    if (rc == 0)
        rc = buf_lit(b, ", \"tid\": ");
    if (rc == 0)
        rc = put_i64(b, d->tid);
    if (rc == 0)
        rc = put_u64_field(b, ", \"dump_id\": ", d->dump_id);
    if (rc == 0)
        rc = buf_lit(b, ", \"time_ns\": ");
    if (rc == 0)
        rc = put_i64(b, d->ts_begin);
    if (rc == 0)
        rc = buf_lit(b, ", \"serializer\": ");
    if (rc == 0)
        rc = d->serializer_len
                 ? sertrace_fmt_json_string(b, d->serializer, d->serializer_len)
                 : buf_lit(b, "null");
    if (rc == 0)
        rc = buf_lit(b, ", \"protocol\": ");
    if (rc == 0)
        rc = put_i64(b, d->protocol);
    if (rc == 0)
        rc = buf_lit(b, ", \"payload_bytes\": ");
    if (rc == 0)
        rc = (d->flags & SERTRACE_DUMPF_END) ? put_u64(b, d->payload_bytes)
                                             : buf_lit(b, "null");
    if (rc == 0)
        rc = put_u64_field(b, ", \"root_bytes\": ", ds->root_bytes);
    if (rc == 0)
        rc = ds->root_exact ? buf_lit(b, ", \"root_exact\": true")
                            : buf_lit(b, ", \"root_exact\": false");
    if (rc == 0)
        rc = put_u64_field(b, ", \"seen_bytes\": ", d->max_pos);
    if (rc == 0)
        rc = s->lower ? buf_lit(b, ", \"sizes_are_lower_bounds\": true")
                      : buf_lit(b, ", \"sizes_are_lower_bounds\": false");
    if (rc == 0)
        rc = complete ? buf_lit(b, ", \"complete\": true")
                      : buf_lit(b, ", \"complete\": false");
    if (rc == 0)
        rc = (d->flags & SERTRACE_DUMPF_UNFINISHED)
                 ? buf_lit(b, ", \"unfinished\": true")
                 : buf_lit(b, ", \"unfinished\": false");
    if (rc == 0)
        rc = (d->flags & SERTRACE_DUMPF_END_LOST)
                 ? buf_lit(b, ", \"end_lost\": true, \"status\": \"")
                 : buf_lit(b, ", \"end_lost\": false, \"status\": \"");
    if (rc == 0)
        rc = put_str(b, status_text(d));
    if (rc == 0)
        rc = put_u64_field(b, "\", \"nodes\": ", d->nodes);
    if (rc == 0)
        rc = put_u64_field(b, ", \"max_depth\": ", d->max_depth);
    if (rc == 0)
        rc = put_u64_field(b, ", \"errors\": ", d->errors);
    if (rc == 0)
        rc = (d->flags & SERTRACE_DUMPF_BEGIN)
                 ? buf_lit(b, ", \"lost\": {\"begin_missing\": false")
                 : buf_lit(b, ", \"lost\": {\"begin_missing\": true");
    if (rc == 0)
        rc = put_u64_field(b, ", \"records_events\": ", d->lost_batches);
    if (rc == 0)
        rc = put_u64_field(b, ", \"discarded_events\": ", d->discarded);
    if (rc == 0)
        rc = put_u64_field(b, ", \"malformed_batches\": ", d->malformed);
    if (rc == 0)
        rc = put_u64_field(b, ", \"orphan_exits\": ", d->orphan_exits);
    if (rc == 0)
        rc = put_u64_field(b, ", \"lost_exits\": ", d->lost_exits);
    if (rc == 0)
        rc = put_u64_field(b, ", \"lost_enters\": ", d->lost_enters);
    if (rc == 0)
        rc = put_u64_field(b, ", \"skipped_deep_enters\": ", d->skipped_deep);
    if (rc == 0)
        rc = buf_lit(b, "}, \"by_kind\": ");
    if (rc == 0)
        rc = put_kinds_json(b, ds->kinds, ds->touched, ds->ntouched, whole);
    if (rc == 0)
        rc = buf_lit(b, ", \"by_type\": [");
    for (unsigned i = 0; i < nrows && rc == 0; i++) {
        size_t len;
        const char *name = sertrace_core_type_name(d, rows[i].type, &len);
        if (name && s->cache_on) /* the escaped name, once per dump */
            rc = put_type_row_cached(s, b, d, i == 0, rows[i].type, &rows[i].st,
                                     whole);
        else
            rc = put_type_row_json(b, i == 0, name, len, &rows[i].st, whole);
    }
    if (rc == 0)
        rc = buf_lit(b, "], \"top\": [");
    for (unsigned i = 0; i < ds->ntop && rc == 0; i++) {
        if (i)
            rc = buf_lit(b, ", ");
        if (rc == 0)
            rc = render(s, b, d, &ds->top[s->order[i]], NULL, NULL, 0, NULL, 0);
    }
    if (rc == 0)
        rc = buf_lit(b, "], \"died_in\": ");
    if (rc == 0)
        rc = ds->died_json ? put_str(b, ds->died_json) : buf_lit(b, "null");
    if (rc == 0) /* the chain at the last record the trace holds */
        rc = ds->died_json ? buf_lit(b, ", \"died_in_as_of_last_record\": true")
                           : buf_lit(b, ", \"died_in_as_of_last_record\": false");
    /* flags: dump-level ones first, then the nodes' */
    if (rc == 0)
        rc = buf_lit(b, ", \"flags\": [");
    bool first = true;
    if (rc == 0 && !complete) {
        sertrace_buf m = SERTRACE_BUF_INIT;
        rc = put_losses(&m, d);
        if (rc == 0)
            rc = buf_lit(b, "{\"kind\": \"incomplete\", \"path\": ");
        if (rc == 0)
            rc = ds->died_text ? sertrace_fmt_json_string(b, ds->died_text,
                                                          strlen(ds->died_text))
                               : buf_lit(b, "\"\"");
        if (rc == 0)
            rc = buf_lit(b, ", \"message\": ");
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, m.data ? m.data : "", m.len);
        if (rc == 0)
            rc = buf_lit(b, "}");
        sertrace_buf_free(&m);
        first = false;
    }
    if (rc == 0 && d->discarded) {
        rc = sertrace_buf_appendf(
            b,
            "%s{\"kind\": \"discarded\", \"path\": \"\", \"message\": \"%llu "
            "events discarded by the tracer while this dump was live\", "
            "\"count\": %llu}",
            first ? "" : ", ", (unsigned long long)d->discarded,
            (unsigned long long)d->discarded);
        first = false;
    }
    for (unsigned i = 0; i < ds->nflags && rc == 0; i++) {
        rc = first ? 0 : buf_lit(b, ", ");
        if (rc == 0)
            rc = put_str(b, ds->flags[i].str);
        first = false;
    }
    if (rc == 0)
        rc = put_u64_field(b, "], \"flags_dropped\": ", ds->flags_dropped);
    if (rc == 0)
        rc = buf_lit(b, ", \"notes\": [");
    if (rc == 0 && ds->notes.len)
        rc = app(b, ds->notes.data, ds->notes.len);
    if (rc == 0)
        rc = put_u64_field(b, "], \"notes_dropped\": ", ds->notes_dropped);
    if (rc == 0)
        rc = buf_lit(b, "}");
    return rc;
}

/* Offer a dump's top entries to the overall top-N (rendered only when
 * they get in). */
static int merge_top(sertrace_summary *s, const sertrace_dump_state *d,
                     const dump_sum *ds)
{
    for (unsigned i = 0; i < ds->ntop; i++) {
        const top_raw *r = &ds->top[i];
        if (!heap_wants(s->ntop ? s->top[0].bytes : 0, s->ntop, s->o.top, r->bytes))
            continue;
        sertrace_buf_clear(&s->tmp);
        if (render(s, &s->tmp, d, r, NULL, NULL, 0, NULL, 0) < 0)
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

static int v_dump_close(void *ctx, sertrace_dump_state *d)
{
    sertrace_summary *s = ctx;
    dump_sum *ds = d->user;
    d->user = NULL;
    if (!ds)
        return 0;
    int rc = 0;
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
            if (render(s, &s->tmp, d, &f->raw, f->kind, f->msg, f->msg_len, f->path, f->path_len) <
                0) {
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
    rc = s->o.json ? dump_json(s, d, ds, s->rows, nrows, whole)
                   : dump_text(s, d, ds, s->rows, nrows, whole);
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
    for (unsigned i = 0; i < ds->ntouched; i++) {
        unsigned t = ds->touched[i];
        s->kinds[t].count += ds->kinds[t].count;
        s->kinds[t].bytes += ds->kinds[t].bytes;
        s->kinds[t].self += ds->kinds[t].self;
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
        flush_out(s, false);
    return rc < 0 || s->failed ? -1 : 0;
}

/* ---- public ----------------------------------------------------------- */

sertrace_summary *sertrace_summary_create(const sertrace_summary_opts *opts,
                                          sertrace_summary_write_fn write,
                                          void *write_ctx)
{
    sertrace_summary *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = *opts;
    s->write = write;
    s->write_ctx = write_ctx;
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
    v->note = v_note;
    v->error = v_error;
    v->dump_close = v_dump_close;
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

int sertrace_summary_finish(sertrace_summary *s,
                            const sertrace_core_stats *stats)
{
    sertrace_buf *b = &s->out;
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
    int rc = 0;
    if (s->o.json) {
        rc = start_json(s);
        if (rc == 0)
            rc = sertrace_buf_appendf(
                b,
                "\n], \"totals\": {\"dumps\": %llu, \"complete\": %llu, "
                "\"incomplete\": %llu, \"unfinished\": %llu, "
                "\"end_lost\": %llu, "
                "\"payload_bytes\": %llu, \"nodes\": %llu, "
                "\"lower_bound_dumps\": %llu, "
                "\"discarded_events\": %llu, \"lost_records_events\": %llu, "
                "\"by_kind\": ",
                (unsigned long long)s->dumps, (unsigned long long)s->complete,
                (unsigned long long)(s->dumps - s->complete), (unsigned long long)s->unfinished,
                (unsigned long long)s->end_lost, (unsigned long long)s->payload_bytes,
                (unsigned long long)s->nodes, (unsigned long long)s->lower_dumps,
                (unsigned long long)discarded, (unsigned long long)lost);
        if (rc == 0)
            rc = put_kinds_json(b, s->kinds, NULL, 0, whole);
        if (rc == 0)
            rc = buf_lit(b, ", \"by_type\": [");
        for (size_t i = 0; i < nrows && rc == 0; i++) {
            rc = put_type_row_json(b, i == 0, rows[i]->name, rows[i]->len,
                                   &rows[i]->st, whole);
            if (rc == 0 && b->len >= FLUSH_AT)
                rc = flush_out(s, false);
        }
        if (rc == 0)
            rc = put_u64_field(b, "], \"types_not_kept\": ", s->types_overflow);
        if (rc == 0)
            rc = buf_lit(b, ", \"top\": [");
        for (unsigned i = 0; i < s->ntop && rc == 0; i++) {
            rc = i ? buf_lit(b, ", ") : 0;
            if (rc == 0)
                rc = put_str(b, s->top[i].str);
        }
        if (rc == 0)
            rc = buf_lit(b, "]}, \"filter\": ");
        if (rc == 0)
            rc = s->filter.len ? sertrace_buf_append(b, s->filter.data, s->filter.len)
                               : buf_lit(b, "null");
        if (rc == 0)
            rc = buf_lit(b, "}\n");
    } else {
        rc = sertrace_buf_appendf(
            b,
            "== overall: %llu dumps, %llu complete, %llu incomplete "
            "(%llu unfinished); payload %s%llu B; %llu nodes\n",
            (unsigned long long)s->dumps, (unsigned long long)s->complete,
            (unsigned long long)(s->dumps - s->complete), (unsigned long long)s->unfinished,
            s->lower_dumps ? "\xe2\x89\xa5 " : "", (unsigned long long)s->payload_bytes,
            (unsigned long long)s->nodes);
        if (rc == 0 && s->lower_dumps)
            rc = sertrace_buf_appendf(
                b, "  %llu dumps' sizes are lower bounds: the totals below are lower bounds\n",
                (unsigned long long)s->lower_dumps);
        s->lower = s->lower_dumps > 0; /* the overall tables */
        if (rc == 0 && (discarded || lost))
            rc = sertrace_buf_appendf(
                b,
                "  !! the tracer discarded %llu events; %llu records events "
                "missing by sequence number: affected dumps are marked "
                "incomplete\n",
                (unsigned long long)discarded, (unsigned long long)lost);
        if (rc == 0 && s->nodes)
            rc = put_kinds_text(s, b, s->kinds, NULL, 0, whole);
        if (rc == 0 && nrows) {
            /* escaped names of the rows shown, one after the other */
            size_t shown = nrows < 2 * TEXT_TYPES_MAX ? nrows : 2 * TEXT_TYPES_MAX;
            size_t width = LABEL_MIN, offs[2 * TEXT_TYPES_MAX + 1];
            sertrace_buf *names = &s->tmp;
            sertrace_buf_clear(names);
            offs[0] = 0;
            for (size_t i = 0; i < shown && rc == 0; i++) {
                rc = sertrace_fmt_escape(names, rows[i]->name, rows[i]->len);
                offs[i + 1] = names->len;
                if (rc == 0)
                    width = label_width(width, names->data + offs[i],
                                        offs[i + 1] - offs[i]);
            }
            if (rc == 0)
                rc = put_legend(s, b);
            if (rc == 0)
                rc = put_table_header(b, "type", width);
            for (size_t i = 0; i < shown && rc == 0; i++)
                rc = put_row(s, b, names->data + offs[i], offs[i + 1] - offs[i],
                             width, &rows[i]->st, whole, "", 0, false);
            if (rc == 0 && nrows > 2 * TEXT_TYPES_MAX)
                rc = sertrace_buf_appendf(b, "    \xe2\x80\xa6 %zu more types\n",
                                          nrows - 2 * TEXT_TYPES_MAX);
        }
        if (rc == 0 && s->ntop) {
            rc = sertrace_buf_appendf(b, "  top %u largest nodes\n", s->ntop);
            for (unsigned i = 0; i < s->ntop && rc == 0; i++)
                rc = sertrace_buf_appendf(b, "    %s\n", s->top[i].str);
        }
    }
    free(rows);
    s->lower = false;
    if (rc == 0)
        flush_out(s, true);
    return rc < 0 || s->failed ? -1 : 0;
}

void sertrace_summary_destroy(sertrace_summary *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->ntop; i++)
        free_rendered(&s->top[i]);
    free(s->top);
    free(s->order);
    while (s->free_list) {
        dump_sum *next = s->free_list->next_free;
        free_dump_sum(s->free_list);
        s->free_list = next;
    }
    for (size_t i = 0; i < s->types_buckets; i++) {
        type_total *t = s->types[i];
        while (t) {
            type_total *next = t->next;
            free(t);
            t = next;
        }
    }
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

int sertrace_summary_set_filter(sertrace_summary *s, const char *json, size_t len)
{
    sertrace_buf_clear(&s->filter);
    return sertrace_buf_append(&s->filter, json, len);
}

int sertrace_parse_oversize(const char *text, uint64_t *bytes, double *percent)
{
    *bytes = 0;
    *percent = 0;
    size_t n = text ? strlen(text) : 0;
    if (n == 0)
        return -1;
    if (text[n - 1] == '%') {
        char *end;
        double p = strtod(text, &end);
        if (end != text + n - 1 || !(p > 0) || p > 100)
            return -1;
        *percent = p;
        return 0;
    }
    return sertrace_parse_size(text, bytes) < 0 || *bytes == 0 ? -1 : 0;
}
