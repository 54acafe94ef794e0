"""Byte accounting of sertrace's trace, checked against the real payloads.

A child process (pt_accounting_child.py) dumps the differential corpus
(DUMPS_PER_PROTOCOL random graphs per protocol, the dispatch-like
workload, a few > 64 KiB objects) with sertrace to dumps(), a BytesIO, a
pipe and a socket, with DISPATCH_TRACE=<file> SERTRACE_EXACT=1
SERTRACE_GRANULARITY=all, and prints each payload's length and shape.  The
text tree (parsed by testlib.tree, tests/lib) must satisfy, for every dump:
  - nesting is balanced (enter/exit depths and tags match, one root);
  - every node's bytes >= the sum of its children's bytes (self >= 0);
  - the footer's total == len(payload);
  - root bytes + header + trailer == len(payload), where header is the
    PROTO opcode (2 bytes, read from the payload) and trailer is STOP plus,
    when STOP sits in a frame, that frame's 9-byte header: sertrace counts a
    FRAME header when its frame is committed (serializers/pickle/pickler.h,
    output_pos), so frames committed mid-dump belong to the node open at
    that moment and only the last frame, committed after STOP, is outside
    the root.  The rule is read from the payload, never a fixed total.
Failed dumps (pickle refused the object) must be balanced and say "error".

test_whole_differential_corpus_adds_up streams the same checks (without
holding trees) over the first PT_ACCOUNTING_GRAPHS graphs per protocol of
test_differential.py's corpus (1,000 by default, 10,000 in the soak,
PT_SOAK=1), up to 1,000 of them also through a BytesIO, a pipe and a socket.
"""

import concurrent.futures
import json
import re
import os
import subprocess

import pytest

import pt_impl
from testlib import child, knobs, lttng
from testlib import tree as pt_tree

HERE = os.path.dirname(os.path.abspath(__file__))
# Graphs per protocol whose whole trees are held and checked (dumps and
# BytesIO each): 100 by default, 300 in the soak; the non-primary CPythons
# set their own (scripts/test-pyversions.sh).  The streamed check below
# covers the whole differential corpus.
DUMPS_PER_PROTOCOL = knobs.size("PT_ACCOUNTING_DUMPS", 100, 300)
STREAM_PER_PROTOCOL = 60  # graphs per protocol through a pipe and through a socket

pytestmark = pytest.mark.skipif(pt_impl.IMPL_NAME != "sertrace", reason="accounting needs sertrace's trace")


def _env(trace_path, **extra):
    env = dict(DISPATCH_TRACE=trace_path, SERTRACE_EXACT="1", SERTRACE_GRANULARITY="all")
    env.update(extra)
    return env


OVERSIZE = 4096  # SERTRACE_OVERSIZE for the corpus run: flags must match sizes


def _corpus_child(root, granularity):
    trace = str(root / ("trace-%s.txt" % granularity))
    env = _env(trace, SERTRACE_GRANULARITY=granularity, SERTRACE_OVERSIZE=str(OVERSIZE))
    return child.run([os.path.join(HERE, "pt_accounting_child.py"), str(DUMPS_PER_PROTOCOL),
                      str(STREAM_PER_PROTOCOL)], paths=[HERE], env=env, cwd=HERE), trace


def _whole_corpus_child(root):
    trace, out = str(root / "trace-whole.txt"), str(root / "records-whole.jsonl")
    env = _env(trace, SERTRACE_GRANULARITY="containers")
    with open(out, "w") as f:
        proc = child.run([os.path.join(HERE, "pt_accounting_child.py"), str(FULL_GRAPHS),
                          str(FULL_STREAM), str(FULL_STREAM)], paths=[HERE], env=env,
                         stdout=f, stderr=subprocess.PIPE, timeout=1200, cwd=HERE)
    return proc, trace, out


@pytest.fixture(scope="module")
def corpus_children(tmp_path_factory):
    """The three corpus children (granularity all, containers, the whole
    corpus), started together on a pool of os.cpu_count() workers the first
    time a test needs one: each is a process of its own, and the parent
    parses one trace while the others are still being written."""
    root = tmp_path_factory.mktemp("accounting")
    pool = concurrent.futures.ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0))))
    futures = {g: pool.submit(_corpus_child, root, g) for g in ("all", "containers")}
    futures["whole"] = pool.submit(_whole_corpus_child, root)
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module", params=["all", "containers"])
def traced_corpus(request, corpus_children):
    """granularity all: atoms are nodes too; containers (the default): atoms
    are folded into their parent's self bytes.  Both must add up."""
    proc, trace = corpus_children[request.param].result()
    assert proc.returncode == 0, "child failed (%d): %s" % (proc.returncode, proc.stderr[-3000:])
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    with open(trace, encoding="utf-8") as f:
        text = f.read()
    dumps = pt_tree.parse(text)
    return records, dumps, request.param


def test_one_trace_dump_per_dump(traced_corpus):
    records, dumps, granularity = traced_corpus
    assert len(records) > 6 * (2 * DUMPS_PER_PROTOCOL + 2 * STREAM_PER_PROTOCOL)
    assert len(dumps) == len(records)
    for rec, d in zip(records, dumps):
        assert d["serializer"] == "pickle"
        assert d["protocol"] == rec["protocol"], rec
        assert d["status"] == ("ok" if rec["ok"] else "error"), (rec, d["status"])


def _check_node(node, problems, where):
    kids = sum(c["bytes"] for c in node["children"])
    if node["bytes"] < kids:
        problems.append("%s: node %s (line %d) has %d B but its children %d B"
                        % (where, node["tag"], node["line"], node["bytes"], kids))


def test_tree_sizes_add_up(traced_corpus):
    records, dumps, granularity = traced_corpus
    problems = []
    checked = {}
    for rec, d in zip(records, dumps):
        where = "%s p%d %s" % (rec["label"], rec["protocol"], rec["target"])
        # One root node at every granularity: an atom dumped on its own is
        # a node even at the default granularity (issue 12 item 6).
        if len(d["roots"]) != 1:
            problems.append("%s: %d root nodes" % (where, len(d["roots"])))
            continue
        for r in d["roots"]:
            for node in pt_tree.walk(r):
                _check_node(node, problems, where)
        if not rec["ok"]:
            if rec["pickle_error"] != rec["error"] and "RecursionError" not in rec["error"]:
                problems.append("%s: sertrace raised %r, pickle %r" % (where, rec["error"], rec["pickle_error"]))
            continue
        if not rec["same_as_pickle"]:
            problems.append("%s: payload differs from pickle's" % where)
        trailer = 1 + (9 if rec["stop_framed"] else 0)
        header = rec["proto_len"]
        if d["total"] != rec["len"]:
            problems.append("%s: footer says %d B, payload is %d B" % (where, d["total"], rec["len"]))
        top = sum(r["bytes"] for r in d["roots"])
        if top + header + trailer != rec["len"]:
            problems.append("%s: root %d B + header %d + trailer %d != len(payload) %d"
                            % (where, top, header, trailer, rec["len"]))
        checked[rec["target"]] = checked.get(rec["target"], 0) + 1
    assert not problems, "%d problems, first ones:\n%s" % (len(problems), "\n".join(problems[:25]))
    assert set(checked) == {"dumps", "bytesio", "pipe", "socket", "oob"}, checked


def test_atoms_are_traced(traced_corpus):
    """SERTRACE_GRANULARITY=all: ints, strs, bytes ... get their own nodes,
    and their sizes match what pickle writes for them alone (minus PROTO,
    STOP and memo opcodes: only checked for memo-free atoms)."""
    records, dumps, granularity = traced_corpus
    tags, inner_tags = set(), set()
    for d in dumps[:500]:
        for r in d["roots"]:
            tags.add(r["tag"])
            for node in pt_tree.walk(r):
                if node is not r:
                    inner_tags.add(node["tag"])
    tags |= inner_tags
    atoms = {"I", "Str", "Fl", "By", "A"}
    for tag in ("L", "D2", "Tu", "O"):
        assert tag in tags, (tag, sorted(tags))
    if granularity == "all":
        assert atoms <= tags, sorted(tags)
    else:
        # Only the dumped object itself may be an atom node (issue 12 item 6).
        assert not (atoms & inner_tags), \
            "atoms traced below the root with granularity=containers: %s" % sorted(atoms & inner_tags)


def test_oversize_flags(traced_corpus):
    """SERTRACE_OVERSIZE=4096: exactly the nodes of >= 4096 B carry the
    OVERSIZED flag on their exit line."""
    records, dumps, granularity = traced_corpus
    flagged = 0
    for d in dumps:
        for r in d["roots"]:
            for node in pt_tree.walk(r):
                has = "OVERSIZED" in node["exit_flags"]
                assert has == (node["bytes"] >= OVERSIZE), (node["tag"], node["bytes"], node["exit_flags"], node["line"])
                flagged += has
    assert flagged > 0


# --------------------------------------------------- unserializable ----


CHILD_UNSERIALIZABLE = r"""
import json, pickle, sys
sys.path.insert(0, %(here)r)
import pt_types as T
import sertrace
obj = T.Plain(items=[{"k": T.make_local_function(), "ok": 1}])
res = {}
for name, m in (("pickle", pickle), ("sertrace", sertrace)):
    try:
        m.dumps(obj, %(protocol)d)
        res[name] = None
    except Exception as e:
        res[name] = [type(e).__module__ + "." + type(e).__qualname__, str(e), list(getattr(e, "__notes__", []))]
print(json.dumps(res))
"""


@pytest.mark.parametrize("protocol", range(6))
def test_unserializable_flag(tmp_path, protocol):
    trace = str(tmp_path / "trace.txt")
    proc = child.run(["-c", CHILD_UNSERIALIZABLE % {"here": HERE, "protocol": protocol}],
                     env=_env(trace), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    exp, got = res["pickle"], res["sertrace"]
    assert exp is not None and got is not None
    assert got[:2] == exp[:2], "exception differs: %r vs %r" % (got, exp)
    notes = got[2]
    assert notes, "sertrace adds no path notes to the exception"
    joined = "\n".join(notes)
    assert "'k'" in joined and "0" in joined, notes
    with open(trace, encoding="utf-8") as f:
        dumps = pt_tree.parse(f.read())
    assert len(dumps) == 1 and dumps[0]["status"] == "error"
    flags = [text for _, text in dumps[0]["flags"]]
    assert flags, "no flag line in the tree"
    flag = flags[0]
    assert "UNSERIALIZABLE" in flag, flag
    # Named as the report names it (format.h): the tag and type of the node
    # the error belongs to, as that node's enter line shows it; then the
    # message and the path.
    m = re.match(r"UNSERIALIZABLE F2 (\S+): ", flag)
    assert m, flag
    f2 = [n for r in dumps[0]["roots"] for n in pt_tree.walk(r) if n["tag"] == "F2"]
    assert f2 and any(m.group(1) in n["repr"] for n in f2), (flag, [n["repr"] for n in f2])
    assert exp[1] in flag, "message %r not in flag line %r" % (exp[1], flag)
    assert "Plain.items[0]['k']" in flag, "path not in flag line %r" % flag


CHILD_NESTED = r"""
import io, json, sys
sys.path.insert(0, %(here)r)
import pt_types as T
import sertrace

class Inner:
    def __reduce__(self):
        # a whole separate dump while the outer one is being written
        return (T.rebuild, (sertrace.dumps([b"i" * 100, "inner", (1, 2)], 4),))

obj = [Inner(), "middle", Inner(), {"k": Inner()}]
out = []
for p in range(6):
    data = sertrace.dumps(obj, p)
    out.append(len(data))
print(json.dumps(out))
"""


def test_nested_dumps_trace(tmp_path):
    """Dumps started inside a __reduce__ appear as complete dumps inside
    their parent's text, and every dump's accounting is exact."""
    trace = str(tmp_path / "trace.txt")
    proc = child.run(["-c", CHILD_NESTED % {"here": HERE}], env=_env(trace), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lengths = json.loads(proc.stdout)
    with open(trace, encoding="utf-8") as f:
        dumps = pt_tree.parse(f.read())
    assert len(dumps) == 6 * 4  # each outer dump + its three inner ones
    outer = [d for d in dumps if d["protocol"] != 4 or d["roots"][0]["tag"] != "L" or len(d["roots"][0]["children"]) != 3]
    inner = [d for d in dumps if d not in outer]
    assert len(inner) == 18 and len(outer) == 6
    for d, n in zip(outer, lengths):
        assert d["total"] == n
    for d in dumps:
        assert d["status"] == "ok" and len(d["roots"]) == 1
        for node in pt_tree.walk(d["roots"][0]):
            assert node["bytes"] >= sum(c["bytes"] for c in node["children"])


# ------------------------------------------------------------ LTTng ----


LTTNG_CHILD = r"""
import json, os, sys
sys.path.insert(0, %(here)r)
import graphgen, pickle, pt_types as T
import sertrace
T.add_extensions()
dumps = []
fails = []
for p in range(6):
    for i in range(%(count)d):
        obj = graphgen.build(8_000_000 + p * 100_000 + i, p)
        try:
            data = sertrace.dumps(obj, p)
        except Exception as e:
            dumps.append([p, None])
            continue
        if data != pickle.dumps(obj, p):
            fails.append("seed %%d p%%d" %% (8_000_000 + p * 100_000 + i, p))
        dumps.append([p, len(data)])
print(json.dumps({"pid": os.getpid(), "dumps": dumps, "fails": fails}))
"""


@pytest.mark.skipif(not lttng.available(), reason="needs lttng and a running lttng-sessiond")
def test_lttng_recorded_dumps(tmp_path):
    """Recorded by a real LTTng session (sertrace:*, vpid context): the bytes
    are still pickle's, and for every dump of the child the recorded
    dump_end.bytes equals len(payload) and the status matches.  Other
    processes may record at the same time: events are filtered by vpid."""
    out = str(tmp_path / "lttng")
    with lttng.session("pickletests", contexts=("vpid",), output=out):
        proc = child.run(["-c", LTTNG_CHILD % {"here": HERE, "count": 60}], env=_env("0"),
                         timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert not res["fails"], res["fails"][:10]
    bt = subprocess.run(["babeltrace2", out], capture_output=True, text=True, timeout=300)
    assert bt.returncode == 0, bt.stderr[-2000:]
    begin = re.compile(r"sertrace:dump_begin: .*\{ vpid = %d \}, \{ dump_id = (\d+), serializer = \"pickle\", protocol = (\d+)[ ,]" % res["pid"])
    end = re.compile(r"sertrace:dump_end: .*\{ vpid = %d \}, \{ dump_id = (\d+), bytes = (\d+), status = \( \"(\w+)\"" % res["pid"])
    begins, ends = [], {}
    for line in bt.stdout.splitlines():
        m = begin.search(line)
        if m:
            begins.append((int(m.group(1)), int(m.group(2))))
            continue
        m = end.search(line)
        if m:
            ends[int(m.group(1))] = (int(m.group(2)), m.group(3))
    assert len(begins) == len(res["dumps"]), "recorded %d dumps, child made %d" % (len(begins), len(res["dumps"]))
    begins.sort()
    for (dump_id, proto), (p, n) in zip(begins, res["dumps"]):
        assert proto == p
        nbytes, status = ends[dump_id]
        if n is None:
            assert status == "error"
        else:
            assert status == "ok" and nbytes == n, (dump_id, nbytes, n)


# ------------------------------------------ the whole differential corpus ----

# The checks above hold trees in memory, so they run on the first hundred
# graphs.  This one streams: the first PT_ACCOUNTING_GRAPHS graphs per
# protocol of test_differential.py's corpus (same seeds: 1,000 by default,
# 10,000 in the soak) through dumps() (and out-of-band at protocol 5), up to
# 1,000 of them (200 by default) through a BytesIO, a pipe and a socket, at
# the default granularity, each dump checked against its real payload.
FULL_GRAPHS = knobs.size("PT_ACCOUNTING_GRAPHS", 1000, 10000)
FULL_STREAM = min(FULL_GRAPHS, 200 if not knobs.soak() else 1000)


def test_whole_differential_corpus_adds_up(corpus_children):
    proc, trace, out = corpus_children["whole"].result()
    assert proc.returncode == 0, "child failed (%d): %s" % (proc.returncode, proc.stderr[-3000:])
    with open(out) as f:
        records = [json.loads(line) for line in f]
    problems, checked = [], {}
    with open(trace, encoding="utf-8") as f:
        dumps = pt_tree.check_stream(f)
        for rec, d in zip(records, dumps):
            where = "%s p%d %s" % (rec["label"], rec["protocol"], rec["target"])
            problems.extend("%s: %s" % (where, p) for p in d["problems"])
            if d["protocol"] != rec["protocol"] or d["status"] != ("ok" if rec["ok"] else "error"):
                problems.append("%s: trace says protocol %s, %s" % (where, d["protocol"], d["status"]))
                continue
            if not rec["ok"]:
                if rec["pickle_error"] != rec["error"] and "RecursionError" not in rec["error"]:
                    problems.append("%s: sertrace raised %r, pickle %r"
                                    % (where, rec["error"], rec["pickle_error"]))
                continue
            if not rec["same_as_pickle"]:
                problems.append("%s: payload differs from pickle's" % where)
            if d["total"] != rec["len"]:
                problems.append("%s: footer says %d B, payload is %d B" % (where, d["total"], rec["len"]))
            header, trailer = rec["proto_len"], 1 + (9 if rec["stop_framed"] else 0)
            top = sum(d["tops"])
            if len(d["tops"]) == 1 and top + header + trailer != rec["len"]:
                problems.append("%s: root %d B + header %d + trailer %d != len(payload) %d"
                                % (where, top, header, trailer, rec["len"]))
            elif top + header + trailer > rec["len"]:
                problems.append("%s: top-level nodes %d B + header %d + trailer %d > len(payload) %d"
                                % (where, top, header, trailer, rec["len"]))
            checked[rec["target"]] = checked.get(rec["target"], 0) + 1
        assert next(dumps, None) is None, "more dumps in the trace than the child made"
    assert not problems, "%d problems, first ones:\n%s" % (len(problems), "\n".join(problems[:25]))
    assert len(records) == sum(checked.values()) + sum(1 for r in records if not r["ok"])
    # every graph of the corpus, per protocol, through dumps(); the subsets through the streams
    assert checked["dumps"] >= 6 * FULL_GRAPHS * 0.95, checked
    assert min(checked[t] for t in ("bytesio", "pipe", "socket")) >= 6 * FULL_STREAM * 0.95, checked
    assert checked["oob"] >= FULL_GRAPHS * 0.95, checked
