#!/usr/bin/env python3
"""The training run of a profile-guided build (scripts/pgo-build.sh): run
sertrace.dumps over the project's own benchmark workloads (bench/workloads.py)
dormant, recording into LTTng at the default granularity, and recording every
object, so that a build configured with -Db_pgo=generate writes its .gcda
profiles.  Nothing else is trained: no user data, no other corpus.

    /usr/bin/python3 scripts/pgo_train.py --build BUILD [--python PY] [--dumps N]
                                          [--dormant-weight W]

--python: the interpreter the build's extension is for (-Dpython; default
Debian's /usr/bin/python3); the children run on it.

Each configuration is one child process (the profile counters are written
when it exits); the recording ones run under an LTTng session made like
`sertrace record`'s (bench/common.py's Session).  As root the script
re-executes itself in a private mount namespace with its own lttng-sessiond,
as bench/run.py and serializers/pickle/instr_bench.py do, so its session
records no one else and no one else's records the dormant child.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
PYTHON = "/usr/bin/python3"
ISOLATED_ENV = "SERTRACE_PGO_ISOLATED"
CONFIGS = ("dormant", "default", "all")
# The timed workloads of bench/ (overhead.py), the micro lists and the tiny
# payloads; closures-64 only where dill's extension is what runs it.
WORKLOADS = ("builtins", "instances", "state-16", "state-64", "state-256", "dataclass-graph",
             "micro-ints", "micro-floats", "micro-short-str", "micro-bytes-2k",
             "micro-small-dicts", "micro-tuples", "tiny-list", "tiny-dict", "tiny-str",
             "tiny-none")


def child(config, dumps):
    import workloads as WL  # bench/workloads.py
    import sertrace
    for name in WORKLOADS:
        obj = WL.build(name)
        n = dumps * 50 if name.startswith("tiny-") else dumps
        for proto in (4, 5, 2):
            for _ in range(n if proto == 4 else max(1, n // 4)):
                sertrace.dumps(obj, proto)


def main(argv):
    if len(argv) > 1 and argv[1] == "--child":
        child(argv[2], int(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="meson build directory (-Db_pgo=generate)")
    ap.add_argument("--python", default=PYTHON, help="interpreter of the children (-Dpython)")
    ap.add_argument("--dumps", type=int, default=20, help="dumps of each workload per protocol 4")
    ap.add_argument("--dormant-weight", type=int, default=1,
                    help="the dormant run makes W times as many dumps as each recording one")
    args = ap.parse_args(argv[1:])
    args.build = os.path.abspath(args.build)

    import common  # bench/common.py
    import run  # bench/run.py: the private session daemon

    if not os.environ.get(ISOLATED_ENV) and run.can_isolate():
        env = dict(os.environ)
        env[ISOLATED_ENV] = "1"
        return subprocess.call(["unshare", "--mount", "--propagation", "private", "--", PYTHON,
                                os.path.abspath(__file__)] + argv[1:], env=env)
    sessiond = run.start_private_sessiond() if os.environ.get(ISOLATED_ENV) else None
    try:
        with tempfile.TemporaryDirectory(prefix="sertrace-pgo-") as tmp:
            for config in CONFIGS:
                env = common.Tools(args.build).env()
                for k in ("DISPATCH_TRACE", "SERTRACE_GRANULARITY"):
                    env.pop(k, None)
                if config == "all":
                    env["SERTRACE_GRANULARITY"] = "all"
                dumps = args.dumps * (args.dormant_weight if config == "dormant" else 1)
                cmd = [args.python, os.path.abspath(__file__), "--child", config, str(dumps)]
                session = None
                if config != "dormant":
                    if sessiond is None and not common.lttng_available():
                        raise RuntimeError("no lttng-sessiond to record the %s run" % config)
                    session = common.Session("pgo", os.path.join(tmp, "trace-" + config))
                    session.__enter__()
                try:
                    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                finally:
                    if session is not None:
                        session.__exit__(None, None, None)
                if r.returncode != 0:
                    raise RuntimeError("%s: %s" % (config, r.stderr[-2000:]))
                print("pgo training: %s done" % config, flush=True)
    finally:
        run.stop_private_sessiond(sessiond)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
