/* losses.h -- what a dump lost, worded once (internal to analyzers/core).
 *
 * The summary ("  !! incomplete: ...", the JSON "incomplete" flag's
 * message) and the tree sink (the "!! INCOMPLETE: ..." of a dump's header)
 * describe a dump's losses with these words, in this order, so the two
 * outputs cannot drift apart again.
 */
#ifndef SERTRACE_LOSSES_H
#define SERTRACE_LOSSES_H

#include "core.h"
#include "format.h"

/* Append what `d` lost, "a; b; c" (nothing for a complete dump).  0 or -1
 * (out of memory; the buffer's error sticks, see format.h). */
int sertrace_dump_losses(sertrace_buf *b, const sertrace_dump_state *d);

#endif /* SERTRACE_LOSSES_H */
