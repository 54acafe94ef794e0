/* gen_schema.c -- writes sertrace dumps through the test's own provider
 * header (schema_tp.h), to record traces of a newer or a broken schema.
 * Records are encoded here with the layout and constants of
 * sertrace/schema.h.  Prints "pid P" and "payload DUMP_ID BYTES" lines.
 *
 * Both variants write dump 1, one tree with known positions:
 *   D2 dict [2, 40)  ├ L list [5, 20)  └ Str str [20, 31)   payload 41 B
 * (PROTO 2 B before the root, STOP 1 B after it: root 38 B).
 * SCHEMA_FUTURE: extra fields everywhere, a sertrace:future_thing event
 * between the batches (with bytes the core would reject as records) and,
 * in dump 2, a batch ending with an unknown record opcode (0x7e) after a
 * complete tree of 21 B (root 18 B).
 * SCHEMA_MISSING: dump_begin without protocol, dump_end without bytes.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "schema_tp.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sertrace/schema.h"

typedef struct buf {
    uint8_t b[1024];
    uint32_t n;
} buf;

static void u8(buf *b, uint8_t v)
{
    b->b[b->n++] = v;
}

static void var(buf *b, uint64_t v)
{
    while (v >= 0x80) {
        u8(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    u8(b, (uint8_t)v);
}

static void str(buf *b, const char *s)
{
    size_t n = strlen(s);
    var(b, n);
    memcpy(b->b + b->n, s, n);
    b->n += (uint32_t)n;
}

static void type(buf *b, uint64_t id, const char *name)
{
    u8(b, SERTRACE_REC_TYPE);
    var(b, id);
    str(b, name);
}

static void enter(buf *b, uint8_t tag, uint64_t depth, uint64_t t, uint64_t len, uint64_t pos)
{
    u8(b, SERTRACE_REC_ENTER);
    u8(b, tag);
    var(b, depth);
    var(b, t);
    var(b, 0x7f0000001000ull + pos); /* addr */
    var(b, len);
    var(b, pos);
}

static void leave(buf *b, uint64_t depth, uint64_t pos)
{
    u8(b, SERTRACE_REC_EXIT);
    var(b, depth);
    var(b, pos);
}

#if defined(SCHEMA_FUTURE)
#define BEGIN(id, ser, proto)                                                                      \
    lttng_ust_tracepoint(sertrace, dump_begin, id, ser, proto, "host-x", 0xf00dull)
#define RECORDS(id, seq, bf)                                                                       \
    lttng_ust_tracepoint(sertrace, records, 3, id, seq, (bf)->b, (bf)->n, 0xdeadbeefu)
#define END(id, bytes)                                                                             \
    lttng_ust_tracepoint(sertrace, dump_end, id, bytes, SERTRACE_STATUS_OK, 12345ull)
#else
#define BEGIN(id, ser, proto) lttng_ust_tracepoint(sertrace, dump_begin, id, ser)
#define RECORDS(id, seq, bf) lttng_ust_tracepoint(sertrace, records, id, seq, (bf)->b, (bf)->n)
#define END(id, bytes) lttng_ust_tracepoint(sertrace, dump_end, id, SERTRACE_STATUS_OK)
#endif

int main(void)
{
    printf("pid %ld\n", (long)getpid());

    /* dump 1: two batches */
    buf a = {{0}, 0}, b = {{0}, 0};
    BEGIN(1, "schema-test", 4);
    type(&a, 1, "dict");
    enter(&a, SERTRACE_TAG_DICT, 1, 1, 3, 2);
    type(&a, 2, "list");
    enter(&a, SERTRACE_TAG_LIST, 2, 2, 4, 5);
    leave(&a, 2, 20);
    RECORDS(1, 0, &a);
#if defined(SCHEMA_FUTURE)
    {
        buf junk = {{0}, 0};
        for (int i = 0; i < 64; i++)
            u8(&junk, 0xff); /* an over-long varint, were it read as records */
        lttng_ust_tracepoint(sertrace, future_thing, 1, 1, junk.b, junk.n, 999);
    }
#endif
    type(&b, 3, "str");
    enter(&b, SERTRACE_TAG_STR, 2, 3, 6, 20);
    leave(&b, 2, 31);
    leave(&b, 1, 40);
    RECORDS(1, 1, &b);
    END(1, 41);
    printf("payload 1 41\n");

#if defined(SCHEMA_FUTURE)
    /* dump 2: a known tree, then a record of a newer schema in the batch */
    buf c = {{0}, 0};
    BEGIN(2, "schema-test", 5);
    type(&c, 1, "list");
    enter(&c, SERTRACE_TAG_LIST, 1, 1, 2, 2);
    type(&c, 2, "tuple");
    enter(&c, SERTRACE_TAG_TUPLE, 2, 2, 3, 4);
    leave(&c, 2, 12);
    leave(&c, 1, 20);
    u8(&c, 0xfe); /* unknown opcode (0x80-0xff: none defined) */
    var(&c, 5);
    str(&c, "what a newer schema adds");
    RECORDS(2, 0, &c);
    END(2, 21);
    printf("payload 2 21\n");
#endif
    fflush(stdout);
    return 0;
}
