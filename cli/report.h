/* report.h -- the glue between the files of `sertrace report` (internal
 * to cli/).
 *
 * report.c builds and runs the babeltrace2 graph from the options; it
 * uses report-plugin.c (finding the plugins, babeltrace2's errors in one
 * line), report-traces.c (what is under TRACE: the CTF traces, grouped,
 * checked, damaged stream files set aside) and report-progress.c (the
 * progress filter and the terminal stdout that never mixes with it).
 * These are the names they share; everything else stays static in its
 * file.
 */
#ifndef SERTRACE_REPORT_H
#define SERTRACE_REPORT_H

#include <babeltrace2/babeltrace.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "display-opts.h"

#define PROGRESS_MIN_BYTES (50ull * 1000 * 1000)
#define PROGRESS_INTERVAL_NS 250000000ll
#define LIVE_RETRY_MS 100

/* The command line of `report`: the display options it shares with
 * `inspect` (display-opts.h: mode, exports, --oversize, --top, filters
 * ...; passed to the sink as its parameters) and its own input. */
struct report_opts {
    struct sertrace_display_opts d;
    const char *trace;
    const char *live_url;
};

/* ---- report-plugin.c ---- */

/* -v/--verbose (set once by the option parser). */
extern bool verbose;
/* The sertrace plugin ($SERTRACE_PLUGIN_PATH, the build's plugin
 * directory for the build tree's own binary, the install directory,
 * babeltrace2's path); *from names where.  NULL when not found (a new
 * reference otherwise: put it). */
const bt_plugin *find_sertrace_plugin(const char **from);
/* A plugin of babeltrace2's own ("ctf", "utils"), or NULL. */
const bt_plugin *find_std_plugin(const char *name);
/* The places find_sertrace_plugin() looks, for messages. */
void plugin_search_text(char *out, size_t n);
/* One line "sertrace: WHAT: ROOT CAUSE" on stderr (the whole chain with
 * --verbose); takes the current thread's error. */
void print_bt_error(const char *what);
/* Take the current thread's error: its root cause into `root` (empty when
 * none).  True when the cause came from a component or plugin. */
bool take_bt_error(char *root, size_t n);

/* ---- report-traces.c ---- */

#define REPORT_INCOMPLETE 3

struct trace_group {
    char *group;      /* UUID from support-info, or the directory itself */
    bt_value *inputs; /* array of directories */
};

/* The CTF traces under `root`, checked and grouped by UUID into *out
 * (*count groups; free with free_groups); *damaged: stream files cut or set
 * aside (named on stderr).  0, or -1 (printed). */
int discover(const char *root, const bt_component_class_source *fs, struct trace_group **out,
             int *count, int *damaged);
void free_groups(struct trace_group *g, int n);
/* Remove the shadow directories discover() made for damaged traces. */
void remove_shadows(void);
/* The time span of the traces `inputs` (min begin, max end over all
 * streams, for the progress estimate): 0 when found. */
int trace_span(const bt_component_class_source *fs, const bt_value *inputs, int64_t *begin,
               int64_t *end);

/* ---- report-progress.c ---- */

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

/* The pass-through progress filter's class (made at run time), or NULL. */
bt_component_class_filter *progress_class(void);
/* The end of the run: on a terminal of its own, the final count stays;
 * on the report's terminal, the line goes. */
void progress_done(struct progress *p);
/* Replace stdout by `t` (see struct tty_out), remove it again (0, or -1
 * when a write failed), and write out what it holds back when the source
 * has nothing for now (live). */
int tty_out_install(struct tty_out *t, struct progress *p);
int tty_out_remove(struct tty_out *t);
void tty_out_settle(struct tty_out *t);
/* write(2) all of `b`, retrying on EINTR: 0 or -1. */
int write_all(int fd, const char *b, size_t n);

#endif /* SERTRACE_REPORT_H */
