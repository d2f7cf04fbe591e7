#!/usr/bin/env python3
"""Writes the small weight files the golden tests load (committed; rerun only to change them).
Plain struct/json, no numpy: the bytes are spelled out here."""
import json, struct, os

here = os.path.dirname(os.path.abspath(__file__))

def safetensors(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header).encode()
    with open(os.path.join(here, path), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)

def npy(path, descr, shape, payload):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d," % s for s in shape))
    pad = 64 - (10 + len(d) + 1) % 64
    header = (d + " " * pad + "\n").encode()
    with open(os.path.join(here, path), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload)

f16 = lambda *v: struct.pack("<%de" % len(v), *v)
safetensors("model.safetensors", {
    "w": ("F16", [2, 4], f16(*range(8))),
    "b": ("F32", [2], struct.pack("<2f", 0.5, -0.5)),
    "ids": ("I32", [2], struct.pack("<2i", 1, 0)),
})
npy("g.npy", "<f2", [4], f16(1, 1, 1, 1))
with open(os.path.join(here, "broken.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", 1000) + b"{}")
