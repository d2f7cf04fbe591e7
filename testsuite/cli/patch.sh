#!/usr/bin/env bash
# orion-run patch end to end: new weights patched into a compiled package give
# outputs worked out by hand, the package is byte-identical to a fresh compile
# with those weights, every rejection leaves the package untouched, and a kill
# at every durable step of the patcher leaves a package that loads with all
# old or all new weights.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
make_st="python3 $(realpath "$4")"
. "$(dirname "$0")/lib.sh"
snapshot() { cat "$1/Manifest.plist" "$1/weights/weight.bin" | cksum; }

# z = linear(x, w, b) + c. b and c both start as zeros, but are two weights: a blob each.
cat >m.oir <<'EOF'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = normal(seed=1, std=0.1);
  param b: fp16[4] = zeros;
  param c: fp16[4] = zeros;
  y = linear(x, w, b);
  z = add(y, c);
  return z;
}
EOF
check compile 0 "$orionc" --no-lint --no-dedup -o m.anepkg m.oir
check compile-dedup 0 "$orionc" --no-lint -o d.anepkg m.oir
cp -r m.anepkg orig.anepkg
# x = [1, 2, 3, 4]
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy

# w = 0.5 * identity, b = [1, 1, 1, 1], c = 0: z = [1.5, 2, 2.5, 3].
$make_st new.safetensors w=F32:4x4:0.5,0,0,0,0,0.5,0,0,0,0,0.5,0,0,0,0,0.5 b=F16:4:fill=1
check patch 0 "$run" patch m.anepkg --weights new.safetensors
contains patch "m.anepkg: 2 weights patched, 2 blobs (40 bytes) changed, generation 1"
mkdir o
check run-patched 0 "$run" m.anepkg --input x=x.npy --output-dir o
npy16 '(1, 4)' '\x00\x3e\x00\x40\x00\x41\x00\x42' want.npy
same_bytes run-patched o/z.npy want.npy
check inspect 0 "$inspect" m.anepkg
contains inspect "generation 1"
contains inspect "checksums: all verified"

# The same bytes as a fresh compile with the new weights, checked by hand and by --verify.
check fresh 0 "$orionc" --no-lint --no-dedup --weights-override=new.safetensors -o fresh.anepkg m.oir
same_bytes fresh-weights m.anepkg/weights/weight.bin fresh.anepkg/weights/weight.bin
same_bytes fresh-mil m.anepkg/model.mil fresh.anepkg/model.mil
check verify 0 "$run" patch m.anepkg --weights new.safetensors --verify
contains verify "nothing written (generation 1)"
contains verify "m.anepkg: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs"
sed 's/std=0.1/std=0.2/' m.oir >other.oir
check verify-other-source 1 "$run" patch m.anepkg --weights new.safetensors --verify=other.oir
contains verify-other-source "orion-run: error: --verify: 'other.oir' is not the source the package was compiled from (its SHA-256 differs)"

# One weight from a .npy: c = [1, 0, 0, 0] adds 1 to z[0].
npy16 '(4,)' '\x00\x3c\x00\x00\x00\x00\x00\x00' c.npy
# A fresh compile knows only this patch's weights, not the earlier patch's: --verify fails, and
# leaves the package exactly as it was (it checks a patched copy before it patches the package).
before_verify=$(snapshot m.anepkg)
check patch-npy-verify 1 "$run" patch m.anepkg --weight c=c.npy --verify
contains patch-npy-verify "orion-run: error: --verify: m.anepkg/weights/weight.bin differs from a fresh compile at byte 128 (weight 'w')"
contains patch-npy-verify "orion-run: note: the package had been patched before this update (generation 1); a fresh compile takes only this update's weights from files"
contains patch-npy-verify "orion-run: note: 'm.anepkg' is unchanged"
if [ "$(snapshot m.anepkg)" = "$before_verify" ]; then pass; else fail "patch-npy-verify: the package changed"; fi
if compgen -G 'm.anepkg.verify-*' >/dev/null; then fail "patch-npy-verify: the checked copy is left"; else pass; fi
check patch-npy 0 "$run" patch m.anepkg --weight c=c.npy
contains patch-npy "m.anepkg: 1 weight patched, 1 blob (8 bytes) changed, generation 2"
check run-npy 0 "$run" m.anepkg --input x=x.npy --output-dir o
npy16 '(1, 4)' '\x00\x41\x00\x40\x00\x41\x00\x42' want2.npy
same_bytes run-npy o/z.npy want2.npy

# Rejections: a clear message, exit 1, and not a byte of the package changed.
before=$(snapshot m.anepkg)
reject() { # reject NAME MESSAGE SPEC...
  local name=$1 msg=$2
  shift 2
  $make_st bad.safetensors "$@"
  check "$name" 1 "$run" patch m.anepkg --weights bad.safetensors
  contains "$name" "$msg"
  if [ "$(snapshot m.anepkg)" = "$before" ]; then pass; else fail "$name: the package changed"; fi
}
reject unknown "orion-run: error: bad.safetensors: the package has no weight named 'nope' (orion-inspect lists them)" \
  nope=F32:4:fill=1
reject shape "orion-run: error: bad.safetensors: tensor 'b' has shape [5], but the weight's shape is [4] (a shape change needs a recompile)" \
  b=F32:5:fill=1
reject nan "orion-run: error: bad.safetensors: weight 'b' has NaN at index 2" b=F32:4:nan-at=2
reject range "orion-run: error: bad.safetensors: weight 'b' has the value 70000 at index 0, beyond fp16's range (largest is 65504; --clamp-fp16 clamps)" \
  b=F32:4:fill=70000
reject dtype "orion-run: error: bad.safetensors: weight 'b' is fp16; a tensor of dtype I32 cannot replace it (a dtype change needs a recompile)" \
  b=I32:4:fill=1
# One bad tensor among good ones: nothing is written.
reject partly-bad "orion-run: error: bad.safetensors: weight 'c' has NaN at index 0" b=F32:4:fill=3 c=F32:4:nan-at=0
$make_st shared.safetensors b=F16:4:fill=2
check started-equal 0 "$run" patch d.anepkg --weights shared.safetensors
contains started-equal "d.anepkg: 1 weight patched, 1 blob (8 bytes) changed, generation 1"
# b and c read from one tensor of a file (tied) are one weight: one blob, patched all together.
$make_st tied.safetensors t=F16:4:fill=0
sed 's/= zeros;/= safetensors("tied.safetensors", "t");/' m.oir >tied.oir
check compile-tied 0 "$orionc" --no-lint -o t.anepkg tied.oir
check shared 1 "$run" patch t.anepkg --weights shared.safetensors
contains shared "orion-run: error: shared.safetensors: weight 'b' shares its storage with 'c' (they were compiled from one source tensor), so patching it alone would change them too; patch them all with the same values, or compile with --no-dedup"
$make_st both.safetensors b=F16:4:fill=2 c=F16:4:fill=2
check shared-both 0 "$run" patch t.anepkg --weights both.safetensors
# A fresh compile with those weights keeps b and c tied (one blob), as the package has them.
check shared-verify 0 "$run" patch t.anepkg --weights both.safetensors --verify
contains shared-verify "t.anepkg: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs"
$make_st big.safetensors b=F32:4:fill=70000
check clamp 0 "$run" patch m.anepkg --weights big.safetensors --clamp-fp16
contains clamp "orion-run: warning: big.safetensors: weight 'b': 4 values beyond fp16's range clamped to +-65504"
check usage 2 "$run" patch m.anepkg
contains usage "orion-run patch: error: no new weights (give --weights FILE or --weight NAME=FILE.npy)"
check help 0 "$run" patch --help
contains help "usage: orion-run patch [options] PACKAGE --weights FILE.safetensors ..."

# Crash safety. The patcher kills itself at durable step k (every write of a
# piece, sync, rename, unlink); afterwards the package must load and compute
# either the old outputs or the new ones, and pass its checksums. Small
# patches go through the journal's regions, whole-file ones through a shadow
# copy: both are exercised.
crash_test() { # crash_test NAME ORIGINAL_PACKAGE INPUT WEIGHTS_FILE
  local name=$1 orig=$2 input=$3 file=$4 k=1 outcome
  rm -rf base.anepkg new.anepkg && cp -r "$orig" base.anepkg
  "$run" base.anepkg --input x="$input" --output-dir o >/dev/null 2>&1 && cp o/z.npy old.npy
  cp -r base.anepkg new.anepkg && "$run" patch new.anepkg --weights "$file" >patch.out 2>&1
  if ! grep -q "$([ "$name" = crash-shadow ] && echo "whole weight file rewritten" || echo "changed, generation")" patch.out; then
    fail "$name: not the intended mode"; cat patch.out
  fi
  "$run" new.anepkg --input x="$input" --output-dir o >/dev/null 2>&1 && cp o/z.npy new.npy
  if cmp -s old.npy new.npy; then fail "$name: the patch does not change the outputs"; return; fi
  local olds=0 news=0 bad=0
  while [ $k -le 200 ]; do
    rm -rf c.anepkg && cp -r base.anepkg c.anepkg
    { ORION_PATCH_FAULT_AT=$k "$run" patch c.anepkg --weights "$file"; } >/dev/null 2>&1 # bash's "Killed" too
    local status=$?
    if ! "$run" c.anepkg --input x="$input" --output-dir o >run.out 2>&1; then
      bad=$((bad + 1)); echo "$name: after a kill at step $k the package does not load:"; cat run.out
    elif cmp -s o/z.npy old.npy; then olds=$((olds + 1)); outcome=old
    elif cmp -s o/z.npy new.npy; then news=$((news + 1)); outcome=new
    else bad=$((bad + 1)); echo "$name: after a kill at step $k the outputs are neither old nor new"
    fi
    if ! "$inspect" c.anepkg >inspect.out 2>&1 || ! grep -q "generation $([ "$outcome" = old ] && echo 0 || echo 1)" inspect.out; then
      bad=$((bad + 1)); echo "$name: after a kill at step $k the package fails inspection or has the wrong generation"; cat inspect.out
    fi
    [ $status = 0 ] && break # the patcher got through: no step left to kill at
    k=$((k + 1))
  done
  echo "$name: killed at each of $((k - 1)) steps: $olds times old weights, $news times new"
  if [ $bad = 0 ] && [ $olds -gt 0 ] && [ $news -gt 0 ]; then pass; else fail "$name: $bad bad outcomes ($olds old, $news new, $k steps)"; fi
}
crash_test crash-journal orig.anepkg x.npy new.safetensors
# Wider weights, all replaced: more than half the file changes, so a shadow copy.
sed 's/x: fp16\[1,4\]/x: fp16[1,64]/; s/w: fp16\[4,4\]/w: fp16[4,64]/' m.oir >wide.oir
check compile-wide 0 "$orionc" --no-lint --no-dedup -o wide.anepkg wide.oir
npy16 '(1, 64)' "$(for i in $(seq 64); do printf '\\x00\\x3c'; done)" x64.npy
$make_st all.safetensors w=F32:4x64:seed=5 b=F32:4:seed=6 c=F32:4:seed=7
crash_test crash-shadow wide.anepkg x64.npy all.safetensors
# An interrupted patch is completed by `orion-run patch --recover` too.
# Two updates at once (and readers meanwhile) take turns: both land, one after the other, and the package
# verifies with generation 2 and the weights of whichever went second.
$make_st all2.safetensors w=F32:4x64:seed=8 b=F32:4:seed=9 c=F32:4:seed=10
for round in 1 2 3; do
  rm -rf cc.anepkg && cp -r wide.anepkg cc.anepkg
  "$run" patch cc.anepkg --weights all.safetensors >p1.out 2>&1 &
  first=$!
  "$run" patch cc.anepkg --weights all2.safetensors >p2.out 2>&1 &
  second=$!
  "$inspect" cc.anepkg >/dev/null 2>&1
  wait $first && wait $second || { fail "concurrent: a patch failed"; cat p1.out p2.out; }
  check concurrent-inspect 0 "$inspect" cc.anepkg
  contains concurrent-inspect "generation 2"
done

# The first step at which a kill leaves a committed journal behind:
for k in $(seq 1 60); do
  rm -rf r.anepkg && cp -r wide.anepkg r.anepkg
  { ORION_PATCH_FAULT_AT=$k "$run" patch r.anepkg --weights all.safetensors; } >/dev/null 2>&1
  [ -e r.anepkg/weights/weight.bin.journal ] && break
done
if [ -e r.anepkg/weights/weight.bin.journal ]; then
  check pending 0 "$inspect" r.anepkg
  contains pending "an interrupted weight update is pending (weights/weight.bin.journal)"
  contains pending "generation 0"
  check recover 0 "$run" patch r.anepkg --recover
  contains recover "r.anepkg: completed an interrupted weight update"
  check recovered 0 "$inspect" r.anepkg
  contains recovered "generation 1"
else
  fail "recover: no kill left a journal"
fi

# --recover -v says which leftovers of an interrupted update it removed; without -v it says nothing of them.
rm -rf l.anepkg && cp -r wide.anepkg l.anepkg
: >l.anepkg/weights/weight.bin.journal.tmp
: >l.anepkg/Manifest.plist.tmp
check recover-quiet 0 "$run" patch l.anepkg --recover
if grep -q 'removed' out; then fail "recover-quiet: names what it removed without -v"; else pass; fi
: >l.anepkg/weights/weight.bin.journal.tmp
: >l.anepkg/weights/weight.bin.new
check recover-verbose 0 "$run" patch l.anepkg --recover -v
contains recover-verbose "orion-run: removed l.anepkg/weights/weight.bin.journal.tmp (left by an interrupted weight update)"
contains recover-verbose "orion-run: removed l.anepkg/weights/weight.bin.new (left by an interrupted weight update)"
contains recover-verbose "l.anepkg: no interrupted weight update"
if [ -e l.anepkg/weights/weight.bin.journal.tmp ] || [ -e l.anepkg/weights/weight.bin.new ]; then
  fail "recover-verbose: a leftover is still there"; else pass; fi
check recover-clean 0 "$inspect" l.anepkg

finish
