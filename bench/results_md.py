"""bench/RESULTS.md from the benchmark parts' JSON results: the goals and
their verdicts, the tables of every section and the notes that explain a
missed goal.  bench/run.py runs the parts (or reads the JSON an earlier
--raw kept, --from-raw) and calls render(); nothing here measures.
"""

from common import fmt_ratio, human, med, ratio_stats

# Issue 11's speed goals (dormant, tiny, recording, recording_all) and the
# earlier ones that still hold (text, vs_dill_trace, sinks).
GOALS = {
    "dormant": 0.9,
    "tiny": 1.05,
    "recording": 1.2,
    "recording_labels": 1.25,  # issue 13 item 8: default granularity, edge labels on (they always are)
    "recording_all": 1.6,
    "text": 3.0,
    "vs_dill_trace": 25.0,
    "sinks": 1.25,
    "inspect_vs_loads": 1.0,  # issue 14 item 5: inspect --summary at least as fast as pickle.loads
    "inspect_vs_genops": 50.0,  # ... and 50x faster than pickletools.genops
}


# ---------------------------------------------------------------------------
# rendering helpers
# ---------------------------------------------------------------------------


def verdict(value, goal):
    if value is None or value != value:
        return "n/a"
    return "met" if value <= goal else "**missed**"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


METRICS = {"cpu": "samples_cpu_ns", "wall": "samples_ns"}
METRIC_NAMES = {"cpu": "CPU time of the timing process (user + system)",
                "wall": "wall clock (perf_counter_ns)"}


def _per_metric(L, table):
    """Append a table per metric (CPU, then wall), each under its name in
    bold: table(metric, into) gives the table and may fill the dict `into`;
    returns {metric: into}."""
    filled = {}
    for metric in ("cpu", "wall"):
        L.append("**%s**" % METRIC_NAMES[metric])
        L.append("")
        L.append(table(metric, filled.setdefault(metric, {})))
        L.append("")
    return filled


def samples(ov, config, workload, contender, metric="cpu"):
    try:
        return ov["configs"][config]["workloads"][workload][METRICS[metric]][contender]
    except KeyError:
        return None


def pair(ov, config, workload, num, den="pickle", metric="cpu"):
    a = samples(ov, config, workload, num, metric)
    b = samples(ov, config, workload, den, metric)
    if not a or not b:
        return None
    return ratio_stats(a, b)


def ratio_of_ratios(r1, r2):
    """r1 / r2 where each is (median, lo, hi) of paired ratios: (median, lo, hi)."""
    if r1 is None or r2 is None:
        return None
    return (r1[0] / r2[0], r1[1] / r2[2], r1[2] / r2[1])


# ---------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------


def section_sizes(sz):
    if sz is None:
        return "## Serialized size\n\nNot run.\n"
    L = ["## Serialized size versus plain pickle", ""]
    L.append("Protocol 4 (`pickle.DEFAULT_PROTOCOL` on Python 3.11) for every serializer; bytes of "
             "one `dumps()`: pickle, dill and cloudpickle are the totals of `sertrace.compare` "
             "(each equal to that serializer's real `len(dumps())`, checked by compare), dill "
             "with byref=True and sertrace are measured directly. `objects` is a walk of "
             "containers and instance dicts (shared objects once). sertrace must equal pickle "
             "byte for byte (checked: `=` in the sertrace column).")
    L.append("")
    rows = []
    for name, w in sz["workloads"].items():
        def cell(k):
            v = w.get(k)
            return "{:,}".format(v) if isinstance(v, int) else (v or "?")
        p = w.get("pickle")
        d = w.get("dill")
        ratio = ("%.3fx" % (d / p)) if isinstance(p, int) and isinstance(d, int) else "n/a"
        s = cell("sertrace")
        if isinstance(w.get("sertrace"), int):
            s += " (=)" if w.get("sertrace_identical") else " (**differs from pickle**)"
        rows.append(["`%s`" % name, w.get("description", ""), "{:,}".format(w["objects"]),
                     cell("pickle"), cell("dill"), cell("dill-byref"), cell("cloudpickle"), s, ratio])
    L.append(table(["workload", "what", "objects", "pickle (C)", "dill", "dill byref=True",
                    "cloudpickle", "sertrace", "dill / pickle"], rows))
    L.append("")
    L.append("The workload classes and functions live in an importable module (`bench/workloads.py`, "
             "`workloads/dispatch_like_state.py`), as an application's would, so dill and "
             "cloudpickle store them by reference like pickle does and `byref` changes nothing; "
             "they differ where pickle cannot go (the closure variant: functions, code objects "
             "and cells by value) and when the classes live in `__main__` (`instances-main`, "
             "as in a script): dill then stores them by value unless `byref=True`, cloudpickle "
             "stores them by value, pickle and sertrace by reference.")
    L.append("")
    L.append(section_breakdown(sz))
    return "\n".join(L)


def _fmt(v):
    return "{:,}".format(v) if isinstance(v, int) else "–"


def _pct(part, whole):
    return "%.0f%%" % (100.0 * part / whole) if whole else "?"


def _md(name):
    return "`%s`" % name.replace("|", "\\|").replace("`", "'")


def section_breakdown(sz):
    """Where the bytes go and dill against pickle: rendered from the documents of
    `sertrace.compare` and `sertrace diff` that bench/sizes.py kept (no figure is
    computed here; rows are only chosen and ordered)."""
    L = ["### Where the bytes go (`sertrace.compare`)", ""]
    ws = {n: w for n, w in sz.get("workloads", {}).items() if w.get("compare")}
    if not ws:
        L.append("Not available (this run of bench/sizes.py kept no `sertrace.compare` result).")
        return "\n".join(L) + "\n"
    L.append("One `sertrace.compare(obj, protocol=4)` per workload (`bench/sizes.py`), at "
             "every-object granularity (`SERTRACE_GRANULARITY=%s`): pickle, dill and cloudpickle "
             "each traced in the benchmark's process (libsertrace's in-process listener into the "
             "tree core, no LTTng), rows by path pattern (positions and dict keys as `[*]`; bytes "
             "including children) and by type (self bytes: a node's bytes minus its children's, "
             "so a dump's type rows add up to its root). Shares are of the root pattern's bytes "
             "(the payload minus the fixed header and trailer)." % sz.get("granularity", "?"))
    L.append("")
    outcomes = [(n, o) for n, w in ws.items() for o in w["compare"]["serializers"]]
    ok = [(n, o) for n, o in outcomes if o["status"] == "ok"]
    bad = [(n, o) for n, o in outcomes if o["status"] == "mismatch"]
    L.append("Check (by `sertrace.compare` itself): the traced total equals `len(dumps())` for "
             "%d of %d dumps%s." % (len(ok), len(ok) + len(bad), "" if not bad else
                                    " (**sertrace bug:** %s)" % "; ".join(
                                        "%s/%s: %s" % (n, o["name"], ", ".join(o["problems"]))
                                        for n, o in bad)))
    for n, o in outcomes:
        if o["status"] == "refused":
            for r in o["refused"] or [{}]:
                L.append("")
                L.append("%s refuses `%s` (%s): it cannot write the %s `%s` at `%s`%s (%s)." % (
                    o["name"], n, o["error"], r.get("tag", "?"), r.get("type", "?"),
                    r.get("path", "?"), "" if r.get("count", 1) == 1 else
                    " (%d objects)" % r["count"], r.get("message", "?")))
            if o.get("partial"):
                L.append("")
                L.append("%s on `%s` is compared for the rest of the object: its column is "
                         "its partial payload, %s B without %d refused subtrees (each replaced "
                         "by a %d-byte persistent id), not a `len(dumps())`." % (
                             o["name"], n, _fmt(o["partial_bytes"]), o["stand_ins"],
                             o["stand_in_bytes"]))
        elif o["status"] not in ("ok", "mismatch"):
            L.append("")
            L.append("%s on `%s`: %s%s." % (o["name"], n, o["status"],
                                           ": " + o["error"] if o.get("error") else ""))
    L.append("")
    rows = []
    for n, w in ws.items():
        doc = w["compare"]
        if not doc["compared"]:
            continue
        exact = [o["name"] for o in doc["serializers"] if o["status"] == "ok"]
        if not exact:
            continue
        ser = "pickle" if "pickle" in exact else exact[0]
        paths = [r for r in doc["rows"] if r["kind"] == "path" and r["bytes"].get(ser) is not None]
        types = [r for r in doc["rows"] if r["kind"] == "type" and r["bytes"].get(ser) is not None]
        if not paths:
            continue
        root = max(paths, key=lambda r: (r["bytes"][ser], -len(r["name"])))
        whole = root["bytes"][ser]
        below = sorted((r for r in paths if r is not root),
                       key=lambda r: (-r["bytes"][ser], r["name"]))[:3]
        tops = sorted(types, key=lambda r: (-r["bytes"][ser], r["name"]))[:4]
        rows.append(["`%s`" % n, ser, "%s %s B" % (_md(root["name"]), _fmt(whole)),
                     ", ".join("%s %s" % (_md(r["name"]), _pct(r["bytes"][ser], whole))
                               for r in below),
                     ", ".join("%s %s" % (_md(r["name"]), _pct(r["bytes"][ser], whole))
                               for r in tops)])
    L.append(table(["workload", "serializer", "root pattern", "largest patterns below it "
                    "(incl. children)", "largest types (self bytes)"], rows))
    L.append("")
    # dill against pickle: the rows of the same compare results where they differ.
    same = []
    for n, w in ws.items():
        doc = w["compare"]
        if not {"pickle", "dill"} <= set(doc["compared"]):
            continue
        diff = [r for r in doc["rows"] if r["bytes"].get("pickle") != r["bytes"].get("dill")]
        if not diff:
            same.append("`%s`" % n)
            continue
        t = dict(doc["total"], **doc.get("partial_total", {}))
        part = " (pickle's partial payload: its refused subtrees replaced by persistent ids)" \
            if "pickle" in doc.get("partial_total", {}) else ""
        L.append("dill against pickle on `%s` (%s B against %s B%s; cloudpickle %s B): the %d rows "
                 "of `sertrace.compare` where dill and pickle differ, largest difference first%s:"
                 % (n, _fmt(t.get("dill")), _fmt(t.get("pickle")), part, _fmt(t.get("cloudpickle")),
                    len(diff), "" if len(diff) <= 15 else " (the first 15)"))
        L.append("")

        def delta(r):
            return (r["bytes"].get("dill") or 0) - (r["bytes"].get("pickle") or 0)
        diff.sort(key=lambda r: (-abs(delta(r)), r["kind"], r["name"]))
        def pickle_cell(r):
            mark = r.get("marks", {}).get("pickle")
            return "refused" if mark == "refused" else _fmt(r["bytes"].get("pickle")) + (
                " (incl. stand-ins)" if mark == "partial" else "")
        L.append(table(["row", "pickle", "dill", "cloudpickle", "dill − pickle"],
                       [["%s%s" % ("type " if r["kind"] == "type" else "", _md(r["name"])),
                         pickle_cell(r), _fmt(r["bytes"].get("dill")),
                         _fmt(r["bytes"].get("cloudpickle")), "%+d" % delta(r)]
                        for r in diff[:15]]))
        L.append("")
    if same:
        L.append("dill (traced by `sertrace.dill`) and pickle write the same bytes under every path "
                 "pattern and type on: %s." % ", ".join(same))
        L.append("")
    # Where pickle refuses: `sertrace diff` of pickle on the plain state against dill.
    for d in sz.get("diffs", []):
        title = ("What %s adds to serialize `%s` compared with %s on `%s` (`sertrace diff "
                 "--json` of the two payloads" % (d["b_serializer"], d["b"], d["a_serializer"],
                                                  d["a"]))
        if d.get("error"):
            L.append(title + "): not available: %s" % d["error"])
            L.append("")
            continue
        g = d["diff"]["groups"][0] if d["diff"].get("groups") else {"rows": []}
        tot = d["diff"]["total"]
        rws = sorted(g["rows"], key=lambda r: (-abs(r["delta"]), r["kind"], r["name"]))
        L.append(title + "; %s B against %s B, %+d B; %d rows changed%s):" % (
            _fmt(tot["a"]), _fmt(tot["b"]), tot["delta"], len(rws),
            "" if len(rws) <= 15 else ", the 15 largest"))
        L.append("")
        L.append(table(["", "row", d["a_serializer"] + " on " + d["a"],
                        d["b_serializer"] + " on " + d["b"], "Δ"],
                       [[{"new": "[NEW]", "deleted": "[DEL]"}.get(r["status"], ""),
                         "%s%s" % ("type " if r["kind"] == "type" else "", _md(r["name"])),
                         _fmt(r["a"]), _fmt(r["b"]), "%+d" % r["delta"]] for r in rws[:15]]))
        L.append("")
    return "\n".join(L)


def section_overhead(ov):
    if ov is None:
        return "## Overhead\n\nNot run.\n", {}
    L = ["## Overhead: ratios to `pickle.dumps` on the same workload", ""]
    L.append("%d rounds per comparison; each round times `pickle.dumps` and the contender alternately "
             "in the same process (a sample repeats one call until it lasts ≥ %g ms); cells are the "
             "median of the per-round ratios and [min–max]. Protocol %d. Goals: dormant ≤ %.2fx "
             "(every workload, the single-kind lists included); recording at the default "
             "granularity ≤ %.1fx; recording every object ≤ %.1fx; DISPATCH_TRACE to a file "
             "≤ %.0fx; tiny payloads ≤ %.2fx (table below the main one). Every sample is "
             "timed twice: CPU time of the timing process (user + system: trace writes count, other "
             "tenants of this shared 2-vCPU VM do not; the verdicts ✓/✗ use it) and wall clock "
             "(`perf_counter_ns`, which also pays for preemption by other processes, LTTng's "
             "consumer daemon included)."
             % (ov["reps"], ov["target_ms"], ov["protocol"], GOALS["dormant"], GOALS["recording"],
                GOALS["recording_all"], GOALS["text"], GOALS["tiny"]))
    L.append("")
    summary = _per_metric(L, lambda metric, into: _overhead_table(ov, metric, into))
    return _overhead_notes(ov, L), summary


def _overhead_table(ov, metric, summary):
    import workloads as wl
    cols = [("dormant", "sertrace dormant", GOALS["dormant"]),
            ("lttng-default", "recording, LTTng, default granularity", GOALS["recording"]),
            ("lttng-all", "recording, LTTng, every object", GOALS["recording_all"]),
            ("text-file", "DISPATCH_TRACE to a file", GOALS["text"])]
    rows = []
    for name, (_, picklable) in wl.WORKLOADS.items():
        if not picklable:
            continue
        p = (samples(ov, "dormant", name, "pickle", metric)
             or samples(ov, "lttng-default", name, "pickle", metric))
        row = ["`%s`" % name, ("%.2f" % (med(p) / 1e6)) if p else "n/a"]
        for cfg, _, goal in cols:
            st = pair(ov, cfg, name, "sertrace", metric=metric)
            mark = "" if st is None else (" ✓" if st[0] <= goal else " ✗")
            row.append(fmt_ratio(st) + mark)
            if st:
                summary.setdefault(cfg, []).append((name, st[0]))
        rows.append(row)
    out = table(["workload", "pickle ms"] + [c[1] + " (goal ≤ %gx)" % c[2] for c in cols], rows)
    micro = []
    for name in wl.MICRO:
        st = pair(ov, "dormant", name, "sertrace", metric=metric)
        p = samples(ov, "dormant", name, "pickle", metric)
        if st and p:
            micro.append("`%s` %s%s (pickle %.2f ms)" % (
                name, fmt_ratio(st), " ✓" if st[0] <= GOALS["dormant"] else " ✗", med(p) / 1e6))
            summary.setdefault("dormant", []).append((name, st[0]))
    if micro:
        out += ("\n\nDormant sertrace on lists of one kind of object (where the C pickler's own "
                "speed differs from `_pickle`'s; goal ≤ %gx): " % GOALS["dormant"]
                + "; ".join(micro) + ".")
    tiny = []
    for name in getattr(wl, "TINY", {}):
        st = pair(ov, "dormant", name, "sertrace", metric=metric)
        p = samples(ov, "dormant", name, "pickle", metric)
        s_ = samples(ov, "dormant", name, "sertrace", metric)
        if st and p and s_:
            tiny.append(["`%s`" % name, wl.DESCRIPTIONS.get(name, ""), "%.0f" % med(p),
                         "%.0f" % med(s_),
                         fmt_ratio(st) + (" ✓" if st[0] <= GOALS["tiny"] else " ✗")])
            summary.setdefault("tiny", []).append((name, st[0]))
    if tiny:
        out += ("\n\nTiny payloads, dormant, timed over loops of calls (`for _ in r: "
                "dumps(obj, 4)`, 1,000 calls per timed invocation; ns per call, loop included; "
                "goal ≤ %gx):\n\n" % GOALS["tiny"]
                + table(["payload", "what", "pickle ns/call", "sertrace ns/call",
                         "sertrace / pickle"], tiny))
    return out


def section_versions(versions):
    """The overhead tables of the other CPython versions (--also-python)."""
    if not versions:
        return "", {}
    L = ["## Other CPython versions: ratios to that version's `pickle.dumps`", ""]
    L.append("Same method as above, run under each version with its own build directory "
             "(`bench/run.sh --also-python PYTHON=BUILD`): dormant (workloads, single-kind lists, "
             "tiny payloads), and recording into LTTng at both granularities. CPU time; verdicts "
             "against the same goals.")
    L.append("")
    summaries = {}
    for ver, ov in versions.items():
        L.append("### CPython %s" % ver)
        L.append("")
        summary = {}
        for metric in ("cpu", "wall"):
            t = _overhead_table(ov, metric, summary.setdefault(metric, {}))
            if metric == "cpu":
                L.append(t)
                L.append("")
        summaries[ver] = summary
    return "\n".join(L), summaries


def _overhead_notes(ov, L):
    # Recording details.
    det = []
    for cfg in ("lttng-default", "lttng-all", "dill-sertrace-lttng"):
        c = ov["configs"].get(cfg)
        if not c:
            continue
        if "trace_bytes" in c:
            det.append("`%s`: %s recorded in %.0f s of timing, %s events discarded"
                       % (cfg, human(c["trace_bytes"]), c.get("wall_s", 0), c.get("discarded", "?")))
    if det:
        L.append("LTTng sessions: per-UID, channel of 8 × 1 MiB sub-buffers per CPU (as `sertrace "
                 "record`), `sertrace:*`, vpid+vtid contexts, only the timing process tracked; "
                 "started after the child had built and warmed up its workloads. " + "; ".join(det) + ".")
        L.append("")
    foreign = sorted({s for c in ov["configs"].values() for s in c.get("foreign_sessions", [])})
    if foreign:
        L.append("Caveat: other LTTng sessions were active during these runs (%s); when they "
                 "enable `sertrace:*` for every process of the user, the \"dormant\" process was "
                 "recorded into them." % ", ".join("`%s`" % s for s in foreign))
        L.append("")
    for k, v in ov.get("skipped", {}).items():
        L.append("Skipped `%s`: %s" % (k, v.splitlines()[0] if v else ""))
        L.append("")
    return "\n".join(L)


def text_tree_note(sz):
    tx = (sz or {}).get("text") or {}
    if not tx or "error" in tx:
        return ""
    parts = []
    for name, t in tx.items():
        parts.append("`%s` %s lines, %s (%.1fx the payload, %.0f B/line, indentation up to %d)"
                     % (name, "{:,}".format(t["lines"]), human(t["text_bytes"]),
                        t["text_bytes"] / max(1, t["payload"]), t["text_bytes"] / max(1, t["lines"]),
                        t["max_indent"]))
    return ("What DISPATCH_TRACE writes per dump (default granularity, one dump of each "
            "workload): " + "; ".join(parts) + ".\n")


def section_dill(ov):
    L = ["## dill: untraced, dill's own tracer, traced by sertrace", ""]
    L.append("Same method; ratios to `pickle.dumps` (for `closures-*`, which pickle refuses, to "
             "`pickle.dumps` of the plain state of the same size). `dill.detect.trace(file)` is "
             "entered around each dump (its documented context manager, writing the tree to a "
             "file); \"traced by sertrace\" installs `sertrace.dill` around each dump and records "
             "into LTTng, or writes the text tree (`DISPATCH_TRACE=file`). The last columns divide "
             "the traced dump by the untraced dill dump of the same round.")
    L.append("")
    _per_metric(L, lambda metric, into: _dill_table(ov, metric))
    # The 25x goal.
    L.append("### sertrace against dill's tracer on the same graph (goal: ≥ %gx faster)" % GOALS["vs_dill_trace"])
    L.append("")
    L.append("Speed-up = time of `dill.dumps` inside `dill.detect.trace(file)` ÷ time of "
             "`sertrace.dumps` traced, on the same graph, both timed alternately in the same "
             "process (the `text-file` and `lttng-default` runs also time dill's tracer); median of "
             "the per-round ratios [min–max]. For `closures-*` the C pickler refuses the graph, so "
             "the only sertrace path is dill traced by the hook, compared across runs as "
             "(dill.detect.trace / dill) ÷ (dill + sertrace / dill): information, not the goal.")
    L.append("")
    speedups = _per_metric(L, lambda metric, into: _speedup_table(ov, metric, into))
    return "\n".join(L), speedups


def _dill_table(ov, metric):
    import workloads as wl
    rows = []
    for name in wl.WORKLOADS:
        def pr(cfg, num, den="pickle", digits=1):
            return fmt_ratio(pair(ov, cfg, name, num, den, metric), digits)
        rows.append(["`%s`" % name, pr("dill", "dill"), pr("dill", "dill-trace-file"),
                     pr("dill-sertrace-lttng", "dill-sertrace"),
                     pr("dill-sertrace-text", "dill-sertrace"),
                     pr("dill", "dill-trace-file", "dill", 2),
                     pr("dill-sertrace-lttng", "dill-sertrace", "dill", 2),
                     pr("dill-sertrace-text", "dill-sertrace", "dill", 2)])
    return table(["workload", "dill / pickle", "dill.detect.trace(file) / pickle",
                  "dill + sertrace LTTng / pickle", "dill + sertrace text / pickle",
                  "dill.detect.trace / dill", "sertrace LTTng / dill", "sertrace text / dill"], rows)


def _speedup_table(ov, metric, speedups):
    import workloads as wl
    rows = []
    for name, (_, picklable) in wl.WORKLOADS.items():
        if picklable:
            a = pair(ov, "text-file", name, "dill-trace-file", "sertrace", metric)
            b = pair(ov, "lttng-default", name, "dill-trace-file", "sertrace", metric)
        else:
            dtd = pair(ov, "dill", name, "dill-trace-file", "dill", metric)
            a = ratio_of_ratios(dtd, pair(ov, "dill-sertrace-text", name, "dill-sertrace", "dill", metric))
            b = ratio_of_ratios(dtd, pair(ov, "dill-sertrace-lttng", name, "dill-sertrace", "dill", metric))
        for key, v in (("text", a), ("lttng", b)):
            if v:
                speedups.setdefault(key, []).append((name, v[0], picklable))

        def mark(v):
            if v is None or not picklable:
                return "" if v is None else " (info)"
            return " ✓" if v[0] >= GOALS["vs_dill_trace"] else " ✗"
        rows.append(["`%s`" % name, fmt_ratio(a, 1) + mark(a), fmt_ratio(b, 1) + mark(b)])
    return table(["workload", "dill.detect.trace(file) ÷ sertrace DISPATCH_TRACE file",
                  "dill.detect.trace(file) ÷ sertrace recording into LTTng"], rows)


def section_sinks(sk):
    if sk is None:
        return "## Analyzer throughput\n\nNot run.\n", {}
    L = ["## Analyzer throughput and memory", ""]
    if sk.get("error"):
        return "\n".join(L + ["Not available: " + sk["error"], ""]), {}
    traces = sk.get("traces", [])
    if not traces:
        return "\n".join(L + ["No trace.", ""]), {}
    big = traces[-1]
    rec = big.get("nodes") or 0  # per node: a container's record pair, or one atom record
    L.append("Trace: %d dumps of `builtins` at every-object granularity, recorded with `sertrace "
             "record --cmd-only --buffer-size 64M`: %s on disk, %s CTF events (4 KiB record "
             "batches), %s nodes (schema v8: containers as a record pair each, atoms as one "
             "tiny TATOM record each where their fields fit; %s). Each command's output goes to "
             "/dev/null; %d interleaved rounds; wall time, and CPU time and peak RSS from `wait4`. "
             "Goal: each sink's wall time ≤ %.2fx `sink.utils.dummy`'s (the verdict: the default "
             "configurations; with 2+ CPUs the sinks run the tree core on a worker thread beside "
             "babeltrace2's decoding, so their CPU time exceeds their wall time; the "
             "`worker-thread=no` rows are the core inline, what a 1-CPU machine runs)."
             % (big["dumps"], human(big["trace_bytes"]), "{:,}".format(big.get("ctf_events", 0)),
                "{:,}".format(big.get("nodes") or 0),
                (big.get("record_stderr") or ["?"])[0].replace("sertrace: ", ""), sk["reps"],
                GOALS["sinks"]))
    L.append("")
    runs = sk.get("throughput", {})
    dummy = [r["wall_ns"] for r in runs.get("dummy", [])]
    dummy_cpu = [r["cpu_s"] for r in runs.get("dummy", [])]
    rows = []
    summary = {"cpu": {}, "wall": {}}
    for name, rs in runs.items():
        w = [r["wall_ns"] for r in rs]
        c = [r["cpu_s"] for r in rs]
        st = ratio_stats(w, dummy) if dummy else None
        stc = ratio_stats(c, dummy_cpu) if dummy_cpu else None
        m = med(w) / 1e9
        inline = "worker-thread=no" in name
        mark = "" if name == "dummy" or inline or st is None else (
            " ✓" if st[0] <= GOALS["sinks"] else " ✗")
        if name != "dummy" and not inline and st and stc:
            summary["wall"][name] = st[0]
            summary["cpu"][name] = stc[0]
        rows.append(["`%s`" % ("babeltrace2 -c sink.utils.dummy" if name == "dummy" else
                               "sertrace " + name if name.startswith("report") else
                               "babeltrace2 -c sink.sertrace." + name),
                     "%.2f" % m, "%.2f" % med(c), "%.2f" % (rec / med(c) / 1e6) if rec else "?",
                     "%.0f" % (big["trace_bytes"] / med(c) / 1e6),
                     "%.0f" % (med([r["maxrss_kib"] for r in rs]) / 1024),
                     "—" if name == "dummy" else fmt_ratio(st) + mark,
                     "—" if name == "dummy" else fmt_ratio(stc)])
    L.append(table(["command", "wall s", "CPU s", "M nodes/CPU s", "MB/CPU s", "peak RSS MiB",
                    "wall ratio to dummy (verdict)", "CPU ratio to dummy"], rows))
    L.append("")
    for name, err in (sk.get("failed") or {}).items():
        L.append("`%s` failed: %s" % (name, err.strip().splitlines()[-1] if err.strip() else "?"))
        L.append("")
    mem = sk.get("memory", [])
    if mem:
        L.append("Peak RSS (MiB) against trace size (one run each):")
        L.append("")
        names = [n for n in runs]
        rows = []
        for m in mem:
            rows.append([m["dumps"], human(m["trace_bytes"]), "{:,}".format(m.get("nodes") or 0)]
                        + ["%.1f" % (m[n]["maxrss_kib"] / 1024) if n in m else "?" for n in names])
        L.append(table(["dumps", "trace", "nodes"] + names, rows))
        L.append("")
    return "\n".join(L), summary


def parse_bench_sinks(text):
    """CPU and wall ratios to dummy from bench_sinks.py's markdown table (by column name)."""
    out = {"cpu": {}, "wall": {}}
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "sink":
            if header is not None:
                break  # the second table is the realistic trace's (160k events)
            header = cells
            continue
        if not header or not cells[0].startswith("sink.sertrace") or "worker-thread=no" in cells[0]:
            continue
        for i, h in enumerate(header):
            if i < len(cells) and h.startswith("ratio to dummy"):
                key = "cpu" if "CPU" in h else "wall"
                try:
                    out[key][cells[0]] = float(cells[i])
                except ValueError:
                    pass
    return out


def section_verbatim(title, intro, text):
    return "\n".join(["## " + title, "", intro, "", "```", text.strip(), "```", ""])


# ---------------------------------------------------------------------------
# goals
# ---------------------------------------------------------------------------


def worst(pairs):
    return max(pairs, key=lambda p: p[1]) if pairs else None



def roots_growth(roots):
    """'; instance root: N B …' for the other streamed roots (pairs of 10^5 and 10^6 rows of
    bench/inspect_speed.py's memory_probe_roots, in order), RSS per node beyond the mapped input."""
    parts = []
    for a, b in zip(roots[0::2], roots[1::2]):
        dn = b["nodes"] - a["nodes"]
        if dn <= 0:
            continue
        per = (b["maxrss_kb"] - a["maxrss_kb"]) * 1024.0 / dn
        beyond = per - (b["bytes"] - a["bytes"]) / dn
        beyond = beyond if abs(beyond) >= 0.05 else 0.0
        parts.append("%s: %.1f B beyond the input (%.0f → %.0f MiB)"
                     % (a["payload"].rsplit(", 10^", 1)[0], beyond, a["maxrss_kb"] / 1024.0,
                        b["maxrss_kb"] / 1024.0))
    return ("; " + "; ".join(parts) + "; not streamed: POPped calls, state setters' arguments, "
            "more than 8 wraps, `--tree` and the exports (whole by design)"
            if parts else "; other roots not measured")

def inspect_goal_rows(insp):
    """Issue 14 item 5's goals, from bench/inspect_speed.py's JSON."""
    if not insp:
        return [["inspect --summary ≥ %gx pickle.loads" % GOALS["inspect_vs_loads"], "not measured",
                 "n/a", ""]]
    rows = []
    wl = insp["workloads"]
    for key, goal, lim, why in (
            # the goal as the issue states it: inspect --summary's work, in process (its text,
            # not the Python dict of sertrace.inspect, which the next row shows)
            ("loads_over_json", "inspect --summary ≥ %gx pickle.loads (in process: the summary's "
             "text, `_inspect.summary_json`)", GOALS["inspect_vs_loads"], EXPLAIN["inspect_loads"]),
            ("loads_over_inspect", "sertrace.inspect(data) ≥ %gx pickle.loads (in process, the "
             "dict included)", GOALS["inspect_vs_loads"], EXPLAIN["inspect_loads"]),
            ("genops_over_inspect", "inspect --summary ≥ %gx faster than pickletools.genops",
             GOALS["inspect_vs_genops"], EXPLAIN["inspect_genops"])):
        vals = [(n, w[key][0]) for n, w in wl.items() if w.get(key)]
        if not vals:
            rows.append([goal % lim, "not measured", "n/a", ""])
            continue
        lo = min(vals, key=lambda p: p[1])
        ok = sum(1 for _, v in vals if v >= lim)
        rows.append([goal % lim, "slowest `%s` %.2fx; %d of %d workloads" % (lo[0], lo[1], ok, len(vals)),
                     "met" if ok == len(vals) else "**missed**", "" if ok == len(vals) else why])
    mem = insp.get("memory") or []
    if len(mem) == 2:
        dn = mem[1]["nodes"] - mem[0]["nodes"]
        per = (mem[1]["maxrss_kb"] - mem[0]["maxrss_kb"]) * 1024.0 / dn
        # the input file is mapped: its pages are O(payload) by nature, not the emulator's
        beyond = per - (mem[1]["bytes"] - mem[0]["bytes"]) / dn if "bytes" in mem[0] else per
        rows.append(["inspect memory O(depth + memo), not O(payload)",
                     "list root (streamed): %.0f B of RSS per node, %.1f B beyond the mapped input "
                     "(no memo, depth 2; %s → %s nodes: %.0f → %.0f MiB)%s"
                     % (per, beyond, "{:,}".format(mem[0]["nodes"]), "{:,}".format(mem[1]["nodes"]),
                        mem[0]["maxrss_kb"] / 1024.0, mem[1]["maxrss_kb"] / 1024.0,
                        roots_growth(insp.get("memory_roots") or [])),
                     "met for the shapes measured" if abs(beyond) < 8 else "**missed**",
                     EXPLAIN["inspect_memory"]])
    return rows


def section_inspect(insp, text):
    L = ["## sertrace inspect: speed and memory (bench/inspect_speed.py)", ""]
    if not insp:
        L += ["Not measured (bench/inspect_speed.py failed or was not run).", ""]
        return "\n".join(L)
    L += ["Each workload's payload (pickle.dumps at the default protocol) timed %d interleaved "
          "rounds: `loads` is `pickle.loads` (the C unpickler), `inspect` is `sertrace.inspect(data)` "
          "in process (emulator, tree core, summary, the dict), `json` the same without the dict "
          "(`sertrace._inspect.summary_json`: the summary's text, the work of `inspect --summary` / "
          "`--json` once the file is read), `cli --summary` a whole `sertrace inspect --summary FILE` "
          "process, `genops` a `pickletools.genops` walk; a sample is the mean of `calls` calls in a "
          "row (about 10 ms of loads). Ratios per round, median [min–max]." % insp.get("rounds", 0),
          ""]
    L.append(text.strip())
    L.append("")
    return "\n".join(L)


def section_goals(ov_summary, speedups, sink_summary, sinks2=None, versions=None, insp_rows=None):
    L = ["## Goals", ""]
    L.append("Verdicts use the CPU-time ratios (immune to other tenants of the machine); the "
             "wall-clock figure of the same runs follows in parentheses. \"Worst\" is the workload "
             "with the largest median ratio. The exception is the sinks' goal, which is about wall "
             "time: with 2+ CPUs a sink runs the tree core on a worker thread beside "
             "babeltrace2's decoding, so its CPU time (both threads, in parentheses) is larger "
             "than its wall time.")
    L.append("")
    rows = []
    cpu = ov_summary.get("cpu", {})
    wall = ov_summary.get("wall", {})

    def add(goal, cfg, limit, explain_missed, explain_met=""):
        allv = cpu.get(cfg, [])
        w = worst(allv)
        if not w:
            rows.append([goal, "not measured", "n/a", ""])
            return
        ww = dict(wall.get(cfg, [])).get(w[0])
        met = sum(1 for _, v in allv if v <= limit)
        rows.append([goal, "worst `%s` %.2fx (wall %s); %d of %d workloads within"
                     % (w[0], w[1], "%.2fx" % ww if ww else "?", met, len(allv)),
                     "met" if met == len(allv) else "**missed**",
                     explain_met if met == len(allv) else explain_missed])

    add("dormant ≤ %.2fx (workloads and single-kind lists)" % GOALS["dormant"], "dormant",
        GOALS["dormant"], EXPLAIN["dormant"])
    add("tiny payloads, dormant, loops of calls ≤ %.2fx" % GOALS["tiny"], "tiny", GOALS["tiny"],
        EXPLAIN["tiny"])
    add("recording (default granularity) ≤ %.1fx" % GOALS["recording"], "lttng-default",
        GOALS["recording"], EXPLAIN["recording"])
    add("recording (default granularity, edge labels on: issue 13) ≤ %.2fx"
        % GOALS["recording_labels"], "lttng-default", GOALS["recording_labels"],
        EXPLAIN["recording"])
    add("recording (every object) ≤ %.1fx" % GOALS["recording_all"], "lttng-all",
        GOALS["recording_all"], EXPLAIN["recording_all"])
    for label, vsum in (versions or {}).items():
        vcpu, vwall = vsum.get("cpu", {}), vsum.get("wall", {})
        for cfg, goal, name in (("dormant", "dormant", "dormant"), ("tiny", "tiny", "tiny payloads"),
                                ("lttng-default", "recording", "recording (default)"),
                                ("lttng-all", "recording_all", "recording (every object)")):
            allv = vcpu.get(cfg, [])
            lim = GOALS[goal]
            g = "CPython %s: %s ≤ %.2fx" % (label, name, lim)
            if not allv:
                rows.append([g, "not measured", "n/a", ""])
                continue
            w = worst(allv)
            ww = dict(vwall.get(cfg, [])).get(w[0])
            met = sum(1 for _, v in allv if v <= lim)
            rows.append([g, "worst `%s` %.2fx (wall %s); %d of %d within"
                         % (w[0], w[1], "%.2fx" % ww if ww else "?", met, len(allv)),
                         "met" if met == len(allv) else "**missed**",
                         "" if met == len(allv) else EXPLAIN["versions"]])
    add("DISPATCH_TRACE to a file ≤ %.0fx" % GOALS["text"], "text-file", GOALS["text"], EXPLAIN["text"])
    sp_cpu, sp_wall = speedups.get("cpu", {}), speedups.get("wall", {})
    for key, label in (("text", "DISPATCH_TRACE file"), ("lttng", "LTTng recording")):
        vs = [(n, v) for n, v, picklable in sp_cpu.get(key, []) if picklable]
        goal = "≥ %gx faster than dill's tracer (%s)" % (GOALS["vs_dill_trace"], label)
        if not vs:
            rows.append([goal, "not measured", "n/a", ""])
            continue
        lo = min(vs, key=lambda p: p[1])
        lw = {n: v for n, v, _ in sp_wall.get(key, [])}.get(lo[0])
        ok = all(v >= GOALS["vs_dill_trace"] for _, v in vs)
        rows.append([goal, "slowest `%s` %.1fx (wall %s); %d of %d workloads" % (
                         lo[0], lo[1], "%.1fx" % lw if lw else "?",
                         sum(1 for _, v in vs if v >= GOALS["vs_dill_trace"]), len(vs)),
                     "met" if ok else "**missed**", "" if ok else EXPLAIN["vs_dill"]])
    cl = [(n, v) for n, v, picklable in sp_cpu.get("text", []) if not picklable]
    if cl:
        rows.append(["(closure graph: dill + sertrace hook, text, vs dill's tracer)",
                     ", ".join("`%s` %.1fx" % (n, v) for n, v in cl), "see note", EXPLAIN["closures"]])
    sw = sink_summary.get("wall", {}) if sink_summary else {}
    if sw:
        sc = sink_summary.get("cpu", {})
        ok = all(v <= GOALS["sinks"] for v in sw.values())
        rows.append(["sinks' wall time ≤ %.2fx dummy" % GOALS["sinks"],
                     ", ".join("%s %.2fx (CPU %.2fx)" % (k, v, sc.get(k, float("nan")))
                               for k, v in sw.items()),
                     "met" if ok else "**missed**", "" if ok else EXPLAIN["sinks"]])
    else:
        rows.append(["sinks ≤ %.2fx dummy" % GOALS["sinks"], "not measured", "n/a", ""])
    s2 = (sinks2 or {}).get("wall", {})
    if s2:
        c2 = (sinks2 or {}).get("cpu", {})
        ok = all(v <= GOALS["sinks"] for v in s2.values())
        rows.append(["sinks' wall time ≤ %.2fx dummy, 4 M events of small dumps (bench/sinks)"
                     % GOALS["sinks"],
                     ", ".join("`%s` %.2fx (CPU %.2fx)" % (k, v, c2.get(k, float("nan")))
                               for k, v in s2.items()),
                     "met" if ok else "**missed**", "" if ok else EXPLAIN["sinks_small"]])
    rows.extend(insp_rows or [])
    L.append(table(["goal", "measured (median ratio)", "verdict", "why / what would close it"], rows))
    L.append("")
    return "\n".join(L)


# Why a goal is missed and what would close it.  Written from the measurements
# of the runs reported in the final section of bench/README.md; the verdicts
# above are computed, these texts are only shown next to a missed goal.
EXPLAIN = {
    "inspect_loads": "Payloads of many small containers (tuples, small dicts) cost inspect more "
                     "instructions per node than loads, which builds a tuple in a few (but allocates: "
                     "in time they are close). Under callgrind (inspect/instr_bench.py --parts), "
                     "instructions per `sertrace.inspect()` call, main b82e5d6 -> session 12: "
                     "micro-tuples 41.7 M -> 35.5 M (loads 32.6 M), state-16 2.39 M -> 2.29 M "
                     "(loads 1.76 M; ~0.41 M of it the dict built from the summary's text), "
                     "dataclass-graph 78.6 M -> 72.5 M (loads 59.9 M): a str key's label read once, "
                     "tuples of atoms made without their items, LONG_BINGET in the atoms' loop, a "
                     "packed walk (inspect/README.md, Speed and memory). state-16 is a small payload "
                     "with a big summary (its by-type table): with the dict it stays below loads; "
                     "the summary itself, what `inspect --summary` computes, is above it.",
    "inspect_genops": "genops is pure Python (~1 µs an opcode). The emulator's atoms' loop (~30 "
                      "instructions an opcode) takes atoms, MARK, memo PUTs and GETs of atoms (short "
                      "and long keys), small tuples (of atoms without pushing them) and empty "
                      "containers, also in streamed dumps: lists of atoms run 90-110x faster than genops "
                      "(this table). On payloads of instances and nested containers every node still "
                      "costs ~500 instructions outside the emulator (micro-tuples, 40,001 nodes, 35.5 M "
                      "instructions a call at session 12: the emulator 15.2 M, the feeding with the "
                      "streaming walk ahead 9.6 M, the core's placement 4.9 M, the summary's enter and "
                      "exit 5.4 M; inspect/instr_bench.py --parts), while 50x genops leaves 150-220 per "
                      "node: with an exact per-node summary we judge 50x out of reach there "
                      "(`pickle.loads` itself is only 4-10x genops on them, this table). micro-bytes-2k "
                      "(600 opcodes of 2 KiB bytes) is mostly the fixed cost of a call: ~173 K "
                      "instructions (the emulator 49 K; `pickle.loads` 602 K).",
    "inspect_memory": "Met for the roots inspect streams, at every protocol (0-1 guessed from the opcodes "
                      "and checked at STOP): a list, dict or set root, an instance root whose state holds "
                      "big containers, a dict root whose keys come after their big values "
                      "(`{'data': [...]}`), and reduce-built containers being filled (OrderedDict, "
                      "defaultdict, deque, list and dict subclasses: their open `It` node is a level of the "
                      "chain): the emulator feeds the tree core the chain of open containers it reads off "
                      "the stack and drops the finished items, so what grows is the mapped input (per node "
                      "beyond it: about 0 B for every shape measured) plus the memo (48 B a key, 32 B a "
                      "memoized object in the summary). Tuples and calls being built around a big "
                      "container are levels of the chain too, found by a walk ahead in the bytes "
                      "(`([...],)`, `(header, [...])`, REDUCE / NEWOBJ / NEWOBJ_EX of a class, and "
                      "the REDUCEs of set and frozenset at protocols 0-3 and of copyreg._reconstructor "
                      "for list and dict subclasses at protocols 0-1), so are state tuples given to "
                      "BUILD; since session 12 a big tuple or protocol 4+ frozenset (MARK, its items "
                      "on the stack, then TUPLE / FROZENSET) streams too: its finished items are fed "
                      "under a placeholder and taken off the stack (big groups, inspect/README.md). "
                      "A wrong guess drops the dump and reads the pickle again without streaming. "
                      "Still O(nodes): a POPped call or a state setter's arguments around a big "
                      "container, more than 8 tuples and calls wrapping one, a group whose items "
                      "never look finished (read twice, then whole), and `--tree` and the exports, "
                      "which keep the dump whole by design.",
    "dormant": "Not the tracing: with nobody listening sertrace costs one test per node (~1 ns, "
               "`dormant` in the C API cost section). The gap is the C pickler's own speed "
               "against CPython's `_pickle` on the workload named (the single-kind lists locate "
               "it by kind of object); what would close it: profile that workload against "
               "`_pickle` with callgrind (serializers/pickle/ab_bench.py) and match its path.",
    "tiny": "A tiny payload is all fixed cost: argument parsing, the pickler's setup, the "
            "output buffer and the bytes result, plus sertrace_dump_begin()'s check that "
            "nobody listens (~5-15 ns, `dump-begin` in the C API cost section), against "
            "~100-200 ns for the whole `pickle.dumps` call; what would close it: a cheaper "
            "dormant check (one load of LTTng's enabled flag and the DISPATCH_TRACE setting, "
            "no pthread_once) and a smaller fixed path in dumps().",
    "recording": "`state-16` is the smallest and most blob-heavy workload: ~0.1-0.16 ms per dump "
                 "for pickle, whose str and bytes payloads are a memcpy, and ~1,100 nodes at the "
                 "default granularity. In instructions it is now below pickle: under callgrind "
                 "(serializers/pickle/instr_bench.py) 1.87 M -> 1.54 M per dump against pickle's "
                 "1.94 M since this run's code (the memo table kept between dumps() and emptied "
                 "slot by slot; type names and the names of classes and functions saved as "
                 "globals cached across dumps, checked by identity and their held "
                 "`__qualname__`/`__module__`). What the CPU-time ratio shows beyond that is the "
                 "speed of those instructions: callgrind's cache simulation counts 11.4 K "
                 "instruction-cache misses per state-16 dump at the default granularity against "
                 "pickle's 2.1 K (the traced path's code is larger than the 32 KiB L1i; "
                 "serializers/pickle/README.md, Code footprint), on a shared VM whose rounds "
                 "spread widely (see [min-max]). What would close it: a smaller hot path (one "
                 "copy of the savers for the dormant and traced paths, one out-of-line record "
                 "encoder).",
    "recording_all": "Every-object granularity makes every atom (int, float, str, memo reference) a "
                     "node: `builtins` has 98,807 nodes per dump instead of 13,002. Measured this "
                     "run: perf (cpu-clock) puts ~87 % of the extra CPU time in our own saving and "
                     "record-writing code and ~12 % in the channel (liblttng-ust, memmove, kernel); "
                     "the channel's geometry changes nothing within noise (bench/README.md, Channel "
                     "geometry: 2 to 16 MiB per CPU, read timers, per-PID buffers). Records are "
                     "smaller since this run's code (schema v8: an atom is a TATOM of 7-9 bytes "
                     "with no depth and its address relative to one of two bases; `builtins` "
                     "1,268 -> 968 KB of records per dump, state-16 56 -> 47 KB), and a global's "
                     "name is no longer formatted per dump. Callgrind's cache and branch "
                     "simulation (instr_bench.py --sim) per state-16 dump: 1.93 M instructions "
                     "(pickle 1.95 M) but 19.2 K instruction-cache misses (pickle 2.1 K); per "
                     "`builtins` dump 18 K last-level write misses (the records) and 23 K "
                     "indirect-branch mispredicts (pickle 0.03 K). So what remains is not "
                     "instruction count but the traced path's code footprint and its indirect "
                     "branches. What would close it: one copy of the savers for the dormant and "
                     "traced paths (batch_dict, save_child_slow and write_newobj exist twice), one "
                     "out-of-line record encoder, fewer indirect calls per atom.",
    "versions": "The same code paths as on 3.11 (see the goal's row above and its explanation), "
                "measured against that version's own `_pickle`. A dormant ratio at the goal "
                "with rounds reaching below it by 0.2 (see the version's table) is within the "
                "spread of the runs: this run's code takes no more instructions dormant "
                "(3.11, callgrind: `instances` 40.8 M -> 40.5 M per dump).",
    "text": "The text tree is written in full: `dataclass-graph` is 137 levels deep and every line "
            "repeats its indentation (`│` is 3 bytes in UTF-8), so one dump writes ~22 MB of text "
            "for a 352 KB payload (see the text sizes above); `state-16` is blob-heavy, so pickle "
            "is fast (0.09 ms) while its 2,226 lines cost ~100 ns each. What would close it: cap "
            "the drawn indentation (e.g. `│…(depth N)` past 32 levels), and print memo "
            "back-references (`Mo`, 19k of the graph's 54k nodes) as one line, not two.",
    "vs_dill": "`dataclass-graph`: its text tree is ~22 MB per dump (137 levels of "
               "indentation per line, see DISPATCH_TRACE above), so writing the text dominates, "
               "while dill's tracer prints only its dicts and skips the deep list, tuple and "
               "instance levels; capping the drawn indentation would close it. `state-256` sits "
               "at the limit: its 1.4 MB payload is mostly str and bytes, which both picklers "
               "copy at the same speed, so the per-node advantage is diluted; the same cure "
               "(cheaper lines) applies. Recording the same graphs into LTTng meets the goal "
               "(next row).",
    "closures": "Informational: for a graph only dill can serialize, dill's pure-Python pickler "
                "(20-45x pickle untraced) dominates both traced runs, so tracing it through "
                "sertrace can only remove dill's logging cost (~3.4x dill), not reach 25x.",
    "sinks_small": "Measured on a loaded machine (load average 6-7 at the start, see the table at "
                   "the top): the wall-clock ratios spread widely between rounds (their [min-max] "
                   "above), and this trace has no atoms (gen_trace: ENTER/EXIT only), so nothing of "
                   "the ATOM change applies; on a quiet machine (the previous RESULTS.md) these "
                   "sinks measured 1.08-1.20x. The summary sink's per-dump tables and output are "
                   "its gap (`per-dump=no` is within the goal): cheaper per-dump bookkeeping and "
                   "buffered per-dump output would close it.",
    "sinks": "The summary sink is within the goal in this run; the tree sink and `report "
             "--summary` are over, with rounds spreading widely (their [min-max] above: "
             "0.72-1.82x for `report --summary`). In instructions (callgrind, a 10-dump trace "
             "of this kind, `-p worker-thread=no`) the summary sink costs 1.19x the dummy sink "
             "since this run's code (1.23x before: retained bytes looked up once per dump, "
             "inline reference counting, a top-N gate at node exit; analyzers/core/README.md). "
             "What would close it: the same per-node work on the tree sink's path and "
             "measurements on a quiet machine.",
}


# ---------------------------------------------------------------------------
# the document
# ---------------------------------------------------------------------------


def section_apart(apart):
    """The parts measured in runs of their own (`bench/run.sh --only PART --raw
    DIR`, info-PART.json) after the run the header describes: when, on what
    build and under what load, so that figures of two runs are not read as one."""
    rows = []
    for part, i in sorted(apart.items()):
        also = "; also %s" % ", ".join("`%s`" % a for a in i["also_python"]) \
            if i.get("also_python") else ""
        rows.append(["`%s`" % part, i.get("date", "?"), i.get("load", "?"),
                     "%s, %s, commit %s" % (i.get("sertrace", "?"), i.get("tools", "?"),
                                            i.get("commit", "?")),
                     "%s rounds%s%s" % (i.get("reps", "?"), " (--quick)" if i.get("quick") else "",
                                        also)])
    return ("Measured apart: these parts come from runs of their own (`bench/run.sh --only PART "
            "--raw DIR`, then `--from-raw DIR`), not from the run above; their sections and "
            "goal rows are that run's.\n\n"
            + table(["part", "date", "load average at start", "sertrace", "rounds"], rows))


def render(results, parts, versions, verb, info, isolation, quick, elapsed):
    """The text of RESULTS.md: results maps a part to its JSON (None when it
    failed), versions a CPython version to its overhead JSON, verb the verbatim
    sections, info the machine description (machine_info() in run.py)."""
    ov = results.get("overhead")
    ov_text, ov_summary = section_overhead(ov) if "overhead" in parts else ("", {})
    dill_text, speedups = section_dill(ov) if ov else ("", {})
    sk_text, sk_summary = section_sinks(results.get("sinks")) if "sinks" in parts else ("", {})
    head = ["# sertrace benchmark results", "",
            "Generated by `bench/run.sh%s` on %s in %.0f s. Do not edit by hand: rerun the "
            "command (see bench/README.md)." % (" --quick" if quick else "",
                                                 info["date"], elapsed),
            "",
            table(["machine", "value"], [
                ["CPU", "%s, %s logical CPUs" % (info["cpu"], info["cpus"])],
                ["memory", info["memory"]], ["OS", "%s, Linux %s" % (info["os"], info["kernel"])],
                ["load average at start", info["load"]],
                ["LTTng isolation", isolation],
                ["Python", info["python"] + " (`/usr/bin/python3`)"],
                ["dill / cloudpickle", "%s / %s" % (info["dill"], info["cloudpickle"])],
                ["LTTng", info["lttng"]], ["babeltrace2", info["babeltrace2"]],
                ["sertrace", "%s, %s, commit %s" % (info["sertrace"], info["tools"], info["commit"])],
            ]), ""]
    if info.get("apart"):
        head += [section_apart(info["apart"]), ""]
    ver_text, ver_summary = section_versions(versions)
    body = head
    insp_rows = inspect_goal_rows(results.get("inspect")) if "inspect" in results else None
    if ov or sk_summary or insp_rows:
        body.append(section_goals(ov_summary, speedups, sk_summary, results.get("sinks2"),
                                  ver_summary, insp_rows))
    if "sizes" in parts:
        body.append(section_sizes(results.get("sizes")))
    if ov_text:
        body.append(ov_text)
        body.append(text_tree_note(results.get("sizes")))
    if ver_text:
        body.append(ver_text)
    if dill_text:
        body.append(dill_text)
    if sk_text:
        body.append(sk_text)
    if "inspect" in results:
        body.append(section_inspect(results.get("inspect"), results.get("inspect_text") or ""))
    body.extend(verb)
    text = "\n".join(body).rstrip() + "\n"
    return text
