"""sertrace: see what a serializer writes, object by object.

`import sertrace` gives a drop-in for the pickle module's pickling half,
byte-identical to CPython's C pickle and traced through libsertrace:

    sertrace.dumps(obj, protocol=None, *, fix_imports=True, buffer_callback=None)
    sertrace.dump(obj, file, protocol=None, *, fix_imports=True, buffer_callback=None)
    sertrace.Pickler(file, protocol=None, fix_imports=True, buffer_callback=None)
    sertrace.PickleError, sertrace.PicklingError   (pickle's own classes)
    sertrace.HIGHEST_PROTOCOL, sertrace.DEFAULT_PROTOCOL
    sertrace.note(key, value)   annotate the innermost node of the current dump

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
    """Make pickle.dump, pickle.dumps and pickle.Pickler the traced ones (see sertrace._run)."""
    from ._run import install as _install

    _install()


def uninstall():
    """Undo install()."""
    from ._run import uninstall as _uninstall

    _uninstall()
