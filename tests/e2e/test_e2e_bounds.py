"""Sizes that cannot be known are shown as lower bounds (issue 12 item 3),
end to end: bounds_prog.py recorded by the build's `sertrace record` in a
real LTTng session, read back with `sertrace report --json` and `--tree`.

A pickler that writes straight to a file sertrace watches: the dump's
payload is the file's size, exact, and nothing says "lower bound".  The
same pickler to a file whose write cannot be watched: dump_end carries
SERTRACE_END_LOWER_BOUNDS (schema v3), so the JSON says
"sizes_are_lower_bounds": true with no node "exact", the tree shows the
payload and every node as "≥", and the bound is below the file's size by
at least the bytes that went around the path.
"""

import re

import pytest

from e2e_record import record, report_json, report_tree, skip_unless_built

pytestmark = pytest.mark.usefixtures("built")

GE = "\u2265 "


@pytest.fixture
def built():
    skip_unless_built()


def test_unwatched_file_is_a_lower_bound_watched_file_is_exact(tmp_path):
    trace, printed = record("bounds_prog.py", str(tmp_path))
    want = {p["kind"]: p for p in printed}
    assert set(want) == {"watched", "unwatched"}, printed
    dumps = sorted(report_json(trace), key=lambda d: d["dump_id"])
    assert len(dumps) == 2, dumps
    watched, unwatched = dumps
    assert {d["pid"] for d in dumps} == {want["watched"]["pid"]}

    # watched: exact, and equal to the file's size
    assert watched["complete"] and watched["status"] == "ok", watched
    assert watched["sizes_are_lower_bounds"] is False
    assert watched["payload_bytes"] == want["watched"]["size"]
    assert watched["root_exact"]
    assert watched["top"] and all(t["exact"] for t in watched["top"]), watched["top"]

    # unwatched: every size a lower bound, below the real size
    assert unwatched["status"] == "ok", unwatched
    assert unwatched["sizes_are_lower_bounds"] is True
    assert unwatched["payload_bytes"] + want["unwatched"]["raw"] <= want["unwatched"]["size"]
    assert not unwatched["root_exact"]
    assert unwatched["top"], unwatched
    for t in unwatched["top"]:
        assert t["exact"] is False and t["bound"] == "lower", t

    tree = report_tree(trace)
    parts = re.split(r"(?m)^(?=\u2500\u2500 dump )", tree)
    by_id = {}
    for part in parts:
        m = re.match(r"\u2500\u2500 dump (\d+) ", part)
        if m:
            by_id[int(m.group(1))] = part
    w, u = by_id[watched["dump_id"]], by_id[unwatched["dump_id"]]
    assert re.search(r"payload [\d.]+ \w+ \(%d B\)" % want["watched"]["size"], w), w[:400]
    assert "lower bounds" not in w and "[" + GE not in w, w[:2000]
    assert "payload " + GE in u and "sizes are lower bounds" in u, u[:400]
    exits = [l for l in u.splitlines() if "\u2514 # " in l]
    assert exits and all("[" + GE in l for l in exits), exits
