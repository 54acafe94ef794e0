/* schema_tp.h -- the test's OWN LTTng provider "sertrace", for gen_schema.c.
 *
 * Not sertrace-tp.h: it declares the sertrace events as a newer (or an
 * older, broken) schema might, to check what the analyzers do with events
 * and fields they do not know.  gen_schema never links libsertrace (two
 * providers of one name in one process clash).
 *
 *   SCHEMA_FUTURE   dump_begin with extra trailing fields, records with
 *                   an extra leading and trailing field, dump_end with an
 *                   extra field, and a new event sertrace:future_thing
 *                   whose fields reuse known names (dump_id, seq, records)
 *   SCHEMA_MISSING  dump_begin without `protocol`, dump_end without `bytes`
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER sertrace

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./schema_tp.h"

#if !defined(SCHEMA_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define SCHEMA_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_ENUM(sertrace, status_enum,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("ok", 0)
        lttng_ust_field_enum_value("error", 1)))

#if defined(SCHEMA_FUTURE)

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_begin,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, const char *, serializer, int32_t, protocol,
                      const char *, host, uint64_t, flags),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_string(serializer, serializer)
        lttng_ust_field_integer(int32_t, protocol, protocol)
        lttng_ust_field_string(host, host)
        lttng_ust_field_integer(uint64_t, flags, flags)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, records,
    LTTNG_UST_TP_ARGS(uint8_t, compression, uint64_t, dump_id, uint32_t, seq,
                      const uint8_t *, buf, uint32_t, len, uint32_t, checksum),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint8_t, compression, compression)
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint32_t, seq, seq)
        lttng_ust_field_sequence(uint8_t, records, buf, uint32_t, len)
        lttng_ust_field_integer_hex(uint32_t, checksum, checksum)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_end,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint64_t, bytes, uint8_t, status, uint64_t, duration_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint64_t, bytes, bytes)
        lttng_ust_field_enum(sertrace, status_enum, uint8_t, status, status)
        lttng_ust_field_integer(uint64_t, duration_ns, duration_ns)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, future_thing,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint32_t, seq, const uint8_t *, buf, uint32_t, len,
                      uint64_t, bytes),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint32_t, seq, seq)
        lttng_ust_field_sequence(uint8_t, records, buf, uint32_t, len)
        lttng_ust_field_integer(uint64_t, bytes, bytes)))

#elif defined(SCHEMA_MISSING)

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_begin,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, const char *, serializer),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_string(serializer, serializer)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, records,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint32_t, seq, const uint8_t *, buf, uint32_t, len),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_integer(uint32_t, seq, seq)
        lttng_ust_field_sequence(uint8_t, records, buf, uint32_t, len)))

LTTNG_UST_TRACEPOINT_EVENT(sertrace, dump_end,
    LTTNG_UST_TP_ARGS(uint64_t, dump_id, uint8_t, status),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, dump_id, dump_id)
        lttng_ust_field_enum(sertrace, status_enum, uint8_t, status, status)))

#else
#error "define SCHEMA_FUTURE or SCHEMA_MISSING"
#endif

#endif /* SCHEMA_TP_H */

#include <lttng/tracepoint-event.h>
