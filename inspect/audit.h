/* audit.h -- what a pickle would import and call, judged against lists.
 *
 * An observer of the emulator (inspect.h) that collects every global the
 * payload imports, every call it would make (REDUCE, NEWOBJ, NEWOBJ_EX,
 * INST, OBJ, BUILD) and the known evasions, aggregated by name (count and
 * first byte offset: memory grows with distinct names, not with the
 * payload), judges each callable against a built-in allowlist (callables
 * that only build data), the user's patterns, and a denylist of known
 * dangerous callables, and writes the result as text, JSON
 * ({"format": "sertrace-audit", "version": 1, ...}) or SARIF 2.1.0.
 *
 * Verdict: SERTRACE_AUDIT_SAFE (0) when every call is allowed and no
 * evasion was seen; SERTRACE_AUDIT_UNSAFE (3) when a denied or unknown
 * callable would be called or an evasion was seen; SERTRACE_AUDIT_INCONCLUSIVE
 * (4) when the bytes could not be read to the end and nothing unsafe was
 * seen before.  Patterns are fnmatch(3) globs on the full dotted name
 * ("builtins.eval", "myapp.*").  The denylist wins over every allowlist.
 */
#ifndef SERTRACE_AUDIT_H
#define SERTRACE_AUDIT_H

#include <stdio.h>

#include "inspect.h"

enum sertrace_audit_verdict {
    SERTRACE_AUDIT_SAFE = 0,
    SERTRACE_AUDIT_UNSAFE = 3,
    SERTRACE_AUDIT_INCONCLUSIVE = 4,
};

enum sertrace_audit_format { SERTRACE_AUDIT_TEXT, SERTRACE_AUDIT_JSON, SERTRACE_AUDIT_SARIF };

typedef struct sertrace_audit sertrace_audit;

/* NULL when out of memory. */
sertrace_audit *sertrace_audit_create(void);
void sertrace_audit_destroy(sertrace_audit *a);
/* Add a user allow pattern (copied).  0, or -1 (out of memory). */
int sertrace_audit_allow(sertrace_audit *a, const char *pattern);
/* The observer to give sertrace_inspect_run_observed(). */
void sertrace_audit_observer(sertrace_audit *a, sertrace_inspect_observer *obs);
/* The verdict, given the run's result. */
int sertrace_audit_verdict(const sertrace_audit *a, const sertrace_inspect_result *res);
/* Write the report; `input` names the input (a path, or "-").  0 or -1. */
int sertrace_audit_write(const sertrace_audit *a, FILE *out, int format, const char *input,
                         const sertrace_inspect_result *res);

#endif /* SERTRACE_AUDIT_H */
