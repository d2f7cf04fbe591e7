#!/usr/bin/python3
"""bench/train_torch.py: PyTorch's side of bench/train.

Trains the model shapes of bench/make_train_models.py (llama-style or
GPT-2-style, fp32, tied classifier) with AdamW as orion-run train does
(betas 0.9/0.999, eps 1e-8, weight decay on params of rank >= 2 only), on
the same token file read in the same windows (step s, row b: window
((s-1)B + b) mod W), at one thread count, and prints one JSON object:
the median step time and tokens/s over the steps after the first, the
per-step losses, and the phase split (forward, backward, optimizer).

  train_torch.py llama|gpt2 DATA.npy --dim .. --layers .. --heads .. [--hidden ..]
      --vocab .. --seq .. --batch .. --steps N --lr LR --wd WD --threads K
"""
import argparse
import json
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def sdpa_causal(q, k, v):
    # Debian's torch may predate F.scaled_dot_product_attention: written out.
    T = q.shape[-2]
    mask = torch.full((T, T), float("-inf")).triu(1)
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + mask, dim=-1) @ v


def rope(t, cos, sin):
    half = t.shape[-1] // 2
    return t * cos + torch.cat([-t[..., half:], t[..., :half]], dim=-1) * sin


def make_params(a):
    g = torch.Generator().manual_seed(0)
    P = {}

    def normal(name, *shape, std=0.02):
        P[name] = (torch.randn(*shape, generator=g) * std).requires_grad_()

    def const(name, n, v):
        P[name] = torch.full((n,), float(v)).requires_grad_()

    D, V = a.dim, a.vocab
    if a.kind == "llama":
        normal("tok", V, D)
        const("norm", D, 1)
        for i in range(a.layers):
            p = f"l{i}."
            const(p + "an", D, 1)
            const(p + "fn", D, 1)
            for n in ("wq", "wk", "wv", "wo"):
                normal(p + n, D, D)
            normal(p + "w1", a.hidden, D)
            normal(p + "w3", a.hidden, D)
            normal(p + "w2", D, a.hidden)
    else:
        normal("wte", V, D)
        normal("wpe", a.seq, D, std=0.01)
        const("lnf.w", D, 1)
        const("lnf.b", D, 0)
        for i in range(a.layers):
            p = f"h{i}."
            for n in ("ln1", "ln2"):
                const(p + n + ".w", D, 1)
                const(p + n + ".b", D, 0)
            normal(p + "attn.w", 3 * D, D)
            const(p + "attn.b", 3 * D, 0)
            normal(p + "proj.w", D, D)
            const(p + "proj.b", D, 0)
            normal(p + "fc.w", 4 * D, D)
            const(p + "fc.b", 4 * D, 0)
            normal(p + "mproj.w", D, 4 * D)
            const(p + "mproj.b", D, 0)
    return P


def forward(a, P, tokens, targets, cos, sin):
    B, T, D, H = a.batch, a.seq, a.dim, a.heads
    hd = D // H

    def heads(t):
        return t.reshape(B, T, H, hd).transpose(1, 2)

    def merge(t):
        return t.transpose(1, 2).reshape(B, T, D)

    if a.kind == "llama":
        x = P["tok"][tokens]
        for i in range(a.layers):
            p = f"l{i}."
            n = rms_norm(x, P[p + "an"])
            q, k, v = (heads(F.linear(n, P[p + w])) for w in ("wq", "wk", "wv"))
            att = sdpa_causal(rope(q, cos, sin), rope(k, cos, sin), v)
            h = x + F.linear(merge(att), P[p + "wo"])
            m = rms_norm(h, P[p + "fn"])
            x = h + F.linear(F.silu(F.linear(m, P[p + "w1"])) * F.linear(m, P[p + "w3"]), P[p + "w2"])
        logits = F.linear(rms_norm(x, P["norm"]), P["tok"])
    else:
        x = P["wte"][tokens] + P["wpe"]
        for i in range(a.layers):
            p = f"h{i}."
            n = F.layer_norm(x, (D,), P[p + "ln1.w"], P[p + "ln1.b"], 1e-5)
            q, k, v = (heads(t) for t in F.linear(n, P[p + "attn.w"], P[p + "attn.b"]).split(D, dim=-1))
            att = sdpa_causal(q, k, v)
            x = x + F.linear(merge(att), P[p + "proj.w"], P[p + "proj.b"])
            n = F.layer_norm(x, (D,), P[p + "ln2.w"], P[p + "ln2.b"], 1e-5)
            x = x + F.linear(F.gelu(F.linear(n, P[p + "fc.w"], P[p + "fc.b"]), approximate="tanh"),
                             P[p + "mproj.w"], P[p + "mproj.b"])
        logits = F.linear(F.layer_norm(x, (D,), P["lnf.w"], P["lnf.b"], 1e-5), P["wte"])
    return F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=("llama", "gpt2"))
    p.add_argument("data")
    for n in ("dim", "layers", "heads", "vocab", "seq", "batch", "steps", "threads"):
        p.add_argument("--" + n, type=int, required=True)
    p.add_argument("--hidden", type=int, default=0)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--wd", type=float, default=0.01)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    data = np.load(a.data).astype(np.int64)
    B, T = a.batch, a.seq
    W = (len(data) - 1) // T
    hd = a.dim // a.heads
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], dim=-1)
    cos, sin = ang.cos().float().reshape(1, 1, T, hd), ang.sin().float().reshape(1, 1, T, hd)
    P = make_params(a)
    decay = [v for v in P.values() if v.dim() >= 2]
    rest = [v for v in P.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    steps, losses, cpu = [], [], []
    for s in range(1, a.steps + 1):
        rows = [((s - 1) * B + b) % W for b in range(B)]
        tok = torch.from_numpy(np.stack([data[w * T:w * T + T] for w in rows]))
        tgt = torch.from_numpy(np.stack([data[w * T + 1:w * T + T + 1] for w in rows]))
        c0 = time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = forward(a, P, tok, tgt, cos, sin)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        cpu.append(time.process_time() - c0)  # all threads' CPU time: what the step took on a loaded machine
        losses.append(loss.item())
        steps.append((t1 - t0, t2 - t1, t3 - t2))
    timed = steps[1:] if len(steps) > 1 else steps
    total = statistics.median(sum(x) for x in timed)
    print(json.dumps({
        "threads": a.threads,
        "params": sum(v.numel() for v in P.values()),
        "step_ms": total * 1e3,
        "tokens_per_s": B * T / total,
        "forward_ms": statistics.median(x[0] for x in timed) * 1e3,
        "backward_ms": statistics.median(x[1] for x in timed) * 1e3,
        "optimizer_ms": statistics.median(x[2] for x in timed) * 1e3,
        "cpu_step_ms": statistics.median(cpu[1:] if len(cpu) > 1 else cpu) * 1e3,
        "losses": losses,
    }))


if __name__ == "__main__":
    main()
