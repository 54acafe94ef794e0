"""Shared objects, for test_e2e_paths.py (issue 13 item 5): a State whose
`x` is a list holding a dict `y` and a large str, whose `y` is that same
dict (a memo reference after `x`), and whose `z` is a list written once
and referenced by nothing else.  Pickled with the traced C pickler (or, with the argument `pyhook`, the
pure-Python pickler traced by serializers/pyhook), then
twice more without tracing to give the payload lengths the retained
bytes are checked against:

- `swapped`: the same State with `x` replaced by `y` itself -- what the
  payload is without `x` when everything `x` shares with other paths
  still has to be written (y moves into x's place, and s.y stays one memo
  reference);
- `no_z`: the same State with `z` replaced by None -- z shares nothing,
  so the payload loses its bytes less the 1-byte NONE written instead.

Prints one JSON line: the protocol and the three lengths."""
import json
import pickle
import sys

import sertrace


class State:
    pass


def build(x="x", z="z"):
    y = {"shared": "y" * 300}
    x_list = [y, "x" * 1000]
    s = State()
    s.x = y if x == "y" else x_list
    s.z = None if z is None else ["z" * 200, 7, 8]
    s.y = y
    return s


protocol = int(sys.argv[1])
if sys.argv[2:] == ["pyhook"]:  # the pure-Python pickler, traced by the hook
    import io

    import sertrace.dill

    sertrace.dill.install()
    f = io.BytesIO()
    pickle._Pickler(f, protocol).dump(build())
    payload = f.getvalue()
else:
    payload = sertrace.dumps(build(), protocol=protocol)
swapped = pickle.dumps(build(x="y"), protocol=protocol)
no_z = pickle.dumps(build(z=None), protocol=protocol)
back = pickle.loads(payload)
assert back.x[0] is back.y and back.y == {"shared": "y" * 300}
print(json.dumps({"protocol": protocol, "payload": len(payload), "swapped": len(swapped),
                  "no_z": len(no_z)}))
sys.stdout.flush()
