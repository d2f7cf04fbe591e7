/*
 * The scalar meaning of every element-wise op, in one place (docs/numerics.md).
 *
 * Constant folding (passes/const_fold.c, cast-fusion), the IR reference
 * evaluator (testsuite/ir_eval.c) and the CPU backend (runtime/cpu/) all
 * compute an element-wise op's element as the function here gives it, from
 * operand values of the operands' dtype, in double; the result is then
 * stored in the result's dtype with op_sem_store_fp32 / op_sem_store_fp16 /
 * op_sem_sat_int32. The CPU backend's float loops compute some ops in float
 * directly (add, sub, mul, div, sqrt, abs, relu, maximum, minimum, clip):
 * one IEEE operation on floats rounds exactly as the double operation
 * rounded to float would, so the bits are the same (tested by
 * testsuite/test_op_semantics.c).
 *
 * Header-only: the runtime may not link compiler code, and the compiler
 * should not link the runtime; both include this.
 */
#ifndef ORION_OP_SEMANTICS_H
#define ORION_OP_SEMANTICS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "orion/fp16.h"

/* ---- storing a result ---- */

/* A float result of an op, computed in double, as an fp32 tensor holds it. */
static inline double op_sem_store_fp32(double y) { return (double)(float)y; }

/* ... and as an fp16 tensor holds it: through fp32 first, as the CPU
 * backend computes in float and then rounds each fp16 result (nearest even,
 * overflow to inf). For one IEEE operation on fp16 operands (+ - * / sqrt)
 * this equals rounding the exact result to fp16 once. */
static inline double op_sem_store_fp16(double y) { return (double)fp16_to_float(fp16_from_float((float)y)); }

/* An int32 result: exact, then saturated to the int32 range (NaN, which no
 * integer op produces, to the most negative value). */
static inline double op_sem_sat_int32(double v) {
  if (!(v >= -2147483648.0)) return -2147483648.0;
  if (v >= 2147483647.0) return 2147483647.0;
  return trunc(v);
}

/* ---- exp and tanh, to about 1e-15 relative ---- */

static inline double op_sem_bits_to_double(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static inline uint64_t op_sem_double_to_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* e^x for |x| <= 708; beyond, the value at the bound (which rounds to
 * float's 0 or inf like the true value). NaN stays NaN. Not libm's exp:
 * the CPU backend vectorizes this very evaluation (runtime/cpu/cpu_math.h, exp4), so
 * every user must compute exactly these steps. */
static inline double op_sem_exp(double x) {
  if (x != x) return x;
  x = x > 708.0 ? 708.0 : x < -708.0 ? -708.0 : x;
  const double shift = 0x1.8p52;
  double t = x * 1.4426950408889634 + shift; /* round(x / ln 2) in the low bits of t */
  double k = t - shift;
  double r = x - k * 0x1.62e42feep-1 - k * 0x1.a39ef35793c76p-33; /* |r| <= ln2 / 2 */
  double p = 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  uint64_t kb = op_sem_double_to_bits(t) - op_sem_double_to_bits(shift); /* k as a two's complement integer */
  return p * op_sem_bits_to_double((kb + 1023) << 52);
}

/* tanh, odd: tanh(-0) = -0, tanh(+-inf) = +-1. */
static inline double op_sem_tanh(double v) {
  double a = fabs(v), r;
  if (a < 1e-3) {
    double a2 = a * a;
    r = a - a * a2 * (1.0 / 3) + a * a2 * a2 * (2.0 / 15);
  } else {
    double e = op_sem_exp(-2 * a);
    r = (1 - e) / (1 + e);
  }
  return copysign(r, v);
}

/* ---- unary ops ---- */

/* max(x, 0) with NaN propagated (as maximum) and -0 giving +0. */
static inline double op_sem_relu(double v) { return v <= 0 ? 0.0 : v; }
static inline double op_sem_sigmoid(double v) { return 1 / (1 + op_sem_exp(-v)); }
/* x * sigmoid(x), as lower-silu writes it (the same doubles). */
static inline double op_sem_silu(double v) { return v * op_sem_sigmoid(v); }
static inline double op_sem_gelu_exact(double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); }
static inline double op_sem_gelu_tanh(double v) {
  return 0.5 * v * (1 + op_sem_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
/* MIL's SIGMOID_APPROXIMATION mode (no .oir spelling). */
static inline double op_sem_gelu_sigmoid(double v) { return v / (1 + op_sem_exp(-1.702 * v)); }
/* log(x + epsilon), epsilon already of x's dtype: log(0) = -inf, log(<0) = NaN. */
static inline double op_sem_log(double v, double eps) { return log(v + eps); }
/* 1 / sqrt(x + epsilon): rsqrt(+-0) = +inf (with epsilon 0, -0 + 0 is +0), rsqrt(<0) = NaN. */
static inline double op_sem_rsqrt(double v, double eps) { return 1 / sqrt(v + eps); }
/* min(max(x, lo), hi) with NaN propagated; x equal to a bound keeps its own sign of zero. */
static inline double op_sem_clip(double v, double lo, double hi) {
  if (v != v) return v;
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/* ---- binary ops ---- */

/* IEEE 754-2019 maximum / minimum: NaN if either is NaN, -0 < +0, so the
 * result does not depend on the operands' order. */
static inline double op_sem_maximum(double a, double b) {
  if (a != a || b != b) return a != a ? a : b;
  return a > b || (a == b && !signbit(a)) ? a : b;
}
static inline double op_sem_minimum(double a, double b) {
  if (a != a || b != b) return a != a ? a : b;
  return a < b || (a == b && signbit(a)) ? a : b;
}
/* C99 Annex F pow (libm's, in double): pow(x, +-0) = 1 even for NaN x,
 * pow(1, y) = 1 even for NaN y, pow(-x, non-integer) = NaN, pow(+-0, -1) = +-inf. */
static inline double op_sem_pow(double a, double b) { return pow(a, b); }

/* ---- cast ---- */

/* Whether casting float v to an integer dtype of range [lo, hi] has a
 * result (v truncated toward zero); NaN and out-of-range values do not:
 * the CPU backend reports them, the evaluator fails, the folder leaves the
 * cast to run. */
static inline bool op_sem_cast_int_defined(double v, double lo, double hi) {
  return v == v && trunc(v) >= lo && trunc(v) <= hi;
}

#endif
