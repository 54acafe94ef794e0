/* sertrace-tp.h -- the LTTng-UST binding of sertrace/schema.h.
 *
 * Declares the three LTTng events of provider "sertrace" (schema version 3).  Field meanings,
 * units and the record layout are documented once, in sertrace/schema.h
 * and tracepoints/README.md.  Included only by the runtime (runtime.c) and
 * the probe provider object (provider.c); serializers never see it.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER sertrace

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "sertrace-tp.h"

#if !defined(SERTRACE_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define SERTRACE_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

#include "sertrace/schema.h"

#define SERTRACE_STATUS_MAPPING_(name, value, label) \
    lttng_ust_field_enum_value(label, value)
LTTNG_UST_TRACEPOINT_ENUM(sertrace, status_enum,
    LTTNG_UST_TP_ENUM_VALUES(SERTRACE_STATUSES(SERTRACE_STATUS_MAPPING_)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_begin,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, const char *, serializer, int32_t, protocol,
                      int32_t, pid, int32_t, tid, const char *, scope),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_string(serializer, serializer)
        lttng_ust_field_integer(int32_t, protocol, protocol)
        lttng_ust_field_integer(int32_t, pid, pid)
        lttng_ust_field_integer(int32_t, tid, tid)
        lttng_ust_field_string(scope, scope)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, records,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint32_t, seq, const uint8_t *, buf, uint32_t, len,
                      int32_t, pid, int32_t, tid, const char *, scope),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint32_t, seq, seq)
        lttng_ust_field_sequence(uint8_t, records, buf, uint32_t, len)
        lttng_ust_field_integer(int32_t, pid, pid)
        lttng_ust_field_integer(int32_t, tid, tid)
        lttng_ust_field_string(scope, scope)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_end,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint64_t, bytes, uint8_t, status, uint32_t, batches,
                      int32_t, pid, int32_t, tid, const char *, scope, uint32_t, flags),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint64_t, bytes, bytes)
        lttng_ust_field_enum(sertrace, status_enum, uint8_t, status, status)
        lttng_ust_field_integer(uint32_t, batches, batches)
        lttng_ust_field_integer(int32_t, pid, pid)
        lttng_ust_field_integer(int32_t, tid, tid)
        lttng_ust_field_string(scope, scope)
        lttng_ust_field_integer(uint32_t, flags, flags)))

#endif /* SERTRACE_TP_H */

#include <lttng/tracepoint-event.h>
