/* inspect.c -- `sertrace inspect`: the size tree of stored pickle bytes.
 *
 * No trace and no Python: the bytes go through the pickle emulator
 * (inspect/, which imports and calls nothing) into the same tree core and
 * the same sinks `report` uses (analyzers/core: treeprint for --tree,
 * summary for --summary and --json, export for --html, --folded,
 * --speedscope and --perfetto), so the output reads and parses like
 * `report`'s.  The options are report's display options with the same
 * names, values and checks; report parses its own into babeltrace2 sink
 * parameters, so they are parsed here again into the sinks' option structs
 * (the value parsers are util.c's, shared).
 *
 * The input is mapped when it is a regular file and read into memory
 * otherwise (standard input, pipes); the emulator's own tables are bounded
 * by --max-memory.  Exit status: 0 ok, 1 runtime error (cannot read, out of
 * memory, output not writable), 2 usage, 4 inconclusive (malformed or
 * truncated input, or a limit reached: the dumps read before it are
 * printed, and stderr says where and why).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core.h"
#include "export.h"
#include "format.h"
#include "audit.h"
#include "inspect.h"
#include "display-opts.h" /* the display options, shared with report */
#include "summary.h"
#include "treeprint.h"

#define INSPECT_INCONCLUSIVE 4

/* --folded, --speedscope, --perfetto, --html (display-opts.h's order, the
 * sinks' parameter table's): the export formats they write. */
static const enum sertrace_export_format export_format[DISPLAY_NEXPORTS] = {
    SERTRACE_EXPORT_FOLDED, SERTRACE_EXPORT_SPEEDSCOPE, SERTRACE_EXPORT_PERFETTO,
    SERTRACE_EXPORT_HTML};
#define NEXPORTS DISPLAY_NEXPORTS
#define export_name(i) sertrace_display_export_name(i)

struct inspect_opts {
    struct sertrace_display_opts d; /* the options shared with report */
    const char *input;
    bool keys_all;
    uint64_t max_memory;
    bool audit, sarif;
    const char **allow; /* sized argc */
    size_t nallow;
};

/* The shared help lines (DISPLAY_HELP_*) stand on lines of their own, as
 * they print: not reflowed by clang-format. */
/* clang-format off */
static const char inspect_help[] =
    "Usage: sertrace inspect [--tree | --summary | --json | EXPORT...] [OPTIONS] FILE\n"
    "       sertrace inspect [--tree | --summary | --json | EXPORT...] [OPTIONS] -\n"
    "\n"
    "Rebuild the size tree of pickle bytes (protocols 0-5; several pickles back\n"
    "to back are several dumps; `-` reads standard input) without a trace and\n"
    "without unpickling: the pickle machine is emulated, nothing is imported or\n"
    "called.  The tree has the nodes, the bytes and the root a recording of the\n"
    "same dump shows (`sertrace report` at the default granularity), through the\n"
    "same printers, so the options below behave as in `report`.  What only an\n"
    "import could tell is shown as such: a global (class, function, other) is `G`\n"
    "with its name as type; REDUCE builds `R`, NEWOBJ/NEWOBJ_EX/INST/OBJ build `O`.\n"
    "There is no process: a tree's header names the input and the pickle's byte\n"
    "offset in it (`── dump 2 · FILE · byte 188 · pickle protocol 4 · ...`); in\n"
    "JSON, pid and tid are -1 and the time 0.\n"
    "\n"
    "  --tree             one tree per pickle (default)\n"
    DISPLAY_HELP_SUMMARY
    "  --json             the summary as one JSON object (format \"sertrace-summary\",\n"
    "                     the schema of `report --json`)\n"
    "  --html OUT.html    a self-contained page: per pickle a zoomable icicle of the\n"
    "                     size tree (hover, search, dump selector); opens offline\n"
    DISPLAY_HELP_FOLDED
    "  --speedscope OUT   speedscope JSON: one profile per pickle, unit bytes\n"
    "  --perfetto OUT     Chrome trace-event JSON (ui.perfetto.dev): one event per\n"
    "                     pickle (pid and tid -1, time 0: there is no process)\n"
    "                     The four may be combined (one pass over FILE); OUT `-`\n"
    "                     is stdout (for one of them).  In every format a pickle's\n"
    "                     bytes add up to its length\n"
    "  --oversize SIZE    flag nodes of at least SIZE bytes (64K, 1.5MiB) or of at\n"
    "                     least this share of their dump (10%)\n"
    DISPLAY_HELP_TOP_TO_EXACT
    "  --no-per-dump      summary: no per-dump tables, then the overall tables\n"
    DISPLAY_HELP_PATHS ", as\n"
    "                     `report --paths`.  Every node carries the label a\n"
    "                     recording gives it (list/tuple position, dict key,\n"
    "                     state key as .name, (args), {element}); the tree shows\n"
    "                     them too\n"
    "  --keys safe|all    dict keys shown in labels: safe (default) as a\n"
    "                     recording: str identifiers of at most 64 ASCII\n"
    "                     characters and ints, other keys as [...]; all: every\n"
    "                     str key (as SERTRACE_KEYS=all)\n"
    "  --max-memory SIZE  limit of the emulator's tables (stack, memo, nodes of\n"
    "                     one pickle; default 1GiB): beyond it, exit status 4\n"
    "  -h, --help         this help\n"
    "\n"
    "Audit: sertrace inspect --audit [--allow PATTERN]... [--json | --sarif] FILE|-\n"
    "  --audit            list every global the payload imports and every call it\n"
    "                     would make (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ, BUILD)\n"
    "                     with the callable, its arguments' shapes and the byte\n"
    "                     offset, judged against a built-in allowlist (callables\n"
    "                     that only build data: copyreg's reconstructors, set,\n"
    "                     frozenset, bytearray, complex, slice, collections,\n"
    "                     datetime, decimal, fractions, uuid, numpy's\n"
    "                     reconstructors), your patterns, and a denylist (os,\n"
    "                     subprocess, eval, exec, getattr, __import__, open,\n"
    "                     importlib, runpy, marshal, pickle.loads, ...; it wins);\n"
    "                     known evasions are named.  Only the first pickle is\n"
    "                     read: bytes after its STOP are an evasion\n"
    "  --allow PATTERN    also allow callables matching this glob (myapp.*);\n"
    "                     repeatable\n"
    "  --json, --sarif    the audit as JSON (\"sertrace-audit\") or SARIF 2.1.0\n"
    "  Exit status of --audit: 0 nothing outside the allowlist; 3 unsafe (a\n"
    "  denied or unknown callable would be called, or an evasion was seen); 4\n"
    "  inconclusive (malformed, truncated, or a limit); 1 runtime error; 2 usage.\n"
    "\n"
    "Exit status: 0 ok; 1 runtime error (FILE unreadable, out of memory, output\n"
    "not writable); 2 usage error; 4 inconclusive: the input is malformed or\n"
    "truncated, or a limit was reached (objects nested deeper than 1000000\n"
    "levels, --max-memory): the pickles read before it are printed, and stderr\n"
    "says at which byte offset and why.\n";
/* clang-format on */

/* inspect's own long options, numbered after the display options'. */
enum {
    OPT_MAX_MEMORY = DOPT_END,
    OPT_KEYS,
    OPT_AUDIT,
    OPT_ALLOW,
    OPT_SARIF,
};

/* 0 ok, 1 --help printed, -1 usage error (message printed). */
static int parse_opts(int argc, char **argv, struct inspect_opts *o)
{
    static const struct option own[] = {
        {"help", no_argument, NULL, 'h'},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"keys", required_argument, NULL, OPT_KEYS},
        {"audit", no_argument, NULL, OPT_AUDIT},
        {"allow", required_argument, NULL, OPT_ALLOW},
        {"sarif", no_argument, NULL, OPT_SARIF},
    };
    struct option longopts[DOPT_END - DOPT_BASE_ + sizeof own / sizeof own[0] + 1];
    size_t n = sertrace_display_longopts(DISPLAY_INSPECT, longopts, DOPT_END - DOPT_BASE_);
    int c;

    memcpy(longopts + n, own, sizeof own);
    n += sizeof own / sizeof own[0];
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    memset(o, 0, sizeof *o);
    o->allow = calloc((size_t)argc + 1, sizeof *o->allow);
    if (!o->allow) {
        sertrace_cli_err("out of memory");
        return -1;
    }
    if (sertrace_display_init(&o->d, argc) != 0)
        return -1;
    o->max_memory = SERTRACE_INSPECT_DEFAULT_MEMORY;
    while ((c = sertrace_display_getopt(argc, argv, "+h", longopts, &o->d)) != -1) {
        switch (c) {
        case 'h':
            fputs(inspect_help, stdout);
            return 1;
        case OPT_MAX_MEMORY:
            if (sertrace_cli_parse_size("--max-memory", optarg, &o->max_memory) != 0)
                return -1;
            if (o->max_memory < 4096) {
                sertrace_cli_err("--max-memory: at least 4K");
                return -1;
            }
            break;
        case OPT_KEYS:
            o->d.has_display = true;
            if (strcmp(optarg, "all") == 0) {
                o->keys_all = true;
            } else if (strcmp(optarg, "safe") != 0) {
                sertrace_cli_err("--keys: expected safe or all, not '%s'", optarg);
                return -1;
            }
            break;
        case OPT_AUDIT:
            o->audit = true;
            break;
        case OPT_ALLOW:
            if (*optarg == '\0') {
                sertrace_cli_err("--allow: give a pattern such as 'myapp.*'");
                return -1;
            }
            o->allow[o->nallow++] = optarg;
            break;
        case OPT_SARIF:
            o->sarif = true;
            break;
        case DISPLAY_OPT_BAD:
            return -1;
        case '?':
        default:
            sertrace_display_unknown("inspect", argv);
            return -1;
        }
    }
    if (o->audit || o->sarif || o->nallow) {
        if (!o->audit) {
            sertrace_cli_err("inspect: --allow and --sarif apply to --audit");
            return -1;
        }
        if (o->d.has_display || o->d.nexports || (o->d.modes && o->d.mode != DISPLAY_JSON) ||
            (o->sarif && o->d.modes)) {
            sertrace_cli_err("inspect: --audit takes --allow, and one of --json or --sarif; "
                             "not the tree, summary or export options");
            return -1;
        }
    }
    if (sertrace_display_check(&o->d, "inspect") != 0)
        return -1;
    if (argc - optind != 1) {
        sertrace_cli_err("inspect: expected one FILE, or - for standard input (see `sertrace "
                         "inspect --help`)");
        return -1;
    }
    o->input = argv[optind];
    return 0;
}

static void free_opts(struct inspect_opts *o)
{
    free(o->allow);
    o->allow = NULL;
    sertrace_display_free(&o->d);
}

/* The input: mapped (regular file) or read whole (anything else). */
struct input {
    uint8_t *data;
    size_t len;
    bool mapped;
};

static int read_fd(int fd, struct input *in)
{
    size_t cap = 1 << 16;
    in->data = malloc(cap);
    in->len = 0;
    if (!in->data)
        return -1;
    for (;;) {
        ssize_t r;
        if (in->len == cap) {
            uint8_t *p = realloc(in->data, cap * 2);
            if (!p)
                return -1;
            in->data = p;
            cap *= 2;
        }
        r = read(fd, in->data + in->len, cap - in->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        in->len += (size_t)r;
    }
}

static int open_input(const char *path, struct input *in)
{
    struct stat st;
    int fd, rc = 0;

    memset(in, 0, sizeof *in);
    if (strcmp(path, "-") == 0)
        return read_fd(STDIN_FILENO, in);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        errno = EISDIR;
        return -1;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            in->data = p;
            in->len = (size_t)st.st_size;
            in->mapped = true;
            close(fd);
            return 0;
        }
    }
    rc = read_fd(fd, in);
    close(fd);
    return rc;
}

static void close_input(struct input *in)
{
    if (in->mapped)
        munmap(in->data, in->len);
    else
        free(in->data);
}

/* --audit: the emulator with the audit observer, no tree.  Returns the
 * exit status (0, 3, 4, or 1). */
static int run_audit(const struct inspect_opts *o, const struct input *in,
                     const sertrace_inspect_limits *lim)
{
    sertrace_audit *a = sertrace_audit_create();
    sertrace_inspect_observer obs;
    sertrace_inspect_result res;
    int verdict;

    if (!a) {
        sertrace_cli_err("inspect: out of memory");
        return SERTRACE_CLI_ERROR;
    }
    for (size_t i = 0; i < o->nallow; i++)
        if (sertrace_audit_allow(a, o->allow[i]) < 0) {
            sertrace_audit_destroy(a);
            sertrace_cli_err("inspect: out of memory");
            return SERTRACE_CLI_ERROR;
        }
    sertrace_audit_observer(a, &obs);
    sertrace_inspect_run_observed(in->data, in->len, lim, NULL, &obs, true, &res);
    if (res.status == SERTRACE_INSPECT_FAILED) {
        sertrace_cli_err("inspect: %s", res.reason);
        sertrace_audit_destroy(a);
        return SERTRACE_CLI_ERROR;
    }
    verdict = sertrace_audit_verdict(a, &res);
    if (sertrace_audit_write(a, stdout,
                             o->sarif                    ? SERTRACE_AUDIT_SARIF
                             : o->d.mode == DISPLAY_JSON ? SERTRACE_AUDIT_JSON
                                                         : SERTRACE_AUDIT_TEXT,
                             o->input, &res) < 0 ||
        fflush(stdout) != 0) {
        sertrace_cli_err("inspect: cannot write the output: %s", strerror(errno));
        sertrace_audit_destroy(a);
        return SERTRACE_CLI_ERROR;
    }
    if (res.status != SERTRACE_INSPECT_OK)
        sertrace_cli_err("inspect: %s: inconclusive at byte %llu: %s",
                         strcmp(o->input, "-") ? o->input : "standard input",
                         (unsigned long long)res.offset, res.reason);
    sertrace_audit_destroy(a);
    return verdict;
}

/* The export outputs: one file per format asked for ("-": stdout). */
struct export_files {
    FILE *f[NEXPORTS];
};

/* Opens every output of o->d.exports and adds it to `x`.  0, or -1 with the
 * message printed (the files opened so far are left for close_exports). */
static int open_exports(const struct inspect_opts *o, sertrace_export *x, struct export_files *xf)
{
    for (size_t i = 0; i < NEXPORTS; i++) {
        const char *path = o->d.exports[i];
        if (!path)
            continue;
        if (strcmp(path, "-") == 0) {
            xf->f[i] = stdout;
        } else {
            xf->f[i] = fopen(path, "w");
            if (!xf->f[i]) {
                sertrace_cli_err("inspect: --%s: cannot open %s: %s", export_name(i), path,
                                 strerror(errno));
                return -1;
            }
            setvbuf(xf->f[i], NULL, _IOFBF, 1 << 16);
        }
        if (sertrace_export_add_output(x, export_format[i], sertrace_summary_write_file, xf->f[i]) <
            0) {
            sertrace_cli_err("inspect: out of memory");
            return -1;
        }
    }
    return 0;
}

/* Closes the export files; -1 (message printed) when one could not be
 * written. */
static int close_exports(const struct inspect_opts *o, struct export_files *xf)
{
    int rc = 0;
    for (size_t i = 0; i < NEXPORTS; i++) {
        if (!xf->f[i] || xf->f[i] == stdout)
            continue;
        if (fclose(xf->f[i]) != 0 && rc == 0) {
            sertrace_cli_err("inspect: --%s: cannot write %s: %s", export_name(i), o->d.exports[i],
                             strerror(errno));
            rc = -1;
        }
        xf->f[i] = NULL;
    }
    return rc;
}

int sertrace_cli_inspect(int argc, char **argv)
{
    struct inspect_opts o;
    struct input in;
    sertrace_core_visitor v;
    sertrace_core *core = NULL;
    sertrace_summary *sum = NULL;
    sertrace_treeprint *tree = NULL;
    sertrace_export *exp = NULL;
    struct export_files xf = {{NULL}};
    sertrace_inspect_limits lim = {0, SERTRACE_INSPECT_DEFAULT_DEPTH, false, 0};
    sertrace_inspect_result res;
    int rc, status = SERTRACE_CLI_ERROR;

    rc = parse_opts(argc, argv, &o);
    if (rc != 0) {
        free_opts(&o);
        return rc > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    }
    if (open_input(o.input, &in) != 0) {
        sertrace_cli_err("inspect: cannot read %s: %s",
                         strcmp(o.input, "-") ? o.input : "standard input", strerror(errno));
        free_opts(&o);
        return SERTRACE_CLI_ERROR;
    }
    if (in.len == 0) {
        sertrace_cli_err("inspect: %s is empty: no pickle to read (inconclusive)",
                         strcmp(o.input, "-") ? o.input : "standard input");
        close_input(&in);
        free_opts(&o);
        return INSPECT_INCONCLUSIVE;
    }
    lim.max_memory = o.max_memory;
    lim.keys_all = o.keys_all;
    if (o.audit) {
        status = run_audit(&o, &in, &lim);
        close_input(&in);
        free_opts(&o);
        return status;
    }
    if (o.d.mode == DISPLAY_EXPORT) {
        sertrace_export_opts eo = SERTRACE_EXPORT_OPTS_DEFAULT;
        char title[512];
        snprintf(title, sizeof title, "sertrace inspect %s",
                 strcmp(o.input, "-") ? o.input : "(standard input)");
        eo.oversize_bytes = o.d.oversize_bytes;
        eo.oversize_percent = o.d.oversize_percent;
        eo.title = title;
        exp = sertrace_export_create(&eo);
        if (!exp) {
            sertrace_cli_err("inspect: out of memory");
            goto end;
        }
        if (open_exports(&o, exp, &xf) < 0)
            goto end;
        sertrace_export_visitor(exp, &v);
    } else if (o.d.mode == DISPLAY_TREE) {
        sertrace_treeprint_opts to = SERTRACE_TREEPRINT_OPTS_DEFAULT;
        to.oversize_bytes = o.d.oversize_bytes;
        to.oversize_percent = o.d.oversize_percent;
        to.max_depth = (uint32_t)o.d.max_depth;
        to.min_size = o.d.min_size;
        to.exact = o.d.exact;
        to.input = strcmp(o.input, "-") ? o.input : "standard input";
        tree = sertrace_treeprint_create(&to, sertrace_summary_write_file, stdout);
        if (tree)
            sertrace_treeprint_visitor(tree, &v);
    } else {
        sertrace_summary_opts so = SERTRACE_SUMMARY_OPTS_DEFAULT;
        so.json = o.d.mode == DISPLAY_JSON;
        so.exact = o.d.exact;
        if (o.d.has_top)
            so.top = (unsigned)o.d.top;
        so.oversize_bytes = o.d.oversize_bytes;
        so.oversize_percent = o.d.oversize_percent;
        so.per_dump = !o.d.no_per_dump;
        so.paths = o.d.paths;
        so.input = strcmp(o.input, "-") ? o.input : "standard input";
        sum = sertrace_summary_create(&so, sertrace_summary_write_file, stdout);
        if (sum)
            sertrace_summary_visitor(sum, &v);
    }
    if ((!tree && !sum && !exp) || !(core = sertrace_core_create(&v))) {
        sertrace_cli_err("inspect: out of memory");
        goto end;
    }
    rc = sertrace_inspect_run(in.data, in.len, &lim, core, &res);
    if (sertrace_core_finish(core) < 0 ||
        (tree  ? sertrace_treeprint_finish(tree, sertrace_core_get_stats(core))
         : exp ? sertrace_export_finish(exp, sertrace_core_get_stats(core))
               : sertrace_summary_finish(sum, sertrace_core_get_stats(core))) < 0 ||
        fflush(stdout) != 0) {
        sertrace_cli_err("inspect: cannot write the output: %s", strerror(errno));
        goto end;
    }
    if (close_exports(&o, &xf) < 0)
        goto end;
    switch (rc) {
    case SERTRACE_INSPECT_OK:
        status = SERTRACE_CLI_OK;
        break;
    case SERTRACE_INSPECT_MALFORMED:
    case SERTRACE_INSPECT_LIMIT:
        sertrace_cli_err("inspect: %s: inconclusive at byte %llu (pickle %llu): %s",
                         strcmp(o.input, "-") ? o.input : "standard input",
                         (unsigned long long)res.offset, (unsigned long long)res.dumps + 1,
                         res.reason);
        status = INSPECT_INCONCLUSIVE;
        break;
    default:
        sertrace_cli_err("inspect: %s", res.reason);
        break;
    }
end:
    if (core)
        sertrace_core_destroy(core);
    if (tree)
        sertrace_treeprint_destroy(tree);
    if (sum)
        sertrace_summary_destroy(sum);
    close_exports(&o, &xf);
    if (exp)
        sertrace_export_destroy(exp);
    close_input(&in);
    free_opts(&o);
    return status;
}
