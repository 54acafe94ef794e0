#!/usr/bin/python3
"""Speed and memory of the sertrace babeltrace2 sinks (bench/sinks).

1. Records a trace of many small dumps with tests/plugin's gen_trace in an
   LTTng session (per-UID 8 MiB x 8 sub-buffers, blocking, so nothing is
   lost), checks with sink.utils.counter that it holds at least --events
   LTTng events.
2. Times `babeltrace2 -c sink.utils.dummy` and each sertrace sink on that
   same trace, runs interleaved (dummy, tree, summary, ... , dummy, ...),
   --rounds rounds, and prints medians and ratios to dummy.
3. Does the same on a second, realistic trace (--real-dumps N): N dumps of
   workloads/dispatch_like_state.py build_state(16) (~82 KiB, ~1,100 nodes
   each) pickled by the sertrace pickler under `python3 -m sertrace run`,
   recorded with `sertrace record` (bench/sinks/realistic_dumps.py).
4. Measures the summary sink's peak RSS (/usr/bin/time -v) on the trace and
   on one --scale times larger.

Usage (from the source root, after `meson setup BUILD && ninja -C BUILD`):
    /usr/bin/python3 bench/sinks/bench_sinks.py --build BUILD [--events 4000000]
        [--rounds 5] [--scale 10] [--real-dumps 20000] [--keep]
        [--trace DIR] [--real-trace DIR]
Needs a running lttng-sessiond (root or the tracing group).  Traces go to
/tmp/sertrace-bench-sinks-* and are deleted unless --keep is given.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EVENTS_PER_DUMP = 3  # dump_begin, one records event, dump_end


def lttng(*args, check=True):
    r = subprocess.run(["lttng", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit("lttng %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def record(gen, dumps, out):
    name = "bench-sinks-%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000)
    lttng("create", name, "--output=" + out)
    try:
        lttng("enable-channel", "-u", "--subbuf-size=8M", "--num-subbuf=8",
              "--blocking-timeout=inf", "-s", name, "bench")
        lttng("enable-event", "-u", "sertrace:*", "-s", name, "-c", "bench")
        lttng("add-context", "-u", "-t", "vpid", "-t", "vtid", "-s", name, "-c", "bench")
        lttng("start", name)
        env = dict(os.environ, LTTNG_UST_ALLOW_BLOCKING="1")
        t0 = time.time()
        subprocess.run([gen, "bench", str(dumps)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        print("  recorded %d dumps in %.1f s" % (dumps, time.time() - t0), flush=True)
    finally:
        lttng("stop", name, check=False)
        lttng("destroy", name, check=False)


def count_events(trace):
    r = subprocess.run(["babeltrace2", "-c", "sink.utils.counter", "-p", "step=+0", trace],
                       capture_output=True, text=True, check=True)
    m = re.findall(r"^\s*(\d+) Event messages", r.stdout, re.M)
    d = re.findall(r"^\s*(\d+) Discarded event messages", r.stdout, re.M)
    return int(m[-1]), int(d[-1]) if d else 0


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def run_sink(plugin_dir, sink, params, trace, rss=False):
    cmd = ["babeltrace2", "--plugin-path=" + plugin_dir, "-c", sink]
    for p in params:
        cmd += ["-p", p]
    cmd.append(trace)
    if rss:
        cmd = ["/usr/bin/time", "-v"] + cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    dt = time.perf_counter() - t0
    cpu = ru.ru_utime + ru.ru_stime
    if proc.returncode != 0:
        sys.exit("%s failed: %s" % (" ".join(cmd), err[-2000:]))
    if rss:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
        return dt, cpu, int(m.group(1))
    return dt, cpu, None


SINKS = [
    ("dummy", "sink.utils.dummy", []),
    ("tree", "sink.sertrace.tree", []),
    ("summary", "sink.sertrace.summary", []),
    ("summary brief", "sink.sertrace.summary", ["per-dump=no"]),
    ("summary json", "sink.sertrace.summary", ['format="json"']),
    # the core inline on babeltrace2's thread (the default with one CPU)
    ("tree inline", "sink.sertrace.tree", ["worker-thread=no"]),
    ("summary inline", "sink.sertrace.summary", ["worker-thread=no"]),
]


def record_real(build, dumps, out):
    """`sertrace record` of bench/sinks/realistic_dumps.py under the traced
    pickler (64 MiB buffers: nothing is discarded at this rate)."""
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [os.path.join(build, "cli", "sertrace"), "record", "--cmd-only",
           "--buffer-size", "64M", "-o", out, "--",
           "env", "PYTHONPATH=" + os.path.join(build, "python"), "/usr/bin/python3",
           "-m", "sertrace", "run", os.path.join(here, "realistic_dumps.py"), str(dumps)]
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print("  recorded %d realistic dumps in %.1f s" % (dumps, time.time() - t0), flush=True)


def bench(plugin_dir, trace, rounds):
    """Interleaved rounds of every sink on `trace`; prints the table."""
    times = {label: [] for label, _, _ in SINKS}
    cpus = {label: [] for label, _, _ in SINKS}
    for rnd in range(rounds):
        for label, sink, params in SINKS:
            dt, cpu, _ = run_sink(plugin_dir, sink, params, trace)
            times[label].append(dt)
            cpus[label].append(cpu)
        print("  round %d: %s" % (rnd + 1, "  ".join(
            "%s %.2f s (cpu %.2f)" % (l, times[l][-1], cpus[l][-1]) for l, _, _ in SINKS)),
            flush=True)
    base = statistics.median(times["dummy"])
    cbase = statistics.median(cpus["dummy"])
    print("\n| sink | median wall (s) | wall runs | ratio to dummy (wall) "
          "| median CPU user+sys (s) | CPU runs | ratio to dummy (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for label, sink, params in SINKS:
        med = statistics.median(times[label])
        cmed = statistics.median(cpus[label])
        print("| %s%s | %.2f | %s | %.2f | %.2f | %s | %.2f |" % (
            sink, (" -p " + ",".join(params)) if params else "", med,
            " ".join("%.2f" % t for t in times[label]), med / base, cmed,
            " ".join("%.2f" % t for t in cpus[label]), cmed / cbase), flush=True)


def new_trace(prefix, made, message, record_into):
    """A trace recorded by record_into(directory) into a new directory,
    added to `made` (removed at the end unless --keep); `message` first."""
    path = tempfile.mkdtemp(prefix=prefix)
    shutil.rmtree(path)
    made.append(path)
    print(message, flush=True)
    record_into(path)
    return path


def counted(label, trace):
    """Print the trace's event count, discarded events and size; the count."""
    events, discarded = count_events(trace)
    print("%s: %d LTTng events (%d discarded), %.0f MB" %
          (label, events, discarded, du(trace) / 1e6), flush=True)
    return events


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=int, default=10,
                    help="size factor of the trace used for the memory check (0: skip)")
    ap.add_argument("--trace", help="reuse this trace instead of recording one")
    ap.add_argument("--keep", action="store_true", help="keep the traces")
    ap.add_argument("--real-dumps", type=int, default=20000,
                    help="dumps of the realistic trace (0: skip it)")
    ap.add_argument("--real-trace", help="reuse this realistic trace")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    gen = os.path.join(build, "tests", "plugin", "gen_trace")
    plugin_dir = os.path.join(build, "analyzers", "plugin")
    for p in (gen, plugin_dir):
        if not os.path.exists(p):
            sys.exit("missing %s: build first" % p)
    if lttng("list", check=False).returncode != 0:
        subprocess.run(["lttng-sessiond", "--daemonize"], check=True)

    made = []
    try:
        dumps = -(-args.events // EVENTS_PER_DUMP) + 1000
        trace = args.trace or new_trace("sertrace-bench-sinks-", made,
                                        "recording %d dumps ..." % dumps,
                                        lambda out: record(gen, dumps, out))
        events = counted("trace", trace)
        if events < args.events:
            print("WARNING: fewer events than asked (%d < %d)" % (events, args.events))

        if args.rounds > 0:
            bench(plugin_dir, trace, args.rounds)

        if args.real_dumps > 0 or args.real_trace:
            real = args.real_trace or new_trace(
                "sertrace-bench-sinks-real-", made,
                "\nrecording %d realistic dumps ..." % args.real_dumps,
                lambda out: record_real(build, args.real_dumps, out))
            counted("realistic trace", real)
            if args.rounds > 0:
                bench(plugin_dir, real, args.rounds)

        if args.scale > 1:
            big = new_trace("sertrace-bench-sinks-big-", made,
                            "\nrecording a %dx larger trace (%d dumps) ..." %
                            (args.scale, dumps * args.scale),
                            lambda out: record(gen, dumps * args.scale, out))
            bevents = counted("big trace", big)
            print("\n| trace | events | summary wall (s) | summary peak RSS (KiB) | dummy peak RSS (KiB) |")
            print("|---|---|---|---|---|")
            for t, n in ((trace, events), (big, bevents)):
                st, _, srss = run_sink(plugin_dir, "sink.sertrace.summary", [], t, rss=True)
                _, _, drss = run_sink(plugin_dir, "sink.utils.dummy", [], t, rss=True)
                print("| %s | %d | %.1f | %d | %d |" % (os.path.basename(t), n, st, srss, drss),
                      flush=True)
    finally:
        if not args.keep:
            for d in made:
                shutil.rmtree(d, ignore_errors=True)
        else:
            print("kept:", " ".join(made))


if __name__ == "__main__":
    main()
