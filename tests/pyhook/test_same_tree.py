"""The same bytes give the same tree through both Python serializers.

sertrace's C pickler (`sertrace.dumps`) and the hook on the pure-Python
pickler (`pickle._Pickler`, traced by sertrace._pyhook) describe objects
through one module, serializers/objdesc.  Here each object graph is written
by both, in one child process with DISPATCH_TRACE=<file> SERTRACE_EXACT=1:
the payloads must be the same bytes (and those of `pickle.dumps`), and the
two live text trees must be the same tree -- node for node in pre-order,
the same depth, tag, type name (the repr with its addresses taken out),
edge label (issue 13: position, dict key under the privacy rule, reduce
role, set element) and exact byte count -- with the root plus what lies outside it adding up to
the payload's length.

Graphs: the differential corpus of tests/pickle (graphgen.build(seed,
protocol), every protocol, with copyreg extension codes installed so EXT
nodes appear), at the default granularity and with every atom
(SERTRACE_GRANULARITY=all), plus named cases that once drifted apart:
`[len, Ellipsis]`, an OrderedDict (a reduce's dictitems: an `It` node), a
list subclass (listitems), memo references to a class and to functions
(`<ref class '...'>`), dumped atoms (a root is always a node) and bytes
below protocol 3 (a folded atom that pickles through a reduce).
Knobs: SERTRACE_SAME_TREE_SEEDS (graphs per protocol, default 120).
"""
import json
import os
import re
import sys

import pytest

import traces

HERE = os.path.dirname(os.path.abspath(__file__))
PICKLE_TESTS = os.path.normpath(os.path.join(HERE, "..", "pickle"))
sys.path.insert(0, PICKLE_TESTS)
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "lib")))
from testlib import tree as pt_tree  # noqa: E402  (the shared parser of the live text tree)

SEEDS = int(os.environ.get("SERTRACE_SAME_TREE_SEEDS", "120"))

SCRIPT = r'''
import collections, io, json, pickle, sys
sys.path.insert(0, PICKLE_TESTS)
import graphgen, pt_types
import sertrace, sertrace.dill as sd

class Plain:
    pass

def helper():
    pass

class Items(list):
    pass

def setter(obj, state):
    obj.__dict__.update(state)

class WithSetter:
    def __init__(self):
        self.v = [1, 2]
    def __reduce__(self):
        return (WithSetter.__new__, (WithSetter,), {"v": self.v}, None, None, setter)

class Ex:
    def __new__(cls, *a, **k):
        return object.__new__(cls)
    def __getnewargs_ex__(self):
        return ((1, [2]), {"k": [3]})

def labelled():
    s = Plain()
    s.cache = {"a@b.example": [1], 7: [2], -3: [6], (1, 2): [3], "ok_name": [4], "x" * 70: [5]}
    s.users = [[1], (2, [3])]
    return {"session": s, "setter": WithSetter(), "ex": Ex(), "sets": [{frozenset({(1,)})}],
            "odict": collections.OrderedDict(a=[1], b=[2]), "sub": Items([[1], [2]])}

def named():
    shared = Plain()
    return {
        "len_ellipsis": [len, Ellipsis],
        "odict": collections.OrderedDict(a=1, b=[2, 3], c={"d": None}),
        "list_subclass": Items([1, "two", (3,)]),
        "class_refs": [Plain, Plain, helper, helper, len, len, shared, shared, Plain()],
        "root_none": None,
        "root_int": 12345,
        "root_str": "text",
        "root_bytes": b"abc" * 10,
        "bytes_in_list": [b"xyz", b"xyz" * 5, 1.5],
        "singletons": [NotImplemented, Ellipsis, NotImplemented, type(None)],
        "labelled": labelled(),
    }

def graphs():
    if WHICH == "named":
        return sorted(named().items())
    return [("seed %d" % s, graphgen.build(s, PROTOCOL)) for s in range(SEEDS)]

# Persistent ids: a Plain instance is written as its id (a str below
# protocol 1, whose PERSID line takes text; else a tuple, a node of its own).
def pid_of(obj):
    if isinstance(obj, Plain):
        return "plain" if PROTOCOL == 0 else ("plain", 7)
    return None

class CPid(sertrace.Pickler):
    def persistent_id(self, obj):
        return pid_of(obj)

class PyPid(pickle._Pickler):
    def persistent_id(self, obj):
        return pid_of(obj)

def pid_cases():
    if WHICH != "named":
        return []
    shared = Plain()
    return [("persistent_ids", [shared, "text", [shared, Plain()], {"k": shared}])]

def pure(obj, cls=pickle._Pickler):
    f = io.BytesIO()
    cls(f, PROTOCOL).dump(obj)
    return f.getvalue()

def c_pickler(obj, cls):
    f = io.BytesIO()
    cls(f, PROTOCOL).dump(obj)
    return f.getvalue()

pt_types.add_extensions()
out = []
for name, obj in graphs():
    # Compared only where pickle's two picklers agree: pickle.dumps (_pickle)
    # and the untraced pure-Python pickler give the same bytes.
    try:
        ref = pickle.dumps(obj, PROTOCOL)
    except Exception as e:
        out.append({"name": name, "skipped": "pickle refuses: " + type(e).__name__})
        continue
    try:
        same = pure(obj) == ref
    except Exception as e:
        same = False
    if not same:
        out.append({"name": name, "skipped": "pickle._Pickler and _pickle differ"})
        continue
    c = sertrace.dumps(obj, PROTOCOL)
    with sd.traced(pickle._Pickler, name="pickle._Pickler"):
        h = pure(obj)
    out.append({"name": name, "len": len(ref), "c_same": c == ref, "h_same": h == ref})
for name, obj in pid_cases():
    class RefPid(pickle.Pickler):
        def persistent_id(self, obj):
            return pid_of(obj)
    ref = c_pickler(obj, RefPid)
    assert pure(obj, PyPid) == ref
    c = c_pickler(obj, CPid)
    with sd.traced(pickle._Pickler, name="pickle._Pickler"):
        h = pure(obj, PyPid)
    out.append({"name": name, "len": len(ref), "c_same": c == ref, "h_same": h == ref})
print(json.dumps(out))
'''

ADDR = re.compile(r" at 0x[0-9a-f]+|0x[0-9a-f]+")


def flatten(dump):
    """Pre-order (depth, tag, repr without addresses, bytes) of a dump."""
    rows = []
    for root in dump["roots"]:
        for n in pt_tree.walk(root):
            rows.append((n["depth"], n["tag"], ADDR.sub("", n["repr"]), n["bytes"], n["label"]))
    return rows


def outside_root(protocol, length):
    """What a payload has outside its root node: PROTO (protocols >= 2),
    STOP, and the 9-byte header of the frame that holds STOP (protocols
    >= 4, unless that frame is too short to be framed)."""
    if protocol < 2:
        return [1]
    if protocol < 4:
        return [3]
    return [3, 12]


def run(tmp_path, which, protocol, granularity, keys=None):
    out = tmp_path / ("tree-%s-%d-%s.txt" % (which, protocol, granularity))
    env = {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1",
           "SERTRACE_GRANULARITY": granularity}
    if keys is not None:
        env["SERTRACE_KEYS"] = keys
    p = traces.run_script(SCRIPT, env, WHICH=which, PROTOCOL=protocol, SEEDS=SEEDS,
                          PICKLE_TESTS=PICKLE_TESTS)
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads(p.stdout)
    dumps = pt_tree.parse(out.read_text(encoding="utf-8"))
    return results, dumps


def compare(results, dumps, protocol):
    """Pair the dumps (C pickler, then the hook, per graph) and compare."""
    done = [r for r in results if "skipped" not in r]
    assert len(dumps) == 2 * len(done), "expected two dumps per graph"
    problems = []
    for i, r in enumerate(done):
        c, h = dumps[2 * i], dumps[2 * i + 1]
        assert c["serializer"] == "pickle" and h["serializer"] == "pickle._Pickler", r["name"]
        assert r["c_same"], "%s: sertrace.dumps differs from pickle.dumps" % r["name"]
        assert r["h_same"], "%s: traced pickle._Pickler differs from pickle.dumps" % r["name"]
        for d in (c, h):
            assert d["status"] == "ok" and d["total"] == r["len"], (r["name"], d["serializer"])
            assert len(d["roots"]) == 1, (r["name"], d["serializer"])
            assert d["total"] - d["roots"][0]["bytes"] in outside_root(protocol, r["len"]), \
                (r["name"], d["serializer"], d["total"], d["roots"][0]["bytes"])
        fc, fh = flatten(c), flatten(h)
        if fc != fh:
            k = next((j for j in range(min(len(fc), len(fh))) if fc[j] != fh[j]),
                     min(len(fc), len(fh)))
            problems.append("%s (protocol %d): node #%d: C pickler %s, hook %s (%d vs %d nodes)"
                            % (r["name"], protocol, k, fc[k] if k < len(fc) else None,
                               fh[k] if k < len(fh) else None, len(fc), len(fh)))
    assert not problems, "%d of %d graphs differ:\n%s" % (len(problems), len(done),
                                                          "\n".join(problems[:10]))
    return done


@pytest.mark.parametrize("granularity", ["default", "all"])
@pytest.mark.parametrize("protocol", range(6))
def test_corpus_same_tree(tmp_path, protocol, granularity):
    results, dumps = run(tmp_path, "corpus", protocol, granularity)
    done = compare(results, dumps, protocol)
    # The corpus is mostly picklable: a run that compared little tests little.
    skipped = [r["skipped"] for r in results if "skipped" in r]
    assert len(done) >= SEEDS * 0.8, "only %d of %d graphs compared: %s" % (
        len(done), SEEDS, sorted(set(skipped)))
    nodes = sum(len(flatten(d)) for d in dumps[::2])
    assert nodes > len(done) * 2, "trees too small to compare (%d nodes)" % nodes
    labelled = sum(1 for d in dumps[::2] for row in flatten(d) if row[4] is not None)
    assert labelled > nodes // 2, "too few labels to compare (%d of %d nodes)" % (labelled, nodes)


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_named_cases_same_tree(tmp_path, protocol):
    results, dumps = run(tmp_path, "named", protocol, "default")
    done = compare(results, dumps, protocol)
    by_name = {r["name"]: flatten(dumps[2 * i]) for i, r in enumerate(done)}

    tags = [row[1] for row in by_name["len_ellipsis"]]
    assert tags == ["L", "F2", "G"], by_name["len_ellipsis"]
    assert by_name["len_ellipsis"][1][2] == "<function len>"
    assert by_name["len_ellipsis"][2][2] == "<ellipsis object>"

    odict = by_name["odict"]
    assert odict[0][1] == "R" and odict[0][2] == "<collections.OrderedDict object>"
    items = [row for row in odict if row[1] == "It"]
    assert len(items) == 1 and items[0][0] == 2, odict  # inside the R node

    if protocol >= 2:  # a list subclass pickles with listitems from protocol 2 on
        sub = by_name["list_subclass"]
        assert sub[0][1] == "O" and [row[1] for row in sub].count("It") == 1, sub

    refs = by_name["class_refs"]
    reprs = [row[2] for row in refs if row[0] == 2]
    assert reprs[:6] == ["<class '__main__.Plain'>", "<ref class '__main__.Plain'>",
                         "<function __main__.helper>", "<ref function __main__.helper>",
                         "<function len>", "<ref function len>"], reprs
    assert reprs[7] == "<ref __main__.Plain object>", reprs  # a memo hit on an instance

    for name, tag in [("root_none", "A"), ("root_int", "I"), ("root_str", "Str")]:
        assert [row[1] for row in by_name[name]] == [tag], (name, by_name[name])
    # the dumped bytes are a node even below protocol 3, where they pickle
    # through a reduce (whose parts are then its children)
    assert by_name["root_bytes"][0][1] == "By", by_name["root_bytes"]
    # bytes below protocol 3 pickle through a reduce: folded, no parts shown
    assert [row[1] for row in by_name["bytes_in_list"]] == ["L"], by_name["bytes_in_list"]
    pids = by_name["persistent_ids"]
    assert [row[1] for row in pids if row[0] == 2] == ["Pid", "L", "D2"], pids
    assert pids[1][2] == "<__main__.Plain object>", pids  # named by the object's type
    assert [row[1] for row in pids].count("Pid") == 4, pids
    if protocol > 0:  # the tuple id is a node inside its Pid
        assert pids[2][:2] == (3, "Tu"), pids
    assert [row[1] for row in by_name["singletons"] if row[0] <= 2] == \
        ["L", "G", "G", "Mo", "T4"], by_name["singletons"]
    check_labels(by_name["labelled"], protocol, keys_all=False)


def check_labels(rows, protocol, keys_all):
    """The labels of the `labelled` case (already the same in both trees):
    attribute names, dict keys under the privacy rule, positions, reduce
    roles, set elements."""
    labels = [row[4] for row in rows]
    session = next(i for i, row in enumerate(rows) if row[4] == "['session']")
    assert rows[session][1] == "O", rows[session]
    assert ".cache" in labels and ".users" in labels, labels
    assert "['ok_name']" in labels and "[7]" in labels and "[-3]" in labels, labels
    if keys_all:
        assert "['a@b.example']" in labels and "['" + "x" * 70 + "']" in labels, labels
    else:
        assert not any("a@b" in (lab or "") or "x" * 70 in (lab or "") for lab in labels), labels
        assert labels.count("[…]") >= 2, labels
    assert labels.count("(state)") >= 2, labels  # at least the session's and WithSetter's
    assert "(reconstructor)" in labels and "(args)" in labels, labels
    assert ".v" in labels, labels  # an attribute of a state given to a state setter
    if protocol >= 4:
        assert "{element}" in labels, labels  # a frozenset's element (set ADDITEMS, frozenset MARK)
        ex = next(i for i, row in enumerate(rows) if row[4] == "['ex']")
        # NEWOBJ_EX: class, args, kwargs
        assert [row[4] for row in rows[ex + 1:] if row[0] == rows[ex][0] + 1][:3] == \
            ["(reconstructor)", "(args)", "(args)"], rows[ex:]


def test_labels_keys_all(tmp_path):
    """SERTRACE_KEYS=all: both serializers record every str key, the same way."""
    results, dumps = run(tmp_path, "named", 4, "default", keys="all")
    done = compare(results, dumps, 4)
    by_name = {r["name"]: flatten(dumps[2 * i]) for i, r in enumerate(done)}
    check_labels(by_name["labelled"], 4, keys_all=True)
