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
  subtrees it refused and why, as the trace has it (path pattern, the objects' paths
  and count, message, tag and type);
- and for plain pickle the rest of the object: it is pickled again with each refused
  object replaced by a persistent id (the pickle protocol's own way of writing a
  reference instead of an object: a ``Pickler`` subclass whose ``persistent_id``
  returns 0 for the objects in the refused set, by identity), until it succeeds, at
  most MAX_REFUSED (64) distinct objects.  Which object was refused: the one whose
  address the trace's error node carries (``sertrace._compare`` keeps it), among the
  objects ``persistent_id`` saw in that dump (so no user code is called to find it).
  pickle's column then holds the rows of that partial payload, its total is shown as
  "N B without K refused subtrees (each replaced by a 3-byte persistent id)", never as
  a ``len(pickle.dumps(obj))`` (which does not exist), and its cells are marked:
  "refused" (only stand-ins, or inside a refused subtree) or "partial" (the figure
  includes stand-ins).  The partial payload is checked like any other: traced total
  == len() of the same partial payload written by the C pickle, and the same bytes;
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
import re
import sys
import threading
import types

SERIALIZERS = ("pickle", "dill", "cloudpickle")

__all__ = ["compare", "Comparison", "SERIALIZERS", "main"]


class Outcome:
    """One serializer's result.

    name, version (the package's, or None); status: "ok", "refused" (it raised on obj;
    `error` the exception, `refused` what it refused: one entry per path pattern, type
    and message, with the count of objects refused there), "not installed",
    "untraceable" (installed, but sertrace cannot trace it here: `error` says why) or
    "mismatch" (a sertrace bug: `problems` says what disagreed); bytes: len of the
    real dumps() (None unless it succeeded; the traced dump's when obj pickles to a
    different length at each call: `notes` says so); protocol: the one its dump used;
    traced_bytes: the payload the trace counted.

    partial (plain pickle only, when it refused): a dict when pickle wrote obj with
    each refused object replaced by a persistent id -- "bytes" (len of that partial
    payload, equal to its traced total), "stand_ins" (persistent ids written),
    "stand_in_bytes" (each one's size), "refused_objects"; None when no partial
    payload was made (`partial_error` says why, if one was tried).
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
        self.partial = None
        self.partial_error = None
        self.notes = []
        self._summary = None  # (json bytes, dump_id) of a dump whose figures are exact
        self._marks = None  # partial: {(kind, row name): "refused" | "partial"}

    def as_dict(self):
        return {"name": self.name, "version": self.version, "status": self.status,
                "protocol": self.protocol, "bytes": self.bytes, "traced_bytes": self.traced_bytes,
                "exact": self.status == "ok", "error": self.error, "refused": self.refused,
                "partial": self.partial is not None,
                "partial_bytes": None if self.partial is None else self.partial["bytes"],
                "stand_ins": None if self.partial is None else self.partial["stand_ins"],
                "stand_in_bytes": None if self.partial is None else self.partial["stand_in_bytes"],
                "partial_error": self.partial_error, "problems": self.problems,
                "notes": self.notes}

    def partial_text(self):
        """'N B without K refused subtrees (each replaced by a k-byte persistent id)'."""
        pa = self.partial
        return "%s B without %d refused subtree%s (each replaced by a %d-byte persistent id)" % (
            "{:,}".format(pa["bytes"]), pa["stand_ins"], "" if pa["stand_ins"] == 1 else "s",
            pa["stand_in_bytes"])


class Comparison:
    """What compare() returns: .outcomes (one Outcome per serializer asked for, in that
    order), .rows ([(kind, name, {serializer: bytes or None})], kind "path" or "type",
    over the serializers in .compared), .text() and .json().  A serializer that refused
    obj but wrote a partial payload (plain pickle, its refused subtrees replaced by
    persistent ids) has a column too: .mark(kind, name, serializer) says which of its
    cells are "refused" (value None: the row is inside, or only made of, refused
    subtrees) or "partial" (the value includes stand-ins)."""

    def __init__(self, what, protocol, outcomes, rows):
        self.what = what
        self.protocol = protocol
        self.outcomes = outcomes
        self.rows = rows

    @property
    def compared(self):
        """Names of the serializers whose figures are in the rows: status "ok", and a
        refusing one that wrote a partial payload."""
        return [o.name for o in self.outcomes if o.status == "ok" or o.partial is not None]

    def mark(self, kind, name, serializer):
        """None (an exact figure, or '-' not written), "refused" or "partial"."""
        for o in self.outcomes:
            if o.name == serializer and o._marks is not None:
                return o._marks.get((kind, name))
        return None

    def as_dict(self):
        names = self.compared
        rows = []
        for kind, name, vals in self.rows:
            row = {"kind": kind, "name": name, "bytes": vals, "differs": _differs(vals, names)}
            marks = {n: self.mark(kind, name, n) for n in names}
            marks = {n: m for n, m in marks.items() if m}
            if marks:
                row["marks"] = marks
            rows.append(row)
        return {
            "format": "sertrace-compare", "version": 1, "object": self.what,
            "protocol": self.protocol,
            "serializers": [o.as_dict() for o in self.outcomes],
            "compared": names,
            "rows": rows,
            "total": {o.name: o.bytes for o in self.outcomes if o.status == "ok"},
            "partial_total": {o.name: o.partial["bytes"] for o in self.outcomes
                              if o.partial is not None},
        }

    def json(self):
        """The comparison as one JSON document (format "sertrace-compare", version 1)."""
        return json.dumps(self.as_dict(), indent=1)

    def _cell(self, kind, name, n, vals):
        m = self.mark(kind, name, n)
        if m == "refused":
            return "refused"
        v = vals.get(n)
        if v is None:
            return "-"
        return "{:,}".format(v) + ("p" if m == "partial" else "")

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
                n, paths = r.get("count", 1), r.get("paths") or [r.get("path")]
                L.append("  %-*s   refused %s %s%s at %s: %s" % (
                    w, "", r.get("tag") or "?", r.get("type") or "?",
                    "" if n == 1 else " x%d" % n,
                    (paths[0] or "?") if n == 1 else "%s (first %s)" % (r.get("path"), paths[0]),
                    r.get("message") or "?"))
            if o.partial is not None:
                L.append("  %-*s   partial: %s; its traced total is len() of that payload"
                         % (w, "", o.partial_text()))
            elif o.partial_error:
                L.append("  %-*s   no partial payload: %s" % (w, "", o.partial_error))
            for p in o.problems:
                L.append("  %-*s   BUG (sertrace): %s" % (w, "", p))
            for p in o.notes:
                L.append("  %-*s   note: %s" % (w, "", p))
        if not names:
            L.append("")
            L.append("No serializer wrote obj: nothing to compare.")
            return "\n".join(L) + "\n"
        L.append("")
        L.append("Bytes by path pattern (including children) and by type (self bytes); "
                 "'-' not written; * the serializers differ.")
        partial = [o for o in self.outcomes if o.partial is not None]
        for o in partial:
            L.append("%s: a partial payload: 'refused' rows are refused subtrees (or inside "
                     "them), 'p' figures include the %d-byte persistent ids standing in for them."
                     % (o.name, o.partial["stand_in_bytes"]))
        cw = max([len(n) for n in names] + [12])
        L.append("  " + " ".join("%*s" % (cw, n) for n in names) + "    row")
        for kind, name, vals in self.rows:
            cells = " ".join("%*s" % (cw, self._cell(kind, name, n, vals)) for n in names)
            L.append("  %s  %s %s%s" % (cells, "*" if _differs(vals, names) else " ",
                                        "type " if kind == "type" else "", name))
        totals = {o.name: o.bytes if o.partial is None else o.partial["bytes"]
                  for o in self.outcomes}
        L.append("  %s  %s TOTAL" % (" ".join(
            "%*s" % (cw, "{:,}".format(totals[n]) + ("p" if self.mark("total", "", n) else ""))
            for n in names), "*" if _differs(totals, names) else " "))
        for o in partial:
            L.append("  (%s: %s, not len(%s.dumps(obj)), which does not exist)"
                     % (o.name, o.partial_text(), o.name))
        return "\n".join(L) + "\n"

    def __repr__(self):
        return "<sertrace.compare %s: %s>" % (self.what, ", ".join(
            "%s %s" % (o.name, o.bytes if o.status == "ok" else
                       "refused, partial %d" % o.partial["bytes"] if o.partial else o.status)
            for o in self.outcomes))


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
_tracing = threading.local()  # .on: this thread is inside a traced run


class _NestedCompare(RuntimeError):
    """compare() called while this thread's traced run is pickling (a __reduce__ of the
    object compared): raised there instead of waiting on the lock this thread holds."""


def _traced_run(fn, obj):
    """fn(obj) traced in-process (sertrace._compare): (the exception it raised or None,
    the first dump's summary entry or None, (summary_json, dump_id), the address of the
    object at that dump's first error or None, what fn returned or None).  One capture
    per process: concurrent compare() calls take turns."""
    from . import _compare

    if getattr(_tracing, "on", False):  # the lock is this thread's: waiting would hang
        raise _NestedCompare("sertrace.compare() called inside a dump that compare() is tracing "
                           "(from a __reduce__ or __getstate__ of the object compared): call it "
                           "outside the pickling")
    err = result = None
    with _capture_lock:
        _compare.capture_begin()
        _tracing.on = True
        try:
            result = fn(obj)
        except Exception as e:  # a refusal is a result
            err = e
        finally:
            _tracing.on = False
            dump_id, summary, addr = _compare.capture_end()
    doc = json.loads(summary)
    dump = next((d for d in doc["dumps"] if d["dump_id"] == dump_id), None)
    return err, dump, (summary, dump_id), addr, result

# ---- a refusing pickle: the rest of the object (issue 15 item 2) ----

MAX_REFUSED = 64  # distinct refused objects replaced before giving up

_INDEX = re.compile(r"""\[(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\]'"]*)\]""")


def _pattern(path):
    """A trace path ("State.suspended[0].frame.stack[0][1]") as its pattern, positions
    and dict keys as [*] (as the summary's "paths" have it)."""
    return _INDEX.sub("[*]", path) if path else path


def _group_refused(found):
    """One entry per (path pattern, tag, type, message): "path" the pattern, "paths" the
    refused objects' own paths (in the order found), "count" how many."""
    groups = {}
    for f in found:
        key = (_pattern(f.get("path")), f.get("tag"), f.get("type"), f.get("message"))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"path": key[0], "type": key[2], "tag": key[1],
                               "message": key[3], "count": 0, "paths": []}
        g["count"] += 1
        g["paths"].append(f.get("path"))
    return list(groups.values())


def _partial_class(base):
    """`base` (a pickle Pickler) whose persistent_id returns `stand_in` for the objects
    in `refused` (id -> object, kept alive so that the ids stay theirs) and records
    every other object it is asked about in `seen` (id -> object: the same, for one
    dump) when `seen` is not None.  persistent ids are the pickle protocol's own way
    of writing a reference instead of an object; our method calls no user code."""
    class _Partial(base):
        def __init__(self, file, protocol, refused, seen, stand_in):
            base.__init__(self, file, protocol)
            self._st = (refused, seen, stand_in)

        def persistent_id(self, obj):
            refused, seen, stand_in = self._st
            k = id(obj)
            if k in refused:
                return stand_in
            if seen is not None:
                seen[k] = obj
            return None
    _Partial.__name__ = _Partial.__qualname__ = "Partial" + base.__name__
    return _Partial


def _partial_pickle(o, obj, protocol):
    """pickle refused obj: pickle it again, traced, with each refused object replaced by
    a persistent id, until it succeeds (at most MAX_REFUSED objects).  The refused object
    is the one whose address the trace's error node has (sertrace._compare keeps it)
    among those persistent_id saw in that dump.  Then the same untraced with the C
    pickle: the traced total must equal len() of that payload (and the bytes be the
    same), else it is a sertrace bug like any mismatch.  Sets o.partial, o.refused (all
    refused objects, grouped), o._summary and o._marks; or o.partial_error."""
    import _pickle

    import sertrace

    proto = pickle.DEFAULT_PROTOCOL if protocol is None else protocol
    stand_in = 0 if proto >= 1 else "0"  # protocol 0 writes persistent ids as text lines
    traced_cls, real_cls = _partial_class(sertrace.Pickler), _partial_class(_pickle.Pickler)
    refused, found, stand_in_types = {}, [], []
    while True:
        seen = {}
        out = io.BytesIO()
        err, dump, summary, addr, _ = _traced_run(
            lambda x: traced_cls(out, protocol, refused, seen, stand_in).dump(x), obj)
        if err is None:
            break
        flag = next((f for f in (dump or {}).get("flags", [])
                     if f.get("kind") == "unserializable"), None)
        what = _refusal_text(err, dump)
        if len(refused) >= MAX_REFUSED:
            o.partial_error = ("more than %d objects refused (the next: %s): no partial payload"
                               % (MAX_REFUSED, what))
            return
        target = seen.get(addr) if addr is not None else None
        if flag is None or target is None:
            o.partial_error = ("the trace does not name the object refused with %s, so it "
                               "cannot be replaced" % what)
            return
        if target is obj:
            o.partial_error = "the object itself is refused: nothing else to compare"
            return
        if any(f["path"] == flag.get("path") for f in found):
            o.partial_error = ("the object refused at %s is made anew at each dump (by a "
                               "__reduce__): it cannot be replaced by identity"
                               % flag.get("path"))
            return
        refused[addr] = target
        found.append({k: flag.get(k) for k in ("path", "message", "tag", "type")})
        t = type(target)  # a stand-in's node is named by its object's type
        stand_in_types.append(t.__qualname__ if t.__module__ == "builtins"
                              else "%s.%s" % (t.__module__, t.__qualname__))
        del seen, target
    seen = None
    traced_payload = out.getvalue()

    def real_partial():
        real = io.BytesIO()
        real_cls(real, protocol, refused, None, stand_in).dump(obj)
        return real.getvalue()
    try:
        real_payload = real_partial()
    except Exception as e:
        o.problems.append("pickle's partial dump (%d objects replaced) raised %s where the "
                          "traced one succeeded" % (len(refused), type(e).__name__))
        return
    if real_payload != traced_payload and dump.get("payload_bytes") == len(traced_payload):
        try:  # obj may pickle differently at each call: not a sertrace bug
            again = real_partial()
        except Exception:
            again = None
        if again != real_payload:
            o.notes.append("obj pickles differently at each call (pickle's own partial dump "
                           "wrote %d then %s bytes, the traced one %d): the figures are the "
                           "traced dump's, exact for its payload" % (
                               len(real_payload), "an error" if again is None else len(again),
                               len(traced_payload)))
            real_payload = traced_payload
    pid_kind = next((k for k in dump.get("by_kind", []) if k.get("tag") == "Pid"), {})
    n_pids = pid_kind.get("count", 0)
    problems = []
    if dump.get("status") != "ok" or not dump.get("complete"):
        problems.append("the traced partial dump is not complete (status %s)"
                        % dump.get("status"))
    if dump.get("sizes_are_lower_bounds"):
        problems.append("the traced sizes of the partial dump are lower bounds")
    if dump.get("payload_bytes") != len(real_payload):
        problems.append("the trace counted %s bytes for the partial payload, its len() is %d"
                        % (dump.get("payload_bytes"), len(real_payload)))
    elif traced_payload != real_payload:
        problems.append("the traced partial payload differs from pickle's own (same length)")
    if n_pids < len(refused):
        problems.append("%d persistent ids traced for %d refused objects"
                        % (n_pids, len(refused)))
    if problems:
        o.problems.extend(problems)
        return
    o.refused = _group_refused(found)
    o.partial = {"bytes": len(real_payload), "stand_ins": n_pids,
                 "stand_in_bytes": 3,  # K 00 Q (BININT1 0, BINPERSID); protocol 0: "P0" newline
                 "refused_objects": len(refused)}
    o._summary = summary
    o._marks = _marks(dump, o.refused, stand_in_types, stand_in)


_SEPS = (".", "[", "(")


def _below(p, r):
    """Pattern p is strictly inside pattern r."""
    return len(p) > len(r) and p.startswith(r) and p[len(r)] in _SEPS


def _marks(dump, refused, stand_in_types, stand_in):
    """{(kind, row name): "refused" | "partial"} for a partial payload's column:
    a pattern where every node is a stand-in is "refused"; a pattern with stand-ins
    among its nodes or below them is "partial", and so is a stand-in's own persistent
    id object when atoms are nodes (SERTRACE_GRANULARITY=all: the pattern "R/?" below
    a refused pattern R; its type too).  Types: a type whose every node is a stand-in
    is "refused", one with some stand-ins "partial".  The total is "partial".  Every
    other row of that column is an exact figure of the partial payload.  Rows absent
    from the column inside a refused pattern are marked "refused" by compare()."""
    count_at = {}
    for r in refused:
        count_at[r["path"]] = count_at.get(r["path"], 0) + r["count"]
    marks = {("total", ""): "partial"}
    pid_rows = False
    for p in dump.get("paths", []):
        pat, n = p["pattern"], p.get("count", 0)
        if pat in count_at:
            marks[("path", pat)] = "refused" if n == count_at[pat] else "partial"
        elif any(_below(r, pat) for r in count_at):
            marks[("path", pat)] = "partial"
        elif any(pat == r + "/?" for r in count_at):
            marks[("path", pat)] = "partial"
            pid_rows = True
    type_count = {}
    for t in stand_in_types:
        type_count[t] = type_count.get(t, 0) + 1
    for t in dump.get("by_type", []):
        if t.get("type") in type_count:
            marks[("type", t["type"])] = "refused" if t.get("count") == type_count[t["type"]] \
                else "partial"
    if pid_rows:
        marks.setdefault(("type", type(stand_in).__name__), "partial")
    return marks


_PAIRS = {"pickle": _pickle_pair, "dill": _dill_pair, "cloudpickle": _cloudpickle_pair}


def _version(name):
    if name == "pickle":
        return None
    mod = sys.modules.get(name)
    return getattr(mod, "__version__", None)


def _exc_text(e):
    """An exception of the user's own code (importing MODULE, evaluating EXPR)."""
    return "%s: %s" % (type(e).__name__, str(e).split("\n")[0])


def _refusal_text(e, dump):
    """A serializer's exception as the trace recorded it: its type name and the message
    of the dump's first refusal (od_exception_message: a builtin exception's text, or
    "<module.Type>: ..." from str args only), never str(e), which runs the exception's
    own __str__ (user code: it may print object values, or raise).  No refusal in the
    trace: the type name alone."""
    name = type(e).__name__
    flag = next((f for f in (dump or {}).get("flags", [])
                 if f.get("kind") == "unserializable" and f.get("message")), None)
    if flag is None:
        return name
    msg = flag["message"].split("\n")[0]
    return msg if msg.startswith("<") else "%s: %s" % (name, msg)


def _unstable(o, real, obj, traced_payload):
    """The traced dump counted exactly its own payload, but obj pickles to a different
    length at each call (its __reduce__ or __getstate__ gives other state each time):
    not a sertrace bug.  Says so in o.notes; False when obj is stable (a real mismatch)."""
    if not isinstance(traced_payload, bytes) or o.traced_bytes != len(traced_payload):
        return False
    try:
        again = len(real(obj))
    except Exception:
        again = None
    if again == o.bytes:
        return False
    o.notes.append("obj pickles to a different length at each call (untraced %s.dumps() "
                   "wrote %d then %s bytes, the traced one %d): the figures are the traced "
                   "dump's, exact for its payload" % (
                       o.name, o.bytes, "an error" if again is None else again,
                       len(traced_payload)))
    return True


def _run_one(name, obj, protocol):
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
    traced_error, dump, summary, _err_addr, traced_payload = _traced_run(traced, obj)
    if dump is not None:
        o.protocol = dump.get("protocol")
        o.traced_bytes = dump.get("payload_bytes")
    if real_error is not None:
        o.status, o.error = "refused", _refusal_text(real_error, dump)
        found = [f for f in (dump or {}).get("flags", []) if f.get("kind") == "unserializable"]
        o.refused = _group_refused([{k: f.get(k) for k in ("path", "message", "tag", "type")}
                                    for f in found])
        if traced_error is None:
            o.problems.append("the traced dump succeeded where %s.dumps() raised %s"
                              % (name, o.error))
        elif name == "pickle":
            _partial_pickle(o, obj, protocol)
        return o
    o.bytes = len(real_bytes)
    if isinstance(traced_error, _NestedCompare):
        o.status, o.error = "untraceable", str(traced_error)
        return o
    if traced_error is not None:
        o.problems.append("the traced dump raised %s where %s.dumps() succeeded"
                          % (_refusal_text(traced_error, dump), name))
    elif dump is None:
        o.problems.append("the dump was not seen by the in-process listener")
    else:
        if dump.get("status") != "ok" or not dump.get("complete"):
            o.problems.append("the traced dump is not complete (status %s)" % dump.get("status"))
        if dump.get("sizes_are_lower_bounds"):
            o.problems.append("the traced sizes are lower bounds")
        if o.traced_bytes != o.bytes and _unstable(o, real, obj, traced_payload):
            o.bytes = len(traced_payload)  # the figures are those of the traced dump
        elif o.traced_bytes != o.bytes:
            o.problems.append("the trace counted %s bytes, len(%s.dumps()) is %d"
                              % (o.traced_bytes, name, o.bytes))
    if o.problems:
        o.status = "mismatch"
    else:
        o.status = "ok"
        o._summary = summary
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
    ok = [o for o in outcomes if o.status == "ok" or o.partial is not None]
    raw = _compare.rows([o._summary for o in ok]) if ok else []
    rows = [(kind, name, {o.name: v for o, v in zip(ok, vals)}) for kind, name, vals in raw]
    for o in ok:
        if o._marks is None:
            continue
        inside = [r["path"] for r in o.refused]
        for kind, name, vals in rows:
            if kind == "path" and vals.get(o.name) is None and any(_below(name, r)
                                                                     for r in inside):
                o._marks[("path", name)] = "refused"
    rows.sort(key=lambda r: (r[0] == "type", -max((v or 0) for v in r[2].values()), r[1]))
    return Comparison(_describe(obj), protocol, outcomes, rows)


# ---- python3 -m sertrace compare ----

USAGE = """\
usage: python3 -m sertrace compare MODULE:EXPR [--serializers LIST] [--protocol N] [--json]

Imports MODULE (from the current directory or sys.path), evaluates EXPR in its
namespace, pickles the value with each serializer (traced in this process, no
LTTng needed) and prints, per path pattern (bytes including children) and per
type (self bytes), the bytes each wrote, and each one's total, which equals
its real len(dumps()).  A serializer that refuses the value says which subtrees
it refused and why; plain pickle is then compared for the rest of the value:
its column is the payload it writes with each refused object replaced by a
3-byte persistent id (marked: 'refused' rows, 'p' figures that include
stand-ins, a TOTAL of "N B without K refused subtrees").  A serializer that
is not installed is listed as such.

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
    return 1 if any(o.problems for o in result.outcomes) else 0
