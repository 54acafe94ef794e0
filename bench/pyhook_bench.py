#!/usr/bin/env python3
"""Overhead of tracing dill dumps with sertrace (serializers/pyhook).

Modes, each timed in its own child process (DISPATCH_TRACE is read once per
process), interleaved round by round so that machine noise hits every mode
alike; the figure per mode is the median over rounds of each child's median
dump time:

  dill          dill.dumps, no sertrace hooks at all (the baseline)
  dormant       sertrace.dill.install(), no listener (hooks call through)
  text-file     install() + DISPATCH_TRACE=<file>: live tree written to a file
  lttng         install() + an LTTng session recording sertrace:* (only with
                --lttng and a running lttng-sessiond)
  dill-trace    dill.detect.trace(<file>): dill's own tracer (for reference)

Times are process CPU time by default (--clock cpu: user + system, so the
trace writes count), which other processes on a busy machine do not inflate.

Workloads: the scheduler-state stand-in with closures (workloads/
dispatch_like_state.py, build_state_with_closures(N)) and a closure-heavy
graph (tests/pyhook/closures_graph.py).

Usage: /usr/bin/python3 bench/pyhook_bench.py [--rounds 7] [--repeat 20]
           [--pythonpath BUILD/python] [--lttng]
Prints a table of medians (ms) and the ratio of each mode to `dill`.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = os.path.join(ROOT, "workloads")
TESTS = os.path.join(ROOT, "tests", "pyhook")
PYTHON = "/usr/bin/python3"

CHILD = r'''
import io, json, os, sys, time, logging
sys.path[:0] = [WORKLOADS, TESTS]
import dispatch_like_state as dls
import closures_graph
import dill, dill.detect
CLOCK = time.process_time if CLOCK_NAME == "cpu" else time.perf_counter
if MODE in ("dormant", "text-file", "lttng"):
    import sertrace.dill
    sertrace.dill.install()
obj = dls.build_state_with_closures(N) if WORKLOAD == "state" else closures_graph.build(N)
size = len(dill.dumps(obj, protocol=PROTOCOL))
def one():
    t0 = CLOCK()
    dill.dumps(obj, protocol=PROTOCOL)
    return CLOCK() - t0
if MODE == "dill-trace":
    ctx = dill.detect.trace(TRACE_FILE, mode="w")
    ctx.__enter__()
for _ in range(3):
    one()
times = [one() for _ in range(REPEAT)]
if MODE == "dill-trace":
    ctx.__exit__(None, None, None)
print(json.dumps({"median": statistics.median(times), "size": size}))
'''


def run_child(mode, workload, n, protocol, repeat, pythonpath, tmpdir, clock):
    trace_file = os.path.join(tmpdir, "tree-%s.txt" % mode)
    head = "import statistics\n" + "".join(
        "%s = %r\n" % kv for kv in dict(
            WORKLOADS=WORKLOADS, TESTS=TESTS, MODE=mode, WORKLOAD=workload, N=n,
            PROTOCOL=protocol, REPEAT=repeat, TRACE_FILE=trace_file,
            CLOCK_NAME=clock).items())
    env = dict(os.environ)
    env.pop("DISPATCH_TRACE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if mode == "text-file":
        env["DISPATCH_TRACE"] = trace_file
    p = subprocess.run([PYTHON, "-c", head + CHILD], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("child %s/%s failed:\n%s" % (mode, workload, p.stderr))
    # The trace files grow with every dump; keep the disk tidy.
    for f in os.listdir(tmpdir):
        if f.startswith("tree-"):
            os.unlink(os.path.join(tmpdir, f))
    return json.loads(p.stdout)


def lttng(*args):
    return subprocess.run(["lttng"] + list(args), capture_output=True, text=True)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--protocol", type=int, default=4)
    ap.add_argument("--pythonpath", default=os.environ.get("PYTHONPATH", ""),
                    help="where the built `sertrace` package is (BUILD/python)")
    ap.add_argument("--lttng", action="store_true", help="also time recording into LTTng")
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="cpu: process CPU time (user+sys, robust on a loaded machine; "
                         "includes the trace writes); wall: perf_counter")
    args = ap.parse_args(argv)

    modes = ["dill", "dormant", "text-file", "dill-trace"]
    workloads = [("state", 16), ("closures", 200)]
    tmpdir = tempfile.mkdtemp(prefix="pyhook-bench-")
    session = None
    if args.lttng:
        if shutil.which("lttng") is None or lttng("list").returncode != 0:
            raise SystemExit("--lttng needs lttng and a running lttng-sessiond")
        session = "pyhook-bench-%d" % os.getpid()
        out = os.path.join(tmpdir, "lttng")
        for cmd in (["create", session, "--output=" + out],
                    ["enable-event", "-u", "sertrace:*", "-s", session],
                    ["add-context", "-u", "-t", "vtid", "-t", "vpid", "-s", session]):
            r = lttng(*cmd)
            if r.returncode != 0:
                lttng("destroy", session)
                raise SystemExit("lttng %s failed: %s" % (" ".join(cmd), r.stderr))
        modes.insert(3, "lttng")
    try:
        results = {}
        for _ in range(args.rounds):
            for wl, n in workloads:
                for mode in modes:
                    # The session records only while the lttng child runs, so
                    # the other modes see no listener.
                    if mode == "lttng":
                        lttng("start", session)
                    r = run_child(mode, wl, n, args.protocol, args.repeat, args.pythonpath,
                                  tmpdir, args.clock)
                    if mode == "lttng":
                        lttng("stop", session)
                    results.setdefault((wl, mode), []).append(r["median"])
                    results[(wl, "size")] = r["size"]
    finally:
        if session:
            lttng("destroy", session)
        shutil.rmtree(tmpdir, ignore_errors=True)

    print("dill %s, Python %s, protocol %d, %d rounds x %d dumps (medians, %s time)"
          % (__import__("dill").__version__, sys.version.split()[0], args.protocol,
             args.rounds, args.repeat, args.clock))
    print("%-10s %9s %-11s %10s %8s" % ("workload", "bytes", "mode", "ms/dump", "ratio"))
    for wl, n in workloads:
        base = statistics.median(results[(wl, "dill")])
        for mode in modes:
            m = statistics.median(results[(wl, mode)])
            print("%-10s %9d %-11s %10.2f %7.2fx" % (wl, results[(wl, "size")], mode, m * 1e3, m / base))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
