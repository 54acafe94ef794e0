"""`sertrace inspect --audit`: exit statuses, lists, every named evasion built
by hand, JSON and SARIF.  Nothing here is ever unpickled."""
import collections
import datetime
import decimal
import fractions
import json
import os
import pickle
import subprocess
import uuid

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")
pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")


def audit(data, *args):
    proc = subprocess.run([SERTRACE, "inspect", "--audit", "--json", *args, "-"], input=data,
                          capture_output=True, timeout=60)
    doc = json.loads(proc.stdout) if proc.stdout else None
    return proc.returncode, doc, proc.stderr.decode()


def evasions(doc):
    return {e["kind"] for e in doc["evasions"] if e["unsafe"]}


BENIGN = [collections.OrderedDict(a=1), datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.date(2020, 1, 1),
          datetime.timedelta(3), datetime.time(1, 2), datetime.timezone.utc, decimal.Decimal("1.5"),
          fractions.Fraction(1, 3), uuid.UUID(int=5), {1, 2}, frozenset({3}), bytearray(b"x"), b"xy",
          complex(1, 2), slice(1, 2, 3), range(3), collections.deque([1]), collections.defaultdict(list),
          collections.Counter("ab"), [1, (2, 3), {"a": None}], "s", 1.5, 2 ** 80]


@pytest.mark.parametrize("protocol", range(6))
def test_benign_stdlib_payloads_exit_0(protocol):
    code, doc, err = audit(pickle.dumps(BENIGN, protocol))
    assert code == 0, (doc, err)
    assert doc["verdict"] == "safe" and doc["exit_status"] == 0
    assert all(c["verdict"] == "allowed" for c in doc["calls"])
    names = {c["callable"] for c in doc["calls"]}
    assert "decimal.Decimal" in names and "collections.OrderedDict" in names


def test_denied_call_with_offset_and_shapes():
    data = b"\x80\x04\x95\x1a\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94."
    code, doc, _ = audit(data)
    assert code == 3 and doc["verdict"] == "unsafe"
    (call,) = doc["calls"]
    assert call["callable"] == "os.system" and call["verdict"] == "denied" and call["rule"] == "os.*"
    assert call["args"] == "(str)" and call["opcode"] == "REDUCE"
    assert data[call["offset"]:call["offset"] + 1] == b"R"
    (g,) = doc["globals"]
    assert g["name"] == "os.system" and data[g["offset"]:g["offset"] + 1] == b"\x93"


def test_unknown_callable_and_allow_patterns():
    class_call = b"cmyapp.models\nThing\n(I1\ntR."
    code, doc, _ = audit(class_call)
    assert code == 3 and doc["calls"][0]["verdict"] == "unknown"
    assert audit(class_call, "--allow", "myapp.*")[0] == 0
    assert audit(class_call, "--allow", "other.*", "--allow", "myapp.models.Thing")[0] == 0
    # the denylist wins over a user pattern
    assert audit(b"cos\nsystem\n(S'x'\ntR.", "--allow", "os.*")[0] == 3


def test_evasion_pop_discards_call_result():
    # eval('1') called, its result thrown away, then a harmless value
    data = b"cbuiltins\neval\n(S'1'\ntR0N."
    code, doc, _ = audit(data, "--allow", "builtins.eval")  # denylist still wins
    assert code == 3 and "pop-call" in evasions(doc)
    # even when the discarded call itself is allowed
    code, doc, _ = audit(b"cbuiltins\nset\n(]tR0N.")
    assert code == 3 and evasions(doc) == {"pop-call"}


def test_evasion_build_on_a_global():
    # BUILD on a module: sets attributes on it
    data = b"\x80\x04\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94}\x94\x8c\x01x\x94K\x01sb."
    code, doc, _ = audit(data)
    assert code == 3 and "build-global" in evasions(doc)


def test_evasion_memo_overwritten():
    code, doc, _ = audit(b"\x80\x02K\x01q\x00K\x02q\x00\x86q\x01.")
    assert code == 3 and evasions(doc) == {"memo-overwrite"}


def test_evasion_data_after_stop():
    code, doc, _ = audit(pickle.dumps([1], 4) + b"cos\nsystem\n(S'x'\ntR.")
    assert code == 3 and evasions(doc) == {"after-stop"}
    assert doc["calls"] == []  # pickle.loads never reads it


def test_evasion_nested_pickle_is_audited_too():
    inner = b"cos\nsystem\n(S'id'\ntR."
    outer = pickle.dumps(None, 4)[:-1]  # keep PROTO/FRAME? build by hand instead
    outer = (b"\x80\x03cpickle\nloads\nq\x00C" + bytes([len(inner)]) + inner + b"q\x01\x85q\x02Rq\x03.")
    code, doc, _ = audit(outer)
    assert code == 3
    assert "nested-pickle" in evasions(doc)
    names = {c["callable"]: c for c in doc["calls"]}
    assert names["pickle.loads"]["verdict"] == "denied"
    assert names["os.system"]["verdict"] == "denied"
    # the nested call's offset is in the outer input
    assert outer[names["os.system"]["offset"]:names["os.system"]["offset"] + 1] == b"R"


def test_evasion_stack_global_from_memoised_strings():
    # 'os' and 'system' written as data first, memoised, read back for STACK_GLOBAL
    data = (b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x86\x94"   # ('os', 'system') kept on the stack
            b"h\x00h\x01\x93\x94\x8c\x01x\x85R\x86.")
    code, doc, _ = audit(data)
    assert code == 3 and "stack-global-memo" in evasions(doc)
    assert any(g["how"] == "STACK_GLOBAL of memoised strings" and g["name"] == "os.system"
               for g in doc["globals"])


def test_evasion_inst_and_obj():
    code, doc, _ = audit(b"(S'id'\nios\nsystem\n.")
    assert code == 3 and "inst-obj" in evasions(doc)
    assert any(c["opcode"] == "INST" and c["callable"] == "os.system" for c in doc["calls"])
    code, doc, _ = audit(b"\x80\x01(cos\nsystem\nS'id'\no.")
    assert code == 3 and "inst-obj" in evasions(doc)
    assert any(c["opcode"] == "OBJ" and c["callable"] == "os.system" for c in doc["calls"])


def test_evasion_calling_a_call_result():
    # set() is allowed; calling the set it returns is unknown AND an evasion
    data = b"cbuiltins\nset\n(]tR(tR."
    code, doc, _ = audit(data)
    assert code == 3 and "non-global-callable" in evasions(doc)


def test_frame_with_a_wrong_length():
    data = bytearray(pickle.dumps({"a": [1, 2, 3]}, 4))
    assert pickle.loads(bytes(data)) == {"a": [1, 2, 3]}
    # shorter, ending at an opcode boundary: pickle.loads still reads it all
    data[3] -= 2  # the frame now ends before APPENDS (1) SETITEM (1)... at a boundary
    code, doc, err = audit(bytes(data))
    assert code == 3 and "frame-length" in evasions(doc)
    # ending inside an opcode: the unpickler fails too; inconclusive
    data[3] -= 2
    code, doc, err = audit(bytes(data))
    assert code == 4 and doc["verdict"] == "inconclusive"
    assert "frame" in doc["inconclusive"]["reason"].lower()


def test_truncated_is_inconclusive_and_malformed_after_unsafe_is_unsafe():
    code, doc, _ = audit(pickle.dumps(BENIGN, 4)[:-5])
    assert code == 4 and doc["complete"] is False
    code, doc, _ = audit(b"cos\nsystem\n(S'x'\ntR\xff")
    assert code == 3


def test_text_and_sarif():
    data = b"cos\nsystem\n(S'id'\ntR0N."
    text = subprocess.run([SERTRACE, "inspect", "--audit", "-"], input=data, capture_output=True)
    assert text.returncode == 3
    out = text.stdout.decode()
    assert "UNSAFE" in out and "os.system" in out and "DENIED" in out and "discarded by POP" in out
    sarif = subprocess.run([SERTRACE, "inspect", "--audit", "--sarif", "-"], input=data, capture_output=True)
    assert sarif.returncode == 3
    doc = json.loads(sarif.stdout)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"denied-call", "evasion-pop-call"}
    assert all(r["ruleId"] in rules for r in results)
    for r in results:
        region = r["locations"][0]["physicalLocation"]["region"]
        assert 0 <= region["byteOffset"] < len(data)


def test_usage():
    bad = [["--audit", "--tree"], ["--audit", "--summary"], ["--audit", "--top", "3"], ["--allow", "x"],
           ["--sarif"], ["--audit", "--json", "--sarif"]]
    for args in bad:
        proc = subprocess.run([SERTRACE, "inspect", *args, "-"], input=b"N.", capture_output=True)
        assert proc.returncode == 2, args
