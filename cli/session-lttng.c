/* session-lttng.c -- the liblttng-ctl side of `sertrace record | start |
 * stop | snapshot`: the session daemon, and the session itself.
 *
 * Every session sertrace makes has the same shape (session.c's opening
 * comment says why): per-UID buffers, one channel "sertrace" enabling
 * `sertrace:*` with the vtid and vpid contexts, 8 sub-buffers of 1 MiB per
 * CPU by default.  Here: making sure a session daemon runs, the buffer
 * geometry, creating, starting, snapshotting, stopping and destroying the
 * session, and reading its channel's losses.  Once a session exists every
 * failure path goes through destroy_session().  (A move out of session.c:
 * see session.h.)
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

/* ---- session daemon --------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && pending_signal == 0)
        ;
}

/* Make sure a session daemon answers: start `lttng-sessiond --daemonize`
 * (or $LTTNG_SESSIOND_PATH) when none does, and wait for it. */
int ensure_sessiond(void)
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
int buffer_geometry(uint64_t total, struct session_state *st)
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

int destroy_session(struct session_state *st)
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
int enable_events(const struct session_state *st, const char *filter)
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
int create_session(const struct session_opts *o, struct session_state *st)
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
int find_session(const char *name, struct lttng_session *out)
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
int snapshot_default_dir(const char *session, char *out, size_t n)
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
int take_snapshot(const char *session, const char *dir, char *where, size_t n)
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
int start_session(const struct session_state *st)
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
int finish_session(struct session_state *st, bool snapshot)
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
