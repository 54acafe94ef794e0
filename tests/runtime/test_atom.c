/* test_atom.c -- the ATOM record (schema v4, written since v6 as a NODE
 * record with its atom bit) from the runtime to the tree core, and on the
 * live text tree.
 *
 * sertrace_atom() must give exactly the node that sertrace_enter() followed
 * at once by sertrace_exit() gives, everywhere: the same nodes out of the
 * analyzers' core (analyzers/core), the same lines on the text tree, the
 * same misuse handling (depth cap).  So every test writes one scenario
 * twice, once with enter/exit pairs for its leaves and once with ATOM
 * records, and compares what comes out; the record itself is decoded by
 * hand from schema.h (v6 NODE 0x11: tag, depth, type, address delta,
 * length, position delta, bytes) so the layout is checked too.  (Streams
 * of the older layouts, v1-v5, are tests/core's.)
 *
 * Lives beside test_runtime.c (which has its own decoder) as a separate
 * executable because it links the core as well as the runtime. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "runtime-internal.h"
#include "sertrace/sertrace.h"

/* ---- capture: every batch of every dump, as the events would carry them */

#define CAP_BYTES (1u << 20)
#define CAP_BATCHES 1024

static struct capture {
    uint8_t bytes[CAP_BYTES];
    size_t len;
    struct {
        uint64_t dump_id;
        uint32_t seq, off, len;
    } batch[CAP_BATCHES];
    size_t nbatch;
    uint64_t end_bytes;
    uint8_t end_status;
} cap;

static void cap_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *b, uint32_t n)
{
    (void)ctx;
    cr_assert_lt(cap.nbatch, CAP_BATCHES);
    cr_assert_leq(cap.len + n, CAP_BYTES);
    memcpy(cap.bytes + cap.len, b, n);
    cap.batch[cap.nbatch].dump_id = id;
    cap.batch[cap.nbatch].seq = seq;
    cap.batch[cap.nbatch].off = (uint32_t)cap.len;
    cap.batch[cap.nbatch].len = n;
    cap.nbatch++;
    cap.len += n;
}

static void cap_end(void *ctx, uint64_t id, uint64_t bytes, uint8_t status)
{
    (void)ctx;
    (void)id;
    cap.end_bytes = bytes;
    cap.end_status = status;
}

static void setup(void)
{
    struct sertrace_internal_hooks h = {0};
    memset(&cap, 0, sizeof cap);
    h.records = cap_records;
    h.dump_end = cap_end;
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1);
    sertrace_internal_set_hooks(&h);
}

static void teardown(void)
{
    sertrace_internal_set_hooks(NULL);
    sertrace_internal_set_max_depth(0);
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1);
}

/* ---- the scenario ------------------------------------------------------ */

static const int k_list, k_int, k_str, k_tuple;

/* A leaf: one ATOM, or the ENTER/EXIT pair it replaces. */
static void leaf(sertrace_dump *d, int atom, uint8_t tag, uint32_t type, uintptr_t addr,
                 uint64_t length, uint64_t pos, uint64_t end)
{
    if (atom) {
        sertrace_atom(d, tag, type, addr, length, pos, end);
    } else {
        sertrace_enter(d, tag, type, addr, length, pos);
        sertrace_exit(d, end);
    }
}

/* [1, 'abc', (7, <memo ref>), big] with made-up but consistent positions:
 * PROTO (2 bytes) then the list from 2 to 2 + 1 + ... ; nodes chosen so
 * that varints of one and several bytes both occur (an address above
 * 2^32, a position above 2^14 for the last leaf). */
static void scenario(int atom)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d, "the hooks make every dump record");
    uint32_t tl = sertrace_type(d, &k_list, "list");
    uint32_t ti = sertrace_type(d, &k_int, "int");
    uint32_t ts = sertrace_type(d, &k_str, "str");
    uint32_t tt = sertrace_type(d, &k_tuple, "tuple");
    sertrace_enter(d, SERTRACE_TAG_LIST, tl, 0x7f0000001000u, 5, 2);
    leaf(d, atom, SERTRACE_TAG_INT, ti, 0x7f0000002000u, 0, 4, 6);
    leaf(d, atom, SERTRACE_TAG_STR, ts, 0x7f0000003000u, 4, 6, 12);
    sertrace_enter(d, SERTRACE_TAG_TUPLE, tt, 0x7f0000004000u, 3, 12);
    leaf(d, atom, SERTRACE_TAG_INT, ti, 0x7f0000005000u, 0, 12, 14);
    leaf(d, atom, SERTRACE_TAG_MEMO, ts, 0x7f0000003000u, 0, 14, 16);
    sertrace_exit(d, 17);
    leaf(d, atom, SERTRACE_TAG_STR, ts, 0x7f0000006000u, 20001, 17, 20023);
    sertrace_exit(d, 20025);
    sertrace_dump_end(d, 20026, SERTRACE_STATUS_OK);
}

/* ---- through the core ---------------------------------------------------- */

typedef struct {
    uint8_t tag;
    uint32_t depth, type;
    uint64_t addr, length, enter_pos, bytes, self;
    uint16_t flags;
} seen_node;

typedef struct {
    seen_node v[64];
    size_t n;
    sertrace_dump_state end; /* at close (counters only) */
    int closed;
} seen;

static int v_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    seen *s = ctx;
    cr_assert_lt(s->n, 64);
    s->v[s->n++] = (seen_node){n->tag,       n->depth, n->type, n->addr, n->length,
                               n->enter_pos, n->bytes, n->self, n->flags};
    return 0;
}

static int v_close(void *ctx, sertrace_dump_state *d)
{
    seen *s = ctx;
    s->end = *d;
    s->closed++;
    return 0;
}

/* Feed a capture's dump to core `c` as the events would: dump_begin, one
 * records call per batch, dump_end_batches with the batch count. */
static void feed_capture(sertrace_core *c, const struct capture *k)
{
    uint64_t id = k->nbatch ? k->batch[0].dump_id : 1;
    cr_assert_eq(sertrace_core_dump_begin(c, 1, 1, 0, id, "pickle", 6, 4), 0);
    for (size_t i = 0; i < k->nbatch; i++)
        cr_assert_eq(sertrace_core_records(c, 1, 1, 1, k->batch[i].dump_id, k->batch[i].seq,
                                           k->bytes + k->batch[i].off, k->batch[i].len),
                     0);
    cr_assert_eq(sertrace_core_dump_end_batches(c, 1, 1, 2, id, k->end_bytes, k->end_status,
                                                (int64_t)k->nbatch),
                 0);
}

/* Feed what was captured to a fresh core. */
static seen through_core(void)
{
    seen s = {0};
    sertrace_core_visitor v = {.ctx = &s, .node_exit = v_exit, .dump_close = v_close};
    sertrace_core *c = sertrace_core_create(&v);
    cr_assert_not_null(c);
    feed_capture(c, &cap);
    sertrace_core_destroy(c);
    return s;
}

static int count_op(uint8_t op, int *other)
{
    /* Walk the records by their layout (schema.h) and count `op`: the
     * v6 and v7 records by what they stand for (a NODE as ENTER or ATOM,
     * a SATOM as ATOM, EXIT_D as EXIT). */
    int n = 0;
    *other = 0;
    for (size_t k = 0; k < cap.nbatch; k++) {
        const uint8_t *p = cap.bytes + cap.batch[k].off, *e = p + cap.batch[k].len;
        while (p < e) {
            uint8_t o = *p++;
            int varints = 0, strs = 0, u8 = 0;
            if (o >= 0x40 && o <= 0x7f) { /* v8 TATOM: 6 or 8 fixed bytes */
                u8 = (o & 0x20) ? 8 : 6;
                varints = (o & 1) + (((o >> 1) & 7) != 0);
                o = SERTRACE_REC_ATOM;
            } else if (o == SERTRACE_REC_DEPTH) { /* v8 */
                varints = 1;
            } else if (o >= 0x20 && o <= 0x2f) { /* v7 SATOM: 9 fixed bytes */
                u8 = 9;
                varints = (o & 1) + (((o >> 1) & 7) != 0);
                o = SERTRACE_REC_ATOM;
            } else if (o >= 0x10 && o <= 0x1f) { /* NODE */
                u8 = 1;
                varints = 5 + (o & 1) + (((o >> 1) & 7) != 0);
                o = (o & 1) ? SERTRACE_REC_ATOM : SERTRACE_REC_ENTER;
            } else if (o == 0x0a) { /* EXIT_D */
                varints = 2;
                o = SERTRACE_REC_EXIT;
            } else
                switch (o) {
                case SERTRACE_REC_ENTER:
                    u8 = 1;
                    varints = 5;
                    break;
                case SERTRACE_REC_EXIT:
                    varints = 2;
                    break;
                case SERTRACE_REC_TYPE:
                    varints = 1;
                    strs = 1;
                    break;
                case SERTRACE_REC_ERROR:
                    u8 = 1;
                    varints = 2;
                    strs = 2;
                    break;
                case SERTRACE_REC_NOTE:
                    varints = 1;
                    strs = 2;
                    break;
                case SERTRACE_REC_ATOM:
                    u8 = 1;
                    varints = 6;
                    break;
                default:
                    cr_assert_fail("unknown opcode %u", o);
                }
            p += u8;
            for (int i = 0; i < varints + strs; i++) {
                uint64_t v = 0;
                unsigned sh = 0;
                while (*p & 0x80)
                    v |= (uint64_t)(*p++ & 0x7f) << sh, sh += 7;
                v |= (uint64_t)*p++ << sh;
                if (i >= varints)
                    p += v;
            }
            if (o == op)
                n++;
            else if (o != SERTRACE_REC_TYPE)
                (*other)++;
        }
        cr_assert_eq(p, e, "records end on the batch boundary");
    }
    return n;
}

TestSuite(atom, .init = setup, .fini = teardown);

Test(atom, same_nodes_through_the_core_as_enter_exit_pairs)
{
    scenario(0);
    int other;
    cr_expect_eq(count_op(SERTRACE_REC_ATOM, &other), 0);
    size_t pair_bytes = cap.len;
    seen pairs = through_core();

    setup();
    scenario(1);
    cr_expect_eq(count_op(SERTRACE_REC_ATOM, &other), 5, "one ATOM per leaf");
    cr_expect_eq(other, 4, "the two containers keep their ENTER and EXIT");
    cr_expect_lt(cap.len, pair_bytes, "ATOM records are shorter than the pairs");
    seen atoms = through_core();

    cr_assert_eq(pairs.closed, 1);
    cr_assert_eq(atoms.closed, 1);
    cr_assert_eq(atoms.n, 7);
    cr_assert_eq(pairs.n, atoms.n);
    for (size_t i = 0; i < atoms.n; i++) {
        const seen_node *a = &atoms.v[i], *b = &pairs.v[i];
        cr_expect_eq(a->tag, b->tag, "node %zu tag", i);
        cr_expect_eq(a->depth, b->depth, "node %zu depth", i);
        cr_expect_eq(a->type, b->type, "node %zu type", i);
        cr_expect_eq(a->addr, b->addr, "node %zu addr", i);
        cr_expect_eq(a->length, b->length, "node %zu length", i);
        cr_expect_eq(a->enter_pos, b->enter_pos, "node %zu pos", i);
        cr_expect_eq(a->bytes, b->bytes, "node %zu bytes", i);
        cr_expect_eq(a->self, b->self, "node %zu self", i);
        cr_expect_eq(a->flags, b->flags, "node %zu flags", i);
    }
    /* And the sizes are the scenario's, exactly (exit order). */
    static const uint64_t bytes[] = {2, 6, 2, 2, 5, 20006, 20023};
    static const uint8_t tags[] = {SERTRACE_TAG_INT,  SERTRACE_TAG_STR,   SERTRACE_TAG_INT,
                                   SERTRACE_TAG_MEMO, SERTRACE_TAG_TUPLE, SERTRACE_TAG_STR,
                                   SERTRACE_TAG_LIST};
    for (size_t i = 0; i < 7; i++) {
        cr_expect_eq(atoms.v[i].bytes, bytes[i], "node %zu: %lu bytes", i,
                     (unsigned long)atoms.v[i].bytes);
        cr_expect_eq(atoms.v[i].tag, tags[i], "node %zu tag", i);
    }
    cr_expect_eq(atoms.v[6].self, 20023 - 2 - 6 - 5 - 20006);
    cr_expect_eq(atoms.v[4].self, 1, "the tuple's own byte");
    cr_expect_eq(atoms.end.nodes, 7);
    cr_expect_eq(atoms.end.malformed, 0);
    cr_expect_eq(atoms.end.lost_exits, 0);
    cr_expect_eq(atoms.end.orphan_exits, 0);
    cr_expect_eq(atoms.end.max_depth, 3);
}

Test(atom, record_layout)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    uint32_t ts = sertrace_type(d, &k_str, "str");
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 0x10, 2, 2);
    sertrace_atom(d, SERTRACE_TAG_STR, ts, 0x4000, 301, 3, 3 + 300);
    cr_expect_eq(sertrace_depth(d), 1, "an atom leaves nothing open");
    sertrace_atom_labelled(d, SERTRACE_TAG_INT, 0, 0x3ff0, 0, 304, 306, SERTRACE_LABEL_POS, 130);
    sertrace_atom(d, SERTRACE_TAG_STR, ts, 0x4010, 5, 306, 310);
    sertrace_exit(d, 311);
    sertrace_dump_end(d, 312, SERTRACE_STATUS_OK);
    /* TYPE(1, "str") then the node records (schema v6 NODE, v8 TATOM):
     * deltas from the previous node record of the batch, 0 at its
     * start. */
    const uint8_t *p = cap.bytes;
    cr_assert_eq(p[0], SERTRACE_REC_TYPE);
    p += 2 + 1 + 3;                                   /* op, type, len, "str" */
    static const uint8_t want[] = {SERTRACE_REC_NODE, /* an ENTER, no label */
                                   SERTRACE_TAG_LIST,
                                   1,    /* depth */
                                   0,    /* type */
                                   0x20, /* addr 0x10 - 0, zigzag */
                                   2,    /* length */
                                   4,    /* pos 2 - 0, zigzag */
                                   SERTRACE_REC_NODE | SERTRACE_REC_NODE_ATOM, /* 300 B: */
                                   SERTRACE_TAG_STR,
                                   2, /* depth */
                                   1, /* type */
                                   0xe0,
                                   0xff,
                                   0x01, /* addr 0x4000 - 0x10 = 0x3ff0, zigzag 0x7fe0 */
                                   0xad,
                                   0x02, /* length 301 */
                                   2,    /* pos 3 - 2 */
                                   0xac,
                                   0x02, /* bytes 300: no SATOM */
                                   SERTRACE_REC_TATOM | SERTRACE_LABEL_POS << 1, /* v8, no length */
                                   SERTRACE_TAG_INT,
                                   0, /* type */
                                   1, /* dpos 304 - 303 (the atom's end) */
                                   2, /* bytes */
                                   0xf0,
                                   0xff, /* daddr 0x3ff0 - 0x4000 = -16, s16 from base.addr */
                                   0x82,
                                   0x01, /* label value 130 */
                                   SERTRACE_REC_TATOM | SERTRACE_REC_SATOM_LEN, /* a length */
                                   SERTRACE_TAG_STR,
                                   1, /* type */
                                   0, /* dpos 306 - 306 */
                                   4, /* bytes */
                                   0x20,
                                   0, /* daddr 0x4010 - 0x3ff0 */
                                   5, /* length */
                                   SERTRACE_REC_EXIT_D,
                                   1,
                                   2}; /* pos 311 - 310 */
    cr_assert_eq(cap.len, (size_t)(p - cap.bytes) + sizeof want);
    cr_expect_arr_eq(p, want, sizeof want);
    seen s = through_core();
    cr_expect_eq(s.end.nodes, 4); /* in the order they close */
    cr_expect_eq(s.v[0].bytes, 300);
    cr_expect_eq(s.v[1].bytes, 2);
    cr_expect_eq(s.v[1].depth, 2);
    cr_expect_eq(s.v[1].addr, 0x3ff0);
    cr_expect_eq(s.v[2].bytes, 4);
    cr_expect_eq(s.v[2].length, 5);
    cr_expect_eq(s.v[2].enter_pos, 306);
    cr_expect_eq(s.v[3].bytes, 309, "the list: 2..311");
}

Test(atom, beyond_the_depth_cap_reported_once_and_not_recorded)
{
    sertrace_internal_set_max_depth(2);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 1, 0, 2);
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 2, 0, 3);
    sertrace_atom(d, SERTRACE_TAG_INT, 0, 3, 0, 4, 6);
    sertrace_atom(d, SERTRACE_TAG_INT, 0, 4, 0, 6, 8);
    cr_expect_eq(sertrace_depth(d), 2);
    sertrace_exit(d, 9);
    sertrace_atom(d, SERTRACE_TAG_INT, 0, 5, 0, 9, 11); /* depth 2: fits again */
    sertrace_exit(d, 12);
    sertrace_dump_end(d, 13, SERTRACE_STATUS_OK);
    int other;
    cr_expect_eq(count_op(SERTRACE_REC_ATOM, &other), 1, "only the atom within the cap");
    cr_expect_eq(count_op(SERTRACE_REC_ERROR, &other), 1, "one too-deep error");
    seen s = through_core();
    cr_expect_eq(s.end.nodes, 3);
    cr_expect_eq(s.end.errors, 1);
    cr_expect_eq(s.end.orphan_exits, 0, "the atoms beyond the cap need no exit");
    cr_expect_eq(s.v[0].bytes, 6, "the inner list: 3..9");
    cr_expect_eq(s.v[1].bytes, 2);
    cr_expect_eq(s.v[1].depth, 2);
}

/* ---- the live text tree -------------------------------------------------- */

static char *text_of(int atom, const char *path)
{
    cr_assert_eq(sertrace_internal_configure(path, "all", NULL, "1", -1), 0); /* exact sizes */
    scenario(atom);
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1); /* flushes and closes */
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[2][1 << 16];
    char *out = buf[atom];
    size_t n = fread(out, 1, sizeof buf[0] - 1, f);
    fclose(f);
    out[n] = '\0';
    /* Drop the header and footer lines (their dump numbers differ between
     * the runs); the footer must be there. */
    char *nl = strchr(out, '\n');
    cr_assert_not_null(nl);
    cr_assert(strncmp(out, "# sertrace dump", 15) == 0, "header: %.40s", out);
    char *end = strstr(nl, "# end dump ");
    cr_assert_not_null(end, "footer:\n%s", out);
    *end = '\0';
    return nl + 1;
}

Test(atom, text_tree_lines_identical_to_enter_exit)
{
    char path[] = "/tmp/sertrace-test-atom-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    char *pairs = text_of(0, path);
    unlink(path);
    char *atoms = text_of(1, path);
    unlink(path);
    cr_expect_str_eq(atoms, pairs);
    cr_expect(strstr(atoms, "└ # I [2 B]") != NULL, "leaf exit line:\n%s", atoms);
    cr_expect(strstr(atoms, "# L [20023 B]") != NULL, "root exit line:\n%s", atoms);
}

/* ---- varints of every length ---------------------------------------------- */

static uint64_t get_varint(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned sh = 0;
    while (*p & 0x80) {
        v |= (uint64_t)(*p++ & 0x7f) << sh;
        sh += 7;
    }
    v |= (uint64_t)*p++ << sh;
    *pp = p;
    return v;
}

/* The runtime encodes values below 2^56 without a loop: every length from
 * 1 to 10 bytes, at the edges (2^k - 1, 2^k), must decode to the value,
 * and records must stay whole across batches. */
Test(atom, varints_of_every_length_round_trip)
{
    uint64_t vals[130];
    size_t n = 0;
    for (unsigned k = 0; k < 64; k++) {
        vals[n++] = ((uint64_t)1 << k) - 1;
        vals[n++] = (uint64_t)1 << k;
    }
    vals[n++] = UINT64_MAX;
    vals[n++] = 0x0123456789abcdefull;
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    for (int round = 0; round < 40; round++) /* > 4 KiB: several batches */
        for (size_t i = 0; i < n; i++)
            sertrace_atom(d, SERTRACE_TAG_INT, 0, (uintptr_t)vals[i], vals[(i + 1) % n],
                          vals[i] >> 1, (vals[i] >> 1) + (vals[(i + 2) % n] >> 1));
    sertrace_dump_end(d, 0, SERTRACE_STATUS_OK);
    cr_assert_gt(cap.nbatch, 1);
    size_t seen = 0, tatoms = 0;
    for (size_t k = 0; k < cap.nbatch; k++) {
        const uint8_t *p = cap.bytes + cap.batch[k].off, *e = p + cap.batch[k].len;
        uint64_t base_addr = 0, base_pos = 0, base_far = 0; /* v6/v8 deltas: per batch */
        if (k > 0) { /* v8: every batch but the first opens with DEPTH */
            cr_assert_eq(*p++, SERTRACE_REC_DEPTH);
            cr_expect_eq(get_varint(&p), 0, "no node open");
        }
        while (p < e) {
            size_t i = seen % n;
            if (SERTRACE_REC_IS_TATOM(*p)) {
                /* v8: one byte each, the address in 2 or 4 from one of two bases */
                uint8_t op = *p;
                int haslen = op & 1;
                cr_expect_eq((op >> 1) & 7, 0, "no label");
                cr_expect_eq(p[1], SERTRACE_TAG_INT);
                cr_expect_eq(p[2], 0, "type");
                uint64_t pos = base_pos + p[3], bytes = p[4];
                uint32_t u = (uint32_t)p[5] | (uint32_t)p[6] << 8;
                int64_t daddr = (int16_t)(uint16_t)u;
                if (op & SERTRACE_REC_TATOM_WIDE)
                    daddr = (int32_t)(u | (uint32_t)p[7] << 16 | (uint32_t)p[8] << 24);
                uint64_t *base = (op & SERTRACE_REC_TATOM_FAR) ? &base_far : &base_addr;
                uint64_t addr = *base + (uint64_t)daddr;
                cr_expect_eq(addr, vals[i], "addr of record %zu", seen);
                p += (op & SERTRACE_REC_TATOM_WIDE) ? 9 : 7;
                cr_expect_eq(haslen ? get_varint(&p) : 0, vals[(i + 1) % n], "length of %zu", seen);
                cr_expect_eq(pos, vals[i] >> 1, "pos of record %zu", seen);
                cr_expect_eq(bytes, vals[(i + 2) % n] >> 1, "bytes of record %zu", seen);
                *base = addr;
                base_pos = pos + bytes;
                seen++;
                tatoms++;
                continue;
            }
            cr_assert_eq(*p, SERTRACE_REC_NODE | SERTRACE_REC_NODE_ATOM);
            p += 2;
            cr_expect_eq(get_varint(&p), 1, "depth");
            cr_expect_eq(get_varint(&p), 0, "type");
            uint64_t z = get_varint(&p);
            uint64_t addr = base_addr + ((z & 1) ? ~(z >> 1) : (z >> 1));
            cr_expect_eq(addr, vals[i], "addr of record %zu", seen);
            cr_expect_eq(get_varint(&p), vals[(i + 1) % n], "length of record %zu", seen);
            z = get_varint(&p);
            uint64_t pos = base_pos + ((z & 1) ? ~(z >> 1) : (z >> 1));
            cr_expect_eq(pos, vals[i] >> 1, "pos of record %zu", seen);
            uint64_t bytes = get_varint(&p);
            cr_expect_eq(bytes, vals[(i + 2) % n] >> 1, "bytes of record %zu", seen);
            base_addr = addr;
            base_pos = pos + bytes;
            seen++;
        }
        cr_assert_eq(p, e);
    }
    cr_expect_eq(seen, 40 * n);
    cr_expect_gt(tatoms, 0, "the small values as v8 TATOMs");
    cr_expect_lt(tatoms, seen, "the others as v6 NODEs");
}

/* ---- the inline fast path (sertrace.h) ------------------------------------ */

/* Many labelled atoms (several batches), containers, a pending
 * sertrace_label() (before an atom, before an enter, before an exit), a
 * misuse (end before start), an enter that reaches the depth cap, and an
 * enter and atoms beyond it: written once through
 * sertrace_atom_labelled() / sertrace_enter_labelled() / sertrace_exit()
 * and once through the inline sertrace_atom_fast() /
 * sertrace_enter_fast() / sertrace_exit_fast(), the captured bytes must
 * be identical. */
static void fast_enter(int fast, sertrace_dump *d, uint8_t tag, uintptr_t addr, uint64_t length,
                       uint64_t pos, uint8_t kind, uint64_t value)
{
    if (fast)
        sertrace_enter_fast(d, tag, 0, addr, length, pos, kind, value);
    else
        sertrace_enter_labelled(d, tag, 0, addr, length, pos, kind, value);
}

static void fast_scenario(int fast)
{
    sertrace_internal_set_max_depth(3);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    uint32_t ti = sertrace_type(d, &k_int, "int");
    fast_enter(fast, d, SERTRACE_TAG_LIST, 0x7f0000001000u, 2001, 2, SERTRACE_LABEL_NONE, 0);
    uint64_t pos = 3;
    for (uint64_t i = 0; i < 2000; i++) {
        uintptr_t addr = (uintptr_t)(0x7f0000100000u + (i * 7919 % 1000) * 32);
        uint8_t kind = i % 3 == 0 ? SERTRACE_LABEL_NONE : SERTRACE_LABEL_POS;
        if (i % 97 == 5)
            sertrace_label(d, SERTRACE_LABEL_KEY, i); /* pending: the slow path takes it */
        if (i % 223 == 9)                             /* a gap: no v7 SATOM (dpos >= 256) */
            pos += 400;
        uint64_t end = pos + 1 + i % 5;
        if (i % 501 == 7) /* one misuse in 501 */
            end = pos - 1;
        else if (i % 211 == 3) /* no SATOM (bytes >= 256) */
            end = pos + 300;
        uint64_t length = i % 4 == 1 ? i + 1 : 0; /* SATOMs with and without a length */
        if (fast)
            sertrace_atom_fast(d, SERTRACE_TAG_INT, ti, addr, length, pos, end, kind, i);
        else
            sertrace_atom_labelled(d, SERTRACE_TAG_INT, ti, addr, length, pos, end, kind, i);
        pos = end > pos ? end : pos;
        if (i == 1000) { /* two levels more: atoms at depth 4 are beyond the cap */
            fast_enter(fast, d, SERTRACE_TAG_LIST, 0x10, 2, pos, SERTRACE_LABEL_NONE, 0);
            fast_enter(fast, d, SERTRACE_TAG_LIST, 0x20, 2, pos, SERTRACE_LABEL_POS, 9);
            fast_enter(fast, d, SERTRACE_TAG_LIST, 0x28, 2, pos, SERTRACE_LABEL_POS,
                       0); /* beyond */
            if (fast)
                sertrace_atom_fast(d, SERTRACE_TAG_INT, ti, 0x30, 0, pos, pos + 2,
                                   SERTRACE_LABEL_POS, 0);
            else
                sertrace_atom_labelled(d, SERTRACE_TAG_INT, ti, 0x30, 0, pos, pos + 2,
                                       SERTRACE_LABEL_POS, 0);
            pos += 2;
            for (int k = 0; k < 3; k++) {
                if (fast)
                    sertrace_exit_fast(d, pos);
                else
                    sertrace_exit(d, pos);
            }
        }
        if (i % 50 == 49) { /* a container of the next 50 atoms, closed inline */
            if (i % 300 == 149)
                sertrace_label(d, SERTRACE_LABEL_KEY, i); /* pending: the slow path takes it */
            fast_enter(fast, d, SERTRACE_TAG_TUPLE, 0x40 + i, 51, pos,
                       i % 100 == 49 ? SERTRACE_LABEL_NONE : SERTRACE_LABEL_POS, i);
            if (i % 150 == 149)
                sertrace_label(d, SERTRACE_LABEL_POS, 1); /* pending at the exit: dropped */
            if (fast)
                sertrace_exit_fast(d, ++pos);
            else
                sertrace_exit(d, ++pos);
        }
    }
    if (fast)
        sertrace_exit_fast(d, pos + 1);
    else
        sertrace_exit(d, pos + 1);
    sertrace_dump_end(d, pos + 2, SERTRACE_STATUS_OK);
    sertrace_internal_set_max_depth(0);
}

Test(atom, inline_fast_path_writes_the_same_records)
{
    static uint8_t slow[CAP_BYTES];
    fast_scenario(0);
    size_t slow_len = cap.len, slow_batches = cap.nbatch;
    memcpy(slow, cap.bytes, cap.len);
    setup();
    fast_scenario(1);
    cr_assert_gt(slow_batches, 2, "several batches");
    cr_assert_eq(cap.nbatch, slow_batches);
    cr_assert_eq(cap.len, slow_len);
    cr_assert_arr_eq(cap.bytes, slow, slow_len);
    int other;
    cr_expect_eq(count_op(SERTRACE_REC_ERROR, &other), 1, "the depth cap, reported once");
    cr_expect_eq(count_op(SERTRACE_REC_ATOM, &other), 2000, "every atom within the cap");
    cr_expect_eq(count_op(SERTRACE_REC_ENTER, &other), 1 + 2 + 40, "every enter within the cap");
}

/* ---- schema v8: DEPTH at every batch but the first ------------------------ */

static int count_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)d;
    size_t *c = ctx;
    c[0]++;
    if (n->tag == SERTRACE_TAG_UNKNOWN || (n->flags & SERTRACE_NODE_NO_ENTER))
        c[1]++; /* an ancestor the reader had to invent */
    return 0;
}

/* Enters through the library (the caller counts the node before its
 * record), atoms and exits across many batches: each batch's DEPTH is the
 * writer's open nodes before its first record, so the core, reading every
 * batch, invents no node, and a batch's TATOMs land at their depth. */
Test(atom, depth_record_is_the_open_node_count)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    uint64_t pos = 2;
    size_t nodes = 0;
    for (int i = 0; i < 3000; i++) {
        sertrace_enter(d, SERTRACE_TAG_LIST, 0, 0x7f0000001000ull + (uint64_t)i * 64, 3, pos++);
        sertrace_atom(d, SERTRACE_TAG_INT, 0, 0x900000 + (uint64_t)i * 32, 0, pos, pos + 2);
        pos += 2;
        nodes += 2;
        if (i % 3 != 0)
            sertrace_exit(d, pos++);
    }
    while (sertrace_depth(d) > 0)
        sertrace_exit(d, pos++);
    sertrace_dump_end(d, pos + 1, SERTRACE_STATUS_OK);
    cr_assert_gt(cap.nbatch, 3);
    for (size_t k = 1; k < cap.nbatch; k++)
        cr_expect_eq(cap.bytes[cap.batch[k].off], SERTRACE_REC_DEPTH, "batch %zu opens with DEPTH",
                     k);
    size_t counts[2] = {0, 0};
    sertrace_core_visitor v = {.ctx = counts, .node_exit = count_exit};
    sertrace_core *c = sertrace_core_create(&v);
    cr_assert_not_null(c);
    feed_capture(c, &cap);
    sertrace_core_destroy(c);
    cr_expect_eq(counts[0], nodes, "every node, none more");
    cr_expect_eq(counts[1], 0, "no invented ancestor");
}
