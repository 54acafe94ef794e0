"""Edge labels and paths end to end (issue 13 items 1-3): a program with a
known structure (paths_prog.py) recorded by the build's `sertrace record`
(a real LTTng session), read back by `sertrace report`.

- the largest node below the root's state is `Session.cache`, with the
  exact bytes the pickle format gives for it (computed here by hand);
- the tree shows each node's label after dill's `TAG: <repr>`;
- privacy: the e-mail addresses used as dict keys appear in no file of the
  trace directory and not in the live tree (DISPATCH_TRACE), and do with
  SERTRACE_KEYS=all; so does a state key that is no identifier."""

import os

import pytest

import e2e_record as er

PROG = "paths_prog.py"


def trace_bytes(trace):
    """Every byte of every file of the trace directory."""
    blobs = []
    for root, _dirs, files in os.walk(trace):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                blobs.append(fh.read())
    assert blobs, trace
    return b"".join(blobs)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    er.skip_unless_built()
    live = str(tmp_path_factory.mktemp("live") / "tree.txt")
    trace, out = er.record(PROG, DISPATCH_TRACE=live)
    with open(live, encoding="utf-8") as f:
        return trace, out[0], f.read()


def cache_bytes(blob):
    # protocol 2, no frames: EMPTY_DICT, BINPUT; key 'blob' as BINUNICODE
    # (1 + 4-byte length + 4), BINPUT; the value as BINUNICODE (1 + 4 +
    # blob), BINPUT; one SETITEM.  Memo indices stay below 256: BINPUT is 2.
    return 1 + 2 + (1 + 4 + 4) + 2 + (1 + 4 + blob) + 2 + 1


def test_largest_path_is_the_cache_with_exact_bytes(default_run):
    trace, out, _live = default_run
    (dump,) = er.report_json(trace)
    assert dump["payload_bytes"] == out["payload"]
    top = dump["top"]
    # the root, then its state (no segment of its own), then the cache
    assert top[0]["path"] == "Session" and top[0]["depth"] == 1
    assert top[1]["path"] == "Session" and top[1]["depth"] == 2
    assert top[0]["bytes"] == out["payload"] - 3  # PROTO 2 and STOP
    below_state = [t for t in top if t["depth"] >= 3]
    assert below_state[0]["path"] == "Session.cache"
    assert below_state[0]["bytes"] == cache_bytes(out["blob"])
    assert below_state[0]["exact"] is True
    # the cache is written once and referenced once more (Session.alias)
    assert below_state[0]["refs"] == 1
    assert top[0]["refs"] == 0


def test_tree_shows_labels_after_the_repr(default_run):
    trace, _out, live = default_run
    tree = er.report_tree(trace)
    for text in (tree, live):
        assert "len=1  .cache\n" in text
        assert "  .users\n" in text
        assert "  .avatar\n" in text
        assert "  [2]\n" in text  # the third user
        # dill's grammar first: "├┬ TAG: <repr>" then the label
        assert "├┬ D2: <dict object at 0x" in text


def test_email_keys_are_not_recorded_by_default(default_run):
    trace, out, live = default_run
    data = trace_bytes(trace)
    tree = er.report_tree(trace)
    for email in out["emails"]:
        assert email.encode() not in data
        assert email not in live
        assert email not in tree
    # each is there, as a hidden key, and so is the state key that is no
    # identifier (a __getstate__'s data, not an attribute name)
    assert "not-an-identifier" not in live and b"not-an-identifier" not in data
    assert tree.count("  [\u2026]\n") == len(out["emails"]) + 1
    assert live.count("  [\u2026]\n") == len(out["emails"]) + 1


def test_email_keys_are_recorded_with_keys_all(tmp_path):
    er.skip_unless_built()
    live = str(tmp_path / "tree.txt")
    trace, (out,) = er.record(PROG, DISPATCH_TRACE=live, SERTRACE_KEYS="all")
    data = trace_bytes(trace)
    tree = er.report_tree(trace)
    with open(live, encoding="utf-8") as f:
        live_text = f.read()
    for email in out["emails"]:
        assert email.encode() in data
        assert "  ['%s']\n" % email in live_text
        assert "  ['%s']\n" % email in tree
    assert "[\u2026]" not in tree
    assert "  ['not-an-identifier']\n" in tree


# ---- path patterns (`sertrace report --paths`) ---------------------------

def report_paths(trace):
    import json
    import subprocess
    r = subprocess.run([er.BIN, "report", "--paths", "--json", "--top", "1000", trace],
                       capture_output=True, text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout)


def patterns_from_tree(tree):
    """The patterns rebuilt here from `report --tree --exact`'s lines: each
    enter line's label after its repr, each exit line's exact size.  An
    instance's state ("(state)") has no segment and is no match of its
    own; positions and keys become [*]."""
    import re
    stats = {}
    stack = []  # [pattern, bytes of children, is_state]
    for line in tree.splitlines():
        body = line.lstrip("\u2502")
        if body.startswith(("\u252c ", "\u251c\u252c ")):
            m = re.search(r"  (\S+)$", body)
            label = m.group(1) if m and not body.endswith(">") and "len=" not in m.group(1) else ""
            if not stack:
                name = re.search(r"<(?:ref )?([\w.]+) object", body).group(1)
                pattern, state = name.rsplit(".", 1)[-1], False
            else:
                state = label == "(state)"
                seg = "" if state else re.sub(r"\[[^\]]*\]", "[*]", label)
                pattern = stack[-1][0] + seg
            stack.append([pattern, 0, state])
        elif body.startswith("\u2514 # "):
            size = int(re.search(r"\[(\d+) B\]", body).group(1))
            pattern, child_bytes, state = stack.pop()
            e = stats.setdefault(pattern, {"count": 0, "bytes": 0, "self_bytes": 0})
            e["self_bytes"] += size - child_bytes
            if not state:
                e["count"] += 1
                e["bytes"] += size
            if stack:
                stack[-1][1] += size
    return stats


def test_pattern_bytes_are_the_sum_of_their_nodes(default_run):
    import subprocess
    trace, out, _live = default_run
    r = subprocess.run([er.BIN, "report", "--tree", "--exact", trace], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    expected = patterns_from_tree(r.stdout)
    report = report_paths(trace)
    (dump,) = report["dumps"]
    got = {p["pattern"]: p for p in dump["paths"]}
    assert set(got) == set(expected)
    for pattern, e in expected.items():
        for k in ("count", "bytes", "self_bytes"):
            assert got[pattern][k] == e[k], (pattern, k, got[pattern], e)
        assert abs(got[pattern]["share"] - e["bytes"] / out["payload"]) < 1e-6
    # the ones the program's structure fixes
    assert got["Session.users[*]"]["count"] == 3
    assert got["Session.users[*].avatar"]["count"] == 3
    assert got["Session.contacts[*]"]["count"] == 3
    assert got["Session"]["count"] == 1  # the instance, not its state too
    assert got["Session"]["bytes"] == out["payload"] - 3
    # sorted by bytes, the root first, then the cache
    assert [p["pattern"] for p in dump["paths"][:2]] == ["Session", "Session.cache"]
    # self bytes never overlap: over all patterns they add up to the root
    assert sum(p["self_bytes"] for p in dump["paths"]) == out["payload"] - 3
    # totals: one dump, the same list
    assert report["totals"]["paths"] == dump["paths"]


def test_paths_text_and_top(default_run):
    import subprocess
    trace, _out, _live = default_run
    r = subprocess.run([er.BIN, "report", "--paths", "--top", "2", trace], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("  paths (")[1].split("\n\n")[0].splitlines()
    rows = [l for l in section[2:] if l.strip()]
    assert len(rows) == 2 and rows[1].endswith("  Session.cache"), section
    # one dump: its section, then the overall one after "== overall"
    assert r.stdout.count("  paths (") == 2
    assert "  paths (" in r.stdout.split("== overall")[1]
    bad = subprocess.run([er.BIN, "report", "--paths", "--tree", trace], capture_output=True,
                         text=True, env=er.env(), timeout=300)
    assert bad.returncode != 0 and "--paths applies to --summary and --json" in bad.stderr


def test_html_export_data_has_paths(default_run, tmp_path):
    import json
    import re
    import subprocess
    trace, out, _live = default_run
    page = tmp_path / "page.html"
    r = subprocess.run([er.BIN, "report", "--html", str(page), trace], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    block = re.search(r'<script type="application/json" id="sertrace-dump-0">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S).group(1)
    dump = json.loads(block)
    assert len(dump["path"]) == len(dump["tag"]) == dump["nodes"]
    i = dump["path"].index("Session.cache")
    assert dump["bytes"][i] == cache_bytes(out["blob"])
    assert dump["path"][0] == "Session"
    assert "Session.users[2].avatar" in dump["path"]
    assert not any("@" in p for p in dump["path"])  # e-mail keys stay hidden
    # label texts share the trace's index space with types, never the page's type list
    assert "cache" not in dump["types"] and "__main__.Session" in dump["types"]


# ---- out-of-band bytes (issue 13 item 6) ----------------------------------

def test_out_of_band_bytes_on_their_node_and_per_dump(tmp_path):
    import subprocess
    er.skip_unless_built()
    pytest.importorskip("numpy")
    live = str(tmp_path / "tree.txt")
    trace, (out,) = er.record("oob_prog.py", DISPATCH_TRACE=live, SERTRACE_EXACT="1")
    assert sorted(out["buffers"]) == [1000, 65536 * 8]
    dump, in_band = er.report_json(trace)
    assert dump["payload_bytes"] == out["payload"]  # node bytes stay payload bytes
    assert in_band["oob_bytes"] == 0 and in_band["payload_bytes"] == out["in_band"]
    assert dump["oob_bytes"] == sum(out["buffers"])
    r = subprocess.run([er.BIN, "report", "--tree", "--exact", trace], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    with open(live, encoding="utf-8") as f:
        live_text = f.read()
    for text in (r.stdout, live_text):
        # NEXT_BUFFER (+ READONLY_BUFFER for a read-only view) in the payload
        assert "# PB [1 B + 524288 B out of band]" in text or \
            "# PB [2 B + 524288 B out of band]" in text, text
        assert "B + 1000 B out of band]" in text
        assert "  .weights" not in text and "  ['weights']\n" in text
    summary = subprocess.run([er.BIN, "report", "--summary", "--exact", trace],
                             capture_output=True, text=True, env=er.env(), timeout=300)
    assert "+ 525288 B out of band" in summary.stdout


def test_reduced_objects_own_their_arguments(tmp_path):
    """Issue 13 item 7: numpy.ndarray owns its data (in band, protocol 4:
    in its reduce's state; out of band: the arguments), not the tuple or
    bytes that carry it; owned bytes add up like self bytes."""
    er.skip_unless_built()
    pytest.importorskip("numpy")
    trace, (out,) = er.record("oob_prog.py")
    for dump in er.report_json(trace):
        types = {t["type"]: t for t in dump["by_type"]}
        assert sum(t["owned"] for t in dump["by_type"]) == sum(t["self"] for t in dump["by_type"])
        nd = types["numpy.ndarray"]
        if dump["oob_bytes"] == 0:  # in band: the 512 KiB are the array's
            assert nd["owned"] > out["nbytes"] > nd["self"]
            assert types["tuple"]["owned"] < out["nbytes"] < types["tuple"]["self"]
        else:
            assert nd["owned"] > nd["self"]
        for t in dump["by_type"]:  # a type outside any reduce owns its self bytes
            if t["type"] == "dict":
                assert t["owned"] == t["self"]


# ---- shared objects: refs and retained bytes (issue 13 item 5) -----------

def report_summary_text(trace):
    import subprocess
    r = subprocess.run([er.BIN, "report", "--summary", "--exact", trace], capture_output=True,
                       text=True, env=er.env(), timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return r.stdout


@pytest.mark.parametrize("protocol,serializer", [(2, "c"), (4, "c"), (2, "pyhook"),
                                                 (4, "pyhook")])
def test_retained_bytes_are_what_the_payload_loses(protocol, serializer):
    """shared_prog.py: State.x = [y, big str], State.y = y (a memo reference
    after x), State.z = a list nothing else reaches.  The retained bytes of
    a top entry are its subtree less what other paths still reach, and here
    that is what the real payload loses:
      retained(State.x) == len(payload) - len(payload with x replaced by y)
    (y then is written in x's place and s.y stays one 2-byte memo
    reference: everything else is byte for byte the same, memo indices
    stay below 256 so every GET keeps its size), and
      retained(State.z) == len(payload) - len(payload with z = None) + 1
    (the 1-byte NONE written instead)."""
    er.skip_unless_built()
    args = [str(protocol)] + (["pyhook"] if serializer == "pyhook" else [])
    trace, (out,) = er.record("shared_prog.py", *args)
    (dump,) = er.report_json(trace)
    assert dump["complete"] is True and dump["payload_bytes"] == out["payload"]
    by_path = {}
    for t in dump["top"]:
        by_path.setdefault(t["path"], t)
    x, y, z = by_path["State.x"], by_path["State.x[0]"], by_path["State.z"]
    assert (x["tag"], y["tag"], z["tag"]) == ("L", "D2", "L")
    # bytes where written, and the references to it
    assert (x["refs"], y["refs"], z["refs"]) == (0, 1, 0)
    # retained: x less y, which State.y still reaches
    assert x["retained_bytes"] == x["bytes"] - y["bytes"]
    assert x["retained_bytes"] == out["payload"] - out["swapped"]
    assert x["retained_bytes"] < x["bytes"]
    assert z["retained_bytes"] == z["bytes"] == out["payload"] - out["no_z"] + 1
    assert y["retained_bytes"] == y["bytes"]
    # the root retains the whole tree; a memo reference retains nothing
    assert dump["top"][0]["depth"] == 1
    assert dump["top"][0]["retained_bytes"] == dump["top"][0]["bytes"]
    assert all(t["retained_bytes"] is None for t in dump["top"] if t["tag"] == "Mo")
    # text: the entry says how much it retains when that is less
    text = report_summary_text(trace)
    line = "%d B (self %d B, retains %d B)  State.x  (" % (
        x["bytes"], x["self"], x["retained_bytes"])
    assert line in text, text
    assert "%d B (self %d B, 1 ref)  State.x[0]  (" % (y["bytes"], y["self"]) in text, text


@pytest.mark.parametrize("protocol", [2, 4])
def test_retained_bytes_leave_out_what_a_shared_object_reaches(protocol):
    """shared_chain_prog.py: x = [y, w] where w (referenced after x) holds a memo
    reference to y.  Without x, w is written after it and y inside w: y is still
    reached, through w, so x retains neither w nor y -- only its own few bytes,
    what the payload really loses (up to the memo references that then move:
    a few bytes each, never y's 2000)."""
    er.skip_unless_built()
    trace, (out,) = er.record("shared_chain_prog.py", str(protocol))
    (dump,) = er.report_json(trace)
    assert dump["complete"] is True and dump["payload_bytes"] == out["payload"]
    by_path = {}
    for t in dump["top"]:
        by_path.setdefault(t["path"], t)
    x, y, w = by_path["list[0]"], by_path["list[0][0]"], by_path["list[0][1]"]
    assert (x["refs"], y["refs"], w["refs"]) == (0, 1, 1)
    assert x["retained_bytes"] == x["bytes"] - y["bytes"] - w["bytes"]
    lost = out["payload"] - out["without_x"] + 1  # the 1-byte NONE written instead
    assert abs(x["retained_bytes"] - lost) <= 8, (x["retained_bytes"], lost)
    assert y["retained_bytes"] == y["bytes"] > 2000
