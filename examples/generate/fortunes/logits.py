#!/usr/bin/env python3
"""examples/generate/fortunes/logits.py: checks on a model's logits, stdlib only.

  logits.py window TOKENS.bin T OUT.npy [START]
      the T uint16 ids of TOKENS.bin from START (default 0) as an int32
      [1, T] .npy: the `tokens` input of a prefill_T entry or a forward
  logits.py compare A.npy B.npy TOLERANCE
      the largest |a - b| of two fp32 logits files of one shape, relative to
      the largest |a|; exit 1 above TOLERANCE
  logits.py loss LOGITS.npy TOKENS.npy
      the mean cross-entropy of logits [1, T, V] predicting tokens 1..T-1
      (row t predicts token t+1), in nats
  logits.py argmax LOGITS.npy
      each row's most likely id, and its margin over the second

orion writes .npy files version 1.0, little-endian, C order.
"""
import ast
import math
import struct
import sys


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"logits.py: {path} is not a .npy file")
    (n,) = struct.unpack("<H", data[8:10])
    header = ast.literal_eval(data[10:10 + n].decode("latin1"))
    code = {"<f4": "f", "<i4": "i"}[header["descr"]]
    body = data[10 + n:]
    values = struct.unpack(f"<{len(body) // 4}{code}", body)
    return header["shape"], values


def write_npy_int32(path, shape, values):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = f"{{'descr': '<i4', 'fortran_order': False, 'shape': ({dims}), }}"
    head += " " * (128 - 10 - len(head) - 1) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack(f"<{len(values)}i", *values))


def rows(path):
    shape, values = read_npy(path)
    V = shape[-1]
    return [values[i:i + V] for i in range(0, len(values), V)]


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "window":
        T, start = int(args[1]), int(args[3]) if len(args) > 3 else 0
        with open(args[0], "rb") as f:
            f.seek(2 * start)
            ids = struct.unpack(f"<{T}H", f.read(2 * T))
        write_npy_int32(args[2], (1, T), ids)
    elif cmd == "compare":
        (sa, a), (sb, b) = read_npy(args[0]), read_npy(args[1])
        if sa != sb:
            sys.exit(f"logits.py: shapes {sa} and {sb} differ")
        scale = max(abs(x) for x in a) or 1.0
        diff = max(abs(x - y) for x, y in zip(a, b)) / scale
        print(f"logits {sa}: largest difference {diff:.3g} of the largest logit {scale:.4g}")
        sys.exit(0 if diff <= float(args[2]) else 1)
    elif cmd == "loss":
        _, ids = read_npy(args[1])
        total = 0.0
        logit_rows = rows(args[0])
        for t in range(len(ids) - 1):
            r = logit_rows[t]
            m = max(r)
            total += m + math.log(sum(math.exp(x - m) for x in r)) - r[ids[t + 1]]
        print(f"{total / (len(ids) - 1):.4f}")
    elif cmd == "argmax":
        for r in rows(args[0]):
            order = sorted(range(len(r)), key=lambda i: -r[i])
            print(order[0], f"{r[order[0]] - r[order[1]]:.6g}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
