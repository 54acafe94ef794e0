"""Compare inspect's trees with recorded (live text) trees, for the tests.

flatten_live(dump) and parse_inspect(text) both give, per dump, the list of
nodes in pre-order as (depth, tag class, bytes, edge label); the label is
the text the tree shows after the repr (`['users']`, `[3]`, `.name`,
`(args)`, `{element}`, `[…]` for a hidden key, None for none, schema v5)
and must be equal too; tags that only an import
could tell apart compare as one class (inspect/README.md): T4/F2/G are
"global", O/R are "object", and a node inspect marks with the note
`inspect = getattr(...)` (a nested class or a method, below protocol 4) is
"global|object", equal to either.  A memo reference ("Mo") has a fifth
field, the item count its line shows (`len=N`: its target's, in a
recording and in inspect), compared where inspect shows one (it knows no
count of a reduce-built object, a dict subclass say).
"""
import re

ENTER = re.compile(r"^(│*)(┬|├┬) (\S+): (.*)$")
# "[2 B + 17 B out of band]": a protocol 5 buffer handed to buffer_callback (schema v5)
EXIT = re.compile(r"^(│*)└ # (\S+) \[(?:≥ )?(\d+) B(?: \+ \d+ B out of band)?\](?:  (.*))?$")
NOTE = re.compile(r"^(│*) @ inspect = getattr")
HEADER = re.compile(r"^── dump (\d+) · .* payload (?:\S+ \S+ \()?(\d+) B\)?$")

CLASS = {"T4": "global", "F2": "global", "G": "global", "O": "object", "R": "object"}


def tag_class(tag):
    return CLASS.get(tag, tag)


LEN = re.compile(r" len=(\d+)$")


def mo_len(tag, repr_):
    """(N,) for a memo reference whose repr ends in `len=N`, else ()."""
    m = LEN.search(repr_) if tag == "Mo" else None
    return (int(m.group(1)),) if m else ()


def flatten_live(dump):
    """Pre-order (depth, class, bytes) of a recorded dump, without the nodes
    that wrote no byte (an empty listitems iterator's It): the bytes cannot
    show them."""
    out = []
    stack = [(n, 1) for n in reversed(dump["roots"])]
    while stack:
        n, d = stack.pop()
        if n["bytes"] == 0 and d > 1:
            continue
        tag = tag_class(n["tag"])
        if tag == "Mo" and "PickleBuffer" in n["repr"]:
            tag = "PB"  # a memo hit on an in-band buffer: a bytes one, in the bytes
        out.append((d, tag, n["bytes"], n.get("label")) + mo_len(tag, n["repr"]))
        stack.extend((c, d + 1) for c in reversed(n["children"]))
    return out


def parse_inspect(text):
    """[{"total": N, "nodes": [(depth, class, bytes, label)...]}] from `inspect --tree --exact`."""
    dumps = []
    open_ = []
    last = None
    for line in text.split("\n"):
        m = HEADER.match(line)
        if m:
            dumps.append({"total": int(m.group(2)), "nodes": []})
            open_ = []
            continue
        m = ENTER.match(line)
        if m:
            depth = 1 if m.group(2) == "┬" else len(m.group(1)) + 2
            # "REPR  LABEL": the edge label after two spaces, as the live tree
            repr_, _, label = m.group(4).partition("  ")
            dumps[-1]["nodes"].append([depth, tag_class(m.group(3)), None, label or None]
                                      + list(mo_len(tag_class(m.group(3)), repr_)))
            last = len(dumps[-1]["nodes"]) - 1
            open_.append(last)
            continue
        if NOTE.match(line) and last is not None:
            dumps[-1]["nodes"][last][1] = "global|object"
            continue
        m = EXIT.match(line)
        if m:
            i = open_.pop()
            dumps[-1]["nodes"][i][2] = int(m.group(3))
    for d in dumps:
        d["nodes"] = [tuple(n) for n in d["nodes"]]
    return dumps


REFERENCE_OR_REDUCE = {"global", "object"}


def same_node(live, mine):
    """Same depth and bytes, and the same tag -- except between a global
    and a reduce-built object, which the bytes cannot always tell apart
    (an object whose __reduce__ returns its name is written as a global;
    getattr(Outer, 'name') is a nested class or a method)."""
    if live[0] != mine[0] or live[2] != mine[2]:
        return False
    classes = set(mine[1].split("|"))
    return live[1] in classes or (live[1] in REFERENCE_OR_REDUCE and classes <= REFERENCE_OR_REDUCE)


def exact_tag(live, mine):
    return live[1] in mine[1].split("|")


def label_excuse(live_nodes, i, mine_label):
    """Why a recorded label may differ from inspect's, or None when it may not.

    "non-ascii": a str dict key that is a non-ASCII identifier: the pickler
    shows it (str.isidentifier), inspect hides it ([…], inspect/README.md:
    it does not carry Unicode's identifier tables; hiding is the safe side).
    (No exception for a state setter's obj argument, `setter(obj, state)`:
    both leave that memo reference unlabelled, inspect/README.md.)"""
    live_label = live_nodes[i][3]
    if (mine_label == "[…]" and live_label and live_label.startswith("['")
            and any(ord(c) > 127 for c in live_label)):
        return "non-ascii"
    return None


def first_difference(live_nodes, mine, excused=None):
    """None when the trees are equal, else (index, live node, inspect node).
    Equal means the same nodes (depth, bytes, tag class) with the same
    labels, but for the label differences label_excuse() names, counted
    in `excused` (a dict) when given.

    A PickleBuffer written in band is, in the bytes, the bytes or bytearray
    it holds: a recorded `PB` matches an inspect `BA` or `By` of the same
    depth and bytes, and is skipped when inspect has no node there (a
    bytes-backed buffer inside a container, an atom at default granularity)."""
    i = j = 0
    while i < len(live_nodes) or j < len(mine):
        a = live_nodes[i] if i < len(live_nodes) else None
        b = mine[j] if j < len(mine) else None
        if a is not None and b is not None and len(a) == 5 and len(b) == 4:
            a = a[:4]  # inspect knows no count there (a reduce-built object's): not compared
        if a is not None and b is not None and same_node(a, b):
            if a[3:] != b[3:]:
                why = label_excuse(live_nodes, i, b[3])
                if why is None:
                    return (i, a, b)
                if excused is not None:
                    excused[why] = excused.get(why, 0) + 1
            i, j = i + 1, j + 1
            continue
        if a is not None and a[1] == "PB":
            if b is not None and b[1] in ("BA", "By", "Mo") and a[0] == b[0] and a[2] == b[2]:
                if a[3] != b[3] and label_excuse(live_nodes, i, b[3]) is None:
                    return (i, a, b)
                i, j = i + 1, j + 1
                continue
            if a[0] > 1:
                i += 1
                continue
        return (i, a, b)
    return None


def live_patterns(dump):
    """{pattern: (count, bytes, self bytes)} of a recorded (live text) dump,
    rebuilt from its labels as `report --paths` builds them (pathstats.h):
    the root is its type's short name, positions and dict keys read [*],
    an instance's state ("(state)") has no segment and is no match of its
    own (its self bytes go to its pattern), a node without a label reads
    /?.  None when the root's type cannot be read from its repr."""
    root = dump["roots"][0]
    m = re.match(r"<(?:ref )?(?:class ')?([\w.]+)(?:' | object)", root["repr"])
    if m is None or len(dump["roots"]) != 1:
        return None
    stats = {}

    def walk(n, pattern, state):
        child = 0
        for c in n["children"]:
            if c["bytes"] == 0:
                continue  # no bytes, no node in inspect's tree (flatten_live)
            label = c.get("label")
            c_state = label == "(state)"
            seg = "" if c_state else "/?" if label is None else re.sub(r"\[[^\]]*\]", "[*]", label)
            walk(c, pattern + seg, c_state)
            child += c["bytes"]
        e = stats.setdefault(pattern, [0, 0, 0])
        e[2] += n["bytes"] - child
        if not state:
            e[0] += 1
            e[1] += n["bytes"]

    walk(root, m.group(1).rsplit(".", 1)[-1], False)
    return {k: tuple(v) for k, v in stats.items()}
