"""What the pyhook must never do (serializers/pyhook, python/sertrace/dill.py):

- report a dump that worked as a failed one (a pickler the hooks cannot
  follow runs untouched and leaves nothing in the trace);
- put object values in the trace: dict keys in paths follow the key rule
  of serializers/pyhook/README.md ("Dict keys").  The exception's notes
  stay in the process and read as the C pickler's (CPython 3.14's wording,
  keys repr'd only when that runs no user code);
- run user code to describe an exception (a user class's __str__, an
  argument's __str__/__repr__).

Each script runs in a child process with DISPATCH_TRACE=<file> (see
traces.py) and prints JSON; the text tree is parsed or searched.
"""
import json
import pickle

import pytest

import traces

dill = pytest.importorskip("dill")

ENV = {"SERTRACE_EXACT": "1"}


def run(tmp_path, name, script):
    out = tmp_path / (name + ".txt")
    env = dict(ENV, DISPATCH_TRACE=str(out))
    p = traces.run_script(script, env)
    assert p.returncode == 0, p.stderr
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    return json.loads(p.stdout), text


# ---- 1. untraceable picklers are not failed dumps ----------------------

UNTRACEABLE_SCRIPT = r'''
import io, json, pickle
import sertrace.dill as sd

class ListPickler(pickle._Pickler):
    """Writes through a class-level write: no per-instance write."""
    def __init__(self, protocol):
        super().__init__(io.BytesIO(), protocol)
        del self.write
        self.chunks = []
    def write(self, data):
        self.chunks.append(bytes(data))

class ShadowedWritePickler(pickle._Pickler):
    """Has a class-level write, but pickle._Pickler sets one per instance
    that shadows it: traceable."""
    def write(self, data):
        raise AssertionError("never called")

obj = {"a": [1, 2, {"b": (3, 4)}], "c": "text"}
sd.trace_class(ListPickler)
sd.trace_class(ShadowedWritePickler)
res = {}
payloads = []
for _ in range(2):
    p = ListPickler(2)
    p.dump(obj)
    payloads.append(b"".join(p.chunks))
res["list_same"] = all(x == pickle.dumps(obj, 2) for x in payloads)
f = io.BytesIO()
ShadowedWritePickler(f, 4).dump(obj)
res["shadowed_same"] = f.getvalue() == pickle.dumps(obj, 4)
res["shadowed_len"] = len(f.getvalue())
untraced = getattr(sd, "untraced_classes", dict)()
res["untraced"] = {c.__qualname__: r for c, r in untraced.items()}
print(json.dumps(res))
'''


def test_untraceable_pickler_is_not_a_failed_dump(tmp_path):
    res, text = run(tmp_path, "untraceable", UNTRACEABLE_SCRIPT)
    assert res["list_same"] is True
    assert res["shadowed_same"] is True
    dumps = traces.parse_text_tree(text)
    # ListPickler's two dumps leave nothing; ShadowedWritePickler is traced.
    assert not any("ListPickler" in d["header"] for d in dumps)
    assert len(dumps) == 1
    assert "ShadowedWritePickler" in dumps[0]["header"]
    total, status = traces.end_bytes(dumps[0]["end"])
    assert (total, status) == (res["shadowed_len"], "ok")
    assert "error" not in text
    # Recorded once, with a reason that names the cause.
    assert list(res["untraced"]) == ["ListPickler"]
    assert "write" in res["untraced"]["ListPickler"]


# ---- 2. dict keys are not values ----------------------------------------

KEYS_SCRIPT = r'''
import json
import dill
import sertrace
import sertrace.dill as sd
sd.install()

def gen():
    yield 1

class Holder:
    pass

def attempt(obj):
    res = []
    for dumps in (lambda o: dill.dumps(o, protocol=4), lambda o: sertrace.dumps(o, 4)):
        try:
            dumps(obj)
            res.append(None)
        except TypeError as e:
            res.append({"msg": str(e), "notes": list(getattr(e, "__notes__", []))})
    return {"dill": res[0], "c": res[1]}

inner = {"\u00e9_ok": [gen()]}
for k in ["y" * 65, ("tuple-secret",), False, True, None, 2 ** 70, -7, 42,
          "user data here", b"secret-bytes", "ok_name"]:
    inner = {k: inner}
h = Holder()
setattr(h, "not an identifier", {"inner_ok": [gen()]})
print(json.dumps({"dict": attempt(inner), "state": attempt(h)}))
'''

SECRETS = ["secret-bytes", "user data here", "tuple-secret", "y" * 65, "not an identifier"]


def test_dict_keys_follow_the_key_rule(tmp_path):
    res, text = run(tmp_path, "keys", KEYS_SCRIPT)
    # The notes are the C pickler's, word for word (they stay on the
    # exception, in the process, as CPython 3.14 adds them).
    d, st = res["dict"]["dill"], res["state"]["dill"]
    assert d is not None and st is not None
    assert d == res["dict"]["c"]
    assert st == res["state"]["c"]
    assert d["notes"] == [
        "when serializing list item 0",
        "when serializing dict item '\u00e9_ok'",
        "when serializing dict item '%s'" % ("y" * 65),
        "when serializing dict item ('tuple-secret',)",
        "when serializing dict item False",
        "when serializing dict item True",
        "when serializing dict item None",
        "when serializing dict item %d" % 2 ** 70,
        "when serializing dict item -7",
        "when serializing dict item 42",
        "when serializing dict item 'user data here'",
        "when serializing dict item b'secret-bytes'",
        "when serializing dict item 'ok_name'",
    ]
    assert st["notes"] == [
        "when serializing list item 0",
        "when serializing dict item 'inner_ok'",
        "when serializing dict item 'not an identifier'",
        "when serializing Holder state",
        "when serializing Holder object",
    ]
    # The trace (which leaves the process) follows the key rule: the same
    # flag line for the dill dump and for the C pickler's, and no value.
    dumps = traces.parse_text_tree(text)
    errors = [f.strip(" \u2502") for dump in dumps for f in dump["flags"]
              if "UNSERIALIZABLE" in f]
    assert len(errors) == 4
    assert errors[0] == errors[1] and errors[2] == errors[3]
    assert errors[0].endswith(
        ": cannot pickle 'generator' object at dict['ok_name'][<bytes len=12>][<str len=14>]"
        "[42][-7][<int>][None][True][False][<tuple>][<str len=65>]['\u00e9_ok'][0]")
    assert errors[2].endswith(
        ": cannot pickle 'generator' object at Holder[<str len=17>]['inner_ok'][0]")
    for secret in SECRETS:
        assert secret not in text


# ---- 3. exception text without user code --------------------------------

EXC_SCRIPT = r'''
import json
import dill
import sertrace.dill as sd
sd.install()

CALLS = []

class LoudError(Exception):
    def __str__(self):
        CALLS.append("LoudError.__str__")
        return "SECRET-FROM-STR"

class Arg:
    def __str__(self):
        CALLS.append("Arg.__str__")
        return "SECRET-ARG"
    def __repr__(self):
        CALLS.append("Arg.__repr__")
        return "SECRET-ARG"

class Boom:
    def __init__(self, exc):
        self.exc = exc
    def __reduce__(self):
        raise self.exc

cases = [
    ("one_str", LoudError("visible message")),
    ("two_str", LoudError("a", "b")),
    ("mixed", LoudError("a", 3)),
    ("builtin_user_arg", TypeError(Arg())),
    ("builtin_str", ValueError("plain builtin", 7)),
]
import sertrace
raised = []
for name, exc in cases:
    for dumps in (lambda o: dill.dumps(o, protocol=4), lambda o: sertrace.dumps(o, 4)):
        exc.__notes__ = []
        try:
            dumps({"k": Boom(exc)})
        except BaseException as e:
            raised.append(type(e).__name__)
print(json.dumps({"calls": CALLS, "raised": raised[::2], "c_raised": raised[1::2]}))
'''


def test_exception_text_runs_no_user_code(tmp_path):
    res, text = run(tmp_path, "exc", EXC_SCRIPT)
    assert res["raised"] == ["LoudError", "LoudError", "LoudError", "TypeError", "ValueError"]
    assert res["c_raised"] == res["raised"]
    assert res["calls"] == []  # no __str__/__repr__ of the user's ran
    assert "SECRET" not in text
    dumps = traces.parse_text_tree(text)
    errors = [f for dump in dumps for f in dump["flags"] if "UNSERIALIZABLE" in f]
    assert len(errors) == 10
    # "UNSERIALIZABLE TAG type: message at path" (format.h)
    msgs = [e.split(": ", 1)[1].rsplit(" at dict['k']", 1)[0] for e in errors]
    # The C pickler's form (serializers/pickle/README.md, "The message"); the
    # dill dump (even places) and sertrace.dumps (odd places) agree.
    assert msgs[::2] == msgs[1::2]
    assert msgs[::2] == [
        "<LoudError>: visible message",  # a user class: its one str arg
        "<LoudError>: ('a', 'b')",       # str args: their tuple
        "<LoudError>",                   # a non-str arg: the type alone
        "<TypeError>",                   # builtin class, user object arg
        "('plain builtin', 7)",          # builtin class, atoms: str(exc)
    ]
    assert all(traces.end_bytes(d["end"])[1] == "error" for d in dumps)


HOOKS_FAIL_SCRIPT = r'''
import io, json, pickle
import sertrace.dill as sd

class ReadOnlyFramer:
    """file_write cannot be replaced: the writers cannot be set."""
    current_frame = None
    _FRAME_SIZE_TARGET = 64 * 1024
    def __init__(self, fw):
        self._fw = fw
    @property
    def file_write(self):
        return self._fw
    def commit_frame(self, force=False):
        pass
    def end_framing(self):
        pass

class ROPickler(pickle._Pickler):
    def __init__(self, file):
        super().__init__(file, 2)
        self.framer = ReadOnlyFramer(self._file_write)

sd.trace_class(ROPickler)
f = io.BytesIO()
ROPickler(f).dump({"a": [1, 2]})
print(json.dumps({"same": f.getvalue() == pickle.dumps({"a": [1, 2]}, 2)}))
'''


def test_hooks_that_cannot_be_set_give_a_note_not_an_error(tmp_path):
    """The rare case the check before the dump cannot see: an attribute of
    the framer refuses the writer.  The dump runs untouched, ends with the
    pickler's own status, and says why it has no tree."""
    res, text = run(tmp_path, "hooksfail", HOOKS_FAIL_SCRIPT)
    assert res["same"] is True
    dumps = traces.parse_text_tree(text)
    assert len(dumps) == 1 and dumps[0]["nodes"] == []
    assert traces.end_bytes(dumps[0]["end"]) == (0, "ok")
    assert "untraced = the hooks could not be set on this pickler" in text
