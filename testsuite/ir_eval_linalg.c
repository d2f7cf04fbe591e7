/*
 * The reference evaluator's linear algebra: matmul, linear, conv, sdpa
 * (ir_eval_internal.h).
 */
#include "ir_eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/op_semantics.h"
#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

/* ---- linear algebra ---- */

/* matmul with NumPy semantics: transpose flags swap the last two dims, a
 * rank-1 x is [1, K] and a rank-1 y is [K, 1] (dims dropped from the result),
 * batch dims broadcast. */
bool ev_op_matmul(Ev *e, const EvalTensor *x, const EvalTensor *y, EvalTensor *out) {
  bool tx = ev_attr_bool(e, "transpose_x", false), ty = ev_attr_bool(e, "transpose_y", false);
  IrType a = x->type, b = y->type;
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if ((a1 && tx) || (b1 && ty)) return ev_fail(e, "transpose of a rank-1 operand");
  if (a1) a = (IrType){.rank = 2, .dims = {1, x->type.dims[0]}}; /* same data, [1, K] */
  if (b1) b = (IrType){.rank = 2, .dims = {y->type.dims[0], 1}}; /* same data, [K, 1] */
  int ar = a.rank, br = b.rank;
  /* x(i, k) is a[.., i, k], or a[.., k, i] when transposed; likewise y(k, j). */
  int64_t M = tx ? a.dims[ar - 1] : a.dims[ar - 2], K = tx ? a.dims[ar - 2] : a.dims[ar - 1];
  int64_t K2 = ty ? b.dims[br - 1] : b.dims[br - 2], N = ty ? b.dims[br - 2] : b.dims[br - 1];
  if (K != K2) return ev_fail(e, "inner sizes differ (%lld vs %lld)", (long long)K, (long long)K2);
  int64_t a_i = tx ? 1 : a.dims[ar - 1], a_k = tx ? a.dims[ar - 1] : 1; /* strides inside a's matrix */
  int64_t b_k = ty ? 1 : b.dims[br - 1], b_j = ty ? b.dims[br - 1] : 1;
  IrType abatch = {.rank = (uint8_t)(ar - 2)}, bbatch = {.rank = (uint8_t)(br - 2)}, batch = {0};
  memcpy(abatch.dims, a.dims, sizeof(int64_t) * (size_t)abatch.rank);
  memcpy(bbatch.dims, b.dims, sizeof(int64_t) * (size_t)bbatch.rank);
  if (!ev_bcast_shape(&abatch, &bbatch, &batch)) return ev_fail(e, "batch dims do not broadcast");
  IrType t = batch;
  t.dtype = x->type.dtype;
  if (!a1) t.dims[t.rank++] = M;
  if (!b1) t.dims[t.rank++] = N;
  *out = ev_tensor_new(&t);
  int64_t amat = a.dims[ar - 2] * a.dims[ar - 1], bmat = b.dims[br - 2] * b.dims[br - 1];
  int64_t idx[IR_MAX_RANK] = {0};
  int64_t bi = 0;
  do {
    const double *A = x->data + ev_offset_bcast(&abatch, &batch, idx) * amat;
    const double *B = y->data + ev_offset_bcast(&bbatch, &batch, idx) * bmat;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += A[i * a_i + k * a_k] * B[k * b_k + j * b_j];
        out->data[(bi * M + i) * N + j] = s;
      }
    bi++;
  } while (ev_next_index(idx, &batch));
  return true;
}

/* linear: y[..., o] = sum_i x[..., i] * w[o, i] + b[o]. */
bool ev_op_linear(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *w = &in[1], *bias = nin > 2 ? &in[2] : NULL;
  int r = x->type.rank;
  int64_t I = x->type.dims[r - 1], O = w->type.dims[0];
  if (w->type.rank != 2 || w->type.dims[1] != I) return ev_fail(e, "weight shape does not fit");
  IrType t = x->type;
  t.dims[r - 1] = O;
  *out = ev_tensor_new(&t);
  int64_t rows = ev_count_of(&x->type) / I;
  for (int64_t n = 0; n < rows; n++)
    for (int64_t o = 0; o < O; o++) {
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += x->data[n * I + i] * w->data[o * I + i];
      out->data[n * O + o] = s + (bias ? bias->data[o] : 0.0);
    }
  return true;
}

/* conv: cross-correlation over 1 to 3 spatial dims with strides, dilations,
 * padding (valid/same/same_lower/custom) and groups. */
bool ev_op_conv(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *x = &in[0], *w = &in[1], *bias = nin > 2 ? &in[2] : NULL;
  const IrType *xt = &x->type, *wt = &w->type;
  int sp = xt->rank - 2;
  if (sp < 1 || sp > 3 || wt->rank != xt->rank) return ev_fail(e, "bad ranks");
  int64_t N = xt->dims[0], Cin = xt->dims[1], Cout = wt->dims[0], G = ev_attr_int(e, "groups", 1);
  if (G <= 0 || Cin % G || Cout % G || wt->dims[1] * G != Cin) return ev_fail(e, "bad groups");
  int64_t cin_g = Cin / G, cout_g = Cout / G;
  int64_t strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[6] = {0};
  ev_attr_ints(e, "strides", strides, 3);
  ev_attr_ints(e, "dilations", dil, 3);
  ev_attr_ints(e, "pad", pad, 6);
  const char *pad_type = ev_attr_str(e, "pad_type", ir_op_attr(e->m, e->op, "pad") ? "custom" : "valid");
  IrType t = {.dtype = xt->dtype, .rank = xt->rank, .dims = {N, Cout}};
  IrType ospace = {.rank = (uint8_t)sp}, kspace = {.rank = (uint8_t)sp};
  int64_t before[3];
  for (int i = 0; i < sp; i++) {
    int64_t D = xt->dims[2 + i], Kd = wt->dims[2 + i], s = strides[i], ek = (Kd - 1) * dil[i] + 1, total;
    if (!strcmp(pad_type, "valid")) {
      total = before[i] = 0;
    } else if (!strcmp(pad_type, "custom")) {
      before[i] = pad[2 * i];
      total = pad[2 * i] + pad[2 * i + 1];
    } else if (!strcmp(pad_type, "same") || !strcmp(pad_type, "same_lower")) {
      total = s * ((D + s - 1) / s) - D + ek - s; /* so that the result is ceil(D / s) */
      if (total < 0) total = 0;
      /* same: the odd extra after (floor(P/2) before); same_lower: before */
      before[i] = !strcmp(pad_type, "same") ? total / 2 : total - total / 2;
    } else {
      return ev_fail(e, "unknown pad_type '%s'", pad_type);
    }
    if (D + total < ek) return ev_fail(e, "kernel larger than the padded input");
    t.dims[2 + i] = (D + total - ek) / s + 1;
    ospace.dims[i] = t.dims[2 + i];
    kspace.dims[i] = Kd;
  }
  *out = ev_tensor_new(&t);
  int64_t xi[IR_MAX_RANK], wi[IR_MAX_RANK], oi[IR_MAX_RANK];
  for (int64_t n = 0; n < N; n++)
    for (int64_t co = 0; co < Cout; co++) {
      int64_t g = co / cout_g;
      int64_t o[3] = {0};
      do {
        double sum = 0;
        for (int64_t ci = 0; ci < cin_g; ci++) {
          int64_t k[3] = {0};
          do {
            bool inside = true;
            xi[0] = n;
            xi[1] = g * cin_g + ci;
            wi[0] = co;
            wi[1] = ci;
            for (int d = 0; d < sp; d++) {
              int64_t p = o[d] * strides[d] - before[d] + k[d] * dil[d];
              inside = inside && p >= 0 && p < xt->dims[2 + d]; /* padding reads zeros */
              xi[2 + d] = p;
              wi[2 + d] = k[d];
            }
            if (inside) sum += x->data[ev_offset_of(xt, xi)] * w->data[ev_offset_of(wt, wi)];
          } while (ev_next_index(k, &kspace));
        }
        oi[0] = n;
        oi[1] = co;
        for (int d = 0; d < sp; d++) oi[2 + d] = o[d];
        out->data[ev_offset_of(&t, oi)] = sum + (bias ? bias->data[co] : 0.0);
      } while (ev_next_index(o, &ospace));
    }
  return true;
}

/* sdpa: softmax(q k^T * scale + mask) v per batch; bool mask false -> -inf,
 * float mask added; causal allows key j for query i iff j <= i + (S - L). */
bool ev_op_sdpa(Ev *e, const EvalTensor *in, uint32_t nin, EvalTensor *out) {
  const EvalTensor *q = &in[0], *k = &in[1], *v = &in[2], *mask = nin > 3 ? &in[3] : NULL;
  int r = q->type.rank;
  int64_t L = q->type.dims[r - 2], E = q->type.dims[r - 1], S = k->type.dims[r - 2], Dv = v->type.dims[r - 1];
  double scale = ev_attr_float(e, "scale", 1.0 / sqrt((double)E));
  bool causal = ev_attr_bool(e, "causal", false);
  if (k->type.dims[r - 1] != E || v->type.dims[r - 2] != S) return ev_fail(e, "q/k/v shapes do not fit");
  if (causal && L > S) return ev_fail(e, "causal with L > S");
  IrType scores_t = q->type;
  scores_t.dims[r - 1] = S;
  IrType t = q->type;
  t.dims[r - 1] = Dv;
  *out = ev_tensor_new(&t);
  int64_t nbatch = ev_count_of(&q->type) / (L * E);
  double *p = xcalloc((size_t)S, sizeof *p);
  int64_t sidx[IR_MAX_RANK] = {0}; /* index into the scores, for the mask */
  for (int64_t b = 0; b < nbatch; b++)
    for (int64_t i = 0; i < L; i++) {
      /* the batch part of sidx: b in row-major over dims 0..r-3 */
      int64_t rest = b;
      for (int d = r - 3; d >= 0; d--) {
        sidx[d] = rest % q->type.dims[d];
        rest /= q->type.dims[d];
      }
      sidx[r - 2] = i;
      double mx = -HUGE_VAL, sum = 0;
      for (int64_t j = 0; j < S; j++) {
        double s = 0;
        for (int64_t c = 0; c < E; c++) s += q->data[(b * L + i) * E + c] * k->data[(b * S + j) * E + c];
        s *= scale;
        if (mask) {
          sidx[r - 1] = j;
          double mv = mask->data[ev_offset_bcast(&mask->type, &scores_t, sidx)];
          if (mask->type.dtype == DT_BOOL) s = mv != 0 ? s : -HUGE_VAL;
          else s += mv;
        }
        if (causal && j > i + (S - L)) s = -HUGE_VAL;
        p[j] = s;
        mx = s > mx ? s : mx;
      }
      for (int64_t j = 0; j < S; j++) sum += exp(p[j] - mx);
      for (int64_t j = 0; j < S; j++) p[j] = exp(p[j] - mx) / sum;
      for (int64_t c = 0; c < Dv; c++) {
        double acc = 0;
        for (int64_t j = 0; j < S; j++) acc += p[j] * v->data[(b * S + j) * Dv + c];
        out->data[(b * L + i) * Dv + c] = acc;
      }
    }
  free(p);
  return true;
}
