#!/usr/bin/env bash
# The end-to-end programs of the cpu backend's tests (testsuite/cli/e2e.sh:
# the examples; testsuite/cli/e2e_corpus.sh: the corpus programs its
# cases.txt marks `run`) again through orion-run --backend=ane against the
# Linux stand-in framework: the same inputs, the same numpy fixtures, the
# same npy_compare tolerance as their ane numerics mode (ATOL 1e-2, RTOL
# 1e-2: every op's result rounded to fp16; llama_block's row norms RTOL
# 2e-3; int32 outputs equal). -v's "backend ane used" line shows the ane
# backend ran them, not the cpu one.
#
# Where the device refuses a statement of a program by a rule the
# constraint table places on the CPU, the table below (PLACED) names the
# rule, orion's remark on the statement moved, and the device's refusal:
# through the ane backend the statement runs on the CPU and the rest on the
# device, matching the fixture like every other program; past orion's
# checks (--no-ane-checks: nothing moved) the stand-in "device" refuses the
# program with the same rule and its error code. A program the device
# refuses for a rule placement cannot mend would be listed in REFUSED:
# orion's check says it before anything is compiled, the device past it.
# docs/ane-backend.md ("The end-to-end programs on the device") lists the sets.
# Without ../shared/corpus/mil the test is skipped after the examples, and
# fails under CI (CI=true), as e2e_corpus.sh does.
#
#   ane_e2e.sh ORIONC ORION_RUN NPY_COMPARE STANDIN SOURCE_ROOT
set -u
orionc=$(realpath "$1") run=$(realpath "$2") compare=$(realpath "$3") standin=$(realpath "$4") root=$(realpath "$5")
source "$root/testsuite/cli/lib.sh"
export ORION_ANE_FRAMEWORK=$standin
export XDG_CACHE_HOME=$tmp/xdg # the weight-update self-test's cached choice: this test's own
# The reference's temporary directories ($TMPDIR/<hexStringIdentifier>/, one per
# content) are this test's own: another process compiling the same content at the
# same time would share the directory (docs/ane-backend.md, "What is next").
export TMPDIR=$tmp/tmp
mkdir "$TMPDIR"
ANE_TOL="--atol 1e-2 --rtol 1e-2"
ANE_NORM_RTOL=2e-3

# compare_to NAME COMPARE_ARGS...: npy_compare's verdict, its line kept in the log.
compare_to() {
  local name=$1
  shift
  echo -n "$name: "
  if "$compare" "$@"; then pass; else fail "$name: output differs from the fixture"; fi
}

# on_ane NAME TARGET OUT INPUTS...: orion-run --backend=ane -v, which must succeed on the ane backend.
on_ane() {
  local name=$1 target=$2 out=$3 args=() i
  shift 3
  for i in "$@"; do args+=(--input "$i"); done
  mkdir -p "$out"
  check "$name" 0 "$run" --backend=ane -v "$target" "${args[@]}" --output-dir "$out"
  contains "$name" "orion-run: backend ane used: ane program cache:"
}

# The examples (e2e.sh's fixtures).
ex=$root/testsuite/e2e/examples
examples="tiny_mlp gpt2_block llama_block"
for name in $examples; do
  check "compile-$name" 0 "$orionc" -w -o "$name.anepkg" "$root/examples/$name.oir"
done
on_ane tiny_mlp tiny_mlp.anepkg tiny_mlp.out "x=$ex/tiny_mlp/x.npy"
# shellcheck disable=SC2086
compare_to tiny_mlp tiny_mlp.out/probs.npy "$ex/tiny_mlp/probs.npy" $ANE_TOL
on_ane gpt2_block gpt2_block.anepkg gpt2_block.out "x=$ex/gpt2_block/x.npy"
# shellcheck disable=SC2086
compare_to gpt2_block gpt2_block.out/hidden.npy "$ex/gpt2_block/hidden.npy" $ANE_TOL
# int32 token ids: run in parts (the embedding's gather on the CPU, the rest as device programs).
on_ane llama_block llama_block.anepkg llama_block.out "tokens=$ex/llama_block/tokens.npy" \
  "cos=$ex/llama_block/cos.npy" "sin=$ex/llama_block/sin.npy"
# shellcheck disable=SC2086
compare_to llama_block llama_block.out/logits.npy "$ex/llama_block/logits_rows.npy" --rows 0,21,42,63 $ANE_TOL
compare_to llama_block-norms llama_block.out/logits.npy --row-norms "$ex/llama_block/logits_norms.npy" \
  --rtol $ANE_NORM_RTOL
# Every example is here: a new one needs its line above.
for f in "$root"/examples/*.oir; do
  case " $examples " in *" $(basename "$f" .oir) "*) pass ;;
  *) fail "examples/$(basename "$f") is not run through the ane backend here" ;; esac
done

# The corpus programs: NAME, the rule, orion's remark on the statement it
# moves to the CPU, and the device's refusal past --no-ane-checks (after
# "ANECCompile() FAILED: ").
PLACED='
ane_maderix_sdpa_fwd_taps|ANE001|runs on the CPU: ANE001, the ANE compiler rejects concat|concat would fail on the ANE: the ANE compiler rejects concat [ANE001]
ane_maderix_sdpa_op_blobmask|ANE006|runs on the CPU: ANE006, the ANE'"'"'s fused attention ignores its mask|scaled_dot_product_attention would fail on the ANE: the ANE'"'"'s fused attention ignores its mask [ANE006]
coremlc_v1_3_inline_args_mnist_ios16|ANE012|runs on the CPU: ANE012, matmul'"'"'s transpose_x and transpose_y must be named consts|transpose_x of matmul '"'"'Times212_Output_0'"'"' is the literal '"'"'bool(false)'"'"'; the ANE'"'"'s MIL parser needs a named bool const [ANE012]
'
# NAME, the rule, and the refusal's words (orion's check prefixes
# "FILE:LINE:COL: error: ", the device "ANECCompile() FAILED: "): none today.
REFUSED=''
# How many of cases.txt's `run` programs match their fixture through the ane backend: all of them.
MATCHING=11
corpus=$(realpath -m "$root/../shared/corpus/mil")
fix=$root/testsuite/e2e/corpus
# Without the corpus (beside the source tree, not in it) the test is
# skipped (77) once the examples passed, saying so, except under CI
# (CI=true), which has it: a failure there. As e2e-corpus does.
if [ ! -d "$corpus" ]; then
  if [ "${CI:-}" = true ]; then
    fail "the corpus programs: no corpus at $corpus (under CI it must be there)"
    finish
    exit
  fi
  echo "SKIP: the corpus programs: no corpus at $corpus (under CI this fails)"
  finish || exit 1
  exit 77
fi

# A bare model directory, as e2e_corpus.sh makes it: the corpus's MIL text and the fixture's weight files.
model_dir() {
  local name=$1
  mkdir -p "$name/out"
  cp "$corpus/$name.mil" "$name/model.mil"
  if [ -d "$fix/$name/weights" ]; then cp -r "$fix/$name/weights" "$name/"; fi
}

refused_seen=" " placed_seen=" " matched=0
while read -r name status _; do
  case "$name" in '#'* | '') continue ;; esac
  [ "$status" = run ] || continue # pending and skip: not run on the cpu backend either
  model_dir "$name"
  inputs=()
  for i in "$fix/$name"/in.*.npy; do
    i=$(basename "$i" .npy)
    inputs+=("${i#in.}=$fix/$name/$i.npy")
  done
  refusal=$(printf '%s\n' "$REFUSED" | grep "^$name|" | cut -d'|' -f3-)
  if [ -n "$refusal" ]; then
    refused_seen="$refused_seen$name "
    args=()
    for i in "${inputs[@]}"; do args+=(--input "$i"); done
    check "$name-checked" 1 "$run" --backend=ane "$name" "${args[@]}" --output-dir "$name/out"
    contains "$name-checked" "$name/model.mil:"
    contains "$name-checked" ": error: $refusal"
    check "$name-device" 1 "$run" --backend=ane --no-ane-checks "$name" "${args[@]}" --output-dir "$name/out"
    contains "$name-device" "orion-run: error: the ane backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: $refusal"
    continue
  fi
  failed_before=$failed
  on_ane "$name" "$name" "$name/out" "${inputs[@]}"
  placed=$(printf '%s\n' "$PLACED" | grep "^$name|" || true)
  if [ -n "$placed" ]; then
    placed_seen="$placed_seen$name "
    contains "$name" "$name/model.mil:"
    contains "$name" ": note: statement "
    contains "$name" "$(printf '%s\n' "$placed" | cut -d'|' -f3)"
  elif grep -q "runs on the CPU: ANE" out; then
    fail "$name: a statement was moved to the CPU, but PLACED does not list it"
  fi
  args=()
  for i in "${inputs[@]}"; do args+=(--input "$i"); done
  if [ -n "$placed" ]; then
    check "$name-device" 1 "$run" --backend=ane --no-ane-checks "$name" "${args[@]}" --output-dir "$name/out-device"
    contains "$name-device" "orion-run: error: the ane backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: $(printf '%s\n' "$placed" | cut -d'|' -f4)"
  fi
  for o in "$fix/$name"/out.*.npy; do
    o=$(basename "$o" .npy)
    # shellcheck disable=SC2086
    compare_to "$name" "$name/out/${o#out.}.npy" "$fix/$name/$o.npy" $ANE_TOL
  done
  if [ "$failed" = "$failed_before" ]; then matched=$((matched + 1)); fi
done <"$fix/cases.txt"
# Every refusal and placement listed is one of the programs run: a stale line is an error.
for name in $(printf '%s\n' "$REFUSED" | cut -d'|' -f1); do
  case "$refused_seen" in *" $name "*) pass ;; *) fail "REFUSED lists $name, which cases.txt does not run" ;; esac
done
for name in $(printf '%s\n' "$PLACED" | cut -d'|' -f1); do
  case "$placed_seen" in *" $name "*) pass ;; *) fail "PLACED lists $name, which cases.txt does not run" ;; esac
done
if [ "$matched" = "$MATCHING" ]; then pass; else fail "$matched corpus programs match through the ane backend, not $MATCHING"; fi

finish
