#!/usr/bin/env bash
# Mixing up value ids and op ids must not compile. Compiles
# testsuite/compile_fail/id_mixup.c with the project's C compiler: once as is
# (must succeed without a diagnostic, so the includes and flags are right),
# then once per "MIXUP N expects TYPE_A TYPE_B" case (must fail, with an
# error at that case's line that names both types: the type error, not some
# other failure).
#
#   compile_fail.sh SOURCE INCLUDE_DIR CC [CC_ARGS...]
set -u
src=$1
inc=$2
shift 2
cc=("$@")
export LC_ALL=C # plain quotes in the compiler's messages
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c11 -fsyntax-only -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I "$inc")
passed=0
failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $1"; cat "$tmp/out"; }

if "${cc[@]}" "${flags[@]}" "$src" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ]; then
  passed=$((passed + 1))
else
  fail "control: $src does not compile cleanly without MIXUP"
fi

name=$(basename "$src")
ncases=0
while IFS=: read -r line text; do
  read -r n want_a want_b <<<"$(sed -E 's/.*MIXUP ([0-9]+) expects ([A-Za-z_]+) ([A-Za-z_]+).*/\1 \2 \3/' <<<"$text")"
  ncases=$((ncases + 1))
  if "${cc[@]}" "${flags[@]}" -DMIXUP="$n" "$src" >"$tmp/out" 2>&1; then
    fail "case $n (line $line) compiled; passing $want_b where $want_a is expected must not"
  elif ! grep -q "$name:$line:[0-9]*: error:\|$name:$line:[0-9]*: note:\|$name:$line:[0-9]*: required" "$tmp/out"; then
    fail "case $n: no diagnostic at $name:$line"
  elif grep -q "$name:[0-9]*:[0-9]*: error:" "$tmp/out" && grep "$name:[0-9]*:[0-9]*: error:" "$tmp/out" | grep -vq "$name:$line:"; then
    fail "case $n: an error at another line of $name"
  elif ! grep -q "incompatible" "$tmp/out" || ! grep -qF "'$want_a'" "$tmp/out" || ! grep -qF "'$want_b'" "$tmp/out"; then
    fail "case $n: the error is not a type mismatch between '$want_a' and '$want_b'"
  else
    passed=$((passed + 1))
  fi
done < <(grep -n 'MIXUP [0-9]* expects' "$src")

if [ "$ncases" -lt 6 ]; then
  failed=$((failed + 1))
  echo "FAIL: found $ncases cases in $src, expected 6"
fi
echo "compile_fail: $passed passed, $failed failed"
[ "$failed" = 0 ]
