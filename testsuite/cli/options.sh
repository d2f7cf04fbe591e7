#!/usr/bin/env bash
# The command-line conventions every tool shares (driver/cli_options.c):
# --opt=value and --opt value, switches that reject a value, exact names with
# a did-you-mean for misspelt ones, single-dash words, "--", and -o - for text.
#
#   options.sh ORIONC ORION_RUN ORION_INSPECT ORION_LINT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
lint=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
lacks() { if grep -qF -- "$2" out; then fail "$1: output has '$2'"; cat out; else pass; fi; }

printf 'func main(x: fp32[4]) {\n  const two: fp32[] = 2;\n  y = mul(x, two);\n  return y;\n}\n' >f.oir
check compile 0 "$orionc" --no-lint -o f.anepkg f.oir
dict="{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s\n" ''
  printf '\x00\x00\x80\xbf\x00\x00\x00\x3f\x00\x00\x00\x40\x00\x00\x40\xc0'; } >x.npy

# Both spellings of a value, in every tool.
mkdir eq sep
check run-eq 0 "$run" --numerics=fp32 --backend=cpu --repeat=2 --output-dir=eq --input=x=x.npy f.anepkg
check run-sep 0 "$run" --numerics fp32 --backend cpu --repeat 2 --output-dir sep --input x=x.npy f.anepkg
same_bytes run-spellings eq/y.npy sep/y.npy
check orionc-eq 0 "$orionc" --emit=mil --target=ios16 --chip=m1 f.oir
cp out mil-eq
check orionc-sep 0 "$orionc" --emit mil --target ios16 --chip m1 f.oir
same_bytes orionc-spellings out mil-eq
check orionc-error-limit-sep 0 "$orionc" -ferror-limit 3 --emit none f.oir
check orionc-output-attached 0 "$orionc" --emit=oir -oattached.oir f.oir
check orionc-output-attached-file 0 test -s attached.oir
check lint-format-sep 0 "$lint" --format json f.oir
contains lint-format-sep '"rule"'
check lint-explain-eq 0 "$lint" --explain=ANE010
contains lint-explain-eq "ANE010"
# The package-shaping options are recorded in one spelling whichever was given.
check orionc-record-sep 0 "$orionc" --no-cache --chip m4 --allow ANE016 -o rec.anepkg f.oir
check orionc-record-args 0 grep -A3 "<key>CompileArguments</key>" rec.anepkg/Manifest.plist
contains orionc-record-args "<string>--chip=m4</string>"
contains orionc-record-args "<string>--allow=ANE016</string>"

# A value that is missing, empty, or where a name belongs a file.
check run-missing 2 "$run" f.anepkg --numerics
contains run-missing "orion-run: error: --numerics needs a value, e.g. --numerics=fp32"
check run-empty 2 "$run" --output-dir= f.anepkg
contains run-empty "orion-run: error: --output-dir= needs a value"
check orionc-chip-file 2 "$orionc" --chip f.oir
contains orionc-chip-file "orionc: error: --chip needs a value, e.g. --chip=m4"
check lint-explain-file 2 "$lint" --explain f.oir
contains lint-explain-file "orion-lint: error: --explain needs a rule id, e.g. --explain ANE007"
check run-backend-file 2 "$run" --backend f.anepkg
contains run-backend-file "orion-run: error: --backend needs a backend name"
check orionc-o-missing 2 "$orionc" f.oir -o
contains orionc-o-missing "orionc: error: -o needs a path"
check orionc-bad-value-sep 2 "$orionc" --emit llvm f.oir
contains orionc-bad-value-sep "orionc: error: unknown --emit kind 'llvm' (expected oir, mil, dot or none)"

# Switches take no value.
check run-switch-value 2 "$run" --profile=yes f.anepkg
contains run-switch-value "orion-run: error: --profile takes no value ('--profile=yes')"
check orionc-switch-value 2 "$orionc" --no-cache=1 f.oir
contains orionc-switch-value "orionc: error: --no-cache takes no value ('--no-cache=1')"
check inspect-switch-value 2 "$inspect" --no-weights=0 f.anepkg
contains inspect-switch-value "orion-inspect: error: --no-weights takes no value"
check lint-switch-value 2 "$lint" --list=all
contains lint-switch-value "orion-lint: error: --list takes no value"
check patch-switch-value 2 "$run" patch --recover=now f.anepkg
contains patch-switch-value "orion-run patch: error: --recover takes no value"

# Misspelt options: did-you-mean, exit 2; no abbreviations.
check run-typo 2 "$run" --numerix fp32 f.anepkg
contains run-typo "orion-run: error: unknown option '--numerix'"
contains run-typo "note: did you mean '--numerics'?"
check run-typo-eq 2 "$run" --outptu-dir=o f.anepkg
contains run-typo-eq "orion-run: error: unknown option '--outptu-dir'"
contains run-typo-eq "note: did you mean '--output-dir'?"
check run-one-dash 2 "$run" -numerics=fp32 f.anepkg
contains run-one-dash "orion-run: error: unknown option '-numerics'"
contains run-one-dash "note: did you mean '--numerics'?"
check run-abbrev 2 "$run" --prof f.anepkg
contains run-abbrev "orion-run: error: unknown option '--prof'"
contains run-abbrev "note: did you mean '--profile'?"
check orionc-typo 2 "$orionc" --emti=mil f.oir
contains orionc-typo "note: did you mean '--emit'?"
check orionc-werror-typo 2 "$orionc" -Werorr f.oir
contains orionc-werror-typo "orionc: error: unknown option '-Werorr'"
contains orionc-werror-typo "note: did you mean '-Werror'?"
check orionc-unrelated 2 "$orionc" --frobnicate f.oir
lacks orionc-unrelated "did you mean"
check orionc-short 2 "$orionc" -x f.oir
contains orionc-short "orionc: error: unknown option '-x'"
check orionc-level 2 "$orionc" -O3 f.oir
contains orionc-level "orionc: error: unknown optimization level '-O3' (expected -O0 or -O1)"
check inspect-typo 2 "$inspect" --no-weigths f.anepkg
contains inspect-typo "note: did you mean '--no-weights'?"
check lint-typo 2 "$lint" --fail-no=warning f.oir
contains lint-typo "note: did you mean '--fail-on'?"
check patch-typo 2 "$run" patch f.anepkg --wieghts=w.safetensors
contains patch-typo "orion-run patch: error: unknown option '--wieghts'"
contains patch-typo "note: did you mean '--weights'?"

# Bundled short options, "--" and "-".
check orionc-bundle 0 "$orionc" -vw --no-cache -o b.anepkg f.oir
contains orionc-bundle "orionc: wrote b.anepkg"
cp f.oir ./-dash.oir
check orionc-dashdash 0 "$orionc" --emit=oir -- -dash.oir
contains orionc-dashdash "y: fp32[4] = mul(x, two);"
check orionc-stdin 0 sh -c "\"$orionc\" --emit oir - <f.oir"
contains orionc-stdin "y: fp32[4] = mul(x, two);"

# -o - is standard output for text, a usage error for a package.
for kind in oir mil dot; do
  check "stdout-$kind" 0 sh -c "\"$orionc\" --emit=$kind -o - f.oir >$kind.stdout"
  "$orionc" --emit=$kind f.oir >$kind.plain
  same_bytes "stdout-$kind" $kind.stdout $kind.plain
done
check stdout-no-file 1 test -e ./-
check stdout-package 2 "$orionc" -o - f.oir
contains stdout-package "orionc: error: -o - writes text to standard output; a package is a directory"

finish
