/* export.h -- pictures of the size trees: folded stacks, speedscope,
 * Chrome trace-event JSON (Perfetto) and a self-contained HTML page.
 *
 * A core visitor (core.h), like the tree printer: it keeps the nodes of
 * each live dump (one compact record per node, in pre-order: tag, type,
 * depth, bytes, self bytes, flags) and, when the dump closes, hands them
 * to every output that was added, then frees them.  So memory is that of
 * ONE dump's nodes (~40 B each) plus, across the run, the speedscope frame
 * table (distinct frame names) and the HTML page's dump index (~200 B per
 * dump).  Anything that feeds a core -- the babeltrace2 sink
 * `sink.sertrace.export` of `sertrace report`, or `sertrace inspect` on a
 * pickle file -- gets every format by giving this visitor to its core.
 *
 * Every output makes the bytes of a dump add up to its payload: the dump
 * itself is the outermost frame (its own bytes are the serializer's
 * header and trailer, payload minus the roots), each node weighs its self
 * bytes.  A dump without dump_end (unfinished, end lost) adds up to what
 * its roots cover.
 *
 * The formats (analyzers/README.md has the details):
 *   FOLDED      one line per node with self bytes > 0:
 *               "pickle dump 3 pid 4242;dispatch.State;dict;... 123"
 *   SPEEDSCOPE  {"$schema": ".../file-format-schema.json", ...}: one
 *               "evented" profile per dump, unit "bytes", frames shared
 *   PERFETTO    {"traceEvents": [...]}: one complete ("X") event per dump
 *               on its pid/tid track, args: serializer, payload bytes,
 *               status ...
 *   HTML        one page, no network fetch: per dump an icicle (canvas),
 *               hover, zoom, search, dump selector.  Its script and style
 *               are the files of analyzers/core/html/, embedded at build time.
 *
 * Strings from the trace are escaped for each format (JSON, folded
 * frames: no ';' or control bytes).  No object value is ever written.
 * Thread-safety: none; one per core.
 */
#ifndef SERTRACE_EXPORT_H
#define SERTRACE_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "summary.h" /* sertrace_summary_write_fn */

enum sertrace_export_format {
    SERTRACE_EXPORT_FOLDED = 0,
    SERTRACE_EXPORT_SPEEDSCOPE,
    SERTRACE_EXPORT_PERFETTO,
    SERTRACE_EXPORT_HTML,
    SERTRACE_EXPORT_NFORMATS,
};

typedef struct sertrace_export_opts {
    uint64_t oversize_bytes; /* 0: none; flag nodes at least this big */
    double oversize_percent; /* 0: none; share of the dump's payload */
    const char *title;       /* HTML title and speedscope name (copied);
                              * NULL: "sertrace" */
} sertrace_export_opts;

#define SERTRACE_EXPORT_OPTS_DEFAULT                                                               \
    {                                                                                              \
        0, 0.0, NULL                                                                               \
    }

typedef struct sertrace_export sertrace_export;

/* NULL when out of memory.  `opts` is copied. */
sertrace_export *sertrace_export_create(const sertrace_export_opts *opts);

/* Write `format` through `write` (e.g. sertrace_summary_write_file with a
 * FILE *).  At most one output per format; call before the first event.
 * 0, or -1 (format already added or unknown, out of memory). */
int sertrace_export_add_output(sertrace_export *x, enum sertrace_export_format format,
                               sertrace_summary_write_fn write, void *write_ctx);

/* The visitor to give sertrace_core_create(). */
void sertrace_export_visitor(sertrace_export *x, sertrace_core_visitor *v);

/* After sertrace_core_finish(): closes every document (the HTML page's
 * index and script, speedscope's frame table) and writes the rest.  0, or
 * -1 when a write failed or memory ran out (at any point of the run). */
int sertrace_export_finish(sertrace_export *x, const sertrace_core_stats *stats);

void sertrace_export_destroy(sertrace_export *x);

/* The name of a format as the CLI and the sink spell it ("folded",
 * "speedscope", "perfetto", "html"). */
const char *sertrace_export_format_name(enum sertrace_export_format format);

#endif /* SERTRACE_EXPORT_H */
