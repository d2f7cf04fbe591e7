#!/usr/bin/python3
"""The sampler's reference (runtime/generate/sample.c), written with numpy's
sorts, and the committed fixture testsuite/generate/sample_fixture.json that
test_generate_sample checks the C sampler against (ids exactly, probabilities
within 1e-12). The definitions, as in docs/generation.md ("Sampling"):

  z = logits as float64; repeat penalty over the distinct ids among the last
  N of the history: z > 0 -> z / R, else z * R
  temperature 0: argmax z, ties to the lowest id; no draw
  x = z / T
  top-k: the k first by (x descending, id ascending)
  w = exp(x - max x) over those; W = sum w
  top-p: sorted by (w descending, id ascending), the shortest prefix whose
  cumulative sum reaches p * W
  min-p: keep w >= min_p (w of the most probable id is 1)
  probabilities: w / sum(w) over the kept ids, ascending
  draw: u = (xoshiro256** >> 11) * 2^-53; the first kept id (ascending) whose
  cumulative probability exceeds u, else the last

The generator: xoshiro256** with its state from four SplitMix64 outputs of
the seed. Run with Debian's python3 and python3-numpy:
  /usr/bin/python3 testsuite/generate/make_sample_fixture.py
"""
import json
import os

import numpy as np

M64 = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def next(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * 2.0**-53


def distribution(logits, history, o):
    z = logits.astype(np.float64)
    r = o["repeat_penalty"]
    if r != 1.0 and history:
        recent = history[-o["repeat_last_n"]:] if o["repeat_last_n"] else []
        for i in sorted(set(recent)):
            z[i] = z[i] / r if z[i] > 0 else z[i] * r
    ids = np.arange(len(z))
    if o["temperature"] <= 0:
        return np.array([int(np.argmax(z))]), np.array([1.0])
    x = z / o["temperature"]
    mx = x.max()
    keep = ids
    k = o["top_k"]
    if 0 < k < len(z):
        keep = np.lexsort((ids, -x))[:k]
    w = np.zeros(len(z))
    w[keep] = np.exp(x[keep] - mx)
    if o["top_p"] < 1.0:
        total = w[keep].sum()
        order = keep[np.lexsort((keep, -w[keep]))]
        cum = np.cumsum(w[order])
        m = int(np.searchsorted(cum >= o["top_p"] * total, True)) + 1
        keep = order[: min(m, len(order))]
    keep = np.sort(keep[w[keep] >= o["min_p"]])
    p = w[keep] / w[keep].sum()
    return keep, p


def draws(logits, history, o, n):
    rng = Rng(o["seed"])
    ids, p = distribution(logits, history, o)
    out = []
    for _ in range(n):
        if o["temperature"] <= 0:
            out.append(int(ids[0]))
            continue
        u = rng.uniform()
        cum = np.cumsum(p)
        j = int(np.searchsorted(cum > u, True))
        out.append(int(ids[min(j, len(ids) - 1)]))
    return out


def f32_list(a):
    return [float(v) for v in a.astype(np.float32)]


def main():
    g = np.random.default_rng(14)
    base = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, repeat_last_n=64, seed=0)
    settings = [
        {},
        dict(temperature=0.7, seed=1),
        dict(top_k=10, seed=2),
        dict(top_p=0.9, seed=3),
        dict(min_p=0.05, seed=4),
        dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=5),
        dict(temperature=1.3, top_k=5, top_p=0.5, seed=6),
        dict(repeat_penalty=1.5, repeat_last_n=8, top_k=20, seed=7),
        dict(temperature=0.0, repeat_penalty=2.0, repeat_last_n=64),
        dict(temperature=0.0),
        dict(top_k=1, seed=8),
        dict(top_p=0.0, seed=9),
    ]
    cases = []
    for i, s in enumerate(settings):
        o = dict(base, **s)
        v = 300
        logits = g.standard_normal(v).astype(np.float32) * 3
        logits[g.integers(0, v, 20)] = logits[7]  # ties
        history = [int(t) for t in g.integers(0, v, 30)]
        history += [int(np.argmax(logits))]  # the penalty meets the best id
        ids, p = distribution(logits, history, o)
        cases.append(dict(options=o, logits=f32_list(logits), history=history, ids=[int(t) for t in ids],
                          probs=[float(t) for t in p], draws=draws(logits, history, o, 50)))
    rng = Rng(12345)
    fixture = dict(rng_seed=12345, rng_first=[str(rng.next()) for _ in range(8)], cases=cases)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "sample_fixture.json"), "w") as f:
        json.dump(fixture, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
