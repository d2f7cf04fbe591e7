#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS (default 60) on its seed corpus. Crashes are written to build-fuzz/.
# Prints "fuzz NAME: ok" or the crash, and exits non-zero on any crash.
# An input counts as a hang after 120 s (-timeout): none has come near the 10 s
# at which libFuzzer reports a slow unit, and a loaded machine must not turn a
# slow input into a finding.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=build-fuzz
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang meson setup "$dir" -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
fi
ninja -C "$dir" testsuite/fuzz/fuzz_oir testsuite/fuzz/fuzz_weights testsuite/fuzz/fuzz_blob testsuite/fuzz/fuzz_manifest testsuite/fuzz/fuzz_constraints testsuite/fuzz/fuzz_mil testsuite/fuzz/fuzz_npy testsuite/fuzz/fuzz_journal testsuite/fuzz/fuzz_options testsuite/fuzz/fuzz_train_log >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; exit 1; }

status=0
run() { # run NAME CORPUS_DIRS...
  local name=$1
  shift
  local work="$dir/corpus-$name"
  mkdir -p "$work"
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$dir/testsuite/fuzz/$name" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2048 \
       -artifact_prefix="$dir/$name-" -print_final_stats=0 "$work" "$@" >"$dir/$name.log" 2>&1; then
    echo "fuzz $name: ok ($seconds s, $(grep -o 'cov: [0-9]*' "$dir/$name.log" | tail -n 1))"
  else
    echo "fuzz $name: FAILED"
    tail -n 40 "$dir/$name.log"
    status=1
  fi
}
run fuzz_oir examples testsuite/golden
run fuzz_weights testsuite/fuzz/corpus_weights
run fuzz_blob testsuite/fuzz/corpus_blob
run fuzz_manifest testsuite/fuzz/corpus_manifest
run fuzz_constraints testsuite/fuzz/corpus_constraints
# Real MIL from Apple's tools and others, read in place from ../shared (not copied into the project).
run fuzz_mil testsuite/fuzz/corpus_mil testsuite/mil $( [ -d ../shared/corpus/mil ] && echo ../shared/corpus/mil)
run fuzz_npy testsuite/fuzz/corpus_npy
run fuzz_journal testsuite/fuzz/corpus_journal
# The tools' option parser; its error messages go to stderr (the log), not the terminal.
run fuzz_options testsuite/fuzz/corpus_options
run fuzz_train_log testsuite/fuzz/corpus_train_log testsuite/train
exit $status
