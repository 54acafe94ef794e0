#!/usr/bin/env python3
"""Instructions per call under callgrind: sertrace.inspect(data) (the dict),
_inspect.summary_json (the text alone) and pickle.loads on the same bytes,
for the fixed cost of an inspect call (issue 14 item 5).

    /usr/bin/python3 inspect/instr_bench.py --build build [--calls 5] \\
        [--keep DIR] [PAYLOAD ...]

PAYLOAD: a bench/workloads.py workload, pickled at the default protocol
(the tiny ones among them: tiny-list, tiny-dict, tiny-str, tiny-none).  Each (payload, call) is
one `valgrind --tool=callgrind --collect-atstart=no` child: two untimed
calls, then collection on around `--calls` calls (callgrind.h's toggle,
compiled into a temporary directory); the figure is the total divided by
the calls (the Python loop adds a few hundred instructions a call).
"""
import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

PYTHON = "/usr/bin/python3"
CALLS = ("loads", "json", "inspect")
DEFAULT = ["micro-bytes-2k", "tiny-list", "tiny-dict", "tiny-str", "tiny-none", "state-16"]

TOGGLE_C = r"""
#include <valgrind/callgrind.h>
void toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""


def payload(name):
    import workloads as W  # bench/workloads.py

    return pickle.dumps(W.build(name))


def child(call, name, calls, toggle_so):
    import ctypes

    data = payload(name)
    if call == "loads":
        fn = pickle.loads
    elif call == "json":
        from sertrace import _inspect

        def fn(d):
            return _inspect.summary_json(d, 10, 0, 0.0, 1 << 30)
    else:
        import sertrace

        fn = sertrace.inspect
    toggle = ctypes.CDLL(toggle_so).toggle
    fn(data)
    fn(data)
    toggle()
    for _ in range(calls):
        fn(data)
    toggle()


def measure(args, call, name, toggle_so, tmp):
    import common

    out = os.path.join(tmp, "cg.%s.%s" % (call, name))
    env = common.Tools(args.build).env() if args.build else dict(os.environ)
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=" + out,
           PYTHON, os.path.abspath(__file__), "--child", call, name, str(args.calls), toggle_so]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s %s: %s" % (call, name, r.stderr[-2000:]))
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        shutil.copy(out, args.keep)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1]) / args.calls
    raise RuntimeError("no total in " + out)


def main(argv):
    if len(argv) > 1 and argv[1] == "--child":
        child(argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="meson build directory (else the installed sertrace)")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--keep", help="copy each callgrind output file into this directory")
    ap.add_argument("payloads", nargs="*", default=DEFAULT)
    args = ap.parse_args(argv[1:])
    if args.build:
        args.build = os.path.abspath(args.build)
    if args.keep:
        args.keep = os.path.abspath(args.keep)
    with tempfile.TemporaryDirectory(prefix="sertrace-instr-") as tmp:
        toggle_so = os.path.join(tmp, "toggle.so")
        src = os.path.join(tmp, "toggle.c")
        with open(src, "w") as f:
            f.write(TOGGLE_C)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", toggle_so, src], check=True)
        print("%-16s %s   (instructions per call, K)" % ("payload", " ".join("%10s" % c for c in CALLS)))
        for name in args.payloads:
            cells = ["%10.1f" % (measure(args, c, name, toggle_so, tmp) / 1e3) for c in CALLS]
            print("%-16s %s" % (name, " ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
