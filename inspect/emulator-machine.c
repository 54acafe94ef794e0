/* emulator-machine.c -- the pickle machine's stack, marks and memo as the
 * opcodes use them: items needed on the stack, a popped mark, the new item
 * that replaces a callable and its arguments, what a tuple remembers of its
 * elements for a REDUCE, APPEND(S)/SETITEM(S)/ADDITEMS batches on a
 * container, memo PUT and GET (a GET of a node object is a memo node),
 * and the edge labels (schema v5) the bytes tell: an item's position, a
 * dict value's key under the privacy rule of schema.h ("Edge labels"),
 * a reduce's roles.
 */
#include "emulator-internal.h"

/* ---- the machine ------------------------------------------------------------ */

int emu_need_items(emu *e, const op *o, uint32_t k)
{
    uint32_t floor = e->nmarks ? e->marks[e->nmarks - 1].stack_len : 0;
    if (e->nstack < floor + k)
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "stack underflow: an opcode needs more items than there are%s", "");
    return 0;
}

int emu_pop_mark(emu *e, const op *o, mark *m)
{
    if (!e->nmarks)
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "an opcode needs a MARK and there is none%s", "");
    *m = e->marks[--e->nmarks];
    return 0;
}

/* A new item for an object built from items[from..] (the callable or the
 * first element) -- they are replaced by it. */
item *emu_replace(emu *e, uint32_t from, uint64_t start, uint32_t first_node, uint8_t kind,
                  uint8_t tag)
{
    e->nstack = from;
    return push(e, start, first_node, kind, tag);
}

/* Attach items to a container item through APPEND(S)/SETITEM(S)/ADDITEMS:
 * a reduce-built object gets them inside an It node. */
int emu_add_items(emu *e, item *target, uint64_t items_start, uint64_t count)
{
    if (target->node != NO_NODE) {
        node *n = &e->nodes[target->node];
        if (n->tag == SERTRACE_TAG_INSTANCE || n->tag == SERTRACE_TAG_REDUCE) {
            if (target->it_node == IT_FED) {
                e->stream_wrong = true; /* its It node was fed: it would grow */
                target->it_node = NO_NODE;
            }
            if (target->it_node == NO_NODE) {
                uint32_t type = n->type;
                target->it_node = new_node(e, SERTRACE_TAG_ITEMS, type, items_start, 0);
                if (target->it_node == NO_NODE)
                    return -1;
                e->nodes[target->it_node].object = emu_object_of(e, target->node);
            }
            e->nodes[target->it_node].end = e->pos;
        } else if (n->length) {
            n->length += count;
        }
    }
    touch(e, target);
    return 0;
}

int emu_memo_put(emu *e, const op *o, uint64_t key)
{
    memo_entry *m;
    item *top;
    if (emu_need_items(e, o, 1) < 0)
        return -1;
    top = &e->stack[e->nstack - 1];
    if (e->obs && emu_memo_find(e, key, false)) {
        char d[64];
        snprintf(d, sizeof d, "memo slot %llu written twice", (unsigned long long)key);
        if (emu_obs_evasion(e, o->at, SERTRACE_EVASION_MEMO_OVERWRITE, d) < 0)
            return -1;
    }
    if (!(m = emu_memo_find(e, key, true)))
        return -1;
    m->global = top->global;
    m->kind = top->kind;
    m->tag = top->tag;
    m->type = top->type;
    m->length = top->node != NO_NODE ? e->nodes[top->node].length : 0;
    m->text_off = top->text_off;
    m->text_len = top->text_len;
    m->enc = top->enc;
    m->object = top->node != NO_NODE ? emu_object_of(e, top->node) : 0;
    if (top->node != NO_NODE)
        e->nodes[top->node].memoized = true;
    top->memo_key = key;
    touch(e, top);
    return 0;
}

int emu_memo_get(emu *e, const op *o, uint64_t key, uint64_t start, uint32_t first,
                 bool after_discard)
{
    memo_entry *m = emu_memo_find(e, key, false);
    item *it;
    char msg[32];
    if (!m) {
        snprintf(msg, sizeof msg, "%llu", (unsigned long long)key);
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "memo key %s read before it was written", msg);
    }
    if (after_discard) {
        /* the object whose parts were just discarded: its bytes began
         * with them, and the GET is its last opcode */
        uint8_t kind = m->kind == IK_GLOBAL ? IK_NODE : m->kind;
        if (!(it = push(e, e->discard_start, e->discard_first, kind, m->tag)))
            return -1;
        emu_from_memo(it, m, key);
        if (e->discard_node != NO_NODE) {
            it->node = e->discard_node;
            it->tag = e->nodes[it->node].tag;
            touch(e, it);
        } else if (kind == IK_NODE) {
            it->node = new_node(e, m->tag, m->type, e->discard_start, m->length);
            if (it->node == NO_NODE)
                return -1;
            e->nodes[it->node].object = m->object; /* the object memoized inside */
            e->nodes[it->node].memoized = true;
        }
        return 0;
    }
    if (!(it = push(e, start, first, m->kind == IK_GLOBAL ? IK_NODE : m->kind, m->tag)))
        return -1;
    emu_from_memo(it, m, key);
    if (m->kind == IK_NODE || m->kind == IK_GLOBAL) {
        it->kind = IK_NODE;
        it->tag = SERTRACE_TAG_MEMO;
        it->node = new_node(e, SERTRACE_TAG_MEMO, m->type, start, m->length);
        if (it->node == NO_NODE)
            return -1;
        e->nodes[it->node].object = m->object; /* the reference's target */
        uint32_t target = emu_node_of_id(e, m->object);
        if (target != NO_NODE) /* (a target already fed was memoized: it has its address) */
            e->nodes[target].shared = true;
    }
    return 0;
}

/* ---- edge labels (schema v5) --------------------------------------------- */

/* The item's node (if any, and not labelled yet) is `kind`/`value` to its
 * parent: a node is attached once, the first label is its edge.  A memo
 * reference (Mo) is labelled like any node: it sits at that edge. */
void emu_label(emu *e, const item *it, uint8_t kind, uint64_t value)
{
    if (it->node == NO_NODE || e->nodes[it->node].label_kind != SERTRACE_LABEL_NONE)
        return;
    e->nodes[it->node].label_kind = kind;
    e->nodes[it->node].label = value;
}

static uint64_t le_bytes(const uint8_t *p, uint32_t n)
{
    uint64_t v = 0;
    for (uint32_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* A decimal line (INT, LONG: optional sign, digits, LONG's trailing L) as
 * a 64-bit int; false when it is none or does not fit. */
static bool decimal_int(const uint8_t *p, uint64_t n, int64_t *out)
{
    bool neg = false;
    uint64_t v = 0, i = 0;
    if (n && p[n - 1] == 'L')
        n--;
    if (i < n && (p[i] == '-' || p[i] == '+'))
        neg = p[i++] == '-';
    if (i == n)
        return false;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* An int key's value from the opcode that wrote it; false when it does
 * not fit 64 bits (then the key is hidden, as the pickler hides it). */
static bool int_key(emu *e, const item *k, int64_t *v)
{
    const uint8_t *p = e->in + k->text_off;
    uint32_t n = k->text_len;
    switch (k->enc) {
    case OP_BININT1:
        *v = p[0];
        return true;
    case OP_BININT2:
        *v = (int64_t)le_bytes(p, 2);
        return true;
    case OP_BININT:
        *v = (int32_t)(uint32_t)le_bytes(p, 4);
        return true;
    case OP_INT:
    case OP_LONG:
        return decimal_int(p, n, v);
    case OP_LONG1:
    case OP_LONG4:
        if (n > 8)
            return false; /* the pickler writes the fewest bytes: it needs more than 64 bits */
        if (n == 0) {
            *v = 0;
            return true;
        }
        {
            uint64_t u = le_bytes(p, n);
            if (n < 8 && (p[n - 1] & 0x80))
                u |= UINT64_MAX << (8 * n); /* sign-extend */
            *v = (int64_t)u;
        }
        return true;
    default:
        return false;
    }
}

/* The text of a str key as UTF-8 (BINUNICODE and its kin are UTF-8; the
 * protocol 0-1 forms are shown only when they are plain ASCII with no
 * escape, the one case where their bytes are the text). */
static bool str_text(emu *e, const item *k, bool *ascii)
{
    const uint8_t *p = e->in + k->text_off;
    *ascii = true;
    for (uint32_t i = 0; i < k->text_len; i++)
        if (p[i] >= 0x80)
            *ascii = false;
    switch (k->enc) {
    case OP_SHORT_BINUNICODE:
    case OP_BINUNICODE:
    case OP_BINUNICODE8:
        return true;
    default: /* UNICODE (raw-unicode-escape), STRING, BINSTRING, SHORT_BINSTRING */
        return *ascii && memchr(p, '\\', k->text_len) == NULL;
    }
}

/* ASCII identifier (str.isidentifier for ASCII text). */
static bool ascii_identifier(const uint8_t *p, uint32_t n)
{
    if (n == 0 || (p[0] >= '0' && p[0] <= '9'))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* The value of a dict item (SETITEM(S), a BUILD state's dict) is labelled
 * by its key, as the pickler labels it: a str identifier of at most
 * SERTRACE_KEY_NAME_MAX characters (every str with keys_all) as KEY, an
 * int that fits 64 bits as INT, anything else HIDDEN (numbered at STOP, in
 * the order the nodes are written).  Non-ASCII identifiers are hidden: the
 * emulator does not carry Unicode's identifier tables (README). */
int emu_label_value(emu *e, const item *key, const item *value)
{
    if (value->node == NO_NODE || e->nodes[value->node].label_kind != SERTRACE_LABEL_NONE)
        return 0;
    if (key->kind == IK_STR && key->enc) {
        bool ascii;
        const uint8_t *p = e->in + key->text_off;
        uint32_t slot = (uint32_t)(key->text_off * 0x9E3779B97F4A7C15ull >> 58) % KEY_LABEL_SLOTS;
        uint32_t index = 0;
        if (e->key_label_off[slot] == key->text_off + 1) {
            index = e->key_label_index[slot];
        } else {
            if (str_text(e, key, &ascii) &&
                (e->lim->keys_all || (ascii && key->text_len <= SERTRACE_KEY_NAME_MAX &&
                                      ascii_identifier(p, key->text_len)))) {
                /* interned in the type table behind a prefix no type name
                 * has, so that a name and a type never share an index */
                index = emu_intern_type2(e, "\x01", 1, (const char *)p, key->text_len);
                if (!index)
                    return -1;
            }
            e->key_label_off[slot] = key->text_off + 1;
            e->key_label_index[slot] = index;
        }
        if (index) {
            emu_label(e, value, SERTRACE_LABEL_KEY, index);
            return 0;
        }
        emu_label(e, value, SERTRACE_LABEL_HIDDEN, 0);
        return 0;
    } else if (key->kind == IK_ATOM && key->tag == SERTRACE_TAG_INT && key->enc) {
        int64_t v;
        if (int_key(e, key, &v)) {
            uint64_t zigzag = v >= 0 ? (uint64_t)v * 2 : ((uint64_t)(-(v + 1)) * 2) + 1;
            emu_label(e, value, SERTRACE_LABEL_INT, zigzag);
            return 0;
        }
    }
    emu_label(e, value, SERTRACE_LABEL_HIDDEN, 0);
    return 0;
}
