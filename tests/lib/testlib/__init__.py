"""Helpers shared by the Python test folders (tests/lib/README.md).

    from testlib import tree      # parser of the live text tree (DISPATCH_TRACE)
    from testlib import payload   # shape of a pickle payload: header, trailer, frames
    from testlib import child     # run a child Python with the test paths and env
    from testlib import lttng     # a uniquely named LTTng session, always destroyed
    from testlib import knobs     # corpus sizes: default run, or the soak (PT_SOAK=1)
    from testlib import around    # a pickler writing around its path, an unwatchable file

A test folder puts tests/lib on sys.path (its conftest.py, or meson's
PYTHONPATH); the modules import nothing of sertrace, so children and
analyzer tests can use them too.
"""
