#!/usr/bin/env bash
# Golden-file test: runs orionc on one .oir file and compares exit status,
# stdout and stderr with NAME.expected beside it.
#
#   run_golden.sh ORIONC path/to/NAME.oir     compare
#   UPDATE=1 run_golden.sh ORIONC NAME.oir    rewrite NAME.expected on purpose
#
# Options come from a first line "// RUN: <orionc options>" (default: --emit=oir).
# orionc runs in the file's directory, so diagnostics name the file without a path.
set -u
orionc=$(realpath "$1")
file=$2
dir=$(dirname "$file")
name=$(basename "$file")
expected="$dir/${name%.oir}.expected"

opts="--emit=oir"
first=$(head -n 1 "$file")
case "$first" in
  "// RUN:"*) opts=${first#"// RUN:"} ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
# shellcheck disable=SC2086
(cd "$dir" && "$orionc" $opts "$name" >"$tmp/stdout" 2>"$tmp/stderr")
status=$?
{
  echo "exit: $status"
  echo "--- stdout"
  cat "$tmp/stdout"
  echo "--- stderr"
  cat "$tmp/stderr"
} >"$tmp/actual"

if [ "${UPDATE:-0}" = 1 ]; then
  cp "$tmp/actual" "$expected"
  echo "updated $expected"
  exit 0
fi
if [ ! -f "$expected" ]; then
  echo "missing $expected (run with UPDATE=1 to create it)"
  cat "$tmp/actual"
  exit 1
fi
if ! diff -u "$expected" "$tmp/actual"; then
  echo "FAIL: $file differs from $expected"
  exit 1
fi
# A run that crashed under a sanitizer must not pass even if the text matched.
if [ "$status" -gt 2 ]; then
  echo "FAIL: orionc exited with $status"
  exit 1
fi
exit 0
