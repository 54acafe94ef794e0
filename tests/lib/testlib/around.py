"""A pickler that writes around its own write path, and a file whose write
cannot be watched: the fixtures of the lower-bound tests (issue 12 item 3),
shared by tests/e2e/bounds_prog.py and tests/pyhook/test_around.py.

    from testlib.around import AroundPickler, Raw, SlotFile
    AroundPickler(SlotFile(), 4).dump({"data": [Raw(b"w" * 200000)]})

AroundPickler (a pickle._Pickler) pickles a Raw as its length, commits the
frame, then writes the Raw's bytes straight to the file, as joblib's
NumpyPickler writes an array's data.  SlotFile has no __dict__, so a tracer
cannot watch its write.  Nothing of sertrace is imported: a traced child
installs its hook first, then imports these.
"""
import io
import pickle


class Raw(bytes):
    """Bytes AroundPickler writes to the file around the pickler."""


class AroundPickler(pickle._Pickler):
    """Writes the data of each Raw straight to the file, as joblib does with arrays."""

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
