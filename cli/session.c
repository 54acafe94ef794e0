/* session.c -- `sertrace record | start | stop | snapshot`: LTTng sessions
 * driven through liblttng-ctl (never by shelling out to `lttng`).
 *
 * Every session sertrace makes has the same shape: per-UID buffers (one
 * buffer set per user and CPU, shared by all of that user's processes, so
 * a process that is already running is traced as soon as the session
 * starts and its data survives a crash), one channel "sertrace" enabling
 * `sertrace:*` with the vtid and vpid contexts (the analyzer needs vtid to
 * nest per thread).  The channel defaults to 8 sub-buffers of 1 MiB per
 * CPU: sertrace sends 4 KiB batches (tracepoints/), and at the ~750 MB/s
 * the consumer daemon drains here, 8 MiB per CPU absorbs ~10 ms of a
 * program that does nothing but dump, where LTTng's 4 x 512 KiB default
 * dropped 93 % of a full-speed 4 KiB-blob loop (NOTES section 1).
 *
 * Ordering rules that keep "no half-made session left behind" true:
 * every check that can fail on user input (options, the output directory,
 * the command's existence) runs before anything is created; once the
 * session exists, every failure path goes through destroy_session(); and
 * a directory sertrace created is removed again when it ends up with no
 * trace in it.  Interrupts (SIGINT/SIGTERM/SIGHUP) are caught for the
 * whole life of the session: before the child exists they abort the setup
 * cleanly; while it runs they are forwarded to it (unless they came from
 * the terminal, which already delivered them to the child's process
 * group); after it exited they are ignored until cleanup is done.
 *
 * Files: this one holds the options and the four subcommands;
 * session-lttng.c the liblttng-ctl calls (daemon, session, snapshot,
 * losses), session-outdir.c the output directory, session-child.c the
 * traced command and the signals.  session.h is their glue.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <lttng/lttng.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "session.h"
#include "sertrace/schema.h"

/* ---- option parsing shared by record and start ------------------------- */

enum { OPT_SNAPSHOT = 256, OPT_BUFFER_SIZE, OPT_NAME, OPT_LIVE, OPT_CMD_ONLY, OPT_ALL_PROCESSES };

static int parse_session_opts(int argc, char **argv, bool allow_live, const char *help,
                              struct session_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"output", required_argument, NULL, 'o'},
        {"snapshot", no_argument, NULL, OPT_SNAPSHOT},
        {"buffer-size", required_argument, NULL, OPT_BUFFER_SIZE},
        {"name", required_argument, NULL, OPT_NAME},
        {"live", required_argument, NULL, OPT_LIVE},
        {"cmd-only", no_argument, NULL, OPT_CMD_ONLY},
        {"all-processes", no_argument, NULL, OPT_ALL_PROCESSES},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(o, 0, sizeof(*o));
    o->buffer_bytes = DEFAULT_BUFFER_BYTES;
    optind = 1;
    opterr = 0;
    /* '+': stop at the first non-option, the traced command. */
    while ((c = getopt_long(argc, argv, "+ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(help, stdout);
            return 1;
        case 'o':
            o->outdir = optarg;
            break;
        case OPT_SNAPSHOT:
            o->snapshot = true;
            break;
        case OPT_BUFFER_SIZE:
            if (sertrace_cli_parse_size("--buffer-size", optarg, &o->buffer_bytes) != 0)
                return -1;
            break;
        case OPT_NAME:
            o->name = optarg;
            break;
        case OPT_LIVE:
            if (!allow_live)
                goto unknown;
            o->live_url = optarg;
            break;
        case OPT_CMD_ONLY:
            if (allow_live) /* start has no command */
                goto unknown;
            o->cmd_only = true;
            break;
        case OPT_ALL_PROCESSES:
            if (allow_live)
                goto unknown;
            o->all_processes = true;
            break;
        case ':':
            sertrace_cli_err("%s: option %s needs a value", argv[0], argv[optind - 1]);
            return -1;
        default:
        unknown:
            sertrace_cli_err("%s: unknown option %s (see `sertrace %s --help`)", argv[0],
                             argv[optind - 1], argv[0]);
            return -1;
        }
    }
    if (o->cmd_only && o->all_processes) {
        sertrace_cli_err("%s: --cmd-only and --all-processes contradict each other: give "
                         "one (without either, CMD and its descendants are recorded)",
                         argv[0]);
        return -1;
    }
    if (o->live_url != NULL && (o->snapshot || o->outdir != NULL)) {
        sertrace_cli_err("%s: --live cannot be combined with --snapshot or -o (the relay "
                         "daemon writes the trace)",
                         argv[0]);
        return -1;
    }
    return 0;
}

static void session_name(const struct session_opts *o, const char *kind, struct session_state *st)
{
    char ts[32];

    if (o->name != NULL) {
        snprintf(st->name, sizeof(st->name), "%s", o->name);
        return;
    }
    timestamp(ts, sizeof(ts));
    snprintf(st->name, sizeof(st->name), "sertrace-%s-%ld-%s", kind, (long)getpid(), ts);
}

/* ---- record ------------------------------------------------------------ */

static const char record_help[] =
    "Usage: sertrace record [-o DIR] [--snapshot] [--buffer-size SIZE] [--name NAME]\n"
    "                       [--cmd-only | --all-processes] [--] CMD [ARG...]\n"
    "\n"
    "Run CMD under a new LTTng session that records the sertrace events of CMD\n"
    "and its descendants (children it forks, spawns or starts through a\n"
    "forkserver, and theirs), then stop and destroy the session and tell where\n"
    "the trace is.  Other processes that loaded sertrace are not recorded, even\n"
    "though they share the user's buffers: CMD gets a token in $SERTRACE_SCOPE,\n"
    "which its descendants inherit, and the session keeps only the events that\n"
    "carry it.  A descendant that clears its environment is not recorded.\n"
    "Each process waits up to 30 s (not the usual 3 s) to register with the\n"
    "session daemon before it runs, so that a busy machine does not start a\n"
    "worker untraced ($LTTNG_UST_REGISTER_TIMEOUT, in ms, overrides it).\n"
    "\n"
    "  -o, --output DIR     where to write the trace (default:\n"
    "                       ./sertrace-trace-YYYYmmdd-HHMMSS).  Must be empty or\n"
    "                       not exist yet; it is created if missing.\n"
    "  --snapshot           flight recorder: keep the last buffers in memory (ring\n"
    "                       buffers overwrite the oldest data) and write nothing\n"
    "                       until `sertrace snapshot NAME` (or `lttng snapshot\n"
    "                       record -s NAME`); a last snapshot is written when CMD\n"
    "                       exits.  The session name is printed at the start.\n"
    "  --buffer-size SIZE   ring buffer size per CPU (default 8M = 8 x 1 MiB\n"
    "                       sub-buffers; accepts 4096, 64K, 16M, 1.5GiB; at least\n"
    "                       32K).  Rounded down to LTTng's power-of-two geometry.\n"
    "  --name NAME          session name (default sertrace-record-PID-DATE)\n"
    "  --cmd-only           record CMD's own process only, not its descendants\n"
    "                       (an LTTng VPID tracker and a filter on CMD's pid)\n"
    "  --all-processes      record every process of your user that loaded\n"
    "                       sertrace while CMD runs (the pid tells them apart)\n"
    "  -h, --help           this help\n"
    "\n"
    "A session daemon is started (`lttng-sessiond --daemonize`, or\n"
    "$LTTNG_SESSIOND_PATH) when none is reachable.  SIGINT, SIGTERM and SIGHUP\n"
    "are forwarded to CMD; the session is always cleaned up.  When no sertrace\n"
    "event was recorded, DIR is removed if `record` created it (a DIR that existed\n"
    "is left empty, as it was given).  CMD gets the session name in\n"
    "$SERTRACE_SESSION (e.g. `sertrace snapshot \"$SERTRACE_SESSION\"` from CMD).\n"
    "\n"
    "Messages go to stderr; CMD keeps stdout.  Exit status: CMD's (128+N when a\n"
    "signal N killed it); 127 when CMD was not found; 1 when CMD succeeded but no\n"
    "sertrace event was recorded (it never loaded sertrace) or on a tracing\n"
    "error; 2 on a usage error.\n";

int sertrace_cli_record(int argc, char **argv)
{
    struct session_opts o;
    struct session_state st;
    char **cmd;
    int exec_errno = 0, exit_status = SERTRACE_CLI_ERROR, ret;
    pid_t pid;
    bool have_trace;
    struct lttng_process_attr_tracker_handle *tracker = NULL;

    memset(&st, 0, sizeof(st));
    ret = parse_session_opts(argc, argv, false, record_help, &o);
    if (ret != 0)
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    if (optind >= argc) {
        sertrace_cli_err("record: missing the command to run (sertrace record [OPTIONS] "
                         "-- CMD [ARG...])");
        return SERTRACE_CLI_USAGE;
    }
    cmd = argv + optind;
    if (buffer_geometry(o.buffer_bytes, &st) != 0)
        return SERTRACE_CLI_USAGE;
    if (!command_exists(cmd[0])) {
        sertrace_cli_err("%s: command not found", cmd[0]);
        return 127;
    }
    catch_signals();
    if (prepare_outdir(o.outdir, &st) != 0)
        return SERTRACE_CLI_ERROR;
    session_name(&o, "record", &st);
    if (!o.cmd_only && !o.all_processes)
        make_scope(&st);
    if (ensure_sessiond() != 0 || interrupted())
        goto fail;
    if (create_session(&o, &st) != 0 || interrupted())
        goto fail;
    if (o.cmd_only) {
        enum lttng_error_code code = lttng_session_get_tracker_handle(
            st.name, LTTNG_DOMAIN_UST, LTTNG_PROCESS_ATTR_VIRTUAL_PROCESS_ID, &tracker);
        if (code != LTTNG_OK || lttng_process_attr_tracker_handle_set_tracking_policy(
                                    tracker, LTTNG_TRACKING_POLICY_INCLUDE_SET) !=
                                    LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_OK) {
            sertrace_cli_err("cannot restrict the session to CMD's process (--cmd-only)");
            goto fail;
        }
    }
    if (start_session(&st) != 0)
        goto fail;
    if (o.snapshot)
        fprintf(stderr,
                "sertrace: flight-recorder session %s: write the buffers with "
                "`sertrace snapshot %s` (or `lttng snapshot record -s %s`)\n",
                st.name, st.name, st.name);

    pid = spawn(cmd, st.name, st.scope_env, &exec_errno, tracker);
    lttng_process_attr_tracker_handle_destroy(tracker);
    tracker = NULL;
    if (pid < 0) {
        sertrace_cli_err("cannot run %s: %s", cmd[0], strerror(exec_errno));
        exit_status = (exec_errno == ENOENT || exec_errno == EACCES) ? 127 : 126;
        lttng_stop_tracing(st.name);
        destroy_session(&st);
        forget_outdir(&st);
        return exit_status;
    }
    exit_status = wait_child(pid);

    if (finish_session(&st, o.snapshot) != 0 && exit_status == 0)
        exit_status = SERTRACE_CLI_ERROR;
    have_trace = report_trace(st.outdir, "trace") == 1;
    if (!have_trace) {
        report_no_trace(&st, st.outdir, false);
        if (exit_status == 0)
            exit_status = SERTRACE_CLI_ERROR;
    }
    return exit_status;

fail:
    lttng_process_attr_tracker_handle_destroy(tracker);
    destroy_session(&st);
    forget_outdir(&st);
    return pending_signal ? 128 + (int)pending_signal : SERTRACE_CLI_ERROR;
}

/* ---- start / stop -------------------------------------------------------- */

static const char start_help[] =
    "Usage: sertrace start [-o DIR] [--snapshot] [--buffer-size SIZE] [--name NAME]\n"
    "       sertrace start --live URL [--buffer-size SIZE] [--name NAME]\n"
    "\n"
    "Create and start a session that records the sertrace events of every process\n"
    "of your user that loaded sertrace -- including processes that are already\n"
    "running: they registered with the session daemon when they loaded sertrace\n"
    "and start emitting as soon as the session starts, without a restart.\n"
    "Prints the session name on stdout; end it with `sertrace stop NAME`.\n"
    "\n"
    "  -o, --output DIR     trace directory (default ./sertrace-trace-DATE; must be\n"
    "                       empty or not exist)\n"
    "  --snapshot           flight recorder (see `sertrace record --help`); write\n"
    "                       the buffers with `sertrace snapshot NAME`\n"
    "  --live URL           stream to an lttng-relayd (e.g. net://127.0.0.1, or\n"
    "                       net://HOST:CONTROL_PORT:DATA_PORT) every 200 ms; read it\n"
    "                       with `sertrace report --live\n"
    "                       net://HOST[:LIVE_PORT]/host/HOSTNAME/NAME`\n"
    "  --buffer-size SIZE   ring buffer size per CPU (default 8M)\n"
    "  --name NAME          session name (default sertrace-start-PID-DATE)\n"
    "  -h, --help           this help\n"
    "\n"
    "The equivalent lttng commands:\n"
    "  lttng create NAME --output=DIR          (--snapshot for a flight recorder)\n"
    "  lttng enable-channel -u --buffers-uid --subbuf-size=1M --num-subbuf=8 sertrace\n"
    "  lttng enable-event -u -c sertrace 'sertrace:*'\n"
    "  lttng add-context -u -c sertrace -t " SERTRACE_CONTEXT_VTID " -t " SERTRACE_CONTEXT_VPID "\n"
    "  lttng start NAME\n"
    "\n"
    "Exit status: 0 started, 1 error (nothing is left behind), 2 usage error.\n";

int sertrace_cli_start(int argc, char **argv)
{
    struct session_opts o;
    struct session_state st;
    int ret;

    memset(&st, 0, sizeof(st));
    ret = parse_session_opts(argc, argv, true, start_help, &o);
    if (ret != 0)
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    if (optind < argc) {
        sertrace_cli_err("start: unexpected argument '%s' (to trace a command, use "
                         "`sertrace record -- CMD`)",
                         argv[optind]);
        return SERTRACE_CLI_USAGE;
    }
    if (buffer_geometry(o.buffer_bytes, &st) != 0)
        return SERTRACE_CLI_USAGE;
    catch_signals();
    if (o.live_url == NULL && prepare_outdir(o.outdir, &st) != 0)
        return SERTRACE_CLI_ERROR;
    session_name(&o, "start", &st);
    if (ensure_sessiond() != 0 || interrupted())
        goto fail;
    if (create_session(&o, &st) != 0 || interrupted())
        goto fail;
    if (start_session(&st) != 0)
        goto fail;
    if (o.live_url != NULL)
        fprintf(stderr, "sertrace: live session %s started, streaming to %s\n", st.name,
                o.live_url);
    else
        fprintf(stderr, "sertrace: %ssession %s started, writing to %s\n",
                o.snapshot ? "flight-recorder " : "", st.name, st.outdir);
    if (o.snapshot)
        fprintf(stderr, "sertrace: write the buffers with `sertrace snapshot %s`\n", st.name);
    fprintf(stderr, "sertrace: stop it with `sertrace stop %s`\n", st.name);
    printf("%s\n", st.name);
    return SERTRACE_CLI_OK;
fail:
    destroy_session(&st);
    forget_outdir(&st);
    return SERTRACE_CLI_ERROR;
}

static const char stop_help[] =
    "Usage: sertrace stop NAME\n"
    "\n"
    "Stop session NAME (made by `sertrace start`), print how many events were\n"
    "discarded, write a last snapshot if it is a --snapshot session, destroy the\n"
    "session and print where the trace is (the trace directory on stdout).\n"
    "When no sertrace event was recorded, the empty directories LTTng made are\n"
    "removed, and the trace directory too if it is then empty (files are never\n"
    "removed).\n"
    "lttng equivalent: `lttng stop NAME && lttng destroy NAME`.\n"
    "\n"
    "Exit status: 0 ok, 1 error (no such session, or no sertrace event was\n"
    "recorded), 2 usage error.\n";

/* Options of stop and snapshot: -h/--help, plus -o DIR when `outdir` is
 * given.  0 ok (positional args start at optind), 1 help printed, -1
 * usage error (printed). */
static int parse_simple(int argc, char **argv, const char *help, const char *extra_short,
                        const struct option *extra_long, const char **outdir)
{
    static const struct option help_only[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    char shortopts[16];
    int c;

    snprintf(shortopts, sizeof(shortopts), "+h%s", extra_short);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, extra_long ? extra_long : help_only, NULL)) !=
           -1) {
        if (c == 'h') {
            fputs(help, stdout);
            return 1;
        }
        if (c == 'o' && outdir != NULL) {
            *outdir = optarg;
            continue;
        }
        sertrace_cli_err("%s: unknown or incomplete option %s (see `sertrace %s --help`)", argv[0],
                         argv[optind - 1], argv[0]);
        return -1;
    }
    return 0;
}

int sertrace_cli_stop(int argc, char **argv)
{
    struct session_state st;
    struct lttng_session info;
    char dir[PATH_MAX] = "";
    int ret, found;

    memset(&st, 0, sizeof(st));
    ret = parse_simple(argc, argv, stop_help, "", NULL, NULL);
    if (ret != 0)
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    if (argc - optind != 1) {
        sertrace_cli_err("stop: expected exactly one session NAME (see `sertrace stop "
                         "--help`)");
        return SERTRACE_CLI_USAGE;
    }
    snprintf(st.name, sizeof(st.name), "%s", argv[optind]);
    catch_signals();
    if (lttng_session_daemon_alive() != 1) {
        sertrace_cli_err("no LTTng session daemon is reachable, so there is no session %s",
                         st.name);
        return SERTRACE_CLI_ERROR;
    }
    found = find_session(st.name, &info);
    if (found != 0) {
        if (found > 0)
            sertrace_cli_err("no session named %s (list them with `lttng list`)", st.name);
        return SERTRACE_CLI_ERROR;
    }
    st.session_exists = true;
    if (info.snapshot_mode)
        snapshot_default_dir(st.name, dir, sizeof(dir));
    else if (info.path[0] == '/')
        snprintf(dir, sizeof(dir), "%s", info.path);
    if (finish_session(&st, info.snapshot_mode) != 0)
        return SERTRACE_CLI_ERROR;
    fprintf(stderr, "sertrace: session %s destroyed\n", st.name);
    if (dir[0] == '\0') {
        fprintf(stderr, "sertrace: the trace went to %s\n", info.path);
        return SERTRACE_CLI_OK;
    }
    if (!report_trace(dir, "trace")) {
        report_no_trace(&st, dir, true);
        return SERTRACE_CLI_ERROR;
    }
    printf("%s\n", dir);
    return SERTRACE_CLI_OK;
}

/* ---- snapshot ------------------------------------------------------------ */

static const char snapshot_help[] =
    "Usage: sertrace snapshot [-o DIR] [NAME]\n"
    "\n"
    "Write the in-memory ring buffers of snapshot session NAME (made by `sertrace\n"
    "record --snapshot` or `sertrace start --snapshot`) to disk, without stopping\n"
    "it, and print the new snapshot directory on stdout.  Without NAME, the only\n"
    "snapshot session of the session daemon is used.  A snapshot holds the last\n"
    "buffers only: dumps cut at its edges are reported as partial by `sertrace\n"
    "report`.  Taking two snapshots in a row may repeat events.\n"
    "\n"
    "  -o, --output DIR   write under DIR instead of the session's directory\n"
    "  -h, --help         this help\n"
    "\n"
    "lttng equivalent: `lttng snapshot record -s NAME [DIR]`.\n"
    "\n"
    "Exit status: 0 ok, 1 error, 2 usage error.\n";

int sertrace_cli_snapshot(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    const char *outdir = NULL;
    char name[LTTNG_NAME_MAX] = "";
    char abs_out[PATH_MAX];
    char where[PATH_MAX];
    struct lttng_session info;
    int ret;

    ret = parse_simple(argc, argv, snapshot_help, "o:", longopts, &outdir);
    if (ret != 0)
        return ret > 0 ? SERTRACE_CLI_OK : SERTRACE_CLI_USAGE;
    if (argc - optind > 1) {
        sertrace_cli_err("snapshot: expected at most one session NAME");
        return SERTRACE_CLI_USAGE;
    }
    if (lttng_session_daemon_alive() != 1) {
        sertrace_cli_err("no LTTng session daemon is reachable, so there is no session "
                         "to snapshot");
        return SERTRACE_CLI_ERROR;
    }
    if (argc - optind == 1) {
        snprintf(name, sizeof(name), "%s", argv[optind]);
    } else {
        struct lttng_session *list = NULL;
        int n = lttng_list_sessions(&list), count = 0;
        for (int i = 0; i < n; i++) {
            if (list[i].snapshot_mode) {
                snprintf(name, sizeof(name), "%s", list[i].name);
                count++;
            }
        }
        free(list);
        if (count != 1) {
            sertrace_cli_err("snapshot: %s snapshot sessions: name one (`lttng list` shows "
                             "them)",
                             count == 0 ? "there are no" : "there are several");
            return SERTRACE_CLI_ERROR;
        }
    }
    ret = find_session(name, &info);
    if (ret != 0) {
        if (ret > 0)
            sertrace_cli_err("no session named %s", name);
        return SERTRACE_CLI_ERROR;
    }
    if (!info.snapshot_mode) {
        sertrace_cli_err("session %s is not a snapshot session (create it with "
                         "--snapshot); its trace is written continuously",
                         name);
        return SERTRACE_CLI_ERROR;
    }
    if (outdir != NULL) {
        if (mkdir(outdir, 0775) != 0 && errno != EEXIST) {
            sertrace_cli_err("cannot create %s: %s", outdir, strerror(errno));
            return SERTRACE_CLI_ERROR;
        }
        if (realpath(outdir, abs_out) == NULL) {
            sertrace_cli_err("cannot resolve %s: %s", outdir, strerror(errno));
            return SERTRACE_CLI_ERROR;
        }
    }
    if (take_snapshot(name, outdir ? abs_out : NULL, where, sizeof(where)) != 0)
        return SERTRACE_CLI_ERROR;
    if (sertrace_cli_find_traces(where, NULL) <= 0) {
        sertrace_cli_err("snapshot of %s written to %s, but it holds no sertrace events "
                         "(no process has dumped anything yet?)",
                         name, where);
        return SERTRACE_CLI_ERROR;
    }
    fprintf(stderr, "sertrace: snapshot of %s written to %s\n", name, where);
    printf("%s\n", where);
    return SERTRACE_CLI_OK;
}
