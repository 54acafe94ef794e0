/* emulator.c -- the pickle machine, emulated without running anything.
 *
 * One pass over the bytes, one opcode at a time: a bounds-checked reader
 * (every declared length is checked against the bytes that are left before
 * anything is allocated), then the opcode's effect on a stack of items, a
 * stack of marks and the memo.  Items carry no values, only what the tree
 * needs: where their bytes began (a position counted as the recording counts
 * it), which node they own, and for strings where their text lies in the
 * input (STACK_GLOBAL names).  Nodes live in one arena per pickle; at STOP
 * they are sorted by span and nested with an explicit stack, then encoded
 * as schema records (schema.h) and fed to the tree core.  Nothing here
 * recurses, so depth costs memory (counted against the limit), not C stack.
 *
 * Why spans rather than parent links: the pickler's save() of an object
 * writes all of the object's bytes, its children's included, between the
 * node's enter and exit, so the recorded tree IS the nesting of the spans.
 * Rebuilding it from spans needs no knowledge of which opcode consumed
 * which item, and stays a tree whatever a hostile stream does.
 */
#define _GNU_SOURCE /* qsort_r */
#include "inspect.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sertrace/schema.h"

/* ---- opcodes (pickletools' names and values) --------------------------- */

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_POP = '0',
    OP_POP_MARK = '1',
    OP_DUP = '2',
    OP_FLOAT = 'F',
    OP_INT = 'I',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_LONG = 'L',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_PERSID = 'P',
    OP_BINPERSID = 'Q',
    OP_REDUCE = 'R',
    OP_STRING = 'S',
    OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U',
    OP_UNICODE = 'V',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_BUILD = 'b',
    OP_GLOBAL = 'c',
    OP_DICT = 'd',
    OP_EMPTY_DICT = '}',
    OP_APPENDS = 'e',
    OP_GET = 'g',
    OP_BINGET = 'h',
    OP_INST = 'i',
    OP_LONG_BINGET = 'j',
    OP_LIST = 'l',
    OP_EMPTY_LIST = ']',
    OP_OBJ = 'o',
    OP_PUT = 'p',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_BINBYTES = 'B',
    OP_SHORT_BINBYTES = 'C',
    OP_PROTO = 0x80,
    OP_NEWOBJ = 0x81,
    OP_EXT1 = 0x82,
    OP_EXT2 = 0x83,
    OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d,
    OP_BINBYTES8 = 0x8e,
    OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90,
    OP_FROZENSET = 0x91,
    OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95,
    OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97,
    OP_READONLY_BUFFER = 0x98,
};

#define FRAME_HEADER 9u
#define NO_NODE UINT32_MAX
#define RECORD_BATCH SERTRACE_BATCH_BYTES

/* What an item is, as far as the bytes tell. */
#define NO_KEY UINT64_MAX

enum item_kind {
    IK_SETTER, /* the result of an object's state setter call, POPped next */
    IK_ATOM,   /* None, bool, int, float, bytes: no node at default granularity */
    IK_STR,    /* str: text at [text_off, text_off + text_len) of the input */
    IK_NODE,   /* an object with a node (container, global, reduce-built...) */
    IK_GLOBAL, /* a global (has a node tagged G; `type` is its name) */
};

typedef struct item {
    uint64_t start;      /* position of its first byte */
    uint32_t first_node; /* arena size when its first byte was read */
    uint32_t node;       /* its node, or NO_NODE */
    uint32_t type;       /* type index (0 none) */
    uint32_t it_node;    /* open It node of a reduce-built object, or NO_NODE */
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
    uint8_t kind;
    uint8_t tag; /* node tag, or the tag a root atom would get */
} item;

typedef struct mark {
    uint64_t start;
    uint32_t first_node;
    uint32_t stack_len; /* items below the mark */
} mark;

typedef struct node {
    uint64_t start, end;
    uint64_t length; /* items + 1, 0 when none */
    uint32_t type;
    uint8_t tag;
    bool dead;    /* inside an atom (bytes through _codecs.encode), unless that atom is the root */
    uint8_t note; /* NOTE_* said under the node */
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
    uint8_t kind, tag;
    uint32_t type;
    uint64_t length;
    uint64_t text_off;
    uint32_t text_len;
} memo_entry;

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
    memo_entry *memo;
    uint64_t memo_cap, memo_used;

    /* per-pickle type table: names in an arena, open hash for dedupe */
    char *names;
    uint64_t names_len, names_cap;
    uint32_t *type_off, *type_len;
    uint32_t ntypes, cap_types; /* index 0 unused */
    uint32_t *type_hash;
    uint32_t type_hash_cap;

    uint32_t common_types[8]; /* type indices of builtin names, 0 until used */
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
    bool single; /* audit: one pickle, what follows STOP is data */
    int nesting; /* pickles nested in loads() arguments, audited in turn */

    uint8_t batch[RECORD_BATCH];
    size_t batch_len;
    uint32_t seq;
} emu;

/* ---- errors and memory -------------------------------------------------- */

static int fail(emu *e, int status, uint64_t at, const char *fmt, const char *arg)
{
    if (e->res->status == SERTRACE_INSPECT_OK) {
        e->res->status = status;
        e->res->offset = at;
        snprintf(e->res->reason, sizeof e->res->reason, fmt, arg ? arg : "");
    }
    return -1;
}

/* Grow *p (elements of `size` bytes) to hold at least `need`, counting the
 * memory against the limit.  0 or -1 (status set). */
static int grow(emu *e, void **p, uint32_t *cap, uint64_t need, size_t size)
{
    uint64_t ncap;
    void *q;

    if (need <= *cap)
        return 0;
    ncap = *cap ? (uint64_t)*cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX - 1)
        return fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                    "more than %s4294967294 entries in one table", "");
    if (e->memory + (ncap - *cap) * size > e->lim->max_memory)
        return fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                    "memory limit reached (the stack, memo and nodes of this pickle need more than "
                    "the limit%s; raise it with --max-memory)",
                    "");
    q = realloc(*p, ncap * size);
    if (!q)
        return fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
    e->memory += (ncap - *cap) * size;
    if (e->memory > e->peak)
        e->peak = e->memory;
    *p = q;
    *cap = (uint32_t)ncap;
    return 0;
}

/* ---- types ---------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int rehash_types(emu *e, uint32_t cap)
{
    uint32_t *t;
    if (e->memory + (uint64_t)cap * 4 > e->lim->max_memory)
        return fail(e, SERTRACE_INSPECT_LIMIT, e->base, "memory limit reached (type names%s)", "");
    t = calloc(cap, sizeof *t);
    if (!t)
        return fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
    for (uint32_t i = 1; i <= e->ntypes; i++) {
        uint32_t h = hash_bytes(e->names + e->type_off[i], e->type_len[i]) & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    e->memory += (uint64_t)cap * 4 - (uint64_t)e->type_hash_cap * 4;
    free(e->type_hash);
    e->type_hash = t;
    e->type_hash_cap = cap;
    return 0;
}

/* The type index of `name` (module omitted for builtins), 0 on error. */
static uint32_t intern_type2(emu *e, const char *mod, size_t mlen, const char *name, size_t nlen)
{
    char buf[SERTRACE_STRING_MAX];
    size_t len = 0;
    uint32_t h, i;

    if (mlen && !(mlen == 8 && memcmp(mod, "builtins", 8) == 0) &&
        !(mlen == 11 && memcmp(mod, "__builtin__", 11) == 0)) {
        if (mlen > sizeof buf - 2)
            mlen = sizeof buf - 2;
        memcpy(buf, mod, mlen);
        buf[mlen] = '.';
        len = mlen + 1;
    }
    if (nlen > sizeof buf - len)
        nlen = sizeof buf - len;
    memcpy(buf + len, name, nlen);
    len += nlen;
    if (len == 0) /* a global with empty module and name: shown as "?" */
        buf[len++] = '?';

    if ((e->ntypes + 1) * 2 >= e->type_hash_cap &&
        rehash_types(e, e->type_hash_cap ? e->type_hash_cap * 2 : 64) < 0)
        return 0;
    h = hash_bytes(buf, len) & (e->type_hash_cap - 1);
    while ((i = e->type_hash[h]) != 0) {
        if (e->type_len[i] == len && memcmp(e->names + e->type_off[i], buf, len) == 0)
            return i;
        h = (h + 1) & (e->type_hash_cap - 1);
    }
    if (e->ntypes + 2 > e->cap_types) {
        uint32_t c1 = e->cap_types, c2 = e->cap_types;
        if (grow(e, (void **)&e->type_off, &c1, e->ntypes + 2, sizeof *e->type_off) < 0 ||
            grow(e, (void **)&e->type_len, &c2, e->ntypes + 2, sizeof *e->type_len) < 0)
            return 0;
        e->cap_types = c1 < c2 ? c1 : c2;
    }
    if (e->names_len + len > e->names_cap) {
        uint32_t cap = (uint32_t)e->names_cap;
        if (e->names_len + len > UINT32_MAX / 2) {
            fail(e, SERTRACE_INSPECT_LIMIT, e->base, "too many distinct global names%s", "");
            return 0;
        }
        if (grow(e, (void **)&e->names, &cap, e->names_len + len, 1) < 0)
            return 0;
        e->names_cap = cap;
    }
    memcpy(e->names + e->names_len, buf, len);
    i = ++e->ntypes;
    e->type_off[i] = (uint32_t)e->names_len;
    e->type_len[i] = (uint32_t)len;
    e->names_len += len;
    e->type_hash[h] = i;
    return i;
}

static uint32_t intern_type(emu *e, const char *name)
{
    /* the few builtin names every container asks for: cached per pickle */
    static const char *const common[8] = {
        "list", "dict", "tuple", "set", "frozenset", "bytearray", "pickle.PickleBuffer", NULL};
    for (int i = 0; common[i]; i++)
        if (strcmp(common[i], name) == 0) {
            if (!e->common_types[i])
                e->common_types[i] = intern_type2(e, NULL, 0, name, strlen(name));
            return e->common_types[i];
        }
    return intern_type2(e, NULL, 0, name, strlen(name));
}

/* ---- audit hooks ------------------------------------------------------------ */

static int obs_evasion(emu *e, uint64_t at, int kind, const char *detail)
{
    if (!e->obs || !e->obs->evasion)
        return 0;
    if (e->obs->evasion(e->obs->ctx, at, kind, detail) < 0)
        return fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

/* The full name of a global's type index ("builtins." added to bare names). */
static size_t full_name(emu *e, uint32_t type, char *buf, size_t cap)
{
    int n;
    if (!type)
        return (size_t)snprintf(buf, cap, "?");
    const char *name = e->names + e->type_off[type];
    uint32_t len = e->type_len[type];
    if (memchr(name, '.', len))
        n = snprintf(buf, cap, "%.*s", (int)len, name);
    else
        n = snprintf(buf, cap, "builtins.%.*s", (int)len, name);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

static int obs_global(emu *e, uint64_t at, int how, uint32_t type)
{
    char buf[SERTRACE_STRING_MAX + 16];
    size_t len;
    if (!e->obs || !e->obs->global)
        return 0;
    len = full_name(e, type, buf, sizeof buf);
    if (e->obs->global(e->obs->ctx, at, how, buf, len) < 0)
        return fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

static const char *shape_name(uint8_t tag)
{
    switch (tag) {
    case SERTRACE_TAG_STR:
        return "str";
    case SERTRACE_TAG_BYTES:
        return "bytes";
    case SERTRACE_TAG_INT:
        return "int";
    case SERTRACE_TAG_FLOAT:
        return "float";
    case SERTRACE_TAG_ATOM:
        return "None/bool";
    case SERTRACE_TAG_LIST:
        return "list";
    case SERTRACE_TAG_DICT:
        return "dict";
    case SERTRACE_TAG_TUPLE:
        return "tuple";
    case SERTRACE_TAG_SET:
        return "set";
    case SERTRACE_TAG_FROZENSET:
        return "frozenset";
    case SERTRACE_TAG_BYTEARRAY:
        return "bytearray";
    case SERTRACE_TAG_GLOBAL:
        return "global";
    case SERTRACE_TAG_MEMO:
        return "memo ref";
    case SERTRACE_TAG_PICKLEBUFFER:
        return "buffer";
    case SERTRACE_TAG_PERSID:
        return "persistent id";
    default:
        return "object";
    }
}

/* "(str, int, …)" for a tuple item, "<list>" for anything else. */
static void describe_args(const item *a, const node *nodes, char *buf, size_t cap)
{
    size_t n = 0;
    if (!a) {
        snprintf(buf, cap, "?");
        return;
    }
    if (a->node == NO_NODE || nodes[a->node].tag != SERTRACE_TAG_TUPLE) {
        snprintf(buf, cap, "<%s, not a tuple>",
                 shape_name(a->node == NO_NODE ? a->tag : nodes[a->node].tag));
        return;
    }
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (uint32_t i = 0; i < a->nargs && i < 4 && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", shape_name(a->shape[i]));
    if (a->nargs > 4 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ", … %u in all", a->nargs);
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
}

static int obs_call(emu *e, uint64_t at, int opcode, const item *fn, const item *args,
                    const char *args_text)
{
    char name[SERTRACE_STRING_MAX + 16], shape[160];
    size_t len;
    if (!e->obs || !e->obs->call)
        return 0;
    if (fn && fn->global && fn->type)
        len = full_name(e, fn->type, name, sizeof name);
    else if (fn && fn->type && fn->tag != SERTRACE_TAG_GLOBAL && opcode == 'b')
        len = full_name(e, fn->type, name, sizeof name);
    else
        len = (size_t)snprintf(name, sizeof name, "<%s>",
                               fn ? (fn->call_result ? "the result of a call" : shape_name(fn->tag))
                                  : "?");
    if (args_text)
        snprintf(shape, sizeof shape, "%s", args_text);
    else
        describe_args(args, e->nodes, shape, sizeof shape);
    if (e->obs->call(e->obs->ctx, at, opcode, name, len, shape) < 0)
        return fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

/* ---- memo ----------------------------------------------------------------- */

static uint64_t hash_key(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static memo_entry *memo_find(emu *e, uint64_t key, bool insert)
{
    uint64_t h;

    if (insert && (e->memo_used + 1) * 2 > e->memo_cap) {
        uint64_t cap = e->memo_cap ? e->memo_cap * 2 : 64;
        memo_entry *m;
        if (e->memory + cap * sizeof *m > e->lim->max_memory) {
            fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                 "memory limit reached (memo%s; raise it with --max-memory)", "");
            return NULL;
        }
        m = calloc(cap, sizeof *m);
        if (!m) {
            fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
            return NULL;
        }
        for (uint64_t i = 0; i < e->memo_cap; i++) {
            if (!e->memo[i].used)
                continue;
            h = hash_key(e->memo[i].key) & (cap - 1);
            while (m[h].used)
                h = (h + 1) & (cap - 1);
            m[h] = e->memo[i];
        }
        e->memory += (cap - e->memo_cap) * sizeof *m;
        if (e->memory > e->peak)
            e->peak = e->memory;
        free(e->memo);
        e->memo = m;
        e->memo_cap = cap;
    }
    if (!e->memo_cap)
        return NULL;
    h = hash_key(key) & (e->memo_cap - 1);
    while (e->memo[h].used) {
        if (e->memo[h].key == key)
            return &e->memo[h];
        h = (h + 1) & (e->memo_cap - 1);
    }
    if (!insert)
        return NULL;
    e->memo[h].used = true;
    e->memo[h].key = key;
    e->memo_used++;
    return &e->memo[h];
}

/* ---- nodes and items ------------------------------------------------------ */

static uint32_t new_node(emu *e, uint8_t tag, uint32_t type, uint64_t start, uint64_t length)
{
    node *n;
    if (e->nnodes == e->cap_nodes &&
        grow(e, (void **)&e->nodes, &e->cap_nodes, (uint64_t)e->nnodes + 1, sizeof *e->nodes) < 0)
        return NO_NODE;
    n = &e->nodes[e->nnodes];
    n->start = start;
    n->end = e->pos;
    n->length = length;
    n->type = type;
    n->tag = tag;
    n->dead = false;
    n->note = NOTE_NONE;
    return e->nnodes++;
}

static inline item *push(emu *e, uint64_t start, uint32_t first_node, uint8_t kind, uint8_t tag)
{
    item *it;
    if (e->nstack == e->cap_stack &&
        grow(e, (void **)&e->stack, &e->cap_stack, (uint64_t)e->nstack + 1, sizeof *e->stack) < 0)
        return NULL;
    it = &e->stack[e->nstack++];
    memset(it, 0, sizeof *it);
    it->start = start;
    it->first_node = first_node;
    it->node = NO_NODE;
    it->it_node = NO_NODE;
    it->memo_key = NO_KEY;
    it->arg0_key = NO_KEY;
    it->kind = kind;
    it->tag = tag;
    it->global = kind == IK_GLOBAL;
    return it;
}

/* The item's node (if any) now ends at the current position. */
static void touch(emu *e, item *it)
{
    if (it->node != NO_NODE)
        e->nodes[it->node].end = e->pos;
}

/* ---- the reader ----------------------------------------------------------- */

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

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A line argument ending in '\n' at `p`; its length without the '\n'. */
static int read_line(emu *e, const op *o, const uint8_t *p, const uint8_t **line, uint64_t *len)
{
    const uint8_t *end = e->in + e->n;
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                    "truncated: a line argument has no end of line%s", "");
    *line = p;
    *len = (uint64_t)(nl - p);
    return 0;
}

static int decimal(const uint8_t *p, uint64_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 19)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Decode the opcode at input offset `at` into `o`.  0, or -1 (status set). */
static inline int read_op(emu *e, size_t at, op *o)
{
    size_t left = e->n - at - 1;
    const uint8_t *p = e->in + at + 1;
    unsigned fixed = 0, prefix = 0;

    o->code = e->in[at];
    o->num = 0;
    o->data = NULL;
    o->data_len = 0;
    o->at = at;
    o->arg = p;
    switch (o->code) {
    case OP_BININT1:
    case OP_BINGET:
    case OP_BINPUT:
    case OP_PROTO:
    case OP_EXT1:
        fixed = 1;
        break;
    case OP_BININT2:
    case OP_EXT2:
        fixed = 2;
        break;
    case OP_BININT:
    case OP_LONG_BINGET:
    case OP_LONG_BINPUT:
    case OP_EXT4:
        fixed = 4;
        break;
    case OP_BINFLOAT:
    case OP_FRAME:
        fixed = 8;
        break;
    case OP_SHORT_BINSTRING:
    case OP_SHORT_BINBYTES:
    case OP_SHORT_BINUNICODE:
    case OP_LONG1:
        prefix = 1;
        break;
    case OP_BINSTRING:
    case OP_BINUNICODE:
    case OP_BINBYTES:
    case OP_LONG4:
        prefix = 4;
        break;
    case OP_BINUNICODE8:
    case OP_BINBYTES8:
    case OP_BYTEARRAY8:
        prefix = 8;
        break;
    case OP_INT:
    case OP_LONG:
    case OP_FLOAT:
    case OP_STRING:
    case OP_UNICODE:
    case OP_PERSID:
    case OP_GET:
    case OP_PUT:
        if (read_line(e, o, p, &o->data, &o->data_len) < 0)
            return -1;
        o->len = 1 + o->data_len + 1;
        return 0;
    case OP_GLOBAL:
    case OP_INST:
        if (read_line(e, o, p, &o->data, &o->data_len) < 0 ||
            read_line(e, o, p + o->data_len + 1, &o->data2, &o->data2_len) < 0)
            return -1;
        o->len = 1 + o->data_len + 1 + o->data2_len + 1;
        return 0;
    case OP_MARK:
    case OP_STOP:
    case OP_POP:
    case OP_POP_MARK:
    case OP_DUP:
    case OP_NONE:
    case OP_BINPERSID:
    case OP_REDUCE:
    case OP_APPEND:
    case OP_BUILD:
    case OP_DICT:
    case OP_EMPTY_DICT:
    case OP_APPENDS:
    case OP_LIST:
    case OP_EMPTY_LIST:
    case OP_OBJ:
    case OP_SETITEM:
    case OP_TUPLE:
    case OP_EMPTY_TUPLE:
    case OP_SETITEMS:
    case OP_NEWOBJ:
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3:
    case OP_NEWTRUE:
    case OP_NEWFALSE:
    case OP_EMPTY_SET:
    case OP_ADDITEMS:
    case OP_FROZENSET:
    case OP_NEWOBJ_EX:
    case OP_STACK_GLOBAL:
    case OP_MEMOIZE:
    case OP_NEXT_BUFFER:
    case OP_READONLY_BUFFER:
        o->len = 1;
        return 0;
    default: {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", o->code);
        return fail(e, SERTRACE_INSPECT_MALFORMED, at, "unknown opcode %s", hex);
    }
    }
    if (fixed) {
        if (left < fixed)
            return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                        "truncated: an opcode's argument is cut%s", "");
        o->num = le(p, fixed);
        o->len = 1 + fixed;
        return 0;
    }
    if (left < prefix)
        return fail(e, SERTRACE_INSPECT_MALFORMED, at, "truncated: a length prefix is cut%s", "");
    o->num = le(p, prefix);
    if ((o->code == OP_BINSTRING || o->code == OP_LONG4) && (o->num & 0x80000000u))
        return fail(e, SERTRACE_INSPECT_MALFORMED, at, "negative declared length%s", "");
    if (o->num > left - prefix) {
        char msg[64];
        snprintf(msg, sizeof msg, "%llu", (unsigned long long)o->num);
        return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                    "declared length %s exceeds the bytes left in the input", msg);
    }
    o->data = p + prefix;
    o->data_len = o->num;
    o->len = 1 + prefix + (size_t)o->num;
    return 0;
}

/* ---- records --------------------------------------------------------------- */

static int flush_batch(emu *e)
{
    if (!e->batch_len)
        return 0;
    if (sertrace_core_records(e->core, -1, -1, 0, e->dump_id, e->seq++, e->batch, e->batch_len) < 0)
        return fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s",
                    "");
    e->batch_len = 0;
    return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* Room for a record of at most `need` bytes. */
static int batch_room(emu *e, size_t need)
{
    if (e->batch_len + need > sizeof e->batch)
        return flush_batch(e);
    return 0;
}

static int rec_type(emu *e, uint32_t type)
{
    uint32_t len = e->type_len[type];
    if (len > SERTRACE_STRING_MAX)
        len = SERTRACE_STRING_MAX;
    if (batch_room(e, 1 + 10 + 10 + len) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_TYPE;
    e->batch_len += put_varint(e->batch + e->batch_len, type);
    e->batch_len += put_varint(e->batch + e->batch_len, len);
    memcpy(e->batch + e->batch_len, e->names + e->type_off[type], len);
    e->batch_len += len;
    return 0;
}

static int rec_enter(emu *e, const node *n, uint32_t depth)
{
    if (batch_room(e, 2 + 5 * 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_ENTER;
    e->batch[e->batch_len++] = n->tag;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, n->type);
    e->batch_len += put_varint(e->batch + e->batch_len, 0); /* no address */
    e->batch_len += put_varint(e->batch + e->batch_len, n->length);
    e->batch_len += put_varint(e->batch + e->batch_len, n->start);
    return 0;
}

static int rec_exit(emu *e, uint64_t end, uint32_t depth)
{
    if (batch_room(e, 1 + 2 * 10) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_EXIT;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, end);
    return 0;
}

static int rec_note(emu *e, uint32_t depth, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value);
    if (batch_room(e, 1 + 10 + 10 + kl + 10 + vl) < 0)
        return -1;
    e->batch[e->batch_len++] = SERTRACE_REC_NOTE;
    e->batch_len += put_varint(e->batch + e->batch_len, depth);
    e->batch_len += put_varint(e->batch + e->batch_len, kl);
    memcpy(e->batch + e->batch_len, key, kl);
    e->batch_len += kl;
    e->batch_len += put_varint(e->batch + e->batch_len, vl);
    memcpy(e->batch + e->batch_len, value, vl);
    e->batch_len += vl;
    return 0;
}

/* Outer nodes first: by start, then longer first, then later-created first
 * (a node that wraps another of the same span, such as a global around its
 * extension code, is created after it). */
static int cmp_nodes(const void *a, const void *b, void *base)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const node *x = (const node *)base + i, *y = (const node *)base + j;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return i > j ? -1 : (i < j);
}

/* Nest the pickle's nodes by span and feed them to the core. */
static int emit_dump(emu *e, uint64_t total)
{
    uint32_t *order = NULL, *open = NULL, nopen = 0;
    bool *typed = NULL;
    uint64_t extra = (uint64_t)e->nnodes * 8 + (e->ntypes + 1);
    int rc = -1;

    if (!e->core)
        return 0; /* audit only */
    if (e->memory + extra > e->lim->max_memory)
        return fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                    "memory limit reached (nesting the nodes%s; raise it with --max-memory)", "");
    order = malloc(((size_t)e->nnodes + 1) * sizeof *order);
    open = malloc(((size_t)e->nnodes + 1) * sizeof *open);
    typed = calloc(e->ntypes + 1, 1);
    if (!order || !open || !typed) {
        fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        goto end;
    }
    if (e->memory + extra > e->peak)
        e->peak = e->memory + extra;
    uint32_t live = 0;
    for (uint32_t i = 0; i < e->nnodes; i++)
        if (!e->nodes[i].dead)
            order[live++] = i;
    qsort_r(order, live, sizeof *order, cmp_nodes, e->nodes);

    if (sertrace_core_dump_begin(e->core, -1, -1, 0, e->dump_id, "pickle", 6,
                                 e->protocol >= 0 ? e->protocol : (e->max_op_proto >= 1))) {
        fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s", "");
        goto end;
    }
    e->seq = 0;
    e->batch_len = 0;
    for (uint32_t k = 0; k < live; k++) {
        node *n = &e->nodes[order[k]];
        while (nopen && e->nodes[open[nopen - 1]].end <= n->start) {
            if (rec_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
                goto end;
            nopen--;
        }
        /* A span that overlaps its container (only a hostile stream makes
         * one, e.g. DUP then mutation after use) is cut to fit. */
        if (nopen && n->end > e->nodes[open[nopen - 1]].end)
            n->end = e->nodes[open[nopen - 1]].end;
        if (nopen + 1 > e->lim->max_depth) {
            char msg[32];
            snprintf(msg, sizeof msg, "%u", e->lim->max_depth);
            fail(e, SERTRACE_INSPECT_LIMIT, e->base, "objects nested deeper than %s levels", msg);
            goto end;
        }
        if (n->type && !typed[n->type]) {
            if (rec_type(e, n->type) < 0)
                goto end;
            typed[n->type] = true;
        }
        if (rec_enter(e, n, nopen + 1) < 0)
            goto end;
        if (n->note == NOTE_GETATTR && rec_note(e, nopen + 1, note_key, note_getattr) < 0)
            goto end;
        open[nopen++] = order[k];
    }
    while (nopen) {
        if (rec_exit(e, e->nodes[open[nopen - 1]].end, nopen) < 0)
            goto end;
        nopen--;
    }
    if (flush_batch(e) < 0)
        goto end;
    if (sertrace_core_dump_end_flags(e->core, -1, -1, 0, e->dump_id, total, SERTRACE_STATUS_OK,
                                     e->seq, 0) < 0) {
        fail(e, SERTRACE_INSPECT_FAILED, e->base, "the tree core failed (out of memory?)%s", "");
        goto end;
    }
    e->res->nodes += live;
    rc = 0;
end:
    free(order);
    free(open);
    free(typed);
    return rc;
}

/* ---- the machine ------------------------------------------------------------ */

static int need_items(emu *e, const op *o, uint32_t k)
{
    uint32_t floor = e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0;
    if (e->nstack < floor + k)
        return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                    "stack underflow: an opcode needs more items than there are%s", "");
    return 0;
}

static int pop_mark(emu *e, const op *o, mark *m)
{
    if (!e->nmarks)
        return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                    "an opcode needs a MARK and there is none%s", "");
    *m = e->marks[--e->nmarks];
    return 0;
}

/* Name of a global item (for REDUCE's special callables), or NULL. */
static const char *type_name(emu *e, uint32_t type, uint32_t *len)
{
    if (!type) {
        *len = 0;
        return NULL;
    }
    *len = e->type_len[type];
    return e->names + e->type_off[type];
}

static bool name_is(emu *e, uint32_t type, const char *s)
{
    uint32_t len;
    const char *n = type_name(e, type, &len);
    return n && len == strlen(s) && memcmp(n, s, len) == 0;
}

/* A new item for an object built from items[from..] (the callable or the
 * first element) -- they are replaced by it. */
static item *replace(emu *e, uint32_t from, uint64_t start, uint32_t first_node, uint8_t kind,
                     uint8_t tag)
{
    e->nstack = from;
    return push(e, start, first_node, kind, tag);
}

/* A tuple item built from the items at [from, from + k) remembers what a
 * REDUCE may need of them; call before they are replaced. */
typedef struct tuple_args {
    uint64_t arg0_key, arg1_off, arg0_off;
    uint32_t arg0_type, arg1_len, nargs, arg0_len;
    uint8_t shape[4];
    bool arg0_global;
} tuple_args;

static tuple_args take_args(emu *e, uint32_t from, uint64_t k)
{
    tuple_args a = {NO_KEY, 0, 0, 0, 0, 0, 0, {0}, false};
    a.nargs = k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
    for (uint32_t i = 0; i < 4 && i < k; i++) {
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

static void give_args(item *it, const tuple_args *a)
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

/* Attach items to a container item through APPEND(S)/SETITEM(S)/ADDITEMS:
 * a reduce-built object gets them inside an It node. */
static int add_items(emu *e, item *target, uint64_t items_start, uint64_t count)
{
    if (target->node != NO_NODE) {
        node *n = &e->nodes[target->node];
        if (n->tag == SERTRACE_TAG_INSTANCE || n->tag == SERTRACE_TAG_REDUCE) {
            if (target->it_node == NO_NODE) {
                uint32_t type = n->type;
                target->it_node = new_node(e, SERTRACE_TAG_ITEMS, type, items_start, 0);
                if (target->it_node == NO_NODE)
                    return -1;
            }
            e->nodes[target->it_node].end = e->pos;
        } else if (n->length) {
            n->length += count;
        }
    }
    touch(e, target);
    return 0;
}

static int memo_put(emu *e, const op *o, uint64_t key)
{
    memo_entry *m;
    item *top;
    if (need_items(e, o, 1) < 0)
        return -1;
    top = &e->stack[e->nstack - 1];
    if (e->obs && memo_find(e, key, false)) {
        char d[64];
        snprintf(d, sizeof d, "memo slot %llu written twice", (unsigned long long)key);
        if (obs_evasion(e, o->at, SERTRACE_EVASION_MEMO_OVERWRITE, d) < 0)
            return -1;
    }
    if (!(m = memo_find(e, key, true)))
        return -1;
    m->global = top->global;
    m->kind = top->kind;
    m->tag = top->tag;
    m->type = top->type;
    m->length = top->node != NO_NODE ? e->nodes[top->node].length : 0;
    m->text_off = top->text_off;
    m->text_len = top->text_len;
    top->memo_key = key;
    touch(e, top);
    return 0;
}

static int memo_get(emu *e, const op *o, uint64_t key, uint64_t start, uint32_t first,
                    bool after_discard)
{
    memo_entry *m = memo_find(e, key, false);
    item *it;
    char msg[32];
    if (!m) {
        snprintf(msg, sizeof msg, "%llu", (unsigned long long)key);
        return fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "memo key %s read before it was written",
                    msg);
    }
    if (after_discard) {
        /* the object whose parts were just discarded: its bytes began
         * with them, and the GET is its last opcode */
        uint8_t kind = m->kind == IK_GLOBAL ? IK_NODE : m->kind;
        if (!(it = push(e, e->discard_start, e->discard_first, kind, m->tag)))
            return -1;
        it->global = m->global;
        it->from_memo = true;
        it->memo_key = key;
        it->type = m->type;
        it->text_off = m->text_off;
        it->text_len = m->text_len;
        if (e->discard_node != NO_NODE) {
            it->node = e->discard_node;
            it->tag = e->nodes[it->node].tag;
            touch(e, it);
        } else if (kind == IK_NODE) {
            it->node = new_node(e, m->tag, m->type, e->discard_start, m->length);
            if (it->node == NO_NODE)
                return -1;
        }
        return 0;
    }
    if (!(it = push(e, start, first, m->kind == IK_GLOBAL ? IK_NODE : m->kind, m->tag)))
        return -1;
    it->global = m->global;
    it->from_memo = true;
    it->memo_key = key;
    it->type = m->type;
    it->text_off = m->text_off;
    it->text_len = m->text_len;
    if (m->kind == IK_NODE || m->kind == IK_GLOBAL) {
        it->kind = IK_NODE;
        it->tag = SERTRACE_TAG_MEMO;
        it->node = new_node(e, SERTRACE_TAG_MEMO, m->type, start, m->length);
        if (it->node == NO_NODE)
            return -1;
    }
    return 0;
}

/* ---- pickles nested in loads() arguments --------------------------------------- */

typedef struct shift_ctx {
    const sertrace_inspect_observer *inner;
    uint64_t shift;
} shift_ctx;

static int shift_global(void *c, uint64_t off, int how, const char *n, size_t l)
{
    shift_ctx *s = c;
    return s->inner->global ? s->inner->global(s->inner->ctx, off + s->shift, how, n, l) : 0;
}

static int shift_call(void *c, uint64_t off, int op, const char *n, size_t l, const char *a)
{
    shift_ctx *s = c;
    return s->inner->call ? s->inner->call(s->inner->ctx, off + s->shift, op, n, l, a) : 0;
}

static int shift_evasion(void *c, uint64_t off, int kind, const char *d)
{
    shift_ctx *s = c;
    return s->inner->evasion ? s->inner->evasion(s->inner->ctx, off + s->shift, kind, d) : 0;
}

static int run_internal(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                        sertrace_core *core, const sertrace_inspect_observer *obs, bool single,
                        int nesting, sertrace_inspect_result *res);

#define MAX_NESTING 4

/* REDUCE of a `*.loads` global with bytes as first argument: the bytes are a
 * pickle the call would unpickle; audit them too (offsets in this input). */
static int audit_nested(emu *e, const op *o, const item *fn, const item *args)
{
    uint32_t len;
    const char *name = type_name(e, fn->type, &len);
    char d[SERTRACE_STRING_MAX + 200];
    sertrace_inspect_result r2;

    if (!name || len < 5 || memcmp(name + len - 5, "loads", 5) != 0)
        return 0;
    snprintf(d, sizeof d,
             "a pickle nested in the bytes argument of %.*s (%u bytes at offset %llu, audited too)",
             (int)len, name, args->arg0_len, (unsigned long long)(args->arg0_off));
    if (obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE, d) < 0)
        return -1;
    if (e->nesting >= MAX_NESTING)
        return obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE,
                           "pickles nested more than 4 deep: the innermost was not audited");
    shift_ctx sc = {e->obs, args->arg0_off};
    sertrace_inspect_observer w = {&sc, shift_global, shift_call, shift_evasion};
    run_internal(e->in + args->arg0_off, args->arg0_len, e->lim, NULL, &w, true, e->nesting + 1,
                 &r2);
    if (r2.status == SERTRACE_INSPECT_FAILED)
        return fail(e, SERTRACE_INSPECT_FAILED, o->at, "%s", r2.reason);
    if (r2.status != SERTRACE_INSPECT_OK) {
        snprintf(d, sizeof d, "the nested pickle is inconclusive at its byte %llu: %s",
                 (unsigned long long)r2.offset, r2.reason);
        return obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE, d);
    }
    return 0;
}

static int step(emu *e, const op *o, uint64_t start, bool *stop)
{
    uint32_t first = e->nnodes;
    item *it, *t;
    mark m;
    uint32_t from;
    bool after_discard = e->discarded;
    uint8_t last_op = e->last_op;

    e->discarded = false;
    e->last_op = o->code;
    if (e->discard_call && !(after_discard && (o->code == OP_POP || o->code == OP_POP_MARK))) {
        bool finished = after_discard &&
                        (o->code == OP_GET || o->code == OP_BINGET || o->code == OP_LONG_BINGET);
        e->discard_call = false;
        if (!finished && obs_evasion(e, e->discard_at, SERTRACE_EVASION_POP_CALL,
                                     "the result of a call is discarded by POP") < 0)
            return -1;
    }

    switch (o->code) {
    case OP_PROTO:
        e->protocol = (int)o->num;
        if (o->num > 5) {
            char msg[8];
            snprintf(msg, sizeof msg, "%u", (unsigned)o->num);
            return fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "unsupported pickle protocol %s",
                        msg);
        }
        return 0;
    case OP_FRAME:
        return 0; /* positions handled by the caller */
    case OP_STOP:
        *stop = true;
        return 0;
    case OP_MARK:
        if (grow(e, (void **)&e->marks, &e->cap_marks, (uint64_t)e->nmarks + 1, sizeof *e->marks) <
            0)
            return -1;
        e->marks[e->nmarks].start = start;
        e->marks[e->nmarks].first_node = first;
        e->marks[e->nmarks].stack_len = e->nstack;
        e->nmarks++;
        return 0;
    case OP_POP:
        if (e->nstack == (e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0) && e->nmarks) {
            e->nmarks--; /* POP of a mark, as the unpickler allows */
            e->discarded = true;
            e->discard_start = e->marks[e->nmarks].start;
            e->discard_first = e->marks[e->nmarks].first_node;
            e->discard_node = NO_NODE;
            return 0;
        }
        if (need_items(e, o, 1) < 0)
            return -1;
        t = &e->stack[--e->nstack];
        if (t->kind == IK_SETTER) {
            if (e->nstack)
                touch(e, &e->stack[e->nstack - 1]);
            return 0;
        }
        if (t->call_result) {
            e->discard_call = true;
            e->discard_at = o->at;
        }
        e->discarded = true;
        e->discard_start = t->start;
        e->discard_first = t->first_node;
        /* REDUCE (NEWOBJ...) then POP: the object was memoized while its
         * arguments were written; the GET that follows finishes it */
        e->discard_node =
            (!after_discard && (last_op == OP_REDUCE || last_op == OP_NEWOBJ ||
                                last_op == OP_NEWOBJ_EX || last_op == OP_OBJ || last_op == OP_INST))
                ? t->node
                : NO_NODE;
        return 0;
    case OP_POP_MARK:
        if (pop_mark(e, o, &m) < 0)
            return -1;
        for (uint32_t i = m.stack_len; i < e->nstack && e->obs; i++)
            if (e->stack[i].call_result) {
                e->discard_call = true;
                e->discard_at = o->at;
            }
        e->nstack = m.stack_len;
        e->discarded = true;
        e->discard_start = m.start;
        e->discard_first = m.first_node;
        e->discard_node = NO_NODE;
        return 0;
    case OP_DUP:
        if (need_items(e, o, 1) < 0)
            return -1;
        t = &e->stack[e->nstack - 1];
        {
            item copy = *t;
            if (!(it = push(e, start, first, copy.kind, copy.tag)))
                return -1;
            *it = copy;
            it->start = start;
            it->first_node = first;
        }
        return 0;

    /* atoms */
    case OP_NONE:
    case OP_NEWTRUE:
    case OP_NEWFALSE:
        return push(e, start, first, IK_ATOM, SERTRACE_TAG_ATOM) ? 0 : -1;
    case OP_INT:
        return push(e, start, first, IK_ATOM,
                    (o->data_len == 2 && o->data[0] == '0' &&
                     (o->data[1] == '0' || o->data[1] == '1'))
                        ? SERTRACE_TAG_ATOM
                        : SERTRACE_TAG_INT)
                   ? 0
                   : -1;
    case OP_BININT:
    case OP_BININT1:
    case OP_BININT2:
    case OP_LONG:
    case OP_LONG1:
    case OP_LONG4:
        return push(e, start, first, IK_ATOM, SERTRACE_TAG_INT) ? 0 : -1;
    case OP_FLOAT:
    case OP_BINFLOAT:
        return push(e, start, first, IK_ATOM, SERTRACE_TAG_FLOAT) ? 0 : -1;
    case OP_BINBYTES:
    case OP_SHORT_BINBYTES:
    case OP_BINBYTES8:
        if (!(it = push(e, start, first, IK_ATOM, SERTRACE_TAG_BYTES)))
            return -1;
        it->text_off = (uint64_t)(o->data - e->in);
        it->text_len = (uint32_t)(o->data_len > UINT32_MAX ? UINT32_MAX : o->data_len);
        return 0;
    case OP_STRING:
    case OP_BINSTRING:
    case OP_SHORT_BINSTRING:
    case OP_UNICODE:
    case OP_BINUNICODE:
    case OP_SHORT_BINUNICODE:
    case OP_BINUNICODE8:
        if (!(it = push(e, start, first, IK_STR, SERTRACE_TAG_STR)))
            return -1;
        /* STRING is quoted: its text is between the quotes */
        if (o->code == OP_STRING && o->data_len >= 2) {
            it->text_off = (uint64_t)(o->data + 1 - e->in);
            it->text_len = (uint32_t)(o->data_len - 2 > UINT32_MAX ? UINT32_MAX : o->data_len - 2);
        } else {
            it->text_off = (uint64_t)(o->data - e->in);
            it->text_len = (uint32_t)(o->data_len > UINT32_MAX ? UINT32_MAX : o->data_len);
        }
        return 0;
    case OP_BYTEARRAY8:
        if (!(it = push(e, start, first, IK_NODE, SERTRACE_TAG_BYTEARRAY)))
            return -1;
        it->type = intern_type(e, "bytearray");
        if (!it->type)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_BYTEARRAY, it->type, start, o->num + 1);
        return it->node == NO_NODE ? -1 : 0;
    case OP_NEXT_BUFFER:
        if (!(it = push(e, start, first, IK_NODE, SERTRACE_TAG_PICKLEBUFFER)))
            return -1;
        it->type = intern_type(e, "pickle.PickleBuffer");
        if (!it->type)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_PICKLEBUFFER, it->type, start, 0);
        return it->node == NO_NODE ? -1 : 0;
    case OP_READONLY_BUFFER:
        if (need_items(e, o, 1) < 0)
            return -1;
        touch(e, &e->stack[e->nstack - 1]);
        return 0;

    /* containers */
    case OP_EMPTY_LIST:
    case OP_EMPTY_DICT:
    case OP_EMPTY_SET:
    case OP_EMPTY_TUPLE: {
        uint8_t tag = o->code == OP_EMPTY_LIST   ? SERTRACE_TAG_LIST
                      : o->code == OP_EMPTY_DICT ? SERTRACE_TAG_DICT
                      : o->code == OP_EMPTY_SET  ? SERTRACE_TAG_SET
                                                 : SERTRACE_TAG_TUPLE;
        const char *name = o->code == OP_EMPTY_LIST   ? "list"
                           : o->code == OP_EMPTY_DICT ? "dict"
                           : o->code == OP_EMPTY_SET  ? "set"
                                                      : "tuple";
        if (!(it = push(e, start, first, IK_NODE, tag)))
            return -1;
        if (!(it->type = intern_type(e, name)))
            return -1;
        it->node = new_node(e, tag, it->type, start, 1);
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_LIST:
    case OP_DICT:
    case OP_TUPLE:
    case OP_FROZENSET: {
        uint8_t tag = o->code == OP_LIST    ? SERTRACE_TAG_LIST
                      : o->code == OP_DICT  ? SERTRACE_TAG_DICT
                      : o->code == OP_TUPLE ? SERTRACE_TAG_TUPLE
                                            : SERTRACE_TAG_FROZENSET;
        const char *name = o->code == OP_LIST    ? "list"
                           : o->code == OP_DICT  ? "dict"
                           : o->code == OP_TUPLE ? "tuple"
                                                 : "frozenset";
        uint64_t count;
        tuple_args a;
        if (pop_mark(e, o, &m) < 0)
            return -1;
        count = e->nstack - m.stack_len;
        a = take_args(e, m.stack_len, count);
        if (o->code == OP_DICT)
            count /= 2;
        if (!(it = replace(e, m.stack_len, m.start, m.first_node, IK_NODE, tag)))
            return -1;
        if (o->code == OP_TUPLE)
            give_args(it, &a);
        if (!(it->type = intern_type(e, name)))
            return -1;
        it->node = new_node(e, tag, it->type, m.start, count + 1);
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        uint32_t k = o->code - OP_TUPLE1 + 1;
        if (need_items(e, o, k) < 0)
            return -1;
        from = e->nstack - k;
        t = &e->stack[from];
        {
            tuple_args a = take_args(e, from, k);
            if (!(it = replace(e, from, t->start, t->first_node, IK_NODE, SERTRACE_TAG_TUPLE)))
                return -1;
            give_args(it, &a);
        }
        if (!(it->type = intern_type(e, "tuple")))
            return -1;
        it->node = new_node(e, SERTRACE_TAG_TUPLE, it->type, it->start, k + 1);
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_APPEND:
        if (need_items(e, o, 2) < 0)
            return -1;
        {
            uint64_t s = e->stack[e->nstack - 1].start;
            e->nstack--;
            return add_items(e, &e->stack[e->nstack - 1], s, 1);
        }
    case OP_SETITEM:
        if (need_items(e, o, 3) < 0)
            return -1;
        {
            uint64_t s = e->stack[e->nstack - 2].start;
            e->nstack -= 2;
            return add_items(e, &e->stack[e->nstack - 1], s, 1);
        }
    case OP_APPENDS:
    case OP_SETITEMS:
    case OP_ADDITEMS: {
        uint64_t count;
        if (pop_mark(e, o, &m) < 0)
            return -1;
        count = e->nstack - m.stack_len;
        if (o->code == OP_SETITEMS)
            count /= 2;
        e->nstack = m.stack_len;
        if (need_items(e, o, 1) < 0)
            return -1;
        return add_items(e, &e->stack[e->nstack - 1], m.start, count);
    }

    /* memo */
    case OP_PUT: {
        uint64_t key;
        if (decimal(o->data, o->data_len, &key) < 0)
            return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "PUT: the memo key is not a decimal number%s", "");
        return memo_put(e, o, key);
    }
    case OP_BINPUT:
    case OP_LONG_BINPUT:
        return memo_put(e, o, o->num);
    case OP_MEMOIZE:
        return memo_put(e, o, e->memo_used);
    case OP_GET: {
        uint64_t key;
        if (decimal(o->data, o->data_len, &key) < 0)
            return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "GET: the memo key is not a decimal number%s", "");
        return memo_get(e, o, key, start, first, after_discard);
    }
    case OP_BINGET:
    case OP_LONG_BINGET:
        return memo_get(e, o, o->num, start, first, after_discard);

    /* globals */
    case OP_GLOBAL:
        if (!(it = push(e, start, first, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
            return -1;
        if (!(it->type = intern_type2(e, (const char *)o->data, o->data_len, (const char *)o->data2,
                                      o->data2_len)))
            return -1;
        it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, start, 0);
        if (it->node == NO_NODE)
            return -1;
        return obs_global(e, o->at, SERTRACE_GLOBAL_OPCODE, it->type);
    case OP_STACK_GLOBAL: {
        item *mod, *name;
        if (need_items(e, o, 2) < 0)
            return -1;
        mod = &e->stack[e->nstack - 2];
        name = &e->stack[e->nstack - 1];
        if (mod->kind != IK_STR || name->kind != IK_STR)
            return fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "STACK_GLOBAL: the module and name are not both strings%s", "");
        {
            uint64_t s = mod->start;
            uint32_t f = mod->first_node;
            const char *mt = (const char *)e->in + mod->text_off,
                       *nt = (const char *)e->in + name->text_off;
            uint32_t ml = mod->text_len, nl = name->text_len;
            bool memo = mod->from_memo || name->from_memo;
            if (!(it = replace(e, e->nstack - 2, s, f, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
                return -1;
            if (!(it->type = intern_type2(e, mt, ml, nt, nl)))
                return -1;
            it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, s, 0);
            if (it->node == NO_NODE)
                return -1;
            if (obs_global(e, o->at, memo ? SERTRACE_GLOBAL_STACK_MEMO : SERTRACE_GLOBAL_STACK,
                           it->type) < 0)
                return -1;
            if (memo && e->obs) {
                char d[SERTRACE_STRING_MAX + 80], nm[SERTRACE_STRING_MAX + 16];
                full_name(e, it->type, nm, sizeof nm);
                snprintf(d, sizeof d, "STACK_GLOBAL names %s with strings read back from the memo",
                         nm);
                if (obs_evasion(e, o->at, SERTRACE_EVASION_STACK_GLOBAL_MEMO, d) < 0)
                    return -1;
            }
        }
        return 0;
    }
    case OP_EXT1:
    case OP_EXT2:
    case OP_EXT4: {
        char name[40];
        uint32_t ext;
        snprintf(name, sizeof name, "copyreg extension %llu", (unsigned long long)o->num);
        if (!(it = push(e, start, first, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
            return -1;
        if (!(it->type = intern_type(e, name)))
            return -1;
        ext = new_node(e, SERTRACE_TAG_EXT, it->type, start, 0);
        if (ext == NO_NODE)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, start, 0);
        if (it->node == NO_NODE)
            return -1;
        return obs_global(e, o->at, SERTRACE_GLOBAL_EXT, it->type);
    }

    /* calls */
    case OP_REDUCE: {
        item *fn, *args;
        uint8_t tag = SERTRACE_TAG_REDUCE;
        uint32_t type;
        if (need_items(e, o, 2) < 0)
            return -1;
        fn = &e->stack[e->nstack - 2];
        args = &e->stack[e->nstack - 1];
        type = fn->type;
        if (name_is(e, type, "_codecs.encode") || name_is(e, type, "bytes")) {
            /* bytes below protocol 3: one atom, no nodes inside -- unless
             * it is the dumped object itself, whose children follow the
             * dump's granularity (revived at STOP) */
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            if (obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
                return -1;
            for (uint32_t i = f; i < e->nnodes; i++)
                e->nodes[i].dead = true;
            it = replace(e, e->nstack - 2, s, f, IK_ATOM, SERTRACE_TAG_BYTES);
            if (it)
                it->atom_nodes_end = e->nnodes;
            return it ? 0 : -1;
        }
        if (e->nstack >= 3 && args->arg0_key != NO_KEY &&
            args->arg0_key == e->stack[e->nstack - 3].memo_key && args->node != NO_NODE &&
            e->nodes[args->node].tag == SERTRACE_TAG_TUPLE && e->nodes[args->node].length == 3 &&
            e->stack[e->nstack - 3].tag != SERTRACE_TAG_MEMO &&
            (!e->nmarks || e->marks[e->nmarks - 1].stack_len <= e->nstack - 3)) {
            /* setter(obj, state) right above obj: the state setter of a
             * reduce, part of obj's node (its result is POPped next) */
            item *obj = &e->stack[e->nstack - 3];
            if (obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
                return -1;
            if (args->node != NO_NODE)
                e->nodes[args->node].dead = true; /* the pickler writes no tuple node */
            e->nstack -= 2;
            touch(e, obj);
            it = push(e, start, first, IK_SETTER, SERTRACE_TAG_ATOM);
            return it ? 0 : -1;
        }
        if (name_is(e, type, "getattr") && args->arg0_global && args->arg0_type && args->arg1_len &&
            args->nargs == 2) {
            /* a nested class by reference below protocol 4:
             * getattr(Outer, 'Inner') is one global */
            uint32_t plen;
            const char *parent = type_name(e, args->arg0_type, &plen);
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            uint32_t t2 =
                intern_type2(e, parent, plen, (const char *)e->in + args->arg1_off, args->arg1_len);
            if (!t2)
                return -1;
            if (!(it = replace(e, e->nstack - 2, s, f, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
                return -1;
            it->type = t2;
            it->node = new_node(e, SERTRACE_TAG_GLOBAL, t2, s, 0);
            if (it->node == NO_NODE)
                return -1;
            e->nodes[it->node].note = NOTE_GETATTR;
            return obs_global(e, o->at, SERTRACE_GLOBAL_GETATTR, t2);
        }
        if (name_is(e, type, "set"))
            tag = SERTRACE_TAG_SET;
        else if (name_is(e, type, "frozenset"))
            tag = SERTRACE_TAG_FROZENSET;
        else if (name_is(e, type, "bytearray"))
            tag = SERTRACE_TAG_BYTEARRAY;
        else if (name_is(e, type, "copyreg._reconstructor") ||
                 name_is(e, type, "copy_reg._reconstructor") ||
                 name_is(e, type, "copyreg.__newobj__") ||
                 name_is(e, type, "copy_reg.__newobj__")) {
            /* an instance of the class in the first argument */
            tag = SERTRACE_TAG_INSTANCE;
            if (args->arg0_type)
                type = args->arg0_type;
        }
        if (obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
            return -1;
        if (e->obs) {
            if (tag == SERTRACE_TAG_INSTANCE) {
                /* the reconstructor creates an instance of its first argument */
                item cls;
                memset(&cls, 0, sizeof cls);
                cls.global = args->arg0_global;
                cls.type = args->arg0_type;
                cls.tag = SERTRACE_TAG_GLOBAL;
                if (obs_call(e, o->at, OP_REDUCE, &cls, NULL,
                             "(instance created by the reconstructor)") < 0)
                    return -1;
            }
            if (!fn->global &&
                obs_evasion(e, o->at, SERTRACE_EVASION_NON_GLOBAL_CALLABLE,
                            fn->call_result ? "REDUCE calls the result of an earlier call"
                                            : "REDUCE calls an object that is not a global") < 0)
                return -1;
            if (fn->global && args->arg0_len && audit_nested(e, o, fn, args) < 0)
                return -1;
        }
        {
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            if (!(it = replace(e, e->nstack - 2, s, f, IK_NODE, tag)))
                return -1;
            it->type = type;
            it->call_result = true;
            it->node = new_node(e, tag, type, s, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_NEWOBJ:
    case OP_NEWOBJ_EX: {
        uint32_t k = o->code == OP_NEWOBJ ? 2 : 3;
        item *cls;
        if (need_items(e, o, k) < 0)
            return -1;
        cls = &e->stack[e->nstack - k];
        if (obs_call(e, o->at, o->code, cls, &e->stack[e->nstack - k + 1], NULL) < 0)
            return -1;
        if (e->obs && !cls->global &&
            obs_evasion(e, o->at, SERTRACE_EVASION_NON_GLOBAL_CALLABLE,
                        "NEWOBJ creates an instance of an object that is not a global") < 0)
            return -1;
        {
            uint64_t s = cls->start;
            uint32_t f = cls->first_node, type = cls->type;
            if (!(it = replace(e, e->nstack - k, s, f, IK_NODE, SERTRACE_TAG_INSTANCE)))
                return -1;
            it->type = type;
            it->call_result = true;
            it->node = new_node(e, SERTRACE_TAG_INSTANCE, type, s, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_OBJ: {
        item *cls;
        if (pop_mark(e, o, &m) < 0)
            return -1;
        if (e->nstack < m.stack_len + 1)
            return fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "OBJ: no class after the MARK%s", "");
        cls = &e->stack[m.stack_len];
        if (obs_evasion(e, o->at, SERTRACE_EVASION_INST_OBJ,
                        "OBJ (a protocol 1 call no pickler of Python 3 writes)") < 0 ||
            obs_call(e, o->at, OP_OBJ, cls, NULL, "(the items after the class)") < 0)
            return -1;
        {
            uint32_t type = cls->type;
            if (!(it = replace(e, m.stack_len, m.start, m.first_node, IK_NODE,
                               SERTRACE_TAG_INSTANCE)))
                return -1;
            it->type = type;
            it->call_result = true;
            it->node = new_node(e, SERTRACE_TAG_INSTANCE, type, m.start, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_INST:
        if (pop_mark(e, o, &m) < 0)
            return -1;
        if (!(it = replace(e, m.stack_len, m.start, m.first_node, IK_NODE, SERTRACE_TAG_INSTANCE)))
            return -1;
        if (!(it->type = intern_type2(e, (const char *)o->data, o->data_len, (const char *)o->data2,
                                      o->data2_len)))
            return -1;
        it->node = new_node(e, SERTRACE_TAG_INSTANCE, it->type, m.start, 0);
        if (it->node == NO_NODE)
            return -1;
        it->call_result = true;
        if (e->obs) {
            item cls;
            memset(&cls, 0, sizeof cls);
            cls.global = true;
            cls.type = it->type;
            if (obs_global(e, o->at, SERTRACE_GLOBAL_INST, it->type) < 0 ||
                obs_evasion(e, o->at, SERTRACE_EVASION_INST_OBJ,
                            "INST (a protocol 0 call no pickler of Python 3 writes)") < 0 ||
                obs_call(e, o->at, OP_INST, &cls, NULL, "(the items after the MARK)") < 0)
                return -1;
        }
        return 0;
    case OP_BUILD:
        if (need_items(e, o, 2) < 0)
            return -1;
        if (e->obs) {
            char d[80];
            item *target = &e->stack[e->nstack - 2], *state = &e->stack[e->nstack - 1];
            snprintf(d, sizeof d, "(state: %s)",
                     shape_name(state->node != NO_NODE ? e->nodes[state->node].tag : state->tag));
            if (target->global &&
                obs_evasion(e, o->at, SERTRACE_EVASION_BUILD_GLOBAL,
                            "BUILD sets attributes on a module or class (a global)") < 0)
                return -1;
            if (obs_call(e, o->at, OP_BUILD, target, NULL, d) < 0)
                return -1;
        }
        e->nstack--;
        t = &e->stack[e->nstack - 1];
        t->it_node = NO_NODE;
        touch(e, t);
        return 0;
    case OP_PERSID:
    case OP_BINPERSID:
        if (o->code == OP_BINPERSID) {
            if (need_items(e, o, 1) < 0)
                return -1;
            t = &e->stack[e->nstack - 1];
            start = t->start;
            first = t->first_node;
            e->nstack--;
        }
        if (!(it = push(e, start, first, IK_NODE, SERTRACE_TAG_PERSID)))
            return -1;
        it->node = new_node(e, SERTRACE_TAG_PERSID, 0, start, 0);
        return it->node == NO_NODE ? -1 : 0;
    }
    return fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "opcode not handled%s", "");
}

/* Highest protocol an opcode needs (for pickles without PROTO: 0 or 1). */
static int op_proto(uint8_t c)
{
    if (c >= 0x80)
        return 2;
    switch (c) {
    case OP_BININT:
    case OP_BININT1:
    case OP_BININT2:
    case OP_BINSTRING:
    case OP_SHORT_BINSTRING:
    case OP_BINUNICODE:
    case OP_EMPTY_DICT:
    case OP_APPENDS:
    case OP_BINGET:
    case OP_LONG_BINGET:
    case OP_EMPTY_LIST:
    case OP_OBJ:
    case OP_BINPUT:
    case OP_LONG_BINPUT:
    case OP_EMPTY_TUPLE:
    case OP_SETITEMS:
    case OP_BINFLOAT:
    case OP_BINPERSID:
        return 1;
    default:
        return 0;
    }
}

static void reset_pickle(emu *e, size_t base)
{
    e->base = base;
    e->pos = 0;
    e->frame_pending = false;
    e->frame_end = 0;
    e->protocol = -1;
    e->max_op_proto = 0;
    e->nstack = 0;
    e->nmarks = 0;
    e->nnodes = 0;
    e->discarded = false;
    e->discard_call = false;
    e->last_op = 0;
    /* Large tables are dropped rather than cleared, so that many small
     * pickles after a big one cost time linear in their own size. */
    if (e->memo_cap > 1024) {
        e->memory -= e->memo_cap * sizeof *e->memo;
        free(e->memo);
        e->memo = NULL;
        e->memo_cap = 0;
    } else if (e->memo_cap) {
        memset(e->memo, 0, e->memo_cap * sizeof *e->memo);
    }
    e->memo_used = 0;
    e->ntypes = 0;
    e->names_len = 0;
    memset(e->common_types, 0, sizeof e->common_types);
    if (e->type_hash_cap > 1024) {
        e->memory -= (uint64_t)e->type_hash_cap * sizeof *e->type_hash;
        free(e->type_hash);
        e->type_hash = NULL;
        e->type_hash_cap = 0;
    } else if (e->type_hash_cap) {
        memset(e->type_hash, 0, (size_t)e->type_hash_cap * sizeof *e->type_hash);
    }
}

/* One pickle from e->base: emulate up to STOP, then feed its dump. */
static int run_pickle(emu *e)
{
    size_t at = e->base;
    bool stop = false;
    op o;

    while (!stop) {
        uint64_t start;
        if (at >= e->n)
            return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                        "truncated: the pickle ends before STOP%s", "");
        if (read_op(e, at, &o) < 0)
            return -1;
        if (op_proto(o.code) > e->max_op_proto)
            e->max_op_proto = op_proto(o.code);
        if (o.code == OP_FRAME) {
            if (e->frame_pending && at < e->frame_end)
                return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                            "FRAME inside a frame (the previous frame's length is wrong)%s", "");
            if (e->frame_pending)
                e->pos += FRAME_HEADER; /* the previous frame is committed */
            e->frame_pending = true;
            e->frame_start = at;
            e->frame_end = at + FRAME_HEADER + o.num;
            if (e->frame_end > e->n || o.num > e->n)
                return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                            "a FRAME declares more bytes than the input holds%s", "");
            at += o.len;
            continue;
        }
        if (e->frame_pending && at + o.len > e->frame_end && at < e->frame_end)
            return fail(e, SERTRACE_INSPECT_MALFORMED, at,
                        "an opcode straddles the end of its frame%s", "");
        start = e->pos;
        if (e->frame_pending && at >= e->frame_end && e->obs && !(o.data && o.data_len >= 65536)) {
            /* the pickler leaves a frame only for a FRAME or a payload of
             * 64 KiB or more: a frame whose declared length ends earlier
             * hides the rest from readers that trust frames */
            char d[96];
            snprintf(d, sizeof d,
                     "the FRAME at byte %llu ends before an opcode a pickler never writes unframed",
                     (unsigned long long)e->frame_start);
            if (obs_evasion(e, at, SERTRACE_EVASION_FRAME_LENGTH, d) < 0)
                return -1;
        }
        if (e->frame_pending && at >= e->frame_end) {
            e->pos += FRAME_HEADER; /* committed before an unframed opcode, inside its node */
            e->frame_pending = false;
        }
        if (o.code != OP_STOP)
            e->pos += o.len;
        if (step(e, &o, start, &stop) < 0)
            return -1;
        at += o.len;
    }
    /* STOP: one item left (above no mark), it is the root. */
    if (e->nmarks || e->nstack != 1)
        return fail(e, SERTRACE_INSPECT_MALFORMED, o.at,
                    e->nmarks ? "STOP with a MARK still open%s"
                              : "STOP with a stack that does not hold exactly one object%s",
                    "");
    {
        item *root = &e->stack[0];
        for (uint32_t i = root->first_node; i < root->atom_nodes_end; i++)
            e->nodes[i].dead = false;
        if (root->node == NO_NODE) {
            static const char *names[] = {"NoneType", "int", "float", "str", "bytes"};
            const char *name = root->tag == SERTRACE_TAG_INT     ? names[1]
                               : root->tag == SERTRACE_TAG_FLOAT ? names[2]
                               : root->tag == SERTRACE_TAG_STR   ? names[3]
                               : root->tag == SERTRACE_TAG_BYTES ? names[4]
                                                                 : names[0];
            uint32_t type = intern_type(e, name);
            if (!type || new_node(e, root->tag, type, root->start, 0) == NO_NODE)
                return -1;
        }
    }
    e->pos += 1; /* STOP */
    if (emit_dump(e, (uint64_t)(at - e->base)) < 0)
        return -1;
    e->res->dumps++;
    e->base = at;
    return 0;
}

static int run_internal(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                        sertrace_core *core, const sertrace_inspect_observer *obs, bool single,
                        int nesting, sertrace_inspect_result *res)
{
    sertrace_inspect_limits dflt = {SERTRACE_INSPECT_DEFAULT_MEMORY,
                                    SERTRACE_INSPECT_DEFAULT_DEPTH};
    emu *e = calloc(1, sizeof *e);

    memset(res, 0, sizeof *res);
    if (!e) {
        res->status = SERTRACE_INSPECT_FAILED;
        snprintf(res->reason, sizeof res->reason, "out of memory");
        return res->status;
    }
    if (!lim)
        lim = &dflt;
    e->in = data;
    e->n = n;
    e->lim = lim;
    e->res = res;
    e->core = core;
    e->obs = obs;
    e->single = single;
    e->nesting = nesting;
    while (e->base < n) {
        if (single && res->dumps == 1) {
            char d[96];
            snprintf(d, sizeof d, "%llu bytes after STOP (pickle.loads ignores them)",
                     (unsigned long long)(n - e->base));
            (void)obs_evasion(e, e->base, SERTRACE_EVASION_AFTER_STOP, d);
            break;
        }
        reset_pickle(e, e->base);
        e->dump_id++;
        if (run_pickle(e) < 0)
            break;
    }
    res->peak_memory = e->peak;
    free(e->stack);
    free(e->marks);
    free(e->nodes);
    free(e->memo);
    free(e->names);
    free(e->type_off);
    free(e->type_len);
    free(e->type_hash);
    free(e);
    return res->status;
}

int sertrace_inspect_run(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                         sertrace_core *core, sertrace_inspect_result *res)
{
    return run_internal(data, n, lim, core, NULL, false, 0, res);
}

int sertrace_inspect_run_observed(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                                  sertrace_core *core, const sertrace_inspect_observer *obs,
                                  bool single, sertrace_inspect_result *res)
{
    return run_internal(data, n, lim, core, obs, single, 0, res);
}
