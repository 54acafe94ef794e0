"""Hostile inputs: sertrace must fail exactly as pickle fails, never crash.

Each case of pt_hostile.py (a __reduce__ that raises or returns garbage,
containers mutated while they are pickled, __getstate__ returning the
object, 100,000-deep nesting (20,000 by default), __hash__/__eq__ that raise, files whose
write() raises or returns nonsense, memory exhaustion, raising hooks,
hostile module/qualname lookups, misuse of the Pickler object, reentrant
and nested dumps, threads) runs in a child process, first with pickle and
then with the implementation under test.  The test asserts that the child
exits normally (a segfault or abort is a failure, with its signal shown),
that the interpreter is still usable afterwards ("alive"), and that both
results are equal: same bytes, or same exception class and message.

The children are the suite's largest cost (a tenth of a second each just
to start and import; 200 in the soak, one a run; 56 by default for 128 runs, RUNS and
case_runs below): they run ahead of the tests, as many at a time as there
are CPUs; each test waits for its own child and asserts on its own lines.
A crash in a family's shared child fails every test of that family.
"""
import concurrent.futures

import json
import os
import signal

import pytest

import pt_hostile
import pt_impl
from testlib import child, knobs
from testlib import tree as pt_tree

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300


def _runnable(name, traced):
    if name in pt_hostile.REF_CRASHES and pt_impl.IMPL_NAME != "sertrace":
        return False
    return not (traced and pt_impl.IMPL_NAME != "sertrace")


@pytest.fixture(scope="module")
def case_runs(request, tmp_path_factory):
    """{(name, traced): (future of the child's CompletedProcess, trace path)}
    for the cases this session runs, submitted in test order to a pool of
    os.cpu_count() workers."""
    root = tmp_path_factory.mktemp("hostile")
    pool = concurrent.futures.ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0))))
    runs, batches = {}, {}
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "originalname", None) != "test_hostile" or \
                not _runnable(params["name"], params["traced"]):
            continue
        key = (params["name"], params["traced"])
        family = _family(key[0])
        if family and not key[1] and not knobs.soak():
            batches.setdefault(family, []).append(key[0])
            continue
        trace = str(root / ("%s.txt" % params["name"])) if key[1] else None
        runs[key] = (pool.submit(run_case, [key[0]], trace), trace)
    for names in batches.values():
        future = pool.submit(run_case, names)
        runs.update({(name, False): (future, None) for name in names})
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


def run_case(names, trace=None):
    env = dict(DISPATCH_TRACE=trace, SERTRACE_GRANULARITY="all", SERTRACE_EXACT="1") if trace else {}
    return child.run([os.path.join(HERE, "pt_hostile.py")] + names, paths=[HERE], env=env,
                     unset=["DISPATCH_TRACE"], timeout=TIMEOUT, cwd=HERE)


def _diff(a, b, path="result"):
    """First place where two JSON values differ, for a readable message."""
    if type(a) is not type(b):
        return "%s: %r != %r" % (path, a, b)
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: lengths %d != %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = _diff(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            d = _diff(a.get(k), b.get(k), "%s.%s" % (path, k))
            if d:
                return d
        return None
    if a != b:
        ra, rb = repr(a), repr(b)
        return "%s:\n  expected %s\n  got      %s" % (path, ra[:800], rb[:800])
    return None


# The families of many cases (garbage_*: one per malformed reduce value,
# hook_*, mutate_*) run untraced in full by default, all the cases of a
# family in one child, and traced by one representative each; the soak
# (PT_SOAK=1) runs every case traced too, and each in a child of its own.
TRACED_REPRESENTATIVE = {"garbage_": "garbage_newobj_ex_wrong_class",
                         "hook_": "hook_persistent_id_late",
                         "mutate_": "mutate_dict_delete_insert"}


def _family(name):
    return next((f for f in TRACED_REPRESENTATIVE if name.startswith(f)), None)


def _traced_by_default(name):
    family = _family(name)
    return family is None or TRACED_REPRESENTATIVE[family] == name


RUNS = [(name, traced) for name in sorted(pt_hostile.CASES) for traced in (False, True)
        if not traced or knobs.soak() or _traced_by_default(name)]


@pytest.mark.parametrize("name,traced", RUNS,
                         ids=["%s-%s" % (n, "traced" if t else "untraced") for n, t in RUNS])
def test_hostile(name, traced, case_runs):
    """traced: the same case with the live text tree on (atoms included,
    exact sizes), which runs sertrace's tracing and error-path code; the
    trace written must then parse as balanced trees."""
    if name in pt_hostile.REF_CRASHES and pt_impl.IMPL_NAME != "sertrace":
        pytest.skip("the reference pickler itself crashes on this case")
    if traced and pt_impl.IMPL_NAME != "sertrace":
        pytest.skip("tracing needs sertrace")
    future, trace = case_runs[(name, traced)]
    proc = future.result()
    if proc.returncode < 0:
        # (a family's shared child: the crash is in the case after the
        # last one whose "impl" line is in the stdout tail)
        pytest.fail("child killed by signal %s (crash)\nstdout tail:\n%s\nstderr tail:\n%s"
                    % (signal.Signals(-proc.returncode).name, proc.stdout[-600:], proc.stderr[-3000:]),
                    pytrace=False)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, "child exited %d\nstdout: %s\nstderr tail:\n%s" % (
        proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert lines and lines[-1] == "alive", "interpreter did not survive: %s" % proc.stderr[-2000:]
    results = {}
    for line in lines[:-1]:
        rec = json.loads(line)
        if rec.pop("case") == name:
            results.update(rec)
    assert set(results) == {"ref", "impl"}, lines
    if traced and name not in TRACE_UNPARSABLE:
        # Streamed (no trees held: some cases trace 100,000-node dumps): every
        # line placed, every dump balanced, tags matching, no node smaller
        # than its children.
        with open(trace, encoding="utf-8") as f:
            try:
                dumps = list(pt_tree.check_stream(f))
            except pt_tree.TreeError as e:
                pytest.fail("trace of case %s does not parse: %s" % (name, e), pytrace=False)
        assert dumps, "no dump traced"
        problems = [p for d in dumps for p in d["problems"]]
        assert not problems, "trace of case %s: %s" % (name, problems[:10])
    if name in pt_hostile.REF_CRASHES:
        return  # pickle itself crashes: surviving is all we can ask
    d = _diff(results["ref"], results["impl"])
    assert d is None, "case %s differs from pickle at %s" % (name, d)


# Cases whose text trace need not be a sequence of well-nested dumps (none
# now: the threads case keeps each dump's text below the 16 KiB flush size,
# so each dump is written in one piece even with four threads).
TRACE_UNPARSABLE = set()
