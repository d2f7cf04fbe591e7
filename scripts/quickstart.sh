#!/usr/bin/env bash
# Installs what is missing, builds orion, and runs the main job on a shipped
# example: compile the GPT-2-style block, print its canonical IR and a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
example=${1:-examples/gpt2_block.oir}
./build/driver/orionc --emit=oir --summary "$example"
