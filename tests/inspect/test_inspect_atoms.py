"""The emulator's loop for atoms (inspect/emulator.c `run_atoms`): what it
does must be what the general loop does.  Each payload is inspected twice,
the second time with SERTRACE_INSPECT_NO_FAST=1 (the general loop alone),
and the outputs (`--tree --exact`, `--json --paths`), the exit status and
stderr must be equal byte for byte.  The payloads are built to cross its
edges: batches of atoms across frames, memoized str and bytes (MEMOIZE,
BINPUT), dict and set batches, batches broken by containers, memo
references, no memo at all, truncated and corrupted bytes.

Run by meson (suite 'python'), which sets SERTRACE_BIN.
"""
import io
import os
import pickle
import subprocess

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")

pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")


def objects():
    shared = ["alpha", "beta", b"gamma"]
    gl, gb = ["g%d" % j for j in range(3000)], [b"b%d" % j for j in range(3000)]
    return {
        "ints": list(range(-3000, 70000, 7)),  # BININT1/2/BININT, batches across frames
        "strs": ["s%d" % i for i in range(30000)],  # SHORT_BINUNICODE + MEMOIZE / BINPUT
        "bytes": [bytes([i % 256]) * (i % 700) for i in range(3000)],  # both sizes, frames
        "floats-consts": [i * 0.5 for i in range(20000)] + [None, True, False] * 1000,
        "dict": {"k%d" % i: i for i in range(5000)},  # SETITEMS batches
        "set": set(range(4000)),  # ADDITEMS (protocol 4+)
        "nested": [[i, "x%d" % i, (i, None)] for i in range(3000)],  # batches broken
        "longs": [2 ** 70 + i for i in range(2000)],  # LONG1
        "refs": [shared[i % 3] for i in range(5000)],  # BINGET in batches
        "big-str": ["a" * 300, "b" * 70000, "c"] * 3,  # BINUNICODE, unframed payloads
        "tuples-root": tuple(range(2000)),  # a MARK batch ended by TUPLE
        # str and bytes read back by keys past 255: LONG_BINGET (protocols 4-5; 2-3: their
        # LONG_BINPUT goes to the general loop), in list and dict batches, in tuples
        "gets-long": [[s, s, i, b, b] for i, (s, b) in enumerate(zip(gl, gb))] +
                     [{"k": s, "v": b} for s, b in zip(gl, gb)] + [(s, b) for s, b in zip(gl, gb)],
    }


class Point:
    """An instance for the tuple payloads (NEWOBJ with a tuple of arguments, BUILD)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __getnewargs__(self):
        return (self.x, self.y)


def tuple_objects():
    """Payloads of small tuples (TUPLE1/2/3, run_atoms takes them too): of atoms, memoized
    elements, nested, as dict keys and values, in sets, referenced twice, recursive (POP then
    GET), as call arguments (NEWOBJ, REDUCE) -- streamed or not (test_tuples_*)."""
    shared = ("s", 1)
    rec = []
    rec_t = (rec, 1)
    rec.append(rec_t)
    return {
        "tuples": [(i, None) for i in range(6000)] + [(i,) for i in range(500)] +
                  [(i, "x", b"y") for i in range(500)],
        "tuples-str": [("k%d" % i, "v%d" % i) for i in range(3000)],  # memoized elements
        "tuples-nested": [((i, i), (i,), ((i, None, True),)) for i in range(2000)],
        "tuples-dict": {(i, "k"): (i, 0.5) for i in range(3000)},
        "tuples-set": {(i, -i) for i in range(2000)},
        "tuples-shared": [shared, (shared, shared), [shared]] * 1000,
        "tuples-recursive": [rec, rec_t] * 50,
        "tuples-calls": [Point(i, (i, "p")) for i in range(1500)] +
                        [complex(i, 1) for i in range(500)],
        "tuples-lists": [[(i, i + 1), [(i,)], {"t": (i, i, i)}] for i in range(2000)],
        # EMPTY_DICT / EMPTY_LIST / EMPTY_SET / EMPTY_TUPLE and BINGET of memoized str / bytes
        "small-dicts": [{"a": i, "b": None, "c": "a"} for i in range(3000)],
        "empties": [[], {}, set(), (), [[]], {"k": {}}, ((),)] * 500,
        "gets": [["x", b"yy", "x", b"yy", i] for i in range(2000)],
        "gets-keys": [{"s%d" % (i % 7): "s%d" % (i % 5), b"k": i} for i in range(2000)],
        "shared-dict": [{"d": shared}] * 500 + [[shared, shared]] * 500,
    }


def payloads():
    for name, obj in objects().items():
        for proto in (2, 3, 4, 5):
            yield "%s-p%d" % (name, proto), pickle.dumps(obj, proto)
    buf = io.BytesIO()
    p = pickle.Pickler(buf, 4)
    p.fast = True  # no memo at all
    p.dump(["t%d" % i for i in range(20000)])
    yield "no-memo", buf.getvalue()
    yield "back-to-back", pickle.dumps(list(range(5000)), 4) + pickle.dumps(["x"] * 3, 2)


def tuple_payloads():
    for name, obj in tuple_objects().items():
        for proto in (2, 4, 5):
            yield "%s-p%d" % (name, proto), pickle.dumps(obj, proto)
    buf = io.BytesIO()
    p = pickle.Pickler(buf, 4)
    p.fast = True  # no memo at all
    p.dump({"data": [(i, "t") for i in range(5000)], "more": [((i,), i) for i in range(500)]})
    yield "tuples-no-memo", buf.getvalue()
    # tuples of atoms with no memo between them (run_atoms makes them without their items:
    # atoms_tuple): every atom kind, bytes first and str second (what a REDUCE reads of its
    # arguments: `_codecs.encode(str, 'latin1')` for bytes at protocol 2, complex, slice)
    for proto in (2, 4):
        buf = io.BytesIO()
        p = pickle.Pickler(buf, proto)
        p.fast = True
        p.dump([(b"b%d" % i, "s", i) for i in range(300)] +
               [(i * 0.5, True, 2 ** 70 + i) for i in range(300)] + [(None,), (False, -1)] * 50 +
               [complex(i, 2) for i in range(200)] + [b"\x00\xff" * (i % 5) for i in range(200)] +
               [slice(i, None, 2) for i in range(100)] + [("x" * 300, b"y" * 70000, 65536)])
        yield "tuples-kinds-fast-p%d" % proto, buf.getvalue()


def run(path, args, fast, stream=None):
    env = dict(os.environ)
    env.pop("SERTRACE_INSPECT_NO_FAST", None)
    env.pop("SERTRACE_INSPECT_STREAM_NODES", None)
    if stream:
        env["SERTRACE_INSPECT_STREAM_NODES"] = stream
    if not fast:
        env["SERTRACE_INSPECT_NO_FAST"] = "1"
    proc = subprocess.run([SERTRACE, "inspect", *args, str(path)], capture_output=True, env=env,
                          timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def same_both_ways(path, stream=None):
    for args in (["--tree", "--exact"], ["--json", "--paths"]):
        fast, slow = run(path, args, True, stream), run(path, args, False, stream)
        assert fast == slow, (path.name, args, fast[0], slow[0], fast[2][-300:], slow[2][-300:])
    return fast


@pytest.mark.parametrize("name,data", list(payloads()), ids=lambda x: x if isinstance(x, str) else "")
def test_atoms_loop_equals_general_loop(name, data, tmp_path):
    path = tmp_path / (name + ".pkl")
    path.write_bytes(data)
    rc, out, err = same_both_ways(path)
    assert rc == 0, err
    assert b'"status": "ok"' in out or b'"status":"ok"' in out


def test_atoms_loop_on_cut_and_corrupted_bytes(tmp_path):
    """Cut anywhere (inside a batch, an argument, a frame) and with bytes
    changed: the same output, status and reason both ways."""
    data = pickle.dumps([["s%d" % i, i, i * 0.5, b"b" * (i % 300)] for i in range(400)] +
                        list(range(3000)), 4)
    n = len(data)
    cuts = sorted(set([1, 2, 11, 12, 13, 14, 15, n // 7, n // 3, n // 2, n - 3, n - 2, n - 1] +
                      list(range(65530, 65560))))
    statuses = set()
    for i, cut in enumerate(cuts):
        path = tmp_path / ("cut%d.pkl" % i)
        path.write_bytes(data[:cut])
        rc, _, err = same_both_ways(path)
        statuses.add(rc)
    assert statuses == {4}, statuses  # every cut is inconclusive, never a crash
    for i, at in enumerate(range(20, n, max(1, n // 40))):
        for value in (0x28, 0x94, 0x4B, 0xFF):  # MARK, MEMOIZE, BININT1, an unknown opcode
            path = tmp_path / ("flip%d-%x.pkl" % (i, value))
            path.write_bytes(data[:at] + bytes([value]) + data[at + 1:])
            rc, _, _ = same_both_ways(path)
            assert rc in (0, 4), rc


# streamed dumps (inspect/README.md "Streaming"): the default threshold, every batch a
# prediction (1: wrong predictions read again often), and one in between
@pytest.mark.parametrize("stream", [None, "1", "64"])
@pytest.mark.parametrize("name,data", list(tuple_payloads()), ids=lambda x: x if isinstance(x, str) else "")
def test_tuples_loop_equals_general_loop(name, data, stream, tmp_path):
    path = tmp_path / (name + ".pkl")
    path.write_bytes(data)
    rc, out, err = same_both_ways(path, stream)
    assert rc == 0, err
    assert b'"status": "ok"' in out or b'"status":"ok"' in out


@pytest.mark.parametrize("name", ["dict-p4", "nested-p4", "refs-p2", "strs-p5", "set-p4"])
def test_atoms_loop_streamed(name, tmp_path):
    """The atoms' loop runs in streamed dumps too: the same with every batch a prediction."""
    data = dict(payloads())[name]
    path = tmp_path / (name + ".pkl")
    path.write_bytes(data)
    rc, _, err = same_both_ways(path, "1")
    assert rc == 0, err


@pytest.mark.parametrize("stream", [None, "1"])
def test_tuples_loop_on_cut_and_corrupted_bytes(stream, tmp_path):
    """Tuples of atoms and of containers cut anywhere and with bytes changed (TUPLE1/2/3, MARK,
    MEMOIZE, EMPTY_TUPLE, BINGET, EMPTY_DICT, EMPTY_LIST): the same output, status and reason both ways."""
    data = pickle.dumps([[(i, None), ("t%d" % i, (i,), b"b"), {"k": (i, i, i)}, {"k": "t%d" % i},
                          [], set()] for i in range(300)], 4)
    n = len(data)
    cuts = sorted(set([1, 2, 11, 12, 13, 14, 15, n // 7, n // 3, n // 2, n - 3, n - 2, n - 1]))
    statuses = set()
    for i, cut in enumerate(cuts):
        path = tmp_path / ("cut%d.pkl" % i)
        path.write_bytes(data[:cut])
        rc, _, _ = same_both_ways(path, stream)
        statuses.add(rc)
    assert statuses == {4}, statuses
    for i, at in enumerate(range(20, n, max(1, n // 30))):
        for value in (0x85, 0x86, 0x87, 0x28, 0x94, 0x29, 0x68, 0x7D, 0x5D):
            path = tmp_path / ("flip%d-%x.pkl" % (i, value))
            path.write_bytes(data[:at] + bytes([value]) + data[at + 1:])
            rc, _, _ = same_both_ways(path, stream)
            assert rc in (0, 4), rc
