"""Child of test_inspect_lttng.py, run under `sertrace record`: pickles a
small mixed graph (containers, instances by reduce and by state, a shared
and a recursive object, a class by reference) with sertrace's pickler at
protocols 0 to 5, and writes the payloads, back to back, to OUT.

    python3 lttng_prog.py OUT

Prints one JSON line: {"lengths": [...]} (one payload per protocol)."""
import collections
import datetime
import json
import sys

import sertrace


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a, self.b = [1, 2], "two"


def graph(protocol):
    shared = {"k": [1, 2, 3], "name": "shared"}
    loop = []
    loop.append(loop)
    rec = ([],)
    rec[0].append(rec)
    held = ["h" * 50, [3, 4]]
    owner = Point([collections.OrderedDict(inner="i" * 120), "big" * 100, held], None)
    return {
        "ints": list(range(300)),
        "text": ["s%d" % i for i in range(20)] + ["é" * 40],
        "blob": b"\x00" * 300,
        "points": [Point(i, -i) for i in range(12)],
        # __slots__ without __getstate__: protocol 2 and up only
        "slotted": Slotted() if protocol >= 2 else None,
        "shared": (shared, shared, [shared]),
        "loop": loop,
        "rec": rec,
        "set": {1, 2, 3},
        "frozen": frozenset({"a", "b"}),
        "od": collections.OrderedDict(a=1, b=[2]),
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "cls": Point,
        "nested": [[[[{"deep": (1, 2.5, None, True)}]]]],
        # shared objects for the refs / retained bytes check: a Point whose
        # x holds a dict also reachable from later paths (a memo reference
        # after it), a list referenced from two places after its writing
        "owner": owner,
        "after": (owner.x[0], held, held),
    }


def main():
    lengths = []
    with open(sys.argv[1], "wb") as f:
        for p in range(6):
            data = sertrace.dumps(graph(p), p)
            f.write(data)
            lengths.append(len(data))
    print(json.dumps({"lengths": lengths}))


if __name__ == "__main__":
    main()
