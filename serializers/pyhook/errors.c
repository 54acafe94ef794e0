/* serializers/pyhook/errors.c -- notes and the error event of a failed dump.
 *
 * When a hooked dump raises, the exception gets the notes the C pickler
 * and CPython 3.14 add, and a traced dump gets ONE sertrace_error() with
 * the innermost failing object's tag and type, the message and the path.
 * Both are read from the exception's traceback on the error path only
 * (chain_collect: the save / save_reduce / _batch_* frames of this
 * pickler and their locals, compared by identity), so a dump that works
 * pays nothing.  No user code runs and no object value reaches the trace.
 */
#include "pyhook.h"

/* ---- error path -------------------------------------------------------- */

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
 * `state_setter`).  Identity only: no user code.  The texts (notes, key
 * rule, path segments, message) are serializers/objdesc's, the C pickler's. */

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
    Py_ssize_t n;
    size_t cap;
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
    if ((size_t)c->n == c->cap) {
        chain_link *v = pyhook_grow(c->v, &c->cap, sizeof(chain_link), 32);
        if (v == NULL)
            return NULL;
        c->v = v;
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
            return OD_REL_NONE;
        *key = k;
        return OD_REL_KEY;
    }
    if (l->batch) /* list items (or a list subclass's reduce listitems) */
        return PyList_Check(p) && index_of(p, c, index) ? OD_REL_INDEX : OD_REL_NONE;
    if (l->reduce) {
        PyObject *r = l->reduce, *cls = local(r, str_cls);
        PyObject *args = local(r, str_args);
        if (cls) { /* NEWOBJ / NEWOBJ_EX */
            if (c == cls)
                return OD_REL_CLASS;
            if (c == args || c == local(r, str_kwargs))
                return OD_REL_NEW_ARGS;
        }
        if (c == local(r, str_func))
            return OD_REL_RECON;
        if (!cls && c == args)
            return OD_REL_RECON_ARGS;
        if (c == local(r, str_state_setter))
            return OD_REL_SETTER;
        if (c == local(r, str_state))
            return OD_REL_STATE;
        return OD_REL_NONE;
    }
    if ((pt == &PyList_Type || pt == &PyTuple_Type) && index_of(p, c, index))
        return OD_REL_INDEX;
    if (pt == &PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(p, &pos, &k, &v))
            if (v == c) {
                *key = k;
                return OD_REL_KEY;
            }
        return OD_REL_NONE;
    }
    if (pt == &PySet_Type || pt == &PyFrozenSet_Type)
        return OD_REL_ELEMENT;
    return OD_REL_NONE;
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
            if (r != OD_REL_NONE)
                od_add_note(exc, od_note_text(l->obj, r, index, key));
        }
        if (l->reduce && l->generic) /* the reduce path of save() failed */
            od_add_note(exc, od_note_text(l->obj, OD_REL_OBJECT, 0, NULL));
    }
}

/* The path, as the C pickler writes it: the root type's qualname, then a
 * segment per note: [3], ['b'] (od_key_text()), .name for an identifier key
 * of a state dict, {element}, (args), (reconstructor); states are
 * transparent.  A very deep path keeps its root and its last 200
 * characters. */
static PyObject *chain_path(const chain *c, PyObject *root)
{
    PyObject *parts = PyList_New(0), *path;
    int outer = OD_REL_NONE;

    if (parts == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i + 1 < c->n; i++) {
        Py_ssize_t index = 0;
        PyObject *key = NULL;
        int r = relation(&c->v[i], c->v[i + 1].obj, &index, &key);
        if (r == OD_REL_NONE)
            continue;
        if (od_path_append(parts, r, index, key, outer) < 0)
            break;
        outer = r;
    }
    path = od_path_join(root, parts);
    Py_DECREF(parts);
    PyErr_Clear();
    return path;
}

/* The innermost failing save() of a traced dump: remember its tag and type
 * for the error event (the first failure since the last save that worked),
 * and emit its enter record if dill had not named it yet. */
void note_failure(hook_state *s, PyObject *obj, node *n)
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
        s->err_tag = od_atom_tag(obj);
    }
    s->err_type = node_type(s, obj, SERTRACE_TAG_INSTANCE);
    s->err_set = true;
    PyErr_Clear();
    exc_give_back(&saved);
}

/* A hooked dump raised (the exception is set): add the notes and, when the
 * dump is traced (s != NULL), emit its one error event.  `root` is the
 * object passed to dump (or NULL). */
void dump_failed(hook_state *s, PyObject *pickler, PyObject *root)
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
        PyObject *msg = od_exception_message(exc);
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
