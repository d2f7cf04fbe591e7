#!/usr/bin/env bash
# orion-convert from the command line: --help and usage errors, --seq in
# both spellings, refusals with exit 1 and the model directory named, the
# converted .oir of the GPT-2 and llama fixtures against golden files (the
# text is readable and stable), orionc compiling them, and orion-lint showing
# what the compiler warns about for the ANE: the Conv1D matmuls (ANE015) and
# a 32,000-wide classifier over the SRAM budget (ANE016), on a llama of
# Stories110M's widths whose weight file is sparse (zeros, no disk used).
#
#   convert.sh ORION_CONVERT ORIONC ORION_LINT SOURCE_ROOT
set -u
convert=$(realpath "$1") orionc=$(realpath "$2") lint=$(realpath "$3") root=$(realpath "$4")
models=$root/testsuite/generate/models
golden=$root/testsuite/generate/golden
source "$(dirname "$0")/lib.sh"

check help 0 "$convert" --help
contains help "usage: orion-convert MODEL_DIR -o MODEL.oir [options]"
contains help "--seq=N[,N...]"
check no-args 2 "$convert"
contains no-args "orion-convert: error: no model directory"
check no-output 2 "$convert" "$models/gpt2"
contains no-output "orion-convert: error: no output file (-o MODEL.oir)"
check bad-seq 2 "$convert" "$models/gpt2" -o x.oir --seq=16,x
contains bad-seq "orion-convert: error: --seq needs positive whole numbers, not 'x'"
check bad-dtype 2 "$convert" "$models/gpt2" -o x.oir --dtype=fp8
contains bad-dtype "orion-convert: error: --dtype is fp16 or fp32, not 'fp8'"
check misspelt 2 "$convert" "$models/gpt2" -o x.oir --sequence=16
contains misspelt "unknown option"

# Buckets: a list and a repeat, sorted and made distinct.
check buckets 0 "$convert" "$models/gpt2" -o buckets.oir --seq=32,8 --seq 16 --seq 8 --dtype fp32
names=$(grep -o '^func [a-z0-9_]*' buckets.oir | cut -c6- | tr '\n' ' ')
want="gpt2_block_8 gpt2_block_16 gpt2_block_32 gpt2_block_decode prefill_8 prefill_16 prefill_32 decode "
if [ "$names" = "$want" ]; then pass; else fail "buckets: functions '$names', expected '$want'"; fi
if grep -q "mask: fp32\[1,1,1,64\]" buckets.oir; then pass; else fail "buckets: the cache is not 64 fp32 slots"; fi

# Both spellings of a value give the same text; -o - writes it to standard output.
check spelling-eq 0 "$convert" "$models/gpt2" -o eq.oir --seq=8 --ctx=16 --dtype=fp32
check spelling-sep 0 "$convert" "$models/gpt2" -o sep.oir --seq 8 --ctx 16 --dtype fp32
same_bytes spellings eq.oir sep.oir
check stdout 0 "$convert" "$models/gpt2" -o - --seq 8 --ctx 16 --dtype fp32
same_bytes stdout out eq.oir
check switch-value 2 "$convert" --help=yes

# A refusal names the directory and exits 1; nothing is written.
mkdir bert
echo '{"model_type": "bert"}' >bert/config.json
check refusal 1 "$convert" bert -o bert.oir
contains refusal "orion-convert: error: bert: config.json: 'model_type' is \"bert\": orion-convert converts \"gpt2\" and \"llama\" models"
if [ ! -e bert.oir ]; then pass; else fail "refusal: bert.oir was written"; fi

# Golden files: each model copied beside its .oir, so the weights' path is the bare file name.
for m in gpt2 llama_tied; do
  mkdir "$m"
  cp "$models/$m/config.json" "$models/$m/model.safetensors" "$m/"
  check "convert-$m" 0 "$convert" "$m" -o "$m/model.oir" --seq 16 --ctx 32
  if cmp -s "$m/model.oir" "$golden/$m.oir"; then pass; else
    fail "golden $m: the .oir differs from testsuite/generate/golden/$m.oir"
    diff -u "$golden/$m.oir" "$m/model.oir" | head -40
  fi
  check "compile-$m" 0 "$orionc" "$m/model.oir" -o "$m.anepkg"
done

# The lint of a converted model shows the compiler's ANE warnings.
check lint-gpt2 1 "$lint" --fail-on=warning gpt2/model.oir
contains lint-gpt2 "ANE015"
contains lint-gpt2 "qkv_raw"

mkdir wide
cat >wide/config.json <<'JSON'
{"model_type": "llama", "vocab_size": 32000, "hidden_size": 768, "intermediate_size": 2048,
 "num_hidden_layers": 1, "num_attention_heads": 12, "max_position_embeddings": 128,
 "tie_word_embeddings": true}
JSON
/usr/bin/python3 - wide/model.safetensors <<'PY'
import json, struct, sys
E, F, V = 768, 2048, 32000
shapes = {"model.embed_tokens.weight": [V, E], "model.norm.weight": [E]}
p = "model.layers.0."
for n, s in [("input_layernorm.weight", [E]), ("post_attention_layernorm.weight", [E]),
             ("self_attn.q_proj.weight", [E, E]), ("self_attn.k_proj.weight", [E, E]),
             ("self_attn.v_proj.weight", [E, E]), ("self_attn.o_proj.weight", [E, E]),
             ("mlp.gate_proj.weight", [F, E]), ("mlp.up_proj.weight", [F, E]), ("mlp.down_proj.weight", [E, F])]:
    shapes[p + n] = s
header, at = {}, 0
for k, s in shapes.items():
    n = 2
    for d in s:
        n *= d
    header[k] = {"dtype": "F16", "shape": s, "data_offsets": [at, at + n]}
    at += n
text = json.dumps(header).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    f.truncate(8 + len(text) + at)  # the data: zeros, a hole in the file
PY
check convert-wide 0 "$convert" wide -o wide/model.oir --seq 64 --ctx 64
check lint-wide 1 "$lint" --fail-on=warning wide/model.oir
contains lint-wide "ANE016"
contains lint-wide "logits_d"
finish
