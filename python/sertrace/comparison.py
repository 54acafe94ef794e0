"""sertrace.compare() (sertrace.comparison): what switching serializer costs, path pattern by path pattern.

``compare(obj, serializers=("pickle", "dill", "cloudpickle"), protocol=None)`` pickles
``obj`` with each serializer that is installed, traced in this process (no LTTng: the
dumps go through libsertrace's in-process listener straight into the tree core and
its JSON summary, ``sertrace._compare``), and returns a :class:`Comparison`:

- per path pattern (positions and dict keys as ``[*]``; bytes including children) and
  per type (self bytes), the bytes each serializer wrote: the rows of ``sertrace
  diff``, built by the same C code (``cli/diff-rows.c``), one column per serializer;
- per serializer its total, which is checked against its real ``len(dumps())`` (an
  untraced call of the serializer's own ``dumps``): a trace that disagrees, or a dump
  that is not complete, is a bug of sertrace, said as such in the result, and that
  serializer's figures are left out rather than shown as exact;
- a serializer that refuses ``obj`` (plain pickle on a closure cell, a lambda): which
  subtree it refused and why, as the trace has it (path, message, tag and type of the
  object), and the others are compared without it;
- a serializer that is not installed: listed as such.

How each is traced: ``pickle`` is ``sertrace.dumps`` (byte-identical to the C pickle);
``dill`` is ``dill.dumps`` with ``dill.Pickler`` hooked by ``sertrace.dill`` for the
call; ``cloudpickle`` is cloudpickle's Pickler rebuilt on ``sertrace.Pickler`` (the
twin ``sertrace.install()`` makes, ``sertrace._bind``) writing into a BytesIO, as
``cloudpickle.dumps`` does.  ``protocol=None`` is each serializer's own default
(pickle and dill 4, cloudpickle 5 on Python 3.11): what a user switching gets; pass a
protocol to compare like with like.  Sizes are at the process's granularity
(``SERTRACE_GRANULARITY``: by default atoms are folded into their container).

``python3 -m sertrace compare MODULE:EXPR [--serializers LIST] [--protocol N] [--json]``
prints the same (``sertrace._run``'s sibling: :func:`main`).
"""

import importlib
import importlib.util
import io
import json
import pickle
import sys
import threading
import types

SERIALIZERS = ("pickle", "dill", "cloudpickle")

__all__ = ["compare", "Comparison", "SERIALIZERS", "main"]


class Outcome:
    """One serializer's result.

    name, version (the package's, or None); status: "ok", "refused" (it raised on obj;
    `error` the exception, `refused` what the trace says it refused), "not installed",
    "untraceable" (installed, but sertrace cannot trace it here: `error` says why) or
    "mismatch" (a sertrace bug: `problems` says what disagreed); bytes: len of the
    real dumps() (None unless it succeeded); protocol: the one its dump used;
    traced_bytes: the payload the trace counted.
    """

    def __init__(self, name):
        self.name = name
        self.version = None
        self.status = "not installed"
        self.bytes = None
        self.traced_bytes = None
        self.protocol = None
        self.error = None
        self.refused = []
        self.problems = []
        self._summary = None  # (json bytes, dump_id) of a dump whose figures are exact

    def as_dict(self):
        return {"name": self.name, "version": self.version, "status": self.status,
                "protocol": self.protocol, "bytes": self.bytes, "traced_bytes": self.traced_bytes,
                "exact": self._summary is not None, "error": self.error, "refused": self.refused,
                "problems": self.problems}


class Comparison:
    """What compare() returns: .outcomes (one Outcome per serializer asked for, in that
    order), .rows ([(kind, name, {serializer: bytes or None})], kind "path" or "type",
    over the serializers whose status is "ok"), .text() and .json()."""

    def __init__(self, what, protocol, outcomes, rows):
        self.what = what
        self.protocol = protocol
        self.outcomes = outcomes
        self.rows = rows

    @property
    def compared(self):
        """Names of the serializers whose figures are in the rows (status "ok")."""
        return [o.name for o in self.outcomes if o.status == "ok"]

    def as_dict(self):
        names = self.compared
        return {
            "format": "sertrace-compare", "version": 1, "object": self.what,
            "protocol": self.protocol,
            "serializers": [o.as_dict() for o in self.outcomes],
            "compared": names,
            "rows": [{"kind": kind, "name": name, "bytes": vals,
                      "differs": _differs(vals, names)} for kind, name, vals in self.rows],
            "total": {o.name: o.bytes for o in self.outcomes if o.status == "ok"},
        }

    def json(self):
        """The comparison as one JSON document (format "sertrace-compare", version 1)."""
        return json.dumps(self.as_dict(), indent=1)

    def text(self):
        """The comparison for a terminal: each serializer's outcome, then the rows."""
        names = self.compared
        L = ["sertrace compare: %s, protocol %s" % (
            self.what, "each serializer's default" if self.protocol is None else self.protocol)]
        w = max([len(_label(o)) for o in self.outcomes] + [10])
        L.append("  %-*s %8s %14s  %s" % (w, "serializer", "protocol", "bytes", "status"))
        for o in self.outcomes:
            status = o.status
            if o.status == "ok":
                status = "ok: the traced total is len(%s.dumps())" % o.name
            elif o.status in ("refused", "untraceable"):
                status = "%s: %s" % (o.status, o.error)
            L.append("  %-*s %8s %14s  %s" % (
                w, _label(o), "-" if o.protocol is None else o.protocol,
                "-" if o.bytes is None else "{:,}".format(o.bytes), status))
            for r in o.refused:
                L.append("  %-*s   refused %s %s at %s: %s" % (
                    w, "", r.get("tag") or "?", r.get("type") or "?", r.get("path") or "?",
                    r.get("message") or "?"))
            for p in o.problems:
                L.append("  %-*s   BUG (sertrace): %s" % (w, "", p))
        if not names:
            L.append("")
            L.append("No serializer wrote obj: nothing to compare.")
            return "\n".join(L) + "\n"
        L.append("")
        L.append("Bytes by path pattern (including children) and by type (self bytes); "
                 "'-' not written; * the serializers differ.")
        cw = max([len(n) for n in names] + [12])
        L.append("  " + " ".join("%*s" % (cw, n) for n in names) + "    row")
        for kind, name, vals in self.rows:
            cells = " ".join("%*s" % (cw, "-" if vals.get(n) is None else "{:,}".format(vals[n]))
                             for n in names)
            L.append("  %s  %s %s%s" % (cells, "*" if _differs(vals, names) else " ",
                                        "type " if kind == "type" else "", name))
        totals = {o.name: o.bytes for o in self.outcomes}
        L.append("  %s  %s TOTAL" % (" ".join("%*s" % (cw, "{:,}".format(totals[n])) for n in names),
                                      "*" if _differs(totals, names) else " "))
        return "\n".join(L) + "\n"

    def __repr__(self):
        return "<sertrace.compare %s: %s>" % (self.what, ", ".join(
            "%s %s" % (o.name, o.bytes if o.status == "ok" else o.status) for o in self.outcomes))


def _label(o):
    return o.name if not o.version else "%s %s" % (o.name, o.version)


def _differs(vals, names):
    return len({vals.get(n) for n in names}) > 1


def _describe(obj):
    t = type(obj)
    return "%s.%s object" % (t.__module__, t.__qualname__) if t.__module__ != "builtins" \
        else "%s object" % t.__qualname__


# ---- the serializers: (real dumps, traced dumps), each returns bytes ----


def _pickle_pair(protocol):
    import sertrace
    return (lambda obj: pickle.dumps(obj, protocol),
            lambda obj: sertrace.dumps(obj, protocol)), None


def _dill_pair(protocol):
    import dill
    try:
        import sertrace.dill as sdill
    except ImportError as e:
        return None, "the dill hook (sertrace._pyhook) is not built: %s" % e

    def traced(obj):
        # Hooked for this call only; dill's logger proxy (which hands dill's tags to the
        # hook) is taken off again unless someone (install()) had it on before.
        wrapped_before = sdill._logger_module is not None
        try:
            with sdill.traced(dill.Pickler):
                return dill.dumps(obj, protocol)
        finally:
            if not wrapped_before:
                with sdill._lock:
                    sdill._unwrap_dill_logger()
    return (lambda obj: dill.dumps(obj, protocol), traced), None


_cloudpickle_twins = {}


def _retarget(cls, old, new):
    """Point the functions of `cls` that name `old` as a global (cloudpickle's methods
    call `Pickler.__init__(self, ...)` and `Pickler.dump(self, obj)` on the module's C
    Pickler) at copies whose globals name `new` instead.  install() rebinds the module
    global itself; compare() must leave the program's modules as they are."""
    patched = {}
    for k, v in list(vars(cls).items()):
        if type(v) is not types.FunctionType:
            continue
        g = v.__globals__
        if not any(g.get(n) is old for n in v.__code__.co_names):
            continue
        ng = patched.get(id(g))
        if ng is None:
            ng = patched[id(g)] = {n: (new if val is old else val) for n, val in g.items()}
        f = types.FunctionType(v.__code__, ng, v.__name__, v.__defaults__, v.__closure__)
        f.__kwdefaults__ = v.__kwdefaults__
        f.__qualname__ = v.__qualname__
        f.__module__ = v.__module__
        f.__doc__ = v.__doc__
        f.__dict__.update(v.__dict__)
        setattr(cls, k, f)


def _cloudpickle_pair(protocol):
    import _pickle

    import cloudpickle

    import sertrace
    from . import _bind
    cls = cloudpickle.Pickler
    if not issubclass(cls, sertrace.Pickler):  # sertrace.install() may have rebound it already
        twin = _cloudpickle_twins.get(id(cls))
        if twin is None:
            binder = _bind.Binder(_pickle.dump, _pickle.dumps, _pickle.Pickler, sertrace.dump,
                                  sertrace.dumps, sertrace.Pickler)
            try:
                twin = binder._build(cls)
            except _bind._CannotTwin as e:
                return None, "cloudpickle's Pickler cannot be rebuilt on sertrace.Pickler: %s" % e
            _retarget(twin, _pickle.Pickler, sertrace.Pickler)
            _cloudpickle_twins[id(cls)] = twin
            _cloudpickle_twins[id(cls), "keep"] = cls  # keeps the id unique
        cls = twin

    def traced(obj):
        with io.BytesIO() as f:  # as cloudpickle.dumps does
            cls(f, protocol=protocol).dump(obj)
            return f.getvalue()
    return (lambda obj: cloudpickle.dumps(obj, protocol), traced), None


_capture_lock = threading.Lock()

_PAIRS = {"pickle": _pickle_pair, "dill": _dill_pair, "cloudpickle": _cloudpickle_pair}


def _version(name):
    if name == "pickle":
        return None
    mod = sys.modules.get(name)
    return getattr(mod, "__version__", None)


def _exc_text(e):
    return "%s: %s" % (type(e).__name__, str(e).split("\n")[0])


def _run_one(name, obj, protocol):
    from . import _compare

    o = Outcome(name)
    if name != "pickle" and importlib.util.find_spec(name) is None:
        return o
    try:
        pair, why = _PAIRS[name](protocol)
    except ImportError as e:
        o.error = str(e)
        return o
    o.version = _version(name)
    if pair is None:
        o.status, o.error = "untraceable", why
        return o
    real, traced = pair
    real_error = None
    try:
        real_bytes = real(obj)
    except Exception as e:  # a refusal is a result
        real_bytes, real_error = None, e
    traced_error = None
    with _capture_lock:  # one capture per process: concurrent compare() calls take turns
        _compare.capture_begin()
        try:
            traced(obj)
        except Exception as e:
            traced_error = e
        finally:
            dump_id, summary = _compare.capture_end()
    doc = json.loads(summary)
    dump = next((d for d in doc["dumps"] if d["dump_id"] == dump_id), None)
    if dump is not None:
        o.protocol = dump.get("protocol")
        o.traced_bytes = dump.get("payload_bytes")
    if real_error is not None:
        o.status, o.error = "refused", _exc_text(real_error)
        for f in (dump or {}).get("flags", []):
            if f.get("kind") == "unserializable":
                o.refused.append({k: f.get(k) for k in ("path", "message", "tag", "type")})
        if traced_error is None:
            o.problems.append("the traced dump succeeded where %s.dumps() raised %s"
                              % (name, o.error))
        return o
    o.bytes = len(real_bytes)
    if traced_error is not None:
        o.problems.append("the traced dump raised %s where %s.dumps() succeeded"
                          % (_exc_text(traced_error), name))
    elif dump is None:
        o.problems.append("the dump was not seen by the in-process listener")
    else:
        if dump.get("status") != "ok" or not dump.get("complete"):
            o.problems.append("the traced dump is not complete (status %s)" % dump.get("status"))
        if dump.get("sizes_are_lower_bounds"):
            o.problems.append("the traced sizes are lower bounds")
        if o.traced_bytes != o.bytes:
            o.problems.append("the trace counted %s bytes, len(%s.dumps()) is %d"
                              % (o.traced_bytes, name, o.bytes))
    if o.problems:
        o.status = "mismatch"
    else:
        o.status = "ok"
        o._summary = (summary, dump_id)
    return o


def compare(obj, serializers=SERIALIZERS, protocol=None):
    """Pickle `obj` with each of `serializers` (names from SERIALIZERS) that is
    installed, traced in this process, and return a Comparison (.text(), .json(),
    .outcomes, .rows).  `protocol`: a pickle protocol for all, or None for each
    serializer's own default.  Raises ValueError for an unknown serializer name or
    protocol; never for what a serializer does with obj (a refusal is a result)."""
    from . import _compare

    if isinstance(serializers, str):
        serializers = [s for s in serializers.split(",") if s]
    serializers = list(serializers)
    for s in serializers:
        if s not in SERIALIZERS:
            raise ValueError("unknown serializer %r: expected some of %s"
                             % (s, ", ".join(SERIALIZERS)))
    if len(set(serializers)) != len(serializers) or not serializers:
        raise ValueError("serializers: give each of %s at most once, at least one"
                         % ", ".join(SERIALIZERS))
    if protocol is not None:
        if type(protocol) is not int or not 0 <= protocol <= pickle.HIGHEST_PROTOCOL:
            raise ValueError("protocol: expected None or 0 to %d, not %r"
                             % (pickle.HIGHEST_PROTOCOL, protocol))
    outcomes = [_run_one(s, obj, protocol) for s in serializers]
    ok = [o for o in outcomes if o.status == "ok"]
    raw = _compare.rows([o._summary for o in ok]) if ok else []
    rows = [(kind, name, {o.name: v for o, v in zip(ok, vals)}) for kind, name, vals in raw]
    rows.sort(key=lambda r: (r[0] == "type", -max((v or 0) for v in r[2].values()), r[1]))
    return Comparison(_describe(obj), protocol, outcomes, rows)


# ---- python3 -m sertrace compare ----

USAGE = """\
usage: python3 -m sertrace compare MODULE:EXPR [--serializers LIST] [--protocol N] [--json]

Imports MODULE (from the current directory or sys.path), evaluates EXPR in its
namespace, pickles the value with each serializer (traced in this process, no
LTTng needed) and prints, per path pattern (bytes including children) and per
type (self bytes), the bytes each wrote, and each one's total, which equals
its real len(dumps()).  A serializer that refuses the value says which subtree
it refused and why; one that is not installed is listed as such.

  MODULE:EXPR          e.g. dispatch_like_state:build_state_with_closures(16)
  --serializers LIST   comma-separated, of pickle, dill, cloudpickle (default: all three)
  --protocol N         pickle protocol for all (default: each serializer's own default)
  --json               one JSON document (format "sertrace-compare") instead of text
  -h, --help           this help

Exit status: 0 when printed (refusals included); 1 when sertrace's figures
disagreed with a serializer's real output (a bug, said in the output); 2 for
bad usage: a malformed MODULE:EXPR, a module that cannot be imported, an EXPR
that raises, an unknown serializer or protocol.
"""


def _usage_error(msg):
    sys.stderr.write("python3 -m sertrace compare: %s\n(see python3 -m sertrace compare --help)\n"
                     % msg)
    return 2


def main(argv):
    """`python3 -m sertrace compare ...`; returns the exit status."""
    spec, serializers, protocol, as_json = None, list(SERIALIZERS), None, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if a == "--json":
            as_json = True
        elif a in ("--serializers", "--protocol") or a.startswith(("--serializers=",
                                                                    "--protocol=")):
            opt, eq, val = a.partition("=")
            if not eq:
                if not args:
                    return _usage_error("%s needs a value" % opt)
                val = args.pop(0)
            if opt == "--serializers":
                serializers = [s.strip() for s in val.split(",") if s.strip()]
                bad = [s for s in serializers if s not in SERIALIZERS]
                if bad or not serializers or len(set(serializers)) != len(serializers):
                    return _usage_error("--serializers takes a comma-separated list of %s, each "
                                        "at most once, not %r" % (", ".join(SERIALIZERS), val))
            else:
                try:
                    protocol = int(val)
                except ValueError:
                    protocol = -1
                if not 0 <= protocol <= pickle.HIGHEST_PROTOCOL:
                    return _usage_error("--protocol takes 0 to %d, not %r"
                                        % (pickle.HIGHEST_PROTOCOL, val))
        elif a.startswith("-") and a != "-":
            return _usage_error("unknown option %r" % a)
        elif spec is None:
            spec = a
        else:
            return _usage_error("one MODULE:EXPR only (got %r too)" % a)
    if spec is None:
        return _usage_error("give MODULE:EXPR, e.g. mymodule:make_state()")
    module_name, colon, expr = spec.partition(":")
    if not colon or not module_name.strip() or not expr.strip():
        return _usage_error("expected MODULE:EXPR (e.g. mymodule:make_state()), not %r" % spec)
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # as `python3 -m` gives: the current directory
    try:
        module = importlib.import_module(module_name.strip())
    except Exception as e:
        return _usage_error("cannot import %r: %s" % (module_name.strip(), _exc_text(e)))
    try:
        obj = eval(expr, vars(module))
    except Exception as e:
        return _usage_error("evaluating %r in %s raised %s" % (expr, module_name.strip(),
                                                               _exc_text(e)))
    result = compare(obj, serializers, protocol)
    result.what = "%s (%s)" % (spec, result.what)
    sys.stdout.write(result.json() + "\n" if as_json else result.text())
    return 1 if any(o.status == "mismatch" for o in result.outcomes) else 0
