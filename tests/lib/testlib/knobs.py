"""Corpus sizes of the Python tests: the default run, or the soak.

    GRAPHS = knobs.size("PT_GRAPHS", default=1000, soak=10000)

An explicit environment variable wins (scripts/test-pyversions.sh sets
them); else PT_SOAK=1 (CI's soak step, scripts/test.sh) gives the soak
size; else the default, sized so that `meson test pickle-pytest` takes at
most a minute (tests/README.md has the figures).  Every kind of case the
generators make is in the default corpus too (tests/README.md, "Fast tests
by default"); the soak adds seeds, not kinds.
"""

import os


def soak():
    return os.environ.get("PT_SOAK", "") not in ("", "0")


def size(name, default, soak_size):
    value = os.environ.get(name)
    if value not in (None, ""):
        return int(value)
    return soak_size if soak() else default
