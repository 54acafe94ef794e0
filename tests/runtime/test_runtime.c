/* tests/runtime/test_runtime.c -- Criterion tests of the sertrace C API.
 *
 * The tests install the runtime's internal hooks (runtime-internal.h) to
 * capture what would go to LTTng (dump_begin, every flushed batch of
 * records, dump_end), decode the batches with the small independent
 * decoder below (written from schema.h, not from runtime.c), and assert on
 * the decoded records: nesting and exact positions, several threads at
 * once, batches split at 4 KiB without splitting a record, type interning
 * once per dump, errors, notes, misuse (exit without enter, NULL handle,
 * depth cap, enter without exit), string cutting, nested dumps, and the
 * text probe (golden tree in a file, DISPATCH_TRACE parsing, warnings).
 * Criterion runs each test in its own process, so configuration set by
 * one test does not leak into another.
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

/* ---- capture ----------------------------------------------------------- */

#define MAX_DUMPS 4096

struct batch_info {
    uint32_t seq;
    uint32_t len;
};

struct captured_dump {
    uint64_t id;
    char serializer[64];
    int32_t protocol;
    bool ended;
    uint64_t bytes;
    uint8_t status;
    uint8_t *records; /* all batches concatenated */
    size_t records_len;
    size_t records_cap;
    struct batch_info *batches;
    size_t nbatches;
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct captured_dump dumps[MAX_DUMPS];
static size_t ndumps;

static struct captured_dump *find_dump(uint64_t id)
{
    for (size_t i = 0; i < ndumps; i++)
        if (dumps[i].id == id)
            return &dumps[i];
    return NULL;
}

static void on_begin(void *ctx, uint64_t id, const char *serializer, int32_t protocol)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    if (ndumps < MAX_DUMPS) {
        struct captured_dump *c = &dumps[ndumps++];
        memset(c, 0, sizeof *c);
        c->id = id;
        snprintf(c->serializer, sizeof c->serializer, "%s", serializer);
        c->protocol = protocol;
    }
    pthread_mutex_unlock(&cap_lock);
}

static void on_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *buf, uint32_t len)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    struct captured_dump *c = find_dump(id);
    if (c != NULL) {
        if (c->records_len + len > c->records_cap) {
            c->records_cap = c->records_cap ? c->records_cap * 2 : 2 * SERTRACE_BATCH_BYTES;
            c->records = realloc(c->records, c->records_cap);
        }
        memcpy(c->records + c->records_len, buf, len);
        c->records_len += len;
        c->batches = realloc(c->batches, (c->nbatches + 1) * sizeof *c->batches);
        c->batches[c->nbatches].seq = seq;
        c->batches[c->nbatches].len = len;
        c->nbatches++;
    }
    pthread_mutex_unlock(&cap_lock);
}

static void on_end(void *ctx, uint64_t id, uint64_t bytes, uint8_t status)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    struct captured_dump *c = find_dump(id);
    if (c != NULL) {
        c->ended = true;
        c->bytes = bytes;
        c->status = status;
    }
    pthread_mutex_unlock(&cap_lock);
}

static void capture_on(void)
{
    struct sertrace_internal_hooks h = {on_begin, on_records, on_end, NULL};
    /* Text off whatever the environment says; hooks on. */
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1);
    sertrace_internal_set_hooks(&h);
}

static void free_all(void);
TestSuite(runtime, .init = capture_on, .fini = free_all);

/* ---- decoder (from schema.h) ------------------------------------------- */

struct rec {
    uint8_t op;
    uint8_t tag;
    uint64_t depth, type, addr, length, pos;
    char *s1, *s2; /* TYPE name / ERROR message / NOTE key ; ERROR path / NOTE value */
    size_t s1_len, s2_len;
};

struct recs {
    struct rec *v;
    size_t n;
    size_t cap;
};

static bool get_varint(const uint8_t *b, size_t len, size_t *i, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*i >= len)
            return false;
        uint8_t c = b[(*i)++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool get_str(const uint8_t *b, size_t len, size_t *i, char **s, size_t *n)
{
    uint64_t l;
    if (!get_varint(b, len, i, &l) || l > len - *i)
        return false;
    *s = malloc(l + 1);
    memcpy(*s, b + *i, l);
    (*s)[l] = '\0';
    *n = l;
    *i += l;
    return true;
}

/* Decode one batch; false if it does not end exactly on a record. */
static bool decode_batch(const uint8_t *b, size_t len, struct recs *out)
{
    size_t i = 0;
    while (i < len) {
        struct rec r;
        memset(&r, 0, sizeof r);
        r.op = b[i++];
        bool ok = true;
        switch (r.op) {
        case SERTRACE_REC_ENTER:
            ok = i < len;
            if (ok)
                r.tag = b[i++];
            ok = ok && get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.type) &&
                 get_varint(b, len, &i, &r.addr) && get_varint(b, len, &i, &r.length) &&
                 get_varint(b, len, &i, &r.pos);
            break;
        case SERTRACE_REC_EXIT:
            ok = get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.pos);
            break;
        case SERTRACE_REC_TYPE:
            ok = get_varint(b, len, &i, &r.type) && get_str(b, len, &i, &r.s1, &r.s1_len);
            break;
        case SERTRACE_REC_ERROR:
            ok = i < len;
            if (ok)
                r.tag = b[i++];
            ok = ok && get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.type) &&
                 get_str(b, len, &i, &r.s1, &r.s1_len) && get_str(b, len, &i, &r.s2, &r.s2_len);
            break;
        case SERTRACE_REC_NOTE:
            ok = get_varint(b, len, &i, &r.depth) && get_str(b, len, &i, &r.s1, &r.s1_len) &&
                 get_str(b, len, &i, &r.s2, &r.s2_len);
            break;
        default:
            ok = false;
        }
        if (!ok)
            return false;
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 64;
            out->v = realloc(out->v, out->cap * sizeof *out->v);
        }
        out->v[out->n++] = r;
    }
    return true;
}

/* Everything decoded, freed after each test (keeps ASan's leak check clean). */
#define MAX_DECODED MAX_DUMPS
static struct recs decoded[MAX_DECODED];
static size_t ndecoded;

static void free_all(void)
{
    for (size_t k = 0; k < ndecoded; k++) {
        for (size_t i = 0; i < decoded[k].n; i++) {
            free(decoded[k].v[i].s1);
            free(decoded[k].v[i].s2);
        }
        free(decoded[k].v);
    }
    ndecoded = 0;
    for (size_t k = 0; k < ndumps; k++) {
        free(dumps[k].records);
        free(dumps[k].batches);
    }
    ndumps = 0;
}

/* Decode every batch of a dump, checking batch bounds and seq order. */
static struct recs decode_dump(const struct captured_dump *c)
{
    struct recs r = {NULL, 0, 0};
    size_t off = 0;
    for (size_t k = 0; k < c->nbatches; k++) {
        cr_assert_eq(c->batches[k].seq, k, "batch seq %u at %zu", c->batches[k].seq, k);
        cr_assert_leq(c->batches[k].len, SERTRACE_BATCH_BYTES);
        cr_assert_gt(c->batches[k].len, 0);
        cr_assert(decode_batch(c->records + off, c->batches[k].len, &r),
                  "batch %zu does not hold whole records", k);
        off += c->batches[k].len;
    }
    cr_assert_lt(ndecoded, MAX_DECODED);
    decoded[ndecoded++] = r;
    return r;
}

static const struct captured_dump *only_dump(void)
{
    cr_assert_eq(ndumps, 1, "expected one captured dump, got %zu", ndumps);
    cr_assert(dumps[0].ended);
    return &dumps[0];
}

/* Rebuild sizes from ENTER/EXIT records and check them against `want`
 * (bytes per node, in enter order). */
static void check_sizes(const struct recs *r, const uint64_t *want, size_t nwant)
{
    uint64_t stack_pos[64];
    size_t stack_idx[64];
    uint64_t got[256];
    size_t depth = 0, nodes = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].op == SERTRACE_REC_ENTER) {
            cr_assert_eq(r->v[i].depth, depth + 1);
            stack_pos[depth] = r->v[i].pos;
            stack_idx[depth] = nodes++;
            depth++;
        } else if (r->v[i].op == SERTRACE_REC_EXIT) {
            cr_assert_eq(r->v[i].depth, depth);
            depth--;
            got[stack_idx[depth]] = r->v[i].pos - stack_pos[depth];
        }
    }
    cr_assert_eq(depth, 0);
    cr_assert_eq(nodes, nwant);
    for (size_t i = 0; i < nwant; i++)
        cr_expect_eq(got[i], want[i], "node %zu: %llu bytes, want %llu", i,
                     (unsigned long long)got[i], (unsigned long long)want[i]);
}

/* ---- tests ------------------------------------------------------------- */

Test(runtime, nesting_and_exact_sizes)
{
    static int dict_type, list_type;
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    cr_expect(sertrace_dump_flags(d) & SERTRACE_DUMP_ACTIVE);
    cr_expect_eq(sertrace_current_dump(), d);

    uint32_t td = sertrace_type(d, &dict_type, "dict");
    uint32_t tl = sertrace_type(d, &list_type, "list");
    cr_expect_eq(td, 1);
    cr_expect_eq(tl, 2);
    /* Payload: 2 header bytes, dict{ list[3 items], list[] }, 1 trailer. */
    sertrace_enter(d, SERTRACE_TAG_DICT, td, 0x1000, 3, 2);
    cr_expect_eq(sertrace_depth(d), 1);
    sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x2000, 4, 5);
    cr_expect_eq(sertrace_depth(d), 2);
    sertrace_exit(d, 17);
    sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x3000, 1, 17);
    sertrace_exit(d, 19);
    sertrace_exit(d, 300);
    cr_expect_eq(sertrace_depth(d), 0);
    sertrace_dump_end(d, 301, SERTRACE_STATUS_OK);
    cr_expect_null(sertrace_current_dump());

    const struct captured_dump *c = only_dump();
    cr_expect_str_eq(c->serializer, "pickle");
    cr_expect_eq(c->protocol, 5);
    cr_expect_eq(c->bytes, 301);
    cr_expect_eq(c->status, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(c);
    cr_assert_eq(r.n, 2 + 3 + 3);
    cr_expect_eq(r.v[0].op, SERTRACE_REC_TYPE);
    cr_expect_str_eq(r.v[0].s1, "dict");
    cr_expect_eq(r.v[0].type, 1);
    cr_expect_eq(r.v[1].op, SERTRACE_REC_TYPE);
    cr_expect_str_eq(r.v[1].s1, "list");
    cr_expect_eq(r.v[2].op, SERTRACE_REC_ENTER);
    cr_expect_eq(r.v[2].tag, SERTRACE_TAG_DICT);
    cr_expect_eq(r.v[2].type, 1);
    cr_expect_eq(r.v[2].addr, 0x1000);
    cr_expect_eq(r.v[2].length, 3);
    cr_expect_eq(r.v[2].pos, 2);
    cr_expect_eq(r.v[3].addr, 0x2000);
    cr_expect_eq(r.v[3].depth, 2);
    static const uint64_t want[] = {298, 12, 2};
    check_sizes(&r, want, 3);
}

Test(runtime, large_values_roundtrip)
{
    sertrace_dump *d = sertrace_dump_begin("x", -1);
    cr_assert_not_null(d);
    sertrace_enter(d, 255, 0, UINTPTR_MAX, UINT64_MAX, UINT64_MAX - 10);
    sertrace_exit(d, UINT64_MAX);
    sertrace_dump_end(d, UINT64_MAX, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 2);
    cr_expect_eq(r.v[0].tag, 255);
    cr_expect_eq(r.v[0].addr, (uint64_t)UINTPTR_MAX);
    cr_expect_eq(r.v[0].length, UINT64_MAX);
    cr_expect_eq(r.v[0].pos, UINT64_MAX - 10);
    cr_expect_eq(r.v[1].pos, UINT64_MAX);
    cr_expect_eq(dumps[0].protocol, -1);
    cr_expect_eq(dumps[0].bytes, UINT64_MAX);
}

Test(runtime, batches_split_at_4k_without_splitting_records)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    uint64_t pos = 0;
    const int n = 5000;
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, n + 1, pos);
    for (int i = 0; i < n; i++) {
        sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, 0x7f0000000000 + (uint64_t)i * 64, 3, pos);
        pos += 1000 + (uint64_t)i;
        if (i % 100 == 0)
            sertrace_note(d, "i", "a note inside the batch");
        sertrace_exit(d, pos);
    }
    sertrace_exit(d, pos);
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);

    const struct captured_dump *c = only_dump();
    cr_expect_gt(c->nbatches, 10);
    /* All but the last batch are nearly full: a record is at most 52 B here
     * except notes (~30 B), so the unused tail is below that. */
    for (size_t k = 0; k + 1 < c->nbatches; k++)
        cr_expect_gt(c->batches[k].len, SERTRACE_BATCH_BYTES - 64, "batch %zu: %u", k,
                     c->batches[k].len);
    struct recs r = decode_dump(c);
    size_t enters = 0, exits = 0, notes = 0;
    for (size_t i = 0; i < r.n; i++) {
        enters += r.v[i].op == SERTRACE_REC_ENTER;
        exits += r.v[i].op == SERTRACE_REC_EXIT;
        notes += r.v[i].op == SERTRACE_REC_NOTE;
    }
    cr_expect_eq(enters, (size_t)n + 1);
    cr_expect_eq(exits, (size_t)n + 1);
    cr_expect_eq(notes, 50);
    /* Every child's size is exact. */
    size_t child = 0;
    for (size_t i = 0; i < r.n; i++) {
        if (r.v[i].op == SERTRACE_REC_ENTER && r.v[i].depth == 2) {
            size_t j = i + 1;
            while (r.v[j].op != SERTRACE_REC_EXIT)
                j++;
            cr_assert_eq(r.v[j].pos - r.v[i].pos, 1000 + child);
            child++;
        }
    }
    cr_expect_eq(child, (size_t)n);
}

Test(runtime, type_interned_once_per_dump)
{
    static int t_a, t_b;
    for (int dump = 0; dump < 2; dump++) {
        sertrace_dump *d = sertrace_dump_begin("pickle", 5);
        cr_expect_eq(sertrace_type_known(d, &t_a), 0);
        uint32_t a = sertrace_type(d, &t_a, "pkg.A");
        cr_expect_eq(a, 1);
        cr_expect_eq(sertrace_type_known(d, &t_a), 1);
        for (int i = 0; i < 100; i++) {
            cr_expect_eq(sertrace_type(d, &t_a, "ignored"), 1);
            sertrace_enter(d, SERTRACE_TAG_INSTANCE, a, (uintptr_t)i, 0, (uint64_t)i);
            sertrace_exit(d, (uint64_t)i + 1);
        }
        cr_expect_eq(sertrace_type(d, &t_b, NULL), 2);
        sertrace_dump_end(d, 100, SERTRACE_STATUS_OK);
    }
    cr_assert_eq(ndumps, 2);
    for (int k = 0; k < 2; k++) {
        struct recs r = decode_dump(&dumps[k]);
        size_t types = 0;
        for (size_t i = 0; i < r.n; i++)
            if (r.v[i].op == SERTRACE_REC_TYPE) {
                types++;
                if (r.v[i].type == 1)
                    cr_expect_str_eq(r.v[i].s1, "pkg.A");
                else
                    cr_expect_eq(r.v[i].s1_len, 0);
            }
        cr_expect_eq(types, 2, "dump %d: %zu TYPE records", k, types);
        cr_expect_eq(r.v[0].op, SERTRACE_REC_TYPE, "TYPE before first use");
    }
    cr_expect_neq(dumps[0].id, dumps[1].id);
}

Test(runtime, many_types_grow_the_table)
{
    static char keys[5000];
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "T%d", i);
        cr_assert_eq(sertrace_type(d, &keys[i], name), (uint32_t)i + 1);
    }
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(sertrace_type_known(d, &keys[i]), (uint32_t)i + 1);
    sertrace_dump_end(d, 0, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 5000);
    cr_expect_str_eq(r.v[4999].s1, "T4999");
}

Test(runtime, error_and_note_paths)
{
    static int t;
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_note(d, "dump", "level"); /* no node open: depth 0 */
    uint32_t ty = sertrace_type(d, &t, "make_counter.<locals>.incr");
    sertrace_enter(d, SERTRACE_TAG_DICT, 0, 0x10, 2, 2);
    sertrace_note(d, "ip", "42");
    sertrace_enter(d, SERTRACE_TAG_INSTANCE, 0, 0x20, 0, 10);
    sertrace_error(d, SERTRACE_TAG_FUNCTION, ty, "Can't pickle local object",
                   "State.suspended[3].frame.stack[2]");
    sertrace_dump_end(d, 25, SERTRACE_STATUS_ERROR);

    const struct captured_dump *c = only_dump();
    cr_expect_eq(c->status, SERTRACE_STATUS_ERROR);
    struct recs r = decode_dump(c);
    cr_assert_eq(r.n, 6);
    cr_expect_eq(r.v[0].op, SERTRACE_REC_NOTE);
    cr_expect_eq(r.v[0].depth, 0);
    cr_expect_str_eq(r.v[0].s1, "dump");
    cr_expect_str_eq(r.v[0].s2, "level");
    cr_expect_eq(r.v[3].op, SERTRACE_REC_NOTE);
    cr_expect_eq(r.v[3].depth, 1);
    cr_expect_str_eq(r.v[3].s1, "ip");
    cr_expect_str_eq(r.v[3].s2, "42");
    cr_expect_eq(r.v[5].op, SERTRACE_REC_ERROR);
    cr_expect_eq(r.v[5].tag, SERTRACE_TAG_FUNCTION);
    cr_expect_eq(r.v[5].depth, 2);
    cr_expect_eq(r.v[5].type, ty);
    cr_expect_str_eq(r.v[5].s1, "Can't pickle local object");
    cr_expect_str_eq(r.v[5].s2, "State.suspended[3].frame.stack[2]");
    /* No EXIT records are invented for the nodes the error left open. */
    for (size_t i = 0; i < r.n; i++)
        cr_expect_neq(r.v[i].op, SERTRACE_REC_EXIT);
}

Test(runtime, error_with_null_strings)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_error(d, SERTRACE_TAG_UNKNOWN, 0, NULL, NULL);
    sertrace_note(d, NULL, NULL);
    sertrace_dump_end(d, 0, SERTRACE_STATUS_ERROR);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 2);
    cr_expect_eq(r.v[0].s1_len, 0);
    cr_expect_eq(r.v[0].s2_len, 0);
    cr_expect_eq(r.v[1].s1_len, 0);
}

Test(runtime, strings_longer_than_max_are_cut)
{
    static int t;
    size_t big = SERTRACE_STRING_MAX * 3;
    char *s = malloc(big + 1);
    memset(s, 'x', big);
    s[big] = '\0';
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_type(d, &t, s);
    sertrace_error(d, 0, 1, s, s);
    sertrace_note(d, s, s);
    sertrace_dump_end(d, 0, SERTRACE_STATUS_ERROR);
    free(s);
    const struct captured_dump *c = only_dump();
    struct recs r = decode_dump(c);
    cr_assert_eq(r.n, 3);
    cr_expect_eq(r.v[0].s1_len, SERTRACE_STRING_MAX);
    cr_expect_eq(r.v[1].s1_len, SERTRACE_STRING_MAX);
    cr_expect_eq(r.v[1].s2_len, SERTRACE_STRING_MAX);
    cr_expect_eq(r.v[2].s1_len, SERTRACE_STRING_MAX);
    cr_expect_eq(r.v[2].s2_len, SERTRACE_STRING_MAX);
    /* The ERROR (2 x 1000 B) and the NOTE do not fit one 4 KiB batch with
     * the TYPE: they went to separate batches, none split. */
    cr_expect_eq(c->nbatches, 2);
}

Test(runtime, misuse_exit_without_enter)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_exit(d, 5);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 1, 0);
    sertrace_exit(d, 2);
    sertrace_exit(d, 3);
    cr_expect_eq(sertrace_depth(d), 0);
    sertrace_dump_end(d, 3, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 4);
    cr_expect_eq(r.v[0].op, SERTRACE_REC_ERROR);
    cr_expect_str_eq(r.v[0].s1, "exit without enter");
    cr_expect_eq(r.v[0].depth, 0);
    cr_expect_eq(r.v[1].op, SERTRACE_REC_ENTER);
    cr_expect_eq(r.v[2].op, SERTRACE_REC_EXIT);
    cr_expect_eq(r.v[3].op, SERTRACE_REC_ERROR);
    cr_expect_str_eq(r.v[3].s1, "exit without enter");
}

Test(runtime, misuse_enter_without_exit)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 1, 0);
    sertrace_dump_end(d, 3, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 2);
    cr_expect_eq(r.v[1].op, SERTRACE_REC_ERROR);
    cr_expect_str_eq(r.v[1].s1, "enter without exit");
}

Test(runtime, misuse_null_handle_is_a_noop)
{
    sertrace_enter(NULL, 1, 1, 1, 1, 1);
    sertrace_exit(NULL, 1);
    sertrace_error(NULL, 1, 1, "m", "p");
    sertrace_note(NULL, "k", "v");
    sertrace_dump_end(NULL, 1, 0);
    cr_expect_eq(sertrace_type(NULL, "k", "n"), 0);
    cr_expect_eq(sertrace_type_known(NULL, "k"), 0);
    cr_expect_eq(sertrace_depth(NULL), 0);
    cr_expect_eq(sertrace_dump_flags(NULL), 0);
    cr_expect_null(sertrace_current_dump());
    sertrace_note(sertrace_current_dump(), "k", "v");
    cr_expect_eq(ndumps, 0);
}

Test(runtime, misuse_depth_cap)
{
    sertrace_internal_set_max_depth(10);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    for (int i = 0; i < 15; i++)
        sertrace_enter(d, SERTRACE_TAG_LIST, 0, (uintptr_t)i, 0, (uint64_t)i);
    cr_expect_eq(sertrace_depth(d), 15);
    for (int i = 15; i > 0; i--)
        sertrace_exit(d, 100 - (uint64_t)i);
    cr_expect_eq(sertrace_depth(d), 0);
    sertrace_exit(d, 100); /* one too many */
    sertrace_dump_end(d, 100, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    size_t enters = 0, exits = 0, errors = 0;
    for (size_t i = 0; i < r.n; i++) {
        enters += r.v[i].op == SERTRACE_REC_ENTER;
        exits += r.v[i].op == SERTRACE_REC_EXIT;
        if (r.v[i].op == SERTRACE_REC_ERROR) {
            errors++;
            if (errors == 1) {
                cr_expect(strstr(r.v[i].s1, "too deep") != NULL, "%s", r.v[i].s1);
                cr_expect_eq(r.v[i].depth, 10);
            } else {
                cr_expect_str_eq(r.v[i].s1, "exit without enter");
            }
        }
    }
    cr_expect_eq(enters, 10);
    cr_expect_eq(exits, 10);
    cr_expect_eq(errors, 2);
    /* The 10 recorded nodes are the outermost ones, closed by the last 10
     * exits: the root spans 0 .. 99. */
    cr_expect_eq(r.v[r.n - 2].op, SERTRACE_REC_EXIT);
    cr_expect_eq(r.v[r.n - 2].depth, 1);
    cr_expect_eq(r.v[r.n - 2].pos, 99);
}

Test(runtime, deep_nesting_grows_the_stack)
{
    const int depth = 100000;
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    for (int i = 0; i < depth; i++)
        sertrace_enter(d, SERTRACE_TAG_LIST, 0, (uintptr_t)i, 2, (uint64_t)i);
    cr_expect_eq(sertrace_depth(d), (uint32_t)depth);
    for (int i = depth - 1; i >= 0; i--)
        sertrace_exit(d, 2 * (uint64_t)depth - (uint64_t)i);
    sertrace_dump_end(d, 2 * (uint64_t)depth, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_expect_eq(r.n, 2 * (size_t)depth);
    cr_expect_eq(r.v[depth - 1].depth, (uint64_t)depth);
    cr_expect_eq(r.v[depth].pos - r.v[depth - 1].pos, 2);                   /* innermost node */
    cr_expect_eq(r.v[2 * depth - 1].pos - r.v[0].pos, 2 * (uint64_t)depth); /* root */
}

Test(runtime, nested_dumps_on_one_thread)
{
    sertrace_dump *outer = sertrace_dump_begin("pickle", 5);
    sertrace_enter(outer, SERTRACE_TAG_INSTANCE, 0, 1, 0, 0);
    sertrace_dump *inner = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(inner);
    cr_expect_neq(inner, outer);
    cr_expect_eq(sertrace_current_dump(), inner);
    cr_expect_eq(sertrace_depth(inner), 0);
    sertrace_enter(inner, SERTRACE_TAG_DICT, 0, 2, 1, 0);
    sertrace_exit(inner, 7);
    sertrace_dump_end(inner, 8, SERTRACE_STATUS_OK);
    cr_expect_eq(sertrace_current_dump(), outer);
    sertrace_exit(outer, 40);
    sertrace_dump_end(outer, 41, SERTRACE_STATUS_OK);
    cr_expect_null(sertrace_current_dump());
    cr_assert_eq(ndumps, 2);
    cr_expect_neq(dumps[0].id, dumps[1].id);
    const struct captured_dump *o = find_dump(dumps[0].id);
    const struct captured_dump *in = &dumps[1];
    struct recs ro = decode_dump(o), ri = decode_dump(in);
    cr_expect_eq(ro.n, 2);
    cr_expect_eq(ri.n, 2);
    cr_expect_eq(ri.v[0].addr, 2);
    cr_expect_eq(ro.v[1].pos, 40);
    /* A handle is reused from the pool: the next dump gets a fresh id. */
    sertrace_dump *again = sertrace_dump_begin("pickle", 5);
    sertrace_dump_end(again, 0, SERTRACE_STATUS_OK);
    cr_expect_eq(ndumps, 3);
    cr_expect_gt(dumps[2].id, dumps[0].id);
}

Test(runtime, dump_ended_twice_is_ignored)
{
    sertrace_dump *a = sertrace_dump_begin("a", 1);
    sertrace_dump_end(a, 1, SERTRACE_STATUS_OK);
    sertrace_dump_end(a, 2, SERTRACE_STATUS_OK); /* misuse: must not corrupt the pool */
    sertrace_dump *b = sertrace_dump_begin("b", 1);
    sertrace_dump *c = sertrace_dump_begin("c", 1);
    cr_expect_neq(b, c, "the pool must not hand out one handle twice");
    sertrace_dump_end(c, 0, SERTRACE_STATUS_OK);
    sertrace_dump_end(b, 0, SERTRACE_STATUS_OK);
    cr_expect_eq(ndumps, 3);
    cr_expect_eq(dumps[0].bytes, 1);
}

Test(runtime, dumps_ended_out_of_order)
{
    sertrace_dump *a = sertrace_dump_begin("a", 1);
    sertrace_dump *b = sertrace_dump_begin("b", 1);
    sertrace_dump *c = sertrace_dump_begin("c", 1);
    sertrace_dump_end(b, 0, SERTRACE_STATUS_OK); /* middle first */
    cr_expect_eq(sertrace_current_dump(), c);
    sertrace_dump_end(c, 0, SERTRACE_STATUS_OK);
    cr_expect_eq(sertrace_current_dump(), a);
    sertrace_dump_end(a, 0, SERTRACE_STATUS_OK);
    cr_expect_null(sertrace_current_dump());
    cr_expect_eq(ndumps, 3);
}

/* 8 threads, each its own dumps with a thread-specific shape: no
 * cross-talk (every record of a dump belongs to its thread). */
#define THREADS 8
#define DUMPS_PER_THREAD 50

static void *thread_main(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    static int types[THREADS];
    for (int k = 0; k < DUMPS_PER_THREAD; k++) {
        sertrace_dump *d = sertrace_dump_begin("pickle", (int)t);
        char name[32];
        snprintf(name, sizeof name, "thread%u.T", (unsigned)t);
        uint32_t ty = sertrace_type(d, &types[t], name);
        uint64_t pos = 0;
        int width = 10 + (int)t * 30; /* different sizes per thread */
        sertrace_enter(d, SERTRACE_TAG_LIST, ty, (t << 32), (uint64_t)width + 1, pos);
        for (int i = 0; i < width; i++) {
            sertrace_enter(d, SERTRACE_TAG_TUPLE, ty, (t << 32) | (uint64_t)i, 0, pos);
            pos += t + 1;
            sertrace_exit(d, pos);
        }
        sertrace_exit(d, pos);
        cr_assert_eq(sertrace_current_dump(), d);
        sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
    }
    return NULL;
}

Test(runtime, eight_threads_no_cross_talk)
{
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, thread_main, (void *)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    cr_assert_eq(ndumps, THREADS * DUMPS_PER_THREAD);
    for (size_t k = 0; k < ndumps; k++) {
        const struct captured_dump *c = &dumps[k];
        uint64_t t = (uint64_t)c->protocol;
        int width = 10 + (int)t * 30;
        cr_assert(c->ended);
        cr_expect_eq(c->bytes, (uint64_t)width * (t + 1));
        struct recs r = decode_dump(c);
        cr_assert_eq(r.n, 1 + 2 * (size_t)(width + 1));
        char name[32];
        snprintf(name, sizeof name, "thread%u.T", (unsigned)t);
        cr_expect_str_eq(r.v[0].s1, name);
        for (size_t i = 1; i < r.n; i++) {
            if (r.v[i].op == SERTRACE_REC_ENTER)
                cr_assert_eq(r.v[i].addr >> 32, t, "dump %zu record %zu", k, i);
            else
                cr_assert_eq(r.v[i].op, SERTRACE_REC_EXIT);
        }
        cr_expect_eq(r.v[r.n - 1].pos, (uint64_t)width * (t + 1));
    }
    /* Dump ids are unique. */
    for (size_t a = 0; a < ndumps; a++)
        for (size_t b = a + 1; b < ndumps; b++)
            cr_assert_neq(dumps[a].id, dumps[b].id);
}

Test(runtime, serializer_name_cut_to_63)
{
    char name[200];
    memset(name, 's', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    sertrace_dump *d = sertrace_dump_begin(name, 1);
    sertrace_dump_end(d, 0, 0);
    cr_expect_eq(strlen(only_dump()->serializer), 63);
    sertrace_dump *n = sertrace_dump_begin(NULL, 1);
    cr_assert_not_null(n);
    sertrace_dump_end(n, 0, 0);
    cr_expect_str_eq(dumps[1].serializer, "");
}

Test(runtime, no_listener_gives_null)
{
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    /* An LTTng session of someone else may have enabled sertrace:*; then
     * the handle exists and says so. */
    if (d != NULL) {
        cr_expect(sertrace_dump_flags(d) & SERTRACE_DUMP_LTTNG);
        sertrace_dump_end(d, 0, 0);
    }
    cr_expect_eq(ndumps, 0);
}

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

static char *read_fd_all(int fd)
{
    static char buf[1 << 20];
    size_t n = 0;
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void reset_fd(int fd)
{
    cr_assert_eq(ftruncate(fd, 0), 0);
    lseek(fd, 0, SEEK_SET);
}

static int temp_fd(char *path_out)
{
    strcpy(path_out, "/tmp/sertrace-runtime-test-XXXXXX");
    int fd = mkstemp(path_out);
    cr_assert_geq(fd, 0);
    return fd;
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
static void normalise_header(char *s)
{
    char *p;
    while ((p = strstr(s, " pid ")) != NULL) {
        char *end = strstr(p, " pickle");
        if (end == NULL)
            break;
        memmove(p, end, strlen(end) + 1);
    }
}

static void small_text_dump(void)
{
    static int t_dict, t_state, t_fn;
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    cr_assert(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT);
    uint32_t td = sertrace_type(d, &t_dict, "dict");
    uint32_t ts = sertrace_type(d, &t_state, "dispatch.scheduler.State");
    uint32_t tf = sertrace_type(d, &t_fn, "make_counter.<locals>.incr\n");
    sertrace_enter(d, SERTRACE_TAG_DICT, td, 0x7710bc313000, 3, 2);
    sertrace_enter(d, SERTRACE_TAG_CLASS, ts, 0x5000, 0, 3);
    sertrace_exit(d, 34);
    sertrace_note(d, "frame", "ip=42");
    sertrace_enter(d, SERTRACE_TAG_DICT, td, 0x7710bc313a40, 2, 34);
    sertrace_exit(d, 34 + 2000);
    sertrace_enter(d, SERTRACE_TAG_FUNCTION, tf, 0x7f00, 0, 2034);
    sertrace_error(d, SERTRACE_TAG_FUNCTION, tf, "Can't pickle local object", "State.suspended[3]");
    sertrace_dump_end(d, 2040, SERTRACE_STATUS_ERROR);
}

static const char golden_text[] =
    "# sertrace dump 1 pickle protocol 5\n"
    "┬ D2: <dict object at 0x7710bc313000> len=2\n"
    "├┬ T4: <class 'dispatch.scheduler.State'>\n"
    "│└ # T4 [31 B]\n"
    "│ @ frame = ip=42\n"
    "├┬ D2: <dict object at 0x7710bc313a40> len=1\n"
    "│└ # D2 [1.9 KiB]  !! OVERSIZED (≥ 1.0 KiB)\n"
    "├┬ F2: <function make_counter.<locals>.incr\\x0a at 0x7f00>\n"
    "││ !! UNSERIALIZABLE F2 make_counter.<locals>.incr\\x0a: Can't pickle local object at "
    "State.suspended[3]\n"
    "│└ # F2 [≥ 6 B]  !! FAILED inside !! UNSERIALIZABLE\n"
    "└ # D2 [≥ 1.9 KiB]  !! OVERSIZED (≥ 1.0 KiB) !! FAILED inside\n"
    "# end dump 1: 1.9 KiB (2040 B), error, unfinished\n";

Test(text, golden_tree_to_file)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, "1K", NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    small_text_dump();
    char *out = read_fd_all(fd);
    normalise_header(out);
    cr_expect_str_eq(out, golden_text);
    close(fd);
    unlink(path);
}

Test(text, exact_sizes_and_append)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(write(fd, "previous line\n", 14), 14);
    cr_assert_eq(sertrace_internal_configure(path, NULL, "1K", "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    small_text_dump();
    char *out = read_fd_all(fd);
    cr_expect_eq(strncmp(out, "previous line\n# sertrace dump 1 pid ", 36), 0, "%s", out);
    cr_expect(strstr(out, "│└ # D2 [2000 B]  !! OVERSIZED (≥ 1024 B)\n") != NULL, "%s", out);
    cr_expect(strstr(out, "# end dump 1: 2040 B, error, unfinished\n") != NULL, "%s", out);
    close(fd);
    unlink(path);
}

/* sertrace_dump_lower_bounds(): a dump whose serializer could not count
 * every byte (a file it could not watch).  The live tree shows every size
 * of it, nodes and footer, as "at least"; the handle carries the flag; a
 * dump begun after it is exact again. */
static const char golden_lower[] =
    "# sertrace dump 1 pickle protocol 5\n"
    "┬ L: <list object at 0x10> len=1\n"
    "├┬ By: <bytes object at 0x20> len=4\n"
    "│└ # By [≥ 5 B]\n"
    "└ # L [≥ 1.5 KiB]  !! OVERSIZED (≥ 1.0 KiB)\n"
    "# end dump 1: ≥ 1.5 KiB (≥ 1600 B), ok, sizes are lower bounds\n"
    "# sertrace dump 2 pickle protocol 5\n"
    "┬ L: <list object at 0x10> len=1\n"
    "└ # L [9 B]\n"
    "# end dump 2: 10 B, ok\n";

Test(text, lower_bound_dump_shows_every_size_as_at_least)
{
    static int t_list, t_bytes;
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, "all", "1K", NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    cr_expect_not(sertrace_dump_flags(d) & SERTRACE_DUMP_LOWER_BOUNDS);
    sertrace_dump_lower_bounds(d);
    cr_expect(sertrace_dump_flags(d) & SERTRACE_DUMP_LOWER_BOUNDS);
    uint32_t tl = sertrace_type(d, &t_list, "list");
    uint32_t tb = sertrace_type(d, &t_bytes, "bytes");
    sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x10, 2, 2);
    sertrace_enter(d, SERTRACE_TAG_BYTES, tb, 0x20, 5, 4);
    sertrace_exit(d, 9);
    sertrace_exit(d, 1590);
    sertrace_dump_end(d, 1600, SERTRACE_STATUS_OK);
    d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    cr_expect_not(sertrace_dump_flags(d) & SERTRACE_DUMP_LOWER_BOUNDS, "not carried over");
    tl = sertrace_type(d, &t_list, "list");
    sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x10, 2, 0);
    sertrace_exit(d, 9);
    sertrace_dump_end(d, 10, SERTRACE_STATUS_OK);
    sertrace_dump_lower_bounds(NULL); /* no-op */
    char *out = read_fd_all(fd);
    normalise_header(out);
    cr_expect_str_eq(out, golden_lower);
    close(fd);
    unlink(path);
}

/* Issue 12 item 10: the serializer reports the failing object's own type
 * ("function") while the node it failed in was entered with the
 * function's qualified name; the live tree names the node as the report
 * does (its tag and the type of its enter line), in the report's order
 * (message, then path), and flags its exit line UNSERIALIZABLE.
 * tests/e2e compares the live and report flag lines of one real dump. */
Test(text, error_names_the_node_as_the_report_does)
{
    static int t_state, t_fn, t_function;
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    uint32_t ts = sertrace_type(d, &t_state, "app.State");
    uint32_t tf = sertrace_type(d, &t_fn, "notify_workflow.<locals>.render");
    uint32_t tfunction = sertrace_type(d, &t_function, "function");
    sertrace_enter(d, SERTRACE_TAG_INSTANCE, ts, 0x1000, 0, 2);
    sertrace_enter(d, SERTRACE_TAG_FUNCTION, tf, 0x2000, 0, 3);
    sertrace_error(d, SERTRACE_TAG_FUNCTION, tfunction,
                   "Can't get local object 'notify_workflow.<locals>.render'", "State.cb");
    sertrace_dump_end(d, 9, SERTRACE_STATUS_ERROR);
    char *out = read_fd_all(fd);
    normalise_header(out);
    cr_expect(strstr(out, "\n\u2502\u2502 !! UNSERIALIZABLE F2 notify_workflow.<locals>.render: "
                          "Can't get local object 'notify_workflow.<locals>.render' at "
                          "State.cb\n") != NULL,
              "%s", out);
    cr_expect(strstr(out, "'function'") == NULL, "%s", out);
    cr_expect(strstr(out, "\u2502\u2514 # F2 [\u2265 6 B]  !! FAILED inside !! UNSERIALIZABLE\n") !=
                  NULL,
              "%s", out);
    cr_expect(strstr(out, "\u2514 # O [\u2265 7 B]  !! FAILED inside\n") != NULL, "%s", out);
    close(fd);
    unlink(path);
}

Test(text, misuse_is_flagged)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("msgpack", -1);
    sertrace_exit(d, 1);
    sertrace_enter(d, SERTRACE_TAG_MAP, 0, 0x10, 1, 0);
    sertrace_dump_end(d, 5, SERTRACE_STATUS_OK);
    char *out = read_fd_all(fd);
    normalise_header(out);
    cr_expect(strstr(out, " msgpack\n") != NULL, "%s", out);
    cr_expect(strstr(out, " !! MISUSE: exit without enter\n") != NULL, "%s", out);
    cr_expect(strstr(out, "│ !! MISUSE: enter without exit\n") != NULL, "%s", out);
    /* closed at dump end after the misuse: its exit was lost (the report's
     * words), the bytes since it began a lower bound */
    cr_expect(strstr(out, "└ # Map [≥ 5 B]  ?? exit lost\n") != NULL, "%s", out);
    cr_expect(strstr(out, "# end dump 1: 5 B, ok, unfinished\n") != NULL, "%s", out);
    close(fd);
    unlink(path);
}

Test(text, write_error_disables_with_one_warning)
{
    char wpath[64];
    int wfd = temp_fd(wpath);
    /* /dev/full: open works, every write fails with ENOSPC. */
    cr_assert_eq(sertrace_internal_configure("/dev/full", NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    int saved = dup(2);
    dup2(wfd, 2);
    for (int k = 0; k < 3; k++) {
        sertrace_dump *d = sertrace_dump_begin("pickle", 5);
        if (d == NULL)
            continue; /* text turned off after the first failure */
        sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 1, 0);
        sertrace_exit(d, 2);
        sertrace_dump_end(d, 3, SERTRACE_STATUS_OK);
    }
    dup2(saved, 2);
    close(saved);
    char *w = read_fd_all(wfd);
    cr_expect_eq(count_lines(w), 1, "%s", w);
    cr_expect(strstr(w, "No space left on device") != NULL, "%s", w);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);
    close(wfd);
    unlink(wpath);
}

Test(text, closed_pipe_on_stderr_does_not_kill)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]); /* nobody reads */
    int saved = dup(2);
    dup2(p[1], 2);
    sertrace_internal_configure("stderr", NULL, NULL, NULL, -1);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 1, 0);
    sertrace_exit(d, 2);
    sertrace_dump_end(d, 3, SERTRACE_STATUS_OK); /* EPIPE, not SIGPIPE */
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    d = sertrace_dump_begin("pickle", 5);
    cr_expect(d == NULL || !(sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT));
    sertrace_dump_end(d, 0, 0);
    sigset_t pending;
    sigpending(&pending);
    cr_expect_eq(sigismember(&pending, SIGPIPE), 0);
}

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
        found = notice != NULL &&
                strstr(notice, " bytes of trace text dropped: the reader did not keep up\n") !=
                    NULL &&
                strstr(notice, "\n# end dump ") != NULL;
    }
    cr_expect(found, "no drop notice and whole dump after it: %.300s", s + (ns > 300 ? ns - 300 : 0));
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

static void *text_thread(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    for (int k = 0; k < 20; k++) {
        sertrace_dump *d = sertrace_dump_begin("pickle", (int)t);
        uint64_t pos = 0;
        sertrace_enter(d, SERTRACE_TAG_LIST, 0, t, 301, pos);
        for (int i = 0; i < 300; i++) {
            sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, t, 0, pos);
            pos += 3;
            sertrace_exit(d, pos);
        }
        sertrace_exit(d, pos);
        sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
    }
    return NULL;
}

Test(text, threads_never_interleave_inside_a_line)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, text_thread, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    struct stat st;
    fstat(fd, &st);
    char *buf = malloc((size_t)st.st_size + 1);
    lseek(fd, 0, SEEK_SET);
    cr_assert_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
    buf[st.st_size] = '\0';
    size_t lines = 0, headers = 0, footers = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        lines++;
        if (strncmp(line, "# sertrace dump ", 16) == 0)
            headers++;
        else if (strncmp(line, "# end dump ", 11) == 0) {
            footers++;
            cr_assert(strstr(line, ": 900 B, ok") != NULL, "%s", line);
        } else if (strncmp(line, "┬ L: <? object at 0x", 22) != 0 &&
                   strncmp(line, "├┬ Tu: <? object at 0x", 25) != 0 &&
                   strcmp(line, "│└ # Tu [3 B]") != 0 && strcmp(line, "└ # L [900 B]") != 0)
            cr_assert_fail("mangled line: '%s'", line);
    }
    cr_expect_eq(headers, THREADS * 20);
    cr_expect_eq(footers, THREADS * 20);
    cr_expect_eq(lines, THREADS * 20 * (2 + 2 + 600));
    free(buf);
    close(fd);
    unlink(path);
}

/* ---- the text probe's line fast path against the formatter ------------- */

/* The probe builds enter and exit lines itself (probes/text.c: cached
 * heads, chunked copies, its own hex and decimal digits).  This drives one
 * dump through the API with every tag value, depths up to 700 (past every
 * copy chunk boundary), names that need escaping, addresses and lengths of
 * every digit count and sizes on both sides of 1 KiB, and checks the file
 * byte for byte against sertrace_fmt_enter/exit (the one formatter), in
 * human and in exact sizes.  The text passes the 256 KiB flush size
 * several times, so mid-dump flushes are covered too. */

static uint64_t lcg_state;

static uint64_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lcg_state >> 11 ^ lcg_state << 21;
}

/* A value of a random number of significant bits (0 ... 64). */
static uint64_t any_width(void)
{
    unsigned bits = (unsigned)(lcg() % 65);
    uint64_t v = lcg();
    return bits == 0 ? 0 : bits == 64 ? v : (v & ((1ULL << bits) - 1)) | (1ULL << (bits - 1));
}

#define EQ_TYPES 40
#define EQ_NODES 4000
#define EQ_MAX_DEPTH 700

static char *read_path_all(const char *path, size_t *len)
{
    struct stat st;
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        cr_assert_gt(r, 0);
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    *len = n;
    return buf;
}

static void fast_lines_match_formatter(const char *exact)
{
    static int keys[EQ_TYPES];
    static char long_name[1200];
    const char *names[EQ_TYPES];
    char path[64];
    int fd = temp_fd(path);
    close(fd);
    cr_assert_eq(sertrace_internal_configure(path, NULL, "18446744073709551615", exact, 2), 0);
    sertrace_internal_set_hooks(NULL);
    bool ex = exact != NULL;

    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    long_name[7] = '\n'; /* the runtime cuts it to 1000 bytes, then it is escaped */
    for (int i = 0; i < EQ_TYPES; i++)
        names[i] = "mod.Type";
    names[1] = "dict";
    names[2] = "a\\b\tc\x7f\xc2\x85";
    names[3] = "caf\xc3\xa9 \xe2\x94\x82 \xf0\x9f\x90\x8d";
    names[4] = "bad\xff\xc0\x80\xed\xa0\x80";
    names[5] = long_name;
    names[6] = NULL; /* shown as "?" */
    names[7] = "";
    names[8] = "ends.at 0x0";
    names[9] = "q'uote";

    lcg_state = 12345;
    sertrace_buf want = SERTRACE_BUF_INIT;
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    uint32_t index[EQ_TYPES];
    for (int i = 0; i < EQ_TYPES; i++) {
        index[i] = sertrace_type(d, &keys[i], names[i]);
        cr_assert_eq(index[i], (uint32_t)i + 1);
    }
    struct {
        uint64_t pos;
        uint8_t tag;
    } stack[EQ_MAX_DEPTH + 1];
    uint32_t depth = 0;
    uint64_t pos = 0;
    for (int k = 0; k < EQ_NODES || depth > 0; k++) {
        bool deeper = depth == 0 || (k < EQ_NODES && depth < EQ_MAX_DEPTH &&
                                     (k < 1400 ? lcg() % 8 != 0 : lcg() % 2 == 0));
        if (deeper) {
            /* every tag value once, then random ones; types 1..40, 0, or
             * an index not interned (41: "?") */
            uint8_t tag = k < 256 ? (uint8_t)k : (uint8_t)lcg();
            uint32_t r = (uint32_t)(lcg() % (EQ_TYPES + 2));
            uint32_t type = r < EQ_TYPES ? index[r] : r == EQ_TYPES ? 0 : EQ_TYPES + 1;
            const char *name = type >= 1 && type <= EQ_TYPES ? names[type - 1] : NULL;
            size_t name_len = name ? strlen(name) : 0;
            if (name_len > SERTRACE_STRING_MAX)
                name_len = SERTRACE_STRING_MAX;
            uint64_t addr = any_width();
            uint64_t length = lcg() % 4 == 0 ? 0 : lcg() % 4 == 0 ? any_width() : lcg() % 20;
            sertrace_enter(d, tag, type, (uintptr_t)addr, length, pos);
            depth++;
            cr_assert_eq(sertrace_fmt_enter(&want, depth, tag, name, name_len, addr, length), 0);
            stack[depth].pos = pos;
            stack[depth].tag = tag;
            pos += lcg() % 3;
        } else {
            uint64_t step = lcg() % 3 == 0 ? lcg() % 1024 : lcg() % 4 == 0 ? any_width() >> 8 : 0;
            pos += step;
            sertrace_exit(d, pos);
            cr_assert_eq(
                sertrace_fmt_exit(&want, depth, stack[depth].tag, pos - stack[depth].pos, ex, NULL),
                0);
            depth--;
        }
    }
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);

    size_t len;
    char *out = read_path_all(path, &len);
    /* Every chunk after the first starts with "# continued dump 1 pid P
     * tid T" (same pid and tid as the header): check and drop those. */
    size_t markers = 0;
    char want_mark[96];
    long hpid, htid;
    cr_assert_eq(sscanf(out, "# sertrace dump 1 pid %ld tid %ld ", &hpid, &htid), 2);
    snprintf(want_mark, sizeof want_mark, "# continued dump 1 pid %ld tid %ld\n", hpid, htid);
    for (char *m = strstr(out, "\n# continued dump "); m != NULL;
         m = strstr(m, "\n# continued dump ")) {
        size_t ml = strlen(want_mark);
        cr_assert_eq(strncmp(m + 1, want_mark, ml), 0, "%.80s", m + 1);
        memmove(m + 1, m + 1 + ml, len - (size_t)(m + 1 + ml - out) + 1);
        len -= ml;
        markers++;
    }
    cr_expect_geq(markers, 2, "the dump passes the flush size at least twice");
    char *body = strchr(out, '\n');
    cr_assert_not_null(body);
    body++;
    cr_assert_gt(len, (size_t)(2 * 256 * 1024), "the dump should pass the flush size");
    cr_assert_eq(len, strlen(out));
    cr_assert_geq((size_t)(out + len - body), want.len);
    size_t i = 0;
    while (i < want.len && body[i] == want.data[i])
        i++;
    if (i < want.len) {
        size_t line = i;
        while (line > 0 && want.data[line - 1] != '\n')
            line--;
        cr_assert_fail("first difference at byte %zu:\n  want: %.200s\n  got:  %.200s", i,
                       want.data + line, body + line);
    }
    cr_expect_eq(strncmp(body + want.len, "# end dump ", 11), 0, "%.100s", body + want.len);
    sertrace_buf_free(&want);
    free(out);
    unlink(path);
}

Test(text, fast_lines_match_formatter_human_sizes)
{
    fast_lines_match_formatter(NULL);
}

Test(text, fast_lines_match_formatter_exact_sizes)
{
    fast_lines_match_formatter("1");
}

/* ---- chunks of concurrent dumps (review: interleaved live trees) -------- */

/* Four threads each write a text dump of > 300 KiB into one file, in two
 * phases separated by a barrier: every dump has written its first chunk
 * (passed the 256 KiB flush size) before any writes the rest, so other
 * threads' chunks always sit between a dump's chunks.  Reading the file
 * back, each chunk must name its dump (a header or a "# continued dump"
 * line), and the lines reassembled per dump must form balanced trees with
 * the sizes written. */
#define CHUNK_THREADS 4
#define CHUNK_PHASE_NODES 6000 /* x 2 lines x ~60 B: ~350 KiB per phase */

static pthread_barrier_t chunk_barrier;

static void chunk_phase(sertrace_dump *d, uintptr_t t, uint64_t *pos)
{
    static const uint8_t tags[CHUNK_THREADS] = {SERTRACE_TAG_TUPLE, SERTRACE_TAG_DICT,
                                                SERTRACE_TAG_SET, SERTRACE_TAG_INSTANCE};
    for (int i = 0; i < CHUNK_PHASE_NODES / (int)(t + 1); i++) {
        /* depth 2 + t: thread-specific depths and tags */
        for (uintptr_t k = 0; k <= t; k++)
            sertrace_enter(d, tags[t], 0, 0x100000 * (t + 1) + k, 0, *pos);
        *pos += t + 1;
        for (uintptr_t k = 0; k <= t; k++)
            sertrace_exit(d, *pos);
    }
}

static void *chunk_thread(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    uint64_t pos = 0;
    sertrace_dump *d = sertrace_dump_begin("pickle", (int)t);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, t, 0, pos);
    chunk_phase(d, t, &pos);
    pthread_barrier_wait(&chunk_barrier);
    chunk_phase(d, t, &pos);
    sertrace_exit(d, pos);
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
    return NULL;
}

struct reassembled {
    long pid, tid;
    int protocol;
    bool ended;
    uint32_t depth;
    uint8_t open_tags[64][8];
    size_t nodes, chunks, footer_bytes;
};

Test(text, continued_chunks_name_their_dump_across_threads)
{
    char path[64];
    int fd = temp_fd(path);
    close(fd);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    pthread_barrier_init(&chunk_barrier, NULL, CHUNK_THREADS);
    pthread_t th[CHUNK_THREADS];
    for (uintptr_t t = 0; t < CHUNK_THREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, chunk_thread, (void *)t), 0);
    for (int t = 0; t < CHUNK_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&chunk_barrier);

    size_t len;
    char *out = read_path_all(path, &len);
    struct reassembled dumps_seen[CHUNK_THREADS + 1];
    memset(dumps_seen, 0, sizeof dumps_seen);
    struct reassembled *cur = NULL; /* the dump the next line belongs to */
    char *prev_line = NULL;
    size_t lineno = 0, switches = 0;
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        unsigned long long id;
        long pid, tid;
        size_t footer;
        int proto, n = 0;
        lineno++;
        if (sscanf(line, "# sertrace dump %llu pid %ld tid %ld pickle protocol %d%n", &id, &pid,
                   &tid, &proto, &n) == 4 &&
            line[n] == '\0') {
            cr_assert(id >= 1 && id <= CHUNK_THREADS, "line %zu: %s", lineno, line);
            cur = &dumps_seen[id];
            cr_assert_eq(cur->chunks, 0, "line %zu: second header of dump %llu", lineno, id);
            cur->pid = pid;
            cur->tid = tid;
            cur->protocol = proto;
            cur->chunks = 1;
            switches++;
        } else if (sscanf(line, "# continued dump %llu pid %ld tid %ld%n", &id, &pid, &tid, &n) ==
                       3 &&
                   line[n] == '\0') {
            cr_assert(id >= 1 && id <= CHUNK_THREADS, "line %zu: %s", lineno, line);
            cur = &dumps_seen[id];
            cr_assert_gt(cur->chunks, 0, "line %zu: continues a dump not begun", lineno);
            cr_assert(!cur->ended, "line %zu: continues an ended dump", lineno);
            cr_assert_eq(pid, cur->pid);
            cr_assert_eq(tid, cur->tid, "line %zu: tid differs from the header's", lineno);
            cur->chunks++;
            switches++;
        } else if (sscanf(line, "# end dump %llu: %zu B, ok%n", &id, &footer, &n) == 2) {
            cr_assert_not_null(cur, "line %zu: footer outside any dump", lineno);
            cur->footer_bytes = footer;
            cr_assert_eq(cur, &dumps_seen[id], "line %zu: footer of another dump", lineno);
            cr_assert_eq(cur->depth, 0, "line %zu: dump %llu ends unbalanced", lineno, id);
            /* The footer is written with the dump's last lines. */
            cr_assert(prev_line != NULL && prev_line[0] != '#', "line %zu: footer alone", lineno);
            cur->ended = true;
            cur = NULL;
        } else {
            cr_assert_not_null(cur, "line %zu belongs to no dump: %s", lineno, line);
            cr_assert(!cur->ended);
            /* bars then "┬ " / "├┬ " (enter) or "└ # " (exit) */
            uint32_t bars = 0;
            const char *p = line;
            while (strncmp(p, "│", 3) == 0) {
                p += 3;
                bars++;
            }
            uint32_t t = (uint32_t)cur->protocol;
            if (strncmp(p, "┬ ", 4) == 0 || strncmp(p, "├┬ ", 6) == 0) {
                uint32_t depth = p[0] == '\xe2' && p[2] == '\xac' ? 1 : bars + 2;
                cr_assert_eq(depth, cur->depth + 1, "line %zu: enter at depth %u, %u open: %s",
                             lineno, depth, cur->depth, line);
                cr_assert_lt(depth, 64);
                cur->depth = depth;
                cur->nodes++;
                if (depth >= 2)
                    cr_assert_eq(depth, 2 + (cur->nodes - 2) % (t + 1),
                                 "line %zu: node shape of another thread: %s", lineno, line);
            } else if (strncmp(p, "└ # ", 6) == 0) {
                cr_assert_eq(bars + 1, cur->depth, "line %zu: exit at depth %u, %u open: %s",
                             lineno, bars + 1, cur->depth, line);
                cur->depth--;
            } else {
                cr_assert_fail("line %zu: not a tree line: %s", lineno, line);
            }
        }
        prev_line = line;
    }
    for (int id = 1; id <= CHUNK_THREADS; id++) {
        const struct reassembled *r = &dumps_seen[id];
        uint32_t t = (uint32_t)r->protocol;
        cr_expect(r->ended, "dump %d never ended", id);
        cr_expect_geq(r->chunks, 2, "dump %d: %zu chunks", id, r->chunks);
        size_t per_phase = CHUNK_PHASE_NODES / (t + 1) * (t + 1);
        cr_expect_eq(r->nodes, 1 + 2 * per_phase);
        cr_expect_eq(r->footer_bytes, 2 * per_phase);
    }
    /* Chunks did interleave (else the test proves nothing). */
    cr_expect_gt(switches, CHUNK_THREADS + 1);
    free(out);
    unlink(path);
}

/* Liveness: a long dump's text reaches the file before the dump ends (all
 * but its newest line, which waits to go out with the next chunk). */
Test(text, long_dump_is_written_while_it_runs)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    uint64_t pos = 0;
    struct stat st;
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 0, pos);
    for (int i = 0; i < 8000; i++) {
        sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, 0x1000 + (uint64_t)i, 3, pos);
        sertrace_exit(d, ++pos);
    }
    cr_assert_eq(fstat(fd, &st), 0);
    cr_expect_geq(st.st_size, 256 * 1024 - 200, "nothing written mid-dump: %lld",
                  (long long)st.st_size);
    sertrace_exit(d, pos);
    sertrace_dump_end(d, pos, SERTRACE_STATUS_OK);
    close(fd);
    unlink(path);
}

/* ---- a dump ended on another thread (review: dangling current pointer) -- */

struct cross {
    sertrace_dump *d;     /* begun by the main thread */
    sertrace_dump *other; /* the ender's own next dump */
    pthread_barrier_t step;
};

static void *cross_ender(void *arg)
{
    struct cross *x = arg;
    sertrace_dump_end(x->d, 10, SERTRACE_STATUS_OK); /* misuse: not the owner */
    sertrace_dump_end(x->d, 10, SERTRACE_STATUS_OK); /* twice: ignored */
    x->other = sertrace_dump_begin("other", 2);      /* must not get x->d back */
    pthread_barrier_wait(&x->step);
    pthread_barrier_wait(&x->step); /* the owner made its calls */
    sertrace_dump_end(x->other, 0, SERTRACE_STATUS_OK);
    return NULL;
}

Test(runtime, dump_ended_on_another_thread)
{
    struct cross x;
    pthread_t th;
    pthread_barrier_init(&x.step, NULL, 2);
    x.d = sertrace_dump_begin("mine", 1);
    cr_assert_not_null(x.d);
    sertrace_enter(x.d, SERTRACE_TAG_LIST, 0, 1, 0, 0);
    sertrace_exit(x.d, 5);
    cr_assert_eq(pthread_create(&th, NULL, cross_ender, &x), 0);
    pthread_barrier_wait(&x.step);
    cr_expect_neq(x.other, x.d, "the ender reused the owner's handle");
    /* The owner's current dump is gone, not the other thread's dump. */
    cr_expect_null(sertrace_current_dump());
    sertrace_note(sertrace_current_dump(), "k", "v");
    sertrace_note(x.d, "stale", "pointer"); /* a no-op on an ended handle */
    pthread_barrier_wait(&x.step);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&x.step);
    /* The handle went back to the owner's pool: the owner's next dump. */
    sertrace_dump *again = sertrace_dump_begin("again", 3);
    cr_expect_eq(again, x.d);
    cr_expect_eq(sertrace_current_dump(), again);
    sertrace_dump_end(again, 0, SERTRACE_STATUS_OK);
    cr_expect_null(sertrace_current_dump());

    cr_assert_eq(ndumps, 3);
    cr_expect_str_eq(dumps[0].serializer, "mine");
    cr_expect(dumps[0].ended);
    cr_expect_eq(dumps[0].bytes, 10);
    struct recs r = decode_dump(&dumps[0]);
    cr_assert_eq(r.n, 3);
    cr_expect_eq(r.v[2].op, SERTRACE_REC_ERROR);
    cr_expect_str_eq(r.v[2].s1, "dump ended on a thread other than the one that began it");
    for (size_t k = 1; k < 3; k++) {
        struct recs o = decode_dump(&dumps[k]);
        for (size_t i = 0; i < o.n; i++)
            cr_expect_neq(o.v[i].op, SERTRACE_REC_NOTE, "a note landed in dump %zu", k);
    }
}

Test(text, dump_ended_on_another_thread_is_flagged)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, NULL, 2), 0);
    sertrace_internal_set_hooks(NULL);
    struct cross x;
    pthread_t th;
    pthread_barrier_init(&x.step, NULL, 2);
    x.d = sertrace_dump_begin("mine", 1);
    cr_assert_eq(pthread_create(&th, NULL, cross_ender, &x), 0);
    pthread_barrier_wait(&x.step);
    cr_expect_null(sertrace_current_dump());
    pthread_barrier_wait(&x.step);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&x.step);
    char *out = read_fd_all(fd);
    cr_expect(strstr(out, " !! MISUSE: dump ended on a thread other than the one that began it\n"
                          "# end dump 1: 10 B, ok\n") != NULL,
              "%s", out);
    close(fd);
    unlink(path);
}

/* ---- fork in the middle of a dump --------------------------------------- */

static size_t count_str(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

Test(text, fork_mid_dump_child_drops_the_parents_dump)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 0xaaa, 0, 0);
    sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, 0xbbb, 0, 1);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        /* The child goes on with the inherited dump (a fork inside a
         * __reduce__): every call is a no-op, nothing of the parent's
         * dump is written from here. */
        int bad = 0;
        sertrace_exit(d, 7);
        sertrace_note(sertrace_current_dump(), "child", "note");
        sertrace_enter(d, SERTRACE_TAG_DICT, 0, 0xccc, 0, 7);
        sertrace_exit(d, 8);
        sertrace_exit(d, 9);
        bad |= (sertrace_dump_flags(d) & SERTRACE_DUMP_TEXT) != 0;
        sertrace_dump_end(d, 9, SERTRACE_STATUS_OK);
        bad |= sertrace_current_dump() != NULL;
        /* The child's own dumps trace as usual. */
        sertrace_dump *e = sertrace_dump_begin("childdump", 4);
        bad |= e == NULL || !(sertrace_dump_flags(e) & SERTRACE_DUMP_TEXT);
        sertrace_enter(e, SERTRACE_TAG_SET, 0, 0xddd, 0, 0);
        sertrace_exit(e, 3);
        sertrace_dump_end(e, 4, SERTRACE_STATUS_OK);
        _exit(bad ? 3 : 0);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    sertrace_exit(d, 5);
    sertrace_exit(d, 6);
    sertrace_dump_end(d, 6, SERTRACE_STATUS_OK);

    char *out = read_fd_all(fd);
    char header[96];
    snprintf(header, sizeof header, "# sertrace dump 1 pid %ld ", (long)getpid());
    cr_expect_eq(count_str(out, "┬ L: <? object at 0xaaa>\n"), 1, "%s", out);
    cr_expect_eq(count_str(out, "├┬ Tu: <? object at 0xbbb>\n"), 1, "%s", out);
    cr_expect_eq(count_str(out, "0xccc"), 0, "%s", out);
    cr_expect_eq(count_str(out, "child"), 1, "%s", out); /* its own dump's header only */
    /* dump ids are per process: the child numbers its own from 1 */
    cr_expect_eq(count_str(out, "# sertrace dump 1 pid "), 2, "%s", out);
    cr_expect_eq(count_str(out, "# sertrace dump 2 "), 0, "%s", out);
    cr_expect(strstr(out, header) != NULL, "%s", out);
    cr_expect(strstr(out, "│└ # Tu [4 B]\n└ # L [6 B]\n# end dump 1: 6 B, ok\n") != NULL, "%s",
              out);
    char child_header[96];
    snprintf(child_header, sizeof child_header,
             "# sertrace dump 1 pid %ld tid %ld childdump protocol 4\n", (long)child, (long)child);
    cr_expect(strstr(out, child_header) != NULL, "%s", out);
    cr_expect(strstr(out, "┬ Se: <? object at 0xddd>\n└ # Se [3 B]\n") != NULL, "%s", out);
    close(fd);
    unlink(path);
}

Test(runtime, fork_mid_dump_child_emits_no_records)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 0, 0);
    size_t before = ndumps;
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        /* Hooks run in the child's copy of the capture: check there. */
        for (int i = 0; i < 2000; i++) { /* several batches' worth */
            sertrace_enter(d, SERTRACE_TAG_TUPLE, 0, 2, 0, 1);
            sertrace_exit(d, 2);
        }
        sertrace_exit(d, 3);
        sertrace_dump_end(d, 3, SERTRACE_STATUS_OK);
        _exit(ndumps == before && dumps[0].nbatches == 0 && !dumps[0].ended ? 0 : 3);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    sertrace_exit(d, 9);
    sertrace_dump_end(d, 9, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_expect_eq(r.n, 2);
}

/* ---- no allocation on the text hot path --------------------------------- *
 *
 * malloc/calloc/realloc are interposed (forwarding to glibc's) and counted
 * on the test's thread while `counting` is set.  Not under ASan, which
 * interposes them itself. */
#ifndef __SANITIZE_ADDRESS__
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static __thread bool counting;
static __thread size_t allocations;

void *malloc(size_t n)
{
    if (counting)
        allocations++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    if (counting)
        allocations++;
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    if (counting)
        allocations++;
    return __libc_realloc(p, n);
}
#endif

/* A 12-deep chain of big nodes (every exit line oversized), 3,000 small
 * leaves, exact and human sizes, and an error that leaves the chain
 * open (flags "!! OVERSIZED (≥ T) !! FAILED inside"). */
static __attribute__((unused)) void oversized_dump(bool fail)
{
    static int t_list;
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    uint32_t tl = sertrace_type(d, &t_list, "list");
    uint64_t pos = 0;
    for (int k = 0; k < 12; k++)
        sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x1000 + (uint64_t)k, 2, pos);
    for (int i = 0; i < 3000; i++) {
        sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x9000 + (uint64_t)i, 1, pos);
        pos += 1000;
        sertrace_exit(d, pos);
    }
    for (int k = 0; k < (fail ? 6 : 12); k++)
        sertrace_exit(d, pos += 2000);
    sertrace_dump_end(d, pos, fail ? SERTRACE_STATUS_ERROR : SERTRACE_STATUS_OK);
}

static void no_allocation_in_steady_state(const char *exact)
{
#ifdef __SANITIZE_ADDRESS__
    (void)exact;
    cr_skip_test("allocation counting needs glibc's malloc (not under ASan)");
#else
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, "64K", exact, 2), 0);
    sertrace_internal_set_hooks(NULL);
    oversized_dump(true); /* warm-up: buffers and caches grow once */
    oversized_dump(false);
    counting = true;
    allocations = 0;
    oversized_dump(false);
    oversized_dump(true);
    counting = false;
    cr_expect_eq(allocations, 0, "%zu allocations in two warm dumps", allocations);
    char *out = read_fd_all(fd);
    cr_expect(strstr(out, exact ? "└ # L [3014000 B]  !! OVERSIZED (≥ 65536 B)\n"
                                : "└ # L [2.8 MiB]  !! OVERSIZED (≥ 64.0 KiB)\n") != NULL);
    cr_expect(
        strstr(out, exact ? "└ # L [≥ 3012000 B]  !! OVERSIZED (≥ 65536 B) !! FAILED inside\n"
                          : "└ # L [≥ 2.8 MiB]  !! OVERSIZED (≥ 64.0 KiB) !! FAILED inside\n") !=
        NULL);
    close(fd);
    unlink(path);
#endif
}

Test(text, oversized_exits_allocate_nothing_human)
{
    no_allocation_in_steady_state(NULL);
}

Test(text, oversized_exits_allocate_nothing_exact)
{
    no_allocation_in_steady_state("1");
}

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

/* ---- SERTRACE_DUMP_LTTNG means an LTTng session, not the test hooks ---- */

Test(runtime, hooks_alone_do_not_set_the_lttng_flag)
{
    /* Another process's LTTng session may enable sertrace:* at any time:
     * compare only while no session listens before and after (a dump
     * begun without hooks is NULL). */
    for (int attempt = 0; attempt < 50; attempt++) {
        struct sertrace_internal_hooks h = {on_begin, on_records, on_end, NULL};
        sertrace_internal_set_hooks(NULL);
        sertrace_dump *before = sertrace_dump_begin("probe", 0);
        sertrace_dump_end(before, 0, 0);
        sertrace_internal_set_hooks(&h);
        sertrace_dump *d = sertrace_dump_begin("pickle", 5);
        cr_assert_not_null(d);
        unsigned flags = sertrace_dump_flags(d);
        sertrace_dump_end(d, 0, 0);
        sertrace_internal_set_hooks(NULL);
        sertrace_dump *after = sertrace_dump_begin("probe", 0);
        sertrace_dump_end(after, 0, 0);
        if (before == NULL && after == NULL) {
            cr_expect_eq(flags & SERTRACE_DUMP_LTTNG, 0, "flags %#x", flags);
            cr_expect(ndumps >= 1 && dumps[ndumps - 1].ended, "the hooks still record");
            return;
        }
        usleep(100000);
    }
    cr_skip_test("an LTTng session kept sertrace:* enabled");
}
