"""Child process of test_accounting.py: dumps a corpus with sertrace while
the live text tree (DISPATCH_TRACE, exact sizes, atoms too) is written to a
file, and reports every dump on stdout as one JSON line, in dump order:

  {"label", "protocol", "target", "ok", "len", "proto_len", "stop_framed",
   "same_as_pickle", "error"}

proto_len is 2 when the payload opens with PROTO, else 0; stop_framed tells
whether the final STOP opcode sits inside a FRAME (then that frame's 9-byte
header is committed after STOP, outside the root node).  Both are read
from the payload (testlib.payload.shape, tests/lib), never assumed.

Targets: dumps (sertrace.dumps), bytesio (Pickler(BytesIO).dump), pipe
(Pickler on os.pipe's write end, read by a thread) and socket
(Pickler(socketpair()[0].makefile('wb')).dump, read by a thread), and
at protocol 5 oob (dumps with a buffer_callback: PickleBuffers out of band).

    python3 pt_accounting_child.py N_DUMPS N_STREAM [N_BYTESIO]

The graphs are the first N_DUMPS of test_differential.py's corpus (same
seeds); N_STREAM of them (and N_BYTESIO, default all) also go through the
stream targets.
"""

import io
import json
import os
import pickle
import socket
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

import graphgen  # noqa: E402
import pt_types as T  # noqa: E402
import sertrace  # noqa: E402
from testlib import knobs  # noqa: E402
from testlib.payload import shape  # noqa: E402

WORKLOADS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "workloads")
# Tuples sharing one str (a memo reference each): 3,000 in the soak, 1,000
# by default.  The object goes through every target at every protocol (25
# dumps) and its nodes were half of the default trace's lines.
MANY_FRAMES = [("a" * 100, i) for i in range(3000 if knobs.soak() else 1000)]
SEED_STRIDE = 1_000_000  # test_differential.py's seeds: the first graphs of the differential corpus


def _reader(rfile, sink):
    while True:
        chunk = rfile.read(65536)
        if not chunk:
            break
        sink.extend(chunk)


def dump_to(target, obj, p):
    if target == "dumps":
        return sertrace.dumps(obj, p)
    if target == "oob":
        return sertrace.dumps(obj, p, buffer_callback=[].append)
    if target == "bytesio":
        f = io.BytesIO()
        sertrace.Pickler(f, p).dump(obj)
        return f.getvalue()
    sink = bytearray()
    if target == "pipe":
        r, w = os.pipe()
        rfile, wfile = os.fdopen(r, "rb", buffering=0), os.fdopen(w, "wb")
        closers = [wfile]
    elif target == "socket":
        a, b = socket.socketpair()
        wfile, rfile = a.makefile("wb"), b.makefile("rb", buffering=0)
        closers = [wfile, a]
    else:
        raise ValueError(target)
    t = threading.Thread(target=_reader, args=(rfile, sink))
    t.start()
    try:
        sertrace.Pickler(wfile, p).dump(obj)
        wfile.flush()
    finally:
        for c in closers:
            c.close()
        t.join()
        rfile.close()
        if target == "socket":
            b.close()
    return bytes(sink)


def corpus(p, n_dumps, n_stream):
    sys.path.insert(0, WORKLOADS)
    import dispatch_like_state as W

    items = [("workload build_state(%d)" % n, W.build_state(n)) for n in (2, 8)]
    items += [("seed %d" % (p * SEED_STRIDE + i), graphgen.build(p * SEED_STRIDE + i, p))
              for i in range(n_dumps)]
    big = [("big bytes", b"x" * 200_000), ("big list", [b"y" * 70_000, "z" * 70_000, list(range(3000))]),
           ("many frames", MANY_FRAMES)]
    return items + big, (items[:n_stream] + big)


def main():
    n_dumps, n_stream = int(sys.argv[1]), int(sys.argv[2])
    n_bytesio = int(sys.argv[3]) if len(sys.argv) > 3 else n_dumps
    T.add_extensions()
    out = sys.stdout
    for p in range(6):
        full, stream = corpus(p, n_dumps, n_stream)
        bytesio = full if n_bytesio >= n_dumps else full[:n_bytesio] + full[-3:]
        targets = [("dumps", full), ("bytesio", bytesio), ("pipe", stream), ("socket", stream)]
        if p == 5:
            targets.append(("oob", full))
        for target, items in targets:
            for label, obj in items:
                rec = {"label": label, "protocol": p, "target": target}
                try:
                    data = dump_to(target, obj, p)
                except Exception as e:  # noqa: BLE001
                    rec.update(ok=False, error="%s: %s" % (type(e).__name__, e))
                    try:
                        pickle.dumps(obj, p, **({"buffer_callback": [].append} if target == "oob" else {}))
                        rec["pickle_error"] = None
                    except Exception as pe:  # noqa: BLE001
                        rec["pickle_error"] = "%s: %s" % (type(pe).__name__, pe)
                else:
                    proto_len, stop_framed, _ = shape(data)
                    try:
                        kw = {"buffer_callback": [].append} if target == "oob" else {}
                        same = data == pickle.dumps(obj, p, **kw)
                    except Exception:  # noqa: BLE001
                        same = False
                    rec.update(ok=True, len=len(data), proto_len=proto_len, stop_framed=stop_framed,
                               same_as_pickle=same)
                out.write(json.dumps(rec) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
