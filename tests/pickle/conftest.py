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
