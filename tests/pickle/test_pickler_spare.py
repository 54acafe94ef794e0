"""The pickler that sertrace.dumps() keeps between calls (module.c, issue 11
item 5: the fixed cost of a call).

dumps() parks one emptied pickler after a successful call and takes it back
at the next one; its output buffer starts at the size of the previous
result.  None of that may show: every result equals pickle.dumps()'s, a
parked pickler holds no reference to anything that was pickled (objects and
buffer_callback are freed when the caller drops them), it is not reachable
through the garbage collector, and dumps() nested in a __reduce__ or run by
a __del__ while the parked pickler is being emptied gets a pickler of its
own.
"""
import gc
import pickle
import weakref

import pytest

import sertrace

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


class Thing:
    def __init__(self, n):
        self.n = n


def test_sizes_up_and_down_equal_pickle():
    # The buffer starts at the previous result's size (plus a margin): big
    # after small, small after big, just over and under the 4 KiB buffer
    # and the 64 KiB frame, every protocol.
    sizes = [1, 4000, 4090, 4100, 70000, 10, 2_000_000, 3, 65536, 65530, 0, 300_000, 5]
    for proto in PROTOCOLS:
        for n in sizes:
            obj = [b"x" * n, "y" * (n // 3), list(range(n // 1000))]
            assert sertrace.dumps(obj, proto) == pickle.dumps(obj, proto), (proto, n)


def test_nothing_pickled_is_kept_alive():
    thing = Thing(1)
    ref = weakref.ref(thing)
    payload = [thing, thing, {"k": thing}]
    assert sertrace.dumps(payload) == pickle.dumps(payload)
    del payload, thing
    gc.collect()
    assert ref() is None, "the parked pickler's memo kept an object alive"


@pytest.mark.parametrize("count", [300, 600, 1300, 2000, 5000])
def test_kept_memo_tables_equal_pickle_and_keep_nothing_alive(count):
    # A memo of 2048 or 4096 slots that its dump filled well is kept
    # (emptied) for the next dumps() (module.c, memo_worth_keeping()): the
    # same payload again, a smaller and a larger one after it give pickle's
    # bytes, and nothing memoized by any of them stays alive.
    things = [Thing(i) for i in range(count)]
    refs = [weakref.ref(t) for t in things]
    chunks = [bytes([i % 256]) * 64 for i in range(count)]
    payloads = [chunks, things, chunks[: count // 7], [things, chunks], [None], chunks]
    for proto in PROTOCOLS:
        for payload in payloads:
            assert sertrace.dumps(payload, proto) == pickle.dumps(payload, proto), (proto, count)
    del things, payloads
    gc.collect()
    assert all(r() is None for r in refs), "a kept memo table kept an object alive"


def test_buffer_callback_not_kept():
    seen = []

    class Callback:
        def __call__(self, buf):
            seen.append(bytes(buf))
            return True

    cb = Callback()
    ref = weakref.ref(cb)
    data = pickle.PickleBuffer(bytearray(b"abc" * 10))
    got = sertrace.dumps([data], 5, buffer_callback=cb)
    assert got == pickle.dumps([data], 5, buffer_callback=lambda b: True)
    assert seen == [b"abc" * 10]
    del cb
    gc.collect()
    assert ref() is None, "the parked pickler kept buffer_callback"


def test_parked_pickler_not_reachable_through_gc():
    assert sertrace.dumps([1, 2]) == pickle.dumps([1, 2])
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is sertrace.Pickler]


class Nested:
    """Its __reduce__ calls dumps() while the outer dumps() holds the
    parked pickler."""

    def __reduce__(self):
        inner = sertrace.dumps({"inner": [1, 2, 3]})
        assert inner == pickle.dumps({"inner": [1, 2, 3]})
        return (bytes, (inner,))


def test_dumps_nested_in_reduce():
    for proto in PROTOCOLS:
        obj = [Nested(), "tail"]
        assert sertrace.dumps(obj, proto) == pickle.dumps(obj, proto)
    assert sertrace.dumps([1, 2]) == pickle.dumps([1, 2])


class Dropped:
    """Only the memo references it after the dump (its __reduce__ made it):
    emptying the parked pickler's memo runs this __del__, which pickles."""

    results = []

    def __del__(self):
        Dropped.results.append(sertrace.dumps(("from __del__", 7)))


class MakesDropped:
    def __reduce__(self):
        # a new Dropped: after the dump only the memo holds it
        return (Thing, (Dropped(),))


def test_dumps_run_by_del_while_the_memo_is_emptied():
    Dropped.results.clear()
    obj = [MakesDropped(), MakesDropped()]
    want = pickle.dumps(obj)
    gc.collect()
    Dropped.results.clear()
    got = sertrace.dumps(obj)
    gc.collect()
    assert got == want
    assert Dropped.results == [pickle.dumps(("from __del__", 7))] * 2
    # and the module still works, with one pickler parked
    for proto in PROTOCOLS:
        assert sertrace.dumps([1, (2, 3)], proto) == pickle.dumps([1, (2, 3)], proto)


def test_failed_dumps_then_dumps():
    class Bad:
        def __reduce__(self):
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        sertrace.dumps([1, Bad()])
    assert sertrace.dumps([1, 2]) == pickle.dumps([1, 2])
    with pytest.raises(ValueError):
        sertrace.dumps(1, 99)
    assert sertrace.dumps(None) == pickle.dumps(None)
