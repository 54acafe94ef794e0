/* enc.h -- a tiny test-side encoder of sertrace records (schema.h), so the
 * core tests can write synthetic streams, including broken ones.  It is
 * deliberately independent of the runtime's encoder: if the two disagree
 * on the layout, the end-to-end tests catch it. */
#ifndef TEST_ENC_H
#define TEST_ENC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sertrace/schema.h"

typedef struct enc {
    uint8_t buf[1 << 16];
    size_t n;
} enc;

static inline void enc_reset(enc *e)
{
    e->n = 0;
}

static inline void enc_u8(enc *e, uint8_t v)
{
    if (e->n < sizeof e->buf)
        e->buf[e->n++] = v;
}

static inline void enc_varint(enc *e, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        enc_u8(e, (uint8_t)(b | (v ? 0x80 : 0)));
    } while (v);
}

static inline void enc_str(enc *e, const char *s, size_t n)
{
    enc_varint(e, n);
    for (size_t i = 0; i < n; i++)
        enc_u8(e, (uint8_t)s[i]);
}

static inline void enc_enter(enc *e, uint8_t tag, uint64_t depth, uint64_t type, uint64_t addr,
                             uint64_t length, uint64_t pos)
{
    enc_u8(e, SERTRACE_REC_ENTER);
    enc_u8(e, tag);
    enc_varint(e, depth);
    enc_varint(e, type);
    enc_varint(e, addr);
    enc_varint(e, length);
    enc_varint(e, pos);
}

/* ATOM (schema v4): a node without children, `bytes` its size. */
static inline void enc_atom(enc *e, uint8_t tag, uint64_t depth, uint64_t type, uint64_t addr,
                            uint64_t length, uint64_t pos, uint64_t bytes)
{
    enc_u8(e, SERTRACE_REC_ATOM);
    enc_u8(e, tag);
    enc_varint(e, depth);
    enc_varint(e, type);
    enc_varint(e, addr);
    enc_varint(e, length);
    enc_varint(e, pos);
    enc_varint(e, bytes);
}

static inline void enc_exit(enc *e, uint64_t depth, uint64_t pos)
{
    enc_u8(e, SERTRACE_REC_EXIT);
    enc_varint(e, depth);
    enc_varint(e, pos);
}

static inline void enc_type(enc *e, uint64_t type, const char *name)
{
    enc_u8(e, SERTRACE_REC_TYPE);
    enc_varint(e, type);
    enc_str(e, name, strlen(name));
}

static inline void enc_error(enc *e, uint8_t tag, uint64_t depth, uint64_t type, const char *msg,
                             const char *path)
{
    enc_u8(e, SERTRACE_REC_ERROR);
    enc_u8(e, tag);
    enc_varint(e, depth);
    enc_varint(e, type);
    enc_str(e, msg, strlen(msg));
    enc_str(e, path, strlen(path));
}

static inline void enc_note(enc *e, uint64_t depth, const char *k, const char *v)
{
    enc_u8(e, SERTRACE_REC_NOTE);
    enc_varint(e, depth);
    enc_str(e, k, strlen(k));
    enc_str(e, v, strlen(v));
}

/* Schema v6 ("Compact records"): a batch's delta bases, the zigzag of a
 * signed difference, and the NODE and EXIT_D records.  Written from the
 * definition in schema.h, not with its helpers. */
typedef struct enc_bases {
    uint64_t addr, pos;
} enc_bases;

static inline uint64_t enc_zigzag(uint64_t value, uint64_t base)
{
    int64_t d = (int64_t)(value - base);
    return d >= 0 ? (uint64_t)d * 2 : (uint64_t)(-(d + 1)) * 2 + 1;
}

/* A NODE: an ENTER (bytes ignored) or, `atom`, an ATOM of `bytes`;
 * `kind` the label kind folded in (0: none) and `label` its value. */
static inline void enc_node(enc *e, enc_bases *b, int atom, uint8_t kind, uint64_t label,
                            uint8_t tag, uint64_t depth, uint64_t type, uint64_t addr,
                            uint64_t length, uint64_t pos, uint64_t bytes)
{
    enc_u8(e, (uint8_t)(0x10 | kind << 1 | (atom ? 1 : 0)));
    enc_u8(e, tag);
    enc_varint(e, depth);
    enc_varint(e, type);
    enc_varint(e, enc_zigzag(addr, b->addr));
    enc_varint(e, length);
    enc_varint(e, enc_zigzag(pos, b->pos));
    if (atom)
        enc_varint(e, bytes);
    if (kind)
        enc_varint(e, label);
    b->addr = addr;
    b->pos = atom ? pos + bytes : pos;
}

static inline void enc_exit_d(enc *e, enc_bases *b, uint64_t depth, uint64_t pos)
{
    enc_u8(e, 0x0a);
    enc_varint(e, depth);
    enc_varint(e, enc_zigzag(pos, b->pos));
    b->pos = pos;
}

/* Schema v7 ("Short atoms"): a SATOM, the ATOM of a NODE in fixed-width
 * fields; the caller makes sure they fit (type, dpos and bytes below
 * 256, the address difference a signed 32-bit value: asserted).
 * Little-endian, from schema.h's text. */
static inline void enc_satom(enc *e, enc_bases *b, uint8_t kind, uint64_t label, uint8_t tag,
                             uint64_t depth, uint64_t type, uint64_t addr, uint64_t length,
                             uint64_t pos, uint64_t bytes)
{
    uint32_t daddr = (uint32_t)(addr - b->addr);
    if (!(type < 256 && pos - b->pos < 256 && bytes < 256 &&
          (int64_t)(addr - b->addr) == (int32_t)daddr))
        abort(); /* a test that writes a SATOM its fields do not fit */
    enc_u8(e, (uint8_t)(0x20 | kind << 1 | (length != 0)));
    enc_u8(e, tag);
    enc_u8(e, (uint8_t)type);
    enc_u8(e, (uint8_t)(depth & 0xff));
    for (int i = 0; i < 4; i++)
        enc_u8(e, (uint8_t)(daddr >> (8 * i)));
    enc_u8(e, (uint8_t)(pos - b->pos));
    enc_u8(e, (uint8_t)bytes);
    if (length != 0)
        enc_varint(e, length);
    if (kind)
        enc_varint(e, label);
    b->addr = addr;
    b->pos = pos + bytes;
}

#endif
