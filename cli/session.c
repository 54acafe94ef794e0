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

/* ---- signals ---------------------------------------------------------- */

static volatile sig_atomic_t pending_signal;
static volatile pid_t child_pid;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    pending_signal = sig;
    /* Terminal-generated signals (SI_KERNEL) already reached the child,
     * which shares our process group: forwarding would deliver twice. */
    if (child_pid > 0 && (info == NULL || info->si_code != SI_KERNEL))
        kill(child_pid, sig);
}

static void catch_signals(void)
{
    struct sigaction sa;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    /* SA_RESTART: a signal must never make a liblttng-ctl call fail half
     * way (a destroy cut short would leave the session behind); the
     * setup checks pending_signal between steps instead. */
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

static void default_signals(void)
{
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_DFL);
}

static bool interrupted(void)
{
    if (pending_signal == 0)
        return false;
    sertrace_cli_err("interrupted by signal %d: cleaning up", (int)pending_signal);
    return true;
}

/* ---- session daemon --------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && pending_signal == 0)
        ;
}

/* Make sure a session daemon answers: start `lttng-sessiond --daemonize`
 * (or $LTTNG_SESSIOND_PATH) when none does, and wait for it. */
static int ensure_sessiond(void)
{
    const char *bin = getenv("LTTNG_SESSIOND_PATH");
    pid_t pid;
    int status = 0;

    if (lttng_session_daemon_alive() == 1)
        return 0;
    if (bin == NULL || *bin == '\0')
        bin = "lttng-sessiond";
    fprintf(stderr, "sertrace: no LTTng session daemon is reachable: starting `%s --daemonize`\n",
            bin);
    pid = fork();
    if (pid < 0) {
        sertrace_cli_err("cannot fork to start %s: %s", bin, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        default_signals();
        execlp(bin, bin, "--daemonize", (char *)NULL);
        fprintf(stderr, "sertrace: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        sertrace_cli_err("%s --daemonize failed (status %d): no session daemon is "
                         "available.  Install lttng-tools, or start one yourself "
                         "(as root: `lttng-sessiond --daemonize`, and add your user to "
                         "the `tracing` group)",
                         bin, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        return -1;
    }
    for (int waited = 0; waited < SESSIOND_WAIT_MS; waited += 50) {
        if (lttng_session_daemon_alive() == 1)
            return 0;
        if (pending_signal)
            return -1;
        sleep_ms(50);
    }
    sertrace_cli_err("started %s but it did not answer within %d s: no session daemon "
                     "is available",
                     bin, SESSIOND_WAIT_MS / 1000);
    return -1;
}

/* ---- output directory ------------------------------------------------- */

static void timestamp(char *out, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(out, n, "%Y%m%d-%H%M%S", &tm);
}

static int dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int empty = 1;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* Check or create the output directory and store its absolute path.
 * A directory that exists must be empty and writable; a new one is
 * created (its parent must exist).  Runs before any session exists. */
static int prepare_outdir(const char *requested, struct session_state *st)
{
    char def[64];
    const char *dir = requested;
    struct stat sb;

    if (dir == NULL) {
        char ts[32];
        timestamp(ts, sizeof(ts));
        snprintf(def, sizeof(def), "sertrace-trace-%s", ts);
        dir = def;
    }
    if (stat(dir, &sb) == 0) {
        int empty;
        if (!S_ISDIR(sb.st_mode)) {
            sertrace_cli_err("output directory %s exists and is not a directory", dir);
            return -1;
        }
        empty = dir_is_empty(dir);
        if (empty < 0) {
            sertrace_cli_err("cannot read output directory %s: %s", dir, strerror(errno));
            return -1;
        }
        if (!empty) {
            sertrace_cli_err("output directory %s exists and is not empty: choose "
                             "another with -o DIR (sertrace never mixes two traces)",
                             dir);
            return -1;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            sertrace_cli_err("output directory %s is not writable: %s", dir, strerror(errno));
            return -1;
        }
    } else if (errno == ENOENT) {
        if (mkdir(dir, 0775) != 0) {
            sertrace_cli_err("cannot create output directory %s: %s", dir, strerror(errno));
            return -1;
        }
        st->created_dir = true;
    } else {
        sertrace_cli_err("cannot create output directory %s: %s", dir, strerror(errno));
        return -1;
    }
    /* The session daemon resolves paths itself: give it an absolute one. */
    if (realpath(dir, st->outdir) == NULL) {
        sertrace_cli_err("cannot resolve output directory %s: %s", dir, strerror(errno));
        if (st->created_dir)
            rmdir(dir);
        st->created_dir = false;
        return -1;
    }
    return 0;
}

static void forget_outdir(struct session_state *st)
{
    if (st->created_dir && st->outdir[0] != '\0')
        sertrace_cli_remove_tree(st->outdir);
    st->created_dir = false;
}

/* ---- the session ------------------------------------------------------ */

static uint64_t pow2_floor(uint64_t v)
{
    uint64_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

/* Split a per-CPU total into LTTng's power-of-two geometry: 8 sub-buffers
 * when each can be >= 16 KiB, fewer (down to 2) for small totals. */
static int buffer_geometry(uint64_t total, struct session_state *st)
{
    uint64_t n = DEFAULT_NUM_SUBBUF;

    if (total < 2 * MIN_SUBBUF_BYTES) {
        char h[32];
        sertrace_cli_err("--buffer-size: %s is too small (at least 32 KiB per CPU: two "
                         "sub-buffers that each hold a 4 KiB batch)",
                         sertrace_cli_human_size(total, h));
        return -1;
    }
    while (n > 2 && total / n < MIN_SUBBUF_BYTES)
        n /= 2;
    st->num_subbuf = n;
    st->subbuf_size = pow2_floor(total / n);
    return 0;
}

static void lttng_fail(const char *what, int code)
{
    sertrace_cli_err("%s: %s", what, lttng_strerror(code < 0 ? code : -code));
}

static int destroy_session(struct session_state *st)
{
    struct lttng_destruction_handle *h = NULL;
    enum lttng_error_code ret;
    int rc = 0;

    if (!st->session_exists)
        return 0;
    ret = lttng_destroy_session_ext(st->name, &h);
    if (ret != LTTNG_OK) {
        lttng_fail("cannot destroy the session", (int)ret);
        rc = -1;
        goto end;
    }
    if (lttng_destruction_handle_wait_for_completion(h, -1) !=
        LTTNG_DESTRUCTION_HANDLE_STATUS_COMPLETED) {
        sertrace_cli_err("the session daemon did not confirm destroying session %s", st->name);
        rc = -1;
    }
    st->session_exists = false;
end:
    lttng_destruction_handle_destroy(h);
    return rc;
}

static struct lttng_domain ust_domain(void)
{
    struct lttng_domain dom;

    memset(&dom, 0, sizeof(dom));
    dom.type = LTTNG_DOMAIN_UST;
    dom.buf_type = LTTNG_BUFFER_PER_UID;
    return dom;
}

/* Enable `sertrace:*` in the sertrace channel, keeping only the events
 * that pass `filter` (an LTTng filter expression; NULL: all). */
static int enable_events(const struct session_state *st, const char *filter)
{
    struct lttng_domain dom = ust_domain();
    struct lttng_handle *h = lttng_create_handle(st->name, &dom);
    struct lttng_event *ev = lttng_event_create();
    int ret = -1;

    if (h == NULL || ev == NULL) {
        sertrace_cli_err("out of memory while configuring session %s", st->name);
        goto end;
    }
    snprintf(ev->name, sizeof(ev->name), "%s:*", SERTRACE_PROVIDER_NAME);
    ev->type = LTTNG_EVENT_TRACEPOINT;
    ev->loglevel = -1;
    ev->loglevel_type = LTTNG_EVENT_LOGLEVEL_ALL;
    ret = lttng_enable_event_with_exclusions(h, ev, CHANNEL_NAME, (char *)filter, 0, NULL);
    if (ret < 0)
        lttng_fail("cannot enable the sertrace events", ret);
end:
    lttng_event_destroy(ev);
    lttng_destroy_handle(h);
    return ret < 0 ? -1 : 0;
}

/* Create the session, its channel, `sertrace:*` (unless `o->cmd_only`:
 * record enables them once CMD's pid is known) and the contexts.  On
 * failure the session (if it was created) is destroyed. */
static int create_session(const struct session_opts *o, struct session_state *st)
{
    struct lttng_session_descriptor *desc = NULL;
    struct lttng_domain dom = ust_domain();
    struct lttng_handle *h = NULL;
    struct lttng_channel *ch = NULL;
    struct lttng_event_context ctx;
    enum lttng_error_code code;
    int ret, rc = -1;

    if (o->live_url != NULL)
        desc = lttng_session_descriptor_live_network_create(st->name, o->live_url, NULL,
                                                            LIVE_TIMER_US);
    else if (o->snapshot)
        desc = lttng_session_descriptor_snapshot_local_create(st->name, st->outdir);
    else
        desc = lttng_session_descriptor_local_create(st->name, st->outdir);
    if (desc == NULL) {
        sertrace_cli_err("cannot describe session %s (invalid name or URL?)", st->name);
        goto end;
    }
    code = lttng_create_session_ext(desc);
    if (code != LTTNG_OK) {
        lttng_fail("cannot create the LTTng session", (int)code);
        goto end;
    }
    st->session_exists = true;

    h = lttng_create_handle(st->name, &dom);
    ch = lttng_channel_create(&dom);
    if (h == NULL || ch == NULL) {
        sertrace_cli_err("out of memory while configuring session %s", st->name);
        goto end;
    }
    snprintf(ch->name, sizeof(ch->name), "%s", CHANNEL_NAME);
    ch->attr.subbuf_size = st->subbuf_size;
    ch->attr.num_subbuf = st->num_subbuf;
    ch->attr.overwrite = o->snapshot ? 1 : 0;
    if (o->snapshot)
        ch->attr.output = LTTNG_EVENT_MMAP;
    ret = lttng_enable_channel(h, ch);
    if (ret < 0) {
        lttng_fail("cannot create the sertrace channel", ret);
        goto end;
    }
    if (!o->cmd_only && enable_events(st, st->filter[0] != '\0' ? st->filter : NULL) != 0)
        goto end;
    memset(&ctx, 0, sizeof(ctx));
    ctx.ctx = LTTNG_EVENT_CONTEXT_VTID;
    ret = lttng_add_context(h, &ctx, NULL, CHANNEL_NAME);
    if (ret >= 0) {
        ctx.ctx = LTTNG_EVENT_CONTEXT_VPID;
        ret = lttng_add_context(h, &ctx, NULL, CHANNEL_NAME);
    }
    if (ret < 0) {
        lttng_fail("cannot add the " SERTRACE_CONTEXT_VTID "/" SERTRACE_CONTEXT_VPID " contexts",
                   ret);
        goto end;
    }
    rc = 0;
end:
    if (rc != 0)
        destroy_session(st);
    lttng_channel_destroy(ch);
    lttng_destroy_handle(h);
    lttng_session_descriptor_destroy(desc);
    return rc;
}

/* Discarded events and lost packets of the sertrace channel (valid after
 * stop, before destroy; per-UID buffers keep these counts). */
static int channel_losses(const char *session, uint64_t *events, uint64_t *packets)
{
    struct lttng_domain dom = ust_domain();
    struct lttng_handle *h = lttng_create_handle(session, &dom);
    struct lttng_channel *chans = NULL;
    int n, rc = -1;

    *events = *packets = 0;
    if (h == NULL)
        return -1;
    n = lttng_list_channels(h, &chans);
    if (n < 0)
        goto end;
    for (int i = 0; i < n; i++) {
        uint64_t d = 0, l = 0;
        if (lttng_channel_get_discarded_event_count(&chans[i], &d) == 0)
            *events += d;
        if (lttng_channel_get_lost_packet_count(&chans[i], &l) == 0)
            *packets += l;
    }
    rc = 0;
end:
    free(chans);
    lttng_destroy_handle(h);
    return rc;
}

/* Find a session by name; fills `out`.  0 found, 1 not found, -1 error. */
static int find_session(const char *name, struct lttng_session *out)
{
    struct lttng_session *list = NULL;
    int n = lttng_list_sessions(&list), rc = 1;

    if (n < 0) {
        lttng_fail("cannot list the LTTng sessions", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(list[i].name, name) == 0) {
            *out = list[i];
            rc = 0;
            break;
        }
    }
    free(list);
    return rc;
}

/* The local directory a snapshot session writes to by default. */
static int snapshot_default_dir(const char *session, char *out, size_t n)
{
    struct lttng_snapshot_output_list *list = NULL;
    struct lttng_snapshot_output *o;
    int ret = lttng_snapshot_list_output(session, &list), rc = -1;

    if (ret < 0) {
        lttng_fail("cannot list the snapshot outputs", ret);
        return -1;
    }
    o = lttng_snapshot_output_list_get_next(list);
    if (o != NULL) {
        const char *url = lttng_snapshot_output_get_ctrl_url(o);
        /* liblttng-ctl 2.13 gives a plain path; older ones "file://PATH". */
        if (url != NULL && strncmp(url, "file://", 7) == 0)
            url += 7;
        if (url != NULL && url[0] == '/') {
            snprintf(out, n, "%s", url);
            rc = 0;
        }
    }
    lttng_snapshot_output_list_destroy(list);
    if (rc != 0)
        sertrace_cli_err("session %s has no local snapshot output: use -o DIR", session);
    return rc;
}

/* Names of the entries of `dir`, as one '\n'-separated string with a
 * leading and trailing '\n' (so "\nNAME\n" can be searched).  NULL if
 * the directory cannot be read. */
static char *list_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t len = 1, cap = 256;
    char *s;

    if (d == NULL)
        return NULL;
    s = malloc(cap);
    if (s == NULL)
        goto end;
    s[0] = '\n';
    s[1] = '\0';
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (len + l + 2 > cap) {
            char *g;
            while (len + l + 2 > cap)
                cap *= 2;
            g = realloc(s, cap);
            if (g == NULL) {
                free(s);
                s = NULL;
                goto end;
            }
            s = g;
        }
        memcpy(s + len, e->d_name, l);
        len += l;
        s[len++] = '\n';
        s[len] = '\0';
    }
end:
    closedir(d);
    return s;
}

/* Record a snapshot of `session` into `dir` (NULL: the session's own
 * output) and put the new snapshot directory's path in `where`. */
static int take_snapshot(const char *session, const char *dir, char *where, size_t n)
{
    struct lttng_snapshot_output *out = NULL;
    char target[PATH_MAX];
    char *before = NULL, *after = NULL;
    int ret, rc = -1;

    if (dir != NULL) {
        out = lttng_snapshot_output_create();
        if (out == NULL || lttng_snapshot_output_set_local_path(dir, out) != 0) {
            sertrace_cli_err("cannot use %s as a snapshot output", dir);
            goto end;
        }
        snprintf(target, sizeof(target), "%s", dir);
    } else if (snapshot_default_dir(session, target, sizeof(target)) != 0) {
        goto end;
    }
    before = list_dir(target);
    ret = lttng_snapshot_record(session, out, 1);
    if (ret < 0) {
        lttng_fail("cannot record the snapshot", ret);
        goto end;
    }
    after = list_dir(target);
    snprintf(where, n, "%s", target);
    if (after != NULL) {
        /* The snapshot is the one entry that was not there before. */
        char *line = after + 1;
        while (*line) {
            char *nl = strchr(line, '\n');
            char key[NAME_MAX + 3];
            *nl = '\0';
            snprintf(key, sizeof(key), "\n%s\n", line);
            if (before == NULL || strstr(before, key) == NULL) {
                int w = snprintf(where, n, "%s/%s", target, line);
                if (w < 0 || (size_t)w >= n)
                    snprintf(where, n, "%s", target);
                break;
            }
            line = nl + 1;
        }
    }
    rc = 0;
end:
    free(before);
    free(after);
    lttng_snapshot_output_destroy(out);
    return rc;
}

/* Report where the trace is.  Returns 1 when traces were found under
 * `dir`, 0 when not (the caller says so, after cleaning up). */
static int report_trace(const char *dir, const char *what)
{
    if (sertrace_cli_find_traces(dir, NULL) <= 0)
        return 0;
    fprintf(stderr, "sertrace: %s written to %s\n", what, dir);
    fprintf(stderr, "sertrace: view it with `sertrace report %s`\n", dir);
    return 1;
}

static int rmdir_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type == FTW_DP)
        (void)rmdir(path); /* fails, harmlessly, on a non-empty directory */
    return 0;
}

/* A session that recorded nothing still leaves directories behind (the
 * session daemon makes DIR/ust/... when the session starts): remove the
 * empty directories of the subtrees LTTng writes (ust/, kernel/,
 * snapshot-N-DATE-K/) below `dir`.  Only rmdir(): a file is never
 * removed, nor a directory holding one, nor anything else under `dir`. */
static void prune_empty_lttng_dirs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        if (strcmp(e->d_name, "ust") != 0 && strcmp(e->d_name, "kernel") != 0 &&
            strncmp(e->d_name, "snapshot-", 9) != 0)
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
            lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        (void)nftw(path, rmdir_entry, 32, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

/* No trace under `dir`: clean up and say so truthfully.  `remove_dir`:
 * `dir` itself goes too -- all of it when sertrace created it in this
 * process (`record`), else only if it is empty once LTTng's empty
 * directories are gone (`stop`: `start` wanted it empty or missing, so an
 * empty DIR holds nothing of anyone's).  A pre-existing directory given
 * to `record` is left as it was given: empty. */
static void report_no_trace(struct session_state *st, const char *dir, bool remove_dir)
{
    const char *removed = NULL;

    if (st->created_dir && strcmp(dir, st->outdir) == 0) {
        forget_outdir(st);
        removed = "";
    } else {
        prune_empty_lttng_dirs(dir);
        if (remove_dir && rmdir(dir) == 0)
            removed = "the empty directory ";
    }
    if (removed != NULL)
        sertrace_cli_err("no sertrace events: did the program import sertrace / link "
                         "libsertrace? (no trace was written; removed %s%s)",
                         removed, dir);
    else
        sertrace_cli_err("no sertrace events: did the program import sertrace / link "
                         "libsertrace? (no trace was written under %s)",
                         dir);
}

static void report_losses(const char *session, const struct session_state *st)
{
    uint64_t events = 0, packets = 0;

    if (channel_losses(session, &events, &packets) != 0) {
        sertrace_cli_err("could not read the discarded-event count of session %s", session);
        return;
    }
    fprintf(stderr, "sertrace: %llu events discarded, %llu packets lost\n",
            (unsigned long long)events, (unsigned long long)packets);
    if (events > 0 || packets > 0) {
        char h[32];
        if (st != NULL && st->subbuf_size > 0)
            fprintf(stderr,
                    "sertrace: the buffers (%s per CPU) overflowed: the trees of the "
                    "affected dumps are incomplete; record again with a larger "
                    "--buffer-size\n",
                    sertrace_cli_human_size(st->subbuf_size * st->num_subbuf, h));
        else
            fprintf(stderr, "sertrace: the buffers overflowed: the trees of the affected "
                            "dumps are incomplete; use a larger --buffer-size\n");
    }
}

/* Start tracing; -1 (printed) on failure or when a signal arrived during
 * the setup.  The common middle of `record` and `start`. */
static int start_session(const struct session_state *st)
{
    int ret = lttng_start_tracing(st->name);

    if (ret < 0) {
        lttng_fail("cannot start tracing", ret);
        return -1;
    }
    return interrupted() ? -1 : 0;
}

/* The common end of `record` and `stop`: stop tracing (which waits until
 * the consumer daemon has the data), print the discarded counts (read
 * before destroy: per-UID buffers keep them until then), write a last
 * snapshot for a snapshot session, destroy the session and wait for it.
 * 0, or -1 when the destroy failed. */
static int finish_session(struct session_state *st, bool snapshot)
{
    int ret = lttng_stop_tracing(st->name);

    if (ret < 0 && ret != -LTTNG_ERR_TRACE_ALREADY_STOPPED)
        lttng_fail("cannot stop tracing", ret);
    report_losses(st->name, st);
    if (snapshot) {
        char where[PATH_MAX];
        if (take_snapshot(st->name, NULL, where, sizeof(where)) == 0)
            fprintf(stderr, "sertrace: last snapshot written to %s\n", where);
    }
    return destroy_session(st);
}

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

/* record's default scope (CMD and its descendants): a fresh random token,
 * the filter that keeps only the events whose `scope` field holds it, and
 * the $SERTRACE_SCOPE value CMD inherits (and passes on to every process it
 * starts, unless one clears its environment).  A record run inside another
 * record's CMD appends its token to the outer one's, so both record it. */
static void make_scope(struct session_state *st)
{
    const char *outer = getenv(SERTRACE_SCOPE_ENV);
    uint64_t r = 0;
    char token[17];
    size_t n = outer ? strlen(outer) : 0;

    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40);
    }
    snprintf(token, sizeof(token), "%016llx", (unsigned long long)r);
    snprintf(st->filter, sizeof(st->filter), "%s == \"*:%s:*\"", SERTRACE_FIELD_SCOPE, token);
    if (n >= 2 && outer[0] == ':' && outer[n - 1] == ':' && n + sizeof(token) <= SERTRACE_SCOPE_MAX)
        snprintf(st->scope_env, sizeof(st->scope_env), "%s%s:", outer, token);
    else
        snprintf(st->scope_env, sizeof(st->scope_env), ":%s:", token);
}

/* Resolve CMD like execvp would, to fail before creating anything. */
static int command_exists(const char *cmd)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];

    if (strchr(cmd, '/') != NULL)
        return access(cmd, X_OK) == 0;
    if (path == NULL)
        path = "/bin:/usr/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        struct stat sb;
        snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, len ? path : ".", cmd);
        if (len == 0)
            snprintf(buf, sizeof(buf), "./%s", cmd);
        if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0)
            return 1;
        if (end == NULL)
            break;
        path = end + 1;
    }
    return 0;
}

/* --cmd-only, once CMD's pid is known (CMD waits at the gate): the VPID
 * tracker (the session daemon gives the session's buffers to that process
 * only) and `sertrace:*` with the filter `pid == CMD's pid` -- the
 * tracker alone let CMD's forked children in, since a child forked
 * without exec writes into the buffers it inherited (measured: 8 dumps of
 * a forked child in a --cmd-only trace); the payload pid is the emitter's
 * own (schema v2). */
static int cmd_only_events(const char *session,
                           const struct lttng_process_attr_tracker_handle *tracker, pid_t pid)
{
    struct session_state st;
    char filter[64];

    if (lttng_process_attr_virtual_process_id_tracker_handle_add_pid(tracker, pid) !=
        LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_OK) {
        sertrace_cli_err("cannot add pid %ld to the session's process tracker", (long)pid);
        return -1;
    }
    memset(&st, 0, sizeof(st));
    snprintf(st.name, sizeof(st.name), "%s", session);
    snprintf(filter, sizeof(filter), "%s == %ld", SERTRACE_FIELD_PID, (long)pid);
    return enable_events(&st, filter);
}

/* Fork and exec CMD with SERTRACE_SESSION=`session` in its environment
 * (so CMD can name its own session: `lttng list "$SERTRACE_SESSION"`,
 * `sertrace snapshot "$SERTRACE_SESSION"`; set before the fork, so the
 * child does not allocate).  Returns the pid, or -1 with *exec_errno set
 * when the exec failed (the child has then been reaped).  With a `tracker`,
 * the child waits until its pid is in the VPID tracker before exec, so
 * the process is tracked from its first event. */
static pid_t spawn(char **cmd, const char *session, const char *scope_env, int *exec_errno,
                   const struct lttng_process_attr_tracker_handle *tracker)
{
    int fds[2], gate[2];
    pid_t pid;
    ssize_t got;
    int err = 0;
    char go = 0;
    sigset_t all, old;

    *exec_errno = 0;
    if (setenv("SERTRACE_SESSION", session, 1) != 0 ||
        (scope_env[0] != '\0' && setenv(SERTRACE_SCOPE_ENV, scope_env, 1) != 0)) {
        *exec_errno = errno;
        return -1;
    }
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        return -1;
    }
    if (pipe2(gate, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    /* Block signals so the handler never sees a half-set child_pid. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        close(gate[1]);
        default_signals();
        sigprocmask(SIG_SETMASK, &old, NULL);
        /* Wait for the parent's go (EOF without a byte: give up). */
        while ((got = read(gate[0], &go, 1)) < 0 && errno == EINTR)
            ;
        if (got != 1)
            _exit(127);
        execvp(cmd[0], cmd);
        err = errno;
        if (write(fds[1], &err, sizeof(err)) < 0)
            _exit(127);
        _exit(127);
    }
    if (pid > 0)
        child_pid = pid;
    else
        *exec_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(fds[1]);
    close(gate[0]);
    if (pid < 0) {
        close(fds[0]);
        close(gate[1]);
        return -1;
    }
    if (tracker != NULL && cmd_only_events(session, tracker, pid) != 0) {
        go = 0;
        close(gate[1]); /* EOF: the child exits 127 without running CMD */
        close(fds[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        child_pid = 0;
        *exec_errno = EPERM;
        return -1;
    }
    go = 1;
    if (write(gate[1], &go, 1) != 1)
        go = 0;
    close(gate[1]);
    do
        got = read(fds[0], &err, sizeof(err));
    while (got < 0 && errno == EINTR);
    close(fds[0]);
    if (got == (ssize_t)sizeof(err)) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        child_pid = 0;
        *exec_errno = err;
        return -1;
    }
    return pid;
}

static int wait_child(pid_t pid)
{
    int status = 0;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            sertrace_cli_err("waitpid: %s", strerror(errno));
            return SERTRACE_CLI_ERROR;
        }
    }
    child_pid = 0;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return SERTRACE_CLI_ERROR;
}

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
