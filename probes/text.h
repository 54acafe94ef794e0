/* probes/text.h -- the live text probe (DISPATCH_TRACE), internal to libsertrace.
 *
 * The runtime (tracepoints/runtime.c) calls these functions for a dump that
 * has SERTRACE_DUMP_TEXT set; they append tree lines (the shared
 * formatter's grammar, format.h; enter and exit lines through a fast path
 * checked byte for byte against it by tests/runtime) to the dump's own
 * buffer and write it to the configured file descriptor in chunks of
 * whole lines, under one process-wide lock, when the buffer passes
 * SERTRACE_TEXT_FLUSH_BYTES (_STREAM when the output is not a regular
 * file; the newest line is kept for the next chunk) and at the end of the
 * dump (last lines and footer in one chunk).  Every chunk after a dump's
 * first begins with "# continued dump N pid P tid T".  So concurrent
 * dumps never interleave inside a line, every line can be attributed to
 * its dump, and there is no system call and no allocation per line in
 * steady state.  A failed write never fails the serializer: it turns the
 * text output off with one warning.  Nor does a stalled reader block it:
 * a stream output (FIFO, pipe, terminal, socket) is written without
 * blocking calls; when it is full, the probe waits (poll) while the reader
 * keeps taking text, and once it took nothing for SERTRACE_TEXT_STALL_MS,
 * what it cannot take is dropped and counted, and a line
 * "# sertrace: N bytes of trace text dropped: ..." precedes the next chunk
 * that goes out (probes/README.md, "Never blocking").
 *
 * Configuration (read once per process from the environment by the runtime,
 * or set by tests through sertrace_text_configure):
 *   DISPATCH_TRACE        off / stderr / a path (see sertrace_text_parse_mode)
 *   SERTRACE_GRANULARITY  containers (default) | all  (all: trace atoms too)
 *   SERTRACE_OVERSIZE     size at or above which a node is flagged OVERSIZED
 *                         (sertrace_parse_size syntax; default 1 MiB)
 *   SERTRACE_EXACT        1/true/on/yes: sizes in exact bytes
 * Bad values give one warning line each on the warning fd and fall back to
 * the default (for DISPATCH_TRACE: off).
 *
 * Symbols are hidden: they are part of libsertrace, not of its API.
 */
#ifndef SERTRACE_PROBES_TEXT_H
#define SERTRACE_PROBES_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"
#include "lines.h"

#define SERTRACE_TEXT_INTERNAL __attribute__((visibility("hidden")))

/* Buffer size at which a dump's text is written out mid-dump: one write()
 * per 256 KiB (ext4 here: 22 MB of text cost 10.8 ms of CPU in 16 KiB
 * writes, 6.4 ms in 64 KiB, 4.4 ms in 256 KiB, 3.6 ms in 1 MiB). */
#define SERTRACE_TEXT_FLUSH_BYTES (256u * 1024u)
/* The same for a terminal, pipe or socket (stderr mostly): a watcher sees
 * the tree of a long dump every 64 KiB (~1,000 lines), a pipe's capacity. */
#define SERTRACE_TEXT_FLUSH_BYTES_STREAM (64u * 1024u)
/* A stream output that is full is waited for as long as its reader takes
 * something at least every SERTRACE_TEXT_STALL_MS; a reader that takes
 * nothing for that long has stalled, and text is dropped (counted) until
 * it reads again.  2 s: a reader that keeps up (cat to a file on a loaded
 * 2-CPU machine, a terminal) never goes that long without reading, and a
 * stalled one costs the host at most that once per stall (probes/README.md,
 * "Never blocking"). */
#define SERTRACE_TEXT_STALL_MS 2000
#define SERTRACE_TEXT_DEFAULT_OVERSIZE ((uint64_t)1 << 20)

enum sertrace_text_mode {
    SERTRACE_TEXT_MODE_OFF,
    SERTRACE_TEXT_MODE_STDERR,
    SERTRACE_TEXT_MODE_PATH,
    SERTRACE_TEXT_MODE_INVALID,
};

/* Classify a DISPATCH_TRACE value (NULL = unset).  Words are matched
 * case-insensitively after trimming blanks:
 *   unset, "", "0", "false", "off", "no"          -> OFF
 *   "1", "true", "on", "yes", "stderr"            -> STDERR
 *   a number ("2", "-1", "1.5", "+3"): never a file name -> INVALID
 *   contains '/', or ends in ".EXT" (EXT = 1-8 letters/digits after a
 *   non-empty stem, e.g. "trace.txt")              -> PATH (the trimmed value)
 *   anything else ("maybe", "2", "trace")         -> INVALID (warn, off) */
SERTRACE_TEXT_INTERNAL enum sertrace_text_mode sertrace_text_parse_mode(const char *value);

/* Raw values of the knobs (NULL = unset). */
struct sertrace_text_settings {
    const char *dispatch_trace;
    const char *granularity;
    const char *oversize;
    const char *exact;
};

/* Process-wide configuration, as applied. */
struct sertrace_text_config {
    enum sertrace_text_mode mode; /* OFF, STDERR or PATH (INVALID -> OFF) */
    bool atoms;                   /* SERTRACE_GRANULARITY=all */
    bool exact;
    uint64_t oversize;
    size_t flush_bytes; /* SERTRACE_TEXT_FLUSH_BYTES for a regular file, else _STREAM */
};

/* Apply settings (closing a file opened by an earlier call).  Warnings
 * (one line each) go to `warn_fd`.  Returns the number of warnings. */
SERTRACE_TEXT_INTERNAL int sertrace_text_configure(const struct sertrace_text_settings *s,
                                                   int warn_fd);
SERTRACE_TEXT_INTERNAL void sertrace_text_get_config(struct sertrace_text_config *out);
/* True when the live tree is on and has not been disabled by a write error. */
SERTRACE_TEXT_INTERNAL bool sertrace_text_enabled(void);

/* Per-dump text state, embedded in the dump handle and reused (buffers
 * keep their capacity across dumps). */
struct sertrace_text_dump {
    sertrace_buf buf; /* whole lines of this dump not yet written */
    uint64_t oversize;
    size_t flush_bytes;
    bool exact;
    /* The open chain (tag, type index, whether an error was reported at
     * it) and the dump's type names by index, so that an error line names
     * the node that failed with its enter line's type, as the report does
     * (format.h, sertrace_fmt_unserializable); `flags` is the scratch of
     * flagged exit lines.  All keep their capacity across dumps. */
    struct sertrace_text_node {
        uint32_t type;
        uint8_t tag;
        bool error;
    } * stack;
    uint32_t stack_cap;
    uint32_t depth;
    struct sertrace_text_name {
        uint32_t gen; /* valid when == names_gen */
        uint32_t off, len;
    } * names;
    uint32_t names_cap;
    uint32_t names_gen;
    sertrace_buf name_text;
    sertrace_buf flags;
    /* "enter without exit" was reported at dump end: the nodes closed
     * then lost their exit (a misuse), they did not fail. */
    bool misuse_open;
    /* sertrace_dump_lower_bounds() was called: every size from then on,
     * and the footer's, is shown as a lower bound ("[≥ …]"). */
    bool lower;
    /* For the "# continued dump N pid P tid T" line that starts every
     * chunk after the first (probes/README.md). */
    uint64_t dump_id;
    long pid;
    long tid;
    uint32_t chunks;      /* chunks of this dump written so far */
    sertrace_lines lines; /* the fast enter/exit lines (format/lines.h) */
    sertrace_buf label;   /* the next enter line's label segment, or empty */
    uint64_t oob;         /* out-of-band bytes of the next exit line */
};

SERTRACE_TEXT_INTERNAL void sertrace_text_begin(struct sertrace_text_dump *t, uint64_t dump_id,
                                                const char *serializer, int protocol);
/* `type` is the dump's type index of `name` (0: none); the probe caches
 * the rendered start of the line per (type, tag) for the dump. */
SERTRACE_TEXT_INTERNAL void sertrace_text_enter(struct sertrace_text_dump *t, uint32_t depth,
                                                uint8_t tag, uint32_t type, const char *name,
                                                size_t name_len, uint64_t addr, uint64_t length);
/* The label of the next enter line (schema v5): shown after its repr,
 * two spaces apart ("├┬ D2: <dict object at 0x…> len=2  .cache").  `name`
 * is the label's text for KEY / ATTR labels; `in_state`: the parent is an
 * instance's state. */
SERTRACE_TEXT_INTERNAL void sertrace_text_label(struct sertrace_text_dump *t, uint8_t kind,
                                                uint64_t value, const char *name, size_t name_len,
                                                bool in_state);
/* The next exit line's node handed `bytes` out of band (schema v5):
 * "[1 B + 512.0 KiB out of band]". */
SERTRACE_TEXT_INTERNAL void sertrace_text_oob(struct sertrace_text_dump *t, uint64_t bytes);
/* `unfinished`: closed by dump end, not by an exit. */
SERTRACE_TEXT_INTERNAL void sertrace_text_exit(struct sertrace_text_dump *t, uint32_t depth,
                                               uint8_t tag, uint64_t bytes, bool unfinished);
/* A node without children (the ATOM record): exactly the lines of
 * sertrace_text_enter() followed by sertrace_text_exit(depth, tag, bytes,
 * false), so the live tree does not change with the record used. */
SERTRACE_TEXT_INTERNAL void sertrace_text_atom(struct sertrace_text_dump *t, uint32_t depth,
                                               uint8_t tag, uint32_t type, const char *name,
                                               size_t name_len, uint64_t addr, uint64_t length,
                                               uint64_t bytes);
SERTRACE_TEXT_INTERNAL void sertrace_text_note(struct sertrace_text_dump *t, uint32_t depth,
                                               const char *key, size_t key_len, const char *value,
                                               size_t value_len);
SERTRACE_TEXT_INTERNAL void sertrace_text_error(struct sertrace_text_dump *t, uint32_t depth,
                                                uint8_t tag, const char *name, size_t name_len,
                                                const char *message, size_t message_len,
                                                const char *path, size_t path_len);
SERTRACE_TEXT_INTERNAL void sertrace_text_misuse(struct sertrace_text_dump *t, uint32_t depth,
                                                 const char *what);
/* The dump's sizes are lower bounds (sertrace_dump_lower_bounds). */
SERTRACE_TEXT_INTERNAL void sertrace_text_lower_bounds(struct sertrace_text_dump *t);
/* Footer, then write everything out. */
SERTRACE_TEXT_INTERNAL void sertrace_text_end(struct sertrace_text_dump *t, uint64_t dump_id,
                                              uint64_t bytes, int status, uint32_t unfinished);
/* Write out what is buffered (also used before a nested dump starts). */
SERTRACE_TEXT_INTERNAL void sertrace_text_flush(struct sertrace_text_dump *t);
/* Forget what is buffered without writing it (a dump inherited by fork). */
SERTRACE_TEXT_INTERNAL void sertrace_text_drop(struct sertrace_text_dump *t);
/* Free the buffers of a dump's text state (handle destruction). */
SERTRACE_TEXT_INTERNAL void sertrace_text_free(struct sertrace_text_dump *t);

#endif /* SERTRACE_PROBES_TEXT_H */
