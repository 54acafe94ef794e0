#!/usr/bin/python3
"""Realistic dumps for bench/sinks: pickles workloads/dispatch_like_state.py's
build_state(16) (a durable-coroutine scheduler state, ~82 KiB and ~1,100
nodes per dump) N times with the standard `pickle` API.  Run it under
`python3 -m sertrace run` inside `sertrace record` so every dump is traced:

    sertrace record --cmd-only --buffer-size 64M -o DIR -- \\
        env PYTHONPATH=BUILD/python /usr/bin/python3 -m sertrace run \\
        bench/sinks/realistic_dumps.py N
"""
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))
import dispatch_like_state as workload  # noqa: E402


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 1000
    state = workload.build_state(16)
    total = 0
    for _ in range(n):
        total += len(pickle.dumps(state, 5))
    print("dumps %d bytes %d" % (n, total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
