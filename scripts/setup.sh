#!/usr/bin/env bash
# scripts/setup.sh -- everything a fresh Debian 12 machine needs before sertrace runs:
# the Debian packages, a build in ./build, `meson install` (so `sertrace`, the Python
# package, the C headers and the babeltrace2 plugin are where users find them), and a
# running lttng-sessiond.  Idempotent: run it as often as you like.  Needs root for
# apt-get, install and the session daemon (or run the steps it prints by hand).
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
if [ "$(id -u)" -eq 0 ]; then
  log "meson install"
  meson install -C build --quiet >/dev/null
  ldconfig
fi

# A session daemon: `sertrace record` starts one by itself, the tests expect one.
if ! pgrep -x lttng-sessiond >/dev/null 2>&1; then
  log "starting lttng-sessiond"
  lttng-sessiond --daemonize
  for _ in $(seq 50); do lttng list >/dev/null 2>&1 && break; sleep 0.1; done
fi
log "ready"
