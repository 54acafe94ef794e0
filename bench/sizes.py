#!/usr/bin/env python3
"""Serialized sizes, and where the bytes go, for every bench workload.

1. Payload sizes (protocol 4): pickle, dill and cloudpickle from
   `sertrace.compare` (each serializer traced in-process; its total is its
   real `len(dumps())`, checked by compare itself; a refusal comes with the
   refused subtree's path and message), plus dill with byref=True and
   sertrace.dumps (whose bytes must equal pickle's: checked).
2. The text tree (DISPATCH_TRACE=<file>, default granularity) of one dump
   of each workload: lines, bytes, deepest indentation.
3. Where the bytes go, and dill against pickle: the rows of the same
   `sertrace.compare` call (bytes per path pattern and per type, one
   column per serializer), at every-object granularity
   (SERTRACE_GRANULARITY=all in the child); and, for a workload pickle
   refuses, `sertrace diff --json` of pickle's bytes of the plain state
   against dill's of the closure variant (DIFFS).  The benchmark computes
   no figure of its own here: bench/run.py renders these documents.

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


# (workload B, its serializer, workload A, its serializer): `sertrace diff A B` on the
# pickle bytes, for a workload one serializer refuses: what dill adds to the closure
# variant against pickle on the same state without closures.
DIFFS = [("closures-64", "dill", "state-64", "pickle")]


def _compare_doc(result):
    """What RESULTS.md needs of a sertrace.compare result: its JSON document."""
    return json.loads(result.json())


def child_sizes(outdir):
    import pickle
    import warnings
    warnings.simplefilter("ignore")  # dill's PicklingWarning about __main__ classes

    import cloudpickle
    import dill

    import sertrace
    import workloads as wl

    out = {"versions": {"dill": dill.__version__,
                        "cloudpickle": getattr(cloudpickle, "__version__", "?")},
           "granularity": os.environ.get("SERTRACE_GRANULARITY", "containers"),
           "workloads": {}, "payload_files": {}}
    wanted = {(w, s) for b, sb, a, sa in DIFFS for w, s in ((b, sb), (a, sa))}
    for name in list(wl.WORKLOADS) + list(wl.SIZE_ONLY):
        obj = wl.build(name)
        row = {"objects": wl.count_objects(obj), "description": wl.DESCRIPTIONS.get(name, "")}
        doc = _compare_doc(sertrace.compare(obj, protocol=PROTOCOL))
        row["compare"] = doc
        for o in doc["serializers"]:
            if o["status"] == "ok":
                row[o["name"]] = o["bytes"]
            elif o["status"] == "refused":
                row[o["name"]] = _refused(o["error"])
            else:
                row[o["name"]] = o["status"]
        for label, fn in (("dill-byref", lambda: dill.dumps(obj, PROTOCOL, byref=True)),
                          ("sertrace", lambda: sertrace.dumps(obj, PROTOCOL))):
            try:
                b = fn()
                row[label] = len(b)
                if label == "sertrace":
                    row["sertrace_identical"] = (b == pickle.dumps(obj, PROTOCOL))
            except Exception as e:  # refusals are results here
                row[label] = _exc(e)
        for ser in ("pickle", "dill"):
            if (name, ser) in wanted and isinstance(row.get(ser), int):
                path = os.path.join(outdir, "%s.%s.pkl" % (name, ser))
                with open(path, "wb") as f:
                    f.write((pickle if ser == "pickle" else dill).dumps(obj, PROTOCOL))
                out["payload_files"]["%s/%s" % (name, ser)] = path
        out["workloads"][name] = row
    print(json.dumps(out))


def _refused(error):
    msg = error.split("\n")[0]
    if len(msg) > 60:
        msg = msg[:57] + "..."
    return "refused (%s)" % msg


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


def diffs(tools, files):
    """`sertrace diff --json A B` for each of DIFFS whose two payloads were written."""
    out = []
    for b, sb, a, sa in DIFFS:
        fa, fb = files.get("%s/%s" % (a, sa)), files.get("%s/%s" % (b, sb))
        entry = {"a": a, "a_serializer": sa, "b": b, "b_serializer": sb}
        if not fa or not fb:
            entry["error"] = "a payload is missing (refused?)"
        else:
            r = common.run([tools.sertrace, "diff", "--json", fa, fb], env=tools.env())
            if r.returncode != 0:
                entry["error"] = "sertrace diff failed (%d): %s" % (r.returncode, r.stderr[-1000:])
            else:
                entry["diff"] = json.loads(r.stdout)
        out.append(entry)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("SERTRACE_BENCH_BUILD"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child-sizes", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--text-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_sizes:
        return child_sizes(args.child_sizes)
    if args.text_child:
        return child_text()

    tools = common.Tools(args.build)
    tmp = tempfile.mkdtemp(prefix="sertrace-bench-sizes-")
    try:
        common.log("sizes: payload sizes and where the bytes go (sertrace.compare)")
        r = common.run([common.PYTHON, os.path.abspath(__file__), "--child-sizes", tmp],
                       env=tools.env({"SERTRACE_GRANULARITY": "all"}), cwd=tmp)
        if r.returncode != 0:
            raise SystemExit("sizes child failed: " + r.stderr[-3000:])
        result = json.loads(r.stdout.strip().splitlines()[-1])
        common.log("sizes: text tree sizes (DISPATCH_TRACE)")
        r = common.run([common.PYTHON, os.path.abspath(__file__), "--text-child"],
                       env=tools.env({"DISPATCH_TRACE": os.path.join(tmp, "tree.txt")}), cwd=tmp)
        result["text"] = (json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0
                          else {"error": r.stderr[-1000:]})
        common.log("sizes: what dill adds where pickle refuses (sertrace diff)")
        result["diffs"] = diffs(tools, result.pop("payload_files", {}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return common.emit_json(args.out, result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
