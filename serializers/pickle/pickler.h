/* pickler.h -- internal declarations of sertrace's C pickler.
 *
 * One file per concern:
 *   output.c  the single write path: buffer, protocol-4 frames, flushing to
 *             a file, large payloads; output_pos() for byte accounting;
 *   emit.c    the opcodes with operands (ints, floats' text, length-prefixed
 *             str/bytes, memo GET/PUT, EXT, GLOBAL / PERSID lines);
 *   save.c    the step every object goes through (save_child: persistent
 *             id, trace node, error note from the child's edge) and the
 *             savers of str, bytes, tuple, list, dict, set ... by exact type;
 *   batch.c   one batching routine (APPENDS / SETITEMS / ADDITEMS) over
 *             item sources: exact list, exact dict, set, iterators;
 *   names.c   globals: name lookup, whichmodule, fix_imports, the
 *             extension registry;
 *   reduce.c  the reduce protocol: where the value comes from, NEWOBJ /
 *             NEWOBJ_EX / REDUCE, listitems / dictitems, state;
 *   memo.c    the memo: an open-addressing table keyed by the object's
 *             address, value = memo index;
 *   trace.c   node classification and type names, error notes and the
 *             error path (sertrace_error());
 *   module.c  the Python surface: Pickler type, dump(s), note(), init.
 * The savers know nothing of tracing: save.c's step does it around them.
 * Nothing here is exported from the extension module except PyInit__native.
 *
 * Contract shared by every save function: return 0 on success, a negative
 * value with a Python exception set on failure (-1, or SAVE_FAILED_REDUCED
 * from the reduce path).  Nothing is ever written after a failure: the
 * caller unwinds to dump() which discards the output.
 */
#ifndef SERTRACE_PICKLER_H
#define SERTRACE_PICKLER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "sertrace/sertrace.h"

/* Opcodes: enum pickle_opcode, OP_MARK ... (pickle-format/pickle-opcodes.h). */
#include "pickle-opcodes.h"

#define PICKLE_HIGHEST_PROTOCOL 5
#define PICKLE_DEFAULT_PROTOCOL 4
#define PICKLE_BATCHSIZE 1000
#define PICKLE_FAST_NESTING_LIMIT 50
#define PICKLE_WRITE_BUF_SIZE 4096
#define PICKLE_FRAME_SIZE_MIN 4
#define PICKLE_FRAME_SIZE_TARGET (64 * 1024)
#define PICKLE_FRAME_HEADER_SIZE 9

/* ---- memo.c ---------------------------------------------------------- */

/* hash = address >> 5: every memoizable object (str, bytes, tuple, list,
 * dict, instance ...) takes >= 32 bytes, so two of them never share a
 * first slot while the memoized objects span less than 32 x the table
 * size; with >> 3 (8-byte steps) a 56-byte tuple or str every 56 bytes hashes
 * 7 slots apart, the hashes wrap around the table ~3 times and ~1 lookup
 * in 3 collides and goes on to a perturbed probe, a cache miss (measured,
 * protocol 4, CPU time, ratio to pickle.dumps: [(i, None)] x 40,000 0.96 ->
 * 0.57, 50,000 short str 0.90 -> 0.59, builtins 0.82 -> 0.66; >> 4 and
 * >> 6 measured within a few % of >> 5).  The table layout never reaches
 * the output (indices are insertion counts). */
#define MEMO_HASH_SHIFT 5
typedef struct memo_entry {
    PyObject *key; /* strong reference; NULL = empty slot */
    Py_ssize_t value;
} memo_entry;

typedef struct memo_table {
    memo_entry *table;
    size_t mask; /* allocated - 1; allocated is a power of two */
    size_t used;
} memo_table;

int memo_init(memo_table *m);
void memo_free(memo_table *m);
void memo_clear(memo_table *m);
void memo_empty_detached(memo_table *m);
/* Address-order hashing (shift: MEMO_HASH_SHIFT): objects allocated one
 * after the other land in nearby slots, so a pickling pass (which visits
 * objects roughly in allocation order) stays in cache (a scattering hash
 * measured 7x slower on 50,000 strings, memo.c); clusters are broken by
 * dict-style perturbed probing. */
static inline memo_entry *memo_slot_(const memo_table *m, const PyObject *key)
{
    size_t hash = (size_t)(uintptr_t)key >> MEMO_HASH_SHIFT;
    size_t i = hash & m->mask;
    memo_entry *e = &m->table[i];
    if (e->key == key || e->key == NULL)
        return e;
    for (size_t perturb = hash;; perturb >>= 5) {
        i = (i << 2) + i + perturb + 1;
        e = &m->table[i & m->mask];
        if (e->key == key || e->key == NULL)
            return e;
    }
}
/* The memo index of `key`, or NULL when absent.  Never fails. */
static inline Py_ssize_t *memo_lookup(const memo_table *m, PyObject *key)
{
    memo_entry *e = memo_slot_(m, key);
    return e->key == NULL ? NULL : &e->value;
}
/* Insert or overwrite; takes a new reference to key.  -1 + MemoryError. */
int memo_set(memo_table *m, PyObject *key, Py_ssize_t value);
/* The size the table grows to from `size` slots (memo.c's growth policy). */
size_t memo_grown_size(size_t size);
/* Whether the memo holds as many entries as growth from an empty table
 * needs to reach its size (a table kept between dumps() is one growth would
 * make anyway: module.c). */
int memo_filled_for_size(const memo_table *m);
/* Insert `key` into `e`, the empty slot memo_slot_() returned for it, when
 * the memo has not changed since (saves the second probe). */
int memo_set_at(memo_table *m, memo_entry *e, PyObject *key, Py_ssize_t value);
/* A dict {id(obj): (index, obj)} like PicklerMemoProxy.copy(). */
PyObject *memo_as_dict(const memo_table *m);
/* Calls visit(arg, obj, index) for every entry, in table order; stops at
 * the first negative return (and returns -1). */
typedef int (*memo_visit)(void *arg, PyObject *obj, Py_ssize_t index);
int memo_each(const memo_table *m, memo_visit visit, void *arg);

/* ---- the pickler object ---------------------------------------------- */

/* One segment of the path of an unserializable object, recorded while the
 * error unwinds (innermost first).  Only on the error path of a traced dump. */
enum path_kind {
    PATH_INDEX,    /* list/tuple item or listitems of a reduce: [i] */
    PATH_KEY,      /* dict item: [key] (or .key right after PATH_STATE) */
    PATH_STATE,    /* the state of a reduce (instance __dict__) */
    PATH_ARGS,     /* reconstructor / __new__ arguments */
    PATH_CALLABLE, /* reconstructor, class, state setter */
    PATH_ELEMENT,  /* set / frozenset element */
};

typedef struct path_segment {
    int kind;
    Py_ssize_t index;
    PyObject *key; /* PATH_KEY: strong reference */
} path_segment;

/* Sets of pickler.label_cache (a power of 2; two entries each), and a
 * key's set: the top bits of a multiplicative hash of its address (the
 * low bits of addresses a few hundred bytes apart collide). */
#define LABEL_CACHE_BITS 6
#define LABEL_CACHE_SIZE (1 << LABEL_CACHE_BITS)
static inline size_t label_cache_slot(const void *key)
{
    return (size_t)(((uint64_t)(uintptr_t)key * UINT64_C(0x9E3779B97F4A7C15)) >>
                    (64 - LABEL_CACHE_BITS));
}
/* Slots of pickler.index_cache (a power of two). */
#define TRACE_INDEX_CACHE 64

typedef struct pickler {
    PyObject_HEAD memo_table memo;
    int memo_ready;

    /* Output: one bytes object, its capacity doubled as needed (output.c), plus frames. */
    PyObject *output_buffer;
    Py_ssize_t output_len;
    Py_ssize_t max_output_len;
    Py_ssize_t frame_start; /* -1 when no frame is open */
    int framing;
    /* Derived from the four fields above by output_sync(), so that each
     * fast path is one comparison: output_write() takes its inline path
     * while output_len + n <= write_limit (-1 when a frame must be opened
     * first), and save() reaches the slow opcode boundary only when
     * output_len >= boundary_limit (an open frame of >= 64 KiB). */
    Py_ssize_t write_limit;
    Py_ssize_t boundary_limit;
    uint64_t flushed; /* bytes of this dump already handed to file.write() */

    int dumping; /* a dump is running: re-entry (dump, __init__) is refused */
    /* Made by the module-level dumps() for itself, of the exact Pickler
     * type, never seen by Python code: it has no reducer_override, so the
     * lookup is skipped. */
    int internal;
    int proto;
    int bin;
    int fix_imports;
    int fast;
    int fast_nesting;
    PyObject *fast_memo;

    PyObject *write;            /* file.write, or NULL for dumps() */
    PyObject *pers_func;        /* persistent_id callable or function */
    PyObject *pers_func_self;   /* self when pers_func is an unbound method */
    PyObject *dispatch_table;   /* instance/class dispatch_table or NULL */
    PyObject *reducer_override; /* cached for the duration of one dump */
    PyObject *buffer_callback;

    /* The dumping thread, for the inline recursion checks (save.c). */
    PyThreadState *tstate;

    /* Tracing: NULL when nobody listens (the dormant case). */
    sertrace_dump *trace;
    unsigned trace_flags;
    /* The empty memo slot trace_classify() found for the object it just
     * classified (NULL: a memo hit, or not looked up): the traced step
     * hands it to the saver, so a node costs one memo lookup. */
    memo_entry *trace_slot;
    /* This dump's type indices of the atom types (int, float, str, bytes,
     * NoneType, bool; 0 = not interned yet), zeroed when a traced dump
     * begins: trace_leaf() looks them up once per dump, not per atom. */
    uint32_t leaf_type[6];
    /* This dump's type and name indices by key (the keys od_type_key()
     * and labels.c hand to sertrace_type_known() / sertrace_name_known()),
     * direct-mapped, zeroed when a traced dump begins: a node's type and a
     * dict key's name are found here without a call into libsertrace
     * (trace_index_cached(); a miss asks the library, which stays the one
     * table).  A dump never runs on a pickler already dumping. */
    struct trace_index_slot {
        const void *key;
        uint32_t index;
    } index_cache[TRACE_INDEX_CACHE];
    /* Error path of a traced dump. */
    int err_recorded;
    uint8_t err_tag;
    PyObject *err_type; /* strong reference to the innermost failing type */
    path_segment *path;
    Py_ssize_t path_len;
    Py_ssize_t path_cap;
    /* Edge labels of a traced dump (labels.c): the str keys interned this
     * dump (kept alive: they are interned by address) and the number of
     * the last hidden key. */
    PyObject *label_keys;
    uint64_t hidden_keys;
    /* The name index of str keys seen lately, two-way set-associative by
     * address (labels.c): a dict value's label without the library's hash
     * probe.
     * Only keys the dump has interned (kept alive, as interning by address
     * requires) enter it; emptied when the dump ends. */
    struct label_cache_entry {
        PyObject *key;
        uint32_t index;
    } label_cache[LABEL_CACHE_SIZE][2];

} pickler;

/* ---- module-wide state (module.c) ------------------------------------ */

typedef struct pickle_globals {
    PyObject *PickleError;
    PyObject *PicklingError;
    PyObject *dispatch_table;      /* copyreg.dispatch_table */
    PyObject *extension_registry;  /* copyreg._extension_registry */
    PyObject *name_mapping_3to2;   /* _compat_pickle.REVERSE_NAME_MAPPING */
    PyObject *import_mapping_3to2; /* _compat_pickle.REVERSE_IMPORT_MAPPING */
    PyObject *codecs_encode;       /* codecs.encode */
    PyObject *getattr;             /* builtins.getattr */
    PyObject *partial;             /* functools.partial */
    PyObject *class_descr;         /* object.__dict__['__class__'] (borrowed) */
    /* interned attribute names */
    PyObject *s_write, *s_persistent_id, *s_dispatch_table, *s_reducer_override;
    PyObject *s_reduce_ex, *s_reduce, *s_qualname, *s_name, *s_module, *s_class;
    PyObject *s_new, *s_newobj, *s_newobj_ex, *s_items, *s_latin1, *s_main;
    PyObject *s_modules, *s_locals, *s_dot, *s_add_note, *s_bit_length;
    PyObject *s_to_bytes, *s_little;
} pickle_globals;

extern pickle_globals G;

/* ---- output.c: the single write path --------------------------------- */

/* A fresh empty buffer of max_output_len bytes (start of a dump, and after
 * each flush to the file). */
int output_reset(pickler *p);
/* An empty output for a new configuration: keeps a buffer the pickler
 * still has, else allocates one of PICKLE_WRITE_BUF_SIZE. */
int output_start(pickler *p);
/* Recompute write_limit and boundary_limit; called by every function that
 * changes framing, frame_start, max_output_len or output_buffer. */
static inline void output_sync(pickler *p)
{
    int frame_open = p->frame_start >= 0;
    p->write_limit =
        p->output_buffer == NULL || (p->framing && !frame_open) ? -1 : p->max_output_len;
    p->boundary_limit = frame_open && p->framing
                            ? p->frame_start + PICKLE_FRAME_HEADER_SIZE + PICKLE_FRAME_SIZE_TARGET
                            : PY_SSIZE_T_MAX;
}
/* The buffer's bytes, without PyBytes_AS_STRING's assert (which debug-
 * optimised builds keep: a type check per write). */
#define OUTPUT_DATA(p) (((PyBytesObject *)(p)->output_buffer)->ob_sval)
/* Room for n bytes at the end of the output, which the caller fills at
 * once, before any other output call.  The slow part grows the buffer and
 * opens a frame when framing and none is open.  NULL + exception. */
char *output_claim_slow(pickler *p, Py_ssize_t n);
static inline __attribute__((always_inline)) char *output_claim(pickler *p, Py_ssize_t n)
{
    Py_ssize_t len = p->output_len;
    if (__builtin_expect(len + n > p->write_limit, 0))
        return output_claim_slow(p, n);
    p->output_len = len + n;
    return OUTPUT_DATA(p) + len;
}
static inline __attribute__((always_inline)) int output_write(pickler *p, const char *s,
                                                              Py_ssize_t n)
{
    char *buffer = output_claim(p, n);
    if (buffer == NULL)
        return -1;
    if (n < 8) {
        for (Py_ssize_t i = 0; i < n; i++)
            buffer[i] = s[i];
    } else {
        memcpy(buffer, s, (size_t)n);
    }
    return 0;
}
static inline __attribute__((always_inline)) int output_write_byte(pickler *p, char c)
{
    char *buffer = output_claim(p, 1);
    if (buffer == NULL)
        return -1;
    buffer[0] = c;
    return 0;
}
/* A length-prefixed payload: `head` (the opcode and its length field,
 * head_len bytes of a buffer of PICKLE_PAYLOAD_HEAD_MAX bytes, all of them
 * initialized: they may all be copied), then `data`.  A payload of >= 64 KiB
 * is written outside any frame and, with a file, handed to file.write() on
 * its own: `owner` itself when given (the bytes, bytearray or PickleBuffer
 * the data belongs to), else a copy. */
#define PICKLE_PAYLOAD_HEAD_MAX 9 /* opcode + 8-byte length */
int output_payload(pickler *p, const char *head, Py_ssize_t head_len, const char *data,
                   Py_ssize_t data_len, PyObject *owner);
/* Close the open frame, if any: write its header, or drop the header of a
 * frame shorter than PICKLE_FRAME_SIZE_MIN.  Never fails. */
void output_end_frame(pickler *p);
/* Called at the start of every object: ends a frame that reached 64 KiB
 * and, with a file, flushes it. */
int output_boundary_slow(pickler *p);
static inline int output_opcode_boundary(pickler *p)
{
    if (__builtin_expect(p->output_len < p->boundary_limit, 1))
        return 0;
    return output_boundary_slow(p);
}
/* Hand everything buffered to file.write() (the open frame ended first).
 * The buffer is given away: output_reset() before writing again. */
int output_flush(pickler *p);
/* The pickle as a bytes object (frame ended); the buffer is given away. */
PyObject *output_take_bytes(pickler *p);
/* The same for dumps() with a pickler that is kept for the next call: a
 * small pickle (<= PICKLE_WRITE_BUF_SIZE) is copied into a new bytes object
 * and the buffer stays, emptied (cheaper than shrinking the buffer and
 * allocating another next time); a larger one is given away as above. */
PyObject *output_result(pickler *p);
/* Bytes of this dump so far, as they appear in the payload: frame headers
 * count once their frame is committed (a frame shorter than 4 bytes loses
 * its header, which is therefore never counted). */
static inline uint64_t output_pos(const pickler *p)
{
    uint64_t pos = p->flushed + (uint64_t)p->output_len;
    if (p->frame_start != -1)
        pos -= PICKLE_FRAME_HEADER_SIZE;
    return pos;
}

/* ---- emit.c: opcodes with operands ------------------------------------ */

/* n little-endian bytes of v. */
static inline void put_le(char *out, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = (char)(v >> (8 * i));
}

/* An int of 32 bits, protocol >= 1: BININT1 / BININT2 / BININT, written
 * straight into the output buffer (bytes stored one by one into a stack
 * array and copied as one word stall on store forwarding: that copy was a
 * quarter of the time of a list of ints). */
static inline __attribute__((always_inline)) int emit_int32(pickler *p, long long val)
{
    uint32_t u = (uint32_t)val;
    char *out;
    if (val >= 0 && val <= 0xff) {
        if ((out = output_claim(p, 2)) == NULL)
            return -1;
        out[0] = OP_BININT1;
        out[1] = (char)u;
    } else if (val >= 0 && val <= 0xffff) {
        if ((out = output_claim(p, 3)) == NULL)
            return -1;
        out[0] = OP_BININT2;
        out[1] = (char)u;
        out[2] = (char)(u >> 8);
    } else {
        if ((out = output_claim(p, 5)) == NULL)
            return -1;
        out[0] = OP_BININT;
        out[1] = (char)u;
        out[2] = (char)(u >> 8);
        out[3] = (char)(u >> 16);
        out[4] = (char)(u >> 24);
    }
    return 0;
}
/* Any int the inline path did not take (text protocols, > 32 bits). */
int emit_long(pickler *p, PyObject *obj);
int emit_float_text(pickler *p, double x);
/* str: SHORT_BINUNICODE / BINUNICODE / BINUNICODE8 (UTF-8, lone surrogates
 * passed through), or protocol 0's UNICODE line. */
int emit_str(pickler *p, PyObject *obj);
/* bytes-like data as SHORT_BINBYTES / BINBYTES / BINBYTES8, or as
 * BYTEARRAY8; `owner` as for output_payload(). */
int emit_bytes(pickler *p, const char *data, Py_ssize_t n, PyObject *owner);
int emit_bytearray(pickler *p, const char *data, Py_ssize_t n, PyObject *owner);
/* The memo opcodes for index idx: GET/BINGET/LONG_BINGET and
 * PUT/BINPUT/LONG_BINPUT/MEMOIZE by protocol.  The one-byte forms inline
 * (a memo hit or a memoized str is a few instructions). */
int emit_memo_slow(pickler *p, Py_ssize_t idx, int put);
static inline __attribute__((always_inline)) int emit_memo_short(pickler *p, char op,
                                                                 Py_ssize_t idx)
{
    char *at = output_claim(p, 2);
    if (at == NULL)
        return -1;
    at[0] = op;
    at[1] = (char)idx;
    return 0;
}
static inline int emit_memo_get(pickler *p, Py_ssize_t idx)
{
    if (p->bin && idx < 256)
        return emit_memo_short(p, OP_BINGET, idx);
    return emit_memo_slow(p, idx, 0);
}
static inline int emit_memo_put(pickler *p, Py_ssize_t idx)
{
    if (p->proto >= 4)
        return output_write_byte(p, (char)OP_MEMOIZE); /* the index is implicit */
    if (p->bin && idx < 256)
        return emit_memo_short(p, OP_BINPUT, idx);
    return emit_memo_slow(p, idx, 1);
}
/* EXT1 / EXT2 / EXT4 (code already checked to be in 1 .. 2**31-1). */
int emit_ext(pickler *p, long code);
/* A name line of GLOBAL: UTF-8 at protocol 3, ASCII below; `what` names it
 * in the PicklingError ("module", "global"). */
int emit_name_line(pickler *p, PyObject *name, const char *what);
/* PERSID's line (protocol 0): str(pid), which must be ASCII. */
int emit_persid_text(pickler *p, PyObject *pid);

/* ---- save.c: the dispatch and the one traced step --------------------- */

/* What a child is to the object being written: the step uses it to name
 * the child in the 3.14-style error note and the trace's error path when
 * the child fails.  Passed by value: nothing is built on the happy path. */
enum edge_kind {
    EDGE_ROOT,         /* the dumped object */
    EDGE_PLAIN,        /* no note (dict key, STACK_GLOBAL names, pid, ...) */
    EDGE_PERSID,       /* a persistent id's value: no persistent_id call */
    EDGE_ITEM,         /* list / tuple / listitems item `index` */
    EDGE_VALUE,        /* the value under dict key `key` */
    EDGE_ELEMENT,      /* set / frozenset element */
    EDGE_STATE,        /* reduce state */
    EDGE_STATE_SETTER, /* reduce state setter */
    EDGE_RECONSTRUCTOR,
    EDGE_RECONSTRUCTOR_ARGS,
    EDGE_CLASS,    /* NEWOBJ / NEWOBJ_EX class */
    EDGE_NEW_ARGS, /* NEWOBJ / NEWOBJ_EX arguments */
};
typedef struct edge {
    int kind;
    PyObject *parent; /* borrowed; NULL for a reduce with no object */
    PyObject *key;    /* EDGE_VALUE: borrowed */
    Py_ssize_t index; /* EDGE_ITEM */
} edge;
#define EDGE(kind_, parent_) ((edge){.kind = (kind_), .parent = (parent_)})

/* A saver's failure: -1, or SAVE_FAILED_REDUCED when the object's own
 * reduce value was unusable or could not be written (the step then notes
 * "when serializing T object" before the edge's note). */
#define SAVE_FAILED_REDUCED (-2)

int save_child_slow(pickler *p, PyObject *obj, const edge *e);
/* save_child_slow() for a child (not the root) of a dump that traces
 * every object (SERTRACE_DUMP_ATOMS), without persistent_id. */
int save_child_atoms(pickler *p, PyObject *obj, const edge *e);
int save_child_failed(pickler *p, PyObject *obj, int status, const edge *e);
/* The object behind the inline path: everything but int / None / float /
 * bool, which are never memoized. */
int save_memoizable(pickler *p, PyObject *obj);

/* Py_EnterRecursiveCall(" while pickling an object") / Py_LeaveRecursiveCall()
 * without the calls into libpython (measured below).  3.11 (cpython/pystate.h): entering is
 * `recursion_remaining-- <= 0 && _Py_CheckRecursiveCall()`, leaving is
 * `recursion_remaining++`; 3.12 and 3.13 count C recursion apart, in
 * `c_recursion_remaining` (check due at <= 0 on 3.12, < 0 on 3.13: the
 * inline path below takes neither).  When the check is due the real
 * function runs, so limits and messages are the interpreter's own.  On
 * 3.12 the real pair costs two calls and a TLS lookup of the thread
 * state each (instances: 0.77 M instructions per dump). */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define PICKLER_RECURSION_REMAINING recursion_remaining
#elif PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000
#define PICKLER_RECURSION_REMAINING c_recursion_remaining
#endif
static inline int enter_recursive(pickler *p)
{
#if defined(PICKLER_RECURSION_REMAINING) && !defined(USE_STACKCHECK)
    PyThreadState *ts = p->tstate;
    if (__builtin_expect(ts->PICKLER_RECURSION_REMAINING > 0, 1)) {
        ts->PICKLER_RECURSION_REMAINING--;
        return 0;
    }
#else
    (void)p;
#endif
    return Py_EnterRecursiveCall(" while pickling an object");
}

static inline void leave_recursive(pickler *p)
{
#if defined(PICKLER_RECURSION_REMAINING) && !defined(USE_STACKCHECK)
    p->tstate->PICKLER_RECURSION_REMAINING++;
#else
    (void)p;
    Py_LeaveRecursiveCall();
#endif
}

/* The atoms, inline in every item loop (an atom costs no call). */
static inline __attribute__((always_inline)) int save_int(pickler *p, PyObject *obj)
{
#if PY_VERSION_HEX < 0x030C0000
    /* At most two 30-bit digits (3.11's cpython/longintrepr.h layout). */
    Py_ssize_t ndigits = Py_SIZE(obj);
    if (p->bin && ndigits >= -2 && ndigits <= 2) {
        const digit *d = ((PyLongObject *)obj)->ob_digit;
        long long mag = ndigits == 0 ? 0 : (long long)d[0];
        if (ndigits == 2 || ndigits == -2)
            mag |= (long long)d[1] << PyLong_SHIFT;
        long long val = ndigits < 0 ? -mag : mag;
        if (val <= 0x7fffffffLL && val >= -0x7fffffffLL - 1)
            return emit_int32(p, val);
    }
#endif
    return emit_long(p, obj);
}

static inline __attribute__((always_inline)) int save_float(pickler *p, PyObject *obj)
{
    double x = PyFloat_AS_DOUBLE(obj);
    if (p->bin) {
        /* Packed in place (nothing is written after a failure). */
        char *out = output_claim(p, 9);
        if (out == NULL)
            return -1;
        out[0] = OP_BINFLOAT;
        return PyFloat_Pack8(x, out + 1, 0) < 0 ? -1 : 0;
    }
    return emit_float_text(p, x);
}

static inline __attribute__((always_inline)) int save_object(pickler *p, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyLong_Type)
        return save_int(p, obj);
    if (obj == Py_None)
        return output_write_byte(p, OP_NONE);
    if (type == &PyFloat_Type)
        return save_float(p, obj);
    if (type == &PyBool_Type) {
        if (p->proto >= 2)
            return output_write_byte(p, (char)(obj == Py_True ? OP_NEWTRUE : OP_NEWFALSE));
        return output_write(p, obj == Py_True ? "I01\n" : "I00\n", 4);
    }
    return save_memoizable(p, obj);
}

/* Save `obj` as the child `e` of the object being written.  The dormant
 * case without persistent_id is inline (one branch); everything else (a
 * traced dump, persistent ids) goes through the one step of
 * save_child_slow().  On failure the edge names the child in the error
 * note and the path. */
static inline int trace_plain_atom(const pickler *p, PyObject *obj);
void trace_failed(pickler *p, PyObject *obj, uint8_t tag);

static inline __attribute__((always_inline)) int save_child(pickler *p, PyObject *obj, edge e)
{
    int status;
    /* Dormant, or traced but obj is an atom that is no node at this
     * granularity (written exactly as when dormant: the inline path). */
    if (__builtin_expect(p->pers_func == NULL && (p->trace == NULL || (e.kind != EDGE_ROOT &&
                                                                       trace_plain_atom(p, obj))),
                         1)) {
        status = output_opcode_boundary(p);
        if (__builtin_expect(status == 0, 1)) {
            status = save_object(p, obj);
            /* as save_child_slow() does for an atom that is no node */
            if (__builtin_expect(status < 0 && p->trace != NULL, 0))
                trace_failed(p, obj, 0);
        }
    } else if (p->pers_func == NULL && e.kind != EDGE_ROOT &&
               (p->trace_flags & SERTRACE_DUMP_ATOMS)) {
        status = save_child_atoms(p, obj, &e);
    } else {
        status = save_child_slow(p, obj, &e);
    }
    if (__builtin_expect(status < 0, 0)) {
        /* Only here does the edge reach memory. */
        edge failed = e;
        return save_child_failed(p, obj, status, &failed);
    }
    return 0;
}

/* save_child(p, obj, EDGE(kind, parent)) out of line: one copy (save.c)
 * for the children that are seldom atoms (a reduce's parts, the names of
 * STACK_GLOBAL and getattr chains), where the inline step at each call
 * site was code the item loops' atoms need and these do not (issue 11
 * item 5, code footprint). */
int save_child_of(pickler *p, PyObject *obj, int kind, PyObject *parent);

/* A part of an object that is no object of its own but a node in the
 * trace (a reduce's listitems / dictitems, an extension code): `write`
 * writes it; traced dumps wrap it in a node of kind `part` for `obj`. */
enum part_kind { PART_ITEMS, PART_EXT };
int save_part(pickler *p, int part, PyObject *obj, int (*write)(pickler *, void *), void *arg);

/* Memoize obj (nothing in fast mode).  `slot`: NULL, or the empty slot a
 * lookup of obj returned while nothing can have changed the memo since. */
int memo_put(pickler *p, PyObject *obj, memo_entry *slot);
/* Write the GET of a memoized obj (KeyError when it is not). */
int memo_get(pickler *p, PyObject *obj);

/* The arguments of Pickler(), dump() and dumps(), checked in the order in
 * which pickle reports a bad one: protocol, file (NULL for dumps), then
 * buffer_callback (NULL or None: none). */
int pickler_configure(pickler *p, PyObject *protocol, int fix_imports, PyObject *file,
                      PyObject *buffer_callback);
/* One whole dump: PROTO, the object, STOP, the frame ended and, when the
 * pickler has a file, the final flush to it (so a failing last write()
 * ends the trace's dump as an error); traced when a listener exists. */
int pickler_dump(pickler *p, PyObject *obj);

/* ---- batch.c: the items of containers --------------------------------- */

/* MARK ... APPENDS / SETITEMS / ADDITEMS in batches of PICKLE_BATCHSIZE,
 * from one routine over the item sources below.  `origin` names the
 * container in error notes. */
int batch_list(pickler *p, PyObject *list);                       /* exact list, proto >= 1 */
int batch_dict(pickler *p, PyObject *dict);                       /* exact dict, proto >= 1 */
int batch_set(pickler *p, PyObject *set);                         /* set, proto >= 4 */
int batch_appends(pickler *p, PyObject *iter, PyObject *origin);  /* any iterator */
int batch_setitems(pickler *p, PyObject *iter, PyObject *origin); /* (k, v) iterator */
/* frozenset, proto >= 4: MARK, every element, FROZENSET (no batches). */
int save_frozenset_items(pickler *p, PyObject *obj);

/* ---- names.c: globals ------------------------------------------------- */

/* getattr(obj, name) where AttributeError means absent (*out = NULL):
 * 1 found, 0 absent, -1 error. */
int lookup_attr(PyObject *obj, PyObject *name, PyObject **out);
/* A class, function or any object reduced to a name: GLOBAL /
 * STACK_GLOBAL / EXT / getattr reduce.  `name`: the str a __reduce__
 * returned, or NULL for obj's own __qualname__. */
int save_global(pickler *p, PyObject *obj, PyObject *name);

/* ---- reduce.c: the reduce protocol ------------------------------------ */

/* Everything that is no built-in container: reducer_override, classes,
 * functions, dispatch tables, __reduce_ex__ / __reduce__.  Returns 0, -1,
 * or SAVE_FAILED_REDUCED. */
int save_reduced(pickler *p, PyObject *obj);
/* Write a reduce tuple (callable, args[, state[, listitems[, dictitems[,
 * state_setter]]]]) for obj (NULL: nothing is memoized). */
int save_reduce_value(pickler *p, PyObject *value, PyObject *obj);

/* ---- trace.c ---------------------------------------------------------- */

enum { KEY_TYPE, KEY_SELF };
/* The node tag of obj (0: no node at this granularity) and whether it is
 * named by its type (KEY_TYPE) or by itself (KEY_SELF: globals); sets
 * p->trace_slot. */
/* trace_classify(pickler *p, PyObject *obj, int *key_kind): inline, in
 * trace-step.h. */
/* Whether obj is a plain atom (None, bool, int, float, str) that is no node
 * at this granularity: the step writes it without classification. */
static inline int trace_plain_atom(const pickler *p, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (p->trace_flags & SERTRACE_DUMP_ATOMS)
        return 0;
    return type == &PyUnicode_Type || type == &PyLong_Type || type == &PyFloat_Type ||
           obj == Py_None || type == &PyBool_Type;
}
/* A node's edge label (labels.c): a SERTRACE_LABEL_* kind (NONE: none)
 * and its value, handed to the node's one record (schema v6). */
typedef struct trace_lbl {
    uint8_t kind;
    uint64_t value;
} trace_lbl;
#define TRACE_NO_LABEL ((trace_lbl){SERTRACE_LABEL_NONE, 0})
/* trace_open(p, tag, obj, key_kind, lbl) and trace_close(p): inline, in
 * trace-step.h. */
/* The dump's index of `key` (a type key or a label's str) if interned,
 * else 0: p->index_cache first, then the library's table (types and
 * label names share it), whose hit is cached. */
static inline struct trace_index_slot *trace_index_slot_of(pickler *p, const void *key)
{
    uintptr_t k = (uintptr_t)key;
    return &p->index_cache[(k >> 4 ^ k >> 10) & (TRACE_INDEX_CACHE - 1)];
}
static inline uint32_t trace_index_cached(pickler *p, const void *key)
{
    struct trace_index_slot *s = trace_index_slot_of(p, key);
    if (__builtin_expect(s->key == key, 1))
        return s->index;
    uint32_t index = sertrace_type_known(p->trace, key);
    if (index != 0) {
        s->key = key;
        s->index = index;
    }
    return index;
}
/* Cache `index`, just interned for `key` (0: nothing to cache). */
static inline void trace_index_remember(pickler *p, const void *key, uint32_t index)
{
    struct trace_index_slot *s = trace_index_slot_of(p, key);
    if (index != 0) {
        s->key = key;
        s->index = index;
    }
}
/* od_type_intern() with the names of types named by their type cached
 * across dumps (trace.c). */
uint32_t trace_type_intern(pickler *p, PyObject *obj, int naming, const void *key);
/* Empty that cache (the module's release, module.c: module_free()). */
void trace_names_release(void);
/* A node that has no children, written from `pos` to the current output
 * position (ATOM record); `failed`: left open as a failed node instead. */
void trace_leaf(pickler *p, uint8_t tag, PyObject *obj, int key_kind, uint64_t pos, int failed,
                trace_lbl lbl);
/* Remember obj as the innermost failure (the first call of a dump wins);
 * tag 0: the atom's own tag. */
void trace_failed(pickler *p, PyObject *obj, uint8_t tag);
/* The error note of a failed child (and, when tracing, its path segment). */
void trace_note_edge(pickler *p, const edge *e);
/* "when serializing T object". */
void trace_note_object(PyObject *obj);
/* Emit the error event of a failed traced dump (path of `root`). */
void trace_report_error(pickler *p, PyObject *root);
void trace_reset_error(pickler *p);

/* ---- labels.c --------------------------------------------------------- */

/* The label of the node about to open for the child `e` (a traced dump
 * only): positions and roles inline, dict keys in labels.c. */
trace_lbl trace_label_key(pickler *p, const edge *e);
static inline trace_lbl trace_label(pickler *p, const edge *e)
{
    switch (e->kind) {
    case EDGE_ITEM:
        return (trace_lbl){SERTRACE_LABEL_POS, (uint64_t)e->index};
    case EDGE_VALUE: {
        const struct label_cache_entry *c = &p->label_cache[label_cache_slot(e->key)][0];
        if (c[0].key == e->key)
            return (trace_lbl){SERTRACE_LABEL_KEY, c[0].index};
        if (c[1].key == e->key)
            return (trace_lbl){SERTRACE_LABEL_KEY, c[1].index};
        return trace_label_key(p, e);
    }
    case EDGE_ELEMENT:
        return (trace_lbl){SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ELEMENT};
    case EDGE_STATE:
        return (trace_lbl){SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE};
    case EDGE_STATE_SETTER:
    case EDGE_RECONSTRUCTOR:
    case EDGE_CLASS:
        return (trace_lbl){SERTRACE_LABEL_ROLE, SERTRACE_ROLE_CALLABLE};
    case EDGE_RECONSTRUCTOR_ARGS:
    case EDGE_NEW_ARGS:
        return (trace_lbl){SERTRACE_LABEL_ROLE, SERTRACE_ROLE_ARGS};
    default: /* the root, dict keys, STACK_GLOBAL's names, persistent ids */
        return TRACE_NO_LABEL;
    }
}
/* Forget the dump's labels (interned keys, hidden key numbers). */
void trace_labels_end(pickler *p);

#endif /* SERTRACE_PICKLER_H */
