/* diff-json.c -- a small JSON reader for `sertrace diff`.
 *
 * diff reads the summary JSON ("sertrace-summary", the one `report --json`
 * and `inspect --json` write) that the summary sink produced for each
 * input, so the rows it compares are exactly the figures the other outputs
 * show.  Only what that document holds is needed: objects, arrays,
 * strings (with \uXXXX escapes, kept as UTF-8), numbers, true, false and
 * null.  The parse builds a tree of nodes; lookups are linear (the
 * objects are small), and the whole tree is freed at once.  Malformed
 * input gives NULL and a message naming the offset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"

struct parser {
    const char *s;
    size_t n, i;
    unsigned depth;
    char err[128];
};

static void ws(struct parser *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r'))
        p->i++;
}

static djson *fail(struct parser *p, const char *what)
{
    if (!p->err[0])
        snprintf(p->err, sizeof p->err, "%s at offset %zu", what, p->i);
    return NULL;
}

static int put_utf8(char *out, size_t *len, unsigned c)
{
    if (c < 0x80) {
        out[(*len)++] = (char)c;
    } else if (c < 0x800) {
        out[(*len)++] = (char)(0xC0 | (c >> 6));
        out[(*len)++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out[(*len)++] = (char)(0xE0 | (c >> 12));
        out[(*len)++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[(*len)++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[(*len)++] = (char)(0xF0 | (c >> 18));
        out[(*len)++] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[(*len)++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[(*len)++] = (char)(0x80 | (c & 0x3F));
    }
    return 0;
}

static int hex4(struct parser *p, unsigned *out)
{
    unsigned v = 0;
    if (p->i + 4 > p->n)
        return -1;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* p->i on the opening quote.  A NUL-terminated copy (NUL bytes from \u0000
 * are kept in `len`). */
static char *string(struct parser *p, size_t *len)
{
    size_t start = ++p->i, cap = 0;
    while (p->i < p->n && p->s[p->i] != '"') { /* worst case size */
        if (p->s[p->i] == '\\')
            p->i++;
        p->i++;
    }
    if (p->i >= p->n) {
        fail(p, "unterminated string");
        return NULL;
    }
    cap = p->i - start + 1;
    char *out = malloc(cap + 4);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    size_t l = 0;
    for (p->i = start; p->s[p->i] != '"';) {
        char c = p->s[p->i++];
        if (c != '\\') {
            out[l++] = c;
            continue;
        }
        c = p->s[p->i++];
        unsigned u;
        switch (c) {
        case 'n':
            out[l++] = '\n';
            break;
        case 't':
            out[l++] = '\t';
            break;
        case 'r':
            out[l++] = '\r';
            break;
        case 'b':
            out[l++] = '\b';
            break;
        case 'f':
            out[l++] = '\f';
            break;
        case 'u':
            if (hex4(p, &u) < 0) {
                free(out);
                fail(p, "bad \\u escape");
                return NULL;
            }
            if (u >= 0xD800 && u < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                unsigned lo;
                p->i += 2;
                if (hex4(p, &lo) < 0) {
                    free(out);
                    fail(p, "bad \\u escape");
                    return NULL;
                }
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(out, &l, u);
            break;
        default:
            out[l++] = c;
            break;
        }
    }
    p->i++;
    out[l] = '\0';
    *len = l;
    return out;
}

static djson *node(struct parser *p, enum djson_type t)
{
    djson *j = calloc(1, sizeof *j);
    if (!j)
        return fail(p, "out of memory");
    j->type = t;
    return j;
}

static djson *value(struct parser *p);

static int add_child(struct parser *p, djson *parent, djson *child, char *key)
{
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 8;
        djson **items = realloc(parent->items, cap * sizeof *items);
        char **keys =
            parent->type == DJSON_OBJECT ? realloc(parent->keys, cap * sizeof *keys) : NULL;
        if (items)
            parent->items = items;
        if (keys)
            parent->keys = keys;
        if (!items || (parent->type == DJSON_OBJECT && !keys)) {
            fail(p, "out of memory");
            return -1;
        }
        parent->cap = cap;
    }
    if (parent->type == DJSON_OBJECT)
        parent->keys[parent->n] = key;
    parent->items[parent->n++] = child;
    return 0;
}

static djson *container(struct parser *p, bool object)
{
    char close = object ? '}' : ']';
    djson *j = node(p, object ? DJSON_OBJECT : DJSON_ARRAY);
    if (!j)
        return NULL;
    if (++p->depth > 64) {
        djson_free(j);
        return fail(p, "nesting too deep");
    }
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        p->depth--;
        return j;
    }
    for (;;) {
        char *key = NULL;
        ws(p);
        if (object) {
            size_t kl;
            if (p->i >= p->n || p->s[p->i] != '"' || !(key = string(p, &kl))) {
                djson_free(j);
                return fail(p, "expected a key");
            }
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                free(key);
                djson_free(j);
                return fail(p, "expected ':'");
            }
            p->i++;
        }
        djson *v = value(p);
        if (!v || add_child(p, j, v, key) < 0) {
            free(key);
            djson_free(v);
            djson_free(j);
            return NULL;
        }
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            p->depth--;
            return j;
        }
        djson_free(j);
        return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static djson *value(struct parser *p)
{
    ws(p);
    if (p->i >= p->n)
        return fail(p, "unexpected end");
    char c = p->s[p->i];
    if (c == '{' || c == '[')
        return container(p, c == '{');
    if (c == '"') {
        djson *j = node(p, DJSON_STRING);
        if (j && !(j->str = string(p, &j->len))) {
            free(j);
            return NULL;
        }
        return j;
    }
    static const struct {
        const char *word;
        enum djson_type t;
        bool b;
    } words[] = {
        {"true", DJSON_BOOL, true}, {"false", DJSON_BOOL, false}, {"null", DJSON_NULL, false}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t wl = strlen(words[k].word);
        if (p->n - p->i >= wl && memcmp(p->s + p->i, words[k].word, wl) == 0) {
            djson *j = node(p, words[k].t);
            if (j)
                j->b = words[k].b;
            p->i += wl;
            return j;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t k = 0;
        while (p->i < p->n && k + 1 < sizeof buf && strchr("+-0123456789.eE", p->s[p->i]))
            buf[k++] = p->s[p->i++];
        buf[k] = '\0';
        djson *j = node(p, DJSON_NUMBER);
        if (!j)
            return NULL;
        char *end;
        j->num = strtod(buf, &end);
        /* exact integers: byte counts beyond 2^53 */
        j->is_uint = buf[0] != '-' && !strpbrk(buf, ".eE");
        if (j->is_uint)
            j->u = strtoull(buf, NULL, 10);
        if (*end) {
            free(j);
            return fail(p, "bad number");
        }
        return j;
    }
    return fail(p, "unexpected character");
}

djson *djson_parse(const char *s, size_t n, char *err, size_t errlen)
{
    struct parser p = {.s = s, .n = n};
    djson *j = value(&p);
    if (j) {
        ws(&p);
        if (p.i != p.n) {
            djson_free(j);
            j = fail(&p, "trailing data");
        }
    }
    if (!j && err)
        snprintf(err, errlen, "%s", p.err);
    return j;
}

void djson_free(djson *j)
{
    if (!j)
        return;
    for (size_t k = 0; k < j->n; k++) {
        djson_free(j->items[k]);
        if (j->keys)
            free(j->keys[k]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
    free(j);
}

const djson *djson_get(const djson *j, const char *key)
{
    if (!j || j->type != DJSON_OBJECT)
        return NULL;
    for (size_t k = 0; k < j->n; k++)
        if (strcmp(j->keys[k], key) == 0)
            return j->items[k];
    return NULL;
}

uint64_t djson_u64(const djson *j)
{
    if (!j || j->type != DJSON_NUMBER)
        return 0;
    if (j->is_uint)
        return j->u;
    return j->num > 0 ? (uint64_t)j->num : 0;
}

const char *djson_str(const djson *j)
{
    return j && j->type == DJSON_STRING ? j->str : NULL;
}
