#!/usr/bin/env bash
# The corpus programs of ../shared/corpus/mil (beside the source tree) on the
# CPU backend, against expected outputs computed independently in numpy
# (testsuite/e2e/make_fixtures.py wrote each program's math out again from its
# MIL text). testsuite/e2e/corpus/cases.txt says which programs run, which wait
# for an op of the CPU backend (pending) and which are skipped, and why.
#
# The corpus has MIL text only, so each program runs as a bare model directory
# made here: model.mil copied from the corpus (never into the repository) and
# the weight files of the fixture (random weights, Apple's blob format, at the
# offsets the MIL names). --no-ane-checks: these programs are here for their
# numerics; what the ANE would reject (concat, masked attention) is tested
# elsewhere.
#
# Tolerances, as for the examples (e2e.sh): |got - expected| <= ATOL + RTOL*|expected|
#   fp32 mode: ATOL 1e-4, RTOL 1e-3 (fp16-declared outputs are written rounded once
#     to fp16, 2^-11 relative; the rest is fp32 arithmetic against float64);
#   ane mode:  ATOL 1e-2, RTOL 1e-2 (every op's result rounded to fp16);
#   int32 outputs must be equal.
# Usage: e2e_corpus.sh ORION_RUN NPY_COMPARE SOURCE_ROOT
set -u
run=$(realpath "$1")
compare=$(realpath "$2")
root=$(realpath "$3")
corpus=$(realpath -m "$root/../shared/corpus/mil")
fix=$root/testsuite/e2e/corpus
if [ ! -d "$corpus" ]; then
  # CI (CI=true) has the corpus: there its absence is a failure, not a skip.
  if [ "${CI:-}" = true ]; then echo "FAIL: no corpus at $corpus (under CI it must be there)"; exit 1; fi
  echo "SKIP: no corpus at $corpus (under CI this fails)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
skipped=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

tol_fp32="--atol 1e-4 --rtol 1e-3"
tol_ane="--atol 1e-2 --rtol 1e-2"

# run_case NAME STATUS: 0 if it ran and matched in both modes, 1 if it failed,
# 2 if the CPU backend does not support one of its ops (message in $tmp/log).
run_case() {
  local name=$1 dir=$tmp/$1 mode o
  if [ ! -f "$corpus/$name.mil" ]; then
    echo "$name: not in the corpus"
    return 1
  fi
  mkdir -p "$dir/out"
  cp "$corpus/$name.mil" "$dir/model.mil"
  [ -d "$fix/$name/weights" ] && cp -r "$fix/$name/weights" "$dir/"
  local args=()
  for i in "$fix/$name"/in.*.npy; do
    i=$(basename "$i" .npy)
    args+=(--input "${i#in.}=$fix/$name/$i.npy")
  done
  for mode in fp32 ane; do
    rm -f "$dir/out"/*
    if ! "$run" --no-ane-checks --numerics=$mode "$dir" "${args[@]}" --output-dir "$dir/out" >"$tmp/log" 2>&1; then
      grep -q "is not supported by the CPU backend" "$tmp/log" && return 2
      echo "$name ($mode): orion-run failed"
      cat "$tmp/log"
      return 1
    fi
    for o in "$fix/$name"/out.*.npy; do
      o=$(basename "$o" .npy)
      local tol=tol_$mode
      echo -n "$name ($mode): "
      # shellcheck disable=SC2086
      "$compare" "$dir/out/${o#out.}.npy" "$fix/$name/$o.npy" ${!tol} || return 1
    done
  done
  return 0
}

listed=" "
while read -r name status why; do
  case "$name" in '#'* | '') continue ;; esac
  listed="$listed$name "
  case "$status" in
  run)
    if run_case "$name"; then ok; else fail "$name"; fi
    ;;
  pending)
    run_case "$name"
    case $? in
    0) ok; echo "NOTE: $name now runs and matches: mark it 'run' in testsuite/e2e/corpus/cases.txt" ;;
    2) skipped=$((skipped + 1)); echo "SKIP: $name: waits for $why: $(grep -m1 -o "op '[^']*' is not supported by the CPU backend" "$tmp/log")" ;;
    *) fail "$name" ;;
    esac
    ;;
  skip)
    skipped=$((skipped + 1))
    echo "SKIP: $name: $why"
    ;;
  *) fail "cases.txt: '$name' has the unknown status '$status'" ;;
  esac
done <"$fix/cases.txt"

# Every fixture belongs to a listed case; corpus files nobody listed are named
# (not failed: the corpus lives outside this repository and may grow).
for d in "$fix"/*/; do
  d=$(basename "$d")
  case "$listed" in *" $d "*) ok ;; *) fail "testsuite/e2e/corpus/$d is not in cases.txt" ;; esac
done
for f in "$corpus"/*.mil; do
  f=$(basename "$f" .mil)
  case "$listed" in *" $f "*) ;; *) echo "NOTE: corpus program $f is not in testsuite/e2e/corpus/cases.txt" ;; esac
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
