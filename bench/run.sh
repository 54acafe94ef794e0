#!/bin/sh
# bench/run.sh -- run every sertrace benchmark and rewrite bench/RESULTS.md.
#
#   bench/run.sh [--build DIR] [--quick] [--reps N] [--only PARTS] [--output FILE]
#
# Without --build it measures the installed sertrace (bash scripts/setup.sh);
# with --build DIR, that meson build directory.  Everything else is in
# bench/run.py (--help).  Debian's /usr/bin/python3 on purpose: the first
# python3 on PATH may be another build without dill, cloudpickle and bt2.
exec /usr/bin/python3 "$(dirname "$0")/run.py" "$@"
