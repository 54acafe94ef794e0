#!/bin/sh
# bench/api_cost.sh -- run bench/api_cost dormant, then under an LTTng
# session that records sertrace:* (per-UID channel, 8 x 8 MiB sub-buffers,
# vpid/vtid contexts, as `sertrace record` sets up), RUNS times each.
# Usage: bench/api_cost.sh BUILD_DIR [RUNS]
set -eu
build=${1:?usage: api_cost.sh BUILD_DIR [RUNS]}
runs=${2:-3}
bin="$build/bench/api_cost"
name="sertrace-apicost-$$"
out="/tmp/$name"

lttng list >/dev/null 2>&1 || lttng-sessiond --daemonize

i=0
while [ "$i" -lt "$runs" ]; do
    echo "== dormant run $((i + 1))"
    "$bin" dormant dormant-call dump-begin encode text-devnull
    i=$((i + 1))
done

cleanup() { lttng destroy "$name" >/dev/null 2>&1 || true; rm -rf "$out"; }
trap cleanup EXIT
lttng create "$name" --output="$out" >/dev/null
lttng enable-channel -u sertrace --subbuf-size=8M --num-subbuf=8 -s "$name" >/dev/null
lttng enable-event -u 'sertrace:*' -c sertrace -s "$name" >/dev/null
lttng add-context -u -t vpid -t vtid -c sertrace -s "$name" >/dev/null
lttng start "$name" >/dev/null
i=0
while [ "$i" -lt "$runs" ]; do
    echo "== recording run $((i + 1))"
    "$bin" record dump-begin
    i=$((i + 1))
done
lttng stop "$name" >/dev/null
lttng list "$name" | grep -i 'discarded' || true
du -sh "$out" | sed 's/^/trace size: /'
