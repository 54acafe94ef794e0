"""Parser of sertrace's live text tree (DISPATCH_TRACE), for the tests (the one
parser the test folders share; tests/lib/README.md).

Line grammar (format/format.h; header/footer from probes/text.c):
  # sertrace dump ID pid PID tid TID SERIALIZER[ protocol N]
  ┬ TAG: REPR                                  enter, depth 1
  "│"*(d-2) + "├┬ TAG: REPR"                   enter, depth d >= 2
  "│"*(d-1) + "└ # TAG [N B]" [+ "  " FLAGS]   exit, depth d (exact sizes)
  "│"*d + " @ KEY = VALUE"                     note of the node open at d
  "│"*d + " !! TEXT"                           flag of the node open at d
  # end dump ID: N B, ok|error[, unfinished]
  # continued dump ID pid PID tid TID          starts every chunk of a dump
                                               after its first (skipped here)
Dumps nest (a dump started inside a __reduce__ flushes its parent's text
first) and each has its own stack of open nodes.

parse(text) returns the list of dumps in the order they *began*, each a
dict: id, pid, tid, serializer, protocol, total, status, unfinished,
lower_bounds, header and end (the header and footer lines), roots (list of nodes), flags
and notes (lists of (depth, text), every flag and note line of the dump);
a node is a dict: tag, repr, label (its edge label, schema v5, or None), depth, bytes, exit_flags (the exit line's text
after the size, "" when none), flags (texts of its "!!" lines), notes
((key, value) of its "@" lines), lines (its flag and note lines in order,
as (kind, text)), children, line (1-based number).  A flag line written
after the root closed (a failing final write) belongs to the last root.
Malformed or unbalanced input raises TreeError with the line number.

check_stream(lines) checks a trace too big to hold as trees, one dump at a
time; walk(node) visits a tree without recursion.
"""

import re

HEADER = re.compile(r"^# sertrace dump (\d+) pid (\d+) tid (\d+) (\S+)(?: protocol (-?\d+))?$")
CONTINUED = re.compile(r"^# continued dump (\d+) pid (\d+) tid (\d+)$")
# "N B" with SERTRACE_EXACT=1, else "1.2 KiB (1234 B)" from 1 KiB; "≥ " before
# both and ", sizes are lower bounds" after when the serializer could not
# see every byte (sertrace_dump_lower_bounds()).
FOOTER = re.compile(r"^# end dump (\d+): (?:≥ )?(?:[\d.]+ \S+ \((?:≥ )?)?(\d+) B\)?, (ok|error)"
                    r"(, unfinished)?(, sizes are lower bounds)?$")
ENTER = re.compile(r"^(│*)(┬|├┬) (\S+): (.*)$")
# "[≥ N B]": a lower bound (a node a failed dump left open)
# "[2 B + 17 B out of band]": a protocol 5 buffer handed to buffer_callback (schema v5)
EXIT = re.compile(r"^(│*)└ # (\S+) \[(?:≥ )?(\d+) B(?: \+ \d+ B out of band)?\](?:  (.*))?$")
NOTE = re.compile(r"^(│*) @ (.*)$")
FLAG = re.compile(r"^(│*) !! (.*)$")


class TreeError(Exception):
    pass


def parse(text, text_len=False):
    """The dumps of `text`.  text_len=True also gives each dump its
    "text_len": the UTF-8 bytes of its own lines, newlines included (a
    nested dump's lines count for it, not for the dump around it)."""
    dumps = []
    active = []  # stack of dumps being written (nested dumps)
    for n, line in enumerate(text.split("\n"), 1):
        if line == "":
            continue
        if text_len and active and not line.startswith("# sertrace dump "):
            active[-1]["text_len"] += len(line.encode("utf-8")) + 1
        # Only "#" lines can be headers and footers: node lines (nearly all
        # of a big trace) skip those three patterns.
        m = HEADER.match(line) if line[0] == "#" else None
        if m:
            d = {"id": int(m.group(1)), "pid": int(m.group(2)), "tid": int(m.group(3)),
                 "serializer": m.group(4), "protocol": int(m.group(5)) if m.group(5) else None,
                 "roots": [], "stack": [], "flags": [], "notes": [], "line": n, "total": None,
                 "header": line, "end": None}
            if text_len:
                d["text_len"] = len(line.encode("utf-8")) + 1
            dumps.append(d)
            active.append(d)
            continue
        m = CONTINUED.match(line) if line[0] == "#" else None
        if m:
            # One thread's text: the chunk continues the innermost open dump.
            if not active or active[-1]["id"] != int(m.group(1)):
                raise TreeError("line %d: continues dump %s, not the open dump" % (n, m.group(1)))
            continue
        m = FOOTER.match(line) if line[0] == "#" else None
        if m:
            if not active or active[-1]["id"] != int(m.group(1)):
                raise TreeError("line %d: footer of dump %s does not close the open dump" % (n, m.group(1)))
            d = active.pop()
            if d["stack"]:
                raise TreeError("line %d: dump %d ends with %d open nodes" % (n, d["id"], len(d["stack"])))
            d["total"] = int(m.group(2))
            d["status"] = m.group(3)
            d["unfinished"] = bool(m.group(4))
            d["lower_bounds"] = bool(m.group(5))
            d["end"] = line
            del d["stack"]
            continue
        if not active:
            raise TreeError("line %d outside any dump: %r" % (n, line))
        d = active[-1]
        st = d["stack"]
        m = ENTER.match(line)
        if m:
            bars, box = len(m.group(1)), m.group(2)
            depth = 1 if box == "┬" else bars + 2
            if box == "┬" and bars:
                raise TreeError("line %d: root enter with bars" % n)
            if depth != len(st) + 1:
                raise TreeError("line %d: enter at depth %d with %d open" % (n, depth, len(st)))
            # flags, notes, lines: a shared empty tuple until the first one
            # (most nodes have none; a big trace has a million nodes).
            # "REPR  LABEL": the edge label (schema v5) after two spaces
            repr_, _, label = m.group(4).partition("  ")
            node = {"tag": m.group(3), "repr": repr_, "label": label or None,
                    "depth": depth, "bytes": None,
                    "exit_flags": None, "flags": (), "notes": (), "children": [], "line": n,
                    "lines": ()}
            (st[-1]["children"] if st else d["roots"]).append(node)
            st.append(node)
            continue
        m = EXIT.match(line)
        if m:
            depth = len(m.group(1)) + 1
            if not st or depth != len(st):
                raise TreeError("line %d: exit at depth %d with %d open" % (n, depth, len(st)))
            node = st.pop()
            if node["tag"] != m.group(2):
                raise TreeError("line %d: exit tag %s closes %s" % (n, m.group(2), node["tag"]))
            node["bytes"] = int(m.group(3))
            node["exit_flags"] = m.group(4) or ""
            continue
        m = NOTE.match(line) or FLAG.match(line)
        if m:
            depth = len(m.group(1))
            if depth != len(st):
                raise TreeError("line %d: note/flag at depth %d with %d open" % (n, depth, len(st)))
            kind = "notes" if line[len(m.group(1)):].startswith(" @ ") else "flags"
            d[kind].append((depth, m.group(2)))
            owner = st[-1] if st else d["roots"][-1] if kind == "flags" and d["roots"] else None
            if owner is not None:
                owner["lines"] += ((kind, m.group(2)),)
                if kind == "flags":
                    owner["flags"] += (m.group(2),)
                else:
                    key, _, value = m.group(2).partition(" = ")
                    owner["notes"] += ((key, value),)
            continue
        raise TreeError("line %d: not a tree line: %r" % (n, line))
    if active:
        raise TreeError("%d dump(s) never ended (first: %d)" % (len(active), active[0]["id"]))
    return dumps


def walk(node):
    """The nodes of a tree in pre-order.  Iterative: a corpus tree can be
    thousands of levels deep, and on CPython 3.12+ nested generators
    (`yield from` per level) hit the recursion limit long before that."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n["children"]))


def check_stream(lines):
    """Streaming accounting check of a whole text trace, for corpora too big
    to hold as trees: yields one dict per dump in the order dumps *ended*
    (id, total, status, tops: the byte counts of the top-level nodes,
    nodes, problems: node-level violations as strings).  Checks per node:
    balanced enter/exit with matching tags, and bytes >= the sum of its
    children's bytes.  Same grammar as parse(); raises TreeError on lines it
    cannot place."""
    active = []  # [dump dict, stack of [tag, children_bytes, line]]
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if line == "":
            continue
        if line[0] == "#":
            m = HEADER.match(line)
            if m:
                active.append({"id": int(m.group(1)), "pid": int(m.group(2)),
                               "protocol": int(m.group(5)) if m.group(5) else None,
                               "stack": [], "tops": [], "nodes": 0, "problems": []})
                continue
            if CONTINUED.match(line):
                continue
            m = FOOTER.match(line)
            if m:
                if not active or active[-1]["id"] != int(m.group(1)):
                    raise TreeError("line %d: footer of dump %s does not close the open dump"
                                    % (n, m.group(1)))
                d = active.pop()
                if d["stack"]:
                    d["problems"].append("line %d: dump ends with %d open nodes" % (n, len(d["stack"])))
                d["total"] = int(m.group(2))
                d["status"] = m.group(3)
                del d["stack"]
                yield d
                continue
        if not active:
            raise TreeError("line %d outside any dump: %r" % (n, line))
        d = active[-1]
        st = d["stack"]
        m = ENTER.match(line)
        if m:
            depth = 1 if m.group(2) == "┬" else len(m.group(1)) + 2
            if depth != len(st) + 1:
                raise TreeError("line %d: enter at depth %d with %d open" % (n, depth, len(st)))
            st.append([m.group(3), 0, n])
            d["nodes"] += 1
            continue
        m = EXIT.match(line)
        if m:
            depth = len(m.group(1)) + 1
            if not st or depth != len(st):
                raise TreeError("line %d: exit at depth %d with %d open" % (n, depth, len(st)))
            tag, kids, first = st.pop()
            size = int(m.group(3))
            if tag != m.group(2):
                d["problems"].append("line %d: exit tag %s closes %s" % (n, m.group(2), tag))
            if size < kids:
                d["problems"].append("line %d: node %s (line %d) has %d B, its children %d B"
                                     % (n, tag, first, size, kids))
            if st:
                st[-1][1] += size
            else:
                d["tops"].append(size)
            continue
        if NOTE.match(line) or FLAG.match(line):
            continue
        raise TreeError("line %d: not a tree line: %r" % (n, line))
    if active:
        raise TreeError("%d dump(s) never ended (first: %d)" % (len(active), active[0]["id"]))
