#!/usr/bin/env bash
# The training demonstration's pipeline (examples/train/fortunes/), small:
# prepare.py splits a made-up fortunes directory deterministically (exact
# counts and SHA-256, .dat and .u8 files ignored, every 20th fortune held
# back); the committed model texts are what bench/make_train_models.py makes;
# a tiny byte-level llama (dim 32, 1 layer) trains 20 steps in ane numerics
# with no step skipped and the loss falling by more than 1; the same run
# stopped after step 10 (--stop-after) and resumed from that checkpoint logs
# the same 20 steps bit for bit; the plot draws the eval loss; --stop-after's
# usage errors. With Debian's fortunes 1:1.99.1-7.3 installed, its split's
# counts and checksums too.
#
#   train_fortunes.sh ORIONC ORION_RUN SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") root=$(realpath "$3")
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
demo=$root/examples/train/fortunes

# A fortunes directory of 45 fortunes in two files (the last without a
# closing "%"), beside a .dat index and a .u8 link that prepare.py skips.
mkdir src
gen() { for i in $(seq 1 "$2"); do printf 'Fortune %d of %s: a stitch in time saves nine,\nand a rolling stone gathers no moss.\n%%\n' "$i" "$1"; done; }
gen alpha 30 >src/alpha
{ gen beta 14; printf 'The last one of beta has no separator after it.\n'; } >src/beta
printf 'not a fortune file' >src/alpha.dat
ln -s alpha src/alpha.u8
check prepare 0 "$py" "$demo/prepare.py" --source src data
contains prepare "fortunes: 2 files, 45 fortunes"
contains prepare "train.bin: 43 fortunes, 3757 tokens, sha256 e5873a5cec9d1da7c4931764b5f88abc999594a2c173582813d1356edf281a44"
contains prepare "eval.bin: 2 fortunes held back, 177 bytes, 177 tokens kept, sha256 61e98782bf3a7312add5ef4cd9653d73daa9823b2270980474da6937ddd99895"
# The held-back ones are fortunes 19 and 39 (0-based): the 20th of alpha and the 10th of beta.
if [ "$(tr -d '\000' <data/eval.bin | grep -c '^Fortune')" = 2 ] && tr -d '\000' <data/eval.bin | grep -q '^Fortune 20 of alpha' &&
  tr -d '\000' <data/eval.bin | grep -q '^Fortune 10 of beta'; then pass; else fail "eval.bin does not hold fortunes 19 and 39"; fi
check prepare-again 0 "$py" "$demo/prepare.py" --source src data2
same_bytes prepare-train data/train.bin data2/train.bin
same_bytes prepare-eval data/eval.bin data2/eval.bin
check prepare-options 0 "$py" "$demo/prepare.py" --source src --holdout 10 --eval-bytes 100 data3
contains prepare-options "eval.bin: 4 fortunes held back, 355 bytes, 100 tokens kept, sha256 9a7b1bb65584f747f24269d42806aebfc2223eea1617178672ebb6b1fef33982"
check prepare-no-source 1 "$py" "$demo/prepare.py" --source nothere data4
contains prepare-no-source "prepare.py: no fortunes in 'nothere' (Debian's package 'fortunes'; scripts/setup.sh installs it)"

# Debian's own fortunes, when the package is the version these figures are of.
if [ "$(dpkg-query -W -f='${Version}' fortunes 2>/dev/null)" = 1:1.99.1-7.3 ]; then
  check prepare-debian 0 "$py" "$demo/prepare.py" --eval-bytes 8193 debian
  contains prepare-debian "fortunes: 43 files, 15217 fortunes"
  contains prepare-debian "train.bin: 14457 fortunes, 2445366 tokens, sha256 011df059af56e3b5d6d6ba5a1824a47abe8da2c7253c4fab6f83383de1ca9e2c"
  contains prepare-debian "eval.bin: 760 fortunes held back, 131295 bytes, 8193 tokens kept, sha256 1e2ece3dd5753fa2d3c610863ef305a1dd1ccc1cf93f9d33b378749cc7e89ab1"
  rm -rf debian
else
  echo "note: Debian's fortunes 1:1.99.1-7.3 is not installed; its split is not checked"
fi

# The committed models are what their generator makes (below the comments).
for spec in "model.oir --dim 288 --layers 6 --heads 6 --hidden 768 --seq 128 --batch 4 --vocab 32000" \
  "small.oir --dim 64 --layers 2 --heads 4 --hidden 192 --seq 128 --batch 4 --vocab 1024"; do
  read -r file shape <<<"$spec"
  # shellcheck disable=SC2086
  check "generate-$file" 0 "$py" "$root/bench/make_train_models.py" llama gen.oir $shape --names hf --dtype fp16
  if cmp -s <(grep -v '^//' gen.oir) <(grep -v '^//' "$demo/$file"); then pass; else fail "$file is not what make_train_models.py makes"; fi
done

# A tiny byte-level llama through the whole pipeline.
check generate-tiny 0 "$py" "$root/bench/make_train_models.py" llama tiny.oir --dim 32 --layers 1 --heads 2 --hidden 64 \
  --vocab 256 --seq 32 --batch 2 --dtype fp16 --rope .
check compile-tiny 0 "$orionc" --train -w -o tiny.anepkg tiny.oir
train=("$run" train tiny.anepkg --data data/train.bin --input cos=cos.npy --input sin=sin.npy --input rot=rot.npy
  --steps 20 --lr 3e-3 --warmup 5 --schedule cosine --min-lr 3e-4 --clip-grad 1 --numerics ane
  --eval-data data/eval.bin --eval-every 5)
check train-whole 0 "${train[@]}" --log whole.jsonl --checkpoint-dir ck-whole --checkpoint-every 5
contains train-whole "trained steps 1-20 of 20"
contains train-whole "skipped steps: 0"
check train-stopped 0 "${train[@]}" --log split.jsonl --checkpoint-dir ck --checkpoint-every 5 --stop-after 10
contains train-stopped "trained steps 1-10 of 20"
if [ "$(readlink ck/latest)" = step-000000010 ] && [ ! -e ck/step-000000015 ]; then pass; else fail "--stop-after 10: latest is $(readlink ck/latest)"; fi
check train-resumed 0 "${train[@]}" --log split.jsonl --checkpoint-dir ck --checkpoint-every 5 --resume ck
contains train-resumed "trained steps 11-20 of 20"
check logs 0 "$py" -c '
import json, math, sys
rows = lambda f: [json.loads(l) for l in open(f) if l.strip()]
whole, split = rows(sys.argv[1]), rows(sys.argv[2])
keys = ("step", "loss", "lr", "skipped", "loss_scale", "eval_loss", "grad_norm")
same = lambda r: {k: r.get(k) for k in keys}
assert [r["step"] for r in whole] == list(range(1, 21)), [r["step"] for r in whole]
assert [same(r) for r in whole] == [same(r) for r in split], "the stopped and resumed run differs"
assert not any(r["skipped"] for r in whole), "a step was skipped"
assert all(math.isfinite(r["loss"]) for r in whole)
assert [r["step"] for r in whole if "eval_loss" in r] == [5, 10, 15, 20]
first, last = whole[0]["loss"], whole[-1]["loss"]
assert last < first - 1.0, (first, last)
print(f"loss {first:.4f} -> {last:.4f}")
' whole.jsonl split.jsonl
check plot 0 "$run" plot split.jsonl -o loss.svg
if grep -q 'eval loss' loss.svg; then pass; else fail "plot: no eval loss in loss.svg"; fi

# --stop-after's usage.
check stop-no-dir 2 "${train[@]}" --stop-after 3
contains stop-no-dir "--stop-after goes with --checkpoint-dir"
check stop-zero 2 "${train[@]}" --checkpoint-dir ck0 --stop-after 0
contains stop-zero "--stop-after must be at least 1"
check stop-before-resume 1 "${train[@]}" --checkpoint-dir ck --resume ck --stop-after 5
contains stop-before-resume "error: --stop-after 5 is before the resumed run's first step 21"
finish
