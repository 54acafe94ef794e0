"""pytest configuration of tests/pickle.

The tests import `sertrace` from the build tree (meson runs them with
PYTHONPATH=<builddir>/python) and helper modules of this folder (pt_*.py,
graphgen.py), so this folder goes on sys.path.  A clear error, rather than
a wall of ImportErrors, when the package is not importable.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

try:
    import sertrace  # noqa: F401
except ImportError as e:  # pragma: no cover - environment problem
    raise SystemExit(
        "tests/pickle: cannot import sertrace (%s); run through meson test or set "
        "PYTHONPATH=<builddir>/python" % e
    )
