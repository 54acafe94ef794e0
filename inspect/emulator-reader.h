/* emulator-reader.h -- the pickle emulator's opcode reader: decodes the
 * opcode at an input offset into an `op` (its argument, its payload, its
 * whole length), checking every declared length against the bytes left
 * before anything is done with it.  Static functions, included by
 * emulator.c alone so that read_op inlines into the opcode loop.
 */
#ifndef SERTRACE_EMULATOR_READER_H
#define SERTRACE_EMULATOR_READER_H

#include "emulator-internal.h"

/* ---- the reader ----------------------------------------------------------- */

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A line argument ending in '\n' at `p`; its length without the '\n'. */
static int read_line(emu *e, const op *o, const uint8_t *p, const uint8_t **line, uint64_t *len)
{
    const uint8_t *end = e->in + e->n;
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, o->at,
                        "truncated: a line argument has no end of line%s", "");
    *line = p;
    *len = (uint64_t)(nl - p);
    return 0;
}

static int decimal(const uint8_t *p, uint64_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 19)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Decode the opcode at input offset `at` into `o`.  0, or -1 (status set). */
static inline int read_op(emu *e, size_t at, op *o)
{
    size_t left = e->n - at - 1;
    const uint8_t *p = e->in + at + 1;
    unsigned fixed = 0, prefix = 0;

    o->code = e->in[at];
    o->num = 0;
    o->data = NULL;
    o->data_len = 0;
    o->at = at;
    o->arg = p;
    /* one case per argument shape (not per kind), so that each case's
     * width is a constant in the code after the switch */
    switch (emu_op_arg[o->code]) {
    case PICKLE_ARG_FIXED(0):
        o->len = 1;
        return 0;
    case PICKLE_ARG_FIXED(1):
        fixed = 1;
        break;
    case PICKLE_ARG_FIXED(2):
        fixed = 2;
        break;
    case PICKLE_ARG_FIXED(4):
        fixed = 4;
        break;
    case PICKLE_ARG_FIXED(8):
        fixed = 8;
        break;
    case PICKLE_ARG_PREFIX(1):
        prefix = 1;
        break;
    case PICKLE_ARG_PREFIX(4):
        prefix = 4;
        break;
    case PICKLE_ARG_PREFIX(8):
        prefix = 8;
        break;
    case PICKLE_ARG_LINES(1):
        if (read_line(e, o, p, &o->data, &o->data_len) < 0)
            return -1;
        o->len = 1 + o->data_len + 1;
        return 0;
    case PICKLE_ARG_LINES(2):
        if (read_line(e, o, p, &o->data, &o->data_len) < 0 ||
            read_line(e, o, p + o->data_len + 1, &o->data2, &o->data2_len) < 0)
            return -1;
        o->len = 1 + o->data_len + 1 + o->data2_len + 1;
        return 0;
    default: {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", o->code);
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at, "unknown opcode %s", hex);
    }
    }
    if (fixed) {
        if (left < fixed)
            return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
                            "truncated: an opcode's argument is cut%s", "");
        o->num = le(p, fixed);
        o->len = 1 + fixed;
        return 0;
    }
    if (left < prefix)
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at, "truncated: a length prefix is cut%s",
                        "");
    o->num = le(p, prefix);
    if ((o->code == OP_BINSTRING || o->code == OP_LONG4) && (o->num & 0x80000000u))
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at, "negative declared length%s", "");
    if (o->num > left - prefix) {
        char msg[64];
        snprintf(msg, sizeof msg, "%llu", (unsigned long long)o->num);
        return emu_fail(e, SERTRACE_INSPECT_MALFORMED, at,
                        "declared length %s exceeds the bytes left in the input", msg);
    }
    o->data = p + prefix;
    o->data_len = o->num;
    o->len = 1 + prefix + (size_t)o->num;
    return 0;
}

#endif /* SERTRACE_EMULATOR_READER_H */
