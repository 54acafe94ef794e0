"""`sertrace inspect`: trees equal to recorded ones, output, usage, hostile input.

Run by meson (suite 'python'), which sets SERTRACE_BIN (the built
`sertrace`) and PYTHONPATH (the built `sertrace` package, whose pickler
records the reference trees).

The reference is the live text tree (DISPATCH_TRACE=<file>,
SERTRACE_EXACT=1, default granularity) printed by the pickler while it
dumps: the same events a recording carries, turned into a tree by the same
runtime, without an lttng-sessiond in the loop (robust on a loaded CI
machine, and exact: a recording can lose events, the live probe cannot).
The end-to-end path through LTTng is `report`'s own tests; what is compared
here is the emulator's tree against the pickler's.
"""
import json
import os
import random
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "pickle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

from testlib import tree as pt_tree  # noqa: E402
import peak_rss  # noqa: E402
import treecmp  # noqa: E402

SERTRACE = os.environ.get("SERTRACE_BIN", "")
GRAPHS = int(os.environ.get("INSPECT_GRAPHS", "150"))

pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")


def inspect(*args, data=None, timeout=120):
    return subprocess.run([SERTRACE, "inspect", *args], input=data, capture_output=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The workloads and GRAPHS differential graphs per protocol, dumped by
    sertrace's pickler with the live tree on: (payload file, lengths,
    labels, live dumps)."""
    d = tmp_path_factory.mktemp("corpus")
    pkl, tree = d / "all.pkl", d / "all.tree"
    env = dict(os.environ, DISPATCH_TRACE=str(tree), SERTRACE_EXACT="1")
    env.pop("SERTRACE_GRANULARITY", None)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "record_child.py"), str(pkl),
                           "012345", str(GRAPHS)], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(proc.stdout.splitlines()[-1])
    live = [x for x in pt_tree.parse(tree.read_text(encoding="utf-8", errors="replace"))
            if x["status"] == "ok"]
    return pkl, meta["lengths"], meta["labels"], live


def test_trees_equal_recorded(corpus):
    """Every dump: same node count, same depth and bytes per node (pre-order),
    same root, total == len(payload), the same edge label per node (schema
    v5: positions, dict keys, roles; but for treecmp.label_excuse's two
    named cases, counted and a minority); tags equal but for the documented
    global/reduce ambiguity (counted, and a minority)."""
    pkl, lengths, labels, live = corpus
    assert len(live) == len(lengths) >= 6 * GRAPHS
    proc = inspect("--tree", "--exact", str(pkl), timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    mine = treecmp.parse_inspect(proc.stdout.decode())
    assert len(mine) == len(lengths)
    bad, nodes, tag_only, excused = [], 0, 0, {}
    for i, (label, n) in enumerate(zip(labels, lengths)):
        assert live[i]["total"] == n, label
        assert mine[i]["total"] == n, label
        a = treecmp.flatten_live(live[i])
        b = mine[i]["nodes"]
        diff = treecmp.first_difference(a, b, excused)
        if diff is not None:
            bad.append("%s: node %d: recorded %s, inspect %s" % (label, *diff))
            continue
        nodes += len(a)
        tag_only += sum(1 for x, y in zip(a, b) if not treecmp.exact_tag(x, y))
        # the root and the header/trailer are the whole payload
        assert b[0][0] == 1 and b[0][2] < n
    assert not bad, "%d of %d dumps differ:\n%s" % (len(bad), len(lengths), "\n".join(bad[:20]))
    assert nodes > 10 * len(lengths)
    assert tag_only < nodes // 20, (tag_only, nodes)
    labelled = sum(1 for d in live for n in treecmp.flatten_live(d) if n[3])
    assert labelled > nodes // 2, (labelled, nodes)  # the labels are there to compare
    assert sum(excused.values()) < labelled // 100, (excused, labelled)


def without_root(patterns):
    root = min(patterns, key=len)
    assert all(p.startswith(root) for p in patterns), patterns
    return {"<root>" + p[len(root):]: v for p, v in patterns.items()}


def test_paths_equal_recorded(corpus):
    """`inspect --paths --json`: per dump, the same path patterns with the
    same count, bytes and self bytes as the recorded dump's labels give
    (treecmp.live_patterns, the rule of `report --paths`).  Dumps where
    the recording's labels slip (treecmp.label_excuse) or a buffer is in
    band (a PB the bytes show as bytes) are left out, counted, a minority.
    The root's own name is not compared (a reduce-built root: the
    global/reduce ambiguity of the tree test)."""
    pkl, lengths, labels, live = corpus
    proc = inspect("--paths", "--json", "--top", "100000", str(pkl), timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    dumps = json.loads(proc.stdout)["dumps"]
    assert len(dumps) == len(lengths)
    proc = inspect("--tree", "--exact", str(pkl), timeout=600)
    trees = treecmp.parse_inspect(proc.stdout.decode())
    compared, skipped, bad = 0, 0, []
    for i, label in enumerate(labels):
        a = treecmp.flatten_live(live[i])
        expected = treecmp.live_patterns(live[i])
        if expected is None or any(n[1] == "PB" for n in a):
            skipped += 1
            continue
        mine = {p["pattern"]: (p["count"], p["bytes"], p["self_bytes"]) for p in dumps[i]["paths"]}
        # the root's name: a reduce-built root is named by its callable in
        # inspect (only an import could tell its class): compared without it
        mine, expected = (without_root(x) for x in (mine, expected))
        if mine != expected:
            excused = {}
            treecmp.first_difference(a, trees[i]["nodes"], excused)
            if excused:
                skipped += 1
                continue
            diff = sorted(set(mine.items()) ^ set(expected.items()))[:6]
            bad.append("%s: %s" % (label, diff))
            continue
        assert all(p["exact"] for p in dumps[i]["paths"])
        compared += 1
    assert not bad, "%d dumps differ:\n%s" % (len(bad), "\n".join(bad[:10]))
    assert compared > 10 * skipped and compared >= 6 * GRAPHS, (compared, skipped)


# Streaming (README "Streaming"): the threshold, in nodes held, at which a
# pickle whose root is a list, dict or set is fed batch by batch.
EVERY_NODE = {"SERTRACE_INSPECT_STREAM_NODES": "1"}
NEVER = {"SERTRACE_INSPECT_STREAM_NODES": str(2**32 - 1)}
# from the second node held, below the root only while the top container
# gets another batch next (the default rule, at a low threshold)
MARKED = {"SERTRACE_INSPECT_STREAM_NODES": "2"}


def inspect_env(env, *args, data=None, timeout=600):
    return subprocess.run([SERTRACE, "inspect", *args], input=data, capture_output=True,
                          timeout=timeout, env=dict(os.environ, **env))


def test_streaming_gives_the_same_summaries(corpus):
    """The corpus read with every pickle streamed from its first node (every
    batch read as a chain of open containers, README "Streaming"; a chain
    predicted wrong is read again without streaming), and from its second
    (the default rule), gives
    byte for byte what reading each pickle whole gives: JSON with every
    node's path pattern and the top entries' refs and retained bytes, and
    the text summary."""
    pkl = corpus[0]
    for args in (["--json", "--paths", "--top", "200"], ["--summary", "--exact", "--paths"]):
        a = inspect_env(EVERY_NODE, *args, str(pkl))
        b = inspect_env(NEVER, *args, str(pkl))
        c = inspect_env(MARKED, *args, str(pkl))
        assert a.returncode == b.returncode == c.returncode == 0, (a.stderr, b.stderr, c.stderr)
        assert a.stdout == b.stdout == c.stdout


class Held:
    def __init__(self, v):
        self.v = v


def stream_shapes():
    shared = ["s" * 40, [1, 2]]
    loop = []
    loop.append(loop)
    big = [(i, -i) for i in range(3000)]
    return {
        "list of tuples": big,
        "list sharing an item across batches": [shared] + big + [shared, Held(shared)],
        "dict root": {"k%d" % i: [i, {"x": (i,)}] for i in range(1500)},
        "set root": set(range(2500)) | {(1, 2), frozenset({3})},
        "recursive root": loop,
        "list wrapped after its items": (big,),
        "tuple of containers": (big, {"a": big}),
        "instances": [Held([i]) for i in range(1200)],
    }


@pytest.mark.parametrize("protocol", range(6))
def test_streaming_roots(protocol, tmp_path):
    """Roots that stream (lists, dicts, sets, a list holding itself, items
    referenced from later batches) and roots that stop streaming (a list
    wrapped by a tuple after its last APPENDS: the dump is dropped and the
    pickle read again), back to back in one input: the same JSON (paths,
    refs, retained bytes) streamed, not streamed and by default.  (Protocols
    0 and 1 have no PROTO: they are read whole, the dump's protocol being
    known only at STOP.)"""
    import pickle

    data = b"".join(pickle.dumps(v, protocol) for v in stream_shapes().values())
    f = tmp_path / "shapes.pkl"
    f.write_bytes(data)
    out = [inspect_env(env, "--json", "--paths", "--top", "50", str(f))
           for env in (EVERY_NODE, NEVER, {})]
    assert all(x.returncode == 0 for x in out), [x.stderr for x in out]
    assert out[0].stdout == out[1].stdout == out[2].stdout
    dumps = json.loads(out[0].stdout)["dumps"]
    assert [d["payload_bytes"] for d in dumps] == [
        len(pickle.dumps(v, protocol)) for v in stream_shapes().values()]
    shared = dumps[1]
    assert any(t["refs"] >= 2 and t["retained_bytes"] is not None for t in shared["top"])
    # cut inside the sixth pickle (the list a tuple wraps at its end, streamed
    # by then at protocols 2-5): that dump
    # is dropped, the ones before it printed, exit 4, alike either way
    f.write_bytes(data[:len(data) - len(pickle.dumps(stream_shapes()["instances"], protocol))
                       - len(pickle.dumps(stream_shapes()["tuple of containers"], protocol))
                       - 100])
    cut = [inspect_env(env, "--json", "--paths", str(f)) for env in (EVERY_NODE, NEVER)]
    assert cut[0].returncode == cut[1].returncode == 4
    assert cut[0].stdout == cut[1].stdout and cut[0].stderr == cut[1].stderr
    assert len(json.loads(cut[0].stdout)["dumps"]) == 5


class Slotted:
    __slots__ = ("a", "b", "__dict__")

    def __getstate__(self):  # (dict, slots): a state tuple built after its dicts
        return self.__dict__, {"a": self.a, "b": self.b}


class ListWithState(list):
    pass


def chain_shapes():
    """Roots streamed through their chain of open containers (README
    "Streaming"), and shapes where the chain's prediction is wrong (the
    dump is dropped and read again)."""
    import collections

    big = [(i, -i) for i in range(3000)]
    inst = State()
    inst.items = big
    inst.index = {i: [i, {"x": (i,)}] for i in range(800)}
    inst.tags = set(range(500)) | {(1, 2), frozenset({3})}
    inst.name = "n"
    shared = ["s" * 40, [1, 2]]
    rec = State()
    rec.me = rec
    rec.items = [rec, [(i,) for i in range(2000)], rec]
    slotted = Slotted()
    slotted.a, slotted.b, slotted.c = big, [1], {"d": big[:100]}
    lws = ListWithState((i,) for i in range(1500))
    lws.extra = [(i, i) for i in range(1500)]
    deeper = [(i,) for i in range(1500)]
    for _ in range(70):  # a chain of 71 levels: over STREAM_CHAIN_MAX, not read
        deeper = [deeper]
    return {
        "instance root": inst,
        "instance sharing items": Held({"a": big, "b": [shared] * 3, "c": Held(shared)}),
        "dict root, one key": {"data": big},
        "dict root, keys after big values": {"a": big, "b": {"c": big[:1500],
                                                             "d": [Held(i) for i in range(300)]}},
        "list of dicts of lists": [{"k%d" % j: [(i,) for i in range(400)] for j in range(5)}
                                   for _ in range(4)],
        "instance in a dict in an instance": Held({"x": Held([(i,) for i in range(2000)])}),
        "dict value wrapped after its items": {"data": (big,)},
        "state tuple (slots)": slotted,
        "list subclass with a state": lws,
        "recursive instance": rec,
        "an OrderedDict value": {"o": collections.OrderedDict((i, [i]) for i in range(1000))},
        "a big value read back": {"a": big, "b": big, "c": [big]},
        "hidden keys": {(i, "k"): [(i,)] * 3 for i in range(1000)},
        "deep chain": [[[[{"k": [[(i,) for i in range(300)] for _ in range(5)]}]]]],
        "a chain over 64 levels": deeper,
        # reduce-built objects being filled: their It node a level
        "OrderedDict root": collections.OrderedDict((i, (i, -i)) for i in range(3000)),
        "defaultdict root": collections.defaultdict(list, {i: [i, (i,)] for i in range(2500)}),
        "list subclass root": ListWithState((i,) for i in range(3000)),
        "deque root": collections.deque((i,) for i in range(2500)),
        "OrderedDict of OrderedDicts": collections.OrderedDict(
            a=collections.OrderedDict((i, [i]) for i in range(1500)),
            b=collections.OrderedDict((i, big) for i in range(1200))),
        "instance holding a defaultdict": Held({"d": collections.defaultdict(
            list, {i: [(i,)] for i in range(2000)}), "after": [1]}),
        "OrderedDict wrapped after its items": {"o": (collections.OrderedDict(
            (i, (i,)) for i in range(1500)),)},
    }


# Hand-made pickles (protocol 4 unless said, no frames) whose chain is
# read, then consumed otherwise than predicted.
EMPTY_TUPLES = b")" * 40
HOSTILE_CHAINS = {
    "dict group given by APPENDS": b"\x80\x04}(\x8c\x01k](" + EMPTY_TUPLES + b"ee.",
    "dict value wrapped then SETITEMS": b"\x80\x04}(\x8c\x01k](" + EMPTY_TUPLES + b"e\x85u.",
    "object state popped": (b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81}(\x8c\x01k](" + EMPTY_TUPLES
                            + b"eu0}b."),
    "fed item grown after a POP": (b"\x80\x04](](" + EMPTY_TUPLES + b"e](" + EMPTY_TUPLES
                                   + b"e0()ee."),
    "list appended to itself": b"\x80\x04]2(" + EMPTY_TUPLES + b"ea.",
    "BUILD on a dict's pending key": (b"\x80\x04}(\x8c\x01k](" + EMPTY_TUPLES
                                      + b"eb\x8c\x01vu."),
    "a node as a dict key": b"\x80\x04}(K\x01K\x02\x86](" + EMPTY_TUPLES + b"eu.",
    "no-mark list then a second APPEND": b"\x80\x04]](" + EMPTY_TUPLES + b"e)aa.",
    "tuple of the level's items": b"\x80\x04](\x8c\x01k](" + EMPTY_TUPLES + b"eta.",
    "state dict given APPENDS before BUILD": (b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81}("
                                              b"\x8c\x01k](" + EMPTY_TUPLES + b"eu(Neb."),
    "an object then a dict, both list items": (b"\x80\x04](\x8c\x01m\x8c\x01C\x93)\x81}("
                                               b"K\x01K\x01u](" + EMPTY_TUPLES + b"ee."),
    # an object given items (its It node a level of the chain)
    "object's items, then its state, then items again": (
        b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81(" + EMPTY_TUPLES + b"e}(K\x01](" + EMPTY_TUPLES
        + b"eub(" + EMPTY_TUPLES + b"e."),
    "object's items, its state, items after a feed": (
        b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81(" + EMPTY_TUPLES + b"e}b(" + EMPTY_TUPLES + b"e."),
    "object wrapped after its items": (b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81(" + EMPTY_TUPLES
                                       + b"e\x85."),
    "object's items given to a DUP": (b"\x80\x04\x8c\x01m\x8c\x01C\x93)\x81(" + EMPTY_TUPLES
                                      + b"e2(" + EMPTY_TUPLES + b"e0."),
    "object POPped after its items": (b"\x80\x04](\x8c\x01m\x8c\x01C\x93)R(" + EMPTY_TUPLES
                                      + b"e0]" + b"(" + EMPTY_TUPLES + b"ee."),
    "object in a dict given SETITEMS after APPENDS": (
        b"\x80\x04}(\x8c\x01k\x8c\x01m\x8c\x01C\x93)R(" + EMPTY_TUPLES + b"e(K\x01K\x02uu."),
    # no PROTO: begun as protocol 0, then an opcode of protocol 1 (BININT1)
    "protocol 0 list, then a protocol 1 opcode": b"(l" + b"(ta" * 40 + b"K\x01a.",
    "protocol 0 list": b"(l" + b"(ta" * 40 + b"I1\na.",
    "protocol 0 dict of a list, then EMPTY_LIST": (b"(dS'k'\n(l" + b"(ta" * 40
                                                   + b"s]S'j'\ns."),
}


@pytest.mark.parametrize("protocol", range(6))
def test_streaming_chains(protocol, tmp_path):
    """Instance roots, dict roots with big values, containers in
    containers, and shapes the chain predicts wrong (a value wrapped after
    its items, a state tuple): back to back in one input, the same JSON
    (paths, refs, retained bytes) and text summary streamed from the first
    node, never streamed and by default; cut inside, the same exit 4."""
    import pickle

    values = list(chain_shapes().values())
    data = b"".join(pickle.dumps(v, protocol) for v in values)
    f = tmp_path / "chains.pkl"
    f.write_bytes(data)
    for args in (["--json", "--paths", "--top", "60"], ["--summary", "--exact", "--paths"]):
        out = [inspect_env(env, *args, str(f)) for env in (EVERY_NODE, NEVER, {}, MARKED)]
        assert all(x.returncode == 0 for x in out), [x.stderr for x in out]
        assert out[0].stdout == out[1].stdout == out[2].stdout == out[3].stdout
    dumps = json.loads(inspect_env(EVERY_NODE, "--json", str(f)).stdout)["dumps"]
    assert [d["payload_bytes"] for d in dumps] == [len(pickle.dumps(v, protocol)) for v in values]
    for cut in (len(data) // 3, len(data) // 2, len(data) - 50):
        f.write_bytes(data[:cut])
        c = [inspect_env(env, "--json", "--paths", str(f)) for env in (EVERY_NODE, NEVER)]
        assert c[0].returncode == c[1].returncode == 4
        assert c[0].stdout == c[1].stdout and c[0].stderr == c[1].stderr


@pytest.mark.parametrize("name", sorted(HOSTILE_CHAINS))
def test_streaming_chain_predicted_wrong(name, tmp_path):
    """A chain consumed otherwise than predicted (another opcode, a
    wrapper, a POP, an item fed then grown, a DUP): the streamed dump is
    dropped and the pickle read again, the output byte for byte the
    whole feed's."""
    f = tmp_path / "h.pkl"
    f.write_bytes(HOSTILE_CHAINS[name])
    for args in (["--json", "--paths"], ["--summary", "--exact", "--paths"], ["--tree"]):
        a = inspect_env(EVERY_NODE, *args, str(f))
        b = inspect_env(NEVER, *args, str(f))
        assert a.returncode == b.returncode, (a.stderr, b.stderr)
        assert a.stdout == b.stdout and a.stderr == b.stderr


def test_streaming_mutated_chains_agree():
    """400 seeded mutations (an opcode byte put in, a run of bytes copied,
    bytes cut) of small chain shapes at protocols 2-5: whatever they are
    (valid, mispredicted, malformed), streamed at every batch, by the
    default rule and never streamed give the same exit status, JSON and
    stderr."""
    import collections
    import pickle

    rng = random.Random(14)
    seeds = [pickle.dumps(v, p) for p in (2, 3, 4, 5) for v in (
        {"a": [(i,) for i in range(30)], "b": {"c": [[i] for i in range(20)]}},
        Held({"x": [(i, i) for i in range(25)], "y": Held([1, [2], {3: (4,)}])}),
        [{"k": [(i,) for i in range(10)]} for _ in range(4)],
        {"o": collections.OrderedDict((i, [i]) for i in range(10)), "s": {1, (2,)}},
        ({"t": [1, [2]]}, [3, {4: [5]}]),
        collections.OrderedDict((i, [i]) for i in range(12)),
        {"l": ListWithState((i,) for i in range(15)), "d": collections.defaultdict(list, a=[1])})]
    for _ in range(400):
        d = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            i, k = rng.randrange(len(d)), rng.random()
            if k < 0.4:
                d[i] = rng.choice(b"(.)]}eustab\x85\x86\x870h2\x94\x81\x93KN")
            elif k < 0.7:
                j = rng.randrange(len(d))
                d[i:i] = d[j:j + rng.randint(1, 6)]
            else:
                del d[i:i + rng.randint(1, 3)]
        out = [inspect_env(env, "--json", "--paths", "--top", "30", "-", data=bytes(d))
               for env in (EVERY_NODE, NEVER, MARKED)]
        ref = (out[1].returncode, out[1].stdout, out[1].stderr)
        assert all((x.returncode, x.stdout, x.stderr) == ref for x in out), bytes(d)


def test_streaming_memory_of_instance_and_dict_roots(tmp_path):
    """Peak RSS of `inspect --summary` on an instance root (its state dict
    holding a list of n tuples and a dict of n/10 lists) and on
    {'data': list of n tuples}, no memo (a fast-mode Pickler): from 10^5 to
    10^6 tuples, streamed, it grows by about the input (mapped), far less
    than not streamed (~60 B more per node); so do an OrderedDict root and
    {'data': a list subclass} (reduce-built objects being filled), and
    protocols 0 ({'data': list}) and 1 (a list root)."""
    import collections
    import io
    import pickle
    import shutil

    if not shutil.which("time", path="/usr/bin"):
        pytest.skip("no /usr/bin/time")

    def fast(obj, protocol=4):
        buf = io.BytesIO()
        p = pickle.Pickler(buf, protocol)
        p.fast = True
        p.dump(obj)
        return buf.getvalue()

    def rss(env, path):
        return peak_rss.summary_rss(SERTRACE, env, path)

    def instance(n):
        s = State()
        s.name, s.count = "s", n
        s.items = [(i, i) for i in range(n)]
        s.index = {i: [i, i] for i in range(n // 10)}
        return s

    for make, protocol in ((instance, 4), (lambda n: {"data": [(i, i) for i in range(n)]}, 4),
                           (lambda n: collections.OrderedDict((i, (i, i)) for i in range(n)), 4),
                           (lambda n: {"data": ListWithState((i, i) for i in range(n))}, 4),
                           (lambda n: {"data": [(i, i) for i in range(n)]}, 0),
                           (lambda n: [(i, i) for i in range(n)], 1)):
        sizes, streamed, whole = [], [], []
        for n in (10 ** 5, 10 ** 6):
            path = tmp_path / ("p%d.pkl" % n)
            data = fast(make(n), protocol)
            path.write_bytes(data)
            sizes.append(len(data))
            streamed.append(rss({}, path))
            whole.append(rss(NEVER, path))
        grow_s, grow_w = streamed[1] - streamed[0], whole[1] - whole[0]
        assert grow_s < (sizes[1] - sizes[0]) + (6 << 20), (streamed, whole, sizes)
        assert grow_s * 4 < grow_w, (streamed, whole)


def test_stdin_and_file_agree(corpus):
    pkl = corpus[0]
    a = inspect("--summary", "--exact", str(pkl))
    b = inspect("--summary", "--exact", "-", data=pkl.read_bytes())
    assert a.returncode == b.returncode == 0
    # the same but for the input's name in each dump's header
    assert str(pkl).encode() in a.stdout and b"standard input" in b.stdout
    assert a.stdout.replace(str(pkl).encode(), b"standard input") == b.stdout


def test_json_totals(corpus):
    pkl, lengths, labels, live = corpus
    proc = inspect("--json", "--top", "3", str(pkl))
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert doc["format"] == "sertrace-summary"
    assert len(doc["dumps"]) == len(lengths)
    assert [x["payload_bytes"] for x in doc["dumps"]] == lengths
    assert doc["totals"]["payload_bytes"] == sum(lengths)
    assert all(x["complete"] and x["status"] == "ok" for x in doc["dumps"])
    assert doc["totals"]["nodes"] == sum(x["nodes"] for x in doc["dumps"])
    assert all(len(x["top"]) <= 3 for x in doc["dumps"])


class State:
    """tests/e2e/shared_prog.py's shape, pickled here by CPython (never
    loaded: inspect imports nothing)."""


def shared_state(x="x", z="z", y_type=dict):
    y = y_type(shared="y" * 300)
    s = State()
    s.x = y if x == "y" else [y, "x" * 1000]
    s.z = None if z is None else ["z" * 200, 7, 8]
    s.y = y
    return s


# Not protocol 0: its memo keys are decimal text (p10, g8), so renumbering
# the memo changes sizes by a byte or so and the payload identity is off.
@pytest.mark.parametrize("protocol", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("y_type", ["dict", "OrderedDict"])
def test_retained_bytes_are_what_the_payload_loses(protocol, y_type):
    """Shared objects without a trace (issue 13 item 5 through inspect):
    every node the memo can hold has an identity, so a memo reference finds
    its target and the top entries get refs and exact retained bytes.
    State.x = [y, big str] with State.y = y after it: x retains what the
    payload loses when x is replaced by y itself (y then is written in x's
    place, s.y stays a memo reference), i.e. x less y; State.z, shared with
    nothing, retains its bytes less the 1-byte NONE written instead
    (tests/e2e/shared_prog.py explains both identities).  y an OrderedDict:
    a reduce-built object whose items sit in an It node with its address
    (as a recording gives it): x still loses all of y, not only its items."""
    import collections
    import pickle

    yt = dict if y_type == "dict" else collections.OrderedDict
    payload = pickle.dumps(shared_state(y_type=yt), protocol)
    swapped = pickle.dumps(shared_state(x="y", y_type=yt), protocol)
    no_z = pickle.dumps(shared_state(z=None, y_type=yt), protocol)
    proc = inspect("--json", "--top", "20", "-", data=payload)
    assert proc.returncode == 0, proc.stderr.decode()
    (dump,) = json.loads(proc.stdout)["dumps"]
    assert dump["complete"] and dump["payload_bytes"] == len(payload)
    by_path = {}
    for t in dump["top"]:
        by_path.setdefault(t["path"], t)
    x, y, z = by_path["State.x"], by_path["State.x[0]"], by_path["State.z"]
    assert (x["tag"], y["tag"], z["tag"]) == ("L", "D2" if yt is dict else "R", "L")
    assert (x["refs"], y["refs"], z["refs"]) == (0, 1, 0)
    assert x["retained_bytes"] == x["bytes"] - y["bytes"] == len(payload) - len(swapped)
    assert z["retained_bytes"] == z["bytes"] == len(payload) - len(no_z) + 1
    assert y["retained_bytes"] == y["bytes"]
    assert dump["top"][0]["retained_bytes"] == dump["top"][0]["bytes"]
    assert all(t["retained_bytes"] is None for t in dump["top"] if t["tag"] == "Mo")
    # the text says it too
    text = inspect("--summary", "--exact", "-", data=payload).stdout.decode()
    assert "%d B (self %d B, retains %d B)  State.x  (" % (
        x["bytes"], x["self"], x["retained_bytes"]) in text, text
    assert "%d B (self %d B, 1 ref)  State.x[0]  (" % (y["bytes"], y["self"]) in text, text


def small(obj, protocol=4):
    import pickle

    return pickle.dumps(obj, protocol)


def test_tree_of_a_small_list():
    import pickle

    data = pickle.dumps([[1, 2], (3, 4), {"a": 1}], 4)
    proc = inspect("--tree", "--exact", "-", data=data)
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "payload %d B" % len(data) in out
    tree = treecmp.parse_inspect(out)[0]["nodes"]
    # PROTO (2) + FRAME (9) + STOP (1) are outside the root
    assert tree == [(1, "L", len(data) - 12, None), (2, "L", 8, "[0]"), (2, "Tu", 6, "[1]"),
                    (2, "D2", 9, "[2]")]


def test_keys_privacy_rule_and_keys_all():
    """Dict keys in labels: identifiers and ints shown, other keys hidden
    and numbered in write order ([…] in the tree); --keys all shows every
    str key, never a non-str one; --paths alone is the summary with paths."""
    import pickle

    obj = {"name": [1], "e mail@x": [2], 7: [3], -3: [4], 2 ** 70: [5], b"k": [6],
           "b": {"c d": [7]}, "x" * 65: [8]}
    for p in range(6):
        data = pickle.dumps(obj, p)
        tree = treecmp.parse_inspect(inspect("--tree", "--exact", "-", data=data).stdout.decode())
        labels = [n[3] for n in tree[0]["nodes"]]
        assert labels == [None, "['name']", "[…]", "[7]", "[-3]", "[…]", "[…]", "['b']",
                          "[…]", "[…]"], (p, labels)
        out = inspect("--tree", "--keys", "all", "-", data=data).stdout.decode()
        labels = [n[3] for n in treecmp.parse_inspect(out)[0]["nodes"]]
        assert labels == [None, "['name']", "['e mail@x']", "[7]", "[-3]", "[…]", "[…]",
                          "['b']", "['c d']", "['%s']" % ("x" * 65)], (p, labels)
        assert "e mail" not in inspect("--paths", "--json", "-", data=data).stdout.decode()
    out = inspect("--paths", "-", data=pickle.dumps(obj, 4)).stdout.decode()
    assert "dict[*][*]" in out and "pattern" in out


def test_several_pickles_back_to_back():
    import pickle

    parts = [pickle.dumps(x, p) for p, x in enumerate([[1], {"a": (1,)}, None, "s", [b"x"], {1}])]
    proc = inspect("--json", "-", data=b"".join(parts))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["payload_bytes"] for d in doc["dumps"]] == [len(p) for p in parts]
    assert [d["protocol"] for d in doc["dumps"]] == [0, 1, 2, 3, 4, 5]


def test_tree_header_names_the_input_and_each_pickles_offset(tmp_path):
    """No process made these bytes: each tree's header says where the
    pickle lies (the input, its first byte), not pid -1 / tid -1 / t=0."""
    import pickle
    import re

    parts = [pickle.dumps(x, p) for p, x in enumerate([[1], {"a": (1,)}, None, "s" * 300,
                                                         [b"x"], {1}])]
    path = tmp_path / "six.pkl"
    path.write_bytes(b"".join(parts))
    offsets = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    for arg, name, data in ((str(path), str(path), None), ("-", "standard input", path.read_bytes())):
        proc = inspect("--tree", arg, data=data)
        assert proc.returncode == 0, proc.stderr
        heads = [l for l in proc.stdout.decode().splitlines() if l.startswith("── dump ")]
        assert len(heads) == len(parts)
        for i, h in enumerate(heads):
            m = re.match(r"── dump (\d+) · (.*) · byte (\d+) · pickle protocol (\d) · payload ", h)
            assert m, h
            assert (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))) == \
                (i + 1, name, offsets[i], i)
            assert "pid" not in h and "tid" not in h


def test_summary_header_names_the_input_and_each_pickles_offset(tmp_path):
    """The summary (text and JSON) says where each pickle lies, as the tree
    does: the input and the pickle's first byte, not pid -1 / t=0.  JSON
    keeps report's fields (pid and tid -1: unknown) and adds "input" and
    "input_offset"."""
    import pickle
    import re

    parts = [pickle.dumps(x, p) for p, x in enumerate([[1], {"a": (1,)}, None, "s" * 300,
                                                         [b"x"], {1}])]
    path = tmp_path / "six.pkl"
    path.write_bytes(b"".join(parts))
    offsets = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    for arg, name, data in ((str(path), str(path), None), ("-", "standard input", path.read_bytes())):
        for extra in ([], ["--no-per-dump"]):
            proc = inspect("--summary", *extra, arg, data=data)
            assert proc.returncode == 0, proc.stderr
            heads = [l for l in proc.stdout.decode().splitlines() if l.startswith("dump ")]
            assert len(heads) == len(parts), proc.stdout.decode()
            for i, h in enumerate(heads):
                m = re.match(r"dump (\d+) · (.*) · byte (\d+) · pickle protocol (\d)$", h)
                assert m, h
                assert (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))) == \
                    (i + 1, name, offsets[i], i)
        proc = inspect("--json", arg, data=data)
        assert proc.returncode == 0, proc.stderr
        dumps = json.loads(proc.stdout)["dumps"]
        assert [(d["input"], d["input_offset"], d["payload_bytes"]) for d in dumps] == \
            [(name, offsets[i], len(p)) for i, p in enumerate(parts)]
        assert all(d["pid"] == -1 and d["tid"] == -1 for d in dumps)


def test_display_options():
    import pickle

    data = pickle.dumps([list(range(50)) for _ in range(20)], 4)
    folded = inspect("--tree", "--max-depth", "1", "-", data=data).stdout.decode()
    assert "nodes below max-depth" in folded
    small_ = inspect("--tree", "--min-size", "1K", "-", data=data).stdout.decode()
    assert "more" in small_
    over = inspect("--tree", "--oversize", "50%", "-", data=data).stdout.decode()
    assert "OVERSIZED" in over


def test_usage_errors():
    assert inspect("--help").returncode == 0
    assert b"--paths" in inspect("--help").stdout
    p = inspect("--paths", "--tree", "x")
    assert p.returncode == 2 and b"--paths applies to --summary and --json" in p.stderr
    assert inspect("--paths", "--folded", "-", "x").returncode == 2
    p = inspect("--keys", "some", "x")
    assert p.returncode == 2 and b"safe or all" in p.stderr
    assert inspect("--audit", "--paths", "x").returncode == 2
    assert inspect("--bogus", "x").returncode == 2
    assert inspect().returncode == 2
    assert inspect("--tree", "--json", "x").returncode == 2
    assert inspect("--top", "3", "x").returncode == 2
    assert inspect("/nonexistent/file").returncode == 1


# ------------------------------------------------------------- hostile ----

def inconclusive(data, *args):
    proc = inspect("--summary", *args, "-", data=data)
    assert proc.returncode == 4, (proc.returncode, proc.stderr)
    return proc.stderr.decode()


def test_empty_and_truncated():
    assert "empty" in inconclusive(b"")
    data = small({"k": [1, 2, 3], "s": "x" * 300})
    for cut in range(1, len(data)):
        msg = inconclusive(data[:cut])
        assert "inconclusive at byte" in msg


def test_huge_declared_lengths():
    for op in (b"X", b"B", b"T"):
        assert "declared length" in inconclusive(b"\x80\x04" + op + b"\xff\xff\xff\x7f" + b"ab.")
    for op in (b"\x8d", b"\x8e", b"\x96"):
        assert "declared length" in inconclusive(b"\x80\x05" + op + b"\xff" * 8 + b"ab.")
    assert "FRAME" in inconclusive(b"\x80\x04\x95" + b"\xff" * 8 + b"N.")


def test_unknown_opcode_and_bad_stack():
    assert "unknown opcode 0xff" in inconclusive(b"\x80\x04\xff.")
    assert "underflow" in inconclusive(b"\x80\x04a.")
    assert "memo key 7" in inconclusive(b"\x80\x04h\x07.")
    assert "STOP" in inconclusive(b"\x80\x04NN.")
    assert "protocol" in inconclusive(b"\x80\x09N.")


def test_bit_flips_never_crash():
    rnd = random.Random(1414)
    base = small({"a": [1, 2.5, "x", b"y", (None, True)], "b": {frozenset({1}), 3}}, 4)
    blobs = []
    for _ in range(400):
        b = bytearray(base)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        blobs.append(bytes(b))
    for b in blobs:
        proc = inspect("--summary", "-", data=b)
        assert proc.returncode in (0, 4), (b, proc.returncode, proc.stderr)


def test_deep_nesting():
    # 10^6 nested lists: EMPTY_LIST ... then 10^6 APPENDs
    n = 10 ** 6
    data = b"\x80\x04" + b"]" * (n + 1) + b"a" * n + b"."
    proc = inspect("--summary", "-", data=data, timeout=300)
    assert proc.returncode == 4
    assert b"nested deeper than 1000000" in proc.stderr
    # within the limit it works, and the summary is printed
    m = 200000
    data = b"\x80\x04" + b"]" * m + b"a" * (m - 1) + b"."
    proc = inspect("--json", "-", data=data, timeout=300)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)["dumps"][0]
    assert d["nodes"] == m and d["max_depth"] == m and d["payload_bytes"] == len(data)


def test_deep_nesting_keeps_labels():
    # Labels at any depth (no cut-off): the summary renders a kept node's
    # path from the open chain's text, so the run stays linear in the
    # depth (10^6 levels finish well within meson's timeout; 10^12 steps
    # would not).  10^5 levels with every node kept: the deepest node's
    # path is there, its root and its innermost end.
    m = 10 ** 5
    data = b"\x80\x04" + b"]" * m + b"a" * (m - 1) + b"."
    proc = inspect("--json", "--top", str(m), "-", data=data, timeout=600)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)["dumps"][0]
    assert d["nodes"] == m and len(d["top"]) == m
    by_depth = {t["depth"]: t for t in d["top"]}
    assert by_depth[1]["path"] == "list" and by_depth[3]["path"] == "list[0][0]"
    deepest = by_depth[m]["path"]
    assert deepest.startswith("list\u2026") and deepest.endswith("[0][0][0][0]"), deepest
    assert by_depth[m]["bytes"] == 1 and by_depth[m]["retained_bytes"] == 1
    # 10^6 levels (the core's limit): the same node count as levels, and
    # every kept node has its path ("list[0][0]..." one "[0]" per level)
    n = 10 ** 6
    data = b"\x80\x04" + b"]" * n + b"a" * (n - 1) + b"."
    proc = inspect("--json", "-", data=data, timeout=600)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)["dumps"][0]
    assert d["nodes"] == n == 10 * m and d["max_depth"] == n
    assert len(d["top"]) == 10
    for t in d["top"]:
        assert t["path"] == "list" + "[0]" * (t["depth"] - 1), t
    # path patterns too: one per level, each interned as (parent, segment)
    # (whole texts would be 10^12 bytes); the largest are the outermost
    proc = inspect("--paths", "--json", "--top", "3", "-", data=data, timeout=600)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)["dumps"][0]
    assert [p["pattern"] for p in d["paths"]] == ["list", "list[*]", "list[*][*]"]
    assert [p["count"] for p in d["paths"]] == [1, 1, 1]
    assert d["paths"][0]["bytes"] == d["payload_bytes"] - 3  # PROTO 4 and STOP


def test_memo_bomb_and_memory_limit():
    # one list referenced 10^6 times: 10^6 memo nodes, linear, fine
    n = 10 ** 6
    data = b"\x80\x04]\x94(" + b"h\x00" * n + b"e."
    proc = inspect("--json", "-", data=data, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dumps"][0]["nodes"] == n + 1
    # the same under a small memory limit: exit 4 with the reason
    proc = inspect("--summary", "--max-memory", "1M", "-", data=data)
    assert proc.returncode == 4
    assert b"memory limit" in proc.stderr and b"--max-memory" in proc.stderr
    # 10^6 distinct, sparse memo keys (LONG_BINPUT up to 2^32): a hash, not an array
    keys = b"".join(b"r" + (i * 4099).to_bytes(4, "little") for i in range(10 ** 6))
    proc = inspect("--json", "-", data=b"\x80\x04N" + keys + b".", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dumps"][0]["nodes"] == 1
