"""spawn/forkserver children get sertrace.install() from their parent (issue 12, item 2),
and are never harmed by it.  No LTTng here (test_e2e_children.py records them): each child
reports which Pickler its `pickle` module and its multiprocessing ForkingPickler use.

- A program that found sertrace only through a sys.path change of its own (no PYTHONPATH):
  its children, whose own sys.path cannot find it, are traced anyway (the bootstrap falls
  back to the parent's sertrace directory).
- If the child cannot import sertrace at all (the package was removed after the parent
  imported it), the child says so on stderr and runs untraced: the Pool still gives its
  results.
- After uninstall(), children start untraced again, and get_preparation_data is
  multiprocessing's own.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import sertrace

PY = os.environ.get("SERTRACE_PYTHON", sys.executable)
PKG = os.path.dirname(os.path.abspath(sertrace.__file__))

PROGRAM = textwrap.dedent('''
    import json, os, shutil, sys
    import multiprocessing as mp, multiprocessing.spawn

    def which(_):
        import pickle, multiprocessing.reduction as R
        return [os.getpid(), pickle.Pickler.__module__, R.ForkingPickler.__mro__[1].__module__]

    if __name__ == "__main__":
        sys.path.insert(0, SERTRACE_PARENT)   # found only through the program's own sys.path
        import sertrace
        sertrace.install()
        if REMOVE_PACKAGE:
            shutil.rmtree(os.path.join(SERTRACE_PARENT, "sertrace"))
        out = {}
        for method in ("spawn", "forkserver"):
            with mp.get_context(method).Pool(1) as pool:
                out[method] = pool.map(which, [0])[0]
        sertrace.uninstall()
        out["restored"] = not hasattr(multiprocessing.spawn.get_preparation_data, "__sertrace__")
        with mp.get_context("spawn").Pool(1) as pool:
            out["after_uninstall"] = pool.map(which, [0])[0]
        print(json.dumps(out))
''')


def run_program(tmp_path, remove):
    copy = tmp_path / "lib"
    shutil.copytree(PKG, copy / "sertrace")
    script = tmp_path / "prog.py"
    script.write_text(("SERTRACE_PARENT = %r\nREMOVE_PACKAGE = %r\n" % (str(copy), remove))
                      + PROGRAM)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("DISPATCH_TRACE", None)
    # The copy's extensions find libsertrace through $ORIGIN/../../tracepoints, which the
    # copy lacks: point them at the build's, not at an older one installed on the machine
    # (which may lack a newer symbol, e.g. sertrace_dump_lower_bounds).
    lib = os.path.join(os.path.dirname(os.path.dirname(PKG)), "tracepoints")
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [lib] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    work = tmp_path / "elsewhere"
    work.mkdir()
    # -S (passed on to the children by multiprocessing): no site-packages, so an installed
    # sertrace elsewhere on the machine cannot stand in for the one the parent uses.
    r = subprocess.run([PY, "-S", str(script)], cwd=work, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_children_are_traced_even_if_only_the_parent_can_find_sertrace(tmp_path):
    out, err = run_program(tmp_path, remove=False)
    for method in ("spawn", "forkserver"):
        assert out[method][1:] == ["sertrace", "sertrace"], (method, out[method], err)
    assert out["restored"] is True
    assert out["after_uninstall"][1:] == ["_pickle", "_pickle"]
    assert "cannot import sertrace" not in err


def test_a_child_that_cannot_import_sertrace_runs_untraced_and_says_so(tmp_path):
    out, err = run_program(tmp_path, remove=True)
    for method in ("spawn", "forkserver"):
        assert out[method][1:] == ["_pickle", "_pickle"], (method, out[method])
    assert err.count("sertrace: this multiprocessing child cannot import sertrace") == 2, err
