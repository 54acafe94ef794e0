/* tracepoints/config.c -- libsertrace's process-wide settings.
 *
 * What every dump of the process reads when it begins, and who else
 * listens, apart from the per-dump work of runtime.c:
 * - the environment knobs, read once per process (pthread_once, at the
 *   first dump or the first setter call): DISPATCH_TRACE,
 *   SERTRACE_GRANULARITY, SERTRACE_OVERSIZE and SERTRACE_EXACT go to the
 *   text probe (probes/text.c parses them), SERTRACE_KEYS (privacy of dict
 *   keys, schema.h) and SERTRACE_SCOPE (carried by every event) are kept
 *   here;
 * - the in-process listener (sertrace_set_listener(), sertrace.h) and the
 *   test hooks (runtime-internal.h), each set under one lock and announced
 *   by an atomic flag, so a dump begin pays one or two loads when none is
 *   set; a dump copies them under the lock and keeps its copy until it
 *   ends;
 * - the test setters that replace the knobs (sertrace_internal_configure)
 *   and lower the depth cap.
 */
#include <pthread.h>
#include <stdio.h> /* dprintf */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "text.h"

atomic_bool sertrace_cfg_atoms;
atomic_bool sertrace_cfg_keys_all;
atomic_uint sertrace_cfg_max_depth = SERTRACE_MAX_DEPTH;
char sertrace_cfg_scope[SERTRACE_SCOPE_MAX + 1];
atomic_bool sertrace_cfg_hooks_on;
atomic_bool sertrace_cfg_listener_on;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sertrace_internal_hooks hooks;
/* sertrace_set_listener() (under hooks_lock, like the hooks). */
static sertrace_listener listener;

static void config_from_env(void)
{
    struct sertrace_text_settings s = {
        getenv("DISPATCH_TRACE"),
        getenv("SERTRACE_GRANULARITY"),
        getenv("SERTRACE_OVERSIZE"),
        getenv("SERTRACE_EXACT"),
    };
    struct sertrace_text_config c;
    const char *sc = getenv(SERTRACE_SCOPE_ENV);

    if (sc != NULL) {
        size_t n = strlen(sc);
        if (n > SERTRACE_SCOPE_MAX)
            n = SERTRACE_SCOPE_MAX;
        memcpy(sertrace_cfg_scope, sc, n);
        sertrace_cfg_scope[n] = '\0';
    }
    const char *keys = getenv(SERTRACE_KEYS_ENV);
    if (keys != NULL && strcmp(keys, "all") == 0)
        atomic_store(&sertrace_cfg_keys_all, true);
    else if (keys != NULL && keys[0] != '\0' && strcmp(keys, "safe") != 0)
        dprintf(STDERR_FILENO,
                "sertrace: %s=%s not understood (use 'all' or 'safe'); dict keys follow the "
                "default rule\n",
                SERTRACE_KEYS_ENV, keys);
    sertrace_runtime_process_init();
    sertrace_text_configure(&s, STDERR_FILENO);
    sertrace_text_get_config(&c);
    atomic_store(&sertrace_cfg_atoms, c.atoms);
}

void sertrace_config_ensure(void)
{
    pthread_once(&config_once, config_from_env);
}

void sertrace_config_copy_listeners(struct sertrace_internal_hooks *h, sertrace_listener *l)
{
    pthread_mutex_lock(&hooks_lock);
    *h = hooks;
    *l = listener;
    pthread_mutex_unlock(&hooks_lock);
}

/* ---- the in-process listener (sertrace.h) ------------------------------ */

void sertrace_set_listener(const sertrace_listener *l)
{
    sertrace_config_ensure();
    pthread_mutex_lock(&hooks_lock);
    if (l != NULL)
        listener = *l;
    else
        memset(&listener, 0, sizeof listener);
    atomic_store_explicit(&sertrace_cfg_listener_on, l != NULL, memory_order_release);
    pthread_mutex_unlock(&hooks_lock);
}

/* ---- internal hooks (runtime-internal.h) ------------------------------- */

void sertrace_internal_set_hooks(const struct sertrace_internal_hooks *h)
{
    sertrace_config_ensure();
    pthread_mutex_lock(&hooks_lock);
    if (h != NULL)
        hooks = *h;
    else
        memset(&hooks, 0, sizeof hooks);
    atomic_store_explicit(&sertrace_cfg_hooks_on, h != NULL, memory_order_release);
    pthread_mutex_unlock(&hooks_lock);
}

int sertrace_internal_configure(const char *dispatch_trace, const char *granularity,
                                const char *oversize, const char *exact, int warn_fd)
{
    struct sertrace_text_settings s = {dispatch_trace, granularity, oversize, exact};
    struct sertrace_text_config c;
    int warnings;

    sertrace_config_ensure();
    warnings = sertrace_text_configure(&s, warn_fd);
    sertrace_text_get_config(&c);
    atomic_store(&sertrace_cfg_atoms, c.atoms);
    return warnings;
}

int sertrace_internal_dispatch_trace_mode(const char *value)
{
    return (int)sertrace_text_parse_mode(value);
}

void sertrace_internal_set_max_depth(uint32_t max_depth)
{
    atomic_store(&sertrace_cfg_max_depth,
                 max_depth == 0 || max_depth > SERTRACE_MAX_DEPTH ? SERTRACE_MAX_DEPTH : max_depth);
}
