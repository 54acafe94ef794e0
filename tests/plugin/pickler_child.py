"""Child process of test_e2e_pickler.py: dumps objects with the traced C
pickler (the `sertrace` package of the build, on PYTHONPATH) while an LTTng
session records it, and prints what it wrote, one JSON object a line:

  {"pid": P}                                      first line
  {"tid": T, "len": N, "proto_len": 0|2, "stop_framed": bool, "frames": F,
   "label": "...", "protocol": p, "target": "..."}   one per dump, in order

proto_len, stop_framed and frames are read from the payload by
testlib.payload.shape (tests/lib; the header/trailer rule of
tests/pickle/test_accounting.py): root bytes +
proto_len + 1 (STOP) + 9 if STOP sits in a frame == len(payload).

  pickler_child.py workloads          every workload x protocol 0-5 x target
  pickler_child.py threads T N        T threads, N dumps each, all at once
  pickler_child.py kill K PAD         K dumps, then SIGKILL from a __reduce__
                                      deep in a dump (PAD: force the batch
                                      holding the chain out with notes)
  pickler_child.py kill-after-closed  SIGKILL in a node after a sibling closed
                                      in the batch the runtime still holds
  pickler_child.py span               a batch lost between a node and its
                                      sibling (4 KiB sub-buffers)
  pickler_child.py flood N            N dumps of scheduler states, sizes varied
  pickler_child.py loop N             N dumps, then one paused inside until a
                                      line arrives on stdin (snapshots)
  pickler_child.py refs N             one dump: N users (dicts) written once,
                                      then each referenced again (memo refs)

Environment: SERTRACE_WORKLOADS (the workloads/ folder).
"""

import dataclasses
import json
import os
import signal
import sys
import tempfile
import threading

sys.path.insert(0, os.environ["SERTRACE_WORKLOADS"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

import dispatch_like_state as dls  # noqa: E402
import sertrace  # noqa: E402
from testlib.payload import shape  # noqa: E402

OUT_LOCK = threading.Lock()


def emit(obj):
    with OUT_LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def record(data, **kw):
    proto_len, stop_framed, frames = shape(data)
    emit(dict(tid=threading.get_native_id(), len=len(data), proto_len=proto_len,
              stop_framed=stop_framed, frames=frames, **kw))


# ---- workloads -------------------------------------------------------------


class Plain:
    def __init__(self, name, items):
        self.name = name
        self.items = items
        self.meta = {"k": (1, 2.5, None), "tags": {"a", "b"}}


class Slotted:
    __slots__ = ("x", "y", "children")

    def __init__(self, x, y, children=()):
        self.x = x
        self.y = y
        self.children = list(children)

    # protocols 0-1 need it for a class with __slots__ (as with pickle)
    def __getstate__(self):
        return (self.x, self.y, self.children)

    def __setstate__(self, st):
        self.x, self.y, self.children = st


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "p"
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Frozen:
    key: str
    values: tuple


def builtins_nested():
    return {
        "ints": list(range(-5, 300, 7)) + [2**70, -(2**65)],
        "floats": [0.5, -1e300, float("inf")],
        "nested": [[i, (i, str(i)), {"k%d" % i: [None, True, False]}] for i in range(40)],
        "sets": [set(range(10)), frozenset({"x", "y"})],
        "text": ["caf\u00e9", "\u65e5\u672c", "x" * 300],
        "bytes": [b"\x00\x01" * 50, bytearray(b"abc" * 20)],
        "deep": [[[[[[{"leaf": (1,)}]]]]]],
        "shared": [[1, 2, 3]] * 3,
        "empty": ([], {}, (), set(), ""),
    }


def instances():
    return [
        Plain("root", [Plain("kid%d" % i, list(range(i))) for i in range(6)]),
        Slotted(1, 2.0, [Slotted(i, -i) for i in range(20)]),
        [Point(i, i / 3, extra={"i": i}) for i in range(30)],
        Frozen("f", tuple(range(15))),
        {"pt": Point(0, 0.0)},
    ]


def large():
    # bytes and str larger than a 64 KiB frame (written outside frames from
    # protocol 4 on), next to small items inside frames
    return [b"\xab" * 150000, "\u00e9" * 70000 + "x", [b"s", "t"], bytearray(100000),
            "a" * 65536, b"b" * 65537, {"tail": list(range(100))}]


WORKLOADS = [
    ("builtins", builtins_nested),
    ("instances", instances),
    ("state", lambda: dls.build_state(4)),
    ("large", large),
]


def dump_via(target, obj, protocol, tmpdir, i):
    if target == "dumps":
        return sertrace.dumps(obj, protocol)
    path = os.path.join(tmpdir, "d%d.pkl" % i)
    with open(path, "wb") as f:
        if target == "dump":
            sertrace.dump(obj, f, protocol)
        else:
            sertrace.Pickler(f, protocol).dump(obj)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


def run_workloads():
    import pickle

    i = 0
    with tempfile.TemporaryDirectory(prefix="sertrace-child-") as tmpdir:
        for label, build in WORKLOADS:
            obj = build()
            for protocol in range(6):
                for target in ("dumps", "dump", "Pickler"):
                    data = dump_via(target, obj, protocol, tmpdir, i)
                    assert data == pickle.dumps(obj, protocol), (label, protocol, target)
                    record(data, label=label, protocol=protocol, target=target)
                    i += 1


# ---- threads ---------------------------------------------------------------


class Yield:
    """Releases the GIL in the middle of a dump; the first one of each
    thread waits until all threads are inside a dump."""

    def __init__(self, barrier=None):
        self.barrier = barrier

    def __reduce__(self):
        if self.barrier is not None:
            self.barrier.wait(timeout=120)
        else:
            os.sched_yield()
        return (Yield, ())


def run_threads(nthreads, ndumps):
    barrier = threading.Barrier(nthreads)

    def work(k):
        for j in range(ndumps):
            # distinct sizes per thread: k decides the width, j the depth
            obj = {"thread": k, "items": [Yield(barrier if j == 0 else None)]
                   + [[k, j, "v" * (k + 1)] for _ in range(10 + 13 * k + j)]}
            data = sertrace.dumps(obj, 2 + (k + j) % 4)
            record(data, label="t%d" % k, protocol=2 + (k + j) % 4, target="dumps")

    ts = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


# ---- kill ------------------------------------------------------------------


class Killer:
    def __init__(self, pad):
        self.pad = pad

    def __reduce__(self):
        if self.pad:
            # the runtime flushes a 4 KiB batch when it is full: notes on
            # this node push the batch that holds the open chain (up to this
            # node's ENTER) into the trace before the process dies
            for k in range(6):
                sertrace.note("pad%d" % k, "x" * 900)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        return (Killer, (self.pad,))


class Closed:
    """Its __reduce__ writes 6 notes of ~710 B: the sixth no longer fits the
    runtime's 4 KiB batch, which is flushed there, while this node is open;
    the batch holding this node's EXIT is still in the runtime when a later
    sibling kills the process."""

    def __reduce__(self):
        for k in range(6):
            sertrace.note("closed%d" % k, "c" * 700)
        return (Closed, ())


def run_kill_after_closed():
    """One dump of [Closed(), [Killer]]: the process dies inside the Killer,
    after Closed ended."""
    emit({"dying": True})
    sertrace.dumps([Closed(), [Killer(False)]], 4)
    emit({"survived": True})


class Holder:
    def __init__(self, inner):
        self.inner = inner


def run_kill(k, pad):
    for i in range(k):
        data = sertrace.dumps(dls.build_state(1 + i % 3), 5)
        record(data, label="state", protocol=5, target="dumps")
    state = dls.build_state(2)
    state.extra_payload = {"work": [Holder([1, 2, Killer(pad)])]}
    emit({"dying": True})
    sertrace.dumps(state, 5)
    emit({"survived": True})


# ---- span: a lost batch between a node's ENTER and a sibling's EXIT ------


class Flusher:
    """With notes, its __reduce__ writes 6 notes of ~710 B on its node (note
    strings are cut at 1000 B): the sixth one no longer fits the runtime's
    4 KiB batch, so the batch (~3.6 KB, which fits a 4 KiB sub-buffer) is
    flushed right there.  `kids` small tuples follow as its children
    (~18 B of records each)."""

    def __init__(self, name, kids, notes):
        self.name = name
        self.kids = kids
        self.notes = notes

    def __reduce__(self):
        for k in range(6 if self.notes else 0):
            sertrace.note("%s%d" % (self.name, k), "n" * 700)
        return (Flusher, (self.name, tuple((i, -i) for i in range(self.kids)), False))


def run_span():
    """One dump, root list [A, B, C], batches (seq):
      0  L enter, A enter, A's notes 0-4                  ~3.6 KB: kept
      1  A's note 5, A exit, B enter, B's first children  full 4 KiB: an
         event larger than a 4 KiB sub-buffer, dropped by LTTng
      2  B's last children, B exit, C, L exit             ~1.7 KB: kept
    so the reader sees A's ENTER, then (after a gap) B's EXIT at A's depth."""
    obj = [Flusher("a", 0, True), Flusher("b", 250, False), Flusher("c", 0, False)]
    data = sertrace.dumps(obj, 4)
    record(data, label="span", protocol=4, target="dumps")


# ---- flood / loop ----------------------------------------------------------


def run_flood(n):
    for i in range(n):
        obj = dls.build_state(1 + i % 7) if i % 5 else {"small": list(range(i % 11))}
        data = sertrace.dumps(obj, 2 + i % 4)
        record(data, label="flood", protocol=2 + i % 4, target="dumps")


class Pause:
    """Tells the test it is inside a dump, then waits for a line on stdin
    (the test takes its snapshot meanwhile)."""

    def __reduce__(self):
        emit({"ready": True})
        sys.stdin.readline()
        return (Pause, ())


def run_loop(n):
    """n dumps of varied scheduler states (several 4 KiB batches each), then
    one that pauses in its middle until the test has its snapshot."""
    for i in range(n):
        data = sertrace.dumps(dls.build_state(4 + i % 5), 2 + i % 4)
        record(data, label="loop", protocol=2 + i % 4, target="dumps")
    state = dls.build_state(4)
    state.extra_payload = {"pause": [Pause()]}
    data = sertrace.dumps(state, 5)
    record(data, label="paused", protocol=5, target="dumps")


def run_refs(n):
    """N users (dicts) in one list, then a second list of the same users:
    the second holds N memo references (the pickle's BINGET/LONG_BINGET).
    Dicts, not instances: an instance also refers back to its class, whose
    node and memo references carry the class's name too."""
    users = [{"name": "user%d" % k, "uid": k} for k in range(n)]
    data = sertrace.dumps((users, list(users)), 4)
    record(data, label="refs", protocol=4, target="dumps")


def helper():
    """A module-level function: pickled by reference (F2)."""


class Marker:
    """A class pickled by reference (T4), and instances of it."""


def run_fnrefs(n):
    """A function and a class, each written once by reference and then
    referenced n more times (memo references to a function or class, which
    the serializer names "function __main__.helper" / "class ..."), and n
    Marker instances, whose reduce refers back to their class too."""
    data = sertrace.dumps(([helper] * (n + 1), [Marker] * (n + 1), [Marker() for _ in range(n)]), 4)
    record(data, label="fnrefs", protocol=4, target="dumps")


def main():
    emit({"pid": os.getpid()})
    mode = sys.argv[1]
    if mode == "workloads":
        run_workloads()
    elif mode == "threads":
        run_threads(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "kill":
        run_kill(int(sys.argv[2]), sys.argv[3] == "pad")
    elif mode == "kill-after-closed":
        run_kill_after_closed()
    elif mode == "span":
        run_span()
    elif mode == "flood":
        run_flood(int(sys.argv[2]))
    elif mode == "loop":
        run_loop(int(sys.argv[2]))
    elif mode == "refs":
        run_refs(int(sys.argv[2]))
    elif mode == "fnrefs":
        run_fnrefs(int(sys.argv[2]))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
