"""Which pickler the pickle tests check, and how outcomes are compared.

The tests compare an implementation under test (`impl`, normally
`sertrace`) with the reference, CPython 3.11's C `pickle`.  The switch
PT_IMPL exists to check the tests themselves:

  PT_IMPL=sertrace (default)  the real thing: sertrace vs pickle
  PT_IMPL=pickle              pickle vs pickle: every test must pass
  PT_IMPL=pypickle            pickle's pure-Python pickler vs the C one:
                              the tests must find its (known) differences,
                              which shows they can fail

An *outcome* of running a pickler is ("ok", bytes, extra) or
("raise", exception class key, message, extra); outcomes of the reference
and of the implementation must be equal.  Exception classes are compared by
key: the pickle module's PickleError/PicklingError map to the
implementation's classes of the same name, anything else by identity.
"""

import io
import os
import pickle
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

IMPL_NAME = os.environ.get("PT_IMPL", "sertrace")

if IMPL_NAME == "sertrace":
    import sertrace as impl  # noqa: E402  (the package under test)
elif IMPL_NAME == "pickle":
    impl = pickle
elif IMPL_NAME == "pypickle":
    impl = types.SimpleNamespace(
        dumps=pickle._dumps,
        dump=pickle._dump,
        Pickler=pickle._Pickler,
        PickleError=pickle.PickleError,
        PicklingError=pickle.PicklingError,
        HIGHEST_PROTOCOL=pickle.HIGHEST_PROTOCOL,
        DEFAULT_PROTOCOL=pickle.DEFAULT_PROTOCOL,
    )
else:
    raise ImportError("PT_IMPL must be sertrace, pickle or pypickle, not %r" % IMPL_NAME)

ref = pickle

ADDR = re.compile(r"0x[0-9a-fA-F]+")


def exc_key(e, module):
    """Class key of exception `e` raised by `module` (impl or ref)."""
    t = type(e)
    for name in ("PicklingError", "PickleError"):
        if t is getattr(module, name, None):
            return "pickle." + name
    return "%s.%s" % (t.__module__, t.__qualname__)


def outcome(fn, module, normalize_addresses=False):
    """Run fn(); return a comparable outcome tuple.

    normalize_addresses: replace 0x... in messages (use when the two runs
    pickle two equal but distinct objects, whose reprs differ)."""
    try:
        value = fn()
    except RecursionError as e:
        # The message's suffix (" while pickling an object", " while calling
        # a Python object" ...) names whichever C function hit the limit,
        # which depends on the stack depth at entry: compare the class only.
        return ("raise", exc_key(e, module), "maximum recursion depth exceeded")
    except Exception as e:  # noqa: BLE001 -- every exception is compared
        return ("raise", exc_key(e, module), _msg(e, normalize_addresses))
    return ("ok", value)


PICKLER_NAMES = sorted({"%s.%s" % (m.Pickler.__module__, m.Pickler.__qualname__)
                        for m in (pickle, impl) if isinstance(m.Pickler, type)}, key=len, reverse=True)


def _msg(e, normalize):
    try:
        s = str(e)
    except Exception as inner:  # noqa: BLE001 -- a hostile __str__
        s = "<str() raised %s>" % type(inner).__name__
    for name in PICKLER_NAMES:  # "_pickle.Pickler" vs "sertrace.Pickler" in messages
        s = s.replace(name, "<Pickler>")
    if isinstance(e, KeyError) and re.fullmatch(r"\d{6,}", s):
        # C pickle's fast mode can raise KeyError(id(temporary object))
        # (fast_save_leave on a reduce value that died); the id is noise.
        return "<object id>"
    return ADDR.sub("0x?", s) if normalize else s


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def describe_bytes(expected, got, context=24):
    """A few lines showing where two payloads part, with pickletools'
    view of the expected one around that point."""
    if not isinstance(expected, (bytes, bytearray)) or not isinstance(got, (bytes, bytearray)):
        return "expected %r\n     got %r" % (_short(expected), _short(got))
    i = first_difference(expected, got)
    lo = max(0, i - context)
    lines = [
        "lengths: expected %d, got %d; first difference at offset %d" % (len(expected), len(got), i),
        "expected[%d:%d] = %r" % (lo, i + context, bytes(expected[lo:i + context])),
        "     got[%d:%d] = %r" % (lo, i + context, bytes(got[lo:i + context])),
    ]
    return "\n".join(lines)


def describe(expected, got):
    if expected[0] == "ok" and got[0] == "ok":
        e, g = expected[1], got[1]
        if isinstance(e, tuple):  # (payload, extra)
            if e[0] != g[0]:
                return describe_bytes(e[0], g[0])
            return "payload equal; extra differs:\n expected %r\n      got %r" % (_short(e[1:]), _short(g[1:]))
        return describe_bytes(e, g)
    return "expected %s\n     got %s" % (_short(expected), _short(got))


def _short(x, limit=600):
    r = repr(x)
    return r if len(r) <= limit else r[:limit] + "...(%d chars)" % len(r)


def dumps_outcome(module, obj, protocol, **kw):
    return outcome(lambda: module.dumps(obj, protocol, **kw), module)


def pickler_outcome(module, obj, protocol, fast=False, **kw):
    def run():
        f = io.BytesIO()
        p = module.Pickler(f, protocol, **kw)
        if fast:
            p.fast = True
        p.dump(obj)
        return f.getvalue()

    return outcome(run, module)


def oob_outcome(module, obj, protocol):
    """dumps with buffer_callback collecting the buffers: compares the
    payload and, for each buffer, (identity, readonly flag, contents)."""

    def run():
        bufs = []
        data = module.dumps(obj, protocol, buffer_callback=bufs.append)
        seen = []
        for b in bufs:
            m = b.raw()
            seen.append((id(b), m.readonly, m.tobytes()))
        return (data, seen)

    return outcome(run, module)
