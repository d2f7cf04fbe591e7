#!/usr/bin/env bash
# One rule for symbolic links in every tool (pkgio/pkg_paths.c): a file of
# a package reached through a link that leads outside the package is refused
# by orion-run, orion-inspect, orion-lint and orion-run patch with the same
# message, for Manifest.plist, model.mil, weights/weight.bin and a linked
# weights/ directory, and no diagnostic shows what the link's target holds.
# Before, a linked model.mil was accepted by all three and lint echoed the
# target's first line; a linked weight.bin passed inspect and lint.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
lint=$(realpath "$4")
source "$(dirname "$0")/lib.sh"

printf 'func main(x: fp16[1,4]) {\n  param c: fp16[4] = normal(seed=1, std=0.1);\n  z = add(x, c);\n  return z;\n}\n' >m.oir
check compile 0 "$orionc" --no-cache -w -o m.anepkg m.oir
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy
npy16 '(4,)' '\x00\x3c\x00\x3c\x00\x3c\x00\x3c' c.npy
mkdir outside res
echo 'SECRET-LINE-42 not for any diagnostic' >outside/secret.txt
secret=$(realpath outside/secret.txt)
no_secret() { if grep -q SECRET out; then fail "$1: a diagnostic shows the link target's content"; cat out; else pass; fi; }

# linked KIND FILE TARGET [SHOWN SEEN]: l.anepkg with FILE replaced by a link
# to TARGET; every tool refuses SHOWN (FILE) as leading to SEEN (TARGET).
linked() {
  local kind=$1 file=$2 target=$3 shown=${4:-$2} seen=${5:-$3}
  rm -rf l.anepkg && cp -r m.anepkg l.anepkg && rm -rf "l.anepkg/$file" && ln -s "$target" "l.anepkg/$file"
  local msg="l.anepkg/$shown: leads outside the package (a symbolic link to '$seen')"
  check "$kind-run" 1 "$run" l.anepkg --input x=x.npy --output-dir res
  contains "$kind-run" "$msg"
  no_secret "$kind-run"
  check "$kind-inspect" 1 "$inspect" l.anepkg
  contains "$kind-inspect" "$msg"
  no_secret "$kind-inspect"
  check "$kind-lint" 2 "$lint" l.anepkg
  contains "$kind-lint" "$msg"
  no_secret "$kind-lint"
  check "$kind-patch" 1 "$run" patch l.anepkg --weight c=c.npy
  contains "$kind-patch" "$msg"
  no_secret "$kind-patch"
  if [ -z "$(ls res)" ] && cmp -s outside/secret.txt <(echo 'SECRET-LINE-42 not for any diagnostic'); then pass
  else fail "$kind: something was written"; fi
}
linked mil model.mil "$secret"
# A relative link out, through the package's parent.
linked relative model.mil ../outside/secret.txt model.mil "$secret"
linked weights weights/weight.bin "$secret"
linked manifest Manifest.plist "$secret"
# A faithful copy outside is refused too: where a file lives is the rule, not what it holds.
cp m.anepkg/model.mil outside/model.mil
cp -r m.anepkg/weights outside/weights
linked mil-copy model.mil "$(realpath outside/model.mil)"
linked weights-dir weights "$(realpath outside/weights)" weights/weight.bin "$(realpath outside/weights/weight.bin)"
# A dangling link out is refused the same way, before anything reads it.
linked dangling model.mil "$(realpath outside)/missing.mil"

# A link that stays inside the package is no escape.
rm -rf l.anepkg && cp -r m.anepkg l.anepkg && mv l.anepkg/model.mil l.anepkg/real.mil && ln -s real.mil l.anepkg/model.mil
check inside-inspect 0 "$inspect" l.anepkg
check inside-run 0 "$run" l.anepkg --input x=x.npy --output-dir res
rm -f res/*

# A bare model directory: its model.mil by the same rule in orion-run; a
# .mil file's BLOBFILE in orion-lint too.
mkdir bare && ln -s "$secret" bare/model.mil
check bare-run 1 "$run" bare --input x=x.npy --output-dir res
contains bare-run "bare/model.mil: leads outside the package (a symbolic link to '$secret')"
no_secret bare-run
mkdir lintbare && cp m.anepkg/model.mil lintbare/ && ln -s "$(realpath outside/weights)" lintbare/weights
check bare-lint 1 "$lint" lintbare/model.mil
contains bare-lint "cannot read the weight file 'weights/weight.bin': leads outside the package (a symbolic link to '$(realpath outside/weights/weight.bin)')"

finish
