"""A dill failure reads exactly as a sertrace.dumps (C pickler) failure.

For objects that pickle and dill both refuse at the same place (a
``__reduce__`` / ``__reduce_ex__`` that raises, a generator, a socket), put
in the scheduler state and in other places (a dict inside a list, a dict
key, a set, a frozenset, a tuple, an instance's state, reconstructor
arguments, ``__new__`` arguments), protocols 0-5: the same exception type and
message, the same ``__notes__`` and, in the live text tree, the same
``!! UNSERIALIZABLE`` line (tag, type, path, message).  Traced
(``DISPATCH_TRACE``) and dormant (no listener) dill dumps get the same notes.
"""
import json
import re

import pytest

import traces

dill = pytest.importorskip("dill")

CASES_SCRIPT = r'''
import io, json, socket, sys
sys.path.insert(0, WORKLOADS)
import dispatch_like_state as dls
import dill
import sertrace
import sertrace.dill
sertrace.dill.install()

class Boom:
    def __reduce__(self):
        raise TypeError("nope")

class BoomEx:
    def __reduce_ex__(self, proto):
        raise ValueError("no way", 3)

class Holder:
    pass

class Wrap:
    def __init__(self, x):
        self.x = x
    def __reduce__(self):
        return (Wrap, (self.x,))

class NewArgs:
    def __init__(self, x):
        self.x = x
    def __getnewargs__(self):
        return (self.x,)

def gen():
    yield 1

def places(bad):
    st = dls.build_state(6)
    st.suspended[1].frame.stack.append((False, bad))
    h = Holder()
    h.a = 1
    h.attr = [bad]
    return {
        "state": st,
        "dict_in_list": [1, {"k": bad, 2: 3}],
        "dict_key": [{bad: 1}],
        "set_item": [{bad}],
        "frozenset_item": (frozenset([bad]),),
        "tuple_item": [(1, bad)],
        "instance_state": h,
        "reconstructor_args": Wrap(bad),
        "newobj_args": [NewArgs(bad)],
    }

def attempt(dumps, obj, proto):
    try:
        dumps(obj, proto)
    except BaseException as e:
        return {"type": type(e).__name__, "msg": str(e),
                "notes": list(getattr(e, "__notes__", []))}
    return None

def c_dumps(obj, proto):
    return sertrace.dumps(obj, proto)

def dill_dumps(obj, proto):
    return dill.dumps(obj, protocol=proto)

def pure_dumps(obj, proto):  # pickle._Pickler, also hooked by install()
    import pickle
    pickle._Pickler(io.BytesIO(), proto).dump(obj)

out = []
sock = socket.socket()
for bad_name, make in [("reduce_raises", Boom), ("reduce_ex_raises", BoomEx),
                       ("generator", gen), ("socket", lambda: sock)]:
    for proto in range(0, 6):
        for place, obj in places(make()).items():
            # one dump each, in this order: C pickler, dill, pickle._Pickler
            out.append({"case": "%s/%s/%d" % (bad_name, place, proto),
                        "c": attempt(c_dumps, obj, proto),
                        "dill": attempt(dill_dumps, obj, proto),
                        "pure": attempt(pure_dumps, obj, proto)})
sock.close()
print(json.dumps(out))
'''


def run_cases(tmp_path, traced):
    env = {"SERTRACE_EXACT": "1"}
    out = tmp_path / "tree.txt"
    if traced:
        env["DISPATCH_TRACE"] = str(out)
    p = traces.run_script(CASES_SCRIPT, env)
    assert p.returncode == 0, p.stderr
    dumps = traces.parse_text_tree(out.read_text(encoding="utf-8")) if traced else None
    return json.loads(p.stdout), dumps


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    return run_cases(tmp_path_factory.mktemp("traced"), True)


def test_same_exception_and_notes_as_the_c_pickler(traced_run):
    cases, _ = traced_run
    assert len(cases) == 4 * 6 * 9
    for c in cases:
        assert c["c"] is not None, c["case"]  # every object fails...
        assert c["dill"] == c["c"], c["case"]  # ... the same way with dill
        assert c["pure"] == c["c"], c["case"]  # and with pickle._Pickler
    by = {c["case"]: c for c in cases}
    # The audit's graph: 12 notes, an "object" note after each "state" note.
    assert by["reduce_raises/state/4"]["dill"] == {
        "type": "TypeError", "msg": "nope", "notes": traces.STATE_REFUSED_NOTES}
    # A failing key gets no note of its dict (3.14 notes values only).
    assert by["generator/dict_key/4"]["dill"]["notes"] == ["when serializing list item 0"]
    assert by["generator/set_item/4"]["dill"]["notes"] == [
        "when serializing set element", "when serializing list item 0"]
    # Below protocol 4 a set is reduced by save_set, not by save()'s reduce
    # path: no "set object" note (as 3.14 and the C pickler).
    assert by["generator/set_item/2"]["dill"]["notes"] == [
        "when serializing list item 0", "when serializing tuple item 0",
        "when serializing set reconstructor arguments", "when serializing list item 0"]
    assert by["socket/reconstructor_args/4"]["dill"]["notes"] == [
        "when serializing tuple item 0", "when serializing Wrap reconstructor arguments",
        "when serializing Wrap object"]
    assert by["reduce_raises/newobj_args/2"]["dill"]["notes"] == [
        "when serializing tuple item 0", "when serializing NewArgs __new__ arguments",
        "when serializing NewArgs object", "when serializing list item 0"]


def test_same_error_line_as_the_c_pickler(traced_run):
    cases, dumps = traced_run
    assert len(dumps) == 3 * len(cases)
    for i, c in enumerate(cases):
        lines = []
        for d, name in zip(dumps[3 * i:3 * i + 3], ("pickle", "dill", "pickle._Pickler")):
            assert (" %s protocol " % name) in d["header"], d["header"]
            assert traces.end_bytes(d["end"])[1] == "error"
            flags = [f.strip(" \u2502") for f in d["flags"] if "UNSERIALIZABLE" in f]
            assert len(flags) == 1, (c["case"], d["flags"])
            lines.append(flags[0])
        assert lines[1] == lines[0], c["case"]
        assert lines[2] == lines[0], c["case"]
        # The message is the C pickler's: str(exc), no "TypeError: " prefix;
        # the path follows it ("TAG type: message at path", format.h).
        assert re.search(": " + re.escape(c["c"]["msg"]) + "( at .*)?$", lines[0]), lines[0]
    first = {c["case"]: i for i, c in enumerate(cases)}
    line = [f for f in dumps[3 * first["reduce_raises/state/4"] + 1]["flags"]
            if "UNSERIALIZABLE" in f][0]
    assert line.strip(" \u2502") == (
        "!! UNSERIALIZABLE O __main__.Boom: nope at State.suspended[1].frame.stack[4][1]")
    line = [f for f in dumps[3 * first["generator/newobj_args/4"] + 1]["flags"]
            if "UNSERIALIZABLE" in f][0]
    assert line.strip(" \u2502") == (
        "!! UNSERIALIZABLE R generator: cannot pickle 'generator' object at list[0](args)[0]")


def test_dormant_hook_adds_the_same_notes(tmp_path, traced_run):
    """No DISPATCH_TRACE: the hooked dumps run untraced, and a failure still
    gets the C pickler's notes (built from the traceback, on the error path
    only)."""
    cases, _ = run_cases(tmp_path, False)
    assert cases == traced_run[0]


EDGE_SCRIPT = r'''
import io, json, pickle
import dill
import sertrace
import sertrace.dill as sd
sd.install()

SHARED = TypeError("shared")

class Again:
    def __reduce__(self):
        raise SHARED  # the same exception object every time

class ListPickler(pickle._Pickler):
    """Writes through a class-level write: untraceable, runs untouched."""
    def __init__(self, protocol):
        super().__init__(io.BytesIO(), protocol)
        del self.write
    def write(self, data):
        pass

sd.trace_class(ListPickler)
obj = [1, {"a": Again()}]
PK = dill.Pickler(io.BytesIO(), protocol=4)

def notes(dumps, times):
    SHARED.__notes__ = []
    for _ in range(times):
        try:
            dumps(obj)
        except TypeError:
            pass
    return list(SHARED.__notes__)

print(json.dumps({
    "c": notes(lambda o: sertrace.dumps(o, 4), 2),
    "dill": notes(lambda o: dill.dumps(o, protocol=4), 2),
    # one pickler for both dumps: the older traceback has its frames too
    "dill_same_pickler": notes(lambda o: (PK.clear_memo(), PK.dump(o)), 2),
    "untraceable": notes(lambda o: ListPickler(4).dump(o), 1),
    "c_once": notes(lambda o: sertrace.dumps(o, 4), 1),
}))
'''


@pytest.mark.parametrize("traced", [True, False])
def test_raised_again_and_untraceable(tmp_path, traced):
    """An exception object raised a second time keeps its older traceback
    behind the new frames: only the new dump's frames give notes (each raise
    adds one set, as with the C pickler).  A pickler the hooks cannot trace
    still gets the notes."""
    env = {"DISPATCH_TRACE": str(tmp_path / "t.txt")} if traced else {}
    p = traces.run_script(EDGE_SCRIPT, env)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    once = ["when serializing dict item 'a'", "when serializing list item 1"]
    assert res["c_once"] == once
    assert res["c"] == once * 2
    assert res["dill"] == res["c"]
    assert res["dill_same_pickler"] == res["c"]
    assert res["untraceable"] == once


NOISY_SCRIPT = r'''
import json
import dill
import sertrace
import sertrace.dill as sd
sd.install()

class NoisyError(Exception):
    calls = 0
    def add_note(self, note):  # user code: the hook must not run it
        NoisyError.calls += 1
        raise AssertionError("user add_note called")

class Raises:
    def __reduce__(self):
        raise NoisyError("refused")

out = {}
for name, dumps in (("c", lambda o: sertrace.dumps(o, 4)), ("dill", lambda o: dill.dumps(o, protocol=4))):
    NoisyError.calls = 0
    try:
        dumps({"k": [Raises()]})
    except NoisyError as e:
        out[name] = [NoisyError.calls, list(getattr(e, "__notes__", []))]
print(json.dumps(out))
'''


@pytest.mark.parametrize("traced", [True, False])
def test_notes_never_call_an_overridden_add_note(tmp_path, traced):
    """Both picklers add notes through BaseException.add_note itself (as
    CPython's _PyException_AddNote): an exception class's override is not run."""
    env = {"DISPATCH_TRACE": str(tmp_path / "t.txt")} if traced else {}
    p = traces.run_script(NOISY_SCRIPT, env)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    notes = ["when serializing list item 0", "when serializing dict item 'k'"]
    assert res == {"c": [0, notes], "dill": [0, notes]}, res
