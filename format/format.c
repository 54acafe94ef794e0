/* format.c -- the one tree-line formatter of sertrace (see format.h).
 *
 * The live text probe (probes/text.c) and the analyzer sinks print every
 * tree line through these functions, so the live and the post-mortem trees
 * are the same text.  The text probe calls them once per traced object
 * while the host program serializes, so the common paths (enter and exit
 * lines, sizes, escaping of plain ASCII names) are written by hand instead
 * of through printf, and a buffer only grows (by doubling) and never
 * shrinks: a buffer reused across dumps allocates nothing in steady state.
 *
 * Escaping validates UTF-8 strictly (no overlong forms, no surrogates, no
 * code point above U+10FFFF), so whatever bytes a trace holds, the output
 * is valid UTF-8 without control characters (terminal) or valid JSON.
 */
#include "format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format-internal.h"
#include "sertrace/schema.h"

/* ---- buffer ------------------------------------------------------------ */

void sertrace_buf_free(sertrace_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->err = 0;
}

void sertrace_buf_clear(sertrace_buf *b)
{
    b->len = 0;
    b->err = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

/* Remember the first error (see sertrace_buf): -1. */
static int buf_fail(sertrace_buf *b)
{
    b->err = -1;
    return -1;
}

/* Back to `old` bytes after a failed line (the error stays): -1. */
static int buf_rollback(sertrace_buf *b, size_t old)
{
    b->len = old;
    if (b->data != NULL)
        b->data[old] = '\0';
    return -1;
}

/* Grow to hold `extra` more bytes plus the NUL (the slow path, out of
 * line so that the fast path below inlines into every appender). */
static __attribute__((noinline)) int buf_grow(sertrace_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    size_t cap;
    char *data;

    if (b->err)
        return -1;
    if (extra > (size_t)-1 / 2 - b->len)
        return buf_fail(b);
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    data = realloc(b->data, cap);
    if (data == NULL)
        return buf_fail(b);
    b->data = data;
    b->cap = cap;
    return 0;
}

/* Make room for `extra` more bytes plus the NUL: one comparison when the
 * buffer has room (the steady state of a reused buffer). */
static inline int buf_reserve(sertrace_buf *b, size_t extra)
{
    if (b->cap != 0 && extra < b->cap - b->len && !b->err)
        return 0;
    return buf_grow(b, extra);
}

int sertrace_buf_reserve(sertrace_buf *b, size_t extra)
{
    return buf_reserve(b, extra);
}

int sertrace_buf_append(sertrace_buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int sertrace_buf_appendf(sertrace_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    size_t room;

    if (buf_reserve(b, 64) != 0)
        return -1;
    room = b->cap - b->len;
    va_start(ap, fmt);
    n = vsnprintf(b->data + b->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->data[b->len] = '\0';
        return buf_fail(b);
    }
    if ((size_t)n >= room) {
        if (buf_reserve(b, (size_t)n) != 0) {
            b->data[b->len] = '\0';
            return -1;
        }
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}

static char *put_bars(char *p, uint32_t count);

/* `count` copies of the 3-byte "│". */
static int buf_append_bars(sertrace_buf *b, uint32_t count)
{
    if (buf_reserve(b, (size_t)count * 3) != 0)
        return -1;
    b->len = (size_t)(put_bars(b->data + b->len, count) - b->data);
    b->data[b->len] = '\0';
    return 0;
}

/* ---- tags -------------------------------------------------------------- */

const char *sertrace_tag_text(uint8_t tag, char tmp[8])
{
    switch (tag) {
#define TAG_CASE_(name, value, text, meaning, class_)                                              \
    case value:                                                                                    \
        return text;
        SERTRACE_TAGS(TAG_CASE_)
#undef TAG_CASE_
    default: {
        /* "K<n>", by hand: the summary asks for all 256 tags per run, and
         * snprintf was a seventh of a small payload's inspect() */
        char *p = tmp;
        *p++ = 'K';
        if (tag >= 100)
            *p++ = (char)('0' + tag / 100);
        if (tag >= 10)
            *p++ = (char)('0' + tag / 10 % 10);
        *p++ = (char)('0' + tag % 10);
        *p = '\0';
        return tmp;
    }
    }
}

int sertrace_tag_from_text(const char *text)
{
    static const struct {
        const char *text;
        int value;
    } table[] = {
#define TAG_ROW_(name, value, text, meaning, class_) {text, value},
        SERTRACE_TAGS(TAG_ROW_)
#undef TAG_ROW_
    };
    if (text == NULL)
        return -1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].text, text) == 0)
            return table[i].value;
    /* "K<n>" names a tag without text (the form sertrace_tag_text gives). */
    if (text[0] == 'K' && text[1] >= '0' && text[1] <= '9') {
        char *end;
        unsigned long v = strtoul(text + 1, &end, 10);
        char tmp[8];
        if (*end == '\0' && v <= 255 && text[1] != '0' &&
            strcmp(sertrace_tag_text((uint8_t)v, tmp), text) == 0)
            return (int)v;
    }
    return -1;
}

/* ---- sizes ------------------------------------------------------------- */

/* Write the size at `p` (room for SIZE_MAX_TEXT bytes); returns the end. */
char *sertrace_fmt_size_to(char *p, uint64_t bytes, bool exact)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned power = 0;
    uint64_t whole, rest;
    unsigned tenths;
    char tmp[24];
    size_t i = sizeof tmp;

    if (exact || bytes < 1024) {
        do {
            tmp[--i] = (char)('0' + bytes % 10);
            bytes /= 10;
        } while (bytes != 0);
        memcpy(p, tmp + i, sizeof tmp - i);
        p += sizeof tmp - i;
        *p++ = ' ';
        *p++ = 'B';
        return p;
    }
    while (power < 6 && (bytes >> (10 * (power + 1))) != 0)
        power++;
    whole = bytes >> (10 * power);
    rest = bytes - (whole << (10 * power));
    /* Truncated, never rounded up: a size never reads larger than it is. */
    tenths = (unsigned)(((unsigned __int128)rest * 10) >> (10 * power));
    do {
        tmp[--i] = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole != 0);
    memcpy(p, tmp + i, sizeof tmp - i);
    p += sizeof tmp - i;
    *p++ = '.';
    *p++ = (char)('0' + tenths);
    *p++ = ' ';
    memcpy(p, units[power], 3); /* "B\0" copies a harmless NUL */
    return p + (power == 0 ? 1 : 3);
}

int sertrace_fmt_size(sertrace_buf *b, uint64_t bytes, bool exact)
{
    char *p;

    if (buf_reserve(b, SIZE_MAX_TEXT) != 0)
        return -1;
    p = sertrace_fmt_size_to(b->data + b->len, bytes, exact);
    *p = '\0';
    b->len = (size_t)(p - b->data);
    return 0;
}

/* ---- UTF-8 ------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n), with its code point in
 * *cp, or 0 if s[0] does not start a valid sequence. */
static size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        v = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static int append_hex_escape(sertrace_buf *b, const char *prefix, unsigned v, int digits)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[8];
    size_t plen = strlen(prefix);

    memcpy(tmp, prefix, plen);
    for (int i = 0; i < digits; i++)
        tmp[plen + (size_t)i] = hex[(v >> (4 * (digits - 1 - i))) & 15];
    return sertrace_buf_append(b, tmp, plen + (size_t)digits);
}

/* Escape s[0..n) to out, which has room for 4 * n bytes; returns the end. */
static char *escape_to(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            /* a run of plain ASCII (most type names): one copy */
            size_t run = i + 1;
            while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '\\')
                run++;
            memcpy(out, s + i, run - i);
            out += run - i;
            i = run;
            continue;
        }
        if (c == '\\') {
            *out++ = '\\';
            *out++ = '\\';
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = utf8_sequence(p + i, n - i, &cp);
        if (len == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
            unsigned v = len == 0 ? c : cp; /* invalid byte, or the control's code point */
            *out++ = '\\';
            *out++ = 'x';
            *out++ = hex[v >> 4];
            *out++ = hex[v & 15];
            i += len == 0 ? 1 : len;
        } else {
            memcpy(out, s + i, len);
            out += len;
            i += len;
        }
    }
    return out;
}

int sertrace_fmt_escape(sertrace_buf *b, const char *s, size_t n)
{
    if (n > ((size_t)-1 / 8) ? buf_fail(b) : buf_reserve(b, 4 * n) != 0)
        return -1;
    b->len = (size_t)(escape_to(b->data + b->len, s, n) - b->data);
    b->data[b->len] = '\0';
    return 0;
}

int sertrace_fmt_json_string(sertrace_buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t old = b->len;
    size_t i = 0;

    if (sertrace_buf_append(b, "\"", 1) != 0)
        goto fail;
    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            if (sertrace_buf_append(b, s + i, run - i) != 0)
                goto fail;
            i = run;
            continue;
        }
        unsigned char c = p[i];
        int rc;
        size_t len = 1;
        if (c == '"')
            rc = sertrace_buf_append(b, "\\\"", 2);
        else if (c == '\\')
            rc = sertrace_buf_append(b, "\\\\", 2);
        else if (c == '\n')
            rc = sertrace_buf_append(b, "\\n", 2);
        else if (c == '\r')
            rc = sertrace_buf_append(b, "\\r", 2);
        else if (c == '\t')
            rc = sertrace_buf_append(b, "\\t", 2);
        else if (c == '\b')
            rc = sertrace_buf_append(b, "\\b", 2);
        else if (c == '\f')
            rc = sertrace_buf_append(b, "\\f", 2);
        else if (c < 0x20)
            rc = append_hex_escape(b, "\\u", c, 4);
        else {
            uint32_t cp;
            len = utf8_sequence(p + i, n - i, &cp);
            if (len == 0) {
                rc = sertrace_buf_append(b, "\xef\xbf\xbd", 3); /* U+FFFD */
                len = 1;
            } else {
                rc = sertrace_buf_append(b, s + i, len);
            }
        }
        if (rc != 0)
            goto fail;
        i += len;
    }
    if (sertrace_buf_append(b, "\"", 1) != 0)
        goto fail;
    return 0;
fail:
    return buf_rollback(b, old);
}

/* ---- lines ------------------------------------------------------------- */

static char *put_lit(char *p, const char *lit, size_t n)
{
    memcpy(p, lit, n);
    return p + n;
}

static char *put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    /* number of hex digits, then write them from the last one */
    unsigned n = v ? (unsigned)(67 - __builtin_clzll(v)) / 4 : 1;
    *p++ = '0';
    *p++ = 'x';
    for (unsigned i = n; i > 0; i--, v >>= 4)
        p[i - 1] = digits[v & 15];
    return p + n;
}

#define BARS4_ "\xe2\x94\x82\xe2\x94\x82\xe2\x94\x82\xe2\x94\x82"
#define BARS16_ BARS4_ BARS4_ BARS4_ BARS4_
/* 32 "│" in a row: the bars of a line up to depth 33 are one copy. */
static const char bars32[] = BARS16_ BARS16_;

static char *put_bars(char *p, uint32_t count)
{
    while (count > 32) {
        memcpy(p, bars32, sizeof bars32 - 1);
        p += sizeof bars32 - 1;
        count -= 32;
    }
    memcpy(p, bars32, (size_t)count * 3);
    return p + (size_t)count * 3;
}

/* Tag texts indexed by value, with their lengths (no strlen per line). */
static const struct {
    const char *text;
    uint8_t len;
} tag_table[256] = {
#define TAG_TABLE_(name, value, text, meaning, class_) [value] = {text, sizeof(text) - 1},
    SERTRACE_TAGS(TAG_TABLE_)
#undef TAG_TABLE_
};

static char *put_tag(char *p, uint8_t tag)
{
    if (tag_table[tag].text != NULL) {
        memcpy(p, tag_table[tag].text, tag_table[tag].len);
        return p + tag_table[tag].len;
    }
    char tmp[8];
    const char *t = sertrace_tag_text(tag, tmp);
    size_t n = strlen(t);
    memcpy(p, t, n);
    return p + n;
}

/* Longest repr for a name of `name_len` bytes. */
#define REPR_MAX(name_len) (4 * (name_len) + 64)

static inline char *put_repr_x(char *p, uint8_t tag, const char *name, size_t name_len,
                               uint64_t addr, uint64_t length, bool plain);

static char *put_repr(char *p, uint8_t tag, const char *name, size_t name_len, uint64_t addr,
                      uint64_t length)
{
    return put_repr_x(p, tag, name, name_len, addr, length, false);
}

/* `plain`: the name needs no escaping (sertrace_fmt_is_plain): copied. */
static inline char *put_repr_x(char *p, uint8_t tag, const char *name, size_t name_len,
                               uint64_t addr, uint64_t length, bool plain)
{
    if (name == NULL) {
        name = "?";
        name_len = 1;
    }
    /* which tags name classes, functions, references: schema.h's table */
    enum sertrace_tagclass tc = sertrace_tagclass_of(tag);
    if (tc == SERTRACE_TAGCLASS_CLASS) {
        p = put_lit(p, "<class '", 8);
        p = plain ? put_lit(p, name, name_len) : escape_to(p, name, name_len);
        p = put_lit(p, "'>", 2);
    } else if (tc == SERTRACE_TAGCLASS_FUNCTION) {
        p = put_lit(p, "<function ", 10);
        p = plain ? put_lit(p, name, name_len) : escape_to(p, name, name_len);
        p = put_lit(p, " at ", 4);
        p = put_hex(p, addr);
        *p++ = '>';
    } else if (tag == SERTRACE_TAG_MEMO && name_len > 6 && memcmp(name, "class ", 6) == 0) {
        /* A memo hit on a class: its type name is "class mod.Name"
         * (serializers/objdesc), read as a reference to that class. */
        p = put_lit(p, "<ref class '", 12);
        p = plain ? put_lit(p, name + 6, name_len - 6) : escape_to(p, name + 6, name_len - 6);
        p = put_lit(p, "'>", 2);
    } else if (tag == SERTRACE_TAG_MEMO && name_len > 9 && memcmp(name, "function ", 9) == 0) {
        /* ... and on a function: "function mod.name". */
        p = put_lit(p, "<ref function ", 14);
        p = plain ? put_lit(p, name + 9, name_len - 9) : escape_to(p, name + 9, name_len - 9);
        p = put_lit(p, " at ", 4);
        p = put_hex(p, addr);
        *p++ = '>';
    } else {
        *p++ = '<';
        if (tc == SERTRACE_TAGCLASS_REF)
            p = put_lit(p, "ref ", 4);
        p = plain ? put_lit(p, name, name_len) : escape_to(p, name, name_len);
        p = put_lit(p, " object at ", 11);
        p = put_hex(p, addr);
        *p++ = '>';
    }
    if (length != 0) {
        p = put_lit(p, " len=", 5);
        p = sertrace_fmt_u64_to(p, length - 1);
    }
    return p;
}

int sertrace_fmt_repr(sertrace_buf *b, uint8_t tag, const char *name, size_t name_len,
                      uint64_t addr, uint64_t length)
{
    if (name_len > ((size_t)-1 / 8) ? buf_fail(b) : buf_reserve(b, REPR_MAX(name_len)) != 0)
        return -1;
    b->len = (size_t)(put_repr(b->data + b->len, tag, name, name_len, addr, length) - b->data);
    b->data[b->len] = '\0';
    return 0;
}

/* One enter line; `plain`: the name needs no escaping (copied as is). */
static int fmt_enter(sertrace_buf *b, uint32_t depth, uint8_t tag, const char *name,
                     size_t name_len, uint64_t addr, uint64_t length, bool plain)
{
    char *p;

    if (name_len > ((size_t)-1 / 8) ||
        buf_reserve(b, (size_t)depth * 3 + 16 + REPR_MAX(name_len)) != 0)
        return -1;
    p = b->data + b->len;
    if (depth <= 1) {
        p = put_lit(p, "\xe2\x94\xac ", 4); /* "┬ " */
    } else {
        p = put_bars(p, depth - 2);
        p = put_lit(p, "\xe2\x94\x9c\xe2\x94\xac ", 7); /* "├┬ " */
    }
    p = put_tag(p, tag);
    p = put_lit(p, ": ", 2);
    p = put_repr_x(p, tag, name, name_len, addr, length, plain);
    *p++ = '\n';
    *p = '\0';
    b->len = (size_t)(p - b->data);
    return 0;
}

int sertrace_fmt_enter(sertrace_buf *b, uint32_t depth, uint8_t tag, const char *name,
                       size_t name_len, uint64_t addr, uint64_t length)
{
    return fmt_enter(b, depth, tag, name, name_len, addr, length, false);
}

bool sertrace_fmt_is_plain(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (s == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] >= 0x7f || p[i] == '\\')
            return false;
    return true;
}

int sertrace_fmt_enter_plain(sertrace_buf *b, uint32_t depth, uint8_t tag, const char *name,
                             size_t name_len, uint64_t addr, uint64_t length)
{
    return fmt_enter(b, depth, tag, name, name_len, addr, length, name != NULL);
}

const char *sertrace_fmt_bound_text(int bound)
{
    switch (bound) {
    case SERTRACE_FMT_LOWER:
        return "\xe2\x89\xa5 "; /* "≥ " */
    case SERTRACE_FMT_UPPER:
        return "\xe2\x89\xa4 "; /* "≤ " */
    case SERTRACE_FMT_UNKNOWN:
        return "? ";
    default:
        return "";
    }
}

int sertrace_fmt_exit(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes, bool exact,
                      const char *flags)
{
    return sertrace_fmt_exit_bound(b, depth, tag, bytes, exact, SERTRACE_FMT_EXACT, flags);
}

int sertrace_fmt_exit_bound(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes,
                            bool exact, int bound, const char *flags)
{
    size_t flags_len = flags != NULL ? strlen(flags) : 0;
    const char *bt = sertrace_fmt_bound_text(bound);
    char *p;

    if (buf_reserve(b, (size_t)depth * 3 + 64 + flags_len) != 0)
        return -1;
    p = b->data + b->len;
    p = put_bars(p, depth >= 1 ? depth - 1 : 0);
    p = put_lit(p, "\xe2\x94\x94 # ", 6); /* "└ # " */
    p = put_tag(p, tag);
    p = put_lit(p, " [", 2);
    p = put_lit(p, bt, strlen(bt));
    p = sertrace_fmt_size_to(p, bytes, exact); /* room reserved above */
    *p++ = ']';
    if (flags_len > 0) {
        p = put_lit(p, "  ", 2);
        p = put_lit(p, flags, flags_len);
    }
    *p++ = '\n';
    *p = '\0';
    b->len = (size_t)(p - b->data);
    return 0;
}

int sertrace_fmt_note(sertrace_buf *b, uint32_t depth, const char *key, size_t key_len,
                      const char *value, size_t value_len)
{
    size_t old = b->len;
    int rc;

    rc = buf_append_bars(b, depth) || sertrace_buf_append(b, " @ ", 3) ||
         sertrace_fmt_escape(b, key ? key : "", key ? key_len : 0) ||
         sertrace_buf_append(b, " = ", 3) ||
         sertrace_fmt_escape(b, value ? value : "", value ? value_len : 0) ||
         sertrace_buf_append(b, "\n", 1);
    return rc != 0 ? buf_rollback(b, old) : 0;
}

int sertrace_fmt_flag_line(sertrace_buf *b, uint32_t depth, const char *text, size_t text_len)
{
    size_t old = b->len;
    int rc;

    rc = buf_append_bars(b, depth) || sertrace_buf_append(b, " !! ", 4) ||
         sertrace_fmt_escape(b, text ? text : "", text ? text_len : 0) ||
         sertrace_buf_append(b, "\n", 1);
    return rc != 0 ? buf_rollback(b, old) : 0;
}

/* ---- size parsing ------------------------------------------------------ */

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

int sertrace_parse_size(const char *text, uint64_t *out)
{
    const char *p = text;
    unsigned __int128 whole = 0, frac = 0, frac_scale = 1, mult = 1, value;
    bool digits = false, has_frac = false;

    if (text == NULL || out == NULL)
        return -1;
    while (is_space(*p))
        p++;
    while (*p >= '0' && *p <= '9') {
        whole = whole * 10 + (unsigned)(*p - '0');
        if (whole > UINT64_MAX)
            return -1;
        digits = true;
        p++;
    }
    if (*p == '.') {
        p++;
        has_frac = true;
        bool frac_digits = false;
        while (*p >= '0' && *p <= '9') {
            if (frac_scale < 1000000000000000000ULL) {
                frac = frac * 10 + (unsigned)(*p - '0');
                frac_scale *= 10;
            }
            frac_digits = true;
            p++;
        }
        if (!frac_digits)
            return -1;
    }
    if (!digits)
        return -1;
    while (is_space(*p))
        p++;
    switch (lower(*p)) {
    case 'k':
        mult = (uint64_t)1 << 10;
        break;
    case 'm':
        mult = (uint64_t)1 << 20;
        break;
    case 'g':
        mult = (uint64_t)1 << 30;
        break;
    case 't':
        mult = (uint64_t)1 << 40;
        break;
    default:
        break;
    }
    if (mult != 1) {
        p++;
        if (lower(p[0]) == 'i' && lower(p[1]) == 'b')
            p += 2;
        else if (lower(p[0]) == 'b')
            p++;
    } else if (lower(*p) == 'b') {
        p++;
    }
    while (is_space(*p))
        p++;
    if (*p != '\0')
        return -1;
    /* A fraction of a byte means nothing: "1.5" alone is refused. */
    if (has_frac && mult == 1)
        return -1;
    value = whole * mult + frac * mult / frac_scale;
    if (value > UINT64_MAX)
        return -1;
    *out = (uint64_t)value;
    return 0;
}

int sertrace_parse_oversize(const char *text, uint64_t *bytes, double *percent)
{
    size_t n = text ? strlen(text) : 0;

    *bytes = 0;
    *percent = 0;
    if (n == 0)
        return SERTRACE_OVERSIZE_NOT_SIZE;
    if (text[n - 1] == '%') {
        char *end;
        double p = strtod(text, &end);
        if (end != text + n - 1 || !(p > 0) || p > 100)
            return SERTRACE_OVERSIZE_BAD_SHARE;
        *percent = p;
        return 0;
    }
    if (sertrace_parse_size(text, bytes) < 0)
        return SERTRACE_OVERSIZE_NOT_SIZE;
    return *bytes == 0 ? SERTRACE_OVERSIZE_ZERO : 0;
}

/* ---- flags: one wording for the live tree and the report ---------------- */

int sertrace_fmt_exit_flags(sertrace_buf *b, unsigned flags, uint64_t oversize, bool exact)
{
    static const struct {
        unsigned bit;
        const char *text;
    } words[] = {
        {SERTRACE_FMT_FLAG_NEVER_CLOSED, "?? never closed"},
        {SERTRACE_FMT_FLAG_OVERSIZED, NULL}, /* with its threshold */
        {SERTRACE_FMT_FLAG_UNFINISHED, "!! UNFINISHED"},
        {SERTRACE_FMT_FLAG_FAILED, "!! FAILED inside"},
        {SERTRACE_FMT_FLAG_UNSERIALIZABLE, "!! UNSERIALIZABLE"},
        {SERTRACE_FMT_FLAG_EXIT_LOST, "?? exit lost"},
        {SERTRACE_FMT_FLAG_ENTER_LOST, "?? enter lost"},
        {SERTRACE_FMT_FLAG_PARTIAL, "?? records lost inside"},
        {SERTRACE_FMT_FLAG_MALFORMED, "?? malformed positions"},
        {SERTRACE_FMT_FLAG_EXIT_UNSURE, "?? its exit may be a later node's"},
    };
    size_t start = b->len;
    bool first = true;
    int rc = 0;

    for (size_t i = 0; i < sizeof words / sizeof *words && rc == 0; i++) {
        if (!(flags & words[i].bit))
            continue;
        if (!first)
            rc = sertrace_buf_append(b, " ", 1);
        first = false;
        if (rc != 0)
            break;
        if (words[i].text != NULL) {
            rc = sertrace_buf_append(b, words[i].text, strlen(words[i].text));
        } else {
            static const char head[] = "!! OVERSIZED (\xe2\x89\xa5 ";
            rc = sertrace_buf_append(b, head, sizeof head - 1);
            if (rc == 0)
                rc = sertrace_fmt_size(b, oversize, exact);
            if (rc == 0)
                rc = sertrace_buf_append(b, ")", 1);
        }
    }
    if (rc != 0) {
        b->len = start;
        if (b->data != NULL)
            b->data[start] = '\0';
    }
    return rc;
}

int sertrace_fmt_unserializable(sertrace_buf *b, int tag, const char *name, size_t name_len,
                                const char *message, size_t message_len, const char *path,
                                size_t path_len)
{
    size_t start = b->len;
    char tmp[8];
    int rc = sertrace_buf_append(b, "UNSERIALIZABLE", 14);

    if (rc == 0 && tag >= 0)
        rc = sertrace_buf_appendf(b, " %s ", sertrace_tag_text((uint8_t)tag, tmp));
    if (rc == 0 && tag >= 0)
        rc = sertrace_buf_append(b, name ? name : "?", name ? name_len : 1);
    if (rc == 0 && message != NULL && message_len > 0) {
        rc = sertrace_buf_append(b, ": ", 2);
        if (rc == 0)
            rc = sertrace_buf_append(b, message, message_len);
    }
    if (rc == 0 && path != NULL && path_len > 0) {
        rc = sertrace_buf_append(b, " at ", 4);
        if (rc == 0)
            rc = sertrace_buf_append(b, path, path_len);
    }
    if (rc != 0) {
        b->len = start;
        if (b->data != NULL)
            b->data[start] = '\0';
    }
    return rc;
}
