/* sertrace/schema.h -- THE event schema of sertrace, in one place.
 *
 * Everything that crosses from a traced program to an analyzer is defined
 * here: the LTTng event names, the kind tags, and the binary layout of the
 * records packed into `sertrace:records` events.  The LTTng provider header
 * (tracepoints/sertrace-tp.h) binds these definitions to LTTng-UST; the
 * analyzers decode with them.  Nothing else in the project spells an event
 * name, a tag or a record opcode by hand.  This header is plain C99 with no
 * dependency, so the analyzers can include it without LTTng.
 *
 * Why records are batched (measured, see tracepoints/README.md): one LTTng
 * event costs ~100-150 ns in the traced program, a C pickler ~25 ns per
 * object, so two events per object would make recording 5-10x slower than
 * plain pickling.  Instead each dump appends compact varint records to a
 * private 4 KiB buffer (a few ns each) and flushes the buffer as ONE
 * `sertrace:records` event when it is full and at the end of the dump.
 *
 * LTTng events (provider "sertrace"), schema version 8 (the events are
 * those of version 3; versions 4 to 8 add records):
 *   sertrace:dump_begin { dump_id u64, serializer string, protocol s32,
 *                         pid s32, tid s32, scope string }
 *   sertrace:records    { dump_id u64, seq u32, records: sequence<u8>,
 *                         pid s32, tid s32, scope string }
 *   sertrace:dump_end   { dump_id u64, bytes u64, status enum u8,
 *                         batches u32, pid s32, tid s32, scope string,
 *                         flags u32 }
 * dump_id is unique within a process (pid), from 1 (a forked child numbers
 * its own from 1 again); seq numbers the records events of one dump from 0,
 * so a reader can tell a lost batch (gap) from a dump whose beginning was
 * overwritten (first seq > 0, e.g. in a snapshot).  batches is how many
 * records events the dump emitted (the last seq + 1; 0 for a dump that
 * recorded nothing, e.g. a top-level value a serializer folds), so a lost
 * LAST batch is visible too.  pid and tid are the process and thread that
 * emitted the event (getpid(), gettid(); in a forked child, the child's):
 * readers use them rather than the vpid/vtid contexts, which LTTng-UST
 * caches and, in a child forked without exec, leaves at the parent's
 * values unless liblttng-ust-fork.so is preloaded.  scope is the value of $SERTRACE_SCOPE in the
 * process (cut to SERTRACE_SCOPE_MAX bytes, "" when unset): `sertrace
 * record` puts a token there, inherited by CMD's descendants, and records
 * only the events whose scope holds its token (an LTTng filter).
 * flags holds SERTRACE_END_* bits: SERTRACE_END_LOWER_BOUNDS says the
 * serializer could not see every byte of its payload (a pickler that
 * writes straight to a file sertrace could not watch), so `bytes` and
 * every node's size are lower bounds, never to be shown as exact.
 * Records events carry only whole records; a batch never splits a record.
 *
 * Versions.  1: the fields above without `batches`, `pid`, `tid` and
 * `scope`.  2: adds them, at the end of their events.  Readers find fields
 * by name, so a reader of either version reads both (a v1 trace: batches
 * unknown, pid and tid from the contexts, scope empty).  3: adds
 * dump_end's `flags` (absent: 0, sizes exact).  4: adds the ATOM record
 * (below), one record for a node without children where v1-v3 wrote an
 * ENTER/EXIT pair; the events are unchanged, so a v4 reader reads v1-v3
 * traces as they are (they simply hold no ATOM), and a v3 reader stops at
 * the first ATOM of a batch (unknown opcode) and marks the dump incomplete.
 * 5: adds the NAME, LABEL and OOB records (edge labels and out-of-band
 * bytes, below), the events again unchanged.  6: adds the compact node
 * records NODE (0x10-0x1F: an ENTER or an ATOM with its edge label folded
 * into the opcode, so a labelled node is one record, not a LABEL record
 * then its node record) and EXIT_D, whose address and position fields are
 * deltas from the previous compact record of the same batch (an atom's
 * record shrinks from ~14 to ~7 bytes).  A v6 writer emits NODE and
 * EXIT_D in place of ENTER, ATOM, EXIT and (for labels of kinds 0-7)
 * LABEL; a v6 reader reads v1-v5 traces as they are (they hold none of
 * the new records), and a v5 reader stops at the first NODE of a batch
 * (unknown opcode) and marks the dump incomplete.
 * 7: adds SATOM (0x20-0x2F), an ATOM in fixed-width fields (type, depth,
 * position delta and size in one byte each, the address delta in four)
 * for the common atom -- a small type index, a short value close to the
 * previous one -- that costs the writer half the instructions of a NODE
 * (no LEB128 loop per field, one store for five fields).  A v7 writer
 * emits SATOM for an atom whose fields fit it and NODE for any other; a
 * v7 reader reads v1-v6 traces as they are, and a v6 reader stops at the
 * first SATOM of a batch (unknown opcode) and marks the dump incomplete.
 * 8: adds TATOM (0x40-0x7F), the tiny atom: SATOM without its depth (the
 * reader's open node count + 1), with a two- or four-byte address
 * difference from one of TWO address bases, and DEPTH (0x0B), the
 * writer's open node count at the start of every batch but a dump's
 * first, so that a reader that lost a batch is back in step before the
 * batch's first TATOM.  A v8 writer emits TATOM where v7 emitted SATOM
 * and for most atoms v7 wrote as NODE (an int, None or a memo reference
 * whose address lies far from the previous node's: a small int or None
 * sits in the interpreter's static data, the list holding it on the
 * heap), and no SATOM; a v8 reader reads v1-v7 traces as they are, and a
 * v7 reader stops at a v8 batch's DEPTH (unknown opcode) and marks the
 * dump incomplete.  Measured (records per dump at every object, Debian's
 * 3.11): builtins 1,268.5 -> 968.4 KB, state-16 55.8 -> 46.8 KB.
 *
 * Record layout (inside `records`).  `varint` is unsigned LEB128 (7 bits per
 * byte, low group first, high bit = more follows, at most 10 bytes);
 * `str` is a varint length followed by that many bytes (not NUL-terminated,
 * not necessarily valid UTF-8: readers must escape).  Positions are byte
 * offsets into the payload, counted from the start of the dump, so that
 * node bytes = exit.pos - enter.pos exactly.
 *
 *   ENTER  0x01  tag u8, depth varint, type varint, addr varint,
 *                length varint, pos varint
 *   EXIT   0x02  depth varint, pos varint
 *   TYPE   0x03  type varint, name str
 *   ERROR  0x04  tag u8, depth varint, type varint, message str, path str
 *   NOTE   0x05  depth varint, key str, value str
 *   ATOM   0x06  tag u8, depth varint, type varint, addr varint,
 *                length varint, pos varint, bytes varint            (v4)
 *   NAME   0x07  index varint, text str                      (v5)
 *   LABEL  0x08  kind u8, value varint                        (v5)
 *   OOB    0x09  depth varint, bytes varint                  (v5)
 *   EXIT_D 0x0A  depth varint, dpos zigzag                   (v6)
 *   NODE   0x10 | kind << 1 | atom                           (v6)
 *                tag u8, depth varint, type varint, daddr zigzag,
 *                length varint, dpos zigzag, [bytes varint if atom],
 *                [label varint if kind != 0]
 *   SATOM  0x20 | kind << 1 | haslen                          (v7)
 *                tag u8, type u8, depth8 u8, daddr s32, dpos u8, bytes u8,
 *                [length varint if haslen], [label varint if kind != 0]
 *   DEPTH  0x0B  depth varint                                  (v8)
 *   TATOM  0x40 | wide << 5 | far << 4 | kind << 1 | haslen    (v8)
 *                tag u8, type u8, dpos u8, bytes u8,
 *                daddr s16 (wide clear) or s32 (wide set),
 *                [length varint if haslen], [label varint if kind != 0]
 *
 *   depth : 1 for the root node of a dump, parent depth + 1 below it.  ENTER
 *           and EXIT both carry it so a reader can resynchronise after lost
 *           records (an EXIT closes the open node at that depth).  NOTE and
 *           ERROR carry the depth of the node they belong to.
 *   type  : per-dump type index, 1, 2, ... in order of first appearance; 0
 *           means "no type".  A TYPE record defining an index always comes
 *           before the first record that uses it, in the same dump.
 *   addr  : the object's address (identity only, never dereferenced).
 *   length: number of items + 1 for objects that have a length (list, dict,
 *           str, bytes ...); 0 when the object has none.
 *   tag   : one of SERTRACE_TAGS below.
 *   ATOM  : a whole node that has no children (an int, a str, a memo
 *           reference ...), in place of ENTER followed at once by its EXIT:
 *           the fields of that ENTER, then `bytes`, the node's size
 *           (exit.pos - enter.pos; a size rather than the end position
 *           because it is shorter as a varint).  A reader turns it into
 *           exactly the node the pair would have given.  Emitted only
 *           after the node was written: a node that fails is an ENTER
 *           left open, as before.
 *
 * Compact records (v6).  `zigzag` is a signed 64-bit difference as a
 * varint (n >= 0 -> 2n, n < 0 -> -2n - 1, in 64-bit two's complement
 * arithmetic, so every difference round-trips).  Each batch keeps two
 * bases, both 0 at the start of the batch (every `records` event decodes
 * on its own, a lost batch breaks nothing after it): the address and the
 * position of the last NODE or EXIT_D record of the batch.  NODE's
 * address is base.addr + daddr, its position base.pos + dpos; EXIT_D's
 * position is base.pos + dpos.  After a NODE, base.addr is its address
 * and base.pos its position (an ENTER) or its end, position + bytes (an
 * ATOM); after an EXIT_D, base.pos is its position.  Other records (v1-v5
 * ones included) leave the bases alone.  Consecutive objects sit close in
 * memory and in the payload, so daddr takes 2-3 bytes where an address
 * takes 6-7, and dpos one byte where a position takes up to 4.
 *   NODE's opcode: bit 0 (SERTRACE_REC_NODE_ATOM) set: an ATOM (the node
 *   is whole, `bytes` follows), clear: an ENTER (an EXIT or EXIT_D closes
 *   it); bits 1-3: the node's LABEL kind (SERTRACE_LABEL_*, 0 = no label
 *   of its own), its value the last field.  A NODE without a label of its
 *   own takes a pending LABEL record like any node record; a labelled
 *   NODE replaces it.  A node is otherwise read exactly as the ENTER or
 *   ATOM with the same fields (and, labelled, the LABEL before it).
 *
 * Short atoms (v7).  SATOM is the ATOM of a NODE (same bases, read and
 * updated the same way: base.addr is its address after it, base.pos its
 * end) in fixed-width fields, little-endian: `u8` one byte, `s32` four
 * bytes of a two's complement difference.  A writer uses it only when
 * every field fits: type < 256, 0 <= dpos < 256 (an unsigned difference
 * here, not a zigzag), bytes < 256 and an address difference within
 * [-2^31, 2^31); any other atom is a NODE.
 *   depth8: the low 8 bits of the node's depth.  In a well-formed dump an
 *           atom is always one below the innermost open node, so a reader
 *           takes, of the depths with these low bits, the one closest to
 *           its open node count + 1 (exact without losses; after a lost
 *           batch, right while the reader is fewer than 128 levels off,
 *           until the next NODE or EXIT_D carries a whole depth).
 *   opcode: bits 1-3 the node's LABEL kind (as NODE: 0 = no label of its
 *           own, its value the last field), bit 0 set: `length` follows
 *           (clear: length 0, an object without a length: int, float,
 *           None, bool).
 *   daddr : addr - base.addr as a signed 32-bit value.
 *   dpos  : pos - base.pos, bytes: the node's size, both as one byte.
 * A SATOM is otherwise read exactly as the NODE atom with the same
 * fields.
 *
 * Tiny atoms (v8).  TATOM is SATOM with no depth and a shorter address.
 * Its depth is the reader's open node count + 1 (an atom is always one
 * below the innermost open node).  Each batch keeps a third base,
 * base.far, 0 at the start of the batch like the other two: with `far`
 * clear the address is base.addr + daddr and base.addr becomes it, with
 * `far` set it is base.far + daddr and base.far becomes it (base.addr
 * untouched); daddr is a two's complement difference in 2 bytes (`wide`
 * clear) or 4 (`wide` set), little-endian.  base.pos becomes pos + bytes
 * as after a SATOM; NODE and EXIT_D never touch base.far.  The second
 * base is for atoms that live apart from the heap objects around them
 * (small ints, None, True, False and interned strs sit in the
 * interpreter's static data): they alternate with heap objects in a
 * list, and one base would give each a difference too large for 4
 * bytes.  A writer tries base.addr in 2 bytes, base.far in 2, base.addr
 * in 4, base.far in 4, and writes a NODE when none fits (so base.far
 * serves only addresses within 2 GiB of 0 or of a TATOM's: e.g. the
 * static data of a non-PIE interpreter such as Debian's python3.11).
 *   DEPTH: the writer's open node count when a batch begins, the first
 *   record of every batch of a dump but its first (seq > 0).  A reader
 *   closes its open nodes deeper than that (as lost EXITs) or invents
 *   the missing ancestors (as lost ENTERs), as for a NODE at depth + 1;
 *   without losses it changes nothing.  So a TATOM's implied depth is
 *   exact wherever the reader has every batch from the last DEPTH on.
 *
 -- the attribute name,
 * the position, the dict key -- so that every node has a path
 * (`Session.cache['users'][3]`).  A LABEL record labels the NEXT node
 * record of the same dump (ENTER, the ATOM record of v4, or a v6 NODE;
 * a v6 writer folds the label into the NODE's opcode instead): it is
 * written just before it, and a reader drops a pending label when any
 * other node record (EXIT, EXIT_D) comes first.  A label and its node may sit in
 * two consecutive batches.  Nodes without a LABEL have no label (the
 * root, STACK_GLOBAL's name strings, every node of a v1-v4 trace).  Label
 * texts are interned per dump: NAME defines `index` as a label text
 * exactly as TYPE defines a type name, and both share ONE index space (a
 * NAME index is never a TYPE index and vice versa; SERTRACE_MAX_TYPES
 * bounds both together), so a reader keeps one string table per dump.  A
 * NAME defining an index always comes before the first LABEL that uses
 * it, in the same dump.
 * LABEL kinds (enum sertrace_label_kind), and the path segment each reads
 * as (the analyzers' and the live tree's text, format/format.h):
 *   POS    1  value = position (list, tuple, reduce-argument item)   [3]
 *   KEY    2  value = NAME index of a str dict key                   ['name']
 *              (.name when the parent node is a STATE: an attribute)
 *   INT    3  value = zigzag-encoded int dict key                   [-3]
 *              (zigzag: n >= 0 -> 2n, n < 0 -> -2n - 1; ints that do
 *              not fit 64 bits are HIDDEN)
 *   HIDDEN 4  value = per-dump number of a dict key that is not shown
 *              (1, 2, ... in order of appearance)                   [...]
 *   ATTR   5  value = NAME index of an attribute name (slots)       .name
 *   ROLE   6  value = SERTRACE_ROLE_*: what the node is to a reduce or a
 *              container without being an item: STATE (the instance's
 *              state; no segment of its own in a path, its str keys read
 *              as attributes), ARGS (args), CALLABLE (reconstructor),
 *              ELEMENT {element}, DICT_KEY {key}
 * Privacy (tracepoints/README.md, "Dict keys"): a serializer records a
 * dict key's text (KEY) only when it is a str identifier of at most
 * SERTRACE_KEY_NAME_MAX characters, an int as INT; every other key is
 * HIDDEN -- unless the process runs with SERTRACE_KEYS=all
 * (SERTRACE_DUMP_KEYS_ALL), then every str key is recorded as KEY (other
 * keys stay HIDDEN: no repr is ever called).  Attribute names are code,
 * not data: an instance's state dict keys are identifiers and so are
 * recorded (a state key that is no identifier is a __getstate__'s data
 * and follows the key rule), ATTR names (slots) always.  A v5 reader reads v1-v4 traces (no NAME,
 * no LABEL: no paths); an older reader stops at a v5 batch's first LABEL (unknown opcode) and marks
 * the dump incomplete.
 *
 * Out-of-band bytes (v5): an OOB record says that the node open at
 * `depth` handed `bytes` bytes to the application instead of writing
 * them into the payload (pickle protocol 5: a PickleBuffer given to
 * buffer_callback).  They are no part of any node's bytes (node bytes
 * stay payload bytes, exact and additive); readers show them beside the
 * node's size ("PB [1 B + 512.0 KiB out of band]") and sum them per dump.
 *
 * Unknown opcodes end the decoding of that batch (a newer schema); readers
 * skip the rest of the batch and mark the dump incomplete.
 */
#ifndef SERTRACE_SCHEMA_H
#define SERTRACE_SCHEMA_H

#include <stdint.h>

#define SERTRACE_SCHEMA_VERSION 8

#define SERTRACE_PROVIDER_NAME "sertrace"
#define SERTRACE_EVENT_DUMP_BEGIN "sertrace:dump_begin"
#define SERTRACE_EVENT_RECORDS "sertrace:records"
#define SERTRACE_EVENT_DUMP_END "sertrace:dump_end"

/* Payload field names of the events above. */
#define SERTRACE_FIELD_DUMP_ID "dump_id"
#define SERTRACE_FIELD_SERIALIZER "serializer"
#define SERTRACE_FIELD_PROTOCOL "protocol"
#define SERTRACE_FIELD_SEQ "seq"
#define SERTRACE_FIELD_RECORDS "records"
#define SERTRACE_FIELD_BYTES "bytes"
#define SERTRACE_FIELD_STATUS "status"
#define SERTRACE_FIELD_BATCHES "batches" /* v2 */
#define SERTRACE_FIELD_PID "pid"         /* v2 */
#define SERTRACE_FIELD_TID "tid"         /* v2 */
#define SERTRACE_FIELD_SCOPE "scope"     /* v2 */
#define SERTRACE_FIELD_FLAGS "flags"     /* v3, dump_end */

/* Bits of dump_end's `flags` (v3). */
#define SERTRACE_END_LOWER_BOUNDS 0x1u /* payload and node sizes are lower bounds */

/* The environment variable whose value every event carries as `scope`
 * (v2), and the longest value kept.  `sertrace record` sets it to
 * ":TOKEN:" for CMD (a nested record appends "TOKEN:"), so CMD and its
 * descendants -- which inherit the environment -- are told apart from
 * other processes by an LTTng filter: scope == "*:TOKEN:*". */
#define SERTRACE_SCOPE_ENV "SERTRACE_SCOPE"
#define SERTRACE_SCOPE_MAX 255

/* LTTng context fields every sertrace session adds (common context). */
#define SERTRACE_CONTEXT_VPID "vpid"
#define SERTRACE_CONTEXT_VTID "vtid"

/* Largest `records` payload of one event.  Well below the smallest
 * sub-buffer sertrace configures (and LTTng's default 512 KiB per-UID). */
#define SERTRACE_BATCH_BYTES 4096
/* Strings inside records are cut to this many bytes (TYPE names, ERROR
 * messages and paths, NOTE keys and values) so any record fits a batch. */
#define SERTRACE_STRING_MAX 1000

enum sertrace_record_op {
    SERTRACE_REC_ENTER = 0x01,
    SERTRACE_REC_EXIT = 0x02,
    SERTRACE_REC_TYPE = 0x03,
    SERTRACE_REC_ERROR = 0x04,
    SERTRACE_REC_NOTE = 0x05,
    SERTRACE_REC_ATOM = 0x06,   /* v4 */
    SERTRACE_REC_NAME = 0x07,   /* v5: label text, in the TYPE index space */
    SERTRACE_REC_LABEL = 0x08,  /* v5: label of the next node */
    SERTRACE_REC_OOB = 0x09,    /* v5: out-of-band bytes of the open node */
    SERTRACE_REC_EXIT_D = 0x0A, /* v6: EXIT with a delta position */
    SERTRACE_REC_DEPTH = 0x0B,  /* v8: open nodes at a batch's start */
    SERTRACE_REC_NODE = 0x10,   /* v6: 0x10-0x1F, see SERTRACE_REC_NODE_* */
    SERTRACE_REC_SATOM = 0x20,  /* v7: 0x20-0x2F, see SERTRACE_REC_SATOM_* */
    SERTRACE_REC_TATOM = 0x40,  /* v8: 0x40-0x7F, see SERTRACE_REC_TATOM_* */
};

/* The compact node record (v6): SERTRACE_REC_NODE | label kind << 1 |
 * SERTRACE_REC_NODE_ATOM. */
#define SERTRACE_REC_NODE_MASK 0xF0u   /* op & mask == SERTRACE_REC_NODE */
#define SERTRACE_REC_NODE_ATOM 0x01u   /* an ATOM (bytes follow), else an ENTER */
#define SERTRACE_REC_NODE_KIND_SHIFT 1 /* label kind in bits 1-3 */
#define SERTRACE_REC_NODE_KIND_MAX 7u  /* larger kinds go in a LABEL record */
#define SERTRACE_REC_IS_NODE(op) (((unsigned)(op)&SERTRACE_REC_NODE_MASK) == SERTRACE_REC_NODE)
#define SERTRACE_REC_NODE_KIND(op) (((unsigned)(op) >> SERTRACE_REC_NODE_KIND_SHIFT) & 7u)

/* The short atom record (v7): SERTRACE_REC_SATOM | label kind << 1 |
 * SERTRACE_REC_SATOM_LEN; its label kind at the bits of NODE's
 * (SERTRACE_REC_NODE_KIND()). */
#define SERTRACE_REC_SATOM_MASK 0xF0u /* op & mask == SERTRACE_REC_SATOM */
#define SERTRACE_REC_SATOM_LEN 0x01u  /* a length varint follows the fixed fields */
#define SERTRACE_REC_SATOM_FIXED 10   /* opcode and fixed fields, in bytes */
#define SERTRACE_REC_IS_SATOM(op) (((unsigned)(op)&SERTRACE_REC_SATOM_MASK) == SERTRACE_REC_SATOM)

/* The tiny atom record (v8): SERTRACE_REC_TATOM | WIDE | FAR | label
 * kind << 1 | SERTRACE_REC_SATOM_LEN (the bits of SATOM's opcode). */
#define SERTRACE_REC_TATOM_MASK 0xC0u /* op & mask == SERTRACE_REC_TATOM */
#define SERTRACE_REC_TATOM_WIDE 0x20u /* a 4-byte address difference, else 2 */
#define SERTRACE_REC_TATOM_FAR 0x10u  /* from base.far, else from base.addr */
#define SERTRACE_REC_TATOM_FIXED 5    /* opcode, tag, type, dpos, bytes */
#define SERTRACE_REC_IS_TATOM(op) (((unsigned)(op)&SERTRACE_REC_TATOM_MASK) == SERTRACE_REC_TATOM)

/* A SATOM's depth from its depth8 and the reader's open node count
 * (schema v7, "Short atoms"): of the depths >= 1 with these low 8 bits,
 * the one closest to open + 1. */
static inline uint64_t sertrace_satom_depth(uint64_t open, uint8_t depth8)
{
    uint64_t want = open + 1;
    int d = (int)(uint8_t)(depth8 - (uint8_t)want);
    if (d >= 128)
        d -= 256;
    if (d < 0 && want <= (uint64_t)-d)
        d += 256;
    return want + (uint64_t)(int64_t)d;
}

/* Zigzag coding of the v6 deltas (a - b, wrapping) and back. */
static inline uint64_t sertrace_zigzag(uint64_t a, uint64_t b)
{
    uint64_t d = a - b;
    return (d << 1) ^ (uint64_t) - (int64_t)(d >> 63);
}

static inline uint64_t sertrace_unzigzag(uint64_t base, uint64_t z)
{
    return base + ((z >> 1) ^ (uint64_t) - (int64_t)(z & 1));
}

/* LABEL kinds (v5), see "Edge labels" above.  Stable values. */
enum sertrace_label_kind {
    SERTRACE_LABEL_NONE = 0, /* never recorded: "no label" in readers */
    SERTRACE_LABEL_POS = 1,
    SERTRACE_LABEL_KEY = 2,
    SERTRACE_LABEL_INT = 3,
    SERTRACE_LABEL_HIDDEN = 4,
    SERTRACE_LABEL_ATTR = 5,
    SERTRACE_LABEL_ROLE = 6,
};

/* Values of a ROLE label. */
enum sertrace_label_role {
    SERTRACE_ROLE_STATE = 1,    /* an instance's state (transparent in paths) */
    SERTRACE_ROLE_ARGS = 2,     /* a reduce's or __new__'s arguments: (args) */
    SERTRACE_ROLE_CALLABLE = 3, /* a reconstructor, class or state setter */
    SERTRACE_ROLE_ELEMENT = 4,  /* a set / frozenset element: {element} */
    SERTRACE_ROLE_DICT_KEY = 5, /* a dict key written as a node: {key} */
};

/* Longest str dict key recorded by default (an identifier). */
#define SERTRACE_KEY_NAME_MAX 64
/* The environment variable that opts in to recording every str dict key
 * (value "all"; unset or "safe": the default rule). */
#define SERTRACE_KEYS_ENV "SERTRACE_KEYS"

/* dump_end status. */
#define SERTRACE_STATUSES(X)                                                                       \
    X(OK, 0, "ok")                                                                                 \
    X(ERROR, 1, "error")
enum sertrace_status {
#define SERTRACE_STATUS_ENUM_(name, value, label) SERTRACE_STATUS_##name = value,
    SERTRACE_STATUSES(SERTRACE_STATUS_ENUM_)
#undef SERTRACE_STATUS_ENUM_
};

/* Kind tags: X(NAME, value, "text tag", "meaning", CLASS_OF_TAG).  The
 * text tag is what the tree shows; dill's tags are reused where the meaning is the same
 * (D2 dict, T4 class by reference, F2 function by reference ...), so a
 * sertrace tree reads like dill's.  Values are stable: append, never
 * renumber.  Values 1-63: sertrace's own; 64-127: dill's tags; 128-255 are
 * free for other serializers (shown as "K<n>" when unknown).
 * The last column says what a tag's node names (enum sertrace_tagclass
 * below, without its prefix): the one place that says which tags are
 * classes, functions, atoms or memo references, for the tree's repr
 * (format/), the summary and the serializer hooks. */
#define SERTRACE_TAGS(X)                                                                           \
    X(UNKNOWN, 0, "?", "unknown kind", OBJECT)                                                     \
    X(DICT, 1, "D2", "dict", OBJECT)                                                               \
    X(LIST, 2, "L", "list", OBJECT)                                                                \
    X(TUPLE, 3, "Tu", "tuple", OBJECT)                                                             \
    X(SET, 4, "Se", "set", OBJECT)                                                                 \
    X(FROZENSET, 5, "FS", "frozenset", OBJECT)                                                     \
    X(STR, 6, "Str", "str", OBJECT)                                                                \
    X(BYTES, 7, "By", "bytes", OBJECT)                                                             \
    X(BYTEARRAY, 8, "BA", "bytearray", OBJECT)                                                     \
    X(INT, 9, "I", "int", OBJECT)                                                                  \
    X(FLOAT, 10, "Fl", "float", OBJECT)                                                            \
    X(ATOM, 11, "A", "None, True, False", ATOM)                                                    \
    X(INSTANCE, 12, "O", "instance rebuilt from __reduce_ex__/__reduce__", OBJECT)                 \
    X(REDUCE, 13, "R", "object from a reduce tuple (copyreg, dispatch_table)", OBJECT)             \
    X(CLASS, 14, "T4", "class by reference (global)", CLASS)                                       \
    X(FUNCTION, 15, "F2", "function by reference (global)", FUNCTION)                              \
    X(GLOBAL, 16, "G", "other object by name (Ellipsis, NotImplemented)", OBJECT)                  \
    X(MEMO, 17, "Mo", "back-reference to an object already written", REF)                          \
    X(PICKLEBUFFER, 18, "PB", "PickleBuffer (in-band or out-of-band)", OBJECT)                     \
    X(PERSID, 19, "Pid", "persistent id", OBJECT)                                                  \
    X(EXT, 20, "Ext", "copyreg extension code", OBJECT)                                            \
    X(STATE, 21, "St", "object state (__getstate__ / __dict__)", OBJECT)                           \
    X(ARGS, 22, "Ar", "constructor arguments of a reduce", OBJECT)                                 \
    X(ITEMS, 23, "It", "list/dict items of a reduce", OBJECT)                                      \
    X(MAP, 32, "Map", "map / object (msgpack and other C serializers)", OBJECT)                    \
    X(ARRAY, 33, "Arr", "array (msgpack and other C serializers)", OBJECT)                         \
    X(SCALAR, 34, "Sc", "scalar (msgpack and other C serializers)", OBJECT)                        \
    X(DILL_T1, 64, "T1", "dill: type in _typemap", CLASS)                                          \
    X(DILL_T2, 65, "T2", "dill: class by value", CLASS)                                            \
    X(DILL_T6, 66, "T6", "dill: namedtuple class", CLASS)                                          \
    X(DILL_T7, 67, "T7", "dill: NoneType, NotImplementedType, EllipsisType", CLASS)                \
    X(DILL_ABC, 68, "ABC", "dill: ABCMeta registry", OBJECT)                                       \
    X(DILL_D1, 69, "D1", "dill: __main__.__dict__", OBJECT)                                        \
    X(DILL_D3, 70, "D3", "dill: __main__.__dict__ (non-dill pickler)", OBJECT)                     \
    X(DILL_D4, 71, "D4", "dill: module __dict__", OBJECT)                                          \
    X(DILL_DKVI, 72, "Dkvi", "dill: dict view", OBJECT)                                            \
    X(DILL_F1, 73, "F1", "dill: function by value", FUNCTION)                                      \
    X(DILL_F3, 74, "F3", "dill: PyPy builtin function", FUNCTION)                                  \
    X(DILL_CO, 75, "Co", "dill: code object", OBJECT)                                              \
    X(DILL_CE1, 76, "Ce1", "dill: cell, contents inline", OBJECT)                                  \
    X(DILL_CE2, 77, "Ce2", "dill: cell, deferred", OBJECT)                                         \
    X(DILL_CE3, 78, "Ce3", "dill: empty cell", OBJECT)                                             \
    X(DILL_ME1, 79, "Me1", "dill: bound method", OBJECT)                                           \
    X(DILL_ME2, 80, "Me2", "dill: builtin method", OBJECT)                                         \
    X(DILL_M1, 81, "M1", "dill: module by value", OBJECT)                                          \
    X(DILL_M2, 82, "M2", "dill: module by reference", OBJECT)                                      \
    X(DILL_OTHER, 83, "Dx", "dill: other dill tag (see note 'tag')", OBJECT)
/* The last entry is a catch-all: a dill save function whose tag has no
 * value above gets DILL_OTHER plus a NOTE record "tag" with dill's text. */

enum sertrace_tag {
#define SERTRACE_TAG_ENUM_(name, value, text, meaning, class_) SERTRACE_TAG_##name = value,
    SERTRACE_TAGS(SERTRACE_TAG_ENUM_)
#undef SERTRACE_TAG_ENUM_
};

/* What a tag's node names: the tags table's last column. */
enum sertrace_tagclass {
    SERTRACE_TAGCLASS_OBJECT = 0, /* an object written here (repr <NAME object at 0x...>) */
    SERTRACE_TAGCLASS_CLASS,      /* a class: the node's type is the class itself */
    SERTRACE_TAGCLASS_FUNCTION,   /* a function: the node's type is the function */
    SERTRACE_TAGCLASS_ATOM,       /* None, True, False */
    SERTRACE_TAGCLASS_REF,        /* a memo reference to an object already written */
};

/* The class of a tag value (SERTRACE_TAGCLASS_OBJECT for values not in
 * the table). */
static inline enum sertrace_tagclass sertrace_tagclass_of(unsigned tag)
{
    switch (tag) {
#define SERTRACE_TAGCLASS_CASE_(name, value, text, meaning, class_)                                \
    case value:                                                                                    \
        return SERTRACE_TAGCLASS_##class_;
        SERTRACE_TAGS(SERTRACE_TAGCLASS_CASE_)
#undef SERTRACE_TAGCLASS_CASE_
    default:
        return SERTRACE_TAGCLASS_OBJECT;
    }
}

/* Limits of a tree, shared by the producer (sertrace.h) and the analyzers:
 * open nodes per dump, and type indices per dump. */
#define SERTRACE_MAX_DEPTH 1000000u
#define SERTRACE_MAX_TYPES 65536u

#endif /* SERTRACE_SCHEMA_H */
