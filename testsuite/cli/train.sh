#!/usr/bin/env bash
# orion-run train from the command line: the hand-written training package
# (testsuite/train/model/bigram.oir with orionc --train-contract) trains with
# options spelt --opt value and --opt=value alike, prints 0 compiles and the
# update's share, leaves the package unchanged, logs a line per step; usage
# errors exit 2 (a misspelt option with its did-you-mean); -v names the
# backend; orion-inspect shows the contract.
#
#   train.sh ORIONC ORION_RUN ORION_INSPECT SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") inspect=$(realpath "$3") root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
model=$root/testsuite/train/model

check compile 0 "$orionc" -w --train-contract "$model/bigram.train.json" "$model/bigram.oir" -o b.anepkg
# A contract that does not fit the functions: refused by the reader's own checks, nothing written.
sed 's/"name": "probs"/"name": "logits"/' "$model/bigram.train.json" >bad.json
check bad-contract 1 "$orionc" -w --no-cache --train-contract bad.json "$model/bigram.oir" -o bad.anepkg
contains bad-contract "error: the training contract: manifest: Training: the backward input 'probs' comes from 'logits', which is not an output of the forward function 'fwd'"
if [ ! -e bad.anepkg ]; then pass; else fail "bad-contract: a package was written"; fi
echo '{"forward": "fwd"' >broken.json
check broken-contract 1 "$orionc" -w --no-cache --train-contract broken.json "$model/bigram.oir" -o bad.anepkg
contains broken-contract "error: broken.json: the training contract is not a JSON object"
echo '{"forward": "fwd", "backward": "bwd", "loss": "loss", "backward_inputs": [{"input": "x", "from": "saved"}], "gradients": [], "trainable": []}' >from.json
check from-contract 1 "$orionc" -w --no-cache --train-contract from.json "$model/bigram.oir" -o bad.anepkg
contains from-contract "error: from.json: 'from' of the backward input 'x' must be \"output\", \"input\" or \"loss_scale\""
check no-contract-file 1 "$orionc" -w --no-cache --train-contract nothere.json "$model/bigram.oir" -o bad.anepkg
contains no-contract-file "error: cannot read the training contract 'nothere.json'"
check inspect 0 "$inspect" b.anepkg
contains inspect "training: forward fwd, backward bwd, loss loss, vocabulary 8, 512 saved bytes"
contains inspect "    loss_scale           <- the loss scale"
contains inspect "    grad.W               -> param W"
check inspect-json 0 "$inspect" --json b.anepkg
cp out inspect.json
check inspect-json-training 0 /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["training"]
assert t["forward"] == "fwd" and t["saved_bytes"] == 512 and t["trainable"] == ["W", "b"], t
assert t["backward_inputs"][3] == {"input": "loss_scale", "from": "loss_scale"}, t
' inspect.json
mkdir work && export TMPDIR=$tmp/work # where the working copies go
before=$(md5sum b.anepkg/weights/weight.bin b.anepkg/Manifest.plist)

check train-spaced 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 5 --lr 0.5 --optimizer sgd \
  --numerics fp32 --log spaced.jsonl
contains train-spaced "compiles: 0; weight updates: 5 ("
contains train-spaced "% of step time:"
contains train-spaced "step 5/5 loss "
contains train-spaced "working copy: $tmp/work/orion-train-"
check train-equals 0 "$run" train b.anepkg --data="$model/bigram_tokens.npy" --steps=5 --lr=0.5 --optimizer=sgd \
  --numerics=fp32 --log=equals.jsonl
check same-log 0 /usr/bin/python3 -c '
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == 5 and a == b, (a, b)
' spaced.jsonl equals.jsonl
# --profile: each program's time per op kind and its slowest statements, at
# their place in the package's MIL (not in the working copy, which is gone).
check train-profile 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 3 --lr 0.5 --numerics fp32 --profile
contains train-profile "orion-run: forward profile of 3 runs, "
contains train-profile "orion-run: backward profile of 3 runs, "
for op in matmul softmax reduce_max; do contains train-profile-fwd-$op "  $op  "; done
contains train-profile-matmul "b.anepkg/model_bwd.mil:25:35  matmul 'gW'"
contains train-profile-softmax "b.anepkg/model_fwd.mil:51:41  softmax 'probs'"
if grep "\.mil:" out | grep -q "orion-train-"; then fail "the profile names the working copy"; else pass; fi
check train-no-profile 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 1 --lr 0.5 --numerics fp32
if grep -q "profile of" out; then fail "a profile without --profile"; else pass; fi
after=$(md5sum b.anepkg/weights/weight.bin b.anepkg/Manifest.plist)
if [ "$before" = "$after" ]; then pass; else fail "the package changed"; fi
if [ -z "$(ls -A work)" ]; then pass; else fail "a working copy was left: $(ls work)"; fi

# The working copy is named after the package however its path is spelt.
check trailing-slash 0 "$run" train b.anepkg/ --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1
check dot 0 sh -c "cd b.anepkg && '$run' train . --data '$model/bigram_tokens.npy' --steps 2 --lr 0.1"
check no-such-input 1 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1 --input y=y.npy
contains no-such-input "orion-run: error: --input y: the forward function has no such input"
check data-input 1 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1 --input tokens=t.npy
contains data-input "orion-run: error: --input tokens: this input comes from --data"
check checkpoint 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 4 --lr 0.1 --checkpoint-dir ck \
  --checkpoint-every 2 --export t.safetensors --log ck.jsonl
if [ -d ck/step-000000002 ] && [ -d ck/step-000000004 ] && [ -s t.safetensors ]; then pass; else fail "checkpoints/export"; fi
check resume 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 6 --lr 0.1 --resume ck --log ck.jsonl
contains resume "trained steps 5-6 of 6"
check resume-log 0 /usr/bin/python3 -c '
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == [1, 2, 3, 4, 5, 6], steps
' ck.jsonl
check patch-export 0 "$run" patch b.anepkg --weights t.safetensors

check typo 2 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --step 5 --lr 1
contains typo "orion-run train: error: unknown option '--step'"
contains typo "note: did you mean '--steps'?"
check no-lr 2 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 5
contains no-lr "orion-run train: error: --lr LR is required"
check bad-optimizer 2 "$run" train b.anepkg --data x --steps 5 --lr 1 --optimizer adam
contains bad-optimizer "orion-run train: error: --optimizer is adamw or sgd, not 'adam'"
check bad-number 2 "$run" train b.anepkg --data x --steps five --lr 1
contains bad-number "orion-run train: error: --steps needs a whole number (not 'five')"
check switch-value 2 "$run" train b.anepkg --data x --steps 5 --lr 1 --shuffle=yes
check help 0 "$run" train --help
contains help "--weight-decay WD"
contains help "(default: 0.01 with"
check missing-data 1 "$run" train b.anepkg --data nothere.npy --steps 1 --lr 1
contains missing-data "orion-run: error: cannot read 'nothere.npy'"
# -v (or --verbose) names the backend before the run, as orion-run -v does; the
# cpu backend has no describe line, nor a usage line after; without -v, neither.
check verbose 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1 -v
if [ "$(grep '^orion-run: backend' out)" = "orion-run: backend cpu" ]; then pass; else fail "verbose: $(cat out)"; fi
contains verbose "trained steps 1-2 of 2"
check verbose-long 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1 --verbose
if [ "$(grep '^orion-run: backend' out)" = "orion-run: backend cpu" ]; then pass; else fail "verbose-long: $(cat out)"; fi
check quiet 0 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1
if ! grep -q '^orion-run: backend' out; then pass; else fail "quiet: a backend line without -v"; fi
# With -v the driver opens the backend: an unknown one is the same error, before any work.
check verbose-bad-backend 1 "$run" train b.anepkg --data "$model/bigram_tokens.npy" --steps 2 --lr 0.1 -v --backend nope
contains verbose-bad-backend "orion-run: error: unknown backend 'nope'"
finish
