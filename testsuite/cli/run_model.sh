#!/usr/bin/env bash
# The runtime API's example program (examples/runtime/run_model.c) on a compiled
# example: what it lists, that its outputs are orion-run's to the byte, and that
# a weight patched while it runs reaches its second run after --reload.
# Usage: run_model.sh ORIONC ORION_RUN RUN_MODEL MAKE_SAFETENSORS SOURCE_ROOT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
run_model=$(realpath "$3")
make_st=$(realpath "$4")
root=$(realpath "$5")
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
check() { # check NAME STATUS CMD...   (output in $tmp/out)
  local name=$1 want=$2
  shift 2
  "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name: exit $got, expected $want"; cat "$tmp/out"; fi
}
contains() { # contains NAME TEXT [FILE]
  if grep -qF -- "$2" "${3:-$tmp/out}"; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: $1: output lacks '$2'"; cat "${3:-$tmp/out}"; fi
}
cd "$tmp" || exit 1
x=$root/testsuite/e2e/examples/tiny_mlp/x.npy

check compile 0 "$orionc" -w --no-dedup -o m.anepkg "$root/examples/tiny_mlp.oir"
mkdir ours theirs
check run 0 "$run_model" m.anepkg --numerics fp32 --input "x=$x" --output-dir ours
contains list "m.anepkg: 1 function(s)"
contains list "  [0] main"
contains list "function main: 1 input(s), 1 output(s), 4 weight(s), generation 0"
contains list "  input  x: fp16[1, 16] binding 0, 32 bytes"
contains list "  output probs: fp16[1, 10] binding 0, 20 bytes"
contains list "prepared: fp32 numerics"
contains summary "  probs: min "
check orion-run 0 "$run" --numerics=fp32 m.anepkg --input "x=$x" --output-dir theirs
if cmp -s ours/probs.npy theirs/probs.npy; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAIL: run_model's probs.npy differs from orion-run's"; fi

# Synthetic inputs, ane numerics, and errors.
check synthetic 0 "$run_model" m.anepkg
contains synthetic "  x: synthetic"
contains synthetic "prepared: ane numerics"
check no-function 1 "$run_model" m.anepkg --function nope
contains no-function "run_model: no function 'nope'"
check missing 1 "$run_model" nope.anepkg
contains missing "cannot open 'nope.anepkg'"
check usage 1 "$run_model"
contains usage "usage: run_model"
# getopt_long: --opt=VALUE as well as --opt VALUE.
check numerics-eq 0 "$run_model" --numerics=fp32 m.anepkg
contains numerics-eq "prepared: fp32 numerics"
check unknown-option 1 "$run_model" --numerix=fp32 m.anepkg
contains unknown-option "usage: run_model"

# --reload: the program waits after its first run; the package is patched
# meanwhile (fc2.bias = [20, 0, ...] makes probs[0] 1 in fp16), then reloaded.
python3 "$make_st" new.safetensors fc2.bias=F32:10:20,0,0,0,0,0,0,0,0,0
mkfifo go
"$run_model" m.anepkg --numerics fp32 --input "x=$x" --reload <go >reload.out 2>&1 &
pid=$!
exec 3>go
# Until it asks, or ends: no deadline of its own (a loaded machine may be slow to get there).
while ! grep -q "press Enter" reload.out; do
  case $(ps -o stat= -p "$pid" 2>/dev/null) in "" | Z*) break ;; esac
  sleep 0.05
done
contains reload-wait "waiting: patch the package's weights, then press Enter" reload.out
check patch 0 "$run" patch m.anepkg --weights new.safetensors
echo >&3
exec 3>&-
wait "$pid"
status=$?
pid=
if [ "$status" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: reload: exit $status"; cat reload.out; fi
contains reload "reload: new weights, generation 1" reload.out
contains reload "max 1 mean" reload.out
contains reload "first 1 " reload.out

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
