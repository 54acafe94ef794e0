"""A traced program that forks, for test_e2e_fork.py.

Run by Debian's python3 with the build's `sertrace` package on PYTHONPATH
under `sertrace record`.  Every dump it makes is reported on stdout as one
JSON line {"pid": P, "tid": T, "len": N}: the process and thread that made
it and len(sertrace.dumps(...)), the payload length the trace must show.

Modes (argv[1]):
  fork          parent dumps, os.fork(), the child dumps, the parent dumps
  pool          a multiprocessing fork-context Pool of 3 workers; a Barrier
                makes 3 different workers take tasks at once, each dumps
  simultaneous  parent and child, after a handshake, each dump big objects
                (several records batches each) at the same moment
  thread        a second thread dumps, then forks; the child (whose only
                thread is a copy of that one) dumps, and so does the parent
  atoms         top-level plain values: None, 5, "x", b"yy", 3.5, True
"""

import json
import multiprocessing
import os
import sys
import threading

import sertrace


def say(obj):
    # one write(2) per line (< PIPE_BUF): lines of parent and child never mix
    os.write(1, (json.dumps(obj) + "\n").encode())


def report(payload):
    say({"pid": os.getpid(), "tid": threading.get_native_id(), "len": len(payload)})


def shape(i, width):
    return {"k%d" % j: [i, j, "s" * (j % 7), (j, float(j))] for j in range(width)}


def mode_fork():
    report(sertrace.dumps(shape(0, 20)))
    pid = os.fork()
    if pid == 0:
        for i in range(4):
            report(sertrace.dumps(shape(i, 10 + i)))
        os._exit(0)
    for i in range(3):
        report(sertrace.dumps(shape(i, 30 + i)))
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


BARRIER = None


def init(barrier):
    global BARRIER
    BARRIER = barrier


def task(i):
    BARRIER.wait()  # three different workers hold a task at once
    payload = sertrace.dumps(shape(i, 5 + i))
    return os.getpid(), threading.get_native_id(), len(payload)


def mode_pool():
    report(sertrace.dumps(shape(0, 40)))
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(3)
    with ctx.Pool(3, initializer=init, initargs=(barrier,)) as pool:
        for pid, tid, n in pool.map(task, range(9), chunksize=1):
            say({"pid": pid, "tid": tid, "len": n})
    report(sertrace.dumps(shape(1, 40)))


def mode_simultaneous():
    big = [shape(i, 60) for i in range(8)]  # ~2,000 nodes: several batches
    report(sertrace.dumps(big))
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(to_parent_w, b"r")
        os.read(to_child_r, 1)
        for i in range(6):
            big[i % 8]["child"] = i
            report(sertrace.dumps(big))
        os._exit(0)
    os.read(to_parent_r, 1)
    os.write(to_child_w, b"g")
    for i in range(6):
        big[i % 8]["parent"] = i
        report(sertrace.dumps(big))
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


def mode_thread():
    report(sertrace.dumps(shape(0, 12)))

    def run():
        report(sertrace.dumps(shape(1, 12)))
        pid = os.fork()
        if pid == 0:
            for i in range(3):
                report(sertrace.dumps(shape(i, 8 + i)))
            os._exit(0)
        report(sertrace.dumps(shape(2, 12)))
        _, status = os.waitpid(pid, 0)
        assert status == 0, status

    t = threading.Thread(target=run)
    t.start()
    t.join()
    report(sertrace.dumps(shape(3, 12)))


def mode_atoms():
    for value in (None, 5, "x", b"yy", 3.5, True, 10**30, ()):
        report(sertrace.dumps(value))


if __name__ == "__main__":
    {"fork": mode_fork, "pool": mode_pool, "simultaneous": mode_simultaneous,
     "thread": mode_thread, "atoms": mode_atoms}[sys.argv[1]]()
