/* treeprint.h -- print each dump as dill's tree, from the tree core.
 *
 * A core visitor (core.h) that buffers the nodes of each live dump (one
 * compact record per node, in pre-order, plus its notes and errors) and,
 * when the dump closes, prints a header line and the tree through
 * format.h: "┬ TAG: REPR" for the root, "├┬" entries, "└ # TAG [SIZE]"
 * exits with inline flags.  Buffering is needed because a node's size is
 * known only at its exit while its line comes first; the memory is that
 * of ONE dump's nodes (~64 B each), released when the dump is printed.
 * Printing walks the buffer with an explicit stack, so depth is unlimited.
 *
 * Sizes that are not exact (lost records, unfinished dumps) print as
 * "[≥ SIZE]" and the dump's header says why.
 */
#ifndef SERTRACE_TREEPRINT_H
#define SERTRACE_TREEPRINT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "summary.h" /* sertrace_summary_write_fn */

typedef struct sertrace_treeprint_opts {
    uint64_t oversize_bytes;       /* 0: none */
    double oversize_percent;       /* 0: none; share of the dump's payload */
    uint32_t max_depth;            /* 0: unlimited; deeper nodes are folded */
    uint64_t min_size;             /* 0: none; smaller non-root nodes folded into
                                    * one "… N more, X" line per parent */
    bool exact;                    /* sizes in bytes */
    bool flush_each_dump;          /* hand the buffered text to `write` (then
                                    * call `flush`) after each dump's tree and
                                    * after the final line, instead of in 64 KiB
                                    * chunks: for live viewing */
    int (*flush)(void *write_ctx); /* optional, e.g. sertrace_summary_flush_file */
    const char *input;             /* NULL: dumps of processes (the header says
                                    * pid, tid, time); else the dumps are the
                                    * pickles of this input back to back (`sertrace
                                    * inspect`): the header names it and the
                                    * dump's byte offset in it */
} sertrace_treeprint_opts;

#define SERTRACE_TREEPRINT_OPTS_DEFAULT                                                            \
    {                                                                                              \
        0, 0.0, 0, 0, false, false, NULL, NULL                                                     \
    }

typedef struct sertrace_treeprint sertrace_treeprint;

sertrace_treeprint *sertrace_treeprint_create(const sertrace_treeprint_opts *opts,
                                              sertrace_summary_write_fn write, void *write_ctx);
void sertrace_treeprint_visitor(sertrace_treeprint *t, sertrace_core_visitor *v);
/* After sertrace_core_finish(): a last line about tracer losses, flush. */
int sertrace_treeprint_finish(sertrace_treeprint *t, const sertrace_core_stats *stats);
void sertrace_treeprint_destroy(sertrace_treeprint *t);

#endif /* SERTRACE_TREEPRINT_H */
