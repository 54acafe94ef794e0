/* pathstats.h -- path patterns: where the bytes go, by name (issue 13
 * item 4, `sertrace report --paths`).
 *
 * A node's pattern is its path (paths.h) with positions and dict keys
 * replaced by "[*]": every user's avatar, `Session.users[*].avatar`, is one
 * pattern.  Per pattern: `count` (nodes), `bytes` (including children),
 * `self_bytes`, and a share of the payload.
 *
 * Not double counted: an instance's state has no segment of its own
 * (`Session` and its state dict read the same), so it is no separate
 * match: it adds its self bytes to the pattern, never its count nor its
 * bytes (the instance's bytes already hold them).  Two other nodes with
 * one pattern can never nest (each other segment is one level deeper), so
 * a pattern's bytes count every byte at most once and its share
 * (bytes / payload) is at most 100%.  Patterns that extend another one
 * (`Session.users[*].avatar` inside `Session.users[*]`) are part of it, as
 * a profiler's inclusive time: bytes and shares of DIFFERENT patterns
 * overlap; self bytes never do (their sum over all patterns is the sum of
 * all nodes' self bytes).
 *
 * Memory: one entry per distinct pattern of a dump (and of the totals)
 * holding its last segment and its parent pattern (a pattern's whole text
 * is built only when written), plus one id per open level: a node costs
 * one segment and one lookup at any depth.  Only built when asked for.
 */
#ifndef SERTRACE_CORE_PATHSTATS_H
#define SERTRACE_CORE_PATHSTATS_H

#include "core.h"
#include "format.h"

typedef struct sertrace_pathstats sertrace_pathstats;

/* NULL when out of memory. */
sertrace_pathstats *sertrace_pathstats_create(void);
void sertrace_pathstats_destroy(sertrace_pathstats *p);
/* Forget every pattern (a new dump); keeps the memory. */
void sertrace_pathstats_reset(sertrace_pathstats *p);
/* A node opened / closed (core visitor order; n on d's stack).  0 or -1. */
int sertrace_pathstats_enter(sertrace_pathstats *p, const sertrace_dump_state *d,
                             const sertrace_node *n);
int sertrace_pathstats_exit(sertrace_pathstats *p, const sertrace_node *n);
/* Add every pattern of `src` to `dst` (the totals).  0 or -1. */
int sertrace_pathstats_merge(sertrace_pathstats *dst, const sertrace_pathstats *src);
/* Number of distinct patterns. */
size_t sertrace_pathstats_count(const sertrace_pathstats *p);
/* Append the `top` largest patterns by bytes (0: all), ties by pattern
 * text.  JSON: a list of {"pattern", "count", "bytes", "self_bytes",
 * "share", "exact"} ("share" = bytes / payload, 0 when payload is 0;
 * "exact": false when a node's size was a bound).  Text: one line per
 * pattern, indented by `indent` spaces, sizes as format.h's (exact bytes
 * with `exact`).  0 or -1. */
int sertrace_pathstats_write(const sertrace_pathstats *p, sertrace_buf *b, bool json, unsigned top,
                             uint64_t payload, bool exact, unsigned indent);

#endif /* SERTRACE_CORE_PATHSTATS_H */
