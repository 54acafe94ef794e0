"""The trace of the pickler, read from the live text tree (DISPATCH_TRACE to
a file, SERTRACE_EXACT=1): root bytes + header + trailer == len(payload),
every node's self bytes >= 0 (children never exceed their parent), exact
sizes of known nodes, memo hits as their own nodes, notes, and the error
event of an unserializable object with its path.

The child process runs the dumps; this process parses the tree with the
shared parser (testlib.tree: the grammar of format/format.h) and reads each
payload's header and trailer with testlib.payload (tests/lib).
"""
import json
import re
import textwrap

import pytest

from testlib import child
from testlib.payload import header_trailer
from testlib.tree import parse, walk

CHILD = textwrap.dedent(r'''
    import json, sys, pickle
    import sertrace

    class Annotated:
        def __reduce__(self):
            sertrace.note("frame", "ip=12 sp=3")
            return (Annotated, (), {"x": [1, 2]})

    UNPICKLABLE = lambda: 0

    class State:
        def __init__(self):
            self.suspended = {3: Frame()}

    class Frame:
        def __init__(self):
            self.stack = [1, 2, UNPICKLABLE]

    shared = ["shared"]
    cases = [
        ("list12", [1, 2]),
        ("memo", [shared, shared]),
        ("nested", {"a": [1, (2, 3)], "b": {"c": shared}, "d": (shared, 1.5, None)}),
        ("annotated", [Annotated()]),
        ("classes", [int, len, pickle.Pickler, Annotated]),
        ("big", [b"x" * 70000, "y" * 100000, list(range(40000)), bytearray(b"z" * 70000)]),
    ]
    out = []
    for label, obj in cases:
        for proto in range(6):
            data = sertrace.dumps(obj, proto)
            assert data == pickle.dumps(obj, proto)
            out.append({"label": label, "proto": proto, "hex": data.hex()})
    try:
        sertrace.dumps(State(), 4)
    except pickle.PicklingError as e:
        out.append({"label": "error", "proto": 4, "hex": "", "notes": e.__notes__})
    print(json.dumps(out))
''')

def run_child(tmp_path, granularity=None):
    tree = tmp_path / "tree.txt"
    env = dict(DISPATCH_TRACE=str(tree), SERTRACE_EXACT="1")
    if granularity:
        env["SERTRACE_GRANULARITY"] = granularity
    proc = child.run(["-c", CHILD], env=env, unset=["SERTRACE_GRANULARITY"], timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    if not tree.exists():
        pytest.skip("the live text probe wrote nothing (DISPATCH_TRACE to a file not built?)")
    return results, parse(tree.read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=[None, "all"], ids=["default", "atoms"])
def traced(request, tmp_path_factory):
    return run_child(tmp_path_factory.mktemp("trace"), request.param), request.param


def test_one_tree_per_dump(traced):
    (results, dumps), _ = traced
    assert len(dumps) == len(results)
    for d in dumps:
        assert d["end"] is not None
        assert len(d["roots"]) == 1


def test_root_plus_header_trailer_is_payload(traced):
    (results, dumps), _ = traced
    for res, d in zip(results, dumps):
        if res["label"] == "error":
            continue
        data = bytes.fromhex(res["hex"])
        root = d["roots"][0]
        assert root["bytes"] + header_trailer(data) == len(data), (res["label"], res["proto"])
        assert re.search(r": %d B, ok" % len(data), d["end"]), d["end"]


def test_children_never_exceed_parent(traced):
    (results, dumps), _ = traced
    for res, d in zip(results, dumps):
        for node in walk(d["roots"][0]):
            if node["bytes"] is None or node["exit_flags"].strip():
                continue
            assert sum(c["bytes"] for c in node["children"]) <= node["bytes"], res["label"]


def find(results, dumps, label, proto):
    for res, d in zip(results, dumps):
        if res["label"] == label and res["proto"] == proto:
            return d["roots"][0]
    raise KeyError(label)


def test_exact_sizes_of_known_nodes(traced):
    (results, dumps), granularity = traced
    root = find(results, dumps, "list12", 2)
    # EMPTY_LIST BINPUT 0 MARK BININT1 1 BININT1 2 APPENDS = 1+2+1+2+2+1
    assert (root["tag"], root["bytes"]) == ("L", 9)
    if granularity == "all":
        assert [(c["tag"], c["bytes"]) for c in root["children"]] == [("I", 2), ("I", 2)]
    else:
        assert root["children"] == []
    root = find(results, dumps, "memo", 2)
    kids = [(c["tag"], c["bytes"]) for c in root["children"]]
    assert kids[0][0] == "L" and kids[1] == ("Mo", 2)  # BINGET 1
    assert "<ref list object" in root["children"][1]["repr"]


def test_globals_and_instances(traced):
    (results, dumps), _ = traced
    root = find(results, dumps, "classes", 4)
    tags = [c["tag"] for c in root["children"]]
    assert tags == ["T4", "F2", "T4", "T4"]
    assert "<class '_pickle.Pickler'>" in root["children"][2]["repr"]
    assert "<class '__main__.Annotated'>" in root["children"][3]["repr"]


def test_note_attached_to_its_node(traced):
    (results, dumps), _ = traced
    root = find(results, dumps, "annotated", 4)
    inst = root["children"][0]
    assert inst["tag"] == "O"
    assert ("frame", "ip=12 sp=3") in inst["notes"]


def test_framing_exact(traced):
    (results, dumps), _ = traced
    for proto in (4, 5):
        root = find(results, dumps, "big", proto)
        assert root["bytes"] > 280000


def test_error_event_with_path(traced):
    (results, dumps), _ = traced
    res, d = results[-1], dumps[-1]
    assert res["label"] == "error"
    assert res["notes"][0] == "when serializing list item 2"
    assert ", error" in d["end"]
    flags = [f for n in walk(d["roots"][0]) for f in n["flags"]]
    assert len(flags) == 1, flags
    assert "State.suspended[3].stack[2]" in flags[0]
    assert "attribute lookup <lambda> on __main__ failed" in flags[0]


# ---- review fixes: the final write, user code, values in the trace -------

def run_script(tmp_path, script, traced=True, granularity=None):
    """Run `script` in a child (traced: DISPATCH_TRACE=<file>, SERTRACE_EXACT=1,
    SERTRACE_GRANULARITY=granularity if given); returns (its stdout parsed as
    JSON, the tree text or None)."""
    tree = tmp_path / "tree.txt"
    env = dict(DISPATCH_TRACE=str(tree), SERTRACE_EXACT="1") if traced else {}
    if granularity:
        env["SERTRACE_GRANULARITY"] = granularity
    proc = child.run(["-c", textwrap.dedent(script)], env=env, timeout=120,
                     unset=["DISPATCH_TRACE", "SERTRACE_EXACT", "SERTRACE_GRANULARITY"])
    assert proc.returncode == 0, proc.stderr
    if not traced:
        return json.loads(proc.stdout), None
    if not tree.exists():
        pytest.skip("the live text probe wrote nothing (DISPATCH_TRACE to a file not built?)")
    return json.loads(proc.stdout), tree.read_text(encoding="utf-8")


FINAL_WRITE_CHILD = r'''
    import io, json, pickle
    import sertrace

    class FailOn:
        """A file whose write() raises OSError on call number `n` (1-based)."""
        def __init__(self, n):
            self.n, self.calls = n, 0
        def write(self, data):
            self.calls += 1
            if self.calls == self.n:
                raise OSError("disk full")
            return len(data)

    def calls_needed(fn):
        f = FailOn(0)
        fn(f)
        return f.calls

    cases = [("small", [1, 2, "abc"]), ("big", [b"x" * 70000, list(range(30000))])]
    out = []
    for label, obj in cases:
        for proto in range(6):
            total = len(pickle.dumps(obj, proto))
            for api in ("dump", "Pickler.dump"):
                if api == "dump":
                    fn = lambda f: sertrace.dump(obj, f, proto)
                else:
                    fn = lambda f: sertrace.Pickler(f, proto).dump(obj)
                n = calls_needed(fn)
                fn(io.BytesIO())                       # ok
                try:
                    fn(FailOn(n))                      # the final write fails
                    raised = False
                except OSError:
                    raised = True
                out.append({"label": label, "proto": proto, "api": api,
                            "total": total, "writes": n, "raised": raised})
    print(json.dumps(out))
'''


def test_failing_final_write_ends_dump_as_error(tmp_path):
    """The last write() of dump()/Pickler.dump() belongs to the dump: when it
    raises, the dump's footer says error (it said ok: the dump ended before
    the final flush), with the total of the bytes handed to write()."""
    results, text = run_script(tmp_path, FINAL_WRITE_CHILD)
    dumps = parse(text)
    assert len(dumps) == 3 * len(results)  # counting the writes, ok, failing
    for i, res in enumerate(results):
        assert res["raised"], res
        ok, failed = dumps[3 * i + 1], dumps[3 * i + 2]
        what = (res["label"], res["proto"], res["api"], res["writes"])
        assert re.search(r": %d B, ok$" % res["total"], ok["end"]), (what, ok["end"])
        assert re.search(r": %d B, error$" % res["total"], failed["end"]), (what, failed["end"])
        flags = [f for root in failed["roots"] for n in walk(root) for f in n["flags"]]
        assert any("disk full" in f for f in flags), (what, flags)
    # The big cases write several times (the failing write is the last one).
    assert {r["writes"] for r in results if r["label"] == "big"} - {1}


USER_CODE_CHILD = r'''
    import json, pickle
    import sertrace

    calls = {"getattribute": 0, "str": 0, "repr": 0}

    class Meta(type):
        def __getattribute__(cls, name):
            calls["getattribute"] += 1
            return type.__getattribute__(cls, name)

    class Klass(metaclass=Meta):
        pass

    class Inst(metaclass=Meta):
        def __init__(self):
            self.x = [1, 2]

    class KeyType(metaclass=Meta):
        pass

    class Loud:
        def __str__(self):
            calls["str"] += 1
            return "loud"
        def __repr__(self):
            calls["repr"] += 1
            return "Loud()"

    class UserError(Exception):
        def __str__(self):
            calls["str"] += 1
            return "user __str__ ran"

    class PlainUserError(Exception):
        pass

    def raiser(exc):
        class Raises:
            def __reduce__(self):
                raise exc
        return Raises()

    ok_cases = [Klass, [Klass, Inst(), Inst()], {"k": Inst(), "c": Klass}, (Inst, Inst())]
    error_cases = [
        {KeyType(): lambda: 0},                                # key named by its type
        [Inst(), raiser(UserError("secret text"))],            # user __str__
        [raiser(UserError(Loud()))],
        [raiser(PlainUserError(Loud()))],                      # BaseException str, user arg
        [raiser(PlainUserError("a", "b"))],
        [raiser(ValueError(Loud()))],                          # builtin type, user arg
        [raiser(KeyError(Loud()))],
        [raiser(OSError(2, "No such file", Loud()))],          # OSError's filename
        [raiser(ValueError("plain message"))],
    ]
    out = {"ok": [], "errors": []}
    for obj in ok_cases:
        for proto in (0, 2, 4):
            calls["getattribute"] = 0
            data = sertrace.dumps(obj, proto)
            n = calls["getattribute"]
            calls["getattribute"] = 0
            assert data == pickle.dumps(obj, proto)
            out["ok"].append([n, calls["getattribute"]])  # sertrace, pickle
    for obj in error_cases:
        before = dict(calls)
        try:
            sertrace.dumps(obj, 4)
            notes = None
        except Exception as e:
            notes = e.__notes__
        out["errors"].append({"calls": {k: calls[k] - before[k] for k in calls},
                              "notes": notes})
    print(json.dumps(out))
'''


def test_trace_runs_no_user_code(tmp_path):
    """Tracing calls no metaclass __getattribute__ (type names come from the
    type's own dict and ht_qualname), no user __str__/__repr__ of an
    exception or its args: the child counts the same calls traced and
    untraced, and the trace shows user exceptions as <Type>."""
    plain, _ = run_script(tmp_path, USER_CODE_CHILD, traced=False)
    traced, text = run_script(tmp_path, USER_CODE_CHILD, traced=True)
    assert traced == plain
    # Pickling itself looks attributes up through the metaclass (pickle
    # does too): the counts compared are not trivially 0.
    assert all(n > 0 and ref > 0 for n, ref in plain["ok"]), plain["ok"]
    assert all(e["notes"] for e in plain["errors"])
    # No user __str__ / __repr__ ran while the failures were traced (the
    # exceptions' own str() is never called by the pickler).
    for e in traced["errors"]:
        assert e["calls"]["str"] == 0 and e["calls"]["repr"] == 0, e
    dumps = parse(text)
    messages = []
    for d in dumps:
        flags = [f for root in d["roots"] for n in walk(root) for f in n["flags"]]
        messages += flags
    errors = [m for m in messages if "UNSERIALIZABLE" in m]
    assert len(errors) == 9, messages
    assert "dict[<KeyType>]" in errors[0]
    # "UNSERIALIZABLE TAG type: message at path" (format.h, the report's
    # wording): the message, without the node before it and the path after
    def message(e):
        return e.split(": ", 1)[1].rsplit(" at ", 1)[0]
    assert errors[1].endswith(": <UserError>: secret text at list[1]"), errors[1]
    assert message(errors[1]) == "<UserError>: secret text", errors[1]
    assert message(errors[2]) == "<UserError>", errors[2]
    assert message(errors[3]) == "<PlainUserError>", errors[3]
    assert message(errors[4]) == "('a', 'b')", errors[4]
    assert message(errors[5]) == "<ValueError>", errors[5]
    assert message(errors[6]) == "<KeyError>", errors[6]
    assert message(errors[7]) == "<FileNotFoundError>", errors[7]
    assert message(errors[8]) == "plain message", errors[8]
    assert "loud" not in text and "Loud()" not in text and "user __str__" not in text


KEYS_CHILD = r'''
    import json
    import sertrace

    class MyStr(str):
        pass

    class Obj:
        pass

    def failing(key, state=False):
        bad = lambda: 0
        if not state:
            return {key: bad}
        o = Obj()
        o.__dict__[key] = bad
        return o

    keys = [
        ("suspended", False), ("suspended", True),
        ("x" * 64, False), ("x" * 65, False), ("x" * 65, True),
        ("password=hunter2", False), ("not an id", True), ("café", False),
        (3, False), (-7, False), (2 ** 63 - 1, False), (2 ** 70, False),
        (True, False), (False, False), (None, False),
        (b"token", False), (1.5, False), (("a", 1), False), (MyStr("abc"), False),
        (frozenset({"secret-in-frozenset"}), False),
    ]
    out = []
    for key, state in keys:
        try:
            sertrace.dumps(failing(key, state), 4)
        except Exception as e:
            out.append(e.__notes__[0])
    print(json.dumps(out))
'''

EXPECTED_KEY_PATHS = [
    "dict['suspended']", "Obj.suspended",
    "dict['%s']" % ("x" * 64), "dict[<str len=65>]", "Obj[<str len=65>]",
    "dict[<str len=16>]", "Obj[<str len=9>]", "dict['café']",
    "dict[3]", "dict[-7]", "dict[9223372036854775807]", "dict[<int>]",
    "dict[True]", "dict[False]", "dict[None]",
    "dict[<bytes len=5>]", "dict[<float>]", "dict[<tuple>]", "dict[<MyStr>]",
    "dict[<frozenset>]",
]


def test_path_keys_show_no_values(tmp_path):
    """Dict keys in the trace's path: short identifiers as 'name' (.name in
    an instance's state), 64-bit ints, None/True/False; every other key as
    <Type> (<str len=N>, <bytes len=N>).  The exception notes keep 3.14's
    wording (repr of keys that are safe to repr): they are in-process."""
    notes, text = run_script(tmp_path, KEYS_CHILD)
    dumps = parse(text)
    assert len(dumps) == len(EXPECTED_KEY_PATHS) == len(notes)
    for d, expected in zip(dumps, EXPECTED_KEY_PATHS):
        flags = [f for root in d["roots"] for n in walk(root) for f in n["flags"]]
        assert len(flags) == 1, flags
        assert flags[0].endswith(" at %s" % expected), (expected, flags[0])
        assert ", error" in d["end"]
    assert notes[0] == "when serializing dict item 'suspended'"
    assert notes[1] == "when serializing dict item 'suspended'"
    assert notes[5] == "when serializing dict item 'password=hunter2'"
    assert notes[15] == "when serializing dict item b'token'"
    assert notes[17] == "when serializing dict item ('a', 1)"
    assert notes[19] == "when serializing dict item <frozenset>"
    for value in ("password", "hunter2", "token", "not an id", "1.5", "secret-in-frozenset",
                  "x" * 65, "1180591620717411303424"):
        assert value not in text, value


# ---- issue 12 item 6: a dump of one atom is one complete node ------------

ATOM_ROOT_CHILD = r'''
    import json, pickle
    import sertrace

    cases = [("none", None), ("true", True), ("int", 5), ("bigint", 2 ** 70),
             ("float", 1.5), ("str", "x"), ("longstr", "y" * 70000),
             ("bytes", b"ab"), ("list", [None])]
    out = []
    for label, obj in cases:
        for proto in range(6):
            data = sertrace.dumps(obj, proto)
            assert data == pickle.dumps(obj, proto), (label, proto)
            out.append({"label": label, "proto": proto, "hex": data.hex()})
    print(json.dumps(out))
'''

ATOM_TAGS = {"none": "A", "true": "A", "int": "I", "bigint": "I", "float": "Fl",
             "str": "Str", "longstr": "Str", "bytes": "By", "list": "L"}


@pytest.mark.parametrize("granularity", [None, "all"], ids=["default", "atoms"])
def test_atom_root_is_one_complete_node(tmp_path, granularity):
    results, text = run_script(tmp_path, ATOM_ROOT_CHILD, granularity=granularity)
    dumps = parse(text)
    assert len(dumps) == len(results)
    for res, d in zip(results, dumps):
        where = (res["label"], res["proto"])
        data = bytes.fromhex(res["hex"])
        assert len(d["roots"]) == 1, where
        root = d["roots"][0]
        assert root["tag"] == ATOM_TAGS[res["label"]], where
        assert root["bytes"] is not None and not root["exit_flags"].strip(), where
        assert root["bytes"] + header_trailer(data) == len(data), where
        assert re.search(r": %d B, ok" % len(data), d["end"]), (where, d["end"])
        if res["label"] == "list":
            # The root rule is for the root only: the None inside the list is
            # a node only when atoms are.
            kids = [c["tag"] for c in root["children"]]
            assert kids == (["A"] if granularity else []), where
        elif res["label"] != "bytes":
            assert root["children"] == [], where


def test_atom_root_text(tmp_path):
    _, text = run_script(tmp_path, '''
        import json, sertrace
        sertrace.dumps(None, 2)
        print("[]")
    ''')
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    assert lines[0].startswith("┬ A: "), text
    assert lines[-1] == "└ # A [1 B]", text


REPR_IN_MESSAGE_CHILD = r'''
    import io, json, pickle
    import sertrace
    import sertrace.dill as sd
    sd.install()   # traces pickle._Pickler (the pyhook) as well

    class Holder:
        def __repr__(self):
            return "REPR-SECRET: {'k': 1}"
        def __reduce__(self):
            return "no_such_global_xyz"

    class NoReduce:
        __reduce_ex__ = None
        def __repr__(self):
            return "LOWER-SECRET"

    out = []
    for obj in (Holder(), [1, Holder()]):
        for dump in (sertrace.dumps, lambda o: pickle._Pickler(io.BytesIO(), 4).dump(o)):
            try:
                dump(obj)
            except Exception as e:
                out.append(str(e))
    print(json.dumps(out))
'''


def test_error_messages_keep_no_object_repr(tmp_path):
    """Pickle names a refused object by its repr ("Can't pickle <repr>: attribute
    lookup ... failed"): the user's exception keeps it, the trace does not (the
    repr is a user's text, possibly a value): both serializers record the
    reason with the repr cut out."""
    out, text = run_script(tmp_path, REPR_IN_MESSAGE_CHILD)
    assert len(out) == 4 and all("REPR-SECRET" in m for m in out), out
    assert "SECRET" not in text, text
    flags = [line for line in text.splitlines() if "!! UNSERIALIZABLE O" in line]
    assert len(flags) == 4, text
    # the C pickler's reason, then pickle.py's (the pyhook traces pickle._Pickler)
    reasons = ("attribute lookup no_such_global_xyz on __main__ failed",
               "it's not found as __main__.no_such_global_xyz")
    for line, reason in zip(flags, reasons * 2):
        assert "Can't pickle \u2026: " + reason + " at " in line, line


TYPE_NAMES_CHILD = r'''
    import gc, sertrace

    class Thing:
        def __reduce__(self):
            return (list, ())

    sertrace.dumps([Thing()], 4)
    Thing.__qualname__ = "Renamed"
    sertrace.dumps([Thing()], 4)
    Thing.__module__ = "elsewhere"
    sertrace.dumps([Thing()], 4)
    for i in range(40):           # types die, new ones may take their addresses
        cls = type("Fresh%d" % i, (), {"__module__": "mod%d" % i, "__reduce__": Thing.__reduce__})
        sertrace.dumps(cls(), 2)
        del cls
        gc.collect()
    print("[]")
'''


def test_type_names_cached_across_dumps_follow_the_type(tmp_path):
    """Type names are kept across dumps (trace.c, trace_type_intern): a class
    whose __qualname__ or __module__ is reassigned, and new classes made
    where dead ones were, are named by what they are now."""
    _, text = run_script(tmp_path, TYPE_NAMES_CHILD)
    names = re.findall(r"O: <(\S+) object at", text)
    expected = ["__main__.Thing", "__main__.Renamed", "elsewhere.Renamed"]
    expected += ["mod%d.Fresh%d" % (i, i) for i in range(40)]
    assert names == expected, names


GLOBAL_NAMES_CHILD = r'''
    import gc, sys, types, sertrace

    def fn():
        pass

    class K:
        pass

    elsewhere = sys.modules["elsewhere"] = types.ModuleType("elsewhere")
    sertrace.dumps([fn, K, fn, K], 4)
    fn.__qualname__ = K.__qualname__ = "Renamed"
    Renamed = fn
    sertrace.dumps([fn, fn], 4)
    Renamed = K
    sertrace.dumps([K, K], 4)
    fn.__module__ = K.__module__ = "elsewhere"
    elsewhere.Renamed = fn
    sertrace.dumps([fn, fn], 4)
    elsewhere.Renamed = K
    sertrace.dumps([K, K], 4)
    for i in range(40):           # functions die, new ones may take their addresses
        f = types.FunctionType(fn.__code__, {})
        f.__module__, f.__qualname__ = "elsewhere", "f%d" % i
        setattr(elsewhere, "f%d" % i, f)
        sertrace.dumps([f, f], 4)
        delattr(elsewhere, "f%d" % i)
        del f
        gc.collect()
    print("[]")
'''


def test_global_names_cached_across_dumps_follow_the_object(tmp_path):
    """The names of classes and functions saved as globals (named by
    themselves, and their memo references) are kept across dumps too
    (trace.c, trace_type_intern): a reassigned __qualname__ or __module__,
    and new functions made where dead ones were, are named by what they are
    now."""
    _, text = run_script(tmp_path, GLOBAL_NAMES_CHILD, granularity="all")
    names = re.findall(r"(?:F\d|T\d|Mo): <((?:ref )?(?:function|class) '?[\w.]+)", text)
    expected = ["function __main__.fn", "class '__main__.K", "ref function __main__.fn",
                "ref class '__main__.K"]
    expected += ["function __main__.Renamed", "ref function __main__.Renamed"]
    expected += ["class '__main__.Renamed", "ref class '__main__.Renamed"]
    expected += ["function elsewhere.Renamed", "ref function elsewhere.Renamed"]
    expected += ["class 'elsewhere.Renamed", "ref class 'elsewhere.Renamed"]
    for i in range(40):
        expected += ["function elsewhere.f%d" % i, "ref function elsewhere.f%d" % i]
    assert names == expected, names
