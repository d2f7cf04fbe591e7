#!/usr/bin/env bash
# orion-run end to end: compile a program, run it on .npy inputs, and check
# the output file byte for byte against values worked out by hand; plus the
# input checks and usage errors.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
check() { # check NAME STATUS CMD...   (output in $tmp/out)
  local name=$1 want=$2
  shift 2
  "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name: exit $got, expected $want"; cat "$tmp/out"; fi
}
contains() {
  if grep -qF -- "$2" "$tmp/out"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: output lacks '$2'"; cat "$tmp/out"; fi
}
same_bytes() {
  if cmp -s "$2" "$3"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: $2 differs from $3"; od -An -tx1 "$2" | head; od -An -tx1 "$3" | head; fi
}
# A .npy v1 file: numpy's 128-byte header for a 1-D array of 4 elements, then the data.
npy4() { # npy4 DESCR DATA_PRINTF_ESCAPES FILE
  local dict="{'descr': '$1', 'fortran_order': False, 'shape': (4,), }"
  local pad=$((128 - 10 - ${#dict} - 1))
  { printf '\x93NUMPY\x01\x00\x76\x00'; printf '%s' "$dict"; printf "%${pad}s" ''; printf '\n'; printf "$2"; } >"$3"
}

# y = relu(x) * 2 + 1 on fp32: x = [-1, 0.5, 2, -3] gives [1, 2, 5, 1].
printf 'func main(x: fp32[4]) {\n  const two: fp32[] = 2;\n  const one: fp32[] = 1;\n  r = relu(x);\n  m = mul(r, two);\n  y = add(m, one);\n  return y;\n}\n' >"$tmp/f.oir"
check compile 0 "$orionc" --no-lint -o "$tmp/f.anepkg" "$tmp/f.oir"
npy4 '<f4' '\x00\x00\x80\xbf\x00\x00\x00\x3f\x00\x00\x00\x40\x00\x00\x40\xc0' "$tmp/x.npy"
npy4 '<f4' '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\xa0\x40\x00\x00\x80\x3f' "$tmp/want_y.npy"
mkdir "$tmp/out_dir"
check run-fp32 0 "$run" --numerics=fp32 "$tmp/f.anepkg" --input x="$tmp/x.npy" --output-dir "$tmp/out_dir"
same_bytes run-fp32 "$tmp/out_dir/y.npy" "$tmp/want_y.npy"
check run-ane 0 "$run" "$tmp/f.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_dir" --repeat 3
contains run-ane "orion-run: 3 runs"
same_bytes run-ane "$tmp/out_dir/y.npy" "$tmp/want_y.npy"

# fp16 program given fp32 data: converted on input; the output is fp16 [1, 2, 5, 1].
sed 's/fp32/fp16/g' "$tmp/f.oir" >"$tmp/h.oir"
check compile-fp16 0 "$orionc" --no-lint -o "$tmp/h.anepkg" "$tmp/h.oir"
npy4 '<f2' '\x00\x3c\x00\x40\x00\x45\x00\x3c' "$tmp/want_h.npy"
check run-convert 0 "$run" "$tmp/h.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_dir"
same_bytes run-convert "$tmp/out_dir/y.npy" "$tmp/want_h.npy"

# Input checks.
check missing-input 1 "$run" "$tmp/f.anepkg" --output-dir "$tmp/out_dir"
contains missing-input "orion-run: error: missing input 'x' (fp32[4]): give --input x=FILE.npy"
check extra-input 1 "$run" "$tmp/f.anepkg" --input "x=$tmp/x.npy" --input "q=$tmp/x.npy"
contains extra-input "orion-run: error: the program has no input 'q'"
npy4 '<i4' '\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00' "$tmp/i.npy"
check wrong-dtype 1 "$run" "$tmp/f.anepkg" --input "x=$tmp/i.npy"
contains wrong-dtype "orion-run: error: input 'x' ('$tmp/i.npy') holds int32 data, but the program takes fp32"
printf 'func main(x: fp32[2,2]) {\n  y = relu(x);\n  return y;\n}\n' >"$tmp/g.oir"
"$orionc" --no-lint -o "$tmp/g.anepkg" "$tmp/g.oir" 2>/dev/null
check wrong-shape 1 "$run" "$tmp/g.anepkg" --input "x=$tmp/x.npy"
contains wrong-shape "orion-run: error: input 'x' ('$tmp/x.npy') is fp32[4], but the program takes fp32[2,2]"
check missing-file 1 "$run" "$tmp/f.anepkg" --input "x=$tmp/none.npy"
contains missing-file "orion-run: error: cannot read '$tmp/none.npy'"
# --output-dir is made when missing, parents too; the default is PROGRAM.out in the current directory.
check new-output-dir 0 "$run" --numerics=fp32 "$tmp/f.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/none/deeper"
same_bytes new-output-dir "$tmp/none/deeper/y.npy" "$tmp/want_y.npy"
mkdir "$tmp/cwd"
check default-output-dir 0 bash -c "cd '$tmp/cwd' && '$run' --numerics=fp32 '$tmp/f.anepkg' --input 'x=$tmp/x.npy'"
same_bytes default-output-dir "$tmp/cwd/f.out/y.npy" "$tmp/want_y.npy"
if [ -e "$tmp/cwd/y.npy" ]; then failed=$((failed + 1)); echo "FAIL: default-output-dir wrote into the current directory"; else passed=$((passed + 1)); fi
: >"$tmp/a-file"
check output-dir-is-file 1 "$run" "$tmp/f.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/a-file/sub"
contains output-dir-is-file "orion-run: error: the output directory '$tmp/a-file/sub' is not a directory ('$tmp/a-file' is a file)"
# An output never replaces a file the run reads: y.npy given as the input x, in the output directory.
mkdir "$tmp/same"
cp "$tmp/x.npy" "$tmp/same/y.npy"
check overwrite-input 1 "$run" "$tmp/f.anepkg" --input "x=$tmp/same/y.npy" --output-dir "$tmp/same"
contains overwrite-input "orion-run: error: output 'y' would overwrite '$tmp/same/y.npy', which this run reads; give another --output-dir"
same_bytes overwrite-input "$tmp/same/y.npy" "$tmp/x.npy"

# ANE failure modes are errors before a run (naming the constraint), unless --no-ane-checks.
printf 'func main(a: fp32[1,2,4], b: fp32[1,2,4]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n  return n;\n}\n' >"$tmp/c.oir"
check compile-allow 0 "$orionc" --allow=ANE001 -w -o "$tmp/c.anepkg" "$tmp/c.oir"
dict="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s" ''; printf '\n'; head -c 32 /dev/zero; } >"$tmp/z.npy"
check ane-reject 1 "$run" "$tmp/c.anepkg" --input "a=$tmp/z.npy" --input "b=$tmp/z.npy" --output-dir "$tmp/out_dir"
contains ane-reject "error: concat would fail on the ANE: the ANE compiler rejects concat [ANE001]"
contains ane-reject "orion-run: note: --no-ane-checks runs it anyway on the CPU"
check ane-skip 0 "$run" --no-ane-checks "$tmp/c.anepkg" --input "a=$tmp/z.npy" --input "b=$tmp/z.npy" --output-dir "$tmp/out_dir"
# Each violation once: orion-run used to report a package's concats twice (its own rule and the linter's).
check ane-reject-again 1 "$run" "$tmp/c.anepkg" --input "a=$tmp/z.npy" --input "b=$tmp/z.npy" --output-dir "$tmp/out_dir"
reported=$(grep -c '\[ANE001\]' "$tmp/out") statements=$(grep -c ' = concat(' "$tmp/c.anepkg/model.mil")
if [ "$statements" -ge 1 ] && [ "$reported" = "$statements" ]; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAIL: ane-reject-once: $reported ANE001 errors for $statements concats"; cat "$tmp/out"; fi
# A bare directory gets every MIL rule, conv with a bias (ANE013) included.
mkdir -p "$tmp/convbias"
cat >"$tmp/convbias/model.mil" <<'MIL'
program(1.3)
{
    func main<ios18>(tensor<fp32, [1, 2, 1, 4]> x) {
        tensor<fp32, [2, 2, 1, 1]> w = const()[name = string("w"), val = tensor<fp32, [2, 2, 1, 1]>([1, 0, 0, 1])];
        tensor<fp32, [2]> cb = const()[name = string("cb"), val = tensor<fp32, [2]>([0, 0])];
        tensor<fp32, [1, 2, 1, 4]> y = conv(bias = cb, weight = w, x = x)[name = string("y")];
    } -> (y);
}
MIL
dict="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1, 4), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s" ''; printf '\n'; head -c 32 /dev/zero; } >"$tmp/z4.npy"
check ane-bare-conv-bias 1 "$run" "$tmp/convbias" --input "x=$tmp/z4.npy" --output-dir "$tmp/out_dir"
contains ane-bare-conv-bias "$tmp/convbias/model.mil:6:40: error: conv would fail on the ANE: conv takes no bias on the ANE path [ANE013]"
contains ane-bare-conv-bias "orion-run: note: --no-ane-checks runs it anyway on the CPU"
check ane-bare-conv-bias-skip 0 "$run" --no-ane-checks "$tmp/convbias" --input "x=$tmp/z4.npy" --output-dir "$tmp/out_dir"
# Two outputs whose surfaces were made unequal in the manifest.
printf 'func main(x: fp32[4]) {\n  a = relu(x);\n  b = exp(x);\n  return a, b;\n}\n' >"$tmp/two.oir"
check compile-two 0 "$orionc" -w -o "$tmp/two.anepkg" "$tmp/two.oir"
awk '/<key>SurfaceBytes<\/key>/ { n++ } { if (n == 4 && /<integer>49152<\/integer>/ && !done) { sub(/49152/, "65536"); done = 1 } print }' \
  "$tmp/two.anepkg/Manifest.plist" >"$tmp/m.plist" && cp "$tmp/m.plist" "$tmp/two.anepkg/Manifest.plist"
check ane-surfaces 1 "$run" "$tmp/two.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_dir"
contains ane-surfaces "[ANE002]"

# --check-finite: x * x with x = 300 overflows fp16 (90000 > 65504) in ane numerics; the error names the op,
# its MIL statement, the value and the element. fp32 numerics get further: exp(90000) is inf.
printf 'func main(x: fp16[4]) {\n  r = relu(x);\n  y = mul(r, r);\n  e = exp(y);\n  return e;\n}\n' >"$tmp/o.oir"
check compile-overflow 0 "$orionc" --no-lint -o "$tmp/o.anepkg" "$tmp/o.oir"
npy4 '<f4' '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x96\x43\x00\x00\x40\xc0' "$tmp/big.npy" # 1, 2, 300, -3
check check-finite 1 "$run" --check-finite "$tmp/o.anepkg" --input "x=$tmp/big.npy" --output-dir "$tmp/out_dir"
contains check-finite "$tmp/o.anepkg/model.mil:6:31: error: mul: result 'y' is inf at element 2 (index [2]), the first non-finite value of the run"
check check-finite-fp32 1 "$run" --check-finite --numerics=fp32 "$tmp/o.anepkg" --input "x=$tmp/big.npy" --output-dir "$tmp/out_dir"
contains check-finite-fp32 "model.mil:7:31: error: exp: result 'e' is inf at element 2 (index [2])"
check no-check-finite 0 "$run" "$tmp/o.anepkg" --input "x=$tmp/big.npy" --output-dir "$tmp/out_dir"

# --profile: every op kind of the program and its statements, after the runs.
check profile 0 "$run" --profile --repeat 3 "$tmp/o.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_dir"
contains profile "orion-run: profile of 3 runs"
for op in relu mul exp; do contains profile-$op "  $op  "; done
contains profile-slowest "slowest statements:"
contains profile-line "$tmp/o.anepkg/model.mil:6:31  mul 'y'"

# Usage.
check help 0 "$run" --help
contains help-output-dir-default "PROGRAM.out in the current directory"
contains help-check-finite "  --check-finite "
contains help-profile "  --profile "
contains help-backend "  --backend B            cpu (default: the CPU reference backend), check"
contains help "usage: orion-run [options] PROGRAM --input NAME=FILE.npy ..."
check ane-backend 2 "$run" --backend=ane "$tmp/f.anepkg"
contains ane-backend "orion-run: error: the ane backend is only available on macOS"
contains ane-backend "; backends built in: cpu, check"
check unknown-backend 2 "$run" --backend gpu "$tmp/f.anepkg"
contains unknown-backend "orion-run: error: unknown backend 'gpu' (backends built in: cpu, check)"
check empty-backend 2 "$run" --backend= "$tmp/f.anepkg"
contains empty-backend "orion-run: error: --backend= needs a backend name"
# The checking backend (fused and unfused runs, bits compared) gives the CPU backend's bytes.
mkdir "$tmp/out_check"
check run-check 0 "$run" --backend check -v "$tmp/h.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_check"
contains run-check "orion-run: backend check"
same_bytes run-check "$tmp/out_check/y.npy" "$tmp/want_h.npy"
check run-check-eq 0 "$run" --backend=check --numerics=fp32 "$tmp/f.anepkg" --input "x=$tmp/x.npy" --output-dir "$tmp/out_check"
same_bytes run-check-eq "$tmp/out_check/y.npy" "$tmp/want_y.npy"
check no-program 2 "$run"
check bad-input-option 2 "$run" "$tmp/f.anepkg" --input x
contains bad-input-option "orion-run: error: 'x' is not NAME=FILE.npy"
check bad-numerics 2 "$run" --numerics=int8 "$tmp/f.anepkg"
check missing-program 1 "$run" "$tmp/none.anepkg" --input "x=$tmp/x.npy"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
