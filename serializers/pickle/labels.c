/* labels.c -- the edge label of each traced node (schema v5, v6).
 *
 * Every object is saved by save.c's one step with an edge: what it is to
 * its parent (list item 3, the value of dict key 'cache', a reduce's
 * state ...).  In a traced dump the step hands that edge to trace_label()
 * (pickler.h: positions and roles inline) just before the object's node
 * opens, and the label goes into the node's own record
 * (sertrace_enter_fast / sertrace_atom_fast, inline, else the library's
 * sertrace_enter_labelled / sertrace_atom_labelled: one call, one
 * record).  This file labels dict values: positions as numbers, dict keys as interned names
 * (sertrace_name: the first time a str is seen in a dump its UTF-8 text is
 * recorded, afterwards one hash probe on its address).  Nothing here runs in a dormant dump, nor
 * for objects that are no nodes (atoms at the default granularity), and nothing calls user code:
 * only exact str and int keys are looked at.
 *
 * Privacy (schema.h, "Edge labels"): a dict key is data.  By default only
 * int keys and str keys that are identifiers of at most
 * SERTRACE_KEY_NAME_MAX characters are recorded; any other key is
 * recorded as HIDDEN with a per-dump number.  SERTRACE_KEYS=all
 * (SERTRACE_DUMP_KEYS_ALL) records every str key.  The keys of an
 * instance's state dict follow the same rule: an attribute name is an
 * identifier, so it is recorded; a state key that is no identifier is
 * what a __getstate__ made of data, and stays hidden, as in the error
 * paths of trace.c (tests/pyhook/test_safety.py holds both to it).
 *
 * Interning by address is sound only while no other str can get the same
 * address during the dump: every str interned is kept alive in
 * p->label_keys until the dump ends.  The same holds for p->label_cache
 * (pickler.h), which trace_label() reads first for a dict value: only
 * keys the dump has interned enter it, and trace_labels_end() empties it.
 */
#include "pickler.h"

/* The dump's name index of the str `s`, interning it the first time; 0
 * when it cannot be (then the caller hides the key). */
static uint32_t label_name(pickler *p, PyObject *s)
{
    uint32_t index = trace_index_cached(p, s);
    if (index != 0)
        return index;
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(s, &n);
    if (text == NULL) { /* lone surrogates: no UTF-8 text */
        PyErr_Clear();
        return 0;
    }
    if (p->label_keys == NULL && (p->label_keys = PyList_New(0)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyList_Append(p->label_keys, s) < 0) {
        PyErr_Clear();
        return 0;
    }
    index = sertrace_name(p->trace, s, text, (size_t)n);
    trace_index_remember(p, s, index);
    return index;
}

trace_lbl trace_label_key(pickler *p, const edge *e)
{
    PyObject *key = e->key;
    if (PyUnicode_CheckExact(key)) {
        /* A str interned in this dump was shown before (only shown keys
         * are interned): one probe, no identifier check. */
        uint32_t index = trace_index_cached(p, key);
        if (index == 0) {
            int shown = (p->trace_flags & SERTRACE_DUMP_KEYS_ALL) ||
                        (PyUnicode_GET_LENGTH(key) <= SERTRACE_KEY_NAME_MAX &&
                         PyUnicode_IsIdentifier(key) == 1);
            index = shown ? label_name(p, key) : 0;
        }
        if (index != 0) {
            struct label_cache_entry *c = &p->label_cache[label_cache_slot(key)][0];
            c[1] = c[0];    /* the set's older entry goes */
            c[0].key = key; /* kept alive until the dump ends */
            c[0].index = index;
            return (trace_lbl){SERTRACE_LABEL_KEY, index};
        }
    } else if (PyLong_CheckExact(key)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) {
            uint64_t zigzag = v >= 0 ? (uint64_t)v * 2 : ((uint64_t)(-(v + 1)) * 2) + 1;
            return (trace_lbl){SERTRACE_LABEL_INT, zigzag};
        }
        PyErr_Clear();
    }
    return (trace_lbl){SERTRACE_LABEL_HIDDEN, ++p->hidden_keys};
}

void trace_labels_end(pickler *p)
{
    memset(p->label_cache, 0, sizeof p->label_cache); /* indices of this dump only */
    Py_CLEAR(p->label_keys);
    p->hidden_keys = 0;
}
