/* params.h -- the parameters of sink.sertrace.tree, .summary and .export,
 * declared once.
 *
 * One row per parameter: its id, its name, its type, which sinks take it
 * (TREE, SUMMARY, EXPORT: 1 or 0), its syntax and what it does.  The plugin
 * (plugin.c) validates against the rows, builds its "unknown parameter
 * ... (known: ...)" message and each component class's help text from
 * them; `sertrace report` (cli/report.c) names the parameters it passes
 * through sertrace_sink_param_name().  A parameter added here is known,
 * listed and documented everywhere at once.  Header only, no babeltrace2
 * types, so the CLI can include it.
 */
#ifndef SERTRACE_SINK_PARAMS_H
#define SERTRACE_SINK_PARAMS_H

/* X(ID, "name", TYPE, TREE, SUMMARY, EXPORT, "syntax", "help") */
#define SERTRACE_SINK_PARAMS(X)                                                                    \
    X(OVERSIZE, "oversize", P_OVERSIZE, 1, 1, 1, "BYTES|\"64K\"|\"10%\"",                          \
      "flag nodes at least this big: bytes (integer), a size (\"64K\"), or a share of the dump "   \
      "(\"10%\")")                                                                                 \
    X(MAX_DEPTH, "max-depth", P_UINT, 1, 0, 0, "N", "fold nodes deeper than this (0: all)")        \
    X(MIN_SIZE, "min-size", P_SIZE, 1, 0, 0, "BYTES|\"1K\"",                                       \
      "fold siblings smaller than this into one line (bytes or \"1K\")")                           \
    X(EXACT, "exact", P_BOOL, 1, 1, 0, "yes|no", "sizes in bytes")                                 \
    X(OUTPUT, "output", P_STRING, 1, 1, 0, "PATH", "write to this file (default stdout)")          \
    X(TOP, "top", P_UINT, 0, 1, 0, "N", "number of largest nodes kept (default 10)")               \
    X(FORMAT, "format", P_FORMAT, 0, 1, 0, "\"text\"|\"json\"", "\"text\" (default) or \"json\"")  \
    X(MAX_FLAGS, "max-flags", P_UINT, 0, 1, 0, "N", "flags kept per dump (default 1000)")          \
    X(PER_DUMP, "per-dump", P_BOOL, 0, 1, 0, "yes|no",                                             \
      "text: print each dump's section (default true)")                                            \
    X(PATHS, "paths", P_BOOL, 0, 1, 0, "yes|no",                                                   \
      "path patterns per dump and overall: count, bytes, self bytes, share (default false)")       \
    X(FLUSH_EACH_DUMP, "flush-each-dump", P_BOOL, 1, 0, 0, "yes|no",                               \
      "write the output after each dump's tree (live viewing; default false)")                     \
    X(WORKER_THREAD, "worker-thread", P_BOOL, 1, 1, 1, "yes|no",                                   \
      "rebuild and print the trees on a second thread, beside babeltrace2's decoding (default: "   \
      "yes when the process may run on more than one CPU)")                                        \
    X(PID, "pid", P_INTS, 1, 1, 1, "N|[N,...]",                                                    \
      "keep only the dumps of this process (an integer, or an array of them)")                     \
    X(DUMP, "dump", P_INTS, 1, 1, 1, "N|[N,...]",                                                  \
      "keep only the dumps with this dump id (an integer, or an array of them)")                   \
    X(SERIALIZER, "serializer", P_STRINGS, 1, 1, 1, "NAME|[NAME,...]",                             \
      "keep only the dumps of this serializer (a string, or an array of them)")                    \
    X(FOLDED, "folded", P_EXPORT, 0, 0, 1, "PATH|\"-\"",                                           \
      "folded stacks weighted by self bytes, to this path (\"-\": stdout)")                        \
    X(SPEEDSCOPE, "speedscope", P_EXPORT, 0, 0, 1, "PATH|\"-\"",                                   \
      "speedscope JSON (one profile per dump), to this path")                                      \
    X(PERFETTO, "perfetto", P_EXPORT, 0, 0, 1, "PATH|\"-\"",                                       \
      "Chrome trace-event JSON (one event per dump), to this path")                                \
    X(HTML, "html", P_EXPORT, 0, 0, 1, "PATH|\"-\"",                                               \
      "the self-contained HTML viewer, to this path")                                              \
    X(TITLE, "title", P_EXPORT, 0, 0, 1, "TEXT", "title of the HTML page and speedscope file")

/* What a parameter's value must be (checked by the plugin). */
enum sertrace_sink_param_type {
    P_UINT,     /* non-negative integer */
    P_SIZE,     /* bytes, or a size string (format.h's sertrace_parse_size) */
    P_OVERSIZE, /* bytes, a size string or a share (sertrace_parse_oversize) */
    P_BOOL,     /* boolean */
    P_STRING,   /* non-empty string */
    P_FORMAT,   /* "text" or "json" */
    P_INTS,     /* non-negative integer, or a non-empty array of them */
    P_STRINGS,  /* non-empty string, or a non-empty array of them */
    P_EXPORT,   /* an export's output path ("-": stdout) or the title */
};

enum sertrace_sink_param {
#define SERTRACE_SINK_PARAM_ID_(id, name, type, tree, summary, export, syntax, help)               \
    SERTRACE_PARAM_##id,
    SERTRACE_SINK_PARAMS(SERTRACE_SINK_PARAM_ID_)
#undef SERTRACE_SINK_PARAM_ID_
        SERTRACE_PARAM_COUNT
};

/* The name of parameter `id` ("oversize" ...). */
static inline const char *sertrace_sink_param_name(enum sertrace_sink_param id)
{
    static const char *const names[] = {
#define SERTRACE_SINK_PARAM_NAME_(id, name, type, tree, summary, export, syntax, help) name,
        SERTRACE_SINK_PARAMS(SERTRACE_SINK_PARAM_NAME_)
#undef SERTRACE_SINK_PARAM_NAME_
    };
    return names[id];
}

/* The help text of a sink, built by the compiler from the rows it takes:
 * "Parameters:\n  name=SYNTAX: help\n...".  `which` is TREE or SUMMARY. */
#define SERTRACE_SINK_IF_1_(text) text
#define SERTRACE_SINK_IF_0_(text)
#define SERTRACE_SINK_IF_(flag, text) SERTRACE_SINK_IF_##flag##_(text)
#define SERTRACE_SINK_HELP_TREE_(id, name, type, tree, summary, export, syntax, help)              \
    SERTRACE_SINK_IF_(tree, "  " name "=" syntax ": " help "\n")
#define SERTRACE_SINK_HELP_SUMMARY_(id, name, type, tree, summary, export, syntax, help)           \
    SERTRACE_SINK_IF_(summary, "  " name "=" syntax ": " help "\n")
#define SERTRACE_SINK_HELP_EXPORT_(id, name, type, tree, summary, export, syntax, help)            \
    SERTRACE_SINK_IF_(export, "  " name "=" syntax ": " help "\n")
#define SERTRACE_SINK_HELP(which)                                                                  \
    "Parameters:\n" SERTRACE_SINK_PARAMS(SERTRACE_SINK_HELP_##which##_)

#endif /* SERTRACE_SINK_PARAMS_H */
