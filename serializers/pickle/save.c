/* save.c -- what the pickler writes for each object, and the one step
 * every object goes through.
 *
 * The step.  Each child is saved by save_child() (pickler.h) with an
 * edge: what the child is to its parent (list item 3, the value of dict key
 * 'b', a reduce's state ...).  Dormant and without persistent_id, the step
 * is inline: the opcode boundary (frames), then save_object(), which writes
 * int / None / float / bool on the spot and hands everything else to
 * save_memoizable().  Otherwise save_child_slow() is the step: the
 * persistent id, then, in a traced dump, open the object's node, run the
 * same savers, close the node (or remember the failure).  When a child
 * fails, save_child_failed() adds the error note the edge describes (and
 * the path segment of the trace's error event).  The savers below, in
 * batch.c, names.c and reduce.c know nothing of tracing: they say what
 * their children are, and nothing else.
 *
 * The savers.  save_memoizable() answers from the memo first (GET), then
 * picks a saver by EXACT type; everything that is no built-in container,
 * str or bytes goes to the reduce protocol (reduce.c).  What each writes
 * follows the format (pickletools' opcode documentation: which opcodes
 * exist from which protocol) and the reference pickler's observed choices
 * (pickletools.dis of pickle.dumps, and the differential tests of
 * tests/pickle, which compare bytes and exceptions over 10,000 generated
 * object graphs per protocol): e.g. tuples of 1-3 items use TUPLE1-3 from
 * protocol 2, a tuple found in the memo after its items were written (it
 * contains itself through a mutable object) is dropped with POP / POP_MARK
 * and fetched with GET; bytes below protocol 3 are written as
 * _codecs.encode(latin-1 text, 'latin1'), bytearray below 5 and sets below
 * 4 as reduce values.
 *
 * Recursion: one interpreter recursion level per non-atomic object and one
 * more around a list's or dict's items, so that the deepest picklable
 * object and the RecursionError's message are the interpreter's own
 * (test_recursion_error_message_parity).
 */
#include <string.h>

#include "pickler.h"
#include "trace-step.h"

/* ---- memo -------------------------------------------------------------- */

/* Whether `slot`, found by an earlier lookup, can still take a new key: it
 * lies in the current table and is still empty.  A save path that let
 * user code run in between (the memo replaced through pickler.memo, or
 * grown by a nested save) would fail this, and the key is probed again, so
 * nothing is ever written into a freed table.  (A new table allocated at
 * the same address passes the check; a write there is in bounds, and the
 * differential tests would show the misplaced entry as a wrong GET.) */
static int slot_still_free(const memo_table *m, const memo_entry *slot)
{
    uintptr_t offset = (uintptr_t)slot - (uintptr_t)m->table;
    return offset < (m->mask + 1) * sizeof *slot && slot->key == NULL;
}

int memo_put(pickler *p, PyObject *obj, memo_entry *slot)
{
    if (p->fast)
        return 0; /* fast mode keeps no memo */
    Py_ssize_t idx = (Py_ssize_t)p->memo.used;
    int status = slot != NULL && slot_still_free(&p->memo, slot)
                     ? memo_set_at(&p->memo, slot, obj, idx)
                     : memo_set(&p->memo, obj, idx);
    return status < 0 ? -1 : emit_memo_put(p, idx);
}

int memo_get(pickler *p, PyObject *obj)
{
    const Py_ssize_t *idx = memo_lookup(&p->memo, obj);
    if (idx != NULL)
        return emit_memo_get(p, *idx);
    PyErr_SetObject(PyExc_KeyError, obj);
    return -1;
}

/* ---- fast mode ----------------------------------------------------------- */

/* Fast mode writes no memo, so a cycle would recurse until the recursion
 * limit.  Once containers nest PICKLE_FAST_NESTING_LIMIT deep, the ids of
 * the open ones are kept in a dict and meeting one of them again is a
 * ValueError.  After a failed check the bookkeeping is off for the rest
 * of the dump (the dump is failing anyway; the leave calls of the open
 * containers must not touch entries that were never made). */
#define FAST_TRACKING_OFF (-1)

static int fast_enter(pickler *p, PyObject *obj)
{
    if (++p->fast_nesting < PICKLE_FAST_NESTING_LIMIT)
        return 0;
    PyObject *id = NULL;
    int seen = -1;
    if (p->fast_memo == NULL)
        p->fast_memo = PyDict_New();
    if (p->fast_memo != NULL && (id = PyLong_FromVoidPtr(obj)) != NULL)
        seen = PyDict_Contains(p->fast_memo, id);
    if (seen == 0 && PyDict_SetItem(p->fast_memo, id, Py_None) == 0) {
        Py_DECREF(id);
        return 0;
    }
    if (seen == 1)
        PyErr_Format(PyExc_ValueError,
                     "fast mode: can't pickle cyclic objects including object type %.200s at %p",
                     Py_TYPE(obj)->tp_name, obj);
    Py_XDECREF(id);
    p->fast_nesting = FAST_TRACKING_OFF;
    return -1;
}

static int fast_leave(pickler *p, PyObject *obj)
{
    int tracked = p->fast_nesting >= PICKLE_FAST_NESTING_LIMIT;
    p->fast_nesting--;
    if (!tracked)
        return 0;
    PyObject *id = PyLong_FromVoidPtr(obj);
    int status = id == NULL ? -1 : PyDict_DelItem(p->fast_memo, id);
    Py_XDECREF(id);
    return status;
}

/* ---- str, bytes, bytearray, PickleBuffer ----------------------------------- */

static int save_str(pickler *p, PyObject *obj, memo_entry *slot)
{
    uint64_t flushed = p->flushed;
    if (emit_str(p, obj) < 0)
        return -1;
    /* A str of >= 64 KiB went to file.write(): user code ran and may have
     * replaced the memo, so the slot is stale. */
    return memo_put(p, obj, p->flushed == flushed ? slot : NULL);
}

/* A reduce value built here for obj; the reference is stolen. */
static int save_built_reduce(pickler *p, PyObject *value, PyObject *obj)
{
    if (value == NULL)
        return -1;
    int status = save_reduce_value(p, value, obj);
    Py_DECREF(value);
    return status;
}

static int save_bytes(pickler *p, PyObject *obj)
{
    Py_ssize_t n = PyBytes_GET_SIZE(obj);
    if (p->proto >= 3) {
        if (emit_bytes(p, PyBytes_AS_STRING(obj), n, obj) < 0)
            return -1;
        return memo_put(p, obj, NULL);
    }
    /* No bytes opcode before protocol 3: bytes() for b'', else
     * _codecs.encode(text, 'latin1') of its latin-1 decoding (which
     * Python 2 reads back as a str). */
    if (n == 0)
        return save_built_reduce(p, Py_BuildValue("(O())", (PyObject *)&PyBytes_Type), obj);
    PyObject *text = PyUnicode_DecodeLatin1(PyBytes_AS_STRING(obj), n, "strict");
    if (text == NULL)
        return -1;
    PyObject *value = Py_BuildValue("(O(OO))", G.codecs_encode, text, G.s_latin1);
    Py_DECREF(text);
    return save_built_reduce(p, value, obj);
}

static int save_bytearray(pickler *p, PyObject *obj)
{
    if (p->proto >= 5) {
        if (emit_bytearray(p, PyByteArray_AS_STRING(obj), PyByteArray_GET_SIZE(obj), obj) < 0)
            return -1;
        return memo_put(p, obj, NULL);
    }
    /* bytearray() or bytearray(bytes(obj)). */
    PyObject *cls = (PyObject *)&PyByteArray_Type;
    if (PyByteArray_GET_SIZE(obj) == 0)
        return save_built_reduce(p, Py_BuildValue("(O())", cls), obj);
    PyObject *copy = PyBytes_FromObject(obj);
    if (copy == NULL)
        return -1;
    PyObject *value = Py_BuildValue("(O(O))", cls, copy);
    Py_DECREF(copy);
    return save_built_reduce(p, value, obj);
}

/* A PickleBuffer (PEP 574) goes one of three ways, decided before anything
 * is written: refused (protocol < 5, a released or non-contiguous buffer),
 * out of band (buffer_callback(obj) returned a false value: NEXT_BUFFER,
 * then READONLY_BUFFER for a read-only view; never memoized), or in band
 * (bytes for a read-only view, bytearray otherwise; memoized). */
enum { PB_IN_BAND, PB_OUT_OF_BAND };

static int picklebuffer_route(pickler *p, PyObject *obj, const Py_buffer **view)
{
#if PY_VERSION_HEX >= 0x030D0000
    const char *refusal = "PickleBuffer can only be pickled with protocol >= 5";
#else
    const char *refusal = "PickleBuffer can only pickled with protocol >= 5";
#endif
    if (p->proto >= 5) {
        if ((*view = PyPickleBuffer_GetBuffer(obj)) == NULL)
            return -1;
        int gapless = (*view)->suboffsets == NULL && PyBuffer_IsContiguous(*view, 'A');
        refusal = gapless ? NULL
                          : "PickleBuffer can not be pickled when pointing to a "
                            "non-contiguous buffer";
    }
    if (refusal != NULL) {
        PyErr_SetString(G.PicklingError, refusal);
        return -1;
    }
    if (p->buffer_callback == NULL)
        return PB_IN_BAND;
    PyObject *answer = PyObject_CallOneArg(p->buffer_callback, obj);
    int truth = answer != NULL ? PyObject_IsTrue(answer) : -1;
    Py_XDECREF(answer);
    return truth < 0 ? -1 : truth ? PB_IN_BAND : PB_OUT_OF_BAND;
}

static int save_picklebuffer(pickler *p, PyObject *obj)
{
    static const char out_of_band[2] = {(char)OP_NEXT_BUFFER, (char)OP_READONLY_BUFFER};
    const Py_buffer *view = NULL;
    switch (picklebuffer_route(p, obj, &view)) {
    case PB_OUT_OF_BAND:
        if (p->trace != NULL) /* its bytes go to the application, not the payload */
            sertrace_oob(p->trace, (uint64_t)view->len);
        return output_write(p, out_of_band, view->readonly ? 2 : 1);
    case PB_IN_BAND:
        if ((view->readonly ? emit_bytes : emit_bytearray)(p, view->buf, view->len, obj) == 0)
            return memo_put(p, obj, NULL);
        /* fall through */
    default:
        return -1;
    }
}

/* ---- containers ------------------------------------------------------------ */

static int save_tuple(pickler *p, PyObject *obj)
{
    Py_ssize_t n = PyTuple_GET_SIZE(obj);

    if (n == 0)
        return p->proto >= 1 ? output_write_byte(p, OP_EMPTY_TUPLE) : output_write(p, "(t", 2);
    /* TUPLE1-3 need no MARK (protocol 2). */
    int counted = n <= 3 && p->proto >= 2;
    if (!counted && output_write_byte(p, OP_MARK) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        edge e = {.kind = EDGE_ITEM, .parent = obj, .index = i};
        if (save_child(p, PyTuple_GET_ITEM(obj, i), e) < 0)
            return -1;
    }
    if (memo_lookup(&p->memo, obj) != NULL) {
        /* An item contained the tuple (through a mutable object), which
         * is memoized by now: drop the items (and the MARK) and use the
         * memoized tuple.  Protocol 0 has no POP_MARK. */
        if (!counted && p->bin) {
            if (output_write_byte(p, OP_POP_MARK) < 0)
                return -1;
        } else {
            for (Py_ssize_t drops = counted ? n : n + 1; drops > 0; drops--)
                if (output_write_byte(p, OP_POP) < 0)
                    return -1;
        }
        return memo_get(p, obj);
    }
    static const char counted_ops[4] = {0, (char)OP_TUPLE1, (char)OP_TUPLE2, (char)OP_TUPLE3};
    if (output_write_byte(p, counted ? counted_ops[n] : OP_TUPLE) < 0)
        return -1;
    return memo_put(p, obj, NULL);
}

/* A list's or dict's items, one recursion level deeper. */
static int items_deeper(pickler *p, int (*batch)(pickler *, PyObject *), PyObject *container)
{
    if (enter_recursive(p))
        return -1;
    int status = batch(p, container);
    leave_recursive(p);
    return status;
}

static int items_deeper_iter(pickler *p, int (*batch)(pickler *, PyObject *, PyObject *),
                             PyObject *iter, PyObject *origin)
{
    if (iter == NULL)
        return -1;
    int status = -1;
    if (!enter_recursive(p)) {
        status = batch(p, iter, origin);
        leave_recursive(p);
    }
    Py_DECREF(iter);
    return status;
}

static int list_body(pickler *p, PyObject *obj, memo_entry *slot)
{
    Py_ssize_t n = PyList_GET_SIZE(obj);
    int status = p->bin ? output_write_byte(p, OP_EMPTY_LIST) : output_write(p, "(l", 2);
    if (status == 0)
        status = memo_put(p, obj, slot);
    if (status < 0 || n == 0)
        return status;
    /* An exact list is indexed; anything else (and protocol 0, which
     * writes one APPEND per item) is iterated. */
    if (PyList_CheckExact(obj) && p->proto >= 1)
        return items_deeper(p, batch_list, obj);
    return items_deeper_iter(p, batch_appends, PyObject_GetIter(obj), obj);
}

static int dict_body(pickler *p, PyObject *obj, memo_entry *slot)
{
    int status = p->bin ? output_write_byte(p, OP_EMPTY_DICT) : output_write(p, "(d", 2);
    if (status == 0)
        status = memo_put(p, obj, slot);
    if (status < 0 || PyDict_GET_SIZE(obj) == 0)
        return status;
    if (PyDict_CheckExact(obj) && p->proto >= 1)
        return items_deeper(p, batch_dict, obj);
    PyObject *items = PyObject_CallMethodNoArgs(obj, G.s_items);
    if (items == NULL)
        return -1;
    PyObject *iter = PyObject_GetIter(items);
    Py_DECREF(items);
    return items_deeper_iter(p, batch_setitems, iter, obj);
}

/* Lists and dicts, inside fast mode's cycle check. */
static int save_mutable(pickler *p, PyObject *obj, memo_entry *slot,
                        int (*body)(pickler *, PyObject *, memo_entry *))
{
    if (!p->fast)
        return body(p, obj, slot);
    int status = fast_enter(p, obj);
    if (status == 0)
        status = body(p, obj, slot);
    if (fast_leave(p, obj) < 0)
        status = -1;
    return status;
}

/* Before protocol 4 there is no set opcode: (type, (list(obj),)). */
static int save_set_as_reduce(pickler *p, PyObject *obj)
{
    PyObject *elements = PySequence_List(obj);
    if (elements == NULL)
        return -1;
    PyObject *value = Py_BuildValue("(O(O))", (PyObject *)Py_TYPE(obj), elements);
    Py_DECREF(elements);
    return save_built_reduce(p, value, obj);
}

static int save_set(pickler *p, PyObject *obj)
{
    if (p->proto < 4)
        return save_set_as_reduce(p, obj);
    if (output_write_byte(p, (char)OP_EMPTY_SET) < 0 || memo_put(p, obj, NULL) < 0)
        return -1;
    return PySet_GET_SIZE(obj) == 0 ? 0 : batch_set(p, obj);
}

static int save_frozenset(pickler *p, PyObject *obj)
{
    /* Fast mode's check is entered and, as with the reference pickler,
     * never left for a frozenset. */
    if (p->fast && fast_enter(p, obj) < 0)
        return -1;
    if (p->proto < 4)
        return save_set_as_reduce(p, obj);
    if (save_frozenset_items(p, obj) < 0)
        return -1;
    if (memo_lookup(&p->memo, obj) != NULL) {
        /* An element contained it: drop the elements, use the memo. */
        if (output_write_byte(p, OP_POP_MARK) < 0)
            return -1;
        return memo_get(p, obj);
    }
    if (output_write_byte(p, (char)OP_FROZENSET) < 0)
        return -1;
    return memo_put(p, obj, NULL);
}

/* ---- dispatch --------------------------------------------------------------- */

/* The savers of objects that contain others, in one shape: (pickler, obj,
 * the memo slot the lookup found for obj; only lists and dicts use it:
 * they memoize before anything else can touch the memo).  Each costs one
 * interpreter recursion level while it runs; the level is taken inside
 * the saver so that save_memoizable() ends in a tail call (one stack
 * frame per nested object, not two). */
typedef int (*nested_saver)(pickler *, PyObject *, memo_entry *);

#define NESTED_SAVER(name, call)                                                                   \
    static int name(pickler *p, PyObject *obj, memo_entry *slot)                                   \
    {                                                                                              \
        (void)slot;                                                                                \
        if (enter_recursive(p))                                                                    \
            return -1;                                                                             \
        int status = call;                                                                         \
        leave_recursive(p);                                                                        \
        return status;                                                                             \
    }
NESTED_SAVER(nested_dict, save_mutable(p, obj, slot, dict_body))
NESTED_SAVER(nested_list, save_mutable(p, obj, slot, list_body))
NESTED_SAVER(nested_tuple, save_tuple(p, obj))
NESTED_SAVER(nested_set, save_set(p, obj))
NESTED_SAVER(nested_frozenset, save_frozenset(p, obj))
NESTED_SAVER(nested_bytearray, save_bytearray(p, obj))
NESTED_SAVER(nested_picklebuffer, save_picklebuffer(p, obj))
NESTED_SAVER(nested_reduced, save_reduced(p, obj))
#undef NESTED_SAVER

/* EXACT type -> saver (subclasses go through the reduce protocol, as with
 * the reference pickler), for the rarer containers: dict, list and tuple
 * are called directly by save_memoizable() (a table costs an indirect call
 * per nested object: +3.8 % instructions on a list of tuples). */
static const struct {
    PyTypeObject *type;
    nested_saver save;
} NESTED_SAVERS[] = {
    {&PySet_Type, nested_set},
    {&PyFrozenSet_Type, nested_frozenset},
    {&PyByteArray_Type, nested_bytearray},
    {&PyPickleBuffer_Type, nested_picklebuffer},
};

static inline __attribute__((always_inline)) nested_saver nested_saver_of(PyTypeObject *type)
{
    /* Unrolled: a chain of compares against constant addresses. */
#pragma GCC unroll 4
    for (size_t i = 0; i < sizeof NESTED_SAVERS / sizeof NESTED_SAVERS[0]; i++)
        if (NESTED_SAVERS[i].type == type)
            return NESTED_SAVERS[i].save;
    return nested_reduced;
}

/* Everything but the atoms: a memo hit is a GET; str and bytes contain
 * nothing and take no recursion level; the rest go to their nested saver. */
/* save_memoizable() once obj's memo lookup found `slot` empty.  One copy,
 * out of line: save_memoizable() and the traced step both jump here
 * (issue 11 item 5, code footprint: inline it was a second copy of the
 * dispatch in the traced step). */
static __attribute__((noinline)) int save_unmemoized(pickler *p, PyObject *obj, memo_entry *slot)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyUnicode_Type)
        return save_str(p, obj, slot);
    if (type == &PyDict_Type)
        return nested_dict(p, obj, slot);
    if (type == &PyList_Type)
        return nested_list(p, obj, slot);
    if (type == &PyTuple_Type)
        return nested_tuple(p, obj, slot);
    if (type == &PyBytes_Type)
        return save_bytes(p, obj);
    return nested_saver_of(type)(p, obj, slot);
}

int save_memoizable(pickler *p, PyObject *obj)
{
    memo_entry *slot = memo_slot_(&p->memo, obj);
    if (slot->key != NULL)
        return emit_memo_get(p, slot->value);
    return save_unmemoized(p, obj, slot);
}

/* ---- the step -------------------------------------------------------------- */

/* persistent_id(obj): a new reference (Py_None: not persistent). */
static PyObject *persistent_id_of(pickler *p, PyObject *obj)
{
    if (p->pers_func_self != NULL)
        return PyObject_CallFunctionObjArgs(p->pers_func, p->pers_func_self, obj, NULL);
    return PyObject_CallOneArg(p->pers_func, obj);
}

/* BINPERSID after the id (an object), or protocol 0's PERSID line. */
static int write_persistent_id(pickler *p, PyObject *pid)
{
    if (!p->bin)
        return emit_persid_text(p, pid);
    if (save_child(p, pid, EDGE(EDGE_PERSID, NULL)) < 0)
        return -1;
    return output_write_byte(p, OP_BINPERSID);
}

/* Whether a node of kind `tag` never has children, so that it is recorded
 * as one ATOM once written: atoms (None/bool, int, float, str; bytes from
 * protocol 3 on: below, bytes pickle through a reduce whose parts are
 * nodes) and memo hits (one GET). */
static inline int is_leaf(const pickler *p, uint8_t tag)
{
    switch (tag) {
    case SERTRACE_TAG_ATOM:
    case SERTRACE_TAG_INT:
    case SERTRACE_TAG_FLOAT:
    case SERTRACE_TAG_STR:
    case SERTRACE_TAG_MEMO:
        return 1;
    case SERTRACE_TAG_BYTES:
        return p->proto >= 3;
    default:
        return 0;
    }
}

/* The ATOM record of an atom just written: the branch that wrote it
 * already knows the type's slot in leaf_type (trace_leaf()'s numbering:
 * int 0, float 1, str 2, bytes 3, None 4, bool 5) and the length, so the
 * ATOM is the cached index and sertrace_atom_fast().  The first atom of a
 * type in a dump, and a failed one, take trace_leaf() (which interns the
 * type and fills the slot): the same records. */
static inline __attribute__((always_inline)) void atom_leaf(pickler *p, uint8_t tag, PyObject *obj,
                                                            int slot, uint64_t length, uint64_t pos,
                                                            int failed, const edge *e)
{
    uint32_t type = p->leaf_type[slot];
    trace_lbl lbl = trace_label(p, e);
    if (__builtin_expect(type == 0 || failed, 0)) {
        trace_leaf(p, tag, obj, KEY_TYPE, pos, failed, lbl);
        return;
    }
    sertrace_atom_fast(p->trace, tag, type, (uintptr_t)obj, length, pos, output_pos(p), lbl.kind,
                       lbl.value);
}

/* save_object() for the steps other than the dormant inline one (the
 * traced step, persistent ids): one copy, out of line (issue 11 item 5,
 * code footprint: inline, the atoms' savers were copied into each). */
static __attribute__((noinline)) int save_object_out(pickler *p, PyObject *obj)
{
    return save_object(p, obj);
}

/* An atom just written (status: its saver's): its ATOM record, or its
 * failure remembered.  Inline at one place only, the join of
 * save_child_atoms()'s branches (issue 11 item 5, code footprint: the
 * label switch and the record encoder were copied into each of its five
 * branches and into save_child_slow() before). */
static inline __attribute__((always_inline)) int atom_done(pickler *p, uint8_t tag, PyObject *obj,
                                                           int slot, uint64_t length, uint64_t pos,
                                                           int status, const edge *e)
{
    atom_leaf(p, tag, obj, slot, length, pos, status < 0, e);
    if (__builtin_expect(status < 0, 0))
        trace_failed(p, obj, tag);
    return status;
}

/* save_child_slow() for a child of a dump that traces every object, no
 * persistent_id (save_child() decides): an atom is written and recorded
 * here, in a function small enough to cost few saved registers (the
 * every-object hot path: most nodes are atoms); anything else takes the
 * general traced step.  The only copy of the atoms' traced step: atoms
 * that reach save_child_slow() (the dumped object, dumps with
 * persistent_id) are leaves of traced_node() (trace_leaf(): the same
 * records). */
int save_child_atoms(pickler *p, PyObject *obj, const edge *e)
{
    if (output_opcode_boundary(p) < 0)
        return -1;
    /* The atoms' cases one by one, each a straight path (as one chain
     * of tests they cost more per atom), joining for the record: two
     * copies of the label step and the record encoder, one for the atoms
     * without a length (int, float, None/bool) and one for str and bytes
     * (issue 11 item 5, code footprint: a copy in each branch was ~4 KiB
     * of code; one copy for all cost ~15 instructions an atom more than
     * two: the length no longer a constant). */
    PyTypeObject *type = Py_TYPE(obj);
    uint64_t pos = output_pos(p);
    uint64_t length;
    uint8_t tag;
    int slot, status;
    memo_entry *mslot;
    if (type == &PyLong_Type) {
        tag = SERTRACE_TAG_INT;
        slot = 0;
        status = save_int(p, obj);
        goto no_length;
    }
    if (type == &PyUnicode_Type) {
        mslot = memo_slot_(&p->memo, obj);
        length = (uint64_t)PyUnicode_GET_LENGTH(obj) + 1;
        slot = 2;
        if (mslot->key != NULL)
            goto memo_hit;
        tag = SERTRACE_TAG_STR;
        status = save_str(p, obj, mslot);
        goto sized;
    }
    if (type == &PyFloat_Type) {
        tag = SERTRACE_TAG_FLOAT;
        slot = 1;
        status = save_float(p, obj);
        goto no_length;
    }
    if (type == &PyBytes_Type && p->proto >= 3) {
        mslot = memo_slot_(&p->memo, obj);
        length = (uint64_t)PyBytes_GET_SIZE(obj) + 1;
        slot = 3;
        if (mslot->key != NULL)
            goto memo_hit;
        tag = SERTRACE_TAG_BYTES;
        status = save_bytes(p, obj);
        goto sized;
    }
    if (obj == Py_None || type == &PyBool_Type) {
        tag = SERTRACE_TAG_ATOM;
        slot = obj == Py_None ? 4 : 5;
        status = save_object_out(p, obj);
        goto no_length;
    }
    /* every other object: the general step (its boundary check finds the
     * boundary done).  The node's step is inline there: as a function of
     * its own, called from there and from here, it cost the default
     * granularity a call per node (builtins 18.49 -> 18.81 M instructions
     * per dump); this way containers pay that call at every-object
     * granularity instead (27.53 -> 27.89 M). */
    return save_child_slow(p, obj, e);
no_length:
    return atom_done(p, tag, obj, slot, 0, pos, status, e);
memo_hit:
    tag = SERTRACE_TAG_MEMO;
    status = emit_memo_get(p, mslot->value);
sized:
    return atom_done(p, tag, obj, slot, length, pos, status, e);
}

/* A traced dump: obj's node around its savers.  A failure leaves the node
 * open (sertrace_dump_end closes it as failed) and is remembered.  An
 * object that is no node (an atom at this granularity) is one unit of its
 * parent, even when it pickles through a reduce (bytes below protocol 3):
 * tracing is suspended while it is written, so its reduce's parts get no
 * nodes either (plain atoms save no children: nothing to suspend).  A leaf
 * (an atom that is a node, a memo hit) is one ATOM record (trace_leaf()). */
static inline __attribute__((always_inline)) int traced_node(pickler *p, PyObject *obj,
                                                             const edge *e)
{
    sertrace_dump *trace = p->trace;
    int root = e->kind == EDGE_ROOT;
    /* The dumped object itself is a node at every granularity (issue 12
     * item 6): `dumps(None)` reads as one complete node, tagged as atoms
     * are with SERTRACE_GRANULARITY=all.  Only its classification sees
     * the atoms flag; its children are traced at the dump's granularity. */
    int flags = p->trace_flags;
    if (root)
        p->trace_flags |= SERTRACE_DUMP_ATOMS;
    int key_kind = KEY_TYPE, plain = trace_plain_atom(p, obj);
    uint8_t tag = plain ? 0 : trace_classify(p, obj, &key_kind);
    /* The empty memo slot classification found (NULL: none looked up):
     * the saver takes it instead of a second lookup. */
    memo_entry *slot = plain ? NULL : p->trace_slot;
    p->trace_flags = flags;

    if (is_leaf(p, tag)) {
        uint64_t pos = output_pos(p);
        trace_lbl lbl = trace_label(p, e);
        int status = save_object_out(p, obj);
        trace_leaf(p, tag, obj, key_kind, pos, status < 0, lbl);
        if (status < 0)
            trace_failed(p, obj, tag);
        return status;
    }
    if (tag != 0) {
        trace_open(p, tag, obj, key_kind, trace_label(p, e));
    } else if (!plain)
        p->trace = NULL;
    int status = slot != NULL ? save_unmemoized(p, obj, slot) : save_object_out(p, obj);
    p->trace = trace;
    if (status < 0)
        trace_failed(p, obj, tag);
    else if (tag != 0)
        trace_close(p);
    return status;
}

/* obj has a persistent id (pid, not None): the id instead of the object;
 * in a traced dump a node of its own, named by obj's type. */
static int save_persistent(pickler *p, PyObject *obj, PyObject *pid, const edge *e)
{
    if (p->trace == NULL)
        return write_persistent_id(p, pid);
    trace_open(p, SERTRACE_TAG_PERSID, obj, KEY_TYPE, trace_label(p, e));
    if (write_persistent_id(p, pid) < 0)
        return -1; /* left open; the caller remembers the failure */
    trace_close(p);
    return 0;
}

int save_child_slow(pickler *p, PyObject *obj, const edge *e)
{
    int edge_kind = e->kind;
    if (output_opcode_boundary(p) < 0)
        return -1;
    if (p->pers_func != NULL && edge_kind != EDGE_PERSID) {
        PyObject *pid = persistent_id_of(p, obj);
        if (pid != Py_None) {
            int status = pid != NULL ? save_persistent(p, obj, pid, e) : -1;
            if (status < 0 && p->trace != NULL)
                trace_failed(p, obj, SERTRACE_TAG_PERSID);
            Py_XDECREF(pid);
            return status;
        }
        Py_DECREF(pid);
    }
    if (p->trace == NULL)
        return save_object_out(p, obj);
    return traced_node(p, obj, e);
}

__attribute__((noinline)) int save_child_of(pickler *p, PyObject *obj, int kind, PyObject *parent)
{
    return save_child(p, obj, EDGE(kind, parent));
}

__attribute__((noinline, cold)) int save_child_failed(pickler *p, PyObject *obj, int status,
                                                      const edge *e)
{
    if (status == SAVE_FAILED_REDUCED)
        trace_note_object(obj);
    trace_note_edge(p, e);
    return -1;
}

int save_part(pickler *p, int part, PyObject *obj, int (*write)(pickler *, void *), void *arg)
{
    if (p->trace == NULL || obj == NULL)
        return write(p, arg);
    if (part == PART_EXT)
        trace_open(p, SERTRACE_TAG_EXT, obj, KEY_SELF, TRACE_NO_LABEL);
    else
        trace_open(p, SERTRACE_TAG_ITEMS, obj, KEY_TYPE, TRACE_NO_LABEL);
    if (write(p, arg) < 0)
        return -1; /* left open, as a failed node */
    trace_close(p);
    return 0;
}

/* ---- configuration and the dump ---------------------------------------------- */

/* The protocol argument as a number: None (or absent) is the default, a
 * negative number the highest (documented), anything above the highest a
 * ValueError.  Returns -1 with an exception set, else 0. */
static int protocol_from(PyObject *arg, int *proto)
{
    long asked = arg == NULL || arg == Py_None ? PICKLE_DEFAULT_PROTOCOL : PyLong_AsLong(arg);
    if (asked == -1 && PyErr_Occurred())
        return -1;
    if (asked <= PICKLE_HIGHEST_PROTOCOL) {
        *proto = asked < 0 ? PICKLE_HIGHEST_PROTOCOL : (int)asked;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "pickle protocol must be <= %d", PICKLE_HIGHEST_PROTOCOL);
    return -1;
}

/* Everything the arguments of Pickler(), dump() and dumps() decide, checked
 * in pickle's order (protocol, file, buffer_callback) into locals first and
 * applied to the pickler only when all of them are valid. */
int pickler_configure(pickler *p, PyObject *protocol, int fix_imports, PyObject *file,
                      PyObject *buffer_callback)
{
    int proto;
    PyObject *write = NULL;
    PyObject *callback = buffer_callback == Py_None ? NULL : buffer_callback;
    int found = 1;

    if (protocol_from(protocol, &proto) < 0)
        return -1;
    if (file != NULL && (found = lookup_attr(file, G.s_write, &write)) == 0)
        PyErr_SetString(PyExc_TypeError, "file must have a 'write' attribute");
    if (found <= 0)
        return -1;
    /* PEP 574: out-of-band buffers exist from protocol 5 on. */
    if (callback != NULL && proto < 5) {
        Py_XDECREF(write);
        PyErr_SetString(PyExc_ValueError, "buffer_callback needs protocol >= 5");
        return -1;
    }
    p->proto = proto;
    p->bin = proto > 0;
    p->fix_imports = fix_imports && proto < 3; /* _compat_pickle: protocols 0-2 */
    if (write != NULL)
        Py_XSETREF(p->write, write);
    Py_XSETREF(p->buffer_callback, Py_XNewRef(callback));
    return 0;
}

/* PROTO, the object, STOP; the last frame ended and, with a file, flushed:
 * the final write() belongs to the dump. */
static int write_pickle(pickler *p, PyObject *obj)
{
    if (p->proto >= 2) {
        const char proto[2] = {(char)OP_PROTO, (char)p->proto};
        if (output_write(p, proto, 2) < 0)
            return -1;
        p->framing = p->proto >= 4; /* PEP 3154: frames from protocol 4 */
        output_sync(p);
    }
    if (save_child(p, obj, EDGE(EDGE_ROOT, NULL)) < 0 || output_write_byte(p, OP_STOP) < 0)
        return -1;
    output_end_frame(p);
    return p->write != NULL ? output_flush(p) : 0;
}

int pickler_dump(pickler *p, PyObject *obj)
{
    PyObject *override;
    p->flushed = 0;
    p->tstate = PyThreadState_Get();
    if (p->internal)
        override = NULL; /* the exact Pickler type defines none */
    else if (lookup_attr((PyObject *)p, G.s_reducer_override, &override) < 0)
        return -1;
    Py_XSETREF(p->reducer_override, override);

    p->trace = sertrace_dump_begin("pickle", p->proto);
    if (p->trace != NULL) {
        p->trace_flags = sertrace_dump_flags(p->trace);
        memset(p->leaf_type, 0, sizeof p->leaf_type);
        memset(p->index_cache, 0, sizeof p->index_cache);
        trace_reset_error(p);
    }
    int status = write_pickle(p, obj);
    p->framing = 0;
    output_sync(p);
    if (p->trace != NULL) {
        sertrace_dump *trace = p->trace;
        if (status < 0)
            trace_report_error(p, obj);
        p->trace = NULL;
        sertrace_dump_end(trace, output_pos(p),
                          status < 0 ? SERTRACE_STATUS_ERROR : SERTRACE_STATUS_OK);
        trace_reset_error(p);
        trace_labels_end(p);
    }
    Py_CLEAR(p->reducer_override);
    return status;
}
