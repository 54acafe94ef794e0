"""Hostile objects for test_hostile.py, run in a child process.

Each case is a function case(m) -> result, where m is the pickle module to
exercise (pickle or the implementation under test).  Cases build fresh
objects for each call (many mutate themselves), and mostly return a list of
per-protocol outcomes (pt_impl.outcome with addresses normalized, since the
two runs pickle equal but distinct objects).

    python3 pt_hostile.py CASE...   runs each CASE with pickle, then with
                                    the implementation, printing one JSON
                                    line each ({"case": CASE, "ref" or
                                    "impl": result}), then "alive" once the
                                    interpreter has survived a gc and a
                                    sanity dump.

Running in a child turns a crash (segfault, abort, fatal error) into a
failed test instead of a dead test session.
"""

import copyreg
import gc
import io
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pt_impl  # noqa: E402
import pt_types as T  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from testlib import knobs  # noqa: E402

# Sizes: the soak (PT_SOAK=1, CI's own step) runs the deepest and longest
# ones; the default run the same cases smaller, on the same paths: 20,000
# levels are past every CPython's recursion limit too (3.13: ~10,000), so
# the dump fails the same way, at two protocols (unframed and framed)
# instead of four; the unpicklable object of unserializable_paths sits at
# list index 10,000 instead of 100,000 (its traced run writes one atom line
# per item: 1.2 million lines in the soak).
SOAK = knobs.soak()
DEEP_DEPTH = 100_000 if SOAK else 20_000
DEEP_PROTOCOLS = (0, 2, 4, 5) if SOAK else (0, 4)
FAR_INDEX = 100_000 if SOAK else 10_000

CASES = {}
SUBPROCESS_ENV = {}  # case -> extra setup tag ("rlimit")


def case(fn):
    CASES[fn.__name__[len("case_"):]] = fn
    return fn


# CPython 3.13 nests ~10,000 levels before its RecursionError (3.11: ~1,000)
# and the live text tree of a dump is O(depth^2) bytes (each line is indented
# by its depth): ~230 MB for one dump that recurses to the limit.  Traced
# (test_hostile's traced variant sets DISPATCH_TRACE), the cases that recurse
# to the limit run one such dump instead of one per protocol and variant
# (9 GB for deep_100000); untraced, they run in full.
ONE_DEEP_DUMP = bool(os.environ.get("DISPATCH_TRACE")) and sys.version_info >= (3, 13)


def each_protocol(m, make, protocols=range(6), via="dumps"):
    out = []
    for p in protocols:
        obj = make()

        def run():
            if via == "dumps":
                return m.dumps(obj, p)
            f = io.BytesIO()
            m.Pickler(f, p).dump(obj)
            return f.getvalue()

        out.append(pt_impl.outcome(run, m, normalize_addresses=True))
    return out


# ------------------------------------------------------------ __reduce__ ----


class RaisingReduce:
    def __init__(self, exc):
        self.exc = exc

    def __reduce__(self):
        raise self.exc


class RaisingReduceEx:
    def __reduce_ex__(self, p):
        raise ValueError("reduce_ex %d failed" % p)


@case
def case_reduce_raises(m):
    return (each_protocol(m, lambda: [1, RaisingReduce(ValueError("boom"))])
            + each_protocol(m, lambda: {"k": RaisingReduceEx()})
            + each_protocol(m, lambda: RaisingReduce(MemoryError("no memory (simulated)")))
            + each_protocol(m, lambda: (RaisingReduce(RecursionError("deep")),)))


class Custom(BaseException):
    pass


@case
def case_reduce_raises_base_exception(m):
    return each_protocol(m, lambda: [RaisingReduce(Custom("not an Exception"))])


class Garbage:
    def __init__(self, rv):
        self.rv = rv

    def __reduce__(self):
        rv = self.rv
        return rv() if callable(rv) and not isinstance(rv, type) and getattr(rv, "fresh", False) else rv


def fresh(fn):
    fn.fresh = True
    return fn


class Other:
    pass


def _named(name):
    def f(*a, **k):
        return None

    f.__name__ = name
    return f


class WeirdName:
    """A callable whose __name__ lookup raises, or is not a str."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *a):
        return None

    @property
    def __name__(self):
        if isinstance(self._name, Exception):
            raise self._name
        return self._name


GARBAGE = {
    # C pickle decides NEWOBJ / NEWOBJ_EX from the callable's __name__ only
    "fake_newobj": (_named("__newobj__"), (Garbage, 1)),
    "fake_newobj_ex": (_named("__newobj_ex__"), (Garbage, (1,), {"k": 2})),
    "fake_newobj_no_args": (_named("__newobj__"), ()),
    "callable_name_raises": (WeirdName(RuntimeError("__name__ lookup")), (1,)),
    "callable_name_not_str": (WeirdName(5), (1,)),
    "callable_name_newobj_attr_error": (WeirdName(AttributeError("no name")), (1,)),
    "tuple_subclass": T.TupleSub((T.rebuild, (1,))),
    "args_tuple_subclass": (T.rebuild, T.TupleSub((1, 2))),
    "state_dict_subclass": (T.Plain, (), T.DictSub(a=1)),
    "state_slots_pair_wrong": (T.Plain, (), (1, 2, 3)),
    "int": 42,
    "none": None,
    "bytes": b"x",
    "list": [T.rebuild, ()],
    "empty_tuple": (),
    "one_item": (T.rebuild,),
    "seven_items": (T.rebuild, (), None, None, None, None, None),
    "noncallable": (5, ()),
    "args_list": (T.rebuild, [1]),
    "args_none": (T.rebuild, None),
    "listitems_int": (T.ListLike, (), None, 5),
    "listitems_list": (T.ListLike, (), None, [1, 2]),
    "dictitems_int": (T.DictLike, (), None, None, 5),
    "dictitems_nonpairs": fresh(lambda: (T.DictLike, (), None, None, iter([1, 2]))),
    "dictitems_triples": fresh(lambda: (T.DictLike, (), None, None, iter([(1, 2, 3)]))),
    "listitems_raising": fresh(lambda: (T.ListLike, (), None, (1 / (3 - i) for i in range(5)))),
    "setter_noncallable": (T.Plain, (), {}, None, None, 5),
    "setter_without_state": (T.Plain, (), None, None, None, T.set_state),
    "newobj_no_args": (copyreg.__newobj__, ()),
    "newobj_not_class": (copyreg.__newobj__, (5,)),
    "newobj_wrong_class": (copyreg.__newobj__, (Other,)),
    "newobj_args_list": (copyreg.__newobj__, [Garbage]),
    "newobj_ex_short": (copyreg.__newobj_ex__, (Garbage,)),
    "newobj_ex_list_args": (copyreg.__newobj_ex__, (Garbage, [], {})),
    "newobj_ex_list_kwargs": (copyreg.__newobj_ex__, (Garbage, (), [])),
    "newobj_ex_not_class": (copyreg.__newobj_ex__, (5, (), {})),
    "newobj_ex_wrong_class": (copyreg.__newobj_ex__, (Other, (), {})),
    "string_missing": "NO_SUCH_GLOBAL",
    "string_other_object": "SINGLETON",
    "string_empty": "",
    "string_dotted_missing": "Outer.Nope",
    "string_subclass": T.StrSub("SINGLETON"),
    "state_unpicklable": (T.Plain, (), {"f": T.LAMBDA}),
    "args_unpicklable": (T.rebuild, (T.make_local_function(),)),
    "callable_unpicklable": (T.make_local_function(), ()),
}


def _garbage_case(name):
    def run(m):
        return each_protocol(m, lambda: [Garbage(GARBAGE[name])])

    run.__name__ = "case_garbage_" + name
    return case(run)


for _name in GARBAGE:
    _garbage_case(_name)


class NoncallableReduceEx:
    __reduce_ex__ = 5


class NotImplementedReduceEx:
    def __reduce_ex__(self, p):
        return NotImplemented


class SpoofedClass:
    """__class__ lies: the __newobj__ class check reads it."""

    @property
    def __class__(self):
        return Other


@case
def case_reduce_ex_not_callable(m):
    return (each_protocol(m, lambda: NoncallableReduceEx())
            + each_protocol(m, lambda: NotImplementedReduceEx())
            + each_protocol(m, lambda: [SpoofedClass()]))


class SelfArgs:
    def __reduce__(self):
        return (T.rebuild, (self,))


@case
def case_reduce_args_contain_self(m):
    return each_protocol(m, lambda: SelfArgs(), protocols=(4,) if ONE_DEEP_DUMP else range(6))


# -------------------------------------------------------- mutation ----


class Mutator:
    """Pickling it runs `action` once (later pickles do nothing)."""

    def __init__(self, action):
        self.action = action
        self.done = False

    def __reduce__(self):
        if not self.done:
            self.done = True
            self.action()
        return (T.rebuild, ())


def _mutating(kind, n=5):
    def make():
        if kind in ("list_append", "list_clear", "list_pop", "list_extend_many", "list_replace"):
            lst = list(range(n))
            acts = {
                "list_append": lambda: lst.append("appended"),
                "list_clear": lst.clear,
                "list_pop": lambda: [lst.pop() for _ in range(min(2, len(lst)))],
                "list_extend_many": lambda: lst.extend(range(1500)),
                "list_replace": lambda: lst.__setitem__(slice(None), ["new"] * 3),
            }
            lst.insert(1, Mutator(acts[kind]))
            return lst
        if kind.startswith("dict"):
            d = {i: i for i in range(n)}
            acts = {
                "dict_insert": lambda: d.__setitem__("new", 1),
                "dict_delete": lambda: d.pop(n - 1),
                "dict_clear": d.clear,
                "dict_replace_value": lambda: d.__setitem__(0, "replaced"),
                "dict_delete_insert": lambda: (d.pop(n - 1), d.__setitem__("other", 2)),
            }
            d["m"] = Mutator(acts[kind])
            return d
        if kind.startswith("set"):
            s = set(range(n))
            holder = T.Plain()
            acts = {"set_add": lambda: s.add("new"), "set_discard": lambda: s.discard(n - 1),
                    "set_clear": s.clear}
            holder.s = s
            mut = Mutator(acts[kind])
            mut.__hash__  # noqa: B018
            s.add(mut)
            return s
        if kind == "instance_dict":
            o = T.Plain(a=1, b=2)
            o.c = Mutator(lambda: o.__dict__.update({"z%d" % i: i for i in range(10)}))
            return o
        raise ValueError(kind)

    return make


MUTATIONS = ["list_append", "list_clear", "list_pop", "list_extend_many", "list_replace",
             "dict_insert", "dict_delete", "dict_clear", "dict_replace_value", "dict_delete_insert",
             "set_add", "set_discard", "set_clear", "instance_dict"]


def _mutation_case(kind):
    def run(m):
        out = []
        for n in (1, 2, 5, 999, 1000, 1001):
            out += each_protocol(m, _mutating(kind, n))
            out += each_protocol(m, _mutating(kind, n), via="pickler")
        return out

    run.__name__ = "case_mutate_" + kind
    return case(run)


for _k in MUTATIONS:
    _mutation_case(_k)


class SelfState:
    def __getstate__(self):
        return self


class RaisingGetstate:
    def __getstate__(self):
        raise KeyError("getstate")


@case
def case_getstate_self(m):
    return (each_protocol(m, lambda: SelfState()) + each_protocol(m, lambda: [SelfState(), 1])
            + each_protocol(m, lambda: RaisingGetstate()))


# ------------------------------------------------------------- depth ----


@case
def case_deep_100000(m):
    """100,000 levels in the soak, DEEP_DEPTH by default (the name stays)."""
    import graphgen

    out = []
    kinds, protocols, both = ("list", "tuple", "dict", "instance", "mixed"), DEEP_PROTOCOLS, True
    if ONE_DEEP_DUMP:
        kinds, protocols, both = ("mixed",), (4,), False
    for kind in kinds:
        obj = graphgen.deep(kind, DEEP_DEPTH)
        for p in protocols:
            out.append(pt_impl.outcome(lambda: m.dumps(obj, p), m))
            if both:
                out.append(pt_impl.outcome(lambda: m.Pickler(io.BytesIO(), p).dump(obj), m))
    return out


# ------------------------------------------------------- hash / eq ----


class Touchy:
    """Hashable at insertion, then __hash__ and __eq__ raise."""

    armed = False

    def __hash__(self):
        if Touchy.armed:
            raise RuntimeError("hash called")
        return 1

    def __eq__(self, other):
        if Touchy.armed:
            raise RuntimeError("eq called")
        return self is other


class HashMeta(type):
    def __hash__(cls):
        if getattr(cls, "armed", False):
            raise RuntimeError("metaclass hash called")
        return type.__hash__(cls)

    def __eq__(cls, other):
        if getattr(cls, "armed", False):
            raise RuntimeError("metaclass eq called")
        return cls is other


class WithHashMeta(metaclass=HashMeta):
    pass


@case
def case_hash_eq_raise(m):
    a, b = Touchy(), Touchy()
    d = {a: 1, b: 2, "x": a}
    s = {a, b}
    fs = frozenset([a])
    inst = WithHashMeta()
    Touchy.armed = True
    WithHashMeta.armed = True
    try:
        out = []
        for p in range(6):
            for obj in (d, s, fs, [d, s, fs], inst, WithHashMeta, [inst]):
                out.append(pt_impl.outcome(lambda: m.dumps(obj, p), m, normalize_addresses=True))
        return out
    finally:
        Touchy.armed = False
        WithHashMeta.armed = False


# ------------------------------------------------------------- files ----


class RaisingFile:
    def __init__(self, after=0, exc=OSError("disk full")):
        self.after = after
        self.exc = exc
        self.written = []

    def write(self, b):
        if self.after <= 0:
            raise self.exc
        self.after -= 1
        self.written.append(bytes(b))
        return len(b)


BIG = [b"x" * 70000, "y" * 70000, list(range(3000)), b"z" * 100000]


@case
def case_file_write_raises(m):
    out = []
    for after in (0, 1, 2, 3):
        for p in range(6):
            for obj in ([1, 2], BIG):
                f = RaisingFile(after)
                o = pt_impl.outcome(lambda: m.Pickler(f, p).dump(obj), m)
                out.append((o, [len(c) for c in f.written]))
    f = RaisingFile(0, exc=Custom("base exception from write"))
    out.append(pt_impl.outcome(lambda: m.dump([1], f, 2), m))
    return out


class OddFile:
    def __init__(self, ret):
        self.ret = ret
        self.data = []

    def write(self, b):
        self.data.append(bytes(b))
        return self.ret(b)


@case
def case_file_write_returns_garbage(m):
    out = []
    for name, ret in (("short", lambda b: len(b) // 2), ("none", lambda b: None), ("zero", lambda b: 0),
                      ("negative", lambda b: -1), ("str", lambda b: "garbage"),
                      ("huge", lambda b: 1 << 80), ("self", lambda b: b)):
        for p in range(6):
            for obj in ([1, "a"], BIG):
                f = OddFile(ret)
                o = pt_impl.outcome(lambda: m.dump(obj, f, p), m)
                out.append((name, o, b"".join(f.data)))
    return out


class WriteProperty:
    @property
    def write(self):
        raise RuntimeError("write attribute lookup")


@case
def case_file_write_attribute_raises(m):
    return [pt_impl.outcome(lambda: m.Pickler(WriteProperty(), p), m) for p in range(6)]


@case
def case_file_write_closed(m):
    out = []
    for p in (0, 4, 5):
        f = io.BytesIO()
        pk = m.Pickler(f, p)
        f.close()
        out.append(pt_impl.outcome(lambda: pk.dump([1, 2]), m))
    return out


# ------------------------------------------------------------ memory ----


def _huge_items():
    # Fresh 10 MiB bytes, forever: the memo keeps each alive, so memory runs
    # out (the child runs under RLIMIT_AS) in the generator or in the pickler.
    while True:
        yield bytes(10 << 20)


class Endless:
    def __reduce__(self):
        return (T.ListLike, (), None, _huge_items())


@case
def case_memory_exhaustion(m):
    out = []
    for p in (3, 5):
        o = pt_impl.outcome(lambda: m.dumps(Endless(), p), m)
        out.append(o[:2])  # class only: where exactly memory runs out may differ
        gc.collect()
        o = pt_impl.outcome(lambda: m.Pickler(io.BytesIO(), p).dump(Endless()), m)
        out.append(o[:2])
        gc.collect()
    return out


SUBPROCESS_ENV["memory_exhaustion"] = "rlimit"


# ------------------------------------------------------------- hooks ----


def _hook_run(m, p, kind, obj):
    class P(m.Pickler):
        pass

    if kind == "persistent_id":
        P.persistent_id = lambda self, o: (_ for _ in ()).throw(ValueError("pid %s" % type(o).__name__))
    elif kind == "persistent_id_late":
        P.persistent_id = lambda self, o: (_ for _ in ()).throw(ValueError("late")) if o == "x" else None
    elif kind == "reducer_override":
        P.reducer_override = lambda self, o: (_ for _ in ()).throw(TypeError("ro %s" % type(o).__name__))
    elif kind == "reducer_override_garbage":
        P.reducer_override = lambda self, o: 5 if isinstance(o, T.Plain) else NotImplemented
    elif kind == "reducer_override_self":
        P.reducer_override = lambda self, o: (T.rebuild, (o,)) if isinstance(o, T.Plain) else NotImplemented
    elif kind == "dispatch_table_raises":
        class Table(dict):
            def __getitem__(self, k):
                raise RuntimeError("table lookup")
        P.dispatch_table = Table()
    elif kind == "dispatch_table_keyerror":
        class Table(dict):
            def __getitem__(self, k):
                raise KeyError(k)
        P.dispatch_table = Table()
    elif kind == "dispatch_table_not_mapping":
        P.dispatch_table = [1, 2]
    elif kind == "dispatch_table_entry_raises":
        P.dispatch_table = {T.Plain: lambda o: 1 / 0}
    elif kind == "persistent_id_nonascii_p0":
        P.persistent_id = lambda self, o: "\xe9" if o == "x" else (b"raw" if o == "y" else (5 if o == "z" else None))
    elif kind == "persistent_id_noncallable":
        P.persistent_id = 5
    elif kind == "reducer_override_none":
        P.reducer_override = None
    elif kind == "dispatch_table_property_raises":
        P.dispatch_table = property(lambda self: 1 / 0)
    elif kind == "persistent_id_returns_self":
        # (not at protocol 0, where the id is str(obj): an address)
        P.persistent_id = lambda self, o: o if isinstance(o, T.Plain) and p else None
    f = io.BytesIO()
    kw = {}
    if kind == "buffer_callback":
        kw["buffer_callback"] = lambda b: 1 / 0
    if kind == "buffer_callback_bad_return":
        kw["buffer_callback"] = lambda b: Touchy_bool()
    P(f, p, **kw).dump(obj)
    return f.getvalue()


class Touchy_bool:
    def __bool__(self):
        raise RuntimeError("truth value")


HOOK_KINDS = ["persistent_id", "persistent_id_late", "reducer_override", "reducer_override_garbage",
              "reducer_override_self", "dispatch_table_raises", "dispatch_table_keyerror",
              "dispatch_table_not_mapping", "dispatch_table_entry_raises", "persistent_id_nonascii_p0",
              "buffer_callback", "buffer_callback_bad_return", "persistent_id_noncallable",
              "reducer_override_none", "dispatch_table_property_raises", "persistent_id_returns_self"]


def _hook_case(kind):
    def run(m):
        out = []
        protos = [5] if kind.startswith("buffer_callback") else range(6)
        objs = ([1, "x", T.Plain(a=1)], ["y", "z", "x"], pickle.PickleBuffer(b"abc"),
                [pickle.PickleBuffer(bytearray(3))])
        if kind == "reducer_override_self" and ONE_DEEP_DUMP:
            protos, objs = [4], objs[:1]  # the one that recurses to the limit
        for p in protos:
            for obj in objs:
                out.append(pt_impl.outcome(lambda: _hook_run(m, p, kind, obj), m, normalize_addresses=True))
        return out

    run.__name__ = "case_hook_" + kind
    return case(run)


for _k in HOOK_KINDS:
    _hook_case(_k)


# ------------------------------------------------------------ globals ----


class ModuleNone:
    pass


ModuleNone.__module__ = None


class ModuleInt:
    pass


ModuleInt.__module__ = 5


class ModuleMissing:
    pass


ModuleMissing.__module__ = "no_such_module_pt"


def _func_with(module, qualname=None):
    def f():
        pass

    f.__module__ = module
    if qualname:
        f.__qualname__ = qualname
    return f


class ModuleRaises:
    def __reduce__(self):
        return "ModuleRaises"


class _RaisingModuleAttr(type):
    @property
    def __module__(cls):
        raise RuntimeError("__module__ lookup")


@case
def case_global_lookup_hostile(m):
    objs = [ModuleNone, ModuleInt, ModuleMissing, _func_with(None), _func_with(7), _func_with("pt_types", "nope"),
            _func_with("pt_types", "Outer.nope"), _func_with("pt_types", "Outer..method"),
            _func_with("pt_types", "function.<locals>.x"), _func_with("pt_types", ""),
            _func_with("pt_types", "Outer.Inner.method"), _func_with("builtins", "len"),
            _func_with("pt_hostile", "_func_with")]
    out = []
    for p in range(6):
        for obj in objs:
            out.append(pt_impl.outcome(lambda: m.dumps(obj, p), m, normalize_addresses=True))
    return out


@case
def case_global_module_getattr_raises(m):
    import types

    mod = types.ModuleType("pt_evil_module")

    def __getattr__(name):
        raise RuntimeError("module getattr %s" % name)

    mod.__getattr__ = __getattr__
    sys.modules["pt_evil_module"] = mod
    try:
        out = []
        for p in range(6):
            for obj in (_func_with("pt_evil_module", "thing"), _func_with("pt_evil_module", "a.b")):
                out.append(pt_impl.outcome(lambda: m.dumps(obj, p), m, normalize_addresses=True))
        return out
    finally:
        del sys.modules["pt_evil_module"]


@case
def case_sys_modules_hostile(m):
    """whichmodule() walks sys.modules for objects with __module__ None."""
    sys.modules["pt_not_a_module"] = 5
    sys.modules["pt_none_module"] = None
    try:
        out = []
        for p in (0, 2, 4):
            out.append(pt_impl.outcome(lambda: m.dumps(_func_with(None, "f"), p), m, normalize_addresses=True))
            out.append(pt_impl.outcome(lambda: m.dumps(ModuleNone, p), m, normalize_addresses=True))
        return out
    finally:
        del sys.modules["pt_not_a_module"], sys.modules["pt_none_module"]


# --------------------------------------------------- pickler misuse ----


@case
def case_pickler_init_not_called(m):
    out = []
    P = m.Pickler
    out.append(pt_impl.outcome(lambda: P.__new__(P).dump(1), m))
    out.append(pt_impl.outcome(lambda: P.__new__(P).clear_memo(), m))

    class Sub(m.Pickler):
        def __init__(self, *a):
            pass

    out.append(pt_impl.outcome(lambda: Sub(io.BytesIO()).dump([1]), m))
    return out


@case
def case_pickler_init_twice(m):
    out = []
    f1, f2 = io.BytesIO(), io.BytesIO()
    pk = m.Pickler(f1, 2)
    pk.dump([1, 2])
    pk.__init__(f2, 4)
    pk.dump([1, 2])
    out.append((f1.getvalue(), f2.getvalue()))
    return out


class Reenter:
    """__reduce__ calls dump() on the pickler that is pickling it."""

    pickler = None

    def __reduce__(self):
        if Reenter.pickler is not None:
            pk, Reenter.pickler = Reenter.pickler, None
            pk.dump(["inner", 1])
        return (T.rebuild, ())


class Nested:
    """__reduce__ runs a whole separate dumps() (a nested dump)."""

    def __init__(self, m):
        self.m = m

    def __reduce__(self):
        inner = self.m.dumps([Nested2(), "inner"], 4)
        return (T.rebuild, (inner,))


class Nested2:
    def __reduce__(self):
        return (T.rebuild, ())


@case
def case_nested_dumps(m):
    return [pt_impl.outcome(lambda: m.dumps([Nested(m), Nested(m)], p), m) for p in range(6)]


@case
def case_reentrant_same_pickler(m):
    """CPython 3.11's C pickler segfaults here (Pickler.dump called from a
    __reduce__ of the same Pickler): only the implementation runs, and
    any outcome but a crash passes."""
    out = []
    for p in range(6):
        f = io.BytesIO()
        pk = m.Pickler(f, p)
        Reenter.pickler = pk
        o = pt_impl.outcome(lambda: pk.dump([1, Reenter(), "after"]), m)
        out.append((o[0], f.getvalue()))
    return out


REF_CRASHES = {"reentrant_same_pickler"}


@case
def case_clear_memo_during_dump(m):
    out = []
    for p in range(6):
        f = io.BytesIO()
        pk = m.Pickler(f, p)
        shared = ["s"]

        class C:
            def __reduce__(self):
                pk.clear_memo()
                return (T.rebuild, ())

        o = pt_impl.outcome(lambda: pk.dump([shared, C(), shared, shared]), m)
        out.append((o, f.getvalue()))
    return out


@case
def case_memo_replaced_by_write_during_large_str(m):
    """file.write() of a >= 64 KiB str (written outside the frame) assigns
    pickler.memo: the str must be memoized in the new memo, as pickle does
    (not into the freed table)."""
    out = []
    for p in range(6):
        pk = None

        class F(io.BytesIO):
            def write(self, b):
                if len(b) > 60000:
                    pk.memo = {}
                return super().write(b)

        f = F()
        pk = m.Pickler(f, p)
        big = "x" * 100000
        o = pt_impl.outcome(lambda: pk.dump([big, big, [big]]), m)
        out.append((o, f.getvalue()))
    return out


@case
def case_fast_mode_cycles(m):
    out = []
    for p in range(6):
        def run(obj):
            pk = m.Pickler(io.BytesIO(), p)
            pk.fast = True
            pk.dump(obj)

        lst = [1]
        lst.append(lst)
        d = {}
        d["d"] = d
        deep = [[[[[[[[[[[]]]]]]]]]]] * 3
        out.append(pt_impl.outcome(lambda: run(lst), m, normalize_addresses=True))
        out.append(pt_impl.outcome(lambda: run(d), m, normalize_addresses=True))
        out.append(pt_impl.outcome(lambda: run(deep), m, normalize_addresses=True))
        import graphgen
        out.append(pt_impl.outcome(lambda: run(graphgen.deep("list", 200)), m, normalize_addresses=True))
    return out


@case
def case_threads(m):
    """Four threads pickle at once; __reduce__ switches threads mid-dump."""
    import threading
    import time

    class Yield:
        def __init__(self, i):
            self.i = i

        def __reduce__(self):
            time.sleep(0.0005)
            return (T.rebuild, (self.i,))

    objs = [[Yield(i), {"k": [Yield(j) for j in range(20)]}, "t%d" % i] for i in range(4)]
    results = {}

    def work(i):
        results[i] = [m.dumps(objs[i], p) for p in range(6) for _ in range(5)]

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return [results[i] for i in range(4)]


class StrRaises(Exception):
    def __str__(self):
        raise RuntimeError("__str__ of the exception")


class StrNotStr(Exception):
    def __str__(self):
        return 5


class StrHuge(Exception):
    def __str__(self):
        return "\x00\udc80" + "m" * 3_000_000


class ReprRaisesObj:
    """Unpicklable object whose repr and str raise (error messages and
    the trace's error path must not call them or must survive it)."""

    def __repr__(self):
        raise RuntimeError("repr")

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("cannot pickle ReprRaisesObj")


@case
def case_exception_str_hostile(m):
    out = []
    for exc in (StrRaises("x"), StrNotStr("y"), StrHuge("z")):
        for p in (0, 2, 4, 5):
            out += each_protocol(m, lambda: [{"k": RaisingReduce(exc)}], protocols=[p])
    out += each_protocol(m, lambda: {"a": [ReprRaisesObj()]})
    return out


# -------------------------------------------------- error paths ----


def _path_objects():
    """Unpicklable objects at the end of long, odd paths: deep nesting with
    long keys (the path passes the trace's 1000-byte string limit), keys
    with control characters and lone surrogates, bytes/tuple/None/instance
    keys, a far list index, slots, reduce args and state."""
    lam = T.LAMBDA
    deep = lam
    for i in range(300):
        deep = {"k" * 50 + str(i): deep}
    far = list(range(FAR_INDEX)) + [lam]
    odd = {"\x00\n\x1b[31m": {"\udc80\ud800": {b"\xff": {(1, "t"): {None: {T.Plain(): [lam]}}}}}}
    slotted = T.Slotted(a=[1, {"x": lam}])
    state = T.GetState(({"a": 1}, {"slot": lam}))
    args = T.Reduce((T.rebuild, (1, [lam])))
    listitems = T.Reduce((T.ListLike, (), None, [1, 2, lam]))
    dictitems = T.Reduce((T.DictLike, (), None, None, [("ok", 1), ("bad", lam)]))
    setitem = {frozenset([1]), (2, T.make_local_instance())}
    return [deep, far, odd, slotted, state, args, listitems, dictitems, setitem,
            T.Plain(items=[{"k": T.make_local_function()}])]


@case
def case_unserializable_paths(m):
    out = []
    for p in range(6):
        for obj in _path_objects():
            out.append(pt_impl.outcome(lambda: m.dumps(obj, p), m, normalize_addresses=True))
    return out


# --------------------------------------------------------------- main ----


def _jsonable(x):
    if isinstance(x, (bytes, bytearray)):
        return {"hex": bytes(x).hex()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(i) for i in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


def _mapped_bytes():
    """Address space the process has mapped now (/proc/self/statm, pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def main(names):
    for name in names:
        run_case(name)
    assert pickle.loads(pt_impl.impl.dumps([1, "alive", (2.5, None)], 5)) == [1, "alive", (2.5, None)]
    gc.collect()
    print("alive")


def run_case(name):
    if SUBPROCESS_ENV.get(name) == "rlimit":
        import resource

        # 256 MiB of address space above what the interpreter has mapped
        # is enough to run out in the pickler; 1 GiB cost 3.5 s of CPU
        # (zeroing and copying pages) for the same outcome.
        limit = _mapped_bytes() + (256 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    fn = CASES[name]
    for label, mod in (("ref", pt_impl.ref), ("impl", pt_impl.impl)):
        if label == "ref" and name in REF_CRASHES:
            sys.stdout.write(json.dumps({"case": name, label: "not run: crashes CPython"}) + "\n")
            continue
        try:
            res = fn(mod)
        except BaseException as e:  # noqa: BLE001 -- the case itself escaped
            res = ("case raised", pt_impl.exc_key(e, mod), pt_impl.ADDR.sub("0x?", str(e)))
        gc.collect()
        sys.stdout.write(json.dumps({"case": name, label: _jsonable(res)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
