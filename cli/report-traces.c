/* report-traces.c -- `sertrace report`: trace discovery.
 *
 * Every directory under TRACE holding a `metadata` file is a CTF trace
 * (source.ctf.fs does not recurse; per-PID sessions or several snapshots
 * give several traces).  Directories whose traces share a UUID are grouped
 * into one ctf.fs component (two snapshots of one session overlap: ctf.fs
 * merges them and de-duplicates packets).  Each trace is checked before
 * the graph exists, so a corrupt one is skipped with a warning naming it
 * instead of sinking the whole report; a stream file that is cut is read
 * up to its last whole packet (through a shadow copy), one babeltrace2
 * refuses is set aside (discover()).  trace_span() gives the time span the
 * progress display needs.  (A move out of report.c: see report.h.)
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
#include "report.h"

/* ---- trace discovery ---------------------------------------------------- */

/* Ask source.ctf.fs whether `dir` is a trace it can read; returns the
 * support weight (0 = not a CTF trace) and its group (the trace UUID), or
 * -1 when the query itself failed (unreadable or corrupt metadata). */
static double support_info(const bt_component_class_source *fs, const char *dir, char **group)
{
    bt_value *params = bt_value_map_create();
    bt_query_executor *q = NULL;
    const bt_value *res = NULL;
    double weight = -1.0;

    *group = NULL;
    if (params == NULL || bt_value_map_insert_string_entry(params, "input", dir) ||
        bt_value_map_insert_string_entry(params, "type", "directory"))
        goto end;
    q = bt_query_executor_create(bt_component_class_source_as_component_class_const(fs),
                                 "babeltrace.support-info", params);
    if (q == NULL || bt_query_executor_query(q, &res) != BT_QUERY_EXECUTOR_QUERY_STATUS_OK)
        goto end;
    if (bt_value_is_map(res)) {
        const bt_value *w = bt_value_map_borrow_entry_value_const(res, "weight");
        const bt_value *g = bt_value_map_borrow_entry_value_const(res, "group");
        if (w != NULL && bt_value_is_real(w))
            weight = bt_value_real_get(w);
        else if (w != NULL && bt_value_is_signed_integer(w))
            weight = (double)bt_value_integer_signed_get(w);
        if (g != NULL && bt_value_is_string(g))
            *group = strdup(bt_value_string_get(g));
    } else if (bt_value_is_real(res)) {
        weight = bt_value_real_get(res);
    }
end:
    bt_value_put_ref(res);
    bt_query_executor_put_ref(q);
    bt_value_put_ref(params);
    return weight;
}

void free_groups(struct trace_group *g, int n)
{
    for (int i = 0; i < n; i++) {
        free(g[i].group);
        bt_value_put_ref(g[i].inputs);
    }
    free(g);
}

#define CTF_METADATA_MAGIC 0x75D11D57u
/* Metadata packet header: magic, uuid[16], checksum, content and packet
 * size (bits), then 5 one-byte fields. */
#define CTF_METADATA_HEADER_BYTES 37

static uint32_t read_u32(const unsigned char *p, bool swap)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return swap ? __builtin_bswap32(v) : v;
}

/* LTTng writes packetized metadata: a sequence of packets, each with a
 * 37-byte header giving its content and total size in bits.  babeltrace2
 * 2.0.4 loops forever on a file that ends inside a packet (a truncated
 * copy, a disk that filled up: measured, `babeltrace2 DIR` too), so the
 * packet chain is walked here before babeltrace2 sees the file.  Text
 * metadata (plain TSDL, not packetized) is left to babeltrace2.  0 ok, -1 with the
 * reason in `reason`. */
static int check_metadata_packets(const char *dir, char *reason, size_t n)
{
    char path[PATH_MAX];
    unsigned char h[CTF_METADATA_HEADER_BYTES];
    struct stat sb;
    uint64_t off = 0;
    uint32_t magic;
    bool swap;
    FILE *f;
    int rc = -1;

    snprintf(path, sizeof(path), "%s/metadata", dir);
    f = fopen(path, "rb");
    if (f == NULL || fstat(fileno(f), &sb) != 0) {
        snprintf(reason, n, "cannot read its metadata file: %s", strerror(errno));
        goto end;
    }
    if (fread(h, 1, 4, f) != 4) {
        snprintf(reason, n, "its metadata file is empty or too short");
        goto end;
    }
    magic = read_u32(h, false);
    if (magic != CTF_METADATA_MAGIC && magic != __builtin_bswap32(CTF_METADATA_MAGIC)) {
        rc = 0; /* text metadata, or garbage: babeltrace2 judges */
        goto end;
    }
    swap = magic != CTF_METADATA_MAGIC;
    while (off < (uint64_t)sb.st_size) {
        uint32_t content_bits, packet_bits;
        if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(h, 1, sizeof(h), f) != sizeof(h) ||
            read_u32(h, swap) != CTF_METADATA_MAGIC) {
            snprintf(reason, n, "its metadata file is truncated or damaged at byte %" PRIu64, off);
            goto end;
        }
        content_bits = read_u32(h + 24, swap);
        packet_bits = read_u32(h + 28, swap);
        if (packet_bits % 8 != 0 || packet_bits < 8 * CTF_METADATA_HEADER_BYTES ||
            content_bits > packet_bits || content_bits < 8 * CTF_METADATA_HEADER_BYTES ||
            off + packet_bits / 8 > (uint64_t)sb.st_size) {
            snprintf(reason, n, "its metadata file is truncated or damaged at byte %" PRIu64, off);
            goto end;
        }
        off += packet_bits / 8;
    }
    rc = 0;
end:
    if (f != NULL)
        fclose(f);
    return rc;
}

/* Can source.ctf.fs open the trace in `dir`?  A ctf.fs component is
 * made for it alone in a throwaway graph: its initialization parses the
 * whole metadata and reads the stream files' indexes (or packet headers).
 * Done apart because a component that fails to initialize makes its graph
 * faulty (unusable), so one broken trace would sink the report.  Not the
 * "babeltrace.trace-infos" query, which does the same work: on a damaged
 * stream file babeltrace2 2.0.4 aborts the process inside that query
 * (an error cause appended from a NULL component).  0 ok, -1 with the
 * root cause in `reason`. */
static int check_trace(const bt_component_class_source *fs, const char *dir, char *reason, size_t n)
{
    bt_graph *graph = bt_graph_create(0);
    bt_value *params = bt_value_map_create();
    bt_value *inputs = bt_value_array_create();
    const bt_component_source *src = NULL;
    int rc = -1;

    snprintf(reason, n, "out of memory");
    if (graph == NULL || params == NULL || inputs == NULL ||
        bt_value_array_append_string_element(inputs, dir) ||
        bt_value_map_insert_entry(params, "inputs", inputs))
        goto end;
    if (bt_graph_add_source_component(graph, fs, "check", params,
                                      verbose ? BT_LOGGING_LEVEL_WARNING : BT_LOGGING_LEVEL_NONE,
                                      &src) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        if (!take_bt_error(reason, n))
            snprintf(reason, n, "source.ctf.fs cannot open it");
        goto end;
    }
    rc = 0;
end:
    bt_current_thread_clear_error();
    bt_value_put_ref(inputs);
    bt_value_put_ref(params);
    bt_graph_put_ref(graph);
    return rc;
}

/* ---- damaged stream files ------------------------------------------------ */

/* A stream file that is cut (a copy that stopped, a disk that filled, a
 * process killed while consumerd wrote) or that babeltrace2 refuses makes
 * source.ctf.fs refuse the WHOLE trace in 2.0.4, at initialization ("Failed
 * to index CTF stream file" for a file that ends inside a packet; "No
 * stream class with ID ..." for packets naming a stream class the metadata
 * lacks, seen after a SIGKILL), or, cut at a packet boundary, read it
 * silently as if nothing were missing.  So before the graph exists each
 * stream file is checked here:
 *   - its packets are walked (LTTng's packet header: CTF magic at 0,
 *     content and packet size in bits at 48 and 56, in the trace's byte
 *     order): the whole packets before a cut or a damaged header are its
 *     readable part;
 *   - LTTng's index (index/NAME.idx, big-endian: a 16-byte header, then
 *     one entry per packet starting with its offset and size in bits)
 *     says how long the file was written: a file shorter than its last
 *     indexed packet's end was cut, even at a packet boundary.
 * A trace with such a file is read from a shadow directory (mkdtemp):
 * the metadata and the intact stream files as symlinks, each cut file as
 * a copy of its whole packets.  If source.ctf.fs still refuses it, each
 * stream file is tried alone and those it refuses are set aside with
 * babeltrace2's reason.  Every cut or set-aside file is named on stderr
 * with what was lost, and `report` then exits 3 (REPORT_INCOMPLETE).
 * A file whose first packet does not look like LTTng's is left to
 * babeltrace2 (the per-file trial still applies). */

#define CTF_PACKET_MAGIC 0xC1FC1FC1u
#define CTF_INDEX_MAGIC 0xC1F1DCC1u
#define LTTNG_PACKET_HEADER_BYTES 64 /* up to and with packet_size */

static uint64_t read_u64(const unsigned char *p, bool swap)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return swap ? __builtin_bswap64(v) : v;
}

static uint64_t read_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

enum stream_state { STREAM_OK, STREAM_CUT, STREAM_SET_ASIDE };

struct stream_file {
    char *name;        /* file name in its trace directory */
    uint64_t size;     /* bytes on disk */
    uint64_t whole;    /* bytes of whole packets from the start */
    uint64_t packets;  /* whole packets */
    uint64_t expected; /* bytes the index says were written (0: no index) */
    enum stream_state state;
    char why[384];
};

/* Walk the packets of `path` (`size` bytes).  Sets f->whole/packets; a
 * cut or damaged header: STREAM_CUT with the reason.  A first packet that
 * is not LTTng's layout leaves the file alone (STREAM_OK, whole = size). */
static void walk_packets(const char *path, struct stream_file *f)
{
    unsigned char h[LTTNG_PACKET_HEADER_BYTES];
    uint64_t off = 0;
    FILE *fp = fopen(path, "rb");
    bool swap = false;

    f->whole = f->size;
    f->packets = 0;
    if (fp == NULL) {
        f->state = STREAM_SET_ASIDE;
        snprintf(f->why, sizeof(f->why), "cannot be opened: %s", strerror(errno));
        return;
    }
    while (off < f->size) {
        uint64_t content, packet;
        uint32_t magic;
        if (f->size - off < sizeof(h) || fseeko(fp, (off_t)off, SEEK_SET) != 0 ||
            fread(h, 1, sizeof(h), fp) != sizeof(h)) {
            if (off == 0)
                break; /* too short to be LTTng's: babeltrace2 judges */
            snprintf(f->why, sizeof(f->why),
                     "ends %" PRIu64 " bytes into a packet header at byte %" PRIu64, f->size - off,
                     off);
            goto cut;
        }
        magic = read_u32(h, false);
        if (off == 0) {
            if (magic != CTF_PACKET_MAGIC && magic != __builtin_bswap32(CTF_PACKET_MAGIC))
                break; /* not LTTng's layout (or garbage): babeltrace2 judges */
            swap = magic != CTF_PACKET_MAGIC;
        }
        content = read_u64(h + 48, swap);
        packet = read_u64(h + 56, swap);
        if (read_u32(h, swap) != CTF_PACKET_MAGIC || packet % 8 != 0 || packet < 8 * sizeof(h) ||
            content > packet || content < 8 * sizeof(h)) {
            if (off == 0)
                break;
            snprintf(f->why, sizeof(f->why), "has a damaged packet header at byte %" PRIu64, off);
            goto cut;
        }
        if (packet / 8 > f->size - off) {
            snprintf(f->why, sizeof(f->why),
                     "ends at byte %" PRIu64 ", inside packet %" PRIu64 " (bytes %" PRIu64
                     "-%" PRIu64 ")",
                     f->size, f->packets + 1, off, off + packet / 8);
            goto cut;
        }
        off += packet / 8;
        f->packets++;
    }
    fclose(fp);
    return;
cut:
    f->state = STREAM_CUT;
    f->whole = off;
    fclose(fp);
}

/* The bytes LTTng's index for `name` says were written, or 0 (no index,
 * or one that cannot be read). */
static uint64_t index_expected(const char *dir, const char *name)
{
    char path[PATH_MAX];
    unsigned char hdr[16], e[16];
    struct stat sb;
    uint64_t len, count, end = 0;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/index/%s.idx", dir, name);
    fp = fopen(path, "rb");
    if (fp == NULL)
        return 0;
    if (fstat(fileno(fp), &sb) != 0 || fread(hdr, 1, sizeof(hdr), fp) != sizeof(hdr) ||
        read_be64(hdr) >> 32 != CTF_INDEX_MAGIC)
        goto end;
    len = read_be64(hdr + 8) & 0xffffffffu;
    if (len < sizeof(e) || (uint64_t)sb.st_size < sizeof(hdr) + len)
        goto end;
    count = ((uint64_t)sb.st_size - sizeof(hdr)) / len;
    if (fseeko(fp, (off_t)(sizeof(hdr) + (count - 1) * len), SEEK_SET) != 0 ||
        fread(e, 1, sizeof(e), fp) != sizeof(e) || read_be64(e + 8) % 8 != 0)
        goto end;
    end = read_be64(e) + read_be64(e + 8) / 8;
end:
    fclose(fp);
    return end;
}

/* What source.ctf.fs would read as stream files in `dir`: regular files
 * (symlinks followed) other than `metadata`, not hidden.  Each checked. */
static int list_streams(const char *dir, struct stream_file **out, size_t *count)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    struct stream_file *v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    *count = 0;
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        if (de->d_name[0] == '.' || strcmp(de->d_name, "metadata") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            struct stream_file *g = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));
            if (g == NULL)
                goto oom;
            v = g;
        }
        memset(&v[n], 0, sizeof(v[n]));
        v[n].name = strdup(de->d_name);
        if (v[n].name == NULL)
            goto oom;
        v[n].size = (uint64_t)sb.st_size;
        walk_packets(path, &v[n]);
        v[n].expected = index_expected(dir, de->d_name);
        if (v[n].state == STREAM_OK && v[n].expected > v[n].size) {
            v[n].state = STREAM_CUT;
            snprintf(v[n].why, sizeof(v[n].why),
                     "is shorter than its index says (%" PRIu64 " of %" PRIu64 " bytes)", v[n].size,
                     v[n].expected);
        }
        n++;
    }
    closedir(d);
    *out = v;
    *count = n;
    return 0;
oom:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    errno = ENOMEM;
    return -1;
}

static void free_streams(struct stream_file *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

/* Copy the first `n` bytes of `src` into a new file `dst`. */
static int copy_prefix(const char *src, const char *dst, uint64_t n)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    char buf[1 << 16];

    if (in < 0)
        return -1;
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        goto end;
    while (n > 0) {
        ssize_t r =
            copy_file_range(in, NULL, out, NULL, (size_t)(n < (1u << 30) ? n : (1u << 30)), 0);
        if (r < 0 &&
            (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
            r = read(in, buf, n < sizeof(buf) ? (size_t)n : sizeof(buf));
            if (r > 0 && write_all(out, buf, (size_t)r) != 0)
                goto end;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto end;
        n -= (uint64_t)r;
    }
    rc = 0;
end:
    if (out >= 0 && close(out) != 0)
        rc = -1;
    close(in);
    return rc;
}

/* Shadow directories made for damaged traces (removed at the end). */
static char *shadow_root;
static int shadow_count;

void remove_shadows(void)
{
    if (shadow_root != NULL) {
        sertrace_cli_remove_tree(shadow_root);
        free(shadow_root);
        shadow_root = NULL;
    }
}

/* A directory holding `dir`'s metadata and the streams of `v` that are not
 * set aside (only `only` when it is not SIZE_MAX): intact files as
 * symlinks, cut ones as copies of their whole packets (none when they have
 * none).  Returns a malloc'd path or NULL (errno). */
static char *make_shadow(const char *dir, struct stream_file *v, size_t n, size_t only)
{
    char path[PATH_MAX], abs_dir[PATH_MAX];
    char src[2 * PATH_MAX + 16], dst[2 * PATH_MAX + 16];

    if (realpath(dir, abs_dir) == NULL)
        return NULL;
    if (shadow_root == NULL) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof(path), "%s/sertrace-report-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(path) == NULL || (shadow_root = strdup(path)) == NULL)
            return NULL;
    }
    snprintf(path, sizeof(path), "%s/%d", shadow_root, shadow_count++);
    if (mkdir(path, 0700) != 0)
        return NULL;
    snprintf(src, sizeof(src), "%s/metadata", abs_dir);
    snprintf(dst, sizeof(dst), "%s/metadata", path);
    if (symlink(src, dst) != 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (v[i].state == STREAM_SET_ASIDE || (only != SIZE_MAX && i != only))
            continue;
        snprintf(src, sizeof(src), "%s/%s", abs_dir, v[i].name);
        snprintf(dst, sizeof(dst), "%s/%s", path, v[i].name);
        if (v[i].state == STREAM_OK ? symlink(src, dst) != 0
                                    : v[i].whole > 0 && copy_prefix(src, dst, v[i].whole) != 0)
            return NULL;
    }
    return strdup(path);
}

static void human_bytes(uint64_t b, char out[32])
{
    sertrace_cli_human_size(b, out);
}

/* Warn about each damaged stream file of `dir`; returns their number. */
static int warn_damaged(const char *dir, const struct stream_file *v, size_t n)
{
    int damaged = 0;

    for (size_t i = 0; i < n; i++) {
        char a[32], b[32];
        if (v[i].state == STREAM_CUT) {
            human_bytes(v[i].whole, a);
            if (v[i].expected > v[i].size) {
                human_bytes(v[i].expected - v[i].whole, b);
                sertrace_cli_err("warning: %s/%s %s: read its first %" PRIu64
                                 " whole packets (%s); %s written by the tracer are missing",
                                 dir, v[i].name, v[i].why, v[i].packets, a, b);
            } else {
                human_bytes(v[i].size - v[i].whole, b);
                sertrace_cli_err("warning: %s/%s %s: read its first %" PRIu64
                                 " whole packets (%s); the rest (%s) is cut off",
                                 dir, v[i].name, v[i].why, v[i].packets, a, b);
            }
            damaged++;
        } else if (v[i].state == STREAM_SET_ASIDE) {
            human_bytes(v[i].size, a);
            sertrace_cli_err("warning: %s/%s set aside (%s): its %s are not read", dir, v[i].name,
                             v[i].why, a);
            damaged++;
        }
    }
    return damaged;
}

/* Make `dir` readable by source.ctf.fs if it can be: check its stream
 * files, set aside what cannot be read, and put in *use the directory to
 * read (`dir` itself, or a shadow).  Adds the damaged files to *damaged.
 * 0 ok, -1 nothing readable (`reason` says why). */
static int readable_part(const bt_component_class_source *fs, const char *dir, char **use,
                         int *damaged, char *reason, size_t rn)
{
    struct stream_file *v = NULL;
    size_t n = 0, left = 0;
    bool shadow = false;
    char *path = NULL;
    int rc = -1;

    *use = NULL;
    if (list_streams(dir, &v, &n) != 0) {
        snprintf(reason, rn, "cannot list its stream files: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        shadow = shadow || v[i].state != STREAM_OK;
    path = shadow ? make_shadow(dir, v, n, SIZE_MAX) : strdup(dir);
    if (path == NULL) {
        snprintf(reason, rn, "cannot make a copy of its readable part: %s", strerror(errno));
        goto end;
    }
    if (check_trace(fs, path, reason, rn) != 0) {
        /* Which stream files does babeltrace2 refuse?  Each alone. */
        char why[512];
        for (size_t i = 0; i < n; i++) {
            char *one;
            if (v[i].state == STREAM_SET_ASIDE || (v[i].state == STREAM_CUT && v[i].whole == 0))
                continue;
            one = make_shadow(dir, v, n, i);
            if (one == NULL) {
                snprintf(reason, rn, "cannot make a copy of its readable part: %s",
                         strerror(errno));
                goto end;
            }
            if (check_trace(fs, one, why, sizeof(why)) != 0) {
                v[i].state = STREAM_SET_ASIDE;
                snprintf(v[i].why, sizeof(v[i].why), "babeltrace2 refuses it: %.300s", why);
            }
            free(one);
        }
        free(path);
        path = make_shadow(dir, v, n, SIZE_MAX);
        if (path == NULL) {
            snprintf(reason, rn, "cannot make a copy of its readable part: %s", strerror(errno));
            goto end;
        }
        for (size_t i = 0; i < n; i++)
            left +=
                v[i].state != STREAM_SET_ASIDE && !(v[i].state == STREAM_CUT && v[i].whole == 0);
        if (left == 0 || check_trace(fs, path, why, sizeof(why)) != 0) {
            /* keep check_trace's first reason: it names the problem; the
             * files are named, the trace counts once (skipped) */
            (void)warn_damaged(dir, v, n);
            goto end;
        }
    }
    *damaged += warn_damaged(dir, v, n);
    *use = path;
    path = NULL;
    rc = 0;
end:
    free(path);
    free_streams(v, n);
    return rc;
}

/* Find the traces under `root` and group them by UUID.  A trace that
 * cannot be read is skipped with one warning (path and reason): a stray
 * broken trace must not hide the good ones next to it.  Prints the error
 * and returns -1 when no readable trace remains. */
int discover(const char *root, const bt_component_class_source *fs, struct trace_group **out,
             int *count, int *damaged)
{
    struct stat sb;
    char **dirs = NULL;
    int n, ngroups = 0, skipped = 0, rc = -1;
    struct trace_group *groups = NULL;

    if (stat(root, &sb) != 0) {
        sertrace_cli_err("%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        sertrace_cli_err("%s is not a directory: give the trace directory (the one "
                         "`sertrace record` printed)",
                         root);
        return -1;
    }
    n = sertrace_cli_find_traces(root, &dirs);
    if (n < 0) {
        sertrace_cli_err("cannot walk %s: %s", root, strerror(errno));
        return -1;
    }
    if (n == 0) {
        sertrace_cli_err("no trace found under %s (no CTF `metadata` file): the recorded "
                         "program produced no sertrace events, or this is not a trace "
                         "directory",
                         root);
        goto end;
    }
    groups = calloc((size_t)n, sizeof(*groups));
    if (groups == NULL)
        goto end;
    for (int i = 0; i < n; i++) {
        char *group = NULL, *use = NULL, reason[512];
        double w;
        int j;
        if (check_metadata_packets(dirs[i], reason, sizeof(reason)) != 0) {
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            skipped++;
            continue;
        }
        w = support_info(fs, dirs[i], &group);
        if (w <= 0.0) {
            if (!take_bt_error(reason, sizeof(reason)))
                snprintf(reason, sizeof(reason), "its metadata file is not CTF metadata");
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            free(group);
            skipped++;
            continue;
        }
        if (readable_part(fs, dirs[i], &use, damaged, reason, sizeof(reason)) != 0) {
            sertrace_cli_err("warning: skipping %s: corrupt or unreadable trace (%s)", dirs[i],
                             reason);
            free(group);
            skipped++;
            continue;
        }
        if (group == NULL)
            group = strdup(dirs[i]);
        for (j = 0; j < ngroups; j++)
            if (group && strcmp(groups[j].group, group) == 0)
                break;
        if (j == ngroups) {
            groups[j].group = group;
            groups[j].inputs = bt_value_array_create();
            ngroups++;
            if (group == NULL || groups[j].inputs == NULL)
                goto end;
        } else {
            free(group);
        }
        if (bt_value_array_append_string_element(groups[j].inputs, use) !=
            BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK) {
            free(use);
            goto end;
        }
        free(use);
    }
    if (ngroups == 0) {
        sertrace_cli_err("no readable trace under %s (%d skipped)", root, skipped);
        goto end;
    }
    *damaged += skipped;
    rc = 0;
end:
    sertrace_cli_free_dirs(dirs, n);
    if (rc == 0) {
        *out = groups;
        *count = ngroups;
    } else {
        free_groups(groups, ngroups);
    }
    return rc;
}

/* Time span of the traces (min begin, max end over all streams), from
 * ctf.fs's "babeltrace.trace-infos" query.  0 when found. */
int trace_span(const bt_component_class_source *fs, const bt_value *inputs, int64_t *begin,
               int64_t *end)
{
    bt_value *params = bt_value_map_create();
    bt_value *copy = NULL;
    bt_query_executor *q = NULL;
    const bt_value *res = NULL;
    int rc = -1;

    if (params == NULL || bt_value_copy(inputs, &copy) != BT_VALUE_COPY_STATUS_OK ||
        bt_value_map_insert_entry(params, "inputs", copy))
        goto end;
    q = bt_query_executor_create(bt_component_class_source_as_component_class_const(fs),
                                 "babeltrace.trace-infos", params);
    if (q == NULL || bt_query_executor_query(q, &res) != BT_QUERY_EXECUTOR_QUERY_STATUS_OK ||
        !bt_value_is_array(res))
        goto end;
    for (uint64_t t = 0; t < bt_value_array_get_length(res); t++) {
        const bt_value *ti = bt_value_array_borrow_element_by_index_const(res, t);
        const bt_value *sis =
            bt_value_is_map(ti) ? bt_value_map_borrow_entry_value_const(ti, "stream-infos") : NULL;
        if (sis == NULL || !bt_value_is_array(sis))
            continue;
        for (uint64_t s = 0; s < bt_value_array_get_length(sis); s++) {
            const bt_value *si = bt_value_array_borrow_element_by_index_const(sis, s);
            const bt_value *r =
                bt_value_is_map(si) ? bt_value_map_borrow_entry_value_const(si, "range-ns") : NULL;
            const bt_value *b, *e;
            if (r == NULL || !bt_value_is_map(r))
                continue;
            b = bt_value_map_borrow_entry_value_const(r, "begin");
            e = bt_value_map_borrow_entry_value_const(r, "end");
            if (b == NULL || e == NULL || !bt_value_is_signed_integer(b) ||
                !bt_value_is_signed_integer(e))
                continue;
            if (rc != 0 || bt_value_integer_signed_get(b) < *begin)
                *begin = bt_value_integer_signed_get(b);
            if (rc != 0 || bt_value_integer_signed_get(e) > *end)
                *end = bt_value_integer_signed_get(e);
            rc = 0;
        }
    }
end:
    bt_current_thread_clear_error();
    bt_value_put_ref(res);
    bt_query_executor_put_ref(q);
    bt_value_put_ref(copy);
    bt_value_put_ref(params);
    return rc;
}
