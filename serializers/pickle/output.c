/* output.c -- the single write path of the pickler.
 *
 * Every byte of a pickle is claimed here (output_claim(), inline in
 * pickler.h, and output_payload()), so this is where protocol-4 framing
 * happens and where the trace gets its positions.
 *
 * What the bytes must look like comes from the format (pickletools' FRAME
 * documentation, PEP 3154) and from comparing with pickle.dumps /
 * Pickler.dump byte for byte and write() call for write() call (the
 * differential tests, tests/pickle/, are the specification):
 *   - a frame is announced by FRAME + its 8-byte length before its first
 *     opcode; we reserve those 9 bytes when the first byte of a frame is
 *     claimed and fill them when the frame ends;
 *   - a frame ends when it holds >= 64 KiB at the start of an object, before
 *     a payload of >= 64 KiB (which goes outside any frame, to the file on
 *     its own write() when there is one), and at the end of the dump; a
 *     frame of fewer than 4 bytes is written without its header;
 *   - with a file, an ended 64 KiB frame is handed to write() at once.
 * The buffer is one bytes object whose capacity doubles until what is
 * needed fits (grow_for), returned by dumps() after one shrink.  Its first
 * size is PICKLE_WRITE_BUF_SIZE, or for dumps() the previous result's size
 * (module.c, dumps_size_hint), so a loop of similar dumps() never grows it.
 * Doubling was chosen from the sizes our payloads reach (84 KB state-16 to
 * 1.4 MB state-256 and micro-bytes-2k; README.md "Speed", "The output
 * buffer's growth"): from 4 KiB it takes 9 growths to 1.4 MB, each one a
 * realloc that glibc serves by mremap (no copy) once the buffer is mmap'd,
 * and the capacity not written is never touched, so it costs address space,
 * not resident memory.
 *
 * Byte accounting has no counter on the hot path: output_pos() derives
 * the position from the state (flushed + buffered - an open frame's
 * reserved header), so a header counts when its frame ends and a dropped
 * header never counts.
 *
 * Invariant (asserted in debug builds on the slow paths, output_limits_ok()):
 * what is written fits the buffer, the buffer's size is max_output_len, an
 * open frame's reserved header lies inside what is written, and the
 * inline fast path's limit never lets a write pass the buffer's end.
 */
#include <assert.h>
#include <string.h>

#include "pickler.h"

#ifndef NDEBUG
static int output_limits_ok(const pickler *p)
{
    if (p->output_buffer == NULL)
        return p->write_limit == -1;
    return 0 <= p->output_len && p->output_len <= p->max_output_len &&
           p->max_output_len == PyBytes_GET_SIZE(p->output_buffer) && p->frame_start >= -1 &&
           (p->frame_start < 0 || p->frame_start + PICKLE_FRAME_HEADER_SIZE <= p->output_len) &&
           p->write_limit <= p->max_output_len;
}
#endif

int output_reset(pickler *p)
{
    PyObject *fresh = PyBytes_FromStringAndSize(NULL, p->max_output_len);
    if (fresh == NULL)
        return -1;
    Py_XSETREF(p->output_buffer, fresh);
    p->output_len = 0;
    p->frame_start = -1;
    output_sync(p);
    assert(output_limits_ok(p));
    return 0;
}

int output_start(pickler *p)
{
    if (p->output_buffer == NULL) {
        p->max_output_len = PICKLE_WRITE_BUF_SIZE;
        return output_reset(p);
    }
    p->output_len = 0;
    p->frame_start = -1;
    output_sync(p);
    assert(output_limits_ok(p));
    return 0;
}

/* Make room for `more` bytes after the current end. */
static int grow_for(pickler *p, Py_ssize_t more)
{
    if (p->output_buffer != NULL && p->output_len + more <= p->max_output_len)
        return 0;
    if (p->output_buffer == NULL) {
        PyErr_SetString(PyExc_SystemError, "pickler output used after it was given away");
        return -1;
    }
    if (more > PY_SSIZE_T_MAX / 2 - p->output_len) {
        PyErr_NoMemory();
        return -1;
    }
    /* needed <= PY_SSIZE_T_MAX / 2, so doubling a capacity below it cannot
     * overflow. */
    Py_ssize_t needed = p->output_len + more;
    Py_ssize_t capacity = p->max_output_len > 0 ? p->max_output_len : PICKLE_WRITE_BUF_SIZE;
    while (capacity < needed)
        capacity *= 2;
    int failed = _PyBytes_Resize(&p->output_buffer, capacity) < 0;
    if (!failed)
        p->max_output_len = capacity;
    output_sync(p);
    return failed ? -1 : 0;
}

char *output_claim_slow(pickler *p, Py_ssize_t n)
{
    Py_ssize_t header = p->framing && p->frame_start < 0 ? PICKLE_FRAME_HEADER_SIZE : 0;
    if (grow_for(p, header + n) < 0)
        return NULL;
    if (header != 0) {
        /* Reserved now, filled (or removed) by output_end_frame(). */
        p->frame_start = p->output_len;
        p->output_len += header;
        output_sync(p);
    }
    char *at = OUTPUT_DATA(p) + p->output_len;
    p->output_len += n;
    assert(output_limits_ok(p));
    return at;
}

void output_end_frame(pickler *p)
{
    Py_ssize_t start = p->frame_start;
    if (start < 0)
        return;
    char *header = OUTPUT_DATA(p) + start;
    Py_ssize_t body = p->output_len - start - PICKLE_FRAME_HEADER_SIZE;
    if (body >= PICKLE_FRAME_SIZE_MIN) {
        header[0] = (char)OP_FRAME;
        put_le(header + 1, (uint64_t)body, 8);
    } else {
        /* Too short to be worth a header: slide the body over it. */
        memmove(header, header + PICKLE_FRAME_HEADER_SIZE, (size_t)body);
        p->output_len = start + body;
    }
    p->frame_start = -1;
    output_sync(p);
    assert(output_limits_ok(p));
}

PyObject *output_take_bytes(pickler *p)
{
    output_end_frame(p);
    /* Shrunk to the pickle's length in place; the pickler keeps no
     * reference either way (_PyBytes_Resize frees the buffer on failure). */
    int ready = p->output_buffer != NULL && _PyBytes_Resize(&p->output_buffer, p->output_len) == 0;
    PyObject *result = ready ? p->output_buffer : NULL;
    if (p->output_buffer == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "pickler output used after it was given away");
    p->output_buffer = NULL;
    output_sync(p);
    return result;
}

PyObject *output_result(pickler *p)
{
    output_end_frame(p);
    if (p->output_buffer == NULL || p->output_len > PICKLE_WRITE_BUF_SIZE)
        return output_take_bytes(p);
    PyObject *result = PyBytes_FromStringAndSize(OUTPUT_DATA(p), p->output_len);
    p->output_len = 0;
    output_sync(p);
    return result;
}

static int call_write(pickler *p, PyObject *chunk)
{
    PyObject *ret = PyObject_CallOneArg(p->write, chunk);
    if (ret == NULL)
        return -1;
    Py_DECREF(ret);
    return 0;
}

int output_flush(pickler *p)
{
    PyObject *chunk = output_take_bytes(p);
    if (chunk == NULL)
        return -1;
    /* The buffered bytes count as handed over even when write() raises
     * (README.md, "How bytes are counted": the dump's total stays the
     * payload's length). */
    p->flushed += (uint64_t)PyBytes_GET_SIZE(chunk);
    p->output_len = 0;
    int status = call_write(p, chunk);
    Py_DECREF(chunk);
    return status;
}

int output_boundary_slow(pickler *p)
{
    /* boundary_limit is only reached with a frame open and framing on. */
    if (p->output_len - p->frame_start - PICKLE_FRAME_HEADER_SIZE < PICKLE_FRAME_SIZE_TARGET)
        return 0;
    output_end_frame(p);
    if (p->write == NULL)
        return 0;
    return output_flush(p) < 0 ? -1 : output_reset(p);
}

/* A payload of >= 64 KiB: after the frame in progress, outside any frame;
 * with a file, its head goes out with what was buffered and the data in a
 * write() of its own. */
static int large_payload(pickler *p, const char *head, Py_ssize_t head_len, const char *data,
                         Py_ssize_t data_len, PyObject *owner)
{
    if (output_write(p, head, head_len) < 0)
        return -1;
    if (p->write == NULL) {
        char *at = output_claim(p, data_len);
        if (at == NULL)
            return -1;
        memcpy(at, data, (size_t)data_len);
        return 0;
    }
    if (output_flush(p) < 0)
        return -1;
    PyObject *chunk = owner;
    if (chunk != NULL)
        Py_INCREF(chunk);
    else if ((chunk = PyBytes_FromStringAndSize(data, data_len)) == NULL)
        return -1;
    int status = call_write(p, chunk);
    Py_DECREF(chunk);
    if (status < 0)
        return -1;
    p->flushed += (uint64_t)data_len;
    return output_reset(p);
}

int output_payload(pickler *p, const char *head, Py_ssize_t head_len, const char *data,
                   Py_ssize_t data_len, PyObject *owner)
{
    if (data_len < PICKLE_FRAME_SIZE_TARGET) {
        char *at = output_claim(p, head_len + data_len);
        if (at == NULL)
            return -1;
        /* Short copies by hand: a memcpy call costs more than a short
         * str's few bytes (micro-short-str: 2.6 M -> 1.1 M instructions of
         * memcpy per 100,000 str). */
        if (data_len < 8) {
            for (Py_ssize_t i = 0; i < head_len; i++)
                at[i] = head[i];
            at += head_len;
            for (Py_ssize_t i = 0; i < data_len; i++)
                at[i] = data[i];
            return 0;
        }
        /* The whole head buffer in one fixed-size copy (two moves), its
         * bytes past head_len overwritten by the data: what was claimed
         * (head_len >= 1, data_len >= 8) covers the 9 bytes.  A loop over
         * head_len bytes cost 33 instructions per bytes object
         * (micro-bytes-2k). */
        memcpy(at, head, PICKLE_PAYLOAD_HEAD_MAX);
        memcpy(at + head_len, data, (size_t)data_len);
        return 0;
    }
    output_end_frame(p);
    int framing = p->framing;
    p->framing = 0; /* no frame opens around it */
    output_sync(p);
    int status = large_payload(p, head, head_len, data, data_len, owner);
    p->framing = framing;
    output_sync(p);
    return status;
}
