#!/usr/bin/env bash
# The long fuzzing campaign, outside CI: builds build-fuzz as fuzz.sh does,
# runs every target (scripts/fuzz-targets.sh) for SECONDS on a work copy of
# its committed corpus plus its extra seed directories, then minimises the
# grown corpus with libFuzzer's -merge=1 back into testsuite/fuzz/corpus_NAME
# (only inputs that add coverage to the committed corpus and the extra
# directories are added).
# Prints a table: each target's CPU seconds (user + sys of the fuzzer,
# measured), its final cov: and ft:, the corpus before and after, crashes;
# then the total CPU-hours. Crashing inputs are kept in
# build-fuzz/campaign/crashes/ (a crash ends that target's run early; make
# each one a regression test, fix it, and run again).
#   scripts/fuzz-campaign.sh SECONDS_PER_TARGET [NAME...]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 1 ] && [ "$1" -gt 0 ] 2>/dev/null || { echo "usage: scripts/fuzz-campaign.sh SECONDS_PER_TARGET [NAME...]" >&2; exit 2; }
seconds=$1
shift
only=" $* "
. scripts/fuzz-targets.sh
fuzz_build || exit 1
camp=$fuzz_dir/campaign
mkdir -p "$camp/crashes"

rows=()
total_cpu=0
crashed=0
while read -r name corpus extras; do
  [ "$only" != "  " ] && [[ "$only" != *" $name "* ]] && continue
  fuzzer=$fuzz_dir/testsuite/fuzz/$name
  work=$camp/$name.work
  rm -rf "$work" "$camp/$name.merged"
  mkdir -p "$work" "$corpus"
  cp -r "$corpus/." "$work/"
  before=$(find "$corpus" -type f | wc -l)
  seeds=()
  for s in $extras; do [ -d "$s" ] && seeds+=("$s"); done
  # bash's time keyword: the fuzzer's own user and system CPU, children included.
  TIMEFORMAT='%3U %3S'
  { time "$fuzzer" -max_total_time="$seconds" "${fuzz_options[@]}" -artifact_prefix="$camp/crashes/$name-" \
      -print_final_stats=1 "$work" "${seeds[@]}" </dev/null >"$camp/$name.log" 2>&1; } 2>"$camp/$name.time"
  status=$?
  cpu=$(awk '{printf "%.1f", $1 + $2}' "$camp/$name.time")
  stats=$(grep -E '^#[0-9]+.*cov: ' "$camp/$name.log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$stats")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
  crashes=$(find "$camp/crashes" -name "$name-*" -type f | wc -l)
  [ "$status" != 0 ] && crashed=1
  # Minimise: the committed corpus (named seeds, regression inputs) and the
  # extras' inputs go first into the merge's output, so that of the grown
  # corpus only what adds coverage to them is kept; the extras are taken
  # out again afterwards.
  merged=$camp/$name.merged
  mkdir -p "$merged"
  cp -r "$corpus/." "$merged/"
  for s in "${seeds[@]}"; do
    find "$s" -type f -exec sh -c 'for f; do cp "$f" "$0/extra-$(sha1sum <"$f" | cut -c1-40)"; done' "$merged" {} +
  done
  if "$fuzzer" -merge=1 "${fuzz_options[@]}" "$merged" "$work" </dev/null >"$camp/$name.merge.log" 2>&1; then
    find "$merged" -name 'extra-*' -delete
    cp -r "$merged/." "$corpus/"
  else
    echo "fuzz-campaign: $name: the merge failed (see $camp/$name.merge.log); $corpus left as it was" >&2
  fi
  after=$(find "$corpus" -type f | wc -l)
  total_cpu=$(awk -v a="$total_cpu" -v b="$cpu" 'BEGIN {printf "%.1f", a + b}')
  rows+=("$(printf '%-18s %10s %8s %8s %7s %7s %8s' "$name" "$cpu" "${cov:--}" "${ft:--}" "$before" "$after" "$crashes")")
done < <(fuzz_targets)

printf '%-18s %10s %8s %8s %7s %7s %8s\n' target cpu-s cov ft before after crashes
printf '%s\n' "${rows[@]}"
awk -v s="$total_cpu" 'BEGIN {printf "total: %.1f CPU seconds = %.3f CPU-hours\n", s, s / 3600}'
exit $crashed
