#!/usr/bin/env python3
"""Simulation of the memo table (memo.c) under several growth policies.

    /usr/bin/python3 serializers/pickle/memo_sim.py [WORKLOAD ...]

For each workload of bench/workloads.py, the objects pickle memoizes are
taken in insertion order (memo index order) with their real addresses, and
inserted into a table that follows memo_slot_() (pickler.h): hash = address
>> 5, first slot hash & mask, then the perturbed probe i = 5i + perturb + 1,
perturb >>= 5.  Printed per policy: final table size (slots, KiB) and load,
resizes, entries moved by them, bytes cleared, mean probes of an insert,
share of inserts whose first slot was taken, and mean probes of a hit in the
final table.  The addresses are this process's, so the shares move a little
run to run.  README.md "The memo's growth" has the figures.
"""
import io
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import workloads as W  # noqa: E402

MASK64 = (1 << 64) - 1
HASH_SHIFT = 5  # MEMO_HASH_SHIFT
MIN_SIZE = 8  # MEMO_MIN_SIZE


def probe(table, mask, key):
    h = key >> HASH_SHIFT
    i = h & mask
    n = 1
    if table[i] is None or table[i] == key:
        return i, n
    perturb = h
    while True:
        i = (i * 5 + perturb + 1) & MASK64
        n += 1
        j = i & mask
        if table[j] is None or table[j] == key:
            return j, n
        perturb >>= 5


def run(keys, must_grow, grown):
    size, used = MIN_SIZE, 0
    table = [None] * size
    probes = collided = resizes = moved = 0
    cleared = size * 16
    for k in keys:
        i, n = probe(table, size - 1, k)
        probes += n
        collided += n > 1
        table[i] = k
        used += 1
        if must_grow(used, size):
            old, size = table, grown(used, size)
            table = [None] * size
            resizes += 1
            cleared += size * 16
            for o in old:
                if o is not None:
                    table[probe(table, size - 1, o)[0]] = o
                    moved += 1
    hits = sum(probe(table, size - 1, k)[1] for k in keys)
    n = max(1, len(keys))
    return size, used / size, resizes, moved, cleared // 1024, probes / n, collided / n, hits / n


def pow2_above(n):
    size = MIN_SIZE
    while size < n:
        size <<= 1
    return size


POLICIES = {
    "load<2/3 x4 (x2>50k entries), before": (
        lambda u, s: u * 3 >= s * 2, lambda u, s: pow2_above((2 if u > 50000 else 4) * u)),
    "load<=1/2 x4 below 131072 slots, x2": (
        lambda u, s: u * 2 > s, lambda u, s: s * (4 if s < 131072 else 2)),
    "load<=1/2 x4 below 32768 slots, x2 (ours)": (
        lambda u, s: u * 2 > s, lambda u, s: s * (4 if s < 32768 else 2)),
    "load<=1/2 x2": (lambda u, s: u * 2 > s, lambda u, s: s * 2),
    "load<=3/4 x2": (lambda u, s: u * 4 > s * 3, lambda u, s: s * 2),
    "load<=3/4 x4": (lambda u, s: u * 4 > s * 3, lambda u, s: s * 4),
}


def main():
    names = sys.argv[1:] or ["state-16", "state-256", "builtins", "instances", "dataclass-graph",
                             "micro-small-dicts", "micro-tuples", "micro-short-str"]
    for name in names:
        obj = W.build(name)
        p = pickle.Pickler(io.BytesIO(), 4)
        p.dump(obj)
        keys = [k for k, (index, o) in sorted(p.memo.copy().items(), key=lambda kv: kv[1][0])]
        print("== %s: %d entries" % (name, len(keys)))
        for label, (must_grow, grown) in POLICIES.items():
            size, load, resizes, moved, kib, ins, coll, hit = run(keys, must_grow, grown)
            print("  %-42s %7d slots %5d KiB load %.2f resizes %2d moved %6d cleared %5d KiB"
                  "  insert probes %.2f collide %2.0f %%  hit probes %.2f"
                  % (label, size, size * 16 // 1024, load, resizes, moved, kib, ins, coll * 100, hit))


if __name__ == "__main__":
    main()
