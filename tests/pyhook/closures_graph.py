"""A closure-heavy object graph for the pyhook tests: counters, adders and
accumulators built by nested functions (dill pickles them by value: F1,
Co, Ce1/Ce2 cells), shared cells, a bound method, a lambda, a class
defined in a function, a lock and a slice."""

import threading


def make_counter(start):
    count = start

    def incr(step=1):
        nonlocal count
        count += step
        return count

    return incr


def make_adder(n):
    return lambda x: x + n


def make_pair(label):
    shared = [label]

    def get():
        return shared[0]

    def put(v):
        shared[0] = v

    return get, put


class Box:
    def __init__(self, value):
        self.value = value

    def peek(self):
        return self.value


def make_local_class(tag):
    class Local:
        kind = tag

        def describe(self):
            return self.kind

    return Local


def build(n=40):
    items = []
    for i in range(n):
        get, put = make_pair("p%d" % i)
        items.append({
            "counter": make_counter(i),
            "adder": make_adder(i),
            "pair": (get, put),
            "box": Box([i, str(i)]),
            "method": Box(i).peek,
        })
    # A lock and a slice: dill tags them Lo and Sl, which sertrace's schema
    # has no value for (shown as Dx with a note "tag").
    return {"items": items, "local_class": make_local_class("x"), "names": ["a", "b"],
            "lock": threading.Lock(), "window": slice(2, 9, 3)}
