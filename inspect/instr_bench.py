#!/usr/bin/env python3
"""Instructions per call under callgrind: sertrace.inspect(data) (the dict),
_inspect.summary_json (the text alone) and pickle.loads on the same bytes,
for the fixed cost of an inspect call (issue 14 item 5).

    /usr/bin/python3 inspect/instr_bench.py --build build [--calls 5] \\
        [--keep DIR] [--parts] [PAYLOAD ...]

PAYLOAD: a bench/workloads.py workload, pickled at the default protocol
(the tiny ones among them: tiny-list, tiny-dict, tiny-str, tiny-none).  Each (payload, call) is
one `valgrind --tool=callgrind --collect-atstart=no` child: two untimed
calls, then collection on around `--calls` calls (callgrind.h's toggle,
compiled into a temporary directory); the figure is the total divided by
the calls (the Python loop adds a few hundred instructions a call).
`--parts`: the inspect call only, split by where its instructions run
(callgrind_annotate's self counts, each function to its source file,
inlined code to the function it is inlined into): the emulator
(inspect/emulator*.c), the feeding (emulator-records.c), the core
(core.c), the summary (summary*.c, paths), the rest (the dict, Python).
"""
import argparse
import os
import pickle
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import callgrind_harness as H  # noqa: E402  bench/callgrind_harness.py

CALLS = ("loads", "json", "inspect")
DEFAULT = ["micro-bytes-2k", "tiny-list", "tiny-dict", "tiny-str", "tiny-none", "state-16"]


def payload(name):
    import workloads as W  # bench/workloads.py

    return pickle.dumps(W.build(name))


def child(call, name, calls, toggle_so):
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
    H.collect(fn, (data,), calls, toggle_so)


def measure(args, call, name, toggle_so, tmp):
    import common

    out = os.path.join(tmp, "cg.%s.%s" % (call, name))
    env = common.Tools(args.build).env() if args.build else dict(os.environ)
    counts = H.run_child(__file__, [call, name, args.calls, toggle_so], env, out, keep=args.keep,
                         what="%s %s" % (call, name))
    return counts["Ir"] / args.calls


PARTS = (("feeding", ("emulator-records.c",)), ("emulator", ("emulator", "audit.c")),
         ("core", ("core.c",)), ("summary", ("summary", "paths.c", "pathstats.c")))


def part_of(path):
    base = os.path.basename(path)
    for part, prefixes in PARTS:
        if base.startswith(prefixes):
            return part
    return None


def split_parts(out, calls):
    """{part: instructions per call} from callgrind output `out`."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100",
                           "--show-percs=no", out], capture_output=True, text=True).stdout
    rows = []
    for line in text.split("-- Auto-annotated")[0].splitlines():
        m = re.match(r"\s*([\d,]+)\s+(\S+?):(\S+)", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")), m.group(2), m.group(3)))
    owner = {}  # a function defined in a .c file: its part (for code inlined from headers)
    for _, path, fn in rows:
        if path.endswith(".c") and part_of(path):
            owner.setdefault(fn, part_of(path))
    res = {p: 0 for p, _ in PARTS}
    res["rest"] = 0
    for ir, path, fn in rows:
        part = part_of(path) if path.endswith(".c") else None
        res[part or owner.get(fn, "rest")] += ir
    return {k: v / calls for k, v in res.items()}


def main(argv):
    if H.is_child(argv):
        child(argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    H.add_build(ap)
    ap.add_argument("--calls", type=int, default=5)
    H.add_keep(ap)
    ap.add_argument("--parts", action="store_true",
                    help="the inspect call only, its instructions by part")
    ap.add_argument("payloads", nargs="*", default=DEFAULT)
    args = H.absolute_paths(ap.parse_args(argv[1:]))
    with H.toggle_library() as (tmp, toggle_so):
        if args.parts:
            names = [p for p, _ in PARTS] + ["rest"]
            print("%-16s %10s %s   (instructions per call, K)"
                  % ("payload", "inspect", " ".join("%10s" % p for p in names)))
            for name in args.payloads:
                total = measure(args, "inspect", name, toggle_so, tmp)
                split = split_parts(os.path.join(tmp, "cg.inspect.%s" % name), args.calls)
                print("%-16s %10.1f %s" % (name, total / 1e3, " ".join(
                    "%10.1f" % (split[p] / 1e3) for p in names)), flush=True)
            return 0
        print("%-16s %s   (instructions per call, K)" % ("payload", " ".join("%10s" % c for c in CALLS)))
        for name in args.payloads:
            cells = ["%10.1f" % (measure(args, c, name, toggle_so, tmp) / 1e3) for c in CALLS]
            print("%-16s %s" % (name, " ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
