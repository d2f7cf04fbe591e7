#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS (default 60) on its seed corpus (scripts/fuzz-targets.sh lists
# them). Crashes are written to build-fuzz/. Prints "fuzz NAME: ok" or the
# crash, and exits non-zero on any crash. The long runs that grow the
# committed corpora are scripts/fuzz-campaign.sh's.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
seconds=${1:-60}
. scripts/fuzz-targets.sh
fuzz_build || exit 1
dir=$fuzz_dir

status=0
run() { # run NAME CORPUS_DIRS...
  local name=$1
  shift
  local work="$dir/corpus-$name" seeds=() s
  mkdir -p "$work"
  for s in "$@"; do [ -d "$s" ] && seeds+=("$s"); done
  if "$dir/testsuite/fuzz/$name" -max_total_time="$seconds" "${fuzz_options[@]}" \
       -artifact_prefix="$dir/$name-" -print_final_stats=0 "$work" "${seeds[@]}" </dev/null >"$dir/$name.log" 2>&1; then
    echo "fuzz $name: ok ($seconds s, $(grep -o 'cov: [0-9]*' "$dir/$name.log" | tail -n 1))"
  else
    echo "fuzz $name: FAILED"
    tail -n 40 "$dir/$name.log"
    status=1
  fi
}
while read -r name dirs; do
  # shellcheck disable=SC2086 # the directories are words
  run "$name" $dirs
done < <(fuzz_targets)
exit $status
