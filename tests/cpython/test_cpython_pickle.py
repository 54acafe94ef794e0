"""CPython's own pickle tests, run against sertrace's C pickler.

CPython tests its C pickler (`_pickle`) with the abstract test classes of
`test.pickletester`, composed into concrete classes by `test.test_pickle`
(`CPicklerTests`, `CPersPicklerTests`, ...).  This module composes the same
classes, of the running interpreter's own test package, with sertrace's
pickling half in place of `_pickle`'s:

    pickling:    sertrace.Pickler, sertrace.dump, sertrace.dumps
    unpickling:  the standard library (`pickle.load`/`loads`/`Unpickler`,
                 i.e. `_pickle`; also `pickle._Unpickler`, as test_pickle's
                 CDumpPickle_LoadPickle does)

so every assertion these tests make about what the C pickler writes, and
about the exceptions (types and messages) it raises, is checked against
sertrace on this version of CPython.  Which abstract classes exist depends on
the version (3.13 adds AbstractPicklingErrorTests, 3.12 HeapTypesTests): a
class is composed when its base exists.

Test methods that CPython's own composition leaves out (set to None in
test_pickle's InMemoryPickleTests: they need a file-like writer) are left out
the same way, read from that class rather than listed here.  Not composed:
the unpickler-only classes (AbstractUnpickleTests: sertrace does not
unpickle), SizeofTests (exact `__sizeof__` of `_pickle`'s C structure) and
CompatPickleTests (`_compat_pickle`'s tables).  Nothing is marked as an
expected failure: a failure here is a difference from `_pickle`.

The test package: Debian's CPython needs `libpython3.11-testsuite`; pyenv and
source builds carry their own.  Without it this module is skipped with that
reason, and pytest, having run nothing, exits with status 5: meson reports
the test as failed (the suite is meant to run CPython's tests), the reason
in its output.
"""

import collections
import io
import pickle
import sys
import unittest

import pytest

import sertrace

try:
    from test import pickletester as pt
    from test import test_pickle as tp
except ImportError as e:  # pragma: no cover - depends on the machine
    pytest.skip("CPython's test package (test.pickletester) is not installed for %s: %s "
                "(Debian: apt-get install libpython%d.%d-testsuite)"
                % ((sys.executable, e) + sys.version_info[:2]), allow_module_level=True)

import _pickle  # noqa: E402  (the reference unpickler, as in test_pickle)


def _file_dumps(self, arg, proto=None, **kwargs):
    """dumps through a Pickler on a BytesIO, as test_pickle's PyPicklerTests."""
    f = io.BytesIO()
    p = self.pickler(f, proto, **kwargs)
    p.dump(arg)
    f.seek(0)
    return bytes(f.read())


def _file_loads(self, buf, **kwds):
    f = io.BytesIO(buf)
    u = self.unpickler(f, **kwds)
    return u.load()


def _left_out_by_cpython(cls_name):
    """The test methods test_pickle sets to None in class cls_name."""
    cls = getattr(tp, cls_name, None)
    if cls is None:
        return {}
    return {name: None for name in dir(cls)
            if name.startswith("test_") and getattr(cls, name) is None}


# -- the module-level API: dump, dumps, Pickler -----------------------------

class SertracePickleModuleTests(pt.AbstractPickleModuleTests, unittest.TestCase):
    dump = staticmethod(sertrace.dump)
    dumps = staticmethod(sertrace.dumps)
    load = staticmethod(pickle.load)
    loads = staticmethod(pickle.loads)
    Pickler = sertrace.Pickler
    Unpickler = pickle.Unpickler


# -- what the pickler writes, through a Pickler on a file -------------------

class SertracePicklerTests(pt.AbstractPickleTests, unittest.TestCase):
    """test_pickle.CPicklerTests with sertrace.Pickler."""
    pickler = sertrace.Pickler
    unpickler = _pickle.Unpickler
    dumps = _file_dumps
    loads = _file_loads


class SertraceDumpPyLoadTests(SertracePicklerTests):
    """test_pickle.CDumpPickle_LoadPickle: read back by the pure-Python unpickler."""
    unpickler = pickle._Unpickler


# -- through sertrace.dumps (no file), as test_pickle.InMemoryPickleTests ---

SertraceInMemoryPickleTests = type("SertraceInMemoryPickleTests", (
    pt.AbstractPickleTests, pt.BigmemPickleTests, unittest.TestCase), dict(
    __doc__="test_pickle.InMemoryPickleTests' pickling half with sertrace.dumps.",
    __module__=__name__,
    dumps=lambda self, arg, protocol=None, **kwargs: sertrace.dumps(arg, protocol, **kwargs),
    loads=lambda self, buf, **kwds: pickle.loads(buf, **kwds),
    **_left_out_by_cpython("InMemoryPickleTests")))


# -- exceptions (types and messages), 3.13+ ---------------------------------

if hasattr(pt, "AbstractPicklingErrorTests"):
    class SertracePicklingErrorTests(pt.AbstractPicklingErrorTests, unittest.TestCase):
        """test_pickle.CPicklingErrorTests with sertrace.Pickler."""
        pickler = sertrace.Pickler
        dumps = _file_dumps


# -- persistent ids ----------------------------------------------------------

class SertracePersPicklerTests(pt.AbstractPersistentPicklerTests,
                               tp.PersistentPicklerUnpicklerMixin, unittest.TestCase):
    """test_pickle.CPersPicklerTests with sertrace.Pickler."""
    pickler = sertrace.Pickler
    unpickler = _pickle.Unpickler


class SertraceIdPersPicklerTests(tp.PyIdPersPicklerTests):
    """test_pickle.CIdPersPicklerTests with sertrace.Pickler (this brings
    test_pickle's own methods: reference cycles, the dispatch_table set
    before __init__, super().persistent_id)."""
    pickler = sertrace.Pickler
    unpickler = _pickle.Unpickler
    persistent_load_error = _pickle.UnpicklingError


# -- the Pickler object: memo, clear_memo, reuse, attributes -----------------

class SertracePicklerUnpicklerObjectTests(pt.AbstractPicklerUnpicklerObjectTests,
                                          unittest.TestCase):
    pickler_class = sertrace.Pickler
    unpickler_class = _pickle.Unpickler


# -- dispatch_table and reducer_override -------------------------------------

class SertraceDispatchTableTests(pt.AbstractDispatchTableTests, unittest.TestCase):
    pickler_class = sertrace.Pickler

    def get_dispatch_table(self):
        return pickle.dispatch_table.copy()


class SertraceChainDispatchTableTests(pt.AbstractDispatchTableTests, unittest.TestCase):
    pickler_class = sertrace.Pickler

    def get_dispatch_table(self):
        return collections.ChainMap({}, pickle.dispatch_table)


class SertracePicklerHookTests(pt.AbstractHookTests, unittest.TestCase):
    class CustomSertracePickler(sertrace.Pickler, pt.AbstractCustomPicklerClass):
        pass
    pickler_class = CustomSertracePickler


# -- the Pickler type and its memo proxy are GC'd, immutable heap types, 3.12+ --

if hasattr(tp, "HeapTypesTests"):
    class SertraceHeapTypesTests(tp.HeapTypesTests):
        """test_pickle.HeapTypesTests on sertrace's types (the unpickler's
        are the standard library's)."""

        def setUp(self):
            self._types = (sertrace.Pickler, type(sertrace.Pickler(io.BytesIO()).memo))
