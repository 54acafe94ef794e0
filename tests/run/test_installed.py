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


# A serializer author's program, built only from what `meson install` put on the machine:
# the headers and libsertrace found through `pkg-config sertrace`.  It writes a tiny
# length-prefixed format (a map of two arrays) and traces every object it writes.
AUTHOR_C = r"""
#include <stdio.h>
#include <string.h>
#include <sertrace/sertrace.h>

static unsigned char out[4096];
static size_t len;
static sertrace_dump *d;

static void put(const void *p, size_t n) { memcpy(out + len, p, n); len += n; }

static void array(int n, int tag_base)
{
    static const char key_array = 0;
    uint32_t t = sertrace_type_known(d, &key_array);
    if (d && !t)
        t = sertrace_type(d, &key_array, "demo.Array");
    if (d)
        sertrace_enter(d, SERTRACE_TAG_ARRAY, t, (uintptr_t)&out[len], (uint64_t)n + 1, len);
    unsigned char h[2] = {'A', (unsigned char)n};
    put(h, 2);
    for (int i = 0; i < n; i++) {
        unsigned char v = (unsigned char)(tag_base + i);
        put(&v, 1);
    }
    if (d)
        sertrace_exit(d, len);
}

int main(void)
{
    d = sertrace_dump_begin("demo", 1);
    put("H", 1);                       /* header, outside the root */
    static const char key_map = 0;
    uint32_t t = d ? sertrace_type(d, &key_map, "demo.Map") : 0;
    if (d)
        sertrace_enter(d, SERTRACE_TAG_MAP, t, (uintptr_t)&key_map, 3, len);
    put("M", 1);
    array(10, 0);
    array(300 % 256, 7);
    if (d)
        sertrace_exit(d, len);
    put("E", 1);                       /* trailer, outside the root */
    sertrace_dump_end(d, len, SERTRACE_STATUS_OK);
    printf("%zu\n", len);
    return 0;
}
"""


def test_installed_c_api_builds_with_pkg_config_and_traces(tmp_path):
    """The C API for serializer authors, as installed: `pkg-config --cflags --libs sertrace`
    builds a program that traces (live text tree) with exact sizes."""
    cc = shutil.which("cc")
    pkg = shutil.which("pkg-config")
    assert cc and pkg, "cc and pkg-config are installed by scripts/setup.sh"
    flags = subprocess.run([pkg, "--cflags", "--libs", "sertrace"], capture_output=True,
                           text=True, env=clean_env(), timeout=60)
    assert flags.returncode == 0, flags.stderr
    src = tmp_path / "author.c"
    src.write_text(AUTHOR_C)
    exe = tmp_path / "author"
    build = subprocess.run([cc, "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src)]
                           + flags.stdout.split(), capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr

    text = tmp_path / "tree.txt"
    env = clean_env()
    env.update(DISPATCH_TRACE=str(text), SERTRACE_EXACT="1")
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    total = int(run.stdout)
    # H + (M + A10 + 10 bytes + A44 + 44 bytes) + E
    assert total == 1 + (1 + 12 + 46) + 1
    lines = text.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# sertrace dump ") and "demo protocol 1" in lines[0]
    assert lines[1].startswith("┬ Map: <demo.Map object at 0x")
    assert lines[2].startswith("├┬ Arr: <demo.Array object at 0x") and lines[2].endswith("len=10")
    assert lines[3] == "│└ # Arr [12 B]"
    assert lines[5] == "│└ # Arr [46 B]"
    assert lines[6] == "└ # Map [59 B]"
    assert lines[7].startswith("# end dump ") and "%d B" % total in lines[7]

    # And the same program recorded into LTTng: the report gives the same sizes.
    trace = tmp_path / "trace"
    rec = subprocess.run(["sertrace", "record", "--cmd-only", "-o", str(trace), "--", str(exe)],
                         capture_output=True, text=True, env=clean_env(), timeout=120)
    assert rec.returncode == 0, rec.stderr
    rep = subprocess.run(["sertrace", "report", "--json", str(trace)], capture_output=True,
                         text=True, env=clean_env(), timeout=120)
    assert rep.returncode == 0, rep.stderr
    dumps = json.loads(rep.stdout)["dumps"]
    assert [(d["serializer"], d["payload_bytes"], d["root_bytes"], d["complete"])
            for d in dumps] == [("demo", total, total - 2, True)]
