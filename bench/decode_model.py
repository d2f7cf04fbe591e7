#!/usr/bin/env python3
"""bench/decode's model half: seeded random weights, decode inputs and the
decode program, and the PyTorch reference that runs the same weights.

    decode_model.py write MODEL WORK   weights.safetensors, the decode inputs
                                       (*.npy) and decode.oir in WORK
    decode_model.py torch MODEL WORK RUNS
                                       PyTorch: check its logits against
                                       orion's (WORK/out.fp32/logits.npy),
                                       then time one decode step, fp32 and
                                       fp16, at 1 and 2 threads

MODEL is gpt2 (GPT-2 124M: 12 layers, 768, 12 heads, vocab 50257, tied
head) or llama (Stories110M-shaped: dim 768, 12 layers, 12 heads, SwiGLU
hidden 2048, vocab 32000, RMSNorm, RoPE, separate head). The KV cache holds
C = 256 slots; the step decodes position POS = 128 over a cache whose first
POS slots hold (random) keys and values, as docs/generation.md's decode
contract has it: the cache and the mask are inputs, the new key and value
outputs, the softmax split over the cache and the new token.
"""
import json
import struct
import sys
import time

import numpy as np

C, POS, D, L, H, HD = 256, 128, 768, 12, 12, 64
SPEC = {
    "gpt2": {"vocab": 50257, "ff": 3072, "ctx": 1024},
    "llama": {"vocab": 32000, "ff": 2048, "ctx": 2048},
}


def weights(model):
    """The params by name (fp16 values as float32 arrays), seeded."""
    s = SPEC[model]
    rng = np.random.default_rng(2026 if model == "gpt2" else 2027)
    n = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)
    g = lambda k: (1 + 0.1 * rng.standard_normal(k)).astype(np.float32)
    t = {}
    if model == "gpt2":
        t["wte.weight"], t["wpe.weight"] = n(s["vocab"], D), n(s["ctx"], D)
        for i in range(L):
            p = f"h.{i}."
            t[p + "ln_1.weight"], t[p + "ln_1.bias"] = g(D), n(D)
            t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = n(3 * D, D), n(3 * D)
            t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = n(D, D), n(D)
            t[p + "ln_2.weight"], t[p + "ln_2.bias"] = g(D), n(D)
            t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = n(s["ff"], D), n(s["ff"])
            t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = n(D, s["ff"]), n(D)
        t["ln_f.weight"], t["ln_f.bias"] = g(D), n(D)
    else:
        t["embed_tokens.weight"] = n(s["vocab"], D)
        for i in range(L):
            p = f"layers.{i}."
            t[p + "input_layernorm.weight"] = g(D)
            for k in "qkvo":
                t[p + f"self_attn.{k}_proj.weight"] = n(D, D)
            t[p + "post_attention_layernorm.weight"] = g(D)
            t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = n(s["ff"], D), n(s["ff"], D)
            t[p + "mlp.down_proj.weight"] = n(D, s["ff"])
        t["norm.weight"], t["lm_head.weight"] = g(D), n(s["vocab"], D)
        inv = 1.0 / (10000.0 ** (np.arange(0, HD, 2) / HD))
        ang = np.outer(np.arange(C), inv)  # [C, HD/2]; each half of a head rotates by the same angles
        t["rope.cos"] = np.concatenate([np.cos(ang), np.cos(ang)], axis=1).astype(np.float32)
        t["rope.sin"] = np.concatenate([np.sin(ang), np.sin(ang)], axis=1).astype(np.float32)
        rot = np.zeros((HD, HD), dtype=np.float32)  # x @ rot = concat(-x[HD/2:], x[:HD/2])
        for j in range(HD // 2):
            rot[j + HD // 2, j], rot[j, j + HD // 2] = -1, 1
        t["rope.rot"] = rot
    return {k: v.astype(np.float16).astype(np.float32) for k, v in t.items()}


def inputs(model):
    rng = np.random.default_rng(7)
    x = {"token": np.array([[1234]], dtype=np.int32), "pos": np.array([POS], dtype=np.int32)}
    mask = np.full((1, 1, 1, C), -30000, dtype=np.float16)
    mask[..., :POS] = 0
    x["mask"] = mask
    for i in range(L):
        for kv in "kv":
            c = np.zeros((1, H, C, HD), dtype=np.float16)
            c[:, :, :POS] = rng.standard_normal((1, H, POS, HD)).astype(np.float16)
            x[f"cache.{i}.{kv}"] = c
    return x


def write_safetensors(path, t):
    header, blobs, off = {}, [], 0
    for k, v in t.items():
        b = v.astype(np.float16).tobytes()
        header[k] = {"dtype": "F16", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st(name, shape):
    return f'safetensors("weights.safetensors", "{name}")'


def attention_lines(q, k, v):
    """softmax over the cache (masked) and the new token in two parts, then the weighted values."""
    return f"""  const scale: fp16[] = 0.125;
  qs = mul({q}, scale);
  sc: fp16[1,{H},1,{C}] = matmul(qs, ck, transpose_y=true);
  scm = add(sc, mask);
  sn: fp16[1,{H},1,1] = matmul(qs, {k}, transpose_y=true);
  mc: fp16[1,{H},1,1] = reduce_max(scm, axes=[-1], keep_dims=true);
  m = maximum(mc, sn);
  dc = sub(scm, m);
  ec = exp(dc);
  dn = sub(sn, m);
  en = exp(dn);
  sumc: fp16[1,{H},1,1] = reduce_sum(ec, axes=[-1], keep_dims=true);
  tot = add(sumc, en);
  pv: fp16[1,{H},1,{HD}] = matmul(ec, cv);
  nv = mul({v}, en);
  num = add(pv, nv);
  att = div(num, tot);
  att_t = transpose(att, perm=[0, 2, 1, 3]);
  att_m: fp16[1,1,{D}] = reshape(att_t, shape=[1, 1, {D}]);
"""


def heads(names):
    out = ""
    for n in names:
        out += f"  {n}4 = reshape({n}, shape=[1, 1, {H}, {HD}]);\n"
        out += f"  {n}h: fp16[1,{H},1,{HD}] = transpose({n}4, perm=[0, 2, 1, 3]);\n"
    return out


def oir(model):
    s = SPEC[model]
    cache = f"fp16[1,{H},{C},{HD}]"
    lines = []
    if model == "gpt2":
        P = lambda name, shape: f"  param {name}: fp16[{shape}] = {st('{scope}.' + name, shape)};"
        lines += [f"func block(x: fp16[1,1,{D}], mask: fp16[1,1,1,{C}], ck: {cache}, cv: {cache}) {{"]
        lines += [P("ln_1.weight", D), P("ln_1.bias", D), P("attn.c_attn.weight", f"{3 * D},{D}"),
                  P("attn.c_attn.bias", 3 * D), P("attn.c_proj.weight", f"{D},{D}"), P("attn.c_proj.bias", D),
                  P("ln_2.weight", D), P("ln_2.bias", D), P("mlp.c_fc.weight", f"{s['ff']},{D}"),
                  P("mlp.c_fc.bias", s["ff"]), P("mlp.c_proj.weight", f"{D},{s['ff']}"), P("mlp.c_proj.bias", D)]
        body = f"""  ln1: fp16[1,1,{D}] = layer_norm(x, ln_1.weight, ln_1.bias, epsilon=1e-5);
  qkv: fp16[1,1,{3 * D}] = linear(ln1, attn.c_attn.weight, attn.c_attn.bias);
  q, k, v = split(qkv, axis=-1, num_splits=3);
""" + heads("qkv") + attention_lines("qh", "kh", "vh") + f"""  proj = linear(att_m, attn.c_proj.weight, attn.c_proj.bias);
  a = add(x, proj);
  ln2 = layer_norm(a, ln_2.weight, ln_2.bias, epsilon=1e-5);
  fc: fp16[1,1,{s['ff']}] = linear(ln2, mlp.c_fc.weight, mlp.c_fc.bias);
  act = gelu(fc, mode="tanh");
  mo: fp16[1,1,{D}] = linear(act, mlp.c_proj.weight, mlp.c_proj.bias);
  y = add(a, mo);
  return y, kh, vh;
}}"""
        lines.append(body)
        args = ", ".join(f"cache.{i}.k: {cache}, cache.{i}.v: {cache}" for i in range(L))
        lines.append(f"func decode(token: int32[1,1], pos: int32[1], mask: fp16[1,1,1,{C}], {args}) {{")
        lines.append(f"  param wte: fp16[{s['vocab']},{D}] = {st('wte.weight', 0)};")
        lines.append(f"  param wpe: fp16[{s['ctx']},{D}] = {st('wpe.weight', 0)};")
        lines.append(f"  param ln_f.weight: fp16[{D}] = {st('ln_f.weight', 0)};")
        lines.append(f"  param ln_f.bias: fp16[{D}] = {st('ln_f.bias', 0)};")
        lines.append(f"  te: fp16[1,1,{D}] = gather(wte, token, axis=0);")
        lines.append(f"  pe: fp16[1,{D}] = gather(wpe, pos, axis=0);")
        lines.append("  x0 = add(te, pe);")
        for i in range(L):
            lines.append(f"  x{i + 1}, nk{i}, nv{i} = call block(x{i}, mask, cache.{i}.k, cache.{i}.v) as h.{i};")
        lines.append(f"  hf = layer_norm(x{L}, ln_f.weight, ln_f.bias, epsilon=1e-5);")
        lines.append(f"  lg: fp16[1,1,{s['vocab']}] = linear(hf, wte);")
    else:
        P = lambda name, shape: f"  param {name}: fp16[{shape}] = {st('{scope}.' + name, shape)};"
        rope = f"fp16[1,1,1,{HD}]"
        lines += [f"func block(x: fp16[1,1,{D}], mask: fp16[1,1,1,{C}], ck: {cache}, cv: {cache}, cos: {rope}, "
                  f"sin: {rope}, rot: fp16[{HD},{HD}]) {{"]
        lines += [P("input_layernorm.weight", D)] + [P(f"self_attn.{k}_proj.weight", f"{D},{D}") for k in "qkvo"]
        lines += [P("post_attention_layernorm.weight", D), P("mlp.gate_proj.weight", f"{s['ff']},{D}"),
                  P("mlp.up_proj.weight", f"{s['ff']},{D}"), P("mlp.down_proj.weight", f"{D},{s['ff']}")]
        # rotate_half as a product with a signed permutation (rot): a concat of the halves would make the
        # compiler's split-concat cut the q.k^T product, and with it the cache, in two.
        rot = ""
        for n in "qk":
            rot += f"""  {n}_rot: fp16[1,{H},1,{HD}] = matmul({n}h, rot);
  {n}_c = mul({n}h, cos);
  {n}_s = mul({n}_rot, sin);
  {n}r = add({n}_c, {n}_s);
"""
        body = f"""  n: fp16[1,1,{D}] = rms_norm(x, input_layernorm.weight, epsilon=1e-5);
  q = linear(n, self_attn.q_proj.weight);
  k = linear(n, self_attn.k_proj.weight);
  v = linear(n, self_attn.v_proj.weight);
""" + heads("qkv") + rot + attention_lines("qr", "kr", "vh") + f"""  o = linear(att_m, self_attn.o_proj.weight);
  h = add(x, o);
  mn: fp16[1,1,{D}] = rms_norm(h, post_attention_layernorm.weight, epsilon=1e-5);
  gate: fp16[1,1,{s['ff']}] = linear(mn, mlp.gate_proj.weight);
  up: fp16[1,1,{s['ff']}] = linear(mn, mlp.up_proj.weight);
  ga = silu(gate);
  gu = mul(ga, up);
  down: fp16[1,1,{D}] = linear(gu, mlp.down_proj.weight);
  y = add(h, down);
  return y, kr, vh;
}}"""
        lines.append(body)
        args = ", ".join(f"cache.{i}.k: {cache}, cache.{i}.v: {cache}" for i in range(L))
        lines.append(f"func decode(token: int32[1,1], pos: int32[1], mask: fp16[1,1,1,{C}], {args}) {{")
        lines.append(f"  param embed_tokens.weight: fp16[{s['vocab']},{D}] = {st('embed_tokens.weight', 0)};")
        lines.append(f"  param norm.weight: fp16[{D}] = {st('norm.weight', 0)};")
        lines.append(f"  param lm_head.weight: fp16[{s['vocab']},{D}] = {st('lm_head.weight', 0)};")
        lines.append(f"  param rope.cos: fp16[{C},{HD}] = {st('rope.cos', 0)};")
        lines.append(f"  param rope.sin: fp16[{C},{HD}] = {st('rope.sin', 0)};")
        lines.append(f"  param rope.rot: fp16[{HD},{HD}] = {st('rope.rot', 0)};")
        lines.append(f"  x0: fp16[1,1,{D}] = gather(embed_tokens.weight, token, axis=0);")
        lines.append(f"  cr: fp16[1,{HD}] = gather(rope.cos, pos, axis=0);")
        lines.append(f"  sr: fp16[1,{HD}] = gather(rope.sin, pos, axis=0);")
        lines.append(f"  cos: {rope} = reshape(cr, shape=[1, 1, 1, {HD}]);")
        lines.append(f"  sin: {rope} = reshape(sr, shape=[1, 1, 1, {HD}]);")
        for i in range(L):
            lines.append(f"  x{i + 1}, nk{i}, nv{i} = call block(x{i}, mask, cache.{i}.k, cache.{i}.v, cos, sin, rope.rot) "
                         f"as layers.{i};")
        lines.append(f"  hf = rms_norm(x{L}, norm.weight, epsilon=1e-5);")
        lines.append(f"  lg: fp16[1,1,{s['vocab']}] = linear(hf, lm_head.weight);")
    lines.append(f"  logits: fp32[1,1,{s['vocab']}] = cast(lg, dtype=\"fp32\");")
    rets = ", ".join(f"new.{i}.k = nk{i}, new.{i}.v = nv{i}" for i in range(L))
    lines.append(f"  return logits, {rets};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(model, work):
    write_safetensors(f"{work}/weights.safetensors", weights(model))
    for k, v in inputs(model).items():
        np.save(f"{work}/{k}.npy", v)
    with open(f"{work}/decode.oir", "w") as f:
        f.write(oir(model))


def torch_step(model, W, x, dtype):
    """One decode step with a KV cache, as an inference loop runs it: the new
    key and value written into slot POS of the cache, attention over slots
    0..POS. Returns a closure that runs it and returns the logits."""
    import torch
    F = torch.nn.functional
    W = {k: torch.from_numpy(v).to(dtype) for k, v in W.items()}
    cache = {k: torch.from_numpy(v.astype(np.float32)).to(dtype) for k, v in x.items() if k.startswith("cache.")}
    tok, pos = int(x["token"][0, 0]), POS

    def split_heads(t):
        return t.reshape(1, 1, H, HD).transpose(1, 2)

    def attend(i, q, k, v):
        ck, cv = cache[f"cache.{i}.k"], cache[f"cache.{i}.v"]
        ck[:, :, pos], cv[:, :, pos] = k[:, :, 0], v[:, :, 0]
        a = torch.softmax(q @ ck[:, :, :pos + 1].transpose(-1, -2) / 8.0, dim=-1) @ cv[:, :, :pos + 1]
        return a.transpose(1, 2).reshape(1, 1, D)

    if model == "gpt2":
        def step():
            h = W["wte.weight"][tok].reshape(1, 1, D) + W["wpe.weight"][pos]
            for i in range(L):
                p = lambda s: W[f"h.{i}.{s}"]
                n = F.layer_norm(h, (D,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
                q, k, v = (split_heads(t) for t in F.linear(n, p("attn.c_attn.weight"), p("attn.c_attn.bias")).split(D, -1))
                h = h + F.linear(attend(i, q, k, v), p("attn.c_proj.weight"), p("attn.c_proj.bias"))
                n = F.layer_norm(h, (D,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
                m = F.gelu(F.linear(n, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")), approximate="tanh")
                h = h + F.linear(m, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
            h = F.layer_norm(h, (D,), W["ln_f.weight"], W["ln_f.bias"], 1e-5)
            return F.linear(h, W["wte.weight"])
    else:
        cos, sin = W["rope.cos"][pos], W["rope.sin"][pos]

        def rms(t, w):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w

        def rope(t):
            return t * cos + torch.cat([-t[..., HD // 2:], t[..., :HD // 2]], -1) * sin

        def step():
            h = W["embed_tokens.weight"][tok].reshape(1, 1, D)
            for i in range(L):
                p = lambda s: W[f"layers.{i}.{s}"]
                n = rms(h, p("input_layernorm.weight"))
                q, k, v = (split_heads(F.linear(n, p(f"self_attn.{c}_proj.weight"))) for c in "qkv")
                h = h + F.linear(attend(i, rope(q), rope(k), v), p("self_attn.o_proj.weight"))
                n = rms(h, p("post_attention_layernorm.weight"))
                g = F.silu(F.linear(n, p("mlp.gate_proj.weight"))) * F.linear(n, p("mlp.up_proj.weight"))
                h = h + F.linear(g, p("mlp.down_proj.weight"))
            return F.linear(rms(h, W["norm.weight"]), W["lm_head.weight"])
    return step


def torch_bench(model, work, runs):
    import torch
    print(f"torch_version {torch.__version__}")
    W, x = weights(model), inputs(model)
    with torch.inference_mode():
        ref = torch_step(model, W, x, torch.float32)().numpy().reshape(-1)
        for mode in ("fp32", "ane"):
            got = np.load(f"{work}/out.{mode}/logits.npy").astype(np.float32).reshape(-1)
            print(f"err_{mode} {np.abs(got - ref).max() / np.abs(ref).max():.3g}")
        for name, dt in (("fp32", torch.float32), ("fp16", torch.float16)):
            try:
                step = torch_step(model, W, x, dt)
                step()
            except RuntimeError as e:  # CPU half kernels are missing in some builds
                print(f"torch_{name}_error {str(e).splitlines()[0].replace(' ', '_')}")
                continue
            for th in (1, 2):
                torch.set_num_threads(th)
                step()
                best = 1e30
                for _ in range(runs):
                    t0 = time.perf_counter()
                    step()
                    best = min(best, time.perf_counter() - t0)
                print(f"torch_{name}_{th} {best:.6f}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        torch_bench(sys.argv[2], sys.argv[3], int(sys.argv[4]))
