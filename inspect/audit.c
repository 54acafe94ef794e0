/* audit.c -- judge what a pickle would import and call (see audit.h).
 *
 * The emulator reports each global, call and evasion as it meets it; this
 * file keeps one entry per (what, name) -- count, first offset, the first
 * argument shapes -- and the evasions (up to MAX_EVASIONS, the rest
 * counted), so memory follows the number of distinct names, not the size
 * of the payload.  Judging is by fnmatch(3) over three lists: the denylist
 * (known dangerous callables: always unsafe), the built-in allowlist
 * (callables that only build data) and the user's --allow patterns;
 * anything else is unknown, hence unsafe.  The writers are plain: text for
 * a terminal, JSON for scripts, SARIF 2.1.0 for code-scanning.
 */
#include "audit.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle-opcodes.h"

#define MAX_EVASIONS 1000

/* Callables that only build data. */
static const char *const builtin_allow[] = {
    "copyreg._reconstructor",
    "copyreg.__newobj__",
    "copyreg.__newobj_ex__",
    "copy_reg._reconstructor",
    "copy_reg.__newobj__",
    "builtins.set",
    "builtins.frozenset",
    "builtins.bytearray",
    "builtins.bytes",
    "builtins.complex",
    "builtins.slice",
    "builtins.range",
    "builtins.xrange",
    "builtins.list",
    "builtins.dict",
    "builtins.tuple",
    "builtins.int",
    "builtins.float",
    "builtins.str",
    "builtins.bool",
    "builtins.object",
    "_codecs.encode",
    "collections.OrderedDict",
    "collections.deque",
    "collections.defaultdict",
    "collections.Counter",
    "collections.ChainMap",
    "datetime.date",
    "datetime.time",
    "datetime.datetime",
    "datetime.timedelta",
    "datetime.timezone",
    "decimal.Decimal",
    "fractions.Fraction",
    "uuid.UUID",
    "uuid.SafeUUID",
    "array.array",
    "array._array_reconstructor",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
};

/* Known dangerous callables. */
static const char *const builtin_deny[] = {
    "os.*",
    "posix.*",
    "nt.*",
    "subprocess.*",
    "pty.*",
    "shutil.*",
    "socket.*",
    "sys.*",
    "builtins.eval",
    "builtins.exec",
    "builtins.compile",
    "builtins.getattr",
    "builtins.setattr",
    "builtins.delattr",
    "builtins.__import__",
    "builtins.open",
    "builtins.input",
    "builtins.breakpoint",
    "builtins.globals",
    "builtins.locals",
    "builtins.vars",
    "importlib.*",
    "pkgutil.resolve_name",
    "pkgutil.*",
    "runpy.*",
    "marshal.*",
    "code.*",
    "codeop.*",
    "ctypes.*",
    "types.FunctionType",
    "types.CodeType",
    "types.MethodType",
    "pickle.loads",
    "pickle.load",
    "pickle._loads",
    "pickle._load",
    "pickle.Unpickler",
    "_pickle.loads",
    "_pickle.load",
    "_pickle.Unpickler",
    "dill.loads",
    "dill.load",
    "cloudpickle.loads",
    "joblib.load",
    "operator.attrgetter",
    "operator.methodcaller",
    "operator.itemgetter",
    "functools.partial",
    "webbrowser.*",
    "asyncio.*",
    "multiprocessing.*",
    "signal.*",
    "threading.*",
    "_thread.*",
    "ensurepip.*",
    "venv.*",
    "timeit.*",
    "pdb.*",
};

enum { V_ALLOWED, V_DENIED, V_UNKNOWN };
static const char *const verdict_text[] = {"allowed", "denied", "unknown"};

typedef struct entry {
    char *name;
    char *args; /* calls: argument shapes of the first call */
    int what;   /* 0 global, else the call's opcode */
    int how;    /* globals: SERTRACE_GLOBAL_* */
    uint64_t offset, count;
    int verdict;
    const char *rule; /* the pattern that decided, or NULL */
} entry;

typedef struct evasion {
    int kind;
    uint64_t offset;
    char *detail;
    bool benign; /* a global from memoised strings that the allowlist allows:
                  * the pickler itself reuses memoised module names */
} evasion;

struct sertrace_audit {
    entry *entries;
    size_t n, cap;
    evasion *ev;
    size_t nev, evdropped;
    char **allow;
    size_t nallow;
    bool oom;
};

static const char *const how_text[] = {"GLOBAL",
                                       "STACK_GLOBAL",
                                       "STACK_GLOBAL of memoised strings",
                                       "INST",
                                       "EXT (copyreg extension code)",
                                       "getattr(global, name)"};
static const char *const evasion_text[] = {"call result discarded by POP",
                                           "BUILD on a module or class",
                                           "memo slot overwritten",
                                           "data after STOP",
                                           "pickle nested in a loads() argument",
                                           "global from memoised strings",
                                           "INST/OBJ",
                                           "callable that is not a global",
                                           "FRAME with a wrong length"};
static const char *const evasion_rule[] = {"pop-call",   "build-global",        "memo-overwrite",
                                           "after-stop", "nested-pickle",       "stack-global-memo",
                                           "inst-obj",   "non-global-callable", "frame-length"};

/* An opcode's name, from the one opcode table (pickle-format/). */
static const char *opcode_text(int op)
{
    switch (op) {
#define OPCODE_NAME_(name, value, proto, arg)                                                      \
    case value:                                                                                    \
        return #name;
        PICKLE_OPCODES(OPCODE_NAME_)
#undef OPCODE_NAME_
    default:
        return "?";
    }
}

sertrace_audit *sertrace_audit_create(void)
{
    return calloc(1, sizeof(sertrace_audit));
}

void sertrace_audit_destroy(sertrace_audit *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        free(a->entries[i].name);
        free(a->entries[i].args);
    }
    for (size_t i = 0; i < a->nev; i++)
        free(a->ev[i].detail);
    for (size_t i = 0; i < a->nallow; i++)
        free(a->allow[i]);
    free(a->entries);
    free(a->ev);
    free(a->allow);
    free(a);
}

int sertrace_audit_allow(sertrace_audit *a, const char *pattern)
{
    char **p = realloc(a->allow, (a->nallow + 1) * sizeof *p);
    if (!p)
        return -1;
    a->allow = p;
    if (!(p[a->nallow] = strdup(pattern)))
        return -1;
    a->nallow++;
    return 0;
}

static int judge(const sertrace_audit *a, const char *name, const char **rule)
{
    for (size_t i = 0; i < sizeof builtin_deny / sizeof *builtin_deny; i++)
        if (fnmatch(builtin_deny[i], name, 0) == 0) {
            *rule = builtin_deny[i];
            return V_DENIED;
        }
    for (size_t i = 0; i < sizeof builtin_allow / sizeof *builtin_allow; i++)
        if (fnmatch(builtin_allow[i], name, 0) == 0) {
            *rule = builtin_allow[i];
            return V_ALLOWED;
        }
    for (size_t i = 0; i < a->nallow; i++)
        if (fnmatch(a->allow[i], name, 0) == 0) {
            *rule = a->allow[i];
            return V_ALLOWED;
        }
    *rule = NULL;
    return V_UNKNOWN;
}

/* Find or add the entry (what, how, name).  Linear in distinct names per
 * kind would be slow for big payloads of many classes: a small hash would
 * do; distinct names stay few in practice (classes of a program). */
static entry *find(sertrace_audit *a, int what, int how, const char *name, size_t len)
{
    for (size_t i = a->n; i-- > 0;) {
        entry *x = &a->entries[i];
        if (x->what == what && x->how == how && strlen(x->name) == len &&
            memcmp(x->name, name, len) == 0)
            return x;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        entry *p = realloc(a->entries, cap * sizeof *p);
        if (!p)
            return NULL;
        a->entries = p;
        a->cap = cap;
    }
    entry *x = &a->entries[a->n];
    memset(x, 0, sizeof *x);
    if (!(x->name = strndup(name, len)))
        return NULL;
    x->what = what;
    x->how = how;
    a->n++;
    return x;
}

static int on_global(void *ctx, uint64_t offset, int how, const char *name, size_t len)
{
    sertrace_audit *a = ctx;
    entry *x = find(a, 0, how, name, len);
    if (!x)
        return -1;
    if (!x->count++) {
        x->offset = offset;
        x->verdict = judge(a, x->name, &x->rule);
    }
    return 0;
}

static int on_call(void *ctx, uint64_t offset, int opcode, const char *name, size_t len,
                   const char *args)
{
    sertrace_audit *a = ctx;
    entry *x = find(a, opcode, 0, name, len);
    if (!x)
        return -1;
    if (!x->count++) {
        x->offset = offset;
        if (!(x->args = strdup(args)))
            return -1;
        x->verdict = name[0] == '<' ? V_UNKNOWN : judge(a, x->name, &x->rule);
    }
    return 0;
}

static int on_evasion(void *ctx, uint64_t offset, int kind, const char *detail)
{
    sertrace_audit *a = ctx;
    if (a->nev >= MAX_EVASIONS) {
        a->evdropped++;
        return 0;
    }
    evasion *p = realloc(a->ev, (a->nev + 1) * sizeof *p);
    if (!p)
        return -1;
    a->ev = p;
    p[a->nev].kind = kind;
    p[a->nev].offset = offset;
    p[a->nev].benign =
        kind == SERTRACE_EVASION_STACK_GLOBAL_MEMO && a->n && a->entries[a->n - 1].what == 0 &&
        a->entries[a->n - 1].verdict == V_ALLOWED && a->entries[a->n - 1].offset <= offset;
    if (!(p[a->nev].detail = strdup(detail)))
        return -1;
    a->nev++;
    return 0;
}

void sertrace_audit_observer(sertrace_audit *a, sertrace_inspect_observer *obs)
{
    obs->ctx = a;
    obs->global = on_global;
    obs->call = on_call;
    obs->evasion = on_evasion;
}

static size_t harmful_evasions(const sertrace_audit *a)
{
    size_t k = a->evdropped;
    for (size_t i = 0; i < a->nev; i++)
        k += !a->ev[i].benign;
    return k;
}

static size_t unsafe_calls(const sertrace_audit *a)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->entries[i].what && a->entries[i].verdict != V_ALLOWED)
            k++;
    return k;
}

int sertrace_audit_verdict(const sertrace_audit *a, const sertrace_inspect_result *res)
{
    if (unsafe_calls(a) || harmful_evasions(a))
        return SERTRACE_AUDIT_UNSAFE;
    if (res->status != SERTRACE_INSPECT_OK)
        return SERTRACE_AUDIT_INCONCLUSIVE;
    return SERTRACE_AUDIT_SAFE;
}

static const char *verdict_word(int v)
{
    return v == SERTRACE_AUDIT_SAFE     ? "safe"
           : v == SERTRACE_AUDIT_UNSAFE ? "unsafe"
                                        : "inconclusive";
}

static int write_text(const sertrace_audit *a, FILE *out, const char *input,
                      const sertrace_inspect_result *res)
{
    int v = sertrace_audit_verdict(a, res);
    fprintf(out, "sertrace audit of %s: %s (%zu call%s outside the allowlist, %zu evasion%s)\n",
            strcmp(input, "-") ? input : "standard input",
            v == SERTRACE_AUDIT_SAFE     ? "SAFE"
            : v == SERTRACE_AUDIT_UNSAFE ? "UNSAFE"
                                         : "INCONCLUSIVE",
            unsafe_calls(a), unsafe_calls(a) == 1 ? "" : "s", harmful_evasions(a),
            harmful_evasions(a) == 1 ? "" : "s");
    if (res->status != SERTRACE_INSPECT_OK)
        fprintf(out, "  !! inconclusive at byte %llu: %s\n", (unsigned long long)res->offset,
                res->reason);
    fputs("globals imported:\n", out);
    for (size_t i = 0; i < a->n; i++) {
        const entry *x = &a->entries[i];
        if (!x->what)
            fprintf(out, "  byte %-8llu %-40s %s, %llu time%s\n", (unsigned long long)x->offset,
                    x->name, how_text[x->how], (unsigned long long)x->count,
                    x->count == 1 ? "" : "s");
    }
    fputs("calls:\n", out);
    for (size_t i = 0; i < a->n; i++) {
        const entry *x = &a->entries[i];
        if (x->what)
            fprintf(out, "  byte %-8llu %-9s %s%s  x%llu  %s%s%s%s\n",
                    (unsigned long long)x->offset, opcode_text(x->what), x->name, x->args,
                    (unsigned long long)x->count,
                    x->verdict == V_ALLOWED  ? "allowed"
                    : x->verdict == V_DENIED ? "DENIED"
                                             : "UNKNOWN",
                    x->rule ? " (" : "", x->rule ? x->rule : "", x->rule ? ")" : "");
    }
    if (a->nev || a->evdropped) {
        fputs("evasions:\n", out);
        for (size_t i = 0; i < a->nev; i++)
            fprintf(out, "  byte %-8llu %s: %s%s\n", (unsigned long long)a->ev[i].offset,
                    evasion_text[a->ev[i].kind], a->ev[i].detail,
                    a->ev[i].benign ? " (an allowed global: noted, not unsafe)" : "");
        if (a->evdropped)
            fprintf(out, "  … %zu more\n", a->evdropped);
    }
    return ferror(out) ? -1 : 0;
}

static int jstr(sertrace_buf *b, const char *s)
{
    return sertrace_fmt_json_string(b, s, strlen(s));
}

static int write_json(const sertrace_audit *a, sertrace_buf *b, const char *input,
                      const sertrace_inspect_result *res)
{
    int v = sertrace_audit_verdict(a, res), rc = 0;
    rc |= sertrace_buf_appendf(b, "{\"format\": \"sertrace-audit\", \"version\": 1, \"input\": ");
    rc |= jstr(b, input);
    rc |= sertrace_buf_appendf(b, ", \"verdict\": \"%s\", \"exit_status\": %d, \"complete\": %s",
                               verdict_word(v), v,
                               res->status == SERTRACE_INSPECT_OK ? "true" : "false");
    if (res->status != SERTRACE_INSPECT_OK) {
        rc |= sertrace_buf_appendf(b, ", \"inconclusive\": {\"offset\": %llu, \"reason\": ",
                                   (unsigned long long)res->offset);
        rc |= jstr(b, res->reason);
        rc |= sertrace_buf_appendf(b, "}");
    }
    rc |= sertrace_buf_appendf(b, ",\n \"globals\": [");
    int first = 1;
    for (size_t i = 0; i < a->n; i++) {
        const entry *x = &a->entries[i];
        if (x->what)
            continue;
        rc |= sertrace_buf_appendf(b, "%s\n  {\"name\": ", first ? "" : ",");
        rc |= jstr(b, x->name);
        rc |= sertrace_buf_appendf(
            b, ", \"how\": \"%s\", \"offset\": %llu, \"count\": %llu, \"verdict\": \"%s\"}",
            how_text[x->how], (unsigned long long)x->offset, (unsigned long long)x->count,
            verdict_text[x->verdict]);
        first = 0;
    }
    rc |= sertrace_buf_appendf(b, "],\n \"calls\": [");
    first = 1;
    for (size_t i = 0; i < a->n; i++) {
        const entry *x = &a->entries[i];
        if (!x->what)
            continue;
        rc |= sertrace_buf_appendf(b, "%s\n  {\"callable\": ", first ? "" : ",");
        rc |= jstr(b, x->name);
        rc |= sertrace_buf_appendf(b, ", \"opcode\": \"%s\", \"args\": ", opcode_text(x->what));
        rc |= jstr(b, x->args ? x->args : "");
        rc |= sertrace_buf_appendf(
            b, ", \"offset\": %llu, \"count\": %llu, \"verdict\": \"%s\", \"rule\": ",
            (unsigned long long)x->offset, (unsigned long long)x->count, verdict_text[x->verdict]);
        rc |= x->rule ? jstr(b, x->rule) : sertrace_buf_appendf(b, "null");
        rc |= sertrace_buf_appendf(b, "}");
        first = 0;
    }
    rc |= sertrace_buf_appendf(b, "],\n \"evasions\": [");
    for (size_t i = 0; i < a->nev; i++) {
        rc |= sertrace_buf_appendf(
            b, "%s\n  {\"kind\": \"%s\", \"offset\": %llu, \"detail\": ", i ? "," : "",
            evasion_rule[a->ev[i].kind], (unsigned long long)a->ev[i].offset);
        rc |= jstr(b, a->ev[i].detail);
        rc |= sertrace_buf_appendf(b, ", \"unsafe\": %s}", a->ev[i].benign ? "false" : "true");
    }
    rc |= sertrace_buf_appendf(b, "], \"evasions_dropped\": %zu}\n", a->evdropped);
    return rc ? -1 : 0;
}

/* One SARIF result. */
static int sarif_result(sertrace_buf *b, bool *first, const char *rule, const char *level,
                        const char *message, const char *uri, uint64_t offset)
{
    int rc = sertrace_buf_appendf(
        b, "%s\n    {\"ruleId\": \"%s\", \"level\": \"%s\", \"message\": {\"text\": ",
        *first ? "" : ",", rule, level);
    rc |= jstr(b, message);
    rc |= sertrace_buf_appendf(
        b, "}, \"locations\": [{\"physicalLocation\": {\"artifactLocation\": {\"uri\": ");
    rc |= jstr(b, uri);
    rc |= sertrace_buf_appendf(b, "}, \"region\": {\"byteOffset\": %llu, \"byteLength\": 1}}}]}",
                               (unsigned long long)offset);
    *first = false;
    return rc;
}

static int write_sarif(const sertrace_audit *a, sertrace_buf *b, const char *input,
                       const sertrace_inspect_result *res)
{
    const char *uri = strcmp(input, "-") ? input : "stdin";
    bool first = true;
    char msg[SERTRACE_STRING_MAX + 300];
    int rc = sertrace_buf_appendf(
        b,
        "{\"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\", \"version\": \"2.1.0\",\n"
        " \"runs\": [{\"tool\": {\"driver\": {\"name\": \"sertrace inspect --audit\", "
        "\"informationUri\": \"https://github.com/\", \"rules\": [\n"
        "   {\"id\": \"denied-call\", \"shortDescription\": {\"text\": \"The pickle would call a "
        "known dangerous callable\"}},\n"
        "   {\"id\": \"unknown-call\", \"shortDescription\": {\"text\": \"The pickle would call a "
        "callable outside the allowlist\"}},\n"
        "   {\"id\": \"inconclusive\", \"shortDescription\": {\"text\": \"The pickle could not be "
        "read to the end\"}}");
    for (size_t k = 0; k < sizeof evasion_rule / sizeof *evasion_rule; k++)
        rc |= sertrace_buf_appendf(b,
                                   ",\n   {\"id\": \"evasion-%s\", \"shortDescription\": "
                                   "{\"text\": \"Known scanner evasion: %s\"}}",
                                   evasion_rule[k], evasion_text[k]);
    rc |= sertrace_buf_appendf(b, "]}},\n  \"results\": [");
    for (size_t i = 0; i < a->n; i++) {
        const entry *x = &a->entries[i];
        if (!x->what || x->verdict == V_ALLOWED)
            continue;
        snprintf(msg, sizeof msg, "%s %s%s would be called (%s; %llu time%s)", opcode_text(x->what),
                 x->name, x->args ? x->args : "",
                 x->verdict == V_DENIED ? "denylist" : "not in the allowlist",
                 (unsigned long long)x->count, x->count == 1 ? "" : "s");
        rc |= sarif_result(b, &first, x->verdict == V_DENIED ? "denied-call" : "unknown-call",
                           "error", msg, uri, x->offset);
    }
    for (size_t i = 0; i < a->nev; i++) {
        char rule[64];
        if (a->ev[i].benign)
            continue;
        snprintf(rule, sizeof rule, "evasion-%s", evasion_rule[a->ev[i].kind]);
        rc |= sarif_result(b, &first, rule, "error", a->ev[i].detail, uri, a->ev[i].offset);
    }
    if (res->status != SERTRACE_INSPECT_OK)
        rc |= sarif_result(b, &first, "inconclusive", "warning", res->reason, uri, res->offset);
    rc |= sertrace_buf_appendf(b, "]}]}\n");
    return rc ? -1 : 0;
}

int sertrace_audit_write(const sertrace_audit *a, FILE *out, int format, const char *input,
                         const sertrace_inspect_result *res)
{
    sertrace_buf b = SERTRACE_BUF_INIT;
    int rc;
    if (format == SERTRACE_AUDIT_TEXT)
        return write_text(a, out, input, res);
    rc = format == SERTRACE_AUDIT_JSON ? write_json(a, &b, input, res)
                                       : write_sarif(a, &b, input, res);
    if (rc == 0 && b.len && fwrite(b.data, 1, b.len, out) != b.len)
        rc = -1;
    sertrace_buf_free(&b);
    return rc;
}
