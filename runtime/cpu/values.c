/*
 * Values: errors reported at the running statement, shapes as text and
 * checked against the declared ones, literals converted to values, and the
 * collapsing of dims that strided loops share.
 */
#include "cpu_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

bool op_fail(Ctx *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  StrBuf sb;
  sb_init(&sb);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  diag_error(x->d, x->s->op_loc, "%s: %s", x->s->op, sb.data);
  sb_free(&sb);
  return false;
}







size_t cpu_dtype_size(MilDType t) {
  switch (t) {
  case MIL_DT_FP16: return 2;
  case MIL_DT_FP32: return 4;
  case MIL_DT_INT32: return 4;
  case MIL_DT_BOOL: return sizeof(bool);
  default: return 0;
  }
}






void shape_str(const int64_t *dims, uint32_t rank, char *buf, size_t len) {
  size_t u = (size_t)snprintf(buf, len, "[");
  for (uint32_t i = 0; i < rank && u < len; i++)
    u += (size_t)snprintf(buf + u, len - u, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (u < len) snprintf(buf + u, len - u, "]");
}

/* Checks a computed shape against the declared one of result v. */
bool expect_shape(Ctx *x, const Val *v, const int64_t *dims, uint32_t rank) {
  bool same = rank == v->rank;
  for (uint32_t i = 0; same && i < rank; i++) same = dims[i] == v->dims[i];
  if (same) return true;
  char a[128], b[128];
  shape_str(dims, rank, a, sizeof a);
  shape_str(v->dims, v->rank, b, sizeof b);
  return op_fail(x, "the result shape is %s but the statement declares %s", a, b);
}


void val_shape(Val *v, const MilType *t) {
  memset(v, 0, sizeof *v);
  v->dt = t->dtype;
  v->st = storage_of(t->dtype);
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  v->n = elements(t->dims, t->rank);
}


/* Converts an inline literal to an owned value (const statements and
 * literal operands). A one-element payload splats. */
bool literal_val(const MilLiteral *l, Val *v, const char **why) {
  const MilType *t = &l->type;
  memset(v, 0, sizeof *v);
  if (t->kind != MIL_TYPE_TENSOR) return *why = "is not a tensor", false;
  if (t->dtype == MIL_DT_STRING) {
    if (l->payload != MIL_PAYLOAD_INLINE || l->count != 1 || !l->strings) return *why = "is not one string", false;
    v->dt = MIL_DT_STRING;
    v->st = ST_STR;
    v->str = l->strings[0];
    return true;
  }
  if (!dtype_const_ok(t->dtype)) return *why = "has an element type the CPU backend does not hold", false;
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return *why = "has an unknown dimension", false;
  if (l->payload != MIL_PAYLOAD_INLINE) return *why = "has no inline data", false;
  val_shape(v, t);
  if (l->count != (uint64_t)v->n && l->count != 1) return *why = "has the wrong number of elements", false;
  v->p = alloc_elems(v->n, 4);
  for (int64_t i = 0; i < v->n; i++) {
    uint64_t k = l->count == 1 ? 0 : (uint64_t)i;
    st(v, i, l->floats ? l->floats[k] : l->ints ? (double)l->ints[k] : l->bools ? (l->bools[k] ? 1.0 : 0.0) : 0.0);
  }
  return true;
}

/* Drops size-1 dims and merges neighbours that every operand walks
 * contiguously; dims/strides are replaced, the new rank returned. */
uint32_t collapse_dims(uint32_t rank, int64_t *dims, int64_t **strides, uint32_t nops) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 1) continue;
    bool merge = r > 0;
    for (uint32_t k = 0; merge && k < nops; k++) merge = strides[k][r - 1] == strides[k][i] * dims[i];
    if (merge) {
      dims[r - 1] *= dims[i];
      for (uint32_t k = 0; k < nops; k++) strides[k][r - 1] = strides[k][i];
    } else {
      dims[r] = dims[i];
      for (uint32_t k = 0; k < nops; k++) strides[k][r] = strides[k][i];
      r++;
    }
  }
  return r;
}
