"""`sertrace inspect`: big tuples and protocol 4-5 frozensets stream
(inspect/README.md "Streaming", big groups).

`MARK e1 ... eN TUPLE` (and FROZENSET) keeps every element on the stack
until its last opcode; the emulator feeds a big group's finished elements
as children of a placeholder for the tuple (emu_stream_group) and takes
them off the stack (compact_group), counting them in their MARK.  Each
shape -- a tuple or frozenset root, `{'k': tuple}`, `[tuple]`, tuples of
lists, dicts, str, nested big tuples, a big tuple as REDUCE arguments and
as a state, a tuple of ints (the atoms' loop makes it without pushing its
items) -- pickled by CPython with and without a memo at protocols 0-5 gives
byte for byte the same `--json --paths` and `--summary --exact --paths`
streamed at every batch, at a low threshold, by default and never, and
with the atoms' loop off; cut inside, the same exit 4; hand-made pickles
that take the group's items otherwise after it was compacted (POPs, a
TUPLE2 over its last items, APPEND, BUILD, a call on them) and seeded
mutations agree too; and peak RSS grows by about the input from 10^5 to
10^6 elements.

Run by meson (suite 'python'), which sets SERTRACE_BIN.
"""
import io
import json
import os
import pickle
import random
import shutil
import subprocess

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")
pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")

EVERY_BATCH = {"SERTRACE_INSPECT_STREAM_NODES": "1"}  # a big group from 8 items
LOW = {"SERTRACE_INSPECT_STREAM_NODES": "40"}
DEFAULT = {}  # a big group from 4 096 items
NEVER = {"SERTRACE_INSPECT_STREAM_NODES": str(2**32 - 1)}
NO_FAST = {"SERTRACE_INSPECT_NO_FAST": "1"}  # the general loop alone, streamed by default
WAYS = (EVERY_BATCH, LOW, DEFAULT, NEVER, NO_FAST)


class Args:
    """__reduce__ -> (Args, big tuple): REDUCE of a global and a big tuple."""

    def __init__(self, *data):
        self.data = data

    def __reduce__(self):
        return (Args, self.data)


class TupleState:
    """__getstate__ -> a big tuple: BUILD of it."""

    def __init__(self, data):
        self.data = data

    def __getstate__(self):
        return self.data

    def __setstate__(self, state):
        self.data = state


def pairs(n):
    return tuple((i, -i) for i in range(n))


def shapes(n):
    shared = pairs(n)
    return {
        "tuple": pairs(n),
        "frozenset": frozenset(pairs(n)),
        "{'k': tuple}": {"k": pairs(n), "j": 1},
        "[tuple]": [pairs(n)],
        "[tuple, frozenset]": [pairs(n), frozenset(pairs(n))],
        "(tuple, tuple)": (pairs(n), pairs(n)),
        "tuple of lists": tuple([i, i + 1] for i in range(n)),
        "tuple of 1-lists": tuple([i] for i in range(n)),
        "tuple of dicts": tuple({"a": i} for i in range(n)),
        "tuple of str": tuple(str(i) for i in range(n)),
        "tuple of ints": tuple(range(n)),
        "frozenset of ints": frozenset(range(n)),
        "tuple then a big list": pairs(n) + ([(1, 2)] * n,),
        "Args(*tuple)": Args(*pairs(n)),
        "TupleState(tuple)": TupleState(pairs(n)),
        "shared tuple": (shared, [shared], {"s": shared}),
    }


def dumps(obj, protocol, fast):
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol)
    p.fast = fast
    p.dump(obj)
    return buf.getvalue()


def inspect(env, *args, data=None):
    return subprocess.run([SERTRACE, "inspect", *args], input=data, capture_output=True,
                          timeout=600, env=dict(os.environ, **env))


def agree(path, ways=WAYS, tree=True):
    """Every way gives the same status, stdout and stderr (and --tree
    --exact the same with the atoms' loop and without); the status."""
    for args in (["--json", "--paths", "--top", "50"], ["--summary", "--exact", "--paths"]):
        runs = [inspect(env, *args, str(path)) for env in ways]
        got = {(r.returncode, r.stdout, r.stderr) for r in runs}
        assert len(got) == 1, (path, args, [(r.returncode, r.stderr[:300]) for r in runs])
    if tree:
        runs = [inspect(env, "--tree", "--exact", str(path)) for env in (DEFAULT, NO_FAST)]
        assert len({(r.returncode, r.stdout, r.stderr) for r in runs}) == 1, path
    return runs[0].returncode


@pytest.mark.parametrize("protocol", range(6))
def test_big_groups_stream_alike(protocol, tmp_path):
    """Every shape (600 elements: a big group at every batch and at 40;
    one tuple of 5 000 pairs: by default too), pickled by CPython with its
    memo and without, back to back in one input: the same JSON, text
    summary and tree every way; cut inside the last one, the same exit 4."""
    parts = []
    for fast in (False, True):
        for name, obj in shapes(600).items():
            if fast and name == "shared tuple":
                continue
            parts.append(dumps(obj, protocol, fast))
        parts.append(dumps({"k": pairs(5000)}, protocol, fast))
    path = tmp_path / "all.pkl"
    path.write_bytes(b"".join(parts))
    assert agree(path) == 0
    out = json.loads(inspect(NEVER, "--json", str(path)).stdout)["dumps"]
    assert [d["payload_bytes"] for d in out] == [len(p) for p in parts]
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(b"".join(parts[:-1]) + parts[-1][:len(parts[-1]) * 2 // 3])
    assert agree(cut, tree=False) == 4


PAIR = b"K\x01K\x02\x86"


def test_compacted_groups_taken_otherwise_agree(tmp_path):
    """Hand-made pickles whose big group, once streamed and taken off the
    stack, is used otherwise than its TUPLE predicts: POPs down into it
    (and past its MARK) then APPEND, BUILD, a TUPLE2, a REDUCE, SETITEM,
    DUP on what they reach, a TUPLE2 / TUPLE3 over its last items, a GET of
    a memoized element, the group ended by LIST, DICT or FROZENSET instead,
    errors after it was compacted (a bad STACK_GLOBAL, an unknown memo key);
    each at protocols 2, 4 and none, as a root, a dict value and a list
    item: the same streamed (read again where wrong) or not, valid or not."""
    group = b"(" + PAIR * 300
    tails = {
        "pops then tuple": b"000t.",
        "pops past the mark": b"0" * 301 + b"N.",
        "pops then more": b"00" + PAIR * 10 + b"t.",
        "tuple2 over the last": b"\x86t.",
        "tuple3 over the last": b"\x87t.",
        "append into the last": b"K\x05at.",
        "build into the last": b"K\x05bt.",
        "reduce of the last two": b"Rt.",
        "setitem": b"K\x05st.",
        "dup": b"2t.",
        "list instead": b"l.",
        "dict instead": b"d.",
        "frozenset instead": b"\x91.",
        "pop mark": b"1N.",
        "memoized then read": b"\x94" + PAIR * 5 + b"h\x00t.",
        "no end": b"",
        # past the items not fed yet, into those taken off the stack: read
        # again at once (run_pickle), as the bytes say
        "pops into the fed": b"0" * 200 + PAIR * 50 + b"t.",
        "pops into the fed, append": b"0" * 200 + b"K\x05at.",
        "pops into the fed, tuple2": b"0" * 200 + b"\x86t.",
        "pops into the fed, reduce": b"0" * 200 + b"Rt.",
        "pops into the fed, build": b"0" * 200 + b"K\x05bt.",
        "pops into the fed, setitem": b"0" * 200 + b"K\x05st.",
        "pops into the fed, dup": b"0" * 200 + b"2t.",
        "pops into the fed, bad global": b"0" * 200 + b"\x93t.",
        # malformed after a compaction: read again, the same error
        "bad global": b"K\x01K\x02\x93t.",
        "unknown memo key": b"h\x63t.",
    }
    for proto in (b"\x80\x02", b"\x80\x04", b""):
        for pre, post in ((b"", b""), (b"}(X\x01\x00\x00\x00k", b"u"), (b"]", b"a")):
            for name, tail in tails.items():
                data = proto + pre + group + PAIR * 300 + tail
                if post and tail.endswith(b"."):
                    data = data[:-1] + post + b"."
                path = tmp_path / "hand.pkl"
                path.write_bytes(data)
                agree(path, tree=False)


def test_group_mutations_agree():
    """300 seeded mutations (an opcode byte put in, a run of bytes copied,
    bytes cut) of small big-group shapes at protocols 2-5: streamed at every
    batch, at 40 and never, the same exit status, JSON and stderr."""
    rng = random.Random(15)
    seeds = [pickle.dumps(v, p) for p in (2, 3, 4, 5) for v in (
        pairs(40), frozenset(pairs(40)), {"k": tuple((i, [i]) for i in range(30)), "j": (1, 2)},
        [tuple(range(30)), tuple((str(i),) for i in range(30))],
        (tuple({"a": i} for i in range(20)), frozenset(range(25))),
        tuple([i, i] for i in range(30)))]
    for _ in range(300):
        d = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            i, k = rng.randrange(len(d)), rng.random()
            if k < 0.4:
                d[i] = rng.choice(b"(.)]}eustab\x85\x86\x870h\x94\x81\x93KN1\x91R")
            elif k < 0.7:
                j = rng.randrange(len(d))
                d[i:i] = d[j:j + rng.randint(1, 6)]
            else:
                del d[i:i + rng.randint(1, 3)]
        out = [inspect(env, "--json", "--paths", "--top", "30", "-", data=bytes(d))
               for env in (EVERY_BATCH, NEVER, LOW)]
        ref = (out[1].returncode, out[1].stdout, out[1].stderr)
        assert all((x.returncode, x.stdout, x.stderr) == ref for x in out), bytes(d)


def rss(env, path):
    from peak_rss import summary_rss

    return summary_rss(SERTRACE, env, path)


def grows_like_the_input(make, protocol, tmp_path):
    """tests/inspect/peak_rss.py's check, for this suite's sertrace."""
    from peak_rss import grows_like_the_input as grows

    grows(SERTRACE, make, protocol, tmp_path)


def test_memory_of_big_tuples_and_frozensets(tmp_path):
    """Peak RSS of `inspect --summary` from 10^5 to 10^6 elements grows by
    about the input: a tuple of pairs (protocols 1, 2, 5), a frozenset of
    pairs (4, 5), {'k': tuple} (4), [tuple] (2), a REDUCE of a big tuple
    (4)."""
    if not shutil.which("time", path="/usr/bin"):
        pytest.skip("no /usr/bin/time")
    for protocol in (1, 2, 5):
        grows_like_the_input(pairs, protocol, tmp_path)
    for protocol in (4, 5):
        grows_like_the_input(lambda n: frozenset(pairs(n)), protocol, tmp_path)
    grows_like_the_input(lambda n: {"k": pairs(n)}, 4, tmp_path)
    grows_like_the_input(lambda n: [pairs(n)], 2, tmp_path)
    grows_like_the_input(lambda n: Args(*pairs(n)), 4, tmp_path)


def test_memory_of_tuples_of_atoms(tmp_path):
    """tuple(range(n)) and frozenset(range(n)) (protocol 4: a MARK, the ints,
    TUPLE / FROZENSET in the atoms' loop): made without pushing the ints,
    read whole too (no node to stream); 10^5 -> 10^6 grows by the input."""
    if not shutil.which("time", path="/usr/bin"):
        pytest.skip("no /usr/bin/time")
    for make in (lambda n: tuple(range(n)), lambda n: frozenset(range(n))):
        sizes, peaks = [], []
        for n in (10 ** 5, 10 ** 6):
            path = tmp_path / ("a%d.pkl" % n)
            data = dumps(make(n), 4, True)
            path.write_bytes(data)
            sizes.append(len(data))
            peaks.append(rss(NEVER, path))
        assert peaks[1] - peaks[0] < (sizes[1] - sizes[0]) + (6 << 20), (peaks, sizes)
