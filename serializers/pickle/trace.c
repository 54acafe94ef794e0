/* trace.c -- what the trace says about each object, and the error path.
 *
 * save.c's step (save_child_slow) asks trace_classify() whether an object
 * is a node at this granularity, opens it with trace_open() at the
 * current output position, runs the ordinary savers and closes it with
 * trace_close() at the new position; a node without children (an atom, a
 * memo hit) is one trace_leaf() after it was written (one ATOM record;
 * the plain atoms at every-object granularity take save.c's inline
 * atom_leaf(), which ends in the same sertrace_atom_fast()).  Enters,
 * atoms and exits go through sertrace.h's inline *_fast() calls: while
 * the dump only records they write into the batch without a library call.
 * The node's edge label (labels.c) goes into the same call and record.
 * Positions come from output_pos()
 * (output.c), so node bytes are exact by construction: a node's bytes are
 * everything the write path appended while it was open, frame headers and
 * memo opcodes included, and children nest inside.  The plain atoms
 * (None, bool, int, float, str), three objects in four, are no nodes at
 * the default granularity and skip classification.
 *
 * What the trace says about an object -- its tag, how it is named, its
 * type name and length, the notes' and path's texts, the recorded message
 * -- is decided by serializers/objdesc, which the pure-Python pickler hook
 * (serializers/pyhook) uses too, so the same bytes give the same tree
 * through both.  This file applies it: atoms (None, bool, int, float, str,
 * bytes) are nodes only with SERTRACE_DUMP_ATOMS, a memo hit is MEMO (a
 * hit on a class or function is named as a reference to it), and type
 * names are built only the first time a key is seen in a dump
 * (od_type_index), never by calling user code.  Per node the traced step
 * costs no call into libsertrace: the dump's type and label-name indices
 * are cached in the pickler by key (p->index_cache, trace_index_cached():
 * the library's table is asked only on a miss), and the memo slot that
 * classification looked up (memo hit or not) is handed to the saver
 * (p->trace_slot), so a traced node costs one memo lookup, as a dormant
 * one does.
 *
 * Error path: when a child fails, the step calls trace_note_edge() with the
 * child's edge (what it is to its parent), which adds a note to the
 * exception as CPython 3.14 does ("when serializing dict item 'b'") and,
 * in a traced dump, records a path segment.  The innermost failing object
 * is remembered by trace_failed() (the first call of a dump wins); at dump
 * end pickler_dump() calls trace_report_error(), which builds the whole
 * path ("State.suspended[3].frame.stack[2]") and emits ONE
 * sertrace_error().  No value lands in the trace (objdesc's key rule and
 * exception message).  None of this runs unless something failed.
 */
#include <stdio.h>
#include <string.h>

#include "pickler.h"
#include "objdesc.h"
#include "trace-step.h"

/* ---- type names across dumps ------------------------------------------- */

/* The name of a type named by its type (OD_BY_TYPE: containers, instances,
 * reduce-based objects) is "module.qualname" (objdesc's OD_NAME_TRACE),
 * built once per type and dump by od_type_intern(): ~1,100 instructions
 * (the str built by PyUnicode_FromFormat, its UTF-8, a copy), ~35 types a
 * dump of state-16.  Its text is kept here across dumps, in a direct-mapped
 * table of the process (512 entries: with 64, the ~45 types and globals of
 * state-16 collided, ~10 refills a dump), by address, with what the name
 * is made of: for a heap type its ht_qualname and the `__module__` str of
 * its dict (strong references, so an identical pair is an identical
 * text: a type that died and a new one at its address, or a class whose
 * __qualname__ / __module__ was reassigned, is seen by identity), for a
 * static type its tp_name pointer.  Only exact str parts are cached (the
 * references dropped on replacement then run no user code); anything else,
 * an exception pending, and the other namings go to od_type_intern(). */
#define TYPE_NAME_BITS 9
#define TYPE_NAME_CACHE (1 << TYPE_NAME_BITS)

static struct type_name_entry {
    PyObject *subject; /* the type named, or the class / function naming itself */
    const char *tp_name;
    PyObject *qualname, *module; /* strong; NULL for a static type */
    int ref;                     /* OD_REF_SELF's "class "/"function " prefix */
    char *text;
} type_names[TYPE_NAME_CACHE];

/* The parts of t's name: 1 (cacheable), 0 (not: ask objdesc). */
static int type_name_parts(PyTypeObject *t, PyObject **qualname, PyObject **module)
{
    *qualname = *module = NULL;
    if (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE))
        return 1;
    PyObject *q = ((PyHeapTypeObject *)t)->ht_qualname, *dict = t->tp_dict, *m;
    if (q == NULL || !PyUnicode_CheckExact(q) || dict == NULL || !PyDict_CheckExact(dict))
        return 0;
    m = PyDict_GetItemWithError(dict, G.s_module);
    if (m == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    } else if (!PyUnicode_CheckExact(m)) {
        return 0;
    }
    *qualname = q;
    *module = m;
    return 1;
}

/* The parts of what names `obj` (naming): its type (OD_BY_TYPE), or the
 * class or Python function itself (OD_BY_SELF, OD_REF_SELF: a class or
 * function as a global, ~11 a dump of state-16, each ~2,000 instructions
 * through od_type_intern's PyUnicode_FromFormat and snprintf).  A function's
 * parts are its __qualname__ and __module__ fields (exact str or a NULL
 * module), held like a heap type's, so a function that died and a new one
 * at its address with the same parts has the same text.  Builtin functions
 * and anything else: 0 (objdesc). */
static int name_parts(PyObject *obj, int naming, PyObject **subject, PyObject **qualname,
                      PyObject **module)
{
    if (naming == OD_BY_TYPE || PyType_Check(obj)) {
        PyTypeObject *t = naming == OD_BY_TYPE ? Py_TYPE(obj) : (PyTypeObject *)obj;
        *subject = (PyObject *)t;
        return type_name_parts(t, qualname, module);
    }
    if (!PyFunction_Check(obj))
        return 0;
    PyFunctionObject *f = (PyFunctionObject *)obj;
    if (f->func_qualname == NULL || !PyUnicode_CheckExact(f->func_qualname) ||
        (f->func_module != NULL && !PyUnicode_CheckExact(f->func_module)))
        return 0;
    *subject = obj;
    *qualname = f->func_qualname;
    *module = f->func_module;
    return 1;
}

/* The cold half of trace_type_intern(): the entry's text built (once per
 * type or global and parts), out of line so the hit path stays small. */
static __attribute__((noinline)) const char *type_name_fill(struct type_name_entry *e,
                                                            PyObject *subject, int ref,
                                                            PyObject *qualname, PyObject *module)
{
    PyObject *full = od_global_name(subject, OD_NAME_TRACE);
    const char *utf8 = full != NULL ? PyUnicode_AsUTF8(full) : NULL;
    const char *prefix = !ref ? "" : PyType_Check(subject) ? "class " : "function ";
    /* od_type_intern's text: at most 511 bytes (its snprintf buffer). */
    size_t plen = strlen(prefix), len = utf8 != NULL ? strnlen(utf8, 511 - plen) : 0;
    char *text = utf8 != NULL ? PyMem_RawMalloc(plen + len + 1) : NULL;
    PyErr_Clear();
    if (text == NULL) {
        Py_XDECREF(full);
        return NULL;
    }
    memcpy(text, prefix, plen);
    memcpy(text + plen, utf8, len);
    text[plen + len] = '\0';
    Py_DECREF(full);
    PyMem_RawFree(e->text);
    e->text = text;
    e->subject = subject;
    e->tp_name = PyType_Check(subject) ? ((PyTypeObject *)subject)->tp_name : NULL;
    e->ref = ref;
    Py_XINCREF(qualname);
    Py_XINCREF(module);
    Py_XSETREF(e->qualname, qualname);
    Py_XSETREF(e->module, module);
    return text;
}

uint32_t trace_type_intern(pickler *p, PyObject *obj, int naming, const void *key)
{
    PyObject *subject, *qualname, *module;
    if (PyErr_Occurred() || !name_parts(obj, naming, &subject, &qualname, &module))
        return od_type_intern(p->trace, obj, naming, key);
    int ref = naming == OD_REF_SELF;
    struct type_name_entry *e =
        &type_names[(((uintptr_t)subject + (uintptr_t)ref) * UINT64_C(0x9E3779B97F4A7C15)) >>
                    (64 - TYPE_NAME_BITS)];
    const char *tp_name = PyType_Check(subject) ? ((PyTypeObject *)subject)->tp_name : NULL;
    const char *text = e->text;
    if (text == NULL || e->subject != subject || e->ref != ref || e->tp_name != tp_name ||
        e->qualname != qualname || e->module != module) {
        text = type_name_fill(e, subject, ref, qualname, module);
        if (text == NULL)
            return od_type_intern(p->trace, obj, naming, key);
    }
    return sertrace_type(p->trace, key, text);
}

void trace_names_release(void)
{
    for (size_t i = 0; i < TYPE_NAME_CACHE; i++) {
        struct type_name_entry *e = &type_names[i];
        PyMem_RawFree(e->text);
        Py_CLEAR(e->qualname);
        Py_CLEAR(e->module);
        memset(e, 0, sizeof *e);
    }
}

/* A node without children, written from `pos` to the current position:
 * one ATOM record.  `failed`: writing it failed, so it is an ENTER left
 * open like any failed node (same tree as before the ATOM record). */
void trace_leaf(pickler *p, uint8_t tag, PyObject *obj, int key_kind, uint64_t pos, int failed,
                trace_lbl lbl)
{
    (void)key_kind; /* naming: od_naming() decides from the object and the tag */
    PyTypeObject *t = Py_TYPE(obj);
    /* The atom types' indices, cached per dump: od_naming() names them by
     * their type whatever the tag (a memo hit on a str included). */
    int slot = t == &PyLong_Type      ? 0
               : t == &PyFloat_Type   ? 1
               : t == &PyUnicode_Type ? 2
               : t == &PyBytes_Type   ? 3
               : obj == Py_None       ? 4
               : t == &PyBool_Type    ? 5
                                      : -1;
    uint32_t type = slot >= 0 ? p->leaf_type[slot] : 0;
    if (type == 0) {
        type = type_index(p, obj, tag);
        if (slot >= 0)
            p->leaf_type[slot] = type;
    }
    uint64_t length = slot == 2   ? (uint64_t)PyUnicode_GET_LENGTH(obj) + 1
                      : slot == 3 ? (uint64_t)PyBytes_GET_SIZE(obj) + 1
                      : slot >= 0 ? 0
                                  : od_length(obj);
    if (failed)
        sertrace_enter_labelled(p->trace, tag, type, (uintptr_t)obj, length, pos, lbl.kind,
                                lbl.value);
    else
        sertrace_atom_fast(p->trace, tag, type, (uintptr_t)obj, length, pos, output_pos(p),
                           lbl.kind, lbl.value);
}

void trace_failed(pickler *p, PyObject *obj, uint8_t tag)
{
    if (p->err_recorded)
        return;
    p->err_recorded = 1;
    if (tag == 0)
        tag = od_atom_tag(obj);
    p->err_tag = tag;
    Py_INCREF(Py_TYPE(obj));
    Py_XSETREF(p->err_type, (PyObject *)Py_TYPE(obj));
}

/* ---- error notes and path (texts: serializers/objdesc) ------------------ */

/* Add the note of `rel` for `container` to the exception being raised
 * (kept set: fetched around our own calls). */
static void add_note(PyObject *container, int rel, Py_ssize_t index, PyObject *key)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL) {
        if (tb != NULL)
            PyException_SetTraceback(value, tb);
        od_add_note(value, od_note_text(container, rel, index, key));
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

static void push_segment(pickler *p, int kind, Py_ssize_t index, PyObject *key)
{
    if (p->trace == NULL)
        return;
    if (p->path_len == p->path_cap) {
        Py_ssize_t cap = p->path_cap ? p->path_cap * 2 : 16;
        path_segment *grown = PyMem_Realloc(p->path, (size_t)cap * sizeof(path_segment));
        if (grown == NULL)
            return; /* the path will be shorter; the exception is intact */
        p->path = grown;
        p->path_cap = cap;
    }
    Py_XINCREF(key);
    p->path[p->path_len].kind = kind;
    p->path[p->path_len].index = index;
    p->path[p->path_len].key = key;
    p->path_len++;
}

/* What each edge of save_child() is to the parent (objdesc's relation: the
 * note's wording and the path segment).  OD_REL_NONE adds nothing (the
 * dumped object itself, a dict key, the names of STACK_GLOBAL, a
 * persistent id). */
static const int edge_rel[] = {
    [EDGE_ROOT] = OD_REL_NONE,           [EDGE_PLAIN] = OD_REL_NONE,
    [EDGE_PERSID] = OD_REL_NONE,         [EDGE_ITEM] = OD_REL_INDEX,
    [EDGE_VALUE] = OD_REL_KEY,           [EDGE_ELEMENT] = OD_REL_ELEMENT,
    [EDGE_STATE] = OD_REL_STATE,         [EDGE_STATE_SETTER] = OD_REL_SETTER,
    [EDGE_RECONSTRUCTOR] = OD_REL_RECON, [EDGE_RECONSTRUCTOR_ARGS] = OD_REL_RECON_ARGS,
    [EDGE_CLASS] = OD_REL_CLASS,         [EDGE_NEW_ARGS] = OD_REL_NEW_ARGS,
};

void trace_note_edge(pickler *p, const edge *e)
{
    int rel = edge_rel[e->kind];
    if (rel == OD_REL_NONE)
        return;
    /* A reduce written for no object (a nested global's getattr) has no
     * name for the note, but its segment still counts in the path. */
    if (e->parent != NULL)
        add_note(e->parent, rel, e->index, e->key);
    push_segment(p, rel, e->index, e->key);
}

void trace_note_object(PyObject *obj)
{
    add_note(obj, OD_REL_OBJECT, 0, NULL);
}

void trace_reset_error(pickler *p)
{
    for (Py_ssize_t i = 0; i < p->path_len; i++)
        Py_XDECREF(p->path[i].key);
    p->path_len = 0;
    p->err_recorded = 0;
    p->err_tag = 0;
    Py_CLEAR(p->err_type);
}

void trace_report_error(pickler *p, PyObject *root)
{
    PyObject *type, *value, *tb, *parts, *path = NULL, *message = NULL;
    const char *path_utf8 = NULL, *message_utf8 = NULL;

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL)
        message = od_exception_message(value);
    PyErr_Clear();

    parts = PyList_New(0);
    if (parts != NULL) {
        int outer = OD_REL_NONE;
        for (Py_ssize_t i = p->path_len - 1; i >= 0; i--) {
            if (od_path_append(parts, p->path[i].kind, p->path[i].index, p->path[i].key, outer) < 0)
                break;
            outer = p->path[i].kind;
        }
        path = od_path_join(root, parts);
    }
    Py_XDECREF(parts);
    PyErr_Clear();
    if (path != NULL)
        path_utf8 = PyUnicode_AsUTF8(path);
    if (message != NULL)
        message_utf8 = PyUnicode_AsUTF8(message);
    PyErr_Clear();

    uint32_t type_index =
        p->err_type != NULL ? od_type_index(p->trace, p->err_type, OD_BY_SELF) : 0;
    sertrace_error(p->trace, p->err_recorded ? p->err_tag : SERTRACE_TAG_UNKNOWN, type_index,
                   message_utf8, path_utf8);
    Py_XDECREF(path);
    Py_XDECREF(message);
    PyErr_Restore(type, value, tb);
}
