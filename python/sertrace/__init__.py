"""sertrace: see what a serializer writes, object by object.

`import sertrace` gives a drop-in for the pickle module's pickling half,
byte-identical to CPython's C pickle and traced through libsertrace:

    sertrace.dumps(obj, protocol=None, *, fix_imports=True, buffer_callback=None)
    sertrace.dump(obj, file, protocol=None, *, fix_imports=True, buffer_callback=None)
    sertrace.Pickler(file, protocol=None, fix_imports=True, buffer_callback=None)
    sertrace.PickleError, sertrace.PicklingError   (pickle's own classes)
    sertrace.HIGHEST_PROTOCOL, sertrace.DEFAULT_PROTOCOL
    sertrace.note(key, value)   annotate the innermost node of the current dump
    sertrace.install(), sertrace.uninstall()   trace an unmodified program's pickling

With no listener (no LTTng session enabling sertrace:*, DISPATCH_TRACE off)
nothing is traced and the cost is one branch per object.  See
serializers/pickle/README.md for what is traced and how bytes are counted.
"""

from ._native import (  # noqa: F401
    DEFAULT_PROTOCOL,
    HIGHEST_PROTOCOL,
    PickleError,
    Pickler,
    PicklingError,
    dump,
    dumps,
    note,
)

__all__ = [
    "DEFAULT_PROTOCOL",
    "HIGHEST_PROTOCOL",
    "PickleError",
    "Pickler",
    "PicklingError",
    "dump",
    "dumps",
    "note",
    "install",
    "uninstall",
]


def install():
    """Make pickle.dump, pickle.dumps and pickle.Pickler the traced ones, for the whole program.

    Also traces dill's and the pure-Python picklers (sertrace.dill), the multiprocessing
    children started with spawn or forkserver (and joblib.Parallel's loky workers), and the
    names the program bound before the call: `from pickle import dumps`, multiprocessing's
    ForkingPickler, cloudpickle's CloudPickler, a program's own Pickler subclass (rebuilt on
    the traced Pickler).  What it cannot make traced is named once in a RuntimeWarning.
    Idempotent; see python/README.md and sertrace._run, sertrace._bind, sertrace._children.
    """
    from ._run import install as _install

    _install()


def uninstall():
    """Undo install()."""
    from ._run import uninstall as _uninstall

    _uninstall()
