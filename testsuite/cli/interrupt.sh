#!/usr/bin/env bash
# orionc killed by SIGTERM or SIGINT while it writes a package removes its
# temporary directory (registered while it exists, orion/temporaries.h; the
# signal cleanup removes it), ends by the signal, and leaves an existing
# package as it was.
#
# The signal goes once the temporary directory holds weights/, which orionc
# makes after it reported the directory, so its removal is then due. When the
# signal lands is up to the machine: the compile may have finished first
# (exit 0), or put its package in place just before (then it ends by the
# signal with the whole new package installed, which is correct too). Such a
# try proves nothing and is made again, up to 20 times; a test whose every try
# came too late is skipped (77), never failed.
#   interrupt.sh ORIONC ORION_INSPECT
set -u
set -m # background jobs keep SIGINT (without job control a shell starts them with it ignored)
orionc=$(realpath "$1")
inspect=$(realpath "$2")
. "$(dirname "$0")/lib.sh"

# 256 MiB of generated weights: long enough to be caught while writing.
cat >big.oir <<'EOT'
func main(x: fp16[1,8192]) {
  param w: fp16[16384,8192] = normal(seed=1, std=0.02);
  y = linear(x, w);
  return y;
}
EOT
printf 'func main(x: fp16[4]) {\n  y = relu(x);\n  return y;\n}\n' >small.oir

running() { case $(ps -o stat= -p "$1" 2>/dev/null) in "" | Z*) return 1 ;; esac; }
snapshot() { cat m.anepkg/Manifest.plist m.anepkg/*.mil | cksum; }

caught=0
interrupt() { # interrupt NAME SIGNAL STATUS [OLD_SNAPSHOT]: compile big.oir to m.anepkg, signal it mid-write
  local name=$1 sig=$2 want=$3 old=${4:-} try pid got
  for try in $(seq 20); do
    [ -n "$old" ] && { rm -rf m.anepkg && cp -r old.anepkg m.anepkg; }
    [ -z "$old" ] && rm -rf m.anepkg
    "$orionc" -w --no-lint --no-cache -o m.anepkg big.oir >out 2>&1 &
    pid=$!
    while running $pid && ! compgen -G 'm.anepkg.tmp-*/weights' >/dev/null; do sleep 0.001; done
    kill -s "$sig" $pid 2>/dev/null
    wait $pid
    got=$?
    if compgen -G 'm.anepkg.tmp-*' >/dev/null; then fail "$name: a temporary directory is left:" m.anepkg.tmp-*; return; fi
    [ "$got" = 0 ] && continue # finished first
    if [ "$got" != "$want" ]; then fail "$name: exit $got, expected $want"; cat out; return; fi
    if [ -n "$old" ] && [ -e m.anepkg/Manifest.plist ] && [ "$(snapshot)" = "$old" ]; then
      pass # the old package as it was
    elif [ -z "$old" ] && [ ! -e m.anepkg ]; then
      pass # no package
    elif "$inspect" m.anepkg >inspect.out 2>&1; then
      continue # ended after it put the whole new package in place
    else
      fail "$name: ended by the signal, leaving a package that is neither the old one nor a whole new one:"
      cat inspect.out
      return
    fi
    caught=$((caught + 1))
    pass
    echo "$name: caught while writing at try $try"
    return
  done
  echo "$name: every one of 20 compiles ended before its signal"
}

interrupt sigterm TERM 143
interrupt sigint INT 130
check small 0 "$orionc" --no-cache -o old.anepkg small.oir
interrupt replace TERM 143 "$(cd old.anepkg && cat Manifest.plist ./*.mil | cksum)"
[ "$caught" = 0 ] && [ "$failed" = 0 ] && { echo "every compile ended before its signal: nothing checked"; exit 77; }
finish
