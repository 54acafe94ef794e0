/* losses.h -- what a dump lost, worded once (internal to analyzers/core).
 *
 * The summary ("  !! incomplete: ...", the JSON "incomplete" flag's
 * message) and the tree sink (the "!! INCOMPLETE: ..." of a dump's header)
 * describe a dump's losses with these words, in this order, so the two
 * outputs cannot drift apart again; likewise the line that ends both
 * outputs when the tracer lost events.
 */
#ifndef SERTRACE_LOSSES_H
#define SERTRACE_LOSSES_H

#include "core.h"
#include "format.h"

/* Append what `d` lost, "a; b; c" (nothing for a complete dump).  0 or -1
 * (out of memory; the buffer's error sticks, see format.h). */
int sertrace_dump_losses(sertrace_buf *b, const sertrace_dump_state *d);

/* Append what the whole stream lost (the end of both outputs): "the
 * tracer discarded N events; M records events missing by sequence number:
 * affected dumps are marked incomplete".  0 or -1 (as above). */
int sertrace_stream_losses(sertrace_buf *b, uint64_t discarded, uint64_t lost_batches);

#endif /* SERTRACE_LOSSES_H */
