/* lines.h -- the fast path of the tree-line formatter: enter and exit lines.
 *
 * A dump's tree is almost only enter and exit lines, and the same few
 * (type, tag) pairs come back thousands of times, so these functions give
 * the line sertrace_fmt_enter / sertrace_fmt_exit give (byte for byte,
 * tested in tests/format) at a fraction of the cost:
 *   - the "TAG: <repr" start of an enter line is rendered once per (type,
 *     tag) of a dump by sertrace_fmt_repr itself (so its escaping and
 *     grammar stay format.c's) and then copied;
 *   - indentation comes from a static run of "│" and heads are copied in
 *     fixed-size chunks (a few vector moves, where a variable-length
 *     memcpy of a line's size compiles to `rep movsb`);
 *   - the only pieces written here are the indentation, the hex address,
 *     " len=N", a size and the brackets.
 * Both the live text probe (probes/text.c) and the tree sink
 * (analyzers/core/treeprint.c) print through it.
 *
 * A chunked copy may write up to SERTRACE_LINES_SLACK bytes past the end
 * of the line inside the buffer's reserved room; the buffer's length and
 * NUL terminator are always exact.
 */
#ifndef SERTRACE_FORMAT_LINES_H
#define SERTRACE_FORMAT_LINES_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"

#define SERTRACE_LINES_SLACK 64

struct sertrace_line_head {
    uint32_t gen; /* valid for the dump of this generation */
    uint32_t off; /* into sertrace_lines.heads_text */
    uint32_t len;
    uint8_t tag;
    bool addr; /* the repr shows an address: append hex digits and ">" */
};

/* Per-dump cache of enter-line heads, keyed by the dump's type index and
 * the tag.  Zero-initialise (SERTRACE_LINES_INIT); one per thread. */
typedef struct sertrace_lines {
    uint32_t gen;                     /* dump generation of the cache */
    struct sertrace_line_head *heads; /* 2 ways per type index */
    uint32_t heads_types;             /* type indexes the array covers */
    sertrace_buf heads_text;
    sertrace_buf scratch;
} sertrace_lines;

#define SERTRACE_LINES_INIT                                                                        \
    {                                                                                              \
        0, NULL, 0, SERTRACE_BUF_INIT, SERTRACE_BUF_INIT                                           \
    }

/* A new dump: its type indexes name other types, the cached heads go. */
void sertrace_lines_new_dump(sertrace_lines *c);
void sertrace_lines_free(sertrace_lines *c);

/* The line sertrace_fmt_enter(b, depth, tag, name, name_len, addr, length)
 * gives.  `type` is the dump's index of the type whose name is `name`
 * (the same name every time within a dump); 0 means "no index": the line
 * is then built by sertrace_fmt_enter.  Returns 0, or -1 when out of
 * memory (the buffer is unchanged). */
int sertrace_lines_enter(sertrace_lines *c, sertrace_buf *b, uint32_t depth, uint8_t tag,
                         uint32_t type, const char *name, size_t name_len, uint64_t addr,
                         uint64_t length);

/* The line sertrace_fmt_exit(b, depth, tag, bytes, exact, NULL) gives (no
 * flags).  Returns 0 or -1 (out of memory, buffer unchanged). */
int sertrace_lines_exit(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes, bool exact);

#endif /* SERTRACE_FORMAT_LINES_H */
