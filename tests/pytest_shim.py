"""Give a CPython without pytest (a pyenv or source build) Debian's pytest.

The Python tests run under pytest on whichever CPython the build targets
(-Dpython=...).  Debian's python3 has pytest (python3-pytest); a pyenv CPython
3.12 or 3.13 has no third-party packages at all.  pytest and its
dependencies are pure Python and run on 3.11-3.13, so this script, run by the
target interpreter at configure time, makes a directory of symlinks to just
those packages in Debian's dist-packages (not the whole directory: Debian's
C extensions and version-specific packages such as numpy, dill and bt2 are
built for 3.11 and must stay absent, so their tests skip):

    python pytest_shim.py SHIM_DIR SOURCE_DIR

It prints SHIM_DIR when `import pytest` works with it on PYTHONPATH, and
exits with status 1 and a message otherwise.
"""

import os
import subprocess
import sys

# pytest 7.2 (Debian 12) and what it imports at run time; the last two only
# exist for Pythons older than 3.11 and are linked when present.
PACKAGES = ["pytest", "_pytest", "pluggy", "iniconfig", "packaging", "attr", "attrs",
            "py.py", "exceptiongroup", "tomli"]


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: pytest_shim.py SHIM_DIR SOURCE_DIR\n")
        return 2
    shim, source = sys.argv[1], sys.argv[2]
    os.makedirs(shim, exist_ok=True)
    for name in PACKAGES:
        target = os.path.join(source, name)
        link = os.path.join(shim, name)
        if os.path.lexists(link):
            os.unlink(link)
        if os.path.exists(target):
            os.symlink(target, link)
    env = dict(os.environ, PYTHONPATH=shim)
    check = subprocess.run([sys.executable, "-c", "import pytest, _pytest.config"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
    if check.returncode != 0:
        sys.stderr.write("pytest from %s does not import on %s:\n%s"
                         % (source, sys.executable, check.stdout))
        return 1
    print(shim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
