/* reduce.c -- objects pickled through the reduce protocol.
 *
 * Everything that is no built-in container, str, bytes or number ends
 * here.  Where the reduce value comes from, in the order observed on the
 * reference pickler (and documented in the pickle module's "Pickling Class
 * Instances" and copyreg pages): the pickler's reducer_override (unless it
 * returns NotImplemented); classes and plain functions by name (names.c);
 * the pickler's dispatch_table, else copyreg.dispatch_table, keyed by the
 * exact type; other classes (metaclass instances) by name;
 * obj.__reduce_ex__(protocol); obj.__reduce__().  A str value means "pickle
 * me by that name"; a tuple is (callable, args[, state[, listitems[,
 * dictitems[, state_setter]]]]).
 *
 * How a reduce tuple is written (pickletools' opcode docs, PEP 307 for
 * NEWOBJ, PEP 3154 for NEWOBJ_EX, the 3.8 docs for state_setter):
 *   - a callable named __newobj__ / __newobj_ex__ (copyreg's) becomes
 *     NEWOBJ / NEWOBJ_EX from protocol 2 / 4 (NEWOBJ_EX below 4 as
 *     functools.partial(cls.__new__, cls, *args, **kwargs) applied to ());
 *     otherwise callable, args, REDUCE;
 *   - then the object is memoized, unless writing its arguments already
 *     memoized it (a recursive reduce: POP and GET instead, and the rest
 *     is skipped);
 *   - listitems and dictitems as APPENDS / SETITEMS batches (batch.c);
 *   - state, BUILD; or with a state setter: setter, obj, state, TUPLE2,
 *     REDUCE, POP.
 * The validation messages were taken from the exceptions pickle.dumps
 * raises for malformed reduce values (tests/pickle/test_pickler_errors.py,
 * pt_hostile.py compare them).
 */
#include "pickler.h"

/* obj.__class__, new reference.  When the type's getattr is the generic
 * one and the attribute resolves to object's own __class__ descriptor (a
 * data descriptor, so the instance dict cannot shadow it), the answer is
 * type(obj) and no lookup is needed; anything else (a __class__ property,
 * __getattr__ / __getattribute__ hooks, proxies) goes through getattr. */
static PyObject *class_of(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    int plain = type->tp_getattro == PyObject_GenericGetAttr && G.class_descr != NULL &&
                _PyType_Lookup(type, G.s_class) == G.class_descr;
    return plain ? Py_NewRef((PyObject *)type) : PyObject_GetAttr(obj, G.s_class);
}

/* The fields of a reduce tuple; borrowed, NULL when absent or None
 * (callable and args are always present). */
typedef struct reduce_parts {
    PyObject *callable, *args, *state, *listitems, *dictitems, *state_setter;
} reduce_parts;

static PyObject *optional_item(PyObject *tuple, Py_ssize_t i)
{
    if (i >= PyTuple_GET_SIZE(tuple))
        return NULL;
    PyObject *item = PyTuple_GET_ITEM(tuple, i);
    return item == Py_None ? NULL : item;
}

static int unpack_reduce(PyObject *value, reduce_parts *r)
{
    Py_ssize_t n = PyTuple_Check(value) ? PyTuple_GET_SIZE(value) : -1;
    if (n < 2 || n > 6) {
        PyErr_SetString(G.PicklingError,
                        "tuple returned by __reduce__ must contain 2 through 6 elements");
        return -1;
    }
    r->callable = PyTuple_GET_ITEM(value, 0);
    r->args = PyTuple_GET_ITEM(value, 1);
    r->state = optional_item(value, 2);
    r->listitems = optional_item(value, 3);
    r->dictitems = optional_item(value, 4);
    r->state_setter = optional_item(value, 5);
    if (!PyCallable_Check(r->callable)) {
        PyErr_SetString(G.PicklingError,
                        "first item of the tuple returned by __reduce__ must be callable");
        return -1;
    }
    if (!PyTuple_Check(r->args)) {
        PyErr_SetString(G.PicklingError,
                        "second item of the tuple returned by __reduce__ must be a tuple");
        return -1;
    }
    if (r->listitems != NULL && !PyIter_Check(r->listitems)) {
        PyErr_Format(G.PicklingError,
                     "fourth element of the tuple returned by __reduce__ must be an iterator, "
                     "not %s",
                     Py_TYPE(r->listitems)->tp_name);
        return -1;
    }
    if (r->dictitems != NULL && !PyIter_Check(r->dictitems)) {
        PyErr_Format(G.PicklingError,
                     "fifth element of the tuple returned by __reduce__ must be an iterator, "
                     "not %s",
                     Py_TYPE(r->dictitems)->tp_name);
        return -1;
    }
    if (r->state_setter != NULL && !PyCallable_Check(r->state_setter)) {
        PyErr_Format(G.PicklingError,
                     "sixth element of the tuple returned by __reduce__ must be a function, "
                     "not %s",
                     Py_TYPE(r->state_setter)->tp_name);
        return -1;
    }
    return 0;
}

enum construction { BY_REDUCE, BY_NEWOBJ, BY_NEWOBJ_EX };

/* Protocol >= 2: copyreg's __newobj__ / __newobj_ex__ (or anything of that
 * __name__) asks for NEWOBJ / NEWOBJ_EX. */
static int construction_of(pickler *p, PyObject *callable, int *how)
{
    PyObject *name;
    *how = BY_REDUCE;
    if (p->proto < 2)
        return 0;
    if (Py_TYPE(callable) == &PyFunction_Type) {
        /* What getattr(f, '__name__') returns for an exact function (a
         * data descriptor of a static type reading func_name), read
         * without the lookup: copyreg.__newobj__ comes with every
         * instance. */
        name = Py_NewRef(((PyFunctionObject *)callable)->func_name);
    } else if (lookup_attr(callable, G.s_name, &name) < 0) {
        return -1;
    }
    if (name != NULL && PyUnicode_Check(name)) {
        /* The interned names first (copyreg's functions carry them):
         * equal text in another object is the rare case. */
        if (name == G.s_newobj)
            *how = BY_NEWOBJ;
        else if (name == G.s_newobj_ex || PyUnicode_Compare(name, G.s_newobj_ex) == 0)
            *how = BY_NEWOBJ_EX;
        else if (PyUnicode_Compare(name, G.s_newobj) == 0)
            *how = BY_NEWOBJ;
    }
    Py_XDECREF(name);
    return PyErr_Occurred() ? -1 : 0;
}

/* cls, args[1:], NEWOBJ. */
static int write_newobj(pickler *p, PyObject *obj, PyObject *args)
{
    if (PyTuple_GET_SIZE(args) == 0) {
        PyErr_SetString(G.PicklingError, "__newobj__ arglist is empty");
        return -1;
    }
    PyObject *cls = PyTuple_GET_ITEM(args, 0);
    if (!PyType_Check(cls)) {
        PyErr_SetString(G.PicklingError, "args[0] from __newobj__ args is not a type");
        return -1;
    }
    if (obj != NULL) {
        PyObject *actual = class_of(obj);
        if (actual == NULL)
            return -1;
        Py_DECREF(actual);
        if (actual != cls) {
            PyErr_SetString(G.PicklingError, "args[0] from __newobj__ args has the wrong class");
            return -1;
        }
    }
    if (save_child_of(p, cls, EDGE_CLASS, obj) < 0)
        return -1;
    PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (rest == NULL)
        return -1;
    int status = save_child_of(p, rest, EDGE_NEW_ARGS, obj);
    Py_DECREF(rest);
    return status < 0 ? -1 : output_write_byte(p, (char)OP_NEWOBJ);
}

/* Below protocol 4: functools.partial(cls.__new__, cls, *args, **kwargs),
 * (), REDUCE. */
static int write_partial_new(pickler *p, PyObject *obj, PyObject *cls, PyObject *args,
                             PyObject *kwargs)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    PyObject *partial_args = PyTuple_New(nargs + 2), *constructor = NULL, *no_args = NULL;
    int status = -1;
    if (partial_args == NULL)
        return -1;
    PyObject *cls_new = PyObject_GetAttr(cls, G.s_new);
    if (cls_new == NULL)
        goto done;
    PyTuple_SET_ITEM(partial_args, 0, cls_new);
    PyTuple_SET_ITEM(partial_args, 1, Py_NewRef(cls));
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(partial_args, i + 2, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    constructor = PyObject_Call(G.partial, partial_args, kwargs);
    if (constructor == NULL || (no_args = PyTuple_New(0)) == NULL)
        goto done;
    if (save_child_of(p, constructor, EDGE_RECONSTRUCTOR, obj) == 0 &&
        save_child_of(p, no_args, EDGE_RECONSTRUCTOR_ARGS, obj) == 0)
        status = output_write_byte(p, OP_REDUCE);
done:
    Py_DECREF(partial_args);
    Py_XDECREF(constructor);
    Py_XDECREF(no_args);
    return status;
}

/* (cls, args, kwargs): cls, args, kwargs, NEWOBJ_EX. */
static int write_newobj_ex(pickler *p, PyObject *obj, PyObject *triple)
{
    if (PyTuple_GET_SIZE(triple) != 3) {
        PyErr_Format(G.PicklingError,
                     "length of the NEWOBJ_EX argument tuple must be exactly 3, not %zd",
                     PyTuple_GET_SIZE(triple));
        return -1;
    }
    PyObject *cls = PyTuple_GET_ITEM(triple, 0), *args = PyTuple_GET_ITEM(triple, 1),
             *kwargs = PyTuple_GET_ITEM(triple, 2);
    const char *wrong = NULL, *expected = NULL;
    PyObject *culprit = NULL;
    if (!PyType_Check(cls))
        wrong = "first", expected = "a class", culprit = cls;
    else if (!PyTuple_Check(args))
        wrong = "second", expected = "a tuple", culprit = args;
    else if (!PyDict_Check(kwargs))
        wrong = "third", expected = "a dict", culprit = kwargs;
    if (wrong != NULL) {
        PyErr_Format(G.PicklingError,
                     "%s item from NEWOBJ_EX argument tuple must be %s, not %.200s", wrong,
                     expected, Py_TYPE(culprit)->tp_name);
        return -1;
    }
    if (p->proto < 4)
        return write_partial_new(p, obj, cls, args, kwargs);
    if (save_child_of(p, cls, EDGE_CLASS, obj) < 0 ||
        save_child_of(p, args, EDGE_NEW_ARGS, obj) < 0 ||
        save_child_of(p, kwargs, EDGE_NEW_ARGS, obj) < 0)
        return -1;
    return output_write_byte(p, (char)OP_NEWOBJ_EX);
}

/* listitems / dictitems: parts of the object's node in a traced dump. */
typedef struct items_job {
    PyObject *iter, *obj;
    int pairs;
} items_job;

static int write_items(pickler *p, void *arg)
{
    const items_job *job = arg;
    return job->pairs ? batch_setitems(p, job->iter, job->obj)
                      : batch_appends(p, job->iter, job->obj);
}

static int write_state(pickler *p, PyObject *obj, const reduce_parts *r)
{
    if (r->state_setter == NULL) {
        if (save_child_of(p, r->state, EDGE_STATE, obj) < 0)
            return -1;
        return output_write_byte(p, OP_BUILD);
    }
    /* state_setter(obj, state) applied and dropped: stack-neutral. */
    if (save_child_of(p, r->state_setter, EDGE_STATE_SETTER, obj) < 0 ||
        save_child_of(p, obj, EDGE_PLAIN, obj) < 0 ||
        save_child_of(p, r->state, EDGE_STATE, obj) < 0)
        return -1;
    static const char apply_and_drop[3] = {(char)OP_TUPLE2, OP_REDUCE, OP_POP};
    return output_write(p, apply_and_drop, 3);
}

int save_reduce_value(pickler *p, PyObject *value, PyObject *obj)
{
    reduce_parts r;
    int how, status;

    if (unpack_reduce(value, &r) < 0 || construction_of(p, r.callable, &how) < 0)
        return -1;
    if (how == BY_NEWOBJ_EX)
        status = write_newobj_ex(p, obj, r.args);
    else if (how == BY_NEWOBJ)
        status = write_newobj(p, obj, r.args);
    else if (save_child_of(p, r.callable, EDGE_RECONSTRUCTOR, obj) < 0 ||
             save_child_of(p, r.args, EDGE_RECONSTRUCTOR_ARGS, obj) < 0)
        status = -1;
    else
        status = output_write_byte(p, OP_REDUCE);
    if (status < 0)
        return -1;

    if (obj != NULL) {
        if (memo_lookup(&p->memo, obj) != NULL) {
            /* Its arguments referred back to it and memoized it: drop the
             * copy just built and use the memoized one. */
            if (output_write_byte(p, OP_POP) < 0)
                return -1;
            return memo_get(p, obj);
        }
        if (memo_put(p, obj, NULL) < 0)
            return -1;
    }
    if (r.listitems != NULL) {
        items_job job = {r.listitems, obj, 0};
        if (save_part(p, PART_ITEMS, obj, write_items, &job) < 0)
            return -1;
    }
    if (r.dictitems != NULL) {
        items_job job = {r.dictitems, obj, 1};
        if (save_part(p, PART_ITEMS, obj, write_items, &job) < 0)
            return -1;
    }
    if (r.state != NULL)
        return write_state(p, obj, &r);
    return 0;
}

/* type(None), type(...), type(NotImplemented) have no importable name:
 * they are written as type(singleton). */
static int save_class(pickler *p, PyObject *cls)
{
    PyObject *singleton = cls == (PyObject *)Py_TYPE(Py_None)             ? Py_None
                          : cls == (PyObject *)Py_TYPE(Py_Ellipsis)       ? Py_Ellipsis
                          : cls == (PyObject *)Py_TYPE(Py_NotImplemented) ? Py_NotImplemented
                                                                          : NULL;
    if (singleton == NULL)
        return save_global(p, cls, NULL);
    PyObject *value = Py_BuildValue("(O(O))", (PyObject *)&PyType_Type, singleton);
    if (value == NULL)
        return -1;
    int status = save_reduce_value(p, value, cls);
    Py_DECREF(value);
    return status;
}

/* The reducer registered for obj's exact type: 1 and the reduce value in
 * *value (NULL + exception when the reducer raised), 0 when none is. */
static int reduce_by_table(pickler *p, PyObject *obj, PyObject **value)
{
    PyObject *type = (PyObject *)Py_TYPE(obj), *reducer;
    if (p->dispatch_table != NULL) {
        reducer = PyObject_GetItem(p->dispatch_table, type);
        if (reducer == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError))
                return -1;
            PyErr_Clear();
            return 0;
        }
    } else {
        reducer = PyDict_GetItemWithError(G.dispatch_table, type);
        if (reducer == NULL)
            return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(reducer);
    }
    *value = PyObject_CallOneArg(reducer, obj);
    Py_DECREF(reducer);
    return 1;
}

/* obj.__reduce_ex__(protocol), else obj.__reduce__().
 *
 * When the attribute lookup is the generic one and the type has a
 * __reduce_ex__ (every class inherits object's), the lookup cannot miss:
 * the method is called through PyObject_VectorcallMethod(), which finds it
 * as getattr would (instance dict, then the type's descriptors) but calls
 * a plain method with obj as its first argument instead of making a bound
 * method first (an allocation and a free per reduced object; instances on
 * 3.12.1: PyCMethod_New + meth_dealloc were 2.3% of sertrace.dumps'
 * instructions). */
static PyObject *reduce_by_method(pickler *p, PyObject *obj)
{
    PyObject *method, *value = NULL;
    if (Py_TYPE(obj)->tp_getattro == PyObject_GenericGetAttr &&
        _PyType_Lookup(Py_TYPE(obj), G.s_reduce_ex) != NULL) {
        PyObject *args[2] = {obj, PyLong_FromLong(p->proto)};
        if (args[1] == NULL)
            return NULL;
        value = PyObject_VectorcallMethod(G.s_reduce_ex, args, 2, NULL);
        Py_DECREF(args[1]);
        return value;
    }
    int found = lookup_attr(obj, G.s_reduce_ex, &method);
    if (found > 0) {
        PyObject *proto = PyLong_FromLong(p->proto);
        if (proto != NULL)
            value = PyObject_CallOneArg(method, proto);
        Py_XDECREF(proto);
        Py_DECREF(method);
        return value;
    }
    if (found == 0 && (found = lookup_attr(obj, G.s_reduce, &method)) > 0) {
        value = PyObject_CallNoArgs(method);
        Py_DECREF(method);
        return value;
    }
    if (found == 0)
        PyErr_Format(G.PicklingError, "can't pickle '%.200s' object: %R", Py_TYPE(obj)->tp_name,
                     obj);
    return NULL;
}

/* A reduce value in hand: a name or a tuple. */
static int save_reduce_result(pickler *p, PyObject *obj, PyObject *value)
{
    if (PyUnicode_Check(value))
        return save_global(p, obj, value);
    if (!PyTuple_Check(value)) {
        PyErr_SetString(G.PicklingError, "__reduce__ must return a string or tuple");
        return SAVE_FAILED_REDUCED;
    }
    return save_reduce_value(p, value, obj) < 0 ? SAVE_FAILED_REDUCED : 0;
}

/* Where an object's reduce value comes from: a chain of rules, asked in
 * the reference pickler's order (pickle documentation: reducer_override
 * first, then the dispatch table, then __reduce_ex__ / __reduce__; classes
 * and functions are globals).  Each rule answers -1 (error set), 0 (not
 * mine: ask the next), or how to save obj, with *value set for
 * SAVE_BY_VALUE. */
enum { SAVE_BY_VALUE = 1, SAVE_AS_CLASS, SAVE_AS_GLOBAL };

typedef int (*reduce_rule)(pickler *, PyObject *, PyObject **);

static int rule_override(pickler *p, PyObject *obj, PyObject **value)
{
    if (p->reducer_override == NULL)
        return 0;
    *value = PyObject_CallOneArg(p->reducer_override, obj);
    if (*value != Py_NotImplemented)
        return *value == NULL ? -1 : SAVE_BY_VALUE;
    Py_CLEAR(*value);
    return 0;
}

static int rule_builtin_global(pickler *p, PyObject *obj, PyObject **value)
{
    (void)p, (void)value;
    return Py_IS_TYPE(obj, &PyType_Type)       ? SAVE_AS_CLASS
           : Py_IS_TYPE(obj, &PyFunction_Type) ? SAVE_AS_GLOBAL
                                               : 0;
}

static int rule_table(pickler *p, PyObject *obj, PyObject **value)
{
    int found = reduce_by_table(p, obj, value);
    return found <= 0 ? found : *value == NULL ? -1 : SAVE_BY_VALUE;
}

static int rule_metaclass(pickler *p, PyObject *obj, PyObject **value)
{
    (void)p, (void)value;
    return PyType_IsSubtype(Py_TYPE(obj), &PyType_Type) ? SAVE_AS_GLOBAL : 0;
}

static int rule_method(pickler *p, PyObject *obj, PyObject **value)
{
    *value = reduce_by_method(p, obj);
    return *value == NULL ? -1 : SAVE_BY_VALUE;
}

static const reduce_rule REDUCE_RULES[] = {rule_override, rule_builtin_global, rule_table,
                                           rule_metaclass, rule_method};

int save_reduced(pickler *p, PyObject *obj)
{
    PyObject *value = NULL;
    int how = 0;
    for (size_t i = 0; how == 0; i++)
        how = REDUCE_RULES[i](p, obj, &value);
    switch (how) {
    case SAVE_AS_CLASS:
        return save_class(p, obj);
    case SAVE_AS_GLOBAL:
        return save_global(p, obj, NULL);
    case SAVE_BY_VALUE:
        how = save_reduce_result(p, obj, value);
        Py_DECREF(value);
        return how;
    default:
        return -1;
    }
}
