#!/usr/bin/env bash
# scripts/check-format.sh -- hold the C sources to the repository's .clang-format.
#
#   bash scripts/check-format.sh          # dry run: list the files that differ, exit 1 if any
#   bash scripts/check-format.sh --fix    # reformat those files in place
#   bash scripts/check-format.sh FILE...  # the same, on these files only
#
# The files: every tracked *.c and *.h (git ls-files; `find` outside a git checkout),
# minus EXCLUDED below.  clang-format is $CLANG_FORMAT, else `clang-format` on PATH;
# its versions format a little differently, and the tree is kept to Debian 12's
# (clang-format 14), which CI runs.  .clang-format has `SortIncludes: false`:
# include order is meaningful here (LTTng-UST's provider headers are included after
# their LTTNG_UST_TRACEPOINT_* defines, _GNU_SOURCE comes before the system headers).
# Exit status: 0 clean (or fixed), 1 files differ, 2 usage or tool error.
set -uo pipefail
cd "$(dirname "$0")/.."

# Files clang-format must not touch, with why.  The LTTng-UST tracepoint provider
# headers are a declarative DSL, not C: their field lists
# (LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(...) lttng_ust_field_string(...)))
# are juxtaposed macro calls without commas, which clang-format reads as one long
# expression and indents as a staircase, one level deeper per field.  Their layout
# (one field per line) is LTTng's documented one and is kept by hand.
EXCLUDED=(
  tracepoints/sertrace-tp.h   # sertrace's provider header
  tests/plugin/schema_tp.h    # a second provider (unknown events and fields)
  tests/cli/foreign_tp.h      # another provider's trace
)

fix=0
files=()
for arg in "$@"; do
  case "$arg" in
    --fix) fix=1 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check-format.sh: unknown option '$arg' (known: --fix, --help)" >&2; exit 2 ;;
    *) files+=("$arg") ;;
  esac
done

cf="${CLANG_FORMAT:-clang-format}"
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "check-format.sh: '$cf' not found: install clang-format (Debian: apt-get install clang-format) or set CLANG_FORMAT" >&2
  exit 2
fi

if [ "${#files[@]}" -eq 0 ]; then
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.c' '*.h')
  else
    mapfile -t files < <(find . -path './build*' -prune -o \( -name '*.c' -o -name '*.h' \) -print |
                         sed 's|^\./||' | sort)
  fi
fi

differ=()
for f in "${files[@]}"; do
  skip=0
  for x in "${EXCLUDED[@]}"; do
    [ "$f" = "$x" ] && skip=1
  done
  [ "$skip" = 1 ] && continue
  if [ ! -f "$f" ]; then
    echo "check-format.sh: no such file: $f" >&2
    exit 2
  fi
  # --dry-run -Werror: exit status 1 and a diagnostic when the file would change.
  if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    # Tell a formatting difference from a tool error (bad .clang-format, unreadable file).
    if ! err=$("$cf" --style=file "$f" 2>&1 >/dev/null); then
      echo "check-format.sh: $cf failed on $f: $err" >&2
      exit 2
    fi
    differ+=("$f")
  fi
done

if [ "${#differ[@]}" -eq 0 ]; then
  echo "format: ${#files[@]} files checked, all follow .clang-format"
  exit 0
fi
if [ "$fix" = 1 ]; then
  "$cf" --style=file -i "${differ[@]}" || exit 2
  printf 'reformatted: %s\n' "${differ[@]}"
  echo "format: ${#differ[@]} files reformatted"
  exit 0
fi
printf 'differs: %s\n' "${differ[@]}"
echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format;" \
     "see with: $cf --style=file FILE | diff -u FILE -; fix with: bash scripts/check-format.sh --fix" >&2
exit 1
