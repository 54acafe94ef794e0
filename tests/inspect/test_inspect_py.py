"""sertrace.inspect(data): the same summary as `sertrace inspect --json`, as a dict."""
import json
import os
import pickle
import subprocess

import pytest

import sertrace

SERTRACE = os.environ.get("SERTRACE_BIN", "")


class Thing:
    def __init__(self):
        self.items = [1, 2, {"k": (3, 4)}]
        self.name = "thing"


def payloads():
    return [pickle.dumps(obj, p) for p in range(6)
            for obj in ([1, [2, 3], {"a": (4,)}], Thing(), {frozenset({1}), 2}, None)]


@pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")
def test_same_as_cli_json():
    data = b"".join(payloads())
    cli = subprocess.run([SERTRACE, "inspect", "--json", "--top", "4", "--oversize", "10%", "-"],
                         input=data, capture_output=True, check=True)
    mine, theirs = sertrace.inspect(data, top=4, oversize="10%"), json.loads(cli.stdout)
    # the input's name differs (the argument `data`, the CLI's standard input), nothing else
    assert [d.pop("input") for d in mine["dumps"]] == ["data"] * len(payloads())
    assert [d.pop("input") for d in theirs["dumps"]] == ["standard input"] * len(payloads())
    assert [d["input_offset"] for d in mine["dumps"]] == \
        [sum(len(p) for p in payloads()[:i]) for i in range(len(payloads()))]
    assert mine == theirs


def test_summary_fields():
    data = pickle.dumps(Thing(), 4)
    s = sertrace.inspect(data)
    assert s["format"] == "sertrace-summary"
    (d,) = s["dumps"]
    assert d["payload_bytes"] == len(data)
    assert d["complete"] and d["status"] == "ok"
    kinds = {k["tag"] for k in d["by_kind"]}
    assert {"O", "G", "D2", "L", "Tu"} <= kinds
    types = {t["type"] for t in d["by_type"]}
    assert "test_inspect_py.Thing" in types


def test_accepts_bytes_like_and_runs_nothing():
    # a payload that would run os.system if unpickled: inspected, not run
    evil = b"cos\nsystem\n(S'touch /tmp/sertrace-inspect-must-not-exist'\ntR."
    s = sertrace.inspect(memoryview(bytearray(evil)))
    assert s["dumps"][0]["payload_bytes"] == len(evil)
    assert not os.path.exists("/tmp/sertrace-inspect-must-not-exist")


def test_errors():
    with pytest.raises(sertrace.InspectError) as e:
        sertrace.inspect(pickle.dumps([1, 2], 2)[:-1])
    assert isinstance(e.value, ValueError)
    assert e.value.offset > 0 and "STOP" in e.value.reason
    assert e.value.summary["dumps"] == []
    with pytest.raises(sertrace.InspectError) as e:
        sertrace.inspect(pickle.dumps(1, 2) + b"\x80\x04" + b"]" * 10000 + b"a" * 9999 + b".", max_memory=100000)
    assert "memory limit" in e.value.reason
    assert len(e.value.summary["dumps"]) == 1  # the first pickle was read
    with pytest.raises(TypeError):
        sertrace.inspect("not bytes")
    with pytest.raises(ValueError):
        sertrace.inspect(b"N.", oversize=0)


def workload_payloads():
    """The workloads' payloads (bench/workloads.py, as bench/inspect_speed.py times them) and
    the small ones above."""
    import sys
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for sub in ("bench", "workloads"):
        if os.path.join(root, sub) not in sys.path:
            sys.path.insert(0, os.path.join(root, sub))
    import workloads as W
    out = []
    for name in list(W.WORKLOADS) + list(W.MICRO):
        obj = W.build(W.PICKLE_STAND_IN.get(name, name))
        out.append(pickle.dumps(obj, pickle.DEFAULT_PROTOCOL))
    return out + payloads()


def test_dict_built_in_c_equals_json_text():
    # sertrace.inspect's dict (built in C from the summary) is what json.loads gives of the
    # JSON text, over the workloads and every option that changes it; key order too
    from sertrace import _inspect
    for data in workload_payloads():
        for args in ((10, 0, 0.0), (0, 0, 0.0), (100, 1, 0.0), (3, 0, 1.0)):
            status, offset, reason, text = _inspect.summary_json(data, *args, 1 << 30)
            assert _inspect.summary(data, *args, 1 << 30) == (status, offset, reason, json.loads(text))
            assert json.dumps(_inspect.summary(data, *args, 1 << 30)[3]) == json.dumps(json.loads(text))
    bad = pickle.dumps([1, 2], 2)[:-1]  # the partial summary of a malformed input too
    assert _inspect.summary(bad, 10, 0, 0.0, 1 << 30)[3] == \
        json.loads(_inspect.summary_json(bad, 10, 0, 0.0, 1 << 30)[3])


@pytest.mark.parametrize("text", [
    b'{"a": "x\\u00e9\\ud83d\\ude00\\n\\"\\\\/\\b\\f\\r\\t", "b": [1, -2, 3.5, 1e300, -0.0, 1E-5, -0],'
    b' "c": null, "d": true, "e": false, "f": {}, "g": [], "a": 2}',
    b'[12345678901234567890123, 123456789012345678, -1234567890123456789, 1e999, 2.0]',
    b'{"a": "\\ud800x\\udc00", "\xc3\xa9": "\xe2\x82\xac"}', b'["\\ud83d", "\\udc00\\ud800"]',
    b' [ 1 , 2 ] ', b'[NaN, Infinity]', b'[1,]', b'{"a" 1}', b'[01]', b'["\x01"]', b'"\\x"'])
def test_json_reader_is_json_loads(text):
    # the C reader behind sertrace.inspect: json.loads's objects (or its error) on any text
    from sertrace import _inspect
    try:
        want = ("ok", json.loads(text))
    except ValueError as e:
        want = ("error", type(e))
    try:
        got = ("ok", _inspect.json_objects(text))
    except ValueError as e:
        got = ("error", type(e))
    assert repr(got) == repr(want)


def test_kept_capture_gives_fresh_results():
    # sertrace.inspect keeps one summary capture for the process and resets it between calls:
    # a call after others (a malformed one, several pickles, other options, a memory limit hit)
    # gives what a first call gives, which the JSON text (a capture of its own) says
    from sertrace import _inspect
    small, multi = pickle.dumps([1, 2]), b"".join(payloads()[:6])
    bad = pickle.dumps([1, 2], 2)[:-1]
    over = pickle.dumps(1, 2) + b"\x80\x04" + b"]" * 10000 + b"a" * 9999 + b"."
    seq = [(small, (10, 0, 0.0, 1 << 30)), (multi, (10, 0, 0.0, 1 << 30)), (bad, (10, 0, 0.0, 1 << 30)),
           (small, (10, 0, 0.0, 1 << 30)), (over, (10, 0, 0.0, 100000)), (small, (3, 0, 1.0, 1 << 30)),
           (multi, (10, 0, 0.0, 1 << 30)), (small, (10, 0, 0.0, 1 << 30))]
    for data, args in seq:
        status, offset, reason, text = _inspect.summary_json(data, *args)
        got = _inspect.summary(data, *args)
        assert got == (status, offset, reason, json.loads(text))
        assert list(got[3]["totals"]) == list(json.loads(text)["totals"])
    first = sertrace.inspect(small)
    assert first["totals"]["dumps"] == 1 and first["totals"]["nodes"] == 1
    assert [k["tag"] for k in first["totals"]["by_kind"]] == ["L"]


def test_threads_share_nothing():
    # calls in several threads at once (the GIL is released while the bytes are read): each
    # gets its own result
    import threading
    datas = [pickle.dumps(list(range(i * 50)), 4) for i in range(1, 9)]
    want = [sertrace.inspect(d) for d in datas]
    errors = []

    def work(k):
        for _ in range(20):
            i = (k + _) % len(datas)
            if sertrace.inspect(datas[i]) != want[i]:
                errors.append(i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
