#!/usr/bin/env python3
"""Run every sertrace benchmark and rewrite bench/RESULTS.md.

    bench/run.sh [--build DIR] [--quick] [--reps N] [--only PARTS] [--output FILE]
                 [--also-python PYTHON=BUILD ...] [--channel GEOMETRY]

Parts (all by default; --only takes a comma-separated subset):
  sizes     payload sizes under pickle, dill (with/without byref), cloudpickle
            and sertrace; where the bytes go and dill against pickle
            (sertrace.compare, sertrace diff)                        bench/sizes.py
  overhead  ratios to pickle.dumps: sertrace dormant, recording into LTTng
            (default and every-object granularity), DISPATCH_TRACE to a
            file, dill untraced / dill.detect.trace / dill traced by sertrace
                                                                     bench/overhead.py
  sinks     analyzer throughput against sink.utils.dummy, peak memory
            against trace size                                       bench/sinkbench.py
  api       per-node cost of the C API (bench/api_cost.sh, needs --build)
  sinks2    the analyzers' own sink benchmark, many small dumps
            (bench/sinks/bench_sinks.py, needs --build)
  inspect   `sertrace inspect` against pickle.loads and pickletools.genops
            on the workloads' payloads, and its peak memory
                                                                     bench/inspect_speed.py

--also-python PYTHON=BUILD (repeatable) also runs the dormant, tiny-payload
and recording timings under another CPython (3.12, 3.13) with the build
directory made for it, in a section of their own with their own verdicts.

--build DIR uses that meson build directory (DIR/cli/sertrace, DIR/python,
DIR/analyzers/plugin); without it the installed sertrace is used (what
`bash scripts/setup.sh` installs).  --quick runs fewer rounds (~2 minutes on a
2-core VM instead of ~8).  Every comparison interleaves its contenders in one
process, so drift cancels in the per-round ratios; tables show the median
ratio and its [min–max] over the rounds.
"""

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from results_md import parse_bench_sinks, render, section_verbatim  # noqa: E402

PARTS = ("sizes", "overhead", "sinks", "api", "sinks2", "inspect")


# ---------------------------------------------------------------------------
# environment
# ---------------------------------------------------------------------------


def first_line(cmd, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
        out = (r.stdout or r.stderr).strip().splitlines()
        return out[0].strip() if out else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def machine_info(tools):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
            mem = "%.1f GiB" % (kib / 1024 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    distro = "?"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    env = tools.env()
    pyver = first_line([common.PYTHON, "-c", "import sys; print(sys.version.split()[0])"])
    mods = first_line([common.PYTHON, "-c",
                       "import dill, cloudpickle; print(dill.__version__, cloudpickle.__version__)"])
    dill_v, cp_v = (mods.split() + ["?", "?"])[:2]
    commit = first_line(["git", "-C", common.ROOT, "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", common.ROOT, "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu, "cpus": os.cpu_count(), "memory": mem, "os": distro,
        "kernel": platform.release(),
        "python": pyver, "dill": dill_v, "cloudpickle": cp_v,
        "lttng": first_line(["lttng", "--version"]),
        "babeltrace2": first_line(["babeltrace2", "--version"]),
        "sertrace": first_line([tools.sertrace, "--version"], env=env),
        "commit": commit + (" + uncommitted changes" if dirty else ""),
        "load": "%.2f %.2f %.2f" % os.getloadavg(),
        "tools": tools.describe(),
    }


def check_tools(tools):
    env = tools.env()
    r = subprocess.run([common.PYTHON, "-c", "import sertrace; print(sertrace.__file__)"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        hint = (" (build it: ninja -C %s)" % tools.build) if tools.build else (
            " (install it with `bash scripts/setup.sh`, or pass --build DIR)")
        raise SystemExit("run.py: cannot import sertrace with %s%s\n%s"
                         % (common.PYTHON, hint, r.stderr.strip()))
    if not (os.path.exists(tools.sertrace) or shutil.which(tools.sertrace)):
        raise SystemExit("run.py: the `sertrace` command is missing (%s)" % tools.sertrace)
    return r.stdout.strip()


# ---------------------------------------------------------------------------
# isolation: a private lttng-sessiond
# ---------------------------------------------------------------------------
#
# LTTng sessions are per user and apply to every process of the user: a
# session someone else starts (a test, another benchmark) enables sertrace:*
# in our "dormant" processes and records our timing children twice.  As
# root, run.py therefore re-executes itself in a private mount namespace
# (unshare -m) where tmpfs hides the shared session daemon's rundir
# (/run/lttng) and /dev/shm (LTTng-UST's registration futex and ring
# buffers), and starts its own lttng-sessiond there (--no-kernel); nothing
# outside sees it, and it is stopped by its pid at the end.  The dormant
# fast path is the same with or without a daemon (one load per dump begin).

ISOLATED_ENV = "SERTRACE_BENCH_ISOLATED"


def can_isolate():
    return (os.geteuid() == 0 and shutil.which("unshare") and shutil.which("mount")
            and shutil.which("lttng-sessiond") and shutil.which("lttng"))


def reexec_isolated(argv):
    env = dict(os.environ)
    env[ISOLATED_ENV] = "1"
    cmd = ["unshare", "--mount", "--propagation", "private", "--",
           common.PYTHON, os.path.abspath(__file__)] + argv
    return subprocess.call(cmd, env=env)


def start_private_sessiond():
    """In the private namespace: hide the shared daemon, start ours; returns its pid."""
    rundir = os.path.realpath("/var/run/lttng")
    os.makedirs(rundir, exist_ok=True)
    for target in (rundir, "/dev/shm"):
        r = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", target], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("mount tmpfs on %s: %s" % (target, r.stderr.strip()))
    r = subprocess.run(["lttng-sessiond", "--daemonize", "--no-kernel"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("lttng-sessiond: %s" % r.stderr.strip())
    pid = None
    for _ in range(100):
        try:
            with open(os.path.join(rundir, "lttng-sessiond.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pid = None
        if pid and common.lttng("list").returncode == 0:
            break
        time.sleep(0.1)
    return pid


def stop_private_sessiond(pid):
    if not pid:
        return
    try:
        os.kill(pid, 15)
    except OSError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.1)


def run_part(label, cmd, env, timeout=3600):
    common.log("== %s: %s" % (label, " ".join(os.path.relpath(c, common.ROOT)
                                            if c.startswith(common.ROOT) else c for c in cmd)))
    t0 = time.time()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True,
                       timeout=timeout)
    common.log("== %s done in %.0f s (status %d)" % (label, time.time() - t0, r.returncode))
    return r



# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def part_info(part, info, args, isolation):
    """What RESULTS.md's header says about a part measured in a run of its own
    (`--only PART --raw DIR`): written to DIR/info-PART.json when the part
    starts, read back by `--from-raw DIR` (results_md.render, "measured apart")."""
    return {
        "part": part,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load": "%.2f %.2f %.2f" % os.getloadavg(),
        "commit": info.get("commit", "?"), "sertrace": info.get("sertrace", "?"),
        "tools": info.get("tools", "?"), "quick": args.quick,
        "reps": args.reps or (5 if args.quick else 15),
        "isolation": isolation,
        "also_python": list(args.also_python) if part == "overhead" else [],
    }


def verbatim_key(section):
    """A verbatim section's title without its parenthesised detail: the same
    part's section whether it ran or says why it did not."""
    return section.split("\n", 1)[0].split("(", 1)[0].strip()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"),
                    help="meson build directory to benchmark (default: the installed sertrace)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds: ~2 minutes")
    ap.add_argument("--reps", type=int, default=None, help="rounds per timing comparison")
    ap.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ",".join(PARTS))
    ap.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--raw", default=None, help="keep the raw JSON results in this directory")
    ap.add_argument("--from-raw", default=None,
                    help="do not measure: render RESULTS.md from the JSON kept by an earlier --raw DIR")
    ap.add_argument("--also-python", action="append", default=[], metavar="PYTHON=BUILD",
                    help="also time sertrace against that CPython's own pickle (dormant, tiny "
                         "payloads, recording at both granularities) with the meson build "
                         "directory BUILD made for it (meson setup BUILD -Dpython=PYTHON); "
                         "repeatable (e.g. for 3.12 and 3.13)")
    ap.add_argument("--channel", default=None, metavar="GEOMETRY",
                    help="LTTng channel of every bench session, bench/geometry.py's spelling "
                         "(e.g. 256Kx8, 4Mx4, 1Mx8:rt=10000; default %s, what `sertrace record` "
                         "uses); sets SERTRACE_BENCH_CHANNEL" % common.DEFAULT_GEOMETRY)
    ap.add_argument("--shared-sessiond", action="store_true",
                    help="use the machine's lttng-sessiond instead of a private one (the default "
                         "as root: other users' sessions then may record the benchmark)")
    args = ap.parse_args(argv)
    if args.channel:
        try:
            common.parse_geometry(args.channel)
        except ValueError as e:
            raise SystemExit("run.py: --channel: %s" % e)
        os.environ["SERTRACE_BENCH_CHANNEL"] = args.channel
        if common.parse_geometry(args.channel)["block"]:
            os.environ["LTTNG_UST_ALLOW_BLOCKING"] = "1"  # the apps must opt in to blocking
    if args.from_raw:
        return bench(args, "(rendered from %s)" % args.from_raw)
    # the inspect and api parts record nothing: no private session daemon for them alone
    records = any(p not in ("inspect", "api") for p in args.only.split(",") if p)
    if records and not args.shared_sessiond and not os.environ.get(ISOLATED_ENV) and can_isolate():
        return reexec_isolated(argv)
    sessiond_pid = None
    isolation = "shared lttng-sessiond (other sessions may record the benchmark processes)"
    if not records:
        isolation = "none needed (nothing recorded)"
    elif os.environ.get(ISOLATED_ENV) and not args.shared_sessiond:
        # SIGTERM/SIGHUP unwind through the finally below, which stops our daemon.
        import signal
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
        try:
            sessiond_pid = start_private_sessiond()
            isolation = ("private lttng-sessiond in a private mount namespace (no other session "
                         "can enable the benchmark's tracepoints)")
        except RuntimeError as e:
            common.log("isolation failed (%s); using the shared session daemon" % e)
    try:
        return bench(args, isolation)
    finally:
        stop_private_sessiond(sessiond_pid)


def bench(args, isolation):

    tools = common.Tools(args.build)
    if tools.build and not os.path.isdir(tools.build):
        raise SystemExit("run.py: no build directory %s" % tools.build)
    pkg = check_tools(tools) if not args.from_raw else "(not measuring)"
    parts = [p for p in args.only.split(",") if p]
    for p in parts:
        if p not in PARTS:
            raise SystemExit("run.py: unknown part %r (parts: %s)" % (p, ", ".join(PARTS)))
    reps = args.reps or (5 if args.quick else 15)
    t_start = time.time()
    info = machine_info(tools)
    common.log("benchmarking %s (package %s), %s" % (tools.describe(), pkg,
                                                      "quick" if args.quick else "full"))
    raw = args.from_raw or args.raw or tempfile.mkdtemp(prefix="sertrace-bench-raw-")
    os.makedirs(raw, exist_ok=True)
    # A run of some parts only (--only) into a raw DIR that may hold an
    # earlier run: each part it measures gets DIR/info-PART.json, and the
    # earlier run's info.json and verbatim sections of other parts stay.  A
    # run of every part starts the directory over (no info-PART.json).
    subset = set(parts) != set(PARTS)
    if not args.from_raw and not subset:
        import glob
        for f in glob.glob(os.path.join(raw, "info-*.json")):
            os.remove(f)

    def measuring(part):
        if subset and not args.from_raw:
            common.write_json(os.path.join(raw, "info-%s.json" % part),
                              part_info(part, info, args, isolation))
        return True
    env = tools.env()
    bargs = ["--build", tools.build] if tools.build else []
    results = {}
    if args.from_raw:
        for part in ("sizes", "overhead", "sinks"):
            f = os.path.join(args.from_raw, part + ".json")
            results[part] = common.read_json(f) if os.path.exists(f) else None
        verb_file = os.path.join(args.from_raw, "verbatim.json")
        verb_saved = common.read_json(verb_file) if os.path.exists(verb_file) else []
        parts = [p for p in parts if p in ("sizes", "overhead", "sinks")]

    if "sizes" in parts and not args.from_raw and measuring('sizes'):
        out = os.path.join(raw, "sizes.json")
        r = run_part("sizes", [common.PYTHON, os.path.join(HERE, "sizes.py"), "--out", out] + bargs, env)
        results["sizes"] = common.read_json(out) if r.returncode == 0 else None
    if "overhead" in parts and not args.from_raw and measuring('overhead'):
        out = os.path.join(raw, "overhead.json")
        r = run_part("overhead", [common.PYTHON, os.path.join(HERE, "overhead.py"), "--out", out,
                                  "--reps", str(reps),
                                  "--target-ms", "5" if args.quick else "10"] + bargs, env)
        results["overhead"] = common.read_json(out) if r.returncode == 0 else None
    versions = {}  # "3.12.1" -> raw overhead results
    if "overhead" in parts and not args.from_raw:
        for spec in args.also_python:
            py, sep, vbuild = spec.partition("=")
            if not sep or not os.path.isdir(vbuild):
                raise SystemExit("run.py: --also-python wants PYTHON=BUILD with an existing "
                                 "build directory, got %r" % spec)
            ver = first_line([py, "-c", "import sys; print(sys.version.split()[0])"])
            vtools = common.Tools(vbuild)
            venv = vtools.env({"SERTRACE_BENCH_PYTHON": py})
            out = os.path.join(raw, "overhead-%s.json" % ver)
            r = run_part("overhead (CPython %s)" % ver,
                         [py, os.path.join(HERE, "overhead.py"), "--out", out,
                          "--reps", str(reps), "--target-ms", "5" if args.quick else "10",
                          "--configs", "dormant,lttng-default,lttng-all", "--without-dill",
                          "--build", vtools.build], venv)
            if r.returncode == 0:
                versions[ver] = common.read_json(out)
    if args.from_raw:
        import glob
        for f in sorted(glob.glob(os.path.join(args.from_raw, "overhead-*.json"))):
            versions[os.path.basename(f)[len("overhead-"):-len(".json")]] = common.read_json(f)
    if "sinks" in parts and not args.from_raw and measuring('sinks'):
        out = os.path.join(raw, "sinks.json")
        r = run_part("sinks", [common.PYTHON, os.path.join(HERE, "sinkbench.py"), "--out", out,
                               "--reps", "3" if args.quick else "5",
                               "--dumps", "4,8,16" if args.quick else "10,20,40"] + bargs, env)
        results["sinks"] = common.read_json(out) if r.returncode == 0 else None
    verb = verb_saved if args.from_raw else []
    if "api" in parts and measuring('api'):
        exe = os.path.join(tools.build or "", "bench", "api_cost")
        if tools.build and os.path.exists(exe):
            r = run_part("api", ["sh", os.path.join(HERE, "api_cost.sh"), tools.build,
                                 "1" if args.quick else "3"], env, timeout=600)
            verb.append(section_verbatim(
                "C API cost per node (bench/api_cost.sh, verbatim)",
                "Written by the runtime work (method: bench/README.md); run here with %s run(s)."
                % ("1" if args.quick else "3"), r.stdout + ("" if r.returncode == 0 else
                                                            "\n(exit status %d)" % r.returncode)))
        else:
            verb.append("## C API cost per node\n\nNot run: needs `--build DIR` with "
                        "`bench/api_cost` built.\n")
    if "sinks2" in parts and not args.from_raw and measuring('sinks2'):
        script = os.path.join(HERE, "sinks", "bench_sinks.py")
        if args.quick:
            verb.append("## Sinks on many small dumps\n\nNot run with `--quick` "
                        "(bench/sinks/bench_sinks.py takes ~13 minutes).\n")
        elif tools.build and os.path.exists(script) and os.path.exists(
                os.path.join(tools.build, "tests", "plugin", "gen_trace")):
            events = "4000000"
            r = run_part("sinks2", [common.PYTHON, script, "--build", tools.build, "--events", events,
                                    "--rounds", "3", "--scale", "0"], env, timeout=2400)
            results["sinks2"] = parse_bench_sinks(r.stdout)
            common.write_json(os.path.join(raw, "sinks2.json"), results["sinks2"])
            verb.append(section_verbatim(
                "Sinks on many small dumps (bench/sinks/bench_sinks.py, verbatim)",
                "Written by the analyzers work: a trace of %s LTTng events from many small dumps "
                "(tests/plugin/gen_trace: 3 events per dump), each sink against sink.utils.dummy, "
                "3 interleaved rounds." % "{:,}".format(int(events)),
                r.stdout + ("" if r.returncode == 0 else "\n(exit status %d)" % r.returncode)))
        else:
            verb.append("## Sinks on many small dumps\n\nNot run: needs `--build DIR` with "
                        "`tests/plugin/gen_trace` and bench/sinks/bench_sinks.py.\n")
    if "inspect" in parts and not args.from_raw and measuring('inspect'):
        out = os.path.join(raw, "inspect.json")
        r = run_part("inspect", [common.PYTHON, os.path.join(HERE, "inspect_speed.py"), "--json", out,
                                 "--rounds", str(args.reps) if args.reps else "5" if args.quick else "15"]
                     + bargs, env)
        results["inspect"] = common.read_json(out) if r.returncode == 0 else None
        results["inspect_text"] = r.stdout
        common.write_json(os.path.join(raw, "inspect-text.json"), r.stdout)
    if args.from_raw and os.path.exists(os.path.join(args.from_raw, "inspect.json")):
        results["inspect"] = common.read_json(os.path.join(args.from_raw, "inspect.json"))
        results["inspect_text"] = common.read_json(os.path.join(args.from_raw, "inspect-text.json"))
    if args.from_raw and os.path.exists(os.path.join(args.from_raw, "sinks2.json")):
        results["sinks2"] = common.read_json(os.path.join(args.from_raw, "sinks2.json"))

    verb_file = os.path.join(raw, "verbatim.json")
    if subset and not args.from_raw and os.path.exists(verb_file):
        # keep the earlier run's sections of the parts not measured now
        mine = {verbatim_key(v) for v in verb}
        verb_all = [v for v in common.read_json(verb_file) if verbatim_key(v) not in mine] + verb
    else:
        verb_all = verb
    common.write_json(verb_file, verb_all)
    info_file = os.path.join(raw, "info.json")
    if args.from_raw:
        import glob
        apart = {}
        for f in sorted(glob.glob(os.path.join(raw, "info-*.json"))):
            pinfo = common.read_json(f)
            apart[pinfo.get("part", os.path.basename(f)[len("info-"):-len(".json")])] = pinfo
    if args.from_raw and os.path.exists(info_file):
        info = common.read_json(info_file)
        isolation = info.get("isolation", isolation)
        elapsed_saved = info.get("elapsed")
        if apart:
            info["apart"] = apart
    elif subset and os.path.exists(info_file):
        elapsed_saved = None  # the earlier run's header stays for --from-raw
    else:
        info["isolation"] = isolation
        info["elapsed"] = time.time() - t_start
        info["quick"] = args.quick
        common.write_json(info_file, info)
        elapsed_saved = None

    # ------------------------------------------------------------------ render
    elapsed = elapsed_saved or (time.time() - t_start)
    text = render(results, parts, versions, verb, info, isolation, info.get("quick", args.quick),
                  elapsed)
    with open(args.output, "w") as f:
        f.write(text)
    common.log("wrote %s (raw results in %s) in %.0f s" % (args.output, raw, elapsed))
    if not args.raw and not args.from_raw:
        shutil.rmtree(raw, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
