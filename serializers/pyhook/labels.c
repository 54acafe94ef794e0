/* serializers/pyhook/labels.c -- the edge label of each node the hook
 * traces (schema v5, "Edge labels"), the same as the C pickler gives for
 * the same bytes (serializers/pickle/labels.c).
 *
 * pickle._Pickler has no edge to hand over: it just calls self.save(x)
 * for each part of an object.  So each node on the hook's stack knows
 * what its children are to it (its child mode) and counts the save()
 * calls made for them, folded atoms included:
 *   - an exact tuple or list: positions; the shadowed _batch_appends sets
 *     the same for a reduce's listitems (inside their ITEMS node);
 *   - a dict (save_dict) or a reduce's dictitems: _batch_setitems saves a
 *     key (no label) then its value (labelled by that key);
 *   - a set or frozenset: elements;
 *   - a reduce (save_reduce, shadowed for the dump): its first part is
 *     the callable (the class for NEWOBJ), then its arguments; the state
 *     setter, the object itself (a memo reference, no label) and the state
 *     are told apart by identity with save_reduce's own arguments.
 * Nothing reads a frame per object and nothing calls user code: keys are
 * looked at only when exact str or int.  The label is decided when save()
 * is called and goes into the node's enter record (node_label(), one
 * sertrace_enter_fast() call: schema v6; a node dill names late keeps
 * it until then), so hidden keys are numbered in the
 * order their nodes appear, as in the C pickler.
 *
 * Privacy: the C pickler's rule.  A str key is recorded when it is an
 * identifier of at most SERTRACE_KEY_NAME_MAX characters, or every str key
 * under SERTRACE_KEYS=all (SERTRACE_DUMP_KEYS_ALL); an int key as a zigzag
 * number; any other key as HIDDEN with a per-dump number.  Interned keys
 * are kept alive in s->label_keys until the dump ends, since names are
 * interned by address.
 */
#include "pyhook.h"

uint8_t child_mode_of(PyObject *obj)
{
    if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj))
        return CHILD_POS;
    if (PyDict_CheckExact(obj))
        return CHILD_PAIRS;
    if (PyAnySet_CheckExact(obj))
        return CHILD_ELEMENT;
    return CHILD_NONE;
}

void label_child(hook_state *s, node *parent, PyObject *obj, uint8_t *kind, uint64_t *value,
                 PyObject **key)
{
    uint64_t i = parent->children++;

    (void)s;
    *kind = 0;
    *value = 0;
    *key = NULL;
    switch (parent->child_mode) {
    case CHILD_POS:
        *kind = SERTRACE_LABEL_POS;
        *value = i;
        break;
    case CHILD_PAIRS:
        if (i % 2 == 0) {
            parent->last_key = obj;
        } else {
            *kind = SERTRACE_LABEL_KEY;
            *key = parent->last_key;
        }
        break;
    case CHILD_ELEMENT:
        *kind = SERTRACE_LABEL_ROLE;
        *value = SERTRACE_ROLE_ELEMENT;
        break;
    case CHILD_REDUCE:
        *kind = SERTRACE_LABEL_ROLE;
        if (i == 0)
            *value = SERTRACE_ROLE_CALLABLE;
        else if (i == 1)
            *value = SERTRACE_ROLE_ARGS;
        else if (obj == parent->obj)
            *kind = 0; /* the object itself, for its state setter */
        else if (parent->r_setter != NULL && obj == parent->r_setter)
            *value = SERTRACE_ROLE_CALLABLE;
        else if (parent->r_state != NULL && obj == parent->r_state)
            *value = SERTRACE_ROLE_STATE;
        else
            *value = SERTRACE_ROLE_ARGS; /* NEWOBJ_EX's kwargs */
        break;
    default:
        break;
    }
}

/* The dump's name index of the str `k`, interning it the first time; 0
 * when it cannot be (then the key is hidden). */
static uint32_t label_name(hook_state *s, PyObject *k)
{
    uint32_t index = sertrace_name_known(s->d, k);
    Py_ssize_t n;
    const char *text;

    if (index != 0)
        return index;
    text = PyUnicode_AsUTF8AndSize(k, &n);
    if (text == NULL) { /* lone surrogates: no UTF-8 text */
        PyErr_Clear();
        return 0;
    }
    if (s->label_keys == NULL && (s->label_keys = PyList_New(0)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyList_Append(s->label_keys, k) < 0) {
        PyErr_Clear();
        return 0;
    }
    return sertrace_name(s->d, k, text, (size_t)n);
}

/* The label of a dict value under `key`. */
static void label_key(hook_state *s, PyObject *key, uint8_t *kind, uint64_t *value)
{
    if (key != NULL && PyUnicode_CheckExact(key)) {
        /* A str interned in this dump was shown before (only shown keys
         * are interned): one probe, no identifier check. */
        uint32_t index = sertrace_name_known(s->d, key);
        if (index == 0) {
            int shown = (s->flags & SERTRACE_DUMP_KEYS_ALL) ||
                        (PyUnicode_GET_LENGTH(key) <= SERTRACE_KEY_NAME_MAX &&
                         PyUnicode_IsIdentifier(key) == 1);
            index = shown ? label_name(s, key) : 0;
        }
        if (index != 0) {
            *kind = SERTRACE_LABEL_KEY;
            *value = index;
            return;
        }
    } else if (key != NULL && PyLong_CheckExact(key)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) {
            *kind = SERTRACE_LABEL_INT;
            *value = v >= 0 ? (uint64_t)v * 2 : ((uint64_t)(-(v + 1)) * 2) + 1;
            return;
        }
        PyErr_Clear();
    }
    *kind = SERTRACE_LABEL_HIDDEN;
    *value = ++s->hidden_keys;
}

void node_label(hook_state *s, node *n, uint8_t *kind, uint64_t *value)
{
    if (n->label_kind == SERTRACE_LABEL_KEY) {
        label_key(s, n->key, kind, value);
    } else {
        *kind = n->label_kind;
        *value = n->label_value;
    }
}

void labels_end(hook_state *s)
{
    Py_CLEAR(s->label_keys);
    s->hidden_keys = 0;
}
