#!/usr/bin/python3
"""Writes the end-to-end fixtures of testsuite/e2e: inputs and expected outputs
of every example in examples/ and of the corpus programs of ../shared/corpus/mil
that the CPU backend can run (or will, once its remaining ops land).

The expected outputs are computed here, independently of orion: weights are
rebuilt with the numpy generator of docs/weights.md (run from that page),
and each program's graph is written out again in numpy from its source (the
.oir example, or the MIL text of the corpus program), in float64. Nothing of
orion runs. The test (testsuite/cli/e2e.sh, e2e_corpus.sh) then compiles and
runs the programs with orion and compares with testsuite/e2e/npy_compare, so
the suite itself needs no numpy.

Run with Debian's python3 (the one that has numpy), from anywhere:

    /usr/bin/python3 testsuite/e2e/make_fixtures.py

It overwrites testsuite/e2e/examples/ and testsuite/e2e/corpus/; the output is
deterministic (fixed seeds), so running it again changes nothing.
"""
import math
import os
import re
import struct
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MASK64 = (1 << 64) - 1

# ---- the weight generator of docs/weights.md ("In numpy"), run as the doc has it ----

_doc = open(os.path.join(HERE, "..", "..", "docs", "weights.md"), encoding="utf-8").read()
_generator = {}
exec(re.search(r"### In numpy\n\n```python\n(.*?)```", _doc, re.S).group(1), _generator)
normal = _generator["normal"]

# ---- seeds of called functions (docs/language.md, section 8) ----


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def derive_seed(seed, instance):
    """One SplitMix64 step from seed XOR fnv1a64(instance), low 47 bits."""
    z = ((seed ^ fnv1a64(instance)) + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFF

# ---- numerics helpers (float64 throughout) ----


def f16(a):
    """Values as an fp16 tensor holds them (one rounding, ties to even)."""
    return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)


def param_normal(seed, std, shape, instance=None):
    """An fp16 param = normal(seed, std); seeds of inlined calls are derived."""
    if instance is not None:
        seed = derive_seed(seed, instance)
    return f16(normal(seed, 0.0, std, shape))


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def layer_norm(x, gamma, beta, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gamma


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention(q, k, v, causal, mask=None):
    """softmax(q k^T / sqrt(E) + mask) v; causal keeps key j <= query i."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    return softmax(s) @ v


def heads(t, n_heads):
    """[1, S, H*D] -> [1, H, S, D]."""
    b, s, c = t.shape
    return t.reshape(b, s, n_heads, c // n_heads).transpose(0, 2, 1, 3)


def merge_heads(t):
    """[1, H, S, D] -> [1, S, H*D]."""
    b, h, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * d)

# ---- writing files ----


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)


def write_blob_file(path, tensors):
    """Apple's MIL blob storage, version 2 (reference/mil-spec.md 2.1-2.3):
    a 64-byte header (count, version 2), then per tensor a 64-byte record
    (sentinel, dtype code, size, absolute data offset) and the data, each record
    64-byte aligned, nothing after the last data. Returns each record's offset."""
    codes = {np.dtype(np.float16): 1, np.dtype(np.float32): 2, np.dtype(np.uint8): 3,
             np.dtype(np.int8): 4, np.dtype(np.int32): 14}
    out = bytearray(64)
    offsets = []
    for t in tensors:
        t = np.ascontiguousarray(t)
        meta = (len(out) + 63) // 64 * 64
        out.extend(bytes(meta - len(out)))
        data = t.astype(t.dtype.newbyteorder("<")).tobytes()
        out.extend(struct.pack("<IIQQQ32x", 0xDEADBEEF, codes[t.dtype], len(data), meta + 64, 0))
        out.extend(data)
        offsets.append(meta)
    out[0:8] = struct.pack("<II", len(tensors), 2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(out)
    return offsets

# ---- the examples (examples/*.oir) ----


def tiny_mlp(rng):
    d = os.path.join(HERE, "examples", "tiny_mlp")
    x = f16(rng.standard_normal((1, 16)))
    w1, b1 = param_normal(1, 0.25, (32, 16)), np.zeros(32)
    w2, b2 = param_normal(2, 0.18, (10, 32)), np.zeros(10)
    probs = softmax(linear(gelu_tanh(linear(x, w1, b1)), w2, b2))
    save(os.path.join(d, "x.npy"), x.astype(np.float16))
    save(os.path.join(d, "probs.npy"), probs.astype(np.float32))


def gpt2_block_fn(x, inst):
    """block() of examples/gpt2_block.oir, called `as inst` (biases zeros,
    layer norm gamma ones and beta zeros)."""
    c = 768
    w_attn = param_normal(1, 0.02, (3 * c, c), inst)
    w_proj = param_normal(2, 0.02, (c, c), inst)
    w_fc = param_normal(3, 0.02, (4 * c, c), inst)
    w_out = param_normal(4, 0.02, (c, 4 * c), inst)
    ones, zeros = np.ones(c), np.zeros(c)
    qkv = linear(layer_norm(x, ones, zeros, 1e-5), w_attn)
    q, k, v = np.split(qkv, 3, axis=-1)
    att = attention(heads(q, 12), heads(k, 12), heads(v, 12), causal=True)
    a = x + linear(merge_heads(att), w_proj)
    return a + linear(gelu_tanh(linear(layer_norm(a, ones, zeros, 1e-5), w_fc)), w_out)


def gpt2_block(rng):
    d = os.path.join(HERE, "examples", "gpt2_block")
    x = f16(rng.standard_normal((1, 64, 768)))
    h1 = gpt2_block_fn(gpt2_block_fn(x, "h.0"), "h.1")
    hidden = layer_norm(h1, np.ones(768), np.zeros(768), 1e-5)
    save(os.path.join(d, "x.npy"), x.astype(np.float16))
    save(os.path.join(d, "hidden.npy"), hidden.astype(np.float32))


def rope_tables(seq, dim):
    """Hugging Face Llama's tables: angle pos * 10000^(-2i/dim), halves repeated."""
    inv = 10000.0 ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(seq, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    return f16(np.cos(ang)).reshape(1, 1, seq, dim), f16(np.sin(ang)).reshape(1, 1, seq, dim)


def llama_block_fn(x, cos, sin, inst):
    """block() of examples/llama_block.oir, called `as inst`."""
    c, hid = 768, 2048
    wq = param_normal(1, 0.02, (c, c), inst)
    wk = param_normal(2, 0.02, (c, c), inst)
    wv = param_normal(3, 0.02, (c, c), inst)
    wo = param_normal(4, 0.02, (c, c), inst)
    wg = param_normal(5, 0.02, (hid, c), inst)
    wu = param_normal(6, 0.02, (hid, c), inst)
    wd = param_normal(7, 0.02, (c, hid), inst)

    def rope(t):  # t * cos + concat(-t[..., 32:], t[..., :32]) * sin
        return t * cos + np.concatenate([-t[..., 32:], t[..., :32]], axis=-1) * sin

    n = rms_norm(x, np.ones(c), 1e-5)
    q, k, v = heads(linear(n, wq), 12), heads(linear(n, wk), 12), heads(linear(n, wv), 12)
    h = x + linear(merge_heads(attention(rope(q), rope(k), v, causal=True)), wo)
    m = rms_norm(h, np.ones(c), 1e-5)
    return h + linear(silu(linear(m, wg)) * linear(m, wu), wd)


LLAMA_ROWS = [0, 21, 42, 63]  # positions of the logits kept in the fixture


def llama_block(rng):
    d = os.path.join(HERE, "examples", "llama_block")
    tokens = rng.integers(0, 32000, size=(1, 64)).astype(np.int32)
    cos, sin = rope_tables(64, 64)
    embed = param_normal(100, 0.02, (32000, 768))  # a param of main: its own seed
    x = embed[tokens[0]][None]
    h1 = llama_block_fn(llama_block_fn(x, cos, sin, "layers.0"), cos, sin, "layers.1")
    logits = linear(rms_norm(h1, np.ones(768), 1e-5), embed)[0]  # [64, 32000]
    save(os.path.join(d, "tokens.npy"), tokens)
    save(os.path.join(d, "cos.npy"), cos.astype(np.float16))
    save(os.path.join(d, "sin.npy"), sin.astype(np.float16))
    # 4 MB of logits is too much to commit: a few whole rows, and every row's L2 norm.
    save(os.path.join(d, "logits_rows.npy"), logits[LLAMA_ROWS].astype(np.float32))
    save(os.path.join(d, "logits_norms.npy"), np.sqrt((logits ** 2).sum(axis=-1)).astype(np.float32))

# ---- corpus programs (../shared/corpus/mil, read from their MIL text) ----
#
# Each corpus/NAME directory holds in.X.npy per input X (MIL name), out.Y.npy per
# output Y, and weights/ with the blob files the MIL names (the corpus has no
# weight files: ours are random). The MIL file itself is not copied: the test
# copies it from ../shared at run time.


def corpus_dir(name):
    return os.path.join(HERE, "corpus", name)


def c_add_model(rng):
    # var_3 = mul(x, y) on fp16 [1, 10].
    d = corpus_dir("coremlc_add_model_ios16")
    x, y = f16(rng.standard_normal((1, 10))), f16(rng.standard_normal((1, 10)))
    save(os.path.join(d, "in.x.npy"), x.astype(np.float16))
    save(os.path.join(d, "in.y.npy"), y.astype(np.float16))
    save(os.path.join(d, "out.var_3.npy"), (x * y).astype(np.float32))


def conv1x1(x, w):
    """conv of [1, Ci, H, W] with a [Co, Ci, 1, 1] weight, valid, stride 1."""
    return np.einsum("oi,bihw->bohw", w[:, :, 0, 0], x)


def c_conv_fp32io(rng):
    # y = cast_fp32(conv(cast_fp16(x), W)), W [64, 64, 1, 1] fp16 at offset 64.
    d = corpus_dir("ane_maderix_conv_fp32io")
    x = rng.standard_normal((1, 64, 1, 16)).astype(np.float32)  # not fp16-exact: the cast rounds
    w = f16(rng.standard_normal((64, 64, 1, 1)) / 8)
    assert write_blob_file(os.path.join(d, "weights", "weight.bin"), [w.astype(np.float16)]) == [64]
    save(os.path.join(d, "in.x.npy"), x)
    save(os.path.join(d, "out.y.npy"), conv1x1(f16(x), w).astype(np.float32))


def c_qkv(rng):
    # q, k, v = three 1x1 convs of cast_fp16(x); weights at 64, 8320, 16576 of one file.
    d = corpus_dir("ane_maderix_qkv_three_outputs")
    x = rng.standard_normal((1, 64, 1, 16)).astype(np.float32)
    ws = [f16(rng.standard_normal((64, 64, 1, 1)) / 8) for _ in range(3)]
    offs = write_blob_file(os.path.join(d, "weights", "weight.bin"), [w.astype(np.float16) for w in ws])
    assert offs == [64, 8320, 16576], offs
    save(os.path.join(d, "in.x.npy"), x)
    for name, w in zip("qkv", ws):
        save(os.path.join(d, "out.%s.npy" % name), conv1x1(f16(x), w).astype(np.float32))


def c_sdpa_fwd_taps(rng):
    # RMS norm (reduce_sum/pow), q/k/v 1x1 convs, 4 heads of 16 over 16 positions,
    # scores * 0.25 + blob mask, softmax, output conv, and the taps concatenated.
    d = corpus_dir("ane_maderix_sdpa_fwd_taps")
    x = f16(rng.standard_normal((1, 64, 1, 16)))
    rw = f16(1.0 + 0.1 * rng.standard_normal((1, 64, 1, 1)))
    wq, wk, wv, wo = (f16(rng.standard_normal((64, 64, 1, 1)) / 8) for _ in range(4))
    mask = np.where(np.tril(np.ones((16, 16), bool)), 0.0, -10000.0).reshape(1, 1, 16, 16)
    for fname, t in (("rms1", rw), ("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo), ("mask", mask)):
        write_blob_file(os.path.join(d, "weights", fname + ".bin"), [t.astype(np.float16)])
    ss = (x * x).sum(axis=1, keepdims=True)
    rrms = (ss * f16(0.015625) + f16(0.00001)) ** -0.5
    xn = x * rrms * rw
    qf, kf, vf = conv1x1(xn, wq), conv1x1(xn, wk), conv1x1(xn, wv)

    def split(t):  # reshape [1,64,1,16] -> [1,4,16,16], transpose [0,1,3,2]
        return t.reshape(1, 4, 16, 16).transpose(0, 1, 3, 2)

    q, k, v = split(qf), split(kf), split(vf)
    aw = softmax(q @ k.transpose(0, 1, 3, 2) * f16(0.25) + mask)
    af = (aw @ v).transpose(0, 1, 3, 2).reshape(1, 64, 1, 16)
    out = np.concatenate([conv1x1(af, wo), qf, kf, vf, af, xn], axis=1)
    save(os.path.join(d, "in.x.npy"), x.astype(np.float16))
    save(os.path.join(d, "out.out.npy"), out.astype(np.float32))


def c_layernorm_linear_gelu(rng):
    # Layer norm over channels (reduce_mean/sub/pow), 1x1 conv 64 -> 256 plus
    # bias, and GELU's tanh form with the program's fp16 constants.
    d = corpus_dir("ane_orion_layernorm_linear_gelu")
    x = f16(rng.standard_normal((1, 64, 1, 16)))
    g = f16(1.0 + 0.1 * rng.standard_normal((1, 64, 1, 1)))
    b = f16(0.1 * rng.standard_normal((1, 64, 1, 1)))
    w = f16(rng.standard_normal((256, 64, 1, 1)) / 8)
    fb = f16(0.1 * rng.standard_normal((1, 256, 1, 1)))
    for fname, t in (("ln_g", g), ("ln_b", b), ("fc_w", w), ("fc_b", fb)):
        write_blob_file(os.path.join(d, "weights", fname + ".bin"), [t.astype(np.float16)])
    cent = x - x.mean(axis=1, keepdims=True)
    var = (cent * cent).mean(axis=1, keepdims=True)
    ln_out = cent * (var + f16(0.000010)) ** -0.5 * g + b
    fc = conv1x1(ln_out, w) + fb
    inner = (fc + fc * fc * fc * f16(0.044715)) * f16(0.7979)
    act = fc * f16(0.5) * (np.tanh(inner) + 1.0)
    save(os.path.join(d, "in.x.npy"), x.astype(np.float16))
    save(os.path.join(d, "out.act_out.npy"), act.astype(np.float32))
    save(os.path.join(d, "out.ln_out.npy"), ln_out.astype(np.float32))


def c_sdpa_op_blobmask(rng):
    # scaled_dot_product_attention(q, k, v, attn_mask = a [1,1,16,16] fp16 blob):
    # softmax(q k^T / sqrt(16) + mask) v, the float mask added as it is.
    d = corpus_dir("ane_maderix_sdpa_op_blobmask")
    q, k, v = (f16(rng.standard_normal((1, 4, 16, 16))) for _ in range(3))
    mask = np.where(np.tril(np.ones((16, 16), bool)), 0.0, -10000.0).reshape(1, 1, 16, 16)
    write_blob_file(os.path.join(d, "weights", "mask.bin"), [mask.astype(np.float16)])
    for name, t in (("q", q), ("k", k), ("v", v)):
        save(os.path.join(d, "in.%s.npy" % name), t.astype(np.float16))
    save(os.path.join(d, "out.att.npy"), attention(q, k, v, causal=False, mask=mask).astype(np.float32))


def c_argmax(rng):
    # index = reduce_argmax(logits, axis -1, keep_dims), score = reduce_max(...);
    # the maximum is made unique (and far from the rest) so the index is unambiguous.
    d = corpus_dir("coremlc_argmax_two_outputs_ios16")
    logits = f16(rng.standard_normal(1025))
    top = int(rng.integers(0, 1025))
    logits[top] = 8.0
    save(os.path.join(d, "in.logits.npy"), logits.astype(np.float16))
    save(os.path.join(d, "out.index.npy"), np.array([top], np.int32))
    save(os.path.join(d, "out.score.npy"), np.array([8.0], np.float32))


def c_int8_quant(rng):
    # W0, W1 = constexpr_affine_dequantize(int8 blobs at 64 and 4224, scale 1/8, zero point 0);
    # c0 = conv(x, W0); q0 = quantize(c0, scale 1/8, int8); dq0 = dequantize(q0, scale 1/8);
    # c1 = conv(dq0, W1). quantize is clip(round(c0 / scale) + zero_point) with NumPy's
    # around (half to even), as coremltools' iOS17 quantize defines it. x is on a 1/8 grid and
    # W0 an integer over 8, so c0 is a multiple of 1/64 held exactly in fp16 wherever it is not clipped
    # (|c0| < 16): both numerics modes see the same c0, and the ties (c0 / scale = k + 1/2)
    # really are ties; the asserts below make sure ties and clipping both happen.
    d = corpus_dir("ane_maderix_int8_constexpr_quant")
    x = rng.integers(-16, 17, size=(1, 64, 8, 8)) / 8.0
    q_w0 = rng.integers(-8, 9, size=(64, 64, 1, 1)).astype(np.int8)
    q_w1 = rng.integers(-128, 128, size=(64, 64, 1, 1)).astype(np.int8)
    offs = write_blob_file(os.path.join(d, "weights", "weight.bin"), [q_w0, q_w1])
    assert offs == [64, 4224], offs
    w0, w1 = q_w0.astype(np.float64) / 8, q_w1.astype(np.float64) / 8
    c0 = conv1x1(x, w0)
    t = c0 / 0.125
    assert np.any(np.abs(t - np.floor(t) - 0.5) == 0) and np.any(np.abs(t) > 128)
    q0 = np.clip(np.around(t), -128, 127)
    c1 = conv1x1(q0 * 0.125, w1)
    save(os.path.join(d, "in.x.npy"), x.astype(np.float16))
    save(os.path.join(d, "out.c1.npy"), c1.astype(np.float32))


def mil_consts(path):
    """The inline fp32/int32 consts of a MIL file, by name, as float64 arrays
    of their declared shapes (hex floats read with float.fromhex)."""
    import re
    out = {}
    pat = re.compile(r"tensor<(fp32|int32), \[([0-9, ]*)\]> (\w+) = const\(\)\[val = tensor<\w+, \[[0-9, ]*\]>\(([^)]*)\)\]")
    with open(path) as f:
        for m in pat.finditer(f.read()):
            dims = [int(v) for v in m.group(2).split(",") if v.strip()]
            nums = [v for v in re.split(r"[\[\], ]+", m.group(4)) if v]
            vals = [float.fromhex(v) if "0x" in v else float(v) for v in nums]
            out[m.group(3)] = np.array(vals, np.float64).reshape(dims)
    return out


def conv2d_same(x, w):
    """conv of [1, Ci, H, W] with [Co, Ci, K, K] (K odd), stride 1, zero padding keeping H, W."""
    k = w.shape[2]
    h, wd = x.shape[2], x.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    out = np.zeros((1, w.shape[0], h, wd))
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("oi,bihw->bohw", w[:, :, dy, dx], xp[:, :, dy:dy + h, dx:dx + wd])
    return out


def max_pool2d(x, k):
    """Max over k x k windows with stride k, no padding, floor of the size."""
    b, c, h, w = x.shape
    oh, ow = h // k, w // k
    return x[:, :, :oh * k, :ow * k].reshape(b, c, oh, k, ow, k).max(axis=(3, 5))


def c_mnist(rng):
    # conv 5x5 same (8) + bias, relu, max_pool 2x2/2, conv 5x5 same (16) + bias, relu,
    # max_pool 3x3/3 (14 -> 4), reshape [1, 256], matmul [256, 10], + bias; all fp32, the
    # weights being the MIL's own inline hex floats, read here from the corpus file.
    d = corpus_dir("coremlc_v1_3_inline_args_mnist_ios16")
    mil = os.path.join(HERE, "..", "..", "..", "shared", "corpus", "mil", "coremlc_v1_3_inline_args_mnist_ios16.mil")
    p = mil_consts(mil)
    x = rng.random((1, 1, 28, 28)).astype(np.float32)
    h = np.maximum(conv2d_same(x.astype(np.float64), p["Parameter5"]) + p["Parameter6"], 0)
    h = max_pool2d(h, 2)
    h = np.maximum(conv2d_same(h, p["Parameter87"]) + p["Parameter88"], 0)
    h = max_pool2d(h, 3).reshape(1, 256)
    y = h @ p["Parameter193"].reshape(256, 10) + p["Parameter194"]
    save(os.path.join(d, "in.Input3.npy"), x)
    save(os.path.join(d, "out.Plus214_Output_0.npy"), y.astype(np.float32))


def c_joint_topk(rng):
    # A transducer joint: enc = linear(x_enc), pred = linear(x_dec), relu(enc + pred), logits =
    # linear(., W2, b2) over 1027 tokens; token_id = reduce_argmax, token_prob = softmax gathered at
    # token_id (gather_along_axis), top 64 logits and ids (topk, uint16 ids cast to int32). The
    # bias b2 spreads the logits 0.1 apart (a shuffled ramp, the top 65 in [0, 6.4] where fp16's step
    # is at most 1/256) and W2 moves them a little, so that the ranking of the top 65 has gaps no
    # fp16 rounding can close (asserted): the ids must be equal in both numerics modes.
    d = corpus_dir("coremlc_joint_softmax_topk_ios17")
    x_dec = f16(rng.standard_normal((1, 640, 1)))
    x_enc = f16(rng.standard_normal((1, 512, 1)))
    # The weight matrices are sparse (one entry in 32 nonzero) so that the 2.8 MB file compresses
    # in git; the linear ops themselves are tested densely elsewhere.
    def sparse(shape, std):
        v = rng.standard_normal(shape) * std
        return f16(np.where(rng.random(shape) < 1 / 32, v, 0.0))  # +0, not -0: zeros compress

    we, be = sparse((640, 512), 0.11), f16(rng.standard_normal(640) * 0.1)
    wp, bp = sparse((640, 640), 0.11), f16(rng.standard_normal(640) * 0.1)
    w2 = sparse((1027, 640), 0.006)
    b2 = f16(rng.permutation((np.arange(1027) - 1027 + 65) * 0.1))
    offs = write_blob_file(os.path.join(d, "weights", "weight.bin"),
                           [t.astype(np.float16) for t in (we, be, wp, bp, w2, b2)])
    assert offs == [64, 655488, 656832, 1476096, 1477440, 2792064], offs
    h = np.maximum(x_enc[0, :, 0] @ we.T + be + x_dec[0, :, 0] @ wp.T + bp, 0)
    logits = h @ w2.T + b2
    order = np.argsort(-logits, kind="stable")
    gaps = -np.diff(logits[order[:65]])
    assert gaps.min() > 0.01, gaps.min()
    token = int(order[0])
    probs = softmax(logits)
    save(os.path.join(d, "in.decoder_step.npy"), x_dec.astype(np.float32))
    save(os.path.join(d, "in.encoder_step.npy"), x_enc.astype(np.float32))
    save(os.path.join(d, "out.token_id.npy"), np.array([[[token]]], np.int32))
    save(os.path.join(d, "out.token_prob.npy"), np.array([[[probs[token]]]], np.float32))
    save(os.path.join(d, "out.top_k_ids.npy"), order[:64].reshape(1, 1, 1, 64).astype(np.int32))
    save(os.path.join(d, "out.top_k_logits.npy"), logits[order[:64]].reshape(1, 1, 1, 64).astype(np.float32))


def c_lstm_decoder(rng):
    # A transducer prediction net, one step: the embedding row of `targets` (gather with int16
    # indices), h_in / c_in cast to fp16 and squeezed, one forward lstm step (gates in the
    # input, forget, output, cell order; sigmoid, tanh, tanh), outputs h as `decoder`
    # [1, 640, 1] and h, c as h_out, c_out [1, 1, 640]. The weights are sparse (one entry in 256,
    # the embedding one in 64) so that the 7.9 MB weight file compresses in git.
    d = corpus_dir("coremlc_lstm_decoder_ios17")

    def sparse(shape, std):
        v = rng.standard_normal(shape) * std
        return f16(np.where(rng.random(shape) < 1 / 256, v, 0.0))  # +0, not -0: zeros compress

    emb = f16(np.where(rng.random((1027, 640)) < 1 / 64, rng.standard_normal((1027, 640)), 0.0))
    w_ih, w_hh = sparse((2560, 640), 1.0), sparse((2560, 640), 1.0)
    bias = f16(rng.standard_normal(2560) * 0.2)
    offs = write_blob_file(os.path.join(d, "weights", "weight.bin"),
                           [t.astype(np.float16) for t in (emb, w_ih, w_hh, bias)])
    assert offs == [64, 1314688, 4591552, 7868416], offs
    token = int(rng.integers(0, 1027))
    h_in = rng.standard_normal((1, 1, 640)).astype(np.float32)
    c_in = rng.standard_normal((1, 1, 640)).astype(np.float32)
    x, h0, c0 = emb[token], f16(h_in[0, 0]), f16(c_in[0, 0])
    g = w_ih @ x + w_hh @ h0 + bias
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, o, z = sig(g[0:640]), sig(g[640:1280]), sig(g[1280:1920]), np.tanh(g[1920:2560])
    c = f * c0 + i * z
    h = o * np.tanh(c)
    save(os.path.join(d, "in.c_in.npy"), c_in)
    save(os.path.join(d, "in.h_in.npy"), h_in)
    save(os.path.join(d, "in.target_length.npy"), np.array([1], np.int32))
    save(os.path.join(d, "in.targets.npy"), np.array([[token]], np.int32))
    save(os.path.join(d, "out.decoder.npy"), h.reshape(1, 640, 1).astype(np.float32))
    save(os.path.join(d, "out.h_out.npy"), h.reshape(1, 1, 640).astype(np.float32))
    save(os.path.join(d, "out.c_out.npy"), c.reshape(1, 1, 640).astype(np.float32))


def main():
    for make in (tiny_mlp, gpt2_block, llama_block, c_add_model, c_conv_fp32io, c_qkv,
                 c_sdpa_fwd_taps, c_layernorm_linear_gelu, c_sdpa_op_blobmask, c_argmax, c_int8_quant, c_mnist,
                 c_joint_topk, c_lstm_decoder):
        # Each fixture has its own generator, so adding one changes no other.
        make(np.random.default_rng(zlib.crc32(make.__name__.encode())))
        print("made", make.__name__)


if __name__ == "__main__":
    main()
