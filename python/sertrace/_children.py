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

_lock = threading.RLock()
_patched = None      # (spawn module, original get_preparation_data)
_finder = None       # waits for the program to import multiprocessing.spawn

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


def _patch(spawn):
    global _patched
    with _lock:
        if _patched is not None:
            return
        current = spawn.get_preparation_data
        if getattr(current, "__sertrace__", False):
            return
        spawn.get_preparation_data = _wrap(current)
        _patched = (spawn, current)


class _SpawnFinder(importlib.abc.MetaPathFinder):
    """Wraps multiprocessing.spawn.get_preparation_data right after the program imports it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "multiprocessing.spawn":
            return None
        with _lock:
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module, _real=real_exec):
            _real(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Trace spawn/forkserver children from now on (now, or once multiprocessing.spawn is
    imported).  Idempotent."""
    global _finder
    with _lock:
        spawn = sys.modules.get("multiprocessing.spawn")
        if spawn is not None:
            _patch(spawn)
        elif _finder is None:
            _finder = _SpawnFinder()
            sys.meta_path.insert(0, _finder)


def uninstall():
    """Children started from now on run untraced again."""
    global _patched, _finder
    with _lock:
        if _finder is not None:
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
            _finder = None
        if _patched is not None:
            spawn, original = _patched
            if getattr(spawn.get_preparation_data, "__sertrace__", False):
                spawn.get_preparation_data = original
            _patched = None
