#!/usr/bin/env bash
# `orion-run patch --verify` compiles through the compile library: it works
# from an orion-run with no orionc beside it and none on PATH (it used to
# start the orionc installed beside it), replays the options the manifest
# recorded (a target and a pass plugin among them), and still finds a package
# that differs.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
make_st="python3 $(realpath "$3")"
plugin=$(realpath "$4")
. "$(dirname "$0")/lib.sh"

mkdir alone
cp "$run" alone/orion-run
if [ -e alone/orionc ] || PATH=/usr/bin:/bin command -v orionc >/dev/null; then fail "setup: an orionc is reachable"; fi

cat >m.oir <<'EOT'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = normal(seed=1, std=0.1);
  param b: fp16[4] = zeros;
  y = linear(x, w, b);
  return y;
}
EOT
check compile 0 "$orionc" --no-lint --no-dedup --target=ios16 -o m.anepkg m.oir
$make_st new.safetensors w=F32:4x4:0.5,0,0,0,0,0.5,0,0,0,0,0.5,0,0,0,0,0.5 b=F16:4:fill=1
check verify 0 env PATH=/usr/bin:/bin alone/orion-run patch m.anepkg --weights new.safetensors --verify -v
contains verify "orion-run: verifying with a fresh compile: --no-lint --no-dedup --target=ios16 --weights-override=$(pwd -P)/new.safetensors -o "
contains verify "m.anepkg: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs"
if grep -q "program(1.0)" m.anepkg/model.mil; then pass; else fail "the package is not ios16's"; fi

# Changed by hand after the patch: the fresh compile's weights differ.
printf '\x00\x38' | dd of=m.anepkg/weights/weight.bin bs=1 seek=128 conv=notrunc status=none
$make_st same.safetensors b=F16:4:fill=1
check verify-differs 1 env PATH=/usr/bin:/bin alone/orion-run patch m.anepkg --weights same.safetensors --verify
contains verify-differs "orion-run: error: --verify: m.anepkg/weights/weight.bin differs from a fresh compile at byte 128 (weight 'w')"

# A pass plugin recorded in the manifest is loaded by orion-run itself, which exports the pass API.
printf 'func main(x: fp16[1,4]) {\n  param b: fp16[4] = zeros;\n  y = add(x, b);\n  r = relu(y);\n  return r;\n}\n' >p.oir
check compile-plugin 0 "$orionc" --no-lint --load-pass="$plugin" --passes=inline,relu-to-max,io-legalize,sram-annotate \
  -o p.anepkg p.oir
check verify-plugin 0 env PATH=/usr/bin:/bin alone/orion-run patch p.anepkg --weights same.safetensors --verify
contains verify-plugin "p.anepkg: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs"
finish
