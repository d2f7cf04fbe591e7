#!/usr/bin/env bash
# A package is never run unverified without a word. A directory that is an
# orion package (named *.anepkg, or holding a weight update's journal) but
# has lost its Manifest.plist is an error in orion-run, orion-inspect and
# orion-lint, whatever its weights hold; a bare model directory (model.mil,
# no manifest, not named *.anepkg) runs with one warning that nothing could
# be verified, which --no-verify silences. A malformed manifest is reported
# at its line (libxml2's). Before, deleting Manifest.plist and flipping a
# weight byte left orion-run exiting 0 with no word.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
lint=$(realpath "$4")
source "$(dirname "$0")/lib.sh"

printf 'func main(x: fp16[1,4]) {\n  param c: fp16[4] = normal(seed=1, std=0.1);\n  z = add(x, c);\n  return z;\n}\n' >m.oir
check compile 0 "$orionc" --no-cache -w -o m.anepkg m.oir
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy
mkdir res
flip_last_byte() { python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1]^=1; open(p,"wb").write(b)' "$1"; }

# Manifest deleted, a weight byte flipped: refused by every tool, with --no-verify too.
cp -r m.anepkg n.anepkg && rm n.anepkg/Manifest.plist && flip_last_byte n.anepkg/weights/weight.bin
msg="cannot read the package 'n.anepkg': it has no Manifest.plist, so nothing in it can be verified"
check nomanifest-run 1 "$run" n.anepkg --input x=x.npy --output-dir res
contains nomanifest-run "orion-run: error: $msg"
check nomanifest-run-no-verify 1 "$run" --no-verify n.anepkg --input x=x.npy --output-dir res
contains nomanifest-run-no-verify "orion-run: error: $msg"
check nomanifest-inspect 1 "$inspect" n.anepkg
contains nomanifest-inspect "orion-inspect: error: $msg"
check nomanifest-lint 2 "$lint" n.anepkg
contains nomanifest-lint "orion-lint: error: $msg"
check nomanifest-slash 1 "$run" n.anepkg/ --input x=x.npy --output-dir res
contains nomanifest-slash "it has no Manifest.plist, so nothing in it can be verified"
(cd n.anepkg && check nomanifest-dot 1 "$run" . --input x=../x.npy --output-dir ../res)
mv n.anepkg/out out
contains nomanifest-dot "cannot read the package '.': it has no Manifest.plist, so nothing in it can be verified"
if [ -z "$(ls res)" ]; then pass; else fail "nomanifest: orion-run wrote $(ls res)"; fi

# Not named *.anepkg but holding a weight update's journal: a package too.
cp -r m.anepkg j && rm j/Manifest.plist && : >j/weights/weight.bin.journal
check journal-inspect 1 "$inspect" j
contains journal-inspect "cannot read the package 'j': it has no Manifest.plist, so nothing in it can be verified"
# (orion-run first tries to complete the update, whose journal this one is not.)
check journal-run 1 "$run" j --input x=x.npy --output-dir res
contains journal-run "the package cannot be trusted"

# A bare model directory: one warning, exit 0; none with --no-verify.
cp -r m.anepkg bare && rm bare/Manifest.plist
warning="orion-run: warning: 'bare' is a model directory without a manifest: nothing in it could be verified (--no-verify runs it without this warning)"
check bare-run 0 "$run" bare --input x=x.npy --output-dir res
contains bare-run "$warning"
if [ "$(grep -c 'warning' out)" = 1 ] && [ -f res/z.npy ]; then pass; else fail "bare-run: not one warning and z.npy"; cat out; fi
rm -f res/*
check bare-no-verify 0 "$run" --no-verify bare --input x=x.npy --output-dir res
if [ ! -s out ] && [ -f res/z.npy ]; then pass; else fail "bare-no-verify: printed something"; cat out; fi
rm -f res/*

# A malformed manifest: where, by line, in every tool.
cp -r m.anepkg bad.anepkg
python3 - bad.anepkg/Manifest.plist <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().split("\n")
lines[6] = lines[6].replace("</key>", "</kee>")
open(p, "w").write("\n".join(lines))
PY
where="bad.anepkg/Manifest.plist:7: manifest is not well-formed XML: Opening and ending tag mismatch: key line 7 and kee"
check malformed-run 1 "$run" bad.anepkg --input x=x.npy --output-dir res
contains malformed-run "orion-run: error: $where"
check malformed-inspect 1 "$inspect" bad.anepkg
contains malformed-inspect "orion-inspect: error: $where"
check malformed-lint 2 "$lint" bad.anepkg
contains malformed-lint "orion-lint: error: $where"
printf '<?xml version="1.0"?>\n<plist version="1.0">\n<dict>\n' >bad.anepkg/Manifest.plist
check truncated-inspect 1 "$inspect" bad.anepkg
contains truncated-inspect "orion-inspect: error: bad.anepkg/Manifest.plist:4: manifest is not well-formed XML: "

finish
