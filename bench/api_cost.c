/* bench/api_cost.c -- what the sertrace C API costs a serializer, per node.
 *
 * Measures, each as the median of several runs, in ns per node (one
 * sertrace_enter + sertrace_exit pair, plus the sertrace_type_known probe a
 * serializer makes per object):
 *   dormant        nobody listens: sertrace_dump_begin() returned NULL and
 *                  the serializer pays one NULL test per call site.  The
 *                  handle is re-read from memory every node (volatile), as
 *                  a serializer reading it from its state struct would, so
 *                  the compiler cannot hoist the test out of the loop.
 *   dormant-call   same, but calling the API with the NULL handle without
 *                  testing it first (cost of the call + the test inside).
 *   dump-begin     sertrace_dump_begin() + _end() of a dormant dump, per dump.
 *   encode         records built and flushed to a no-op hook (internal hook,
 *                  no LTTng): the runtime's own cost while recording.
 *   record         a real LTTng session has enabled sertrace:* (run
 *                  bench/api_cost.sh): records flushed as sertrace:records
 *                  events.  Skipped when no session listens.
 *   text-devnull   DISPATCH_TRACE=/dev/null: every node formatted as two
 *                  tree lines and written out per 16 KiB.
 * Dumps are 1000 nodes: a root list holding 999 tuples, each entered and
 * exited with growing positions, like a pickler's save loop.
 *
 * Usage: api_cost [MODE ...]   (default: all modes)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime-internal.h"
#include "sertrace/sertrace.h"

#define NODES_PER_DUMP 1000
#define RUNS 7

static const char type_list[] = "list";
static const char type_tuple[] = "tuple";

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The per-node code of an instrumented serializer. */
static inline void one_dump(sertrace_dump *volatile *dp, uint64_t *sink)
{
    sertrace_dump *d;
    uint64_t pos = 2;
    uint32_t t;

    d = *dp;
    if (d) {
        t = sertrace_type_known(d, type_list);
        if (t == 0)
            t = sertrace_type(d, type_list, "list");
        sertrace_enter(d, 2, t, (uintptr_t)&pos, NODES_PER_DUMP, pos);
    }
    pos += 1;
    for (int i = 1; i < NODES_PER_DUMP; i++) {
        d = *dp;
        if (d) {
            t = sertrace_type_known(d, type_tuple);
            if (t == 0)
                t = sertrace_type(d, type_tuple, "tuple");
            sertrace_enter(d, 3, t, (uintptr_t)i * 48, 3, pos);
        }
        pos += 7 + (uint64_t)(i & 3);
        d = *dp;
        if (d)
            sertrace_exit(d, pos);
    }
    d = *dp;
    if (d)
        sertrace_exit(d, pos + 1);
    *sink += pos;
}

/* ns per node over `dumps` dumps, median of RUNS. */
static double run_mode(const char *serializer, long dumps, bool expect_active, bool *active)
{
    double samples[RUNS];
    uint64_t sink = 0;

    *active = true;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long k = 0; k < dumps; k++) {
            sertrace_dump *volatile d = sertrace_dump_begin(serializer, 5);
            if ((d != NULL) != expect_active) {
                *active = false;
                sertrace_dump_end(d, 0, SERTRACE_STATUS_OK);
                return 0;
            }
            one_dump(&d, &sink);
            sertrace_dump_end(d, sink & 0xffff, SERTRACE_STATUS_OK);
        }
        samples[r] = (now_ns() - t0) / ((double)dumps * NODES_PER_DUMP);
    }
    if (sink == 42)
        puts("");
    return median(samples, RUNS);
}

static double run_dormant_call(long dumps)
{
    double samples[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long k = 0; k < dumps; k++) {
            sertrace_dump *volatile d = NULL;
            uint64_t pos = 0;
            for (int i = 0; i < NODES_PER_DUMP; i++) {
                sertrace_enter(d, 3, sertrace_type_known(d, type_tuple), (uintptr_t)i, 3, pos);
                pos += 7;
                sertrace_exit(d, pos);
            }
        }
        samples[r] = (now_ns() - t0) / ((double)dumps * NODES_PER_DUMP);
    }
    return median(samples, RUNS);
}

static double run_dump_begin(long dumps)
{
    double samples[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long k = 0; k < dumps; k++) {
            sertrace_dump *volatile d = sertrace_dump_begin("pickle", 5);
            sertrace_dump_end(d, 0, SERTRACE_STATUS_OK);
        }
        samples[r] = (now_ns() - t0) / (double)dumps;
    }
    return median(samples, RUNS);
}

static void noop_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *buf, uint32_t len)
{
    (void)ctx;
    (void)id;
    (void)seq;
    (void)buf;
    (void)len;
}

static bool wanted(int argc, char **argv, const char *mode)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], mode) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    bool active;
    double ns;

    /* Text off and no hooks, whatever the environment says. */
    sertrace_internal_configure(NULL, NULL, NULL, NULL, 2);

    if (wanted(argc, argv, "record")) {
        ns = run_mode("pickle", 1000, true, &active);
        if (active)
            printf("record        %8.2f ns/node  (LTTng session recording sertrace:*)\n", ns);
        else
            printf("record        skipped: no LTTng session has enabled sertrace:* "
                   "(use bench/api_cost.sh)\n");
    }
    if (wanted(argc, argv, "dormant")) {
        ns = run_mode("pickle", 20000, false, &active);
        if (active)
            printf("dormant       %8.3f ns/node  (enter+exit+type probe, NULL-handle branch)\n",
                   ns);
        else
            printf("dormant       skipped: a session is recording sertrace:*\n");
    }
    if (wanted(argc, argv, "dormant-call"))
        printf("dormant-call  %8.3f ns/node  (API called with the NULL handle)\n",
               run_dormant_call(20000));
    if (wanted(argc, argv, "dump-begin")) {
        sertrace_dump *probe = sertrace_dump_begin("probe", 0);
        bool dormant = probe == NULL;
        sertrace_dump_end(probe, 0, SERTRACE_STATUS_OK);
        /* Fewer dumps while recording: each one is 3 events in the trace. */
        ns = run_dump_begin(dormant ? 2000000 : 50000);
        printf("dump-begin    %8.2f ns/dump  (dump_begin+dump_end%s)\n", ns,
               dormant ? ", dormant" : ", session recording: 3 events");
    }
    if (wanted(argc, argv, "encode")) {
        struct sertrace_internal_hooks h = {NULL, noop_records, NULL, NULL};
        sertrace_internal_set_hooks(&h);
        ns = run_mode("pickle", 5000, true, &active);
        printf("encode        %8.2f ns/node  (records to a no-op hook)\n", ns);
        sertrace_internal_set_hooks(NULL);
    }
    if (wanted(argc, argv, "text-devnull")) {
        sertrace_internal_configure("/dev/null", NULL, NULL, NULL, 2);
        ns = run_mode("pickle", 2000, true, &active);
        printf("text-devnull  %8.2f ns/node  (DISPATCH_TRACE=/dev/null, 2 lines per node)\n", ns);
        sertrace_internal_configure(NULL, NULL, NULL, NULL, 2);
    }
    return 0;
}
