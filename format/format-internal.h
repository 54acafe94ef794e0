/* format-internal.h -- pieces of format.c shared with lines.c (the fast
 * line path), not part of the formatter's interface. */
#ifndef SERTRACE_FORMAT_INTERNAL_H
#define SERTRACE_FORMAT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Longest size text: 20 digits + " B", or "1023.9 EiB". */
#define SIZE_MAX_TEXT 24

/* The text sertrace_fmt_size appends, written at `p` (room for
 * SIZE_MAX_TEXT bytes, no NUL); returns its end. */
char *sertrace_fmt_size_to(char *p, uint64_t bytes, bool exact);

#endif /* SERTRACE_FORMAT_INTERNAL_H */
