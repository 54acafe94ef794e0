/* report.c -- `sertrace report`: a babeltrace2 graph, built in C, that feeds
 * a trace (or a live session) to one of the sertrace plugin's sinks.
 *
 *   source.ctf.fs (one per trace) ─┐
 *   source.ctf.fs ...              ├─▶ filter.utils.muxer ─▶ [progress] ─▶ sink.sertrace.tree
 *   (or source.ctf.lttng-live)    ─┘                                      or .summary
 *
 * Why not just exec `babeltrace2 -c sink.sertrace.tree TRACE`: the CLI is
 * a separate package, its error messages speak of components, and it
 * cannot show progress.  Here the command owns discovery (every directory
 * under TRACE holding a `metadata` file is a CTF trace; source.ctf.fs does
 * not recurse, and per-PID sessions or several snapshots give several
 * traces), groups directories whose traces share a UUID into one ctf.fs
 * component (two snapshots of one session overlap: ctf.fs merges them and
 * de-duplicates packets, which two separate components would not), checks
 * each with ctf.fs's "babeltrace.support-info" query so a corrupt trace is
 * named before the graph runs, and turns babeltrace2's error causes into
 * one message.
 *
 * Progress: when stderr is a terminal (and stdout is not that same
 * terminal, whose report lines the progress line would tear) and the trace
 * is larger than 50 MB,
 * a pass-through filter of our own (a component class made at run time,
 * not a plugin) counts events and reads their timestamps; the bytes read
 * are estimated as (time reached / time span) x trace size, since ctf.fs
 * maps the stream files and reports no offset.  At most 4 updates/s.
 * SERTRACE_PROGRESS=1 forces it on, =0 off (tests use it).
 *
 * The sertrace plugin is looked up in $SERTRACE_PLUGIN_PATH (colon
 * separated), then in the directory it was installed to at build time,
 * then through babeltrace2's own search (BABELTRACE_PLUGIN_PATH, user and
 * system plugin directories).
 */
#define _GNU_SOURCE
#include <babeltrace2/babeltrace.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"

#define PROGRESS_MIN_BYTES (50ull * 1000 * 1000)
#define PROGRESS_INTERVAL_NS 250000000ll
#define LIVE_RETRY_MS 100

enum report_mode { MODE_TREE, MODE_SUMMARY, MODE_JSON };

struct report_opts {
    enum report_mode mode;
    const char *trace;
    const char *live_url;
    const char *oversize; /* kept as text: the sink also takes "10%" */
    uint64_t oversize_bytes;
    bool has_oversize, has_top, has_min_size, has_max_depth, exact;
    uint64_t top, min_size, max_depth;
};

static const char report_help[] =
    "Usage: sertrace report [--tree | --summary | --json] [OPTIONS] TRACE\n"
    "       sertrace report [--tree | --summary | --json] [OPTIONS] --live URL\n"
    "\n"
    "Rebuild the object trees of every dump in TRACE (a directory written by\n"
    "`sertrace record`, `sertrace stop`, `sertrace snapshot` or lttng; every\n"
    "CTF trace found below it is read) and print them, or their summary.\n"
    "\n"
    "  --tree             one tree per dump, like DISPATCH_TRACE prints (default)\n"
    "  --summary          per-dump and overall totals: bytes by kind and type,\n"
    "                     largest nodes, flagged nodes\n"
    "  --json             the summary as one JSON object (format \"sertrace-summary\")\n"
    "  --oversize SIZE    flag nodes of at least SIZE bytes (64K, 1.5MiB) or of at\n"
    "                     least this share of their dump (10%)\n"
    "  --top N            largest nodes listed in the summary (default 10, at\n"
    "                     most 100000)\n"
    "  --min-size SIZE    tree: fold siblings smaller than SIZE into one line\n"
    "  --max-depth N      tree: fold nodes deeper than N (0: show all)\n"
    "  --exact            sizes in bytes instead of KiB/MiB\n"
    "  --live URL         read a live session from an lttng-relayd instead of a\n"
    "                     trace directory, e.g.\n"
    "                     net://127.0.0.1/host/HOSTNAME/SESSION (see `sertrace start\n"
    "                     --live`); print trees as dumps end, and exit when the\n"
    "                     session is destroyed\n"
    "  -h, --help         this help\n"
    "\n"
    "The sertrace babeltrace2 plugin is searched in $SERTRACE_PLUGIN_PATH, then\n"
    "in " SERTRACE_PLUGIN_INSTALL_DIR ", then in babeltrace2's plugin path.\n"
    "Progress (events read, MB) is shown on stderr when it is a terminal, stdout\n"
    "is not that terminal (e.g. `sertrace report big > out.txt`) and the trace is\n"
    "over 50 MB (SERTRACE_PROGRESS=1 forces it, =0 disables it).\n"
    "\n"
    "Exit status: 0 ok, 1 runtime error (missing, empty or corrupt trace, plugin\n"
    "not found), 2 usage error.\n";

/* ---- errors ------------------------------------------------------------ */

/* Print babeltrace2's error causes for this thread (innermost last, so the
 * root cause ends the message), then release them. */
static void print_bt_error(const char *what)
{
    const bt_error *err = bt_current_thread_take_error();
    uint64_t n;

    sertrace_cli_err("%s", what);
    if (err == NULL)
        return;
    n = bt_error_get_cause_count(err);
    for (uint64_t i = n; i-- > 0;) {
        const bt_error_cause *c = bt_error_borrow_cause_by_index(err, i);
        const char *msg = bt_error_cause_get_message(c);
        /* Keep the first line of each cause: bt2's messages are long. */
        const char *nl = strchr(msg, '\n');
        int len = nl ? (int)(nl - msg) : (int)strlen(msg);
        fprintf(stderr, "  %s: %.*s%s\n", bt_error_cause_get_module_name(c), len > 200 ? 200 : len,
                msg, len > 200 ? "..." : "");
    }
    bt_error_release(err);
}

/* ---- plugins ------------------------------------------------------------ */

static const bt_plugin *plugin_from_dir(const char *dir, const char *name)
{
    const bt_plugin_set *set = NULL;
    const bt_plugin *found = NULL;
    struct stat sb;

    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return NULL;
    if (bt_plugin_find_all_from_dir(dir, BT_FALSE, BT_FALSE, &set) !=
        BT_PLUGIN_FIND_ALL_FROM_DIR_STATUS_OK)
        goto end;
    for (uint64_t i = 0; i < bt_plugin_set_get_plugin_count(set); i++) {
        const bt_plugin *p = bt_plugin_set_borrow_plugin_by_index_const(set, i);
        if (strcmp(bt_plugin_get_name(p), name) == 0) {
            found = p;
            bt_plugin_get_ref(found);
            break;
        }
    }
end:
    bt_plugin_set_put_ref(set);
    bt_current_thread_clear_error();
    return found;
}

static const bt_plugin *find_sertrace_plugin(void)
{
    const char *env = getenv("SERTRACE_PLUGIN_PATH");
    const bt_plugin *p = NULL;

    if (env != NULL && *env != '\0') {
        char *copy = strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !p;
             d = strtok_r(NULL, ":", &save))
            p = plugin_from_dir(d, "sertrace");
        free(copy);
    }
    if (p == NULL)
        p = plugin_from_dir(SERTRACE_PLUGIN_INSTALL_DIR, "sertrace");
    if (p == NULL && bt_plugin_find("sertrace", BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
                         BT_PLUGIN_FIND_STATUS_OK)
        p = NULL;
    bt_current_thread_clear_error();
    return p;
}

static const bt_plugin *find_std_plugin(const char *name)
{
    const bt_plugin *p = NULL;

    if (bt_plugin_find(name, BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
        BT_PLUGIN_FIND_STATUS_OK) {
        /* Not in the system dir: try the standard environment too. */
        bt_current_thread_clear_error();
        if (bt_plugin_find(name, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
            BT_PLUGIN_FIND_STATUS_OK)
            p = NULL;
    }
    bt_current_thread_clear_error();
    return p;
}

/* ---- trace discovery ---------------------------------------------------- */

struct trace_group {
    char *group;      /* UUID from support-info, or the directory itself */
    bt_value *inputs; /* array of directories */
};

/* Ask source.ctf.fs whether `dir` is a trace it can read; returns the
 * support weight (0 = not a CTF trace) and its group (the trace UUID), or
 * -1 when the query itself failed (unreadable or corrupt metadata). */
static double support_info(const bt_component_class_source *fs, const char *dir, char **group)
{
    bt_value *params = bt_value_map_create();
    bt_query_executor *q = NULL;
    const bt_value *res = NULL;
    double weight = -1.0;

    *group = NULL;
    if (params == NULL || bt_value_map_insert_string_entry(params, "input", dir) ||
        bt_value_map_insert_string_entry(params, "type", "directory"))
        goto end;
    q = bt_query_executor_create(bt_component_class_source_as_component_class_const(fs),
                                 "babeltrace.support-info", params);
    if (q == NULL || bt_query_executor_query(q, &res) != BT_QUERY_EXECUTOR_QUERY_STATUS_OK)
        goto end;
    if (bt_value_is_map(res)) {
        const bt_value *w = bt_value_map_borrow_entry_value_const(res, "weight");
        const bt_value *g = bt_value_map_borrow_entry_value_const(res, "group");
        if (w != NULL && bt_value_is_real(w))
            weight = bt_value_real_get(w);
        else if (w != NULL && bt_value_is_signed_integer(w))
            weight = (double)bt_value_integer_signed_get(w);
        if (g != NULL && bt_value_is_string(g))
            *group = strdup(bt_value_string_get(g));
    } else if (bt_value_is_real(res)) {
        weight = bt_value_real_get(res);
    }
end:
    bt_value_put_ref(res);
    bt_query_executor_put_ref(q);
    bt_value_put_ref(params);
    return weight;
}

static void free_groups(struct trace_group *g, int n)
{
    for (int i = 0; i < n; i++) {
        free(g[i].group);
        bt_value_put_ref(g[i].inputs);
    }
    free(g);
}

/* Find the traces under `root` and group them by UUID.  Prints the error
 * and returns -1 when there is none or one is unreadable. */
static int discover(const char *root, const bt_component_class_source *fs, struct trace_group **out,
                    int *count)
{
    struct stat sb;
    char **dirs = NULL;
    int n, ngroups = 0, rc = -1;
    struct trace_group *groups = NULL;

    if (stat(root, &sb) != 0) {
        sertrace_cli_err("%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        sertrace_cli_err("%s is not a directory: give the trace directory (the one "
                         "`sertrace record` printed)",
                         root);
        return -1;
    }
    n = sertrace_cli_find_traces(root, &dirs);
    if (n < 0) {
        sertrace_cli_err("cannot walk %s: %s", root, strerror(errno));
        return -1;
    }
    if (n == 0) {
        sertrace_cli_err("no trace found under %s (no CTF `metadata` file): the recorded "
                         "program produced no sertrace events, or this is not a trace "
                         "directory",
                         root);
        goto end;
    }
    groups = calloc((size_t)n, sizeof(*groups));
    if (groups == NULL)
        goto end;
    for (int i = 0; i < n; i++) {
        char *group = NULL;
        double w = support_info(fs, dirs[i], &group);
        int j;
        if (w <= 0.0) {
            bt_current_thread_clear_error();
            sertrace_cli_err("%s: corrupt or unreadable trace (its metadata file is not "
                             "CTF metadata)",
                             dirs[i]);
            free(group);
            goto end;
        }
        if (group == NULL)
            group = strdup(dirs[i]);
        for (j = 0; j < ngroups; j++)
            if (group && strcmp(groups[j].group, group) == 0)
                break;
        if (j == ngroups) {
            groups[j].group = group;
            groups[j].inputs = bt_value_array_create();
            ngroups++;
            if (group == NULL || groups[j].inputs == NULL)
                goto end;
        } else {
            free(group);
        }
        if (bt_value_array_append_string_element(groups[j].inputs, dirs[i]) !=
            BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK)
            goto end;
    }
    rc = 0;
end:
    sertrace_cli_free_dirs(dirs, n);
    if (rc == 0) {
        *out = groups;
        *count = ngroups;
    } else {
        free_groups(groups, ngroups);
    }
    return rc;
}

/* Time span of the traces (min begin, max end over all streams), from
 * ctf.fs's "babeltrace.trace-infos" query.  0 when found. */
static int trace_span(const bt_component_class_source *fs, const bt_value *inputs, int64_t *begin,
                      int64_t *end)
{
    bt_value *params = bt_value_map_create();
    bt_value *copy = NULL;
    bt_query_executor *q = NULL;
    const bt_value *res = NULL;
    int rc = -1;

    if (params == NULL || bt_value_copy(inputs, &copy) != BT_VALUE_COPY_STATUS_OK ||
        bt_value_map_insert_entry(params, "inputs", copy))
        goto end;
    q = bt_query_executor_create(bt_component_class_source_as_component_class_const(fs),
                                 "babeltrace.trace-infos", params);
    if (q == NULL || bt_query_executor_query(q, &res) != BT_QUERY_EXECUTOR_QUERY_STATUS_OK ||
        !bt_value_is_array(res))
        goto end;
    for (uint64_t t = 0; t < bt_value_array_get_length(res); t++) {
        const bt_value *ti = bt_value_array_borrow_element_by_index_const(res, t);
        const bt_value *sis =
            bt_value_is_map(ti) ? bt_value_map_borrow_entry_value_const(ti, "stream-infos") : NULL;
        if (sis == NULL || !bt_value_is_array(sis))
            continue;
        for (uint64_t s = 0; s < bt_value_array_get_length(sis); s++) {
            const bt_value *si = bt_value_array_borrow_element_by_index_const(sis, s);
            const bt_value *r =
                bt_value_is_map(si) ? bt_value_map_borrow_entry_value_const(si, "range-ns") : NULL;
            const bt_value *b, *e;
            if (r == NULL || !bt_value_is_map(r))
                continue;
            b = bt_value_map_borrow_entry_value_const(r, "begin");
            e = bt_value_map_borrow_entry_value_const(r, "end");
            if (b == NULL || e == NULL || !bt_value_is_signed_integer(b) ||
                !bt_value_is_signed_integer(e))
                continue;
            if (rc != 0 || bt_value_integer_signed_get(b) < *begin)
                *begin = bt_value_integer_signed_get(b);
            if (rc != 0 || bt_value_integer_signed_get(e) > *end)
                *end = bt_value_integer_signed_get(e);
            rc = 0;
        }
    }
end:
    bt_current_thread_clear_error();
    bt_value_put_ref(res);
    bt_query_executor_put_ref(q);
    bt_value_put_ref(copy);
    bt_value_put_ref(params);
    return rc;
}

/* ---- progress filter ---------------------------------------------------- */

struct progress {
    uint64_t events;
    uint64_t total_bytes;
    int64_t begin_ns, end_ns, last_ns;
    bool have_span;
    int64_t last_print;
    bool printed;
};

struct progress_iter {
    struct progress *p;
    bt_message_iterator *upstream;
    /* Messages received but not yet passed on (capacity mismatch). */
    const bt_message **queue;
    uint64_t queued, head, cap;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void progress_print(struct progress *p, bool final)
{
    double frac = 0.0;

    if (p->have_span && p->end_ns > p->begin_ns && p->last_ns > p->begin_ns)
        frac = (double)(p->last_ns - p->begin_ns) / (double)(p->end_ns - p->begin_ns);
    if (frac > 1.0)
        frac = 1.0;
    if (final)
        frac = 1.0;
    fprintf(stderr, "\rsertrace: %" PRIu64 " events read, ~%.1f of %.1f MB (%d%%)\033[K", p->events,
            frac * (double)p->total_bytes / 1e6, (double)p->total_bytes / 1e6, (int)(frac * 100.0));
    p->printed = true;
}

static void progress_done(struct progress *p)
{
    if (p->printed) {
        progress_print(p, true);
        fputc('\n', stderr);
    }
}

static bt_component_class_initialize_method_status
progress_comp_init(bt_self_component_filter *self, bt_self_component_filter_configuration *cfg,
                   const bt_value *params, void *data)
{
    (void)cfg;
    (void)params;
    bt_self_component_set_data(bt_self_component_filter_as_self_component(self), data);
    if (bt_self_component_filter_add_input_port(self, "in", NULL, NULL) !=
            BT_SELF_COMPONENT_ADD_PORT_STATUS_OK ||
        bt_self_component_filter_add_output_port(self, "out", NULL, NULL) !=
            BT_SELF_COMPONENT_ADD_PORT_STATUS_OK)
        return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_MEMORY_ERROR;
    return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_OK;
}

static bt_message_iterator_class_initialize_method_status
progress_iter_init(bt_self_message_iterator *self, bt_self_message_iterator_configuration *cfg,
                   bt_self_component_port_output *port)
{
    bt_self_component *comp = bt_self_message_iterator_borrow_component(self);
    struct progress_iter *it = calloc(1, sizeof(*it));
    bt_self_component_port_input *in;

    (void)cfg;
    (void)port;
    if (it == NULL)
        return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_MEMORY_ERROR;
    it->p = bt_self_component_get_data(comp);
    in = bt_self_component_filter_borrow_input_port_by_name((bt_self_component_filter *)comp, "in");
    if (bt_message_iterator_create_from_message_iterator(self, in, &it->upstream) !=
        BT_MESSAGE_ITERATOR_CREATE_FROM_MESSAGE_ITERATOR_STATUS_OK) {
        free(it);
        return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_ERROR;
    }
    bt_self_message_iterator_set_data(self, it);
    return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_OK;
}

static void progress_iter_fini(bt_self_message_iterator *self)
{
    struct progress_iter *it = bt_self_message_iterator_get_data(self);

    if (it == NULL)
        return;
    for (uint64_t i = it->head; i < it->queued; i++)
        bt_message_put_ref(it->queue[i]);
    free(it->queue);
    bt_message_iterator_put_ref(it->upstream);
    free(it);
}

static void progress_count(struct progress *p, const bt_message *m)
{
    if (bt_message_get_type(m) != BT_MESSAGE_TYPE_EVENT)
        return;
    p->events++;
    if (bt_message_event_borrow_stream_class_default_clock_class_const(m) != NULL) {
        int64_t ns;
        if (bt_clock_snapshot_get_ns_from_origin(
                bt_message_event_borrow_default_clock_snapshot_const(m), &ns) ==
            BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK)
            p->last_ns = ns;
    }
}

static bt_message_iterator_class_next_method_status
progress_iter_next(bt_self_message_iterator *self, bt_message_array_const msgs, uint64_t capacity,
                   uint64_t *count)
{
    struct progress_iter *it = bt_self_message_iterator_get_data(self);
    uint64_t n = 0;
    int64_t t;

    if (it->head == it->queued) {
        bt_message_array_const up;
        uint64_t up_count = 0;
        switch (bt_message_iterator_next(it->upstream, &up, &up_count)) {
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
            break;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_END;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_AGAIN;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_MEMORY_ERROR;
        default:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_ERROR;
        }
        if (up_count > it->cap) {
            const bt_message **q = realloc(it->queue, up_count * sizeof(*q));
            if (q == NULL) {
                for (uint64_t i = 0; i < up_count; i++)
                    bt_message_put_ref(up[i]);
                return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_MEMORY_ERROR;
            }
            it->queue = q;
            it->cap = up_count;
        }
        memcpy(it->queue, up, up_count * sizeof(*up)); /* references move */
        it->head = 0;
        it->queued = up_count;
    }
    while (it->head < it->queued && n < capacity) {
        progress_count(it->p, it->queue[it->head]);
        msgs[n++] = it->queue[it->head++];
    }
    *count = n;
    t = now_ns();
    if (t - it->p->last_print >= PROGRESS_INTERVAL_NS) {
        it->p->last_print = t;
        progress_print(it->p, false);
    }
    return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_OK;
}

static bt_component_class_filter *progress_class(void)
{
    bt_message_iterator_class *ic = bt_message_iterator_class_create(progress_iter_next);
    bt_component_class_filter *fc = NULL;

    if (ic == NULL)
        return NULL;
    if (bt_message_iterator_class_set_initialize_method(ic, progress_iter_init) ||
        bt_message_iterator_class_set_finalize_method(ic, progress_iter_fini))
        goto end;
    fc = bt_component_class_filter_create("sertrace-progress", ic);
    if (fc != NULL && bt_component_class_filter_set_initialize_method(fc, progress_comp_init) !=
                          BT_COMPONENT_CLASS_SET_METHOD_STATUS_OK) {
        bt_component_class_filter_put_ref(fc);
        fc = NULL;
    }
end:
    bt_message_iterator_class_put_ref(ic);
    return fc;
}

/* ---- sink parameters ------------------------------------------------------ */

static bt_value *sink_params(const struct report_opts *o)
{
    bt_value *p = bt_value_map_create();
    bool ok = p != NULL;

    if (ok && o->has_oversize)
        ok = bt_value_map_insert_string_entry(p, "oversize", o->oversize) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->exact)
        ok = bt_value_map_insert_bool_entry(p, "exact", BT_TRUE) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (o->mode == MODE_TREE) {
        if (ok && o->has_min_size)
            ok = bt_value_map_insert_unsigned_integer_entry(p, "min-size", o->min_size) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->has_max_depth)
            ok = bt_value_map_insert_unsigned_integer_entry(p, "max-depth", o->max_depth) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    } else {
        if (ok && o->has_top)
            ok = bt_value_map_insert_unsigned_integer_entry(p, "top", o->top) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->mode == MODE_JSON)
            ok = bt_value_map_insert_string_entry(p, "format", "json") ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    }
    if (!ok) {
        bt_value_put_ref(p);
        p = NULL;
    }
    return p;
}

/* ---- options ---------------------------------------------------------------- */

enum {
    OPT_TREE = 256,
    OPT_SUMMARY,
    OPT_JSON,
    OPT_OVERSIZE,
    OPT_TOP,
    OPT_MIN_SIZE,
    OPT_MAX_DEPTH,
    OPT_EXACT,
    OPT_LIVE,
};

/* 0 ok, 1 help printed, -1 usage error (printed). */
static int parse_report_opts(int argc, char **argv, struct report_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"tree", no_argument, NULL, OPT_TREE},
        {"summary", no_argument, NULL, OPT_SUMMARY},
        {"json", no_argument, NULL, OPT_JSON},
        {"oversize", required_argument, NULL, OPT_OVERSIZE},
        {"top", required_argument, NULL, OPT_TOP},
        {"min-size", required_argument, NULL, OPT_MIN_SIZE},
        {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"live", required_argument, NULL, OPT_LIVE},
        {NULL, 0, NULL, 0},
    };
    int c, modes = 0;

    memset(o, 0, sizeof(*o));
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(report_help, stdout);
            return 1;
        case OPT_TREE:
            o->mode = MODE_TREE;
            modes++;
            break;
        case OPT_SUMMARY:
            o->mode = MODE_SUMMARY;
            modes++;
            break;
        case OPT_JSON:
            o->mode = MODE_JSON;
            modes++;
            break;
        case OPT_OVERSIZE: {
            size_t len = strlen(optarg);
            o->has_oversize = true;
            o->oversize = optarg;
            if (len > 1 && optarg[len - 1] == '%') {
                char *end;
                double v = strtod(optarg, &end);
                if (end != optarg + len - 1 || !(v > 0.0 && v <= 100.0)) {
                    sertrace_cli_err("--oversize: invalid share '%s' (expected 0-100%%)", optarg);
                    return -1;
                }
            } else if (sertrace_cli_parse_size("--oversize", optarg, &o->oversize_bytes) != 0) {
                return -1;
            }
            break;
        }
        case OPT_TOP:
            if (sertrace_cli_parse_uint("--top", optarg, 100000, &o->top) != 0)
                return -1;
            o->has_top = true;
            break;
        case OPT_MIN_SIZE:
            if (sertrace_cli_parse_size("--min-size", optarg, &o->min_size) != 0)
                return -1;
            o->has_min_size = true;
            break;
        case OPT_MAX_DEPTH:
            if (sertrace_cli_parse_uint("--max-depth", optarg, UINT32_MAX, &o->max_depth) != 0)
                return -1;
            o->has_max_depth = true;
            break;
        case OPT_EXACT:
            o->exact = true;
            break;
        case OPT_LIVE:
            o->live_url = optarg;
            break;
        case '?':
        default:
            if (optopt != 0 && optopt < 256 && optopt != '?')
                sertrace_cli_err("report: unknown option -%c (see `sertrace report --help`)",
                                 optopt);
            else
                sertrace_cli_err("report: unknown or incomplete option %s (see `sertrace "
                                 "report --help`)",
                                 argv[optind - 1]);
            return -1;
        }
    }
    if (modes > 1) {
        sertrace_cli_err("report: choose one of --tree, --summary, --json");
        return -1;
    }
    if (o->mode == MODE_TREE && o->has_top) {
        sertrace_cli_err("report: --top applies to --summary and --json");
        return -1;
    }
    if (o->mode != MODE_TREE && (o->has_min_size || o->has_max_depth)) {
        sertrace_cli_err("report: --min-size and --max-depth apply to --tree");
        return -1;
    }
    if (o->live_url != NULL) {
        if (optind != argc) {
            sertrace_cli_err("report: --live URL takes no TRACE argument");
            return -1;
        }
        return 0;
    }
    if (argc - optind != 1) {
        sertrace_cli_err("report: expected one TRACE directory (see `sertrace report "
                         "--help`)");
        return -1;
    }
    o->trace = argv[optind];
    return 0;
}

/* ---- the graph ----------------------------------------------------------------- */

/* Progress goes to stderr when it is a terminal and the trace is large,
 * unless stdout is that same terminal: the report would then be torn by
 * the progress line (and scrolling output is progress enough). */
static bool want_progress(uint64_t bytes)
{
    const char *env = getenv("SERTRACE_PROGRESS");
    struct stat out, err;

    if (env != NULL && *env != '\0')
        return strcmp(env, "0") != 0;
    if (!isatty(STDERR_FILENO) || bytes <= PROGRESS_MIN_BYTES)
        return false;
    if (isatty(STDOUT_FILENO) && fstat(STDOUT_FILENO, &out) == 0 &&
        fstat(STDERR_FILENO, &err) == 0 && out.st_rdev == err.st_rdev)
        return false;
    return true;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int sertrace_cli_report(int argc, char **argv)
{
    struct report_opts o;
    const bt_plugin *ctf = NULL, *utils = NULL, *ours = NULL;
    const bt_component_class_source *fs_cls = NULL, *live_cls = NULL;
    const bt_component_class_filter *mux_cls = NULL;
    const bt_component_class_sink *sink_cls = NULL;
    bt_component_class_filter *prog_cls = NULL;
    struct trace_group *groups = NULL;
    int ngroups = 0;
    bt_graph *graph = NULL;
    const bt_component_filter *mux = NULL, *prog = NULL;
    const bt_component_sink *sink = NULL;
    bt_value *params = NULL, *sparams = NULL;
    struct progress progress;
    const char *sink_name;
    int rc = SERTRACE_CLI_ERROR, ret;
    uint64_t mux_port = 0;

    memset(&progress, 0, sizeof(progress));
    ret = parse_report_opts(argc, argv, &o);
    if (ret != 0)
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    sink_name = o.mode == MODE_TREE ? "tree" : "summary";

    ctf = find_std_plugin("ctf");
    utils = find_std_plugin("utils");
    if (ctf == NULL || utils == NULL) {
        sertrace_cli_err("babeltrace2's ctf and utils plugins were not found (install "
                         "babeltrace2)");
        goto end;
    }
    fs_cls = bt_plugin_borrow_source_component_class_by_name_const(ctf, "fs");
    live_cls = bt_plugin_borrow_source_component_class_by_name_const(ctf, "lttng-live");
    mux_cls = bt_plugin_borrow_filter_component_class_by_name_const(utils, "muxer");
    ours = find_sertrace_plugin();
    if (ours == NULL) {
        sertrace_cli_err("the sertrace babeltrace2 plugin was not found (looked in "
                         "$SERTRACE_PLUGIN_PATH, %s and babeltrace2's plugin path)",
                         SERTRACE_PLUGIN_INSTALL_DIR);
        goto end;
    }
    sink_cls = bt_plugin_borrow_sink_component_class_by_name_const(ours, sink_name);
    if (fs_cls == NULL || live_cls == NULL || mux_cls == NULL || sink_cls == NULL) {
        sertrace_cli_err("a component class is missing (source.ctf.fs, "
                         "source.ctf.lttng-live, filter.utils.muxer or sink.sertrace.%s)",
                         sink_name);
        goto end;
    }
    if (o.live_url == NULL && discover(o.trace, fs_cls, &groups, &ngroups) != 0)
        goto end;

    graph = bt_graph_create(0); /* bt2 2.0 knows MIP 0 only */
    if (graph == NULL)
        goto oom;
    if (bt_graph_add_filter_component(graph, mux_cls, "muxer", NULL, BT_LOGGING_LEVEL_WARNING,
                                      &mux) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        print_bt_error("cannot create the muxer");
        goto end;
    }
    if (o.live_url != NULL) {
        const bt_component_source *src = NULL;
        bt_value *inputs = bt_value_array_create();
        params = bt_value_map_create();
        if (inputs == NULL || params == NULL ||
            bt_value_array_append_string_element(inputs, o.live_url) ||
            bt_value_map_insert_entry(params, "inputs", inputs) ||
            bt_value_map_insert_string_entry(params, "session-not-found-action", "end")) {
            bt_value_put_ref(inputs);
            goto oom;
        }
        bt_value_put_ref(inputs);
        if (bt_graph_add_source_component(graph, live_cls, "live", params, BT_LOGGING_LEVEL_ERROR,
                                          &src) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
            print_bt_error("cannot read the live session (is the URL of the form "
                           "net://HOST/host/HOSTNAME/SESSION?)");
            goto end;
        }
        if (bt_graph_connect_ports(
                graph, bt_component_source_borrow_output_port_by_index_const(src, 0),
                bt_component_filter_borrow_input_port_by_index_const(mux, mux_port++),
                NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
            print_bt_error("cannot connect the live source");
            goto end;
        }
    }
    for (int g = 0; g < ngroups; g++) {
        const bt_component_source *src = NULL;
        char name[32];
        bt_value_put_ref(params);
        params = bt_value_map_create();
        if (params == NULL || bt_value_map_insert_entry(params, "inputs", groups[g].inputs))
            goto oom;
        snprintf(name, sizeof(name), "trace-%d", g);
        /* Silent: failures come back as error causes, printed below. */
        if (bt_graph_add_source_component(graph, fs_cls, name, params, BT_LOGGING_LEVEL_NONE,
                                          &src) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
            char what[PATH_MAX + 64];
            snprintf(what, sizeof(what), "%s: corrupt or unreadable trace",
                     bt_value_string_get(
                         bt_value_array_borrow_element_by_index_const(groups[g].inputs, 0)));
            print_bt_error(what);
            goto end;
        }
        for (uint64_t p = 0; p < bt_component_source_get_output_port_count(src); p++) {
            if (bt_graph_connect_ports(
                    graph, bt_component_source_borrow_output_port_by_index_const(src, p),
                    bt_component_filter_borrow_input_port_by_index_const(mux, mux_port++),
                    NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
                print_bt_error("cannot connect a trace stream to the muxer");
                goto end;
            }
        }
    }
    sparams = sink_params(&o);
    if (sparams == NULL)
        goto oom;
    if (bt_graph_add_sink_component(graph, sink_cls, sink_name, sparams, BT_LOGGING_LEVEL_WARNING,
                                    &sink) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        print_bt_error("the sertrace sink rejected the options");
        goto end;
    }
    if (o.live_url == NULL) {
        uint64_t bytes = sertrace_cli_tree_bytes(o.trace);
        if (want_progress(bytes)) {
            progress.total_bytes = bytes;
            for (int g = 0; g < ngroups; g++) {
                int64_t b = 0, e = 0;
                if (trace_span(fs_cls, groups[g].inputs, &b, &e) == 0) {
                    if (!progress.have_span || b < progress.begin_ns)
                        progress.begin_ns = b;
                    if (!progress.have_span || e > progress.end_ns)
                        progress.end_ns = e;
                    progress.have_span = true;
                }
            }
            prog_cls = progress_class();
            if (prog_cls == NULL ||
                bt_graph_add_filter_component_with_initialize_method_data(
                    graph, prog_cls, "progress", NULL, &progress, BT_LOGGING_LEVEL_WARNING,
                    &prog) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
                print_bt_error("cannot set up the progress display");
                goto end;
            }
        }
    }
    if (prog != NULL) {
        if (bt_graph_connect_ports(graph,
                                   bt_component_filter_borrow_output_port_by_index_const(mux, 0),
                                   bt_component_filter_borrow_input_port_by_index_const(prog, 0),
                                   NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK ||
            bt_graph_connect_ports(graph,
                                   bt_component_filter_borrow_output_port_by_index_const(prog, 0),
                                   bt_component_sink_borrow_input_port_by_index_const(sink, 0),
                                   NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
            print_bt_error("cannot connect the progress filter");
            goto end;
        }
    } else if (bt_graph_connect_ports(graph,
                                      bt_component_filter_borrow_output_port_by_index_const(mux, 0),
                                      bt_component_sink_borrow_input_port_by_index_const(sink, 0),
                                      NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
        print_bt_error("cannot connect the sertrace sink");
        goto end;
    }

    for (;;) {
        bt_graph_run_status st = bt_graph_run(graph);
        if (st == BT_GRAPH_RUN_STATUS_OK)
            break;
        if (st == BT_GRAPH_RUN_STATUS_AGAIN) {
            sleep_ms(LIVE_RETRY_MS);
            continue;
        }
        fflush(stdout);
        if (prog != NULL && progress.printed)
            fputc('\n', stderr);
        if (o.live_url != NULL)
            print_bt_error("reading the live session failed");
        else
            print_bt_error("reading the trace failed (corrupt trace?)");
        goto end;
    }
    fflush(stdout);
    if (prog != NULL)
        progress_done(&progress);
    rc = SERTRACE_CLI_OK;
    goto end;
oom:
    sertrace_cli_err("out of memory");
end:
    bt_value_put_ref(sparams);
    bt_value_put_ref(params);
    bt_graph_put_ref(graph);
    bt_component_class_filter_put_ref(prog_cls);
    free_groups(groups, ngroups);
    bt_plugin_put_ref(ours);
    bt_plugin_put_ref(utils);
    bt_plugin_put_ref(ctf);
    return rc;
}
