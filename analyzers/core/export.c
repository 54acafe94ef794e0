/* export.c -- the export visitor, and the folded, speedscope and Perfetto
 * writers (the HTML page is export_html.c).
 *
 * node_enter appends a compact record (pre-order), node_exit fills in its
 * size, self bytes and flags; errors are kept with their node.  When a
 * dump closes, its totals are computed once (the roots' bytes, the dump's
 * own header/trailer bytes) and each output that was added writes the dump
 * in its format into a buffer, handed to its write function in 64 KiB
 * chunks.  The documents that need a closing part (speedscope's frame
 * table, the JSON arrays, the HTML page's index and script) get it in
 * sertrace_export_finish.  Each writer walks the pre-order array with an
 * explicit stack (depth is unlimited), so nothing here recurses.
 */
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "export_int.h"
#include "format.h"
#include "grow.h"
#include "nodebuf.h"
#include "outbuf.h"

#define FLUSH_AT (64u << 10)
#define MAX_ERRORS_KEPT 1000u /* per dump, and as many notes */

typedef struct dump_buf {
    xnode *nodes;
    uint32_t n, cap;
    xerror *errors;
    uint32_t nerrors, errors_cap;
    xerror *notes;
    uint32_t nnotes, notes_cap;
    sertrace_buf arena;
    bool overflow; /* more than UINT32_MAX-1 nodes: stopped keeping them */
} dump_buf;

typedef struct output {
    bool on;
    bool started;   /* its document's opening part is written */
    uint64_t items; /* dumps written (commas between them) */
    sertrace_summary_write_fn write;
    void *write_ctx;
    sertrace_buf buf;
} output;

/* speedscope's shared frames: name -> index, open addressing. */
typedef struct frame_table {
    uint32_t *slots; /* index + 1, 0 = empty */
    uint32_t cap;    /* power of two */
    uint32_t n;
    uint32_t *off, *len; /* per frame, into names */
    uint32_t list_cap;
    sertrace_buf names;
} frame_table;

struct sertrace_export {
    sertrace_export_opts o;
    char *title;
    output out[SERTRACE_EXPORT_NFORMATS];
    int failed;
    uint64_t dumps;
    /* scratch, reused across dumps */
    sertrace_buf path;  /* folded: the frame stack as text */
    uint32_t *path_len; /* folded: path length at each depth */
    size_t path_len_cap;
    struct open_frame {
        uint32_t frame;
        uint32_t depth;
        uint64_t open_at, bytes;
    } * stack;
    size_t stack_cap;
    uint32_t *type_frame; /* speedscope: frame of each type index of the dump, +1 */
    size_t type_frame_cap;
    uint32_t tag_frame[256]; /* speedscope: frame of an untyped tag, +1 */
    frame_table frames;
    html_writer *html;
};

/* ---- small writers ------------------------------------------------------ */

static int lit(sertrace_buf *b, const char *s)
{
    return sertrace_buf_append(b, s, strlen(s));
}

/* export_int.h's number writers (export_html.c uses them): outbuf.h's. */
int sertrace_export_put_u64(sertrace_buf *b, uint64_t v)
{
    return put_u64(b, v);
}

int sertrace_export_put_i64(sertrace_buf *b, int64_t v)
{
    return put_i64(b, v);
}

/* Nanoseconds as microseconds with three decimals, exactly (no double). */
static int put_us(sertrace_buf *b, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char frac[4] = {(char)('0' + a % 1000 / 100), (char)('0' + a % 100 / 10), (char)('0' + a % 10),
                    0};
    if ((ns < 0 && lit(b, "-") < 0) || put_u64(b, a / 1000) < 0 || lit(b, ".") < 0)
        return -1;
    return lit(b, frac);
}

const char *sertrace_export_frame_name(const xdump *x, const xnode *n, size_t *len, char tmp[8])
{
    const char *name = n->type ? sertrace_core_type_name(x->d, n->type, len) : NULL;
    if (name && *len)
        return name;
    name = sertrace_tag_text(n->tag, tmp);
    *len = strlen(name);
    return name;
}

static int flush_output(sertrace_export *x, output *o, bool force)
{
    if (o->buf.len && (force || o->buf.len >= FLUSH_AT)) {
        if (o->write(o->write_ctx, o->buf.data, o->buf.len) < 0)
            x->failed = -1;
        sertrace_buf_clear(&o->buf);
    }
    return x->failed;
}

/* ---- folded stacks ------------------------------------------------------ */

/* A frame of a folded line: ';' separates frames and the last space the
 * count, a newline ends the line; control bytes and ';' become '?', the
 * rest (UTF-8 included) is kept. */
static int put_folded_frame(sertrace_buf *b, const char *s, size_t n)
{
    if (sertrace_buf_reserve(b, n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        b->data[b->len++] = (c < 0x20 || c == 0x7f || c == ';') ? '?' : (char)c;
    }
    b->data[b->len] = '\0';
    return 0;
}

static int put_dump_label(sertrace_buf *b, const sertrace_dump_state *d, const char *sep)
{
    int rc =
        d->serializer_len ? put_folded_frame(b, d->serializer, d->serializer_len) : lit(b, "?");
    if (rc == 0)
        rc = lit(b, " dump ") || put_u64(b, d->dump_id) ? -1 : 0;
    if (rc == 0 && d->pid >= 0)
        rc = lit(b, sep) || lit(b, "pid ") || put_i64(b, d->pid) ? -1 : 0;
    return rc;
}

static int grow_path_len(sertrace_export *x, uint32_t depth)
{
    if ((size_t)depth + 1 <= x->path_len_cap)
        return 0;
    uint32_t *a = sertrace_grow(x->path_len, &x->path_len_cap, sizeof *a, (size_t)depth + 1, 64);
    if (!a)
        return -1;
    x->path_len = a;
    return 0;
}

static int write_folded(sertrace_export *x, sertrace_buf *b, const xdump *xd)
{
    sertrace_buf *p = &x->path;
    sertrace_buf_clear(p);
    if (put_dump_label(p, xd->d, " ") < 0 || grow_path_len(x, xd->max_depth) < 0)
        return -1;
    x->path_len[0] = (uint32_t)p->len;
    if (xd->dump_self && (sertrace_buf_append(b, p->data, p->len) < 0 || lit(b, " ") < 0 ||
                          put_u64(b, xd->dump_self) < 0 || lit(b, "\n") < 0))
        return -1;
    for (uint32_t i = 0; i < xd->n; i++) {
        const xnode *n = &xd->nodes[i];
        char tmp[8];
        size_t len;
        const char *name = sertrace_export_frame_name(xd, n, &len, tmp);
        p->len = x->path_len[n->depth - 1];
        if (lit(p, ";") < 0 || put_folded_frame(p, name, len) < 0)
            return -1;
        x->path_len[n->depth] = (uint32_t)p->len;
        if (n->self && (sertrace_buf_append(b, p->data, p->len) < 0 || lit(b, " ") < 0 ||
                        put_u64(b, n->self) < 0 || lit(b, "\n") < 0))
            return -1;
    }
    return 0;
}

/* ---- speedscope ------------------------------------------------------------ */

static uint32_t hash_name(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Frame `f` of the table is named `name`. */
static bool frame_is(const frame_table *t, uint32_t f, const char *name, size_t n)
{
    return t->len[f] == n && memcmp(t->names.data + t->off[f], name, n) == 0;
}

/* The index of frame `name`, added when new; UINT32_MAX when out of memory. */
static uint32_t frame_index(frame_table *t, const char *name, size_t n)
{
    if (t->n + 1 > t->cap / 2) {
        uint32_t cap = t->cap ? t->cap * 2 : 256;
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return UINT32_MAX;
        for (uint32_t i = 0; i < t->cap; i++) {
            if (!t->slots[i])
                continue;
            uint32_t f = t->slots[i] - 1;
            SERTRACE_PROBE(h, hash_name(t->names.data + t->off[f], t->len[f]), cap, slots[h]);
            slots[h] = f + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    SERTRACE_PROBE(h, hash_name(name, n), t->cap,
                   t->slots[h] && !frame_is(t, t->slots[h] - 1, name, n));
    if (t->slots[h])
        return t->slots[h] - 1;
    if (t->n == t->list_cap) {
        uint32_t cap = t->list_cap ? t->list_cap * 2 : 256;
        uint32_t *off = realloc(t->off, cap * sizeof *off);
        if (!off)
            return UINT32_MAX;
        t->off = off;
        uint32_t *len = realloc(t->len, cap * sizeof *len);
        if (!len)
            return UINT32_MAX;
        t->len = len;
        t->list_cap = cap;
    }
    if (t->names.len + n > UINT32_MAX)
        return UINT32_MAX;
    t->off[t->n] = (uint32_t)t->names.len;
    t->len[t->n] = (uint32_t)n;
    if (sertrace_buf_append(&t->names, name, n) < 0)
        return UINT32_MAX;
    t->slots[h] = t->n + 1;
    return t->n++;
}

static uint32_t node_frame(sertrace_export *x, const xdump *xd, const xnode *n)
{
    uint32_t *slot =
        n->type && n->type < x->type_frame_cap ? &x->type_frame[n->type] : &x->tag_frame[n->tag];
    if (!*slot) {
        char tmp[8];
        size_t len;
        const char *name = sertrace_export_frame_name(xd, n, &len, tmp);
        uint32_t f = frame_index(&x->frames, name, len);
        if (f == UINT32_MAX)
            return f;
        *slot = f + 1;
    }
    return *slot - 1;
}

static int push_open(sertrace_export *x, size_t *top, uint32_t frame, uint32_t depth, uint64_t at,
                     uint64_t bytes)
{
    if (*top == x->stack_cap) {
        struct open_frame *s = sertrace_grow(x->stack, &x->stack_cap, sizeof *s, *top + 1, 64);
        if (!s)
            return -1;
        x->stack = s;
    }
    x->stack[(*top)++] = (struct open_frame){frame, depth, at, bytes};
    return 0;
}

static int put_event(sertrace_buf *b, bool *first, const char *type, uint32_t frame, uint64_t at)
{
    int rc = lit(b, *first ? "{\"type\":\"" : ",{\"type\":\"") || lit(b, type) ||
             lit(b, "\",\"frame\":") || put_u64(b, frame) || lit(b, ",\"at\":") || put_u64(b, at) ||
             lit(b, "}");
    *first = false;
    return rc ? -1 : 0;
}

/* One "evented" profile.  Events are laid out from the sizes: a node
 * opens where its previous sibling closed (or where its parent opened)
 * and closes at open + bytes, or later if its children (inexact sizes)
 * went past that; so the frames nest and each frame's width is its size,
 * and the dump frame spans `total` bytes (the payload). */
static int write_speedscope(sertrace_export *x, sertrace_buf *b, const xdump *xd)
{
    const sertrace_dump_state *d = xd->d;
    if (x->type_frame_cap < (size_t)d->ntypes + 1) {
        size_t cap = (size_t)d->ntypes + 1;
        uint32_t *a = realloc(x->type_frame, cap * sizeof *a);
        if (!a)
            return -1;
        x->type_frame = a;
        x->type_frame_cap = cap;
    }
    memset(x->type_frame, 0, x->type_frame_cap * sizeof *x->type_frame);
    memset(x->tag_frame, 0, sizeof x->tag_frame);

    sertrace_buf *lbl = &x->path;
    sertrace_buf_clear(lbl);
    if (lit(lbl, "[") < 0 || put_dump_label(lbl, d, ", ") < 0 || lit(lbl, "]") < 0)
        return -1;
    int rc = lit(b, "{\"type\":\"evented\",\"name\":") ||
             sertrace_fmt_json_string(b, lbl->data + 1, lbl->len - 2) ||
             lit(b, ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":");
    if (rc)
        return -1;
    /* endValue: the dump frame's close, known after the walk; written
     * then, so the events go to a second buffer first. */
    sertrace_buf ev = SERTRACE_BUF_INIT;
    bool first = true;
    size_t top = 0;
    uint64_t cursor = 0;
    uint32_t dump_frame = frame_index(&x->frames, lbl->data, lbl->len);
    rc = dump_frame == UINT32_MAX || push_open(x, &top, dump_frame, 0, 0, xd->total) ||
         put_event(&ev, &first, "O", dump_frame, 0);
    for (uint32_t i = 0; rc == 0 && i <= xd->n; i++) {
        uint32_t depth = i < xd->n ? xd->nodes[i].depth : 0;
        while (rc == 0 && top > 0 && x->stack[top - 1].depth >= depth) {
            struct open_frame *f = &x->stack[--top];
            uint64_t end = f->open_at + f->bytes;
            if (end > cursor)
                cursor = end;
            rc = put_event(&ev, &first, "C", f->frame, cursor);
        }
        if (rc || i == xd->n)
            break;
        uint32_t f = node_frame(x, xd, &xd->nodes[i]);
        rc = f == UINT32_MAX || push_open(x, &top, f, depth, cursor, xd->nodes[i].bytes) ||
             put_event(&ev, &first, "O", f, cursor);
    }
    if (rc == 0)
        rc = put_u64(b, cursor) || lit(b, ",\"events\":[") ||
             sertrace_buf_append(b, ev.data ? ev.data : "", ev.len) || lit(b, "]}");
    sertrace_buf_free(&ev);
    return rc ? -1 : 0;
}

static int speedscope_start(sertrace_export *x, sertrace_buf *b)
{
    return lit(b, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                  "\"exporter\":\"sertrace\",\"name\":") ||
                   sertrace_fmt_json_string(b, x->title, strlen(x->title)) ||
                   lit(b, ",\"activeProfileIndex\":0,\"profiles\":[")
               ? -1
               : 0;
}

static int speedscope_end(sertrace_export *x, sertrace_buf *b)
{
    frame_table *t = &x->frames;
    if (lit(b, "],\"shared\":{\"frames\":[") < 0)
        return -1;
    for (uint32_t f = 0; f < t->n; f++)
        if (lit(b, f ? ",{\"name\":" : "{\"name\":") < 0 ||
            sertrace_fmt_json_string(b, t->names.data + t->off[f], t->len[f]) < 0 ||
            lit(b, "}") < 0)
            return -1;
    return lit(b, "]}}\n");
}

/* ---- Perfetto (Chrome trace-event JSON) --------------------------------------- */

static int write_perfetto(const xdump *xd, sertrace_buf *b)
{
    const sertrace_dump_state *d = xd->d;
    int64_t dur = d->ts_end > d->ts_begin ? d->ts_end - d->ts_begin : 0;
    int rc = lit(b, "{\"name\":\"") || (d->serializer_len ? 0 : lit(b, "?"));
    /* the name, escaped: the serializer as a JSON string without quotes */
    if (rc == 0 && d->serializer_len) {
        size_t at = b->len;
        rc = sertrace_fmt_json_string(b, d->serializer, d->serializer_len);
        if (rc == 0) { /* drop the quotes */
            memmove(b->data + at, b->data + at + 1, b->len - at - 2);
            b->len -= 2;
            b->data[b->len] = '\0';
        }
    }
    rc = rc || lit(b, " dump ") || put_u64(b, d->dump_id) ||
         lit(b, "\",\"cat\":\"sertrace\",\"ph\":\"X\",\"ts\":") || put_us(b, d->ts_begin) ||
         lit(b, ",\"dur\":") || put_us(b, dur) || lit(b, ",\"pid\":") || put_i64(b, d->pid) ||
         lit(b, ",\"tid\":") || put_i64(b, d->tid) || lit(b, ",\"args\":{\"serializer\":") ||
         sertrace_fmt_json_string(b, d->serializer, d->serializer_len) ||
         lit(b, ",\"protocol\":") || put_i64(b, d->protocol) || lit(b, ",\"dump_id\":") ||
         put_u64(b, d->dump_id) || lit(b, ",\"payload_bytes\":");
    if (rc == 0)
        rc = xd->has_payload ? put_u64(b, d->payload_bytes) : lit(b, "null");
    rc = rc || lit(b, ",\"root_bytes\":") || put_u64(b, xd->root_sum) || lit(b, ",\"status\":\"") ||
         lit(b, xd->status) || lit(b, "\",\"complete\":") ||
         lit(b, sertrace_dump_complete(d) ? "true" : "false") || lit(b, ",\"nodes\":") ||
         put_u64(b, xd->n) || lit(b, ",\"max_depth\":") || put_u64(b, xd->max_depth) ||
         lit(b, ",\"errors\":") || put_u64(b, d->errors) || lit(b, ",\"flagged_nodes\":") ||
         put_u64(b, xd->flagged) || lit(b, "}}");
    return rc ? -1 : 0;
}

/* ---- the visitor ------------------------------------------------------------ */

static void free_dump_buf(dump_buf *db)
{
    if (!db)
        return;
    free(db->nodes);
    free(db->errors);
    free(db->notes);
    sertrace_buf_free(&db->arena);
    free(db);
}

static int v_dump_open(void *ctx, sertrace_dump_state *d)
{
    (void)ctx;
    d->user = calloc(1, sizeof(dump_buf));
    return d->user ? 0 : -1;
}

static int v_node_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)ctx;
    dump_buf *db = d->user;
    int kept = SERTRACE_NODEBUF_KEEP(db, n);
    if (kept <= 0)
        return kept;
    SERTRACE_NODEBUF_COPY(&db->nodes[n->user], d, n);
    return 0;
}

static int v_node_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)ctx;
    dump_buf *db = d->user;
    if (n->user >= db->n)
        return 0;
    xnode *xn = &db->nodes[n->user];
    xn->bytes = n->bytes;
    xn->self = n->bytes >= n->child_bytes ? n->bytes - n->child_bytes : 0;
    xn->flags = n->flags;
    xn->type = n->type; /* a placeholder may learn its type late */
    return 0;
}

/* Keep two strings for node `n` in *list (errors or notes); past
 * MAX_ERRORS_KEPT they are dropped (the dump's `errors` count stays). */
static int keep_texts(dump_buf *db, xerror **list, uint32_t *count, uint32_t *cap,
                      const sertrace_node *n, const char *msg, size_t msg_len, const char *path,
                      size_t path_len)
{
    if (*count >= MAX_ERRORS_KEPT || msg_len > UINT32_MAX / 4 || path_len > UINT32_MAX / 4 ||
        db->arena.len + msg_len + path_len > UINT32_MAX / 2)
        return 0;
    if (*count == *cap) {
        uint32_t c = *cap ? *cap * 2 : 8;
        xerror *e = realloc(*list, c * sizeof *e);
        if (!e)
            return -1;
        *list = e;
        *cap = c;
    }
    xerror *e = &(*list)[*count];
    e->node = n && n->user < db->n ? (uint32_t)n->user : UINT32_MAX;
    e->msg_off = (uint32_t)db->arena.len;
    e->msg_len = (uint32_t)msg_len;
    if (sertrace_buf_append(&db->arena, msg, msg_len) < 0)
        return -1;
    e->path_off = (uint32_t)db->arena.len;
    e->path_len = (uint32_t)path_len;
    if (sertrace_buf_append(&db->arena, path, path_len) < 0)
        return -1;
    (*count)++;
    return 0;
}

static int v_error(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                   const char *msg, size_t msg_len, const char *path, size_t path_len)
{
    (void)ctx;
    (void)tag;
    (void)type;
    dump_buf *db = d->user;
    return keep_texts(db, &db->errors, &db->nerrors, &db->errors_cap, n, msg, msg_len, path,
                      path_len);
}

static int v_note(void *ctx, sertrace_dump_state *d, sertrace_node *n, const char *key,
                  size_t key_len, const char *value, size_t value_len)
{
    (void)ctx;
    dump_buf *db = d->user;
    return keep_texts(db, &db->notes, &db->nnotes, &db->notes_cap, n, key, key_len, value,
                      value_len);
}

/* The opening part of output f's document, before its first dump or at
 * the end when no dump came (speedscope's header, perfetto's array). */
static int start_document(sertrace_export *x, int f, output *o)
{
    if (o->started)
        return 0;
    o->started = true;
    switch (f) {
    case SERTRACE_EXPORT_SPEEDSCOPE:
        return speedscope_start(x, &o->buf);
    case SERTRACE_EXPORT_PERFETTO:
        return lit(&o->buf, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    default:
        return 0;
    }
}

/* After output f wrote a part: a failure stops every output, else the
 * buffer goes out when full (`force`: now). */
static void settle(sertrace_export *x, output *o, int rc, bool force)
{
    if (rc < 0)
        x->failed = -1;
    else
        flush_output(x, o, force);
}

static int write_dump(sertrace_export *x, const xdump *xd)
{
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS && x->failed == 0; f++) {
        output *o = &x->out[f];
        sertrace_buf *b = &o->buf;
        if (!o->on)
            continue;
        int rc = start_document(x, f, o);
        if (rc == 0 && o->items &&
            (f == SERTRACE_EXPORT_SPEEDSCOPE || f == SERTRACE_EXPORT_PERFETTO))
            rc = lit(b, ",\n");
        if (rc == 0) {
            switch (f) {
            case SERTRACE_EXPORT_FOLDED:
                rc = write_folded(x, b, xd);
                break;
            case SERTRACE_EXPORT_SPEEDSCOPE:
                rc = write_speedscope(x, b, xd);
                break;
            case SERTRACE_EXPORT_PERFETTO:
                rc = write_perfetto(xd, b);
                break;
            case SERTRACE_EXPORT_HTML:
                rc = sertrace_html_dump(x->html, b, xd);
                break;
            }
        }
        o->items++;
        settle(x, o, rc, false);
    }
    return x->failed;
}

static int v_dump_close(void *ctx, sertrace_dump_state *d)
{
    sertrace_export *x = ctx;
    dump_buf *db = d->user;
    d->user = NULL;
    if (!db)
        return 0;
    xdump xd = {0};
    xd.d = d;
    xd.nodes = db->nodes;
    xd.n = db->n;
    xd.errors = db->errors;
    xd.nerrors = db->nerrors;
    xd.notes = db->notes;
    xd.nnotes = db->nnotes;
    xd.arena = db->arena.data ? db->arena.data : "";
    xd.index = x->dumps;
    xd.has_payload = (d->flags & SERTRACE_DUMPF_END) != 0;
    xd.status = !xd.has_payload                            ? "unknown"
                : (d->flags & SERTRACE_DUMPF_STATUS_ERROR) ? "error"
                                                           : "ok";
    for (uint32_t i = 0; i < db->n; i++) {
        xnode *n = &db->nodes[i];
        if (n->depth == 1)
            xd.root_sum += n->bytes;
        if (n->depth > xd.max_depth)
            xd.max_depth = n->depth;
    }
    if (xd.has_payload && d->payload_bytes > xd.root_sum)
        xd.dump_self = d->payload_bytes - xd.root_sum;
    xd.total = xd.root_sum + xd.dump_self;
    uint64_t threshold = x->o.oversize_bytes;
    if (x->o.oversize_percent > 0) {
        uint64_t base = xd.has_payload ? d->payload_bytes : xd.root_sum;
        uint64_t t = (uint64_t)((double)base * x->o.oversize_percent / 100.0);
        threshold = t ? t : 1;
    }
    bool lower = (d->flags & SERTRACE_DUMPF_LOWER_BOUNDS) != 0;
    for (uint32_t i = 0; i < db->n; i++) {
        xnode *n = &db->nodes[i];
        if (lower)
            n->flags |= SERTRACE_NODE_LOWER_BOUND;
        if (threshold && n->bytes >= threshold)
            n->flags |= XFLAG_OVERSIZED;
        sertrace_node tmp = {0};
        tmp.flags = n->flags & 0x3ff;
        n->bound = (uint8_t)sertrace_node_bound(&tmp);
        if (n->flags & ~(SERTRACE_NODE_LOWER_BOUND | SERTRACE_NODE_CHILD_INEXACT))
            xd.flagged++;
    }
    int rc = write_dump(x, &xd);
    x->dumps++;
    free_dump_buf(db);
    return rc;
}

/* ---- public ----------------------------------------------------------------- */

sertrace_export *sertrace_export_create(const sertrace_export_opts *opts)
{
    sertrace_export *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->o = *opts;
    x->title = strdup(opts->title ? opts->title : "sertrace");
    if (!x->title) {
        free(x);
        return NULL;
    }
    x->o.title = x->title;
    return x;
}

int sertrace_export_add_output(sertrace_export *x, enum sertrace_export_format format,
                               sertrace_summary_write_fn write, void *write_ctx)
{
    if ((unsigned)format >= SERTRACE_EXPORT_NFORMATS || x->out[format].on || !write)
        return -1;
    if (format == SERTRACE_EXPORT_HTML) {
        x->html = sertrace_html_create(x->title);
        if (!x->html)
            return -1;
    }
    x->out[format].on = true;
    x->out[format].write = write;
    x->out[format].write_ctx = write_ctx;
    return 0;
}

void sertrace_export_visitor(sertrace_export *x, sertrace_core_visitor *v)
{
    SERTRACE_NODEBUF_VISITOR(v, x);
}

int sertrace_export_finish(sertrace_export *x, const sertrace_core_stats *stats)
{
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS && x->failed == 0; f++) {
        output *o = &x->out[f];
        if (!o->on)
            continue;
        int rc = start_document(x, f, o);
        if (rc == 0) {
            switch (f) {
            case SERTRACE_EXPORT_SPEEDSCOPE:
                rc = speedscope_end(x, &o->buf);
                break;
            case SERTRACE_EXPORT_PERFETTO:
                rc = lit(&o->buf, "\n],\"otherData\":{\"exporter\":\"sertrace\"}}\n");
                break;
            case SERTRACE_EXPORT_HTML:
                rc = sertrace_html_finish(x->html, &o->buf, stats);
                break;
            default:
                break;
            }
        }
        settle(x, o, rc, true);
    }
    return x->failed;
}

void sertrace_export_destroy(sertrace_export *x)
{
    if (!x)
        return;
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        sertrace_buf_free(&x->out[f].buf);
    sertrace_buf_free(&x->path);
    free(x->path_len);
    free(x->stack);
    free(x->type_frame);
    free(x->frames.slots);
    free(x->frames.off);
    free(x->frames.len);
    sertrace_buf_free(&x->frames.names);
    sertrace_html_destroy(x->html);
    free(x->title);
    free(x);
}

const char *sertrace_export_format_name(enum sertrace_export_format format)
{
    static const char *const names[] = {"folded", "speedscope", "perfetto", "html"};
    return (unsigned)format < SERTRACE_EXPORT_NFORMATS ? names[format] : "?";
}
