#!/usr/bin/env bash
# scripts/setup.sh -- everything a fresh Debian 12 machine needs before sertrace runs:
# the Debian packages, a build in ./build, a running lttng-sessiond, and `meson install`
# of ./build (so `sertrace`, the Python package, the C headers and the babeltrace2
# plugin are where users find them).  SERTRACE_PGO=1 installs the profile-guided build
# ./build-pgo instead (scripts/pgo-build.sh; not the default: on the current code it
# does not win, bench/README.md "Build flags"), or ./build, said loudly, if that build
# fails.  The installed build is named in <package>/BUILD-INFO (bench/RESULTS.md names
# it too).  Idempotent: run it as often as you like (./build-pgo is remade only when a
# source changed since its training).  Needs root for apt-get, install and the session
# daemon (or run the steps it prints by hand).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential pkg-config meson ninja-build
  clang clang-format   # scripts/test.sh: the clang release build, scripts/check-format.sh
  liblttng-ust-dev lttng-tools liblttng-ctl-dev
  babeltrace2 libbabeltrace2-dev python3-bt2
  libcriterion-dev
  python3 python3-dev python3-pytest python3-dill python3-cloudpickle
  python3-numpy python3-joblib
  libpython3.11-testsuite
  time procps util-linux
  chromium python3-websocket
)

log() { printf '[setup] %s\n' "$*" >&2; }

if [ "$(id -u)" -eq 0 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ] || [ "${CI:-}" = true ]; then
    log "apt-get install ${missing[*]:-(refresh)}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
  fi
else
  log "not root: skipping apt-get; if the build fails, run: sudo apt-get install -y ${PACKAGES[*]}"
fi

# Debian's CPython, never the first python3 on PATH (see README).
if [ ! -f build/build.ninja ]; then
  log "meson setup build"
  meson setup build -Dpython=/usr/bin/python3 >/dev/null
fi
log "building"
ninja -C build >/dev/null

# A session daemon: `sertrace record` starts one by itself, the tests expect one.
if ! pgrep -x lttng-sessiond >/dev/null 2>&1; then
  log "starting lttng-sessiond"
  lttng-sessiond --daemonize
  for _ in $(seq 50); do lttng list >/dev/null 2>&1 && break; sleep 0.1; done
fi

if [ "$(id -u)" -eq 0 ]; then
  # The installed build: ./build, or with SERTRACE_PGO=1 the profile-guided one (gcc;
  # the training needs root's private session daemon or the one above).  Without the
  # Criterion tests (the tests use ./build): fewer targets to build twice.  Its log:
  # build-pgo.log.  A finished one leaves build-pgo/pgo-trained; it is kept while
  # ninja has nothing to redo in it (no source changed since the training).
  installed=build
  if [ "${SERTRACE_PGO:-0}" != 1 ]; then
    :
  elif [ -f build-pgo/pgo-trained ] && ninja -C build-pgo -n 2>/dev/null | grep -q 'no work to do'; then
    log "profile-guided build ./build-pgo is up to date"
    installed=build-pgo
  else
    log "profile-guided build into ./build-pgo (scripts/pgo-build.sh, a few minutes; log: build-pgo.log)"
    start=$(date +%s)
    if sh scripts/pgo-build.sh build-pgo -Dpython=/usr/bin/python3 -Dtests=disabled >build-pgo.log 2>&1; then
      log "profile-guided build done in $(($(date +%s) - start)) s"
      installed=build-pgo
    else
      log "########################################################################"
      log "WARNING: the profile-guided build FAILED (build-pgo.log, last lines below);"
      log "WARNING: installing the PLAIN build ./build instead."
      tail -n 15 build-pgo.log | sed 's/^/[setup]   /' >&2 || true
      log "########################################################################"
    fi
  fi
  log "meson install ($installed: $(cat "$installed/BUILD-INFO" 2>/dev/null || echo '?'))"
  meson install -C "$installed" --quiet >/dev/null
  ldconfig
fi
log "ready"
