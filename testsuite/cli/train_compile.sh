#!/usr/bin/env bash
# orionc --train from the command line (docs/training.md, "orionc --train"):
# examples/train/tiny.oir compiled into a training package and trained by
# orion-run train for 20 steps on examples/train/tiny.tokens.bin (the losses
# the same in two runs, the last far below the first, 0 compiles), the export
# patched back (and --verify recompiling with the recorded --train); --summary
# and --summary --json; both spellings of --trainable/--frozen; the refusals
# with their exact messages and nothing written.
#
#   train_compile.sh ORIONC ORION_RUN ORION_INSPECT SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") inspect=$(realpath "$3") root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
tiny=$root/examples/train/tiny.oir data=$root/examples/train/tiny.tokens.bin
mkdir work && export TMPDIR=$tmp/work # where the working copies go

check compile 0 "$orionc" -w --train "$tiny" -o tiny.anepkg
check inspect 0 "$inspect" tiny.anepkg
contains inspect "training: forward main.fwd, backward main.bwd, loss loss, vocabulary 16, 2560 saved bytes"
contains inspect "    rows.wte             -> rows of param wte by input tokens" # the embedding by rows, the default
contains inspect "    grad.head.weight     -> param head.weight"
contains inspect "  trainable params: 6"

# (a) 20 steps of AdamW in fp32 numerics, twice: the same losses bit for bit, going down.
for r in 1 2; do
  check "train-$r" 0 "$run" train tiny.anepkg --data "$data" --steps 20 --lr 0.05 --numerics fp32 --log "run$r.jsonl" \
    --export "run$r.safetensors"
  contains "train-$r" "compiles: 0; weight updates: 20 ("
done
check losses 0 /usr/bin/python3 -c '
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == 20 and a == b, (a, b)
# measured: 3.1513 at step 1, 1.1970 at step 20
assert a[-1] < a[0] - 1.0, (a[0], a[-1])
assert all(not json.loads(l)["skipped"] for l in open(sys.argv[1]))
' run1.jsonl run2.jsonl
same_bytes export run1.safetensors run2.safetensors
before=$(md5sum <tiny.anepkg/weights/weight.bin)
check patch 0 "$run" patch tiny.anepkg --weights run1.safetensors
contains patch "tiny.anepkg: 6 weights patched"
if [ "$before" != "$(md5sum <tiny.anepkg/weights/weight.bin)" ]; then pass; else fail "patch: the weights did not change"; fi
# The recorded compile arguments (--train among them) recompile the patched package exactly.
check patch-verify 0 "$run" patch tiny.anepkg --weights run1.safetensors --verify
contains patch-verify "verified: the same MIL and weight bytes as a fresh compile"
# The patched package holds the trained weights: step 1 of a new run (the same batch as the
# first run's step 1) has a loss far below it (measured 1.3887 against 3.1513).
check retrain 0 "$run" train tiny.anepkg --data "$data" --steps 1 --lr 0.05 --numerics fp32 --log again.jsonl
check retrain-loss 0 /usr/bin/python3 -c '
import json, sys
first = json.loads(open(sys.argv[1]).readline())["loss"]
again = json.loads(open(sys.argv[2]).readline())["loss"]
assert again < first - 1.0, (first, again)
' run1.jsonl again.jsonl

# (d) --summary: the training figures, as text and as JSON; both spellings of the globs.
check summary 0 "$orionc" -w --train --frozen='ln.*' --summary --emit=none "$tiny"
contains summary "training: forward main.fwd, backward main.bwd; saved 4 values (2.50 KiB, 2560 bytes); params 4 trained, 2 frozen; vocabulary 16"
contains summary "func main.fwd: 2 inputs, 5 outputs"
cp out summary-equals.txt
check summary-spaced 0 "$orionc" -w --train --frozen 'ln.*' --summary --emit=none "$tiny"
same_bytes summary-spellings out summary-equals.txt
check summary-json 0 sh -c "'$orionc' -w --train --trainable '*.weight' --trainable=wte --summary --json --emit=none \
  '$tiny' 2>/dev/null" # the JSON alone (io-legalize's binding-order notes go to stderr)
cp out summary.json
check summary-json-fields 0 /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
t = d["training"]
assert t == {"forward": "main.fwd", "backward": "main.bwd", "saved_values": 4, "saved_bytes": 2560,
             "params_trained": 3, "params_frozen": 3, "vocabulary": 16}, t
assert [f["name"] for f in d["functions"]] == ["main.fwd", "main.bwd"], d["functions"]
bwd = d["functions"][1]
assert [o["name"] for o in bwd["outputs"]] == ["grad.fc.weight", "grad.head.weight", "rows.wte"], bwd["outputs"]
' summary.json

# (c) The refusals: exact messages, exit 1 (the input) or 2 (usage), nothing written.
cat >noloss.oir <<'OIR'
func main(x: fp32[2,4]) {
  param w: fp32[3,4] = normal(seed=1, std=0.5);
  y = linear(x, w);
  return y;
}
OIR
cat >nondiff.oir <<'OIR'
func main(x: fp32[2,4], targets: int32[2]) {
  param w: fp32[3,4] = normal(seed=1, std=0.5);
  y = linear(x, w);
  i = cast(y, dtype="int32");
  f = cast(i, dtype="fp32");
  loss: fp32[] = cross_entropy(f, targets);
  return loss;
}
OIR
cat >onehot.oir <<'OIR'
func main(tokens: int32[2,4], targets: int32[2,4]) {
  param w: fp32[3,3] = normal(seed=1, std=0.5);
  const classes: int32[3] = [0, 1, 2];
  tok = reshape(tokens, shape=[2,4,1]);
  d = sub(tok, classes);
  b = cast(d, dtype="bool");
  x = cast(b, dtype="fp32");
  h = matmul(x, w);
  loss: fp32[] = cross_entropy(h, targets);
  return loss;
}
OIR
refused() { # refused NAME STATUS MESSAGE ORIONC-ARGS...
  local name=$1 status=$2 message=$3
  shift 3
  check "$name" "$status" "$orionc" -w --no-cache "$@" -o bad.anepkg
  contains "$name" "$message"
  if [ ! -e bad.anepkg ]; then pass; else fail "$name: a package was written"; rm -rf bad.anepkg; fi
}
refused no-loss 1 "noloss.oir:4:3: error: function 'main' has no output named 'loss' (training differentiates a scalar fp32 output 'loss')" \
  --train noloss.oir
refused non-differentiable 1 "nondiff.oir:4:7: error: 'cast' to int32 is not differentiable, but its result 'i' is on a path from a trainable param to 'loss'" \
  --train nondiff.oir
refused no-vocabulary 1 "onehot.oir:1:11: error: the input 'tokens' is not the indices of a gather, so the vocabulary (the row count of the table it indexes, which the training data's ids must stay below) is unknown" \
  --train onehot.oir
refused with-contract 2 "orionc: error: --train makes the training contract; --train-contract gives one: use one of them" \
  --train --train-contract="$root/testsuite/train/model/bigram.train.json" "$tiny"
refused frozen-nothing 1 "orionc: error: --frozen='*.bais' matches no float param of 'main'" --train --frozen='*.bais' "$tiny"
refused trainable-nothing 1 "orionc: error: --trainable='layers.*' matches no float param of 'main'" \
  --train --trainable 'layers.*' "$tiny"
refused glob-without-train 2 "orionc: error: --trainable and --frozen go with --train" --frozen='ln.*' "$tiny"
refused unknown-function 1 "orionc: error: --train=nope: the module has no function 'nope' to differentiate" --train=nope "$tiny"
refused all-frozen 1 "error: function 'main' has no trainable param (every param is frozen, not float, or excluded by --trainable/--frozen)" \
  --train --frozen='*' "$tiny"
finish
