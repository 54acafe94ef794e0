/* pickler.h -- internal declarations of sertrace's C pickler.
 *
 * The pickler is split by concern, like CPython's Modules/_pickle.c is split
 * by section:
 *   memo.c    the memo: a purpose-built open-addressing table keyed by the
 *             object's address, value = memo index (PUT/GET number);
 *   output.c  the single write path (buffer, protocol-4 frames, flushing to
 *             a file) and the output position used for byte accounting;
 *   save.c    one save() dispatching by exact type to save_<kind>();
 *   trace.c   the traced variant of save() and the error path (notes,
 *             path string, sertrace_error());
 *   module.c  the Python surface: Pickler type, dump(s), note(), init.
 * Nothing here is exported from the extension module except PyInit__native.
 *
 * Contract shared by every save function: return 0 on success, -1 with a
 * Python exception set on failure.  Nothing is ever written after a
 * failure: the caller unwinds to dump() which discards the output.
 */
#ifndef SERTRACE_PICKLER_H
#define SERTRACE_PICKLER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "sertrace/sertrace.h"

/* Opcodes (pickletools / Lib/pickle.py names). */
enum pickle_opcode {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_POP = '0',
    OP_POP_MARK = '1',
    OP_FLOAT = 'F',
    OP_INT = 'I',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_LONG = 'L',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_PERSID = 'P',
    OP_BINPERSID = 'Q',
    OP_REDUCE = 'R',
    OP_UNICODE = 'V',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_BUILD = 'b',
    OP_GLOBAL = 'c',
    OP_DICT = 'd',
    OP_EMPTY_DICT = '}',
    OP_APPENDS = 'e',
    OP_GET = 'g',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_LIST = 'l',
    OP_EMPTY_LIST = ']',
    OP_PUT = 'p',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_PROTO = 0x80,
    OP_NEWOBJ = 0x81,
    OP_EXT1 = 0x82,
    OP_EXT2 = 0x83,
    OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
    OP_BINBYTES = 'B',
    OP_SHORT_BINBYTES = 'C',
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d,
    OP_BINBYTES8 = 0x8e,
    OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90,
    OP_FROZENSET = 0x91,
    OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95,
    OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97,
    OP_READONLY_BUFFER = 0x98,
};

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
 * size; with _pickle.c's >> 3 a 56-byte tuple or str every 56 bytes hashes
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
/* Address-order hashing, as _pickle.c's memo (with a coarser shift, see
 * MEMO_HASH_SHIFT): objects allocated one after the other land in nearby
 * slots, so a pickling pass (which visits objects roughly in allocation
 * order) stays in cache; clusters are broken by dict-style perturbed
 * probing. */
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
/* Insert `key` into `e`, the empty slot memo_slot_() returned for it, when
 * the memo has not changed since (saves the second probe). */
int memo_set_at(memo_table *m, memo_entry *e, PyObject *key, Py_ssize_t value);
/* A dict {id(obj): (index, obj)} like PicklerMemoProxy.copy(). */
PyObject *memo_as_dict(const memo_table *m);

/* ---- the pickler object ---------------------------------------------- */

/* One segment of the path of an unserializable object, recorded while the
 * error unwinds (innermost first).  Only on the error path of a traced dump. */
enum path_kind {
    PATH_INDEX,       /* list/tuple item or listitems of a reduce: [i] */
    PATH_KEY,         /* dict item: [key] (or .key right after PATH_STATE) */
    PATH_STATE,       /* the state of a reduce (instance __dict__) */
    PATH_ARGS,        /* reconstructor / __new__ arguments */
    PATH_CALLABLE,    /* reconstructor, class, state setter */
    PATH_ELEMENT,     /* set / frozenset element */
};

typedef struct path_segment {
    int kind;
    Py_ssize_t index;
    PyObject *key; /* PATH_KEY: strong reference */
} path_segment;

typedef struct pickler {
    PyObject_HEAD
    memo_table memo;
    int memo_ready;

    /* Output: one bytes object grown like _pickle.c's, plus frames. */
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
    /* Error path of a traced dump. */
    int err_recorded;
    uint8_t err_tag;
    PyObject *err_type; /* strong reference to the innermost failing type */
    path_segment *path;
    Py_ssize_t path_len;
    Py_ssize_t path_cap;

} pickler;

/* ---- module-wide state (module.c) ------------------------------------ */

typedef struct pickle_globals {
    PyObject *PickleError;
    PyObject *PicklingError;
    PyObject *dispatch_table;       /* copyreg.dispatch_table */
    PyObject *extension_registry;   /* copyreg._extension_registry */
    PyObject *name_mapping_3to2;    /* _compat_pickle.REVERSE_NAME_MAPPING */
    PyObject *import_mapping_3to2;  /* _compat_pickle.REVERSE_IMPORT_MAPPING */
    PyObject *codecs_encode;        /* codecs.encode */
    PyObject *getattr;              /* builtins.getattr */
    PyObject *partial;              /* functools.partial */
    PyObject *class_descr;          /* object.__dict__['__class__'] (borrowed) */
    /* interned attribute names */
    PyObject *s_write, *s_persistent_id, *s_dispatch_table, *s_reducer_override;
    PyObject *s_reduce_ex, *s_reduce, *s_qualname, *s_name, *s_module, *s_class;
    PyObject *s_new, *s_newobj, *s_newobj_ex, *s_items, *s_latin1, *s_main;
    PyObject *s_modules, *s_locals, *s_dot, *s_add_note, *s_bit_length;
    PyObject *s_to_bytes, *s_little;
} pickle_globals;

extern pickle_globals G;
extern PyTypeObject pickler_type;

/* ---- output.c -------------------------------------------------------- */

int output_reset(pickler *p);
/* Recompute write_limit and boundary_limit; called by every function that
 * changes framing, frame_start, max_output_len or output_buffer. */
static inline void output_sync(pickler *p)
{
    p->write_limit = (p->framing && p->frame_start == -1) || p->output_buffer == NULL
                         ? -1
                         : p->max_output_len;
    p->boundary_limit = p->framing && p->frame_start != -1
                            ? p->frame_start + PICKLE_FRAME_HEADER_SIZE + PICKLE_FRAME_SIZE_TARGET
                            : PY_SSIZE_T_MAX;
}
/* The buffer's bytes, without PyBytes_AS_STRING's assert (which debug-
 * optimised builds keep: a type check per write). */
#define OUTPUT_DATA(p) (((PyBytesObject *)(p)->output_buffer)->ob_sval)
/* The single write path: room for n bytes at the end of the output, which
 * the caller fills at once (before any other output call); opens a frame
 * first when framing and none is open.  NULL + exception on failure. */
char *output_claim_slow(pickler *p, Py_ssize_t n);
static inline __attribute__((always_inline)) char *output_claim(pickler *p, Py_ssize_t n)
{
    Py_ssize_t len = p->output_len;
    if (__builtin_expect(len + n > p->write_limit, 0))
        return output_claim_slow(p, n);
    p->output_len = len + n;
    return OUTPUT_DATA(p) + len;
}
static inline __attribute__((always_inline)) int output_write(pickler *p, const char *s, Py_ssize_t n)
{
    char *buffer = output_claim(p, n);
    if (buffer == NULL)
        return -1;
    if (n < 8) {
        for (Py_ssize_t i = 0; i < n; i++)
            buffer[i] = s[i];
    }
    else {
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
/* Header + payload; payloads >= FRAME_SIZE_TARGET bypass the frame (and,
 * with a file, the buffer: they are handed to write() directly). */
int output_write_bytes(pickler *p, const char *header, Py_ssize_t header_size,
                       const char *data, Py_ssize_t data_size, PyObject *payload);
int output_commit_frame(pickler *p);
/* Called at the start of every save(): commits a frame >= 64 KiB and, with a
 * file, flushes it. */
int output_opcode_boundary_slow(pickler *p);
static inline int output_opcode_boundary(pickler *p)
{
    if (__builtin_expect(p->output_len < p->boundary_limit, 1))
        return 0;
    return output_opcode_boundary_slow(p);
}
int output_flush_to_file(pickler *p);
/* The buffer as a bytes object (frame committed); the pickler's buffer is
 * given away. */
PyObject *output_take_bytes(pickler *p);
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

/* ---- save.c ---------------------------------------------------------- */

int pickler_set_protocol(pickler *p, PyObject *protocol, int fix_imports);
int pickler_set_buffer_callback(pickler *p, PyObject *buffer_callback);
int pickler_set_output(pickler *p, PyObject *file);
/* One whole dump: PROTO, the object, STOP, frame commit and, when the
 * pickler has a file, the final flush to it (so a failing last write()
 * ends the trace's dump as an error); traced when a listener exists. */
int pickler_dump(pickler *p, PyObject *obj);
/* The untraced body of save() after the persistent-id check. */
int save(pickler *p, PyObject *obj, int pers_save);
int save_dispatch(pickler *p, PyObject *obj);
int save_pers(pickler *p, PyObject *obj);
int save_global(pickler *p, PyObject *obj, PyObject *name);
int memo_get(pickler *p, PyObject *obj);

/* ---- trace.c --------------------------------------------------------- */

int save_traced(pickler *p, PyObject *obj, int pers_save);
/* Whether save() may write `obj` on its short traced path: a plain atom
 * (None, bool, int, float, str) that is no node at this granularity and
 * goes through no persistent_id.  Three objects in four are such atoms;
 * they never save() anything themselves, so nothing can be traced while
 * they are written. */
static inline int trace_plain_atom(const pickler *p, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (p->pers_func != NULL || (p->trace_flags & SERTRACE_DUMP_ATOMS))
        return 0;
    return type == &PyUnicode_Type || type == &PyLong_Type || type == &PyFloat_Type ||
           obj == Py_None || type == &PyBool_Type;
}
/* The short path's failure: remember the atom as the innermost failure. */
void trace_atom_failed(pickler *p, PyObject *obj);
/* Open/close a node around something the caller writes (PERSID, EXT). */
void trace_open(pickler *p, uint8_t tag, PyObject *obj, PyObject *type_key);
void trace_close(pickler *p);
/* Error path: add a 3.14-style note "when serializing <T> <what>" to the
 * current exception and, when tracing, remember a path segment. */
void error_note_index(pickler *p, PyObject *container, Py_ssize_t i);
void error_note_key(pickler *p, PyObject *container, PyObject *key);
void error_note_element(pickler *p, PyObject *container);
void error_note_reduce(pickler *p, PyObject *obj, const char *what, int kind);
void error_note_object(pickler *p, PyObject *obj);
/* Emit the error event of a failed traced dump (path of `root`). */
void trace_report_error(pickler *p, PyObject *root);
void trace_reset_error(pickler *p);

#endif /* SERTRACE_PICKLER_H */
