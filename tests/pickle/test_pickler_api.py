"""sertrace's pickling API surface is pickle's: names, signatures, classes."""
import inspect
import io
import pickle
import sys

import pytest

import sertrace

MODULE_LAMBDA = lambda: 0  # noqa: E731  (found as <lambda>: not picklable)


def test_names_exist():
    for name in ("Pickler", "dump", "dumps", "PickleError", "PicklingError",
                 "HIGHEST_PROTOCOL", "DEFAULT_PROTOCOL", "note"):
        assert hasattr(sertrace, name), name


def test_exceptions_are_pickles_own():
    assert sertrace.PicklingError is pickle.PicklingError
    assert sertrace.PickleError is pickle.PickleError
    with pytest.raises(pickle.PicklingError):
        sertrace.dumps(MODULE_LAMBDA)


def test_protocol_constants():
    assert sertrace.HIGHEST_PROTOCOL == pickle.HIGHEST_PROTOCOL == 5
    assert sertrace.DEFAULT_PROTOCOL == pickle.DEFAULT_PROTOCOL


@pytest.mark.parametrize("name", ["dump", "dumps"])
def test_function_signatures(name):
    ours = inspect.signature(getattr(sertrace, name))
    theirs = inspect.signature(getattr(pickle, name))
    assert str(ours) == str(theirs)


def test_pickler_signature():
    assert str(inspect.signature(sertrace.Pickler)) == str(inspect.signature(pickle.Pickler))


def test_pickler_attributes():
    p = sertrace.Pickler(io.BytesIO(), 2)
    assert p.bin == 1
    assert p.fast == 0
    p.fast = 1
    assert p.fast == 1
    with pytest.raises(AttributeError):
        p.dispatch_table
    if sys.version_info >= (3, 13):
        # 3.13: persistent_id is a method of Pickler, the default returns None.
        assert p.persistent_id("x") is None
        assert pickle.Pickler(io.BytesIO()).persistent_id("x") is None
    else:
        with pytest.raises(AttributeError):
            p.persistent_id
    assert sertrace.Pickler(io.BytesIO(), 0).bin == 0


def test_keywords_and_positional():
    obj = {"a": [1, 2]}
    assert sertrace.dumps(obj, 2, fix_imports=False) == pickle.dumps(obj, 2, fix_imports=False)
    assert sertrace.dumps(obj, protocol=3) == pickle.dumps(obj, protocol=3)
    f = io.BytesIO()
    sertrace.dump(obj, f, 1)
    assert f.getvalue() == pickle.dumps(obj, 1)
    f = io.BytesIO()
    sertrace.Pickler(f, 2, False).dump(obj)  # fix_imports positional, as in C pickle
    assert f.getvalue() == pickle.dumps(obj, 2)
    with pytest.raises(TypeError):
        sertrace.dumps(obj, 2, False)  # keyword-only in dumps()


@pytest.mark.parametrize("protocol", [-1, -5, 6, 100, "x", None])
def test_protocol_argument(protocol):
    def run(mod):
        try:
            return ("ok", mod.dumps([1], protocol))
        except Exception as e:
            return (type(e), str(e))
    assert run(sertrace) == run(pickle)


def test_buffer_callback_needs_protocol_5():
    for proto in (None, 0, 4):
        with pytest.raises(ValueError) as a:
            sertrace.dumps(b"x", proto, buffer_callback=list().append)
        with pytest.raises(ValueError) as b:
            pickle.dumps(b"x", proto, buffer_callback=list().append)
        assert str(a.value) == str(b.value)


def test_file_without_write():
    with pytest.raises(TypeError, match="file must have a 'write' attribute"):
        sertrace.Pickler(object())
    with pytest.raises(TypeError, match="file must have a 'write' attribute"):
        sertrace.dump(1, object())


def test_init_not_called():
    class P(sertrace.Pickler):
        def __init__(self):
            pass
    with pytest.raises(pickle.PicklingError, match=r"Pickler.__init__\(\) was not called"):
        P().dump(1)


def test_memo_proxy_and_clear_memo():
    f = io.BytesIO()
    p = sertrace.Pickler(f, 2)
    shared = ["x"]
    p.dump(shared)
    memo = p.memo.copy()
    assert memo[id(shared)] == (0, shared)
    p.dump(shared)  # memo kept across dumps: a GET
    assert f.getvalue().endswith(b"h\x00.")
    p.clear_memo()
    assert p.memo.copy() == {}
    p.memo = {id(shared): (7, shared)}
    g = io.BytesIO()
    p2 = sertrace.Pickler(g, 2)
    p2.memo = p.memo
    p2.dump(shared)
    assert g.getvalue() == b"\x80\x02h\x07."
    p.memo.clear()
    assert p.memo.copy() == {}


def test_note_type_checks_and_noop():
    sertrace.note("k", "v")  # no dump running: no-op
    with pytest.raises(TypeError):
        sertrace.note(1, "v")
    with pytest.raises(TypeError):
        sertrace.note("k", b"v")


def test_reentrant_dump_is_refused_not_a_crash():
    class R:
        pk = None

        def __reduce__(self):
            pk, R.pk = R.pk, None
            if pk:
                pk.dump(["inner"])
            return (list, ())

    R.pk = p = sertrace.Pickler(io.BytesIO(), 2)
    with pytest.raises(RuntimeError):
        p.dump([1, R(), "after"])


def _attributes_set_before_init(module):
    """What a Pickler subclass sees of attributes it sets before calling
    Pickler.__init__ (issue 11 item 4; CPython's test_pickle has the
    dispatch_table case as test_custom_pickler_dispatch_table_memleak)."""
    table = {complex: lambda c: (complex, (9.0, 9.0))}

    def pid(obj):
        return "P" if obj == "persist me" else None

    def override(obj):
        return (int, (7,)) if isinstance(obj, range) else NotImplemented

    class Early(module.Pickler):
        def __init__(self, f):
            self.dispatch_table = table
            self.persistent_id = pid
            self.reducer_override = override
            super().__init__(f, 2)

    f = io.BytesIO()
    p = Early(f)
    kept = (p.dispatch_table is table, p.persistent_id is pid,
            p.reducer_override is override)
    p.dump([1j, "persist me", range(3)])
    # A second __init__ on a used pickler starts from scratch: the
    # attributes set by Early.__init__ before it are dropped again.
    p.__init__(io.BytesIO())
    after_reinit = []
    for name in ("dispatch_table", "persistent_id"):
        try:
            after_reinit.append(getattr(p, name) is not None)
        except AttributeError as e:
            after_reinit.append(type(e).__name__)
    return kept, f.getvalue(), after_reinit


def test_attributes_set_before_init_are_kept():
    ours = _attributes_set_before_init(sertrace)
    theirs = _attributes_set_before_init(pickle)
    assert ours[0] == (True, True, True)
    assert ours == theirs
    # The table, the persistent id and the override were all used.
    # (A subclass method: 3.13's Unpickler.persistent_load is a method, not
    # settable on the instance.)
    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            return ("loaded", pid)
    assert Loader(io.BytesIO(ours[1])).load() == [9 + 9j, ("loaded", "P"), 7]


def test_dispatch_table_set_on_bare_instance_before_init():
    table = {}
    p = sertrace.Pickler.__new__(sertrace.Pickler)
    p.dispatch_table = table
    p.__init__(io.BytesIO())
    assert p.dispatch_table is table


def test_types_are_gc_tracked_immutable_heap_types():
    """As _pickle's from 3.12 on: heap types, tracked by the GC, immutable; the
    memo proxy cannot be made from Python; instances (of subclasses too) give
    back the reference they hold on their type."""
    import gc
    import sys
    proxy_type = type(sertrace.Pickler(io.BytesIO()).memo)
    for tp in (sertrace.Pickler, proxy_type):
        assert gc.is_tracked(tp), tp
        assert tp.__flags__ & (1 << 9), tp  # Py_TPFLAGS_HEAPTYPE
        with pytest.raises(TypeError, match="immutable"):
            tp.foo = "bar"
    with pytest.raises(TypeError, match="cannot create"):
        proxy_type()

    class Sub(sertrace.Pickler):
        pass

    # dumps() keeps one pickler (holding its type) between calls: park it
    # before counting, so that only leaks per iteration show
    sertrace.dumps([0])
    before = (sys.getrefcount(Sub), sys.getrefcount(sertrace.Pickler),
              sys.getrefcount(proxy_type))
    for i in range(200):
        s = Sub(io.BytesIO())
        s.dump([i])
        memo = s.memo
        del s, memo
        p = sertrace.Pickler(io.BytesIO())
        p.memo.copy()
        del p
        sertrace.dumps([i, "x"])
    after = (sys.getrefcount(Sub), sys.getrefcount(sertrace.Pickler),
             sys.getrefcount(proxy_type))
    assert after == before
