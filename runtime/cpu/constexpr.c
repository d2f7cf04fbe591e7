/*
 * constexpr_* ops, evaluated at prepare (and on reload) into consts.
 */
#include "cpu_internal.h"

#include <math.h>

/* ---- constexpr_* ops: evaluated at prepare (and on reload) like consts ----
 *
 * Their inputs are constants, written as attributes (the iOS16/17 form, with
 * a BLOBFILE for the data) or as arguments naming consts or literals (the
 * iOS18 form). Each result is computed in double and rounded once to its
 * declared dtype, as the op defines it (NumPy's astype to the scale's dtype). */

typedef struct CxIn {
  MilDType dt;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  int64_t n;
  const Val *v;          /* a const's value (an argument), or */
  const MilLiteral *lit; /* an inline attribute, or */
  const OrionWeight *w;  /* a BLOBFILE attribute */
  const char *str;       /* a string, whichever form */
} CxIn;

static double cx_ld(const CxIn *in, int64_t i) {
  if (in->v) return ld(in->v, i);
  if (in->lit) {
    const MilLiteral *l = in->lit;
    uint64_t k = l->count == 1 ? 0 : (uint64_t)i;
    return l->floats ? l->floats[k] : l->ints ? (double)l->ints[k] : l->bools ? (l->bools[k] ? 1.0 : 0.0) : 0.0;
  }
  const unsigned char *p = in->w->data;
  switch (in->w->dtype) {
  case MIL_DT_FP16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  case MIL_DT_FP32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return (double)f;
  }
  case MIL_DT_INT32: {
    int32_t k;
    memcpy(&k, p + 4 * i, 4);
    return k;
  }
  case MIL_DT_INT8: return (int8_t)p[i];
  default: return p[i]; /* uint8 */
  }
}

/* Input `name` of constexpr statement x->s: an argument (which must be a
 * const) or an attribute. False (reported when required) if absent or bad. */
static bool cx_input(Ctx *x, MilArgId id, bool required, CxIn *in) {
  const CpuProgram *c = x->c;
  const char *name = mil_arg_name(id); /* an attribute's too */
  memset(in, 0, sizeof *in);
  const MilArg *a = find_arg(x, id);
  if (a) {
    if (a->is_list || a->nitems != 1) return op_fail(x, "argument '%s' must be a single value", name);
    uint32_t slot = c->opslot[c->argstart[c->argbase[x->si] + (uint32_t)(a - x->s->args)]];
    uint8_t kind = c->slots[slot].kind;
    if (kind != SK_CONST && kind != SK_STR) return op_fail(x, "argument '%s' must be a constant", name);
    const Val *v = &c->vals[slot];
    if (kind == SK_STR) in->str = v->str;
    else in->v = v;
    in->dt = v->dt, in->rank = v->rank, in->n = v->n;
    memcpy(in->dims, v->dims, sizeof in->dims);
    return true;
  }
  const MilAttr *at = mil_find_attr(x->s->attrs, x->s->nattrs, name);
  if (!at || !at->value) return required ? op_fail(x, "missing input '%s'", name) : false;
  const MilLiteral *l = at->value;
  const MilType *t = &l->type;
  if (t->kind != MIL_TYPE_TENSOR) return op_fail(x, "input '%s' is not a tensor", name);
  in->dt = t->dtype, in->rank = t->rank, in->n = elements(t->dims, t->rank);
  memcpy(in->dims, t->dims, sizeof in->dims);
  if (l->payload == MIL_PAYLOAD_BLOB) {
    for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
      const OrionWeight *w = orion_weight(c->prog, c->fn, i);
      if (w->stmt == x->si && !strcmp(w->attr, name)) in->w = w;
    }
    if (!in->w) return op_fail(x, "the BLOBFILE of input '%s' was not loaded", name);
    return true;
  }
  if (l->payload != MIL_PAYLOAD_INLINE) return op_fail(x, "input '%s' has no value", name);
  if (t->dtype == MIL_DT_STRING) {
    if (l->count != 1 || !l->strings) return op_fail(x, "input '%s' must be one string", name);
    in->str = l->strings[0];
    return true;
  }
  /* uint32: the `shape` of constexpr_lut_to_dense / sparse_to_dense (read as doubles, exact) */
  if (!dtype_const_ok(t->dtype) && t->dtype != MIL_DT_UINT32)
    return op_fail(x, "input '%s' has the unsupported element type %s", name, mil_dtype_name(t->dtype));
  if (l->count != (uint64_t)in->n && l->count != 1) return op_fail(x, "input '%s' has the wrong number of elements", name);
  in->lit = l;
  return true;
}

/* Whether input id is given, as an argument or an attribute. */
static bool cx_given(Ctx *x, MilArgId id) {
  return find_arg(x, id) || mil_find_attr(x->s->attrs, x->s->nattrs, mil_arg_name(id));
}

static bool cx_numeric(Ctx *x, MilArgId id, const CxIn *in) {
  if (in->str) return op_fail(x, "input '%s' must be a tensor, not a string", mil_arg_name(id));
  return true;
}

/* Stores r as element i of the constexpr result v, rounded to its dtype. */
static void cx_st(Val *v, int64_t i, double r) {
  st(v, i, v->dt == MIL_DT_FP16 ? (double)fp16_to_float(fp16_from_double(r)) : r);
}

/* The element of a per-axis parameter p (a scalar, or a vector along `axis`)
 * for element i of a tensor of dims. */
static int64_t along(const CxIn *p, int64_t i, const int64_t *dims, uint32_t rank, uint32_t axis) {
  if (p->n == 1) return 0;
  return (i / elements(dims + axis + 1, rank - axis - 1)) % dims[axis];
}

/* constexpr_affine_dequantize (iOS16): scale * (quantized_data - zero_point),
 * scale and zero_point scalars or vectors along axis. */
static bool cx_affine(Ctx *x, Val *out) {
  CxIn q, zp, sc, ax;
  if (!cx_input(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_quantized_data, true, &q) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_zero_point, true, &zp) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_scale, true, &sc) ||
          !cx_input(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_axis, true, &ax) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_quantized_data, &q) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_zero_point, &zp) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_scale, &sc) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_axis, &ax))
    return false;
  if (q.dt != MIL_DT_INT8 && q.dt != MIL_DT_UINT8)
    return op_fail(x, "quantized_data must be int8 or uint8, not %s", mil_dtype_name(q.dt));
  if (sc.dt != out->dt) return op_fail(x, "scale is %s but the result is declared %s", mil_dtype_name(sc.dt), mil_dtype_name(out->dt));
  if (ax.n != 1) return op_fail(x, "axis must be a scalar");
  uint32_t axis = 0;
  if (!norm_axis(x, to_index(cx_ld(&ax, 0)), q.rank, &axis) || !expect_shape(x, out, q.dims, q.rank)) return false;
  const CxIn *p[2] = {&sc, &zp};
  const MilArgId pid[2] = {MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_scale, MIL_ARG_CONSTEXPR_AFFINE_DEQUANTIZE_zero_point};
  for (int k = 0; k < 2; k++)
    if (p[k]->rank > 1 || (p[k]->rank == 1 && p[k]->n != q.dims[axis]))
      return op_fail(x, "%s must be a scalar or a vector of the %lld elements of dimension %u", mil_arg_name(pid[k]),
                  (long long)q.dims[axis], axis);
  for (int64_t i = 0; i < out->n; i++) {
    double zv = cx_ld(&zp, along(&zp, i, q.dims, q.rank, axis)), sv = cx_ld(&sc, along(&sc, i, q.dims, q.rank, axis));
    cx_st(out, i, sv * (cx_ld(&q, i) - zv));
  }
  return true;
}

/* constexpr_cast (iOS16): source_val converted to output_dtype. */
static bool cx_cast(Ctx *x, Val *out) {
  CxIn src, to;
  if (!cx_input(x, MIL_ARG_CONSTEXPR_CAST_source_val, true, &src) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_CAST_output_dtype, true, &to) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_CAST_source_val, &src))
    return false;
  if (!to.str) return op_fail(x, "output_dtype must be a string");
  if (mil_dtype_from_name(to.str, strlen(to.str)) != out->dt)
    return op_fail(x, "casts to '%s' but the result is declared %s", to.str, mil_dtype_name(out->dt));
  if (!expect_shape(x, out, src.dims, src.rank)) return false;
  for (int64_t i = 0; i < out->n; i++) cx_st(out, i, cx_ld(&src, i));
  return true;
}

/* constexpr_blockwise_shift_scale (iOS18): scale * (data - offset), scale and
 * offset of data's rank with each dim dividing data's: one value per block. */
static bool cx_blockwise(Ctx *x, Val *out) {
  CxIn data, sc, off;
  if (!cx_input(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_data, true, &data) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_scale, true, &sc) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_data, &data) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_scale, &sc))
    return false;
  bool has_off = cx_given(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_offset);
  if (has_off && (!cx_input(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_offset, true, &off) ||
                  !cx_numeric(x, MIL_ARG_CONSTEXPR_BLOCKWISE_SHIFT_SCALE_offset, &off)))
    return false;
  if (sc.dt != out->dt) return op_fail(x, "scale is %s but the result is declared %s", mil_dtype_name(sc.dt), mil_dtype_name(out->dt));
  if (!expect_shape(x, out, data.dims, data.rank)) return false;
  int64_t blk[MIL_MAX_RANK], sst[MIL_MAX_RANK];
  if (sc.rank != data.rank || (has_off && (off.rank != sc.rank || off.n != sc.n)))
    return op_fail(x, "scale (and offset) must have the rank of data, %u", data.rank);
  for (uint32_t i = 0; i < data.rank; i++) {
    if (sc.dims[i] < 1 || data.dims[i] % sc.dims[i] || (has_off && off.dims[i] != sc.dims[i]))
      return op_fail(x, "dimension %u of scale (%lld) does not divide data's (%lld)", i, (long long)sc.dims[i],
                  (long long)data.dims[i]);
    blk[i] = data.dims[i] / sc.dims[i];
  }
  strides_of(sc.dims, sc.rank, sst);
  for (int64_t i = 0; i < out->n; i++) {
    int64_t rem = i, k = 0;
    for (uint32_t d = data.rank; d-- > 0;) {
      k += (rem % data.dims[d]) / blk[d] * sst[d];
      rem /= data.dims[d];
    }
    cx_st(out, i, cx_ld(&sc, k) * (cx_ld(&data, i) - (has_off ? cx_ld(&off, k) : 0)));
  }
  return true;
}

/* The `shape` input of the iOS16 lut/sparse ops: it must be the declared shape. */
static bool cx_shape(Ctx *x, const CxIn *shp, const Val *out) {
  if (shp->dt != MIL_DT_UINT32 && shp->dt != MIL_DT_INT32) return op_fail(x, "shape must be uint32");
  if (shp->rank != 1 || shp->n != out->rank) return op_fail(x, "shape has %lld entries but the result has rank %u", (long long)shp->n, out->rank);
  for (uint32_t i = 0; i < out->rank; i++)
    if (cx_ld(shp, i) != (double)out->dims[i]) return op_fail(x, "shape does not match the declared result shape");
  return true;
}

/* Bit p of packed bytes (least significant bit first, as coremltools packs). */
static int cx_bit(const CxIn *in, int64_t p) { return ((int)cx_ld(in, p / 8) >> (p % 8)) & 1; }

/* constexpr_lut_to_dense (iOS16): indices, uint8 [M], pack one n-bit index
 * per element (n = log2 of the lut's size, 1, 2, 4, 6 or 8; LSB first, an
 * index may straddle two bytes) into lut, a vector; the result has `shape`. */
static bool cx_lut(Ctx *x, Val *out) {
  CxIn ind, lut, shp;
  bool has_shape = cx_given(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_shape);
  if (!has_shape) return op_fail(x, "the iOS18 form (no shape; vector_axis) is not supported yet");
  if (!cx_input(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_indices, true, &ind) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_lut, true, &lut) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_shape, true, &shp) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_indices, &ind) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_lut, &lut) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_LUT_TO_DENSE_shape, &shp) || !cx_shape(x, &shp, out))
    return false;
  if (ind.dt != MIL_DT_UINT8 || ind.rank != 1) return op_fail(x, "indices must be a uint8 vector");
  if (lut.dt != out->dt) return op_fail(x, "lut is %s but the result is declared %s", mil_dtype_name(lut.dt), mil_dtype_name(out->dt));
  int nbits = 0;
  while (nbits < 9 && ((int64_t)1 << nbits) != lut.n) nbits++;
  if (lut.rank != 1 || (nbits != 1 && nbits != 2 && nbits != 4 && nbits != 6 && nbits != 8))
    return op_fail(x, "lut must be a vector of 2, 4, 16, 64 or 256 entries (it has %lld)", (long long)lut.n);
  if (ind.n != (out->n * nbits + 7) / 8)
    return op_fail(x, "indices has %lld bytes; %lld %d-bit indices need %lld", (long long)ind.n, (long long)out->n, nbits,
                (long long)((out->n * nbits + 7) / 8));
  for (int64_t i = 0; i < out->n; i++) {
    int64_t k = 0;
    for (int b = 0; b < nbits; b++) k |= (int64_t)cx_bit(&ind, i * nbits + b) << b;
    cx_st(out, i, cx_ld(&lut, k));
  }
  return true;
}

/* constexpr_sparse_to_dense (iOS16): bit i of mask (uint8 [ceil(n/8)], LSB
 * first) set takes the next value of nonzero_data, clear gives 0. */
static bool cx_sparse(Ctx *x, Val *out) {
  CxIn nz, mask, shp;
  bool has_shape = cx_given(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_shape);
  if (!has_shape) return op_fail(x, "the iOS18 form (a uint1 mask of the result's shape) is not supported yet");
  if (!cx_input(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_nonzero_data, true, &nz) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_mask, true, &mask) ||
      !cx_input(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_shape, true, &shp) ||
      !cx_numeric(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_nonzero_data, &nz) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_mask, &mask) ||
          !cx_numeric(x, MIL_ARG_CONSTEXPR_SPARSE_TO_DENSE_shape, &shp) ||
      !cx_shape(x, &shp, out))
    return false;
  if (mask.dt != MIL_DT_UINT8 || mask.rank != 1) return op_fail(x, "mask must be a uint8 vector");
  if (nz.dt != out->dt || nz.rank != 1)
    return op_fail(x, "nonzero_data must be a vector of the result's dtype %s", mil_dtype_name(out->dt));
  if (mask.n != (out->n + 7) / 8)
    return op_fail(x, "mask has %lld bytes; %lld elements need %lld", (long long)mask.n, (long long)out->n, (long long)((out->n + 7) / 8));
  int64_t set = 0;
  for (int64_t p = 0; p < mask.n * 8; p++) {
    if (!cx_bit(&mask, p)) continue;
    if (p >= out->n) return op_fail(x, "mask has bit %lld set, past the %lld elements", (long long)p, (long long)out->n);
    set++;
  }
  if (set != nz.n) return op_fail(x, "mask has %lld bits set but nonzero_data has %lld values", (long long)set, (long long)nz.n);
  for (int64_t i = 0, k = 0; i < out->n; i++) cx_st(out, i, cx_bit(&mask, i) ? cx_ld(&nz, k++) : 0);
  return true;
}


/* The constexpr ops the backend evaluates, by MilOpId. */
static const CxFn cx_table[MIL_OP_COUNT] = {
    [MIL_OP_CONSTEXPR_AFFINE_DEQUANTIZE] = cx_affine,
    [MIL_OP_CONSTEXPR_CAST] = cx_cast,
    [MIL_OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE] = cx_blockwise,
    [MIL_OP_CONSTEXPR_LUT_TO_DENSE] = cx_lut,
    [MIL_OP_CONSTEXPR_SPARSE_TO_DENSE] = cx_sparse,
};

CxFn find_cx(MilOpId op) { return (unsigned)op < MIL_OP_COUNT ? cx_table[op] : NULL; }

/* Evaluates every constexpr statement, in order (one may use another's result). */
bool eval_constexprs(CpuProgram *c, Diag *d) {
  bool ok = true;
  for (uint32_t si = 0; si < c->f->nstmts; si++) {
    const MilStmt *s = &c->f->stmts[si];
    if (c->ops[si] || !c->mil[si] || !find_cx(c->mil[si]->id)) continue;
    uint32_t slot = c->base[si];
    const_owned(c, slot, 4);
    Ctx x = {.c = c, .vals = c->vals, .d = d, .s = s, .si = si};
    if (s->nresults != 1) ok = op_fail(&x, "must have one result");
    else ok = find_cx(c->mil[si]->id)(&x, &c->vals[slot]) && ok;
  }
  return ok;
}
