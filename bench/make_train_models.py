#!/usr/bin/env python3
"""bench/make_train_models.py: the .oir training models of bench/train.

Writes a llama-style model (RMSNorm, RoPE, SwiGLU, causal sdpa, tied
classifier) or a GPT-2-style one (learned positions, layer_norm, fused qkv,
tanh gelu, tied classifier), each ending in cross_entropy against `targets`,
with the shapes given on the command line. The models are generated rather
than committed: at full size they are large and differ only in numbers.
Params are seeded random (normal), so orionc needs no weight files; the
PyTorch side of bench/train builds the same shapes with its own weights of
the same scales (the benchmark compares speed, not values).

  make_train_models.py llama OUT.oir --dim 288 --layers 6 --heads 6 --hidden 768 \
      --vocab 32000 --seq 256 --batch 4 --dtype fp32
  make_train_models.py gpt2 OUT.oir --dim 768 --layers 12 --heads 12 --vocab 50257 \
      --seq 64 --batch 4 --dtype fp16

For llama, the RoPE tables are inputs `cos` and `sin` ([1, 1, seq, head_dim]),
and the rotate-half step is a product with a fixed input `rot` ([head_dim,
head_dim], a signed permutation), or with --rope-concat the slice/neg/concat
form of examples/llama_block.oir (the same values; both compile with --train,
docs/training.md, "ANE legality"). `--names hf` names the llama's params as
Hugging Face's llama does (model.embed_tokens.weight,
model.layers.L.self_attn.q_proj.weight, ..., model.norm.weight; the head tied
to the embedding), so an exported model converts with orion-convert; `--logits`
writes the same forward returning `logits` instead of the loss (no `targets`),
the reference a converted export is checked against. `--rope DIR` writes
DIR/cos.npy, DIR/sin.npy and DIR/rot.npy (the standard library's struct; no
numpy needed).
"""
import argparse
import sys


# Param names: llama2.c's (Meta's checkpoint names) or Hugging Face llama's, so
# that `orion-run train --export` writes a model.safetensors orion-convert (and
# transformers) read as it is. Both use the rotate-half RoPE layout with
# theta 10000 (rope_tables below) and rms_norm epsilon EPS, Hugging Face's
# layout: no permutation of the q/k rows is needed between the two.
EPS = "1e-5"
NAMES = {
    "meta": {"attention_norm": "attention_norm", "wq": "attention.wq", "wk": "attention.wk",
             "wv": "attention.wv", "wo": "attention.wo", "ffn_norm": "ffn_norm",
             "w1": "feed_forward.w1", "w3": "feed_forward.w3", "w2": "feed_forward.w2",
             "embed": "tok_embeddings", "norm": "norm", "layers": "layers"},
    "hf": {"attention_norm": "input_layernorm", "wq": "self_attn.q_proj", "wk": "self_attn.k_proj",
           "wv": "self_attn.v_proj", "wo": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
           "w1": "mlp.gate_proj", "w3": "mlp.up_proj", "w2": "mlp.down_proj",
           "embed": "model.embed_tokens", "norm": "model.norm", "layers": "model.layers"},
}


def llama(a):
    D, H, F, V, T, B, t = a.dim, a.heads, a.hidden, a.vocab, a.seq, a.batch, a.dtype
    N = {k: v + ".weight" for k, v in NAMES[a.names].items() if k != "layers"}
    N["layers"] = NAMES[a.names]["layers"]
    hd, half = D // H, D // H // 2
    std = 0.02
    o = []
    o.append(f"// llama-style: dim {D}, {a.layers} layers, {H} heads, hidden {F}, vocab {V}, seq {T}, batch {B}, {t}")
    o.append(f"// (made by bench/make_train_models.py)")
    rot_in = "" if a.rope_concat else f", rot: {t}[{hd},{hd}]"
    rot_arg = "" if a.rope_concat else ", rot"
    o.append(f"func block(x: {t}[{B},{T},{D}], cos: {t}[1,1,{T},{hd}], sin: {t}[1,1,{T},{hd}]{rot_in}) {{")
    o.append(f"  param {N['attention_norm']}: {t}[{D}] = ones;")
    for i, n in enumerate(("wq", "wk", "wv", "wo")):
        o.append(f"  param {N[n]}: {t}[{D},{D}] = normal(seed={i + 1}, std={std});")
    o.append(f"  param {N['ffn_norm']}: {t}[{D}] = ones;")
    o.append(f"  param {N['w1']}: {t}[{F},{D}] = normal(seed=5, std={std});")
    o.append(f"  param {N['w3']}: {t}[{F},{D}] = normal(seed=6, std={std});")
    o.append(f"  param {N['w2']}: {t}[{D},{F}] = normal(seed=7, std={std});")
    o.append(f"  n: {t}[{B},{T},{D}] = rms_norm(x, {N['attention_norm']}, epsilon={EPS});")
    for n, w in (("q", "wq"), ("k", "wk"), ("v", "wv")):
        o.append(f"  {n} = linear(n, {N[w]});")
        o.append(f"  {n}4 = reshape({n}, shape=[{B}, {T}, {H}, {hd}]);")
        o.append(f"  {n}h: {t}[{B},{H},{T},{hd}] = transpose({n}4, perm=[0, 2, 1, 3]);")
    for n in ("q", "k"):
        if a.rope_concat:
            o.append(f"  {n}_lo = slice({n}h, begin=[0, 0, 0, 0], end=[{B}, {H}, {T}, {half}]);")
            o.append(f"  {n}_hi = slice({n}h, begin=[0, 0, 0, {half}], end=[{B}, {H}, {T}, {hd}]);")
            o.append(f"  {n}_hi_neg = neg({n}_hi);")
            o.append(f"  {n}_rot = concat({n}_hi_neg, {n}_lo, axis=-1);")
        else:  # the same rotation as a product with the signed permutation `rot` (exact: entries 0, 1, -1)
            o.append(f"  {n}_rot = matmul({n}h, rot);")
        o.append(f"  {n}_cos = mul({n}h, cos);")
        o.append(f"  {n}_sin = mul({n}_rot, sin);")
        o.append(f"  {n}r = add({n}_cos, {n}_sin);")
    o.append(f"  att: {t}[{B},{H},{T},{hd}] = sdpa(qr, kr, vh, causal=true);")
    o.append(f"  att_t = transpose(att, perm=[0, 2, 1, 3]);")
    o.append(f"  att_m: {t}[{B},{T},{D}] = reshape(att_t, shape=[{B}, {T}, {D}]);")
    o.append(f"  proj = linear(att_m, {N['wo']});")
    o.append(f"  h = add(x, proj);")
    o.append(f"  m = rms_norm(h, {N['ffn_norm']}, epsilon={EPS});")
    o.append(f"  gate = linear(m, {N['w1']});")
    o.append(f"  up = linear(m, {N['w3']});")
    o.append(f"  gate_act = silu(gate);")
    o.append(f"  gated = mul(gate_act, up);")
    o.append(f"  down = linear(gated, {N['w2']});")
    o.append(f"  y = add(h, down);")
    o.append(f"  return y;")
    o.append("}")
    o.append("")
    targets = "" if a.logits else f", targets: int32[{B},{T}]"
    o.append(f"func main(tokens: int32[{B},{T}]{targets}, cos: {t}[1,1,{T},{hd}], sin: {t}[1,1,{T},{hd}]{rot_in}) {{")
    o.append(f"  param {N['embed']}: {t}[{V},{D}] = normal(seed=100, std={std});")
    o.append(f"  param {N['norm']}: {t}[{D}] = ones;")
    o.append(f"  x: {t}[{B},{T},{D}] = gather({N['embed']}, tokens, axis=0);")
    prev = "x"
    for i in range(a.layers):
        o.append(f"  h{i} = call block({prev}, cos, sin{rot_arg}) as {N['layers']}.{i};")
        prev = f"h{i}"
    o.append(f"  hidden = rms_norm({prev}, {N['norm']}, epsilon={EPS});")
    o.append(f"  logits = linear(hidden, {N['embed']});")
    if a.logits:
        o.append(f"  return logits;")
        o.append("}")
        return "\n".join(o) + "\n"
    o.append(f"  loss: fp32[] = cross_entropy(logits, targets);")
    o.append(f"  return loss;")
    o.append("}")
    return "\n".join(o) + "\n"


def gpt2(a):
    D, H, V, T, B, t = a.dim, a.heads, a.vocab, a.seq, a.batch, a.dtype
    hd, F = D // H, 4 * D
    std = 0.02
    o = []
    o.append(f"// GPT-2-style: dim {D}, {a.layers} layers, {H} heads, MLP {F}, vocab {V}, seq {T}, batch {B}, {t}")
    o.append(f"// (made by bench/make_train_models.py)")
    o.append(f"func block(x: {t}[{B},{T},{D}]) {{")
    o.append(f"  param ln_1.weight: {t}[{D}] = ones;")
    o.append(f"  param ln_1.bias: {t}[{D}] = zeros;")
    o.append(f"  param attn.c_attn.weight: {t}[{3 * D},{D}] = normal(seed=1, std={std});")
    o.append(f"  param attn.c_attn.bias: {t}[{3 * D}] = zeros;")
    o.append(f"  param attn.c_proj.weight: {t}[{D},{D}] = normal(seed=2, std={std});")
    o.append(f"  param attn.c_proj.bias: {t}[{D}] = zeros;")
    o.append(f"  param ln_2.weight: {t}[{D}] = ones;")
    o.append(f"  param ln_2.bias: {t}[{D}] = zeros;")
    o.append(f"  param mlp.c_fc.weight: {t}[{F},{D}] = normal(seed=3, std={std});")
    o.append(f"  param mlp.c_fc.bias: {t}[{F}] = zeros;")
    o.append(f"  param mlp.c_proj.weight: {t}[{D},{F}] = normal(seed=4, std={std});")
    o.append(f"  param mlp.c_proj.bias: {t}[{D}] = zeros;")
    o.append(f"  ln1: {t}[{B},{T},{D}] = layer_norm(x, ln_1.weight, ln_1.bias, epsilon=1e-5);")
    o.append(f"  qkv = linear(ln1, attn.c_attn.weight, attn.c_attn.bias);")
    o.append(f"  q, k, v = split(qkv, axis=-1, num_splits=3);")
    for n in ("q", "k", "v"):
        o.append(f"  {n}4 = reshape({n}, shape=[{B}, {T}, {H}, {hd}]);")
        o.append(f"  {n}h: {t}[{B},{H},{T},{hd}] = transpose({n}4, perm=[0, 2, 1, 3]);")
    o.append(f"  att: {t}[{B},{H},{T},{hd}] = sdpa(qh, kh, vh, causal=true);")
    o.append(f"  att_t = transpose(att, perm=[0, 2, 1, 3]);")
    o.append(f"  att_m: {t}[{B},{T},{D}] = reshape(att_t, shape=[{B}, {T}, {D}]);")
    o.append(f"  proj = linear(att_m, attn.c_proj.weight, attn.c_proj.bias);")
    o.append(f"  a = add(x, proj);")
    o.append(f"  ln2 = layer_norm(a, ln_2.weight, ln_2.bias, epsilon=1e-5);")
    o.append(f"  fc = linear(ln2, mlp.c_fc.weight, mlp.c_fc.bias);")
    o.append(f"  act = gelu(fc, mode=\"tanh\");")
    o.append(f"  mlp_out = linear(act, mlp.c_proj.weight, mlp.c_proj.bias);")
    o.append(f"  y = add(a, mlp_out);")
    o.append(f"  return y;")
    o.append("}")
    o.append("")
    o.append(f"func main(tokens: int32[{B},{T}], targets: int32[{B},{T}]) {{")
    o.append(f"  param wte.weight: {t}[{V},{D}] = normal(seed=100, std={std});")
    o.append(f"  param wpe.weight: {t}[{T},{D}] = normal(seed=101, std=0.01);")
    o.append(f"  param ln_f.weight: {t}[{D}] = ones;")
    o.append(f"  param ln_f.bias: {t}[{D}] = zeros;")
    o.append(f"  e: {t}[{B},{T},{D}] = gather(wte.weight, tokens, axis=0);")
    o.append(f"  x = add(e, wpe.weight);")
    prev = "x"
    for i in range(a.layers):
        o.append(f"  h{i} = call block({prev}) as h.{i};")
        prev = f"h{i}"
    o.append(f"  hidden = layer_norm({prev}, ln_f.weight, ln_f.bias, epsilon=1e-5);")
    o.append(f"  logits = linear(hidden, wte.weight);")
    o.append(f"  loss: fp32[] = cross_entropy(logits, targets);")
    o.append(f"  return loss;")
    o.append("}")
    return "\n".join(o) + "\n"


def save_npy(path, shape, values, dtype):
    """A .npy v1 file as numpy.save writes it (the header padded to 128 bytes), without numpy."""
    import struct
    descr, code = ("<f2", "e") if dtype == "fp16" else ("<f4", "f")
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    head += " " * (128 - 10 - len(head) - 1) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack(f"<{len(values)}{code}", *values))


def rope_tables(a, out_dir):
    import math
    hd, half = a.dim // a.heads, a.dim // a.heads // 2
    inv = [1.0 / (10000.0 ** (2 * i / hd)) for i in range(half)]
    ang = [t * f for t in range(a.seq) for f in inv + inv]  # [T, hd], the rotate-half layout
    shape = (1, 1, a.seq, hd)
    save_npy(f"{out_dir}/cos.npy", shape, [math.cos(x) for x in ang], a.dtype)
    save_npy(f"{out_dir}/sin.npy", shape, [math.sin(x) for x in ang], a.dtype)
    rot = [0.0] * (hd * hd)
    for i in range(half):  # t @ rot = concat(-t[half:], t[:half])
        rot[(i + half) * hd + i] = -1.0
        rot[i * hd + i + half] = 1.0
    save_npy(f"{out_dir}/rot.npy", (hd, hd), rot, a.dtype)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kind", choices=("llama", "gpt2"))
    p.add_argument("out")
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--hidden", type=int, default=0)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32")
    p.add_argument("--rope", metavar="DIR")
    p.add_argument("--names", choices=("meta", "hf"), default="meta",
                   help="llama's param names: llama2.c's (default) or Hugging Face's (model.layers.L.self_attn.q_proj.weight, ...)")
    p.add_argument("--logits", action="store_true",
                   help="llama: the forward without the loss, returning `logits` (to compare a trained model's export)")
    p.add_argument("--rope-concat", action="store_true",
                   help="RoPE with slice/neg/concat (as examples/llama_block.oir) instead of a product with `rot`")
    a = p.parse_args()
    if a.dim % a.heads or (a.dim // a.heads) % 2:
        sys.exit("make_train_models.py: dim must be heads times an even head size")
    text = llama(a) if a.kind == "llama" else gpt2(a)
    with open(a.out, "w") as f:
        f.write(text)
    if a.rope:
        rope_tables(a, a.rope)


if __name__ == "__main__":
    main()
