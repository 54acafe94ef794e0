/* serializers/pyhook/hooks.c -- the dump hook and the hooked classes.
 *
 * hook_class(cls) puts a Hook (a C callable, a method descriptor) in
 * cls.__dict__['dump'].  A call first decides whether the hooks can follow
 * this pickler (untraceable_reason: attributes set the plain way, a
 * per-instance `write`); then sertrace_dump_begin() says whether anyone
 * listens.  Untraceable or dormant: the original dump runs untouched (its
 * failure still gets the notes).  Traced: writers and saver are installed
 * for the dump, the dump runs with this thread's hook_state on top of
 * tls_top, and sertrace_dump_end() closes it with the counted bytes.
 * Also the module functions about hooked classes (unhook_class,
 * is_hooked, tracing, untraced).
 */
#include "pyhook.h"

_Thread_local hook_state *tls_top;

/* Untraced dumps running on this thread (dormant or untraceable), so that
 * dill.Pickler.dump -> pickle._Pickler.dump adds the notes once. */
typedef struct plain_dump {
    struct plain_dump *prev;
    PyObject *pickler; /* borrowed: the dump call holds it */
} plain_dump;
static _Thread_local plain_dump *tls_plain;

/* ---- can this pickler be traced? ----------------------------------------
 * Decided before sertrace_dump_begin(), so a pickler the hooks cannot
 * follow runs untouched and never shows in the trace as a failed dump.
 * The hooks shadow `save` and `write` with instance attributes, so the
 * instance must take attributes the plain way, and `write` must be set per
 * instance (pickle._Pickler's shape): a class-level `write` means another
 * kind of writer, whose bytes would not be counted on our path. */

/* Classes found untraceable, with the reason (type -> str), each recorded
 * once.  Strong references, capped: picklers classes are few and live long. */
static PyObject *untraced_classes;
#ifndef Py_TPFLAGS_MANAGED_DICT /* before 3.11: tp_dictoffset says it all */
#define Py_TPFLAGS_MANAGED_DICT 0
#endif
#define UNTRACED_CLASSES_MAX 256

static void note_untraced(PyTypeObject *t, const char *reason)
{
    PyObject *r;

    if (untraced_classes == NULL && (untraced_classes = PyDict_New()) == NULL)
        goto end;
    if (PyDict_GET_SIZE(untraced_classes) >= UNTRACED_CLASSES_MAX ||
        PyDict_GetItemWithError(untraced_classes, (PyObject *)t) != NULL || PyErr_Occurred())
        goto end;
    r = PyUnicode_FromString(reason);
    if (r == NULL)
        goto end;
    if (PyDict_SetItem(untraced_classes, (PyObject *)t, r) < 0) {
        Py_DECREF(r);
        goto end;
    }
    Py_DECREF(r);
end:
    PyErr_Clear();
}

/* NULL when `pickler` can be traced, with *write_out a new reference to
 * its per-instance write; else the reason (and *write_out NULL).  Cost
 * when it can: two type-cache lookups and one attribute read. */
static const char *untraceable_reason(PyObject *pickler, PyObject **write_out)
{
    PyTypeObject *t = Py_TYPE(pickler);
    PyObject *cls_write, *cls_save, *w;
    const char *why = NULL;

    *write_out = NULL;
    if (t->tp_setattro != PyObject_GenericSetAttr)
        return "its class defines __setattr__";
    if (t->tp_dictoffset == 0 && !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT))
        return "its instances have no __dict__ (__slots__)";
    cls_save = _PyType_Lookup(t, str_save);
    if (cls_save == NULL || Py_TYPE(cls_save)->tp_descr_set != NULL)
        return "it has no save() method";
    cls_write = _PyType_Lookup(t, str_write);
    if (cls_write && Py_TYPE(cls_write)->tp_descr_set != NULL)
        return "`write` is a data descriptor of its class";
    Py_XINCREF(cls_write); /* borrowed: the lookup below may change the class */
    w = PyObject_GetAttr(pickler, str_write);
    if (w == NULL) {
        PyErr_Clear();
        why = "it has no `write` attribute";
    } else if (cls_write && write_is_class_level(pickler, cls_write, w)) {
        Py_CLEAR(w);
        why = "its `write` is defined by the class, not set per instance as "
              "pickle._Pickler does";
    }
    Py_XDECREF(cls_write);
    *write_out = w;
    return why;
}
/* The original dump, untraced; if it raises, the exception gets the same
 * notes as in a traced dump (built from its traceback, so only then). */
static PyObject *untraced_dump(hook *h, PyObject *pickler, PyObject *root, PyObject *const *args,
                               size_t nargsf, PyObject *kwnames)
{
    plain_dump me = {tls_plain, pickler};
    PyObject *r;

    tls_plain = &me;
    r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    tls_plain = me.prev;
    if (r == NULL)
        dump_failed(NULL, pickler, root);
    return r;
}

static PyObject *dump_hook_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames)
{
    hook *h = (hook *)self;
    hook_state s;
    PyObject *pickler, *root, *proto_obj, *write, *r;
    const char *why;
    int proto = -1;
    sertrace_dump *d;

    if (PyVectorcall_NARGS(nargsf) < 1)
        return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    pickler = args[0];
    /* dill.Pickler.dump -> pickle._Pickler.dump: already traced. */
    for (hook_state *t = tls_top; t; t = t->prev)
        if (t->pickler == pickler)
            return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    for (plain_dump *t = tls_plain; t; t = t->prev)
        if (t->pickler == pickler)
            return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    /* Decide before the dump begins: a pickler the hooks cannot follow runs
     * untouched and leaves nothing in the trace (not a failed dump). */
    root = PyVectorcall_NARGS(nargsf) >= 2 ? args[1] : NULL;
    why = untraceable_reason(pickler, &write);
    if (why != NULL) {
        note_untraced(Py_TYPE(pickler), why);
        return untraced_dump(h, pickler, root, args, nargsf, kwnames);
    }
    proto_obj = PyObject_GetAttr(pickler, str_proto);
    if (proto_obj && PyLong_Check(proto_obj))
        proto = (int)PyLong_AsLong(proto_obj);
    Py_XDECREF(proto_obj);
    PyErr_Clear();
    d = sertrace_dump_begin(h->name, proto);
    if (d == NULL) { /* dormant: the dump runs untouched, notes only if it fails */
        Py_DECREF(write);
        return untraced_dump(h, pickler, root, args, nargsf, kwnames);
    }

    memset(&s, 0, sizeof s);
    s.pickler = pickler;
    s.d = d;
    s.flags = sertrace_dump_flags(d);
    s.atoms = (s.flags & SERTRACE_DUMP_ATOMS) != 0;
    s.forward_dill = -1;
    s.saved_write = write; /* owned by s from here */
    if (install_writers(&s) < 0 || install_saver(&s) < 0) {
        /* An attribute could not be set after all (checked above, so this
         * is rare): run untouched, say so on the dump, and report the
         * pickler's own outcome (0 bytes: none were counted). */
        restore_writers(&s);
        sertrace_note(d, "untraced", "the hooks could not be set on this pickler");
        r = untraced_dump(h, pickler, root, args, nargsf, kwnames);
        sertrace_dump_end(d, 0, r ? SERTRACE_STATUS_OK : SERTRACE_STATUS_ERROR);
        return r;
    }
    s.memo = PyObject_GetAttr(pickler, str_memo);
    if (s.memo && !PyDict_CheckExact(s.memo))
        Py_CLEAR(s.memo);
    s.dispatch = PyObject_GetAttr(pickler, str_dispatch);
    if (s.dispatch && !PyDict_Check(s.dispatch))
        Py_CLEAR(s.dispatch);
    PyErr_Clear();

    s.prev = tls_top;
    tls_top = &s;
    r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    tls_top = s.prev;
    if (r == NULL)
        dump_failed(&s, pickler, root);
    restore_writers(&s);
    sertrace_dump_end(d, st_pos(&s), r ? SERTRACE_STATUS_OK : SERTRACE_STATUS_ERROR);
    return r;
}

static PyObject *hook_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static void hook_dealloc(PyObject *self)
{
    hook *h = (hook *)self;
    PyObject_GC_UnTrack(self);
    Py_CLEAR(h->original);
    Py_CLEAR(h->owner);
    Py_TYPE(self)->tp_free(self);
}

static int hook_traverse(PyObject *self, visitproc visit, void *arg)
{
    hook *h = (hook *)self;
    Py_VISIT(h->original);
    Py_VISIT(h->owner);
    return 0;
}

static int hook_clear(PyObject *self)
{
    hook *h = (hook *)self;
    Py_CLEAR(h->original);
    Py_CLEAR(h->owner);
    return 0;
}

static PyObject *hook_getattro(PyObject *self, PyObject *name)
{
    return pyhook_getattr_or_wrapped(self, name, ((hook *)self)->original);
}

static PyMemberDef hook_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(hook, original), READONLY, "the hooked function"},
    {"owner", T_OBJECT, offsetof(hook, owner), READONLY, "the class it is installed in"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject hook_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sertrace._pyhook.Hook",
    .tp_doc = "sertrace hook around a pickler's save() or dump() (see sertrace.dill).",
    .tp_basicsize = sizeof(hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR |
                Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(hook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = hook_descr_get,
    .tp_dealloc = hook_dealloc,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_getattro = hook_getattro,
    .tp_members = hook_members,
};

static hook *own_hook(PyObject *cls, PyObject *name)
{
    PyObject *v = PyDict_GetItemWithError(((PyTypeObject *)cls)->tp_dict, name);
    if (v && Py_IS_TYPE(v, &hook_type))
        return (hook *)v;
    return NULL;
}

static int install_hook(PyObject *cls, PyObject *attr, int kind, const char *sname)
{
    PyObject *orig;
    hook *h;
    int rc;

    if (own_hook(cls, attr))
        return 0;
    if (PyErr_Occurred())
        return -1;
    orig = PyObject_GetAttr(cls, attr);
    if (orig == NULL)
        return -1;
    if (!PyCallable_Check(orig)) {
        PyErr_Format(PyExc_TypeError, "%R.%U is not callable", cls, attr);
        Py_DECREF(orig);
        return -1;
    }
    h = PyObject_GC_New(hook, &hook_type);
    if (h == NULL) {
        Py_DECREF(orig);
        return -1;
    }
    h->vectorcall = dump_hook_call;
    h->original = orig;
    h->owner = Py_NewRef(cls);
    h->kind = kind;
    h->had_own = PyDict_GetItemWithError(((PyTypeObject *)cls)->tp_dict, attr) != NULL;
    snprintf(h->name, sizeof h->name, "%s", sname);
    PyObject_GC_Track(h);
    rc = PyObject_SetAttr(cls, attr, (PyObject *)h);
    Py_DECREF(h);
    return rc;
}

static int remove_hook(PyObject *cls, PyObject *attr)
{
    hook *h = own_hook(cls, attr);
    if (h == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (h->had_own)
        return PyObject_SetAttr(cls, attr, h->original);
    return PyObject_DelAttr(cls, attr);
}

/* ---- module functions -------------------------------------------------- */

PyObject *py_hook_class(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    const char *name;
    (void)mod;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "hook_class(cls, name): a class and a str");
        return NULL;
    }
    name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL)
        return NULL;
    if (install_hook(args[0], str_dump, HOOK_DUMP, name) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *py_unhook_class(PyObject *mod, PyObject *cls)
{
    bool had;
    (void)mod;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "unhook_class(cls): a class");
        return NULL;
    }
    had = own_hook(cls, str_dump) != NULL;
    if (remove_hook(cls, str_dump) < 0)
        return NULL;
    return PyBool_FromLong(had);
}

PyObject *py_is_hooked(PyObject *mod, PyObject *cls)
{
    (void)mod;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "is_hooked(cls): a class");
        return NULL;
    }
    return PyBool_FromLong(own_hook(cls, str_dump) != NULL);
}

PyObject *py_tracing(PyObject *mod, PyObject *pickler)
{
    (void)mod;
    for (hook_state *t = tls_top; t; t = t->prev)
        if (t->pickler == pickler)
            Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

PyObject *py_untraced(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (untraced_classes == NULL)
        return PyDict_New();
    return PyDict_Copy(untraced_classes);
}
