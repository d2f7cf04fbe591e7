#!/usr/bin/env bash
# Every tool under allocation-failure injection (ORION_FAIL_ALLOC=N, see
# docs/testing.md): for each N swept, a command either ends as it does
# without injection (same status, same stdout and stderr, same files) or
# ends with status 3 and "PROGRAM: error: out of memory (allocating B bytes)"
# as its last stderr line, after nothing but a prefix of its usual output
# (diagnostics printed before memory ran out stay printed). Never a signal;
# no temporary directory and no partial output left behind: the output
# location holds either what it held before or the complete output. A
# recoverable allocation (a weight's buffer) may instead fail as an ordinary
# error, exit 1 with "does not fit in memory". Under the ASan build the same
# sweep fails on any ASan error or leak report (they change status or stderr).
#
# ORION_FAIL_ALLOC=count gives each command's allocation count; the sweep
# takes every N up to 16 and the last 16, and about OOM_POINTS (default 20)
# more spread between. OOM_POINTS=all sweeps every N (slow: thousands of runs);
# OOM_ONLY="compile run" sweeps only the commands so named.
#   oom.sh ORIONC ORION_RUN ORION_INSPECT ORION_LINT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
lint=$(realpath "$4")
example=$(realpath "$(dirname "$0")/../../examples/tiny_mlp.oir")
. "$(dirname "$0")/lib.sh"
points=${OOM_POINTS:-20}
export TMPDIR="$tmp/tmpdir" # where patch --verify makes its directory: checked empty after each run
mkdir "$TMPDIR"

cp "$example" m.oir
check setup-compile 0 "$orionc" --no-cache -o m.anepkg m.oir
cp -r m.anepkg orig.anepkg
npy16 '(1, 16)' "$(printf '\\x00\\x3c%.0s' $(seq 16))" x.npy
npy16 '(32,)' "$(printf '\\x00\\x38%.0s' $(seq 32))" b.npy

# What a directory holds: every path, and each file's bytes.
state() { (cd "$1" && find . -print | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r cat | cksum); }
# Whether file $1 is, line by line, a prefix of file $2.
is_prefix() { local n; n=$(wc -l <"$1"); head -n "$n" "$2" | cmp -s - "$1"; }

# sweep NAME PROGRAM RESET CMD...: RESET (a shell function) puts the work
# directory w/ back as it was before CMD; CMD runs in w/. After each run,
# w/ must hold what it held before or what the run without injection left.
sweep() {
  local name=$1 program=$2 reset=$3
  shift 3
  [ -n "${OOM_ONLY:-}" ] && [[ " $OOM_ONLY " != *" $name "* ]] && return
  $reset
  local before after total got list n
  before=$(state w)
  (cd w && "$@" >../want.out 2>../want.err)
  local want=$?
  after=$(state w)
  $reset
  (cd w && ORION_FAIL_ALLOC=count "$@" >../count.out 2>../count.err)
  total=$(sed -n "s/^$program: \([0-9]*\) allocations\$/\1/p" count.err | tail -n 1)
  if [ -z "$total" ]; then fail "$name: no allocation count:"; cat count.err; return; fi
  grep -v "^$program: [0-9]* allocations\$" count.err >count.rest
  if cmp -s count.rest want.err && cmp -s count.out want.out; then pass; else fail "$name: count mode changed the output"; fi
  if [ "$points" = all ]; then
    list=$(seq "$total")
  else
    # The first and the last 16 all (the last ones are where the outputs are put in place), the rest spread.
    list=$( (seq 1 $((total < 16 ? total : 16)); [ "$total" -gt 16 ] && seq 17 $(((total - 16) / points + 1)) "$total"
      seq $((total > 16 ? total - 15 : 1)) "$total") | sort -n -u)
  fi
  local bad=0 oom=0 clean=0
  for n in $list; do
    $reset
    (cd w && ORION_FAIL_ALLOC=$n "$@" >../got.out 2>../got.err)
    got=$?
    local why=""
    if [ "$got" -gt 128 ]; then
      why="ended by signal $((got - 128))"
    elif [ "$got" = 3 ]; then
      oom=$((oom + 1))
      tail -n 1 got.err | grep -Eqx "$program: error: out of memory \(allocating [0-9]+ bytes\)" ||
        why="status 3 without the message as the last line"
      head -n -1 got.err >got.head
      [ -z "$why" ] && ! is_prefix got.head want.err && why="stderr before the message is not the usual output's start"
      [ -z "$why" ] && ! is_prefix got.out want.out && why="stdout is not the usual output's start"
    elif [ "$got" = 1 ] && [ "$want" != 1 ] && grep -q "does not fit in memory" got.err; then
      oom=$((oom + 1)) # a recoverable allocation, reported as an ordinary error
    elif [ "$got" = "$want" ]; then
      clean=$((clean + 1))
      cmp -s got.out want.out && cmp -s got.err want.err || why="status $got as usual, but other output"
    else
      why="status $got (usually $want)"
    fi
    if [ -z "$why" ]; then
      local now
      now=$(state w)
      [ "$now" = "$before" ] || [ "$now" = "$after" ] || why="left the directory neither as before nor as after a run"
    fi
    [ -z "$why" ] && [ -n "$(ls -A "$TMPDIR")" ] && why="left a temporary directory: $(ls -A "$TMPDIR")"
    if [ -n "$why" ]; then
      bad=$((bad + 1))
      fail "$name: ORION_FAIL_ALLOC=$n: $why"
      sed 's/^/  stderr: /' got.err | head -n 5
      rm -rf "${TMPDIR:?}"/*
      [ "$bad" -ge 3 ] && return
    fi
  done
  [ "$bad" = 0 ] && pass
  echo "$name: $total allocations, $(echo "$list" | wc -w) swept: $oom out of memory, $clean unaffected"
}

# The syntax: N, N:once (only the Nth fails), count; anything else is ignored, with a warning.
check once 3 env ORION_FAIL_ALLOC=1:once "$inspect" m.anepkg
if grep -Eqx "orion-inspect: error: out of memory \(allocating [0-9]+ bytes\)" out && [ "$(wc -l <out)" = 1 ]; then pass; else fail "once: wrong message"; cat out; fi
for bad in 0 -1 x 3:twice 2: ''; do
  ORION_FAIL_ALLOC=$bad "$inspect" m.anepkg >bad.out 2>bad.err
  if [ $? = 0 ] && { [ -z "$bad" ] && [ ! -s bad.err ] ||
    [ "$(cat bad.err)" = "orion-inspect: warning: ignoring ORION_FAIL_ALLOC='$bad' (expected N, N:once or count)" ]; }; then
    pass
  else
    fail "bad value '$bad' not ignored as said"; cat bad.err
  fi
done

fresh_dir() { rm -rf w && mkdir w && cp m.oir w/; }
with_package() { rm -rf w && mkdir w && cp -r orig.anepkg w/m.anepkg && cp m.oir x.npy b.npy w/; }
# A patch that ran out of memory is an interrupted weight update: what the
# next open of the package (here --recover) finishes or undoes. The
# directory is judged after that.
patched() { "$run" "$@" && return 0; local s=$?; env -u ORION_FAIL_ALLOC "$run" patch --recover m.anepkg >/dev/null 2>&1; return $s; }

sweep compile orionc fresh_dir "$orionc" --no-cache -o m.anepkg m.oir
sweep compile-mil orionc fresh_dir "$orionc" --emit=mil -o m.mil m.oir
sweep run orion-run with_package "$run" m.anepkg --input x=x.npy --output-dir out
sweep inspect orion-inspect with_package "$inspect" m.anepkg
sweep inspect-json orion-inspect with_package "$inspect" --json m.anepkg
sweep lint-oir orion-lint fresh_dir "$lint" m.oir
sweep lint-package orion-lint with_package "$lint" m.anepkg
sweep patch orion-run with_package patched patch m.anepkg --weight fc1.bias=b.npy
sweep probe orion-run fresh_dir env SOURCE_DATE_EPOCH=0 "$run" probe --backend=cpu --only dialect,concat,gelu -o p.json
sweep patch-verify orion-run with_package patched patch m.anepkg --weight fc1.bias=b.npy --verify
finish
