#!/usr/bin/env python3
"""A/B timing of pickle.dumps against sertrace.dumps, interleaved in one process.

Used for the numbers in README.md ("Speed").  Each sample times `inner` dumps of
one pickler (>= ~2 MB of output), the two picklers alternate (A/B then B/A), and
the ratio of each pair is taken; the median and quartiles of the ratios are
printed.  CPU=1 times with thread_time (CPU time of this thread: robust against
other load on a shared VM), otherwise perf_counter.

Dormant (no session daemon reachable: an LTTng session of anyone else that
enables sertrace:* for all processes would otherwise turn tracing on here):

    unshare -m sh -c 'mount -t tmpfs none /var/run/lttng; mount -t tmpfs none /root/.lttng;
        mount -t tmpfs none /dev/shm; HOME=/tmp/empty LTTNG_HOME=/tmp/empty \\
        PYTHONPATH=BUILD/python CPU=1 REPS=31 /usr/bin/python3 serializers/pickle/ab_bench.py'

Recording: the same command (without unshare) between `lttng create S --output=DIR;
lttng enable-event -u 'sertrace:*' -s S; lttng add-context -u -t vpid -t vtid -s S;
lttng start S` and `lttng destroy S`.

Arguments: workload names to run (state16 state64 state256 nested; default all).
"""
import os
import pickle
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "workloads"))
import dispatch_like_state as W  # noqa: E402

import sertrace  # noqa: E402

CLOCK = time.thread_time if os.environ.get("CPU") else time.perf_counter


def nested(seed=1, target=90000):
    """~90k objects: dicts (str keys) and lists, depth 5, leaves int/float/str."""
    rng = random.Random(seed)
    count = [0]

    def atom():
        count[0] += 1
        k = rng.random()
        if k < 0.35:
            return rng.randint(-10**6, 10**6)
        if k < 0.6:
            return rng.random()
        return "k%d" % rng.randint(0, 10**7)

    def node(depth):
        count[0] += 1
        if depth == 0:
            return atom()
        n = rng.randint(2, 6)
        if rng.random() < 0.5:
            return {("f%d" % i): node(depth - 1) for i in range(n)}
        return [node(depth - 1) for _ in range(n)]

    roots = []
    while count[0] < target:
        roots.append(node(5))
    return roots


WORKLOADS = {
    "state16": lambda: W.build_state(16),
    "state64": lambda: W.build_state(64),
    "state256": lambda: W.build_state(256),
    "nested": nested,
}


def bench(obj, reps, inner):
    a, b = [], []
    pd, sd = pickle.dumps, sertrace.dumps
    assert pd(obj, 5) == sd(obj, 5)
    for _ in range(3):
        pd(obj, 5)
        sd(obj, 5)
    for r in range(reps):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            f = pd if which == 0 else sd
            t = CLOCK()
            for _ in range(inner):
                f(obj, 5)
            (a if which == 0 else b).append((CLOCK() - t) / inner)
    return a, b


def main():
    names = sys.argv[1:] or list(WORKLOADS)
    print("clock=%s DISPATCH_TRACE=%r" % (CLOCK.__name__, os.environ.get("DISPATCH_TRACE")))
    for name in names:
        obj = WORKLOADS[name]()
        size = len(pickle.dumps(obj, 5))
        inner = max(1, int(2e6 // size))
        a, b = bench(obj, int(os.environ.get("REPS", 31)), inner)
        ratios = sorted(y / x for x, y in zip(a, b))
        q = lambda f: ratios[int(f * (len(ratios) - 1))]  # noqa: E731
        print("%-9s %7d B  pickle %8.1f us  sertrace %8.1f us  ratio median %.3f (p25 %.3f p75 %.3f)"
              % (name, size, statistics.median(a) * 1e6, statistics.median(b) * 1e6,
                 statistics.median(ratios), q(0.25), q(0.75)))


if __name__ == "__main__":
    main()
