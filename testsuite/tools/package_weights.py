#!/usr/bin/env python3
"""Writes a safetensors file of weights of a compiled package, with the standard library only.

    package_weights.py PACKAGE OUT.safetensors --current NAME...
    package_weights.py PACKAGE OUT.safetensors --random SEED NAME...

Each NAME is a weight of PACKAGE's manifest; its tensor gets the weight's
dtype and shape. --current takes the bytes the package holds now (to patch
them back later). --random makes new values, independent from weight to
weight: random.Random(SEED * 1000003 + i) for the i-th NAME gives the bytes,
with the exponent confined so that every value is finite, with magnitude
between 2^-8 and 2^-4 (fp16, fp32) and a random sign.
"""
import json
import plistlib
import random
import struct
import sys

ST_DTYPES = {"fp16": "F16", "fp32": "F32"}
# High byte of a little-endian fp16: sign kept, exponent 8..11 (2^-7 .. 2^-4 scaled by the mantissa).
FP16_HIGH = bytes((r & 0x8F) | 0x20 for r in range(256))
# Top byte of a little-endian fp32: sign kept, exponent 123 (with bit 0 from the next byte: 122..123).
FP32_TOP = bytes((r & 0x80) | 0x3D for r in range(256))


def weights_of(package):
    with open(package + "/Manifest.plist", "rb") as f:
        manifest = plistlib.load(f)
    found = {}
    for fn in manifest["Functions"]:
        for w in fn["Weights"]:
            found.setdefault(w["Name"], w)
    return found


def random_bytes(dtype, nbytes, seed):
    data = bytearray(random.Random(seed).randbytes(nbytes))
    if dtype == "fp16":
        data[1::2] = data[1::2].translate(FP16_HIGH)
    else:
        data[3::4] = data[3::4].translate(FP32_TOP)
    return bytes(data)


def main():
    package, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    seed = int(sys.argv[4]) if mode == "--random" else None
    names = sys.argv[5:] if mode == "--random" else sys.argv[4:]
    if mode not in ("--current", "--random") or not names:
        sys.exit(__doc__)
    weights = weights_of(package)
    with open(package + "/weights/weight.bin", "rb") as f:
        blob = f.read()
    header, pieces, offset = {}, [], 0
    for i, name in enumerate(names):
        w = weights.get(name)
        if w is None:
            sys.exit(f"{package}: no weight named '{name}'")
        if w["DType"] not in ST_DTYPES:
            sys.exit(f"{name}: dtype {w['DType']} is not supported here")
        n = w["Bytes"]
        if seed is None:
            data = blob[w["Offset"] + 64:w["Offset"] + 64 + n]
        else:
            data = random_bytes(w["DType"], n, seed * 1000003 + i)
        header[name] = {"dtype": ST_DTYPES[w["DType"]], "shape": list(w["Shape"]),
                        "data_offsets": [offset, offset + n]}
        pieces.append(data)
        offset += n
    text = json.dumps(header).encode()
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for p in pieces:
            f.write(p)


if __name__ == "__main__":
    main()
