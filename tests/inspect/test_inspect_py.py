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
