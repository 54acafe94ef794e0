"""install() after the program already took pickle's names: point them at the traced ones.

`sertrace.install()` replaces `pickle.dump`, `pickle.dumps` and `pickle.Pickler`.  Code that ran
before it may hold the originals under other names, and would stay untraced:

- `from pickle import dumps` (or `dump`, `Pickler`) in a module: a module global bound to the
  C original (`shelve` does it, cloudpickle's `compat.Pickler`, a program's own modules);
- a class built on the C `pickle.Pickler` at import time: multiprocessing's `ForkingPickler`
  (every Pool, Queue and Connection pickles with it), `cloudpickle.CloudPickler`, a program's
  own subclass.  A class cannot change its C base afterwards (the layouts differ).

`rebind()` makes install() late give what install() early gives, for every name bound at
module level or in the dict of a class defined in a module: each such name bound to one of
the three originals is pointed at sertrace's, and each bound to a subclass of the C Pickler
gets a *twin*: the same class (same name, module, qualname, attributes, methods, the very
same class-level objects such as ForkingPickler's shared `_extra_reducers` registry) built
on sertrace.Pickler instead; methods that use zero-argument `super()` are copied with their
`__class__` cell pointing at the twin.  Everything rebound is recorded, and `restore()` puts
back exactly what is still ours.

What it cannot reach stays untraced, and is said once per name with a RuntimeWarning
(`warn_untraced`): a Pickler subclass that cannot be rebuilt (a metaclass of its own,
`__slots__`, an `__init_subclass__` that would run again), and references held elsewhere
than in module or class dicts (a default argument, a closure, an instance created before
install()) are not searched.

No user code runs: values are compared by identity and classes tested with type(v), never
through `isinstance` on arbitrary objects (a proxy's `__class__` could run code), and dicts
are read directly.
"""
import os
import sys
import types
import warnings

_FUNCTION = types.FunctionType
_MODULE = types.ModuleType
_module_dict = _MODULE.__dict__["__dict__"].__get__
_type_dict = type.__dict__["__dict__"].__get__
_type_setattr = type.__setattr__

# (container, key, old, new): container is a module dict or a class.
_rebound = []
# id(original class) -> (original, twin); the original is kept alive so ids stay unique.
_twins = {}
_warned = set()

# Modules whose names must keep the originals: pickle itself (install() handles it),
# the C module, and sertrace's own.
_SKIP_PREFIXES = ("sertrace.",)
_SKIP = {"pickle", "_pickle", "sertrace"}


class _CannotTwin(Exception):
    pass


def _reclass_function(f, old, new):
    """f itself, or a copy whose zero-argument super() (`__class__` cell) sees `new`."""
    code = f.__code__
    if "__class__" not in code.co_freevars:
        return f
    i = code.co_freevars.index("__class__")
    cell = f.__closure__[i]
    try:
        if cell.cell_contents is not old:
            return f
    except ValueError:  # empty cell
        return f
    closure = list(f.__closure__)
    closure[i] = types.CellType(new)
    g = _FUNCTION(code, f.__globals__, f.__name__, f.__defaults__, tuple(closure))
    g.__kwdefaults__ = f.__kwdefaults__
    g.__qualname__ = f.__qualname__
    g.__doc__ = f.__doc__
    g.__module__ = f.__module__
    g.__annotations__ = f.__annotations__
    g.__dict__.update(f.__dict__)
    return g


def _reclass(v, old, new):
    t = type(v)
    if t is _FUNCTION:
        return _reclass_function(v, old, new)
    if t is classmethod or t is staticmethod:
        f = v.__func__
        if type(f) is _FUNCTION:
            g = _reclass_function(f, old, new)
            if g is not f:
                return t(g)
        return v
    if t is property:
        parts = [v.fget, v.fset, v.fdel]
        fixed = [(_reclass_function(p, old, new) if type(p) is _FUNCTION else p) for p in parts]
        if any(a is not b for a, b in zip(parts, fixed)):
            return property(*fixed, v.__doc__)
    return v


class Binder:
    """One rebinding pass: the three originals and their traced replacements."""

    def __init__(self, orig_dump, orig_dumps, orig_pickler, dump, dumps, pickler):
        self.orig_pickler = orig_pickler
        self.pickler = pickler
        self.direct = {id(orig_dump): dump, id(orig_dumps): dumps, id(orig_pickler): pickler}
        # Every object a name could be rebound from, by id: the three originals and the
        # subclasses of the C Pickler that exist now (from the type's own subclass list).
        # Looking names up by id keeps the scan cheap (no call per value).
        self.keep = [orig_dump, orig_dumps, orig_pickler]
        todo = [orig_pickler]
        while todo:
            for sub in type.__subclasses__(todo.pop()):
                if not issubclass(sub, pickler) and sub not in self.keep:
                    self.keep.append(sub)
                    todo.append(sub)
        self.ids = {id(o) for o in self.keep}

    def replacement(self, v):
        """The traced stand-in for v (one of self.keep), or None."""
        new = self.direct.get(id(v))
        if new is not None:
            return new
        return self.twin(v)

    def twin(self, cls):
        """cls rebuilt on sertrace.Pickler, or None (warned) when it cannot be."""
        got = _twins.get(id(cls))
        if got is not None:
            return got[1]
        try:
            new = self._build(cls)
        except _CannotTwin as e:
            warn_untraced("%s.%s" % (cls.__module__, cls.__qualname__),
                          "a subclass of the C pickle.Pickler created before sertrace.install(),"
                          " which cannot rebuild it on the traced Pickler (%s)" % e)
            return None
        _twins[id(cls)] = (cls, new)
        return new

    def _build(self, cls):
        if type(cls) is not type:
            raise _CannotTwin("it has the metaclass %s" % type(cls).__qualname__)
        own = _type_dict(cls)
        if "__slots__" in own:
            raise _CannotTwin("it defines __slots__")
        for b in cls.__mro__[1:]:
            if b is not object and "__init_subclass__" in _type_dict(b):
                raise _CannotTwin("%s defines __init_subclass__" % b.__qualname__)
        bases = []
        for b in cls.__bases__:
            if b is self.orig_pickler:
                bases.append(self.pickler)
            elif issubclass(b, self.orig_pickler):
                tb = self.twin(b)
                if tb is None:
                    raise _CannotTwin("its base %s cannot be rebuilt" % b.__qualname__)
                bases.append(tb)
            else:
                bases.append(b)
        ns = {k: v for k, v in own.items() if k not in ("__dict__", "__weakref__")}
        ns["__qualname__"] = cls.__qualname__
        try:
            new = type(cls.__name__, tuple(bases), ns)
        except TypeError as e:
            raise _CannotTwin(str(e)) from None
        for k, v in ns.items():
            v2 = _reclass(v, cls, new)
            if v2 is not v:
                _type_setattr(new, k, v2)
        return new

    def run(self):
        """Rebind every module-level and class-level name found; returns how many."""
        ids = self.ids
        count = 0
        seen = set()
        plain_meta = {type: True}
        for name, mod in list(sys.modules.items()):
            if type(mod) is not _MODULE and not issubclass(type(mod), _MODULE):
                continue
            if name in _SKIP or name.startswith(_SKIP_PREFIXES):
                continue
            try:
                d = _module_dict(mod)
            except Exception:
                continue
            # set(map(id, ...)) runs in C: the common case (no hit) costs no Python loop.
            hits = ids.intersection(map(id, d.values()))
            for k in ([k for k, v in d.items() if id(v) in hits] if hits else ()):
                v = d[k]
                new = self.replacement(v)
                if new is not None:
                    d[k] = new
                    _rebound.append((d, k, v, new))
                    count += 1
            # Class-level names (multiprocessing's AbstractReducer.ForkingPickler): the
            # dicts of the classes these modules hold, each class once.
            for v in list(d.values()):
                t = type(v)
                if t is type:
                    is_cls = True
                else:
                    is_cls = plain_meta.get(t)
                    if is_cls is None:
                        is_cls = plain_meta[t] = (issubclass(t, type)
                                                  and t.__setattr__ is type.__setattr__)
                if is_cls and id(v) not in seen:
                    seen.add(id(v))
                    count += self._rebind_class(v, ids)
        return count

    def _rebind_class(self, cls, ids):
        try:
            cd = _type_dict(cls)
        except Exception:
            return 0
        count = 0
        hits = ids.intersection(map(id, cd.values()))
        for k in ([k for k, v in cd.items() if id(v) in hits] if hits else ()):
            if k.startswith("__") and k.endswith("__"):
                continue
            v = cd[k]
            new = self.replacement(v)
            if new is not None:
                _type_setattr(cls, k, new)
                _rebound.append((cls, k, v, new))
                count += 1
        return count


def rebind(orig_dump, orig_dumps, orig_pickler, dump, dumps, pickler):
    return Binder(orig_dump, orig_dumps, orig_pickler, dump, dumps, pickler).run()


def restore():
    """Put back what rebind() changed, where the name still holds our replacement."""
    while _rebound:
        where, k, old, new = _rebound.pop()
        if type(where) is dict:
            if where.get(k) is new:
                where[k] = old
        elif _type_dict(where).get(k) is new:
            _type_setattr(where, k, old)


def rebound_names():
    """[(place, name)] currently rebound, for tests and diagnostics."""
    out = []
    for where, k, _old, _new in _rebound:
        if type(where) is dict:
            out.append((where.get("__name__", "?"), k))
        else:
            out.append(("%s.%s" % (where.__module__, where.__qualname__), k))
    return out


def warn_untraced(what, why):
    """One RuntimeWarning per name that stays untraced."""
    if what in _warned:
        return
    _warned.add(what)
    # Point the warning at the program's call to install(), whatever our own depth.
    level, f, here = 1, sys._getframe(0), os.path.dirname(__file__)
    while f is not None and os.path.dirname(f.f_code.co_filename) == here:
        f, level = f.f_back, level + 1
    warnings.warn("sertrace: %s is not traced: it is %s. Call sertrace.install() before "
                  "importing it, or run the program with `python3 -m sertrace run`."
                  % (what, why), RuntimeWarning, stacklevel=level)


def drop_finder(finder):
    """Take one of our import finders off ``sys.meta_path`` (nothing happens when it is not
    there, or is None); returns None, so callers write ``_finder = drop_finder(_finder)``.
    Callers hold their own lock."""
    if finder is not None:
        try:
            sys.meta_path.remove(finder)
        except ValueError:
            pass
    return None
