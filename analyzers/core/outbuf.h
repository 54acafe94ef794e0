/* outbuf.h -- small inline appenders shared by the summary and the tree
 * printer (internal to analyzers/core).  They write into a format.h
 * sertrace_buf without a function call when it has room, and format
 * numbers and times without printf: the sinks append millions of short
 * pieces, and this is where their time went (measured, see
 * analyzers/README.md).  The slow path is format.h's sertrace_buf_append. */
#ifndef SERTRACE_OUTBUF_H
#define SERTRACE_OUTBUF_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "format.h"

/* Append `n` bytes; a no-op returning -1 once the buffer has failed
 * (format.h's sticky error). */
static inline int app(sertrace_buf *b, const char *s, size_t n)
{
    if (b->data && b->len + n < b->cap && !b->err) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
    }
    return sertrace_buf_append(b, s, n);
}

/* Make room for `need` more bytes plus the NUL, so a caller can then
 * write a whole line through a pointer with no check per piece.  The
 * slow path (the buffer grows: rare, output buffers are reused) goes
 * through format.h's sertrace_buf_append. */
static inline int ensure(sertrace_buf *b, size_t need)
{
    if (b->data && need < b->cap - b->len && !b->err)
        return 0;
    static const char zeros[256];
    size_t len = b->len;
    for (size_t left = need; left > 0;) {
        size_t k = left < sizeof zeros ? left : sizeof zeros;
        if (sertrace_buf_append(b, zeros, k) < 0) {
            b->len = len;
            if (b->data)
                b->data[len] = '\0';
            return -1;
        }
        left -= k;
    }
    if (!b->data && sertrace_buf_append(b, "", 0) < 0)
        return -1;
    b->len = len;
    b->data[len] = '\0';
    return 0;
}

/* `n` bytes of `s` right-aligned in `width` columns, at p. */
static inline char *pad_left_to(char *p, const char *s, size_t n, size_t width)
{
    if (n < width) {
        memset(p, ' ', width - n);
        p += width - n;
    }
    memcpy(p, s, n);
    return p + n;
}

/* Pointer writers: after one ensure(), a piece of output is written
 * through a local pointer (no capacity check, length store or NUL per
 * piece), then committed with put_end(). */
#define p_lit(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

static inline char *p_mem(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* The decimal digits of `v`, written backwards from the end of tmp[24];
 * returns the index of the first one (they are tmp[i .. 24)). */
static inline size_t u64_digits(char tmp[24], uint64_t v)
{
    size_t i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return i;
}

static inline char *p_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t i = u64_digits(tmp, v);
    memcpy(p, tmp + i, sizeof tmp - i);
    return p + (sizeof tmp - i);
}

static inline char *p_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return p_u64(p, (uint64_t)(-(v + 1)) + 1);
    }
    return p_u64(p, (uint64_t)v);
}

static inline void put_end(sertrace_buf *b, char *p)
{
    *p = '\0';
    b->len = (size_t)(p - b->data);
}

/* Append a string literal (its length computed by the compiler). */
#define buf_lit(b, s) app((b), (s), sizeof(s) - 1)

static inline int put_str(sertrace_buf *b, const char *s)
{
    return app(b, s, strlen(s));
}

static inline int put_u64(sertrace_buf *b, uint64_t v)
{
    char tmp[24];
    size_t i = u64_digits(tmp, v);
    return app(b, tmp + i, sizeof tmp - i);
}

static inline int put_i64(sertrace_buf *b, int64_t v)
{
    if (v < 0) {
        if (buf_lit(b, "-") < 0)
            return -1;
        return put_u64(b, (uint64_t)(-(v + 1)) + 1);
    }
    return put_u64(b, (uint64_t)v);
}

/* `v` on exactly `width` digits, zero-padded. */
static inline int put_u64_zero(sertrace_buf *b, uint64_t v, unsigned width)
{
    char tmp[24];
    if (width > sizeof tmp)
        width = sizeof tmp;
    if (v <= UINT32_MAX) {
        /* 32-bit constant divisions compile to multiplications (the 64-bit
         * loop below was a `div` per digit: measured, once per dump) */
        uint32_t x = (uint32_t)v;
        for (unsigned i = width; i > 0; i--, x /= 10u)
            tmp[i - 1] = (char)('0' + x % 10u);
        return app(b, tmp, width);
    }
    for (unsigned i = width; i > 0; i--, v /= 10)
        tmp[i - 1] = (char)('0' + v % 10);
    return app(b, tmp, width);
}

/* The "YYYY-MM-DD HH:MM:SS" of the last second formatted: dumps come in
 * time order, so gmtime_r() runs once per second of trace, not per dump. */
typedef struct time_cache {
    int64_t sec; /* -1: empty */
    char text[20];
} time_cache;

#define TIME_CACHE_INIT                                                                            \
    {                                                                                              \
        -1,                                                                                        \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/* "2026-11-29 18:49:04.297814272 UTC" for ns since the epoch, or
 * "t=N ns" when the clock has no usable origin. */
static inline int put_time(sertrace_buf *b, int64_t ns, time_cache *tc)
{
    int64_t s = ns / 1000000000;
    if (ns <= 0)
        return buf_lit(b, "t=") || put_i64(b, ns) || buf_lit(b, " ns") ? -1 : 0;
    if (tc->sec != s) {
        time_t sec = (time_t)s;
        struct tm tm;
        if (!gmtime_r(&sec, &tm))
            return buf_lit(b, "t=") || put_i64(b, ns) || buf_lit(b, " ns") ? -1 : 0;
        char tmp[64];
        sertrace_buf t = {tmp, 0, sizeof tmp, 0}; /* never grows: 19 bytes */
        if (put_u64_zero(&t, (uint64_t)tm.tm_year + 1900, 4) || buf_lit(&t, "-") ||
            put_u64_zero(&t, (uint64_t)tm.tm_mon + 1, 2) || buf_lit(&t, "-") ||
            put_u64_zero(&t, (uint64_t)tm.tm_mday, 2) || buf_lit(&t, " ") ||
            put_u64_zero(&t, (uint64_t)tm.tm_hour, 2) || buf_lit(&t, ":") ||
            put_u64_zero(&t, (uint64_t)tm.tm_min, 2) || buf_lit(&t, ":") ||
            put_u64_zero(&t, (uint64_t)tm.tm_sec, 2) || t.len != 19)
            return -1;
        memcpy(tc->text, tmp, 19);
        tc->sec = s;
    }
    return app(b, tc->text, 19) || buf_lit(b, ".") ||
                   put_u64_zero(b, (uint64_t)(ns % 1000000000), 9) || buf_lit(b, " UTC")
               ? -1
               : 0;
}

#endif /* SERTRACE_OUTBUF_H */
