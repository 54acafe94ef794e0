"""Shared by the export tests: a real trace recorded with the real
lttng-sessiond (`sertrace record`, a unique session name) of
tests/cli/dumper.c, which prints the true payload length of each dump.

Env (tests/export/meson.build): SERTRACE_BIN, SERTRACE_TEST_DUMPER,
SERTRACE_PLUGIN_PATH, SERTRACE_TEST_OUTDIR (where screenshots go).
"""
import json
import os
import re
import subprocess
import time

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")
DUMPER = os.environ.get("SERTRACE_TEST_DUMPER", "")
HANG_GUARD = 300  # seconds; only against hangs, never asserted

needs_build = pytest.mark.skipif(
    not (SERTRACE and DUMPER and os.path.exists(SERTRACE)),
    reason="run through meson (SERTRACE_BIN / SERTRACE_TEST_DUMPER)")


def run(*args, **kw):
    env = dict(os.environ)
    env.setdefault("SERTRACE_PROGRESS", "0")
    return subprocess.run([SERTRACE, *args], capture_output=True, text=True,
                          env=env, timeout=HANG_GUARD, **kw)


def record(out, *dumper_args):
    name = "export-%d-%d" % (os.getpid(), time.monotonic_ns() % 1000000)
    r = run("record", "--name", name, "-o", str(out), "--", DUMPER, *dumper_args)
    assert r.returncode == 0, r.stderr
    pid = int(re.search(r"^pid (\d+)$", r.stdout, re.M).group(1))
    sizes = {int(n): int(b) for n, b in
             re.findall(r"^dump (\d+) bytes (\d+)$", r.stdout, re.M)}
    return pid, sizes


def summary_of(trace, pid):
    r = run("report", "--json", "--pid", str(pid), str(trace))
    assert r.returncode == 0, r.stderr
    return [d for d in json.loads(r.stdout)["dumps"] if d["serializer"] == "cli-test"]


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory):
    """6 dumps of ~70 nodes; payload sizes printed by the dumper."""
    out = tmp_path_factory.mktemp("small") / "trace"
    pid, sizes = record(out, "--dumps", "6")
    assert len(sizes) == 6
    return out, pid, sizes


@pytest.fixture(scope="session")
def big_trace(tmp_path_factory):
    """One dump of about 100,000 nodes (a root of 28,572 arrays)."""
    out = tmp_path_factory.mktemp("big") / "trace"
    pid, sizes = record(out, "--dumps", "1", "--width", "28572")
    return out, pid, sizes


@pytest.fixture(scope="session")
def demo_trace(tmp_path_factory):
    """workloads/demo.py under `python3 -m sertrace run` (the traced C
    pickler): two 16-coroutine states, then one that pickle refuses (a
    cell), so the third dump fails with status error."""
    pypath = os.environ.get("SERTRACE_TEST_PYTHONPATH")
    python = os.environ.get("SERTRACE_TEST_PYTHON")
    root = os.environ.get("SERTRACE_SOURCE_ROOT")
    if not (pypath and python and root):
        pytest.skip("run through meson (SERTRACE_TEST_PYTHONPATH, SERTRACE_TEST_PYTHON)")
    out = tmp_path_factory.mktemp("demo") / "trace"
    name = "export-demo-%d-%d" % (os.getpid(), time.monotonic_ns() % 1000000)
    env = dict(os.environ, PYTHONPATH=pypath, SERTRACE_PROGRESS="0")
    r = subprocess.run([SERTRACE, "record", "--name", name, "-o", str(out), "--", python, "-m",
                        "sertrace", "run", os.path.join(root, "workloads", "demo.py")],
                       capture_output=True, text=True, env=env, timeout=HANG_GUARD)
    assert r.returncode == 0, r.stderr
    sizes = [int(b) for b in re.findall(r": (\d+) bytes$", r.stdout, re.M)]
    return out, sizes


def demo_summary(trace):
    r = run("report", "--json", str(trace))
    assert r.returncode == 0, r.stderr
    return [d for d in json.loads(r.stdout)["dumps"] if d["serializer"] == "pickle"]


def outdir():
    d = os.environ.get("SERTRACE_TEST_OUTDIR") or os.getcwd()
    os.makedirs(d, exist_ok=True)
    return d
