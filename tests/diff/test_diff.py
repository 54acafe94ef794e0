"""`sertrace diff` (issue 15 item 1) on a scheduler-like state
(sched_prog.py): the state, the same state with a new dict attribute on
every coroutine record (`grown`), the same state with every dict's order
reversed (`reordered`).

With trace directories (recorded by the build's `sertrace record` under a
real LTTng session) and with pickle files (read through `inspect`):
- grown: the TOTAL delta equals the difference of the real payload lengths,
  and (traces) the new pattern `Scheduler.coros[*].trace_ctx` is a [NEW]
  row with the exact bytes the pickle format gives;
- reordered: TOTAL delta 0 and no row shown (patterns normalise keys);
- --fail-if-grows 1 exits 3 for the grown state, 0 for the same state;
- --budget: exit 3 over a pattern's budget, 0 within it;
- swapped: the pattern is [DEL], the TOTAL delta negative;
- usage errors exit 2, an unreadable input 1."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import e2e_record as er  # noqa: E402

PROG = "sched_prog.py"
N = 40  # records in sched_prog.py


def run_diff(*args):
    r = subprocess.run([er.BIN, "diff", *args], capture_output=True, text=True, env=er.env(),
                       timeout=300)
    return r


def diff_json(a, b, *opts):
    r = run_diff("--json", *opts, a, b)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout)


def trace_ctx_bytes():
    # per record, protocol 4: EMPTY_DICT 1, MEMOIZE 1, the key 'id' (the
    # first record: SHORT_BINUNICODE 1+1+2 and MEMOIZE 1; the others a
    # BINGET of 2), BININT1 2 (i < 256), SETITEM 1
    first = 1 + 1 + (1 + 1 + 2 + 1) + 2 + 1
    other = 1 + 1 + 2 + 2 + 1
    return first + (N - 1) * other


@pytest.fixture(scope="module")
def traces():
    er.skip_unless_built()
    out = {}
    for v in ("base", "grown", "reordered"):
        trace, lines = record(os.path.join(HERE, PROG), v)
        out[v] = (trace, lines[0]["payload"])
    return out


def record(path, *args):
    """e2e_record.record for a program outside tests/e2e."""
    d = tempfile.mkdtemp(prefix="sertrace-diff-") + "/trace"
    r = subprocess.run(er.record_cmd(d) + [er.PYTHON, path, *args], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    assert "0 events discarded, 0 packets lost" in r.stderr, r.stderr
    return d, er.lines(r.stdout)


@pytest.fixture(scope="module")
def pickles(tmp_path_factory):
    er.skip_unless_built()
    d = tmp_path_factory.mktemp("pkl")
    out = {}
    for v in ("base", "grown", "reordered"):
        f = str(d / (v + ".pkl"))
        r = subprocess.run([er.PYTHON, os.path.join(HERE, PROG), v, f], capture_output=True,
                           text=True, env=er.env(), timeout=120)
        assert r.returncode == 0, r.stderr
        payload = json.loads(r.stdout)["payload"]
        assert os.path.getsize(f) == payload
        out[v] = (f, payload)
    return out


def rows(doc):
    (g,) = doc["groups"]
    return {(r["kind"], r["name"]): r for r in g["rows"]}


@pytest.fixture(params=["traces", "pickles"])
def states(request):
    return request.getfixturevalue(request.param), request.param


def test_grown_total_is_the_payload_difference(states):
    s, kind = states
    (a, pa), (b, pb) = s["base"], s["grown"]
    assert pb > pa
    doc = diff_json(a, b)
    assert doc["total"]["a"] == pa and doc["total"]["b"] == pb
    assert doc["total"]["delta"] == pb - pa
    assert not doc["grouped"]


def test_grown_new_pattern_exact_bytes(traces):
    (a, _), (b, _) = traces["base"], traces["grown"]
    r = rows(diff_json(a, b))
    new = r[("path", "Scheduler.coros[*].trace_ctx")]
    assert new["status"] == "new" and new["a"] == 0
    assert new["b"] == trace_ctx_bytes()
    # nothing disappeared, and unchanged patterns are hidden
    assert not [k for k, v in r.items() if v["status"] == "deleted"]
    assert ("path", "Scheduler.coros[*].locals") not in r
    text = run_diff(a, b)
    assert text.returncode == 0, text.stderr
    line = [l for l in text.stdout.splitlines() if l.endswith("Scheduler.coros[*].trace_ctx")]
    assert len(line) == 1 and line[0].startswith("[NEW]")
    assert " %d " % trace_ctx_bytes() in line[0]
    total = [l for l in text.stdout.splitlines() if l.endswith("TOTAL")]
    assert len(total) == 1
    assert "%+d" % (traces["grown"][1] - traces["base"][1]) in total[0].split()


def test_reordered_gives_zero_delta(states):
    s, _ = states
    (a, pa), (b, pb) = s["base"], s["reordered"]
    assert pa == pb
    doc = diff_json(a, b)
    assert doc["total"]["delta"] == 0
    assert doc["groups"][0]["rows"] == []
    text = run_diff(a, b)
    assert "(no row changed)" in text.stdout


def test_fail_if_grows(states):
    s, _ = states
    a, b, same = s["base"][0], s["grown"][0], s["reordered"][0]
    r = run_diff("--fail-if-grows", "1", a, b)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "more than --fail-if-grows 1%" in r.stderr
    assert "TOTAL" in r.stdout  # the rows are printed first
    r = run_diff("--fail-if-grows", "1", a, same)
    assert r.returncode == 0, (r.returncode, r.stderr)
    # grown by ~14%: within a limit of 50%
    r = run_diff("--fail-if-grows", "50", a, b)
    assert r.returncode == 0, (r.returncode, r.stderr)


def test_budget(traces, tmp_path):
    (a, _), (b, pb) = traces["base"], traces["grown"]
    over = tmp_path / "over"
    over.write_text("# budgets\nScheduler.coros[*].trace_ctx %d\n" % (trace_ctx_bytes() - 1))
    r = run_diff("--budget", str(over), a, b)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "over budget: Scheduler.coros[*].trace_ctx" in r.stderr
    within = tmp_path / "within"
    within.write_text("Scheduler.coros[*].trace_ctx %d\nTOTAL %d\n" % (trace_ctx_bytes(), pb))
    r = run_diff("--budget", str(within), a, b)
    assert r.returncode == 0, (r.returncode, r.stderr)
    total = tmp_path / "total"
    total.write_text("TOTAL %d\n" % (pb - 1))
    assert run_diff("--budget", str(total), a, b).returncode == 3
    bad = tmp_path / "bad"
    bad.write_text("onlyapattern\n")
    r = run_diff("--budget", str(bad), a, b)
    assert r.returncode == 2 and "PATTERN MAXSIZE" in r.stderr


def test_several_dumps_grouped(tmp_path, pickles):
    # two pickles back to back are two dumps: grouped, with per-dump averages
    (a, pa), (b, pb) = pickles["base"], pickles["grown"]
    two_a, two_b = tmp_path / "a2", tmp_path / "b2"
    two_a.write_bytes(open(a, "rb").read() * 2)
    two_b.write_bytes(open(b, "rb").read() * 2)
    doc = diff_json(str(two_a), str(two_b))
    assert doc["grouped"]
    (g,) = doc["groups"]
    assert g["dumps_a"] == 2 and g["dumps_b"] == 2
    assert doc["total"]["delta"] == 2 * (pb - pa)
    for r in g["rows"]:
        assert r["b_per_dump"] * 2 == r["b"]


def test_usage_and_errors(pickles, tmp_path):
    er.skip_unless_built()
    a = pickles["base"][0]
    assert run_diff(a).returncode == 2
    assert run_diff("--fail-if-grows", "x", a, a).returncode == 2
    assert run_diff("--nope", a, a).returncode == 2
    r = run_diff(a, str(tmp_path / "missing"))
    assert r.returncode == 1 and "cannot read" in r.stderr
    h = run_diff("--help")
    assert h.returncode == 0 and "--fail-if-grows PCT" in h.stdout


def test_swapped_is_deleted(traces):
    # B -> A: the pattern is [DEL] with its bytes in A, the TOTAL delta negative
    (a, pa), (b, pb) = traces["grown"], traces["base"]
    doc = diff_json(a, b)
    gone = rows(doc)[("path", "Scheduler.coros[*].trace_ctx")]
    assert gone["status"] == "deleted" and gone["a"] == trace_ctx_bytes() and gone["b"] == 0
    assert doc["total"]["delta"] == pb - pa < 0
    text = run_diff(a, b).stdout
    assert [l for l in text.splitlines() if l.startswith("[DEL]")][0].endswith(
        "Scheduler.coros[*].trace_ctx")
    # shrinking never trips --fail-if-grows
    assert run_diff("--fail-if-grows", "0", a, b).returncode == 0


def test_pickle_files_give_path_rows_as_the_help_says(pickles, traces):
    """Pickle files are read as `inspect --json --paths`: they give the same path rows
    as the traces (the new pattern with the same exact bytes), and --help says so
    (it said "type rows only" for pickle files after inspect had --paths)."""
    (a, _), (b, _) = pickles["base"], pickles["grown"]
    r = rows(diff_json(a, b))
    new = r[("path", "Scheduler.coros[*].trace_ctx")]
    assert new["status"] == "new" and new["b"] == trace_ctx_bytes()
    ta, tb = traces["base"][0], traces["grown"][0]
    from_traces = rows(diff_json(ta, tb))
    assert {k for k in r if k[0] == "path"} == {k for k in from_traces if k[0] == "path"}
    h = run_diff("--help").stdout
    assert "type rows only" not in h
    assert "path patterns" in h and "pickle" in h
