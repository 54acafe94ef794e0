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
#include <pthread.h>

#include "emulator-internal.h"
#include "emulator-reader.h"

/* Edge labels of the items at [from, nstack), about to become parts of
 * `target` (NULL: of the container the opcode builds from them): dict
 * values by their keys (SETITEM(S), DICT), set elements (ADDITEMS,
 * FROZENSET), positions otherwise, counted on from the items the target's
 * node has been given already. */
static int label_items(emu *e, uint8_t code, uint32_t from, const item *target)
{
    uint64_t pos = 0, *next = &pos;
    if (target && target->node != NO_NODE)
        next = &e->nodes[target->node].added;
    if (code == OP_SETITEM || code == OP_SETITEMS || code == OP_DICT) {
        for (uint32_t i = from; i + 1 < e->nstack; i += 2)
            if (emu_label_value(e, &e->stack[i], &e->stack[i + 1]) < 0)
                return -1;
        return 0;
    }
    for (uint32_t i = from; i < e->nstack; i++) {
        if (code == OP_ADDITEMS || code == OP_FROZENSET)
            emu_label(e, &e->stack[i], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT);
        else
            emu_label(e, &e->stack[i], SERTRACE_LABEL_POS, *next);
        (*next)++;
    }
    return 0;
}

/* The tag of the memo entry a GET at input offset `at` reads, or -1 when
 * no GET is there.  POP / POP_MARK then GET is how a pickler finishes a
 * tuple or frozenset that became memoized while its elements were written:
 * the GET's entry says which, so that the discarded elements get the
 * labels the container would have given them. */
static int peek_get_tag(emu *e, size_t at)
{
    uint64_t key = 0;
    const memo_entry *m;
    if (at >= e->n)
        return -1;
    if (e->in[at] == OP_BINGET && at + 1 < e->n) {
        key = e->in[at + 1];
    } else if (e->in[at] == OP_LONG_BINGET && at + 4 < e->n) {
        for (int i = 4; i >= 1; i--)
            key = key << 8 | e->in[at + (size_t)i];
    } else if (e->in[at] == OP_GET) {
        const uint8_t *p = e->in + at + 1, *nl = memchr(p, '\n', e->n - at - 1);
        if (!nl || decimal(p, (uint64_t)(nl - p), &key) < 0)
            return -1;
    } else {
        return -1;
    }
    m = emu_memo_find(e, key, false);
    return m ? m->tag : -1;
}

/* Label the elements of a tuple or frozenset about to be discarded, the
 * items at [from, nstack), when the GET at `next` finishes that container. */
static void label_discarded(emu *e, uint32_t from, size_t next)
{
    int tag = peek_get_tag(e, next);
    for (uint32_t i = from; i < e->nstack; i++) {
        if (tag == SERTRACE_TAG_TUPLE)
            emu_label(e, &e->stack[i], SERTRACE_LABEL_POS, i - from);
        else if (tag == SERTRACE_TAG_FROZENSET)
            emu_label(e, &e->stack[i], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT);
    }
}

/* An atom or a str pushed with where its text lies in the input (should
 * it be a dict key: a label; a global's name): its first byte and length
 * (capped), and the opcode that wrote it (`enc`, 0 for bytes). */
static inline int push_text(emu *e, uint64_t start, uint32_t first, uint8_t kind, uint8_t tag,
                            uint8_t enc, const uint8_t *p, size_t len)
{
    item *it = push(e, start, first, kind, tag);
    if (!it)
        return -1;
    it->enc = enc;
    it->text_off = (uint64_t)(p - e->in);
    it->text_len = (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len);
    return 0;
}

/* The type name of the builtin container `tag` stands for (list, dict,
 * tuple, set or frozenset): one load, inlined into step. */
static inline const char *container_name(uint8_t tag)
{
    static const char *const names[SERTRACE_TAG_FROZENSET + 1] = {
        [SERTRACE_TAG_DICT] = "dict",           [SERTRACE_TAG_LIST] = "list",
        [SERTRACE_TAG_TUPLE] = "tuple",         [SERTRACE_TAG_SET] = "set",
        [SERTRACE_TAG_FROZENSET] = "frozenset",
    };
    return names[tag];
}

/* The same as an index of emu_common_names. */
static inline int container_common(uint8_t tag)
{
    static const int8_t common[SERTRACE_TAG_FROZENSET + 1] = {
        [SERTRACE_TAG_DICT] = COMMON_DICT,           [SERTRACE_TAG_LIST] = COMMON_LIST,
        [SERTRACE_TAG_TUPLE] = COMMON_TUPLE,         [SERTRACE_TAG_SET] = COMMON_SET,
        [SERTRACE_TAG_FROZENSET] = COMMON_FROZENSET,
    };
    return common[tag];
}

/* The container an EMPTY_LIST/DICT/SET/TUPLE or LIST/DICT/TUPLE/FROZENSET
 * opcode builds: its tag (one load, inlined into step). */
static inline uint8_t container_tag(uint8_t code)
{
    static const uint8_t tags[256] = {
        [OP_EMPTY_LIST] = SERTRACE_TAG_LIST,   [OP_LIST] = SERTRACE_TAG_LIST,
        [OP_EMPTY_DICT] = SERTRACE_TAG_DICT,   [OP_DICT] = SERTRACE_TAG_DICT,
        [OP_EMPTY_TUPLE] = SERTRACE_TAG_TUPLE, [OP_TUPLE] = SERTRACE_TAG_TUPLE,
        [OP_EMPTY_SET] = SERTRACE_TAG_SET,     [OP_FROZENSET] = SERTRACE_TAG_FROZENSET,
    };
    return tags[code];
}

/* EMPTY_LIST / EMPTY_DICT / EMPTY_SET / EMPTY_TUPLE at `start`: its item
 * and node (ending at e->pos).  One body for step and run_atoms. */
static inline int empty_container(emu *e, uint8_t code, uint64_t start, uint32_t first)
{
    uint8_t tag = container_tag(code);
    item *it = push(e, start, first, IK_NODE, tag);
    if (!it)
        return -1;
    if (!(it->type = emu_common_type(e, container_common(tag))))
        return -1;
    it->node = new_node(e, tag, it->type, start, 1);
    return it->node == NO_NODE ? -1 : 0;
}

/* The object a TUPLE / TUPLE1-3 / REDUCE / NEWOBJ(_EX) (`code`) made,
 * item `it` at stack slot `slot` (`length`: its node's), in a streamed
 * dump: when it is a pending tuple or call level of the chain, its
 * placeholder (entered already, README "Streaming") is its node, now
 * complete; true then. */
static bool complete_pending(emu *e, uint8_t code, item *it, uint32_t slot, uint64_t length)
{
    uint32_t j = emu_stream_pending(e, code, slot);
    if (j == NO_NODE)
        return false;
    node *n = &e->nodes[j];
    if (n->start != it->start || n->tag != it->tag || n->type != it->type)
        e->stream_wrong = true; /* (the walk ahead and read_chain say it cannot be) */
    n->length = length;
    n->end = e->pos;
    it->node = j;
    return true;
}

/* TUPLE1 / TUPLE2 / TUPLE3 (k items, there: the caller checked): the top
 * k items replaced by the tuple, its node ending at e->pos.  One body for
 * step and the atoms' loop (run_atoms), so both do the same. */
static inline __attribute__((always_inline)) int tuple_made(emu *e, uint32_t k, uint64_t start,
                                                            uint32_t first, const tuple_args *a)
{
    uint32_t from = e->nstack;
    item *it = push(e, start, first, IK_NODE, SERTRACE_TAG_TUPLE);
    if (!it)
        return -1;
    emu_give_args(it, a);
    if (!(it->type = emu_common_type(e, COMMON_TUPLE)))
        return -1;
    if (emu_pending_top(e, from) &&
        complete_pending(e, (uint8_t)(OP_TUPLE1 + k - 1), it, from, k + 1))
        return 0;
    it->node = new_node(e, SERTRACE_TAG_TUPLE, it->type, it->start, k + 1);
    return it->node == NO_NODE ? -1 : 0;
}

static inline int small_tuple(emu *e, uint32_t k)
{
    uint32_t from = e->nstack - k;
    const item *t = &e->stack[from];
    /* label_items(OP_TUPLE, from, NULL) inline: positions from 0, for
     * the items with a node (an atom has none) */
    for (uint32_t i = 0; i < k; i++)
        if (e->stack[from + i].node != NO_NODE)
            emu_label(e, &e->stack[from + i], SERTRACE_LABEL_POS, i);
    tuple_args a = emu_take_args(e, from, k);
    uint64_t start = t->start;
    uint32_t first = t->first_node;
    e->nstack = from; /* emu_replace inline: the items replaced */
    return tuple_made(e, k, start, first, &a);
}

static int step(emu *e, const op *o, uint64_t start, bool *stop)
{
    uint32_t first = e->nnodes;
    item *it, *t;
    mark m;
    bool after_discard = e->discarded;
    uint8_t last_op = e->last_op;

    e->discarded = false;
    e->last_op = o->code;
    if (e->discard_call && !(after_discard && (o->code == OP_POP || o->code == OP_POP_MARK))) {
        bool finished = after_discard &&
                        (o->code == OP_GET || o->code == OP_BINGET || o->code == OP_LONG_BINGET);
        e->discard_call = false;
        if (!finished && emu_obs_evasion(e, e->discard_at, SERTRACE_EVASION_POP_CALL,
                                         "the result of a call is discarded by POP") < 0)
            return -1;
    }

    switch (o->code) {
    case OP_PROTO:
        e->protocol = (int)o->num;
        if (o->num > 5) {
            char msg[8];
            snprintf(msg, sizeof msg, "%u", (unsigned)o->num);
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "unsupported pickle protocol %s",
                            msg);
        }
        return 0;
    case OP_FRAME:
        return 0; /* positions handled by the caller */
    case OP_STOP:
        *stop = true;
        return 0;
    case OP_MARK:
        if (emu_grow(e, (void **)&e->marks, &e->cap_marks, (uint64_t)e->nmarks + 1,
                     sizeof *e->marks) < 0)
            return -1;
        e->marks[e->nmarks].start = start;
        e->marks[e->nmarks].first_node = first;
        e->marks[e->nmarks].stack_len = e->nstack;
        e->marks[e->nmarks].dropped = 0;
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
        if (emu_need_items(e, o, 1) < 0)
            return -1;
        if (!after_discard && e->stack[e->nstack - 1].kind != IK_SETTER &&
            !(e->stack[e->nstack - 1].call_result &&
              (last_op == OP_REDUCE || last_op == OP_NEWOBJ || last_op == OP_NEWOBJ_EX ||
               last_op == OP_OBJ || last_op == OP_INST))) {
            /* the first of a chain of POPs then a GET: the elements of a
             * recursive tuple (TUPLE1-3's, or protocol 0's, whose last POP
             * takes the MARK) are labelled now, all still on the stack;
             * not a call's result POPped right after the call (an object
             * memoized while its arguments were written: the GET is it) */
            size_t j = 0;
            uint32_t floor = e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0, k;
            while (o->at + j < e->n && e->in[o->at + j] == OP_POP)
                j++;
            k = (uint32_t)(j < e->nstack - floor ? j : e->nstack - floor);
            label_discarded(e, e->nstack - k, o->at + j);
        }
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
        if (emu_pop_mark(e, o, &m) < 0)
            return -1;
        label_discarded(e, m.stack_len, o->at + o->len);
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
        if (emu_need_items(e, o, 1) < 0)
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
    case OP_INT: /* "00" and "01" are False and True */
        return push_text(
            e, start, first, IK_ATOM,
            (o->data_len == 2 && o->data[0] == '0' && (o->data[1] == '0' || o->data[1] == '1'))
                ? SERTRACE_TAG_ATOM
                : SERTRACE_TAG_INT,
            o->code, o->data, o->data_len);
    case OP_BININT:
    case OP_BININT1:
    case OP_BININT2:
    case OP_LONG:
    case OP_LONG1:
    case OP_LONG4:
        /* its value: a LONG's digits, else the argument bytes */
        return push_text(e, start, first, IK_ATOM, SERTRACE_TAG_INT, o->code,
                         o->data ? o->data : o->arg, o->data ? o->data_len : o->len - 1);
    case OP_FLOAT:
    case OP_BINFLOAT:
        return push(e, start, first, IK_ATOM, SERTRACE_TAG_FLOAT) ? 0 : -1;
    case OP_BINBYTES:
    case OP_SHORT_BINBYTES:
    case OP_BINBYTES8:
        return push_text(e, start, first, IK_ATOM, SERTRACE_TAG_BYTES, 0, o->data, o->data_len);
    case OP_STRING:
    case OP_BINSTRING:
    case OP_SHORT_BINSTRING:
    case OP_UNICODE:
    case OP_BINUNICODE:
    case OP_SHORT_BINUNICODE:
    case OP_BINUNICODE8:
        /* STRING is quoted: its text is between the quotes */
        if (o->code == OP_STRING && o->data_len >= 2)
            return push_text(e, start, first, IK_STR, SERTRACE_TAG_STR, o->code, o->data + 1,
                             o->data_len - 2);
        return push_text(e, start, first, IK_STR, SERTRACE_TAG_STR, o->code, o->data, o->data_len);
    case OP_BYTEARRAY8:
        if (!(it = push(e, start, first, IK_NODE, SERTRACE_TAG_BYTEARRAY)))
            return -1;
        it->type = emu_intern_type(e, "bytearray");
        if (!it->type)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_BYTEARRAY, it->type, start, o->num + 1);
        return it->node == NO_NODE ? -1 : 0;
    case OP_NEXT_BUFFER:
        if (!(it = push(e, start, first, IK_NODE, SERTRACE_TAG_PICKLEBUFFER)))
            return -1;
        it->type = emu_intern_type(e, "pickle.PickleBuffer");
        if (!it->type)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_PICKLEBUFFER, it->type, start, 0);
        return it->node == NO_NODE ? -1 : 0;
    case OP_READONLY_BUFFER:
        if (emu_need_items(e, o, 1) < 0)
            return -1;
        touch(e, &e->stack[e->nstack - 1]);
        return 0;

    /* containers */
    case OP_EMPTY_LIST:
    case OP_EMPTY_DICT:
    case OP_EMPTY_SET:
    case OP_EMPTY_TUPLE:
        return empty_container(e, o->code, start, first);
    case OP_LIST:
    case OP_DICT:
    case OP_TUPLE:
    case OP_FROZENSET: {
        uint8_t tag = container_tag(o->code);
        uint64_t count;
        tuple_args a;
        if (emu_pop_mark(e, o, &m) < 0)
            return -1;
        /* (a big group streamed: its items after the first two taken off
         * the stack, m.dropped of them, fed with their positions) */
        count = e->nstack - m.stack_len + m.dropped;
        a = emu_take_args(e, m.stack_len, count);
        if (m.dropped && o->code == OP_TUPLE) {
            for (uint32_t i = m.stack_len; i < e->nstack; i++)
                emu_label(e, &e->stack[i], SERTRACE_LABEL_POS,
                          i - m.stack_len < 2 ? i - m.stack_len : i - m.stack_len + m.dropped);
        } else if (label_items(e, o->code, m.stack_len, NULL) < 0) {
            return -1;
        }
        if (o->code == OP_DICT)
            count /= 2;
        if (!(it = emu_replace(e, m.stack_len, m.start, m.first_node, IK_NODE, tag)))
            return -1;
        if (o->code == OP_TUPLE)
            emu_give_args(it, &a);
        if (!(it->type = emu_intern_type(e, container_name(tag))))
            return -1;
        if ((o->code == OP_TUPLE || o->code == OP_FROZENSET) && e->streamed &&
            complete_pending(e, o->code, it, m.stack_len, count + 1))
            return 0;
        it->node = new_node(e, tag, it->type, m.start, count + 1);
        if (it->node == NO_NODE)
            return -1;
        e->nodes[it->node].added = count; /* a LIST's APPENDs go on from there */
        return 0;
    }
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        uint32_t k = o->code - OP_TUPLE1 + 1;
        if (emu_need_items(e, o, k) < 0)
            return -1;
        return small_tuple(e, k);
    }
    case OP_APPEND:
        if (emu_need_items(e, o, 2) < 0)
            return -1;
        {
            uint64_t s = e->stack[e->nstack - 1].start;
            if (label_items(e, OP_APPEND, e->nstack - 1, &e->stack[e->nstack - 2]) < 0)
                return -1;
            e->nstack--;
            return emu_add_items(e, &e->stack[e->nstack - 1], s, 1);
        }
    case OP_SETITEM:
        if (emu_need_items(e, o, 3) < 0)
            return -1;
        {
            uint64_t s = e->stack[e->nstack - 2].start;
            if (label_items(e, OP_SETITEM, e->nstack - 2, &e->stack[e->nstack - 3]) < 0)
                return -1;
            e->nstack -= 2;
            return emu_add_items(e, &e->stack[e->nstack - 1], s, 1);
        }
    case OP_APPENDS:
    case OP_SETITEMS:
    case OP_ADDITEMS: {
        uint64_t count;
        if (emu_pop_mark(e, o, &m) < 0)
            return -1;
        count = e->nstack - m.stack_len;
        if (o->code == OP_SETITEMS)
            count /= 2;
        if (m.stack_len >= 1 + (e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0) &&
            label_items(e, o->code, m.stack_len, &e->stack[m.stack_len - 1]) < 0)
            return -1;
        e->nstack = m.stack_len;
        if (emu_need_items(e, o, 1) < 0)
            return -1;
        return emu_add_items(e, &e->stack[e->nstack - 1], m.start, count);
    }

    /* memo */
    case OP_PUT: {
        uint64_t key;
        if (decimal(o->data, o->data_len, &key) < 0)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                            "PUT: the memo key is not a decimal number%s", "");
        return emu_memo_put(e, o, key);
    }
    case OP_BINPUT:
    case OP_LONG_BINPUT:
        return emu_memo_put(e, o, o->num);
    case OP_MEMOIZE:
        return emu_memo_put(e, o, e->memo_used + e->dense_used); /* len(memo) */
    case OP_GET: {
        uint64_t key;
        if (decimal(o->data, o->data_len, &key) < 0)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                            "GET: the memo key is not a decimal number%s", "");
        return emu_memo_get(e, o, key, start, first, after_discard);
    }
    case OP_BINGET:
    case OP_LONG_BINGET:
        return emu_memo_get(e, o, o->num, start, first, after_discard);

    /* globals */
    case OP_GLOBAL:
        if (!(it = push(e, start, first, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
            return -1;
        if (!(it->type = emu_intern_type2(e, (const char *)o->data, o->data_len,
                                          (const char *)o->data2, o->data2_len)))
            return -1;
        it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, start, 0);
        if (it->node == NO_NODE)
            return -1;
        return emu_obs_global(e, o->at, SERTRACE_GLOBAL_OPCODE, it->type);
    case OP_STACK_GLOBAL: {
        item *mod, *name;
        if (emu_need_items(e, o, 2) < 0)
            return -1;
        mod = &e->stack[e->nstack - 2];
        name = &e->stack[e->nstack - 1];
        if (mod->kind != IK_STR || name->kind != IK_STR)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                            "STACK_GLOBAL: the module and name are not both strings%s", "");
        {
            uint64_t s = mod->start;
            uint32_t f = mod->first_node;
            const char *mt = (const char *)e->in + mod->text_off,
                       *nt = (const char *)e->in + name->text_off;
            uint32_t ml = mod->text_len, nl = name->text_len;
            bool memo = mod->from_memo || name->from_memo;
            if (!(it = emu_replace(e, e->nstack - 2, s, f, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
                return -1;
            if (!(it->type = emu_intern_type2(e, mt, ml, nt, nl)))
                return -1;
            it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, s, 0);
            if (it->node == NO_NODE)
                return -1;
            if (emu_obs_global(e, o->at, memo ? SERTRACE_GLOBAL_STACK_MEMO : SERTRACE_GLOBAL_STACK,
                               it->type) < 0)
                return -1;
            if (memo && e->obs) {
                char d[SERTRACE_STRING_MAX + 80], nm[SERTRACE_STRING_MAX + 16];
                emu_full_name(e, it->type, nm, sizeof nm);
                snprintf(d, sizeof d, "STACK_GLOBAL names %s with strings read back from the memo",
                         nm);
                if (emu_obs_evasion(e, o->at, SERTRACE_EVASION_STACK_GLOBAL_MEMO, d) < 0)
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
        if (!(it->type = emu_intern_type(e, name)))
            return -1;
        ext = new_node(e, SERTRACE_TAG_EXT, it->type, start, 0);
        if (ext == NO_NODE)
            return -1;
        it->node = new_node(e, SERTRACE_TAG_GLOBAL, it->type, start, 0);
        if (it->node == NO_NODE)
            return -1;
        e->nodes[ext].object = emu_object_of(e, it->node); /* a part of the global */
        return emu_obs_global(e, o->at, SERTRACE_GLOBAL_EXT, it->type);
    }

    /* calls */
    case OP_REDUCE: {
        item *fn, *args;
        uint8_t tag = SERTRACE_TAG_REDUCE;
        uint32_t type;
        if (emu_need_items(e, o, 2) < 0)
            return -1;
        fn = &e->stack[e->nstack - 2];
        args = &e->stack[e->nstack - 1];
        type = fn->type;

        if (emu_name_is(e, type, "_codecs.encode") || emu_name_is(e, type, "bytes")) {
            /* bytes below protocol 3: one atom, no nodes inside -- unless
             * it is the dumped object itself, whose children follow the
             * dump's granularity (revived at STOP) */
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            if (emu_obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
                return -1;
            emu_label(e, fn, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE);
            emu_label(e, args, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS);
            for (uint32_t i = f; i < e->nnodes; i++)
                e->nodes[i].dead = true;
            it = emu_replace(e, e->nstack - 2, s, f, IK_ATOM, SERTRACE_TAG_BYTES);
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
            if (emu_obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
                return -1;
            emu_label(e, fn, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE);
            if (args->node != NO_NODE) {
                node *tn = &e->nodes[args->node];
                uint32_t state = NO_NODE;
                tn->dead = true; /* the pickler writes no tuple node */
                /* the state (the tuple's last element, labelled [1] by
                 * TUPLE) is the obj's state: the outermost node of the
                 * tuple's that ends where the element ends, one byte
                 * (TUPLE2 or TUPLE) before the tuple */
                for (uint32_t i = args->first_node; i < args->node; i++) {
                    node *x = &e->nodes[i];
                    /* the obj argument, a memo reference to obj (labelled
                     * [0] by TUPLE): the pickler writes it as no item of
                     * anything, so a recording gives it no label */
                    if (!x->dead && x->tag == SERTRACE_TAG_MEMO && x->start == tn->start &&
                        x->label_kind == SERTRACE_LABEL_POS && x->label == 0)
                        x->label_kind = SERTRACE_LABEL_NONE;
                    if (!x->dead && x->end + 1 == tn->end && x->label_kind == SERTRACE_LABEL_POS &&
                        x->label == 1 &&
                        (state == NO_NODE || x->start < e->nodes[state].start ||
                         (x->start == e->nodes[state].start && x->end >= e->nodes[state].end)))
                        state = i;
                }
                if (state != NO_NODE) {
                    e->nodes[state].label_kind = SERTRACE_LABEL_ROLE;
                    e->nodes[state].label = SERTRACE_ROLE_STATE;
                }
            }
            e->nstack -= 2;
            touch(e, obj);
            it = push(e, start, first, IK_SETTER, SERTRACE_TAG_ATOM);
            return it ? 0 : -1;
        }
        if (emu_name_is(e, type, "getattr") && args->arg0_global && args->arg0_type &&
            args->arg1_len && args->nargs == 2) {
            /* a nested class by reference below protocol 4:
             * getattr(Outer, 'Inner') is one global */
            uint32_t plen;
            const char *parent = emu_type_name(e, args->arg0_type, &plen);
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            uint32_t t2 = emu_intern_type2(e, parent, plen, (const char *)e->in + args->arg1_off,
                                           args->arg1_len);
            if (!t2)
                return -1;
            emu_label(e, fn, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE);
            emu_label(e, args, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS);
            if (!(it = emu_replace(e, e->nstack - 2, s, f, IK_GLOBAL, SERTRACE_TAG_GLOBAL)))
                return -1;
            it->type = t2;
            it->node = new_node(e, SERTRACE_TAG_GLOBAL, t2, s, 0);
            if (it->node == NO_NODE)
                return -1;
            e->nodes[it->node].note = NOTE_GETATTR;
            return emu_obs_global(e, o->at, SERTRACE_GLOBAL_GETATTR, t2);
        }
        if (emu_name_is(e, type, "set"))
            tag = SERTRACE_TAG_SET;
        else if (emu_name_is(e, type, "frozenset"))
            tag = SERTRACE_TAG_FROZENSET;
        else if (emu_name_is(e, type, "bytearray"))
            tag = SERTRACE_TAG_BYTEARRAY;
        else if (emu_name_is(e, type, "copyreg._reconstructor") ||
                 emu_name_is(e, type, "copy_reg._reconstructor") ||
                 emu_name_is(e, type, "copyreg.__newobj__") ||
                 emu_name_is(e, type, "copy_reg.__newobj__")) {
            /* an instance of the class in the first argument */
            tag = SERTRACE_TAG_INSTANCE;
            if (args->arg0_type)
                type = args->arg0_type;
        }
        if (emu_obs_call(e, o->at, OP_REDUCE, fn, args, NULL) < 0)
            return -1;
        if (e->obs) {
            if (tag == SERTRACE_TAG_INSTANCE) {
                /* the reconstructor creates an instance of its first argument */
                item cls;
                memset(&cls, 0, sizeof cls);
                cls.global = args->arg0_global;
                cls.type = args->arg0_type;
                cls.tag = SERTRACE_TAG_GLOBAL;
                if (emu_obs_call(e, o->at, OP_REDUCE, &cls, NULL,
                                 "(instance created by the reconstructor)") < 0)
                    return -1;
            }
            if (!fn->global &&
                emu_obs_evasion(e, o->at, SERTRACE_EVASION_NON_GLOBAL_CALLABLE,
                                fn->call_result
                                    ? "REDUCE calls the result of an earlier call"
                                    : "REDUCE calls an object that is not a global") < 0)
                return -1;
            if (fn->global && args->arg0_len && emu_audit_nested(e, o, fn, args) < 0)
                return -1;
        }
        emu_label(e, fn, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE);
        emu_label(e, args, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS);
        {
            uint64_t s = fn->start;
            uint32_t f = fn->first_node;
            if (!(it = emu_replace(e, e->nstack - 2, s, f, IK_NODE, tag)))
                return -1;
            it->type = type;
            it->call_result = true;
            if (emu_pending_top(e, e->nstack - 1) &&
                complete_pending(e, OP_REDUCE, it, e->nstack - 1, 0))
                return 0;
            it->node = new_node(e, tag, type, s, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_NEWOBJ:
    case OP_NEWOBJ_EX: {
        uint32_t k = o->code == OP_NEWOBJ ? 2 : 3;
        item *cls;
        if (emu_need_items(e, o, k) < 0)
            return -1;
        cls = &e->stack[e->nstack - k];
        if (emu_obs_call(e, o->at, o->code, cls, &e->stack[e->nstack - k + 1], NULL) < 0)
            return -1;
        if (e->obs && !cls->global &&
            emu_obs_evasion(e, o->at, SERTRACE_EVASION_NON_GLOBAL_CALLABLE,
                            "NEWOBJ creates an instance of an object that is not a global") < 0)
            return -1;
        emu_label(e, cls, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE);
        for (uint32_t i = e->nstack - k + 1; i < e->nstack; i++) /* args (and kwargs) */
            emu_label(e, &e->stack[i], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS);
        {
            uint64_t s = cls->start;
            uint32_t f = cls->first_node, type = cls->type;
            if (!(it = emu_replace(e, e->nstack - k, s, f, IK_NODE, SERTRACE_TAG_INSTANCE)))
                return -1;
            it->type = type;
            it->call_result = true;
            if (emu_pending_top(e, e->nstack - 1) &&
                complete_pending(e, o->code, it, e->nstack - 1, 0))
                return 0;
            it->node = new_node(e, SERTRACE_TAG_INSTANCE, type, s, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_OBJ: {
        item *cls;
        if (emu_pop_mark(e, o, &m) < 0)
            return -1;
        if (e->nstack < m.stack_len + 1)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "OBJ: no class after the MARK%s",
                            "");
        cls = &e->stack[m.stack_len];
        if (emu_obs_evasion(e, o->at, SERTRACE_EVASION_INST_OBJ,
                            "OBJ (a protocol 1 call no pickler of Python 3 writes)") < 0 ||
            emu_obs_call(e, o->at, OP_OBJ, cls, NULL, "(the items after the class)") < 0)
            return -1;
        {
            uint32_t type = cls->type;
            if (!(it = emu_replace(e, m.stack_len, m.start, m.first_node, IK_NODE,
                                   SERTRACE_TAG_INSTANCE)))
                return -1;
            it->type = type;
            it->call_result = true;
            it->node = new_node(e, SERTRACE_TAG_INSTANCE, type, m.start, 0);
        }
        return it->node == NO_NODE ? -1 : 0;
    }
    case OP_INST:
        if (emu_pop_mark(e, o, &m) < 0)
            return -1;
        if (!(it = emu_replace(e, m.stack_len, m.start, m.first_node, IK_NODE,
                               SERTRACE_TAG_INSTANCE)))
            return -1;
        if (!(it->type = emu_intern_type2(e, (const char *)o->data, o->data_len,
                                          (const char *)o->data2, o->data2_len)))
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
            if (emu_obs_global(e, o->at, SERTRACE_GLOBAL_INST, it->type) < 0 ||
                emu_obs_evasion(e, o->at, SERTRACE_EVASION_INST_OBJ,
                                "INST (a protocol 0 call no pickler of Python 3 writes)") < 0 ||
                emu_obs_call(e, o->at, OP_INST, &cls, NULL, "(the items after the MARK)") < 0)
                return -1;
        }
        return 0;
    case OP_BUILD:
        if (emu_need_items(e, o, 2) < 0)
            return -1;
        if (e->obs) {
            char d[80];
            item *target = &e->stack[e->nstack - 2], *state = &e->stack[e->nstack - 1];
            snprintf(
                d, sizeof d, "(state: %s)",
                emu_shape_name(state->node != NO_NODE ? e->nodes[state->node].tag : state->tag));
            if (target->global &&
                emu_obs_evasion(e, o->at, SERTRACE_EVASION_BUILD_GLOBAL,
                                "BUILD sets attributes on a module or class (a global)") < 0)
                return -1;
            if (emu_obs_call(e, o->at, OP_BUILD, target, NULL, d) < 0)
                return -1;
        }
        emu_label(e, &e->stack[e->nstack - 1], SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
        e->nstack--;
        t = &e->stack[e->nstack - 1];
        t->it_node = NO_NODE;
        touch(e, t);
        return 0;
    case OP_PERSID:
    case OP_BINPERSID:
        if (o->code == OP_BINPERSID) {
            if (emu_need_items(e, o, 1) < 0)
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
    return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at, "opcode not handled%s", "");
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
    e->next_id = 0;
    e->id_shift = 1;
    e->nkept = e->id_fed = e->nspec = e->spec_watch = e->stream_retry = 0;
    e->stream_wrong = false;
    e->stream_pos = 0;
    e->nahead = 0;
    e->ahead_bytes = 0;
    e->streamed = false;
    e->stream_ok =
        e->core && !e->obs && e->stream_nodes != UINT32_MAX && sertrace_core_can_abort(e->core);
    e->group_at = e->stream_ok ? e->group_min : UINT32_MAX;
    e->group_tries = 0;
    e->compacted = false;
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
    if (e->dense_cap > 4096 && e->dump_id) { /* not the cached table of the first */
        e->memory -= e->dense_cap * sizeof *e->dense;
        free(e->dense);
        e->dense = NULL;
        e->dense_cap = 0;
    }
    e->dense_used = 0;
    e->dense_init = 0;
    e->ntypes = 0;
    e->names_len = 0;
    memset(e->common_types, 0, sizeof e->common_types);
    memset(e->key_label_off, 0, sizeof e->key_label_off);
    if (e->type_hash_cap > 1024) {
        e->memory -= (uint64_t)e->type_hash_cap * sizeof *e->type_hash;
        free(e->type_hash);
        e->type_hash = NULL;
        e->type_hash_cap = 0;
    } else if (e->type_hash_cap) {
        memset(e->type_hash, 0, (size_t)e->type_hash_cap * sizeof *e->type_hash);
    }
}

/* ---- the atoms' loop --------------------------------------------------------- */

/* A 4-byte length (le() with n = 4, written out: GCC keeps le's loop). */
static inline uint64_t le32(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* The memo key of the BINGET or LONG_BINGET at `at` (its argument is
 * there). */
static inline uint64_t in_key(const emu *e, size_t at)
{
    return e->in[at] == OP_BINGET ? e->in[at + 1] : le32(e->in + at + 1);
}

/* The length of that GET. */
static inline size_t get_len(const emu *e, size_t at)
{
    return e->in[at] == OP_BINGET ? 2 : 5;
}

/* What an atom's item holds beside its start (push_text's arguments). */
typedef struct atom {
    uint64_t toff, tlen;
    uint8_t kind, tag, enc;
} atom;

/* The atom opcode at `at` (None, bools, BININT*, LONG1, BINFLOAT, the
 * short and 4-byte str and bytes), whole before `limit`: its length, and
 * in `a` what step() would push for it; 0 for any other opcode, or one cut
 * at `limit` (the general loop does those, or says what is wrong). */
static inline size_t atom_at(const uint8_t *in, size_t at, size_t limit, atom *a)
{
    uint8_t c = in[at];
    size_t left = limit - at - 1, len;
    a->kind = IK_ATOM;
    a->enc = c;
    a->toff = at + 1;
    switch (c) {
    case OP_BININT1:
        len = 2, a->tag = SERTRACE_TAG_INT, a->tlen = 1;
        break;
    case OP_BININT2:
        len = 3, a->tag = SERTRACE_TAG_INT, a->tlen = 2;
        break;
    case OP_BININT:
        len = 5, a->tag = SERTRACE_TAG_INT, a->tlen = 4;
        break;
    case OP_BINFLOAT:
        len = 9, a->tag = SERTRACE_TAG_FLOAT, a->enc = 0, a->toff = 0, a->tlen = 0;
        break;
    case OP_NONE:
    case OP_NEWTRUE:
    case OP_NEWFALSE:
        len = 1, a->tag = SERTRACE_TAG_ATOM, a->enc = 0, a->toff = 0, a->tlen = 0;
        break;
    case OP_SHORT_BINUNICODE:
    case OP_SHORT_BINBYTES:
    case OP_LONG1:
        if (left < 1)
            return 0;
        a->tlen = in[at + 1];
        a->toff = at + 2;
        len = 2 + a->tlen;
        if (c == OP_SHORT_BINUNICODE)
            a->kind = IK_STR, a->tag = SERTRACE_TAG_STR;
        else if (c == OP_LONG1)
            a->tag = SERTRACE_TAG_INT;
        else
            a->tag = SERTRACE_TAG_BYTES, a->enc = 0;
        break;
    case OP_BINUNICODE:
    case OP_BINBYTES:
        if (left < 4)
            return 0;
        a->tlen = le32(in + at + 1);
        a->toff = at + 5;
        len = 5 + a->tlen;
        if (c == OP_BINUNICODE)
            a->kind = IK_STR, a->tag = SERTRACE_TAG_STR;
        else
            a->tag = SERTRACE_TAG_BYTES, a->enc = 0;
        break;
    default:
        return 0;
    }
    return len - 1 > left ? 0 : len;
}

/* What emu_memo_put() records of an atom's item (nothing but `a`). */
static inline void memo_atom(memo_entry *m, const atom *a)
{
    m->global = false;
    m->kind = a->kind;
    m->tag = a->tag;
    m->enc = a->enc;
    m->type = 0;
    m->text_off = a->toff;
    m->text_len = (uint32_t)a->tlen;
    m->length = 0;
    m->object = 0;
}

/* An atom's item on the stack (the caller made room: push() cannot fail;
 * its field-by-field stores, not a struct copy, which GCC made a `rep
 * stos` of the item and then the fields). */
static inline item *put_atom(emu *e, uint64_t start, const atom *a)
{
    item *it = push(e, start, e->nnodes, a->kind, a->tag);
    it->enc = a->enc;
    it->text_off = a->toff;
    it->text_len = (uint32_t)a->tlen;
    return it;
}

/* A tuple of atoms (TUPLE1-3 right after its atoms, no memo opcode between
 * them): its k when one starts with the atom at `at` (`len` bytes), whole
 * before `limit`; else 0.  Lengths only: the atoms are read by
 * atoms_tuple. */
static inline uint32_t atoms_tuple_at(const uint8_t *in, size_t at, size_t len, size_t limit)
{
    /* an atom's whole length, or 0xff (a 1-byte length after the opcode)
     * or 0xfe (a 4-byte one); 0: no atom */
    static const uint8_t atom_len[256] = {
        [OP_NONE] = 1,
        [OP_NEWTRUE] = 1,
        [OP_NEWFALSE] = 1,
        [OP_BININT1] = 2,
        [OP_BININT2] = 3,
        [OP_BININT] = 5,
        [OP_BINFLOAT] = 9,
        [OP_LONG1] = 0xff,
        [OP_SHORT_BINUNICODE] = 0xff,
        [OP_SHORT_BINBYTES] = 0xff,
        [OP_BINUNICODE] = 0xfe,
        [OP_BINBYTES] = 0xfe,
    };
    at += len;
    for (uint32_t k = 1; at < limit; k++) {
        uint8_t c = in[at], l;
        if (c >= OP_TUPLE1 && c <= OP_TUPLE3)
            return (uint32_t)(c - OP_TUPLE1 + 1) == k ? k : 0;
        if (k == 3 || !(l = atom_len[c]))
            return 0;
        if (l == 0xff)
            at += limit - at > 1 ? 2 + (size_t)in[at + 1] : limit;
        else if (l == 0xfe)
            at += limit - at > 4 ? 5 + (size_t)le32(in + at + 1) : limit;
        else
            at += l;
    }
    return 0;
}

/* The tuple of the k atoms from `at` (position `pos`) and the TUPLE<k>
 * after them (atoms_tuple_at said so): what pushing the atoms and
 * small_tuple would do, without their items (an atom has no node to
 * label; emu_take_args's fields without an observer: run_atoms has
 * none).  The offset after the TUPLE, or 0 (status set). */
static __attribute__((noinline)) size_t atoms_tuple(emu *e, size_t at, size_t limit, uint64_t pos,
                                                    uint32_t k)
{
    tuple_args t = {NO_KEY, 0, 0, 0, 0, 0, 0, {0}, false};
    size_t from = at;
    t.nargs = k;
    for (uint32_t i = 0; i < k; i++) {
        atom a;
        size_t len = atom_at(e->in, at, limit, &a);
        if (!len) /* (atoms_tuple_at read them) */
            return emu_fail(e, SERTRACE_INSPECT_FAILED, at, "atoms' tuple misread%s", ""), 0;
        if (i == 0 && a.tag == SERTRACE_TAG_BYTES && a.kind == IK_ATOM) {
            t.arg0_off = a.toff;
            t.arg0_len = (uint32_t)a.tlen;
        }
        if (i == 1 && a.kind == IK_STR) {
            t.arg1_off = a.toff;
            t.arg1_len = (uint32_t)a.tlen;
        }
        at += len;
    }
    e->pos = pos + (at - from) + 1;
    if (tuple_made(e, k, pos, e->nnodes, &t) < 0)
        return 0;
    return at + 1;
}

/* The memo entry a BINGET at `at` reads when run_atoms may push it: found
 * (as emu_memo_find finds it: the dense array first) and an atom or a str
 * (no node: emu_memo_get pushes nothing else then); NULL otherwise (the
 * general loop reads it, or says what is wrong). */
static inline const memo_entry *atom_get_at(const emu *e, size_t at, size_t limit,
                                            uint64_t dense_init)
{
    const memo_entry *m;
    if (limit - at < get_len(e, at) || in_key(e, at) >= dense_init)
        return NULL;
    m = &e->dense[in_key(e, at)];
    return m->used && !m->global && (m->kind == IK_ATOM || m->kind == IK_STR) ? m : NULL;
}

/* What emu_memo_get pushes for an atom's or a str's entry `m` (key `key`). */
static inline void put_memo_atom(emu *e, uint64_t start, const memo_entry *m, uint64_t key)
{
    item *it = push(e, start, e->nnodes, m->kind, m->tag);
    emu_from_memo(it, m, key);
}

/* A batch run_atoms read without pushing its items (`n` atoms from input
 * offset `from`, at position `pos`, up to `to`; the memo keys given there
 * from `key`): its items pushed now, as step() would have, with the keys
 * of their MEMOIZE / BINPUT. */
static int push_batch(emu *e, size_t from, size_t to, uint64_t pos, uint32_t n, uint64_t key)
{
    if (!n)
        return 0;
    if (emu_grow(e, (void **)&e->stack, &e->cap_stack, (uint64_t)e->nstack + n, sizeof *e->stack) <
        0)
        return -1;
    for (size_t at = from; at < to;) {
        atom a;
        size_t len = atom_at(e->in, at, to, &a);
        if (len) {
            put_atom(e, pos + (at - from), &a);
        } else if (e->in[at] == OP_MEMOIZE) {
            e->stack[e->nstack - 1].memo_key = key++;
            len = 1;
        } else if (e->in[at] == OP_BINGET || e->in[at] == OP_LONG_BINGET) {
            put_memo_atom(e, pos + (at - from), &e->dense[in_key(e, at)], in_key(e, at));
            len = get_len(e, at);
        } else if (e->in[at] == OP_FRAME) {
            len = 1 + 8; /* its header counts now: positions go on with offsets */
        } else if (e->in[at] == OP_BINPUT) {
            e->stack[e->nstack - 1].memo_key = e->in[at + 1];
            key++;
            len = 2;
        } else { /* LONG_BINPUT */
            e->stack[e->nstack - 1].memo_key = le32(e->in + at + 1);
            key++;
            len = 5;
        }
        at += len;
    }
    return 0;
}

/* TUPLE / FROZENSET (`code`) of a batch run_atoms read without pushing
 * its items (push_batch's arguments; its MARK the top one): the container's
 * item and node, as step() makes them from the pushed items -- atoms have
 * no node, so no label -- but with only the first two items pushed (what
 * a tuple remembers for a REDUCE, emu_take_args), so that a tuple of 10^6
 * ints holds no 10^6 items. */
static int batch_container(emu *e, uint8_t code, size_t from, size_t to, uint64_t pos, uint32_t n,
                           uint64_t key)
{
    uint32_t first = 0;
    size_t at = from;
    while (at < to) { /* the bytes of the first two items (and their memo puts) */
        atom a;
        size_t len = atom_at(e->in, at, to, &a);
        bool is_item = len || e->in[at] == OP_BINGET;
        if (is_item && first == 2)
            break;
        first += is_item;
        at += len                       ? len
              : e->in[at] == OP_MEMOIZE ? 1
              : e->in[at] == OP_FRAME   ? 1 + 8
                                        : 2; /* BINGET, BINPUT */
    }
    if (push_batch(e, from, at, pos, first, key) < 0)
        return -1;
    mark m = e->marks[--e->nmarks];
    uint8_t tag = container_tag(code);
    tuple_args ta = emu_take_args(e, m.stack_len, n);
    item *it = emu_replace(e, m.stack_len, m.start, m.first_node, IK_NODE, tag);
    if (!it)
        return -1;
    if (code == OP_TUPLE)
        emu_give_args(it, &ta);
    if (!(it->type = emu_intern_type(e, container_name(tag))))
        return -1;
    it->node = new_node(e, tag, it->type, m.start, (uint64_t)n + 1);
    if (it->node == NO_NODE)
        return -1;
    e->nodes[it->node].added = n;
    e->last_op = code;
    return 0;
}

/* The opcodes most of a payload is made of, where nothing but an item (or
 * a mark, or a memo entry) is made: the atoms, MARK, MEMOIZE / BINPUT of a
 * new key at the edge of the dense memo, and the APPENDS / SETITEMS /
 * ADDITEMS of a batch of atoms.  They are run here from input offset *at
 * while each lies whole before `limit` (the end of the current frame, or
 * of the input), with what step() does for them and nothing else:
 * run_pickle's checks (frames, max_op_proto, the audit's evasions) cannot
 * fire for them here, since the caller enters only with no observer,
 * nothing just discarded, a protocol 2 opcode seen and the frame not ended.
 *
 * The atoms after a MARK are only counted (a batch): when APPENDS,
 * SETITEMS or ADDITEMS takes them all, their items would only be counted
 * and dropped (an atom has no node to label); anything else first pushes
 * them (push_batch, from the bytes again).  Anything else -- another
 * opcode, one cut, a full table, a key already used -- goes back to the
 * general loop, which does it (or says what is wrong) as before.
 *
 * 0, or -1 (status set); *at is the offset after the last opcode run,
 * *batch is set when it was an APPENDS / SETITEMS / ADDITEMS (the caller
 * may stream the root's batch, as after step). */
static int run_atoms(emu *e, size_t *pat, size_t limit, bool *batch)
{
    const uint8_t *in = e->in;
    size_t at = *pat, batch_at = 0;
    uint64_t pos = e->pos, batch_pos = 0, batch_key = 0;
    uint32_t nbatch = 0;
    bool in_batch = false;
    uint8_t last = 0;
    size_t top_at = 0; /* the batch's last atom */
    /* the dense memo's counts, kept here and stored back on the way out;
     * an edge key is new only with nothing in the hash */
    uint64_t dense_used = e->dense_used, dense_init = e->dense_init;
    uint64_t dense_end = e->memo_used ? 0 : e->dense_cap;
    atom a;

    for (;;) {
        uint8_t c;
        size_t len;
        if (at >= limit) {
            /* the next frame right where this one ends: what run_pickle
             * does for it (the previous frame's header counts now), so
             * that a batch goes on across frames */
            uint64_t num;
            if (!e->frame_pending || at != e->frame_end || e->n - at < 1 + 8 || in[at] != OP_FRAME)
                break;
            num = le(in + at + 1, 8);
            if (num > e->n || at + FRAME_HEADER + num > e->n)
                break;
            pos += FRAME_HEADER;
            e->frame_start = at;
            e->frame_end = at + FRAME_HEADER + num;
            limit = e->frame_end;
            at += FRAME_HEADER;
            continue;
        }
        c = in[at];
        len = atom_at(in, at, limit, &a);
        if (len) {
            if (in_batch) {
                nbatch++;
                top_at = at;
                if ((a.kind == IK_STR || a.tag == SERTRACE_TAG_BYTES) && at + len < limit &&
                    in[at + len] == OP_MEMOIZE && dense_used == dense_init &&
                    dense_used < dense_end) { /* a str or bytes, memoized: MEMOIZE below */
                    memo_entry *m = &e->dense[dense_used];
                    m->key = dense_used;
                    m->used = true;
                    memo_atom(m, &a);
                    dense_init = ++dense_used;
                    pos += 1;
                    at += 1;
                    c = OP_MEMOIZE;
                }
            } else {
                uint32_t k;
                if (e->nstack == e->cap_stack || e->nstack >= e->group_at)
                    break; /* (group_at: a big group? run_pickle) */
                if ((k = atoms_tuple_at(in, at, len, limit)) &&
                    !(e->streamed && e->nstack <= e->spec_watch)) {
                    /* (as at TUPLE1-3 below: not where a streamed dump's
                     * watch would look) */
                    size_t next = atoms_tuple(e, at, limit, pos, k);
                    if (!next)
                        return -1;
                    pos = e->pos;
                    last = (uint8_t)(OP_TUPLE1 + k - 1);
                    at = next;
                    if (e->nstack >= e->group_at)
                        goto out;
                    continue;
                }
                put_atom(e, pos, &a);
            }
            pos += len;
            last = c;
            at += len;
            continue;
        }
        switch (c) {
        case OP_MARK:
            if (in_batch && push_batch(e, batch_at, at, batch_pos, nbatch, batch_key) < 0)
                return -1;
            in_batch = false;
            /* (grown here, as step() does: a pickle's first MARK starts a
             * batch too, such as a root tuple of ints) */
            if (e->nmarks == e->cap_marks &&
                emu_grow(e, (void **)&e->marks, &e->cap_marks, (uint64_t)e->nmarks + 1,
                         sizeof *e->marks) < 0)
                return -1;
            e->marks[e->nmarks].start = pos;
            e->marks[e->nmarks].first_node = e->nnodes;
            e->marks[e->nmarks].stack_len = e->nstack;
            e->marks[e->nmarks].dropped = 0;
            e->nmarks++;
            pos += 1;
            last = c;
            at += 1;
            in_batch = true;
            batch_at = at;
            batch_pos = pos;
            batch_key = dense_used;
            nbatch = 0;
            continue;
        case OP_MEMOIZE:
        case OP_BINPUT:
        case OP_LONG_BINPUT: {
            uint64_t key = c == OP_MEMOIZE  ? dense_used
                           : c == OP_BINPUT ? (limit - at > 1 ? in[at + 1] : NO_KEY)
                                            : (limit - at > 4 ? le32(in + at + 1) : NO_KEY);
            memo_entry *m;
            /* a new key at the dense memo's edge, an item to store */
            if (key != dense_init || key >= dense_end ||
                (in_batch ? !nbatch || in[top_at] == OP_BINGET || in[top_at] == OP_LONG_BINGET
                          : e->nstack <= (e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0) ||
                                e->stack[e->nstack - 1].fed)) /* (a streamed item: touch()) */
                goto out;
            len = c == OP_MEMOIZE ? 1 : c == OP_BINPUT ? 2 : 5;
            pos += len;
            m = &e->dense[key];
            m->key = key;
            m->used = true;
            if (in_batch) { /* the batch's last atom */
                atom top_atom = {0, 0, 0, 0, 0};
                (void)atom_at(in, top_at, limit, &top_atom);
                memo_atom(m, &top_atom);
            } else {
                item *top = &e->stack[e->nstack - 1];
                m->global = top->global;
                m->kind = top->kind;
                m->tag = top->tag;
                m->enc = top->enc;
                m->type = top->type;
                m->text_off = top->text_off;
                m->text_len = top->text_len;
                if (top->node != NO_NODE) {
                    node *n = &e->nodes[top->node];
                    m->length = n->length;
                    m->object = n->object;
                    n->memoized = true;
                    n->end = pos;
                } else {
                    m->length = 0;
                    m->object = 0;
                }
                top->memo_key = key;
            }
            dense_init = key + 1;
            dense_used++;
            last = c;
            at += len;
            continue;
        }
        case OP_BINGET:
        case OP_LONG_BINGET: {
            /* an atom's or a str's entry (emu_memo_get: an item, no node) */
            const memo_entry *g = atom_get_at(e, at, limit, dense_init);
            if (!g)
                goto out;
            if (in_batch) {
                nbatch++;
                top_at = at;
            } else {
                if (e->nstack == e->cap_stack || e->nstack >= e->group_at)
                    goto out;
                put_memo_atom(e, pos, g, in_key(e, at));
            }
            len = get_len(e, at);
            pos += len;
            last = c;
            at += len;
            continue;
        }
        case OP_EMPTY_LIST:
        case OP_EMPTY_DICT:
        case OP_EMPTY_SET:
        case OP_EMPTY_TUPLE:
            if (in_batch) {
                if (push_batch(e, batch_at, at, batch_pos, nbatch, batch_key) < 0)
                    return -1;
                in_batch = false;
            }
            e->pos = pos + 1;
            if (empty_container(e, c, pos, e->nnodes) < 0)
                return -1;
            pos += 1;
            last = c;
            at += 1;
            if (e->nstack >= e->group_at)
                goto out;
            continue;
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3: {
            /* as step: its items pushed first if they are a batch's; not
             * where the general loop would fail (too few items) or a
             * streamed dump's watch would look (the stack down to a
             * predicted consumer's level) */
            uint32_t k = c - OP_TUPLE1 + 1;
            uint32_t floor = e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0;
            if ((in_batch ? nbatch : 0) + e->nstack < floor + k ||
                (e->streamed && (in_batch ? nbatch : 0) + e->nstack - k <= e->spec_watch))
                goto out;
            if (in_batch) {
                if (push_batch(e, batch_at, at, batch_pos, nbatch, batch_key) < 0)
                    return -1;
                in_batch = false;
            }
            pos += 1;
            e->pos = pos;
            if (small_tuple(e, k) < 0)
                return -1;
            last = c;
            at += 1;
            if (e->nstack >= e->group_at)
                goto out;
            continue;
        }
        case OP_TUPLE:
        case OP_FROZENSET:
            /* a MARK then atoms only (a batch): the tuple or frozenset of
             * them, made without pushing them (not in a streamed dump: its
             * watch looks at TUPLE, in the general loop) */
            if (!in_batch || e->streamed)
                goto out;
            e->dense_used = dense_used;
            e->dense_init = dense_init;
            pos += 1;
            e->pos = pos;
            if (batch_container(e, c, batch_at, at, batch_pos, nbatch, batch_key) < 0)
                return -1;
            in_batch = false;
            last = c;
            at += 1;
            continue;
        case OP_APPENDS:
        case OP_SETITEMS:
        case OP_ADDITEMS: {
            /* a batch of atoms only: no labels (an atom has no node), a
             * position counted on for each (label_items), then as step */
            mark m;
            item *target;
            if (!in_batch || e->marks[e->nmarks - 1].stack_len <
                                 1 + (e->nmarks > 1 ? e->marks[e->nmarks - 2].stack_len : 0))
                goto out;
            m = e->marks[--e->nmarks];
            e->dense_used = dense_used;
            e->dense_init = dense_init;
            target = &e->stack[e->nstack - 1];
            if (c != OP_SETITEMS && target->node != NO_NODE)
                e->nodes[target->node].added += nbatch;
            e->pos = pos + 1;
            e->last_op = c;
            *pat = at + 1;
            *batch = true;
            return emu_add_items(e, target, m.start, c == OP_SETITEMS ? nbatch / 2 : nbatch);
        }
        default:
            goto out;
        }
    }
out:
    e->dense_used = dense_used;
    e->dense_init = dense_init;
    if (in_batch && push_batch(e, batch_at, at, batch_pos, nbatch, batch_key) < 0)
        return -1;
    if (last)
        e->last_op = last;
    e->pos = pos;
    *pat = at;
    return 0;
}

/* The opcodes run_atoms starts with (so that the others, a node's, do not
 * pay for a call that runs nothing). */
static const bool run_atoms_starts[256] = {
    [OP_BININT1] = true,     [OP_BININT2] = true,
    [OP_BININT] = true,      [OP_BINFLOAT] = true,
    [OP_NONE] = true,        [OP_NEWTRUE] = true,
    [OP_NEWFALSE] = true,    [OP_SHORT_BINBYTES] = true,
    [OP_LONG1] = true,       [OP_SHORT_BINUNICODE] = true,
    [OP_BINUNICODE] = true,  [OP_BINBYTES] = true,
    [OP_MARK] = true,        [OP_MEMOIZE] = true,
    [OP_BINPUT] = true,      [OP_LONG_BINPUT] = true,
    [OP_TUPLE1] = true,      [OP_TUPLE2] = true,
    [OP_TUPLE3] = true,      [OP_BINGET] = true,
    [OP_LONG_BINGET] = true, [OP_EMPTY_LIST] = true,
    [OP_EMPTY_DICT] = true,  [OP_EMPTY_SET] = true,
    [OP_EMPTY_TUPLE] = true,
};

/* An opcode failed: -1, the run stops there -- but for a streamed dump
 * whose stack was compacted (a big group taken off it, emu_stream_group):
 * then the failure may be the compaction's (a wrong prediction that the
 * watch had not seen yet), and the pickle is read again from its start,
 * without streaming (1), where it fails as the bytes say, or not. */
static int run_failed(emu *e)
{
    if (!e->compacted)
        return -1;
    e->res->status = SERTRACE_INSPECT_OK;
    e->res->offset = 0;
    e->res->reason[0] = '\0';
    return 1;
}

/* One pickle from e->base: emulate up to STOP, then feed its dump. */
static int run_pickle(emu *e)
{
    size_t at = e->base;
    bool stop = false;
    op o;

    while (!stop) {
        uint64_t start;
        if (run_atoms_starts[e->in[at < e->n ? at : 0]] && !e->obs && !e->discarded &&
            !e->discard_call && e->max_op_proto >= 2 && !e->no_fast &&
            (!e->frame_pending || at < e->frame_end) &&
            (at >= e->n || (e->in[at] != OP_BINGET && e->in[at] != OP_LONG_BINGET) ||
             /* (a node's entry: the general loop) */
             atom_get_at(e, at, e->frame_pending ? e->frame_end : e->n, e->dense_init))) {
            /* (in a streamed dump too: its predicted consumers are watched
             * where the stack goes down, emu_stream_watch below; of
             * run_atoms' opcodes only the last, APPENDS / SETITEMS /
             * ADDITEMS, takes items off it, and a TUPLE goes back to the
             * general loop where the watch would look) */
            bool batch = false;
            if (run_atoms(e, &at, e->frame_pending ? e->frame_end : e->n, &batch) < 0)
                return run_failed(e);
            if (batch) { /* as after step's APPENDS / SETITEMS / ADDITEMS */
                if (e->streamed && e->nstack <= e->spec_watch)
                    emu_stream_watch(e, e->last_op);
                if (e->compacted && e->stream_wrong)
                    return 1;
                if (e->stream_ok && e->nnodes - e->nkept >= e->stream_nodes &&
                    !(at < e->n && e->in[at] == OP_STOP) && emu_stream_batch(e, at) < 0)
                    return -1;
                if (e->nstack >= e->group_at && emu_stream_group(e, at) < 0)
                    return -1;
                continue;
            }
            /* (it stops where the stack reaches group_at: a big group?) */
            if (e->nstack >= e->group_at && emu_stream_group(e, at) < 0)
                return -1;
        }
        if (at >= e->n)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
                            "truncated: the pickle ends before STOP%s", "");
        if (read_op(e, at, &o) < 0)
            return -1;
        if (op_proto(o.code) > e->max_op_proto)
            e->max_op_proto = op_proto(o.code);
        if (o.code == OP_FRAME) {
            if (e->frame_pending && at < e->frame_end)
                return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
                                "FRAME inside a frame (the previous frame's length is wrong)%s",
                                "");
            if (e->frame_pending)
                e->pos += FRAME_HEADER; /* the previous frame is committed */
            e->frame_pending = true;
            e->frame_start = at;
            e->frame_end = at + FRAME_HEADER + o.num;
            if (e->frame_end > e->n || o.num > e->n)
                return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
                                "a FRAME declares more bytes than the input holds%s", "");
            at += o.len;
            continue;
        }
        if (e->frame_pending && at + o.len > e->frame_end && at < e->frame_end)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
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
            if (emu_obs_evasion(e, at, SERTRACE_EVASION_FRAME_LENGTH, d) < 0)
                return -1;
        }
        if (e->frame_pending && at >= e->frame_end) {
            e->pos += FRAME_HEADER; /* committed before an unframed opcode, inside its node */
            e->frame_pending = false;
        }
        if (o.code != OP_STOP)
            e->pos += o.len;
        if (step(e, &o, start, &stop) < 0)
            return run_failed(e);
        at += o.len;
        /* a streamed dump's predicted consumers (emulator-records.c) */
        if (e->streamed) {
            if (e->nstack <= e->spec_watch || o.code == OP_TUPLE || o.code == OP_TUPLE1 ||
                o.code == OP_TUPLE2 || o.code == OP_TUPLE3 || o.code == OP_FROZENSET)
                emu_stream_watch(e, o.code);
            if (e->compacted && e->stream_wrong)
                return 1; /* the stack is not the bytes' any more: read it again now */
        }
        if (e->nstack >= e->group_at && emu_stream_group(e, at) < 0)
            return -1;
        /* (not when STOP follows: the last batch is fed at STOP, where the
         * addresses need only the shared objects) */
        if (e->stream_ok && e->nnodes - e->nkept >= e->stream_nodes &&
            (o.code == OP_APPENDS || o.code == OP_SETITEMS || o.code == OP_ADDITEMS ||
             o.code == OP_APPEND || o.code == OP_SETITEM) &&
            !(at < e->n && e->in[at] == OP_STOP) && emu_stream_batch(e, at) < 0)
            return -1;
    }
    /* STOP: one item left (above no mark), it is the root. */
    if ((e->nmarks || e->nstack != 1) && e->compacted)
        return run_failed(e);
    if (e->nmarks || e->nstack != 1)
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o.at,
                        e->nmarks ? "STOP with a MARK still open%s"
                                  : "STOP with a stack that does not hold exactly one object%s",
                        "");
    if (e->streamed && e->stack[0].node != 0)
        return 1; /* the streamed root was wrapped or replaced: read it again */
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
            uint32_t type = emu_intern_type(e, name);
            if (!type || new_node(e, root->tag, type, root->start, 0) == NO_NODE)
                return -1;
        }
    }
    e->pos += 1; /* STOP */
    {
        int rc = emu_emit_dump(e, (uint64_t)(at - e->base)); /* 1: read it again */
        if (rc != 0)
            return rc;
    }
    e->res->dumps++;
    e->base = at;
    return 0;
}

/* The big tables of the last run on this thread (stack, nodes, dense
 * memo), kept for the next run instead of freed: a process that inspects
 * many payloads (the Python binding, a server) would otherwise pay, per
 * call, for growing them again (realloc copies) and for the kernel's
 * zeroing of their fresh pages -- a fifth of a small payload's time.  At
 * most TABLE_CACHE_MAX bytes are kept; a run whose --max-memory is below
 * what they hold frees them instead.  Per thread: no lock, and the
 * binding may run on several threads; a thread's tables are freed when it
 * exits (a pthread key's destructor), so short-lived threads leak nothing. */
#define TABLE_CACHE_MAX (64u << 20)
static __thread struct {
    item *stack;
    uint32_t cap_stack;
    node *nodes;
    uint32_t cap_nodes;
    memo_entry *dense;
    uint64_t dense_cap;
    uint32_t *order, *open;
    uint32_t cap_order;
} table_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

/* At the exit of a thread that kept tables (runs on that thread, its TLS
 * still there). */
static void cache_free(void *unused)
{
    (void)unused;
    free(table_cache.stack);
    free(table_cache.nodes);
    free(table_cache.dense);
    free(table_cache.order);
    free(table_cache.open);
    memset(&table_cache, 0, sizeof table_cache);
}

static void cache_key_create(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

static uint64_t cached_bytes(void)
{
    return (uint64_t)table_cache.cap_stack * sizeof(item) +
           (uint64_t)table_cache.cap_nodes * sizeof(node) +
           table_cache.dense_cap * sizeof(memo_entry) +
           (uint64_t)table_cache.cap_order * 2 * sizeof(uint32_t);
}

static void cache_take(emu *e)
{
    uint64_t bytes = cached_bytes();
    if (!bytes)
        return;
    if (bytes > e->lim->max_memory / 2) {
        free(table_cache.stack);
        free(table_cache.nodes);
        free(table_cache.dense);
        free(table_cache.order);
        free(table_cache.open);
    } else {
        e->stack = table_cache.stack;
        e->cap_stack = table_cache.cap_stack;
        e->nodes = table_cache.nodes;
        e->cap_nodes = table_cache.cap_nodes;
        e->dense = table_cache.dense;
        e->dense_cap = table_cache.dense_cap; /* entries are zeroed as used */
        e->order = table_cache.order;
        e->open = table_cache.open;
        e->cap_order = table_cache.cap_order;
        e->memory = bytes - (uint64_t)e->cap_order * 2 * sizeof(uint32_t); /* those: in `extra` */
        e->peak = e->memory;
    }
    memset(&table_cache, 0, sizeof table_cache);
}

static void cache_give(emu *e)
{
    uint64_t bytes = (uint64_t)e->cap_stack * sizeof(item) + (uint64_t)e->cap_nodes * sizeof(node) +
                     e->dense_cap * sizeof(memo_entry) +
                     (uint64_t)e->cap_order * 2 * sizeof(uint32_t);
    pthread_once(&cache_once, cache_key_create);
    if (bytes > TABLE_CACHE_MAX || cached_bytes() || !cache_key_ok ||
        pthread_setspecific(cache_key, &table_cache) != 0) {
        free(e->stack);
        free(e->nodes);
        free(e->dense);
        free(e->order);
        free(e->open);
        return;
    }
    table_cache.stack = e->stack;
    table_cache.cap_stack = e->cap_stack;
    table_cache.nodes = e->nodes;
    table_cache.cap_nodes = e->cap_nodes;
    table_cache.dense = e->dense;
    table_cache.dense_cap = e->dense_cap;
    table_cache.order = e->order;
    table_cache.open = e->open;
    table_cache.cap_order = e->cap_order;
}

int emu_run_internal(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                     sertrace_core *core, const sertrace_inspect_observer *obs, bool single,
                     int nesting, sertrace_inspect_result *res)
{
    sertrace_inspect_limits dflt = {SERTRACE_INSPECT_DEFAULT_MEMORY, SERTRACE_INSPECT_DEFAULT_DEPTH,
                                    false, 0};
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
    e->stream_nodes = lim->stream_nodes;
    if (!e->stream_nodes) {
        const char *nf = getenv("SERTRACE_INSPECT_NO_FAST"); /* tests: run_atoms, sort_nested off */
        const char *env = getenv("SERTRACE_INSPECT_STREAM_NODES"); /* tests */
        e->no_fast = nf && *nf == '1';
        unsigned long v = env && *env ? strtoul(env, NULL, 10) : 0;
        e->stream_nodes =
            v ? (v > UINT32_MAX ? UINT32_MAX : (uint32_t)v) : SERTRACE_INSPECT_DEFAULT_STREAM;
    }
    /* a big group (emu_stream_group): 4 096 items, fewer at a lower
     * streaming threshold (tests) */
    e->group_min = e->stream_nodes < 4096 ? (e->stream_nodes < 8 ? 8 : e->stream_nodes) : 4096;
    if (!nesting)
        cache_take(e);
    while (e->base < n) {
        if (single && res->dumps == 1) {
            char d[96];
            snprintf(d, sizeof d, "%llu bytes after STOP (pickle.loads ignores them)",
                     (unsigned long long)(n - e->base));
            (void)emu_obs_evasion(e, e->base, SERTRACE_EVASION_AFTER_STOP, d);
            break;
        }
        size_t base = e->base;
        reset_pickle(e, base);
        e->dump_id++;
        int rc = run_pickle(e);
        if (rc == 1) { /* streamed, then its root was wrapped: again, buffered */
            if (emu_abort_dump(e) < 0) {
                emu_fail(e, SERTRACE_INSPECT_FAILED, base, "the tree core failed%s", "");
                break;
            }
            reset_pickle(e, base);
            e->stream_ok = false;
            e->group_at = UINT32_MAX;
            rc = run_pickle(e);
        }
        if (rc != 0) {
            (void)emu_abort_dump(e); /* a malformed pickle's dump is not fed */
            break;
        }
    }
    res->peak_memory = e->peak;
    if (!nesting) {
        cache_give(e);
    } else {
        free(e->stack);
        free(e->nodes);
        free(e->dense);
        free(e->order);
        free(e->open);
    }
    free(e->marks);
    free(e->memo);
    free(e->names);
    free(e->type_off);
    free(e->type_len);
    free(e->type_hash);
    free(e->typed);
    free(e);
    return res->status;
}

int sertrace_inspect_run(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                         sertrace_core *core, sertrace_inspect_result *res)
{
    return emu_run_internal(data, n, lim, core, NULL, false, 0, res);
}

int sertrace_inspect_run_observed(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                                  sertrace_core *core, const sertrace_inspect_observer *obs,
                                  bool single, sertrace_inspect_result *res)
{
    return emu_run_internal(data, n, lim, core, obs, single, 0, res);
}
