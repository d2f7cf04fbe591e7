#!/usr/bin/env bash
# The check that the test suite is not flaky (docs/testing.md, "Flaky tests"):
# the whole suite of the normal build, from a clean clone, RUNS times in a row
# (default 5) while a busy loop on every core competes with it for the CPU.
#   scripts/stress-suite.sh [RUNS]
# Clones the commit checked out here (uncommitted changes are not tested) into
# a temporary directory, with ../shared linked beside it as it is beside this
# checkout (the tests read the MIL corpus there), builds it with
# -Dwerror=true before the load starts, then runs `meson test
# --num-processes 2` RUNS times. Prints each run's result and time and ends
# with "N passed, N failed" (runs); exits non-zero if any run failed, keeping
# a failed run's log in ${TMPDIR:-/tmp}. The busy loops and the temporary
# directory are removed on exit and on SIGINT or SIGTERM (each loop also ends
# by itself once this script is gone, even by SIGKILL).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
runs=${1:-5}
case $runs in '' | *[!0-9]*) echo "usage: scripts/stress-suite.sh [RUNS]" >&2; exit 2 ;; esac
root=$PWD
commit=$(git rev-parse HEAD) || exit 1
[ -n "$(git status --porcelain --untracked-files=no)" ] && echo "stress: uncommitted changes are not tested (commit $commit is)"
work=$(mktemp -d "${TMPDIR:-/tmp}/orion-stress-XXXXXX") || exit 1
burners=()
current= # the command run() waits for
cleanup() {
  for pid in $current "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

running() { case $(ps -o stat= -p "$1" 2>/dev/null) in "" | Z*) return 1 ;; esac; }
# In the background, watched between short sleeps: bash runs a trap only
# between commands, and its `wait` does not always return for one.
run() { # run LOG CMD...
  local log=$1 status
  shift
  "$@" >"$log" 2>&1 &
  current=$!
  while running "$current"; do sleep 0.5; done
  wait "$current"
  status=$?
  current=
  return $status
}

git clone -q --no-checkout "$root" "$work/orion" && git -C "$work/orion" checkout -q --detach "$commit" || exit 1
[ -d "$root/../shared" ] && ln -s "$(cd "$root/../shared" && pwd)" "$work/shared"
cd "$work/orion" || exit 1
echo "stress: building $commit in $work/orion"
run "$work/setup.log" meson setup build -Dwerror=true || { cat "$work/setup.log"; exit 1; }
run "$work/build.log" ninja -C build || { tail -n 50 "$work/build.log"; exit 1; }

cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
me=$$
for _ in $(seq "$cores"); do
  (while kill -0 "$me" 2>/dev/null; do :; done) &
  burners+=($!)
done
echo "stress: $cores busy loops running; $runs runs of the suite"

passed=0
failed=0
for i in $(seq "$runs"); do
  start=$SECONDS
  if run "$work/run.log" meson test -C build --num-processes 2 --print-errorlogs; then
    passed=$((passed + 1))
    echo "run $i: ok ($(awk '/^Ok:/ { print $2 }' "$work/run.log") tests passed) in $((SECONDS - start)) s"
  else
    failed=$((failed + 1))
    keep="${TMPDIR:-/tmp}/orion-stress-run-$i-$(date +%Y%m%d-%H%M%S).log"
    cp "$work/run.log" "$keep"
    echo "run $i: FAILED after $((SECONDS - start)) s (log: $keep):"
    grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS) ' "$work/run.log"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
