/* summary.h -- per-dump and overall aggregates of sertrace trees.
 *
 * A core visitor (core.h) that keeps, per live dump, bytes by kind (256
 * tags) and by type (the dump's type indices), the top-N largest nodes
 * with a short ancestry, and flagged nodes (oversized, unserializable);
 * when a dump closes it prints the dump's section and folds the dump into
 * the overall totals (by kind, by type name, top-N).  Memory: per live
 * dump O(256 + types + N + max_flags), overall O(distinct type names + N):
 * nothing grows with the number of events or dumps.
 *
 * Output goes through `write` in chunks (64 KiB buffer).  Text output is
 * for people; JSON output is ONE object, versioned, documented in
 * analyzers/README.md ({"format": "sertrace-summary", "version": 1, ...}).
 * Every string from the trace is escaped (format.h).
 */
#ifndef SERTRACE_SUMMARY_H
#define SERTRACE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core.h"
#include "format.h" /* sertrace_buf */

typedef struct sertrace_summary_opts {
    bool json;
    bool exact;              /* sizes in bytes in the text output */
    unsigned top;            /* top-N largest nodes (default 10) */
    uint64_t oversize_bytes; /* 0: no byte threshold */
    double oversize_percent; /* 0: none; else share of the dump, 0-100 */
    unsigned max_flags;      /* flags kept per dump (default 1000) */
    bool per_dump;           /* print each dump's section (default true) */
    /* Path patterns (pathstats.h): per dump and overall, the `top` largest
     * (text: a "paths" section; JSON: a "paths" list in each dump and in
     * "totals").  Off by default (it formats one segment per node). */
    bool paths;
    /* Dumps read from a file of pickles (sertrace inspect): its name.  A
     * dump's header then names it and the dump's byte offset in it (the
     * sum of the payloads before) instead of a pid, tid and time, which a
     * file does not have; JSON adds "input" and "input_offset" to each
     * dump.  NULL (the default): dumps of a trace. */
    const char *input;
} sertrace_summary_opts;

#define SERTRACE_SUMMARY_OPTS_DEFAULT                                                              \
    {                                                                                              \
        false, false, 10, 0, 0.0, 1000, true, false, NULL                                          \
    }

/* Receives output; returns 0 or -1 (write error). */
typedef int (*sertrace_summary_write_fn)(void *ctx, const char *s, size_t n);

typedef struct sertrace_summary sertrace_summary;

/* NULL when out of memory.  `opts` is copied. */
sertrace_summary *sertrace_summary_create(const sertrace_summary_opts *opts,
                                          sertrace_summary_write_fn write, void *write_ctx);
/* The visitor to give sertrace_core_create(). */
void sertrace_summary_visitor(sertrace_summary *s, sertrace_core_visitor *v);
/* JSON only: the text of the top-level "filter" member (a JSON value:
 * an object saying which dumps were kept, or null), copied; written by
 * sertrace_summary_finish.  Without a call, "filter" is null.  0 or -1
 * (out of memory). */
int sertrace_summary_set_filter(sertrace_summary *s, const char *json, size_t len);
/* After sertrace_core_finish(): prints the totals (and closes the JSON
 * object), flushes.  `stats` may be NULL. */
int sertrace_summary_finish(sertrace_summary *s, const sertrace_core_stats *stats);
void sertrace_summary_destroy(sertrace_summary *s);
/* Back to the state of a summary just created with the same options and
 * write function, keeping its allocations (the recycled per-dump states,
 * tables, buffers): a summary made once and used for many small inputs
 * (sertrace.inspect) skips its setup.  Only with no dump live: after
 * sertrace_summary_finish() (which followed sertrace_core_finish()). */
void sertrace_summary_reset(sertrace_summary *s);

/* A fwrite-based write function; ctx is a FILE *. */
int sertrace_summary_write_file(void *ctx, const char *s, size_t n);
/* fflush(ctx), ctx a FILE *: 0 or -1. */
int sertrace_summary_flush_file(void *ctx);

/* sertrace_parse_oversize (the oversize parameter's parser): format.h. */

/* A JSON (or text) summary captured into memory, with the core that feeds
 * it (sertrace.inspect, sertrace.compare): begin, feed c->core, finish,
 * read c->out, release.  `error`, when not NULL, takes the visitor's
 * error callback (it may call c->sumv.error, the summary's own).  Returns
 * 0, or -1 out of memory (then release). */
typedef int (*sertrace_core_error_fn)(void *ctx, sertrace_dump_state *d, sertrace_node *n,
                                      uint8_t tag, uint32_t type, const char *message,
                                      size_t message_len, const char *path, size_t path_len);
typedef struct sertrace_summary_capture {
    sertrace_summary *sum;
    sertrace_core *core;
    sertrace_core_visitor sumv; /* the summary's own visitor */
    sertrace_buf out;           /* the summary's text */
} sertrace_summary_capture;

int sertrace_summary_capture_begin(sertrace_summary_capture *c, const sertrace_summary_opts *opts,
                                   sertrace_core_error_fn error);
/* sertrace_core_finish, sertrace_summary_finish: 0, or -1 (out of memory). */
int sertrace_summary_capture_finish(sertrace_summary_capture *c);
/* After a finish that returned 0: the capture as begin left it (the same
 * options), its allocations kept; 0, or -1 (a dump still live: release
 * it instead). */
int sertrace_summary_capture_reset(sertrace_summary_capture *c);
/* Frees the core, the summary and the text; `c` is zeroed. */
void sertrace_summary_capture_release(sertrace_summary_capture *c);

#endif /* SERTRACE_SUMMARY_H */
