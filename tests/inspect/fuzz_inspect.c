/* fuzz_inspect.c -- libFuzzer target for the pickle emulator (inspect/).
 *
 * Each input is handed to sertrace_inspect_run() exactly as `sertrace
 * inspect` would, with the tree core and one of its sinks behind it (by
 * input length: the tree printer, the summary in JSON, or the export
 * visitor with all four formats), their output thrown away: a crash, a leak,
 * undefined behaviour or a read outside the input anywhere on that path is
 * a finding.  The memory limit is small (64 MiB) so that a hostile input
 * reaches it rather than the fuzzer's RSS limit; the result status itself
 * is not checked (malformed input is expected), only that it is one of the
 * documented ones and that a reason is given when it is not OK.  A third
 * of the inputs are also inspected twice more, with and without the atoms'
 * loop (`differential`): their JSON summaries, statuses and reasons must be
 * the same byte for byte.
 *
 * Built and run by tests/inspect/fuzz.sh (clang -fsanitize=fuzzer,address,
 * undefined), which meson runs as the test `inspect-fuzz` (suite 'fuzz')
 * and hands the sources of the libraries behind it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "core.h"
#include "export.h"
#include "inspect.h"
#include "summary.h"
#include "treeprint.h"

static int discard(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    (void)s;
    (void)n;
    return 0;
}

/* `sink`: 0 the tree printer, 1 the JSON summary, 2 the four exports. */
static void run(const uint8_t *data, size_t size, int sink)
{
    sertrace_core_visitor v;
    sertrace_summary *sum = NULL;
    sertrace_treeprint *tp = NULL;
    sertrace_export *xp = NULL;
    sertrace_core *core;
    /* half the inputs streamed from the first node on (the summary can
     * abort a dump: a wrapped root is read again) */
    sertrace_inspect_limits lim = {64u << 20, 100000, false, (size & 16) ? 1u : 0u};
    sertrace_inspect_result res;

    if (sink == 2) {
        sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
        o.oversize_percent = 10.0;
        xp = sertrace_export_create(&o);
        if (!xp)
            return;
        for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
            if (sertrace_export_add_output(xp, (enum sertrace_export_format)f, discard, NULL) < 0)
                abort();
        sertrace_export_visitor(xp, &v);
    } else if (sink == 0) {
        sertrace_treeprint_opts o = SERTRACE_TREEPRINT_OPTS_DEFAULT;
        o.max_depth = 50;
        tp = sertrace_treeprint_create(&o, discard, NULL);
        if (!tp)
            return;
        sertrace_treeprint_visitor(tp, &v);
    } else {
        sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
        o.json = true;
        o.oversize_percent = 10.0;
        sum = sertrace_summary_create(&o, discard, NULL);
        if (!sum)
            return;
        sertrace_summary_visitor(sum, &v);
    }
    core = sertrace_core_create(&v);
    if (core) {
        /* every other input also goes through the audit (its observer,
         * nested pickles, the three writers) */
        sertrace_audit *audit = (size & 2) ? sertrace_audit_create() : NULL;
        sertrace_inspect_observer obs;
        int rc;
        if (audit) {
            sertrace_audit_observer(audit, &obs);
            rc = sertrace_inspect_run_observed(data, size, &lim, core, &obs, size & 4, &res);
            FILE *null = fopen("/dev/null", "w");
            if (null) {
                for (int f = SERTRACE_AUDIT_TEXT; f <= SERTRACE_AUDIT_SARIF; f++)
                    (void)sertrace_audit_write(audit, null, f, "fuzz", &res);
                fclose(null);
            }
            (void)sertrace_audit_verdict(audit, &res);
            sertrace_audit_destroy(audit);
        } else {
            rc = sertrace_inspect_run(data, size, &lim, core, &res);
        }
        if (rc < SERTRACE_INSPECT_OK || rc > SERTRACE_INSPECT_FAILED)
            abort();
        if (rc != SERTRACE_INSPECT_OK && res.reason[0] == '\0')
            abort();
        (void)sertrace_core_finish(core);
        if (tp)
            (void)sertrace_treeprint_finish(tp, sertrace_core_get_stats(core));
        else if (xp)
            (void)sertrace_export_finish(xp, sertrace_core_get_stats(core));
        else
            (void)sertrace_summary_finish(sum, sertrace_core_get_stats(core));
        sertrace_core_destroy(core);
    }
    if (tp)
        sertrace_treeprint_destroy(tp);
    if (sum)
        sertrace_summary_destroy(sum);
    if (xp)
        sertrace_export_destroy(xp);
}

/* The differential check of the atoms' loop (inspect/emulator.c run_atoms):
 * the JSON summary, the status and the reason, once as run and once with
 * SERTRACE_INSPECT_NO_FAST=1 (the general loop alone), streamed from the
 * first node on for half the inputs (SERTRACE_INSPECT_STREAM_NODES=1,
 * read with the limits' stream_nodes at 0), and for those also never
 * streamed: any difference is a finding. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static int keep(void *ctx, const char *s, size_t n)
{
    text *t = ctx;
    if (t->n + n > t->cap) {
        size_t cap = (t->n + n) * 2;
        char *p = realloc(t->p, cap);
        if (!p)
            abort();
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    return 0;
}

static void summary_of(const uint8_t *data, size_t size, text *out)
{
    sertrace_core_visitor v;
    sertrace_summary_opts o = SERTRACE_SUMMARY_OPTS_DEFAULT;
    sertrace_inspect_limits lim = {64u << 20, 100000, false, 0};
    sertrace_inspect_result res;
    sertrace_summary *sum;
    sertrace_core *core;
    int rc;
    o.json = true;
    o.paths = true;
    o.oversize_percent = 10.0;
    sum = sertrace_summary_create(&o, keep, out);
    if (!sum)
        abort();
    sertrace_summary_visitor(sum, &v);
    core = sertrace_core_create(&v);
    if (!core)
        abort();
    rc = sertrace_inspect_run(data, size, &lim, core, &res);
    (void)sertrace_core_finish(core);
    (void)sertrace_summary_finish(sum, sertrace_core_get_stats(core));
    sertrace_core_destroy(core);
    sertrace_summary_destroy(sum);
    keep(out, (const char *)&rc, sizeof rc);
    if (rc != SERTRACE_INSPECT_OK)
        keep(out, res.reason, strlen(res.reason));
}

static void differential(const uint8_t *data, size_t size)
{
    text fast = {0}, slow = {0};
    if (size & 16)
        setenv("SERTRACE_INSPECT_STREAM_NODES", "1", 1);
    else
        unsetenv("SERTRACE_INSPECT_STREAM_NODES");
    unsetenv("SERTRACE_INSPECT_NO_FAST");
    summary_of(data, size, &fast);
    setenv("SERTRACE_INSPECT_NO_FAST", "1", 1);
    summary_of(data, size, &slow);
    unsetenv("SERTRACE_INSPECT_NO_FAST");
    unsetenv("SERTRACE_INSPECT_STREAM_NODES");
    if (fast.n != slow.n || (fast.n && memcmp(fast.p, slow.p, fast.n) != 0))
        abort();     /* run_atoms and the general loop disagree */
    if (size & 16) { /* streamed at every batch against never streamed */
        text whole = {0};
        setenv("SERTRACE_INSPECT_STREAM_NODES", "4294967295", 1);
        summary_of(data, size, &whole);
        unsetenv("SERTRACE_INSPECT_STREAM_NODES");
        if (fast.n != whole.n || (fast.n && memcmp(fast.p, whole.p, fast.n) != 0))
            abort(); /* streaming (its chain, tuple and call levels) changed the summary */
        free(whole.p);
    }
    free(fast.p);
    free(slow.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The emulator reads only [data, data + size): copy into an exact-size
     * buffer so ASan catches a read one byte past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    run(copy, size, (int)(size % 3));
    if (size % 3 == 1)
        differential(copy, size);
    free(copy);
    return 0;
}
