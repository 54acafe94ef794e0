"""Peak RSS of one `sertrace inspect --summary PATH` child, for the inspect
tests that compare memory streamed against read whole (test_inspect.py,
test_inspect_stream_tuples.py, test_inspect_stream_groups.py).

GNU time (/usr/bin/time -f 'maxrss %M') reports the child's peak resident
set in KiB on its last stderr line; the callers skip when it is absent.
"""
import io
import os
import pickle
import subprocess

# never streamed: the threshold of nodes held before a feed at its maximum
NEVER = {"SERTRACE_INSPECT_STREAM_NODES": str(2**32 - 1)}


def summary_rss(sertrace, env, path):
    """Bytes of peak RSS of `SERTRACE inspect --summary PATH`, run with the
    environment plus `env` (e.g. SERTRACE_INSPECT_STREAM_NODES); fails the
    test when the child does not exit 0."""
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", sertrace, "inspect",
                           "--summary", str(path)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env))
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1].split()[1]) * 1024


def grows_like_the_input(sertrace, make, protocol, tmp_path):
    """make(10^5) -> make(10^6), pickled by a fast-mode pickler (no memo) at
    `protocol`: streamed (the default threshold), the peak RSS of `inspect
    --summary` grows by the input (mapped) and 6 MiB at most, and by under
    a quarter of what it grows read whole."""
    sizes, streamed, whole = [], [], []
    for n in (10 ** 5, 10 ** 6):
        path = tmp_path / ("p%d.pkl" % n)
        buf = io.BytesIO()
        p = pickle.Pickler(buf, protocol)
        p.fast = True
        p.dump(make(n))
        path.write_bytes(buf.getvalue())
        sizes.append(len(buf.getvalue()))
        streamed.append(summary_rss(sertrace, {}, path))
        whole.append(summary_rss(sertrace, NEVER, path))
    grow_s, grow_w = streamed[1] - streamed[0], whole[1] - whole[0]
    assert grow_s < (sizes[1] - sizes[0]) + (6 << 20), (protocol, streamed, whole, sizes)
    assert grow_s * 4 < grow_w, (protocol, streamed, whole)
