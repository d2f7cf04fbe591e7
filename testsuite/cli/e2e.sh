#!/usr/bin/env bash
# End to end: each example .oir is compiled by orionc, run by orion-run in both
# numerics modes, and its output compared with an expected output computed
# independently in numpy (testsuite/e2e/make_fixtures.py, which rebuilt the
# seeded weights with docs/weights.md's generator and wrote the graph out again
# in float64). The comparison tool (testsuite/e2e/npy_compare.c) needs no numpy.
#
# An element passes when |got - expected| <= ATOL + RTOL * |expected|:
#   fp32 mode: ATOL 1e-4, RTOL 1e-3. The outputs are declared fp16, so
#     orion-run writes them rounded once to fp16 (up to 2^-11 ~ 4.9e-4
#     relative); the rest is fp32 arithmetic (sgemm accumulation order,
#     float reductions) against float64.
#   ane mode: ATOL 1e-2, RTOL 1e-2. Every op's result is rounded to fp16
#     (about 5e-4 relative each), through two transformer blocks; measured
#     errors are up to 4.4e-3 absolute on outputs of magnitude up to ~4.
# llama_block's 64 x 32000 logits are checked on 4 whole rows plus the L2
# norm of every row (RTOL 1e-4 in fp32 mode, 2e-3 in ane mode).
# Usage: e2e.sh ORIONC ORION_RUN NPY_COMPARE SOURCE_ROOT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
compare=$(realpath "$3")
root=$(realpath "$4")
fix=$root/testsuite/e2e/examples
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

FP32_TOL="--atol 1e-4 --rtol 1e-3"
ANE_TOL="--atol 1e-2 --rtol 1e-2"
FP32_NORM_RTOL=1e-4
ANE_NORM_RTOL=2e-3

# run_example NAME INPUTS...   (INPUTS: NAME=FILE relative to the fixture directory)
run_example() {
  local name=$1 mode
  shift
  if "$orionc" -w -o "$tmp/$name.anepkg" "$root/examples/$name.oir" >"$tmp/log" 2>&1; then ok; else
    fail "$name: orionc failed"
    cat "$tmp/log"
    return 1
  fi
  local args=()
  for i in "$@"; do args+=(--input "${i%%=*}=$fix/$name/${i#*=}"); done
  for mode in fp32 ane; do
    mkdir -p "$tmp/$name.$mode"
    if "$run" --numerics=$mode "$tmp/$name.anepkg" "${args[@]}" --output-dir "$tmp/$name.$mode" >"$tmp/log" 2>&1
    then ok; else
      fail "$name ($mode): orion-run failed"
      cat "$tmp/log"
    fi
  done
}

# check NAME MODE TOLERANCE... -- COMPARE_ARGS...
check() {
  local name=$1 mode=$2
  shift 2
  echo -n "$name ($mode): "
  if "$compare" "$@"; then ok; else fail "$name ($mode): output differs from the fixture"; fi
}

run_example tiny_mlp x=x.npy
for mode in fp32 ane; do
  tol=FP32_TOL; [ $mode = ane ] && tol=ANE_TOL
  # shellcheck disable=SC2086
  check tiny_mlp $mode "$tmp/tiny_mlp.$mode/probs.npy" "$fix/tiny_mlp/probs.npy" ${!tol}
done

run_example gpt2_block x=x.npy
for mode in fp32 ane; do
  tol=FP32_TOL; [ $mode = ane ] && tol=ANE_TOL
  # shellcheck disable=SC2086
  check gpt2_block $mode "$tmp/gpt2_block.$mode/hidden.npy" "$fix/gpt2_block/hidden.npy" ${!tol}
done

run_example llama_block tokens=tokens.npy cos=cos.npy sin=sin.npy
for mode in fp32 ane; do
  tol=FP32_TOL norm=$FP32_NORM_RTOL; [ $mode = ane ] && tol=ANE_TOL norm=$ANE_NORM_RTOL
  # shellcheck disable=SC2086
  check llama_block $mode "$tmp/llama_block.$mode/logits.npy" "$fix/llama_block/logits_rows.npy" \
    --rows 0,21,42,63 ${!tol}
  check llama_block $mode "$tmp/llama_block.$mode/logits.npy" --row-norms "$fix/llama_block/logits_norms.npy" \
    --rtol $norm
done

# Every example has a fixture: a new example needs one (make_fixtures.py).
for f in "$root"/examples/*.oir; do
  n=$(basename "$f" .oir)
  if [ -d "$fix/$n" ]; then ok; else fail "examples/$n.oir has no fixture in testsuite/e2e/examples"; fi
done

# The comparison itself must catch a wrong output: fp32 against ane results
# with a tolerance far below their difference.
if "$compare" "$tmp/gpt2_block.ane/hidden.npy" "$tmp/gpt2_block.fp32/hidden.npy" --atol 1e-6 --rtol 1e-6 \
  >"$tmp/log" 2>&1; then fail "npy_compare accepted different outputs"; else ok; fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
