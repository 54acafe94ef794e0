/* grow.h -- how analyzers/core grows its arrays and probes its hash tables
 * (internal to analyzers/core; cli/, which links the core, grows its
 * progress display's buffer with sertrace_grow too).
 *
 * Arrays: a pointer, a capacity in elements, a count; when the count
 * reaches the capacity the array doubles (from a first capacity of the
 * caller's choice) with realloc, and a failed realloc leaves the old array
 * and capacity as they were (the caller returns -1: out of memory).
 *
 * Hash tables: open addressing with linear probing over a power-of-two
 * number of slots, kept at most half full by their owners (pathstats.c,
 * summary-shared.c); SERTRACE_PROBE walks from a hash's home slot.
 */
#ifndef SERTRACE_GROW_H
#define SERTRACE_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Array `p` of *cap elements of `elem` bytes, made to hold at least `need`:
 * its capacity doubled (from `first` when it has none) until it does.  The
 * array, reallocated, with *cap updated; NULL when out of memory or the
 * size overflows (then `p` and *cap are unchanged). */
static inline void *sertrace_grow(void *p, size_t *cap, size_t elem, size_t need, size_t first)
{
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (c == *cap)
        return p;
    if (c > SIZE_MAX / elem)
        return NULL;
    void *a = realloc(p, c * elem);
    if (a != NULL)
        *cap = c;
    return a;
}

/* Declares `size_t j`, the first slot from hash `h`'s home slot in a table
 * of `cap` slots (a power of two, the table never full) where `busy` (an
 * expression of j) is false: an empty slot, or the key's own. */
#define SERTRACE_PROBE(j, h, cap, busy)                                                            \
    size_t j = (size_t)(h) & ((size_t)(cap)-1);                                                    \
    while (busy)                                                                                   \
    j = (j + 1) & ((size_t)(cap)-1)

#endif /* SERTRACE_GROW_H */
