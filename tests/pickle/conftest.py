"""pytest configuration of tests/pickle.

The tests import `sertrace` from the build tree (meson runs them with
PYTHONPATH=<builddir>/python), helper modules of this folder (pt_*.py,
graphgen.py) and the shared ones of tests/lib (testlib: tree parser,
payload shape, child runner, LTTng session, corpus sizes), so both go on
sys.path.  A clear error, rather than
a wall of ImportErrors, when the package is not importable.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(os.path.dirname(HERE), "lib")
for _p in (LIB, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

try:
    import sertrace  # noqa: F401
except ImportError as e:  # pragma: no cover - environment problem
    raise SystemExit(
        "tests/pickle: cannot import sertrace (%s); run through meson test or set "
        "PYTHONPATH=<builddir>/python" % e
    )


# The run's cost, at the end of pytest's output (issue 17 item 6: the
# default run is meant to take at most a minute).  Wall time depends on
# what else the machine runs; CPU time (this process and its children,
# user + sys) is the figure to compare between runs.  Printed, never
# asserted.
import resource  # noqa: E402
import time  # noqa: E402

_START = time.monotonic()


def pytest_terminal_summary(terminalreporter):
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    load = os.getloadavg()[0]
    terminalreporter.write_line(
        "tests/pickle: %.1f s wall, %.1f s CPU (user + sys, children included), load %.1f; "
        "corpus: %s" % (time.monotonic() - _START, cpu, load,
                        "soak (PT_SOAK=1)" if os.environ.get("PT_SOAK", "") not in ("", "0")
                        else "default"))
