"""End-to-end tests of the `sertrace` command (cli/).

Run by meson (suite 'e2e') with:
  SERTRACE_BIN           the built `sertrace` binary
  SERTRACE_TEST_DUMPER   tests/cli/dumper.c built against libsertrace: prints
                         "pid P" then "dump N bytes B" per dump (B = payload
                         length, the truth the trace is compared with)
  SERTRACE_PLUGIN_PATH   the build directory of the babeltrace2 plugin
A session daemon is started by `sertrace` itself when none runs.

Other programs that load sertrace may run at the same time on this machine
(per-UID buffers record every process of the user), so assertions on
trace contents select the dumps of the dumper's own pid; --cmd-only is
tested separately.  No assertion depends on timing: waits poll for a
condition with a generous deadline that only guards against hangs.
"""
import json
import os
import pickle
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

# tests/lib: the shared test helpers (testlib.lttng: the lttng command)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from testlib import lttng  # noqa: E402

SERTRACE = os.environ.get("SERTRACE_BIN", "")
DUMPER = os.environ.get("SERTRACE_TEST_DUMPER", "")
PLUGIN_PATH = os.environ.get("SERTRACE_PLUGIN_PATH", "")
HANG_GUARD = 60  # seconds; only against hangs, never asserted

pytestmark = pytest.mark.skipif(
    not (SERTRACE and DUMPER and os.path.exists(SERTRACE)),
    reason="run through meson (SERTRACE_BIN / SERTRACE_TEST_DUMPER)")


def run(*args, env=None, unset=(), timeout=HANG_GUARD, **kw):
    e = dict(os.environ)
    e.setdefault("SERTRACE_PROGRESS", "0")
    if env:
        e.update(env)
    for name in unset:
        e.pop(name, None)
    return subprocess.run([SERTRACE, *args], capture_output=True, text=True,
                          env=e, timeout=timeout, **kw)


def sessions():
    """Names of the LTTng sessions (through the lttng CLI: test-side only)."""
    return lttng.sessions(timeout=HANG_GUARD)


def unique(tag):
    return "cli-%s-%d-%d" % (tag, os.getpid(), time.monotonic_ns() % 1000000)


def printed_sizes(stdout):
    """{dump index: bytes} and the pid from the dumper's stdout."""
    pid = int(re.search(r"^pid (\d+)$", stdout, re.M).group(1))
    sizes = {int(n): int(b) for n, b in
             re.findall(r"^dump (\d+) bytes (\d+)$", stdout, re.M)}
    return pid, sizes


def report_json(trace):
    r = run("report", "--json", trace)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["format"] == "sertrace-summary"
    return doc


def dumps_of(doc, pid):
    return [d for d in doc["dumps"]
            if d["pid"] == pid and d["serializer"] == "cli-test"]


def wait_for(pred, what):
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


# ---- help, version, usage ------------------------------------------------

def test_version():
    r = run("--version")
    assert r.returncode == 0
    assert re.match(r"^sertrace \d+\.\d+\.\d+$", r.stdout.splitlines()[0])
    assert r.stdout.splitlines()[1].startswith("babeltrace2 plugin: ")


@pytest.mark.skipif(not PLUGIN_PATH, reason="the plugin is not built")
def test_build_tree_binary_uses_the_build_tree_plugin():
    """Without $SERTRACE_PLUGIN_PATH the uninstalled binary must load its own
    build's plugin, never whatever was last installed (maybe stale)."""
    r = run("--version", unset=["SERTRACE_PLUGIN_PATH"])
    assert r.returncode == 0
    line = r.stdout.splitlines()[1]
    assert line.startswith("babeltrace2 plugin: %s/" % PLUGIN_PATH), line
    assert line.endswith("(from the build tree)")


@pytest.mark.skipif(not PLUGIN_PATH, reason="the plugin is not built")
def test_report_verbose_names_the_plugin(recorded):
    r = run("report", "-v", "--json", str(recorded[0]), unset=["SERTRACE_PLUGIN_PATH"])
    assert r.returncode == 0, r.stderr
    assert "using the babeltrace2 plugin %s/" % PLUGIN_PATH in r.stderr


@pytest.mark.parametrize("sub", ["record", "start", "stop", "snapshot", "report"])
def test_help_of_every_subcommand(sub):
    r = run(sub, "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("Usage: sertrace " + sub)
    assert "Exit status" in r.stdout


def test_top_level_help_lists_subcommands():
    r = run("--help")
    assert r.returncode == 0
    for sub in ("record", "start", "stop", "snapshot", "report"):
        assert re.search(r"^  %s " % sub, r.stdout, re.M)


@pytest.mark.parametrize("args", [
    ["frobnicate"],
    ["report", "--bogus", "x"],
    ["report"],
    ["report", "--tree", "--json", "x"],
    ["report", "--top", "ten", "x"],
    ["report", "--oversize", "12 parsecs", "x"],
    ["record"],
    ["record", "--buffer-size", "lots", "--", "true"],
    ["record", "--buffer-size", "1K", "--", "true"],
    ["stop"],
    ["stop", "a", "b"],
    ["start", "unexpected"],
    ["start", "--live", "net://127.0.0.1", "--snapshot"],
    ["record", "--live", "net://127.0.0.1", "--", "true"],
    ["report", "--tree", "--top", "3", "x"],
    ["report", "--json", "--max-depth", "3", "x"],
    ["report", "--live", "net://127.0.0.1/host/h/s", "extra-trace"],
    ["report", "--oversize", "0", "x"],
    ["report", "--oversize", "0%", "x"],
    ["report", "--oversize", "101%", "x"],
    ["report", "--live", "foo"],
    ["report", "--live", "net://127.0.0.1"],
    ["report", "--live", "net://127.0.0.1:70000/host/h/s"],
    ["report", "--live", "net://127.0.0.1/host/h"],
    ["report", "--live", "net://127.0.0.1/host/h/s/extra"],
    ["report", "--live", "tcp://127.0.0.1/host/h/s"],
    ["report", "--pid", "abc", "x"],
    ["report", "--pid", "-3", "x"],
    ["report", "--dump", "1.5", "x"],
    ["report", "--serializer", "", "x"],
    ["report", "--no-per-dump", "x"],
    ["report", "--tree", "--no-per-dump", "x"],
    ["report", "--json", "--no-per-dump", "x"],
])
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.returncode == 2, (args, r.stderr)
    assert r.stderr.startswith("sertrace: ")


@pytest.mark.parametrize("args, words", [
    (["--oversize", "0"], ["--oversize", "more than 0"]),
    (["--oversize", "0%"], ["--oversize", "more than 0%"]),
    (["--live", "foo"], ["--live", "net://HOST[:PORT]/host/HOSTNAME/SESSION"]),
    (["--live", "net://127.0.0.1"], ["--live", "/host/HOSTNAME/SESSION"]),
])
def test_option_errors_are_one_clear_line(args, words, tmp_path):
    r = run("report", *args, str(tmp_path))
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "addr=" not in r.stderr
    for w in words:
        assert w in r.stderr


@pytest.mark.parametrize("args", [
    ["--oversize", "0"], ["--oversize", "0%"], ["--oversize", "lots"], ["--top", "x"],
    ["--top", "100001"], ["--max-depth", "-1"], ["--min-size", "1Q"], ["--paths", "--tree"],
    ["--json", "--no-per-dump"], ["--tree", "--json"], ["--html", "-", "--folded", "-"],
    ["--html", "x.html", "--top", "3"], ["--json", "--min-size", "1K"], ["--folded", ""],
    ["--bogus"],
])
def test_report_and_inspect_share_their_display_options(args, tmp_path):
    """The display options are one table (cli/display-opts.c): report and
    inspect refuse the same values with the same one-line message (their
    own command's name aside), exit 2, before reading any input."""
    r = run("report", *args, str(tmp_path / "no-trace"))
    i = run("inspect", *args, str(tmp_path / "no-file"))
    assert r.returncode == 2 and i.returncode == 2, (args, r.stderr, i.stderr)
    assert len(r.stderr.splitlines()) == 1, r.stderr
    same = r.stderr.replace("sertrace: report:", "sertrace: inspect:").replace(
        "`sertrace report --help`", "`sertrace inspect --help`")
    assert same == i.stderr, (r.stderr, i.stderr)


def test_report_and_inspect_help_share_the_display_lines():
    """The help lines both commands print word for word come from one place."""
    r, i = run("report", "--help"), run("inspect", "--help")
    assert r.returncode == 0 and i.returncode == 0
    for line in ("  --top N            largest nodes listed in the summary (default 10, at\n",
                 "  --exact            sizes in bytes instead of KiB/MiB\n",
                 "  --folded OUT       folded stacks weighted by self bytes (flamegraph.pl,\n"):
        assert line in r.stdout and line in i.stdout, line


def test_graph_failure_is_one_line_and_verbose_has_the_chain():
    # Nothing listens on this port: the live source fails in the graph.
    port = _free_ports(1)[0]
    url = "net://127.0.0.1:%d/host/h/s" % port
    r = run("report", "--live", url)
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "Connection refused" in r.stderr
    assert "addr=0x" not in r.stderr
    v = run("report", "-v", "--live", url)
    assert v.returncode == 1
    assert len(v.stderr.splitlines()) > 2
    assert "Connection refused" in v.stderr


# ---- record ------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One recording of 6 dumps, shared by the report tests."""
    out = tmp_path_factory.mktemp("rec") / "trace"
    r = run("record", "-o", str(out), "--", DUMPER, "--dumps", "6")
    assert r.returncode == 0, r.stderr
    pid, sizes = printed_sizes(r.stdout)
    assert len(sizes) == 6
    return out, pid, sizes, r


def test_record_reports_location_and_losses(recorded):
    out, _, _, r = recorded
    assert "trace written to %s" % out in r.stderr
    assert "0 events discarded, 0 packets lost" in r.stderr
    metas = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs
             if f == "metadata"]
    assert metas, "no CTF trace under " + str(out)


def test_record_leaves_no_session(recorded):
    name = unique("gone")
    out = recorded[0].parent / "again"
    r = run("record", "--name", name, "-o", str(out), "--", DUMPER, "--dumps", "1")
    assert r.returncode == 0, r.stderr
    assert name not in sessions()


@pytest.mark.parametrize("user", [None, "700"])
def test_record_gives_cmd_a_longer_registration_wait(tmp_path, user):
    # CMD and its descendants wait up to 30 s to register with the session
    # daemon (LTTng's default, 3 s, let a joblib worker start untraced on a
    # loaded machine); a value the user set is passed on as it is.
    env = {"LTTNG_UST_REGISTER_TIMEOUT": user} if user else None
    r = run("record", "--name", unique("regwait"), "-o", str(tmp_path / "t"), "--",
            "sh", "-c", 'echo "wait=$LTTNG_UST_REGISTER_TIMEOUT"', env=env,
            unset=() if user else ("LTTNG_UST_REGISTER_TIMEOUT",))
    assert r.returncode in (0, 1), r.stderr  # 1: nothing recorded (sh loads no sertrace)
    assert "wait=%s" % (user or "30000") in r.stdout.splitlines(), r.stdout


def test_report_json_payload_bytes_are_exact(recorded):
    out, pid, sizes, _ = recorded
    mine = dumps_of(report_json(str(out)), pid)
    assert sorted(d["payload_bytes"] for d in mine) == sorted(sizes.values())
    assert all(d["complete"] for d in mine)


def test_report_tree(recorded):
    out, pid, sizes, _ = recorded
    r = run("report", "--tree", "--exact", str(out))
    assert r.returncode == 0, r.stderr
    # Each dump's root is the dumper's test.Map; its exit line carries the
    # exact bytes between its enter and exit: payload - 2 header - 1 trailer.
    roots = re.findall(r"^└ # Map \[(\d+) B\]", r.stdout, re.M)
    for b in sizes.values():
        assert str(b - 3) in roots
    assert "test.Map" in r.stdout and "test.Array" in r.stdout


def test_report_default_is_tree(recorded):
    out = str(recorded[0])
    assert run("report", out).stdout == run("report", "--tree", out).stdout


def test_report_summary(recorded):
    out, pid, sizes, _ = recorded
    r = run("report", "--summary", "--top", "3", str(out))
    assert r.returncode == 0, r.stderr
    assert "cli-test" in r.stdout
    assert "test.Array" in r.stdout


def test_report_options_reach_the_sink(recorded):
    out = str(recorded[0])
    full = run("report", "--tree", out).stdout
    shallow = run("report", "--tree", "--max-depth", "1", out).stdout
    assert shallow != full and len(shallow) < len(full)
    flagged = run("report", "--tree", "--oversize", "100", out)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout != full
    share = run("report", "--tree", "--oversize", "50%", out)
    assert share.returncode == 0, share.stderr
    assert share.stdout != full
    top = run("report", "--json", "--top", "2", out)
    assert top.returncode == 0, top.stderr


# The dumper's trees, computed as dumper.c writes them: dump n's root Map
# holds 20 + n % 7 Arrays; Array i holds 1 + i % 4 Scalars of
# 1 + (7i + 3k) % 50 bytes; an Array is 1 byte more than its Scalars, the
# Map 1 byte more than its Arrays, the payload 3 bytes more than the Map.

class Node:
    def __init__(self, tag, size, children=()):
        self.tag, self.size, self.children = tag, size, list(children)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


def dumper_tree(n, width=20):
    arrays = []
    for i in range(width + n % 7):
        scalars = [Node("Sc", 1 + (i * 7 + k * 3) % 50) for k in range(1 + i % 4)]
        arrays.append(Node("Arr", 1 + sum(c.size for c in scalars), scalars))
    return Node("Map", 1 + sum(a.size for a in arrays), arrays)


def model_by_payload(sizes):
    """{payload bytes: model tree} for the dumps the dumper printed."""
    trees = {}
    for n, b in sizes.items():
        t = dumper_tree(n)
        assert t.size + 3 == b, "the model disagrees with dumper.c"
        trees[b] = t
    return trees


def tree_sections(stdout, pid):
    """{payload bytes: tree lines} for the dumps of `pid` in `report --tree --exact`."""
    out, cur = {}, None
    for line in stdout.splitlines():
        m = re.match(r"^── dump \d+ · pid (\d+) · .* · payload (\d+) B", line)
        if m:
            cur = out.setdefault(int(m.group(2)), []) if int(m.group(1)) == pid else None
            continue
        if cur is not None:
            cur.append(line)
    return out


def parse_tree(lines):
    """The printed tree as Nodes, each with `folds`: the (count, bytes) of
    its '… N more, X' lines."""
    stack, root = [], None
    for line in lines:
        m = re.match(r"^([│ ]*)(├┬|┬) (\w+): ", line)
        if m:
            node = Node(m.group(3), None)
            node.folds = []
            depth = len(m.group(1)) + (m.group(2) == "├┬")
            assert depth == len(stack), line
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
            stack.append(node)
            continue
        m = re.match(r"^([│ ]*)└ # (\w+) \[(\d+) B\]", line)
        if m:
            assert len(m.group(1)) == len(stack) - 1 and stack[-1].tag == m.group(2), line
            stack.pop().size = int(m.group(3))
            continue
        m = re.match(r"^([│ ]*)├ … (\d+) more, (\d+) B$", line)
        if m:
            stack[len(m.group(1))].folds.append((int(m.group(2)), int(m.group(3))))
    assert not stack
    return root


def expect_folded(model, min_size, oversize=None):
    """What `--min-size` must print: a child smaller than min_size folds
    unless it or a node below it is flagged (>= oversize); per parent one
    fold line with the count and bytes of what folded."""
    def flagged(node):
        return oversize is not None and any(x.size >= oversize for x in node.walk())

    def shown(node):
        kept = [c for c in node.children if c.size >= min_size or flagged(c)]
        gone = [c for c in node.children if c not in kept]
        out = Node(node.tag, node.size, [shown(c) for c in kept])
        out.folds = [(len(gone), sum(c.size for c in gone))] if gone else []
        return out
    return shown(model)


def same_tree(a, b):
    return (a.tag, a.size, a.folds, len(a.children)) == (b.tag, b.size, b.folds, len(b.children)) \
        and all(same_tree(x, y) for x, y in zip(a.children, b.children))


def describe(t, d=0):
    return "".join(["%s%s %s %s\n" % ("  " * d, t.tag, t.size, t.folds)] +
                   [describe(c, d + 1) for c in t.children])


@pytest.mark.parametrize("min_size, oversize", [(20, None), (60, None), (20, 15), (60, 30)])
def test_report_min_size_folds_only_small_unflagged_siblings(recorded, min_size, oversize):
    out, pid, sizes, _ = recorded
    args = ["report", "--tree", "--exact", "--min-size", str(min_size)]
    if oversize is not None:
        args += ["--oversize", str(oversize)]
    r = run(*args, str(out))
    assert r.returncode == 0, r.stderr
    models = model_by_payload(sizes)
    printed = tree_sections(r.stdout, pid)
    assert sorted(printed) == sorted(models)
    folds = 0
    for payload, lines in printed.items():
        want = expect_folded(models[payload], min_size, oversize)
        got = parse_tree(lines)
        assert same_tree(got, want), "dump of %d B:\nprinted\n%s\nexpected\n%s" % (
            payload, describe(got), describe(want))
        folds += sum(len(n.folds) for n in want.walk())
        if oversize is not None:
            # every shown node of at least `oversize` bytes carries the flag
            flags = sum("!! OVERSIZED (≥ %d B)" % oversize in l for l in lines)
            assert flags == sum(n.size >= oversize for n in want.walk())
    assert folds > 0  # the parameters do fold something


def summary_sections(stdout, pid):
    """{payload bytes: the sizes listed under 'top N largest nodes'} for
    the dumps of `pid`, plus the N of each header, in `report --summary --exact`."""
    out, cur, key = {}, None, None
    for line in stdout.splitlines():
        m = re.match(r"^dump \d+ · pid (\d+) · ", line)
        if m or line.startswith("== overall"):
            cur = None
            key = "mine" if m and int(m.group(1)) == pid else None
            continue
        m = re.match(r"^  payload (\d+) B · ", line)
        if m and key == "mine":
            key = int(m.group(1))
            continue
        m = re.match(r"^  top (\d+) largest nodes$", line)
        if m and isinstance(key, int):
            cur = out.setdefault(key, {"n": int(m.group(1)), "sizes": []})
            continue
        m = re.match(r"^    (\d+) B \(self \d+ B\)  ", line)
        if m and cur is not None:
            cur["sizes"].append(int(m.group(1)))
            continue
        cur = None
    return out


@pytest.mark.parametrize("n", [1, 3, 7])
def test_report_top_lists_exactly_the_n_largest(recorded, n):
    out, pid, sizes, _ = recorded
    models = model_by_payload(sizes)

    def largest(payload):
        return sorted((x.size for x in models[payload].walk()), reverse=True)[:n]
    doc = json.loads(run("report", "--json", "--top", str(n), str(out)).stdout)
    mine = dumps_of(doc, pid)
    assert len(mine) == len(models)
    for d in mine:
        assert [t["bytes"] for t in d["top"]] == largest(d["payload_bytes"])
        assert d["top"][0]["ancestry"] == ["Map test.Map"]
    assert len(doc["totals"]["top"]) == n
    r = run("report", "--summary", "--exact", "--top", str(n), str(out))
    assert r.returncode == 0, r.stderr
    text = summary_sections(r.stdout, pid)
    assert sorted(text) == sorted(models)
    for payload, sec in text.items():
        assert sec["n"] == n
        assert sec["sizes"] == largest(payload)


def test_report_progress_filter_keeps_output(recorded):
    out = str(recorded[0])
    plain = run("report", "--json", out)
    shown = run("report", "--json", out, env={"SERTRACE_PROGRESS": "1"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == plain.stdout
    m = re.findall(r"(\d+) events read", shown.stderr)
    assert m and int(m[-1]) > 0


PROGRESS_LINE = re.compile(r"\rsertrace: \d+ events read, ~[\d.]+ of [\d.]+ MB \(\d+%\)\x1b\[K")
ERASE = "\r\x1b[K"


def run_on_pty(args, env, stdout_tty, stderr_tty):
    """Run sertrace with stdout and/or stderr on one pseudo-terminal (raw
    mode: bytes pass unchanged); returns (status, terminal bytes as text,
    stdout if not the tty, stderr if not the tty)."""
    import pty
    import threading
    import tty
    master, slave = pty.openpty()
    tty.setraw(slave)
    e = dict(os.environ)
    e.pop("SERTRACE_PROGRESS", None)
    e.pop("SERTRACE_PROGRESS_MIN_SIZE", None)
    e.update(env)
    p = subprocess.Popen([SERTRACE, *args], stdin=subprocess.DEVNULL,
                         stdout=slave if stdout_tty else subprocess.PIPE,
                         stderr=slave if stderr_tty else subprocess.PIPE, env=e)
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not b:
                return
            chunks.append(b)
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    out, err = p.communicate(timeout=HANG_GUARD)
    t.join(HANG_GUARD)
    os.close(master)
    dec = lambda b: b.decode("utf-8") if b is not None else None
    return p.returncode, b"".join(chunks).decode("utf-8"), dec(out), dec(err)


@pytest.fixture(scope="module")
def many_dumps(tmp_path_factory):
    """10,000 dumps (an 11 MB trace whose tree report is ~46 MB): long
    enough for progress to be redrawn between chunks of the report."""
    out = tmp_path_factory.mktemp("many") / "trace"
    r = run("record", "--cmd-only", "-o", str(out), "--", DUMPER, "--dumps", "10000")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("which", ["small", "many"])
def test_progress_on_the_report_terminal_never_mixes_into_it(which, recorded, request):
    """stdout and stderr on one terminal (`sertrace report big`): the
    progress line is drawn (threshold lowered to 0 bytes), always at the
    start of a line, erased before report text and at the end: take the
    progress lines and erasures out and the report is byte for byte the
    one written to a pipe."""
    out = str(recorded[0] if which == "small" else request.getfixturevalue("many_dumps"))
    plain = run("report", "--tree", out).stdout
    rc, term, _, _ = run_on_pty(["report", "--tree", out], {"SERTRACE_PROGRESS_MIN_SIZE": "0"},
                                stdout_tty=True, stderr_tty=True)
    assert rc == 0, term
    shown = list(PROGRESS_LINE.finditer(term))
    assert shown, repr(term[:300])
    for m in shown:
        before = term[:m.start()]
        assert before == "" or before.endswith(("\n", "\x1b[K")), repr(before[-80:])
    # erased before anything else comes, and at the end
    rest = term[shown[-1].end():]
    assert rest.startswith(ERASE), repr(rest[:80])
    assert PROGRESS_LINE.sub("", term).replace(ERASE, "") == plain
    assert term.count(ERASE) >= 1


def test_progress_on_a_terminal_of_its_own_keeps_the_final_count(recorded):
    out = str(recorded[0])
    plain = run("report", "--json", out).stdout
    rc, term, stdout, _ = run_on_pty(["report", "--json", out],
                                     {"SERTRACE_PROGRESS_MIN_SIZE": "0"},
                                     stdout_tty=False, stderr_tty=True)
    assert rc == 0, term
    assert stdout == plain
    assert PROGRESS_LINE.search(term), repr(term)
    assert re.search(r"\(100%\)\x1b\[K\n$", term), repr(term[-120:])


def test_no_progress_when_stderr_is_not_a_terminal(recorded):
    out = str(recorded[0])
    plain = run("report", "--tree", out).stdout
    rc, term, _, stderr = run_on_pty(["report", "--tree", out],
                                     {"SERTRACE_PROGRESS_MIN_SIZE": "0"},
                                     stdout_tty=True, stderr_tty=False)
    assert rc == 0, stderr
    assert stderr == ""
    assert term == plain  # not one escape sequence on the terminal


def test_no_progress_for_a_small_trace(recorded):
    """Without SERTRACE_PROGRESS_MIN_SIZE the threshold is 50 MB; the
    recorded trace is far below it."""
    out = str(recorded[0])
    assert sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(out) for f in fs) < 50 * 1000 * 1000
    plain = run("report", "--tree", out).stdout
    rc, term, _, _ = run_on_pty(["report", "--tree", out], {},
                                stdout_tty=True, stderr_tty=True)
    assert rc == 0, term
    assert term == plain


def test_progress_min_size_is_checked(recorded):
    r = run("report", "--json", str(recorded[0]), unset=["SERTRACE_PROGRESS"],
            env={"SERTRACE_PROGRESS_MIN_SIZE": "lots"})
    assert r.returncode == 0, r.stderr
    assert "ignoring SERTRACE_PROGRESS_MIN_SIZE='lots'" in r.stderr


def test_exit_status_is_propagated(tmp_path):
    r = run("record", "-o", str(tmp_path / "t"), "--", DUMPER, "--dumps", "1",
            "--exit", "7")
    assert r.returncode == 7
    assert "trace written to" in r.stderr


def test_killed_by_signal_gives_128_plus_signal_and_a_readable_trace(tmp_path):
    out = tmp_path / "t"
    r = run("record", "-o", str(out), "--", DUMPER, "--dumps", "2",
            "--kill", str(int(signal.SIGKILL)))
    assert r.returncode == 128 + signal.SIGKILL
    pid, sizes = printed_sizes(r.stdout)
    mine = dumps_of(report_json(str(out)), pid)
    assert sorted(d["payload_bytes"] for d in mine) == sorted(sizes.values())


def test_cmd_not_found(tmp_path):
    out = tmp_path / "t"
    name = unique("nf")
    r = run("record", "--name", name, "-o", str(out), "--",
            "no-such-command-sertrace")
    assert r.returncode == 127
    assert "no-such-command-sertrace: command not found" in r.stderr
    assert not out.exists()
    assert name not in sessions()


def test_output_dir_not_empty(tmp_path):
    (tmp_path / "junk").write_text("x")
    name = unique("ne")
    r = run("record", "--name", name, "-o", str(tmp_path), "--", DUMPER)
    assert r.returncode == 1
    assert "exists and is not empty" in r.stderr
    assert "pid" not in r.stdout  # CMD never ran
    assert sorted(os.listdir(tmp_path)) == ["junk"]
    assert name not in sessions()


def test_output_dir_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("x")
    r = run("record", "-o", str(tmp_path / "file" / "sub"), "--", DUMPER)
    assert r.returncode == 1
    assert "cannot create output directory" in r.stderr
    assert "pid" not in r.stdout


def test_empty_existing_output_dir_is_used(tmp_path):
    r = run("record", "-o", str(tmp_path), "--", DUMPER, "--dumps", "1")
    assert r.returncode == 0, r.stderr
    assert "trace written to %s" % tmp_path in r.stderr


def test_program_that_never_loads_sertrace(tmp_path):
    # --cmd-only: other processes of this user that load sertrace meanwhile
    # (parallel tests) would otherwise put a trace in the directory.
    out = tmp_path / "t"
    name = unique("nl")
    r = run("record", "--cmd-only", "--name", name, "-o", str(out), "--", "/bin/true")
    assert r.returncode == 1
    assert "no sertrace events: did the program import sertrace" in r.stderr
    assert not out.exists()  # we created it, we removed it
    assert name not in sessions()


def test_program_that_never_loads_sertrace_existing_dir_left_empty(tmp_path):
    out = tmp_path / "given"
    out.mkdir()
    r = run("record", "--cmd-only", "-o", str(out), "--", "/bin/true")
    assert r.returncode == 1
    assert "no sertrace events" in r.stderr
    assert out.is_dir() and os.listdir(out) == []  # as it was given: empty


def test_cmd_only_traces_only_the_command(tmp_path):
    # A second dumper runs meanwhile: without --cmd-only its dumps would
    # be recorded too (per-UID buffers).
    bg = subprocess.Popen([DUMPER, "--forever", "--every", "5"],
                          stdout=subprocess.PIPE, text=True)
    try:
        bg_pid = int(bg.stdout.readline().split()[1])
        assert bg.stdout.readline().startswith("dump 0")
        out = tmp_path / "t"
        r = run("record", "--cmd-only", "-o", str(out), "--", DUMPER, "--dumps", "3")
        assert r.returncode == 0, r.stderr
        pid, sizes = printed_sizes(r.stdout)
        doc = report_json(str(out))
        assert {d["pid"] for d in doc["dumps"]} == {pid}
        assert sorted(d["payload_bytes"] for d in doc["dumps"]) == sorted(sizes.values())
        assert bg_pid != pid
    finally:
        bg.terminate()
        bg.wait(timeout=HANG_GUARD)


def test_signal_is_forwarded_to_the_command(tmp_path):
    out = tmp_path / "t"
    ready = tmp_path / "ready"
    p = subprocess.Popen([SERTRACE, "record", "-o", str(out), "--", DUMPER,
                          "--forever", "--every", "20", "--ready", str(ready)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(ready.exists, "the first dump")
    p.send_signal(signal.SIGTERM)  # the dumper exits 0 on SIGTERM
    stdout, stderr = p.communicate(timeout=HANG_GUARD)
    assert p.returncode == 0, stderr
    assert "trace written to" in stderr
    pid, sizes = printed_sizes(stdout)
    mine = dumps_of(report_json(str(out)), pid)
    assert {d["payload_bytes"] for d in mine if d["complete"]} <= set(sizes.values())
    assert len(mine) >= 1


def _packet_bytes(trace):
    """Sizes in bytes of every packet of the trace's streams, from the CTF
    index files LTTng writes (index/*.idx: a 16-byte big-endian header
    "magic, major, minor, entry length", then per packet its offset,
    packet size and content size in bits, ...)."""
    import struct
    sizes = []
    for d, _, fs in os.walk(trace):
        for f in fs:
            if not f.endswith(".idx"):
                continue
            with open(os.path.join(d, f), "rb") as fh:
                b = fh.read()
            magic, _, _, entry = struct.unpack(">IIII", b[:16])
            assert magic == 0xC1F1DCC1, f
            for off in range(16, len(b) - entry + 1, entry):
                _, packet_bits, content_bits = struct.unpack(">QQQ", b[off:off + 24])
                assert packet_bits % 8 == 0 and content_bits <= packet_bits
                sizes.append(packet_bits // 8)
    return sizes


def test_buffer_size_reaches_the_channel(tmp_path):
    """--buffer-size 256K is 8 sub-buffers of 32 KiB per CPU: the session
    daemon says so (CMD lists its own session, named in $SERTRACE_SESSION),
    and the trace agrees: no packet is larger than 32 KiB, and the full
    ones (200 dumps of ~1.3 KB fill several) are exactly 32 KiB, where the
    default channel (1 MiB sub-buffers) would write one packet per CPU."""
    out = tmp_path / "t"
    listing = tmp_path / "listing"
    name = unique("buf")
    r = run("record", "--cmd-only", "--buffer-size", "256K", "--name", name, "-o", str(out),
            "--", "sh", "-c",
            'echo "session $SERTRACE_SESSION"; lttng list "$SERTRACE_SESSION" -c sertrace > "$1"'
            ' && exec "$2" --dumps 200', "sh", str(listing), DUMPER)
    assert r.returncode == 0, r.stderr
    assert "session %s\n" % name in r.stdout
    text = listing.read_text()
    assert re.search(r"^\s*Sub-buffer size:\s+32768 bytes$", text, re.M), text
    assert re.search(r"^\s*Sub-buffer count:\s+8$", text, re.M), text
    packets = _packet_bytes(out)
    assert packets and max(packets) == 32768, packets
    pid, sizes = printed_sizes(r.stdout)
    assert len(sizes) == 200
    # Whatever the buffers dropped is reported; what is there is exact.
    mine = dumps_of(report_json(str(out)), pid)
    assert {d["payload_bytes"] for d in mine if d["complete"]} <= set(sizes.values())


def test_default_buffer_is_8_subbuffers_of_1_mib(tmp_path):
    listing = tmp_path / "listing"
    r = run("record", "--cmd-only", "-o", str(tmp_path / "t"), "--", "sh", "-c",
            'lttng list "$SERTRACE_SESSION" -c sertrace > "$1" && exec "$2" --dumps 1',
            "sh", str(listing), DUMPER)
    assert r.returncode == 0, r.stderr
    text = listing.read_text()
    assert re.search(r"^\s*Sub-buffer size:\s+1048576 bytes$", text, re.M), text
    assert re.search(r"^\s*Sub-buffer count:\s+8$", text, re.M), text


@pytest.mark.parametrize("size,subbuf,count", [
    ("16M", 2 << 20, 8),   # 8 sub-buffers while each is >= 16 KiB
    ("64K", 16 << 10, 4),  # 8 x 8 KiB would not hold a 4 KiB batch with headers: 4 x 16 KiB
    ("48K", 16 << 10, 2),  # 2 x 24 KiB rounded down to LTTng's power of two
])
def test_buffer_size_is_split_into_power_of_two_subbuffers(tmp_path, size, subbuf, count):
    """The geometry `record` chooses for a per-CPU total (cli/README.md,
    "Channel size"), as the session daemon reports it."""
    listing = tmp_path / "listing"
    r = run("record", "--cmd-only", "--buffer-size", size, "-o", str(tmp_path / "t"), "--",
            "sh", "-c", 'lttng list "$SERTRACE_SESSION" -c sertrace > "$1" && exec "$2" --dumps 1',
            "sh", str(listing), DUMPER)
    assert r.returncode == 0, r.stderr
    text = listing.read_text()
    assert re.search(r"^\s*Sub-buffer size:\s+%d bytes$" % subbuf, text, re.M), text
    assert re.search(r"^\s*Sub-buffer count:\s+%d$" % count, text, re.M), text
    assert re.search(r"^\s*Event-loss mode:\s+discard$", text, re.M), text


def test_session_daemon_is_started_when_none_is_reachable(tmp_path):
    """In a private mount namespace where tmpfs hides the machine's session
    daemon (its rundir /run/lttng, and /dev/shm where LTTng-UST finds it),
    as bench/run.py does for its private daemon, `record` must start one,
    record the dumps with their exact sizes, and leave that daemon running
    (cli/README.md): it is then stopped here by the pid in its pid file."""
    import shutil
    if os.geteuid() != 0:
        pytest.skip("needs root (a mount namespace hiding the session daemon)")
    for tool in ("unshare", "mount", "lttng-sessiond", "lttng"):
        if shutil.which(tool) is None:
            pytest.skip("needs %s" % tool)
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, timeout=HANG_GUARD)
    if probe.returncode != 0:
        pytest.skip("unshare --mount is not permitted here")
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "t"
    result = tmp_path / "result.json"
    script = r"""
import json, os, signal, subprocess, sys, time
sertrace, dumper, out, result = sys.argv[1:5]
rundir = os.path.realpath("/var/run/lttng")
os.makedirs(rundir, exist_ok=True)
for target in sorted({rundir, os.path.realpath("/run/lttng"), "/dev/shm"}):
    os.makedirs(target, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", target], check=True)
res = {}
pid = None
try:
    res["before"] = subprocess.run(["lttng", "list"], capture_output=True,
                                   text=True).returncode
    rec = subprocess.run([sertrace, "record", "-o", out, "--", dumper, "--dumps", "3"],
                         capture_output=True, text=True, timeout=120)
    res.update(rc=rec.returncode, stdout=rec.stdout, stderr=rec.stderr)
    with open(os.path.join(rundir, "lttng-sessiond.pid")) as f:
        pid = int(f.read().strip())
    with open("/proc/%d/comm" % pid) as f:
        res["comm"] = f.read().strip()
    res["after"] = subprocess.run(["lttng", "list"], capture_output=True,
                                  text=True).returncode
    rep = subprocess.run([sertrace, "report", "--json", out], capture_output=True,
                         text=True, timeout=120)
    res.update(report_rc=rep.returncode, report=rep.stdout, report_err=rep.stderr)
finally:
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        res["stopped"] = not os.path.exists("/proc/%d" % pid)
    with open(result, "w") as f:
        json.dump(res, f)
"""
    env = dict(os.environ, HOME=str(home), LTTNG_HOME=str(home), SERTRACE_PROGRESS="0")
    env.pop("LTTNG_SESSIOND_PATH", None)
    c = subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                        "/usr/bin/python3", "-c", script, SERTRACE, DUMPER, str(out),
                        str(result)],
                       capture_output=True, text=True, env=env, timeout=4 * HANG_GUARD)
    assert result.exists(), c.stderr
    res = json.loads(result.read_text())
    assert c.returncode == 0, (c.stderr, res)
    assert res["before"] != 0  # no daemon was reachable in the namespace
    assert "no LTTng session daemon is reachable: starting `lttng-sessiond --daemonize`" \
        in res["stderr"], res["stderr"]
    assert res["rc"] == 0, res["stderr"]
    assert "trace written to %s" % out in res["stderr"]
    assert res["comm"] == "lttng-sessiond"
    assert res["after"] == 0  # left running, as documented
    assert res["stopped"]
    assert res["report_rc"] == 0, res["report_err"]
    pid, sizes = printed_sizes(res["stdout"])
    mine = dumps_of(json.loads(res["report"]), pid)
    assert sorted(d["payload_bytes"] for d in mine) == sorted(sizes.values())
    assert len(mine) == 3 and all(d["complete"] for d in mine)


# ---- report errors --------------------------------------------------------------

def test_no_session_daemon_and_none_can_be_started():
    """As a user outside the `tracing` group with an empty HOME, no session
    daemon is reachable; make starting one fail and check the message and
    that nothing is left behind."""
    import shutil
    import tempfile
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as user nobody")
    base = tempfile.mkdtemp(prefix="sertrace-cli-nosd-")
    try:
        os.chmod(base, 0o777)
        home = os.path.join(base, "home")
        os.mkdir(home)
        os.chmod(home, 0o777)
        out = os.path.join(base, "t")
        env = dict(os.environ, HOME=home, LTTNG_HOME=home,
                   LTTNG_SESSIOND_PATH="/bin/false")
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            SERTRACE, "record", "-o", out, "--", "/bin/true"],
                           capture_output=True, text=True, env=env, timeout=HANG_GUARD)
        assert r.returncode == 1, r.stderr
        assert "no session daemon is available" in r.stderr
        assert not os.path.exists(out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_report_missing_path(tmp_path):
    r = run("report", str(tmp_path / "nope"))
    assert r.returncode == 1
    assert "No such file or directory" in r.stderr


def test_report_empty_dir(tmp_path):
    r = run("report", str(tmp_path))
    assert r.returncode == 1
    assert "no trace found under" in r.stderr


def test_report_corrupt_metadata(tmp_path):
    d = tmp_path / "ust" / "uid" / "0" / "64-bit"
    d.mkdir(parents=True)
    (d / "metadata").write_bytes(os.urandom(4096))
    r = run("report", str(tmp_path))
    assert r.returncode == 1
    assert "corrupt or unreadable trace" in r.stderr


def _damage_streams(trace):
    streams = [os.path.join(d, f) for d, _, fs in os.walk(trace) for f in fs
               if f.startswith("sertrace_") and not f.endswith(".idx")]
    assert streams
    for s in streams:
        with open(s, "r+b") as f:
            f.write(os.urandom(64))


def test_report_skips_unreadable_traces_and_reads_the_rest(recorded, tmp_path):
    """A good trace next to three broken ones under a common parent: one
    warning per broken trace (its path and why), the good one reported."""
    import shutil
    src, pid, sizes, _ = recorded
    shutil.copytree(src, tmp_path / "good")
    garbage = tmp_path / "garbage" / "ust" / "uid" / "0" / "64-bit"
    garbage.mkdir(parents=True)
    (garbage / "metadata").write_bytes(os.urandom(4096))
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    meta = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
            if f == "metadata"][0]
    with open(meta, "rb") as f:
        (truncated / "metadata").write_bytes(f.read(300))  # inside packet 1
    shutil.copytree(src, tmp_path / "damaged")
    _damage_streams(tmp_path / "damaged")
    r = run("report", "--json", str(tmp_path))
    assert r.returncode == 3, r.stderr  # the report is incomplete: 3 traces skipped
    assert r.stderr.splitlines()[-1] == (
        "sertrace: the report is incomplete: 3 damaged or unreadable parts of %s (named "
        "above) were not read whole; exit status 3" % tmp_path)
    warnings = [l for l in r.stderr.splitlines() if "skipping" in l]
    assert len(warnings) == 3, r.stderr
    for bad in ("garbage", "truncated", "damaged"):
        assert sum(str(tmp_path / bad) in w for w in warnings) == 1, r.stderr
    assert all("corrupt or unreadable trace (" in w for w in warnings)
    assert "addr=0x" not in r.stderr
    mine = dumps_of(json.loads(r.stdout), pid)
    assert sorted(d["payload_bytes"] for d in mine) == sorted(sizes.values())


def test_report_no_readable_trace(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "metadata").write_bytes(os.urandom(512))
    r = run("report", str(tmp_path))
    assert r.returncode == 1
    assert "skipping %s" % d in r.stderr
    assert "no readable trace under %s" % tmp_path in r.stderr


def test_report_corrupt_stream(recorded, tmp_path):
    import shutil
    src = recorded[0]
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    _damage_streams(dst)
    r = run("report", str(dst))
    assert r.returncode == 1
    assert "corrupt" in r.stderr


def test_report_plugin_not_found(recorded, tmp_path):
    env = {"SERTRACE_PLUGIN_PATH": str(tmp_path), "BABELTRACE_PLUGIN_PATH": str(tmp_path)}
    r = run("report", str(recorded[0]), env=env)
    # Either found in the install/system dir, or a clear error.
    assert r.returncode == 0 or "plugin was not found" in r.stderr


# ---- production without restart: start / stop --------------------------------------

class LineCollector:
    """Collects a child's stdout lines in a thread, so a test can tell the
    lines printed after some moment from the ones already in the pipe."""

    def __init__(self, proc):
        import threading
        self.lines = []
        self.proc = proc
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_lines(self, n):
        wait_for(lambda: len(self.lines) >= n, "%d lines of output" % n)

    def text(self):
        self.thread.join(timeout=HANG_GUARD)
        return "".join(self.lines)


def test_start_stop_traces_an_already_running_process(tmp_path):
    ready = tmp_path / "ready"
    p = subprocess.Popen([DUMPER, "--forever", "--every", "50", "--ready", str(ready)],
                         stdout=subprocess.PIPE, text=True)
    lines = LineCollector(p)
    try:
        wait_for(ready.exists, "the dumper's first dump")
        out = tmp_path / "t"
        name = unique("ss")
        r = run("start", "--name", name, "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == name
        assert name in sessions()
        # Let the running process dump 8 more times under the session.
        lines.wait_lines(len(lines.lines) + 8)
        r = run("stop", name)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == str(out)
        assert name not in sessions()
    finally:
        p.terminate()
        p.wait(timeout=HANG_GUARD)
    pid, sizes = printed_sizes(lines.text())
    assert pid == p.pid
    mine = dumps_of(report_json(str(out)), pid)
    complete = [d["payload_bytes"] for d in mine if d["complete"]]
    # 8 dumps ran entirely while the session was on; the dumps cut by
    # start/stop are the only ones allowed to be missing or incomplete.
    assert len(complete) >= 7
    assert set(complete) <= set(sizes.values())


def test_stop_unknown_session():
    r = run("stop", unique("none"))
    assert r.returncode == 1
    assert "no session named" in r.stderr


def test_stop_of_a_session_that_recorded_nothing_removes_its_empty_dir(tmp_path):
    """`stop` must not say "no trace was written under DIR" and leave DIR/ust
    behind.  The session is made with the lttng CLI and an empty VPID
    tracker, so no process (this user runs other sertrace programs
    meanwhile) can put an event in it."""
    out = tmp_path / "t"
    name = unique("empty")
    for cmd in (["create", name, "--output=%s" % out],
                ["enable-channel", "-u", "-s", name, "--buffers-uid", "sertrace"],
                ["enable-event", "-u", "-s", name, "-c", "sertrace", "sertrace:*"],
                ["untrack", "-u", "-s", name, "--vpid", "--all"],
                ["start", name]):
        lttng.run(*cmd, timeout=HANG_GUARD)
    subprocess.run([DUMPER, "--dumps", "2"], capture_output=True, timeout=HANG_GUARD)
    r = run("stop", name)
    assert r.returncode == 1
    assert "no sertrace events" in r.stderr
    assert "removed the empty directory %s" % out in r.stderr
    assert not out.exists()
    assert r.stdout == ""
    assert name not in sessions()


def test_python_process_traced_after_start(tmp_path):
    """The issue's scenario: a long-running Python process that imported
    sertrace (DISPATCH_TRACE off) is traced by a session created later."""
    pypath = os.environ.get("SERTRACE_TEST_PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=pypath, DISPATCH_TRACE="0")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sertrace; sertrace.dumps"],
                           env=env, capture_output=True, timeout=HANG_GUARD)
    if not pypath or probe.returncode != 0:
        pytest.skip("the sertrace Python package is not built")
    ready = tmp_path / "ready"
    script = (
        "import sys, time, sertrace\n"
        "state = {'k%d' % i: list(range(i)) for i in range(50)}\n"
        "n = 0\n"
        "while True:\n"
        "    b = sertrace.dumps(state, protocol=4)\n"
        "    print('dump', n, 'bytes', len(b), flush=True)\n"
        "    if n == 0: open(sys.argv[1], 'w').close()\n"
        "    n += 1\n"
        "    time.sleep(0.05)\n")
    p = subprocess.Popen(["/usr/bin/python3", "-c", script, str(ready)], env=env,
                         stdout=subprocess.PIPE, text=True)
    lines = LineCollector(p)
    try:
        wait_for(ready.exists, "the Python process's first dump")
        out = tmp_path / "t"
        name = unique("py")
        r = run("start", "--name", name, "-o", str(out))
        assert r.returncode == 0, r.stderr
        lines.wait_lines(len(lines.lines) + 8)
        r = run("stop", name)
        assert r.returncode == 0, r.stderr
    finally:
        p.terminate()
        p.wait(timeout=HANG_GUARD)
    doc = report_json(str(out))
    mine = [d for d in doc["dumps"] if d["pid"] == p.pid and d["complete"]]
    assert len(mine) >= 7
    expected = len(__import__("pickle").dumps(
        {'k%d' % i: list(range(i)) for i in range(50)}, protocol=4))
    assert {d["payload_bytes"] for d in mine} == {expected}


# ---- flight recorder --------------------------------------------------------------

def test_snapshot_session(tmp_path):
    out = tmp_path / "t"
    ready = tmp_path / "ready"
    name = unique("snap")
    rec = subprocess.Popen([SERTRACE, "record", "--snapshot", "--name", name, "-o",
                            str(out), "--", DUMPER, "--forever", "--every", "20",
                            "--ready", str(ready)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready.exists, "the first dump")
        wait_for(lambda: name in sessions(), "the snapshot session")
        r = run("snapshot", name)
        assert r.returncode == 0, r.stderr
        snap = r.stdout.strip()
        assert snap.startswith(str(out) + "/")
        other = tmp_path / "elsewhere"
        r2 = run("snapshot", "-o", str(other), name)
        assert r2.returncode == 0, r2.stderr
        assert r2.stdout.strip().startswith(str(other) + "/")
    finally:
        rec.send_signal(signal.SIGTERM)
        stdout, stderr = rec.communicate(timeout=HANG_GUARD)
    assert rec.returncode == 0, stderr
    assert "flight-recorder session %s" % name in stderr
    assert "last snapshot written to" in stderr
    assert name not in sessions()
    pid, sizes = printed_sizes(stdout)
    mine = dumps_of(report_json(snap), pid)
    assert mine
    assert {d["payload_bytes"] for d in mine if d["complete"]} <= set(sizes.values())
    # The whole directory (several snapshots of one session) reads too.
    assert dumps_of(report_json(str(out)), pid)


def test_snapshot_of_a_normal_session_is_refused(tmp_path):
    name = unique("nosnap")
    r = run("start", "--name", name, "-o", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    try:
        s = run("snapshot", name)
        assert s.returncode == 1
        assert "not a snapshot session" in s.stderr
    finally:
        run("stop", name)
    assert name not in sessions()


# ---- live ----------------------------------------------------------------------------

def _free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture
def relay(tmp_path):
    """A private lttng-relayd on random loopback ports; yields
    (control, data, live) ports and is stopped by its pid afterwards."""
    ctrl, data, live = _free_ports(3)
    relay_out = tmp_path / "relay"
    relay_out.mkdir()
    relayd = subprocess.Popen(
        ["lttng-relayd", "-C", "tcp://127.0.0.1:%d" % ctrl,
         "-D", "tcp://127.0.0.1:%d" % data, "-L", "tcp://127.0.0.1:%d" % live,
         "-o", str(relay_out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def relay_listening():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", live)) == 0
        wait_for(relay_listening, "lttng-relayd")
        yield ctrl, data, live
    finally:
        relayd.terminate()
        relayd.wait(timeout=HANG_GUARD)


def _wait_reader_attached(live, name):
    def reader_attached():
        # The relay daemon lists its sessions and connected viewers.
        ls = subprocess.run(["babeltrace2", "-i", "lttng-live",
                             "net://127.0.0.1:%d" % live],
                            capture_output=True, text=True, timeout=HANG_GUARD)
        return re.search(r"/%s .*1 client\(s\) connected" % re.escape(name),
                         ls.stdout) is not None
    wait_for(reader_attached, "the live reader to attach")


def test_live_report(relay):
    ctrl, data, live = relay
    name = unique("live")
    reader = None
    try:
        r = run("start", "--name", name, "--live", "net://127.0.0.1:%d:%d" % (ctrl, data))
        assert r.returncode == 0, r.stderr
        url = "net://127.0.0.1:%d/host/%s/%s" % (live, socket.gethostname(), name)
        reader = subprocess.Popen([SERTRACE, "report", "--json", "--live", url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        _wait_reader_attached(live, name)
        d = subprocess.run([DUMPER, "--dumps", "5", "--every", "50"],
                           capture_output=True, text=True, timeout=HANG_GUARD)
        pid, sizes = printed_sizes(d.stdout)
        r = run("stop", name)
        assert r.returncode == 0, r.stderr
        # The reader must end by itself once the session is gone.
        stdout, stderr = reader.communicate(timeout=HANG_GUARD)
        assert reader.returncode == 0, stderr
        doc = json.loads(stdout)
        mine = dumps_of(doc, pid)
        assert sorted(x["payload_bytes"] for x in mine) == sorted(sizes.values())
    finally:
        if reader is not None and reader.poll() is None:
            reader.kill()
            reader.wait()
        if name in sessions():
            run("stop", name)


def test_live_tree_is_printed_while_the_session_runs(relay, tmp_path):
    """`report --live` prints each tree as its dump ends: the dumper dumps
    once (a tree of ~4 KB, far below any output buffer) and then holds,
    alive, until the test has read that tree from the reader's pipe; only
    then do the dumper end and the session stop.  Without a flush per dump
    the tree would only come out when the session is destroyed, and the
    wait below would time out.  Other sertrace processes of this user would
    fill the sink's buffer and hide that, so the session (made with the
    lttng commands `sertrace start --live` stands for, cli/README.md)
    tracks no process but the dumper."""
    ctrl, data, live = relay
    name = unique("livetree")
    hold, go = tmp_path / "hold", tmp_path / "go"
    reader = dumper = None
    try:
        for cmd in (["create", name, "--live=200000",
                     "--set-url=net://127.0.0.1:%d:%d" % (ctrl, data)],
                    ["enable-channel", "-u", "-s", name, "--buffers-uid", "sertrace"],
                    ["enable-event", "-u", "-s", name, "-c", "sertrace", "sertrace:*"],
                    ["add-context", "-u", "-s", name, "-c", "sertrace", "-t", "vtid",
                     "-t", "vpid"],
                    ["untrack", "-u", "-s", name, "--vpid", "--all"],
                    ["start", name]):
            lttng.run(*cmd, timeout=HANG_GUARD)
        url = "net://127.0.0.1:%d/host/%s/%s" % (live, socket.gethostname(), name)
        with open(tmp_path / "reader.err", "w") as err:
            reader = subprocess.Popen([SERTRACE, "report", "--tree", "--exact", "--live", url],
                                      stdout=subprocess.PIPE, stderr=err, text=True)
        lines = LineCollector(reader)
        _wait_reader_attached(live, name)
        # The shell keeps its pid when it execs the dumper: track it first.
        dumper = subprocess.Popen(
            ["sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.01; done; shift; exec "$@"', "sh",
             str(go), DUMPER, "--dumps", "1", "--hold", str(hold)],
            stdout=subprocess.PIPE, text=True)
        lttng.run("track", "-u", "-s", name, "--vpid=%d" % dumper.pid, timeout=HANG_GUARD)
        go.touch()
        pid = int(dumper.stdout.readline().split()[1])
        assert pid == dumper.pid
        size = int(re.match(r"dump 0 bytes (\d+)$", dumper.stdout.readline()).group(1))

        def my_tree():
            text = "".join(lines.lines)
            return re.search(r"^── dump \d+ · pid %d · .*\n┬ Map: .*\n(?:.*\n)*?└ # Map \[%d B\]"
                             % (pid, size - 3), text, re.M)
        wait_for(my_tree, "the tree of the dump while the session runs")
        # Seen while the dumper still runs and the session still exists.
        assert dumper.poll() is None
        assert name in sessions()
        hold.touch()
        assert dumper.wait(timeout=HANG_GUARD) == 0
        r = run("stop", name)
        assert r.returncode == 0, r.stderr
        assert reader.wait(timeout=HANG_GUARD) == 0, (tmp_path / "reader.err").read_text()
        assert my_tree().group(0).count("┬ Sc: ") == sum(1 + i % 4 for i in range(20))
    finally:
        hold.touch()
        go.touch()
        for p in (dumper, reader):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if name in sessions():
            run("stop", name)


# ---- report filters: --pid, --dump, --serializer, --no-per-dump ----------------

@pytest.fixture(scope="module")
def two_programs(tmp_path_factory):
    """One recording of two dumper processes at once, serializers alpha (4
    dumps) and beta (5 dumps), each printing its pid and sizes to its own
    file."""
    base = tmp_path_factory.mktemp("two")
    out = base / "trace"
    a, b = base / "a.txt", base / "b.txt"
    script = ('"$1" --dumps 4 --serializer alpha > "$2" & '
              '"$1" --dumps 5 --serializer beta > "$3"; wait')
    r = run("record", "-o", str(out), "--", "sh", "-c", script, "sh", DUMPER, str(a), str(b))
    assert r.returncode == 0, r.stderr
    progs = {}
    for name, f in (("alpha", a), ("beta", b)):
        pid, sizes = printed_sizes(f.read_text())
        progs[name] = (pid, sorted(sizes.values()))
    return str(out), progs


def mine(doc, progs):
    """The dumps of our two programs (other sertrace programs of the
    machine may be in the trace: no --cmd-only here)."""
    pids = {p for p, _ in progs.values()}
    return [d for d in doc["dumps"] if d["pid"] in pids]


def tree_headers(text, pids):
    return sorted((int(p), int(n)) for n, p in
                  re.findall(r"^── dump (\d+) · pid (\d+) · ", text, re.M) if int(p) in pids)


def summary_headers(text, pids):
    return sorted((int(p), int(n)) for n, p in
                  re.findall(r"^dump (\d+) · pid (\d+) · ", text, re.M) if int(p) in pids)


def test_report_filter_by_pid_dump_serializer(two_programs):
    trace, progs = two_programs
    (pa, sa), (pb, sb) = progs["alpha"], progs["beta"]
    full = json.loads(run("report", "--json", trace).stdout)
    assert full["filter"] is None
    everything = mine(full, progs)
    assert len(everything) == 9
    left_out_others = len(full["dumps"]) - 9  # other programs' dumps, if any

    def check(args, keep):
        """The same dumps, whatever the output; JSON says what was filtered."""
        r = run("report", "--json", *args, trace)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        got = sorted((d["pid"], d["dump_id"]) for d in doc["dumps"])
        want = sorted((d["pid"], d["dump_id"]) for d in full["dumps"] if keep(d))
        assert got == want, (args, got, want)
        assert doc["totals"]["dumps"] == len(want)
        assert doc["filter"]["dumps_left_out"] == len(full["dumps"]) - len(want)
        # tree and summary keep the same dumps, and end with the filter line
        pids = {pa, pb}
        t = run("report", "--tree", *args, trace)
        assert t.returncode == 0, t.stderr
        assert tree_headers(t.stdout, pids) == [x for x in want if x[0] in pids]
        assert len(re.findall(r"^── dump ", t.stdout, re.M)) == len(want)
        m = re.search(r"^── filter: (.*) · (\d+) dumps? left out\n\Z", t.stdout, re.M)
        assert m and int(m.group(2)) == len(full["dumps"]) - len(want), t.stdout[-300:]
        s = run("report", "--summary", *args, trace)
        assert s.returncode == 0, s.stderr
        assert summary_headers(s.stdout, pids) == [x for x in want if x[0] in pids]
        assert s.stdout.endswith(m.group(0))
        return doc

    doc = check(["--pid", str(pa)], lambda d: d["pid"] == pa)
    assert doc["filter"] == {"pid": [pa], "dump": [], "serializer": [],
                             "dumps_left_out": 5 + left_out_others}
    assert sorted(d["payload_bytes"] for d in doc["dumps"]) == sa
    assert all(d["serializer"] == "alpha" and d["complete"] for d in doc["dumps"])
    check(["--pid", str(pa), "--pid", str(pb)], lambda d: d["pid"] in (pa, pb))
    doc = check(["--serializer", "beta"], lambda d: d["serializer"] == "beta")
    assert sorted(d["payload_bytes"] for d in doc["dumps"]) == sb
    assert doc["filter"]["serializer"] == ["beta"]
    check(["--serializer", "beta", "--serializer", "alpha"],
          lambda d: d["serializer"] in ("alpha", "beta"))
    ids = sorted({d["dump_id"] for d in everything})[:2]
    doc = check(["--dump", str(ids[0]), "--dump", str(ids[1])],
                lambda d: d["dump_id"] in ids)
    assert doc["filter"]["dump"] == ids
    check(["--pid", str(pb), "--dump", str(ids[0]), "--serializer", "beta"],
          lambda d: d["pid"] == pb and d["dump_id"] == ids[0] and d["serializer"] == "beta")
    # every option given must match: beta's pid with alpha's serializer is nothing
    doc = check(["--pid", str(pb), "--serializer", "alpha"], lambda d: False)
    assert doc["totals"]["dumps"] == 0
    # the summary's totals are those of the kept dumps
    r = run("report", "--summary", "--pid", str(pb), trace)
    assert "== overall: 5 dumps, 5 complete" in r.stdout
    assert ("payload %d B" % sum(sb)) in r.stdout


def test_report_no_per_dump(two_programs):
    trace, progs = two_programs
    pa = progs["alpha"][0]
    full = run("report", "--summary", "--pid", str(pa), trace)
    short = run("report", "--summary", "--no-per-dump", "--pid", str(pa), trace)
    assert full.returncode == 0 and short.returncode == 0, short.stderr
    # per dump: the two header lines only; the overall part is the same
    assert summary_headers(short.stdout, {pa}) == summary_headers(full.stdout, {pa})
    assert len(summary_headers(short.stdout, {pa})) == 4
    assert full.stdout.count("  by kind ") == 5   # 4 dumps + overall
    assert short.stdout.count("  by kind ") == 1  # overall only
    assert "largest nodes" not in short.stdout.split("== overall")[0]
    legend = "  (incl. = bytes including children; self = own bytes; share = self / root bytes)\n"
    assert (short.stdout.split("== overall")[1].replace(legend, "") ==
            full.stdout.split("== overall")[1])
    assert len(short.stdout.splitlines()) < len(full.stdout.splitlines()) // 2


def test_summary_share_is_what_the_legend_says(tmp_path):
    """The kind and type tables' share is self / the root's bytes (the sum of all self
    bytes), not self / payload (which adds the PROTO, FRAME and STOP around the root):
    the legend says which, and each row's share is that ratio (text: truncated to
    0.1%; JSON: 4 decimals)."""
    f = tmp_path / "p.pkl"
    f.write_bytes(pickle.dumps({"a": [1, 2, 3], "b": "x" * 10}, protocol=4))
    doc = json.loads(run("inspect", "--json", str(f)).stdout)
    (d,) = doc["dumps"]
    root, payload = d["root_bytes"], d["payload_bytes"]
    assert root < payload  # 12 bytes of header and STOP: the two ratios differ
    for row in d["by_kind"] + d["by_type"]:
        assert row["share"] == round(row["self"] / root, 4), row
    text = run("inspect", "--summary", "--exact", str(f)).stdout
    assert "share = self / root bytes)" in text
    for row in d["by_kind"]:
        line = next(l for l in text.splitlines() if l.split()[:1] == [row["tag"]])
        share = float(line.split()[-1 - len(row["kind"].split())].rstrip("%"))
        assert share == int(row["self"] * 1000 / root + 0.5) / 10, (line, row)


# ---- traces that are not what the user thinks ------------------------------------

def _lttng(*args):
    lttng.run(*args, timeout=HANG_GUARD)


def test_report_foreign_trace_has_no_sertrace_events(tmp_path):
    """A real LTTng trace of another provider's events only."""
    foreign = os.environ.get("SERTRACE_TEST_FOREIGN", "")
    if not foreign:
        pytest.skip("SERTRACE_TEST_FOREIGN not set (run through meson)")
    name, out = unique("foreign"), tmp_path / "trace"
    _lttng("create", name, "--output=" + str(out))
    try:
        _lttng("enable-event", "-u", "-s", name, "sertrace_test_foreign:*")
        _lttng("start", name)
        assert subprocess.run([foreign, "25"], capture_output=True, text=True,
                              timeout=HANG_GUARD).stdout == "ticks 25\n"
        _lttng("stop", name)
    finally:
        _lttng("destroy", name)
    for mode in ("--tree", "--summary", "--json"):
        r = run("report", mode, str(out))
        assert r.returncode == 1, (mode, r.stdout, r.stderr)
        assert r.stdout == ""
        assert r.stderr == (
            "sertrace: no sertrace events in %s (25 events of other providers, such as "
            "`sertrace_test_foreign:tick`): is this a trace of a program that loaded "
            "sertrace?\n" % out), r.stderr


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """One dumper, --cmd-only, pinned to CPU 0 for its first 300 dumps and
    to CPU 1 for the next 200: with per-CPU buffers the first 300 dumps
    are in stream file sertrace_0, in order, the rest in sertrace_1.
    Small sub-buffers (32 KiB), so each file holds many packets; 2 ms
    between dumps, as 32 KiB sub-buffers filled at full speed lose events
    (the consumer daemon cannot keep up), which is not what is tested."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    out = tmp_path_factory.mktemp("pinned") / "trace"
    r = run("record", "--cmd-only", "--buffer-size", "256K", "-o", str(out), "--",
            "taskset", "-c", "0", DUMPER, "--dumps", "500", "--every", "2",
            "--cpu1-after", "300")
    assert r.returncode == 0, r.stderr
    assert "0 events discarded, 0 packets lost" in r.stderr
    pid, sizes = printed_sizes(r.stdout)
    trace_dir = [d for d, _, fs in os.walk(out) if "metadata" in fs]
    assert len(trace_dir) == 1
    doc = report_json(str(out))
    dumps = sorted(dumps_of(doc, pid), key=lambda d: d["dump_id"])
    assert [d["payload_bytes"] for d in dumps] == [sizes[n] for n in range(500)]
    ids0 = [d["dump_id"] for d in dumps[:300]]  # in sertrace_0
    ids1 = [d["dump_id"] for d in dumps[300:]]  # in sertrace_1
    return out, trace_dir[0], pid, dumps, ids0, ids1


def _packets(stream_path):
    """(offset, size, content size) of each packet in bytes, from LTTng's
    index of the stream."""
    d, name = os.path.split(stream_path)
    raw = open(os.path.join(d, "index", name + ".idx"), "rb").read()
    magic, major, minor, entry = struct.unpack(">IIII", raw[:16])
    assert magic == 0xC1F1DCC1
    return [(o, p // 8, c // 8) for o, p, c in
            (struct.unpack(">QQQ", raw[i:i + 24]) for i in range(16, len(raw), entry))]


def _copy_cut(src, dst, stream, size):
    import shutil
    shutil.copytree(src, dst)
    rel = os.path.relpath(stream, src)
    os.truncate(os.path.join(dst, rel), size)
    return os.path.join(dst, rel)


def test_report_reads_a_cut_stream_up_to_the_damage(pinned, tmp_path):
    """sertrace_0 cut at several points: every dump before the cut is
    reported (exact, complete: a prefix of that file's dumps, in order),
    the one cut is unfinished, none after it; sertrace_1 is read whole;
    stderr names the file and what was lost; exit 3.  A cut inside packet
    k reads the same as a cut at its start."""
    out, tdir, pid, dumps, ids0, ids1 = pinned
    stream = os.path.join(tdir, "sertrace_0")
    packets = _packets(stream)
    assert len(packets) >= 6, packets
    k = len(packets) // 2
    # the last packet with events (the stream may end with packets that
    # hold none: the flush at the session's stop)
    last = max(i for i, p in enumerate(packets) if p[2] > 1024)
    assert last > k + 1, packets
    cuts = {
        "inside the first packet": (100, 0),
        "at a packet boundary": (packets[k][0], k),
        "inside a middle packet": (packets[k][0] + packets[k][1] // 16, k),
        "inside the last packet with events": (packets[last][0] + 200, last),
    }
    by_id = {d["dump_id"]: d for d in dumps}
    seen = {}
    for what, (size, kept) in cuts.items():
        t = tmp_path / what.replace(" ", "-")
        cut_file = _copy_cut(out, t, stream, size)
        r = run("report", "--json", str(t))
        assert r.returncode == 3, (what, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 2, lines
        assert lines[0].startswith("sertrace: warning: %s " % cut_file), lines
        assert ("read its first %d whole packets" % kept) in lines[0], lines[0]
        assert ("inside packet %d " % (kept + 1) in lines[0]) or (
            "is shorter than its index says (%d of " % size in lines[0]), lines[0]
        assert "written by the tracer are missing" in lines[0]
        assert lines[1] == ("sertrace: the report is incomplete: 1 damaged or unreadable part "
                            "of %s (named above) was not read whole; exit status 3" % t)
        doc = json.loads(r.stdout)
        got = sorted(dumps_of(doc, pid), key=lambda d: d["dump_id"])
        got0 = [d for d in got if d["dump_id"] in ids0]
        complete = [d for d in got0 if d["complete"]]
        # a prefix of sertrace_0's dumps, exact, then at most the one cut
        assert [d["dump_id"] for d in complete] == ids0[:len(complete)]
        assert all(d["payload_bytes"] == by_id[d["dump_id"]]["payload_bytes"]
                   for d in complete)
        assert len(got0) - len(complete) <= 1
        if len(got0) > len(complete):
            assert got0[-1]["dump_id"] == ids0[len(complete)]
            assert got0[-1]["unfinished"] and got0[-1]["payload_bytes"] is None
        assert len(complete) < len(ids0)
        # sertrace_1 is read whole
        got1 = [d for d in got if d["dump_id"] in ids1]
        assert [d["payload_bytes"] for d in got1] == [by_id[i]["payload_bytes"] for i in ids1]
        assert all(d["complete"] for d in got1)
        seen[what] = [(d["dump_id"], d["complete"]) for d in got0]
    assert seen["inside the first packet"] == []
    assert seen["at a packet boundary"] == seen["inside a middle packet"]
    assert len(seen["at a packet boundary"]) > 0
    assert len(seen["inside the last packet with events"]) > len(seen["inside a middle packet"])


def test_report_emptied_stream_file(pinned, tmp_path):
    """sertrace_0 emptied: its dumps are gone, sertrace_1's are read, exit 3;
    both emptied: no sertrace events, exit 1."""
    out, tdir, pid, dumps, ids0, ids1 = pinned
    rel = os.path.relpath(tdir, out)
    first = _copy_cut(out, tmp_path / "one", os.path.join(tdir, "sertrace_0"), 0)
    r = run("report", "--json", str(tmp_path / "one"))
    assert r.returncode == 3, r.stderr
    assert ("%s is shorter than its index says (0 of " % first) in r.stderr
    got = sorted(dumps_of(json.loads(r.stdout), pid), key=lambda d: d["dump_id"])
    assert [d["dump_id"] for d in got] == ids1
    assert [d["payload_bytes"] for d in got] == [d["payload_bytes"] for d in dumps[300:]]
    os.truncate(os.path.join(tmp_path / "one", rel, "sertrace_1"), 0)
    for mode in ("--tree", "--json"):
        r = run("report", mode, str(tmp_path / "one"))
        assert r.returncode == 1, r.stderr
        assert r.stdout == ""
        assert ("sertrace: no sertrace events in what could be read of %s (no events at "
                "all)" % (tmp_path / "one")) in r.stderr
        assert r.stderr.count("is shorter than its index says") == 2


def test_report_sets_aside_a_stream_babeltrace2_refuses(pinned, tmp_path):
    """A stream file whose packets name a stream class the metadata does
    not have (as after a SIGKILL, issue 12): babeltrace2 refuses the whole
    trace; report sets that file aside, says why, reads the other, exit 3."""
    import shutil
    out, tdir, pid, dumps, ids0, ids1 = pinned
    dst = tmp_path / "t"
    shutil.copytree(out, dst)
    bad = os.path.join(dst, os.path.relpath(tdir, out), "sertrace_1")
    with open(bad, "r+b") as f:  # stream_id (u32 at byte 20) of packet 1
        f.seek(20)
        f.write(struct.pack("<I", 5))
    bare = subprocess.run(["babeltrace2", "--plugin-path=" + PLUGIN_PATH,
                           "-c", "sink.sertrace.summary", str(dst)],
                          capture_output=True, text=True, timeout=HANG_GUARD)
    assert bare.returncode != 0  # what report must not do
    r = run("report", "--json", str(dst))
    assert r.returncode == 3, r.stderr
    assert ("warning: %s set aside (babeltrace2 refuses it: No stream class with ID" % bad
            in r.stderr), r.stderr
    got = sorted(dumps_of(json.loads(r.stdout), pid), key=lambda d: d["dump_id"])
    assert [d["dump_id"] for d in got] == ids0
    assert [d["payload_bytes"] for d in got] == [d["payload_bytes"] for d in dumps[:300]]
    assert all(d["complete"] for d in got)


# ---- one wording for flags: the live tree and the report -------------------------

FLAGS_SCRIPT = r"""
import os, sertrace
def notify_workflow():
    def render():
        pass
    return render
class Step:
    def __init__(self, cb):
        self.cb = cb
        self.blob = b"x" * 3000
state = {"big": list(range(2000)), "steps": [Step(1), Step(notify_workflow())]}
try:
    sertrace.dumps(state, 4)
except Exception as e:
    print("refused", type(e).__name__)
print("ok", len(sertrace.dumps({"big": b"y" * 5000, "small": 1}, 4)))
print("pid", os.getpid())
"""


def _flag_lines(text):
    """The flags of a tree, in order: each flag line's text, and each
    flagged exit line's tag and flags (sizes left out: a node a failed dump
    left open is a lower bound in both, from different positions)."""
    out = []
    for line in text.splitlines():
        body = line.lstrip("│")
        if body.startswith(" !! "):
            out.append(body[1:])
        elif body.startswith("└ # ") and "]  " in body:
            tag = body[4:].split(" ", 1)[0]
            out.append("%s: %s" % (tag, body.split("]  ", 1)[1]))
    return out


def test_live_and_report_flags_read_the_same(tmp_path):
    """Issue 12: the live tree said `!! UNSERIALIZABLE F2 'function' ...`
    where the report said `notify_workflow.<locals>.render`, and `(>= …)`
    where it said `(≥ …)`.  One program, recorded and with DISPATCH_TRACE
    at once: a dump refused on a local function, and a dump with an
    oversized node; the flag lines of each dump are the same live and
    reported."""
    pypath = os.environ.get("SERTRACE_TEST_PYTHONPATH", "")
    if not pypath:
        pytest.skip("the Python package is not built")
    live = tmp_path / "live.txt"
    out = tmp_path / "trace"
    env = {"PYTHONPATH": pypath, "DISPATCH_TRACE": str(live), "SERTRACE_OVERSIZE": "1K"}
    r = run("record", "--cmd-only", "-o", str(out), "--", "/usr/bin/python3", "-c",
            FLAGS_SCRIPT, env=env)
    assert r.returncode == 0, r.stderr
    assert "refused PicklingError" in r.stdout or "refused AttributeError" in r.stdout, r.stdout
    pid = int(re.search(r"^pid (\d+)$", r.stdout, re.M).group(1))
    rep = run("report", "--tree", "--oversize", "1K", "--pid", str(pid), str(out))
    assert rep.returncode == 0, rep.stderr
    live_dumps = re.split(r"^# sertrace dump \d+ .*\n", live.read_text(), flags=re.M)[1:]
    rep_dumps = re.split(r"^── dump \d+ .*\n", rep.stdout, flags=re.M)[1:]
    assert len(live_dumps) == len(rep_dumps) == 2
    failed_live, failed_rep = _flag_lines(live_dumps[0]), _flag_lines(rep_dumps[0])
    assert failed_live == failed_rep, (failed_live, failed_rep)
    unser = [f for f in failed_live if f.startswith("!! UNSERIALIZABLE ")]
    assert len(unser) == 1, failed_live
    assert unser[0].startswith(
        "!! UNSERIALIZABLE F2 __main__.notify_workflow.<locals>.render: "), unser
    assert unser[0].endswith(" at dict['steps'][1].cb"), unser
    assert any("!! OVERSIZED (\u2265 1.0 KiB)" in f for f in failed_live), failed_live
    big_live, big_rep = _flag_lines(live_dumps[1]), _flag_lines(rep_dumps[1])
    assert big_live == big_rep and big_live, (big_live, big_rep)
    assert all(">=" not in f for f in failed_live + big_live)
