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
