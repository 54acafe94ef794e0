/* serializers/pyhook/pyhook.c -- trace a pure-Python pickler class in C.
 *
 * dill.Pickler and pickle._Pickler write their output in Python, so there
 * is no C save loop to instrument.  This module traces such a class without
 * editing its code: hook_class(cls) puts one small C callable into the
 * class dict in place of `dump`, which calls the original dump.
 *
 * - The dump hook first checks that the hooks can follow this pickler
 *   (untraceable_reason(): a per-instance `write`, plain attributes); if
 *   not, the dump runs untouched and leaves nothing in the trace.  Then it
 *   calls sertrace_dump_begin().  When nobody listens it gets NULL and
 *   calls the original dump untouched: that is the whole dormant cost,
 *   once per dump, nothing per object.
 * - When someone listens, for the duration of the dump only, it sets three
 *   instance attributes that shadow the class's: `pickler.save` (a C
 *   "saver" that opens a node, calls the class's save, closes the node),
 *   `pickler.write` and `pickler.framer.file_write` (C counting writers).
 *   pickle's and dill's code call `self.save(x)` / `self.write(b)`, which
 *   find the instance attributes; explicit class calls such as dill's
 *   `StockPickler.save(self, obj)` go straight to the class function, so
 *   every object gets exactly one node.  All of them are removed at the end.
 * - Byte counts: the writers count every byte the pickler produces on its
 *   own write path: bytes passed to the file plus bytes in the current
 *   protocol-4 frame, plus the bytes it writes straight to the file around
 *   that path (joblib's arrays), seen through the file's own `write`, shadowed
 *   for the dump (watch_file()).  Nothing calls file.tell(), so pipes and
 *   sockets work.  A file whose `write` cannot be shadowed gets a note and
 *   sertrace_dump_lower_bounds(): its dump's sizes are shown as "at least".
 *   The saver's enter position is taken after the frame commit that
 *   pickle's save() does first, so a FRAME header committed mid-dump counts
 *   in the enclosing object, exactly as dill's tracer counts it.
 * - Atoms (int, float, str, bytes, None, bool) are folded into their parent
 *   unless the dump asks for them (SERTRACE_DUMP_ATOMS).  sertrace's tags
 *   are used (L, Tu, O, Mo ...), except where dill has its own.
 * - dill's tags: each dill save function calls
 *   `logger.trace(pickler, "D2: %s", ...)` on entry and
 *   `logger.trace(pickler, "# D2")` on exit.  wrap_logger() builds a C proxy
 *   for dill._dill.logger whose `trace` reads the tag from the format string
 *   (never formatting it, never calling a repr) when the pickler is being
 *   traced here; the node of an object dispatched to a dill function is
 *   opened late, at dill's own entry call, with dill's tag, and closed at
 *   dill's exit call, so it has exactly dill's byte count.  Other calls go
 *   to dill's adapter unchanged, so dill.detect.trace keeps working.
 * - When a hooked dump raises, traced or not, the exception gets the notes
 *   the C pickler (serializers/pickle) and CPython 3.14 add ("when
 *   serializing list item 5", "... State state", "... State object"), read
 *   from the exception's traceback (dump_failed()); a traced dump also gets
 *   ONE sertrace_error() with the innermost failing object's tag and type,
 *   the C pickler's message and path ("State.suspended[0].frame.stack[5][1]").
 *   All of it is built on the error path only, without user code; the
 *   trace has no object values: dict keys in the path follow key_text()'s
 *   rule, the message py_exception_message()'s (../py_safe_text.h).
 *
 * Per-thread state: the dump being traced on this thread is found through
 * a thread-local pointer; nested dumps (a __reduce__ that pickles) push
 * their own state.  Everything runs with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sertrace/sertrace.h"

#include "../py_safe_text.h"

/* ---- interned names ---------------------------------------------------- */

static PyObject *str_write, *str_framer, *str_file_write, *str_current_frame;
static PyObject *str_memo, *str_dispatch, *str_proto, *str_trace;
static PyObject *str_trace_depth, *str_save, *str_dump, *str_module;
static PyObject *str_frame_target;
static PyObject *str_save_reduce, *str_batch_setitems, *str_batch_appends, *str_self, *str_obj;
static PyObject *str_k, *str_v, *str_cls, *str_args, *str_kwargs, *str_func, *str_state;
static PyObject *str_state_setter;
/* The first function module name seen equal to "dill._dill" (fast path). */
static PyObject *dill_module_name;

/* ---- per-dump state ---------------------------------------------------- */

enum node_kind {
    NODE_PENDING, /* save() entered, enter record not emitted yet */
    NODE_OPEN,    /* enter emitted, exit at save() return */
    NODE_DILL,    /* opened by dill's entry trace: exit at dill's exit trace */
    NODE_CLOSED,  /* dill's exit trace seen; save() not returned yet */
    NODE_SYNTH,   /* a second dill entry trace inside one save() */
};

typedef struct node {
    PyObject *obj;      /* borrowed: the save() caller holds it */
    uint64_t enter_pos; /* position before its first byte */
    uint32_t type;      /* sertrace type index, 0 until emitted */
    uint8_t tag;
    uint8_t kind;
} node;

typedef struct writer writer;
typedef struct saver saver;

typedef struct hook_state {
    struct hook_state *prev; /* outer traced dump on this thread */
    PyObject *pickler;       /* borrowed: the dump call holds it */
    sertrace_dump *d;
    unsigned flags;
    bool atoms;
    bool framed;     /* pickle-style framer found */
    bool frame_dirty; /* re-read framer.current_frame before next write */
    bool error_reported; /* the current failure is noted (note_failure) */
    bool err_set;        /* err_tag / err_type hold the innermost failure */
    uint8_t err_tag;
    uint32_t err_type;
    int forward_dill; /* -1 unknown, 0/1: also call dill's adapter.trace */
    uint64_t file_bytes; /* bytes passed to the file */
    uint64_t inframe;    /* bytes in the current frame (not yet in the file) */
    uint64_t frame_target;
    PyObject *framer;      /* strong */
    PyObject *frame;       /* strong: current frame object or NULL */
    PyObject *frame_write; /* strong: its bound write, or NULL */
    PyObject *memo;        /* strong, exact dict or NULL */
    PyObject *memo_key;    /* strong: private int rewritten per probe */
    PyObject *dispatch;    /* strong, dict (or subclass) or NULL */
    saver *saver;              /* shadows pickler.save during the dump */
    PyObject *saved_own_save;  /* strong: the instance's own save, or NULL */
    writer *w_write;       /* replaces pickler.write */
    writer *w_file;        /* replaces framer.file_write */
    PyObject *saved_write; /* strong: the instance's write (framer.write) */
    PyObject *saved_file_write; /* strong */
    PyObject *file;        /* strong: the file whose `write` w_around shadows, or NULL */
    writer *w_around;      /* file.write: bytes written straight to the file */
    node *nodes;
    uint32_t depth; /* entries used in nodes */
    uint32_t cap;
    /* Per-type answers (default tag, dispatched to a dill function), so a
     * save costs no dict lookup for a type already seen in this dump. */
    struct {
        PyTypeObject *type;
        uint32_t index; /* sertrace type index, 0 until interned */
        uint8_t tag;
        uint8_t dill;
    } tcache[64];
} hook_state;

static _Thread_local hook_state *tls_top;

/* Untraced dumps running on this thread (dormant or untraceable), so that
 * dill.Pickler.dump -> pickle._Pickler.dump adds the notes once. */
typedef struct plain_dump {
    struct plain_dump *prev;
    PyObject *pickler; /* borrowed: the dump call holds it */
} plain_dump;
static _Thread_local plain_dump *tls_plain;

#define TCACHE_SLOT(t) (((uintptr_t)(t) >> 4) & 63u)

/* Python 3.11 has no PyErr_GetRaisedException(): fetch and restore the
 * pending exception as one normalized object. */
typedef struct {
    PyObject *type, *value, *tb;
} saved_exc;

static PyObject *exc_take(saved_exc *e)
{
    PyErr_Fetch(&e->type, &e->value, &e->tb);
    if (e->type == NULL)
        return NULL;
    PyErr_NormalizeException(&e->type, &e->value, &e->tb);
    if (e->tb && e->value)
        PyException_SetTraceback(e->value, e->tb);
    return e->value;
}

static void exc_give_back(saved_exc *e)
{
    PyErr_Restore(e->type, e->value, e->tb);
}

static inline uint64_t st_pos(const hook_state *s)
{
    return s->file_bytes + s->inframe;
}

/* ---- byte length of a written object ----------------------------------- */

static Py_ssize_t data_length(PyObject *data)
{
    Py_buffer view;
    Py_ssize_t n;

    if (PyBytes_CheckExact(data))
        return PyBytes_GET_SIZE(data);
    if (PyMemoryView_Check(data))
        return PyMemoryView_GET_BUFFER(data)->len;
    if (PyByteArray_CheckExact(data))
        return PyByteArray_GET_SIZE(data);
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) == 0) {
        n = view.len;
        PyBuffer_Release(&view);
        return n;
    }
    PyErr_Clear();
    n = PyObject_Length(data);
    if (n < 0) {
        PyErr_Clear();
        n = 0;
    }
    return n;
}

/* ---- counting writers -------------------------------------------------- *
 * A writer is installed as pickler.write (WRITER_FRAMED: does what
 * _Framer.write does, counting the bytes that go into the frame),
 * framer.file_write (WRITER_FILE: counts bytes passed to the file) or, for
 * picklers without a framer, pickler.write (WRITER_PLAIN).  `st` is cleared
 * when the dump ends: a writer kept alive after that just forwards. */

enum writer_mode { WRITER_FRAMED, WRITER_FILE, WRITER_PLAIN };

struct writer {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    hook_state *st;
    PyObject *target; /* strong: original callable to forward to */
    int mode;
};

static PyTypeObject writer_type;

static void refresh_frame(hook_state *s)
{
    PyObject *fr;

    s->frame_dirty = false;
    Py_CLEAR(s->frame_write);
    Py_CLEAR(s->frame);
    fr = PyObject_GetAttr(s->framer, str_current_frame);
    if (fr == NULL) {
        PyErr_Clear();
        return;
    }
    if (fr == Py_None || PyObject_IsTrue(fr) != 1) {
        PyErr_Clear();
        Py_DECREF(fr);
        return;
    }
    s->frame_write = PyObject_GetAttr(fr, str_write);
    if (s->frame_write == NULL) {
        PyErr_Clear();
        Py_DECREF(fr);
        return;
    }
    s->frame = fr;
}

static PyObject *writer_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    writer *w = (writer *)self;
    hook_state *s = w->st;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *data, *r;
    Py_ssize_t n;

    if (s == NULL || nargs != 1 || kwnames != NULL)
        return PyObject_Vectorcall(w->target, args, nargsf, kwnames);
    data = args[0];
    switch (w->mode) {
    case WRITER_FRAMED:
        if (s->frame_dirty)
            refresh_frame(s);
        if (s->frame_write == NULL) /* no frame: _Framer.write -> file_write */
            return PyObject_Vectorcall((PyObject *)s->w_file, args, nargsf, NULL);
        r = PyObject_Vectorcall(s->frame_write, args, 1, NULL);
        if (r == NULL)
            return NULL;
        n = PyLong_CheckExact(r) ? PyLong_AsSsize_t(r) : -1;
        if (n < 0) {
            PyErr_Clear();
            n = data_length(data);
        }
        s->inframe += (uint64_t)n;
        return r;
    case WRITER_FILE:
        n = data_length(data);
        r = PyObject_Vectorcall(w->target, args, nargsf, NULL);
        if (r != NULL) {
            /* Only a commit (or a write outside framing, where the frame
             * is empty anyway) reaches the file: the frame's bytes are in
             * the file now and the framer is about to start a new frame. */
            s->file_bytes += (uint64_t)n;
            s->inframe = 0;
            s->frame_dirty = true;
        }
        return r;
    default:
        n = data_length(data);
        r = PyObject_Vectorcall(w->target, args, nargsf, NULL);
        if (r != NULL)
            s->file_bytes += (uint64_t)n;
        return r;
    }
}

static void writer_dealloc(PyObject *self)
{
    writer *w = (writer *)self;
    Py_XDECREF(w->target);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject writer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sertrace._pyhook.CountingWriter",
    .tp_doc = "Counts the bytes a traced pickler writes, then forwards them.",
    .tp_basicsize = sizeof(writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(writer, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = writer_dealloc,
};

static writer *writer_new(hook_state *s, PyObject *target, int mode)
{
    writer *w = PyObject_New(writer, &writer_type);
    if (w == NULL)
        return NULL;
    w->vectorcall = writer_call;
    w->st = s;
    w->target = Py_NewRef(target);
    w->mode = mode;
    return w;
}

/* ---- names, without user code ------------------------------------------ */

/* module.qualname of a type, or qualname alone for builtins (and for
 * __main__ when `short_main`), like repr(cls) / pickle's _T(). */
static int type_qualified_name(PyTypeObject *t, bool short_main, char *out, size_t cap)
{
    const char *qual = NULL, *mod = NULL;
    Py_ssize_t qn = 0, mn = 0;

    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        PyObject *q = ((PyHeapTypeObject *)t)->ht_qualname;
        PyObject *m = t->tp_dict ? PyDict_GetItemWithError(t->tp_dict, str_module) : NULL;
        if (q && PyUnicode_Check(q))
            qual = PyUnicode_AsUTF8AndSize(q, &qn);
        if (m && PyUnicode_Check(m))
            mod = PyUnicode_AsUTF8AndSize(m, &mn);
        PyErr_Clear();
    } else {
        const char *dot = strrchr(t->tp_name, '.');
        if (dot) {
            mod = t->tp_name;
            mn = dot - t->tp_name;
            qual = dot + 1;
        } else {
            qual = t->tp_name;
        }
        qn = (Py_ssize_t)strlen(qual);
    }
    if (qual == NULL) {
        qual = "?";
        qn = 1;
    }
    if (mod && !(mn == 8 && memcmp(mod, "builtins", 8) == 0) &&
        !(short_main && mn == 8 && memcmp(mod, "__main__", 8) == 0))
        return snprintf(out, cap, "%.*s.%.*s", (int)mn, mod, (int)qn, qual);
    return snprintf(out, cap, "%.*s", (int)qn, qual);
}

static bool is_class_tag(uint8_t tag)
{
    return tag == SERTRACE_TAG_CLASS || tag == SERTRACE_TAG_DILL_T1 ||
           tag == SERTRACE_TAG_DILL_T2 || tag == SERTRACE_TAG_DILL_T6 ||
           tag == SERTRACE_TAG_DILL_T7;
}

static bool is_function_tag(uint8_t tag)
{
    return tag == SERTRACE_TAG_FUNCTION || tag == SERTRACE_TAG_DILL_F1 ||
           tag == SERTRACE_TAG_DILL_F3;
}

/* The dump's type index for a node: the class itself for class tags, the
 * function for function tags (so the tree shows their names), else the
 * object's type.  Names are built only the first time a key is seen. */
static uint32_t node_type(hook_state *s, PyObject *obj, uint8_t tag)
{
    const void *key;
    uint32_t idx;
    char name[512];

    if (obj == NULL)
        return 0;
    if (is_class_tag(tag) && PyType_Check(obj)) {
        key = obj;
        idx = sertrace_type_known(s->d, key);
        if (idx)
            return idx;
        type_qualified_name((PyTypeObject *)obj, false, name, sizeof name);
    } else if (is_function_tag(tag) && PyFunction_Check(obj)) {
        PyObject *q = ((PyFunctionObject *)obj)->func_qualname;
        const char *u = (q && PyUnicode_Check(q)) ? PyUnicode_AsUTF8(q) : NULL;
        key = obj;
        idx = sertrace_type_known(s->d, key);
        if (idx)
            return idx;
        if (u == NULL)
            PyErr_Clear();
        snprintf(name, sizeof name, "%s", u ? u : "?");
    } else {
        PyTypeObject *t = Py_TYPE(obj);
        size_t h = TCACHE_SLOT(t);
        if (s->tcache[h].type == t && s->tcache[h].index)
            return s->tcache[h].index;
        key = t;
        idx = sertrace_type_known(s->d, key);
        if (idx == 0) {
            type_qualified_name(t, false, name, sizeof name);
            idx = sertrace_type(s->d, key, name);
        }
        if (s->tcache[h].type == t)
            s->tcache[h].index = idx;
        return idx;
    }
    return sertrace_type(s->d, key, name);
}

/* ---- tags -------------------------------------------------------------- */

static bool is_atom(PyTypeObject *t)
{
    return t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type ||
           t == &PyBytes_Type || t == Py_TYPE(Py_None) || t == &PyBool_Type;
}

static uint8_t default_tag(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);

    if (t == &PyDict_Type)
        return SERTRACE_TAG_DICT;
    if (t == &PyList_Type)
        return SERTRACE_TAG_LIST;
    if (t == &PyTuple_Type)
        return SERTRACE_TAG_TUPLE;
    if (t == &PyUnicode_Type)
        return SERTRACE_TAG_STR;
    if (t == &PyLong_Type)
        return SERTRACE_TAG_INT;
    if (t == &PyFloat_Type)
        return SERTRACE_TAG_FLOAT;
    if (t == &PyBytes_Type)
        return SERTRACE_TAG_BYTES;
    if (t == &PyByteArray_Type)
        return SERTRACE_TAG_BYTEARRAY;
    if (t == &PySet_Type)
        return SERTRACE_TAG_SET;
    if (t == &PyFrozenSet_Type)
        return SERTRACE_TAG_FROZENSET;
    if (obj == Py_None || t == &PyBool_Type || obj == Py_Ellipsis || obj == Py_NotImplemented)
        return SERTRACE_TAG_ATOM;
    if (PyType_Check(obj))
        return SERTRACE_TAG_CLASS;
    if (PyFunction_Check(obj))
        return SERTRACE_TAG_FUNCTION;
    if (PyCFunction_Check(obj))
        return SERTRACE_TAG_GLOBAL;
    if (t == &PyPickleBuffer_Type)
        return SERTRACE_TAG_PICKLEBUFFER;
    /* as the C pickler: O for instances of heap types, R for other
     * reduce-based objects (generators, datetime ...) */
    return (t->tp_flags & Py_TPFLAGS_HEAPTYPE) ? SERTRACE_TAG_INSTANCE : SERTRACE_TAG_REDUCE;
}

static uint64_t obj_length(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);

    if (t == &PyDict_Type)
        return (uint64_t)PyDict_GET_SIZE(obj) + 1;
    if (t == &PyList_Type)
        return (uint64_t)PyList_GET_SIZE(obj) + 1;
    if (t == &PyTuple_Type)
        return (uint64_t)PyTuple_GET_SIZE(obj) + 1;
    if (t == &PyUnicode_Type)
        return (uint64_t)PyUnicode_GET_LENGTH(obj) + 1;
    if (t == &PyBytes_Type)
        return (uint64_t)PyBytes_GET_SIZE(obj) + 1;
    if (t == &PyByteArray_Type)
        return (uint64_t)PyByteArray_GET_SIZE(obj) + 1;
    if (t == &PySet_Type || t == &PyFrozenSet_Type)
        return (uint64_t)PySet_GET_SIZE(obj) + 1;
    return 0;
}

/* dill's tag texts that have their own sertrace value (schema.h): the dill
 * range, plus D2/T4/F2, which sertrace shares with dill. */
static const struct {
    const char *text;
    uint8_t tag;
} dill_tags[] = {
#define DILL_TAG_ENTRY_(name, value, text, meaning, c_)                        \
    {text, (uint8_t)SERTRACE_TAG_##name},
    SERTRACE_TAGS(DILL_TAG_ENTRY_)
#undef DILL_TAG_ENTRY_
};

static bool tag_is_dill_text(uint8_t tag)
{
    return (tag >= 64 && tag < 128 && tag != SERTRACE_TAG_DILL_OTHER) ||
           tag == SERTRACE_TAG_DICT || tag == SERTRACE_TAG_CLASS ||
           tag == SERTRACE_TAG_FUNCTION;
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
static bool dispatched_to_dill(hook_state *s, PyObject *obj)
{
    PyObject *f, *mod;

    if (s->dispatch == NULL)
        return false;
    f = PyDict_GetItemWithError(s->dispatch, (PyObject *)Py_TYPE(obj));
    if (f == NULL && !PyErr_Occurred() && PyType_Check(obj) &&
        !PyDict_CheckExact(s->dispatch))
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

static inline void type_info(hook_state *s, PyObject *obj, uint8_t *tag, bool *dill)
{
    PyTypeObject *t = Py_TYPE(obj);
    size_t h = TCACHE_SLOT(t);

    if (s->tcache[h].type != t) {
        s->tcache[h].type = t;
        s->tcache[h].index = 0;
        s->tcache[h].tag = default_tag(obj);
        s->tcache[h].dill = dispatched_to_dill(s, obj);
    }
    *tag = s->tcache[h].tag;
    *dill = s->tcache[h].dill;
}

/* pickle's memo is keyed by id(obj).  Building that int costs an
 * allocation per save; on CPython 3.11 (30-bit digits) the dump keeps one
 * private 3-digit int and rewrites its digits in place for each probe.  It
 * is never stored or shown to Python code: a dict probe only hashes and
 * compares it.  Other versions allocate. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30 && \
    SIZEOF_VOID_P <= 8
#define PYHOOK_REUSE_MEMO_KEY 1
#endif

static PyObject *memo_key_for(hook_state *s, PyObject *obj)
{
#ifdef PYHOOK_REUSE_MEMO_KEY
    uint64_t v = (uint64_t)(uintptr_t)obj;
    PyLongObject *k;
    Py_ssize_t n;

    if (s->memo_key == NULL) {
        s->memo_key = PyLong_FromUnsignedLongLong(1ULL << 62); /* 3 digits */
        if (s->memo_key == NULL)
            return NULL;
    }
    k = (PyLongObject *)s->memo_key;
    k->ob_digit[0] = (digit)(v & PyLong_MASK);
    k->ob_digit[1] = (digit)((v >> PyLong_SHIFT) & PyLong_MASK);
    k->ob_digit[2] = (digit)(v >> (2 * PyLong_SHIFT));
    n = k->ob_digit[2] ? 3 : k->ob_digit[1] ? 2 : k->ob_digit[0] ? 1 : 0;
    Py_SET_SIZE(k, n);
    return Py_NewRef(s->memo_key);
#else
    (void)s;
    return PyLong_FromVoidPtr(obj);
#endif
}

static bool memo_hit(hook_state *s, PyObject *obj)
{
    PyObject *key, *v;

    if (s->memo == NULL || PyDict_GET_SIZE(s->memo) == 0)
        return false;
    key = memo_key_for(s, obj);
    if (key == NULL) {
        PyErr_Clear();
        return false;
    }
    v = PyDict_GetItemWithError(s->memo, key);
    Py_DECREF(key);
    if (v == NULL) {
        PyErr_Clear();
        return false;
    }
    return true;
}

/* ---- the node stack ---------------------------------------------------- */

static node *push_node(hook_state *s)
{
    if (s->depth == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        node *n = PyMem_Realloc(s->nodes, (size_t)cap * sizeof(node));
        if (n == NULL)
            return NULL;
        s->nodes = n;
        s->cap = cap;
    }
    memset(&s->nodes[s->depth], 0, sizeof(node));
    return &s->nodes[s->depth++];
}

static void emit_enter(hook_state *s, node *n, uint8_t tag, uint64_t pos)
{
    n->tag = tag;
    n->type = node_type(s, n->obj, tag);
    sertrace_enter(s->d, tag, n->type, (uintptr_t)n->obj, n->obj ? obj_length(n->obj) : 0, pos);
}

/* Emit the enter record of a pending node (before a child or at exit). */
static void flush_pending(hook_state *s)
{
    node *n = s->depth ? &s->nodes[s->depth - 1] : NULL;

    if (n && n->kind == NODE_PENDING) {
        emit_enter(s, n, n->tag, n->enter_pos);
        n->kind = NODE_OPEN;
    }
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
            sertrace_exit(s->d, st_pos(s));
            top->kind = NODE_CLOSED;
        } else if (top && top->kind == NODE_SYNTH) {
            sertrace_exit(s->d, st_pos(s));
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

/* ---- error path -------------------------------------------------------- */

/* Append to a growing PyMem buffer; failures just truncate. */
typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256);
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, cap);
        if (p == NULL)
            return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Dict keys in paths and notes.  Keys are user data, so only keys that
 * read as names or small numbers are shown; every other key shows its type
 * (the rule the C pickler uses too; see README, "Dict keys"):
 *   a str that is an identifier of at most 64 characters   'name'
 *   an int (not bool) that fits in 64 bits                  42
 *   None, True, False                                       None
 *   any other str, bytes                                    <str len=12>
 *   anything else                                           <tuple>
 * No repr and no user code is called. */
#define KEY_NAME_MAX 64

static bool is_short_identifier(PyObject *k)
{
    return PyUnicode_CheckExact(k) && PyUnicode_GET_LENGTH(k) <= KEY_NAME_MAX &&
           PyUnicode_IsIdentifier(k) == 1;
}

static void key_text(sbuf *b, PyObject *k)
{
    char tmp[300];

    if (is_short_identifier(k)) {
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(k, &n);
        if (u) {
            sb_str(b, "'");
            sb_add(b, u, (size_t)n);
            sb_str(b, "'");
            return;
        }
        PyErr_Clear();
    } else if (PyLong_CheckExact(k)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(k, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) {
            snprintf(tmp, sizeof tmp, "%lld", v);
            sb_str(b, tmp);
            return;
        }
        PyErr_Clear();
    } else if (k == Py_None || k == Py_True || k == Py_False) {
        sb_str(b, k == Py_None ? "None" : k == Py_True ? "True" : "False");
        return;
    }
    if (PyUnicode_CheckExact(k)) {
        snprintf(tmp, sizeof tmp, "<str len=%zd>", PyUnicode_GET_LENGTH(k));
    } else if (PyBytes_CheckExact(k)) {
        snprintf(tmp, sizeof tmp, "<bytes len=%zd>", PyBytes_GET_SIZE(k));
    } else {
        char name[256];
        type_qualified_name(Py_TYPE(k), true, name, sizeof name);
        snprintf(tmp, sizeof tmp, "<%s>", name);
    }
    sb_str(b, tmp);
}

/* The error path, after the C pickler's (serializers/pickle/trace.c), so a
 * dill failure reads exactly as a sertrace.dumps one:
 *
 * - The notes CPython 3.14's pickle adds while unwinding, innermost first:
 *   "when serializing list item 4", "... dict item 'stack'", "... set
 *   element", "... State state", "... State reconstructor arguments",
 *   "... State object" (once per object whose save_reduce failed).
 * - In a traced dump, ONE sertrace_error() at dump end with the failing
 *   object's tag and type, the message (exception_message) and the path
 *   ("State.suspended[1].frame.stack[4][1]").
 *
 * Both come from the exception's traceback, read when the hooked dump
 * raised, so nothing is paid while the dump runs and a dormant dump (no
 * listener) gets the same notes as a traced one.  The traceback's frames
 * keep their locals: each pickler frame `save(self, obj)` of this pickler is
 * one object of the chain (dill's save and pickle's save of the same object
 * count once), and the frames between two of them say how the inner one sat
 * in the outer one: `_batch_setitems` (its `k`, `v`), `_batch_appends`,
 * `save_reduce` (its `cls`, `func`, `args`, `kwargs`, `state`,
 * `state_setter`).  Identity only: no user code, no repr but py_safe_repr(). */

static PyObject *type_name_obj(PyTypeObject *t)
{
    char name[256];
    type_qualified_name(t, true, name, sizeof name);
    return PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
}

/* ---- the chain of objects being saved, from the traceback -------------- */

typedef struct {
    PyObject *obj;    /* strong */
    PyObject *reduce; /* strong: locals of its save_reduce frame, or NULL */
    bool generic;     /* that save_reduce was called by save() itself */
    PyObject *batch;  /* strong: locals of a _batch_* frame below it, or NULL */
    bool setitems;    /* batch is _batch_setitems */
} chain_link;

typedef struct {
    chain_link *v;
    Py_ssize_t n, cap;
} chain;

static void chain_free(chain *c)
{
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_XDECREF(c->v[i].obj);
        Py_XDECREF(c->v[i].reduce);
        Py_XDECREF(c->v[i].batch);
    }
    PyMem_Free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
}

static chain_link *chain_push(chain *c, PyObject *obj)
{
    if (c->n == c->cap) {
        Py_ssize_t cap = c->cap ? c->cap * 2 : 32;
        chain_link *v = PyMem_Realloc(c->v, (size_t)cap * sizeof(chain_link));
        if (v == NULL)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    chain_link *l = &c->v[c->n++];
    l->obj = Py_NewRef(obj);
    l->reduce = l->batch = NULL;
    l->setitems = l->generic = false;
    return l;
}

static PyObject *local(PyObject *locals, PyObject *name)
{
    PyObject *v = PyDict_Check(locals) ? PyDict_GetItemWithError(locals, name) : NULL;
    if (v == NULL)
        PyErr_Clear();
    return v;
}

/* The objects this pickler was saving when `exc` went through, outermost
 * first.  The walk follows the traceback while each frame was called by
 * the previous one (an exception raised again keeps its older traceback
 * behind the new frames). */
static void chain_collect(chain *c, PyObject *exc, PyObject *pickler)
{
    PyObject *tb = PyException_GetTraceback(exc);
    PyFrameObject *prev = NULL;
    bool last_was_save = false;

    for (PyObject *t = tb; t && PyTraceBack_Check(t);
         t = (PyObject *)((PyTracebackObject *)t)->tb_next) {
        PyFrameObject *f = ((PyTracebackObject *)t)->tb_frame;
        PyCodeObject *code;
        PyObject *name, *locals = NULL, *self;
        int kind = 0;

        if (f == NULL)
            break;
        if (prev) {
            PyFrameObject *back = PyFrame_GetBack(f);
            Py_XDECREF(back);
            if (back != prev)
                break;
        }
        prev = f;
        code = PyFrame_GetCode(f);
        name = code->co_name;
        if (PyUnicode_Check(name)) {
            if (PyUnicode_Compare(name, str_save) == 0)
                kind = 1;
            else if (PyUnicode_Compare(name, str_save_reduce) == 0)
                kind = 2;
            else if (PyUnicode_Compare(name, str_batch_setitems) == 0)
                kind = 3;
            else if (PyUnicode_Compare(name, str_batch_appends) == 0)
                kind = 4;
        }
        Py_DECREF(code);
        if (kind == 0 || (kind > 1 && c->n == 0)) {
            last_was_save = false;
            continue;
        }
        locals = PyFrame_GetLocals(f);
        self = locals ? local(locals, str_self) : NULL;
        PyErr_Clear();
        if (self != pickler) {
            Py_XDECREF(locals);
            last_was_save = false;
            continue;
        }
        if (kind == 1) {
            PyObject *obj = local(locals, str_obj);
            /* dill's save(obj) calling pickle's save(obj): one object */
            if (obj && !(last_was_save && c->n && c->v[c->n - 1].obj == obj))
                chain_push(c, obj);
            last_was_save = obj != NULL;
        } else {
            chain_link *l = &c->v[c->n - 1];
            if (kind == 2 && l->reduce == NULL && l->batch == NULL) {
                l->reduce = Py_NewRef(locals);
                l->generic = last_was_save;
            } else if (kind >= 3) {
                Py_XSETREF(l->batch, Py_NewRef(locals));
                l->setitems = kind == 3;
            }
            last_was_save = false;
        }
        Py_DECREF(locals);
    }
    Py_XDECREF(tb);
    PyErr_Clear();
}

enum rel {
    REL_NONE,
    REL_INDEX,   /* list/tuple item i */
    REL_KEY,     /* dict item k */
    REL_ELEMENT, /* set element */
    REL_CLASS,   /* reduce: class (NEWOBJ, NEWOBJ_EX) */
    REL_NEWARGS, /* reduce: __new__ arguments */
    REL_RECON,   /* reduce: reconstructor */
    REL_RECONARGS, /* reduce: reconstructor arguments */
    REL_STATE,   /* reduce: state */
    REL_SETTER,  /* reduce: state setter */
};

static bool index_of(PyObject *seq, PyObject *c, Py_ssize_t *index)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == c) {
            *index = i;
            return true;
        }
    return false;
}

/* How `c` (the next object of the chain) sat in chain_link `l`.  The same
 * relations, in the same cases, as the C pickler's notes: a dict key that
 * fails has none (3.14 notes the value only). */
static int relation(const chain_link *l, PyObject *c, Py_ssize_t *index, PyObject **key)
{
    PyObject *p = l->obj;
    PyTypeObject *pt = Py_TYPE(p);

    if (l->batch && l->setitems) {
        PyObject *k = local(l->batch, str_k), *v = local(l->batch, str_v);
        if (k == NULL || k == c || v != c)
            return REL_NONE;
        *key = k;
        return REL_KEY;
    }
    if (l->batch) /* list items (or a list subclass's reduce listitems) */
        return PyList_Check(p) && index_of(p, c, index) ? REL_INDEX : REL_NONE;
    if (l->reduce) {
        PyObject *r = l->reduce, *cls = local(r, str_cls);
        PyObject *args = local(r, str_args);
        if (cls) { /* NEWOBJ / NEWOBJ_EX */
            if (c == cls)
                return REL_CLASS;
            if (c == args || c == local(r, str_kwargs))
                return REL_NEWARGS;
        }
        if (c == local(r, str_func))
            return REL_RECON;
        if (!cls && c == args)
            return REL_RECONARGS;
        if (c == local(r, str_state_setter))
            return REL_SETTER;
        if (c == local(r, str_state))
            return REL_STATE;
        return REL_NONE;
    }
    if ((pt == &PyList_Type || pt == &PyTuple_Type) && index_of(p, c, index))
        return REL_INDEX;
    if (pt == &PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(p, &pos, &k, &v))
            if (v == c) {
                *key = k;
                return REL_KEY;
            }
        return REL_NONE;
    }
    if (pt == &PySet_Type || pt == &PyFrozenSet_Type)
        return REL_ELEMENT;
    return REL_NONE;
}

static const char *const rel_words[] = {
    [REL_ELEMENT] = " element",          [REL_CLASS] = " class",
    [REL_NEWARGS] = " __new__ arguments", [REL_RECON] = " reconstructor",
    [REL_RECONARGS] = " reconstructor arguments", [REL_STATE] = " state",
    [REL_SETTER] = " state setter",
};

static void add_note_text(PyObject *exc, PyObject *note)
{
    if (note != NULL) {
        /* BaseException.add_note itself (as CPython's _PyException_AddNote):
         * an exception class that overrides add_note runs no code here. */
        PyObject *add = PyObject_GetAttrString(PyExc_BaseException, "add_note");
        PyObject *r = add ? PyObject_CallFunctionObjArgs(add, exc, note, NULL) : NULL;
        Py_XDECREF(add);
        Py_XDECREF(r);
        Py_DECREF(note);
    }
    PyErr_Clear();
}

static PyObject *note_for(PyObject *p, int r, Py_ssize_t index, PyObject *key)
{
    PyObject *name = type_name_obj(Py_TYPE(p)), *note = NULL;

    if (name == NULL)
        return NULL;
    if (r == REL_INDEX) {
        note = PyUnicode_FromFormat("when serializing %U item %zd", name, index);
    } else if (r == REL_KEY) {
        PyObject *k = py_safe_repr(key, type_name_obj);
        if (k)
            note = PyUnicode_FromFormat("when serializing %U item %U", name, k);
        Py_XDECREF(k);
    } else if (r > REL_KEY) {
        note = PyUnicode_FromFormat("when serializing %U%s", name, rel_words[r]);
    } else { /* the object note */
        note = PyUnicode_FromFormat("when serializing %U object", name);
    }
    Py_DECREF(name);
    return note;
}

/* The notes, innermost first, as 3.14 adds them while unwinding. */
static void chain_notes(const chain *c, PyObject *exc)
{
    for (Py_ssize_t i = c->n; i-- > 0;) {
        const chain_link *l = &c->v[i];
        if (i + 1 < c->n) {
            Py_ssize_t index = 0;
            PyObject *key = NULL;
            int r = relation(l, c->v[i + 1].obj, &index, &key);
            if (r != REL_NONE)
                add_note_text(exc, note_for(l->obj, r, index, key));
        }
        if (l->reduce && l->generic) /* the reduce path of save() failed */
            add_note_text(exc, note_for(l->obj, REL_NONE, 0, NULL));
    }
}

/* The path, as the C pickler writes it: the root type's qualname, then a
 * segment per note: [3], ['b'] (key_text()), .name for an identifier key
 * of a state dict, {element}, (args), (reconstructor); states are
 * transparent.  A very deep path keeps its root and its last 200
 * characters. */
static PyObject *chain_path(const chain *c, PyObject *root)
{
    sbuf b = {NULL, 0, 0};
    PyObject *q, *path = NULL;
    int outer = REL_NONE;

    if (root == NULL)
        return NULL;
    q = PyType_GetQualName(Py_TYPE(root));
    if (q == NULL || !PyUnicode_Check(q)) {
        Py_XDECREF(q);
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i + 1 < c->n; i++) {
        Py_ssize_t index = 0;
        PyObject *key = NULL;
        int r = relation(&c->v[i], c->v[i + 1].obj, &index, &key);
        char num[40];
        switch (r) {
        case REL_NONE:
            continue;
        case REL_INDEX:
            snprintf(num, sizeof num, "[%zd]", index);
            sb_str(&b, num);
            break;
        case REL_KEY:
            if (outer == REL_STATE && is_short_identifier(key)) {
                const char *u = PyUnicode_AsUTF8(key);
                sb_str(&b, ".");
                sb_str(&b, u ? u : "?");
                PyErr_Clear();
            } else {
                sb_str(&b, "[");
                key_text(&b, key);
                sb_str(&b, "]");
            }
            break;
        case REL_ELEMENT:
            sb_str(&b, "{element}");
            break;
        case REL_NEWARGS:
        case REL_RECONARGS:
            sb_str(&b, "(args)");
            break;
        case REL_CLASS:
        case REL_RECON:
        case REL_SETTER:
            sb_str(&b, "(reconstructor)");
            break;
        default: /* REL_STATE: transparent */
            break;
        }
        outer = r;
    }
    {
        PyObject *tail = b.p ? PyUnicode_DecodeUTF8(b.p, (Py_ssize_t)b.len, "replace")
                             : PyUnicode_FromString("");
        if (tail != NULL) {
            path = PyUnicode_Concat(q, tail);
            Py_DECREF(tail);
        }
    }
    if (path != NULL && PyUnicode_GET_LENGTH(path) > 240) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(path);
        PyObject *end = PyUnicode_Substring(path, n - 200, n);
        PyObject *shorter = end ? PyUnicode_FromFormat("%U...%U", q, end) : NULL;
        Py_XDECREF(end);
        if (shorter != NULL)
            Py_SETREF(path, shorter);
    }
    Py_DECREF(q);
    PyMem_Free(b.p);
    PyErr_Clear();
    return path;
}

/* The innermost failing save() of a traced dump: remember its tag and type
 * for the error event (the first failure since the last save that worked),
 * and emit its enter record if dill had not named it yet. */
static void note_failure(hook_state *s, PyObject *obj, node *n)
{
    saved_exc saved;

    if (s->error_reported)
        return;
    s->error_reported = true;
    PyErr_Fetch(&saved.type, &saved.value, &saved.tb);
    if (n != NULL) {
        flush_pending(s);
        s->err_tag = n->tag;
    } else { /* a folded atom */
        PyTypeObject *t = Py_TYPE(obj);
        s->err_tag = t == &PyUnicode_Type ? SERTRACE_TAG_STR
                     : t == &PyBytes_Type ? SERTRACE_TAG_BYTES
                     : t == &PyLong_Type  ? SERTRACE_TAG_INT
                     : t == &PyFloat_Type ? SERTRACE_TAG_FLOAT
                                          : SERTRACE_TAG_ATOM;
    }
    s->err_type = node_type(s, obj, SERTRACE_TAG_INSTANCE);
    s->err_set = true;
    PyErr_Clear();
    exc_give_back(&saved);
}

/* A hooked dump raised (the exception is set): add the notes and, when the
 * dump is traced (s != NULL), emit its one error event.  `root` is the
 * object passed to dump (or NULL). */
static void dump_failed(hook_state *s, PyObject *pickler, PyObject *root)
{
    saved_exc saved;
    chain c = {NULL, 0, 0};
    PyObject *exc = exc_take(&saved);

    if (exc == NULL || !PyExceptionInstance_Check(exc)) {
        exc_give_back(&saved);
        return;
    }
    chain_collect(&c, exc, pickler);
    chain_notes(&c, exc);
    if (s != NULL) {
        PyObject *msg = py_exception_message(exc, type_name_obj);
        PyObject *path;
        const char *m = NULL, *p = NULL;
        PyErr_Clear();
        path = chain_path(&c, root ? root : (c.n ? c.v[0].obj : NULL));
        if (msg && PyUnicode_Check(msg))
            m = PyUnicode_AsUTF8(msg);
        if (path)
            p = PyUnicode_AsUTF8(path);
        PyErr_Clear();
        sertrace_error(s->d, s->err_set ? s->err_tag : SERTRACE_TAG_UNKNOWN,
                       s->err_set ? s->err_type : 0, m, p);
        Py_XDECREF(msg);
        Py_XDECREF(path);
    }
    chain_free(&c);
    PyErr_Clear();
    exc_give_back(&saved);
}

/* ---- the hooks --------------------------------------------------------- */

enum hook_kind { HOOK_DUMP };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *original; /* strong: the function that was there */
    PyObject *owner;    /* strong: the class it is installed in */
    int kind;
    bool had_own;       /* original was in owner.__dict__ */
    char name[64];      /* serializer name for dump_begin */
} hook;

static PyTypeObject hook_type;

/* A saver is set as pickler.save (in the instance dict, which shadows the
 * class's save for `self.save(x)` calls) for the duration of a traced dump.
 * Explicit class calls such as dill's `StockPickler.save(self, obj)` go
 * straight to the class function, so each object gets exactly one node, and
 * untraced dumps never pay for a hook on save. */
struct saver {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    hook_state *st;     /* NULL once the dump ended: then just forwards */
    PyObject *pickler;  /* strong, or NULL when original is already bound */
    PyObject *original; /* strong: type(pickler).save (or the instance's own) */
};

static PyTypeObject saver_type;

/* original(pickler, *args, **kw) without copying when the caller allows. */
static PyObject *call_original(saver *sv, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[8], **a, *r;

    if (sv->pickler == NULL) /* the instance's own save: already bound */
        return PyObject_Vectorcall(sv->original, args, nargsf, kwnames);
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        PyObject *tmp;
        a = (PyObject **)args - 1;
        tmp = a[0];
        a[0] = sv->pickler;
        r = PyObject_Vectorcall(sv->original, a, (size_t)nargs + 1, kwnames);
        a[0] = tmp;
        return r;
    }
    a = small;
    if (nargs + nkw + 1 > (Py_ssize_t)(sizeof small / sizeof small[0])) {
        a = PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
        if (a == NULL)
            return PyErr_NoMemory();
    }
    a[0] = sv->pickler;
    memcpy(a + 1, args, (size_t)(nargs + nkw) * sizeof(PyObject *));
    r = PyObject_Vectorcall(sv->original, a, (size_t)nargs + 1, kwnames);
    if (a != small)
        PyMem_Free(a);
    return r;
}

static PyObject *save_traced(saver *sv, hook_state *s, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    PyObject *obj = args[0];
    PyObject *r;
    node *n;
    uint64_t enter_pos;
    uint32_t my_index;
    uint8_t tag;
    bool by_dill;

    if (!s->atoms && is_atom(Py_TYPE(obj))) {
        r = call_original(sv, args, nargsf, kwnames);
        if (r == NULL)
            note_failure(s, obj, NULL);
        return r;
    }

    flush_pending(s);
    n = push_node(s);
    if (n == NULL)
        return call_original(sv, args, nargsf, kwnames);
    my_index = s->depth - 1;
    n->obj = obj;
    /* pickle's save() starts with framer.commit_frame(): a frame header
     * written there belongs before this object, as in dill's counts. */
    enter_pos = st_pos(s);
    if (s->framed && s->inframe >= s->frame_target)
        enter_pos += 9;
    n->enter_pos = enter_pos;
    type_info(s, obj, &tag, &by_dill);
    if (memo_hit(s, obj)) {
        emit_enter(s, n, SERTRACE_TAG_MEMO, enter_pos);
        n->kind = NODE_OPEN;
    } else if (by_dill) {
        n->tag = tag; /* until dill's trace call names it */
        n->kind = NODE_PENDING;
    } else {
        emit_enter(s, n, tag, enter_pos);
        n->kind = NODE_OPEN;
    }
    r = call_original(sv, args, nargsf, kwnames);
    /* Drop synthetic dill nodes left open above us (unbalanced traces). */
    while (s->depth > my_index + 1) {
        if (s->nodes[s->depth - 1].kind == NODE_SYNTH && r != NULL)
            sertrace_exit(s->d, st_pos(s));
        s->depth--;
    }
    n = &s->nodes[my_index]; /* the array may have moved */
    if (r == NULL) {
        note_failure(s, obj, n); /* the error event itself is emitted at dump end */
        s->depth = my_index;
        return NULL;
    }
    s->error_reported = false;
    switch (n->kind) {
    case NODE_PENDING:
        emit_enter(s, n, n->tag, n->enter_pos);
        sertrace_exit(s->d, st_pos(s));
        break;
    case NODE_OPEN:
    case NODE_DILL:
        sertrace_exit(s->d, st_pos(s));
        break;
    default:
        break;
    }
    s->depth = my_index;
    return r;
}

static PyObject *saver_call(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    saver *sv = (saver *)self;
    hook_state *s = sv->st;

    if (s == NULL || PyVectorcall_NARGS(nargsf) < 1 || tls_top != s)
        return call_original(sv, args, nargsf, kwnames);
    return save_traced(sv, s, args, nargsf, kwnames);
}

static void saver_dealloc(PyObject *self)
{
    saver *sv = (saver *)self;
    PyObject_GC_UnTrack(self);
    Py_CLEAR(sv->pickler);
    Py_CLEAR(sv->original);
    Py_TYPE(self)->tp_free(self);
}

static int saver_traverse(PyObject *self, visitproc visit, void *arg)
{
    saver *sv = (saver *)self;
    Py_VISIT(sv->pickler);
    Py_VISIT(sv->original);
    return 0;
}

static int saver_clear(PyObject *self)
{
    saver *sv = (saver *)self;
    Py_CLEAR(sv->pickler);
    Py_CLEAR(sv->original);
    return 0;
}

static PyTypeObject saver_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sertrace._pyhook.TracedSave",
    .tp_doc = "A traced pickler's save() during one dump (see sertrace.dill).",
    .tp_basicsize = sizeof(saver),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(saver, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = saver_dealloc,
    .tp_traverse = saver_traverse,
    .tp_clear = saver_clear,
};

/* Shadow pickler.save with a saver for this dump, through attribute calls
 * only (see install_writers).  When the instance already has its own
 * `save`, it is wrapped as is (called without the pickler prepended). */
static int install_saver(hook_state *s)
{
    PyObject *cls_save, *cur = NULL, *orig = NULL;
    saver *sv = NULL;
    int rc = -1;

    cls_save = _PyType_Lookup(Py_TYPE(s->pickler), str_save);
    cur = PyObject_GetAttr(s->pickler, str_save);
    if (cur == NULL)
        goto end;
    if (cls_save && PyMethod_Check(cur) && PyMethod_GET_FUNCTION(cur) == cls_save &&
        PyMethod_GET_SELF(cur) == s->pickler) {
        orig = Py_NewRef(cls_save);
    } else {
        s->saved_own_save = Py_NewRef(cur);
        orig = Py_NewRef(cur);
    }
    sv = PyObject_GC_New(saver, &saver_type);
    if (sv == NULL)
        goto end;
    sv->vectorcall = saver_call;
    sv->st = s;
    sv->pickler = s->saved_own_save ? NULL : Py_NewRef(s->pickler);
    sv->original = orig;
    orig = NULL;
    PyObject_GC_Track(sv);
    if (PyObject_SetAttr(s->pickler, str_save, (PyObject *)sv) < 0)
        goto end;
    s->saver = sv;
    sv = NULL;
    rc = 0;
end:
    Py_XDECREF(sv);
    Py_XDECREF(orig);
    Py_XDECREF(cur);
    if (rc < 0) {
        Py_CLEAR(s->saved_own_save);
        PyErr_Clear();
    }
    return rc;
}

static void remove_saver(hook_state *s)
{
    if (s->saver == NULL)
        return;
    s->saver->st = NULL;
    if (s->saved_own_save) {
        if (PyObject_SetAttr(s->pickler, str_save, s->saved_own_save) < 0)
            PyErr_Clear();
    } else if (PyObject_DelAttr(s->pickler, str_save) < 0) {
        PyErr_Clear();
    }
    Py_CLEAR(s->saver);
    Py_CLEAR(s->saved_own_save);
}

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

/* Same callable?  Bound methods are compared by function and self, as a
 * new one is made on every lookup. */
static bool same_callable(PyObject *a, PyObject *b)
{
    if (a == b)
        return true;
    if (PyMethod_Check(a) && PyMethod_Check(b))
        return PyMethod_GET_FUNCTION(a) == PyMethod_GET_FUNCTION(b) &&
               PyMethod_GET_SELF(a) == PyMethod_GET_SELF(b);
    if (PyCFunction_Check(a) && PyCFunction_Check(b))
        return PyCFunction_GET_FUNCTION(a) == PyCFunction_GET_FUNCTION(b) &&
               PyCFunction_GET_SELF(a) == PyCFunction_GET_SELF(b);
    return false;
}

/* Is `w` (pickler.write) the class's `write` rather than the instance's? */
static bool write_is_class_level(PyObject *pickler, PyObject *cls_write, PyObject *w)
{
    descrgetfunc get = Py_TYPE(cls_write)->tp_descr_get;
    PyObject *via;
    bool same;

    if (w == cls_write)
        return true;
    if (PyFunction_Check(cls_write)) /* the usual case: no allocation */
        return PyMethod_Check(w) && PyMethod_GET_FUNCTION(w) == cls_write &&
               PyMethod_GET_SELF(w) == pickler;
    if (get == NULL)
        return false;
    via = get(cls_write, pickler, (PyObject *)Py_TYPE(pickler));
    if (via == NULL) {
        PyErr_Clear();
        return true; /* cannot tell: do not trace */
    }
    same = same_callable(via, w);
    Py_DECREF(via);
    return same;
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

/* Watch the file's own `write` for the dump: some picklers write around
 * their write path, straight to the file (joblib's NumpyPickler writes each
 * array's data with `self.file_handle.write(...)`), and those bytes are in
 * the payload too.  `fw` is the pickler's file write (framer.file_write or
 * pickler.write), bound to the file when the pickler was made; the file's
 * `write` attribute is shadowed per instance by a counting writer that
 * forwards to it, so a later `file.write(b)` lookup is counted, while the
 * pickler's own path (bound before) is not counted twice.  Only when it is
 * certainly the plain case: fw is the class's `write` bound to that file,
 * the file takes attributes the plain way (generic getattr/setattr, a
 * __dict__) and has no `write` of its own; nothing of the file's own code
 * runs.  Otherwise the dump gets a note saying such bytes are not seen. */
static void watch_file(hook_state *s, PyObject *fw)
{
    PyObject *file = NULL, *cls_write = NULL, *cur = NULL;
    PyTypeObject *t;
    writer *w;

    if (PyMethod_Check(fw))
        file = PyMethod_GET_SELF(fw);
    else if (PyCFunction_Check(fw))
        file = PyCFunction_GET_SELF(fw);
    if (file == NULL || PyModule_Check(file) || PyType_Check(file))
        goto unwatched;
    t = Py_TYPE(file);
    if (t->tp_setattro != PyObject_GenericSetAttr || t->tp_getattro != PyObject_GenericGetAttr ||
        (t->tp_dictoffset == 0 && !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT)))
        goto unwatched;
    cls_write = _PyType_Lookup(t, str_write);
    if (cls_write == NULL ||
        !(PyFunction_Check(cls_write) || Py_IS_TYPE(cls_write, &PyMethodDescr_Type)))
        goto unwatched;
    Py_INCREF(cls_write);
    if (!write_is_class_level(file, cls_write, fw))
        goto unwatched;
    cur = PyObject_GetAttr(file, str_write);
    if (cur == NULL || !same_callable(cur, fw))
        goto unwatched;
    w = writer_new(s, fw, WRITER_PLAIN);
    if (w == NULL)
        goto unwatched;
    if (PyObject_SetAttr(file, str_write, (PyObject *)w) < 0) {
        Py_DECREF(w);
        goto unwatched;
    }
    s->file = Py_NewRef(file);
    s->w_around = w;
    Py_DECREF(cur);
    Py_DECREF(cls_write);
    return;
unwatched:
    PyErr_Clear();
    Py_XDECREF(cur);
    Py_XDECREF(cls_write);
    sertrace_note(s->d, "unwatched",
                  "the file's write could not be watched: bytes written straight to the "
                  "file, around the pickler's write path, are not counted");
    /* So the dump's sizes may fall short: every output shows them as
     * lower bounds, never as exact. */
    sertrace_dump_lower_bounds(s->d);
}

static void unwatch_file(hook_state *s)
{
    PyObject *cur;

    if (s->w_around == NULL)
        return;
    s->w_around->st = NULL;
    cur = PyObject_GetAttr(s->file, str_write);
    if (cur == (PyObject *)s->w_around && PyObject_DelAttr(s->file, str_write) < 0)
        PyErr_Clear();
    Py_XDECREF(cur);
    PyErr_Clear();
    Py_CLEAR(s->w_around);
    Py_CLEAR(s->file);
}

/* Replace pickler.write / framer.file_write with counting writers.
 * Fails (-1) only if an attribute cannot be set. */
static int install_writers(hook_state *s)
{
    PyObject *pickler = s->pickler, *fw = NULL, *target = NULL;
    int rc = -1;

    /* s->saved_write is the instance's own write (untraceable_reason()).
     * Attribute calls only: asking for the instance __dict__ would turn
     * CPython's inline attribute values into a real dict and slow every
     * self.x of the dump. */
    if (s->saved_write == NULL)
        goto end;
    s->framer = PyObject_GetAttr(pickler, str_framer);
    if (s->framer != NULL) {
        fw = PyObject_GetAttr(s->framer, str_file_write);
        if (fw != NULL && PyObject_HasAttr(s->framer, str_current_frame)) {
            PyObject *target_size = PyObject_GetAttr(s->framer, str_frame_target);
            s->frame_target = 64 * 1024;
            if (target_size && PyLong_Check(target_size))
                s->frame_target = PyLong_AsUnsignedLongLong(target_size);
            Py_XDECREF(target_size);
            PyErr_Clear();
            s->w_file = writer_new(s, fw, WRITER_FILE);
            s->w_write = writer_new(s, s->saved_write, WRITER_FRAMED);
            if (s->w_file == NULL || s->w_write == NULL)
                goto end;
            if (PyObject_SetAttr(s->framer, str_file_write, (PyObject *)s->w_file) < 0)
                goto end;
            s->saved_file_write = fw;
            fw = NULL;
            if (PyObject_SetAttr(pickler, str_write, (PyObject *)s->w_write) < 0) {
                PyObject_SetAttr(s->framer, str_file_write, s->saved_file_write);
                Py_CLEAR(s->saved_file_write);
                goto end;
            }
            s->framed = true;
            s->frame_dirty = true;
            watch_file(s, s->saved_file_write);
            rc = 0;
            goto end;
        }
    }
    PyErr_Clear();
    Py_CLEAR(s->framer);
    target = s->saved_write;
    s->w_write = writer_new(s, target, WRITER_PLAIN);
    if (s->w_write == NULL)
        goto end;
    if (PyObject_SetAttr(pickler, str_write, (PyObject *)s->w_write) < 0)
        goto end;
    watch_file(s, target);
    rc = 0;
end:
    Py_XDECREF(fw);
    if (rc < 0)
        PyErr_Clear();
    return rc;
}

static void restore_writers(hook_state *s)
{
    saved_exc saved;

    PyErr_Fetch(&saved.type, &saved.value, &saved.tb);
    remove_saver(s);
    unwatch_file(s);
    if (s->w_write) {
        s->w_write->st = NULL;
        if (s->saved_write && PyObject_SetAttr(s->pickler, str_write, s->saved_write) < 0)
            PyErr_Clear();
    }
    if (s->w_file) {
        s->w_file->st = NULL;
        if (s->saved_file_write && s->framer &&
            PyObject_SetAttr(s->framer, str_file_write, s->saved_file_write) < 0)
            PyErr_Clear();
    }
    Py_CLEAR(s->w_write);
    Py_CLEAR(s->w_file);
    Py_CLEAR(s->saved_write);
    Py_CLEAR(s->saved_file_write);
    Py_CLEAR(s->framer);
    Py_CLEAR(s->frame);
    Py_CLEAR(s->frame_write);
    Py_CLEAR(s->memo);
    Py_CLEAR(s->memo_key);
    Py_CLEAR(s->dispatch);
    PyMem_Free(s->nodes);
    s->nodes = NULL;
    exc_give_back(&saved);
}

/* The original dump, untraced; if it raises, the exception gets the same
 * notes as in a traced dump (built from its traceback, so only then). */
static PyObject *untraced_dump(hook *h, PyObject *pickler, PyObject *root,
                               PyObject *const *args, size_t nargsf, PyObject *kwnames)
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
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError) &&
        ((hook *)self)->original) {
        PyErr_Clear();
        r = PyObject_GetAttr(((hook *)self)->original, name);
    }
    return r;
}

static PyMemberDef hook_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(hook, original), READONLY, "the hooked function"},
    {"owner", T_OBJECT, offsetof(hook, owner), READONLY, "the class it is installed in"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject hook_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sertrace._pyhook.Hook",
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

static PyObject *py_hook_class(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
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

static PyObject *py_unhook_class(PyObject *mod, PyObject *cls)
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

static PyObject *py_is_hooked(PyObject *mod, PyObject *cls)
{
    (void)mod;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "is_hooked(cls): a class");
        return NULL;
    }
    return PyBool_FromLong(own_hook(cls, str_dump) != NULL);
}

/* ---- dill logger proxy ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *wrapped; /* dill.logger.adapter */
} logger_proxy;

static PyTypeObject logger_proxy_type;

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

/* `trace` lives in the proxy type's dict as this plain callable, not as a
 * method, so `logger.trace(...)` allocates no bound method per call. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} trace_fn;

static PyObject *proxy_trace(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
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
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        r = PyObject_GetAttr(((logger_proxy *)self)->wrapped, name);
    }
    return r;
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

static PyTypeObject trace_fn_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sertrace._pyhook.TraceFunction",
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

static PyTypeObject logger_proxy_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sertrace._pyhook.LoggerProxy",
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

static PyObject *py_wrap_logger(PyObject *mod, PyObject *adapter)
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

static PyObject *py_tracing(PyObject *mod, PyObject *pickler)
{
    (void)mod;
    for (hook_state *t = tls_top; t; t = t->prev)
        if (t->pickler == pickler)
            Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyObject *py_untraced(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (untraced_classes == NULL)
        return PyDict_New();
    return PyDict_Copy(untraced_classes);
}

static PyMethodDef module_methods[] = {
    {"hook_class", (PyCFunction)(void (*)(void))py_hook_class, METH_FASTCALL,
     "hook_class(cls, name): put sertrace hooks around cls.save and cls.dump; dumps are "
     "named `name`.  Idempotent."},
    {"unhook_class", py_unhook_class, METH_O,
     "unhook_class(cls) -> bool: remove the hooks hook_class() put in cls."},
    {"is_hooked", py_is_hooked, METH_O, "is_hooked(cls) -> bool: cls has its own hooks."},
    {"wrap_logger", py_wrap_logger, METH_O,
     "wrap_logger(adapter) -> proxy to assign to dill._dill.logger."},
    {"untraced", py_untraced, METH_NOARGS,
     "untraced() -> {class: reason}: hooked pickler classes whose dumps ran untraced "
     "because the hooks cannot follow them (recorded once per class)."},
    {"tracing", py_tracing, METH_O,
     "tracing(pickler) -> bool: a traced dump of this pickler is running on this thread."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sertrace._pyhook",
    .m_doc = "C hooks that trace pure-Python picklers (dill.Pickler, pickle._Pickler) with "
             "sertrace.  Use sertrace.dill, not this module.",
    .m_size = -1,
    .m_methods = module_methods,
};

#define INTERN(var, text)                                                      \
    do {                                                                       \
        if ((var) == NULL && ((var) = PyUnicode_InternFromString(text)) == NULL) \
            return NULL;                                                       \
    } while (0)

PyMODINIT_FUNC PyInit__pyhook(void)
{
    PyObject *m;

    INTERN(str_write, "write");
    INTERN(str_framer, "framer");
    INTERN(str_file_write, "file_write");
    INTERN(str_current_frame, "current_frame");
    INTERN(str_memo, "memo");
    INTERN(str_dispatch, "dispatch");
    INTERN(str_proto, "proto");
    INTERN(str_trace, "trace");
    INTERN(str_trace_depth, "_trace_depth");
    INTERN(str_save, "save");
    INTERN(str_dump, "dump");
    INTERN(str_module, "__module__");
    INTERN(str_frame_target, "_FRAME_SIZE_TARGET");
    INTERN(str_save_reduce, "save_reduce");
    INTERN(str_batch_setitems, "_batch_setitems");
    INTERN(str_batch_appends, "_batch_appends");
    INTERN(str_self, "self");
    INTERN(str_obj, "obj");
    INTERN(str_k, "k");
    INTERN(str_v, "v");
    INTERN(str_cls, "cls");
    INTERN(str_args, "args");
    INTERN(str_kwargs, "kwargs");
    INTERN(str_func, "func");
    INTERN(str_state, "state");
    INTERN(str_state_setter, "state_setter");
    if (PyType_Ready(&writer_type) < 0 || PyType_Ready(&hook_type) < 0 ||
        PyType_Ready(&saver_type) < 0 || PyType_Ready(&trace_fn_type) < 0 ||
        PyType_Ready(&logger_proxy_type) < 0)
        return NULL;
    {
        trace_fn *tf = PyObject_New(trace_fn, &trace_fn_type);
        int rc;
        if (tf == NULL)
            return NULL;
        tf->vectorcall = proxy_trace;
        rc = PyDict_SetItem(logger_proxy_type.tp_dict, str_trace, (PyObject *)tf);
        Py_DECREF(tf);
        if (rc < 0)
            return NULL;
        PyType_Modified(&logger_proxy_type);
    }
    m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Hook", (PyObject *)&hook_type) < 0 ||
        PyModule_AddObjectRef(m, "LoggerProxy", (PyObject *)&logger_proxy_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
