"""The extension modules' lifetime: sertrace._native and sertrace._inspect
deleted from sys.modules and imported again, and Python finalized and
initialized again in one process (an embedder), every round checked.

Both modules are single-phase init with m_size 0 and an m_free
(serializers/pickle/module.c, inspect/pymodule.c, "the module's lifetime"):
what 3.11 to 3.13 do with that, observed and asserted here, is

  * a re-import after `del sys.modules[...]` runs PyInit again: a new
    module object with new function objects (with m_size -1 the import
    system copied the first module's dict: the same function objects, no
    PyInit, and no m_free ever on 3.11/3.12);
  * the first module object dies once it is replaced and unreferenced
    (m_free: the process-wide caches stay while another module object
    lives), and what was taken from it (a function, a Pickler) keeps
    working;
  * Py_FinalizeEx() frees the last module object (m_free with the
    interpreter finalizing: caches, interned names, imports and types
    released), and the next Py_Initialize() + import makes them again:
    the Pickler type of a later round is in that interpreter's GC lists
    (before, the first round's type was kept and used by every later one,
    in none of their GC lists).

The children run under CPython's debug allocator (PYTHONMALLOC=debug), so
a released object used again is caught rather than read by luck.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

# Run in a child: deleting sertrace from this process's sys.modules would
# pull the package from under the other tests.
REIMPORT = textwrap.dedent(
    r"""
    import gc, io, pickle, sys, weakref

    class Point:
        def __init__(self, x):
            self.x, self.label = x, "p%d" % x

    objs = [Point(1), {"k": [Point(2), (1, 2.5, None)]}, list(range(40)), "s" * 10]

    def check(mod, insp, pickler_type):
        for proto in (0, 2, 4, 5):
            assert mod.dumps(objs, proto) == pickle.dumps(objs, proto), proto
        f = io.BytesIO()
        pickler_type(f, 4).dump(objs)
        assert f.getvalue() == pickle.dumps(objs, 4)
        data = pickle.dumps(objs)
        status, offset, reason, summary = insp.summary(data, 10, 0, 0.0, 1 << 30)
        assert status == insp.OK, (status, reason)
        assert summary["totals"]["payload_bytes"] == len(data), summary["totals"]
        return summary

    def drop():
        for k in [k for k in sys.modules if k == "sertrace" or k.startswith("sertrace.")]:
            del sys.modules[k]

    import sertrace._native as native1, sertrace._inspect as insp1
    check(native1, insp1, native1.Pickler)
    old_dumps, old_pickler, old_summary = native1.dumps, native1.Pickler, insp1.summary
    gone = [weakref.ref(native1), weakref.ref(insp1)]
    del native1, insp1
    drop()

    import sertrace._native as native2, sertrace._inspect as insp2
    assert all(w() is not native2 and w() is not insp2 for w in gone)
    # PyInit ran again (m_size 0): new function objects, not the old dict's
    assert native2.dumps is not old_dumps and insp2.summary is not old_summary
    check(native2, insp2, native2.Pickler)
    # what was taken from the first modules keeps working
    assert old_dumps(objs, 4) == pickle.dumps(objs, 4)
    f = io.BytesIO()
    old_pickler(f, 2).dump(objs)
    assert f.getvalue() == pickle.dumps(objs, 2)
    assert old_summary(pickle.dumps(objs), 10, 0, 0.0, 1 << 30)[0] == 0
    del old_dumps, old_pickler, old_summary, f
    gc.collect()
    # the first module objects are gone (their m_free ran) ...
    assert [w() for w in gone] == [None, None]
    # ... and the second ones are whole
    check(native2, insp2, native2.Pickler)
    # a third round, the package itself this time
    drop()
    del native2, insp2
    import sertrace
    assert sertrace.dumps(objs) == pickle.dumps(objs)
    assert sertrace.inspect(pickle.dumps(objs))["totals"]["payload_bytes"] == len(pickle.dumps(objs))
    print("reimport ok")
    """
)

# One round of the embedder: the same checks, through the package.
ROUND = textwrap.dedent(
    r"""
    import gc, io, pickle
    import sertrace

    # the Pickler type is this interpreter's: a type kept from a finalized
    # one is in none of this interpreter's GC lists
    assert any(o is sertrace.Pickler for o in gc.get_objects()), "a stale Pickler type"

    class Point:
        def __init__(self, x):
            self.x, self.label = x, "p%d" % x

    objs = [Point(1), {"k": [Point(2), (1, 2.5, None)]}, list(range(40))]
    for proto in (0, 2, 4, 5):
        assert sertrace.dumps(objs, proto) == pickle.dumps(objs, proto), proto
    f = io.BytesIO()
    sertrace.Pickler(f, 4).dump(objs)
    assert f.getvalue() == pickle.dumps(objs, 4)
    data = pickle.dumps(objs)
    assert sertrace.inspect(data)["totals"]["payload_bytes"] == len(data)
    """
)

EMBED_C = r"""
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

/* argv[1]: a script, run in each of argv[2] rounds of Py_Initialize() ...
 * Py_FinalizeEx(). */
int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    for (int i = 0; i < atoi(argv[2]); i++) {
        Py_Initialize();
        FILE *f = fopen(argv[1], "r");
        if (f == NULL)
            return 3;
        int rc = PyRun_SimpleFileEx(f, argv[1], 1);
        if (Py_FinalizeEx() < 0 || rc != 0) {
            printf("round %d failed\n", i);
            return 1;
        }
        printf("round %d ok\n", i);
        fflush(stdout);
    }
    return 0;
}
"""


def child_env(tmp_path, traced):
    env = dict(os.environ)
    env["PYTHONMALLOC"] = "debug"
    env.pop("DISPATCH_TRACE", None)
    if traced:
        # the text probe: type names go through trace.c's cache
        env["DISPATCH_TRACE"] = str(tmp_path / "tree.txt")
    return env


@pytest.mark.parametrize("traced", [False, True], ids=["dormant", "traced"])
def test_reimport_after_del(tmp_path, traced):
    r = subprocess.run([sys.executable, "-c", REIMPORT], env=child_env(tmp_path, traced),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "reimport ok"
    if traced:
        assert "Point" in (tmp_path / "tree.txt").read_text()


def python_config():
    """The python3-config of this interpreter, or None."""
    here = os.path.dirname(sys.executable)
    for name in ("python%d.%d-config" % sys.version_info[:2], "python3-config"):
        path = os.path.join(here, name)
        if os.access(path, os.X_OK):
            return path
    return None


def build_embedder(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    config = python_config()
    if cc is None or config is None:
        pytest.skip("no C compiler or python3-config for %s" % sys.executable)
    flags = subprocess.run([config, "--cflags", "--ldflags", "--embed"], capture_output=True,
                           text=True)
    if flags.returncode != 0:
        pytest.skip("%s --embed: %s" % (config, flags.stderr.strip()))
    src, exe = tmp_path / "embed.c", tmp_path / "embed"
    src.write_text(EMBED_C)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    extra = (sysconfig.get_config_var("LINKFORSHARED") or "").split()  # a static libpython
    cmd = [cc, "-o", str(exe), str(src)] + flags.stdout.split() + extra + ["-Wl,-rpath," + libdir]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot link an embedding program: %s" % r.stderr[-500:])
    return exe


@pytest.mark.parametrize("traced", [False, True], ids=["dormant", "traced"])
def test_finalize_and_initialize_again(tmp_path, traced):
    exe = build_embedder(tmp_path)
    script = tmp_path / "round.py"
    script.write_text(ROUND)
    r = subprocess.run([str(exe), str(script), "3"], env=child_env(tmp_path, traced),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    assert r.stdout.split("\n")[:3] == ["round %d ok" % i for i in range(3)]
    if traced:
        # three rounds traced the same dumps: the tree of each holds the class
        assert (tmp_path / "tree.txt").read_text().count("Point") >= 3

