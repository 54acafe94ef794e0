/* feed.h -- how the plugin hands decoded events to the tree core: inline,
 * or through a queue to a worker thread.
 *
 * A sink's time is babeltrace2's (decoding the trace, and two library
 * calls per byte of `records` to read it out) plus the core's (rebuilding
 * the tree, formatting, writing).  With a worker thread the second part
 * runs beside the first: the babeltrace2 thread only copies the events'
 * values and record bytes into a bounded queue (4 chunks of 256 KiB, so
 * memory stays flat), the worker runs the core on them in the same order.
 * The output is the same either way (tests/plugin runs both).
 *
 * All calls are from the babeltrace2 thread.  The feed_* calls return 0,
 * or -1 once the core has failed (out of memory, output not writable):
 * with a worker that is seen at the next call after the failure, and
 * always by feed_finish.
 */
#ifndef SERTRACE_PLUGIN_FEED_H
#define SERTRACE_PLUGIN_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

typedef struct feed feed;

/* The core (not owned) is only touched by the worker while one runs. */
feed *feed_create(sertrace_core *core, bool worker);
/* Stops the worker (what is queued is dropped) and frees. */
void feed_destroy(feed *f);
bool feed_has_worker(const feed *f);

int feed_dump_begin(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                    const char *serializer, size_t serializer_len, int32_t protocol);
/* Room for the `n` record bytes of a records event, to be filled by the
 * caller before the next feed call; NULL when out of memory or failed. */
uint8_t *feed_records_begin(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id,
                            uint32_t seq, size_t n);
/* Inline: runs the core on the bytes just written; queued: 0. */
int feed_records_end(feed *f);
int feed_dump_end(feed *f, int64_t pid, int64_t tid, int64_t ts, uint64_t dump_id, uint64_t bytes,
                  int status, int64_t batches, uint32_t end_flags);
int feed_discarded(feed *f, int64_t pid, uint64_t count);
/* End of a consume call: hand a partly filled chunk to the worker when
 * `now` (the upstream had nothing more: live mode caught up) or when it
 * has waited 50 ms, so a live viewer sees each dump promptly while a
 * trace read at full speed is handed over a whole chunk at a time. */
void feed_publish(feed *f, bool now);
/* Everything queued has been run through the core, the worker is joined;
 * returns -1 if the core failed at any point.  Then sertrace_core_finish
 * and the visitor's finish run on the caller's thread. */
int feed_finish(feed *f);

#endif /* SERTRACE_PLUGIN_FEED_H */
