"""End-to-end test of the sertrace runtime under a real LTTng session.

Creates a session with the `lttng` CLI (testlib.lttng, tests/lib: unique
name, own output directory under /tmp, always destroyed), enables `sertrace:*` with the vpid/vtid contexts, runs the
tiny instrumented C serializer (tests/e2e/mini_serializer.c, linked to
libsertrace, no LD_PRELOAD), stops and destroys the session, reads the
trace back with babeltrace2's Python bindings, decodes the batched records
with the small decoder below (written from schema.h, independent of the C
code), and asserts on the events and their fields: dump_begin/dump_end,
exact root size == payload length reported by the program, every node's
children + self == bytes, tags, type names, notes, and the error record
with its message and path.

Needs a running lttng-sessiond (started here if `lttng list` fails) and
Debian's python3 with bt2.  Run by meson (suite 'e2e') with MINI_SERIALIZER
set to the built program.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from testlib.child import untraced_environ as clean_env  # noqa: E402  without the trace knobs
from testlib import lttng as L  # noqa: E402

bt2 = pytest.importorskip("bt2")

SCHEMA_H = os.path.join(os.path.dirname(__file__), "..", "..", "tracepoints", "include",
                        "sertrace", "schema.h")

REC_ENTER, REC_EXIT, REC_TYPE, REC_ERROR, REC_NOTE = 1, 2, 3, 4, 5
REC_EXIT_D, REC_NODE = 0x0A, 0x10  # schema v6: compact records (NODE is 0x10-0x1F)
REC_SATOM = 0x20  # schema v7: short atoms (0x20-0x2F)
REC_DEPTH, REC_TATOM = 0x0B, 0x40  # schema v8: batch depth, tiny atoms (0x40-0x7F)
TAG_MAP, TAG_ARRAY, TAG_SCALAR, TAG_STR, TAG_FUNCTION = 32, 33, 34, 6, 15


def ensure_sessiond():
    if not L.ensure_sessiond():
        pytest.skip("no lttng-sessiond available")


def varint(buf, i):
    value, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def string(buf, i):
    n, i = varint(buf, i)
    return bytes(buf[i:i + n]), i + n


def undelta(base, z):
    """A v6 zigzag delta from `base` (64-bit wrapping)."""
    return (base + ((z >> 1) ^ -(z & 1))) & (2**64 - 1)


def satom_depth(open_nodes, depth8):
    """A v7 SATOM's depth: of those with these low 8 bits, the closest to
    open_nodes + 1 (schema.h, "Short atoms")."""
    want = open_nodes + 1
    d = (depth8 - want) & 0xFF
    if d >= 128 and want > 256 - d:
        d -= 256
    return want + d


def decode(buf, state=None):
    """Decode one records batch into dicts; the batch must end on a record.
    v6 NODE, v7 SATOM and v8 TATOM records come out as the records they
    stand for (a label, then an enter, or an enter and its exit for an
    atom), EXIT_D as an exit; a v8 DEPTH sets the open node count.  `state`
    (a dict shared by the batches of one dump, in order) keeps the open node
    count that gives a SATOM or TATOM its depth."""
    state = {} if state is None else state
    out, i = [], 0
    base_addr = base_pos = base_far = 0  # v6/v8 delta bases, per batch
    while i < len(buf):
        op = buf[i]
        i += 1
        if op == REC_DEPTH:
            state["open"], i = varint(buf, i)
            continue
        if op & 0xC0 == REC_TATOM or op & 0xF0 == REC_SATOM:
            tag, typ = buf[i], buf[i + 1]
            far = False
            if op & 0xC0 == REC_TATOM:  # v8: dpos, size, a 2- or 4-byte address difference
                dpos, size = buf[i + 2], buf[i + 3]
                n = 4 if op & 0x20 else 2
                daddr = int.from_bytes(bytes(buf[i + 4:i + 4 + n]), "little", signed=True)
                depth = state.get("open", 0) + 1
                far = bool(op & 0x10)  # from the static-data base
                i += 4 + n
            else:  # v7: depth8, a 4-byte address difference, dpos, size
                depth = satom_depth(state.get("open", 0), buf[i + 2])
                daddr = int.from_bytes(bytes(buf[i + 3:i + 7]), "little", signed=True)
                dpos, size = buf[i + 7], buf[i + 8]
                i += 9
            length = 0
            if op & 1:
                length, i = varint(buf, i)
            kind = (op >> 1) & 7
            if kind:
                value, i = varint(buf, i)
                out.append(dict(op="label", kind=kind, value=value))
            if far:
                addr = base_far = (base_far + daddr) & (2**64 - 1)
            else:
                addr = base_addr = (base_addr + daddr) & (2**64 - 1)
            pos = base_pos + dpos
            base_pos = pos + size
            out.append(dict(op="enter", tag=tag, depth=depth, type=typ, addr=addr,
                            length=length, pos=pos))
            out.append(dict(op="exit", depth=depth, pos=pos + size))
            continue
        if op & 0xF0 == REC_NODE:
            tag = buf[i]
            i += 1
            depth, i = varint(buf, i)
            typ, i = varint(buf, i)
            zaddr, i = varint(buf, i)
            length, i = varint(buf, i)
            zpos, i = varint(buf, i)
            size = 0
            if op & 1:
                size, i = varint(buf, i)
            kind = (op >> 1) & 7
            if kind:
                value, i = varint(buf, i)
                out.append(dict(op="label", kind=kind, value=value))
            base_addr = undelta(base_addr, zaddr)
            pos = undelta(base_pos, zpos)
            base_pos = pos + size
            out.append(dict(op="enter", tag=tag, depth=depth, type=typ, addr=base_addr,
                            length=length, pos=pos))
            if op & 1:
                out.append(dict(op="exit", depth=depth, pos=pos + size))
            else:
                state["open"] = depth
        elif op == REC_EXIT_D:
            depth, i = varint(buf, i)
            zpos, i = varint(buf, i)
            base_pos = undelta(base_pos, zpos)
            out.append(dict(op="exit", depth=depth, pos=base_pos))
            state["open"] = depth - 1
        elif op == REC_ENTER:
            tag = buf[i]
            i += 1
            depth, i = varint(buf, i)
            typ, i = varint(buf, i)
            addr, i = varint(buf, i)
            length, i = varint(buf, i)
            pos, i = varint(buf, i)
            out.append(dict(op="enter", tag=tag, depth=depth, type=typ, addr=addr,
                            length=length, pos=pos))
            state["open"] = depth
        elif op == REC_EXIT:
            depth, i = varint(buf, i)
            pos, i = varint(buf, i)
            out.append(dict(op="exit", depth=depth, pos=pos))
            state["open"] = depth - 1
        elif op == REC_TYPE:
            typ, i = varint(buf, i)
            name, i = string(buf, i)
            out.append(dict(op="type", type=typ, name=name.decode()))
        elif op == REC_ERROR:
            tag = buf[i]
            i += 1
            depth, i = varint(buf, i)
            typ, i = varint(buf, i)
            msg, i = string(buf, i)
            path, i = string(buf, i)
            out.append(dict(op="error", tag=tag, depth=depth, type=typ, message=msg.decode(),
                            path=path.decode()))
        elif op == REC_NOTE:
            depth, i = varint(buf, i)
            key, i = string(buf, i)
            value, i = string(buf, i)
            out.append(dict(op="note", depth=depth, key=key.decode(), value=value.decode()))
        else:
            raise AssertionError(f"unknown opcode {op} at {i - 1}")
    assert i == len(buf), "a record was split across batches"
    return out



def decode_batches(batches):
    """The records of one dump's (seq, batch) pairs, in order."""
    state = {}
    return [r for _, b in batches for r in decode(b, state)]

def build_tree(records, types):
    """Nodes as dicts with children, from enter/exit records (checks depths)."""
    root, stack = None, []
    for r in records:
        if r["op"] == "enter":
            assert r["depth"] == len(stack) + 1
            node = dict(r, children=[], notes=[], name=types.get(r["type"]))
            if stack:
                stack[-1]["children"].append(node)
            else:
                assert root is None, "two roots in one dump"
                root = node
            stack.append(node)
        elif r["op"] == "exit":
            assert r["depth"] == len(stack)
            node = stack.pop()
            node["bytes"] = r["pos"] - node["pos"]
        elif r["op"] == "note":
            assert r["depth"] == len(stack)
            stack[-1]["notes"].append((r["key"], r["value"]))
        elif r["op"] == "type":
            assert r["type"] not in types
            types[r["type"]] = r["name"]
    return root, stack


def program_path():
    program = os.environ.get("MINI_SERIALIZER")
    if not program:
        pytest.skip("MINI_SERIALIZER not set (run through meson test)")
    return program


def read_events(outdir, pid):
    events = []
    for msg in bt2.TraceCollectionMessageIterator(outdir):
        if type(msg) is not bt2._EventMessageConst:
            continue
        ev = msg.event
        if int(ev.common_context_field["vpid"]) != pid:
            continue  # another program of this uid, traced by our session too
        events.append(ev)
    return events


@pytest.fixture(scope="module")
def trace():
    program = program_path()
    ensure_sessiond()
    with L.session("sertrace-runtime-e2e") as (_, outdir):
        run = subprocess.run([program], check=True, capture_output=True, text=True,
                             env=clean_env(SERTRACE_GRANULARITY="all"))
    report = json.loads(run.stdout)
    events = read_events(outdir, report["pid"])
    shutil.rmtree(outdir, ignore_errors=True)
    return report, events, run.stderr


def dumps_of(events):
    dumps = {}
    for ev in events:
        p = ev.payload_field
        dump_id = int(p["dump_id"])
        d = dumps.setdefault(dump_id, dict(begin=None, batches=[], end=None, vtid=set()))
        d["vtid"].add(int(ev.common_context_field["vtid"]))
        if ev.name == "sertrace:dump_begin":
            d["begin"] = (str(p["serializer"]), int(p["protocol"]))
        elif ev.name == "sertrace:records":
            d["batches"].append((int(p["seq"]), bytes(int(x) for x in p["records"])))
        elif ev.name == "sertrace:dump_end":
            status = p["status"]
            d["end"] = (int(p["bytes"]), int(status), list(status.labels))
    return dumps


def test_event_names_match_schema_header():
    text = open(SCHEMA_H).read()
    for name in ("sertrace:dump_begin", "sertrace:records", "sertrace:dump_end"):
        assert f'"{name}"' in text


def test_two_dumps_with_begin_and_end(trace):
    report, events, stderr = trace
    assert stderr == ""
    dumps = dumps_of(events)
    assert len(dumps) == 2
    ids = sorted(dumps)
    for dump_id, want in zip(ids, report["dumps"]):
        d = dumps[dump_id]
        assert d["begin"] == ("mini", 1)
        label = "ok" if want["status"] == 0 else "error"
        assert d["end"] == (want["payload"], want["status"], [label])
        assert len(d["vtid"]) == 1
    # Events of a dump come in order: begin, records..., end.
    names = [ev.name for ev in events if int(ev.payload_field["dump_id"]) == ids[0]]
    assert names[0] == "sertrace:dump_begin" and names[-1] == "sertrace:dump_end"
    assert set(names[1:-1]) == {"sertrace:records"}


def test_ok_dump_tree_sizes_tags_types_notes(trace):
    report, events, _ = trace
    dumps = dumps_of(events)
    d = dumps[sorted(dumps)[0]]
    want = report["dumps"][0]
    seqs = [s for s, _ in d["batches"]]
    assert seqs == list(range(len(seqs)))
    assert len(seqs) >= 3, "the big dump spans several 4 KiB batches"
    assert all(0 < len(b) <= 4096 for _, b in d["batches"])
    records = decode_batches(d["batches"])
    types = {}
    root, still_open = build_tree(records, types)
    assert still_open == []
    assert root["bytes"] + want["header"] == want["payload"]
    assert root["pos"] == want["header"]
    assert root["tag"] == TAG_MAP and root["name"] == "mini.Map"
    assert root["length"] == 4 + 1

    count = 0

    def walk(node):
        nonlocal count
        count += 1
        child_sum = sum(c["bytes"] for c in node["children"])
        self_bytes = node["bytes"] - child_sum
        assert self_bytes >= 0
        assert child_sum + self_bytes == node["bytes"]
        for c in node["children"]:
            assert node["pos"] <= c["pos"] and c["pos"] + c["bytes"] <= node["pos"] + node["bytes"]
            walk(c)

    walk(root)
    # 1 root + 4 keys + name + items(1 + 11) + coroutines(1 + 300*(1+4)) + empty
    # root + its 8 keys/values + 11 items + 300 coroutine maps of 4 atoms each
    assert count == 1 + 8 + 11 + 300 * 5
    assert set(types.values()) == {"mini.Map", "mini.Array", "mini.str", "mini.int"}
    items = root["children"][3]
    assert items["tag"] == TAG_ARRAY and items["name"] == "mini.Array"
    assert items["length"] == 12
    assert [c["bytes"] for c in items["children"]] == [1] * 10 + [9]
    assert all(c["tag"] == TAG_SCALAR for c in items["children"])
    name = root["children"][0]
    assert name["tag"] == TAG_STR and name["bytes"] == 5 and name["length"] == 5
    coroutines = root["children"][5]
    assert len(coroutines["children"]) == 300
    noted = [(i, c["notes"]) for i, c in enumerate(coroutines["children"]) if c["notes"]]
    assert noted == [(0, [("frame", "ip=0 sp=0")]), (100, [("frame", "ip=100 sp=50")]),
                     (200, [("frame", "ip=200 sp=100")])]
    empty = root["children"][7]
    assert empty["bytes"] == 1 and empty["children"] == []


def test_failed_dump_has_error_with_message_and_path(trace):
    report, events, _ = trace
    dumps = dumps_of(events)
    d = dumps[sorted(dumps)[1]]
    want = report["dumps"][1]
    assert d["end"] == (want["payload"], 1, ["error"])
    records = decode_batches(d["batches"])
    types = {}
    root, still_open = build_tree(records, types)
    # The map, the array and the function node are left open by the error.
    assert [n["tag"] for n in still_open] == [TAG_MAP, TAG_ARRAY, TAG_FUNCTION]
    errors = [r for r in records if r["op"] == "error"]
    assert len(errors) == 1
    err = errors[0]
    assert err["message"] == "cannot serialize a function"
    assert err["path"] == "root.handlers[1]"
    assert err["tag"] == TAG_FUNCTION
    assert err["depth"] == 3
    assert types[err["type"]] == "mini.function"
    assert still_open[2]["pos"] == want["payload"]


def test_session_enabled_after_start_records_without_restart():
    """The program runs first; a session enables sertrace:* afterwards."""
    program = program_path()
    ensure_sessiond()
    proc = subprocess.Popen([program, "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout.readline() == "ready\n"
        with L.session("sertrace-runtime-late") as (_, outdir):
            out, err = proc.communicate("go\n", timeout=60)
            assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = json.loads(out)
    dumps = dumps_of(read_events(outdir, report["pid"]))
    shutil.rmtree(outdir, ignore_errors=True)
    assert len(dumps) == 2
    first = dumps[sorted(dumps)[0]]
    assert first["end"] == (report["dumps"][0]["payload"], 0, ["ok"])
    records = decode_batches(first["batches"])
    root, still_open = build_tree(records, {})
    assert still_open == []
    # Default granularity (containers): only maps and arrays are nodes.
    assert root["bytes"] + 2 == report["dumps"][0]["payload"]
    assert {r["tag"] for r in records if r["op"] == "enter"} == {TAG_MAP, TAG_ARRAY}


def run_text(value, **extra):
    program = program_path()
    return subprocess.run([program], capture_output=True, text=True, check=True,
                          env=clean_env(DISPATCH_TRACE=value, **extra))


def test_dispatch_trace_stderr_prints_the_tree():
    run = run_text("1", SERTRACE_EXACT="1")
    report = json.loads(run.stdout)
    lines = run.stderr.splitlines()
    headers = [line for line in lines if line.startswith("# sertrace dump ")]
    assert len(headers) == 2
    assert headers[0].endswith(" mini protocol 1")
    assert f" pid {report['pid']} " in headers[0]
    payload = report["dumps"][0]["payload"]
    assert f"└ # Map [{payload - 2} B]" in lines  # root closes with its exact size
    assert lines[1] == "┬ Map: <mini.Map object at " + lines[1].split(" at ")[1]
    assert f"# end dump 1: {payload} B, ok" in lines
    # the report's wording (format.h): the node's tag and type, message, path
    assert any(line.startswith("│││ !! UNSERIALIZABLE F2 mini.function: cannot serialize a "
                               "function at root.handlers[1]") for line in lines), lines
    assert lines[-1] == f"# end dump 2: {report['dumps'][1]['payload']} B, error, unfinished"
    # the nodes the failed dump left open: lower bounds, as the report shows them
    assert sum(1 for line in lines if line.endswith("!! FAILED inside") or
               line.endswith("!! FAILED inside !! UNSERIALIZABLE")) == 3
    assert sum(1 for line in lines if "└ # " in line and " [≥ " in line) == 3


def test_dispatch_trace_path_appends(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text("kept\n")
    run = run_text(str(path))
    assert run.stderr == ""
    text = path.read_text()
    assert text.startswith("kept\n# sertrace dump 1 ")
    assert text.count("# end dump ") == 2
    # Enter lines of containers: dump 1 has the root, 2 arrays, 300 coroutine
    # maps and the empty map (304); dump 2 a map and an array.
    assert sum(1 for line in text.splitlines() if "Map: <" in line or "Arr: <" in line) == 306


@pytest.mark.parametrize("value", ["maybe", "/nonexistent-dir/sub/trace.log"])
def test_dispatch_trace_bad_value_one_warning_and_off(value):
    run = run_text(value)
    report = json.loads(run.stdout)
    assert len(report["dumps"]) == 2  # the serializer was not affected
    warnings = run.stderr.splitlines()
    assert len(warnings) == 1, run.stderr
    assert warnings[0].startswith("sertrace: warning: DISPATCH_TRACE=")
    assert "live tree off" in warnings[0]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
