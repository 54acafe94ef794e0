/* export_int.h -- what the export writers share (internal to
 * analyzers/core): one closed dump as the export visitor kept it, and the
 * writers' entry points.  export.c owns the visitor and the text formats
 * (folded, speedscope, Perfetto); export_html.c owns the page.
 *
 * A dump is handed to the writers as an array of xnode in pre-order
 * (a node's subtree follows it; depth says where it hangs).  The "dump
 * frame" -- the dump itself, whose own bytes are the serializer's header
 * and trailer -- is not a node: writers add it from xdump's totals.
 */
#ifndef SERTRACE_EXPORT_INT_H
#define SERTRACE_EXPORT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"
#include "format.h"

/* xnode.flags: the core's SERTRACE_NODE_* bits (10 of them), plus: */
#define XFLAG_OVERSIZED (1u << 12) /* bytes >= the oversize threshold */

typedef struct xnode {
    uint64_t bytes; /* as the core closed it (see bound) */
    uint64_t self;  /* bytes minus its children's, never below 0 */
    uint32_t type;  /* the dump's type index, 0 = none */
    uint32_t depth; /* 1 = a root */
    uint16_t flags;
    uint8_t tag;
    uint8_t bound;      /* enum sertrace_node_bound_kind */
    uint8_t label_kind; /* its edge label (schema v5), for the HTML "path" */
    bool in_state;      /* its parent is an instance's state */
    uint64_t label;
} xnode;

/* An ERROR record (message, path) or a NOTE (key, value) of a node. */
typedef struct xerror {
    uint32_t node; /* index into nodes, or UINT32_MAX (no node open / the dump) */
    uint32_t msg_off, msg_len, path_off, path_len; /* into the arena */
} xerror;

typedef struct xdump {
    const sertrace_dump_state *d; /* metadata and type names */
    const xnode *nodes;
    uint32_t n;
    const xerror *errors;
    uint32_t nerrors;
    const xerror *notes; /* msg = key, path = value */
    uint32_t nnotes;
    const char *arena;
    uint64_t index;     /* 0-based, in the order dumps closed */
    bool has_payload;   /* dump_end seen: payload = d->payload_bytes */
    uint64_t root_sum;  /* bytes of the depth-1 nodes */
    uint64_t dump_self; /* payload - root_sum (header/trailer), or 0 */
    uint64_t total;     /* root_sum + dump_self: what each format adds up to */
    uint32_t max_depth;
    uint64_t flagged;   /* nodes with a flag (any core flag or oversized) */
    const char *status; /* "ok", "error", "unknown" */
} xdump;

/* The name a node shows as a frame: its type's, else its tag text. */
const char *sertrace_export_frame_name(const xdump *x, const xnode *n, size_t *len, char tmp[8]);

/* The HTML writer (export_html.c).  `out` collects text to be written by
 * the caller.  0 or -1 (out of memory). */
typedef struct html_writer html_writer;
html_writer *sertrace_html_create(const char *title);
int sertrace_html_dump(html_writer *h, sertrace_buf *out, const xdump *x);
int sertrace_html_finish(html_writer *h, sertrace_buf *out, const sertrace_core_stats *stats);
void sertrace_html_destroy(html_writer *h);

/* JSON helpers shared by the writers. */
int sertrace_export_put_u64(sertrace_buf *b, uint64_t v);
int sertrace_export_put_i64(sertrace_buf *b, int64_t v);

#endif /* SERTRACE_EXPORT_INT_H */
