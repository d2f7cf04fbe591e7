#!/usr/bin/env bash
# Round trip: print(parse(x)) parses back and prints the same text, with and
# without calls expanded. Weight files are checked on the first parse only,
# since the printed copy lives in a temporary directory.
# STRICT=1: every input must compile (examples); otherwise failing inputs are skipped.
set -u
orionc=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
fail=0
for f in "$@"; do
  for mode in "" "--inline"; do
    if ! "$orionc" --emit=oir $mode -w "$f" >"$tmp/a.oir" 2>"$tmp/err"; then
      if [ "${STRICT:-0}" = 1 ]; then echo "FAIL: $f $mode does not compile:"; cat "$tmp/err"; fail=1; fi
      continue # an input that is meant to fail (golden error tests)
    fi
    if ! "$orionc" --emit=oir --no-weight-check -w "$tmp/a.oir" >"$tmp/b.oir" 2>"$tmp/err2"; then
      echo "FAIL: printed form of $f $mode does not parse:"; cat "$tmp/err2"; fail=1; continue
    fi
    if ! cmp -s "$tmp/a.oir" "$tmp/b.oir"; then
      echo "FAIL: $f $mode does not round-trip:"; diff -u "$tmp/a.oir" "$tmp/b.oir"; fail=1
    fi
  done
done
[ $fail = 0 ] && echo "round trip: $# files ok"
exit $fail
