"""`python3 -m sertrace run` and sertrace.install(): an unmodified program is traced, and
nothing else about it changes (argv, __main__, exceptions, exit status, the bytes)."""
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import sertrace

PY = os.environ.get("SERTRACE_PYTHON", sys.executable)
WORKLOADS = os.environ.get(
    "SERTRACE_WORKLOADS",
    os.path.join(os.path.dirname(__file__), "..", "..", "workloads"))

PROGRAM = textwrap.dedent('''
    import pickle, sys
    class Point:                      # a __main__ class: pickled as __main__.Point
        def __init__(self, x, y):
            self.x, self.y = x, y
    def main():
        import sertrace
        print("traced", pickle.dumps is sertrace.dumps and pickle.Pickler is sertrace.Pickler)
        print("name", __name__)
        print("argv", sys.argv[1:])
        data = pickle.dumps({"points": [Point(i, -i) for i in range(5)], "tag": "x" * 300}, 4)
        sys.stdout.buffer.write(b"payload " + data.hex().encode() + b"\\n")
        code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
        if code < 0:
            raise ValueError("boom from the program")
        sys.exit(code)
    if __name__ == "__main__":
        main()
''')


def run(tmp_path, args, env_extra=None, program=PROGRAM):
    script = tmp_path / "prog.py"
    script.write_text(program)
    env = dict(os.environ)
    env.pop("DISPATCH_TRACE", None)
    env.update(env_extra or {})
    return subprocess.run([PY, "-m", "sertrace", "run", str(script)] + args,
                          capture_output=True, text=True, env=env, timeout=120)


def lines(out, key):
    return [l.split(" ", 1)[1] for l in out.splitlines() if l.startswith(key + " ")]


def test_run_routes_pickle_and_keeps_argv_name_status(tmp_path):
    r = run(tmp_path, ["7", "two words"])
    assert r.returncode == 7, r.stderr
    assert lines(r.stdout, "traced") == ["True"]
    assert lines(r.stdout, "name") == ["__main__"]
    assert lines(r.stdout, "argv") == [repr(["7", "two words"])]


def test_run_gives_the_same_bytes_as_plain_python(tmp_path):
    traced = run(tmp_path, ["0"])
    script = tmp_path / "prog.py"
    plain = subprocess.run([PY, str(script), "0"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and traced.returncode == 0, (plain.stderr, traced.stderr)
    assert lines(plain.stdout, "traced") == ["False"]
    assert lines(traced.stdout, "payload") == lines(plain.stdout, "payload")


def test_run_preserves_exceptions(tmp_path):
    r = run(tmp_path, ["-1"])
    assert r.returncode == 1
    assert "ValueError: boom from the program" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1] == "ValueError: boom from the program"


def test_run_missing_script_and_usage(tmp_path):
    r = subprocess.run([PY, "-m", "sertrace", "run", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nope.py" in r.stderr
    r = subprocess.run([PY, "-m", "sertrace", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "DISPATCH_TRACE" in r.stdout
    r = subprocess.run([PY, "-m", "sertrace", "frobnicate"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unknown command" in r.stderr


def test_run_module_form(tmp_path):
    (tmp_path / "progmod.py").write_text(PROGRAM)
    env = dict(os.environ)
    env.pop("DISPATCH_TRACE", None)
    r = subprocess.run([PY, "-m", "sertrace", "run", "-m", "progmod", "3"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 3, r.stderr
    assert lines(r.stdout, "traced") == ["True"]
    assert lines(r.stdout, "name") == ["__main__"]


def test_run_with_dispatch_trace_writes_the_tree(tmp_path):
    tree = tmp_path / "tree.txt"
    r = run(tmp_path, ["0"], {"DISPATCH_TRACE": str(tree), "SERTRACE_EXACT": "1"})
    assert r.returncode == 0, r.stderr
    payload = bytes.fromhex(lines(r.stdout, "payload")[0])
    text = tree.read_text()
    roots = [l for l in text.splitlines() if l.startswith("┬")]
    assert len(roots) == 1, text
    assert roots[0].startswith("┬ D2: <dict object at 0x")
    closing = [l for l in text.splitlines() if l.startswith("└ # D2 [")]
    assert len(closing) == 1, text
    root_bytes = int(closing[0].split("[")[1].split(" ")[0])
    # protocol 4: PROTO (2) + FRAME header (9) before the root, STOP (1) after it.
    assert root_bytes + 2 + 9 + 1 == len(payload)
    assert "__main__.Point" in text


def test_demo_workload_under_run(tmp_path):
    r = subprocess.run([PY, "-m", "sertrace", "run", os.path.join(WORKLOADS, "demo.py"), "4"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "refused as expected" in r.stdout


def test_install_and_uninstall_in_process():
    orig = (pickle.dump, pickle.dumps, pickle.Pickler)
    sertrace.install()
    try:
        assert pickle.dumps is sertrace.dumps
        assert pickle.dump is sertrace.dump
        assert pickle.Pickler is sertrace.Pickler
        sertrace.install()  # idempotent
        obj = {"a": [1, 2.5, "x"], "b": (None, True)}
        for p in range(0, pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.dumps(obj, p) == orig[1](obj, p)
    finally:
        sertrace.uninstall()
    assert (pickle.dump, pickle.dumps, pickle.Pickler) == orig


def test_run_sets_sys_path0_to_the_script_dir(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "helper_mod.py").write_text("VALUE = 42\n")
    (sub / "prog.py").write_text(
        "import sys, helper_mod\nprint('path0', sys.path[0])\nprint('value', helper_mod.VALUE)\n")
    r = subprocess.run([PY, "-m", "sertrace", "run", str(sub / "prog.py")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout, "path0") == [str(sub)]
    assert lines(r.stdout, "value") == ["42"]


def test_no_arguments_is_a_usage_error_on_stderr():
    r = subprocess.run([PY, "-m", "sertrace"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == "" and "usage:" in r.stderr


DILL_PROGRAM = textwrap.dedent('''
    import dill, sys
    def make_counter(start):
        count = [start]
        def incr():                   # a closure: pickle refuses it, dill takes it
            count[0] += 1
            return count[0]
        return incr
    data = dill.dumps({"counter": make_counter(3), "items": [1, 2, 3]}, 4)
    sys.stdout.write("payload %d\\n" % len(data))
''')


def test_run_traces_an_unmodified_dill_program(tmp_path):
    tree = tmp_path / "tree.txt"
    r = run(tmp_path, [], {"DISPATCH_TRACE": str(tree), "SERTRACE_EXACT": "1"},
            program=DILL_PROGRAM)
    assert r.returncode == 0, r.stderr
    size = int(lines(r.stdout, "payload")[0])
    text = tree.read_text()
    assert "dill" in text.splitlines()[0], text[:200]
    roots = [l for l in text.splitlines() if l.startswith("┬")]
    assert roots and roots[0].startswith("┬ D2: <dict object at 0x"), text[:400]
    assert any(l.lstrip("│├").startswith("┬ F1: ") for l in text.splitlines()), text
    closing = [l for l in text.splitlines() if l.startswith("└ # D2 [")]
    assert len(closing) == 1, text
    root_bytes = int(closing[0].split("[")[1].split(" ")[0])
    assert root_bytes + 2 + 1 <= size <= root_bytes + 2 + 9 + 1
