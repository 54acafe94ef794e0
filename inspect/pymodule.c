/* pymodule.c -- sertrace._inspect: the emulator for Python.
 *
 * One function, summary_json(data, top, oversize_bytes, oversize_percent,
 * max_memory) -> (status, offset, reason, json_bytes): the bytes go through
 * the emulator into the tree core and the JSON summary sink, exactly as
 * `sertrace inspect --json` does, into a memory buffer.  The Python side
 * (sertrace.inspect, in python/sertrace/__init__.py) parses the JSON and
 * turns a non-zero status into an exception.  The GIL is released while
 * the bytes are read (the buffer is held through the call).  No Python
 * object of the payload is ever created: the emulator imports and calls
 * nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "core.h"
#include "inspect.h"
#include "summary.h"

typedef struct membuf {
    char *p;
    size_t len, cap;
} membuf;

static int membuf_write(void *ctx, const char *s, size_t n)
{
    membuf *b = ctx;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *q;
        while (cap < b->len + n)
            cap *= 2;
        q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static PyObject *summary_json(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int top;
    unsigned long long oversize_bytes, max_memory;
    double oversize_percent;
    sertrace_summary_opts so = SERTRACE_SUMMARY_OPTS_DEFAULT;
    sertrace_inspect_limits lim = {0, SERTRACE_INSPECT_DEFAULT_DEPTH, false, 0};
    sertrace_inspect_result res;
    sertrace_core_visitor v;
    sertrace_summary *sum;
    sertrace_core *core = NULL;
    membuf out = {0};
    int rc = SERTRACE_INSPECT_FAILED, ok = 0;
    PyObject *ret = NULL;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*IKdK", &view, &top, &oversize_bytes, &oversize_percent,
                          &max_memory))
        return NULL;
    so.json = true;
    so.top = top;
    so.oversize_bytes = oversize_bytes;
    so.oversize_percent = oversize_percent;
    so.input = "data"; /* sertrace.inspect(data): each dump's "input_offset" in it */
    lim.max_memory = max_memory;
    memset(&res, 0, sizeof res);
    Py_BEGIN_ALLOW_THREADS sum = sertrace_summary_create(&so, membuf_write, &out);
    if (sum) {
        sertrace_summary_visitor(sum, &v);
        core = sertrace_core_create(&v);
    }
    if (core) {
        rc = sertrace_inspect_run(view.buf, (size_t)view.len, &lim, core, &res);
        ok = sertrace_core_finish(core) == 0 &&
             sertrace_summary_finish(sum, sertrace_core_get_stats(core)) == 0;
        sertrace_core_destroy(core);
    }
    if (sum)
        sertrace_summary_destroy(sum);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    if (!ok)
        PyErr_NoMemory();
    else
        ret = Py_BuildValue("iKsy#", rc, (unsigned long long)res.offset, res.reason,
                            out.p ? out.p : "", (Py_ssize_t)out.len);
    free(out.p);
    return ret;
}

static PyMethodDef methods[] = {
    {"summary_json", summary_json, METH_VARARGS,
     "summary_json(data, top, oversize_bytes, oversize_percent, max_memory) -> "
     "(status, offset, reason, json): the JSON summary of pickle bytes, without unpickling"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "sertrace._inspect",
    "The pickle emulator of `sertrace inspect` (see sertrace.inspect).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__inspect(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "OK", SERTRACE_INSPECT_OK) < 0 ||
              PyModule_AddIntConstant(m, "MALFORMED", SERTRACE_INSPECT_MALFORMED) < 0 ||
              PyModule_AddIntConstant(m, "LIMIT", SERTRACE_INSPECT_LIMIT) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
