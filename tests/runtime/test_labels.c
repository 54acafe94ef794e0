/* tests/runtime/test_labels.c -- edge labels in the runtime (schema v5,
 * v6): sertrace_name() interns a label text once per dump in the TYPE
 * index space (a NAME record), sertrace_name_known() finds it again,
 * sertrace_label() labels the next node, whose own record carries the
 * label (v6 NODE: one record per labelled node; a dropped label writes
 * nothing), sertrace_enter_labelled() / sertrace_atom_labelled() do both
 * in one call, and the live text tree prints the label after the enter
 * line's repr, with ".name" for a key under an instance's state. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "runtime-internal.h"
#include "sertrace/sertrace.h"

static int type_key, name_key_cache, name_key_k;

/* instance > (state) dict > .cache dict > ['k e y'] list > [3] list */
static void labelled_dump(void)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    uint32_t t = sertrace_type(d, &type_key, "dict");
    cr_assert_eq(sertrace_name_known(d, &name_key_cache), 0);
    uint32_t cache = sertrace_name(d, &name_key_cache, "cache", 5);
    cr_assert_eq(cache, t + 1, "one index space for types and names");
    cr_assert_eq(sertrace_name_known(d, &name_key_cache), cache);
    cr_assert_eq(sertrace_name(d, &name_key_cache, "other", 5), cache, "interned once");
    uint32_t k = sertrace_name(d, &name_key_k, "k e y", 5);
    sertrace_enter(d, SERTRACE_TAG_INSTANCE, t, 0x10, 0, 0);
    sertrace_label(d, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
    sertrace_enter(d, SERTRACE_TAG_DICT, t, 0x20, 2, 1);
    sertrace_label(d, SERTRACE_LABEL_KEY, cache);
    sertrace_enter(d, SERTRACE_TAG_DICT, t, 0x30, 2, 2);
    sertrace_label(d, SERTRACE_LABEL_KEY, k);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x40, 2, 3);
    sertrace_label(d, SERTRACE_LABEL_POS, 3);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x50, 1, 4);
    sertrace_exit(d, 5);
    sertrace_label(d, SERTRACE_LABEL_POS, 9); /* no enter follows: dropped */
    sertrace_exit(d, 6);
    sertrace_exit(d, 7);
    sertrace_exit(d, 8);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x60, 1, 8); /* no label */
    sertrace_exit(d, 9);
    sertrace_exit(d, 10);
    sertrace_dump_end(d, 10, SERTRACE_STATUS_OK);
}

Test(runtime, name_and_label_records)
{
    labelled_dump();
    struct recs r = decode_dump(only_dump());
    size_t names = 0, labels = 0;
    for (size_t i = 0; i < r.n; i++) {
        const struct rec *x = &r.v[i];
        if (x->op == SERTRACE_REC_NAME) {
            names++;
            cr_expect(x->type == 2 || x->type == 3);
        }
        if (x->op == SERTRACE_REC_LABEL) {
            labels++;
            /* each label is in its ENTER's own record (v6 NODE) */
            cr_expect(x->folded, "label %zu folded into its node's record", i);
            cr_expect_eq(r.v[i + 1].op, SERTRACE_REC_ENTER);
            cr_expect_eq(r.v[i + 1].wire, x->wire, "one record");
            cr_expect_neq(x->length, 9, "the dropped label is not recorded");
        }
    }
    cr_expect_eq(names, 2, "a NAME record per text, once per dump");
    cr_expect_eq(labels, 4);
    /* the first LABEL: ROLE STATE, before the depth-2 ENTER */
    for (size_t i = 0; i < r.n; i++)
        if (r.v[i].op == SERTRACE_REC_LABEL) {
            cr_expect_eq(r.v[i].tag, SERTRACE_LABEL_ROLE);
            cr_expect_eq(r.v[i].length, SERTRACE_ROLE_STATE);
            cr_expect_eq(r.v[i + 1].depth, 2);
            break;
        }
}

Test(runtime, labels_in_the_live_tree)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    labelled_dump();
    char *out = read_fd_all(fd);
    cr_expect(strstr(out, "\xe2\x94\x9c\xe2\x94\xac D2: <dict object at 0x20> len=1  (state)\n"),
              "%s", out);
    cr_expect(strstr(out, "len=1  .cache\n"), "%s", out);
    cr_expect(strstr(out, "len=1  ['k e y']\n"), "%s", out);
    cr_expect(strstr(out, "len=0  [3]\n"), "%s", out);
    cr_expect(strstr(out, "<dict object at 0x60> len=0\n"), "a node without label: %s", out);
    cr_expect(strstr(out, "[9]") == NULL, "the dropped label shows nowhere: %s", out);
    close(fd);
    unlink(path);
}

/* The same labelled nodes through the one-call API: the same records. */
Test(runtime, labelled_enter_and_atom_are_one_call_one_record)
{
    static int key;
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    uint32_t t = sertrace_type(d, &key, "list");
    sertrace_enter_labelled(d, SERTRACE_TAG_LIST, t, 0x1000, 3, 2, SERTRACE_LABEL_NONE, 0);
    sertrace_enter_labelled(d, SERTRACE_TAG_LIST, t, 0x2000, 2, 3, SERTRACE_LABEL_POS, 0);
    sertrace_atom_labelled(d, SERTRACE_TAG_INT, t, 0x1800, 0, 4, 6, SERTRACE_LABEL_POS, 0);
    sertrace_exit(d, 7);
    sertrace_label(d, SERTRACE_LABEL_POS, 1); /* pending, taken by the atom */
    sertrace_atom_labelled(d, SERTRACE_TAG_INT, t, 0x1800, 0, 7, 9, SERTRACE_LABEL_NONE, 0);
    sertrace_exit(d, 10);
    sertrace_dump_end(d, 11, SERTRACE_STATUS_OK);

    struct recs r = decode_dump(only_dump());
    static const struct {
        uint8_t op, tag;
        uint64_t depth, addr, pos, bytes, label;
    } want[] = {
        {SERTRACE_REC_TYPE, 0, 0, 0, 0, 0, 0},
        {SERTRACE_REC_ENTER, SERTRACE_TAG_LIST, 1, 0x1000, 2, 0, 0},
        {SERTRACE_REC_LABEL, SERTRACE_LABEL_POS, 0, 0, 0, 0, 0},
        {SERTRACE_REC_ENTER, SERTRACE_TAG_LIST, 2, 0x2000, 3, 0, 0},
        {SERTRACE_REC_LABEL, SERTRACE_LABEL_POS, 0, 0, 0, 0, 0},
        {SERTRACE_REC_ATOM, SERTRACE_TAG_INT, 3, 0x1800, 4, 2, 0},
        {SERTRACE_REC_EXIT, 0, 2, 0, 7, 0, 0},
        {SERTRACE_REC_LABEL, SERTRACE_LABEL_POS, 0, 0, 0, 0, 1},
        {SERTRACE_REC_ATOM, SERTRACE_TAG_INT, 2, 0x1800, 7, 2, 0},
        {SERTRACE_REC_EXIT, 0, 1, 0, 10, 0, 0},
    };
    cr_assert_eq(r.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < r.n; i++) {
        cr_expect_eq(r.v[i].op, want[i].op, "record %zu", i);
        if (want[i].op == SERTRACE_REC_LABEL) {
            cr_expect(r.v[i].folded, "record %zu: in its node's record", i);
            cr_expect_eq(r.v[i].wire, r.v[i + 1].wire, "record %zu", i);
            cr_expect_eq(r.v[i].tag, want[i].tag, "record %zu: kind", i);
            cr_expect_eq(r.v[i].length, want[i].label, "record %zu: value", i);
        } else if (want[i].op != SERTRACE_REC_TYPE) {
            cr_expect_eq(r.v[i].depth, want[i].depth, "record %zu", i);
            cr_expect_eq(r.v[i].pos, want[i].pos, "record %zu", i);
            cr_expect_eq(r.v[i].bytes, want[i].bytes, "record %zu", i);
            if (want[i].op != SERTRACE_REC_EXIT) {
                cr_expect_eq(r.v[i].tag, want[i].tag, "record %zu", i);
                cr_expect_eq(r.v[i].addr, want[i].addr, "record %zu", i);
            }
        }
    }
    /* on the wire: TYPE, then one record per node and per exit */
    size_t wire = 0;
    for (size_t i = 0; i < r.n; i++)
        wire += !r.v[i].folded;
    cr_expect_eq(wire, 7);
}

/* A label kind beyond the NODE opcode's three bits still reaches the
 * reader: as a v5 LABEL record before an unlabelled node record. */
Test(runtime, a_label_kind_beyond_the_opcode_is_a_label_record)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    sertrace_enter_labelled(d, SERTRACE_TAG_LIST, 0, 0x1000, 2, 2, 9, 77);
    sertrace_exit(d, 3);
    sertrace_dump_end(d, 4, SERTRACE_STATUS_OK);
    struct recs r = decode_dump(only_dump());
    cr_assert_eq(r.n, 3);
    cr_expect_eq(r.v[0].op, SERTRACE_REC_LABEL);
    cr_expect_eq(r.v[0].wire, SERTRACE_REC_LABEL);
    cr_expect_not(r.v[0].folded);
    cr_expect_eq(r.v[0].tag, 9);
    cr_expect_eq(r.v[0].length, 77);
    cr_expect_eq(r.v[1].op, SERTRACE_REC_ENTER);
    cr_expect_eq(r.v[1].wire, SERTRACE_REC_NODE, "no label of its own");
    cr_expect_eq(r.v[2].op, SERTRACE_REC_EXIT);
}
