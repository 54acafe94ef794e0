/* tests/runtime/capture.h -- what the runtime tests share (capture.c).
 *
 * The capture: the runtime's hooks record every dump_begin, records batch
 * and dump_end into `dumps` (the suite `runtime` installs them before
 * each test and frees everything after it); decode_dump() turns a dump's
 * batches into records with a decoder written from schema.h.  Plus small
 * helpers on files for the text probe's tests.
 */
#ifndef TEST_RUNTIME_CAPTURE_H
#define TEST_RUNTIME_CAPTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_DUMPS 4096

struct batch_info {
    uint32_t seq;
    uint32_t len;
};

struct captured_dump {
    uint64_t id;
    char serializer[64];
    int32_t protocol;
    bool ended;
    uint64_t bytes;
    uint8_t status;
    uint8_t *records; /* all batches concatenated */
    size_t records_len;
    size_t records_cap;
    struct batch_info *batches;
    size_t nbatches;
};

/* A decoded record (a v8 DEPTH record is read, not kept).  v6 NODE,
 * v7 SATOM, v8 TATOM and EXIT_D records are read back
 * as the records they stand for, with absolute addresses and positions
 * and whole depths: a NODE as ENTER or ATOM, a SATOM or TATOM as ATOM (`length`
 * and `pos` as there, ATOM's size in `bytes`), preceded by a LABEL when
 * its opcode carries one (that LABEL has `folded` set), EXIT_D as EXIT.
 * `wire` is the opcode as written. */
struct rec {
    uint8_t op;
    uint8_t wire;
    bool folded;
    uint64_t bytes;
    uint8_t tag;
    uint64_t depth, type, addr, length, pos;
    char *s1, *s2; /* TYPE name / ERROR message / NOTE key ; ERROR path / NOTE value */
    size_t s1_len, s2_len;
};

struct recs {
    struct rec *v;
    size_t n;
    size_t cap;
    uint64_t open; /* open nodes after the last record: a SATOM's/TATOM's depth */
};

/* Threads of the concurrency tests (records and text). */
#define THREADS 8

/* What the hooks captured (under the capture's lock while a test runs). */
extern struct captured_dump dumps[MAX_DUMPS];
extern size_t ndumps;

/* The capture's hooks (runtime-internal.h's sertrace_internal_hooks). */
void on_begin(void *ctx, uint64_t id, const char *serializer, int32_t protocol);
void on_records(void *ctx, uint64_t id, uint32_t seq, const uint8_t *buf, uint32_t len);
void on_end(void *ctx, uint64_t id, uint64_t bytes, uint8_t status);

/* The captured dump numbered `id`, or NULL. */
struct captured_dump *find_dump(uint64_t id);
/* Its batches decoded into records (freed after the test); asserts that
 * they decode. */
struct recs decode_dump(const struct captured_dump *c);
/* The one dump captured (asserts there is exactly one, ended). */
const struct captured_dump *only_dump(void);
/* Rebuild sizes from the ENTER/EXIT records and assert they are `want`
 * (bytes per node, in enter order). */
void check_sizes(const struct recs *r, const uint64_t *want, size_t nwant);

/* ---- files, for the text probe's tests ---- */

/* All of `fd` from its start, NUL-terminated (a static buffer). */
char *read_fd_all(int fd);
/* Newlines in `s`. */
size_t count_lines(const char *s);
/* Empty the file `fd` and rewind it. */
void reset_fd(int fd);
/* A new temporary file under /tmp, its path in `path_out`: its fd. */
int temp_fd(char *path_out);

#endif /* TEST_RUNTIME_CAPTURE_H */
