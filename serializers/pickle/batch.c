/* batch.c -- the items of every container, in batches.
 *
 * A list's items, a dict's pairs, a set's elements and the listitems /
 * dictitems of a reduce are all written the same way (pickletools: APPENDS,
 * SETITEMS and ADDITEMS each take the items "since the topmost MARK"):
 *
 *     MARK item item ... APPENDS      (at most PICKLE_BATCHSIZE = 1000 items
 *     MARK item item ... APPENDS       per batch)
 *
 * so there is one routine, run_batches(), over an item source.  The
 * sources differ only in how they yield items and in small rules that
 * were observed on the reference pickler's output (pickletools.dis of
 * pickle.dumps for 0, 1, 2, 999, 1000, 1001, 2000 items, and the
 * differential tests):
 *   - an exact list or dict whose size is 1 is written with APPEND /
 *     SETITEM and no MARK; a set always gets a MARK batch;
 *   - from an iterator (list and dict subclasses, protocol 0, a reduce's
 *     listitems / dictitems), nothing is written when it is empty, and a
 *     batch that would hold a single item is written with APPEND / SETITEM;
 *     protocol 0 writes one APPEND / SETITEM per item;
 *   - an exact list goes on while items remain (its size is read again at
 *     every step, so a list mutated while pickled is never read past);
 *     dicts, sets and iterators go on while the last batch was full, so a
 *     dict or set of exactly 1000 items ends with an empty MARK SETITEMS;
 *   - a dict or set whose size changed is reported after the batch, with
 *     RuntimeError "dictionary/set changed size during iteration";
 *   - a dict items iterator must yield 2-tuples (TypeError, checked just
 *     before each pair is written).
 * run_batches() is always inlined with a constant source kind, so each
 * caller gets a specialised loop (the exact list's loop has no indirect
 * call; atoms are written inline by save_child()).
 */
#include "pickler.h"

#if PY_VERSION_HEX >= 0x030D0000
/* CPython 3.13 moved this prototype to its internal headers
 * (pycore_setobject.h, Py_BUILD_CORE only); libpython still exports the
 * function (for _abc), with the same signature and borrowed references. */
PyAPI_FUNC(int) _PySet_NextEntry(PyObject *set, Py_ssize_t *pos, PyObject **key, Py_hash_t *hash);
#endif

enum source_kind {
    SOURCE_LIST,       /* exact list, by index */
    SOURCE_DICT,       /* exact dict, PyDict_Next */
    SOURCE_SET,        /* set, in its iteration order */
    SOURCE_ITER,       /* any iterator of objects */
    SOURCE_ITER_PAIRS, /* an iterator of (key, value) */
};

typedef struct item_source {
    PyObject *container; /* the list, dict or set, or the iterator */
    PyObject *origin;    /* the object named in error notes */
    int edge_kind;       /* EDGE_ITEM or EDGE_ELEMENT for single objects */
    Py_ssize_t pos;      /* next index / table position */
    Py_ssize_t count;    /* items written so far */
    Py_ssize_t size;     /* dict / set: size when the batches began */
} item_source;

/* The next item: 1 (new references in *a and, for an exact dict, *b), 0 at
 * the end, -1 on error. */
static inline __attribute__((always_inline)) int source_next(item_source *s, const int kind,
                                                             PyObject **a, PyObject **b)
{
    if (kind == SOURCE_LIST) {
        /* Py_SIZE / ob_item: PyList_GET_SIZE and _ITEM assert the type at
         * every step in builds with asserts (debugoptimized). */
        if (s->pos >= Py_SIZE(s->container))
            return 0;
        *a = ((PyListObject *)s->container)->ob_item[s->pos];
        s->pos++;
        Py_INCREF(*a);
        return 1;
    }
    if (kind == SOURCE_DICT) {
        if (!PyDict_Next(s->container, &s->pos, a, b))
            return 0;
        Py_INCREF(*a);
        Py_INCREF(*b);
        return 1;
    }
    if (kind == SOURCE_SET) {
        Py_hash_t hash;
        /* Exported by CPython; walks the table in iteration order and
         * tolerates mutation (reported after the batch). */
        if (!_PySet_NextEntry(s->container, &s->pos, a, &hash))
            return 0;
        Py_INCREF(*a);
        return 1;
    }
    *a = PyIter_Next(s->container);
    if (*a == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return 1;
}

/* Write one item and release it. */
static inline __attribute__((always_inline)) int
write_item(pickler *p, item_source *s, const int kind, PyObject *a, PyObject *b)
{
    int status;
    if (kind == SOURCE_LIST || kind == SOURCE_SET || kind == SOURCE_ITER) {
        edge e = {.kind = s->edge_kind, .parent = s->origin, .index = s->count};
        status = save_child(p, a, e);
        Py_DECREF(a);
    } else {
        PyObject *key = a, *value = b, *pair = NULL;
        if (kind == SOURCE_ITER_PAIRS) {
            pair = a;
            if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) {
                Py_DECREF(pair);
                PyErr_SetString(PyExc_TypeError, "dict items iterator must return 2-tuples");
                return -1;
            }
            key = PyTuple_GET_ITEM(pair, 0);
            value = PyTuple_GET_ITEM(pair, 1);
        }
        status = save_child(p, key, EDGE(EDGE_PLAIN, s->origin));
        if (status == 0) {
            edge e = {.kind = EDGE_VALUE, .parent = s->origin, .key = key};
            status = save_child(p, value, e);
        }
        if (pair != NULL) {
            Py_DECREF(pair);
        } else {
            Py_DECREF(key);
            Py_DECREF(value);
        }
    }
    s->count++;
    return status;
}

static inline __attribute__((always_inline)) int run_batches(pickler *p, item_source *s,
                                                             const int kind)
{
    const int lazy = kind == SOURCE_ITER || kind == SOURCE_ITER_PAIRS;
    const int pairs = kind == SOURCE_DICT || kind == SOURCE_ITER_PAIRS;
    const char one_op = kind == SOURCE_SET ? 0 : pairs ? OP_SETITEM : OP_APPEND;
    const char batch_op = (char)(kind == SOURCE_SET ? OP_ADDITEMS
                                 : pairs            ? OP_SETITEMS
                                                    : OP_APPENDS);
    PyObject *a = NULL, *b = NULL, *next_a = NULL, *next_b = NULL;
    int got;

    if (lazy && p->proto == 0) {
        while ((got = source_next(s, kind, &a, &b)) > 0) {
            if (write_item(p, s, kind, a, b) < 0 || output_write_byte(p, one_op) < 0)
                return -1;
        }
        return got;
    }
    if (!lazy && one_op != 0 && s->size == 1) {
        if (source_next(s, kind, &a, &b) <= 0)
            return 0;
        if (write_item(p, s, kind, a, b) < 0)
            return -1;
        return output_write_byte(p, one_op);
    }
    for (;;) {
        int n = 0;
        if (lazy) {
            /* A MARK only once a second item is known to exist. */
            if ((got = source_next(s, kind, &a, &b)) <= 0)
                return got;
            if ((got = source_next(s, kind, &next_a, &next_b)) < 0)
                goto error;
            if (got == 0) {
                got = write_item(p, s, kind, a, b);
                a = NULL;
                if (got < 0)
                    return -1;
                return output_write_byte(p, one_op);
            }
            if (output_write_byte(p, OP_MARK) < 0)
                goto error;
            got = write_item(p, s, kind, a, b);
            a = NULL;
            if (got < 0)
                goto error;
            n = 1;
        } else if (output_write_byte(p, OP_MARK) < 0) {
            return -1;
        }
        while (n < PICKLE_BATCHSIZE) {
            if (next_a != NULL) {
                a = next_a;
                b = next_b;
                next_a = NULL;
            } else if ((got = source_next(s, kind, &a, &b)) <= 0) {
                if (got < 0)
                    return -1;
                break;
            }
            got = write_item(p, s, kind, a, b);
            a = NULL;
            if (got < 0)
                return -1;
            n++;
        }
        if (output_write_byte(p, batch_op) < 0)
            return -1;
        if (kind == SOURCE_DICT && PyDict_GET_SIZE(s->container) != s->size) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return -1;
        }
        if (kind == SOURCE_SET && PySet_GET_SIZE(s->container) != s->size) {
            PyErr_SetString(PyExc_RuntimeError, "set changed size during iteration");
            return -1;
        }
        if (kind == SOURCE_LIST ? s->pos >= Py_SIZE(s->container) : n < PICKLE_BATCHSIZE)
            return 0;
    }
error:
    /* Only the iterator sources get here; their items are single objects
     * (pairs are unpacked by write_item). */
    Py_XDECREF(a);
    Py_XDECREF(next_a);
    return -1;
}

int batch_list(pickler *p, PyObject *list)
{
    item_source s = {
        .container = list, .origin = list, .edge_kind = EDGE_ITEM, .size = PyList_GET_SIZE(list)};
    return run_batches(p, &s, SOURCE_LIST);
}

int batch_dict(pickler *p, PyObject *dict)
{
    item_source s = {.container = dict, .origin = dict, .size = PyDict_GET_SIZE(dict)};
    return run_batches(p, &s, SOURCE_DICT);
}

int batch_set(pickler *p, PyObject *set)
{
    item_source s = {
        .container = set, .origin = set, .edge_kind = EDGE_ELEMENT, .size = PySet_GET_SIZE(set)};
    return run_batches(p, &s, SOURCE_SET);
}

int batch_appends(pickler *p, PyObject *iter, PyObject *origin)
{
    item_source s = {.container = iter, .origin = origin, .edge_kind = EDGE_ITEM};
    return run_batches(p, &s, SOURCE_ITER);
}

int batch_setitems(pickler *p, PyObject *iter, PyObject *origin)
{
    item_source s = {.container = iter, .origin = origin};
    return run_batches(p, &s, SOURCE_ITER_PAIRS);
}

int save_frozenset_items(pickler *p, PyObject *obj)
{
    item_source s = {.origin = obj, .edge_kind = EDGE_ELEMENT};
    PyObject *element, *unused = NULL;
    int got;

    if (output_write_byte(p, OP_MARK) < 0)
        return -1;
    s.container = PyObject_GetIter(obj);
    if (s.container == NULL)
        return -1;
    while ((got = source_next(&s, SOURCE_ITER, &element, &unused)) > 0) {
        if (write_item(p, &s, SOURCE_ITER, element, NULL) < 0) {
            got = -1;
            break;
        }
    }
    Py_DECREF(s.container);
    return got;
}
