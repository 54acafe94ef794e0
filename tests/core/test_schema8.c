/* test_schema8.c -- Criterion tests of the tiny atom record of schema v8
 * (schema.h, "Tiny atoms") in the tree core: a TATOM (an ATOM with no
 * depth, its address a 2- or 4-byte difference from one of two bases)
 * gives exactly the node of the v6 NODE atom with the same fields, so the
 * same tree written both ways must come out the same, field by field --
 * with and without a length and a label, addresses near the previous node
 * and far from it (a small int in static data between heap objects),
 * NODEs in between (they move base.addr, never base.far).  A batch that
 * opens with DEPTH after a lost batch puts its TATOMs at the writer's
 * depth; a truncated TATOM or DEPTH is malformed.  The v6 half of each
 * comparison is a v6 trace read by the same core.  Records are written
 * here, independently of the runtime's encoder (sertrace.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "got.h"

/* The v8 writer's bases: enc.h's two and base.far. */
typedef struct bases8 {
    enc_bases b;
    uint64_t far;
} bases8;

static int fits(uint64_t d, int bits)
{
    int64_t v = (int64_t)d;
    return v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1));
}

/* A TATOM, from schema.h's text: base.addr in 2 bytes, base.far in 2,
 * base.addr in 4, base.far in 4; the test makes sure one fits. */
static void enc_tatom(enc *e, bases8 *b, uint8_t kind, uint64_t label, uint8_t tag, uint64_t type,
                      uint64_t addr, uint64_t length, uint64_t pos, uint64_t bytes)
{
    uint64_t near = addr - b->b.addr, far = addr - b->far, d;
    unsigned mode;
    if (fits(near, 16))
        mode = 0, d = near;
    else if (fits(far, 16))
        mode = 0x10, d = far;
    else if (fits(near, 32))
        mode = 0x20, d = near;
    else if (fits(far, 32))
        mode = 0x30, d = far;
    else
        abort(); /* a test that writes a TATOM its address does not fit */
    if (!(type < 256 && pos - b->b.pos < 256 && bytes < 256))
        abort();
    enc_u8(e, (uint8_t)(0x40 | mode | kind << 1 | (length != 0)));
    enc_u8(e, tag);
    enc_u8(e, (uint8_t)type);
    enc_u8(e, (uint8_t)(pos - b->b.pos));
    enc_u8(e, (uint8_t)bytes);
    for (int i = 0; i < ((mode & 0x20) ? 4 : 2); i++)
        enc_u8(e, (uint8_t)(d >> (8 * i)));
    if (length != 0)
        enc_varint(e, length);
    if (kind)
        enc_varint(e, label);
    if (mode & 0x10)
        b->far = addr;
    else
        b->b.addr = addr;
    b->b.pos = pos + bytes;
}

/* An atom as a v8 TATOM, or (`v8` false) as the v6 NODE it stands for. */
static void atom(enc *e, bases8 *b, int v8, uint8_t kind, uint64_t label, uint8_t tag,
                 uint64_t depth, uint64_t type, uint64_t addr, uint64_t length, uint64_t pos,
                 uint64_t bytes)
{
    if (v8)
        enc_tatom(e, b, kind, label, tag, type, addr, length, pos, bytes);
    else
        enc_node(e, &b->b, 1, kind, label, tag, depth, type, addr, length, pos, bytes);
}

/* A list of heap strs, static small ints and None (far from the heap),
 * floats, a memo reference; a nested list (a NODE moves base.addr);
 * a NODE atom (300 bytes: no TATOM) among them. */
static void builtins(enc *e, int v8)
{
    bases8 b = {{0, 0}, 0};
    enc_type(e, 1, "list");
    enc_type(e, 2, "str");
    enc_type(e, 3, "int");
    enc_node(e, &b.b, 0, 0, 0, SERTRACE_TAG_LIST, 1, 1, 0x7f1234560000ull, 12, 2, 0);
    uint64_t pos = 4;
    static const struct {
        uint8_t tag, kind;
        uint64_t label, type, addr, length, bytes;
    } a[] = {
        {SERTRACE_TAG_STR, SERTRACE_LABEL_POS, 0, 2, 0x7f1234561000ull, 6, 7},  /* near */
        {SERTRACE_TAG_INT, SERTRACE_LABEL_POS, 1, 3, 0x0000900100ull, 0, 2},    /* far, 4 B */
        {SERTRACE_TAG_STR, SERTRACE_LABEL_POS, 2, 2, 0x7f1234561040ull, 3, 5},  /* near */
        {SERTRACE_TAG_INT, SERTRACE_LABEL_POS, 200, 3, 0x0000900120ull, 0, 2},  /* far, 2 B */
        {SERTRACE_TAG_FLOAT, 0, 0, 0, 0x7f1234400000ull, 0, 9},                 /* near, 4 B */
        {SERTRACE_TAG_ATOM, SERTRACE_LABEL_KEY, 4, 0, 0x000010900000ull, 0, 1}, /* far, 4 B */
        {SERTRACE_TAG_MEMO, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT, 2, 0x7f1234561000ull, 6, 2},
        {SERTRACE_TAG_STR, SERTRACE_LABEL_POS, 6, 2, 0x7f1234562000ull, 300, 255}, /* a length */
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        atom(e, &b, v8, a[i].kind, a[i].label, a[i].tag, 2, a[i].type, a[i].addr, a[i].length, pos,
             a[i].bytes);
        pos += a[i].bytes + (i % 3); /* dpos 0, 1, 2 */
    }
    /* 300 bytes: a NODE in both (base.addr moves, base.far stays) */
    enc_node(e, &b.b, 1, SERTRACE_LABEL_POS, 8, SERTRACE_TAG_STR, 2, 2, 0x7f1234563000ull, 301, pos,
             300);
    pos += 300;
    atom(e, &b, v8, SERTRACE_LABEL_POS, 9, SERTRACE_TAG_INT, 2, 3, 0x0000900140ull, 0, pos, 2);
    pos += 2;
    enc_node(e, &b.b, 0, SERTRACE_LABEL_POS, 10, SERTRACE_TAG_LIST, 2, 1, 0x7f1234564000ull, 2, pos,
             0);
    pos += 2;
    atom(e, &b, v8, SERTRACE_LABEL_POS, 0, SERTRACE_TAG_INT, 3, 3, 0x0000900160ull, 0, pos, 2);
    pos += 2;
    enc_exit_d(e, &b.b, 2, pos + 1);
    atom(e, &b, v8, SERTRACE_LABEL_POS, 11, SERTRACE_TAG_STR, 2, 2, 0x7f1234564100ull, 2, pos + 1,
         3);
    enc_exit_d(e, &b.b, 1, pos + 5);
}

TestSuite(schema8);

Test(schema8, tiny_atoms_give_the_nodes_of_v6_node_atoms)
{
    static enc v6, v8;
    static got g6, g8;
    read_both_layouts(&g6, &g8, &v6, &v8, builtins, 2000);
    cr_expect_lt(v8.n, v6.n, "fewer bytes");
    cr_assert_eq(g6.n, 14);
    cr_expect(g6.complete);
    cr_expect_eq(g6.end.malformed, 0);
    cr_expect_eq(g8.v[0].length, 6);
    cr_expect_eq(g8.v[1].addr, 0x0000900100ull, "an address far below the previous one");
    cr_expect_eq(g8.v[3].label, 200);
    cr_expect_eq(g8.v[4].label_kind, SERTRACE_LABEL_NONE);
    cr_expect_eq(g8.v[7].bytes, 255);
    cr_expect_eq(g8.v[8].bytes, 300);
}

/* A lost batch: the reader has fewer nodes open than the writer; the next
 * batch opens with DEPTH (the writer's open nodes), and its TATOMs land
 * at the writer's depth, below invented ancestors, as the v6 NODEs with
 * the whole depth. */
Test(schema8, depth_after_a_lost_batch)
{
    static enc a[2], lost[2], c[2];
    for (int v = 0; v < 2; v++) {
        enc_bases ba = {0, 0}, bl = {0, 0};
        bases8 bc = {{0, 0}, 0};
        enc_reset(&a[v]);
        enc_reset(&lost[v]);
        enc_reset(&c[v]);
        for (uint64_t depth = 1; depth <= 3; depth++)
            enc_node(&a[v], &ba, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 * depth, 2, depth, 0);
        for (uint64_t depth = 4; depth <= 40; depth++) /* lost: 37 more levels */
            enc_node(&lost[v], &bl, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 * depth, 2, depth,
                     0);
        if (v) { /* v8: DEPTH opens every batch but the first */
            enc_u8(&c[v], SERTRACE_REC_DEPTH);
            enc_varint(&c[v], 40);
        }
        atom(&c[v], &bc, v, SERTRACE_LABEL_POS, 0, SERTRACE_TAG_INT, 41, 0, 0x7f000000, 0, 100, 2);
        atom(&c[v], &bc, v, SERTRACE_LABEL_POS, 1, SERTRACE_TAG_INT, 41, 0, 0x7f000020, 0, 102, 2);
        for (uint64_t depth = 40; depth >= 1; depth--)
            enc_exit_d(&c[v], &bc.b, depth, 200 - depth);
    }
    static const uint32_t seq[] = {0, 2};
    enc *b6[] = {&a[0], &c[0]}, *b8[] = {&a[1], &c[1]};
    static got g6, g8;
    read_dump(&g6, b6, seq, 2, 300, 3);
    read_dump(&g8, b8, seq, 2, 300, 3);
    cr_expect_not(g8.complete, "a lost batch");
    cr_assert_gt(g8.n, 1);
    cr_expect_eq(g8.v[0].depth, 41, "the atom at its depth, below invented ancestors");
    cr_expect_eq(g8.v[0].enter_pos, 100);
    cr_expect_eq(g8.v[1].depth, 41);
    cr_expect_eq(g8.v[0].addr, g6.v[0].addr);
    cr_expect_eq(g8.v[1].addr, g6.v[1].addr);
    cr_expect_eq(g8.n, g6.n, "as many nodes");
}

/* A DEPTH below the reader's open nodes closes the deeper ones (their
 * EXITs were lost); without losses DEPTH changes nothing. */
Test(schema8, depth_closes_what_the_writer_closed)
{
    static enc a, c;
    enc_bases ba = {0, 0};
    bases8 bc = {{0, 0}, 0};
    enc_reset(&a);
    enc_reset(&c);
    for (uint64_t depth = 1; depth <= 5; depth++)
        enc_node(&a, &ba, 0, 0, 0, SERTRACE_TAG_LIST, depth, 0, 0x1000 * depth, 2, depth, 0);
    enc_u8(&c, SERTRACE_REC_DEPTH); /* the writer closed 3 levels in the lost batch */
    enc_varint(&c, 2);
    enc_tatom(&c, &bc, 0, 0, SERTRACE_TAG_INT, 0, 0x10, 0, 50, 2);
    enc_exit_d(&c, &bc.b, 2, 60);
    enc_exit_d(&c, &bc.b, 1, 61);
    static const uint32_t seq[] = {0, 2};
    enc *b[] = {&a, &c};
    static got g;
    read_dump(&g, b, seq, 2, 62, 3);
    cr_expect_not(g.complete);
    cr_expect_eq(g.end.malformed, 0);
    size_t ints = 0;
    for (size_t i = 0; i < g.n; i++)
        if (g.v[i].tag == SERTRACE_TAG_INT) {
            ints++;
            cr_expect_eq(g.v[i].depth, 3, "below the writer's open node");
        }
    cr_expect_eq(ints, 1);
}

/* A TATOM cut short (its fixed fields, its address, its length) or a
 * DEPTH cut short ends the batch as malformed, as any truncated record. */
Test(schema8, truncated_records_are_malformed)
{
    for (int cut = 1; cut <= 4; cut++) {
        static enc e;
        enc_bases b0 = {0, 0};
        bases8 b = {{0, 0}, 0};
        enc_reset(&e);
        enc_node(&e, &b0, 0, 0, 0, SERTRACE_TAG_LIST, 1, 0, 0x10, 3, 2, 0);
        b.b = b0;
        if (cut == 4) {
            enc_u8(&e, SERTRACE_REC_DEPTH);
            enc_u8(&e, 0x81); /* a varint that does not end */
        } else {
            enc_tatom(&e, &b, 0, 0, SERTRACE_TAG_STR, 0, 0x70000020ull, 200, 3, 2); /* wide */
            e.n -= cut == 1 ? 8 : cut == 2 ? 3 : 1; /* fixed fields; address; length varint */
        }
        enc *all[] = {&e};
        static got g;
        read_dump(&g, all, NULL, 1, 11, 1);
        cr_expect_gt(g.end.malformed, 0, "cut %d", cut);
        cr_expect_not(g.complete, "cut %d", cut);
    }
}
