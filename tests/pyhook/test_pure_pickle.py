"""sertrace's hook on the standard library's pure-Python pickler, without dill.

The other files of this folder compare with dill's tracer and skip where
python3-dill is absent (the pyenv CPython 3.12/3.13 builds that
scripts/test-pyversions.sh tests); these run on every CPython the build
targets: `pickle._Pickler` (and a subclass of it) traced by
sertrace._pyhook through sertrace.dill.install() / traced(), on every
protocol.  Each dump runs in a child process with DISPATCH_TRACE=<file> and
SERTRACE_EXACT=1; its live text tree is parsed (traces.py) and checked
against the payload: the bytes are those of the untraced pickler, the root's
size plus what lies outside it (PROTO, STOP, the FRAME header) is the
payload's length, and no node is bigger than its parent.
"""
import json
import pickle

import pytest

import traces

# A graph of the kinds the hook names: dict, list, tuple, set, frozenset, a
# memo reference (the shared list), a class instance with its class, bytes,
# a big int, None.  Built the same way in the child.
PURE_SCRIPT = r'''
import io, json, pickle, sys
import sertrace.dill as sd

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

class MyPickler(pickle._Pickler):
    pass

def build():
    shared = [1, 2]
    return {"a": [shared, shared, (3, 4.5, "x" * 10)], "b": {1, 2},
            "c": frozenset("ab"), "p": Point(1, b"zz"), "n": None, "big": 2 ** 70,
            "text": "é" * 300}

def dump(cls, obj):
    f = io.BytesIO()
    cls(f, PROTOCOL).dump(obj)
    return f.getvalue()

obj = build()
res = {}
if HOW == "install":
    res["hooked"] = sorted(c.__module__ + "." + c.__qualname__ for c in sd.install())
    data = dump(pickle._Pickler, obj)
    sd.uninstall()
    res["traced_after"] = sd.is_traced(pickle._Pickler)
    plain = dump(pickle._Pickler, obj)
elif HOW == "subclass":
    with sd.traced(MyPickler):
        data = dump(MyPickler, obj)
    plain = dump(MyPickler, obj)
else:  # "error": an object pickle refuses, inside the graph
    sd.install()
    obj["bad"] = [lambda: None]
    try:
        dump(pickle._Pickler, obj)
    except Exception as e:
        res["error"] = type(e).__name__
    data = plain = b""
res["len"] = len(data)
res["same"] = data == plain
print(json.dumps(res))
'''


def run(tmp_path, how, protocol):
    out = tmp_path / ("tree-%s-%d.txt" % (how, protocol))
    p = traces.run_script(PURE_SCRIPT, {"DISPATCH_TRACE": str(out), "SERTRACE_EXACT": "1"},
                          HOW=how, PROTOCOL=protocol)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    return res, traces.parse_text_tree(out.read_text(encoding="utf-8"))


def check_tree(dump, payload_len, protocol):
    nodes = dump["nodes"]
    assert nodes and all(n["size"] is not None for n in nodes)
    roots = [n for n in nodes if n["parent"] < 0]
    assert len(roots) == 1
    assert traces.end_bytes(dump["end"]) == (payload_len, "ok")
    # PROTO (protocol >= 2), STOP, and the one FRAME header (protocol >= 4,
    # the payload is under 64 KiB) are outside the root object.
    overhead = (2 if protocol >= 2 else 0) + 1 + (9 if protocol >= 4 else 0)
    assert roots[0]["size"] + overhead == payload_len
    kids = [0] * len(nodes)
    for n in nodes:
        if n["parent"] >= 0:
            kids[n["parent"]] += n["size"]
    for i, n in enumerate(nodes):
        assert kids[i] <= n["size"], (i, n)
    tags = {n["tag"] for n in nodes}
    assert {"L", "Tu", "O", "Mo"} <= tags, tags
    if protocol >= 4:
        assert {"Se", "FS"} <= tags, tags


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_pure_python_installed(tmp_path, protocol):
    res, dumps = run(tmp_path, "install", protocol)
    assert res["hooked"] == ["pickle._Pickler"]
    assert res["traced_after"] is False
    assert res["same"] and res["len"] > 100
    assert len(dumps) == 1
    assert "pickle._Pickler protocol %d" % protocol in dumps[0]["header"]
    check_tree(dumps[0], res["len"], protocol)


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_subclass_traced_for_a_block(tmp_path, protocol):
    res, dumps = run(tmp_path, "subclass", protocol)
    assert res["same"] and res["len"] > 100
    # One traced dump (inside the block); the one after it is not traced.
    assert len(dumps) == 1
    assert "MyPickler" in dumps[0]["header"]
    check_tree(dumps[0], res["len"], protocol)


def test_failed_dump_ends_as_error(tmp_path):
    res, dumps = run(tmp_path, "error", 4)
    assert res["error"] in ("PicklingError", "AttributeError")
    assert len(dumps) == 1
    assert traces.end_bytes(dumps[0]["end"])[1] != "ok"
