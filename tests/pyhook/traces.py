"""Helpers for the pyhook tests: run a dump under dill's tracer or sertrace's
live text tree (in a child process, so hooks never leak between tests) and
parse both into flat pre-order node lists.

A node is a dict: {"tag", "size", "depth", "parent"} (parent = index of the
enclosing node in the same list, or -1).
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from testlib import tree  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.normpath(os.path.join(HERE, "..", "..", "workloads"))
PYTHON = os.environ.get("SERTRACE_TEST_PYTHON", sys.executable)

# Object graphs, built identically in every child process.  The workload is
# imported by name (not __main__), as an application's modules would be.
GRAPHS = r'''
import sys
sys.path.insert(0, WORKLOADS)
import dispatch_like_state as dls
import closures_graph

def build(name):
    if name == "state":
        return dls.build_state_with_closures(6)
    if name == "state_big":
        return dls.build_state_with_closures(40)
    if name == "closures":
        return closures_graph.build(40)
    raise ValueError(name)
'''

# Captures dill's own tracer: a handler on the 'dill' logger gets bare
# messages with record.depth and record.size (exact byte counts).
DILL_TRACE_SCRIPT = GRAPHS + r'''
import io, json, logging
import dill, dill.detect
nodes = []
stack = []
class H(logging.Handler):
    def emit(self, record):
        msg = record.msg
        if msg.startswith("#"):
            i = stack.pop()
            nodes[i]["size"] = getattr(record, "size", None)
        else:
            nodes.append({"tag": msg.split(":", 1)[0], "size": None,
                          "depth": len(stack) + 1,
                          "parent": stack[-1] if stack else -1})
            stack.append(len(nodes) - 1)
h = H()
lg = logging.getLogger("dill")
lg.addHandler(h)
obj = build(GRAPH)
with dill.detect.trace(io.StringIO()):
    data = dill.dumps(obj, protocol=PROTOCOL)
lg.removeHandler(h)
print(json.dumps({"len": len(data), "nodes": nodes}))
'''

# Dumps with sertrace's hooks installed; DISPATCH_TRACE comes from the env.
SERTRACE_SCRIPT = GRAPHS + r'''
import io, json, os, socket, threading
import dill
import sertrace.dill
sertrace.dill.install()
obj = build(GRAPH)
if SINK == "bytes":
    data = dill.dumps(obj, protocol=PROTOCOL)
    n = len(data)
else:
    if SINK == "pipe":
        r, w = os.pipe()
        rf, wf = os.fdopen(r, "rb"), os.fdopen(w, "wb")
    else:
        a, b = socket.socketpair()
        rf, wf = b.makefile("rb"), a.makefile("wb")
    got = []
    t = threading.Thread(target=lambda: got.append(rf.read()))
    t.start()
    dill.dump(obj, wf, protocol=PROTOCOL)
    wf.close()
    if SINK == "socket":
        a.close()
    t.join()
    data = got[0]
    n = len(data)
    assert dill.loads(data) is not None
print(json.dumps({"len": n}))
'''


# The notes (innermost first) that dill, pickle._Pickler, the C pickler and
# sertrace's hook add to the exception of an object refusing to pickle at
# State.suspended[1].frame.stack[4][1] in dispatch_like_state's graph: the
# failure test_pyhook.py and test_differential.py both provoke.
STATE_REFUSED_NOTES = [
    "when serializing tuple item 1",
    "when serializing list item 4",
    "when serializing dict item 'stack'",
    "when serializing dispatch_like_state.FrameRecord state",
    "when serializing dispatch_like_state.FrameRecord object",
    "when serializing dict item 'frame'",
    "when serializing dispatch_like_state.CoroutineRecord state",
    "when serializing dispatch_like_state.CoroutineRecord object",
    "when serializing dict item 1",
    "when serializing dict item 'suspended'",
    "when serializing dispatch_like_state.State state",
    "when serializing dispatch_like_state.State object",
]


def run_script(script, env_extra=None, **params):
    head = "WORKLOADS = %r\nHERE = %r\n" % (WORKLOADS, HERE)
    head += "".join("%s = %r\n" % (k, v) for k, v in params.items())
    env = dict(os.environ)
    env.pop("DISPATCH_TRACE", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(env_extra or {})
    p = subprocess.run([PYTHON, "-c", head + script], env=env, capture_output=True,
                       text=True, timeout=300)
    return p


def dill_trace(graph, protocol):
    p = run_script(DILL_TRACE_SCRIPT, GRAPH=graph, PROTOCOL=protocol)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def parse_text_tree(text):
    """sertrace's live text output (exact sizes), parsed by the shared
    parser (testlib.tree, tests/lib), as the flat lists these tests walk:
    dumps in the order they began, [{"header", "end", "nodes": [...],
    "flags": [line], "text_len"}]; a node is {"tag", "line_tag", "size",
    "line" (its enter line), "depth", "parent" (index, -1 for a root)}, in
    pre-order.  "tag" is dill's own tag where the line shows "Dx" and a
    "tag" note names it.  "text_len" is the UTF-8 length of the dump's own
    lines (header and end included).

    Dumps of different threads must not interleave line by line: the live
    text tree writes a dump's text in one piece at its end, unless it passes
    16 KiB mid-dump (probes/text.c), so tests running dumps on several
    threads keep each dump small and check text_len."""
    out = []
    for d in tree.parse(text, text_len=True):
        nodes = []
        todo = [(r, -1) for r in reversed(d["roots"])]
        while todo:
            node, parent = todo.pop()
            depth = node["depth"]
            bars = "" if depth == 1 else "\u2502" * (depth - 2) + "\u251c"
            tag = node["tag"]
            if tag == "Dx":
                tag = next((v for k, v in reversed(node["notes"]) if k == "tag"), tag)
            nodes.append({"tag": tag, "line_tag": node["tag"], "size": node["bytes"],
                          "line": "%s\u252c %s: %s" % (bars, node["tag"], node["repr"]),
                          "depth": depth, "parent": parent})
            me = len(nodes) - 1
            todo.extend((c, me) for c in reversed(node["children"]))
        out.append({"header": d["header"], "end": d["end"], "nodes": nodes,
                    "flags": ["\u2502" * depth + " !! " + t for depth, t in d["flags"]],
                    "text_len": d["text_len"]})
    return out


def end_bytes(end_line):
    m = re.match(r"# end dump \d+: (\d+) B, (\w+)", end_line)
    return int(m.group(1)), m.group(2)


def match_subsequence(dill_nodes, st_nodes):
    """Map each dill node, in order, to a sertrace node with the same tag and
    size, later than the previous match, whose ancestors include the match of
    the dill node's parent.  Returns the list of indexes or raises
    AssertionError naming the first dill node that has no match."""
    out = []
    j = 0
    for i, dn in enumerate(dill_nodes):
        want_anc = out[dn["parent"]] if dn["parent"] >= 0 else None
        while j < len(st_nodes):
            sn = st_nodes[j]
            if sn["tag"] == dn["tag"] and sn["size"] == dn["size"]:
                if want_anc is None or _is_ancestor(st_nodes, want_anc, j):
                    break
            j += 1
        if j == len(st_nodes):
            raise AssertionError("dill node #%d %s [%s B] (depth %d) has no match"
                                 % (i, dn["tag"], dn["size"], dn["depth"]))
        out.append(j)
        j += 1
    return out


def _is_ancestor(nodes, anc, k):
    p = nodes[k]["parent"]
    while p >= 0:
        if p == anc:
            return True
        p = nodes[p]["parent"]
    return False
