#!/bin/sh
# Build the libFuzzer target of the pickle emulator with clang
# (-fsanitize=fuzzer,address,undefined) and run it for a bounded time.
#
#   tests/inspect/fuzz.sh SOURCE_ROOT WORK_DIR SECONDS SOURCE.c...
#
# The SOURCE.c files are the libraries the target links: meson passes their
# own source lists (tests/inspect/meson.build: inspect/, analyzers/core/
# with its generated html_assets.c, format/), so a file added or split
# there is compiled here without touching this script; each source's
# directory is an include directory.
#
# The seed corpus is made on the spot from Debian's CPython (pickles of
# every protocol: containers, instances, recursion, big atoms, frames,
# out-of-band buffers) plus a few hand-made hostile inputs; the
# corpus grown by a run is kept in WORK_DIR/corpus for the next.  Exit 0
# when the run ended clean, 77 (meson: skipped) when clang or its
# libFuzzer runtime is missing, else libFuzzer's status (a crash input is
# left in WORK_DIR).
set -eu
if [ $# -lt 4 ]; then
    echo "usage: fuzz.sh SOURCE_ROOT WORK_DIR SECONDS SOURCE.c... (meson passes the sources:" \
         "meson test -C BUILD inspect-fuzz)" >&2
    exit 2
fi
src=$1
work=$2
secs=$3
shift 3
# sources relative to the current directory (meson's generated ones are
# relative to the build directory) made absolute: the run below cd's away
incs=
n=$#
while [ "$n" -gt 0 ]; do
    f=$1
    shift
    case $f in /*) ;; *) f=$PWD/$f ;; esac
    incs="$incs -I$(dirname "$f")"
    set -- "$@" "$f"
    n=$((n - 1))
done
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: no $cc: skipped"
    exit 77
fi
mkdir -p "$work/corpus"
bin=$work/fuzz_inspect
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    $incs -I"$src/tracepoints/include" -I"$src/pickle-format" \
    "$src/tests/inspect/fuzz_inspect.c" "$@" -lm -o "$bin" 2>"$work/build.log" || {
    if grep -q "fuzzer" "$work/build.log"; then
        echo "fuzz: clang has no libFuzzer runtime: skipped"; cat "$work/build.log"; exit 77
    fi
    cat "$work/build.log"; exit 1
}
/usr/bin/python3 - "$work/corpus" <<'PY'
import collections, datetime, decimal, os, pickle, sys
d = sys.argv[1]
class P:
    def __init__(self): self.a = [1, 2]; self.b = {"x": (1, 2)}
rec = []; rec.append(rec)
objs = [None, True, 1, 2 ** 70, 1.5, "s", b"b", bytearray(b"ba"), [1, [2]], (1, (2, 3)), {"a": {1: 2}},
        {1, 2}, frozenset({3}), P(), collections.OrderedDict(a=1), datetime.datetime(2020, 1, 2),
        decimal.Decimal("1.5"), rec, [b"x" * 70000, "y" * 70000], [[[[[]]]]], (lambda l: [l, l, l])([1]),
        # tuples and calls around containers big enough to stream (tuple and call levels)
        ([(i, i) for i in range(1200)],), ("h", {"k": ([7] * 1100, 1)}),
        collections.OrderedDict(a=(list(range(1100)),))]
n = 0
for p in range(6):
    for o in objs:
        with open(os.path.join(d, "seed-%d-%d" % (p, n)), "wb") as f:
            f.write(pickle.dumps(o, p)); n += 1
bufs = []
data = pickle.dumps([pickle.PickleBuffer(b"abc"), pickle.PickleBuffer(bytearray(b"d"))], 5, buffer_callback=bufs.append)
open(os.path.join(d, "seed-oob"), "wb").write(data)
for i, h in enumerate([b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.", b"\x80\x04]" * 50 + b".",
                       b"\x80\x04]\x94(" + b"h\x00" * 100 + b"e.", b"(((((t.", b"\x80\x05\x97\x98.",
                       b"cos\nsystem\n(S'x'\ntR.", b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94."]):
    open(os.path.join(d, "hostile-%d" % i), "wb").write(h)
PY
cd "$work"
exec "$bin" -max_total_time="$secs" -max_len=200000 -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 corpus
