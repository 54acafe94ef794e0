"""The installed sertrace, as a user on a fresh machine meets it after scripts/setup.sh:
no PYTHONPATH, `sertrace` on PATH, the plugin where babeltrace2 finds it.  This is the main
job of the README (scripts/demo.sh) as a test: record the coroutine-scheduler workload with
`sertrace record`, report it, and check exact sizes and the flagged failing path.

Runs only when SERTRACE_TEST_INSTALLED=1 (scripts/test.sh sets it after `meson install`)."""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("SERTRACE_TEST_INSTALLED") != "1",
                                reason="needs the installed sertrace (SERTRACE_TEST_INSTALLED=1)")

WORKLOADS = os.environ.get(
    "SERTRACE_WORKLOADS",
    os.path.join(os.path.dirname(__file__), "..", "..", "workloads"))


def clean_env():
    env = dict(os.environ)
    for k in ("PYTHONPATH", "SERTRACE_PLUGIN_PATH", "DISPATCH_TRACE", "BABELTRACE_PLUGIN_PATH"):
        env.pop(k, None)
    return env


def test_installed_record_and_report_the_demo(tmp_path):
    sertrace = shutil.which("sertrace")
    assert sertrace, "sertrace is not on PATH after meson install"
    trace = tmp_path / "trace"
    env = clean_env()
    rec = subprocess.run([sertrace, "record", "--cmd-only", "-o", str(trace), "--",
                          "/usr/bin/python3", "-m", "sertrace", "run",
                          os.path.join(WORKLOADS, "demo.py"), "6"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert rec.returncode == 0, rec.stderr
    sizes = [int(l.rsplit(":", 1)[1].split()[0]) for l in rec.stdout.splitlines()
             if l.startswith("state,")]
    assert len(sizes) == 2, rec.stdout
    assert "0 events discarded" in rec.stderr

    rep = subprocess.run([sertrace, "report", "--json", str(trace)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    dumps = summary["dumps"]
    ok = [d for d in dumps if d["status"] == "ok"]
    failed = [d for d in dumps if d["status"] == "error"]
    assert [d["payload_bytes"] for d in ok] == sizes
    assert all(d["complete"] for d in ok)
    assert len(failed) == 1
    flags = [f for f in failed[0]["flags"] if f["kind"] == "unserializable"]
    assert len(flags) == 1, failed[0]["flags"]
    assert "cell" in flags[0]["message"]
    assert flags[0]["path"].startswith("State.suspended[0].frame.stack[0]")

    tree = subprocess.run([sertrace, "report", "--tree", "--max-depth", "3", "--min-size", "1K",
                           str(trace)], capture_output=True, text=True, env=env, timeout=300)
    assert tree.returncode == 0, tree.stderr
    roots = [l for l in tree.stdout.splitlines() if l.startswith("┬")]
    assert len(roots) == 3
    # The failing object stays visible even though max-depth and min-size fold the rest.
    assert "UNSERIALIZABLE" in tree.stdout and "State.suspended[0].frame.stack[0]" in tree.stdout


def test_installed_babeltrace2_finds_the_plugin_without_flags():
    r = subprocess.run(["babeltrace2", "list-plugins"], capture_output=True, text=True,
                       env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "sertrace" in r.stdout
    h = subprocess.run(["babeltrace2", "help", "sink.sertrace.tree"], capture_output=True,
                       text=True, env=clean_env(), timeout=60)
    assert h.returncode == 0, h.stderr
