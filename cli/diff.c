/* diff.c -- `sertrace diff A B`: what grew between two states.
 *
 * Each input (a trace directory or a pickle file) goes through the same
 * pipeline its own command runs: `report --json --paths` for a trace (the
 * babeltrace2 graph and the summary sink), `inspect --json` for pickle
 * bytes (the emulator, the tree core and the summary writer; with --paths
 * once inspect has node paths).  Both are called in this process, their
 * standard output caught in a temporary file, and the summary JSON read
 * back (diff-json.c): so diff compares exactly the figures `report` and
 * `inspect` print, and needs no second reading of traces.
 *
 * Rows are path patterns (positions and dict keys already normalised to
 * "[*]" by the core, so a reordered dict or a list of equal items gives no
 * false delta) and types, each with bytes in A, in B, the delta and its
 * share; a pattern only in B is [NEW], only in A [DEL]; equal rows are
 * hidden; TOTAL is the payload bytes.  The rows themselves come from
 * diff-rows.c (shared with sertrace.compare): a path row's bytes include
 * its children (the pattern's "bytes"); a type row's are the type's self
 * bytes ("self": never counted twice, as nested dicts would be).  One dump on each side: compared
 * directly.  Several: grouped by serializer and root pattern, each group's
 * rows with totals and per-dump averages.  Exit status: 0 ok, 1 runtime
 * error, 2 usage, 3 a --fail-if-grows or --budget limit exceeded (the
 * rows are printed first).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "diff-rows.h"
#include "diff.h"

#define DIFF_EXCEEDED 3

static const char diff_help[] =
    "Usage: sertrace diff [--json] [--fail-if-grows PCT] [--budget FILE] A B\n"
    "\n"
    "Compare where the bytes go in two states.  A and B are each a trace\n"
    "directory (read as `sertrace report --json --paths` reads it) or a file of\n"
    "pickle bytes (read as `sertrace inspect --json` reads it).\n"
    "\n"
    "Rows: path patterns (positions and dict keys are `[*]`, so reordering gives\n"
    "no delta; bytes including children) and types (self bytes: a type's own\n"
    "opcodes, never counted twice), with bytes in A, bytes in B, the delta and\n"
    "the delta as a percentage of A; `[NEW]` rows exist only in B, `[DEL]` rows\n"
    "only in A; unchanged rows are hidden; TOTAL compares the payload bytes.\n"
    "With one dump on each side the two are compared directly; with several,\n"
    "dumps are grouped by serializer and root pattern and each group shows\n"
    "totals and per-dump averages.  A pickle file gives the same rows as a\n"
    "trace of the same dump (`inspect` labels every node as a recording does).\n"
    "\n"
    "Options:\n"
    "  --json               the same rows as one JSON object (format \"sertrace-diff\")\n"
    "  --fail-if-grows PCT  exit 3 when the TOTAL grew by more than PCT percent\n"
    "  --budget FILE        exit 3 when a row of B is over its budget; FILE has\n"
    "                       lines `PATTERN MAXSIZE` (a path pattern, a type, or\n"
    "                       TOTAL; sizes as 64K, 1M; `#` starts a comment); with\n"
    "                       several dumps, the per-dump average is checked\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 ok; 1 runtime error (an input unreadable or holding no dump);\n"
    "2 usage error; 3 a limit of --fail-if-grows or --budget was exceeded (every\n"
    "one is named on stderr).\n";

/* ---- one side: its dumps ---- */

struct group {
    char *serializer; /* NULL: none */
    char *root;       /* the root's pattern, or NULL */
    uint64_t na, nb;  /* dumps */
    uint64_t total_a, total_b;
    sertrace_rows t; /* column 0: A, column 1: B */
};

struct diff {
    struct group *groups;
    size_t ngroups;
    bool several;
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool same(const char *x, const char *y)
{
    return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

/* The root pattern of a dump: its shortest path pattern. */
static const char *root_pattern(const djson *dump)
{
    const djson *paths = djson_get(dump, "paths");
    const char *best = NULL;
    for (size_t i = 0; paths && paths->type == DJSON_ARRAY && i < paths->n; i++) {
        const char *p = djson_str(djson_get(paths->items[i], "pattern"));
        if (p && (!best || strlen(p) < strlen(best)))
            best = p;
    }
    return best;
}

static struct group *find_group(struct diff *d, const char *ser, const char *root)
{
    if (!d->several && d->ngroups)
        return &d->groups[0];
    for (size_t i = 0; i < d->ngroups; i++)
        if (same(d->groups[i].serializer, ser) && same(d->groups[i].root, root))
            return &d->groups[i];
    struct group *g = realloc(d->groups, (d->ngroups + 1) * sizeof *g);
    if (!g)
        return NULL;
    d->groups = g;
    g = &d->groups[d->ngroups++];
    memset(g, 0, sizeof *g);
    g->serializer = dup_or_null(ser);
    g->root = dup_or_null(root);
    if ((ser && !g->serializer) || (root && !g->root))
        return NULL;
    return g;
}

/* Add one dump of side B (`b`) or A to its group. */
static int add_dump(struct diff *d, const djson *dump, bool b)
{
    const char *ser = djson_str(djson_get(dump, "serializer"));
    struct group *g = find_group(d, ser, root_pattern(dump));
    if (!g)
        return -1;
    uint64_t payload = djson_u64(djson_get(dump, "payload_bytes"));
    if (b) {
        g->nb++;
        g->total_b += payload;
    } else {
        g->na++;
        g->total_a += payload;
    }
    return sertrace_rows_add_dump(&g->t, b ? 1 : 0, dump);
}

/* ---- reading an input through report or inspect ---- */

/* Runs `fn(argc, argv)` with standard output caught; the output in *out
 * (NUL-terminated, *len bytes).  The function's exit status, or -1. */
static int capture(int (*fn)(int, char **), int argc, char **argv, char **out, size_t *len)
{
    FILE *tmp = tmpfile();
    if (!tmp) {
        sertrace_cli_err("diff: cannot create a temporary file: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(tmp), STDOUT_FILENO) < 0) {
        sertrace_cli_err("diff: cannot redirect standard output: %s", strerror(errno));
        if (saved >= 0)
            close(saved);
        fclose(tmp);
        return -1;
    }
    optind = 0; /* each subcommand parses its own options from the start */
    int rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    optind = 0;
    off_t size = lseek(fileno(tmp), 0, SEEK_END);
    if (size < 0 || lseek(fileno(tmp), 0, SEEK_SET) < 0) {
        sertrace_cli_err("diff: cannot read back the summary: %s", strerror(errno));
        fclose(tmp);
        return -1;
    }
    char *buf = malloc((size_t)size + 1);
    size_t got = 0;
    while (buf && got < (size_t)size) {
        ssize_t r = read(fileno(tmp), buf + got, (size_t)size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    fclose(tmp);
    if (!buf) {
        sertrace_cli_err("diff: out of memory");
        return -1;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return rc;
}

/* The summary JSON of `path`, or NULL (message printed). */
static djson *read_input(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        sertrace_cli_err("diff: cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    char *out = NULL;
    size_t len = 0;
    int rc;
    char *argv[7];
    if (S_ISDIR(st.st_mode)) {
        /* --top 0: every pattern (and no list of largest nodes) */
        argv[0] = (char *)"report";
        argv[1] = (char *)"--json";
        argv[2] = (char *)"--paths";
        argv[3] = (char *)"--top";
        argv[4] = (char *)"0";
        argv[5] = (char *)path;
        argv[6] = NULL;
        rc = capture(sertrace_cli_report, 6, argv, &out, &len);
        if (rc == 3) /* printed, but part of the trace was unreadable (named on stderr) */
            sertrace_cli_err("diff: %s was read only in part: its figures are incomplete", path);
        else if (rc != 0) {
            free(out);
            if (rc > 0)
                sertrace_cli_err("diff: %s could not be reported (see above)", path);
            return NULL;
        }
    } else {
        /* With --paths when this build's inspect has node paths (issue 13
         * in the emulator); one that has not refuses it as a usage error,
         * quietly here, and the file is read again without (as after any
         * failure, so that its messages are seen). */
        argv[0] = (char *)"inspect";
        argv[1] = (char *)"--json";
        argv[2] = (char *)"--top";
        argv[3] = (char *)"0";
        argv[4] = (char *)"--paths";
        argv[5] = (char *)path;
        argv[6] = NULL;
        fflush(stderr);
        int err = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (err >= 0 && null >= 0 && dup2(null, STDERR_FILENO) >= 0) {
            rc = capture(sertrace_cli_inspect, 6, argv, &out, &len);
            fflush(stderr);
            dup2(err, STDERR_FILENO);
        } else {
            rc = SERTRACE_CLI_USAGE;
        }
        if (err >= 0)
            close(err);
        if (null >= 0)
            close(null);
        if (rc != 0) { /* read again with its messages shown */
            free(out);
            out = NULL;
            argv[4] = (char *)path;
            argv[5] = NULL;
            rc = capture(sertrace_cli_inspect, 5, argv, &out, &len);
        }
        if (rc != 0) {
            free(out);
            if (rc > 0)
                sertrace_cli_err("diff: %s could not be inspected (see above)", path);
            return NULL;
        }
    }
    char err[160];
    djson *j = djson_parse(out, len, err, sizeof err);
    free(out);
    if (!j) {
        sertrace_cli_err("diff: the summary of %s could not be read: %s", path, err);
        return NULL;
    }
    const djson *dumps = djson_get(j, "dumps");
    if (!dumps || dumps->type != DJSON_ARRAY || dumps->n == 0) {
        sertrace_cli_err("diff: %s holds no dump", path);
        djson_free(j);
        return NULL;
    }
    return j;
}

/* ---- options ---- */

struct diff_opts {
    bool json;
    bool has_grow;
    double grow_pct;
    const char *budget;
    const char *a, *b;
};

static int parse_opts(int argc, char **argv, struct diff_opts *o)
{
    enum { OPT_JSON = 256, OPT_GROW, OPT_BUDGET };
    static const struct option longs[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"fail-if-grows", required_argument, NULL, OPT_GROW},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_GROW: {
            char *end;
            errno = 0;
            o->grow_pct = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->grow_pct >= 0) || isinf(o->grow_pct)) {
                sertrace_cli_err("diff: --fail-if-grows takes a percentage >= 0 (e.g. 5 or 0.5), "
                                 "not `%s`",
                                 optarg);
                return SERTRACE_CLI_USAGE;
            }
            o->has_grow = true;
            break;
        }
        case OPT_BUDGET:
            o->budget = optarg;
            break;
        case 'h':
            fputs(diff_help, stdout);
            return -1;
        case ':':
            sertrace_cli_err("diff: %s needs a value; see `sertrace diff --help`",
                             argv[optind - 1]);
            return SERTRACE_CLI_USAGE;
        default:
            sertrace_cli_err("diff: unknown option `%s`; see `sertrace diff --help`",
                             argv[optind - 1]);
            return SERTRACE_CLI_USAGE;
        }
    }
    if (argc - optind != 2) {
        sertrace_cli_err("diff: give two inputs, A and B (trace directories or pickle files); "
                         "see `sertrace diff --help`");
        return SERTRACE_CLI_USAGE;
    }
    o->a = argv[optind];
    o->b = argv[optind + 1];
    return 0;
}

/* ---- output ---- */

static int cmp_rows(const void *x, const void *y)
{
    const sertrace_row *a = x, *b = y;
    if (a->is_type != b->is_type)
        return a->is_type ? 1 : -1;
    int64_t da = (int64_t)(a->v[1] - a->v[0]), db = (int64_t)(b->v[1] - b->v[0]);
    uint64_t ma = da < 0 ? (uint64_t)-da : (uint64_t)da, mb = db < 0 ? (uint64_t)-db : (uint64_t)db;
    if (ma != mb)
        return ma > mb ? -1 : 1;
    return strcmp(a->name, b->name);
}

static const char *status_of(const sertrace_row *r)
{
    if (!sertrace_row_in(r, 0))
        return "new";
    if (!sertrace_row_in(r, 1))
        return "deleted";
    return "changed";
}

static void fmt_pct(char *out, size_t n, uint64_t a, uint64_t b)
{
    if (a == 0)
        snprintf(out, n, "%s", b ? "new" : "0%");
    else
        snprintf(out, n, "%+.1f%%", ((double)b - (double)a) * 100.0 / (double)a);
}

static void json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_pct(FILE *f, uint64_t a, uint64_t b)
{
    if (a == 0)
        fputs("null", f);
    else
        fprintf(f, "%.4f", ((double)b - (double)a) * 100.0 / (double)a);
}

static void print_text(const struct diff *d, uint64_t ta, uint64_t tb)
{
    for (size_t gi = 0; gi < d->ngroups; gi++) {
        const struct group *g = &d->groups[gi];
        if (d->several)
            printf("== serializer %s, root %s: %llu dump(s) in A, %llu in B\n",
                   g->serializer ? g->serializer : "(none)", g->root ? g->root : "(unknown)",
                   (unsigned long long)g->na, (unsigned long long)g->nb);
        if (d->several)
            printf("%-7s %14s %14s %14s %9s %12s %12s  %s\n", "", "A", "B", "delta", "delta%",
                   "A/dump", "B/dump", "row");
        else
            printf("%-7s %14s %14s %14s %9s  %s\n", "", "A", "B", "delta", "delta%", "row");
        bool any = false;
        for (size_t i = 0; i < g->t.n; i++) {
            const sertrace_row *r = &g->t.rows[i];
            if (sertrace_row_in(r, 0) && sertrace_row_in(r, 1) && r->v[0] == r->v[1])
                continue; /* unchanged */
            any = true;
            char pct[32];
            fmt_pct(pct, sizeof pct, r->v[0], r->v[1]);
            const char *tag = !sertrace_row_in(r, 0)   ? "[NEW]"
                              : !sertrace_row_in(r, 1) ? "[DEL]"
                                                       : "";
            printf("%-7s %14llu %14llu %+14lld %9s", tag, (unsigned long long)r->v[0],
                   (unsigned long long)r->v[1], (long long)(r->v[1] - r->v[0]), pct);
            if (d->several)
                printf(" %12.1f %12.1f", g->na ? (double)r->v[0] / (double)g->na : 0.0,
                       g->nb ? (double)r->v[1] / (double)g->nb : 0.0);
            printf("  %s%s\n", r->is_type ? "type " : "", r->name);
        }
        if (!any)
            printf("        (no row changed)\n");
        if (d->several) {
            char pct[32];
            fmt_pct(pct, sizeof pct, g->total_a, g->total_b);
            printf("%-7s %14llu %14llu %+14lld %9s %12.1f %12.1f  group total\n", "",
                   (unsigned long long)g->total_a, (unsigned long long)g->total_b,
                   (long long)(g->total_b - g->total_a), pct,
                   g->na ? (double)g->total_a / (double)g->na : 0.0,
                   g->nb ? (double)g->total_b / (double)g->nb : 0.0);
        }
    }
    char pct[32];
    fmt_pct(pct, sizeof pct, ta, tb);
    printf("%-7s %14llu %14llu %+14lld %9s  TOTAL\n", "", (unsigned long long)ta,
           (unsigned long long)tb, (long long)(tb - ta), pct);
}

static void print_json(const struct diff *d, uint64_t ta, uint64_t tb, uint64_t na, uint64_t nb)
{
    printf("{\"format\": \"sertrace-diff\", \"version\": 1, \"grouped\": %s, \"groups\": [",
           d->several ? "true" : "false");
    for (size_t gi = 0; gi < d->ngroups; gi++) {
        const struct group *g = &d->groups[gi];
        printf("%s\n{\"serializer\": ", gi ? "," : "");
        json_string(stdout, g->serializer);
        printf(", \"root\": ");
        json_string(stdout, g->root);
        printf(", \"dumps_a\": %llu, \"dumps_b\": %llu, \"total_a\": %llu, \"total_b\": %llu, "
               "\"delta\": %lld, \"rows\": [",
               (unsigned long long)g->na, (unsigned long long)g->nb, (unsigned long long)g->total_a,
               (unsigned long long)g->total_b, (long long)(g->total_b - g->total_a));
        bool first = true;
        for (size_t i = 0; i < g->t.n; i++) {
            const sertrace_row *r = &g->t.rows[i];
            if (sertrace_row_in(r, 0) && sertrace_row_in(r, 1) && r->v[0] == r->v[1])
                continue;
            printf("%s{\"kind\": \"%s\", \"name\": ", first ? "" : ", ",
                   r->is_type ? "type" : "path");
            first = false;
            json_string(stdout, r->name);
            printf(", \"status\": \"%s\", \"a\": %llu, \"b\": %llu, \"delta\": %lld, "
                   "\"delta_percent\": ",
                   status_of(r), (unsigned long long)r->v[0], (unsigned long long)r->v[1],
                   (long long)(r->v[1] - r->v[0]));
            json_pct(stdout, r->v[0], r->v[1]);
            printf(", \"a_per_dump\": %.4f, \"b_per_dump\": %.4f}",
                   g->na ? (double)r->v[0] / (double)g->na : 0.0,
                   g->nb ? (double)r->v[1] / (double)g->nb : 0.0);
        }
        printf("]}");
    }
    printf("\n], \"total\": {\"dumps_a\": %llu, \"dumps_b\": %llu, \"a\": %llu, \"b\": %llu, "
           "\"delta\": %lld, \"delta_percent\": ",
           (unsigned long long)na, (unsigned long long)nb, (unsigned long long)ta,
           (unsigned long long)tb, (long long)(tb - ta));
    json_pct(stdout, ta, tb);
    printf("}}\n");
}

/* ---- limits ---- */

/* B's value of row `name` (a pattern, a type, or TOTAL): bytes with one
 * dump, the per-dump average with several; false when B has no such row. */
static bool b_value(const struct diff *d, const char *name, uint64_t tb, uint64_t nb, double *out)
{
    if (strcmp(name, "TOTAL") == 0) {
        *out = d->several && nb ? (double)tb / (double)nb : (double)tb;
        return true;
    }
    bool found = false;
    double worst = 0;
    for (size_t gi = 0; gi < d->ngroups; gi++) {
        const struct group *g = &d->groups[gi];
        for (size_t i = 0; i < g->t.n; i++) {
            const sertrace_row *r = &g->t.rows[i];
            if (!sertrace_row_in(r, 1) || strcmp(r->name, name) != 0)
                continue;
            double v = d->several && g->nb ? (double)r->v[1] / (double)g->nb : (double)r->v[1];
            if (!found || v > worst)
                worst = v;
            found = true;
        }
    }
    *out = worst;
    return found;
}

/* 0 within budget, DIFF_EXCEEDED, or 1/2 on a bad file. */
static int check_budget(const struct diff *d, const char *path, uint64_t tb, uint64_t nb)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        sertrace_cli_err("diff: cannot read the budget file %s: %s", path, strerror(errno));
        return SERTRACE_CLI_ERROR;
    }
    char line[4096];
    unsigned lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *pat = strtok(line, " \t\r\n");
        if (!pat)
            continue;
        char *size = strtok(NULL, " \t\r\n");
        char *extra = size ? strtok(NULL, " \t\r\n") : NULL;
        uint64_t max;
        if (!size || extra || sertrace_cli_parse_size("--budget", size, &max) != 0) {
            sertrace_cli_err("diff: %s:%u: expected `PATTERN MAXSIZE` (e.g. `Session.users[*] "
                             "64K`)",
                             path, lineno);
            fclose(f);
            return SERTRACE_CLI_USAGE;
        }
        double v;
        if (b_value(d, pat, tb, nb, &v) && v > (double)max) {
            sertrace_cli_err("diff: over budget: %s is %.0f bytes in B%s, budget %llu (%s:%u)", pat,
                             v, d->several ? " per dump" : "", (unsigned long long)max, path,
                             lineno);
            rc = DIFF_EXCEEDED;
        }
    }
    fclose(f);
    return rc;
}

static void free_diff(struct diff *d)
{
    for (size_t gi = 0; gi < d->ngroups; gi++) {
        sertrace_rows_free(&d->groups[gi].t);
        free(d->groups[gi].serializer);
        free(d->groups[gi].root);
    }
    free(d->groups);
}

int sertrace_cli_diff(int argc, char **argv)
{
    struct diff_opts o = {0};
    int rc = parse_opts(argc, argv, &o);
    if (rc < 0)
        return SERTRACE_CLI_OK;
    if (rc)
        return rc;
    if (o.budget && access(o.budget, R_OK) < 0) {
        sertrace_cli_err("diff: cannot read the budget file %s: %s", o.budget, strerror(errno));
        return SERTRACE_CLI_USAGE;
    }
    djson *ja = read_input(o.a);
    if (!ja)
        return SERTRACE_CLI_ERROR;
    djson *jb = read_input(o.b);
    if (!jb) {
        djson_free(ja);
        return SERTRACE_CLI_ERROR;
    }
    const djson *da = djson_get(ja, "dumps"), *db = djson_get(jb, "dumps");
    struct diff d = {.several = da->n > 1 || db->n > 1};
    uint64_t ta = 0, tb = 0;
    rc = SERTRACE_CLI_OK;
    for (size_t i = 0; i < da->n && rc == 0; i++) {
        ta += djson_u64(djson_get(da->items[i], "payload_bytes"));
        if (add_dump(&d, da->items[i], false) < 0)
            rc = SERTRACE_CLI_ERROR;
    }
    for (size_t i = 0; i < db->n && rc == 0; i++) {
        tb += djson_u64(djson_get(db->items[i], "payload_bytes"));
        if (add_dump(&d, db->items[i], true) < 0)
            rc = SERTRACE_CLI_ERROR;
    }
    if (rc) {
        sertrace_cli_err("diff: out of memory");
        goto out;
    }
    for (size_t gi = 0; gi < d.ngroups; gi++)
        qsort(d.groups[gi].t.rows, d.groups[gi].t.n, sizeof *d.groups[gi].t.rows, cmp_rows);
    if (o.json)
        print_json(&d, ta, tb, da->n, db->n);
    else
        print_text(&d, ta, tb);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        sertrace_cli_err("diff: cannot write the output: %s", strerror(errno));
        rc = SERTRACE_CLI_ERROR;
        goto out;
    }
    if (o.has_grow && tb > ta &&
        (ta == 0 || ((double)tb - (double)ta) * 100.0 / (double)ta > o.grow_pct)) {
        char pct[32];
        fmt_pct(pct, sizeof pct, ta, tb);
        sertrace_cli_err("diff: TOTAL grew by %s (%llu -> %llu bytes), more than "
                         "--fail-if-grows %g%%",
                         pct, (unsigned long long)ta, (unsigned long long)tb, o.grow_pct);
        rc = DIFF_EXCEEDED;
    }
    if (o.budget) {
        int b = check_budget(&d, o.budget, tb, db->n);
        if (b && (rc == 0 || b != DIFF_EXCEEDED))
            rc = b;
    }
out:
    free_diff(&d);
    djson_free(ja);
    djson_free(jb);
    return rc;
}
