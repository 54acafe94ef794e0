"""End-to-end tests of the babeltrace2 plugin on real LTTng traces of the
traced C pickler (the `sertrace` Python package of the build).

A child (pickler_child.py, run by Debian's python with the build's package
on PYTHONPATH) dumps objects while an LTTng session records it and prints
each payload's length and shape; the sinks' JSON summary and tree must
agree with it: payload_bytes == len(payload) for every dump that has a
dump_end, root bytes + header + trailer == len(payload) for every complete
dump (the rule of tests/pickle/test_accounting.py, read from the payload),
and every loss, cut or crash flagged, never a wrong exact size.

Helpers (session, summary, tree, bt, cleanup) come from test_e2e.py.
"""

import json
import os
import subprocess
import sys

import pytest

from test_e2e import PLUGIN_DIR, PYPATH, WORKLOADS, bt, cleanup, lttng, session, summary, tree

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "pickler_child.py")

pytestmark = pytest.mark.skipif(not (PLUGIN_DIR and PYPATH and WORKLOADS),
                                reason="run through meson test (needs the Python package)")

# A channel big enough that nothing is discarded: the exactness tests must
# not depend on the consumer daemon keeping up with a 1 MB-per-dump loop.
BIG = ["--subbuf-size=4M", "--num-subbuf=4"]


def child_env(**extra):
    env = dict(os.environ, PYTHONPATH=PYPATH, SERTRACE_WORKLOADS=WORKLOADS)
    for k in ("DISPATCH_TRACE", "SERTRACE_GRANULARITY", "SERTRACE_OVERSIZE", "SERTRACE_EXACT"):
        env.pop(k, None)
    env.update(extra)
    return env


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
    with session(channel=BIG) as (_, out):
        pid, sizes, _ = run_child("workloads", SERTRACE_GRANULARITY=granularity)
    try:
        assert len(sizes) == 4 * 6 * 3
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
        t = doc["totals"]
        assert t["discarded_events"] == 0 and t["lost_records_events"] == 0, t
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
    with session() as (_, out):
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
        assert ("!! died in: " + " \u203a ".join(KILL_CHAIN)) in text, text[-3000:]
        unf = [l for l in text.splitlines() if "!! UNFINISHED" in l]
        assert len(unf) == len(KILL_CHAIN), unf
        assert all("[\u2265 " in l for l in unf), unf  # open nodes: lower bounds only
        headers = [l for l in text.splitlines() if l.startswith("\u2500\u2500 dump ")]
        for h, s in zip(headers[:3], sizes):
            assert "(%d B)" % s["len"] in h or h.endswith(" %d B" % s["len"]), h
    finally:
        cleanup(out)
