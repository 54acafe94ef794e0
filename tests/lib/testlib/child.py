"""Run a child Python the way the tests do: the same interpreter, the
test's helper folders first on PYTHONPATH (then whatever meson gave: the
build's package), tests/lib on it too, extra environment on top.

    proc = child.run([script, "arg"], paths=[HERE], env={"DISPATCH_TRACE": path})
    proc = child.run(["-c", CODE], env=..., unset=["SERTRACE_GRANULARITY"])

Returns the subprocess.CompletedProcess (text, captured output unless
stdout= is given); never raises on a non-zero exit: the test asserts.
"""

import os
import subprocess
import sys

LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def environ(paths=(), env=None, unset=()):
    """os.environ with `paths` and tests/lib put first on PYTHONPATH, `env`
    on top, the names in `unset` removed."""
    e = dict(os.environ)
    old = [os.path.abspath(p) for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]
    first = [os.path.abspath(p) for p in paths] + [LIB]
    e["PYTHONPATH"] = os.pathsep.join(first + [p for p in old if p not in first])
    for name in unset:
        e.pop(name, None)
    e.update(env or {})
    return e


# The environment variables that turn tracing on or change what a traced
# dump records: a test that sets its own starts without the caller's.
TRACE_KNOBS = ("DISPATCH_TRACE", "SERTRACE_GRANULARITY", "SERTRACE_OVERSIZE", "SERTRACE_EXACT")


def untraced_environ(**extra):
    """os.environ without TRACE_KNOBS, `extra` on top."""
    e = {k: v for k, v in os.environ.items() if k not in TRACE_KNOBS}
    e.update(extra)
    return e


def run(args, paths=(), env=None, unset=(), timeout=600, cwd=None, **kw):
    kw.setdefault("text", True)
    if "stdout" not in kw and "stderr" not in kw:
        kw["capture_output"] = True
    return subprocess.run([sys.executable] + list(args), env=environ(paths, env, unset),
                          timeout=timeout, cwd=cwd, **kw)
