"""The trace of the pickler, read from the live text tree (DISPATCH_TRACE to
a file, SERTRACE_EXACT=1): root bytes + header + trailer == len(payload),
every node's self bytes >= 0 (children never exceed their parent), exact
sizes of known nodes, memo hits as their own nodes, notes, and the error
event of an unserializable object with its path.

The child process runs the dumps; this process parses the tree with the
grammar of format/format.h.
"""
import json
import os
import pickletools
import re
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(r'''
    import json, sys, pickle
    import sertrace

    class Annotated:
        def __reduce__(self):
            sertrace.note("frame", "ip=12 sp=3")
            return (Annotated, (), {"x": [1, 2]})

    UNPICKLABLE = lambda: 0

    class State:
        def __init__(self):
            self.suspended = {3: Frame()}

    class Frame:
        def __init__(self):
            self.stack = [1, 2, UNPICKLABLE]

    shared = ["shared"]
    cases = [
        ("list12", [1, 2]),
        ("memo", [shared, shared]),
        ("nested", {"a": [1, (2, 3)], "b": {"c": shared}, "d": (shared, 1.5, None)}),
        ("annotated", [Annotated()]),
        ("classes", [int, len, pickle.Pickler, Annotated]),
        ("big", [b"x" * 70000, "y" * 100000, list(range(40000)), bytearray(b"z" * 70000)]),
    ]
    out = []
    for label, obj in cases:
        for proto in range(6):
            data = sertrace.dumps(obj, proto)
            assert data == pickle.dumps(obj, proto)
            out.append({"label": label, "proto": proto, "hex": data.hex()})
    try:
        sertrace.dumps(State(), 4)
    except pickle.PicklingError as e:
        out.append({"label": "error", "proto": 4, "hex": "", "notes": e.__notes__})
    print(json.dumps(out))
''')

ENTER = re.compile(r"^(?P<bars>│*)(?:┬|├┬) (?P<tag>\S+): (?P<repr>.*)$")
EXIT = re.compile(r"^(?P<bars>│*)└ # (?P<tag>\S+) \[(?P<size>\d+) B\](?P<flags>.*)$")
NOTE = re.compile(r"^(?P<bars>│*) @ (?P<key>.*?) = (?P<value>.*)$")
FLAG = re.compile(r"^(?P<bars>│*) !! (?P<text>.*)$")


def parse(text):
    """Dumps as lists of nodes {tag, repr, bytes, children, notes, flags}."""
    dumps, stack, current = [], [], None
    for line in text.splitlines():
        if line.startswith("# sertrace dump"):
            current = {"roots": [], "header": line, "end": None}
            dumps.append(current)
            stack = []
            continue
        if line.startswith("# end dump"):
            current["end"] = line
            continue
        m = ENTER.match(line)
        if m:
            node = {"tag": m["tag"], "repr": m["repr"], "bytes": None, "children": [],
                    "notes": [], "flags": []}
            (stack[-1]["children"] if stack else current["roots"]).append(node)
            stack.append(node)
            continue
        m = EXIT.match(line)
        if m:
            node = stack.pop()
            assert node["tag"] == m["tag"], line
            node["bytes"] = int(m["size"])
            node["exit_flags"] = m["flags"]
            continue
        m = NOTE.match(line)
        if m:
            stack[-1]["notes"].append((m["key"], m["value"]))
            continue
        m = FLAG.match(line)
        if m:
            stack[-1]["flags"].append(m["text"])
            continue
    return dumps


def walk(node):
    yield node
    for c in node["children"]:
        yield from walk(c)


def header_trailer(data):
    """PROTO header + STOP + the header of the frame committed after STOP."""
    proto_len = 2 if data[:1] == b"\x80" else 0
    frames, stop = [], None
    for op, arg, pos in pickletools.genops(data):
        if op.name == "FRAME":
            frames.append((pos + 9, pos + 9 + arg))
        elif op.name == "STOP":
            stop = pos
    stop_framed = any(a <= stop < b for a, b in frames)
    return proto_len + 1 + (9 if stop_framed else 0)


def run_child(tmp_path, granularity=None):
    tree = tmp_path / "tree.txt"
    env = dict(os.environ, DISPATCH_TRACE=str(tree), SERTRACE_EXACT="1")
    env.pop("SERTRACE_GRANULARITY", None)
    if granularity:
        env["SERTRACE_GRANULARITY"] = granularity
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    if not tree.exists():
        pytest.skip("the live text probe wrote nothing (DISPATCH_TRACE to a file not built?)")
    return results, parse(tree.read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=[None, "all"], ids=["default", "atoms"])
def traced(request, tmp_path_factory):
    return run_child(tmp_path_factory.mktemp("trace"), request.param), request.param


def test_one_tree_per_dump(traced):
    (results, dumps), _ = traced
    assert len(dumps) == len(results)
    for d in dumps:
        assert d["end"] is not None
        assert len(d["roots"]) == 1


def test_root_plus_header_trailer_is_payload(traced):
    (results, dumps), _ = traced
    for res, d in zip(results, dumps):
        if res["label"] == "error":
            continue
        data = bytes.fromhex(res["hex"])
        root = d["roots"][0]
        assert root["bytes"] + header_trailer(data) == len(data), (res["label"], res["proto"])
        assert re.search(r": %d B, ok" % len(data), d["end"]), d["end"]


def test_children_never_exceed_parent(traced):
    (results, dumps), _ = traced
    for res, d in zip(results, dumps):
        for node in walk(d["roots"][0]):
            if node["bytes"] is None or node["exit_flags"].strip():
                continue
            assert sum(c["bytes"] for c in node["children"]) <= node["bytes"], res["label"]


def find(results, dumps, label, proto):
    for res, d in zip(results, dumps):
        if res["label"] == label and res["proto"] == proto:
            return d["roots"][0]
    raise KeyError(label)


def test_exact_sizes_of_known_nodes(traced):
    (results, dumps), granularity = traced
    root = find(results, dumps, "list12", 2)
    # EMPTY_LIST BINPUT 0 MARK BININT1 1 BININT1 2 APPENDS = 1+2+1+2+2+1
    assert (root["tag"], root["bytes"]) == ("L", 9)
    if granularity == "all":
        assert [(c["tag"], c["bytes"]) for c in root["children"]] == [("I", 2), ("I", 2)]
    else:
        assert root["children"] == []
    root = find(results, dumps, "memo", 2)
    kids = [(c["tag"], c["bytes"]) for c in root["children"]]
    assert kids[0][0] == "L" and kids[1] == ("Mo", 2)  # BINGET 1
    assert "<ref list object" in root["children"][1]["repr"]


def test_globals_and_instances(traced):
    (results, dumps), _ = traced
    root = find(results, dumps, "classes", 4)
    tags = [c["tag"] for c in root["children"]]
    assert tags == ["T4", "F2", "T4", "T4"]
    assert "<class '_pickle.Pickler'>" in root["children"][2]["repr"]
    assert "<class '__main__.Annotated'>" in root["children"][3]["repr"]


def test_note_attached_to_its_node(traced):
    (results, dumps), _ = traced
    root = find(results, dumps, "annotated", 4)
    inst = root["children"][0]
    assert inst["tag"] == "O"
    assert ("frame", "ip=12 sp=3") in inst["notes"]


def test_framing_exact(traced):
    (results, dumps), _ = traced
    for proto in (4, 5):
        root = find(results, dumps, "big", proto)
        assert root["bytes"] > 280000


def test_error_event_with_path(traced):
    (results, dumps), _ = traced
    res, d = results[-1], dumps[-1]
    assert res["label"] == "error"
    assert res["notes"][0] == "when serializing list item 2"
    assert ", error" in d["end"]
    flags = [f for n in walk(d["roots"][0]) for f in n["flags"]]
    assert len(flags) == 1, flags
    assert "State.suspended[3].stack[2]" in flags[0]
    assert "attribute lookup <lambda> on __main__ failed" in flags[0]
