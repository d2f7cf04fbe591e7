#!/usr/bin/python3
"""Whole-model fixtures against PyTorch (not run by the test suite).

For the two models of testsuite/train/models/ (gpt2.oir: GPT-2-style, llama.oir:
llama-style with RMSNorm, RoPE, SwiGLU and tied embeddings) it writes there:

- MODEL.safetensors: the start weights, fp32, from a seeded numpy generator
  (the .oir files read them, so orion and PyTorch start from the same values);
- gpt2_pos.npy (the positions 0..15), llama_cos.npy, llama_sin.npy (the RoPE
  tables) and llama_rot.npy (rotate-half as a signed permutation matrix): the
  models' fixed inputs, fed with orion-run train --input;
- tokens.bin: 481 uint16 token ids of a vocabulary of 64 (the next id is
  5 t + 3 mod 64 three times in four, else a random one): 30 windows of 16;
- MODEL_grads.safetensors: the gradient of the loss of step 1's batch
  (windows 0 and 1, docs/training.md "Data") with respect to every param;
- MODEL_fixture.json: that loss, and the loss of every step of 20-step runs
  with SGD (momentum) and AdamW (orion-run train's defaults: betas 0.9, 0.999,
  eps 1e-8, weight decay 0.01 on params of rank >= 2 only), the windows fed in
  order.

PyTorch computes in float64 from the fp32 start weights, one thread, so the
reference is the exact model and rerunning the script writes the same bytes.
Needs numpy and torch: /usr/bin/python3 testsuite/make_train_model_fixtures.py [DIR]
(DIR instead of testsuite/train/models/: bench/train_torch runs it live there).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train", "models")
HERE = sys.argv[1] if len(sys.argv) > 1 else COMMITTED
B, T, V, D, HEADS, STEPS = 2, 16, 64, 32, 2, 20
HD = D // HEADS
RUNS = {
    "sgd": {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9},
    "adamw": {"optimizer": "adamw", "lr": 0.003, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
              "weight_decay": 0.01},
}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def gpt2_init(rng):
    p = {"wte": rng.normal(0, 0.1, (V, D)), "wpe": rng.normal(0, 0.1, (T, D)),
         "ln_f.weight": 1 + rng.normal(0, 0.1, D), "ln_f.bias": rng.normal(0, 0.02, D)}
    for i in range(2):
        s = f"h.{i}."
        p[s + "ln_1.weight"] = 1 + rng.normal(0, 0.1, D)
        p[s + "ln_1.bias"] = rng.normal(0, 0.02, D)
        p[s + "attn.c_attn.weight"] = rng.normal(0, 0.15, (3 * D, D))
        p[s + "attn.c_attn.bias"] = rng.normal(0, 0.02, 3 * D)
        p[s + "attn.c_proj.weight"] = rng.normal(0, 0.1, (D, D))
        p[s + "attn.c_proj.bias"] = rng.normal(0, 0.02, D)
        p[s + "ln_2.weight"] = 1 + rng.normal(0, 0.1, D)
        p[s + "ln_2.bias"] = rng.normal(0, 0.02, D)
        p[s + "mlp.c_fc.weight"] = rng.normal(0, 0.15, (4 * D, D))
        p[s + "mlp.c_fc.bias"] = rng.normal(0, 0.02, 4 * D)
        p[s + "mlp.c_proj.weight"] = rng.normal(0, 0.08, (D, 4 * D))
        p[s + "mlp.c_proj.bias"] = rng.normal(0, 0.02, D)
    return p


def llama_init(rng):
    p = {"embed_tokens.weight": rng.normal(0, 0.1, (V, D)), "norm.weight": 1 + rng.normal(0, 0.1, D)}
    for i in range(2):
        s = f"layers.{i}."
        p[s + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, D)
        for w in ("q", "k", "v", "o"):
            p[s + f"self_attn.{w}_proj.weight"] = rng.normal(0, 0.15, (D, D))
        p[s + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, D)
        p[s + "mlp.gate_proj.weight"] = rng.normal(0, 0.15, (2 * D, D))
        p[s + "mlp.up_proj.weight"] = rng.normal(0, 0.15, (2 * D, D))
        p[s + "mlp.down_proj.weight"] = rng.normal(0, 0.1, (D, 2 * D))
    return p


def heads(t):
    return t.reshape(B, T, HEADS, HD).transpose(1, 2)


def causal_attention(q, k, v):
    # softmax(q k^T / sqrt(16) with the future masked) v, written out: this
    # torch has no scaled_dot_product_attention.
    scores = q @ k.transpose(-1, -2) / math.sqrt(HD)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def merge(t):
    return t.transpose(1, 2).reshape(B, T, D)


def gpt2_loss(p, tok, tgt, fixed):
    def ln(x, name):
        return F.layer_norm(x, (D,), p[name + ".weight"], p[name + ".bias"], eps=1e-5)
    x = p["wte"][tok] + p["wpe"][fixed["pos"]]
    for i in range(2):
        s = f"h.{i}."
        qkv = F.linear(ln(x, s + "ln_1"), p[s + "attn.c_attn.weight"], p[s + "attn.c_attn.bias"])
        q, k, v = qkv.split(D, dim=-1)
        att = causal_attention(heads(q), heads(k), heads(v))
        x = x + F.linear(merge(att), p[s + "attn.c_proj.weight"], p[s + "attn.c_proj.bias"])
        fc = F.linear(ln(x, s + "ln_2"), p[s + "mlp.c_fc.weight"], p[s + "mlp.c_fc.bias"])
        x = x + F.linear(F.gelu(fc, approximate="tanh"), p[s + "mlp.c_proj.weight"], p[s + "mlp.c_proj.bias"])
    logits = F.linear(ln(x, "ln_f"), p["wte"])
    return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))


def llama_loss(p, tok, tgt, fixed):
    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    def rope(t):
        rot = torch.cat([-t[..., HD // 2:], t[..., :HD // 2]], dim=-1)
        return t * fixed["cos"] + rot * fixed["sin"]
    x = p["embed_tokens.weight"][tok]
    for i in range(2):
        s = f"layers.{i}."
        n = rms(x, p[s + "input_layernorm.weight"])
        q, k, v = (heads(F.linear(n, p[s + f"self_attn.{w}_proj.weight"])) for w in ("q", "k", "v"))
        att = causal_attention(rope(q), rope(k), v)
        x = x + F.linear(merge(att), p[s + "self_attn.o_proj.weight"])
        m = rms(x, p[s + "post_attention_layernorm.weight"])
        gated = F.silu(F.linear(m, p[s + "mlp.gate_proj.weight"])) * F.linear(m, p[s + "mlp.up_proj.weight"])
        x = x + F.linear(gated, p[s + "mlp.down_proj.weight"])
    logits = F.linear(rms(x, p["norm.weight"]), p["embed_tokens.weight"])
    return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))


def batch(data, index):
    w = (len(data) - 1) // T
    rows = [(index * B + b) % w for b in range(B)]
    tok = np.stack([data[r * T:r * T + T] for r in rows])
    tgt = np.stack([data[r * T + 1:r * T + T + 1] for r in rows])
    return torch.tensor(tok, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)


def leaf_params(init):
    return {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in init.items()}


def trajectory(run, loss_fn, init, fixed, data):
    p = leaf_params(init)
    decayed = [t for t in p.values() if t.dim() >= 2]
    plain = [t for t in p.values() if t.dim() < 2]
    if run["optimizer"] == "sgd":
        opt = torch.optim.SGD(list(p.values()), lr=run["lr"], momentum=run["momentum"])
    else:
        opt = torch.optim.AdamW([{"params": decayed, "weight_decay": run["weight_decay"]},
                                 {"params": plain, "weight_decay": 0.0}], lr=run["lr"],
                                betas=(run["beta1"], run["beta2"]), eps=run["eps"])
    losses = []
    for s in range(1, STEPS + 1):
        opt.zero_grad()
        loss = loss_fn(p, *batch(data, s - 1), fixed)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def tokens(rng):
    data = np.zeros(30 * T + 1, dtype=np.int64)
    data[0] = rng.integers(0, V)
    for i in range(1, len(data)):
        data[i] = (5 * data[i - 1] + 3) % V if rng.random() < 0.75 else rng.integers(0, V)
    return data.astype("<u2")


def rope_tables():
    inv = 1.0 / (10000.0 ** (np.arange(0, HD, 2) / HD))
    freqs = np.outer(np.arange(T), inv)
    emb = np.concatenate([freqs, freqs], axis=-1).reshape(1, 1, T, HD)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def rotate_half_matrix():
    # t @ R == concat(-t[..., 8:], t[..., :8]): column j < 8 takes -t[j + 8], column j >= 8 takes t[j - 8].
    r = np.zeros((HD, HD), dtype=np.float32)
    for j in range(HD // 2):
        r[j + HD // 2, j] = -1.0
        r[j, j + HD // 2] = 1.0
    return r


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261202)
    data = tokens(rng)
    data.tofile(os.path.join(HERE, "tokens.bin"))
    data = data.astype(np.int64)
    pos = np.arange(T, dtype=np.int32)
    cos, sin = rope_tables()
    np.save(os.path.join(HERE, "gpt2_pos.npy"), pos)
    np.save(os.path.join(HERE, "llama_cos.npy"), cos)
    np.save(os.path.join(HERE, "llama_sin.npy"), sin)
    np.save(os.path.join(HERE, "llama_rot.npy"), rotate_half_matrix())
    models = {
        "gpt2": (gpt2_init, gpt2_loss, {"pos": torch.tensor(pos, dtype=torch.long)}),
        "llama": (llama_init, llama_loss, {"cos": torch.tensor(cos, dtype=torch.float64),
                                           "sin": torch.tensor(sin, dtype=torch.float64)}),
    }
    for name, (init_fn, loss_fn, fixed) in models.items():
        init = {k: v.astype(np.float32) for k, v in init_fn(rng).items()}
        write_safetensors(os.path.join(HERE, f"{name}.safetensors"), init)
        p = leaf_params(init)
        loss = loss_fn(p, *batch(data, 0), fixed)
        loss.backward()
        write_safetensors(os.path.join(HERE, f"{name}_grads.safetensors"),
                          {k: t.grad.numpy() for k, t in p.items()})
        out = {"model": f"{name}.oir", "batch": B, "seq": T, "vocab": V, "steps": STEPS,
               "loss": float(loss), "params": len(p), "runs": {}}
        for rname, run in RUNS.items():
            r = dict(run)
            r["losses"] = trajectory(run, loss_fn, init, fixed, data)
            out["runs"][rname] = r
        with open(os.path.join(HERE, f"{name}_fixture.json"), "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
