"""CMD of test_e2e_scope.py: a traced program with descendants.

Prints one JSON line per dump, {"pid", "len", "who"}, from every process of
the family.  At depth 0 it first prints {"ready": PID} and waits for a line
on stdin (the test makes an unrelated sertrace process dump meanwhile),
then dumps, forks a child that dumps (no exec), runs itself through
subprocess (depth 1, whose own subprocess is depth 2: a grandchild), and
starts a multiprocessing 'spawn' and a 'forkserver' process that dump.
"""

import json
import multiprocessing
import os
import subprocess
import sys

import sertrace


def report(who, payload):
    # one write(2) per line (< PIPE_BUF): lines of the processes never mix
    sys.stdout.flush()
    os.write(1, (json.dumps({"pid": os.getpid(), "len": len(payload), "who": who}) + "\n").encode())


def mp_child(who):
    report(who, sertrace.dumps({"who": who, "items": list(range(7))}))


def main():
    depth = int(sys.argv[1])
    if depth == 0:
        print(json.dumps({"ready": os.getpid()}), flush=True)
        sys.stdin.readline()
    report("depth%d" % depth, sertrace.dumps({"depth": depth, "data": list(range(depth + 3))}))
    if depth == 0:
        pid = os.fork()
        if pid == 0:
            report("forked", sertrace.dumps(["forked", list(range(11))]))
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        for method in ("spawn", "forkserver"):
            p = multiprocessing.get_context(method).Process(target=mp_child, args=(method,))
            p.start()
            p.join()
            assert p.exitcode == 0, (method, p.exitcode)
    if depth < 2:
        subprocess.run([sys.executable, os.path.abspath(__file__), str(depth + 1)], check=True)


if __name__ == "__main__":
    main()
