#!/usr/bin/env python3
"""Analyzer throughput and peak memory: each sertrace sink against sink.utils.dummy.

Traces: a child process, recorded with `sertrace record --cmd-only` at
every-object granularity (SERTRACE_GRANULARITY=all), dumps the `builtins`
workload (~99k nodes per dump) K times, for K in --dumps (the largest is
the throughput trace: several million enter/exit records).

Throughput: `babeltrace2 [--plugin-path] TRACE -c SINK` for SINK in
sink.utils.dummy (decoding only: the floor any sink pays), sink.sertrace.tree
(output to /dev/null) and sink.sertrace.summary, plus `sertrace report
--summary` (the CLI's own graph), interleaved run after run.  Wall time with
perf_counter_ns; peak RSS and CPU time of each run from os.wait4.  Ratios are
per round (sink_i / dummy_i): median and min-max.

Memory against trace size: one run of each sink on every trace size.

Usage (normally through bench/run.py):
  /usr/bin/python3 bench/sinkbench.py [--build DIR] [--reps 5] [--dumps 10,20,40]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402


def child(k):
    import sertrace
    import workloads as wl
    obj = wl.build("builtins")
    total = 0
    for _ in range(k):
        total += len(sertrace.dumps(obj, 4))
    print(json.dumps({"pid": os.getpid(), "dumps": k, "payload_bytes": total}))


def record(tools, tmp, k):
    trace = os.path.join(tmp, "trace-%d" % k)
    env = tools.env({"SERTRACE_GRANULARITY": "all"})
    r = common.run([tools.sertrace, "record", "--cmd-only", "--buffer-size", "64M", "-o", trace,
                    "--", common.PYTHON, os.path.abspath(__file__), "--child", str(k)],
                   env=env, cwd=tmp)
    if r.returncode != 0:
        raise RuntimeError("sertrace record failed (%d): %s" % (r.returncode, r.stderr[-1500:]))
    info = json.loads(r.stdout.strip().splitlines()[-1])
    info["trace"] = trace
    info["trace_bytes"] = common.dir_bytes(trace)
    info["record_stderr"] = r.stderr.strip().splitlines()[:1]
    # Sizes of the trees: nodes per dump from the summary.
    rep = common.run([tools.sertrace, "report", "--json", "--top", "1", trace], env=env)
    if rep.returncode == 0:
        doc = json.loads(rep.stdout)
        mine = [d for d in doc["dumps"] if d["pid"] == info["pid"]]
        info["nodes"] = sum(d.get("nodes", 0) for d in mine)
        info["complete_dumps"] = sum(1 for d in mine if d.get("complete"))
    # CTF events (each sertrace:records event is a batch of up to 4 KiB of records).
    cnt = common.run(["babeltrace2", trace, "-c", "sink.utils.counter"])
    for line in (cnt.stdout + cnt.stderr).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1:3] == ["Event", "messages"]:
            info["ctf_events"] = int(parts[0])
    return info


def commands(tools, trace):
    bt = ["babeltrace2"] + tools.bt2_plugin_args()
    return {
        "dummy": bt + [trace, "-c", "sink.utils.dummy"],
        "tree": bt + [trace, "-c", "sink.sertrace.tree"],
        "summary": bt + [trace, "-c", "sink.sertrace.summary"],
        # the core inline on babeltrace2's thread (the default with one CPU)
        "tree -p worker-thread=no": bt + [trace, "-c", "sink.sertrace.tree",
                                          "-p", "worker-thread=no"],
        "summary -p worker-thread=no": bt + [trace, "-c", "sink.sertrace.summary",
                                             "-p", "worker-thread=no"],
        "report --summary": [tools.sertrace, "report", "--summary", trace],
    }


def timed(cmd, env):
    """(wall ns, cpu s, peak RSS KiB, exit status) of one run, output to /dev/null."""
    with open(os.devnull, "w") as devnull:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(cmd, stdout=devnull, stderr=subprocess.PIPE, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter_ns()
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
    return {"wall_ns": t1 - t0, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss,
            "status": p.returncode, "stderr": err[-500:] if p.returncode else ""}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dumps", default="10,20,40")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)

    tools = common.Tools(args.build)
    env = tools.env()
    env["SERTRACE_PROGRESS"] = "0"
    result = {"reps": args.reps, "traces": [], "throughput": {}, "memory": []}
    if not common.ensure_sessiond():
        result["error"] = "no lttng-sessiond reachable"
        return common.emit_json(args.out, result)
    tmp = tempfile.mkdtemp(prefix="sertrace-bench-sinks-")
    try:
        ks = sorted(int(x) for x in args.dumps.split(","))
        for k in ks:
            common.log("sinks: recording a trace of %d dumps" % k)
            result["traces"].append(record(tools, tmp, k))
        big = result["traces"][-1]
        cmds = commands(tools, big["trace"])
        for name, cmd in cmds.items():  # warm the page cache, check each works
            r = timed(cmd, env)
            if r["status"] != 0:
                result.setdefault("failed", {})[name] = r["stderr"]
        names = [n for n in cmds if n not in result.get("failed", {})]
        runs = {n: [] for n in names}
        common.log("sinks: throughput, %d rounds of %s" % (args.reps, ", ".join(names)))
        for _ in range(args.reps):
            for n in names:
                runs[n].append(timed(cmds[n], env))
        result["throughput"] = runs
        common.log("sinks: peak memory against trace size")
        for t in result["traces"]:
            row = {"dumps": t["dumps"], "trace_bytes": t["trace_bytes"], "nodes": t.get("nodes")}
            for n, cmd in commands(tools, t["trace"]).items():
                if n in names:
                    row[n] = timed(cmd, env)
            result["memory"].append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return common.emit_json(args.out, result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
