/* module.c -- the Python surface of sertrace's pickler: sertrace._native.
 *
 * Defines the Pickler type (subclassable, with dump, clear_memo, memo,
 * persistent_id, dispatch_table, bin, fast, and reducer_override /
 * persistent_id picked up from subclasses), the module functions dump() and
 * dumps(), and note().  Signatures and behaviour are those of the running
 * CPython's _pickle (3.11-3.13), learned from its documentation, its tests
 * and what it does, not from its source (serializers/pickle/README.md,
 * "Where the knowledge comes from"); PickleError and PicklingError ARE
 * pickle's classes, so existing `except pickle.PicklingError` code keeps
 * working.  The package
 * (python/sertrace/__init__.py) re-exports everything.
 */
#include "pickler.h"
#include "structmember.h"

pickle_globals G;

/* The Pickler type, made by the module's init (NULL before it and after
 * the state is released at interpreter finalization: module_free()). */
static PyTypeObject *pickler_type;

/* 0, or -1 with RuntimeError when the module's state was released (a
 * Pickler kept past the interpreter's finalization of the module). */
static int state_ready(void)
{
    if (pickler_type != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "sertrace._native was finalized");
    return -1;
}

/* ---- object lifetime ------------------------------------------------- */

static pickler *pickler_alloc(PyTypeObject *type)
{
    pickler *p = (pickler *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->frame_start = -1;
    p->max_output_len = PICKLE_WRITE_BUF_SIZE;
    p->output_buffer = PyBytes_FromStringAndSize(NULL, p->max_output_len);
    output_sync(p);
    if (p->output_buffer == NULL || memo_init(&p->memo) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    p->memo_ready = 1;
    p->proto = PICKLE_DEFAULT_PROTOCOL;
    p->bin = 1;
    return p;
}

static PyObject *pickler_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    if (state_ready() < 0)
        return NULL;
    return (PyObject *)pickler_alloc(type);
}

/* Drop every reference the pickler holds (the GC breaks cycles through
 * here; __init__ on a used pickler starts from here too, so attributes set
 * before a second __init__ are gone, as with pickle's C Pickler). */
static int pickler_tp_clear(pickler *p)
{
    PyObject **held[] = {
        &p->output_buffer,   &p->write,     &p->pers_func, &p->dispatch_table, &p->reducer_override,
        &p->buffer_callback, &p->fast_memo, &p->err_type,  &p->label_keys};
    p->pers_func_self = NULL; /* borrowed: p itself */
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        Py_CLEAR(*held[i]);
    output_sync(p);
    memo_clear(&p->memo);
    return 0;
}

/* Everything a pickler owns, for its deallocation, once the GC no longer
 * sees it: the error path of a traced dump, the memo (freed in one pass,
 * before tp_clear, which would empty it slot by slot) and every reference. */
static void pickler_release(pickler *p)
{
    PyObject_GC_UnTrack(p);
    trace_reset_error(p);
    PyMem_Free(p->path);
    p->path = NULL;
    memo_free(&p->memo);
    pickler_tp_clear(p);
}

/* The end of an instance of one of this module's heap types: its memory,
 * then the reference to its type that every instance holds. */
static void heap_instance_free(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static void pickler_tp_dealloc(pickler *p)
{
    pickler_release(p);
    heap_instance_free((PyObject *)p);
}

static int pickler_tp_traverse(pickler *p, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(p));
    Py_VISIT(p->write);
    Py_VISIT(p->pers_func);
    Py_VISIT(p->dispatch_table);
    Py_VISIT(p->fast_memo);
    Py_VISIT(p->reducer_override);
    Py_VISIT(p->buffer_callback);
    if (p->memo.table != NULL) {
        for (size_t i = 0; i <= p->memo.mask; i++)
            Py_VISIT(p->memo.table[i].key);
    }
    return 0;
}

/* The persistent_id in effect: whatever getattr(self, "persistent_id")
 * gives at __init__ (the attribute set on the instance, or a subclass's
 * method).  A method bound to self is kept as (function, self) with self
 * borrowed, so that the pickler does not keep itself alive. */
#if PY_VERSION_HEX >= 0x030D0000
static PyObject *pickler_persistent_id(pickler *p, PyObject *obj);
#endif

static int find_persistent_id(pickler *p)
{
    PyObject *found;
    if (lookup_attr((PyObject *)p, G.s_persistent_id, &found) < 0)
        return -1;
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13: Pickler has a persistent_id method returning None (so that
     * super().persistent_id(obj) works); found un-overridden, it means "no
     * persistent ids", and is not kept (it would be a cycle to self). */
    if (found != NULL && PyCFunction_Check(found) && PyCFunction_GET_SELF(found) == (PyObject *)p &&
        PyCFunction_GET_FUNCTION(found) == (PyCFunction)pickler_persistent_id)
        Py_CLEAR(found);
#endif
    PyObject *self = NULL;
    if (found != NULL && PyMethod_Check(found) && PyMethod_GET_SELF(found) == (PyObject *)p) {
        PyObject *function = Py_NewRef(PyMethod_GET_FUNCTION(found));
        Py_SETREF(found, function);
        self = (PyObject *)p;
    }
    Py_XSETREF(p->pers_func, found);
    p->pers_func_self = self;
    return 0;
}

/* dispatch_table as set on the instance (before or after __init__) or on
 * the class; looked up before anything is dropped, so an attribute set
 * before Pickler.__init__ is kept. */
static int find_dispatch_table(pickler *p)
{
    PyObject *found;
    if (lookup_attr((PyObject *)p, G.s_dispatch_table, &found) < 0)
        return -1;
    Py_XSETREF(p->dispatch_table, found);
    return 0;
}

static int pickler_tp_init(pickler *p, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"file", "protocol", "fix_imports", "buffer_callback", NULL};
    PyObject *file, *protocol = Py_None, *buffer_callback = Py_None;
    int fix_imports = 1;

    if (state_ready() < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "O|OpO:Pickler", kwlist, &file, &protocol,
                                     &fix_imports, &buffer_callback))
        return -1;
    if (p->dumping) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Pickler.__init__() called while this Pickler is dumping");
        return -1;
    }
    /* A pickler used before starts from nothing: what was set on it
     * before this second __init__ is dropped (as with pickle's). */
    if (p->write != NULL)
        (void)pickler_tp_clear(p);
    if (pickler_configure(p, protocol, fix_imports, file, buffer_callback) < 0 ||
        output_start(p) < 0)
        return -1;
    p->fast = 0;
    p->fast_nesting = 0;
    Py_CLEAR(p->fast_memo);
    if (find_persistent_id(p) < 0 || find_dispatch_table(p) < 0)
        return -1;
    return 0;
}

/* ---- methods --------------------------------------------------------- */

static PyObject *pickler_dump_method(pickler *p, PyObject *obj)
{
    if (state_ready() < 0)
        return NULL;
    if (p->write == NULL) {
        PyErr_Format(G.PicklingError, "Pickler.__init__() was not called by %s.__init__()",
                     Py_TYPE(p)->tp_name);
        return NULL;
    }
    /* C pickle crashes when a __reduce__ re-enters the same Pickler's
     * dump(); refuse instead. */
    if (p->dumping) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Pickler.dump() called while this Pickler is already dumping");
        return NULL;
    }
    int status = -1;
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13 reads persistent_id at each dump(), not only in __init__: a
     * method changed or deleted on the class, or set on a subclass
     * instance, after __init__ takes effect. */
    if (find_persistent_id(p) < 0)
        return NULL;
#endif
    p->dumping = 1;
    if (output_reset(p) == 0 && pickler_dump(p, obj) == 0)
        status = 0;
    p->dumping = 0;
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *pickler_clear_memo(pickler *p, PyObject *unused)
{
    (void)unused;
    memo_clear(&p->memo);
    Py_RETURN_NONE;
}

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13's Pickler.persistent_id(obj): the default, no persistent id. */
static PyObject *pickler_persistent_id(pickler *p, PyObject *obj)
{
    (void)p;
    (void)obj;
    Py_RETURN_NONE;
}
#endif

#if PY_VERSION_HEX >= 0x030C0000
/* 3.12+: Pickler.dump(obj, /) takes its argument as a vectorcall, and a bad
 * call reads as the reference's (observed on 3.12 and 3.13):
 * "dump() takes at most 1 argument (2 given)" (positional and keyword
 * arguments counted together; "1 keyword argument" when none is
 * positional), else "dump() takes exactly 1 positional argument (0 given)". */
static PyObject *pickler_dump_vectorcall(pickler *p, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs == 1 && nkw == 0)
        return pickler_dump_method(p, args[0]);
    if (nargs + nkw > 1)
        PyErr_Format(PyExc_TypeError, "dump() takes at most 1 %sargument (%zd given)",
                     nargs == 0 ? "keyword " : "", nargs + nkw);
    else
        PyErr_Format(PyExc_TypeError, "dump() takes exactly 1 positional argument (%zd given)",
                     nargs);
    return NULL;
}
#endif

static PyMethodDef pickler_methods[] = {
#if PY_VERSION_HEX >= 0x030D0000
    {"persistent_id", (PyCFunction)pickler_persistent_id, METH_O,
     PyDoc_STR("persistent_id($self, obj, /)\n--\n\n")},
#endif
#if PY_VERSION_HEX >= 0x030C0000
    {"dump", (PyCFunction)(void (*)(void))pickler_dump_vectorcall, METH_FASTCALL | METH_KEYWORDS,
#else
    {"dump", (PyCFunction)pickler_dump_method, METH_O,
#endif
     PyDoc_STR("dump($self, obj, /)\n--\n\n"
               "Write a pickled representation of the given object to the open file.")},
    {"clear_memo", (PyCFunction)pickler_clear_memo, METH_NOARGS,
     PyDoc_STR("clear_memo($self, /)\n--\n\nClears the pickler's \"memo\".")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pickler_members[] = {
    {"bin", T_INT, offsetof(pickler, bin), 0, NULL},
    {"fast", T_INT, offsetof(pickler, fast), 0, NULL},
    {"dispatch_table", T_OBJECT_EX, offsetof(pickler, dispatch_table), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* ---- memo proxy ------------------------------------------------------- */

typedef struct {
    PyObject_HEAD pickler *owner;
} memo_proxy;

/* Both types are heap types (PyType_FromSpec, immutable), as _pickle's are
 * since 3.10: test_pickle's HeapTypesTests (3.12+) checks that the GC
 * tracks them and that they cannot be changed.  Created by the module's
 * init and kept until the interpreter finalizes the module (module_free()). */
static PyTypeObject *memo_proxy_type;

static void memo_proxy_dealloc(memo_proxy *m)
{
    PyObject_GC_UnTrack(m);
    Py_CLEAR(m->owner);
    heap_instance_free((PyObject *)m);
}

static int memo_proxy_traverse(memo_proxy *m, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(m));
    Py_VISIT(m->owner);
    return 0;
}

static PyObject *memo_proxy_copy(memo_proxy *m, PyObject *unused)
{
    (void)unused;
    return memo_as_dict(&m->owner->memo);
}

static PyObject *memo_proxy_clear(memo_proxy *m, PyObject *unused)
{
    (void)unused;
    memo_clear(&m->owner->memo);
    Py_RETURN_NONE;
}

static PyObject *memo_proxy_reduce(memo_proxy *m, PyObject *unused)
{
    (void)unused;
    PyObject *contents = memo_as_dict(&m->owner->memo);
    if (contents == NULL)
        return NULL;
    PyObject *r = Py_BuildValue("(O(N))", (PyObject *)&PyDict_Type, contents);
    return r;
}

static PyMethodDef memo_proxy_methods[] = {
    {"clear", (PyCFunction)memo_proxy_clear, METH_NOARGS, PyDoc_STR("Remove all items from memo.")},
    {"copy", (PyCFunction)memo_proxy_copy, METH_NOARGS,
     PyDoc_STR("Copy the memo to a new object.")},
    {"__reduce__", (PyCFunction)memo_proxy_reduce, METH_NOARGS,
     PyDoc_STR("Implement pickle support.")},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot memo_proxy_slots[] = {
    {Py_tp_dealloc, (void *)memo_proxy_dealloc},
    {Py_tp_hash, (void *)PyObject_HashNotImplemented},
    {Py_tp_traverse, (void *)memo_proxy_traverse},
    {Py_tp_methods, memo_proxy_methods},
    {0, NULL},
};

static PyType_Spec memo_proxy_spec = {
    .name = "sertrace._native.PicklerMemoProxy",
    .basicsize = sizeof(memo_proxy),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = memo_proxy_slots,
};

static PyObject *pickler_get_memo(pickler *p, void *closure)
{
    (void)closure;
    if (state_ready() < 0)
        return NULL;
    /* GC types are tracked by the generic allocator. */
    memo_proxy *m = (memo_proxy *)PyType_GenericAlloc(memo_proxy_type, 0);
    if (m != NULL)
        m->owner = (pickler *)Py_NewRef(p);
    return (PyObject *)m;
}

/* memo_each's visitor (and the dict walk's): one entry into a new table. */
static int load_entry(void *table, PyObject *obj, Py_ssize_t index)
{
    return memo_set((memo_table *)table, obj, index);
}

/* One value of a dict given as a memo: an (index, obj) pair.  Returns obj
 * (borrowed) and sets *index, or NULL with TypeError / the int's error. */
static PyObject *memo_pair(PyObject *pair, Py_ssize_t *index)
{
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "'memo' values must be 2-item tuples");
        return NULL;
    }
    *index = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    return *index == -1 && PyErr_Occurred() ? NULL : PyTuple_GET_ITEM(pair, 1);
}

/* The entries of a dict given as a memo ({any: (index, obj)}: only the
 * values matter), taken from a snapshot of its values, to visit. */
static int dict_entries(PyObject *d, memo_visit visit, void *arg)
{
    PyObject *pairs = PyDict_Values(d);
    int status = pairs != NULL ? 0 : -1;
    for (Py_ssize_t i = 0; status == 0 && i < PyList_GET_SIZE(pairs); i++) {
        Py_ssize_t index;
        PyObject *obj = memo_pair(PyList_GET_ITEM(pairs, i), &index);
        status = obj != NULL ? visit(arg, obj, index) : -1;
    }
    Py_XDECREF(pairs);
    return status;
}

/* `pickler.memo = source`: a new table is loaded from the source (another
 * pickler's memo through its proxy, or a dict as memo.copy() gives) and
 * replaces the current one only when every entry was valid. */
static int pickler_set_memo(pickler *p, PyObject *source, void *closure)
{
    (void)closure;
    const char *refusal = NULL;
    if (source == NULL)
        refusal = "attribute deletion is not supported";
    else if (!Py_IS_TYPE(source, memo_proxy_type) && !PyDict_Check(source))
        refusal = "'memo' attribute must be a PicklerMemoProxy object or dict, not %.200s";
    if (refusal != NULL) {
        PyErr_Format(PyExc_TypeError, refusal, source != NULL ? Py_TYPE(source)->tp_name : "");
        return -1;
    }
    memo_table loaded;
    if (memo_init(&loaded) < 0)
        return -1;
    int status = PyDict_Check(source)
                     ? dict_entries(source, load_entry, &loaded)
                     : memo_each(&((memo_proxy *)source)->owner->memo, load_entry, &loaded);
    if (status == 0) {
        /* Swapped before the old table is freed: a __del__ run by the
         * frees sees the new memo. */
        memo_table old = p->memo;
        p->memo = loaded;
        loaded = old;
    }
    memo_free(&loaded);
    return status;
}

#if PY_VERSION_HEX < 0x030D0000
/* Up to 3.12 persistent_id is a data attribute of every Pickler (3.13 made
 * it a method, above). */
static PyObject *pickler_get_persid(pickler *p, void *closure)
{
    (void)closure;
    if (p->pers_func == NULL) {
        PyErr_SetString(PyExc_AttributeError, "persistent_id");
        return NULL;
    }
    if (p->pers_func_self != NULL)
        return PyMethod_New(p->pers_func, p->pers_func_self);
    Py_INCREF(p->pers_func);
    return p->pers_func;
}

static int pickler_set_persid(pickler *p, PyObject *value, void *closure)
{
    (void)closure;
    const char *refusal = value == NULL ? "attribute deletion is not supported"
                          : !PyCallable_Check(value)
                              ? "persistent_id must be a callable taking one argument"
                              : NULL;
    if (refusal != NULL) {
        PyErr_SetString(PyExc_TypeError, refusal);
        return -1;
    }
    Py_XSETREF(p->pers_func, Py_NewRef(value));
    p->pers_func_self = NULL; /* an explicit callable is called as given */
    return 0;
}
#endif

static PyGetSetDef pickler_getsets[] = {
    {"memo", (getter)pickler_get_memo, (setter)pickler_set_memo, NULL, NULL},
#if PY_VERSION_HEX < 0x030D0000
    {"persistent_id", (getter)pickler_get_persid, (setter)pickler_set_persid, NULL, NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(pickler_doc,
             "Pickler(file, protocol=None, fix_imports=True, buffer_callback=None)\n--\n\n"
             "A byte-identical, traced drop-in for pickle.Pickler (see pickle.Pickler).");

static PyType_Slot pickler_slots[] = {
    {Py_tp_dealloc, (void *)pickler_tp_dealloc},
    {Py_tp_doc, (void *)pickler_doc},
    {Py_tp_traverse, (void *)pickler_tp_traverse},
    {Py_tp_clear, (void *)pickler_tp_clear},
    {Py_tp_methods, pickler_methods},
    {Py_tp_members, pickler_members},
    {Py_tp_getset, pickler_getsets},
    {Py_tp_init, (void *)pickler_tp_init},
    {Py_tp_new, (void *)pickler_tp_new},
    {0, NULL},
};

static PyType_Spec pickler_spec = {
    .name = "sertrace.Pickler",
    .basicsize = sizeof(pickler),
    .flags =
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = pickler_slots,
};

/* ---- module functions ------------------------------------------------ */

/* Arguments of dump()/dumps(), parsed from a vectorcall (METH_FASTCALL |
 * METH_KEYWORDS) like Argument Clinic does for _pickle: the same messages,
 * and, as for _pickle, no recursion-depth check on the call itself (a
 * METH_VARARGS function costs one level, which moves where a deep object
 * hits the recursion limit). */
typedef struct {
    const char *fname;        /* "dumps" */
    const char *const *names; /* all parameter names, NULL-terminated */
    int npositional;          /* parameters that may be positional */
    int nrequired;            /* leading required ones */
} arg_spec;

static int parse_fastcall(const arg_spec *spec, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, PyObject **out)
{
    int nparams = 0;
    while (spec->names[nparams] != NULL)
        nparams++;
    if (nargs > spec->npositional) {
        PyErr_Format(PyExc_TypeError, "%.200s() takes %s %d positional argument%s (%zd given)",
                     spec->fname, spec->nrequired < spec->npositional ? "at most" : "exactly",
                     spec->npositional, spec->npositional == 1 ? "" : "s", nargs);
        return -1;
    }
    for (int i = 0; i < nparams; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keywords must be strings");
            return -1;
        }
        for (int i = 0; i < nparams && found < 0; i++) {
            if (PyUnicode_CompareWithASCIIString(key, spec->names[i]) == 0)
                found = i;
        }
        if (found < 0) {
#if PY_VERSION_HEX >= 0x030D0000
            PyErr_Format(PyExc_TypeError, "%.200s() got an unexpected keyword argument '%U'",
                         spec->fname, key);
#else
            PyErr_Format(PyExc_TypeError, "'%U' is an invalid keyword argument for %.200s()", key,
                         spec->fname);
#endif
            return -1;
        }
        if (found < nargs) {
            PyErr_Format(PyExc_TypeError,
                         "argument for %.200s() given by name ('%s') and position (%d)",
                         spec->fname, spec->names[found], found + 1);
            return -1;
        }
        out[found] = args[nargs + k];
    }
    for (int i = 0; i < spec->nrequired; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%.200s() missing required argument '%s' (pos %d)",
                         spec->fname, spec->names[i], i + 1);
            return -1;
        }
    }
    return 0;
}

static int bool_arg(PyObject *value, int *out)
{
    if (value == NULL)
        return 0;
    int r = PyObject_IsTrue(value);
    if (r < 0)
        return -1;
    *out = r;
    return 0;
}

static PyObject *module_dump(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"obj", "file", "protocol", "fix_imports", "buffer_callback",
                                        NULL};
    static const arg_spec spec = {"dump", names, 3, 2};
    PyObject *a[5];
    int fix_imports = 1;
    pickler *p;
    (void)module;

    if (parse_fastcall(&spec, args, nargs, kwnames, a) < 0 || bool_arg(a[3], &fix_imports) < 0)
        return NULL;
    p = pickler_alloc(pickler_type);
    if (p == NULL)
        return NULL;
    if (pickler_configure(p, a[2], fix_imports, a[1], a[4]) < 0 || pickler_dump(p, a[0]) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    Py_DECREF(p);
    Py_RETURN_NONE;
}

/* dumps() keeps one spare pickler between calls (the fixed cost of a
 * call is most of the time of a tiny pickle: allocating the object, its
 * memo table and output buffer, and freeing them).  The spare is taken
 * for the duration of a call, so a dumps() nested in a __reduce__ makes
 * its own; it goes back only after a successful dump, emptied: no
 * reference but its own output buffer, its memo cleared (or freed and
 * made again when it grew large), and untracked by the GC while parked,
 * so nothing can reach it between calls.  The GIL serializes the take and
 * the put back. */
/* The output buffer of a dumps() starts at the size of the previous
 * dumps() result (plus 1/16), when larger than the usual 4 KiB and at most
 * SIZE_HINT_MAX: a program that pickles objects of similar size in a loop
 * then never grows the buffer (each growth copies what was written; the
 * 1.2 MB list of 2 KiB bytes objects grew 14 times at 3/2, 9 times by
 * doubling from 4 KiB), and the result is
 * the buffer shrunk in place as before.  A one-off dumps() is unchanged. */
#define SIZE_HINT_MAX ((Py_ssize_t)16 << 20)
#define SPARE_MEMO_MAX 1024  /* slots kept in a parked memo */
#define MEMO_KEEP_MAX 131072 /* slots (2 MiB): a well-filled memo kept up to this size */
static pickler *spare_pickler;
static Py_ssize_t dumps_size_hint;

/* Whether the parked pickler keeps its memo table (emptied) for the next
 * dumps(): always up to SPARE_MEMO_MAX slots; up to MEMO_KEEP_MAX when this
 * dump filled it enough that growth from 8 slots would have reached that
 * size anyway (memo_filled_for_size(), memo.c).  A dumps() of similar
 * objects in a loop then skips every resize and the table's malloc
 * (micro-bytes-2k: 601 entries, 8 -> 32 -> 128 -> 512 -> 2048 slots, 456
 * entries moved and 43 KiB cleared per dump; 404.6 k -> 353.0 k
 * instructions per dump).  The table sizes, hence the malloc sizes, stay
 * the ones growth reaches; larger tables are never kept, so the parked
 * pickler holds at most MEMO_KEEP_MAX slots (2 MiB) between calls, and the
 * next dump that uses less of such a table drops it. */
static int memo_worth_keeping(const memo_table *m)
{
    size_t size = m->mask + 1;
    return size <= SPARE_MEMO_MAX || (size <= MEMO_KEEP_MAX && memo_filled_for_size(m));
}

static pickler *dumps_pickler(void)
{
    pickler *p = spare_pickler;
    if (p != NULL && Py_TYPE(p) == pickler_type) {
        spare_pickler = NULL;
        PyObject_GC_Track(p);
        int status;
        if (p->output_buffer == NULL) {
            p->max_output_len =
                dumps_size_hint > PICKLE_WRITE_BUF_SIZE ? dumps_size_hint : PICKLE_WRITE_BUF_SIZE;
            status = output_reset(p);
        } else {
            status = output_start(p);
        }
        if (status < 0) {
            Py_DECREF(p);
            return NULL;
        }
        return p;
    }
    p = pickler_alloc(pickler_type);
    if (p != NULL)
        p->internal = 1;
    return p;
}

static void dumps_done(pickler *p, int ok)
{
    if (ok && spare_pickler == NULL) {
        Py_CLEAR(p->buffer_callback);
        if (p->output_buffer != NULL && p->max_output_len > PICKLE_WRITE_BUF_SIZE)
            Py_CLEAR(p->output_buffer); /* output_start() makes a small one */
        if (!memo_worth_keeping(&p->memo)) {
            memo_free(&p->memo);
            if (memo_init(&p->memo) < 0) {
                PyErr_Clear();
                Py_DECREF(p);
                return;
            }
        } else {
            memo_empty_detached(&p->memo);
        }
        /* Clearing the memo may have run a __del__ that called dumps() and
         * parked its own pickler: keep that one. */
        if (spare_pickler == NULL) {
            PyObject_GC_UnTrack(p);
            spare_pickler = p;
            return;
        }
    }
    Py_DECREF(p);
}

static PyObject *module_dumps(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"obj", "protocol", "fix_imports", "buffer_callback", NULL};
    static const arg_spec spec = {"dumps", names, 2, 1};
    PyObject *a[4], *result = NULL;
    int fix_imports = 1;
    pickler *p;
    (void)module;

    if (parse_fastcall(&spec, args, nargs, kwnames, a) < 0 || bool_arg(a[2], &fix_imports) < 0)
        return NULL;
    p = dumps_pickler();
    if (p == NULL)
        return NULL;
    if (pickler_configure(p, a[1], fix_imports, NULL, a[3]) == 0 && pickler_dump(p, a[0]) == 0)
        result = output_result(p);
    if (result != NULL) {
        Py_ssize_t n = PyBytes_GET_SIZE(result);
        dumps_size_hint = n > SIZE_HINT_MAX ? SIZE_HINT_MAX : n + n / 16 + 64;
    }
    dumps_done(p, result != NULL);
    return result;
}

static PyObject *module_note(PyObject *module, PyObject *args)
{
    PyObject *key, *value;
    (void)module;
    if (!PyArg_ParseTuple(args, "OO:note", &key, &value))
        return NULL;
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "note() key must be str, not %.200s", Py_TYPE(key)->tp_name);
        return NULL;
    }
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "note() value must be str, not %.200s",
                     Py_TYPE(value)->tp_name);
        return NULL;
    }
    sertrace_dump *d = sertrace_current_dump();
    if (d == NULL)
        Py_RETURN_NONE;
    /* "surrogatepass"-free: a str that cannot be UTF-8 is noted escaped. */
    PyObject *k = PyUnicode_AsEncodedString(key, "utf-8", "backslashreplace");
    PyObject *v = PyUnicode_AsEncodedString(value, "utf-8", "backslashreplace");
    if (k == NULL || v == NULL) {
        Py_XDECREF(k);
        Py_XDECREF(v);
        return NULL;
    }
    sertrace_note(d, PyBytes_AS_STRING(k), PyBytes_AS_STRING(v));
    Py_DECREF(k);
    Py_DECREF(v);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"dump", (PyCFunction)(void (*)(void))module_dump, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("dump($module, /, obj, file, protocol=None, *, fix_imports=True,\n"
               "     buffer_callback=None)\n--\n\n"
               "Write a pickled representation of obj to the open file object file.")},
    {"dumps", (PyCFunction)(void (*)(void))module_dumps, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("dumps($module, /, obj, protocol=None, *, fix_imports=True,\n"
               "      buffer_callback=None)\n--\n\n"
               "Return the pickled representation of the object as a bytes object.")},
    {"note", (PyCFunction)module_note, METH_VARARGS,
     PyDoc_STR("note($module, key, value, /)\n--\n\n"
               "Attach key = value to the innermost open node of the calling thread's\n"
               "current dump; does nothing when no dump is traced.")},
    {NULL, NULL, 0, NULL},
};

/* ---- the module's lifetime ---------------------------------------------- */

/* The module is single-phase init and its state is the process's (G, the
 * two types, the spare pickler, trace.c's type names), with m_size 0: the
 * import system then runs PyInit__native for each new module object and
 * calls module_free() when one dies.  Observed on 3.11, 3.12.1 and 3.13.0
 * (tests/pickle/test_module_reinit.py): with m_size -1, a re-import after
 * `del sys.modules[...]` copies the first module's dict without running
 * PyInit, and m_free is never called on 3.11 and 3.12, not even at exit;
 * with 0, PyInit runs again at the re-import and after Py_Finalize +
 * Py_Initialize, and m_free runs for every module object, at the latest
 * during finalization.  live_modules counts the module objects.  When the
 * last one dies the caches go (the spare pickler and the size hint,
 * trace.c's type names: made again on use); when that happens during the
 * interpreter's finalization, the rest goes too (G's strings and imports,
 * the types), so that an embedder who finalizes and initializes Python
 * again gets a fresh state, not the dead interpreter's objects.  Outside
 * finalization G and the types stay: a Pickler or a function of a module
 * object that was dropped from sys.modules keeps working, and a re-import
 * reuses them.  A Pickler used after the finalization released them
 * raises RuntimeError (state_ready()).  Subinterpreters share the
 * process's state, as before (single-phase modules are refused by
 * isolated subinterpreters from 3.12). */
static Py_ssize_t live_modules;

static int interpreter_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void release_caches(void)
{
    pickler *spare = spare_pickler;
    spare_pickler = NULL;
    dumps_size_hint = 0;
    Py_XDECREF(spare);
    trace_names_release();
}

static void release_state(void);

static void module_free(void *module)
{
    (void)module;
    if (--live_modules > 0)
        return;
    if (interpreter_finalizing())
        release_state();
    else
        release_caches();
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sertrace._native",
    .m_doc = "sertrace's C pickler: byte-identical to pickle, traced through libsertrace.",
    .m_size = 0,
    .m_methods = module_methods,
    .m_free = module_free,
};

static PyObject *import_attr(const char *module_name, const char *attr)
{
    PyObject *module = PyImport_ImportModule(module_name);
    PyObject *res;
    if (module == NULL)
        return NULL;
    res = PyObject_GetAttrString(module, attr);
    Py_DECREF(module);
    return res;
}

/* G's interned attribute names and imported objects. */
static const struct {
    PyObject **slot;
    const char *text;
} global_names[] = {
    {&G.s_write, "write"},
    {&G.s_persistent_id, "persistent_id"},
    {&G.s_dispatch_table, "dispatch_table"},
    {&G.s_reducer_override, "reducer_override"},
    {&G.s_reduce_ex, "__reduce_ex__"},
    {&G.s_reduce, "__reduce__"},
    {&G.s_qualname, "__qualname__"},
    {&G.s_name, "__name__"},
    {&G.s_module, "__module__"},
    {&G.s_class, "__class__"},
    {&G.s_new, "__new__"},
    {&G.s_newobj, "__newobj__"},
    {&G.s_newobj_ex, "__newobj_ex__"},
    {&G.s_items, "items"},
    {&G.s_latin1, "latin1"},
    {&G.s_main, "__main__"},
    {&G.s_modules, "modules"},
    {&G.s_locals, "<locals>"},
    {&G.s_dot, "."},
    {&G.s_add_note, "add_note"},
    {&G.s_bit_length, "bit_length"},
    {&G.s_to_bytes, "to_bytes"},
    {&G.s_little, "little"},
};

static const struct {
    PyObject **slot;
    const char *module, *attr;
} global_imports[] = {
    {&G.PickleError, "pickle", "PickleError"},
    {&G.PicklingError, "pickle", "PicklingError"},
    {&G.dispatch_table, "copyreg", "dispatch_table"},
    {&G.extension_registry, "copyreg", "_extension_registry"},
    {&G.name_mapping_3to2, "_compat_pickle", "REVERSE_NAME_MAPPING"},
    {&G.import_mapping_3to2, "_compat_pickle", "REVERSE_IMPORT_MAPPING"},
    {&G.codecs_encode, "codecs", "encode"},
    {&G.getattr, "builtins", "getattr"},
    {&G.partial, "functools", "partial"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int init_globals(void)
{
    for (size_t i = 0; i < COUNT(global_names); i++) {
        *global_names[i].slot = PyUnicode_InternFromString(global_names[i].text);
        if (*global_names[i].slot == NULL)
            return -1;
    }
    /* Borrowed: object's type dict holds it for the interpreter's life.
     * Through the type lookup, not tp_dict: from 3.12 a static builtin
     * type's tp_dict is NULL (its dict lives in the interpreter state). */
    G.class_descr = _PyType_Lookup(&PyBaseObject_Type, G.s_class);
    for (size_t i = 0; i < COUNT(global_imports); i++) {
        *global_imports[i].slot = import_attr(global_imports[i].module, global_imports[i].attr);
        if (*global_imports[i].slot == NULL)
            return -1;
    }
    if (!PyDict_CheckExact(G.dispatch_table) || !PyDict_CheckExact(G.extension_registry) ||
        !PyDict_CheckExact(G.name_mapping_3to2) || !PyDict_CheckExact(G.import_mapping_3to2)) {
        PyErr_SetString(PyExc_RuntimeError, "copyreg / _compat_pickle tables must be dicts");
        return -1;
    }
    return 0;
}

/* Everything init_state() made (module_free() at finalization, or a
 * failed init). */
static void release_state(void)
{
    release_caches();
    Py_CLEAR(pickler_type);
    Py_CLEAR(memo_proxy_type);
    for (size_t i = 0; i < COUNT(global_names); i++)
        Py_CLEAR(*global_names[i].slot);
    for (size_t i = 0; i < COUNT(global_imports); i++)
        Py_CLEAR(*global_imports[i].slot);
    G.class_descr = NULL;
}

/* G and the types; pickler_type, made last, says it is done. */
static int init_state(void)
{
    if (init_globals() < 0 ||
        (memo_proxy_type = (PyTypeObject *)PyType_FromSpec(&memo_proxy_spec)) == NULL ||
        (pickler_type = (PyTypeObject *)PyType_FromSpec(&pickler_spec)) == NULL) {
        release_state();
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m;
    if (pickler_type == NULL && init_state() < 0)
        return NULL;
    m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    live_modules++; /* module_free() runs when m dies, on the error path below too */
    if (PyModule_AddObjectRef(m, "Pickler", (PyObject *)pickler_type) < 0 ||
        PyModule_AddObjectRef(m, "PickleError", G.PickleError) < 0 ||
        PyModule_AddObjectRef(m, "PicklingError", G.PicklingError) < 0 ||
        PyModule_AddIntConstant(m, "HIGHEST_PROTOCOL", PICKLE_HIGHEST_PROTOCOL) < 0 ||
        PyModule_AddIntConstant(m, "DEFAULT_PROTOCOL", PICKLE_DEFAULT_PROTOCOL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
