#!/usr/bin/env bash
# orionc killed by SIGTERM or SIGINT while it writes a package removes its
# temporary directory (registered while it exists, orion/temporaries.h; the
# signal cleanup removes it), ends by the signal, and leaves an existing
# package as it was.
#
# The signal lands at a chosen point every time: orionc stops there
# (ORION_TEST_PAUSE_AT, docs/testing.md) and says so through a fifo, so no
# try depends on how fast the machine is. The points: `package-weights` (a
# weight has been handed to the weight file's writer, whose thread may still
# be sending it to the disk, and the next is not made yet: mid-write) and
# `package-temp` (the temporary package is complete, not yet in place).
#   interrupt.sh ORIONC ORION_INSPECT
set -u
set -m # background jobs keep SIGINT (without job control a shell starts them with it ignored)
orionc=$(realpath "$1")
inspect=$(realpath "$2")
. "$(dirname "$0")/lib.sh"

# Two weights, so that a pause after the first is in the middle of the file.
cat >big.oir <<'EOT'
func main(x: fp16[1,512]) {
  param w1: fp16[1024,512] = normal(seed=1, std=0.02);
  param w2: fp16[512,1024] = normal(seed=2, std=0.02);
  h = linear(x, w1);
  y = linear(h, w2);
  return y;
}
EOT
printf 'func main(x: fp16[4]) {\n  y = relu(x);\n  return y;\n}\n' >small.oir

mkfifo pause
export ORION_TEST_PAUSE_FIFO="$tmp/pause"
snapshot() { cat m.anepkg/Manifest.plist m.anepkg/*.mil | cksum; }

interrupt() { # interrupt NAME POINT SIGNAL STATUS [OLD_SNAPSHOT]: compile big.oir to m.anepkg, signal it at POINT
  local name=$1 point=$2 sig=$3 want=$4 old=${5:-} pid got at
  rm -rf m.anepkg
  [ -n "$old" ] && cp -r old.anepkg m.anepkg
  ORION_TEST_PAUSE_AT=$point "$orionc" -w --no-lint --no-cache -o m.anepkg big.oir >out 2>&1 &
  pid=$!
  read -r at <pause
  [ "$at" = "$point" ] || fail "$name: paused at '$at', expected '$point'"
  if compgen -G 'm.anepkg.tmp-*/weights' >/dev/null; then pass; else fail "$name: no temporary package at $point"; fi
  kill -s "$sig" $pid
  { wait $pid; } 2>/dev/null
  got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat out; fi
  if compgen -G 'm.anepkg.tmp-*' >/dev/null; then fail "$name: a temporary directory is left:" m.anepkg.tmp-*; else pass; fi
  if [ -n "$old" ]; then
    if [ -e m.anepkg/Manifest.plist ] && [ "$(snapshot)" = "$old" ] && "$inspect" m.anepkg >inspect.out 2>&1; then
      pass
    else
      fail "$name: the old package was not left as it was"
      cat inspect.out 2>/dev/null
    fi
  elif [ -e m.anepkg ]; then
    fail "$name: a package was made"
  else
    pass
  fi
}

interrupt sigterm-mid-write package-weights TERM 143
interrupt sigint-mid-write package-weights INT 130
interrupt sigterm-complete package-temp TERM 143
interrupt sigint-complete package-temp INT 130
check small 0 "$orionc" --no-cache -o old.anepkg small.oir
old=$(cd old.anepkg && cat Manifest.plist ./*.mil | cksum)
interrupt replace-mid-write package-weights TERM 143 "$old"
interrupt replace-complete package-temp INT 130 "$old"
finish
