/* trace.c -- what the trace says about each object, and the error path.
 *
 * save.c's step (save_child_slow) asks trace_classify() whether an object
 * is a node at this granularity, opens it with trace_open() at the
 * current output position, runs the ordinary savers and closes it with
 * trace_close() at the new position; a node without children (an atom, a
 * memo hit) is one trace_leaf() after it was written (one ATOM record).
 * Positions come from output_pos()
 * (output.c), so node bytes are exact by construction: a node's bytes are
 * everything the write path appended while it was open, frame headers and
 * memo opcodes included, and children nest inside.  The plain atoms
 * (None, bool, int, float, str), three objects in four, are no nodes at
 * the default granularity and skip classification.
 *
 * Granularity: containers, reduce-based objects (INSTANCE for instances of
 * heap types, REDUCE otherwise), globals (CLASS / FUNCTION / GLOBAL, named
 * by the global's own module.qualname), memo hits on those (MEMO, with the
 * original's type), bytearrays, PickleBuffers, persistent ids and extension
 * codes always; atoms (None, bool, int, float, str, bytes) only with
 * SERTRACE_DUMP_ATOMS.  Type names are built only the first time a type is
 * seen in a dump (sertrace_type_known), and never by calling user code:
 * no attribute lookup (a metaclass may define __getattribute__), only the
 * objects' own fields: a heap type's ht_qualname and the "__module__" of its
 * own dict, a static type's tp_name, a function's func_qualname and
 * func_module, a builtin's ml_name.
 *
 * Error path: when a child fails, the step calls trace_note_edge() with the
 * child's edge (what it is to its parent), which adds a note to the
 * exception as CPython 3.14 does ("when serializing dict item 'b'") and,
 * in a traced dump, records a path segment.  The innermost failing object
 * is remembered by trace_failed() (the first call of a dump wins); at dump
 * end pickler_dump() calls trace_report_error(), which builds the whole
 * path ("State.suspended[3].frame.stack[2]") and emits ONE
 * sertrace_error().  No value lands in the trace: dict keys in the path
 * follow the key rule (key_text), the message is str(exc) only for
 * built-in exception types whose str runs no user code
 * (py_exception_message).  The notes, which stay in the process, keep
 * CPython 3.14's wording (learned from its documentation and output).
 * None of this runs unless something failed.
 */
#include <stdio.h>
#include <string.h>

#include "pickler.h"
#include "../py_safe_text.h"

/* ---- names ----------------------------------------------------------- */

enum name_mode {
    NAME_TRACE,    /* module.qualname, module omitted for builtins */
    NAME_PERCENT_T, /* %T: module omitted for builtins and __main__ */
    NAME_SHORT,    /* qualname only */
};

/* The module of a type, as a new str reference, or NULL (no exception set)
 * when it has none.  Never user code: a heap type's own dict (what
 * type.__module__ reads, without going through a metaclass's
 * __getattribute__), a static type's tp_name up to the last dot, else
 * "builtins". */
static PyObject *type_module_of(PyTypeObject *type)
{
    if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE)) {
        PyObject *dict = type->tp_dict, *module;
        if (dict == NULL || !PyDict_Check(dict))
            return NULL;
        module = PyDict_GetItemWithError(dict, G.s_module);
        if (module == NULL || !PyUnicode_Check(module)) {
            PyErr_Clear();
            return NULL;
        }
        Py_INCREF(module);
        return module;
    }
    const char *dot = strrchr(type->tp_name, '.');
    if (dot == NULL)
        return PyUnicode_FromString("builtins");
    return PyUnicode_FromStringAndSize(type->tp_name, dot - type->tp_name);
}

/* The qualname of a type: ht_qualname of a heap type, the tail of tp_name
 * of a static one (PyType_GetQualName reads exactly these). */
static PyObject *type_qualname_of(PyTypeObject *type)
{
    return PyType_GetQualName(type);
}

/* module and qualname of a global that is not a type, read from the
 * object's own fields (functions, builtin functions and methods), so no
 * attribute lookup runs user code.  0, or -1 when `obj` is none of those. */
static int function_names(PyObject *obj, PyObject **module, PyObject **qualname)
{
    if (PyFunction_Check(obj)) {
        PyFunctionObject *f = (PyFunctionObject *)obj;
        *qualname = f->func_qualname;
        *module = f->func_module;
        Py_XINCREF(*qualname);
        Py_XINCREF(*module);
        return 0;
    }
    if (PyCFunction_Check(obj)) {
        PyCFunctionObject *f = (PyCFunctionObject *)obj;
        PyObject *self = f->m_self;
        const char *name = f->m_ml != NULL ? f->m_ml->ml_name : NULL;
        if (name == NULL)
            return -1;
        if (self == NULL || PyModule_Check(self)) {
            *qualname = PyUnicode_FromString(name);
        }
        else {
            /* A bound builtin method: TypeName.name, as its __qualname__
             * (which would read the type's __qualname__ through getattr). */
            PyTypeObject *owner = PyType_Check(self) ? (PyTypeObject *)self : Py_TYPE(self);
            PyObject *owner_name = type_qualname_of(owner);
            if (owner_name != NULL)
                *qualname = PyUnicode_FromFormat("%U.%s", owner_name, name);
            Py_XDECREF(owner_name);
        }
        *module = f->m_module;
        Py_XINCREF(*module);
        return 0;
    }
    return -1;
}

/* The name of a type, function or builtin function, or NULL with no
 * exception set when it has no usable name (or is none of those).  Runs
 * no user code: no attribute lookup, only the objects' own fields. */
static PyObject *full_name_of(PyObject *obj, int mode)
{
    PyObject *module = NULL, *qualname = NULL, *res = NULL;

    if (PyType_Check(obj)) {
        qualname = type_qualname_of((PyTypeObject *)obj);
        if (mode != NAME_SHORT)
            module = type_module_of((PyTypeObject *)obj);
    }
    else if (function_names(obj, &module, &qualname) < 0) {
        goto end;
    }
    if (qualname == NULL || !PyUnicode_Check(qualname))
        goto end;
    if (mode == NAME_SHORT || module == NULL || !PyUnicode_Check(module) ||
        PyUnicode_CompareWithASCIIString(module, "builtins") == 0 ||
        (mode == NAME_PERCENT_T && PyUnicode_CompareWithASCIIString(module, "__main__") == 0)) {
        Py_INCREF(qualname);
        res = qualname;
    }
    else {
        res = PyUnicode_FromFormat("%U.%U", module, qualname);
    }
end:
    PyErr_Clear();
    Py_XDECREF(module);
    Py_XDECREF(qualname);
    return res;
}

/* %T of CPython 3.13+: the type's fully qualified name. */
static PyObject *type_name_pct_t(PyTypeObject *type)
{
    PyObject *name = full_name_of((PyObject *)type, NAME_PERCENT_T);
    if (name == NULL)
        name = PyUnicode_FromString(type->tp_name);
    return name;
}

static PyObject *type_name_of(PyObject *obj)
{
    return type_name_pct_t(Py_TYPE(obj));
}

/* Intern `key` in this dump, building its name only the first time. */
static uint32_t trace_type(pickler *p, PyObject *key)
{
    uint32_t index = sertrace_type_known(p->trace, key);
    if (index != 0)
        return index;
    char buf[512];
    const char *name = "?";
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *full = full_name_of(key, NAME_TRACE);
    if (full == NULL && !PyType_Check(key)) /* a global that is an instance */
        full = full_name_of((PyObject *)Py_TYPE(key), NAME_TRACE);
    if (full != NULL) {
        const char *utf8 = PyUnicode_AsUTF8(full);
        if (utf8 != NULL) {
            snprintf(buf, sizeof buf, "%s", utf8);
            name = buf;
        }
        Py_DECREF(full);
    }
    PyErr_Clear();
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return sertrace_type(p->trace, key, name);
}

/* ---- classification --------------------------------------------------- */

/* The tag of `obj` at the default granularity (0 = not traced), and
 * whether it is named by its type or by itself (globals). */
uint8_t trace_classify(pickler *p, PyObject *obj, int *key_kind)
{
    PyTypeObject *type = Py_TYPE(obj);
    int atoms = (p->trace_flags & SERTRACE_DUMP_ATOMS) != 0;
    uint8_t tag;

    *key_kind = KEY_TYPE;
    if (obj == Py_None || obj == Py_True || obj == Py_False)
        return atoms ? SERTRACE_TAG_ATOM : 0;
    if (type == &PyLong_Type)
        return atoms ? SERTRACE_TAG_INT : 0;
    if (type == &PyFloat_Type)
        return atoms ? SERTRACE_TAG_FLOAT : 0;
    if (type == &PyBytes_Type)
        tag = atoms ? SERTRACE_TAG_BYTES : 0;
    else if (type == &PyUnicode_Type)
        tag = atoms ? SERTRACE_TAG_STR : 0;
    else if (type == &PyDict_Type)
        tag = SERTRACE_TAG_DICT;
    else if (type == &PyList_Type)
        tag = SERTRACE_TAG_LIST;
    else if (type == &PyTuple_Type)
        tag = SERTRACE_TAG_TUPLE;
    else if (type == &PySet_Type)
        tag = SERTRACE_TAG_SET;
    else if (type == &PyFrozenSet_Type)
        tag = SERTRACE_TAG_FROZENSET;
    else if (type == &PyByteArray_Type)
        tag = SERTRACE_TAG_BYTEARRAY;
    else if (type == &PyPickleBuffer_Type)
        tag = SERTRACE_TAG_PICKLEBUFFER;
    else if (PyType_Check(obj)) {
        tag = SERTRACE_TAG_CLASS;
        *key_kind = KEY_SELF;
    }
    else if (type == &PyFunction_Type || PyCFunction_Check(obj)) {
        tag = SERTRACE_TAG_FUNCTION;
        *key_kind = KEY_SELF;
    }
    else if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE))
        tag = SERTRACE_TAG_INSTANCE;
    else
        tag = SERTRACE_TAG_REDUCE;
    if (tag == 0)
        return 0;
    if (memo_lookup(&p->memo, obj) != NULL)
        return SERTRACE_TAG_MEMO;
    return tag;
}

static uint64_t length_of(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyDict_Type)
        return (uint64_t)PyDict_GET_SIZE(obj) + 1;
    if (type == &PyList_Type)
        return (uint64_t)PyList_GET_SIZE(obj) + 1;
    if (type == &PyTuple_Type)
        return (uint64_t)PyTuple_GET_SIZE(obj) + 1;
    if (type == &PySet_Type || type == &PyFrozenSet_Type)
        return (uint64_t)PySet_GET_SIZE(obj) + 1;
    if (type == &PyUnicode_Type)
        return (uint64_t)PyUnicode_GET_LENGTH(obj) + 1;
    if (type == &PyBytes_Type)
        return (uint64_t)PyBytes_GET_SIZE(obj) + 1;
    if (type == &PyByteArray_Type)
        return (uint64_t)PyByteArray_GET_SIZE(obj) + 1;
    return 0;
}

void trace_open(pickler *p, uint8_t tag, PyObject *obj, int key_kind)
{
    PyObject *key = key_kind == KEY_SELF ? obj : (PyObject *)Py_TYPE(obj);
    uint32_t type = trace_type(p, key);
    uint64_t length = tag == SERTRACE_TAG_ITEMS ? 0 : length_of(obj);
    sertrace_enter(p->trace, tag, type, (uintptr_t)obj, length, output_pos(p));
}

void trace_close(pickler *p)
{
    sertrace_exit(p->trace, output_pos(p));
}

/* A node without children, written from `pos` to the current position:
 * one ATOM record.  `failed`: writing it failed, so it is an ENTER left
 * open like any failed node (same tree as before the ATOM record). */
void trace_leaf(pickler *p, uint8_t tag, PyObject *obj, int key_kind, uint64_t pos, int failed)
{
    PyTypeObject *t = Py_TYPE(obj);
    PyObject *key = key_kind == KEY_SELF ? obj : (PyObject *)t;
    int slot = key_kind == KEY_SELF       ? -1
               : t == &PyLong_Type        ? 0
               : t == &PyFloat_Type       ? 1
               : t == &PyUnicode_Type     ? 2
               : t == &PyBytes_Type       ? 3
               : obj == Py_None           ? 4
               : t == &PyBool_Type        ? 5
                                          : -1;
    uint32_t type = slot >= 0 ? p->leaf_type[slot] : 0;
    if (type == 0) {
        type = trace_type(p, key);
        if (slot >= 0)
            p->leaf_type[slot] = type;
    }
    uint64_t length = slot == 2   ? (uint64_t)PyUnicode_GET_LENGTH(obj) + 1
                      : slot == 3 ? (uint64_t)PyBytes_GET_SIZE(obj) + 1
                      : slot >= 0 ? 0
                                  : length_of(obj);
    if (failed)
        sertrace_enter(p->trace, tag, type, (uintptr_t)obj, length, pos);
    else
        sertrace_atom(p->trace, tag, type, (uintptr_t)obj, length, pos, output_pos(p));
}

void trace_failed(pickler *p, PyObject *obj, uint8_t tag)
{
    if (p->err_recorded)
        return;
    p->err_recorded = 1;
    if (tag == 0) {
        PyTypeObject *type = Py_TYPE(obj);
        tag = type == &PyUnicode_Type ? SERTRACE_TAG_STR
              : type == &PyBytes_Type ? SERTRACE_TAG_BYTES
              : type == &PyLong_Type  ? SERTRACE_TAG_INT
              : type == &PyFloat_Type ? SERTRACE_TAG_FLOAT
                                      : SERTRACE_TAG_ATOM;
    }
    p->err_tag = tag;
    Py_INCREF(Py_TYPE(obj));
    Py_XSETREF(p->err_type, (PyObject *)Py_TYPE(obj));
}

/* ---- error notes and path -------------------------------------------- */

static void add_note(PyObject *note)
{
    PyObject *type, *value, *tb;
    if (note == NULL)
        return; /* note_text() failed and already restored the exception */
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL) {
        if (tb != NULL)
            PyException_SetTraceback(value, tb);
        /* BaseException.add_note itself, as CPython's _PyException_AddNote:
         * an exception class that overrides add_note runs no code here. */
        PyObject *add = PyObject_GetAttr(PyExc_BaseException, G.s_add_note);
        PyObject *r = add ? PyObject_CallFunctionObjArgs(add, value, note, NULL) : NULL;
        Py_XDECREF(add);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    Py_DECREF(note);
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

/* Runs with the failure's exception set: fetch it around our own calls. */
static PyObject *note_text(const char *fmt_kind, PyObject *container, PyObject *extra,
                           Py_ssize_t index)
{
    PyObject *type, *value, *tb, *name, *text = NULL;
    PyErr_Fetch(&type, &value, &tb);
    name = type_name_of(container);
    if (name != NULL) {
        if (strcmp(fmt_kind, "index") == 0) {
            text = PyUnicode_FromFormat("when serializing %U item %zd", name, index);
        }
        else if (strcmp(fmt_kind, "key") == 0) {
            PyObject *r = py_safe_repr(extra, type_name_pct_t);
            if (r != NULL)
                text = PyUnicode_FromFormat("when serializing %U item %U", name, r);
            Py_XDECREF(r);
        }
        else {
            text = PyUnicode_FromFormat("when serializing %U %s", name, fmt_kind);
        }
        Py_DECREF(name);
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return text;
}

/* What each edge of save_child() says about a failed child: the note's
 * wording after "when serializing <T> " and the path segment.  Edges with
 * no text add nothing (the dumped object itself, a dict key, the names of
 * STACK_GLOBAL, a persistent id). */
static const struct {
    const char *what; /* NULL: no note, no segment */
    int segment;
} edge_text[] = {
    [EDGE_ROOT] = {NULL, 0},
    [EDGE_PLAIN] = {NULL, 0},
    [EDGE_PERSID] = {NULL, 0},
    [EDGE_ITEM] = {"index", PATH_INDEX},
    [EDGE_VALUE] = {"key", PATH_KEY},
    [EDGE_ELEMENT] = {"element", PATH_ELEMENT},
    [EDGE_STATE] = {"state", PATH_STATE},
    [EDGE_STATE_SETTER] = {"state setter", PATH_CALLABLE},
    [EDGE_RECONSTRUCTOR] = {"reconstructor", PATH_CALLABLE},
    [EDGE_RECONSTRUCTOR_ARGS] = {"reconstructor arguments", PATH_ARGS},
    [EDGE_CLASS] = {"class", PATH_CALLABLE},
    [EDGE_NEW_ARGS] = {"__new__ arguments", PATH_ARGS},
};

void trace_note_edge(pickler *p, const edge *e)
{
    const char *what = edge_text[e->kind].what;
    if (what == NULL)
        return;
    /* A reduce written for no object (a nested global's getattr) has no
     * name for the note, but its segment still counts in the path. */
    if (e->parent != NULL)
        add_note(note_text(what, e->parent, e->key, e->index));
    push_segment(p, edge_text[e->kind].segment, e->index, e->key);
}

void trace_note_object(PyObject *obj)
{
    add_note(note_text("object", obj, NULL, 0));
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

/* Dict keys in the trace's path (README, "Dict keys").  Keys are user
 * data, so only keys that read as names or small numbers are shown; every
 * other key shows its type.  The same rule as the dill hook's
 * (serializers/pyhook):
 *   a str that is an identifier of at most 64 characters   'name'
 *   an int (not bool) that fits in 64 bits                  42
 *   None, True, False                                       None
 *   any other str, bytes                                    <str len=12>
 *   anything else                                           <tuple>
 * No repr and no user code is called. */
#define KEY_NAME_MAX 64

static int is_short_identifier(PyObject *key)
{
    return PyUnicode_CheckExact(key) && PyUnicode_GET_LENGTH(key) <= KEY_NAME_MAX &&
           PyUnicode_IsIdentifier(key) == 1;
}

static PyObject *key_text(PyObject *key)
{
    if (is_short_identifier(key))
        return PyUnicode_FromFormat("'%U'", key); /* an identifier needs no escaping */
    if (PyLong_CheckExact(key)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred()))
            return PyUnicode_FromFormat("%lld", v);
        PyErr_Clear();
    }
    else if (key == Py_None || key == Py_True || key == Py_False) {
        return PyUnicode_FromString(key == Py_None ? "None" : key == Py_True ? "True" : "False");
    }
    if (PyUnicode_CheckExact(key))
        return PyUnicode_FromFormat("<str len=%zd>", PyUnicode_GET_LENGTH(key));
    if (PyBytes_CheckExact(key))
        return PyUnicode_FromFormat("<bytes len=%zd>", PyBytes_GET_SIZE(key));
    PyObject *name = type_name_of(key);
    if (name == NULL)
        return NULL;
    PyObject *res = PyUnicode_FromFormat("<%U>", name);
    Py_DECREF(name);
    return res;
}

/* Append one path segment (outermost first order) to `out` (a list of str). */
static int append_segment(PyObject *out, const path_segment *seg, const path_segment *outer)
{
    PyObject *s = NULL;
    switch (seg->kind) {
    case PATH_INDEX:
        s = PyUnicode_FromFormat("[%zd]", seg->index);
        break;
    case PATH_KEY:
        if (outer != NULL && outer->kind == PATH_STATE && is_short_identifier(seg->key)) {
            s = PyUnicode_FromFormat(".%U", seg->key);
        }
        else {
            PyObject *text = key_text(seg->key);
            if (text != NULL)
                s = PyUnicode_FromFormat("[%U]", text);
            Py_XDECREF(text);
        }
        break;
    case PATH_STATE:
        return 0;
    case PATH_ARGS:
        s = PyUnicode_FromString("(args)");
        break;
    case PATH_CALLABLE:
        s = PyUnicode_FromString("(reconstructor)");
        break;
    case PATH_ELEMENT:
        s = PyUnicode_FromString("{element}");
        break;
    default:
        return 0;
    }
    if (s == NULL)
        return -1;
    int r = PyList_Append(out, s);
    Py_DECREF(s);
    return r;
}

/* ---- the error's message: py_exception_message() (../py_safe_text.h) -- */

void trace_report_error(pickler *p, PyObject *root)
{
    PyObject *type, *value, *tb, *parts = NULL, *path = NULL, *message = NULL, *rootname;
    const char *path_utf8 = NULL, *message_utf8 = NULL;

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL)
        message = py_exception_message(value, type_name_pct_t);
    PyErr_Clear();

    parts = PyList_New(0);
    rootname = full_name_of((PyObject *)Py_TYPE(root), NAME_SHORT);
    if (parts != NULL && rootname != NULL && PyList_Append(parts, rootname) == 0) {
        const path_segment *outer = NULL;
        for (Py_ssize_t i = p->path_len - 1; i >= 0; i--) {
            if (append_segment(parts, &p->path[i], outer) < 0)
                break;
            outer = &p->path[i];
        }
        PyObject *empty = PyUnicode_FromString("");
        if (empty != NULL)
            path = PyUnicode_Join(empty, parts);
        Py_XDECREF(empty);
        /* Records keep SERTRACE_STRING_MAX bytes from the start; a very deep
         * path (a RecursionError) keeps its root and its innermost end. */
        if (path != NULL && PyUnicode_GET_LENGTH(path) > 240) {
            Py_ssize_t n = PyUnicode_GET_LENGTH(path);
            PyObject *tail = PyUnicode_Substring(path, n - 200, n);
            PyObject *shorter =
                tail != NULL ? PyUnicode_FromFormat("%U...%U", rootname, tail) : NULL;
            Py_XDECREF(tail);
            if (shorter != NULL)
                Py_SETREF(path, shorter);
        }
    }
    Py_XDECREF(rootname);
    Py_XDECREF(parts);
    PyErr_Clear();
    if (path != NULL)
        path_utf8 = PyUnicode_AsUTF8(path);
    if (message != NULL)
        message_utf8 = PyUnicode_AsUTF8(message);
    PyErr_Clear();

    uint32_t type_index = p->err_type != NULL ? trace_type(p, p->err_type) : 0;
    sertrace_error(p->trace, p->err_recorded ? p->err_tag : SERTRACE_TAG_UNKNOWN, type_index,
                   message_utf8, path_utf8);
    Py_XDECREF(path);
    Py_XDECREF(message);
    PyErr_Restore(type, value, tb);
}
