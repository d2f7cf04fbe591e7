#!/usr/bin/env python3
"""Compares orion-run train's results with the PyTorch fixtures of
testsuite/make_train_model_fixtures.py, with the standard library only.

    check_train_torch.py grads FIXTURE.json START.safetensors GRADS.safetensors EXPORT.safetensors LR LOG.jsonl TOL
        The export is the weights after one plain SGD step of learning rate LR
        from START, so orion's gradient is (start - export) / LR. Every param's
        gradient must be within TOL of PyTorch's, relative to the largest
        magnitude of PyTorch's gradient of that param:
            max_i |g_i - ref_i| / max_i |ref_i| <= TOL
        and the step's logged loss within TOL relative of the fixture's.
    check_train_torch.py losses FIXTURE.json RUN LOG.jsonl TOL
        Every logged step's loss within TOL relative of PyTorch's loss of that
        step in the fixture's run RUN: |loss - ref| / |ref| <= TOL. TOL "fp16"
        is the tolerance of an fp16 program derived in docs/training.md
        ("Against PyTorch"): (1 + sqrt(s - 1)) * 2^-11 at step s.
    check_train_torch.py npy16 IN.npy OUT.npy
        Writes the fp32 array IN.npy as fp16 (for the fp16 variants' inputs).

Prints the largest relative difference measured; exits 1 when over TOL.
"""
import json
import math
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack_from("<Q", blob)[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {t['dtype']}, not F32")
        lo, hi = t["data_offsets"]
        out[name] = struct.unpack_from(f"<{(hi - lo) // 4}f", blob, 8 + n + lo)
    return out


def read_log(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def grads(fixture, start, ref_grads, export, lr, log, tol):
    fix = json.load(open(fixture))
    p0, ref, p1 = read_safetensors(start), read_safetensors(ref_grads), read_safetensors(export)
    if set(p0) != set(ref) or set(p1) != set(ref):
        sys.exit(f"params differ: start {sorted(p0)}, fixture {sorted(ref)}, export {sorted(p1)}")
    ok, worst = True, 0.0
    for name in sorted(ref):
        scale = max(abs(r) for r in ref[name])
        err = max(abs((a - b) / lr - r) for a, b, r in zip(p0[name], p1[name], ref[name]))
        rel = err / scale
        worst = max(worst, rel)
        if rel > tol:
            print(f"{name}: gradient off by {rel:.3g} of its largest element {scale:.3g}")
            ok = False
    steps = read_log(log)
    loss_rel = abs(steps[0]["loss"] - fix["loss"]) / abs(fix["loss"])
    if len(steps) != 1 or loss_rel > tol:
        print(f"loss {steps[0]['loss']} against {fix['loss']} ({len(steps)} steps logged)")
        ok = False
    print(f"{len(ref)} gradients: largest relative difference {worst:.3g}; loss {loss_rel:.3g}")
    return ok


def losses(fixture, run, log, tol):
    ref = json.load(open(fixture))["runs"][run]["losses"]
    steps = read_log(log)
    got = [s["loss"] for s in steps]
    if [s["step"] for s in steps] != list(range(1, len(ref) + 1)) or any(s["skipped"] for s in steps):
        print(f"steps {[s['step'] for s in steps]}, skipped {[s['step'] for s in steps if s['skipped']]}")
        return False
    rels = [abs(a - r) / abs(r) for a, r in zip(got, ref)]
    # fp16: one fresh rounding's worth (u) plus the drift of s - 1 updates, each
    # off by independent roundings of about u: a random walk (docs/training.md).
    tols = [(1 + math.sqrt(s - 1)) * 2.0 ** -11 if tol == "fp16" else float(tol) for s in range(1, len(ref) + 1)]
    worst = max(rels)
    used = max(r / t for r, t in zip(rels, tols))
    print(f"{run}: {len(ref)} losses, largest relative difference {worst:.3g} at step {rels.index(worst) + 1}"
          f" ({got[0]:.6f} -> {got[-1]:.6f}); {used:.3g} of the tolerance")
    return used <= 1.0


def npy16(src, dst):
    with open(src, "rb") as f:
        blob = f.read()
    n = struct.unpack_from("<H", blob, 8)[0]
    header = blob[10:10 + n].decode()
    if "'<f4'" not in header:
        sys.exit(f"{src}: not fp32")
    count = (len(blob) - 10 - n) // 4
    vals = struct.unpack_from(f"<{count}f", blob, 10 + n)
    text = header.strip().replace("'<f4'", "'<f2'")
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    with open(dst, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()
                + struct.pack(f"<{count}e", *vals))


def main(argv):
    if argv[1] == "npy16":
        npy16(argv[2], argv[3])
        return 0
    if argv[1] == "grads":
        ok = grads(argv[2], argv[3], argv[4], argv[5], float(argv[6]), argv[7], float(argv[8]))
    else:
        ok = losses(argv[2], argv[3], argv[4], argv[5])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
