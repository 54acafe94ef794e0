/* format-internal.h -- pieces of format.c shared with lines.c (the fast
 * line path), not part of the formatter's interface. */
#ifndef SERTRACE_FORMAT_INTERNAL_H
#define SERTRACE_FORMAT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Longest size text: 20 digits + " B", or "1023.9 EiB". */
#define SIZE_MAX_TEXT 24

/* The text sertrace_fmt_size appends, written at `p` (room for
 * SIZE_MAX_TEXT bytes, no NUL); returns its end. */
char *sertrace_fmt_size_to(char *p, uint64_t bytes, bool exact);

/* The decimal digits of v at `p` (room for 20, no NUL); returns the end. */
static inline char *sertrace_fmt_u64_to(char *p, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;

    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    memcpy(p, tmp + i, sizeof tmp - i);
    return p + (sizeof tmp - i);
}

#endif /* SERTRACE_FORMAT_INTERNAL_H */
