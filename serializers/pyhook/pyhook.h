/* serializers/pyhook/pyhook.h -- trace a pure-Python pickler class in C:
 * what the files of sertrace._pyhook share, and how they work together.
 *
 *
 * dill.Pickler and pickle._Pickler write their output in Python, so there
 * is no C save loop to instrument.  This module traces such a class without
 * editing its code: hook_class(cls) puts one small C callable into the
 * class dict in place of `dump`, which calls the original dump.
 *
 * - The dump hook first checks that the hooks can follow this pickler
 *   (untraceable_reason(): a per-instance `write`, plain attributes); if
 *   not, the dump runs untouched and leaves nothing in the trace.  Then it
 *   calls sertrace_dump_begin().  When nobody listens it gets NULL and
 *   calls the original dump untouched: that is the whole dormant cost,
 *   once per dump, nothing per object.
 * - When someone listens, for the duration of the dump only, it sets three
 *   instance attributes that shadow the class's: `pickler.save` (a C
 *   "saver" that opens a node, calls the class's save, closes the node),
 *   `pickler.write` and `pickler.framer.file_write` (C counting writers).
 *   pickle's and dill's code call `self.save(x)` / `self.write(b)`, which
 *   find the instance attributes; explicit class calls such as dill's
 *   `StockPickler.save(self, obj)` go straight to the class function, so
 *   every object gets exactly one node.  All of them are removed at the end.
 * - Byte counts: the writers count every byte the pickler produces on its
 *   own write path: bytes passed to the file plus bytes in the current
 *   protocol-4 frame, plus the bytes it writes straight to the file around
 *   that path (joblib's arrays), seen through the file's own `write`, shadowed
 *   for the dump (watch_file()).  Nothing calls file.tell(), so pipes and
 *   sockets work.  A file whose `write` cannot be shadowed gets a note and
 *   sertrace_dump_lower_bounds(): its dump's sizes are shown as "at least".
 *   The saver's enter position is taken after the frame commit that
 *   pickle's save() does first, so a FRAME header committed mid-dump counts
 *   in the enclosing object, exactly as dill's tracer counts it.
 * - Atoms (int, float, str, bytes, None, bool) are folded into their parent
 *   unless the dump asks for them (SERTRACE_DUMP_ATOMS); the dumped object
 *   is always a node.  Tags, names and lengths are serializers/objdesc's,
 *   shared with the C pickler, so the same bytes give the same tree (L, Tu,
 *   O, Mo ...), except where dill has its own tags.  The C pickler's parts
 *   are seen from outside: a reduce's listitems/dictitems (It: _batch_*
 *   shadowed, called by save_reduce), an extension code (Ext: an EXT
 *   opcode written as a global's only write), a persistent id (Pid:
 *   save_pers shadowed when the pickler has its own persistent_id).
 * - dill's tags: each dill save function calls
 *   `logger.trace(pickler, "D2: %s", ...)` on entry and
 *   `logger.trace(pickler, "# D2")` on exit.  wrap_logger() builds a C proxy
 *   for dill._dill.logger whose `trace` reads the tag from the format string
 *   (never formatting it, never calling a repr) when the pickler is being
 *   traced here; the node of an object dispatched to a dill function is
 *   opened late, at dill's own entry call, with dill's tag, and closed at
 *   dill's exit call, so it has exactly dill's byte count.  Other calls go
 *   to dill's adapter unchanged, so dill.detect.trace keeps working.
 * - When a hooked dump raises, traced or not, the exception gets the notes
 *   the C pickler (serializers/pickle) and CPython 3.14 add ("when
 *   serializing list item 5", "... State state", "... State object"), read
 *   from the exception's traceback (dump_failed()); a traced dump also gets
 *   ONE sertrace_error() with the innermost failing object's tag and type,
 *   the C pickler's message and path ("State.suspended[0].frame.stack[5][1]").
 *   All of it is built on the error path only, without user code; the
 *   trace has no object values: dict keys in the path follow od_key_text()'s
 *   rule, the message od_exception_message()'s (serializers/objdesc).
 *
 * Per-thread state: the dump being traced on this thread is found through
 * a thread-local pointer; nested dumps (a __reduce__ that pickles) push
 * their own state.  Everything runs with the GIL held.
 *
 * Files (one job each): module.c (interned names, module init), hooks.c
 * (the dump hook: traceable or not, dormant or traced, the hook type and
 * hook_class()), saver.c (the traced save(): node stack, tags, type
 * names), labels.c (edge labels, as the C pickler's), writers.c (counting writers, the watched
 * file), dill.c (dill's logger proxy and its tag messages), errors.c (notes and the error event,
 * read from the traceback).  This header holds the per-dump state, the
 * objects' structs and the functions one file calls in another; the
 * module's only export is PyInit__pyhook.
 */
#ifndef SERTRACE_PYHOOK_H
#define SERTRACE_PYHOOK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sertrace/sertrace.h"
#include "objdesc.h"

/* The array `v` of *cap elements of `elem` bytes, full, doubled (from
 * `first` when it has none) with PyMem_Realloc: the array, with *cap
 * updated, or NULL when out of memory (then `v` and *cap as they were). */
static inline void *pyhook_grow(void *v, size_t *cap, size_t elem, size_t first)
{
    size_t c = *cap ? *cap * 2 : first;
    void *a = PyMem_Realloc(v, c * elem);
    if (a != NULL)
        *cap = c;
    return a;
}

/* Attribute `name` of a wrapper object `self` (the hook, the dill logger
 * proxy): its own (its type's), else that of the object it wraps,
 * `wrapped` (none when NULL).  A new reference, or NULL (error set). */
static inline PyObject *pyhook_getattr_or_wrapped(PyObject *self, PyObject *name, PyObject *wrapped)
{
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError) && wrapped) {
        PyErr_Clear();
        r = PyObject_GetAttr(wrapped, name);
    }
    return r;
}

/* ---- interned names (module.c) ----------------------------------------- */

extern PyObject *str_write, *str_framer, *str_file_write, *str_current_frame;
extern PyObject *str_memo, *str_dispatch, *str_proto, *str_trace;
extern PyObject *str_trace_depth, *str_save, *str_dump, *str_module;
extern PyObject *str_frame_target;
extern PyObject *str_save_reduce, *str_batch_setitems, *str_batch_appends, *str_self, *str_obj;
extern PyObject *str_k, *str_v, *str_cls, *str_args, *str_kwargs, *str_func, *str_state;
extern PyObject *str_state_setter, *str_save_pers, *str_persistent_id;

/* ---- per-dump state ---------------------------------------------------- */

enum node_kind {
    NODE_PENDING, /* save() entered, enter record not emitted yet */
    NODE_OPEN,    /* enter emitted, exit at save() return */
    NODE_DILL,    /* opened by dill's entry trace: exit at dill's exit trace */
    NODE_CLOSED,  /* dill's exit trace seen; save() not returned yet */
    NODE_SYNTH,   /* a second dill entry trace inside one save() */
};

/* What a node's children are to it (labels.c): set when the node is
 * pushed (tuple, set), or by the shadowed _batch_* / save_reduce while
 * they run. */
enum child_mode {
    CHILD_NONE,    /* no label (a global's names, dill's parts ...) */
    CHILD_POS,     /* list / tuple / listitems item: its position */
    CHILD_PAIRS,   /* dict items: key (no label), then value (the key) */
    CHILD_ELEMENT, /* set / frozenset element */
    CHILD_REDUCE,  /* save_reduce's parts: callable, args, state ... */
};

typedef struct node {
    PyObject *obj;      /* borrowed: the save() caller holds it */
    uint64_t enter_pos; /* position before its first byte */
    uint32_t type;      /* sertrace type index, 0 until emitted */
    uint8_t tag;
    uint8_t kind;
    /* its own edge label, emitted just before its enter record */
    uint8_t label_kind; /* SERTRACE_LABEL_*, 0 for none; LABEL_KEY: `key` */
    uint64_t label_value;
    PyObject *key; /* borrowed (the dict or the items pair holds it) */
    /* its children's labels */
    uint8_t child_mode;
    uint64_t children;            /* save() calls made for its children so far */
    PyObject *last_key;           /* CHILD_PAIRS: the key just saved (borrowed) */
    PyObject *r_state, *r_setter; /* CHILD_REDUCE: borrowed from the call */
} node;

typedef struct writer writer;
typedef struct saver saver;

typedef struct hook_state {
    struct hook_state *prev; /* outer traced dump on this thread */
    PyObject *pickler;       /* borrowed: the dump call holds it */
    sertrace_dump *d;
    unsigned flags;
    bool atoms;
    unsigned suspended;  /* > 0 while a folded atom is written: its parts get no nodes */
    bool framed;         /* pickle-style framer found */
    bool frame_dirty;    /* re-read framer.current_frame before next write */
    bool error_reported; /* the current failure is noted (note_failure) */
    bool err_set;        /* err_tag / err_type hold the innermost failure */
    uint8_t err_tag;
    uint32_t err_type;
    int forward_dill;    /* -1 unknown, 0/1: also call dill's adapter.trace */
    uint64_t file_bytes; /* bytes passed to the file */
    uint64_t inframe;    /* bytes in the current frame (not yet in the file) */
    uint64_t frame_target;
    PyObject *framer;         /* strong */
    PyObject *frame;          /* strong: current frame object or NULL */
    PyObject *frame_write;    /* strong: its bound write, or NULL */
    PyObject *memo;           /* strong, exact dict or NULL */
    PyObject *memo_key;       /* strong: private int rewritten per probe */
    PyObject *dispatch;       /* strong, dict (or subclass) or NULL */
    saver *saver;             /* shadows pickler.save during the dump */
    PyObject *saved_own_save; /* strong: the instance's own save, or NULL */
    saver *batcher[4];     /* shadow _batch_appends / _batch_setitems / save_pers / save_reduce */
    bool persid;           /* the pickler has its own persistent_id */
    writer *w_write;       /* replaces pickler.write */
    writer *w_file;        /* replaces framer.file_write */
    PyObject *saved_write; /* strong: the instance's write (framer.write) */
    PyObject *saved_file_write; /* strong */
    PyObject *file;             /* strong: the file whose `write` w_around shadows, or NULL */
    writer *w_around;           /* file.write: bytes written straight to the file */
    PyObject *label_keys;       /* strong list: str keys interned as label names */
    uint64_t hidden_keys;       /* hidden dict keys numbered so far */
    node *nodes;
    uint32_t depth; /* entries used in nodes */
    size_t cap;
    /* Per-type answers (default tag, dispatched to a dill function), so a
     * save costs no dict lookup for a type already seen in this dump. */
    struct {
        PyTypeObject *type;
        uint32_t index; /* sertrace type index, 0 until interned */
        uint8_t tag;
        uint8_t dill;
    } tcache[64];
} hook_state;

/* The traced dump running on this thread (hooks.c). */
extern _Thread_local hook_state *tls_top;

#define TCACHE_SLOT(t) (((uintptr_t)(t) >> 4) & 63u)

/* Python 3.11 has no PyErr_GetRaisedException(): fetch and restore the
 * pending exception as one normalized object. */
typedef struct {
    PyObject *type, *value, *tb;
} saved_exc;

static inline PyObject *exc_take(saved_exc *e)
{
    PyErr_Fetch(&e->type, &e->value, &e->tb);
    if (e->type == NULL)
        return NULL;
    PyErr_NormalizeException(&e->type, &e->value, &e->tb);
    if (e->tb && e->value)
        PyException_SetTraceback(e->value, e->tb);
    return e->value;
}

static inline void exc_give_back(saved_exc *e)
{
    PyErr_Restore(e->type, e->value, e->tb);
}

static inline uint64_t st_pos(const hook_state *s)
{
    return s->file_bytes + s->inframe;
}

/* ---- counting writers (writers.c) ---------------------------------------- */

enum writer_mode { WRITER_FRAMED, WRITER_FILE, WRITER_PLAIN };

struct writer {
    PyObject_HEAD vectorcallfunc vectorcall;
    hook_state *st;
    PyObject *target; /* strong: original callable to forward to */
    int mode;
};

extern PyTypeObject writer_type;
/* Replace pickler.write / framer.file_write with counting writers (and
 * watch the file's own write); -1 if an attribute cannot be set. */
int install_writers(hook_state *s);
/* Undo install_writers() and install_saver(), free the dump's state. */
void restore_writers(hook_state *s);
bool same_callable(PyObject *a, PyObject *b);
bool write_is_class_level(PyObject *pickler, PyObject *cls_write, PyObject *w);

/* ---- the traced save and the node stack (saver.c) -------------------------- */

struct saver {
    PyObject_HEAD vectorcallfunc vectorcall;
    hook_state *st;     /* NULL once the dump ended: then just forwards */
    PyObject *pickler;  /* strong, or NULL when original is already bound */
    PyObject *original; /* strong: type(pickler).save (or the instance's own) */
};

extern PyTypeObject saver_type;
int install_saver(hook_state *s);
void remove_saver(hook_state *s);
uint32_t node_type(hook_state *s, PyObject *obj, uint8_t tag);
node *push_node(hook_state *s);
void emit_enter(hook_state *s, node *n, uint8_t tag, uint64_t pos);
void flush_pending(hook_state *s);

/* ---- edge labels (labels.c) ------------------------------------------------ */

/* Give the node about to be pushed for a save(obj) its label from its
 * parent's child mode (counts the call even when obj is folded). */
void label_child(hook_state *s, node *parent, PyObject *obj, uint8_t *kind, uint64_t *value,
                 PyObject **key);
/* A node's label (kind SERTRACE_LABEL_NONE: none), for its enter record
 * (sertrace_enter_labelled: one record, schema v6); a dict key is
 * interned or numbered here. */
void node_label(hook_state *s, node *n, uint8_t *kind, uint64_t *value);
/* The child mode a node gets when pushed for obj. */
uint8_t child_mode_of(PyObject *obj);
void labels_end(hook_state *s);

/* ---- dill (dill.c) ----------------------------------------------------------- */

/* Will obj's dispatch entry be a dill._dill save function (dill's tag)? */
bool dispatched_to_dill(hook_state *s, PyObject *obj);
/* `trace` lives in the proxy type's dict as this plain callable, not as a
 * method, so `logger.trace(...)` allocates no bound method per call. */
typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
} trace_fn;
extern PyTypeObject logger_proxy_type, trace_fn_type;
PyObject *proxy_trace(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *py_wrap_logger(PyObject *mod, PyObject *adapter);

/* ---- the error path (errors.c) ------------------------------------------------ */

void note_failure(hook_state *s, PyObject *obj, node *n);
void dump_failed(hook_state *s, PyObject *pickler, PyObject *root);

/* ---- the hooks (hooks.c) ------------------------------------------------------ */

enum hook_kind { HOOK_DUMP };

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    PyObject *original; /* strong: the function that was there */
    PyObject *owner;    /* strong: the class it is installed in */
    int kind;
    bool had_own;  /* original was in owner.__dict__ */
    char name[64]; /* serializer name for dump_begin */
} hook;

extern PyTypeObject hook_type;
PyObject *py_hook_class(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_unhook_class(PyObject *mod, PyObject *cls);
PyObject *py_is_hooked(PyObject *mod, PyObject *cls);
PyObject *py_tracing(PyObject *mod, PyObject *pickler);
PyObject *py_untraced(PyObject *mod, PyObject *unused);

#endif /* SERTRACE_PYHOOK_H */
