/* format.h -- the one tree-line formatter of sertrace.
 *
 * The live text tree (probes/text.c, DISPATCH_TRACE) and the analyzer sinks
 * (analyzers/plugin) print the same lines through these functions, so a
 * tree looks the same whether it was printed while the program ran or
 * rebuilt from a trace afterwards.
 *
 * Line grammar (dill's, so anyone who has read one reads ours):
 *   depth 1 enter :                 "┬ TAG: REPR"
 *   depth d enter : "│"*(d-2) +     "├┬ TAG: REPR"
 *   depth d exit  : "│"*(d-1) +     "└ # TAG [SIZE]" + FLAGS
 *   note at depth d (belongs to the node opened at depth d):
 *                   "│"*d + " " + "@ KEY = VALUE"   -- see sertrace_fmt_note
 * REPR is built from the type name and the address, never from user code:
 *   class tags (T4, T1, T2 ...)     <class 'NAME'>
 *   function tags (F2, F1 ...)      <function NAME at 0xADDR>
 *   Mo (back-reference)             <ref NAME object at 0xADDR>
 *   anything else                   <NAME object at 0xADDR>
 *   followed by " len=N" when the node has a length.
 * SIZE is human ("0 B" ... "1023 B", "1.0 KiB" ... "1023.9 KiB", "1.0 MiB",
 * ... up to EiB; one decimal, truncated not rounded, so a size never reads
 * larger than it is) or exact ("1234 B") when `exact` is set.
 * Every string that comes from a trace (type names, notes, messages, paths)
 * goes through sertrace_fmt_escape: the output is valid UTF-8 with no
 * control characters, whatever the input.
 *
 * All functions append to a sertrace_buf and return 0, or -1 when memory
 * ran out (the buffer is then unchanged up to its previous length, and
 * remembers the error: see sertrace_buf).
 * Not thread-safe per buffer; use one buffer per thread.
 */
#ifndef SERTRACE_FORMAT_H
#define SERTRACE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing string that remembers its first error, as SQLite's
 * sqlite3_str does: once an append fails (out of memory, or a size that
 * cannot be), `err` is set and every later append is a no-op returning -1.
 * A writer can therefore append a whole section without checking each
 * call and read the error once, at the end, with sertrace_buf_error(). */
typedef struct sertrace_buf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len;
    size_t cap;
    int err; /* 0, or -1 after the first failed append */
} sertrace_buf;

#define SERTRACE_BUF_INIT                                                                          \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

/* Frees the memory and forgets the error. */
void sertrace_buf_free(sertrace_buf *b);
/* Keeps capacity; forgets the error (a fresh start). */
void sertrace_buf_clear(sertrace_buf *b);
/* 0, or -1 when an append since the last clear failed. */
static inline int sertrace_buf_error(const sertrace_buf *b)
{
    return b->err;
}
int sertrace_buf_append(sertrace_buf *b, const char *s, size_t n);
/* Make room for `extra` more bytes (and the NUL): a buffer grown once to
 * its steady size never reallocates.  Returns 0, or -1 (out of memory). */
int sertrace_buf_reserve(sertrace_buf *b, size_t extra);
int sertrace_buf_appendf(sertrace_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Text tag of a SERTRACE_TAG_* value ("D2", "L" ...); unknown values give
 * "K<n>" written into `tmp` (at least 8 bytes), which is returned. */
const char *sertrace_tag_text(uint8_t tag, char tmp[8]);
/* Inverse lookup (exact text), or -1. */
int sertrace_tag_from_text(const char *text);

/* Human or exact size, without brackets: "1.9 KiB", "1234 B". */
int sertrace_fmt_size(sertrace_buf *b, uint64_t bytes, bool exact);

/* Append `n` bytes of `s` escaped for a terminal: valid UTF-8 sequences
 * are kept, except C0/C1 controls and DEL which become "\xNN"; invalid
 * bytes become "\xNN"; a backslash becomes "\\". */
int sertrace_fmt_escape(sertrace_buf *b, const char *s, size_t n);

/* Append `n` bytes of `s` as a JSON string literal (with quotes). Invalid
 * UTF-8 bytes become U+FFFD so the output is always valid JSON. */
int sertrace_fmt_json_string(sertrace_buf *b, const char *s, size_t n);

/* The repr described above. `name` may be NULL (shown as "?"). */
int sertrace_fmt_repr(sertrace_buf *b, uint8_t tag, const char *name, size_t name_len,
                      uint64_t addr, uint64_t length);

/* Whole enter line, with trailing newline. `depth` >= 1. */
int sertrace_fmt_enter(sertrace_buf *b, uint32_t depth, uint8_t tag, const char *name,
                       size_t name_len, uint64_t addr, uint64_t length);

/* sertrace_fmt_enter with a `name` that needs no escaping (the caller
 * checked sertrace_fmt_is_plain, e.g. once per type): same line. */
int sertrace_fmt_enter_plain(sertrace_buf *b, uint32_t depth, uint8_t tag, const char *name,
                             size_t name_len, uint64_t addr, uint64_t length);

/* True when sertrace_fmt_escape would copy `s` unchanged (printable ASCII,
 * no backslash). */
bool sertrace_fmt_is_plain(const char *s, size_t n);

/* Whole exit line, with trailing newline.  `flags` (may be NULL or "")
 * is appended after the size, separated by two spaces, e.g.
 * "!! OVERSIZED (≥ 1.0 MiB)" (built by sertrace_fmt_exit_flags). */
int sertrace_fmt_exit(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes, bool exact,
                      const char *flags);

/* How a size that is not exact is shown: "[≥ 1.2 KiB]" a lower bound,
 * "[≤ 1.2 KiB]" an upper bound, "[? 1.2 KiB]" neither. */
enum sertrace_fmt_bound {
    SERTRACE_FMT_EXACT = 0,
    SERTRACE_FMT_LOWER,
    SERTRACE_FMT_UPPER,
    SERTRACE_FMT_UNKNOWN,
};

/* The text put before an inexact size inside the brackets ("≥ ", "≤ ",
 * "? "), "" for SERTRACE_FMT_EXACT. */
const char *sertrace_fmt_bound_text(int bound);

/* sertrace_fmt_exit with the size's bound. */
int sertrace_fmt_exit_bound(sertrace_buf *b, uint32_t depth, uint8_t tag, uint64_t bytes,
                            bool exact, int bound, const char *flags);

/* The flags of an exit line, ONE wording for the live tree (probes/text.c)
 * and the report (analyzers/core/treeprint.c): the words of each set bit,
 * in this order, separated by one space.  `oversize` (the threshold, in
 * bytes) is shown with SERTRACE_FMT_FLAG_OVERSIZED: "!! OVERSIZED (≥ 1.0
 * MiB)".  Returns 0 or -1 (out of memory). */
#define SERTRACE_FMT_FLAG_NEVER_CLOSED 0x001u   /* "?? never closed" */
#define SERTRACE_FMT_FLAG_OVERSIZED 0x002u      /* "!! OVERSIZED (≥ T)" */
#define SERTRACE_FMT_FLAG_UNFINISHED 0x004u     /* "!! UNFINISHED": the process died in it */
#define SERTRACE_FMT_FLAG_FAILED 0x008u         /* "!! FAILED inside": the dump failed in it */
#define SERTRACE_FMT_FLAG_UNSERIALIZABLE 0x010u /* "!! UNSERIALIZABLE": this node failed */
#define SERTRACE_FMT_FLAG_EXIT_LOST 0x020u      /* "?? exit lost" */
#define SERTRACE_FMT_FLAG_ENTER_LOST 0x040u     /* "?? enter lost" */
#define SERTRACE_FMT_FLAG_PARTIAL 0x080u        /* "?? records lost inside" */
#define SERTRACE_FMT_FLAG_MALFORMED 0x100u      /* "?? malformed positions" */
#define SERTRACE_FMT_FLAG_EXIT_UNSURE 0x200u    /* "?? its exit may be a later node's" */
int sertrace_fmt_exit_flags(sertrace_buf *b, unsigned flags, uint64_t oversize, bool exact);

/* The text of the flag line of an object that could not be serialized, ONE
 * wording for the live tree and the report (sertrace_fmt_flag_line adds
 * "!! " and escapes it):
 *   "UNSERIALIZABLE TAG TYPE: MESSAGE at PATH"
 * TAG and TYPE are the node's the error belongs to (the node open at the
 * error's depth: its type name is the one of its enter line); `tag` < 0
 * when no node is open (then only ": MESSAGE at PATH" follow).  A NULL
 * `name` shows "?"; an empty message or path is left out with its
 * separator.  Returns 0 or -1. */
int sertrace_fmt_unserializable(sertrace_buf *b, int tag, const char *name, size_t name_len,
                                const char *message, size_t message_len, const char *path,
                                size_t path_len);

/* A note line for the node open at `depth`, with trailing newline. */
int sertrace_fmt_note(sertrace_buf *b, uint32_t depth, const char *key, size_t key_len,
                      const char *value, size_t value_len);

/* A flag line for the node open at `depth` (unserializable objects,
 * unfinished dumps), with trailing newline:  "│"*depth + " !! " + text.
 * `text` is escaped. */
int sertrace_fmt_flag_line(sertrace_buf *b, uint32_t depth, const char *text, size_t text_len);

/* Parse a size such as "1048576", "64K", "1.5MiB", "2 MB" (K/M/G/T, with or
 * without "iB"/"B", all binary multiples).  Returns 0 and sets *out, or -1
 * for anything else (negative, overflow, trailing junk). */
int sertrace_parse_size(const char *text, uint64_t *out);

/* Parse an oversize threshold, the ONE parser of `sertrace report
 * --oversize` and of the sinks' `oversize` parameter: a size as above
 * ("65536", "64K", "1.5MiB"; more than 0) sets *bytes, or a share of the
 * dump ("10%": more than 0, at most 100) sets *percent; the other is 0.
 * Returns 0, or what was wrong, so a caller can say it:
 *   SERTRACE_OVERSIZE_NOT_SIZE  neither a size nor a share
 *   SERTRACE_OVERSIZE_BAD_SHARE ends with "%" but is not a share in (0, 100]
 *   SERTRACE_OVERSIZE_ZERO      a size of 0 (it would flag every node) */
#define SERTRACE_OVERSIZE_NOT_SIZE (-1)
#define SERTRACE_OVERSIZE_BAD_SHARE (-2)
#define SERTRACE_OVERSIZE_ZERO (-3)
int sertrace_parse_oversize(const char *text, uint64_t *bytes, double *percent);

/* Edge labels (schema v5, "Edge labels"; labels.c): append the path
 * segment of a label -- "[3]", "['key']", ".attr", "[-3]", "[…]",
 * "(args)", "(reconstructor)", "{element}", "{key}".  `name` is the label's
 * text for KEY and ATTR labels (NULL: "?"), escaped.  `mode`: IN_STATE when
 * the parent node is an instance's state (a str key that is an identifier
 * then reads ".key"); PATH inside a whole path (the state's own segment is
 * empty; on a tree line it reads "(state)"); PATTERN for path patterns
 * (positions and keys read "[*]", attributes stay).  Returns 0 or -1. */
/* Add " + SIZE out of band" inside the size brackets of the exit line
 * that starts at `line_start` in `b` ("└ # PB [1 B]" becomes "└ # PB [1 B +
 * 512.0 KiB out of band]"; flags after it stay).  Returns 0 or -1. */
int sertrace_fmt_exit_oob(sertrace_buf *b, size_t line_start, uint64_t oob, bool exact);

#define SERTRACE_FMT_LABEL_IN_STATE 0x1u
#define SERTRACE_FMT_LABEL_PATH 0x2u
#define SERTRACE_FMT_LABEL_PATTERN 0x4u
int sertrace_fmt_label(sertrace_buf *b, uint8_t kind, uint64_t value, const char *name,
                       size_t name_len, unsigned mode);

#endif /* SERTRACE_FORMAT_H */
