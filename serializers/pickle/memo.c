/* memo.c -- the pickler's memo: object address -> memo index.
 *
 * pickle writes every memoizable object once and refers to it afterwards by
 * its memo index (PUT/GET opcodes).  The table is looked up on every
 * non-atomic object, so it is a purpose-built open-addressing hash table
 * keyed by the object's address (no Python dict, no hashing of user
 * objects, so no user __hash__/__eq__ ever runs).  The lookup is inline in
 * pickler.h (it runs once per non-atomic object).  It keeps a strong
 * reference to each key, so an address cannot be reused by another object
 * while the memo remembers it (Pickler.memo shows the objects, as pickle's
 * does).  Address-order hashing (address >> 5, MEMO_HASH_SHIFT in
 * pickler.h) with perturbed probing (see memo_slot_: a scattering hash
 * measured 7x slower on 50,000 strings, all cache misses).  Indices are
 * assigned by the caller (memo size at insertion), so the table layout
 * never affects the output.
 *
 * Growth policy (memo_set_at, memo_grown_size), chosen for this table from
 * a simulation of memo_slot_ over the real addresses of bench/workloads.py's
 * memoized objects in insertion order (README.md "Speed", "The memo's
 * growth"): the table is kept at most half full (MEMO_LOAD_*) and grows x4
 * while it is below MEMO_QUAD_MAX slots (512 KiB), x2 from there: 8, 32,
 * 128, 512, 2,048, 8,192, 32,768, 65,536, 131,072 ... slots.  At load
 * <= 1/2 fewer inserts collide than at 2/3 (state-256: 38 -> 25 %), x4
 * moves fewer entries than x2, and doubling from 512 KiB bounds what a
 * big memo reserves (at most 4x its entries) and what a first dump clears
 * (x4 to 2 MiB: a first state-256 dump 4.5 -> 5.0 ms, +1 MiB peak).
 *
 * Invariant (asserted in debug builds, memo_load_ok()): the size is a power
 * of two of at least MEMO_MIN_SIZE and at most half of it is used, so a
 * probe always reaches an empty slot.
 */
#include <assert.h>
#include <string.h>

#include "pickler.h"

#define MEMO_MIN_SIZE 8
/* Growth threshold: grow once more than MEMO_LOAD_NUM / MEMO_LOAD_DEN of
 * the slots are used. */
#define MEMO_LOAD_NUM 1
#define MEMO_LOAD_DEN 2
/* Below this many slots the table grows x4, from it x2. */
#define MEMO_QUAD_MAX 32768

#ifndef NDEBUG
static int memo_load_ok(const memo_table *m)
{
    size_t size = m->mask + 1;
    return size >= MEMO_MIN_SIZE && (size & m->mask) == 0 &&
           m->used * MEMO_LOAD_DEN <= size * MEMO_LOAD_NUM;
}
#endif

int memo_init(memo_table *m)
{
    m->table = PyMem_Calloc(MEMO_MIN_SIZE, sizeof(memo_entry));
    if (m->table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    m->mask = MEMO_MIN_SIZE - 1;
    m->used = 0;
    assert(memo_load_ok(m));
    return 0;
}

void memo_clear(memo_table *m)
{
    /* used == 0 means every slot is empty (entries are never removed one by
     * one), so an empty memo costs nothing to clear. */
    if (m->table == NULL || m->used == 0)
        return;
    for (size_t i = 0; i <= m->mask; i++) {
        PyObject *key = m->table[i].key;
        m->table[i].key = NULL;
        Py_XDECREF(key);
    }
    m->used = 0;
}

void memo_free(memo_table *m)
{
    /* Detached first, then one read-only pass: no slot is written back
     * (the table is freed), which saves a write per slot at the end of
     * every dumps(), and a DECREF running user code (__del__) finds the
     * memo already empty. */
    memo_entry *table = m->table;
    size_t size = m->mask + 1;
    size_t used = m->used;

    m->table = NULL;
    m->mask = 0;
    m->used = 0;
    if (table == NULL)
        return;
    for (size_t i = 0; used > 0 && i < size; i++) {
        if (table[i].key != NULL) {
            used--;
            Py_DECREF(table[i].key);
        }
    }
    PyMem_Free(table);
}

/* Empties the memo and keeps its table, for a table nobody else can
 * reach (the parked pickler of dumps(), module.c): detached while its keys
 * are released (a __del__ run by a DECREF finds an empty memo), then put
 * back.  Only the used slots are written (a slot is empty when its key is
 * NULL; values are not read there), and the pass stops at the last key:
 * no memset of the whole table (state-16: 132 k instructions a dump). */
void memo_empty_detached(memo_table *m)
{
    memo_entry *table = m->table;
    size_t size = m->mask + 1;
    size_t used = m->used;

    if (table == NULL || used == 0)
        return;
    m->table = NULL;
    m->mask = 0;
    m->used = 0;
    for (size_t i = 0; used > 0 && i < size; i++) {
        PyObject *key = table[i].key;
        if (key != NULL) {
            used--;
            table[i].key = NULL;
            Py_DECREF(key);
        }
    }
    m->table = table;
    m->mask = size - 1;
}

/* Resize to `new_size` slots, a power of two (memo_grown_size). */
static int memo_resize(memo_table *m, size_t new_size)
{
    size_t old_size = m->mask + 1;
    memo_entry *old = m->table;
    memo_entry *fresh;

    /* malloc + memset, not calloc: calloc of fresh heap pages skips the
     * clearing, so the first lookup of a slot READ-faults the page onto
     * the shared zero page and the following insert write-faults it again
     * (measured: 80 extra page faults per build_state(64) dump, +8% time).
     * Writing the zeros first costs one fault per page. */
    if (new_size > (size_t)PY_SSIZE_T_MAX / sizeof(memo_entry)) {
        PyErr_NoMemory();
        return -1;
    }
    fresh = PyMem_Malloc(new_size * sizeof(memo_entry));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(fresh, 0, new_size * sizeof(memo_entry));
    m->table = fresh;
    m->mask = new_size - 1;
    for (size_t i = 0; i < old_size; i++) {
        if (old[i].key != NULL)
            *memo_slot_(m, old[i].key) = old[i];
    }
    PyMem_Free(old);
    assert(memo_load_ok(m));
    return 0;
}

size_t memo_grown_size(size_t size)
{
    return size < MEMO_QUAD_MAX ? size * 4 : size * 2;
}

int memo_filled_for_size(const memo_table *m)
{
    size_t size = m->mask + 1;
    size_t below = MEMO_MIN_SIZE;
    if (size <= MEMO_MIN_SIZE)
        return 1;
    while (memo_grown_size(below) < size)
        below = memo_grown_size(below);
    return m->used * MEMO_LOAD_DEN > below * MEMO_LOAD_NUM;
}

int memo_set(memo_table *m, PyObject *key, Py_ssize_t value)
{
    memo_entry *e = memo_slot_(m, key);
    if (e->key != NULL) {
        e->value = value;
        return 0;
    }
    return memo_set_at(m, e, key, value);
}

int memo_set_at(memo_table *m, memo_entry *e, PyObject *key, Py_ssize_t value)
{
    assert(e->key == NULL && e >= m->table && e <= m->table + m->mask); /* an empty slot of m */
    assert(memo_load_ok(m));
    Py_INCREF(key);
    e->key = key;
    e->value = value;
    m->used++;
    if (m->used * MEMO_LOAD_DEN > (m->mask + 1) * MEMO_LOAD_NUM)
        return memo_resize(m, memo_grown_size(m->mask + 1));
    return 0;
}

int memo_each(const memo_table *m, memo_visit visit, void *arg)
{
    const memo_entry *end = m->table == NULL ? NULL : m->table + m->mask + 1;
    for (const memo_entry *e = m->table; e != end; e++)
        if (e->key != NULL && visit(arg, e->key, e->value) < 0)
            return -1;
    return 0;
}

/* memo_each's visitor for memo_as_dict: {id(obj): (index, obj)}. */
static int add_to_dict(void *dict, PyObject *obj, Py_ssize_t index)
{
    PyObject *id = PyLong_FromVoidPtr(obj);
    PyObject *pair = id != NULL ? Py_BuildValue("nO", index, obj) : NULL;
    int status = pair != NULL ? PyDict_SetItem((PyObject *)dict, id, pair) : -1;
    Py_XDECREF(id);
    Py_XDECREF(pair);
    return status;
}

PyObject *memo_as_dict(const memo_table *m)
{
    PyObject *d = PyDict_New();
    if (d != NULL && memo_each(m, add_to_dict, d) < 0)
        Py_CLEAR(d);
    return d;
}
