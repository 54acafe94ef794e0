/* lines.c -- fast enter and exit lines (see lines.h).
 *
 * Every line here is the one format.c's sertrace_fmt_enter / _exit would
 * write: the enter line's "TAG: <repr" head is rendered by
 * sertrace_fmt_repr with address 0 and no length (it ends in "0x0>"
 * exactly when the repr shows an address, a class repr ends in "'>"), so
 * the per-node work is the indentation, the hex digits, " len=N" and the
 * newline.  tests/format checks every tag, depth, name, address, length
 * and size against the formatter.
 *
 * Invariant (asserted in debug builds): a line never ends past the `n`
 * bytes its line_reserve() asked for, and the chunked copies' overrun
 * stays inside the SLACK that line_reserve() adds (the NUL too).
 */
#include "lines.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "format-internal.h"
#include "sertrace/schema.h"

#define BAR "\xe2\x94\x82" /* │ */
#define BARS4_ BAR BAR BAR BAR
/* Lines are copied in fixed-size chunks: a chunk may run up to CHUNK-1
 * bytes past the line's end, inside the SLACK every reservation adds, and
 * heads are padded to whole chunks. */
#define CHUNK 16
#define BARS_CHUNK 48 /* 16 bars: a whole number of bars and of 16-byte moves */
#define SLACK SERTRACE_LINES_SLACK

_Static_assert(SLACK >= BARS_CHUNK && SLACK >= CHUNK, "slack covers a chunk");

static const char bars_run[BARS_CHUNK + 1] = BARS4_ BARS4_ BARS4_ BARS4_;

/* "└ # TAG [" per tag value (len 0: a tag without text, whose lines the
 * formatter writes). */
static const struct {
    uint8_t len;
    char text[23];
} exit_heads[256] = {
#define EXIT_HEAD_(name, value, text, meaning, class_)                                             \
    [value] = {sizeof("\xe2\x94\x94 # " text " [") - 1, "\xe2\x94\x94 # " text " ["},
    SERTRACE_TAGS(EXIT_HEAD_)
#undef EXIT_HEAD_
};

/* "00" "01" ... "ff". */
#define HEX_ROW_(d)                                                                                \
    d "0" d "1" d "2" d "3" d "4" d "5" d "6" d "7" d "8" d "9" d "a" d "b" d "c" d "d" d "e" d "f"
static const char hex_pairs[513] = HEX_ROW_("0") HEX_ROW_("1") HEX_ROW_("2") HEX_ROW_("3")
    HEX_ROW_("4") HEX_ROW_("5") HEX_ROW_("6") HEX_ROW_("7") HEX_ROW_("8") HEX_ROW_("9")
        HEX_ROW_("a") HEX_ROW_("b") HEX_ROW_("c") HEX_ROW_("d") HEX_ROW_("e") HEX_ROW_("f");
#undef HEX_ROW_

/* Room for `n` more bytes plus SLACK; where to write, or NULL. */
static inline char *line_reserve(sertrace_buf *b, size_t n)
{
    if (b->cap != 0 && n + SLACK < b->cap - b->len)
        return b->data + b->len;
    if (n > (size_t)-1 / 4 || sertrace_buf_reserve(b, n + SLACK) != 0)
        return NULL;
    assert(b->cap - b->len > n + SLACK);
    return b->data + b->len;
}

/* End the line at `end`; `reserved` is what line_reserve() was asked for. */
static inline void line_commit(sertrace_buf *b, char *end, size_t reserved)
{
    assert(end >= b->data + b->len && (size_t)(end - (b->data + b->len)) <= reserved);
    (void)reserved;
    *end = '\0';
    b->len = (size_t)(end - b->data);
}

/* `count` bars (may write up to BARS_CHUNK-1 bytes past them). */
static inline char *put_bars(char *p, uint32_t count)
{
    char *end = p + (size_t)count * 3;
    for (; p < end; p += BARS_CHUNK)
        memcpy(p, bars_run, BARS_CHUNK);
    return end;
}

/* `n` bytes from `src`, readable up to a whole number of chunks (may
 * write up to CHUNK-1 bytes past them). */
static inline char *put_chunks(char *p, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i += CHUNK)
        memcpy(p + i, src + i, CHUNK);
    return p + n;
}

/* Lower-case hex digits of v (at least one), two at a time. */
static inline char *put_hex_digits(char *p, uint64_t v)
{
    int n = v ? (67 - __builtin_clzll(v)) / 4 : 1;
    char *q = p + n;
    while (v >= 0x100) {
        q -= 2;
        memcpy(q, hex_pairs + 2 * (v & 0xff), 2);
        v >>= 8;
    }
    if (v >= 0x10)
        memcpy(q - 2, hex_pairs + 2 * v, 2);
    else
        q[-1] = hex_pairs[2 * v + 1];
    return p + n;
}

/* Render the head of (tag, name) into c->heads_text; NULL when it cannot
 * be cached (no memory, or the heads of this dump passed 4 MiB). */
static const struct sertrace_line_head *head_render(sertrace_lines *c, struct sertrace_line_head *h,
                                                    uint8_t tag, const char *name, size_t name_len)
{
    static const char zeros[CHUNK];
    char tmp[8];
    const char *txt = sertrace_tag_text(tag, tmp);
    sertrace_buf *s = &c->scratch;
    size_t old = c->heads_text.len;

    sertrace_buf_clear(s);
    if (sertrace_buf_append(s, txt, strlen(txt)) != 0 || sertrace_buf_append(s, ": ", 2) != 0 ||
        sertrace_fmt_repr(s, tag, name, name_len, 0, 0) != 0)
        return NULL;
    bool addr = s->len >= 4 && memcmp(s->data + s->len - 4, "0x0>", 4) == 0;
    size_t len = addr ? s->len - 2 : s->len;
    if (old > (1u << 22) || sertrace_buf_append(&c->heads_text, s->data, len) != 0 ||
        sertrace_buf_append(&c->heads_text, zeros, (CHUNK - len % CHUNK) % CHUNK) != 0)
        return NULL;
    h->gen = c->gen;
    h->off = (uint32_t)old;
    h->len = (uint32_t)len;
    h->tag = tag;
    h->addr = addr;
    return h;
}

/* The cached head of (type, tag), rendered on first use; NULL when it
 * cannot be cached.  Two ways per type: a type is seen under its own tag
 * and as a back-reference (Mo) most of the time; a third tag replaces the
 * second way. */
static const struct sertrace_line_head *head_of(sertrace_lines *c, uint32_t type, uint8_t tag,
                                                const char *name, size_t name_len)
{
    if (type >= c->heads_types) {
        if (type >= (1u << 24)) /* no cache for absurd indexes */
            return NULL;
        uint32_t n = c->heads_types ? c->heads_types : 64;
        while (n <= type)
            n *= 2;
        struct sertrace_line_head *heads = realloc(c->heads, (size_t)n * 2 * sizeof *heads);
        if (heads == NULL)
            return NULL;
        memset(heads + (size_t)c->heads_types * 2, 0,
               (size_t)(n - c->heads_types) * 2 * sizeof *heads);
        c->heads = heads;
        c->heads_types = n;
    }
    struct sertrace_line_head *h = &c->heads[(size_t)type * 2];
    if (h[0].gen == c->gen && h[0].tag == tag)
        return &h[0];
    if (h[1].gen == c->gen && h[1].tag == tag)
        return &h[1];
    return head_render(c, h[0].gen != c->gen ? &h[0] : &h[1], tag, name, name_len);
}

void sertrace_lines_new_dump(sertrace_lines *c)
{
    if (++c->gen == 0) { /* wrapped: stale stamps could match, clear them */
        if (c->heads != NULL)
            memset(c->heads, 0, (size_t)c->heads_types * 2 * sizeof *c->heads);
        c->gen = 1;
    }
    sertrace_buf_clear(&c->heads_text);
}

void sertrace_lines_free(sertrace_lines *c)
{
    free(c->heads);
    c->heads = NULL;
    c->heads_types = 0;
    sertrace_buf_free(&c->heads_text);
    sertrace_buf_free(&c->scratch);
}

int sertrace_lines_enter(sertrace_lines *c, sertrace_buf *b, uint32_t depth, uint8_t tag,
                         uint32_t type, const char *name, size_t name_len, uint64_t addr,
                         uint64_t length)
{
    const struct sertrace_line_head *h =
        type != 0 && c->gen != 0 ? head_of(c, type, tag, name, name_len) : NULL;
    char *p;

    if (h == NULL) /* no type, or no memory for the cache: the formatter */
        return sertrace_fmt_enter(b, depth, tag, name, name_len, addr, length);
    /* bars 3*depth + "├┬ " 7 + head + 16 digits + ">" + " len=" 5 + 20 + "\n" */
    const size_t room = (size_t)depth * 3 + h->len + 64;
    p = line_reserve(b, room);
    if (p == NULL)
        return -1;
    if (depth <= 1) {
        memcpy(p, "\xe2\x94\xac ", 4); /* "┬ " */
        p += 4;
    } else {
        p = put_bars(p, depth - 2);
        memcpy(p, "\xe2\x94\x9c\xe2\x94\xac ", 7); /* "├┬ " */
        p += 7;
    }
    p = put_chunks(p, c->heads_text.data + h->off, h->len);
    if (h->addr) {
        p = put_hex_digits(p, addr);
        *p++ = '>';
    }
    if (length != 0) {
        memcpy(p, " len=", 5);
        p = sertrace_fmt_u64_to(p + 5, length - 1);
    }
    *p++ = '\n';
    line_commit(b, p, room);
    return 0;
}

int sertrace_lines_exit(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes, bool exact)
{
    char *p;

    if (exit_heads[tag].len == 0)
        return sertrace_fmt_exit(b, depth, tag, bytes, exact, NULL);
    /* bars 3*depth + "└ # TAG [" + size (at most SIZE_MAX_TEXT) + "]\n" */
    const size_t room = (size_t)depth * 3 + sizeof exit_heads[tag].text + SIZE_MAX_TEXT + 4;
    p = line_reserve(b, room);
    if (p == NULL)
        return -1;
    p = put_bars(p, depth >= 1 ? depth - 1 : 0);
    memcpy(p, exit_heads[tag].text, sizeof exit_heads[tag].text);
    p += exit_heads[tag].len;
    if (exact || bytes < 1024) {
        p = sertrace_fmt_u64_to(p, bytes);
        memcpy(p, " B]\n", 4);
        p += 4;
    } else {
        p = sertrace_fmt_size_to(p, bytes, exact);
        memcpy(p, "]\n", 2);
        p += 2;
    }
    line_commit(b, p, room);
    return 0;
}
