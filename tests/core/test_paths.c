/* test_paths.c -- Criterion tests of edge labels (schema v5) on synthetic
 * streams: the LABEL and NAME records decoded onto nodes (a label applies
 * to the next ENTER only, an EXIT or a lost batch drops it, NAME shares the
 * TYPE index space), the text of every label kind (format/labels.c), whole
 * paths (analyzers/core/paths.c) and path patterns with their no-double-
 * count rule (pathstats.c).  The records are written by tests/core/enc.h,
 * independent of the runtime's encoder. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "format.h"
#include "paths.h"
#include "pathstats.h"

static void enc_name(enc *e, uint64_t index, const char *text)
{
    enc_u8(e, SERTRACE_REC_NAME);
    enc_varint(e, index);
    enc_str(e, text, strlen(text));
}

static void enc_label(enc *e, uint8_t kind, uint64_t value)
{
    enc_u8(e, SERTRACE_REC_LABEL);
    enc_u8(e, kind);
    enc_varint(e, value);
}

/* ---- label texts -------------------------------------------------------- */

static const char *label(uint8_t kind, uint64_t value, const char *name, unsigned mode)
{
    static sertrace_buf b = SERTRACE_BUF_INIT;
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_label(&b, kind, value, name, name ? strlen(name) : 0, mode), 0);
    return b.data ? b.data : "";
}

Test(labels, text_of_every_kind)
{
    cr_assert_str_eq(label(SERTRACE_LABEL_POS, 3, NULL, 0), "[3]");
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "cache", 0), "['cache']");
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "cache", SERTRACE_FMT_LABEL_IN_STATE), ".cache");
    /* a key under a state that is no identifier keeps the subscript */
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "a b", SERTRACE_FMT_LABEL_IN_STATE), "['a b']");
    /* escaped like every string of a trace */
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "x\ny", 0), "['x\\x0ay']");
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, NULL, 0), "['?']");
    cr_assert_str_eq(label(SERTRACE_LABEL_INT, 0, NULL, 0), "[0]");
    cr_assert_str_eq(label(SERTRACE_LABEL_INT, 84, NULL, 0), "[42]");
    cr_assert_str_eq(label(SERTRACE_LABEL_INT, 13, NULL, 0), "[-7]");
    cr_assert_str_eq(label(SERTRACE_LABEL_INT, UINT64_MAX, NULL, 0), "[-9223372036854775808]");
    cr_assert_str_eq(label(SERTRACE_LABEL_HIDDEN, 5, NULL, 0), "[\xe2\x80\xa6]");
    cr_assert_str_eq(label(SERTRACE_LABEL_ATTR, 2, "avatar", 0), ".avatar");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE, NULL, 0), "(state)");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE, NULL, SERTRACE_FMT_LABEL_PATH),
                     "");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS, NULL, 0), "(args)");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE, NULL, 0),
                     "(reconstructor)");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT, NULL, 0), "{element}");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, SERTRACE_ROLE_DICT_KEY, NULL, 0), "{key}");
    cr_assert_str_eq(label(SERTRACE_LABEL_ROLE, 99, NULL, 0), "(role 99)");
    cr_assert_str_eq(label(77, 1, NULL, 0), "(label 77)");
    cr_assert_str_eq(label(SERTRACE_LABEL_NONE, 1, NULL, 0), "");
}

Test(labels, pattern_mode_hides_positions_and_keys_not_attributes)
{
    unsigned pat = SERTRACE_FMT_LABEL_PATTERN | SERTRACE_FMT_LABEL_PATH;
    cr_assert_str_eq(label(SERTRACE_LABEL_POS, 3, NULL, pat), "[*]");
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "k", pat), "[*]");
    cr_assert_str_eq(label(SERTRACE_LABEL_INT, 4, NULL, pat), "[*]");
    cr_assert_str_eq(label(SERTRACE_LABEL_HIDDEN, 1, NULL, pat), "[*]");
    cr_assert_str_eq(label(SERTRACE_LABEL_KEY, 1, "cache", pat | SERTRACE_FMT_LABEL_IN_STATE),
                     ".cache");
    cr_assert_str_eq(label(SERTRACE_LABEL_ATTR, 1, "avatar", pat), ".avatar");
}

/* ---- decoding and paths ------------------------------------------------- */

#define MAXN 64
typedef struct seen {
    char path[MAXN][128];
    uint8_t kind[MAXN];
    uint64_t value[MAXN];
    uint64_t bytes[MAXN];
    int n;
    sertrace_pathstats *ps;
} seen;

static int s_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    seen *s = ctx;
    return s->ps ? sertrace_pathstats_enter(s->ps, d, n) : 0;
}

static int s_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    seen *s = ctx;
    sertrace_buf b = SERTRACE_BUF_INIT;
    cr_assert_eq(sertrace_path_append(&b, d, d->stack, n->depth, false), 0);
    cr_assert_lt(s->n, MAXN);
    snprintf(s->path[s->n], sizeof s->path[0], "%s", b.data ? b.data : "");
    s->kind[s->n] = n->label_kind;
    s->value[s->n] = n->label;
    s->bytes[s->n] = n->bytes;
    s->n++;
    sertrace_buf_free(&b);
    return s->ps ? sertrace_pathstats_exit(s->ps, n) : 0;
}

static const char *path_of(const seen *s, uint64_t bytes)
{
    for (int i = 0; i < s->n; i++)
        if (s->bytes[i] == bytes)
            return s->path[i];
    return NULL;
}

/* Session (100 B) > state dict (90) > cache dict (50) > list (20) under
 * key 'k' > [1] tuple (5); users list (30) under attr .users > [0] (10). */
static void session_stream(enc *e)
{
    enc_type(e, 1, "app.Session");
    enc_type(e, 2, "dict");
    enc_name(e, 3, "cache");
    enc_enter(e, SERTRACE_TAG_INSTANCE, 1, 1, 0x10, 0, 0);
    enc_label(e, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
    enc_enter(e, SERTRACE_TAG_DICT, 2, 2, 0x20, 3, 5);
    enc_label(e, SERTRACE_LABEL_KEY, 3);
    enc_enter(e, SERTRACE_TAG_DICT, 3, 2, 0x30, 2, 10);
    enc_name(e, 4, "k");
    enc_label(e, SERTRACE_LABEL_KEY, 4);
    enc_type(e, 5, "list");
    enc_enter(e, SERTRACE_TAG_LIST, 4, 5, 0x40, 3, 15);
    enc_label(e, SERTRACE_LABEL_POS, 1);
    enc_type(e, 6, "tuple");
    enc_enter(e, SERTRACE_TAG_TUPLE, 5, 6, 0x50, 1, 20);
    enc_exit(e, 5, 25);
    enc_exit(e, 4, 35);
    enc_exit(e, 3, 60);
    enc_name(e, 7, "users");
    enc_label(e, SERTRACE_LABEL_KEY, 7);
    enc_enter(e, SERTRACE_TAG_LIST, 3, 5, 0x60, 2, 60);
    enc_label(e, SERTRACE_LABEL_POS, 0);
    enc_enter(e, SERTRACE_TAG_TUPLE, 4, 6, 0x70, 1, 70);
    enc_exit(e, 4, 80);
    enc_exit(e, 3, 90);
    enc_exit(e, 2, 95);
    enc_exit(e, 1, 100);
}

static seen *run(const uint8_t *buf, size_t n, bool with_paths)
{
    static seen s;
    memset(&s, 0, sizeof s);
    if (with_paths)
        s.ps = sertrace_pathstats_create();
    sertrace_core_visitor v = {.ctx = &s, .node_enter = s_enter, .node_exit = s_exit};
    sertrace_core *c = sertrace_core_create(&v);
    cr_assert_not_null(c);
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    cr_assert_eq(sertrace_core_records(c, 1, 1, 0, 1, 0, buf, n), 0);
    cr_assert_eq(sertrace_core_dump_end(c, 1, 1, 0, 1, 103, SERTRACE_STATUS_OK), 0);
    cr_assert_eq(sertrace_core_finish(c), 0);
    sertrace_core_destroy(c);
    return &s;
}

Test(labels, decoded_onto_nodes_and_paths)
{
    static enc e;
    enc_reset(&e);
    session_stream(&e);
    seen *s = run(e.buf, e.n, false);
    cr_assert_eq(s->n, 7);
    cr_assert_str_eq(path_of(s, 100), "Session");
    cr_assert_str_eq(path_of(s, 90), "Session"); /* the state: no segment */
    cr_assert_str_eq(path_of(s, 50), "Session.cache");
    cr_assert_str_eq(path_of(s, 20), "Session.cache['k']");
    cr_assert_str_eq(path_of(s, 5), "Session.cache['k'][1]");
    cr_assert_str_eq(path_of(s, 30), "Session.users");
    cr_assert_str_eq(path_of(s, 10), "Session.users[0]");
    /* the root has no label */
    cr_assert_eq(s->kind[s->n - 1], SERTRACE_LABEL_NONE);
}

Test(labels, a_label_is_for_the_next_enter_only)
{
    static enc e;
    enc_reset(&e);
    enc_type(&e, 1, "list");
    enc_enter(&e, SERTRACE_TAG_LIST, 1, 1, 1, 3, 0);
    enc_label(&e, SERTRACE_LABEL_POS, 7);
    enc_exit(&e, 1, 10); /* an EXIT first: the label is dropped */
    static enc e2;
    enc_reset(&e2);
    enc_type(&e2, 1, "list");
    enc_enter(&e2, SERTRACE_TAG_LIST, 1, 1, 1, 3, 0);
    enc_enter(&e2, SERTRACE_TAG_LIST, 2, 1, 2, 1, 2);
    enc_exit(&e2, 2, 4);
    enc_exit(&e2, 1, 10);
    /* the label of the first stream, then the second stream's nodes */
    static enc all;
    enc_reset(&all);
    memcpy(all.buf, e.buf, e.n);
    all.n = e.n;
    memcpy(all.buf + all.n, e2.buf, e2.n);
    all.n += e2.n;
    seen *s = run(all.buf, all.n, false);
    for (int i = 0; i < s->n; i++)
        cr_assert_eq(s->kind[i], SERTRACE_LABEL_NONE, "node %d got a dropped label", i);
}

/* A list's label (position 7) in batch 0, the labelled node's ENTER in the
 * next batch, numbered `second_seq` (1: in step; 2: batch 1 was lost). */
static void label_then_node_in_two_batches(seen *s, uint64_t second_seq)
{
    sertrace_core_visitor v = {0};
    memset(s, 0, sizeof *s);
    v.ctx = s;
    v.node_exit = s_exit;
    sertrace_core *c = sertrace_core_create(&v);
    static enc a, b;
    enc_reset(&a);
    enc_type(&a, 1, "list");
    enc_enter(&a, SERTRACE_TAG_LIST, 1, 1, 1, 3, 0);
    enc_label(&a, SERTRACE_LABEL_POS, 7);
    enc_reset(&b);
    enc_enter(&b, SERTRACE_TAG_LIST, 2, 1, 2, 1, 5);
    enc_exit(&b, 2, 6);
    enc_exit(&b, 1, 10);
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    cr_assert_eq(sertrace_core_records(c, 1, 1, 0, 1, 0, a.buf, a.n), 0);
    cr_assert_eq(sertrace_core_records(c, 1, 1, 0, 1, second_seq, b.buf, b.n), 0);
    cr_assert_eq(sertrace_core_finish(c), 0);
    sertrace_core_destroy(c);
}

Test(labels, a_lost_batch_drops_the_pending_label)
{
    static seen s;
    /* seq 1 is lost: the ENTER of seq 2 is not the labelled node */
    label_then_node_in_two_batches(&s, 2);
    cr_assert_gt(s.n, 0);
    for (int i = 0; i < s.n; i++)
        cr_assert_eq(s.kind[i], SERTRACE_LABEL_NONE);
}

Test(labels, a_label_and_its_node_in_two_batches)
{
    static seen s;
    label_then_node_in_two_batches(&s, 1);
    cr_assert_str_eq(path_of(&s, 1), "list[7]");
}

Test(labels, a_trace_without_labels_has_no_paths_below_the_root)
{
    static enc e;
    enc_reset(&e);
    enc_type(&e, 1, "dict");
    enc_enter(&e, SERTRACE_TAG_DICT, 1, 1, 1, 2, 0);
    enc_enter(&e, SERTRACE_TAG_DICT, 2, 1, 2, 1, 2);
    enc_exit(&e, 2, 4);
    enc_exit(&e, 1, 10);
    seen *s = run(e.buf, e.n, false);
    cr_assert_str_eq(path_of(s, 2), "dict/?");
}

/* ---- patterns ----------------------------------------------------------- */

static const char *patterns_json(sertrace_pathstats *ps, uint64_t payload)
{
    static sertrace_buf b = SERTRACE_BUF_INIT;
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_pathstats_write(ps, &b, true, 0, payload, false, 0), 0);
    return b.data;
}

Test(labels, patterns_count_each_byte_once)
{
    static enc e;
    enc_reset(&e);
    session_stream(&e);
    seen *s = run(e.buf, e.n, true);
    cr_assert_eq(sertrace_pathstats_count(s->ps), 6);
    const char *j = patterns_json(s->ps, 103);
    /* Session: the instance (100 B) and its state (no match of its own:
     * its self bytes only, 90 - 50 - 30 = 10, plus the instance's 10) */
    cr_assert(strstr(j, "{\"pattern\": \"Session\", \"count\": 1, \"bytes\": 100, "
                        "\"self_bytes\": 20, \"share\": 0.970874, \"exact\": true}") != NULL,
              "%s", j);
    cr_assert(strstr(j, "{\"pattern\": \"Session.cache\", \"count\": 1, \"bytes\": 50, "
                        "\"self_bytes\": 30,") != NULL,
              "%s", j);
    cr_assert(strstr(j, "{\"pattern\": \"Session.cache[*]\", \"count\": 1, \"bytes\": 20, "
                        "\"self_bytes\": 15,") != NULL,
              "%s", j);
    cr_assert(strstr(j, "{\"pattern\": \"Session.users[*]\", \"count\": 1, \"bytes\": 10,") != NULL,
              "%s", j);
    /* largest first */
    cr_assert_eq(strncmp(j, "[{\"pattern\": \"Session\",", 23), 0, "%s", j);

    /* merged twice: counts and bytes double, the list is the same */
    sertrace_pathstats *total = sertrace_pathstats_create();
    cr_assert_eq(sertrace_pathstats_merge(total, s->ps), 0);
    cr_assert_eq(sertrace_pathstats_merge(total, s->ps), 0);
    const char *t = patterns_json(total, 206);
    cr_assert(strstr(t, "{\"pattern\": \"Session\", \"count\": 2, \"bytes\": 200, "
                        "\"self_bytes\": 40, \"share\": 0.970874,") != NULL,
              "%s", t);
    /* --top 2 */
    static sertrace_buf b2 = SERTRACE_BUF_INIT;
    cr_assert_eq(sertrace_pathstats_write(total, &b2, true, 2, 206, false, 0), 0);
    cr_assert_eq(strstr(strstr(b2.data, "Session.cache") + 1, "\"pattern\""), NULL, "%s", b2.data);
    sertrace_buf_free(&b2);
    sertrace_pathstats_destroy(total);
    sertrace_pathstats_reset(s->ps);
    cr_assert_eq(sertrace_pathstats_count(s->ps), 0);
    sertrace_pathstats_destroy(s->ps);
}
