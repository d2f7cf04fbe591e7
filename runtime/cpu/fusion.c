/*
 * Planning fusions (docs/cpu-backend.md, "Fusion"): lowered linear layers,
 * a cross entropy's gradient chain, lowered attention, element-wise and row
 * groups, and the groups that become a fused linear's epilogue.
 */
#include "cpu_internal.h"


/* Whether argument id of statement si is a const of the n integers want
 * (or absent, when absent_ok). */
static bool const_ints_are(const CpuProgram *c, uint32_t si, MilArgId id, const int64_t *want, uint32_t n,
                           bool absent_ok) {
  if (!stmt_arg(c, si, id)) return absent_ok;
  uint32_t s = arg_slot(c, si, id);
  if (s == UINT32_MAX) return false;
  s = root_of(c, s);
  const Val *v = &c->vals[s];
  if (c->slots[s].kind != SK_CONST || (v->st != ST_I32 && v->st != ST_F32) || v->n != (int64_t)n) return false;
  for (uint32_t i = 0; i < n; i++)
    if (ld(v, i) != (double)want[i]) return false;
  return true;
}

/* Whether transpose statement si swaps the last two dims of a rank-3 x. */
static bool swaps_last_two(const CpuProgram *c, uint32_t si) {
  static const int64_t swap[3] = {0, 2, 1}, neg[3] = {-3, -1, -2};
  uint32_t xs = arg_slot(c, si, SHARED_x);
  return c->ops[si] && c->ops[si]->family == OF_TRANSPOSE && xs != UINT32_MAX && c->vals[xs].rank == 3 &&
         (const_ints_are(c, si, MIL_ARG_TRANSPOSE_perm, swap, 3, false) ||
             const_ints_are(c, si, MIL_ARG_TRANSPOSE_perm, neg, 3, false));
}

static bool same_dims(const Val *v, const int64_t *dims, uint32_t rank) {
  if (v->rank != rank) return false;
  for (uint32_t i = 0; i < rank; i++)
    if (v->dims[i] != dims[i]) return false;
  return true;
}

/* Fuses conv statement si if it is a linear layer as lower-linear writes it:
 *   t = transpose(x [B, P, K], perm [0, 2, 1]); v = reshape(t) [B, K, 1.., P];
 *   r = conv(v, weight [O, K, 1..]) (pointwise, groups 1, no bias);
 *   optionally a = add(r, bias viewed as [1, O, 1..]); then an optional
 *   reshape to [B, O, P] and y = transpose(.., perm [0, 2, 1]) [B, P, O],
 * every intermediate used once and of one float dtype with x and y. The conv
 * then computes y from x (k_fused_linear) and the others are elided. nuse
 * and user: per slot, its number of uses (outputs count) and its last user. */
static void fuse_linear(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *user,
                        const uint32_t *stmt_of) {
  const MilFunc *f = c->f;
  const MilStmt *s = &f->stmts[si];
  if (!c->ops[si] || c->ops[si]->family != OF_CONV || s->nresults != 1 || stmt_arg(c, si, MIL_ARG_CONV_bias)) return;
  uint32_t vs = arg_slot(c, si, SHARED_x), ws = arg_slot(c, si, MIL_ARG_CONV_weight), rs = c->base[si];
  if (vs == UINT32_MAX || ws == UINT32_MAX || c->slots[vs].kind != SK_VIEW || nuse[vs] != 1) return;
  uint32_t ts = c->slots[vs].src, tst = stmt_of[ts];
  if (c->slots[ts].kind != SK_RESULT || nuse[ts] != 1 || tst == UINT32_MAX || !swaps_last_two(c, tst)) return;
  uint32_t xs = arg_slot(c, tst, SHARED_x);
  const Val *X = &c->vals[xs], *V = &c->vals[vs], *W = &c->vals[ws], *R = &c->vals[rs];
  MilDType dt = X->dt;
  if (X->st != ST_F32 || !is_float(dt) || c->vals[ts].dt != dt || V->dt != dt || R->dt != dt) return;
  int64_t B = X->dims[0], P = X->dims[1], K = X->dims[2], O = W->dims[0];
  uint32_t rank = V->rank, S = rank - 2;
  if (rank < 3 || rank > 5 || W->rank != rank || R->rank != rank || V->dims[0] != B || V->dims[1] != K ||
      W->dims[1] != K || R->dims[0] != B || R->dims[1] != O || elements(V->dims + 2, S) != P)
    return;
  for (uint32_t i = 2; i < rank; i++)
    if (W->dims[i] != 1 || R->dims[i] != V->dims[i]) return;
  static const int64_t ones[3] = {1, 1, 1}, zeros[6] = {0};
  if (!const_ints_are(c, si, MIL_ARG_CONV_groups, ones, 1, true) ||
      !const_ints_are(c, si, MIL_ARG_CONV_strides, ones, S, true) ||
      !const_ints_are(c, si, MIL_ARG_CONV_dilations, ones, S, true))
    return;
  const char *pt = "valid";
  if (stmt_arg(c, si, MIL_ARG_CONV_pad_type)) {
    uint32_t ps = arg_slot(c, si, MIL_ARG_CONV_pad_type);
    if (ps == UINT32_MAX || c->vals[ps].st != ST_STR) return;
    pt = c->vals[ps].str;
  }
  bool custom = !strcmp(pt, "custom");
  if (!custom && strcmp(pt, "valid") && strcmp(pt, "same") && strcmp(pt, "same_lower")) return;
  /* a unit kernel pads nothing otherwise */
  if (custom && !const_ints_are(c, si, MIL_ARG_CONV_pad, zeros, 2 * S, false)) return;
  /* The result side: [add bias], [reshape to [B, O, P]], transpose. */
  uint32_t cur = rs, bs = UINT32_MAX, elided[4], ne = 0;
  if (nuse[cur] != 1 || user[cur] == UINT32_MAX) return;
  uint32_t u = user[cur];
  if (c->ops[u] && c->ops[u]->op == MIL_OP_ADD) {
    uint32_t ax = arg_slot(c, u, SHARED_x), ay = arg_slot(c, u, SHARED_y), other = ax == cur ? ay : ax;
    if ((ax != cur && ay != cur) || other == UINT32_MAX) return;
    uint32_t br = root_of(c, other);
    const Val *bv = &c->vals[other];
    if (c->slots[br].kind != SK_CONST || c->vals[br].st != ST_F32 || c->vals[br].n != O || bv->rank > rank) return;
    for (uint32_t i = 0; i < rank; i++) {
      int64_t d = i + bv->rank >= rank ? bv->dims[i + bv->rank - rank] : 1;
      if (d != (i == 1 ? O : 1)) return;
    }
    cur = c->base[u];
    if (c->vals[cur].dt != dt || !same_dims(&c->vals[cur], R->dims, rank)) return;
    bs = br;
    elided[ne++] = u;
    if (nuse[cur] != 1 || (u = user[cur]) == UINT32_MAX) return;
  }
  if (c->ops[u] && c->ops[u]->family == OF_VIEW) {
    cur = c->base[u];
    int64_t d3[3] = {B, O, P};
    if (c->vals[cur].dt != dt || !same_dims(&c->vals[cur], d3, 3)) return;
    elided[ne++] = u;
    if (nuse[cur] != 1 || (u = user[cur]) == UINT32_MAX) return;
  }
  int64_t dy[3] = {B, P, O};
  if (!swaps_last_two(c, u) || arg_slot(c, u, SHARED_x) != cur || c->vals[c->base[u]].dt != dt ||
      !same_dims(&c->vals[c->base[u]], dy, 3))
    return;
  elided[ne++] = u;
  for (uint32_t i = 0; i < ne; i++) c->fz[elided[i]].kind = FZ_ELIDED;
  c->fz[tst].kind = c->fz[stmt_of[vs]].kind = FZ_ELIDED;
  bool ane16 = c->mode == CPU_NUMERICS_ANE && dt == MIL_DT_FP16;
  c->fz[si] = (Fused){.kind = FZ_LINEAR, .round_mid = ane16 && bs != UINT32_MAX, .round_out = ane16, .xs = xs,
                      .bs = bs, .ys = c->base[u]};
}

/* Whether statement si (UINT32_MAX: none) is an unfused op `op` with one result. */
static bool stmt_is(const CpuProgram *c, uint32_t si, MilOpId op) {
  return si != UINT32_MAX && c->ops[si] && c->ops[si]->op == op && c->fz[si].kind == FZ_NONE &&
         c->f->stmts[si].nresults == 1;
}

/* Whether statement si is a cast to dtype `to`. */
static bool cast_to(const CpuProgram *c, uint32_t si, const char *to) {
  if (!stmt_is(c, si, MIL_OP_CAST)) return false;
  uint32_t ds = arg_slot(c, si, MIL_ARG_CAST_dtype);
  return ds != UINT32_MAX && c->vals[ds].st == ST_STR && c->vals[ds].str && !strcmp(c->vals[ds].str, to);
}

/* The value of a const float scalar (one element) at slot s. */
static bool const_scalar(const CpuProgram *c, uint32_t s, float *v) {
  if (s == UINT32_MAX) return false;
  s = root_of(c, s);
  if (c->slots[s].kind != SK_CONST || c->vals[s].st != ST_F32 || c->vals[s].n != 1) return false;
  *v = fp(&c->vals[s])[0];
  return true;
}

/* Whether slot s is a float result of P's shape (one dtype, fp32 storage). */
static bool like(const CpuProgram *c, uint32_t s, const Val *P, MilDType dt) {
  const Val *v = &c->vals[s];
  return v->st == ST_F32 && v->dt == dt && same_dims(v, P->dims, P->rank);
}

/* Fuses the gradient chain of a cross entropy from softmax statement si, as
 * grad_rules_loss.c writes it and the MIL has it (each value used once, by
 * the next):
 *   [x = cast(logits fp16, fp32)]  p = softmax(x, last axis)      [.., C]
 *   tc = view of targets int32 [.., 1]; d = sub(tc, [0, 1, .., C-1])
 *   m = cast(d, bool); o = select(m, differs, equals) (const scalars)
 *   g = sub(p, o); [g = mul(g, scalar)]; [g = cast(g, fp16)]
 * The last statement computes g from the logits and targets
 * (k_xent_grad.c); the others are elided. */
static void fuse_xent_grad(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *user,
                           const uint32_t *stmt_of) {
  if (!stmt_is(c, si, MIL_OP_SOFTMAX)) return;
  uint32_t xs = arg_slot(c, si, MIL_ARG_SOFTMAX_x), ps = c->base[si];
  if (xs == UINT32_MAX) return;
  const Val *P = &c->vals[ps];
  int64_t C = P->rank ? P->dims[P->rank - 1] : 0, last[1] = {-1}, lastp[1] = {(int64_t)P->rank - 1};
  if (C < 1 || C > INT32_MAX || !like(c, ps, P, MIL_DT_FP32) || !like(c, xs, P, MIL_DT_FP32) ||
      !(const_ints_are(c, si, MIL_ARG_SOFTMAX_axis, last, 1, false) ||
        const_ints_are(c, si, MIL_ARG_SOFTMAX_axis, lastp, 1, false)))
    return;
  uint32_t chain[8], n = 0; /* the statements elided */
  uint32_t cx = stmt_of[xs], xcast = UINT32_MAX;
  if (c->slots[xs].kind == SK_RESULT && nuse[xs] == 1 && cast_to(c, cx, "fp32")) {
    uint32_t ls = arg_slot(c, cx, MIL_ARG_CAST_x); /* fp16 values held as floats: the cast copies them */
    if (ls != UINT32_MAX && like(c, ls, P, MIL_DT_FP16)) chain[n++] = cx, xs = ls, xcast = cx;
  }
  chain[n++] = si;
  /* g = sub(p, o) */
  uint32_t g = nuse[ps] == 1 ? user[ps] : UINT32_MAX;
  if (!stmt_is(c, g, MIL_OP_SUB) || arg_slot(c, g, SHARED_x) != ps || !like(c, c->base[g], P, MIL_DT_FP32)) return;
  /* o = select(m, differs, equals) */
  uint32_t os = arg_slot(c, g, SHARED_y), sel = os == UINT32_MAX ? UINT32_MAX : stmt_of[os];
  float differs, equals;
  if (os == UINT32_MAX || nuse[os] != 1 || c->slots[os].kind != SK_RESULT || !stmt_is(c, sel, MIL_OP_SELECT) ||
      !like(c, os, P, MIL_DT_FP32) || !const_scalar(c, arg_slot(c, sel, MIL_ARG_SELECT_a), &differs) ||
      !const_scalar(c, arg_slot(c, sel, MIL_ARG_SELECT_b), &equals))
    return;
  /* m = cast(d, bool), d = sub(tc, classes) */
  uint32_t ms = arg_slot(c, sel, MIL_ARG_SELECT_cond), cb = ms == UINT32_MAX ? UINT32_MAX : stmt_of[ms];
  if (ms == UINT32_MAX || nuse[ms] != 1 || c->slots[ms].kind != SK_RESULT || !cast_to(c, cb, "bool")) return;
  uint32_t ds = arg_slot(c, cb, MIL_ARG_CAST_x), sd = ds == UINT32_MAX ? UINT32_MAX : stmt_of[ds];
  if (ds == UINT32_MAX || nuse[ds] != 1 || c->slots[ds].kind != SK_RESULT || !stmt_is(c, sd, MIL_OP_SUB) ||
      c->vals[ds].dt != MIL_DT_INT32 || !same_dims(&c->vals[ds], P->dims, P->rank))
    return;
  uint32_t ts = arg_slot(c, sd, SHARED_x), ks = arg_slot(c, sd, SHARED_y);
  if (ts == UINT32_MAX || ks == UINT32_MAX) return;
  const Val *T = &c->vals[ts], *K = &c->vals[root_of(c, ks)];
  int64_t tdims[MIL_MAX_RANK];
  memcpy(tdims, P->dims, sizeof tdims);
  tdims[P->rank - 1] = 1;
  if (T->dt != MIL_DT_INT32 || T->st != ST_I32 || !same_dims(T, tdims, P->rank) ||
      c->slots[root_of(c, ks)].kind != SK_CONST || K->st != ST_I32 || K->rank != 1 || K->n != C)
    return;
  for (int64_t k = 0; k < C; k++)
    if (((const int32_t *)K->p)[k] != k) return;
  chain[n++] = sd, chain[n++] = cb, chain[n++] = sel;
  /* [mul by a scalar], [cast to fp16] */
  uint32_t end = g, cur = c->base[g], ss = UINT32_MAX;
  uint32_t u = nuse[cur] == 1 ? user[cur] : UINT32_MAX;
  if (stmt_is(c, u, MIL_OP_MUL) && like(c, c->base[u], P, MIL_DT_FP32)) {
    uint32_t ax = arg_slot(c, u, SHARED_x), ay = arg_slot(c, u, SHARED_y), other = ax == cur ? ay : ax;
    if ((ax == cur || ay == cur) && ax != ay && other != UINT32_MAX && c->vals[other].st == ST_F32 &&
        c->vals[other].dt == MIL_DT_FP32 && c->vals[other].n == 1) {
      chain[n++] = end;
      end = u, cur = c->base[u], ss = other;
      u = nuse[cur] == 1 ? user[cur] : UINT32_MAX;
    }
  }
  bool round = false;
  if (cast_to(c, u, "fp16") && like(c, c->base[u], P, MIL_DT_FP16)) {
    chain[n++] = end;
    end = u, round = true;
  }
  for (uint32_t i = 0; i < n; i++) c->fz[chain[i]].kind = FZ_ELIDED;
  c->fz[end] = (Fused){.kind = FZ_XENT_GRAD, .xs = xs, .bs = ts, .ss = ss, .xcast = xcast, .differs = differs,
                       .equals = equals, .round_out = round};
  if (2 * C > c->scratch_floats) c->scratch_floats = 2 * C; /* the row's exps, as doubles */
}

/* The source of one attention operand, traced back from the head matmul's operand hs [B, H, T, D]:
 *   hs = transpose(view [B, T, H, D] of src [B, T, H D], perm [0, 2, 1, 3])
 * the view used once, src (*res) a result or an input; the transpose and the view are elided unless hs has
 * other uses (a prefill's KV cache output: *kept); if src is one result of a split of X [B, T, W] along its
 * last axis, *split is the split statement, *src X and *off the operand's first column in X's rows (else
 * *split UINT32_MAX, *src src, *off 0).
 * The statements to elide go into el[*ne]. */
static bool attention_operand(const CpuProgram *c, uint32_t hs, MilDType dt, const uint32_t *nuse,
                              const uint32_t *stmt_of, uint32_t *res, uint32_t *src, int64_t *off,
                              uint32_t *split, bool *kept, uint32_t *el, uint32_t *ne) {
  static const int64_t heads[4] = {0, 2, 1, 3};
  if (hs == UINT32_MAX || c->slots[hs].kind != SK_RESULT || nuse[hs] < 1) return false;
  *kept = nuse[hs] > 1;
  uint32_t ts = stmt_of[hs];
  if (!stmt_is(c, ts, MIL_OP_TRANSPOSE) || !const_ints_are(c, ts, MIL_ARG_TRANSPOSE_perm, heads, 4, false)) return false;
  uint32_t vs = arg_slot(c, ts, SHARED_x);
  if (vs == UINT32_MAX || c->slots[vs].kind != SK_VIEW || nuse[vs] != 1 || stmt_of[vs] == UINT32_MAX) return false;
  const Val *H = &c->vals[hs], *V = &c->vals[vs];
  if (H->rank != 4 || V->rank != 4 || H->dt != dt || V->dt != dt || V->dims[0] != H->dims[0] ||
      V->dims[1] != H->dims[2] || V->dims[2] != H->dims[1] || V->dims[3] != H->dims[3])
    return false;
  uint32_t ss = c->slots[vs].src;
  const Val *S = &c->vals[ss];
  int64_t want[3] = {V->dims[0], V->dims[1], V->dims[2] * V->dims[3]};
  if ((c->slots[ss].kind != SK_RESULT && c->slots[ss].kind != SK_PARAM) || S->st != ST_F32 || S->dt != dt ||
      !same_dims(S, want, 3))
    return false;
  *res = *src = ss, *off = 0, *split = UINT32_MAX;
  uint32_t sp = stmt_of[ss];
  int64_t last[1] = {-1}, lastp[1] = {2};
  if (c->slots[ss].kind == SK_RESULT && sp != UINT32_MAX && c->ops[sp] && c->ops[sp]->op == MIL_OP_SPLIT &&
      c->fz[sp].kind == FZ_NONE && (const_ints_are(c, sp, MIL_ARG_SPLIT_axis, last, 1, false) ||
                                    const_ints_are(c, sp, MIL_ARG_SPLIT_axis, lastp, 1, false))) {
    uint32_t xs = arg_slot(c, sp, MIL_ARG_SPLIT_x);
    const Val *X = &c->vals[xs];
    if (xs != UINT32_MAX && X->st == ST_F32 && X->dt == dt && X->rank == 3 && X->dims[0] == want[0] &&
        X->dims[1] == want[1]) {
      int64_t at = 0;
      for (uint32_t r = c->base[sp]; r < ss; r++) at += c->vals[r].dims[2];
      *src = xs, *off = at, *split = sp;
    }
  }
  if (!*kept) el[(*ne)++] = ts, el[(*ne)++] = stmt_of[vs];
  return true;
}

/* Fuses an attention as lower-sdpa writes it, from softmax statement si:
 *   s = matmul(qh, kh, transpose_y) [B, H, L, S]; [s = mul(s, scalar)]; [s = add(s, mask [L, S])];
 *   p = softmax(s, last axis); o = matmul(p, vh) [B, H, L, DV]; y = transpose(o, perm [0, 2, 1, 3])
 * with qh, kh, vh as attention_operand traces them, every intermediate used once and of one float dtype.
 * The last transpose then computes y from the rows holding q, k and v (k_attention_fused.c), skipping the
 * keys a mask hides to the end of a row; the rest is elided, and a split all of whose results are q, k
 * and v with it. */
static void fuse_attention(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *user,
                           const uint32_t *stmt_of) {
  static const int64_t heads[4] = {0, 2, 1, 3}, no[1] = {0}, yes[1] = {1};
  /* AVX-512 only: scalar loops would be far slower than the unfused ops on sgemm */
  if (!cpu_features()->avx512 || !stmt_is(c, si, MIL_OP_SOFTMAX)) return;
  uint32_t ps = c->base[si], cur = arg_slot(c, si, MIL_ARG_SOFTMAX_x);
  const Val *P = &c->vals[ps];
  MilDType dt = P->dt;
  int64_t last[1] = {-1}, lastp[1] = {3};
  if (cur == UINT32_MAX || P->rank != 4 || P->st != ST_F32 || !is_float(dt) ||
      !(const_ints_are(c, si, MIL_ARG_SOFTMAX_axis, last, 1, true) ||
        const_ints_are(c, si, MIL_ARG_SOFTMAX_axis, lastp, 1, false)))
    return;
  int64_t B = P->dims[0], H = P->dims[1], L = P->dims[2], S = P->dims[3];
  if (S < 1 || S > 8192 || L < 1) return; /* the scratch holds a row block's scores */
  uint32_t el[16], ne = 0, mask = UINT32_MAX, scale = UINT32_MAX;
  /* Back from the softmax: [add mask], [mul scale], the scores' matmul. */
  for (int step = 0; step < 2; step++) {
    uint32_t st = stmt_of[cur];
    if (c->slots[cur].kind != SK_RESULT || nuse[cur] != 1 || !like(c, cur, P, dt)) return;
    bool is_add = stmt_is(c, st, MIL_OP_ADD), is_mul = stmt_is(c, st, MIL_OP_MUL);
    if ((!is_add || step > 0 || mask != UINT32_MAX) && (!is_mul || scale != UINT32_MAX)) break;
    uint32_t ax = arg_slot(c, st, SHARED_x), ay = arg_slot(c, st, SHARED_y);
    if (ax == UINT32_MAX || ay == UINT32_MAX || ax == ay) return;
    bool x_chain = like(c, ax, P, dt) && c->slots[ax].kind == SK_RESULT && nuse[ax] == 1;
    uint32_t in = x_chain ? ax : ay, other = x_chain ? ay : ax;
    if (!like(c, in, P, dt) || c->slots[in].kind != SK_RESULT || nuse[in] != 1) return;
    if (is_add) {
      const Val *M = &c->vals[other];
      if (M->st != ST_F32 || !is_float(M->dt) || M->rank < 2 || M->dims[M->rank - 1] != S ||
          M->dims[M->rank - 2] != L || elements(M->dims, M->rank) != L * S)
        return;
      mask = other;
    } else {
      float value;
      if (!const_scalar(c, other, &value)) return;
      scale = other; /* read when the kernel runs, as the mul would */
    }
    el[ne++] = st;
    cur = in;
  }
  uint32_t qk = stmt_of[cur];
  if (c->slots[cur].kind != SK_RESULT || nuse[cur] != 1 || !like(c, cur, P, dt) || !stmt_is(c, qk, MIL_OP_MATMUL) ||
      !const_ints_are(c, qk, MIL_ARG_MATMUL_transpose_x, no, 1, true) ||
      !const_ints_are(c, qk, MIL_ARG_MATMUL_transpose_y, yes, 1, false))
    return;
  el[ne++] = qk, el[ne++] = si;
  /* Forward from the softmax: p·v and the heads merged. */
  uint32_t pv = nuse[ps] == 1 ? user[ps] : UINT32_MAX;
  if (!stmt_is(c, pv, MIL_OP_MATMUL) || arg_slot(c, pv, MIL_ARG_MATMUL_x) != ps ||
      !const_ints_are(c, pv, MIL_ARG_MATMUL_transpose_x, no, 1, true) ||
      !const_ints_are(c, pv, MIL_ARG_MATMUL_transpose_y, no, 1, true))
    return;
  uint32_t os = c->base[pv], end = nuse[os] == 1 ? user[os] : UINT32_MAX;
  const Val *O = &c->vals[os];
  if (O->rank != 4 || O->dt != dt || O->st != ST_F32 || O->dims[0] != B || O->dims[1] != H || O->dims[2] != L ||
      !stmt_is(c, end, MIL_OP_TRANSPOSE) || !const_ints_are(c, end, MIL_ARG_TRANSPOSE_perm, heads, 4, false) ||
      c->vals[c->base[end]].dt != dt || c->vals[c->base[end]].st != ST_F32)
    return;
  el[ne++] = pv;
  uint32_t hs[3] = {arg_slot(c, qk, MIL_ARG_MATMUL_x), arg_slot(c, qk, MIL_ARG_MATMUL_y),
                    arg_slot(c, pv, MIL_ARG_MATMUL_y)};
  uint32_t res[3], src[3], split[3];
  int64_t off[3];
  bool kept[3];
  for (int k = 0; k < 3; k++)
    if (!attention_operand(c, hs[k], dt, nuse, stmt_of, &res[k], &src[k], &off[k], &split[k], &kept[k], el, &ne))
      return;
  const Val *Q = &c->vals[hs[0]], *K = &c->vals[hs[1]], *Vh = &c->vals[hs[2]];
  int64_t D = Q->dims[3];
  if (Q->dims[0] != B || Q->dims[1] != H || Q->dims[2] != L || K->dims[0] != B || K->dims[1] != H ||
      K->dims[2] != S || K->dims[3] != D || Vh->dims[0] != B || Vh->dims[1] != H || Vh->dims[2] != S ||
      Vh->dims[3] != O->dims[3] || D < 1 || O->dims[3] < 1)
    return;
  /* A split is elided when q, k and v are all its results (each used once, by its head's view, whose
   * transpose is elided too); otherwise the split runs and its results are read. */
  uint32_t sp = split[0];
  bool whole = sp != UINT32_MAX && split[1] == sp && split[2] == sp && c->f->stmts[sp].nresults == 3 &&
               !kept[0] && !kept[1] && !kept[2];
  for (uint32_t r = 0; whole && r < 3; r++) whole = nuse[c->base[sp] + r] == 1;
  if (whole) el[ne++] = sp;
  else
    for (int k = 0; k < 3; k++) src[k] = res[k], off[k] = 0;
  for (uint32_t i = 0; i < ne; i++) c->fz[el[i]].kind = FZ_ELIDED;
  c->fz[end] = (Fused){.kind = FZ_ATTENTION, .round_out = c->mode == CPU_NUMERICS_ANE && dt == MIL_DT_FP16,
                       .asrc = {src[0], src[1], src[2]}, .aoff = {off[0], off[1], off[2]}, .adim = D,
                       .amask = mask, .ascale = scale};
  int64_t need = attention_fused_scratch(L, S, D);
  if (need > c->scratch_floats) c->scratch_floats = need;
}

/* Whether statement si can be a member of an element-wise group: a float
 * unary op or float arithmetic binary op on float operands, not fused yet. */
static bool groupable(const CpuProgram *c, uint32_t si) {
  const OpEntry *e = c->ops[si];
  const MilStmt *s = &c->f->stmts[si];
  if (!e || c->fz[si].kind != FZ_NONE || s->nresults != 1 || c->vals[c->base[si]].st != ST_F32) return false;
  if (e->family != OF_UNARY && e->family != OF_BINARY) return false;
  const MilArgId operands[2] = {SHARED_x, SHARED_y};
  for (uint32_t k = 0; k < (e->family == OF_BINARY ? 2u : 1u); k++) {
    uint32_t a = arg_slot(c, si, operands[k]);
    if (a == UINT32_MAX || c->vals[a].st != ST_F32) return false;
  }
  return true;
}

/* The members of group [first, end) whose results are used only as the
 * operands of later members (not as outputs, not through views) live in
 * tile buffers: each gets the lowest one free when it is computed, freed
 * after its last reader (a result never shares its operands' buffer). */
static void assign_tiles(CpuProgram *c, uint32_t first, uint32_t end, const uint32_t *nuse) {
  const MilArgId operands[2] = {SHARED_x, SHARED_y};
  uint32_t inner[GROUP_MAX], lastread[GROUP_MAX], nin = 0;
  for (uint32_t si = first; si < end; si++) {
    if (!c->ops[si] || c->ops[si]->family == OF_VIEW) continue;
    uint32_t r = c->base[si], reads = 0, lr = si;
    for (uint32_t k = si + 1; k < end; k++) {
      if (!c->ops[k] || c->ops[k]->family == OF_VIEW) continue;
      for (uint32_t q = 0; q < 2; q++)
        if (arg_slot(c, k, operands[q]) == r) reads++, lr = k;
    }
    if (reads > 0 && reads == nuse[r]) inner[nin] = r, lastread[nin++] = lr;
  }
  bool busy[GROUP_MAX] = {false};
  for (uint32_t si = first; si < end; si++) {
    if (!c->ops[si] || c->ops[si]->family == OF_VIEW) continue;
    for (uint32_t i = 0; i < nin; i++)
      if (inner[i] == c->base[si]) {
        int32_t t = 0;
        while (busy[t]) t++;
        busy[t] = true;
        c->slots[inner[i]].tile = t;
        if ((uint32_t)t + 1 > c->ntiles) c->ntiles = (uint32_t)t + 1;
      }
    for (uint32_t i = 0; i < nin; i++)
      if (lastread[i] == si) busy[c->slots[inner[i]].tile] = false;
  }
}

/* Whether statement si is a reduction over the last dim of a float x
 * (keep_dims), which a row group can hold: its x's shape, and its own. */
static bool row_reduction(const CpuProgram *c, uint32_t si, const Val **in) {
  const OpEntry *e = c->ops[si];
  if (!e || e->family != OF_REDUCE || c->fz[si].kind != FZ_NONE || c->f->stmts[si].nresults != 1) return false;
  uint32_t xs = arg_slot(c, si, SHARED_x);
  if (xs == UINT32_MAX || c->vals[xs].st != ST_F32 || c->vals[c->base[si]].st != ST_F32) return false;
  const Val *a = &c->vals[xs], *o = &c->vals[c->base[si]];
  int64_t last[1] = {-1}, lastp[1] = {(int64_t)a->rank - 1}, one[1] = {1};
  if (a->rank < 1 || !(const_ints_are(c, si, SHARED_axes, last, 1, false) ||
      const_ints_are(c, si, SHARED_axes, lastp, 1, false)) ||
      !const_ints_are(c, si, SHARED_keep_dims, one, 1, false) || o->rank != a->rank || a->dims[a->rank - 1] < 2)
    return false;
  for (uint32_t i = 0; i + 1 < a->rank; i++)
    if (o->dims[i] != a->dims[i]) return false;
  *in = a;
  return o->dims[a->rank - 1] == 1;
}

/* Fuses the gather of a cross entropy's target logits (lower_cross_entropy.c):
 *   sh = sub(x, m), m = reduce_max(x, last axis, keep_dims)   [.., C], x float
 *   picked = gather(reshape(sh) [n C], index)                   index: row r's target + r C
 * The gather then reads x[i] - m[i / C] itself (the same float subtraction,
 * so the same bits): sh is left to the row group that computes it with its
 * exp, which need not write its [n, C] values anywhere; m is kept for the
 * gather. nuse is adjusted to say so before the groups are formed. */
static void fuse_xent_pick(CpuProgram *c, uint32_t g, uint32_t *nuse, const uint32_t *stmt_of) {
  if (!stmt_is(c, g, MIL_OP_GATHER)) return;
  int64_t zero[1] = {0};
  uint32_t vs = arg_slot(c, g, MIL_ARG_GATHER_x), is = arg_slot(c, g, MIL_ARG_GATHER_indices);
  if (vs == UINT32_MAX || is == UINT32_MAX || c->slots[vs].kind != SK_VIEW || nuse[vs] != 1 ||
      !const_ints_are(c, g, MIL_ARG_GATHER_axis, zero, 1, true) || stmt_arg(c, g, MIL_ARG_GATHER_batch_dims) ||
      c->vals[is].st != ST_I32 || c->vals[is].dt != MIL_DT_INT32)
    return;
  uint32_t shs = c->slots[vs].src, sub = stmt_of[shs];
  if (c->slots[shs].kind != SK_RESULT || !stmt_is(c, sub, MIL_OP_SUB) || c->vals[vs].rank != 1) return;
  uint32_t xs = arg_slot(c, sub, SHARED_x), ms = arg_slot(c, sub, SHARED_y);
  if (xs == UINT32_MAX || ms == UINT32_MAX || xs == ms) return;
  const Val *S = &c->vals[shs], *X = &c->vals[xs], *M = &c->vals[ms], *in = NULL;
  uint32_t mx = stmt_of[ms];
  if (S->st != ST_F32 || S->dt != MIL_DT_FP32 || !like(c, xs, S, MIL_DT_FP32) || c->slots[ms].kind != SK_RESULT ||
      !stmt_is(c, mx, MIL_OP_REDUCE_MAX) || !row_reduction(c, mx, &in) || in != X || M->st != ST_F32 ||
      c->vals[c->base[g]].st != ST_F32)
    return;
  c->fz[g] = (Fused){.kind = FZ_XENT_PICK, .xs = xs, .bs = ms, .ss = UINT32_MAX};
  nuse[shs]--;           /* the gather no longer reads sh (through the view) */
  nuse[ms]++, nuse[xs]++; /* but reads m and x: neither may live in a group's tiles */
}

/* Groups runs of consecutive statements (views and consts between them
 * allowed, at most GROUP_MAX members, two or more): groupable ones with
 * results of one shape S (an element group, tiles of GROUP_TILE elements),
 * or, with at least one reduction over S's last dim among them, groupable
 * ones with results of shape S or of S's rows (S with last dim 1) and such
 * reductions (a row group, tiles of whole rows; its rows a multiple of 4
 * long). */
static void fuse_groups(CpuProgram *c, const uint32_t *nuse) {
  const MilFunc *f = c->f;
  for (uint32_t si = 0; si < f->nstmts;) {
    const Val *in = NULL;
    bool red = row_reduction(c, si, &in);
    if (!red && !groupable(c, si)) {
      si++;
      continue;
    }
    const Val *S = red ? in : &c->vals[c->base[si]];
    int64_t rdims[MIL_MAX_RANK];
    memcpy(rdims, S->dims, sizeof rdims);
    if (S->rank) rdims[S->rank - 1] = 1;
    bool rows_ok = S->rank > 0 && S->dims[S->rank - 1] > 1 && S->dims[S->rank - 1] % 4 == 0, rowwise = red;
    uint32_t last = si, members = 1;
    for (uint32_t k = si + 1; k < f->nstmts && members < GROUP_MAX; k++) {
      if (!c->ops[k] || (c->ops[k]->family == OF_VIEW && c->fz[k].kind == FZ_NONE)) continue;
      const Val *kin = NULL, *r = &c->vals[c->base[k]];
      bool kred = rows_ok && row_reduction(c, k, &kin) && same_dims(kin, S->dims, S->rank);
      bool kel = groupable(c, k) && (same_dims(r, S->dims, S->rank) || (rows_ok && same_dims(r, rdims, S->rank)));
      if (!kred && !kel) break;
      rowwise = rowwise || kred || !same_dims(r, S->dims, S->rank);
      last = k;
      members++;
    }
    if (rowwise && !rows_ok) { /* a lone reduction, or an element group of rows-shaped results */
      si++;
      continue;
    }
    if (members >= 2) {
      int64_t L = rowwise ? S->dims[S->rank - 1] : 0;
      c->fz[si] = (Fused){.kind = FZ_GROUP, .end = last + 1, .rowlen = L};
      for (uint32_t k = si + 1; k <= last; k++)
        if (c->ops[k]) c->fz[k] = (Fused){.kind = FZ_MEMBER, .end = last + 1};
      assign_tiles(c, si, last + 1, nuse);
      int64_t tf = L ? tile_rows(L) * L : GROUP_TILE;
      if (tf > c->tile_floats) c->tile_floats = tf;
    }
    si = last + 1;
  }
}

/* Makes the element-wise group right after fused linear si (only elided
 * statements and consts between them) its epilogue: the group must have
 * the linear's result shape, with a last dim a multiple of 4 (so that each
 * row segment of a piece splits into the same vectors of 4 as unfused),
 * and read nothing computed after the linear but the linear's result and
 * its own members' results. A single groupable statement makes a group. */
static void fuse_epilogue(CpuProgram *c, uint32_t si, const uint32_t *nuse, const uint32_t *stmt_of) {
  const MilFunc *f = c->f;
  const Val *y = &c->vals[c->fz[si].ys];
  if (y->dims[2] % 4) return;
  uint32_t g = si + 1;
  while (g < f->nstmts && (!c->ops[g] || c->fz[g].kind == FZ_ELIDED || c->ops[g]->family == OF_VIEW)) g++;
  if (g == f->nstmts || !same_dims(&c->vals[c->base[g]], y->dims, y->rank)) return;
  if (c->fz[g].kind == FZ_NONE && groupable(c, g)) c->fz[g] = (Fused){.kind = FZ_GROUP, .end = g + 1};
  if (c->fz[g].kind != FZ_GROUP || c->fz[g].rowlen) return; /* a row group needs whole rows */
  uint32_t end = c->fz[g].end;
  for (uint32_t k = g; k < end; k++) {
    if (!c->ops[k]) continue;
    for (uint32_t i = c->argstart[c->argbase[k]]; i < c->argstart[c->argbase[k + 1]]; i++) {
      /* ready when the linear runs: set before it (a view too: views between the linear and the group run
       * after it), or the linear's result, or made by the group's own statements (its views run first) */
      uint32_t a = c->opslot[i], sa = stmt_of[a];
      bool ok = a == c->fz[si].ys || c->slots[a].kind == SK_CONST || c->slots[a].kind == SK_STR ||
                sa == UINT32_MAX || sa < si || (sa >= g && sa < end);
      if (!ok) return;
    }
  }
  (void)nuse;
  for (uint32_t k = g; k < end; k++) c->fz[k].epi = true;
  c->fz[si].gfirst = g;
}

/* Plans the fusions (none when check_finite asks for every result, or the
 * caller asks for none). */
void plan_fusion(CpuProgram *c) {
  const MilFunc *f = c->f;
  c->fz = xcalloc(f->nstmts + 1, sizeof *c->fz);
  if (c->check_finite || c->unfused) return;
  uint32_t *nuse = xcalloc(c->nslots + 1, sizeof *nuse), *user = xcalloc(c->nslots + 1, sizeof *user);
  uint32_t *stmt_of = xcalloc(c->nslots + 1, sizeof *stmt_of);
  for (uint32_t s = 0; s < c->nslots; s++) user[s] = stmt_of[s] = UINT32_MAX;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    for (uint32_t k = 0; k < f->stmts[si].nresults; k++) stmt_of[c->base[si] + k] = si;
    for (uint32_t i = c->argstart[c->argbase[si]]; i < c->argstart[c->argbase[si + 1]]; i++) {
      nuse[c->opslot[i]]++;
      user[c->opslot[i]] = si;
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) nuse[c->out_slot[i]]++, user[c->out_slot[i]] = UINT32_MAX;
  for (uint32_t si = 0; si < f->nstmts; si++) fuse_linear(c, si, nuse, user, stmt_of);
  for (uint32_t si = 0; si < f->nstmts; si++) fuse_xent_grad(c, si, nuse, user, stmt_of);
  for (uint32_t si = 0; si < f->nstmts; si++) fuse_attention(c, si, nuse, user, stmt_of);
  for (uint32_t si = 0; si < f->nstmts; si++) fuse_xent_pick(c, si, nuse, stmt_of);
  fuse_groups(c, nuse);
  for (uint32_t si = 0; si < f->nstmts; si++)
    if (c->fz[si].kind == FZ_LINEAR) fuse_epilogue(c, si, nuse, stmt_of);
  free(nuse);
  free(user);
  free(stmt_of);
}
