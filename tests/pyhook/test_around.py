"""Bytes a pickler writes straight to its file, around its own write path (issue 12, item 3).

joblib's NumpyPickler pickles a small wrapper for each array, then writes the array's data
with `self.file_handle.write(...)`: before, the trace showed a 592 B dump for a 2.9 MB file.
Here a pickle._Pickler subclass does the same with a `Blob`'s bytes, to a real file, a
BytesIO and a pipe, at protocols 2 (no frames) and 4 and 5 (frames committed before the
direct write, as joblib does).  The dump's size must equal the bytes that reached the file,
each Blob's node must cover its data, and the file object must be left as it was (no
instance attribute left behind).  A file whose `write` cannot be watched (no __dict__) gets
an `unwatched` note on its dump and every size of the dump shown as a lower bound ("≥"),
never as exact.
"""
import json
import re

import pytest

import traces

AROUND = r'''
import io, json, os, pickle, sys
import sertrace.dill as sd
sd.install()

class Blob:
    def __init__(self, data):
        self.data = data

class AroundPickler(pickle._Pickler):
    """Writes each Blob's bytes straight to the file, as joblib does with arrays."""
    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.file_handle = file
    def save(self, obj, save_persistent_id=True):
        if type(obj) is Blob:
            pickle._Pickler.save(self, len(obj.data))
            if self.proto >= 4:
                self.framer.commit_frame(force=True)
            half = len(obj.data) // 2
            self.file_handle.write(obj.data[:half])
            self.file_handle.write(memoryview(obj.data)[half:])
            return
        return pickle._Pickler.save(self, obj, save_persistent_id)

obj = {"first": Blob(b"a" * 300000), "rest": [Blob(b"b" * 1000), "tail" * 20, Blob(b"")]}
out = {}
if TARGET == "file":
    path = os.path.join(TMP, "out.bin")
    with open(path, "wb") as f:
        AroundPickler(f, PROTOCOL).dump(obj)
        out["leftover"] = "write" in f.__dict__
    out["payload"] = os.path.getsize(path)
elif TARGET == "bytesio":
    f = io.BytesIO()
    AroundPickler(f, PROTOCOL).dump(obj)
    out["leftover"] = "write" in f.__dict__
    out["payload"] = len(f.getvalue())
else:  # a pipe: no position to read, only the write calls tell
    import threading
    r, w = os.pipe()
    got = []
    t = threading.Thread(target=lambda: got.append(os.fdopen(r, "rb").read()))
    t.start()
    with os.fdopen(w, "wb") as f:
        AroundPickler(f, PROTOCOL).dump(obj)
        out["leftover"] = "write" in f.__dict__
    t.join()
    out["payload"] = len(got[0])
print(json.dumps(out))
'''


def run_around(tmp_path, target, protocol):
    tree = tmp_path / "tree.txt"
    p = traces.run_script(AROUND, {"DISPATCH_TRACE": str(tree), "SERTRACE_EXACT": "1"},
                          TARGET=target, PROTOCOL=protocol, TMP=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), traces.parse_text_tree(tree.read_text())


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("target", ["file", "bytesio", "pipe"])
def test_bytes_written_around_the_path_are_counted(tmp_path, target, protocol):
    out, dumps = run_around(tmp_path, target, protocol)
    assert out["leftover"] is False
    assert len(dumps) == 1
    d = dumps[0]
    total, status = traces.end_bytes(d["end"])
    assert status == "ok"
    assert total == out["payload"]
    blobs = sorted((n["size"] for n in d["nodes"] if "<__main__.Blob object" in n["line"]),
                   reverse=True)
    assert len(blobs) == 3, [n["line"] for n in d["nodes"]]
    # Each node covers its data, plus its length marker (and at most one frame header).
    for size, data in zip(blobs, (300000, 1000, 0)):
        assert data < size <= data + 5 + 9 + 9, (size, data)
    root = d["nodes"][0]
    assert root["size"] < total <= root["size"] + 2 + 9 + 1
    assert not any("unwatched" in f for f in d["flags"])


UNWATCHED = r"""
import json, os, pickle, sys
import sertrace.dill as sd
sd.install()

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from testlib.around import AroundPickler, Raw, SlotFile

out = {}
f = SlotFile()
pickle._Pickler(f, 4).dump({"k": list(range(50))})
out["plain"] = len(f.buf.getvalue())
f = SlotFile()
AroundPickler(f, 4).dump({"k": [Raw(b"x" * 5000)]})
out["around"] = len(f.buf.getvalue())
print(json.dumps(out))
"""

GE = "\u2265 "


def test_a_file_that_cannot_be_watched_gets_lower_bounds(tmp_path):
    """Its sizes cannot be known: every size of the dump is shown as "at least"
    (footer, every node), never as exact, whether or not bytes went around."""
    tree = tmp_path / "tree.txt"
    p = traces.run_script(UNWATCHED, {"DISPATCH_TRACE": str(tree), "SERTRACE_EXACT": "1"})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    text = tree.read_text()
    dumps = traces.parse_text_tree(text)
    assert len(dumps) == 2
    assert text.count("@ unwatched = the file's write could not be watched") == 2
    counted = []
    for d, payload in zip(dumps, (out["plain"], out["around"])):
        m = re.match(r"# end dump \d+: " + GE + r"(\d+) B, ok, sizes are lower bounds$",
                     d["end"])
        assert m, d["end"]
        counted.append(int(m.group(1)))
        assert counted[-1] <= payload
        assert d["nodes"] and all(n["size"] is not None for n in d["nodes"])
    exits = [line for line in text.splitlines() if "\u2514 # " in line]
    assert exits and all("[" + GE in line for line in exits), exits
    # the plain dump wrote through its own path only: the bound is its size
    assert counted[0] == out["plain"]
    # 5000 bytes went around the path: the bound falls short of the file
    assert counted[1] + 5000 <= out["around"], (counted, out)
