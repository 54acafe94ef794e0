"""LTTng helpers for the end-to-end tests: the `lttng` command, whether a
session daemon answers, and a recording session that is always destroyed.

    if not lttng.available(): pytest.skip(...)   # or lttng.ensure_sessiond()
    with lttng.session("pickletests") as (name, out):   # sertrace:*, vpid + vtid
        ... run the traced program ...
    # stopped and destroyed here; the trace is in `out`

Session names are unique (prefix, pid, a counter): several test runs share
the machine's lttng-sessiond.
"""

import contextlib
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import time

_COUNTER = itertools.count(1)


def run(*args, check=True, timeout=120):
    """`lttng ARGS`; with check, a failure raises AssertionError with its output."""
    r = subprocess.run(["lttng", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("lttng %s failed (%d): %s%s"
                             % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def sessions(timeout=120):
    """The names of the session daemon's sessions (`lttng list`)."""
    return set(re.findall(r"^\s*\d+\) (\S+)", run("list", check=False, timeout=timeout).stdout, re.M))


def available(need_babeltrace2=True):
    """lttng (and babeltrace2) installed and a session daemon answering."""
    if not shutil.which("lttng") or (need_babeltrace2 and not shutil.which("babeltrace2")):
        return False
    return run("list", check=False).returncode == 0


def ensure_sessiond(need_babeltrace2=False):
    """True when a session daemon answers, after starting one
    (`lttng-sessiond --daemonize`) if none did.  Test processes run in
    parallel may start one at the same moment: the loser's start fails, so
    success is judged by whether a daemon answers afterwards (polled for up
    to 10 s), not by the start's exit status."""
    if available(need_babeltrace2):
        return True
    if not shutil.which("lttng-sessiond"):
        return False
    subprocess.run(["lttng-sessiond", "--daemonize"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(20):
        if available(need_babeltrace2):
            return True
        time.sleep(0.5)
    return False


@contextlib.contextmanager
def session(prefix, events="sertrace:*", contexts=("vpid", "vtid"), snapshot=False,
            channel=None, channel_name="chan", output=None):
    """A started session recording `events` with `contexts`; yields (name,
    output directory).  `channel`: `lttng enable-channel -u` options for a
    channel of its own (e.g. ["--buffers-pid", "--subbuf-size=8192"]).
    `output`: where the trace goes (default: a fresh temporary directory,
    which the caller removes)."""
    name = "%s-%d-%d" % (prefix, os.getpid(), next(_COUNTER))
    if output is None:
        output = tempfile.mkdtemp(prefix="sertrace-%s-" % prefix)
        shutil.rmtree(output)  # lttng creates it
    created = False
    try:
        run("create", name, "--output=" + output, *(["--snapshot"] if snapshot else []))
        created = True
        chan = []
        if channel is not None:
            run("enable-channel", "-u", *channel, "-s", name, channel_name)
            chan = ["-c", channel_name]
        run("enable-event", "-u", events, "-s", name, *chan)
        if contexts:
            run("add-context", "-u", *[a for c in contexts for a in ("-t", c)], "-s", name, *chan)
        run("start", name)
        yield name, output
    finally:
        if created:
            run("stop", name, check=False)
            run("destroy", name, check=False)
