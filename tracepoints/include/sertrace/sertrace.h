/* sertrace/sertrace.h -- the API that serializer code calls.
 *
 * A serializer brackets each dump with sertrace_dump_begin()/_end() and each
 * object it writes with sertrace_enter()/_exit() (or, for an object without
 * children, one sertrace_atom() once it is written), passing its output
 * position (bytes written so far in this dump, counted on its single write
 * path).  sertrace turns that into exact per-node byte counts, and sends
 * them to whoever listens: an LTTng session that enabled `sertrace:*`
 * (recorded as batched records, see schema.h) and/or the live text tree
 * when DISPATCH_TRACE is on.  Serializers never print, format or know
 * about LTTng.
 *
 * Cost model: when nobody listens, sertrace_dump_begin() returns NULL and
 * the serializer skips every other call with one branch per object (the
 * "dormant" cost).  When a listener exists, each call appends a few bytes
 * to the dump's private buffer: no allocation, no lock, no lookup by name.
 *
 * Thread-safety: every function may be called from any thread.  A
 * sertrace_dump belongs to the thread that began it until it is ended; two
 * threads never share one.  Dumps may nest on one thread (a __reduce__
 * that itself pickles): each has its own handle.
 *
 * Misuse never crashes the host and never fails the serialization: an exit
 * without an enter, a depth beyond SERTRACE_MAX_DEPTH or a NULL handle is
 * counted and reported (in the trace as an ERROR record, on the text tree
 * as a flag), then ignored.
 */
#ifndef SERTRACE_SERTRACE_H
#define SERTRACE_SERTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "sertrace/schema.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared from here to the matching pop is libsertrace's API:
 * the library is built with hidden visibility and exports exactly these
 * functions (tracepoints/README.md, "Exported symbols"). */
#pragma GCC visibility push(default)

typedef struct sertrace_dump sertrace_dump;

/* The first member of every sertrace_dump: what sertrace_atom_fast(),
 * sertrace_enter_fast() and sertrace_exit_fast() (below) need to append a
 * record to the dump's batch without a call into libsertrace.  Part of libsertrace's ABI
 * (SERTRACE_0): only the library writes these fields, except through sertrace_atom_fast(). */
struct sertrace_dump_fast {
    uint8_t *batch;     /* the batch buffer (SERTRACE_BATCH_BYTES) */
    uint32_t len;       /* bytes of it in use */
    uint32_t fast_end;  /* inline records only while len < fast_end; 0: never (a
                         * listener other than LTTng, a pending label, the depth
                         * cap ...) */
    uint32_t depth;     /* open nodes */
    uint32_t depth_cap; /* the dump's depth cap: an inline enter that reaches it
                         * clears fast_end (deeper nodes go through the library) */
    uint64_t base_addr; /* the batch's delta bases (schema.h, "Compact records") */
    uint64_t base_pos;
    uint64_t base_far; /* the batch's second address base (schema v8, "Tiny atoms") */
};

/* Bits of sertrace_dump_flags(). */
enum sertrace_dump_flag {
    /* Someone listens (always set on a non-NULL handle). */
    SERTRACE_DUMP_ACTIVE = 1u << 0,
    /* Trace atoms (int, float, str, bytes, None, bool) as their own nodes.
     * Off by default: atoms are folded into their parent's self bytes.
     * On with SERTRACE_GRANULARITY=all. */
    SERTRACE_DUMP_ATOMS = 1u << 1,
    /* An LTTng session records this dump. */
    SERTRACE_DUMP_LTTNG = 1u << 2,
    /* The live text tree (DISPATCH_TRACE) prints this dump. */
    SERTRACE_DUMP_TEXT = 1u << 3,
    /* Set by sertrace_dump_lower_bounds(): the dump's sizes are lower
     * bounds. */
    SERTRACE_DUMP_LOWER_BOUNDS = 1u << 4,
    /* SERTRACE_KEYS=all: the user opted in to recording every str dict
     * key as a label (schema.h, "Edge labels", privacy).  Off by default:
     * a serializer then labels only keys that are ints or str identifiers
     * of at most SERTRACE_KEY_NAME_MAX characters. */
    SERTRACE_DUMP_KEYS_ALL = 1u << 5,
};

/* Begin a dump.  `serializer` names it ("pickle", "dill", "msgpack"; copied,
 * at most 63 bytes kept), `protocol` is its protocol/version or -1.
 * Returns NULL when no listener is active: the caller then makes no other
 * sertrace call for this dump.  Never fails otherwise (on allocation
 * failure it also returns NULL).  The handle stays valid until
 * sertrace_dump_end(). */
sertrace_dump *sertrace_dump_begin(const char *serializer, int protocol);

/* The SERTRACE_DUMP_* bits of a dump. `d` may be NULL (returns 0). */
unsigned sertrace_dump_flags(const sertrace_dump *d);

/* Say that this dump's sizes are lower bounds: some of its payload is
 * written where the serializer cannot count it (a pickler that writes
 * straight to a file sertrace could not watch).  Every output then shows
 * the payload and every node's size as "at least" (the trace carries
 * SERTRACE_END_LOWER_BOUNDS in dump_end).  Call it before
 * sertrace_dump_end(), best before the first node so that the live tree
 * marks every node.  `d` may be NULL. */
void sertrace_dump_lower_bounds(sertrace_dump *d);

/* End a dump and release the handle.  `total_bytes` is the length of the
 * payload the serializer produced (all of it, header and trailer
 * included); `status` is SERTRACE_STATUS_OK or SERTRACE_STATUS_ERROR.
 * Open nodes left by an error are closed as unfinished.  `d` may be NULL. */
void sertrace_dump_end(sertrace_dump *d, uint64_t total_bytes, int status);

/* Intern a type for this dump.  `key` identifies the type within the
 * process (a PyTypeObject*, a C type descriptor ...).  Returns the dump's
 * small type index (>= 1).  `name` is read only the first time a key is
 * seen in this dump: call sertrace_type_known() first to avoid building a
 * name string on every object.  Returns 0 if `d` is NULL or the per-dump
 * type table is full (SERTRACE_MAX_TYPES), in which case the node shows
 * without a type name. */
uint32_t sertrace_type(sertrace_dump *d, const void *key, const char *name);

/* The dump's index for `key` if already interned, else 0.  Cheap (one
 * hash probe): call it on every object, and sertrace_type() only on 0. */
uint32_t sertrace_type_known(const sertrace_dump *d, const void *key);

/* Label texts (schema v5, "Edge labels").  Interned per dump like
 * types, in the same index space: sertrace_name_known() is one hash probe
 * (call it on every label), sertrace_name() interns `text` (`len` bytes,
 * cut to SERTRACE_STRING_MAX) under `key` the first time and returns its
 * index (>= 1), or 0 when `d` is NULL or the table is full (then label
 * the node HIDDEN, or not at all).  `key` identifies the text within the
 * process for the whole dump: the caller guarantees that no other text
 * gets the same key before sertrace_dump_end() (e.g. a Python str kept
 * alive until then). */
uint32_t sertrace_name_known(const sertrace_dump *d, const void *key);
uint32_t sertrace_name(sertrace_dump *d, const void *key, const char *text, size_t len);

/* Label the next node opened in `d` (the next sertrace_enter() or
 * sertrace_atom()): `kind` a SERTRACE_LABEL_* value, `value` as schema.h
 * says for that kind (a position, a name index from sertrace_name(), a
 * zigzag int, a hidden key's number, a SERTRACE_ROLE_*).  A label not
 * followed by a node (an exit comes first) is dropped.  The label goes
 * into the node's own record (schema v6); sertrace_enter_labelled() and
 * sertrace_atom_labelled() do the same in one call. */
void sertrace_label(sertrace_dump *d, uint8_t kind, uint64_t value);

/* Say that the innermost open node handed `bytes` bytes to the
 * application out of band instead of writing them into the payload
 * (schema v5 OOB record; pickle protocol 5's buffer_callback).  They are
 * shown beside the node's size and summed per dump, never added to node
 * bytes.  `d` may be NULL. */
void sertrace_oob(sertrace_dump *d, uint64_t bytes);

/* Open a node.  `tag` is a SERTRACE_TAG_* value; `type` an index from
 * sertrace_type() (or 0); `addr` the object's address (identity only);
 * `length` the item count + 1, or 0 for objects without a length;
 * `pos` the serializer's output position (bytes written in this dump) just
 * before the object's first byte. */
void sertrace_enter(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr, uint64_t length,
                    uint64_t pos);

/* sertrace_label(d, label_kind, label_value) then sertrace_enter(), in
 * one call and one record (schema v6 NODE).  SERTRACE_LABEL_NONE: no
 * label of its own (a pending sertrace_label() applies, as for
 * sertrace_enter()). */
void sertrace_enter_labelled(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                             uint64_t length, uint64_t pos, uint8_t label_kind,
                             uint64_t label_value);

/* Close the innermost open node; `pos` is the output position just after
 * its last byte.  Its bytes are pos - (its enter pos). */
void sertrace_exit(sertrace_dump *d, uint64_t pos);

/* A whole node that has no children (an atom: int, str, a memo reference
 * ...), written between output positions `pos` and `end_pos`: the same
 * node as sertrace_enter(d, tag, type, addr, length, pos) followed at once
 * by sertrace_exit(d, end_pos), in every output, for half the cost (one
 * ATOM record, schema v4, instead of two).  Call it after the object was
 * written; if writing it failed, call sertrace_enter() instead (with the
 * same `pos`) and leave the node open, as for any failed node. */
void sertrace_atom(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr, uint64_t length,
                   uint64_t pos, uint64_t end_pos);

/* sertrace_label(d, label_kind, label_value) then sertrace_atom(), in
 * one call and one record, as sertrace_enter_labelled() for an enter. */
void sertrace_atom_labelled(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                            uint64_t length, uint64_t pos, uint64_t end_pos, uint8_t label_kind,
                            uint64_t label_value);

/* The LEB128 encoder of the records (schema.h): `v` at `p`, returns the
 * byte after it. */
static inline uint8_t *sertrace_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Whether an atom's record can be a v7 SATOM (schema.h, "Short atoms"):
 * its type index, position delta and size below 256, its label kind one
 * a node record holds (0-7), its address delta `daddr` a signed 32-bit
 * value. */
static inline int sertrace_satom_fits(uint32_t type, uint64_t daddr, uint64_t dpos, uint64_t bytes,
                                      unsigned kind)
{
    return (((uint64_t)type | dpos | bytes | (uint64_t)kind << 5) >> 8) == 0 &&
           daddr + UINT64_C(0x80000000) < UINT64_C(0x100000000);
}

/* A SATOM record at `p` (the fields fit: sertrace_satom_fits()); returns
 * the byte after it.  The caller updates the bases. */
static inline uint8_t *sertrace_put_satom(uint8_t *p, unsigned kind, uint8_t tag, uint32_t depth,
                                          uint32_t type, uint64_t daddr, uint64_t length,
                                          uint64_t dpos, uint64_t bytes, uint64_t label_value)
{
    uint32_t a = (uint32_t)daddr;
    p[0] = (uint8_t)(SERTRACE_REC_SATOM | kind << SERTRACE_REC_NODE_KIND_SHIFT | (length != 0));
    p[1] = tag;
    p[2] = (uint8_t)type;
    p[3] = (uint8_t)depth;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __builtin_memcpy(p + 4, &a, 4);
#else
    p[4] = (uint8_t)a;
    p[5] = (uint8_t)(a >> 8);
    p[6] = (uint8_t)(a >> 16);
    p[7] = (uint8_t)(a >> 24);
#endif
    p[8] = (uint8_t)dpos;
    p[9] = (uint8_t)bytes;
    p += SERTRACE_REC_SATOM_FIXED;
    if (length != 0)
        p = sertrace_put_varint(p, length);
    if (kind != SERTRACE_LABEL_NONE)
        p = sertrace_put_varint(p, label_value);
    return p;
}

/* Whether an atom's fields other than its address fit a v8 TATOM
 * (schema.h, "Tiny atoms"): type index, position delta and size below
 * 256, a label kind a node record holds (0-7). */
static inline int sertrace_tatom_fits(uint32_t type, uint64_t dpos, uint64_t bytes, unsigned kind)
{
    return (((uint64_t)type | dpos | bytes | (uint64_t)kind << 5) >> 8) == 0;
}

/* A TATOM record at `p` (tatom_fits() true of the fields; room for 64
 * bytes) when the address fits one of the batch's two bases (2 bytes
 * from base.addr, 2 from base.far, 4 from base.addr, 4 from base.far);
 * NULL, nothing written, when it fits neither (the atom is a NODE).
 * Updates the base it used and base_pos; returns the byte after it. */
static inline uint8_t *sertrace_put_tatom(uint8_t *p, struct sertrace_dump_fast *f, unsigned kind,
                                          uint8_t tag, uint32_t type, uint64_t addr,
                                          uint64_t length, uint64_t dpos, uint64_t bytes,
                                          uint64_t label_value)
{
    uint64_t near = addr - f->base_addr;
    unsigned op = SERTRACE_REC_TATOM | kind << SERTRACE_REC_NODE_KIND_SHIFT | (length != 0);
    uint8_t *q = p + SERTRACE_REC_TATOM_FIXED;
    uint32_t a;
    if (__builtin_expect(near + 0x8000u < 0x10000u, 1)) { /* the common case first */
        a = (uint32_t)near;
        f->base_addr = addr;
    } else {
        uint64_t far = addr - f->base_far;
        if (far + 0x8000u < 0x10000u) {
            op |= SERTRACE_REC_TATOM_FAR;
            a = (uint32_t)far;
            f->base_far = addr;
        } else if (near + UINT64_C(0x80000000) < UINT64_C(0x100000000)) {
            op |= SERTRACE_REC_TATOM_WIDE;
            a = (uint32_t)near;
            f->base_addr = addr;
        } else if (far + UINT64_C(0x80000000) < UINT64_C(0x100000000)) {
            op |= SERTRACE_REC_TATOM_WIDE | SERTRACE_REC_TATOM_FAR;
            a = (uint32_t)far;
            f->base_far = addr;
        } else {
            return NULL; /* a NODE */
        }
    }
    p[0] = (uint8_t)op;
    p[1] = tag;
    p[2] = (uint8_t)type;
    p[3] = (uint8_t)dpos;
    p[4] = (uint8_t)bytes;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __builtin_memcpy(q, &a, 4); /* room for 64 bytes: 2 of them overwritten when narrow */
#else
    for (unsigned i = 0; i < 4; i++)
        q[i] = (uint8_t)(a >> (8 * i));
#endif
    p = q + ((op & SERTRACE_REC_TATOM_WIDE) ? 4 : 2);
    if (length != 0)
        p = sertrace_put_varint(p, length);
    if (kind != SERTRACE_LABEL_NONE)
        p = sertrace_put_varint(p, label_value);
    f->base_pos += dpos + bytes;
    return p;
}

/* An ATOM's record: a v8 TATOM when its fields fit, else a v6 NODE, at
 * `p` (room for 64 bytes), with label kind `kind` (0-7) and value;
 * updates the batch's bases in `f` and returns the byte after the record.
 * The library's atoms; sertrace_atom_fast() writes the same bytes. */
static inline uint8_t *sertrace_put_atom(uint8_t *p, struct sertrace_dump_fast *f, unsigned kind,
                                         uint8_t tag, uint32_t depth, uint32_t type, uint64_t addr,
                                         uint64_t length, uint64_t pos, uint64_t bytes,
                                         uint64_t label_value)
{
    uint64_t dpos = pos - f->base_pos;
    if (sertrace_tatom_fits(type, dpos, bytes, kind)) {
        uint8_t *end =
            sertrace_put_tatom(p, f, kind, tag, type, addr, length, dpos, bytes, label_value);
        if (end != NULL)
            return end;
    }
    *p++ = (uint8_t)(SERTRACE_REC_NODE | kind << SERTRACE_REC_NODE_KIND_SHIFT |
                     SERTRACE_REC_NODE_ATOM);
    *p++ = tag;
    p = sertrace_put_varint(p, depth);
    p = sertrace_put_varint(p, type);
    p = sertrace_put_varint(p, sertrace_zigzag(addr, f->base_addr));
    p = sertrace_put_varint(p, length);
    p = sertrace_put_varint(p, sertrace_zigzag(pos, f->base_pos));
    p = sertrace_put_varint(p, bytes);
    if (kind != SERTRACE_LABEL_NONE)
        p = sertrace_put_varint(p, label_value);
    f->base_addr = addr;
    f->base_pos = pos + bytes;
    return p;
}

/* sertrace_atom_labelled(), inline: when the dump only records (no text
 * tree), has room in its batch and nothing pending, and the atom's
 * record is a TATOM (schema v8), the record is written here,
 * into the batch, without a call; otherwise it calls
 * sertrace_atom_labelled().  The same records either way.  For the hot
 * path of a serializer that traces every object. */
static inline void sertrace_atom_fast(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                                      uint64_t length, uint64_t pos, uint64_t end_pos,
                                      uint8_t label_kind, uint64_t label_value)
{
    struct sertrace_dump_fast *f = (struct sertrace_dump_fast *)d;

    if (d == NULL)
        return;
    uint64_t dpos = pos - f->base_pos;
    uint64_t bytes = end_pos - pos; /* end_pos < pos: too large to fit */
    if (__builtin_expect(f->len < f->fast_end && sertrace_tatom_fits(type, dpos, bytes, label_kind),
                         1)) {
        uint8_t *p = sertrace_put_tatom(f->batch + f->len, f, label_kind, tag, type, addr, length,
                                        dpos, bytes, label_value);
        if (__builtin_expect(p != NULL, 1)) {
            f->len = (uint32_t)(p - f->batch);
            return;
        }
    }
    sertrace_atom_labelled(d, tag, type, addr, length, pos, end_pos, label_kind, label_value);
}

/* sertrace_enter_labelled(), inline on the same terms as
 * sertrace_atom_fast(): the ENTER's NODE record written straight into the
 * batch when the dump only records, else the call.  The same records
 * either way.  A dump that only records keeps no node stack (the text
 * tree is what needs one), so an inline enter is the record and the
 * depth. */
static inline void sertrace_enter_fast(sertrace_dump *d, uint8_t tag, uint32_t type, uintptr_t addr,
                                       uint64_t length, uint64_t pos, uint8_t label_kind,
                                       uint64_t label_value)
{
    struct sertrace_dump_fast *f = (struct sertrace_dump_fast *)d;

    if (d == NULL)
        return;
    if (__builtin_expect(f->len < f->fast_end && label_kind <= SERTRACE_REC_NODE_KIND_MAX, 1)) {
        uint8_t *p = f->batch + f->len;
        *p++ = (uint8_t)(SERTRACE_REC_NODE | (unsigned)label_kind << SERTRACE_REC_NODE_KIND_SHIFT);
        *p++ = tag;
        p = sertrace_put_varint(p, (uint64_t)++f->depth);
        p = sertrace_put_varint(p, type);
        p = sertrace_put_varint(p, sertrace_zigzag(addr, f->base_addr));
        p = sertrace_put_varint(p, length);
        p = sertrace_put_varint(p, sertrace_zigzag(pos, f->base_pos));
        if (label_kind != SERTRACE_LABEL_NONE)
            p = sertrace_put_varint(p, label_value);
        f->len = (uint32_t)(p - f->batch);
        f->base_addr = addr;
        f->base_pos = pos;
        if (__builtin_expect(f->depth >= f->depth_cap, 0))
            f->fast_end = 0; /* at the cap: the next node is refused by the library */
        return;
    }
    sertrace_enter_labelled(d, tag, type, addr, length, pos, label_kind, label_value);
}

/* sertrace_exit(), inline on the same terms as sertrace_atom_fast(): the
 * EXIT_D record written straight into the batch when the dump only
 * records, else the call.  The same records either way. */
static inline void sertrace_exit_fast(sertrace_dump *d, uint64_t pos)
{
    struct sertrace_dump_fast *f = (struct sertrace_dump_fast *)d;

    if (d == NULL)
        return;
    if (__builtin_expect(f->len < f->fast_end && f->depth > 0, 1)) {
        uint8_t *p = f->batch + f->len;
        *p++ = SERTRACE_REC_EXIT_D;
        p = sertrace_put_varint(p, f->depth);
        p = sertrace_put_varint(p, sertrace_zigzag(pos, f->base_pos));
        f->len = (uint32_t)(p - f->batch);
        f->base_pos = pos;
        f->depth--;
        return;
    }
    sertrace_exit(d, pos);
}

/* Report that an object could not be serialized.  Call on the error path
 * only, once, at the innermost node (before unwinding): `message` is the
 * exception text, `path` where the object sat
 * ("State.suspended[3].frame.stack[2]").  Both may be NULL.  The node and
 * its open ancestors are then closed by sertrace_dump_end() as failed. */
void sertrace_error(sertrace_dump *d, uint8_t tag, uint32_t type, const char *message,
                    const char *path);

/* Attach an annotation to the innermost open node of `d` (or to the dump
 * when no node is open).  Key and value are copied (each cut to
 * SERTRACE_STRING_MAX bytes). */
void sertrace_note(sertrace_dump *d, const char *key, const char *value);

/* The innermost dump being written on the calling thread, or NULL.  Lets
 * code called from inside a serializer (a __reduce__, a __getstate__)
 * annotate its own node: sertrace_note(sertrace_current_dump(), k, v). */
sertrace_dump *sertrace_current_dump(void);

/* Number of open nodes of `d` (0 when none or d is NULL). */
uint32_t sertrace_depth(const sertrace_dump *d);

/* SERTRACE_MAX_DEPTH and SERTRACE_MAX_TYPES: schema.h (the analyzers
 * share them). */

/* An in-process listener: a tool that reads its own process's dumps
 * without LTTng (sertrace.compare: a dump straight into the tree core).
 * While one is set, every dump records, as if a session had enabled
 * sertrace:* (sertrace_dump_flags() has no SERTRACE_DUMP_LTTNG for it),
 * and its callbacks get what the three events carry (schema.h):
 * dump_begin, each records batch, dump_end (with `batches`, the number of
 * records calls made, and the SERTRACE_END_* `flags`).  Any callback may
 * be NULL.  They are called on the thread that owns the dump, from inside
 * the serializer: they must not call back into sertrace for that dump,
 * and a listener shared by threads must lock (filter by thread if only
 * one matters).  A dump keeps the listener it began with: after
 * sertrace_set_listener(NULL) a dump already begun still calls it until
 * it ends, so `ctx` must outlive every such dump.  `l` is copied; NULL
 * removes the listener.  One listener at a time (a new one replaces it). */
typedef struct sertrace_listener {
    void (*dump_begin)(void *ctx, uint64_t dump_id, const char *serializer, int32_t protocol);
    void (*records)(void *ctx, uint64_t dump_id, uint32_t seq, const uint8_t *buf, uint32_t len);
    void (*dump_end)(void *ctx, uint64_t dump_id, uint64_t bytes, uint8_t status, uint32_t batches,
                     uint32_t flags);
    void *ctx;
} sertrace_listener;

void sertrace_set_listener(const sertrace_listener *l);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* SERTRACE_SERTRACE_H */
