/* diff.h -- the names `sertrace diff`'s files share (diff.c, diff-json.c):
 * a small JSON tree for reading the summary documents diff compares. */
#ifndef SERTRACE_DIFF_H
#define SERTRACE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum djson_type { DJSON_NULL, DJSON_BOOL, DJSON_NUMBER, DJSON_STRING, DJSON_ARRAY, DJSON_OBJECT };

typedef struct djson {
    enum djson_type type;
    bool b, is_uint;
    double num;
    uint64_t u;
    char *str; /* DJSON_STRING, NUL-terminated */
    size_t len;
    struct djson **items; /* arrays and objects */
    char **keys;          /* objects */
    size_t n, cap;
} djson;

/* NULL on malformed input or no memory (message in err). */
djson *djson_parse(const char *s, size_t n, char *err, size_t errlen);
void djson_free(djson *j);
/* An object's member, or NULL. */
const djson *djson_get(const djson *j, const char *key);
/* A number as an unsigned integer (0 when absent or not a number). */
uint64_t djson_u64(const djson *j);
/* A string, or NULL. */
const char *djson_str(const djson *j);

#endif /* SERTRACE_DIFF_H */
