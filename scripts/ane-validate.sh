#!/usr/bin/env bash
# Validates the ane backend on a Mac and collects what it found into one
# directory and a .tar.gz of it, to send back (docs/ane-backend.md,
# "Validating on a Mac"). The steps, each logged, none stopping the others:
#   1. the system: macOS version and build, the chip, orion's commit;
#   2. orion-run probe: the chip's figures for constraints/ane_constraints.json;
#   3. the weight-update self-test: orion-run patch --backend ane --verify of
#      a small package, whose first update runs the self-test (a fresh
#      choice: the script's own cache) and checks the chosen strategy's
#      program bit for bit against a fresh compile;
#   4. the examples on the backend against their independent references
#      (testsuite/e2e/, ane-numerics tolerance), with orion-run -v's report;
#   5. a short training run (examples/train/tiny.oir, 20 steps) on the
#      backend and on the CPU, the two loss logs side by side.
# SUMMARY.txt says ok, FAILED or skipped per step; the exit status is 1 if
# a step FAILED, else 0 (2 for a usage error, 1 for a missing build).
#
#   scripts/ane-validate.sh [--build DIR] [--out DIR] [--chip NAME] [--quick] [--standin]
#
# --quick probes only the minimum surface and concat (a try of the script in
# seconds; the figures to send come from a run without it). Off macOS there
# is no Neural Engine to validate: the script says so and stops, unless
# --standin asks it to run the same steps on this build's ane backend
# against the Linux stand-in (BUILD/testsuite/ane/libane_standin.so, or
# $ORION_ANE_FRAMEWORK; no pause after a rejection, the stand-in's compiler
# never restarts), or on the cpu backend where the ane backend is not
# built: a check of the script, not of the device (meson test ane-validate).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out='' chip='' standin=0 quick=0
usage() { echo "usage: scripts/ane-validate.sh [--build DIR] [--out DIR] [--chip NAME] [--quick] [--standin]"; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --chip) chip=${2:?--chip needs a name}; shift 2 ;;
    --chip=*) chip=${1#*=}; shift ;;
    --quick) quick=1; shift ;;
    --standin) standin=1; shift ;;
    -h|--help) usage; sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ane-validate.sh: error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$(uname -s)" = Darwin ] && [ $standin = 1 ]; then
  echo "ane-validate.sh: error: --standin is for machines without a Neural Engine: on macOS the steps run on the" \
    "device itself (run the script without --standin)" >&2
  exit 2
fi
if [ "$(uname -s)" != Darwin ] && [ $standin = 0 ]; then
  echo "ane-validate.sh: error: this validates the ane backend on a Mac (Apple silicon, macOS); this machine runs" \
    "$(uname -s), which has no Neural Engine. Run it with --standin to try the steps against this build's" \
    "stand-in (a check of the script, not of the device)." >&2
  exit 2
fi
orionc=$build/driver/orionc run=$build/driver/orion-run compare=$build/testsuite/npy_compare
for tool in "$orionc" "$run"; do
  if [ ! -x "$tool" ]; then
    echo "ane-validate.sh: error: $tool is missing: build orion first (meson setup build && ninja -C build)" >&2
    exit 1
  fi
done
if [ $standin = 1 ] && [ -z "${ORION_ANE_FRAMEWORK:-}" ] && [ -f "$build/testsuite/ane/libane_standin.so" ]; then
  export ORION_ANE_FRAMEWORK=$build/testsuite/ane/libane_standin.so
fi
out=${out:-$PWD/ane-validation-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/work" || exit 1
export ORION_CACHE_DIR="$out/work/cache"
# The weight-update self-test's cached choice: the script's own, so that the
# self-test runs here whatever an earlier run cached (a copy is kept).
export XDG_CACHE_HOME="$out/work/xdg"
summary=$out/SUMMARY.txt
: >"$summary"
oks=0 failures=0 skips=0
note() { echo "$*" | tee -a "$summary"; }
step() { # step NAME CMD...: runs CMD with its output in NAME.log, notes the result
  local name=$1
  shift
  : >"$out/$name.log"
  if "$@" >>"$out/$name.log" 2>&1; then
    note "ok      $name"
    oks=$((oks + 1))
  else
    note "FAILED  $name (exit $?, see $name.log)"
    failures=$((failures + 1))
  fi
}
skip() { # skip NAME WHY
  note "skipped $1 ($2)"
  skips=$((skips + 1))
}
logged() { # logged CMD...: CMD, its command line first in the step's log
  echo "\$ $*"
  "$@"
}

# On a Mac every step is the device's, whatever it answers; off macOS the
# stand-in's where its ane backend opens, else the cpu backend's.
backend=ane
if [ $standin = 1 ] && ! "$run" probe --backend=ane --only dialect --pace 0 >"$out/work/ane-open.log" 2>&1; then
  backend=cpu
fi
note "orion ane validation, $(date -u +%Y-%m-%dT%H:%M:%SZ), backend $backend$([ $standin = 1 ] && echo ' (--standin)')"
if [ $backend = cpu ]; then
  note "        (the ane backend does not open here: $(grep -m1 'error:' "$out/work/ane-open.log"))"
fi

# 1. The system.
{
  echo "uname: $(uname -a)"
  command -v sw_vers >/dev/null && sw_vers
  command -v sysctl >/dev/null && sysctl -n machdep.cpu.brand_string 2>/dev/null
  echo "orion: $("$run" --version) $(git -C "$root" rev-parse HEAD 2>/dev/null) $(git -C "$root" status --porcelain 2>/dev/null | wc -l | tr -d ' ') changed files"
} >"$out/system.txt" 2>&1
note "ok      system (system.txt)"
oks=$((oks + 1))

# 2. The probes; what they found goes into the summary too.
probe_args=(--backend="$backend" -v -o "$out/probe.json")
[ -n "$chip" ] && probe_args+=(--chip="$chip")
[ $quick = 1 ] && probe_args+=(--only 'surface,concat')
[ $standin = 1 ] && probe_args+=(--pace 0)
step probe logged "$run" probe "${probe_args[@]}"
sed -n '/^orion-run probe: found$/,/^orion-run probe: wrote /p' "$out/probe.log" | sed '1d;$d;s/^ */        /' |
  tee -a "$summary"

# 3. The weight-update self-test, run by the first update of a program the
# backend holds: y = x * w with w patched from 0.5 to 2.
self_test() {
  local dir=$out/work/self-test i
  mkdir -p "$dir" || return
  printf '%s\n' 'func main(x: fp16[1,4,1,8]) {' '  param w: fp16[1,4,1,8] = fill(0.5);' '  y = mul(x, w);' \
    '  return y;' '}' >"$dir/scale.oir"
  local dict="{'descr': '<f2', 'fortran_order': False, 'shape': (1, 4, 1, 8), }"
  { # a .npy v1 of 32 fp16 2.0s (octal escapes: macOS's bash 3.2 printf)
    printf '\223NUMPY\001\000\166\000%s' "$dict"
    printf "%$((128 - 10 - ${#dict} - 1))s\n" ''
    for i in 1 2 3 4 5 6 7 8; do printf '\000\100\000\100\000\100\000\100'; done
  } >"$dir/w.npy"
  logged "$orionc" -w -o "$dir/scale.anepkg" "$dir/scale.oir" &&
    logged "$run" patch "$dir/scale.anepkg" --weight "w=$dir/w.npy" --backend "$backend" -v --verify="$dir/scale.oir"
}
if [ $backend = ane ]; then
  step self-test self_test
  sed -n 's/^orion-run: backend ane: \(weights updated by .*\)/        \1/p' "$out/self-test.log" | tee -a "$summary"
  cp "$XDG_CACHE_HOME"/orion/ane-update-* "$out/" 2>/dev/null
else
  skip self-test "the cpu backend has no weight-update self-test"
fi

# 4. The examples against their references.
fix=$root/testsuite/e2e/examples
example() { # example NAME INPUT=FILE...: examples/NAME.oir compiled and run on the backend
  local name=$1 args=() i
  shift
  for i in "$@"; do args+=(--input "${i%%=*}=$fix/$name/${i#*=}"); done
  logged "$orionc" -w -o "$out/work/$name.anepkg" "$root/examples/$name.oir" &&
    logged "$run" --backend="$backend" -v "$out/work/$name.anepkg" "${args[@]}" --output-dir "$out/work/$name.out"
}
compared() { # compared NAME OUTPUT COMPARE_ARGS...: NAME's OUTPUT against its reference
  local got=$out/work/$1.out/$2.npy
  shift 2
  if [ -x "$compare" ]; then logged "$compare" "$got" "$@"; else echo "no npy_compare in $build: $got not compared"; fi
}
tolerance="--atol 1e-2 --rtol 1e-2"
# shellcheck disable=SC2086
example_tiny_mlp() { example tiny_mlp x=x.npy && compared tiny_mlp probs "$fix/tiny_mlp/probs.npy" $tolerance; }
# shellcheck disable=SC2086
example_gpt2_block() { example gpt2_block x=x.npy && compared gpt2_block hidden "$fix/gpt2_block/hidden.npy" $tolerance; }
# int32 token ids: run in parts (the embedding's gather on the CPU); the
# reference holds 4 of the logits' rows and every row's norm (testsuite/cli/e2e.sh).
# shellcheck disable=SC2086
example_llama_block() {
  example llama_block tokens=tokens.npy cos=cos.npy sin=sin.npy &&
    compared llama_block logits "$fix/llama_block/logits_rows.npy" --rows 0,21,42,63 $tolerance &&
    compared llama_block logits --row-norms "$fix/llama_block/logits_norms.npy" --rtol 2e-3
}
step example-tiny_mlp example_tiny_mlp
step example-gpt2_block example_gpt2_block
step example-llama_block example_llama_block

# 5. A short training run, on the backend and on the CPU.
train() { # train BACKEND
  logged "$orionc" -w --train "$root/examples/train/tiny.oir" -o "$out/work/tiny-$1.anepkg" &&
    logged "$run" train "$out/work/tiny-$1.anepkg" --backend="$1" --data "$root/examples/train/tiny.tokens.bin" \
      --steps 20 --lr 0.05 --log "$out/train-$1.jsonl"
}
final_loss() { # final_loss BACKEND: the last step's loss in its log, or "none"
  local loss
  loss=$(tail -n 1 "$out/train-$1.jsonl" 2>/dev/null | sed -n 's/.*"loss":\([^,]*\),.*/\1/p')
  echo "${loss:-none}"
}
step train-$backend train "$backend"
[ "$backend" != cpu ] && step train-cpu train cpu
note "        final loss after 20 steps: $backend $(final_loss "$backend")$([ "$backend" != cpu ] &&
  echo ", cpu $(final_loss cpu)") (train-*.jsonl)"

note "$oks ok, $failures FAILED, $skips skipped"
rm -rf "$out/work"
if tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"; then
  echo "wrote $out.tar.gz: attach it to issue 15"
else
  echo "ane-validate.sh: error: could not write $out.tar.gz (the results are in $out)" >&2
  failures=$((failures + 1))
fi
[ $failures = 0 ]
