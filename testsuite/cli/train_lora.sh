#!/usr/bin/env bash
# LoRA fine-tuning (docs/lora.md, "Training adapters"): orionc --train --lora
# differentiates with respect to the adapter inputs of testsuite/train/models/
# llama.oir (q_proj rank 4 alpha 8, v_proj rank 2, both blocks; base weights
# frozen) and orion-run train --lora trains them, against the PyTorch fixtures
# of testsuite/train/make_lora_fixture.py (committed; no torch needed here):
#   the adapters' gradients of step 1 within 1e-4 (fp32 numerics), 20 steps of
#   AdamW and of SGD within 1e-4 relative; 0 compiles and 0 weight updates; PEFT
#   init (step 1's loss is the base model's, bit for bit); resume bit for bit;
#   the PEFT adapter directory and orion-run --adapter on it; the errors.
#
#   train_lora.sh ORIONC ORION_RUN ORION_INSPECT SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") inspect=$(realpath "$3") root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
models=$root/testsuite/train/models
compare=$root/testsuite/tools/check_train_torch.py
fixture=$models/llama_lora_fixture.json
init=$models/llama_lora_init.safetensors
data=$models/tokens.bin
mkdir work && export TMPDIR=$tmp/work
inputs=(--input "cos=$models/llama_cos.npy" --input "sin=$models/llama_sin.npy" --input "rot=$models/llama_rot.npy")
lora=(--lora='layers.*.self_attn.q_proj:4:8' --lora='*.v_proj:2')
py() { /usr/bin/python3 -c "$@"; }

check compile 0 "$orionc" -w --allow=ANE001 --train "${lora[@]}" "$models/llama.oir" -o l.anepkg
check inspect 0 "$inspect" l.anepkg
contains inspect-grad "grad.layers.0.self_attn.q_proj.lora_A -> input layers.0.self_attn.q_proj.lora_A"
contains inspect-grad-b "grad.layers.1.self_attn.v_proj.lora_B -> input layers.1.self_attn.v_proj.lora_B"
contains inspect-params "trainable params: 0"
contains inspect-adapters "LoRA adapters: 4"
contains inspect-rank "layers.1.self_attn.v_proj (rank 2, alpha 2)"
check summary 0 "$orionc" -w --allow=ANE001 --train "${lora[@]}" --summary "$models/llama.oir" -o s.anepkg
contains summary-line "params 0 trained, 20 frozen; vocabulary 64; LoRA adapters 4 (8 inputs trained)"
check base-compile 0 "$orionc" -w --allow=ANE001 --train "$models/llama.oir" -o base.anepkg

# Gradients: one SGD step of lr 1000 from the fixture's adapters leaves start - 1000 g in the export.
check grad-step 0 "$run" train l.anepkg --lora --adapter "$init" --data "$data" --steps 1 --lr 1000 --optimizer sgd \
  --numerics fp32 "${inputs[@]}" --log grad.jsonl --export-adapter grad
check grads 0 /usr/bin/python3 "$compare" grads "$fixture" "$init" "$models/llama_lora_grads.safetensors" \
  grad/adapter_model.safetensors 1000 grad.jsonl 1e-4
echo "lora grads: $(cat out)"

# Trajectories; the summary says no compile and no weight update happened.
for opt in adamw sgd; do
  if [ $opt = sgd ]; then hyper=(--optimizer sgd --lr 0.1 --momentum 0.9); else hyper=(--optimizer adamw --lr 0.01); fi
  check $opt 0 "$run" train l.anepkg --lora --adapter "$init" --data "$data" --steps 20 "${hyper[@]}" --numerics fp32 \
    "${inputs[@]}" --log $opt.jsonl
  contains $opt-no-updates "compiles: 0; weight updates: 0 ("
  check $opt-losses 0 /usr/bin/python3 "$compare" losses "$fixture" $opt $opt.jsonl 1e-4
  echo "lora $(cat out)"
done

# PEFT init (no --adapter): lora_B is zero, so step 1's loss is the base model's bit for bit; lora_A is
# uniform in [-1/sqrt(32), 1/sqrt(32)) and depends on --seed only.
check base-step 0 "$run" train base.anepkg --data "$data" --steps 1 --lr 0 --numerics fp32 "${inputs[@]}" --log base.jsonl
for s in 1 2; do
  check peft-init-$s 0 "$run" train l.anepkg --lora --data "$data" --steps 1 --lr 0 --numerics fp32 "${inputs[@]}" \
    --seed 7 --log peft$s.jsonl --export-adapter peft$s
done
check peft-seed 0 "$run" train l.anepkg --lora --data "$data" --steps 1 --lr 0 --numerics fp32 "${inputs[@]}" \
  --seed 8 --export-adapter peft3
check peft-init 0 py '
import json, struct, sys
def st(p):
    b = open(p, "rb").read(); n = struct.unpack_from("<Q", b)[0]; h = json.loads(b[8:8 + n])
    return {k: struct.unpack_from("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4), b, 8 + n + v["data_offsets"][0])
            for k, v in h.items()}
loss = lambda p: json.loads(open(p).readline())["loss"]
assert loss("peft1.jsonl") == loss("base.jsonl"), (loss("peft1.jsonl"), loss("base.jsonl"))
a, b, c = st("peft1/adapter_model.safetensors"), st("peft2/adapter_model.safetensors"), st("peft3/adapter_model.safetensors")
assert a == b and a != c and len(a) == 8
for k, v in a.items():
    if k.endswith("lora_B.weight"): assert all(x == 0 for x in v), k
    else: assert all(abs(x) <= 32 ** -0.5 for x in v) and len(set(v)) == len(v), k
'

# Resume: steps 11-20 from the checkpoint of step 10 are those of the uninterrupted run, bit for bit.
check ckpt-run 0 "$run" train l.anepkg --lora --adapter "$init" --data "$data" --steps 20 --lr 0.01 --shuffle \
  --numerics fp32 "${inputs[@]}" --log full.jsonl --checkpoint-dir ck --checkpoint-every 10
check resume 0 "$run" train l.anepkg --lora --adapter "$init" --data "$data" --steps 20 --lr 0.01 --shuffle \
  --numerics fp32 "${inputs[@]}" --log resumed.jsonl --resume ck/step-000000010
contains resume-no-updates "trained steps 11-20 of 20"
check resume-same 0 py '
import json
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in ("full.jsonl", "resumed.jsonl"))
assert len(a) == 20 and len(b) == 10 and a[10:] == b, (a, b)
'

# The adapter directory: PEFT's config, fp32 tensors under PEFT's keys; orion-run --adapter binds it and the
# forward's loss is the trained program's (the eval loss on the same batch after the last step), bit for bit.
/usr/bin/python3 -c '
import struct, sys
ids = [int(x) for x in struct.unpack("<481H", open(sys.argv[1], "rb").read())][:33]
open("batch.bin", "wb").write(struct.pack("<33H", *ids))
import json
def npy(path, rows):
    head = "{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (2, 16), }"
    head += " " * (-(10 + len(head) + 1) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode()
                           + struct.pack("<32i", *(rows[0] + rows[1])))
npy("tok.npy", [ids[0:16], ids[16:32]])
npy("tgt.npy", [ids[1:17], ids[17:33]])
' "$data" || fail "batch files"
check export 0 "$run" train l.anepkg --lora --adapter "$init" --data "$data" --steps 5 --lr 0.01 --numerics fp32 \
  "${inputs[@]}" --eval-data batch.bin --log export.jsonl --export-adapter trained
check config 0 py '
import json, struct
c = json.load(open("trained/adapter_config.json"))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8 and c["bias"] == "none", c
assert c["target_modules"] == ["layers.%d.self_attn.%s_proj" % (i, p) for i in (0, 1) for p in "qv"], c
assert c["rank_pattern"] == {"layers.0.self_attn.v_proj": 2, "layers.1.self_attn.v_proj": 2}, c
assert c["alpha_pattern"] == {"layers.0.self_attn.v_proj": 2, "layers.1.self_attn.v_proj": 2}, c
b = open("trained/adapter_model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack_from("<Q", b)[0]])
assert h["base_model.model.layers.0.self_attn.q_proj.lora_A.weight"]["shape"] == [4, 32], h
assert h["base_model.model.layers.1.self_attn.v_proj.lora_B.weight"]["shape"] == [32, 2], h
assert {v["dtype"] for v in h.values()} == {"F32"} and len(h) == 8, h
'
check run-adapter 0 "$run" l.anepkg --function main.fwd --numerics fp32 --no-ane-checks --input tokens=tok.npy \
  --input targets=tgt.npy "${inputs[@]}" --adapter trained/adapter_model.safetensors --output-dir fwd
check run-adapter-loss 0 py '
import json, struct
b = open("fwd/loss.npy", "rb").read()
loss = struct.unpack("<f", b[-4:])[0]
ev = [json.loads(l) for l in open("export.jsonl")][-1]["eval_loss"]
assert loss == ev, (loss, ev)
'
# The exported adapter starts a further run as it left off: its step 1 loss is the step-6 forward.
check readapter 0 "$run" train l.anepkg --lora --adapter trained/adapter_model.safetensors --data "$data" --steps 1 \
  --lr 0 --numerics fp32 "${inputs[@]}" --eval-data batch.bin --log again.jsonl
check readapter-eval 0 py '
import json
a = [json.loads(l) for l in open("export.jsonl")][-1]["eval_loss"]
b = [json.loads(l) for l in open("again.jsonl")][-1]["eval_loss"]
assert a == b, (a, b)
'

# The start values take keys as orion-run --adapter does (orion_lora_match): a Hugging Face model's modules
# one level deeper ("model.layers.0..." for the program's "layers.0...") name the same inputs.
check nested-keys 0 py '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h = {(k.replace("base_model.model.", "base_model.model.model.", 1) if k != "__metadata__" else k): v for k, v in h.items()}
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open("nested.safetensors", "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
' "$init"
for f in "$init" nested.safetensors; do
  check "nested-run-$(basename "$f")" 0 "$run" train l.anepkg --lora --adapter "$f" --data "$data" --steps 1 --lr 0 \
    --numerics fp32 "${inputs[@]}" --log "nested-$(basename "$f").jsonl"
done
check nested-same 0 py '
import json, sys
a, b = (json.loads(open(f).readline())["loss"] for f in sys.argv[1:])
assert a == b, (a, b)
' "nested-$(basename "$init").jsonl" nested-nested.safetensors.jsonl

# fp16 (ane numerics): an fp16 copy of the model gets fp16 adapters; AdamW's losses within the fp16
# tolerance of docs/training.md, (s + 1) 2^-11 at step s, of the same fixtures.
mkdir fp16
sed -e 's/fp32\[/fp16[/g' -e 's/loss: fp16\[\]/loss: fp32[]/' "$models/llama.oir" >fp16/llama.oir
cp "$models/llama.safetensors" fp16/
inputs16=()
for t in cos sin rot; do
  /usr/bin/python3 "$compare" npy16 "$models/llama_$t.npy" "fp16/llama_$t.npy" || fail "npy16 $t"
  inputs16+=(--input "$t=fp16/llama_$t.npy")
done
check fp16-compile 0 "$orionc" -w --allow=ANE001 --train "${lora[@]}" fp16/llama.oir -o l16.anepkg
check fp16-adamw 0 "$run" train l16.anepkg --lora --adapter "$init" --data "$data" --steps 20 --lr 0.01 \
  "${inputs16[@]}" --log fp16.jsonl
contains fp16-no-updates "compiles: 0; weight updates: 0 ("
check fp16-losses 0 /usr/bin/python3 "$compare" losses "$fixture" adamw fp16.jsonl fp16
echo "lora fp16 $(cat out)"

# Errors.
check no-match 1 "$orionc" --train --lora='nothing.*:4' "$models/llama.oir" -o x.anepkg
contains no-match-msg "--lora: pattern 'nothing.*' matches no linear layer with a constant weight"
check not-lora 1 "$run" train base.anepkg --lora --data "$data" --steps 1 --lr 0.1 --numerics fp32 "${inputs[@]}"
contains not-lora-msg "'base.anepkg' has no adapter gradients (no Adapters in its training contract): train --lora needs a package compiled with orionc --train --lora=PATTERN:RANK[:ALPHA]"
check needs-lora 1 "$run" train l.anepkg --data "$data" --steps 1 --lr 0.1 --numerics fp32 "${inputs[@]}"
contains needs-lora-msg "'l.anepkg' trains LoRA adapters (orionc --train --lora), not its weights: use orion-run train --lora"
check export-weights 2 "$run" train l.anepkg --lora --data "$data" --steps 1 --lr 0.1 --export w.safetensors
contains export-weights-msg "--export writes trained weights; with --lora the adapters leave through --export-adapter DIR"
check adapter-alone 2 "$run" train base.anepkg --adapter "$init" --data "$data" --steps 1 --lr 0.1
contains adapter-alone-msg "--adapter goes with --lora"
check adapter-input 1 "$run" train l.anepkg --lora --data "$data" --steps 1 --lr 0.1 "${inputs[@]}" \
  --input layers.0.self_attn.q_proj.lora_A=tok.npy
contains adapter-input-msg "--input layers.0.self_attn.q_proj.lora_A: this adapter input trains (its start values: --adapter FILE.safetensors)"
check wrong-adapter 1 "$run" train l.anepkg --lora --adapter "$models/llama.safetensors" --data "$data" \
  --steps 1 --lr 0.1 "${inputs[@]}"
contains wrong-adapter-msg "tensor 'embed_tokens.weight' is not an adapter input of this package ('embed_tokens')"
finish
