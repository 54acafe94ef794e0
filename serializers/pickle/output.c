/* output.c -- the single write path of the pickler.
 *
 * Every byte of a pickle goes through output_write() or
 * output_write_bytes(), so this is where framing happens and where the trace
 * gets its positions.  The buffer is a bytes object grown by 3/2 exactly as
 * _pickle.c grows its own (so dumps() returns it after one final resize).
 *
 * Framing (protocol >= 4): a frame is opened lazily by the first write
 * after the previous one was committed, by reserving 9 header bytes.  A frame
 * is committed when it reaches 64 KiB at an opcode boundary (the start of a
 * save()), before a payload of >= 64 KiB (which is written outside any
 * frame), and at the end of the dump; a frame of fewer than 4 bytes loses its
 * header.  These rules are _pickle.c's: the bytes must be identical.
 *
 * Byte accounting needs no counter on the hot path: output_pos() derives
 * the position from the state (flushed + buffered - an open frame's
 * reserved header), so a frame header counts when its frame is committed and
 * a dropped header never counts.  The position is only read when tracing.
 */
#include <string.h>

#include "pickler.h"

int output_reset(pickler *p)
{
    PyObject *fresh = PyBytes_FromStringAndSize(NULL, p->max_output_len);
    if (fresh == NULL)
        return -1;
    Py_XSETREF(p->output_buffer, fresh);
    p->output_len = 0;
    p->frame_start = -1;
    output_sync(p);
    return 0;
}

static void write_size64(char *out, size_t value)
{
    for (size_t i = 0; i < 8; i++)
        out[i] = (char)((value >> (8 * i)) & 0xff);
}

char *output_claim_slow(pickler *p, Py_ssize_t n)
{
    int need_new_frame = p->framing && p->frame_start == -1;
    Py_ssize_t needed = need_new_frame ? n + PICKLE_FRAME_HEADER_SIZE : n;

    if (p->output_len + needed > p->max_output_len) {
        if (p->output_len >= PY_SSIZE_T_MAX / 2 - needed) {
            PyErr_NoMemory();
            return NULL;
        }
        p->max_output_len = (p->output_len + needed) / 2 * 3;
        if (_PyBytes_Resize(&p->output_buffer, p->max_output_len) < 0) {
            output_sync(p);
            return NULL;
        }
    }
    char *buffer = OUTPUT_DATA(p);
    if (need_new_frame) {
        p->frame_start = p->output_len;
        memset(buffer + p->output_len, 0xFE, PICKLE_FRAME_HEADER_SIZE);
        p->output_len += PICKLE_FRAME_HEADER_SIZE;
    }
    output_sync(p);
    buffer += p->output_len;
    p->output_len += n;
    return buffer;
}

int output_commit_frame(pickler *p)
{
    if (!p->framing || p->frame_start == -1)
        return 0;
    size_t frame_len = (size_t)(p->output_len - p->frame_start - PICKLE_FRAME_HEADER_SIZE);
    char *header = OUTPUT_DATA(p) + p->frame_start;
    if (frame_len >= PICKLE_FRAME_SIZE_MIN) {
        header[0] = (char)OP_FRAME;
        write_size64(header + 1, frame_len);
    }
    else {
        memmove(header, header + PICKLE_FRAME_HEADER_SIZE, frame_len);
        p->output_len -= PICKLE_FRAME_HEADER_SIZE;
    }
    p->frame_start = -1;
    output_sync(p);
    return 0;
}

PyObject *output_take_bytes(pickler *p)
{
    if (output_commit_frame(p) < 0)
        return NULL;
    PyObject *out = p->output_buffer;
    p->output_buffer = NULL;
    output_sync(p);
    if (_PyBytes_Resize(&out, p->output_len) < 0)
        return NULL;
    return out;
}

int output_flush_to_file(pickler *p)
{
    Py_ssize_t len;
    PyObject *out, *result;

    if (output_commit_frame(p) < 0)
        return -1;
    len = p->output_len;
    out = output_take_bytes(p);
    if (out == NULL)
        return -1;
    result = PyObject_CallOneArg(p->write, out);
    Py_DECREF(out);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    p->flushed += (uint64_t)len;
    p->output_len = 0;
    return 0;
}

int output_opcode_boundary_slow(pickler *p)
{
    if (!p->framing || p->frame_start == -1)
        return 0;
    Py_ssize_t frame_len = p->output_len - p->frame_start - PICKLE_FRAME_HEADER_SIZE;
    if (frame_len < PICKLE_FRAME_SIZE_TARGET)
        return 0;
    if (output_commit_frame(p) < 0)
        return -1;
    if (p->write != NULL) {
        if (output_flush_to_file(p) < 0)
            return -1;
        if (output_reset(p) < 0)
            return -1;
    }
    return 0;
}

int output_write_bytes(pickler *p, const char *header, Py_ssize_t header_size,
                       const char *data, Py_ssize_t data_size, PyObject *payload)
{
    int bypass_buffer = data_size >= PICKLE_FRAME_SIZE_TARGET;
    int framing = p->framing;

    if (bypass_buffer) {
        if (output_commit_frame(p) < 0)
            return -1;
        p->framing = 0;
        output_sync(p);
    }
    if (output_write(p, header, header_size) < 0)
        goto error;
    if (bypass_buffer && p->write != NULL) {
        PyObject *result, *mem = NULL;
        if (output_flush_to_file(p) < 0)
            goto error;
        if (payload == NULL) {
            payload = mem = PyBytes_FromStringAndSize(data, data_size);
            if (payload == NULL)
                goto error;
        }
        result = PyObject_CallOneArg(p->write, payload);
        Py_XDECREF(mem);
        if (result == NULL)
            goto error;
        Py_DECREF(result);
        p->flushed += (uint64_t)data_size;
        if (output_reset(p) < 0)
            goto error;
    }
    else if (output_write(p, data, data_size) < 0) {
        goto error;
    }
    p->framing = framing;
    output_sync(p);
    return 0;
error:
    /* _pickle.c leaves framing off on error; the dump is over anyway. */
    return -1;
}
