#!/usr/bin/env python3
"""Overhead of sertrace as ratios to pickle.dumps, on the bench workloads.

One child process per configuration (environment variables such as
DISPATCH_TRACE and SERTRACE_GRANULARITY are read once, at import).  Inside
a child, the contenders of that configuration are timed alternately, round
after round (pickle, X, X, pickle, ...), with the garbage collector off
during a sample; a sample repeats one call enough
times to last >= --target-ms (after one untimed warming call when a call is
shorter than 2 ms).  Rounds alternate which contender goes first
(A B, B A, ...); the garbage collector runs once per round, outside samples.  Each sample records wall time
(time.perf_counter_ns) and the CPU time of the process (time.process_time_ns:
user + system, so file writes count; other tenants of a shared machine do
not).  The ratio of a round is X_i / pickle_i; the
tables give the median of those ratios and their min-max over the rounds.

Configurations:
  dormant              sertrace.dumps, nobody listening (also on the
                       single-kind lists of workloads.MICRO, and on the tiny
                       payloads of workloads.TINY, where an invocation is a
                       loop of TINY_LOOP calls of the bare function:
                       `for _ in r: dumps(obj, 4)`, no lambda per call)
  lttng-default        sertrace.dumps recorded by a live LTTng session
                       (sertrace:*, vtid+vpid, per-UID 8 x 1 MiB or
                       SERTRACE_BENCH_CHANNEL / run.py --channel, only
                       this child's pid tracked), default granularity
  lttng-all            same, SERTRACE_GRANULARITY=all (every object a node)
  text-file            sertrace.dumps with DISPATCH_TRACE=<file>
  (lttng-default and text-file also time dill.dumps inside dill.detect.trace(<file>),
   so "how much faster than dill's tracer" is a ratio within one process)
  dill                 dill.dumps untraced, and inside dill.detect.trace(<file>)
  dill-sertrace-lttng  dill.dumps untraced, and traced by sertrace.dill into LTTng
  dill-sertrace-text   dill.dumps untraced, and traced by sertrace.dill with
                       DISPATCH_TRACE=<file>
Text files are truncated between samples (outside the timed region) so the
disk does not fill; the writes themselves are timed.

All dumps use protocol 4 (pickle.DEFAULT_PROTOCOL on Python 3.11).  For the
closure workload, which pickle refuses, the pickle contender serializes the
plain state of the same size (workloads.PICKLE_STAND_IN).

Usage (normally through bench/run.py):
  /usr/bin/python3 bench/overhead.py [--build DIR] [--reps 15] [--out FILE]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

PROTOCOL = 4
# Calls per timed invocation for the tiny payloads (workloads.TINY).
TINY_LOOP = 1000

CONFIGS = [
    # name, extra env, LTTng session?, contenders, include non-picklable workloads
    ("dormant", {}, False, ["pickle", "sertrace"], False),
    ("lttng-default", {}, True, ["pickle", "sertrace", "dill-trace-file"], False),
    ("lttng-all", {"SERTRACE_GRANULARITY": "all"}, True, ["pickle", "sertrace"], False),
    ("text-file", {"DISPATCH_TRACE": "@TEXT@"}, False, ["pickle", "sertrace", "dill-trace-file"], False),
    ("dill", {}, False, ["pickle", "dill", "dill-trace-file"], True),
    ("dill-sertrace-lttng", {}, True, ["pickle", "dill", "dill-sertrace"], True),
    ("dill-sertrace-text", {"DISPATCH_TRACE": "@TEXT@"}, False, ["pickle", "dill", "dill-sertrace"], True),
]


# ---------------------------------------------------------------------------
# child
# ---------------------------------------------------------------------------


def child(args):
    import pickle

    import workloads as wl

    names = args.workloads.split(",")
    contenders = args.contenders.split(",")
    text_file = os.environ.get("DISPATCH_TRACE") or ""
    dill_file = args.dill_trace_file
    truncate = [p for p in (text_file if "/" in text_file else "", dill_file) if p]

    need_sertrace = "sertrace" in contenders or "dill-sertrace" in contenders
    if need_sertrace:
        import sertrace  # the runtime reads its environment (DISPATCH_TRACE ...) here
    if any(c.startswith("dill") for c in contenders):
        import dill
        import dill.detect
    if "dill-sertrace" in contenders:
        import sertrace.dill as sdill

    def make_loop(c, obj):
        # A tiny payload: LOOP calls of the function itself per invocation
        # (no lambda around each call), so a sample times a loop of calls.
        f = {"pickle": pickle.dumps, "sertrace": sertrace.dumps}[c] if c in (
            "pickle", "sertrace") else None
        if f is None:
            raise SystemExit("tiny payloads time pickle and sertrace only, not " + c)
        calls = range(TINY_LOOP)

        def loop():
            for _ in calls:
                f(obj, PROTOCOL)
        return loop

    def make(c, obj):
        if c == "pickle":
            return lambda: pickle.dumps(obj, PROTOCOL)
        if c == "sertrace":
            return lambda: sertrace.dumps(obj, PROTOCOL)
        if c == "dill":
            return lambda: dill.dumps(obj, PROTOCOL)
        if c == "dill-trace-file":
            def f():
                with dill.detect.trace(dill_file, mode="a"):
                    return dill.dumps(obj, PROTOCOL)
            return f
        if c == "dill-sertrace":
            def g():
                sdill.install(pure_pickle=False)
                try:
                    return dill.dumps(obj, PROTOCOL)
                finally:
                    sdill.uninstall()
            return g
        raise SystemExit("unknown contender " + c)

    plan = []
    for name in names:
        obj = wl.build(name)
        stand_in = wl.build(wl.PICKLE_STAND_IN[name]) if name in wl.PICKLE_STAND_IN else obj
        fns = {}
        for c in contenders:
            target = stand_in if c in ("pickle", "sertrace") else obj
            fns[c] = make_loop(c, target) if name in wl.TINY else make(c, target)
        plan.append((name, fns))

    # Warm up (imports, dill's dispatch tables, memo growth) before the session starts.
    for name, fns in plan:
        for c, fn in fns.items():
            fn()

    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        raise SystemExit("no GO")

    def trunc():
        for p in truncate:
            try:
                os.truncate(p, 0)
            except OSError:
                pass

    target_ns = args.target_ms * 1e6
    out = {"pid": os.getpid(), "workloads": {}}
    for name, fns in plan:
        inner, one_ns = {}, {}
        for c, fn in fns.items():
            one_ns[c], inner[c] = common.calibrate(
                fn, target_ns, tries=3 if c in ("pickle", "sertrace") else 1)
        samples, cpu = common.interleaved(fns, inner, args.reps, trunc,
                                          warm=lambda c: one_ns[c] < 2e6)
        if name in wl.TINY:  # per call, not per loop
            for c in fns:
                samples[c] = [v / TINY_LOOP for v in samples[c]]
                cpu[c] = [v / TINY_LOOP for v in cpu[c]]
        out["workloads"][name] = {"samples_ns": samples, "samples_cpu_ns": cpu, "inner": inner,
                                  "calls_per_invocation": TINY_LOOP if name in wl.TINY else 1}
    trunc()
    print(json.dumps(out), flush=True)


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------


def have_pyhook(tools):
    r = common.run([common.PYTHON, "-c", "import sertrace._pyhook, sertrace.dill"], env=tools.env())
    return r.returncode == 0


def run_config(tools, cfg, workloads, reps, target_ms, tmp):
    name, extra, want_session, contenders, _ = cfg
    text_file = os.path.join(tmp, "tree-%s.txt" % name)
    dill_file = os.path.join(tmp, "dill-%s.txt" % name)
    env = tools.env({k: (text_file if v == "@TEXT@" else v) for k, v in extra.items()})
    cmd = [common.PYTHON, os.path.abspath(__file__), "--child",
           "--workloads", ",".join(workloads), "--contenders", ",".join(contenders),
           "--reps", str(reps), "--target-ms", str(target_ms), "--dill-trace-file", dill_file]
    foreign_before = common.foreign_active_sessions()
    p = __import__("subprocess").Popen(cmd, env=env, stdin=-1, stdout=-1, stderr=-1, text=True,
                                       cwd=tmp)
    result = {"config": name, "contenders": contenders, "env": {k: v for k, v in extra.items()}}
    session = None
    try:
        line = p.stdout.readline()
        if line.strip() != "READY":
            p.kill()
            _, err = p.communicate()
            raise RuntimeError("child %s did not start: %s%s" % (name, line, err[-2000:]))
        if want_session:
            session = common.Session(name, os.path.join(tmp, "lttng-" + name), vpid=p.pid)
            session.__enter__()
        t0 = time.time()
        p.stdin.write("GO\n")
        p.stdin.flush()
        out, err = p.communicate()
        result["wall_s"] = time.time() - t0
        if p.returncode != 0:
            raise RuntimeError("child %s failed (%d): %s" % (name, p.returncode, err[-3000:]))
        result.update(json.loads(out.strip().splitlines()[-1]))
        if session:
            result["discarded"] = session.stop()
            result["trace_bytes"] = common.dir_bytes(session.outdir)
    finally:
        if session:
            session.__exit__(None, None, None)
            shutil.rmtree(session.outdir, ignore_errors=True)
        if p.poll() is None:
            p.kill()
    result["foreign_sessions"] = sorted(set(foreign_before) | set(common.foreign_active_sessions()))
    return result


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=10.0)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--workloads", default=None, help="comma-separated (default: all)")
    ap.add_argument("--out", default=None, help="write the raw results as JSON here")
    ap.add_argument("--without-dill", action="store_true",
                    help="drop the dill contenders (a Python without dill: --also-python)")
    # child mode
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--contenders", help=argparse.SUPPRESS)
    ap.add_argument("--dill-trace-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    import workloads as wl
    tools = common.Tools(args.build)
    all_names = args.workloads.split(",") if args.workloads else list(wl.WORKLOADS)
    lttng_ok = common.ensure_sessiond()
    pyhook = have_pyhook(tools)
    tmp = tempfile.mkdtemp(prefix="sertrace-bench-overhead-")
    results = {"reps": args.reps, "target_ms": args.target_ms, "protocol": PROTOCOL,
               "channel": os.environ.get("SERTRACE_BENCH_CHANNEL") or common.DEFAULT_GEOMETRY,
               "configs": {}, "skipped": {}}
    try:
        wanted = args.configs.split(",")
        for cfg in CONFIGS:
            name, _, want_session, contenders, non_picklable = cfg
            if name not in wanted:
                continue
            if args.without_dill:
                contenders = [c for c in contenders if not c.startswith("dill")]
                cfg = (name, cfg[1], want_session, contenders, non_picklable)
            if want_session and not lttng_ok:
                results["skipped"][name] = "no lttng-sessiond reachable"
                continue
            if "dill-sertrace" in contenders and not pyhook:
                results["skipped"][name] = "sertrace._pyhook (the dill hook) is not built/installed"
                continue
            names = [n for n in all_names if non_picklable or wl.WORKLOADS.get(n, (None, True))[1]]
            if name == "dormant" and not args.workloads:
                names += list(wl.MICRO) + list(wl.TINY)
            common.log("overhead: %s (%s) on %d workloads" % (name, " vs ".join(contenders), len(names)))
            try:
                results["configs"][name] = run_config(tools, cfg, names, args.reps,
                                                      args.target_ms, tmp)
            except RuntimeError as e:
                results["skipped"][name] = str(e)
                common.log("overhead: %s failed: %s" % (name, e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return common.emit_json(args.out, results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
