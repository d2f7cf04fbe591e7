#!/usr/bin/env bash
# Delta patching of every example: compiled as shipped (weights shared only
# by identity), every weight patched with independent new values, the package
# must equal a fresh compile with those weights (weight file byte for byte,
# outputs bit for bit); patched back with the original values, its weight
# file and outputs must equal the original exactly. Params that merely start
# equal (every `ones` gain, every `zeros` bias) take different values here,
# which the patcher refused while they shared a blob.
# Usage: patch_examples.sh ORIONC ORION_RUN PACKAGE_WEIGHTS_PY SOURCE_ROOT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
weights="python3 $(realpath "$3")"
root=$(realpath "$4")
. "$(dirname "$0")/lib.sh"

# outputs_equal NAME PKG_A PKG_B INPUTS...: both packages run to the same output bytes.
outputs_equal() {
  local name=$1 a=$2 b=$3 f
  shift 3
  rm -rf out_a out_b && mkdir out_a out_b
  check "$name-run-a" 0 "$run" "$a" "$@" --output-dir out_a
  check "$name-run-b" 0 "$run" "$b" "$@" --output-dir out_b
  for f in out_a/*.npy; do same_bytes "$name-output" "$f" "out_b/${f#out_a/}"; done
}

# patch_roundtrip NAME INPUTS...   (INPUTS: NAME=FILE of the e2e fixtures)
patch_roundtrip() {
  local name=$1 src=$root/examples/$1.oir i
  shift
  local args=()
  for i in "$@"; do args+=(--input "${i%%=*}=$root/testsuite/e2e/examples/$name/${i#*=}"); done
  rm -rf orig.anepkg p.anepkg fresh.anepkg
  check "$name-compile" 0 "$orionc" -w -o orig.anepkg "$src"
  # Every param, by its inlined name (the manifest's); consts are not weights to patch.
  mapfile -t params < <("$orionc" -w --emit=oir --inline "$src" | sed -n 's/^ *param \([^:]*\):.*/\1/p')
  [ "${#params[@]}" -gt 0 ] && pass || fail "$name: no params found"
  check "$name-old-weights" 0 $weights orig.anepkg old.safetensors --current "${params[@]}"
  check "$name-new-weights" 0 $weights orig.anepkg new.safetensors --random 7 "${params[@]}"
  cp -r orig.anepkg p.anepkg
  check "$name-patch" 0 "$run" patch p.anepkg --weights new.safetensors
  contains "$name-patch" "p.anepkg: ${#params[@]} weights patched"
  check "$name-fresh" 0 "$orionc" -w --weights-override="$PWD/new.safetensors" -o fresh.anepkg "$src"
  same_bytes "$name-patched-weights" p.anepkg/weights/weight.bin fresh.anepkg/weights/weight.bin
  same_bytes "$name-patched-mil" p.anepkg/model.mil fresh.anepkg/model.mil
  outputs_equal "$name-patched" p.anepkg fresh.anepkg "${args[@]}"
  rm -rf out_o && mkdir out_o
  "$run" orig.anepkg "${args[@]}" --output-dir out_o >/dev/null 2>&1
  if diff -rq out_o out_a >/dev/null; then fail "$name: the new weights do not change the outputs"; else pass; fi
  check "$name-patch-back" 0 "$run" patch p.anepkg --weights old.safetensors
  same_bytes "$name-restored-weights" p.anepkg/weights/weight.bin orig.anepkg/weights/weight.bin
  outputs_equal "$name-restored" p.anepkg orig.anepkg "${args[@]}"
}

patch_roundtrip tiny_mlp x=x.npy
patch_roundtrip gpt2_block x=x.npy
patch_roundtrip llama_block tokens=tokens.npy cos=cos.npy sin=sin.npy
finish
