#!/usr/bin/env bash
# examples/train/fortunes/run.sh: the training demonstration of issue 13.
#
# Trains a Stories15M-shaped llama (dim 288, 6 layers, 6 heads, SwiGLU hidden
# 768, RoPE, RMSNorm, causal sdpa, tied classifier, cross_entropy; Hugging Face
# llama's param names) on Debian's fortunes with a byte-level BPE of 32,000 ids
# learned on the training fortunes (orion-tokenize train), 15.2M params, in ane
# numerics (fp16 results, dynamic loss scaling), 1,000 AdamW steps of 4 x 128
# tokens, with the held-back fortunes evaluated every 50 steps. The run is
# stopped once after the checkpoint of step 500 (--stop-after 500) and resumed
# from it (--resume), then the log is drawn as an SVG (train and eval loss) and
# the trained weights are exported by param name (model.safetensors), which
# examples/generate/fortunes/run.sh turns into a generation package.
#
#   bash examples/train/fortunes/run.sh [--small] [OUT]
#
# OUT (default build/fortunes, or build/fortunes-small) receives the text
# (data/train.txt, data/eval.txt), the tokenizer (tokenizer/vocab.json,
# merges.txt), the token files (data/train.bin, data/eval.bin), the package,
# the checkpoints, the log train.jsonl, loss.svg, summary.txt and
# model.safetensors. --small: small.oir (dim 64, 2 layers, a BPE of 1,024 ids,
# 4 x 128 tokens a step), 400 steps stopped at 200: about a minute. BUILD=dir
# picks the build tree (default build). Needs Debian's fortunes (scripts/setup.sh
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
  model=$here/small.oir steps=400 stop=200 ckpt_every=100 eval_every=50 eval_bytes=12288 lr=3e-3 warmup=20 vocab=1024 every=20
  shape=(--dim 64 --layers 2 --heads 4 --hidden 192 --vocab $vocab --seq 128 --batch 4 --dtype fp16 --names hf)
  out=${out:-$build/fortunes-small}
else
  model=$here/model.oir steps=1000 stop=500 ckpt_every=100 eval_every=50 eval_bytes=32768 lr=1e-3 warmup=50 vocab=32000 every=50
  shape=(--dim 288 --layers 6 --heads 6 --hidden 768 --vocab $vocab --seq 128 --batch 4 --dtype fp16 --names hf)
  out=${out:-$build/fortunes}
fi
for tool in orionc orion-run orion-tokenize; do
  [ -x "$build/driver/$tool" ] ||
    { echo "run.sh: no $tool in '$build' (meson setup build && ninja -C build)" >&2; exit 1; }
done
rm -rf "$out/ckpt" "$out/train.jsonl"
mkdir -p "$out"

# 1. The text: every 20th fortune held back; eval.txt keeps the whole held-back
#    fortunes within its first eval_bytes bytes (evaluation is a forward per window).
"$py" "$here/prepare.py" --text --eval-bytes "$eval_bytes" "$out/data" | tee "$out/data.txt"

# 2. The vocabulary: a byte-level BPE learned on the training text alone
#    (GPT-2's pre-tokenizer; pairs seen at least twice), then both texts as
#    uint16 token files for orion-run train.
"$build/driver/orion-tokenize" train --vocab-size "$vocab" "$out/data/train.txt" -o "$out/tokenizer"
for part in train eval; do
  "$build/driver/orion-tokenize" --tokenizer "$out/tokenizer" encode --file "$out/data/$part.txt" \
    --output "$out/data/$part.bin"
  echo "$part.bin: $(($(stat -c %s "$out/data/$part.bin") / 2)) tokens of $(stat -c %s "$out/data/$part.txt") bytes" |
    tee -a "$out/data.txt"
done

# 3. The model's fixed inputs (the RoPE tables cos, sin and the rotate-half
#    permutation rot) from bench/make_train_models.py, which also made the
#    committed .oir (its model text is checked against the committed one).
"$py" "$root/bench/make_train_models.py" llama "$out/generated.oir" "${shape[@]}" --rope "$out"
cmp -s <(grep -v '^//' "$out/generated.oir") <(grep -v '^//' "$model") ||
  { echo "run.sh: $model differs from what bench/make_train_models.py ${shape[*]} makes" >&2; exit 1; }

# 4. Compile: the forward and the backward are ANE-legal (docs/training.md, "ANE legality").
# Its notes (the ANE's alphabetical binding order) go to orionc.err.
"$build/driver/orionc" --train -w -o "$out/model.anepkg" "$model" 2>"$out/orionc.err" ||
  { cat "$out/orionc.err" >&2; exit 1; }

# 5. Train, stopped after step $stop (its checkpoint), then resumed to $steps;
#    the resumed run exports the trained fp32 masters by param name.
train=("$build/driver/orion-run" train "$out/model.anepkg" --data "$out/data/train.bin"
  --input "cos=$out/cos.npy" --input "sin=$out/sin.npy" --input "rot=$out/rot.npy"
  --steps "$steps" --lr "$lr" --warmup "$warmup" --schedule cosine --min-lr "$(awk -v l="$lr" 'BEGIN { print l / 10 }')"
  --clip-grad 1 --numerics ane --log "$out/train.jsonl" --checkpoint-dir "$out/ckpt" --checkpoint-every "$ckpt_every"
  --eval-data "$out/data/eval.bin" --eval-every "$eval_every")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
# orion-run train's progress (a line a step on standard error) goes to
# train-N.err; every $every-th step's line is shown, then the run's summary.
shown() { awk -v every="$every" '{ split($2, s, "/") } s[1] == 1 || s[1] % every == 0 || !/^step /'; }
"${train[@]}" --stop-after "$stop" 2>&1 >"$out/train-1.txt" | tee "$out/train-1.err" | shown
cat "$out/train-1.txt"
t1=$(date +%s.%N)
"${train[@]}" --resume "$out/ckpt" --export "$out/model.safetensors" 2>&1 >"$out/train-2.txt" |
  tee "$out/train-2.err" | shown
cat "$out/train-2.txt"
t2=$(date +%s.%N)
load2=$(cut -d' ' -f1-3 /proc/loadavg)

# 6. The loss curve.
"$build/driver/orion-run" plot "$out/train.jsonl" -o "$out/loss.svg" \
  --title "llama (dim ${shape[1]}, ${shape[3]} layers, BPE $vocab) on Debian's fortunes, ane numerics"

# 7. What the log says: losses, skipped steps, non-finite losses, tokens/s.
{ echo "machine: $(nproc) cores; load average (1, 5, 15 min) $load0 at the start, $load2 at the end"
"$py" - "$out/train.jsonl" "$t0" "$t1" "$t2" "$stop" "$out/data" <<'PY'
import json, math, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t0, t1, t2 = map(float, sys.argv[2:5])
stop = int(sys.argv[5])
data = sys.argv[6]
# bytes per token of each text: a loss per token in bits per byte of text
per_token = {p: os.path.getsize(f"{data}/{p}.txt") / (os.path.getsize(f"{data}/{p}.bin") // 2) for p in ("train", "eval")}
bpb = lambda loss, part: loss / math.log(2) / per_token[part]
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
      f"mean of the last 10 {last10:.4f} ({bpb(last10, 'train'):.3f} bits per byte, {per_token['train']:.2f} bytes a token)")
print(f"eval loss: step {evals[0][0]} {evals[0][1]:.4f}, step {evals[-1][0]} {evals[-1][1]:.4f} "
      f"({bpb(evals[-1][1], 'eval'):.3f} bits per byte, {per_token['eval']:.2f} bytes a token)")
print(f"skipped steps: {len(skipped)} {skipped}")
print(f"non-finite losses: {len(nonfinite)} {nonfinite}")
print(f"loss scale at the end: {rows[-1]['loss_scale']}")
PY
} | tee "$out/summary.txt"
echo "wrote $out/loss.svg and $out/model.safetensors"
