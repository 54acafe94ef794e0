/* probes/provider.c -- the LTTng-UST probe provider of sertrace, linked
 * statically into libsertrace.
 *
 * Defining LTTNG_UST_TRACEPOINT_CREATE_PROBES and LTTNG_UST_TRACEPOINT_DEFINE
 * here and including the provider header (tracepoints/sertrace-tp.h) emits
 * the probe callbacks, the event descriptions and the tracepoint
 * definitions, and registers them with liblttng-ust from a constructor when
 * libsertrace is loaded.  So any program that loaded sertrace (linked the C
 * library or imported the Python package) can be traced by any session
 * that enables `sertrace:*`, with no LD_PRELOAD and no restart.  Why it is
 * static rather than a provider library loaded on demand, and what it
 * costs, is in probes/README.md.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "sertrace-tp.h"
