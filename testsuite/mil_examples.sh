#!/usr/bin/env bash
# Golden MIL for every shipped example: `orionc --emit=mil` (and a package's
# model.mil, which must be the same text) compared with testsuite/mil/NAME.mil.
#   UPDATE=1 mil_examples.sh ORIONC ROOT    rewrites the expectations on purpose
set -u
orionc=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
for e in "$root"/examples/*.oir; do
  name=$(basename "$e" .oir)
  want="$root/testsuite/mil/$name.mil"
  if ! "$orionc" --emit=mil "$e" >"$tmp/$name.mil" 2>"$tmp/err"; then
    echo "FAIL: $name does not compile:"; cat "$tmp/err"; failed=$((failed + 1)); continue
  fi
  if [ "${UPDATE:-0}" = 1 ]; then cp "$tmp/$name.mil" "$want"; echo "updated $want"; continue; fi
  if ! diff -u "$want" "$tmp/$name.mil" >"$tmp/diff"; then
    echo "FAIL: $name MIL differs from $want:"; head -n 40 "$tmp/diff"; failed=$((failed + 1)); continue
  fi
  if ! "$orionc" -o "$tmp/$name.anepkg" "$e" 2>"$tmp/err" || ! cmp -s "$want" "$tmp/$name.anepkg/model.mil"; then
    echo "FAIL: $name package MIL differs from --emit=mil"; cat "$tmp/err"; failed=$((failed + 1)); continue
  fi
  passed=$((passed + 1))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
