/* emulator-tables.c -- the pickle emulator's tables: the memory budget
 * (every table grows through emu_grow, counted against --max-memory), the
 * per-pickle type-name table (interned module.qualname strings) and the memo
 * (an array indexed by the key for the dense keys picklers write -- MEMOIZE
 * and PUT count 0, 1, 2 ... -- and an open-addressing hash keyed by the
 * 64-bit memo key for the rest, so sparse LONG_BINPUT keys cost nothing).
 */
#include "emulator-internal.h"

/* ---- the opcodes' argument codes (pickle-format/pickle-opcodes.h) -------- */

const uint8_t emu_op_arg[256] = {
#define OP_ARG_ROW_(name, value, proto, arg) [value] = (arg),
    PICKLE_OPCODES(OP_ARG_ROW_)
#undef OP_ARG_ROW_
};

/* ---- errors and memory -------------------------------------------------- */

int emu_fail(emu *e, int status, uint64_t at, const char *fmt, const char *arg)
{
    if (e->res->status == SERTRACE_INSPECT_OK) {
        e->res->status = status;
        e->res->offset = at;
        snprintf(e->res->reason, sizeof e->res->reason, fmt, arg ? arg : "");
    }
    return -1;
}

/* Grow *p (elements of `size` bytes) to hold at least `need`, counting the
 * memory against the limit.  0 or -1 (status set). */
int emu_grow(emu *e, void **p, uint32_t *cap, uint64_t need, size_t size)
{
    uint64_t ncap;
    void *q;

    if (need <= *cap)
        return 0;
    ncap = *cap ? (uint64_t)*cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX - 1)
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                        "more than %s4294967294 entries in one table", "");
    if (e->memory + (ncap - *cap) * size > e->lim->max_memory)
        return emu_fail(
            e, SERTRACE_INSPECT_LIMIT, e->base,
            "memory limit reached (the stack, memo and nodes of this pickle need more than "
            "the limit%s; raise it with --max-memory)",
            "");
    q = realloc(*p, ncap * size);
    if (!q)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
    e->memory += (ncap - *cap) * size;
    if (e->memory > e->peak)
        e->peak = e->memory;
    *p = q;
    *cap = (uint32_t)ncap;
    return 0;
}

/* ---- types ---------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int rehash_types(emu *e, uint32_t cap)
{
    uint32_t *t;
    if (e->memory + (uint64_t)cap * 4 > e->lim->max_memory)
        return emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base, "memory limit reached (type names%s)",
                        "");
    t = calloc(cap, sizeof *t);
    if (!t)
        return emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
    for (uint32_t i = 1; i <= e->ntypes; i++) {
        uint32_t h = hash_bytes(e->names + e->type_off[i], e->type_len[i]) & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    e->memory += (uint64_t)cap * 4 - (uint64_t)e->type_hash_cap * 4;
    free(e->type_hash);
    e->type_hash = t;
    e->type_hash_cap = cap;
    return 0;
}

/* The type index of `name` (module omitted for builtins), 0 on error. */
uint32_t emu_intern_type2(emu *e, const char *mod, size_t mlen, const char *name, size_t nlen)
{
    char buf[SERTRACE_STRING_MAX];
    size_t len = 0;
    uint32_t h, i;

    if (mlen && !(mlen == 8 && memcmp(mod, "builtins", 8) == 0) &&
        !(mlen == 11 && memcmp(mod, "__builtin__", 11) == 0)) {
        if (mlen > sizeof buf - 2)
            mlen = sizeof buf - 2;
        memcpy(buf, mod, mlen);
        buf[mlen] = '.';
        len = mlen + 1;
    }
    if (nlen > sizeof buf - len)
        nlen = sizeof buf - len;
    memcpy(buf + len, name, nlen);
    len += nlen;
    if (len == 0) /* a global with empty module and name: shown as "?" */
        buf[len++] = '?';

    if ((e->ntypes + 1) * 2 >= e->type_hash_cap &&
        rehash_types(e, e->type_hash_cap ? e->type_hash_cap * 2 : 64) < 0)
        return 0;
    h = hash_bytes(buf, len) & (e->type_hash_cap - 1);
    while ((i = e->type_hash[h]) != 0) {
        if (e->type_len[i] == len && memcmp(e->names + e->type_off[i], buf, len) == 0)
            return i;
        h = (h + 1) & (e->type_hash_cap - 1);
    }
    if (e->ntypes + 2 > e->cap_types) {
        uint32_t c1 = e->cap_types, c2 = e->cap_types;
        if (emu_grow(e, (void **)&e->type_off, &c1, e->ntypes + 2, sizeof *e->type_off) < 0 ||
            emu_grow(e, (void **)&e->type_len, &c2, e->ntypes + 2, sizeof *e->type_len) < 0)
            return 0;
        e->cap_types = c1 < c2 ? c1 : c2;
    }
    if (e->names_len + len > e->names_cap) {
        uint32_t cap = (uint32_t)e->names_cap;
        if (e->names_len + len > UINT32_MAX / 2) {
            emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base, "too many distinct global names%s", "");
            return 0;
        }
        if (emu_grow(e, (void **)&e->names, &cap, e->names_len + len, 1) < 0)
            return 0;
        e->names_cap = cap;
    }
    memcpy(e->names + e->names_len, buf, len);
    i = ++e->ntypes;
    e->type_off[i] = (uint32_t)e->names_len;
    e->type_len[i] = (uint32_t)len;
    e->names_len += len;
    e->type_hash[h] = i;
    return i;
}

/* Name of a global item (for REDUCE's special callables), or NULL. */
const char *emu_type_name(emu *e, uint32_t type, uint32_t *len)
{
    if (!type) {
        *len = 0;
        return NULL;
    }
    *len = e->type_len[type];
    return e->names + e->type_off[type];
}

bool emu_name_is(emu *e, uint32_t type, const char *s)
{
    uint32_t len;
    const char *n = emu_type_name(e, type, &len);
    return n && len == strlen(s) && memcmp(n, s, len) == 0;
}

/* ---- memo ----------------------------------------------------------------- */

static uint64_t hash_key(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Grow the dense array to hold `key`, if it stays dense: keys well past
 * its end, or a growth that would leave it mostly empty, go to the hash.
 * 1: grown, 0: not (use the hash), -1: limit or out of memory. */
static int grow_dense(emu *e, uint64_t key)
{
    uint64_t cap = e->dense_cap ? e->dense_cap : 1024;
    memo_entry *m;

    if (key >= 2 * cap)
        return 0;
    while (cap <= key)
        cap *= 2;
    if (e->dense_cap && (e->dense_used + 1) * 4 < cap)
        return 0; /* under a quarter used: sparse keys */
    if (e->memory + (cap - e->dense_cap) * sizeof *m > e->lim->max_memory) {
        emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                 "memory limit reached (memo%s; raise it with --max-memory)", "");
        return -1;
    }
    m = realloc(e->dense, cap * sizeof *m);
    if (!m) {
        emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
        return -1;
    }
    e->memory += (cap - e->dense_cap) * sizeof *m;
    if (e->memory > e->peak)
        e->peak = e->memory;
    e->dense = m;
    e->dense_cap = cap;
    return 1;
}

/* The memo hash's slot for `key` (the hash is never full): the key's own,
 * or the empty one where it would go. */
static inline uint64_t memo_slot(const emu *e, uint64_t key)
{
    uint64_t h = hash_key(key) & (e->memo_cap - 1);
    while (e->memo[h].used && e->memo[h].key != key)
        h = (h + 1) & (e->memo_cap - 1);
    return h;
}

static memo_entry *memo_find_hashed(emu *e, uint64_t key)
{
    uint64_t h;
    if (!e->memo_cap)
        return NULL;
    h = memo_slot(e, key);
    return e->memo[h].used ? &e->memo[h] : NULL;
}

memo_entry *emu_memo_find(emu *e, uint64_t key, bool insert)
{
    uint64_t h;

    /* The dense array, then the hash.  A key is in one of them only: one
     * that went to the hash before the array grew over it stays there. */
    if (key < e->dense_cap) {
        memo_entry *m = &e->dense[key];
        if (key < e->dense_init && m->used)
            return m;
        if (insert) {
            /* entries are zeroed as keys reach them, not when the array
             * grows: only the pages in use are touched */
            if (key >= e->dense_init) {
                memset(&e->dense[e->dense_init], 0, (key + 1 - e->dense_init) * sizeof *m);
                e->dense_init = key + 1;
            }
            memo_entry *old = e->memo_used ? memo_find_hashed(e, key) : NULL;
            if (old)
                return old;
            m->used = true;
            m->key = key;
            e->dense_used++;
            return m;
        }
    }
    if (insert && key >= e->dense_cap) {
        int g = grow_dense(e, key);
        if (g < 0)
            return NULL;
        if (g > 0)
            return emu_memo_find(e, key, true);
    }

    if (insert && (e->memo_used + 1) * 2 > e->memo_cap) {
        uint64_t cap = e->memo_cap ? e->memo_cap * 2 : 64;
        memo_entry *m;
        if (e->memory + cap * sizeof *m > e->lim->max_memory) {
            emu_fail(e, SERTRACE_INSPECT_LIMIT, e->base,
                     "memory limit reached (memo%s; raise it with --max-memory)", "");
            return NULL;
        }
        m = calloc(cap, sizeof *m);
        if (!m) {
            emu_fail(e, SERTRACE_INSPECT_FAILED, e->base, "out of memory%s", "");
            return NULL;
        }
        for (uint64_t i = 0; i < e->memo_cap; i++) {
            if (!e->memo[i].used)
                continue;
            h = hash_key(e->memo[i].key) & (cap - 1);
            while (m[h].used)
                h = (h + 1) & (cap - 1);
            m[h] = e->memo[i];
        }
        e->memory += (cap - e->memo_cap) * sizeof *m;
        if (e->memory > e->peak)
            e->peak = e->memory;
        free(e->memo);
        e->memo = m;
        e->memo_cap = cap;
    }
    if (!e->memo_cap)
        return NULL;
    h = memo_slot(e, key);
    if (e->memo[h].used)
        return &e->memo[h];
    if (!insert)
        return NULL;
    e->memo[h].used = true;
    e->memo[h].key = key;
    e->memo_used++;
    return &e->memo[h];
}
