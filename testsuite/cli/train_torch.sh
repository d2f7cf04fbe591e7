#!/usr/bin/env bash
# Whole models against PyTorch (docs/training.md, "Against PyTorch"): the
# GPT-2-style and llama-style models of testsuite/train/models/ compiled with
# orionc --train and trained by orion-run train, compared with the fixtures of
# testsuite/make_train_model_fixtures.py (committed; no torch needed here):
#   (a) every param's gradient of step 1's batch, in fp32 numerics, within 1e-4
#       of PyTorch's (relative to the largest element of that gradient);
#   (b) 20 steps of SGD (momentum 0.9) and of AdamW in fp32 numerics: every
#       step's loss within 1e-4 relative of PyTorch's (and the same in ane
#       numerics, which leave an fp32 program's results in fp32);
#   (c) an fp16 copy of each model (params, activations and fixed inputs fp16,
#       the loss fp32) in ane numerics: every step's loss within the derived
#       fp16 tolerance, (1 + sqrt(s - 1)) * 2^-11 relative at step s.
#
#   train_torch.sh ORIONC ORION_RUN SOURCE_ROOT [MODELS_DIR]
# (MODELS_DIR: fixtures written elsewhere by the script, as bench/train_torch does;
# TRAIN_FLAGS: more orionc options for every --train compile, as
# --gather-grad=onehot for the embeddings' gradients as one-hot matmuls)
set -u
read -r -a train_flags <<<"${TRAIN_FLAGS:-}"
orionc=$(realpath "$1") run=$(realpath "$2") root=$(realpath "$3")
models=$(realpath "${4:-$root/testsuite/train/models}")
source "$(dirname "$0")/lib.sh"
compare=$root/testsuite/tools/check_train_torch.py
lint=$(dirname "$orionc")/orion-lint
data=$models/tokens.bin
mkdir work fp16 && export TMPDIR=$tmp/work # where the working copies go

train_and_compare() { # PACKAGE MODEL NUMERICS TOL INPUTS...
  local pkg=$1 m=$2 numerics=$3 tol=$4 opt hyper
  shift 4
  for opt in sgd adamw; do
    if [ $opt = sgd ]; then hyper=(--optimizer sgd --lr 0.1 --momentum 0.9); else hyper=(--optimizer adamw --lr 0.003); fi
    check "$pkg-$opt-$numerics" 0 "$run" train "$pkg" --data "$data" --steps 20 "${hyper[@]}" \
      --numerics "$numerics" "$@" --log "$pkg-$opt-$numerics.jsonl"
    check "$pkg-$opt-$numerics-losses" 0 /usr/bin/python3 "$compare" losses "$models/${m}_fixture.json" $opt \
      "$pkg-$opt-$numerics.jsonl" "$tol"
    echo "$pkg $numerics: $(cat out)"
  done
}

for m in ${MODELS:-gpt2 llama}; do
  if [ $m = gpt2 ]; then
    inputs=(--input "pos=$models/gpt2_pos.npy")
    inputs16=("${inputs[@]}")
  else
    inputs=() inputs16=()
    for t in cos sin rot; do
      inputs+=(--input "$t=$models/llama_$t.npy")
      /usr/bin/python3 "$compare" npy16 "$models/llama_$t.npy" "fp16/llama_$t.npy" || fail "npy16 $t"
      inputs16+=(--input "$t=fp16/llama_$t.npy")
    done
  fi
  # No --allow: the backward is ANE-legal (split-concat takes the split's adjoint apart), and the
  # linter finds nothing in the package.
  check "$m-compile" 0 "$orionc" -w --train "${train_flags[@]}" "$models/$m.oir" -o $m.anepkg
  check "$m-lint" 0 "$lint" --fail-on=note $m.anepkg
  if [ $m = gpt2 ]; then # the fused qkv's weight gradient arrives as an output group the contract names
    check gpt2-grad-group 0 grep -qPz '<key>Name</key>\s*<string>grad\.h\.1\.attn\.c_attn\.weight</string>\s*<key>Axis' \
      $m.anepkg/Manifest.plist
  fi
  # (a) One plain SGD step of lr 1000 exports start - 1000 g: g to about 1e-7
  # relative (the fp32 rounding of the update; the start's is divided by 1000).
  check "$m-grad-step" 0 "$run" train $m.anepkg --data "$data" --steps 1 --lr 1000 --optimizer sgd \
    --numerics fp32 "${inputs[@]}" --log $m-grad.jsonl --export $m-grad.safetensors
  check "$m-grads" 0 /usr/bin/python3 "$compare" grads "$models/${m}_fixture.json" "$models/$m.safetensors" \
    "$models/${m}_grads.safetensors" $m-grad.safetensors 1000 $m-grad.jsonl 1e-4
  echo "$m: $(cat out)"
  # (b)
  train_and_compare $m.anepkg $m fp32 1e-4 "${inputs[@]}"
  train_and_compare $m.anepkg $m ane 1e-4 "${inputs[@]}"
  # An fp32 program's results stay fp32 in ane numerics and the loss scale is a power of two:
  # the same losses bit for bit.
  for opt in sgd adamw; do
    check "$m-$opt-ane-is-fp32" 0 /usr/bin/python3 -c '
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:])
assert len(a) == 20 and a == b, (a, b)
' $m.anepkg-$opt-fp32.jsonl $m.anepkg-$opt-ane.jsonl
  done
  # (c) The fp16 copy reads the same fp32 start weights (rounded to fp16 by the compile).
  sed -e 's/fp32\[/fp16[/g' -e 's/loss: fp16\[\]/loss: fp32[]/' "$models/$m.oir" >fp16/$m.oir
  cp "$models/$m.safetensors" fp16/
  check "$m-fp16-compile" 0 "$orionc" -w --train "${train_flags[@]}" fp16/$m.oir -o ${m}16.anepkg
  check "$m-fp16-lint" 0 "$lint" --fail-on=note ${m}16.anepkg
  train_and_compare ${m}16.anepkg $m ane fp16 "${inputs16[@]}"
done

# RoPE with slice, neg and concat (llama_slice.oir): the default pipeline refuses it (split-concat
# splits a saved value; see the model's comment), O1's passes less split-concat compile it, and its
# gradients and SGD losses are the llama fixtures'.
if [ -z "${MODELS:-}" ]; then
  o1_less_split_concat='inline,(dce,identity-elim,cast-fusion,const-fold,fold-layout),decompose-attention,'
  o1_less_split_concat+='lower-cross-entropy,lower-rms-norm,lower-layer-norm,lower-neg,lower-silu,gelu-tanh,lower-linear,'
  o1_less_split_concat+='split-conv-bias,(dce,identity-elim,cast-fusion,const-fold,fold-layout),io-legalize,'
  o1_less_split_concat+='fp16-range-guard,sram-annotate'
  check slice-compile 0 "$orionc" -w --allow=ANE001 --train "${train_flags[@]}" --passes="$o1_less_split_concat" \
    "$models/llama_slice.oir" -o llama_slice.anepkg
  slice_inputs=(--input "cos=$models/llama_cos.npy" --input "sin=$models/llama_sin.npy")
  check slice-grad-step 0 "$run" train llama_slice.anepkg --data "$data" --steps 1 --lr 1000 --optimizer sgd \
    --numerics fp32 "${slice_inputs[@]}" --log slice-grad.jsonl --export slice-grad.safetensors
  check slice-grads 0 /usr/bin/python3 "$compare" grads "$models/llama_fixture.json" "$models/llama.safetensors" \
    "$models/llama_grads.safetensors" slice-grad.safetensors 1000 slice-grad.jsonl 1e-4
  echo "llama_slice: $(cat out)"
  train_and_compare llama_slice.anepkg llama fp32 1e-4 "${slice_inputs[@]}"
  # The default pipeline: the saved rotated q and k are output groups the contract names, the
  # backward's halves are placed by products (no concat, no --allow), and the linter finds nothing.
  check slice-o1-compile 0 "$orionc" -w --train "$models/llama_slice.oir" -o llama_slice_o1.anepkg
  check slice-o1-lint 0 "$lint" --fail-on=note llama_slice_o1.anepkg
  check slice-o1-groups 0 grep -c '<string>saved.layers.1.qr</string>' llama_slice_o1.anepkg/Manifest.plist
  check slice-o1-grad-step 0 "$run" train llama_slice_o1.anepkg --data "$data" --steps 1 --lr 1000 --optimizer sgd \
    --numerics fp32 "${slice_inputs[@]}" --log slice-o1-grad.jsonl --export slice-o1-grad.safetensors
  check slice-o1-grads 0 /usr/bin/python3 "$compare" grads "$models/llama_fixture.json" "$models/llama.safetensors" \
    "$models/llama_grads.safetensors" slice-o1-grad.safetensors 1000 slice-o1-grad.jsonl 1e-4
  echo "llama_slice (default pipeline): $(cat out)"
  train_and_compare llama_slice_o1.anepkg llama fp32 1e-4 "${slice_inputs[@]}"
fi
finish
