#!/usr/bin/env bash
# examples/generate/fortunes/run.sh: the README's main job (issue 14), from
# nothing to generated text: train a small llama on Debian's fortunes with a
# BPE learned there, turn the trained weights into a Hugging Face llama
# directory, convert that into a generation package and generate.
#
#   bash examples/generate/fortunes/run.sh [--full] [--prompt TEXT] [OUT]
#
#   1. examples/train/fortunes/run.sh --small: the text split, a byte-level BPE
#      of 1,024 ids (orion-tokenize train), the token files, the model
#      (examples/train/fortunes/small.oir: dim 64, 2 layers, Hugging Face
#      llama's param names) trained 400 steps in ane numerics (stopped and
#      resumed midway), printing the loss every 20 steps, and exported
#      (model.safetensors, fp32 masters by param name);
#   2. hf_dir.py: OUT/hf, a Hugging Face llama directory (config.json, the
#      export as model.safetensors, the tokenizer's vocab.json and merges.txt);
#   3. orion-convert OUT/hf (prefill buckets of 32 and 128 tokens, a KV cache
#      of 128: the positions it was trained on), orionc;
#   4. a check: the converted program's loss on 4 x 128 held-back tokens,
#      beside the training run's last eval loss;
#   5. orion-run generate with the tokenizer: about 60 tokens after the prompt
#      (temperature 0.8, seed 1), the text streamed, then the tokens/s.
#
# --full takes the 1,000-step demonstration model of examples/train/fortunes
# (run.sh without --small: 15.2M params, BPE of 32,000 ids, tens of minutes)
# instead. OUT (default build/fortunes-generate, or build/fortunes-generate-full)
# receives hf/, model.oir, model.anepkg and the check's files; the training
# run's own directory is build/fortunes-small (build/fortunes). BUILD=dir picks
# the build tree (default build). Needs Debian's fortunes and python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${BUILD:-$root/build}
py=/usr/bin/python3
full=0 out= prompt="The best way to"
while [ $# -gt 0 ]; do
  case $1 in
  --full) full=1 ;;
  --prompt) [ $# -ge 2 ] || { echo "run.sh: --prompt needs a text" >&2; exit 2; }; prompt=$2; shift ;;
  -*) echo "usage: run.sh [--full] [--prompt TEXT] [OUT]" >&2; exit 2 ;;
  *) out=$1 ;;
  esac
  shift
done
if [ $full = 1 ]; then
  trained=$build/fortunes out=${out:-$build/fortunes-generate-full}
  shape=(--dim 288 --layers 6 --heads 6 --hidden 768 --vocab 32000 --positions 128)
else
  trained=$build/fortunes-small out=${out:-$build/fortunes-generate}
  shape=(--dim 64 --layers 2 --heads 4 --hidden 192 --vocab 1024 --positions 128)
fi
for tool in orionc orion-run orion-tokenize orion-convert; do
  [ -x "$build/driver/$tool" ] ||
    { echo "run.sh: no $tool in '$build' (meson setup build && ninja -C build)" >&2; exit 1; }
done
mkdir -p "$out"

# 1. Train (or, with --full, take the demonstration's finished run).
if [ $full = 1 ]; then
  [ -f "$trained/model.safetensors" ] ||
    { echo "run.sh: no $trained/model.safetensors: run examples/train/fortunes/run.sh first" >&2; exit 1; }
else
  echo "== 1. training a small llama on Debian's fortunes (examples/train/fortunes/run.sh --small)"
  BUILD=$build bash "$root/examples/train/fortunes/run.sh" --small "$trained"
fi

# 2. The Hugging Face directory: the export's keys are already Hugging Face llama's.
echo "== 2. the trained weights as a Hugging Face llama directory"
"$py" "$here/hf_dir.py" "$out/hf" --export "$trained/model.safetensors" --tokenizer "$trained/tokenizer" "${shape[@]}"

# 3. Convert and compile: prefill_32, prefill_128 and decode, one set of weights.
echo "== 3. orion-convert and orionc"
"$build/driver/orion-convert" "$out/hf" -o "$out/model.oir" --seq 32,128 --ctx 128
"$build/driver/orionc" -w -o "$out/model.anepkg" "$out/model.oir" 2>"$out/orionc.err" ||
  { cat "$out/orionc.err" >&2; exit 1; }
echo "compiled $out/model.anepkg"

# 4. The converted program predicts the held-back text as the trained one
#    did: its mean loss over the first 4 windows of 128 held-back tokens.
losses=()
for w in 0 1 2 3; do
  "$py" "$here/logits.py" window "$trained/data/eval.bin" 128 "$out/eval-$w.npy" $((128 * w))
  "$build/driver/orion-run" "$out/model.anepkg" --function prefill_128 --input "tokens=$out/eval-$w.npy" \
    --output-dir "$out/eval-$w.out" >/dev/null
  losses+=("$("$py" "$here/logits.py" loss "$out/eval-$w.out/logits.npy" "$out/eval-$w.npy")")
done
"$py" - "$trained/train.jsonl" "${losses[@]}" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
losses = [float(x) for x in sys.argv[2:]]
print(f"the converted model's loss on 4 x 128 held-back tokens: {sum(losses) / len(losses):.4f} "
      f"(the training run's eval loss at step {last['step']}: {last['eval_loss']:.4f})")
PY

# 5. Generate.
echo "== 4. orion-run generate (prompt: \"$prompt\")"
"$build/driver/orion-run" generate "$out/model.anepkg" --tokenizer "$out/hf" --prompt "$prompt" \
  --max-tokens 60 --seed 1
echo
