/* summary-json.c -- the summary's JSON writer: the output for scripts.
 *
 * Turns the model of summary-internal.h into ONE JSON object, versioned
 * ({"format": "sertrace-summary", "version": 1, "dumps": [...], "totals":
 * {...}, "filter": ...}; the schema is documented in analyzers/README.md).
 * Every string from the trace goes through sertrace_fmt_json_string.
 * Appends go to a sertrace_buf whose first error sticks, so each function
 * writes straight through and returns the buffer's error once; the rows
 * written for every dump (kinds, types, top entries) are built through a
 * pointer after one ensure() (outbuf.h).
 */
#include <string.h>

#include "losses.h"
#include "summary-internal.h"

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

/* ", \"bound\": \"...\"" of an inexact node ("" when exact). */
static const char *bound_json(int bound)
{
    return bound == SERTRACE_BOUND_UPPER     ? ", \"bound\": \"upper\""
           : bound == SERTRACE_BOUND_UNKNOWN ? ", \"bound\": \"unknown\""
           : bound == SERTRACE_BOUND_LOWER   ? ", \"bound\": \"lower\""
                                             : "";
}

static void put_u64_field(sertrace_buf *b, const char *name, uint64_t v)
{
    put_str(b, name);
    put_u64(b, v);
}

static void put_bool_field(sertrace_buf *b, const char *name, bool v)
{
    put_str(b, name);
    if (v)
        buf_lit(b, "true");
    else
        buf_lit(b, "false");
}

/* `s` as a JSON string, or null when NULL. */
static void put_string_or_null(sertrace_buf *b, const char *s, size_t n)
{
    if (s)
        sertrace_fmt_json_string(b, s, n);
    else
        buf_lit(b, "null");
}

/* ", \"count\": N, \"bytes\": N, \"self\": N, \"share\": R}": one ensure,
 * written through a pointer (runs for every kind and type row of every
 * dump).  With `refs` (type rows), "objects" and "refs" end the row: of
 * the `count` nodes, those that wrote an object and the memo references
 * to one ("count" keeps its meaning, all nodes of the type). */
static void put_stat(sertrace_buf *b, const node_stat *st, uint64_t whole, bool refs)
{
    if (ensure(b, 80 + 5 * 20 + 32) < 0)
        return;
    char *p = b->data + b->len;
    p = p_lit(p, ", \"count\": ");
    p = p_u64(p, st->count);
    p = p_lit(p, ", \"bytes\": ");
    p = p_u64(p, st->bytes);
    p = p_lit(p, ", \"self\": ");
    p = p_u64(p, st->self);
    p = p_lit(p, ", \"share\": ");
    p = p_ratio(p, st->self, whole);
    if (refs) {
        p = p_lit(p, ", \"objects\": ");
        p = p_u64(p, st->count - st->refs);
        p = p_lit(p, ", \"refs\": ");
        p = p_u64(p, st->refs);
        p = p_lit(p, ", \"owned\": ");
        p = p_u64(p, st->owned);
    }
    *p++ = '}';
    put_end(b, p);
}

static void put_kinds(sertrace_buf *b, const node_stat *kinds, const uint8_t *touched,
                      unsigned ntouched, uint64_t whole)
{
    bool first = true;
    buf_lit(b, "[");
    FOR_KINDS(t, kinds, touched, ntouched)
    {
        const struct tag_text *tx = &summary_tag_texts[t];
        if (ensure(b, 40 + tx->len + tx->meaning_len) < 0)
            return;
        char *p = b->data + b->len;
        if (!first)
            p = p_lit(p, ", ");
        p = p_lit(p, "{\"tag\": \"");
        p = p_mem(p, tx->text, tx->len);
        p = p_lit(p, "\", \"kind\": \"");
        p = p_mem(p, tx->meaning, tx->meaning_len);
        *p++ = '"';
        put_end(b, p);
        put_stat(b, &kinds[t], whole, false);
        first = false;
    }
    buf_lit(b, "]");
}

/* One "by_type" row; `name` NULL: null. */
static void put_type_row(sertrace_buf *b, bool first, const char *name, size_t len,
                         const node_stat *st, uint64_t whole)
{
    if (first)
        buf_lit(b, "{\"type\": ");
    else
        buf_lit(b, ", {\"type\": ");
    put_string_or_null(b, name, len);
    put_stat(b, st, whole, true);
}

/* A "by_type" row whose name is escaped once per dump (the cache). */
static void put_type_row_cached(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                                bool first, uint32_t type, const node_stat *st, uint64_t whole)
{
    const char *esc;
    size_t len;
    if (summary_cached_name(s, d, type, &esc, &len) < 0) {
        summary_fail(b);
        return;
    }
    if (ensure(b, len + 16) < 0)
        return;
    char *p = b->data + b->len;
    p = first ? p_lit(p, "{\"type\": \"") : p_lit(p, ", {\"type\": \"");
    p = p_mem(p, esc, len);
    *p++ = '"';
    put_end(b, p);
    put_stat(b, st, whole, true);
}

/* `, "path": "Session.cache"` of a top entry (null without labels),
 * `, "refs": N`: the memo references to it in its dump, and
 * `, "retained_bytes": N`: what the payload would lose without it
 * (summary-shared.c; null when not exact). */
static void put_path(sertrace_buf *b, const top_raw *r)
{
    put_u64_field(b, ", \"refs\": ", r->refs);
    if (r->has_retained)
        put_u64_field(b, ", \"retained_bytes\": ", r->retained);
    else
        buf_lit(b, ", \"retained_bytes\": null");
    buf_lit(b, ", \"path\": ");
    if (r->path_len > 0)
        sertrace_fmt_json_string(b, r->path, r->path_len);
    else
        buf_lit(b, "null");
}

/* `, "ancestry": [...]}`: how every entry ends (a flag, a top node, a
 * note on a node). */
static int entry_end(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     const top_raw *r)
{
    buf_lit(b, ", \"ancestry\": ");
    if (summary_ancestry(s, b, d, r, true) < 0)
        return summary_fail(b);
    buf_lit(b, "}");
    return sertrace_buf_error(b);
}

/* A top entry of the dump being written: one ensure, written through a
 * pointer (every dump's top-N goes through here). */
static int top_entry_cached(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                            const top_raw *r)
{
    size_t name_len;
    const char *name = sertrace_core_type_name(d, r->type, &name_len);
    const char *esc = NULL;
    size_t esc_len = 0;
    if (name && summary_cached_name(s, d, r->type, &esc, &esc_len) < 0)
        return summary_fail(b);
    const struct tag_text *tx = &summary_tag_texts[r->tag];
    if (ensure(b, 160 + 3 * 20 + tx->len + esc_len) < 0)
        return -1;
    char *p = b->data + b->len;
    p = p_lit(p, "{\"bytes\": ");
    p = p_u64(p, r->bytes);
    p = p_lit(p, ", \"self\": ");
    p = p_u64(p, r->self);
    if (raw_exact(r)) {
        p = p_lit(p, ", \"exact\": true, \"depth\": ");
    } else {
        const char *bj = bound_json(raw_bound(r));
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
    put_end(b, p);
    put_path(b, r);
    return entry_end(s, b, d, r);
}

/* {"kind": ..., "path": ..., "message": ..., "bytes": ..., "ancestry": ...}
 * (a flag) or {"bytes": ..., "ancestry": ...} (a top entry). */
static int json_entry(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                      const top_raw *r, const char *kind, const char *message, size_t message_len,
                      const char *path, size_t path_len)
{
    if (!kind && s->cache_on)
        return top_entry_cached(s, b, d, r);
    char tmp[8];
    size_t name_len;
    const char *name = sertrace_core_type_name(d, r->type, &name_len);
    buf_lit(b, "{");
    if (kind) {
        buf_lit(b, "\"kind\": \"");
        put_str(b, kind);
        buf_lit(b, "\", \"path\": ");
        if (path && path_len) {
            sertrace_fmt_json_string(b, path, path_len);
        } else {
            /* no path from the serializer: the ancestry, as text */
            sertrace_buf p = SERTRACE_BUF_INIT;
            s->o.json = false;
            int rc = summary_ancestry(s, &p, d, r, false);
            s->o.json = true;
            if (rc < 0)
                summary_fail(b);
            else
                sertrace_fmt_json_string(b, p.data ? p.data : "", p.len);
            sertrace_buf_free(&p);
        }
        buf_lit(b, ", \"message\": ");
        if (message)
            sertrace_fmt_json_string(b, message, message_len);
        else
            sertrace_fmt_json_string(b, kind, strlen(kind));
        buf_lit(b, ", ");
    }
    put_u64_field(b, "\"bytes\": ", r->bytes);
    put_u64_field(b, ", \"self\": ", r->self);
    if (raw_exact(r))
        buf_lit(b, ", \"exact\": true, \"depth\": ");
    else
        sertrace_buf_appendf(b, ", \"exact\": false%s, \"depth\": ", bound_json(raw_bound(r)));
    put_u64(b, r->depth);
    buf_lit(b, ", \"tag\": \"");
    put_str(b, sertrace_tag_text(r->tag, tmp));
    buf_lit(b, "\", \"type\": ");
    put_string_or_null(b, name, name_len);
    if (!kind)
        put_path(b, r);
    return entry_end(s, b, d, r);
}

static int json_nodeless_error(sertrace_buf *b, const char *message, size_t message_len,
                               const char *path, size_t path_len)
{
    buf_lit(b, "{\"kind\": \"unserializable\", \"path\": ");
    sertrace_fmt_json_string(b, path, path_len);
    buf_lit(b, ", \"message\": ");
    sertrace_fmt_json_string(b, message, message_len);
    buf_lit(b, ", \"bytes\": null}");
    return sertrace_buf_error(b);
}

static int json_note(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                     const sertrace_node *n, const top_raw *r, bool first, const char *key,
                     size_t key_len, const char *value, size_t value_len)
{
    if (first)
        buf_lit(b, "{\"key\": ");
    else
        buf_lit(b, ", {\"key\": ");
    sertrace_fmt_json_string(b, key, key_len);
    buf_lit(b, ", \"value\": ");
    sertrace_fmt_json_string(b, value, value_len);
    if (!n) {
        buf_lit(b, ", \"tag\": null, \"type\": null, \"depth\": 0, \"ancestry\": []}");
        return sertrace_buf_error(b);
    }
    char tmp[8];
    size_t name_len;
    const char *name = sertrace_core_type_name(d, n->type, &name_len);
    buf_lit(b, ", \"tag\": \"");
    put_str(b, sertrace_tag_text(n->tag, tmp));
    buf_lit(b, "\", \"type\": ");
    put_string_or_null(b, name, name_len);
    put_u64_field(b, ", \"depth\": ", n->depth);
    return entry_end(s, b, d, r);
}

static void start_json(sertrace_summary *s)
{
    if (s->json_started)
        return;
    s->json_started = true;
    buf_lit(&s->out, "{\"format\": \"sertrace-summary\", \"version\": 1, \"dumps\": [");
}

/* The dump's figures, from "pid" to "lost". */
static void dump_header(sertrace_summary *s, sertrace_buf *b, const sertrace_dump_state *d,
                        const dump_sum *ds)
{
    put_str(b, s->any_dump ? ",\n{\"pid\": " : "\n{\"pid\": ");
    s->any_dump = true;
    put_i64(b, d->pid);
    buf_lit(b, ", \"tid\": ");
    put_i64(b, d->tid);
    put_u64_field(b, ", \"dump_id\": ", d->dump_id);
    if (s->o.input) { /* a file of pickles: where the dump is in it */
        buf_lit(b, ", \"input\": ");
        put_string_or_null(b, s->o.input, strlen(s->o.input));
        put_u64_field(b, ", \"input_offset\": ", s->input_off);
    }
    buf_lit(b, ", \"time_ns\": ");
    put_i64(b, d->ts_begin);
    buf_lit(b, ", \"serializer\": ");
    put_string_or_null(b, d->serializer_len ? d->serializer : NULL, d->serializer_len);
    buf_lit(b, ", \"protocol\": ");
    put_i64(b, d->protocol);
    buf_lit(b, ", \"payload_bytes\": ");
    if (d->flags & SERTRACE_DUMPF_END)
        put_u64(b, d->payload_bytes);
    else
        buf_lit(b, "null");
    put_u64_field(b, ", \"root_bytes\": ", ds->root_bytes);
    put_bool_field(b, ", \"root_exact\": ", ds->root_exact);
    put_u64_field(b, ", \"seen_bytes\": ", d->max_pos);
    put_u64_field(b, ", \"oob_bytes\": ", d->oob_bytes);
    put_bool_field(b, ", \"sizes_are_lower_bounds\": ", s->lower);
    put_bool_field(b, ", \"complete\": ", sertrace_dump_complete(d));
    put_bool_field(b, ", \"unfinished\": ", (d->flags & SERTRACE_DUMPF_UNFINISHED) != 0);
    put_bool_field(b, ", \"end_lost\": ", (d->flags & SERTRACE_DUMPF_END_LOST) != 0);
    buf_lit(b, ", \"status\": \"");
    put_str(b, status_text(d));
    put_u64_field(b, "\", \"nodes\": ", d->nodes);
    put_u64_field(b, ", \"max_depth\": ", d->max_depth);
    put_u64_field(b, ", \"errors\": ", d->errors);
    put_bool_field(b, ", \"lost\": {\"begin_missing\": ", !(d->flags & SERTRACE_DUMPF_BEGIN));
    put_u64_field(b, ", \"records_events\": ", d->lost_batches);
    put_u64_field(b, ", \"discarded_events\": ", d->discarded);
    put_u64_field(b, ", \"malformed_batches\": ", d->malformed);
    put_u64_field(b, ", \"orphan_exits\": ", d->orphan_exits);
    put_u64_field(b, ", \"lost_exits\": ", d->lost_exits);
    put_u64_field(b, ", \"lost_enters\": ", d->lost_enters);
    put_u64_field(b, ", \"skipped_deep_enters\": ", d->skipped_deep);
    buf_lit(b, "}");
}

/* "flags": the dump-level ones first (incomplete, discarded), then the
 * nodes'. */
static void dump_flags(sertrace_buf *b, const sertrace_dump_state *d, const dump_sum *ds)
{
    bool first = true;
    buf_lit(b, ", \"flags\": [");
    if (!sertrace_dump_complete(d)) {
        sertrace_buf m = SERTRACE_BUF_INIT;
        if (sertrace_dump_losses(&m, d) < 0)
            summary_fail(b);
        buf_lit(b, "{\"kind\": \"incomplete\", \"path\": ");
        if (ds->died_text)
            sertrace_fmt_json_string(b, ds->died_text, strlen(ds->died_text));
        else
            buf_lit(b, "\"\"");
        buf_lit(b, ", \"message\": ");
        sertrace_fmt_json_string(b, m.data ? m.data : "", m.len);
        buf_lit(b, "}");
        sertrace_buf_free(&m);
        first = false;
    }
    if (d->discarded) {
        sertrace_buf_appendf(b,
                             "%s{\"kind\": \"discarded\", \"path\": \"\", \"message\": \"%llu "
                             "events discarded by the tracer while this dump was live\", "
                             "\"count\": %llu}",
                             first ? "" : ", ", (unsigned long long)d->discarded,
                             (unsigned long long)d->discarded);
        first = false;
    }
    for (unsigned i = 0; i < ds->nflags; i++) {
        if (!first)
            buf_lit(b, ", ");
        put_str(b, ds->flags[i].str);
        first = false;
    }
    put_u64_field(b, "], \"flags_dropped\": ", ds->flags_dropped);
}

static int json_dump(sertrace_summary *s, const sertrace_dump_state *d, const dump_sum *ds,
                     const type_row *rows, unsigned nrows, uint64_t whole)
{
    sertrace_buf *b = &s->out;
    start_json(s);
    dump_header(s, b, d, ds);
    buf_lit(b, ", \"by_kind\": ");
    put_kinds(b, ds->kinds, ds->touched, ds->ntouched, whole);
    buf_lit(b, ", \"by_type\": [");
    for (unsigned i = 0; i < nrows; i++) {
        size_t len;
        const char *name = sertrace_core_type_name(d, rows[i].type, &len);
        if (name && s->cache_on) /* the escaped name, once per dump */
            put_type_row_cached(s, b, d, i == 0, rows[i].type, &rows[i].st, whole);
        else
            put_type_row(b, i == 0, name, len, &rows[i].st, whole);
    }
    buf_lit(b, "], \"top\": [");
    for (unsigned i = 0; i < ds->ntop && !b->err; i++) {
        if (i)
            buf_lit(b, ", ");
        json_entry(s, b, d, &ds->top[s->order[i]], NULL, NULL, 0, NULL, 0);
    }
    buf_lit(b, "], \"died_in\": ");
    if (ds->died_json)
        put_str(b, ds->died_json);
    else
        buf_lit(b, "null");
    /* the chain at the last record the trace holds */
    put_bool_field(b, ", \"died_in_as_of_last_record\": ", ds->died_json != NULL);
    dump_flags(b, d, ds);
    buf_lit(b, ", \"notes\": [");
    if (ds->notes.len)
        app(b, ds->notes.data, ds->notes.len);
    put_u64_field(b, "], \"notes_dropped\": ", ds->notes_dropped);
    if (s->o.paths) {
        buf_lit(b, ", \"paths\": ");
        sertrace_pathstats_write(ds->paths, b, true, s->o.top, d->payload_bytes, false, 0);
    }
    buf_lit(b, "}");
    return sertrace_buf_error(b);
}

static int json_totals(sertrace_summary *s, type_total *const *rows, size_t nrows, uint64_t whole,
                       uint64_t discarded, uint64_t lost)
{
    sertrace_buf *b = &s->out;
    start_json(s);
    uint8_t used[256];
    unsigned nused = summary_kinds_used(s, used);
    put_u64_field(b, "\n], \"totals\": {\"dumps\": ", s->dumps);
    put_u64_field(b, ", \"complete\": ", s->complete);
    put_u64_field(b, ", \"incomplete\": ", s->dumps - s->complete);
    put_u64_field(b, ", \"unfinished\": ", s->unfinished);
    put_u64_field(b, ", \"end_lost\": ", s->end_lost);
    put_u64_field(b, ", \"payload_bytes\": ", s->payload_bytes);
    put_u64_field(b, ", \"oob_bytes\": ", s->oob_bytes);
    put_u64_field(b, ", \"nodes\": ", s->nodes);
    put_u64_field(b, ", \"lower_bound_dumps\": ", s->lower_dumps);
    put_u64_field(b, ", \"discarded_events\": ", discarded);
    put_u64_field(b, ", \"lost_records_events\": ", lost);
    buf_lit(b, ", \"by_kind\": ");
    put_kinds(b, s->kinds, used, nused, whole); /* the kinds added to, in tag order */
    buf_lit(b, ", \"by_type\": [");
    for (size_t i = 0; i < nrows && !b->err; i++) {
        put_type_row(b, i == 0, rows[i]->name, rows[i]->len, &rows[i]->st, whole);
        if (b->len >= FLUSH_AT && summary_flush(s, false) < 0)
            return -1;
    }
    put_u64_field(b, "], \"types_not_kept\": ", s->types_overflow);
    buf_lit(b, ", \"top\": [");
    for (unsigned i = 0; i < s->ntop; i++) {
        if (i)
            buf_lit(b, ", ");
        put_str(b, s->top[i].str);
    }
    buf_lit(b, "]");
    if (s->o.paths) {
        buf_lit(b, ", \"paths\": ");
        if (s->paths)
            sertrace_pathstats_write(s->paths, b, true, s->o.top, s->payload_bytes, false, 0);
        else
            buf_lit(b, "[]");
    }
    buf_lit(b, "}, \"filter\": ");
    if (s->filter.len)
        app(b, s->filter.data, s->filter.len);
    else
        buf_lit(b, "null");
    buf_lit(b, "}\n");
    return sertrace_buf_error(b);
}

const summary_writer summary_json_writer = {
    .entry = json_entry,
    .nodeless_error = json_nodeless_error,
    .note = json_note,
    .dump = json_dump,
    .totals = json_totals,
};
