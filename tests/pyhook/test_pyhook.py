"""Tests of sertrace's hook for pure-Python picklers (serializers/pyhook,
python/sertrace/dill.py) against Debian's python3-dill.

Every traced dump runs in a child process with DISPATCH_TRACE=<file> and
SERTRACE_EXACT=1, and its live text tree is parsed; dill's own tracer runs
in another child with a logging handler that reads its exact sizes
(record.size).  See traces.py.
"""
import io
import json
import os
import pickle
import subprocess
import sys

import pytest

import traces

dill = pytest.importorskip("dill")


def sertrace_tree(tmp_path, graph, protocol, sink="bytes", extra_env=None):
    out = tmp_path / ("tree-%s-%d-%s.txt" % (graph, protocol, sink))
    env = {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"}
    env.update(extra_env or {})
    p = traces.run_script(traces.SERTRACE_SCRIPT, env, GRAPH=graph, PROTOCOL=protocol, SINK=sink)
    assert p.returncode == 0, p.stderr
    n = json.loads(p.stdout)["len"]
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8"))
    return n, dumps


def check_dump_accounting(dump, payload_len, protocol):
    """Root bytes + header/trailer == len(payload); every node closed."""
    nodes = dump["nodes"]
    assert nodes, "empty tree"
    assert all(n["size"] is not None for n in nodes)
    roots = [n for n in nodes if n["parent"] < 0]
    assert len(roots) == 1
    total, status = traces.end_bytes(dump["end"])
    assert status == "ok"
    assert total == payload_len
    # PROTO (2 bytes, protocol >= 2) + STOP (1) + the last FRAME header (9,
    # protocol >= 4) are outside the root object.
    overhead = (2 if protocol >= 2 else 0) + 1 + (9 if protocol >= 4 else 0)
    assert roots[0]["size"] + overhead == payload_len
    # Children never exceed their parent.
    kids = [0] * len(nodes)
    for c in nodes:
        if c["parent"] >= 0:
            kids[c["parent"]] += c["size"]
    for i, n in enumerate(nodes):
        assert kids[i] <= n["size"], (i, n)


@pytest.mark.parametrize("graph", ["state", "closures"])
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_tree_contains_dills_nodes_with_exact_sizes(tmp_path, graph, protocol):
    expected = traces.dill_trace(graph, protocol)
    n, dumps = sertrace_tree(tmp_path, graph, protocol)
    assert n == expected["len"]  # hooks do not change the bytes
    assert len(dumps) == 1
    dump = dumps[0]
    assert "dill" in dump["header"]
    check_dump_accounting(dump, n, protocol)
    dill_nodes = expected["nodes"]
    assert len(dill_nodes) > 50
    matched = traces.match_subsequence(dill_nodes, dump["nodes"])
    assert len(matched) == len(dill_nodes)
    # sertrace shows what dill leaves out.
    extra = {dump["nodes"][i]["tag"] for i in range(len(dump["nodes"]))} - {
        d["tag"] for d in dill_nodes}
    assert {"L", "Tu"} <= extra
    if graph == "state":
        assert "O" in extra  # the dataclass instances


def test_frames_across_64k(tmp_path):
    """A payload of several 64 KiB frames: the FRAME headers committed in
    the middle of the dump are counted exactly as dill counts them."""
    expected = traces.dill_trace("state_big", 4)
    assert expected["len"] > 3 * 65536
    n, dumps = sertrace_tree(tmp_path, "state_big", 4)
    assert n == expected["len"]
    check_dump_accounting(dumps[0], n, 4)
    traces.match_subsequence(expected["nodes"], dumps[0]["nodes"])


@pytest.mark.parametrize("sink", ["pipe", "socket"])
def test_pipe_and_socket(tmp_path, sink):
    """dill's tracer crashes on non-seekable streams; sertrace counts the
    bytes it writes, so the sizes are exact there too."""
    expected = traces.dill_trace("state_big", 5)
    n, dumps = sertrace_tree(tmp_path, "state_big", 5, sink=sink)
    assert n == expected["len"]
    check_dump_accounting(dumps[0], n, 5)
    traces.match_subsequence(expected["nodes"], dumps[0]["nodes"])


def test_dill_tracer_fails_on_pipe():
    """The defect this replaces (documents why the previous test matters)."""
    script = r'''
import io, os, dill, dill.detect
r, w = os.pipe()
wf = os.fdopen(w, "wb")
try:
    with dill.detect.trace(io.StringIO()):
        dill.dump({"a": {"b": 1}}, wf)
    print("ok")
except OSError as e:
    print("OSError")
'''
    p = traces.run_script(script)
    assert p.stdout.strip() == "OSError"


def test_atoms_granularity_all(tmp_path):
    n, dumps = sertrace_tree(tmp_path, "state", 4, extra_env={"SERTRACE_GRANULARITY": "all"})
    tags = {x["tag"] for x in dumps[0]["nodes"]}
    assert {"Str", "I", "By"} <= tags
    check_dump_accounting(dumps[0], n, 4)
    n2, dumps2 = sertrace_tree(tmp_path, "state", 2)
    assert not ({"Str", "I", "By"} & {x["tag"] for x in dumps2[0]["nodes"]})


UNSERIALIZABLE_SCRIPT = traces.GRAPHS + r'''
import json
import dill

def gen():
    yield 1

def make():
    st = build("state")
    st.suspended[1].frame.stack.append((False, gen()))
    return st

def attempt():
    try:
        dill.dumps(make(), protocol=4)
    except BaseException as e:
        return {"type": type(e).__name__, "msg": str(e),
                "notes": list(getattr(e, "__notes__", []))}
    return None

plain = attempt()
import sertrace.dill
sertrace.dill.install()
traced = attempt()
print(json.dumps({"plain": plain, "traced": traced}))
'''


def test_unserializable_object(tmp_path):
    out = tmp_path / "err.txt"
    p = traces.run_script(UNSERIALIZABLE_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    plain, traced = res["plain"], res["traced"]
    assert plain is not None and traced is not None
    # The same exception dill raises untraced...
    assert traced["type"] == plain["type"]
    assert traced["msg"] == plain["msg"]
    assert plain["notes"] == []
    # ... plus notes giving the path, innermost first, as CPython 3.14's pickle
    # and sertrace's C pickler add them (test_differential.py compares both).
    assert traced["notes"] == traces.STATE_REFUSED_NOTES
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8"))
    assert len(dumps) == 1
    flags = dumps[0]["flags"]
    errors = [f for f in flags if "UNSERIALIZABLE" in f]
    assert len(errors) == 1
    assert "generator" in errors[0]
    # The message is str(exc), as the C pickler records it (no "TypeError: ").
    # The report's wording (format.h): "TAG type: message at path".
    assert errors[0].endswith(": " + plain["msg"] + " at State.suspended[1].frame.stack[4][1]")
    assert traces.end_bytes(dumps[0]["end"])[1] == "error"


HOOK_API_SCRIPT = r'''
import io, json, pickle, sys
import sertrace.dill as sd

class MyPickler(pickle._Pickler):
    pass

obj = {"k": [1, 2, {"x": (3, 4)}], "s": {"a", "b"}}
ref = pickle.dumps(obj, 4)
res = {}
with sd.traced(MyPickler):
    res["inside"] = sd.is_traced(MyPickler)
    f = io.BytesIO()
    MyPickler(f, 4).dump(obj)
    res["same_bytes"] = f.getvalue() == ref
res["after"] = sd.is_traced(MyPickler)
hooked = sd.install()
res["install"] = sorted(c.__module__ + "." + c.__qualname__ for c in hooked)
f = io.BytesIO()
pickle._Pickler(f, 2).dump(obj)
res["pure_same"] = f.getvalue() == pickle.dumps(obj, 2)
sd.uninstall()
res["uninstalled"] = sd.is_traced(pickle._Pickler)
print(json.dumps(res))
'''


def test_hook_api_and_pickle_pure_python(tmp_path):
    out = tmp_path / "api.txt"
    p = traces.run_script(HOOK_API_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res == {"inside": True, "same_bytes": True, "after": False,
                   "install": ["pickle._Pickler"], "pure_same": True,
                   "uninstalled": False}
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8"))
    assert len(dumps) == 2
    assert "MyPickler" in dumps[0]["header"]
    assert "pickle._Pickler" in dumps[1]["header"]
    for d, proto in ((dumps[0], 4), (dumps[1], 2)):
        tags = [n["tag"] for n in d["nodes"]]
        assert tags[0] == "D2" and "L" in tags and "Tu" in tags and "Se" in tags
    check_dump_accounting(dumps[0], len(pickle.dumps({"k": [1, 2, {"x": (3, 4)}], "s": {"a", "b"}}, 4)), 4)


LAZY_SCRIPT = r'''
import sys, json
import sertrace.dill as sd
sd.install()
assert "dill" not in sys.modules
import dill
print(json.dumps({"hooked": sd.is_traced(dill.Pickler),
                  "proxy": type(dill._dill.logger).__name__,
                  "n": len(dill.dumps({"a": [1]}))}))
'''


def test_install_before_dill_import(tmp_path):
    out = tmp_path / "lazy.txt"
    p = traces.run_script(LAZY_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["hooked"] is True
    assert res["proxy"] == "LoggerProxy"
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8"))
    assert len(dumps) == 1 and "dill" in dumps[0]["header"]
    assert traces.end_bytes(dumps[0]["end"])[0] == res["n"]


DORMANT_SCRIPT = r'''
import io, json, logging
import dill, dill.detect
import sertrace.dill as sd
sd.install()
obj = {"a": {"b": [1, 2]}, "f": (lambda x: x)}
ref = dill.dumps(obj)
# dill's own tracer still works through sertrace's logger proxy.
buf = io.StringIO()
with dill.detect.trace(buf):
    again = dill.dumps(obj)
print(json.dumps({"same": ref == again, "lines": buf.getvalue().count("\n"),
                  "has_d2": "D2:" in buf.getvalue()}))
'''


def test_dormant_and_dill_tracer_still_works(tmp_path):
    p = traces.run_script(DORMANT_SCRIPT)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["same"] is True
    assert res["has_d2"] is True and res["lines"] >= 4
    assert p.stderr == ""  # no DISPATCH_TRACE: nothing printed


NOTE_SCRIPT = r'''
import json
import dill
import sertrace
import sertrace.dill as sd
sd.install()

class Frame:
    def __init__(self, ip):
        self.ip = ip
    def __reduce__(self):
        sertrace.note("ip", str(self.ip))
        return (Frame, (self.ip,))

dill.dumps({"frames": [Frame(7), Frame(9)]}, protocol=4)
print("ok")
'''


def test_notes_land_on_their_node(tmp_path):
    native = None
    try:
        import sertrace  # noqa: F401
        native = getattr(sertrace, "note", None)
    except ImportError:
        pass
    if native is None:
        pytest.skip("sertrace.note not available in this build")
    out = tmp_path / "note.txt"
    p = traces.run_script(NOTE_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    notes = [i for i, l in enumerate(lines) if "@ ip = " in l]
    assert len(notes) == 2
    for i in notes:
        # the enter line just above is the Frame instance
        assert "Frame object" in lines[i - 1]


@pytest.mark.parametrize("protocol", [0, 1])
def test_old_protocols(tmp_path, protocol):
    expected = traces.dill_trace("state", protocol)
    n, dumps = sertrace_tree(tmp_path, "state", protocol)
    assert n == expected["len"]
    check_dump_accounting(dumps[0], n, protocol)
    traces.match_subsequence(expected["nodes"], dumps[0]["nodes"])


EDGE_SCRIPT = r'''
import io, json, pickle, threading
import dill
import sertrace.dill as sd
sd.install()

class Inner:
    """pickles itself (a nested dump) while being pickled"""
    def __reduce__(self):
        blob = dill.dumps([1, 2, 3], protocol=4)
        return (dill.loads, (blob,))

res = {}
# one pickler, two dumps (the memo carries over)
f = io.BytesIO()
p = dill.Pickler(f, protocol=4)
shared = {"x": [1, 2]}
p.dump(shared)
first = len(f.getvalue())
p.dump([shared, shared])
res["two_dumps"] = [first, len(f.getvalue()) - first]
res["attrs_restored"] = ("save" not in vars(p)) and type(p.write).__name__ == "method"
# nested dump
res["nested"] = len(dill.dumps({"inner": Inner(), "l": [4]}, protocol=4))
# threads
out = {}
def work(i):
    out[i] = len(dill.dumps({"t": i, "l": list(range(50)), "f": (lambda y: y)}, protocol=4))
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
res["threads"] = [out[i] for i in range(4)]
res["main_tid"] = threading.get_native_id()
print(json.dumps(res))
'''


def test_reuse_nested_and_threads(tmp_path):
    out = tmp_path / "edge.txt"
    p = traces.run_script(EDGE_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["attrs_restored"] is True
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8"))
    # 2 dumps of one pickler, the nested dump inside the outer one, the outer
    # one, 4 threads.
    assert len(dumps) == 2 + 2 + 4
    totals = [traces.end_bytes(d["end"]) for d in dumps]
    assert all(status == "ok" for _, status in totals)
    sizes = sorted(t for t, _ in totals)
    expected = sorted(res["two_dumps"] + [res["nested"]] + res["threads"])
    # the nested dump's own payload is also among them
    assert all(x in sizes for x in expected)
    for d in dumps:
        roots = [x for x in d["nodes"] if x["parent"] < 0]
        assert len(roots) == 1
        assert all(x["size"] is not None for x in d["nodes"])
    # The 4 thread dumps are parsed line by line: each must reach the file in
    # one piece, which the live text tree guarantees below 16 KiB of text.
    thread_dumps = [d for d in dumps if "tid %d " % res["main_tid"] not in d["header"]]
    assert len(thread_dumps) == 4
    assert all(d["text_len"] < 16 * 1024 for d in thread_dumps)
