"""Route an unmodified program's pickling through sertrace, and run it as python3 would.

`install()` replaces pickle.dump, pickle.dumps and pickle.Pickler with sertrace's traced,
byte-identical versions; hooks dill's and the pure-Python picklers (`sertrace.dill`); points
the names the program already bound to pickle's originals at the traced ones (`_bind.py`:
`from pickle import dumps`, multiprocessing's ForkingPickler, cloudpickle's CloudPickler
imported before install()); and makes multiprocessing's spawn and forkserver children
install it too (`_children.py`).  `uninstall()` puts back everything it changed.

`python3 -m sertrace run SCRIPT args...` installs, then runs SCRIPT exactly as
`python3 SCRIPT args...` does, in a fresh `__main__` module set up as CPython sets up its own
(same keys, in the same order): `__file__` and the code's `co_filename` absolute (the
working directory joined to the path as given, not normalised), `__loader__` a
SourceFileLoader (SourcelessFileLoader for a .pyc), `__spec__` and `__package__` None,
`__cached__` None, `__builtins__` the builtins module, `__annotations__` {}; `sys.argv` as
given; `sys.path[0]` the script's real directory (symlinks resolved), or nothing with
`-P`/PYTHONSAFEPATH.  A directory or zip file runs its `__main__.py` as python3 does.
`run -m MODULE args...` runs MODULE as `python3 -m MODULE args...` does, through the same
runpy entry point CPython uses for -m.  So what a program computes from its own file names
(cloudpickle's bytes for a function, a stored code location) is the same with and without
sertrace.

An exception that escapes the program is printed by sys.excepthook without sertrace's and
runpy's frames of the outer `-m sertrace` (the traceback starts where python3's would), and
exits as python3 would (1, or by SIGINT for KeyboardInterrupt); SystemExit passes through.
"""
import builtins
import importlib.machinery
import importlib.util
import marshal
import os
import pickle
import runpy
import sys
import types
import zipfile

_saved = None


def install():
    """Make pickle.dump, pickle.dumps and pickle.Pickler the traced ones, also for names the
    program bound before (see _bind.py); trace dill's and the pure-Python picklers and the
    multiprocessing children started with spawn or forkserver.  Idempotent."""
    global _saved
    from . import Pickler, dump, dumps
    from . import _bind, _children
    from . import dill as dill_hook

    if _saved is None:
        _saved = (pickle.dump, pickle.dumps, pickle.Pickler)
    pickle.dump, pickle.dumps, pickle.Pickler = dump, dumps, Pickler
    dill_hook.install()
    _bind.rebind(*_saved, dump, dumps, Pickler)
    _children.install()


def uninstall():
    """Put back what install() replaced."""
    global _saved
    from . import _bind, _children
    from . import dill as dill_hook

    _children.uninstall()
    _bind.restore()
    if _saved is not None:
        pickle.dump, pickle.dumps, pickle.Pickler = _saved
        _saved = None
    dill_hook.uninstall()


def install_in_child():
    """Called in a spawn/forkserver child while it unpickles its preparation data."""
    install()


USAGE = """\
usage: python3 -m sertrace run SCRIPT [ARGS...]
       python3 -m sertrace run -m MODULE [ARGS...]

Runs a Python program exactly as `python3 SCRIPT ARGS...` (or `python3 -m MODULE ARGS...`)
would (same __main__, __file__, sys.argv, sys.path[0], exceptions and exit status), with
pickle.dump, pickle.dumps and pickle.Pickler (and dill's and the pure-Python picklers)
replaced by sertrace's traced, byte-identical ones.  multiprocessing children are traced
too, whatever their start method (fork, spawn, forkserver).

Environment:
  DISPATCH_TRACE=1|stderr      print each dump's size tree on stderr as it is written
  DISPATCH_TRACE=/path/file    append the trees to that file
  SERTRACE_EXACT=1             sizes in bytes instead of KiB/MiB
  SERTRACE_OVERSIZE=SIZE       flag nodes of at least SIZE (default 1 MiB)
  SERTRACE_GRANULARITY=all     also show atoms (str, bytes, int, float) as nodes
Under `sertrace record -- python3 -m sertrace run ...` the dumps are recorded into LTTng.
"""


def run(argv):
    """Entry point of `python3 -m sertrace run`; returns an exit status or raises."""
    if not argv:
        sys.stderr.write(USAGE)
        return 2
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write("sertrace run: -m needs a module name\n" + USAGE)
            return 2
        install()
        _run_module(argv[1], argv[2:])
        return 0
    if argv[0].startswith("-") and argv[0] != "-":
        sys.stderr.write("sertrace run: unknown option %r\n%s" % (argv[0], USAGE))
        return 2
    script, args = argv[0], argv[1:]
    path = script if os.path.isabs(script) else os.path.join(os.getcwd(), script)
    try:
        os.stat(path)
    except OSError as e:
        sys.stderr.write("sertrace run: can't open file %r: [Errno %d] %s\n"
                         % (path, e.errno, e.strerror))
        return 2
    install()
    _run_script(script, path, args)
    return 0


def _fresh_main():
    """A new __main__ module, as CPython creates it at startup, put in sys.modules."""
    main = types.ModuleType("__main__")
    d = main.__dict__  # __name__, __doc__, __package__, __loader__, __spec__
    d["__annotations__"] = {}
    d["__builtins__"] = builtins
    d["__loader__"] = importlib.machinery.BuiltinImporter
    sys.modules["__main__"] = main
    return main


def _is_pyc(path):
    if path.endswith(".pyc"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(len(importlib.util.MAGIC_NUMBER)) == importlib.util.MAGIC_NUMBER
    except OSError:
        return False


def _run_script(script, path, args):
    sys.argv = [script] + args
    if os.path.isdir(path) or zipfile.is_zipfile(path):
        # python3 DIR|ZIP: that path first on sys.path, its __main__ run by runpy.
        if not sys.flags.safe_path:
            sys.path[0] = path
        else:
            sys.path.insert(0, path)
        _fresh_main()
        _call_hiding_our_frames(runpy._run_module_as_main, "__main__", False)
        return
    if not sys.flags.safe_path:
        sys.path[0] = os.path.dirname(os.path.realpath(path))
    main = _fresh_main()
    d = main.__dict__
    d["__file__"] = path
    d["__cached__"] = None
    if _is_pyc(path):
        d["__loader__"] = importlib.machinery.SourcelessFileLoader("__main__", path)
        with open(path, "rb") as f:
            code = marshal.loads(f.read()[16:])
    else:
        d["__loader__"] = importlib.machinery.SourceFileLoader("__main__", path)
        with open(path, "rb") as f:
            source = f.read()
        code = compile(source, path, "exec", dont_inherit=True)
    _call_hiding_our_frames(exec, code, d)


def _run_module(module, args):
    # As python3 -m: argv[0] is "-m" while the module is searched, then its file;
    # sys.path[0] is already the working directory (we were started with -m too).
    sys.argv = ["-m"] + args
    _fresh_main()
    _call_hiding_our_frames(runpy._run_module_as_main, module, True)


def _call_hiding_our_frames(fn, *args):
    anchor = sys._getframe()
    try:
        fn(*args)
    except SystemExit:
        raise
    except BaseException as exc:
        _hide_frames_above(exc, anchor)
        raise


def _hide_frames_above(exc, anchor):
    """Have the next sys.excepthook call print exc's traceback from the first frame the
    program's code ran in (called from `anchor`), as python3 would print it."""
    previous = sys.excepthook

    def excepthook(etype, value, tb, _previous=previous):
        if sys.excepthook is excepthook:
            sys.excepthook = _previous
        if value is exc:
            t = tb
            while t is not None and t.tb_frame.f_back is not anchor:
                t = t.tb_next
            if t is not None:
                tb = t
                value.__traceback__ = t
        return _previous(etype, value, tb)

    sys.excepthook = excepthook
