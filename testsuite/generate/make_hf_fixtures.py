#!/usr/bin/python3
"""Hugging Face-layout fixtures for orion-convert (not run by the test suite).

Writes, under testsuite/generate/models/ (or DIR), three small models with
seeded random weights in Hugging Face's layout and tensor names, and what
PyTorch computes from them:

- gpt2/: GPT-2 (n_embd 64, 2 layers, 4 heads, vocabulary 97, 64 positions,
  gelu_new), keys with the "transformer." prefix as GPT2LMHeadModel saves
  them, lm_head tied to wte (no lm_head.weight in the file);
- llama_tied/: llama (dim 64, 2 layers, 4 heads, 2 key/value heads, hidden
  160, vocabulary 101, rope_theta 10000), tie_word_embeddings true;
- llama_sharded/: the same shapes with another seed, a separate lm_head.weight
  and rope_theta 500000, stored as two shards with model.safetensors.index.json
  (the layers split across the shards).

Per model: config.json, the safetensors, and (.npy, little-endian):
- seq.npy      int32[N]      a fixed token sequence (N = 24);
- prefill.npy  fp32[N,V]     the logits of the whole sequence, one causal pass;
- decode.npy   fp32[N-P,V]   the logits when the first P = 8 tokens are one
                             cached pass and the rest follow one token at a
                             time with the model's own KV cache (row i is
                             position P + i);
- prompt.npy   int32[6]      a prompt, and
- greedy.npy   int32[32]     its greedy 32-token continuation (argmax, cached).

Weights are rounded to fp16 and stored as F16, so fp16 and fp32 packages hold
the same values; PyTorch computes in float64 from them, following Hugging
Face's modeling_gpt2.py / modeling_llama.py (RMSNorm, rotate_half RoPE with
inv_freq = theta^(-2i/HD), repeat_kv for grouped-query attention). Rerunning
the script writes the same bytes.
Needs numpy and torch: /usr/bin/python3 testsuite/generate/make_hf_fixtures.py [DIR]
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "models")
N, P, PROMPT, GREEDY = 24, 8, 6, 32
torch.set_num_threads(1)


# ---- safetensors, written by hand: 8-byte header length, JSON header, data ----

def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].astype(np.float16))
        header[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_config(path, config):
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def fp16(rng, shape, std, mean=0.0):
    return (mean + std * rng.standard_normal(shape)).astype(np.float16)


def t64(a):
    return torch.from_numpy(a.astype(np.float64))


# ---- GPT-2 ----

def gpt2_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    E, V, Pn, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    w = {"wte.weight": fp16(rng, (V, E), 0.3), "wpe.weight": fp16(rng, (Pn, E), 0.1),
         "ln_f.weight": fp16(rng, (E,), 0.1, 1.0), "ln_f.bias": fp16(rng, (E,), 0.05)}
    for i in range(L):
        p = "h.%d." % i
        w[p + "ln_1.weight"] = fp16(rng, (E,), 0.1, 1.0)
        w[p + "ln_1.bias"] = fp16(rng, (E,), 0.05)
        w[p + "attn.c_attn.weight"] = fp16(rng, (E, 3 * E), 0.15)  # Conv1D: [in, out]
        w[p + "attn.c_attn.bias"] = fp16(rng, (3 * E,), 0.05)
        w[p + "attn.c_proj.weight"] = fp16(rng, (E, E), 0.5)
        w[p + "attn.c_proj.bias"] = fp16(rng, (E,), 0.05)
        w[p + "ln_2.weight"] = fp16(rng, (E,), 0.1, 1.0)
        w[p + "ln_2.bias"] = fp16(rng, (E,), 0.05)
        w[p + "mlp.c_fc.weight"] = fp16(rng, (E, 4 * E), 0.12)
        w[p + "mlp.c_fc.bias"] = fp16(rng, (4 * E,), 0.05)
        w[p + "mlp.c_proj.weight"] = fp16(rng, (4 * E, E), 0.3)
        w[p + "mlp.c_proj.bias"] = fp16(rng, (E,), 0.05)
    return w


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2:
    """GPT2LMHeadModel's forward with a past_key_values cache, in float64."""

    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, {k: t64(v) for k, v in w.items()}
        self.H = cfg["n_head"]
        self.HD = cfg["n_embd"] // self.H

    def ln(self, x, p):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.w[p + ".weight"], self.w[p + ".bias"],
                                              self.cfg["layer_norm_epsilon"])

    def forward(self, ids, cache):
        """ids: the new tokens; cache: per layer (k, v) [H, S, HD] of the earlier ones (S may be 0)."""
        w, H, HD = self.w, self.H, self.HD
        start = cache[0][0].shape[1]
        T = len(ids)
        pos = torch.arange(start, start + T)
        x = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][pos]
        new_cache = []
        for i in range(self.cfg["n_layer"]):
            p = "h.%d." % i
            a = self.ln(x, p + "ln_1")
            qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = qkv.split(self.cfg["n_embd"], dim=-1)
            q, k, v = (t.reshape(T, H, HD).transpose(0, 1) for t in (q, k, v))
            k = torch.cat([cache[i][0], k], dim=1)
            v = torch.cat([cache[i][1], v], dim=1)
            new_cache.append((k, v))
            s = q @ k.transpose(-1, -2) / math.sqrt(HD)
            S = k.shape[1]
            causal = torch.arange(S)[None, :] <= (torch.arange(T)[:, None] + start)
            s = s.masked_fill(~causal, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            o = o.transpose(0, 1).reshape(T, self.cfg["n_embd"])
            x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            m = self.ln(x, p + "ln_2")
            h = gelu_new(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
            x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = self.ln(x, "ln_f")
        return x @ w["wte.weight"].T, new_cache

    def empty_cache(self):
        z = torch.zeros(self.H, 0, self.HD, dtype=torch.float64)
        return [(z, z) for _ in range(self.cfg["n_layer"])]


# ---- llama ----

def llama_weights(cfg, seed, tied):
    rng = np.random.default_rng(seed)
    E, V, L, F = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HD = E // H
    w = {"model.embed_tokens.weight": fp16(rng, (V, E), 0.3), "model.norm.weight": fp16(rng, (E,), 0.1, 1.0)}
    for i in range(L):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = fp16(rng, (E,), 0.1, 1.0)
        w[p + "self_attn.q_proj.weight"] = fp16(rng, (H * HD, E), 0.15)
        w[p + "self_attn.k_proj.weight"] = fp16(rng, (KVH * HD, E), 0.15)
        w[p + "self_attn.v_proj.weight"] = fp16(rng, (KVH * HD, E), 0.15)
        w[p + "self_attn.o_proj.weight"] = fp16(rng, (E, H * HD), 0.1)
        w[p + "post_attention_layernorm.weight"] = fp16(rng, (E,), 0.1, 1.0)
        w[p + "mlp.gate_proj.weight"] = fp16(rng, (F, E), 0.15)
        w[p + "mlp.up_proj.weight"] = fp16(rng, (F, E), 0.15)
        w[p + "mlp.down_proj.weight"] = fp16(rng, (E, F), 0.1)
    if not tied:
        w["lm_head.weight"] = fp16(rng, (V, E), 0.3)
    return w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Llama:
    """LlamaForCausalLM's forward with a cache, in float64."""

    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, {k: t64(v) for k, v in w.items()}
        self.H, self.KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.HD = cfg["hidden_size"] // self.H
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, self.HD, 2, dtype=torch.float64) / self.HD))
        t = torch.arange(cfg["max_position_embeddings"], dtype=torch.float64)
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()

    def rms(self, x, name):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.w[name] * (x * torch.rsqrt(var + self.cfg["rms_norm_eps"]))

    def forward(self, ids, cache):
        w, H, KVH, HD = self.w, self.H, self.KVH, self.HD
        start = cache[0][0].shape[1]
        T = len(ids)
        pos = torch.arange(start, start + T)
        cos, sin = self.cos[pos], self.sin[pos]
        x = w["model.embed_tokens.weight"][torch.tensor(ids)]
        new_cache = []
        for i in range(self.cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            n = self.rms(x, p + "input_layernorm.weight")
            q = (n @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, HD).transpose(0, 1)
            k = (n @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KVH, HD).transpose(0, 1)
            v = (n @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KVH, HD).transpose(0, 1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = torch.cat([cache[i][0], k], dim=1)
            v = torch.cat([cache[i][1], v], dim=1)
            new_cache.append((k, v))
            kr = k.repeat_interleave(H // KVH, dim=0)  # repeat_kv: head h reads kv head h // (H / KVH)
            vr = v.repeat_interleave(H // KVH, dim=0)
            s = q @ kr.transpose(-1, -2) / math.sqrt(HD)
            S = k.shape[1]
            causal = torch.arange(S)[None, :] <= (torch.arange(T)[:, None] + start)
            s = s.masked_fill(~causal, float("-inf"))
            o = (torch.softmax(s, dim=-1) @ vr).transpose(0, 1).reshape(T, H * HD)
            x = x + o @ w[p + "self_attn.o_proj.weight"].T
            m = self.rms(x, p + "post_attention_layernorm.weight")
            g = m @ w[p + "mlp.gate_proj.weight"].T
            u = m @ w[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
        x = self.rms(x, "model.norm.weight")
        head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
        return x @ head.T, new_cache

    def empty_cache(self):
        z = torch.zeros(self.KVH, 0, self.HD, dtype=torch.float64)
        return [(z, z) for _ in range(self.cfg["num_hidden_layers"])]


# ---- the reference outputs ----

def outputs(model, vocab, seed):
    rng = np.random.default_rng(seed)
    seq = rng.integers(0, vocab, N).astype(np.int32)
    prefill, _ = model.forward(seq.tolist(), model.empty_cache())
    logits, cache = model.forward(seq[:P].tolist(), model.empty_cache())
    steps = []
    for t in range(P, N):
        logits, cache = model.forward([int(seq[t])], cache)
        steps.append(logits[0])
    decode = torch.stack(steps)
    prompt = rng.integers(0, vocab, PROMPT).astype(np.int32)
    logits, cache = model.forward(prompt.tolist(), model.empty_cache())
    greedy, gap = [], float("inf")
    for _ in range(GREEDY):
        row = logits[-1]
        top = torch.topk(row, 2).values
        gap = min(gap, float((top[0] - top[1]) / row.abs().max()))
        nxt = int(torch.argmax(row))
        greedy.append(nxt)
        logits, cache = model.forward([nxt], cache)
    # fp32 numerics are within ~1e-6 of this: a closer call would make the greedy test flaky.
    assert gap > 1e-4, "greedy continuation has a near tie (%g): pick another seed" % gap
    return {"seq": seq, "prefill": prefill.numpy().astype(np.float32), "decode": decode.numpy().astype(np.float32),
            "prompt": prompt, "greedy": np.array(greedy, dtype=np.int32)}


def save_outputs(d, outs):
    for name, a in outs.items():
        np.save(os.path.join(d, name + ".npy"), a)


def main():
    gpt2_cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 97, "n_embd": 64,
                "n_layer": 2, "n_head": 4, "n_positions": 64, "n_ctx": 64, "layer_norm_epsilon": 1e-5,
                "activation_function": "gelu_new", "n_inner": None, "tie_word_embeddings": True}
    llama_cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 101,
                 "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
                 "hidden_act": "silu", "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": True,
                 "attention_bias": False}

    d = os.path.join(OUT, "gpt2")
    os.makedirs(d, exist_ok=True)
    w = gpt2_weights(gpt2_cfg, 1)
    write_config(os.path.join(d, "config.json"), gpt2_cfg)
    write_safetensors(os.path.join(d, "model.safetensors"), {"transformer." + k: v for k, v in w.items()})
    save_outputs(d, outputs(Gpt2(gpt2_cfg, w), gpt2_cfg["vocab_size"], 21))

    d = os.path.join(OUT, "llama_tied")
    os.makedirs(d, exist_ok=True)
    w = llama_weights(llama_cfg, 2, True)
    write_config(os.path.join(d, "config.json"), llama_cfg)
    write_safetensors(os.path.join(d, "model.safetensors"), w)
    save_outputs(d, outputs(Llama(llama_cfg, w), llama_cfg["vocab_size"], 12))

    cfg = dict(llama_cfg, tie_word_embeddings=False, rope_theta=500000.0)
    d = os.path.join(OUT, "llama_sharded")
    os.makedirs(d, exist_ok=True)
    w = llama_weights(cfg, 3, False)
    write_config(os.path.join(d, "config.json"), cfg)
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    weight_map = {}
    for k, v in w.items():
        second = k.startswith("model.layers.1.") or k in ("model.norm.weight", "lm_head.weight")
        f = "model-0000%d-of-00002.safetensors" % (2 if second else 1)
        shards[f][k] = v
        weight_map[k] = f
    for f, t in shards.items():
        write_safetensors(os.path.join(d, f), t)
    total = sum(v.size * 2 for v in w.values())
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    save_outputs(d, outputs(Llama(cfg, w), cfg["vocab_size"], 13))


if __name__ == "__main__":
    main()
