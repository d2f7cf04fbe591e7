#!/usr/bin/env python3
"""bench/decode's model half: a Hugging Face model directory with seeded
random weights, and the PyTorch reference that runs the same weights.

    decode_model.py write MODEL DIR    DIR/config.json, DIR/model.safetensors
                                       (fp16, Hugging Face's names and
                                       layouts) and the prompt: DIR/prompt.ids
                                       (128 ids, comma-separated) and
                                       DIR/tokens.npy (int32 [1,128])
    decode_model.py torch MODEL DIR N RUNS [ORION_LOGITS]
                                       PyTorch on DIR's weights (fp32, the CPU):
                                       the greedy ids of a 128-token prefill
                                       and N decode steps ("torch_ids ..."),
                                       the error of ORION_LOGITS (orion's
                                       prefill logits, .npy) against PyTorch's
                                       ("err_prefill ..."), then the best of
                                       RUNS timings of the prefill and of the
                                       N steps at 1 and 2 threads, in seconds
                                       per token

MODEL is gpt2 (GPT-2 124M: 12 layers, 768, 12 heads, vocab 50257, 1024
positions, tied head; `transformer.h.L.attn.c_attn.weight` stored [in, out]
as Conv1D has it) or llama (Stories110M-shaped: dim 768, 12 layers, 12
heads, SwiGLU hidden 2048, vocab 32000, RMSNorm, RoPE, a separate
`lm_head.weight`; `model.layers.L.self_attn.q_proj.weight` [out, in]).
The PyTorch model is written after modeling_gpt2.py / modeling_llama.py
(transformers itself is not needed) with its own preallocated KV cache, as
an inference loop runs it.
"""
import json
import struct
import sys
import time

import numpy as np

D, L, H, HD, PROMPT, CTX = 768, 12, 12, 64, 128, 256
SPEC = {
    "gpt2": {"vocab": 50257, "ff": 3072, "positions": 1024},
    "llama": {"vocab": 32000, "ff": 2048, "positions": 2048},
}


def config(model):
    s = SPEC[model]
    if model == "gpt2":
        return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": s["vocab"], "n_embd": D,
                "n_layer": L, "n_head": H, "n_positions": s["positions"], "n_ctx": s["positions"],
                "n_inner": None, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                "tie_word_embeddings": True}
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": s["vocab"],
            "hidden_size": D, "intermediate_size": s["ff"], "num_hidden_layers": L, "num_attention_heads": H,
            "num_key_value_heads": H, "max_position_embeddings": s["positions"], "rms_norm_eps": 1e-5,
            "hidden_act": "silu", "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False,
            "attention_bias": False}


def weights(model):
    """The tensors by Hugging Face name, fp16, seeded."""
    s = SPEC[model]
    rng = np.random.default_rng(2026 if model == "gpt2" else 2027)
    n = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float16)
    g = lambda k: (1 + 0.1 * rng.standard_normal(k)).astype(np.float16)
    t = {}
    if model == "gpt2":
        p = "transformer."
        t[p + "wte.weight"], t[p + "wpe.weight"] = n(s["vocab"], D), n(s["positions"], D)
        for i in range(L):
            b = f"{p}h.{i}."
            t[b + "ln_1.weight"], t[b + "ln_1.bias"] = g(D), n(D)
            t[b + "attn.c_attn.weight"], t[b + "attn.c_attn.bias"] = n(D, 3 * D), n(3 * D)  # Conv1D: [in, out]
            t[b + "attn.c_proj.weight"], t[b + "attn.c_proj.bias"] = n(D, D), n(D)
            t[b + "ln_2.weight"], t[b + "ln_2.bias"] = g(D), n(D)
            t[b + "mlp.c_fc.weight"], t[b + "mlp.c_fc.bias"] = n(D, s["ff"]), n(s["ff"])
            t[b + "mlp.c_proj.weight"], t[b + "mlp.c_proj.bias"] = n(s["ff"], D), n(D)
        t[p + "ln_f.weight"], t[p + "ln_f.bias"] = g(D), n(D)
    else:
        t["model.embed_tokens.weight"] = n(s["vocab"], D)
        for i in range(L):
            b = f"model.layers.{i}."
            t[b + "input_layernorm.weight"] = g(D)
            for k in "qkvo":
                t[b + f"self_attn.{k}_proj.weight"] = n(D, D)  # nn.Linear: [out, in]
            t[b + "post_attention_layernorm.weight"] = g(D)
            t[b + "mlp.gate_proj.weight"], t[b + "mlp.up_proj.weight"] = n(s["ff"], D), n(s["ff"], D)
            t[b + "mlp.down_proj.weight"] = n(D, s["ff"])
        t["model.norm.weight"], t["lm_head.weight"] = g(D), n(s["vocab"], D)
    return t


def write_safetensors(path, t):
    header, blobs, off = {}, [], 0
    for k, v in t.items():
        b = v.tobytes()
        header[k] = {"dtype": "F16", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """The F16 tensors of PATH as float32 arrays (what PyTorch fp32 runs)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, e in header.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.float16).reshape(e["shape"]).astype(np.float32)
    return out


def prompt(model):
    return np.random.default_rng(7).integers(0, SPEC[model]["vocab"], PROMPT).astype(np.int32)


def write(model, d):
    with open(f"{d}/config.json", "w") as f:
        json.dump(config(model), f, indent=2)
    write_safetensors(f"{d}/model.safetensors", weights(model))
    ids = prompt(model)
    np.save(f"{d}/tokens.npy", ids.reshape(1, PROMPT))
    with open(f"{d}/prompt.ids", "w") as f:
        f.write(",".join(str(int(i)) for i in ids) + "\n")


class Model:
    """A forward over T new tokens at positions pos .. pos+T-1 with a
    preallocated KV cache [H, CTX, HD] per layer: prefill is T = 128 from
    position 0, a decode step T = 1."""

    def __init__(self, model, w):
        import torch
        self.torch, self.F, self.model = torch, torch.nn.functional, model
        self.w = {k: torch.from_numpy(v) for k, v in w.items()}
        self.k = [torch.zeros(H, CTX, HD) for _ in range(L)]
        self.v = [torch.zeros(H, CTX, HD) for _ in range(L)]
        if model == "llama":
            inv = 1.0 / (10000.0 ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
            ang = torch.outer(torch.arange(CTX, dtype=torch.float32), inv)
            emb = torch.cat((ang, ang), dim=-1)
            self.cos, self.sin = emb.cos(), emb.sin()

    def attend(self, i, q, k, v, pos):
        """q, k, v: [H, T, HD]; writes k, v into the cache at pos.."""
        torch, T = self.torch, q.shape[1]
        self.k[i][:, pos:pos + T], self.v[i][:, pos:pos + T] = k, v
        ck, cv = self.k[i][:, :pos + T], self.v[i][:, :pos + T]
        s = torch.matmul(q, ck.transpose(-1, -2)) * (1.0 / HD ** 0.5)
        if T > 1:
            causal = torch.arange(pos + T)[None, :] <= torch.arange(pos, pos + T)[:, None]
            s = s.masked_fill(~causal, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), cv).transpose(0, 1).reshape(T, D)

    def heads(self, t):
        return t.reshape(t.shape[0], H, HD).transpose(0, 1)

    def forward(self, ids, pos):
        """The last position's logits [V] and, for prefill, every position's [T, V]."""
        torch, F, w = self.torch, self.F, self.w
        T = len(ids)
        tok = torch.tensor(ids, dtype=torch.long)
        if self.model == "gpt2":
            p = "transformer."
            h = w[p + "wte.weight"][tok] + w[p + "wpe.weight"][pos:pos + T]
            for i in range(L):
                b = lambda s: w[f"{p}h.{i}.{s}"]
                n = F.layer_norm(h, (D,), b("ln_1.weight"), b("ln_1.bias"), 1e-5)
                q, k, v = torch.addmm(b("attn.c_attn.bias"), n, b("attn.c_attn.weight")).split(D, -1)
                a = self.attend(i, self.heads(q), self.heads(k), self.heads(v), pos)
                h = h + torch.addmm(b("attn.c_proj.bias"), a, b("attn.c_proj.weight"))
                n = F.layer_norm(h, (D,), b("ln_2.weight"), b("ln_2.bias"), 1e-5)
                m = F.gelu(torch.addmm(b("mlp.c_fc.bias"), n, b("mlp.c_fc.weight")), approximate="tanh")
                h = h + torch.addmm(b("mlp.c_proj.bias"), m, b("mlp.c_proj.weight"))
            h = F.layer_norm(h, (D,), w[p + "ln_f.weight"], w[p + "ln_f.bias"], 1e-5)
            return F.linear(h, w[p + "wte.weight"])
        cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]

        def rms(t, g):
            return g * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5))

        def rope(t):
            return t * cos + torch.cat((-t[..., HD // 2:], t[..., :HD // 2]), dim=-1) * sin

        h = w["model.embed_tokens.weight"][tok]
        for i in range(L):
            b = lambda s: w[f"model.layers.{i}.{s}"]
            n = rms(h, b("input_layernorm.weight"))
            q, k, v = (self.heads(F.linear(n, b(f"self_attn.{c}_proj.weight"))) for c in "qkv")
            h = h + F.linear(self.attend(i, rope(q), rope(k), v, pos), b("self_attn.o_proj.weight"))
            n = rms(h, b("post_attention_layernorm.weight"))
            g = F.silu(F.linear(n, b("mlp.gate_proj.weight"))) * F.linear(n, b("mlp.up_proj.weight"))
            h = h + F.linear(g, b("mlp.down_proj.weight"))
        return F.linear(rms(h, w["model.norm.weight"]), w["lm_head.weight"])

    def generate(self, ids, steps):
        """Greedy: the prefill's logits and the 1 + STEPS ids, with the
        seconds of the prefill and of the steps."""
        t0 = time.perf_counter()
        logits = self.forward(ids, 0)
        t1 = time.perf_counter()
        out = [int(self.torch.argmax(logits[-1]))]
        for s in range(steps):
            out.append(int(self.torch.argmax(self.forward([out[-1]], len(ids) + s)[-1])))
        t2 = time.perf_counter()
        return logits, out, t1 - t0, t2 - t1


def torch_bench(model, d, steps, runs, orion_logits):
    import torch
    print(f"torch_version {torch.__version__}")
    m = Model(model, read_safetensors(f"{d}/model.safetensors"))
    ids = [int(i) for i in np.load(f"{d}/tokens.npy").reshape(-1)]
    with torch.inference_mode():
        logits, out, _, _ = m.generate(ids, steps)
        print("torch_ids " + ",".join(map(str, out)))
        top = torch.topk(logits[-1], 2).values
        print(f"torch_top2_gap {float((top[0] - top[1]) / logits[-1].abs().max()):.3g}")
        if orion_logits:
            ref = logits.numpy()
            got = np.load(orion_logits).astype(np.float32).reshape(ref.shape)
            print(f"err_prefill {np.abs(got - ref).max() / np.abs(ref).max():.3g}")
        for th in (1, 2):
            torch.set_num_threads(th)
            pre = dec = float("inf")
            for _ in range(runs):
                _, _, tp, td = m.generate(ids, steps)
                pre, dec = min(pre, tp), min(dec, td / steps)
            print(f"torch_prefill_{th} {pre / len(ids):.9f}")
            print(f"torch_decode_{th} {dec:.6f}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        torch_bench(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                    sys.argv[6] if len(sys.argv) > 6 else None)
