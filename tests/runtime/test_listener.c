/* test_listener.c -- libsertrace's in-process listener (sertrace.h,
 * sertrace_set_listener), the way sertrace.compare uses it: the three
 * events' fields, on the dump's own thread, straight into the tree core.
 *
 * Checked: no listener (and nothing else listening) means no dump; with
 * one, a dump's records reach the callbacks in seq order, dump_end carries
 * the number of records calls as `batches` and SERTRACE_END_LOWER_BOUNDS
 * when the serializer said so; the records rebuild, in the core, the exact
 * node sizes the serializer's positions give (several batches: a dump of
 * more than SERTRACE_BATCH_BYTES of records); a dump begun before the
 * listener is removed keeps it to its end, one begun after has none; a
 * dump on another thread calls the listener on that thread.
 *
 * Its own executable: it links the core as well as the runtime. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "core.h"
#include "runtime-internal.h"
#include "sertrace/sertrace.h"

static struct {
    sertrace_core *core;
    uint64_t begins, batches, ends;
    uint32_t next_seq;
    uint64_t end_bytes;
    uint8_t end_status;
    uint32_t end_batches, end_flags;
    pthread_t thread;
    bool wrong_thread;
    /* from the core */
    uint64_t nodes, root_bytes, max_child_bytes;
    bool root_exact;
} L;

static void on_begin(void *ctx, uint64_t id, const char *ser, int32_t protocol)
{
    cr_assert_eq(ctx, &L);
    L.wrong_thread |= !pthread_equal(pthread_self(), L.thread);
    L.begins++;
    L.next_seq = 0;
    cr_assert_eq(sertrace_core_dump_begin(L.core, 1, 1, 0, id, ser, strlen(ser), protocol), 0);
}

static void on_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *b, uint32_t n)
{
    cr_assert_eq(ctx, &L);
    L.wrong_thread |= !pthread_equal(pthread_self(), L.thread);
    cr_assert_eq(seq, L.next_seq, "records out of order: %u, expected %u", seq, L.next_seq);
    L.next_seq++;
    L.batches++;
    cr_assert_eq(sertrace_core_records(L.core, 1, 1, 0, id, seq, b, n), 0);
}

static void on_end(void *ctx, uint64_t id, uint64_t bytes, uint8_t status, uint32_t batches,
                   uint32_t flags)
{
    cr_assert_eq(ctx, &L);
    L.wrong_thread |= !pthread_equal(pthread_self(), L.thread);
    L.ends++;
    L.end_bytes = bytes;
    L.end_status = status;
    L.end_batches = batches;
    L.end_flags = flags;
    cr_assert_eq(sertrace_core_dump_end_flags(L.core, 1, 1, 0, id, bytes, status, batches, flags),
                 0);
}

static int node_exit(void *ctx, sertrace_dump_state *d, sertrace_node *n)
{
    (void)ctx;
    (void)d;
    L.nodes++;
    if (n->depth == 1) {
        L.root_bytes = n->bytes;
        L.root_exact = sertrace_node_bytes_exact(n);
    } else if (n->bytes > L.max_child_bytes) {
        L.max_child_bytes = n->bytes;
    }
    return 0;
}

static const sertrace_listener listener = {on_begin, on_records, on_end, &L};

static void setup(void)
{
    sertrace_core_visitor v = {0};
    memset(&L, 0, sizeof L);
    v.node_exit = node_exit;
    L.core = sertrace_core_create(&v);
    cr_assert_not_null(L.core);
    L.thread = pthread_self();
    sertrace_internal_set_hooks(NULL);
    sertrace_internal_configure(NULL, NULL, NULL, NULL, -1); /* no text tree */
}

static void teardown(void)
{
    sertrace_set_listener(NULL);
    sertrace_core_destroy(L.core);
}

/* A list of `n` ints (atoms of 2 bytes each) inside a root of 3 + 2n + 1
 * bytes; returns the payload length (root + 2 header + 1 trailer). */
static uint64_t write_list(sertrace_dump *d, unsigned n)
{
    uint64_t pos = 2;
    sertrace_enter(d, SERTRACE_TAG_LIST, 0, 0x1000, n + 1, pos);
    pos += 3;
    for (unsigned i = 0; i < n; i++) {
        sertrace_atom(d, SERTRACE_TAG_INT, 0, 0x2000 + i, 0, pos, pos + 2);
        pos += 2;
    }
    pos += 1;
    sertrace_exit(d, pos);
    return pos + 1;
}

TestSuite(listener, .init = setup, .fini = teardown);

Test(listener, events_reach_the_core_exactly)
{
    sertrace_set_listener(&listener);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d, "a listener makes dumps record");
    cr_assert(sertrace_dump_flags(d) & SERTRACE_DUMP_ACTIVE);
    /* enough atoms for several 4 KiB batches */
    uint64_t total = write_list(d, 5000);
    sertrace_dump_end(d, total, SERTRACE_STATUS_OK);
    cr_assert_eq(L.begins, 1);
    cr_assert_eq(L.ends, 1);
    cr_assert_gt(L.batches, 1, "5000 atoms fill more than one batch");
    cr_assert_eq(L.end_batches, L.batches);
    cr_assert_eq(L.end_bytes, total);
    cr_assert_eq(L.end_status, SERTRACE_STATUS_OK);
    cr_assert_eq(L.end_flags, 0u);
    cr_assert_eq(sertrace_core_finish(L.core), 0);
    cr_assert_eq(L.root_bytes, total - 3);
    cr_assert(L.root_exact);
    cr_assert_eq(L.nodes, 5001);
    cr_assert_eq(L.max_child_bytes, 2);
    cr_assert_not(L.wrong_thread);
}

Test(listener, lower_bounds_flag_reaches_dump_end)
{
    sertrace_set_listener(&listener);
    sertrace_dump *d = sertrace_dump_begin("pickle._Pickler", 4);
    cr_assert_not_null(d);
    sertrace_dump_lower_bounds(d);
    uint64_t total = write_list(d, 3);
    sertrace_dump_end(d, total, SERTRACE_STATUS_OK);
    cr_assert_eq(L.end_flags, SERTRACE_END_LOWER_BOUNDS);
    cr_assert_eq(L.end_batches, 1);
}

Test(listener, a_dump_keeps_the_listener_it_began_with)
{
    sertrace_set_listener(&listener);
    sertrace_dump *d = sertrace_dump_begin("pickle", 4);
    cr_assert_not_null(d);
    sertrace_set_listener(NULL);
    uint64_t total = write_list(d, 10);
    sertrace_dump_end(d, total, SERTRACE_STATUS_OK);
    cr_assert_eq(L.ends, 1, "the dump begun with the listener ends into it");
    cr_assert_eq(L.end_bytes, total);
    /* begun after the removal: no listener (an LTTng session of someone
     * else may still record sertrace:*, so the handle may be non-NULL) */
    sertrace_dump *e = sertrace_dump_begin("pickle", 4);
    if (e)
        sertrace_dump_end(e, 0, SERTRACE_STATUS_OK);
    cr_assert_eq(L.begins, 1, "a dump begun after the removal does not reach it");
    cr_assert_eq(L.ends, 1);
}

static pthread_mutex_t go = PTHREAD_MUTEX_INITIALIZER;

static void *other_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&go); /* until the main thread has set L.thread */
    pthread_mutex_unlock(&go);
    sertrace_dump *d = sertrace_dump_begin("pickle", 2);
    if (d) {
        uint64_t total = write_list(d, 4);
        sertrace_dump_end(d, total, SERTRACE_STATUS_OK);
    }
    return NULL;
}

Test(listener, called_on_the_dumping_thread)
{
    pthread_t t;
    sertrace_set_listener(&listener);
    pthread_mutex_lock(&go);
    cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    L.thread = t; /* the callbacks must run there */
    pthread_mutex_unlock(&go);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(L.ends, 1);
    cr_assert_not(L.wrong_thread);
}
