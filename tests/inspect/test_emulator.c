/* test_emulator.c -- Criterion unit tests of the pickle emulator (inspect/).
 *
 * Hand-written pickles (bytes as CPython writes them, checked against
 * pickletools) go through sertrace_inspect_run() into the real tree core,
 * with a visitor that records every closed node (tag, depth, bytes, type
 * name): node boundaries, frame accounting, memo nodes, the positions of
 * reduce parts, and every error path (truncation, bad stack, limits).
 * Suite 'unit': also run under ASan+UBSan.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "inspect.h"

typedef struct seen {
    uint8_t tag;
    uint32_t depth;
    uint64_t bytes;
    uint64_t addr; /* the object number the emulator gives as address */
    char type[64];
} seen;

typedef struct rec {
    seen nodes[256];
    unsigned n;      /* nodes closed, in close order (post-order) */
    uint64_t closed; /* all nodes closed */
    seen last;       /* the last node closed */
    unsigned aborts; /* dumps dropped by the emulator (streaming) */
    unsigned dumps;
    uint64_t payload[8];
    int protocol[8];
} rec;

static int on_exit_(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    rec *r = ctx;
    size_t len;
    const char *name = sertrace_core_type_name(d, n->type, &len);
    r->closed++;
    r->last.tag = n->tag;
    r->last.depth = n->depth;
    r->last.bytes = n->bytes;
    if (r->n < 256) {
        seen *s = &r->nodes[r->n++];
        s->tag = n->tag;
        s->depth = n->depth;
        s->bytes = n->bytes;
        s->addr = n->addr;
        snprintf(s->type, sizeof s->type, "%.*s", name ? (int)len : 0, name ? name : "");
    }
    return 0;
}

static int on_close(void *ctx, sertrace_dump_state *d)
{
    rec *r = ctx;
    if (r->dumps < 8) {
        r->payload[r->dumps] = d->payload_bytes;
        r->protocol[r->dumps] = d->protocol;
    }
    r->dumps++;
    return 0;
}

static int on_abort(void *ctx, sertrace_dump_state *d)
{
    rec *r = ctx;
    (void)d;
    r->aborts++;
    r->closed = 0; /* what the dropped dump closed does not count */
    r->n = 0;
    return 0;
}

static int run(const void *data, size_t n, rec *r, sertrace_inspect_result *res,
               const sertrace_inspect_limits *lim)
{
    sertrace_core_visitor v = {0};
    memset(r, 0, sizeof *r);
    v.ctx = r;
    v.node_exit = on_exit_;
    v.dump_close = on_close;
    v.dump_abort = on_abort;
    sertrace_core *c = sertrace_core_create(&v);
    cr_assert(c);
    int rc = sertrace_inspect_run(data, n, lim, c, res);
    cr_assert_eq(sertrace_core_finish(c), 0);
    sertrace_core_destroy(c);
    return rc;
}

#define P(s) s, sizeof(s) - 1

Test(emulator, list_protocol4_frame_outside_root)
{
    /* pickle.dumps([[1, 2], (3, 4), {'a': 1}], 4) */
    static const char b[] =
        "\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01]\x94(K\x02K\x03"
        "eK"
        "\x04K\x05\x86\x94}\x94\x8c\x01"
        "a\x94K\x01se.";
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(P(b), &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.dumps, 1);
    cr_assert_eq(r.payload[0], sizeof b - 1);
    cr_assert_eq(r.protocol[0], 4);
    cr_assert_eq(r.n, 4);
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_LIST);
    cr_assert_eq(r.nodes[0].bytes, 8);
    cr_assert_eq(r.nodes[1].tag, SERTRACE_TAG_TUPLE);
    cr_assert_eq(r.nodes[1].bytes, 6);
    cr_assert_eq(r.nodes[2].tag, SERTRACE_TAG_DICT);
    cr_assert_eq(r.nodes[2].bytes, 9);
    cr_assert_eq(r.nodes[3].depth, 1);
    /* PROTO 2 + FRAME 9 + STOP 1 outside the root */
    cr_assert_eq(r.nodes[3].bytes, sizeof b - 1 - 12);
    cr_assert_str_eq(r.nodes[3].type, "list");
}

Test(emulator, instance_newobj_parts)
{
    /* class P (module __main__) with a = [1, 2], protocol 4, no frame */
    static const char b[] =
        "\x80\x04\x8c\x08__main__\x94\x8c\x01P\x94\x93\x94)\x81\x94}\x94\x8c\x01"
        "a\x94]\x94(K\x01K\x02"
        "esb.";
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(P(b), &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    /* G (17 B: two strings, their MEMOIZEs, STACK_GLOBAL, MEMOIZE), Tu, L, D2, O */
    cr_assert_eq(r.n, 5);
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_GLOBAL);
    cr_assert_eq(r.nodes[0].bytes, 17);
    cr_assert_str_eq(r.nodes[0].type, "__main__.P");
    cr_assert_eq(r.nodes[1].tag, SERTRACE_TAG_TUPLE);
    cr_assert_eq(r.nodes[1].bytes, 1);
    cr_assert_eq(r.nodes[2].tag, SERTRACE_TAG_LIST);
    cr_assert_eq(r.nodes[3].tag, SERTRACE_TAG_DICT);
    cr_assert_eq(r.nodes[4].tag, SERTRACE_TAG_INSTANCE);
    cr_assert_str_eq(r.nodes[4].type, "__main__.P");
    cr_assert_eq(r.nodes[4].bytes, sizeof b - 1 - 3);
}

Test(emulator, memo_hits_are_nodes_of_containers_only)
{
    /* l = [1]; dumps([l, l, 's', 's'], 2) */
    static const char b[] = "\x80\x02]q\x00(]q\x01K\x01"
                            "ah\x01X\x01\x00\x00\x00sq\x02h\x02"
                            "e.";
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(P(b), &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.n, 3); /* inner L, one Mo (the str's GET is no node), outer L */
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_LIST);
    cr_assert_eq(r.nodes[0].bytes, 6);
    cr_assert_eq(r.nodes[1].tag, SERTRACE_TAG_MEMO);
    cr_assert_eq(r.nodes[1].bytes, 2);
    /* identities: the reference carries its target's number; an object
     * no reference points to gets none (the summary keeps one entry per
     * object with an address) */
    cr_assert_neq(r.nodes[0].addr, 0);
    cr_assert_eq(r.nodes[1].addr, r.nodes[0].addr);
    cr_assert_eq(r.nodes[2].addr, 0);
    cr_assert_str_eq(r.nodes[1].type, "list");
}

Test(emulator, bytes_through_encode_is_one_atom)
{
    /* [b'abc'] at protocol 2: _codecs.encode('abc', 'latin1') inside a list */
    static const char b[] = "\x80\x02]q\x00"
                            "c_codecs\nencode\nq\x01X\x03\x00\x00\x00"
                            "abcq\x02X\x06"
                            "\x00\x00\x00latin1q\x03\x86q\x04Rq\x05"
                            "a.";
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(P(b), &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_LIST);
    cr_assert_eq(r.nodes[0].bytes, sizeof b - 1 - 3);
}

Test(emulator, back_to_back_and_protocols)
{
    static const char b[] = "N.\x80\x02]q\x00.(l.";
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(P(b), &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.dumps, 3);
    cr_assert_eq(r.payload[0], 2);
    cr_assert_eq(r.payload[1], 6);
    cr_assert_eq(r.payload[2], 3);
    cr_assert_eq(r.protocol[0], 0);
    cr_assert_eq(r.protocol[1], 2);
    cr_assert_eq(r.protocol[2], 0);
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_ATOM); /* the root atom is a node */
    cr_assert_eq(r.nodes[0].bytes, 1);
}

Test(emulator, frame_committed_before_unframed_payload)
{
    /* [b'x' * 70000, []] at protocol 4: the first frame (EMPTY_LIST,
     * MEMOIZE, MARK) is committed before the 70000-byte BINBYTES, which is
     * written outside any frame; the rest is in a second frame. */
    static unsigned char b[70100];
    size_t n = 0;
    memcpy(b + n, "\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00]\x94(", 14);
    n += 14;
    b[n++] = 'B';
    b[n++] = 0x70;
    b[n++] = 0x11;
    b[n++] = 0x01;
    b[n++] = 0x00; /* 70000 */
    memset(b + n, 'x', 70000);
    n += 70000;
    memcpy(b + n,
           "\x94\x95\x04\x00\x00\x00\x00\x00\x00\x00]\x94"
           "e.",
           14);
    n += 14;
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(b, n, &r, &res, NULL), SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.nodes[0].bytes, 2);
    /* every byte but PROTO, STOP and the header of the frame holding STOP */
    cr_assert_eq(r.nodes[1].bytes, n - 2 - 1 - 9);
}

static void inconclusive(const void *b, size_t n, int status, const char *needle,
                         const sertrace_inspect_limits *lim)
{
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(b, n, &r, &res, lim), status, "got %d (%s)", res.status, res.reason);
    cr_assert(strstr(res.reason, needle), "reason '%s' lacks '%s'", res.reason, needle);
}

Test(emulator, malformed_inputs)
{
    inconclusive(P("\x80\x04"), SERTRACE_INSPECT_MALFORMED, "before STOP", NULL);
    inconclusive(P("\x80\x04X\xff\xff\xff\x7f"), SERTRACE_INSPECT_MALFORMED, "declared length",
                 NULL);
    inconclusive(P("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff."), SERTRACE_INSPECT_MALFORMED,
                 "declared length", NULL);
    inconclusive(P("\x80\x04"
                   "a."),
                 SERTRACE_INSPECT_MALFORMED, "underflow", NULL);
    inconclusive(P("\x80\x04"
                   "e."),
                 SERTRACE_INSPECT_MALFORMED, "MARK", NULL);
    inconclusive(P("\x80\x04h\x05."), SERTRACE_INSPECT_MALFORMED, "memo key 5", NULL);
    inconclusive(P("\x80\x04\xfe."), SERTRACE_INSPECT_MALFORMED, "unknown opcode 0xfe", NULL);
    inconclusive(P("cos\nsystem"), SERTRACE_INSPECT_MALFORMED, "end of line", NULL);
    inconclusive(P("\x80\x04K\x01\x93."), SERTRACE_INSPECT_MALFORMED, "underflow", NULL);
    inconclusive(P("\x80\x04K\x01K\x02\x93."), SERTRACE_INSPECT_MALFORMED, "strings", NULL);
    inconclusive(P("\x80\x04NN."), SERTRACE_INSPECT_MALFORMED, "exactly one", NULL);
    inconclusive(P("\x80\x04(N."), SERTRACE_INSPECT_MALFORMED, "MARK", NULL);
    inconclusive(P("\x80\x04\x95\x01\x00\x00\x00\x00\x00\x00\x00K\x01."),
                 SERTRACE_INSPECT_MALFORMED, "straddles", NULL);
    inconclusive(P("\x80\x07N."), SERTRACE_INSPECT_MALFORMED, "protocol 7", NULL);
    inconclusive(P("pxx\nN."), SERTRACE_INSPECT_MALFORMED, "decimal", NULL);
}

Test(emulator, limits)
{
    static unsigned char deep[4000];
    size_t n = 0;
    deep[n++] = 0x80;
    deep[n++] = 4;
    for (int i = 0; i < 1000; i++)
        deep[n++] = ']';
    for (int i = 0; i < 999; i++)
        deep[n++] = 'a';
    deep[n++] = '.';
    sertrace_inspect_limits lim = {1u << 30, 500, false, 0};
    inconclusive(deep, n, SERTRACE_INSPECT_LIMIT, "deeper than 500", &lim);
    lim.max_depth = 1000;
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run(deep, n, &r, &res, &lim), SERTRACE_INSPECT_OK, "%s", res.reason);
    lim.max_memory = 4096;
    inconclusive(deep, n, SERTRACE_INSPECT_LIMIT, "memory limit", &lim);
}

Test(emulator, empty_input_is_no_dump)
{
    rec r;
    sertrace_inspect_result res;
    cr_assert_eq(run("", 0, &r, &res, NULL), SERTRACE_INSPECT_OK);
    cr_assert_eq(r.dumps, 0);
}

/* t = (t, [1]) nested n times from (), protocol 2: each tuple's node is
 * created after every node inside it, so nesting them by insertion takes
 * ~n^2 moves: sort_nested orders them by its stack of groups, and with
 * SERTRACE_INSPECT_NO_FAST=1 (it off) the insertion sort goes past its
 * budget and the radix sort orders them.  Both must give: (), then per
 * level the list and the tuple. */
static void nested_after_parts(bool general)
{
    enum { N = 120 };
    char b[2 + 1 + N * 5 + 1];
    size_t k = 0;
    b[k++] = '\x80';
    b[k++] = 2;
    b[k++] = ')';
    for (int i = 0; i < N; i++) {
        memcpy(b + k,
               "]K\x01"
               "a\x86",
               5); /* EMPTY_LIST BININT1 1 APPEND TUPLE2 */
        k += 5;
    }
    b[k++] = '.';
    rec r;
    sertrace_inspect_result res;
    if (general)
        setenv("SERTRACE_INSPECT_NO_FAST", "1", 1);
    int rc = run(b, k, &r, &res, NULL);
    unsetenv("SERTRACE_INSPECT_NO_FAST");
    cr_assert_eq(rc, SERTRACE_INSPECT_OK, "%s", res.reason);
    cr_assert_eq(r.n, 1 + 2 * N);
    cr_assert_eq(r.nodes[0].tag, SERTRACE_TAG_TUPLE);
    cr_assert_eq(r.nodes[0].depth, N + 1);
    cr_assert_eq(r.nodes[0].bytes, 1);
    for (unsigned lvl = 1; lvl <= N; lvl++) {
        const seen *l = &r.nodes[2 * lvl - 1], *t = &r.nodes[2 * lvl];
        cr_assert_eq(l->tag, SERTRACE_TAG_LIST, "level %u", lvl);
        cr_assert_eq(l->depth, N + 2 - lvl, "level %u", lvl);
        cr_assert_eq(l->bytes, 4);
        cr_assert_eq(t->tag, SERTRACE_TAG_TUPLE, "level %u", lvl);
        cr_assert_eq(t->depth, N + 1 - lvl, "level %u", lvl);
        cr_assert_eq(t->bytes, 1 + 5 * lvl, "level %u", lvl);
    }
    cr_assert_eq(r.payload[0], k);
}

Test(emulator, nodes_created_after_their_parts_deeply)
{
    nested_after_parts(false);
    nested_after_parts(true);
}

/* [(1, 2)] * 200 000, protocol 4 without memo nor frames, in APPENDS batches
 * of 1 000; `wrap`: then TUPLE1 around the list.  Returns its length. */
static size_t tuples_pickle(char *b, bool wrap)
{
    size_t k = 0;
    b[k++] = '\x80';
    b[k++] = 4;
    b[k++] = ']';
    for (int i = 0; i < 200; i++) {
        b[k++] = '(';
        for (int j = 0; j < 1000; j++) {
            memcpy(b + k, "K\x01K\x02\x86", 5);
            k += 5;
        }
        b[k++] = 'e';
    }
    if (wrap)
        b[k++] = '\x85';
    b[k++] = '.';
    return k;
}

/* Streaming (README "Streaming"): a list root's finished items go to the
 * core batch by batch and are dropped, so the emulator's tables stay
 * small, and the core sees the same nodes as when the pickle is read
 * whole.  A root wrapped after its items (TUPLE1) is seen by the walk
 * ahead: the tuple is a level of the chain, entered before the list and
 * completed at TUPLE1, streamed too (no dump dropped). */
Test(emulator, streaming_keeps_the_tables_small_and_the_nodes_the_same)
{
    char *b = malloc(2 + 1 + 200 * 5002 + 2);
    cr_assert(b);
    for (int wrap = 0; wrap < 2; wrap++) {
        size_t n = tuples_pickle(b, wrap);
        sertrace_inspect_limits whole = {1u << 30, 1000, false, UINT32_MAX};
        /* 8 MiB: also drops the tables the thread kept from the run before */
        sertrace_inspect_limits streamed = {8u << 20, 1000, false, 0};
        rec a, c;
        sertrace_inspect_result ra, rc;
        /* streamed first: a run keeps its tables for the next one on the
         * thread, counted in that run's memory */
        cr_assert_eq(run(b, n, &c, &rc, &streamed), SERTRACE_INSPECT_OK, "%s", rc.reason);
        cr_assert_eq(run(b, n, &a, &ra, &whole), SERTRACE_INSPECT_OK, "%s", ra.reason);
        cr_assert_eq(a.dumps, 1);
        cr_assert_eq(c.dumps, 1);
        cr_assert_eq(a.aborts, 0);
        cr_assert_eq(c.aborts, 0); /* wrapped: a tuple level, not read again */
        cr_assert_eq(a.closed, (uint64_t)(200001 + wrap));
        cr_assert_eq(c.closed, a.closed);
        cr_assert_eq(rc.nodes, ra.nodes);
        cr_assert_eq(c.payload[0], n);
        cr_assert_eq(c.last.depth, 1);
        cr_assert_eq(c.last.bytes, a.last.bytes);
        cr_assert_eq(c.last.tag, wrap ? SERTRACE_TAG_TUPLE : SERTRACE_TAG_LIST);
        for (unsigned i = 0; i < 256; i++) /* the first nodes closed, alike */
            cr_assert(a.nodes[i].tag == c.nodes[i].tag && a.nodes[i].bytes == c.nodes[i].bytes &&
                          a.nodes[i].depth == c.nodes[i].depth,
                      "node %u", i);
        /* whole: ~64 B per node; streamed: 4 096 nodes and a batch */
        cr_assert_lt(rc.peak_memory * 20, ra.peak_memory, "%llu vs %llu",
                     (unsigned long long)rc.peak_memory, (unsigned long long)ra.peak_memory);
    }
    free(b);
}

/* Big groups (README "Streaming", big groups): protocol 4, a MARK, 200 000
 * pairs (1, 2) (`ints`: 200 000 BININT1), then `end` (TUPLE, FROZENSET).
 * Returns its length. */
static size_t group_pickle(char *b, char end, bool ints)
{
    size_t k = 0;
    b[k++] = '\x80';
    b[k++] = 4;
    b[k++] = '(';
    for (int i = 0; i < 200000; i++) {
        memcpy(b + k, ints ? "K\x01" : "K\x01K\x02\x86", ints ? 2 : 5);
        k += ints ? 2 : 5;
    }
    b[k++] = end;
    b[k++] = '.';
    return k;
}

/* A big tuple's or frozenset's elements are fed as they come and taken off
 * the stack (emu_stream_group, compact_group): the emulator's tables stay
 * small, the core sees the same nodes as read whole, no dump dropped; a
 * tuple of 200 000 ints read whole (nothing streams) pushes no item per
 * int (the atoms' loop, batch_container). */
Test(emulator, big_groups_keep_the_tables_small_and_the_nodes_the_same)
{
    char *b = malloc(3 + 200000 * 5 + 2);
    cr_assert(b);
    for (int fs = 0; fs < 2; fs++) {
        size_t n = group_pickle(b, fs ? '\x91' : 't', false);
        sertrace_inspect_limits whole = {1u << 30, 1000, false, UINT32_MAX};
        sertrace_inspect_limits streamed = {8u << 20, 1000, false, 0};
        rec a, c;
        sertrace_inspect_result ra, rc;
        cr_assert_eq(run(b, n, &c, &rc, &streamed), SERTRACE_INSPECT_OK, "%s", rc.reason);
        cr_assert_eq(run(b, n, &a, &ra, &whole), SERTRACE_INSPECT_OK, "%s", ra.reason);
        cr_assert_eq(c.dumps, 1);
        cr_assert_eq(c.aborts, 0);
        cr_assert_eq(a.closed, 200001u);
        cr_assert_eq(c.closed, a.closed);
        cr_assert_eq(rc.nodes, ra.nodes);
        cr_assert_eq(c.last.depth, 1);
        cr_assert_eq(c.last.bytes, a.last.bytes);
        cr_assert_eq(c.last.tag, fs ? SERTRACE_TAG_FROZENSET : SERTRACE_TAG_TUPLE);
        for (unsigned i = 0; i < 256; i++)
            cr_assert(a.nodes[i].tag == c.nodes[i].tag && a.nodes[i].bytes == c.nodes[i].bytes &&
                          a.nodes[i].depth == c.nodes[i].depth,
                      "node %u", i);
        /* whole: an item (112 B) and a node per pair */
        cr_assert_lt(rc.peak_memory * 20, ra.peak_memory, "%llu vs %llu",
                     (unsigned long long)rc.peak_memory, (unsigned long long)ra.peak_memory);
    }
    {
        size_t n = group_pickle(b, 't', true);
        sertrace_inspect_limits whole = {8u << 20, 1000, false, UINT32_MAX};
        rec a;
        sertrace_inspect_result ra;
        cr_assert_eq(run(b, n, &a, &ra, &whole), SERTRACE_INSPECT_OK, "%s", ra.reason);
        cr_assert_eq(a.closed, 1u);
        cr_assert_eq(a.last.bytes, n - 3); /* PROTO, STOP */
        cr_assert_lt(ra.peak_memory, 1u << 20, "%llu", (unsigned long long)ra.peak_memory);
    }
    free(b);
}

/* The roots streaming reads as a chain of open containers (README
 * "Streaming"): 200 000 tuples (1, 2) in APPENDS batches of 1 000 in a
 * list that is, by `shape`: 0 State().__dict__['items'] (NEWOBJ, a state
 * dict, BUILD), 1 {'data': list} (one SETITEM), 2 {'data': (list,)} (a
 * TUPLE1 after the list's last batch: a tuple level, found by the walk
 * ahead), 3 [{'a': 1, 'data': list, 'b': [2]}] (a list root, a dict in
 * it, SETITEMS), 4 State() whose state dict is POPped and replaced (the
 * walk ahead sees the POP: not a chain, never streamed), 5 a list
 * subclass LS() (NEWOBJ) given the batches itself (its It node, a level
 * of the chain), 6 an OrderedDict (REDUCE) given SETITEMS batches of
 * 1 000 pairs, int key to tuple.  Protocol 4, no memo, no frames.  Returns
 * the pickle's length. */
static size_t chain_pickle(char *b, int shape)
{
    size_t k = 0;
#define PUT(s)                                                                                     \
    do {                                                                                           \
        memcpy(b + k, s, sizeof(s) - 1);                                                           \
        k += sizeof(s) - 1;                                                                        \
    } while (0)
    PUT("\x80\x04");
    if (shape == 0 || shape == 4)
        PUT("\x8c\x08__main__\x8c\x05State\x93)\x81}(\x8c\x05items");
    else if (shape == 5)
        PUT("\x8c\x08__main__\x8c\x02LS\x93)\x81");
    else if (shape == 6)
        PUT("\x8c\x0b"
            "collections\x8c\x0bOrderedDict\x93)R");
    else if (shape == 1 || shape == 2)
        PUT("}\x8c\x04"
            "data");
    else
        PUT("](}(\x8c\x01"
            "aK\x01\x8c\x04"
            "data");
    if (shape < 5)
        PUT("]");
    for (int i = 0; i < 200; i++) {
        b[k++] = '(';
        for (int j = 0; j < 1000; j++) {
            if (shape == 6)
                PUT("K\x01");
            PUT("K\x01K\x02\x86");
        }
        b[k++] = shape == 6 ? 'u' : 'e';
    }
    if (shape == 0)
        PUT("\x8c\x04name\x8c\x01su" /* SETITEMS */ "b");
    else if (shape == 4)
        PUT("\x8c\x04name\x8c\x01su0}b"); /* POP the state, BUILD with {} */
    else if (shape == 1)
        PUT("s");
    else if (shape == 2)
        PUT("\x85s");
    else if (shape < 5)
        PUT("\x8c\x01"
            "b]K\x02"
            "aue");
#undef PUT
    b[k++] = '.';
    return k;
}

Test(emulator, streaming_instance_and_dict_roots_through_their_open_containers)
{
    static const uint8_t root_tag[] = {
        SERTRACE_TAG_INSTANCE, SERTRACE_TAG_DICT,     SERTRACE_TAG_DICT,  SERTRACE_TAG_LIST,
        SERTRACE_TAG_INSTANCE, SERTRACE_TAG_INSTANCE, SERTRACE_TAG_REDUCE};
    /* beside the tuples and the list (5, 6: the It node stands for it) */
    static const unsigned extra_nodes[] = {4, 1, 2, 3, 5, 3, 3};
    char *b = malloc(64 + 200 * 7002 + 64);
    cr_assert(b);
    for (int shape = 0; shape < 7; shape++) {
        size_t n = chain_pickle(b, shape);
        bool wrong = shape == 4; /* not streamed */
        sertrace_inspect_limits whole = {1u << 30, 1000, false, UINT32_MAX};
        /* a streamed run fits in 8 MiB (which also drops the tables the
         * thread kept from the whole run before) */
        sertrace_inspect_limits streamed = {wrong ? 1u << 30 : 8u << 20, 1000, false, 0};
        rec a, c;
        sertrace_inspect_result ra, rc;
        cr_assert_eq(run(b, n, &c, &rc, &streamed), SERTRACE_INSPECT_OK, "%d: %s", shape,
                     rc.reason);
        cr_assert_eq(run(b, n, &a, &ra, &whole), SERTRACE_INSPECT_OK, "%d: %s", shape, ra.reason);
        cr_assert_eq(a.dumps, 1);
        cr_assert_eq(c.dumps, 1);
        cr_assert_eq(a.aborts, 0);
        cr_assert_eq(c.aborts, 0, "shape %d", shape); /* none read again */
        cr_assert_eq(a.closed, (uint64_t)(200001 + extra_nodes[shape]), "shape %d: %llu", shape,
                     (unsigned long long)a.closed);
        cr_assert_eq(c.closed, a.closed, "shape %d", shape);
        cr_assert_eq(rc.nodes, ra.nodes);
        cr_assert_eq(c.payload[0], n);
        cr_assert_eq(c.last.depth, 1);
        cr_assert_eq(c.last.tag, root_tag[shape]);
        cr_assert_eq(c.last.bytes, a.last.bytes);
        cr_assert_eq(c.last.bytes, n - 3, "shape %d", shape); /* PROTO and STOP outside */
        for (unsigned i = 0; i < 256; i++)                    /* the first nodes closed, alike */
            cr_assert(a.nodes[i].tag == c.nodes[i].tag && a.nodes[i].bytes == c.nodes[i].bytes &&
                          a.nodes[i].depth == c.nodes[i].depth,
                      "shape %d node %u", shape, i);
        if (!wrong) /* whole: ~64 B per node; streamed: 4 096 nodes and a batch */
            cr_assert_lt(rc.peak_memory * 20, ra.peak_memory, "shape %d: %llu vs %llu", shape,
                         (unsigned long long)rc.peak_memory, (unsigned long long)ra.peak_memory);
    }
    free(b);
}
