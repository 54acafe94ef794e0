/* serializers/pyhook/saver.c -- the traced save(): one node per object.
 *
 * During a traced dump pickler.save is shadowed by a C "saver"
 * (install_saver).  For each save(obj) it folds atoms into their parent
 * (unless the dump asks for them), or pushes a node on the dump's stack,
 * chooses its tag (a memo hit, a dill-dispatched object whose tag dill's
 * trace call will give, or sertrace's own tag) and emits the enter record
 * at the position after pickle's frame commit, calls the class's save,
 * and emits the exit record.  Type names are built without user code,
 * only the first time a type is seen in the dump; tags and the
 * "dispatched to dill" answer are cached per type for the dump.
 */
#include "pyhook.h"

/* ---- tags and names: serializers/objdesc -------------------------------- */

/* An atom's tag: folded into its parent unless the dump asks for atoms. */
static inline bool is_atom_tag(uint8_t tag)
{
    return tag == SERTRACE_TAG_ATOM || tag == SERTRACE_TAG_INT || tag == SERTRACE_TAG_FLOAT ||
           tag == SERTRACE_TAG_STR || tag == SERTRACE_TAG_BYTES;
}

/* The dump's type index for a node of `tag` (objdesc's naming: the class
 * or function itself for class and function tags, a reference to it for
 * a memo hit, else the object's type).  Names are built only the first
 * time a key is seen; the type's index is cached per dump. */
uint32_t node_type(hook_state *s, PyObject *obj, uint8_t tag)
{
    int naming;

    if (obj == NULL)
        return 0;
    naming = od_naming(obj, tag);
    if (naming == OD_BY_TYPE) {
        PyTypeObject *t = Py_TYPE(obj);
        size_t h = TCACHE_SLOT(t);
        uint32_t idx;
        if (s->tcache[h].type == t && s->tcache[h].index)
            return s->tcache[h].index;
        idx = od_type_index(s->d, obj, OD_BY_TYPE);
        if (s->tcache[h].type == t)
            s->tcache[h].index = idx;
        return idx;
    }
    return od_type_index(s->d, obj, naming);
}

static inline void type_info(hook_state *s, PyObject *obj, uint8_t *tag, bool *dill)
{
    PyTypeObject *t = Py_TYPE(obj);
    size_t h = TCACHE_SLOT(t);

    if (s->tcache[h].type != t) {
        s->tcache[h].type = t;
        s->tcache[h].index = 0;
        s->tcache[h].tag = od_tag(obj, true);
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
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30 &&   \
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

node *push_node(hook_state *s)
{
    if (s->depth == s->cap) {
        node *n = pyhook_grow(s->nodes, &s->cap, sizeof(node), 64);
        if (n == NULL)
            return NULL;
        s->nodes = n;
    }
    memset(&s->nodes[s->depth], 0, sizeof(node));
    return &s->nodes[s->depth++];
}

void emit_enter(hook_state *s, node *n, uint8_t tag, uint64_t pos)
{
    n->tag = tag;
    n->type = node_type(s, n->obj, tag);
    uint8_t label_kind = SERTRACE_LABEL_NONE;
    uint64_t label_value = 0;
    if (n->label_kind != 0)
        node_label(s, n, &label_kind, &label_value);
    sertrace_enter_fast(s->d, tag, n->type, (uintptr_t)n->obj,
                        n->obj && tag != SERTRACE_TAG_ITEMS ? od_length(n->obj) : 0, pos,
                        label_kind, label_value);
}

/* Emit the enter record of a pending node (before a child or at exit). */
void flush_pending(hook_state *s)
{
    node *n = s->depth ? &s->nodes[s->depth - 1] : NULL;

    if (n && n->kind == NODE_PENDING) {
        emit_enter(s, n, n->tag, n->enter_pos);
        n->kind = NODE_OPEN;
    }
}

/* A saver is set as pickler.save (in the instance dict, which shadows the
 * class's save for `self.save(x)` calls) for the duration of a traced dump.
 * Explicit class calls such as dill's `StockPickler.save(self, obj)` go
 * straight to the class function, so each object gets exactly one node, and
 * untraced dumps never pay for a hook on save. */

/* original(pickler, *args, **kw) without copying when the caller allows. */
static PyObject *call_original(saver *sv, PyObject *const *args, size_t nargsf, PyObject *kwnames)
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
    uint8_t tag, label_kind = 0;
    uint64_t label_value = 0;
    PyObject *label_key = NULL;
    bool by_dill, memo;

    type_info(s, obj, &tag, &by_dill);
    /* Every call counts for the parent's labels, a folded atom's too. */
    if (s->depth > 0)
        label_child(s, &s->nodes[s->depth - 1], obj, &label_kind, &label_value, &label_key);
    /* An atom is folded into its parent unless the dump asks for atoms;
     * the dumped object itself is a node at every granularity (as in the
     * C pickler).  A folded atom is one unit even when it pickles through
     * a reduce (bytes below protocol 3): its parts get no nodes. */
    if (!s->atoms && is_atom_tag(tag) && s->depth > 0) {
        s->suspended++;
        r = call_original(sv, args, nargsf, kwnames);
        s->suspended--;
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
    n->label_kind = label_kind;
    n->label_value = label_value;
    n->key = label_key;
    n->child_mode = child_mode_of(obj);
    /* pickle's save() starts with framer.commit_frame(): a frame header
     * written there belongs before this object, as in dill's counts. */
    enter_pos = st_pos(s);
    if (s->framed && s->inframe >= s->frame_target)
        enter_pos += 9;
    n->enter_pos = enter_pos;
    memo = memo_hit(s, obj);
    if (s->persid || (by_dill && !memo)) {
        /* until dill's trace call names it, or save_pers makes it PERSID
         * (a persistent id comes before the memo, as in the C pickler) */
        n->tag = memo ? SERTRACE_TAG_MEMO : tag;
        n->kind = NODE_PENDING;
    } else if (memo) {
        emit_enter(s, n, SERTRACE_TAG_MEMO, enter_pos);
        n->kind = NODE_OPEN;
    } else {
        emit_enter(s, n, tag, enter_pos);
        n->kind = NODE_OPEN;
    }
    r = call_original(sv, args, nargsf, kwnames);
    /* Drop synthetic dill nodes left open above us (unbalanced traces). */
    while (s->depth > my_index + 1) {
        if (s->nodes[s->depth - 1].kind == NODE_SYNTH && r != NULL)
            sertrace_exit_fast(s->d, st_pos(s));
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
        sertrace_exit_fast(s->d, st_pos(s));
        break;
    case NODE_OPEN:
    case NODE_DILL:
        sertrace_exit_fast(s->d, st_pos(s));
        break;
    default:
        break;
    }
    s->depth = my_index;
    return r;
}

static PyObject *saver_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    saver *sv = (saver *)self;
    hook_state *s = sv->st;

    if (s == NULL || PyVectorcall_NARGS(nargsf) < 1 || tls_top != s || s->suspended)
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

PyTypeObject saver_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sertrace._pyhook.TracedSave",
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
/* A reduce's listitems / dictitems: pickle's save_reduce writes them with
 * self._batch_appends(listitems) / self._batch_setitems(dictitems).  The C
 * pickler makes them one ITEMS node inside the object's node (objdesc's
 * tree), so during a traced dump those two methods are shadowed too, and a
 * call made by save_reduce (the calling frame's code name, read only
 * then) opens an ITEMS node named by the object being reduced.  Calls from
 * save_list / save_dict (a list's or dict's own items) are no node.  Both
 * say how the items are labelled (labels.c): positions or key/value. */
static bool called_by_save_reduce(void)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed: the Python caller */
    PyCodeObject *code;
    bool yes;

    if (f == NULL)
        return false;
    code = PyFrame_GetCode(f);
    yes = PyUnicode_Check(code->co_name) && PyUnicode_Compare(code->co_name, str_save_reduce) == 0;
    Py_DECREF(code);
    PyErr_Clear();
    return yes;
}

/* A batch of a list's or dict's own items (save_list / save_dict): the
 * items are labelled on the container's node (labels.c). */
static PyObject *own_batch(saver *sv, hook_state *s, PyObject *const *args, size_t nargsf,
                           PyObject *kwnames, uint8_t mode)
{
    uint32_t at = s->depth - 1;
    node saved = s->nodes[at];
    PyObject *r;

    s->nodes[at].child_mode = mode;
    s->nodes[at].children = 0;
    r = call_original(sv, args, nargsf, kwnames);
    if (s->depth > at) { /* the stack may have moved, not shrunk below us */
        s->nodes[at].child_mode = saved.child_mode;
        s->nodes[at].children = saved.children;
        s->nodes[at].last_key = saved.last_key;
    }
    return r;
}

static PyObject *batcher_call(PyObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
    saver *sv = (saver *)self;
    hook_state *s = sv->st;
    PyObject *obj, *r;
    uint32_t my_index;
    uint8_t mode;
    node *n;

    if (s == NULL || tls_top != s || s->suspended || s->depth == 0)
        return call_original(sv, args, nargsf, kwnames);
    mode = sv == s->batcher[1] ? CHILD_PAIRS : CHILD_POS;
    if (!called_by_save_reduce())
        return own_batch(sv, s, args, nargsf, kwnames, mode);
    flush_pending(s);
    obj = s->nodes[s->depth - 1].obj;
    if (obj == NULL || (n = push_node(s)) == NULL)
        return call_original(sv, args, nargsf, kwnames);
    my_index = s->depth - 1;
    n->obj = obj;
    n->kind = NODE_OPEN;
    n->child_mode = mode;
    n->enter_pos = st_pos(s);
    emit_enter(s, n, SERTRACE_TAG_ITEMS, n->enter_pos);
    r = call_original(sv, args, nargsf, kwnames);
    while (s->depth > my_index + 1) { /* unbalanced dill nodes, as in save_traced */
        if (s->nodes[s->depth - 1].kind == NODE_SYNTH && r != NULL)
            sertrace_exit_fast(s->d, st_pos(s));
        s->depth--;
    }
    if (r != NULL) /* on failure the node stays open, as a failed node */
        sertrace_exit_fast(s->d, st_pos(s));
    s->depth = my_index;
    return r;
}

/* A persistent id: pickle's save(obj) calls self.save_pers(pid) instead of
 * writing obj.  The C pickler makes that a PERSID node named by obj's type
 * (objdesc's tree); here the node of obj is still pending (see
 * save_traced: nodes wait for their tag when the pickler has its own
 * persistent_id), so save_pers just gives it that tag. */
static PyObject *pers_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    saver *sv = (saver *)self;
    hook_state *s = sv->st;

    if (s != NULL && tls_top == s && !s->suspended && s->depth > 0 &&
        s->nodes[s->depth - 1].kind == NODE_PENDING) {
        s->nodes[s->depth - 1].tag = SERTRACE_TAG_PERSID;
        s->nodes[s->depth - 1].child_mode = CHILD_NONE; /* the id has no label */
    }
    return call_original(sv, args, nargsf, kwnames);
}

/* save_reduce(func, args, state=None, listitems=None, dictitems=None,
 * state_setter=None, *, obj=None): the parts it saves are labelled by
 * their role on the reduced object's node (labels.c), which is the top of
 * the stack (save() or dill's function called it for that object). */
static PyObject *reduce_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    saver *sv = (saver *)self;
    hook_state *s = sv->st;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *state = nargs > 2 ? args[2] : NULL, *setter = nargs > 5 ? args[5] : NULL, *r;
    uint32_t at;
    node saved;

    if (s == NULL || tls_top != s || s->suspended || s->depth == 0)
        return call_original(sv, args, nargsf, kwnames);
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_Compare(name, str_state) == 0)
            state = args[nargs + i];
        else if (PyUnicode_Compare(name, str_state_setter) == 0)
            setter = args[nargs + i];
    }
    PyErr_Clear();
    at = s->depth - 1;
    saved = s->nodes[at];
    s->nodes[at].child_mode = CHILD_REDUCE;
    s->nodes[at].children = 0;
    s->nodes[at].r_state = state == Py_None ? NULL : state;
    s->nodes[at].r_setter = setter == Py_None ? NULL : setter;
    r = call_original(sv, args, nargsf, kwnames);
    if (s->depth > at) {
        s->nodes[at].child_mode = saved.child_mode;
        s->nodes[at].children = saved.children;
        s->nodes[at].r_state = saved.r_state;
        s->nodes[at].r_setter = saved.r_setter;
    }
    return r;
}

/* Does the pickler have a persistent_id of its own (not pickle._Pickler's,
 * which returns None)?  Read from the function's own fields. */
static bool own_persistent_id(hook_state *s)
{
    PyObject *f = PyObject_GetAttr(s->pickler, str_persistent_id), *fn;
    bool own = false;

    if (f == NULL) {
        PyErr_Clear();
        return false;
    }
    fn = PyMethod_Check(f) ? PyMethod_GET_FUNCTION(f) : f;
    if (!PyFunction_Check(fn))
        own = true;
    else {
        PyFunctionObject *func = (PyFunctionObject *)fn;
        own =
            !(func->func_module && PyUnicode_Check(func->func_module) &&
              PyUnicode_CompareWithASCIIString(func->func_module, "pickle") == 0 &&
              func->func_qualname && PyUnicode_Check(func->func_qualname) &&
              PyUnicode_CompareWithASCIIString(func->func_qualname, "_Pickler.persistent_id") == 0);
    }
    Py_DECREF(f);
    return own;
}

/* Shadow pickler.<name> with `call` when it is the class's method. */
static saver *install_batcher(hook_state *s, PyObject *name, vectorcallfunc call)
{
    PyObject *cls_fn = _PyType_Lookup(Py_TYPE(s->pickler), name), *cur;
    saver *sv = NULL;

    if (cls_fn == NULL || !PyFunction_Check(cls_fn))
        return NULL;
    cur = PyObject_GetAttr(s->pickler, name);
    if (cur == NULL || !PyMethod_Check(cur) || PyMethod_GET_FUNCTION(cur) != cls_fn ||
        PyMethod_GET_SELF(cur) != s->pickler)
        goto end;
    sv = PyObject_GC_New(saver, &saver_type);
    if (sv == NULL)
        goto end;
    sv->vectorcall = call;
    sv->st = s;
    sv->pickler = Py_NewRef(s->pickler);
    sv->original = Py_NewRef(cls_fn);
    PyObject_GC_Track(sv);
    if (PyObject_SetAttr(s->pickler, name, (PyObject *)sv) < 0)
        Py_CLEAR(sv);
end:
    Py_XDECREF(cur);
    PyErr_Clear();
    return sv;
}

int install_saver(hook_state *s)
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
    s->batcher[0] = install_batcher(s, str_batch_appends, batcher_call);
    s->batcher[1] = install_batcher(s, str_batch_setitems, batcher_call);
    if (own_persistent_id(s)) {
        s->batcher[2] = install_batcher(s, str_save_pers, pers_call);
        s->persid = s->batcher[2] != NULL;
    }
    s->batcher[3] = install_batcher(s, str_save_reduce, reduce_call);
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

void remove_saver(hook_state *s)
{
    labels_end(s);
    for (int i = 0; i < 4; i++) {
        PyObject *names[4] = {str_batch_appends, str_batch_setitems, str_save_pers,
                              str_save_reduce};
        if (s->batcher[i] == NULL)
            continue;
        s->batcher[i]->st = NULL;
        if (PyObject_DelAttr(s->pickler, names[i]) < 0)
            PyErr_Clear();
        Py_CLEAR(s->batcher[i]);
    }
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
