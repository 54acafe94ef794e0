"""Byte-identical output: every protocol, a mix of objects, the Pickler
features (persistent_id, dispatch_table, reducer_override, buffer_callback,
fast, memo), files and the write() call pattern, compared with C pickle."""
import collections
import copyreg
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import io
import pickle
import sys

import pytest

import sertrace

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


class Plain:
    def __init__(self):
        self.x = 1
        self.items = [1, "two", 3.0]


class Slots:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 1
        self.b = "b"


class WithItems:
    def __reduce__(self):
        return (WithItems, (), {"s": 1}, iter([1, 2]), iter([("k", "v")]))

    def append(self, x):
        pass

    def extend(self, x):
        pass

    def __setitem__(self, k, v):
        pass


def set_state(obj, state):
    obj.__dict__.update(state)


class WithSetter:
    def __reduce__(self):
        return (WithSetter, (), {"s": 2}, None, None, set_state)


class NewEx:
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __getnewargs_ex__(self):
        return ((1, 2), {"k": 3})


class Outer:
    class Inner:
        pass


@dataclasses.dataclass
class Data:
    a: int = 1
    b: list = dataclasses.field(default_factory=lambda: [1, 2])


class Color(enum.Enum):
    RED = 1


class MyList(list):
    pass


class MyDict(dict):
    pass


Point = collections.namedtuple("Point", "x y")


def corpus():
    shared = Plain()
    rec_list = []
    rec_list.append(rec_list)
    rec_tuple = ([],)
    rec_tuple[0].append(rec_tuple)
    rec_dict = {}
    rec_dict["me"] = rec_dict
    rec_obj = Plain()
    rec_obj.me = rec_obj
    ints = [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
            2**63, -2**63, 2**64, -2**100, 10**400, -128, -129, -2**39, -2**40, True, False]
    return [
        None, ints, [0.0, -0.0, 1.5, 1e300, float("inf"), float("-inf")],
        ["", "abc", "é\n\r\\\x00\x1a\U0001f600", "\ud800lone", "x" * 300],
        [b"", b"x", b"y" * 300], [bytearray(), bytearray(b"ab")],
        [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], [[], [1], [1, 2]],
        [{}, {1: 2}, {1: 2, 3: 4}], [set(), {1, 2}, frozenset(), frozenset({1, frozenset({2})})],
        list(range(2500)), {i: str(i) for i in range(1000)}, {i: i for i in range(2001)},
        set(range(2500)), frozenset(range(1500)),
        [shared, shared, (shared, shared)], ["dup", "dup", b"dup", b"dup"],
        rec_list, rec_tuple, rec_dict, rec_obj,
        Plain(), Slots(), WithItems(), WithSetter(), NewEx(), Outer.Inner, Outer.Inner(), Data(),
        Color.RED, MyList([1, 2]), MyDict(a=1), Point(1, 2),
        collections.OrderedDict(a=1), collections.defaultdict(list, a=[1]),
        collections.deque([1, 2]), datetime.datetime(2020, 1, 2, 3, 4, 5),
        decimal.Decimal("1.5"), fractions.Fraction(1, 3), functools.partial(max, 1),
        range(10), slice(1, 2, 3), complex(1, 2),
        [len, max, int, object, Plain, type(None), type(Ellipsis), type(NotImplemented),
         Ellipsis, NotImplemented, set_state, io.BytesIO, collections.OrderedDict,
         dict.fromkeys, [].append, str.join],
    ]


CORPUS = corpus()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("index", range(len(CORPUS)))
def test_dumps_identical(protocol, index):
    obj = CORPUS[index]

    def outcome(mod):
        try:
            return ("ok", mod.dumps(obj, protocol))
        except Exception as e:  # e.g. __slots__ without __getstate__, protocols 0-1
            return ("raise", type(e), str(e))
    assert outcome(sertrace) == outcome(pickle)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fix_imports(protocol):
    obj = [collections.OrderedDict, functools.reduce, io.StringIO, range, Exception,
           collections.UserDict]
    for fix in (True, False):
        assert sertrace.dumps(obj, protocol, fix_imports=fix) == pickle.dumps(
            obj, protocol, fix_imports=fix)


def big_graph():
    return [bytes(100) * i for i in range(1, 200)] + [
        "x" * 70000, b"y" * 100000, bytearray(b"z" * 70000), list(range(50000)),
        {"k%d" % i: [i, str(i)] for i in range(5000)}]


class RecordingFile:
    def __init__(self):
        self.calls = []

    def write(self, data):
        self.calls.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_framing_and_files(protocol):
    obj = big_graph()
    expected = pickle.dumps(obj, protocol)
    assert sertrace.dumps(obj, protocol) == expected
    f = io.BytesIO()
    sertrace.dump(obj, f, protocol)
    assert f.getvalue() == expected
    ours, theirs = RecordingFile(), RecordingFile()
    sertrace.Pickler(ours, protocol).dump(obj)
    pickle.Pickler(theirs, protocol).dump(obj)
    assert [len(c) for c in ours.calls] == [len(c) for c in theirs.calls]
    assert ours.calls == theirs.calls


class PersPickler(sertrace.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, str) and obj.startswith("ext:"):
            return obj[4:]
        return None


class SubPickler(sertrace.Pickler):
    pass


class RefSubPickler(pickle.Pickler):
    pass


class RefPersPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, str) and obj.startswith("ext:"):
            return obj[4:]
        return None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_persistent_id_method_and_attribute(protocol):
    obj = ["ext:a", "b", {"k": "ext:c"}]
    f1, f2 = io.BytesIO(), io.BytesIO()
    PersPickler(f1, protocol).dump(obj)
    RefPersPickler(f2, protocol).dump(obj)
    assert f1.getvalue() == f2.getvalue()

    def pid(o):
        return 42 if o == "b" else None
    f1, f2 = io.BytesIO(), io.BytesIO()
    if sys.version_info >= (3, 13):
        # 3.13: persistent_id is a method; a Pickler without __dict__ cannot
        # take an instance attribute (as pickle's), a subclass instance can,
        # and it is read at dump() time.
        for cls in (sertrace.Pickler, pickle.Pickler):
            with pytest.raises(AttributeError, match="read-only"):
                cls(io.BytesIO(), protocol).persistent_id = pid
        p1, p2 = SubPickler(f1, protocol), RefSubPickler(f2, protocol)
    else:
        p1, p2 = sertrace.Pickler(f1, protocol), pickle.Pickler(f2, protocol)
    p1.persistent_id = pid
    p2.persistent_id = pid
    p1.dump(obj)
    p2.dump(obj)
    assert f1.getvalue() == f2.getvalue()
    assert p1.persistent_id is pid


def reduce_plain(obj):
    return (Plain, (), {"replaced": True})


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dispatch_tables(protocol):
    obj = [Plain(), Plain()]
    table = {Plain: reduce_plain}
    f1, f2 = io.BytesIO(), io.BytesIO()
    p1, p2 = sertrace.Pickler(f1, protocol), pickle.Pickler(f2, protocol)
    p1.dispatch_table = table
    p2.dispatch_table = table
    p1.dump(obj)
    p2.dump(obj)
    assert f1.getvalue() == f2.getvalue()

    class Ours(sertrace.Pickler):
        dispatch_table = table

    class Theirs(pickle.Pickler):
        dispatch_table = table
    f1, f2 = io.BytesIO(), io.BytesIO()
    Ours(f1, protocol).dump(obj)
    Theirs(f2, protocol).dump(obj)
    assert f1.getvalue() == f2.getvalue()

    copyreg.pickle(Slots, lambda o: (Slots, ()))
    try:
        assert sertrace.dumps([Slots()], protocol) == pickle.dumps([Slots()], protocol)
    finally:
        del copyreg.dispatch_table[Slots]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reducer_override(protocol):
    def override(self, obj):
        if obj is len:
            return (max, (1, 2))
        if isinstance(obj, Plain):
            return "Plain"
        return NotImplemented

    Ours = type("Ours", (sertrace.Pickler,), {"reducer_override": override})
    Theirs = type("Theirs", (pickle.Pickler,), {"reducer_override": override})
    obj = [len, 1, "x", Plain, Color.RED]
    f1, f2 = io.BytesIO(), io.BytesIO()
    Ours(f1, protocol).dump(obj)
    Theirs(f2, protocol).dump(obj)
    assert f1.getvalue() == f2.getvalue()


def test_buffer_callback_out_of_band():
    data = [pickle.PickleBuffer(b"readonly"), pickle.PickleBuffer(bytearray(b"writable")),
            pickle.PickleBuffer(b"x" * 100000)]
    for callback in (lambda b: False, lambda b: True, None):
        ours, theirs = [], []

        def cb_ours(b, callback=callback):
            ours.append(bytes(b.raw()))
            return callback(b) if callback else None

        def cb_theirs(b, callback=callback):
            theirs.append(bytes(b.raw()))
            return callback(b) if callback else None
        assert sertrace.dumps(data, 5, buffer_callback=cb_ours) == pickle.dumps(
            data, 5, buffer_callback=cb_theirs)
        assert ours == theirs
    assert sertrace.dumps(data, 5) == pickle.dumps(data, 5)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fast_mode(protocol):
    obj = [[1, 2], {"a": (3, 4)}, "s", "s"]
    f1, f2 = io.BytesIO(), io.BytesIO()
    p1, p2 = sertrace.Pickler(f1, protocol), pickle.Pickler(f2, protocol)
    p1.fast = p2.fast = 1
    p1.dump(obj)
    p2.dump(obj)
    assert f1.getvalue() == f2.getvalue()


def test_extension_registry():
    copyreg.add_extension(__name__, "Plain", 0xF1)
    copyreg.add_extension(__name__, "Slots", 0xF1F1)
    copyreg.add_extension(__name__, "Data", 0x7FFFFFF1)
    try:
        for protocol in PROTOCOLS:
            obj = [Plain, Slots, Data, Plain()]
            assert sertrace.dumps(obj, protocol) == pickle.dumps(obj, protocol)
    finally:
        copyreg.remove_extension(__name__, "Plain", 0xF1)
        copyreg.remove_extension(__name__, "Slots", 0xF1F1)
        copyreg.remove_extension(__name__, "Data", 0x7FFFFFF1)


def test_pickler_reused_across_dumps():
    for protocol in PROTOCOLS:
        f1, f2 = io.BytesIO(), io.BytesIO()
        p1, p2 = sertrace.Pickler(f1, protocol), pickle.Pickler(f2, protocol)
        shared = ["shared"]
        for obj in ([shared], {"a": shared}, shared):
            p1.dump(obj)
            p2.dump(obj)
        assert f1.getvalue() == f2.getvalue()
