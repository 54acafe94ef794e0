/* tests/runtime/capture.c -- the one capture helper of the runtime tests.
 *
 * The tests install the runtime's internal hooks (runtime-internal.h) to
 * capture what would go to LTTng (dump_begin, every flushed batch of
 * records, dump_end) and decode the batches with the small independent
 * decoder here (written from schema.h, not from runtime.c); the suite
 * `runtime` captures around each of its tests.  Also the small file
 * helpers the text probe's tests share.  See capture.h.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "format.h"
#include "runtime-internal.h"
#include "sertrace/schema.h"
#include "sertrace/sertrace.h"

#include "capture.h"

/* ---- capture ----------------------------------------------------------- */

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
struct captured_dump dumps[MAX_DUMPS];
size_t ndumps;

struct captured_dump *find_dump(uint64_t id)
{
    for (size_t i = 0; i < ndumps; i++)
        if (dumps[i].id == id)
            return &dumps[i];
    return NULL;
}

void on_begin(void *ctx, uint64_t id, const char *serializer, int32_t protocol)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    if (ndumps < MAX_DUMPS) {
        struct captured_dump *c = &dumps[ndumps++];
        memset(c, 0, sizeof *c);
        c->id = id;
        snprintf(c->serializer, sizeof c->serializer, "%s", serializer);
        c->protocol = protocol;
    }
    pthread_mutex_unlock(&cap_lock);
}

void on_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *buf, uint32_t len)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    struct captured_dump *c = find_dump(id);
    if (c != NULL) {
        if (c->records_len + len > c->records_cap) {
            c->records_cap = c->records_cap ? c->records_cap * 2 : 2 * SERTRACE_BATCH_BYTES;
            c->records = realloc(c->records, c->records_cap);
        }
        memcpy(c->records + c->records_len, buf, len);
        c->records_len += len;
        c->batches = realloc(c->batches, (c->nbatches + 1) * sizeof *c->batches);
        c->batches[c->nbatches].seq = seq;
        c->batches[c->nbatches].len = len;
        c->nbatches++;
    }
    pthread_mutex_unlock(&cap_lock);
}

void on_end(void *ctx, uint64_t id, uint64_t bytes, uint8_t status)
{
    (void)ctx;
    pthread_mutex_lock(&cap_lock);
    struct captured_dump *c = find_dump(id);
    if (c != NULL) {
        c->ended = true;
        c->bytes = bytes;
        c->status = status;
    }
    pthread_mutex_unlock(&cap_lock);
}

static void capture_on(void)
{
    struct sertrace_internal_hooks h = {on_begin, on_records, on_end, NULL};
    /* Text off whatever the environment says; hooks on. */
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1);
    sertrace_internal_set_hooks(&h);
}

static void free_all(void);
TestSuite(runtime, .init = capture_on, .fini = free_all);

/* ---- decoder (from schema.h) ------------------------------------------- */

static bool get_varint(const uint8_t *b, size_t len, size_t *i, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*i >= len)
            return false;
        uint8_t c = b[(*i)++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool get_str(const uint8_t *b, size_t len, size_t *i, char **s, size_t *n)
{
    uint64_t l;
    if (!get_varint(b, len, i, &l) || l > len - *i)
        return false;
    *s = malloc(l + 1);
    memcpy(*s, b + *i, l);
    (*s)[l] = '\0';
    *n = l;
    *i += l;
    return true;
}

static void push_rec(struct recs *out, const struct rec *r)
{
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 64;
        out->v = realloc(out->v, out->cap * sizeof *out->v);
    }
    out->v[out->n++] = *r;
}

/* A v6 delta (schema.h, "Compact records"), written here from the
 * definition: base + the signed difference zigzag-coded in z. */
static uint64_t undelta(uint64_t base, uint64_t z)
{
    int64_t diff = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
    return base + (uint64_t)diff;
}

/* v5 ENTER / ATOM: tag, depth, type, address, length, position, and an
 * atom's bytes, all absolute. */
static bool read_v5_node(const uint8_t *b, size_t len, size_t *i, struct rec *r)
{
    if (*i >= len)
        return false;
    r->tag = b[(*i)++];
    return get_varint(b, len, i, &r->depth) && get_varint(b, len, i, &r->type) &&
           get_varint(b, len, i, &r->addr) && get_varint(b, len, i, &r->length) &&
           get_varint(b, len, i, &r->pos) &&
           (r->op != SERTRACE_REC_ATOM || get_varint(b, len, i, &r->bytes));
}

/* A node record of v6 (NODE, op 0x10-0x1f: varint fields, address and
 * position as zigzag deltas), v7 (SATOM, op 0x20-0x2f: fixed-width
 * fields, read from schema.h's text) or v8 (TATOM, op 0x40-0x7f: no
 * depth, the address from one of two bases), whose op has already been read into
 * r->op.  Both carry the label kind in op bits 1-3 and the label value as
 * their last varint; both are pushed as an ENTER or ATOM record preceded
 * by a folded LABEL record when they have a label.  The batch's address
 * and position bases advance. */
static bool decode_node(const uint8_t *b, size_t len, size_t *i, struct rec *r, struct recs *out,
                        uint64_t *base_addr, uint64_t *base_pos, uint64_t *base_far)
{
    uint64_t label = 0;
    unsigned kind = (r->op >> 1) & 7;
    bool tiny_atom = r->op >= 0x40;
    bool short_atom = r->op >= 0x20 && !tiny_atom;
    bool atom = tiny_atom || short_atom || (r->op & 1);
    uint64_t *addr_base = base_addr; /* the base this record's address updates */
    if (tiny_atom || short_atom) {
        /* v8 TATOM: tag, type, dpos, bytes, then a 2- or 4-byte address
         * difference from base.addr or (op bit 4) base.far; v7 SATOM: tag,
         * type, depth8, a 4-byte address difference from base.addr, dpos,
         * bytes.  Then both: the length varint when op bit 0 is set. */
        bool wide = (r->op & 0x20) != 0;
        size_t fixed = short_atom ? 9 : wide ? 8 : 6;
        if (len - *i < fixed)
            return false;
        const uint8_t *f = b + *i;
        *i += fixed;
        if ((r->op & 1) && !get_varint(b, len, i, &r->length))
            return false;
        r->tag = f[0];
        r->type = f[1];
        r->depth = out->open + 1;
        const uint8_t *pos_bytes = f + (short_atom ? 7 : 2); /* dpos, bytes */
        int64_t daddr;
        if (short_atom) {
            /* depth8: of the depths with these low bits, the closest to open + 1 */
            while ((r->depth & 0xff) != f[2])
                r->depth++;
            if (r->depth - (out->open + 1) >= 128 && r->depth > 256)
                r->depth -= 256;
            daddr = (int32_t)((uint32_t)f[3] | (uint32_t)f[4] << 8 | (uint32_t)f[5] << 16 |
                              (uint32_t)f[6] << 24);
        } else {
            uint32_t u = (uint32_t)f[4] | (uint32_t)f[5] << 8;
            daddr = (int16_t)(uint16_t)u;
            if (wide)
                daddr = (int32_t)(u | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 24);
            if (r->op & 0x10)
                addr_base = base_far;
        }
        r->addr = *addr_base + (uint64_t)daddr;
        r->pos = *base_pos + pos_bytes[0];
        r->bytes = pos_bytes[1];
    } else {
        uint64_t z_addr = 0, z_pos = 0;
        if (*i >= len)
            return false;
        r->tag = b[(*i)++];
        if (!get_varint(b, len, i, &r->depth) || !get_varint(b, len, i, &r->type) ||
            !get_varint(b, len, i, &z_addr) || !get_varint(b, len, i, &r->length) ||
            !get_varint(b, len, i, &z_pos) || (atom && !get_varint(b, len, i, &r->bytes)))
            return false;
        r->addr = undelta(*base_addr, z_addr);
        r->pos = undelta(*base_pos, z_pos);
    }
    if (kind != 0 && !get_varint(b, len, i, &label))
        return false;
    *addr_base = r->addr;
    *base_pos = r->pos + r->bytes;
    r->op = atom ? SERTRACE_REC_ATOM : SERTRACE_REC_ENTER;
    if (!atom)
        out->open = r->depth;
    if (kind != 0) {
        struct rec l;
        memset(&l, 0, sizeof l);
        l.op = SERTRACE_REC_LABEL;
        l.wire = r->wire;
        l.folded = true;
        l.tag = (uint8_t)kind;
        l.length = label;
        push_rec(out, &l);
    }
    push_rec(out, r);
    return true;
}

/* Decode one batch; false if it does not end exactly on a record. */
static bool decode_batch(const uint8_t *b, size_t len, struct recs *out)
{
    size_t i = 0;
    uint64_t base_addr = 0, base_pos = 0, base_far = 0; /* v6, v8: per batch */
    while (i < len) {
        struct rec r;
        memset(&r, 0, sizeof r);
        r.op = b[i++];
        r.wire = r.op;
        bool ok = true;
        if (r.op >= 0x10 && r.op <= 0x7f) { /* v6 NODE, v7 SATOM, v8 TATOM */
            if (!decode_node(b, len, &i, &r, out, &base_addr, &base_pos, &base_far))
                return false;
            continue;
        }
        if (r.op == SERTRACE_REC_DEPTH) { /* v8: the writer's open nodes; not pushed */
            if (!get_varint(b, len, &i, &r.depth))
                return false;
            out->open = r.depth;
            continue;
        }
        switch (r.op) {
        case 0x0a: /* v6 EXIT_D */
            ok = get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.pos);
            if (ok) {
                r.pos = base_pos = undelta(base_pos, r.pos);
                r.op = SERTRACE_REC_EXIT;
            }
            break;
        case SERTRACE_REC_ATOM:
        case SERTRACE_REC_ENTER:
            ok = read_v5_node(b, len, &i, &r);
            break;
        case SERTRACE_REC_OOB:
            ok = get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.bytes);
            break;
        case SERTRACE_REC_EXIT:
            ok = get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.pos);
            break;
        case SERTRACE_REC_TYPE:
        case SERTRACE_REC_NAME: /* v5: same layout, same index space */
            ok = get_varint(b, len, &i, &r.type) && get_str(b, len, &i, &r.s1, &r.s1_len);
            break;
        case SERTRACE_REC_LABEL: /* v5: kind in `tag`, value in `length` */
            ok = i < len;
            if (ok)
                r.tag = b[i++];
            ok = ok && get_varint(b, len, &i, &r.length);
            break;
        case SERTRACE_REC_ERROR:
            ok = i < len;
            if (ok)
                r.tag = b[i++];
            ok = ok && get_varint(b, len, &i, &r.depth) && get_varint(b, len, &i, &r.type) &&
                 get_str(b, len, &i, &r.s1, &r.s1_len) && get_str(b, len, &i, &r.s2, &r.s2_len);
            break;
        case SERTRACE_REC_NOTE:
            ok = get_varint(b, len, &i, &r.depth) && get_str(b, len, &i, &r.s1, &r.s1_len) &&
                 get_str(b, len, &i, &r.s2, &r.s2_len);
            break;
        default:
            ok = false;
        }
        if (!ok)
            return false;
        if (r.op == SERTRACE_REC_ENTER)
            out->open = r.depth;
        else if (r.op == SERTRACE_REC_EXIT)
            out->open = r.depth - 1;
        push_rec(out, &r);
    }
    return true;
}

/* Everything decoded, freed after each test (keeps ASan's leak check clean). */
#define MAX_DECODED MAX_DUMPS
static struct recs decoded[MAX_DECODED];
static size_t ndecoded;

static void free_all(void)
{
    for (size_t k = 0; k < ndecoded; k++) {
        for (size_t i = 0; i < decoded[k].n; i++) {
            free(decoded[k].v[i].s1);
            free(decoded[k].v[i].s2);
        }
        free(decoded[k].v);
    }
    ndecoded = 0;
    for (size_t k = 0; k < ndumps; k++) {
        free(dumps[k].records);
        free(dumps[k].batches);
    }
    ndumps = 0;
}

/* Decode every batch of a dump, checking batch bounds and seq order. */
struct recs decode_dump(const struct captured_dump *c)
{
    struct recs r = {NULL, 0, 0, 0};
    size_t off = 0;
    for (size_t k = 0; k < c->nbatches; k++) {
        cr_assert_eq(c->batches[k].seq, k, "batch seq %u at %zu", c->batches[k].seq, k);
        cr_assert_leq(c->batches[k].len, SERTRACE_BATCH_BYTES);
        cr_assert_gt(c->batches[k].len, 0);
        cr_assert(decode_batch(c->records + off, c->batches[k].len, &r),
                  "batch %zu does not hold whole records", k);
        off += c->batches[k].len;
    }
    cr_assert_lt(ndecoded, MAX_DECODED);
    decoded[ndecoded++] = r;
    return r;
}

const struct captured_dump *only_dump(void)
{
    cr_assert_eq(ndumps, 1, "expected one captured dump, got %zu", ndumps);
    cr_assert(dumps[0].ended);
    return &dumps[0];
}

/* Rebuild sizes from ENTER/EXIT records and check them against `want`
 * (bytes per node, in enter order). */
void check_sizes(const struct recs *r, const uint64_t *want, size_t nwant)
{
    uint64_t stack_pos[64];
    size_t stack_idx[64];
    uint64_t got[256];
    size_t depth = 0, nodes = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].op == SERTRACE_REC_ENTER) {
            cr_assert_eq(r->v[i].depth, depth + 1);
            stack_pos[depth] = r->v[i].pos;
            stack_idx[depth] = nodes++;
            depth++;
        } else if (r->v[i].op == SERTRACE_REC_EXIT) {
            cr_assert_eq(r->v[i].depth, depth);
            depth--;
            got[stack_idx[depth]] = r->v[i].pos - stack_pos[depth];
        } else if (r->v[i].op == SERTRACE_REC_ATOM) {
            cr_assert_eq(r->v[i].depth, depth + 1);
            got[nodes++] = r->v[i].bytes;
        }
    }
    cr_assert_eq(depth, 0);
    cr_assert_eq(nodes, nwant);
    for (size_t i = 0; i < nwant; i++)
        cr_expect_eq(got[i], want[i], "node %zu: %llu bytes, want %llu", i,
                     (unsigned long long)got[i], (unsigned long long)want[i]);
}

/* ---- files -------------------------------------------------------------- */

char *read_fd_all(int fd)
{
    static char buf[1 << 20];
    size_t n = 0;
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

void reset_fd(int fd)
{
    cr_assert_eq(ftruncate(fd, 0), 0);
    lseek(fd, 0, SEEK_SET);
}

int temp_fd(char *path_out)
{
    strcpy(path_out, "/tmp/sertrace-runtime-test-XXXXXX");
    int fd = mkstemp(path_out);
    cr_assert_geq(fd, 0);
    return fd;
}
