#!/usr/bin/env bash
# scripts/test-pyversions.sh -- the Python half of sertrace on the CPythons besides
# Debian's 3.11 (the primary target, tested by scripts/test.sh on ./build): for each
# CPython 3.12 and 3.13 found under pyenv's versions directory, a build of its own
# (./build-py3.12, ./build-py3.13: `meson setup -Dpython=…`) and, in it, the tests that
# are about the pickler and the pure-Python pickler hook:
#   cpython-pickle  CPython's own pickle tests (that version's test.pickletester) on sertrace
#   pickle-pytest   tests/pickle: API, differential against that version's pickle, hostile
#                   input, byte accounting, on smaller corpora than the primary build's
#                   (CI time): per protocol PT_GRAPHS=500 random graphs (primary: 1,000,
#                   10,000 in the soak), PT_ACCOUNTING_GRAPHS=500 streamed (1,000; 10,000),
#                   PT_TRACED_GRAPHS=100 traced (100; 600), PT_ACCOUNTING_DUMPS=100 parsed
#                   (100; 300); set them to change
#   pyhook          tests/pyhook: pickle._Pickler traced (dill's tests skip: no dill there)
# It says which versions it ran and which it did not find.  Usage:
#   bash scripts/test-pyversions.sh                 # every 3.12/3.13 found
#   bash scripts/test-pyversions.sh /path/python3.X # those interpreters only
# Exit status 0 when every run version passed (or none was found), 1 otherwise.
# pyenv's versions directory: `pyenv root`, else $PYENV_ROOT, else ~/.pyenv.
set -uo pipefail
cd "$(dirname "$0")/.."

TESTS=(cpython-pickle pickle-pytest pyhook)
export PT_GRAPHS="${PT_GRAPHS:-500}" PT_ACCOUNTING_GRAPHS="${PT_ACCOUNTING_GRAPHS:-500}"
export PT_TRACED_GRAPHS="${PT_TRACED_GRAPHS:-100}" PT_ACCOUNTING_DUMPS="${PT_ACCOUNTING_DUMPS:-100}"

pythons=()
if [ "$#" -gt 0 ]; then
  pythons=("$@")
else
  root=""
  if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root 2>/dev/null || true)
  fi
  [ -n "$root" ] || root="${PYENV_ROOT:-$HOME/.pyenv}"
  for minor in 3.12 3.13; do
    # The newest patch release of that minor version that has an interpreter.
    found=$(ls -d "$root"/versions/"$minor".*/bin/python"$minor" 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$found" ]; then
      pythons+=("$found")
    else
      echo "[pyversions] CPython $minor: not found under $root/versions: SKIPPED"
    fi
  done
fi

status=0
ran=()
# A failed build step is also written to $SERTRACE_FAILED_STEPS when scripts/test.sh set
# it (its closing line counts them).
step_failed() {
  [ -z "${SERTRACE_FAILED_STEPS:-}" ] || echo "$1" >>"$SERTRACE_FAILED_STEPS"
  status=1
}
for python in "${pythons[@]}"; do
  version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
  if [ -z "$version" ]; then
    echo "[pyversions] $python does not run: FAILED"
    status=1
    continue
  fi
  minor=${version%.*}
  dir="build-py$minor"
  echo "== CPython $version ($python): $dir, tests ${TESTS[*]} (corpora: PT_GRAPHS=$PT_GRAPHS" \
       "PT_ACCOUNTING_GRAPHS=$PT_ACCOUNTING_GRAPHS PT_TRACED_GRAPHS=$PT_TRACED_GRAPHS" \
       "PT_ACCOUNTING_DUMPS=$PT_ACCOUNTING_DUMPS) =="
  if [ ! -f "$dir/build.ninja" ]; then
    if ! meson setup "$dir" -Dpython="$python" >"/tmp/sertrace-setup-$minor.log" 2>&1; then
      tail -n 20 "/tmp/sertrace-setup-$minor.log"
      echo "[pyversions] CPython $version: meson setup failed: FAILED"
      step_failed "$dir: meson setup"
      continue
    fi
  fi
  if ! ninja -C "$dir" >"/tmp/sertrace-build-$minor.log" 2>&1; then
    tail -n 30 "/tmp/sertrace-build-$minor.log"
    echo "[pyversions] CPython $version: build failed: FAILED"
    step_failed "$dir: ninja"
    continue
  fi
  rc=0
  meson test -C "$dir" --print-errorlogs --num-processes 2 "${TESTS[@]}" || rc=$?
  if [ "$rc" -eq 0 ]; then
    ran+=("$version passed")
  else
    ran+=("$version FAILED")
    status=1
    # 125: meson test's rebuild failed, no test ran
    [ "$rc" -ne 125 ] || step_failed "$dir: build (meson test's rebuild)"
  fi
done

if [ "${#ran[@]}" -gt 0 ]; then
  echo "[pyversions] CPython versions run besides the primary build: $(IFS=,; echo "${ran[*]}" | sed 's/,/, /g')"
else
  echo "[pyversions] no CPython besides the primary build was found: nothing run"
fi
exit $status
