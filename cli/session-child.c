/* session-child.c -- the traced command of `sertrace record`, and the
 * signals around it.
 *
 * Interrupts (SIGINT/SIGTERM/SIGHUP) are caught for the whole life of the
 * session: before the child exists they abort the setup cleanly; while it
 * runs they are forwarded to it (unless they came from the terminal, which
 * already delivered them to the child's process group); after it exited
 * they are ignored until cleanup is done.  The child gets record's scope
 * ($SERTRACE_SCOPE, a fresh token) or, with --cmd-only, its PID in the
 * session's process tracker; an exec failure is reported back through a
 * pipe so that "command not found" is told apart from the command's own
 * status.  (A move out of session.c: see session.h.)
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

/* How long (ms) a process started under record waits to register with the
 * session daemon before it runs on untraced; see spawn(). */
#define RECORD_REGISTER_TIMEOUT_MS "30000"

/* ---- signals ---------------------------------------------------------- */

volatile sig_atomic_t pending_signal;
volatile pid_t child_pid;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    pending_signal = sig;
    /* Terminal-generated signals (SI_KERNEL) already reached the child,
     * which shares our process group: forwarding would deliver twice. */
    if (child_pid > 0 && (info == NULL || info->si_code != SI_KERNEL))
        kill(child_pid, sig);
}

void catch_signals(void)
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

void default_signals(void)
{
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_DFL);
}

bool interrupted(void)
{
    if (pending_signal == 0)
        return false;
    sertrace_cli_err("interrupted by signal %d: cleaning up", (int)pending_signal);
    return true;
}

/* record's default scope (CMD and its descendants): a fresh random token,
 * the filter that keeps only the events whose `scope` field holds it, and
 * the $SERTRACE_SCOPE value CMD inherits (and passes on to every process it
 * starts, unless one clears its environment).  A record run inside another
 * record's CMD appends its token to the outer one's, so both record it. */
void make_scope(struct session_state *st)
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
int command_exists(const char *cmd)
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
pid_t spawn(char **cmd, const char *session, const char *scope_env, int *exec_errno,
            const struct lttng_process_attr_tracker_handle *tracker)
{
    int fds[2], gate[2];
    pid_t pid;
    ssize_t got;
    int err = 0;
    char go = 0;
    sigset_t all, old;

    *exec_errno = 0;
    /* A process registers with the session daemon at startup and waits up
     * to LTTNG_UST_REGISTER_TIMEOUT ms (default 3000) before running on
     * untraced.  On a loaded machine a worker that CMD starts (a joblib or
     * multiprocessing child) can take longer than that to register, and its
     * dumps would be missing from the trace: under record, wait longer
     * (only a user's own setting wins). */
    if (getenv("LTTNG_UST_REGISTER_TIMEOUT") == NULL &&
        setenv("LTTNG_UST_REGISTER_TIMEOUT", RECORD_REGISTER_TIMEOUT_MS, 0) != 0) {
        *exec_errno = errno;
        return -1;
    }
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

int wait_child(pid_t pid)
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
