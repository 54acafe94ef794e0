"""`python3 -m sertrace run ...` (sertrace._run) and `python3 -m sertrace compare ...`
(sertrace.comparison)."""
import sys

from ._run import USAGE as RUN_USAGE
from ._run import run

USAGE = """\
usage: python3 -m sertrace run SCRIPT|-m MODULE [ARGS...]
       python3 -m sertrace compare MODULE:EXPR [--serializers LIST] [--protocol N] [--json]

  run       run a program with its pickling traced (python3 -m sertrace run --help)
  compare   what pickle, dill and cloudpickle each write for one object, path
            pattern by path pattern (python3 -m sertrace compare --help)
"""


def main(argv):
    if not argv:
        sys.stderr.write(USAGE)
        return 2
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\n" + RUN_USAGE)
        return 0
    if argv[0] == "compare":
        from .comparison import main as compare_main

        return compare_main(argv[1:])
    if argv[0] != "run":
        sys.stderr.write("python3 -m sertrace: unknown command %r\n%s" % (argv[0], USAGE))
        return 2
    return run(argv[1:])


if __name__ == "__main__":
    # Leave this module's globals out of the way: the program runs as __main__ via runpy.
    sys.exit(main(sys.argv[1:]))
