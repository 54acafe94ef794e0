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
    sertrace.inspect(data)      the size summary of stored pickle bytes, without
                                unpickling them (as `sertrace inspect --json`)
    sertrace.compare(obj)       what pickle, dill and cloudpickle each write for obj,
                                by path pattern and type, traced in this process

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
    "inspect",
    "InspectError",
    "compare",
]


class InspectError(ValueError):
    """sertrace.inspect() could not read the bytes to the end: malformed or
    truncated input, or a limit reached.  `offset` is the byte where it
    stopped, `reason` why, `summary` the summary of the pickles read before
    it (a dict, as inspect() returns)."""

    def __init__(self, reason, offset, summary):
        super().__init__("inconclusive at byte %d: %s" % (offset, reason))
        self.reason = reason
        self.offset = offset
        self.summary = summary


def inspect(data, *, top=10, oversize=None, max_memory=1 << 30):
    """The size summary of pickle bytes, as a dict: the object `sertrace
    inspect --json` prints ({"format": "sertrace-summary", "version": 1,
    "dumps": [...], "totals": {...}}, analyzers/README.md), one dump per
    pickle when several are back to back.  Nothing in `data` is imported or
    called: the pickle machine is emulated (inspect/README.md).

    top: largest nodes kept per dump; oversize: flag nodes of at least this
    many bytes (int) or this share of their dump (a str such as "10%");
    max_memory: limit of the emulator's tables, in bytes.  Raises
    InspectError (a ValueError) when the bytes are malformed, truncated or
    over a limit, TypeError when `data` is not bytes-like."""
    from . import _inspect

    if isinstance(data, str):
        raise TypeError("inspect() needs pickle bytes (bytes, bytearray, memoryview), not str")
    obytes, opercent = 0, 0.0
    if isinstance(oversize, str) and oversize.endswith("%"):
        opercent = float(oversize[:-1])
        if not 0.0 < opercent <= 100.0:
            raise ValueError("oversize: a share must be more than 0% and at most 100%")
    elif oversize is not None:
        obytes = int(oversize)
        if obytes <= 0:
            raise ValueError("oversize: must be more than 0 bytes")
    if not 0 <= int(top) <= 100000:
        raise ValueError("top: expected 0 to 100000")
    # the dict json.loads would give of `inspect --json`'s text, built in C
    status, offset, reason, summary = _inspect.summary(data, int(top), obytes, opercent, int(max_memory))
    if status != _inspect.OK:
        raise InspectError(reason, offset, summary)
    return summary


def compare(obj, serializers=("pickle", "dill", "cloudpickle"), protocol=None):
    """Pickle `obj` with each of `serializers` that is installed, traced in this
    process (no LTTng), and return a Comparison: .text(), .json(), .outcomes (per
    serializer: status "ok" / "refused" / "not installed" / "untraceable" /
    "mismatch", bytes = its real len(dumps()), what it refused and why) and .rows
    (bytes per path pattern and per type, one column per serializer that wrote
    obj).  protocol None: each serializer's own default.  See sertrace.comparison."""
    from .comparison import compare as _compare

    return _compare(obj, serializers, protocol)


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
