/* serializers/pyhook/writers.c -- the byte counts of a traced dump.
 *
 * For the duration of a traced dump, pickler.write and framer.file_write
 * are shadowed by counting writers (install_writers), and the file's own
 * `write` too when it can be (watch_file), so bytes written around the
 * pickler's write path are counted as well.  The position of the dump is
 * bytes passed to the file + bytes in the current protocol-4 frame
 * (st_pos); nothing calls file.tell(), so pipes and sockets work.
 * restore_writers() removes every attribute the dump set (writers and
 * saver) and frees the dump's state.  Attribute calls only: reading the
 * instance __dict__ would slow every self.x of the dump (README).
 */
#include "pyhook.h"

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

static PyObject *writer_count(writer *w, hook_state *s, PyObject *const *args, size_t nargsf);

/* An extension code (copyreg's registry): pickle's save_global writes a
 * global that has one as a single EXT1 / EXT2 / EXT4 opcode (2, 3 or 5
 * bytes), its node's first and only write.  The C pickler shows it as an
 * Ext node inside the global's node (serializers/objdesc's tree), so the
 * pickler's write opens and closes one around those bytes. */
static bool ext_write(const hook_state *s, PyObject *data, const node **global)
{
    const node *top;
    Py_ssize_t n;
    unsigned char op;

    if (!PyBytes_CheckExact(data) || s->depth == 0 || s->suspended)
        return false;
    n = PyBytes_GET_SIZE(data);
    if (n != 2 && n != 3 && n != 5)
        return false;
    op = (unsigned char)PyBytes_AS_STRING(data)[0];
    if (!((op == 0x82 && n == 2) || (op == 0x83 && n == 3) || (op == 0x84 && n == 5)))
        return false;
    top = &s->nodes[s->depth - 1];
    if ((top->kind != NODE_OPEN && top->kind != NODE_DILL) || top->obj == NULL ||
        top->enter_pos != st_pos(s) ||
        !(od_is_class_tag(top->tag) || od_is_function_tag(top->tag) ||
          top->tag == SERTRACE_TAG_GLOBAL))
        return false;
    *global = top;
    return true;
}

static PyObject *writer_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    writer *w = (writer *)self;
    hook_state *s = w->st;
    const node *global;
    PyObject *r;

    if (s == NULL || PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
        return PyObject_Vectorcall(w->target, args, nargsf, kwnames);
    if (w != s->w_write || !ext_write(s, args[0], &global))
        return writer_count(w, s, args, nargsf);
    sertrace_enter(s->d, SERTRACE_TAG_EXT, node_type(s, global->obj, SERTRACE_TAG_EXT),
                   (uintptr_t)global->obj, od_length(global->obj), st_pos(s));
    r = writer_count(w, s, args, nargsf);
    if (r != NULL) /* on failure it stays open, as a failed node */
        sertrace_exit(s->d, st_pos(s));
    return r;
}

/* Forward one write and count its bytes (see the modes above). */
static PyObject *writer_count(writer *w, hook_state *s, PyObject *const *args, size_t nargsf)
{
    PyObject *data = args[0], *r;
    Py_ssize_t n;

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

PyTypeObject writer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sertrace._pyhook.CountingWriter",
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

/* Same callable?  Bound methods are compared by function and self, as a
 * new one is made on every lookup. */
bool same_callable(PyObject *a, PyObject *b)
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
bool write_is_class_level(PyObject *pickler, PyObject *cls_write, PyObject *w)
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
int install_writers(hook_state *s)
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

void restore_writers(hook_state *s)
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
