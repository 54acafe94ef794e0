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
 * each trace before the graph exists so that a corrupt one is skipped with
 * a warning naming it instead of sinking the whole report (discover(),
 * report-traces.c),
 * validates options itself (exit 2, one line), and turns babeltrace2's
 * error causes into one line (the whole chain with -v).
 *
 * Progress: a pass-through filter of our own, with a stdout that never
 * mixes with its line (report-progress.c).
 *
 * Live (--live): the tree sink gets flush-each-dump=true and stdout is
 * flushed whenever the source has nothing for now, so each tree shows as
 * its dump ends, on a terminal, a pipe or a file alike.
 *
 * Files: this one holds the options (with --help) and the graph;
 * report-plugin.c finds the plugins and words babeltrace2's errors;
 * report-traces.c finds, groups and checks the traces under TRACE (a
 * corrupt one skipped, damaged stream files cut or set aside);
 * report-progress.c the progress display.  report.h is their glue.
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
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "format.h"
#include "params.h" /* the sinks' parameters (analyzers/plugin) */
#include "report.h"

/* The shared help lines (DISPLAY_HELP_*) stand on lines of their own, as
 * they print: not reflowed by clang-format. */
/* clang-format off */
static const char report_help[] =
    "Usage: sertrace report [--tree | --summary | --json | EXPORT...] [OPTIONS] TRACE\n"
    "       sertrace report [--tree | --summary | --json | EXPORT...] [OPTIONS] --live URL\n"
    "\n"
    "Rebuild the object trees of every dump in TRACE (a directory written by\n"
    "`sertrace record`, `sertrace stop`, `sertrace snapshot` or lttng; every\n"
    "CTF trace found below it is read) and print them, or their summary.\n"
    "\n"
    "  --tree             one tree per dump, like DISPATCH_TRACE prints (default)\n"
    DISPLAY_HELP_SUMMARY
    "  --json             the summary as one JSON object (format \"sertrace-summary\")\n"
    "  --html OUT.html    a self-contained page: per dump a zoomable icicle of the\n"
    "                     size tree (hover, search, dump selector); opens offline\n"
    DISPLAY_HELP_FOLDED
    "  --speedscope OUT   speedscope JSON: one profile per dump, unit bytes\n"
    "  --perfetto OUT     Chrome trace-event JSON (ui.perfetto.dev): one event per\n"
    "                     dump on its pid/tid track, args serializer, payload, status\n"
    "                     The four may be combined (one pass over TRACE); OUT `-`\n"
    "                     is stdout (for one of them).  In every format a dump's\n"
    "                     bytes add up to its payload\n"
    "  --oversize SIZE    flag nodes of at least SIZE bytes (64K, 1.5MiB) or of at\n"
    "                     least this share of their dump (10%); must be more than\n"
    "                     0 (without --oversize nothing is flagged)\n"
    DISPLAY_HELP_TOP_TO_EXACT
    "  --pid PID          only the dumps of process PID\n"
    "  --dump N           only the dumps numbered N (the `dump N` of the tree\n"
    "                     header, `dump_id` in JSON; numbered per process)\n"
    "  --serializer NAME  only the dumps of serializer NAME (pickle, dill, ...);\n"
    "                     a dump whose dump_begin is not in the trace (cut at a\n"
    "                     snapshot's edge) has no known serializer and is left out.\n"
    "                     Each of --pid, --dump, --serializer may be repeated: a\n"
    "                     dump is kept when it matches one of the values given for\n"
    "                     each option given.  Filtered output ends with a line\n"
    "                     `── filter: ... · N dumps left out` (JSON: \"filter\")\n"
    DISPLAY_HELP_PATHS " (a\n"
    "                     \"paths\" list per dump and in \"totals\")\n"
    "  --no-per-dump      summary: no per-dump tables (each dump keeps its two\n"
    "                     header lines and its flags), then the overall tables\n"
    "  --live URL         read a live session from an lttng-relayd instead of a\n"
    "                     trace directory: URL is\n"
    "                     net://HOST[:PORT]/host/HOSTNAME/SESSION, e.g.\n"
    "                     net://127.0.0.1/host/$(hostname)/SESSION (see `sertrace\n"
    "                     start --live`); print trees as dumps end, and exit when\n"
    "                     the session is destroyed\n"
    "  -v, --verbose      print the plugin used, babeltrace2's warnings and, on\n"
    "                     failure, its whole error chain (default: one line)\n"
    "  -h, --help         this help\n"
    "\n"
    "Every CTF trace found below TRACE is read; one that cannot be read (corrupt\n"
    "metadata) is skipped with a warning naming it, and the others are reported.\n"
    "A stream file that is cut (or emptied) is read up to its last whole packet,\n"
    "and one babeltrace2 refuses is set aside: the rest of the trace is reported,\n"
    "and a warning names each such file and what was lost.\n"
    "\n"
    "The sertrace babeltrace2 plugin is searched in $SERTRACE_PLUGIN_PATH, then,\n"
    "when this `sertrace` is the uninstalled binary of a build tree, in that\n"
    "build's plugin directory, then in " SERTRACE_PLUGIN_INSTALL_DIR ",\n"
    "then in babeltrace2's plugin path (`sertrace --version` shows which).\n"
    "Progress (events read, MB) is shown on stderr when it is a terminal and the\n"
    "trace is over 50 MB (SERTRACE_PROGRESS_MIN_SIZE=SIZE sets that threshold;\n"
    "SERTRACE_PROGRESS=1 forces it, =0 disables it).  When stdout is that same\n"
    "terminal, the progress line is erased before report text is written and at\n"
    "the end: it never mixes into the report.\n"
    "\n"
    "Exit status: 0 ok; 1 runtime error (missing or empty trace, no readable trace,\n"
    "no sertrace events in it -- another program's trace, emptied stream files --,\n"
    "a trace that fails while being read, plugin not found); 2 usage error; 3 the\n"
    "report was printed but part of TRACE could not be read (a trace skipped, a\n"
    "stream file cut or set aside: each named on stderr).\n";
/* clang-format on */

/* ---- sink parameters ------------------------------------------------------ */

/* `inline_core`: the sink writes through our tty_out, which shares the
 * progress line's state with the progress filter on this thread; the
 * sink's worker thread would write from another one, so the core runs
 * inline (analyzers/plugin/feed.h). */
/* A sink parameter's name, from the one table (analyzers/plugin/params.h). */
#define PARAM(id) sertrace_sink_param_name(SERTRACE_PARAM_##id)

static bt_value *sink_params(const struct report_opts *o, bool inline_core)
{
    bt_value *p = bt_value_map_create();
    bool ok = p != NULL;

    if (ok && inline_core)
        ok = bt_value_map_insert_bool_entry(p, PARAM(WORKER_THREAD), BT_FALSE) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->d.has_oversize && o->d.oversize_percent > 0)
        ok = bt_value_map_insert_string_entry(p, PARAM(OVERSIZE), o->d.oversize) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    else if (ok && o->d.has_oversize)
        ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(OVERSIZE), o->d.oversize_bytes) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->d.exact)
        ok = bt_value_map_insert_bool_entry(p, PARAM(EXACT), BT_TRUE) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (o->d.mode == DISPLAY_TREE) {
        /* Live: each tree is written (and flushed) as its dump ends, not
         * when the sink's 64 KiB buffer fills. */
        if (ok && o->live_url != NULL)
            ok = bt_value_map_insert_bool_entry(p, PARAM(FLUSH_EACH_DUMP), BT_TRUE) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->d.has_min_size)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(MIN_SIZE), o->d.min_size) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->d.has_max_depth)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(MAX_DEPTH), o->d.max_depth) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    } else {
        if (ok && o->d.has_top)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(TOP), o->d.top) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->d.mode == DISPLAY_JSON)
            ok = bt_value_map_insert_string_entry(p, PARAM(FORMAT), "json") ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->d.no_per_dump)
            ok = bt_value_map_insert_bool_entry(p, PARAM(PER_DUMP), BT_FALSE) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->d.paths)
            ok = bt_value_map_insert_bool_entry(p, PARAM(PATHS), BT_TRUE) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    }
    for (int i = 0; ok && o->d.mode == DISPLAY_EXPORT && i < DISPLAY_NEXPORTS; i++)
        if (o->d.exports[i])
            ok = bt_value_map_insert_string_entry(p, sertrace_display_export_name(i),
                                                  o->d.exports[i]) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->d.mode == DISPLAY_EXPORT)
        ok = bt_value_map_insert_string_entry(p, sertrace_sink_param_name(SERTRACE_PARAM_TITLE),
                                              o->live_url ? o->live_url : o->trace) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->d.npids) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->d.npids; i++)
            ok = bt_value_array_append_unsigned_integer_element(a, o->d.pids[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(PID), a) == BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
    }
    if (ok && o->d.ndumps) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->d.ndumps; i++)
            ok = bt_value_array_append_unsigned_integer_element(a, o->d.dumps[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(DUMP), a) == BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
    }
    if (ok && o->d.nserializers) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->d.nserializers; i++)
            ok = bt_value_array_append_string_element(a, o->d.serializers[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(SERIALIZER), a) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
    }
    if (!ok) {
        bt_value_put_ref(p);
        p = NULL;
    }
    return p;
}

/* ---- options ---------------------------------------------------------------- */

/* report's own long options, numbered after the display options'. */
enum { OPT_LIVE = DOPT_END };

/* Digits only, 0..65535. */
static bool valid_port(const char *p, size_t len)
{
    unsigned long v = 0;

    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    return v <= 65535;
}

/* --live URL, checked against the grammar of babeltrace2's lttng-live
 * source (bt_common_parse_lttng_live_url in 2.0):
 *   net[4|6]://HOST[:PORT]/host/TARGET_HOSTNAME/SESSION
 * `report` needs the session part: without it the source only lists
 * sessions (`babeltrace2 -i lttng-live net://HOST` does that).  Checking
 * here gives one clear line instead of babeltrace2's error chain.
 * 0 ok, -1 usage error (printed). */
static int check_live_url(const char *url)
{
    const char *why = NULL, *at, *end;

    if (strncmp(url, "net://", 6) == 0)
        at = url + 6;
    else if (strncmp(url, "net4://", 7) == 0 || strncmp(url, "net6://", 7) == 0)
        at = url + 7;
    else {
        why = "it must start with net://";
        goto bad;
    }
    end = at + strcspn(at, ":/");
    if (end == at) {
        why = "the relay daemon's HOST is missing";
        goto bad;
    }
    at = end;
    if (*at == ':') {
        end = at + 1 + strcspn(at + 1, "/");
        if (!valid_port(at + 1, (size_t)(end - at - 1))) {
            why = "the PORT must be a number from 0 to 65535";
            goto bad;
        }
        at = end;
    }
    if (strncmp(at, "/host/", 6) != 0) {
        why = "/host/HOSTNAME/SESSION must follow HOST[:PORT]";
        goto bad;
    }
    at += 6;
    end = at + strcspn(at, "/");
    if (end == at || *end != '/') {
        why = "/host/HOSTNAME/SESSION must follow HOST[:PORT]";
        goto bad;
    }
    at = end + 1;
    if (*at == '\0' || strchr(at, '/') != NULL) {
        why = "SESSION (one path segment) must end the URL";
        goto bad;
    }
    return 0;
bad:
    sertrace_cli_err("--live: '%s' is not an LTTng live URL: %s (expected "
                     "net://HOST[:PORT]/host/HOSTNAME/SESSION; `babeltrace2 -i lttng-live "
                     "net://HOST[:PORT]` lists the sessions)",
                     url, why);
    return -1;
}

/* 0 ok, 1 help printed, -1 usage error (printed). */
static int parse_report_opts(int argc, char **argv, struct report_opts *o)
{
    struct option longopts[DOPT_END - DOPT_BASE_ + 4];
    size_t n = sertrace_display_longopts(DISPLAY_REPORT, longopts, DOPT_END - DOPT_BASE_);
    int c;

    longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n++] = (struct option){"verbose", no_argument, NULL, 'v'};
    longopts[n++] = (struct option){"live", required_argument, NULL, OPT_LIVE};
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    memset(o, 0, sizeof(*o));
    if (sertrace_display_init(&o->d, argc) != 0)
        return -1;
    while ((c = sertrace_display_getopt(argc, argv, "hv", longopts, &o->d)) != -1) {
        switch (c) {
        case 'h':
            fputs(report_help, stdout);
            return 1;
        case OPT_LIVE:
            if (check_live_url(optarg) != 0)
                return -1;
            o->live_url = optarg;
            break;
        case 'v':
            verbose = true;
            break;
        case DISPLAY_OPT_BAD:
            return -1;
        case '?':
        default:
            sertrace_display_unknown("report", argv);
            return -1;
        }
    }
    if (sertrace_display_check(&o->d, "report") != 0)
        return -1;
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

/* Progress goes to stderr when it is a terminal and the trace is larger
 * than SERTRACE_PROGRESS_MIN_SIZE (default 50 MB); SERTRACE_PROGRESS=1
 * forces it, =0 disables it.  *shared: stdout is that same terminal, so
 * the progress line must be kept out of the report (struct tty_out). */
static bool want_progress(uint64_t bytes, bool *shared)
{
    const char *env = getenv("SERTRACE_PROGRESS");
    const char *min_env = getenv("SERTRACE_PROGRESS_MIN_SIZE");
    uint64_t min = PROGRESS_MIN_BYTES;
    struct stat out, err;
    bool on;

    if (min_env != NULL && *min_env != '\0' && sertrace_parse_size(min_env, &min) != 0) {
        sertrace_cli_err("warning: ignoring SERTRACE_PROGRESS_MIN_SIZE='%s' (expected a "
                         "size such as 50M or 0)",
                         min_env);
        min = PROGRESS_MIN_BYTES;
    }
    if (env != NULL && *env != '\0')
        on = strcmp(env, "0") != 0;
    else
        on = isatty(STDERR_FILENO) && bytes > min;
    *shared = on && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) &&
              fstat(STDOUT_FILENO, &out) == 0 && fstat(STDERR_FILENO, &err) == 0 &&
              out.st_rdev == err.st_rdev;
    return on;
}

/* After a failed run: when the sink's error says the input held no
 * sertrace event at all, print "no sertrace events in WHERE" with the
 * sink's detail and return true (the error is taken); else false (the
 * error is left for print_bt_error). */
static bool no_sertrace_events(const char *where, int damaged)
{
    static const char prefix[] = "no sertrace events";
    const bt_error *err = bt_current_thread_take_error();
    bool found = false;

    if (err == NULL)
        return false;
    for (uint64_t i = 0; i < bt_error_get_cause_count(err) && !found; i++) {
        const char *msg = bt_error_cause_get_message(bt_error_borrow_cause_by_index(err, i));
        if (strncmp(msg, prefix, sizeof(prefix) - 1) == 0) {
            const char *detail = msg + sizeof(prefix) - 1;
            found = true;
            sertrace_cli_err("no sertrace events in %s%s%.*s: is this a trace of a program "
                             "that loaded sertrace?",
                             damaged ? "what could be read of " : "", where,
                             (int)strcspn(detail, "\n"), detail);
        }
    }
    if (!found) {
        bt_current_thread_move_error(err); /* back, for print_bt_error */
        return false;
    }
    bt_error_release(err);
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
    struct tty_out tty;
    bool want_prog = false, shared_tty = false;
    const char *sink_name, *plugin_from = NULL;
    /* Components log nothing by default: their errors come back as error
     * causes, printed as one line (the whole chain with --verbose). */
    bt_logging_level log_level;
    int rc = SERTRACE_CLI_ERROR, ret, damaged = 0;
    uint64_t mux_port = 0;

    memset(&progress, 0, sizeof(progress));
    memset(&tty, 0, sizeof(tty));
    ret = parse_report_opts(argc, argv, &o);
    if (ret != 0) {
        sertrace_display_free(&o.d);
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    }
    sink_name = o.d.mode == DISPLAY_TREE     ? "tree"
                : o.d.mode == DISPLAY_EXPORT ? "export"
                                             : "summary";
    log_level = verbose ? BT_LOGGING_LEVEL_WARNING : BT_LOGGING_LEVEL_NONE;

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
    ours = find_sertrace_plugin(&plugin_from);
    if (ours == NULL) {
        char where[2 * PATH_MAX + 128];
        plugin_search_text(where, sizeof(where));
        sertrace_cli_err("the sertrace babeltrace2 plugin was not found (looked in %s)", where);
        goto end;
    }
    if (verbose)
        fprintf(stderr, "sertrace: using the babeltrace2 plugin %s (from %s)\n",
                bt_plugin_get_path(ours) ? bt_plugin_get_path(ours) : "(built in)", plugin_from);
    sink_cls = bt_plugin_borrow_sink_component_class_by_name_const(ours, sink_name);
    if (fs_cls == NULL || live_cls == NULL || mux_cls == NULL || sink_cls == NULL) {
        sertrace_cli_err("a component class is missing (source.ctf.fs, "
                         "source.ctf.lttng-live, filter.utils.muxer or sink.sertrace.%s)",
                         sink_name);
        goto end;
    }
    if (o.live_url == NULL && discover(o.trace, fs_cls, &groups, &ngroups, &damaged) != 0)
        goto end;

    graph = bt_graph_create(0); /* bt2 2.0 knows MIP 0 only */
    if (graph == NULL)
        goto oom;
    if (bt_graph_add_filter_component(graph, mux_cls, "muxer", NULL, log_level, &mux) !=
        BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
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
        if (bt_graph_add_source_component(graph, live_cls, "live", params, log_level, &src) !=
            BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
            print_bt_error("cannot read the live session");
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
        if (bt_graph_add_source_component(graph, fs_cls, name, params, log_level, &src) !=
            BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
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
    if (o.live_url == NULL) {
        progress.total_bytes = sertrace_cli_tree_bytes(o.trace);
        want_prog = want_progress(progress.total_bytes, &shared_tty);
        /* Before the sink exists: it takes `stdout` when it is made. */
        if (want_prog && shared_tty && tty_out_install(&tty, &progress) != 0) {
            sertrace_cli_err("cannot set up the progress display: %s", strerror(errno));
            goto end;
        }
    }
    sparams = sink_params(&o, tty.real != NULL);
    if (sparams == NULL)
        goto oom;
    if (bt_graph_add_sink_component(graph, sink_cls, sink_name, sparams, log_level, &sink) !=
        BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        print_bt_error("the sertrace sink rejected the options");
        goto end;
    }
    if (want_prog) {
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
        if (prog_cls == NULL || bt_graph_add_filter_component_with_initialize_method_data(
                                    graph, prog_cls, "progress", NULL, &progress, log_level,
                                    &prog) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
            print_bt_error("cannot set up the progress display");
            goto end;
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
            /* Live: nothing to read for now; what was printed must reach
             * a pipe or file now, not when 4 KiB of stdio buffer fill. */
            fflush(stdout);
            sleep_ms(LIVE_RETRY_MS);
            continue;
        }
        fflush(stdout);
        if (shared_tty)
            tty_out_settle(&tty); /* the sink still holds our stdout */
        else if (prog != NULL && progress.printed)
            fputc('\n', stderr);
        if (no_sertrace_events(o.live_url != NULL ? o.live_url : o.trace, damaged))
            goto end;
        if (o.live_url != NULL)
            print_bt_error("reading the live session failed (is an lttng-relayd "
                           "listening at that HOST:PORT?)");
        else
            print_bt_error("reading the trace failed (corrupt trace?)");
        goto end;
    }
    bt_graph_put_ref(graph); /* the sink flushes its output */
    graph = NULL;
    fflush(stdout);
    if (shared_tty && tty_out_remove(&tty) != 0) {
        sertrace_cli_err("writing the report failed: %s", strerror(errno));
        goto end;
    }
    if (prog != NULL)
        progress_done(&progress);
    rc = SERTRACE_CLI_OK;
    if (damaged > 0) {
        sertrace_cli_err("the report is incomplete: %d damaged or unreadable part%s of %s "
                         "(named above) %s not read whole; exit status %d",
                         damaged, damaged == 1 ? "" : "s", o.trace, damaged == 1 ? "was" : "were",
                         REPORT_INCOMPLETE);
        rc = REPORT_INCOMPLETE;
    }
    goto end;
oom:
    sertrace_cli_err("out of memory");
end:
    bt_value_put_ref(sparams);
    bt_value_put_ref(params);
    bt_graph_put_ref(graph);
    tty_out_remove(&tty);
    bt_component_class_filter_put_ref(prog_cls);
    free_groups(groups, ngroups);
    bt_plugin_put_ref(ours);
    bt_plugin_put_ref(utils);
    bt_plugin_put_ref(ctf);
    sertrace_display_free(&o.d);
    remove_shadows();
    return rc;
}
