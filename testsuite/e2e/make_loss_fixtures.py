#!/usr/bin/python3
"""Writes the cross_entropy fixtures of testsuite/e2e/loss: for each case a
model.oir (one cross_entropy of the case's shape, dtype and ignore_index),
its inputs logits.npy and targets.npy, and the expected loss.npy (an fp32
scalar) computed here in float64 with numpy, independently of orion, from the
logits as the program holds them (fp16 cases are rounded to fp16 first):

    loss = mean over counted positions of logsumexp(x[p, :]) - x[p, t[p]]

with logsumexp computed as max + log(sum(exp(x - max))) (in float64 that is
exact enough whatever the magnitudes). Positions whose target is ignore_index
are not counted; with every position ignored the loss is NaN (0 / 0), as
PyTorch gives. The case `out_of_range` has no loss.npy: its target at [1, 2]
is 7 of 7 classes, which orion must report (testsuite/test_loss.c).

Run with Debian's python3 (the one that has numpy), from anywhere:

    /usr/bin/python3 testsuite/e2e/make_loss_fixtures.py

It overwrites testsuite/e2e/loss/; the output is deterministic (fixed seeds),
so running it again changes nothing.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "loss")


def reference_loss(x, t, ignore_index):
    x = np.asarray(x, np.float64)
    classes = x.shape[-1]
    rows = x.reshape(-1, classes)
    targets = np.asarray(t, np.int64).reshape(-1)
    keep = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    mx = rows.max(axis=-1)
    lse = mx + np.log(np.exp(rows - mx[:, None]).sum(axis=-1))
    picked = rows[np.arange(rows.shape[0]), np.where(keep, targets, 0)]
    with np.errstate(invalid="ignore"):
        return np.float32(((lse - picked) * keep).sum() / keep.sum())


def model(dtype, shape, ignore_index):
    lead = ",".join(str(d) for d in shape[:-1])
    attr = "" if ignore_index is None else ", ignore_index=%d" % ignore_index
    return ("func main(logits: %s[%s], targets: int32[%s]) {\n"
            "  loss: fp32[] = cross_entropy(logits, targets%s);\n"
            "  return loss;\n}\n") % (dtype, ",".join(str(d) for d in shape), lead, attr)


def write_case(name, dtype, x, t, ignore_index=None, expect=True):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    x = np.asarray(x, np.float16 if dtype == "fp16" else np.float32)
    t = np.asarray(t, np.int32)
    assert t.shape == x.shape[:-1]
    with open(os.path.join(d, "model.oir"), "w", encoding="utf-8") as f:
        f.write(model(dtype, x.shape, ignore_index))
    np.save(os.path.join(d, "logits.npy"), x)
    np.save(os.path.join(d, "targets.npy"), t)
    if expect:
        np.save(os.path.join(d, "loss.npy"), reference_loss(x, t, ignore_index))


rng = np.random.default_rng(13)


def normal(shape, std):
    return rng.standard_normal(shape) * std


def classes_of(shape, c):
    return rng.integers(0, c, shape)


# plain shapes, both dtypes
write_case("f32_4x7", "fp32", normal((4, 7), 2.0), classes_of((4,), 7))
write_case("f16_2x3x11", "fp16", normal((2, 3, 11), 3.0), classes_of((2, 3), 11))
# one class: every position's loss is 0
write_case("f32_c1", "fp32", normal((5, 1), 4.0), np.zeros((5,)))
# rank-1 logits: one position, a scalar target
write_case("f32_rank1", "fp32", normal((9,), 1.0), np.array(4))
# ignore_index: some positions ignored (PyTorch's -100), and one in range (class 2 never counts)
t = classes_of((3, 4), 6)
t[0, 1] = t[2, 0] = t[2, 3] = -100
write_case("f32_ignore", "fp32", normal((3, 4, 6), 2.0), t, ignore_index=-100)
t = np.array([[2, 0, 2], [1, 2, 5]])
write_case("f16_ignore_class", "fp16", normal((2, 3, 6), 2.0), t, ignore_index=2)
# every position ignored: NaN
write_case("f32_all_ignored", "fp32", normal((2, 5), 1.0), np.full((2,), -1), ignore_index=-1)
# magnitudes where exp(x) overflows: fp16 beyond 11.1, fp32 beyond 88.7, and a
# row spread of 1.2e5 (beyond fp16's range) in fp16 logits
x = np.array([[60000.0, -60000.0, 0.0, 100.0, 65504.0],
              [-65504.0, -65000.0, -64000.0, -65504.0, -65504.0],
              [12.0, 11.5, -12.0, 30.0, 29.0]])
write_case("f16_large", "fp16", x, np.array([1, 2, 0]))
x = normal((2, 3, 5), 1.0) * np.array([1e2, 1e4, 1e30])[None, :, None]
write_case("f32_large", "fp32", x, classes_of((2, 3), 5))
# a target out of range, at [1, 2]
t = classes_of((2, 3), 7)
t[1, 2] = 7
write_case("out_of_range", "fp32", normal((2, 3, 7), 1.0), t, expect=False)
