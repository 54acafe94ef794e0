/* emulator-observe.c -- the audit's view of the emulator: the hooks that
 * tell the observer (sertrace_inspect_observer) of each global, call and
 * evasion with full names and argument shapes, and the pickles nested in the
 * bytes argument of a loads() call, audited in turn with their offsets
 * shifted into the outer input.
 */
#include "emulator-internal.h"

/* ---- audit hooks ------------------------------------------------------------ */

int emu_obs_evasion(emu *e, uint64_t at, int kind, const char *detail)
{
    if (!e->obs || !e->obs->evasion)
        return 0;
    if (e->obs->evasion(e->obs->ctx, at, kind, detail) < 0)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

/* The full name of a global's type index ("builtins." added to bare names). */
size_t emu_full_name(emu *e, uint32_t type, char *buf, size_t cap)
{
    int n;
    if (!type)
        return (size_t)snprintf(buf, cap, "?");
    const char *name = e->names + e->type_off[type];
    uint32_t len = e->type_len[type];
    if (memchr(name, '.', len))
        n = snprintf(buf, cap, "%.*s", (int)len, name);
    else
        n = snprintf(buf, cap, "builtins.%.*s", (int)len, name);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

int emu_obs_global(emu *e, uint64_t at, int how, uint32_t type)
{
    char buf[SERTRACE_STRING_MAX + 16];
    size_t len;
    if (!e->obs || !e->obs->global)
        return 0;
    len = emu_full_name(e, type, buf, sizeof buf);
    if (e->obs->global(e->obs->ctx, at, how, buf, len) < 0)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

const char *emu_shape_name(uint8_t tag)
{
    switch (tag) {
    case SERTRACE_TAG_STR:
        return "str";
    case SERTRACE_TAG_BYTES:
        return "bytes";
    case SERTRACE_TAG_INT:
        return "int";
    case SERTRACE_TAG_FLOAT:
        return "float";
    case SERTRACE_TAG_ATOM:
        return "None/bool";
    case SERTRACE_TAG_LIST:
        return "list";
    case SERTRACE_TAG_DICT:
        return "dict";
    case SERTRACE_TAG_TUPLE:
        return "tuple";
    case SERTRACE_TAG_SET:
        return "set";
    case SERTRACE_TAG_FROZENSET:
        return "frozenset";
    case SERTRACE_TAG_BYTEARRAY:
        return "bytearray";
    case SERTRACE_TAG_GLOBAL:
        return "global";
    case SERTRACE_TAG_MEMO:
        return "memo ref";
    case SERTRACE_TAG_PICKLEBUFFER:
        return "buffer";
    case SERTRACE_TAG_PERSID:
        return "persistent id";
    default:
        return "object";
    }
}

/* "(str, int, …)" for a tuple item, "<list>" for anything else. */
static void describe_args(const item *a, const node *nodes, char *buf, size_t cap)
{
    size_t n = 0;
    if (!a) {
        snprintf(buf, cap, "?");
        return;
    }
    if (a->node == NO_NODE || nodes[a->node].tag != SERTRACE_TAG_TUPLE) {
        snprintf(buf, cap, "<%s, not a tuple>",
                 emu_shape_name(a->node == NO_NODE ? a->tag : nodes[a->node].tag));
        return;
    }
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (uint32_t i = 0; i < a->nargs && i < 4 && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", emu_shape_name(a->shape[i]));
    if (a->nargs > 4 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ", … %u in all", a->nargs);
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
}

int emu_obs_call(emu *e, uint64_t at, int opcode, const item *fn, const item *args,
                 const char *args_text)
{
    char name[SERTRACE_STRING_MAX + 16], shape[160];
    size_t len;
    if (!e->obs || !e->obs->call)
        return 0;
    if (fn && fn->global && fn->type)
        len = emu_full_name(e, fn->type, name, sizeof name);
    else if (fn && fn->type && fn->tag != SERTRACE_TAG_GLOBAL && opcode == 'b')
        len = emu_full_name(e, fn->type, name, sizeof name);
    else
        len = (size_t)snprintf(
            name, sizeof name, "<%s>",
            fn ? (fn->call_result ? "the result of a call" : emu_shape_name(fn->tag)) : "?");
    if (args_text)
        snprintf(shape, sizeof shape, "%s", args_text);
    else
        describe_args(args, e->nodes, shape, sizeof shape);
    if (e->obs->call(e->obs->ctx, at, opcode, name, len, shape) < 0)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, at, "out of memory (audit)%s", "");
    return 0;
}

/* ---- pickles nested in loads() arguments --------------------------------------- */

typedef struct shift_ctx {
    const sertrace_inspect_observer *inner;
    uint64_t shift;
} shift_ctx;

static int shift_global(void *c, uint64_t off, int how, const char *n, size_t l)
{
    shift_ctx *s = c;
    return s->inner->global ? s->inner->global(s->inner->ctx, off + s->shift, how, n, l) : 0;
}

static int shift_call(void *c, uint64_t off, int op, const char *n, size_t l, const char *a)
{
    shift_ctx *s = c;
    return s->inner->call ? s->inner->call(s->inner->ctx, off + s->shift, op, n, l, a) : 0;
}

static int shift_evasion(void *c, uint64_t off, int kind, const char *d)
{
    shift_ctx *s = c;
    return s->inner->evasion ? s->inner->evasion(s->inner->ctx, off + s->shift, kind, d) : 0;
}

/* REDUCE of a `*.loads` global with bytes as first argument: the bytes are a
 * pickle the call would unpickle; audit them too (offsets in this input). */
int emu_audit_nested(emu *e, const op *o, const item *fn, const item *args)
{
    uint32_t len;
    const char *name = emu_type_name(e, fn->type, &len);
    char d[SERTRACE_STRING_MAX + 200];
    sertrace_inspect_result r2;

    if (!name || len < 5 || memcmp(name + len - 5, "loads", 5) != 0)
        return 0;
    snprintf(d, sizeof d,
             "a pickle nested in the bytes argument of %.*s (%u bytes at offset %llu, audited too)",
             (int)len, name, args->arg0_len, (unsigned long long)(args->arg0_off));
    if (emu_obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE, d) < 0)
        return -1;
    if (e->nesting >= MAX_NESTING)
        return emu_obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE,
                               "pickles nested more than 4 deep: the innermost was not audited");
    shift_ctx sc = {e->obs, args->arg0_off};
    sertrace_inspect_observer w = {&sc, shift_global, shift_call, shift_evasion};
    emu_run_internal(e->in + args->arg0_off, args->arg0_len, e->lim, NULL, &w, true, e->nesting + 1,
                     &r2);
    if (r2.status == SERTRACE_INSPECT_FAILED)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, o->at, "%s", r2.reason);
    if (r2.status != SERTRACE_INSPECT_OK) {
        snprintf(d, sizeof d, "the nested pickle is inconclusive at its byte %llu: %s",
                 (unsigned long long)r2.offset, r2.reason);
        return emu_obs_evasion(e, o->at, SERTRACE_EVASION_NESTED_PICKLE, d);
    }
    return 0;
}
