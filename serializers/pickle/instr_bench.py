#!/usr/bin/env python3
"""Instructions per dump under callgrind: pickle.dumps, sertrace.dumps dormant,
recording into LTTng at the default granularity, and recording every object
(SERTRACE_GRANULARITY=all).  Instruction counts are steady on a shared
machine where times are not (bench/README.md's figures are times).

    /usr/bin/python3 serializers/pickle/instr_bench.py --build build \\
        [--configs pickle,dormant,default,all] [--dumps 3] [--sim] [WORKLOAD ...]

--sim adds callgrind's cache and branch simulation and prints, per dump,
Ir, I1 misses, indirect and conditional branch mispredicts and last-level
write misses (README.md, "Code footprint"); ~20x slower.

Each (workload, configuration) is one `valgrind --tool=callgrind
--collect-atstart=no` child: it builds the workload, makes two untimed
calls (type and label tables, memo and buffers at their size), then turns
collection on around `--dumps` calls through a tiny client-request library
(callgrind.h, compiled here into a temporary directory) and off again; the
count is the child's total over those calls divided by their number (the
Python loop around them adds a few hundred instructions a dump).  The
recording configurations run under an LTTng session made like `sertrace
record`'s (bench/common.py's Session).  As root the script re-executes
itself in a private mount namespace with its own lttng-sessiond (as
bench/run.py does), so no other session records the dormant children and
its session records no one else.  Default workloads: builtins, state-16,
instances.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import callgrind_harness as H  # noqa: E402  bench/callgrind_harness.py

PYTHON = H.PYTHON
ISOLATED_ENV = "SERTRACE_INSTR_ISOLATED"
CONFIGS = ("pickle", "dormant", "default", "all")


def child(config, workload, dumps, toggle_so):
    import pickle

    sys.path.insert(0, os.path.join(ROOT, "workloads"))
    import workloads as WL  # bench/workloads.py

    obj = WL.build(workload)
    if config == "pickle":
        fn = pickle.dumps
    else:
        import sertrace

        fn = sertrace.dumps
    H.collect(fn, (obj, 4), dumps, toggle_so)


def measure(args, config, workload, toggle_so, tmp):
    import common

    out = os.path.join(tmp, "cg.%s.%s" % (config, workload))
    env = common.Tools(args.build).env() if args.build else dict(os.environ)
    for k in ("DISPATCH_TRACE", "SERTRACE_GRANULARITY"):
        env.pop(k, None)
    if config == "all":
        env["SERTRACE_GRANULARITY"] = "all"
    session = None
    if config in ("default", "all"):
        session = common.Session("instr", os.path.join(tmp, "trace-%s-%s" % (config, workload)))
        session.__enter__()
    try:
        total = H.run_child(__file__, [config, workload, args.dumps, toggle_so], env, out,
                            keep=args.keep, sim=args.sim, what="%s %s" % (config, workload))
    finally:
        if session is not None:
            session.__exit__(None, None, None)
    if args.sim:
        return {k: v / args.dumps for k, v in total.items()}
    return total["Ir"] / args.dumps


def main(argv):
    if H.is_child(argv):
        child(argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    H.add_build(ap)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--dumps", type=int, default=3)
    ap.add_argument("--shared-sessiond", action="store_true")
    ap.add_argument("--sim", action="store_true",
                    help="callgrind's cache and branch simulation: print I1 misses, indirect and "
                    "conditional branch mispredicts and LL write misses per dump (k) besides Ir")
    H.add_keep(ap, " (callgrind_annotate FILE)")
    ap.add_argument("workloads", nargs="*", default=["builtins", "state-16", "instances"])
    args = H.absolute_paths(ap.parse_args(argv[1:]))
    configs = args.configs.split(",")
    records = any(c in ("default", "all") for c in configs)

    import run  # bench/run.py: the private session daemon

    if (records and not args.shared_sessiond and not os.environ.get(ISOLATED_ENV)
            and run.can_isolate()):
        env = dict(os.environ)
        env[ISOLATED_ENV] = "1"
        return subprocess.call(["unshare", "--mount", "--propagation", "private", "--", PYTHON,
                                os.path.abspath(__file__)] + argv[1:], env=env)
    sessiond = None
    if os.environ.get(ISOLATED_ENV) and not args.shared_sessiond:
        sessiond = run.start_private_sessiond()
    try:
        with H.toggle_library() as (tmp, toggle_so):
            print("%-16s %s" % ("workload", " ".join("%12s" % c for c in configs)
                                + "   (instructions per dump, M; ratio to pickle)"))
            for w in args.workloads:
                counts = {c: measure(args, c, w, toggle_so, tmp) for c in configs}
                if args.sim:
                    for c in configs:
                        d = counts[c]
                        print("%-16s %-8s Ir %.3f M  I1mr %.1f k  Bim %.2f k  Bcm %.1f k  "
                              "DLmw %.2f k" % (w, c, d.get("Ir", 0) / 1e6, d.get("I1mr", 0) / 1e3,
                                               d.get("Bim", 0) / 1e3, d.get("Bcm", 0) / 1e3,
                                               d.get("DLmw", 0) / 1e3), flush=True)
                    continue
                cells = []
                for c in configs:
                    cell = "%.2f" % (counts[c] / 1e6)
                    if c != "pickle" and "pickle" in counts:
                        cell += " %.2fx" % (counts[c] / counts["pickle"])
                    cells.append("%12s" % cell)
                print("%-16s %s" % (w, " ".join(cells)), flush=True)
    finally:
        run.stop_private_sessiond(sessiond)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
