/* test_core.c -- Criterion tests of the tree core (analyzers/core/core.c)
 * on synthetic streams: regular trees, every irregular stream the issue
 * lists (unfinished dumps, orphan exits, lost batches, discarded events,
 * missing dump_begin, interleaved threads and processes, nested dumps),
 * malformed records (unknown opcodes, bad varints, truncation, absurd
 * values, random bytes), a 1,000,000-deep tree, and flat memory. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"

/* ---- a recording visitor ------------------------------------------------ */

typedef struct rnode {
    uint32_t depth, type;
    uint8_t tag;
    uint16_t flags;
    uint64_t bytes, self;
    uint64_t dump_id;
    int64_t pid;
} rnode;

typedef struct rdump {
    sertrace_dump_state st; /* copy at close (stack pointers not valid) */
    bool complete;
    uint32_t died_depth;
    char died_type[64];
} rdump;

typedef struct rec {
    rnode nodes[4096];
    size_t nnodes;
    rdump dumps[256];
    size_t ndumps;
    uint64_t exits, enters, opens;
    char notes[1024];
    char errors[1024];
    bool keep_nodes;
} rec;

static int r_open(void *ctx, sertrace_dump_state *d)
{
    (void)d;
    ((rec *)ctx)->opens++;
    return 0;
}

static int r_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    (void)n;
    ((rec *)ctx)->enters++;
    return 0;
}

static int r_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    rec *r = ctx;
    r->exits++;
    cr_assert_eq(n, &d->stack[d->depth - 1], "node_exit gets the stack top");
    cr_assert_eq(n->depth, d->depth);
    if ((n->flags & SERTRACE_NODE_UNFINISHED) && r->ndumps < 256 && d->user == NULL) {
        /* innermost unfinished: remember the chain's depth and name */
        d->user = (void *)1;
        rdump *rd = &r->dumps[r->ndumps];
        rd->died_depth = n->depth;
        size_t len;
        const char *name = sertrace_core_type_name(d, n->type, &len);
        if (name)
            snprintf(rd->died_type, sizeof rd->died_type, "%.*s", (int)len, name);
    }
    if (r->keep_nodes && r->nnodes < 4096)
        r->nodes[r->nnodes++] =
            (rnode){n->depth, n->type, n->tag, n->flags, n->bytes, n->self, d->dump_id, d->pid};
    return 0;
}

static int r_note(void *ctx, sertrace_dump_state *d, sertrace_node *n, const char *k, size_t kl,
                  const char *v, size_t vl)
{
    (void)d;
    rec *r = ctx;
    size_t l = strlen(r->notes);
    snprintf(r->notes + l, sizeof r->notes - l, "%u:%.*s=%.*s;", n ? n->depth : 0, (int)kl, k,
             (int)vl, v);
    return 0;
}

static int r_error(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                   const char *m, size_t ml, const char *p, size_t pl)
{
    (void)d;
    (void)tag;
    (void)type;
    rec *r = ctx;
    size_t l = strlen(r->errors);
    snprintf(r->errors + l, sizeof r->errors - l, "%u:%.*s@%.*s;", n ? n->depth : 0, (int)ml, m,
             (int)pl, p);
    return 0;
}

static int r_close(void *ctx, sertrace_dump_state *d)
{
    rec *r = ctx;
    cr_assert_eq(d->depth, 0, "stack empty at close");
    if (r->ndumps < 256) {
        rdump *rd = &r->dumps[r->ndumps++];
        rd->st = *d;
        rd->st.stack = NULL;
        rd->st.types = NULL;
        rd->st.names = NULL;
        rd->complete = sertrace_dump_complete(d);
    }
    d->user = NULL;
    return 0;
}

static rec *R;
static sertrace_core *C;
static enc E;

static void setup(void)
{
    R = calloc(1, sizeof *R);
    R->keep_nodes = true;
    sertrace_core_visitor v = {R, r_open, r_enter, r_exit, r_note, r_error, r_close, NULL, NULL};
    C = sertrace_core_create(&v);
    cr_assert_not_null(C);
    enc_reset(&E);
}

static void teardown(void)
{
    sertrace_core_destroy(C);
    free(R);
}

static const rnode *find_node(uint32_t depth, uint8_t tag)
{
    for (size_t i = 0; i < R->nnodes; i++)
        if (R->nodes[i].depth == depth && R->nodes[i].tag == tag)
            return &R->nodes[i];
    return NULL;
}

static void flush(int64_t pid, uint64_t id, uint32_t seq)
{
    cr_assert_eq(sertrace_core_records(C, pid, pid, 10, id, seq, E.buf, E.n), 0);
    enc_reset(&E);
}

/* A small regular dump: dict(root, 100 B) { list (40 B) { str 10 B },
 * instance (30 B) }, 2 header + 1 trailer bytes. */
static void regular_dump(int64_t pid, int64_t tid, uint64_t id)
{
    cr_assert_eq(sertrace_core_dump_begin(C, pid, tid, 1, id, "pickle", 6, 5), 0);
    enc_type(&E, 1, "dict");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 1, 0x1000, 3, 2);
    enc_type(&E, 2, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 2, 0x2000, 2, 10);
    enc_type(&E, 3, "str");
    enc_enter(&E, SERTRACE_TAG_STR, 3, 3, 0x3000, 5, 12);
    enc_exit(&E, 3, 22);
    enc_exit(&E, 2, 50);
    enc_type(&E, 4, "mod.Thing");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 4, 0x4000, 0, 60);
    enc_note(&E, 2, "frame", "ip=3");
    enc_exit(&E, 2, 90);
    enc_exit(&E, 1, 102);
    flush(pid, id, 0);
    cr_assert_eq(sertrace_core_dump_end(C, pid, tid, 2, id, 103, SERTRACE_STATUS_OK), 0);
}

TestSuite(core, .init = setup, .fini = teardown);

Test(core, regular_tree_exact_bytes_and_self)
{
    regular_dump(100, 101, 1);
    cr_assert_eq(R->ndumps, 1);
    rdump *d = &R->dumps[0];
    cr_assert(d->complete);
    cr_assert_eq(d->st.payload_bytes, 103);
    cr_assert_eq(d->st.pid, 100);
    cr_assert_eq(d->st.tid, 101);
    cr_assert_str_eq(d->st.serializer, "pickle");
    cr_assert_eq(d->st.protocol, 5);
    cr_assert_eq(d->st.nodes, 4);
    cr_assert_eq(d->st.max_depth, 3);
    const rnode *root = find_node(1, SERTRACE_TAG_DICT);
    cr_assert_not_null(root);
    cr_assert_eq(root->bytes, 100);
    cr_assert_eq(root->self, 100 - 40 - 30);
    const rnode *l = find_node(2, SERTRACE_TAG_LIST);
    cr_assert_eq(l->bytes, 40);
    cr_assert_eq(l->self, 30);
    cr_assert_eq(find_node(3, SERTRACE_TAG_STR)->bytes, 10);
    cr_assert_eq(find_node(2, SERTRACE_TAG_INSTANCE)->bytes, 30);
    for (size_t i = 0; i < R->nnodes; i++)
        cr_assert_eq(R->nodes[i].flags, 0, "no flag on a regular tree");
    cr_assert_str_eq(R->notes, "2:frame=ip=3;");
    /* post-order: exits come children first */
    cr_assert_eq(R->nodes[0].tag, SERTRACE_TAG_STR);
    cr_assert_eq(R->nodes[3].tag, SERTRACE_TAG_DICT);
}

Test(core, batches_split_across_seq)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 7, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 4, 2);
    flush(1, 7, 0);
    for (uint32_t i = 0; i < 3; i++) {
        enc_enter(&E, SERTRACE_TAG_INT, 2, 0, 10 + i, 0, 3 + 5 * i);
        enc_exit(&E, 2, 8 + 5 * i);
        flush(1, 7, i + 1);
    }
    enc_exit(&E, 1, 20);
    flush(1, 7, 4);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 7, 21, 0), 0);
    cr_assert(R->dumps[0].complete);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 18);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->self, 3);
    cr_assert_eq(R->dumps[0].st.records_events, 5);
}

Test(core, lost_batch_marks_incomplete_and_partial)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 0, 2, 0, 3);
    flush(1, 1, 0);
    /* seq 1 and 2 lost: they held children of the list */
    enc_exit(&E, 2, 50);
    enc_enter(&E, SERTRACE_TAG_TUPLE, 2, 0, 3, 0, 50);
    enc_exit(&E, 2, 60);
    enc_exit(&E, 1, 61);
    flush(1, 1, 3);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 62, 0), 0);
    rdump *d = &R->dumps[0];
    cr_assert_not(d->complete);
    cr_assert_eq(d->st.lost_batches, 2);
    const rnode *l = find_node(2, SERTRACE_TAG_LIST);
    cr_assert(l->flags & SERTRACE_NODE_PARTIAL, "list was open across the gap");
    cr_assert_eq(l->bytes, 47, "exit.pos - enter.pos");
    cr_assert(l->flags & SERTRACE_NODE_EXIT_UNSURE,
              "the exit after the gap may be a later sibling's: an upper bound");
    cr_assert_not(find_node(2, SERTRACE_TAG_TUPLE)->flags & SERTRACE_NODE_PARTIAL);
    const rnode *root = find_node(1, SERTRACE_TAG_DICT);
    cr_assert(root->flags & SERTRACE_NODE_PARTIAL);
    sertrace_node probe = {0};
    probe.flags = root->flags;
    cr_assert_not(sertrace_node_self_exact(&probe), "self never exact after a loss");
}

/* Schema v2 dump_end `batches`: a dump that emitted no records event and
 * traced no node (pickle.dumps(None) at the default granularity) is
 * complete; without `batches` (v1) it stays incomplete ("no node"), since a
 * dropped lone batch looks the same. */
Test(core, zero_records_dump_complete_only_when_dump_end_says_so)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end_batches(C, 1, 1, 0, 1, 4, 0, 0), 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 2, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 2, 4, 0), 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 3, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end_batches(C, 1, 1, 0, 3, 4, 0, 1), 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 4, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end_batches(C, 1, 1, 0, 4, 4, SERTRACE_STATUS_ERROR, 0), 0);
    cr_assert_eq(R->ndumps, 4);
    cr_assert(R->dumps[0].complete, "batches 0: complete dump of no node");
    cr_assert_eq(R->dumps[0].st.nodes, 0);
    cr_assert_eq(R->dumps[0].st.payload_bytes, 4);
    cr_assert_not(R->dumps[1].complete, "batches unknown (v1)");
    cr_assert_not(R->dumps[2].complete, "its one batch never arrived");
    cr_assert_eq(R->dumps[2].st.lost_batches, 1);
    cr_assert_not(R->dumps[3].complete, "status error");
}

/* A lost LAST batch has no seq gap: only dump_end's `batches` shows it. */
Test(core, lost_last_batch_counted_from_dump_end_batches)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_TUPLE, 2, 0, 2, 0, 3);
    enc_exit(&E, 2, 10);
    flush(1, 1, 0);
    /* seq 1 (the list's exit) lost */
    cr_assert_eq(sertrace_core_dump_end_batches(C, 1, 1, 0, 1, 21, 0, 2), 0);
    rdump *d = &R->dumps[0];
    cr_assert_not(d->complete);
    cr_assert_eq(d->st.lost_batches, 1);
    cr_assert_eq(find_node(2, SERTRACE_TAG_TUPLE)->bytes, 7, "closed before the loss: exact");
    cr_assert(find_node(1, SERTRACE_TAG_LIST)->flags & SERTRACE_NODE_PARTIAL);
}

static int bound_of(const rnode *n)
{
    sertrace_node probe = {0};
    probe.flags = n->flags;
    return sertrace_node_bound(&probe);
}

/* Root list [A, B, C]; the batch holding A's EXIT and B's ENTER (and B's
 * first children) is lost, so the first EXIT at depth 2 after the gap is
 * B's: A (3..36 really, 33 B) would be paired with it (3..2297). */
Test(core, exit_after_lost_batch_is_an_upper_bound)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 4, 2);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 2, 0, 2, 0, 3); /* A */
    flush(1, 1, 0);
    /* seq 1 lost: A exit @36, B enter @36, B's children up to @2000 */
    enc_enter(&E, SERTRACE_TAG_TUPLE, 3, 0, 3, 0, 2000); /* B's last child */
    enc_exit(&E, 3, 2290);
    enc_exit(&E, 2, 2297);                                  /* B's exit */
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 0, 4, 0, 2297); /* C */
    enc_exit(&E, 2, 2310);
    enc_exit(&E, 1, 2311);
    flush(1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 2312, 0), 0);
    rdump *d = &R->dumps[0];
    cr_assert_not(d->complete);
    cr_assert_eq(d->st.lost_batches, 1);
    cr_assert_eq(d->st.unsure_exits, 1);
    const rnode *a = find_node(2, SERTRACE_TAG_REDUCE);
    cr_assert_eq(a->bytes, 2294, "bytes = the exit seen - its enter");
    cr_assert(a->flags & SERTRACE_NODE_EXIT_UNSURE);
    cr_assert_eq(bound_of(a), SERTRACE_BOUND_UPPER, "at most 2294 B, never exact");
    sertrace_node probe = {0};
    probe.flags = a->flags;
    cr_assert_not(sertrace_node_bytes_exact(&probe));
    cr_assert_not(sertrace_node_self_exact(&probe));
    /* B's child and C were entered after the gap: exact */
    const rnode *t = find_node(3, SERTRACE_TAG_TUPLE);
    cr_assert_eq(t->bytes, 290);
    cr_assert_eq(bound_of(t), SERTRACE_BOUND_EXACT);
    const rnode *c = find_node(2, SERTRACE_TAG_INSTANCE);
    cr_assert_eq(c->bytes, 13);
    cr_assert_eq(c->flags, 0);
    /* the root: one root per dump, its EXIT is its own; exact bytes, self
     * not exact (a child is not exact, records lost inside) */
    const rnode *root = find_node(1, SERTRACE_TAG_LIST);
    cr_assert_eq(root->bytes, 2309);
    cr_assert_eq(bound_of(root), SERTRACE_BOUND_EXACT);
    cr_assert(root->flags & SERTRACE_NODE_PARTIAL);
    cr_assert(root->flags & SERTRACE_NODE_CHILD_INEXACT);
    probe.flags = root->flags;
    cr_assert_not(sertrace_node_self_exact(&probe));
}

/* The same gap, but the EXIT after it really is A's own (the lost batch
 * held only A's children): the core cannot tell, so A is still not
 * claimed exact, only "at most". */
Test(core, own_exit_after_lost_batch_still_not_exact)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 4, 2);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 2, 0, 2, 0, 3);
    flush(1, 1, 0);
    /* seq 1 lost: A's children 4..40 */
    enc_exit(&E, 2, 41);
    enc_exit(&E, 1, 42);
    flush(1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 43, 0), 0);
    const rnode *a = find_node(2, SERTRACE_TAG_REDUCE);
    cr_assert_eq(a->bytes, 38, "right, but not provably");
    cr_assert_eq(bound_of(a), SERTRACE_BOUND_UPPER);
    cr_assert_eq(R->dumps[0].st.unsure_exits, 1);
    cr_assert_eq(bound_of(find_node(1, SERTRACE_TAG_LIST)), SERTRACE_BOUND_EXACT);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 40);
}

/* [R [P [N [C]] P2 [X]] P3]: the lost batch holds N's and P's EXITs, P2's
 * and X's ENTERs.  X's EXIT closes N (an upper bound); P3's ENTER closes P
 * without its EXIT: its lower bound is the last position seen before the
 * loss (30), not X's exit (500) that the stack placed inside it. */
Test(core, exit_lost_after_a_loss_keeps_a_true_lower_bound)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 2, 0, 2, 0, 10);
    enc_enter(&E, SERTRACE_TAG_TUPLE, 3, 0, 3, 0, 20);
    enc_enter(&E, SERTRACE_TAG_STR, 4, 0, 4, 0, 21);
    enc_exit(&E, 4, 30);
    flush(1, 1, 0);
    enc_exit(&E, 3, 500);                                  /* X's */
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 0, 5, 0, 600); /* P3 */
    enc_exit(&E, 2, 700);
    enc_exit(&E, 1, 800);
    flush(1, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 801, 0), 0);
    const rnode *n = find_node(3, SERTRACE_TAG_TUPLE);
    cr_assert_eq(n->bytes, 480);
    cr_assert_eq(bound_of(n), SERTRACE_BOUND_UPPER);
    const rnode *p = find_node(2, SERTRACE_TAG_DICT);
    cr_assert(p->flags & SERTRACE_NODE_NO_EXIT);
    cr_assert_eq(p->bytes, 20, "30 - 10: what was seen before the loss");
    cr_assert_eq(bound_of(p), SERTRACE_BOUND_LOWER);
    cr_assert_eq(find_node(2, SERTRACE_TAG_INSTANCE)->flags, 0);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 800);
    cr_assert_eq(bound_of(find_node(1, SERTRACE_TAG_LIST)), SERTRACE_BOUND_EXACT);
    /* the same loss, then the process dies: unfinished nodes too */
    R->nnodes = 0;
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 2, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 2, 0, 2, 0, 10);
    enc_exit(&E, 2, 15);
    enc_enter(&E, SERTRACE_TAG_TUPLE, 2, 0, 3, 0, 15);
    flush(1, 2, 0);
    enc_enter(&E, SERTRACE_TAG_STR, 3, 0, 4, 0, 900); /* a later sibling's child */
    enc_exit(&E, 3, 950);
    flush(1, 2, 3);
    cr_assert_eq(sertrace_core_finish(C), 0);
    const rnode *t = find_node(2, SERTRACE_TAG_TUPLE);
    cr_assert(t->flags & SERTRACE_NODE_UNFINISHED);
    cr_assert_eq(t->bytes, 0, "15 - 15: nothing after the loss is surely its");
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 15);
}

/* A second depth-1 node breaks the one-root rule: a root closed after a
 * gap in such a dump is an upper bound too; a placeholder (enter lost)
 * closed by an exit after a gap is neither bound; a malformed batch is a
 * records loss like a seq gap. */
Test(core, exit_after_loss_second_root_placeholder_malformed)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_exit(&E, 1, 10);
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 2, 0, 10);
    flush(1, 1, 0);
    enc_exit(&E, 1, 30);
    flush(1, 1, 2); /* seq 1 lost */
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 30, 0), 0);
    cr_assert_eq(bound_of(find_node(1, SERTRACE_TAG_LIST)), SERTRACE_BOUND_EXACT);
    cr_assert_eq(bound_of(find_node(1, SERTRACE_TAG_DICT)), SERTRACE_BOUND_UPPER);
    cr_assert_eq(R->dumps[0].st.roots, 2);

    R->nnodes = 0;
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 2, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_STR, 3, 0, 9, 0, 100); /* ancestors lost */
    enc_exit(&E, 3, 110);
    flush(1, 2, 0);
    enc_exit(&E, 2, 150);
    flush(1, 2, 5); /* seq 1..4 lost */
    enc_exit(&E, 1, 160);
    enc_u8(&E, 0x7f); /* unknown opcode: the rest of the batch is lost */
    flush(1, 2, 6);
    enc_exit(&E, 1, 170);
    flush(1, 2, 7);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 2, 171, 0), 0);
    const rnode *ph = find_node(2, SERTRACE_TAG_UNKNOWN);
    cr_assert(ph->flags & SERTRACE_NODE_NO_ENTER);
    cr_assert(ph->flags & SERTRACE_NODE_EXIT_UNSURE);
    cr_assert_eq(bound_of(ph), SERTRACE_BOUND_UNKNOWN, "enter and exit both unsure");
    cr_assert_eq(bound_of(find_node(3, SERTRACE_TAG_STR)), SERTRACE_BOUND_EXACT);
    /* the root placeholder: closed at 160 after the gap, enter lost */
    cr_assert_eq(bound_of(find_node(1, SERTRACE_TAG_UNKNOWN)), SERTRACE_BOUND_UNKNOWN);
    cr_assert_eq(R->dumps[1].st.orphan_exits, 1, "the exit after the malformed batch");
}

Test(core, orphan_exit_is_counted_and_ignored)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "x", 1, 0), 0);
    enc_exit(&E, 3, 40); /* exit without any enter */
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_exit(&E, 2, 5); /* exit deeper than what is open */
    enc_exit(&E, 1, 10);
    flush(1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 10, 0), 0);
    cr_assert_eq(R->dumps[0].st.orphan_exits, 2);
    cr_assert_not(R->dumps[0].complete);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 10);
}

Test(core, lost_exit_closed_by_next_sibling)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 2, 0, 2, 0, 1);
    enc_enter(&E, SERTRACE_TAG_STR, 3, 0, 3, 0, 2);
    enc_exit(&E, 3, 7);
    /* dict's EXIT lost; a sibling at depth 2 arrives */
    enc_enter(&E, SERTRACE_TAG_TUPLE, 2, 0, 4, 0, 12);
    enc_exit(&E, 2, 20);
    enc_exit(&E, 1, 21);
    flush(1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 21, 0), 0);
    const rnode *dict = find_node(2, SERTRACE_TAG_DICT);
    cr_assert(dict->flags & SERTRACE_NODE_NO_EXIT);
    cr_assert_eq(dict->bytes, 6, "lower bound: last position seen inside");
    cr_assert_eq(R->dumps[0].st.lost_exits, 1);
    cr_assert(find_node(1, SERTRACE_TAG_LIST)->flags & SERTRACE_NODE_CHILD_INEXACT);
    cr_assert_not(R->dumps[0].complete);
}

Test(core, records_without_begin_mid_tree_snapshot_edge)
{
    /* a snapshot kept only seq 5.. of a dump, starting at depth 3 */
    enc_exit(&E, 4, 90);                              /* orphan */
    enc_enter(&E, SERTRACE_TAG_STR, 4, 0, 9, 0, 100); /* ancestors 1..3 missing */
    enc_exit(&E, 4, 110);
    enc_exit(&E, 3, 120);
    enc_exit(&E, 2, 130);
    enc_exit(&E, 1, 140);
    flush(55, 9, 5);
    cr_assert_eq(sertrace_core_dump_end(C, 55, 56, 0, 9, 141, 0), 0);
    rdump *d = &R->dumps[0];
    cr_assert_not(d->st.flags & SERTRACE_DUMPF_BEGIN);
    cr_assert_eq(d->st.lost_batches, 5);
    cr_assert_eq(d->st.lost_enters, 3);
    cr_assert_eq(d->st.orphan_exits, 1);
    cr_assert_eq(d->st.payload_bytes, 141);
    cr_assert_not(d->complete);
    const rnode *root = find_node(1, SERTRACE_TAG_UNKNOWN);
    cr_assert(root->flags & SERTRACE_NODE_NO_ENTER);
    cr_assert_eq(root->bytes, 40, "lower bound from the first seen position");
    cr_assert_eq(find_node(4, SERTRACE_TAG_STR)->bytes, 10);
    cr_assert_eq(find_node(4, SERTRACE_TAG_STR)->flags & ~SERTRACE_NODE_PARTIAL, 0);
}

Test(core, dump_never_ends_reports_chain)
{
    regular_dump(1, 1, 1);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 5, 2, "pickle", 6, 5), 0);
    enc_type(&E, 1, "State");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 1, 1, 1, 0, 2);
    enc_type(&E, 2, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 2, 2, 3, 5);
    enc_type(&E, 3, "Frame");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 3, 3, 3, 0, 9);
    enc_enter(&E, SERTRACE_TAG_STR, 4, 0, 4, 0, 12);
    enc_exit(&E, 4, 30);
    flush(1, 2, 0);
    /* killed: no more events */
    cr_assert_eq(sertrace_core_finish(C), 0);
    cr_assert_eq(R->ndumps, 2);
    cr_assert(R->dumps[0].complete);
    rdump *d = &R->dumps[1];
    cr_assert(d->st.flags & SERTRACE_DUMPF_UNFINISHED);
    cr_assert_not(d->complete);
    cr_assert_eq(d->st.unfinished_nodes, 3);
    cr_assert_eq(d->died_depth, 3, "died inside the Frame at depth 3");
    cr_assert_str_eq(d->died_type, "Frame");
    const rnode *frame = find_node(3, SERTRACE_TAG_INSTANCE);
    cr_assert(frame->flags & SERTRACE_NODE_UNFINISHED);
    cr_assert_eq(frame->bytes, 21, "lower bound 30 - 9");
    cr_assert_eq(sertrace_core_get_stats(C)->dumps_unfinished, 1);
}

Test(core, discarded_marks_live_dumps_of_that_pid_only)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 2, 2, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 0);
    flush(1, 1, 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 0);
    flush(2, 1, 0);
    cr_assert_eq(sertrace_core_discarded(C, 1, 1234), 0);
    enc_exit(&E, 1, 10);
    flush(1, 1, 1);
    enc_exit(&E, 1, 10);
    flush(2, 1, 1);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 11, 0), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 2, 2, 0, 1, 11, 0), 0);
    cr_assert_eq(R->dumps[0].st.discarded, 1234);
    cr_assert_not(R->dumps[0].complete);
    cr_assert_eq(R->dumps[1].st.discarded, 0);
    cr_assert(R->dumps[1].complete);
    cr_assert(R->nodes[0].flags & SERTRACE_NODE_PARTIAL);
    /* a discard alone (no seq gap in this dump) loses none of its records:
     * the exit is its own, bytes stay exact */
    cr_assert_not(R->nodes[0].flags & SERTRACE_NODE_EXIT_UNSURE);
    cr_assert_eq(bound_of(&R->nodes[0]), SERTRACE_BOUND_EXACT);
    /* unknown pid: every live dump */
    cr_assert_eq(sertrace_core_dump_begin(C, 3, 3, 0, 1, "p", 1, 5), 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 4, 4, 0, 1, "p", 1, 5), 0);
    cr_assert_eq(sertrace_core_discarded(C, -1, 7), 0);
    cr_assert_eq(sertrace_core_finish(C), 0);
    cr_assert_eq(R->dumps[2].st.discarded, 7);
    cr_assert_eq(R->dumps[3].st.discarded, 7);
    cr_assert_eq(sertrace_core_get_stats(C)->discarded_events, 1241);
}

static void records_at(int64_t pid, int64_t tid, int64_t ts, uint64_t id, uint32_t seq)
{
    cr_assert_eq(sertrace_core_records(C, pid, tid, ts, id, seq, E.buf, E.n), 0);
    enc_reset(&E);
}

/* Thread (1, 11): dump 1's dump_end is discarded; dump 2 of the same thread
 * begins after dump 1's last event and ends: dump 1 is closed then as "end
 * lost" (not unfinished), before dump 2, and later discards of the process
 * are not charged to it. */
Test(core, dump_end_discarded_closed_as_end_lost)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 11, 100, 1, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_INT, 2, 0, 2, 0, 3);
    enc_exit(&E, 2, 5);
    records_at(1, 11, 110, 1, 0);
    /* dump 1's last batch and dump_end lost; the notice comes later */
    cr_assert_eq(sertrace_core_discarded(C, 1, 3), 0);
    /* another thread of the process, live across it: not closed */
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 12, 105, 7, "pickle", 6, 4), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    records_at(1, 12, 106, 7, 0);
    /* dump 3 of thread 12 ends: does not touch thread 11's dump 1 */
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 12, 107, 8, "pickle", 6, 4), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 12, 108, 8, 3, 0), 0);
    cr_assert_eq(R->ndumps, 1);
    cr_assert_eq(R->dumps[0].st.dump_id, 8);
    /* dump 2 of thread 11, after dump 1's last event */
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 11, 200, 2, "pickle", 6, 4), 0);
    cr_assert_eq(R->ndumps, 1, "a dump_begin alone proves nothing");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 2);
    enc_exit(&E, 1, 9);
    records_at(1, 11, 210, 2, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 11, 220, 2, 10, 0), 0);
    cr_assert_eq(R->ndumps, 3);
    rdump *d1 = &R->dumps[1];
    cr_assert_eq(d1->st.dump_id, 1, "closed before dump 2");
    cr_assert(d1->st.flags & SERTRACE_DUMPF_END_LOST);
    cr_assert_not(d1->st.flags & SERTRACE_DUMPF_UNFINISHED);
    cr_assert_not(d1->st.flags & SERTRACE_DUMPF_END);
    cr_assert_not(d1->complete);
    cr_assert_eq(d1->st.discarded, 3);
    cr_assert_eq(d1->st.unfinished_nodes, 0);
    cr_assert_eq(d1->st.lost_exits, 1, "its open root: exit lost, a lower bound");
    cr_assert_eq(d1->died_depth, 0, "no died-in chain");
    cr_assert_eq(R->dumps[2].st.dump_id, 2);
    cr_assert(R->dumps[2].complete);
    /* a later discard of the process: only what is still live gets it */
    cr_assert_eq(sertrace_core_discarded(C, 1, 50), 0);
    cr_assert_eq(sertrace_core_finish(C), 0);
    cr_assert_eq(R->ndumps, 4);
    cr_assert_eq(R->dumps[3].st.dump_id, 7);
    cr_assert_eq(R->dumps[3].st.discarded, 50, "opened after the first notice");
    cr_assert(R->dumps[3].st.flags & SERTRACE_DUMPF_UNFINISHED);
    cr_assert_eq(d1->st.discarded, 3);
    cr_assert_eq(sertrace_core_get_stats(C)->dumps_unfinished, 1);
}

/* Nested dumps: the outer one's records go on after the inner one ended,
 * so even with discards it is not closed while its thread's inner dump
 * began before its last event; without discards it is never closed early. */
Test(core, nested_dump_with_discards_not_closed_early)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 100, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 1, 0, 1, 0, 2);
    records_at(1, 1, 101, 1, 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 102, 2, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    enc_exit(&E, 1, 4);
    records_at(1, 1, 103, 2, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 104, 2, 5, 0), 0);
    cr_assert_eq(R->ndumps, 1, "no discard: the outer dump stays");
    /* a discard, then the outer dump goes on, then a second nested dump
     * that began after the outer's last record... */
    cr_assert_eq(sertrace_core_discarded(C, 1, 2), 0);
    enc_note(&E, 1, "k", "v");
    records_at(1, 1, 105, 1, 1);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 104, 3, "pickle", 6, 5), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 106, 3, 5, 0), 0);
    cr_assert_eq(R->ndumps, 2, "began before the outer's last event: kept");
    enc_exit(&E, 1, 50);
    records_at(1, 1, 107, 1, 2);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 108, 1, 51, 0), 0);
    cr_assert_eq(R->dumps[2].st.dump_id, 1);
    cr_assert(R->dumps[2].st.flags & SERTRACE_DUMPF_END);
    cr_assert_not(R->dumps[2].st.flags & SERTRACE_DUMPF_END_LOST);
    cr_assert_eq(find_node(1, SERTRACE_TAG_REDUCE)->bytes, 48);
}

Test(core, interleaved_threads_and_processes)
{
    /* same dump_id in two processes, two threads of one process, records
     * interleaved batch by batch */
    int64_t pids[3] = {10, 10, 20};
    int64_t tids[3] = {11, 12, 21};
    uint64_t ids[3] = {1, 2, 1};
    for (int k = 0; k < 3; k++)
        cr_assert_eq(sertrace_core_dump_begin(C, pids[k], tids[k], k, ids[k], "p", 1, 4), 0);
    for (int k = 0; k < 3; k++) {
        enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
        flush(pids[k], ids[k], 0);
    }
    for (uint32_t i = 0; i < 10; i++)
        for (int k = 0; k < 3; k++) {
            enc_enter(&E, SERTRACE_TAG_INT, 2, 0, 1, 0, 3 + i * (k + 1));
            enc_exit(&E, 2, 3 + (i + 1) * (k + 1));
            flush(pids[k], ids[k], i + 1);
        }
    for (int k = 0; k < 3; k++) {
        enc_exit(&E, 1, 3 + 10 * (k + 1));
        flush(pids[k], ids[k], 11);
        cr_assert_eq(sertrace_core_dump_end(C, pids[k], tids[k], 0, ids[k], 4 + 10 * (k + 1), 0),
                     0);
    }
    cr_assert_eq(R->ndumps, 3);
    for (int k = 0; k < 3; k++) {
        cr_assert(R->dumps[k].complete, "dump %d complete", k);
        cr_assert_eq(R->dumps[k].st.nodes, 11);
        cr_assert_eq(R->dumps[k].st.tid, tids[k]);
    }
    for (size_t i = 0; i < R->nnodes; i++)
        if (R->nodes[i].depth == 1) {
            int k = R->nodes[i].pid == 20 ? 2 : (R->nodes[i].dump_id == 1 ? 0 : 1);
            cr_assert_eq(R->nodes[i].bytes, 1 + 10 * (uint64_t)(k + 1));
        }
    cr_assert_eq(sertrace_core_get_stats(C)->max_live_dumps, 3);
}

Test(core, nested_dumps_on_one_thread)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_REDUCE, 1, 0, 1, 0, 2);
    flush(1, 1, 0);
    /* a __reduce__ pickles something else meanwhile */
    regular_dump(1, 1, 2);
    enc_exit(&E, 1, 50);
    flush(1, 1, 1);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 51, 0), 0);
    cr_assert_eq(R->ndumps, 2);
    cr_assert_eq(R->dumps[0].st.dump_id, 2);
    cr_assert(R->dumps[0].complete);
    cr_assert(R->dumps[1].complete);
    cr_assert_eq(find_node(1, SERTRACE_TAG_REDUCE)->bytes, 48);
}

Test(core, unknown_opcode_skips_rest_of_batch)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_u8(&E, 0xfe);                               /* opcode from a newer schema */
    enc_enter(&E, SERTRACE_TAG_INT, 2, 0, 1, 0, 1); /* skipped */
    enc_exit(&E, 2, 2);
    flush(1, 1, 0);
    enc_exit(&E, 1, 9);
    flush(1, 1, 1);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 10, 0), 0);
    cr_assert_eq(R->dumps[0].st.malformed, 1);
    cr_assert_eq(R->dumps[0].st.nodes, 1);
    cr_assert_not(R->dumps[0].complete);
    cr_assert_eq(find_node(1, SERTRACE_TAG_LIST)->bytes, 9);
    cr_assert(find_node(1, SERTRACE_TAG_LIST)->flags & SERTRACE_NODE_PARTIAL);
}

static void one_malformed(const uint8_t *bytes, size_t n)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 9, 9, 0, 77, "p", 1, 5), 0);
    cr_assert_eq(sertrace_core_records(C, 9, 9, 0, 77, 0, bytes, n), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 9, 9, 0, 77, 1, 0), 0);
    rdump *d = &R->dumps[R->ndumps - 1];
    cr_assert_geq(d->st.malformed, 1);
    cr_assert_not(d->complete);
}

Test(core, malformed_varint_too_long)
{
    uint8_t b[] = {
        SERTRACE_REC_EXIT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01};
    one_malformed(b, sizeof b);
}

Test(core, malformed_varint_truncated)
{
    uint8_t b[] = {SERTRACE_REC_ENTER, 1, 0x01, 0x80};
    one_malformed(b, sizeof b);
}

Test(core, malformed_string_longer_than_batch)
{
    uint8_t b[] = {SERTRACE_REC_TYPE, 1, 0xff, 0x7f, 'a', 'b'};
    one_malformed(b, sizeof b);
}

Test(core, malformed_depth_zero_and_absurd)
{
    enc_enter(&E, 1, 0, 0, 0, 0, 0);
    one_malformed(E.buf, E.n);
    enc_reset(&E);
    enc_enter(&E, 1, 1ull << 40, 0, 0, 0, 0);
    one_malformed(E.buf, E.n);
    enc_reset(&E);
    enc_type(&E, 1ull << 33, "x");
    one_malformed(E.buf, E.n);
    enc_reset(&E);
    enc_type(&E, 0, "x");
    one_malformed(E.buf, E.n);
}

Test(core, malformed_exit_before_enter_position)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 100);
    enc_exit(&E, 1, 50);
    flush(1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 101, 0), 0);
    cr_assert(R->nodes[0].flags & SERTRACE_NODE_MALFORMED);
    cr_assert_eq(R->nodes[0].bytes, 0);
    cr_assert_not(R->dumps[0].complete);
}

Test(core, empty_and_null_batches)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    cr_assert_eq(sertrace_core_records(C, 1, 1, 0, 1, 0, NULL, 0), 0);
    cr_assert_eq(sertrace_core_records(C, 1, 1, 0, 1, 1, NULL, 5), 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 0, 0), 0);
    cr_assert_eq(R->dumps[0].st.nodes, 0);
    cr_assert_not(R->dumps[0].complete, "a dump without nodes is not complete");
}

Test(core, repeated_or_reordered_seq_is_skipped)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    flush(1, 1, 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    flush(1, 1, 0); /* again seq 0 */
    enc_exit(&E, 1, 4);
    flush(1, 1, 1);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 5, 0), 0);
    cr_assert_eq(R->dumps[0].st.malformed, 1);
    cr_assert_eq(R->dumps[0].st.nodes, 1);
    cr_assert_eq(R->nodes[0].bytes, 4);
}

Test(core, end_without_begin_and_duplicate_begin)
{
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 3, 99, 1), 0);
    cr_assert_eq(R->ndumps, 1);
    cr_assert_not(R->dumps[0].st.flags & SERTRACE_DUMPF_BEGIN);
    cr_assert(R->dumps[0].st.flags & SERTRACE_DUMPF_STATUS_ERROR);
    cr_assert_eq(R->dumps[0].st.payload_bytes, 99);
    /* pid reuse: a second begin with the same (pid, id) */
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 4, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    flush(1, 4, 0);
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 4, "p", 1, 5), 0);
    cr_assert_eq(R->ndumps, 2);
    cr_assert(R->dumps[1].st.flags & SERTRACE_DUMPF_RESTARTED);
    cr_assert(R->dumps[1].st.flags & SERTRACE_DUMPF_UNFINISHED);
    regular_dump(2, 2, 4);
    cr_assert_eq(sertrace_core_finish(C), 0);
    cr_assert_eq(R->ndumps, 4);
}

Test(core, error_and_notes_attach_to_their_depth)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    enc_note(&E, 0, "dump", "level");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 0);
    enc_enter(&E, SERTRACE_TAG_FUNCTION, 2, 0, 1, 0, 3);
    enc_error(&E, SERTRACE_TAG_FUNCTION, 2, 0, "Can't pickle local object", "State.f");
    enc_note(&E, 9, "deep", "goes to innermost");
    enc_exit(&E, 2, 3);
    enc_exit(&E, 1, 4);
    flush(1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 5, SERTRACE_STATUS_ERROR), 0);
    cr_assert_str_eq(R->errors, "2:Can't pickle local object@State.f;");
    cr_assert_str_eq(R->notes, "0:dump=level;2:deep=goes to innermost;");
    cr_assert(find_node(2, SERTRACE_TAG_FUNCTION)->flags & SERTRACE_NODE_ERROR);
    cr_assert_eq(R->dumps[0].st.errors, 1);
    cr_assert(R->dumps[0].complete, "an error is a flag, sizes are exact");
}

Test(core, random_bytes_never_crash)
{
    srand(12345);
    uint8_t b[512];
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(rand() % (int)sizeof b);
        for (size_t i = 0; i < n; i++) {
            int r = rand() % 8;
            /* bias to valid opcodes and small varints so deep paths run */
            b[i] = r < 3   ? (uint8_t)(1 + rand() % 5)
                   : r < 6 ? (uint8_t)(rand() % 8)
                           : (uint8_t)rand();
        }
        uint64_t id = (uint64_t)(round % 7);
        if (round % 5 == 0)
            cr_assert_eq(sertrace_core_dump_begin(C, round % 3, 0, 0, id, (char *)b, n % 80, 5), 0);
        cr_assert_eq(sertrace_core_records(C, round % 3, 0, 0, id, (uint32_t)(round % 4), b, n), 0);
        if (round % 11 == 0)
            cr_assert_eq(
                sertrace_core_dump_end(C, round % 3, 0, 0, id, (uint64_t)rand(), rand() % 3), 0);
        if (round % 97 == 0)
            cr_assert_eq(sertrace_core_discarded(C, round % 4 - 1, 3), 0);
    }
    cr_assert_eq(sertrace_core_finish(C), 0);
    cr_assert_eq(sertrace_core_get_stats(C)->live_dumps, 0);
    cr_assert_eq(R->enters, R->exits, "every node opened is closed");
}

/* ---- depth and memory ------------------------------------------------------ */

#define DEEP 1000000u

Test(core, million_deep_tree)
{
    R->keep_nodes = false;
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "p", 1, 5), 0);
    uint32_t seq = 0;
    for (uint32_t d = 1; d <= DEEP; d++) {
        enc_enter(&E, SERTRACE_TAG_LIST, d, 0, d, 2, 2 + d - 1);
        if (E.n > 4000)
            flush(1, 1, seq++);
    }
    for (uint32_t d = DEEP; d >= 1; d--) {
        /* each list adds 1 byte before and 1 byte after its child */
        enc_exit(&E, d, 2 + DEEP + (DEEP - d) + 1);
        if (E.n > 4000)
            flush(1, 1, seq++);
    }
    flush(1, 1, seq++);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 2 * DEEP + 3, 0), 0);
    cr_assert_eq(R->ndumps, 1);
    cr_assert(R->dumps[0].complete);
    cr_assert_eq(R->dumps[0].st.max_depth, DEEP);
    cr_assert_eq(R->dumps[0].st.nodes, DEEP);
    cr_assert_eq(R->exits, DEEP);
}

static uint64_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

Test(core, memory_flat_as_stream_grows)
{
    R->keep_nodes = false;
    uint64_t after_warmup = 0;
    for (uint64_t i = 1; i <= 60000; i++) {
        int64_t pid = (int64_t)(i % 4);
        cr_assert_eq(sertrace_core_dump_begin(C, pid, pid, 0, i, "pickle", 6, 5), 0);
        enc_type(&E, 1, "list");
        enc_enter(&E, SERTRACE_TAG_LIST, 1, 1, 1, 0, 2);
        for (uint32_t k = 0; k < 20; k++) {
            enc_enter(&E, SERTRACE_TAG_INT, 2, 0, 1, 0, 3 + k);
            enc_exit(&E, 2, 4 + k);
        }
        enc_exit(&E, 1, 24);
        flush(pid, i, 0);
        cr_assert_eq(sertrace_core_dump_end(C, pid, pid, 0, i, 25, 0), 0);
        R->ndumps = 0;
        if (i == 5000)
            after_warmup = heap_in_use();
    }
    uint64_t end = heap_in_use();
    cr_assert_leq(end, after_warmup + 4096, "heap grew from %llu to %llu over 55000 dumps",
                  (unsigned long long)after_warmup, (unsigned long long)end);
    cr_assert_eq(sertrace_core_get_stats(C)->max_live_dumps, 1);
    cr_assert_eq(R->exits, 60000ull * 21);
}

/* ---- hostile depths ---------------------------------------------------------- */

/* One ENTER record far below an empty chain must not invent its ancestors
 * (one 9-byte record used to open 100,000 or 2,000,000 nodes). */
static void one_deep_enter(uint64_t depth)
{
    R->keep_nodes = false;
    cr_assert_eq(sertrace_core_dump_begin(C, 3, 3, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, depth, 0, 1, 0, 5);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 6); /* a sane record after it */
    enc_exit(&E, 1, 8);
    flush(3, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 3, 3, 0, 1, 9, 0), 0);
    rdump *d = &R->dumps[0];
    cr_assert_eq(d->st.malformed, 1);
    cr_assert_eq(d->st.lost_enters, 0, "no ancestor invented");
    cr_assert_leq(d->st.max_depth, 1);
    cr_assert_leq(R->enters, 1);
    cr_assert_not(d->complete);
}

Test(core, single_enter_at_depth_100000_is_skipped)
{
    one_deep_enter(100000);
    cr_assert_eq(R->dumps[0].st.skipped_deep, 1);
    cr_assert_eq(R->dumps[0].st.nodes, 1, "the next record of the batch is still read");
}

Test(core, single_enter_at_depth_2000000_is_malformed)
{
    one_deep_enter(2000000); /* beyond SERTRACE_MAX_DEPTH: the batch stops */
    cr_assert_eq(R->dumps[0].st.nodes, 0);
}

Test(core, enter_up_to_64_levels_below_is_resynchronised)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 3, 3, 0, 1, "p", 1, 5), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_LIST, 66, 0, 1, 0, 3);  /* 64 missing levels */
    enc_enter(&E, SERTRACE_TAG_LIST, 200, 0, 1, 0, 4); /* 133 missing: skipped */
    enc_enter(&E, SERTRACE_TAG_LIST, 131, 0, 1, 0, 4); /* 64 missing again */
    enc_exit(&E, 131, 5);
    enc_exit(&E, 1, 9);
    flush(3, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 3, 3, 0, 1, 10, 0), 0);
    rdump *d = &R->dumps[0];
    cr_assert_eq(d->st.lost_enters, 128);
    cr_assert_eq(d->st.skipped_deep, 1);
    cr_assert_eq(d->st.malformed, 1);
    cr_assert_eq(d->st.max_depth, 131);
    cr_assert_eq(d->st.nodes, 131);
}

Test(core, many_deep_enters_in_one_batch_count_one_malformed_batch)
{
    R->keep_nodes = false;
    cr_assert_eq(sertrace_core_dump_begin(C, 3, 3, 0, 1, "p", 1, 5), 0);
    for (int k = 0; k < 400; k++)
        enc_enter(&E, SERTRACE_TAG_LIST, 1000000 - k, 0, 1, 0, 5);
    flush(3, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 3, 3, 0, 1, 9, 0), 0);
    cr_assert_eq(R->dumps[0].st.skipped_deep, 400);
    cr_assert_eq(R->dumps[0].st.malformed, 1);
    cr_assert_eq(R->enters, 0);
    cr_assert_eq(sertrace_core_get_stats(C)->malformed, 1);
}

/* Varints of every length, read by the one-load fast path (8 or more bytes
 * left in the batch) and by the byte loop (near the batch's end): the
 * values must be the same.  Addresses and lengths come back through
 * node_enter, positions as the node's bytes. */
typedef struct vrec {
    uint64_t addr, length, bytes;
    unsigned enters, exits;
} vrec;

static int v_enter(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    vrec *v = ctx;
    v->addr = n->addr;
    v->length = n->length;
    v->enters++;
    return 0;
}

static int v_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    vrec *v = ctx;
    v->bytes = n->bytes;
    v->exits++;
    return 0;
}

Test(core, varints_of_every_length_fast_and_slow_path)
{
    static const uint64_t deltas[] = {
        0, 1, 127, 128, 16383, 16384, 1ull << 35, (1ull << 55) + 3, (1ull << 56) + 1};
    for (unsigned bits = 0; bits <= 64; bits++) {
        uint64_t val = bits == 0    ? 0
                       : bits == 64 ? UINT64_MAX
                                    : (1ull << (bits - 1)) |
                                          (bits > 1 ? 0x5a5a5a5a5a5a5a5aull >> (65 - bits) : 0);
        for (unsigned k = 0; k < sizeof deltas / sizeof *deltas; k++)
            for (int pad = 0; pad < 2; pad++) {
                vrec v = {0};
                sertrace_core_visitor vis = {0};
                vis.ctx = &v;
                vis.node_enter = v_enter;
                vis.node_exit = v_exit;
                sertrace_core *c = sertrace_core_create(&vis);
                static enc e;
                enc_reset(&e);
                uint64_t pos = val >> 8; /* positions of every size too */
                enc_enter(&e, SERTRACE_TAG_LIST, 1, 0, val, val ^ 0x3c, pos);
                enc_exit(&e, 1, pos + deltas[k]);
                if (pad) /* the exit's varints are then read by the fast path */
                    enc_type(&e, 1, "padding-padding");
                cr_assert_eq(sertrace_core_records(c, 1, 1, 0, 1, 0, e.buf, e.n), 0);
                cr_assert_eq(v.enters, 1, "bits %u", bits);
                cr_assert_eq(v.exits, 1, "bits %u delta %llu pad %d", bits,
                             (unsigned long long)deltas[k], pad);
                cr_assert_eq(v.addr, val, "bits %u", bits);
                cr_assert_eq(v.length, val ^ 0x3c, "bits %u", bits);
                cr_assert_eq(v.bytes, deltas[k], "bits %u delta %llu pad %d", bits,
                             (unsigned long long)deltas[k], pad);
                cr_assert_eq(sertrace_core_get_stats(c)->malformed, 0);
                sertrace_core_destroy(c);
            }
    }
}

/* ---- ATOM records (schema v4) --------------------------------------------- */

/* The regular dump with its str leaf as one ATOM: the same tree. */
Test(core, atom_gives_the_node_of_its_enter_exit_pair)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 100, 101, 1, 1, "pickle", 6, 5), 0);
    enc_type(&E, 1, "dict");
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 1, 0x1000, 3, 2);
    enc_type(&E, 2, "list");
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 2, 0x2000, 2, 10);
    enc_type(&E, 3, "str");
    enc_atom(&E, SERTRACE_TAG_STR, 3, 3, 0x3000, 5, 12, 10);
    enc_exit(&E, 2, 50);
    enc_type(&E, 4, "mod.Thing");
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 2, 4, 0x4000, 0, 60);
    enc_note(&E, 2, "frame", "ip=3");
    enc_exit(&E, 2, 90);
    enc_exit(&E, 1, 102);
    flush(100, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 100, 101, 2, 1, 103, SERTRACE_STATUS_OK), 0);
    rnode atom_nodes[4];
    cr_assert_eq(R->nnodes, 4);
    memcpy(atom_nodes, R->nodes, sizeof atom_nodes);
    rdump atom_dump = R->dumps[0];

    R->nnodes = 0;
    R->ndumps = 0;
    regular_dump(100, 101, 2);
    cr_assert_eq(R->nnodes, 4);
    for (size_t i = 0; i < 4; i++) {
        cr_expect_eq(atom_nodes[i].tag, R->nodes[i].tag, "node %zu", i);
        cr_expect_eq(atom_nodes[i].depth, R->nodes[i].depth, "node %zu", i);
        cr_expect_eq(atom_nodes[i].type, R->nodes[i].type, "node %zu", i);
        cr_expect_eq(atom_nodes[i].bytes, R->nodes[i].bytes, "node %zu", i);
        cr_expect_eq(atom_nodes[i].self, R->nodes[i].self, "node %zu", i);
        cr_expect_eq(atom_nodes[i].flags, R->nodes[i].flags, "node %zu", i);
    }
    cr_expect(atom_dump.complete);
    cr_expect_eq(atom_dump.st.nodes, R->dumps[0].st.nodes);
    cr_expect_eq(atom_dump.st.max_depth, 3);
    cr_expect_eq(atom_nodes[0].bytes, 10);
}

/* Placed by its depth like an ENTER: it closes an earlier sibling that
 * lost its EXIT (a lower bound), and invents ancestors lost with an
 * earlier batch. */
Test(core, atom_resynchronises_like_an_enter)
{
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 1, "x", 1, 0), 0);
    enc_enter(&E, SERTRACE_TAG_LIST, 1, 0, 1, 0, 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 2, 0, 2, 0, 1);
    enc_atom(&E, SERTRACE_TAG_STR, 3, 0, 3, 0, 2, 5);
    /* dict's EXIT lost; an atom sibling at depth 2 arrives */
    enc_atom(&E, SERTRACE_TAG_INT, 2, 0, 4, 0, 12, 8);
    enc_exit(&E, 1, 21);
    flush(1, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 1, 21, 0), 0);
    const rnode *dict = find_node(2, SERTRACE_TAG_DICT);
    cr_assert(dict->flags & SERTRACE_NODE_NO_EXIT);
    cr_assert_eq(dict->bytes, 6, "lower bound: the atom inside ended at 7");
    cr_assert_eq(find_node(2, SERTRACE_TAG_INT)->bytes, 8);
    cr_assert_eq(find_node(3, SERTRACE_TAG_STR)->bytes, 5);
    cr_assert_eq(R->dumps[0].st.lost_exits, 1);
    cr_assert_not(R->dumps[0].complete);

    /* a dump whose first batch was lost: the atom at depth 3 gets two
     * invented ancestors */
    cr_assert_eq(sertrace_core_dump_begin(C, 1, 1, 0, 2, "x", 1, 0), 0);
    enc_atom(&E, SERTRACE_TAG_FLOAT, 3, 0, 5, 0, 40, 9);
    enc_exit(&E, 2, 60);
    enc_exit(&E, 1, 70);
    flush(1, 2, 1);
    cr_assert_eq(sertrace_core_dump_end(C, 1, 1, 0, 2, 73, 0), 0);
    rdump *d = &R->dumps[R->ndumps - 1];
    cr_assert_eq(d->st.lost_enters, 2);
    cr_assert_not(d->complete);
    const rnode *fl = find_node(3, SERTRACE_TAG_FLOAT);
    cr_assert_not_null(fl);
    cr_assert_eq(fl->bytes, 9);
    cr_assert_eq(fl->flags & SERTRACE_NODE_NO_ENTER, 0, "the atom itself was seen");
}

Test(core, malformed_atom_truncated)
{
    uint8_t b[] = {SERTRACE_REC_ATOM, SERTRACE_TAG_INT, 1, 0, 0x10, 0, 2};
    one_malformed(b, sizeof b);
}

Test(core, malformed_atom_end_beyond_64_bits)
{
    enc_atom(&E, SERTRACE_TAG_INT, 1, 0, 1, 0, UINT64_MAX - 3, 10);
    one_malformed(E.buf, E.n);
    enc_reset(&E);
}
