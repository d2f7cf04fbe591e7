#!/usr/bin/env bash
# Installs what is missing, builds orion, and runs the main job on a shipped
# example: compile the GPT-2-style model to a package, print its canonical IR
# and a summary, and inspect the package (checksums verified).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
example=${1:-examples/gpt2_block.oir}
package="build/$(basename "${example%.oir}").anepkg"
./build/driver/orionc --emit=oir "$example"
./build/driver/orionc --summary -o "$package" "$example"
./build/driver/orion-inspect --no-weights "$package"
