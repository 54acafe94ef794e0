"""`python3 -m sertrace run ...`: see sertrace._run."""
import sys

from ._run import USAGE, run


def main(argv):
    if not argv:
        sys.stderr.write(USAGE)
        return 2
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if argv[0] != "run":
        sys.stderr.write("python3 -m sertrace: unknown command %r\n%s" % (argv[0], USAGE))
        return 2
    return run(argv[1:])


if __name__ == "__main__":
    # Leave this module's globals out of the way: the program runs as __main__ via runpy.
    sys.exit(main(sys.argv[1:]))
