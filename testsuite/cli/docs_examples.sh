#!/usr/bin/env bash
# Every complete program in docs/language.md (fenced as ```oir) compiles
# without warnings, down to MIL, so the reference cannot drift from the compiler.
set -u
orionc=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '
  /^```oir[ \t]*$/ { n++; file = sprintf("%s/doc%03d.oir", dir, n); inblock = 1; next }
  /^```/ && inblock { inblock = 0; close(file); next }
  inblock { print > file }
' "$root/docs/language.md"
count=$(ls "$tmp"/*.oir 2>/dev/null | wc -l)
if [ "$count" -lt 3 ]; then
  echo "FAIL: docs/language.md has only $count oir examples"
  exit 1
fi
failed=0
for f in "$tmp"/*.oir; do
  if ! "$orionc" -Werror --no-lint --emit=mil "$f" >"$tmp/out" 2>&1; then
    echo "FAIL: example $(basename "$f") of docs/language.md:"
    cat "$f"; cat "$tmp/out"
    failed=$((failed + 1))
  fi
done
echo "$((count - failed)) passed, $failed failed"
[ "$failed" = 0 ]
