"""cdp.py -- a small client of the Chrome DevTools protocol, for the HTML
report's browser test (test_html_browser.py).

It starts Debian's `chromium` headless with a private profile directory and
`--remote-debugging-port=0`, reads the port chromium chose from the
profile's DevToolsActivePort file, and talks to the page's target over its
websocket with python3-websocket (Debian's websocket-client: the Python
standard library has no websocket client).  Commands are sent one at a time
and answered by id; the events that arrive meanwhile are kept, so a test
can look at every console message, exception and network request.
"""
import json
import os
import shutil
import subprocess
import time
import urllib.request

HANG_GUARD = 60  # seconds; only against hangs, never asserted


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, exe, profile_dir, width=1280, height=800):
        import websocket  # python3-websocket
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             "--remote-allow-origins=*", "--remote-debugging-port=0",
             "--user-data-dir=%s" % profile_dir,
             "--window-size=%d,%d" % (width, height), "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(profile_dir, "DevToolsActivePort")
        deadline = time.monotonic() + HANG_GUARD
        port = None
        while port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited with status %d" % self.proc.returncode)
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            try:
                with open(port_file) as f:
                    port = int(f.readline())
            except (OSError, ValueError):
                time.sleep(0.05)
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port,
                                    timeout=HANG_GUARD) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"],
                                              timeout=HANG_GUARD,
                                              suppress_origin=True)
        self.next_id = 0
        self.events = []

    def send(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method):
        """The first event `method` (kept or arriving)."""
        for e in self.events:
            if e["method"] == method:
                return e
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise RuntimeError("no %s event" % method)

    def eval(self, expr):
        r = self.send("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expr, what):
        """Poll `expr` until it is truthy (a guard against hangs only)."""
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.05)
        raise RuntimeError("timed out waiting for " + what)

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y,
                      button="left" if kind != "mouseMoved" else "none",
                      clickCount=1 if kind != "mouseMoved" else 0)

    def move(self, x, y):
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def errors(self):
        """Console errors, uncaught exceptions and error log entries seen."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text", "exception"))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def requests(self):
        return [e["params"]["request"]["url"] for e in self.events
                if e["method"] == "Network.requestWillBeSent"]

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
