/* serializers/objdesc/objdesc.h -- one description of Python objects for
 * both Python serializers.
 *
 * The C pickler (serializers/pickle, trace.c) and the hook for pure-Python
 * picklers (serializers/pyhook) trace the same objects from different
 * vantage points: the C pickler knows which path it takes for each object,
 * the hook sees save() calls, the memo dict and the bytes written.  The tree
 * must not depend on which one wrote the bytes, so everything the trace
 * says about an object is decided here, from the object alone (and from
 * "is it a memo hit", which both know): its tag, whether it is named by its
 * type or by itself, its type name, its length, the text of a dict key in
 * an error path, the path itself, the 3.14-style notes and the recorded
 * exception message.  Nothing here runs user code: no attribute lookup
 * (a metaclass may define __getattribute__), no repr or str but of exact
 * built-in atoms; names come from the objects' own fields.
 *
 * objdesc.c is compiled into each extension module (python/sertrace/
 * meson.build builds them with hidden visibility), so each has its own
 * copy; the only state is one interned string ("__module__").  The
 * functions called on every traced node are inline, at the end.
 */
#ifndef SERTRACE_OBJDESC_H
#define SERTRACE_OBJDESC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include "sertrace/sertrace.h"

/* ---- names ------------------------------------------------------------- */

enum od_name_mode {
    OD_NAME_TRACE,     /* module.qualname, module omitted for builtins (tree) */
    OD_NAME_PERCENT_T, /* CPython's %T: module omitted for builtins and __main__ */
    OD_NAME_SHORT,     /* qualname only (the root of an error path) */
};

/* The name of a class, function or builtin function/method, as a new str,
 * or NULL (no exception set) when `obj` is none of those or has no usable
 * name.  Only the objects' own fields: a heap type's ht_qualname and the
 * "__module__" of its own dict, a static type's tp_name, a function's
 * func_qualname / func_module, a builtin's ml_name (bound builtin methods:
 * Owner.name). */
PyObject *od_global_name(PyObject *obj, int mode);

/* %T naming of a type (falls back on tp_name); NULL only on memory error. */
PyObject *od_type_name(PyTypeObject *type);

/* ---- tags and type names ----------------------------------------------- */

/* How a node is named: by its type (instances, containers), by itself (a
 * class or function written by reference: the tree shows which one), or as
 * a reference to a class or function already written (a memo hit on it). */
enum od_naming { OD_BY_TYPE, OD_BY_SELF, OD_REF_SELF };

/* The tag of `obj` when written as itself (not a memo hit), or 0 when it
 * is no node at this granularity (`atoms` false: None, bool, int, float,
 * str and bytes are folded into their parent).  The rules:
 *   None, True, False                       A   (atoms only)
 *   int, float, str, bytes (exact)          I, Fl, Str, By (atoms only)
 *   dict, list, tuple, set, frozenset,      D2, L, Tu, Se, FS,
 *   bytearray, PickleBuffer (exact)         BA, PB
 *   Ellipsis, NotImplemented                G   (written by name)
 *   a class (any metaclass)                 T4
 *   a function, builtin function or method  F2
 *   an instance of a heap type              O
 *   anything else (reduce-based)            R
 * A memo hit is MEMO (SERTRACE_TAG_MEMO) whatever the object. */
static inline uint8_t od_tag(PyObject *obj, bool atoms);

/* The tag recorded for a failure of an object that had no node (a folded
 * atom): I, Fl, Str, By or A. */
static inline uint8_t od_atom_tag(PyObject *obj);

/* Class and function tags, sertrace's and dill's (named by the object). */
static inline bool od_is_class_tag(uint8_t tag);
static inline bool od_is_function_tag(uint8_t tag);

/* How a node of `tag` for `obj` is named: MEMO of a class or function
 * refers to it (OD_REF_SELF); a class or function tag on a class or
 * function names it (OD_BY_SELF); everything else is named by its type. */
static inline int od_naming(PyObject *obj, uint8_t tag);

/* The dump's type index for `obj` named per `naming`, interning the name
 * the first time (sertrace_type_known first: one probe when known).
 * The key is the type (OD_BY_TYPE), the object (OD_BY_SELF), or the
 * object's address + 1 (OD_REF_SELF: a reference has its own name,
 * "class mod.Name" or "function mod.name", which the formatter shows as
 * <ref class 'mod.Name'> / <ref function mod.name at 0x...>).  Call with
 * no exception set or with one: it is kept. */
static inline uint32_t od_type_index(sertrace_dump *d, PyObject *obj, int naming);
/* The key od_type_index() interns `obj`'s name under (for a caller that
 * caches indices by key). */
static inline const void *od_type_key(PyObject *obj, int naming);
/* The slow half of od_type_index: build and intern the name. */
uint32_t od_type_intern(sertrace_dump *d, PyObject *obj, int naming, const void *key);

/* The node's length field: item count + 1 for dict, list, tuple, set,
 * frozenset, str, bytes and bytearray (exact), else 0. */
static inline uint64_t od_length(PyObject *obj);

/* ---- the error path ---------------------------------------------------- */

/* What a failing child is to its parent: the note's wording and the path
 * segment. */
enum od_rel {
    OD_REL_NONE,
    OD_REL_INDEX,      /* list/tuple item i (or a reduce's listitems) */
    OD_REL_KEY,        /* the value under dict key k */
    OD_REL_ELEMENT,    /* set / frozenset element */
    OD_REL_STATE,      /* a reduce's state */
    OD_REL_SETTER,     /* a reduce's state setter */
    OD_REL_RECON,      /* a reduce's reconstructor */
    OD_REL_RECON_ARGS, /* a reduce's reconstructor arguments */
    OD_REL_CLASS,      /* NEWOBJ / NEWOBJ_EX: the class */
    OD_REL_NEW_ARGS,   /* NEWOBJ / NEWOBJ_EX: __new__ arguments */
    OD_REL_OBJECT,     /* (note only) "when serializing T object" */
};

/* The note CPython 3.14 adds while unwinding, for `container` and the
 * relation: "when serializing list item 3", "... dict item 'b'" (the key
 * repr'd only when that runs no user code, else <Type>), "... set
 * element", "... State state", "... State object".  NULL on failure.
 * Call with no exception set. */
PyObject *od_note_text(PyObject *container, int rel, Py_ssize_t index, PyObject *key);

/* exc.add_note(note) through BaseException.add_note itself (an exception
 * class overriding add_note runs no code); steals `note` (NULL: nothing).
 * Call with no exception set; leaves none. */
void od_add_note(PyObject *exc, PyObject *note);

/* Dict keys in paths: only keys that read as names or small numbers are
 * shown, every other key shows its type (serializers/README.md):
 *   a str that is an identifier of at most 64 characters   'name'
 *   an int (not bool) that fits in 64 bits                  42
 *   None, True, False                                       None
 *   any other str, bytes                                    <str len=12>
 *   anything else                                           <tuple>   */
PyObject *od_key_text(PyObject *key);
bool od_is_short_identifier(PyObject *key);

/* Append the path segment of `rel` to `parts` (a list of str), outermost
 * first; `outer` is the previous (outer) segment's relation.  [3], ['b']
 * or .b (an identifier key right inside a state), {element}, (args),
 * (reconstructor); a state is transparent.  -1 on failure. */
int od_path_append(PyObject *parts, int rel, Py_ssize_t index, PyObject *key, int outer);

/* The whole path: the root's type qualname followed by the segments; a
 * path over 240 characters keeps its root and its last 200. */
PyObject *od_path_join(PyObject *root, PyObject *parts);

/* ---- safe text --------------------------------------------------------- */

/* A repr that runs no user code: exact str, int, float, bytes, bool, None
 * and tuples of those; anything else "<Type>" (%T naming). */
PyObject *od_safe_repr(PyObject *obj);

/* The text recorded for an exception: str(exc) only for built-in types
 * whose str runs no user code, else "<module.Type>" (+ ": " and the args'
 * text when all are exact str). */
PyObject *od_exception_message(PyObject *exc);

/* ---- inline definitions (the traced path calls these on every node) --- */

static inline uint8_t od_tag(PyObject *obj, bool atoms)
{
    PyTypeObject *type = Py_TYPE(obj);

    if (obj == Py_None || obj == Py_True || obj == Py_False)
        return atoms ? SERTRACE_TAG_ATOM : 0;
    if (type == &PyLong_Type)
        return atoms ? SERTRACE_TAG_INT : 0;
    if (type == &PyFloat_Type)
        return atoms ? SERTRACE_TAG_FLOAT : 0;
    if (type == &PyUnicode_Type)
        return atoms ? SERTRACE_TAG_STR : 0;
    if (type == &PyBytes_Type)
        return atoms ? SERTRACE_TAG_BYTES : 0;
    if (type == &PyDict_Type)
        return SERTRACE_TAG_DICT;
    if (type == &PyList_Type)
        return SERTRACE_TAG_LIST;
    if (type == &PyTuple_Type)
        return SERTRACE_TAG_TUPLE;
    if (type == &PySet_Type)
        return SERTRACE_TAG_SET;
    if (type == &PyFrozenSet_Type)
        return SERTRACE_TAG_FROZENSET;
    if (type == &PyByteArray_Type)
        return SERTRACE_TAG_BYTEARRAY;
    if (type == &PyPickleBuffer_Type)
        return SERTRACE_TAG_PICKLEBUFFER;
    if (obj == Py_Ellipsis || obj == Py_NotImplemented)
        return SERTRACE_TAG_GLOBAL;
    if (PyType_Check(obj))
        return SERTRACE_TAG_CLASS;
    if (type == &PyFunction_Type || PyCFunction_Check(obj))
        return SERTRACE_TAG_FUNCTION;
    if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE))
        return SERTRACE_TAG_INSTANCE;
    return SERTRACE_TAG_REDUCE;
}

static inline uint8_t od_atom_tag(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    return type == &PyUnicode_Type ? SERTRACE_TAG_STR
           : type == &PyBytes_Type ? SERTRACE_TAG_BYTES
           : type == &PyLong_Type  ? SERTRACE_TAG_INT
           : type == &PyFloat_Type ? SERTRACE_TAG_FLOAT
                                   : SERTRACE_TAG_ATOM;
}

/* Which tags are classes and functions: the class column of schema.h's
 * SERTRACE_TAGS table, never a list here. */
static inline bool od_is_class_tag(uint8_t tag)
{
    return sertrace_tagclass_of(tag) == SERTRACE_TAGCLASS_CLASS;
}

static inline bool od_is_function_tag(uint8_t tag)
{
    return sertrace_tagclass_of(tag) == SERTRACE_TAGCLASS_FUNCTION;
}

static inline bool od_is_named_global(PyObject *obj)
{
    return PyType_Check(obj) || PyFunction_Check(obj) || PyCFunction_Check(obj);
}

static inline int od_naming(PyObject *obj, uint8_t tag)
{
    if (tag <= SERTRACE_TAG_REDUCE) /* containers, atoms, O, R: the common case */
        return OD_BY_TYPE;
    if (tag == SERTRACE_TAG_MEMO)
        return od_is_named_global(obj) ? OD_REF_SELF : OD_BY_TYPE;
    if (od_is_class_tag(tag) && PyType_Check(obj))
        return OD_BY_SELF;
    if ((od_is_function_tag(tag) || tag == SERTRACE_TAG_EXT) && od_is_named_global(obj))
        return OD_BY_SELF;
    return OD_BY_TYPE;
}

static inline uint64_t od_length(PyObject *obj)
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

static inline const void *od_type_key(PyObject *obj, int naming)
{
    return naming == OD_BY_TYPE   ? (const void *)Py_TYPE(obj)
           : naming == OD_BY_SELF ? (const void *)obj
                                  : (const void *)((const char *)obj + 1);
}

static inline uint32_t od_type_index(sertrace_dump *d, PyObject *obj, int naming)
{
    const void *key = od_type_key(obj, naming);
    uint32_t index = sertrace_type_known(d, key);
    return index != 0 ? index : od_type_intern(d, obj, naming, key);
}

#endif /* SERTRACE_OBJDESC_H */
