"""Trace pure-Python picklers (dill.Pickler, pickle._Pickler, subclasses) with sertrace.

dill and the pure-Python ``pickle._Pickler`` write their output in Python, so
sertrace cannot instrument a C save loop for them.  Instead, this module puts
a small C hook (``sertrace._pyhook``) around a pickler class's ``dump``,
without editing the class's code.  When a listener is active, that hook
shadows the pickler's ``save`` and ``write`` with C callables for the
duration of the dump:

- every object the pickler saves becomes a node of the sertrace tree, with
  the exact number of bytes it added to the output, counted on the pickler's
  own write path (never ``file.tell()``: pipes and sockets work);
- objects dill tags in its own tracer keep dill's tag (``D2``, ``T4``,
  ``F1``, ``F2``, ``Co``, ``Ce1`` ...), read from dill's trace calls without
  formatting anything; the rest get sertrace's tags (``L``, ``Tu``, ``O``,
  ``Mo`` ...);
- an object that cannot be pickled raises the pickler's own exception, with
  exception notes giving where it sat (``when serializing list item 5`` ...,
  as CPython 3.14's pickle does) and one sertrace error event with the path.

Nothing is printed or recorded unless a listener is active: ``DISPATCH_TRACE``
(live text tree) or an LTTng session with ``sertrace:*`` enabled.  Without a
listener a hooked ``dump`` costs one extra C call per dump and nothing per
object.

Usage::

    import sertrace.dill
    sertrace.dill.install()          # hook dill.Pickler (now or when dill is
                                     # imported) and pickle._Pickler
    dill.dumps(state)                # traced when DISPATCH_TRACE is set

    sertrace.dill.trace_class(MyPickler)      # any pickle._Pickler subclass
    with sertrace.dill.traced(MyPickler):     # hooked only inside the block
        MyPickler(f).dump(obj)

``python3 -m sertrace run`` calls :func:`install` for you.
"""

import importlib.abc
import importlib.util
import pickle
import sys
import threading

from . import _bind

from . import _pyhook

__all__ = ["install", "uninstall", "trace_class", "untrace_class", "traced", "is_traced",
           "untraced_classes"]

_lock = threading.RLock()
_hooked = []          # classes hooked by install()
_finder = None        # import hook waiting for dill
_logger_module = None  # dill._dill, whose `logger` we replaced
_logger_saved = None


def _default_name(cls):
    if _is_dill_class(cls):
        return "dill"
    if cls is pickle._Pickler:
        return "pickle._Pickler"
    return cls.__qualname__


def _is_dill_class(cls):
    dill_mod = sys.modules.get("dill._dill")
    return dill_mod is not None and isinstance(cls, type) and issubclass(cls, dill_mod.Pickler)


def _wrap_dill_logger():
    """Replace dill._dill.logger by a C proxy that hands dill's tags to sertrace.

    The proxy forwards every call to dill's adapter, except the trace calls of
    a dump that sertrace is tracing (and even those when dill's own tracer is
    also on), so dill.detect.trace keeps working.
    """
    global _logger_module, _logger_saved
    dill_mod = sys.modules.get("dill._dill")
    if dill_mod is None or _logger_module is not None:
        return
    current = getattr(dill_mod, "logger", None)
    if current is None or not hasattr(current, "trace"):
        return
    _logger_saved = current
    dill_mod.logger = _pyhook.wrap_logger(current)
    _logger_module = dill_mod


def _unwrap_dill_logger():
    global _logger_module, _logger_saved
    if _logger_module is not None:
        if isinstance(_logger_module.logger, _pyhook.LoggerProxy):
            _logger_module.logger = _logger_saved
        _logger_module = None
        _logger_saved = None


def trace_class(cls, name=None):
    """Hook ``cls.dump`` so that sertrace traces the dumps of ``cls`` and its subclasses.

    ``cls`` is a pickler class shaped like ``pickle._Pickler`` (a ``write``
    attribute set per instance, and optionally a protocol-4 ``framer``):
    ``dill.Pickler``, ``pickle._Pickler`` or a subclass.  Subclasses inherit
    the hooks.  ``name`` is the serializer name of its dumps (default
    ``"dill"`` for dill picklers, else the class name).  Idempotent.  For a
    dill class, dill's logger is also wrapped so dill's tags reach sertrace.
    """
    if not isinstance(cls, type):
        raise TypeError("trace_class() needs a class, not %r" % type(cls).__name__)
    with _lock:
        _pyhook.hook_class(cls, name or _default_name(cls))
        if _is_dill_class(cls) or "dill._dill" in sys.modules:
            _wrap_dill_logger()
    return cls


def untrace_class(cls):
    """Remove the hooks :func:`trace_class` put in ``cls``; returns whether there were any."""
    with _lock:
        return _pyhook.unhook_class(cls)


def is_traced(cls):
    """True when ``cls`` itself (not only a base class) carries sertrace hooks."""
    return _pyhook.is_hooked(cls)


def untraced_classes():
    """``{class: reason}`` for hooked pickler classes whose dumps ran untraced.

    A pickler the hooks cannot follow (a class-level ``write`` instead of one
    set per instance as ``pickle._Pickler`` does, ``__slots__`` without
    ``__dict__``, its own ``__setattr__``, no ``save``) is seen before its
    dump begins: the dump runs untouched and leaves nothing in the trace
    (it is not reported as a failed dump).  Each such class is recorded here
    once, with the reason.
    """
    return _pyhook.untraced()


class traced:
    """Context manager: ``cls`` is traced inside the block only (if it was not before)."""

    def __init__(self, cls, name=None):
        self.cls = cls
        self.name = name
        self._added = False

    def __enter__(self):
        if not is_traced(self.cls):
            trace_class(self.cls, self.name)
            self._added = True
        return self.cls

    def __exit__(self, *exc):
        if self._added:
            untrace_class(self.cls)
            self._added = False
        return False


class _DillFinder(importlib.abc.MetaPathFinder):
    """Hooks dill.Pickler right after the program imports dill."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "dill":
            return None
        with _lock:
            _bind.drop_finder(self)
            spec = importlib.util.find_spec("dill")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module, _real=real_exec):
            _real(module)
            _hook_dill()

        spec.loader.exec_module = exec_module
        return spec


def _hook_dill():
    dill_mod = sys.modules.get("dill._dill")
    if dill_mod is None:
        return False
    with _lock:
        if not is_traced(dill_mod.Pickler):
            trace_class(dill_mod.Pickler, "dill")
            _hooked.append(dill_mod.Pickler)
        _wrap_dill_logger()
    return True


def install(pure_pickle=True):
    """Trace dill's Pickler (and, with ``pure_pickle``, ``pickle._Pickler``).

    If dill is already imported it is hooked now; otherwise an import hook
    hooks it the moment the program imports it, so calling install() costs
    no dill import.  Idempotent.  This is what ``python3 -m sertrace run``
    calls.  Returns the list of classes hooked so far.
    """
    global _finder
    with _lock:
        if pure_pickle and not is_traced(pickle._Pickler):
            trace_class(pickle._Pickler, "pickle._Pickler")
            _hooked.append(pickle._Pickler)
        if "dill._dill" in sys.modules:
            _hook_dill()
        elif _finder is None:
            _finder = _DillFinder()
            sys.meta_path.insert(0, _finder)
        return list(_hooked)


def uninstall():
    """Undo :func:`install`: remove its hooks, dill's logger proxy and the import hook."""
    global _finder
    with _lock:
        _finder = _bind.drop_finder(_finder)
        while _hooked:
            untrace_class(_hooked.pop())
        _unwrap_dill_logger()
