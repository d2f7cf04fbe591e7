#!/usr/bin/env bash
# The README's main job (examples/generate/fortunes/run.sh) end to end, tiny:
# a BPE learned on a slice of Debian's fortunes (orion-tokenize train), the
# text encoded into token files (--output), a tiny llama with Hugging Face's
# param names (make_train_models.py --names hf) trained a few steps in ane
# numerics and exported, the Hugging Face directory (hf_dir.py), orion-convert,
# orionc, orion-run generate --tokenizer --json. Asserts: the converted
# program's logits equal those of the training model's forward with the
# exported weights (make_train_models.py --logits, patched with the export;
# fp32 numerics, within 1e-5 of the largest logit), the proof that export ->
# convert keeps every weight and the layout (RoPE, norms, the tied head); the
# greedy ids are reproducible and each is what that forward predicts; the
# JSON's text is orion-tokenize decode of its generated_ids; hf_dir.py refuses
# an export of another shape. Skipped (77) without Debian's fortunes.
#
#   main_job.sh ORIONC ORION_RUN ORION_TOKENIZE ORION_CONVERT SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") tok=$(realpath "$3") convert=$(realpath "$4") root=$(realpath "$5")
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || { echo "skip: no Debian fortunes in $fortunes (scripts/setup.sh installs them)"; exit 77; }
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
logits="$py $root/examples/generate/fortunes/logits.py"
shape=(--dim 32 --layers 2 --heads 2 --hidden 64 --vocab 300)

# The text and the vocabulary: the split of prepare.py, a slice of each part.
check prepare 0 "$py" "$root/examples/train/fortunes/prepare.py" --text --eval-bytes 4000 text
head -c 60000 text/train.txt >train.txt
check bpe 0 "$tok" train --vocab-size 300 train.txt -o tokenizer
check encode-train 0 "$tok" --tokenizer tokenizer encode --file train.txt --output train.bin
check encode-eval 0 "$tok" --tokenizer tokenizer encode --file text/eval.txt --output eval.bin

# Train a few steps in ane numerics (fp16 model, fp32 masters) and export.
mkdir rope16 rope32
check model 0 "$py" "$root/bench/make_train_models.py" llama train.oir "${shape[@]}" --seq 32 --batch 2 \
  --dtype fp16 --names hf --rope rope16
check compile-train 0 "$orionc" --train -w -o train.anepkg train.oir
check train 0 "$run" train train.anepkg --data train.bin --input cos=rope16/cos.npy --input sin=rope16/sin.npy \
  --input rot=rope16/rot.npy --steps 6 --lr 3e-3 --numerics ane --export trained.safetensors
contains train "trained steps 1-6 of 6"

# The Hugging Face directory, converted (fp32) and compiled.
check hf-dir 0 "$py" "$root/examples/generate/fortunes/hf_dir.py" hf --export trained.safetensors \
  "${shape[@]}" --positions 64 --tokenizer tokenizer
contains hf-dir "model.safetensors (20 tensors), vocab.json, merges.txt"
check hf-config 0 "$py" -c '
import json, sys
c = json.load(open("hf/config.json"))
want = {"model_type": "llama", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "eos_token_id": 299}
assert all(c[k] == v for k, v in want.items()), {k: c.get(k) for k in want}'
check convert 0 "$convert" hf -o gen.oir --seq 32 --ctx 64 --dtype fp32
check compile-gen 0 "$orionc" -w -o gen.anepkg gen.oir

# The training model's forward (logits instead of the loss), fp32, with the exported weights.
check reference 0 "$py" "$root/bench/make_train_models.py" llama ref.oir "${shape[@]}" --seq 32 --batch 1 \
  --dtype fp32 --names hf --logits --rope rope32
check compile-ref 0 "$orionc" -w -o ref.anepkg ref.oir
check patch-ref 0 "$run" patch ref.anepkg --weights trained.safetensors
contains patch-ref "20 weights patched"
forward() { # forward TOKENS.npy OUTDIR: the reference's logits
  "$run" ref.anepkg --numerics fp32 --input "tokens=$1" --input cos=rope32/cos.npy --input sin=rope32/sin.npy \
    --input rot=rope32/rot.npy --output-dir "$2"
}
check window 0 $logits window eval.bin 32 window.npy
check prefill 0 "$run" gen.anepkg --function prefill_32 --numerics fp32 --input tokens=window.npy --output-dir gen.out
check forward 0 forward window.npy ref.out
check same-logits 0 $logits compare gen.out/logits.npy ref.out/logits.npy 1e-5

# Generation: greedy, twice; the text is the decode of the ids; each id is the forward's prediction.
gen=("$run" generate gen.anepkg --tokenizer hf --prompt "A fool and his money" --max-tokens 20 --temperature 0
  --numerics fp32 --ignore-eos --json)
if "${gen[@]}" >first.json 2>err; then pass; else fail "generate: exit $?"; cat err; fi
if "${gen[@]}" >again.json 2>err; then pass; else fail "generate-again: exit $?"; cat err; fi
ids_of() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "$1"; }
same_bytes greedy-reproducible <(ids_of first.json) <(ids_of again.json)
"$py" - first.json <<'PY' >ids.txt
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(map(str, j["generated_ids"])))
open("text.txt", "wb").write(j["text"].encode())
open("all.txt", "w").write(" ".join(map(str, j["prompt_ids"] + j["generated_ids"])))
open("prompt_count.txt", "w").write(str(len(j["prompt_ids"])))
PY
"$tok" --tokenizer tokenizer decode --file ids.txt >decoded.txt
same_bytes text-is-decode text.txt decoded.txt
if [ "$(wc -w <ids.txt)" = 20 ]; then pass; else fail "generate: $(wc -w <ids.txt) ids, expected 20"; fi
# The prompt and what followed, padded with 0 to 32 (causal: padding changes no earlier row), through the forward.
"$py" - <<'PY'
import struct
ids = [int(x) for x in open("all.txt").read().split()]
ids = (ids + [0] * 32)[:32]
head = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 32), }"
head += " " * (128 - 10 - len(head) - 1) + "\n"
open("all.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + struct.pack("<32i", *ids))
PY
check forward-all 0 forward all.npy all.out
check predicted 0 "$py" - <<PY
ids = [int(x) for x in open("all.txt").read().split()]
n = int(open("prompt_count.txt").read())
import subprocess
out = subprocess.run("$logits argmax all.out/logits.npy".split(), capture_output=True, text=True, check=True).stdout
best = [(int(a), float(m)) for a, m in (l.split() for l in out.splitlines())]
checked = 0
for t in range(n - 1, len(ids) - 1):
    top, margin = best[t]
    if margin > 1e-4:  # a near tie could fall either way between decode and the full forward
        assert top == ids[t + 1], (t, top, ids[t + 1])
        checked += 1
assert checked >= 10, checked
PY

# hf_dir.py checks the export against the shape it is told.
check hf-dir-wrong 1 "$py" "$root/examples/generate/fortunes/hf_dir.py" hf2 --export trained.safetensors \
  --dim 32 --layers 3 --heads 2 --hidden 64 --vocab 300 --positions 64
contains hf-dir-wrong "hf_dir.py: trained.safetensors is not this llama's export: missing ['model.layers.2.input_layernorm.weight'"
finish
