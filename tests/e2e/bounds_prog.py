"""A pickler that writes around its own write path, for test_e2e_bounds.py.

Run by Debian's python3 with the build's `sertrace` package on PYTHONPATH
under `sertrace record`.  AroundPickler (a pickle._Pickler, traced by the
pure-Python pickler hook) writes each Raw's data straight to its file, as
joblib's NumpyPickler writes an array's data.  Two dumps, in this order:

  watched    to a real file: the hook watches the file's write, so the
             trace's payload must equal the file's size, exactly;
  unwatched  to a file object without __dict__ (its write cannot be
             watched): the bytes written around the path are not seen, so
             the trace must show the dump's sizes as lower bounds.

Each dump is reported on stdout as one JSON line {"kind": K, "pid": P,
"size": N, "raw": R}: N the bytes that reached the file, R the bytes of
the Raw written around the path.
"""

import json
import os
import sys

import sertrace.dill as sd

sd.install()

# the pickler and the unwatchable file (tests/lib/testlib/around.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from testlib.around import AroundPickler, Raw, SlotFile  # noqa: E402

RAW = 200000


def obj():
    return {"name": "weights", "data": [Raw(b"w" * RAW), list(range(100))]}


def say(kind, size):
    print(json.dumps({"kind": kind, "pid": os.getpid(), "size": size, "raw": RAW}), flush=True)


path = os.path.join(sys.argv[1], "out.pkl")
with open(path, "wb") as f:
    AroundPickler(f, 4).dump(obj())
say("watched", os.path.getsize(path))
f = SlotFile()
AroundPickler(f, 4).dump(obj())
say("unwatched", len(f.buf.getvalue()))
