"""Helpers of test_e2e_fork.py and test_e2e_scope.py: run a Python program
under the build's `sertrace record` (a real LTTng session: the session
daemon is started by `record` if none answers) and read the trace back
with `sertrace report --json`.

Environment (set by tests/e2e/meson.build): SERTRACE_BIN (the build's
`sertrace`), SERTRACE_PLUGIN_PATH (its babeltrace2 plugin),
SERTRACE_PYTHONPATH (the build's Python package)."""

import json
import os
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("SERTRACE_BIN")
PLUGIN = os.environ.get("SERTRACE_PLUGIN_PATH")
PYPATH = os.environ.get("SERTRACE_PYTHONPATH")
PYTHON = "/usr/bin/python3"  # Debian's CPython, as users run it


def skip_unless_built():
    if not (BIN and PLUGIN and PYPATH):
        pytest.skip("run through meson test (needs the CLI, plugin and Python package)")


def env(**extra):
    e = dict(os.environ, PYTHONPATH=PYPATH, SERTRACE_PLUGIN_PATH=PLUGIN)
    for k in ("DISPATCH_TRACE", "SERTRACE_GRANULARITY", "SERTRACE_SCOPE", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(extra)
    return e


def lines(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def record_cmd(outdir, *opts):
    return [BIN, "record", *opts, "-o", outdir, "--"]


def record(prog, *args, opts=(), **extra_env):
    """Run PYTHON prog args under `sertrace record`; returns (trace dir,
    the program's JSON lines)."""
    out = tempfile.mkdtemp(prefix="sertrace-e2e-") + "/trace"
    r = subprocess.run(record_cmd(out, *opts) + [PYTHON, os.path.join(HERE, prog), *args],
                       capture_output=True, text=True, env=env(**extra_env), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    assert "0 events discarded, 0 packets lost" in r.stderr, r.stderr
    return out, lines(r.stdout)


def report_json(trace):
    r = subprocess.run([BIN, "report", "--json", trace], capture_output=True, text=True,
                       env=env(), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout)["dumps"]


def report_tree(trace):
    r = subprocess.run([BIN, "report", "--tree", trace], capture_output=True, text=True,
                       env=env(), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return r.stdout
