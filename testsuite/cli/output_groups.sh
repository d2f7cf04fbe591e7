#!/usr/bin/env bash
# An output split-concat split into parts (the manifest's OutputGroups) is
# written by orion-run whole, under the name the .oir gave it, with the parts
# joined along the group's axis; the parts are not written. Before, orion-run
# wrote c.0.npy, c.1.npy and no c.npy.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
source "$(dirname "$0")/lib.sh"

# A [2,3] input a and a [2,1] input b, values 1..6 and 7..8.
python3 - <<'PY'
import struct
def npy(path, shape, values):
    d = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)
    pad = 128 - 10 - len(d) - 1
    open(path, "wb").write(b"\x93NUMPY\x01\x00\x76\x00" + d.encode() + b" " * pad + b"\n" + struct.pack("<%df" % len(values), *values))
npy("a.npy", (2, 3), [1, 2, 3, 4, 5, 6])
npy("b.npy", (2, 1), [7, 8])
PY
# Along the last axis (rows interleave) and along the first, with another output between.
printf 'func main(a: fp32[2,3], b: fp32[2,1]) {\n  x = relu(a);\n  y = relu(b);\n  c = concat(x, y, axis=1);\n  n = neg(b);\n  return c, n;\n}\n' >last.oir
check compile-last 0 "$orionc" --no-cache -w -o last.anepkg last.oir
check manifest-groups 0 grep -q "<key>OutputGroups</key>" last.anepkg/Manifest.plist
mkdir res
check run-last 0 "$run" last.anepkg --input a=a.npy --input b=b.npy --output-dir res
if [ -f res/c.npy ] && [ -f res/n.npy ] && [ "$(ls res | wc -l)" = 2 ]; then pass; else fail "run-last wrote $(ls res | tr '\n' ' ')"; fi
values() { python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); print(b[10:128].decode().strip(), struct.unpack("<%df" % ((len(b)-128)//4), b[128:]))' "$1"; }
got=$(values res/c.npy)
want="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), } (1.0, 2.0, 3.0, 7.0, 4.0, 5.0, 6.0, 8.0)"
if [ "$got" = "$want" ]; then pass; else fail "c.npy is $got, expected $want"; fi
printf 'func main(a: fp32[2,3]) {\n  x = relu(a);\n  y = neg(a);\n  c = concat(x, y, axis=0);\n  return c;\n}\n' >first.oir
check compile-first 0 "$orionc" --no-cache -w -o first.anepkg first.oir
mkdir res2
check run-first 0 "$run" first.anepkg --input a=a.npy --output-dir res2
got=$(values res2/c.npy)
want="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), } (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0)"
if [ "$got" = "$want" ]; then pass; else fail "first c.npy is $got, expected $want"; fi

finish
