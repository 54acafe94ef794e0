/* save.c -- what the pickler writes for each object.
 *
 * Shape (CPython's Modules/_pickle.c, written anew): save() handles the
 * persistent id, then save_dispatch() picks a save_<kind>() by the object's
 * EXACT type (atoms first, then the memo, then containers, then
 * reducer_override / classes / functions, then the reduce protocol).  Each
 * save_<kind>() writes through output.c and memoizes what it wrote.  The
 * bytes, the batching (1000 items per APPENDS/SETITEMS/ADDITEMS), the
 * recursion checks and the error messages follow CPython 3.11's C pickler
 * exactly: the output must be byte-identical to pickle.dumps.
 *
 * Tracing costs one branch per object here: save() hands over to
 * save_traced() (trace.c) when a listener exists; the save_<kind>()
 * functions only add error notes, and only on the error path.
 */
#include <string.h>

#include "pickler.h"

#if PY_VERSION_HEX >= 0x030D0000
/* CPython 3.13 moved this prototype to its internal headers
 * (pycore_setobject.h, Py_BUILD_CORE only); libpython still exports the
 * function (for _abc), with the same signature and borrowed references. */
PyAPI_FUNC(int) _PySet_NextEntry(PyObject *set, Py_ssize_t *pos, PyObject **key,
                                 Py_hash_t *hash);
#endif

/* ---- memo ------------------------------------------------------------ */

/* `op`, the decimal digits of v and a newline (what "%c%lld\n" prints),
 * into out (>= 22 bytes); returns the length.  The text protocols' INT,
 * PUT and GET, without a printf per object. */
static Py_ssize_t format_decimal_line(char *out, char op, long long v)
{
    char digits[20];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    Py_ssize_t len = 0;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    out[len++] = op;
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = digits[--n];
    out[len++] = '\n';
    return len;
}

/* Memoize obj and write PUT/BINPUT/MEMOIZE.  `slot`: NULL, or the empty
 * slot save_memoizable() found for obj, when nothing can have changed the
 * memo since (no save, no user code in between: no file.write() either,
 * see save_unicode). */
static int memo_put_at(pickler *p, PyObject *obj, memo_entry *slot)
{
    char pdata[30];
    Py_ssize_t len;
    Py_ssize_t idx;

    if (p->fast)
        return 0;
    /* Defence in depth for the rule above: should a save path ever let
     * user code run between finding the slot and here (the memo replaced
     * through pickler.memo, or grown by a nested save), a slot outside the
     * current table or no longer empty is dropped and the key probed
     * again, so nothing is written into a freed table.  (A new table
     * allocated at the same address passes this check; a write there is
     * in bounds, and the differential tests would show the mis-placed
     * entry as a wrong GET.) */
    if (slot != NULL &&
        ((uintptr_t)slot - (uintptr_t)p->memo.table >= (p->memo.mask + 1) * sizeof *slot ||
         slot->key != NULL))
        slot = NULL;
    idx = (Py_ssize_t)p->memo.used;
    if ((slot != NULL ? memo_set_at(&p->memo, slot, obj, idx) : memo_set(&p->memo, obj, idx)) < 0)
        return -1;
    if (p->proto >= 4)
        return output_write_byte(p, (char)OP_MEMOIZE);
    if (!p->bin) {
        len = format_decimal_line(pdata, OP_PUT, idx);
    }
    else if (idx < 256) {
        char *out = output_claim(p, 2);
        if (out == NULL)
            return -1;
        out[0] = OP_BINPUT;
        out[1] = (char)idx;
        return 0;
    }
    else if ((size_t)idx <= 0xffffffffUL) {
        pdata[0] = OP_LONG_BINPUT;
        for (int i = 0; i < 4; i++)
            pdata[1 + i] = (char)((idx >> (8 * i)) & 0xff);
        len = 5;
    }
    else {
        PyErr_SetString(G.PicklingError, "memo id too large for LONG_BINPUT");
        return -1;
    }
    return output_write(p, pdata, len);
}

static int memo_put(pickler *p, PyObject *obj)
{
    return memo_put_at(p, obj, NULL);
}

/* GET / BINGET / LONG_BINGET of memo index *value. */
static int memo_write_get(pickler *p, const Py_ssize_t *value)
{
    char pdata[30];
    Py_ssize_t len;

    if (!p->bin) {
        len = format_decimal_line(pdata, OP_GET, *value);
    }
    else if (*value < 256) {
        char *out = output_claim(p, 2);
        if (out == NULL)
            return -1;
        out[0] = OP_BINGET;
        out[1] = (char)(*value & 0xff);
        return 0;
    }
    else if ((size_t)*value <= 0xffffffffUL) {
        char *out = output_claim(p, 5);
        if (out == NULL)
            return -1;
        out[0] = OP_LONG_BINGET;
        for (int i = 0; i < 4; i++)
            out[1 + i] = (char)((*value >> (8 * i)) & 0xff);
        return 0;
    }
    else {
        PyErr_SetString(G.PicklingError, "memo id too large for LONG_BINGET");
        return -1;
    }
    return output_write(p, pdata, len);
}

int memo_get(pickler *p, PyObject *obj)
{
    Py_ssize_t *value = memo_lookup(&p->memo, obj);

    if (value == NULL) {
        PyErr_SetObject(PyExc_KeyError, obj);
        return -1;
    }
    return memo_write_get(p, value);
}

/* ---- fast mode (no memo; cycle check beyond 50 levels) ---------------- */

static int fast_save_enter(pickler *p, PyObject *obj)
{
    if (++p->fast_nesting >= PICKLE_FAST_NESTING_LIMIT) {
        PyObject *key;
        int r;
        if (p->fast_memo == NULL) {
            p->fast_memo = PyDict_New();
            if (p->fast_memo == NULL) {
                p->fast_nesting = -1;
                return 0;
            }
        }
        key = PyLong_FromVoidPtr(obj);
        if (key == NULL) {
            p->fast_nesting = -1;
            return 0;
        }
        r = PyDict_Contains(p->fast_memo, key);
        if (r > 0) {
            PyErr_Format(PyExc_ValueError,
                         "fast mode: can't pickle cyclic objects "
                         "including object type %.200s at %p",
                         Py_TYPE(obj)->tp_name, obj);
            p->fast_nesting = -1;
        }
        else if (r == 0) {
            r = PyDict_SetItem(p->fast_memo, key, Py_None);
        }
        Py_DECREF(key);
        if (r != 0) {
            p->fast_nesting = -1;
            return 0;
        }
    }
    return 1;
}

static int fast_save_leave(pickler *p, PyObject *obj)
{
    if (p->fast_nesting-- >= PICKLE_FAST_NESTING_LIMIT) {
        PyObject *key = PyLong_FromVoidPtr(obj);
        if (key == NULL)
            return 0;
        if (PyDict_DelItem(p->fast_memo, key) < 0) {
            Py_DECREF(key);
            return 0;
        }
        Py_DECREF(key);
    }
    return 1;
}

/* save(p, obj, 0) for the items of lists, tuples and dicts: the dormant
 * case without a persistent_id (one branch) inline, atoms included. */
static inline __attribute__((always_inline)) int save_plain(pickler *p, PyObject *obj);
static inline __attribute__((always_inline)) int save_item(pickler *p, PyObject *obj)
{
    if (__builtin_expect(p->trace != NULL || p->pers_func != NULL, 0))
        return save(p, obj, 0);
    if (output_opcode_boundary(p) < 0)
        return -1;
    return save_plain(p, obj);
}

/* Py_EnterRecursiveCall(" while pickling an object") / Py_LeaveRecursiveCall()
 * without the two calls into libpython (_pickle.c, built into the
 * interpreter, has them inline).  3.11 (cpython/pystate.h, pycore_ceval.h):
 * Enter is `recursion_remaining-- <= 0 && _Py_CheckRecursiveCall()`, Leave
 * is `recursion_remaining++`; when the check is due, the real function runs
 * it (and does the decrement itself), so limits and messages are the same. */
static inline int enter_recursive(pickler *p)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && !defined(USE_STACKCHECK)
    PyThreadState *ts = p->tstate;
    if (__builtin_expect(ts->recursion_remaining > 0, 1)) {
        ts->recursion_remaining--;
        return 0;
    }
#else
    (void)p;
#endif
    return Py_EnterRecursiveCall(" while pickling an object");
}

static inline void leave_recursive(pickler *p)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && !defined(USE_STACKCHECK)
    p->tstate->recursion_remaining++;
#else
    (void)p;
    Py_LeaveRecursiveCall();
#endif
}

/* ---- atoms ----------------------------------------------------------- */

static inline __attribute__((always_inline)) int save_none(pickler *p)
{
    return output_write_byte(p, OP_NONE);
}

static inline __attribute__((always_inline)) int save_bool(pickler *p, PyObject *obj)
{
    if (p->proto >= 2) {
        const char op = (char)(obj == Py_True ? OP_NEWTRUE : OP_NEWFALSE);
        return output_write(p, &op, 1);
    }
    return output_write(p, obj == Py_True ? "I01\n" : "I00\n", 4);
}

/* Minimal little-endian two's complement of an int that does not fit in
 * a C long long: int.to_bytes((bit_length >> 3) + 1, 'little', signed=True)
 * with the redundant sign byte of negative numbers trimmed, as
 * _PyLong_AsByteArray() + _pickle.c's trim produce. */
static PyObject *long_bytes_big(PyObject *obj, int sign)
{
    PyObject *nbits_obj = PyObject_CallMethodNoArgs(obj, G.s_bit_length);
    if (nbits_obj == NULL)
        return NULL;
    size_t nbits = PyLong_AsSize_t(nbits_obj);
    Py_DECREF(nbits_obj);
    if (nbits == (size_t)-1 && PyErr_Occurred())
        return NULL;
    size_t nbytes = (nbits >> 3) + 1;
    if (nbytes > 0x7fffffffL) {
        PyErr_SetString(PyExc_OverflowError, "int too large to pickle");
        return NULL;
    }
    PyObject *res = NULL, *method = NULL, *args = NULL, *kwargs = NULL;
    method = PyObject_GetAttr(obj, G.s_to_bytes);
    args = Py_BuildValue("(nO)", (Py_ssize_t)nbytes, G.s_little);
    kwargs = Py_BuildValue("{s:O}", "signed", Py_True);
    if (method != NULL && args != NULL && kwargs != NULL)
        res = PyObject_Call(method, args, kwargs);
    Py_XDECREF(method);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    if (res == NULL)
        return NULL;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(res);
    if (sign < 0 && nbytes > 1 && d[nbytes - 1] == 0xff && (d[nbytes - 2] & 0x80) != 0) {
        PyObject *trimmed = PyBytes_FromStringAndSize((const char *)d, (Py_ssize_t)nbytes - 1);
        Py_DECREF(res);
        return trimmed;
    }
    return res;
}

/* An int that fits in 32 bits, protocol >= 1: BININT1 / BININT2 / BININT,
 * written straight into the output buffer (bytes stored one by one into a
 * stack array and copied as one word stall on store forwarding: that copy
 * was a quarter of the time of a list of ints). */
static inline __attribute__((always_inline)) int save_int32_bin(pickler *p, long long val)
{
    uint32_t u = (uint32_t)val;
    char *out;
    if (val >= 0 && val <= 0xff) {
        if ((out = output_claim(p, 2)) == NULL)
            return -1;
        out[0] = OP_BININT1;
        out[1] = (char)u;
    }
    else if (val >= 0 && val <= 0xffff) {
        if ((out = output_claim(p, 3)) == NULL)
            return -1;
        out[0] = OP_BININT2;
        out[1] = (char)u;
        out[2] = (char)(u >> 8);
    }
    else {
        if ((out = output_claim(p, 5)) == NULL)
            return -1;
        out[0] = OP_BININT;
        out[1] = (char)u;
        out[2] = (char)(u >> 8);
        out[3] = (char)(u >> 16);
        out[4] = (char)(u >> 24);
    }
    return 0;
}

static int save_long_slow(pickler *p, PyObject *obj);

/* The common case inline: an int of at most two 30-bit digits (CPython
 * 3.11's layout, cpython/longintrepr.h) that fits in 32 bits, protocol >= 1. */
static inline __attribute__((always_inline)) int save_long(pickler *p, PyObject *obj)
{
#if PY_VERSION_HEX < 0x030C0000
    Py_ssize_t ndigits = Py_SIZE(obj);
    if (p->bin && ndigits >= -2 && ndigits <= 2) {
        const digit *d = ((PyLongObject *)obj)->ob_digit;
        long long mag = ndigits == 0 ? 0 : (long long)d[0];
        if (ndigits == 2 || ndigits == -2)
            mag |= (long long)d[1] << PyLong_SHIFT;
        long long val = ndigits < 0 ? -mag : mag;
        if (val <= 0x7fffffffLL && val >= -0x7fffffffLL - 1)
            return save_int32_bin(p, val);
    }
#endif
    return save_long_slow(p, obj);
}

static int save_long_slow(pickler *p, PyObject *obj)
{
    int overflow = 0;
    long long val;

    val = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (val == -1 && PyErr_Occurred())
        return -1;
    if (!overflow && val <= 0x7fffffffLL && val >= -0x7fffffffLL - 1) {
        if (p->bin)
            return save_int32_bin(p, val);
        char pdata[32];
        return output_write(p, pdata, format_decimal_line(pdata, OP_INT, val));
    }

    if (p->proto >= 2) {
        unsigned char small[10];
        const unsigned char *data;
        size_t nbytes;
        PyObject *big = NULL;
        char header[5];
        Py_ssize_t header_len;
        int status;

        if (!overflow) {
            /* Outside int32 but inside long long: no Python call needed. */
            unsigned long long mag = val < 0 ? (unsigned long long)(-(val + 1)) + 1
                                             : (unsigned long long)val;
            size_t nbits = 64 - (size_t)__builtin_clzll(mag);
            nbytes = (nbits >> 3) + 1;
            for (size_t i = 0; i < nbytes; i++)
                small[i] = i < 8 ? (unsigned char)(((unsigned long long)val >> (8 * i)) & 0xff)
                                 : (unsigned char)(val < 0 ? 0xff : 0);
            if (val < 0 && nbytes > 1 && small[nbytes - 1] == 0xff &&
                (small[nbytes - 2] & 0x80) != 0)
                nbytes--;
            data = small;
        }
        else {
            big = long_bytes_big(obj, overflow);
            if (big == NULL)
                return -1;
            data = (const unsigned char *)PyBytes_AS_STRING(big);
            nbytes = (size_t)PyBytes_GET_SIZE(big);
        }
        if (nbytes < 256) {
            header[0] = (char)OP_LONG1;
            header[1] = (char)nbytes;
            header_len = 2;
        }
        else {
            header[0] = (char)OP_LONG4;
            for (int i = 0; i < 4; i++)
                header[1 + i] = (char)((nbytes >> (8 * i)) & 0xff);
            header_len = 5;
        }
        status = output_write(p, header, header_len) < 0 ||
                         output_write(p, (const char *)data, (Py_ssize_t)nbytes) < 0
                     ? -1
                     : 0;
        Py_XDECREF(big);
        return status;
    }
    else {
        /* Protocols 0 and 1: LONG with the repr and a trailing 'L'. */
        const char op = OP_LONG;
        Py_ssize_t size;
        PyObject *repr = PyObject_Repr(obj);
        int status = -1;
        if (repr == NULL)
            return -1;
        const char *s = PyUnicode_AsUTF8AndSize(repr, &size);
        if (s != NULL && output_write(p, &op, 1) == 0 && output_write(p, s, size) == 0 &&
            output_write(p, "L\n", 2) == 0)
            status = 0;
        Py_DECREF(repr);
        return status;
    }
}

static int save_float_text(pickler *p, double x);
static inline __attribute__((always_inline)) int save_float(pickler *p, PyObject *obj)
{
    double x = PyFloat_AS_DOUBLE(obj);
    if (p->bin) {
        /* Packed in place (nothing is written after a failure). */
        char *out = output_claim(p, 9);
        if (out == NULL)
            return -1;
        out[0] = OP_BINFLOAT;
        return PyFloat_Pack8(x, out + 1, 0) < 0 ? -1 : 0;
    }
    return save_float_text(p, x);
}

static int save_float_text(pickler *p, double x)
{
    const char op = OP_FLOAT;
    int status = -1;
    char *buf = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (output_write(p, &op, 1) == 0 && output_write(p, buf, (Py_ssize_t)strlen(buf)) == 0 &&
        output_write(p, "\n", 1) == 0)
        status = 0;
    PyMem_Free(buf);
    return status;
}

/* ---- bytes, bytearray, str, PickleBuffer ------------------------------ */

static int save_reduce(pickler *p, PyObject *args, PyObject *obj);

static int save_bytes_data(pickler *p, PyObject *obj, const char *data, Py_ssize_t size)
{
    char header[9];
    Py_ssize_t len;

    if (size < 0)
        return -1;
    if (size <= 0xff) {
        header[0] = OP_SHORT_BINBYTES;
        header[1] = (char)size;
        len = 2;
    }
    else if ((size_t)size <= 0xffffffffUL) {
        header[0] = OP_BINBYTES;
        for (int i = 0; i < 4; i++)
            header[1 + i] = (char)((size >> (8 * i)) & 0xff);
        len = 5;
    }
    else if (p->proto >= 4) {
        header[0] = (char)OP_BINBYTES8;
        for (int i = 0; i < 8; i++)
            header[1 + i] = (char)(((size_t)size >> (8 * i)) & 0xff);
        len = 9;
    }
    else {
        PyErr_SetString(PyExc_OverflowError, "serializing a bytes object larger than 4 GiB "
                                             "requires pickle protocol 4 or higher");
        return -1;
    }
    if (output_write_bytes(p, header, len, data, size, obj) < 0)
        return -1;
    return memo_put(p, obj);
}

static int save_bytes(pickler *p, PyObject *obj)
{
    if (p->proto < 3) {
        /* No bytes opcode: reduce to _codecs.encode(latin-1 str, 'latin1'),
         * or bytes() when empty (Python 2 compatible). */
        PyObject *reduce_value;
        int status;
        if (PyBytes_GET_SIZE(obj) == 0) {
            reduce_value = Py_BuildValue("(O())", (PyObject *)&PyBytes_Type);
        }
        else {
            PyObject *text = PyUnicode_DecodeLatin1(PyBytes_AS_STRING(obj),
                                                    PyBytes_GET_SIZE(obj), "strict");
            if (text == NULL)
                return -1;
            reduce_value = Py_BuildValue("(O(OO))", G.codecs_encode, text, G.s_latin1);
            Py_DECREF(text);
        }
        if (reduce_value == NULL)
            return -1;
        status = save_reduce(p, reduce_value, obj);
        Py_DECREF(reduce_value);
        return status;
    }
    return save_bytes_data(p, obj, PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj));
}

static int save_bytearray_data(pickler *p, PyObject *obj, const char *data, Py_ssize_t size)
{
    char header[9];
    if (size < 0)
        return -1;
    header[0] = (char)OP_BYTEARRAY8;
    for (int i = 0; i < 8; i++)
        header[1 + i] = (char)(((size_t)size >> (8 * i)) & 0xff);
    if (output_write_bytes(p, header, 9, data, size, obj) < 0)
        return -1;
    return memo_put(p, obj);
}

static int save_bytearray(pickler *p, PyObject *obj)
{
    if (p->proto < 5) {
        PyObject *reduce_value = NULL;
        int status;
        if (PyByteArray_GET_SIZE(obj) == 0) {
            reduce_value = Py_BuildValue("(O())", (PyObject *)&PyByteArray_Type);
        }
        else {
            PyObject *bytes_obj = PyBytes_FromObject(obj);
            if (bytes_obj != NULL) {
                reduce_value =
                    Py_BuildValue("(O(O))", (PyObject *)&PyByteArray_Type, bytes_obj);
                Py_DECREF(bytes_obj);
            }
        }
        if (reduce_value == NULL)
            return -1;
        status = save_reduce(p, reduce_value, obj);
        Py_DECREF(reduce_value);
        return status;
    }
    return save_bytearray_data(p, obj, PyByteArray_AS_STRING(obj), PyByteArray_GET_SIZE(obj));
}

static int save_picklebuffer(pickler *p, PyObject *obj)
{
    if (p->proto < 5) {
#if PY_VERSION_HEX >= 0x030D0000
        PyErr_SetString(G.PicklingError, "PickleBuffer can only be pickled with protocol >= 5");
#else
        PyErr_SetString(G.PicklingError, "PickleBuffer can only pickled with protocol >= 5");
#endif
        return -1;
    }
    const Py_buffer *view = PyPickleBuffer_GetBuffer(obj);
    if (view == NULL)
        return -1;
    if (view->suboffsets != NULL || !PyBuffer_IsContiguous(view, 'A')) {
        PyErr_SetString(G.PicklingError, "PickleBuffer can not be pickled when "
                                         "pointing to a non-contiguous buffer");
        return -1;
    }
    int in_band = 1;
    if (p->buffer_callback != NULL) {
        PyObject *ret = PyObject_CallOneArg(p->buffer_callback, obj);
        if (ret == NULL)
            return -1;
        in_band = PyObject_IsTrue(ret);
        Py_DECREF(ret);
        if (in_band == -1)
            return -1;
    }
    if (in_band) {
        if (view->readonly)
            return save_bytes_data(p, obj, (const char *)view->buf, view->len);
        return save_bytearray_data(p, obj, (const char *)view->buf, view->len);
    }
    const char next_buffer_op = (char)OP_NEXT_BUFFER;
    if (output_write(p, &next_buffer_op, 1) < 0)
        return -1;
    if (view->readonly) {
        const char readonly_op = (char)OP_READONLY_BUFFER;
        if (output_write(p, &readonly_op, 1) < 0)
            return -1;
    }
    return 0;
}

/* Protocol 0 text of a str: raw-unicode-escape, plus \u escapes for the
 * characters that would break the line-based opcode. */
static PyObject *raw_unicode_escape(PyObject *obj)
{
    Py_ssize_t size = PyUnicode_GET_LENGTH(obj);
    int kind = PyUnicode_KIND(obj);
    const void *data = PyUnicode_DATA(obj);
    static const char hexdigits[] = "0123456789abcdef";
    Py_ssize_t out_len = 0;

    for (Py_ssize_t i = 0; i < size; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch >= 0x10000)
            out_len += 10;
        else if (ch >= 256 || ch == '\\' || ch == 0 || ch == '\n' || ch == '\r' || ch == 0x1a)
            out_len += 6;
        else
            out_len += 1;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, out_len);
    if (out == NULL)
        return NULL;
    char *q = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch >= 0x10000) {
            *q++ = '\\';
            *q++ = 'U';
            for (int shift = 28; shift >= 0; shift -= 4)
                *q++ = hexdigits[(ch >> shift) & 0xf];
        }
        else if (ch >= 256 || ch == '\\' || ch == 0 || ch == '\n' || ch == '\r' || ch == 0x1a) {
            *q++ = '\\';
            *q++ = 'u';
            for (int shift = 12; shift >= 0; shift -= 4)
                *q++ = hexdigits[(ch >> shift) & 0xf];
        }
        else {
            *q++ = (char)ch;
        }
    }
    return out;
}

static int write_unicode_binary(pickler *p, PyObject *obj)
{
    char header[9];
    Py_ssize_t len, size;
    PyObject *encoded = NULL;
    const char *data = PyUnicode_AsUTF8AndSize(obj, &size);

    if (data == NULL) {
        /* Lone surrogates: "surrogatepass", as pickle does. */
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(obj, "utf-8", "surrogatepass");
        if (encoded == NULL)
            return -1;
        data = PyBytes_AS_STRING(encoded);
        size = PyBytes_GET_SIZE(encoded);
    }
    if (size <= 0xff && p->proto >= 4) {
        header[0] = (char)OP_SHORT_BINUNICODE;
        header[1] = (char)(size & 0xff);
        len = 2;
    }
    else if ((size_t)size <= 0xffffffffUL) {
        header[0] = OP_BINUNICODE;
        for (int i = 0; i < 4; i++)
            header[1 + i] = (char)((size >> (8 * i)) & 0xff);
        len = 5;
    }
    else if (p->proto >= 4) {
        header[0] = (char)OP_BINUNICODE8;
        for (int i = 0; i < 8; i++)
            header[1 + i] = (char)(((size_t)size >> (8 * i)) & 0xff);
        len = 9;
    }
    else {
        PyErr_SetString(PyExc_OverflowError, "serializing a string larger than 4 GiB "
                                             "requires pickle protocol 4 or higher");
        Py_XDECREF(encoded);
        return -1;
    }
    int status = output_write_bytes(p, header, len, data, size, encoded);
    Py_XDECREF(encoded);
    return status;
}

static int save_unicode(pickler *p, PyObject *obj, memo_entry *slot)
{
    if (p->bin) {
        uint64_t flushed = p->flushed;
        if (write_unicode_binary(p, obj) < 0)
            return -1;
        /* A str of >= 64 KiB went to file.write(): user code ran, which
         * may have replaced the memo (pickler.memo = ...) and freed the
         * table `slot` points into.  Probe again. */
        if (p->flushed != flushed)
            slot = NULL;
    }
    else {
        const char op = OP_UNICODE;
        PyObject *encoded = raw_unicode_escape(obj);
        int status = -1;
        if (encoded == NULL)
            return -1;
        if (output_write(p, &op, 1) == 0 &&
            output_write(p, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded)) == 0 &&
            output_write(p, "\n", 1) == 0)
            status = 0;
        Py_DECREF(encoded);
        if (status < 0)
            return -1;
    }
    return memo_put_at(p, obj, slot);
}

/* ---- tuple, list, dict, set, frozenset -------------------------------- */

static int store_tuple_elements(pickler *p, PyObject *t, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *element = ((PyTupleObject *)t)->ob_item[i];
        if (element == NULL)
            return -1;
        if (save_item(p, element) < 0) {
            error_note_index(p, t, i);
            return -1;
        }
    }
    return 0;
}

static int save_tuple(pickler *p, PyObject *obj)
{
    static const char len2opcode[] = {OP_EMPTY_TUPLE, (char)OP_TUPLE1, (char)OP_TUPLE2,
                                      (char)OP_TUPLE3};
    const char pop_op = OP_POP;
    Py_ssize_t len = PyTuple_GET_SIZE(obj);

    if (len == 0) {
        if (p->proto)
            return output_write(p, len2opcode, 1);
        return output_write(p, "(t", 2);
    }
    if (len <= 3 && p->proto >= 2) {
        if (store_tuple_elements(p, obj, len) < 0)
            return -1;
        if (memo_lookup(&p->memo, obj)) {
            /* Recursive tuple: drop the elements, fetch it from the memo. */
            for (Py_ssize_t i = 0; i < len; i++)
                if (output_write(p, &pop_op, 1) < 0)
                    return -1;
            return memo_get(p, obj);
        }
        if (output_write(p, len2opcode + len, 1) < 0)
            return -1;
        return memo_put(p, obj);
    }
    const char mark_op = OP_MARK;
    if (output_write(p, &mark_op, 1) < 0)
        return -1;
    if (store_tuple_elements(p, obj, len) < 0)
        return -1;
    if (memo_lookup(&p->memo, obj)) {
        if (p->bin) {
            const char pop_mark_op = OP_POP_MARK;
            if (output_write(p, &pop_mark_op, 1) < 0)
                return -1;
        }
        else {
            for (Py_ssize_t i = 0; i <= len; i++)
                if (output_write(p, &pop_op, 1) < 0)
                    return -1;
        }
        return memo_get(p, obj);
    }
    const char tuple_op = OP_TUPLE;
    if (output_write(p, &tuple_op, 1) < 0)
        return -1;
    return memo_put(p, obj);
}

/* Items from an iterator: MARK item ... APPENDS in batches (APPEND one by
 * one for protocol 0).  `origobj` names the container in error notes. */
static int batch_list(pickler *p, PyObject *iter, PyObject *origobj)
{
    PyObject *obj = NULL, *firstitem = NULL;
    Py_ssize_t total = 0;
    int n;
    const char mark_op = OP_MARK, append_op = OP_APPEND, appends_op = OP_APPENDS;

    if (p->proto == 0) {
        for (;; total++) {
            int i;
            obj = PyIter_Next(iter);
            if (obj == NULL)
                return PyErr_Occurred() ? -1 : 0;
            i = save(p, obj, 0);
            Py_DECREF(obj);
            if (i < 0) {
                error_note_index(p, origobj, total);
                return -1;
            }
            if (output_write(p, &append_op, 1) < 0)
                return -1;
        }
    }
    do {
        firstitem = PyIter_Next(iter);
        if (firstitem == NULL) {
            if (PyErr_Occurred())
                goto error;
            break;
        }
        obj = PyIter_Next(iter);
        if (obj == NULL) {
            if (PyErr_Occurred())
                goto error;
            if (save(p, firstitem, 0) < 0) {
                error_note_index(p, origobj, total);
                goto error;
            }
            if (output_write(p, &append_op, 1) < 0)
                goto error;
            Py_CLEAR(firstitem);
            break;
        }
        if (output_write(p, &mark_op, 1) < 0)
            goto error;
        if (save(p, firstitem, 0) < 0) {
            error_note_index(p, origobj, total);
            goto error;
        }
        Py_CLEAR(firstitem);
        total++;
        n = 1;
        while (obj) {
            if (save(p, obj, 0) < 0) {
                error_note_index(p, origobj, total);
                goto error;
            }
            Py_CLEAR(obj);
            total++;
            n += 1;
            if (n == PICKLE_BATCHSIZE)
                break;
            obj = PyIter_Next(iter);
            if (obj == NULL) {
                if (PyErr_Occurred())
                    goto error;
                break;
            }
        }
        if (output_write(p, &appends_op, 1) < 0)
            goto error;
    } while (n == PICKLE_BATCHSIZE);
    return 0;
error:
    Py_XDECREF(firstitem);
    Py_XDECREF(obj);
    return -1;
}

/* An exact list, protocol >= 1: index it directly, re-reading the size at
 * every step so a list that shrinks while pickled is never read past. */
static int batch_list_exact(pickler *p, PyObject *obj)
{
    Py_ssize_t this_batch, total;
    const char mark_op = OP_MARK, append_op = OP_APPEND, appends_op = OP_APPENDS;

    if (PyList_GET_SIZE(obj) == 1) {
        PyObject *item = PyList_GET_ITEM(obj, 0);
        Py_INCREF(item);
        int err = save(p, item, 0);
        Py_DECREF(item);
        if (err < 0) {
            error_note_index(p, obj, 0);
            return -1;
        }
        return output_write(p, &append_op, 1);
    }
    total = 0;
    do {
        this_batch = 0;
        if (output_write(p, &mark_op, 1) < 0)
            return -1;
        while (total < Py_SIZE(obj)) {
            PyObject *item = ((PyListObject *)obj)->ob_item[total];
            Py_INCREF(item);
            int err = save_item(p, item);
            Py_DECREF(item);
            if (err < 0) {
                error_note_index(p, obj, total);
                return -1;
            }
            total++;
            if (++this_batch == PICKLE_BATCHSIZE)
                break;
        }
        if (output_write(p, &appends_op, 1) < 0)
            return -1;
    } while (total < Py_SIZE(obj));
    return 0;
}

static int save_list(pickler *p, PyObject *obj, memo_entry *slot)
{
    Py_ssize_t len;
    int status = 0;

    if (p->fast && !fast_save_enter(p, obj))
        goto error;
    if (p->bin) {
        const char op = OP_EMPTY_LIST;
        if (output_write(p, &op, 1) < 0)
            goto error;
    }
    else if (output_write(p, "(l", 2) < 0) {
        goto error;
    }
    len = PyList_GET_SIZE(obj);
    if (memo_put_at(p, obj, slot) < 0)
        goto error;
    if (len != 0) {
        if (PyList_CheckExact(obj) && p->proto > 0) {
            if (enter_recursive(p))
                goto error;
            status = batch_list_exact(p, obj);
            leave_recursive(p);
        }
        else {
            PyObject *iter = PyObject_GetIter(obj);
            if (iter == NULL)
                goto error;
            if (enter_recursive(p)) {
                Py_DECREF(iter);
                goto error;
            }
            status = batch_list(p, iter, obj);
            leave_recursive(p);
            Py_DECREF(iter);
        }
    }
    if (0) {
    error:
        status = -1;
    }
    if (p->fast && !fast_save_leave(p, obj))
        status = -1;
    return status;
}

static int check_pair(PyObject *item)
{
    if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "dict items iterator must return 2-tuples");
        return -1;
    }
    return 0;
}

static int save_pair(pickler *p, PyObject *pair, PyObject *origobj)
{
    if (save(p, PyTuple_GET_ITEM(pair, 0), 0) < 0)
        return -1;
    if (save(p, PyTuple_GET_ITEM(pair, 1), 0) < 0) {
        error_note_key(p, origobj, PyTuple_GET_ITEM(pair, 0));
        return -1;
    }
    return 0;
}

/* (key, value) pairs from an iterator: MARK k v ... SETITEMS in batches. */
static int batch_dict(pickler *p, PyObject *iter, PyObject *origobj)
{
    PyObject *obj = NULL, *firstitem = NULL;
    int n;
    const char mark_op = OP_MARK, setitem_op = OP_SETITEM, setitems_op = OP_SETITEMS;

    if (p->proto == 0) {
        for (;;) {
            int i;
            obj = PyIter_Next(iter);
            if (obj == NULL)
                return PyErr_Occurred() ? -1 : 0;
            if (check_pair(obj) < 0) {
                Py_DECREF(obj);
                return -1;
            }
            i = save_pair(p, obj, origobj);
            Py_DECREF(obj);
            if (i < 0)
                return -1;
            if (output_write(p, &setitem_op, 1) < 0)
                return -1;
        }
    }
    do {
        firstitem = PyIter_Next(iter);
        if (firstitem == NULL) {
            if (PyErr_Occurred())
                goto error;
            break;
        }
        if (check_pair(firstitem) < 0)
            goto error;
        obj = PyIter_Next(iter);
        if (obj == NULL) {
            if (PyErr_Occurred())
                goto error;
            if (save_pair(p, firstitem, origobj) < 0)
                goto error;
            if (output_write(p, &setitem_op, 1) < 0)
                goto error;
            Py_CLEAR(firstitem);
            break;
        }
        if (output_write(p, &mark_op, 1) < 0)
            goto error;
        if (save_pair(p, firstitem, origobj) < 0)
            goto error;
        Py_CLEAR(firstitem);
        n = 1;
        while (obj) {
            if (check_pair(obj) < 0)
                goto error;
            if (save_pair(p, obj, origobj) < 0)
                goto error;
            Py_CLEAR(obj);
            n += 1;
            if (n == PICKLE_BATCHSIZE)
                break;
            obj = PyIter_Next(iter);
            if (obj == NULL) {
                if (PyErr_Occurred())
                    goto error;
                break;
            }
        }
        if (output_write(p, &setitems_op, 1) < 0)
            goto error;
    } while (n == PICKLE_BATCHSIZE);
    return 0;
error:
    Py_XDECREF(firstitem);
    Py_XDECREF(obj);
    return -1;
}

static int save_key_value(pickler *p, PyObject *dict, PyObject *key, PyObject *value)
{
    int status = -1;
    Py_INCREF(key);
    Py_INCREF(value);
    if (save_item(p, key) < 0)
        goto end;
    if (save_item(p, value) < 0) {
        error_note_key(p, dict, key);
        goto end;
    }
    status = 0;
end:
    Py_DECREF(key);
    Py_DECREF(value);
    return status;
}

/* An exact dict, protocol >= 1.  Note: like _pickle.c, a dict of exactly
 * k*1000 items ends with an empty MARK SETITEMS batch. */
static int batch_dict_exact(pickler *p, PyObject *obj)
{
    PyObject *key = NULL, *value = NULL;
    int i;
    Py_ssize_t dict_size, ppos = 0;
    const char mark_op = OP_MARK, setitem_op = OP_SETITEM, setitems_op = OP_SETITEMS;

    dict_size = PyDict_GET_SIZE(obj);
    if (dict_size == 1) {
        PyDict_Next(obj, &ppos, &key, &value);
        if (save_key_value(p, obj, key, value) < 0)
            return -1;
        return output_write(p, &setitem_op, 1);
    }
    do {
        i = 0;
        if (output_write(p, &mark_op, 1) < 0)
            return -1;
        while (PyDict_Next(obj, &ppos, &key, &value)) {
            if (save_key_value(p, obj, key, value) < 0)
                return -1;
            if (++i == PICKLE_BATCHSIZE)
                break;
        }
        if (output_write(p, &setitems_op, 1) < 0)
            return -1;
        if (PyDict_GET_SIZE(obj) != dict_size) {
            PyErr_Format(PyExc_RuntimeError, "dictionary changed size during iteration");
            return -1;
        }
    } while (i == PICKLE_BATCHSIZE);
    return 0;
}

static int save_dict(pickler *p, PyObject *obj, memo_entry *slot)
{
    int status = 0;

    if (p->fast && !fast_save_enter(p, obj))
        goto error;
    if (p->bin) {
        const char op = OP_EMPTY_DICT;
        if (output_write(p, &op, 1) < 0)
            goto error;
    }
    else if (output_write(p, "(d", 2) < 0) {
        goto error;
    }
    if (memo_put_at(p, obj, slot) < 0)
        goto error;
    if (PyDict_GET_SIZE(obj)) {
        if (PyDict_CheckExact(obj) && p->proto > 0) {
            if (enter_recursive(p))
                goto error;
            status = batch_dict_exact(p, obj);
            leave_recursive(p);
        }
        else {
            PyObject *items = PyObject_CallMethodNoArgs(obj, G.s_items);
            PyObject *iter;
            if (items == NULL)
                goto error;
            iter = PyObject_GetIter(items);
            Py_DECREF(items);
            if (iter == NULL)
                goto error;
            if (enter_recursive(p)) {
                Py_DECREF(iter);
                goto error;
            }
            status = batch_dict(p, iter, obj);
            leave_recursive(p);
            Py_DECREF(iter);
        }
    }
    if (0) {
    error:
        status = -1;
    }
    if (p->fast && !fast_save_leave(p, obj))
        status = -1;
    return status;
}

/* Reduce form used by protocols < 4 for set and frozenset: (type, (list,)). */
static int save_set_as_reduce(pickler *p, PyObject *obj, PyTypeObject *type)
{
    PyObject *items = PySequence_List(obj);
    PyObject *reduce_value;
    int status;
    if (items == NULL)
        return -1;
    reduce_value = Py_BuildValue("(O(O))", (PyObject *)type, items);
    Py_DECREF(items);
    if (reduce_value == NULL)
        return -1;
    status = save_reduce(p, reduce_value, obj);
    Py_DECREF(reduce_value);
    return status;
}

static int save_set(pickler *p, PyObject *obj)
{
    PyObject *item;
    Py_hash_t hash;
    Py_ssize_t set_size, ppos = 0;
    int i;
    const char empty_set_op = (char)OP_EMPTY_SET, mark_op = OP_MARK,
               additems_op = (char)OP_ADDITEMS;

    if (p->proto < 4)
        return save_set_as_reduce(p, obj, &PySet_Type);
    if (output_write(p, &empty_set_op, 1) < 0)
        return -1;
    if (memo_put(p, obj) < 0)
        return -1;
    set_size = PySet_GET_SIZE(obj);
    if (set_size == 0)
        return 0;
    do {
        i = 0;
        if (output_write(p, &mark_op, 1) < 0)
            return -1;
        /* _PySet_NextEntry (exported, like _pickle.c uses it) walks the
         * table in iteration order and tolerates mutation; the size check
         * below reports it the way pickle does. */
        while (_PySet_NextEntry(obj, &ppos, &item, &hash)) {
            Py_INCREF(item);
            int err = save(p, item, 0);
            Py_DECREF(item);
            if (err < 0) {
                error_note_element(p, obj);
                return -1;
            }
            if (++i == PICKLE_BATCHSIZE)
                break;
        }
        if (output_write(p, &additems_op, 1) < 0)
            return -1;
        if (PySet_GET_SIZE(obj) != set_size) {
            PyErr_Format(PyExc_RuntimeError, "set changed size during iteration");
            return -1;
        }
    } while (i == PICKLE_BATCHSIZE);
    return 0;
}

static int save_frozenset(pickler *p, PyObject *obj)
{
    PyObject *iter;
    const char mark_op = OP_MARK, frozenset_op = (char)OP_FROZENSET;

    /* As in _pickle.c, fast mode enters here and never leaves. */
    if (p->fast && !fast_save_enter(p, obj))
        return -1;
    if (p->proto < 4)
        return save_set_as_reduce(p, obj, &PyFrozenSet_Type);
    if (output_write(p, &mark_op, 1) < 0)
        return -1;
    iter = PyObject_GetIter(obj);
    if (iter == NULL)
        return -1;
    for (;;) {
        PyObject *item = PyIter_Next(iter);
        if (item == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(iter);
                return -1;
            }
            break;
        }
        if (save(p, item, 0) < 0) {
            error_note_element(p, obj);
            Py_DECREF(item);
            Py_DECREF(iter);
            return -1;
        }
        Py_DECREF(item);
    }
    Py_DECREF(iter);
    if (memo_lookup(&p->memo, obj)) {
        const char pop_mark_op = OP_POP_MARK;
        if (output_write(p, &pop_mark_op, 1) < 0)
            return -1;
        return memo_get(p, obj);
    }
    if (output_write(p, &frozenset_op, 1) < 0)
        return -1;
    return memo_put(p, obj);
}

/* ---- globals --------------------------------------------------------- */

/* getattr(obj, name) with AttributeError meaning "absent" (*out = NULL):
 * 1 found, 0 absent, -1 error.  3.11's _PyObject_LookupAttr (what _pickle.c
 * uses) does not create and clear the AttributeError when the type's
 * getattr is the generic one (e.g. reducer_override on every dump). */
static int lookup_attr(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13's public name for it.  Not PyObject_GetAttr + clear: since 3.10
     * that records name and obj on the AttributeError a user __getattr__
     * raises, an object the graph may hold (3.12 pickles them). */
    return PyObject_GetOptionalAttr(obj, name, out);
#elif PY_VERSION_HEX >= 0x030B0000
    return _PyObject_LookupAttr(obj, name, out);
#else
    *out = PyObject_GetAttr(obj, name);
    if (*out != NULL)
        return 1;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
#endif
}

static PyObject *get_dotted_path(PyObject *name)
{
    PyObject *dotted_path = PyUnicode_Split(name, G.s_dot, -1);
    if (dotted_path == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(dotted_path);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *subpath = PyList_GET_ITEM(dotted_path, i);
        if (PyUnicode_Compare(subpath, G.s_locals) == 0) {
#if PY_VERSION_HEX >= 0x030D0000
            PyErr_Format(PyExc_AttributeError, "Can't get local object %R", name);
#else
            PyErr_Format(PyExc_AttributeError, "Can't pickle local object %R", name);
#endif
            Py_DECREF(dotted_path);
            return NULL;
        }
    }
    return dotted_path;
}

/* Walk obj.a.b.c; NULL without an exception when an attribute is missing.
 * *pparent (optional) receives a new reference to the last parent. */
static PyObject *get_deep_attribute(PyObject *obj, PyObject *names, PyObject **pparent)
{
    PyObject *parent = NULL;
    Py_ssize_t n = PyList_GET_SIZE(names);
    Py_INCREF(obj);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyList_GET_ITEM(names, i);
        Py_XDECREF(parent);
        parent = obj;
        if (lookup_attr(parent, name, &obj) <= 0) {
            Py_DECREF(parent);
            return NULL;
        }
    }
    if (pparent != NULL)
        *pparent = parent;
    else
        Py_XDECREF(parent);
    return obj;
}

static PyObject *whichmodule(PyObject *global, PyObject *dotted_path)
{
    PyObject *module_name, *modules, *items;
    int r = lookup_attr(global, G.s_module, &module_name);
    if (r < 0)
        return NULL;
    if (module_name != NULL) {
        if (module_name != Py_None)
            return module_name;
        Py_CLEAR(module_name);
    }
    modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "unable to get sys.modules");
        return NULL;
    }
    /* A snapshot of the items: a lookup may import and grow sys.modules. */
    items = PyDict_Check(modules) ? PyDict_Items(modules) : PyMapping_Items(modules);
    if (items == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        PyObject *name = PyTuple_GET_ITEM(pair, 0);
        PyObject *module = PyTuple_GET_ITEM(pair, 1);
        PyObject *candidate;
        if (PyUnicode_Check(name) && PyUnicode_Compare(name, G.s_main) == 0)
            continue;
        if (module == Py_None)
            continue;
        candidate = get_deep_attribute(module, dotted_path, NULL);
        if (candidate == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(items);
                return NULL;
            }
            continue;
        }
        Py_DECREF(candidate);
        if (candidate == global) {
            Py_INCREF(name);
            Py_DECREF(items);
            return name;
        }
    }
    Py_DECREF(items);
    Py_INCREF(G.s_main);
    return G.s_main;
}

static int fix_imports(PyObject **module_name, PyObject **global_name)
{
    PyObject *key = PyTuple_Pack(2, *module_name, *global_name);
    PyObject *item;
    if (key == NULL)
        return -1;
    item = PyDict_GetItemWithError(G.name_mapping_3to2, key);
    Py_DECREF(key);
    if (item) {
        PyObject *fixed_module_name, *fixed_global_name;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_RuntimeError,
                         "_compat_pickle.REVERSE_NAME_MAPPING values "
                         "should be 2-tuples, not %.200s",
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        fixed_module_name = PyTuple_GET_ITEM(item, 0);
        fixed_global_name = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_Check(fixed_module_name) || !PyUnicode_Check(fixed_global_name)) {
            PyErr_Format(PyExc_RuntimeError,
                         "_compat_pickle.REVERSE_NAME_MAPPING values "
                         "should be pairs of str, not (%.200s, %.200s)",
                         Py_TYPE(fixed_module_name)->tp_name,
                         Py_TYPE(fixed_global_name)->tp_name);
            return -1;
        }
        Py_INCREF(fixed_module_name);
        Py_INCREF(fixed_global_name);
        Py_SETREF(*module_name, fixed_module_name);
        Py_SETREF(*global_name, fixed_global_name);
        return 0;
    }
    if (PyErr_Occurred())
        return -1;
    item = PyDict_GetItemWithError(G.import_mapping_3to2, *module_name);
    if (item) {
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_RuntimeError,
                         "_compat_pickle.REVERSE_IMPORT_MAPPING values "
                         "should be strings, not %.200s",
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        Py_INCREF(item);
        Py_SETREF(*module_name, item);
    }
    else if (PyErr_Occurred()) {
        return -1;
    }
    return 0;
}

static int write_identifier(pickler *p, PyObject *name, const char *what)
{
    PyObject *encoded = p->proto == 3 ? PyUnicode_AsUTF8String(name)
                                      : PyUnicode_AsASCIIString(name);
    int status;
    if (encoded == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            PyErr_Format(G.PicklingError, "can't pickle %s identifier '%S' using "
                                          "pickle protocol %i",
                         what, name, p->proto);
        return -1;
    }
    status = output_write(p, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
    Py_DECREF(encoded);
    if (status < 0)
        return -1;
    return output_write(p, "\n", 1);
}

static int save_ext(pickler *p, PyObject *obj, PyObject *code_obj)
{
    char pdata[5];
    Py_ssize_t n;
    long code;

#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13: a code that is not an int raises what int conversion raises
     * (TypeError), one out of range RuntimeError, without the object. */
    code = PyLong_AsLong(code_obj);
    if (code == -1 && PyErr_Occurred())
        return -1;
    if (code <= 0 || code > 0x7fffffffL) {
        PyErr_Format(PyExc_RuntimeError, "extension code %ld is out of range", code);
        return -1;
    }
#else
    if (!PyLong_Check(code_obj)) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: extension code %R isn't an integer",
                     obj, code_obj);
        return -1;
    }
    code = PyLong_AsLong(code_obj);
    if (code <= 0 || code > 0x7fffffffL) {
        if (!PyErr_Occurred())
            PyErr_Format(G.PicklingError, "Can't pickle %R: extension code %ld is out of range",
                         obj, code);
        return -1;
    }
#endif
    if (code <= 0xff) {
        pdata[0] = (char)OP_EXT1;
        pdata[1] = (char)code;
        n = 2;
    }
    else if (code <= 0xffff) {
        pdata[0] = (char)OP_EXT2;
        pdata[1] = (char)(code & 0xff);
        pdata[2] = (char)((code >> 8) & 0xff);
        n = 3;
    }
    else {
        pdata[0] = (char)OP_EXT4;
        for (int i = 0; i < 4; i++)
            pdata[1 + i] = (char)((code >> (8 * i)) & 0xff);
        n = 5;
    }
    if (p->trace == NULL)
        return output_write(p, pdata, n);
    trace_open(p, SERTRACE_TAG_EXT, obj, NULL);
    if (output_write(p, pdata, n) < 0)
        return -1;
    trace_close(p);
    return 0;
}

#if PY_VERSION_HEX >= 0x030D0000
/* CPython 3.13, protocols 0-3, a global whose qualified name is dotted
 * (module.A.B.C): the reference pickler writes getattr(getattr(A, 'B'), 'C')
 * where `getattr` is saved as any object (memoized), A is a GLOBAL opcode
 * written afresh (neither memoized nor looked up in the memo, so a class
 * reachable from itself, Recursive.ref, does not recurse), each name is
 * saved as any str, and neither the argument tuples nor the intermediate
 * results are memoized (the caller memoizes the final object).  Learned
 * from the bytes 3.13's pickle writes (tests/cpython, test_pickle's
 * test_recursive_nested_names2; tests/pickle's differential corpus). */
static int save_nested_name(pickler *p, PyObject *module_name, PyObject *dotted_path,
                            Py_ssize_t depth)
{
    if (depth == 1) {
        PyObject *mod = module_name, *first = PyList_GET_ITEM(dotted_path, 0);
        const char op = OP_GLOBAL;
        int status = -1;
        Py_INCREF(mod);
        Py_INCREF(first);
        if (output_write(p, &op, 1) == 0 &&
            (p->proto >= 3 || !p->fix_imports || fix_imports(&mod, &first) == 0) &&
            write_identifier(p, mod, "module") == 0 && write_identifier(p, first, "global") == 0)
            status = 0;
        Py_DECREF(mod);
        Py_DECREF(first);
        return status;
    }
    const char mark = OP_MARK;
    const char tail[2] = {p->proto >= 2 ? (char)OP_TUPLE2 : (char)OP_TUPLE, (char)OP_REDUCE};
    if (save(p, G.getattr, 0) < 0)
        return -1;
    if (p->proto < 2 && output_write(p, &mark, 1) < 0)
        return -1;
    if (save_nested_name(p, module_name, dotted_path, depth - 1) < 0)
        return -1;
    if (save(p, PyList_GET_ITEM(dotted_path, depth - 1), 0) < 0)
        return -1;
    return output_write(p, tail, 2);
}
#endif

int save_global(pickler *p, PyObject *obj, PyObject *name)
{
    PyObject *global_name = NULL, *module_name = NULL, *module = NULL;
    PyObject *dotted_path = NULL, *lastname = NULL, *parent = NULL, *cls = NULL;
    int status = 0;

    if (name) {
        Py_INCREF(name);
        global_name = name;
    }
    else {
        if (lookup_attr(obj, G.s_qualname, &global_name) < 0)
            goto error;
        if (global_name == NULL) {
            global_name = PyObject_GetAttr(obj, G.s_name);
            if (global_name == NULL)
                goto error;
        }
    }
    dotted_path = get_dotted_path(global_name);
    if (dotted_path == NULL)
        goto error;
    module_name = whichmodule(obj, dotted_path);
    if (module_name == NULL)
        goto error;
    module = PyImport_Import(module_name);
    if (module == NULL) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: import of module %R failed", obj,
                     module_name);
        goto error;
    }
    lastname = PyList_GET_ITEM(dotted_path, PyList_GET_SIZE(dotted_path) - 1);
    Py_INCREF(lastname);
    cls = get_deep_attribute(module, dotted_path, &parent);
    if (cls == NULL) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: attribute lookup %S on %S failed", obj,
                     global_name, module_name);
        goto error;
    }
    if (cls != obj) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: it's not the same object as %S.%S", obj,
                     module_name, global_name);
        goto error;
    }

    if (p->proto >= 2) {
        PyObject *extension_key = PyTuple_Pack(2, module_name, global_name);
        PyObject *code_obj;
        if (extension_key == NULL)
            goto error;
        code_obj = PyDict_GetItemWithError(G.extension_registry, extension_key);
        Py_DECREF(extension_key);
        if (code_obj != NULL) {
            Py_INCREF(code_obj);
            status = save_ext(p, obj, code_obj);
            Py_DECREF(code_obj);
            if (status < 0)
                goto error;
            goto done; /* EXT codes are not memoized */
        }
        if (PyErr_Occurred())
            goto error;
    }
    if (parent == module) {
        Py_INCREF(lastname);
        Py_SETREF(global_name, lastname);
    }
    if (p->proto >= 4) {
        const char op = (char)OP_STACK_GLOBAL;
        if (save(p, module_name, 0) < 0 || save(p, global_name, 0) < 0 ||
            output_write(p, &op, 1) < 0)
            goto error;
    }
#if PY_VERSION_HEX >= 0x030D0000
    else if (parent != module) {
        if (save_nested_name(p, module_name, dotted_path, PyList_GET_SIZE(dotted_path)) < 0)
            goto error;
    }
#else
    else if (parent != module) {
        PyObject *reduce_value = Py_BuildValue("(O(OO))", G.getattr, parent, lastname);
        if (reduce_value == NULL)
            goto error;
        status = save_reduce(p, reduce_value, NULL);
        Py_DECREF(reduce_value);
        if (status < 0)
            goto error;
    }
#endif
    else {
        const char op = OP_GLOBAL;
        if (output_write(p, &op, 1) < 0)
            goto error;
        if (p->proto < 3 && p->fix_imports) {
            if (fix_imports(&module_name, &global_name) < 0)
                goto error;
        }
        if (write_identifier(p, module_name, "module") < 0 ||
            write_identifier(p, global_name, "global") < 0)
            goto error;
    }
    if (memo_put(p, obj) < 0)
        goto error;
    goto done;
error:
    status = -1;
done:
    Py_XDECREF(module_name);
    Py_XDECREF(global_name);
    Py_XDECREF(module);
    Py_XDECREF(dotted_path);
    Py_XDECREF(lastname);
    Py_XDECREF(parent);
    Py_XDECREF(cls);
    return status;
}

static int save_singleton_type(pickler *p, PyObject *obj, PyObject *singleton)
{
    PyObject *reduce_value = Py_BuildValue("O(O)", (PyObject *)&PyType_Type, singleton);
    int status;
    if (reduce_value == NULL)
        return -1;
    status = save_reduce(p, reduce_value, obj);
    Py_DECREF(reduce_value);
    return status;
}

static int save_type(pickler *p, PyObject *obj)
{
    if (obj == (PyObject *)Py_TYPE(Py_None))
        return save_singleton_type(p, obj, Py_None);
    if (obj == (PyObject *)Py_TYPE(Py_Ellipsis))
        return save_singleton_type(p, obj, Py_Ellipsis);
    if (obj == (PyObject *)Py_TYPE(Py_NotImplemented))
        return save_singleton_type(p, obj, Py_NotImplemented);
    return save_global(p, obj, NULL);
}

/* ---- persistent ids ------------------------------------------------- */

/* -1 error, 0 nothing saved, 1 a persistent id was saved. */
int save_pers(pickler *p, PyObject *obj)
{
    PyObject *pid;
    int status = 0;

    if (p->pers_func_self != NULL)
        pid = PyObject_CallFunctionObjArgs(p->pers_func, p->pers_func_self, obj, NULL);
    else
        pid = PyObject_CallOneArg(p->pers_func, obj);
    if (pid == NULL)
        return -1;
    if (pid == Py_None)
        goto end;
    if (p->trace != NULL)
        trace_open(p, SERTRACE_TAG_PERSID, obj, NULL);
    if (p->bin) {
        const char op = OP_BINPERSID;
        if (save(p, pid, 1) < 0 || output_write(p, &op, 1) < 0)
            goto error;
    }
    else {
        const char op = OP_PERSID;
        PyObject *pid_str = PyObject_Str(pid);
        if (pid_str == NULL)
            goto error;
        if (!PyUnicode_IS_ASCII(pid_str)) {
            PyErr_SetString(G.PicklingError,
                            "persistent IDs in protocol 0 must be ASCII strings");
            Py_DECREF(pid_str);
            goto error;
        }
        if (output_write(p, &op, 1) < 0 ||
            output_write(p, PyUnicode_DATA(pid_str), PyUnicode_GET_LENGTH(pid_str)) < 0 ||
            output_write(p, "\n", 1) < 0) {
            Py_DECREF(pid_str);
            goto error;
        }
        Py_DECREF(pid_str);
    }
    if (p->trace != NULL)
        trace_close(p);
    status = 1;
    goto end;
error:
    status = -1;
end:
    Py_DECREF(pid);
    return status;
}

/* ---- reduce ---------------------------------------------------------- */

static int save_reduce_state(pickler *p, PyObject *obj, PyObject *state, PyObject *state_setter)
{
    const char build_op = OP_BUILD;
    if (state_setter == NULL) {
        if (save(p, state, 0) < 0) {
            error_note_reduce(p, obj, "state", PATH_STATE);
            return -1;
        }
        return output_write(p, &build_op, 1);
    }
    /* state_setter(obj, state) through REDUCE, then POP: stack-neutral. */
    const char ops[3] = {(char)OP_TUPLE2, OP_REDUCE, OP_POP};
    if (save(p, state_setter, 0) < 0) {
        error_note_reduce(p, obj, "state setter", PATH_CALLABLE);
        return -1;
    }
    if (save(p, obj, 0) < 0)
        return -1;
    if (save(p, state, 0) < 0) {
        error_note_reduce(p, obj, "state", PATH_STATE);
        return -1;
    }
    return output_write(p, ops, 3);
}

static int save_newobj_ex(pickler *p, PyObject *obj, PyObject *argtup)
{
    PyObject *cls, *args, *kwargs;

    if (PyTuple_GET_SIZE(argtup) != 3) {
        PyErr_Format(G.PicklingError,
                     "length of the NEWOBJ_EX argument tuple must be exactly 3, not %zd",
                     PyTuple_GET_SIZE(argtup));
        return -1;
    }
    cls = PyTuple_GET_ITEM(argtup, 0);
    if (!PyType_Check(cls)) {
        PyErr_Format(G.PicklingError,
                     "first item from NEWOBJ_EX argument tuple must be a class, not %.200s",
                     Py_TYPE(cls)->tp_name);
        return -1;
    }
    args = PyTuple_GET_ITEM(argtup, 1);
    if (!PyTuple_Check(args)) {
        PyErr_Format(G.PicklingError,
                     "second item from NEWOBJ_EX argument tuple must be a tuple, not %.200s",
                     Py_TYPE(args)->tp_name);
        return -1;
    }
    kwargs = PyTuple_GET_ITEM(argtup, 2);
    if (!PyDict_Check(kwargs)) {
        PyErr_Format(G.PicklingError,
                     "third item from NEWOBJ_EX argument tuple must be a dict, not %.200s",
                     Py_TYPE(kwargs)->tp_name);
        return -1;
    }
    if (p->proto >= 4) {
        const char op = (char)OP_NEWOBJ_EX;
        if (save(p, cls, 0) < 0) {
            error_note_reduce(p, obj, "class", PATH_CALLABLE);
            return -1;
        }
        if (save(p, args, 0) < 0 || save(p, kwargs, 0) < 0) {
            error_note_reduce(p, obj, "__new__ arguments", PATH_ARGS);
            return -1;
        }
        return output_write(p, &op, 1);
    }
    /* Protocols 2-3: functools.partial(cls.__new__, cls, *args, **kwargs)(). */
    PyObject *newargs = PyTuple_New(PyTuple_GET_SIZE(args) + 2);
    PyObject *cls_new, *callable, *empty;
    const char reduce_op = OP_REDUCE;
    if (newargs == NULL)
        return -1;
    cls_new = PyObject_GetAttr(cls, G.s_new);
    if (cls_new == NULL) {
        Py_DECREF(newargs);
        return -1;
    }
    PyTuple_SET_ITEM(newargs, 0, cls_new);
    Py_INCREF(cls);
    PyTuple_SET_ITEM(newargs, 1, cls);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *item = PyTuple_GET_ITEM(args, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(newargs, i + 2, item);
    }
    callable = PyObject_Call(G.partial, newargs, kwargs);
    Py_DECREF(newargs);
    if (callable == NULL)
        return -1;
    empty = PyTuple_New(0);
    if (empty == NULL) {
        Py_DECREF(callable);
        return -1;
    }
    int status = 0;
    if (save(p, callable, 0) < 0 || save(p, empty, 0) < 0) {
        error_note_reduce(p, obj, "reconstructor", PATH_CALLABLE);
        status = -1;
    }
    Py_DECREF(empty);
    Py_DECREF(callable);
    if (status < 0)
        return -1;
    return output_write(p, &reduce_op, 1);
}

/* obj.__class__, new reference.  When the type's getattr is the generic
 * one and `__class__` resolves to object's own descriptor (a data
 * descriptor: it wins over the instance dict), that is type(obj): taken
 * without the attribute lookup.  Anything else (a __class__ property, a
 * __getattr__ or __getattribute__ hook, a proxy) goes through getattr. */
static PyObject *get_class(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type->tp_getattro == PyObject_GenericGetAttr && G.class_descr != NULL &&
        _PyType_Lookup(type, G.s_class) == G.class_descr) {
        Py_INCREF(type);
        return (PyObject *)type;
    }
    return PyObject_GetAttr(obj, G.s_class);
}

static int save_newobj(pickler *p, PyObject *obj, PyObject *argtup)
{
    PyObject *cls, *newargtup;
    const char op = (char)OP_NEWOBJ;
    int r;

    if (PyTuple_GET_SIZE(argtup) < 1) {
        PyErr_SetString(G.PicklingError, "__newobj__ arglist is empty");
        return -1;
    }
    cls = PyTuple_GET_ITEM(argtup, 0);
    if (!PyType_Check(cls)) {
        PyErr_SetString(G.PicklingError, "args[0] from __newobj__ args is not a type");
        return -1;
    }
    if (obj != NULL) {
        PyObject *obj_class = get_class(obj);
        if (obj_class == NULL)
            return -1;
        r = obj_class != cls;
        Py_DECREF(obj_class);
        if (r) {
            PyErr_SetString(G.PicklingError, "args[0] from __newobj__ args has the wrong class");
            return -1;
        }
    }
    if (save(p, cls, 0) < 0) {
        error_note_reduce(p, obj, "class", PATH_CALLABLE);
        return -1;
    }
    newargtup = PyTuple_GetSlice(argtup, 1, PyTuple_GET_SIZE(argtup));
    if (newargtup == NULL)
        return -1;
    r = save(p, newargtup, 0);
    Py_DECREF(newargtup);
    if (r < 0) {
        error_note_reduce(p, obj, "__new__ arguments", PATH_ARGS);
        return -1;
    }
    return output_write(p, &op, 1);
}

/* Save a reduce tuple (callable, args[, state[, listitems[, dictitems[,
 * state_setter]]]]) for `obj` (NULL: not memoized). */
static int save_reduce(pickler *p, PyObject *args, PyObject *obj)
{
    PyObject *callable, *argtup, *state = NULL, *listitems = Py_None, *dictitems = Py_None,
                                 *state_setter = Py_None;
    int use_newobj = 0, use_newobj_ex = 0;
    Py_ssize_t size = PyTuple_Size(args);

    if (size < 2 || size > 6) {
        PyErr_SetString(G.PicklingError,
                        "tuple returned by __reduce__ must contain 2 through 6 elements");
        return -1;
    }
    if (!PyArg_UnpackTuple(args, "save_reduce", 2, 6, &callable, &argtup, &state, &listitems,
                           &dictitems, &state_setter))
        return -1;
    if (!PyCallable_Check(callable)) {
        PyErr_SetString(G.PicklingError,
                        "first item of the tuple returned by __reduce__ must be callable");
        return -1;
    }
    if (!PyTuple_Check(argtup)) {
        PyErr_SetString(G.PicklingError,
                        "second item of the tuple returned by __reduce__ must be a tuple");
        return -1;
    }
    if (state == Py_None)
        state = NULL;
    if (listitems == Py_None) {
        listitems = NULL;
    }
    else if (!PyIter_Check(listitems)) {
        PyErr_Format(G.PicklingError,
                     "fourth element of the tuple returned by __reduce__ must be an iterator, "
                     "not %s",
                     Py_TYPE(listitems)->tp_name);
        return -1;
    }
    if (dictitems == Py_None) {
        dictitems = NULL;
    }
    else if (!PyIter_Check(dictitems)) {
        PyErr_Format(G.PicklingError,
                     "fifth element of the tuple returned by __reduce__ must be an iterator, "
                     "not %s",
                     Py_TYPE(dictitems)->tp_name);
        return -1;
    }
    if (state_setter == Py_None) {
        state_setter = NULL;
    }
    else if (!PyCallable_Check(state_setter)) {
        PyErr_Format(G.PicklingError,
                     "sixth element of the tuple returned by __reduce__ must be a function, "
                     "not %s",
                     Py_TYPE(state_setter)->tp_name);
        return -1;
    }

    if (p->proto >= 2) {
        PyObject *name;
        if (Py_TYPE(callable) == &PyFunction_Type) {
            /* What getattr(f, '__name__') returns for an exact function
             * (a data descriptor of a static type reading func_name), read
             * without the attribute lookup (copyreg.__newobj__ for every
             * instance). */
            name = ((PyFunctionObject *)callable)->func_name;
            Py_INCREF(name);
        }
        else if (lookup_attr(callable, G.s_name, &name) < 0) {
            return -1;
        }
        if (name != NULL && PyUnicode_Check(name)) {
            use_newobj_ex = name == G.s_newobj_ex || PyUnicode_Compare(name, G.s_newobj_ex) == 0;
            if (!use_newobj_ex)
                use_newobj = name == G.s_newobj || PyUnicode_Compare(name, G.s_newobj) == 0;
        }
        Py_XDECREF(name);
        if (PyErr_Occurred())
            return -1;
    }

    if (use_newobj_ex) {
        if (save_newobj_ex(p, obj, argtup) < 0)
            return -1;
    }
    else if (use_newobj) {
        if (save_newobj(p, obj, argtup) < 0)
            return -1;
    }
    else {
        const char op = OP_REDUCE;
        if (save(p, callable, 0) < 0) {
            error_note_reduce(p, obj, "reconstructor", PATH_CALLABLE);
            return -1;
        }
        if (save(p, argtup, 0) < 0) {
            error_note_reduce(p, obj, "reconstructor arguments", PATH_ARGS);
            return -1;
        }
        if (output_write(p, &op, 1) < 0)
            return -1;
    }

    if (obj != NULL) {
        if (memo_lookup(&p->memo, obj)) {
            /* Recursive: drop what was built, fetch it from the memo. */
            const char pop_op = OP_POP;
            if (output_write(p, &pop_op, 1) < 0)
                return -1;
            return memo_get(p, obj);
        }
        if (memo_put(p, obj) < 0)
            return -1;
    }
    /* listitems / dictitems have no container object of their own: when
     * tracing, they get an ITEMS node so their bytes are not folded into
     * the object's self bytes. */
    if (listitems) {
        if (p->trace != NULL && obj != NULL)
            trace_open(p, SERTRACE_TAG_ITEMS, obj, NULL);
        if (batch_list(p, listitems, obj) < 0)
            return -1;
        if (p->trace != NULL && obj != NULL)
            trace_close(p);
    }
    if (dictitems) {
        if (p->trace != NULL && obj != NULL)
            trace_open(p, SERTRACE_TAG_ITEMS, obj, NULL);
        if (batch_dict(p, dictitems, obj) < 0)
            return -1;
        if (p->trace != NULL && obj != NULL)
            trace_close(p);
    }
    if (state && save_reduce_state(p, obj, state, state_setter) < 0)
        return -1;
    return 0;
}

/* ---- dispatch -------------------------------------------------------- */

/* Everything but the unmemoized atoms: the memo, then by exact type. */
static int save_memoizable(pickler *p, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject *reduce_func = NULL, *reduce_value = NULL;
    int status = 0;

    /* The slot is handed to the save functions that memoize obj before
     * anything else can change the memo (str, list, dict). */
    memo_entry *slot = memo_slot_(&p->memo, obj);
    if (slot->key != NULL)
        return memo_write_get(p, &slot->value);

    if (type == &PyBytes_Type)
        return save_bytes(p, obj);
    if (type == &PyUnicode_Type)
        return save_unicode(p, obj, slot);

    if (enter_recursive(p))
        return -1;

    if (type == &PyDict_Type) {
        status = save_dict(p, obj, slot);
        goto done;
    }
    if (type == &PySet_Type) {
        status = save_set(p, obj);
        goto done;
    }
    if (type == &PyFrozenSet_Type) {
        status = save_frozenset(p, obj);
        goto done;
    }
    if (type == &PyList_Type) {
        status = save_list(p, obj, slot);
        goto done;
    }
    if (type == &PyTuple_Type) {
        status = save_tuple(p, obj);
        goto done;
    }
    if (type == &PyByteArray_Type) {
        status = save_bytearray(p, obj);
        goto done;
    }
    if (type == &PyPickleBuffer_Type) {
        status = save_picklebuffer(p, obj);
        goto done;
    }

    if (p->reducer_override != NULL) {
        reduce_value = PyObject_CallOneArg(p->reducer_override, obj);
        if (reduce_value == NULL)
            goto error;
        if (reduce_value != Py_NotImplemented)
            goto reduce;
        Py_CLEAR(reduce_value);
    }

    if (type == &PyType_Type) {
        status = save_type(p, obj);
        goto done;
    }
    if (type == &PyFunction_Type) {
        status = save_global(p, obj, NULL);
        goto done;
    }

    /* The reduce callable: pickler.dispatch_table, copyreg.dispatch_table,
     * __reduce_ex__(proto), __reduce__(). */
    if (p->dispatch_table == NULL) {
        reduce_func = PyDict_GetItemWithError(G.dispatch_table, (PyObject *)type);
        if (reduce_func == NULL) {
            if (PyErr_Occurred())
                goto error;
        }
        else {
            Py_INCREF(reduce_func);
        }
    }
    else {
        reduce_func = PyObject_GetItem(p->dispatch_table, (PyObject *)type);
        if (reduce_func == NULL) {
            if (PyErr_ExceptionMatches(PyExc_KeyError))
                PyErr_Clear();
            else
                goto error;
        }
    }
    if (reduce_func != NULL) {
        reduce_value = PyObject_CallOneArg(reduce_func, obj);
    }
    else if (PyType_IsSubtype(type, &PyType_Type)) {
        status = save_global(p, obj, NULL);
        goto done;
    }
    else {
        int r = lookup_attr(obj, G.s_reduce_ex, &reduce_func);
        if (r < 0)
            goto error;
        if (reduce_func != NULL) {
            PyObject *proto = PyLong_FromLong(p->proto);
            if (proto != NULL) {
                reduce_value = PyObject_CallOneArg(reduce_func, proto);
                Py_DECREF(proto);
            }
        }
        else {
            if (lookup_attr(obj, G.s_reduce, &reduce_func) < 0)
                goto error;
            if (reduce_func != NULL) {
                reduce_value = PyObject_CallNoArgs(reduce_func);
            }
            else {
                PyErr_Format(G.PicklingError, "can't pickle '%.200s' object: %R", type->tp_name,
                             obj);
                goto error;
            }
        }
    }
    if (reduce_value == NULL)
        goto error;

reduce:
    if (PyUnicode_Check(reduce_value)) {
        status = save_global(p, obj, reduce_value);
        goto done;
    }
    if (!PyTuple_Check(reduce_value)) {
        PyErr_SetString(G.PicklingError, "__reduce__ must return a string or tuple");
        error_note_object(p, obj);
        goto error;
    }
    status = save_reduce(p, reduce_value, obj);
    if (status < 0)
        error_note_object(p, obj);
    goto done;

error:
    status = -1;
done:
    leave_recursive(p);
    Py_XDECREF(reduce_func);
    Py_XDECREF(reduce_value);
    return status;
}

/* Atoms (None, bool, int, float: never memoized, so the memo is not
 * consulted) inline, the rest in save_memoizable().  Inline in the item
 * loops of lists, tuples and dicts (save_item), so that an atom costs no
 * call and no stack frame of the general dispatch. */
static inline __attribute__((always_inline)) int save_plain(pickler *p, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyLong_Type)
        return save_long(p, obj);
    if (obj == Py_None)
        return save_none(p);
    if (type == &PyFloat_Type)
        return save_float(p, obj);
    if (type == &PyBool_Type)
        return save_bool(p, obj);
    return save_memoizable(p, obj);
}

int save_dispatch(pickler *p, PyObject *obj)
{
    return save_plain(p, obj);
}

/* A plain atom of a traced dump: written as in a dormant dump, without a
 * call into trace.c and its classification (build_state(16) under an LTTng
 * session, callgrind: 2.293 M -> 2.279 M instructions per dump; dormant
 * 1.708 M). */
static int save_traced_atom(pickler *p, PyObject *obj)
{
    if (output_opcode_boundary(p) < 0)
        return -1;
    if (save_dispatch(p, obj) < 0) {
        trace_atom_failed(p, obj);
        return -1;
    }
    return 0;
}

int save(pickler *p, PyObject *obj, int pers_save)
{
    if (p->trace != NULL)
        return trace_plain_atom(p, obj) ? save_traced_atom(p, obj)
                                        : save_traced(p, obj, pers_save);
    if (output_opcode_boundary(p) < 0)
        return -1;
    if (!pers_save && p->pers_func != NULL) {
        int status = save_pers(p, obj);
        if (status != 0)
            return status < 0 ? -1 : 0;
    }
    return save_plain(p, obj);
}

/* ---- configuration and the dump ---------------------------------------- */

int pickler_set_protocol(pickler *p, PyObject *protocol, int fix_imports)
{
    long proto;
    if (protocol == NULL || protocol == Py_None) {
        proto = PICKLE_DEFAULT_PROTOCOL;
    }
    else {
        proto = PyLong_AsLong(protocol);
        if (proto < 0) {
            if (proto == -1 && PyErr_Occurred())
                return -1;
            proto = PICKLE_HIGHEST_PROTOCOL;
        }
        else if (proto > PICKLE_HIGHEST_PROTOCOL) {
            PyErr_Format(PyExc_ValueError, "pickle protocol must be <= %d",
                         PICKLE_HIGHEST_PROTOCOL);
            return -1;
        }
    }
    p->proto = (int)proto;
    p->bin = proto > 0;
    p->fix_imports = fix_imports && proto < 3;
    return 0;
}

int pickler_set_buffer_callback(pickler *p, PyObject *buffer_callback)
{
    if (buffer_callback == Py_None)
        buffer_callback = NULL;
    if (buffer_callback != NULL && p->proto < 5) {
        PyErr_SetString(PyExc_ValueError, "buffer_callback needs protocol >= 5");
        return -1;
    }
    Py_XINCREF(buffer_callback);
    Py_XSETREF(p->buffer_callback, buffer_callback);
    return 0;
}

int pickler_set_output(pickler *p, PyObject *file)
{
    PyObject *write;
    if (lookup_attr(file, G.s_write, &write) < 0)
        return -1;
    if (write == NULL) {
        PyErr_SetString(PyExc_TypeError, "file must have a 'write' attribute");
        return -1;
    }
    Py_XSETREF(p->write, write);
    return 0;
}

int pickler_dump(pickler *p, PyObject *obj)
{
    const char stop_op = OP_STOP;
    int status = -1;
    PyObject *tmp;

    p->flushed = 0;
    p->tstate = PyThreadState_Get();
    if (lookup_attr((PyObject *)p, G.s_reducer_override, &tmp) < 0)
        return -1;
    Py_XSETREF(p->reducer_override, tmp);

    p->trace = sertrace_dump_begin("pickle", p->proto);
    if (p->trace != NULL) {
        p->trace_flags = sertrace_dump_flags(p->trace);
        trace_reset_error(p);
    }

    if (p->proto >= 2) {
        char header[2];
        header[0] = (char)OP_PROTO;
        header[1] = (char)p->proto;
        if (output_write(p, header, 2) < 0)
            goto end;
        if (p->proto >= 4) {
            p->framing = 1;
            output_sync(p);
        }
    }
    if (save(p, obj, 0) < 0 || output_write(p, &stop_op, 1) < 0 || output_commit_frame(p) < 0)
        goto end;
    /* The final write to the file belongs to the dump: a write() that
     * raises ends the dump as failed (its bytes still count in the total:
     * they were handed to write()). */
    if (p->write != NULL && output_flush_to_file(p) < 0)
        goto end;
    status = 0;
end:
    p->framing = 0;
    output_sync(p);
    if (p->trace != NULL) {
        sertrace_dump *d = p->trace;
        if (status < 0)
            trace_report_error(p, obj);
        p->trace = NULL;
        sertrace_dump_end(d, output_pos(p), status < 0 ? SERTRACE_STATUS_ERROR : SERTRACE_STATUS_OK);
        trace_reset_error(p);
    }
    Py_CLEAR(p->reducer_override);
    return status;
}
