"""Differential tests: sertrace must write the very bytes C pickle writes.

For each protocol 0..5, GRAPHS_PER_PROTOCOL random object graphs
(graphgen.build(seed, protocol), seeds protocol*SEED_STRIDE + i) plus the
dispatch-like workload graphs (workloads/dispatch_like_state.py) are dumped
by `pickle` and by the implementation under test (pt_impl.impl, sertrace)
through every entry point -- dumps(), dump(), Pickler(file).dump() with
fix_imports True/False, fast mode, buffer_callback at protocol 5 -- and the
outcomes must be equal: the same bytes, or the same exception class and
message.  copyreg extension codes for pt_types are installed for the whole
module, so protocol >= 2 also writes EXT1/EXT2/EXT4.

A failure prints the seed, the variant, where the bytes part, the smallest
sub-object of the graph that still differs, and a one-line reproducer.

Counts: GRAPHS_PER_PROTOCOL graphs (1,000 by default; 10,000 in the soak,
PT_SOAK=1, which CI runs as its own step) + 7 workload graphs per protocol
through dumps(), Pickler(BytesIO).dump() and, at protocol 5,
dumps(buffer_callback=...); SLICE (a fifth of them, at least 200, at most 2,000)
through the variants that share their code path (dump(), fix_imports=False
twins at protocol >= 3) and fast mode (cyclic graphs recurse to the limit
there, which is slow); 100 per protocol (600 in the soak) again in a child
with the live text tree on (test_corpus_traced).  The default corpus has
every kind of case the generator makes (tests/README.md: every line of
graphgen.py the 10,000-graph corpus runs, the first 1,000 seeds run too).

Self-check: PT_IMPL=pickle must pass everything; PT_IMPL=pypickle (the
pure-Python pickler) fails hundreds of graphs per protocol, which shows the
comparison has teeth.
"""

import concurrent.futures
import functools
import io
import os
import pickle
import sys

import pytest

import graphgen
import pt_impl
import pt_types as T
from pt_impl import impl, ref
from testlib import child, knobs

# 10,000 graphs per protocol in the soak (PT_SOAK=1), 1,000 by default.
# Longer soaks: PT_GRAPHS=100000 PT_SEED_OFFSET=500000 (other seeds).
GRAPHS_PER_PROTOCOL = knobs.size("PT_GRAPHS", 1000, 10000)
SEED_OFFSET = int(os.environ.get("PT_SEED_OFFSET", "0"))
SEED_STRIDE = 1_000_000
MAX_REPORTED = 12  # failures described in detail per test (all are counted)
MAX_SHRUNK = 3  # failures shrunk to a minimal sub-object per test

WORKLOADS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "workloads")


@pytest.fixture(scope="module", autouse=True)
def extension_codes():
    T.add_extensions()
    yield
    T.remove_extensions()


def _traced_child(granularity):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(DISPATCH_TRACE="/dev/null", SERTRACE_GRANULARITY=granularity, SERTRACE_EXACT="1")
    return child.run(["-c", TRACED_CHILD % {"here": here, "count": TRACED_GRAPHS_PER_PROTOCOL}],
                     paths=[here], env=env, timeout=600, cwd=here)


@pytest.fixture(scope="module", autouse=True)
def traced_children():
    """test_corpus_traced's two children, started with the module's first
    test: they replay the corpus traced on the other CPUs while this process
    compares the untraced picklers."""
    if pt_impl.IMPL_NAME != "sertrace":
        yield {}
        return
    workers = max(1, len(os.sched_getaffinity(0)) - 1)
    pool = concurrent.futures.ThreadPoolExecutor(workers)
    futures = {g: pool.submit(_traced_child, g) for g in ("containers", "all")}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def workload_graphs():
    if WORKLOADS not in sys.path:
        sys.path.insert(0, WORKLOADS)
    import dispatch_like_state as W

    out = []
    for n in (1, 2, 3, 8, 16, 40):
        out.append(("workload build_state(%d)" % n, W.build_state(n)))
    out.append(("workload build_state_with_closures(4)", W.build_state_with_closures(4)))
    return out


@functools.lru_cache(maxsize=1)
def corpus(protocol):
    """[(label, seed or None, graph)] for one protocol (kept for one protocol
    at a time: the tests are ordered protocol-major)."""
    items = [(label, None, g) for label, g in workload_graphs()]
    base = protocol * SEED_STRIDE + SEED_OFFSET
    for i in range(GRAPHS_PER_PROTOCOL):
        seed = base + i
        items.append(("seed %d" % seed, seed, graphgen.build(seed, protocol)))
    return items


# ------------------------------------------------------------- variants ----


def v_dumps(m, obj, p):
    return pt_impl.outcome(lambda: m.dumps(obj, p), m)


def v_dumps_nofix(m, obj, p):
    return pt_impl.outcome(lambda: m.dumps(obj, protocol=p, fix_imports=False), m)


def v_dump(m, obj, p):
    def run():
        f = io.BytesIO()
        m.dump(obj, f, p)
        return f.getvalue()

    return pt_impl.outcome(run, m)


def v_pickler(m, obj, p):
    return pt_impl.pickler_outcome(m, obj, p)


def v_pickler_nofix(m, obj, p):
    return pt_impl.pickler_outcome(m, obj, p, fix_imports=False)


def v_fast(m, obj, p):
    return pt_impl.pickler_outcome(m, obj, p, fast=True)


def v_oob(m, obj, p):
    return pt_impl.oob_outcome(m, obj, p)


VARIANTS = {
    "dumps": v_dumps,
    "dumps_nofix": v_dumps_nofix,
    "dump": v_dump,
    "pickler": v_pickler,
    "pickler_nofix": v_pickler_nofix,
    "fast": v_fast,
    "oob": v_oob,
}
# Graphs per (protocol, variant).  dumps, Pickler.dump and the out-of-band
# run see the whole corpus; the entry points that share their
# code (dump(), the fix_imports=False twins) a slice of it, and fix_imports
# only matters below protocol 3.
SLICE = min(2_000, max(GRAPHS_PER_PROTOCOL // 5, 200))


def variant_count(protocol, variant):
    if GRAPHS_PER_PROTOCOL <= SLICE:
        return GRAPHS_PER_PROTOCOL
    if variant in ("dump", "pickler_nofix", "fast"):
        return SLICE  # fast mode: cyclic graphs recurse to the limit, slow
    if variant == "dumps_nofix" and protocol >= 3:
        return SLICE
    return GRAPHS_PER_PROTOCOL


CASES = [(p, v) for p in range(6) for v in VARIANTS if v != "oob" or p == 5]


def shrink(variant, obj, p):
    """Smallest reachable sub-object (by reference payload length) that
    still gives different outcomes, or None."""
    fn = VARIANTS[variant]
    cands = []
    for o in graphgen.subobjects(obj):
        try:
            n = len(ref.dumps(o, p))
        except Exception:  # noqa: BLE001
            n = 1 << 40
        cands.append((n, o))
    cands.sort(key=lambda c: c[0])
    for n, o in cands[:400]:
        # twice: a difference that depends on the stack depth (where the
        # recursion limit hits) may not reproduce with a smaller object
        if fn(ref, o, p) != fn(impl, o, p) and fn(ref, o, p) != fn(impl, o, p):
            return o
    return None


def reproducer(seed, p, variant):
    return ("cd tests/pickle && PYTHONPATH=../../build/python:.:../lib /usr/bin/python3 -c "
            "\"import graphgen, test_differential as t, pt_types as T; T.add_extensions(); "
            "o = graphgen.build(%d, %d); from pt_impl import impl, ref; "
            "print(t.VARIANTS[%r](ref, o, %d)); print(t.VARIANTS[%r](impl, o, %d))\""
            % (seed, p, variant, p, variant, p))


def _at_depth(d, fn):
    """fn() called d Python frames deeper."""
    return _at_depth(d - 1, fn) if d else fn()


def depth_sensitive_match(fn, obj, protocol, expected, got):
    """True when a difference involving RecursionError is only where the
    recursion limit hit: at some nearby stack depth pickle gives what
    sertrace gave (or the other way round).  Near the limit C pickle itself
    raises different things at different depths (RecursionError, or a
    PicklingError whose message could not be built)."""
    if not any(o[0] == "raise" and o[1] == "builtins.RecursionError" for o in (expected, got)):
        return False
    for d in range(1, 80):
        if _at_depth(d, lambda: fn(ref, obj, protocol)) == got:
            return True
        if _at_depth(d, lambda: fn(impl, obj, protocol)) == expected:
            return True
    return False


def check_corpus(protocol, variant):
    fn = VARIANTS[variant]
    failures = []
    count = 0
    items = corpus(protocol)
    for label, seed, obj in items[:len(items) - GRAPHS_PER_PROTOCOL + variant_count(protocol, variant)]:
        expected = fn(ref, obj, protocol)
        got = fn(impl, obj, protocol)
        count += 1
        if expected != got and not depth_sensitive_match(fn, obj, protocol, expected, got):
            failures.append((label, seed, obj, expected, got))
    if not failures:
        return count
    lines = ["%d of %d graphs differ (protocol %d, variant %s, impl %s)"
             % (len(failures), count, protocol, variant, pt_impl.IMPL_NAME)]
    for k, (label, seed, obj, expected, got) in enumerate(failures[:MAX_REPORTED]):
        lines.append("--- %s" % label)
        lines.append(pt_impl.describe(expected, got))
        if k < MAX_SHRUNK:
            small = shrink(variant, obj, protocol)
            if small is not None:
                lines.append("minimal sub-object: %s" % pt_impl._short(small, 300))
                lines.append(pt_impl.describe(VARIANTS[variant](ref, small, protocol),
                                              VARIANTS[variant](impl, small, protocol)))
        if seed is not None:
            lines.append("reproduce: " + reproducer(seed, protocol, variant))
    pytest.fail("\n".join(lines), pytrace=False)


@pytest.mark.parametrize("protocol,variant", CASES, ids=["p%d-%s" % c for c in CASES])
def test_corpus(protocol, variant):
    n = check_corpus(protocol, variant)
    assert n >= variant_count(protocol, variant)


# ---------------------------------------------------------- module API ----


def test_module_constants():
    assert impl.HIGHEST_PROTOCOL == pickle.HIGHEST_PROTOCOL == 5
    assert impl.DEFAULT_PROTOCOL == pickle.DEFAULT_PROTOCOL
    # A drop-in must be caught by `except pickle.PicklingError`.
    assert issubclass(impl.PicklingError, pickle.PicklingError)
    assert issubclass(impl.PickleError, pickle.PickleError)
    assert issubclass(impl.PicklingError, impl.PickleError)


ARGUMENT_CASES = [
    ("protocol -1", lambda m: m.dumps([1, (2,)], -1)),
    ("protocol None", lambda m: m.dumps([1, (2,)], None)),
    ("protocol 6", lambda m: m.dumps(1, 6)),
    ("protocol 1000", lambda m: m.dumps(1, 1000)),
    ("protocol -1000", lambda m: m.dumps(1, -1000)),
    ("protocol 2**70", lambda m: m.dumps(1, 2 ** 70)),
    ("protocol str", lambda m: m.dumps(1, "2")),
    ("protocol float", lambda m: m.dumps(1, 2.0)),
    ("protocol True", lambda m: m.dumps(1, True)),
    ("protocol kw", lambda m: m.dumps(1, protocol=3)),
    ("fix_imports positional", lambda m: m.dumps(range, 2, False)),
    ("fix_imports 0", lambda m: m.dumps(range, 2, fix_imports=0)),
    ("fix_imports []", lambda m: m.dumps(range, 1, fix_imports=[])),
    ("fix_imports obj", lambda m: m.dumps(range, 1, fix_imports=object())),
    ("unknown kw", lambda m: m.dumps(1, 2, nope=1)),
    ("no args", lambda m: m.dumps()),
    ("buffer_callback proto 4", lambda m: m.dumps(1, 4, buffer_callback=list().append)),
    ("buffer_callback None", lambda m: m.dumps(1, 5, buffer_callback=None)),
    ("buffer_callback noncallable", lambda m: m.dumps(pickle.PickleBuffer(b"ab"), 5, buffer_callback=3)),
    ("dump no file", lambda m: m.dump(1)),
    ("dump file None", lambda m: m.dump(1, None)),
    ("dump file no write", lambda m: m.dump(1, object())),
    ("dump write not callable", lambda m: m.dump(1, type("F", (), {"write": 3})())),
    ("Pickler no args", lambda m: m.Pickler()),
    ("Pickler protocol 9", lambda m: m.Pickler(io.BytesIO(), 9)),
    ("Pickler protocol kw", lambda m: _pickle_via(m, dict(protocol=2))),
    ("Pickler all kw", lambda m: _pickle_via(m, dict(protocol=5, fix_imports=False, buffer_callback=None))),
    ("Pickler buffer_callback proto 3", lambda m: m.Pickler(io.BytesIO(), 3, buffer_callback=print)),
    ("Pickler.dump no arg", lambda m: m.Pickler(io.BytesIO()).dump()),
    ("Pickler.dump two args", lambda m: m.Pickler(io.BytesIO()).dump(1, 2)),
    ("Pickler.dump kw", lambda m: m.Pickler(io.BytesIO()).dump(obj=1)),
    ("fast setter", lambda m: _fast_values(m)),
    ("write rebound after init", lambda m: _write_rebound(m)),
    ("bin attribute", lambda m: getattr(m.Pickler(io.BytesIO(), 0), "bin", "absent")),
]


def _pickle_via(m, kw):
    f = io.BytesIO()
    m.Pickler(f, **kw).dump([1, b"x", range])
    return f.getvalue()


def _write_rebound(m):
    class F:
        def __init__(self):
            self.a, self.b = [], []
            self.write = self.a.append

    f = F()
    pk = m.Pickler(f, 2)
    f.write = f.b.append  # C pickle looked up write once, in __init__
    pk.dump([1, 2])
    return (b"".join(f.a), b"".join(f.b))


def _fast_values(m):
    p = m.Pickler(io.BytesIO())
    out = [p.fast]
    p.fast = 7
    out.append(p.fast)
    p.fast = 0
    out.append(p.fast)
    return out


@pytest.mark.parametrize("name,fn", ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_arguments(name, fn):
    expected = pt_impl.outcome(lambda: fn(ref), ref)
    got = pt_impl.outcome(lambda: fn(impl), impl)
    assert expected == got, pt_impl.describe(expected, got)


# ------------------------------------------------------ special cases ----


def test_pickler_reuse_keeps_memo():
    """A Pickler reused for several dumps keeps its memo (later dumps write
    GETs for objects of earlier ones) until clear_memo()."""
    shared = [1, "shared", (2, 3)]

    def run(m):
        out = []
        for p in range(6):
            f = io.BytesIO()
            pk = m.Pickler(f, p)
            pk.dump(shared)
            pk.dump([shared, shared])
            pk.clear_memo()
            pk.dump([shared])
            out.append(f.getvalue())
        return out

    expected = pt_impl.outcome(lambda: run(ref), ref)
    got = pt_impl.outcome(lambda: run(impl), impl)
    assert expected == got, pt_impl.describe(expected, got)


EXT_CODES = [1, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF]


@pytest.mark.parametrize("code", EXT_CODES)
def test_extension_code_boundaries(code):
    import copyreg

    T.remove_extensions()  # the module fixture installed them; use our own codes
    try:
        copyreg.add_extension("pt_types", "function", code)
        try:
            for p in range(6):
                for obj in (T.function, [T.function, T.function], (T.function, T.Plain)):
                    expected = pt_impl.outcome(lambda: ref.dumps(obj, p), ref)
                    got = pt_impl.outcome(lambda: impl.dumps(obj, p), impl)
                    assert expected == got, "code %#x protocol %d: %s" % (code, p, pt_impl.describe(expected, got))
        finally:
            copyreg.remove_extension("pt_types", "function", code)
    finally:
        T.add_extensions()


def test_extension_code_invalid_in_registry():
    """A corrupted copyreg._extension_registry entry (code out of range or
    not an int): pickle's error, not a crash."""
    import copyreg

    key = ("pt_types", "function")
    for bad in (0, -1, 0x80000000, "7", None):
        copyreg._extension_registry[key] = bad
        try:
            for p in (2, 4):
                expected = pt_impl.outcome(lambda: ref.dumps(T.function, p), ref)
                got = pt_impl.outcome(lambda: impl.dumps(T.function, p), impl)
                assert expected == got, "code %r protocol %d: %s" % (bad, p, pt_impl.describe(expected, got))
        finally:
            del copyreg._extension_registry[key]


# Past the recursion limit: CPython 3.13 pickles about 10,000 levels where
# 3.11 and 3.12 stop before 5,000.
TOO_DEEP = 5000 if sys.version_info < (3, 13) else 20000


@pytest.mark.parametrize("kind", ["list", "tuple", "dict", "instance", "mixed"])
@pytest.mark.parametrize("depth", [900, TOO_DEEP])
def test_deep_nesting(kind, depth):
    """900 levels pickles (or not) exactly as pickle does; TOO_DEEP levels is
    past the recursion limit: both must raise the same exception."""
    obj = graphgen.deep(kind, depth)
    for p in range(6):
        expected = pt_impl.outcome(lambda: ref.dumps(obj, p), ref)
        got = pt_impl.outcome(lambda: impl.dumps(obj, p), impl)
        assert expected == got, "protocol %d: %s" % (p, pt_impl.describe(expected, got))
        if depth == TOO_DEEP:
            assert expected[0] == "raise" and "RecursionError" in expected[1]


def test_picklebuffer_forms():
    """PickleBuffer at every protocol, in-band and out-of-band, readonly and
    writable, contiguous and not, with a callback that keeps some in-band."""
    import array

    objs = [
        pickle.PickleBuffer(b""),
        pickle.PickleBuffer(b"abc"),
        pickle.PickleBuffer(bytearray(b"abc")),
        pickle.PickleBuffer(bytearray(70000)),
        pickle.PickleBuffer(bytes(70000)),
        pickle.PickleBuffer(memoryview(b"abcdef")[::2]),
        pickle.PickleBuffer(memoryview(bytearray(b"abcdef"))[1:3]),
        pickle.PickleBuffer(array.array("i", [1, 2, 3])),
        pickle.PickleBuffer(memoryview(bytes(range(16))).cast("B", (4, 4))),
        pickle.PickleBuffer(memoryview(bytes(range(16))).cast("B", (4, 4))[::2]),
    ]
    pb = pickle.PickleBuffer(b"shared")
    objs.append([pb, pb, (pb,)])

    def keep_odd():
        n = [0]

        def cb(b):
            n[0] += 1
            return n[0] % 2  # true: in-band

        return cb

    for obj in objs:
        for p in range(6):
            expected = pt_impl.outcome(lambda: ref.dumps(obj, p), ref)
            got = pt_impl.outcome(lambda: impl.dumps(obj, p), impl)
            assert expected == got, "%r p%d: %s" % (obj, p, pt_impl.describe(expected, got))
        expected = pt_impl.oob_outcome(ref, obj, 5)
        got = pt_impl.oob_outcome(impl, obj, 5)
        assert expected == got, "%r oob: %s" % (obj, pt_impl.describe(expected, got))
        expected = pt_impl.outcome(lambda: ref.dumps(obj, 5, buffer_callback=keep_odd()), ref)
        got = pt_impl.outcome(lambda: impl.dumps(obj, 5, buffer_callback=keep_odd()), impl)
        assert expected == got, "%r keep_odd: %s" % (obj, pt_impl.describe(expected, got))


def test_big_atoms_framing():
    """Atoms around the 64 KiB frame target, alone and after other data, at
    every protocol, through dumps and through a file (where C pickle
    writes large payloads outside the frame buffer)."""
    sizes = [65535, 65536, 65537, 65536 - 9, 65536 + 9, 200000]
    objs = []
    for n in sizes:
        objs += [b"b" * n, bytearray(b"a" * n), "s" * n, "\xe9" * (n // 2), ["x" * 100, b"y" * n, "z"],
                 [b"\x00" * 60000, b"\x01" * 6000, b"\x02" * 60000]]
    for obj in objs:
        for p in range(6):
            for fn in (v_dumps, v_pickler, v_dump):
                expected = fn(ref, obj, p)
                got = fn(impl, obj, p)
                assert expected == got, "len %d p%d %s: %s" % (len(obj), p, fn.__name__, pt_impl.describe(expected, got))


class RecordingFile:
    """A file that records each write() call's bytes."""

    def __init__(self):
        self.chunks = []

    def write(self, b):
        self.chunks.append(bytes(b))
        return len(b)


def test_write_call_pattern():
    """The sequence of file.write() calls (not only the bytes) matches
    pickle: the first dump-time flush, frame-by-frame flushes at protocol
    >= 4 and direct writes of payloads over 64 KiB.  Code that wraps a
    socket or counts writes can tell the difference otherwise."""
    objs = [[1, 2], [b"x" * 70000, "y" * 70000, 1], [("a" * 1000, i) for i in range(300)],
            {"big": bytearray(100000)}, list(range(50000))]
    for obj in objs:
        for p in range(6):
            fe, fg = RecordingFile(), RecordingFile()
            ref.Pickler(fe, p).dump(obj)
            impl.Pickler(fg, p).dump(obj)
            assert b"".join(fe.chunks) == b"".join(fg.chunks)
            assert [len(c) for c in fe.chunks] == [len(c) for c in fg.chunks], "protocol %d" % p


# ---------------------------------------------- Pickler subclasses ----


def _hooks(base, kind, log):
    """A Pickler subclass of `base` with one hook; the hook logs what it
    sees (type names, in call order) so call sequences compare too."""

    if kind == "persistent_id":
        class P(base):
            def persistent_id(self, obj):
                log.append(type(obj).__name__)
                if isinstance(obj, T.Plain):
                    return ("plain", len(vars(obj)))
                if isinstance(obj, str) and obj.startswith("pid:"):
                    return obj
                if obj is T.function:
                    return 7
                return None
        return P
    if kind == "persistent_id_str":  # protocol 0 needs ASCII str ids
        class P(base):
            def persistent_id(self, obj):
                log.append(type(obj).__name__)
                if isinstance(obj, (bytes, float)):
                    return "id%d" % len(repr(obj))
                return None
        return P
    if kind == "dispatch_table":
        import copyreg

        table = copyreg.dispatch_table.copy()
        table[T.Plain] = lambda o: (log.append("Plain") or T.rebuild, (sorted(vars(o)),))
        table[complex] = lambda o: (complex, (o.imag, o.real))
        table[list] = lambda o: (log.append("list-never") or list, ())  # exact lists never reach it

        class P(base):
            dispatch_table = table
        return P
    if kind == "reducer_override":
        class P(base):
            def reducer_override(self, obj):
                log.append(type(obj).__name__)
                if isinstance(obj, T.Plain):
                    return (T.rebuild, (len(vars(obj)),))
                if obj is T.function or obj is T.Outer:
                    return (getattr, (T, "function"))
                if isinstance(obj, type) and obj is T.Slotted:
                    return "Slotted"
                return NotImplemented
        return P
    if kind == "buffer_callback":
        class P(base):
            def __init__(self, f, p):
                super().__init__(f, p, buffer_callback=lambda b: log.append(bytes(b.raw())))
        return P
    raise ValueError(kind)


HOOKS = ["persistent_id", "persistent_id_str", "dispatch_table", "reducer_override", "buffer_callback"]
SUBCLASS_GRAPHS = 400


@pytest.mark.parametrize("kind", HOOKS)
def test_pickler_subclasses(kind):
    """sertrace.Pickler subclasses with persistent_id / dispatch_table /
    reducer_override / buffer_callback write what pickle.Pickler subclasses
    doing the same write, and call the hooks in the same order."""
    failures = []
    for p in range(6):
        if kind == "buffer_callback" and p < 5:
            continue
        for i in range(SUBCLASS_GRAPHS):
            seed = 7 * SEED_STRIDE + p * SUBCLASS_GRAPHS + i
            obj = graphgen.build(seed, p)
            if i % 3 == 0:
                obj = [obj, T.Plain(a=1), "pid:x", T.function, T.Outer, T.Slotted, 1.5, b"x", 3j]
            results = []
            for m in (ref, impl):
                log = []
                cls = _hooks(m.Pickler, kind, log)

                def run():
                    f = io.BytesIO()
                    cls(f, p).dump(obj)
                    return f.getvalue()

                results.append((pt_impl.outcome(run, m), log))
            (e, _), (g, _) = results
            if (e[0] == g[0] == "raise" and "builtins.RecursionError" in (e[1], g[1])):
                continue  # where the recursion limit hits depends on the hooks' frames
            if results[0] != results[1]:
                failures.append("seed %d p%d: %s\n  log expected %s\n  log got      %s" % (
                    seed, p, pt_impl.describe(results[0][0], results[1][0]),
                    pt_impl._short(results[0][1], 200), pt_impl._short(results[1][1], 200)))
    assert not failures, "%d differ:\n%s" % (len(failures), "\n".join(failures[:8]))


def test_hook_attributes_on_instance():
    """Hooks set as instance attributes after __init__ (persistent_id and
    dispatch_table) behave as on pickle's Pickler."""
    import copyreg

    def run(m):
        out = []
        f = io.BytesIO()
        pk = m.Pickler(f, 2)
        pk.persistent_id = lambda o: "P" if o == "x" else None
        pk.dump(["x", "y"])
        out.append(f.getvalue())
        f = io.BytesIO()
        pk = m.Pickler(f, 2)
        table = copyreg.dispatch_table.copy()
        table[complex] = lambda o: (complex, (0, 0))
        pk.dispatch_table = table
        pk.dump([1j])
        out.append(f.getvalue())
        out.append(getattr(pk, "dispatch_table", None) is table)
        return out

    expected = pt_impl.outcome(lambda: run(ref), ref)
    got = pt_impl.outcome(lambda: run(impl), impl)
    assert expected == got, pt_impl.describe(expected, got)


def _memo_graph(n, kind):
    if kind == "str":
        objs = ["s%d" % i for i in range(n)]
    elif kind == "tuple":
        objs = [(i, "t") for i in range(n)]
    else:
        objs = [T.Plain(i=i) for i in range(n)]
    return [objs, objs[::-1], objs[-1], objs[0]]


@pytest.mark.parametrize("n,kind", [(n, k) for n in (255, 256, 257, 300) for k in ("str", "tuple", "instance")]
                         + [(70000, "str"), (70000, "tuple")])
def test_memo_indices(n, kind):
    """Memo indices past one byte (BINPUT/BINGET -> LONG_BINPUT/LONG_BINGET)
    and past 65536, for every protocol and through a file."""
    obj = _memo_graph(n, kind)
    for p in range(6):
        for fn in (v_dumps, v_pickler):
            expected = fn(ref, obj, p)
            got = fn(impl, obj, p)
            assert expected == got, "n %d p%d %s: %s" % (n, p, fn.__name__, pt_impl.describe(expected, got))


def _big_containers():
    r = __import__("random").Random(5)
    out = []
    for n in (999, 1000, 1001, 2000, 2001, 3500):
        items = [r.randint(-5, 10 ** 6) for _ in range(n)]
        out += [set(items), frozenset(items), T.ListSub(items), T.DictSub(zip(items, items)),
                T.SetSub(items), T.FrozenSub(items), __import__("collections").deque(items),
                __import__("collections").OrderedDict(zip(items, items)),
                T.Reduce((T.ListLike, (), None, items)), T.Reduce((T.DictLike, (), None, None, list(zip(items, items)))),
                {i: [i] for i in items}, [(i,) for i in items], T.Plain(**{"a%d" % i: i for i in range(n)})]
    return out


def test_big_containers_batching():
    """Batches of 1000 (APPENDS / SETITEMS / ADDITEMS and the iterator
    batches of listitems/dictitems) at every protocol."""
    for obj in _big_containers():
        for p in range(6):
            for fn in (v_dumps, v_pickler):
                expected = fn(ref, obj, p)
                got = fn(impl, obj, p)
                assert expected == got, "%s len %d p%d %s: %s" % (type(obj).__name__, len(getattr(obj, "__dict__", obj)),
                                                                 p, fn.__name__, pt_impl.describe(expected, got))


def test_memo_attribute():
    """Pickler.memo: read after a dump (copy(), clear()), and assigned from a
    dict or from another Pickler's memo before a dump."""
    shared = ["shared", (1, 2)]

    def run(m):
        out = []
        for p in (0, 2, 4, 5):
            f = io.BytesIO()
            pk = m.Pickler(f, p)
            pk.dump(shared)
            memo = pk.memo.copy()
            out.append(sorted((k == id(shared), v[0]) for k, v in memo.items()))
            f2 = io.BytesIO()
            pk2 = m.Pickler(f2, p)
            pk2.memo = pk.memo
            pk2.dump([shared, shared[1]])
            out.append(f2.getvalue())
            f3 = io.BytesIO()
            pk3 = m.Pickler(f3, p)
            pk3.memo = {id(shared): (7, shared)}
            pk3.dump([shared])
            out.append(f3.getvalue())
            pk.memo.clear()
            out.append(len(pk.memo.copy()))
        return out

    expected = pt_impl.outcome(lambda: run(ref), ref)
    got = pt_impl.outcome(lambda: run(impl), impl)
    assert expected == got, pt_impl.describe(expected, got)


# Per granularity; the traced path costs more.  100 by default, 600 in the
# soak; the non-primary CPythons set their own (scripts/test-pyversions.sh).
TRACED_GRAPHS_PER_PROTOCOL = knobs.size("PT_TRACED_GRAPHS", 100, 600)

TRACED_CHILD = r"""
import json, sys
sys.path.insert(0, %(here)r)
import graphgen, pt_impl, pt_types as T
import test_differential as t
T.add_extensions()
fails = []
n = 0
for p in range(6):
    items = [(label, None, g) for label, g in t.workload_graphs()]
    items += [("seed %%d" %% s, s, graphgen.build(s, p)) for s in range(p * t.SEED_STRIDE, p * t.SEED_STRIDE + %(count)d)]
    for label, seed, obj in items:
        for variant in ("dumps", "pickler", "fast") + (("oob",) if p == 5 else ()):
            fn = t.VARIANTS[variant]
            e, g = fn(pt_impl.ref, obj, p), fn(pt_impl.impl, obj, p)
            n += 1
            if e != g and not t.depth_sensitive_match(fn, obj, p, e, g):
                fails.append("%%s p%%d %%s: %%s" %% (label, p, variant, pt_impl.describe(e, g)))
print(json.dumps({"n": n, "fails": fails[:20], "nfails": len(fails)}))
"""


@pytest.mark.skipif(pt_impl.IMPL_NAME != "sertrace", reason="tracing needs sertrace")
@pytest.mark.parametrize("granularity", ["containers", "all"])
def test_corpus_traced(granularity, traced_children):
    """The traced save path (live text tree on, written to /dev/null) writes
    the same bytes and raises the same errors as pickle."""
    import json

    proc = traced_children[granularity].result()
    assert proc.returncode == 0, "child died (%d): %s" % (proc.returncode, proc.stderr[-3000:])
    res = json.loads(proc.stdout.splitlines()[-1])
    assert res["n"] >= 6 * 3 * TRACED_GRAPHS_PER_PROTOCOL
    assert res["nfails"] == 0, "%d traced dumps differ:\n%s" % (res["nfails"], "\n".join(res["fails"]))
