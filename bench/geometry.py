#!/usr/bin/env python3
"""Does the LTTng channel's geometry change what recording costs the traced process?

One child process per granularity (SERTRACE_GRANULARITY is read at import)
keeps running; the parent makes one LTTng session per (round, geometry),
tracking only the child's pid, and asks the child for one measurement
under it: per workload, `--pairs` pairs of samples (pickle.dumps, then
sertrace.dumps, order alternating), each sample >= --target-ms of calls,
CPU time of the process (process_time_ns: user + system).  The session is
then stopped and the channel's discarded events and lost packets read
(`lttng list`, before destroy; per-UID buffers keep the counts).  The
geometries take turns within a round, and the order rotates from round to
round, so drift of the machine hits every geometry alike; a second table
divides each round's ratio by the first geometry's of the same round.  As root it runs,
like bench/run.py, in a private mount namespace with its own session daemon
(--shared-sessiond: the machine's), so no other session records the child.  The figure of a
(geometry, workload) is the median over rounds of the per-round median
ratio sertrace/pickle; a geometry that discarded anything is flagged.

A geometry is SUBxN with optional ':'-separated flags:
  pid        per-PID buffers (default per-UID)
  rt=US      read timer period (µs; LTTng's per-UID default is 0)
  st=US      switch timer period (µs)
  block      --blocking-timeout=inf and LTTNG_UST_ALLOW_BLOCKING=1 in the child
e.g.  1Mx8  256Kx8  64Kx8:rt=200  4Mx4:pid.  The same spelling is what
SERTRACE_BENCH_CHANNEL sets for every other bench session (common.Session).

Usage:
  /usr/bin/python3 bench/geometry.py --build build \\
      --geometries 1Mx8,256Kx8,64Kx16,4Mx4 --granularities all,default \\
      --workloads builtins,state-16 --rounds 7 [--out FILE]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

PROTOCOL = 4


def child(args):
    import gc
    import pickle

    import sertrace
    import workloads as wl

    plan = []
    for name in args.workloads.split(","):
        obj = wl.build(name)
        for _ in range(3):
            pickle.dumps(obj, PROTOCOL)
            sertrace.dumps(obj, PROTOCOL)
        # Calls per sample from pickle's time; sertrace's samples take longer.
        _, n = common.calibrate(lambda: pickle.dumps(obj, PROTOCOL), args.target_ms * 1e6)
        plan.append((name, obj, n))
    print("READY", flush=True)
    fns = {"pickle": pickle.dumps, "sertrace": sertrace.dumps}
    for line in sys.stdin:
        if line.strip() != "RUN":
            break
        out = {}
        for name, obj, n in plan:
            cpu = {"pickle": [], "sertrace": []}
            for i in range(args.pairs):
                gc.collect()
                for c in (("pickle", "sertrace") if i % 2 == 0 else ("sertrace", "pickle")):
                    f = fns[c]
                    gc.disable()
                    f(obj, PROTOCOL)
                    c0 = time.process_time_ns()
                    for _ in range(n):
                        f(obj, PROTOCOL)
                    c1 = time.process_time_ns()
                    gc.enable()
                    cpu[c].append((c1 - c0) / n)
            out[name] = cpu
        print(json.dumps(out), flush=True)
    return 0


def measure_round(p, geometry, tmp, tag):
    outdir = os.path.join(tmp, "g-%s" % tag)
    sess = common.Session("geo", outdir, vpid=p.pid, geometry=geometry)
    sess.__enter__()
    try:
        p.stdin.write("RUN\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("child died: " + p.stderr.read()[-2000:])
        data = json.loads(line)
        lost = sess.stop_counts()
        data["_trace_bytes"] = common.dir_bytes(outdir)
    finally:
        sess.__exit__(None, None, None)
        shutil.rmtree(outdir, ignore_errors=True)
    data["_discarded"], data["_lost_packets"] = lost
    return data


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--geometries", default="1Mx8,256Kx8,64Kx16,4Mx4")
    ap.add_argument("--granularities", default="all,default")
    ap.add_argument("--workloads", default="builtins,state-16,state-64,dataclass-graph")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--target-ms", type=float, default=10.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--shared-sessiond", action="store_true",
                    help="use the machine's lttng-sessiond (default as root: a private one, "
                         "as bench/run.py does, so no other session records the child)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    import run  # bench/run.py: the private session daemon
    if (not args.shared_sessiond and not os.environ.get(run.ISOLATED_ENV)
            and run.can_isolate()):
        env = dict(os.environ, **{run.ISOLATED_ENV: "1"})
        return subprocess.call(["unshare", "--mount", "--propagation", "private", "--",
                                common.PYTHON, os.path.abspath(__file__)] + argv, env=env)
    sessiond_pid = None
    if os.environ.get(run.ISOLATED_ENV) and not args.shared_sessiond:
        sessiond_pid = run.start_private_sessiond()
    try:
        return measure(args)
    finally:
        run.stop_private_sessiond(sessiond_pid)


def measure(args):
    tools = common.Tools(args.build)
    if not common.ensure_sessiond():
        raise SystemExit("no lttng-sessiond reachable")
    foreign = set(common.foreign_active_sessions())
    geos = args.geometries.split(",")
    for g in geos:
        common.parse_geometry(g)  # fail early on a bad spelling
    tmp = tempfile.mkdtemp(prefix="sertrace-bench-geometry-")
    results = {"rounds": args.rounds, "pairs": args.pairs, "target_ms": args.target_ms,
               "geometries": geos, "granularities": {}}
    try:
        for gran in args.granularities.split(","):
            extra = {"SERTRACE_GRANULARITY": gran} if gran != "default" else {}
            if any(common.parse_geometry(g)["block"] for g in geos):
                extra["LTTNG_UST_ALLOW_BLOCKING"] = "1"
            cmd = [common.PYTHON, os.path.abspath(__file__), "--child",
                   "--workloads", args.workloads, "--pairs", str(args.pairs),
                   "--target-ms", str(args.target_ms)]
            p = subprocess.Popen(cmd, env=tools.env(extra), stdin=-1, stdout=-1, stderr=-1,
                                 text=True, cwd=tmp)
            try:
                if p.stdout.readline().strip() != "READY":
                    raise RuntimeError("child did not start: " + p.stderr.read()[-2000:])
                per = {g: [] for g in geos}
                for rnd in range(args.rounds):
                    order = geos[rnd % len(geos):] + geos[:rnd % len(geos)]
                    for g in order:
                        per[g].append(measure_round(p, g, tmp, "%s-%d" % (gran, rnd)))
                        foreign |= {s for s in common.foreign_active_sessions()
                                    if not s.startswith("bench-geo-")}
                    common.log("geometry: %s round %d/%d done" % (gran, rnd + 1, args.rounds))
                p.stdin.write("QUIT\n")
                p.stdin.flush()
            finally:
                if p.poll() is None:
                    p.kill()
            results["granularities"][gran] = per
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["foreign_sessions"] = sorted(foreign)
    print(render(results), file=sys.stderr)
    return common.emit_json(args.out, results) if args.out else 0


def round_ratio(r, workload):
    """One round's median ratio sertrace/pickle (its pairs)."""
    s = r[workload]
    return statistics.median(a / b for a, b in zip(s["sertrace"], s["pickle"]))


def summarize(rounds, workload):
    """Median over rounds of the per-round median ratio; and its min-max."""
    rs = [round_ratio(r, workload) for r in rounds]
    return statistics.median(rs), min(rs), max(rs)


def paired(rounds, base, workload):
    """Per round: this geometry's ratio over the first geometry's (same round);
    (median, min, max, rounds below 1)."""
    q = [round_ratio(r, workload) / round_ratio(b, workload) for r, b in zip(rounds, base)]
    return statistics.median(q), min(q), max(q), sum(x < 1 for x in q)


def render(results):
    lines = []
    for gran, per in results["granularities"].items():
        geos = [g for g in results.get("geometries", per) if g in per]  # the order asked for
        wls = [k for k in per[geos[0]][0] if not k.startswith("_")]
        lines.append("granularity %s: CPU time sertrace/pickle, median of %d rounds [min-max]"
                     % (gran, results["rounds"]))
        lines.append("| geometry | " + " | ".join(wls) + " | discarded | lost packets | trace MB/round |")
        lines.append("|---" * (len(wls) + 4) + "|")
        for g in geos:
            cells = ["%.2fx [%.2f–%.2f]" % summarize(per[g], w) for w in wls]
            disc = sum(r["_discarded"] for r in per[g])
            lostp = sum(r["_lost_packets"] for r in per[g])
            mb = statistics.median(r["_trace_bytes"] for r in per[g]) / 1e6
            lines.append("| %s | %s | %d | %d | %.1f |" % (g, " | ".join(cells), disc, lostp, mb))
        lines.append("")
        n = len(per[geos[0]])
        lines.append("granularity %s: the ratio above over %s's in the same round: median "
                     "[min-max], rounds below 1 of %d" % (gran, geos[0], n))
        lines.append("| geometry | " + " | ".join(wls) + " |")
        lines.append("|---" * (len(wls) + 1) + "|")
        for g in geos[1:]:
            cells = ["%.2f [%.2f–%.2f] %d" % paired(per[g], per[geos[0]], w) for w in wls]
            lines.append("| %s | %s |" % (g, " | ".join(cells)))
        lines.append("")
    if results.get("foreign_sessions"):
        lines.append("WARNING: other sessions were active (they may have recorded the child): "
                     + ", ".join(results["foreign_sessions"]))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
