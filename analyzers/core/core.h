/* core.h -- the sertrace tree core: decoded events in, size trees out.
 *
 * The core knows nothing about babeltrace2.  Its caller (the bt2 plugin,
 * or a test feeding a synthetic stream) hands it the three events of
 * sertrace/schema.h already decoded -- dump_begin, records (a byte batch),
 * dump_end -- plus tracer "discarded events" notices.  The core keeps one
 * state per live dump, keyed by (pid, dump_id), decodes the LEB128 records
 * of each batch and maintains the chain of open nodes (a stack, never
 * recursion), and calls a visitor as nodes open and close.  The visitor
 * decides what to keep: the summary (summary.h) keeps aggregates bounded by
 * depth + distinct types + top-N, the tree buffer (treeprint.h) keeps the
 * nodes of one dump to print it.
 *
 * Irregular streams are expected, never fatal:
 *   - records whose dump_begin is missing (snapshot edges, discards): the
 *     dump is created on first sight and flagged NO_BEGIN;
 *   - a gap in a dump's `seq` numbers (lost records events): counted, the
 *     dump is incomplete and the nodes open across the gap are PARTIAL;
 *   - ENTER/EXIT depths that do not match the open chain: the core
 *     resynchronises on depth (lost exits are closed with a lower-bound
 *     size, lost enters become placeholder nodes, orphan exits are counted);
 *   - dumps that never end (process killed): closed by
 *     sertrace_core_finish() as UNFINISHED, innermost first, while the
 *     chain they died in is still on the stack;
 *   - unknown opcodes, malformed varints, truncated records, absurd
 *     depths/type indices: the rest of the batch is skipped and counted as
 *     malformed; nothing is read out of bounds;
 *   - an ENTER more than 64 levels below the open chain (it would invent
 *     that many "enter lost" ancestors: one 9-byte record could open a
 *     million nodes): that record alone is skipped (skipped_deep), its
 *     batch counts as malformed.  Depth is at most SERTRACE_MAX_DEPTH.
 * A size is exact only when the node saw its own enter and exit, and
 * that exit is provably its own: a node open when records were lost and
 * closed by an EXIT after the loss has an upper bound (EXIT_UNSURE),
 * except a dump's root.  See sertrace_node_bytes_exact(),
 * sertrace_node_bound().
 *
 * Memory: one sertrace_dump_state per live dump, its open-node stack
 * (grows to the deepest depth seen; ~64 B per level) and its type table
 * (distinct types of the dump).  Nothing grows with the number of events.
 * The per-batch decode loop does not allocate except when the stack or the
 * type table grows.
 *
 * Thread-safety: none; one core per thread.
 */
#ifndef SERTRACE_CORE_H
#define SERTRACE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sertrace/schema.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Node flags. */
enum sertrace_core_node_flag {
    /* The ENTER record was never seen; this placeholder stands for an
     * ancestor whose records were lost.  bytes is a lower bound. */
    SERTRACE_NODE_NO_ENTER = 1u << 0,
    /* Closed by resynchronisation or dump_end without its EXIT record;
     * bytes is a lower bound. */
    SERTRACE_NODE_NO_EXIT = 1u << 1,
    /* Still open when the stream ended (the process died in it); bytes is
     * a lower bound. */
    SERTRACE_NODE_UNFINISHED = 1u << 2,
    /* Records were lost (seq gap, discarded events, skipped batch) while
     * this node was open: children may be missing, self bytes are not
     * exact (bytes still are when enter and exit were seen). */
    SERTRACE_NODE_PARTIAL = 1u << 3,
    /* A child's size is not exact, so self bytes are not. */
    SERTRACE_NODE_CHILD_INEXACT = 1u << 4,
    /* An ERROR record names this node (could not be serialized). */
    SERTRACE_NODE_ERROR = 1u << 5,
    /* exit position before enter position: bytes forced to 0. */
    SERTRACE_NODE_MALFORMED = 1u << 6,
    /* Still open when a dump ended with status error (the serializer
     * failed inside it): bytes is a lower bound, nothing was lost. */
    SERTRACE_NODE_FAILED = 1u << 7,
    /* Open when records were lost (PARTIAL) and closed by an EXIT seen
     * after the loss: that EXIT may belong to a later node at the same
     * depth whose ENTER was lost, so the node ended at or before it and
     * bytes is an UPPER bound (a lower one too is unknown with NO_ENTER).
     * Not set on a dump's root (depth 1): the schema gives a dump one
     * root, so an EXIT at depth 1 can only be the root's own. */
    SERTRACE_NODE_EXIT_UNSURE = 1u << 8,
    /* Its dump's sizes are lower bounds (dump_end flag
     * SERTRACE_END_LOWER_BOUNDS: the serializer could not see every byte
     * it wrote).  The core never sets it on a node: a visitor that knows
     * the dump's flag (SERTRACE_DUMPF_LOWER_BOUNDS, at dump_close) sets it
     * on what it kept so sertrace_node_bound() says "at least". */
    SERTRACE_NODE_LOWER_BOUND = 1u << 9,
};

/* What n->bytes is: exact, or which bound (sertrace_node_bound()). */
enum sertrace_node_bound_kind {
    SERTRACE_BOUND_EXACT = 0,
    SERTRACE_BOUND_LOWER,   /* the node is at least this big */
    SERTRACE_BOUND_UPPER,   /* at most this big (EXIT_UNSURE) */
    SERTRACE_BOUND_UNKNOWN, /* neither (EXIT_UNSURE on a NO_ENTER node) */
};

/* Dump flags. */
enum sertrace_core_dump_flag {
    SERTRACE_DUMPF_BEGIN = 1u << 0,        /* dump_begin seen */
    SERTRACE_DUMPF_END = 1u << 1,          /* dump_end seen */
    SERTRACE_DUMPF_UNFINISHED = 1u << 2,   /* stream ended before dump_end */
    SERTRACE_DUMPF_STATUS_ERROR = 1u << 3, /* dump_end status was error */
    SERTRACE_DUMPF_RESTARTED = 1u << 4,    /* a second dump_begin with the same
                                            * (pid, dump_id) closed this one */
    /* No dump_end, and it was lost: the dump saw discarded events and a
     * later dump of the same thread (begun after this one's last event)
     * ended.  Closed then, its open nodes as NO_EXIT; not UNFINISHED. */
    SERTRACE_DUMPF_END_LOST = 1u << 5,
    /* dump_end said the dump emitted no records event (schema v2
     * `batches` == 0): with none seen, a dump that traced no node (a
     * top-level value the serializer folds) is complete, not a loss. */
    SERTRACE_DUMPF_NO_RECORDS = 1u << 6,
    /* dump_end flags had SERTRACE_END_LOWER_BOUNDS (schema v3): the
     * payload and every node's size are lower bounds. */
    SERTRACE_DUMPF_LOWER_BOUNDS = 1u << 7,
    /* Set by sertrace_core_finish() on an unfinished dump when the tracer
     * discarded events of its process at any time, even none while this
     * dump was live as far as the notices tell (a notice can come before
     * the dump's last events are lost at the end of the stream): its
     * dump_end may be among them, so the loss wording must not say only
     * that the process stopped in it. */
    SERTRACE_DUMPF_TRACE_DISCARDS = 1u << 8,
};

/* One node, while open (on the stack) and when it closes. */
typedef struct sertrace_node {
    uint64_t addr;
    uint64_t length;      /* items + 1, or 0 */
    uint64_t enter_pos;   /* payload offset of its first byte */
    uint64_t inner_max;   /* largest position seen inside it */
    uint64_t lost_at;     /* largest position seen in the dump when its
                           * records were first lost while this node was
                           * open: its end is at least this (inner_max
                           * then may hold later nodes' positions) */
    uint64_t child_bytes; /* sum of its closed children's bytes */
    uint64_t bytes;       /* set when it closes */
    uint64_t self;        /* bytes - child_bytes, set when it closes */
    uint64_t user;        /* the visitor's slot (e.g. an index) */
    uint64_t label;       /* its LABEL record's value (schema v5) */
    uint64_t oob;         /* out-of-band bytes (OOB records, v5): not in bytes */
    uint32_t type;        /* per-dump type index, 0 = none */
    uint32_t depth;       /* 1 = root */
    uint32_t gap_epoch;   /* dump's gap counter when it opened */
    uint16_t flags;       /* SERTRACE_NODE_* */
    uint8_t tag;          /* SERTRACE_TAG_* */
    uint8_t label_kind;   /* SERTRACE_LABEL_*: NONE without a LABEL record */
} sertrace_node;

/* True when `n` is an instance's state (a ROLE STATE label): its
 * children's str keys read as attributes (".cache"). */
static inline bool sertrace_node_is_state(const sertrace_node *n)
{
    return n->label_kind == SERTRACE_LABEL_ROLE && n->label == SERTRACE_ROLE_STATE;
}

typedef struct sertrace_type_entry {
    uint32_t off; /* into the dump's name arena */
    uint32_t len;
    bool defined;
    bool label; /* defined by a NAME record (a label text, v5), not a type */
} sertrace_type_entry;

/* A dump, from its first event to its close. */
typedef struct sertrace_dump_state {
    int64_t pid, tid; /* -1 when unknown (no vpid/vtid context) */
    uint64_t dump_id;
    int64_t ts_begin; /* ns from clock origin of the first event seen */
    int64_t ts_end;   /* of the last event seen */
    char serializer[64];
    uint32_t serializer_len;
    int32_t protocol;
    uint64_t payload_bytes; /* from dump_end; valid with SERTRACE_DUMPF_END */
    unsigned flags;         /* SERTRACE_DUMPF_* */

    /* Irregularities; any nonzero makes the dump incomplete. */
    uint64_t lost_batches;     /* records events missing by seq */
    uint64_t discarded;        /* tracer-discarded events while it was live */
    uint64_t malformed;        /* batches cut short: bad varint, truncation,
                                * unknown opcode, absurd values */
    uint64_t orphan_exits;     /* EXIT records with no open node */
    uint64_t lost_exits;       /* nodes closed without their EXIT */
    uint64_t lost_enters;      /* placeholder nodes created */
    uint64_t skipped_deep;     /* ENTER records skipped: more than 64 levels
                                * below the open chain (their batch counts
                                * in `malformed`) */
    uint64_t unfinished_nodes; /* nodes open when the stream ended */
    uint64_t errors;           /* ERROR records */
    uint64_t failed_open;      /* nodes open at a dump_end with status error */
    uint64_t unsure_exits;     /* nodes closed with EXIT_UNSURE */
    uint64_t nodes;            /* nodes closed */
    uint64_t records_events;

    uint32_t next_seq;
    bool seen_records;
    uint32_t gap_epoch;  /* incremented at each loss */
    uint32_t rec_gap_at; /* gap_epoch after the last loss of this dump's
                          * records (seq gap, skipped batch or record);
                          * discards alone do not set it */
    uint64_t max_pos;    /* largest position seen */
    uint64_t label;      /* pending LABEL (schema v5) for the next ENTER */
    uint8_t label_kind;  /* SERTRACE_LABEL_NONE: none pending */
    uint64_t labels;     /* LABEL records seen: nonzero = the dump has paths */
    uint64_t oob_bytes;  /* out-of-band bytes of its nodes (OOB records, v5) */

    sertrace_node *stack; /* stack[0] = root .. stack[depth-1] innermost */
    uint32_t depth, stack_cap;
    uint32_t max_depth;
    uint32_t roots; /* depth-1 nodes opened (placeholders included) */

    sertrace_type_entry *types; /* index 0 unused */
    uint32_t ntypes, types_cap;
    char *names;
    uint32_t names_len, names_cap;

    void *user; /* the visitor's per-dump data */
    struct sertrace_dump_state *hash_next;
} sertrace_dump_state;

/* Callbacks.  Each returns 0, or -1 to abort (out of memory): the core
 * then returns -1 from the feeding function.  Pointers are valid only
 * during the call; `n` may be modified (n->user).  While a node_exit call
 * runs, n == &d->stack[d->depth - 1] and its ancestors are d->stack[0 ..
 * d->depth - 2]. Any callback may be NULL. */
typedef struct sertrace_core_visitor {
    void *ctx;
    int (*dump_open)(void *ctx, sertrace_dump_state *d);
    int (*node_enter)(void *ctx, sertrace_dump_state *d, sertrace_node *n);
    int (*node_exit)(void *ctx, sertrace_dump_state *d, sertrace_node *n);
    /* `n` is NULL for a note on the dump itself. */
    int (*note)(void *ctx, sertrace_dump_state *d, sertrace_node *n, const char *key,
                size_t key_len, const char *value, size_t value_len);
    /* `n` is the node at the ERROR's depth, or NULL when none is open. */
    int (*error)(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                 const char *message, size_t message_len, const char *path, size_t path_len);
    /* Last call for `d`; its stack is empty.  d->user must be released. */
    int (*dump_close)(void *ctx, sertrace_dump_state *d);
    /* Last call for `d` when its producer dropped it
     * (sertrace_core_dump_abort): nothing of it counts; d->user must be
     * released.  Its stack may hold open nodes (no node_exit for them).
     * A visitor without it cannot have dumps aborted. */
    int (*dump_abort)(void *ctx, sertrace_dump_state *d);
    /* Optional: a node with nothing nested in it (an ATOM record, or a
     * fed ATOM, one level below the open chain), node_enter and
     * node_exit in one call: `n` is closed (bytes, self set) and is
     * d->stack[d->depth - 1], as at node_exit.  NULL: node_enter then
     * node_exit are called. */
    int (*node_leaf)(void *ctx, sertrace_dump_state *d, sertrace_node *n);
} sertrace_core_visitor;

typedef struct sertrace_core sertrace_core;

/* Stream-wide counters. */
typedef struct sertrace_core_stats {
    uint64_t dumps_opened, dumps_closed, dumps_unfinished;
    uint64_t records_events, record_bytes;
    uint64_t discarded_events; /* sum of discarded-events notices */
    uint64_t discarded_notices;
    uint64_t lost_batches, malformed;
    uint64_t live_dumps, max_live_dumps;
    uint64_t dumps_aborted; /* sertrace_core_dump_abort (also in dumps_opened) */
} sertrace_core_stats;

/* Returns NULL when out of memory.  `v` is copied. */
sertrace_core *sertrace_core_create(const sertrace_core_visitor *v);
/* Frees every live dump WITHOUT calling the visitor (use finish first). */
void sertrace_core_destroy(sertrace_core *c);
/* Back to the state of a core just created with the same visitor,
 * keeping its recycled dumps (their stacks and tables): 0, or -1 while a
 * dump is live (call sertrace_core_finish() first). */
int sertrace_core_reset(sertrace_core *c);

/* A dump_begin event.  `serializer` need not be NUL-terminated (cut to 63
 * bytes).  Returns 0 or -1 (visitor failure / out of memory). */
int sertrace_core_dump_begin(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                             uint64_t dump_id, const char *serializer, size_t serializer_len,
                             int32_t protocol);

/* A records event: `n` bytes of records. */
int sertrace_core_records(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                          uint32_t seq, const uint8_t *bytes, size_t n);

/* A dump_end event. `status` is a SERTRACE_STATUS_* value. */
int sertrace_core_dump_end(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                           uint64_t bytes, int status);

/* The same, with dump_end's `batches` (schema v2: how many records events
 * the dump emitted; -1 when the trace does not say).  Records events
 * missing at the end count as lost batches (a lost LAST batch has no seq
 * gap to show it); 0 with none seen sets SERTRACE_DUMPF_NO_RECORDS. */
int sertrace_core_dump_end_batches(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                                   uint64_t dump_id, uint64_t bytes, int status, int64_t batches);

/* The same, with dump_end's `flags` (schema v3, SERTRACE_END_* bits; 0
 * for older traces).  SERTRACE_END_LOWER_BOUNDS sets
 * SERTRACE_DUMPF_LOWER_BOUNDS before the dump closes. */
int sertrace_core_dump_end_flags(sertrace_core *c, int64_t pid, int64_t tid, int64_t ts,
                                 uint64_t dump_id, uint64_t bytes, int status, int64_t batches,
                                 uint32_t end_flags);

/* The tracer discarded `count` events.  `pid` is the process whose buffer
 * lost them when known (per-PID traces), else -1: every live dump of that
 * process (or every live dump) is marked. */
int sertrace_core_discarded(sertrace_core *c, int64_t pid, uint64_t count);

/* ---- a producer in the same process (sertrace inspect) ------------------
 *
 * A recording can only append records; a producer that reads the payload
 * itself (the pickle emulator) may learn a fact about an open node later
 * than its ENTER, or find that a dump it began feeding must be fed again
 * another way.  These two calls serve it; records and these calls go to
 * the same dump in stream order (flush pending records first). */

/* Set the item count (`length`) of the open node at `depth` of a live
 * dump, before its EXIT: a container's count is known at its last item,
 * after its ENTER was fed (the summary does not read it; the tree and the
 * exports read it at the node's exit or later).  Returns 0, or -1 when
 * the dump or the node is not there. */
int sertrace_core_node_length(sertrace_core *c, int64_t pid, uint64_t dump_id, uint32_t depth,
                              uint64_t length);

/* Nodes fed directly, without encoding records the core decodes again:
 * each call is the record it names (ENTER, EXIT or ATOM with its LABEL;
 * TYPE or NAME; NOTE), placed by the same code as the decoded record
 * (depth rules, labels, visitor calls).  One that would be malformed
 * (absurd depth or type index) counts as a malformed batch of one record.
 * A dump fed only so has no records events: end it with `batches` -1 (0
 * when it fed no node).  `d` is sertrace_core_live_dump()'s, valid until
 * the dump ends or is aborted.  Returns 0, or -1 (visitor failure / out
 * of memory). */
typedef struct sertrace_core_node_in {
    uint8_t op;         /* SERTRACE_REC_ENTER, SERTRACE_REC_EXIT or SERTRACE_REC_ATOM */
    uint8_t tag;        /* ENTER, ATOM: SERTRACE_TAG_* */
    uint8_t label_kind; /* ENTER, ATOM: SERTRACE_LABEL_*, NONE without a label */
    uint32_t depth;
    uint32_t type;   /* ENTER, ATOM: per-dump type index, 0 = none */
    uint64_t label;  /* with label_kind */
    uint64_t addr;   /* ENTER, ATOM */
    uint64_t length; /* ENTER, ATOM: items + 1, or 0 */
    uint64_t pos;    /* ENTER, ATOM: first byte; EXIT: end */
    uint64_t bytes;  /* ATOM */
} sertrace_core_node_in;

/* The live dump (pid, dump_id), or NULL. */
sertrace_dump_state *sertrace_core_live_dump(sertrace_core *c, int64_t pid, uint64_t dump_id);
int sertrace_core_node(sertrace_core *c, sertrace_dump_state *d, const sertrace_core_node_in *in);
/* in[0 .. n) in order, each as sertrace_core_node would place it, in one
 * call (a producer feeds a batch of nodes; nothing is encoded). */
int sertrace_core_nodes(sertrace_core *c, sertrace_dump_state *d, const sertrace_core_node_in *in,
                        size_t n);
/* A TYPE record (label false) or a NAME record (label true). */
int sertrace_core_define(sertrace_core *c, sertrace_dump_state *d, uint32_t index, const char *text,
                         size_t len, bool label);
/* A NOTE record at `depth` (0: on the dump). */
int sertrace_core_note_at(sertrace_core *c, sertrace_dump_state *d, uint32_t depth, const char *key,
                          size_t key_len, const char *value, size_t value_len);

/* True when every visitor callback needed to drop a dump is there
 * (dump_abort): only then may a producer feed a dump it may abort. */
bool sertrace_core_can_abort(const sertrace_core *c);

/* Drop a live dump: its open nodes get no node_exit, the visitor's
 * dump_abort releases what it kept, and nothing of it is reported (a
 * later dump_begin with the same ids starts afresh).  No dump: 0.
 * Returns -1 when the visitor cannot abort or failed. */
int sertrace_core_dump_abort(sertrace_core *c, int64_t pid, uint64_t dump_id);

/* End of stream: every live dump is closed as unfinished, its open nodes
 * innermost first (flag SERTRACE_NODE_UNFINISHED), then dump_close. */
int sertrace_core_finish(sertrace_core *c);

const sertrace_core_stats *sertrace_core_get_stats(const sertrace_core *c);

/* Name of a per-dump type index, or NULL (len 0) when undefined.  Also
 * the text of a NAME index (schema v5: one index space for both). */
const char *sertrace_core_type_name(const sertrace_dump_state *d, uint32_t type, size_t *len);

/* True when n->bytes is exact (enter and exit seen, positions sane). */
static inline bool sertrace_node_bytes_exact(const sertrace_node *n)
{
    return !(n->flags & (SERTRACE_NODE_NO_ENTER | SERTRACE_NODE_NO_EXIT | SERTRACE_NODE_UNFINISHED |
                         SERTRACE_NODE_MALFORMED | SERTRACE_NODE_FAILED |
                         SERTRACE_NODE_EXIT_UNSURE | SERTRACE_NODE_LOWER_BOUND));
}

/* Exact, lower bound, upper bound or neither (enum
 * sertrace_node_bound_kind). */
static inline int sertrace_node_bound(const sertrace_node *n)
{
    if (sertrace_node_bytes_exact(n))
        return SERTRACE_BOUND_EXACT;
    /* an upper bound in a dump whose sizes fall short: neither */
    if ((n->flags & SERTRACE_NODE_EXIT_UNSURE) && !(n->flags & SERTRACE_NODE_MALFORMED))
        return (n->flags & (SERTRACE_NODE_NO_ENTER | SERTRACE_NODE_LOWER_BOUND))
                   ? SERTRACE_BOUND_UNKNOWN
                   : SERTRACE_BOUND_UPPER;
    return SERTRACE_BOUND_LOWER;
}

/* True when n->self is exact too. */
static inline bool sertrace_node_self_exact(const sertrace_node *n)
{
    return sertrace_node_bytes_exact(n) &&
           !(n->flags & (SERTRACE_NODE_PARTIAL | SERTRACE_NODE_CHILD_INEXACT));
}

/* True when the dump lost nothing and ended normally: every size in it
 * is exact. */
bool sertrace_dump_complete(const sertrace_dump_state *d);

#ifdef __cplusplus
}
#endif

#endif /* SERTRACE_CORE_H */
