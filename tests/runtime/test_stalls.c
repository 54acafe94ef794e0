/* tests/runtime/test_stalls.c -- the text probe never blocks its host:
 * a FIFO nobody reads, and pipes, FIFOs, sockets and terminals whose
 * reader stalls or goes away: output is dropped (and said so), never
 * waited for.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "format.h"
#include "runtime-internal.h"
#include "sertrace/schema.h"
#include "sertrace/sertrace.h"

#include "capture.h"

/* ---- a stream reader that does not keep up (never block the host) ------- */

/* DISPATCH_TRACE naming a FIFO nobody reads: a blocking open() would hang
 * the first dump forever (the .timeout catches that); O_NONBLOCK fails
 * with ENXIO instead: one warning naming the problem, text off. */
Test(text, fifo_without_reader_warns_and_does_not_block, .timeout = 20)
{
    char wpath[64], fifo[80];
    int wfd = temp_fd(wpath);
    snprintf(fifo, sizeof fifo, "%s.fifo", wpath);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_expect_eq(sertrace_internal_configure(fifo, NULL, NULL, NULL, wfd), 1);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);
    char *w = read_fd_all(wfd);
    cr_expect_eq(count_lines(w), 1, "%s", w);
    cr_expect(strstr(w, ": a FIFO with no reader (start the reader first); live tree off\n") !=
                  NULL,
              "%s", w);
    /* A reader that comes later finds nothing. */
    int rfd = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rfd, 0);
    char c;
    cr_expect_leq(read(rfd, &c, 1), 0);
    close(rfd);
    unlink(fifo);
    close(wfd);
    unlink(wpath);
}

/* One dump of ~10 KiB of text in one chunk: 3 pages of a pipe, so the
 * 16-page pipe takes 5 dumps and then part of the 6th (cut mid-line). */
#define STALL_DUMPS 150
static void stall_dump_n(int n)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    uint64_t pos = 0;
    cr_assert(d != NULL && (sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 0x1000, (uint64_t)n + 1, pos);
    for (int i = 0; i < n; i++) {
        sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, 0x2000 + (uint64_t)i, 3, pos);
        sertrace_exit(d, ++pos);
    }
    sertrace_exit(d, pos);
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
}

static void stall_dump(void)
{
    stall_dump_n(180);
}

/* All the reader can read now (rfd is ours: made non-blocking). */
static size_t drain(int rfd, char *buf, size_t cap)
{
    size_t n = 0;
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        ssize_t r = read(rfd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

/* The text dump k would have without drops: dump 1's text (`one`, `n1`
 * bytes) with k for 1 in the header and the footer. */
static size_t dump_text(char *out, const char *one, size_t n1, int k)
{
    const char *foot = strstr(one, "# end dump 1: ");
    size_t head = strlen("# sertrace dump 1"), fhead = strlen("# end dump 1");
    cr_assert_not_null(foot);
    int m = sprintf(out, "# sertrace dump %d", k);
    memcpy(out + m, one + head, (size_t)(foot - one) - head);
    m += (int)((size_t)(foot - one) - head);
    m += sprintf(out + m, "# end dump %d", k);
    memcpy(out + m, foot + fhead, n1 - (size_t)(foot + fhead - one));
    return (size_t)m + n1 - (size_t)(foot + fhead - one);
}

/* The output is `wfd`'s reader `rfd`, which reads nothing while
 * STALL_DUMPS dumps (~1 MiB of text, far more than a pipe or socket
 * buffer) are written: they all complete (a blocking write would hang:
 * the test's .timeout).  Then the reader drains, one more dump follows,
 * and the whole stream S must be: pieces of the ideal text T (every dump,
 * nothing dropped) in order, separated by drop notices whose counts are
 * exactly the bytes of T skipped (a newline before a notice when the
 * piece stopped mid-line), ending with the whole last dump. */
static void check_stalled_reader(int rfd, bool pipe_of_64k)
{
    static char s[4 << 20], t[4 << 20], one[64 << 10];
    static const char tail[] = " bytes of trace text dropped: the reader did not keep up\n";
    size_t ns, nt = 0, n1;

    for (int k = 0; k < STALL_DUMPS; k++)
        stall_dump();
    ns = drain(rfd, s, sizeof s);
    stall_dump();
    ns += drain(rfd, s + ns, sizeof s - ns);

    /* Dump 1 went out whole: T from it. */
    cr_assert_eq(strncmp(s, "# sertrace dump 1 pid ", 22), 0, "%.200s", s);
    const char *end1 = strstr(s, "# end dump 1: ");
    cr_assert_not_null(end1);
    n1 = (size_t)(strchr(end1, '\n') + 1 - s);
    cr_assert_lt(n1, sizeof one);
    cr_assert_gt(n1, 4096);
    memcpy(one, s, n1);
    one[n1] = '\0';
    for (int k = 1; k <= STALL_DUMPS + 1; k++)
        nt += dump_text(t + nt, one, n1, k);
    cr_assert_lt(ns, nt / 4, "the reader got nearly everything: %zu of %zu", ns, nt);

    size_t ps = 0, pt = 0, whole_after_last = 0;
    int notices = 0, cuts = 0;
    while (ps < ns) {
        unsigned long long dropped;
        int used = 0;
        if (sscanf(s + ps, "# sertrace: %llu%n", &dropped, &used) == 1) {
            cr_assert_eq(strncmp(s + ps + used, tail, strlen(tail)), 0, "%.120s", s + ps);
            cr_assert_gt(dropped, 0);
            ps += (size_t)used + strlen(tail);
            pt += dropped;
            notices++;
            whole_after_last = 0;
            continue;
        }
        const char *n = strstr(s + ps, "\n# sertrace: ");
        size_t piece = n ? (size_t)(n - (s + ps)) + 1 : ns - ps; /* up to and with the \n */
        cr_assert_leq(pt + piece, nt);
        if (memcmp(s + ps, t + pt, piece) != 0) {
            /* a piece cut mid-line, ended by the probe's own newline */
            cr_assert_eq(memcmp(s + ps, t + pt, piece - 1), 0, "piece at %zu differs", ps);
            cr_assert_eq(s[ps + piece - 1], '\n');
            cr_assert_neq(t[pt + piece - 2], '\n');
            pt += piece - 1;
            cuts++;
        } else {
            pt += piece;
        }
        ps += piece;
        whole_after_last += piece;
    }
    cr_expect_geq(notices, 1);
    /* 16 pages: 5 dumps of 3 pages, then one page of the 6th, mid-line. */
    if (pipe_of_64k)
        cr_expect_eq(cuts, 1, "%zu bytes went out before the stall", ns);
    cr_expect_eq(pt, nt, "delivered + announced %zu != all the text %zu", pt, nt);
    /* After the last notice: the last dump, whole. */
    size_t last = dump_text(one, s, n1, STALL_DUMPS + 1);
    cr_expect_eq(whole_after_last, last);
    cr_expect_eq(memcmp(s + ns - last, t + nt - last, last), 0);
}

Test(text, stalled_pipe_on_stderr_drops_never_blocks, .timeout = 20)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(fcntl(p[0], F_SETPIPE_SZ, 65536), 65536);
    int saved = dup(2);
    dup2(p[1], 2);
    int flags = fcntl(2, F_GETFL);
    cr_assert_eq(sertrace_internal_configure("stderr", NULL, NULL, NULL, -1), 0);
    sertrace_internal_set_hooks(NULL);
    check_stalled_reader(p[0], true);
    /* The host's own stderr is untouched: still blocking, and a line
     * written to it after the drain arrives whole. */
    int after = fcntl(2, F_GETFL);
    cr_expect_eq(after, flags);
    cr_expect_eq(after & O_NONBLOCK, 0);
    cr_expect_eq(write(2, "host line\n", 10), 10);
    char buf[64];
    cr_expect_eq(read(p[0], buf, sizeof buf), 10);
    dup2(saved, 2);
    close(saved);
    close(p[0]);
    close(p[1]);
}

Test(text, stalled_fifo_path_drops_never_blocks, .timeout = 20)
{
    char wpath[64], fifo[80];
    int wfd = temp_fd(wpath);
    snprintf(fifo, sizeof fifo, "%s.fifo", wpath);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int rfd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader that never reads */
    cr_assert_geq(rfd, 0);
    cr_assert_eq(fcntl(rfd, F_SETPIPE_SZ, 65536), 65536);
    cr_assert_eq(sertrace_internal_configure(fifo, NULL, NULL, NULL, wfd), 0);
    sertrace_internal_set_hooks(NULL);
    check_stalled_reader(rfd, true);
    cr_expect_eq(count_lines(read_fd_all(wfd)), 0);
    close(rfd);
    unlink(fifo);
    close(wfd);
    unlink(wpath);
}

Test(text, stalled_socket_on_stderr_drops_never_blocks, .timeout = 20)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int saved = dup(2);
    dup2(sv[1], 2);
    int flags = fcntl(2, F_GETFL);
    cr_assert_eq(sertrace_internal_configure("stderr", NULL, NULL, NULL, -1), 0);
    sertrace_internal_set_hooks(NULL);
    check_stalled_reader(sv[0], false);
    cr_expect_eq(fcntl(2, F_GETFL), flags);
    dup2(saved, 2);
    close(saved);
    close(sv[0]);
    close(sv[1]);
}

/* All the reader gets until the output stays quiet for 200 ms: a terminal
 * moves bytes to its reader asynchronously (pty flip buffers), so "all
 * that can be read now" is not "all that was written". */
static size_t drain_quiet(int rfd, char *buf, size_t cap)
{
    struct pollfd p = {rfd, POLLIN, 0};
    size_t n = 0;
    while (n + 1 < cap && poll(&p, 1, 200) == 1) {
        ssize_t r = read(rfd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

/* stderr a terminal whose reader (the pty master: a terminal emulator
 * that stopped reading, or ^S) reads nothing: every dump completes.  Its
 * room comes back asynchronously after a read, so instead of the exact
 * accounting: after the drain, small dumps (the terminal may take less
 * than a big one at once) are made until a drop notice and a whole dump
 * after it have arrived (a bounded number of tries). */
Test(text, stalled_terminal_on_stderr_drops_never_blocks, .timeout = 60)
{
    static char s[4 << 20];
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert_geq(master, 0);
    cr_assert_eq(grantpt(master), 0);
    cr_assert_eq(unlockpt(master), 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert_geq(slave, 0);
    struct termios tio;
    cr_assert_eq(tcgetattr(slave, &tio), 0);
    cfmakeraw(&tio);
    cr_assert_eq(tcsetattr(slave, TCSANOW, &tio), 0);
    int saved = dup(2);
    dup2(slave, 2);
    int flags = fcntl(2, F_GETFL);
    cr_assert_eq(sertrace_internal_configure("stderr", NULL, NULL, NULL, -1), 0);
    sertrace_internal_set_hooks(NULL);
    for (int k = 0; k < STALL_DUMPS; k++)
        stall_dump();
    size_t ns = drain_quiet(master, s, sizeof s);
    cr_expect_eq(strncmp(s, "# sertrace dump 1 pid ", 22), 0, "%.200s", s);
    cr_expect_lt(ns, (size_t)STALL_DUMPS * 10000 / 4);
    bool found = false;
    for (int round = 0; round < 20 && !found; round++) {
        stall_dump_n(4);
        ns += drain_quiet(master, s + ns, sizeof s - ns);
        const char *notice = strstr(s, "\n# sertrace: ");
        found =
            notice != NULL &&
            strstr(notice, " bytes of trace text dropped: the reader did not keep up\n") != NULL &&
            strstr(notice, "\n# end dump ") != NULL;
    }
    cr_expect(found, "no drop notice and whole dump after it: %.300s",
              s + (ns > 300 ? ns - 300 : 0));
    cr_expect_eq(fcntl(2, F_GETFL), flags);
    dup2(saved, 2);
    close(saved);
    close(slave);
    close(master);
}

/* The reader goes away after the output was opened: EPIPE on our own
 * description of the pipe, one warning (to the same dead pipe: lost, no
 * SIGPIPE), text off. */
Test(text, pipe_reader_gone_later_turns_text_off, .timeout = 20)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int saved = dup(2);
    dup2(p[1], 2);
    cr_assert_eq(sertrace_internal_configure("stderr", NULL, NULL, NULL, -1), 0);
    sertrace_internal_set_hooks(NULL);
    close(p[0]);
    stall_dump(); /* EPIPE, not SIGPIPE */
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);
    sigset_t pending;
    sigpending(&pending);
    cr_expect_eq(sigismember(&pending, SIGPIPE), 0);
}
