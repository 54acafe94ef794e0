/* dumper.c -- a small C program that uses the sertrace API, for the CLI's
 * end-to-end tests (tests/cli/test_cli.py).
 *
 * It plays a serializer: each "dump" writes a made-up payload (a 2-byte
 * header, a root MAP holding `width` ARRAY children of growing size, each
 * holding a few SCALARs, a 1-byte trailer) and reports every object to
 * sertrace with its exact output position, exactly as a real serializer
 * does on its single write path.  It prints "pid P" first, then one line
 * per dump on stdout, "dump N bytes B", B being the payload length (dump N
 * has width + N % 7 children, so sizes differ), so a test can compare the
 * trace's byte counts with the truth.
 *
 * Usage: dumper [--dumps N] [--width W] [--every MS] [--forever]
 *               [--exit CODE] [--kill SIGNAL] [--ready FILE] [--hold FILE]
 *               [--serializer NAME]
 *   --dumps N     number of dumps (default 3)
 *   --width W     children of the root (default 20)
 *   --every MS    sleep MS milliseconds between dumps
 *   --forever     dump until SIGTERM/SIGINT (then exit 0)
 *   --exit CODE   exit status at the end
 *   --kill SIG    raise SIG at the end (tests exit status 128+SIG)
 *   --ready FILE  create FILE once the first dump is done
 *   --serializer NAME  the serializer name of the dumps (default cli-test)
 *   --cpu1-after N     after N dumps, move to CPU 1 (sched_setaffinity): with
 *                 per-CPU buffers, the first N dumps and the rest land in
 *                 different stream files (run it pinned to CPU 0)
 *   --hold FILE   after the last dump, wait until FILE exists (checked
 *                 every 10 ms, at most 120 s: a guard against a hung test)
 *                 before exiting, so a test decides when the process ends
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sertrace/sertrace.h>

static volatile sig_atomic_t stop_requested;
static const char *serializer_name = "cli-test";

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* One dump; returns its payload length. */
static uint64_t one_dump(unsigned width, unsigned serial)
{
    sertrace_dump *d = sertrace_dump_begin(serializer_name, 1);
    static const char map_type[] = "test.Map";
    static const char arr_type[] = "test.Array";
    static const char sc_type[] = "test.Scalar";
    uint32_t tmap = 0, tarr = 0, tsc = 0;
    uint64_t pos = 2; /* header */

    if (d != NULL) {
        tmap = sertrace_type(d, map_type, map_type);
        tarr = sertrace_type(d, arr_type, arr_type);
        tsc = sertrace_type(d, sc_type, sc_type);
        sertrace_enter(d, SERTRACE_TAG_MAP, tmap, (uintptr_t)0x1000 + serial, width + 1, pos);
    }
    pos += 1; /* map opcode */
    for (unsigned i = 0; i < width; i++) {
        unsigned items = 1 + i % 4;
        if (d != NULL)
            sertrace_enter(d, SERTRACE_TAG_ARRAY, tarr, (uintptr_t)0x2000 + i * 16, items + 1, pos);
        pos += 1;
        for (unsigned k = 0; k < items; k++) {
            if (d != NULL)
                sertrace_enter(d, SERTRACE_TAG_SCALAR, tsc, (uintptr_t)0x3000 + k * 8, 0, pos);
            pos += 1 + (i * 7 + k * 3) % 50; /* scalars of 1..50 bytes */
            if (d != NULL)
                sertrace_exit(d, pos);
        }
        if (d != NULL)
            sertrace_exit(d, pos);
    }
    if (d != NULL)
        sertrace_exit(d, pos);
    pos += 1; /* trailer */
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
    return pos;
}

int main(int argc, char **argv)
{
    unsigned dumps = 3, width = 20, every_ms = 0;
    int forever = 0, exit_code = 0, kill_sig = 0, cpu1_after = -1;
    const char *ready = NULL, *hold = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--forever") == 0) {
            forever = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "dumper: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--dumps") == 0)
            dumps = (unsigned)atoi(v);
        else if (strcmp(a, "--width") == 0)
            width = (unsigned)atoi(v);
        else if (strcmp(a, "--every") == 0)
            every_ms = (unsigned)atoi(v);
        else if (strcmp(a, "--exit") == 0)
            exit_code = atoi(v);
        else if (strcmp(a, "--kill") == 0)
            kill_sig = atoi(v);
        else if (strcmp(a, "--ready") == 0)
            ready = v;
        else if (strcmp(a, "--hold") == 0)
            hold = v;
        else if (strcmp(a, "--serializer") == 0)
            serializer_name = v;
        else if (strcmp(a, "--cpu1-after") == 0)
            cpu1_after = atoi(v);
        else {
            fprintf(stderr, "dumper: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    printf("pid %ld\n", (long)getpid());
    fflush(stdout);
    for (unsigned n = 0; forever || n < dumps; n++) {
        uint64_t bytes;
        if (stop_requested)
            break;
        if (cpu1_after >= 0 && n == (unsigned)cpu1_after) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(1, &one);
            if (sched_setaffinity(0, sizeof one, &one) != 0) {
                perror("dumper: sched_setaffinity");
                return 1;
            }
        }
        bytes = one_dump(width + n % 7, n);
        printf("dump %u bytes %llu\n", n, (unsigned long long)bytes);
        fflush(stdout);
        if (n == 0 && ready != NULL) {
            FILE *f = fopen(ready, "w");
            if (f != NULL)
                fclose(f);
        }
        if (every_ms > 0) {
            struct timespec ts = {every_ms / 1000, (long)(every_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    for (unsigned waited = 0; hold != NULL && waited < 12000 && !stop_requested; waited++) {
        struct timespec ts = {0, 10 * 1000000L};
        if (access(hold, F_OK) == 0)
            break;
        nanosleep(&ts, NULL);
    }
    if (kill_sig > 0) {
        signal(kill_sig, SIG_DFL);
        raise(kill_sig);
    }
    return exit_code;
}
