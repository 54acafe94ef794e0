"""sertrace.install() after the program took pickle's names (issue 12, item 5).

A program imports multiprocessing and cloudpickle, does `from pickle import dumps, Pickler`,
defines its own Pickler subclass, and only then calls sertrace.install().  Each of those
must be traced (a dump in the live tree with the exact size of the bytes returned), the
bytes must be those the untraced originals wrote, uninstall() must put every name back, and
what cannot be made traced (a Pickler subclass with a metaclass of its own) must be named
in one RuntimeWarning, once.  Each case runs in its own process (DISPATCH_TRACE=<file>).
"""
import json
import os
import re
import subprocess
import sys
import textwrap

PY = os.environ.get("SERTRACE_PYTHON", sys.executable)

PROGRAM = textwrap.dedent('''
    import io, json, sys, warnings
    import multiprocessing.reduction as R
    import multiprocessing.connection as C
    import multiprocessing.queues as Q
    import cloudpickle
    from pickle import dumps, Pickler
    import pickle

    class MyPickler(Pickler):              # a program's own subclass of the C Pickler
        def __init__(self, file):
            super().__init__(file, 4)

    class Meta(type):
        pass

    class Odd(Pickler, metaclass=Meta):   # cannot be rebuilt: warned, stays untraced
        pass

    def my_dumps(obj):
        b = io.BytesIO()
        MyPickler(b).dump(obj)
        return b.getvalue()

    obj = {"k": [1, 2.5, "x" * 40], "t": (None, True), "n": list(range(30))}
    f = lambda x: x + 1
    cases = {
        "forking": lambda: bytes(R.ForkingPickler.dumps(obj)),
        "connection": lambda: bytes(C._ForkingPickler.dumps(obj)),
        "queues": lambda: bytes(Q._ForkingPickler.dumps(obj, 2)),
        "cloudpickle": lambda: cloudpickle.dumps(f),
        "from_pickle_import": lambda: dumps(obj, 4),
        "own_subclass": lambda: my_dumps(obj),
    }
    before = {k: c() for k, c in cases.items()}
    original = (dumps, Pickler, R.ForkingPickler, cloudpickle.CloudPickler, MyPickler)

    import sertrace
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sertrace.install()
        sertrace.install()                 # idempotent: nothing twice
    sys.stderr.write("traced now\\n")
    after = {}
    for k in cases:                        # one dump each, in this order
        after[k] = cases[k]()
        sys.stderr.write("did %s\\n" % k)
    state = {
        "same_bytes": {k: before[k] == after[k] for k in cases},
        "lengths": [len(after[k]) for k in cases],
        "warnings": [str(w.message) for w in caught],
        "bases": [c.__mro__[1].__module__ + "." + c.__mro__[1].__qualname__
                  for c in (R.ForkingPickler, C._ForkingPickler, Q._ForkingPickler,
                            cloudpickle.CloudPickler, MyPickler)],
        "names": [R.ForkingPickler.__module__ + "." + R.ForkingPickler.__qualname__,
                  cloudpickle.CloudPickler.__module__ + "." + cloudpickle.CloudPickler.__qualname__],
        "registry_shared": R.ForkingPickler._extra_reducers is original[2]._extra_reducers,
        "odd_untouched": Odd.__mro__[1] is original[1],
    }
    sertrace.uninstall()
    state["restored"] = (dumps is original[0] and Pickler is original[1]
                         and R.ForkingPickler is original[2] and C._ForkingPickler is original[2]
                         and cloudpickle.CloudPickler is original[3] and MyPickler is original[4]
                         and pickle.dumps is original[0])
    print(json.dumps(state))
''')


def end_sizes(text):
    """Sizes of the dumps of the live tree, in order, from their footers."""
    return [int(m) for m in re.findall(r"^# end dump \d+: (\d+) B, ok$", text, re.M)]


def test_install_after_imports_traces_every_bound_name(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(PROGRAM)
    tree = tmp_path / "tree.txt"
    env = dict(os.environ, DISPATCH_TRACE=str(tree), SERTRACE_EXACT="1")
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    assert all(state["same_bytes"].values()), state["same_bytes"]
    # Every case is a traced dump with the exact size of the bytes it returned; nothing
    # before install() was traced.
    text = tree.read_text()
    assert end_sizes(text) == state["lengths"], (end_sizes(text), state["lengths"])
    assert state["bases"] == ["sertrace.Pickler"] * 5
    assert state["names"] == ["multiprocessing.reduction.ForkingPickler",
                              "cloudpickle.cloudpickle_fast.CloudPickler"]
    assert state["registry_shared"] is True
    # What could not be rebuilt is named, once, and left as it was.
    assert state["odd_untouched"] is True
    assert len(state["warnings"]) == 1, state["warnings"]
    assert "__main__.Odd" in state["warnings"][0] and "metaclass" in state["warnings"][0]
    assert state["restored"] is True


def test_install_after_imports_traces_nothing_when_nobody_listens(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(PROGRAM)
    env = dict(os.environ)
    env.pop("DISPATCH_TRACE", None)
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    assert all(state["same_bytes"].values())
    assert state["restored"] is True


def test_uninstall_is_exact_when_nothing_was_bound_before(tmp_path):
    # install() first, then imports: the classes are built on sertrace.Pickler directly,
    # nothing is rebound, and uninstall() must not touch them.
    prog = textwrap.dedent('''
        import json, pickle
        import sertrace
        sertrace.install()
        import multiprocessing.reduction as R
        import cloudpickle
        from sertrace import _bind
        print(json.dumps({"rebound": _bind.rebound_names(),
                          "base": R.ForkingPickler.__mro__[1].__module__}))
    ''')
    script = tmp_path / "early.py"
    script.write_text(prog)
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    assert state == {"rebound": [], "base": "sertrace"}
