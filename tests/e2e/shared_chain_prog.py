"""A shared object reached from outside only through another, for
test_e2e_paths.py: root = [x, w] with x = [y, w] and w = [y], y a large
list.  In the payload y is written inside x, w after it inside x (holding
a memo reference to y), and root[1] is a memo reference to w.  Without x,
w is written at root[1] and y inside it: x retains only its own few bytes,
not y (reached from outside through w).  Pickled with the traced C
pickler; prints one JSON line: the payload's length, and that of the same
root with x replaced by None (what the payload is without x)."""
import json
import pickle
import sys

import sertrace


def build(drop_x=False):
    y = ["y" * 2000]
    w = [y]
    x = [y, w]
    return [None if drop_x else x, w]


protocol = int(sys.argv[1])
payload = sertrace.dumps(build(), protocol=protocol)
without_x = pickle.dumps(build(drop_x=True), protocol=protocol)
assert pickle.loads(payload) == build()
print(json.dumps({"payload": len(payload), "without_x": len(without_x)}))
sys.stdout.flush()
