/* foreign_tp.h -- the LTTng-UST provider of tests/cli/foreign.c: another
 * tool's events (provider `sertrace_test_foreign`, not `sertrace`), to
 * record a real trace that holds no sertrace event. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER sertrace_test_foreign
#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./foreign_tp.h"

#if !defined(FOREIGN_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define FOREIGN_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(sertrace_test_foreign, tick,
    LTTNG_UST_TP_ARGS(uint64_t, n),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, n, n)))

#endif

#include <lttng/tracepoint-event.h>
