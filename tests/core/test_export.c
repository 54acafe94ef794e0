/* test_export.c -- Criterion tests of the export visitor (analyzers/core/
 * export.h) on synthetic streams: exact folded lines and self bytes, the
 * dump frame (header/trailer bytes), escaping of hostile type names in
 * every format, speedscope events that nest and never go back even when
 * sizes are not exact (a malformed node, an unfinished dump), Perfetto's
 * exact microsecond timestamps, errors and notes in the HTML block.  The
 * real-trace and browser tests are in tests/export. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "enc.h"
#include "fixtures.h"
#include "export.h"
#include "format.h"

static sertrace_buf OUT[SERTRACE_EXPORT_NFORMATS];
static enc E;

static int capture(void *ctx, const char *s, size_t n)
{
    return sertrace_buf_append((sertrace_buf *)ctx, s, n);
}

/* The sample dump of fixtures.h with its error record, ended 3 us after
 * it began (batches unknown). */
static void sample(sertrace_core *c, int64_t pid, uint64_t id, const char *tname)
{
    fx_sample_how how = {
        .error = true, .end_ns = FX_BEGIN_NS + 3000, .batches = -1, .end_flags = 0};
    fx_sample(&E, c, pid, id, tname, &how);
}

static void setup(void)
{
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        sertrace_buf_clear(&OUT[f]);
    enc_reset(&E);
}

TestSuite(export, .init = setup);

static void run_export(const sertrace_export_opts *o, void (*feed)(sertrace_core *))
{
    sertrace_export *x = sertrace_export_create(o);
    cr_assert_not_null(x);
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        cr_assert_eq(sertrace_export_add_output(x, f, capture, &OUT[f]), 0);
    FX_RUN_SINK(export, x, feed);
    for (int f = 0; f < SERTRACE_EXPORT_NFORMATS; f++)
        if (!OUT[f].data)
            sertrace_buf_append(&OUT[f], "", 0);
}

static void feed_sample(sertrace_core *c)
{
    sample(c, 7, 1, "mod.Thing");
}

Test(export, folded_lines_are_self_bytes_under_the_dump_frame)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    run_export(&o, feed_sample);
    cr_assert_str_eq(OUT[SERTRACE_EXPORT_FOLDED].data, "pickle dump 1 pid 7 3\n"
                                                       "pickle dump 1 pid 7;dict 30\n"
                                                       "pickle dump 1 pid 7;dict;list 32\n"
                                                       "pickle dump 1 pid 7;dict;list;int 2\n"
                                                       "pickle dump 1 pid 7;dict;list;int 2\n"
                                                       "pickle dump 1 pid 7;dict;list;int 2\n"
                                                       "pickle dump 1 pid 7;dict;list;int 2\n"
                                                       "pickle dump 1 pid 7;dict;mod.Thing 30\n");
}

Test(export, perfetto_event_has_exact_times_and_args)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    run_export(&o, feed_sample);
    const char *s = OUT[SERTRACE_EXPORT_PERFETTO].data;
    cr_assert_not_null(strstr(s, "\"ph\":\"X\",\"ts\":1700000000123456.789,\"dur\":3.000,"
                                 "\"pid\":7,\"tid\":8,"),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"payload_bytes\":103,\"root_bytes\":100,\"status\":\"ok\""),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"errors\":1"), "got:\n%s", s);
}

Test(export, html_block_holds_columns_errors_and_notes)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    o.oversize_bytes = 40;
    run_export(&o, feed_sample);
    const char *s = OUT[SERTRACE_EXPORT_HTML].data;
    cr_assert_not_null(strstr(s, "\"self\":[30,32,2,2,2,2,30]"), "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"dump_self\":3,\"total\":103"), "got:\n%s", s);
    /* oversized (4096): the dict (100) and the list (40); the Thing has ERROR (32) */
    cr_assert_not_null(strstr(s, "\"flags\":[4096,4096,0,0,0,0,32]"), "got:\n%s", s);
    /* '<' never reaches the page raw inside a data block */
    cr_assert_not_null(strstr(s, "\"error_list\":[[6,\"cannot \\u003cpickle>\",\"x.y\"]]"),
                       "got:\n%s", s);
    cr_assert_not_null(strstr(s, "\"note_list\":[[6,\"ip\",\"42\"]]"), "got:\n%s", s);
    cr_assert_not_null(strstr(s, "id=\"sertrace-index\""), "got:\n%s", s);
    cr_assert(strncmp(s, "<!DOCTYPE html>", 15) == 0);
    cr_assert_not_null(strstr(s, "</html>\n"));
}

static void feed_hostile(sertrace_core *c)
{
    sample(c, 1, 1, "a;b\n</script><script>alert(1)</script>\x1b[2J\"q\"");
}

Test(export, hostile_type_names_are_escaped_everywhere)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    run_export(&o, feed_hostile);
    /* folded: one line per node, no ';' inside a frame, no control byte */
    const char *f = OUT[SERTRACE_EXPORT_FOLDED].data;
    cr_assert_not_null(strstr(f, ";dict;a?b?</script><script>alert(1)</script>?[2J\"q\" 30\n"),
                       "got:\n%s", f);
    for (const char *p = f; *p; p++)
        cr_assert(*p == '\n' || (unsigned char)*p >= 0x20, "control byte in folded output");
    /* HTML: the only "</script" are the page's own closing tags */
    const char *h = OUT[SERTRACE_EXPORT_HTML].data;
    size_t opens = 0, closes = 0;
    for (const char *p = h; (p = strstr(p, "<script")); p++)
        opens++;
    for (const char *p = h; (p = strstr(p, "</script")); p++)
        closes++;
    cr_assert_eq(opens, closes, "a type name closed a <script> element");
    cr_assert_eq(opens, 3); /* one dump block, the index, the viewer */
    /* speedscope: the name as a JSON string */
    cr_assert_not_null(
        strstr(OUT[SERTRACE_EXPORT_SPEEDSCOPE].data,
               "{\"name\":\"a;b\\n</script><script>alert(1)</script>\\u001b[2J\\\"q\\\"\"}"),
        "got:\n%s", OUT[SERTRACE_EXPORT_SPEEDSCOPE].data);
}

/* Parse the "at" values of speedscope events in order, checking that
 * they never decrease and that opens and closes nest; returns the last. */
static uint64_t check_events(const char *s, int *profiles)
{
    uint64_t last = 0;
    int depth = 0;
    *profiles = 0;
    for (const char *p = s; (p = strstr(p, "{\"type\":\"")); p++) {
        char kind = p[9];
        if (kind == 'e') { /* "evented": a profile starts */
            cr_assert_eq(depth, 0, "unbalanced events in the previous profile");
            (*profiles)++;
            last = 0;
            continue;
        }
        const char *at = strstr(p, "\"at\":");
        cr_assert_not_null(at);
        uint64_t v = strtoull(at + 5, NULL, 10);
        cr_assert_geq(v, last, "events go back: %llu after %llu", (unsigned long long)v,
                      (unsigned long long)last);
        last = v;
        depth += kind == 'O' ? 1 : -1;
        cr_assert_geq(depth, 0, "a close without its open");
    }
    cr_assert_eq(depth, 0);
    return last;
}

static void feed_inexact(sertrace_core *c)
{
    /* dump 1: A's exit is before its enter (malformed: 0 bytes) though its
     * child B has 8: the child must still nest inside A's frame */
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 0, 1, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_DICT, 1, 0, 1, 0, 10);
    enc_enter(&E, SERTRACE_TAG_LIST, 2, 0, 2, 0, 12);
    enc_exit(&E, 2, 20);
    enc_exit(&E, 1, 5);
    fx_flush(&E, c, 5, 1, 0);
    cr_assert_eq(sertrace_core_dump_end(c, 5, 5, 0, 1, 30, 0), 0);
    /* dump 2: never ends (the process died inside it) */
    cr_assert_eq(sertrace_core_dump_begin(c, 5, 5, 0, 2, "pickle", 6, 5), 0);
    enc_enter(&E, SERTRACE_TAG_INSTANCE, 1, 0, 1, 0, 2);
    enc_enter(&E, SERTRACE_TAG_STR, 2, 0, 3, 0, 6);
    enc_exit(&E, 2, 1500);
    enc_enter(&E, SERTRACE_TAG_STR, 2, 0, 3, 0, 1500);
    fx_flush(&E, c, 5, 2, 0);
}

Test(export, speedscope_events_nest_when_sizes_are_not_exact)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    run_export(&o, feed_inexact);
    int profiles;
    check_events(OUT[SERTRACE_EXPORT_SPEEDSCOPE].data, &profiles);
    cr_assert_eq(profiles, 2);
    const char *s = OUT[SERTRACE_EXPORT_SPEEDSCOPE].data;
    /* dump 1: the payload (30) is still the dump frame's width */
    cr_assert_not_null(strstr(s, "\"name\":\"pickle dump 1, pid 5\",\"unit\":\"bytes\","
                                 "\"startValue\":0,\"endValue\":30,"),
                       "got:\n%s", s);
    /* the malformed A weighs nothing by itself; B its 8 bytes */
    const char *f = OUT[SERTRACE_EXPORT_FOLDED].data;
    cr_assert_not_null(strstr(f, "pickle dump 1 pid 5;D2;L 8\n"), "got:\n%s", f);
    cr_assert_null(strstr(f, "pickle dump 1 pid 5;D2 "), "got:\n%s", f);
    /* dump 2: no payload, the roots' bytes; unknown status */
    cr_assert_not_null(
        strstr(OUT[SERTRACE_EXPORT_PERFETTO].data, "\"dump_id\":2,\"payload_bytes\":null"),
        "got:\n%s", OUT[SERTRACE_EXPORT_PERFETTO].data);
    cr_assert_not_null(strstr(OUT[SERTRACE_EXPORT_PERFETTO].data, "\"status\":\"unknown\""));
    cr_assert_not_null(strstr(OUT[SERTRACE_EXPORT_HTML].data, "\"unfinished\":true"));
}

Test(export, outputs_are_checked)
{
    sertrace_export_opts o = SERTRACE_EXPORT_OPTS_DEFAULT;
    sertrace_export *x = sertrace_export_create(&o);
    cr_assert_eq(sertrace_export_add_output(x, SERTRACE_EXPORT_HTML, capture, &OUT[0]), 0);
    cr_assert_eq(sertrace_export_add_output(x, SERTRACE_EXPORT_HTML, capture, &OUT[0]), -1);
    cr_assert_eq(sertrace_export_add_output(x, SERTRACE_EXPORT_NFORMATS, capture, &OUT[0]), -1);
    cr_assert_eq(sertrace_export_add_output(x, SERTRACE_EXPORT_FOLDED, NULL, NULL), -1);
    /* no dump at all: still whole documents */
    cr_assert_eq(sertrace_export_finish(x, NULL), 0);
    sertrace_export_destroy(x);
    cr_assert_not_null(strstr(OUT[0].data, "\"dumps\":[]"));
    cr_assert_str_eq(sertrace_export_format_name(SERTRACE_EXPORT_SPEEDSCOPE), "speedscope");
}
