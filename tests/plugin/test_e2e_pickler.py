"""End-to-end tests of the babeltrace2 plugin on real LTTng traces of the
traced C pickler (the `sertrace` Python package of the build).

A child (pickler_child.py, run by Debian's python with the build's package
on PYTHONPATH) dumps objects while an LTTng session records it and prints
each payload's length and shape; the sinks' JSON summary and tree must
agree with it: payload_bytes == len(payload) for every dump that has a
dump_end, root bytes + header + trailer == len(payload) for every complete
dump (the rule of tests/pickle/test_accounting.py, read from the payload),
and every loss, cut or crash flagged, never a wrong exact size.

test_newer_schema_* and test_older_schema_* record gen_schema (gen_schema.c
with its own provider header schema_tp.h): events and fields of a newer
schema, and known events lacking fields.

Sessions use per-PID channels: each process its own buffers and trace, so
other programs recorded by the same `sertrace:*` rule neither fill our
buffers nor have their discards charged to our dumps.

Helpers (session, summary, tree, bt, cleanup) come from test_e2e.py.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

import pytest

from test_e2e import PLUGIN_DIR, PYPATH, WORKLOADS, bt, cleanup, lttng, session, summary, tree
from testlib.child import untraced_environ  # tests/lib, on sys.path through test_e2e

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "pickler_child.py")

pytestmark = pytest.mark.skipif(not PLUGIN_DIR, reason="run through meson test")

# A per-PID channel big enough that nothing is discarded: the exactness
# tests must not depend on the consumer daemon keeping up, nor on other
# programs of the machine filling a shared per-UID buffer (their discards
# would be charged to every live dump of the trace).
BIG = ["--buffers-pid", "--subbuf-size=1M", "--num-subbuf=4"]


def child_env(**extra):
    if not (PYPATH and WORKLOADS):
        pytest.skip("the sertrace Python package is not built")
    return untraced_environ(**{"PYTHONPATH": PYPATH, "SERTRACE_WORKLOADS": WORKLOADS, **extra})


def parse(stdout):
    lines = [json.loads(l) for l in stdout.splitlines() if l.strip()]
    assert lines and "pid" in lines[0], stdout[:500]
    return lines[0]["pid"], lines[1:]


def run_child(*args, expect_kill=False, **env):
    r = subprocess.run([sys.executable, CHILD, *map(str, args)], capture_output=True,
                       text=True, env=child_env(**env), timeout=300)
    if expect_kill:
        assert r.returncode == -9, (r.returncode, r.stderr[-3000:])
    else:
        assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    pid, lines = parse(r.stdout)
    return pid, [l for l in lines if "len" in l], lines


def root_rule(d):
    """What the root node must weigh: payload minus PROTO and STOP (plus the
    last frame's header when STOP sits in a frame)."""
    return d["len"] - d["proto_len"] - 1 - (9 if d["stop_framed"] else 0)


def by_tid(dumps):
    got = {}
    for d in sorted(dumps, key=lambda d: d["dump_id"]):
        got.setdefault(d["tid"], []).append(d)
    return got


def check_exact_nodes(d, want_root):
    """Every node the summary presents as exact (`top`, flags) at depth 1 is
    the real root; no exact node is bigger than the payload."""
    nodes = list(d["top"]) + [f for f in d["flags"] if "bytes" in f]
    for node in nodes:
        if node["exact"]:
            assert d["payload_bytes"] is None or node["bytes"] <= d["payload_bytes"], (node, d)
            if node["depth"] == 1 and want_root is not None:
                assert node["bytes"] == want_root, (node, want_root, d["dump_id"])


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", ["containers", "all"])
def test_pickler_workloads_protocols_targets_exact(granularity):
    """builtins, instances (__slots__, dataclasses), the scheduler state and
    > 64 KiB bytes/str, protocols 0-5, via dumps, dump(file) and
    Pickler(file).dump: every dump complete, payload_bytes == len(payload),
    root bytes + header + trailer == len(payload)."""
    # The live text tree of the same dumps (DISPATCH_TRACE, exact sizes):
    # with "all", atoms are recorded as ATOM records (schema v4) but the
    # text probe prints their enter/exit lines, so the tree rebuilt from
    # the trace must repeat the live tree node for node (below).
    live = tempfile.NamedTemporaryFile(prefix="sertrace-live-", suffix=".txt", delete=False)
    live.close()
    with session(channel=BIG) as (_, out):
        pid, sizes, _ = run_child("workloads", SERTRACE_GRANULARITY=granularity,
                                  DISPATCH_TRACE=live.name, SERTRACE_EXACT="1")
    try:
        with open(live.name, encoding="utf-8") as f:
            live_trees = split_dumps(f.read())
        os.unlink(live.name)
        assert len(sizes) == 4 * 6 * 3
        # the large workload crosses 64 KiB frames (protocols 4 and 5)
        big = [s for s in sizes if s["label"] == "large" and s["protocol"] >= 4]
        assert big and all(s["frames"] >= 2 and s["len"] > 2 * 65536 for s in big), big
        doc = summary(out, pid)
        dumps = doc["dumps"]
        assert len(dumps) == len(sizes), [d["dump_id"] for d in dumps]
        for want, d in zip(sizes, dumps):
            where = (want["label"], want["protocol"], want["target"])
            assert d["serializer"] == "pickle", where
            assert d["protocol"] == want["protocol"], where
            assert d["payload_bytes"] == want["len"], (where, d["payload_bytes"], want["len"])
            assert d["complete"] is True and d["status"] == "ok", (where, d["lost"])
            assert d["unfinished"] is False and d["died_in"] is None, where
            assert d["root_exact"] is True, where
            assert d["root_bytes"] == root_rule(want), (where, d["root_bytes"], want)
            assert d["tid"] == want["tid"] == pid
            check_exact_nodes(d, root_rule(want))
            assert not [f for f in d["flags"] if f["kind"] in ("incomplete", "discarded")], where
        # the granularity took effect: atoms are nodes only with "all"
        kinds = {k["tag"] for d in dumps for k in d["by_kind"]}
        assert {"D2", "L", "Tu", "O"} <= kinds, kinds
        atoms = {"I", "Str", "By", "Fl"} & kinds
        if granularity == "all":
            assert atoms == {"I", "Str", "By", "Fl"}, kinds
        else:
            assert not atoms, kinds
        # the tree sink says the same in its headers
        text = tree(out, pid, "exact=yes")
        headers = [l for l in text.splitlines() if l.startswith("\u2500\u2500 dump ")]
        assert len(headers) == len(sizes)
        for want, h in zip(sizes, headers):
            assert ("pickle protocol %d \u00b7 payload " % want["protocol"]) in h, h
            assert h.endswith("payload %d B" % want["len"]), h
        assert "INCOMPLETE" not in text and "UNFINISHED" not in text
        # ... and its root lines: the last exit line of each tree is the root
        trees = split_dumps(text)
        for want, d in zip(sizes, dumps):
            last = exits(trees[d["dump_id"]])[-1]
            assert last[0] == 1 and last[2] == root_rule(want), (d["dump_id"], last, want)
        # node for node (depth, tag, exact bytes) the same tree as the live
        # text probe's, atoms included: the ATOM records give the nodes the
        # enter/exit pairs gave
        assert sorted(live_trees) == sorted(trees), (sorted(live_trees), sorted(trees))
        natoms = 0
        for i in trees:
            got, want = exits(trees[i]), exits(live_trees[i])
            assert got == want, (i, len(got), len(want))
            natoms += sum(1 for _, tag, _ in got if tag in ("I", "Str", "By", "Fl", "A"))
        assert (natoms > 1000) == (granularity == "all"), natoms
    finally:
        cleanup(out)


def test_pickler_eight_threads_at_once():
    """8 Python threads, each first dump held open until all 8 are inside a
    dump (a Barrier in a __reduce__), distinct sizes per thread: exactly the
    expected dumps per tid, each complete, sizes equal, in order."""
    with session(channel=BIG) as (_, out):
        pid, sizes, _ = run_child("threads", 8, 6)
    try:
        assert len(sizes) == 48
        want = {}
        for s in sizes:
            want.setdefault(s["tid"], []).append(s)
        assert len(want) == 8 and all(len(v) == 6 for v in want.values())
        doc = summary(out, pid)
        assert len(doc["dumps"]) == 48
        got = by_tid(doc["dumps"])
        assert sorted(got) == sorted(want)
        for tid, ds in got.items():
            assert [d["payload_bytes"] for d in ds] == [s["len"] for s in want[tid]], tid
            for d, s in zip(ds, want[tid]):
                assert d["complete"] is True, d["lost"]
                assert d["protocol"] == s["protocol"]
                assert d["root_exact"] and d["root_bytes"] == root_rule(s), (d["root_bytes"], s)
        # the sizes differ between threads, so a dump attributed to the
        # wrong thread could not match
        firsts = [want[t][0]["len"] for t in want]
        assert len(set(firsts)) == 8, firsts
        # all 8 first dumps were open at once: each began before any ended,
        # i.e. their dump ids are the 8 smallest
        first_ids = sorted(ds[0]["dump_id"] for ds in got.values())
        assert first_ids == sorted(d["dump_id"] for d in doc["dumps"])[:8]
    finally:
        cleanup(out)


KILL_CHAIN = ["O dispatch_like_state.State", "D2 dict", "D2 dict", "L list",
              "O __main__.Holder", "D2 dict", "L list", "O __main__.Killer"]


def test_pickler_sigkill_inside_reduce_unfinished_with_chain():
    """A process SIGKILLs itself from a __reduce__ deep in its 4th dump
    (notes on that node first push the batch holding the open chain out of
    the runtime's 4 KiB buffer): 3 complete dumps with exact sizes + one
    unfinished dump, no payload size, `died_in` naming the whole nesting,
    and the tree says UNFINISHED and `died in:`."""
    with session(channel=BIG) as (_, out):
        pid, sizes, lines = run_child("kill", 3, "pad", expect_kill=True)
    try:
        assert len(sizes) == 3 and lines[-1] == {"dying": True}, lines
        doc = summary(out, pid)
        dumps = doc["dumps"]
        assert len(dumps) == 4, [d["dump_id"] for d in dumps]
        for d, s in zip(dumps[:3], sizes):
            assert d["complete"] is True and d["unfinished"] is False
            assert d["payload_bytes"] == s["len"]
            assert d["root_bytes"] == root_rule(s)
        last = dumps[3]
        assert last["unfinished"] is True and last["complete"] is False
        assert last["payload_bytes"] is None and last["status"] == "unknown"
        assert last["died_in"] == KILL_CHAIN, last["died_in"]
        assert last["died_in_as_of_last_record"] is True
        assert last["root_exact"] is False
        inc = [f for f in last["flags"] if f["kind"] == "incomplete"]
        assert inc and inc[0]["path"] == " \u203a ".join(KILL_CHAIN), last["flags"]
        assert "unfinished" in inc[0]["message"]
        # no node still open at the crash is presented as exact
        roots = [n for n in last["top"] if n["depth"] == 1]
        assert roots and not any(n["exact"] for n in roots), roots
        assert doc["totals"]["unfinished"] >= 1
        text = tree(out, pid)
        assert sum(l.startswith("\u252c ") for l in text.splitlines()) == 4
        assert ("!! died in (as of its last recorded event): "
                + " \u203a ".join(KILL_CHAIN)) in text, text[-3000:]
        unf = [l for l in text.splitlines() if "!! UNFINISHED" in l]
        assert len(unf) == len(KILL_CHAIN), unf
        assert all("[\u2265 " in l for l in unf), unf  # open nodes: lower bounds only
        headers = [l for l in text.splitlines() if l.startswith("\u2500\u2500 dump ")]
        for h, s in zip(headers[:3], sizes):
            assert "(%d B)" % s["len"] in h or h.endswith(" %d B" % s["len"]), h
    finally:
        cleanup(out)


# group 3: "≥ " (lower bound), "≤ " (upper bound: its exit may be a later
# node's) or "? " (neither); absent when exact
EXIT_LINE = re.compile(r"^([\u2502 ]*)\u2514 # (\S+) \[([\u2265\u2264?] )?(\d+) B\]")


def split_dumps(text):
    """{dump_id: [lines]} from tree-sink output (exact=yes) or from the text
    probe (DISPATCH_TRACE, SERTRACE_EXACT=1): the tree lines of each dump."""
    dumps, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:\u2500\u2500 dump |# sertrace dump )(\d+) ", line)
        if m:
            cur = dumps.setdefault(int(m.group(1)), [])
        elif line.startswith(("# end dump", "!! the tracer")):
            cur = None
        elif cur is not None:
            cur.append(line)
    return dumps


def exits(lines, exact_only=False, spanning=True):
    """(depth, tag, bytes) of the exit lines, exact ones only if asked, and
    without the nodes open across a lost batch ("records lost inside") if
    spanning is false."""
    out = []
    for line in lines:
        m = EXIT_LINE.match(line)
        if not m or (exact_only and m.group(3)):
            continue
        if not spanning and "records lost inside" in line:
            continue
        out.append((len(m.group(1)) + 1, m.group(2), int(m.group(4))))
    return out


@pytest.mark.parametrize("subbuf", [4096, 8192])
def test_pickler_small_per_pid_channel_flagged_never_wrong(subbuf):
    """A per-PID channel of 2 sub-buffers of 4 or 8 KiB for ~300 dumps of
    scheduler states (up to ~60 KiB each, 4 KiB record batches): the trace
    reports discarded events, the affected dumps are incomplete and carry a
    `discarded` flag with the count the dump's `lost` says; and every size
    presented as exact is the real one (nodes open across a lost batch
    included: an exit after a loss gives an upper bound, see
    test_pickler_exit_after_lost_batch_not_exact).  The truth is the pickler's own text
    tree of every dump (DISPATCH_TRACE, written beside the LTTng events):
    complete dumps print exactly the same tree, and every exact node of an
    incomplete dump is a node of its real tree (same depth, tag, bytes).
    With 4 KiB sub-buffers a full 4 KiB batch never fits a sub-buffer: LTTng
    drops it without counting it as discarded; the seq gap still marks the
    dump incomplete.
    Whether the consumer falls behind depends on the machine's load: a run in
    which nothing was lost tests nothing here, so it is recorded again (at most
    three runs; the assertion below still fails when none lost anything)."""
    chan = ["--buffers-pid", "--subbuf-size=%d" % subbuf, "--num-subbuf=2"]
    for attempt in range(3):
        truth_path = tempfile.mktemp(prefix="sertrace-truth-", suffix=".txt")
        try:
            with session(channel=chan) as (_, out):
                # every object a node: schema v6's compact records are small
                # enough that at the default granularity an 8 KiB channel kept
                # up with this flood on an idle consumer
                pid, sizes, _ = run_child("flood", 300, DISPATCH_TRACE=truth_path,
                                          SERTRACE_EXACT="1", SERTRACE_GRANULARITY="all")
            with open(truth_path, encoding="utf-8") as f:
                truth = split_dumps(f.read())
        finally:
            if os.path.exists(truth_path):
                os.unlink(truth_path)
        doc = summary(out, pid)
        if doc["totals"]["discarded_events"] > 0 or attempt == 2:
            break
        cleanup(out)
    try:
        assert len(sizes) == 300 and len(truth) == 300
        want = {i + 1: s for i, s in enumerate(sizes)}
        t = doc["totals"]
        assert t["discarded_events"] > 0, t
        dumps = doc["dumps"]
        assert dumps and all(d["dump_id"] in want for d in dumps)
        incomplete = [d for d in dumps if not d["complete"]]
        assert incomplete, "a channel this small must lose something"
        assert any(d["complete"] for d in dumps), "small dumps fit"
        flagged_discards = 0
        for d in dumps:
            s = want[d["dump_id"]]
            if d["payload_bytes"] is not None:
                assert d["payload_bytes"] == s["len"], (d["dump_id"], d["payload_bytes"], s["len"])
            if d["root_exact"]:
                assert d["root_bytes"] == root_rule(s), (d["dump_id"], d["root_bytes"], s)
            check_exact_nodes(d, root_rule(s))
            kinds = [f["kind"] for f in d["flags"]]
            if d["complete"]:
                assert d["root_exact"] and "incomplete" not in kinds and "discarded" not in kinds
                assert not any(d["lost"].values()), d["lost"]
            else:
                assert "incomplete" in kinds, d
            disc = [f for f in d["flags"] if f["kind"] == "discarded"]
            if d["lost"]["discarded_events"]:
                assert len(disc) == 1 and disc[0]["count"] == d["lost"]["discarded_events"], d
                assert not d["complete"]
                flagged_discards += 1
            else:
                assert not disc, d
        assert flagged_discards > 0, "no dump carries the discarded flag"
        # the process exited normally: a dump without dump_end had its end
        # discarded; it is end_lost (a later dump of the thread ended), or,
        # live to the end of the trace, unfinished with a message saying its
        # end may be among the discarded events; never "the process stopped
        # inside it" alone, never a died_in chain
        for d in dumps:
            if d["payload_bytes"] is None:
                (inc,) = [f for f in d["flags"] if f["kind"] == "incomplete"]
                assert d["died_in"] is None, d
                if d["end_lost"]:
                    assert not d["unfinished"] and "end lost" in inc["message"], d
                else:
                    assert d["unfinished"], d
                    assert "its end was among the discarded events" in inc["message"], d
            else:
                assert not d["end_lost"] and not d["unfinished"], d
        assert t["end_lost"] >= sum(d["end_lost"] for d in dumps), t  # all pids
        # sizes: the tree sink against the pickler's own text tree
        sink = split_dumps(tree(out, pid, "exact=yes"))
        assert sorted(sink) == sorted(d["dump_id"] for d in dumps)
        for d in dumps:
            real = truth[d["dump_id"]]
            got = sink[d["dump_id"]]
            if d["complete"]:
                assert exits(got) == exits(real), d["dump_id"]
                assert all(EXIT_LINE.match(l).group(3) is None for l in got if EXIT_LINE.match(l))
            else:
                # nodes open across a lost batch included: an exit after the
                # loss is only an upper bound ("≤"), never shown as exact
                pool = Counter(exits(real))
                for e in exits(got, exact_only=True):
                    assert pool[e] > 0, ("exact node not in the real tree", d["dump_id"], e)
                    pool[e] -= 1
        text = tree(out, pid)
        assert "INCOMPLETE" in text and "!! the tracer discarded" in text
    finally:
        cleanup(out)


def test_pickler_exit_after_lost_batch_not_exact():
    """A dump [A, B, C] whose batch holding A's EXIT and B's ENTER is lost
    (a full 4 KiB batch never fits a 4 KiB sub-buffer; notes from A's
    __reduce__ place the batch boundaries, see pickler_child.py run_span):
    no node may be presented as exact with a size that is not its own.  The
    truth is the pickler's text tree of the same dump (DISPATCH_TRACE)."""
    truth_path = tempfile.mktemp(prefix="sertrace-truth-", suffix=".txt")
    chan = ["--buffers-pid", "--subbuf-size=4096", "--num-subbuf=16"]
    try:
        with session(channel=chan) as (_, out):
            pid, sizes, _ = run_child("span", DISPATCH_TRACE=truth_path, SERTRACE_EXACT="1")
        with open(truth_path, encoding="utf-8") as f:
            (real,) = split_dumps(f.read()).values()
    finally:
        if os.path.exists(truth_path):
            os.unlink(truth_path)
    try:
        (s,) = sizes
        doc = summary(out, pid)
        (d,) = doc["dumps"]
        assert d["payload_bytes"] == s["len"]
        kids = [e for e in exits(real) if e[0] == 2 and e[1] == "O"]
        if d["lost"]["records_events"] != 1 or d["lost"]["lost_enters"] == 0 or len(kids) != 3:
            pytest.skip("the batches did not fall as planned: %r" % d["lost"])
        # the root is exact and right whatever was lost
        assert d["root_exact"] and d["root_bytes"] == root_rule(s)
        # no exact node of the summary has a size that is not its own
        real_sizes = {e[2] for e in kids}
        for node in d["top"]:
            if node["exact"] and node["depth"] == 2 and node["tag"] == "O":
                assert node["bytes"] in real_sizes, (node, sorted(real_sizes))
        # nor of the tree
        (got,) = split_dumps(tree(out, pid, "exact=yes")).values()
        pool = Counter(exits(real))
        for e in exits(got, exact_only=True):
            assert pool[e] > 0, ("exact node not in the real tree", e, kids)
            pool[e] -= 1
        # A, closed by B's exit, is shown as an upper bound: "≤" its span
        # to B's end, at least A's real size, flagged in summary and tree
        first = kids[0]
        ups = [n for n in d["top"] if n["depth"] == 2 and n["tag"] == "O" and not n["exact"]]
        assert ups and all(n.get("bound") == "upper" for n in ups), d["top"]
        upper = [l for l in got if EXIT_LINE.match(l) and EXIT_LINE.match(l).group(3) == "\u2264 "]
        assert len(upper) == 1 and "its exit may be a later node's" in upper[0], got
        (u,) = exits(upper)
        assert u[0] == 2 and u[2] >= first[2] and u[2] == ups[0]["bytes"], (u, first, ups)
    finally:
        cleanup(out)


def test_pickler_snapshot_cuts_at_both_edges():
    """A snapshot session (overwrite mode, per-PID 4 x 16 KiB sub-buffers)
    of a process that dumps ~200 scheduler states (several batches each),
    then pauses in the middle of one more dump while the test runs `lttng
    snapshot record`: the oldest dumps were overwritten, the paused dump is
    in the snapshot without its dump_end (flagged unfinished, incomplete),
    every dump with a dump_end has its real payload size, every complete
    dump its exact root, every dump cut at the old edge is flagged."""
    chan = ["--buffers-pid", "--subbuf-size=16384", "--num-subbuf=4", "--overwrite"]
    env = child_env()
    with session(snapshot=True, channel=chan) as (name, out):
        p = subprocess.Popen([sys.executable, CHILD, "loop", "200"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
        try:
            lines = []
            for line in p.stdout:
                lines.append(json.loads(line))
                if lines[-1].get("ready"):
                    break
            assert lines and lines[-1].get("ready"), (lines[-3:], p.stderr.read()[-2000:])
            lttng("snapshot", "record", "-s", name)
        finally:
            rest, err = p.communicate("go\n", timeout=120)
        assert p.returncode == 0, err[-3000:]
        lines += [json.loads(l) for l in rest.splitlines() if l.strip()]
    try:
        pid = lines[0]["pid"]
        sizes = [l for l in lines if "len" in l]
        assert len(sizes) == 201 and sizes[-1]["label"] == "paused"
        want = {i + 1: s for i, s in enumerate(sizes)}
        doc = summary(out, pid)
        dumps = doc["dumps"]
        ids = [d["dump_id"] for d in dumps]
        assert dumps and set(ids) <= set(want)
        assert min(ids) > 1, "the oldest dumps were overwritten"
        assert max(ids) == 201, "the paused dump is in the snapshot"
        paused = dumps[-1]
        assert paused["unfinished"] is True and paused["complete"] is False
        assert paused["payload_bytes"] is None and paused["root_exact"] is False
        assert any(f["kind"] == "incomplete" for f in paused["flags"])
        assert sum(d["complete"] for d in dumps) >= 3
        for d in dumps:
            s = want[d["dump_id"]]
            if d["payload_bytes"] is not None:
                assert d["payload_bytes"] == s["len"], (d["dump_id"], d["payload_bytes"], s)
            if d["complete"]:
                assert d["root_exact"] and d["root_bytes"] == root_rule(s), d["dump_id"]
            else:
                assert any(f["kind"] == "incomplete" for f in d["flags"]), d
            if d["lost"]["begin_missing"]:
                assert not d["complete"] and d["dump_id"] < 201
            if d["root_exact"]:
                assert d["root_bytes"] == root_rule(s), d["dump_id"]
            check_exact_nodes(d, root_rule(s))
        text = tree(out, pid)
        assert "UNFINISHED" in text or "INCOMPLETE" in text
        headers = [l for l in text.splitlines() if l.startswith("\u2500\u2500 dump ")]
        assert len(headers) == len(dumps)
    finally:
        cleanup(out)


# ---- events and fields of another schema (gen_schema.c, schema_tp.h) -------

GEN_SCHEMA_FUTURE = os.environ.get("SERTRACE_GEN_SCHEMA_FUTURE", "")
GEN_SCHEMA_MISSING = os.environ.get("SERTRACE_GEN_SCHEMA_MISSING", "")
PER_PID = ["--buffers-pid"]  # one trace (metadata) per process: our own event layout

DUMP1_TREE = [
    "\u252c D2: <dict object at 0x7f0000001002> len=2",
    "\u251c\u252c L: <list object at 0x7f0000001005> len=3",
    "\u2502\u2514 # L [15 B]",
    "\u251c\u252c Str: <str object at 0x7f0000001014> len=5",
    "\u2502\u2514 # Str [11 B]",
    "\u2514 # D2 [38 B]",
]


def run_gen_schema(path):
    if not path:
        pytest.skip("gen_schema not built")
    with session(channel=PER_PID) as (_, out):
        r = subprocess.run([path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    pid = int(lines[0].split()[1])
    sizes = {int(l.split()[1]): int(l.split()[2]) for l in lines[1:] if l.startswith("payload ")}
    return pid, sizes, out


def test_newer_schema_unknown_event_and_extra_fields_ignored():
    """A provider `sertrace` of a newer schema: dump_begin with two extra
    trailing fields, records with an extra leading and trailing field,
    dump_end with an extra field, and an unknown event sertrace:future_thing
    (inside dump 1, with known field names and bytes that are not records):
    the sinks ignore the unknown event and the extra fields and give dump 1
    whole and exact, with no 'missing or unexpected fields' warning.  Dump 2
    ends its batch with an unknown record opcode: its tree so far is kept
    (root exact), the dump is marked incomplete (1 malformed batch), as
    schema.h says."""
    pid, sizes, out = run_gen_schema(GEN_SCHEMA_FUTURE)
    try:
        assert sizes == {1: 41, 2: 21}
        r = bt(out, "summary", "format=\"json\"", pid=pid)
        assert b"missing or unexpected fields" not in r.stderr, r.stderr
        doc = json.loads(r.stdout.decode("utf-8"))
        dumps = sorted((d for d in doc["dumps"] if d["pid"] == pid), key=lambda d: d["dump_id"])
        assert [d["dump_id"] for d in dumps] == [1, 2]
        d1, d2 = dumps
        assert d1["serializer"] == "schema-test" and d1["protocol"] == 4
        assert d1["payload_bytes"] == 41 and d1["complete"] is True and d1["status"] == "ok"
        assert d1["root_exact"] and d1["root_bytes"] == 38 and d1["nodes"] == 3
        assert not any(d1["lost"].values()) and d1["flags"] == []
        assert sorted(k["tag"] for k in d1["by_kind"]) == ["D2", "L", "Str"]
        assert d2["protocol"] == 5 and d2["payload_bytes"] == 21 and d2["status"] == "ok"
        assert d2["root_exact"] and d2["root_bytes"] == 18 and d2["nodes"] == 2
        assert d2["complete"] is False and d2["unfinished"] is False
        assert d2["lost"]["malformed_batches"] == 1
        assert [f["kind"] for f in d2["flags"]] == ["incomplete"]
        assert "unknown records" in d2["flags"][0]["message"]
        r = bt(out, "tree", "exact=yes", pid=pid)
        assert b"missing or unexpected fields" not in r.stderr, r.stderr
        sink = split_dumps(tree(out, pid, "exact=yes"))
        assert sink[1] == DUMP1_TREE, sink[1]
        assert exits(sink[2]) == [(2, "Tu", 8), (1, "L", 18)]
        text = tree(out, pid)
        assert "schema-test protocol 4 \u00b7 payload 41 B\n" in text, text
        assert "payload 21 B  !! INCOMPLETE: 1 malformed batches" in text, text
    finally:
        cleanup(out)


def test_older_schema_missing_fields():
    """A provider `sertrace` whose dump_begin lacks `protocol` and whose
    dump_end lacks `bytes`.  What the plugin does: dump_begin is still read
    (protocol -1); the dump_end, lacking a field it needs, is skipped and
    counted, and a warning on stderr says so ('1 sertrace events had missing
    or unexpected fields (newer schema?) and were skipped'); the dump is then
    reported as unfinished (no payload size), its nodes exact from its
    records."""
    pid, sizes, out = run_gen_schema(GEN_SCHEMA_MISSING)
    try:
        assert sizes == {1: 41}
        r = bt(out, "summary", "format=\"json\"", pid=pid)
        assert (b"sertrace: 1 sertrace events had missing or unexpected fields "
                b"(newer schema?) and were skipped") in r.stderr, r.stderr
        doc = json.loads(r.stdout.decode("utf-8"))
        (d,) = [d for d in doc["dumps"] if d["pid"] == pid]
        assert d["serializer"] == "schema-test" and d["protocol"] == -1
        assert d["payload_bytes"] is None and d["unfinished"] is True
        assert d["complete"] is False and d["status"] == "unknown"
        assert d["root_exact"] and d["root_bytes"] == 38 and d["nodes"] == 3
        assert [f["kind"] for f in d["flags"]] == ["incomplete"]
        r = bt(out, "tree", "exact=yes", pid=pid)
        assert b"missing or unexpected fields" in r.stderr
        sink = split_dumps(tree(out, pid, "exact=yes"))
        assert sink[1] == DUMP1_TREE, sink[1]
        text = tree(out, pid)
        assert "payload unknown" in text and "INCOMPLETE: unfinished (no dump_end" in text, text
    finally:
        cleanup(out)


KILL_AFTER_CLOSED_CHAIN = ["L list", "L list", "O __main__.Killer"]


SERTRACE = os.environ.get("SERTRACE_BIN", "")


def report(trace, pid, mode):
    """`sertrace report MODE --pid PID TRACE`.  The session directory holds
    one per-PID trace per process the `sertrace:*` rule caught, other
    programs' too; one of them damaged (a process killed as it started:
    "No stream class with ID ...") made babeltrace2 refuse the whole
    directory in one of three runs (issue 12).  `report` sets such a trace
    part aside and says so (exit 3) and reads the rest.  Without the
    command, the sink through babeltrace2 as elsewhere."""
    if not SERTRACE:
        if mode == "--json":
            return summary(trace, pid)
        return tree(trace, pid) if mode == "--tree" else bt(trace, "summary", pid=pid).stdout.decode()
    env = dict(os.environ, SERTRACE_PLUGIN_PATH=PLUGIN_DIR, SERTRACE_PROGRESS="0")
    r = subprocess.run([SERTRACE, "report", mode, "--pid", str(pid), trace],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode in (0, 3), r.stderr
    if r.returncode == 3:
        assert "sertrace: the report is incomplete: " in r.stderr, r.stderr
    if mode != "--json":
        return r.stdout
    doc = json.loads(r.stdout)
    doc["dumps"] = sorted(doc["dumps"], key=lambda d: d["dump_id"])
    return doc


def test_pickler_sigkill_died_in_is_as_of_last_record():
    """[Closed(), [Killer()]]: Closed's notes flush a batch while Closed is
    open; its EXIT, the list and the Killer's ENTER are still in the
    runtime's batch when the Killer's __reduce__ SIGKILLs the process, so
    the trace ends with Closed open.  The analyzer cannot know more (the
    lost batch is gone); what it must do is say the chain is as of the last
    recorded event, and what is guaranteed must hold: the real chain at
    death (KILL_AFTER_CLOSED_CHAIN) starts with a prefix of the reported
    one (here the root list), the reported nodes after it had closed."""
    with session(channel=BIG) as (_, out):
        pid, sizes, lines = run_child("kill-after-closed", expect_kill=True)
    try:
        assert lines == [{"dying": True}]
        doc = report(out, pid, "--json")
        (d,) = doc["dumps"]
        assert d["unfinished"] is True and d["payload_bytes"] is None
        assert d["end_lost"] is False
        if d["died_in"] != ["L list", "O __main__.Closed"]:
            pytest.skip("the batches did not fall as planned: %r" % d["died_in"])
        assert d["died_in_as_of_last_record"] is True
        # the guarantee: the real chain starts with a prefix of the reported
        # one; here that prefix is the chain up to the parent of the node
        # that had closed (Closed)
        common = os.path.commonprefix([d["died_in"], KILL_AFTER_CLOSED_CHAIN])
        assert common == d["died_in"][:-1] == ["L list"], (common, d["died_in"])
        text = report(out, pid, "--tree")
        assert ("!! died in (as of its last recorded event): L list \u203a O __main__.Closed"
                in text), text[-2000:]
        assert "!! died in: " not in text
        summ = report(out, pid, "--summary")
        assert ("!! died in (as of its last recorded event): L list \u203a O __main__.Closed"
                in summ), summ[-2000:]
    finally:
        cleanup(out)


def test_pickler_type_counts_objects_apart_from_refs():
    """Issue #11: 200 users written once and referenced 200 more times are
    200 objects and 200 references, not 400 users: the summary's by_type
    row says so in JSON ("objects", "refs"; "count" keeps all nodes) and in
    text ("+ 200 refs" after the row), per dump and overall."""
    with session(channel=BIG) as (_, out):
        pid, sizes, _ = run_child("refs", 200)
    try:
        doc = summary(out, pid)
        (d,) = doc["dumps"]
        assert d["complete"] is True and d["payload_bytes"] == sizes[0]["len"]
        for rows in (d["by_type"], doc["totals"]["by_type"]):
            by = {t["type"]: t for t in rows}
            assert (by["dict"]["objects"], by["dict"]["refs"], by["dict"]["count"]) == \
                (200, 200, 400), rows
            assert (by["list"]["objects"], by["list"]["refs"]) == (2, 0), rows
            assert (by["tuple"]["objects"], by["tuple"]["refs"]) == (1, 0), rows
        # the memo references are the dump's Mo nodes
        (mo,) = [k for k in d["by_kind"] if k["tag"] == "Mo"]
        assert mo["count"] == 200, d["by_kind"]
        text = bt(out, "summary", "exact=yes", pid=pid).stdout.decode("utf-8")
        rows = [l for l in text.splitlines() if l.split()[:1] == ["dict"]]
        assert len(rows) == 2, text  # the dump's and the overall table
        for row in rows:
            assert row.split()[1] == "200" and row.endswith("+ 200 refs"), row
        assert "objects        incl." in text, text
    finally:
        cleanup(out)


def test_pickler_refs_to_functions_and_classes_count_on_their_row():
    """Memo references to a function or a class (named "function X" /
    "class X" on their own node) count as refs on the row of the function
    or class they point to, as references to a dict count on "dict": one
    function written + 30 refs is one row "__main__.helper 1 + 30 refs",
    not a second row "function __main__.helper 0 + 30 refs"."""
    n = 30
    with session(channel=BIG) as (_, out):
        pid, sizes, _ = run_child("fnrefs", n)
    try:
        doc = summary(out, pid)
        (d,) = doc["dumps"]
        assert d["complete"] is True and d["payload_bytes"] == sizes[0]["len"]
        (mo,) = [k for k in d["by_kind"] if k["tag"] == "Mo"]
        (f2,) = [k for k in d["by_kind"] if k["tag"] == "F2"]
        (t4,) = [k for k in d["by_kind"] if k["tag"] == "T4"]
        # n refs to the function, n to the class, and each instance's
        # reduce refers back to its class (n more)
        assert (f2["count"], t4["count"], mo["count"]) == (1, 1, 3 * n), d["by_kind"]
        for rows in (d["by_type"], doc["totals"]["by_type"]):
            by = {t["type"]: t for t in rows}
            assert not [t for t in by if t.startswith(("function ", "class "))], rows
            fn = by["__main__.helper"]
            assert (fn["objects"], fn["refs"], fn["count"]) == (1, n, n + 1), rows
            # the refs' bytes are on the row: the function once + n GETs
            # (BINGET, 2 bytes: the memo holds fewer than 256 objects)
            assert fn["self"] == fn["bytes"] == f2["self"] + 2 * n, (fn, f2)
            # the class row holds the class (T4) and its n instances, and
            # the 2n references to the class
            cls = by["__main__.Marker"]
            assert (cls["objects"], cls["refs"]) == (1 + n, 2 * n), rows
        # every byte is still on one row: the rows' self bytes add up
        assert sum(t["self"] for t in d["by_type"]) == sum(k["self"] for k in d["by_kind"])
        assert sum(t["owned"] for t in d["by_type"]) == sum(k["self"] for k in d["by_kind"])
        text = bt(out, "summary", "exact=yes", pid=pid).stdout.decode("utf-8")
        rows = [l for l in text.splitlines() if l.split()[:1] == ["__main__.helper"]]
        assert len(rows) == 2, text  # the dump's and the overall table
        for row in rows:
            assert row.split()[1] == "1" and row.endswith("+ %d refs" % n), row
        assert not [l for l in text.splitlines() if l.split()[:1] in (["function"], ["class"])], \
            text
    finally:
        cleanup(out)

