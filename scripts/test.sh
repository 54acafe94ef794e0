#!/usr/bin/env bash
# scripts/test.sh -- set up (scripts/setup.sh), then run every test:
#   1. `meson test` on ./build: C unit tests (Criterion), Python tests (pytest), and the
#      end-to-end tests against the real lttng-sessiond;
#   2. the Python suites again under PYTHONMALLOC=debug and -X dev (the C extensions'
#      memory and reference handling);
#   3. the C unit tests again in an AddressSanitizer + UndefinedBehaviorSanitizer build
#      (./build-asan);
#   4. the pickler's Python tests on the other CPythons found (pyenv's 3.12, 3.13), a
#      build each (./build-py3.X): scripts/test-pyversions.sh, which says which ran;
#   5. release builds (what packagers build: -O3, NDEBUG) with gcc and with clang,
#      warning-free under -Werror, and the C unit tests on each (./build-release-gcc,
#      ./build-release-clang);
#   6. the format check (scripts/check-format.sh: the C files against .clang-format);
#   7. the soak: tests/pickle on its full corpus (PT_SOAK=1: 10,000 graphs per
#      protocol, tests/README.md), which the default run in step 1 samples;
# and print a closing line "tests: N passed, N failed" (meson tests, every build), with
# ", N steps failed" when a step that is no test failed: a `meson setup`, a build
# (ninja, or meson test's rebuild: exit status 125), the format check; those steps are
# listed above the line ("STEP  FAILED  ..."), and their tests are missing from the counts.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

status=0
# Failed steps that are no test, one line each ("release-clang: ninja"); the closing
# line counts them.  scripts/test-pyversions.sh appends its own (SERTRACE_FAILED_STEPS).
SERTRACE_FAILED_STEPS=$(mktemp)
export SERTRACE_FAILED_STEPS
trap 'rm -f "$SERTRACE_FAILED_STEPS"' EXIT
step_failed() { echo "$1" >>"$SERTRACE_FAILED_STEPS"; status=1; }
# meson test: exit status 125 is its rebuild failing (no test ran), else the tests' verdict.
mtest() {
  local label=$1 rc=0
  shift
  meson test "$@" || rc=$?
  if [ "$rc" -eq 125 ]; then step_failed "$label: build (meson test's rebuild)"; fi
  if [ "$rc" -ne 0 ]; then status=1; fi
}
# Only the logs this run writes are counted (a rebuild that fails leaves the old ones).
rm -f build/meson-logs/testlog.json build/meson-logs/pydebug.json build/meson-logs/soak.json \
  build-asan/meson-logs/testlog.json

echo "== meson test (build) =="
# The installed package and command are tested too (tests/run/test_installed.py).
SERTRACE_TEST_INSTALLED=1 mtest build -C build --print-errorlogs --num-processes 2

echo "== Python suites again with CPython's debug allocator and dev mode (refcount/memory checks) =="
PYTHONMALLOC=debug PYTHONDEVMODE=1 mtest build -C build --suite python --print-errorlogs \
  --num-processes 2 --logbase pydebug

echo "== sanitizers: C unit tests under ASan+UBSan (build-asan) =="
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Dpython=/usr/bin/python3 -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debug >/dev/null || step_failed "asan: meson setup"
fi
ninja -C build-asan >/dev/null || step_failed "asan: ninja"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  mtest asan -C build-asan --suite unit --print-errorlogs

echo "== other CPython versions: the pickler's Python tests (build-py3.X) =="
# Only the logs this run writes are counted: an old build-py3.X log is removed first.
rm -f build-py3.*/meson-logs/testlog.json
bash scripts/test-pyversions.sh || status=1

echo "== release builds: gcc and clang, -Werror, C unit tests (build-release-CC) =="
# Build and unit suite only, to keep CI time small; `meson setup` once per directory.
for cc in gcc clang; do
  dir=build-release-$cc
  rm -f "$dir/meson-logs/testlog.json"
  if [ ! -f "$dir/build.ninja" ]; then
    CC=$cc meson setup "$dir" -Dpython=/usr/bin/python3 --buildtype=release >/dev/null || {
      step_failed "release-$cc: meson setup"; continue; }
  fi
  # The build's output only when it fails (a warning is an error here).
  ninja -C "$dir" >"$dir/ninja.log" 2>&1 || {
    cat "$dir/ninja.log"; step_failed "release-$cc: ninja"; continue; }
  mtest "release-$cc" -C "$dir" --suite unit --print-errorlogs
done

echo "== format: scripts/check-format.sh =="
bash scripts/check-format.sh || step_failed "format: scripts/check-format.sh"

echo "== soak: tests/pickle on the full corpus (PT_SOAK=1) =="
PT_SOAK=1 mtest build -C build --print-errorlogs --logbase soak pickle-pytest

# What the runners said (Criterion synthesis, pytest summaries), then one closing line.
/usr/bin/python3 - <<'PY' || status=1
import glob, json, os, re
passed = failed = 0
logs = [("", "build/meson-logs/testlog.json"), ("", "build/meson-logs/pydebug.json"),
        ("", "build-asan/meson-logs/testlog.json"), ("soak:", "build/meson-logs/soak.json"),
        ("release-gcc:", "build-release-gcc/meson-logs/testlog.json"),
        ("release-clang:", "build-release-clang/meson-logs/testlog.json")]
logs += [(os.path.dirname(os.path.dirname(l))[len("build-"):] + ":", l)
         for l in sorted(glob.glob("build-py3.*/meson-logs/testlog.json"))]
for prefix, log in logs:
    if not os.path.exists(log):
        continue
    for line in open(log):
        t = json.loads(line)
        ok = t["result"] in ("OK", "EXPECTEDFAIL", "SKIP")
        passed += ok
        failed += not ok
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        said = [l.strip() for l in out.splitlines()
                if re.search(r"Synthesis: Tested|^(=+ )?\d+ (passed|failed|error)", l.strip())]
        print("%-5s %-28s %s" % (t["result"], prefix + t["name"], said[-1] if said else ""))
steps = [l.strip() for l in open(os.environ["SERTRACE_FAILED_STEPS"]) if l.strip()]
for step in steps:
    print("STEP  FAILED  %s" % step)
if passed + failed == 0:
    print("no tests ran")
    raise SystemExit(1)
print("tests: %d passed, %d failed%s" % (
    passed, failed, ", %d step%s failed" % (len(steps), "s" * (len(steps) != 1)) if steps else ""))
PY
exit $status
