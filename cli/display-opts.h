/* display-opts.h -- the display options `sertrace report` and `sertrace
 * inspect` share, declared once (internal to cli/).
 *
 * Both commands print the same trees, summaries and exports through the
 * same sinks, so they take the same options with the same names, values,
 * checks and messages: the mode (--tree, --summary, --json), the exports
 * (--folded, --speedscope, --perfetto, --html), --oversize, --top,
 * --min-size, --max-depth, --exact, --no-per-dump, --paths, and report's
 * dump filters (--pid, --dump, --serializer).  One row per option below;
 * an option that sets a sink parameter names it (analyzers/plugin/params.h,
 * the sinks' own table), and takes its name from that row, so the option,
 * the parameter `report` passes and the plugin's help cannot drift apart.
 * Each command asks for its rows (sertrace_display_longopts), reads its
 * options through sertrace_display_getopt (which hands every display
 * option to sertrace_display_opt and returns the others), and ends with
 * sertrace_display_check; its own options (report's --live, inspect's
 * --audit ...) stay in its own file.  The help lines the two share are the
 * DISPLAY_HELP_* strings, concatenated into each command's --help.
 */
#ifndef SERTRACE_DISPLAY_OPTS_H
#define SERTRACE_DISPLAY_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h" /* the sinks' parameters (analyzers/plugin) */

/* Which command takes a row. */
#define DISPLAY_BOTH 3u
#define DISPLAY_REPORT 1u
#define DISPLAY_INSPECT 2u

/* X(ID, NAME, has_arg, commands), NAME being either PARAM(sink parameter
 * id), when the option is named as the sink parameter it sets, or
 * OWN("name") for the mode switches, which have none of the same name.
 * The four exports stay together, in params.h's order (EXPORT_FIRST). */
#define SERTRACE_DISPLAY_OPTS(X)                                                                   \
    X(TREE, OWN("tree"), no_argument, DISPLAY_BOTH)                                                \
    X(SUMMARY, OWN("summary"), no_argument, DISPLAY_BOTH)                                          \
    X(JSON, OWN("json"), no_argument, DISPLAY_BOTH)                                                \
    X(NO_PER_DUMP, OWN("no-per-dump"), no_argument, DISPLAY_BOTH)                                  \
    X(OVERSIZE, PARAM(OVERSIZE), required_argument, DISPLAY_BOTH)                                  \
    X(TOP, PARAM(TOP), required_argument, DISPLAY_BOTH)                                            \
    X(MIN_SIZE, PARAM(MIN_SIZE), required_argument, DISPLAY_BOTH)                                  \
    X(MAX_DEPTH, PARAM(MAX_DEPTH), required_argument, DISPLAY_BOTH)                                \
    X(EXACT, PARAM(EXACT), no_argument, DISPLAY_BOTH)                                              \
    X(PATHS, PARAM(PATHS), no_argument, DISPLAY_BOTH)                                              \
    X(PID, PARAM(PID), required_argument, DISPLAY_REPORT)                                          \
    X(DUMP, PARAM(DUMP), required_argument, DISPLAY_REPORT)                                        \
    X(SERIALIZER, PARAM(SERIALIZER), required_argument, DISPLAY_REPORT)                            \
    X(FOLDED, PARAM(FOLDED), required_argument, DISPLAY_BOTH)                                      \
    X(SPEEDSCOPE, PARAM(SPEEDSCOPE), required_argument, DISPLAY_BOTH)                              \
    X(PERFETTO, PARAM(PERFETTO), required_argument, DISPLAY_BOTH)                                  \
    X(HTML, PARAM(HTML), required_argument, DISPLAY_BOTH)

/* getopt_long's value of each row: DOPT_TREE ... (from 256, past any
 * short option); a command numbers its own long options from DOPT_END. */
enum sertrace_display_opt_id {
    DOPT_BASE_ = 255,
#define DISPLAY_OPT_ID_(id, name, has_arg, commands) DOPT_##id,
    SERTRACE_DISPLAY_OPTS(DISPLAY_OPT_ID_)
#undef DISPLAY_OPT_ID_
        DOPT_END
};
#define DOPT_EXPORT_FIRST DOPT_FOLDED
#define DISPLAY_NEXPORTS 4

enum sertrace_display_mode { DISPLAY_TREE, DISPLAY_SUMMARY, DISPLAY_JSON, DISPLAY_EXPORT };

struct sertrace_display_opts {
    enum sertrace_display_mode mode;
    int modes;            /* how many of --tree, --summary, --json were given */
    bool has_display;     /* any option but the mode and the exports was given */
    const char *oversize; /* --oversize's text, as given */
    uint64_t oversize_bytes;
    double oversize_percent; /* > 0: a share of the dump, 0 < p <= 100 */
    bool has_oversize, has_top, has_min_size, has_max_depth, exact, no_per_dump, paths;
    uint64_t top, min_size, max_depth;
    /* --folded, --speedscope, --perfetto, --html (params.h's order): a path,
     * "-" for stdout, or NULL. */
    const char *exports[DISPLAY_NEXPORTS];
    int nexports;
    /* report's filters, each repeatable; sized argc (never more values
     * than arguments) by sertrace_display_init. */
    uint64_t *pids, *dumps;
    const char **serializers;
    size_t npids, ndumps, nserializers;
};

/* The sink parameter of export i (0..3: folded, speedscope, perfetto,
 * html), and its name: the option's and the parameter's. */
extern const enum sertrace_sink_param sertrace_display_export_param[DISPLAY_NEXPORTS];
#define sertrace_display_export_name(i) sertrace_sink_param_name(sertrace_display_export_param[i])

/* Zero `o`, size its filter arrays for `argc` arguments and start getopt
 * over (optind = 1, opterr = 0: the commands print their own messages).
 * 0, or -1 (printed: out of memory). */
int sertrace_display_init(struct sertrace_display_opts *o, int argc);
void sertrace_display_free(struct sertrace_display_opts *o);

/* Write the getopt_long rows of `command` (DISPLAY_REPORT or
 * DISPLAY_INSPECT) to out[0..], at most `cap`; returns how many. */
size_t sertrace_display_longopts(unsigned command, struct option *out, size_t cap);

/* Take option `c` with its argument: 0 taken, 1 not a display option (the
 * command's own), -1 a bad value (printed, naming the option). */
int sertrace_display_opt(int c, const char *arg, struct sertrace_display_opts *o);

/* getopt_long over argv, each display option taken on the way
 * (sertrace_display_opt): the next option that is the command's own
 * (getopt_long's value, '?' included), -1 at the end of the options, or
 * DISPLAY_OPT_BAD after a display option's bad value (printed). */
#define DISPLAY_OPT_BAD (-2)
int sertrace_display_getopt(int argc, char **argv, const char *shortopts,
                            const struct option *longopts, struct sertrace_display_opts *o);

/* The checks across options, once all are read (one mode; exports without
 * --top and --exact, one of them at most on stdout; --paths, --top,
 * --no-per-dump, --min-size and --max-depth with the modes they apply
 * to), and the mode they leave: exports, --paths alone means --summary.
 * `command` names the command in messages.  0, or -1 (printed). */
int sertrace_display_check(struct sertrace_display_opts *o, const char *command);

/* The message for what getopt_long refused ('?'): an unknown short
 * option, or an unknown or incomplete long one (argv[optind - 1]). */
void sertrace_display_unknown(const char *command, char **argv);

/* Help lines the two commands share word for word. */
#define DISPLAY_HELP_SUMMARY                                                                       \
    "  --summary          per-dump and overall totals: bytes by kind and type,\n"                  \
    "                     largest nodes, flagged nodes\n"
#define DISPLAY_HELP_FOLDED                                                                        \
    "  --folded OUT       folded stacks weighted by self bytes (flamegraph.pl,\n"                  \
    "                     inferno); first frame: the dump\n"
#define DISPLAY_HELP_TOP_TO_EXACT                                                                  \
    "  --top N            largest nodes listed in the summary (default 10, at\n"                   \
    "                     most 100000)\n"                                                          \
    "  --min-size SIZE    tree: fold siblings smaller than SIZE into one line\n"                   \
    "  --max-depth N      tree: fold nodes deeper than N (0: show all)\n"                          \
    "  --exact            sizes in bytes instead of KiB/MiB\n"
#define DISPLAY_HELP_PATHS                                                                         \
    "  --paths            path patterns (Session.users[*].avatar: positions and\n"                 \
    "                     dict keys as [*]) with count, bytes incl. children,\n"                   \
    "                     self bytes and share of the payload, per dump and\n"                     \
    "                     overall, largest first (--top N of them); with the\n"                    \
    "                     summary (the default with --paths) or --json"

#endif /* SERTRACE_DISPLAY_OPTS_H */
