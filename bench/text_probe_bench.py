"""Cost of the live text tree (DISPATCH_TRACE to a file) against plain pickle.

    bench/text_probe_bench.py [--build DIR] [--reps 21] [--workloads a,b,...]
                              [--file /tmp/textprobe-PID.txt] [--target-ms 20]
                              [--granularity all]

Times C `pickle.dumps` against `sertrace.dumps` with DISPATCH_TRACE=<file>
(set before `import sertrace`: the runtime reads it once), interleaved in ONE
process (A B A B ..., the order alternating per round), `--reps` rounds,
each sample lasting at least `--target-ms` (inner repeats), the text file
truncated before every sample (outside the timed region) so the file never
grows past one sample's worth.  Reports, per workload, the median of the
per-round ratios sertrace/pickle for CPU time (time.process_time_ns: user +
sys of this process, immune to other tenants) and for wall time, with
min-max, plus the text bytes written per dump.

Workloads: `state-16`, `state-64` (workloads/dispatch_like_state.py
build_state(N)) and `dataclass-graph` (bench/workloads.py), protocol 4 as in
bench/overhead.py.  Goal (issue "Benchmarks"): ratio <= 3x on every one.

For a measurement no other helper's LTTng session can disturb, run it with a
private, empty LTTng run directory:

    unshare -m sh -c 'mount -t tmpfs tmpfs /var/run/lttng && \
        HOME=/tmp/emptyhome LTTNG_HOME=/tmp/emptyhome \
        /usr/bin/python3 bench/text_probe_bench.py --build build-textprobe'

The parent re-executes itself as a child with the environment set (the
runtime reads DISPATCH_TRACE at the first dump, so the child must start
with it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
PROTOCOL = 4
DEFAULT_WORKLOADS = "state-16,state-64,dataclass-graph"


def child(args):
    import pickle

    sys.path.insert(0, HERE)
    import common
    import workloads as wl
    import sertrace  # reads DISPATCH_TRACE (set by the parent) at the first dump

    path = os.environ["DISPATCH_TRACE"]

    def reset():
        os.truncate(path, 0)

    out = {}
    for name in args.workloads.split(","):
        obj = wl.build(name)
        assert sertrace.dumps(obj, PROTOCOL) == pickle.dumps(obj, PROTOCOL)
        os.truncate(path, 0)
        sertrace.dumps(obj, PROTOCOL)
        text_bytes = os.path.getsize(path)
        fns = {"pickle": lambda: pickle.dumps(obj, PROTOCOL),
               "sertrace": lambda: sertrace.dumps(obj, PROTOCOL)}
        inner = {c: common.calibrate(fn, args.target_ms * 1e6, reset=reset)[1]
                 for c, fn in fns.items()}
        wall, cpu = common.interleaved(fns, inner, args.reps, reset)
        out[name] = {"wall": wall, "cpu": cpu, "inner": inner, "text_bytes": text_bytes,
                     "payload": len(pickle.dumps(obj, PROTOCOL))}
    os.truncate(path, 0)
    print(json.dumps(out))


def ratios(a, b):
    r = sorted(y / x for x, y in zip(a, b))
    return statistics.median(r), r[0], r[-1]


def parent(args):
    env = dict(os.environ)
    for k in ("SERTRACE_GRANULARITY", "SERTRACE_EXACT", "SERTRACE_OVERSIZE"):
        env.pop(k, None)
    env["DISPATCH_TRACE"] = args.file
    if args.granularity:
        env["SERTRACE_GRANULARITY"] = args.granularity
    if args.build:
        pp = os.path.join(os.path.abspath(args.build), "python")
        env["PYTHONPATH"] = pp + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [PYTHON, os.path.abspath(__file__), "--child", "--reps", str(args.reps),
           "--workloads", args.workloads, "--target-ms", str(args.target_ms)]
    existed = os.path.exists(args.file)
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True)
    finally:
        if not existed and os.path.exists(args.file):
            os.unlink(args.file)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    print("%-16s %10s %10s %9s %9s  %-22s %-22s" % (
        "workload", "payload B", "text B", "pickle ms", "trace ms", "CPU ratio (min-max)",
        "wall ratio (min-max)"))
    for name, w in res.items():
        c = ratios(w["cpu"]["pickle"], w["cpu"]["sertrace"])
        t = ratios(w["wall"]["pickle"], w["wall"]["sertrace"])
        print("%-16s %10d %10d %9.3f %9.3f  %5.2fx (%4.2f-%4.2f)      %5.2fx (%4.2f-%4.2f)" % (
            name, w["payload"], w["text_bytes"],
            statistics.median(w["cpu"]["pickle"]) / 1e6,
            statistics.median(w["cpu"]["sertrace"]) / 1e6, *c, *t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="meson build directory (default: installed sertrace)")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--file", default="/tmp/textprobe-%d.txt" % os.getpid())
    ap.add_argument("--target-ms", type=float, default=20.0)
    ap.add_argument("--granularity", help="SERTRACE_GRANULARITY (default: containers)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
