#!/usr/bin/env python3
"""Writes a safetensors file for tests, with the standard library only.

    make_safetensors.py OUT.safetensors NAME=DTYPE:SHAPE:VALUES ...

DTYPE is F16, F32, F64, BF16, I32, I8 or U8; SHAPE is dims joined by 'x'
('768', '2304x768', '' for a scalar); VALUES is 'seed=N' (uniform values in
[-0.1, 0.1) from Python's random.Random(N)), 'fill=V', 'nan-at=K' (zeros but
a NaN at index K) or a comma-separated list of every value.
"""
import json
import random
import struct
import sys

FORMATS = {"F16": "e", "F32": "f", "F64": "d", "I32": "i", "I8": "b", "U8": "B"}


def values(spec, n):
    kind, _, arg = spec.partition("=")
    if kind == "seed":
        r = random.Random(int(arg))
        return [r.uniform(-0.1, 0.1) for _ in range(n)]
    if kind == "fill":
        return [float(arg)] * n
    if kind == "nan-at":
        v = [0.0] * n
        v[int(arg)] = float("nan")
        return v
    v = [float(x) for x in spec.split(",")]
    if len(v) != n:
        sys.exit(f"{len(v)} values for {n} elements")
    return v


def pack(dtype, vals):
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in vals)
    if dtype in ("I32", "I8", "U8"):
        vals = [int(v) for v in vals]
    return struct.pack("<%d%s" % (len(vals), FORMATS[dtype]), *vals)


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    header, blobs, offset = {}, [], 0
    for spec in specs:
        name, _, rest = spec.partition("=")
        dtype, shape, vals = rest.split(":", 2)
        dims = [int(d) for d in shape.split("x")] if shape else []
        n = 1
        for d in dims:
            n *= d
        data = pack(dtype, values(vals, n))
        header[name] = {"dtype": dtype, "shape": dims, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


main()
