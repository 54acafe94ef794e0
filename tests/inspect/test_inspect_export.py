"""`sertrace inspect --html / --folded / --speedscope / --perfetto`: the
pictures of stored pickle bytes, through the same export code as `report`.

The payloads are written by Debian's CPython pickler (protocols 0-5, back to
back, plus one with an unframed 70,000-byte payload), so each pickle's true
length is known: in every format each dump must add up to exactly that
length, and its node count and root bytes must be those `inspect --json`
reports for the same bytes.  The option checks are report's.  The HTML page
is opened in Debian's chromium, headless, with the DevTools driver of the
export tests (tests/export/cdp.py, imported, not copied); that test is
skipped, with the reason, when chromium or python3-websocket is missing.
"""
import base64
import collections
import datetime
import decimal
import json
import os
import pickle
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "export"))

SERTRACE = os.environ.get("SERTRACE_BIN", "")
FORMATS = ("folded", "speedscope", "perfetto", "html")

pytestmark = pytest.mark.skipif(not SERTRACE, reason="run through meson (SERTRACE_BIN)")


def inspect(*args, data=None, timeout=120):
    return subprocess.run([SERTRACE, "inspect", *args], input=data, capture_output=True,
                          timeout=timeout)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def objects(protocol):
    """A nested value with containers, shared references, reduce-built
    stdlib objects and an instance; different per protocol."""
    shared = ["shared", protocol]
    return {
        "ints": list(range(40 + protocol)),
        "text": "x" * (100 * (protocol + 1)),
        "pair": (shared, shared, (1.5, None, True)),
        "set": {1, 2, 3, protocol},
        "when": datetime.datetime(2024, 5, 17, 12, protocol),
        "money": decimal.Decimal("3.14"),
        "od": collections.OrderedDict(a=1, b=[2, 3]),
        "point": Point([1, 2], {"k": b"v" * 20}),
        "nested": [[[i] * 3 for i in range(5)] for _ in range(3)],
    }


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    """Pickles of protocols 0-5 and an unframed 70,000-byte one, back to
    back in one file: (path, lengths)."""
    pickles = [pickle.dumps(objects(p), protocol=p) for p in range(6)]
    pickles.append(pickle.dumps([b"\x00" * 70000, {"tail": list(range(10))}], protocol=4))
    path = tmp_path_factory.mktemp("exp") / "all.pkl"
    path.write_bytes(b"".join(pickles))
    return path, [len(p) for p in pickles]


@pytest.fixture(scope="module")
def summary(payload):
    r = inspect("--json", str(payload[0]))
    assert r.returncode == 0, r.stderr
    dumps = json.loads(r.stdout)["dumps"]
    assert [d["payload_bytes"] for d in dumps] == payload[1]
    return {d["dump_id"]: d for d in dumps}


@pytest.fixture(scope="module")
def exported(payload, tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    paths = {f: d / ("out." + f) for f in FORMATS}
    r = inspect(*[a for f, p in paths.items() for a in ("--" + f, str(p))], str(payload[0]))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"" and r.stderr == b""
    return paths


def test_folded_adds_up_to_each_pickle(payload, summary, exported):
    per_dump = collections.defaultdict(int)
    lines = collections.Counter()
    for line in exported["folded"].read_text().splitlines():
        stack, count = line.rsplit(" ", 1)
        first = stack.split(";")[0]
        m = re.fullmatch(r"pickle dump (\d+)", first)  # no pid: there is no process
        assert m, line
        assert int(count) > 0
        per_dump[int(m.group(1))] += int(count)
        lines[int(m.group(1))] += 1
    assert [per_dump[i] for i in sorted(per_dump)] == payload[1]
    # at most one line per node (nodes with self bytes), plus the dump's own
    for i, n in lines.items():
        assert n <= summary[i]["nodes"] + 1


def test_folded_to_stdout_equals_the_file(payload, exported):
    r = inspect("--folded", "-", str(payload[0]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == exported["folded"].read_text()
    # and standard input gives the same
    r2 = inspect("--folded", "-", "-", data=payload[0].read_bytes())
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout == r.stdout


def test_speedscope_profiles_add_up(payload, summary, exported):
    doc = json.loads(exported["speedscope"].read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    assert doc["name"] == "sertrace inspect " + str(payload[0])
    frames = [f["name"] for f in doc["shared"]["frames"]]
    assert len(frames) == len(set(frames))
    assert len(doc["profiles"]) == len(payload[1])
    for k, p in enumerate(doc["profiles"]):
        assert p["type"] == "evented" and p["unit"] == "bytes"
        assert p["name"] == "pickle dump %d" % (k + 1)
        assert p["startValue"] == 0 and p["endValue"] == payload[1][k]
        # self bytes of every opened frame, summed: the pickle's length
        stack, total, opened = [], 0, 0
        for e in p["events"]:
            if e["type"] == "O":
                stack.append([e["at"], 0])
                opened += 1
            else:
                at, inner = stack.pop()
                total += e["at"] - at - inner
                if stack:
                    stack[-1][1] += e["at"] - at
        assert not stack and total == payload[1][k]
        assert opened == summary[k + 1]["nodes"] + 1  # the dump's frame + one per node


def test_perfetto_one_event_per_pickle(payload, summary, exported):
    events = json.loads(exported["perfetto"].read_text())["traceEvents"]
    assert len(events) == len(payload[1])
    for k, e in enumerate(events):
        a = e["args"]
        assert e["ph"] == "X" and a["dump_id"] == k + 1
        assert a["serializer"] == "pickle" and a["status"] == "ok" and a["complete"]
        assert a["payload_bytes"] == payload[1][k]
        assert a["root_bytes"] == summary[k + 1]["root_bytes"]
        assert a["nodes"] == summary[k + 1]["nodes"]
        assert a["protocol"] == summary[k + 1]["protocol"]


def html_blocks(text):
    return {int(k): json.loads(v) for k, v in re.findall(
        r'<script type="application/json" id="sertrace-dump-(\d+)">(.*?)</script>', text, re.S)}


def test_html_adds_up_and_is_self_contained(payload, summary, exported):
    text = exported["html"].read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", text, re.I)
    blocks = html_blocks(text)
    assert len(blocks) == len(payload[1])
    for k, b in sorted(blocks.items()):
        n = payload[1][k]
        s = summary[b["dump_id"]]
        assert b["payload_bytes"] == b["total"] == n
        assert b["dump_self"] + sum(b["self"]) == n
        assert b["root_bytes"] == s["root_bytes"]
        assert len(b["self"]) == s["nodes"]
        assert b["complete"] and all(f == 0 for f in b["flags"])


def test_html_oversize_flags(payload, tmp_path):
    out = tmp_path / "o.html"
    r = inspect("--oversize", "1000", "--html", str(out), str(payload[0]))
    assert r.returncode == 0, r.stderr
    flagged = 0
    for b in html_blocks(out.read_text()).values():
        for x, f in zip(b["bytes"], b["flags"]):
            assert bool(f & 4096) == (x >= 1000)
            flagged += x >= 1000
    assert flagged > 0


def test_inconclusive_input_still_exports_the_pickles_before(payload, tmp_path):
    data = payload[0].read_bytes()
    first, second = payload[1][0], payload[1][1]
    cut = data[:first + second // 2]  # the second pickle truncated
    out = tmp_path / "cut.folded"
    r = inspect("--folded", str(out), "-", data=cut)
    assert r.returncode == 4
    assert b"inconclusive at byte" in r.stderr
    lines = out.read_text().splitlines()
    assert sum(int(l.rsplit(" ", 1)[1]) for l in lines if l.startswith("pickle dump 1;")
               or l.startswith("pickle dump 1 ")) == first


@pytest.mark.parametrize("args,words", [
    (["--html", "a.html", "--tree"], "choose one of"),
    (["--json", "--folded", "a"], "choose one of"),
    (["--folded", "-", "--html", "-"], "only one export can go to stdout"),
    (["--html", "a.html", "--top", "3"], "--top and --exact apply"),
    (["--html", "a.html", "--exact"], "--top and --exact apply"),
    (["--html", "a.html", "--max-depth", "3"], "apply to --tree"),
    (["--html", ""], "give a file name"),
    (["--audit", "--html", "a.html"], "--audit takes"),
])
def test_export_option_errors(payload, tmp_path, args, words):
    r = subprocess.run([SERTRACE, "inspect", *args, str(payload[0])], capture_output=True,
                       text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert words in r.stderr and len(r.stderr.splitlines()) == 1
    assert not os.path.exists(tmp_path / "a.html")


def test_unwritable_output_is_one_line(payload, tmp_path):
    r = inspect("--html", str(tmp_path / "no" / "such.html"), str(payload[0]))
    assert r.returncode == 1
    assert b"cannot open" in r.stderr and len(r.stderr.splitlines()) == 1


def test_help_tells_of_the_exports():
    r = inspect("--help")
    for opt in (b"--html OUT.html", b"--folded OUT", b"--speedscope OUT", b"--perfetto OUT"):
        assert opt in r.stdout


def test_page_in_chromium(payload, summary, exported, tmp_path):
    try:
        from cdp import Browser, find_chromium
        import websocket  # noqa: F401  (python3-websocket)
    except ImportError as e:
        pytest.skip("python3-websocket is not installed (%s): browser test skipped" % e)
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it): browser test "
                    "skipped")
    b = Browser(chromium, str(tmp_path / "profile"))
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            b.send(domain + ".enable")
        b.send("Page.navigate", url="file://" + str(exported["html"]))
        b.wait_event("Page.loadEventFired")
        b.wait_for("window.sertrace && window.sertrace.ready === true", "the viewer")
        first = summary[1]
        assert b.eval("document.getElementById('root-size').textContent") == \
            "{:,} B".format(first["root_bytes"])
        assert b.eval("document.getElementById('payload-size').textContent") == \
            "{:,} B".format(payload[1][0])
        n = len(payload[1])
        assert b.eval("document.getElementById('dump-count').textContent") == "%d dumps" % n
        assert b.eval("document.getElementById('dump-select').options.length") == n
        # a click on the widest node below the top bar zooms into it
        left, top, width = b.eval("(() => { const r = document.getElementById('icicle')"
                                  ".getBoundingClientRect(); return [r.left, r.top, r.width]; })()")
        boxes = [x for x in b.eval("sertrace.boxes()") if x["y"] > 0 and not x["merged"]
                 and x["node"] > 0]
        assert boxes
        target = max(boxes, key=lambda x: x["w"])
        b.click(left + target["x"] + target["w"] / 2, top + target["y"] + 9)
        assert b.eval("sertrace.zoom()") == target["node"]
        png = base64.b64decode(b.send("Page.captureScreenshot", format="png")["data"])
        assert png.startswith(b"\x89PNG")
        shot = os.path.join(os.environ.get("SERTRACE_TEST_OUTDIR") or str(tmp_path),
                            "inspect-zoomed.png")
        with open(shot, "wb") as f:
            f.write(png)
        print("screenshot:", shot)
        assert b.errors() == []
        fetched = [u for u in b.requests() if not u.startswith(("file:", "data:", "about:"))]
        assert fetched == [], "the page fetched: %s" % fetched
    finally:
        b.close()
