"""The callgrind harness shared by serializers/pickle/instr_bench.py and inspect/instr_bench.py.

Each measured (case, configuration) is one `valgrind --tool=callgrind --collect-atstart=no`
child that re-executes the calling script with `--child ARGS...`: the child makes two untimed
calls, then turns collection on around N calls through a tiny client-request library
(callgrind.h's CALLGRIND_TOGGLE_COLLECT, compiled by `toggle_library()` into a temporary
directory) and off again; the figure is the child's total over those calls divided by N (the
Python loop around them adds a few hundred instructions a call).

    H.add_build(ap); ...; H.add_keep(ap)        # the common options
    args = H.absolute_paths(ap.parse_args(argv[1:]))
    with H.toggle_library() as (tmp, toggle_so):
        counts = H.run_child(script, child_args, env, out, keep=args.keep)   # {"Ir": ...}
    # in the child (H.is_child(argv)):
    H.collect(fn, fn_args, calls, toggle_so)
"""
import contextlib
import os
import shutil
import subprocess
import tempfile

PYTHON = "/usr/bin/python3"

TOGGLE_C = r"""
#include <valgrind/callgrind.h>
void toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""

SIM = ["--cache-sim=yes", "--branch-sim=yes"]


def is_child(argv):
    """True when argv is a child's command line (`SCRIPT --child ...`)."""
    return len(argv) > 1 and argv[1] == "--child"


def collect(fn, fn_args, calls, toggle_so):
    """The child's loop: fn(*fn_args) twice untimed, then `calls` times with collection on."""
    import ctypes

    toggle = ctypes.CDLL(toggle_so).toggle
    fn(*fn_args)
    fn(*fn_args)
    toggle()
    for _ in range(calls):
        fn(*fn_args)
    toggle()


def add_build(ap):
    """--build, common to both scripts."""
    ap.add_argument("--build", help="meson build directory (else the installed sertrace)")


def add_keep(ap, extra=""):
    """--keep, common to both scripts; `extra` ends its help text."""
    ap.add_argument("--keep", help="copy each callgrind output file into this directory" + extra)


def absolute_paths(args):
    """--build and --keep as absolute paths (the children run from other directories)."""
    if args.build:
        args.build = os.path.abspath(args.build)
    if args.keep:
        args.keep = os.path.abspath(args.keep)
    return args


@contextlib.contextmanager
def toggle_library():
    """A temporary directory holding toggle.so; yields (directory, path of toggle.so)."""
    with tempfile.TemporaryDirectory(prefix="sertrace-instr-") as tmp:
        toggle_so = os.path.join(tmp, "toggle.so")
        src = os.path.join(tmp, "toggle.c")
        with open(src, "w") as f:
            f.write(TOGGLE_C)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", toggle_so, src], check=True)
        yield tmp, toggle_so


def run_child(script, child_args, env, out, keep=None, sim=False, what=""):
    """Run `valgrind --tool=callgrind PYTHON script --child child_args...` writing `out`;
    copy `out` into `keep` when given; return the totals line as {event: count}."""
    cmd = (["valgrind", "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=" + out]
           + (SIM if sim else []) + [PYTHON, os.path.abspath(script), "--child"]
           + [str(a) for a in child_args])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (what, r.stderr[-2000:]))
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(out, keep)
    return totals(out)


def totals(path):
    """The totals of a callgrind output file as {event: count} (events from its `events:` line)."""
    events = ["Ir"]
    total = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            if line.startswith(("summary:", "totals:")):
                total = dict(zip(events, (int(v) for v in line.split()[1:])))
    if total is None:
        raise RuntimeError("no total in " + path)
    return total
