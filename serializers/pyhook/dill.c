/* serializers/pyhook/dill.c -- dill's own tags, through its logger.
 *
 * dill's save functions call logger.trace(pickler, "T4: %s", obj) on entry
 * and logger.trace(pickler, "# T4") on exit.  py_wrap_logger() makes a C
 * proxy for dill._dill.logger whose `trace` reads the tag text before the
 * ':' (never formatting the message, never calling a repr) and opens or
 * closes the node of a traced dump with dill's tag (on_dill_trace); every
 * other call, and dill's own trace calls when dill's tracer is on, go to
 * dill's adapter unchanged.  dispatched_to_dill() tells the saver which
 * objects will get a dill tag.
 */
#include "pyhook.h"

/* The first function module name seen equal to "dill._dill" (fast path). */
static PyObject *dill_module_name;

/* dill's tag texts that have their own sertrace value (schema.h): the dill
 * range, plus D2/T4/F2, which sertrace shares with dill. */
static const struct {
    const char *text;
    uint8_t tag;
} dill_tags[] = {
#define DILL_TAG_ENTRY_(name, value, text, meaning, cls) {text, (uint8_t)SERTRACE_TAG_##name},
    SERTRACE_TAGS(DILL_TAG_ENTRY_)
#undef DILL_TAG_ENTRY_
};

static bool tag_is_dill_text(uint8_t tag)
{
    return (tag >= 64 && tag < 128 && tag != SERTRACE_TAG_DILL_OTHER) || tag == SERTRACE_TAG_DICT ||
           tag == SERTRACE_TAG_CLASS || tag == SERTRACE_TAG_FUNCTION;
}

/* Parse "TAG: ..." / "# TAG".  Returns 1 for an entry with *tag set (and
 * text/n the tag text), 2 for an exit, 0 for anything else. */
static int parse_dill_message(PyObject *msg, uint8_t *tag, const char **text, size_t *n)
{
    const char *s;
    Py_ssize_t len, i;

    if (!PyUnicode_Check(msg))
        return 0;
    s = PyUnicode_AsUTF8AndSize(msg, &len);
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (len >= 1 && s[0] == '#')
        return 2;
    for (i = 0; i < len && i < 8; i++) {
        char c = s[i];
        if (c == ':')
            break;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return 0;
    }
    if (i == 0 || i >= len || s[i] != ':')
        return 0;
    /* Secondary lines that are not nodes. */
    if ((i == 4 && memcmp(s, "Diff", 4) == 0) || (i == 4 && memcmp(s, "skip", 4) == 0))
        return 0;
    *text = s;
    *n = (size_t)i;
    *tag = SERTRACE_TAG_DILL_OTHER;
    for (size_t k = 0; k < sizeof dill_tags / sizeof dill_tags[0]; k++) {
        if (tag_is_dill_text(dill_tags[k].tag) && strlen(dill_tags[k].text) == (size_t)i &&
            memcmp(dill_tags[k].text, s, (size_t)i) == 0) {
            *tag = dill_tags[k].tag;
            break;
        }
    }
    return 1;
}

/* Will the dispatch entry for obj log a dill tag?  True when it is a
 * function of dill._dill (dill's save functions), including dill's
 * catch-all for classes with a custom metaclass. */
bool dispatched_to_dill(hook_state *s, PyObject *obj)
{
    PyObject *f, *mod;

    if (s->dispatch == NULL)
        return false;
    f = PyDict_GetItemWithError(s->dispatch, (PyObject *)Py_TYPE(obj));
    if (f == NULL && !PyErr_Occurred() && PyType_Check(obj) && !PyDict_CheckExact(s->dispatch))
        f = PyDict_GetItemWithError(s->dispatch, (PyObject *)&PyType_Type);
    if (f == NULL) {
        PyErr_Clear();
        return false;
    }
    if (!PyFunction_Check(f))
        return false;
    mod = ((PyFunctionObject *)f)->func_module;
    if (mod == NULL)
        return false;
    if (mod == dill_module_name)
        return true;
    if (PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "dill._dill") == 0) {
        if (dill_module_name == NULL)
            dill_module_name = Py_NewRef(mod);
        return true;
    }
    return false;
}

/* ---- dill's trace calls ------------------------------------------------ */

/* dill's messages are constants of its code objects, so the parse of a
 * message is cached by the string's identity (the cache holds a reference,
 * so an address is never reused while cached). */
static struct {
    PyObject *msg;
    int kind;
    uint8_t tag;
    char text[12];
} msg_cache[64];

static int parse_dill_message_cached(PyObject *msg, uint8_t *tag, char text[12])
{
    size_t h = ((uintptr_t)msg >> 4) & 63u;
    const char *t = NULL;
    size_t n = 0;
    int kind;

    if (msg_cache[h].msg == msg) {
        *tag = msg_cache[h].tag;
        memcpy(text, msg_cache[h].text, 12);
        return msg_cache[h].kind;
    }
    kind = parse_dill_message(msg, tag, &t, &n);
    if (n > 11)
        n = 11;
    if (t)
        memcpy(text, t, n);
    text[n] = '\0';
    Py_XSETREF(msg_cache[h].msg, Py_NewRef(msg));
    msg_cache[h].kind = kind;
    msg_cache[h].tag = *tag;
    memcpy(msg_cache[h].text, text, 12);
    return kind;
}

static void on_dill_trace(hook_state *s, PyObject *msg)
{
    uint8_t tag = 0;
    char text[12];
    int kind = parse_dill_message_cached(msg, &tag, text);
    node *top = NULL;
    uint32_t i = 0;

    if (kind == 0)
        return;
    if (s->depth) {
        i = s->depth - 1;
        top = &s->nodes[i];
    }
    if (kind == 2) { /* "# TAG": close the node dill opened */
        if (top && top->kind == NODE_DILL) {
            sertrace_exit_fast(s->d, st_pos(s));
            top->kind = NODE_CLOSED;
        } else if (top && top->kind == NODE_SYNTH) {
            sertrace_exit_fast(s->d, st_pos(s));
            s->depth = i; /* pop it */
        }
        return;
    }
    if (top && top->kind == NODE_PENDING) {
        emit_enter(s, top, tag, st_pos(s));
        top->kind = NODE_DILL;
    } else {
        /* A dill node without a save() of its own: keep it anyway. */
        node *syn;
        flush_pending(s);
        syn = push_node(s);
        if (syn == NULL)
            return;
        syn->kind = NODE_SYNTH;
        syn->obj = NULL;
        emit_enter(s, syn, tag, st_pos(s));
    }
    if (tag == SERTRACE_TAG_DILL_OTHER)
        sertrace_note(s->d, "tag", text);
}

/* ---- dill logger proxy ------------------------------------------------- */

typedef struct {
    PyObject_HEAD PyObject *wrapped; /* dill.logger.adapter */
} logger_proxy;

static bool forward_to_dill(hook_state *s)
{
    if (s->forward_dill < 0) {
        PyObject *td = PyObject_GetAttr(s->pickler, str_trace_depth);
        if (td == NULL) {
            PyErr_Clear();
            s->forward_dill = 1; /* not a dill pickler: dill logs at INFO */
        } else {
            s->forward_dill = td != Py_None;
            Py_DECREF(td);
        }
    }
    return s->forward_dill != 0;
}

/* dill's adapter behind the proxy (one per process in practice). */
static PyObject *dill_adapter;

PyObject *proxy_trace(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    hook_state *s = tls_top;
    PyObject *meth, *r;

    (void)self;
    if (s != NULL && nargs >= 2 && s->pickler == args[0]) {
        on_dill_trace(s, args[1]);
        if (!forward_to_dill(s))
            Py_RETURN_NONE;
    } else if (nargs >= 1) {
        /* dill's adapter.trace returns at once when the pickler has
         * _trace_depth None (dill's tracer off for this dump): do that
         * check here and spare the call into Python. */
        PyObject *td = PyObject_GetAttr(args[0], str_trace_depth);
        if (td == Py_None) {
            Py_DECREF(td);
            Py_RETURN_NONE;
        }
        Py_XDECREF(td);
        PyErr_Clear();
    }
    if (dill_adapter == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sertrace: dill's logger proxy has no adapter");
        return NULL;
    }
    meth = PyObject_GetAttr(dill_adapter, str_trace);
    if (meth == NULL)
        return NULL;
    r = PyObject_Vectorcall(meth, args, (size_t)nargs, kwnames);
    Py_DECREF(meth);
    return r;
}

static PyObject *proxy_getattro(PyObject *self, PyObject *name)
{
    return pyhook_getattr_or_wrapped(self, name, ((logger_proxy *)self)->wrapped);
}

static int proxy_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    return PyObject_SetAttr(((logger_proxy *)self)->wrapped, name, value);
}

static void proxy_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((logger_proxy *)self)->wrapped);
    Py_TYPE(self)->tp_free(self);
}

static int proxy_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((logger_proxy *)self)->wrapped);
    return 0;
}

static PyObject *proxy_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<sertrace proxy for %R>", ((logger_proxy *)self)->wrapped);
}

PyTypeObject trace_fn_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sertrace._pyhook.TraceFunction",
    .tp_doc = "trace(pickler, msg, *args): read dill's tag for sertrace, then (when dill's "
              "own tracer is on, or the pickler is not traced) call dill's adapter.trace.",
    .tp_basicsize = sizeof(trace_fn),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(trace_fn, vectorcall),
    .tp_call = PyVectorcall_Call,
};

static PyMemberDef proxy_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(logger_proxy, wrapped), READONLY, "dill's adapter"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject logger_proxy_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sertrace._pyhook.LoggerProxy",
    .tp_doc = "Stands in for dill._dill.logger: gives dill's tags to sertrace.",
    .tp_basicsize = sizeof(logger_proxy),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = proxy_dealloc,
    .tp_traverse = proxy_traverse,
    .tp_getattro = proxy_getattro,
    .tp_setattro = proxy_setattro,
    .tp_repr = proxy_repr,
    .tp_members = proxy_members,
};

PyObject *py_wrap_logger(PyObject *mod, PyObject *adapter)
{
    logger_proxy *p;
    (void)mod;
    if (Py_IS_TYPE(adapter, &logger_proxy_type))
        return Py_NewRef(adapter);
    p = PyObject_GC_New(logger_proxy, &logger_proxy_type);
    if (p == NULL)
        return NULL;
    p->wrapped = Py_NewRef(adapter);
    Py_XSETREF(dill_adapter, Py_NewRef(adapter));
    PyObject_GC_Track(p);
    return (PyObject *)p;
}
