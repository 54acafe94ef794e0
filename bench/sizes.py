#!/usr/bin/env python3
"""Serialized sizes, and where the bytes go, for every bench workload.

1. Payload sizes (protocol 4): C pickle, dill, dill with byref=True,
   cloudpickle (Debian's python3-cloudpickle) and sertrace (whose bytes must
   equal pickle's: checked).  Serializers that refuse a workload show the
   exception type and message.
2. The text tree (DISPATCH_TRACE=<file>, default granularity) of one dump
   of each workload: lines, bytes, deepest indentation.
3. Where the bytes go: one child process, recorded with `sertrace record
   --cmd-only` at every-object granularity (SERTRACE_GRANULARITY=all), dumps
   each workload once with sertrace.dumps and, when the dill hook is built,
   once with dill.dumps traced by sertrace.dill.  `sertrace report --json`
   of that trace gives per dump the bytes by kind (tag) and by type, self
   bytes (a node's bytes minus its children's) summing to the payload.
   Dumps are matched to workloads by order and checked against the payload
   length the child printed.

Usage (normally through bench/run.py):
  /usr/bin/python3 bench/sizes.py [--build DIR] [--out FILE]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

PROTOCOL = 4


def _exc(e):
    msg = str(e).split("\n")[0]
    if len(msg) > 60:
        msg = msg[:57] + "..."
    return "refused (%s: %s)" % (type(e).__name__, msg)


def child_sizes():
    import pickle
    import warnings
    warnings.simplefilter("ignore")  # dill's PicklingWarning about __main__ classes

    import cloudpickle
    import dill

    import sertrace
    import workloads as wl

    out = {"versions": {"dill": dill.__version__,
                        "cloudpickle": getattr(cloudpickle, "__version__", "?")},
           "workloads": {}}
    for name in list(wl.WORKLOADS) + list(wl.SIZE_ONLY):
        obj = wl.build(name)
        row = {"objects": wl.count_objects(obj), "description": wl.DESCRIPTIONS.get(name, "")}
        ref = None
        for label, fn in (("pickle", lambda: pickle.dumps(obj, PROTOCOL)),
                          ("dill", lambda: dill.dumps(obj, PROTOCOL)),
                          ("dill-byref", lambda: dill.dumps(obj, PROTOCOL, byref=True)),
                          ("cloudpickle", lambda: cloudpickle.dumps(obj, PROTOCOL)),
                          ("sertrace", lambda: sertrace.dumps(obj, PROTOCOL))):
            try:
                b = fn()
                row[label] = len(b)
                if label == "pickle":
                    ref = b
                if label == "sertrace":
                    row["sertrace_identical"] = (b == ref)
            except Exception as e:  # refusals are results here
                row[label] = _exc(e)
        out["workloads"][name] = row
    print(json.dumps(out))


def child_text():
    """Runs with DISPATCH_TRACE=<file>: the size of each workload's text tree."""
    import sertrace
    import workloads as wl

    path = os.environ["DISPATCH_TRACE"]
    out = {}
    for name, (_, picklable) in wl.WORKLOADS.items():
        if not picklable:
            continue
        obj = wl.build(name)
        before = os.path.getsize(path) if os.path.exists(path) else 0
        n = len(sertrace.dumps(obj, PROTOCOL))
        with open(path, "rb") as f:
            f.seek(before)
            text = f.read()
        lines = text.count(b"\n")
        depth = max((len(line.decode("utf-8", "replace")) - len(line.decode("utf-8", "replace").lstrip("\u2502"))
                     for line in text.splitlines()), default=0)
        out[name] = {"payload": n, "text_bytes": len(text), "lines": lines, "max_indent": depth}
    print(json.dumps(out))


def child_trace(with_dill):
    """Runs under `sertrace record`: one dump per workload and serializer."""
    import warnings
    warnings.simplefilter("ignore")
    import sertrace
    import workloads as wl

    if with_dill:
        import dill

        import sertrace.dill as sdill
        sdill.install(pure_pickle=False)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    for name, (_, picklable) in list(wl.WORKLOADS.items()) + list(wl.SIZE_ONLY.items()):
        obj = wl.build(name)
        if picklable:
            print(json.dumps({"w": name, "s": "pickle", "len": len(sertrace.dumps(obj, PROTOCOL))}),
                  flush=True)
        if with_dill:
            print(json.dumps({"w": name, "s": "dill", "len": len(dill.dumps(obj, PROTOCOL))}),
                  flush=True)


def trace_breakdown(tools, tmp):
    have_dill_hook = common.run([common.PYTHON, "-c", "import sertrace._pyhook, sertrace.dill"],
                                env=tools.env()).returncode == 0
    trace = os.path.join(tmp, "sizes-trace")
    env = tools.env({"SERTRACE_GRANULARITY": "all"})
    r = common.run([tools.sertrace, "record", "--cmd-only", "-o", trace, "--",
                    common.PYTHON, os.path.abspath(__file__), "--trace-child"]
                   + (["--with-dill"] if have_dill_hook else []), env=env, cwd=tmp)
    if r.returncode != 0:
        return {"error": "sertrace record failed (%d): %s" % (r.returncode, r.stderr[-1500:])}
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    pid = lines[0]["pid"]
    expected = lines[1:]
    rep = common.run([tools.sertrace, "report", "--json", "--top", "20", trace], env=env)
    if rep.returncode != 0:
        return {"error": "sertrace report failed (%d): %s" % (rep.returncode, rep.stderr[-1500:])}
    doc = json.loads(rep.stdout)
    dumps = sorted((d for d in doc["dumps"] if d["pid"] == pid), key=lambda d: d.get("time_ns") or 0)
    out = {"dill_hook": have_dill_hook, "trace_bytes": common.dir_bytes(trace),
           "record_stderr": r.stderr.strip().splitlines()[:3], "dumps": []}
    if len(dumps) != len(expected):
        out["error"] = "trace has %d dumps of pid %d, expected %d" % (len(dumps), pid, len(expected))
    for exp, d in zip(expected, dumps):
        out["dumps"].append({
            "workload": exp["w"], "serializer": exp["s"], "len": exp["len"],
            "payload_bytes": d.get("payload_bytes"), "root_bytes": d.get("root_bytes"),
            "trace_serializer": d.get("serializer"), "nodes": d.get("nodes"),
            "complete": d.get("complete"), "lost": d.get("lost"),
            "by_kind": d.get("by_kind", []), "by_type": d.get("by_type", []),
            "top": d.get("top", [])[:8]})
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child-sizes", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--text-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--with-dill", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_sizes:
        return child_sizes()
    if args.trace_child:
        return child_trace(args.with_dill)
    if args.text_child:
        return child_text()

    tools = common.Tools(args.build)
    tmp = tempfile.mkdtemp(prefix="sertrace-bench-sizes-")
    try:
        common.log("sizes: payload sizes")
        r = common.run([common.PYTHON, os.path.abspath(__file__), "--child-sizes"],
                       env=tools.env(), cwd=tmp)
        if r.returncode != 0:
            raise SystemExit("sizes child failed: " + r.stderr[-3000:])
        result = json.loads(r.stdout.strip().splitlines()[-1])
        common.log("sizes: text tree sizes (DISPATCH_TRACE)")
        r = common.run([common.PYTHON, os.path.abspath(__file__), "--text-child"],
                       env=tools.env({"DISPATCH_TRACE": os.path.join(tmp, "tree.txt")}), cwd=tmp)
        result["text"] = (json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0
                          else {"error": r.stderr[-1000:]})
        common.log("sizes: recording where the bytes go")
        if common.ensure_sessiond():
            result["breakdown"] = trace_breakdown(tools, tmp)
        else:
            result["breakdown"] = {"error": "no lttng-sessiond reachable"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        common.write_json(args.out, result)
    else:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
