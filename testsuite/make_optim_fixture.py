#!/usr/bin/python3
"""Writes the fixtures of test_train_optim.c and test_train_data.c into
testsuite/train/: optimizer trajectories computed by PyTorch (torch.optim.AdamW
and torch.optim.SGD, torch.nn.utils.clip_grad_norm_), GradScaler's scale
sequence, and the token windows of small data files in several dtypes.
Committed, so the test suite needs no PyTorch; rerun only when a case changes:

    /usr/bin/python3 testsuite/make_optim_fixture.py

Every number is written as Python's repr of an fp32 value (exact as a double),
so the C side reads back exactly what PyTorch computed.

GradScaler: this Debian torch has no CPU kernel for _amp_update_scale_ (the
CUDA one is in aten/src/ATen/native/cuda/AmpKernels.cu), so its update rule is
written out below in fp32 torch arithmetic, with the defaults read from
torch.cuda.amp.GradScaler's signature.
"""
import inspect
import json
import math
import os

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.join(here, "train")
os.makedirs(out_dir, exist_ok=True)
torch.set_num_threads(1)

STEPS = 20


def f32_list(t):
    return [float(x) for x in np.asarray(t, dtype=np.float32).reshape(-1)]


# ---- learning-rate schedule (docs/training.md: the formula stated there) ----

def schedule_lr(kind, lr, min_lr, warmup, steps, s):
    if warmup > 0 and s <= warmup:
        return lr * s / warmup
    if kind == "constant":
        return lr
    if steps <= warmup or s >= steps:
        return min_lr
    t, span = s - warmup, steps - warmup
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t / span))


# ---- optimizer trajectories -------------------------------------------------

PARAMS = [("w", (3, 4)), ("b", (4,)), ("emb", (5, 2)), ("gain", (3,))]


def make_params(rng):
    return [(name, rng.standard_normal(shape).astype(np.float32)) for name, shape in PARAMS]


def make_grads(rng, scale, accum):
    """grads[step][micro][param]: some steps large enough for clipping to act."""
    seq = []
    for s in range(STEPS):
        factor = scale * (3.0 if s % 4 == 1 else 0.3)
        seq.append([[(rng.standard_normal(shape) * factor).astype(np.float32) for _, shape in PARAMS]
                    for _ in range(accum)])
    return seq


def run_case(case, rng):
    init = make_params(rng)
    accum = case.get("accum", 1)
    grads = make_grads(rng, case.get("grad_scale", 1.0), accum)
    nonfinite_steps = set(case.get("nonfinite_steps", []))
    params = [torch.tensor(v.copy()) for _, v in init]
    wd = case["weight_decay"]
    # Weight decay on params of rank >= 2 only (orion's default rule), as two
    # param groups.
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=case["lr"], betas=(case["beta1"], case["beta2"]), eps=case["eps"])
    else:
        opt = torch.optim.SGD(groups, lr=case["lr"], momentum=case["momentum"], dampening=case["dampening"],
                              nesterov=case["nesterov"])
    scaler = Scaler(case["loss_scale"]) if "loss_scale" in case else None
    steps = []
    for s in range(1, STEPS + 1):
        lr = schedule_lr(case["schedule"], case["lr"], case["min_lr"], case["warmup"], STEPS, s)
        for g in opt.param_groups:
            g["lr"] = lr
        for i, p in enumerate(params):
            total = torch.zeros_like(p)
            for k in range(accum):
                micro = torch.tensor(grads[s - 1][k][i])
                if scaler is not None:
                    micro = micro * scaler.scale  # what a backward of the scaled loss gives
                    if s in nonfinite_steps and i == 1 and k == 0:
                        micro[2] = float("inf")
                total += micro
            p.grad = total / accum if accum > 1 else total
        record = {"lr": lr}
        skipped = False
        if scaler is not None:
            record["scale"] = float(scaler.scale)
            inv = scaler.scale.double().reciprocal().float()
            for p in params:
                p.grad.mul_(inv)
            skipped = not all(bool(torch.isfinite(p.grad).all()) for p in params)
            scaler.update(skipped)
            record["skipped"] = skipped
        if not skipped:
            if case["clip"] > 0:
                record["norm"] = float(torch.nn.utils.clip_grad_norm_(params, case["clip"]))
            opt.step()
        record["params"] = [f32_list(p.detach()) for p in params]
        steps.append(record)
    return {
        **case,
        "steps_total": STEPS,
        "params": [{"name": n, "shape": list(v.shape), "init": f32_list(v)} for n, v in init],
        "grads": [[[f32_list(g) for g in micro] for micro in step] for step in grads],
        "trajectory": steps,
    }


# ---- GradScaler ------------------------------------------------------------

SCALER_DEFAULTS = {k: v.default for k, v in inspect.signature(torch.cuda.amp.GradScaler).parameters.items()
                   if k != "enabled"}


class Scaler:
    """GradScaler.update's rule (_amp_update_scale_) on an fp32 scale."""

    def __init__(self, cfg):
        self.cfg = {**SCALER_DEFAULTS, **cfg}
        self.scale = torch.tensor(self.cfg["init_scale"], dtype=torch.float32)
        self.tracker = 0

    def update(self, found_inf):
        if found_inf:
            self.scale = self.scale * self.cfg["backoff_factor"]
            self.tracker = 0
        else:
            successful = self.tracker + 1
            if successful == self.cfg["growth_interval"]:
                grown = (self.scale.double() * self.cfg["growth_factor"]).float()
                if bool(torch.isfinite(grown)):
                    self.scale = grown
                self.tracker = 0
            else:
                self.tracker = successful


def scaler_case(name, cfg, pattern):
    s = Scaler(cfg)
    scales = []
    for ch in pattern:
        s.update(ch == "x")
        scales.append(float(s.scale))
    return {"name": name, **s.cfg, "pattern": pattern, "scales": scales}


# ---- token data ----------------------------------------------------------------

MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def permutation(seed, epoch, n):
    """docs/training.md's shuffle: Fisher-Yates from the last element down,
    splitmix64 seeded with seed ^ (golden * (epoch + 1)), rejection below
    2^64 mod m for an unbiased index."""
    state = seed ^ ((0x9E3779B97F4A7C15 * (epoch + 1)) & MASK64)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        m = i + 1
        threshold = (2**64 - m) % m
        while True:
            state, x = splitmix64(state)
            if x >= threshold:
                break
        j = x % m
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def batches(data, B, T, count, shuffle, seed):
    W = (len(data) - 1) // T
    out = []
    for batch in range(count):
        rows = []
        for b in range(B):
            row = batch * B + b
            w = permutation(seed, row // W, W)[row % W] if shuffle else row % W
            rows.append(w)
        out.append({"windows": rows,
                    "tokens": [int(x) for w in rows for x in data[w * T:w * T + T]],
                    "targets": [int(x) for w in rows for x in data[w * T + 1:w * T + T + 1]]})
    return out


def write_data_fixture():
    rng = np.random.default_rng(13)
    vocab = 50
    data = rng.integers(0, vocab, size=47)
    for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]:
        np.save(os.path.join(out_dir, f"tokens_{dt}.npy"), data.astype(dt))
    data.astype("<u2").tofile(os.path.join(out_dir, "tokens.bin"))
    np.save(os.path.join(out_dir, "bad_float.npy"), data.astype(np.float32))
    np.save(os.path.join(out_dir, "bad_rank2.npy"), data[:46].reshape(2, 23).astype(np.int32))
    bad = data.astype(np.int64)
    bad[17] = vocab
    np.save(os.path.join(out_dir, "bad_range.npy"), bad)
    neg = data.astype(np.int64)
    neg[3] = -1
    np.save(os.path.join(out_dir, "bad_negative.npy"), neg)
    data[:5].astype(np.int32).tofile(os.path.join(out_dir, "bad_odd.bin"))  # 20 bytes: even; make it odd
    with open(os.path.join(out_dir, "bad_odd.bin"), "ab") as f:
        f.write(b"\x01")
    np.save(os.path.join(out_dir, "bad_short.npy"), data[:5].astype(np.int32))
    B, T, seed = 3, 5, 1234
    W = (len(data) - 1) // T
    fixture = {
        "vocab": vocab, "batch": B, "seq": T, "seed": seed, "length": len(data), "windows": W,
        "data": [int(x) for x in data],
        "ordered": batches(data, B, T, 7, False, 0),
        "shuffled": batches(data, B, T, 7, True, seed),
        "permutations": [permutation(seed, e, W) for e in range(3)],
        "splitmix64_seed0": [],
    }
    st = 0
    for _ in range(4):
        st, x = splitmix64(st)
        fixture["splitmix64_seed0"].append(str(x))  # beyond a double's exact range: as text
    with open(os.path.join(out_dir, "data_fixture.json"), "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")


def main():
    rng = np.random.default_rng(2026)
    cases = [
        {"name": "adamw_warmup_cosine_clip", "optimizer": "adamw", "lr": 1e-2, "min_lr": 1e-3, "warmup": 5,
         "schedule": "cosine", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0},
        {"name": "adamw_constant", "optimizer": "adamw", "lr": 3e-3, "min_lr": 0.0, "warmup": 0,
         "schedule": "constant", "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "weight_decay": 0.01, "clip": 0.0},
        {"name": "adamw_accum3", "optimizer": "adamw", "lr": 1e-2, "min_lr": 0.0, "warmup": 2,
         "schedule": "cosine", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.05, "clip": 2.0,
         "accum": 3},
        {"name": "adamw_loss_scale", "optimizer": "adamw", "lr": 1e-2, "min_lr": 1e-3, "warmup": 3,
         "schedule": "cosine", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0,
         "loss_scale": {"init_scale": 1024.0, "growth_interval": 4}, "nonfinite_steps": [4, 9, 10]},
        {"name": "sgd_plain", "optimizer": "sgd", "lr": 0.1, "min_lr": 0.0, "warmup": 0, "schedule": "constant",
         "momentum": 0.0, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0, "clip": 0.0},
        {"name": "sgd_momentum_warmup_clip", "optimizer": "sgd", "lr": 0.05, "min_lr": 0.0, "warmup": 3,
         "schedule": "constant", "momentum": 0.9, "dampening": 0.0, "nesterov": False, "weight_decay": 0.01,
         "clip": 0.5},
        {"name": "sgd_nesterov_cosine", "optimizer": "sgd", "lr": 0.05, "min_lr": 0.005, "warmup": 0,
         "schedule": "cosine", "momentum": 0.9, "dampening": 0.0, "nesterov": True, "weight_decay": 0.02,
         "clip": 1.0},
        {"name": "sgd_dampening", "optimizer": "sgd", "lr": 0.05, "min_lr": 0.0, "warmup": 0,
         "schedule": "constant", "momentum": 0.5, "dampening": 0.3, "nesterov": False, "weight_decay": 0.0,
         "clip": 0.0},
    ]
    fixture = {
        "torch_version": torch.__version__,
        "optimizer_cases": [run_case(c, rng) for c in cases],
        "scaler_defaults": SCALER_DEFAULTS,
        "scaler_cases": [
            scaler_case("defaults", {}, "..x...x" + "." * 8),
            scaler_case("interval3", {"init_scale": 65536.0, "growth_interval": 3}, "...x..x....xx......x.."),
            scaler_case("factors", {"init_scale": 3.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                                    "growth_interval": 2}, "..x.x...xxx....."),
            scaler_case("no_growth_to_inf", {"init_scale": 2.0**127, "growth_interval": 1}, "....x..."),
        ],
    }
    with open(os.path.join(out_dir, "optim_fixture.json"), "w") as f:
        json.dump(fixture, f, indent=None, separators=(",", ":"))
        f.write("\n")
    write_data_fixture()


if __name__ == "__main__":
    main()
