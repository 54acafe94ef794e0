"""Importable module-level types and functions for the pickle tests.

graphgen.py builds object graphs out of these so that every class and
function can be pickled by reference (module ``pt_types``), and every
__reduce__ / __reduce_ex__ / __getstate__ / copyreg form that the C pickler
handles has at least one class that produces it.  Each class keeps its
behaviour in plain attributes so a generated instance fully determines what
its reduce methods return (no randomness here: graphgen owns the seeds).

Reduce methods build fresh iterators on every call, so the same instance
can be pickled by the reference pickler and by sertrace one after the other.
"""

import copyreg
import dataclasses
import enum
import collections


# -- plain instances ---------------------------------------------------------


class Plain:
    """Instance with a __dict__ (the default reduce: copyreg.__reduce_ex__
    below protocol 2, object.__reduce_ex__ / NEWOBJ from 2)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


class Empty:
    """Instance with an empty __dict__ (no BUILD at protocol >= 2)."""


class Slotted:
    __slots__ = ("a", "b", "c")

    def __init__(self, a=None, b=None, c=None, unset=()):
        self.a, self.b, self.c = a, b, c
        for name in unset:
            delattr(self, name)


class SlottedWithDict:
    __slots__ = ("x", "__dict__")

    def __init__(self, x=None, **kw):
        self.x = x
        self.__dict__.update(kw)


class SlottedChild(Slotted):
    __slots__ = ("d",)

    def __init__(self, d=None, **kw):
        super().__init__(**kw)
        self.d = d


class GetState:
    """__getstate__ returns whatever `state` holds (dict, tuple, None,
    another object ...); __setstate__ exists so the state is accepted."""

    def __init__(self, state):
        self.state_value = state

    def __getstate__(self):
        return self.state_value

    def __setstate__(self, state):
        self.state_value = state


class GetNewArgs:
    def __init__(self, *args):
        self.args = args

    def __new__(cls, *args):
        return super().__new__(cls)

    def __getnewargs__(self):
        return self.args


class GetNewArgsEx:
    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __getnewargs_ex__(self):
        return self.args, self.kwargs


# -- explicit __reduce__ forms ---------------------------------------------


def rebuild(*args):
    return args


def set_state(obj, state):
    """State setter (6th item of a reduce tuple)."""
    obj.__dict__["state"] = state


class Reduce:
    """__reduce__ returns `self.rv` with iterators made fresh: items 4 and 5
    (listitems/dictitems) are stored as lists and turned into iterators at
    each call.  `self.rv` is a tuple of 2..6 items; graphgen fills it."""

    def __init__(self, rv):
        self.rv = rv

    def __reduce__(self):
        rv = list(self.rv)
        if len(rv) > 3 and isinstance(rv[3], list):
            rv[3] = iter(rv[3])
        if len(rv) > 4 and isinstance(rv[4], list):
            rv[4] = iter(rv[4])
        return tuple(rv)


class ReduceEx:
    """__reduce_ex__ that depends on the protocol."""

    def __init__(self, value):
        self.value = value

    def __reduce_ex__(self, protocol):
        if protocol >= 2:
            return (copyreg.__newobj__, (ReduceEx,), {"value": self.value, "p": protocol})
        return (ReduceEx, (self.value,))


class ListLike:
    """Target of listitems (needs append/extend only when unpickling)."""

    def __init__(self):
        self.items = []

    def append(self, x):
        self.items.append(x)

    def extend(self, xs):
        self.items.extend(xs)


class DictLike(dict):
    pass


class Singleton:
    """__reduce__ returns a string: pickled as the global of that name."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return self.name


SINGLETON = Singleton("SINGLETON")


class Outer:
    """Nested classes: qualnames with dots."""

    class Inner:
        class Deeper:
            def method(self):
                return 1

        def __init__(self, v=None):
            self.v = v

        def method(self):
            return 2

    NESTED_SINGLETON = Singleton("Outer.NESTED_SINGLETON")

    def method(self):
        return 3

    @classmethod
    def cmethod(cls):
        return 4

    @staticmethod
    def smethod():
        return 5


Outer.NESTED_SINGLETON = Singleton("Outer.NESTED_SINGLETON")


# -- copyreg registrations -------------------------------------------------


class Registered:
    """Reduced by a copyreg.pickle() registration, not by its methods."""

    def __init__(self, v):
        self.v = v


def reduce_registered(obj):
    return (Registered, (obj.v,))


copyreg.pickle(Registered, reduce_registered)


class RegisteredString:
    def __init__(self):
        pass


def reduce_registered_string(obj):
    return "REGISTERED_STRING"


REGISTERED_STRING = RegisteredString()
copyreg.pickle(RegisteredString, reduce_registered_string)


# Functions given copyreg extension codes by a test fixture (EXT1/2/4).
def ext_one():
    return 1


def ext_two():
    return 2


def ext_four():
    return 4


class ExtClass:
    pass


EXTENSIONS = [
    ("pt_types", "ext_one", 0x7F),
    ("pt_types", "ext_two", 0x1234),
    ("pt_types", "ext_four", 0x123456),
    ("pt_types", "ExtClass", 0xFF),
]


def add_extensions():
    for mod, name, code in EXTENSIONS:
        copyreg.add_extension(mod, name, code)


def remove_extensions():
    for mod, name, code in EXTENSIONS:
        copyreg.remove_extension(mod, name, code)


# -- other module-level things ----------------------------------------------


def function(x=1):
    return x


async def coroutine_function():
    pass


LAMBDA = lambda x: x  # noqa: E731  -- qualname '<lambda>': not picklable


def make_local_function():
    def local(y):
        return y

    return local


def make_local_instance():
    class Local:
        pass

    return Local()


@dataclasses.dataclass
class Data:
    a: object = None
    b: object = None


@dataclasses.dataclass(frozen=True)
class FrozenData:
    a: object = None


class Color(enum.Enum):
    RED = 1
    GREEN = "g"


class Flag(enum.IntFlag):
    A = 1
    B = 2


Point = collections.namedtuple("Point", "x y")


class ListSub(list):
    pass


class DictSub(dict):
    pass


class TupleSub(tuple):
    pass


class SetSub(set):
    pass


class FrozenSub(frozenset):
    pass


class StrSub(str):
    pass


class IntSub(int):
    pass


class FloatSub(float):
    pass


class BytesSub(bytes):
    pass


class ListSubAttrs(list):
    def __init__(self, *a):
        super().__init__(*a)
        self.attr = "x"


class Error(Exception):
    pass


class Meta(type):
    pass


class WithMeta(metaclass=Meta):
    pass


class ReduceArgsSelf:
    """Reduce whose state refers back to the object (a cycle through BUILD)."""

    def __init__(self):
        self.me = self


# Reduce that builds an object by reference to a method (getattr reduce).
BOUND = Outer.Inner(7).method
