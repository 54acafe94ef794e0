"""Speed of `sertrace inspect` (issue 14 item 5): the summary of a stored
payload, side by side with unpickling it and with walking it.

    /usr/bin/python3 bench/inspect_speed.py --build build [--rounds 7] [--json OUT]

For each workload of bench/workloads.py (and the micro lists), its payload
(pickle.dumps at the default protocol) is timed, interleaved per round
(A B C D A B C D ...; bench/common.py), with:
  - loads:   pickle.loads(payload)                 (CPython's C unpickler)
  - inspect: sertrace.inspect(payload)             (emulator + tree core +
             JSON summary + the dict, in process: what `inspect --json` does
             after reading the file, and the Python objects)
  - json:    sertrace._inspect.summary_json(...)   (the same without the
             dict: the summary's text, as `inspect --json` writes it)
  - cli:     `sertrace inspect --summary FILE`      (a whole process: exec,
             mmap, emulate, text summary; includes ~1-2 ms of process start)
  - genops:  for _ in pickletools.genops(payload)   (the pure-Python walk
             scanners use)
Each sample of a sub-10 ms call is the mean of `calls` calls in a row (the
same count for loads, inspect and json; genops an eighth of it), chosen so
that a sample lasts about 10 ms of loads.
The table gives the median time of each and the paired ratios
loads/inspect and loads/json (>= 1: at least as fast as unpickling) and
genops/inspect (the issue asks >= 50).  Memory: peak RSS of a cli run
(/usr/bin/time), and a probe of flat lists of 10^5 and 10^6 tuples written without a memo: RSS growth per node.
"""
import argparse
import collections
import io
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402
import workloads as W  # noqa: E402


def timed(fn, reps=1):
    """Wall time (ns) of one call of fn, the mean of `reps` calls in a row (a result is dropped
    inside the timing: pickle.loads's objects are freed there)."""
    t = time.perf_counter_ns()
    for _ in range(reps):
        fn()
    return (time.perf_counter_ns() - t) // reps


def reps_for(fn, target_ns=10_000_000):
    """Calls in a row that take about target_ns (a sample of a sub-millisecond call is then
    not one timer reading and one scheduling hiccup)."""
    one = min(timed(fn) for _ in range(3))
    return max(1, min(1000, target_ns // max(one, 1)))


def walk(data):
    for _ in pickletools.genops(data):
        pass


def cli_run(tools, path):
    """Wall time (ns) of one `sertrace inspect --summary PATH`."""
    t = time.perf_counter_ns()
    proc = subprocess.run([tools.sertrace, "inspect", "--summary", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    dt = time.perf_counter_ns() - t
    if proc.returncode != 0:
        raise SystemExit("sertrace inspect failed: %s" % proc.stderr.decode())
    return dt


def cli_maxrss(tools, path):
    """Peak RSS (KiB) of one `sertrace inspect --summary PATH`, by /usr/bin/time: a child's
    ru_maxrss seen from this process would count the pages it had between fork and exec
    (this process's, hundreds of MiB here).  None without /usr/bin/time."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", tools.sertrace, "inspect", "--summary",
                           path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit("sertrace inspect failed: %s" % proc.stderr)
    return int(proc.stderr.strip().splitlines()[-1].split()[1])


def memory_probe(tools, tmp):
    """Peak RSS of `inspect --summary` on flat lists of n small tuples (n = 10^5, 10^6), and on
    the growth per node says whether memory follows the nodes (O(nodes)) or only the depth and
    the memo (the issue's goal).  Written by a Pickler in fast mode (no memo, no PUT): depth 2
    and an empty memo, so O(depth + memo) memory would not grow with n."""
    rows = []
    for label, obj in (("list of 10^5 tuples", [(i, i) for i in range(10 ** 5)]),
                       ("list of 10^6 tuples", [(i, i) for i in range(10 ** 6)])):
        buf = io.BytesIO()
        p = pickle.Pickler(buf, pickle.DEFAULT_PROTOCOL)
        p.fast = True
        p.dump(obj)
        data = buf.getvalue()
        path = os.path.join(tmp, "mem.pkl")
        with open(path, "wb") as f:
            f.write(data)
        rss = cli_maxrss(tools, path)
        if rss is None:
            return []
        rows.append({"payload": label, "bytes": len(data), "nodes": len(obj) + 1, "maxrss_kb": rss})
    return rows


class ProbeState:
    """An instance root for memory_probe_roots (pickled, never loaded)."""


class ProbeList(list):
    """A list subclass for memory_probe_roots (pickled, never loaded): its items are a reduce-built
    object's (an It node)."""


def probe_instance(n):
    s = ProbeState()
    s.name, s.count = "state", n
    s.items = [(i, i) for i in range(n)]
    s.index = {i: [i, i] for i in range(n // 10)}
    return s


def memory_probe_roots(tools, tmp):
    """(stream helper, issue 14 item 5) Peak RSS of `inspect --summary` on the roots streamed
    through their chain of open containers (inspect/README.md "Streaming"): an instance whose
    state dict holds n tuples in a list and n/10 lists in a dict, and {'data': list of n
    tuples}, and (stream2) an OrderedDict root of n tuples and {'data': a list subclass of n
    tuples} (reduce-built objects being filled); (callstream) a tuple-wrapped list `([...],)`
    (a tuple level) and a set of n tuples at protocol 2 (REDUCE of set, a call level);
    (tuplemem) big groups: a tuple of n tuples, a frozenset of n tuples (MARK ... FROZENSET) and
    {'k': tuple of n tuples}; n = 10^5, 10^6, fast-mode Pickler (no memo), the default protocol
    unless the row says.
    Rows as memory_probe's."""
    rows = []
    # nodes: the object, its class and args, the state dict, the list, the tuples, the index
    # dict and its lists; the dict, the list, the tuples
    dflt = pickle.DEFAULT_PROTOCOL
    for label, make, nodes, proto in (
            ("instance root", probe_instance, lambda n: n + n // 10 + 6, dflt),
            ("dict root {'data': [...]}",
             lambda n: {"data": [(i, i) for i in range(n)]}, lambda n: n + 2, dflt),
            # reduce-built objects being filled: the object, its class, its
            # arguments, its It node, the tuples
            ("OrderedDict root",
             lambda n: collections.OrderedDict((i, (i, i)) for i in range(n)),
             lambda n: n + 4, dflt),
            ("dict root {'data': list subclass}",
             lambda n: {"data": ProbeList((i, i) for i in range(n))}, lambda n: n + 5, dflt),
            # a tuple around the list: the tuple, the list, the tuples
            ("tuple root ([...],)", lambda n: ([(i, i) for i in range(n)],), lambda n: n + 2,
             dflt),
            # REDUCE of set: the set, its global, its argument tuple, the list, the tuples
            ("set root, protocol 2", lambda n: set((i, i) for i in range(n)), lambda n: n + 4,
             2),
            # big groups: the tuple (frozenset), the tuples; the dict, the tuple, the tuples
            ("tuple root of tuples", lambda n: tuple((i, i) for i in range(n)), lambda n: n + 1,
             dflt),
            ("frozenset root, protocol 4", lambda n: frozenset((i, i) for i in range(n)),
             lambda n: n + 1, 4),
            ("dict root {'k': tuple}", lambda n: {"k": tuple((i, i) for i in range(n))},
             lambda n: n + 2, dflt)):
        for n in (10 ** 5, 10 ** 6):
            buf = io.BytesIO()
            p = pickle.Pickler(buf, proto)
            p.fast = True
            p.dump(make(n))
            path = os.path.join(tmp, "mem-root.pkl")
            with open(path, "wb") as f:
                f.write(buf.getvalue())
            rss = cli_maxrss(tools, path)
            if rss is None:
                return []
            rows.append({"payload": "%s, 10^%d tuples" % (label, len(str(n)) - 1),
                         "bytes": len(buf.getvalue()), "nodes": nodes(n),
                         "maxrss_kb": rss})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--only", action="append", help="workload name (repeatable)")
    a = ap.parse_args()
    tools = common.Tools(a.build)
    if tools.pythonpath:
        sys.path.insert(0, tools.pythonpath)
    import sertrace
    from sertrace import _inspect

    names = a.only or list(W.WORKLOADS) + list(W.MICRO)
    rows, out = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            name_used = W.PICKLE_STAND_IN.get(name, name)
            if name_used in out:  # a stand-in already measured under its own name
                continue
            obj = W.build(name_used)
            data = pickle.dumps(obj, pickle.DEFAULT_PROTOCOL)
            path = os.path.join(tmp, name + ".pkl")
            with open(path, "wb") as f:
                f.write(data)
            summary = sertrace.inspect(data)
            nodes = summary["totals"]["nodes"]
            t = {"loads": [], "inspect": [], "json": [], "cli": [], "genops": []}
            # the summary's text, as `inspect --json` writes it, without the dict
            as_json = lambda: _inspect.summary_json(data, 10, 0, 0.0, 1 << 30)  # noqa: E731
            reps = reps_for(lambda: pickle.loads(data))
            for _ in range(a.rounds):
                t["loads"].append(timed(lambda: pickle.loads(data), reps))
                t["inspect"].append(timed(lambda: sertrace.inspect(data), reps))
                t["json"].append(timed(as_json, reps))
                t["cli"].append(cli_run(tools, path))
                t["genops"].append(timed(lambda: walk(data), max(1, reps // 8)))
            rss = cli_maxrss(tools, path)
            r1 = common.ratio_stats(t["loads"], t["inspect"])
            r3 = common.ratio_stats(t["loads"], t["json"])
            r2 = common.ratio_stats(t["genops"], t["inspect"])
            rows.append((name_used, common.human(len(data)), nodes, reps, common.fmt_ms(t["loads"]),
                         common.fmt_ms(t["inspect"]), common.fmt_ms(t["json"]), common.fmt_ms(t["cli"]),
                         common.fmt_ms(t["genops"]), common.fmt_ratio(r1), common.fmt_ratio(r3),
                         common.fmt_ratio(r2, 0)))
            out[name_used] = {"bytes": len(data), "nodes": nodes, "reps": reps, "ns": t,
                              "loads_over_inspect": r1, "loads_over_json": r3,
                              "genops_over_inspect": r2, "cli_maxrss_kb": rss}
            common.log("%s done" % name_used)
        memory = memory_probe(tools, tmp)
        memory_roots = memory_probe_roots(tools, tmp)
    print("Payloads: pickle.dumps at protocol %d; %d rounds; medians in ms; ratios per round, "
          "median [min–max]; %s." % (pickle.DEFAULT_PROTOCOL, a.rounds, tools.describe()))
    print()
    print("| workload | payload | nodes | calls | loads | inspect | json | cli --summary | genops "
          "| loads/inspect | loads/json | genops/inspect |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % r)
    print()
    print("Memory: peak RSS of `sertrace inspect --summary FILE` (the whole process, input mapped).")
    print()
    print("| payload | bytes | nodes | peak RSS |")
    print("|---|---|---|---|")
    for m in memory:
        print("| %s | %s | %d | %.1f MiB |" % (m["payload"], common.human(m["bytes"]), m["nodes"],
                                              m["maxrss_kb"] / 1024.0))
    if len(memory) == 2:
        dn = memory[1]["nodes"] - memory[0]["nodes"]
        drss = (memory[1]["maxrss_kb"] - memory[0]["maxrss_kb"]) * 1024.0
        dinput = memory[1]["bytes"] - memory[0]["bytes"]
        print()
        print("Growth: %.1f B of RSS per node, %.1f B of it the mapped input's pages (%.1f B a "
              "node beyond them: O(nodes) when well above 0; O(depth + memo) would not grow: no "
              "memo, depth 2)." % (drss / dn, dinput / dn, (drss - dinput) / dn))
    if memory_roots:
        print()
        print("Roots streamed through their open containers (instance, dict with a big value, "
              "reduce-built objects being filled, a tuple and a call being built around a list, "
              "big tuples and frozensets):")
        print()
        print("| payload | bytes | nodes | peak RSS |")
        print("|---|---|---|---|")
        for m in memory_roots:
            print("| %s | %s | %d | %.1f MiB |" % (m["payload"], common.human(m["bytes"]), m["nodes"],
                                                  m["maxrss_kb"] / 1024.0))
    if a.json:
        common.write_json(a.json, {"workloads": out, "memory": memory, "memory_roots": memory_roots,
                                   "rounds": a.rounds, "tools": tools.describe()})


if __name__ == "__main__":
    main()
