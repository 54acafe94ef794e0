/* gen_trace.c -- writes nested dumps through the sertrace C API, so the
 * end-to-end tests (and bench/sinks) get REAL LTTng traces with known
 * payload sizes.  It plays a serializer: it keeps an output position,
 * "writes" a few bytes per node and reports each dump's payload length on
 * stdout as "payload TID BYTES" (one line per dump, in order per thread).
 *
 *   gen_trace nested N        N dumps of varied shapes on one thread
 *   gen_trace threads T N     T threads, N dumps each, all at once
 *   gen_trace kill N          N dumps, then one that SIGKILLs the process
 *                             while inside State > list > Frame
 *   gen_trace flood N W       N dumps of W-wide trees as fast as possible
 *   gen_trace bench N         N small dumps (one records event each)
 *   gen_trace error           one dump that fails (status error)
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sertrace/sertrace.h"

typedef struct writer {
    sertrace_dump *d;
    uint64_t pos;
} writer;

static uint32_t type_of(writer *w, const char *name)
{
    uint32_t t = sertrace_type_known(w->d, name);
    return t ? t : sertrace_type(w->d, name, name);
}

static void enter(writer *w, uint8_t tag, const char *tname, uint64_t len)
{
    sertrace_enter(w->d, tag, tname ? type_of(w, tname) : 0, (uintptr_t)w + w->pos, len, w->pos);
    w->pos += 1; /* opening opcode */
}

static void leave(writer *w, uint64_t bytes)
{
    w->pos += bytes;
    sertrace_exit(w->d, w->pos);
}

static void atom(writer *w, uint8_t tag, const char *tname, uint64_t bytes)
{
    enter(w, tag, tname, 0);
    leave(w, bytes);
}

static long gettid_(void)
{
    return (long)syscall(SYS_gettid);
}

/* One dump of a shape chosen by `k`; returns its payload length. */
static uint64_t one_dump(unsigned k, unsigned width)
{
    writer w = {sertrace_dump_begin("gen", (int)(k % 4) + 2), 0};
    if (!w.d) {
        fprintf(stderr, "gen_trace: no listener (is the LTTng session started?)\n");
        exit(3);
    }
    w.pos = 2; /* PROTO header */
    enter(&w, SERTRACE_TAG_INSTANCE, "dispatch.State", 0);
    enter(&w, SERTRACE_TAG_LIST, "list", width + 1);
    for (unsigned i = 0; i < width; i++) {
        if ((i + k) % 3 == 0) {
            enter(&w, SERTRACE_TAG_DICT, "dict", 3);
            atom(&w, SERTRACE_TAG_STR, "str", 5 + (i % 7));
            atom(&w, SERTRACE_TAG_INT, "int", 2 + (k % 5));
            leave(&w, 1);
        } else {
            atom(&w, SERTRACE_TAG_INT, "int", 1 + ((i * 7 + k) % 9));
        }
    }
    leave(&w, 1);
    if (k % 5 == 0)
        sertrace_note(w.d, "ip", "42");
    leave(&w, 3);
    uint64_t total = w.pos + 1; /* STOP */
    sertrace_dump_end(w.d, total, SERTRACE_STATUS_OK);
    return total;
}

typedef struct targ {
    unsigned n, width, base;
} targ;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start_barrier;

static void *thread_main(void *p)
{
    targ *a = p;
    pthread_barrier_wait(&start_barrier);
    for (unsigned i = 0; i < a->n; i++) {
        uint64_t b = one_dump(a->base + i, a->width);
        pthread_mutex_lock(&out_lock);
        printf("payload %ld %llu\n", gettid_(), (unsigned long long)b);
        pthread_mutex_unlock(&out_lock);
    }
    return NULL;
}

static void die_mid_dump(void)
{
    writer w = {sertrace_dump_begin("gen", 5), 2};
    if (!w.d)
        exit(3);
    enter(&w, SERTRACE_TAG_INSTANCE, "dispatch.State", 0);
    enter(&w, SERTRACE_TAG_LIST, "list", 4);
    enter(&w, SERTRACE_TAG_INSTANCE, "dispatch.Frame", 0);
    /* enough children that several 4 KiB batches are flushed */
    for (unsigned i = 0; i < 2000; i++)
        atom(&w, SERTRACE_TAG_INT, "int", 3);
    fflush(stdout);
    raise(SIGKILL);
}

static void failing_dump(void)
{
    writer w = {sertrace_dump_begin("gen", 5), 2};
    if (!w.d)
        exit(3);
    enter(&w, SERTRACE_TAG_INSTANCE, "dispatch.State", 0);
    atom(&w, SERTRACE_TAG_INT, "int", 3);
    enter(&w, SERTRACE_TAG_FUNCTION, "function", 0);
    sertrace_error(w.d, SERTRACE_TAG_FUNCTION, type_of(&w, "function"),
                   "Can't pickle local object 'f.<locals>.g'", "State.suspended[3].frame.f");
    sertrace_dump_end(w.d, w.pos, SERTRACE_STATUS_ERROR);
    printf("payload %ld %llu\n", gettid_(), (unsigned long long)w.pos);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_trace nested|threads|kill|flood|bench|error ...\n");
        return 2;
    }
    const char *mode = argv[1];
    printf("pid %ld\n", (long)getpid());
    unsigned a = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 10;
    unsigned b = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 10;
    if (strcmp(mode, "nested") == 0) {
        for (unsigned i = 0; i < a; i++)
            printf("payload %ld %llu\n", gettid_(),
                   (unsigned long long)one_dump(i, 3 + (i * 37) % 400));
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t th[64];
        targ args[64];
        if (a > 64)
            a = 64;
        pthread_barrier_init(&start_barrier, NULL, a);
        for (unsigned t = 0; t < a; t++) {
            args[t] = (targ){b, 50 + 30 * t, t * 1000};
            pthread_create(&th[t], NULL, thread_main, &args[t]);
        }
        for (unsigned t = 0; t < a; t++)
            pthread_join(th[t], NULL);
    } else if (strcmp(mode, "kill") == 0) {
        for (unsigned i = 0; i < a; i++)
            printf("payload %ld %llu\n", gettid_(), (unsigned long long)one_dump(i, 20 + i));
        die_mid_dump();
    } else if (strcmp(mode, "flood") == 0) {
        for (unsigned i = 0; i < a; i++)
            printf("payload %ld %llu\n", gettid_(), (unsigned long long)one_dump(i, b));
    } else if (strcmp(mode, "bench") == 0) {
        for (unsigned i = 0; i < a; i++)
            one_dump(i, 4 + i % 8);
        printf("dumps %u\n", a);
    } else if (strcmp(mode, "error") == 0) {
        failing_dump();
    } else {
        fprintf(stderr, "gen_trace: unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
