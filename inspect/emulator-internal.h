/* emulator-internal.h -- what the files of the pickle emulator share.
 *
 * The emulator (inspect.h's sertrace_inspect_run) is split by job:
 * emulator.c the opcodes' effects and the pickle-by-pickle driver,
 * emulator-reader.h the bounds-checked opcode decoder (included by
 * emulator.c only, so that it inlines into the loop), emulator-machine.c the
 * stack, marks, memo puts and gets, emulator-tables.c the memory budget,
 * the type-name table and the memo hash, emulator-records.c the nodes'
 * nesting and their schema records fed to the core, emulator-observe.c the
 * audit hooks and pickles nested in loads() arguments.  This header holds
 * their shared state (the opcodes, items, marks, nodes, the machine) and the
 * small item and node constructors every part uses, inlined.  Internal:
 * nothing outside inspect/ includes it.
 */
#ifndef SERTRACE_EMULATOR_INTERNAL_H
#define SERTRACE_EMULATOR_INTERNAL_H

#include "inspect.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sertrace/schema.h"

/* ---- opcodes: OP_MARK ... (pickle-format/pickle-opcodes.h) -------------- */

#include "pickle-opcodes.h"

#define FRAME_HEADER 9u
#define NO_NODE UINT32_MAX
/* it_node of an object whose It node was streamed to the core and dropped:
 * more items for it would grow a node fed already (the dump is read again) */
#define IT_FED (UINT32_MAX - 1)

/* What an item is, as far as the bytes tell. */
#define NO_KEY UINT64_MAX

enum item_kind {
    IK_SETTER, /* the result of an object's state setter call, POPped next */
    IK_ATOM,   /* None, bool, int, float, bytes: no node at default granularity */
    IK_STR,    /* str: text at [text_off, text_off + text_len) of the input */
    IK_NODE,   /* an object with a node (container, global, reduce-built...) */
    IK_GLOBAL, /* a global (has a node tagged G; `type` is its name) */
};

#define KEY_LABEL_SLOTS 64

typedef struct item {
    uint64_t start;      /* position of its first byte */
    uint32_t first_node; /* arena size when its first byte was read */
    uint32_t node;       /* its node, or NO_NODE */
    uint32_t type;       /* type index (0 none) */
    uint32_t it_node;    /* open It node of a reduce-built object, NO_NODE, or IT_FED */
    uint32_t text_len;
    uint64_t text_off;
    uint32_t atom_nodes_end; /* IK_ATOM from a REDUCE: its nodes are [first_node, this) */
    uint64_t memo_key;       /* last memo key it was stored under or read from, NO_KEY if none */
    /* tuples: what a REDUCE needs of its arguments */
    uint64_t arg0_key;  /* memo key of element 0, NO_KEY if none */
    uint32_t arg0_type; /* type of element 0 (a global's name) */
    uint32_t arg1_len;  /* text of element 1 when it is a str */
    uint64_t arg1_off;
    bool arg0_global;  /* element 0 is a global */
    uint32_t arg0_len; /* data of element 0 when it is bytes (a nested pickle?) */
    uint64_t arg0_off;
    uint32_t nargs;   /* tuples: number of elements */
    uint8_t shape[4]; /* tuples: tags of the first elements (audit) */
    bool global;      /* a global, or a memo hit on one */
    bool from_memo;   /* pushed by a GET */
    bool call_result; /* the result of REDUCE / NEWOBJ / ... */
    bool fed;         /* its node was streamed to the core and dropped (node NO_NODE) */
    uint8_t kind;
    uint8_t tag; /* node tag, or the tag a root atom would get */
    uint8_t enc; /* str and int atoms: the opcode that wrote them (how to read text_off) */
} item;
/* push() sets each field: a field added here must be set there too. */
_Static_assert(sizeof(item) == 112, "item changed: update push()");

typedef struct mark {
    uint64_t start;
    uint32_t first_node;
    uint32_t stack_len; /* items below the mark */
    /* items of its group streamed and taken off the stack (a big tuple or
     * frozenset, README "Streaming": emu_stream_group), between its first two
     * items and the rest: its TUPLE / FROZENSET counts them */
    uint32_t dropped;
} mark;

typedef struct node {
    uint64_t start, end;
    uint64_t length; /* items + 1, 0 when none */
    uint32_t type;
    /* The identity of the object this node stands for (emu_object_of):
     * its own, numbered at creation, or a memo reference's target's (an
     * It or Ext node's object's).  Given as the node's address when the
     * object is shared (emu_node_address), so that the summary matches
     * memo references with their targets as in a recording (where it is
     * id(obj)). */
    uint32_t object;
    uint8_t tag;
    bool dead;    /* inside an atom (bytes through _codecs.encode), unless that atom is the root */
    uint8_t note; /* NOTE_* said under the node */
    uint8_t label_kind; /* SERTRACE_LABEL_*: what it is to its parent, 0 none */
    bool shared;        /* a memo reference points to it (emu_node_address) */
    bool memoized;      /* a memo slot holds it (a streamed node's address; a tuple
                           level's placeholder is entered with its number too) */
    uint64_t label;     /* its value (KEY: a name index; HIDDEN: numbered at STOP) */
    uint64_t added;     /* items given by APPEND(S)/SETITEM(S) so far: the next position */
} node;

/* Notes the emulator attaches to nodes whose kind only an import could tell. */
enum { NOTE_NONE, NOTE_GETATTR };
static const char note_key[] = "inspect";
static const char note_getattr[] =
    "getattr(global, name): a nested class by reference (T4) or an attribute such as a method "
    "(R); only an import can tell";

typedef struct memo_entry {
    uint64_t key;
    bool used;
    bool global;
    uint8_t kind, tag, enc;
    uint32_t type;
    uint64_t length;
    uint64_t text_off;
    uint32_t text_len;
    uint32_t object; /* identity of the object stored (emu_object_of), 0 for an atom */
} memo_entry;

/* An item pushed by a memo GET (the general step's and the atoms' loop's):
 * what the PUT recorded of the object. */
static inline void emu_from_memo(item *it, const memo_entry *m, uint64_t key)
{
    it->global = m->global;
    it->from_memo = true;
    it->memo_key = key;
    it->type = m->type;
    it->text_off = m->text_off;
    it->text_len = m->text_len;
    it->enc = m->enc;
}

/* Streaming (README "Streaming"): a level of the chain of open
 * containers fed before STOP -- the container at stack index `index`, whose
 * group (the items above it, up to the next level's container) is
 * predicted to be consumed by one opcode into it: SETITEM(S) for a dict,
 * APPEND(S) for a list, ADDITEMS for a set, BUILD for an object. */
#define STREAM_CHAIN_MAX 64
#define STREAM_STACK_MAX 65536u /* a longer stack is not read (time linear) */
typedef struct stream_level {
    uint32_t index; /* stack index of the level's container */
    uint32_t marks; /* marks left once its group is consumed */
    uint64_t added; /* a list without MARK: its `added` once the group is consumed */
    uint8_t tag;    /* the container's tag: which opcode consumes the group
                       (SERTRACE_TAG_TUPLE: a tuple level, below) */
    bool mark;      /* the group opens with a MARK at index + 1 (a tuple level: at index) */
    uint8_t code;   /* a tuple or call level: its TUPLE / TUPLE1-3 / REDUCE / NEWOBJ(_EX)
                       (the walk ahead saw it); 0 for a container's */
    uint32_t type;  /* a call level: its node's type (the callable's name, the
                       class for a copyreg reconstructor) */
} stream_level;

/* A tuple level (README "Streaming"): a tuple being built around a level
 * of the chain has no item yet -- its elements are on the stack from
 * `index` (the slot its item will take) up -- and no node until its TUPLE
 * opcode; the walk ahead (emulator-records.c `ahead`) finds that opcode in
 * the bytes, a placeholder node is entered in its place and the TUPLE
 * completes it (emu_stream_tuple).  What the walk found for the item at
 * a slot: the tuples that will wrap it (innermost first) and the opcode
 * that consumes the outermost, cached while none of them has run. */
#define AHEAD_WRAPS 8
#define AHEAD_CACHE 160
typedef struct stream_ahead {
    uint64_t start;  /* the item's start (with slot: the key) */
    size_t first_at; /* input offset of its first wrap or consumer: valid up to it */
    uint32_t slot;
    uint32_t fslot; /* the consumer's stack height once it popped */
    uint32_t wslot[AHEAD_WRAPS];
    uint8_t wcode[AHEAD_WRAPS];
    uint8_t nwrap;
    uint8_t fcode; /* the consumer's opcode, 0 when the walk failed */
    /* where the walk stopped (right after the consumer) and the stack
     * there: its height and marks (the first end_nm of the stack's marks
     * now); the walk of the level below resumes from it */
    size_t end_at;
    uint32_t end_h, end_nm;
} stream_ahead;

typedef struct emu {
    const uint8_t *in;
    size_t n;
    size_t base;  /* input offset of this pickle's first byte */
    uint64_t pos; /* logical position (relative to base) */
    bool frame_pending;
    uint64_t frame_end;   /* input offset where the current frame ends */
    uint64_t frame_start; /* input offset of its FRAME opcode */
    int protocol;
    int max_op_proto;

    item *stack;
    uint32_t nstack, cap_stack;
    mark *marks;
    uint32_t nmarks, cap_marks;
    node *nodes;
    uint32_t nnodes, cap_nodes;
    memo_entry *memo; /* sparse keys: open-addressing hash */
    uint64_t memo_cap, memo_used;
    memo_entry *dense; /* keys below dense_cap (MEMOIZE's 0, 1, 2 ...): indexed */
    uint64_t dense_cap, dense_used;
    uint64_t dense_init; /* entries [0, dense_init) are initialized */

    /* per-pickle type table: names in an arena, open hash for dedupe */
    char *names;
    uint64_t names_len, names_cap;
    uint32_t *type_off, *type_len;
    uint32_t ntypes, cap_types; /* index 0 unused */
    uint32_t *type_hash;
    uint32_t type_hash_cap;

    uint32_t common_types[8]; /* type indices of builtin names, 0 until used */
    /* emu_label_value's str keys already read (a memoized key, GET again:
     * the same text offset): direct-mapped by the key's text offset + 1
     * (0 empty), the label's name index (0: hidden); cleared per pickle */
    uint64_t key_label_off[KEY_LABEL_SLOTS];
    uint32_t key_label_index[KEY_LABEL_SLOTS];
    uint64_t memory, peak;
    const sertrace_inspect_limits *lim;
    sertrace_inspect_result *res;
    sertrace_core *core;
    uint64_t dump_id;

    /* Items just discarded by POP / POP_MARK: a GET right after them is the
     * pickler's way to finish an object that became memoized while its
     * parts were written (a recursive tuple, a recursive reduce), so it is
     * part of that object, not a back-reference node. */
    bool discarded;
    uint64_t discard_start;
    uint32_t discard_first;
    uint32_t discard_node; /* the reduce-built object popped, or NO_NODE */
    uint8_t last_op;
    bool discard_call;   /* a call result was among the discarded items */
    uint64_t discard_at; /* offset of that POP */

    const sertrace_inspect_observer *obs;
    bool single;  /* audit: one pickle, what follows STOP is data */
    bool no_fast; /* run_atoms and sort_nested off (SERTRACE_INSPECT_NO_FAST, tests: the general
                     loop and sorts alone) */
    int nesting;  /* pickles nested in loads() arguments, audited in turn */

    /* emu_emit_dump's sort order and nesting stack (nnodes + 1 each),
     * kept across pickles and runs (they are counted in its `extra`) */
    uint32_t *order, *open;
    uint32_t cap_order;

    sertrace_dump_state *dump; /* the dump being fed (between begin and end) */

    /* identities (node.object) and the dump being fed (emulator-records.c) */
    uint32_t next_id;  /* last identity given in this pickle */
    uint32_t id_shift; /* a live node past the root has identity index + id_shift */
    bool stream_ok;    /* this pickle may be streamed (README "Streaming") */
    int begun_proto;   /* the protocol its dump_begin carried */
    bool streamed;     /* its dump is open in the core: the root fed, batches after */
    uint32_t stream_nodes;
    uint64_t hidden; /* HIDDEN keys numbered so far in the dump */
    uint64_t fed;    /* nodes fed for the dump */
    bool *typed;     /* type / name indices whose TYPE / NAME record the dump has */
    uint32_t cap_typed;

    /* The open chain of a streamed dump (emulator-records.c): nodes
     * [0, nkept) are open in the core, at depths 1..nkept, with the
     * addresses kept_addr; nodes with an identity up to id_fed were fed
     * (only the kept ones are still live).  spec[0, nspec) are the
     * levels whose groups are still on the stack; an opcode that brings
     * the stack down to spec_watch items must be the predicted consumer
     * (emu_stream_watch), else the dump is read again (stream_wrong). */
    uint32_t nkept, id_fed, nspec, spec_watch;
    uint32_t stream_retry; /* a stack not read as a chain: again once nnodes is this */
    bool stream_wrong;
    uint64_t stream_pos; /* e->pos at the last feed: every later node starts there or after */
    uint64_t kept_addr[STREAM_CHAIN_MAX + 2];
    stream_level spec[STREAM_CHAIN_MAX];
    /* the walk ahead's cache (tuple levels) and the bytes it walked in
     * this pickle (at most 4 x its length: time stays linear) */
    stream_ahead ahead_cache[AHEAD_CACHE];
    uint32_t nahead;
    uint64_t ahead_bytes;
    /* big groups (emu_stream_group): tried once the stack holds group_at
     * items (group_tries more times after one that did not read);
     * group_min: the items a group needs; compacted: a group's items were
     * taken off the stack (then a wrong prediction or an error reads the
     * pickle again at once: the stack no longer is the bytes') */
    uint32_t group_at, group_min, group_tries;
    bool compacted;
} emu;

typedef struct op {
    uint8_t code;
    size_t at;           /* input offset of the opcode */
    const uint8_t *arg;  /* argument bytes (after the opcode byte) */
    uint64_t num;        /* decoded integer argument (lengths, memo keys, ext codes) */
    const uint8_t *data; /* payload of length-prefixed and line opcodes */
    uint64_t data_len;
    const uint8_t *data2; /* second line of GLOBAL / INST */
    uint64_t data2_len;
    size_t len; /* whole opcode, in bytes */
} op;

/* A tuple item built from the items at [from, from + k) remembers what a
 * REDUCE may need of them; call before they are replaced. */
typedef struct tuple_args {
    uint64_t arg0_key, arg1_off, arg0_off;
    uint32_t arg0_type, arg1_len, nargs, arg0_len;
    uint8_t shape[4];
    bool arg0_global;
} tuple_args;

/* ---- shared functions (each file's section says what they do) ------------ */

/* Internal to the emulator: hidden, so calls between its files are direct
 * even in a shared object (no PLT), and nothing else can bind to them. */
#pragma GCC visibility push(hidden)

/* Each byte's argument code (PICKLE_ARG_FIXED(n) ...: pickle-opcodes.h),
 * 0 for a byte that is no opcode: the one table of argument lengths, read
 * by the decoder (emulator-reader.h read_op) and the walk ahead
 * (emulator-records.c op_size).  In emulator-tables.c. */
extern const uint8_t emu_op_arg[256];

int emu_fail(emu *e, int status, uint64_t at, const char *fmt, const char *arg);
int emu_grow(emu *e, void **p, uint32_t *cap, uint64_t need, size_t size);
uint32_t emu_intern_type2(emu *e, const char *mod, size_t mlen, const char *name, size_t nlen);
memo_entry *emu_memo_find(emu *e, uint64_t key, bool insert);
const char *emu_type_name(emu *e, uint32_t type, uint32_t *len);
bool emu_name_is(emu *e, uint32_t type, const char *s);
int emu_obs_evasion(emu *e, uint64_t at, int kind, const char *detail);
int emu_obs_global(emu *e, uint64_t at, int how, uint32_t type);
int emu_obs_call(emu *e, uint64_t at, int opcode, const item *fn, const item *args,
                 const char *args_text);
size_t emu_full_name(emu *e, uint32_t type, char *buf, size_t cap);
const char *emu_shape_name(uint8_t tag);
int emu_audit_nested(emu *e, const op *o, const item *fn, const item *args);
int emu_emit_dump(emu *e, uint64_t total);
int emu_stream_batch(emu *e, size_t next);
int emu_stream_group(emu *e, size_t next);
void emu_stream_watch(emu *e, uint8_t code);
uint32_t emu_stream_pending(emu *e, uint8_t code, uint32_t slot);
int emu_abort_dump(emu *e);
int emu_need_items(emu *e, const op *o, uint32_t k);
int emu_pop_mark(emu *e, const op *o, mark *m);
item *emu_replace(emu *e, uint32_t from, uint64_t start, uint32_t first_node, uint8_t kind,
                  uint8_t tag);
int emu_add_items(emu *e, item *target, uint64_t items_start, uint64_t count);
int emu_memo_put(emu *e, const op *o, uint64_t key);
void emu_label(emu *e, const item *it, uint8_t kind, uint64_t value);
int emu_label_value(emu *e, const item *key, const item *value);
int emu_memo_get(emu *e, const op *o, uint64_t key, uint64_t start, uint32_t first,
                 bool after_discard);
int emu_run_internal(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                     sertrace_core *core, const sertrace_inspect_observer *obs, bool single,
                     int nesting, sertrace_inspect_result *res);
#pragma GCC visibility pop

#define MAX_NESTING 4

/* ---- nodes and items ------------------------------------------------------ */

static inline uint32_t new_node(emu *e, uint8_t tag, uint32_t type, uint64_t start, uint64_t length)
{
    node *n;
    if (e->nnodes == e->cap_nodes && emu_grow(e, (void **)&e->nodes, &e->cap_nodes,
                                              (uint64_t)e->nnodes + 1, sizeof *e->nodes) < 0)
        return NO_NODE;
    n = &e->nodes[e->nnodes];
    n->start = start;
    n->end = e->pos;
    n->length = length;
    n->type = type;
    n->object = ++e->next_id;
    n->shared = false;
    n->memoized = false;
    n->tag = tag;
    n->dead = false;
    n->note = NOTE_NONE;
    n->label_kind = SERTRACE_LABEL_NONE;
    n->label = 0;
    n->added = 0;
    return e->nnodes++;
}

/* The identity of node i's object (no object address is in the bytes;
 * emu_node_address gives it to shared ones): a number per pickle, its own
 * for a node that is its object; a memo reference's is its target's, an It
 * or Ext node's that of the object it is part of, as a recording gives
 * them (the pickler passes the same object).  Nonzero. */
static inline uint32_t emu_object_of(const emu *e, uint32_t i)
{
    return e->nodes[i].object;
}

/* The live node whose own identity is `id`, or NO_NODE (fed and dropped
 * by streaming, or none).  A node's identity is index + id_shift (1 until
 * streaming drops nodes: then next_id + 1 - nkept of that moment); the
 * nodes streaming keeps open (at most STREAM_CHAIN_MAX + 2, at indices
 * [0, nkept)) are found by their identity. */
static inline uint32_t emu_node_of_id(const emu *e, uint32_t id)
{
    if (id == 0)
        return NO_NODE;
    if (id <= e->id_fed) {
        for (uint32_t k = 0; k < e->nkept; k++)
            if (e->nodes[k].object == id)
                return k;
        return NO_NODE; /* fed and dropped */
    }
    uint64_t i = (uint64_t)id - e->id_shift;
    if (i >= e->nnodes || e->nodes[i].object != id)
        return NO_NODE;
    return (uint32_t)i;
}

/* A streamed dump whose deepest pending level is a tuple or a call (its
 * TUPLE / REDUCE / NEWOBJ completes a placeholder: emu_stream_pending). */
static inline bool emu_pending_top(const emu *e, uint32_t slot)
{
    return e->streamed && e->nspec && e->spec[e->nspec - 1].code &&
           e->spec[e->nspec - 1].index == slot;
}

static inline item *push(emu *e, uint64_t start, uint32_t first_node, uint8_t kind, uint8_t tag)
{
    item *it;
    if (e->nstack == e->cap_stack && emu_grow(e, (void **)&e->stack, &e->cap_stack,
                                              (uint64_t)e->nstack + 1, sizeof *e->stack) < 0)
        return NULL;
    it = &e->stack[e->nstack++];
    /* every field stored one by one: a memset (or a struct literal) of an
     * item compiles to `rep stos`, which cost half of an atom's opcode */
    it->start = start;
    it->first_node = first_node;
    it->node = NO_NODE;
    it->type = 0;
    it->it_node = NO_NODE;
    it->text_len = 0;
    it->text_off = 0;
    it->atom_nodes_end = 0;
    it->memo_key = NO_KEY;
    it->arg0_key = NO_KEY;
    it->arg0_type = 0;
    it->arg1_len = 0;
    it->arg1_off = 0;
    it->arg0_global = false;
    it->arg0_len = 0;
    it->arg0_off = 0;
    it->nargs = 0;
    memset(it->shape, 0, sizeof it->shape);
    it->global = kind == IK_GLOBAL;
    it->from_memo = false;
    it->call_result = false;
    it->fed = false;
    it->kind = kind;
    it->tag = tag;
    it->enc = 0;
    return it;
}

/* The item's node (if any) now ends at the current position.  An item
 * whose node was streamed already cannot grow: the dump is read again. */
static inline void touch(emu *e, item *it)
{
    if (it->node != NO_NODE)
        e->nodes[it->node].end = e->pos;
    else if (it->fed)
        e->stream_wrong = true;
}

/* The few builtin names every container asks for, cached per pickle
 * (e->common_types): emu_common_type(e, COMMON_TUPLE) where the name is
 * known, emu_intern_type finds them by pointer (no strcmp per container). */
enum { COMMON_LIST, COMMON_DICT, COMMON_TUPLE, COMMON_SET, COMMON_FROZENSET };
static const char *const emu_common_names[8] = {
    "list", "dict", "tuple", "set", "frozenset", "bytearray", "pickle.PickleBuffer", NULL};

static inline uint32_t emu_common_type(emu *e, int i)
{
    if (!e->common_types[i])
        e->common_types[i] =
            emu_intern_type2(e, NULL, 0, emu_common_names[i], strlen(emu_common_names[i]));
    return e->common_types[i];
}

/* The type index of `name`. */
static inline uint32_t emu_intern_type(emu *e, const char *name)
{
    const char *const *common = emu_common_names;
    int i;
    /* the same literal is one object in a file, as a rule: pointers first */
    for (i = 0; common[i] && common[i] != name; i++)
        ;
    if (!common[i])
        for (i = 0; common[i] && strcmp(common[i], name) != 0; i++)
            ;
    if (common[i])
        return emu_common_type(e, i);
    return emu_intern_type2(e, NULL, 0, name, strlen(name));
}

/* What a tuple built from the items at [from, from + k) remembers for a
 * REDUCE (take before they are replaced, give to the tuple's item).
 * Inline: returned through memory, the struct cost a store-forwarding
 * stall per tuple. */
static inline tuple_args emu_take_args(emu *e, uint32_t from, uint64_t k)
{
    tuple_args a = {NO_KEY, 0, 0, 0, 0, 0, 0, {0}, false};
    a.nargs = k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
    for (uint32_t i = 0; e->obs && i < 4 && i < k; i++) { /* shapes: for the audit */
        const item *x = &e->stack[from + i];
        a.shape[i] = x->node != NO_NODE ? e->nodes[x->node].tag : x->tag;
    }
    if (k >= 1) {
        a.arg0_key = e->stack[from].memo_key;
        a.arg0_type = e->stack[from].type;
        a.arg0_global = e->stack[from].global;
        if (e->stack[from].tag == SERTRACE_TAG_BYTES && e->stack[from].kind == IK_ATOM) {
            a.arg0_off = e->stack[from].text_off;
            a.arg0_len = e->stack[from].text_len;
        }
    }
    if (k >= 2 && e->stack[from + 1].kind == IK_STR) {
        a.arg1_off = e->stack[from + 1].text_off;
        a.arg1_len = e->stack[from + 1].text_len;
    }
    return a;
}

static inline void emu_give_args(item *it, const tuple_args *a)
{
    it->arg0_key = a->arg0_key;
    it->arg0_type = a->arg0_type;
    it->arg1_off = a->arg1_off;
    it->arg1_len = a->arg1_len;
    it->nargs = a->nargs;
    memcpy(it->shape, a->shape, sizeof it->shape);
    it->arg0_global = a->arg0_global;
    it->arg0_off = a->arg0_off;
    it->arg0_len = a->arg0_len;
}

#endif /* SERTRACE_EMULATOR_INTERNAL_H */
