/* pymodule.c -- sertrace._inspect: the emulator for Python.
 *
 * summary(data, top, oversize_bytes, oversize_percent, max_memory) ->
 * (status, offset, reason, dict): the bytes go through the emulator into
 * the tree core and the JSON summary sink, exactly as `sertrace inspect
 * --json` does, into a memory buffer (summary.h's capture), and that text
 * is turned into Python objects here: the dict json.loads would give (the
 * same types, the same key order; a text this reader does not take, which
 * the summary never writes, goes to json.loads).  summary_json(...) gives
 * the text itself.  The Python side (sertrace.inspect, in
 * python/sertrace/__init__.py) turns a non-zero status into an exception.
 * The GIL is released while the bytes are read (the buffer is held through
 * the call).  No Python object of the payload is ever created: the
 * emulator imports and calls nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "core.h"
#include "inspect.h"
#include "summary.h"

/* One capture kept for the process (taken and given back with the GIL
 * held, so a call in another thread makes its own): a capture's setup,
 * the summary's and the core's tables, costs ~30 k instructions of
 * callocs and memsets, a reset a few hundred.  Kept for the options it
 * was made with; a call with others makes its own and keeps that one. */
typedef struct capture_key {
    unsigned top;
    unsigned long long oversize_bytes;
    double oversize_percent;
} capture_key;

static sertrace_summary_capture *spare_capture;
static capture_key spare_key;

static bool same_key(const capture_key *a, const capture_key *b)
{
    return a->top == b->top && a->oversize_bytes == b->oversize_bytes &&
           a->oversize_percent == b->oversize_percent;
}

/* A capture ready to be fed (the spare one, or a new one); NULL out of
 * memory. */
static sertrace_summary_capture *take_capture(const capture_key *k)
{
    sertrace_summary_capture *c = spare_capture;
    if (c && same_key(&spare_key, k)) {
        spare_capture = NULL;
        return c;
    }
    sertrace_summary_opts so = SERTRACE_SUMMARY_OPTS_DEFAULT;
    so.json = true;
    so.top = k->top;
    so.oversize_bytes = k->oversize_bytes;
    so.oversize_percent = k->oversize_percent;
    so.input = "data"; /* sertrace.inspect(data): each dump's "input_offset" in it */
    c = PyMem_RawMalloc(sizeof *c);
    if (!c)
        return NULL;
    if (sertrace_summary_capture_begin(c, &so, NULL) < 0) {
        sertrace_summary_capture_release(c);
        PyMem_RawFree(c);
        return NULL;
    }
    return c;
}

static void drop_capture(sertrace_summary_capture *c)
{
    sertrace_summary_capture_release(c);
    PyMem_RawFree(c);
}

/* After a call: `c` reset and kept as the spare (`finished`: its finish
 * returned 0, so no dump is live), or freed. */
static void give_back_capture(sertrace_summary_capture *c, const capture_key *k, bool finished)
{
    if (!finished || sertrace_summary_capture_reset(c) < 0) {
        drop_capture(c);
        return;
    }
    if (spare_capture)
        drop_capture(spare_capture);
    spare_capture = c;
    spare_key = *k;
}

/* The JSON summary of `view` into `cap` (taken by take_capture); 0, or
 * -1 out of memory. */
static int run_summary(Py_buffer *view, unsigned long long max_memory,
                       sertrace_summary_capture *cap, int *rc, sertrace_inspect_result *res)
{
    sertrace_inspect_limits lim = {0, SERTRACE_INSPECT_DEFAULT_DEPTH, false, 0};
    int ok;

    lim.max_memory = max_memory;
    memset(res, 0, sizeof *res);
    Py_BEGIN_ALLOW_THREADS *rc =
        sertrace_inspect_run(view->buf, (size_t)view->len, &lim, cap->core, res);
    ok = sertrace_summary_capture_finish(cap);
    Py_END_ALLOW_THREADS return ok;
}

/* ---- JSON text to Python objects (what json.loads gives) ------------------ */

/* Strings repeat (every entry has "bytes", "path" ..., kinds and type
 * names recur): a short ASCII string's str is made once for the process,
 * found again by a hash of its bytes (a slot taken by another string is
 * given to the newer one).  Keys and values alike: a str is immutable, so
 * sharing one is invisible but for `is`. */
#define KEY_SLOTS 512
#define KEY_MAX 48

static PyObject *str_cache[KEY_SLOTS];

/* Bytes that end a string's plain run: the quote, the backslash, control
 * characters (NUL among them: the end of the text) and non-ASCII bytes. */
static const unsigned char str_stop[256] = {
    [0 ... 0x1f] = 1,
    ['"'] = 1,
    ['\\'] = 1,
    [0x80 ... 0xff] = 1,
};

/* A dict's members gathered before the dict is made at their number
 * (no resize while filling); a longer dict takes the rest one by one. */
#define DICT_BATCH 48

typedef struct jreader {
    const char *p, *end;
    int depth;
} jreader;

/* NULL with no Python error: a text this reader does not take. */
static PyObject *j_value(jreader *r);

/* JSON's white space (not NUL: the text's end stops the scan). */
static const unsigned char json_space[256] = {[' '] = 1, ['\n'] = 1, ['\t'] = 1, ['\r'] = 1};

static void j_space(jreader *r)
{
    while (json_space[(unsigned char)*r->p])
        r->p++;
}

static int hex4(const char *p, Py_UCS4 *out)
{
    Py_UCS4 v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (Py_UCS4)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (Py_UCS4)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (Py_UCS4)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* UTF-8 of code point `ch` (a lone surrogate too: "surrogatepass"). */
static size_t put_utf8(char *o, Py_UCS4 ch)
{
    if (ch < 0x80) {
        o[0] = (char)ch;
        return 1;
    }
    if (ch < 0x800) {
        o[0] = (char)(0xc0 | (ch >> 6));
        o[1] = (char)(0x80 | (ch & 0x3f));
        return 2;
    }
    if (ch < 0x10000) {
        o[0] = (char)(0xe0 | (ch >> 12));
        o[1] = (char)(0x80 | ((ch >> 6) & 0x3f));
        o[2] = (char)(0x80 | (ch & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (ch >> 18));
    o[1] = (char)(0x80 | ((ch >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((ch >> 6) & 0x3f));
    o[3] = (char)(0x80 | (ch & 0x3f));
    return 4;
}

/* A string (r->p after its opening quote); a short ASCII one is shared
 * through str_cache.  Escapes are undone into UTF-8 (never longer than its escaped
 * form), then decoded as json.loads decodes its input ("surrogatepass"). */
static PyObject *j_string(jreader *r)
{
    const char *s = r->p, *q = s;
    char *buf = NULL;
    size_t n;
    unsigned high = 0;
    PyObject *o;
    /* the text ends with a NUL (from_json), which stops this scan */
    while (!str_stop[(unsigned char)*q])
        q++;
    while ((unsigned char)*q >= 0x80) { /* UTF-8: past it, then plain bytes again */
        high = 0x80;
        do
            q++;
        while (!str_stop[(unsigned char)*q]);
    }
    if (q >= r->end || (unsigned char)*q < 0x20)
        return NULL;
    if (*q == '"' && high < 0x80) { /* ASCII, no escape: copied */
        n = (size_t)(q - s);
        r->p = q + 1;
        PyObject **slot = NULL;
        if (n <= KEY_MAX) {
            /* a hash of its length, first and last (up to) 8 bytes: enough
             * to tell the summary's strings apart (a clash costs a str) */
            uint64_t a = 0, z = 0, h;
            memcpy(&a, s, n < 8 ? n : 8);
            if (n > 8)
                memcpy(&z, s + n - 8, 8);
            h = (a * 0x9E3779B97F4A7C15ull) ^ (z * 0xC2B2AE3D27D4EB4Full) ^ n;
            h ^= h >> 31;
            slot = &str_cache[(h ^ (h >> 17)) & (KEY_SLOTS - 1)];
            if (*slot && (size_t)PyUnicode_GET_LENGTH(*slot) == n &&
                memcmp(PyUnicode_1BYTE_DATA(*slot), s, n) == 0) {
                Py_INCREF(*slot);
                return *slot;
            }
        }
        o = PyUnicode_New((Py_ssize_t)n, 127);
        if (!o)
            return NULL;
        memcpy(PyUnicode_1BYTE_DATA(o), s, n);
        if (slot) {
            Py_XSETREF(*slot, o);
            Py_INCREF(o);
        }
        return o;
    }
    if (*q == '"') { /* no escape: the UTF-8 text as it is */
        n = (size_t)(q - s);
        r->p = q + 1;
    } else {
        const char *p = s;
        char *out;
        while (q < r->end && *q != '"') { /* its end: a quote not escaped */
            if (*q == '\\')
                q++;
            q++;
        }
        if (q >= r->end)
            return NULL;
        buf = out = PyMem_Malloc((size_t)(q - s) + 1);
        if (!buf)
            return PyErr_NoMemory();
        while (p < q) {
            Py_UCS4 ch;
            if ((unsigned char)*p < 0x20)
                goto bad;
            if (*p != '\\') {
                *out++ = *p++;
                continue;
            }
            p++;
            switch (*p++) {
            case '"':
                ch = '"';
                break;
            case '\\':
                ch = '\\';
                break;
            case '/':
                ch = '/';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'n':
                ch = '\n';
                break;
            case 'r':
                ch = '\r';
                break;
            case 't':
                ch = '\t';
                break;
            case 'u':
                if (q - p < 4 || hex4(p, &ch) < 0)
                    goto bad;
                p += 4;
                /* a surrogate pair is one character, as json.loads reads it */
                if (ch >= 0xd800 && ch <= 0xdbff && q - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                    Py_UCS4 lo;
                    if (hex4(p + 2, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
                        ch = 0x10000 + (((ch - 0xd800) << 10) | (lo - 0xdc00));
                        p += 6;
                    }
                }
                break;
            default:
                goto bad;
            }
            out += put_utf8(out, ch);
        }
        s = buf;
        n = (size_t)(out - buf);
        r->p = q + 1;
    }
    o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogatepass");
    PyMem_Free(buf);
    return o;
bad:
    PyMem_Free(buf);
    return NULL;
}

static PyObject *j_number(jreader *r)
{
    const char *s = r->p, *q = s;
    bool is_float = false;
    char tmp[64];
    if (q < r->end && *q == '-')
        q++;
    if (q >= r->end || *q < '0' || *q > '9')
        return NULL;
    if (*q == '0' && q + 1 < r->end && q[1] >= '0' && q[1] <= '9')
        return NULL; /* a leading zero: not JSON */
    while (q < r->end && *q >= '0' && *q <= '9')
        q++;
    if (q < r->end && *q == '.') {
        is_float = true;
        if (++q >= r->end || *q < '0' || *q > '9')
            return NULL;
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        is_float = true;
        q++;
        if (q < r->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return NULL;
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (!is_float && q - s <= 18) { /* fits a long long */
        long long v = 0;
        for (const char *t = *s == '-' ? s + 1 : s; t < q; t++)
            v = v * 10 + (*t - '0');
        r->p = q;
        return PyLong_FromLongLong(*s == '-' ? -v : v);
    }
    if ((size_t)(q - s) >= sizeof tmp)
        return NULL; /* json.loads then (a number the summary does not write) */
    memcpy(tmp, s, (size_t)(q - s));
    tmp[q - s] = '\0';
    r->p = q;
    if (!is_float)
        return PyLong_FromString(tmp, NULL, 10);
    double d = PyOS_string_to_double(tmp, NULL, NULL); /* float(text), as json.loads */
    if (d == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(d);
}

/* The `*n` gathered members into `*d` (made at their number when NULL),
 * their references given; 0, or -1 (then `*n` members are left). */
static int dict_put(PyObject **d, PyObject **kv, int *n)
{
    if (!*d && !(*d = _PyDict_NewPresized(*n)))
        return -1;
    for (int i = 0; i < *n; i++) {
        if (PyDict_SetItem(*d, kv[2 * i], kv[2 * i + 1]) < 0) {
            for (int j = 2 * i; j < 2 * *n; j++) /* what is left, for the caller */
                kv[j - 2 * i] = kv[j];
            *n -= i;
            return -1;
        }
        Py_DECREF(kv[2 * i]);
        Py_DECREF(kv[2 * i + 1]);
    }
    *n = 0;
    return 0;
}

static PyObject *j_value(jreader *r)
{
    j_space(r);
    if (r->p >= r->end)
        return NULL;
    switch (*r->p) {
    case '{': {
        if (++r->depth > 200)
            return NULL;
        r->p++;
        PyObject *d = NULL, *kv[2 * DICT_BATCH];
        int n = 0;
        j_space(r);
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            r->depth--;
            return PyDict_New();
        }
        for (;;) {
            j_space(r);
            if (r->p >= r->end || *r->p != '"')
                goto dict_bad;
            r->p++;
            PyObject *k = j_string(r);
            if (!k)
                goto dict_bad;
            j_space(r);
            if (r->p >= r->end || *r->p != ':') {
                Py_DECREF(k);
                goto dict_bad;
            }
            r->p++;
            PyObject *v = j_value(r);
            if (!v) {
                Py_DECREF(k);
                goto dict_bad;
            }
            if (n == DICT_BATCH && dict_put(&d, kv, &n) < 0) {
                Py_DECREF(k);
                Py_DECREF(v);
                goto dict_bad;
            }
            kv[2 * n] = k;
            kv[2 * n + 1] = v;
            n++;
            j_space(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == '}') {
                r->p++;
                r->depth--;
                if (dict_put(&d, kv, &n) < 0)
                    goto dict_bad;
                return d;
            }
            goto dict_bad;
        }
    dict_bad:
        for (int i = 0; i < 2 * n; i++)
            Py_DECREF(kv[i]);
        Py_XDECREF(d);
        return NULL;
    }
    case '[': {
        if (++r->depth > 200)
            return NULL;
        r->p++;
        PyObject *l = PyList_New(0);
        if (!l)
            return NULL;
        j_space(r);
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            r->depth--;
            return l;
        }
        for (;;) {
            PyObject *v = j_value(r);
            if (!v || PyList_Append(l, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(l);
                return NULL;
            }
            Py_DECREF(v);
            j_space(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == ']') {
                r->p++;
                r->depth--;
                return l;
            }
            Py_DECREF(l);
            return NULL;
        }
    }
    case '"':
        r->p++;
        return j_string(r);
    case 't':
        if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
            r->p += 4;
            Py_RETURN_TRUE;
        }
        return NULL;
    case 'f':
        if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
            r->p += 5;
            Py_RETURN_FALSE;
        }
        return NULL;
    case 'n':
        if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
            r->p += 4;
            Py_RETURN_NONE;
        }
        return NULL;
    default:
        return j_number(r);
    }
}

/* json.loads(text): the fallback. */
static PyObject *json_loads(const char *s, size_t n)
{
    PyObject *json = PyImport_ImportModule("json"), *ret = NULL;
    if (json) {
        ret = PyObject_CallMethod(json, "loads", "y#", s, (Py_ssize_t)n);
        Py_DECREF(json);
    }
    return ret;
}

/* The objects of the JSON text `s`, as json.loads gives them; s[n] is a
 * NUL (the reader's scans stop there). */
static PyObject *from_json(const char *s, size_t n)
{
    assert(s[n] == '\0');
    jreader r = {s, s + n, 0};
    PyObject *o = j_value(&r);
    if (o) {
        j_space(&r);
        if (r.p != r.end)
            Py_CLEAR(o);
    }
    if (o)
        return o;
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_ValueError) &&
        !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return NULL; /* out of memory */
    PyErr_Clear();
    return json_loads(s, n);
}

/* summary(...) with as_dict, summary_json(...) without. */
static PyObject *summary_common(PyObject *args, bool as_dict)
{
    Py_buffer view;
    capture_key key;
    unsigned long long max_memory;
    sertrace_inspect_result res;
    sertrace_summary_capture *cap;
    int rc, ok;
    PyObject *ret = NULL;

    if (!PyArg_ParseTuple(args, "y*IKdK", &view, &key.top, &key.oversize_bytes,
                          &key.oversize_percent, &max_memory))
        return NULL;
    cap = take_capture(&key);
    if (!cap) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    ok = run_summary(&view, max_memory, cap, &rc, &res);
    PyBuffer_Release(&view);
    if (ok < 0) {
        PyErr_NoMemory();
    } else if (as_dict) {
        PyObject *d = from_json(cap->out.data ? cap->out.data : "", cap->out.len);
        if (d) {
            ret = Py_BuildValue("iKsN", rc, (unsigned long long)res.offset, res.reason, d);
        }
    } else {
        ret = Py_BuildValue("iKsy#", rc, (unsigned long long)res.offset, res.reason,
                            cap->out.data ? cap->out.data : "", (Py_ssize_t)cap->out.len);
    }
    give_back_capture(cap, &key, ok == 0);
    return ret;
}

static PyObject *summary(PyObject *self, PyObject *args)
{
    (void)self;
    return summary_common(args, true);
}

static PyObject *summary_json(PyObject *self, PyObject *args)
{
    (void)self;
    return summary_common(args, false);
}

/* from_json alone, for the tests (the text copied, with its NUL). */
static PyObject *json_objects(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    PyObject *ret = NULL;
    char *copy;
    (void)self;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    copy = PyMem_Malloc((size_t)view.len + 1);
    if (copy) {
        memcpy(copy, view.buf, (size_t)view.len);
        copy[view.len] = '\0';
        ret = from_json(copy, (size_t)view.len);
        PyMem_Free(copy);
    } else {
        PyErr_NoMemory();
    }
    PyBuffer_Release(&view);
    return ret;
}

static PyMethodDef methods[] = {
    {"summary", summary, METH_VARARGS,
     "summary(data, top, oversize_bytes, oversize_percent, max_memory) -> "
     "(status, offset, reason, dict): the summary of pickle bytes, without unpickling "
     "(the dict json.loads gives of summary_json's text)"},
    {"summary_json", summary_json, METH_VARARGS,
     "summary_json(data, top, oversize_bytes, oversize_percent, max_memory) -> "
     "(status, offset, reason, json): the JSON summary of pickle bytes, without unpickling"},
    {"json_objects", json_objects, METH_O,
     "json_objects(text) -> the objects json.loads(text) gives (summary's reader, for tests)"},
    {NULL, NULL, 0, NULL},
};

/* The module's caches (the spare capture, str_cache) are the process's;
 * they go when the last module object dies (module_free()), and are made
 * again on use.  Single-phase init with m_size 0, so that the import
 * system runs PyInit__inspect for each new module object (a re-import
 * after `del sys.modules[...]`, a Python initialized again after
 * Py_Finalize) and calls m_free for each one that dies, at the latest
 * during finalization: observed on 3.11, 3.12.1 and 3.13.0 (with m_size
 * -1, a re-import copies the first module's dict without PyInit, and 3.11
 * and 3.12 never call m_free).  serializers/pickle/module.c does the same;
 * tests/pickle/test_module_reinit.py checks both. */
static Py_ssize_t live_modules;

static void module_free(void *module)
{
    (void)module;
    if (--live_modules > 0)
        return;
    for (size_t i = 0; i < KEY_SLOTS; i++)
        Py_CLEAR(str_cache[i]);
    if (spare_capture) {
        drop_capture(spare_capture);
        spare_capture = NULL;
    }
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sertrace._inspect",
    .m_doc = "The pickle emulator of `sertrace inspect` (see sertrace.inspect).",
    .m_size = 0,
    .m_methods = methods,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__inspect(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m)
        live_modules++; /* module_free() runs when m dies, on the error path below too */
    if (m && (PyModule_AddIntConstant(m, "OK", SERTRACE_INSPECT_OK) < 0 ||
              PyModule_AddIntConstant(m, "MALFORMED", SERTRACE_INSPECT_MALFORMED) < 0 ||
              PyModule_AddIntConstant(m, "LIMIT", SERTRACE_INSPECT_LIMIT) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
