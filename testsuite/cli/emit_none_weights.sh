#!/usr/bin/env bash
# orionc --emit=none checks the weights' values as a real compile does (it
# makes each weight as the package writer would, one at a time, and drops
# it): NaN, values beyond fp16's range (--clamp-fp16 turns those into a
# warning), from safetensors files and from initializers alike, with the
# same messages and exit status as writing the package.
set -u
orionc=$(realpath "$1")
make_st="python3 $(realpath "$2")"
source "$(dirname "$0")/lib.sh"

$make_st w.safetensors nan=F32:4x4:nan-at=5 nan16=F16:4x4:nan-at=15 big=F32:4x4:fill=1e6 ok=F32:4x4:seed=1 || exit 1
program() { # program FILE PARAM-DECLARATION
  printf 'func main(x: fp16[1,4]) {\n  param w: fp16[4,4] = %s;\n  y = linear(x, w);\n  return y;\n}\n' "$2" >"$1"
}
program nan.oir 'safetensors("w.safetensors", "nan")'
program nan16.oir 'safetensors("w.safetensors", "nan16")'
program big.oir 'safetensors("w.safetensors", "big")'
program random.oir 'normal(seed=1, std=100000.0)'
program ok.oir 'safetensors("w.safetensors", "ok")'

# same_as_compile NAME STATUS FILE [OPTIONS...]: --emit=none and a package write agree.
same_as_compile() {
  local name=$1 want=$2 file=$3
  shift 3
  check "$name emit=none" "$want" "$orionc" --emit=none "$@" "$file"
  cp out none.out
  check "$name package" "$want" "$orionc" --no-cache -o "$name.anepkg" "$@" "$file"
  if cmp -s none.out out; then pass; else fail "$name: --emit=none and the compile report differently"; diff none.out out; fi
  cp none.out out
}
same_as_compile nan 1 nan.oir
contains nan "nan.oir:2:9: error: weight 'w' from 'w.safetensors' ('nan') has NaN at index 5"
same_as_compile nan16 1 nan16.oir
contains nan16 "has NaN at index 15"
same_as_compile big 1 big.oir
contains big "error: weight 'w' from 'w.safetensors' ('big')"
same_as_compile big-clamped 0 big.oir --clamp-fp16
contains big-clamped "warning: weight 'w' from 'w.safetensors' ('big')"
same_as_compile random 1 random.oir
contains random "random.oir:2:9: error: weight 'w' from normal(seed=1, mean=0, std=100000) has the value"
same_as_compile ok 0 ok.oir
# --no-weight-check opens no weight file, so it checks no value either.
check no-weight-check 0 "$orionc" --emit=none --no-weight-check nan.oir

finish
