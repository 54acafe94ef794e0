/* report-progress.c -- `sertrace report`: the progress display.
 *
 * When stderr is a terminal and the trace is larger than 50 MB
 * (SERTRACE_PROGRESS_MIN_SIZE), a pass-through filter of our own (a
 * component class made at run time, not a plugin) counts events and reads
 * their timestamps; the bytes read are estimated as (time reached / time
 * span) x trace size, since ctf.fs maps the stream files and reports no
 * offset.  At most 4 updates/s.  When stdout is that same terminal, stdout
 * is a stream of ours (struct tty_out) that erases the progress line
 * before report bytes go out and writes whole lines only, so the line
 * never tears or mixes into the report.  (A move out of report.c: see
 * report.h.)
 */
#define _GNU_SOURCE
#include <babeltrace2/babeltrace.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "format.h"
#include "grow.h" /* analyzers/core: the doubling of the tail buffer */
#include "report.h"

/* ---- progress filter ---------------------------------------------------- */

struct progress_iter {
    struct progress *p;
    bt_message_iterator *upstream;
    /* Messages received but not yet passed on (capacity mismatch). */
    const bt_message **queue;
    uint64_t queued, head, cap;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Remove the progress line from the terminal (shared terminal only). */
static void progress_erase(struct progress *p)
{
    if (p->shown) {
        fputs("\r\033[K", stderr);
        p->shown = false;
    }
}

static void progress_print(struct progress *p, bool final)
{
    double frac = 0.0;

    if (p->shared_tty && !p->at_line_start)
        return; /* it would land in the middle of a report line */
    if (p->have_span && p->end_ns > p->begin_ns && p->last_ns > p->begin_ns)
        frac = (double)(p->last_ns - p->begin_ns) / (double)(p->end_ns - p->begin_ns);
    if (frac > 1.0)
        frac = 1.0;
    if (final)
        frac = 1.0;
    fprintf(stderr, "\rsertrace: %" PRIu64 " events read, ~%.1f of %.1f MB (%d%%)\033[K", p->events,
            frac * (double)p->total_bytes / 1e6, (double)p->total_bytes / 1e6, (int)(frac * 100.0));
    p->printed = true;
    p->shown = true;
}

/* The end of the run: on a terminal of its own, the final count stays
 * (one line); on the report's terminal, the line goes. */
void progress_done(struct progress *p)
{
    if (p->shared_tty)
        progress_erase(p);
    else if (p->printed) {
        progress_print(p, true);
        fputc('\n', stderr);
    }
}

/* ---- stdout on the progress line's terminal ------------------------------ */

#define TTY_TAIL_MAX (1u << 16)

int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int tty_out_emit(struct tty_out *t, const char *b, size_t n)
{
    progress_erase(t->p);
    if ((t->tail_len > 0 && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) ||
        write_all(STDOUT_FILENO, b, n) != 0) {
        t->failed = true;
        t->err = errno;
        return -1;
    }
    t->tail_len = 0;
    return 0;
}

static ssize_t tty_out_write(void *cookie, const char *b, size_t n)
{
    struct tty_out *t = cookie;
    const char *nl = n > 0 ? memrchr(b, '\n', n) : NULL;

    if (t->failed)
        return -1;
    if (nl != NULL) {
        size_t head = (size_t)(nl - b) + 1;
        if (tty_out_emit(t, b, head) != 0)
            return -1;
        t->p->at_line_start = true;
        b += head;
        n -= head;
        if (n == 0)
            return (ssize_t)head;
        /* the rest is a partial line: held back below */
        if (tty_out_write(cookie, b, n) < 0)
            return -1;
        return (ssize_t)(head + n);
    }
    if (t->tail_len + n > TTY_TAIL_MAX) {
        /* A very long line: write it as it comes (no progress meanwhile). */
        if (tty_out_emit(t, b, n) != 0)
            return -1;
        t->p->at_line_start = false;
        return (ssize_t)n;
    }
    if (t->tail_len + n > t->tail_cap) {
        char *g = sertrace_grow(t->tail, &t->tail_cap, 1, t->tail_len + n, 256);
        if (g == NULL)
            return tty_out_emit(t, b, n) == 0 ? (t->p->at_line_start = false, (ssize_t)n) : -1;
        t->tail = g;
    }
    memcpy(t->tail + t->tail_len, b, n);
    t->tail_len += n;
    return (ssize_t)n;
}

/* Put a tty_out in place of stdout.  0, or -1 (stdout unchanged). */
int tty_out_install(struct tty_out *t, struct progress *p)
{
    static const cookie_io_functions_t io = {.write = tty_out_write};
    FILE *f;

    memset(t, 0, sizeof(*t));
    t->p = p;
    fflush(stdout);
    f = fopencookie(t, "w", io);
    if (f == NULL)
        return -1;
    setvbuf(f, NULL, _IOFBF, 1u << 16);
    t->real = stdout;
    p->shared_tty = true;
    p->at_line_start = true;
    stdout = f;
    return 0;
}

/* Flush, erase the progress line and write the held-back partial line:
 * the terminal shows exactly the report so far, and nothing is drawn
 * any more.  stdout stays ours (a sink may still hold it). */
void tty_out_settle(struct tty_out *t)
{
    if (t->real == NULL)
        return;
    fflush(stdout);
    progress_erase(t->p);
    if (t->tail_len > 0 && !t->failed && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) {
        t->failed = true;
        t->err = errno;
    }
    t->tail_len = 0;
    t->p->at_line_start = false;
}

/* Flush, write the held-back partial line, erase the progress line and
 * give stdout back.  Returns -1 with errno (the first failed write's) when
 * writing failed. */
int tty_out_remove(struct tty_out *t)
{
    int rc;

    if (t->real == NULL)
        return 0;
    rc = fflush(stdout) == 0 ? 0 : -1;
    progress_erase(t->p);
    if (t->tail_len > 0 && !t->failed && write_all(STDOUT_FILENO, t->tail, t->tail_len) != 0) {
        t->failed = true;
        t->err = errno;
    }
    fclose(stdout);
    stdout = t->real;
    t->real = NULL;
    free(t->tail);
    t->tail = NULL;
    if (t->failed || rc != 0) {
        errno = t->err != 0 ? t->err : EIO; /* for the caller's message */
        return -1;
    }
    return 0;
}

static bt_component_class_initialize_method_status
progress_comp_init(bt_self_component_filter *self, bt_self_component_filter_configuration *cfg,
                   const bt_value *params, void *data)
{
    (void)cfg;
    (void)params;
    bt_self_component_set_data(bt_self_component_filter_as_self_component(self), data);
    if (bt_self_component_filter_add_input_port(self, "in", NULL, NULL) !=
            BT_SELF_COMPONENT_ADD_PORT_STATUS_OK ||
        bt_self_component_filter_add_output_port(self, "out", NULL, NULL) !=
            BT_SELF_COMPONENT_ADD_PORT_STATUS_OK)
        return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_MEMORY_ERROR;
    return BT_COMPONENT_CLASS_INITIALIZE_METHOD_STATUS_OK;
}

static bt_message_iterator_class_initialize_method_status
progress_iter_init(bt_self_message_iterator *self, bt_self_message_iterator_configuration *cfg,
                   bt_self_component_port_output *port)
{
    bt_self_component *comp = bt_self_message_iterator_borrow_component(self);
    struct progress_iter *it = calloc(1, sizeof(*it));
    bt_self_component_port_input *in;

    (void)cfg;
    (void)port;
    if (it == NULL)
        return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_MEMORY_ERROR;
    it->p = bt_self_component_get_data(comp);
    in = bt_self_component_filter_borrow_input_port_by_name((bt_self_component_filter *)comp, "in");
    if (bt_message_iterator_create_from_message_iterator(self, in, &it->upstream) !=
        BT_MESSAGE_ITERATOR_CREATE_FROM_MESSAGE_ITERATOR_STATUS_OK) {
        free(it);
        return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_ERROR;
    }
    bt_self_message_iterator_set_data(self, it);
    return BT_MESSAGE_ITERATOR_CLASS_INITIALIZE_METHOD_STATUS_OK;
}

static void progress_iter_fini(bt_self_message_iterator *self)
{
    struct progress_iter *it = bt_self_message_iterator_get_data(self);

    if (it == NULL)
        return;
    for (uint64_t i = it->head; i < it->queued; i++)
        bt_message_put_ref(it->queue[i]);
    free(it->queue);
    bt_message_iterator_put_ref(it->upstream);
    free(it);
}

static void progress_count(struct progress *p, const bt_message *m)
{
    if (bt_message_get_type(m) != BT_MESSAGE_TYPE_EVENT)
        return;
    p->events++;
    if (bt_message_event_borrow_stream_class_default_clock_class_const(m) != NULL) {
        int64_t ns;
        if (bt_clock_snapshot_get_ns_from_origin(
                bt_message_event_borrow_default_clock_snapshot_const(m), &ns) ==
            BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK)
            p->last_ns = ns;
    }
}

static bt_message_iterator_class_next_method_status
progress_iter_next(bt_self_message_iterator *self, bt_message_array_const msgs, uint64_t capacity,
                   uint64_t *count)
{
    struct progress_iter *it = bt_self_message_iterator_get_data(self);
    uint64_t n = 0;
    int64_t t;

    if (it->head == it->queued) {
        bt_message_array_const up;
        uint64_t up_count = 0;
        switch (bt_message_iterator_next(it->upstream, &up, &up_count)) {
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
            break;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_END;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_AGAIN;
        case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_MEMORY_ERROR;
        default:
            return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_ERROR;
        }
        if (up_count > it->cap) {
            const bt_message **q = realloc(it->queue, up_count * sizeof(*q));
            if (q == NULL) {
                for (uint64_t i = 0; i < up_count; i++)
                    bt_message_put_ref(up[i]);
                return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_MEMORY_ERROR;
            }
            it->queue = q;
            it->cap = up_count;
        }
        memcpy(it->queue, up, up_count * sizeof(*up)); /* references move */
        it->head = 0;
        it->queued = up_count;
    }
    while (it->head < it->queued && n < capacity) {
        progress_count(it->p, it->queue[it->head]);
        msgs[n++] = it->queue[it->head++];
    }
    *count = n;
    t = now_ns();
    if (t - it->p->last_print >= PROGRESS_INTERVAL_NS) {
        it->p->last_print = t;
        progress_print(it->p, false);
    }
    return BT_MESSAGE_ITERATOR_CLASS_NEXT_METHOD_STATUS_OK;
}

bt_component_class_filter *progress_class(void)
{
    bt_message_iterator_class *ic = bt_message_iterator_class_create(progress_iter_next);
    bt_component_class_filter *fc = NULL;

    if (ic == NULL)
        return NULL;
    if (bt_message_iterator_class_set_initialize_method(ic, progress_iter_init) ||
        bt_message_iterator_class_set_finalize_method(ic, progress_iter_fini))
        goto end;
    fc = bt_component_class_filter_create("sertrace-progress", ic);
    if (fc != NULL && bt_component_class_filter_set_initialize_method(fc, progress_comp_init) !=
                          BT_COMPONENT_CLASS_SET_METHOD_STATUS_OK) {
        bt_component_class_filter_put_ref(fc);
        fc = NULL;
    }
end:
    bt_message_iterator_class_put_ref(ic);
    return fc;
}
