/* tracepoints/runtime-internal.h -- test and tool hooks of libsertrace.
 *
 * Not part of the public API (not installed).  The unit tests and the
 * benchmarks use these to see what the runtime records without an LTTng
 * session, and to configure the text probe without environment variables.
 * They are exported from libsertrace (prefix sertrace_internal_) so tests
 * link the very library users load.
 *
 * Thread-safety: call the setters while no dump is in progress.  The hooks
 * themselves are called from the thread that owns the dump; a hook shared
 * by several threads must lock.
 */
#ifndef SERTRACE_RUNTIME_INTERNAL_H
#define SERTRACE_RUNTIME_INTERNAL_H

#include <stdint.h>

#include "sertrace/sertrace.h"

struct sertrace_internal_hooks {
    /* Called where the sertrace:dump_begin / records / dump_end events are
     * emitted, with the same fields.  Any may be NULL. */
    void (*dump_begin)(void *ctx, uint64_t dump_id, const char *serializer, int32_t protocol);
    void (*records)(void *ctx, uint64_t dump_id, uint32_t seq, const uint8_t *buf, uint32_t len);
    void (*dump_end)(void *ctx, uint64_t dump_id, uint64_t bytes, uint8_t status);
    void *ctx;
};

/* Install (copied) or remove (NULL) the hooks.  While hooks are installed
 * every dump records, as if a session had enabled sertrace:* (the hooks
 * get what the events would carry), but sertrace_dump_flags() has
 * SERTRACE_DUMP_LTTNG only when an LTTng session really records. */
void sertrace_internal_set_hooks(const struct sertrace_internal_hooks *hooks);

/* Replace the configuration read from the environment (DISPATCH_TRACE,
 * SERTRACE_GRANULARITY, SERTRACE_OVERSIZE, SERTRACE_EXACT; NULL = unset).
 * Warnings go to `warn_fd`.  Returns the number of warnings. */
int sertrace_internal_configure(const char *dispatch_trace, const char *granularity,
                                const char *oversize, const char *exact, int warn_fd);

/* How a DISPATCH_TRACE value is read: 0 off, 1 stderr, 2 path, 3 invalid. */
int sertrace_internal_dispatch_trace_mode(const char *value);

/* Lower the depth cap (0 restores SERTRACE_MAX_DEPTH), for tests. */
void sertrace_internal_set_max_depth(uint32_t max_depth);

#endif /* SERTRACE_RUNTIME_INTERNAL_H */
