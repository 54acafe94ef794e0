"""Route an unmodified program's pickling through sertrace.

`install()` replaces pickle.dump, pickle.dumps and pickle.Pickler with sertrace's traced,
byte-identical versions (and hooks dill's pure-Python pickler when dill is or gets imported
and sertrace's dill hook is available).  `uninstall()` puts the originals back.

`python3 -m sertrace run script.py args...` (or `run -m module args...`) installs, then runs
the program exactly as `python3 script.py args...` would: same sys.argv, sys.path[0] and
`__main__`, its exceptions and exit status unchanged.  With DISPATCH_TRACE set, the live tree
is printed or written; under `sertrace record`, the dumps are recorded.
"""
import os
import pickle
import runpy
import sys

_saved = None


def install():
    """Make pickle.dump, pickle.dumps and pickle.Pickler the traced ones, and trace dill's
    Pickler (now, or when the program imports dill) and pickle._Pickler.  Idempotent."""
    global _saved
    from . import Pickler, dump, dumps
    from . import dill as dill_hook

    if _saved is None:
        _saved = (pickle.dump, pickle.dumps, pickle.Pickler)
    pickle.dump, pickle.dumps, pickle.Pickler = dump, dumps, Pickler
    dill_hook.install()


def uninstall():
    """Put back what install() replaced."""
    global _saved
    from . import dill as dill_hook

    if _saved is not None:
        pickle.dump, pickle.dumps, pickle.Pickler = _saved
        _saved = None
    dill_hook.uninstall()


USAGE = """\
usage: python3 -m sertrace run SCRIPT [ARGS...]
       python3 -m sertrace run -m MODULE [ARGS...]

Runs a Python program with its pickle.dump, pickle.dumps and pickle.Pickler (and dill's
Pickler, if the program uses dill) replaced by sertrace's traced, byte-identical ones.
The program's argv, __main__, exceptions and exit status are preserved.

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
        module, args = argv[1], argv[2:]
        install()
        sys.argv = [module] + args
        # sys.path[0] is already the working directory, as under `python3 -m MODULE`.
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    script, args = argv[0], argv[1:]
    if not os.path.exists(script):
        sys.stderr.write("sertrace run: can't open file %r: No such file or directory\n" % script)
        return 2
    install()
    sys.argv = [script] + args
    # As under `python3 SCRIPT`: sys.path[0] is the script's directory (not the cwd).
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    return 0
