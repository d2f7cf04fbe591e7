#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#   1. a normal build with warnings as errors, and its tests;
#   2. the same tests under AddressSanitizer and UndefinedBehaviorSanitizer;
#   3. a short bounded run of each fuzz target (FUZZ_SECONDS, default 60).
# Ends with "N passed, N failed" and exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
fuzz_seconds=${FUZZ_SECONDS:-60}
passed=0
failed=0

suite() { # suite DIR MESON_OPTIONS...
  local dir=$1
  shift
  echo "== $dir"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; failed=$((failed + 1)); return; }
  fi
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    cat "$dir.build.log"
    failed=$((failed + 1))
    return
  fi
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    LSAN_OPTIONS=suppressions=$PWD/testsuite/lsan.supp \
    meson test -C "$dir" --print-errorlogs --num-processes 2 | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout):'
  local log="$dir/meson-logs/testlog.json"
  local ok bad
  ok=$(grep -c '"result": "\(OK\|EXPECTEDFAIL\)"' "$log")
  bad=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' "$log")
  passed=$((passed + ok))
  failed=$((failed + bad))
}

suite build -Dwerror=true
suite build-asan -Db_sanitize=address,undefined -Dbuildtype=debug -Dwerror=true

echo "== fuzz"
if [ "$fuzz_seconds" -gt 0 ]; then
  out=$(bash scripts/fuzz.sh "$fuzz_seconds")
  echo "$out"
  passed=$((passed + $(grep -c ': ok' <<<"$out")))
  failed=$((failed + $(grep -c ': FAILED' <<<"$out")))
  if ! grep -qE ': (ok|FAILED)' <<<"$out"; then failed=$((failed + 1)); fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
