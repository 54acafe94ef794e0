#!/usr/bin/env python3
"""Interleaved timing of pickle.dumps against sertrace.dumps (and, optionally, a
baseline build of sertrace._native), all in one process.

Used for the numbers in README.md ("Speed").  Each round times every contender
once, in a rotating order (A B C, B C A, C A B, ...); a sample repeats one call
until it lasts >= TARGET_MS (after one untimed warming call), with the garbage
collector off; the ratio of each contender to pickle within a round is taken,
and the median and [min-max] of those ratios are printed.  The clock is CPU time
of the process (time.process_time_ns) unless WALL=1.

    PYTHONPATH=BUILD/python REPS=31 /usr/bin/python3 serializers/pickle/ab_bench.py \\
        [--base /tmp/old/_native.cpython-311-x86_64-linux-gnu.so] [--proto 4] [WORKLOAD ...]

--base SO loads another copy of the extension (e.g. the build before a change,
copied aside) under the same module name from its own file, so "before" and
"after" are timed in the same process, round by round, against the same
pickle.dumps.

Workloads: the names of bench/workloads.py (builtins, instances, state-16,
state-64, state-256, dataclass-graph, micro-ints, micro-tuples, ...; default:
those plus every micro-*), and the EXTRA ones below ("nested", "micro-objects",
"micro-lists", "micro-str-spread").

Dormant means nobody listens: no session daemon reachable (an LTTng session of
anyone else that enables sertrace:* for all processes would turn tracing on
here) and DISPATCH_TRACE unset:

    unshare -m sh -c 'mount -t tmpfs none /var/run/lttng; mount -t tmpfs none /root/.lttng;
        mount -t tmpfs none /dev/shm; HOME=/tmp/empty LTTNG_HOME=/tmp/empty \\
        PYTHONPATH=BUILD/python /usr/bin/python3 serializers/pickle/ab_bench.py ...'

The script checks that sertrace.dumps is dormant (sertrace._native has no
query for it, so it checks that the environment says so and warns otherwise).
"""
import argparse
import gc
import importlib.machinery
import importlib.util
import os
import pickle
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))
import workloads as WL  # noqa: E402  (bench/workloads.py)

import sertrace  # noqa: E402

WALL = bool(os.environ.get("WALL"))
CLOCK = time.perf_counter_ns if WALL else time.process_time_ns


def nested(seed=1, target=90000):
    """~90k objects: dicts (str keys) and lists, depth 5, leaves int/float/str."""
    rng = random.Random(seed)
    count = [0]

    def atom():
        count[0] += 1
        k = rng.random()
        if k < 0.35:
            return rng.randint(-10**6, 10**6)
        if k < 0.6:
            return rng.random()
        return "k%d" % rng.randint(0, 10**7)

    def node(depth):
        count[0] += 1
        if depth == 0:
            return atom()
        n = rng.randint(2, 6)
        if rng.random() < 0.5:
            return {("f%d" % i): node(depth - 1) for i in range(n)}
        return [node(depth - 1) for _ in range(n)]

    roots = []
    while count[0] < target:
        roots.append(node(5))
    return roots


def str_spread(n=50000, gap=12):
    """Strings far apart in the heap (each followed by `gap` live 64-byte
    objects): the memo's address-order hash wraps around its table."""
    keep, out = [], []
    for i in range(n):
        out.append("s%d" % i)
        keep.append(["x%d" % (i * gap + j) for j in range(gap)])
    str_spread.keep = keep
    return out


EXTRA = {
    "nested": nested,
    "micro-objects": lambda: [object() for _ in range(20000)],
    "micro-lists": lambda: [[i] for i in range(40000)],
    "micro-str-spread": str_spread,
}

DEFAULT = ["builtins", "instances", "state-16", "state-64", "state-256", "dataclass-graph"] + list(WL.MICRO)


def build(name):
    if name in EXTRA:
        return EXTRA[name]()
    return WL.build(name)


def load_base(path):
    spec = importlib.util.spec_from_file_location(
        "sertrace._native", path, loader=importlib.machinery.ExtensionFileLoader("sertrace._native", path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fns, reps, target_ns):
    names = list(fns)
    inner = {}
    for c, fn in fns.items():
        best = None
        for _ in range(3):
            t = time.perf_counter_ns()
            fn()
            d = time.perf_counter_ns() - t
            best = d if best is None else min(best, d)
        inner[c] = max(1, int(target_ns // max(1, best)) + 1)
    samples = {c: [] for c in names}
    for r in range(reps):
        gc.collect()
        k = r % len(names)
        for c in names[k:] + names[:k]:
            fn, n = fns[c], inner[c]
            gc.disable()
            fn()
            t = CLOCK()
            for _ in range(n):
                fn()
            d = CLOCK() - t
            gc.enable()
            samples[c].append(d / n)
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", help="a baseline copy of _native*.so to time beside the current build")
    ap.add_argument("--proto", type=int, default=4)
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REPS", 31)))
    ap.add_argument("--target-ms", type=float, default=float(os.environ.get("TARGET_MS", 20)))
    ap.add_argument("workloads", nargs="*")
    args = ap.parse_args()
    if os.environ.get("DISPATCH_TRACE"):
        print("warning: DISPATCH_TRACE is set: not dormant", file=sys.stderr)
    proto = args.proto
    fns_of = {"pickle": pickle.dumps, "new": sertrace.dumps}
    if args.base:
        fns_of["base"] = load_base(args.base).dumps
    print("clock=%s proto=%d reps=%d contenders=%s (ratios to pickle: median [min-max])"
          % ("perf_counter" if WALL else "process_time", proto, args.reps, ",".join(fns_of)))
    for name in args.workloads or DEFAULT:
        obj = build(name)
        ref = pickle.dumps(obj, proto)
        for c, f in fns_of.items():
            assert f(obj, proto) == ref, (c, name)
        fns = {c: (lambda f=f: f(obj, proto)) for c, f in fns_of.items()}
        s = bench(fns, args.reps, args.target_ms * 1e6)
        line = "%-17s %8d B  pickle %8.1f us" % (name, len(ref), statistics.median(s["pickle"]) / 1e3)
        for c in fns_of:
            if c == "pickle":
                continue
            ratios = sorted(y / x for x, y in zip(s["pickle"], s[c]))
            line += "  %s %.3f [%.3f-%.3f]" % (c, statistics.median(ratios), ratios[0], ratios[-1])
        print(line, flush=True)


if __name__ == "__main__":
    main()
