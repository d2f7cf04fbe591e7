#!/usr/bin/python3
"""Fixtures of orion-run train's loop against PyTorch (not run by the test suite).

Writes into testsuite/train/model/: the start weights of bigram.oir
(bigram_W.npy, bigram_b.npy), its token data (bigram_tokens.npy, 61 tokens of a
vocabulary of 8, so that 20 steps of 2 rows of 4 tokens wrap around the 15
windows) and bigram_fixture.json: the loss of every step (the forward's loss
before the update) of 20-step runs of the same model in torch float32, fed the
windows in order as docs/training.md defines them, with the schedule,
clipping and weight-decay rules written out as the runtime implements them
(test_train_optim checks those rules against torch's own schedulers).
Needs numpy and torch: /usr/bin/python3 testsuite/make_train_fixture.py
"""
import json
import math
import os

import numpy as np
import torch

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train", "model")
B, T, V, STEPS = 2, 4, 8, 20

RUNS = [
    {"name": "sgd", "optimizer": "sgd", "lr": 0.5, "momentum": 0.9, "weight_decay": 0.0, "warmup": 0,
     "schedule": "constant", "min_lr": 0.0, "clip": 0.0, "accum": 1},
    {"name": "adamw", "optimizer": "adamw", "lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
     "weight_decay": 0.01, "warmup": 3, "schedule": "cosine", "min_lr": 0.005, "clip": 1.0, "accum": 1},
    {"name": "adamw_accum", "optimizer": "adamw", "lr": 0.02, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6,
     "weight_decay": 0.1, "warmup": 0, "schedule": "constant", "min_lr": 0.0, "clip": 0.0, "accum": 2},
]


def schedule_lr(run, s):
    k, n, lr, lo = run["warmup"], STEPS, run["lr"], run["min_lr"]
    if k and s <= k:
        return lr * s / k
    if run["schedule"] == "constant":
        return lr
    if s >= n:
        return lo
    return lo + (lr - lo) * (1 + math.cos(math.pi * (s - k) / (n - k))) / 2


def batch(data, index):
    w = len(data[:-1]) // T
    rows = [(index * B + b) % w for b in range(B)]
    tok = np.stack([data[r * T:r * T + T] for r in rows])
    tgt = np.stack([data[r * T + 1:r * T + T + 1] for r in rows])
    return torch.tensor(tok, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)


def trajectory(run, W0, b0, data):
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    if run["optimizer"] == "sgd":
        opt = torch.optim.SGD([{"params": [W], "weight_decay": run["weight_decay"]},
                               {"params": [b], "weight_decay": 0.0}], lr=run["lr"], momentum=run["momentum"])
    else:
        opt = torch.optim.AdamW([{"params": [W], "weight_decay": run["weight_decay"]},
                                 {"params": [b], "weight_decay": 0.0}], lr=run["lr"],
                                betas=(run["beta1"], run["beta2"]), eps=run["eps"])
    losses = []
    for s in range(1, STEPS + 1):
        lr = schedule_lr(run, s)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        total = 0.0
        grads = [torch.zeros_like(W), torch.zeros_like(b)]
        for k in range(run["accum"]):
            tok, tgt = batch(data, (s - 1) * run["accum"] + k)
            x = torch.nn.functional.one_hot(tok, V).to(torch.float32)
            loss = torch.nn.functional.cross_entropy((x @ W + b).reshape(-1, V), tgt.reshape(-1))
            gW, gb = torch.autograd.grad(loss, [W, b])
            grads[0] += gW
            grads[1] += gb
            total += float(loss)
        W.grad = grads[0] / run["accum"]
        b.grad = grads[1] / run["accum"]
        if run["clip"] > 0:
            torch.nn.utils.clip_grad_norm_([W, b], run["clip"])
        opt.step()
        losses.append(total / run["accum"])
    return losses


def main():
    rng = np.random.default_rng(20261202)
    W0 = (rng.standard_normal((V, V)) * 0.5).astype(np.float32)
    b0 = np.full(V, 0.1, dtype=np.float32)
    data = rng.integers(0, V, size=61).astype(np.int32)
    np.save(os.path.join(HERE, "bigram_W.npy"), W0)
    np.save(os.path.join(HERE, "bigram_b.npy"), b0)
    np.save(os.path.join(HERE, "bigram_tokens.npy"), data)
    out = {"batch": B, "seq": T, "vocab": V, "steps": STEPS, "runs": []}
    for run in RUNS:
        r = dict(run)
        r["losses"] = trajectory(run, W0, b0, data)
        out["runs"].append(r)
    with open(os.path.join(HERE, "bigram_fixture.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
