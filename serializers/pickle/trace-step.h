/* serializers/pickle/trace-step.h -- the traced step's per-node calls,
 * inline: classification (its memo lookup handed on in p->trace_slot),
 * opening and closing a node.  Included by save.c (the step) and trace.c;
 * what trace.c says about them holds (it is their description).  Inline
 * because they run on every traced node: as calls they cost their
 * prologues and the spills around them on top of their own work.
 */
#ifndef SERTRACE_PICKLE_TRACE_STEP_H
#define SERTRACE_PICKLE_TRACE_STEP_H

#include "pickler.h"
#include "objdesc.h"

/* ---- classification --------------------------------------------------- */

/* The tag of `obj` at the default granularity (0 = not traced), and
 * whether it is named by its type or by itself (globals). */
static inline uint8_t trace_classify(pickler *p, PyObject *obj, int *key_kind)
{
    uint8_t tag = od_tag(obj, (p->trace_flags & SERTRACE_DUMP_ATOMS) != 0);

    *key_kind = KEY_TYPE; /* the naming follows from the tag (od_naming) */
    p->trace_slot = NULL;
    if (tag == 0 || tag == SERTRACE_TAG_ATOM || tag == SERTRACE_TAG_INT ||
        tag == SERTRACE_TAG_FLOAT)
        return tag; /* never memoized */
    memo_entry *slot = memo_slot_(&p->memo, obj);
    if (slot->key != NULL)
        return SERTRACE_TAG_MEMO;
    p->trace_slot = slot;
    return tag;
}

/* od_type_index() through the pickler's per-dump index cache. */
static inline uint32_t type_index(pickler *p, PyObject *obj, uint8_t tag)
{
    int naming = od_naming(obj, tag);
    const void *key = od_type_key(obj, naming);
    uint32_t index = trace_index_cached(p, key);
    if (index == 0) {
        index = trace_type_intern(p, obj, naming, key);
        trace_index_remember(p, key, index);
    }
    return index;
}

static inline void trace_open(pickler *p, uint8_t tag, PyObject *obj, int key_kind, trace_lbl lbl)
{
    (void)key_kind;
    uint32_t type = type_index(p, obj, tag);
    uint64_t length = tag == SERTRACE_TAG_ITEMS ? 0 : od_length(obj);
    sertrace_enter_fast(p->trace, tag, type, (uintptr_t)obj, length, output_pos(p), lbl.kind,
                        lbl.value);
}

static inline void trace_close(pickler *p)
{
    sertrace_exit_fast(p->trace, output_pos(p));
}

#endif /* SERTRACE_PICKLE_TRACE_STEP_H */
