/* diff-rows.h -- the rows of `sertrace diff` and `sertrace.compare`: the
 * one place where a summary document's dumps become rows by path pattern
 * and by type.
 *
 * A row is a path pattern (bytes including children: the pattern's
 * "bytes") or a type (its self bytes, "self": never counted twice, as
 * nested dicts would be), with one value per column: diff has two (A and
 * B), compare one per serializer.  Adding a dump to a column adds its
 * figures to the rows it has and marks them present in that column, so a
 * row absent from a column is told apart from a row of 0 bytes ([NEW],
 * [DEL], "not written").  Rows are kept in first-seen order; callers sort
 * them as their output needs.
 *
 * Used by cli/diff.c and by the Python extension sertrace._compare
 * (python/sertrace/_compare.c), which compiles this file and diff-json.c.
 */
#ifndef SERTRACE_DIFF_ROWS_H
#define SERTRACE_DIFF_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diff.h"

#define SERTRACE_ROWS_MAX_COLS 8

typedef struct sertrace_row {
    char *name;
    bool is_type;
    uint64_t v[SERTRACE_ROWS_MAX_COLS]; /* bytes per column */
    unsigned present;                   /* bit c: the row exists in column c */
} sertrace_row;

typedef struct sertrace_rows {
    sertrace_row *rows;
    size_t n, cap;
} sertrace_rows;

/* Add the rows of one summary DUMP object (with "paths" and "by_type") to
 * column `col` (< SERTRACE_ROWS_MAX_COLS).  0, or -1 when out of memory. */
int sertrace_rows_add_dump(sertrace_rows *t, unsigned col, const djson *dump);

/* True when the row is in column c. */
static inline bool sertrace_row_in(const sertrace_row *r, unsigned c)
{
    return (r->present >> c) & 1u;
}

/* Frees the rows (not `t` itself) and empties it. */
void sertrace_rows_free(sertrace_rows *t);

#endif /* SERTRACE_DIFF_ROWS_H */
