/* summary-text.c -- the summary's text writer: the output for people.
 *
 * Turns the model of summary-internal.h into the per-dump sections and the
 * overall tables: a header line pair per dump, the "by kind" and "by type"
 * tables (one legend per output), the largest nodes with their ancestry,
 * notes and flags.  Every string from the trace goes through
 * sertrace_fmt_escape.  Appends go to a sertrace_buf whose first error
 * sticks, so each function writes straight through and returns the
 * buffer's error once; table rows, written for every dump, are built
 * through a pointer after one ensure() (outbuf.h).
 */
#include <stdio.h>
#include <string.h>

#include "losses.h"
#include "summary-internal.h"

#define TEXT_TYPES_MAX 10 /* type rows per dump in the text output */
#define LABEL_MIN 16      /* text tables: label column width */
#define LABEL_MAX 40      /* ... widened up to this for long type names */

static void put_spaces(sertrace_buf *b, size_t n)
{
    static const char sp[] = "                                ";
    while (n > 0) {
        size_t k = n < sizeof sp - 1 ? n : sizeof sp - 1;
        app(b, sp, k);
        n -= k;
    }
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

/* "≥ " prefix when inexact, then the size. */
static int put_size(sertrace_buf *b, uint64_t bytes, bool exact, bool exact_fmt)
{
    if (!exact)
        buf_lit(b, "\xe2\x89\xa5 ");
    sertrace_fmt_size(b, bytes, exact_fmt);
    return sertrace_buf_error(b);
}

/* "  by WHAT ... COUNTED incl. self share"; `width` is the label column's
 * (16, or the longest type name shown, up to LABEL_MAX); `counted` names
 * the count column ("count": nodes; "objects": nodes less memo refs). */
static void put_table_header(sertrace_buf *b, const char *what, size_t width, const char *counted)
{
    buf_lit(b, "  by ");
    put_str(b, what);
    put_spaces(b, width - 1 > strlen(what) ? width - 1 - strlen(what) : 0);
    put_spaces(b, 9 - strlen(counted));
    put_str(b, counted);
    buf_lit(b, "        incl.         self   share\n");
}

/* Once per output, before the first table. */
static void put_legend(sertrace_summary *s, sertrace_buf *b)
{
    if (s->legend_done)
        return;
    s->legend_done = true;
    buf_lit(b, "  (incl. = bytes including children; self = own bytes; "
               "share = self / root bytes)\n");
}

/* One row: "    LABEL            COUNT        INCL.         SELF  SHARE  TAIL",
 * the label padded to `width` columns.
 * The fixed part is written through a pointer after one ensure(): this
 * runs for every row of every dump's tables. */
static void put_row(sertrace_summary *s, sertrace_buf *b, const char *label, size_t ll,
                    size_t width, const node_stat *st, uint64_t whole, const char *tail,
                    size_t tail_len)
{
    char cnt[24], pct[32], tot[32], self[32];
    size_t ci = sizeof cnt, pi = sizeof pct;
    uint64_t v = st->count;
    do {
        cnt[--ci] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    uint64_t p10 = whole ? (uint64_t)((double)st->self * 1000.0 / (double)whole + 0.5) : 0;
    pct[--pi] = '%';
    pct[--pi] = (char)('0' + p10 % 10);
    pct[--pi] = '.';
    p10 /= 10;
    do {
        pct[--pi] = (char)('0' + p10 % 10);
        p10 /= 10;
    } while (p10);
    sertrace_buf tb = {tot, 0, sizeof tot, 0}, sb = {self, 0, sizeof self, 0};
    if (put_size(&tb, st->bytes, !s->lower, s->o.exact) < 0 ||
        put_size(&sb, st->self, !s->lower, s->o.exact) < 0) {
        summary_fail(b);
        return;
    }
    size_t cols = utf8_cols(label, ll);
    if (ensure(b, 4 + ll + width + 1 + 24 + 1 + 2 * 35 + 32 + 2 + tail_len + 1) < 0)
        return;
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
    memcpy(p, tail, tail_len);
    p += tail_len;
    *p++ = '\n';
    put_end(b, p);
}

static void put_kinds(sertrace_summary *s, sertrace_buf *b, const node_stat *kinds,
                      const uint8_t *touched, unsigned ntouched, uint64_t whole)
{
    put_legend(s, b);
    put_table_header(b, "kind", LABEL_MIN, "count");
    FOR_KINDS(t, kinds, touched, ntouched)
    {
        const struct tag_text *tx = &summary_tag_texts[t];
        put_row(s, b, tx->text, tx->len, LABEL_MIN, &kinds[t], whole, tx->meaning, tx->meaning_len);
    }
}

/* The "by type" table: `names[i]` (escaped, `lens[i]` bytes) and `st[i]`
 * for the `shown` rows printed, `more` rows left out.  A type counts its
 * objects; the memo references to them follow the row ("+ 200 refs"):
 * 200 objects written once and referenced 200 times are not 400. */
static void put_types(sertrace_summary *s, sertrace_buf *b, const char *const *names,
                      const size_t *lens, const node_stat *const *st, size_t shown, size_t more,
                      uint64_t whole)
{
    size_t width = LABEL_MIN;
    for (size_t i = 0; i < shown; i++)
        width = label_width(width, names[i], lens[i]);
    put_legend(s, b);
    put_table_header(b, "type", width, "objects");
    for (size_t i = 0; i < shown; i++) {
        node_stat objects = *st[i];
        char tail[48];
        int tail_len = 0;
        if (objects.refs) {
            objects.count -= objects.refs;
            tail_len = snprintf(tail, sizeof tail, "+ %llu ref%s", (unsigned long long)objects.refs,
                                objects.refs == 1 ? "" : "s");
        }
        if (objects.owned > objects.self) { /* "owns 512.0 KiB": its reduce's arguments */
            sertrace_buf o = SERTRACE_BUF_INIT;
            sertrace_fmt_size(&o, objects.owned, s->o.exact);
            int n = snprintf(tail + tail_len, sizeof tail - (size_t)tail_len, "%sowns %s",
                             tail_len ? "  " : "", o.data ? o.data : "?");
            if (n > 0 && (size_t)n < sizeof tail - (size_t)tail_len)
                tail_len += n;
            sertrace_buf_free(&o);
        }
        put_row(s, b, names[i], lens[i], width, &objects, whole, tail, (size_t)tail_len);
    }
    if (more)
        sertrace_buf_appendf(b, "    \xe2\x80\xa6 %zu more types\n", more);
}

/* "!! KIND ≤ SIZE (self SIZE)  ancestry: message at path". */
static int text_entry(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                      const top_raw *r, const char *kind, const char *message, size_t message_len,
                      const char *path, size_t path_len)
{
    int bound = raw_bound(r);
    if (kind) {
        buf_lit(b, "!! ");
        for (const char *k = kind; *k; k++) {
            char up = (char)(*k >= 'a' && *k <= 'z' ? *k - 32 : *k);
            app(b, &up, 1);
        }
        buf_lit(b, " ");
    }
    if (bound == SERTRACE_BOUND_UPPER)
        buf_lit(b, "\xe2\x89\xa4 "); /* "≤ ": an upper bound */
    else if (bound == SERTRACE_BOUND_UNKNOWN)
        buf_lit(b, "? ");
    put_size(b, r->bytes, bound != SERTRACE_BOUND_LOWER, s->o.exact);
    if (!kind) {
        /* self of a node whose exit may be another's: no bound */
        bool unsure = bound == SERTRACE_BOUND_UPPER || bound == SERTRACE_BOUND_UNKNOWN;
        buf_lit(b, " (self ");
        if (unsure)
            buf_lit(b, "? ");
        put_size(b, r->self, raw_self_exact(r) || unsure, s->o.exact);
        if (r->refs) /* "(self 3 B, 2 refs)": memo references to it */
            sertrace_buf_appendf(b, ", %llu ref%s", (unsigned long long)r->refs,
                                 r->refs == 1 ? "" : "s");
        if (r->has_retained && r->retained != r->bytes) {
            /* "retains 1.2 KiB": less than its bytes, as objects inside
             * it are referenced from elsewhere (summary-shared.c) */
            buf_lit(b, ", retains ");
            put_size(b, r->retained, true, s->o.exact);
        }
        buf_lit(b, ")");
    }
    buf_lit(b, "  ");
    if (!kind && r->path_len > 0) { /* "Session.cache  (Session › dict › dict)" */
        app(b, r->path, r->path_len);
        buf_lit(b, "  (");
    }
    if (summary_ancestry(s, b, d, r, false) < 0)
        return summary_fail(b);
    if (!kind && r->path_len > 0)
        buf_lit(b, ")");
    if (message) {
        buf_lit(b, ": ");
        sertrace_fmt_escape(b, message, message_len);
    }
    if (path && path_len) {
        buf_lit(b, " at ");
        sertrace_fmt_escape(b, path, path_len);
    }
    return sertrace_buf_error(b);
}

static int text_nodeless_error(sertrace_buf *b, const char *message, size_t message_len,
                               const char *path, size_t path_len)
{
    buf_lit(b, "!! UNSERIALIZABLE: ");
    sertrace_fmt_escape(b, message, message_len);
    if (path_len) {
        buf_lit(b, " at ");
        sertrace_fmt_escape(b, path, path_len);
    }
    return sertrace_buf_error(b);
}

static int text_note(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     const sertrace_node *n, const top_raw *r, bool first, const char *key,
                     size_t key_len, const char *value, size_t value_len)
{
    (void)first;
    buf_lit(b, "    @ ");
    sertrace_fmt_escape(b, key, key_len);
    buf_lit(b, " = ");
    sertrace_fmt_escape(b, value, value_len);
    if (!n) {
        buf_lit(b, "  (on the dump)\n");
        return sertrace_buf_error(b);
    }
    buf_lit(b, "  (on ");
    if (summary_ancestry(s, b, d, r, false) < 0)
        return summary_fail(b);
    buf_lit(b, ")\n");
    return sertrace_buf_error(b);
}

/* "dump N · pid P · tid T · SERIALIZER protocol N · TIME" and the line
 * after it (payload, nodes, depth, status, completeness). */
static void dump_header(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d)
{
    bool complete = sertrace_dump_complete(d);
    buf_lit(b, "dump ");
    put_u64(b, d->dump_id);
    if (s->o.input) { /* "dump 2 · FILE · byte 188 · pickle protocol 4" */
        buf_lit(b, " \xc2\xb7 ");
        sertrace_fmt_escape(b, s->o.input, strlen(s->o.input));
        buf_lit(b, " \xc2\xb7 byte ");
        put_u64(b, s->input_off);
        buf_lit(b, " \xc2\xb7 ");
    } else {
        buf_lit(b, " \xc2\xb7 pid ");
        put_i64(b, d->pid);
        buf_lit(b, " \xc2\xb7 tid ");
        put_i64(b, d->tid);
        buf_lit(b, " \xc2\xb7 ");
    }
    if (d->serializer_len)
        sertrace_fmt_escape(b, d->serializer, d->serializer_len);
    else
        buf_lit(b, "?");
    buf_lit(b, " protocol ");
    put_i64(b, d->protocol);
    if (!s->o.input) {
        buf_lit(b, " \xc2\xb7 ");
        put_time(b, d->ts_begin, &s->tcache);
    }
    buf_lit(b, "\n  payload ");
    if (s->lower)
        buf_lit(b, "\xe2\x89\xa5 ");
    if (d->flags & SERTRACE_DUMPF_END) {
        put_u64(b, d->payload_bytes);
        buf_lit(b, " B");
    } else {
        buf_lit(b, "unknown (\xe2\x89\xa5 ");
        put_u64(b, d->max_pos);
        buf_lit(b, " B seen)");
    }
    if (d->oob_bytes) { /* "payload 19 B + 513.0 KiB out of band" (schema v5) */
        buf_lit(b, " + ");
        sertrace_fmt_size(b, d->oob_bytes, s->o.exact);
        buf_lit(b, " out of band");
    }
    buf_lit(b, " \xc2\xb7 ");
    put_u64(b, d->nodes);
    buf_lit(b, " nodes \xc2\xb7 depth ");
    put_u64(b, d->max_depth);
    buf_lit(b, " \xc2\xb7 status ");
    put_str(b, status_text(d));
    if (complete)
        buf_lit(b, " \xc2\xb7 complete");
    else
        buf_lit(b, " \xc2\xb7 INCOMPLETE (sizes marked \xe2\x89\xa5 are "
                   "lower bounds, self sizes not exact)");
    if (s->lower)
        buf_lit(b, "\n  sizes are lower bounds (\xe2\x89\xa5): the serializer could not "
                   "count every byte it wrote (see the dump's notes)");
    buf_lit(b, "\n");
}

/* A dump's type table: the TEXT_TYPES_MAX largest by self. */
static void dump_types(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                       const type_row *rows, unsigned nrows, uint64_t whole)
{
    const char *names[TEXT_TYPES_MAX];
    size_t lens[TEXT_TYPES_MAX];
    const node_stat *st[TEXT_TYPES_MAX];
    size_t shown = nrows < TEXT_TYPES_MAX ? nrows : TEXT_TYPES_MAX;
    for (size_t i = 0; i < shown; i++)
        if (summary_cached_name(s, d, rows[i].type, &names[i], &lens[i]) < 0) {
            summary_fail(b);
            return;
        }
    /* a later lookup may have grown the cache (realloc): take every
     * name's place again now that all are cached */
    for (size_t i = 0; i < shown; i++) {
        summary_cached_name(s, d, rows[i].type, &names[i], &lens[i]);
        st[i] = &rows[i].st;
    }
    put_types(s, b, names, lens, st, shown, nrows - shown, whole);
}

/* "paths" section: the largest path patterns (pathstats.h). */
static void text_paths(sertrace_summary *s, sertrace_buf *b, const sertrace_pathstats *p,
                       uint64_t payload)
{
    size_t n = p ? sertrace_pathstats_count(p) : 0;
    unsigned top = s->o.top;
    sertrace_buf_appendf(
        b, "  paths (%zu patterns%s; bytes incl. children; share = bytes / payload)\n", n,
        top && n > top ? ", largest first" : "");
    buf_lit(b, "       count         bytes          self   share  pattern\n");
    if (p)
        sertrace_pathstats_write(p, b, false, top, payload, s->o.exact, 4);
}

static int text_dump(sertrace_summary *s, const sertrace_dump_state *d, const dump_sum *ds,
                     const type_row *rows, unsigned nrows, uint64_t whole)
{
    sertrace_buf *b = &s->out;
    dump_header(s, b, d);
    if (!sertrace_dump_complete(d)) {
        buf_lit(b, "  !! incomplete: ");
        sertrace_dump_losses(b, d);
        buf_lit(b, "\n");
    }
    if (ds->died_text) {
        buf_lit(b, "  !! died in (as of its last recorded event): ");
        put_str(b, ds->died_text);
        buf_lit(b, "\n");
    }
    if (s->o.per_dump) {
        if (d->nodes)
            put_kinds(s, b, ds->kinds, ds->touched, ds->ntouched, whole);
        if (nrows)
            dump_types(s, b, d, rows, nrows, whole);
        if (ds->ntop) {
            buf_lit(b, "  top ");
            put_u64(b, ds->ntop);
            buf_lit(b, " largest nodes\n");
            for (unsigned i = 0; i < ds->ntop && !b->err; i++) {
                buf_lit(b, "    ");
                text_entry(s, b, d, &ds->top[s->order[i]], NULL, NULL, 0, NULL, 0);
                buf_lit(b, "\n");
            }
        }
        if (s->o.paths)
            text_paths(s, b, ds->paths, d->payload_bytes);
        if (ds->nnotes || ds->notes_dropped) {
            buf_lit(b, "  notes (");
            put_u64(b, ds->nnotes + ds->notes_dropped);
            buf_lit(b, ")\n");
            if (ds->notes.len)
                app(b, ds->notes.data, ds->notes.len);
            if (ds->notes_dropped)
                sertrace_buf_appendf(b, "    \xe2\x80\xa6 %llu more notes not kept\n",
                                     (unsigned long long)ds->notes_dropped);
        }
    }
    if (ds->nflags || ds->flags_dropped) {
        sertrace_buf_appendf(b, "  flags (%u)\n", ds->nflags + (unsigned)ds->flags_dropped);
        for (unsigned i = 0; i < ds->nflags; i++) {
            buf_lit(b, "    ");
            put_str(b, ds->flags[i].str);
            buf_lit(b, "\n");
        }
        if (ds->flags_dropped)
            sertrace_buf_appendf(b, "    \xe2\x80\xa6 %llu more flags not kept\n",
                                 (unsigned long long)ds->flags_dropped);
    }
    if (s->o.per_dump)
        buf_lit(b, "\n");
    return sertrace_buf_error(b);
}

static int text_totals(sertrace_summary *s, type_total *const *rows, size_t nrows, uint64_t whole,
                       uint64_t discarded, uint64_t lost)
{
    sertrace_buf *b = &s->out;
    sertrace_buf_appendf(b,
                         "== overall: %llu dumps, %llu complete, %llu incomplete "
                         "(%llu unfinished); payload %s%llu B; %llu nodes\n",
                         (unsigned long long)s->dumps, (unsigned long long)s->complete,
                         (unsigned long long)(s->dumps - s->complete),
                         (unsigned long long)s->unfinished, s->lower_dumps ? "\xe2\x89\xa5 " : "",
                         (unsigned long long)s->payload_bytes, (unsigned long long)s->nodes);
    if (s->oob_bytes)
        sertrace_buf_appendf(b,
                             "  + %llu B out of band (protocol 5 buffers handed to the "
                             "application, not in the payload)\n",
                             (unsigned long long)s->oob_bytes);
    if (s->lower_dumps)
        sertrace_buf_appendf(
            b, "  %llu dumps' sizes are lower bounds: the totals below are lower bounds\n",
            (unsigned long long)s->lower_dumps);
    s->lower = s->lower_dumps > 0; /* the overall tables */
    if (discarded || lost) {
        buf_lit(b, "  !! ");
        sertrace_stream_losses(b, discarded, lost);
        buf_lit(b, "\n");
    }
    if (s->nodes)
        put_kinds(s, b, s->kinds, NULL, 0, whole);
    if (nrows) {
        /* escaped names of the rows shown, one after the other */
        const char *names[2 * TEXT_TYPES_MAX];
        size_t lens[2 * TEXT_TYPES_MAX], offs[2 * TEXT_TYPES_MAX + 1];
        const node_stat *st[2 * TEXT_TYPES_MAX];
        size_t shown = nrows < 2 * TEXT_TYPES_MAX ? nrows : 2 * TEXT_TYPES_MAX;
        sertrace_buf *esc = &s->tmp;
        sertrace_buf_clear(esc);
        offs[0] = 0;
        for (size_t i = 0; i < shown; i++) {
            sertrace_fmt_escape(esc, rows[i]->name, rows[i]->len);
            offs[i + 1] = esc->len;
        }
        if (sertrace_buf_error(esc) < 0)
            return summary_fail(b);
        for (size_t i = 0; i < shown; i++) {
            names[i] = esc->data + offs[i];
            lens[i] = offs[i + 1] - offs[i];
            st[i] = &rows[i]->st;
        }
        put_types(s, b, names, lens, st, shown, nrows - shown, whole);
    }
    if (s->ntop) {
        sertrace_buf_appendf(b, "  top %u largest nodes\n", s->ntop);
        for (unsigned i = 0; i < s->ntop; i++)
            sertrace_buf_appendf(b, "    %s\n", s->top[i].str);
    }
    if (s->o.paths) /* over all dumps (pathstats merged at each dump close) */
        text_paths(s, b, s->paths, s->payload_bytes);
    return sertrace_buf_error(b);
}

const summary_writer summary_text_writer = {
    .entry = text_entry,
    .nodeless_error = text_nodeless_error,
    .note = text_note,
    .dump = text_dump,
    .totals = text_totals,
};
