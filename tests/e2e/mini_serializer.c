/* tests/e2e/mini_serializer.c -- a tiny instrumented serializer for the
 * end-to-end test of the runtime.
 *
 * It writes a nested tree of maps, arrays, strings and integers in a
 * msgpack-like format (2-byte header "MP", then the root object, no
 * trailer) into a memory buffer, calling the sertrace API the way a real
 * serializer does: every object is entered with the output position before
 * its first byte and exited with the position after its last byte, on the
 * single write path.  Containers are always traced; scalars only when the
 * dump has SERTRACE_DUMP_ATOMS (SERTRACE_GRANULARITY=all).  Dump 1
 * succeeds, is large enough to span several 4 KiB record batches, and
 * attaches notes; dump 2 fails on an unserializable "function" object,
 * reporting the error with a message and a path.
 *
 * With --wait it prints "ready" and waits for a line on stdin first (to
 * show that a session enabled after start-up records, with no restart).
 * Prints one JSON line on stdout: {"pid": P, "dumps": [{"payload": N,
 * "header": 2, "status": S}, ...]} so the test can compare byte counts with
 * the real payload lengths.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sertrace/sertrace.h>

struct out {
    uint8_t *data;
    size_t len, cap;
    sertrace_dump *d;
    bool atoms;
};

/* Type descriptors: their addresses are the interning keys. */
static const char type_map[] = "mini.Map";
static const char type_array[] = "mini.Array";
static const char type_str[] = "mini.str";
static const char type_int[] = "mini.int";
static const char type_function[] = "mini.function";

static void put(struct out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) {
        o->cap = (o->cap + n) * 2;
        o->data = realloc(o->data, o->cap);
        if (o->data == NULL)
            exit(3);
    }
    memcpy(o->data + o->len, p, n);
    o->len += n;
}

static void put_byte(struct out *o, uint8_t b)
{
    put(o, &b, 1);
}

static uint32_t type_of(struct out *o, const char *t)
{
    uint32_t id = sertrace_type_known(o->d, t);
    return id ? id : sertrace_type(o->d, t, t);
}

static void enter(struct out *o, uint8_t tag, const char *t, const void *addr, uint64_t length)
{
    if (o->d != NULL)
        sertrace_enter(o->d, tag, type_of(o, t), (uintptr_t)addr, length, o->len);
}

static void leave(struct out *o)
{
    if (o->d != NULL)
        sertrace_exit(o->d, o->len);
}

static void write_str(struct out *o, const char *s)
{
    size_t n = strlen(s);
    bool traced = o->atoms;
    if (traced)
        enter(o, SERTRACE_TAG_STR, type_str, s, n + 1);
    if (n < 32) {
        put_byte(o, (uint8_t)(0xa0 | n));
    } else {
        put_byte(o, 0xd9);
        put_byte(o, (uint8_t)n);
    }
    put(o, s, n);
    if (traced)
        leave(o);
}

static void write_int(struct out *o, uint64_t v, const void *addr)
{
    bool traced = o->atoms;
    if (traced)
        enter(o, SERTRACE_TAG_SCALAR, type_int, addr, 0);
    if (v < 128) {
        put_byte(o, (uint8_t)v);
    } else {
        put_byte(o, 0xcf);
        for (int i = 7; i >= 0; i--)
            put_byte(o, (uint8_t)(v >> (8 * i)));
    }
    if (traced)
        leave(o);
}

static void map_header(struct out *o, unsigned n, const void *addr)
{
    enter(o, SERTRACE_TAG_MAP, type_map, addr, (uint64_t)n + 1);
    if (n < 16) {
        put_byte(o, (uint8_t)(0x80 | n));
    } else {
        put_byte(o, 0xde);
        put_byte(o, (uint8_t)(n >> 8));
        put_byte(o, (uint8_t)n);
    }
}

static void array_header(struct out *o, unsigned n, const void *addr)
{
    enter(o, SERTRACE_TAG_ARRAY, type_array, addr, (uint64_t)n + 1);
    if (n < 16) {
        put_byte(o, (uint8_t)(0x90 | n));
    } else {
        put_byte(o, 0xdc);
        put_byte(o, (uint8_t)(n >> 8));
        put_byte(o, (uint8_t)n);
    }
}

static int storage[4096]; /* fake object addresses */

/* Dump 1: {"name": "state", "items": [0..9, 1000000], "coroutines": [300 maps
 * {"id": i, "frame": "..."}], "empty": {}} */
static int dump_ok(struct out *o)
{
    o->d = sertrace_dump_begin("mini", 1);
    o->atoms = (sertrace_dump_flags(o->d) & SERTRACE_DUMP_ATOMS) != 0;
    put(o, "MP", 2);
    map_header(o, 4, &storage[0]);
    write_str(o, "name");
    write_str(o, "state");
    write_str(o, "items");
    array_header(o, 11, &storage[1]);
    for (int i = 0; i < 10; i++)
        write_int(o, (uint64_t)i, &storage[100 + i]);
    write_int(o, 1000000, &storage[110]);
    leave(o);
    write_str(o, "coroutines");
    array_header(o, 300, &storage[2]);
    for (int i = 0; i < 300; i++) {
        char frame[64];
        map_header(o, 2, &storage[1000 + i]);
        if (o->d != NULL && i % 100 == 0) {
            snprintf(frame, sizeof frame, "ip=%d sp=%d", i, i / 2);
            sertrace_note(o->d, "frame", frame);
        }
        write_str(o, "id");
        write_int(o, (uint64_t)i, &storage[2000 + i]);
        write_str(o, "frame");
        snprintf(frame, sizeof frame, "coroutine number %d, suspended at await", i);
        write_str(o, frame);
        leave(o);
    }
    leave(o);
    write_str(o, "empty");
    map_header(o, 0, &storage[3]);
    leave(o);
    leave(o); /* root map */
    if (o->d != NULL)
        sertrace_dump_end(o->d, o->len, SERTRACE_STATUS_OK);
    return SERTRACE_STATUS_OK;
}

/* Dump 2: {"handlers": [1, <function>]} -- the function cannot be written. */
static int dump_fail(struct out *o)
{
    o->d = sertrace_dump_begin("mini", 1);
    o->atoms = (sertrace_dump_flags(o->d) & SERTRACE_DUMP_ATOMS) != 0;
    put(o, "MP", 2);
    map_header(o, 1, &storage[5]);
    write_str(o, "handlers");
    array_header(o, 2, &storage[6]);
    write_int(o, 1, &storage[7]);
    if (o->d != NULL) {
        uint32_t t = type_of(o, type_function);
        sertrace_enter(o->d, SERTRACE_TAG_FUNCTION, t, (uintptr_t)&storage[8], 0, o->len);
        sertrace_error(o->d, SERTRACE_TAG_FUNCTION, t, "cannot serialize a function",
                       "root.handlers[1]");
        sertrace_dump_end(o->d, o->len, SERTRACE_STATUS_ERROR);
    }
    return SERTRACE_STATUS_ERROR;
}

int main(int argc, char **argv)
{
    struct out a = {0}, b = {0};

    /* --wait: start, then wait for a line on stdin before dumping, so a
     * test can enable a session while the program already runs. */
    if (argc > 1 && strcmp(argv[1], "--wait") == 0) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL)
            return 2;
    }
    int sa = dump_ok(&a);
    int sb = dump_fail(&b);
    printf("{\"pid\": %ld, \"dumps\": [{\"payload\": %zu, \"header\": 2, \"status\": %d}, "
           "{\"payload\": %zu, \"header\": 2, \"status\": %d}]}\n",
           (long)getpid(), a.len, sa, b.len, sb);
    free(a.data);
    free(b.data);
    return 0;
}
