#!/usr/bin/env bash
# orion-run --backend=ane end to end against the Linux stand-in framework
# (ORION_ANE_FRAMEWORK): the examples and a program of several inputs and
# outputs whose declared order is not ASCII order give the cpu backend's
# bytes in ane numerics (the backend binds by the manifest, the stand-in
# reads surfaces in ASCII order of MIL names, as the device does); a
# program with concat runs with the concat on the CPU, and past orion's
# checks is refused by the "device" with its error code and the constraint id; a framework that is
# not there is a clear error; -v names the framework and the variant bound
# (the reference's factory; the initializer on a stand-in with only it)
# and, after the run, the program cache's and compile budget's use;
# a short training run and a greedy generation (int32 token inputs: run in
# parts) give the cpu backend's losses within fp16 rounding and its tokens;
# orion-run probe finds the stand-in's minimum surface and concat rejection,
# and its compile limit past orion's own budget and resident cap.
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

# orion-run patch --backend ane: the package compiled on the backend first,
# the patch written, then the program updated by the self-test's strategy
# under each stand-in switch: the strategy and the compiles it took (the
# self-test's 6, 2, 3 with a fresh choice, then 1, 0, 0 with the cached
# one), and --verify's comparison with a fresh compile on the backend. The
# patch (w = 2I) makes y = 2x = 2, 4, 6, 8: a fresh run gives exactly that,
# so the updated program, bit-identical to it, does too.
npy16 '(4, 4)' '\x00\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40' twice.npy
npy16 '(1, 4)' '\x00\x40\x00\x44\x00\x46\x00\x48' y_twice.npy
patch_on_ane() { # patch_on_ane NAME SWITCH CACHE PACKAGE [OPTION...]
  local name=$1 sw=$2 cache=$3 pkg=$4
  shift 4
  check "$name" 0 env XDG_CACHE_HOME="$tmp/$cache" ORION_ANE_STANDIN_WEIGHTS=$sw ORION_ANE_FRAMEWORK="$standin" \
    "$run" patch "$pkg" --weight w=twice.npy --backend ane -v --verify=l.oir "$@"
}
for case in baked:recompile:7:1 reload:reload-files:2:0 patch-data:patch-data:3:0; do
  IFS=: read -r sw strategy first later <<<"$case"
  check "compile-patch-$sw" 0 "$orionc" -w -o "pa-$sw.anepkg" l.oir
  patch_on_ane "patch-ane-$sw" "$sw" "cache-patch-$sw" "pa-$sw.anepkg"
  contains "patch-ane-$sw" "orion-run: backend ane: weights updated by $strategy, $first compiles"
  contains "patch-ane-$sw" "update strategy: $strategy (the self-test's choice for OS build standin-1, written to '$tmp/cache-patch-$sw/orion/ane-update-standin-1-standin')"
  contains "patch-ane-$sw" "pa-$sw.anepkg: 1 weight patched, 1 blob (32 bytes) changed, generation 1"
  contains "patch-ane-$sw" "pa-$sw.anepkg: verified on the ane backend: the updated program's outputs are bit-identical to a fresh compile's"
  check "patched-run-$sw" 0 env ORION_ANE_STANDIN_WEIGHTS=$sw ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane "pa-$sw.anepkg" --input x=lx.npy --output-dir "pa-$sw.out"
  same_bytes "patched-run-$sw-is-2x" "pa-$sw.out/y.npy" y_twice.npy
  # The choice cached: only the strategy's own compiles (the same values again: nothing new to write).
  check "compile-patch-$sw-2" 0 "$orionc" -w -o "pb-$sw.anepkg" l.oir
  patch_on_ane "patch-ane-$sw-cached" "$sw" "cache-patch-$sw" "pb-$sw.anepkg"
  want="$later compiles"; [ "$later" = 1 ] && want="1 compile"
  contains "patch-ane-$sw-cached" "orion-run: backend ane: weights updated by $strategy, $want"
  contains "patch-ane-$sw-cached" "update strategy: $strategy (the self-test's choice for OS build standin-1, cached in '$tmp/cache-patch-$sw/orion/ane-update-standin-1-standin')"
done
# A choice that is wrong for the device (reload-files cached, the device
# baking weights): the updated program keeps the old weights, and --verify says so.
check compile-patch-wrong 0 "$orionc" -w -o pw.anepkg l.oir
check patch-ane-wrong 1 env XDG_CACHE_HOME="$tmp/cache-patch-reload" ORION_ANE_STANDIN_WEIGHTS=baked ORION_ANE_FRAMEWORK="$standin" \
  "$run" patch pw.anepkg --weight w=twice.npy --backend=ane --verify=l.oir
contains patch-ane-wrong "orion-run: error: --verify: output 'y' of function 'main' of the updated program on the ane backend differs from a fresh compile's (the backend's weight-update strategy is wrong here)"
contains patch-ane-wrong "orion-run: note: 'pw.anepkg' is patched (its files verified); the ane backend's update of its program in this process is what differs"
# Without -v nothing of the backend is said; a backend that reads weights in place remaps.
check compile-patch-check 0 "$orionc" -w -o pc.anepkg l.oir
check patch-check 0 "$run" patch pc.anepkg --weight w=twice.npy --backend check -v --verify=l.oir
contains patch-check "orion-run: backend check: weights updated by remap, 0 compiles"
contains patch-check "pc.anepkg: verified on the check backend: the updated program's outputs are bit-identical to a fresh compile's"
# A bad backend name: the usual error, and the package is not touched.
check compile-patch-bad 0 "$orionc" -w -o pbad.anepkg l.oir
cp -r pbad.anepkg pbad.before
check patch-bad-backend 2 "$run" patch pbad.anepkg --weight w=twice.npy --backend nope
contains patch-bad-backend "orion-run: error: unknown backend 'nope' (backends built in: cpu, check)"
if diff -r pbad.anepkg pbad.before >/dev/null; then pass; else fail "patch-bad-backend: the package changed"; fi
check patch-recover-backend 2 "$run" patch pbad.anepkg --recover --backend ane
contains patch-recover-backend "orion-run patch: error: --recover takes no --backend"

# The device refuses concat (ANE001) at compile, a rule the constraint table
# places on the CPU: through the ane backend the concat runs there (a remark
# names the statement), the rest on the device, giving the cpu backend's
# bytes; orion's check on the cpu backend still refuses it; past
# --no-ane-checks (nothing moved) the device's error.
printf 'func main(a: fp16[1,64,1,384], b: fp16[1,64,1,384]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n  return n;\n}\n' >cat.oir
check compile-concat 0 "$orionc" -w --no-lint -o cat.anepkg cat.oir
head -c $((64 * 384 * 2)) /dev/zero >zeros
npy16 '(1, 64, 1, 384)' "" a.npy && cat zeros >>a.npy
check concat-placed 0 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.ane
contains concat-placed "cat.anepkg/model.mil:8:43: note: statement 3 (concat 'y') runs on the CPU: ANE001, the ANE compiler rejects concat"
check concat-checked 1 "$run" --backend=cpu cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out
contains concat-checked "[ANE001]"
contains concat-checked "orion-run: note: --no-ane-checks runs it anyway on the CPU"
check concat-device 1 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane --no-ane-checks cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out
contains concat-device "orion-run: error: the ane backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]"
check concat-cpu 0 "$run" --backend=cpu --no-ane-checks cat.anepkg --input a=a.npy --input b=a.npy --output-dir cat.out
same_bytes concat-placed-bytes cat.out/n.npy cat.ane/n.npy

# A framework that is not there; none named at all (the placeholder's words).
check no-framework 2 env ORION_ANE_FRAMEWORK="$tmp/nothere.so" "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy"
contains no-framework "orion-run: error: the ane backend cannot open its framework '$tmp/nothere.so' (set ORION_ANE_FRAMEWORK to another path): $tmp/nothere.so: cannot open shared object file: No such file or directory; backends built in: cpu, check"
check unnamed-framework 2 env -u ORION_ANE_FRAMEWORK "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy"
contains unnamed-framework "orion-run: error: the ane backend is only available on macOS (Apple's Neural Engine, through the private AppleNeuralEngine.framework), and this build is not for macOS; backends built in: cpu, check"

# -v: the framework and the descriptor factory's variant found.
check verbose 0 env ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir v.out
contains verbose "orion-run: backend ane: framework '$standin'; descriptor factory +modelWithMILText:weights:optionsPlist: (probed in order: +modelWithMILText:weights:optionsPlist:isMILModel:, -initWithNetworkText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); update strategy: recompile"
# ... and after the run, the program cache and the compile budget it used.
contains verbose "orion-run: backend ane used: ane program cache: 0 hits, 1 misses, 1 compiles (0 retries), 0 evictions, 1 of 128 resident; compile budget 1 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, ANE architecture standin"
# A framework whose descriptor has only the initializer (a stand-in build
# beside $standin): -v names that variant, and the run gives the same bytes.
init_only=$(dirname "$standin")/libane_standin_init_only.so
check verbose-init 0 env ORION_ANE_FRAMEWORK="$init_only" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir vi.out
contains verbose-init "orion-run: backend ane: framework '$init_only'; descriptor factory -initWithNetworkText:weights:optionsPlist:isMILModel: (probed in order: +modelWithMILText:weights:optionsPlist:isMILModel:, -initWithNetworkText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); update strategy: recompile"
for f in tiny_mlp.ane/*.npy; do same_bytes "verbose-init-$(basename "$f")" "$f" "vi.out/$(basename "$f")"; done

# The ANE architecture, from the framework's _ANEDeviceInfo: its selectors
# probed in order (-v's device line names the one that answered), the
# fallback to "unknown" with the reason when neither answers.
contains verbose "orion-run: backend ane device: ANE architecture standin (+[_ANEDeviceInfo aneArchitectureType]; probed in order: +aneArchitectureType, +aneSubType)"
check arch-subtype 0 env ORION_ANE_STANDIN_DEVICE_INFO=subtype ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir v.out
contains arch-subtype "orion-run: backend ane device: ANE architecture standin-sub (+[_ANEDeviceInfo aneSubType]; probed in order: +aneArchitectureType, +aneSubType)"
contains arch-subtype "; OS build standin-1, ANE architecture standin-sub"
check arch-none 0 env ORION_ANE_STANDIN_DEVICE_INFO=none ORION_ANE_FRAMEWORK="$standin" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir v.out
contains arch-none "orion-run: backend ane device: ANE architecture unknown (_ANEDeviceInfo responds to none of +aneArchitectureType, +aneSubType; probed in order: +aneArchitectureType, +aneSubType)"
contains arch-none "; OS build standin-1, ANE architecture unknown"
# Another architecture is another self-test cache file: the same cache
# directory holds a choice for "standin" (made first), yet "h16g" runs the
# self-test again and writes its own file.
arch_patch() { # arch_patch NAME ARCH
  check "compile-$1" 0 "$orionc" -w -o "$1.anepkg" l.oir
  check "$1" 0 env XDG_CACHE_HOME="$tmp/cache-arch" ORION_ANE_STANDIN_ANE_ARCH="$2" ORION_ANE_STANDIN_WEIGHTS=reload \
    ORION_ANE_FRAMEWORK="$standin" "$run" patch "$1.anepkg" --weight w=twice.npy --backend ane -v
}
arch_patch arch-standin standin
contains arch-standin "update strategy: reload-files (the self-test's choice for OS build standin-1, written to '$tmp/cache-arch/orion/ane-update-standin-1-standin')"
arch_patch arch-h16g h16g
contains arch-h16g "orion-run: backend ane: weights updated by reload-files, 2 compiles"
contains arch-h16g "update strategy: reload-files (the self-test's choice for OS build standin-1, written to '$tmp/cache-arch/orion/ane-update-standin-1-h16g')"
if grep -qx "ane-arch h16g" "$tmp/cache-arch/orion/ane-update-standin-1-h16g" && grep -qx "ane-arch standin" "$tmp/cache-arch/orion/ane-update-standin-1-standin"; then pass
else fail "arch: the two cache files are not one per architecture"; fi

# The limits as options (--opt N and --opt=N): the option beats the
# environment, which beats the table; -v's usage line has both values and
# says where the budget came from.
exactly() { if [ "$(cat out)" = "$2" ]; then pass; else fail "$1: output is not '$2'"; cat out; fi; }
limits() { # limits [VAR=VALUE...] [OPTION...]
  local envs=()
  while [ $# -gt 0 ] && [[ $1 == ORION_* ]]; do envs+=("$1"); shift; done
  env ORION_ANE_FRAMEWORK="$standin" "${envs[@]}" "$run" --backend=ane -v tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" \
    --output-dir v.out "$@"
}
check limits-option 0 limits --ane-compile-budget 5 --ane-resident-cap=3
contains limits-option "1 of 3 resident; compile budget 1 of 5 used (the caller's option); OS build"
check limits-option-over-env 0 limits ORION_ANE_COMPILE_BUDGET=7 ORION_ANE_RESIDENT_CAP=9 --ane-compile-budget=6
contains limits-option-over-env "1 of 9 resident; compile budget 1 of 6 used (the caller's option); OS build"
check limits-env 0 limits ORION_ANE_COMPILE_BUDGET=7
contains limits-env "1 of 128 resident; compile budget 1 of 7 used (ORION_ANE_COMPILE_BUDGET); OS build"
check limits-bad 2 limits --ane-compile-budget=0
exactly limits-bad "orion-run: error: --ane-compile-budget needs a count from 1 to 1000000 (not '0')
Try 'orion-run --help' for more information."
check limits-bad-cap 2 limits --ane-resident-cap 12x
exactly limits-bad-cap "orion-run: error: --ane-resident-cap needs a count from 1 to 1000000 (not '12x')
Try 'orion-run --help' for more information."
check limits-missing 2 limits --ane-resident-cap
contains limits-missing "orion-run: error: --ane-resident-cap needs a count from 1 to 1000000"
# A bad environment value is still an error when an option overrides it.
check limits-bad-env 2 limits ORION_ANE_COMPILE_BUDGET=lots --ane-compile-budget 4
contains limits-bad-env "the ane backend cannot use ORION_ANE_COMPILE_BUDGET='lots': it must be a whole number from 1 to 1000000"

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
# The limits as train's own options (orion-run's, shared): the option is the
# budget's source, beating the environment; a bad value is a usage error.
train_reload_opts() { # train_reload_opts [VAR=VALUE...] [OPTION...]; the choice cached: the 3 segments' compiles
  local envs=()
  while [ $# -gt 0 ] && [[ $1 == ORION_* ]]; do envs+=("$1"); shift; done
  env XDG_CACHE_HOME="$tmp/cache-reload" ORION_ANE_STANDIN_WEIGHTS=reload ORION_ANE_FRAMEWORK="$standin" "${envs[@]}" \
    "$run" train b.anepkg --backend ane --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --optimizer sgd "$@"
}
check train-budget-option-short 1 train_reload_opts --ane-compile-budget 2
exactly train-budget-option-short "orion-run: error: the ane backend cannot prepare segment 1 (device) of function 'bwd': the ane backend will not compile 'function 'main'': this process has used 2 of its compile budget of 2 (from the caller's option), past which the ANE compiler fails silently (ANE005); restart the process to get a new budget, or set ORION_ANE_COMPILE_BUDGET if this device is known to take more"
check train-budget-option 0 train_reload_opts ORION_ANE_COMPILE_BUDGET=2 ORION_ANE_RESIDENT_CAP=9 --ane-compile-budget=3 \
  --ane-resident-cap 5 -v
contains train-budget-option "orion-run: backend ane used: ane program cache: 0 hits, 3 misses, 3 compiles (0 retries), 0 evictions, 3 of 5 resident; compile budget 3 of 3 used (the caller's option); OS build standin-1, ANE architecture standin"
losses out >train.budget.option
same_bytes train-budget-option-losses train.ane.losses train.budget.option
check train-cap-bad 2 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 6 --lr 0.5 --ane-resident-cap 0
exactly train-cap-bad "orion-run train: error: --ane-resident-cap needs a count from 1 to 1000000 (not '0')
Try 'orion-run train --help' for more information."
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
contains train-inputs "orion-run: backend ane used: ane program cache: 0 hits, 3 misses, 3 compiles (0 retries), 0 evictions, 3 of 128 resident; compile budget 7 of 119 used (constraint ANE005 (compiles_per_process)); OS build standin-1, ANE architecture standin"
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
contains train-verbose "orion-run: backend ane: framework '$standin'; descriptor factory +modelWithMILText:weights:optionsPlist: (probed in order: +modelWithMILText:weights:optionsPlist:isMILModel:, -initWithNetworkText:weights:optionsPlist:isMILModel:, +modelWithMILText:weights:optionsPlist:); update strategy: recompile"
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

# generate's limits (orion-run's options): its three functions' device
# segments take 3 compiles, so a budget of 1 is refused at the second one,
# and one of 3 gives the cpu backend's tokens.
check generate-budget-short 1 env ORION_ANE_FRAMEWORK="$standin" "$run" generate gen.anepkg --ids 1,2,3 --temperature 0 \
  --max-tokens 8 --backend ane --ane-compile-budget 1
exactly generate-budget-short "orion-run generate: error: the ane backend cannot prepare segment 1 (device) of function 'prefill_16': the ane backend will not compile 'function 'main'': this process has used 1 of its compile budget of 1 (from the caller's option), past which the ANE compiler fails silently (ANE005); restart the process to get a new budget, or set ORION_ANE_COMPILE_BUDGET if this device is known to take more"
if env ORION_ANE_FRAMEWORK="$standin" "$run" generate gen.anepkg --ids 1,2,3 --temperature 0 --max-tokens 8 --backend ane \
  --ane-compile-budget=3 --ane-resident-cap=3 >gen.budget 2>gen.budget.err && grep -qF "8 tokens generated" gen.budget.err; then pass
else fail "generate-budget: $(cat gen.budget.err)"; fi
env ORION_ANE_FRAMEWORK="$standin" "$run" generate gen.anepkg --ids 1,2,3 --temperature 0 --max-tokens 8 --backend cpu >gen.budget.cpu 2>/dev/null
same_bytes generate-budget-tokens gen.budget.cpu gen.budget
check generate-budget-bad 2 "$run" generate gen.anepkg --ids 1,2,3 --ane-compile-budget=x1
exactly generate-budget-bad "orion-run generate: error: --ane-compile-budget needs a count from 1 to 1000000 (not 'x1')
Try 'orion-run generate --help' for more information."

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

# The compile-budget probe on a backend opened with orion's limits lifted:
# it finds the stand-in's limit (here 150, past orion's budget of 119 and
# its resident cap of 128: every program stays loaded), met as the device
# meets it, a compile failing without an error (retried without a pause).
check probe-compiles 0 env ORION_ANE_FRAMEWORK="$standin" ORION_ANE_STANDIN_COMPILE_LIMIT=150 ORION_ANE_RETRY_PAUSE_MS=0 \
  "$run" probe --backend=ane --pace 0 --only compiles --chip m3 -o compiles.json
contains probe-compiles "compile budget: 150 programs, then: orion-run: error: the ANE compiler failed on 'function 'main'' (no error code: the ane backend: the device failed to compile function 'main', without an error) after 4 attempts"
if python3 - compiles.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["probe"]["compiles"]
assert c["failed"] is True and c["budget"] == 150 and c["this_probe"] == 150 and c["cap"] == 200, c
PY
then pass; else fail "probe-compiles: compiles.json is not the stand-in's limit"; fi

# SIGTERM and SIGINT at a point the run reaches for certain (the stand-in's
# pauses, orion/temporaries.h's test_pause_at): with its directories in
# TMPDIR (the reference's $TMPDIR/<hexStringIdentifier>/, the stand-in's
# compile directory, the run in parts' segment directory) the run ends by
# the signal and leaves TMPDIR empty.
mkfifo pause
set -m # background jobs keep SIGINT
interrupt() { # interrupt NAME POINT SIGNAL STATUS EXPECTED-IN-TMPDIR COMMAND...
  local name=$1 point=$2 sig=$3 want=$4 expect=$5 pid got at
  shift 5
  env ORION_TEST_PAUSE_AT="$point" ORION_TEST_PAUSE_FIFO="$tmp/pause" ORION_ANE_FRAMEWORK="$standin" "$@" >out 2>&1 &
  pid=$!
  read -r at <pause
  [ "$at" = "$point" ] || fail "$name: paused at '$at', expected '$point'"
  # What the run has made at that point (markers aside): the test proves something.
  local made
  made=$(cd "$TMPDIR" && ls -A | grep -v '\.owner$' | sed -E 's/^[0-9a-f]{16}$/HEX/; s/-[A-Za-z0-9]{6}$/-XXXXXX/' | sort | tr '\n' ' ')
  if [ "$made" = "$expect" ]; then pass; else fail "$name: TMPDIR held '$made', expected '$expect'"; fi
  kill -s "$sig" $pid
  { wait $pid; } 2>/dev/null
  got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want: $(cat out)"; fi
  if [ -z "$(ls -A "$TMPDIR")" ]; then pass; else fail "$name: left in TMPDIR: $(ls -A "$TMPDIR")"; fi
}
interrupt sigterm-compile ane-standin-compile TERM 143 "HEX orion-ane-standin-XXXXXX " \
  "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir sig.out
interrupt sigterm-evaluate ane-standin-evaluate TERM 143 "HEX " \
  "$run" --backend=ane tiny_mlp.anepkg --input "x=$fix/tiny_mlp/x.npy" --output-dir sig.out
interrupt sigint-parts ane-standin-compile INT 130 "HEX orion-ane-part-XXXXXX orion-ane-standin-XXXXXX " \
  "$run" generate gen.anepkg --ids 1,2,3 --temperature 0 --max-tokens 2 --backend ane
set +m
if [ ! -e sig.out ]; then pass; else fail "interrupted runs left their output directory sig.out"; fi

# Every temporary directory of the backend and of the stand-in was removed.
left=$(ls -A "$TMPDIR")
if [ -z "$left" ]; then pass; else fail "temporary directories left in TMPDIR: $left"; fi
finish
