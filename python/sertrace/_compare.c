/* _compare.c -- sertrace._compare: in-process tracing into the tree core,
 * and the rows of sertrace.compare.
 *
 * sertrace.compare (compare.py) pickles one object with several
 * serializers and needs each dump's size tree without an LTTng session.
 * This module gives it two things, both in C so that the logic has one
 * home:
 *
 *   capture_begin() / capture_end() -> (dump_id, summary_json,
 *   error_address):
 *     sets libsertrace's in-process listener (sertrace_set_listener,
 *     sertrace.h) for the calling thread; every dump that thread makes
 *     until capture_end() goes, as records, straight into the tree core
 *     (analyzers/core) and its JSON summary writer with path patterns and
 *     no top list -- the document `sertrace report --json --paths --top 0`
 *     prints for a trace.  dump_id is the first dump the thread began
 *     (the outermost: a nested dump of a __reduce__ begins later).
 *     error_address: the object address recorded on the node at the
 *     depth of that dump's first ERROR (the object the serializer refused,
 *     as the trace has it; CPython's id() of it), or None.  The summary
 *     does not carry addresses (no object identity in reports), so the
 *     summary's visitor is wrapped here to keep this one; compare() uses
 *     it to replace exactly that object by a persistent id and try again.
 *
 *   rows([(summary_json, dump_id) | None, ...]) -> [(kind, name, [bytes |
 *     None, ...]), ...]: those dumps, one column each, through the rows of
 *     `sertrace diff` (cli/diff-rows.c: patterns with bytes including
 *     children, types with self bytes).  None: the column is empty.
 *
 * The capture state is one static struct, never freed: a dump keeps the
 * listener it began with (sertrace.h), so a callback may come after
 * capture_end() (another thread's dump begun meanwhile); it finds the
 * capture inactive, or not its thread, and returns.  One capture at a
 * time per process (capture_begin refuses a second).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "diff-rows.h"
#include "format.h"
#include "sertrace/sertrace.h"
#include "summary.h"

static struct capture {
    pthread_mutex_t mu;
    bool active;
    bool failed; /* the core refused an event (out of memory) */
    bool has_err_addr;
    uint64_t err_addr; /* node address at the first dump's first ERROR */
    pthread_t thread;
    int64_t pid;
    uint64_t first_dump;
    sertrace_summary_capture sc; /* the core, the summary (its error callback wrapped), its text */
} cap = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Locked, and the capture is active on this thread: true. */
static bool enter_mine(void)
{
    pthread_mutex_lock(&cap.mu);
    if (cap.active && pthread_equal(cap.thread, pthread_self()))
        return true;
    pthread_mutex_unlock(&cap.mu);
    return false;
}

static void on_begin(void *ctx, uint64_t dump_id, const char *serializer, int32_t protocol)
{
    (void)ctx;
    if (!enter_mine())
        return;
    if (cap.first_dump == 0)
        cap.first_dump = dump_id;
    if (sertrace_core_dump_begin(cap.sc.core, cap.pid, 0, 0, dump_id, serializer,
                                 strlen(serializer), protocol) < 0)
        cap.failed = true;
    pthread_mutex_unlock(&cap.mu);
}

static void on_records(void *ctx, uint64_t dump_id, uint32_t seq, const uint8_t *buf, uint32_t len)
{
    (void)ctx;
    if (!enter_mine())
        return;
    if (sertrace_core_records(cap.sc.core, cap.pid, 0, 0, dump_id, seq, buf, len) < 0)
        cap.failed = true;
    pthread_mutex_unlock(&cap.mu);
}

static void on_end(void *ctx, uint64_t dump_id, uint64_t bytes, uint8_t status, uint32_t batches,
                   uint32_t flags)
{
    (void)ctx;
    if (!enter_mine())
        return;
    if (sertrace_core_dump_end_flags(cap.sc.core, cap.pid, 0, 0, dump_id, bytes, status,
                                     (int64_t)batches, flags) < 0)
        cap.failed = true;
    pthread_mutex_unlock(&cap.mu);
}

/* The summary's error callback, after keeping the address of the node at
 * the first dump's first ERROR (called under cap.mu, from the core). */
static int v_error(void *ctx, sertrace_dump_state *d, sertrace_node *n, uint8_t tag, uint32_t type,
                   const char *msg, size_t msg_len, const char *path, size_t path_len)
{
    (void)ctx;
    if (n && !cap.has_err_addr && d->dump_id == cap.first_dump) {
        cap.has_err_addr = true;
        cap.err_addr = n->addr;
    }
    if (!cap.sc.sumv.error)
        return 0;
    return cap.sc.sumv.error(cap.sc.sumv.ctx, d, n, tag, type, msg, msg_len, path, path_len);
}

static void release_locked(void)
{
    sertrace_summary_capture_release(&cap.sc);
}

static PyObject *capture_begin(PyObject *self, PyObject *noargs)
{
    sertrace_summary_opts so = SERTRACE_SUMMARY_OPTS_DEFAULT;
    static const sertrace_listener l = {on_begin, on_records, on_end, NULL};

    (void)self;
    (void)noargs;
    pthread_mutex_lock(&cap.mu);
    if (cap.active) {
        pthread_mutex_unlock(&cap.mu);
        PyErr_SetString(PyExc_RuntimeError,
                        "a sertrace capture is already running (one compare at a time)");
        return NULL;
    }
    so.json = true;
    so.paths = true;
    so.top = 0; /* every pattern, no list of largest nodes */
    so.max_flags = 100;
    if (sertrace_summary_capture_begin(&cap.sc, &so, v_error) < 0) {
        release_locked();
        pthread_mutex_unlock(&cap.mu);
        return PyErr_NoMemory();
    }
    cap.active = true;
    cap.failed = false;
    cap.has_err_addr = false;
    cap.err_addr = 0;
    cap.first_dump = 0;
    cap.thread = pthread_self();
    cap.pid = (int64_t)getpid();
    pthread_mutex_unlock(&cap.mu);
    sertrace_set_listener(&l);
    Py_RETURN_NONE;
}

static PyObject *capture_end(PyObject *self, PyObject *noargs)
{
    PyObject *ret = NULL;
    int ok;

    (void)self;
    (void)noargs;
    sertrace_set_listener(NULL);
    pthread_mutex_lock(&cap.mu);
    if (!cap.active) {
        pthread_mutex_unlock(&cap.mu);
        PyErr_SetString(PyExc_RuntimeError, "no sertrace capture is running");
        return NULL;
    }
    cap.active = false;
    ok = !cap.failed && sertrace_summary_capture_finish(&cap.sc) == 0;
    if (ok && cap.has_err_addr)
        ret = Py_BuildValue("Ky#K", (unsigned long long)cap.first_dump,
                            cap.sc.out.data ? cap.sc.out.data : "", (Py_ssize_t)cap.sc.out.len,
                            (unsigned long long)cap.err_addr);
    else if (ok)
        ret = Py_BuildValue("Ky#O", (unsigned long long)cap.first_dump,
                            cap.sc.out.data ? cap.sc.out.data : "", (Py_ssize_t)cap.sc.out.len,
                            Py_None);
    else
        PyErr_NoMemory();
    release_locked();
    pthread_mutex_unlock(&cap.mu);
    return ret;
}

/* The dump of `doc` whose dump_id is `id`, or NULL. */
static const djson *find_dump(const djson *doc, uint64_t id)
{
    const djson *dumps = djson_get(doc, "dumps");
    for (size_t i = 0; dumps && dumps->type == DJSON_ARRAY && i < dumps->n; i++)
        if (djson_u64(djson_get(dumps->items[i], "dump_id")) == id)
            return dumps->items[i];
    return NULL;
}

static PyObject *rows(PyObject *self, PyObject *arg)
{
    PyObject *seq, *ret = NULL;
    djson *docs[SERTRACE_ROWS_MAX_COLS] = {NULL};
    sertrace_rows t = {0};
    Py_ssize_t ncols;

    (void)self;
    seq = PySequence_Fast(arg, "rows() needs a sequence of (summary_json, dump_id) or None");
    if (!seq)
        return NULL;
    ncols = PySequence_Fast_GET_SIZE(seq);
    if (ncols > SERTRACE_ROWS_MAX_COLS) {
        PyErr_Format(PyExc_ValueError, "rows(): at most %d columns", SERTRACE_ROWS_MAX_COLS);
        goto end;
    }
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, c);
        const char *text;
        Py_ssize_t len;
        unsigned long long id;
        char err[160];
        const djson *dump;

        if (item == Py_None)
            continue;
        if (!PyArg_ParseTuple(item, "y#K", &text, &len, &id))
            goto end;
        docs[c] = djson_parse(text, (size_t)len, err, sizeof err);
        if (!docs[c]) {
            PyErr_Format(PyExc_ValueError, "rows(): column %zd: bad summary JSON: %s", c, err);
            goto end;
        }
        dump = find_dump(docs[c], id);
        if (!dump) {
            PyErr_Format(PyExc_ValueError, "rows(): column %zd: no dump %llu in the summary", c,
                         id);
            goto end;
        }
        if (sertrace_rows_add_dump(&t, (unsigned)c, dump) < 0) {
            PyErr_NoMemory();
            goto end;
        }
    }
    ret = PyList_New((Py_ssize_t)t.n);
    for (size_t i = 0; ret && i < t.n; i++) {
        const sertrace_row *r = &t.rows[i];
        PyObject *vals = PyList_New(ncols), *tup;
        for (Py_ssize_t c = 0; vals && c < ncols; c++) {
            PyObject *v = sertrace_row_in(r, (unsigned)c) ? PyLong_FromUnsignedLongLong(r->v[c])
                                                          : Py_NewRef(Py_None);
            if (!v) {
                Py_CLEAR(vals);
                break;
            }
            PyList_SET_ITEM(vals, c, v);
        }
        tup = vals ? Py_BuildValue("(ssN)", r->is_type ? "type" : "path", r->name, vals) : NULL;
        if (!tup) {
            Py_CLEAR(ret);
            break;
        }
        PyList_SET_ITEM(ret, (Py_ssize_t)i, tup);
    }
end:
    for (int c = 0; c < SERTRACE_ROWS_MAX_COLS; c++)
        djson_free(docs[c]);
    sertrace_rows_free(&t);
    Py_DECREF(seq);
    return ret;
}

static PyMethodDef methods[] = {
    {"capture_begin", capture_begin, METH_NOARGS,
     "capture_begin(): trace this thread's dumps in-process into the tree core"},
    {"capture_end", capture_end, METH_NOARGS,
     "capture_end() -> (first_dump_id, summary_json, error_address or None): stop, the JSON "
     "summary (with paths), and the address of the object at the first dump's first error"},
    {"rows", rows, METH_O,
     "rows([(summary_json, dump_id) | None, ...]) -> [(kind, name, [bytes | None, ...])]: "
     "one column per dump, rows by path pattern and by type (as sertrace diff)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "sertrace._compare",
    "In-process tracing into the tree core, and the rows of sertrace.compare.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__compare(void)
{
    return PyModule_Create(&module);
}
