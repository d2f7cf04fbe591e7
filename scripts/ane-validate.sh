#!/usr/bin/env bash
# Validates the ane backend on a Mac and collects what it found into one
# directory and a .tar.gz of it, to send back (docs/ane-backend.md,
# "Validating on a Mac"). The steps, each logged, none stopping the others:
#   1. the system: macOS version and build, the chip, orion's commit;
#   2. orion-run probe: the chip's figures for constraints/ane_constraints.json;
#   3. the weight-update self-test, where this build has one;
#   4. the examples on the backend against their independent references
#      (testsuite/e2e/, ane-numerics tolerance), with orion-run -v's report;
#   5. a short training run (examples/train/tiny.oir, 20 steps) on the
#      backend and on the CPU, the two loss logs side by side.
#
#   scripts/ane-validate.sh [--build DIR] [--out DIR] [--chip NAME] [--standin]
#
# Off macOS there is no Neural Engine to validate: the script says so and
# stops, unless --standin asks it to run the same steps on this build's ane
# backend against the Linux stand-in (or on the cpu backend where the ane
# backend is not built), which checks the script, not the device.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out= chip= standin=0
usage() { echo "usage: scripts/ane-validate.sh [--build DIR] [--out DIR] [--chip NAME] [--standin]"; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --chip) chip=${2:?--chip needs a name}; shift 2 ;;
    --chip=*) chip=${1#*=}; shift ;;
    --standin) standin=1; shift ;;
    -h|--help) usage; sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ane-validate.sh: error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
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
backend=ane
if ! "$run" probe --backend=ane --only dialect >/dev/null 2>&1; then
  if [ $standin = 1 ]; then backend=cpu; fi
fi
out=${out:-$PWD/ane-validation-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/work" || exit 1
export ORION_CACHE_DIR="$out/work/cache"
summary=$out/SUMMARY.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { # step NAME CMD...: runs CMD with its output in NAME.log, notes the result
  local name=$1
  shift
  echo "\$ $*" >"$out/$name.log"
  if "$@" >>"$out/$name.log" 2>&1; then note "ok      $name"; else note "FAILED  $name (exit $?, see $name.log)"; fi
}
note "orion ane validation, $(date -u +%Y-%m-%dT%H:%M:%SZ), backend $backend$([ $standin = 1 ] && echo ' (--standin)')"

# 1. The system.
{
  echo "uname: $(uname -a)"
  command -v sw_vers >/dev/null && sw_vers
  command -v sysctl >/dev/null && sysctl -n machdep.cpu.brand_string 2>/dev/null
  echo "orion: $("$run" --version) $(git -C "$root" rev-parse HEAD 2>/dev/null) $(git -C "$root" status --porcelain 2>/dev/null | wc -l | tr -d ' ') changed files"
} >"$out/system.txt" 2>&1
note "ok      system (system.txt)"

# 2. The probes.
probe_args=(--backend="$backend" -v -o "$out/probe.json")
[ -n "$chip" ] && probe_args+=(--chip="$chip")
step probe "$run" probe "${probe_args[@]}"

# 3. The weight-update self-test, once the backend has one.
if "$run" --help 2>/dev/null | grep -q 'orion-run self-test'; then
  step self-test "$run" self-test --backend="$backend"
else
  note "skipped self-test (this orion-run has no self-test command yet)"
fi

# 4. The examples against their references.
fix=$root/testsuite/e2e/examples
example() { # example NAME OUTPUT INPUTS...
  local name=$1 output=$2 args=()
  shift 2
  for i in "$@"; do args+=(--input "${i%%=*}=$fix/$name/${i#*=}"); done
  "$orionc" -w -o "$out/work/$name.anepkg" "$root/examples/$name.oir" &&
    "$run" --backend="$backend" -v "$out/work/$name.anepkg" "${args[@]}" --output-dir "$out/work/$name.out" &&
    if [ -x "$compare" ]; then "$compare" "$out/work/$name.out/$output.npy" "$fix/$name/$output.npy" --atol 1e-2 --rtol 1e-2
    else echo "no npy_compare in $build: outputs not compared"; fi
}
step example-tiny_mlp example tiny_mlp probs x=x.npy
step example-gpt2_block example gpt2_block hidden x=x.npy

# 5. A short training run, on the backend and on the CPU.
train() { # train BACKEND
  "$orionc" -w --train "$root/examples/train/tiny.oir" -o "$out/work/tiny-$1.anepkg" &&
    "$run" train "$out/work/tiny-$1.anepkg" --backend="$1" --data "$root/examples/train/tiny.tokens.bin" --steps 20 \
      --lr 0.05 --log "$out/train-$1.jsonl"
}
step train-$backend train "$backend"
[ "$backend" != cpu ] && step train-cpu train cpu

rm -rf "$out/work"
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" && note "wrote $out.tar.gz: attach it to issue 15"
