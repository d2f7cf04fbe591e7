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
# a short training run and a greedy generation (int32 token inputs: run in
# parts) give the cpu backend's losses within fp16 rounding and its tokens;
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

# Training and generation: their functions read int32 token ids, so they
# run in parts (docs/ane-backend.md, what runs on the device and what on the
# CPU): the int32 statements on the CPU backend, the rest as device programs.
# A short training run of the fp16 bigram gives the cpu backend's losses
# within fp16 rounding (the device's surfaces are fp16: the fp32 loss and the
# fp32 values of its computation that cross a boundary are rounded there,
# where the cpu backend keeps fp32) and skips the same steps (the first one:
# the fp16 backward overflows at the loss scale of 65536 on both).
model=$root/testsuite/train/model
check compile-train 0 "$orionc" -w --train-contract "$model/bigram.train.json" "$model/bigram16.oir" -o b.anepkg
check train-cpu 0 "$run" train b.anepkg --backend cpu --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd
grep '^step [0-9]' out >train.cpu
check train-ane 0 env ORION_ANE_FRAMEWORK="$standin" "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd
grep '^step [0-9]' out >train.ane
cp out train.ane.out
contains train-ane "trained steps 1-6 of 6"
contains train-ane "skipped steps: 1; loss scale: 32768"
if python3 - train.cpu train.ane <<'PY'
import sys
cpu, ane = (open(f).read().split("\n")[:-1] for f in sys.argv[1:3])
assert len(cpu) == len(ane) == 6, (cpu, ane)
for c, a in zip(cpu, ane):
    c, a = c.split(), a.split()
    assert c[1] == a[1] and ("skipped" in c) == ("skipped" in a), (c, a)
    # one fp16 ulp of the loss, relative: 2^-10
    assert abs(float(a[3]) - float(c[3])) <= abs(float(c[3])) / 1024, (c, a)
PY
then pass; else fail "train: the ane losses are not the cpu's within fp16 rounding: $(paste train.cpu train.ane)"; fi
if cmp -s train.cpu train.ane; then fail "train: equal lines, the losses went through no fp16 surface"; else pass; fi
# Under the stand-in's `reload` switch (weight files read again at a
# reload) the self-test chooses reload-files, and each step's weight write
# updates the device segments without a compile: the same losses, and, with
# the choice cached (a later process), the run compiles its 3 device
# segments (fwd's 2, bwd's 1) at the start and nothing as the 6 steps go —
# a compile budget of exactly 3 is enough, one of 2 is refused at the start.
train_reload() {
  env XDG_CACHE_HOME="$tmp/cache-reload" ORION_ANE_STANDIN_WEIGHTS=reload ORION_ANE_FRAMEWORK="$standin" "$@" \
    "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd
}
losses() { grep '^step [0-9]' "$1" | sed 's| tokens/s [0-9]*||'; } # the step, its loss, lr, skipped
losses train.ane.out >train.ane.losses
check train-reload 0 train_reload
losses out >train.reload
same_bytes train-reload-losses train.ane.losses train.reload
check train-reload-budget 0 train_reload ORION_ANE_COMPILE_BUDGET=3
losses out >train.budget
same_bytes train-reload-budget-losses train.ane.losses train.budget
check train-reload-budget-short 1 train_reload ORION_ANE_COMPILE_BUDGET=2
contains train-reload-budget-short "orion-run: error: the ane backend cannot prepare segment 1 (device) of function 'bwd': the ane backend will not compile 'function 'main'': this process has used 2 of its compile budget of 2 (from ORION_ANE_COMPILE_BUDGET)"
# Under the stand-in's `inputs` switch (only weights given as inputs are
# honoured) the self-test chooses inputs: every device segment is compiled
# with its weights as inputs, and each step's weight write goes into their
# surfaces. The first run compiles the self-test's 4 probes and the 3
# segments, and nothing as the 6 steps go; with the choice cached a budget
# of exactly 3 is enough. The losses are the baked run's, so the cpu's
# within fp16 rounding.
train_inputs() {
  env XDG_CACHE_HOME="$tmp/cache-inputs" ORION_ANE_STANDIN_WEIGHTS=inputs ORION_ANE_FRAMEWORK="$standin" "$@" \
    "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd -v
}
check train-inputs 0 train_inputs
contains train-inputs "orion-run: backend ane used: ane program cache: 5 hits, 3 misses, 3 compiles (0 retries), 0 evictions, 3 of 128 resident; compile budget 7 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, ANE architecture standin"
losses out >train.inputs
same_bytes train-inputs-losses train.ane.losses train.inputs
check train-inputs-budget 0 train_inputs ORION_ANE_COMPILE_BUDGET=3
contains train-inputs-budget "update strategy: inputs (the self-test's choice for OS build standin-1, cached in '$tmp/cache-inputs/orion/ane-update-standin-1-standin')"
contains train-inputs-budget "compile budget 3 of 3 used (ORION_ANE_COMPILE_BUDGET)"
losses out >train.inputs.budget
same_bytes train-inputs-budget-losses train.ane.losses train.inputs.budget
# train -v: the backend's describe line before the run, as orion-run -v, and
# after it the usage of the run's own backend (a fresh self-test cache: the
# self-test's compiles counted too (6: its inputs probe is refused at compile
# under baked); each step's weight write recompiles).
check train-verbose 0 env XDG_CACHE_HOME="$tmp/cache-verbose" ORION_ANE_FRAMEWORK="$standin" \
  "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd -v
contains train-verbose "orion-run: backend ane: framework '$standin'; descriptor factory +modelWithMILText:weights:optionsPlist: (probed in order: +modelWithMILText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); update strategy: recompile"
contains train-verbose "orion-run: backend ane used: ane program cache: 10 hits, 8 misses, 8 compiles (0 retries), 0 evictions, 8 of 128 resident; compile budget 14 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, ANE architecture standin"
contains train-verbose "trained steps 1-6 of 6"

# Greedy generation gives the cpu backend's tokens, in both prefill buckets.
check compile-gen 0 "$orionc" -w -o gen.anepkg "$root/testsuite/generate/tiny_gen.oir"
for ids in 1,2,3 3,17,42,5,9; do
  for b in cpu ane; do # the ids stream to stdout, the figures to stderr
    if env ORION_ANE_FRAMEWORK="$standin" "$run" generate gen.anepkg --ids $ids --temperature 0 --max-tokens 8 \
      --backend $b >gen.$b 2>gen.$b.err && grep -qF "8 tokens generated" gen.$b.err; then pass
    else fail "generate-$ids-$b: $(cat gen.$b.err)"; fi
  done
  same_bytes "generate-$ids" gen.cpu gen.ane
done

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
