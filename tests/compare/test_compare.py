"""sertrace.compare and `python3 -m sertrace compare` (issue 15 item 2).

The closure workload (workloads/dispatch_like_state.py: a cell, a nested
function and a lambda on one coroutine's stack): plain pickle refuses it and
the result names the refused subtree (path, tag, type, message, from the
trace); dill and cloudpickle write it, and their totals equal the lengths of
their real dumps(), computed here independently.  A plain state: all three
agree with their real lengths.  Every figure is checked for consistency
where it can be: a dump's type rows (self bytes) add up to its root
pattern's bytes; the root plus the fixed header and trailer is the payload.
The CLI: text, --json, --serializers, --protocol, --help, usage errors
(exit 2).  Missing serializers: a real interpreter without site-packages
(python3 -S), where dill and cloudpickle cannot be imported.
"""
import io
import json
import os
import pickle
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.realpath(os.path.join(HERE, "..", "..", "workloads"))
sys.path.insert(0, WORKLOADS)
PY = os.environ.get("SERTRACE_TEST_PYTHON", sys.executable)

dill = pytest.importorskip("dill")
cloudpickle = pytest.importorskip("cloudpickle")
import dispatch_like_state as m  # noqa: E402

import sertrace  # noqa: E402
import sertrace.comparison as sc  # noqa: E402


def by_name(result):
    return {o.name: o for o in result.outcomes}


def column(result, name, kind):
    return {n: vals[name] for k, n, vals in result.rows if k == kind and vals.get(name) is not None}


def check_consistent(result, name, root, total=None):
    """The rows of one serializer add up: its type rows (self bytes) sum to the root
    pattern's bytes, and the root is the payload minus PROTO+FRAME+STOP (12 bytes at
    protocol >= 4 for a payload in one frame, 2+1 below protocol 4).  `total`: the
    payload's length when it is not the outcome's bytes (a partial payload)."""
    o = by_name(result)[name]
    paths, types = column(result, name, "path"), column(result, name, "type")
    assert sum(types.values()) == paths[root], (name, types, paths[root])
    header = 12 if o.protocol >= 4 else 3
    assert paths[root] + header == (o.bytes if total is None else total), (name, paths[root])


def closure_values(obj):
    """The cell, nested function and lambda on the root coroutine's stack, with their
    positions there."""
    root = next(iter(obj.suspended.values()))
    return [(i, e[1]) for i, e in enumerate(root.frame.stack)
            if isinstance(e, tuple) and type(e[1]).__name__ in ("cell", "function")]


def pickle_without(obj, replaced, protocol=None):
    """pickle's own payload with the objects in `replaced` (by identity) written as the
    persistent id 0: what compare() must have measured as pickle's partial payload."""
    ids = {id(x) for x in replaced}

    class P(pickle.Pickler):
        def persistent_id(self, o):
            return 0 if id(o) in ids else None
    f = io.BytesIO()
    P(f, protocol).dump(obj)
    return f.getvalue()


def test_closure_workload_pickle_refuses_the_cell_dill_and_cloudpickle_exact():
    obj = m.build_state_with_closures(4)
    r = sc.compare(obj)
    o = by_name(r)
    assert [x.name for x in r.outcomes] == ["pickle", "dill", "cloudpickle"]
    # pickle: refused, and every refused subtree named (the cell, the nested function,
    # the lambda on the root coroutine's stack), each with its pattern and count
    assert o["pickle"].status == "refused"
    assert o["pickle"].bytes is None
    assert "cannot pickle 'cell' object" in o["pickle"].error
    with pytest.raises(TypeError):
        pickle.dumps(obj)
    vals = closure_values(obj)
    assert [type(v).__name__ for i, v in vals] == ["cell", "function", "function"]
    pattern = "State.suspended[*].frame.stack[*][*]"
    assert o["pickle"].refused == [
        {"path": pattern, "paths": ["State.suspended[0].frame.stack[%d][1]" % i],
         "count": 1, "tag": tag, "type": typ, "message": msg}
        for (i, v), tag, typ, msg in zip(
            vals, ("R", "F2", "F2"),
            ("cell", "dispatch_like_state._make_closure_values.<locals>.keep",
             "dispatch_like_state._make_closure_values.<locals>.<lambda>"),
            ("cannot pickle 'cell' object",
             "Can't pickle local object '_make_closure_values.<locals>.keep'",
             "Can't pickle local object '_make_closure_values.<locals>.<lambda>'"))]
    # ... and compared for the rest: its partial payload is pickle's own with those
    # three objects written as persistent ids, and the traced total is its length
    partial = pickle_without(obj, [v for i, v in vals])
    assert o["pickle"].partial == {"bytes": len(partial), "stand_ins": 3, "stand_in_bytes": 3,
                                   "refused_objects": 3}
    assert partial.count(b"K\x00Q") >= 3  # BININT1 0, BINPERSID
    # dill and cloudpickle: totals are their real lengths
    assert o["dill"].status == "ok" and o["cloudpickle"].status == "ok"
    assert o["dill"].bytes == o["dill"].traced_bytes == len(dill.dumps(obj))
    assert o["cloudpickle"].bytes == o["cloudpickle"].traced_bytes == len(cloudpickle.dumps(obj))
    assert o["dill"].protocol == dill.settings["protocol"]
    assert o["cloudpickle"].protocol == cloudpickle.DEFAULT_PROTOCOL
    assert r.compared == ["pickle", "dill", "cloudpickle"]
    for name in r.compared:
        check_consistent(r, name, "State", total=len(partial) if name == "pickle" else None)
    rows = {(k, n): v for k, n, v in r.rows}
    # pickle's column: rows that contain the stand-ins are marked partial, the refused
    # pattern's parts that only dill and cloudpickle wrote are 'refused', and the type
    # rows made only of stand-ins (cell, the two functions) are 'refused'
    assert r.mark("path", "State", "pickle") == "partial"
    assert r.mark("path", pattern, "pickle") == "partial"  # stand-ins among its 12 nodes
    assert r.mark("path", pattern + "(args)", "pickle") == "refused"
    assert rows[("path", pattern + "(args)")]["pickle"] is None
    assert rows[("path", pattern + "(args)")]["dill"] > 0
    assert r.mark("type", "cell", "pickle") == "refused"
    assert r.mark("type", "function", "pickle") == "refused"
    assert rows[("type", "cell")]["pickle"] == 3 and rows[("type", "function")]["pickle"] == 6
    # rows outside the refused subtrees: exact figures of the partial payload, and
    # where pickle and dill write the same bytes (plain data that dill writes with
    # pickle's own savers, sharing no object with the refused subtrees) they are equal
    for row in ("State.suspended[*].result", "State.suspended[*].function",
                "State.suspended[*].kwargs", "State.suspended[*].args[*][*][*]",
                "State.suspended[*].wrapped.args", "State(reconstructor)"):
        assert r.mark("path", row, "pickle") is None, row
        assert rows[("path", row)]["pickle"] == rows[("path", row)]["dill"] > 0, row
    # ... but not State.suspended[*].args: the dict keys 'id' and 'score' of two
    # coroutines' args are the very str objects of the nested function's and the
    # lambda's code (interned constants).  dill writes them first inside the stack
    # of coroutine 0 and refers back to them (a memo GET) in the args; the partial
    # payload, without those subtrees, writes them out in full there.
    consts = [c for i, v in vals if type(v).__name__ == "function" for c in v.__code__.co_consts]
    shared = {k for rec in obj.suspended.values() for a in rec.args
              for d in (a if isinstance(a, list) else [a]) if isinstance(d, dict)
              for k in d if any(k is c for c in consts)}
    assert shared == {"id", "score"}
    assert rows[("path", "State.suspended[*].args")]["pickle"] > \
        rows[("path", "State.suspended[*].args")]["dill"]
    assert rows[("path", "State.suspended[*].args")]["dill"] == \
        rows[("path", "State.suspended[*].args")]["cloudpickle"]
    assert rows[("path", "State")]["dill"] != rows[("path", "State")]["cloudpickle"]
    text = r.text()
    assert "refused R cell at State.suspended[0].frame.stack[0][1]: cannot pickle 'cell' object" \
        in text
    assert ("partial: {:,} B without 3 refused subtrees (each replaced by a 3-byte persistent "
            "id)".format(len(partial))) in text
    assert "not len(pickle.dumps(obj)), which does not exist" in text
    assert text.rstrip().splitlines()[-2].split()[:3] == [
        "{:,}p".format(len(partial)), "{:,}".format(o["dill"].bytes),
        "{:,}".format(o["cloudpickle"].bytes)]
    assert "{:,}".format(o["dill"].bytes) in text and "{:,}".format(o["cloudpickle"].bytes) in text
    assert "BUG" not in text
    doc = json.loads(r.json())
    assert doc["format"] == "sertrace-compare"
    assert doc["compared"] == ["pickle", "dill", "cloudpickle"]
    assert doc["total"] == {"dill": o["dill"].bytes, "cloudpickle": o["cloudpickle"].bytes}
    assert doc["partial_total"] == {"pickle": len(partial)}
    sp = doc["serializers"][0]
    assert sp["status"] == "refused" and sp["partial"] is True and sp["exact"] is False
    assert sp["bytes"] is None and sp["partial_bytes"] == len(partial)
    assert sp["stand_ins"] == 3 and sp["stand_in_bytes"] == 3
    assert [(x["path"], x["type"], x["count"]) for x in sp["refused"]] == [
        (pattern, "cell", 1),
        (pattern, "dispatch_like_state._make_closure_values.<locals>.keep", 1),
        (pattern, "dispatch_like_state._make_closure_values.<locals>.<lambda>", 1)]
    jrows = {(x["kind"], x["name"]): x for x in doc["rows"]}
    assert jrows[("path", "State")]["marks"] == {"pickle": "partial"}
    assert jrows[("type", "cell")]["marks"] == {"pickle": "refused"}
    assert "marks" not in jrows[("path", "State.suspended[*].result")]


class Holder:
    """A module-level class (pickled by reference by all three): refused things first,
    then plain data."""

    def __init__(self, fn, cells, data):
        self.fn = fn
        self.cells = cells
        self.data = data


def make_cell(v):
    def f():
        return v
    return f.__closure__[0]


def plain_data(n):
    # distinct objects only (no memo hit inside), strings made at run time (interned
    # by no code object), so that every serializer writes them with pickle's savers
    return {"row%d" % i: ["v%d" % (i * 7 + j) for j in range(3)] + [i, i * 0.5]
            for i in range(n)}


@pytest.mark.parametrize("protocol", [4, 5])
def test_partial_rows_equal_dills_where_they_must(protocol):
    """Outside the refused subtrees, with no object shared with them and no memo index
    written (protocol 4+ memoizes with MEMOIZE, and the data has no back-reference),
    pickle's partial payload writes the same bytes as dill for the same data."""
    cells = [make_cell(i) for i in range(3)]
    obj = Holder(lambda x: x + 1, cells, plain_data(20))
    r = sc.compare(obj, serializers=("pickle", "dill"), protocol=protocol)
    o = by_name(r)
    assert o["pickle"].status == "refused" and o["dill"].status == "ok"
    partial = pickle_without(obj, [obj.fn] + cells, protocol)
    assert o["pickle"].partial == {"bytes": len(partial), "stand_ins": 4, "stand_in_bytes": 3,
                                   "refused_objects": 4}
    assert [(x["path"], x["type"], x["count"]) for x in o["pickle"].refused] == [
        ("Holder.fn", "%s.test_partial_rows_equal_dills_where_they_must.<locals>.<lambda>"
         % __name__, 1), ("Holder.cells[*]", "cell", 3)]
    assert o["pickle"].refused[1]["paths"] == ["Holder.cells[%d]" % i for i in range(3)]
    rows = {(k, n): v for k, n, v in r.rows}
    data_rows = [n for k, n in rows if k == "path" and n.startswith("Holder.data")]
    assert {"Holder.data", "Holder.data[*]"} <= set(data_rows)  # str, int, float: folded
    for n in data_rows:
        assert r.mark("path", n, "pickle") is None
        assert rows[("path", n)]["pickle"] == rows[("path", n)]["dill"], n
    # the refused rows: pickle wrote only stand-ins there
    assert r.mark("path", "Holder.fn", "pickle") == "refused"
    assert r.mark("path", "Holder.cells[*]", "pickle") == "refused"
    assert r.mark("path", "Holder.cells", "pickle") == "partial"
    assert rows[("path", "Holder.cells")]["pickle"] == \
        rows[("path", "Holder.cells[*]")]["pickle"] + 4  # EMPTY_LIST MEMOIZE MARK ... APPENDS
    assert r.mark("type", "cell", "pickle") == "refused"
    assert rows[("type", "cell")]["pickle"] == 9
    check_consistent(r, "pickle", "Holder", total=len(partial))
    check_consistent(r, "dill", "Holder")
    assert "refused R cell x3 at Holder.cells[*] (first Holder.cells[0])" in r.text()


def test_partial_at_protocol_0_is_pickles_own():
    """Protocol 0 writes a persistent id as a text line ('P0' newline, 3 bytes too)."""
    obj = Holder(None, [make_cell(1)], plain_data(3))
    r = sc.compare(obj, serializers=("pickle",), protocol=0)
    o = by_name(r)["pickle"]
    ids = {id(obj.cells[0])}

    class P(pickle.Pickler):
        def persistent_id(self, x):
            return "0" if id(x) in ids else None
    f = io.BytesIO()
    P(f, 0).dump(obj)
    assert b"P0\n" in f.getvalue()
    assert o.partial == {"bytes": len(f.getvalue()), "stand_ins": 1, "stand_in_bytes": 3,
                         "refused_objects": 1}
    assert r.compared == ["pickle"]


def test_partial_bounded_and_refusals_that_cannot_be_replaced(monkeypatch):
    obj = Holder(None, [make_cell(i) for i in range(3)], [1])
    monkeypatch.setattr(sc, "MAX_REFUSED", 2)
    r = sc.compare(obj, serializers=("pickle", "dill"))
    o = by_name(r)["pickle"]
    assert o.status == "refused" and o.partial is None
    assert o.partial_error == ("more than 2 objects refused (the next: TypeError: cannot pickle "
                               "'cell' object): no partial payload")
    assert r.compared == ["dill"] and json.loads(r.json())["partial_total"] == {}
    assert "no partial payload: more than 2 objects refused" in r.text()
    monkeypatch.setattr(sc, "MAX_REFUSED", 3)
    assert by_name(sc.compare(obj, serializers=("pickle",)))["pickle"].partial["stand_ins"] == 3
    # the object itself refused: nothing else to compare
    r = sc.compare(make_cell(0), serializers=("pickle",))
    o = by_name(r)["pickle"]
    assert o.partial is None and o.partial_error == \
        "the object itself is refused: nothing else to compare"
    assert r.compared == [] and "nothing to compare" in r.text()


class FreshCell:
    """Its __reduce__ makes a new cell at each call: a refused object that cannot be
    replaced by identity."""

    def __reduce__(self):
        return (FreshCell, (make_cell(1),))


def test_partial_a_refused_object_made_anew_and_one_referenced_twice():
    r = sc.compare(Holder(None, [FreshCell()], [1, 2]), serializers=("pickle",))
    o = by_name(r)["pickle"]
    assert o.partial is None
    assert o.partial_error == ("the object refused at Holder.cells[0](args)[0] is made anew at "
                               "each dump (by a __reduce__): it cannot be replaced by identity")
    assert o.refused[0]["paths"] == ["Holder.cells[0](args)[0]"]
    # one cell twice: one refused object, two persistent ids (pickle would have written
    # a memo reference the second time; a persistent id is not memoized)
    c = make_cell(2)
    obj = Holder(None, [c, c], [1])
    o = by_name(sc.compare(obj, serializers=("pickle",)))["pickle"]
    assert o.partial == {"bytes": len(pickle_without(obj, [c])), "stand_ins": 2,
                         "stand_in_bytes": 3, "refused_objects": 1}
    assert [(x["path"], x["count"]) for x in o.refused] == [("Holder.cells[*]", 1)]


@pytest.mark.parametrize("protocol", [None, 2, 5])
def test_plain_state_all_three_equal_their_real_lengths(protocol):
    obj = m.build_state(16)
    r = sc.compare(obj, protocol=protocol)
    o = by_name(r)
    real = {"pickle": pickle.dumps(obj, protocol), "dill": dill.dumps(obj, protocol),
            "cloudpickle": cloudpickle.dumps(obj, protocol)}
    for name, b in real.items():
        assert o[name].status == "ok", (name, o[name].as_dict())
        assert o[name].bytes == o[name].traced_bytes == len(b)
        if protocol is not None:
            assert o[name].protocol == protocol
    assert r.compared == ["pickle", "dill", "cloudpickle"]
    # nothing refused: no partial payload, no marks, exactly as before
    assert all(x.partial is None and x.partial_error is None and x.refused == []
               for x in r.outcomes)
    doc = json.loads(r.json())
    assert doc["partial_total"] == {} and not any("marks" in x for x in doc["rows"])
    assert all(s["partial"] is False and s["exact"] is True for s in doc["serializers"])
    assert "partial" not in r.text() and "refused" not in r.text()
    if protocol is not None and protocol < 4:
        root_paths = [n for k, n, v in r.rows if k == "path" and n == "State"]
        assert root_paths == ["State"]
    else:
        for name in r.compared:
            if o[name].bytes < 65536:
                check_consistent(r, name, "State")
    # every pattern the three write is a row with a value in every column
    for kind, name, vals in r.rows:
        assert set(vals) == {"pickle", "dill", "cloudpickle"}
    pats = {n for k, n, v in r.rows if k == "path"}
    assert {"State", "State.suspended[*]", "State.suspended[*].frame.stack[*]"} <= pats
    assert r.text().rstrip().splitlines()[-1].split()[:3] == [
        "{:,}".format(len(real[n])) for n in ("pickle", "dill", "cloudpickle")]


def test_compare_leaves_the_program_as_it_was():
    import cloudpickle.cloudpickle_fast as cpf
    import sertrace.dill as sdill
    before = (cpf.Pickler, cloudpickle.Pickler, sdill.is_traced(dill.Pickler), dill._dill.logger)
    sc.compare({"a": [1, 2, 3]})
    assert (cpf.Pickler, cloudpickle.Pickler, sdill.is_traced(dill.Pickler),
            dill._dill.logger) == before
    # nothing listens any more: a dump after compare() is not captured, and a second
    # compare works
    assert len(sertrace.dumps([1])) == len(pickle.dumps([1]))
    assert by_name(sc.compare([1, 2]))["pickle"].bytes == len(pickle.dumps([1, 2]))


def test_a_mismatch_is_reported_as_a_bug_and_its_figures_left_out(monkeypatch):
    """The check can fail: a 'real' dumps that returns one byte more than the traced one."""
    orig = sc._PAIRS["pickle"]

    def lying(protocol):
        (real, traced), why = orig(protocol)
        return (lambda obj: real(obj) + b".", traced), why
    monkeypatch.setitem(sc._PAIRS, "pickle", lying)
    obj = m.build_state(2)
    r = sc.compare(obj, serializers=("pickle", "dill"))
    o = by_name(r)
    assert o["pickle"].status == "mismatch"
    assert o["pickle"].problems == ["the trace counted %d bytes, len(pickle.dumps()) is %d"
                                    % (len(pickle.dumps(obj)), len(pickle.dumps(obj)) + 1)]
    assert r.compared == ["dill"]
    assert all(set(v) == {"dill"} for k, n, v in r.rows)
    assert "BUG (sertrace): the trace counted" in r.text()
    assert json.loads(r.json())["serializers"][0]["exact"] is False


def test_a_partial_payload_that_disagrees_is_reported_as_a_bug(monkeypatch):
    """The partial payload's check can fail too: pickle's own partial dump made one byte
    longer than the traced one."""
    import _pickle
    orig = sc._partial_class

    def lying(base):
        cls = orig(base)
        if base is not _pickle.Pickler:
            return cls

        class Longer(cls):
            def __init__(self, file, *args):
                cls.__init__(self, file, *args)
                self._out = file

            def dump(self, obj):
                cls.dump(self, obj)
                self._out.write(b".")
        return Longer
    monkeypatch.setattr(sc, "_partial_class", lying)
    c = make_cell(3)
    obj = Holder(None, [c], [1, 2])
    r = sc.compare(obj, serializers=("pickle", "dill"))
    o = by_name(r)["pickle"]
    n = len(pickle_without(obj, [c]))
    assert o.status == "refused" and o.partial is None
    assert o.problems == ["the trace counted %d bytes for the partial payload, its len() is %d"
                          % (n, n + 1)]
    assert r.compared == ["dill"] and "BUG (sertrace): the trace counted" in r.text()


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown serializer 'marshal'"):
        sc.compare(1, serializers=("pickle", "marshal"))
    with pytest.raises(ValueError, match="protocol"):
        sc.compare(1, protocol=9)
    with pytest.raises(ValueError, match="at most once"):
        sc.compare(1, serializers=("dill", "dill"))
    assert by_name(sertrace.compare([1], serializers=("pickle",)))["pickle"].bytes == len(pickle.dumps([1]))


def test_not_installed_serializers_are_listed():
    """python3 -S: no site-packages, so neither dill nor cloudpickle can be imported."""
    code = ("import sys, json; sys.path.insert(0, %r); import sertrace.comparison as sc; "
            "r = sc.compare([1, 2]); print(r.json()); print(r.text())" % WORKLOADS)
    p = subprocess.run([PY, "-S", "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    if p.returncode != 0 and "No module named" in p.stderr:
        pytest.skip("the build's package needs site-packages here: " + p.stderr[-200:])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout[:p.stdout.index("\n}") + 2])
    st = {s["name"]: s["status"] for s in doc["serializers"]}
    assert st == {"pickle": "ok", "dill": "not installed", "cloudpickle": "not installed"}
    assert doc["total"] == {"pickle": len(pickle.dumps([1, 2]))}
    assert "not installed" in p.stdout


def cli(*args, cwd=WORKLOADS):
    return subprocess.run([PY, "-m", "sertrace", "compare"] + list(args), cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))


def test_cli_text_and_json():
    p = cli("dispatch_like_state:build_state_with_closures(4)")
    assert p.returncode == 0, p.stderr
    obj = m.build_state_with_closures(4)
    assert "refused R cell at State.suspended[0].frame.stack[0][1]" in p.stdout
    assert "{:,}".format(len(dill.dumps(obj))) in p.stdout
    # pickle's column is its partial payload, marked as such in the TOTAL row and below
    n = len(pickle_without(obj, [v for i, v in closure_values(obj)]))
    lines = p.stdout.rstrip().splitlines()
    assert lines[-2].split() == [
        "{:,}p".format(n), "{:,}".format(len(dill.dumps(obj))),
        "{:,}".format(len(cloudpickle.dumps(obj))), "*", "TOTAL"]
    assert lines[-1] == ("  (pickle: {:,} B without 3 refused subtrees (each replaced by a "
                         "3-byte persistent id), not len(pickle.dumps(obj)), which does not "
                         "exist)".format(n))
    assert "partial: {:,} B without 3 refused subtrees".format(n) in p.stdout
    assert "'p' figures include the 3-byte persistent ids" in p.stdout
    p = cli("dispatch_like_state:build_state(3)", "--json", "--serializers", "pickle,cloudpickle",
            "--protocol", "3")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    st = m.build_state(3)
    assert doc["total"] == {"pickle": len(pickle.dumps(st, 3)),
                            "cloudpickle": len(cloudpickle.dumps(st, 3))}
    assert [s["protocol"] for s in doc["serializers"]] == [3, 3]
    assert doc["object"].startswith("dispatch_like_state:build_state(3)")


def test_cli_help_and_usage_errors():
    p = cli("--help")
    assert p.returncode == 0
    for word in ("MODULE:EXPR", "--serializers", "--protocol", "--json", "Exit status"):
        assert word in p.stdout
    top = subprocess.run([PY, "-m", "sertrace", "--help"], capture_output=True, text=True)
    assert top.returncode == 0 and "compare MODULE:EXPR" in top.stdout
    for args, words in [((), "give MODULE:EXPR"),
                        (("dispatch_like_state",), "expected MODULE:EXPR"),
                        (("no_such_module_here:x",), "cannot import 'no_such_module_here'"),
                        (("dispatch_like_state:no_such_name",), "NameError"),
                        (("dispatch_like_state:build_state(1)", "--serializers", "json"),
                         "--serializers takes"),
                        (("dispatch_like_state:build_state(1)", "--protocol", "9"),
                         "--protocol takes"),
                        (("dispatch_like_state:build_state(1)", "--protocol"), "needs a value"),
                        (("dispatch_like_state:build_state(1)", "--frobnicate"),
                         "unknown option"),
                        (("a:b", "c:d"), "one MODULE:EXPR only")]:
        p = cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert words in p.stderr, (args, p.stderr)
        assert p.stdout == ""


def test_other_threads_dumps_are_not_captured_and_calls_take_turns():
    """While one thread compares, another pickles (and compares) at the same time: each
    comparison has exactly its own object's figures."""
    import threading
    big = m.build_state(8)
    small = {"k": list(range(50))}
    results, errors = {}, []

    def worker(name, obj, n):
        try:
            for _ in range(n):
                sertrace.dumps(big)  # a traced dump of another object, on this thread
                results.setdefault(name, []).append(sc.compare(obj, serializers=("pickle", "dill")))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=worker, args=("big", big, 3)),
          threading.Thread(target=worker, args=("small", small, 6))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for name, obj in (("big", big), ("small", small)):
        for r in results[name]:
            o = by_name(r)
            assert o["pickle"].status == "ok" and o["dill"].status == "ok"
            assert o["pickle"].bytes == len(pickle.dumps(obj))
            assert o["dill"].bytes == len(dill.dumps(obj))


class _StrSecretError(Exception):
    def __str__(self):  # user code: compare must not call it
        return "STR-SECRET-4242"


class _StrRaisesError(Exception):
    def __str__(self):
        raise RuntimeError("__str__ was called")


class _RefusesWith:
    def __init__(self, exc_type):
        self.exc_type = exc_type

    def __reduce__(self):
        raise self.exc_type(object())


def test_a_refusal_is_told_from_the_trace_never_by_the_exceptions_str():
    """The exception a __reduce__ raises is user code: its __str__ may print object
    values or raise.  compare() tells each refusal with the trace's own message (the
    type name for a user exception with non-str args) and never calls str() on it."""
    for exc_type in (_StrSecretError, _StrRaisesError):
        obj = [_RefusesWith(exc_type), list(range(5))]
        result = sc.compare(obj)  # must not raise
        doc, text = result.json(), result.text()
        assert "STR-SECRET" not in doc + text
        assert "__str__ was called" not in doc + text
        for o in result.outcomes:
            assert o.status == "refused", o.name
            assert o.error == "<%s.%s>" % (__name__, exc_type.__qualname__), o.error
            assert [r["path"] for r in o.refused] == ["list[*]"]
        pick = by_name(result)["pickle"]
        assert pick.partial["bytes"] == len(pickle_without(obj, [obj[0]]))


class _GrowsEachCall:
    """Gives other state at each pickling (a counter in __getstate__)."""
    calls = 0

    def __getstate__(self):
        type(self).calls += 1
        return {"n": "x" * type(self).calls}


def test_an_object_that_pickles_differently_each_call_is_no_sertrace_bug():
    """obj's own __getstate__ makes each dumps() one byte longer: the untraced and the
    traced dump differ in length, but the trace counted its own payload exactly.  That
    is said as a note, the figures are the traced dump's, and no BUG is claimed (exit 0
    for the CLI); the stable mismatch of the test above stays a bug."""
    r = sc.compare(_GrowsEachCall())
    for o in r.outcomes:
        assert o.status == "ok" and not o.problems, (o.name, o.problems)
        assert o.bytes == o.traced_bytes
        assert len(o.notes) == 1 and "different length at each call" in o.notes[0]
    assert "BUG (sertrace)" not in r.text() and "note: obj pickles" in r.text()
    assert [s["notes"] for s in json.loads(r.json())["serializers"]] == \
        [o.notes for o in r.outcomes]
    assert r.compared == ["pickle", "dill", "cloudpickle"]


def test_a_partial_payload_of_an_object_that_pickles_differently_each_call():
    """The same for plain pickle's partial payload: [an object whose state grows at each
    call, a generator].  pickle's own partial dump and the traced one differ, and so do
    two of pickle's own: a note, the traced figures, no BUG."""
    obj = [_GrowsEachCall(), (x for x in ())]
    r = sc.compare(obj, serializers=("pickle",))
    (o,) = r.outcomes
    assert o.status == "refused" and not o.problems, o.problems
    assert o.partial is not None and o.partial["stand_ins"] == 1
    assert len(o.notes) == 1 and "differently at each call" in o.notes[0]
    assert "BUG (sertrace)" not in r.text()
    assert [n for k, n, v in r.rows if k == "type" and r.mark(k, n, "pickle") == "refused"] \
        == ["generator"]


def test_compare_inside_a_dump_it_traces_does_not_hang():
    """A __reduce__ of the object compared calls compare() itself: the inner call is
    refused at once (it would wait forever on the capture lock its own thread holds) and
    the outer one says so ("untraceable"), in a real interpreter with a guard against a
    hang (never asserted on time)."""
    code = ("import sertrace.comparison as sc\n"
            "class R:\n"
            "    def __reduce__(self):\n"
            "        sc.compare([1], serializers=('pickle',))\n"
            "        return (list, ())\n"
            "(o,) = sc.compare(R(), serializers=('pickle',)).outcomes\n"
            "print(o.status); print(o.error)\n")
    try:
        p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ))
    except subprocess.TimeoutExpired:
        pytest.fail("compare() inside a dump it traces hung")
    assert p.returncode == 0, p.stderr
    status, error = p.stdout.splitlines()[:2]
    assert status == "untraceable" and "called inside a dump that compare() is tracing" in error
