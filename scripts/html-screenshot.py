#!/usr/bin/python3
"""scripts/html-screenshot.py -- regenerate the screenshot of the HTML report
shown in the README (analyzers/core/html/screenshot.png).

Records the demo workload (workloads/demo.py, as scripts/demo.sh does) with
the build tree's `sertrace`, writes `sertrace report --html`, opens it in
Debian's chromium (headless, through tests/export/cdp.py), hovers the
largest coroutine record (four levels down) so the tooltip shows, and saves a PNG.

    /usr/bin/python3 scripts/html-screenshot.py [--build build] [--out PNG]

Needs: a build (meson setup build -Dpython=/usr/bin/python3 && ninja -C build),
a running lttng-sessiond (sertrace starts one when root), chromium and
python3-websocket (scripts/setup.sh installs them).
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "export"))
from cdp import Browser, find_chromium  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "analyzers", "core", "html", "screenshot.png"))
    a = ap.parse_args()
    sertrace = os.path.join(a.build, "cli", "sertrace")
    chromium = find_chromium()
    if not os.path.exists(sertrace):
        sys.exit("no %s: build first" % sertrace)
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium python3-websocket)")
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"), SERTRACE_PROGRESS="0",
               SERTRACE_PLUGIN_PATH=os.path.join(a.build, "analyzers", "plugin"))
    with tempfile.TemporaryDirectory(prefix="sertrace-shot-") as tmp:
        trace, page = os.path.join(tmp, "demo"), os.path.join(tmp, "demo.html")
        subprocess.run([sertrace, "record", "-o", trace, "--", "/usr/bin/python3", "-m", "sertrace",
                        "run", os.path.join(ROOT, "workloads", "demo.py")],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sertrace, "report", "--oversize", "50K", "--html", page, trace],
                       env=env, check=True)
        b = Browser(chromium, os.path.join(tmp, "profile"), 1280, 720)
        try:
            b.send("Page.enable")
            b.send("Page.navigate", url="file://" + page)
            b.wait_event("Page.loadEventFired")
            b.wait_for("window.sertrace && window.sertrace.ready", "the viewer")
            r = b.eval("(() => { const r = document.getElementById('icicle')"
                       ".getBoundingClientRect(); return [r.left, r.top]; })()")
            boxes = [x for x in b.eval("sertrace.boxes()") if x["y"] == 4 * 18 and not x["merged"]]
            if boxes:
                x = max(boxes, key=lambda x: x["w"])
                b.move(r[0] + x["x"] + min(x["w"] / 2, 300), r[1] + x["y"] + 9)
            import base64
            png = base64.b64decode(b.send("Page.captureScreenshot", format="png")["data"])
        finally:
            b.close()
    with open(a.out, "wb") as f:
        f.write(png)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
