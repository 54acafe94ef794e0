#!/usr/bin/python3
"""Interleaved A/B runs of babeltrace2 sinks on one trace (bench/sinks).

    /usr/bin/python3 bench/sinks/ab.py --trace DIR --rounds N \
        LABEL=PLUGIN_DIR:SINK[:PARAM,PARAM...] ...

Each round runs every configuration once, in a random order (seeded, a new
permutation each round, so no configuration always follows the same one);
each run's output goes to /dev/null.  Prints, per
configuration, the median CPU time (user+sys of babeltrace2, wait4) and
wall time, the runs, and the median of the per-round CPU ratios to the
first configuration (normally sink.utils.dummy).
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time


def run(cmd):
    with open(os.devnull, "w") as dn:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=dn, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read()
        p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), err.decode(errors="replace")[-2000:]))
    return ru.ru_utime + ru.ru_stime, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("configs", nargs="+")
    a = ap.parse_args()
    confs = []
    for c in a.configs:
        label, spec = c.split("=", 1)
        parts = spec.split(":", 2)
        cmd = ["babeltrace2", "--plugin-path=" + parts[0], "-c", parts[1]]
        if len(parts) > 2 and parts[2]:
            for p in parts[2].split(","):
                cmd += ["-p", p]
        cmd.append(a.trace)
        confs.append((label, cmd))
    cpu = {l: [] for l, _ in confs}
    wall = {l: [] for l, _ in confs}
    rng = random.Random(a.seed)
    for r in range(a.rounds):
        order = confs[:]
        rng.shuffle(order)
        for l, cmd in order:
            c, w = run(cmd)
            cpu[l].append(c)
            wall[l].append(w)
        print("round %d: %s" % (r + 1, "  ".join("%s %.2f" % (l, cpu[l][-1]) for l, _ in confs)),
              flush=True)
    base = confs[0][0]
    print("\n| config | median CPU (s) | CPU runs | CPU ratio (median of per-round) | median wall (s) | wall ratio |")
    print("|---|---|---|---|---|---|")
    for l, _ in confs:
        ratios = [x / y for x, y in zip(cpu[l], cpu[base])]
        wr = [x / y for x, y in zip(wall[l], wall[base])]
        print("| %s | %.2f | %s | %.3f | %.2f | %.3f |" % (
            l, statistics.median(cpu[l]), " ".join("%.2f" % x for x in cpu[l]),
            statistics.median(ratios), statistics.median(wall[l]), statistics.median(wr)))


if __name__ == "__main__":
    main()
