/* export_html.c -- the HTML page: one self-contained file, the dumps as
 * JSON data blocks, the viewer (html/viewer.js, html/viewer.css,
 * html/body.html) embedded at build time.
 *
 * The page is written as the dumps close, so a run never holds more than
 * one dump: the head (style and markup) first, then one
 *   <script type="application/json" id="sertrace-dump-K">{...}</script>
 * per dump, then at the end the index (every dump's summary figures, for
 * the dump selector; ~200 B per dump) and the viewer script.  The viewer
 * parses a dump's block only when it is shown.
 *
 * A dump block holds its nodes in pre-order as columns (one JSON array
 * per field: tag, type, depth, bytes, self, flags, bound), which is
 * compact and fast to parse (a 100,000-node dump is ~3 MB).  A new field
 * of the nodes -- the path of each node, when the core provides one -- is
 * one more column.  Inside a <script> element the text must not contain
 * "</script" or "<!--": every '<' of the JSON (only ever inside strings)
 * is written as \u003c.
 */
#include <stdlib.h>
#include <string.h>

#include "export_int.h"
#include "paths.h"
#include "sertrace/schema.h"

/* html_assets.c, generated at build time from html/ (html/embed.py). */
extern const char sertrace_html_css[];
extern const size_t sertrace_html_css_len;
extern const char sertrace_html_body[];
extern const size_t sertrace_html_body_len;
extern const char sertrace_html_js[];
extern const size_t sertrace_html_js_len;

struct html_writer {
    char *title;
    bool started;
    uint64_t dumps;
    sertrace_buf index; /* the dumps' summaries, comma-separated */
    sertrace_buf tmp;
};

#define put_u64 sertrace_export_put_u64
#define put_i64 sertrace_export_put_i64

static int lit(sertrace_buf *b, const char *s)
{
    return sertrace_buf_append(b, s, strlen(s));
}

/* Text for an HTML element or attribute. */
static int put_html_text(sertrace_buf *b, const char *s)
{
    for (; *s; s++) {
        int rc;
        switch (*s) {
        case '&':
            rc = lit(b, "&amp;");
            break;
        case '<':
            rc = lit(b, "&lt;");
            break;
        case '>':
            rc = lit(b, "&gt;");
            break;
        case '"':
            rc = lit(b, "&quot;");
            break;
        default:
            rc = sertrace_buf_append(b, s, 1);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* JSON text into a <script> block: '<' as \u003c. */
static int put_script_json(sertrace_buf *b, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<')
            continue;
        if (sertrace_buf_append(b, s + from, i - from) < 0 || lit(b, "\\u003c") < 0)
            return -1;
        from = i + 1;
    }
    return sertrace_buf_append(b, s + from, n - from);
}

html_writer *sertrace_html_create(const char *title)
{
    html_writer *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->title = strdup(title);
    if (!h->title) {
        free(h);
        return NULL;
    }
    return h;
}

void sertrace_html_destroy(html_writer *h)
{
    if (!h)
        return;
    sertrace_buf_free(&h->index);
    sertrace_buf_free(&h->tmp);
    free(h->title);
    free(h);
}

static int start(html_writer *h, sertrace_buf *out)
{
    if (h->started)
        return 0;
    h->started = true;
    return lit(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"generator\" content=\"sertrace\">\n<title>") ||
                   put_html_text(out, h->title) ||
                   lit(out, " \xe2\x80\x94 sertrace</title>\n<style>\n") ||
                   sertrace_buf_append(out, sertrace_html_css, sertrace_html_css_len) ||
                   lit(out, "</style>\n</head>\n<body>\n") ||
                   sertrace_buf_append(out, sertrace_html_body, sertrace_html_body_len)
               ? -1
               : 0;
}

static const char *yes(bool v)
{
    return v ? "true" : "false";
}

/* The dump's summary figures: the index entry, and the head of its block. */
static int put_summary(sertrace_buf *b, const xdump *x)
{
    const sertrace_dump_state *d = x->d;
    int rc = lit(b, "{\"index\":") || put_u64(b, x->index) || lit(b, ",\"dump_id\":") ||
             put_u64(b, d->dump_id) || lit(b, ",\"pid\":") || put_i64(b, d->pid) ||
             lit(b, ",\"tid\":") || put_i64(b, d->tid) || lit(b, ",\"time_ns\":") ||
             put_i64(b, d->ts_begin) || lit(b, ",\"serializer\":") ||
             sertrace_fmt_json_string(b, d->serializer, d->serializer_len) ||
             lit(b, ",\"protocol\":") || put_i64(b, d->protocol) || lit(b, ",\"payload_bytes\":");
    if (rc == 0)
        rc = x->has_payload ? put_u64(b, d->payload_bytes) : lit(b, "null");
    rc = rc || lit(b, ",\"root_bytes\":") || put_u64(b, x->root_sum) || lit(b, ",\"dump_self\":") ||
         put_u64(b, x->dump_self) || lit(b, ",\"total\":") || put_u64(b, x->total) ||
         lit(b, ",\"status\":\"") || lit(b, x->status) || lit(b, "\",\"complete\":") ||
         lit(b, yes(sertrace_dump_complete(d))) || lit(b, ",\"unfinished\":") ||
         lit(b, yes(d->flags & SERTRACE_DUMPF_UNFINISHED)) || lit(b, ",\"end_lost\":") ||
         lit(b, yes(d->flags & SERTRACE_DUMPF_END_LOST)) || lit(b, ",\"lower_bounds\":") ||
         lit(b, yes(d->flags & SERTRACE_DUMPF_LOWER_BOUNDS)) || lit(b, ",\"nodes\":") ||
         put_u64(b, x->n) || lit(b, ",\"max_depth\":") || put_u64(b, x->max_depth) ||
         lit(b, ",\"errors\":") || put_u64(b, d->errors) || lit(b, ",\"flagged\":") ||
         put_u64(b, x->flagged);
    return rc ? -1 : 0;
}

/* The per-node columns of the page's data, in its order, each named as
 * the xnode field it holds: ,"tag":[...],"type":[...] ... one value a node. */
#define XNODE_COLUMNS(X) X(tag) X(type) X(depth) X(bytes) X(self) X(flags) X(bound)

typedef uint64_t (*column_fn)(const xnode *n);
#define COLUMN_FN_(field)                                                                          \
    static uint64_t col_##field(const xnode *n)                                                    \
    {                                                                                              \
        return n->field;                                                                           \
    }
XNODE_COLUMNS(COLUMN_FN_)
#undef COLUMN_FN_

static const struct {
    const char *name;
    column_fn get;
} xnode_columns[] = {
#define COLUMN_ROW_(field) {#field, col_##field},
    XNODE_COLUMNS(COLUMN_ROW_)
#undef COLUMN_ROW_
};

static int put_columns(sertrace_buf *b, const xdump *x)
{
    for (size_t c = 0; c < sizeof xnode_columns / sizeof xnode_columns[0]; c++) {
        if (lit(b, ",\"") < 0 || lit(b, xnode_columns[c].name) < 0 || lit(b, "\":[") < 0)
            return -1;
        for (uint32_t i = 0; i < x->n; i++)
            if ((i && lit(b, ",") < 0) || put_u64(b, xnode_columns[c].get(&x->nodes[i])) < 0)
                return -1;
        if (lit(b, "]") < 0)
            return -1;
    }
    return 0;
}

static int put_texts(sertrace_buf *b, const xdump *x, const char *name, const xerror *list,
                     uint32_t n);

/* ,"path":["Session", "Session.cache", ...]: each node's path (paths.h),
 * rebuilt in pre-order from the labels and depths; only for a dump with
 * labels (schema v5), so the viewer keeps the type chain otherwise. */
static int put_paths(sertrace_buf *b, const xdump *x)
{
    const sertrace_dump_state *d = x->d;
    if (d->labels == 0 || x->n == 0)
        return 0;
    sertrace_buf cur = SERTRACE_BUF_INIT;
    size_t *ends = calloc((size_t)x->max_depth + 1, sizeof *ends);
    int rc = ends == NULL ? -1 : lit(b, ",\"path\":[");
    for (uint32_t i = 0; rc == 0 && i < x->n; i++) {
        const xnode *n = &x->nodes[i];
        uint32_t k = n->depth <= x->max_depth ? n->depth : x->max_depth;
        cur.len = k >= 2 ? ends[k - 1] : 0;
        if (k <= 1) {
            size_t len;
            const char *name = sertrace_core_type_name(d, n->type, &len);
            size_t start = len;
            while (name && start > 0 && name[start - 1] != '.')
                start--;
            if (name)
                sertrace_fmt_escape(&cur, name + start, len - start);
            else
                sertrace_buf_append(&cur, "?", 1);
        } else if (n->label_kind == SERTRACE_LABEL_NONE) {
            sertrace_buf_append(&cur, "/?", 2);
        } else {
            sertrace_label_append(&cur, d, n->label_kind, n->label, n->in_state,
                                  SERTRACE_FMT_LABEL_PATH);
        }
        ends[k] = cur.len;
        rc = sertrace_buf_error(&cur) || (i && lit(b, ",") < 0) ||
                     sertrace_fmt_json_string(b, cur.data ? cur.data : "", cur.len) < 0
                 ? -1
                 : 0;
    }
    if (rc == 0)
        rc = lit(b, "]");
    free(ends);
    sertrace_buf_free(&cur);
    return rc;
}

static int put_block(sertrace_buf *b, const xdump *x)
{
    const sertrace_dump_state *d = x->d;
    if (put_summary(b, x) < 0 || lit(b, ",\"types\":[null") < 0)
        return -1;
    for (uint32_t t = 1; t <= d->ntypes; t++) {
        size_t len;
        const char *name = sertrace_core_type_name(d, t, &len);
        if (name && d->types[t].label)
            name = NULL; /* a label text (v5): no type, and the page needs it not */
        if (lit(b, ",") < 0 || (name ? sertrace_fmt_json_string(b, name, len) : lit(b, "null")) < 0)
            return -1;
    }
    if (lit(b, "]") < 0 || put_columns(b, x) < 0 || put_paths(b, x) < 0 ||
        put_texts(b, x, "error_list", x->errors, x->nerrors) < 0 ||
        put_texts(b, x, "note_list", x->notes, x->nnotes) < 0)
        return -1;
    return lit(b, "}");
}

/* ,"NAME":[[node, "a", "b"], ...]  (node -1: on the dump itself) */
static int put_texts(sertrace_buf *b, const xdump *x, const char *name, const xerror *list,
                     uint32_t n)
{
    if (lit(b, ",\"") < 0 || lit(b, name) < 0 || lit(b, "\":[") < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const xerror *e = &list[i];
        if ((i && lit(b, ",") < 0) || lit(b, "[") < 0 ||
            (e->node == UINT32_MAX ? lit(b, "-1") : put_u64(b, e->node)) < 0 || lit(b, ",") < 0 ||
            sertrace_fmt_json_string(b, x->arena + e->msg_off, e->msg_len) < 0 || lit(b, ",") < 0 ||
            sertrace_fmt_json_string(b, x->arena + e->path_off, e->path_len) < 0 || lit(b, "]") < 0)
            return -1;
    }
    return lit(b, "]");
}

int sertrace_html_dump(html_writer *h, sertrace_buf *out, const xdump *x)
{
    sertrace_buf *t = &h->tmp;
    if (start(h, out) < 0)
        return -1;
    sertrace_buf_clear(t);
    if ((h->dumps && lit(&h->index, ",\n") < 0) || put_summary(t, x) < 0 || lit(t, "}") < 0 ||
        sertrace_buf_append(&h->index, t->data, t->len) < 0)
        return -1;
    sertrace_buf_clear(t);
    if (put_block(t, x) < 0 ||
        lit(out, "<script type=\"application/json\" id=\"sertrace-dump-") < 0 ||
        put_u64(out, h->dumps) < 0 || lit(out, "\">") < 0 ||
        put_script_json(out, t->data, t->len) < 0 || lit(out, "</script>\n") < 0)
        return -1;
    h->dumps++;
    /* the next dump reuses it; a huge one is not kept */
    if (t->cap > (4u << 20))
        sertrace_buf_free(t);
    return 0;
}

int sertrace_html_finish(html_writer *h, sertrace_buf *out, const sertrace_core_stats *stats)
{
    sertrace_buf *t = &h->tmp;
    if (start(h, out) < 0)
        return -1;
    sertrace_buf_clear(t);
    int rc = lit(t, "{\"format\":\"sertrace-html\",\"version\":1,\"title\":") ||
             sertrace_fmt_json_string(t, h->title, strlen(h->title)) ||
             lit(t, ",\"discarded_events\":") || put_u64(t, stats ? stats->discarded_events : 0) ||
             lit(t, ",\"lost_records_events\":") || put_u64(t, stats ? stats->lost_batches : 0) ||
             lit(t, ",\"tags\":{");
    bool first = true;
#define TAG_(name, value, text, meaning, cls)                                                      \
    if (rc == 0) {                                                                                 \
        rc = lit(t, first ? "\"" : ",\"") || put_u64(t, value) || lit(t, "\":[") ||                \
             sertrace_fmt_json_string(t, text, strlen(text)) || lit(t, ",") ||                     \
             sertrace_fmt_json_string(t, meaning, strlen(meaning)) || lit(t, "]");                 \
        first = false;                                                                             \
    }
    SERTRACE_TAGS(TAG_)
#undef TAG_
    rc = rc || lit(t, "},\"dumps\":[") ||
         sertrace_buf_append(t, h->index.data ? h->index.data : "", h->index.len) || lit(t, "]}");
    if (rc == 0)
        rc = lit(out, "<script type=\"application/json\" id=\"sertrace-index\">") ||
             put_script_json(out, t->data, t->len) || lit(out, "</script>\n<script>\n") ||
             sertrace_buf_append(out, sertrace_html_js, sertrace_html_js_len) ||
             lit(out, "</script>\n</body>\n</html>\n");
    return rc ? -1 : 0;
}
