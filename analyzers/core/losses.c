/* losses.c -- the one table of a dump's losses (see losses.h).
 *
 * Two parts, in the order they are printed: what happened to the dump as a
 * whole (its end or its begin missing, from the dump's flags), then each
 * counter of core.h's "irregularities" with the words that follow its
 * count.  A row is data, not code: adding a counter to the core means
 * adding one row here, and both outputs show it.
 */
#include "losses.h"

#include <stddef.h>

/* A whole-dump loss: shown when the dump's flags, masked, equal `when`,
 * and (with `discarded` >= 0) when events that may be the dump's were
 * discarded (1) or not (0): may_have_lost_events(). */
static const struct {
    unsigned mask, when;
    int discarded;
    const char *text;
} whole_losses[] = {
    {SERTRACE_DUMPF_UNFINISHED, SERTRACE_DUMPF_UNFINISHED, 0,
     "unfinished (no dump_end: the process stopped inside it)"},
    {SERTRACE_DUMPF_UNFINISHED, SERTRACE_DUMPF_UNFINISHED, 1,
     "unfinished (no dump_end: the process stopped inside it, or its end was among the "
     "discarded events)"},
    {SERTRACE_DUMPF_END_LOST, SERTRACE_DUMPF_END_LOST, -1,
     "end lost (no dump_end: events were discarded, and a later dump of its thread began "
     "after its last event and ended)"},
    {SERTRACE_DUMPF_BEGIN, 0, -1, "dump_begin missing"},
};

/* A counted loss: "N TEXT" when the counter is not 0. */
static const struct {
    size_t offset; /* of a uint64_t in sertrace_dump_state */
    const char *text;
} counted_losses[] = {
    {offsetof(sertrace_dump_state, lost_batches), "records events lost"},
    {offsetof(sertrace_dump_state, discarded), "events discarded by the tracer while it was live"},
    {offsetof(sertrace_dump_state, malformed), "malformed batches (bad or unknown records)"},
    {offsetof(sertrace_dump_state, orphan_exits), "exits without an enter"},
    {offsetof(sertrace_dump_state, lost_exits), "exits lost"},
    {offsetof(sertrace_dump_state, lost_enters), "enters lost"},
    {offsetof(sertrace_dump_state, skipped_deep), "enters skipped (over 64 levels below the open "
                                                  "chain)"},
};

/* Whether the tracer discarded events that may be this dump's: while it
 * was live, or (an unfinished dump) anywhere in the trace. */
static int may_have_lost_events(const sertrace_dump_state *d)
{
    return d->discarded != 0 || (d->flags & SERTRACE_DUMPF_TRACE_DISCARDS) != 0;
}

int sertrace_dump_losses(sertrace_buf *b, const sertrace_dump_state *d)
{
    const char *sep = "";
    for (size_t i = 0; i < sizeof whole_losses / sizeof *whole_losses; i++) {
        if ((d->flags & whole_losses[i].mask) != whole_losses[i].when ||
            (whole_losses[i].discarded >= 0 &&
             may_have_lost_events(d) != whole_losses[i].discarded))
            continue;
        sertrace_buf_appendf(b, "%s%s", sep, whole_losses[i].text);
        sep = "; ";
    }
    for (size_t i = 0; i < sizeof counted_losses / sizeof *counted_losses; i++) {
        const uint64_t *count = (const uint64_t *)((const char *)d + counted_losses[i].offset);
        if (*count == 0)
            continue;
        sertrace_buf_appendf(b, "%s%llu %s", sep, (unsigned long long)*count,
                             counted_losses[i].text);
        sep = "; ";
    }
    /* an unfinished dump says why it has no node: it is not said twice */
    if (d->nodes == 0 && !(d->flags & SERTRACE_DUMPF_UNFINISHED))
        sertrace_buf_appendf(b, "%sno node recorded", sep);
    return sertrace_buf_error(b);
}

int sertrace_stream_losses(sertrace_buf *b, uint64_t discarded, uint64_t lost_batches)
{
    sertrace_buf_appendf(b,
                         "the tracer discarded %llu events; %llu records events missing by "
                         "sequence number: affected dumps are marked incomplete",
                         (unsigned long long)discarded, (unsigned long long)lost_batches);
    return sertrace_buf_error(b);
}
