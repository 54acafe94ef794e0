/* nodebuf.h -- the per-dump array of kept nodes that the tree printer
 * (treeprint.c) and the exports (export.c) fill from the core's node_enter
 * (internal to analyzers/core).
 *
 * Both keep every node of a dump, in pre-order, in an array of their own
 * node type, and remember its index in sertrace_node.user so node_exit
 * finds it again; both stop keeping at UINT32_MAX - 1 nodes (the index must
 * fit, and UINT64_MAX in .user says "not kept").  The growth, the overflow
 * rule and the fields every kept node copies from the core's node are
 * written here once; each caller adds the fields of its own.  A dump
 * buffer using it has the members `nodes` (T *), `n`, `cap` (uint32_t) and
 * `overflow` (bool), and calls SERTRACE_NODEBUF_KEEP(db, node).
 */
#ifndef SERTRACE_NODEBUF_H
#define SERTRACE_NODEBUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "grow.h"

/* Node `n` is a child of a state (its parent is the state dict or tuple
 * of an object): its label is the attribute's name. */
static inline bool sertrace_nodebuf_in_state(const sertrace_dump_state *d, const sertrace_node *n)
{
    return n->depth >= 2 && sertrace_node_is_state(&d->stack[n->depth - 2]);
}

/* SERTRACE_NODEBUF_KEEP's body.  `nodes_field` is the address of the dump
 * buffer's typed array pointer, read and written through memcpy (no type
 * punning); `size` its element size. */
static inline int sertrace_nodebuf_keep_(void *nodes_field, uint32_t *n, uint32_t *cap,
                                         bool *overflow, size_t size, sertrace_node *node)
{
    char *nodes;

    if (*n >= UINT32_MAX - 1) {
        *overflow = true;
        node->user = UINT64_MAX;
        return 0;
    }
    memcpy(&nodes, nodes_field, sizeof nodes);
    if (*n == *cap) {
        size_t c = *cap;
        char *a = sertrace_grow(nodes, &c, size, (size_t)*n + 1, 256);
        if (!a)
            return -1;
        nodes = a;
        memcpy(nodes_field, &nodes, sizeof nodes);
        *cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c; /* *n stays below UINT32_MAX - 1 */
    }
    memset(nodes + (size_t)*n * size, 0, size);
    node->user = (*n)++;
    return 1;
}

/* Keep node `node` as the next element of db->nodes, zeroed, its index in
 * node->user: 1 kept, 0 not kept (the dump has too many nodes: db->overflow
 * set, node->user = UINT64_MAX), -1 out of memory.  The caller then fills
 * db->nodes[node->user]. */
#define SERTRACE_NODEBUF_KEEP(db, node)                                                            \
    sertrace_nodebuf_keep_(&(db)->nodes, &(db)->n, &(db)->cap, &(db)->overflow,                    \
                           sizeof *(db)->nodes, (node))

/* The fields every kept node copies from the core's node `n` of dump `d`
 * (both node types name them alike): tag, type, depth, its label, and
 * whether it is a child of a state. */
#define SERTRACE_NODEBUF_COPY(dst, d, n)                                                           \
    ((dst)->tag = (n)->tag, (dst)->type = (n)->type, (dst)->depth = (n)->depth,                    \
     (dst)->label_kind = (n)->label_kind, (dst)->label = (n)->label,                               \
     (dst)->in_state = sertrace_nodebuf_in_state((d), (n)))

/* Fills visitor *v of `ctx` (the tree printer, an export) with the
 * caller's callbacks, named alike in both: v_dump_open, v_node_enter,
 * v_node_exit, v_note, v_error, v_dump_close; no dump_abort. */
#define SERTRACE_NODEBUF_VISITOR(v, ctx_)                                                          \
    (*(v) = (sertrace_core_visitor){.ctx = (ctx_),                                                 \
                                    .dump_open = v_dump_open,                                      \
                                    .node_enter = v_node_enter,                                    \
                                    .node_exit = v_node_exit,                                      \
                                    .note = v_note,                                                \
                                    .error = v_error,                                              \
                                    .dump_close = v_dump_close})

#endif /* SERTRACE_NODEBUF_H */
