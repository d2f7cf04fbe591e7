#!/usr/bin/env bash
# What killed writers leave, and who removes it (orion/temporaries.h).
#
# Every writer here is stopped at a named point by ORION_TEST_PAUSE_AT: it
# writes the point's name to the fifo ORION_TEST_PAUSE_FIFO and then blocks,
# so the test knows for certain that the temporary exists when it sends the
# signal; nothing depends on timing. Then:
#   SIGKILL leaves the temporary and its marker; the next compile into the
#     same place, `orionc --clean`, the next `orion-run patch` on the package
#     and the next orion-run writing the same output remove it and name it;
#   a look-alike without a marker, one whose maker runs (this shell) and a
#     symbolic link named like one are left alone;
#   SIGTERM (and SIGINT) during `orion-run patch` (with and without --verify) and during
#     orion-run's output writing leaves no temporary, and a package that is
#     the old one and inspects clean.
#   leftovers.sh ORIONC ORION_RUN ORION_INSPECT MAKE_SAFETENSORS
set -u
set -m # background jobs keep SIGINT (without job control a shell starts them with it ignored)
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
make_st="python3 $(realpath "$4")"
. "$(dirname "$0")/lib.sh"

mkfifo pause
export ORION_TEST_PAUSE_FIFO="$tmp/pause"
# paused POINT CMD...: starts CMD paused at POINT; $pid is its pid once it is there.
paused() {
  local point=$1 at
  shift
  ORION_TEST_PAUSE_AT=$point "$@" >paused.out 2>&1 &
  pid=$!
  read -r at <pause
  [ "$at" = "$point" ] || fail "paused at '$at', expected '$point'"
}
# ended SIGNAL STATUS NAME: sends SIGNAL to the paused $pid and checks how it ended.
ended() {
  kill -s "$1" $pid
  { wait $pid; } 2>/dev/null
  local got=$?
  if [ "$got" = "$2" ]; then pass; else fail "$3: exit $got, expected $2"; cat paused.out; fi
}
only() { # only NAME GLOB: exactly one path matches
  local m=($2)
  if [ ${#m[@]} = 1 ] && [ -e "${m[0]}" ]; then pass; else fail "$1: '$2' matches ${m[*]}"; fi
}
none() { # none NAME GLOB...: nothing matches
  if compgen -G "$2" >/dev/null; then fail "$1: left" $2; else pass; fi
}
lacks() { if grep -qF -- "$2" out; then fail "$1: output has '$2'"; cat out; else pass; fi; }
snapshot() { cat "$1/Manifest.plist" "$1/weights/weight.bin" | cksum; }

cat >m.oir <<'EOF'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = normal(seed=1, std=0.1);
  param b: fp16[4] = zeros;
  y = linear(x, w, b);
  return y;
}
EOF

# ---- a compile killed while its temporary package exists ------------------------
paused package-temp "$orionc" --no-lint --no-cache -o x.anepkg m.oir
only killed-compile-temp 'x.anepkg.tmp-??????'
only killed-compile-marker 'x.anepkg.tmp-??????.owner'
killed=$pid
temp=$(echo x.anepkg.tmp-??????)
ended KILL 137 killed-compile
check still-there 0 test -d "$temp" -a -f "$temp.owner"
check clean 0 "$orionc" --clean
contains clean "orionc: removed $temp (left by process $killed, which is gone)"
none clean-removed 'x.anepkg.tmp-*'
check clean-again 0 "$orionc" --clean
contains clean-again "orionc: nothing to remove in . or $ORION_CACHE_DIR"

# The next compile into the same place removes it and says so.
paused package-temp "$orionc" --no-lint --no-cache -o x.anepkg m.oir
killed=$pid
temp=$(echo x.anepkg.tmp-??????)
ended KILL 137 killed-compile-2
check next-compile 0 "$orionc" --no-lint --no-cache -o x.anepkg m.oir
contains next-compile "orionc: removed $temp (left by process $killed, which is gone)"
none next-compile-removed 'x.anepkg.tmp-*'
check next-compile-package 0 "$inspect" x.anepkg

# --clean with -o looks in the directory of -o; with operands, in those.
mkdir sub other
paused package-temp "$orionc" --no-lint --no-cache -o sub/x.anepkg m.oir
killed=$pid
temp=$(echo sub/x.anepkg.tmp-??????)
ended KILL 137 killed-compile-sub
check clean-other 0 "$orionc" --clean --no-cache other
contains clean-other "orionc: nothing to remove in other"
check clean-o 0 "$orionc" --clean --no-cache -o sub/x.anepkg
contains clean-o "orionc: removed $temp (left by process $killed, which is gone)"
none clean-o-removed 'sub/x.anepkg.tmp-*'

# SIGTERM at the same point leaves nothing, and the package before it as it was.
cp -r x.anepkg old.anepkg
paused package-temp "$orionc" --no-lint --no-cache -O0 -o x.anepkg m.oir
ended TERM 143 sigterm-compile
none sigterm-compile-removed 'x.anepkg.*'
check sigterm-compile-old 0 diff -r old.anepkg x.anepkg
rm -rf old.anepkg

# A text output (--emit=mil -o FILE) killed before its rename: the next one into FILE removes the temporary.
paused atomic-file "$orionc" --no-lint --emit=mil -o m.mil m.oir
killed=$pid
temp=$(echo m.mil.tmp.??????)
ended KILL 137 killed-emit
check next-emit 0 "$orionc" --no-lint --emit=mil -o m.mil m.oir
contains next-emit "orionc: removed $temp (left by process $killed, which is gone)"
none next-emit-removed 'm.mil.*'
rm m.mil

# ---- what is left alone ------------------------------------------------------------
boot=$(cat /proc/sys/kernel/random/boot_id)
host=$(uname -n | tr -c 'A-Za-z0-9._\n-' '_')
start_of() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; } # field 22, counted after "(comm)"
true &
gone=$!
wait $gone
marker() { # marker TEMP PID START: a well-formed marker, made at boot (before anything started)
  printf 'orion-temporary 1 pid=%s start=%s boot=%s host=%s made=0 time=0\n' "$2" "$3" "$boot" "$host" >"$1.owner"
}
mkdir y.anepkg.tmp-nomark                 # named like one, no marker
mkdir z.anepkg.tmp-alive1                 # its maker runs: this shell, its real start time
marker z.anepkg.tmp-alive1 $$ "$(start_of $$)"
mkdir target && echo keep >target/keep    # a symbolic link named like one, its marker's maker gone
ln -s target s.anepkg.tmp-symlnk
marker s.anepkg.tmp-symlnk $gone 1
check left-alone 0 "$orionc" --clean --no-cache
contains left-alone "orionc: nothing to remove in ."
check nomark-kept 0 test -d y.anepkg.tmp-nomark
check alive-kept 0 test -d z.anepkg.tmp-alive1 -a -f z.anepkg.tmp-alive1.owner
check symlink-kept 0 test -L s.anepkg.tmp-symlnk -a -f s.anepkg.tmp-symlnk.owner -a -f target/keep
# The same marker with a start time that is not this shell's: the pid was reused, the maker is gone.
marker z.anepkg.tmp-alive1 $$ $(($(start_of $$) + 1))
check reused-pid 0 "$orionc" --clean --no-cache
contains reused-pid "orionc: removed z.anepkg.tmp-alive1 (left by process $$, which is gone)"
rm -rf y.anepkg.tmp-nomark s.anepkg.tmp-symlnk s.anepkg.tmp-symlnk.owner

# A compile-cache store left behind (planted: a store is too quick to stop).
mkdir -p "$ORION_CACHE_DIR/0123.anepkg.tmp-abcdef"
marker "$ORION_CACHE_DIR/0123.anepkg.tmp-abcdef" $gone 1
check clean-cache 0 "$orionc" --clean
contains clean-cache "orionc: removed $ORION_CACHE_DIR/0123.anepkg.tmp-abcdef (left by process $gone, which is gone)"

# ---- orion-run patch --------------------------------------------------------------------
check compile-m 0 "$orionc" --no-lint --no-cache -o m.anepkg m.oir
before=$(snapshot m.anepkg)
$make_st new.safetensors w=F32:4x4:0.5,0,0,0,0,0.5,0,0,0,0,0.5,0,0,0,0,0.5 b=F16:4:fill=1

# Killed while it checks its --verify copy: the copy stays, the next patch removes it.
paused verify-copy "$run" patch m.anepkg --weights new.safetensors --verify
killed=$pid
copy=$(echo m.anepkg.verify-??????)
only verify-copy-made "$copy.owner"
ended KILL 137 killed-verify
check unchanged-after-kill 0 test "$(snapshot m.anepkg)" = "$before"
check patch-after-kill 0 "$run" patch m.anepkg --recover
contains patch-after-kill "orion-run: removed $copy (left by process $killed, which is gone)"
contains patch-after-kill "m.anepkg: no interrupted weight update"
none patch-removed-copy 'm.anepkg.verify-*'

# SIGTERM while the journal is being written, without and with --verify (then in the copy first).
for how in plain verify; do
  extra=()
  [ $how = verify ] && extra=(--verify)
  paused patch-journal "$run" patch m.anepkg --weights new.safetensors "${extra[@]}"
  if [ $how = plain ]; then only "$how-journal-tmp" m.anepkg/weights/weight.bin.journal.tmp; fi
  if [ $how = verify ]; then only "$how-journal-tmp" 'm.anepkg.verify-??????/weights/weight.bin.journal.tmp'; fi
  ended TERM 143 "sigterm-patch-$how"
  none "$how-no-copy" 'm.anepkg.verify-*'
  none "$how-no-patch-temporaries" 'm.anepkg/weights/weight.bin.*'
  none "$how-no-manifest-tmp" 'm.anepkg/Manifest.plist.*'
  check "$how-unchanged" 0 test "$(snapshot m.anepkg)" = "$before"
  check "$how-inspects" 0 "$inspect" m.anepkg
  check "$how-nothing-to-recover" 0 "$run" patch m.anepkg --recover -v
  contains "$how-nothing-to-recover" "m.anepkg: no interrupted weight update"
  lacks "$how-nothing-to-recover" "removed"
done
# SIGTERM while the verify copy is checked.
paused verify-copy "$run" patch m.anepkg --weights new.safetensors --verify
ended TERM 143 sigterm-verify-copy
none verify-copy-removed 'm.anepkg.verify-*'
check verify-copy-unchanged 0 test "$(snapshot m.anepkg)" = "$before"
# SIGINT the same (exit 130), in the copy's journal.
paused patch-journal "$run" patch m.anepkg --weights new.safetensors --verify
ended INT 130 sigint-verify-journal
none sigint-no-copy 'm.anepkg.verify-*'
check sigint-unchanged 0 test "$(snapshot m.anepkg)" = "$before"
# And the package still takes the patch, verified.
check patch-verified 0 "$run" patch m.anepkg --weights new.safetensors --verify
contains patch-verified "verified"

# ---- orion-run's outputs -------------------------------------------------------------------
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy
mkdir o
paused atomic-file "$run" m.anepkg --input x=x.npy --output-dir o
only output-temp 'o/y.npy.tmp.??????'
ended TERM 143 sigterm-output
none sigterm-output-removed 'o/*'
paused atomic-file "$run" m.anepkg --input x=x.npy --output-dir o
killed=$pid
temp=$(echo o/y.npy.tmp.??????)
ended KILL 137 killed-output
check next-run 0 "$run" m.anepkg --input x=x.npy --output-dir o
contains next-run "orion-run: removed $temp (left by process $killed, which is gone)"
check next-run-files 0 test "$(cd o && echo *)" = y.npy
finish
