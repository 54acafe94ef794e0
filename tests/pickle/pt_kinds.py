"""Does a corpus prefix hold every kind of case?  A tool, not a test.

    cd tests/pickle && /usr/bin/python3 pt_kinds.py [N]   # N: graphs per protocol, default 10000

For each protocol, builds the first N graphs of the differential corpus
(graphgen.build(protocol * 1_000_000 + i, protocol), test_differential.py's
seeds) under a line tracer limited to graphgen.py, and prints how many of
graphgen's lines ran and the seed index at which the last new one first
ran.  Every branch of the generator is a kind of case (an opcode boundary,
a reduce form, a cycle, an unpicklable object ...); the default corpus
(testlib.knobs: 1,000 graphs) must reach that index at every protocol.
Measured for tests/README.md ("Fast tests by default").
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import graphgen  # noqa: E402

SOURCE = graphgen.__file__


def lines_first_seen(protocol, n):
    first, current = {}, [0]

    def local(frame, event, arg):
        if event == "line":
            first.setdefault((frame.f_code.co_name, frame.f_lineno), current[0])
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == SOURCE else None

    sys.settrace(calls)
    try:
        for i in range(n):
            current[0] = i
            graphgen.build(protocol * 1_000_000 + i, protocol)
    finally:
        sys.settrace(None)
    return first


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    worst = 0
    for p in range(6):
        first = lines_first_seen(p, n)
        last = max(first.values())
        worst = max(worst, last)
        where = [k for k, v in first.items() if v == last]
        print("protocol %d: %d lines of graphgen.py ran in %d graphs; the last new one at seed "
              "index %d (%s)" % (p, len(first), n, last, ", ".join("%s:%d" % k for k in where)))
    print("every kind of case is in the first %d graphs of each protocol" % (worst + 1))


if __name__ == "__main__":
    main()
