#!/usr/bin/env bash
# orionc --train --gather-grad=rows from the command line (docs/training.md,
# "The gradient of an embedding"): examples/train/tiny.oir's embedding
# gradient as rows in the contract (orion-inspect, --json), 20 AdamW steps by
# orion-run train within 1e-6 of the one-hot package's losses, the export
# patched back and verified with the recorded option, and the usage errors.
#
#   train_rows.sh ORIONC ORION_RUN ORION_INSPECT SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") inspect=$(realpath "$3") root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
tiny=$root/examples/train/tiny.oir data=$root/examples/train/tiny.tokens.bin
mkdir work && export TMPDIR=$tmp/work # where the working copies go

check compile-onehot 0 "$orionc" -w --train --gather-grad=onehot "$tiny" -o onehot.anepkg
check compile-rows 0 "$orionc" -w --train --gather-grad=rows "$tiny" -o rows.anepkg
check inspect 0 "$inspect" rows.anepkg
# wte (untied: only the gather reads it) has its rows and no [16, 8] gradient output of zeros.
if grep -qF "grad.wte" out; then fail "inspect: an output grad.wte"; cat out; else pass; fi
contains inspect "    rows.wte             -> rows of param wte by input tokens"
check inspect-json 0 "$inspect" --json rows.anepkg
cp out inspect.json
check inspect-json-rows 0 /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["training"]
assert t["row_gradients"] == [{"output": "rows.wte", "param": "wte", "indices": "tokens"}], t["row_gradients"]
assert all(i.get("name") != "tokens" for i in t["backward_inputs"]), "the backward no longer reads tokens"
' inspect.json
for p in onehot rows; do
  check "train-$p" 0 "$run" train $p.anepkg --data "$data" --steps 20 --lr 0.05 --numerics fp32 --log $p.jsonl \
    --export $p.safetensors
  contains "train-$p" "compiles: 0; weight updates: 20 ("
done
check losses 0 /usr/bin/python3 -c '
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 20, (a, b)
assert all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(a, b)), (a, b)
assert a[-1] < a[0] - 1.0, (a[0], a[-1])
' rows.jsonl onehot.jsonl
check patch 0 "$run" patch rows.anepkg --weights rows.safetensors --verify
contains patch "verified: the same MIL and weight bytes as a fresh compile"

check no-train 2 "$orionc" --gather-grad=rows "$tiny" -o x.anepkg
contains no-train "orionc: error: --gather-grad=rows goes with --train"
check bad-form 2 "$orionc" --train --gather-grad=sparse "$tiny" -o x.anepkg
contains bad-form "orionc: error: unknown --gather-grad form 'sparse' (expected onehot or rows)"
if [ ! -e x.anepkg ]; then pass; else fail "a package was written"; fi
finish
