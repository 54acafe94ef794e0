/* test_sinks.c -- Criterion tests of the summary and the tree printer
 * (analyzers/core/summary.c, treeprint.c) on synthetic streams: the text
 * grammar, folding, inexact sizes, unfinished chains, the JSON object,
 * escaping of hostile strings, and flat memory of the summary. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "fixtures.h"
#include "format.h"
#include "summary.h"
#include "treeprint.h"

static sertrace_buf OUT = SERTRACE_BUF_INIT;
static enc E;

static int capture(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    return sertrace_buf_append(&OUT, s, n);
}

static int discard(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    (void)s;
    (void)n;
    return 0;
}

/* dump_end `flags` (schema v3) of the dumps sample() writes. */
static uint32_t SAMPLE_END_FLAGS;

static void flush(sertrace_core *c, int64_t pid, uint64_t id, uint32_t seq)
{
    fx_flush(&E, c, pid, id, seq);
}

/* The sample dump of fixtures.h, no error, ended with SAMPLE_END_FLAGS. */
static void sample(sertrace_core *c, int64_t pid, uint64_t id, const char *tname)
{
    fx_sample_how how = {.error = false, .end_ns = 0, .batches = 1, .end_flags = SAMPLE_END_FLAGS};
    fx_sample(&E, c, pid, id, tname, &how);
}

static void setup(void)
{
    SAMPLE_END_FLAGS = 0;
    sertrace_buf_clear(&OUT);
    enc_reset(&E);
}

TestSuite(sinks, .init = setup);

static void run_tree(const sertrace_treeprint_opts *o, void (*feed)(sertrace_core *))
{
    sertrace_treeprint *t = sertrace_treeprint_create(o, capture, NULL);
    FX_RUN_SINK(treeprint, t, feed);
}

static void feed_sample(sertrace_core *c)
{
    sample(c, 7, 1, "mod.Thing");
}

Test(sinks, tree_grammar_exact)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    run_tree(&o, feed_sample);
    const char *want = "\xe2\x94\xac D2: <dict object at 0xabc0> len=2\n"
                       "\xe2\x94\x9c\xe2\x94\xac L: <list object at 0xabd0> len=4\n";
    cr_assert_not_null(strstr(OUT.data, want), "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\xe2\x94\x82\xe2\x94\x94 # L [40 B]\n"), "got:\n%s",
                       OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\xe2\x94\x94 # D2 [100 B]\n"), "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "@ ip = 42"), "note line, got:\n%s", OUT.data);
    /* header first, then the root line */
    cr_assert(
        strncmp(OUT.data, "\xe2\x94\x80\xe2\x94\x80 dump 1 \xc2\xb7 pid 7 \xc2\xb7 tid 8", 22) == 0,
        "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "2023-11-14 22:13:20.123456789 UTC"));
    cr_assert_not_null(strstr(OUT.data, "pickle protocol 5 \xc2\xb7 payload 103 B"));
    cr_assert_null(strstr(OUT.data, "INCOMPLETE"));
}

Test(sinks, tree_min_size_folds_and_oversize_flags)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    o.min_size = 5;
    o.oversize_percent = 35;
    run_tree(&o, feed_sample);
    cr_assert_not_null(strstr(OUT.data, "\xe2\x94\x82\xe2\x94\x9c \xe2\x80\xa6 4 more, 8 B\n"),
                       "got:\n%s", OUT.data);
    cr_assert_null(strstr(OUT.data, "I: "), "ints folded");
    cr_assert_not_null(strstr(OUT.data, "# L [40 B]  !! OVERSIZED"), "got:\n%s", OUT.data);
    cr_assert_null(strstr(OUT.data, "# O [30 B]  !!"), "30 < 35%% of 103");
}

Test(sinks, tree_max_depth)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    o.max_depth = 2;
    run_tree(&o, feed_sample);
    cr_assert_not_null(strstr(OUT.data, "4 nodes below max-depth, 8 B"), "got:\n%s", OUT.data);
}

/* A flag deep in the tree and small, under unflagged ancestors:
 *   D2 dict 2..5002 { L list 10..5000 { 20 x I int (2 B each),
 *                                       Tu tuple 100..110 { I int, R cell },
 *                                       Str str 200..4990 } }
 * DEEP_MODE 0: the cell gets an ERROR record, dump ends ok (only R flagged);
 *           1: the cell gets an ERROR and the dump ends with status error
 *              (the open chain is FAILED);
 *           2: the cell's EXIT is lost (closed by resync: "?? exit lost"). */
static int DEEP_MODE;

static void feed_deep_flag(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 0, 1, "pickle", 6, 5), 0);
    enc_type(&E, 1, "dict");
    enc_type(&E, 2, "list");
    enc_type(&E, 3, "int");
    enc_type(&E, 4, "tuple");
    enc_type(&E, 5, "cell");
    enc_type(&E, 6, "str");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 1, 0xd0, 0, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 2, 0xd1, 23, 10);
    for (int k = 0; k < 20; k++) {
        enc_enter(&E, SERTRACE_TAG_INT, 3, 3, 0, 0, 12 + 3 * k);
        enc_exit(&E, 3, 14 + 3 * k);
    }
    enc_enter(&E, SERTRACE_TAG_TUPLE, 3, 4, 0xd2, 3, 100);
    enc_enter(&E, SERTRACE_TAG_INT, 4, 3, 0, 0, 101);
    enc_exit(&E, 4, 103);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 4, 5, 0xd3, 0, 104);
    if (DEEP_MODE == 1) {
        enc_error(&E, SERTRACE_TAG_REDUCE, 4, 5, "cannot pickle 'cell' object",
                  "State.frame.stack[0][1]");
        flush(c, 5, 1, 0);
        cr_assert_eq(sertrace_core_dump_end(c, 5, 5, 0, 1, 105, SERTRACE_STATUS_ERROR), 0);
        return;
    }
    if (DEEP_MODE == 0) {
        enc_error(&E, SERTRACE_TAG_REDUCE, 4, 5, "cannot pickle 'cell' object",
                  "State.frame.stack[0][1]");
        enc_exit(&E, 4, 104);
    } else {
        /* the cell's EXIT is lost: the next sibling closes it */
        enc_enter(&E, SERTRACE_TAG_INT, 4, 3, 0, 0, 106);
        enc_exit(&E, 4, 108);
    }
    enc_exit(&E, 3, 110);
    enc_enter(&E, SERTRACE_TAG_STR, 3, 6, 0xd4, 0, 200);
    enc_exit(&E, 3, 4990);
    enc_exit(&E, 2, 5000);
    enc_exit(&E, 1, 5002);
    flush(c, 5, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 5, 5, 0, 1, 5003, 0), 0);
}

#define BAR "\xe2\x94\x82"
#define TEE "\xe2\x94\x9c"
#define ELL "\xe2\x80\xa6"

/* The tree of feed_deep_flag (DEEP_MODE `mode`), exact sizes, folded by
 * max-depth and min-size (0: not). */
static const char *tree_of_deep_flag(int mode, uint64_t max_depth, uint64_t min_size)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    o.max_depth = (uint32_t)max_depth;
    o.min_size = min_size;
    DEEP_MODE = mode;
    run_tree(&o, feed_deep_flag);
    return OUT.data;
}

/* The chain down to the flagged cell is shown, folding or not: its R
 * enter line and its flag line. */
static void assert_flag_chain(const char *s)
{
    cr_assert_not_null(strstr(s, BAR BAR TEE "\xe2\x94\xac R: <cell object at 0xd3>\n"), "got:\n%s",
                       s);
    cr_assert_not_null(strstr(s, " !! UNSERIALIZABLE R cell: cannot pickle 'cell' object "
                                 "at State.frame.stack[0][1]\n"),
                       "got:\n%s", s);
}

Test(sinks, tree_max_depth_never_hides_a_flag)
{
    const char *s = tree_of_deep_flag(0, 2, 0);
    /* the chain down to the flag, at depths 3 and 4 (> max-depth) */
    cr_assert_not_null(strstr(s, BAR TEE "\xe2\x94\xac Tu: <tuple object at 0xd2> len=2\n"),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR BAR TEE "\xe2\x94\xac R: <cell object at 0xd3>\n"), "got:\n%s",
                       s);
    cr_assert_not_null(strstr(s, BAR BAR BAR BAR
                              " !! UNSERIALIZABLE R cell: cannot pickle 'cell' object "
                              "at State.frame.stack[0][1]\n"),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR BAR BAR "\xe2\x94\x94 # R [0 B]  !! UNSERIALIZABLE\n"),
                       "got:\n%s", s);
    /* its unflagged siblings stay folded: 20 ints + the str under L, the
     * int under Tu */
    cr_assert_not_null(strstr(s, BAR TEE " " ELL " 21 nodes below max-depth, 4830 B\n"), "got:\n%s",
                       s);
    cr_assert_not_null(strstr(s, BAR BAR TEE " " ELL " 1 nodes below max-depth, 2 B\n"), "got:\n%s",
                       s);
    cr_assert_null(strstr(s, "I: "), "ints folded, got:\n%s", s);
    cr_assert_null(strstr(s, "Str: "), "str folded, got:\n%s", s);
}

Test(sinks, tree_min_size_never_hides_a_flag)
{
    const char *s = tree_of_deep_flag(0, 0, 1000);
    cr_assert_not_null(strstr(s, BAR TEE "\xe2\x94\xac Tu: <tuple object at 0xd2> len=2\n"),
                       "got:\n%s", s);
    assert_flag_chain(s);
    cr_assert_not_null(strstr(s, BAR TEE " " ELL " 20 more, 40 B\n"), "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR BAR TEE " " ELL " 1 more, 2 B\n"), "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR TEE "\xe2\x94\xac Str: <str object at 0xd4>\n"),
                       "big sibling shown, got:\n%s", s);
    cr_assert_null(strstr(s, "I: "), "ints folded, got:\n%s", s);
}

Test(sinks, tree_folding_keeps_failed_chain)
{
    const char *s = tree_of_deep_flag(1, 1, 1 << 20);
    cr_assert_not_null(strstr(s, TEE "\xe2\x94\xac L: <list object at 0xd1> len=22\n"), "got:\n%s",
                       s);
    assert_flag_chain(s);
    cr_assert_not_null(
        strstr(s, BAR BAR BAR
               "\xe2\x94\x94 # R [\xe2\x89\xa5 0 B]  !! FAILED inside !! UNSERIALIZABLE\n"),
        "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR "\xe2\x94\x94 # L [\xe2\x89\xa5 94 B]  !! FAILED inside\n"),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR TEE " " ELL " 20 nodes below max-depth, 40 B\n"), "got:\n%s",
                       s);
    cr_assert_null(strstr(s, "I: "), "ints folded, got:\n%s", s);
}

Test(sinks, tree_folding_keeps_lost_exit)
{
    const char *s = tree_of_deep_flag(2, 2, 1000);
    cr_assert_not_null(strstr(s, "!! INCOMPLETE: 1 exits lost"), "got:\n%s", s);
    cr_assert_not_null(strstr(s, BAR BAR TEE "\xe2\x94\xac R: <cell object at 0xd3>\n"), "got:\n%s",
                       s);
    cr_assert_not_null(strstr(s, BAR BAR BAR "\xe2\x94\x94 # R [\xe2\x89\xa5 0 B]  ?? exit lost\n"),
                       "got:\n%s", s);
    /* Tu's two ints: below max-depth and small, both folded */
    cr_assert_not_null(strstr(s, BAR BAR TEE " " ELL " 2 nodes below max-depth, 4 B\n"), "got:\n%s",
                       s);
    cr_assert_null(strstr(s, "I: "), "ints folded, got:\n%s", s);
}

static void feed_unfinished(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 3, 4, 0, 9, "pickle", 6, 5), 0);
    enc_type(&E, 1, "State");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 1, 1, 1, 0, 2);
    enc_type(&E, 2, "Frame");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 2, 2, 0, 5);
    enc_enter(&E, SERTRACE_TAG_STR, 3, 0, 3, 0, 6);
    enc_exit(&E, 3, 1500);
    flush(c, 3, 9, 0);
}

Test(sinks, tree_unfinished_shows_chain_and_lower_bounds)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&o, feed_unfinished);
    cr_assert_not_null(
        strstr(OUT.data, "!! INCOMPLETE: unfinished (no dump_end: the process stopped inside it)"),
        "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data,
               "!! died in (as of its last recorded event): O State \xe2\x80\xba O Frame"),
        "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "# O [\xe2\x89\xa5 1.4 KiB]  !! UNFINISHED"), "got:\n%s",
                       OUT.data);
    cr_assert_not_null(strstr(OUT.data, "# Str [1.4 KiB]\n"), "the closed child is exact");
}

static void feed_hostile(sertrace_core *c)
{
    sample(c, 1, 1,
           "evil\x1b[2J\x07\xff\xfe"
           "name\n\"quoted\"\\");
}

static void assert_no_controls(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            continue;
        cr_assert(ch >= 0x20 && ch != 0x7f, "control byte 0x%02x at %zu in:\n%s", ch, i, s);
        cr_assert(ch != 0xff && ch != 0xfe, "invalid UTF-8 byte kept");
    }
}

Test(sinks, tree_escapes_hostile_names)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&o, feed_hostile);
    assert_no_controls(OUT.data, OUT.len);
    cr_assert_not_null(strstr(OUT.data, "evil\\x1b[2J\\x07\\xff\\xfename\\x0a"), "got:\n%s",
                       OUT.data);
}

static void run_summary(const sertrace_summary_opts *o, void (*feed)(sertrace_core *))
{
    sertrace_summary *s = sertrace_summary_create(o, capture, NULL);
    FX_RUN_SINK(summary, s, feed);
}

static void feed_two(sertrace_core *c)
{
    sample(c, 7, 1, "mod.Thing");
    feed_unfinished(c);
}

Test(sinks, summary_text)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.exact = true;
    o.top = 3;
    run_summary(&o, feed_two);
    cr_assert_not_null(strstr(OUT.data, "payload 103 B"), "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "complete"));
    cr_assert_not_null(
        strstr(OUT.data,
               "!! died in (as of its last recorded event): O State \xe2\x80\xba O Frame"),
        "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data,
               "== overall: 2 dumps, 1 complete, 1 incomplete (1 unfinished); payload 103 B"),
        "got:\n%s", OUT.data);
    /* top 3 of the first dump: 100 (root), 40 (list), 30 (Thing) */
    const char *top = strstr(OUT.data, "top 3 largest nodes\n");
    cr_assert_not_null(top);
    cr_assert(strncmp(top + 20, "    100 B (self 30 B)  D2 dict\n", 31) == 0, "got:\n%s", top);
}

Test(sinks, summary_json_fields)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.oversize_bytes = 35;
    run_summary(&o, feed_two);
    const char *s = OUT.data;
    cr_assert(strncmp(s, "{\"format\": \"sertrace-summary\", \"version\": 1, \"dumps\": [", 55) ==
                  0,
              "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"payload_bytes\": 103"));
    cr_assert_not_null(strstr(s, "\"payload_bytes\": null"));
    cr_assert_not_null(strstr(s, "\"complete\": true"));
    cr_assert_not_null(strstr(s, "\"complete\": false, \"unfinished\": true"));
    cr_assert_not_null(strstr(s, "\"serializer\": \"pickle\""));
    cr_assert_not_null(strstr(s, "\"pid\": 7, \"tid\": 8"));
    cr_assert_not_null(
        strstr(s, "{\"kind\": \"oversized\", \"path\": \"D2 dict \xe2\x80\xba L list\""),
        "got:\n%s", s);
    cr_assert_not_null(
        strstr(s, "{\"kind\": \"incomplete\", \"path\": \"O State \xe2\x80\xba O Frame\""),
        "got:\n%s", s);
    cr_assert_not_null(
        strstr(s, "\"died_in\": [\"O State\", \"O Frame\"], \"died_in_as_of_last_record\": true, "),
        "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"died_in\": null, \"died_in_as_of_last_record\": false, "),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"totals\": {\"dumps\": 2, \"complete\": 1"));
    cr_assert_not_null(strstr(s, "{\"type\": \"list\", \"count\": 1, \"bytes\": 40, \"self\": 32"),
                       "got:\n%s", s);
    /* no filter given: "filter": null closes the object */
    cr_assert(OUT.len > 20 && strcmp(s + OUT.len - 20, "]}, \"filter\": null}\n") == 0, "got:\n%s",
              s + (OUT.len > 200 ? OUT.len - 200 : 0));
}

/* sertrace_summary_set_filter: the text given is the "filter" member. */
Test(sinks, summary_json_filter_member)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    static const char f[] =
        "{\"pid\": [7], \"dump\": [], \"serializer\": [], \"dumps_left_out\": 3}";
    sertrace_buf_clear(&OUT);
    sertrace_summary *sum = sertrace_summary_create(&o, capture, NULL);
    cr_assert_not_null(sum);
    cr_assert_eq(sertrace_summary_set_filter(sum, f, strlen(f)), 0);
    cr_assert_eq(sertrace_summary_finish(sum, NULL), 0);
    const char *s = OUT.data;
    cr_assert_not_null(strstr(s, "]}, \"filter\": {\"pid\": [7], \"dump\": [], \"serializer\": [], "
                                 "\"dumps_left_out\": 3}}\n"),
                       "got:\n%s", s);
    sertrace_summary_destroy(sum);
}

Test(sinks, summary_json_escapes_hostile_names)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_hostile);
    assert_no_controls(OUT.data, OUT.len);
    cr_assert_not_null(strstr(OUT.data, "\"type\": \"evil\\u001b[2J\\u0007"), "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "name\\n\\\"quoted\\\"\\\\\""), "got:\n%s", OUT.data);
}

static void feed_error(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    enc_type(&E, 1, "function");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_FUNCTION, 2, 1, 2, 0, 3);
    enc_error(&E, SERTRACE_TAG_FUNCTION, 2, 1, "Can't pickle local object 'f.<locals>.g'",
              "State.suspended[3].frame");
    enc_exit(&E, 2, 3);
    enc_exit(&E, 1, 3);
    flush(c, 1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 1, 1, 0, 1, 3, SERTRACE_STATUS_ERROR), 0);
}

Test(sinks, unserializable_flag_everywhere)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_error);
    cr_assert_not_null(
        strstr(OUT.data, "{\"kind\": \"unserializable\", \"path\": \"State.suspended[3].frame\", "
                         "\"message\": \"Can't pickle local object 'f.<locals>.g'\""),
        "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\"status\": \"error\""));
    sertrace_buf_clear(&OUT);
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_error);
    cr_assert_not_null(
        strstr(OUT.data,
               "\xe2\x94\x82\xe2\x94\x82 !! UNSERIALIZABLE F2 function: Can't pickle local object "
               "'f.<locals>.g' at State.suspended[3].frame\n"),
        "got:\n%s", OUT.data);
}

static void feed_lossy(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    flush(c, 1, 1, 0);
    enc_exit(&E, 1, 2000);
    flush(c, 1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(c, 1, 1, 0, 1, 2001, 0), 0);
    cr_assert_eq(sertrace_core_discarded(c, -1, 5), 0);
}

Test(sinks, lost_records_never_exact)
{
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_lossy);
    cr_assert_not_null(strstr(OUT.data, "!! INCOMPLETE: 1 records events lost"), "got:\n%s",
                       OUT.data);
    cr_assert_not_null(strstr(OUT.data, "?? records lost inside"), "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "!! the tracer discarded 5 events; 1 records events missing"));
    sertrace_buf_clear(&OUT);
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_lossy);
    cr_assert_not_null(strstr(OUT.data, "\"complete\": false"));
    cr_assert_not_null(strstr(OUT.data, "\"records_events\": 1"));
    cr_assert_not_null(strstr(OUT.data, "\"discarded_events\": 5, \"lost_records_events\": 1"),
                       "got:\n%s", OUT.data);
}

/* Root list [A, B, C]: the batch with A's EXIT and B's ENTER is lost; the
 * EXIT at depth 2 after the gap is B's (A really is 33 B, B 2261 B). */
static void feed_span(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 4), 0);
    enc_type(&E, 1, "list");
    enc_type(&E, 2, "Flusher");
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 1, 4, 2);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 2, 2, 2, 0, 3);
    flush(c, 1, 1, 0);
    enc_exit(&E, 2, 2297);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 2, 2, 4, 0, 2297);
    enc_exit(&E, 2, 2310);
    enc_exit(&E, 1, 2311);
    flush(c, 1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(c, 1, 1, 0, 1, 2312, 0), 0);
}

Test(sinks, exit_after_lost_batch_shown_as_upper_bound)
{
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_span);
    cr_assert_not_null(strstr(OUT.data,
                              "\xe2\x94\x82\xe2\x94\x94 # R [\xe2\x89\xa4 2.2 KiB]  "
                              "?? records lost inside ?? its exit may be a later node's\n"),
                       "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\xe2\x94\x82\xe2\x94\x94 # R [13 B]\n"),
                       "C exact, got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\xe2\x94\x94 # L [2.2 KiB]  ?? records lost inside\n"),
                       "the root exact, got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "sizes marked \xe2\x89\xa5 are lower bounds, \xe2\x89\xa4 upper bounds\n"),
        "got:\n%s", OUT.data);
    cr_assert_null(strstr(OUT.data, "# R [2.2 KiB]"), "never as exact, got:\n%s", OUT.data);
    /* folding keeps the flagged node */
    sertrace_buf_clear(&OUT);
    t.exact = true;
    t.min_size = 5000;
    run_tree(&t, feed_span);
    cr_assert_not_null(strstr(OUT.data, "# R [\xe2\x89\xa4 2294 B]"), "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, " 1 more, 13 B\n"), "got:\n%s", OUT.data);

    sertrace_buf_clear(&OUT);
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_span);
    cr_assert_not_null(
        strstr(OUT.data,
               "{\"bytes\": 2294, \"self\": 2294, \"exact\": false, \"bound\": \"upper\", "
               "\"depth\": 2, \"tag\": \"R\""),
        "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "{\"bytes\": 13, \"self\": 13, \"exact\": true, \"depth\": 2"), "got:\n%s",
        OUT.data);
    cr_assert_not_null(strstr(OUT.data, "\"root_bytes\": 2309, \"root_exact\": true"), "got:\n%s",
                       OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "{\"bytes\": 2309, \"self\": 2, \"exact\": true, \"depth\": 1"),
        "got:\n%s", OUT.data);
    /* the flag path of render() too */
    sertrace_buf_clear(&OUT);
    o.oversize_bytes = 2000;
    run_summary(&o, feed_span);
    cr_assert_not_null(strstr(OUT.data,
                              "\"message\": \"oversized\", \"bytes\": 2294, \"self\": 2294, "
                              "\"exact\": false, \"bound\": \"upper\", \"depth\": 2"),
                       "got:\n%s", OUT.data);
    sertrace_buf_clear(&OUT);
    o.json = false;
    o.exact = true;
    run_summary(&o, feed_span);
    cr_assert_not_null(
        strstr(OUT.data,
               "    \xe2\x89\xa4 2294 B (self ? 2294 B)  L list \xe2\x80\xba R Flusher\n"),
        "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "!! OVERSIZED \xe2\x89\xa4 2294 B  L list \xe2\x80\xba R Flusher"),
        "got:\n%s", OUT.data);
}

/* Dump 1's dump_end discarded, dump 2 of the thread ends; dump 3 is live
 * at the end with discards; dump 4 is live at the end, no discard. */
static void feed_end_lost(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 10, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    cr_assert_eq(sertrace_core_records(c, 5, 5, 11, 1, 0, E.buf, E.n), 0);
    enc_reset(&E);
    cr_assert_eq(sertrace_core_discarded(c, 5, 4), 0);
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 20, 2, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end(c, 5, 5, 21, 2, 3, 0), 0);
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 30, 3, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_discarded(c, 5, 6), 0);
    cr_assert_eq(sertrace_core_dump_begin(c, 6, 6, 30, 4, "pickle", 6, 4), 0);
}

/* Events of pid 7 discarded before its dump began (the notice came first,
 * the dump's own end was lost later, at the end of the stream, with no
 * notice after it); pid 8 never lost anything. */
static void feed_unfinished_after_discards(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_discarded(c, 7, 3), 0);
    cr_assert_eq(sertrace_core_dump_begin(c, 7, 7, 40, 1, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_begin(c, 8, 8, 40, 1, "pickle", 6, 4), 0);
}

Test(sinks, unfinished_dump_of_a_lossy_process_may_have_lost_its_end)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_unfinished_after_discards);
    const char *s = OUT.data;
    const char *d7 = strstr(s, "\"pid\": 7,");
    const char *d8 = strstr(s, "\"pid\": 8,");
    cr_assert(d7 && d8 && d7 < d8, "got:\n%s", s);
    const char *m = strstr(d7, "unfinished (no dump_end: the process stopped inside it, or its end "
                               "was among the discarded events)");
    cr_assert(m && m < d8, "got:\n%s", s);
    m = strstr(d7, "\"discarded_events\": 0,");
    cr_assert(m && m < d8, "no notice while it was live, got:\n%s", s);
    cr_assert_not_null(strstr(d8, "unfinished (no dump_end: the process stopped inside it)\""),
                       "got:\n%s", s);
}

Test(sinks, dump_end_discarded_is_end_lost_not_unfinished)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    run_summary(&o, feed_end_lost);
    const char *s = OUT.data;
    const char *d1 = strstr(s, "\"dump_id\": 1,");
    const char *d2 = strstr(s, "\"dump_id\": 2,");
    const char *d3 = strstr(s, "\"dump_id\": 3,");
    const char *d4 = strstr(s, "\"dump_id\": 4,");
    cr_assert(d1 && d2 && d3 && d4 && d1 < d2 && d2 < d3, "got:\n%s", s);
    cr_assert_not_null(strstr(d1, "\"payload_bytes\": null"));
    cr_assert(strstr(d1, "\"complete\": false, \"unfinished\": false, \"end_lost\": true, "
                         "\"status\": \"unknown\"") < d2,
              "got:\n%s", s);
    cr_assert(strstr(d1,
                     "end lost (no dump_end: events were discarded, and a later dump of its thread "
                     "began after its last event and ended)") < d2,
              "got:\n%s", s);
    cr_assert(strstr(d1, "\"discarded_events\": 4,") < d2, "only the notice while it was live");
    cr_assert(strstr(d1, "\"died_in\": null") < d2);
    cr_assert(strstr(d3, "\"unfinished\": true, \"end_lost\": false") < d4, "got:\n%s", s);
    cr_assert(strstr(d3,
                     "unfinished (no dump_end: the process stopped inside it, or its end was among "
                     "the discarded events)") < d4,
              "got:\n%s", s);
    cr_assert_not_null(strstr(d4, "\"unfinished\": true, \"end_lost\": false"));
    cr_assert_not_null(strstr(d4, "unfinished (no dump_end: the process stopped inside it)\""),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"unfinished\": 2, \"end_lost\": 1, "), "totals, got:\n%s", s);

    sertrace_buf_clear(&OUT);
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_end_lost);
    cr_assert_not_null(
        strstr(OUT.data,
               "!! INCOMPLETE: end lost (no dump_end: events were discarded, and a later "
               "dump of its thread began after its last event and ended); 4 events discarded"),
        "got:\n%s", OUT.data);
    cr_assert_not_null(strstr(OUT.data, "# L [\xe2\x89\xa5 0 B]  ?? exit lost"), "got:\n%s",
                       OUT.data);
    cr_assert_null(strstr(OUT.data, "L [\xe2\x89\xa5 0 B]  !! UNFINISHED"), "got:\n%s", OUT.data);
    cr_assert_not_null(
        strstr(OUT.data, "!! INCOMPLETE: unfinished (no dump_end: the process stopped inside it, "
                         "or its end was among the discarded events)"),
        "got:\n%s", OUT.data);
}

Test(sinks, oversize_parser)
{
    uint64_t b;
    double p;
    cr_assert_eq(sertrace_parse_oversize("10%", &b, &p), 0);
    cr_assert_eq(b, 0);
    cr_assert_float_eq(p, 10.0, 1e-9);
    cr_assert_eq(sertrace_parse_oversize("64K", &b, &p), 0);
    cr_assert_eq(b, 65536);
    cr_assert_eq(sertrace_parse_oversize("1234", &b, &p), 0);
    cr_assert_eq(b, 1234);
    cr_assert_eq(sertrace_parse_oversize("150%", &b, &p), SERTRACE_OVERSIZE_BAD_SHARE);
    cr_assert_eq(sertrace_parse_oversize("x%", &b, &p), SERTRACE_OVERSIZE_BAD_SHARE);
    cr_assert_eq(sertrace_parse_oversize("0%", &b, &p), SERTRACE_OVERSIZE_BAD_SHARE);
    cr_assert_eq(sertrace_parse_oversize("-5", &b, &p), SERTRACE_OVERSIZE_NOT_SIZE);
    cr_assert_eq(sertrace_parse_oversize("", &b, &p), SERTRACE_OVERSIZE_NOT_SIZE);
    cr_assert_eq(sertrace_parse_oversize("0", &b, &p), SERTRACE_OVERSIZE_ZERO);
    cr_assert_eq(sertrace_parse_oversize("0K", &b, &p), SERTRACE_OVERSIZE_ZERO);
}

static uint64_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

Test(sinks, summary_memory_flat)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.oversize_percent = 10;
    sertrace_summary *s = sertrace_summary_create(&o, discard, NULL);
    sertrace_core_visitor v;
    sertrace_summary_visitor(s, &v);
    sertrace_core *c = sertrace_core_create(&v);
    uint64_t warm = 0;
    char name[32];
    for (uint64_t i = 1; i <= 40000; i++) {
        snprintf(name, sizeof name, "mod.T%llu", (unsigned long long)(i % 50));
        sample(c, (int64_t)(i % 8), i, name);
        if (i == 4000)
            warm = heap_in_use();
    }
    uint64_t end = heap_in_use();
    cr_assert_leq(end, warm + 8192, "summary heap grew from %llu to %llu", (unsigned long long)warm,
                  (unsigned long long)end);
    cr_assert_eq(sertrace_core_finish(c), 0);
    cr_assert_eq(sertrace_summary_finish(s, sertrace_core_get_stats(c)), 0);
    sertrace_core_destroy(c);
    sertrace_summary_destroy(s);
}

/* ---- notes in the summary ---------------------------------------------- */

/* Notes at depths 0 (the dump), 1, 2 and 3, one of them hostile, on
 *   D2 dict 2..102 { L list 10..50 { I int 12..14 }, O mod.Thing 60..90 }
 * then NOTES_EXTRA more notes on the root (past the per-dump cap). */
static int NOTES_EXTRA;

static void feed_notes(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 4, 4, 0, 1, "pickle", 6, 5), 0);
    enc_note(&E, 0, "dump-note", "on the dump");
    enc_type(&E, 1, "dict");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 1, 0xa0, 3, 2);
    enc_note(&E, 1, "root", "r");
    enc_type(&E, 2, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 2, 0xa1, 2, 10);
    enc_type(&E, 3, "int");
    enc_enter(&E, SERTRACE_TAG_INT, 3, 3, 0, 0, 12);
    enc_note(&E, 3, "deep", "evil\x1b[2J\x07\xff\xfe\n\"q\"\\");
    enc_exit(&E, 3, 14);
    enc_exit(&E, 2, 50);
    enc_type(&E, 4, "mod.Thing");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 4, 0xa2, 0, 60);
    enc_note(&E, 2, "ip", "42");
    enc_exit(&E, 2, 90);
    for (int k = 0; k < NOTES_EXTRA; k++)
        enc_note(&E, 1, "more", "x");
    enc_exit(&E, 1, 102);
    flush(c, 4, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 4, 4, 0, 1, 103, 0), 0);
}

Test(sinks, summary_notes_json)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    NOTES_EXTRA = 0;
    run_summary(&o, feed_notes);
    const char *s = OUT.data;
    assert_no_controls(OUT.data, OUT.len);
    cr_assert_not_null(
        strstr(s, "\"notes\": [{\"key\": \"dump-note\", \"value\": \"on the dump\", \"tag\": null, "
                  "\"type\": null, \"depth\": 0, \"ancestry\": []}, "
                  "{\"key\": \"root\", \"value\": \"r\", \"tag\": \"D2\", \"type\": \"dict\", "
                  "\"depth\": 1, \"ancestry\": [\"D2 dict\"]}, "
                  "{\"key\": \"deep\", \"value\": "
                  "\"evil\\u001b[2J\\u0007\xef\xbf\xbd\xef\xbf\xbd\\n\\\"q\\\"\\\\\", "
                  "\"tag\": \"I\", \"type\": \"int\", \"depth\": 3, "
                  "\"ancestry\": [\"D2 dict\", \"L list\", \"I int\"]}, "
                  "{\"key\": \"ip\", \"value\": \"42\", \"tag\": \"O\", \"type\": \"mod.Thing\", "
                  "\"depth\": 2, \"ancestry\": [\"D2 dict\", \"O mod.Thing\"]}], "
                  "\"notes_dropped\": 0}"),
        "got:\n%s", s);
}

Test(sinks, summary_notes_text_and_cap)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    NOTES_EXTRA = 100;
    run_summary(&o, feed_notes);
    const char *s = OUT.data;
    assert_no_controls(OUT.data, OUT.len);
    cr_assert_not_null(strstr(s, "  notes (104)\n"
                                 "    @ dump-note = on the dump  (on the dump)\n"
                                 "    @ root = r  (on D2 dict)\n"
                                 "    @ deep = evil\\x1b[2J\\x07\\xff\\xfe\\x0a\"q\"\\\\  "
                                 "(on D2 dict \xe2\x80\xba L list \xe2\x80\xba I int)\n"
                                 "    @ ip = 42  (on D2 dict \xe2\x80\xba O mod.Thing)\n"
                                 "    @ more = x  (on D2 dict)\n"),
                       "got:\n%s", s);
    /* 64 kept (4 + 60 "more"), 40 counted */
    cr_assert_not_null(
        strstr(s, "    @ more = x  (on D2 dict)\n    " ELL " 40 more notes not kept\n"), "got:\n%s",
        s);
    size_t kept = 0;
    for (const char *p = s; (p = strstr(p, "    @ ")); p++)
        kept++;
    cr_assert_eq(kept, 64);
    /* JSON: the same cap */
    sertrace_buf_clear(&OUT);
    o.json = true;
    run_summary(&o, feed_notes);
    cr_assert_not_null(strstr(OUT.data, "\"notes_dropped\": 40}"), "got:\n%s", OUT.data);
    /* text without per-dump sections: no notes */
    sertrace_buf_clear(&OUT);
    o.json = false;
    o.per_dump = false;
    run_summary(&o, feed_notes);
    cr_assert_null(strstr(OUT.data, "notes ("), "got:\n%s", OUT.data);
}

/* ---- deep trees in the tree sink ---------------------------------------- */

/* A writer that keeps no output, only counts: bytes, lines, the longest
 * line, the largest chunk handed over, and the lines that carry a given
 * marker (kept, up to 4 KiB). */
static struct {
    uint64_t bytes, lines, cur_line, max_line, max_chunk;
    const char *marker;
    sertrace_buf keep; /* the current line until it ends */
    char found[4096];
} W;

static int counting(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    W.bytes += n;
    if (n > W.max_chunk)
        W.max_chunk = n;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\n') {
            W.cur_line++;
            if (W.keep.len < 512)
                sertrace_buf_append(&W.keep, s + i, 1);
            continue;
        }
        W.lines++;
        if (W.cur_line > W.max_line)
            W.max_line = W.cur_line;
        if (W.marker && W.keep.data && strstr(W.keep.data, W.marker) &&
            strlen(W.found) + W.keep.len + 2 < sizeof W.found) {
            strcat(W.found, W.keep.data);
            strcat(W.found, "\n");
        }
        W.cur_line = 0;
        sertrace_buf_clear(&W.keep);
    }
    return 0;
}

static void run_tree_counting(void (*feed)(sertrace_core *), const char *marker)
{
    memset(&W, 0, sizeof W);
    W.marker = marker;
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    sertrace_treeprint *t = sertrace_treeprint_create(&o, counting, NULL);
    FX_RUN_SINK(treeprint, t, feed);
    sertrace_buf_free(&W.keep);
}

static uint64_t DEEP_AT;

static void feed_one_deep_enter(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 2, 2, 0, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, DEEP_AT, 0, 1, 0, 5);
    flush(c, 2, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 2, 2, 0, 1, 9, 0), 0);
}

Test(sinks, tree_single_enter_at_huge_depth_is_bounded)
{
    uint64_t depths[] = {100000, 2000000};
    for (int k = 0; k < 2; k++) {
        DEEP_AT = depths[k];
        run_tree_counting(feed_one_deep_enter, "INCOMPLETE");
        cr_assert_lt(W.bytes, 1024, "depth %llu: %llu bytes printed", (unsigned long long)DEEP_AT,
                     (unsigned long long)W.bytes);
        cr_assert_not_null(strstr(W.found, "1 malformed batches"), "got: %s", W.found);
        if (k == 0)
            cr_assert_not_null(
                strstr(W.found, "1 enters skipped (over 64 levels below the open chain)"),
                "got: %s", W.found);
    }
}

#define TREE_DEEP_N 100000u

static void feed_deep_chain(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 2, 2, 0, 1, "pickle", 6, 5), 0);
    enc_type(&E, 1, "list");
    uint32_t seq = 0;
    for (uint32_t d = 1; d <= TREE_DEEP_N; d++) {
        enc_enter(&E, SERTRACE_TAG_LIST, d, 1, d, 2, d);
        if (d == TREE_DEEP_N)
            enc_note(&E, d, "bottom", "here");
        if (E.n > 4000)
            flush(c, 2, 1, seq++);
    }
    for (uint32_t d = TREE_DEEP_N; d >= 1; d--) {
        enc_exit(&E, d, 2 * TREE_DEEP_N + 1 - d);
        if (E.n > 4000)
            flush(c, 2, 1, seq++);
    }
    flush(c, 2, 1, seq++);
    cr_assert_eq(sertrace_core_dump_end(c, 2, 2, 0, 1, 2 * TREE_DEEP_N + 1, 0), 0);
}

Test(sinks, tree_100000_deep_prints_compact_lines)
{
    run_tree_counting(feed_deep_chain, "[depth 100000]");
    /* header + one enter and one exit per node + the note */
    cr_assert_eq(W.lines, 1 + 2ull * TREE_DEEP_N + 1);
    /* the longest lines are the last ones of dill's grammar (256 bars) */
    cr_assert_lt(W.max_line, 256 * 3 + 64, "longest line %llu bytes",
                 (unsigned long long)W.max_line);
    cr_assert_lt(W.bytes, 200ull * TREE_DEEP_N, "%llu bytes", (unsigned long long)W.bytes);
    cr_assert_lt(W.max_chunk, 256u << 10, "output handed over in bounded chunks");
    const char *bars16 = BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR BAR;
    char want[512];
    snprintf(want, sizeof want,
             "%s[depth 100000]" TEE "\xe2\x94\xac L: <list object at 0x186a0> len=1\n"
             "%s[depth 100000] @ bottom = here\n"
             "%s[depth 100000]\xe2\x94\x94 # L [1 B]\n",
             bars16, bars16, bars16);
    cr_assert_str_eq(W.found, want);
}

static void feed_256_deep(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 2, 2, 0, 1, "pickle", 6, 5), 0);
    for (uint32_t d = 1; d <= 260; d++)
        enc_enter(&E, SERTRACE_TAG_LIST, d, 0, d, 0, d);
    for (uint32_t d = 260; d >= 1; d--)
        enc_exit(&E, d, 521 - d);
    flush(c, 2, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 2, 2, 0, 1, 521, 0), 0);
}

Test(sinks, tree_dill_grammar_kept_up_to_256_bars)
{
    run_tree_counting(feed_256_deep, "[depth");
    /* enter lines have depth-2 bars, exits depth-1: compact from the
     * enter at 259 and the exit at 258 */
    cr_assert_not_null(strstr(W.found, "[depth 259]" TEE "\xe2\x94\xac L"), "got: %s", W.found);
    cr_assert_not_null(strstr(W.found, "[depth 258]\xe2\x94\x94 # L ["), "got: %s", W.found);
    cr_assert_null(strstr(W.found, "[depth 258]" TEE), "got: %s", W.found);
    cr_assert_null(strstr(W.found, "[depth 257]"), "got: %s", W.found);
    cr_assert_geq(W.max_line, 256 * 3, "%llu", (unsigned long long)W.max_line);
    cr_assert_lt(W.max_line, 256 * 3 + 64, "%llu", (unsigned long long)W.max_line);
}

/* flush-each-dump (sertrace report --live): the tree sink writes through a
 * FILE * on a pipe, as the plugin does.  Set, the text of dump 1 can be
 * read from the pipe once dump 1 closed, before dump 2 begins; unset, it
 * is still in the sink's 64 KiB buffer (and stdio's) at that point. */
static size_t drain(int fd, sertrace_buf *got)
{
    char chunk[4096];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r <= 0) {
            cr_assert(r == 0 || errno == EAGAIN, "read: %s", strerror(errno));
            return total;
        }
        cr_assert_eq(sertrace_buf_append(got, chunk, (size_t)r), 0);
        total += (size_t)r;
    }
}

static void tree_on_pipe(bool flush_each_dump, sertrace_buf *after1, sertrace_buf *after2,
                         sertrace_buf *at_end)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
    FILE *w = fdopen(fds[1], "w");
    cr_assert_not_null(w);
    cr_assert_eq(setvbuf(w, NULL, _IOFBF, 1 << 16), 0); /* as the plugin */
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    o.flush_each_dump = flush_each_dump;
    o.flush = sertrace_summary_flush_file;
    sertrace_treeprint *t = sertrace_treeprint_create(&o, sertrace_summary_write_file, w);
    sertrace_core_visitor v;
    sertrace_treeprint_visitor(t, &v);
    sertrace_core *c = sertrace_core_create(&v);
    sample(c, 7, 1, "mod.First");
    drain(fds[0], after1); /* dump 2 has not begun */
    sample(c, 7, 2, "mod.Second");
    drain(fds[0], after2);
    cr_assert_eq(sertrace_core_finish(c), 0);
    cr_assert_eq(sertrace_treeprint_finish(t, sertrace_core_get_stats(c)), 0);
    drain(fds[0], at_end); /* before fclose: finish wrote everything */
    sertrace_core_destroy(c);
    sertrace_treeprint_destroy(t);
    cr_assert_eq(fclose(w), 0);
    drain(fds[0], at_end);
    close(fds[0]);
}

Test(sinks, tree_flush_each_dump_writes_each_tree_at_once)
{
    sertrace_buf a1 = SERTRACE_BUF_INIT, a2 = SERTRACE_BUF_INIT, end = SERTRACE_BUF_INIT;
    tree_on_pipe(true, &a1, &a2, &end);
    cr_assert_not_null(a1.data, "nothing written after dump 1");
    cr_assert(strncmp(a1.data, "\xe2\x94\x80\xe2\x94\x80 dump 1 \xc2\xb7", 12) == 0, "got:\n%s",
              a1.data);
    cr_assert_not_null(strstr(a1.data, "O: <mod.First object at 0xabe0>"), "got:\n%s", a1.data);
    /* the whole tree of dump 1: its root's exit line ends the text */
    const char *root_exit = "\xe2\x94\x94 # D2 [100 B]\n";
    cr_assert(a1.len > strlen(root_exit) &&
                  strcmp(a1.data + a1.len - strlen(root_exit), root_exit) == 0,
              "got:\n%s", a1.data);
    cr_assert_null(strstr(a1.data, "dump 2"));
    cr_assert_not_null(a2.data, "nothing written after dump 2");
    cr_assert(strncmp(a2.data, "\xe2\x94\x80\xe2\x94\x80 dump 2 \xc2\xb7", 12) == 0, "got:\n%s",
              a2.data);
    cr_assert_not_null(strstr(a2.data, "mod.Second"));
    cr_assert_null(end.data, "nothing left for the end");
    sertrace_buf_free(&a1);
    sertrace_buf_free(&a2);
}

Test(sinks, tree_without_flush_each_dump_stays_buffered)
{
    sertrace_buf a1 = SERTRACE_BUF_INIT, a2 = SERTRACE_BUF_INIT, end = SERTRACE_BUF_INIT;
    tree_on_pipe(false, &a1, &a2, &end);
    cr_assert_eq(a1.len, 0, "written early:\n%s", a1.data);
    cr_assert_eq(a2.len, 0, "written early:\n%s", a2.data);
    cr_assert_not_null(end.data);
    cr_assert_not_null(strstr(end.data, "mod.First"));
    cr_assert_not_null(strstr(end.data, "mod.Second"));
    sertrace_buf_free(&end);
}

/* The tree printer writes names that need no escaping with
 * sertrace_fmt_enter_plain: byte for byte the line of sertrace_fmt_enter. */
Test(sinks, fmt_enter_plain_same_as_enter)
{
    static const char *names[] = {"dict", "dispatch.State", "a b~c", "", "x"};
    static const uint8_t tags[] = {SERTRACE_TAG_DICT, SERTRACE_TAG_CLASS,    SERTRACE_TAG_FUNCTION,
                                   SERTRACE_TAG_MEMO, SERTRACE_TAG_INSTANCE, 250};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (size_t k = 0; k < sizeof tags / sizeof *tags; k++)
            for (uint32_t depth = 1; depth < 40; depth += 7) {
                sertrace_buf a = SERTRACE_BUF_INIT, b = SERTRACE_BUF_INIT;
                cr_assert(sertrace_fmt_is_plain(names[i], strlen(names[i])));
                cr_assert_eq(sertrace_fmt_enter(&a, depth, tags[k], names[i], strlen(names[i]),
                                                0x7f00ab, depth),
                             0);
                cr_assert_eq(sertrace_fmt_enter_plain(&b, depth, tags[k], names[i],
                                                      strlen(names[i]), 0x7f00ab, depth),
                             0);
                cr_assert_str_eq(a.data, b.data);
                sertrace_buf_free(&a);
                sertrace_buf_free(&b);
            }
    cr_assert_not(sertrace_fmt_is_plain("a\\b", 3));
    cr_assert_not(sertrace_fmt_is_plain("a\x1b", 2));
    cr_assert_not(sertrace_fmt_is_plain("\xc3\xa9", 2));
    cr_assert_not(sertrace_fmt_is_plain("a\x7f", 2));
}

/* A chain of 8 nodes (types T1..T8, long names) with the dump's bytes
 * mostly in 55 small siblings of 11 other types, so the type table (10
 * rows by self bytes) names only filler types and the chain's names are
 * first escaped into the summary's name cache while a top entry's
 * ancestry is printed: the cache grows (and moves) in the middle of that
 * line.  Every ancestry must still read the right names (a stale pointer
 * into the old cache printed freed bytes; the worker/inline comparison of
 * tests/plugin found it). */
static char long_names[8][920];

static void feed_long_chain(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 7, 8, 0, 1, "pickle", 6, 5), 0);
    for (int d = 1; d <= 8; d++) {
        snprintf(long_names[d - 1], sizeof long_names[d - 1], "T%d.", d);
        memset(long_names[d - 1] + 3, 'a' + d, sizeof long_names[d - 1] - 4);
        long_names[d - 1][sizeof long_names[d - 1] - 1] = '\0';
        enc_type(&E, (uint64_t)d, long_names[d - 1]);
        enc_enter(&E, SERTRACE_TAG_INSTANCE, (uint64_t)d, (uint64_t)d, 0x1000 + (uint64_t)d, 0,
                  (uint64_t)d);
        flush(c, 7, 1, (uint32_t)(d - 1));
    }
    uint64_t pos = 28; /* T8: 8..28 (20 B), then each ancestor 2 B more */
    for (int d = 8; d >= 2; d--) {
        enc_exit(&E, (uint64_t)d, pos);
        pos += 2;
    }
    for (int t = 0; t < 11; t++) {
        char name[16];
        snprintf(name, sizeof name, "filler%d", t);
        enc_type(&E, (uint64_t)(20 + t), name);
        for (int k = 0; k < 5; k++) {
            enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, (uint64_t)(20 + t), 0x9000, 0, pos);
            pos += 10;
            enc_exit(&E, 2, pos);
        }
    }
    enc_exit(&E, 1, pos + 2);
    flush(c, 7, 1, 8);
    cr_assert_eq(sertrace_core_dump_end(c, 7, 8, 0, 1, pos + 3, 0), 0);
}

Test(sinks, summary_ancestry_names_survive_cache_growth)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.exact = true;
    run_summary(&o, feed_long_chain);
    sertrace_buf want = SERTRACE_BUF_INIT;
    for (int d = 1; d <= 8; d++) {
        if (d > 1)
            sertrace_buf_append(&want, " \xe2\x80\xba ", 5);
        sertrace_buf_append(&want, "O ", 2);
        sertrace_buf_append(&want, long_names[d - 1], strlen(long_names[d - 1]));
    }
    /* the deepest node's line: the whole chain (8 = ANC_MAX) */
    cr_assert_not_null(strstr(OUT.data, want.data), "got:\n%.3000s", OUT.data);
    sertrace_buf_free(&want);
}

/* A dump whose dump_end says its sizes are lower bounds
 * (SERTRACE_END_LOWER_BOUNDS: a pickler wrote to a file sertrace could not
 * watch): the tree, the summary text and JSON show the payload and every
 * node as "at least", never as exact; a dump without it stays exact. */
static void feed_lower_then_exact(sertrace_core *c)
{
    SAMPLE_END_FLAGS = SERTRACE_END_LOWER_BOUNDS;
    sample(c, 7, 1, "mod.Thing");
    SAMPLE_END_FLAGS = 0;
    sample(c, 7, 2, "mod.Thing");
}

Test(sinks, tree_lower_bound_dump_shows_every_size_as_a_bound)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    run_tree(&o, feed_lower_then_exact);
    const char *second = strstr(OUT.data, "dump 2 \xc2\xb7");
    cr_assert_not_null(second, "got:\n%s", OUT.data);
    size_t first_len = (size_t)(second - OUT.data);
    char *first = strndup(OUT.data, first_len);
    cr_assert_not_null(strstr(first, "payload \xe2\x89\xa5 103 B \xc2\xb7 sizes are lower bounds"),
                       "got:\n%s", first);
    cr_assert_not_null(strstr(first, "\xe2\x94\x82\xe2\x94\x94 # L [\xe2\x89\xa5 40 B]\n"),
                       "got:\n%s", first);
    cr_assert_not_null(strstr(first, "\xe2\x94\x94 # D2 [\xe2\x89\xa5 100 B]\n"), "got:\n%s",
                       first);
    cr_assert_not_null(strstr(first, "# I [\xe2\x89\xa5 2 B]\n"), "leaves too, got:\n%s", first);
    /* no size line of the first dump is printed as exact */
    for (const char *p = strstr(first, "# "); p; p = strstr(p + 1, "# "))
        cr_assert(strncmp(strchr(p, '[') + 1, "\xe2\x89\xa5 ", 4) == 0, "exact size in:\n%s",
                  first);
    cr_assert_null(strstr(first, "INCOMPLETE"), "a bound is not a loss");
    free(first);
    cr_assert_not_null(strstr(second, "payload 103 B"), "got:\n%s", second);
    cr_assert_null(strstr(second, "lower bounds"), "got:\n%s", second);
    cr_assert_not_null(strstr(second, "\xe2\x94\x94 # D2 [100 B]\n"), "got:\n%s", second);
}

Test(sinks, tree_lower_bound_dump_folds_say_at_least)
{
    sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    o.exact = true;
    o.max_depth = 2;
    SAMPLE_END_FLAGS = SERTRACE_END_LOWER_BOUNDS;
    run_tree(&o, feed_sample);
    cr_assert_not_null(strstr(OUT.data, "4 nodes below max-depth, \xe2\x89\xa5 8 B"), "got:\n%s",
                       OUT.data);
}

Test(sinks, summary_text_lower_bound_dump)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.exact = true;
    o.top = 3;
    o.oversize_bytes = 35;
    run_summary(&o, feed_lower_then_exact);
    const char *second = strstr(OUT.data, "dump 2 \xc2\xb7");
    cr_assert_not_null(second, "got:\n%s", OUT.data);
    char *first = strndup(OUT.data, (size_t)(second - OUT.data));
    cr_assert_not_null(strstr(first, "payload \xe2\x89\xa5 103 B"), "got:\n%s", first);
    cr_assert_not_null(strstr(first, "sizes are lower bounds"), "got:\n%s", first);
    cr_assert_not_null(strstr(first, "\xe2\x89\xa5 100 B (self \xe2\x89\xa5 30 B)  D2 dict\n"),
                       "got:\n%s", first);
    cr_assert_not_null(strstr(first, "!! OVERSIZED \xe2\x89\xa5 40 B"),
                       "flag rendered again, got:\n%s", first);
    cr_assert_not_null(strstr(first, "\xe2\x89\xa5 40 B"), "table row, got:\n%s", first);
    free(first);
    const char *overall = strstr(OUT.data, "== overall");
    cr_assert_not_null(overall);
    cr_assert_not_null(strstr(second, "payload 103 B"), "got:\n%s", second);
    cr_assert(strstr(second, "!! OVERSIZED 40 B") != NULL, "got:\n%s", second);
    cr_assert(strstr(second, "lower bounds") > overall || strstr(second, "lower bounds") == NULL,
              "the exact dump says nothing of bounds, got:\n%s", second);
    cr_assert_not_null(strstr(overall, "payload \xe2\x89\xa5 206 B"), "got:\n%s", overall);
    cr_assert_not_null(strstr(overall, "1 dumps' sizes are lower bounds"), "got:\n%s", overall);
}

Test(sinks, summary_json_lower_bound_dump)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.top = 3;
    o.oversize_bytes = 35;
    run_summary(&o, feed_lower_then_exact);
    const char *s = OUT.data;
    const char *d1 = strstr(s, "\"dump_id\": 1,");
    const char *d2 = strstr(s, "\"dump_id\": 2,");
    cr_assert(d1 && d2 && d1 < d2, "got:\n%s", s);
    char *first = strndup(d1, (size_t)(d2 - d1));
    cr_assert_not_null(strstr(first, "\"sizes_are_lower_bounds\": true"), "got:\n%s", first);
    cr_assert_not_null(strstr(first, "\"root_bytes\": 100, \"root_exact\": false"), "got:\n%s",
                       first);
    cr_assert_null(strstr(first, "\"exact\": true"), "no exact size in it, got:\n%s", first);
    cr_assert_not_null(
        strstr(first, "{\"bytes\": 100, \"self\": 30, \"exact\": false, \"bound\": \"lower\""),
        "got:\n%s", first);
    cr_assert_not_null(strstr(first, "{\"kind\": \"oversized\""), "got:\n%s", first);
    free(first);
    cr_assert_not_null(strstr(d2, "\"sizes_are_lower_bounds\": false"), "got:\n%s", d2);
    cr_assert_not_null(strstr(d2, "\"exact\": true"), "got:\n%s", d2);
    cr_assert_not_null(strstr(s, "\"lower_bound_dumps\": 1"), "got:\n%s", s);
}

/* Three User objects written, then referenced twice (memo references
 * carry the type of the object they point back to). */
static void feed_refs(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 9, 9, 1, 1, "pickle", 6, 5), 0);
    enc_type(&E, 1, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 0x10, 5, 2);
    enc_type(&E, 2, "app.User");
    uint64_t pos = 3;
    for (int k = 0; k < 3; k++, pos += 10) {
        enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 2, 0x100 + 16 * (uint64_t)k, 0, pos);
        enc_exit(&E, 2, pos + 10);
    }
    for (int k = 0; k < 2; k++, pos += 2) {
        enc_enter(&E, SERTRACE_TAG_MEMO, 2, 2, 0x100, 0, pos);
        enc_exit(&E, 2, pos + 2);
    }
    enc_exit(&E, 1, pos + 1);
    flush(c, 9, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 9, 9, 0, 1, pos + 2, 0), 0);
}

/* Issue #11: a type's objects and the memo references to them are two
 * figures, per dump and overall, in text and JSON. */
Test(sinks, summary_type_objects_apart_from_refs)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.exact = true;
    run_summary(&o, feed_refs);
    const char *s = OUT.data;
    cr_assert_not_null(
        strstr(s, "  by type             objects        incl.         self   share\n"), "got:\n%s",
        s);
    /* 3 objects of 10 B, 2 refs of 2 B: 34 B of the 36 B the list holds */
    const char *row = "    app.User                3         34 B         34 B   94.4%  + 2 refs\n";
    const char *first = strstr(s, row);
    cr_assert_not_null(first, "got:\n%s", s);
    cr_assert_not_null(strstr(first + 1, row), "no overall row; got:\n%s", s);
    cr_assert_not_null(
        strstr(s, "    list                    1         36 B          2 B    5.6%\n"), "got:\n%s",
        s);
    sertrace_buf_clear(&OUT);
    o.json = true;
    run_summary(&o, feed_refs);
    s = OUT.data;
    const char *js = "{\"type\": \"app.User\", \"count\": 5, \"bytes\": 34, \"self\": 34, "
                     "\"share\": 0.9444, \"objects\": 3, \"refs\": 2, \"owned\": 34}";
    first = strstr(s, js);
    cr_assert_not_null(first, "got:\n%s", s);
    cr_assert_not_null(strstr(first + 1, js), "no overall row; got:\n%s", s);
    /* no reduce arguments (no labels): each type owns its self bytes */
    cr_assert_not_null(strstr(s, "\"objects\": 1, \"refs\": 0, \"owned\": 2}"), "got:\n%s", s);
}

/* The text between `from` and the first `to` after it, copied (NULL when
 * either is missing). */
static char *between(const char *s, const char *from, const char *to)
{
    const char *a = strstr(s, from);
    if (!a)
        return NULL;
    a += strlen(from);
    const char *z = strstr(a, to);
    return z ? strndup(a, (size_t)(z - a)) : NULL;
}

/* A dump with an empty records batch lost in the middle (seq gap) and a
 * lost exit, and one that stopped inside: the tree and the summary
 * describe each loss in the same words (issue #17: one loss table). */
static void feed_losses(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 0, 1, 0, 3);
    flush(c, 1, 1, 0);
    enc_exit(&E, 1, 20); /* the depth-2 node's exit is lost */
    flush(c, 1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(c, 1, 1, 0, 1, 21, 0), 0);
    feed_unfinished(c);
}

Test(sinks, losses_worded_once_for_tree_and_summary)
{
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_losses);
    char *tree = strdup(OUT.data);
    sertrace_buf_clear(&OUT);
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    run_summary(&o, feed_losses);
    /* first dump: records lost, exit lost */
    char *in_tree = between(tree, "!! INCOMPLETE: ", "; sizes marked");
    char *in_summary = between(OUT.data, "  !! incomplete: ", "\n");
    cr_assert_not_null(in_tree, "got:\n%s", tree);
    cr_assert_not_null(in_summary, "got:\n%s", OUT.data);
    cr_assert_str_eq(in_tree, "1 records events lost; 1 exits lost", "got:\n%s", tree);
    cr_assert_str_eq(in_summary, in_tree);
    free(in_tree);
    free(in_summary);
    /* second dump: unfinished, and no "no node recorded" beside it */
    const char *tree2 = strstr(strstr(tree, "!! INCOMPLETE: ") + 1, "!! INCOMPLETE: ");
    const char *sum2 = strstr(strstr(OUT.data, "  !! incomplete: ") + 1, "  !! incomplete: ");
    cr_assert_not_null(tree2, "got:\n%s", tree);
    cr_assert_not_null(sum2, "got:\n%s", OUT.data);
    in_tree = between(tree2, "!! INCOMPLETE: ", "; sizes marked");
    in_summary = between(sum2, "  !! incomplete: ", "\n");
    cr_assert_str_eq(in_tree, "unfinished (no dump_end: the process stopped inside it)");
    cr_assert_str_eq(in_summary, in_tree);
    free(in_tree);
    free(in_summary);
    free(tree);
}

/* The line that ends both outputs when the tracer lost events: one
 * wording (it had drifted: ';' against ':', INCOMPLETE against
 * incomplete). */
Test(sinks, stream_losses_worded_once_for_tree_and_summary)
{
    sertrace_treeprint_opts t = SERTRACE_TREEPRINT_OPTS_DEFAULT;
    run_tree(&t, feed_lossy);
    char *in_tree = between(OUT.data, "!! the tracer", "\n");
    sertrace_buf_clear(&OUT);
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    run_summary(&o, feed_lossy);
    char *in_summary = between(OUT.data, "  !! the tracer", "\n");
    cr_assert_not_null(in_tree);
    cr_assert_not_null(in_summary, "got:\n%s", OUT.data);
    cr_assert_str_eq(in_tree, " discarded 5 events; 1 records events missing by sequence number: "
                              "affected dumps are marked incomplete");
    cr_assert_str_eq(in_summary, in_tree);
    free(in_tree);
    free(in_summary);
}

/* ---- shared objects: refs and retained bytes (issue 13 item 5) ---------- */

/* SHARED_MODE: 0 complete; 1 a records batch lost after the root opened;
 * 2 dump_end says the sizes are lower bounds. */
static int SHARED_MODE;

/* list root 2..52 (50 B) {
 *   X  list 3..37 (34 B) {
 *     Y  dict 4..24 (20 B) { Y2 list 6..11 (5 B) }
 *     Z  list 24..34 (10 B)
 *     Mo X 34..36              a reference to X from inside X
 *   }
 *   W  list 37..47 (10 B) { Mo Z 40..42 }   Z referenced from outside X
 *   Mo Y  47..49                             Y and Y2 from outside X
 *   Mo Y2 49..51
 * }
 * retained(X) = 34 - 20 (Y, the maximal one: Y2 is inside it) - 10 (Z) = 4;
 * retained(Y) = 20 - 5 (Y2 is referenced from outside Y) = 15. */
static void feed_shared(sertrace_core *c)
{
    uint32_t seq = 0;
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 1, 1, "pickle", 6, 4), 0);
    enc_type(&E, 1, "list");
    enc_type(&E, 2, "dict");
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 0x10, 4, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 1, 0x20, 4, 3);   /* X */
    enc_enter(&E, SERTRACE_TAG_DICT, 3, 2, 0x30, 2, 4);   /* Y */
    enc_atom(&E, SERTRACE_TAG_LIST, 4, 1, 0x38, 1, 6, 5); /* Y2 */
    enc_exit(&E, 3, 24);
    enc_atom(&E, SERTRACE_TAG_LIST, 3, 1, 0x40, 1, 24, 10); /* Z */
    enc_atom(&E, SERTRACE_TAG_MEMO, 3, 1, 0x20, 0, 34, 2);  /* X, from inside X */
    flush(c, 5, 1, seq++);
    if (SHARED_MODE == 1)
        seq++; /* a batch lost: the dump is incomplete */
    enc_exit(&E, 2, 37);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 1, 0x50, 2, 37); /* W */
    enc_atom(&E, SERTRACE_TAG_MEMO, 3, 1, 0x40, 0, 40, 2);
    enc_exit(&E, 2, 47);
    enc_atom(&E, SERTRACE_TAG_MEMO, 2, 2, 0x30, 0, 47, 2);
    enc_atom(&E, SERTRACE_TAG_MEMO, 2, 1, 0x38, 0, 49, 2);
    enc_exit(&E, 1, 52);
    flush(c, 5, 1, seq++);
    cr_assert_eq(sertrace_core_dump_end_flags(c, 5, 5, 2, 1, 53, 0, -1,
                                              SHARED_MODE == 2 ? SERTRACE_END_LOWER_BOUNDS : 0),
                 0);
}

/* The JSON top entry of `bytes` bytes at `depth`, up to its ancestry. */
static char *top_json(const char *s, uint64_t bytes, uint32_t depth)
{
    char head[96];
    snprintf(head, sizeof head, "{\"bytes\": %llu, \"self\": ", (unsigned long long)bytes);
    for (const char *p = strstr(s, head); p; p = strstr(p + 1, head)) {
        const char *end = strstr(p, "\"ancestry\"");
        char dep[32];
        snprintf(dep, sizeof dep, "\"depth\": %u,", depth);
        const char *dp = strstr(p, dep);
        if (end && dp && dp < end)
            return strndup(p, (size_t)(end - p));
    }
    return NULL;
}

static void assert_entry(const char *s, uint64_t bytes, uint32_t depth, const char *want)
{
    char *e = top_json(s, bytes, depth);
    cr_assert_not_null(e, "no entry of %llu B at depth %u in:\n%s", (unsigned long long)bytes,
                       depth, s);
    cr_assert_not_null(strstr(e, want), "want %s in entry %s", want, e);
    free(e);
}

Test(sinks, summary_retained_bytes_of_shared_objects)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.top = 20;
    SHARED_MODE = 0;
    run_summary(&o, feed_shared);
    const char *s = OUT.data;
    assert_entry(s, 50, 1, "\"refs\": 0, \"retained_bytes\": 50,");
    /* X: Y (with Y2 inside it) and Z are written elsewhere without it; its
     * own reference from inside it counts as a ref, and takes nothing out */
    assert_entry(s, 34, 2, "\"refs\": 1, \"retained_bytes\": 4,");
    /* Y: less than its subtree by exactly Y2, referenced from outside Y */
    assert_entry(s, 20, 3, "\"refs\": 1, \"retained_bytes\": 15,");
    assert_entry(s, 10, 3, "\"refs\": 1, \"retained_bytes\": 10,"); /* Z */
    assert_entry(s, 10, 2, "\"refs\": 0, \"retained_bytes\": 10,"); /* W */
    assert_entry(s, 5, 4, "\"refs\": 1, \"retained_bytes\": 5,");   /* Y2 */
    /* a reference has no retained bytes of its own */
    assert_entry(s, 2, 2, "\"retained_bytes\": null,");
    /* the overall top keeps them */
    const char *totals = strstr(s, "\"totals\"");
    cr_assert_not_null(totals);
    assert_entry(totals, 34, 2, "\"refs\": 1, \"retained_bytes\": 4,");

    sertrace_buf_clear(&OUT);
    o.json = false;
    o.exact = true;
    run_summary(&o, feed_shared);
    s = OUT.data;
    cr_assert_not_null(
        strstr(s, "    34 B (self 2 B, 1 ref, retains 4 B)  L list \xe2\x80\xba L list\n"),
        "got:\n%s", s);
    cr_assert_not_null(strstr(s, "    20 B (self 15 B, 1 ref, retains 15 B)  "), "got:\n%s", s);
    /* retained equal to the bytes is not repeated */
    cr_assert_not_null(strstr(s, "    50 B (self 2 B)  L list\n"), "got:\n%s", s);
}

Test(sinks, summary_retained_bytes_not_shown_when_sizes_are_not_exact)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.top = 20;
    for (SHARED_MODE = 1; SHARED_MODE <= 2; SHARED_MODE++) {
        sertrace_buf_clear(&OUT);
        run_summary(&o, feed_shared);
        cr_assert_null(strstr(OUT.data, "\"retained_bytes\": 4"), "mode %d got:\n%s", SHARED_MODE,
                       OUT.data);
        cr_assert_null(strstr(OUT.data, "\"retained_bytes\": 1"), "mode %d got:\n%s", SHARED_MODE,
                       OUT.data);
        cr_assert_not_null(strstr(OUT.data, "\"retained_bytes\": null"), "mode %d got:\n%s",
                           SHARED_MODE, OUT.data);
        /* the refs are still counted */
        cr_assert_not_null(strstr(OUT.data, "\"refs\": 1"), "mode %d got:\n%s", SHARED_MODE,
                           OUT.data);
    }
    SHARED_MODE = 0;
}

/* Transitively shared: Y is referenced after X, so it is taken out of X,
 * and with it what the references inside Y point to -- B (from inside V,
 * an object nested in Y) and A -- while V, referenced from inside Y, is
 * inside Y already (its references are walked with Y's).
 * root list 2..44 {
 *   X list 3..40 {
 *     A list 4..12 (8 B)   B list 12..18 (6 B)
 *     Y list 18..38 (20 B) { V list 19..25 { Mo B 20..22 }  Mo V 25..27  Mo A 27..29 }
 *   }
 *   Mo Y 40..42
 * }
 * retained(X) = 37 - 20 (Y) - 8 (A) - 6 (B) = 3; Y, V, A, B retain their
 * bytes (nothing inside them is referenced from after their end). */
static void feed_transitive(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 7, 7, 1, 1, "pickle", 6, 4), 0);
    enc_type(&E, 1, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 0x10, 3, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 1, 0x20, 4, 3);    /* X */
    enc_atom(&E, SERTRACE_TAG_LIST, 3, 1, 0x40, 1, 4, 8);  /* A */
    enc_atom(&E, SERTRACE_TAG_LIST, 3, 1, 0x50, 1, 12, 6); /* B */
    enc_enter(&E, SERTRACE_TAG_LIST, 3, 1, 0x30, 4, 18);   /* Y */
    enc_enter(&E, SERTRACE_TAG_LIST, 4, 1, 0x38, 2, 19);   /* V */
    enc_atom(&E, SERTRACE_TAG_MEMO, 5, 1, 0x50, 0, 20, 2); /* B */
    enc_exit(&E, 4, 25);
    enc_atom(&E, SERTRACE_TAG_MEMO, 4, 1, 0x38, 0, 25, 2); /* V */
    enc_atom(&E, SERTRACE_TAG_MEMO, 4, 1, 0x40, 0, 27, 2); /* A */
    enc_exit(&E, 3, 38);
    enc_exit(&E, 2, 40);
    enc_atom(&E, SERTRACE_TAG_MEMO, 2, 1, 0x30, 0, 40, 2); /* Y */
    enc_exit(&E, 1, 44);
    flush(c, 7, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 7, 7, 2, 1, 45, 0), 0);
}

Test(sinks, summary_retained_bytes_take_out_transitively)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.json = true;
    o.top = 20;
    run_summary(&o, feed_transitive);
    const char *s = OUT.data;
    assert_entry(s, 42, 1, "\"refs\": 0, \"retained_bytes\": 42,");
    assert_entry(s, 37, 2, "\"refs\": 0, \"retained_bytes\": 3,");  /* X */
    assert_entry(s, 20, 3, "\"refs\": 1, \"retained_bytes\": 20,"); /* Y */
    assert_entry(s, 8, 3, "\"refs\": 1, \"retained_bytes\": 8,");   /* A */
    assert_entry(s, 6, 3, "\"refs\": 1, \"retained_bytes\": 6,");   /* B */
    assert_entry(s, 6, 4, "\"refs\": 1, \"retained_bytes\": 6,");   /* V */
}

/* A function written by reference (F2, named by itself) and referenced
 * twice: the references (named "function app.helper" by the serializer)
 * count on the function's row, as those to an instance do. */
static void feed_function_refs(sertrace_core *c)
{
    cr_assert_eq(sertrace_core_dump_begin(c, 6, 6, 1, 1, "pickle", 6, 4), 0);
    enc_type(&E, 1, "list");
    enc_type(&E, 2, "app.helper");
    enc_type(&E, 3, "function app.helper");
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 0x10, 4, 2);
    enc_atom(&E, SERTRACE_TAG_FUNCTION, 2, 2, 0x700, 0, 3, 20);
    enc_atom(&E, SERTRACE_TAG_MEMO, 2, 3, 0x700, 0, 23, 2);
    enc_atom(&E, SERTRACE_TAG_MEMO, 2, 3, 0x700, 0, 25, 2);
    enc_exit(&E, 1, 28);
    flush(c, 6, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 6, 6, 2, 1, 29, 0), 0);
}

Test(sinks, summary_function_refs_count_on_the_function_row)
{
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    o.exact = true;
    run_summary(&o, feed_function_refs);
    const char *s = OUT.data;
    cr_assert_null(strstr(s, "function app.helper  "), "a row of its own, got:\n%s", s);
    const char *row = "    app.helper              1         24 B         24 B   92.3%  + 2 refs\n";
    const char *first = strstr(s, row);
    cr_assert_not_null(first, "got:\n%s", s);
    cr_assert_not_null(strstr(first + 1, row), "no overall row; got:\n%s", s);
    cr_assert_not_null(strstr(s, "20 B (self 20 B, 2 refs)"), "got:\n%s", s);
    sertrace_buf_clear(&OUT);
    o.json = true;
    run_summary(&o, feed_function_refs);
    cr_assert_not_null(strstr(OUT.data, "{\"type\": \"app.helper\", \"count\": 3, \"bytes\": 24, "
                                        "\"self\": 24, \"share\": 0.9231, \"objects\": 1, "
                                        "\"refs\": 2, \"owned\": 24}"),
                       "got:\n%s", OUT.data);
    cr_assert_null(strstr(OUT.data, "{\"type\": \"function app.helper\", \"count\""), "got:\n%s",
                   OUT.data);
}
