"""Trace the multiprocessing children a traced program starts with spawn or forkserver.

A forked child inherits its parent's memory, install() included.  A child started with
`spawn` or `forkserver` is a new interpreter: `python3 -c 'from multiprocessing.spawn
import spawn_main; ...'` (spawn), or a fork of a fork server started that way.  Nothing of
the parent's install() is in it, and its `ForkingPickler` (which pickles every result the
child sends back) is built on the C `_pickle.Pickler` before any code of ours could run.

How the child gets traced: both start methods send the child, first thing, the dict of
`multiprocessing.spawn.get_preparation_data()` (sys.path, argv, cwd, how to import the main
module), which the child unpickles and then applies with `spawn.prepare()` before it imports
the main module and unpickles the process object.  While installed, sertrace wraps
`get_preparation_data` to add one entry, `"sertrace"`, whose unpickling runs install() in the
child (prepare() ignores keys it does not know; forkserver's own start keeps only
`main_path` and `sys_path`, so the fork server itself is left alone).  install() then
rebinds the names already bound to the C pickler (`_bind.py`: ForkingPickler in
multiprocessing.reduction, .connection, .queues ...), and the child's main module, imported
after, sees the traced pickle like the parent's.  No environment variable, no `.pth` file,
no change to the command line; untraced runs (no install()) are not touched at all, and a
program that never imports multiprocessing.spawn never has it imported for it (an import
hook wraps it when the program imports it).

The entry unpickles as `exec` of the fixed bootstrap below, not as a reference to a sertrace
function: the child unpickles it before prepare() sets sys.path, so if the child cannot
import sertrace from its own path (the parent found it through a sys.path change of its
own), the bootstrap tries the parent's sertrace directory and, failing that, says so on
stderr and lets the child run untraced.  A child must never die of being traced (a Pool
would restart it forever).
"""
import importlib.abc
import importlib.util
import os
import sys
import threading

from . import _bind

_lock = threading.RLock()
# The modules whose get_preparation_data() starts such children: multiprocessing's, and
# loky's (joblib.Parallel's default backend, vendored in joblib), which has the same shape
# (its workers unpickle the preparation data, prepare(), then the process object).
SPAWN_MODULES = ("multiprocessing.spawn", "joblib.externals.loky.backend.spawn",
                 "loky.backend.spawn")
_patched = {}        # module name -> (module, original get_preparation_data)
_finder = None       # waits for the program to import those modules

PREP_KEY = "sertrace"

_BOOT = """\
import sys
try:
    import sertrace._run as _m
except ImportError:
    sys.path.insert(0, pkgdir)
    try:
        import sertrace._run as _m
    except ImportError as e:
        _m = None
        sys.stderr.write("sertrace: this multiprocessing child cannot import sertrace "
                         "(%s): it runs untraced\\n" % e)
if _m is not None:
    _m.install_in_child()
"""


class _ChildInstall:
    """The preparation-data entry: unpickled in the child, it installs sertrace there."""

    def __reduce__(self):
        pkgdir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return (exec, (_BOOT, {"pkgdir": pkgdir}))


def _wrap(original):
    def get_preparation_data(name, *args, **kwargs):
        data = original(name, *args, **kwargs)
        data[PREP_KEY] = _ChildInstall()
        return data

    get_preparation_data.__wrapped__ = original
    get_preparation_data.__doc__ = original.__doc__
    get_preparation_data.__sertrace__ = True
    return get_preparation_data


def _patch(name, spawn):
    with _lock:
        if name in _patched:
            return
        current = getattr(spawn, "get_preparation_data", None)
        if current is None or getattr(current, "__sertrace__", False):
            return
        spawn.get_preparation_data = _wrap(current)
        _patched[name] = (spawn, current)


class _SpawnFinder(importlib.abc.MetaPathFinder):
    """Wraps get_preparation_data right after the program imports one of SPAWN_MODULES."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in SPAWN_MODULES or fullname in _busy:
            return None
        with _lock:
            _busy.add(fullname)
            try:
                spec = importlib.util.find_spec(fullname)
            finally:
                _busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module, _real=real_exec, _name=fullname):
            _real(module)
            _patch(_name, module)

        spec.loader.exec_module = exec_module
        return spec


_busy = set()  # names being looked up by the finder itself


def install():
    """Trace spawn/forkserver (and loky) children from now on: now for the modules already
    imported, at import for the others.  Idempotent."""
    global _finder
    with _lock:
        for name in SPAWN_MODULES:
            mod = sys.modules.get(name)
            if mod is not None:
                _patch(name, mod)
        if _finder is None:
            _finder = _SpawnFinder()
            sys.meta_path.insert(0, _finder)


def uninstall():
    """Children started from now on run untraced again."""
    global _finder
    with _lock:
        _finder = _bind.drop_finder(_finder)
        for spawn, original in _patched.values():
            if getattr(spawn.get_preparation_data, "__sertrace__", False):
                spawn.get_preparation_data = original
        _patched.clear()
