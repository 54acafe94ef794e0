#!/usr/bin/env python3
"""The main job's workload: what a durable-coroutine SDK pickles at each suspension point.

It is an ordinary program that uses the standard `pickle` module and knows nothing about
sertrace.  `python3 -m sertrace run workloads/demo.py` routes its pickle calls through the
traced pickler; `sertrace record` records them; `sertrace report` shows the trees.

It pickles the scheduler-state stand-in (dispatch_like_state.py) a few times, then the
variant with a closure cell, a nested function and a lambda on a coroutine's stack, which
pickle refuses: the report flags that dump with the path of the object that failed.
"""
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dispatch_like_state as workload  # noqa: E402


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 16
    # As an SDK integrating sertrace would: coroutine records and frames note their
    # function, code hash, frame state, IP and SP on their own trace nodes (when the
    # process is traced by sertrace; plain pickle is unaffected, the bytes are the same).
    workload.enable_annotations()
    state = workload.build_state(n)
    for protocol in (4, 5):
        payload = pickle.dumps(state, protocol)
        print("state, %d coroutines, protocol %d: %d bytes" % (n, protocol, len(payload)))
    closures = workload.build_state_with_closures(n)
    try:
        pickle.dumps(closures, 5)
        print("closure variant: pickled (unexpected)")
        return 1
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        print("closure variant: refused as expected: %s: %s" % (type(exc).__name__, exc))
        for note in getattr(exc, "__notes__", []):
            print("   ", note)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
