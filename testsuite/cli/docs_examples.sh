#!/usr/bin/env bash
# The examples of docs/language.md, so the reference cannot drift from the compiler:
#  - a block fenced ```oir followed by a ```text block that starts with
#    "$ orionc OPTIONS FILE.oir" is that program: orionc runs on it with those
#    options, and its output (stdout and stderr) must be exactly the rest of
#    the text block;
#  - every other ```oir block is a complete program that compiles without
#    warnings, down to MIL.
# Blocks may be indented (inside a list item); the fence's indentation is removed.
set -u
orionc=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
awk -v dir="$tmp" '
  !inblock && /^ *```(oir|text)[ \t]*$/ {
    indent = match($0, /[^ ]/) - 1
    kind = $0; sub(/^ *```/, "", kind); sub(/[ \t]*$/, "", kind)
    n++; file = sprintf("%s/block%03d.%s", dir, n, kind); inblock = 1; printf "" > file; next
  }
  inblock && /^ *```[ \t]*$/ { inblock = 0; close(file); next }
  inblock { print substr($0, indent + 1) > file }
' "$root/docs/language.md"

passed=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
mkdir "$tmp/run"
for f in "$tmp"/block*.oir; do
  next=$(printf '%s/block%03d.text' "$tmp" $((10#$(basename "$f" .oir | tr -dc 0-9) + 1)))
  if [ -f "$next" ] && head -n 1 "$next" | grep -q '^\$ orionc '; then
    read -r -a cmd <<<"$(head -n 1 "$next" | cut -c3-)"
    name=${cmd[${#cmd[@]} - 1]}
    cp "$f" "$tmp/run/$name"
    tail -n +2 "$next" >"$tmp/want"
    (cd "$tmp/run" && "$orionc" "${cmd[@]:1}") >"$tmp/got" 2>&1
    if cmp -s "$tmp/want" "$tmp/got"; then
      passed=$((passed + 1))
    else
      fail "the output shown in docs/language.md for '${cmd[*]}' differs:"
      diff -u "$tmp/want" "$tmp/got"
    fi
  elif "$orionc" -Werror --no-lint --emit=mil "$f" >"$tmp/out" 2>&1; then
    passed=$((passed + 1))
  else
    fail "example $(basename "$f") of docs/language.md:"
    cat "$f" "$tmp/out"
  fi
done
if [ "$passed" -lt 5 ]; then fail "docs/language.md has only $passed checked examples"; fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
