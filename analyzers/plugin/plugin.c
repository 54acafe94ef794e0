/* plugin.c -- the babeltrace2 plugin `sertrace`: sink.sertrace.tree,
 * sink.sertrace.summary and sink.sertrace.export.
 *
 * The sinks are the same thin adapter: they pull messages from their
 * input port, decode the three sertrace events (schema.h) into plain
 * values and feed the tree core (analyzers/core), whose visitor is the
 * tree printer, the summary or the exports (core/export.h).  Shape follows babeltrace2's own sinks
 * and /work/shared notes: MIP 0, the iterator is created in
 * graph_is_configured, AGAIN is passed through (live), every message is
 * put.  Member indices, field kinds and the vpid/vtid positions are
 * looked up once per event class and cached (a small pointer-keyed hash),
 * so the per-event path does no lookup by name and no allocation (the
 * records copy buffer only grows).
 *
 * Parameters are declared in one table per component class; unknown
 * parameters and wrong types are errors naming the parameter.
 *
 * Filters (`pid`, `dump`, `serializer`: which dumps to show) are applied
 * here, on babeltrace2's thread, before an event's record bytes are copied
 * out of their one-field-per-byte array (the costly part of a sink's run):
 * an event of a dump left out costs two integer reads.  The pid and the
 * dump id are on every sertrace event; the serializer only on dump_begin,
 * so with a `serializer` filter the dumps whose dump_begin matched are
 * remembered (pid, dump id) until their dump_end, and records or ends of
 * any other dump (including one whose dump_begin is not in the trace: its
 * serializer is unknown) are left out.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <babeltrace2/babeltrace.h>
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "feed.h"
#include "params.h"
#include "format.h"
#include "sertrace/schema.h"
#include "summary.h"
#include "treeprint.h"
#include "export.h"

BT_PLUGIN_MODULE();
BT_PLUGIN(sertrace);
BT_PLUGIN_DESCRIPTION("sertrace: size trees of serializer dumps recorded with LTTng");
BT_PLUGIN_AUTHOR("sertrace authors");
BT_PLUGIN_LICENSE("MIT");

/* ---- per-event-class cache ---------------------------------------------- */

enum ev_kind { EV_OTHER = 0, EV_BEGIN, EV_RECORDS, EV_END };

#define NO_INDEX UINT64_MAX

typedef struct ec_info {
    const bt_event_class *ec; /* key (borrowed; lives as long as the trace) */
    enum ev_kind kind;
    bool sertrace; /* of the sertrace provider ("sertrace:..."), known or not */
    bool complete; /* every needed field found with the right type */
    uint64_t i_dump_id, i_serializer, i_protocol, i_seq, i_records, i_bytes, i_status;
    bool protocol_signed, status_signed;
    uint64_t i_vpid, i_vtid; /* in the common context */
    bool vpid_signed, vtid_signed;
    /* schema v2: the emitter's own pid/tid in the payload, right in a
     * forked child where LTTng's cached contexts are the parent's */
    uint64_t i_pid, i_tid;
    bool pid_signed, tid_signed;
    uint64_t i_batches; /* schema v2, dump_end */
    uint64_t i_flags;   /* schema v3, dump_end */
} ec_info;

typedef struct ec_cache {
    ec_info *slots;
    size_t cap; /* power of two */
    size_t used;
} ec_cache;

/* ---- component state --------------------------------------------------- */

enum sink_kind { SINK_TREE, SINK_SUMMARY, SINK_EXPORT };

typedef struct sink {
    enum sink_kind kind;
    bt_self_component *self;
    bt_message_iterator *it;
    sertrace_core *core;
    feed *feed; /* inline, or a worker thread running the core */
    sertrace_summary *summary;
    sertrace_treeprint *tree;
    sertrace_export *export;              /* sink.sertrace.export */
    FILE *xout[SERTRACE_EXPORT_NFORMATS]; /* its files (NULL: not asked) */
    FILE *out;
    bool own_out;
    bool finished;
    bool json; /* the summary in JSON */
    ec_cache cache;
    uint64_t unreadable;
    /* Filters (NULL/0: not given).  A dump is kept when it matches any
     * value given for each filter, and every filter given. */
    int64_t *f_pids;
    size_t n_pids;
    uint64_t *f_dumps;
    size_t n_dumps;
    char **f_sers;
    size_t n_sers;
    bool filtering;
    uint64_t dumps_left_out; /* dump_begin events of dumps not kept */
    /* Events seen: a trace without sertrace events is an error (another
     * provider's trace, an emptied stream file), not an empty report. */
    uint64_t sertrace_events, other_events;
    char other_name[128]; /* the first other event's name */
    /* With a serializer filter: the live dumps whose dump_begin matched. */
    struct kept_dump {
        int64_t pid;
        uint64_t id;
    } * kept;
    size_t nkept, kept_cap;
} sink;

/* ---- parameters ---------------------------------------------------------- */

/* The rows of params.h, with the sinks as a bit per sink_kind. */
typedef struct param_def {
    enum sertrace_sink_param id;
    const char *name;
    enum sertrace_sink_param_type type;
    unsigned sinks;
} param_def;

static const param_def params_table[] = {
#define PARAM_ROW_(id, name, type, tree, summary, export, syntax, help)                            \
    {SERTRACE_PARAM_##id, name, type,                                                              \
     (tree ? 1u << SINK_TREE : 0u) | (summary ? 1u << SINK_SUMMARY : 0u) |                         \
         (export ? 1u << SINK_EXPORT : 0u)},
    SERTRACE_SINK_PARAMS(PARAM_ROW_)
#undef PARAM_ROW_
};

typedef struct parsed_params {
    uint64_t oversize_bytes;
    double oversize_percent;
    uint64_t max_depth, min_size, top, max_flags;
    bool exact, json, per_dump, flush_each_dump, paths;
    int worker; /* -1: by the number of CPUs */
    const char *output;
    const char *exports[SERTRACE_EXPORT_NFORMATS]; /* export paths, NULL: not asked */
    const char *title;
    /* Filters: borrowed from the parameters map (arrays or single values). */
    const bt_value *pid, *dump, *serializer;
} parsed_params;

#define ERR(self, ...) BT_CURRENT_THREAD_ERROR_APPEND_CAUSE_FROM_COMPONENT(self, __VA_ARGS__)

static const char *value_type_name(const bt_value *v)
{
    switch (bt_value_get_type(v)) {
    case BT_VALUE_TYPE_NULL:
        return "null";
    case BT_VALUE_TYPE_BOOL:
        return "bool";
    case BT_VALUE_TYPE_UNSIGNED_INTEGER:
        return "unsigned integer";
    case BT_VALUE_TYPE_SIGNED_INTEGER:
        return "signed integer";
    case BT_VALUE_TYPE_REAL:
        return "real";
    case BT_VALUE_TYPE_STRING:
        return "string";
    case BT_VALUE_TYPE_ARRAY:
        return "array";
    case BT_VALUE_TYPE_MAP:
        return "map";
    default:
        return "unknown";
    }
}

/* A non-negative integer, signed or unsigned. */
static int get_uint(const bt_value *v, uint64_t *out)
{
    if (bt_value_is_unsigned_integer(v)) {
        *out = bt_value_integer_unsigned_get(v);
        return 0;
    }
    if (bt_value_is_signed_integer(v)) {
        int64_t s = bt_value_integer_signed_get(v);
        if (s < 0)
            return -1;
        *out = (uint64_t)s;
        return 0;
    }
    return -1;
}

typedef struct parse_ctx {
    enum sink_kind kind;
    parsed_params *p;
    int failed;
    char msg[512]; /* the first problem, reported after the iteration */
} parse_ctx;

/* Inside parse_one: remember the first problem (an error cause may not be
 * appended from inside bt_value_map_foreach_entry_const()). */
#define PERR(...)                                                                                  \
    do {                                                                                           \
        if (!pc->failed)                                                                           \
            snprintf(pc->msg, sizeof pc->msg, __VA_ARGS__);                                        \
    } while (0)

static bt_value_map_foreach_entry_const_func_status parse_one(const char *key, const bt_value *v,
                                                              void *data)
{
    parse_ctx *pc = data;
    const param_def *def = NULL;
    for (size_t i = 0; i < sizeof params_table / sizeof *params_table; i++)
        if (strcmp(params_table[i].name, key) == 0 && (params_table[i].sinks & (1u << pc->kind)))
            def = &params_table[i];
    if (!def) {
        char known[448]; /* with the message around it, within pc->msg */
        size_t n = 0;
        known[0] = '\0';
        for (size_t i = 0; i < sizeof params_table / sizeof *params_table; i++)
            if ((params_table[i].sinks & (1u << pc->kind)) && n < sizeof known)
                n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "",
                                      params_table[i].name);
        PERR("unknown parameter `%s` (known: %s)", key, known);
        goto bad;
    }
    parsed_params *p = pc->p;
    uint64_t u;
    switch (def->type) {
    case P_UINT:
        if (get_uint(v, &u) < 0) {
            PERR("parameter `%s`: expected a non-negative integer, got a %s", key,
                 value_type_name(v));
            goto bad;
        }
        if (def->id == SERTRACE_PARAM_MAX_DEPTH) {
            if (u > UINT32_MAX) {
                PERR("parameter `%s`: %" PRIu64 " is too large", key, u);
                goto bad;
            }
            p->max_depth = u;
        } else if (def->id == SERTRACE_PARAM_TOP) {
            if (u > 100000) {
                PERR("parameter `%s`: at most 100000", key);
                goto bad;
            }
            p->top = u;
        } else {
            if (u > 1000000) {
                PERR("parameter `%s`: at most 1000000", key);
                goto bad;
            }
            p->max_flags = u;
        }
        break;
    case P_SIZE:
        if (bt_value_is_string(v)) {
            if (sertrace_parse_size(bt_value_string_get(v), &u) < 0) {
                PERR("parameter `%s`: `%s` is not a size (e.g. 512, \"64K\")", key,
                     bt_value_string_get(v));
                goto bad;
            }
        } else if (get_uint(v, &u) < 0) {
            PERR("parameter `%s`: expected a size (integer or string), got a %s", key,
                 value_type_name(v));
            goto bad;
        }
        p->min_size = u;
        break;
    case P_OVERSIZE:
        if (bt_value_is_string(v)) {
            if (sertrace_parse_oversize(bt_value_string_get(v), &p->oversize_bytes,
                                        &p->oversize_percent) < 0) {
                PERR("parameter `%s`: `%s` is neither a size (\"64K\") nor a "
                     "percentage (\"10%%\")",
                     key, bt_value_string_get(v));
                goto bad;
            }
        } else if (get_uint(v, &u) < 0 || u == 0) {
            PERR("parameter `%s`: expected a positive integer (bytes) or a "
                 "string such as \"64K\" or \"10%%\", got a %s",
                 key, value_type_name(v));
            goto bad;
        } else {
            p->oversize_bytes = u;
            p->oversize_percent = 0;
        }
        break;
    case P_BOOL:
        if (!bt_value_is_bool(v)) {
            PERR("parameter `%s`: expected a boolean, got a %s", key, value_type_name(v));
            goto bad;
        }
        if (def->id == SERTRACE_PARAM_EXACT)
            p->exact = bt_value_bool_get(v);
        else if (def->id == SERTRACE_PARAM_FLUSH_EACH_DUMP)
            p->flush_each_dump = bt_value_bool_get(v);
        else if (def->id == SERTRACE_PARAM_WORKER_THREAD)
            p->worker = bt_value_bool_get(v);
        else if (def->id == SERTRACE_PARAM_PATHS)
            p->paths = bt_value_bool_get(v);
        else
            p->per_dump = bt_value_bool_get(v);
        break;
    case P_STRING:
        if (!bt_value_is_string(v) || !*bt_value_string_get(v)) {
            PERR("parameter `%s`: expected a non-empty string, got a %s", key, value_type_name(v));
            goto bad;
        }
        p->output = bt_value_string_get(v);
        break;
    case P_EXPORT:
        if (!bt_value_is_string(v) || !*bt_value_string_get(v)) {
            PERR("parameter `%s`: expected a non-empty string, got a %s", key, value_type_name(v));
            goto bad;
        }
        if (def->id == SERTRACE_PARAM_TITLE)
            p->title = bt_value_string_get(v);
        for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
            if (strcmp(key, sertrace_export_format_name(f)) == 0)
                p->exports[f] = bt_value_string_get(v);
        break;
    case P_FORMAT:
        if (!bt_value_is_string(v) ||
            (strcmp(bt_value_string_get(v), "text") && strcmp(bt_value_string_get(v), "json"))) {
            PERR("parameter `%s`: expected \"text\" or \"json\"", key);
            goto bad;
        }
        p->json = strcmp(bt_value_string_get(v), "json") == 0;
        break;
    case P_INTS:
    case P_STRINGS: {
        /* One value, or a non-empty array of them. */
        bool ints = def->type == P_INTS;
        uint64_t n = bt_value_is_array(v) ? bt_value_array_get_length(v) : 1;
        if (n == 0) {
            PERR("parameter `%s`: an empty array keeps no dump", key);
            goto bad;
        }
        for (uint64_t i = 0; i < n; i++) {
            const bt_value *e =
                bt_value_is_array(v) ? bt_value_array_borrow_element_by_index_const(v, i) : v;
            if (ints ? get_uint(e, &u) < 0 : !bt_value_is_string(e) || !*bt_value_string_get(e)) {
                PERR("parameter `%s`: expected %s (or an array of them), got a %s", key,
                     ints ? "a non-negative integer" : "a non-empty string", value_type_name(e));
                goto bad;
            }
        }
        if (def->id == SERTRACE_PARAM_PID)
            p->pid = v;
        else if (def->id == SERTRACE_PARAM_DUMP)
            p->dump = v;
        else
            p->serializer = v;
        break;
    }
    }
    return BT_VALUE_MAP_FOREACH_ENTRY_CONST_FUNC_STATUS_OK;
bad:
    pc->failed = 1;
    return BT_VALUE_MAP_FOREACH_ENTRY_CONST_FUNC_STATUS_OK;
}

/* ---- component lifecycle --------------------------------------------------- */

static int write_out(void *ctx, const char *s, size_t n)
{
    return sertrace_summary_write_file(ctx, s, n);
}

/* More than one CPU this process may run on (its affinity mask: `taskset
 * -c 0 babeltrace2 ...` gets the inline core). */
static bool several_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set) > 1;
    return sysconf(_SC_NPROCESSORS_ONLN) > 1;
}

static void sink_free(sink *s)
{
    if (!s)
        return;
    bt_message_iterator_put_ref(s->it);
    feed_destroy(s->feed); /* stops the worker before the core goes */
    sertrace_core_destroy(s->core);
    sertrace_summary_destroy(s->summary);
    sertrace_treeprint_destroy(s->tree);
    sertrace_export_destroy(s->export);
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        if (s->xout[f] && s->xout[f] != stdout)
            fclose(s->xout[f]);
    if (s->out) {
        if (s->own_out)
            fclose(s->out);
        else
            fflush(s->out);
    }
    free(s->cache.slots);
    free(s->f_pids);
    free(s->f_dumps);
    for (size_t i = 0; i < s->n_sers; i++)
        free(s->f_sers[i]);
    free(s->f_sers);
    free(s->kept);
    free(s);
}

/* ---- filters ------------------------------------------------------------ */

/* The values of a filter parameter (one value or an array, checked by
 * parse_one) into an array of integers or strings.  0, or -1 out of
 * memory. */
static int copy_filter(const bt_value *v, bool ints, uint64_t **nums, char ***strs, size_t *n)
{
    uint64_t count = bt_value_is_array(v) ? bt_value_array_get_length(v) : 1;

    if (ints)
        *nums = calloc(count, sizeof **nums);
    else
        *strs = calloc(count, sizeof **strs);
    if (ints ? *nums == NULL : *strs == NULL)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        const bt_value *e =
            bt_value_is_array(v) ? bt_value_array_borrow_element_by_index_const(v, i) : v;
        if (ints) {
            (void)get_uint(e, &(*nums)[i]);
        } else {
            (*strs)[i] = strdup(bt_value_string_get(e));
            if ((*strs)[i] == NULL) {
                *n = (size_t)i;
                return -1;
            }
        }
        *n = (size_t)i + 1;
    }
    return 0;
}

static ssize_t kept_index(const sink *s, int64_t pid, uint64_t id)
{
    for (size_t i = 0; i < s->nkept; i++)
        if (s->kept[i].pid == pid && s->kept[i].id == id)
            return (ssize_t)i;
    return -1;
}

/* Does the event of `kind` for dump (pid, id) pass the filters?  A
 * dump_begin of a dump left out is counted.  -1 out of memory. */
static int filter_keeps(sink *s, const ec_info *e, const bt_field *payload, int64_t pid,
                        uint64_t id)
{
    bool ok = true;

    if (s->n_pids) {
        ok = false;
        for (size_t i = 0; i < s->n_pids && !ok; i++)
            ok = s->f_pids[i] == pid;
    }
    if (ok && s->n_dumps) {
        ok = false;
        for (size_t i = 0; i < s->n_dumps && !ok; i++)
            ok = s->f_dumps[i] == id;
    }
    if (!ok || !s->n_sers) {
        if (!ok && e->kind == EV_BEGIN)
            s->dumps_left_out++;
        return ok;
    }
    ssize_t k = kept_index(s, pid, id);
    if (e->kind != EV_BEGIN) {
        if (k >= 0 && e->kind == EV_END)
            s->kept[k] = s->kept[--s->nkept];
        return k >= 0;
    }
    /* dump_begin: the serializer decides */
    const char *ser = "";
    size_t len = 0;
    if (e->i_serializer != NO_INDEX) {
        const bt_field *f =
            bt_field_structure_borrow_member_field_by_index_const(payload, e->i_serializer);
        ser = bt_field_string_get_value(f);
        len = bt_field_string_get_length(f);
    }
    ok = false;
    for (size_t i = 0; i < s->n_sers && !ok; i++)
        ok = strlen(s->f_sers[i]) == len && memcmp(s->f_sers[i], ser, len) == 0;
    if (!ok) {
        s->dumps_left_out++;
        if (k >= 0) /* same (pid, id) again (pid reuse): the new one is out */
            s->kept[k] = s->kept[--s->nkept];
        return 0;
    }
    if (k >= 0)
        return 1;
    if (s->nkept == s->kept_cap) {
        size_t cap = s->kept_cap ? s->kept_cap * 2 : 16;
        struct kept_dump *g = realloc(s->kept, cap * sizeof *g);
        if (!g)
            return -1;
        s->kept = g;
        s->kept_cap = cap;
    }
    s->kept[s->nkept].pid = pid;
    s->kept[s->nkept].id = id;
    s->nkept++;
    return 1;
}

/* The filters as a JSON object (the summary's "filter" member), with the
 * number of dumps left out; "null" when no filter was given. */
static int filter_json(const sink *s, sertrace_buf *b)
{
    int rc = 0;

    if (!s->filtering)
        return sertrace_buf_append(b, "null", 4);
    rc = sertrace_buf_append(b, "{\"pid\": [", 9);
    for (size_t i = 0; i < s->n_pids && rc == 0; i++)
        rc = sertrace_buf_appendf(b, "%s%" PRId64, i ? ", " : "", s->f_pids[i]);
    if (rc == 0)
        rc = sertrace_buf_appendf(b, "], \"dump\": [");
    for (size_t i = 0; i < s->n_dumps && rc == 0; i++)
        rc = sertrace_buf_appendf(b, "%s%" PRIu64, i ? ", " : "", s->f_dumps[i]);
    if (rc == 0)
        rc = sertrace_buf_appendf(b, "], \"serializer\": [");
    for (size_t i = 0; i < s->n_sers && rc == 0; i++) {
        if (i)
            rc = sertrace_buf_append(b, ", ", 2);
        if (rc == 0)
            rc = sertrace_fmt_json_string(b, s->f_sers[i], strlen(s->f_sers[i]));
    }
    if (rc == 0)
        rc = sertrace_buf_appendf(b, "], \"dumps_left_out\": %" PRIu64 "}", s->dumps_left_out);
    return rc;
}

/* The filters in words, for the text outputs' last line. */
static int filter_text(const sink *s, sertrace_buf *b)
{
    int rc = sertrace_buf_appendf(b, "── filter:");

    for (size_t i = 0; i < s->n_pids && rc == 0; i++)
        rc = sertrace_buf_appendf(b, "%s%" PRId64, i ? ", " : " pid ", s->f_pids[i]);
    if (rc == 0 && s->n_pids && (s->n_dumps || s->n_sers))
        rc = sertrace_buf_append(b, ";", 1);
    for (size_t i = 0; i < s->n_dumps && rc == 0; i++)
        rc = sertrace_buf_appendf(b, "%s%" PRIu64, i ? ", " : " dump ", s->f_dumps[i]);
    if (rc == 0 && s->n_dumps && s->n_sers)
        rc = sertrace_buf_append(b, ";", 1);
    for (size_t i = 0; i < s->n_sers && rc == 0; i++) {
        rc = sertrace_buf_appendf(b, "%s", i ? ", " : " serializer ");
        if (rc == 0)
            rc = sertrace_fmt_escape(b, s->f_sers[i], strlen(s->f_sers[i]));
    }
    if (rc == 0)
        rc = sertrace_buf_appendf(b, " · %" PRIu64 " dump%s left out\n", s->dumps_left_out,
                                  s->dumps_left_out == 1 ? "" : "s");
    return rc;
}

/* sink.sertrace.export: open the file of each format asked for ("-":
 * stdout, for one of them).  0, or -1 with the error appended. */
static int open_exports(sink *s, const parsed_params *p)
{
    int asked = 0, to_stdout = 0;
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++) {
        const char *path = p->exports[f];
        if (!path)
            continue;
        asked++;
        if (strcmp(path, "-") == 0) {
            if (to_stdout++) {
                ERR(s->self,
                    "parameters `%s` and another format both write to stdout (`-`): "
                    "give all but one of them a file",
                    sertrace_export_format_name(f));
                return -1;
            }
            s->xout[f] = stdout;
            continue;
        }
        s->xout[f] = fopen(path, "w");
        if (!s->xout[f]) {
            ERR(s->self, "parameter `%s`: cannot open `%s`: %s", sertrace_export_format_name(f),
                path, strerror(errno));
            return -1;
        }
        setvbuf(s->xout[f], NULL, _IOFBF, 1 << 16);
    }
    if (!asked) {
        ERR(s->self, "no output: give at least one of the parameters folded, speedscope, "
                     "perfetto, html (a path, or \"-\" for stdout)");
        return -1;
    }
    return 0;
}

static bt_component_class_initialize_method_status
sink_init(bt_self_component_sink *self_sink, const bt_value *params, enum sink_kind kind)
{
    bt_self_component *self = bt_self_component_sink_as_self_component(self_sink);
    sink *s = calloc(1, sizeof *s);
    parsed_params p = {0};
    p.top = 10;
    p.max_flags = 1000;
    p.per_dump = true;
    p.worker = -1;
    if (!s)
        goto memory;
    s->kind = kind;
    s->self = self;
    if (params && !bt_value_is_map(params)) {
        ERR(self, "parameters must be a map");
        goto error;
    }
    if (params) {
        parse_ctx pc = {kind, &p, 0, ""};
        bt_value_map_foreach_entry_const(params, parse_one, &pc);
        if (pc.failed) {
            ERR(self, "%s", pc.msg);
            goto error;
        }
    }
    if (kind == SINK_EXPORT) {
        if (open_exports(s, &p) < 0)
            goto error;
    } else if (p.output) {
        s->out = fopen(p.output, "w");
        if (!s->out) {
            ERR(self, "parameter `output`: cannot open `%s`: %s", p.output, strerror(errno));
            goto error;
        }
        s->own_out = true;
        setvbuf(s->out, NULL, _IOFBF, 1 << 16);
    } else {
        s->out = stdout;
    }
    if ((p.pid && copy_filter(p.pid, true, (uint64_t **)&s->f_pids, NULL, &s->n_pids) < 0) ||
        (p.dump && copy_filter(p.dump, true, &s->f_dumps, NULL, &s->n_dumps) < 0) ||
        (p.serializer && copy_filter(p.serializer, false, NULL, &s->f_sers, &s->n_sers) < 0))
        goto memory;
    s->filtering = s->n_pids || s->n_dumps || s->n_sers;
    sertrace_core_visitor v;
    if (kind == SINK_EXPORT) {
        sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
        o.oversize_bytes = p.oversize_bytes;
        o.oversize_percent = p.oversize_percent;
        o.title = p.title;
        s->export = sertrace_export_create(&o);
        if (!s->export)
            goto memory;
        for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
            if (s->xout[f] && sertrace_export_add_output(s->export, f, write_out, s->xout[f]) < 0)
                goto memory;
        sertrace_export_visitor(s->export, &v);
    } else if (kind == SINK_SUMMARY) {
        sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
        o.json = p.json;
        s->json = p.json;
        o.exact = p.exact;
        o.top = (unsigned)p.top;
        o.oversize_bytes = p.oversize_bytes;
        o.oversize_percent = p.oversize_percent;
        o.max_flags = (unsigned)p.max_flags;
        o.per_dump = p.per_dump;
        o.paths = p.paths;
        s->summary = sertrace_summary_create(&o, write_out, s->out);
        if (!s->summary)
            goto memory;
        sertrace_summary_visitor(s->summary, &v);
    } else {
        sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
        o.oversize_bytes = p.oversize_bytes;
        o.oversize_percent = p.oversize_percent;
        o.max_depth = (uint32_t)p.max_depth;
        o.min_size = p.min_size;
        o.exact = p.exact;
        o.flush_each_dump = p.flush_each_dump;
        o.flush = sertrace_summary_flush_file;
        s->tree = sertrace_treeprint_create(&o, write_out, s->out);
        if (!s->tree)
            goto memory;
        sertrace_treeprint_visitor(s->tree, &v);
    }
    s->core = sertrace_core_create(&v);
    if (!s->core)
        goto memory;
    /* A second thread only pays when there is a second CPU to run it. */
    bool worker = p.worker >= 0 ? p.worker != 0 : several_cpus();
    s->feed = feed_create(s->core, worker);
    if (!s->feed)
        goto memory;
    if (bt_self_component_sink_add_input_port(self_sink, "in", NULL, NULL) !=
        BT_SELF_COMPONENT_ADD_PORT_STATUS_OK)
        goto memory;
    bt_self_component_set_data(self, s);
    return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_OK;
memory:
    sink_free(s);
    return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_MEMORY_ERROR;
error:
    sink_free(s);
    return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_ERROR;
}

static bt_component_class_initialize_method_status
export_init(bt_self_component_sink *self, bt_self_component_sink_configuration *cfg,
            const bt_value *params, void *init_data)
{
    (void)cfg;
    (void)init_data;
    return sink_init(self, params, SINK_EXPORT);
}

static bt_component_class_initialize_method_status
tree_init(bt_self_component_sink *self, bt_self_component_sink_configuration *cfg,
          const bt_value *params, void *init_data)
{
    (void)cfg;
    (void)init_data;
    return sink_init(self, params, SINK_TREE);
}

static bt_component_class_initialize_method_status
summary_init(bt_self_component_sink *self, bt_self_component_sink_configuration *cfg,
             const bt_value *params, void *init_data)
{
    (void)cfg;
    (void)init_data;
    return sink_init(self, params, SINK_SUMMARY);
}

static void sink_finalize(bt_self_component_sink *self_sink)
{
    sink *s = bt_self_component_get_data(bt_self_component_sink_as_self_component(self_sink));
    sink_free(s);
}

static bt_component_class_sink_graph_is_configured_method_status
sink_graph_is_configured(bt_self_component_sink *self_sink)
{
    bt_self_component *self = bt_self_component_sink_as_self_component(self_sink);
    sink *s = bt_self_component_get_data(self);
    bt_self_component_port_input *port =
        bt_self_component_sink_borrow_input_port_by_name(self_sink, "in");
    if (bt_message_iterator_create_from_sink_component(self_sink, port, &s->it) !=
        BT_MESSAGE_ITERATOR_CREATE_FROM_SINK_COMPONENT_STATUS_OK) {
        ERR(self, "cannot create the input message iterator");
        return BT_COMPONENT_CLASS_SINK_GRAPH_IS_CONFIGURED_METHOD_STATUS_ERROR;
    }
    return BT_COMPONENT_CLASS_SINK_GRAPH_IS_CONFIGURED_METHOD_STATUS_OK;
}

/* ---- event decoding ------------------------------------------------------- */

static size_t ptr_hash(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17);
}

/* Index of member `name` in struct class `fc` with an acceptable class:
 * `want` 'u' unsigned integer/enum, 's' any integer, 'S' string,
 * 'A' dynamic array of unsigned integers.  NO_INDEX when absent or of
 * another class. */
static uint64_t member_index(const bt_field_class *fc, const char *name, char want, bool *is_signed)
{
    if (!fc || bt_field_class_get_type(fc) != BT_FIELD_CLASS_TYPE_STRUCTURE)
        return NO_INDEX;
    uint64_t n = bt_field_class_structure_get_member_count(fc);
    for (uint64_t i = 0; i < n; i++) {
        const bt_field_class_structure_member *m =
            bt_field_class_structure_borrow_member_by_index_const(fc, i);
        if (strcmp(bt_field_class_structure_member_get_name(m), name) != 0)
            continue;
        const bt_field_class *mfc = bt_field_class_structure_member_borrow_field_class_const(m);
        bt_field_class_type t = bt_field_class_get_type(mfc);
        bool u = bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER);
        bool sg = bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER);
        if (is_signed)
            *is_signed = sg;
        switch (want) {
        case 'u':
            return u ? i : NO_INDEX;
        case 's':
            return u || sg ? i : NO_INDEX;
        case 'S':
            return t == BT_FIELD_CLASS_TYPE_STRING ? i : NO_INDEX;
        case 'A':
            if (!bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_DYNAMIC_ARRAY))
                return NO_INDEX;
            t = bt_field_class_get_type(bt_field_class_array_borrow_element_field_class_const(mfc));
            return bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER) ? i : NO_INDEX;
        }
    }
    return NO_INDEX;
}

static void fill_info(ec_info *e, const bt_event_class *ec)
{
    memset(e, 0, sizeof *e);
    e->ec = ec;
    const char *name = bt_event_class_get_name(ec);
    if (!name)
        name = "";
    if (strcmp(name, SERTRACE_EVENT_DUMP_BEGIN) == 0)
        e->kind = EV_BEGIN;
    else if (strcmp(name, SERTRACE_EVENT_RECORDS) == 0)
        e->kind = EV_RECORDS;
    else if (strcmp(name, SERTRACE_EVENT_DUMP_END) == 0)
        e->kind = EV_END;
    else
        e->kind = EV_OTHER;
    e->sertrace = strncmp(name, SERTRACE_PROVIDER_NAME ":", sizeof SERTRACE_PROVIDER_NAME) == 0;
    const bt_field_class *pfc = bt_event_class_borrow_payload_field_class_const(ec);
    e->i_dump_id = member_index(pfc, SERTRACE_FIELD_DUMP_ID, 'u', NULL);
    e->i_serializer = member_index(pfc, SERTRACE_FIELD_SERIALIZER, 'S', NULL);
    e->i_protocol = member_index(pfc, SERTRACE_FIELD_PROTOCOL, 's', &e->protocol_signed);
    e->i_seq = member_index(pfc, SERTRACE_FIELD_SEQ, 'u', NULL);
    e->i_records = member_index(pfc, SERTRACE_FIELD_RECORDS, 'A', NULL);
    e->i_bytes = member_index(pfc, SERTRACE_FIELD_BYTES, 'u', NULL);
    e->i_status = member_index(pfc, SERTRACE_FIELD_STATUS, 's', &e->status_signed);
    e->i_pid = member_index(pfc, SERTRACE_FIELD_PID, 's', &e->pid_signed);
    e->i_batches = member_index(pfc, SERTRACE_FIELD_BATCHES, 'u', NULL);
    e->i_flags = member_index(pfc, SERTRACE_FIELD_FLAGS, 'u', NULL);
    e->i_tid = member_index(pfc, SERTRACE_FIELD_TID, 's', &e->tid_signed);
    const bt_stream_class *sc = bt_event_class_borrow_stream_class_const(ec);
    const bt_field_class *cfc =
        sc ? bt_stream_class_borrow_event_common_context_field_class_const(sc) : NULL;
    e->i_vpid = member_index(cfc, SERTRACE_CONTEXT_VPID, 's', &e->vpid_signed);
    e->i_vtid = member_index(cfc, SERTRACE_CONTEXT_VTID, 's', &e->vtid_signed);
    switch (e->kind) {
    case EV_BEGIN:
        e->complete = e->i_dump_id != NO_INDEX;
        break;
    case EV_RECORDS:
        e->complete = e->i_dump_id != NO_INDEX && e->i_seq != NO_INDEX && e->i_records != NO_INDEX;
        break;
    case EV_END:
        e->complete = e->i_dump_id != NO_INDEX && e->i_bytes != NO_INDEX;
        break;
    default:
        e->complete = true;
    }
}

static ec_info *lookup_ec(sink *s, const bt_event_class *ec)
{
    ec_cache *c = &s->cache;
    if (c->cap) {
        size_t i = ptr_hash(ec) & (c->cap - 1);
        while (c->slots[i].ec) {
            if (c->slots[i].ec == ec)
                return &c->slots[i];
            i = (i + 1) & (c->cap - 1);
        }
    }
    if (c->used * 2 >= c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        ec_info *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return NULL;
        for (size_t i = 0; i < c->cap; i++) {
            if (!c->slots[i].ec)
                continue;
            size_t k = ptr_hash(c->slots[i].ec) & (ncap - 1);
            while (ns[k].ec)
                k = (k + 1) & (ncap - 1);
            ns[k] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->cap = ncap;
    }
    size_t i = ptr_hash(ec) & (c->cap - 1);
    while (c->slots[i].ec)
        i = (i + 1) & (c->cap - 1);
    fill_info(&c->slots[i], ec);
    c->used++;
    return &c->slots[i];
}

static uint64_t field_u(const bt_field *st, uint64_t idx)
{
    return bt_field_integer_unsigned_get_value(
        bt_field_structure_borrow_member_field_by_index_const(st, idx));
}

static int64_t field_s(const bt_field *st, uint64_t idx, bool is_signed)
{
    const bt_field *f = bt_field_structure_borrow_member_field_by_index_const(st, idx);
    return is_signed ? bt_field_integer_signed_get_value(f)
                     : (int64_t)bt_field_integer_unsigned_get_value(f);
}

static int handle_event(sink *s, const bt_message *msg)
{
    const bt_event *ev = bt_message_event_borrow_event_const(msg);
    const bt_event_class *ec = bt_event_borrow_class_const(ev);
    ec_info *e = lookup_ec(s, ec);
    if (!e)
        return -1;
    if (!e->sertrace) {
        if (s->other_events++ == 0) {
            const char *name = bt_event_class_get_name(ec);
            snprintf(s->other_name, sizeof s->other_name, "%s", name ? name : "?");
        }
        return 0;
    }
    s->sertrace_events++;
    if (e->kind == EV_OTHER)
        return 0;
    if (!e->complete) {
        s->unreadable++;
        return 0;
    }
    int64_t pid = -1, tid = -1, ts = 0;
    const bt_field *ctx = bt_event_borrow_common_context_field_const(ev);
    if (ctx) {
        if (e->i_vpid != NO_INDEX)
            pid = field_s(ctx, e->i_vpid, e->vpid_signed);
        if (e->i_vtid != NO_INDEX)
            tid = field_s(ctx, e->i_vtid, e->vtid_signed);
    }
    if (bt_message_event_borrow_stream_class_default_clock_class_const(msg)) {
        const bt_clock_snapshot *cs = bt_message_event_borrow_default_clock_snapshot_const(msg);
        if (bt_clock_snapshot_get_ns_from_origin(cs, &ts) !=
            BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK)
            ts = 0;
    }
    const bt_field *p = bt_event_borrow_payload_field_const(ev);
    if (!p) {
        s->unreadable++;
        return 0;
    }
    if (e->i_pid != NO_INDEX)
        pid = field_s(p, e->i_pid, e->pid_signed);
    if (e->i_tid != NO_INDEX)
        tid = field_s(p, e->i_tid, e->tid_signed);
    uint64_t id = field_u(p, e->i_dump_id);
    if (s->filtering) {
        int keep = filter_keeps(s, e, p, pid, id);
        if (keep <= 0)
            return keep;
    }
    switch (e->kind) {
    case EV_BEGIN: {
        const char *ser = NULL;
        size_t ser_len = 0;
        if (e->i_serializer != NO_INDEX) {
            const bt_field *f =
                bt_field_structure_borrow_member_field_by_index_const(p, e->i_serializer);
            ser = bt_field_string_get_value(f);
            ser_len = bt_field_string_get_length(f);
        }
        int32_t proto = -1;
        if (e->i_protocol != NO_INDEX)
            proto = (int32_t)field_s(p, e->i_protocol, e->protocol_signed);
        return feed_dump_begin(s->feed, pid, tid, ts, id, ser, ser_len, proto);
    }
    case EV_RECORDS: {
        uint64_t seq = field_u(p, e->i_seq);
        const bt_field *arr =
            bt_field_structure_borrow_member_field_by_index_const(p, e->i_records);
        uint64_t n = bt_field_array_get_length(arr);
        if (n > UINT32_MAX) {
            s->unreadable++;
            return 0;
        }
        uint8_t *dst = feed_records_begin(s->feed, pid, tid, ts, id, (uint32_t)seq, (size_t)n);
        if (!dst)
            return -1;
        /* babeltrace2 2.0 has one field object per byte and no bulk
         * accessor: two calls per byte (through the GOT, -fno-plt).  A
         * variant that prefetched the element fields ahead measured no
         * better (bench/sinks/README.md). */
        for (uint64_t i = 0; i < n; i++)
            dst[i] = (uint8_t)bt_field_integer_unsigned_get_value(
                bt_field_array_borrow_element_field_by_index_const(arr, i));
        return feed_records_end(s->feed);
    }
    case EV_END: {
        int status = SERTRACE_STATUS_OK;
        if (e->i_status != NO_INDEX)
            status = (int)field_s(p, e->i_status, e->status_signed);
        int64_t batches = -1;
        if (e->i_batches != NO_INDEX) {
            uint64_t b = field_u(p, e->i_batches);
            batches = b > INT32_MAX ? INT32_MAX : (int64_t)b;
        }
        uint32_t end_flags = 0; /* v1, v2: none */
        if (e->i_flags != NO_INDEX)
            end_flags = (uint32_t)field_u(p, e->i_flags);
        return feed_dump_end(s->feed, pid, tid, ts, id, field_u(p, e->i_bytes), status, batches,
                             end_flags);
    }
    default:
        return 0;
    }
}

/* pid of the process whose buffer a stream belongs to: per-PID LTTng
 * traces carry it in the trace environment, under the same name as the
 * context field ("vpid"). */
static int64_t stream_pid(const bt_stream *stream)
{
    if (!stream)
        return -1;
    const bt_trace *trace = bt_stream_borrow_trace_const(stream);
    if (!trace)
        return -1;
    const bt_value *v =
        bt_trace_borrow_environment_entry_value_by_name_const(trace, SERTRACE_CONTEXT_VPID);
    if (!v)
        return -1;
    if (bt_value_is_signed_integer(v))
        return bt_value_integer_signed_get(v);
    if (bt_value_is_unsigned_integer(v))
        return (int64_t)bt_value_integer_unsigned_get(v);
    return -1;
}

static int handle_message(sink *s, const bt_message *msg)
{
    switch (bt_message_get_type(msg)) {
    case BT_MESSAGE_TYPE_EVENT:
        return handle_event(s, msg);
    case BT_MESSAGE_TYPE_DISCARDED_EVENTS: {
        uint64_t count = 0;
        if (bt_message_discarded_events_get_count(msg, &count) !=
                BT_PROPERTY_AVAILABILITY_AVAILABLE ||
            count == 0)
            count = 1; /* at least one */
        return feed_discarded(
            s->feed, stream_pid(bt_message_discarded_events_borrow_stream_const(msg)), count);
    }
    case BT_MESSAGE_TYPE_DISCARDED_PACKETS: {
        /* a lost packet holds an unknown number of events: count 1 */
        return feed_discarded(s->feed,
                              stream_pid(bt_message_discarded_packets_borrow_stream_const(msg)), 1);
    }
    default:
        return 0;
    }
}

/* sink_finish: no sertrace event in the whole input. */
#define FINISH_NO_EVENTS (-2)

static int sink_finish(sink *s)
{
    if (s->finished)
        return 0;
    s->finished = true;
    int rc = feed_finish(s->feed); /* the worker ran everything queued */
    if (rc == 0 && s->sertrace_events == 0)
        return FINISH_NO_EVENTS;
    if (rc == 0)
        rc = sertrace_core_finish(s->core);
    const sertrace_core_stats *st = sertrace_core_get_stats(s->core);
    sertrace_buf f = SERTRACE_BUF_INIT;
    if (rc == 0 && s->summary && s->json) {
        rc = filter_json(s, &f);
        if (rc == 0)
            rc = sertrace_summary_set_filter(s->summary, f.data, f.len);
    }
    if (rc == 0)
        rc = s->export    ? sertrace_export_finish(s->export, st)
             : s->summary ? sertrace_summary_finish(s->summary, st)
                          : sertrace_treeprint_finish(s->tree, st);
    if (rc == 0 && s->filtering && !s->json && s->out) {
        sertrace_buf_clear(&f);
        rc = filter_text(s, &f);
        if (rc == 0 && fwrite(f.data, 1, f.len, s->out) != f.len)
            rc = -1;
    }
    sertrace_buf_free(&f);
    if (rc == 0 && s->unreadable)
        fprintf(stderr,
                "sertrace: %" PRIu64 " sertrace events had missing or unexpected "
                "fields (newer schema?) and were skipped\n",
                s->unreadable);
    if (s->out && fflush(s->out) != 0)
        rc = -1;
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        if (s->xout[f] && fflush(s->xout[f]) != 0)
            rc = -1;
    return rc;
}

static bt_component_class_sink_consume_method_status sink_consume(bt_self_component_sink *self_sink)
{
    bt_self_component *self = bt_self_component_sink_as_self_component(self_sink);
    sink *s = bt_self_component_get_data(self);
    bt_message_array_const msgs;
    uint64_t count = 0;
    bt_component_class_sink_consume_method_status status =
        BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_OK;

    switch (bt_message_iterator_next(s->it, &msgs, &count)) {
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
        break;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_END: {
        int rc = sink_finish(s);
        if (rc == FINISH_NO_EVENTS) {
            /* report.c recognises this text (SERTRACE_NO_EVENTS_TEXT) */
            if (s->other_events)
                ERR(self,
                    "no sertrace events (%" PRIu64 " events of other providers, "
                    "such as `%s`)",
                    s->other_events, s->other_name);
            else
                ERR(self, "no sertrace events (no events at all)");
            status = BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_ERROR;
        } else if (rc < 0) {
            ERR(self, "cannot write the output (disk full? out of memory?)");
            status = BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_ERROR;
        } else {
            status = BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_END;
        }
        BT_MESSAGE_ITERATOR_PUT_REF_AND_RESET(s->it);
        return status;
    }
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
        feed_publish(s->feed, true); /* live, caught up: the worker gets it all */
        return BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_AGAIN;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
        return BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_MEMORY_ERROR;
    default:
        return BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_ERROR;
    }
    uint64_t i = 0;
    for (; i < count; i++) {
        if (handle_message(s, msgs[i]) < 0) {
            ERR(self, "out of memory or cannot write the output");
            status = BT_COMPONENT_CLASS_SINK_CONSUME_METHOD_STATUS_ERROR;
            break;
        }
        bt_message_put_ref(msgs[i]);
    }
    for (; i < count; i++)
        bt_message_put_ref(msgs[i]);
    feed_publish(s->feed, false); /* a partial chunk waits at most 50 ms */
    return status;
}

/* ---- component classes ---------------------------------------------------- */

BT_PLUGIN_SINK_COMPONENT_CLASS(tree, sink_consume);
BT_PLUGIN_SINK_COMPONENT_CLASS_DESCRIPTION(
    tree, "Print each serializer dump as a size tree (dill's line grammar)");
BT_PLUGIN_SINK_COMPONENT_CLASS_HELP(tree, SERTRACE_SINK_HELP(TREE) "See analyzers/README.md.");
BT_PLUGIN_SINK_COMPONENT_CLASS_INITIALIZE_METHOD(tree, tree_init);
BT_PLUGIN_SINK_COMPONENT_CLASS_GRAPH_IS_CONFIGURED_METHOD(tree, sink_graph_is_configured);
BT_PLUGIN_SINK_COMPONENT_CLASS_FINALIZE_METHOD(tree, sink_finalize);

BT_PLUGIN_SINK_COMPONENT_CLASS(summary, sink_consume);
BT_PLUGIN_SINK_COMPONENT_CLASS_DESCRIPTION(
    summary, "Bytes by kind and type, top-N largest nodes and flags, per dump and overall");
BT_PLUGIN_SINK_COMPONENT_CLASS_HELP(
    summary, SERTRACE_SINK_HELP(SUMMARY) "JSON schema: analyzers/README.md.");
BT_PLUGIN_SINK_COMPONENT_CLASS_INITIALIZE_METHOD(summary, summary_init);
BT_PLUGIN_SINK_COMPONENT_CLASS_GRAPH_IS_CONFIGURED_METHOD(summary, sink_graph_is_configured);
BT_PLUGIN_SINK_COMPONENT_CLASS_FINALIZE_METHOD(summary, sink_finalize);

BT_PLUGIN_SINK_COMPONENT_CLASS(export, sink_consume);
BT_PLUGIN_SINK_COMPONENT_CLASS_DESCRIPTION(
    export, "Pictures of the size trees: folded stacks, speedscope, Perfetto JSON, an HTML viewer");
BT_PLUGIN_SINK_COMPONENT_CLASS_HELP(
    export, SERTRACE_SINK_HELP(EXPORT) "At least one output.  See analyzers/README.md.");
BT_PLUGIN_SINK_COMPONENT_CLASS_INITIALIZE_METHOD(export, export_init);
BT_PLUGIN_SINK_COMPONENT_CLASS_GRAPH_IS_CONFIGURED_METHOD(export, sink_graph_is_configured);
BT_PLUGIN_SINK_COMPONENT_CLASS_FINALIZE_METHOD(export, sink_finalize);
