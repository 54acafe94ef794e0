/* fixtures.h -- what the sink tests of tests/core share (test_sinks.c,
 * test_export.c): the sample dump, handing an encoder's records to the
 * core, and running a sink over a fed core.  Criterion tests only (the
 * helpers assert); header-only, each test file has its own copy.
 *
 * The sample dump, the one the golden outputs of both files are written
 * against:
 *   dict (root, bytes 2..102) { list 10..50 { 4 ints of 2 B at 12, 17, 22,
 *   27 }, TNAME 60..90 (a note ip=42; optionally an UNSERIALIZABLE error
 *   "cannot <pickle>" at x.y) }, payload 103 B, pid PID, tid PID + 1,
 *   begun at 1700000000123456789 ns.
 */
#ifndef TEST_CORE_FIXTURES_H
#define TEST_CORE_FIXTURES_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "enc.h"

#define FX_BEGIN_NS 1700000000123456789ll

/* Hand e's records to the core as batch `seq` of dump `id` of process
 * `pid`, and empty e. */
static inline void fx_flush(enc *e, sertrace_core *c, int64_t pid, uint64_t id, uint32_t seq)
{
    cr_assert_eq(sertrace_core_records(c, pid, pid, 0, id, seq, e->buf, e->n), 0);
    enc_reset(e);
}

/* How the sample dump ends, and whether its TNAME node records an error. */
typedef struct fx_sample_how {
    bool error;
    int64_t end_ns;     /* dump_end's time (0: none) */
    int64_t batches;    /* dump_end's batches (-1: the trace does not say) */
    uint32_t end_flags; /* dump_end's flags (SERTRACE_END_*) */
} fx_sample_how;

/* The sample dump (above), through encoder e, as dump `id` of `pid`. */
static inline void fx_sample(enc *e, sertrace_core *c, int64_t pid, uint64_t id, const char *tname,
                             const fx_sample_how *how)
{
    cr_assert_eq(sertrace_core_dump_begin(c, pid, pid + 1, FX_BEGIN_NS, id, "pickle", 6, 5), 0);
    enc_type(e, 1, "dict");
    enc_enter(e, SERTRACE_TAG_DICT, 1, 1, 0xabc0, 3, 2);
    enc_type(e, 2, "list");
    enc_enter(e, SERTRACE_TAG_LIST, 2, 2, 0xabd0, 5, 10);
    enc_type(e, 3, "int");
    for (int k = 0; k < 4; k++) {
        enc_enter(e, SERTRACE_TAG_INT, 3, 3, 0, 0, 12 + 5 * k);
        enc_exit(e, 3, 14 + 5 * k);
    }
    enc_exit(e, 2, 50);
    enc_type(e, 4, tname);
    enc_enter(e, SERTRACE_TAG_INSTANCE, 2, 4, 0xabe0, 0, 60);
    enc_note(e, 2, "ip", "42");
    if (how->error)
        enc_error(e, SERTRACE_TAG_INSTANCE, 2, 4, "cannot <pickle>", "x.y");
    enc_exit(e, 2, 90);
    enc_exit(e, 1, 102);
    fx_flush(e, c, pid, id, 0);
    cr_assert_eq(sertrace_core_dump_end_flags(c, pid, pid + 1, how->end_ns, id, 103, 0,
                                              how->batches, how->end_flags),
                 0);
}

/* Run `feed` through a new core whose visitor is sink SINK of KIND
 * (treeprint, summary, export: sertrace_KIND_visitor/_finish/_destroy),
 * finish both, and destroy both. */
#define FX_RUN_SINK(kind, sink, feed)                                                              \
    do {                                                                                           \
        sertrace_core_visitor fx_v_;                                                               \
        sertrace_##kind##_visitor((sink), &fx_v_);                                                 \
        sertrace_core *fx_c_ = sertrace_core_create(&fx_v_);                                       \
        cr_assert_not_null(fx_c_);                                                                 \
        (feed)(fx_c_);                                                                             \
        cr_assert_eq(sertrace_core_finish(fx_c_), 0);                                              \
        cr_assert_eq(sertrace_##kind##_finish((sink), sertrace_core_get_stats(fx_c_)), 0);         \
        sertrace_core_destroy(fx_c_);                                                              \
        sertrace_##kind##_destroy(sink);                                                           \
    } while (0)

#endif /* TEST_CORE_FIXTURES_H */
