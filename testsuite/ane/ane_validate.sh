#!/usr/bin/env bash
# scripts/ane-validate.sh, the script a Mac user runs to validate the ane
# backend, run here with --standin --quick on this build, so that the steps
# a Mac runs are the ones CI has run (docs/ane-backend.md, "Validating on a
# Mac"):
#   - against the stand-in it finds itself (BUILD/testsuite/ane/, no
#     ORION_ANE_FRAMEWORK): every step ok on the ane backend, SUMMARY.txt
#     exactly (the probe's figures, the self-test's choice through orion-run
#     patch --verify, the three examples, the training on ane and cpu), the
#     archive's files, the self-test's cached choice kept, no temporary left;
#   - with the stand-in's ORION_ANE_STANDIN_WEIGHTS=bogus (every compile
#     fails, naming the variable): the self-test, the three examples and the
#     ane training FAILED, the other steps still run, exit 1, the archive
#     written all the same;
#   - with a framework that is not there: the steps on the cpu backend,
#     saying why, the self-test skipped;
#   - without --standin off macOS: refused (exit 2), as a usage error is.
#
#   ane_validate.sh BUILD_ROOT SOURCE_ROOT
set -u
build=$(realpath "$1") root=$(realpath "$2")
source "$root/testsuite/cli/lib.sh"
export TMPDIR=$tmp/tmp # the reference's directories and orion-run's temporaries: checked empty at the end
mkdir "$TMPDIR"
validate=$root/scripts/ane-validate.sh
standin=$build/testsuite/ane/libane_standin.so

# summary_is NAME FILE EXPECTED: FILE's lines after the first equal EXPECTED,
# the final losses written as LOSS.
summary_is() {
  sed '1d;s/\(final loss after 20 steps: [a-z]*\) [0-9.]*\(, cpu\) [0-9.]*/\1 LOSS\2 LOSS/;s/: cpu [0-9.]* (/: cpu LOSS (/' \
    "$2" >"$1.summary"
  if [ "$(cat "$1.summary")" = "$3" ]; then pass; else
    fail "$1: SUMMARY.txt is not as expected"
    diff <(printf '%s\n' "$3") "$1.summary"
  fi
}
# final_loss_below LOG LIMIT: LOG has 20 steps and its last loss is below LIMIT (the first is 3.15).
final_loss_below() {
  local steps last
  steps=$(wc -l <"$1")
  last=$(tail -n 1 "$1" | sed -n 's/.*"loss":\([^,]*\),.*/\1/p')
  if [ "$steps" = 20 ] && awk -v l="$last" -v m="$2" 'BEGIN { exit !(l != "" && l < m) }'; then pass; else
    fail "$1: $steps steps, final loss '$last', not 20 steps down to below $2"
  fi
}

# Off macOS it validates nothing without --standin.
check refused 2 bash "$validate" --build "$build" --out "$tmp/refused"
contains refused "ane-validate.sh: error: this validates the ane backend on a Mac (Apple silicon, macOS); this machine runs Linux, which has no Neural Engine. Run it with --standin"
if [ -e "$tmp/refused" ]; then fail "refused: it made its output directory"; else pass; fi
check unknown-argument 2 bash "$validate" --standin --fast
contains unknown-argument "ane-validate.sh: error: unknown argument '--fast'"

# Against the stand-in, found in the build tree.
check standin 0 env -u ORION_ANE_FRAMEWORK bash "$validate" --standin --quick --build "$build" --out "$tmp/v"
# Its standard output is the summary, then where the archive is.
head -n -1 out >stdout
same_bytes standin-stdout stdout "$tmp/v/SUMMARY.txt"
contains standin "wrote $tmp/v.tar.gz: attach it to issue 15"
if head -n 1 out | grep -qE '^orion ane validation, [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z, backend ane \(--standin\)$'
then pass; else fail "standin: the first line is '$(head -n 1 out)'"; fi
summary_is standin "$tmp/v/SUMMARY.txt" "ok      system (system.txt)
ok      probe
        min surface:    49152 bytes accepted, 49088 rejected (15 programs)
        concat:         rejected: orion-run: error: the ane backend: the device failed to compile function 'main' (error code 1, 0x1): ANECCompile() FAILED: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]
ok      self-test
        weights updated by recompile, 7 compiles
ok      example-tiny_mlp
ok      example-gpt2_block
ok      example-llama_block
ok      train-ane
ok      train-cpu
        final loss after 20 steps: ane LOSS, cpu LOSS (train-*.jsonl)
8 ok, 0 FAILED, 0 skipped"
tar -tzf "$tmp/v.tar.gz" | sort >files
printf '%s\n' v/ v/SUMMARY.txt v/ane-update-standin-1-standin v/example-gpt2_block.log v/example-llama_block.log \
  v/example-tiny_mlp.log v/probe.json v/probe.log v/self-test.log v/system.txt v/train-ane.jsonl v/train-ane.log \
  v/train-cpu.jsonl v/train-cpu.log | sort >files.expected
same_bytes standin-archive files files.expected
cp "$tmp/v/probe.log" out
contains standin-probe "--backend=ane -v -o $tmp/v/probe.json --only surface,concat --pace 0"
for f in "$tmp"/v/example-*.log; do
  cp "$f" out
  contains "standin-$(basename "$f" .log)" "orion-run: backend ane: framework '$standin'"
  contains "standin-$(basename "$f" .log)" "orion-run: backend ane used: ane program cache:"
  contains "standin-$(basename "$f" .log)" "tolerance 0.01 + 0.01*|expected|: ok"
done
cp "$tmp/v/self-test.log" out
contains standin-self-test "patch $tmp/v/work/self-test/scale.anepkg --weight w=$tmp/v/work/self-test/w.npy --backend ane -v --verify="
contains standin-self-test "update strategy: recompile (the self-test's choice for OS build standin-1, written to '$tmp/v/work/xdg/orion/ane-update-standin-1-standin')"
contains standin-self-test "scale.anepkg: verified on the ane backend: the updated program's outputs are bit-identical to a fresh compile's"
cp "$tmp/v/ane-update-standin-1-standin" out
contains standin-choice "strategy recompile"
final_loss_below "$tmp/v/train-ane.jsonl" 1.5
final_loss_below "$tmp/v/train-cpu.jsonl" 1.5
if [ -e "$tmp/v/work" ]; then fail "standin: its work directory is left"; else pass; fi

# A step that fails: the stand-in's weights switch set to no behaviour it has.
check failing 1 env ORION_ANE_FRAMEWORK="$standin" ORION_ANE_STANDIN_WEIGHTS=bogus \
  bash "$validate" --standin --quick --build "$build" --out "$tmp/f"
grep -E '^(ok|FAILED|skipped) |^[0-9]+ ok' "$tmp/f/SUMMARY.txt" >verdicts
printf '%s\n' "ok      system (system.txt)" "ok      probe" "FAILED  self-test (exit 1, see self-test.log)" \
  "FAILED  example-tiny_mlp (exit 1, see example-tiny_mlp.log)" \
  "FAILED  example-gpt2_block (exit 1, see example-gpt2_block.log)" \
  "FAILED  example-llama_block (exit 1, see example-llama_block.log)" "FAILED  train-ane (exit 1, see train-ane.log)" \
  "ok      train-cpu" "3 ok, 5 FAILED, 0 skipped" >verdicts.expected
same_bytes failing-verdicts verdicts verdicts.expected
contains failing "        final loss after 20 steps: ane none, cpu "
contains failing "wrote $tmp/f.tar.gz: attach it to issue 15"
if [ -f "$tmp/f.tar.gz" ]; then pass; else fail "failing: no archive"; fi
cp "$tmp/f/self-test.log" out
contains failing-self-test "ORION_ANE_STANDIN_WEIGHTS=bogus is not baked, reload, patch-data or inputs"

# No framework to open: the cpu backend, saying why.
check no-framework 0 env ORION_ANE_FRAMEWORK="$tmp/none.so" bash "$validate" --standin --quick --build "$build" \
  --out "$tmp/c"
summary_is no-framework "$tmp/c/SUMMARY.txt" "        (the ane backend does not open here: orion-run: error: the ane backend cannot open its framework '$tmp/none.so' (set ORION_ANE_FRAMEWORK to another path): $tmp/none.so: cannot open shared object file: No such file or directory; backends built in: cpu, check)
ok      system (system.txt)
ok      probe
        min surface:    every size down to 64 bytes accepted
        concat:         accepted
skipped self-test (the cpu backend has no weight-update self-test)
ok      example-tiny_mlp
ok      example-gpt2_block
ok      example-llama_block
ok      train-cpu
        final loss after 20 steps: cpu LOSS (train-*.jsonl)
6 ok, 0 FAILED, 1 skipped"
contains no-framework ", backend cpu (--standin)"

if [ -z "$(ls -A "$TMPDIR")" ]; then pass; else fail "TMPDIR is not empty: $(ls -A "$TMPDIR")"; fi
finish
