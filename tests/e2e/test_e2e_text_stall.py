"""The live text output never blocks or fails serialization (real processes).

- DISPATCH_TRACE naming a FIFO nobody reads: the C serializer's dumps return
  at once (a blocking open() would hang the first one forever), with one
  warning naming the problem, and no text.
- DISPATCH_TRACE=1 with stderr a pipe whose reader stalls: `sertrace.dumps`
  of ~6 MB of tree text completes while nobody reads; once the reader drains
  the pipe, the next dump's text goes out whole after one "bytes of trace
  text dropped" line, and the host's own stderr stays blocking.

Each child runs under a generous deadline: it detects a hang, not slowness.
Run by meson (suite 'e2e') with MINI_SERIALIZER and SERTRACE_PYTHONPATH set.
"""

import json
import os
import re
import select
import subprocess
import sys

import pytest

DEADLINE = 60  # seconds; the dumps take well under one


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPATCH_TRACE", "SERTRACE_GRANULARITY", "SERTRACE_OVERSIZE",
                        "SERTRACE_EXACT")}
    env.update(extra)
    return env


def test_fifo_without_reader_does_not_block(tmp_path):
    program = os.environ.get("MINI_SERIALIZER")
    if not program:
        pytest.skip("MINI_SERIALIZER not set (run through meson test)")
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    run = subprocess.run([program], capture_output=True, text=True, timeout=DEADLINE,
                         env=clean_env(DISPATCH_TRACE=str(fifo)))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert len(report["dumps"]) == 2  # the serializer was not affected
    assert run.stderr == (f"sertrace: warning: DISPATCH_TRACE={fifo}: a FIFO with no reader "
                          "(start the reader first); live tree off\n")
    # A reader that comes now finds nothing.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(fd, 1) == b""
    finally:
        os.close(fd)


CHILD = r"""
import os, pickle, sys, sertrace
obj = [list(range(50)) for _ in range(3000)]  # ~200 KB of text per dump
for _ in range(30):
    assert pickle.loads(sertrace.dumps(obj)) == obj
print("done", os.get_blocking(2), flush=True)
sys.stdin.readline()                           # the parent drained stderr
sertrace.dumps([[1], [2]])                     # dump 31
os.write(2, b"host line\n")                    # the host's own stderr still works
"""


def drain(fd):
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_stalled_stderr_reader_does_not_block_dumps():
    pythonpath = os.environ.get("SERTRACE_PYTHONPATH")
    if not pythonpath:
        pytest.skip("SERTRACE_PYTHONPATH not set (run through meson test)")
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=clean_env(DISPATCH_TRACE="1", PYTHONPATH=pythonpath))
    try:
        ready, _, _ = select.select([child.stdout], [], [], DEADLINE)
        assert ready, "the dumps hung on a stderr nobody reads"
        assert child.stdout.readline() == b"done True\n"  # fd 2 still blocking
        os.set_blocking(child.stderr.fileno(), False)
        before = drain(child.stderr.fileno())
        os.set_blocking(child.stderr.fileno(), True)
        child.stdin.write(b"go\n")
        child.stdin.flush()
        after = child.stderr.read()
        assert child.wait(timeout=DEADLINE) == 0, after[-2000:]
    finally:
        child.kill()
        child.wait()
    assert before.startswith(b"# sertrace dump 1 pid ")
    assert len(before) < 30 * 200_000 // 4  # most of the text had no room
    cut = not before.endswith(b"\n")
    m = re.match(rb"(\n?)# sertrace: (\d+) bytes of trace text dropped: the reader did not "
                 rb"keep up\n", after)
    assert m, after[:300]
    assert m.group(1) == (b"\n" if cut else b"")
    assert int(m.group(2)) > 1_000_000
    last = after[m.end():].decode()
    assert last.startswith("# sertrace dump 31 pid ")
    assert re.search(r"\n# end dump 31: \d+ B, ok\nhost line\n\Z", last), last
    assert "# sertrace:" not in last


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
