/* display-opts.c -- the display options of `sertrace report` and `sertrace
 * inspect`, parsed and checked once (the table is in display-opts.h).
 *
 * The values go through the parsers every sertrace size and number goes
 * through (format/'s sertrace_parse_oversize, util.c's size and integer
 * parsers), so an option reads and fails alike in both commands, and like
 * the sink parameter it becomes.
 */
#include "display-opts.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format.h"

const enum sertrace_sink_param sertrace_display_export_param[DISPLAY_NEXPORTS] = {
    SERTRACE_PARAM_FOLDED, SERTRACE_PARAM_SPEEDSCOPE, SERTRACE_PARAM_PERFETTO, SERTRACE_PARAM_HTML};

int sertrace_display_init(struct sertrace_display_opts *o, int argc)
{
    memset(o, 0, sizeof *o);
    o->pids = calloc((size_t)argc + 1, sizeof *o->pids);
    o->dumps = calloc((size_t)argc + 1, sizeof *o->dumps);
    o->serializers = calloc((size_t)argc + 1, sizeof *o->serializers);
    if (o->pids == NULL || o->dumps == NULL || o->serializers == NULL) {
        sertrace_display_free(o);
        sertrace_cli_err("out of memory");
        return -1;
    }
    optind = 1;
    opterr = 0;
    return 0;
}

void sertrace_display_free(struct sertrace_display_opts *o)
{
    free(o->pids);
    free(o->dumps);
    free(o->serializers);
    o->pids = o->dumps = NULL;
    o->serializers = NULL;
}

size_t sertrace_display_longopts(unsigned command, struct option *out, size_t cap)
{
#define PARAM(id) sertrace_sink_param_name(SERTRACE_PARAM_##id)
#define OWN(text) (text)
    const struct {
        const char *name;
        int has_arg;
        unsigned commands;
        int val;
    } rows[] = {
#define DISPLAY_OPT_ROW_(id, name, has_arg, commands) {name, has_arg, commands, DOPT_##id},
        SERTRACE_DISPLAY_OPTS(DISPLAY_OPT_ROW_)
#undef DISPLAY_OPT_ROW_
    };
#undef PARAM
#undef OWN
    size_t n = 0;

    for (size_t i = 0; i < sizeof rows / sizeof rows[0] && n < cap; i++)
        if (rows[i].commands & command)
            out[n++] = (struct option){rows[i].name, rows[i].has_arg, NULL, rows[i].val};
    return n;
}

/* --oversize: a size ("64K", parsed like every size of sertrace) or a share
 * of the dump ("10%").  0 (or 0%) is refused: the sink refuses it too, and
 * "flag nodes of at least 0 bytes" would flag every node, which is not
 * what anyone asking for 0 means.  Without --oversize nothing is flagged.
 * Parsed by format/'s sertrace_parse_oversize, as the sinks' `oversize`
 * parameter is. */
static int parse_oversize(const char *text, struct sertrace_display_opts *o)
{
    o->has_oversize = true;
    o->oversize = text;
    switch (sertrace_parse_oversize(text, &o->oversize_bytes, &o->oversize_percent)) {
    case 0:
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
        o->oversize_percent = 0;
        return sertrace_cli_parse_size("--oversize", text, &o->oversize_bytes);
    }
}

int sertrace_display_opt(int c, const char *arg, struct sertrace_display_opts *o)
{
    if (c <= DOPT_BASE_ || c >= DOPT_END)
        return 1;
    if (c >= DOPT_EXPORT_FIRST && c < DOPT_EXPORT_FIRST + DISPLAY_NEXPORTS) {
        int i = c - DOPT_EXPORT_FIRST;
        if (*arg == '\0') {
            sertrace_cli_err("--%s: give a file name (or - for stdout)",
                             sertrace_display_export_name(i));
            return -1;
        }
        if (!o->exports[i])
            o->nexports++;
        o->exports[i] = arg;
        return 0;
    }
    switch (c) {
    case DOPT_TREE:
        o->mode = DISPLAY_TREE;
        o->modes++;
        return 0;
    case DOPT_SUMMARY:
        o->mode = DISPLAY_SUMMARY;
        o->modes++;
        return 0;
    case DOPT_JSON:
        o->mode = DISPLAY_JSON;
        o->modes++;
        return 0;
    default:
        break;
    }
    o->has_display = true;
    switch (c) {
    case DOPT_NO_PER_DUMP:
        o->no_per_dump = true;
        return 0;
    case DOPT_OVERSIZE:
        return parse_oversize(arg, o);
    case DOPT_TOP:
        o->has_top = true;
        return sertrace_cli_parse_uint("--top", arg, 100000, &o->top);
    case DOPT_MIN_SIZE:
        o->has_min_size = true;
        return sertrace_cli_parse_size("--min-size", arg, &o->min_size);
    case DOPT_MAX_DEPTH:
        o->has_max_depth = true;
        return sertrace_cli_parse_uint("--max-depth", arg, UINT32_MAX, &o->max_depth);
    case DOPT_EXACT:
        o->exact = true;
        return 0;
    case DOPT_PATHS:
        o->paths = true;
        return 0;
    case DOPT_PID:
        if (sertrace_cli_parse_uint("--pid", arg, INT32_MAX, &o->pids[o->npids]) != 0)
            return -1;
        o->npids++;
        return 0;
    case DOPT_DUMP:
        if (sertrace_cli_parse_uint("--dump", arg, UINT64_MAX, &o->dumps[o->ndumps]) != 0)
            return -1;
        o->ndumps++;
        return 0;
    case DOPT_SERIALIZER:
        if (*arg == '\0') {
            sertrace_cli_err("--serializer: give a serializer name (pickle, dill, ...)");
            return -1;
        }
        o->serializers[o->nserializers++] = arg;
        return 0;
    default:
        return 1;
    }
}

int sertrace_display_check(struct sertrace_display_opts *o, const char *command)
{
    if (o->modes > 1 || (o->modes && o->nexports)) {
        sertrace_cli_err("%s: choose one of --tree, --summary, --json, or exports "
                         "(--html, --folded, --speedscope, --perfetto)",
                         command);
        return -1;
    }
    if (o->nexports) {
        int dash = 0;
        if (o->has_top || o->exact) {
            sertrace_cli_err("%s: --top and --exact apply to the text and JSON reports, "
                             "not to --html, --folded, --speedscope, --perfetto",
                             command);
            return -1;
        }
        for (int i = 0; i < DISPLAY_NEXPORTS; i++)
            dash += o->exports[i] && strcmp(o->exports[i], "-") == 0;
        if (dash > 1) {
            sertrace_cli_err("%s: only one export can go to stdout (-): give the "
                             "others a file name",
                             command);
            return -1;
        }
        o->mode = DISPLAY_EXPORT;
    }
    if (o->paths && (o->nexports || (o->modes && o->mode == DISPLAY_TREE))) {
        sertrace_cli_err("%s: --paths applies to --summary and --json", command);
        return -1;
    }
    if (o->paths && !o->modes)
        o->mode = DISPLAY_SUMMARY; /* `report --paths TRACE` */
    if (o->mode == DISPLAY_TREE && o->has_top) {
        sertrace_cli_err("%s: --top applies to --summary and --json", command);
        return -1;
    }
    if (o->mode != DISPLAY_SUMMARY && o->no_per_dump) {
        sertrace_cli_err("%s: --no-per-dump applies to --summary", command);
        return -1;
    }
    if (o->mode != DISPLAY_TREE && (o->has_min_size || o->has_max_depth)) {
        sertrace_cli_err("%s: --min-size and --max-depth apply to --tree", command);
        return -1;
    }
    return 0;
}

int sertrace_display_getopt(int argc, char **argv, const char *shortopts,
                            const struct option *longopts, struct sertrace_display_opts *o)
{
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int taken = sertrace_display_opt(c, optarg, o);
        if (taken < 0)
            return DISPLAY_OPT_BAD;
        if (taken > 0)
            return c;
    }
    return -1;
}

void sertrace_display_unknown(const char *command, char **argv)
{
    if (optopt != 0 && optopt < 256 && optopt != '?')
        sertrace_cli_err("%s: unknown option -%c (see `sertrace %s --help`)", command, optopt,
                         command);
    else
        sertrace_cli_err("%s: unknown or incomplete option %s (see `sertrace %s --help`)", command,
                         argv[optind - 1], command);
}
