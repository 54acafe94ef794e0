#!/usr/bin/env bash
# scripts/demo.sh -- the main job: set up (scripts/setup.sh), record the coroutine-
# scheduler workload into a real LTTng session with `sertrace record`, then report the
# size tree and the summary (the dump pickle refuses is flagged with its failing path).
# The trace stays in ./traces/ for `sertrace report` by hand, with an HTML view of it beside.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

out="$PWD/traces/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p traces
echo "== sertrace record -o $out -- /usr/bin/python3 -m sertrace run workloads/demo.py"
sertrace record -o "$out" -- /usr/bin/python3 -m sertrace run workloads/demo.py
echo
echo "== sertrace report --tree --max-depth 4 --min-size 5K $out"
sertrace report --tree --max-depth 4 --min-size 5K "$out"
echo
echo "== sertrace report --summary --top 5 $out"
sertrace report --summary --top 5 "$out"
echo
echo "== sertrace report --oversize 20K --html $out.html $out"
sertrace report --oversize 20K --html "$out.html" "$out"
echo "the size trees in a browser: open $out.html (one file, works offline)"
