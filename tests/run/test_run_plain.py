"""`python3 -m sertrace run` runs a program exactly as `python3` does (issue 12, item 4).

Each case runs one program twice, `python3 SCRIPT|-m MODULE args` and `python3 -m sertrace run
SCRIPT|-m MODULE args`, from the same working directory, and compares everything the program
can see of itself: its __main__ globals (keys and order, __file__, __spec__, __loader__,
__package__, __cached__, __doc__, __builtins__, __annotations__), sys.argv, sys.path[0], the
co_filename of its code, whether sys.modules['__main__'] is its own module, and the bytes
cloudpickle writes for a lambda defined in it (they carry the code's filename and module).
Scripts are given by relative, ./-prefixed, non-normalised, absolute and symlinked paths; a
directory with a __main__.py, a zip file, a .pyc; and -m with a package's module.  A raised exception prints the
same traceback and exits the same way.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

PY = os.environ.get("SERTRACE_PYTHON", sys.executable)

SELFVIEW = textwrap.dedent('''
    import builtins, json, sys
    import cloudpickle

    def describe(v):
        """A comparable view of a module attribute (no addresses)."""
        if v is None or isinstance(v, (str, int, bool, list, dict)):
            return v
        if isinstance(v, type):
            return "class " + v.__module__ + "." + v.__qualname__
        if v is builtins:
            return "the builtins module"
        out = {"type": type(v).__module__ + "." + type(v).__qualname__}
        for a in ("name", "path", "origin", "parent", "cached", "has_location",
                  "submodule_search_locations"):
            if hasattr(v, a):
                out[a] = getattr(v, a)
        if hasattr(v, "loader"):
            out["loader"] = describe(v.loader)
        return out

    g = globals()
    view = {
        "dunder_keys_in_order": [k for k in g if k.startswith("__")],
        "attrs": {k: describe(g[k]) for k in g if k.startswith("__")},
        "argv": sys.argv,
        "path0": sys.path[0],
        "co_filename": describe.__code__.co_filename,
        "main_is_this_module": sys.modules["__main__"].__dict__ is g,
        "lambda_cloudpickle": cloudpickle.dumps(lambda x: x + 1).hex(),
    }
    sys.stdout.write(json.dumps(view, sort_keys=True) + "\\n")
    if "--raise" in sys.argv:
        def inner():
            raise ValueError("from the program")
        inner()
    if "--interrupt" in sys.argv:
        raise KeyboardInterrupt
''')


def env():
    e = dict(os.environ)
    e.pop("DISPATCH_TRACE", None)
    return e


def both(cwd, target, args=()):
    """(plain, traced) CompletedProcess for `python3 TARGET ARGS`, target a list."""
    plain = subprocess.run([PY] + target + list(args), cwd=cwd, capture_output=True,
                           text=True, env=env(), timeout=120)
    traced = subprocess.run([PY, "-m", "sertrace", "run"] + target + list(args), cwd=cwd,
                            capture_output=True, text=True, env=env(), timeout=120)
    return plain, traced


@pytest.fixture
def tree(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "selfview.py").write_text(SELFVIEW)
    (tmp_path / "linked.py").symlink_to(sub / "selfview.py")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "selfview.py").write_text(SELFVIEW)
    app = tmp_path / "appdir"
    app.mkdir()
    (app / "__main__.py").write_text(SELFVIEW)
    return tmp_path


def check_same(plain, traced):
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stderr
    p, t = json.loads(plain.stdout), json.loads(traced.stdout)
    for key in sorted(p):
        assert t[key] == p[key], key
    assert t == p
    return p


@pytest.mark.parametrize("how", ["relative", "dot", "unnormalised", "absolute", "symlink"])
def test_script_sees_itself_as_under_plain_python(tree, how):
    target = {"relative": "sub/selfview.py", "dot": "./sub/selfview.py",
              "unnormalised": "sub/../sub/selfview.py",
              "absolute": str(tree / "sub" / "selfview.py"), "symlink": "linked.py"}[how]
    view = check_same(*both(tree, [target], ["a", "two words"]))
    # What python3 itself does, so that the comparison is not between two wrong answers.
    assert view["attrs"]["__file__"] == os.path.join(str(tree), target) or how == "absolute"
    assert view["attrs"]["__package__"] is None and view["attrs"]["__spec__"] is None
    assert view["attrs"]["__builtins__"] == "the builtins module"
    assert view["attrs"]["__loader__"]["type"].endswith("SourceFileLoader")
    assert view["co_filename"] == view["attrs"]["__file__"]
    assert view["argv"] == [target, "a", "two words"]
    assert view["path0"] == str(tree / "sub")
    assert view["main_is_this_module"] is True


def test_module_form_sees_itself_as_under_plain_python(tree):
    view = check_same(*both(tree, ["-m", "pkg.selfview"], ["x"]))
    assert view["attrs"]["__package__"] == "pkg"
    assert view["attrs"]["__spec__"]["name"] == "pkg.selfview"
    assert view["argv"] == [str(tree / "pkg" / "selfview.py"), "x"]
    assert view["path0"] == str(tree)


def test_directory_with_main_runs_as_under_plain_python(tree):
    view = check_same(*both(tree, ["appdir"], ["y"]))
    assert view["path0"] == str(tree / "appdir")


def test_zip_and_pyc_run_as_under_plain_python(tree):
    import py_compile
    import zipfile
    with zipfile.ZipFile(tree / "app.zip", "w") as z:
        z.writestr("__main__.py", SELFVIEW)
    view = check_same(*both(tree, ["app.zip"], ["z"]))
    assert view["path0"] == str(tree / "app.zip")
    py_compile.compile(str(tree / "sub" / "selfview.py"), cfile=str(tree / "compiled.pyc"),
                       doraise=True)
    view = check_same(*both(tree, ["compiled.pyc"], ["c"]))
    assert view["attrs"]["__loader__"]["type"].endswith("SourcelessFileLoader")


def test_cloudpickle_bytes_of_a_lambda_are_the_same(tree):
    # The symptom: 492 B plain against 473 B under `run` (relative co_filename).
    plain, traced = both(tree, ["sub/selfview.py"])
    p = json.loads(plain.stdout)["lambda_cloudpickle"]
    t = json.loads(traced.stdout)["lambda_cloudpickle"]
    assert bytes.fromhex(t) == bytes.fromhex(p)
    assert str(tree / "sub" / "selfview.py").encode() in bytes.fromhex(t)


def test_exception_traceback_and_status_are_python3s(tree):
    plain, traced = both(tree, ["sub/selfview.py"], ["--raise"])
    assert plain.returncode == traced.returncode == 1
    assert traced.stderr == plain.stderr
    assert "sertrace" not in traced.stderr and "runpy" not in traced.stderr
    plain, traced = both(tree, ["-m", "pkg.selfview"], ["--raise"])
    assert plain.returncode == traced.returncode == 1
    # python3 -m shows runpy's two frames: so does `run -m`, and nothing of sertrace.
    assert traced.stderr == plain.stderr
    assert "sertrace" not in traced.stderr


def test_keyboard_interrupt_exits_by_sigint_as_python3(tree):
    plain, traced = both(tree, ["sub/selfview.py"], ["--interrupt"])
    assert plain.returncode == traced.returncode == -signal.SIGINT
    assert traced.stderr == plain.stderr


def test_missing_module_is_reported_as_python3_does(tree):
    plain, traced = both(tree, ["-m", "no_such_module_here"])
    assert plain.returncode == traced.returncode == 1
    assert traced.stderr == plain.stderr
