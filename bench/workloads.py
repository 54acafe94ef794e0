"""Benchmark workloads: the object graphs every benchmark in bench/ serializes.

Each workload is built by a function of this module (importable, so classes
and functions here are pickled by reference, as an application's would be):

  builtins        nested built-in containers, ~93k objects, 5.2k dicts
                  (modelled on workload (a) of dill's tracer study: only
                  dicts show in dill's trace, everything else is folded)
  instances       ~3k ordinary class instances, each holding a dataclass
                  instance, a dict and a list (workload (b) of that study)
  state-N         the scheduler-state stand-in (workloads/dispatch_like_state.py)
                  with N coroutines, N in STATE_SIZES
  closures-N      the same state with a closure cell, a nested function and a
                  lambda on a coroutine's stack: pickle (and sertrace, its
                  byte-identical twin) refuse it, dill and cloudpickle accept it
  dataclass-graph a graph of dataclass nodes and edges (regular, slots and
                  frozen dataclasses, cycles through shared references)

WORKLOADS maps a name to (builder, picklable_by_pickle).  Builders are
deterministic (fixed seeds), so sizes are reproducible run to run.
"""

import os
import random
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "workloads"))
import dispatch_like_state as dls  # noqa: E402  (path set just above)

STATE_SIZES = (16, 64, 256)
CLOSURE_SIZE = 64


# ---------------------------------------------------------------------------
# (a) nested built-in containers
# ---------------------------------------------------------------------------


def build_builtins(n_records: int = 2600, seed: int = 7) -> Dict[str, Any]:
    """Dicts of lists of dicts of atoms: ~36 objects and 2 dicts per record."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    records = []
    for i in range(n_records):
        records.append({
            "id": i,
            "name": "user-%05d" % i,
            "active": i % 3 != 0,
            "score": rng.random(),
            "tags": [rng.choice(words) for _ in range(3)],
            "coords": (rng.uniform(-90, 90), rng.uniform(-180, 180)),
            "history": [rng.randrange(1000) for _ in range(8)],
            "attrs": {"level": rng.randrange(10), "group": words[i % 8],
                      "parent": i // 10 if i >= 10 else None, "ratio": i / 7.0},
        })
    return {"version": 3, "kind": "users", "records": records}


# ---------------------------------------------------------------------------
# (b) class instances with a dataclass member
# ---------------------------------------------------------------------------


@dataclass
class Person:
    name: str
    age: int


class Account:
    """An ordinary class: pickled through __reduce_ex__ with its __dict__."""

    def __init__(self, number, owner, balance, history):
        self.number = number
        self.owner = owner
        self.balance = balance
        self.history = [round(x, 2) for x in history]
        self.meta = {}


def build_instances(n_accounts: int = 3000, seed: int = 11, person_cls=None,
                    account_cls=None) -> Dict[str, Any]:
    person_cls = person_cls or Person
    account_cls = account_cls or Account
    rng = random.Random(seed)
    accounts = []
    for i in range(n_accounts):
        owner = person_cls("person-%d" % i, 18 + i % 60)
        acc = account_cls("ACC%07d" % i, owner, rng.uniform(0, 1e4),
                          [rng.uniform(-100, 100) for _ in range(rng.randint(2, 6))])
        if i % 5 == 0:
            acc.meta = {"vip": True}
        accounts.append(acc)
    return {"bank": "example", "accounts": accounts}


def build_instances_main() -> Dict[str, Any]:
    """`instances` with Person and Account defined in __main__, as in a script.

    pickle (and sertrace) store __main__ classes by reference like any other;
    dill and cloudpickle store them by value unless dill's byref=True.  The
    classes are made once and set as attributes of the running __main__ module,
    so pickle finds them there.  Sizes only (the classes depend on __main__)."""
    import __main__
    import dataclasses
    if not hasattr(__main__, "Account") or not hasattr(__main__, "Person"):
        ns = {"__module__": "__main__", "__annotations__": {"name": str, "age": int},
              "__qualname__": "Person"}
        person = dataclasses.dataclass(type("Person", (), ns))

        def __init__(self, number, owner, balance, history):
            self.number = number
            self.owner = owner
            self.balance = balance
            self.history = [round(x, 2) for x in history]
            self.meta = {}
        __init__.__module__ = "__main__"
        __init__.__qualname__ = "Account.__init__"
        account = type("Account", (), {"__module__": "__main__", "__qualname__": "Account",
                                        "__init__": __init__})
        __main__.Person, __main__.Account = person, account
    return build_instances(person_cls=__main__.Person, account_cls=__main__.Account)


# ---------------------------------------------------------------------------
# dataclass-heavy graph
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(slots=True)
class Edge:
    src: "GraphNode"
    dst: "GraphNode"
    weight: float
    attrs: Dict[str, Any]


@dataclass
class GraphNode:
    id: int
    label: str
    pos: Point
    out_edges: List[Edge] = field(default_factory=list)
    parent: Optional["GraphNode"] = None
    props: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Graph:
    name: str
    nodes: List[GraphNode]
    index: Dict[str, GraphNode]


def build_dataclass_graph(n_nodes: int = 1500, degree: int = 3, cluster: int = 25,
                          seed: int = 5) -> Graph:
    """Nodes reference each other through edges and parents (cycles): the
    memo turns repeated references into 2-5 byte back-references.  Edges stay
    inside clusters of `cluster` nodes, so the depth-first walk of a pickler
    stays far below Python's recursion limit (a random graph of 1,500 nodes
    makes every pickler raise RecursionError)."""
    rng = random.Random(seed)
    nodes = [GraphNode(i, "n%d" % i, Point(rng.random(), rng.random()),
                       props={"rank": rng.randrange(100), "hot": i % 7 == 0})
             for i in range(n_nodes)]
    for i, node in enumerate(nodes):
        base = i - i % cluster
        if i > base:
            node.parent = nodes[base + rng.randrange(i - base)]
        for _ in range(degree):
            dst = nodes[min(n_nodes - 1, base + rng.randrange(cluster))]
            node.out_edges.append(Edge(node, dst, round(rng.random(), 3),
                                       {"kind": "calls" if i % 2 else "owns"}))
    return Graph("g", nodes, {n.label: n for n in nodes})


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------


def _state(n):
    return lambda: dls.build_state(n)


WORKLOADS = {"builtins": (build_builtins, True), "instances": (build_instances, True)}
for _n in STATE_SIZES:
    WORKLOADS["state-%d" % _n] = (_state(_n), True)
WORKLOADS["closures-%d" % CLOSURE_SIZE] = (
    lambda: dls.build_state_with_closures(CLOSURE_SIZE), False)
WORKLOADS["dataclass-graph"] = (build_dataclass_graph, True)

# Measured by sizes.py only (its classes live in __main__).
SIZE_ONLY = {"instances-main": (build_instances_main, True)}

# For a workload pickle refuses, the picklable graph it is measured against.
PICKLE_STAND_IN = {"closures-%d" % CLOSURE_SIZE: "state-%d" % CLOSURE_SIZE}

DESCRIPTIONS = {
    "builtins": "nested dicts/lists/tuples of atoms (2,600 records)",
    "instances": "3,000 class instances, each with a dataclass, a dict and a list",
    "dataclass-graph": "1,500 dataclass nodes, 4,500 slots-dataclass edges, frozen points, cycles",
}
for _n in STATE_SIZES:
    DESCRIPTIONS["state-%d" % _n] = "scheduler-state stand-in, %d coroutines" % _n
DESCRIPTIONS["instances-main"] = "`instances` with its two classes defined in `__main__`, as in a script"
DESCRIPTIONS["closures-%d" % CLOSURE_SIZE] = (
    "state-%d plus a closure cell, a nested function and a lambda (pickle refuses)" % CLOSURE_SIZE)


# Single-kind lists: where the dormant pickler's own speed differs from
# _pickle's (timed in the dormant configuration only).
MICRO = {
    "micro-ints": lambda: list(range(-1000, 99000)),
    "micro-floats": lambda: [i * 0.37 for i in range(50000)],
    "micro-short-str": lambda: ["s%d" % i for i in range(50000)],
    "micro-bytes-2k": lambda: [bytes([i % 256]) * 2048 for i in range(600)],
    "micro-small-dicts": lambda: [{"a": i, "b": None} for i in range(20000)],
    "micro-tuples": lambda: [(i, None) for i in range(40000)],
}
for _k in MICRO:
    DESCRIPTIONS[_k] = "a list of one kind of object"

# Tiny payloads: the fixed cost of one dumps() call (argument parsing,
# pickler setup, output buffer, the bytes result) dominates.  Timed in the
# dormant configuration over loops of calls (overhead.py), not one call.
TINY = {
    "tiny-list": lambda: [1, 2],
    "tiny-dict": lambda: {"id": 7, "name": "ada", "ok": True},
    "tiny-str": lambda: "hello, world",
    "tiny-none": lambda: None,
}
DESCRIPTIONS["tiny-list"] = "`[1, 2]`"
DESCRIPTIONS["tiny-dict"] = "a 3-key dict"
DESCRIPTIONS["tiny-str"] = "a short str"
DESCRIPTIONS["tiny-none"] = "`None`"


def build(name):
    if name in MICRO:
        return MICRO[name]()
    if name in TINY:
        return TINY[name]()
    if name in SIZE_ONLY:
        return SIZE_ONLY[name][0]()
    return WORKLOADS[name][0]()


def count_objects(obj):
    """Objects reached by a walk of containers and instance dicts (shared ones once)."""
    seen = set()
    stack = [obj]
    n = 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        n += 1
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif hasattr(o, "__dict__") and not isinstance(o, type) and not callable(o):
            stack.append(o.__dict__)
        elif hasattr(o, "__slots__") and not isinstance(o, type):
            stack.extend(getattr(o, s) for s in o.__slots__ if hasattr(o, s))
    return n


if __name__ == "__main__":
    import pickle
    for name, (builder, ok) in WORKLOADS.items():
        obj = builder()
        try:
            size = len(pickle.dumps(obj, 4))
        except Exception as e:  # the closure variant
            size = "refused (%s)" % type(e).__name__
        print("%-16s objects %7d  pickle p4 %s" % (name, count_objects(obj), size))
