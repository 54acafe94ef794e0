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


def main(argv):
    if H.is_child(argv):
        child(argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    H.add_build(ap)
    ap.add_argument("--calls", type=int, default=5)
    H.add_keep(ap)
    ap.add_argument("payloads", nargs="*", default=DEFAULT)
    args = H.absolute_paths(ap.parse_args(argv[1:]))
    with H.toggle_library() as (tmp, toggle_so):
        print("%-16s %s   (instructions per call, K)" % ("payload", " ".join("%10s" % c for c in CALLS)))
        for name in args.payloads:
            cells = ["%10.1f" % (measure(args, c, name, toggle_so, tmp) / 1e3) for c in CALLS]
            print("%-16s %s" % (name, " ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
