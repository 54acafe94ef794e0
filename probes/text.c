/* probes/text.c -- the live text probe: DISPATCH_TRACE prints each dump's tree.
 *
 * For every dump begun while DISPATCH_TRACE is on, the runtime calls the
 * sertrace_text_* functions below.  They append the lines (dill's line
 * grammar, format.h) to the dump's own buffer and write the buffer out
 * as one chunk (one writev()) when it passes 256 KiB (64 KiB on a terminal
 * or pipe; all but the newest line, which waits for the next chunk, so the
 * footer never goes out alone) and at dump end.  One process-wide mutex,
 * taken once per chunk, serialises the writes, and a chunk only ever holds
 * whole lines of one dump, so concurrent threads never interleave inside a
 * line; every chunk after a dump's first starts with
 * "# continued dump N pid P tid T", so a reader attributes every line to
 * its dump even when other threads' (or processes') chunks come between.
 * A dump begun under another pid (inherited through fork) is never
 * written.  There is no system
 * call, no lock and no allocation per line (the buffer keeps its capacity
 * across dumps).  Enter and exit lines, nearly all of a tree, are built
 * by a fast path below (indentation copied in fixed-size chunks, the
 * "TAG: <repr" start rendered by the formatter once per type and tag of
 * the dump); every other line goes through the formatter.  Together this
 * keeps DISPATCH_TRACE to a file within 3x of plain serialization even
 * for a 137-level-deep tree (probes/README.md has the numbers).
 *
 * The repr of a node comes only from its interned type name and address
 * (never user code).  Flags go inline, in the words the report uses (one
 * builder in format/, sertrace_fmt_exit_flags and
 * sertrace_fmt_unserializable): "!! OVERSIZED (≥ 1.0 MiB)" on exit lines
 * at or above the threshold, a flag line "!! UNSERIALIZABLE TAG type:
 * message at path" naming the node that failed with its enter line's type,
 * "!! UNSERIALIZABLE" on that node's exit line, "!! FAILED inside" (size
 * "[≥ …]") on nodes a failed dump left open, "!! MISUSE ..." for a
 * mismatched enter/exit (then "?? exit lost" on the nodes left open).
 *
 * Writing never fails or blocks the host: a write error (closed pipe, full
 * disk) disables the text output for the rest of the process with one
 * warning on stderr.  On a pipe or socket SIGPIPE is blocked around the
 * write and a SIGPIPE raised by it is consumed, so a closed reader cannot
 * kill the host either.  A stream (FIFO, pipe, terminal, socket) is never
 * written with a blocking call: a path is opened O_NONBLOCK (a FIFO with
 * no reader: one warning, off), a non-file stderr through a private
 * non-blocking open file description (/proc/self/fd/2; fd 2's own flags
 * are never touched), a socket with send(MSG_DONTWAIT).  When the output
 * is full the probe waits for room (poll) as long as the reader takes
 * something at least every SERTRACE_TEXT_STALL_MS, so a reader that keeps
 * reading (cat > file, a terminal) gets everything; a reader that took
 * nothing for that long has stalled: the rest of that chunk and every
 * chunk until the output has room again are dropped at once, counted, and
 * announced by one "# sertrace: N bytes of trace text dropped" line in
 * front of the next chunk that goes out.  Regular files are written
 * as before (blocking, O_APPEND: they do not block on a reader).
 */
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sertrace/schema.h"

static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER;
/* Guarded by text_lock (read without it only through text_on). */
static struct sertrace_text_config text_config = {SERTRACE_TEXT_MODE_OFF, false, false,
                                                  SERTRACE_TEXT_DEFAULT_OVERSIZE,
                                                  SERTRACE_TEXT_FLUSH_BYTES};
static int text_fd = -1;
static bool text_fd_owned;
/* How text_fd is written: a regular file with blocking writev() (files do
 * not block on a reader); a stream (pipe, FIFO, terminal, character
 * device: our own O_NONBLOCK description) with non-blocking writev(); a
 * socket with sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL). */
enum text_out { TEXT_OUT_FILE, TEXT_OUT_STREAM, TEXT_OUT_SOCKET };
static enum text_out text_out;
static bool text_sigpipe; /* a pipe or FIFO: guard its writes against SIGPIPE */
/* Stream outputs only, under text_lock: bytes of trace text a stalled
 * reader could not take (announced in front of the next chunk that goes
 * out), and whether the last byte that went out ended a line. */
static unsigned long long text_dropped;
static bool text_mid_line;
/* Stream outputs only, under text_lock: the reader took nothing for
 * SERTRACE_TEXT_STALL_MS while we waited; until the output is writable
 * again, chunks are dropped at once (no more waiting). */
static bool text_stalled;
static atomic_bool text_on;
/* This process's pid, refreshed in a forked child: a dump begun under
 * another pid (inherited through fork) is never written. */
static long text_pid;

/* ---- configuration ----------------------------------------------------- */

static char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Compare the trimmed value [s, s+n) with a lower-case word. */
static bool word_is(const char *s, size_t n, const char *word)
{
    size_t wn = strlen(word);
    if (n != wn)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(s[i]) != word[i])
            return false;
    return true;
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && ((*s)[0] == ' ' || (*s)[0] == '\t' || (*s)[0] == '\n')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\n'))
        (*n)--;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* "name.ext": a non-empty stem, a dot, 1-8 letters/digits. */
static bool has_extension(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && is_alnum(s[i - 1]))
        i--;
    size_t ext = n - i;
    return ext >= 1 && ext <= 8 && i >= 2 && s[i - 1] == '.';
}

/* A plain number ("2", "-1", "1.5", "+3", ".5"): never a file name, even
 * though "1.5" looks like a stem and an extension. */
static bool is_number(const char *s, size_t n)
{
    size_t i = 0, digits = 0, dots = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    for (; i < n; i++) {
        if (s[i] >= '0' && s[i] <= '9')
            digits++;
        else if (s[i] == '.' && dots++ == 0)
            continue;
        else
            return false;
    }
    return digits > 0;
}

static bool value_is_off(const char *s, size_t n)
{
    return n == 0 || word_is(s, n, "0") || word_is(s, n, "false") || word_is(s, n, "off") ||
           word_is(s, n, "no");
}

static bool value_is_on(const char *s, size_t n)
{
    return word_is(s, n, "1") || word_is(s, n, "true") || word_is(s, n, "on") ||
           word_is(s, n, "yes");
}

enum sertrace_text_mode sertrace_text_parse_mode(const char *value)
{
    const char *s = value;
    size_t n;

    if (value == NULL)
        return SERTRACE_TEXT_MODE_OFF;
    n = strlen(value);
    trim(&s, &n);
    if (value_is_off(s, n))
        return SERTRACE_TEXT_MODE_OFF;
    if (value_is_on(s, n) || word_is(s, n, "stderr"))
        return SERTRACE_TEXT_MODE_STDERR;
    if (memchr(s, '/', n) != NULL || (has_extension(s, n) && !is_number(s, n)))
        return SERTRACE_TEXT_MODE_PATH;
    return SERTRACE_TEXT_MODE_INVALID;
}

/* writev() all of `iov` (advanced in place on short writes); 0 or an errno. */
static int writev_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Non-blocking: write as much of `iov` as the output takes at once.
 * Sets *done to the bytes written; returns 0 (all written), EAGAIN (the
 * output is full: the rest was not written) or another errno.  `iov` is
 * not modified. */
static int write_nonblocking(int fd, enum text_out out, const struct iovec *iov, int cnt,
                             size_t *done)
{
    struct iovec v[4];
    int i = 0;

    assert(cnt <= 4);
    memcpy(v, iov, (size_t)cnt * sizeof *v);
    *done = 0;
    while (i < cnt) {
        ssize_t w;
        if (out == TEXT_OUT_SOCKET) {
            struct msghdr m = {0};
            m.msg_iov = v + i;
            m.msg_iovlen = (size_t)(cnt - i);
            w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            w = writev(fd, v + i, cnt - i);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EWOULDBLOCK ? EAGAIN : errno;
        }
        if (w == 0)
            return EAGAIN;
        *done += (size_t)w;
        while (i < cnt && (size_t)w >= v[i].iov_len) {
            w -= (ssize_t)v[i].iov_len;
            i++;
        }
        if (i < cnt) {
            v[i].iov_base = (char *)v[i].iov_base + w;
            v[i].iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* SIGPIPE blocked around a write to a pipe, and a SIGPIPE the write raised
 * consumed, so a reader that went away cannot kill the host: the write
 * just fails with EPIPE. */
struct sigpipe_guard {
    sigset_t block, old;
    bool was_pending;
};

static void sigpipe_hold(struct sigpipe_guard *g)
{
    sigset_t pending;

    sigemptyset(&g->block);
    sigaddset(&g->block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &g->block, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_release(struct sigpipe_guard *g, int err)
{
    if (err == EPIPE && !g->was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&g->block, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* The blocking write path (regular files, and the last-resort warning):
 * writev() all of `iov`, returning 0 or an errno; with `guard`, SIGPIPE
 * handled as above. */
static int write_guarded(int fd, struct iovec *iov, int cnt, bool guard)
{
    struct sigpipe_guard g;
    int err;

    if (!guard)
        return writev_all(fd, iov, cnt);
    sigpipe_hold(&g);
    err = writev_all(fd, iov, cnt);
    sigpipe_release(&g, err);
    return err;
}

/* A private non-blocking open file description of what `fd` (a pipe,
 * FIFO or terminal, `st` its fstat) refers to, through /proc/self/fd:
 * setting O_NONBLOCK on `fd` itself would change it for every process
 * sharing that description (the host's own writes to stderr).  Returns
 * the new fd or -errno (ENXIO: a pipe or FIFO with no reader). */
static int open_private_nonblocking(int fd, const struct stat *st)
{
    char path[40];
    struct stat nst;
    int nfd;

    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (nfd < 0)
        return -errno;
    if (fstat(nfd, &nst) != 0 || nst.st_dev != st->st_dev || nst.st_ino != st->st_ino ||
        nst.st_rdev != st->st_rdev) { /* not the same object (e.g. a pty master) */
        close(nfd);
        return -ENODEV;
    }
    return nfd;
}

/* One warning line to `fd` (stderr mostly), never blocking on a stalled
 * reader: a regular file is written as is, a socket with MSG_DONTWAIT,
 * anything else through a private non-blocking description; when that
 * cannot be opened (no /proc), only if poll() says a write goes in now (a
 * line shorter than PIPE_BUF does).  A line the output cannot take at once
 * is lost. */
static void write_warning(int fd, const char *line, size_t n)
{
    struct iovec iov = {(void *)line, n};
    struct stat st;
    size_t done;
    int own;

    if (fd < 0 || fstat(fd, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        write_guarded(fd, &iov, 1, false);
    } else if (S_ISSOCK(st.st_mode)) {
        write_nonblocking(fd, TEXT_OUT_SOCKET, &iov, 1, &done);
    } else if ((own = open_private_nonblocking(fd, &st)) >= 0) {
        struct sigpipe_guard g;
        sigpipe_hold(&g);
        sigpipe_release(&g, write_nonblocking(own, TEXT_OUT_STREAM, &iov, 1, &done));
        close(own);
    } else if (own != -ENXIO) { /* ENXIO: no reader, nobody to tell */
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && n < PIPE_BUF)
            write_guarded(fd, &iov, 1, true);
    }
}

static int warn(int fd, const char *fmt, const char *a, const char *b)
{
    char line[512];
    int n = snprintf(line, sizeof line, fmt, a, b);
    if (n < 0)
        return 1;
    if ((size_t)n >= sizeof line) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    write_warning(fd, line, (size_t)n);
    return 1;
}

static void close_current_locked(void)
{
    if (text_fd_owned && text_fd >= 0)
        close(text_fd);
    text_fd = -1;
    text_fd_owned = false;
    text_out = TEXT_OUT_FILE;
    text_sigpipe = false;
    text_dropped = 0;
    text_mid_line = false;
    text_stalled = false;
}

/* fork() while another thread holds text_lock would leave the child's
 * copy locked forever: hold it across fork so both sides start unlocked. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&text_lock);
}

static void atfork_release(void)
{
    pthread_mutex_unlock(&text_lock);
}

static void atfork_child(void)
{
    text_pid = (long)getpid();
    text_dropped = 0;     /* the parent's drops: the parent announces them */
    text_stalled = false; /* the child waits for the reader once itself */
    pthread_mutex_unlock(&text_lock);
}

static void register_atfork(void)
{
    text_pid = (long)getpid();
    pthread_atfork(atfork_prepare, atfork_release, atfork_child);
}

int sertrace_text_configure(const struct sertrace_text_settings *s, int warn_fd)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    struct sertrace_text_config c = {SERTRACE_TEXT_MODE_OFF, false, false,
                                     SERTRACE_TEXT_DEFAULT_OVERSIZE, SERTRACE_TEXT_FLUSH_BYTES};
    char *path = NULL;
    int warnings = 0;
    int fd = -1;
    bool owned = false;
    enum text_out out = TEXT_OUT_FILE;
    bool regular = false, fifo = false;
    struct stat st;

    pthread_once(&atfork_once, register_atfork);
    c.mode = sertrace_text_parse_mode(s->dispatch_trace);
    if (c.mode == SERTRACE_TEXT_MODE_INVALID) {
        warnings += warn(warn_fd,
                         "sertrace: warning: DISPATCH_TRACE=%s%s is not understood (use 1, "
                         "stderr, 0 or a file path); live tree off\n",
                         s->dispatch_trace, "");
        c.mode = SERTRACE_TEXT_MODE_OFF;
    } else if (c.mode == SERTRACE_TEXT_MODE_STDERR) {
        /* A regular file is written through fd 2 itself (shared offset,
         * O_APPEND or not, as the host opened it); a socket with
         * MSG_DONTWAIT; a pipe or terminal through our own non-blocking
         * description of it (fd 2's flags are the host's). */
        fd = STDERR_FILENO;
        if (fstat(fd, &st) != 0) {
            /* no stderr: the first write fails, one warning (nowhere), off */
        } else if (S_ISREG(st.st_mode)) {
            regular = true;
        } else if (S_ISSOCK(st.st_mode)) {
            out = TEXT_OUT_SOCKET;
        } else {
            int own = open_private_nonblocking(fd, &st);
            fd = own >= 0 ? own : -1;
            owned = own >= 0;
            out = TEXT_OUT_STREAM;
            fifo = S_ISFIFO(st.st_mode);
            if (own == -ENXIO) {
                warnings += warn(warn_fd,
                                 "sertrace: warning: DISPATCH_TRACE=%s%s: stderr is a pipe with no "
                                 "reader; live tree off\n",
                                 s->dispatch_trace, "");
                c.mode = SERTRACE_TEXT_MODE_OFF;
            } else if (own < 0) {
                warnings += warn(warn_fd,
                                 "sertrace: warning: DISPATCH_TRACE=%s: cannot write stderr "
                                 "without blocking (opening /proc/self/fd/2: %s); live tree off\n",
                                 s->dispatch_trace, strerror(-own));
                c.mode = SERTRACE_TEXT_MODE_OFF;
            }
        }
    } else if (c.mode == SERTRACE_TEXT_MODE_PATH) {
        /* The value was classified trimmed: open it trimmed too.  O_NONBLOCK:
         * a FIFO with no reader fails (ENXIO) instead of blocking the
         * host's first dump forever; a regular file gets it cleared again
         * (files do not block; the write path stays the blocking one). */
        const char *v = s->dispatch_trace;
        size_t n = strlen(v);
        trim(&v, &n);
        path = strndup(v, n);
        fd = path == NULL
                 ? -1
                 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                        0644);
        if (fd < 0) {
            int err = path == NULL ? ENOMEM : errno;
            if (err == ENXIO && stat(path, &st) == 0 && S_ISFIFO(st.st_mode))
                warnings += warn(warn_fd,
                                 "sertrace: warning: DISPATCH_TRACE=%s%s: a FIFO with no reader "
                                 "(start the reader first); live tree off\n",
                                 s->dispatch_trace, "");
            else
                warnings += warn(warn_fd,
                                 "sertrace: warning: DISPATCH_TRACE=%s: cannot open for appending "
                                 "(%s); live tree off\n",
                                 s->dispatch_trace, strerror(err));
            c.mode = SERTRACE_TEXT_MODE_OFF;
        } else {
            int sr = fstat(fd, &st);
            owned = true;
            if (sr == 0 && S_ISREG(st.st_mode)) {
                int fl = fcntl(fd, F_GETFL);
                if (fl >= 0)
                    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
                regular = true;
            } else {
                out = TEXT_OUT_STREAM; /* FIFO, terminal, device: stays O_NONBLOCK */
                fifo = sr != 0 || S_ISFIFO(st.st_mode);
            }
        }
    }

    if (s->granularity != NULL && s->granularity[0] != '\0') {
        const char *g = s->granularity;
        size_t n = strlen(g);
        trim(&g, &n);
        if (word_is(g, n, "all") || word_is(g, n, "atoms"))
            c.atoms = true;
        else if (!word_is(g, n, "containers"))
            warnings += warn(warn_fd,
                             "sertrace: warning: SERTRACE_GRANULARITY=%s%s is not understood "
                             "(use containers or all); using containers\n",
                             s->granularity, "");
    }
    if (s->oversize != NULL && s->oversize[0] != '\0' &&
        sertrace_parse_size(s->oversize, &c.oversize) != 0) {
        c.oversize = SERTRACE_TEXT_DEFAULT_OVERSIZE;
        warnings += warn(warn_fd,
                         "sertrace: warning: SERTRACE_OVERSIZE=%s%s is not a size (e.g. 64K, "
                         "1.5MiB); using 1 MiB\n",
                         s->oversize, "");
    }
    if (s->exact != NULL) {
        const char *e = s->exact;
        size_t n = strlen(e);
        trim(&e, &n);
        if (value_is_on(e, n))
            c.exact = true;
        else if (!value_is_off(e, n))
            warnings += warn(warn_fd,
                             "sertrace: warning: SERTRACE_EXACT=%s%s is not understood (use 1 or "
                             "0); sizes stay human\n",
                             s->exact, "");
    }

    free(path);

    pthread_mutex_lock(&text_lock);
    close_current_locked();
    text_fd = fd;
    text_fd_owned = owned;
    text_out = out;
    text_sigpipe = fifo;
    if (fd >= 0 && !regular)
        c.flush_bytes = SERTRACE_TEXT_FLUSH_BYTES_STREAM;
    text_config = c;
    atomic_store(&text_on, c.mode != SERTRACE_TEXT_MODE_OFF);
    pthread_mutex_unlock(&text_lock);
    return warnings;
}

void sertrace_text_get_config(struct sertrace_text_config *out)
{
    pthread_mutex_lock(&text_lock);
    *out = text_config;
    pthread_mutex_unlock(&text_lock);
}

bool sertrace_text_enabled(void)
{
    return atomic_load_explicit(&text_on, memory_order_relaxed);
}

/* ---- writing ----------------------------------------------------------- */

/* Non-blocking write of `iov` to the stream output (SIGPIPE handled),
 * under text_lock; *done: the bytes that went out.  Keeps text_mid_line:
 * whether the last byte that went out ended a line. */
static int stream_put_locked(const struct iovec *iov, int cnt, size_t *done)
{
    struct sigpipe_guard g;
    size_t left;
    int err;

    if (!text_sigpipe) { /* a socket has MSG_NOSIGNAL; a terminal raises none */
        err = write_nonblocking(text_fd, text_out, iov, cnt, done);
    } else {
        sigpipe_hold(&g);
        err = write_nonblocking(text_fd, text_out, iov, cnt, done);
        sigpipe_release(&g, err);
    }
    left = *done;
    for (int i = 0; i < cnt && left > 0; i++) {
        if (left <= iov[i].iov_len) {
            text_mid_line = ((const char *)iov[i].iov_base)[left - 1] != '\n';
            break;
        }
        left -= iov[i].iov_len;
    }
    return err == EAGAIN ? 0 : err;
}

static long long monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Write all of `iov` to the stream output, under text_lock, waiting for
 * a reader that keeps reading: each time the output is full, poll() for
 * room; every byte it takes restarts the grace (SERTRACE_TEXT_STALL_MS),
 * so a reader that reads at all -- cat, a file behind a pipe, a terminal
 * -- gets everything, at its own pace, as from any pipe.  When it takes
 * nothing for the whole grace, it has stalled: text_stalled is set and
 * what is left is not written.  *done: the bytes written.  Returns 0
 * (written, or stalled) or the errno of a write error. */
static int stream_put_waiting_locked(const struct iovec *iov, int cnt, size_t *done)
{
    struct iovec v[4];
    size_t total = 0, part;
    long long deadline = 0;
    int err, i = 0;

    assert(cnt <= 4);
    memcpy(v, iov, (size_t)cnt * sizeof *v);
    *done = 0;
    for (int k = 0; k < cnt; k++)
        total += v[k].iov_len;
    for (;;) {
        err = stream_put_locked(v + i, cnt - i, &part);
        if (err != 0)
            return err;
        *done += part;
        if (*done == total)
            return 0;
        /* the first wait, or the reader took something: the grace
         * starts (again) now */
        if (deadline == 0 || part > 0)
            deadline = monotonic_ms() + SERTRACE_TEXT_STALL_MS;
        while (i < cnt && part >= v[i].iov_len) {
            part -= v[i].iov_len;
            i++;
        }
        v[i].iov_base = (char *)v[i].iov_base + part;
        v[i].iov_len -= part;
        for (;;) {
            struct pollfd pfd = {text_fd, POLLOUT, 0};
            long long left = deadline - monotonic_ms();
            int r;
            if (left <= 0) {
                text_stalled = true;
                return 0;
            }
            r = poll(&pfd, 1, (int)left);
            if (r > 0)
                break; /* room, or an error the next write reports */
            if (r < 0 && errno != EINTR)
                break;
        }
    }
}

/* Write one chunk (`body`: the continuation line and the dump's text) to
 * a stream output, under text_lock, never blocking on a reader that
 * stalled.  A reader that keeps reading is waited for
 * (stream_put_waiting_locked): nothing is dropped for it.  After a stall,
 * chunks are dropped at once (counted) until the output has room again;
 * then a newline (when the last write stopped mid-line) and the drop
 * notice go out first, in a write of their own (under PIPE_BUF: a pipe
 * takes it whole or not at all), and the chunk follows only if they went
 * out whole.  Returns 0, or the errno of a write error (EPIPE, ...). */
static int stream_write_locked(const struct iovec *body, int nbody)
{
    char notice[112];
    struct iovec pre[2];
    size_t prefix = 0, body_len = 0, done;
    int cnt = 0, err;

    if (text_stalled) {
        struct pollfd pfd = {text_fd, POLLOUT, 0};
        for (int i = 0; i < nbody; i++)
            body_len += body[i].iov_len;
        if (poll(&pfd, 1, 0) == 0) { /* still full: no waiting after a stall */
            text_dropped += body_len;
            return 0;
        }
        text_stalled = false; /* the reader is back */
        body_len = 0;
    }

    for (int i = 0; i < nbody; i++)
        body_len += body[i].iov_len;
    if (text_mid_line) {
        pre[cnt++] = (struct iovec){"\n", 1};
        prefix++;
    }
    if (text_dropped > 0) {
        int m = snprintf(notice, sizeof notice,
                         "# sertrace: %llu bytes of trace text dropped: the reader did not "
                         "keep up\n",
                         text_dropped);
        if (m > 0 && (size_t)m < sizeof notice) {
            pre[cnt++] = (struct iovec){notice, (size_t)m};
            prefix += (size_t)m;
        }
    }
    if (cnt > 0) {
        /* Not while the output is still full (poll: a pipe with no free
         * page, a socket over half its buffer), or every chunk of a stall
         * would leave a notice in the last page's spare bytes. */
        struct pollfd pfd = {text_fd, POLLOUT, 0};
        if (poll(&pfd, 1, 0) == 0) { /* not writable (an error is: it fails below) */
            text_dropped += body_len;
            return 0;
        }
        err = stream_put_locked(pre, cnt, &done);
        if (err != 0)
            return err;
        if (done < prefix) { /* still full: this chunk is dropped too */
            text_dropped += body_len;
            return 0;
        }
        text_dropped = 0;
    }
    err = stream_put_waiting_locked(body, nbody, &done);
    if (err != 0)
        return err;
    text_dropped += body_len - done;
    return 0;
}

/* Write out the first `n` bytes of the dump's buffer as one chunk (one
 * writev() under text_lock), preceded by "# continued dump N pid P tid T"
 * when it is not the dump's first chunk, so every chunk names its dump
 * even when other threads' chunks come between.  The rest of the buffer
 * (whole lines) moves to its start.  A dump begun under another pid (the
 * parent of a fork) is dropped, never written. */
static void text_write(struct sertrace_text_dump *t, size_t n)
{
    char mark[96];
    struct iovec iov[2];
    int cnt = 0, err = 0;
    bool report = false;

    assert(n <= t->buf.len);
    if (n == 0)
        return;
    if (t->chunks > 0) {
        int m = snprintf(mark, sizeof mark, "# continued dump %llu pid %ld tid %ld\n",
                         (unsigned long long)t->dump_id, t->pid, t->tid);
        if (m > 0 && (size_t)m < sizeof mark)
            iov[cnt++] = (struct iovec){mark, (size_t)m};
    }
    iov[cnt++] = (struct iovec){t->buf.data, n};
    pthread_mutex_lock(&text_lock);
    if (t->pid == text_pid && atomic_load(&text_on) && text_fd >= 0) {
        err = text_out == TEXT_OUT_FILE ? write_guarded(text_fd, iov, cnt, false)
                                        : stream_write_locked(iov, cnt);
        if (err != 0) {
            atomic_store(&text_on, false);
            report = true;
        }
    }
    pthread_mutex_unlock(&text_lock);
    t->chunks++;
    if (n < t->buf.len)
        memmove(t->buf.data, t->buf.data + n, t->buf.len - n + 1); /* with the NUL */
    t->buf.len -= n;
    if (t->buf.len == 0 && t->buf.data != NULL)
        t->buf.data[0] = '\0';
    if (report) {
        char line[256];
        snprintf(line, sizeof line,
                 "sertrace: warning: DISPATCH_TRACE: writing the live tree failed (%s); live "
                 "tree off\n",
                 strerror(err));
        write_warning(STDERR_FILENO, line, strlen(line));
    }
}

void sertrace_text_flush(struct sertrace_text_dump *t)
{
    text_write(t, t->buf.len);
}

void sertrace_text_drop(struct sertrace_text_dump *t)
{
    sertrace_buf_clear(&t->buf);
}

/* After a line that began at `line_start`: once the buffer passes the
 * flush size, write everything before that line (liveness: a watcher sees
 * all but the newest line) and keep the line, so the dump's last chunk
 * always carries at least one line with the footer. */
static inline void maybe_flush(struct sertrace_text_dump *t, size_t line_start)
{
    if (t->buf.len >= t->flush_bytes && line_start > 0)
        text_write(t, line_start);
}

void sertrace_text_free(struct sertrace_text_dump *t)
{
    free(t->stack);
    t->stack = NULL;
    t->stack_cap = 0;
    free(t->names);
    t->names = NULL;
    t->names_cap = 0;
    sertrace_buf_free(&t->name_text);
    sertrace_buf_free(&t->label);
    sertrace_buf_free(&t->flags);
    sertrace_buf_free(&t->buf);
    sertrace_lines_free(&t->lines);
}

/* ---- lines ------------------------------------------------------------ *
 *
 * Enter and exit lines (all but a handful of the lines of a dump) go
 * through the formatter's fast path (format/lines.h: cached per-(type,
 * tag) heads, indentation copied in fixed chunks), the same one the tree
 * sink uses; tests/runtime checks byte for byte that every tag, depth,
 * name, address, length and size gives the line sertrace_fmt_enter/exit
 * would give.  The dump's buffer is grown once to the flush size plus one
 * line, so a steady dump never reallocates. */

void sertrace_text_begin(struct sertrace_text_dump *t, uint64_t dump_id, const char *serializer,
                         int protocol)
{
    struct sertrace_text_config c;

    sertrace_text_get_config(&c);
    t->oversize = c.oversize;
    t->exact = c.exact;
    t->flush_bytes = c.flush_bytes;
    t->depth = 0;
    t->misuse_open = false;
    t->lower = false;
    if (++t->names_gen == 0) { /* wrapped: forget every entry */
        if (t->names != NULL)
            memset(t->names, 0, t->names_cap * sizeof *t->names);
        t->names_gen = 1;
    }
    sertrace_buf_clear(&t->name_text);
    t->dump_id = dump_id;
    t->pid = (long)getpid();
    t->tid = (long)syscall(SYS_gettid);
    t->chunks = 0;
    sertrace_lines_new_dump(&t->lines);
    sertrace_buf_clear(&t->buf);
    (void)sertrace_buf_reserve(&t->buf, t->flush_bytes + 64 * 1024);
    if (sertrace_buf_appendf(&t->buf, "# sertrace dump %llu pid %ld tid %ld ",
                             (unsigned long long)dump_id, t->pid, t->tid) != 0)
        return;
    if (sertrace_fmt_escape(&t->buf, serializer ? serializer : "?",
                            serializer ? strlen(serializer) : 1) != 0)
        return;
    if (protocol >= 0)
        sertrace_buf_appendf(&t->buf, " protocol %d", protocol);
    sertrace_buf_append(&t->buf, "\n", 1);
}

/* Remember the node entered at `depth` (and its type's name, once per
 * type of the dump) for the error line of a failure inside it.  Out of
 * memory: the node is not remembered (an error there shows "?"). */
static void remember_node(struct sertrace_text_dump *t, uint32_t depth, uint8_t tag, uint32_t type,
                          const char *name, size_t name_len)
{
    if (depth > t->stack_cap) {
        uint32_t cap = t->stack_cap ? t->stack_cap : 64;
        struct sertrace_text_node *g;
        while (cap < depth && cap < UINT32_MAX / 2)
            cap *= 2;
        g = cap >= depth ? realloc(t->stack, (size_t)cap * sizeof *g) : NULL;
        if (g == NULL) {
            t->depth = depth;
            return;
        }
        t->stack = g;
        t->stack_cap = cap;
    }
    t->stack[depth - 1] = (struct sertrace_text_node){type, tag, false};
    t->depth = depth;
    if (type == 0 || name == NULL)
        return;
    if (type >= t->names_cap) {
        uint32_t cap = t->names_cap ? t->names_cap : 64;
        struct sertrace_text_name *g;
        while (cap <= type && cap < UINT32_MAX / 2)
            cap *= 2;
        g = cap > type ? realloc(t->names, (size_t)cap * sizeof *g) : NULL;
        if (g == NULL)
            return;
        memset(g + t->names_cap, 0, (size_t)(cap - t->names_cap) * sizeof *g);
        t->names = g;
        t->names_cap = cap;
    }
    if (t->names[type].gen == t->names_gen)
        return;
    if (sertrace_buf_append(&t->name_text, name, name_len) != 0)
        return;
    t->names[type] = (struct sertrace_text_name){
        t->names_gen, (uint32_t)(t->name_text.len - name_len), (uint32_t)name_len};
}

void sertrace_text_enter(struct sertrace_text_dump *t, uint32_t depth, uint8_t tag, uint32_t type,
                         const char *name, size_t name_len, uint64_t addr, uint64_t length)
{
    size_t start = t->buf.len;

    sertrace_lines_enter(&t->lines, &t->buf, depth, tag, type, name, name_len, addr, length);
    if (t->label.len > 0 && t->buf.len > start && t->buf.data[t->buf.len - 1] == '\n') {
        t->buf.len--; /* the label goes at the end of the enter line */
        sertrace_buf_append(&t->buf, "  ", 2);
        sertrace_buf_append(&t->buf, t->label.data, t->label.len);
        sertrace_buf_append(&t->buf, "\n", 1);
    }
    sertrace_buf_clear(&t->label);
    if (depth >= 1)
        remember_node(t, depth, tag, type, name, name_len);
    maybe_flush(t, start);
}

void sertrace_text_oob(struct sertrace_text_dump *t, uint64_t bytes)
{
    t->oob = bytes;
}

void sertrace_text_label(struct sertrace_text_dump *t, uint8_t kind, uint64_t value,
                         const char *name, size_t name_len, bool in_state)
{
    sertrace_buf_clear(&t->label);
    sertrace_fmt_label(&t->label, kind, value, name, name_len,
                       in_state ? SERTRACE_FMT_LABEL_IN_STATE : 0);
}

/* `unfinished`: closed at dump end.  The dump failed inside the node
 * ("!! FAILED inside"), or, after an "enter without exit" misuse, its exit
 * was lost ("?? exit lost"); either way the bytes written since it began
 * are a lower bound ("[≥ …]"), as the report shows them.  Flags come from
 * the one builder both outputs use (sertrace_fmt_exit_flags). */
void sertrace_text_exit(struct sertrace_text_dump *t, uint32_t depth, uint8_t tag, uint64_t bytes,
                        bool unfinished)
{
    size_t start = t->buf.len;
    bool error =
        depth >= 1 && depth <= t->stack_cap && depth <= t->depth && t->stack[depth - 1].error;
    unsigned flags = 0;

    t->depth = depth >= 1 ? depth - 1 : 0;
    if (bytes >= t->oversize)
        flags |= SERTRACE_FMT_FLAG_OVERSIZED;
    if (unfinished)
        flags |= t->misuse_open ? SERTRACE_FMT_FLAG_EXIT_LOST : SERTRACE_FMT_FLAG_FAILED;
    if (error)
        flags |= SERTRACE_FMT_FLAG_UNSERIALIZABLE;
    if (flags != 0 || t->lower) {
        /* Flagged (rare): the formatter builds the whole line; the flags'
         * scratch keeps its capacity (no allocation in steady state). */
        sertrace_buf_clear(&t->flags);
        if (sertrace_fmt_exit_flags(&t->flags, flags, t->oversize, t->exact) == 0)
            sertrace_fmt_exit_bound(
                &t->buf, depth, tag, bytes, t->exact,
                unfinished || t->lower ? SERTRACE_FMT_LOWER : SERTRACE_FMT_EXACT, t->flags.data);
    } else {
        sertrace_lines_exit(&t->buf, depth, tag, bytes, t->exact);
    }
    if (t->oob > 0) { /* "[1 B + 512.0 KiB out of band]" */
        sertrace_fmt_exit_oob(&t->buf, start, t->oob, t->exact);
        t->oob = 0;
    }
    maybe_flush(t, start);
}

void sertrace_text_atom(struct sertrace_text_dump *t, uint32_t depth, uint8_t tag, uint32_t type,
                        const char *name, size_t name_len, uint64_t addr, uint64_t length,
                        uint64_t bytes)
{
    sertrace_text_enter(t, depth, tag, type, name, name_len, addr, length);
    sertrace_text_exit(t, depth, tag, bytes, false);
}

void sertrace_text_note(struct sertrace_text_dump *t, uint32_t depth, const char *key,
                        size_t key_len, const char *value, size_t value_len)
{
    size_t start = t->buf.len;
    sertrace_fmt_note(&t->buf, depth, key, key_len, value, value_len);
    maybe_flush(t, start);
}

/* The error line names the node the error belongs to (the one open at
 * `depth`, else the innermost, as the report's core does), with the type
 * name of its enter line: the same text as the report
 * (sertrace_fmt_unserializable).  `tag`, `name`: the failing object's own
 * (the serializer's error record), used only when no node is open. */
void sertrace_text_error(struct sertrace_text_dump *t, uint32_t depth, uint8_t tag,
                         const char *name, size_t name_len, const char *message, size_t message_len,
                         const char *path, size_t path_len)
{
    /* Error path only: building the text with a temporary buffer is fine. */
    sertrace_buf text = SERTRACE_BUF_INIT;
    size_t start = t->buf.len;
    uint32_t at = depth >= 1 && depth <= t->depth ? depth : t->depth;
    int node_tag = -1;
    const char *node_name = NULL;
    size_t node_len = 0;

    (void)tag;
    (void)name;
    (void)name_len;
    if (at >= 1 && at <= t->stack_cap) {
        struct sertrace_text_node *n = &t->stack[at - 1];
        n->error = true;
        node_tag = n->tag;
        if (n->type < t->names_cap && t->names[n->type].gen == t->names_gen) {
            node_name = t->name_text.data + t->names[n->type].off;
            node_len = t->names[n->type].len;
        }
    }
    if (sertrace_fmt_unserializable(&text, node_tag, node_name, node_len, message,
                                    message ? message_len : 0, path, path ? path_len : 0) == 0)
        sertrace_fmt_flag_line(&t->buf, depth, text.data, text.len);
    sertrace_buf_free(&text);
    maybe_flush(t, start);
}

void sertrace_text_misuse(struct sertrace_text_dump *t, uint32_t depth, const char *what)
{
    sertrace_buf text = SERTRACE_BUF_INIT;
    size_t start = t->buf.len;

    /* dump_finish reports this just before closing what is open */
    if (strcmp(what, "enter without exit") == 0)
        t->misuse_open = true;
    if (sertrace_buf_appendf(&text, "MISUSE: %s", what) == 0)
        sertrace_fmt_flag_line(&t->buf, depth, text.data, text.len);
    sertrace_buf_free(&text);
    maybe_flush(t, start);
}

void sertrace_text_lower_bounds(struct sertrace_text_dump *t)
{
    t->lower = true;
}

/* "# end dump N: 1.2 KiB (1234 B), ok"; a dump whose sizes are lower
 * bounds: "# end dump N: ≥ 1.2 KiB (≥ 1234 B), ok, sizes are lower bounds". */
void sertrace_text_end(struct sertrace_text_dump *t, uint64_t dump_id, uint64_t bytes, int status,
                       uint32_t unfinished)
{
    const char *ge = t->lower ? sertrace_fmt_bound_text(SERTRACE_FMT_LOWER) : "";

    if (sertrace_buf_appendf(&t->buf, "# end dump %llu: %s", (unsigned long long)dump_id, ge) ==
            0 &&
        sertrace_fmt_size(&t->buf, bytes, t->exact) == 0) {
        if (!t->exact && bytes >= 1024)
            sertrace_buf_appendf(&t->buf, " (%s%llu B)", ge, (unsigned long long)bytes);
        sertrace_buf_appendf(&t->buf, ", %s%s%s\n", status == SERTRACE_STATUS_OK ? "ok" : "error",
                             unfinished ? ", unfinished" : "",
                             t->lower ? ", sizes are lower bounds" : "");
    }
    /* The footer joins the dump's last lines: one chunk. */
    sertrace_text_flush(t);
}
