#!/usr/bin/env bash
# orion-run --backend=ane end to end against the Linux stand-in framework
# (ORION_ANE_FRAMEWORK): the examples and a program of several inputs and
# outputs whose declared order is not ASCII order give the cpu backend's
# bytes in ane numerics (the backend binds by the manifest, the stand-in
# reads surfaces in ASCII order of MIL names, as the device does); a
# program with concat, run past orion's own check, is refused by the
# "device" with its error code and the constraint id; a framework that is
# not there is a clear error; -v names the framework and the variant bound
# and, after the run, the program cache's and compile budget's use;
# training and generation packages (int32 token inputs) are refused by name;
# orion-run probe finds the stand-in's minimum surface and concat rejection.
#
#   ane_run.sh ORIONC ORION_RUN STANDIN SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") standin=$(realpath "$3") root=$(realpath "$4")
source "$root/testsuite/cli/lib.sh"
fix=$root/testsuite/e2e/examples
export TMPDIR=$tmp/tmp # the reference's temporary directories go here: checked empty at the end
mkdir "$TMPDIR"
export XDG_CACHE_HOME=$tmp/cache # the weight-update self-test's cached choice: this test's own

# cpu_and_ane NAME PACKAGE INPUTS...: both backends, every output byte-identical.
cpu_and_ane() {
  local name=$1 pkg=$2
  shift 2
  local args=() f
  for i in "$@"; do args+=(--input "$i"); done
  check "$name-cpu" 0 "$run" --backend=cpu "$pkg" "${args[@]}" --output-dir "$name.cpu"
  check "$name-ane" 0 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane "$pkg" "${args[@]}" --output-dir "$name.ane"
  for f in "$name".cpu/*.npy; do same_bytes "$name-$(basename "$f")" "$f" "$name.ane/$(basename "$f")"; done
}

check compile-tiny 0 "$orionc" -w -o tiny_mlp.anepkg "$root/examples/tiny_mlp.oir"
cpu_and_ane tiny_mlp tiny_mlp.anepkg "x=$fix/tiny_mlp/x.npy"
check compile-gpt2 0 "$orionc" -w -o gpt2_block.anepkg "$root/examples/gpt2_block.oir"
cpu_and_ane gpt2_block gpt2_block.anepkg "x=$fix/gpt2_block/x.npy"

# Inputs x, bias and outputs q, d: declared order is not ASCII order, and
# sub is not symmetric, so a swapped binding would change the bytes.
printf 'func main(x: fp16[1,4,1,8], bias: fp16[1,4,1,8]) {\n  d = sub(x, bias);\n  q = mul(d, bias);\n  return q, d;\n}\n' >two.oir
check compile-two 0 "$orionc" -w --no-lint -o two.anepkg two.oir
x=""; b=""
for i in $(seq 0 31); do x="$x\\x$(printf '%02x' $((i * 3 % 29)))\\x3c"; b="$b\\x$(printf '%02x' $((i * 7 % 31)))\\x40"; done
npy16 '(1, 4, 1, 8)' "$x" x.npy
npy16 '(1, 4, 1, 8)' "$b" bias.npy
cpu_and_ane two two.anepkg x=x.npy bias=bias.npy
if cmp -s two.ane/q.npy two.ane/d.npy; then fail "two: q and d are equal, the test proves nothing"; else pass; fi

# A LoRA adapter swap (adapters are inputs: nothing is recompiled) and a
# patch (new weights in the package: the next compile bakes them).
cat >l.oir <<'OIR'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = fill(0.25);
  param b: fp16[4] = zeros;
  y = linear(x, w, b);
  return y;
}
OIR
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' lx.npy
check compile-lora 0 "$orionc" -w --lora=w:1:2 -o lora.anepkg l.oir
python3 "$root/testsuite/tools/make_safetensors.py" a1.safetensors base_model.model.w.lora_A.weight=F32:1x4:1,0,0,0 base_model.model.w.lora_B.weight=F32:4x1:1,2,3,4
python3 "$root/testsuite/tools/make_safetensors.py" a2.safetensors base_model.model.w.lora_A.weight=F32:1x4:0,1,0,0 base_model.model.w.lora_B.weight=F32:4x1:4,3,2,1
for a in a1 a2; do
  check "lora-$a-cpu" 0 "$run" lora.anepkg --input x=lx.npy --adapter $a.safetensors --output-dir "lora_$a.cpu"
  check "lora-$a-ane" 0 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane lora.anepkg --input x=lx.npy --adapter $a.safetensors --output-dir "lora_$a.ane"
  same_bytes "lora-$a" "lora_$a.cpu/y.npy" "lora_$a.ane/y.npy"
done
if cmp -s lora_a1.ane/y.npy lora_a2.ane/y.npy; then fail "lora: both adapters gave the same output"; else pass; fi
check compile-patch 0 "$orionc" -w -o p.anepkg l.oir
cpu_and_ane before p.anepkg x=lx.npy
npy16 '(4, 4)' '\x00\x3c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x3c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x3c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x3c' eye.npy
check patch 0 "$run" patch p.anepkg --weight w=eye.npy
cpu_and_ane after p.anepkg x=lx.npy
same_bytes patched-is-identity after.ane/y.npy lx.npy
if cmp -s before.ane/y.npy after.ane/y.npy; then fail "patch: the ane backend did not see the new weights"; else pass; fi

# The device refuses concat (ANE001) at compile: past orion's check, its error.
printf 'func main(a: fp16[1,64,1,384], b: fp16[1,64,1,384]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n  return n;\n}\n' >cat.oir
check compile-concat 0 "$orionc" -w --no-lint -o cat.anepkg cat.oir
head -c $((64 * 384 * 2)) /dev/zero >zeros
npy16 '(1, 64, 1, 384)' "" a.npy && cat zeros >>a.npy
check concat-checked 1 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out
contains concat-checked "[ANE001]"
contains concat-checked "orion-run: note: --no-ane-checks runs it anyway on the CPU"
check concat-device 1 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane --no-ane-checks cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out
contains concat-device "orion-run: error: the ane backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]"
check concat-cpu 0 "$run" --backend=cpu --no-ane-checks cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out

# A framework that is not there; none named at all (the placeholder's words).
check no-framework 2 env ORION_ANE_FRAMEWORK="$tmp/nothere.so" "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy"
contains no-framework "orion-run: error: the ane backend cannot open its framework '$tmp/nothere.so' (set ORION_ANE_FRAMEWORK to another path): $tmp/nothere.so: cannot open shared object file: No such file or directory; backends built in: cpu, check"
check unnamed-framework 2 env -u ORION_ANE_FRAMEWORK "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy"
contains unnamed-framework "orion-run: error: the ane backend is only available on macOS (Apple's Neural Engine, through the private AppleNeuralEngine.framework), and this build is not for macOS; backends built in: cpu, check"

# -v: the framework and the descriptor factory's variant found.
check verbose 0 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir v.out
contains verbose "orion-run: backend ane: framework '$standin'; descriptor factory +modelWithMILText:weights:optionsPlist: (probed in order: +modelWithMILText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); update strategy: recompile"
# ... and after the run, the program cache and the compile budget it used.
contains verbose "orion-run: backend ane used: ane program cache: 0 hits, 1 misses, 1 compiles (0 retries), 0 evictions, 1 of 128 resident; compile budget 1 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, ANE architecture standin"

# Not yet: packages whose inputs are token ids (int32) are refused by name,
# before anything runs (docs/ane-backend.md, what is next).
model=$root/testsuite/train/model
check compile-train 0 "$orionc" -w --train-contract "$model/bigram.train.json" "$model/bigram.oir" -o b.anepkg
check train-int32 1 env ORION_ANE_FRAMEWORK="$standin" "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 2 --lr 0.5 --optimizer sgd
contains train-int32 "orion-run: error: the ane backend cannot bind input 'tokens': the device's surfaces hold fp16 (or fp32 converted at the boundary), not int32"
check compile-gen 0 "$orionc" -w -o gen.anepkg "$root/testsuite/generate/tiny_gen.oir"
check generate-int32 1 env ORION_ANE_FRAMEWORK="$standin" "$run" generate gen.anepkg --ids 1,2,3 --max-tokens 4 --backend ane
contains generate-int32 "orion-run generate: error: the ane backend cannot bind input 'tokens': the device's surfaces hold fp16 (or fp32 converted at the boundary), not int32"

# orion-run probe against the stand-in: its programs are bare model
# directories (no manifest surface sizes: each surface is its tensors' own
# bytes, unpadded for the probe), so the search finds the stand-in's own
# minimum surface (the table's 49152 bytes, ANE004) and its concat rejection.
check probe 0 env ORION_ANE_FRAMEWORK="$standin" "$run" probe --backend=ane --pace 0 --only surface,concat --chip m3 -o probe.json
contains probe "min surface:    49152 bytes accepted, 49088 rejected"
if python3 - probe.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
s, c = p["probe"]["surface"], p["probe"]["concat"]
assert p["chips"]["m3"]["min_surface_bytes"]["value"] == 49152, p["chips"]["m3"]["min_surface_bytes"]
assert p["chips"]["m3"]["min_surface_bytes"]["inherited"] is False
assert s["smallest_accepted_bytes"] == 49152 and s["largest_rejected_bytes"] == 49088, s
assert "a surface of 49088 bytes is below the 49152-byte minimum [ANE004]" in s["error"], s["error"]
assert c["accepted"] is False and c["rule"] == "ANE001", c
assert "the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: concat would fail on the ANE" in c["error"], c["error"]
PY
then pass; else fail "probe: probe.json is not the stand-in's figures"; fi

# Every temporary directory of the backend and of the stand-in was removed.
left=$(ls -A "$TMPDIR")
if [ -z "$left" ]; then pass; else fail "temporary directories left in TMPDIR: $left"; fi
finish
