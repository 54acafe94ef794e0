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

import io
import json
import os
import pickle
import sys

import sertrace.dill as sd

sd.install()

RAW = 200000


class Raw(bytes):
    pass


class AroundPickler(pickle._Pickler):
    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.file_handle = file

    def save(self, obj, save_persistent_id=True):
        if type(obj) is Raw:
            pickle._Pickler.save(self, len(obj))
            self.framer.commit_frame(force=True)
            self.file_handle.write(bytes(obj))
            return
        return pickle._Pickler.save(self, obj, save_persistent_id)


class SlotFile:
    """A file-like object without __dict__: its write cannot be watched."""
    __slots__ = ("buf",)

    def __init__(self):
        self.buf = io.BytesIO()

    def write(self, b):
        return self.buf.write(b)


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
