"""Seeded generator of random object graphs for the differential pickle tests.

    import graphgen
    obj = graphgen.build(seed)          # same seed, same graph (shape and values)

A graph is small (about MAX_NODES objects, plus an occasional large atom)
so that thousands of graphs dump in seconds, and it mixes:
  - atoms at every opcode boundary: ints around 1/2/4/8-byte and LONG1/LONG4
    limits (and past the 4300-digit str limit, which protocols 0-1 reject),
    floats (nan, +-inf, -0.0, subnormals), str (empty, escapes, latin-1,
    BMP, non-BMP, lone surrogates, 255/256-byte and > 64 KiB ones),
    bytes/bytearray of all sizes (0, 255/256, 64 KiB +- 1, 70000)
  - tuples of 0-6 items, lists (incl. 999/1000/1001-item batch limits),
    dicts, sets, frozensets, nesting, shared references, cycles through
    lists, dicts, sets and instances, recursive tuples and frozensets
  - instances with __dict__ and __slots__, every __reduce__ form (2-6
    items, state setter, listitems/dictitems, copyreg.__newobj__ and
    __newobj_ex__, __getstate__ returning dict/tuple/None, string reduce),
    copyreg registrations, extension-coded functions (see
    pt_types.EXTENSIONS; their codes only exist while a fixture installs
    them), classes/functions by reference incl. nested qualnames and names
    that fix_imports rewrites, stdlib objects with their own reducers,
    PickleBuffer (protocol 5), and, rarely, objects pickle refuses.
Everything is deterministic given the seed except set/dict-of-str order
across processes (str hashing is randomized), which does not matter since
both picklers dump the very same object.

Big atoms are module constants, so a large string costs its generation once.
"""

import array
import collections
import copyreg
import datetime
import decimal
import fractions
import functools
import itertools
import math
import os
import pickle
import random
import struct
import sys
import threading
import uuid

import pt_types as T

# Size knobs; the environment overrides are for soak runs (bigger graphs).
MAX_NODES = int(os.environ.get("PT_MAX_NODES", "40"))
MAX_DEPTH = int(os.environ.get("PT_MAX_DEPTH", "7"))

# ---------------------------------------------------------------- atoms ----

INT_BOUNDARIES = []
for _b in (0, 7, 8, 15, 16, 31, 32, 63, 64, 8 * 255, 8 * 256):
    for _d in (-1, 0, 1):
        _v = (1 << _b) + _d if _b else _d
        INT_BOUNDARIES += [_v, -_v]
INT_BOUNDARIES += [0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, -0x80000000, -0x80000001,
                   -128, -129, 127, 128, -32768, -32769, 32767, 32768, 10 ** 100, -(10 ** 100)]
HUGE_INT = 10 ** 5000  # over sys.int_info.str_digits_check_threshold: protocols 0/1 refuse

FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.5, 0.1, -2.5e-7, 1e16, 1e300, -1e308,
          5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 123456789.123, 1.0, -1.0,
          float(2 ** 53), 1e22, 1e-5]

STR_SPECIAL = ["", "a", "\\", "\n", "\r", "\r\n", "\x00", "\x1a", "\x7f", "\x80", "\u0085", "\u2028",
               "\xe9t\xe9", "\u4e2d\u6587", "\U0001f600", "\U0010ffff", "\ud800", "\udfff",
               "\udc80abc", "a\ud83d\ude00b", "\\u1234", "\\x00", "L", "I01\n", "\ufeff", " ",
               "x" * 255, "x" * 256, "\xe9" * 128, "\xe9" * 127 + "x", "\u4e2d" * 85,
               "\U0001f600" * 64, "abc\x00def"]
BIG_STRS = ["a" * 70000, "\xe9" * 40000, "x" * 65535, "y" * 65536, "\u4e2d" * 21846 + "\\" * 10,
            ("\U0001f600\n" * 9000)]
BYTES_SIZES = [0, 1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, 70000]
_rb = random.Random(12345)
BIG_BYTES = {n: _rb.randbytes(n) for n in BYTES_SIZES if n >= 1000}

COMPAT_GLOBALS = []  # (module, name) that fix_imports rewrites, and importable here
for (_m, _n) in list(__import__("_compat_pickle").REVERSE_NAME_MAPPING)[:40]:
    try:
        _obj = getattr(__import__(_m, fromlist=["x"]), _n)
    except Exception:  # noqa: BLE001
        continue
    COMPAT_GLOBALS.append(_obj)

GLOBALS = [len, print, int, str, type, object, dict, list, tuple, set, frozenset, bytes,
           bytearray, type(None), type(Ellipsis), type(NotImplemented), Ellipsis,
           NotImplemented, T.function, T.coroutine_function, T.Plain, T.Outer, T.Outer.Inner,
           T.Outer.Inner.Deeper, T.Outer.method, T.Outer.Inner.method, T.Outer.Inner.Deeper.method,
           T.Outer.smethod, T.Outer.cmethod, T.Meta, T.WithMeta, T.Error, ValueError, copyreg._reconstructor,
           copyreg.__newobj__, functools.reduce, itertools.chain, collections.OrderedDict,
           math.sqrt, struct.pack, T.ext_one, T.ext_two, T.ext_four, T.ExtClass,
           T.SINGLETON, T.Outer.NESTED_SINGLETON, T.REGISTERED_STRING, T.BOUND, str.join,
           [].append.__self__.append, dict.fromkeys, pickle.PickleBuffer, T.Color, T.Color.RED,
           T.Flag.A, T.Flag.A | T.Flag.B, T.Point]

# Objects pickle refuses (with a deterministic message where possible).
_LOCK = threading.Lock()
UNPICKLABLE = [T.LAMBDA, T.make_local_function(), T.make_local_instance(), (i for i in ()),
               _LOCK, sys, memoryview(b"abc")]


class Gen:
    def __init__(self, seed, protocol=None):
        self.seed = seed
        self.protocol = protocol
        self.r = random.Random(seed)
        self.nodes = 0
        self.pool = []  # built objects, for shared references
        self.hpool = []  # hashable built objects
        self.mutables = []  # lists, dicts, sets, instances: where cycles go

    # -- atoms ----------------------------------------------------------
    def int_(self):
        r = self.r
        k = r.random()
        if k < 0.5:
            return r.choice(INT_BOUNDARIES)
        if k < 0.8:
            return r.randint(-300, 300)
        if k < 0.998:
            return r.getrandbits(r.randint(1, 2100)) * r.choice((1, -1))
        return HUGE_INT

    def float_(self):
        r = self.r
        k = r.random()
        if k < 0.5:
            return r.choice(FLOATS)
        if k < 0.8:
            return r.uniform(-1, 1) * 10 ** r.randint(-300, 300)
        return struct.unpack("<d", r.randbytes(8))[0]

    def str_(self):
        r = self.r
        k = r.random()
        if k < 0.4:
            return r.choice(STR_SPECIAL)
        if k < 0.985:
            n = r.choice((1, 3, 8, 20, 60))
            alphabet = r.choice(("abcxyz_ ", "\xe9\xff\x00\n\\", "\u4e2d\u0101\u2028",
                                 "\U0001f600\U00010000a", "\ud800\udc00\udfffz"))
            return "".join(r.choice(alphabet) for _ in range(n))
        return r.choice(BIG_STRS)

    def bytes_(self):
        r = self.r
        n = r.choice(BYTES_SIZES) if r.random() < 0.3 else r.randint(0, 40)
        if n >= 1000:
            return BIG_BYTES[n]
        return r.randbytes(n)

    def atom(self):
        r = self.r
        k = r.randrange(100)
        if k < 4:
            return None
        if k < 8:
            return r.random() < 0.5
        if k < 30:
            return self.int_()
        if k < 42:
            return self.float_()
        if k < 68:
            return self.str_()
        if k < 80:
            return self.bytes_()
        if k < 84:
            return bytearray(self.bytes_())
        if k < 87:
            return complex(self.float_(), self.float_())
        if k < 93:
            return r.choice(GLOBALS)
        if k < 96:
            return r.choice(COMPAT_GLOBALS)
        return self.stdlib()

    def stdlib(self):
        r = self.r
        k = r.randrange(16)
        if k == 0:
            return datetime.datetime(2020, 1, 2, 3, 4, 5, r.randrange(10 ** 6))
        if k == 1:
            return datetime.date(1999, 12, 31)
        if k == 2:
            return datetime.timedelta(seconds=r.randint(-10 ** 6, 10 ** 6))
        if k == 3:
            return decimal.Decimal(r.choice(("1.5", "-0", "NaN", "Infinity", "1e-100")))
        if k == 4:
            return fractions.Fraction(r.randint(-99, 99), r.randint(1, 99))
        if k == 5:
            return uuid.UUID(int=r.getrandbits(128))
        if k == 6:
            return array.array(r.choice("bBhHiIlLqQfd"), [r.randint(0, 100) for _ in range(r.randint(0, 5))])
        if k == 7:
            return range(r.randint(-5, 5), r.randint(5, 50), r.randint(1, 3))
        if k == 8:
            return slice(r.randint(0, 3), None, self.int_())
        if k == 9:
            return functools.partial(T.function, self.int_())
        if k == 10:
            return T.Color.GREEN
        if k == 11:
            return datetime.timezone(datetime.timedelta(hours=r.randint(-12, 12)))
        if k == 12:
            return T.Point(self.int_(), self.str_())
        if k == 13:
            return ValueError(self.str_(), self.int_())
        if k == 14:
            return T.IntSub(self.int_())
        return T.StrSub(self.str_())

    # -- structure -------------------------------------------------------
    def hashable(self, depth):
        r = self.r
        if self.hpool and r.random() < 0.15:
            return r.choice(self.hpool)
        k = r.randrange(10)
        if k < 7 or depth >= MAX_DEPTH:
            v = self.atom()
            try:
                hash(v)
            except TypeError:
                v = self.str_()
        elif k < 9:
            v = tuple(self.hashable(depth + 1) for _ in range(r.randint(0, 3)))
        else:
            v = frozenset(self.hashable(depth + 1) for _ in range(r.randint(0, 3)))
        self.hpool.append(v)
        return v

    def value(self, depth):
        r = self.r
        self.nodes += 1
        if self.pool and r.random() < 0.08:
            return r.choice(self.pool)  # shared reference
        if depth >= MAX_DEPTH or self.nodes >= MAX_NODES or r.random() < (0.1 if depth == 0 else 0.4):
            v = self.atom()
            if r.random() < 0.3:
                self.pool.append(v)
            return v
        k = r.randrange(100)
        if k < 14:
            v = tuple(self.value(depth + 1) for _ in range(r.choice((0, 1, 2, 3, 4, 5, 6))))
        elif k < 30:
            v = self.list_(depth)
        elif k < 44:
            v = self.dict_(depth)
        elif k < 50:
            v = set(self.hashable(depth + 1) for _ in range(r.randint(0, 5)))
            self.mutables.append(v)
        elif k < 54:
            v = frozenset(self.hashable(depth + 1) for _ in range(r.randint(0, 5)))
        elif k < 58:
            v = self.recursive(depth)
        else:
            v = self.instance(depth)
        self.pool.append(v)
        return v

    def list_(self, depth):
        r = self.r
        if r.random() < 0.02:
            n = r.choice((999, 1000, 1001, 2001))
            v = [r.randint(-2, 300) for _ in range(n)]
        else:
            v = [self.value(depth + 1) for _ in range(r.choice((0, 1, 1, 2, 3, 5, 8)))]
        self.mutables.append(v)
        return v

    def dict_(self, depth):
        r = self.r
        if r.random() < 0.02:
            n = r.choice((999, 1000, 1001))
            v = {i: i & 7 for i in range(n)}
        else:
            v = {self.hashable(depth + 1): self.value(depth + 1) for _ in range(r.choice((0, 1, 1, 2, 3, 5)))}
        self.mutables.append(v)
        return v

    def recursive(self, depth):
        """Structures that contain themselves through another object."""
        r = self.r
        k = r.randrange(6)
        if k == 0:  # tuple -> list -> same tuple
            lst = [self.value(depth + 1)]
            t = (self.value(depth + 1), lst)
            lst.append(t)
            return t
        if k == 1:  # tuple nested in tuple, recursive through a list at depth 2
            lst = []
            t = ((lst, self.value(depth + 1)), 1)
            lst.append(t)
            lst.append(t[0])
            return [t, lst]
        if k == 2:  # list containing itself
            lst = [self.value(depth + 1)]
            lst.append(lst)
            return lst
        if k == 3:  # dict containing itself
            d = {"v": self.value(depth + 1)}
            d["self"] = d
            return d
        if k == 4:  # frozenset containing an instance that holds the frozenset
            o = T.Plain()
            fs = frozenset([o, self.hashable(depth + 1)])
            o.fs = fs
            return fs
        o = T.Plain(x=self.value(depth + 1))  # set with an instance that holds the set
        s = {o}
        o.s = s
        return s

    def instance(self, depth):
        r = self.r
        sub = lambda: self.value(depth + 1)  # noqa: E731
        k = r.randrange(30)
        if 6 <= k <= 8 and self.protocol is not None and self.protocol < 2 and r.random() < 0.85:
            k = 0  # slotted instances need protocol >= 2: keep most graphs picklable
        if k < 5:
            v = T.Plain(**{"a%d" % i: sub() for i in range(r.randint(0, 4))})
            if r.random() < 0.2:
                v.me = v
        elif k == 5:
            v = T.Empty()
        elif k == 6:
            v = T.Slotted(sub(), sub(), sub(), unset=r.sample(("a", "b", "c"), r.randint(0, 2)))
        elif k == 7:
            v = T.SlottedWithDict(sub(), y=sub())
        elif k == 8:
            v = T.SlottedChild(d=sub(), a=sub())
        elif k == 9:
            v = T.GetState(r.choice(({"k": sub()}, (sub(), sub()), None, sub(), ({"a": 1}, {"b": sub()}))))
        elif k == 10:
            v = T.GetNewArgs(*[sub() for _ in range(r.randint(0, 3))])
        elif k == 11:
            v = T.GetNewArgsEx(tuple(sub() for _ in range(r.randint(0, 2))), {"kw": sub()} if r.random() < 0.7 else {})
        elif k < 16:
            v = T.Reduce(self.reduce_value(depth))
        elif k == 16:
            v = T.ReduceEx(sub())
        elif k == 17:
            v = T.Registered(sub())
        elif k == 18:
            v = T.Data(sub(), sub())
        elif k == 19:
            v = T.FrozenData(self.hashable(depth + 1))
        elif k == 20:
            v = T.ListSub([sub() for _ in range(r.randint(0, 3))])
        elif k == 21:
            v = T.DictSub({self.hashable(depth + 1): sub() for _ in range(r.randint(0, 3))})
        elif k == 22:
            v = T.TupleSub(sub() for _ in range(r.randint(0, 3)))
        elif k == 23:
            v = T.SetSub(self.hashable(depth + 1) for _ in range(r.randint(0, 3)))
        elif k == 24:
            v = T.FrozenSub(self.hashable(depth + 1) for _ in range(r.randint(0, 3)))
        elif k == 25:
            v = T.ListSubAttrs([sub()])
        elif k == 26:
            v = collections.OrderedDict((self.hashable(depth + 1), sub()) for _ in range(r.randint(0, 3)))
        elif k == 27:
            v = collections.defaultdict(list, {self.hashable(depth + 1): sub()})
        elif k == 28:
            v = collections.deque([sub() for _ in range(r.randint(0, 3))], maxlen=r.choice((None, 5)))
        else:
            v = T.Outer.Inner(sub())
        if not isinstance(v, (tuple, frozenset, T.FrozenData, T.FrozenSub)):
            self.mutables.append(v)
        return v

    def reduce_value(self, depth):
        """A reduce tuple of 2..6 items, every legal form."""
        r = self.r
        sub = lambda: self.value(depth + 1)  # noqa: E731
        k = r.randrange(10)
        if k == 0:
            return (T.rebuild, tuple(sub() for _ in range(r.randint(0, 3))))
        if k == 1:
            return (T.Plain, (), {"s": sub()})
        if k == 2:
            return (T.ListLike, (), None, [sub() for _ in range(r.randint(0, 4))])
        if k == 3:
            return (T.DictLike, (), None, None, [(self.hashable(depth + 1), sub()) for _ in range(r.randint(0, 4))])
        if k == 4:
            return (T.Plain, (), {"s": sub()}, None, None, T.set_state)
        if k == 5:
            return (copyreg.__newobj__, (T.Reduce if r.random() < 0.9 else T.Plain,) + tuple(sub() for _ in range(r.randint(0, 2))), r.choice((None, {"n": sub()})))
        if k == 6:
            return (copyreg.__newobj_ex__, (T.Reduce if r.random() < 0.9 else T.Plain, tuple(sub() for _ in range(r.randint(0, 2))), {"kw": sub()} if r.random() < 0.5 else {}), None)
        if k == 7:
            return (T.ListLike, (), ({"d": sub()}, {"slot": sub()}), [sub()], None, None)
        if k == 8:
            return (getattr, (T.Outer.Inner(1), "method"))
        return (T.Plain, (), None, None, None, None)

    def build(self):
        r = self.r
        if r.random() < 0.01:
            return r.choice(UNPICKLABLE + [[UNPICKLABLE[0]], {"k": [T.Plain(f=UNPICKLABLE[1])]}])
        if r.random() < (0.03 if self.protocol in (None, 5) else 0.003):
            return pickle.PickleBuffer(r.choice((bytearray(self.bytes_()), self.bytes_())))
        if r.random() < 0.35:  # a wider root: more objects meet in one memo / frame
            root = [self.value(1) for _ in range(r.randint(3, 12))]
            self.mutables.append(root)
        else:
            root = self.value(0)
        # cycles: put a reference to some built object (often the root) into a mutable one
        if self.mutables and r.random() < 0.25:
            target = r.choice(self.mutables)
            ref = root if r.random() < 0.5 else r.choice(self.pool or [root])
            try:
                if isinstance(target, list):
                    target.append(ref)
                elif isinstance(target, collections.deque):
                    target.append(ref)
                elif isinstance(target, dict):
                    target["cycle"] = ref
                elif isinstance(target, set):
                    hash(ref)
                    target.add(ref)
                elif hasattr(target, "__dict__"):
                    target.cycle = ref
            except TypeError:
                pass
        if r.random() < (0.05 if self.protocol in (None, 5) else 0.003):
            buf = pickle.PickleBuffer(r.choice((bytearray(self.bytes_()), self.bytes_())))
            root = [root, buf, buf]
        return root


def build(seed, protocol=None):
    """The graph of `seed` (deterministic).  `protocol` only biases the
    mix (fewer objects that the protocol refuses), it is part of the key."""
    return Gen(seed, protocol).build()


def deep(kind, n):
    """`n` levels of nesting of `kind` (list, tuple, dict, instance, mixed),
    built iteratively so any depth can be made."""
    v = None
    for i in range(n):
        if kind == "list":
            v = [v]
        elif kind == "tuple":
            v = (v,)
        elif kind == "dict":
            v = {"k": v}
        elif kind == "instance":
            v = T.Plain(v=v)
        elif kind == "mixed":
            v = ([v], (v,), {"k": v}, T.Plain(v=v))[i % 4]
        else:
            raise ValueError(kind)
    return v


def subobjects(obj, limit=5000):
    """Objects reachable from obj (containers, instance dicts, reduce
    items), breadth first, each once: used to shrink a failing graph."""
    seen = set()
    out = []
    todo = collections.deque([obj])
    while todo and len(out) < limit:
        o = todo.popleft()
        if id(o) in seen:
            continue
        seen.add(id(o))
        out.append(o)
        kids = []
        if isinstance(o, (list, tuple, set, frozenset, collections.deque)):
            kids = list(o)
        elif isinstance(o, dict):
            kids = list(o.keys()) + list(o.values())
        if hasattr(o, "__dict__") and not isinstance(o, type):
            try:
                kids += list(vars(o).values())
            except TypeError:
                pass
        if hasattr(type(o), "__slots__"):
            for s in getattr(type(o), "__slots__", ()):
                if hasattr(o, s) and s != "__dict__":
                    kids.append(getattr(o, s))
        todo.extend(kids)
    return out
