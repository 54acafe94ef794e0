"""The HTML report in a real browser: Debian's chromium, headless, driven
through the DevTools protocol (cdp.py).  For a trace recorded with the real
lttng-sessiond (tests/cli/dumper.c, whose payload sizes are known): the page
loads with no console error and no network request but its own file, shows
the first dump's root size and the dump count, hovering shows a node's
bytes, a click on a node zooms into it and a click on the top bar zooms
out, the search counts its matches; a 100,000-node dump draws with its
small nodes merged.  Screenshots are written to the build directory.
Skipped, with the reason printed, when chromium or python3-websocket is
not installed (scripts/setup.sh installs both).
"""
import base64
import json
import os
import re
import time

import pytest

from cdp import Browser, find_chromium
from conftest import needs_build, outdir, run, summary_of

CHROMIUM = find_chromium()
try:
    import websocket  # noqa: F401  (python3-websocket)
    HAVE_WS = True
except ImportError:
    HAVE_WS = False

pytestmark = [
    needs_build,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                       "(apt-get install chromium; scripts/setup.sh does): browser test skipped"),
    pytest.mark.skipif(not HAVE_WS, reason="python3-websocket is not installed: browser test skipped"),
]


@pytest.fixture
def browser(tmp_path):
    b = Browser(CHROMIUM, str(tmp_path / "profile"))
    for domain in ("Runtime", "Log", "Network", "Page"):
        b.send(domain + ".enable")
    yield b
    b.close()


def open_page(b, path):
    b.send("Page.navigate", url="file://" + str(path))
    b.wait_event("Page.loadEventFired")
    b.wait_for("window.sertrace && window.sertrace.ready === true", "the viewer")


def screenshot(b, name):
    png = base64.b64decode(b.send("Page.captureScreenshot", format="png")["data"])
    assert png.startswith(b"\x89PNG")
    path = os.path.join(outdir(), name)
    with open(path, "wb") as f:
        f.write(png)
    print("screenshot:", path)


def canvas_origin(b):
    return b.eval("(() => { const r = document.getElementById('icicle')"
                  ".getBoundingClientRect(); return [r.left, r.top, r.width]; })()")


def test_page_in_chromium(small_trace, browser, tmp_path):
    trace, pid, sizes = small_trace
    page = tmp_path / "report.html"
    r = run("report", "--pid", str(pid), "--html", str(page), str(trace))
    assert r.returncode == 0, r.stderr
    first = sorted(summary_of(trace, pid), key=lambda d: d["dump_id"])[0]
    b = browser
    open_page(b, page)

    # the first dump's root size and the dump count
    assert b.eval("document.getElementById('root-size').textContent") == \
        "{:,} B".format(first["root_bytes"])
    assert b.eval("document.getElementById('payload-size').textContent") == \
        "{:,} B".format(first["payload_bytes"])
    assert b.eval("document.getElementById('dump-count').textContent") == "6 dumps"
    assert b.eval("document.getElementById('dump-select').options.length") == 6

    left, top, width = canvas_origin(b)
    boxes = b.eval("sertrace.boxes()")
    # the top bar is the whole dump, full width
    assert any(x["node"] == 0 and x["y"] == 0 and abs(x["w"] - width) < 1 for x in boxes)
    # hover an Array (depth 2): the tooltip tells its exact bytes
    arrays = [x for x in boxes if x["y"] == 36 and not x["merged"] and x["w"] > 20]
    assert arrays, boxes
    target = max(arrays, key=lambda x: x["w"])
    cx, cy = left + target["x"] + target["w"] / 2, top + target["y"] + 9
    b.move(cx, cy)
    tip = b.eval("(() => { const t = document.getElementById('tooltip');"
                 " return t.hidden ? null : t.innerText; })()")
    assert tip and "test.Array" in tip and "bytes" in tip and "self" in tip and "path" in tip
    label = b.eval("sertrace.nodeLabel(%d)" % target["node"])
    assert label == "Arr test.Array"

    # click: it zooms into that node, which now spans the width
    b.click(cx, cy)
    assert b.eval("sertrace.zoom()") == target["node"]
    zoomed = [x for x in b.eval("sertrace.boxes()") if x["node"] == target["node"]]
    assert len(zoomed) == 1 and zoomed[0]["x"] == 0 and abs(zoomed[0]["w"] - width) < 1
    assert "Arr test.Array" in b.eval("document.getElementById('crumbs').innerText")
    screenshot(b, "report-zoomed.png")

    # click the top bar: zoomed out
    b.click(left + 5, top + 9)
    assert b.eval("sertrace.zoom()") == 0

    # search: the Scalars of the first dump, counted
    b.send("Runtime.evaluate", expression="document.getElementById('search').focus()")
    b.send("Input.insertText", text="Scalar")
    text = b.wait_for("document.getElementById('search-result').textContent", "search result")
    n_scalars = sum(1 + i % 4 for i in range(20 + 0 % 7))
    assert text.startswith("%d matches" % n_scalars), text
    screenshot(b, "report-search.png")

    # the dump selector shows another dump
    b.eval("(() => { const s = document.getElementById('dump-select'); s.value = '3';"
           " s.dispatchEvent(new Event('change')); })()")
    assert b.eval("sertrace.dump().index") == 3

    assert b.errors() == []
    local = [u for u in b.requests() if not u.startswith(("file:", "data:", "about:"))]
    assert local == [], "the page fetched: %s" % local


def test_large_dump_merges_small_nodes(big_trace, browser, tmp_path):
    trace, pid, sizes = big_trace
    page = tmp_path / "big.html"
    r = run("report", "--pid", str(pid), "--html", str(page), str(trace))
    assert r.returncode == 0, r.stderr
    b = browser
    t0 = time.monotonic()
    open_page(b, page)
    elapsed = time.monotonic() - t0
    d = b.eval("(() => { const d = sertrace.dump(); return {nodes: d.nodes, payload: d.payload_bytes}; })()")
    assert d["payload"] == sizes[0]
    assert d["nodes"] >= 80000
    boxes = b.eval("sertrace.boxes()")
    # far fewer boxes than nodes: runs of tiny siblings became merged boxes
    merged = [x for x in boxes if x["merged"]]
    assert merged and len(boxes) < d["nodes"] / 10
    assert sum(x["merged"] for x in merged) > d["nodes"] / 2
    # a click on the merged run zooms closer, until its nodes are drawn
    left, top, width = canvas_origin(b)
    for _ in range(4):
        run_box = max((x for x in b.eval("sertrace.boxes()") if x["merged"] and x["y"] == 36),
                      key=lambda x: x["w"], default=None)
        if run_box is None:
            break
        b.click(left + run_box["x"] + run_box["w"] / 2, top + run_box["y"] + 9)
        assert b.eval("sertrace.range()") is not None
    arrays = [x for x in b.eval("sertrace.boxes()") if x["y"] == 36 and not x["merged"]]
    assert arrays, "no Array drawn after zooming in"
    assert all(b.eval("sertrace.nodeLabel(%d)" % x["node"]) == "Arr test.Array" for x in arrays[:5])
    screenshot(b, "report-large.png")
    b.click(left + 5, top + 9)  # the top bar: all of it again
    assert b.eval("sertrace.zoom()") == 0 and b.eval("sertrace.range()") is None
    assert b.errors() == []
    # a figure, not an assertion (speed is for bench/)
    print("%d nodes (%.1f MB page): loaded and drawn in %.2f s" %
          (d["nodes"], os.path.getsize(page) / 1e6, elapsed))


def test_unserializable_node_stands_out_and_tells_why(demo_trace, browser, tmp_path):
    """The demo's refused dump: its cell node is drawn red, and hovering it
    shows UNSERIALIZABLE with pickle's message and the path."""
    trace, _ = demo_trace
    page = tmp_path / "demo.html"
    r = run("report", "--html", str(page), str(trace))
    assert r.returncode == 0, r.stderr
    b = browser
    open_page(b, page)
    k = b.eval("sertrace.index.dumps.findIndex((d) => d.status === 'error')")
    assert k >= 0
    b.eval("sertrace.show(%d)" % k)
    node = b.eval("sertrace.dump().error_list[0][0] + 1")  # + 1: node 0 is the dump
    # the summary's "1 unserializable" zooms to it: the cell fills the width
    r = b.eval("(() => { const r = document.getElementById('goto-error')"
               ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    b.click(*r)
    assert b.eval("sertrace.zoom()") == node
    left, top, width = canvas_origin(b)
    box = next(x for x in b.eval("sertrace.boxes()") if x["node"] == node)
    assert box["x"] == 0 and abs(box["w"] - width) < 1
    px = b.eval("(() => { const c = document.getElementById('icicle'), d = window.devicePixelRatio;"
                " return Array.from(c.getContext('2d').getImageData(%d * d, %d * d, 1, 1).data); })()"
                % (box["x"] + box["w"] / 2, box["y"] + 3))
    # the alert red (#d62728), give or take the canvas' rounding
    assert px[3] > 0 and px[0] > 180 and px[1] < 70 and px[2] < 70, \
        "the unserializable node is not drawn red: %s" % px
    b.move(left + box["w"] / 2, top + box["y"] + 9)
    tip = b.eval("document.getElementById('tooltip').innerText")
    assert "!! UNSERIALIZABLE" in tip
    assert "cannot pickle 'cell' object at State.suspended[0].frame.stack[0][1]" in tip
    assert "R cell" in tip
    # its path (issue 13: from the trace's edge labels, the block's "path"
    # column) is the one the pickler's error names
    assert "\npathState.suspended[0].frame.stack[0][1]\n" in tip, tip
    assert "status error" in b.eval("document.getElementById('summary').innerText")
    screenshot(b, "report-unserializable.png")
    assert b.errors() == []
