/* got.h -- what the schema tests (test_schema6.c, test_schema7.c) read
 * back from the tree core: every node as it closes, the dump's counters
 * at its close, the comparison of two such readings field by field, and
 * one tree encoded in an older and a newer record layout, read both ways. */
#ifndef TEST_GOT_H
#define TEST_GOT_H

#include <criterion/criterion.h>
#include <string.h>

#include "core.h"
#include "enc.h"

/* Nodes kept per dump. */
#define GOT_MAX 1024

typedef struct got_node {
    uint8_t tag, label_kind;
    uint16_t flags;
    uint32_t depth, type;
    uint64_t addr, length, enter_pos, bytes, self, label, oob;
} got_node;

typedef struct got {
    got_node v[GOT_MAX];
    size_t n;
    sertrace_dump_state end; /* counters at close */
    bool complete;
    int closed;
} got;

static inline int g_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    got *g = ctx;
    cr_assert_lt(g->n, GOT_MAX);
    g->v[g->n++] = (got_node){n->tag,    n->label_kind, n->flags, n->depth, n->type,  n->addr,
                              n->length, n->enter_pos,  n->bytes, n->self,  n->label, n->oob};
    return 0;
}

static inline int g_close(void *ctx, sertrace_dump_state *d)
{
    got *g = ctx;
    g->end = *d;
    g->end.stack = NULL;
    g->end.types = NULL;
    g->end.names = NULL;
    g->complete = sertrace_dump_complete(d);
    g->closed++;
    return 0;
}

/* Read the batches `b[0..nb)` (seq numbers `seq`, NULL: 0, 1, ...) as
 * dump 1 ending at `total` bytes, with `nbatches` announced by its end. */
static inline void read_dump(got *g, enc *const *b, const uint32_t *seq, size_t nb, uint64_t total,
                             uint32_t nbatches)
{
    memset(g, 0, sizeof *g);
    sertrace_core_visitor v = {.ctx = g, .node_exit = g_exit, .dump_close = g_close};
    sertrace_core *c = sertrace_core_create(&v);
    cr_assert_not_null(c);
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, 1, "pickle", 6, 5), 0);
    for (size_t i = 0; i < nb; i++)
        cr_assert_eq(
            sertrace_core_records(c, 1, 1, 0, 1, seq ? seq[i] : (uint32_t)i, b[i]->buf, b[i]->n),
            0);
    cr_assert_eq(sertrace_core_dump_end_batches(c, 1, 1, 1, 1, total, SERTRACE_STATUS_OK, nbatches),
                 0);
    cr_assert_eq(sertrace_core_finish(c), 0);
    sertrace_core_destroy(c);
    cr_assert_eq(g->closed, 1);
}

static inline void expect_same_nodes(const got *a, const got *b)
{
    cr_assert_eq(a->n, b->n, "%zu nodes against %zu", a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const got_node *x = &a->v[i], *y = &b->v[i];
        cr_expect_eq(x->tag, y->tag, "node %zu tag", i);
        cr_expect_eq(x->depth, y->depth, "node %zu depth", i);
        cr_expect_eq(x->type, y->type, "node %zu type", i);
        cr_expect_eq(x->addr, y->addr, "node %zu addr", i);
        cr_expect_eq(x->length, y->length, "node %zu length", i);
        cr_expect_eq(x->enter_pos, y->enter_pos, "node %zu pos", i);
        cr_expect_eq(x->bytes, y->bytes, "node %zu bytes", i);
        cr_expect_eq(x->self, y->self, "node %zu self", i);
        cr_expect_eq(x->flags, y->flags, "node %zu flags", i);
        cr_expect_eq(x->label_kind, y->label_kind, "node %zu label kind", i);
        cr_expect_eq(x->label, y->label, "node %zu label", i);
        cr_expect_eq(x->oob, y->oob, "node %zu oob", i);
    }
    cr_expect_eq(a->complete, b->complete);
    cr_expect_eq(a->end.labels, b->end.labels);
    cr_expect_eq(a->end.malformed, b->end.malformed);
}

/* Builds one tree into `e`: in the older record layout when `newer` is 0,
 * in the newer one otherwise (v5 / v6 records; v6 NODE atoms / v7 SATOM). */
typedef void (*got_builder)(enc *e, int newer);

/* Encode the tree of `build` in both layouts (into `older_e`, `newer_e`),
 * read each as dump 1 of `total` bytes in one batch, and expect the same
 * nodes from both. */
static inline void read_both_layouts(got *older, got *newer, enc *older_e, enc *newer_e,
                                     got_builder build, uint64_t total)
{
    /* The readings are written through these pointers (read_dump()).  GCC
     * 12.2 at -O2 (-fipa-reference-addressable) nevertheless judged the
     * callers' `static got` never written once this function was inlined,
     * put them in .rodata, and read_dump()'s memset faulted; the empty asm
     * says the pointers escape (-fno-ipa-reference-addressable also fixes
     * it; the same calls written out in the test did not trigger it). */
    __asm__ volatile("" : : "r"(older), "r"(newer) : "memory");
    enc_reset(older_e);
    enc_reset(newer_e);
    build(older_e, 0);
    build(newer_e, 1);
    enc *bo[] = {older_e}, *bn[] = {newer_e};
    read_dump(older, bo, NULL, 1, total, 1);
    read_dump(newer, bn, NULL, 1, total, 1);
    expect_same_nodes(newer, older);
}

#endif
