#!/usr/bin/env bash
# Every name a package uses as a path, or that becomes a file name, is
# confined, and every tool judges it by the manifest reader's one rule
# (pkgio/pkg_paths.c): an output named '../escape', '/abs', 'a/b', with a
# control character, or two outputs written to the same NAME.npy, are
# refused by orion-run, orion-inspect and orion-lint with the same message,
# and nothing is written anywhere. Before, orion-run wrote ../escape.npy
# outside --output-dir while inspect and lint called the package sound.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
lint=$(realpath "$4")
source "$(dirname "$0")/lib.sh"

npy16 '(2, 3)' '\x00\x3c\x00\x40\x00\x42\x00\x44\x00\x45\x00\x46' a.npy
printf 'func main(a: fp16[2,3]) {\n  x = relu(a);\n  y = neg(a);\n  return x, y;\n}\n' >t.oir
check compile 0 "$orionc" --no-cache -w -o t.anepkg t.oir
mkdir -p work/res
check run-sound 0 "$run" t.anepkg --input a=a.npy --output-dir work/res
rm -rf work/res && mkdir -p work/res

# hostile CASE OUTPUT-X OUTPUT-Y MESSAGE: the package with outputs x and y renamed.
# (orion-lint exits 2 for a package it cannot read, as for any unreadable input.)
hostile() {
  local name=$1 x=$2 y=$3 msg=$4
  rm -rf h.anepkg && cp -r t.anepkg h.anepkg
  X="$x" Y="$y" python3 - h.anepkg/Manifest.plist <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read()
for old, new in (("x", os.environ["X"]), ("y", os.environ["Y"])):
    s = s.replace("<key>Name</key>\n            <string>%s</string>" % old,
                  "<key>Name</key>\n            <string>%s</string>" % new, 1)
open(p, "w").write(s)
PY
  local before
  before=$(find "$tmp" -newer h.anepkg/Manifest.plist -name '*.npy' | wc -l)
  (cd work && check "$name-run" 1 "$run" ../h.anepkg --input a=../a.npy --output-dir res)
  mv work/out out 2>/dev/null
  contains "$name-run" "$msg"
  check "$name-inspect" 1 "$inspect" h.anepkg
  contains "$name-inspect" "$msg"
  check "$name-lint" 2 "$lint" h.anepkg
  contains "$name-lint" "$msg"
  local after
  after=$(find "$tmp" -newer h.anepkg/Manifest.plist -name '*.npy' | wc -l)
  if [ "$before" = "$after" ] && [ -z "$(ls work/res)" ]; then pass; else fail "$name: orion-run wrote a file"; fi
}
# At the renamed output's Name in the manifest (line 64; a collision at the later name, line 83).
m="h.anepkg/Manifest.plist:64:13: error: manifest: output name"
hostile dotdot '../escape' y "$m '../escape' of function 'main' has a '/' where a plain name is meant (outputs are written as NAME.npy)"
hostile parent '..' y "$m '..' of function 'main' has a '..' component (outputs are written as NAME.npy)"
hostile dot '.' y "$m '.' of function 'main' has a '.' component (outputs are written as NAME.npy)"
hostile absolute '/tmp/abs' y "$m '/tmp/abs' of function 'main' is an absolute path (outputs are written as NAME.npy)"
hostile separator 'a/b' y "$m 'a/b' of function 'main' has a '/' where a plain name is meant (outputs are written as NAME.npy)"
hostile delete "$(printf 'a\177b')" y "$m 'a\\x7fb' of function 'main' has a control character (outputs are written as NAME.npy)"
hostile tab "$(printf 'a\tb')" y "$m 'a\\x09b' of function 'main' has a control character (outputs are written as NAME.npy)"
hostile empty '' y "$m '' of function 'main' is empty (outputs are written as NAME.npy)"
hostile collide z z "h.anepkg/Manifest.plist:83:13: error: manifest: two outputs of function 'main' would both be written as 'z.npy'"
# Names that differ in case are two files (the rule is case-sensitive).
rm -rf h.anepkg && cp -r t.anepkg h.anepkg
sed -i 's|<string>y</string>|<string>X</string>|' h.anepkg/Manifest.plist
check case-differs-inspect 0 "$inspect" h.anepkg
if [ ! -e "$tmp/escape.npy" ] && [ ! -e /tmp/abs.npy ] || [ /tmp/abs.npy -ot t.oir ]; then pass; else fail "a file was written outside"; fi

# A MIL file name that leaves the package is refused by every tool alike.
rm -rf h.anepkg && cp -r t.anepkg h.anepkg
sed -i 's|<string>model.mil</string>|<string>../t.oir</string>|' h.anepkg/Manifest.plist
mm="h.anepkg/Manifest.plist:33:9: error: manifest: MIL file name '../t.oir' has a '/' where a plain name is meant; it must be a plain name inside the package"
check mil-run 1 "$run" h.anepkg --input a=a.npy --output-dir work/res
contains mil-run "$mm"
check mil-inspect 1 "$inspect" h.anepkg
contains mil-inspect "$mm"
check mil-lint 2 "$lint" h.anepkg
contains mil-lint "$mm"

finish
