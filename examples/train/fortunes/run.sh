#!/usr/bin/env bash
# examples/train/fortunes/run.sh: the training demonstration of issue 13.
#
# Trains a Stories15M-shaped llama (dim 288, 6 layers, 6 heads, SwiGLU hidden
# 768, RoPE, RMSNorm, causal sdpa, tied classifier, cross_entropy) with a byte
# vocabulary (256) on Debian's fortunes, in ane numerics (fp16 results, dynamic
# loss scaling), 1,000 AdamW steps of 4 x 128 tokens, with the held-back
# fortunes evaluated every 50 steps. The run is stopped once after the
# checkpoint of step 500 (--stop-after 500) and resumed from it (--resume), then
# the log is drawn as an SVG (train and eval loss).
#
#   bash examples/train/fortunes/run.sh [--small] [OUT]
#
# OUT (default build/fortunes, or build/fortunes-small) receives the data
# (data/train.bin, data/eval.bin), the package, the checkpoints, the log
# train.jsonl, loss.svg and summary.txt. --small: small.oir (dim 64, 2 layers,
# 8 x 64 tokens a step), 400 steps stopped at 200: about a minute. BUILD=dir picks
# the build tree (default build). Needs Debian's fortunes (scripts/setup.sh
# installs it) and python3's standard library.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${BUILD:-$root/build}
py=/usr/bin/python3
small=0 out=
for arg; do
  case $arg in
  --small) small=1 ;;
  -*) echo "usage: run.sh [--small] [OUT]" >&2; exit 2 ;;
  *) out=$arg ;;
  esac
done
if [ $small = 1 ]; then
  model=$here/small.oir steps=400 stop=200 ckpt_every=100 eval_every=50 eval_bytes=4097 lr=3e-3 warmup=20
  shape=(--dim 64 --layers 2 --heads 4 --hidden 192 --vocab 256 --seq 64 --batch 8 --dtype fp16)
  out=${out:-$build/fortunes-small}
else
  model=$here/model.oir steps=1000 stop=500 ckpt_every=100 eval_every=50 eval_bytes=8193 lr=1e-3 warmup=50
  shape=(--dim 288 --layers 6 --heads 6 --hidden 768 --vocab 256 --seq 128 --batch 4 --dtype fp16)
  out=${out:-$build/fortunes}
fi
[ -x "$build/driver/orionc" ] && [ -x "$build/driver/orion-run" ] ||
  { echo "run.sh: no orionc/orion-run in '$build' (meson setup build && ninja -C build)" >&2; exit 1; }
rm -rf "$out/ckpt" "$out/train.jsonl"
mkdir -p "$out"

# 1. The data: every 20th fortune held back; eval.bin keeps its first
#    eval_bytes bytes (eval_bytes - 1 tokens make whole windows of the sequence).
"$py" "$here/prepare.py" --eval-bytes "$eval_bytes" "$out/data" | tee "$out/data.txt"

# 2. The model's fixed inputs (the RoPE tables cos, sin and the rotate-half
#    permutation rot) from bench/make_train_models.py, which also made the
#    committed .oir (its model text is checked against the committed one).
"$py" "$root/bench/make_train_models.py" llama "$out/generated.oir" "${shape[@]}" --rope "$out"
cmp -s <(grep -v '^//' "$out/generated.oir") <(grep -v '^//' "$model") ||
  { echo "run.sh: $model differs from what bench/make_train_models.py ${shape[*]} makes" >&2; exit 1; }

# 3. Compile: the forward and the backward are ANE-legal (docs/training.md, "ANE legality").
"$build/driver/orionc" --train -w -o "$out/model.anepkg" "$model"

# 4. Train, stopped after step $stop (its checkpoint), then resumed to $steps.
train=("$build/driver/orion-run" train "$out/model.anepkg" --data "$out/data/train.bin"
  --input "cos=$out/cos.npy" --input "sin=$out/sin.npy" --input "rot=$out/rot.npy"
  --steps "$steps" --lr "$lr" --warmup "$warmup" --schedule cosine --min-lr "$(awk -v l="$lr" 'BEGIN { print l / 10 }')"
  --clip-grad 1 --numerics ane --log "$out/train.jsonl" --checkpoint-dir "$out/ckpt" --checkpoint-every "$ckpt_every"
  --eval-data "$out/data/eval.bin" --eval-every "$eval_every")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
"${train[@]}" --stop-after "$stop" 2>"$out/train-1.err" | tee "$out/train-1.txt"
t1=$(date +%s.%N)
"${train[@]}" --resume "$out/ckpt" 2>"$out/train-2.err" | tee "$out/train-2.txt"
t2=$(date +%s.%N)
load2=$(cut -d' ' -f1-3 /proc/loadavg)

# 5. The loss curve.
"$build/driver/orion-run" plot "$out/train.jsonl" -o "$out/loss.svg" \
  --title "Byte-level llama (dim ${shape[1]}, ${shape[3]} layers) on Debian's fortunes, ane numerics"

# 6. What the log says: losses, skipped steps, non-finite losses, tokens/s.
{ echo "machine: $(nproc) cores; load average (1, 5, 15 min) $load0 at the start, $load2 at the end"
"$py" - "$out/train.jsonl" "$t0" "$t1" "$t2" "$stop" <<'PY'
import json, math, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t0, t1, t2 = map(float, sys.argv[2:5])
stop = int(sys.argv[5])
num = lambda x: x if isinstance(x, (int, float)) else float(x)
steps = [r["step"] for r in rows]
assert steps == list(range(1, len(rows) + 1)), "the log's steps are not 1..N once each"
skipped = [r["step"] for r in rows if r["skipped"]]
nonfinite = [r["step"] for r in rows if not math.isfinite(num(r["loss"])) or
             ("eval_loss" in r and not math.isfinite(num(r["eval_loss"])))]
evals = [(r["step"], num(r["eval_loss"])) for r in rows if "eval_loss" in r]
tps = statistics.median(r["tokens_per_s"] for r in rows)
mean = lambda a: sum(a) / len(a)
first10 = mean([num(r["loss"]) for r in rows[:10]])
last10 = mean([num(r["loss"]) for r in rows[-10:]])
print(f"steps: {len(rows)} (stopped after {stop}, resumed from its checkpoint)")
print(f"wall time: {t1 - t0:.0f} s + {t2 - t1:.0f} s = {t2 - t0:.0f} s (both runs, set-up, evaluation and checkpoints included)")
print(f"tokens/s (median of the steps' figures): {tps:.0f}")
print(f"train loss: step 1 {num(rows[0]['loss']):.4f}, mean of steps 1-10 {first10:.4f}, "
      f"mean of the last 10 {last10:.4f} ({last10 / math.log(2):.3f} bits per byte)")
print(f"eval loss: step {evals[0][0]} {evals[0][1]:.4f}, step {evals[-1][0]} {evals[-1][1]:.4f} "
      f"({evals[-1][1] / math.log(2):.3f} bits per byte)")
print(f"skipped steps: {len(skipped)} {skipped}")
print(f"non-finite losses: {len(nonfinite)} {nonfinite}")
print(f"loss scale at the end: {rows[-1]['loss_scale']}")
PY
} | tee "$out/summary.txt"
echo "wrote $out/loss.svg"
