/* test_schema6.c -- Criterion tests of the compact records of schema v6
 * (schema.h, "Compact records") in the tree core: a NODE record (an ENTER
 * or an ATOM with its label in the opcode, address and position as
 * deltas) and EXIT_D give exactly the nodes of the v5 records they stand
 * for (LABEL + ENTER / ATOM, EXIT), so the same tree written both ways
 * must come out the same, field by field; the deltas restart at every
 * batch (a lost batch breaks nothing after it); differences may be
 * negative or wrap around 64 bits; a pending v5 LABEL record labels an
 * unlabelled NODE and a NODE's own label wins; a truncated NODE is
 * malformed.  The v5 half of each comparison is a v5 trace read by the
 * same core: old traces still read.  Records are written by enc.h,
 * independently of the runtime's encoder. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "got.h"

/* Session (instance, root) > (state) dict > .cache dict > ['k'] list of
 * [0] int (atom), [1] memo reference (atom) ; .blob bytes (atom, 512 B
 * out of band).  `v6`: compact records; else the v5 records. */
static void session(enc *e, int v6)
{
    enc_bases b = {0, 0};
    enc_type(e, 1, "mod.Session");
    enc_type(e, 2, "dict");
    enc_type(e, 3, "list");
    enc_type(e, 4, "int");
    enc_u8(e, SERTRACE_REC_NAME);
    enc_varint(e, 5);
    enc_str(e, "cache", 5);
    enc_u8(e, SERTRACE_REC_NAME);
    enc_varint(e, 6);
    enc_str(e, "k", 1);
    enc_u8(e, SERTRACE_REC_NAME);
    enc_varint(e, 7);
    enc_str(e, "blob", 4);
    /* nodes: tag, depth, type, addr, length, pos, bytes; label kind/value */
    static const struct {
        int what; /* 0 enter, 1 atom, 2 exit */
        uint8_t tag, kind;
        uint64_t label, depth, type, addr, length, pos, bytes;
    } n[] = {
        {0, SERTRACE_TAG_INSTANCE, 0, 0, 1, 1, 0x7f1234560000ull, 0, 2, 0},
        {0, SERTRACE_TAG_DICT, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE, 2, 2, 0x7f1234561000ull, 3,
         30, 0},
        {0, SERTRACE_TAG_DICT, SERTRACE_LABEL_KEY, 5, 3, 2, 0x7f1234560f00ull, 2, 40, 0},
        {0, SERTRACE_TAG_LIST, SERTRACE_LABEL_KEY, 6, 4, 3, 0x7f1234562000ull, 3, 47, 0},
        {1, SERTRACE_TAG_INT, SERTRACE_LABEL_POS, 0, 5, 4, 0x55aa00001000ull, 0, 50, 2},
        {1, SERTRACE_TAG_MEMO, SERTRACE_LABEL_POS, 1, 5, 2, 0x7f1234561000ull, 0, 52, 2},
        {2, 0, 0, 0, 4, 0, 0, 0, 55, 0},
        {2, 0, 0, 0, 3, 0, 0, 0, 56, 0},
        {1, SERTRACE_TAG_PICKLEBUFFER, SERTRACE_LABEL_KEY, 7, 3, 0, 0x7f1234563000ull, 0, 60, 1},
        {2, 0, 0, 0, 2, 0, 0, 0, 70, 0},
        {2, 0, 0, 0, 1, 0, 0, 0, 80, 0},
    };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        if (n[i].what == 2) {
            if (v6)
                enc_exit_d(e, &b, n[i].depth, n[i].pos);
            else
                enc_exit(e, n[i].depth, n[i].pos);
            continue;
        }
        if (v6) {
            enc_node(e, &b, n[i].what, n[i].kind, n[i].label, n[i].tag, n[i].depth, n[i].type,
                     n[i].addr, n[i].length, n[i].pos, n[i].bytes);
        } else {
            if (n[i].kind) {
                enc_u8(e, SERTRACE_REC_LABEL);
                enc_u8(e, n[i].kind);
                enc_varint(e, n[i].label);
            }
            if (n[i].what == 1)
                enc_atom(e, n[i].tag, n[i].depth, n[i].type, n[i].addr, n[i].length, n[i].pos,
                         n[i].bytes);
            else
                enc_enter(e, n[i].tag, n[i].depth, n[i].type, n[i].addr, n[i].length, n[i].pos);
        }
        if (n[i].tag == SERTRACE_TAG_PICKLEBUFFER) { /* v5 OOB: the node open at depth 2 */
            enc_u8(e, SERTRACE_REC_OOB);
            enc_varint(e, 2);
            enc_varint(e, 512);
        }
    }
}

TestSuite(schema6);

Test(schema6, compact_records_give_the_nodes_of_the_v5_records)
{
    static enc v5, v6;
    static got g5, g6;
    read_both_layouts(&g5, &g6, &v5, &v6, session, 81);
    cr_expect_lt(v6.n, v5.n, "the compact records are shorter (%zu B against %zu B)", v6.n, v5.n);
    /* and the v5 trace reads as it always did: exact sizes and labels */
    cr_assert_eq(g5.n, 7);
    cr_expect(g5.complete);
    cr_expect_eq(g5.end.malformed, 0);
    cr_expect_eq(g5.end.labels, 6);
    cr_expect_eq(g5.v[0].tag, SERTRACE_TAG_INT);
    cr_expect_eq(g5.v[0].addr, 0x55aa00001000ull);
    cr_expect_eq(g5.v[0].label_kind, SERTRACE_LABEL_POS);
    cr_expect_eq(g5.v[1].label, 1);
    cr_expect_eq(g5.v[2].bytes, 55 - 47, "the list");
    cr_expect_eq(g5.v[2].label_kind, SERTRACE_LABEL_KEY);
    cr_expect_eq(g5.v[2].label, 6);
    cr_expect_eq(g5.v[4].tag, SERTRACE_TAG_PICKLEBUFFER);
    cr_expect_eq(g5.v[5].oob, 512, "the state dict holds the out-of-band bytes");
    cr_expect_eq(g5.v[6].bytes, 78);
    cr_expect_eq(g5.v[6].label_kind, SERTRACE_LABEL_NONE, "the root has no label");
}

/* The tree split over three batches, each decoded from bases 0; with the
 * middle batch lost the last one still gives exact positions. */
Test(schema6, deltas_restart_at_every_batch)
{
    static enc a, b, c;
    enc_bases ba = {0, 0}, bb = {0, 0}, bc = {0, 0};
    enc_reset(&a);
    enc_reset(&b);
    enc_reset(&c);
    enc_node(&a, &ba, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x7f0000001000ull, 4, 2, 0);
    enc_node(&a, &ba, 1, SERTRACE_LABEL_POS, 0, SERTRACE_TAG_INT, 2, 0, 0x7f0000002000ull, 0, 3, 2);
    enc_node(&b, &bb, 1, SERTRACE_LABEL_POS, 1, SERTRACE_TAG_INT, 2, 0, 0x7f0000003000ull, 0, 5, 2);
    enc_node(&c, &bc, 1, SERTRACE_LABEL_POS, 2, SERTRACE_TAG_STR, 2, 0, 0x7f0000004000ull, 4, 70000,
             300);
    enc_exit_d(&c, &bc, 1, 70301);
    cr_expect_eq(c.buf[4] & 0x80, 0x80, "the first address of a batch is absolute (long)");

    enc *all[] = {&a, &b, &c};
    static got g;
    read_dump(&g, all, NULL, 3, 70302, 3);
    cr_assert_eq(g.n, 4);
    cr_expect(g.complete);
    cr_expect_eq(g.v[1].enter_pos, 5);
    cr_expect_eq(g.v[1].addr, 0x7f0000003000ull);
    cr_expect_eq(g.v[2].enter_pos, 70000);
    cr_expect_eq(g.v[2].bytes, 300);
    cr_expect_eq(g.v[2].addr, 0x7f0000004000ull);
    cr_expect_eq(g.v[2].label, 2);
    cr_expect_eq(g.v[3].bytes, 70301 - 2);

    enc *lost[] = {&a, &c};
    static const uint32_t seq[] = {0, 2};
    read_dump(&g, lost, seq, 2, 70302, 3);
    cr_assert_eq(g.n, 3);
    cr_expect_not(g.complete, "a lost batch");
    cr_expect_eq(g.v[1].enter_pos, 70000, "positions after the loss are exact");
    cr_expect_eq(g.v[1].addr, 0x7f0000004000ull);
    cr_expect_eq(g.v[1].bytes, 300);
    cr_expect_eq(g.v[1].label, 2);
}

/* Addresses going down and differences wrapping around 64 bits. */
Test(schema6, negative_and_wrapping_differences)
{
    static const uint64_t addrs[] = {
        0x7fff00000000ull,    0x1000, 0, UINT64_MAX, 1, UINT64_MAX - 1, 0x8000000000000000ull,
        0x7fffffffffffffffull};
    static enc e;
    enc_bases b = {0, 0};
    enc_reset(&e);
    enc_node(&e, &b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x10, 9, 2, 0);
    for (size_t i = 0; i < 8; i++)
        enc_node(&e, &b, 1, SERTRACE_LABEL_POS, i, SERTRACE_TAG_INT, 2, 0, addrs[i], 0, 3 + 2 * i,
                 2);
    enc_exit_d(&e, &b, 1, 20);
    enc *all[] = {&e};
    static got g;
    read_dump(&g, all, NULL, 1, 21, 1);
    cr_assert_eq(g.n, 9);
    for (size_t i = 0; i < 8; i++) {
        cr_expect_eq(g.v[i].addr, addrs[i], "atom %zu", i);
        cr_expect_eq(g.v[i].enter_pos, 3 + 2 * i, "atom %zu", i);
        cr_expect_eq(g.v[i].label, i, "atom %zu", i);
    }
    cr_expect_eq(g.v[8].bytes, 18);
    cr_expect_eq(g.end.malformed, 0);
}

/* A v5 LABEL record labels the next node record, a NODE too; a NODE that
 * carries a label of its own replaces a pending one. */
Test(schema6, label_records_and_labelled_nodes)
{
    static enc e;
    enc_bases b = {0, 0};
    enc_reset(&e);
    enc_node(&e, &b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x10, 3, 2, 0);
    enc_u8(&e, SERTRACE_REC_LABEL);
    enc_u8(&e, 9); /* a kind the opcode cannot hold */
    enc_varint(&e, 77);
    enc_node(&e, &b, 1, 0, 0, SERTRACE_TAG_INT, 2, 0, 0x20, 0, 3, 2);
    enc_u8(&e, SERTRACE_REC_LABEL);
    enc_u8(&e, SERTRACE_LABEL_POS);
    enc_varint(&e, 5);
    enc_node(&e, &b, 1, SERTRACE_LABEL_POS, 1, SERTRACE_TAG_INT, 2, 0, 0x30, 0, 5, 2);
    enc_node(&e, &b, 1, 0, 0, SERTRACE_TAG_INT, 2, 0, 0x40, 0, 7, 2);
    enc_exit_d(&e, &b, 1, 10);
    enc *all[] = {&e};
    static got g;
    read_dump(&g, all, NULL, 1, 11, 1);
    cr_assert_eq(g.n, 4);
    cr_expect_eq(g.v[0].label_kind, 9, "the pending LABEL record");
    cr_expect_eq(g.v[0].label, 77);
    cr_expect_eq(g.v[1].label_kind, SERTRACE_LABEL_POS, "its own label");
    cr_expect_eq(g.v[1].label, 1, "its own label, not the pending 5");
    cr_expect_eq(g.v[2].label_kind, SERTRACE_LABEL_NONE, "no label");
}

/* A NODE cut short (its label value missing) ends the batch as
 * malformed, as any truncated record. */
Test(schema6, truncated_node_is_malformed)
{
    static enc e;
    enc_bases b = {0, 0};
    enc_reset(&e);
    enc_node(&e, &b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x10, 3, 2, 0);
    enc_node(&e, &b, 1, SERTRACE_LABEL_POS, 300, SERTRACE_TAG_INT, 2, 0, 0x20, 0, 3, 2);
    e.n -= 2; /* the two bytes of the label value 300 */
    enc *all[] = {&e};
    static got g;
    read_dump(&g, all, NULL, 1, 11, 1);
    cr_expect_gt(g.end.malformed, 0);
    cr_expect_not(g.complete);
}
