/* tracepoints/provider.c -- the LTTng-UST probe provider of sertrace, linked
 * statically into libsertrace.
 *
 * Defining LTTNG_UST_TRACEPOINT_CREATE_PROBES and LTTNG_UST_TRACEPOINT_DEFINE
 * here and including the provider header (sertrace-tp.h, beside it) emits
 * the probe callbacks, the event descriptions and the tracepoint
 * definitions, and registers them with liblttng-ust from a constructor when
 * libsertrace is loaded.  So any program that loaded sertrace (linked the C
 * library or imported the Python package) can be traced by any session
 * that enables `sertrace:*`, with no LD_PRELOAD and no restart.  Why it is
 * static rather than a provider library loaded on demand, and what it
 * costs, is in tracepoints/README.md.  It lives here, with the tracepoint
 * definition it instantiates, so that probes/ (the text probe) never
 * includes tracepoints/: the runtime uses the text probe, not the reverse.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "sertrace-tp.h"
