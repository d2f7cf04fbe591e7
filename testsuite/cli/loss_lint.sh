#!/usr/bin/env bash
# cross_entropy's emitted MIL against the ANE constraints: exactly the
# findings that apply (docs/numerics.md, "cross_entropy").
#  - a small classifier's package lints clean (its surfaces are padded, its
#    fp32 ops are notes of the graph only);
#  - its .oir: ANE004 for the three small surfaces (the package pads them),
#    ANE015 for the linear that lower-linear fixes, ANE017 notes for the fp32
#    ops and the fp32 output, nothing else;
#  - a 32000-class loss over 256 positions: ANE016 (over the SRAM budget) at
#    exactly the four ops on fp32 [256, 32000] values, and no error.
# Usage: loss_lint.sh ORIONC ORION_LINT
set -u
export LC_ALL=C # the order findings are sorted in
orionc=$(realpath "$1")
lint=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
# findings FILE: "count severity[rule]" lines, sorted
findings() { grep -o '\(error\|warning\|note\)\[ANE[0-9]*\]' "$1" | sort | uniq -c | sed 's/^ *//'; }

cat >"$tmp/small.oir" <<'OIR'
func main(x: fp16[1,4,8], targets: int32[1,4]) {
  param w: fp16[10,8] = normal(seed=3, std=0.1);
  logits = linear(x, w);
  loss: fp32[] = cross_entropy(logits, targets, ignore_index=-100);
  return loss;
}
OIR
if "$orionc" -o "$tmp/small.anepkg" "$tmp/small.oir" >"$tmp/log" 2>&1; then ok; else fail "orionc small"; cat "$tmp/log"; fi
if "$lint" "$tmp/small.anepkg" >"$tmp/log" 2>&1 && [ ! -s "$tmp/log" ]; then ok; else
  fail "the package of a model with cross_entropy does not lint clean"; cat "$tmp/log"; fi

"$lint" "$tmp/small.oir" >"$tmp/log" 2>&1
status=$?
want=$'1 note[ANE015]\n2 note[ANE017]\n3 warning[ANE004]'
got=$(findings "$tmp/log")
if [ $status = 0 ] && [ "$got" = "$want" ]; then ok; else
  fail "small.oir: exit $status, findings:"; echo "$got"; echo "want:"; echo "$want"; cat "$tmp/log"; fi

cat >"$tmp/vocab.oir" <<'OIR'
func main(logits: fp16[1,256,32000], targets: int32[1,256]) {
  loss: fp32[] = cross_entropy(logits, targets);
  return loss;
}
OIR
"$lint" "$tmp/vocab.oir" >"$tmp/log" 2>&1
status=$?
got=$(grep -o "warning\[ANE016\]: [a-z_]* producing '[a-z_0-9]*'" "$tmp/log" | tr '\n' ';')
want="warning[ANE016]: cast producing 'loss_fp32';warning[ANE016]: sub producing 'loss_shifted';warning[ANE016]: exp producing 'loss_exp';warning[ANE016]: reshape producing 'loss_shifted_flat';"
if [ $status = 0 ] && [ "$got" = "$want" ] && ! grep -q 'error\[' "$tmp/log"; then ok; else
  fail "vocab.oir: exit $status, ANE016 at: $got"; cat "$tmp/log"; fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
