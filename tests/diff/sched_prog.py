"""A scheduler-like state for tests/diff (issue 15): a Scheduler holding
coroutine records (name, state, a dict of locals, a list of waiters).
Variant `base`; `grown`: the same state with a new attribute `trace_ctx` (a
one-item dict) on every record; `reordered`: the same state with every dict's insertion
order reversed (the same items).  Pickled with sertrace.dumps at protocol
4 (MEMOIZE: memo opcodes of one size whatever the order); the bytes are
written to OUT when given.  Prints one JSON line: the payload's length and
the number of records."""
import json
import sys

import sertrace

N = 40


class Coroutine:
    pass


class Scheduler:
    pass


def make(variant):
    s = Scheduler()
    s.name = "main-loop"
    s.coros = []
    for i in range(N):
        c = Coroutine()
        items = [("name", "coro-%03d" % i), ("state", ["ready", "waiting"][i % 2]),
                 ("locals", {"x": i, "y": "v%d" % i, "z": [i, i + 1]}),
                 ("waiters", list(range(i % 4)))]
        if variant == "reordered":
            items.reverse()
            items = [(k, dict(reversed(list(v.items()))) if isinstance(v, dict) else v)
                     for k, v in items]
        c.__dict__.update(items)
        if variant == "grown":
            c.trace_ctx = {"id": i}  # a dict: a node of its own, pattern coros[*].trace_ctx
        s.coros.append(c)
    s.stats = {"runs": 1000, "switches": 12345}
    if variant == "reordered":
        s.stats = dict(reversed(list(s.stats.items())))
    return s


variant = sys.argv[1]
payload = sertrace.dumps(make(variant), protocol=4)
if len(sys.argv) > 2:
    with open(sys.argv[2], "wb") as f:
        f.write(payload)
print(json.dumps({"payload": len(payload), "records": N}))
