/* tests/runtime/test_config.c -- configuration of the runtime: the
 * DISPATCH_TRACE table and values (numbers never file names, paths
 * trimmed), bad values warning once, SERTRACE granularity, and the LTTng
 * flag the test hooks must not set.  Criterion runs each test in its own
 * process, so configuration set by one does not leak into another.
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

/* ---- configuration and the text probe ---------------------------------- */

Test(config, dispatch_trace_table)
{
    static const struct {
        const char *value;
        int mode; /* 0 off, 1 stderr, 2 path, 3 invalid */
    } cases[] = {
        {NULL, 0},         {"", 0},         {"0", 0},
        {"false", 0},      {"FALSE", 0},    {"off", 0},
        {"no", 0},         {" off ", 0},    {"1", 1},
        {"true", 1},       {"True", 1},     {"on", 1},
        {"yes", 1},        {"stderr", 1},   {"STDERR", 1},
        {"/tmp/t.log", 2}, {"./trace", 2},  {"dir/file", 2},
        {"trace.txt", 2},  {"dump.log", 2}, {"maybe", 3},
        {"2", 3},          {"trace", 3},    {"-1", 3},
        {".hidden", 3},    {"x.", 3},       {"a.toolongext", 3},
        {"stdout", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(sertrace_internal_dispatch_trace_mode(cases[i].value), cases[i].mode,
                     "DISPATCH_TRACE='%s'", cases[i].value ? cases[i].value : "(unset)");
}

Test(config, bad_values_warn_once_and_stay_off)
{
    char wpath[64];
    int wfd = temp_fd(wpath);
    sertrace_internal_set_hooks(NULL);

    cr_expect_eq(sertrace_internal_configure("maybe", NULL, NULL, NULL, wfd), 1);
    char *w = read_fd_all(wfd);
    cr_expect_eq(count_lines(w), 1);
    cr_expect(strstr(w, "DISPATCH_TRACE=maybe") != NULL, "%s", w);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);

    reset_fd(wfd);
    cr_expect_eq(
        sertrace_internal_configure("/nonexistent-dir/sub/trace.log", NULL, NULL, NULL, wfd), 1);
    w = read_fd_all(wfd);
    cr_expect_eq(count_lines(w), 1);
    cr_expect(strstr(w, "cannot open") != NULL, "%s", w);
    cr_expect(strstr(w, "No such file or directory") != NULL, "%s", w);
    d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);

    reset_fd(wfd);
    cr_expect_eq(sertrace_internal_configure(NULL, "some", "12Q", "perhaps", wfd), 3);
    w = read_fd_all(wfd);
    cr_expect_eq(count_lines(w), 3);
    cr_expect(strstr(w, "SERTRACE_GRANULARITY=some") != NULL);
    cr_expect(strstr(w, "SERTRACE_OVERSIZE=12Q") != NULL);
    cr_expect(strstr(w, "SERTRACE_EXACT=perhaps") != NULL);

    reset_fd(wfd);
    cr_expect_eq(sertrace_internal_configure("0", "containers", "64K", "0", wfd), 0);
    cr_expect_eq(count_lines(read_fd_all(wfd)), 0);
    close(wfd);
    unlink(wpath);
}

Test(config, granularity_all_sets_atoms)
{
    sertrace_internal_set_hooks(&(struct sertrace_internal_hooks){NULL, NULL, NULL, NULL});
    sertrace_internal_configure(NULL, "all", NULL, NULL, -1);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    cr_expect(sertrace_dump_flags(d) & SERTRACE_DUMP_ATOMS);
    sertrace_dump_end(d, 0, 0);
    sertrace_internal_configure(NULL, "containers", NULL, NULL, -1);
    d = sertrace_dump_begin("pickle", 5);
    cr_expect_not(sertrace_dump_flags(d) & SERTRACE_DUMP_ATOMS);
    sertrace_dump_end(d, 0, 0);
}

/* Drop the header's pid/tid (they vary) for golden comparison. */

/* ---- DISPATCH_TRACE values: numbers, trimming --------------------------- */

Test(config, numbers_are_never_file_names)
{
    static const char *numbers[] = {"2", "1.5", "-1", "+3", "0.5", " 2.0 ", "10.25", "-0.1", ".5"};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        cr_expect_eq(sertrace_internal_dispatch_trace_mode(numbers[i]), 3, "DISPATCH_TRACE='%s'",
                     numbers[i]);
    /* Still paths: a '/' or a non-numeric stem or extension. */
    static const char *paths[] = {"./1.5", "/tmp/2", "v1.5.log", "1.txt", "run.1", "a1.5"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        cr_expect_eq(sertrace_internal_dispatch_trace_mode(paths[i]), 2, "DISPATCH_TRACE='%s'",
                     paths[i]);
    char wpath[64];
    int wfd = temp_fd(wpath);
    char cwd[4096];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir("/tmp"), 0);
    unlink("/tmp/1.5");
    cr_expect_eq(sertrace_internal_configure("1.5", NULL, NULL, NULL, wfd), 1);
    cr_expect(strstr(read_fd_all(wfd), "DISPATCH_TRACE=1.5 is not understood") != NULL);
    cr_expect_neq(access("/tmp/1.5", F_OK), 0, "a file named 1.5 was created");
    cr_assert_eq(chdir(cwd), 0);
    close(wfd);
    unlink(wpath);
}

Test(config, path_is_opened_trimmed)
{
    char path[64], padded[80];
    int fd = temp_fd(path);
    close(fd);
    unlink(path);
    snprintf(padded, sizeof padded, "  %s.log \t", path);
    cr_assert_eq(sertrace_internal_configure(padded, NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_dump_end(d, 0, SERTRACE_STATUS_OK);
    char trimmed[80];
    snprintf(trimmed, sizeof trimmed, "%s.log", path);
    cr_expect_eq(access(trimmed, F_OK), 0, "'%s' not created", trimmed);
    cr_expect_neq(access(padded, F_OK), 0, "'%s' created", padded);
    unlink(trimmed);
    unlink(padded);
}
