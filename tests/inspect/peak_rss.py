"""Peak RSS of one `sertrace inspect --summary PATH` child, for the inspect
tests that compare memory streamed against read whole (test_inspect.py,
test_inspect_stream_tuples.py).

GNU time (/usr/bin/time -f 'maxrss %M') reports the child's peak resident
set in KiB on its last stderr line; the callers skip when it is absent.
"""
import os
import subprocess


def summary_rss(sertrace, env, path):
    """Bytes of peak RSS of `SERTRACE inspect --summary PATH`, run with the
    environment plus `env` (e.g. SERTRACE_INSPECT_STREAM_NODES); fails the
    test when the child does not exit 0."""
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", sertrace, "inspect",
                           "--summary", str(path)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env))
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1].split()[1]) * 1024
