#!/usr/bin/env bash
# Whole models against PyTorch (docs/training.md, "Against PyTorch"): the
# GPT-2-style and llama-style models of testsuite/train/models/ compiled with
# orionc --train and trained by orion-run train, compared with the fixtures of
# testsuite/make_train_model_fixtures.py (committed; no torch needed here):
#   (a) every param's gradient of step 1's batch, in fp32 numerics, within 1e-4
#       of PyTorch's (relative to the largest element of that gradient);
#   (b) 20 steps of SGD (momentum 0.9) and of AdamW in fp32 numerics: every
#       step's loss within 1e-4 relative of PyTorch's;
#   (c) the same 20 steps in ane numerics, within the fp16 tolerance derived in
#       docs/training.md.
#
#   train_torch.sh ORIONC ORION_RUN SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") root=$(realpath "$3")
source "$(dirname "$0")/lib.sh"
models=$root/testsuite/train/models compare=$root/testsuite/tools/check_train_torch.py
data=$models/tokens.bin
mkdir work && export TMPDIR=$tmp/work # where the working copies go
ANE_TOL=${ANE_TOL:-2e-2}

for m in ${MODELS:-gpt2}; do
  if [ $m = gpt2 ]; then
    inputs=(--input "pos=$models/gpt2_pos.npy")
  else
    inputs=(--input "cos=$models/llama_cos.npy" --input "sin=$models/llama_sin.npy")
  fi
  # --allow=ANE001: the backward's concats of split and slice adjoints (docs/training.md,
  # "What the next increments find"); the CPU backend runs them.
  check "$m-compile" 0 "$orionc" -w --allow=ANE001 --train "$models/$m.oir" -o $m.anepkg
  # (a) One plain SGD step of lr 1000 exports start - 1000 g: g to 1e-7 of its
  # largest element (the fp32 rounding of the update, divided by 1000).
  check "$m-grad-step" 0 "$run" train $m.anepkg --data "$data" --steps 1 --lr 1000 --optimizer sgd \
    --numerics fp32 "${inputs[@]}" --log $m-grad.jsonl --export $m-grad.safetensors
  check "$m-grads" 0 /usr/bin/python3 "$compare" grads "$models/${m}_fixture.json" "$models/$m.safetensors" \
    "$models/${m}_grads.safetensors" $m-grad.safetensors 1000 $m-grad.jsonl 1e-4
  cat out
  for opt in sgd adamw; do
    if [ $opt = sgd ]; then hyper=(--optimizer sgd --lr 0.1 --momentum 0.9); else hyper=(--optimizer adamw --lr 0.003); fi
    for numerics in fp32 ane; do
      tol=1e-4
      [ $numerics = ane ] && tol=$ANE_TOL
      check "$m-$opt-$numerics" 0 "$run" train $m.anepkg --data "$data" --steps 20 "${hyper[@]}" \
        --numerics $numerics "${inputs[@]}" --log $m-$opt-$numerics.jsonl
      check "$m-$opt-$numerics-losses" 0 /usr/bin/python3 "$compare" losses "$models/${m}_fixture.json" $opt \
        $m-$opt-$numerics.jsonl $tol
      cat out
    done
  done
done
finish
