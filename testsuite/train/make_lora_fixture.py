#!/usr/bin/python3
"""LoRA training fixtures against PyTorch (not run by the test suite).

The llama-style model of testsuite/train/models/llama.oir with LoRA adapters
on the q and v projections of both blocks, as orionc --train
--lora='layers.*.self_attn.q_proj:4:8' --lora='*.v_proj:2' compiles it:
PEFT's formula y = x W^T + (alpha / r) (x A^T) B^T, A [r, in], B [out, r];
q_proj rank 4, alpha 8; v_proj rank 2, alpha 2. The base weights are
llama.safetensors (frozen). It writes, into testsuite/train/models/:

- llama_lora_init.safetensors: start adapters, PEFT keys
  (base_model.model.MODULE.lora_A.weight, ...), fp32, A and B both from a
  seeded normal(0, 0.1) (PEFT's own init has B = 0, whose A gradient is 0:
  no test of it);
- llama_lora_grads.safetensors: the gradient of step 1's loss (windows 0
  and 1 of tokens.bin) with respect to every adapter tensor, same keys;
- llama_lora_fixture.json: that loss, and the losses of 20-step runs from
  the start adapters with AdamW (lr 0.01, betas 0.9, 0.999, eps 1e-8, weight
  decay 0.01: every adapter is a matrix) and SGD (lr 0.1, momentum 0.9).

float64 from the fp32 values, one thread: a rerun writes the same bytes.
Needs numpy and torch: /usr/bin/python3 testsuite/train/make_lora_fixture.py [DIR]
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import make_train_model_fixtures as base  # noqa: E402  (the model, the batches, the safetensors writer)

HERE = sys.argv[1] if len(sys.argv) > 1 else base.COMMITTED
STEPS = 20
ADAPTED = {"q": (4, 8.0), "v": (2, 2.0)}  # projection: (rank, alpha)
RUNS = {
    "adamw": {"optimizer": "adamw", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01},
    "sgd": {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9},
}


def key(module, ab):
    return f"base_model.model.{module}.lora_{ab}.weight"


def read_safetensors(path):
    import struct
    blob = open(path, "rb").read()
    n = struct.unpack_from("<Q", blob)[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + lo:8 + n + hi], dtype="<f4").reshape(t["shape"])
    return out


def lora_loss(w, a, tok, tgt, fixed):
    """llama_loss of make_train_model_fixtures.py with LoRA on q_proj and v_proj."""
    B, T, V, D, HD = base.B, base.T, base.V, base.D, base.HD

    def rms(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g

    def rope(t):
        rot = torch.cat([-t[..., HD // 2:], t[..., :HD // 2]], dim=-1)
        return t * fixed["cos"] + rot * fixed["sin"]

    def proj(n, s, which):
        y = F.linear(n, w[s + f"self_attn.{which}_proj.weight"])
        if which in ADAPTED:
            r, alpha = ADAPTED[which]
            m = s + f"self_attn.{which}_proj"
            y = y + (alpha / r) * F.linear(F.linear(n, a[key(m, "A")]), a[key(m, "B")])
        return y
    x = w["embed_tokens.weight"][tok]
    for i in range(2):
        s = f"layers.{i}."
        n = rms(x, w[s + "input_layernorm.weight"])
        q, k, v = (base.heads(proj(n, s, p)) for p in ("q", "k", "v"))
        att = base.causal_attention(rope(q), rope(k), v)
        x = x + F.linear(base.merge(att), w[s + "self_attn.o_proj.weight"])
        m = rms(x, w[s + "post_attention_layernorm.weight"])
        gated = F.silu(F.linear(m, w[s + "mlp.gate_proj.weight"])) * F.linear(m, w[s + "mlp.up_proj.weight"])
        x = x + F.linear(gated, w[s + "mlp.down_proj.weight"])
    logits = F.linear(rms(x, w["norm.weight"]), w["embed_tokens.weight"])
    return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))


def leaves(init, grad):
    return {k: torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=grad) for k, v in init.items()}


def trajectory(run, w, init, fixed, data):
    a = leaves(init, True)
    if run["optimizer"] == "sgd":
        opt = torch.optim.SGD(list(a.values()), lr=run["lr"], momentum=run["momentum"])
    else:
        opt = torch.optim.AdamW(list(a.values()), lr=run["lr"], betas=(run["beta1"], run["beta2"]), eps=run["eps"],
                                weight_decay=run["weight_decay"])
    losses = []
    for s in range(1, STEPS + 1):
        opt.zero_grad()
        loss = lora_loss(w, a, *base.batch(data, s - 1), fixed)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261213)
    w = leaves(read_safetensors(os.path.join(base.COMMITTED, "llama.safetensors")), False)
    data = np.fromfile(os.path.join(base.COMMITTED, "tokens.bin"), dtype="<u2").astype(np.int64)
    cos = np.load(os.path.join(base.COMMITTED, "llama_cos.npy"))
    sin = np.load(os.path.join(base.COMMITTED, "llama_sin.npy"))
    fixed = {"cos": torch.tensor(cos, dtype=torch.float64), "sin": torch.tensor(sin, dtype=torch.float64)}
    init = {}
    for i in range(2):
        for which, (r, _) in ADAPTED.items():
            m = f"layers.{i}.self_attn.{which}_proj"
            init[key(m, "A")] = rng.normal(0, 0.1, (r, base.D)).astype(np.float32)
            init[key(m, "B")] = rng.normal(0, 0.1, (base.D, r)).astype(np.float32)
    base.write_safetensors(os.path.join(HERE, "llama_lora_init.safetensors"), init)
    a = leaves(init, True)
    loss = lora_loss(w, a, *base.batch(data, 0), fixed)
    loss.backward()
    base.write_safetensors(os.path.join(HERE, "llama_lora_grads.safetensors"), {k: t.grad.numpy() for k, t in a.items()})
    out = {"model": "llama.oir", "lora": ["layers.*.self_attn.q_proj:4:8", "*.v_proj:2"], "steps": STEPS,
           "loss": float(loss), "adapters": len(a), "runs": {}}
    for name, run in RUNS.items():
        r = dict(run)
        r["losses"] = trajectory(run, w, init, fixed, data)
        out["runs"][name] = r
    with open(os.path.join(HERE, "llama_lora_fixture.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
