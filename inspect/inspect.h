/* inspect.h -- rebuild sertrace size trees from stored pickle bytes.
 *
 * The emulator reads pickle bytes (protocols 0-5, several pickles back to
 * back) and runs the pickle machine WITHOUT importing or calling anything:
 * a stack of items, a stack of marks, the memo (PUT, BINPUT, LONG_BINPUT,
 * MEMOIZE and the GETs), frames, extension codes, out-of-band buffer
 * markers.  Every item remembers where its bytes began; every object that a
 * recording at the default granularity would show as a node (containers,
 * globals, reduce-built objects, memo hits on those, ...) gets a node whose
 * span is [first byte, last byte of the last opcode that built it].  When a
 * pickle ends (STOP), its nodes are nested by their spans -- which is the
 * nesting the pickler's save() calls had -- and handed to the tree core
 * (analyzers/core/core.h) as ordinary schema records (dump_begin, records,
 * dump_end), so every sink of `report` works on them unchanged.
 *
 * Positions follow the recording's rules (serializers/pickle/README.md,
 * "How bytes are counted"): a FRAME header's 9 bytes count when the frame
 * is committed -- at the next FRAME, or at the first opcode written outside
 * the frame (inside the node that opcode starts) -- and the header of the
 * frame holding STOP is outside the root.
 *
 * What the bytes cannot tell (see inspect/README.md): whether a global is a
 * class (T4), a function (F2) or something else (all are shown as `G` with
 * the global's name as type), whether a REDUCE object is an instance of a
 * heap type (O) or another reduce-built object (R: REDUCE gives `R`, NEWOBJ,
 * NEWOBJ_EX, INST and OBJ give `O`), and an in-band PickleBuffer (read as
 * the bytes or bytearray it is written as).
 *
 * Thread-safety: none needed; a run owns all its state.
 */
#ifndef SERTRACE_INSPECT_H
#define SERTRACE_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Limits.  Memory is counted over the emulator's own growing tables
 * (stack, marks, memo, nodes, type names); the input itself is the
 * caller's.  Beyond a limit the run stops with SERTRACE_INSPECT_LIMIT. */
typedef struct sertrace_inspect_limits {
    uint64_t max_memory; /* bytes, default SERTRACE_INSPECT_DEFAULT_MEMORY */
    uint32_t max_depth;  /* tree depth, default SERTRACE_INSPECT_DEFAULT_DEPTH */
    bool keys_all;       /* label every str dict key, as SERTRACE_KEYS=all (default: the
                          * privacy rule of schema.h, "Edge labels") */
    /* Streaming (README "Streaming"): a pickle whose root is a list, dict
     * or set is fed to the core batch by batch once this many nodes are
     * held, if the core can abort a dump (sertrace_core_can_abort); 0:
     * SERTRACE_INSPECT_DEFAULT_STREAM (or the environment's
     * SERTRACE_INSPECT_STREAM_NODES, for tests); UINT32_MAX: never. */
    uint32_t stream_nodes;
} sertrace_inspect_limits;

#define SERTRACE_INSPECT_DEFAULT_MEMORY (1024ull << 20) /* 1 GiB */
#define SERTRACE_INSPECT_DEFAULT_DEPTH 1000000u         /* the core's own limit */
#define SERTRACE_INSPECT_DEFAULT_STREAM 4096u

enum sertrace_inspect_status {
    SERTRACE_INSPECT_OK = 0,
    SERTRACE_INSPECT_MALFORMED = 1, /* truncated, unknown opcode, bad stack ... */
    SERTRACE_INSPECT_LIMIT = 2,     /* memory or depth limit reached */
    SERTRACE_INSPECT_FAILED = 3,    /* out of memory, or a visitor failed */
};

typedef struct sertrace_inspect_result {
    int status;           /* enum sertrace_inspect_status */
    uint64_t offset;      /* input offset of the opcode where it stopped */
    uint64_t dumps;       /* pickles fully read (each fed to the core) */
    uint64_t nodes;       /* nodes fed to the core */
    uint64_t peak_memory; /* largest memory the tables held (bytes) */
    char reason[200];     /* what went wrong (empty when OK) */
} sertrace_inspect_result;

/* What the payload would import and call, for the audit (`inspect
 * --audit`, audit.h).  Offsets are input offsets of the opcode.  Names are
 * `module.qualname` with "builtins." for builtins; not NUL-terminated. */
enum sertrace_inspect_global_how {
    SERTRACE_GLOBAL_OPCODE,     /* GLOBAL */
    SERTRACE_GLOBAL_STACK,      /* STACK_GLOBAL of two literal strings */
    SERTRACE_GLOBAL_STACK_MEMO, /* STACK_GLOBAL of strings read back from the memo */
    SERTRACE_GLOBAL_INST,       /* INST's class */
    SERTRACE_GLOBAL_EXT,        /* EXT1/2/4: a code from the program's copyreg registry */
    SERTRACE_GLOBAL_GETATTR,    /* getattr(global, 'name') */
};
enum sertrace_inspect_evasion {
    SERTRACE_EVASION_POP_CALL,            /* a call's result discarded by POP / POP_MARK */
    SERTRACE_EVASION_BUILD_GLOBAL,        /* BUILD on a module or class */
    SERTRACE_EVASION_MEMO_OVERWRITE,      /* a memo slot written twice */
    SERTRACE_EVASION_AFTER_STOP,          /* bytes after the first STOP */
    SERTRACE_EVASION_NESTED_PICKLE,       /* bytes given to a loads-like call */
    SERTRACE_EVASION_STACK_GLOBAL_MEMO,   /* a global named by memoised strings */
    SERTRACE_EVASION_INST_OBJ,            /* INST or OBJ */
    SERTRACE_EVASION_NON_GLOBAL_CALLABLE, /* a callable that is not a global (a call's result ...)
                                           */
    SERTRACE_EVASION_FRAME_LENGTH, /* a frame ends before an opcode no pickler writes unframed */
};
typedef struct sertrace_inspect_observer {
    void *ctx;
    /* Each returns 0, or -1 to stop the run (out of memory). */
    int (*global)(void *ctx, uint64_t offset, int how, const char *name, size_t len);
    /* `opcode` is the pickle opcode (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ,
     * BUILD); `callable` the global called (for NEWOBJ*, the class; for
     * BUILD, the type of the object built: its __setstate__), or a
     * description in <> when it is not a global; `args` the arguments'
     * shapes, e.g. "(str, int, list)". */
    int (*call)(void *ctx, uint64_t offset, int opcode, const char *callable, size_t len,
                const char *args);
    int (*evasion)(void *ctx, uint64_t offset, int kind, const char *detail);
} sertrace_inspect_observer;

/* As sertrace_inspect_run, reporting imports, calls and evasions to `obs`
 * (may be NULL); `core` may be NULL (no tree).  Bytes after the first
 * pickle are reported as SERTRACE_EVASION_AFTER_STOP when `single` is
 * true (what pickle.loads reads is the first pickle only), and read as
 * further pickles otherwise. */
int sertrace_inspect_run_observed(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                                  sertrace_core *core, const sertrace_inspect_observer *obs,
                                  bool single, sertrace_inspect_result *res);

/* Read `n` bytes of pickles back to back and feed one dump per pickle to
 * `core` (pid and tid -1, dump ids 1, 2, ...; serializer "pickle").  Each
 * pickle is fed once it is complete (or, a list, dict or set root, batch
 * by batch: `stream_nodes`, dropped again with sertrace_core_dump_abort
 * should it end otherwise); a malformed one is not fed, and the run stops
 * there.  An empty input is fine (0 dumps).
 * `lim` may be NULL (defaults).  Returns res->status. */
int sertrace_inspect_run(const uint8_t *data, size_t n, const sertrace_inspect_limits *lim,
                         sertrace_core *core, sertrace_inspect_result *res);

#endif /* SERTRACE_INSPECT_H */
