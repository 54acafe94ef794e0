/* session.h -- the glue between the files of `sertrace record | start |
 * stop | snapshot` (internal to cli/).
 *
 * session.c parses the options and runs the subcommands over
 * session-lttng.c (liblttng-ctl: the daemon, the session, snapshots,
 * losses), session-outdir.c (the output directory) and session-child.c
 * (the traced command, signals).  These are the names they share;
 * everything else stays static in its file.
 */
#ifndef SERTRACE_SESSION_H
#define SERTRACE_SESSION_H

#include <limits.h>
#include <lttng/lttng.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#include "sertrace/schema.h"

#define CHANNEL_NAME "sertrace"
#define DEFAULT_NUM_SUBBUF 8u
#define DEFAULT_BUFFER_BYTES (8ull << 20)
/* A sub-buffer must hold one records event: a 4 KiB batch plus the event
 * header and contexts.  16 KiB leaves room and is a power of two. */
#define MIN_SUBBUF_BYTES (16ull << 10)
#define SESSIOND_WAIT_MS 10000
#define LIVE_TIMER_US 200000ull

struct session_opts {
    const char *outdir; /* -o, may be NULL */
    const char *name;   /* --name, may be NULL */
    const char *live_url;
    bool snapshot;
    bool cmd_only;         /* record: trace CMD's process only (VPID tracker) */
    bool all_processes;    /* record: every process of the user, no scope filter */
    uint64_t buffer_bytes; /* per CPU */
};

struct session_state {
    char name[LTTNG_NAME_MAX];
    /* record's default: the LTTng filter that keeps CMD's descendants
     * (`scope == "*:TOKEN:*"`) and the $SERTRACE_SCOPE value CMD gets;
     * both empty when every process is recorded. */
    char filter[64];
    char scope_env[SERTRACE_SCOPE_MAX + 1];
    char outdir[PATH_MAX]; /* absolute; empty for live sessions */
    bool created_dir;
    bool session_exists;
    uint64_t subbuf_size;
    uint64_t num_subbuf;
};

/* ---- session-child.c ---- */

/* The signal caught (0: none) and the child to forward it to (0: none). */
extern volatile sig_atomic_t pending_signal;
extern volatile pid_t child_pid;

/* Catch SIGINT/SIGTERM/SIGHUP into pending_signal (forwarded to
 * child_pid when it is set), and give them their defaults back. */
void catch_signals(void);

/* Resolve CMD like execvp would, to fail before creating anything. */
int command_exists(const char *cmd);

void default_signals(void);

/* A signal arrived (then said on stderr: cleaning up). */
bool interrupted(void);

/* record's default scope (CMD and its descendants): a fresh random token,
 * the filter that keeps only the events whose `scope` field holds it, and
 * the $SERTRACE_SCOPE value CMD inherits (and passes on to every process it
 * starts, unless one clears its environment).  A record run inside another
 * record's CMD appends its token to the outer one's, so both record it. */
void make_scope(struct session_state *st);

/* Fork and exec CMD with SERTRACE_SESSION=`session` in its environment
 * (so CMD can name its own session: `lttng list "$SERTRACE_SESSION"`,
 * `sertrace snapshot "$SERTRACE_SESSION"`; set before the fork, so the
 * child does not allocate).  Returns the pid, or -1 with *exec_errno set
 * when the exec failed (the child has then been reaped).  With a `tracker`,
 * the child waits until its pid is in the VPID tracker before exec, so
 * the process is tracked from its first event. */
pid_t spawn(char **cmd, const char *session, const char *scope_env, int *exec_errno,
            const struct lttng_process_attr_tracker_handle *tracker);

/* Wait for CMD: its exit status, 128+N when signal N killed it. */
int wait_child(pid_t pid);

/* ---- session-lttng.c ---- */

/* Split a per-CPU total into LTTng's power-of-two geometry: 8 sub-buffers
 * when each can be >= 16 KiB, fewer (down to 2) for small totals. */
int buffer_geometry(uint64_t total, struct session_state *st);

/* Create the session, its channel, `sertrace:*` (unless `o->cmd_only`:
 * record enables them once CMD's pid is known) and the contexts.  On
 * failure the session (if it was created) is destroyed. */
int create_session(const struct session_opts *o, struct session_state *st);

/* Destroy the session (every failure path once it exists), waiting for
 * it to be gone.  0, or -1 (printed). */
int destroy_session(struct session_state *st);
/* Enable `sertrace:*` in the sertrace channel, keeping only the events
 * that pass `filter` (an LTTng filter expression; NULL: all). */
int enable_events(const struct session_state *st, const char *filter);

/* Make sure a session daemon answers: start `lttng-sessiond --daemonize`
 * (or $LTTNG_SESSIOND_PATH) when none does, and wait for it. */
int ensure_sessiond(void);

/* Find a session by name; fills `out`.  0 found, 1 not found, -1 error. */
int find_session(const char *name, struct lttng_session *out);

/* The common end of `record` and `stop`: stop tracing (which waits until
 * the consumer daemon has the data), print the discarded counts (read
 * before destroy: per-UID buffers keep them until then), write a last
 * snapshot for a snapshot session, destroy the session and wait for it.
 * 0, or -1 when the destroy failed. */
int finish_session(struct session_state *st, bool snapshot);

/* The local directory a snapshot session writes to by default. */
int snapshot_default_dir(const char *session, char *out, size_t n);

/* Start tracing; -1 (printed) on failure or when a signal arrived during
 * the setup.  The common middle of `record` and `start`. */
int start_session(const struct session_state *st);

/* Record a snapshot of `session` into `dir` (NULL: the session's own
 * output) and put the new snapshot directory's path in `where`. */
int take_snapshot(const char *session, const char *dir, char *where, size_t n);

/* ---- session-outdir.c ---- */

/* Remove the output directory again if sertrace created it (and forget
 * that it did). */
void forget_outdir(struct session_state *st);

/* Check or create the output directory and store its absolute path.
 * A directory that exists must be empty and writable; a new one is
 * created (its parent must exist).  Runs before any session exists. */
int prepare_outdir(const char *requested, struct session_state *st);

/* No trace under `dir`: clean up and say so truthfully.  `remove_dir`:
 * `dir` itself goes too -- all of it when sertrace created it in this
 * process (`record`), else only if it is empty once LTTng's empty
 * directories are gone (`stop`: `start` wanted it empty or missing, so an
 * empty DIR holds nothing of anyone's).  A pre-existing directory given
 * to `record` is left as it was given: empty. */
void report_no_trace(struct session_state *st, const char *dir, bool remove_dir);

/* Report where the trace is.  Returns 1 when traces were found under
 * `dir`, 0 when not (the caller says so, after cleaning up). */
int report_trace(const char *dir, const char *what);

/* "YYYYMMDD-HHMMSS" of now (local time), for default directory names. */
void timestamp(char *out, size_t n);

#endif /* SERTRACE_SESSION_H */
