#!/bin/sh
# Profile-guided build of sertrace with gcc (optional; bench/README.md, "Build flags").
#
#   [PGO_TRAIN_ARGS=...] scripts/pgo-build.sh [BUILDDIR] [MESON_SETUP_ARGS...]
#                                                          (default BUILDDIR: build-pgo)
#
# 1. configures BUILDDIR with -Db_pgo=generate (instrumented), builds it;
# 2. trains it: scripts/pgo_train.py runs sertrace.dumps over bench/workloads.py's
#    workloads dormant, recording at the default granularity and recording every
#    object (our workloads only; an LTTng session daemon is needed: as root the
#    script starts a private one in its own mount namespace);
# 3. reconfigures with -Db_pgo=use and rebuilds: BUILDDIR then holds the optimized
#    libsertrace and sertrace._native (install it with `meson install -C BUILDDIR`;
#    scripts/setup.sh does) and BUILDDIR/pgo-trained, removed when a run starts.
#
# -Dwerror=false: the profile changes gcc's inlining enough to give a few
# maybe-uninitialized/array-bounds false positives outside the pickler; the plain
# builds keep -Werror.  The extension is built for -Dpython (default /usr/bin/python3),
# and the training runs on that interpreter.  Any source change needs a new
# training (gcc ignores, with a warning, profiles that no longer match).
set -eu
cd "$(dirname "$0")/.."
builddir=${1:-build-pgo}
[ $# -gt 0 ] && shift
python=/usr/bin/python3
for a in "$@"; do
  case $a in -Dpython=*) python=${a#-Dpython=} ;; esac
done
rm -f "$builddir/pgo-trained"
if [ -d "$builddir/meson-info" ]; then
  meson configure "$builddir" -Db_pgo=generate -Dwerror=false "$@"
else
  meson setup "$builddir" -Db_pgo=generate -Dwerror=false "$@"
fi
find "$builddir" -name '*.gcda' -delete
ninja -C "$builddir"
# shellcheck disable=SC2086  # PGO_TRAIN_ARGS: extra pgo_train.py options, split on spaces
/usr/bin/python3 scripts/pgo_train.py --build "$builddir" --python "$python" ${PGO_TRAIN_ARGS:-}
meson configure "$builddir" -Db_pgo=use
ninja -C "$builddir"
touch "$builddir/pgo-trained"
echo "pgo-build: $builddir is built with -Db_pgo=use (trained on bench/workloads.py)"
