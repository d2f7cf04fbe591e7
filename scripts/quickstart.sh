#!/usr/bin/env bash
# The README's main job: installs what is missing (scripts/setup.sh), builds
# orion, then runs examples/generate/fortunes/run.sh, which trains a small
# llama on Debian's fortunes with a BPE learned by orion-tokenize train
# (printing the loss as it falls), turns the trained weights into a Hugging
# Face llama directory, converts and compiles it, and generates text from a
# prompt (printing the text and the tokens/s).
#
#   bash scripts/quickstart.sh              # the main job
#   bash scripts/quickstart.sh MODEL.oir    # instead: compile MODEL.oir, print its
#                                           # canonical IR and summary, inspect the package
#
# With examples/gpt2_block.oir (the quick start of earlier versions) it also
# runs the package on the CPU reference backend with ANE numerics on an input
# of ones.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
if [ $# = 0 ]; then
  exec bash examples/generate/fortunes/run.sh
fi
example=$1
name=$(basename "${example%.oir}")
package="build/$name.anepkg"
./build/driver/orionc --emit=oir "$example"
./build/driver/orionc --summary -o "$package" "$example"
./build/driver/orion-inspect --no-weights "$package"

# An fp16 input of ones for the example's [1,64,768] input: numpy's .npy v1
# header (128 bytes) and 49152 values of 0x3c00.
if [ "$example" = examples/gpt2_block.oir ]; then
  out="build/$name.out"
  mkdir -p "$out"
  dict="{'descr': '<f2', 'fortran_order': False, 'shape': (1, 64, 768), }"
  { printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s" ''; printf '\n'
    python3 -c 'import sys; sys.stdout.buffer.write(b"\x00\x3c" * (64 * 768))'; } >"$out/x.npy"
  ./build/driver/orion-run --repeat 3 "$package" --input "x=$out/x.npy" --output-dir "$out"
  echo "wrote $out/hidden.npy"
fi
