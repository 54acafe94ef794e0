"""The exports of `sertrace report` (--folded, --speedscope, --perfetto,
--html) on a real trace: tests/cli/dumper.c recorded by the real
lttng-sessiond.  The dumper prints each dump's true payload length, and its
trees are known exactly (a root Map of 20 + n % 7 Arrays holding 1 + i % 4
Scalars of 1 + (7i + 3k) % 50 bytes; 2 header bytes, 1 trailer byte): every
format must add up to each payload, and folded/speedscope/HTML must give
each node exactly its self bytes.
"""
import collections
import json
import os
import re

import pytest

from conftest import needs_build, run, summary_of

pytestmark = needs_build


def model(n):
    """(frames, self bytes) of dump n of the dumper, in pre-order."""
    width = 20 + n % 7
    out = [((), 3), (("test.Map",), 1)]
    for i in range(width):
        out.append((("test.Map", "test.Array"), 1))
        for k in range(1 + i % 4):
            out.append((("test.Map", "test.Array", "test.Scalar"), 1 + (i * 7 + k * 3) % 50))
    return out


@pytest.fixture(scope="module")
def exported(small_trace, tmp_path_factory):
    trace, pid, sizes = small_trace
    d = tmp_path_factory.mktemp("exports")
    paths = {f: d / ("out." + f) for f in ("folded", "speedscope", "perfetto", "html")}
    r = run("report", "--pid", str(pid), *[a for f, p in paths.items() for a in ("--" + f, str(p))],
            str(trace))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    dumps = sorted(summary_of(trace, pid), key=lambda x: x["dump_id"])
    assert [x["payload_bytes"] for x in dumps] == [sizes[n] for n in sorted(sizes)]
    # dump n of the dumper is the n-th dump id of its process
    by_id = {x["dump_id"]: n for n, x in enumerate(dumps)}
    return paths, pid, sizes, by_id


def test_folded_lines_are_each_nodes_self_bytes(exported):
    paths, pid, sizes, by_id = exported
    got = collections.defaultdict(list)
    for line in paths["folded"].read_text().splitlines():
        stack, count = line.rsplit(" ", 1)
        frames = stack.split(";")
        m = re.fullmatch(r"cli-test dump (\d+) pid (\d+)", frames[0])
        assert m, line
        assert int(m.group(2)) == pid
        got[int(m.group(1))].append((tuple(frames[1:]), int(count)))
    assert sorted(by_id[i] for i in got) == sorted(sizes)
    for dump_id, lines in got.items():
        n = by_id[dump_id]
        assert lines == model(n)
        assert sum(c for _, c in lines) == sizes[n]


SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "speedscope-file-format-schema.json")


def schema_errors(value, schema, root, where="$"):
    """Errors of `value` against the JSON Schema (draft-07) keywords that
    speedscope's file-format schema uses: $ref, type, const, enum,
    properties, required, items, anyOf.  Any other keyword fails loudly."""
    known = {"$ref", "$schema", "definitions", "title", "type", "const", "enum",
             "properties", "required", "items", "anyOf"}
    unknown = set(schema) - known
    assert not unknown, "schema keyword(s) not handled: %s" % unknown
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return schema_errors(value, node, root, where)
    if "anyOf" in schema:
        if all(schema_errors(value, s, root, where) for s in schema["anyOf"]):
            return ["%s: matches none of anyOf" % where]
        return []
    types = {"object": dict, "array": list, "string": str, "number": (int, float)}
    t = schema.get("type")
    if t and (not isinstance(value, types[t]) or (t == "number" and isinstance(value, bool))):
        return ["%s: not a %s" % (where, t)]
    errs = []
    if "const" in schema and value != schema["const"]:
        errs.append("%s: %r is not %r" % (where, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        errs.append("%s: %r not in %r" % (where, value, schema["enum"]))
    for k in schema.get("required", []):
        if k not in value:
            errs.append("%s: %s missing" % (where, k))
    for k, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and k in value:
            errs += schema_errors(value[k], sub, root, "%s.%s" % (where, k))
    if "items" in schema and isinstance(value, list):
        for i, v in enumerate(value):
            errs += schema_errors(v, schema["items"], root, "%s[%d]" % (where, i))
    return errs


def test_speedscope_file_follows_speedscopes_schema(exported):
    """Checked against speedscope's own schema (file-format-schema.json of
    the speedscope 1.25.0 npm package, kept beside this test)."""
    with open(SCHEMA) as f:
        schema = json.load(f)
    doc = json.loads(exported[0]["speedscope"].read_text())
    assert schema_errors(doc, schema, schema) == []
    # and the checker does catch a bad file
    doc["profiles"][0]["unit"] = "furlongs"
    del doc["shared"]
    assert len(schema_errors(doc, schema, schema)) >= 2


def test_speedscope_profiles_add_up_to_each_payload(exported):
    paths, pid, sizes, by_id = exported
    doc = json.loads(paths["speedscope"].read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [f["name"] for f in doc["shared"]["frames"]]
    assert len(frames) == len(set(frames)), "frames are shared, each name once"
    # the type frames are shared by all six profiles
    assert sum(1 for f in frames if f.startswith("test.")) == 3
    assert len(doc["profiles"]) == 6
    for p in doc["profiles"]:
        assert p["type"] == "evented" and p["unit"] == "bytes"
        m = re.fullmatch(r"cli-test dump (\d+), pid (\d+)", p["name"])
        n = by_id[int(m.group(1))]
        assert int(m.group(2)) == pid
        assert p["startValue"] == 0 and p["endValue"] == sizes[n]
        # events nest, never go back in time, and give each frame its self bytes
        stack, last, selfs = [], 0, []
        for e in p["events"]:
            assert e["at"] >= last
            last = e["at"]
            if e["type"] == "O":
                stack.append([e["frame"], e["at"], 0, len(selfs)])
                selfs.append(None)
            else:
                frame, opened, inner, slot = stack.pop()
                assert frame == e["frame"]
                selfs[slot] = (frame, e["at"] - opened - inner)
                if stack:
                    stack[-1][2] += e["at"] - opened
        assert not stack
        expect = model(n)
        assert [s for _, s in selfs] == [s for _, s in expect]
        assert [frames[f] for f, _ in selfs[1:]] == [fr[-1] for fr, _ in expect[1:]]
        assert sum(s for _, s in selfs) == sizes[n]


def test_perfetto_has_one_complete_event_per_dump(exported):
    paths, pid, sizes, by_id = exported
    doc = json.loads(paths["perfetto"].read_text())
    events = doc["traceEvents"]
    assert len(events) == 6
    seen = set()
    for e in events:
        assert e["ph"] == "X" and e["pid"] == pid and e["tid"] == pid
        assert e["dur"] >= 0 and e["ts"] > 0
        a = e["args"]
        n = by_id[a["dump_id"]]
        seen.add(n)
        assert a["serializer"] == "cli-test" and a["status"] == "ok" and a["complete"]
        assert a["payload_bytes"] == sizes[n]
        assert a["root_bytes"] == sizes[n] - 3
        assert a["nodes"] == len(model(n)) - 1
        assert e["name"] == "cli-test dump %d" % a["dump_id"]
    assert seen == set(sizes)


def html_blocks(text):
    return {int(k): json.loads(v) for k, v in re.findall(
        r'<script type="application/json" id="sertrace-dump-(\d+)">(.*?)</script>', text, re.S)}


def test_html_is_self_contained_and_adds_up(exported):
    paths, pid, sizes, by_id = exported
    text = paths["html"].read_text()
    assert text.startswith("<!DOCTYPE html>")
    # nothing to fetch: no external script, style, font or image
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", text, re.I)
    assert "@import" not in text and "url(" not in text
    index = json.loads(re.search(r'<script type="application/json" id="sertrace-index">(.*?)</script>',
                                 text, re.S).group(1))
    assert index["format"] == "sertrace-html"
    blocks = html_blocks(text)
    assert len(blocks) == len(index["dumps"]) == 6
    for k, b in blocks.items():
        n = by_id[b["dump_id"]]
        assert b["payload_bytes"] == sizes[n] == b["total"]
        assert b["root_bytes"] == sizes[n] - 3 and b["dump_self"] == 3
        assert b["dump_self"] + sum(b["self"]) == sizes[n]
        expect = model(n)[1:]
        assert b["self"] == [s for _, s in expect]
        assert b["depth"] == [len(fr) for fr, _ in expect]
        assert [b["types"][t] for t in b["type"]] == [fr[-1] for fr, _ in expect]
        assert all(f == 0 for f in b["flags"]) and b["complete"]
        entry = index["dumps"][k]
        assert entry == {f: v for f, v in b.items() if f in entry}


def test_html_oversize_flags_nodes(small_trace, tmp_path):
    trace, pid, sizes = small_trace
    out = tmp_path / "o.html"
    r = run("report", "--pid", str(pid), "--oversize", "40", "--html", str(out), str(trace))
    assert r.returncode == 0, r.stderr
    for b in html_blocks(out.read_text()).values():
        flagged = [(x, f) for x, f in zip(b["bytes"], b["flags"])]
        assert all(bool(f & 4096) == (x >= 40) for x, f in flagged)
        assert b["flagged"] == sum(1 for x, _ in flagged if x >= 40) > 0


def test_folded_to_stdout_and_filters(small_trace, tmp_path):
    trace, pid, sizes = small_trace
    r = run("report", "--pid", str(pid), "--dump", "2", "--folded", "-", str(trace))
    assert r.returncode == 0, r.stderr
    firsts = {l.rsplit(" ", 1)[0].split(";")[0] for l in r.stdout.splitlines()}
    assert firsts == {"cli-test dump 2 pid %d" % pid}
    assert sum(int(l.rsplit(" ", 1)[1]) for l in r.stdout.splitlines()) == sizes[1]


@pytest.mark.parametrize("args,words", [
    (["--html", "a.html", "--tree"], "choose one of"),
    (["--folded", "-", "--html", "-"], "only one export can go to stdout"),
    (["--html", "a.html", "--top", "3"], "--top and --exact apply"),
    (["--html", ""], "give a file name"),
])
def test_export_option_errors(small_trace, args, words):
    r = run("report", *args, str(small_trace[0]))
    assert r.returncode == 2
    assert words in r.stderr and len(r.stderr.splitlines()) == 1


def test_unwritable_output_is_one_line(small_trace, tmp_path):
    r = run("report", "--html", str(tmp_path / "no" / "such" / "dir.html"), str(small_trace[0]))
    assert r.returncode == 1
    assert "cannot open" in r.stderr and len(r.stderr.splitlines()) == 1


def test_help_tells_of_the_exports():
    r = run("report", "--help")
    for opt in ("--html OUT.html", "--folded OUT", "--speedscope OUT", "--perfetto OUT"):
        assert opt in r.stdout


def test_demo_pickle_trace_in_every_format(demo_trace, tmp_path):
    """The traced C pickler on the demo workload: the two states add up to
    the lengths pickle.dumps returned; the refused one (status error) keeps
    its unserializable node, message and path, and its notes."""
    from conftest import demo_summary
    trace, sizes = demo_trace
    assert len(sizes) == 2  # the lengths pickle.dumps returned, printed by demo.py
    paths = {f: tmp_path / ("demo." + f) for f in ("folded", "speedscope", "perfetto", "html")}
    r = run("report", *[a for f, p in paths.items() for a in ("--" + f, str(p))], str(trace))
    assert r.returncode == 0, r.stderr
    summary = demo_summary(trace)
    ok = [d for d in summary if d["status"] == "ok"]
    failed = [d for d in summary if d["status"] == "error"]
    assert sorted(d["payload_bytes"] for d in ok) == sorted(sizes)
    assert len(failed) == 1

    blocks = list(html_blocks(paths["html"].read_text()).values())
    assert len(blocks) == 3
    by_id = {b["dump_id"]: b for b in blocks}
    for d in summary:
        b = by_id[d["dump_id"]]
        assert b["payload_bytes"] == d["payload_bytes"] == b["total"]
        assert b["root_bytes"] == d["root_bytes"]
        assert b["dump_self"] + sum(b["self"]) == d["payload_bytes"]
        assert b["nodes"] == d["nodes"]
    fb = by_id[failed[0]["dump_id"]]
    assert fb["status"] == "error"
    [(node, message, path)] = fb["error_list"]
    assert message == "cannot pickle 'cell' object"
    assert path == "State.suspended[0].frame.stack[0][1]"
    assert fb["flags"][node] & 32  # SERTRACE_NODE_ERROR
    assert fb["types"][fb["type"][node]] == "cell"
    notes = [k for _, k, _ in fb["note_list"]]
    assert "coroutine" in notes and "frame" in notes

    folded = collections.Counter()
    for line in paths["folded"].read_text().splitlines():
        stack, count = line.rsplit(" ", 1)
        folded[int(re.match(r"pickle dump (\d+) ", stack).group(1))] += int(count)
    assert folded == {d["dump_id"]: d["payload_bytes"] for d in summary}
    assert any(";dispatch_like_state.State;dict;dict;dispatch_like_state.CoroutineRecord" in l
               for l in paths["folded"].read_text().splitlines())

    perf = {e["args"]["dump_id"]: e["args"] for e in
            json.loads(paths["perfetto"].read_text())["traceEvents"]}
    assert {k: (a["status"], a["payload_bytes"]) for k, a in perf.items()} == \
        {d["dump_id"]: (d["status"], d["payload_bytes"]) for d in summary}
    assert perf[failed[0]["dump_id"]]["errors"] == 1

    ss = json.loads(paths["speedscope"].read_text())
    assert sorted(p["endValue"] for p in ss["profiles"]) == \
        sorted(d["payload_bytes"] for d in summary)
