#!/usr/bin/env bash
# orionc killed by SIGTERM or SIGINT while it writes a package removes its
# temporary directory (the compile library reports it, orionc's signal thread
# removes it), ends by the signal, and leaves an existing package as it was.
# A run whose compile ended before the signal arrived proves nothing: then
# the test is skipped (77), never failed.
set -u
set -m # background jobs keep SIGINT (without job control a shell starts them with it ignored)
orionc=$(realpath "$1")
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

caught=0
interrupt() { # interrupt NAME SIGNAL STATUS: compile big.oir to m.anepkg, signal it mid-write
  local name=$1 sig=$2 want=$3
  "$orionc" -w --no-lint --no-cache -o m.anepkg big.oir >out 2>&1 &
  local pid=$! n=0
  while [ $n -lt 5000 ] && ! compgen -G 'm.anepkg.tmp-*' >/dev/null; do
    n=$((n + 1))
    kill -0 $pid 2>/dev/null || break
    sleep 0.002
  done
  kill -s "$sig" $pid 2>/dev/null
  wait $pid
  local got=$?
  [ "$got" = 0 ] && return 1 # finished first
  caught=$((caught + 1))
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat out; fi
  if compgen -G 'm.anepkg.tmp-*' >/dev/null; then fail "$name: a temporary directory is left:" m.anepkg.tmp-*; else pass; fi
  return 0
}

interrupt sigterm TERM 143 && { [ ! -e m.anepkg ] && pass || fail "sigterm: a package appeared"; }
rm -rf m.anepkg
interrupt sigint INT 130 && { [ ! -e m.anepkg ] && pass || fail "sigint: a package appeared"; }
rm -rf m.anepkg

check small 0 "$orionc" --no-cache -o m.anepkg small.oir
before=$(cat m.anepkg/Manifest.plist m.anepkg/*.mil | cksum)
if interrupt replace TERM 143; then
  if [ "$(cat m.anepkg/Manifest.plist m.anepkg/*.mil | cksum)" = "$before" ]; then pass; else fail "replace: the old package changed"; fi
fi
[ "$caught" = 0 ] && { echo "every compile ended before its signal: nothing checked"; exit 77; }
finish
