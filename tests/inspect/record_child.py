"""Child of test_inspect_trees.py: dump a corpus with sertrace's pickler,
live text tree on (DISPATCH_TRACE=<file>, SERTRACE_EXACT=1, default
granularity), and write every payload, back to back, to one file.

    python3 record_child.py OUT.pkl PROTOCOLS COUNT

prints one JSON line: {"lengths": [...], "labels": [...]} for the dumps
that succeeded, in order (objects pickle refuses end as error dumps in the
text tree and are skipped on both sides).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "pickle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "workloads"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import sertrace  # noqa: E402
import graphgen  # noqa: E402
import pt_types as T  # noqa: E402
import test_differential as D  # noqa: E402


def corpus(protocol, count):
    items = [(label, g) for label, g in D.workload_graphs()]
    try:
        import workloads as W

        for name in sorted(W.WORKLOADS):
            items.append(("bench " + name, W.build(name)))
    except Exception as exc:  # the bench workloads are optional here
        print("bench workloads not loaded: %r" % exc, file=sys.stderr)
    base = protocol * D.SEED_STRIDE
    for s in range(base, base + count):
        items.append(("seed %d" % s, graphgen.build(s, protocol)))
    return items


def main():
    out, protocols, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    T.add_extensions()
    lengths, labels = [], []
    with open(out, "wb") as f:
        for p in [int(c) for c in protocols]:
            for label, obj in corpus(p, count):
                variants = [("dumps", lambda: sertrace.dumps(obj, p))]
                if p == 5:
                    variants.append(("oob", lambda: sertrace.dumps(obj, 5, buffer_callback=lambda b: None)))
                for vname, fn in variants:
                    try:
                        data = fn()
                    except Exception:
                        continue
                    f.write(data)
                    lengths.append(len(data))
                    labels.append("%s p%d %s" % (label, p, vname))
    print(json.dumps({"lengths": lengths, "labels": labels}))


if __name__ == "__main__":
    main()
