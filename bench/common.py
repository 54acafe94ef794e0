"""Shared plumbing for the benchmark scripts in bench/ (no measurements here).

- Tools: where `sertrace`, the Python package and the babeltrace2 plugin are.
  With a build directory (--build DIR, or SERTRACE_BENCH_BUILD) everything
  comes from it (DIR/cli/sertrace, DIR/python, DIR/analyzers/plugin);
  without one, from the installed system (`scripts/setup.sh` runs `meson
  install`): `sertrace` on PATH, `import sertrace` from site-packages, the
  plugin from babeltrace2's system plugin directory.
- LTTng sessions made the way `sertrace record` makes them (per-UID buffers,
  channel `sertrace` of 8 x 1 MiB sub-buffers per CPU, `sertrace:*`, vtid and
  vpid contexts), optionally restricted to one process (VPID tracker), with
  unique names and their own output directory, always destroyed; another
  geometry through SERTRACE_BENCH_CHANNEL (see geometry.py).
- Statistics: medians and min-max spread of samples and of paired ratios.

Every timing in bench/ interleaves its contenders in one process (A B A B
...), so slow drift of the machine (other jobs, frequency, page cache) hits
both sides of a ratio alike.  A ratio is computed per round (B_i / A_i) and
the table shows the median of those ratios and their min-max.
"""

import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Debian's CPython (see README): never the first python3 on PATH.  run.py's
# --also-python runs the timing parts under another CPython by setting
# SERTRACE_BENCH_PYTHON for them (with that version's build directory).
PYTHON = os.environ.get("SERTRACE_BENCH_PYTHON") or "/usr/bin/python3"


class Tools:
    """Where the pieces under test live: a build directory or the installed system."""

    def __init__(self, build=None):
        self.build = os.path.abspath(build) if build else None
        if self.build:
            self.sertrace = os.path.join(self.build, "cli", "sertrace")
            self.pythonpath = os.path.join(self.build, "python")
            self.plugin_dir = os.path.join(self.build, "analyzers", "plugin")
        else:
            self.sertrace = shutil.which("sertrace") or "sertrace"
            self.pythonpath = None
            self.plugin_dir = None

    def env(self, extra=None, drop=("DISPATCH_TRACE", "SERTRACE_GRANULARITY",
                                    "SERTRACE_EXACT", "SERTRACE_OVERSIZE")):
        """Environment for a child process: sertrace knobs cleared, then `extra`."""
        env = dict(os.environ)
        for k in drop:
            env.pop(k, None)
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath + (
                os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if self.plugin_dir:
            env["SERTRACE_PLUGIN_PATH"] = self.plugin_dir
        env.update(extra or {})
        return env

    def bt2_plugin_args(self):
        return ["--plugin-path=" + self.plugin_dir] if self.plugin_dir else []

    def build_info(self):
        """The line meson writes to BUILD-INFO (root meson.build): profile-guided or
        plain, compiler, buildtype.  The installed copy sits beside the package."""
        path = ""
        if self.build:
            path = os.path.join(self.build, "BUILD-INFO")
        else:
            r = run([PYTHON, "-c", "import os, sertrace; print(os.path.dirname(sertrace.__file__))"],
                    env=self.env())
            if r.returncode == 0:
                path = os.path.join(r.stdout.strip(), "BUILD-INFO")
        try:
            with open(path) as f:
                return f.readline().strip()
        except OSError:
            return "which build unknown (no BUILD-INFO)"

    def describe(self):
        where = ("build directory `%s`" % os.path.relpath(self.build, ROOT)
                 if self.build else "installed system (`sertrace` on PATH, site-packages)")
        return "%s: %s" % (where, self.build_info())


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, **kw)


def lttng(*args):
    return run(["lttng"] + list(args))


def lttng_available():
    return shutil.which("lttng") is not None and lttng("list").returncode == 0


def ensure_sessiond():
    """Start an lttng-sessiond if none answers (as scripts/setup.sh does)."""
    if shutil.which("lttng") is None:
        return False
    if lttng("list").returncode == 0:
        return True
    run(["lttng-sessiond", "--daemonize"])
    for _ in range(50):
        if lttng("list").returncode == 0:
            return True
        time.sleep(0.1)
    return False


def foreign_active_sessions(mine=()):
    """Names of active LTTng sessions that are not ours (they may record our
    'dormant' processes: per-UID sessions enable sertrace:* for every process)."""
    r = lttng("list")
    out = []
    for line in r.stdout.splitlines():
        line = line.strip()
        # "1) NAME [active]" or "1) NAME (/path) [active]"
        if line[:1].isdigit() and "[active]" in line:
            name = line.split(")", 1)[1].split()[0]
            if name not in mine:
                out.append(name)
    return out


# The channel geometry of every bench session: SERTRACE_BENCH_CHANNEL when
# set (bench/geometry.py's spelling, e.g. "256Kx8" or "1Mx8:pid"), else
# the one `sertrace record` uses by default.
DEFAULT_GEOMETRY = "1Mx8"


def parse_geometry(spec):
    """'SUBxN[:pid][:rt=US][:st=US][:block]' -> dict of the channel's settings."""
    head, *flags = spec.split(":")
    sub, _, num = head.lower().partition("x")
    if not sub or not num.isdigit():
        raise ValueError("bad geometry %r (want e.g. 1Mx8, 256Kx8:pid)" % spec)
    g = {"subbuf": sub.upper(), "num": int(num), "pid": False, "rt": None, "st": None,
         "block": False}
    for f in flags:
        if f == "pid":
            g["pid"] = True
        elif f == "block":
            g["block"] = True
        elif f[:3] in ("rt=", "st=") and f[3:].isdigit():
            g[f[:2]] = int(f[3:])
        else:
            raise ValueError("bad geometry flag %r in %r" % (f, spec))
    return g


def channel_args(spec):
    """`lttng enable-channel` options for a geometry spelling."""
    g = parse_geometry(spec)
    a = ["--buffers-pid" if g["pid"] else "--buffers-uid",
         "--subbuf-size=" + g["subbuf"], "--num-subbuf=%d" % g["num"]]
    if g["rt"] is not None:
        a.append("--read-timer=%d" % g["rt"])
    if g["st"] is not None:
        a.append("--switch-timer=%d" % g["st"])
    if g["block"]:
        a.append("--blocking-timeout=inf")
    return a


class Session:
    """An LTTng session recording sertrace:* like `sertrace record` does
    (geometry: the argument, else SERTRACE_BENCH_CHANNEL, else DEFAULT_GEOMETRY)."""

    def __init__(self, tag, outdir, vpid=None, geometry=None):
        self.name = "bench-%s-%d-%d" % (tag, os.getpid(), int(time.time() * 1000) % 100000)
        self.outdir = os.path.abspath(outdir)
        self.vpid = vpid
        self.geometry = geometry or os.environ.get("SERTRACE_BENCH_CHANNEL") or DEFAULT_GEOMETRY
        self.started = False

    def __enter__(self):
        cmds = [["create", self.name, "--output=" + self.outdir],
                ["enable-channel", "-u"] + channel_args(self.geometry) + [
                    "-s", self.name, "sertrace"],
                ["enable-event", "-u", "-c", "sertrace", "sertrace:*", "-s", self.name],
                ["add-context", "-u", "-c", "sertrace", "-t", "vtid", "-t", "vpid",
                 "-s", self.name]]
        if self.vpid is not None:
            cmds.append(["track", "-u", "--vpid=%d" % self.vpid, "-s", self.name])
        cmds.append(["start", self.name])
        for cmd in cmds:
            r = lttng(*cmd)
            if r.returncode != 0:
                lttng("destroy", self.name)
                raise RuntimeError("lttng %s failed: %s" % (" ".join(cmd), r.stderr.strip()))
        self.started = True
        return self

    def stop(self):
        """Stop (waits for the data) and return the discarded-event count."""
        counts = self.stop_counts()
        return None if counts is None else counts[0]

    def stop_counts(self):
        """Stop (waits for the data); (discarded events, lost packets) of the channel."""
        if not self.started:
            return None
        lttng("stop", self.name)
        self.started = False
        discarded = lost = 0
        for line in lttng("list", self.name).stdout.splitlines():
            if "Discarded events:" in line:
                discarded += int(line.split(":")[1])
            elif "Lost packets:" in line:
                lost += int(line.split(":")[1])
        return discarded, lost

    def __exit__(self, *exc):
        if self.started:
            self.stop()
        lttng("destroy", self.name)
        return False


def dir_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------


def calibrate(fn, target_ns, tries=3, reset=None):
    """How many calls of fn make a sample of at least target_ns: (one call's
    ns, calls per sample, 1 to 1000), from the best of `tries` calls (one
    preempted call must not set it); reset() before each."""
    best = None
    for _ in range(tries):
        if reset:
            reset()
        t0 = time.perf_counter_ns()
        fn()
        d = time.perf_counter_ns() - t0
        best = d if best is None else min(best, d)
    one_ns = max(1, best)
    return one_ns, max(1, min(1000, math.ceil(target_ns / one_ns)))


def interleaved(fns, inner, reps, reset, warm=lambda c: True):
    """Time the contenders fns (name -> function) against each other in one
    process: `reps` rounds, each contender once a round, inner[name] calls
    a sample.  One collection per round, outside the samples, none within;
    the contenders alternate which goes first, so neither always runs right
    after it.  reset() before each sample, and one call first where
    warm(name) (the caches the collection or the other contender evicted).
    Returns (wall, cpu): name -> per-round ns a call, perf_counter_ns and
    process_time_ns (user + system of this process)."""
    wall = {c: [] for c in fns}
    cpu = {c: [] for c in fns}
    order = list(fns)
    for rnd in range(reps):
        gc.collect()
        for c in (order if rnd % 2 == 0 else order[::-1]):
            fn, n = fns[c], inner[c]
            reset()
            gc.disable()
            if warm(c):
                fn()
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            t1 = time.perf_counter_ns()
            c1 = time.process_time_ns()
            gc.enable()
            wall[c].append((t1 - t0) / n)
            cpu[c].append((c1 - c0) / n)
    return wall, cpu


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio_stats(num, den):
    """Paired ratios num_i / den_i: (median, min, max)."""
    rs = [a / b for a, b in zip(num, den) if b]
    if not rs:
        return None
    return (statistics.median(rs), min(rs), max(rs))


def fmt_ratio(st, digits=2):
    if st is None:
        return "n/a"
    m, lo, hi = st
    f = "%%.%df" % digits
    return (f + "x [" + f + "–" + f + "]") % (m, lo, hi)


def fmt_ms(ns_list):
    if not ns_list:
        return "n/a"
    return "%.2f" % (med(ns_list) / 1e6)


def human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def emit_json(path, data):
    """A part's result: to `path` (write_json) when given, else to stdout; 0 for main."""
    if path:
        write_json(path, data)
    else:
        print(json.dumps(data, indent=1))
    return 0


def read_json(path):
    with open(path) as f:
        return json.load(f)


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)
