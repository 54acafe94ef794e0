"""What `sertrace record` records (issue 12 item 7), end to end.

CMD (family_prog.py) has descendants of every kind: a forked child (no
exec), a subprocess child and grandchild (exec), a multiprocessing 'spawn'
and a 'forkserver' process.  An unrelated sertrace process (other_prog.py,
started by the test, not by CMD) dumps while the session records: the test
waits for CMD's "ready" line, makes the other process dump, and only then
lets CMD go on, so the other dump always falls inside the session.

- default: CMD and every descendant recorded (each dump under the pid that
  printed it, exact size), the unrelated process not;
- --all-processes: the unrelated process's dump is recorded too;
- --cmd-only: CMD's own process only;
- --cmd-only with --all-processes: usage error (exit 2).
"""

import json
import os
import subprocess
import tempfile
from collections import Counter

import pytest

from e2e_record import (HERE, PYTHON, env, lines, record_cmd, report_json,
                        skip_unless_built)


@pytest.fixture(autouse=True)
def built():
    skip_unless_built()


def run_with_other(*opts):
    """Record family_prog.py with OPTS while other_prog.py dumps once inside
    the session.  Returns (trace, family lines, other's pid, other's len)."""
    other = subprocess.Popen([PYTHON, os.path.join(HERE, "other_prog.py")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env())
    try:
        other_pid = json.loads(other.stdout.readline())["pid"]
        out = tempfile.mkdtemp(prefix="sertrace-e2e-") + "/trace"
        cmd = subprocess.Popen(record_cmd(out, *opts) +
                               [PYTHON, os.path.join(HERE, "family_prog.py"), "0"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env())
        ready = json.loads(cmd.stdout.readline())
        assert "ready" in ready, ready
        other.stdin.write("inside\n")
        other.stdin.flush()
        other_len = json.loads(other.stdout.readline())["len"]
        stdout, stderr = cmd.communicate("go\n", timeout=300)
        assert cmd.returncode == 0, (cmd.returncode, stdout[-2000:], stderr[-3000:])
        assert "0 events discarded, 0 packets lost" in stderr, stderr
    finally:
        other.stdin.close()
        other.wait(timeout=60)
    family = [l for l in lines(stdout) if "who" in l]
    return out, ready["ready"], family, other_pid, other_len


def by_pid(dumps):
    return Counter((d["pid"], d["payload_bytes"]) for d in dumps)


def test_default_records_cmd_and_descendants_only():
    trace, cmd_pid, family, other_pid, _ = run_with_other()
    who = {l["who"]: l["pid"] for l in family}
    assert set(who) == {"depth0", "depth1", "depth2", "forked", "spawn", "forkserver"}, family
    assert who["depth0"] == cmd_pid
    assert len(set(who.values())) == 6  # six processes
    dumps = report_json(trace)
    assert by_pid(dumps) == Counter((l["pid"], l["len"]) for l in family)
    assert other_pid not in {d["pid"] for d in dumps}
    assert all(d["complete"] for d in dumps), dumps


def test_all_processes_records_the_unrelated_process_too():
    trace, cmd_pid, family, other_pid, other_len = run_with_other("--all-processes")
    dumps = report_json(trace)
    got = by_pid(dumps)
    assert got[(other_pid, other_len)] == 1, sorted(got.items())
    for l in family:  # the family as well, whatever else ran meanwhile
        assert got[(l["pid"], l["len"])] >= 1, (l, sorted(got.items()))


def test_cmd_only_records_cmd_alone():
    trace, cmd_pid, family, other_pid, _ = run_with_other("--cmd-only")
    assert len({l["pid"] for l in family}) == 6
    dumps = report_json(trace)
    assert {d["pid"] for d in dumps} == {cmd_pid}
    assert by_pid(dumps) == Counter((l["pid"], l["len"]) for l in family
                                    if l["pid"] == cmd_pid)


def test_cmd_only_and_all_processes_is_a_usage_error():
    out = tempfile.mkdtemp(prefix="sertrace-e2e-") + "/trace"
    r = subprocess.run(record_cmd(out, "--cmd-only", "--all-processes") + ["true"],
                       capture_output=True, text=True, env=env(), timeout=60)
    assert r.returncode == 2, r
    assert "--cmd-only and --all-processes" in r.stderr
    assert not os.path.exists(out)


def test_record_help_says_what_is_recorded():
    from e2e_record import BIN
    r = subprocess.run([BIN, "record", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "CMD and its descendants" in text
    assert "--all-processes" in text and "--cmd-only" in text
