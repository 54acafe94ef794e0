"""End to end through a real LTTng session (`sertrace record`, then `sertrace report --json`):
multiprocessing children under every start method, and joblib's arrays (issue 12, items 2, 3).

Children: a program run with `python3 -m sertrace run` maps a function over a Pool, or a
ProcessPoolExecutor, started with fork, spawn or forkserver, or over joblib.Parallel (loky
workers, started by loky's own spawn).  The truth comes from the program
itself: it wraps multiprocessing's Connection._send_bytes (in every process: spawn and
forkserver children import the main module again, fork children inherit it) to log the pid
and length of every pickle that crosses a pipe.  The trace must hold, under each child's own
pid, a complete, exact dump for every result pickle that child sent, and under the parent's
pid one for every task pickle; the results must be right.

joblib: `joblib.dump` of numpy arrays writes each array's data straight to the file.  The
recorded dump's payload must equal the file's size and each array's node must cover its data.

Other programs of this user that load sertrace may be recorded too (`record` without
--cmd-only records every process of the user today): every assertion selects the pids the
program reported.  Needs SERTRACE_BIN (meson test `run-e2e`, suite e2e).
"""
import collections
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

SERTRACE = os.environ.get("SERTRACE_BIN", "")
PY = os.environ.get("SERTRACE_PYTHON", sys.executable)

pytestmark = pytest.mark.skipif(not (SERTRACE and os.path.exists(SERTRACE)),
                                reason="run through meson (SERTRACE_BIN): needs lttng")


def record_and_report(tmp_path, argv, env_extra=None):
    trace = tmp_path / "trace"
    env = dict(os.environ, SERTRACE_PROGRESS="0")
    env.pop("DISPATCH_TRACE", None)
    env.update(env_extra or {})
    name = "pyrun-%d-%d" % (os.getpid(), time.monotonic_ns() % 10**9)
    rec = subprocess.run([SERTRACE, "record", "--name", name, "-o", str(trace), "--"] + argv,
                         capture_output=True, text=True, env=env, timeout=600)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert "0 events discarded" in rec.stderr, rec.stderr
    rep = subprocess.run([SERTRACE, "report", "--json", "--top", "100", str(trace)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert rep.returncode == 0, rep.stderr
    return rec.stdout, json.loads(rep.stdout)


CHILDREN = textwrap.dedent('''
    import concurrent.futures, multiprocessing as mp, multiprocessing.connection as mpc
    import os, sys

    def log_sends():
        """Log (pid, length) of every pickle this process sends through a pipe."""
        if getattr(mpc.Connection._send_bytes, "logged", False):
            return
        send = mpc.Connection._send_bytes
        log = os.environ["SENT_LOG"]

        def logged_send(self, buf):
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, b"%d %d\\n" % (os.getpid(), len(buf)))
            finally:
                os.close(fd)
            return send(self, buf)

        logged_send.logged = True
        mpc.Connection._send_bytes = logged_send

    log_sends()

    def work(x):
        log_sends()  # loky's workers do not import the main module: the task does it
        return (os.getpid(), x, x * x, "r" * (100 + 37 * x))

    if __name__ == "__main__":
        method, kind = sys.argv[1], sys.argv[2]
        ctx = mp.get_context(method)
        if kind == "pool":
            with ctx.Pool(2) as pool:
                results = pool.map(work, range(8), chunksize=1)
        elif kind == "loky":  # joblib.Parallel's default backend: its own spawn
            from joblib import Parallel, delayed
            results = Parallel(n_jobs=2)(delayed(work)(x) for x in range(8))
        else:
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
                results = list(ex.map(work, range(8)))
        print("parent", os.getpid())
        for pid, x, sq, pad in results:
            print("result", pid, x, sq, len(pad))
''')

def dumps_by_pid(doc, pids):
    out = collections.defaultdict(list)
    for d in doc["dumps"]:
        if d["pid"] in pids and d["serializer"] == "pickle":
            out[d["pid"]].append(d)
    return out


@pytest.mark.parametrize("kind", ["pool", "executor"])
@pytest.mark.parametrize("method", [
    "fork", "spawn", "forkserver"])
def test_children_pickles_are_traced_under_their_own_pid(tmp_path, method, kind):
    check_children(tmp_path, method, kind)


def test_joblib_parallel_workers_are_traced_under_their_own_pid(tmp_path):
    check_children(tmp_path, "spawn", "loky")


def check_children(tmp_path, method, kind):
    script = tmp_path / "children.py"
    script.write_text(CHILDREN)
    log = tmp_path / "sent.log"
    out, doc = record_and_report(tmp_path, [PY, "-m", "sertrace", "run", str(script), method,
                                            kind], {"SENT_LOG": str(log)})
    parent = int(next(l.split()[1] for l in out.splitlines() if l.startswith("parent ")))
    results = [tuple(map(int, l.split()[1:])) for l in out.splitlines()
               if l.startswith("result ")]
    # The results are right, and were computed in children.
    assert [(x, sq, pad) for _pid, x, sq, pad in results] == \
        [(x, x * x, 100 + 37 * x) for x in range(8)]
    workers = {pid for pid, *_ in results}
    assert parent not in workers and workers

    sent = collections.defaultdict(list)
    for line in log.read_text().splitlines():
        pid, n = map(int, line.split())
        if n:  # ProcessPoolExecutor's wakeup pipe sends b"": not a pickle (one is >= 2 B)
            sent[pid].append(n)
    assert workers <= set(sent), (workers, set(sent))
    traced = dumps_by_pid(doc, workers | {parent})
    for pid in workers | {parent}:
        mine = traced.get(pid, [])
        assert mine, "no dump recorded under pid %d (%s)" % (pid, "parent" if pid == parent
                                                              else "worker")
        for d in mine:
            assert d["status"] == "ok", d
            # A dump of one atom (Pool's None sentinels) has no node: it is complete
            # (dump_end says no records event was emitted); its payload is compared below.
            assert d["complete"], d
            assert d["root_exact"] or d["nodes"] == 0, d
        # Every pickle this process sent (results from a worker, tasks from the parent)
        # is a recorded dump of this pid with that exact payload.
        missing = collections.Counter(sent[pid]) - collections.Counter(
            d["payload_bytes"] for d in mine)
        assert not missing, (pid, "parent" if pid == parent else "worker", dict(missing))


JOBLIB = textwrap.dedent('''
    import json, os, sys
    import joblib, numpy as np
    arrays = {"a": np.arange(65536, dtype=np.float64),
              "b": np.ones((256, 256), dtype=np.float32),
              "c": np.arange(1000, dtype=np.int16)}
    data = {"arrays": arrays, "meta": {"name": "x", "n": 3}}
    path = sys.argv[1]
    protocol = int(sys.argv[2]) if len(sys.argv) > 2 else None
    joblib.dump(data, path, protocol=protocol)
    back = joblib.load(path)
    print(json.dumps({"pid": os.getpid(), "size": os.path.getsize(path),
                      "nbytes": sorted(int(v.nbytes) for v in arrays.values()),
                      "same": all((back["arrays"][k] == v).all() for k, v in arrays.items())}))
''')


@pytest.mark.parametrize("protocol", [None, 2])
def test_joblib_dump_of_arrays_is_sized_by_what_reached_the_file(tmp_path, protocol):
    script = tmp_path / "jl.py"
    script.write_text(JOBLIB)
    argv = [PY, "-m", "sertrace", "run", str(script), str(tmp_path / "data.joblib")]
    if protocol is not None:
        argv.append(str(protocol))
    out, doc = record_and_report(tmp_path, argv)
    info = json.loads(out)
    assert info["same"] is True
    mine = [d for d in doc["dumps"] if d["pid"] == info["pid"]]
    jl = [d for d in mine if d["serializer"] == "pickle._Pickler"]
    assert len(jl) == 1, [(d["serializer"], d["payload_bytes"]) for d in mine]
    d = jl[0]
    assert d["complete"] and d["status"] == "ok" and d["root_exact"]
    assert d["payload_bytes"] == info["size"]
    nodes = sorted((n for n in d["top"] if n["type"] == "numpy.ndarray" and n["tag"] == "R"),
                   key=lambda n: n["bytes"])
    assert len(nodes) == 3, d["top"]
    for n, nbytes in zip(nodes, info["nbytes"]):
        # The node covers the array's data: the wrapper (a few hundred bytes), the
        # alignment padding (< 16 B) and the data, all of it exact.
        assert n["exact"] is True
        assert nbytes < n["bytes"] < nbytes + 512, (n, nbytes)
        assert n["self"] >= nbytes


CLOUDPICKLE = textwrap.dedent('''
    import json, os
    import cloudpickle

    def make(n):
        table = {i: str(i) * 3 for i in range(n)}
        return lambda k: table.get(k)      # a closure pickled by value

    class Local:
        def __init__(self):
            self.f = make(50)

    payloads = [cloudpickle.dumps(lambda x: x + 1), cloudpickle.dumps(make(200)),
                cloudpickle.dumps(Local(), protocol=5)]
    print(json.dumps({"pid": os.getpid(), "sizes": [len(p) for p in payloads]}))
''')


def test_cloudpickle_dumps_are_recorded_with_their_real_sizes(tmp_path):
    script = tmp_path / "cp.py"
    script.write_text(CLOUDPICKLE)
    out, doc = record_and_report(tmp_path, [PY, "-m", "sertrace", "run", str(script)])
    info = json.loads(out)
    mine = [d for d in doc["dumps"] if d["pid"] == info["pid"]]
    assert [d["payload_bytes"] for d in mine] == info["sizes"]
    for d in mine:
        assert d["complete"] and d["status"] == "ok" and d["root_exact"], d
