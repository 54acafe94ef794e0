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
 * a warning naming it instead of sinking the whole report (discover()),
 * validates options itself (exit 2, one line), and turns babeltrace2's
 * error causes into one line (the whole chain with -v).
 *
 * Progress: when stderr is a terminal and the trace is larger than 50 MB
 * (SERTRACE_PROGRESS_MIN_SIZE), a pass-through filter of our own (a
 * component class made at run time, not a plugin) counts events and reads their timestamps; the bytes read
 * are estimated as (time reached / time span) x trace size, since ctf.fs
 * maps the stream files and reports no offset.  At most 4 updates/s.
 * SERTRACE_PROGRESS=1 forces it on, =0 off (tests use it).  When stdout is
 * that same terminal, stdout is a stream of ours (struct tty_out) that
 * erases the progress line before report bytes go out and writes whole
 * lines only, so the line never tears or mixes into the report.
 *
 * Live (--live): the tree sink gets flush-each-dump=true and stdout is
 * flushed whenever the source has nothing for now, so each tree shows as
 * its dump ends, on a terminal, a pipe or a file alike.
 *
 * The sertrace plugin is looked up in $SERTRACE_PLUGIN_PATH (colon
 * separated), then -- only when this process is the build tree's own
 * uninstalled binary -- in that build's plugin directory, then in the
 * directory it was installed to at build time, then through babeltrace2's
 * own search (BABELTRACE_PLUGIN_PATH, user and system plugin directories).
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

#define PROGRESS_MIN_BYTES (50ull * 1000 * 1000)
#define PROGRESS_INTERVAL_NS 250000000ll
#define LIVE_RETRY_MS 100

enum report_mode { MODE_TREE, MODE_SUMMARY, MODE_JSON };

struct report_opts {
    enum report_mode mode;
    const char *trace;
    const char *live_url;
    const char *oversize; /* the text, passed as is when it is a share ("10%") */
    uint64_t oversize_bytes;
    bool oversize_is_share;
    bool has_oversize, has_top, has_min_size, has_max_depth, exact;
    uint64_t top, min_size, max_depth;
    bool no_per_dump;
    /* Filters: each repeatable (a dump is kept when it matches any value
     * given for an option, and every option given); sink parameters
     * `pid`, `dump`, `serializer`.  Sized argc: never more values than
     * arguments. */
    uint64_t *pids, *dumps;
    const char **serializers;
    size_t npids, ndumps, nserializers;
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
    "                     least this share of their dump (10%); must be more than\n"
    "                     0 (without --oversize nothing is flagged)\n"
    "  --top N            largest nodes listed in the summary (default 10, at\n"
    "                     most 100000)\n"
    "  --min-size SIZE    tree: fold siblings smaller than SIZE into one line\n"
    "  --max-depth N      tree: fold nodes deeper than N (0: show all)\n"
    "  --exact            sizes in bytes instead of KiB/MiB\n"
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

/* ---- errors ------------------------------------------------------------ */

/* -v/--verbose: babeltrace2's whole error chain, component logging at
 * WARNING, and the plugin path.  Set once by the option parser. */
static bool verbose;

/* Drop the "NAME-addr=0x..." fields babeltrace2 puts in its messages
 * (object addresses mean nothing to a user) from `s`, in place. */
static void drop_addresses(char *s)
{
    char *a;

    while ((a = strstr(s, "addr=0x")) != NULL) {
        char *key = a, *end = a + 7;
        while (key > s && key[-1] != ' ' && key[-1] != ',' && key[-1] != '(')
            key--;
        while ((*end >= '0' && *end <= '9') || (*end >= 'a' && *end <= 'f') ||
               (*end >= 'A' && *end <= 'F'))
            end++;
        if (end[0] == ',' && end[1] == ' ')
            end += 2;
        else if (key > s + 1 && key[-1] == ' ' && key[-2] == ',')
            key -= 2; /* last field: drop the separator before it */
        memmove(key, end, strlen(end) + 1);
    }
    /* "Message: " with every field gone. */
    size_t len = strlen(s);
    if (len >= 2 && s[len - 2] == ':' && s[len - 1] == ' ')
        s[len - 2] = '\0';
}

/* Take this thread's babeltrace2 error: copy the first line of its root
 * cause into `root` (empty when there is no error); with --verbose, print
 * the whole chain on stderr (outermost first, as "  MODULE: MESSAGE");
 * then release it.  The root cause is the cause appended first (index 0
 * here: the most specific, e.g. "Invalid LTTng live URL format: Unknown
 * protocol") that a component or plugin wrote; the library's own causes
 * ("Component class's "query" method failed: query-exec-addr=0x...")
 * only say which call failed, so they are used, cut before their
 * key=value list, when nothing else explains the error.  Returns true
 * when `root` came from a component or plugin (an explanation). */
static bool take_bt_error(char *root, size_t n)
{
    const bt_error *err = bt_current_thread_take_error();
    uint64_t count, pick = 0;
    const char *msg;
    size_t len;
    bool explained = false;

    root[0] = '\0';
    if (err == NULL)
        return false;
    count = bt_error_get_cause_count(err);
    while (pick < count &&
           strcmp(bt_error_cause_get_module_name(bt_error_borrow_cause_by_index(err, pick)),
                  "libbabeltrace2") == 0)
        pick++;
    if (count > 0) {
        bool library = pick == count;
        explained = !library;
        msg = bt_error_cause_get_message(bt_error_borrow_cause_by_index(err, library ? 0 : pick));
        len = strcspn(msg, "\n");
        if (library && strstr(msg, ": ") != NULL && (size_t)(strstr(msg, ": ") - msg) < len)
            len = (size_t)(strstr(msg, ": ") - msg);
        snprintf(root, n, "%.*s", (int)(len < n ? len : n - 1), msg);
        drop_addresses(root);
    }
    for (uint64_t i = count; verbose && i-- > 0;) {
        const bt_error_cause *c = bt_error_borrow_cause_by_index(err, i);
        const char *msg = bt_error_cause_get_message(c);
        int len = (int)strcspn(msg, "\n");
        fprintf(stderr, "  %s: %.*s\n", bt_error_cause_get_module_name(c), len, msg);
    }
    bt_error_release(err);
    return explained;
}

/* One line: "sertrace: WHAT: ROOT CAUSE", the chain only with --verbose
 * (printed below that line). */
static void print_bt_error(const char *what)
{
    char root[512];

    if (verbose) {
        sertrace_cli_err("%s; babeltrace2's error, outermost cause first:", what);
        take_bt_error(root, sizeof(root));
        return;
    }
    take_bt_error(root, sizeof(root));
    if (root[0] != '\0')
        sertrace_cli_err("%s: %s (-v shows babeltrace2's whole error)", what, root);
    else
        sertrace_cli_err("%s", what);
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

/* True when this process is the uninstalled `sertrace` of the build tree
 * that config.h describes: /proc/self/exe (the kernel's resolved path of
 * our executable) is that build's executable.  An installed copy, or a
 * binary of another build tree, answers false. */
static bool running_from_build_tree(void)
{
    char self[PATH_MAX], built[PATH_MAX];
    ssize_t n;

    if (SERTRACE_PLUGIN_BUILD_DIR[0] == '\0')
        return false;
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    if (realpath(SERTRACE_BUILD_EXE, built) == NULL)
        return false;
    return strcmp(self, built) == 0;
}

/* The sertrace plugin, looked up in $SERTRACE_PLUGIN_PATH, then (only for
 * the build tree's own binary) in the build's plugin directory, so that a
 * build-tree `sertrace` never silently runs a stale installed plugin; then
 * in the install directory; then in babeltrace2's search path.  *from
 * names the place it was found. */
static const bt_plugin *find_sertrace_plugin(const char **from)
{
    const char *env = getenv("SERTRACE_PLUGIN_PATH");
    const bt_plugin *p = NULL;

    *from = "$SERTRACE_PLUGIN_PATH";
    if (env != NULL && *env != '\0') {
        char *copy = strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !p;
             d = strtok_r(NULL, ":", &save))
            p = plugin_from_dir(d, "sertrace");
        free(copy);
    }
    if (p == NULL && running_from_build_tree()) {
        *from = "the build tree";
        p = plugin_from_dir(SERTRACE_PLUGIN_BUILD_DIR, "sertrace");
    }
    if (p == NULL) {
        *from = "the install directory";
        p = plugin_from_dir(SERTRACE_PLUGIN_INSTALL_DIR, "sertrace");
    }
    if (p == NULL) {
        *from = "babeltrace2's plugin path";
        if (bt_plugin_find("sertrace", BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
            BT_PLUGIN_FIND_STATUS_OK)
            p = NULL;
    }
    bt_current_thread_clear_error();
    return p;
}

/* The places find_sertrace_plugin() looks, for messages. */
static void plugin_search_text(char *out, size_t n)
{
    snprintf(out, n, "$SERTRACE_PLUGIN_PATH, %s%s%s and babeltrace2's plugin path",
             running_from_build_tree() ? SERTRACE_PLUGIN_BUILD_DIR : "",
             running_from_build_tree() ? ", " : "", SERTRACE_PLUGIN_INSTALL_DIR);
}

int sertrace_cli_print_plugin(FILE *out)
{
    const char *from = NULL;
    const bt_plugin *p = find_sertrace_plugin(&from);
    char where[2 * PATH_MAX + 128];

    if (p == NULL) {
        plugin_search_text(where, sizeof(where));
        fprintf(out, "babeltrace2 plugin: not found (looked in %s)\n", where);
        return -1;
    }
    fprintf(out, "babeltrace2 plugin: %s (from %s)\n",
            bt_plugin_get_path(p) ? bt_plugin_get_path(p) : "(built in)", from);
    bt_plugin_put_ref(p);
    return 0;
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

#define CTF_METADATA_MAGIC 0x75D11D57u
/* Metadata packet header: magic, uuid[16], checksum, content and packet
 * size (bits), then 5 one-byte fields. */
#define CTF_METADATA_HEADER_BYTES 37

static uint32_t read_u32(const unsigned char *p, bool swap)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return swap ? __builtin_bswap32(v) : v;
}

/* LTTng writes packetized metadata: a sequence of packets, each with a
 * 37-byte header giving its content and total size in bits.  babeltrace2
 * 2.0.4 loops forever on a file that ends inside a packet (a truncated
 * copy, a disk that filled up: measured, `babeltrace2 DIR` too), so the
 * packet chain is walked here before babeltrace2 sees the file.  Text
 * metadata (plain TSDL, not packetized) is left to babeltrace2.  0 ok, -1 with the
 * reason in `reason`. */
static int check_metadata_packets(const char *dir, char *reason, size_t n)
{
    char path[PATH_MAX];
    unsigned char h[CTF_METADATA_HEADER_BYTES];
    struct stat sb;
    uint64_t off = 0;
    uint32_t magic;
    bool swap;
    FILE *f;
    int rc = -1;

    snprintf(path, sizeof(path), "%s/metadata", dir);
    f = fopen(path, "rb");
    if (f == NULL || fstat(fileno(f), &sb) != 0) {
        snprintf(reason, n, "cannot read its metadata file: %s", strerror(errno));
        goto end;
    }
    if (fread(h, 1, 4, f) != 4) {
        snprintf(reason, n, "its metadata file is empty or too short");
        goto end;
    }
    magic = read_u32(h, false);
    if (magic != CTF_METADATA_MAGIC && magic != __builtin_bswap32(CTF_METADATA_MAGIC)) {
        rc = 0; /* text metadata, or garbage: babeltrace2 judges */
        goto end;
    }
    swap = magic != CTF_METADATA_MAGIC;
    while (off < (uint64_t)sb.st_size) {
        uint32_t content_bits, packet_bits;
        if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(h, 1, sizeof(h), f) != sizeof(h) ||
            read_u32(h, swap) != CTF_METADATA_MAGIC) {
            snprintf(reason, n, "its metadata file is truncated or damaged at byte %" PRIu64, off);
            goto end;
        }
        content_bits = read_u32(h + 24, swap);
        packet_bits = read_u32(h + 28, swap);
        if (packet_bits % 8 != 0 || packet_bits < 8 * CTF_METADATA_HEADER_BYTES ||
            content_bits > packet_bits || content_bits < 8 * CTF_METADATA_HEADER_BYTES ||
            off + packet_bits / 8 > (uint64_t)sb.st_size) {
            snprintf(reason, n, "its metadata file is truncated or damaged at byte %" PRIu64, off);
            goto end;
        }
        off += packet_bits / 8;
    }
    rc = 0;
end:
    if (f != NULL)
        fclose(f);
    return rc;
}

/* Can source.ctf.fs open the trace in `dir`?  A ctf.fs component is
 * made for it alone in a throwaway graph: its initialization parses the
 * whole metadata and reads the stream files' indexes (or packet headers).
 * Done apart because a component that fails to initialize makes its graph
 * faulty (unusable), so one broken trace would sink the report.  Not the
 * "babeltrace.trace-infos" query, which does the same work: on a damaged
 * stream file babeltrace2 2.0.4 aborts the process inside that query
 * (an error cause appended from a NULL component).  0 ok, -1 with the
 * root cause in `reason`. */
static int check_trace(const bt_component_class_source *fs, const char *dir, char *reason, size_t n)
{
    bt_graph *graph = bt_graph_create(0);
    bt_value *params = bt_value_map_create();
    bt_value *inputs = bt_value_array_create();
    const bt_component_source *src = NULL;
    int rc = -1;

    snprintf(reason, n, "out of memory");
    if (graph == NULL || params == NULL || inputs == NULL ||
        bt_value_array_append_string_element(inputs, dir) ||
        bt_value_map_insert_entry(params, "inputs", inputs))
        goto end;
    if (bt_graph_add_source_component(graph, fs, "check", params,
                                      verbose ? BT_LOGGING_LEVEL_WARNING : BT_LOGGING_LEVEL_NONE,
                                      &src) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        if (!take_bt_error(reason, n))
            snprintf(reason, n, "source.ctf.fs cannot open it");
        goto end;
    }
    rc = 0;
end:
    bt_current_thread_clear_error();
    bt_value_put_ref(inputs);
    bt_value_put_ref(params);
    bt_graph_put_ref(graph);
    return rc;
}

/* ---- damaged stream files ------------------------------------------------ */

/* A stream file that is cut (a copy that stopped, a disk that filled, a
 * process killed while consumerd wrote) or that babeltrace2 refuses makes
 * source.ctf.fs refuse the WHOLE trace in 2.0.4, at initialization ("Failed
 * to index CTF stream file" for a file that ends inside a packet; "No
 * stream class with ID ..." for packets naming a stream class the metadata
 * lacks, seen after a SIGKILL), or, cut at a packet boundary, read it
 * silently as if nothing were missing.  So before the graph exists each
 * stream file is checked here:
 *   - its packets are walked (LTTng's packet header: CTF magic at 0,
 *     content and packet size in bits at 48 and 56, in the trace's byte
 *     order): the whole packets before a cut or a damaged header are its
 *     readable part;
 *   - LTTng's index (index/NAME.idx, big-endian: a 16-byte header, then
 *     one entry per packet starting with its offset and size in bits)
 *     says how long the file was written: a file shorter than its last
 *     indexed packet's end was cut, even at a packet boundary.
 * A trace with such a file is read from a shadow directory (mkdtemp):
 * the metadata and the intact stream files as symlinks, each cut file as
 * a copy of its whole packets.  If source.ctf.fs still refuses it, each
 * stream file is tried alone and those it refuses are set aside with
 * babeltrace2's reason.  Every cut or set-aside file is named on stderr
 * with what was lost, and `report` then exits 3 (REPORT_INCOMPLETE).
 * A file whose first packet does not look like LTTng's is left to
 * babeltrace2 (the per-file trial still applies). */

#define REPORT_INCOMPLETE 3

static int write_all(int fd, const char *b, size_t n);
#define CTF_PACKET_MAGIC 0xC1FC1FC1u
#define CTF_INDEX_MAGIC 0xC1F1DCC1u
#define LTTNG_PACKET_HEADER_BYTES 64 /* up to and with packet_size */

static uint64_t read_u64(const unsigned char *p, bool swap)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return swap ? __builtin_bswap64(v) : v;
}

static uint64_t read_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

enum stream_state { STREAM_OK, STREAM_CUT, STREAM_SET_ASIDE };

struct stream_file {
    char *name;        /* file name in its trace directory */
    uint64_t size;     /* bytes on disk */
    uint64_t whole;    /* bytes of whole packets from the start */
    uint64_t packets;  /* whole packets */
    uint64_t expected; /* bytes the index says were written (0: no index) */
    enum stream_state state;
    char why[384];
};

/* Walk the packets of `path` (`size` bytes).  Sets f->whole/packets; a
 * cut or damaged header: STREAM_CUT with the reason.  A first packet that
 * is not LTTng's layout leaves the file alone (STREAM_OK, whole = size). */
static void walk_packets(const char *path, struct stream_file *f)
{
    unsigned char h[LTTNG_PACKET_HEADER_BYTES];
    uint64_t off = 0;
    FILE *fp = fopen(path, "rb");
    bool swap = false;

    f->whole = f->size;
    f->packets = 0;
    if (fp == NULL) {
        f->state = STREAM_SET_ASIDE;
        snprintf(f->why, sizeof(f->why), "cannot be opened: %s", strerror(errno));
        return;
    }
    while (off < f->size) {
        uint64_t content, packet;
        uint32_t magic;
        if (f->size - off < sizeof(h) || fseeko(fp, (off_t)off, SEEK_SET) != 0 ||
            fread(h, 1, sizeof(h), fp) != sizeof(h)) {
            if (off == 0)
                break; /* too short to be LTTng's: babeltrace2 judges */
            snprintf(f->why, sizeof(f->why),
                     "ends %" PRIu64 " bytes into a packet header at byte %" PRIu64, f->size - off,
                     off);
            goto cut;
        }
        magic = read_u32(h, false);
        if (off == 0) {
            if (magic != CTF_PACKET_MAGIC && magic != __builtin_bswap32(CTF_PACKET_MAGIC))
                break; /* not LTTng's layout (or garbage): babeltrace2 judges */
            swap = magic != CTF_PACKET_MAGIC;
        }
        content = read_u64(h + 48, swap);
        packet = read_u64(h + 56, swap);
        if (read_u32(h, swap) != CTF_PACKET_MAGIC || packet % 8 != 0 || packet < 8 * sizeof(h) ||
            content > packet || content < 8 * sizeof(h)) {
            if (off == 0)
                break;
            snprintf(f->why, sizeof(f->why), "has a damaged packet header at byte %" PRIu64, off);
            goto cut;
        }
        if (packet / 8 > f->size - off) {
            snprintf(f->why, sizeof(f->why),
                     "ends at byte %" PRIu64 ", inside packet %" PRIu64 " (bytes %" PRIu64
                     "-%" PRIu64 ")",
                     f->size, f->packets + 1, off, off + packet / 8);
            goto cut;
        }
        off += packet / 8;
        f->packets++;
    }
    fclose(fp);
    return;
cut:
    f->state = STREAM_CUT;
    f->whole = off;
    fclose(fp);
}

/* The bytes LTTng's index for `name` says were written, or 0 (no index,
 * or one that cannot be read). */
static uint64_t index_expected(const char *dir, const char *name)
{
    char path[PATH_MAX];
    unsigned char hdr[16], e[16];
    struct stat sb;
    uint64_t len, count, end = 0;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/index/%s.idx", dir, name);
    fp = fopen(path, "rb");
    if (fp == NULL)
        return 0;
    if (fstat(fileno(fp), &sb) != 0 || fread(hdr, 1, sizeof(hdr), fp) != sizeof(hdr) ||
        read_be64(hdr) >> 32 != CTF_INDEX_MAGIC)
        goto end;
    len = read_be64(hdr + 8) & 0xffffffffu;
    if (len < sizeof(e) || (uint64_t)sb.st_size < sizeof(hdr) + len)
        goto end;
    count = ((uint64_t)sb.st_size - sizeof(hdr)) / len;
    if (fseeko(fp, (off_t)(sizeof(hdr) + (count - 1) * len), SEEK_SET) != 0 ||
        fread(e, 1, sizeof(e), fp) != sizeof(e) || read_be64(e + 8) % 8 != 0)
        goto end;
    end = read_be64(e) + read_be64(e + 8) / 8;
end:
    fclose(fp);
    return end;
}

/* What source.ctf.fs would read as stream files in `dir`: regular files
 * (symlinks followed) other than `metadata`, not hidden.  Each checked. */
static int list_streams(const char *dir, struct stream_file **out, size_t *count)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    struct stream_file *v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    *count = 0;
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        if (de->d_name[0] == '.' || strcmp(de->d_name, "metadata") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            struct stream_file *g = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));
            if (g == NULL)
                goto oom;
            v = g;
        }
        memset(&v[n], 0, sizeof(v[n]));
        v[n].name = strdup(de->d_name);
        if (v[n].name == NULL)
            goto oom;
        v[n].size = (uint64_t)sb.st_size;
        walk_packets(path, &v[n]);
        v[n].expected = index_expected(dir, de->d_name);
        if (v[n].state == STREAM_OK && v[n].expected > v[n].size) {
            v[n].state = STREAM_CUT;
            snprintf(v[n].why, sizeof(v[n].why),
                     "is shorter than its index says (%" PRIu64 " of %" PRIu64 " bytes)", v[n].size,
                     v[n].expected);
        }
        n++;
    }
    closedir(d);
    *out = v;
    *count = n;
    return 0;
oom:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    errno = ENOMEM;
    return -1;
}

static void free_streams(struct stream_file *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

/* Copy the first `n` bytes of `src` into a new file `dst`. */
static int copy_prefix(const char *src, const char *dst, uint64_t n)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    char buf[1 << 16];

    if (in < 0)
        return -1;
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        goto end;
    while (n > 0) {
        ssize_t r =
            copy_file_range(in, NULL, out, NULL, (size_t)(n < (1u << 30) ? n : (1u << 30)), 0);
        if (r < 0 &&
            (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
            r = read(in, buf, n < sizeof(buf) ? (size_t)n : sizeof(buf));
            if (r > 0 && write_all(out, buf, (size_t)r) != 0)
                goto end;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto end;
        n -= (uint64_t)r;
    }
    rc = 0;
end:
    if (out >= 0 && close(out) != 0)
        rc = -1;
    close(in);
    return rc;
}

/* Shadow directories made for damaged traces (removed at the end). */
static char *shadow_root;
static int shadow_count;

static void remove_shadows(void)
{
    if (shadow_root != NULL) {
        sertrace_cli_remove_tree(shadow_root);
        free(shadow_root);
        shadow_root = NULL;
    }
}

/* A directory holding `dir`'s metadata and the streams of `v` that are not
 * set aside (only `only` when it is not SIZE_MAX): intact files as
 * symlinks, cut ones as copies of their whole packets (none when they have
 * none).  Returns a malloc'd path or NULL (errno). */
static char *make_shadow(const char *dir, struct stream_file *v, size_t n, size_t only)
{
    char path[PATH_MAX], abs_dir[PATH_MAX];
    char src[2 * PATH_MAX + 16], dst[2 * PATH_MAX + 16];

    if (realpath(dir, abs_dir) == NULL)
        return NULL;
    if (shadow_root == NULL) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof(path), "%s/sertrace-report-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(path) == NULL || (shadow_root = strdup(path)) == NULL)
            return NULL;
    }
    snprintf(path, sizeof(path), "%s/%d", shadow_root, shadow_count++);
    if (mkdir(path, 0700) != 0)
        return NULL;
    snprintf(src, sizeof(src), "%s/metadata", abs_dir);
    snprintf(dst, sizeof(dst), "%s/metadata", path);
    if (symlink(src, dst) != 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (v[i].state == STREAM_SET_ASIDE || (only != SIZE_MAX && i != only))
            continue;
        snprintf(src, sizeof(src), "%s/%s", abs_dir, v[i].name);
        snprintf(dst, sizeof(dst), "%s/%s", path, v[i].name);
        if (v[i].state == STREAM_OK ? symlink(src, dst) != 0
                                    : v[i].whole > 0 && copy_prefix(src, dst, v[i].whole) != 0)
            return NULL;
    }
    return strdup(path);
}

static void human_bytes(uint64_t b, char out[32])
{
    sertrace_cli_human_size(b, out);
}

/* Warn about each damaged stream file of `dir`; returns their number. */
static int warn_damaged(const char *dir, const struct stream_file *v, size_t n)
{
    int damaged = 0;

    for (size_t i = 0; i < n; i++) {
        char a[32], b[32];
        if (v[i].state == STREAM_CUT) {
            human_bytes(v[i].whole, a);
            if (v[i].expected > v[i].size) {
                human_bytes(v[i].expected - v[i].whole, b);
                sertrace_cli_err("warning: %s/%s %s: read its first %" PRIu64
                                 " whole packets (%s); %s written by the tracer are missing",
                                 dir, v[i].name, v[i].why, v[i].packets, a, b);
            } else {
                human_bytes(v[i].size - v[i].whole, b);
                sertrace_cli_err("warning: %s/%s %s: read its first %" PRIu64
                                 " whole packets (%s); the rest (%s) is cut off",
                                 dir, v[i].name, v[i].why, v[i].packets, a, b);
            }
            damaged++;
        } else if (v[i].state == STREAM_SET_ASIDE) {
            human_bytes(v[i].size, a);
            sertrace_cli_err("warning: %s/%s set aside (%s): its %s are not read", dir, v[i].name,
                             v[i].why, a);
            damaged++;
        }
    }
    return damaged;
}

/* Make `dir` readable by source.ctf.fs if it can be: check its stream
 * files, set aside what cannot be read, and put in *use the directory to
 * read (`dir` itself, or a shadow).  Adds the damaged files to *damaged.
 * 0 ok, -1 nothing readable (`reason` says why). */
static int readable_part(const bt_component_class_source *fs, const char *dir, char **use,
                         int *damaged, char *reason, size_t rn)
{
    struct stream_file *v = NULL;
    size_t n = 0, left = 0;
    bool shadow = false;
    char *path = NULL;
    int rc = -1;

    *use = NULL;
    if (list_streams(dir, &v, &n) != 0) {
        snprintf(reason, rn, "cannot list its stream files: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        shadow = shadow || v[i].state != STREAM_OK;
    path = shadow ? make_shadow(dir, v, n, SIZE_MAX) : strdup(dir);
    if (path == NULL) {
        snprintf(reason, rn, "cannot make a copy of its readable part: %s", strerror(errno));
        goto end;
    }
    if (check_trace(fs, path, reason, rn) != 0) {
        /* Which stream files does babeltrace2 refuse?  Each alone. */
        char why[512];
        for (size_t i = 0; i < n; i++) {
            char *one;
            if (v[i].state == STREAM_SET_ASIDE || (v[i].state == STREAM_CUT && v[i].whole == 0))
                continue;
            one = make_shadow(dir, v, n, i);
            if (one == NULL) {
                snprintf(reason, rn, "cannot make a copy of its readable part: %s",
                         strerror(errno));
                goto end;
            }
            if (check_trace(fs, one, why, sizeof(why)) != 0) {
                v[i].state = STREAM_SET_ASIDE;
                snprintf(v[i].why, sizeof(v[i].why), "babeltrace2 refuses it: %.300s", why);
            }
            free(one);
        }
        free(path);
        path = make_shadow(dir, v, n, SIZE_MAX);
        if (path == NULL) {
            snprintf(reason, rn, "cannot make a copy of its readable part: %s", strerror(errno));
            goto end;
        }
        for (size_t i = 0; i < n; i++)
            left +=
                v[i].state != STREAM_SET_ASIDE && !(v[i].state == STREAM_CUT && v[i].whole == 0);
        if (left == 0 || check_trace(fs, path, why, sizeof(why)) != 0) {
            /* keep check_trace's first reason: it names the problem; the
             * files are named, the trace counts once (skipped) */
            (void)warn_damaged(dir, v, n);
            goto end;
        }
    }
    *damaged += warn_damaged(dir, v, n);
    *use = path;
    path = NULL;
    rc = 0;
end:
    free(path);
    free_streams(v, n);
    return rc;
}

/* Find the traces under `root` and group them by UUID.  A trace that
 * cannot be read is skipped with one warning (path and reason): a stray
 * broken trace must not hide the good ones next to it.  Prints the error
 * and returns -1 when no readable trace remains. */
static int discover(const char *root, const bt_component_class_source *fs, struct trace_group **out,
                    int *count, int *damaged)
{
    struct stat sb;
    char **dirs = NULL;
    int n, ngroups = 0, skipped = 0, rc = -1;
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
        char *group = NULL, *use = NULL, reason[512];
        double w;
        int j;
        if (check_metadata_packets(dirs[i], reason, sizeof(reason)) != 0) {
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            skipped++;
            continue;
        }
        w = support_info(fs, dirs[i], &group);
        if (w <= 0.0) {
            if (!take_bt_error(reason, sizeof(reason)))
                snprintf(reason, sizeof(reason), "its metadata file is not CTF metadata");
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            free(group);
            skipped++;
            continue;
        }
        if (readable_part(fs, dirs[i], &use, damaged, reason, sizeof(reason)) != 0) {
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            free(group);
            skipped++;
            continue;
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
        if (bt_value_array_append_string_element(groups[j].inputs, use) !=
            BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK) {
            free(use);
            goto end;
        }
        free(use);
    }
    if (ngroups == 0) {
        sertrace_cli_err("no readable trace under %s (%d skipped)", root, skipped);
        goto end;
    }
    *damaged += skipped;
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
    /* stdout is the terminal of stderr (see struct tty_out): the line is
     * erased before report bytes go out and at the end, and only drawn
     * when the terminal's cursor is at the start of a line. */
    bool shared_tty;
    bool shown;         /* a progress line is on the terminal now */
    bool at_line_start; /* everything written to stdout ended with '\n' */
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

/* Remove the progress line from the terminal (shared terminal only). */
static void progress_erase(struct progress *p)
{
    if (p->shown) {
        fputs("\r\033[K", stderr);
        p->shown = false;
    }
}

static void progress_print(struct progress *p, bool final)
{
    double frac = 0.0;

    if (p->shared_tty && !p->at_line_start)
        return; /* it would land in the middle of a report line */
    if (p->have_span && p->end_ns > p->begin_ns && p->last_ns > p->begin_ns)
        frac = (double)(p->last_ns - p->begin_ns) / (double)(p->end_ns - p->begin_ns);
    if (frac > 1.0)
        frac = 1.0;
    if (final)
        frac = 1.0;
    fprintf(stderr, "\rsertrace: %" PRIu64 " events read, ~%.1f of %.1f MB (%d%%)\033[K", p->events,
            frac * (double)p->total_bytes / 1e6, (double)p->total_bytes / 1e6, (int)(frac * 100.0));
    p->printed = true;
    p->shown = true;
}

/* The end of the run: on a terminal of its own, the final count stays
 * (one line); on the report's terminal, the line goes. */
static void progress_done(struct progress *p)
{
    if (p->shared_tty)
        progress_erase(p);
    else if (p->printed) {
        progress_print(p, true);
        fputc('\n', stderr);
    }
}

/* ---- stdout on the progress line's terminal ------------------------------ */

/* When stdout is the terminal stderr's progress line is drawn on, stdout
 * is replaced (before the sink exists: it takes `stdout` when it is
 * created) by a stream of ours that erases the progress line before each
 * write and writes whole lines only, holding a partial last line back
 * until its newline comes, so the terminal's cursor is at the start of a
 * line whenever the progress line may be drawn.  The report's bytes are
 * unchanged. */
struct tty_out {
    FILE *real; /* the original stdout */
    struct progress *p;
    char *tail; /* bytes after the last newline, not written yet */
    size_t tail_len, tail_cap;
    bool failed;
    int err; /* errno of the first failed write */
};

#define TTY_TAIL_MAX (1u << 16)

static int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int tty_out_emit(struct tty_out *t, const char *b, size_t n)
{
    progress_erase(t->p);
    if ((t->tail_len > 0 && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) ||
        write_all(STDOUT_FILENO, b, n) != 0) {
        t->failed = true;
        t->err = errno;
        return -1;
    }
    t->tail_len = 0;
    return 0;
}

static ssize_t tty_out_write(void *cookie, const char *b, size_t n)
{
    struct tty_out *t = cookie;
    const char *nl = n > 0 ? memrchr(b, '\n', n) : NULL;

    if (t->failed)
        return -1;
    if (nl != NULL) {
        size_t head = (size_t)(nl - b) + 1;
        if (tty_out_emit(t, b, head) != 0)
            return -1;
        t->p->at_line_start = true;
        b += head;
        n -= head;
        if (n == 0)
            return (ssize_t)head;
        /* the rest is a partial line: held back below */
        if (tty_out_write(cookie, b, n) < 0)
            return -1;
        return (ssize_t)(head + n);
    }
    if (t->tail_len + n > TTY_TAIL_MAX) {
        /* A very long line: write it as it comes (no progress meanwhile). */
        if (tty_out_emit(t, b, n) != 0)
            return -1;
        t->p->at_line_start = false;
        return (ssize_t)n;
    }
    if (t->tail_len + n > t->tail_cap) {
        size_t cap = t->tail_cap ? t->tail_cap : 256;
        char *g;
        while (cap < t->tail_len + n)
            cap *= 2;
        g = realloc(t->tail, cap);
        if (g == NULL)
            return tty_out_emit(t, b, n) == 0 ? (t->p->at_line_start = false, (ssize_t)n) : -1;
        t->tail = g;
        t->tail_cap = cap;
    }
    memcpy(t->tail + t->tail_len, b, n);
    t->tail_len += n;
    return (ssize_t)n;
}

/* Put a tty_out in place of stdout.  0, or -1 (stdout unchanged). */
static int tty_out_install(struct tty_out *t, struct progress *p)
{
    static const cookie_io_functions_t io = {.write = tty_out_write};
    FILE *f;

    memset(t, 0, sizeof(*t));
    t->p = p;
    fflush(stdout);
    f = fopencookie(t, "w", io);
    if (f == NULL)
        return -1;
    setvbuf(f, NULL, _IOFBF, 1u << 16);
    t->real = stdout;
    p->shared_tty = true;
    p->at_line_start = true;
    stdout = f;
    return 0;
}

/* Flush, erase the progress line and write the held-back partial line:
 * the terminal shows exactly the report so far, and nothing is drawn
 * any more.  stdout stays ours (a sink may still hold it). */
static void tty_out_settle(struct tty_out *t)
{
    if (t->real == NULL)
        return;
    fflush(stdout);
    progress_erase(t->p);
    if (t->tail_len > 0 && !t->failed && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) {
        t->failed = true;
        t->err = errno;
    }
    t->tail_len = 0;
    t->p->at_line_start = false;
}

/* Flush, write the held-back partial line, erase the progress line and
 * give stdout back.  Returns -1 with errno (the first failed write's) when
 * writing failed. */
static int tty_out_remove(struct tty_out *t)
{
    int rc;

    if (t->real == NULL)
        return 0;
    rc = fflush(stdout) == 0 ? 0 : -1;
    progress_erase(t->p);
    if (t->tail_len > 0 && !t->failed && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) {
        t->failed = true;
        t->err = errno;
    }
    fclose(stdout);
    stdout = t->real;
    t->real = NULL;
    free(t->tail);
    t->tail = NULL;
    if (t->failed || rc != 0) {
        errno = t->err != 0 ? t->err : EIO; /* for the caller's message */
        return -1;
    }
    return 0;
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
    if (ok && o->has_oversize && o->oversize_is_share)
        ok = bt_value_map_insert_string_entry(p, PARAM(OVERSIZE), o->oversize) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    else if (ok && o->has_oversize)
        ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(OVERSIZE), o->oversize_bytes) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (ok && o->exact)
        ok = bt_value_map_insert_bool_entry(p, PARAM(EXACT), BT_TRUE) ==
             BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    if (o->mode == MODE_TREE) {
        /* Live: each tree is written (and flushed) as its dump ends, not
         * when the sink's 64 KiB buffer fills. */
        if (ok && o->live_url != NULL)
            ok = bt_value_map_insert_bool_entry(p, PARAM(FLUSH_EACH_DUMP), BT_TRUE) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->has_min_size)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(MIN_SIZE), o->min_size) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->has_max_depth)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(MAX_DEPTH), o->max_depth) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    } else {
        if (ok && o->has_top)
            ok = bt_value_map_insert_unsigned_integer_entry(p, PARAM(TOP), o->top) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->mode == MODE_JSON)
            ok = bt_value_map_insert_string_entry(p, PARAM(FORMAT), "json") ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        if (ok && o->no_per_dump)
            ok = bt_value_map_insert_bool_entry(p, PARAM(PER_DUMP), BT_FALSE) ==
                 BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
    }
    if (ok && o->npids) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->npids; i++)
            ok = bt_value_array_append_unsigned_integer_element(a, o->pids[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(PID), a) == BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
    }
    if (ok && o->ndumps) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->ndumps; i++)
            ok = bt_value_array_append_unsigned_integer_element(a, o->dumps[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(DUMP), a) == BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
    }
    if (ok && o->nserializers) {
        bt_value *a = bt_value_array_create();
        for (size_t i = 0; a && ok && i < o->nserializers; i++)
            ok = bt_value_array_append_string_element(a, o->serializers[i]) ==
                 BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK;
        ok = ok && a &&
             bt_value_map_insert_entry(p, PARAM(SERIALIZER), a) == BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK;
        bt_value_put_ref(a);
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
    OPT_PID,
    OPT_DUMP,
    OPT_SERIALIZER,
    OPT_NO_PER_DUMP,
};

/* --oversize: a size ("64K", parsed here like every size of sertrace) or a
 * share of the dump ("10%").  0 (or 0%) is refused: the sink refuses it
 * too, and "flag nodes of at least 0 bytes" would flag every node, which
 * is not what anyone asking for 0 means.  Without --oversize nothing is
 * flagged.  Parsed by format/'s sertrace_parse_oversize, as the sinks'
 * `oversize` parameter is.  0 ok, -1 usage error (printed). */
static int parse_oversize(const char *text, struct report_opts *o)
{
    double share;

    o->has_oversize = true;
    o->oversize = text;
    switch (sertrace_parse_oversize(text, &o->oversize_bytes, &share)) {
    case 0:
        o->oversize_is_share = share > 0;
        return 0;
    case SERTRACE_OVERSIZE_BAD_SHARE:
        sertrace_cli_err("--oversize: invalid share '%s' (expected more than 0%% and at "
                         "most 100%%, e.g. 10%%)",
                         text);
        return -1;
    case SERTRACE_OVERSIZE_ZERO:
        sertrace_cli_err("--oversize: must be more than 0 (a size such as 64K, or a share "
                         "of the dump such as 10%%); leave it out to flag nothing");
        return -1;
    default:
        return sertrace_cli_parse_size("--oversize", text, &o->oversize_bytes);
    }
}

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

static void free_report_opts(struct report_opts *o)
{
    free(o->pids);
    free(o->dumps);
    free(o->serializers);
    o->pids = o->dumps = NULL;
    o->serializers = NULL;
}

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
        {"pid", required_argument, NULL, OPT_PID},
        {"dump", required_argument, NULL, OPT_DUMP},
        {"serializer", required_argument, NULL, OPT_SERIALIZER},
        {"no-per-dump", no_argument, NULL, OPT_NO_PER_DUMP},
        {"verbose", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    int c, modes = 0;

    memset(o, 0, sizeof(*o));
    o->pids = calloc((size_t)argc + 1, sizeof(*o->pids));
    o->dumps = calloc((size_t)argc + 1, sizeof(*o->dumps));
    o->serializers = calloc((size_t)argc + 1, sizeof(*o->serializers));
    if (o->pids == NULL || o->dumps == NULL || o->serializers == NULL) {
        sertrace_cli_err("out of memory");
        return -1;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
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
        case OPT_OVERSIZE:
            if (parse_oversize(optarg, o) != 0)
                return -1;
            break;
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
        case OPT_PID:
            if (sertrace_cli_parse_uint("--pid", optarg, INT32_MAX, &o->pids[o->npids]) != 0)
                return -1;
            o->npids++;
            break;
        case OPT_DUMP:
            if (sertrace_cli_parse_uint("--dump", optarg, UINT64_MAX, &o->dumps[o->ndumps]) != 0)
                return -1;
            o->ndumps++;
            break;
        case OPT_SERIALIZER:
            if (*optarg == '\0') {
                sertrace_cli_err("--serializer: give a serializer name (pickle, dill, ...)");
                return -1;
            }
            o->serializers[o->nserializers++] = optarg;
            break;
        case OPT_NO_PER_DUMP:
            o->no_per_dump = true;
            break;
        case OPT_LIVE:
            if (check_live_url(optarg) != 0)
                return -1;
            o->live_url = optarg;
            break;
        case 'v':
            verbose = true;
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
    if (o->mode != MODE_SUMMARY && o->no_per_dump) {
        sertrace_cli_err("report: --no-per-dump applies to --summary");
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
        free_report_opts(&o);
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    }
    sink_name = o.mode == MODE_TREE ? "tree" : "summary";
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
    free_report_opts(&o);
    remove_shadows();
    return rc;
}
