"""Fork, end to end (issue 12 items 1 and 6): programs that fork after
pickling, recorded by the build's `sertrace record` in a real LTTng
session, nothing preloaded.  Every dump must be complete, under the pid
(and tid) of the process (and thread) that made it -- compared with what
the programs print -- with its exact payload size (compared with the
len(sertrace.dumps(...)) the program printed), and dump ids must never
collide (one dump per printed line, no more).

Before the fix, a forked child's events carried its parent's pid and tid
(LTTng-UST caches both; its fork helper is not preloaded), and the
child's dump numbers continued the parent's: the Pool's workers' dumps
landed under the parent's pid, and a parent and a child pickling at once
made one interleaved, corrupt stream ("malformed batches", "dump_begin
missing").

Also: a dump whose top object is a plain value (pickle.dumps(None)) is a
complete dump of no node, not "INCOMPLETE: no node recorded".
"""

import os
from collections import Counter

import pytest

from e2e_record import record, report_json, report_tree, skip_unless_built

pytestmark = pytest.mark.usefixtures("built")


@pytest.fixture
def built():
    skip_unless_built()


def check_dumps(trace, printed, expect_pids):
    dumps = report_json(trace)
    # one dump per printed line: no collision merged two, none split
    got = Counter((d["pid"], d["tid"], d["payload_bytes"]) for d in dumps)
    want = Counter((p["pid"], p["tid"], p["len"]) for p in printed)
    assert got == want, (sorted(got.items()), sorted(want.items()))
    assert {d["pid"] for d in dumps} == expect_pids
    for d in dumps:
        assert d["complete"], d
        assert d["status"] == "ok" and not d["flags"], d
        assert d["root_exact"] and 0 < d["root_bytes"] < d["payload_bytes"], d
    # dump ids are unique per pid, from 1
    for pid in expect_pids:
        ids = sorted(d["dump_id"] for d in dumps if d["pid"] == pid)
        assert ids == list(range(1, len(ids) + 1)), (pid, ids)
    return dumps


def test_os_fork_child_dumps_under_its_own_pid():
    trace, printed = record("fork_prog.py", "fork")
    pids = {p["pid"] for p in printed}
    assert len(pids) == 2, printed
    check_dumps(trace, printed, pids)
    assert "INCOMPLETE" not in report_tree(trace)


HELPER = "/usr/lib/x86_64-linux-gnu/liblttng-ust-fork.so.1"


@pytest.mark.skipif(not os.path.exists(HELPER), reason="liblttng-ust-fork not installed")
def test_os_fork_with_lttng_fork_helper_preloaded_agrees():
    """A user who preloads LTTng's fork helper gets the same answers (the
    helper refreshes LTTng's contexts; our pid/tid fields agree)."""
    trace, printed = record("fork_prog.py", "fork", LD_PRELOAD=HELPER)
    pids = {p["pid"] for p in printed}
    assert len(pids) == 2, printed
    check_dumps(trace, printed, pids)


def test_fork_pool_workers_dump_under_their_own_pids():
    trace, printed = record("fork_prog.py", "pool")
    pids = {p["pid"] for p in printed}
    assert len(pids) == 4, printed  # the parent and three workers (Barrier)
    dumps = check_dumps(trace, printed, pids)
    parent = printed[0]["pid"]
    assert sum(d["pid"] != parent for d in dumps) == 9


def test_parent_and_child_pickling_at_the_same_moment():
    trace, printed = record("fork_prog.py", "simultaneous")
    pids = {p["pid"] for p in printed}
    assert len(pids) == 2, printed
    dumps = check_dumps(trace, printed, pids)
    assert len(dumps) == 13
    # big enough that each dump spans several records events (8-14 bytes
    # of records per node, 4 KiB batches)
    assert all(d["nodes"] > 900 for d in dumps), [d["nodes"] for d in dumps]
    tree = report_tree(trace)
    assert "INCOMPLETE" not in tree and "malformed" not in tree


def test_fork_from_a_thread_child_has_its_own_tid():
    trace, printed = record("fork_prog.py", "thread")
    pids = {p["pid"] for p in printed}
    assert len(pids) == 2, printed
    check_dumps(trace, printed, pids)  # compares (pid, tid, size) triples
    parent = printed[0]["pid"]
    child = [p for p in printed if p["pid"] != parent]
    assert len(child) == 3 and all(p["tid"] == p["pid"] for p in child), child
    # the parent's second thread: a tid of its own, not the main thread's
    assert len({p["tid"] for p in printed if p["pid"] == parent}) == 2


def test_top_level_plain_values_are_complete_dumps():
    trace, printed = record("fork_prog.py", "atoms")
    assert len(printed) == 8
    dumps = report_json(trace)
    assert [d["payload_bytes"] for d in sorted(dumps, key=lambda d: d["dump_id"])] == \
        [p["len"] for p in printed]
    for d in dumps:
        assert d["complete"] and not d["flags"], d
    tree = report_tree(trace)
    assert "INCOMPLETE" not in tree and "no node recorded" not in tree, tree
