/* emulator-machine.c -- the pickle machine's stack, marks and memo as the
 * opcodes use them: items needed on the stack, a popped mark, the new item
 * that replaces a callable and its arguments, what a tuple remembers of its
 * elements for a REDUCE, APPEND(S)/SETITEM(S)/ADDITEMS batches on a
 * container, memo PUT and GET (a GET of a node object is a memo node).
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
