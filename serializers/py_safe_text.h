/* py_safe_text.h -- text about Python objects and exceptions that runs no
 * user code, shared by the two Python serializers (the C pickler's
 * pickle/trace.c and the dill hook's pyhook/errors.c), so a failure reads
 * the same in both.  Static functions, included by each extension module
 * (each is its own shared object).  Used on the error path only.
 *
 * `type_name` is the caller's qualified-name builder (a new reference or
 * NULL with an exception set); both modules give the same names. */
#ifndef SERTRACE_PY_SAFE_TEXT_H
#define SERTRACE_PY_SAFE_TEXT_H

#include <Python.h>
#include <stdbool.h>
#include <string.h>

typedef PyObject *(*py_type_name_fn)(PyTypeObject *type);

/* str/int/float/bytes/bool/None: repr() runs no user code. */
static inline bool py_is_repr_atom(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyBytes_Type || t == &PyBool_Type || o == Py_None;
}

/* A repr that runs no user code: the atoms above exactly, tuples of them;
 * anything else "<TypeName>".  NULL on failure. */
static inline PyObject *py_safe_repr(PyObject *obj, py_type_name_fn type_name)
{
    if (py_is_repr_atom(obj))
        return PyObject_Repr(obj);
    if (PyTuple_CheckExact(obj)) {
        bool safe = true;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj) && safe; i++)
            safe = py_is_repr_atom(PyTuple_GET_ITEM(obj, i));
        if (safe)
            return PyObject_Repr(obj);
    }
    PyObject *name = type_name(Py_TYPE(obj));
    if (name == NULL)
        return NULL;
    PyObject *res = PyUnicode_FromFormat("<%U>", name);
    Py_DECREF(name);
    return res;
}

/* An object whose str() and repr() run no user code and say nothing beyond
 * what pickle's own messages carry: exact str, int, float, bool, None. */
static inline bool py_is_plain_atom(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return o == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyBool_Type;
}

static inline bool py_is_exact_str(PyObject *o)
{
    return PyUnicode_CheckExact(o);
}

static inline bool py_all_args(PyObject *exc, bool (*ok)(PyObject *))
{
    PyObject *args = ((PyBaseExceptionObject *)exc)->args;
    if (args == NULL || !PyTuple_CheckExact(args))
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        if (!ok(PyTuple_GET_ITEM(args, i)))
            return false;
    return true;
}

static inline bool py_plain_or_null(PyObject *o)
{
    return o == NULL || py_is_plain_atom(o);
}

/* Whether str(exc) of a built-in exception type runs no user code: its
 * args are plain atoms, and so are the fields its own __str__ reads
 * (OSError's filenames, SyntaxError's, ImportError's and UnicodeError's). */
static inline bool py_builtin_str_is_safe(PyObject *exc)
{
    if (!py_all_args(exc, py_is_plain_atom))
        return false;
    if (Py_TYPE(exc)->tp_str == ((PyTypeObject *)PyExc_BaseException)->tp_str)
        return true;
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_OSError)) {
        PyOSErrorObject *e = (PyOSErrorObject *)exc;
        return py_plain_or_null(e->myerrno) && py_plain_or_null(e->strerror) &&
               py_plain_or_null(e->filename) && py_plain_or_null(e->filename2);
    }
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_SyntaxError)) {
        PySyntaxErrorObject *e = (PySyntaxErrorObject *)exc;
        return py_plain_or_null(e->msg) && py_plain_or_null(e->filename) &&
               py_plain_or_null(e->lineno);
    }
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_ImportError))
        return py_plain_or_null(((PyImportErrorObject *)exc)->msg);
    if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_UnicodeError)) {
        PyUnicodeErrorObject *e = (PyUnicodeErrorObject *)exc;
        return py_plain_or_null(e->encoding) && py_plain_or_null(e->object) &&
               py_plain_or_null(e->reason);
    }
    /* Other static types with their own __str__ (KeyError: repr of its one
     * argument, BaseExceptionGroup: its str message): plain args suffice. */
    return true;
}

/* The text recorded for an exception.  str(exc) only for built-in types:
 * a static type of the builtins module (OSError, KeyError ...), or one
 * whose __str__ is BaseException's (pickle.PicklingError, a user class that
 * does not define __str__), and only when that str runs no user code
 * ("nope", "cannot pickle 'generator' object").  Anything else:
 * "<module.Type>", plus ": " and str(exc)'s text when all its args are str
 * ("<app.QuotaError>: disk quota", never a user __str__). */
static inline PyObject *py_exception_message(PyObject *exc, py_type_name_fn type_name)
{
    PyTypeObject *t = Py_TYPE(exc);
    bool builtin = (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE) &&
                    strchr(t->tp_name, '.') == NULL) ||
                   t->tp_str == ((PyTypeObject *)PyExc_BaseException)->tp_str;
    PyObject *name, *res, *args;

    if (!PyExceptionInstance_Check(exc))
        return NULL;
    if (builtin && py_builtin_str_is_safe(exc))
        return PyObject_Str(exc);
    name = type_name(t);
    if (name == NULL)
        return NULL;
    args = ((PyBaseExceptionObject *)exc)->args;
    if (py_all_args(exc, py_is_exact_str) && PyTuple_GET_SIZE(args) > 0) {
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

#endif /* SERTRACE_PY_SAFE_TEXT_H */
