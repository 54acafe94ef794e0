/* emit.c -- the opcodes that carry operands, over the write path.
 *
 * Every opcode with a length or a number in it is built here: ints of each
 * width (BININT1/2/4, LONG1/LONG4, protocol 0's INT and LONG lines),
 * floats' text form, the length-prefixed strings and bytes (the smallest
 * prefix that fits, by protocol), the memo's GET/PUT family, EXT codes and
 * the text lines of GLOBAL and PERSID.  The savers (save.c, batch.c,
 * names.c, reduce.c) say what to write; this file knows how each opcode is
 * laid out.
 *
 * Sources: the opcode table of pickletools (names, operand widths, which
 * protocol introduced each opcode), PEP 307 (LONG1/LONG4), PEP 3154
 * (SHORT_BINUNICODE, BINUNICODE8, BINBYTES8, MEMOIZE) and PEP 574
 * (BYTEARRAY8); the choices the reference pickler makes among them (e.g.
 * SHORT_BINUNICODE only from protocol 4, BINBYTES8 only when 4 bytes of
 * length do not suffice) and its exception messages were observed with
 * pickle.dumps and pickletools.dis, and are checked by tests/pickle.
 */
#include <string.h>

#include "pickler.h"

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

/* An opcode, a body and a newline (the text protocols' lines). */
static int emit_line(pickler *p, char op, const char *body, Py_ssize_t n)
{
    char *at = output_claim(p, n + 2);
    if (at == NULL)
        return -1;
    at[0] = op;
    memcpy(at + 1, body, (size_t)n);
    at[n + 1] = '\n';
    return 0;
}

/* ---- ints -------------------------------------------------------------- */

/* Minimal little-endian two's complement of an int that does not fit in
 * a C long long: int.to_bytes((bit_length >> 3) + 1, 'little', signed=True)
 * with the redundant sign byte of negative numbers trimmed (what LONG1 /
 * LONG4 hold, pickletools: "two's complement, little-endian, as few bytes
 * as possible"). */
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

/* LONG1 / LONG4 (protocol >= 2) for any int outside 32 bits. */
static int emit_long_binary(pickler *p, PyObject *obj, long long val, int overflow)
{
    unsigned char small[10];
    const unsigned char *data = small;
    size_t nbytes;
    PyObject *big = NULL;

    if (!overflow) {
        /* Outside int32 but inside long long: no Python call needed. */
        unsigned long long mag =
            val < 0 ? (unsigned long long)(-(val + 1)) + 1 : (unsigned long long)val;
        size_t nbits = 64 - (size_t)__builtin_clzll(mag);
        nbytes = (nbits >> 3) + 1;
        for (size_t i = 0; i < nbytes; i++)
            small[i] = i < 8 ? (unsigned char)(((unsigned long long)val >> (8 * i)) & 0xff)
                             : (unsigned char)(val < 0 ? 0xff : 0);
        if (val < 0 && nbytes > 1 && small[nbytes - 1] == 0xff && (small[nbytes - 2] & 0x80) != 0)
            nbytes--;
    } else {
        big = long_bytes_big(obj, overflow);
        if (big == NULL)
            return -1;
        data = (const unsigned char *)PyBytes_AS_STRING(big);
        nbytes = (size_t)PyBytes_GET_SIZE(big);
    }
    int width = nbytes < 256 ? 1 : 4;
    char *at = output_claim(p, 1 + width + (Py_ssize_t)nbytes);
    if (at != NULL) {
        at[0] = (char)(width == 1 ? OP_LONG1 : OP_LONG4);
        put_le(at + 1, nbytes, width);
        memcpy(at + 1 + width, data, nbytes);
    }
    Py_XDECREF(big);
    return at == NULL ? -1 : 0;
}

int emit_long(pickler *p, PyObject *obj)
{
    int overflow = 0;
    long long val = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (val == -1 && PyErr_Occurred())
        return -1;
    if (!overflow && val <= 0x7fffffffLL && val >= -0x7fffffffLL - 1) {
        if (p->bin)
            return emit_int32(p, val);
        char line[32];
        return output_write(p, line, format_decimal_line(line, OP_INT, val));
    }
    if (p->proto >= 2)
        return emit_long_binary(p, obj, val, overflow);
    /* Protocols 0 and 1: LONG with the repr and a trailing 'L'. */
    PyObject *repr = PyObject_Repr(obj);
    if (repr == NULL)
        return -1;
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(repr, &size);
    int status = -1;
    if (text != NULL) {
        char *at = output_claim(p, size + 3);
        if (at != NULL) {
            at[0] = OP_LONG;
            memcpy(at + 1, text, (size_t)size);
            memcpy(at + 1 + size, "L\n", 2);
            status = 0;
        }
    }
    Py_DECREF(repr);
    return status;
}

int emit_float_text(pickler *p, double x)
{
    char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int status = emit_line(p, OP_FLOAT, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return status;
}

/* ---- length-prefixed data ---------------------------------------------- */

/* The opcodes of one kind of length-prefixed data, by width of the length
 * field; 0 where the kind has no such opcode. */
typedef struct sized_opcodes {
    unsigned char op_len1; /* 1-byte length, from protocol min_proto_len1 */
    unsigned char op_len4;
    unsigned char op_len8; /* protocol >= 4 */
    int min_proto_len1;
    const char *too_large; /* OverflowError below protocol 4 */
} sized_opcodes;

static const sized_opcodes BYTES_OPCODES = {
    OP_SHORT_BINBYTES, OP_BINBYTES, OP_BINBYTES8, 3,
    "serializing a bytes object larger than 4 GiB requires pickle protocol 4 or higher"};
static const sized_opcodes STR_OPCODES = {
    OP_SHORT_BINUNICODE, OP_BINUNICODE, OP_BINUNICODE8, 4,
    "serializing a string larger than 4 GiB requires pickle protocol 4 or higher"};
static const sized_opcodes BYTEARRAY_OPCODES = {0, 0, OP_BYTEARRAY8, 5, NULL};

static int emit_sized(pickler *p, const sized_opcodes *ops, const char *data, Py_ssize_t n,
                      PyObject *owner)
{
    char head[PICKLE_PAYLOAD_HEAD_MAX] = {0};
    int width;
    if (n < 0)
        return -1;
    if (ops->op_len1 != 0 && n <= 0xff && p->proto >= ops->min_proto_len1) {
        head[0] = (char)ops->op_len1;
        head[1] = (char)n;
        width = 1;
    } else if (ops->op_len4 != 0 && (uint64_t)n <= 0xffffffffULL) {
        head[0] = (char)ops->op_len4;
        put_le(head + 1, (uint64_t)n, 4);
        width = 4;
    } else if (p->proto >= 4) {
        head[0] = (char)ops->op_len8;
        put_le(head + 1, (uint64_t)n, 8);
        width = 8;
    } else {
        PyErr_SetString(PyExc_OverflowError, ops->too_large);
        return -1;
    }
    return output_payload(p, head, 1 + width, data, n, owner);
}

int emit_bytes(pickler *p, const char *data, Py_ssize_t n, PyObject *owner)
{
    return emit_sized(p, &BYTES_OPCODES, data, n, owner);
}

int emit_bytearray(pickler *p, const char *data, Py_ssize_t n, PyObject *owner)
{
    return emit_sized(p, &BYTEARRAY_OPCODES, data, n, owner);
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
        } else if (ch >= 256 || ch == '\\' || ch == 0 || ch == '\n' || ch == '\r' || ch == 0x1a) {
            *q++ = '\\';
            *q++ = 'u';
            for (int shift = 12; shift >= 0; shift -= 4)
                *q++ = hexdigits[(ch >> shift) & 0xf];
        } else {
            *q++ = (char)ch;
        }
    }
    return out;
}

/* The bytes a str is pickled as: protocol 0's escaped line text, else its
 * UTF-8 (lone surrogates, which have none, as the "surrogatepass" error
 * handler encodes them, which is what pickle writes).  Points into the
 * str's own UTF-8 cache or into *holder, a new bytes object. */
static const char *str_encoded(pickler *p, PyObject *obj, Py_ssize_t *n, PyObject **holder)
{
    if (p->bin) {
        const char *cached = PyUnicode_AsUTF8AndSize(obj, n);
        if (cached != NULL)
            return cached;
        PyErr_Clear();
    }
    *holder =
        p->bin ? PyUnicode_AsEncodedString(obj, "utf-8", "surrogatepass") : raw_unicode_escape(obj);
    *n = *holder != NULL ? PyBytes_GET_SIZE(*holder) : 0;
    return *holder != NULL ? PyBytes_AS_STRING(*holder) : NULL;
}

int emit_str(pickler *p, PyObject *obj)
{
    PyObject *holder = NULL;
    Py_ssize_t n;
    const char *data = str_encoded(p, obj, &n, &holder);
    int status = data == NULL ? -1
                 : p->bin     ? emit_sized(p, &STR_OPCODES, data, n, holder)
                              : emit_line(p, OP_UNICODE, data, n);
    Py_XDECREF(holder);
    return status;
}

/* ---- memo, extension codes, names -------------------------------------- */

/* The memo opcode family `text_op` / `op_len1` / `op_len4` for index idx. */
static int emit_memo_index(pickler *p, Py_ssize_t idx, char text_op, char op_len1, char op_len4,
                           const char *too_large)
{
    if (!p->bin) {
        char line[32];
        return output_write(p, line, format_decimal_line(line, text_op, idx));
    }
    int width = idx < 256 ? 1 : 4;
    if ((uint64_t)idx > 0xffffffffULL) {
        PyErr_SetString(G.PicklingError, too_large);
        return -1;
    }
    char *at = output_claim(p, 1 + width);
    if (at == NULL)
        return -1;
    at[0] = width == 1 ? op_len1 : op_len4;
    put_le(at + 1, (uint64_t)idx, width);
    return 0;
}

int emit_memo_slow(pickler *p, Py_ssize_t idx, int put)
{
    if (put)
        return emit_memo_index(p, idx, OP_PUT, OP_BINPUT, OP_LONG_BINPUT,
                               "memo id too large for LONG_BINPUT");
    return emit_memo_index(p, idx, OP_GET, OP_BINGET, OP_LONG_BINGET,
                           "memo id too large for LONG_BINGET");
}

int emit_ext(pickler *p, long code)
{
    int width = code <= 0xff ? 1 : code <= 0xffff ? 2 : 4;
    char *at = output_claim(p, 1 + width);
    if (at == NULL)
        return -1;
    at[0] = (char)(width == 1 ? OP_EXT1 : width == 2 ? OP_EXT2 : OP_EXT4);
    put_le(at + 1, (uint64_t)code, width);
    return 0;
}

int emit_name_line(pickler *p, PyObject *name, const char *what)
{
    PyObject *encoded =
        p->proto >= 3 ? PyUnicode_AsUTF8String(name) : PyUnicode_AsASCIIString(name);
    if (encoded == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            PyErr_Format(G.PicklingError,
                         "can't pickle %s identifier '%S' using pickle protocol %i", what, name,
                         p->proto);
        return -1;
    }
    char *at = output_claim(p, PyBytes_GET_SIZE(encoded) + 1);
    if (at != NULL) {
        memcpy(at, PyBytes_AS_STRING(encoded), (size_t)PyBytes_GET_SIZE(encoded));
        at[PyBytes_GET_SIZE(encoded)] = '\n';
    }
    Py_DECREF(encoded);
    return at == NULL ? -1 : 0;
}

int emit_persid_text(pickler *p, PyObject *pid)
{
    PyObject *text = PyObject_Str(pid);
    if (text == NULL)
        return -1;
    int status = -1;
    if (!PyUnicode_IS_ASCII(text))
        PyErr_SetString(G.PicklingError, "persistent IDs in protocol 0 must be ASCII strings");
    else
        status = emit_line(p, OP_PERSID, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text));
    Py_DECREF(text);
    return status;
}
