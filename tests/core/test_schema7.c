/* test_schema7.c -- Criterion tests of the short atom record of schema v7
 * (schema.h, "Short atoms") in the tree core: a SATOM (an ATOM in
 * fixed-width fields, its depth as its low 8 bits) gives exactly the node
 * of the v6 NODE atom with the same fields, so the same tree written both
 * ways must come out the same, field by field -- with and without a
 * length and a label, addresses going down, depths beyond 255 (depth8
 * wraps), a batch lost in between (the depth is the closest one to the
 * open nodes), a SATOM and NODEs mixed in one batch.  A truncated SATOM
 * is malformed.  The v6 half of each comparison is a v6 trace read by
 * the same core: old traces still read.  Records are written by enc.h,
 * independently of the runtime's encoder. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "got.h"

/* An atom as a v7 SATOM, or (`v7` false) as the v6 NODE it stands for. */
static void atom(enc *e, enc_bases *b, int v7, uint8_t kind, uint64_t label, uint8_t tag,
                 uint64_t depth, uint64_t type, uint64_t addr, uint64_t length, uint64_t pos,
                 uint64_t bytes)
{
    if (v7)
        enc_satom(e, b, kind, label, tag, depth, type, addr, length, pos, bytes);
    else
        enc_node(e, b, 1, kind, label, tag, depth, type, addr, length, pos, bytes);
}

/* A list of str, int, float, None and memo atoms, labelled and not,
 * addresses up and down, then a NODE atom (300 bytes: no SATOM) and
 * SATOMs after it. */
static void builtins(enc *e, int v7)
{
    enc_bases b = {0, 0};
    enc_type(e, 1, "list");
    enc_type(e, 2, "str");
    enc_type(e, 3, "int");
    enc_node(e, &b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 1, 0x7f1234560000ull, 9, 2, 0);
    uint64_t pos = 4;
    static const struct {
        uint8_t tag, kind;
        uint64_t label, type, addr, length, bytes;
    } a[] = {
        {SERTRACE_TAG_STR, SERTRACE_LABEL_POS, 0, 2, 0x7f1234561000ull, 6, 7},
        {SERTRACE_TAG_INT, SERTRACE_LABEL_POS, 1, 3, 0x7f1234500000ull, 0, 2},
        {SERTRACE_TAG_INT, SERTRACE_LABEL_POS, 200, 3, 0x7f1234500020ull, 0, 5},
        {SERTRACE_TAG_FLOAT, 0, 0, 0, 0x7f1234400000ull, 0, 9},
        {SERTRACE_TAG_ATOM, SERTRACE_LABEL_KEY, 4, 0, 0x7f1234000000ull, 0, 1},
        {SERTRACE_TAG_MEMO, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT, 2, 0x7f1234561000ull, 6, 2},
        {SERTRACE_TAG_STR, SERTRACE_LABEL_POS, 6, 2, 0x7f1234562000ull, 300, 255},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        atom(e, &b, v7, a[i].kind, a[i].label, a[i].tag, 2, a[i].type, a[i].addr, a[i].length, pos,
             a[i].bytes);
        pos += a[i].bytes + (i % 3); /* dpos 0, 1, 2 */
    }
    /* 300 bytes: a NODE in both */
    enc_node(e, &b, 1, SERTRACE_LABEL_POS, 7, SERTRACE_TAG_STR, 2, 2, 0x7f1234563000ull, 301, pos,
             300);
    pos += 300;
    atom(e, &b, v7, SERTRACE_LABEL_POS, 8, SERTRACE_TAG_INT, 2, 3, 0x7f1234500040ull, 0, pos, 2);
    enc_exit_d(e, &b, 1, pos + 3);
}

TestSuite(schema7);

Test(schema7, short_atoms_give_the_nodes_of_v6_node_atoms)
{
    static enc v6, v7;
    static got g6, g7;
    read_both_layouts(&g6, &g7, &v6, &v7, builtins, 2000);
    cr_expect_neq(v6.n, v7.n, "a different layout");
    cr_assert_eq(g6.n, 10);
    cr_expect(g6.complete);
    cr_expect_eq(g6.end.malformed, 0);
    cr_expect_eq(g7.v[0].length, 6);
    cr_expect_eq(g7.v[1].addr, 0x7f1234500000ull, "an address below the previous one");
    cr_expect_eq(g7.v[2].label, 200);
    cr_expect_eq(g7.v[3].label_kind, SERTRACE_LABEL_NONE);
    cr_expect_eq(g7.v[6].bytes, 255);
    cr_expect_eq(g7.v[7].bytes, 300);
}

/* Atoms below 255 open lists and deeper: depth8 wraps (0 at depth 256),
 * the depth comes back whole. */
Test(schema7, depths_beyond_255)
{
    static enc v6, v7;
    enc *e[] = {&v6, &v7};
    for (int v = 0; v < 2; v++) {
        enc_bases b = {0, 0};
        enc_reset(e[v]);
        uint64_t pos = 2;
        for (uint64_t depth = 1; depth <= 300; depth++) {
            enc_node(e[v], &b, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 + depth * 64, 3, pos,
                     0);
            pos += 1;
            if (depth >= 250)
                atom(e[v], &b, v, SERTRACE_LABEL_POS, 0, SERTRACE_TAG_INT, depth + 1, 0,
                     0x900000 + depth * 32, 0, pos, 2);
            pos += 2;
        }
        for (uint64_t depth = 300; depth >= 1; depth--) {
            if (depth == 260 || depth == 256)
                atom(e[v], &b, v, SERTRACE_LABEL_POS, 1, SERTRACE_TAG_INT, depth + 1, 0, 0x10, 0,
                     pos, 2);
            pos += 2;
            enc_exit_d(e[v], &b, depth, pos);
            pos += 1;
        }
    }
    enc *b6[] = {&v6}, *b7[] = {&v7};
    static got g6, g7;
    read_dump(&g6, b6, NULL, 1, 100000, 1);
    read_dump(&g7, b7, NULL, 1, 100000, 1);
    expect_same_nodes(&g7, &g6);
    cr_expect(g7.complete);
    cr_expect_eq(g7.end.malformed, 0);
    cr_expect_eq(g7.end.max_depth, 301);
    size_t deep = 0;
    for (size_t i = 0; i < g7.n; i++)
        if (g7.v[i].tag == SERTRACE_TAG_INT && g7.v[i].depth >= 256)
            deep++;
    cr_expect_eq(deep, 46 + 2, "the atoms at depths 256-301");
}

/* A lost batch: the reader has fewer nodes open than the writer; a SATOM
 * of the next batch still lands at its depth (the one with its low bits
 * closest to the open nodes + 1), as the v6 NODE with the whole depth. */
Test(schema7, depth_after_a_lost_batch)
{
    static enc a[2], lost[2], c[2];
    for (int v = 0; v < 2; v++) {
        enc_bases ba = {0, 0}, bl = {0, 0}, bc = {0, 0};
        enc_reset(&a[v]);
        enc_reset(&lost[v]);
        enc_reset(&c[v]);
        for (uint64_t depth = 1; depth <= 3; depth++)
            enc_node(&a[v], &ba, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 * depth, 2, depth, 0);
        for (uint64_t depth = 4; depth <= 40; depth++) /* lost: 37 more levels */
            enc_node(&lost[v], &bl, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 * depth, 2, depth,
                     0);
        atom(&c[v], &bc, v, SERTRACE_LABEL_POS, 0, SERTRACE_TAG_INT, 41, 0, 0x7f000000, 0, 100, 2);
        atom(&c[v], &bc, v, SERTRACE_LABEL_POS, 1, SERTRACE_TAG_INT, 41, 0, 0x7f000020, 0, 102, 2);
        for (uint64_t depth = 40; depth >= 1; depth--)
            enc_exit_d(&c[v], &bc, depth, 200 - depth);
    }
    static const uint32_t seq[] = {0, 2};
    enc *b6[] = {&a[0], &c[0]}, *b7[] = {&a[1], &c[1]};
    static got g6, g7;
    read_dump(&g6, b6, seq, 2, 300, 3);
    read_dump(&g7, b7, seq, 2, 300, 3);
    expect_same_nodes(&g7, &g6);
    cr_expect_not(g7.complete, "a lost batch");
    cr_expect_eq(g7.v[0].depth, 41, "the atom at its depth, below invented ancestors");
    cr_expect_eq(g7.v[0].enter_pos, 100);
    cr_expect_eq(g7.v[1].depth, 41);
}

/* A SATOM cut short (its fixed fields, or its length) ends the batch as
 * malformed, as any truncated record. */
Test(schema7, truncated_satom_is_malformed)
{
    for (int cut = 1; cut <= 2; cut++) {
        static enc e;
        enc_bases b = {0, 0};
        enc_reset(&e);
        enc_node(&e, &b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x10, 3, 2, 0);
        enc_satom(&e, &b, 0, 0, SERTRACE_TAG_STR, 2, 0, 0x20, 200, 3, 2);
        e.n -= cut == 1 ? 5 : 1; /* into the fixed fields; the length varint 200 (2 bytes) */
        enc *all[] = {&e};
        static got g;
        read_dump(&g, all, NULL, 1, 11, 1);
        cr_expect_gt(g.end.malformed, 0, "cut %d", cut);
        cr_expect_not(g.complete, "cut %d", cut);
    }
}
