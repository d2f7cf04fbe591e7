#!/usr/bin/env bash
# LoRA adapters as inputs end to end: orionc --lora gives a program adapter
# inputs; orion-run --adapter binds a PEFT-named safetensors file to them.
# Outputs are checked against values worked out by hand; no adapter gives
# exactly the base model's outputs (also on the GPT-2 block example);
# swapping adapters changes nothing in the package; bad adapters get clear
# messages.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
make_st="python3 $(realpath "$3")"
root=$(realpath "$4")
. "$(dirname "$0")/lib.sh"

# y = x W^T with W = 0.25 everywhere: x = [1, 2, 3, 4] gives 2.5 in each column.
cat >l.oir <<'EOF'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = fill(0.25);
  param b: fp16[4] = zeros;
  y = linear(x, w, b);
  return y;
}
EOF
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy
check compile-base 0 "$orionc" -o base.anepkg l.oir
check compile-lora 0 "$orionc" --lora=w:1:2 -o lora.anepkg l.oir
mkdir ob ol oa oc
check run-base 0 "$run" base.anepkg --input x=x.npy --output-dir ob
npy16 '(1, 4)' '\x00\x41\x00\x41\x00\x41\x00\x41' want_base.npy
same_bytes base ob/y.npy want_base.npy
check run-no-adapter 0 "$run" lora.anepkg --input x=x.npy --output-dir ol
same_bytes no-adapter ol/y.npy want_base.npy
# A = [1, 0, 0, 0] (rank 1), B = [1, 2, 3, 4]^T, scale alpha/r = 2:
# x A^T = 1, times B = [1, 2, 3, 4], times 2, plus 2.5 = [4.5, 6.5, 8.5, 10.5].
$make_st a1.safetensors base_model.model.w.lora_A.weight=F32:1x4:1,0,0,0 base_model.model.w.lora_B.weight=F32:4x1:1,2,3,4
before=$(cat lora.anepkg/Manifest.plist lora.anepkg/weights/weight.bin lora.anepkg/model.mil | cksum)
check run-adapter 0 "$run" lora.anepkg --input x=x.npy --adapter a1.safetensors --output-dir oa
npy16 '(1, 4)' '\x80\x44\x80\x46\x40\x48\x40\x49' want_a1.npy
same_bytes adapter oa/y.npy want_a1.npy
# Another adapter on the same package, in PEFT's other spelling (".default" and no prefix), fp16 data:
# A = [0, 0, 0, 1] gives x A^T = 4; B = [0.5, 0, 0, -1]: 2.5 + 2 * [2, 0, 0, -4] = [6.5, 2.5, 2.5, -5.5].
$make_st a2.safetensors w.lora_A.default.weight=F16:1x4:0,0,0,1 w.lora_B.default.weight=F16:4x1:0.5,0,0,-1
check run-swap 0 "$run" lora.anepkg --input x=x.npy --adapter a2.safetensors --output-dir oc
npy16 '(1, 4)' '\x80\x46\x00\x41\x00\x41\x80\xc5' want_a2.npy
same_bytes swap oc/y.npy want_a2.npy
after=$(cat lora.anepkg/Manifest.plist lora.anepkg/weights/weight.bin lora.anepkg/model.mil | cksum)
if [ "$before" = "$after" ]; then pass; else fail "swapping adapters changed the package"; fi
# Hugging Face models nest modules one level deeper ("model.w" for the program's "w"): matched by the tail.
$make_st hf.safetensors base_model.model.model.w.lora_A.weight=F32:1x4:1,0,0,0 base_model.model.model.w.lora_B.weight=F32:4x1:1,2,3,4
check run-hf-names 0 "$run" lora.anepkg --input x=x.npy --adapter hf.safetensors --output-dir oc
same_bytes hf-names oc/y.npy want_a1.npy
# A zero adapter is the base model, bit for bit.
$make_st zero.safetensors w.lora_A=F32:1x4:fill=0 w.lora_B=F32:4x1:fill=0
check run-zero 0 "$run" lora.anepkg --input x=x.npy --adapter zero.safetensors --output-dir oc
same_bytes zero oc/y.npy want_base.npy

# Bad adapters.
$make_st r2.safetensors w.lora_A.weight=F32:2x4:fill=0 w.lora_B.weight=F32:4x2:fill=0
check wrong-rank 1 "$run" lora.anepkg --input x=x.npy --adapter r2.safetensors
contains wrong-rank "orion-run: error: r2.safetensors: adapter tensor 'w.lora_A.weight' is F32[2,4], but input 'w.lora_A' is fp16[1,4] (a different rank r needs a compile with that rank)"
$make_st other.safetensors base_model.model.v.lora_A.weight=F32:1x4:fill=0
check unknown-module 1 "$run" lora.anepkg --input x=x.npy --adapter other.safetensors
contains unknown-module "orion-run: error: other.safetensors: adapter tensor 'base_model.model.v.lora_A.weight' has no LoRA input 'v.lora_A' in the program (compile with orionc --lora=PATTERN:RANK for the layers it adapts)"
$make_st nan.safetensors w.lora_A=F32:1x4:nan-at=1
check nan 1 "$run" lora.anepkg --input x=x.npy --adapter nan.safetensors
contains nan "orion-run: error: nan.safetensors: adapter tensor 'w.lora_A' has NaN at index 1, which fp16 cannot hold"
npy16 '(1, 4)' '\x00\x00\x00\x00\x00\x00\x00\x00' z.npy
check both 1 "$run" lora.anepkg --input x=x.npy --input w.lora_A=z.npy --adapter a1.safetensors
contains both "orion-run: error: input 'w.lora_A' is given both by --input and by the adapter"
# Of two inputs whose names end a key, the longer (more specific) one is meant: "model.a.w" is a.w, not w.
cat >two.oir <<'EOF'
func main(x: fp16[1,4]) {
  param w.weight: fp16[4,4] = fill(0.25);
  param a.w.weight: fp16[4,4] = fill(0.5);
  y = linear(x, w.weight);
  z = linear(x, a.w.weight);
  return y, z;
}
EOF
check compile-two 0 "$orionc" --lora='*w:1' -o two.anepkg two.oir
$make_st two.safetensors model.a.w.lora_A.weight=F32:1x4:1,0,0,0 model.a.w.lora_B.weight=F32:4x1:1,2,3,4
mkdir o2
check two-run 0 "$run" two.anepkg --input x=x.npy --adapter two.safetensors --output-dir o2
# z = 5 + [1, 2, 3, 4]; y keeps 2.5 (its adapter inputs got zeros).
npy16 '(1, 4)' '\x00\x46\x00\x47\x00\x48\x80\x48' want_z.npy
same_bytes two-z o2/z.npy want_z.npy
same_bytes two-y o2/y.npy want_base.npy
check bad-spec 2 "$orionc" --lora=w -o x.anepkg l.oir
contains bad-spec "orionc: error: '--lora=w' is not --lora=PATTERN:RANK[:ALPHA] (RANK from 1 to 4096)"

# The GPT-2 block with adapters on its attention and MLP projections: without
# an adapter its outputs are the base program's, bit for bit.
cp "$root/examples/gpt2_block.oir" .
check gpt2-base 0 "$orionc" -o g.anepkg gpt2_block.oir
check gpt2-lora 0 "$orionc" --lora='*.c_attn:8' --lora='*.mlp.c_*:4:8' -o gl.anepkg gpt2_block.oir
grep -c '\.lora_[AB]' gl.anepkg/Manifest.plist >count
if [ "$(cat count)" -ge 12 ]; then pass; else fail "gpt2-lora: expected 12 adapter inputs in the manifest"; fi
python3 -c "
import random, struct, sys
r = random.Random(7)
d = \"{'descr': '<f2', 'fortran_order': False, 'shape': (1, 64, 768), }\"
h = d + ' ' * (128 - 10 - len(d) - 1) + '\\n'
sys.stdout.buffer.write(b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(h)) + h.encode())
sys.stdout.buffer.write(struct.pack('<%de' % (64 * 768), *[r.uniform(-1, 1) for _ in range(64 * 768)]))
" >gx.npy
mkdir g1 g2
check gpt2-run-base 0 "$run" g.anepkg --input x=gx.npy --output-dir g1
check gpt2-run-lora 0 "$run" gl.anepkg --input x=gx.npy --output-dir g2
same_bytes gpt2-no-adapter g1/hidden.npy g2/hidden.npy

finish
