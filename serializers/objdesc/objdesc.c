/* serializers/objdesc/objdesc.c -- one description of Python objects for
 * both Python serializers (objdesc.h says what and why).
 *
 * Written for this project from the CPython C API's documented fields and
 * from observed behaviour (pickle's output, CPython 3.14's notes).  The
 * names, keys, notes and messages were each written twice before, in
 * serializers/pickle/trace.c and serializers/pyhook, and had drifted; this
 * file is what both now call.  The tags follow what the bytes are: a
 * builtin function is written by reference like a Python function (F2),
 * Ellipsis and NotImplemented by name (G), a class's memo hit refers to the
 * class.  Nothing here runs user code (see the header); the only state is
 * one interned string.
 */
#include "objdesc.h"

#include <stdio.h>
#include <string.h>

/* "__module__", interned once per extension module. */
static PyObject *module_key(void)
{
    static PyObject *key;
    if (key == NULL)
        key = PyUnicode_InternFromString("__module__");
    return key;
}

/* ---- names ------------------------------------------------------------- */

/* The module of a type, as a new str, or NULL (no exception set) when it
 * has none: a heap type's own dict (what type.__module__ reads, without a
 * metaclass's __getattribute__), a static type's tp_name up to the last
 * dot, else "builtins". */
static PyObject *type_module(PyTypeObject *type)
{
    if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE)) {
        PyObject *dict = type->tp_dict, *key = module_key(), *module;
        if (dict == NULL || key == NULL || !PyDict_Check(dict)) {
            PyErr_Clear();
            return NULL;
        }
        module = PyDict_GetItemWithError(dict, key);
        if (module == NULL || !PyUnicode_Check(module)) {
            PyErr_Clear();
            return NULL;
        }
        return Py_NewRef(module);
    }
    const char *dot = strrchr(type->tp_name, '.');
    if (dot == NULL)
        return PyUnicode_FromString("builtins");
    return PyUnicode_FromStringAndSize(type->tp_name, dot - type->tp_name);
}

/* module and qualname of a function or builtin function/method, from its
 * own fields.  0, or -1 when `obj` is neither. */
static int function_names(PyObject *obj, PyObject **module, PyObject **qualname)
{
    if (PyFunction_Check(obj)) {
        PyFunctionObject *f = (PyFunctionObject *)obj;
        *qualname = Py_XNewRef(f->func_qualname);
        *module = Py_XNewRef(f->func_module);
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
        } else {
            /* A bound builtin method: Owner.name, as its __qualname__
             * (which would read the owner's __qualname__ through getattr). */
            PyTypeObject *owner = PyType_Check(self) ? (PyTypeObject *)self : Py_TYPE(self);
            PyObject *owner_name = PyType_GetQualName(owner);
            if (owner_name != NULL)
                *qualname = PyUnicode_FromFormat("%U.%s", owner_name, name);
            Py_XDECREF(owner_name);
        }
        *module = Py_XNewRef(f->m_module);
        return 0;
    }
    return -1;
}

PyObject *od_global_name(PyObject *obj, int mode)
{
    PyObject *module = NULL, *qualname = NULL, *res = NULL;

    if (PyType_Check(obj)) {
        qualname = PyType_GetQualName((PyTypeObject *)obj);
        if (mode != OD_NAME_SHORT)
            module = type_module((PyTypeObject *)obj);
    } else if (function_names(obj, &module, &qualname) < 0) {
        goto end;
    }
    if (qualname == NULL || !PyUnicode_Check(qualname))
        goto end;
    if (mode == OD_NAME_SHORT || module == NULL || !PyUnicode_Check(module) ||
        PyUnicode_CompareWithASCIIString(module, "builtins") == 0 ||
        (mode == OD_NAME_PERCENT_T && PyUnicode_CompareWithASCIIString(module, "__main__") == 0))
        res = Py_NewRef(qualname);
    else
        res = PyUnicode_FromFormat("%U.%U", module, qualname);
end:
    PyErr_Clear();
    Py_XDECREF(module);
    Py_XDECREF(qualname);
    return res;
}

PyObject *od_type_name(PyTypeObject *type)
{
    PyObject *name = od_global_name((PyObject *)type, OD_NAME_PERCENT_T);
    if (name == NULL)
        name = PyUnicode_FromString(type->tp_name);
    return name;
}

/* ---- tags and type names ----------------------------------------------- */

uint32_t od_type_intern(sertrace_dump *d, PyObject *obj, int naming, const void *key)
{
    char buf[512];
    const char *name = "?";
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *full =
        od_global_name(naming == OD_BY_TYPE ? (PyObject *)Py_TYPE(obj) : obj, OD_NAME_TRACE);
    if (full == NULL) /* a "global" that is none of those: its type's name */
        full = od_global_name((PyObject *)Py_TYPE(obj), OD_NAME_TRACE);
    if (full != NULL) {
        const char *utf8 = PyUnicode_AsUTF8(full);
        if (utf8 != NULL) {
            if (naming == OD_REF_SELF)
                snprintf(buf, sizeof buf, "%s %s", PyType_Check(obj) ? "class" : "function", utf8);
            else
                snprintf(buf, sizeof buf, "%s", utf8);
            name = buf;
        }
        Py_DECREF(full);
    }
    PyErr_Clear();
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return sertrace_type(d, key, name);
}

/* ---- the error path ---------------------------------------------------- */

static const char *const rel_words[] = {
    [OD_REL_ELEMENT] = "element",
    [OD_REL_STATE] = "state",
    [OD_REL_SETTER] = "state setter",
    [OD_REL_RECON] = "reconstructor",
    [OD_REL_RECON_ARGS] = "reconstructor arguments",
    [OD_REL_CLASS] = "class",
    [OD_REL_NEW_ARGS] = "__new__ arguments",
    [OD_REL_OBJECT] = "object",
};

PyObject *od_note_text(PyObject *container, int rel, Py_ssize_t index, PyObject *key)
{
    PyObject *name = od_type_name(Py_TYPE(container)), *text = NULL;

    if (name == NULL)
        return NULL;
    if (rel == OD_REL_INDEX) {
        text = PyUnicode_FromFormat("when serializing %U item %zd", name, index);
    } else if (rel == OD_REL_KEY) {
        PyObject *r = od_safe_repr(key);
        if (r != NULL)
            text = PyUnicode_FromFormat("when serializing %U item %U", name, r);
        Py_XDECREF(r);
    } else if (rel > OD_REL_KEY && rel <= OD_REL_OBJECT) {
        text = PyUnicode_FromFormat("when serializing %U %s", name, rel_words[rel]);
    }
    Py_DECREF(name);
    return text;
}

void od_add_note(PyObject *exc, PyObject *note)
{
    if (note != NULL && exc != NULL) {
        PyObject *add = PyObject_GetAttrString(PyExc_BaseException, "add_note");
        PyObject *r = add ? PyObject_CallFunctionObjArgs(add, exc, note, NULL) : NULL;
        Py_XDECREF(add);
        Py_XDECREF(r);
    }
    Py_XDECREF(note);
    PyErr_Clear();
}

#define KEY_NAME_MAX 64

bool od_is_short_identifier(PyObject *key)
{
    return key != NULL && PyUnicode_CheckExact(key) && PyUnicode_GET_LENGTH(key) <= KEY_NAME_MAX &&
           PyUnicode_IsIdentifier(key) == 1;
}

PyObject *od_key_text(PyObject *key)
{
    if (od_is_short_identifier(key))
        return PyUnicode_FromFormat("'%U'", key); /* an identifier needs no escaping */
    if (PyLong_CheckExact(key)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred()))
            return PyUnicode_FromFormat("%lld", v);
        PyErr_Clear();
    } else if (key == Py_None || key == Py_True || key == Py_False) {
        return PyUnicode_FromString(key == Py_None ? "None" : key == Py_True ? "True" : "False");
    }
    if (PyUnicode_CheckExact(key))
        return PyUnicode_FromFormat("<str len=%zd>", PyUnicode_GET_LENGTH(key));
    if (PyBytes_CheckExact(key))
        return PyUnicode_FromFormat("<bytes len=%zd>", PyBytes_GET_SIZE(key));
    PyObject *name = od_type_name(Py_TYPE(key));
    if (name == NULL)
        return NULL;
    PyObject *res = PyUnicode_FromFormat("<%U>", name);
    Py_DECREF(name);
    return res;
}

int od_path_append(PyObject *parts, int rel, Py_ssize_t index, PyObject *key, int outer)
{
    PyObject *s = NULL;
    switch (rel) {
    case OD_REL_INDEX:
        s = PyUnicode_FromFormat("[%zd]", index);
        break;
    case OD_REL_KEY:
        if (outer == OD_REL_STATE && od_is_short_identifier(key)) {
            s = PyUnicode_FromFormat(".%U", key);
        } else {
            PyObject *text = key != NULL ? od_key_text(key) : NULL;
            if (text != NULL)
                s = PyUnicode_FromFormat("[%U]", text);
            Py_XDECREF(text);
        }
        break;
    case OD_REL_ELEMENT:
        s = PyUnicode_FromString("{element}");
        break;
    case OD_REL_RECON_ARGS:
    case OD_REL_NEW_ARGS:
        s = PyUnicode_FromString("(args)");
        break;
    case OD_REL_RECON:
    case OD_REL_CLASS:
    case OD_REL_SETTER:
        s = PyUnicode_FromString("(reconstructor)");
        break;
    default: /* a state is transparent; no relation, no segment */
        return 0;
    }
    if (s == NULL)
        return -1;
    int r = PyList_Append(parts, s);
    Py_DECREF(s);
    return r;
}

PyObject *od_path_join(PyObject *root, PyObject *parts)
{
    PyObject *rootname, *tail = NULL, *path = NULL, *empty;

    if (root == NULL)
        return NULL;
    rootname = od_global_name((PyObject *)Py_TYPE(root), OD_NAME_SHORT);
    if (rootname == NULL)
        return NULL;
    empty = PyUnicode_FromString("");
    if (empty != NULL)
        tail = parts != NULL ? PyUnicode_Join(empty, parts) : Py_NewRef(empty);
    Py_XDECREF(empty);
    if (tail != NULL)
        path = PyUnicode_Concat(rootname, tail);
    Py_XDECREF(tail);
    /* Records keep SERTRACE_STRING_MAX bytes from the start; a very deep
     * path (a RecursionError) keeps its root and its innermost end. */
    if (path != NULL && PyUnicode_GET_LENGTH(path) > 240) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(path);
        PyObject *end = PyUnicode_Substring(path, n - 200, n);
        PyObject *shorter = end != NULL ? PyUnicode_FromFormat("%U...%U", rootname, end) : NULL;
        Py_XDECREF(end);
        if (shorter != NULL)
            Py_SETREF(path, shorter);
    }
    Py_DECREF(rootname);
    PyErr_Clear();
    return path;
}

/* ---- safe text --------------------------------------------------------- */

/* str/int/float/bytes/bool/None: repr() runs no user code. */
static bool is_repr_atom(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBytes_Type ||
           t == &PyBool_Type || o == Py_None;
}

PyObject *od_safe_repr(PyObject *obj)
{
    if (is_repr_atom(obj))
        return PyObject_Repr(obj);
    if (PyTuple_CheckExact(obj)) {
        bool safe = true;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj) && safe; i++)
            safe = is_repr_atom(PyTuple_GET_ITEM(obj, i));
        if (safe)
            return PyObject_Repr(obj);
    }
    PyObject *name = od_type_name(Py_TYPE(obj));
    if (name == NULL)
        return NULL;
    PyObject *res = PyUnicode_FromFormat("<%U>", name);
    Py_DECREF(name);
    return res;
}

/* An object whose str() and repr() run no user code and say nothing beyond
 * what pickle's own messages carry: exact str, int, float, bool, None. */
static bool is_plain_atom(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return o == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyBool_Type;
}

static bool is_exact_str(PyObject *o)
{
    return PyUnicode_CheckExact(o);
}

static bool all_args(PyObject *exc, bool (*ok)(PyObject *))
{
    PyObject *args = ((PyBaseExceptionObject *)exc)->args;
    if (args == NULL || !PyTuple_CheckExact(args))
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        if (!ok(PyTuple_GET_ITEM(args, i)))
            return false;
    return true;
}

static bool plain_or_null(PyObject *o)
{
    return o == NULL || is_plain_atom(o);
}

/* Whether str(exc) of a built-in exception type runs no user code: its
 * args are plain atoms, and so are the fields its own __str__ reads
 * (OSError's filenames, SyntaxError's, ImportError's and UnicodeError's). */
static bool builtin_str_is_safe(PyObject *exc)
{
    if (!all_args(exc, is_plain_atom))
        return false;
    if (Py_TYPE(exc)->tp_str == ((PyTypeObject *)PyExc_BaseException)->tp_str)
        return true;
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_OSError)) {
        PyOSErrorObject *e = (PyOSErrorObject *)exc;
        return plain_or_null(e->myerrno) && plain_or_null(e->strerror) &&
               plain_or_null(e->filename) && plain_or_null(e->filename2);
    }
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_SyntaxError)) {
        PySyntaxErrorObject *e = (PySyntaxErrorObject *)exc;
        return plain_or_null(e->msg) && plain_or_null(e->filename) && plain_or_null(e->lineno);
    }
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_ImportError))
        return plain_or_null(((PyImportErrorObject *)exc)->msg);
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_UnicodeError)) {
        PyUnicodeErrorObject *e = (PyUnicodeErrorObject *)exc;
        return plain_or_null(e->encoding) && plain_or_null(e->object) && plain_or_null(e->reason);
    }
    /* Other static types with their own __str__ (KeyError: repr of its one
     * argument, BaseExceptionGroup: its str message): plain args suffice. */
    return true;
}

/* Pickling errors name the object they refused by its repr ("Can't pickle
 * <repr>: attribute lookup f on m failed", "can't pickle 'T' object: <repr>"):
 * text a user's __repr__ wrote, possibly a value.  The pickler called it, not
 * sertrace, but the trace must not keep it: the repr part becomes "…" (U+2026) and
 * the reason, which names code (modules, attributes), stays.  The repr may
 * itself hold ": ", the reasons never do: the cut is at the last one. */
static PyObject *without_object_repr(PyObject *msg)
{
    static const char lead[] = "Can't pickle ", lower[] = "can't pickle '";
    static const char tail[] = "' object: ";
    const char *s, *cut;
    Py_ssize_t len;

    if (msg == NULL || (s = PyUnicode_AsUTF8AndSize(msg, &len)) == NULL)
        return msg;
    if (strncmp(s, lead, sizeof lead - 1) == 0 &&
        strncmp(s, "Can't pickle local object", 25) != 0) {
        for (cut = NULL; (s = strstr(s, ": ")) != NULL; s += 2)
            cut = s;
        if (cut == NULL)
            return msg;
        Py_SETREF(msg, PyUnicode_FromFormat("Can't pickle %s%s", "\u2026", cut));
    } else if (strncmp(s, lower, sizeof lower - 1) == 0 && (cut = strstr(s, tail)) != NULL) {
        Py_SETREF(msg, PyUnicode_FromStringAndSize(s, cut - s + (Py_ssize_t)sizeof tail - 3));
    }
    return msg;
}

PyObject *od_exception_message(PyObject *exc)
{
    PyTypeObject *t;
    bool builtin;
    PyObject *name, *res, *args;

    if (exc == NULL || !PyExceptionInstance_Check(exc))
        return NULL;
    t = Py_TYPE(exc);
    /* A static type of the builtins module (OSError, KeyError ...), or one
     * whose __str__ is BaseException's (pickle.PicklingError, a user class
     * that does not define __str__). */
    builtin = (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE) && strchr(t->tp_name, '.') == NULL) ||
              t->tp_str == ((PyTypeObject *)PyExc_BaseException)->tp_str;
    if (builtin && builtin_str_is_safe(exc))
        return without_object_repr(PyObject_Str(exc));
    name = od_type_name(t);
    if (name == NULL)
        return NULL;
    args = ((PyBaseExceptionObject *)exc)->args;
    if (all_args(exc, is_exact_str) && PyTuple_GET_SIZE(args) > 0) {
        /* BaseException.__str__'s text of all-str args: no user code. */
        if (PyTuple_GET_SIZE(args) == 1)
            res = PyUnicode_FromFormat("<%U>: %U", name, PyTuple_GET_ITEM(args, 0));
        else
            res = PyUnicode_FromFormat("<%U>: %R", name, args);
    } else {
        res = PyUnicode_FromFormat("<%U>", name);
    }
    Py_DECREF(name);
    return res;
}
