/* summary-capture.c -- a summary written into memory, with its core
 * (summary.h, sertrace_summary_capture): what sertrace.inspect
 * (inspect/pymodule.c) and sertrace.compare (python/sertrace/_compare.c)
 * both set up.  A capture can be reset and fed again (sertrace.inspect
 * keeps one for the process: its setup, ~30 k instructions of callocs and
 * memsets, then costs a few hundred).
 */
#include <string.h>

#include "summary.h"

#define CAPTURE_KEEP (1u << 20) /* the text's buffer kept by a reset */

static int buf_write(void *ctx, const char *s, size_t n)
{
    return sertrace_buf_append(ctx, s, n);
}

int sertrace_summary_capture_begin(sertrace_summary_capture *c, const sertrace_summary_opts *opts,
                                   sertrace_core_error_fn error)
{
    sertrace_core_visitor v;
    memset(c, 0, sizeof *c);
    c->sum = sertrace_summary_create(opts, buf_write, &c->out);
    if (!c->sum)
        return -1;
    sertrace_summary_visitor(c->sum, &c->sumv);
    v = c->sumv;
    if (error)
        v.error = error;
    c->core = sertrace_core_create(&v);
    return c->core ? 0 : -1;
}

int sertrace_summary_capture_finish(sertrace_summary_capture *c)
{
    if (sertrace_core_finish(c->core) < 0 ||
        sertrace_summary_finish(c->sum, sertrace_core_get_stats(c->core)) < 0 ||
        sertrace_buf_error(&c->out))
        return -1;
    return 0;
}

int sertrace_summary_capture_reset(sertrace_summary_capture *c)
{
    if (sertrace_core_reset(c->core) < 0)
        return -1;
    sertrace_summary_reset(c->sum);
    if (c->out.cap > CAPTURE_KEEP)
        sertrace_buf_free(&c->out);
    else
        sertrace_buf_clear(&c->out);
    return 0;
}

void sertrace_summary_capture_release(sertrace_summary_capture *c)
{
    if (c->core)
        sertrace_core_destroy(c->core);
    if (c->sum)
        sertrace_summary_destroy(c->sum);
    sertrace_buf_free(&c->out);
    memset(c, 0, sizeof *c);
}
