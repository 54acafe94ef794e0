/* tests/runtime/test_records.c -- the records the sertrace C API emits.
 *
 * Decoded from what the capture helper (capture.h) saw: nesting and exact
 * positions, several threads at once, batches split at 4 KiB without
 * splitting a record, type interning once per dump, errors, notes, misuse
 * (exit without enter, NULL handle, depth cap, enter without exit), string
 * cutting, nested dumps, a dump ended on another thread, fork mid-dump.
 * Criterion runs each test in its own process.
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
