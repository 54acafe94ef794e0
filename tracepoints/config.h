/* tracepoints/config.h -- libsertrace's process-wide settings (config.c),
 * read by the runtime (runtime.c).  Private to the library: not installed,
 * hidden like everything the library does not declare in sertrace.h.
 */
#ifndef SERTRACE_CONFIG_H
#define SERTRACE_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "sertrace/sertrace.h"
#include "runtime-internal.h"

/* Read the environment knobs (once per process) and initialise the
 * runtime's process state with them (sertrace_runtime_process_init()).
 * Every entry point calls it before it reads a setting. */
void sertrace_config_ensure(void);

/* runtime.c: the thread-pool key and the fork handler, set up once, from
 * sertrace_config_ensure(). */
void sertrace_runtime_process_init(void);

/* SERTRACE_GRANULARITY=all: atoms are nodes (SERTRACE_DUMP_ATOMS). */
extern atomic_bool sertrace_cfg_atoms;
/* SERTRACE_KEYS=all (schema.h, privacy of dict keys). */
extern atomic_bool sertrace_cfg_keys_all;
/* The depth cap of new dumps (SERTRACE_MAX_DEPTH unless a test lowered it). */
extern atomic_uint sertrace_cfg_max_depth;
/* $SERTRACE_SCOPE (at most SERTRACE_SCOPE_MAX bytes, "" when unset); every
 * event carries it (`sertrace record` filters on it). */
extern char sertrace_cfg_scope[];

/* Whether test hooks or an in-process listener are set: then every dump
 * records.  One or two atomic loads per dump begin. */
extern atomic_bool sertrace_cfg_hooks_on;
extern atomic_bool sertrace_cfg_listener_on;
static inline bool sertrace_config_hooked(void)
{
    return atomic_load_explicit(&sertrace_cfg_hooks_on, memory_order_acquire) ||
           atomic_load_explicit(&sertrace_cfg_listener_on, memory_order_acquire);
}

/* Copy the current hooks and listener (under their lock) into a dump,
 * which keeps them until it ends. */
void sertrace_config_copy_listeners(struct sertrace_internal_hooks *hooks,
                                    sertrace_listener *listener);

#endif /* SERTRACE_CONFIG_H */
