/* diff-rows.c -- summary dumps to rows by path pattern and by type (see
 * diff-rows.h): shared by `sertrace diff` (two columns) and
 * sertrace.compare (one column per serializer).
 *
 * Lookup is linear in the rows: a dump has tens to a few hundred patterns
 * and types, and this runs once per dump, not per node.
 */
#include "diff-rows.h"

#include <stdlib.h>
#include <string.h>

static sertrace_row *find_row(sertrace_rows *t, const char *name, bool is_type)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].is_type == is_type && strcmp(t->rows[i].name, name) == 0)
            return &t->rows[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        sertrace_row *r = realloc(t->rows, cap * sizeof *r);
        if (!r)
            return NULL;
        t->rows = r;
        t->cap = cap;
    }
    sertrace_row *r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    if (!(r->name = strdup(name)))
        return NULL;
    r->is_type = is_type;
    t->n++;
    return r;
}

int sertrace_rows_add_dump(sertrace_rows *t, unsigned col, const djson *dump)
{
    static const struct {
        const char *list, *key, *bytes;
        bool is_type;
    } lists[] = {{"paths", "pattern", "bytes", false}, {"by_type", "type", "self", true}};
    if (col >= SERTRACE_ROWS_MAX_COLS)
        return -1;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        const djson *arr = djson_get(dump, lists[l].list);
        for (size_t i = 0; arr && arr->type == DJSON_ARRAY && i < arr->n; i++) {
            const djson *e = arr->items[i];
            const char *name = djson_str(djson_get(e, lists[l].key));
            sertrace_row *r = find_row(t, name ? name : "(no type)", lists[l].is_type);
            if (!r)
                return -1;
            r->v[col] += djson_u64(djson_get(e, lists[l].bytes));
            r->present |= 1u << col;
        }
    }
    return 0;
}

void sertrace_rows_free(sertrace_rows *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->rows[i].name);
    free(t->rows);
    t->rows = NULL;
    t->n = t->cap = 0;
}
