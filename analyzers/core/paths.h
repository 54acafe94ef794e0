/* paths.h -- node labels and paths of a decoded dump (schema v5).
 *
 * A node's label (core.h: label_kind, label) says what it is to its
 * parent; its path is its root's short type name followed by the labels
 * of the chain down to it: `Session.cache['k1']`, `Session.users[3].avatar`.
 * The text of each segment is format/'s (sertrace_fmt_label), so the live
 * tree, the report's tree, the summary and the path patterns agree.
 * Nodes of a trace written before v5 have no labels: their path is the
 * root's name followed by "?" per unlabelled level.
 */
#ifndef SERTRACE_CORE_PATHS_H
#define SERTRACE_CORE_PATHS_H

#include "core.h"
#include "format.h"

/* Append the segment of `kind`/`value` (a node's label), `in_state` when
 * its parent is an instance's state.  `mode`: SERTRACE_FMT_LABEL_* (PATH,
 * PATTERN).  Returns 0 or -1. */
int sertrace_label_append(sertrace_buf *b, const sertrace_dump_state *d, uint8_t kind,
                          uint64_t value, bool in_state, unsigned mode);

/* Append segment `i` of a path (0: the root's short type name; else
 * chain[i]'s label, "/?" without one), chain[0 .. i] being the open
 * chain.  Returns 0 or -1. */
int sertrace_path_segment_append(sertrace_buf *b, const sertrace_dump_state *d,
                                 const sertrace_node *chain, uint32_t i, bool pattern);

/* Append the path of chain[depth - 1], whose ancestors are chain[0 ..
 * depth - 2] (a dump's open stack during node_exit: d->stack, n->depth).
 * `pattern`: positions and keys read "[*]" (path patterns).  Returns 0 or
 * -1. */
int sertrace_path_append(sertrace_buf *b, const sertrace_dump_state *d, const sertrace_node *chain,
                         uint32_t depth, bool pattern);

#endif /* SERTRACE_CORE_PATHS_H */
