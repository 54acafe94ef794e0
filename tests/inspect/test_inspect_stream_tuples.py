"""`sertrace inspect`: tuples and calls being built around big containers
stream (inspect/README.md "Streaming", tuple and call levels).

`([...],)`, `(header, [...])`, `{'k': ([...],)}`, an object whose reduce
arguments hold a big list, set / frozenset / copyreg._reconstructor REDUCEs
(protocols 0-3) of a big list, a state tuple around one: the tuple's (the call's) node comes only at its
TUPLE (REDUCE, NEWOBJ) opcode, after its elements; the emulator finds that
opcode by a walk ahead and enters a placeholder for it before the elements
it streams.  Each shape, streamed at every batch, by the default rule at a
low threshold, by default and never, gives byte for byte the same `--json
--paths` and `--summary --exact --paths` (node count, bytes per node, root,
paths, shared objects), at protocols 0-5, with and without a memo; cut
inside, the same exit 4; and its peak RSS grows by about the input from
10^5 to 10^6 tuples, far less than read whole.

Run by meson (suite 'python'), which sets SERTRACE_BIN.
"""
import copyreg
import io
import os
import pickle
import shutil
import subprocess

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")
pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")

EVERY_BATCH = {"SERTRACE_INSPECT_STREAM_NODES": "1"}
MARKED = {"SERTRACE_INSPECT_STREAM_NODES": "2"}
DEFAULT = {}
NEVER = {"SERTRACE_INSPECT_STREAM_NODES": str(2**32 - 1)}


class Reduced:
    """__reduce__ -> (Reduced, (data,)): REDUCE of a global and a tuple."""

    def __init__(self, data):
        self.data = data

    def __reduce__(self):
        return (Reduced, (self.data,))


class NewArgs:
    """copyreg.__newobj__: NEWOBJ (protocol 2+) of the class and (data,)."""

    def __new__(cls, *args):
        obj = object.__new__(cls)
        obj.args = args
        return obj

    def __reduce_ex__(self, protocol):
        return (copyreg.__newobj__, (NewArgs,) + self.args)


class Keywords:
    """__getnewargs_ex__: NEWOBJ_EX (protocol 4+) with a kwargs dict."""

    def __new__(cls, **kw):
        obj = object.__new__(cls)
        obj.kw = kw
        return obj

    def __getnewargs_ex__(self):
        return ((), self.kw)


class Filled:
    """A reduce with listitems after a tuple of arguments holding a list."""

    def __init__(self, head, data):
        self.head, self.data = head, data

    def __reduce__(self):
        return (Filled, (self.head, self.data), None, iter(self.data[:3]))

    def append(self, x):
        pass


class MyList(list):
    """A list subclass: copyreg._reconstructor's REDUCE at protocols 0-1, its
    items in the arguments (MyList, list, [...]); NEWOBJ + APPENDS after."""


class TupleState:
    """__getstate__ -> a tuple holding the big list: BUILD of a state tuple."""

    def __init__(self, data):
        self.data = data

    def __getstate__(self):
        return ("v1", self.data)

    def __setstate__(self, state):
        self.data = state[1]


class DictAndSlots:
    """Slots and a __dict__: the state is (dict, {slot: value}), a TUPLE2."""

    __slots__ = ("data", "__dict__")

    def __init__(self, data):
        self.data = data
        self.x = 1


def shapes(n):
    def big():
        return [(i, -i) for i in range(n)]

    shared = big()
    return {
        "([...],)": (big(),),
        "(header, [...])": ("header", big()),
        "{'k': ([...],)}": {"k": (big(),), "j": ("h", big())},
        "((([...],),),)": (((big(),),),),
        "(1, 2, 3, [...]) MARK TUPLE": (1, 2, 3, big()),
        "([...], 1, 2, 3, 4)": (big(), 1, 2, 3, 4),
        "two lists in a tuple": (big(), big()),
        "a tuple in a list in a tuple": ([("h", big()), (big(),)],),
        "Reduced([...])": Reduced(big()),
        "Reduced(Reduced([...]))": Reduced(Reduced(big())),
        "Reduced((header, [...]))": Reduced(("h", big())),
        "[Reduced, Reduced]": [Reduced(big()), Reduced(big())],
        "NewArgs([...])": NewArgs(big()),
        "Keywords(data=[...])": Keywords(data=big()),
        "Filled(h, [...])": Filled("h", big()),
        "shared list in a tuple": (shared, [shared]),
        "dict of tuples": ({i: (i,) for i in range(n)}, [big()]),
        "set(...)": set(big()),
        "frozenset(...)": frozenset(big()),
        "[set(...), frozenset(...)]": [set(big()), frozenset(big())],
        "MyList(...)": MyList(big()),
        "{'k': MyList(...)}": {"k": MyList(big()), "j": MyList(())},
        "TupleState([...])": TupleState(big()),
        "DictAndSlots([...])": DictAndSlots(big()),
        # levels whose walks resume where the level above stopped
        "{'a': {'b': {'c': [...]}}}": {"a": {"b": {"c": big()}, "d": 1}, "e": [big()]},
        "[{'x': ([...],)}, ...]": [{"x": (big(),)}, {"y": [Reduced(big())]}],
        "[[[...]], [...]] (a MARK a level)": [[[big()], 1], [big()]],
    }


def dumps(obj, protocol, fast):
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol)
    p.fast = fast
    p.dump(obj)
    return buf.getvalue()


def inspect(env, *args):
    return subprocess.run([SERTRACE, "inspect", *args], capture_output=True, timeout=600,
                          env=dict(os.environ, **env))


def agree(path):
    """The four ways give the same status, stdout and stderr; returns the status."""
    for args in (["--json", "--paths", "--top", "50"], ["--summary", "--exact", "--paths"]):
        runs = [inspect(env, *args, str(path)) for env in (EVERY_BATCH, MARKED, DEFAULT, NEVER)]
        got = {(r.returncode, r.stdout, r.stderr) for r in runs}
        assert len(got) == 1, (path, args, [(r.returncode, r.stderr[:300]) for r in runs])
    return runs[0].returncode


@pytest.mark.parametrize("protocol", range(6))
def test_tuples_and_calls_around_big_containers_stream_alike(protocol, tmp_path):
    """Every shape, pickled by CPython with its memo and without (fast), back
    to back in one input: streamed or not, the same JSON and text summary;
    then the input cut inside its last big list: the same exit 4."""
    parts = []
    for fast in (False, True):
        for name, obj in shapes(3000).items():
            if protocol < 2 and name.startswith(("NewArgs", "Keywords", "DictAndSlots")):
                continue
            if fast and name == "shared list in a tuple":
                continue
            parts.append(dumps(obj, protocol, fast))
    path = tmp_path / "all.pkl"
    path.write_bytes(b"".join(parts))
    assert agree(path) == 0
    proc = inspect(NEVER, "--json", str(path))
    assert proc.returncode == 0
    import json
    dumps_out = json.loads(proc.stdout)["dumps"]
    assert len(dumps_out) == len(parts)
    assert [d["payload_bytes"] for d in dumps_out] == [len(p) for p in parts]
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(b"".join(parts[:-1]) + parts[-1][:len(parts[-1]) * 2 // 3])
    assert agree(cut) == 4


def test_hand_made_wraps_agree(tmp_path):
    """Hand-made pickles the walk ahead must follow: a list wrapped by TUPLE1
    after a POP of a mark, a TUPLE whose MARK sits under the list's, a tuple
    later given to a BUILD (a state), a call whose result is POPped (not a
    chain: never streamed), a list given to a DUP then wrapped; each the same
    streamed or not."""
    items = b"".join(b"K\x01K\x02\x86" for _ in range(1000))
    batches = b"(" + items + b"e"
    shapes = {
        "pop mark then wrap": b"\x80\x04]" + batches * 3 + b"(1\x85.",
        "mark under the list": b"\x80\x04(]" + batches * 3 + b"t.",
        "tuple as a state": b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81]" + batches * 3 + b"\x85b.",
        "call popped": b"\x80\x04\x8c\x01m\x8c\x01f\x93]" + batches * 3 + b"\x85R0N.",
        "dup then wrap": b"\x80\x04]2" + batches * 3 + b"\x86.",
        "reduce of a reduce result": b"\x80\x04\x8c\x01m\x8c\x01f\x93)R]" + batches * 3 + b"\x85R.",
    }
    for name, data in shapes.items():
        path = tmp_path / "hand.pkl"
        path.write_bytes(data)
        agree(path)


def test_memory_of_tuples_and_calls_around_big_containers(tmp_path):
    """Peak RSS of `inspect --summary`, from 10^5 to 10^6 tuples (fast-mode
    pickler, protocols 2 and 5): `([...],)`, `(header, [...])`,
    `{'k': ([...],)}` and Reduced([...]) (REDUCE of (list,)) grow by about
    the input (mapped) streamed, under a quarter of the growth read whole."""
    if not shutil.which("time", path="/usr/bin"):
        pytest.skip("no /usr/bin/time")
    makers = (lambda n: ([(i, i) for i in range(n)],),
              lambda n: ("header", [(i, i) for i in range(n)]),
              lambda n: {"k": ([(i, i) for i in range(n)],)},
              lambda n: Reduced([(i, i) for i in range(n)]))
    for protocol in (2, 5):
        for make in makers:
            grows_like_the_input(make, protocol, tmp_path)


def grows_like_the_input(make, protocol, tmp_path):
    """tests/inspect/peak_rss.py's check, for this suite's sertrace."""
    from peak_rss import grows_like_the_input as grows

    grows(SERTRACE, make, protocol, tmp_path)


def test_memory_of_set_frozenset_and_reconstructor_reduces(tmp_path):
    """The REDUCEs of special callables whose argument holds the big list
    stream: set([...]) (protocols 0-3), frozenset([...]) (0-3) and a list
    subclass rebuilt by copyreg._reconstructor(MyList, list, [...])
    (protocols 0-1), each at one protocol here (the agreement test covers
    them all)."""
    if not shutil.which("time", path="/usr/bin"):
        pytest.skip("no /usr/bin/time")
    grows_like_the_input(lambda n: set((i, i) for i in range(n)), 2, tmp_path)
    grows_like_the_input(lambda n: frozenset((i, i) for i in range(n)), 1, tmp_path)
    grows_like_the_input(lambda n: MyList((i, i) for i in range(n)), 0, tmp_path)


def test_dup_of_a_group_item_is_not_foreseen(tmp_path):
    """A DUP'd item given to BUILD as the state of its own object before the
    group's consumer (a stream no pickler writes; pickle.loads rejects it):
    the walk ahead does not foresee the state label, so it stops at DUP and
    nothing streams there -- the same `--json --paths` every way (it gave a
    position label streamed, found by the tuplemem helper)."""
    payloads = [
        b"\x80\x04](" + b"]K\x01a" * 20 + b"2be\x8c\x01m\x8c\x01f\x93a.",
        b"\x80\x04](" + b"]K\x01a" * 20 + b"2beK\x07a.",
        b"\x80\x04}(" + b"".join(b"\x8c\x02k%d]K\x01a" % i for i in range(9)) + b"2bu.",
    ]
    for i, data in enumerate(payloads):
        path = tmp_path / ("dup%d.pkl" % i)
        path.write_bytes(data)
        runs = [inspect(env, "--json", "--paths", str(path))
                for env in (EVERY_BATCH, MARKED, {"SERTRACE_INSPECT_STREAM_NODES": "5"}, DEFAULT, NEVER)]
        ref = runs[-1]
        assert ref.returncode == 0, (i, ref.stderr)
        for r in runs:
            assert (r.returncode, r.stdout, r.stderr) == (ref.returncode, ref.stdout, ref.stderr), i
