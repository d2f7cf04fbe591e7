/*
 * Operands: a statement's arguments looked up by name and read as values,
 * scalars, strings and integer lists; axes and broadcasting.
 */
#include "cpu_internal.h"

const MilArg *find_arg(const MilStmt *s, const char *name) {
  for (uint32_t i = 0; i < s->nargs; i++)
    if (!strcmp(s->args[i].name, name)) return &s->args[i];
  return NULL;
}

/* The value of item j of argument a of the current statement. */
const Val *arg_item(Ctx *x, const MilArg *a, uint32_t j) {
  const CpuProgram *c = x->c;
  uint32_t k = (uint32_t)(a - x->s->args);
  return &x->vals[c->opslot[c->argstart[c->argbase[x->si] + k] + j]];
}

/* The slot read by single-item argument `name` of statement si, UINT32_MAX if none. */
uint32_t arg_slot(const CpuProgram *c, uint32_t si, const char *name) {
  const MilStmt *s = &c->f->stmts[si];
  const MilArg *a = find_arg(s, name);
  if (!a || a->is_list || a->nitems != 1) return UINT32_MAX;
  return c->opslot[c->argstart[c->argbase[si] + (uint32_t)(a - s->args)]];
}

/* The value of argument `name`, NULL when absent (no error: optional). */
const Val *opt_arg(Ctx *x, const char *name, bool *ok) {
  const MilArg *a = find_arg(x->s, name);
  if (!a) return NULL;
  if (a->is_list || a->nitems != 1) {
    *ok = op_fail(x, "argument '%s' must be a single value", name);
    return NULL;
  }
  return arg_item(x, a, 0);
}

const Val *req_arg(Ctx *x, const char *name, bool *ok) {
  if (!find_arg(x->s, name)) {
    *ok = op_fail(x, "missing argument '%s'", name);
    return NULL;
  }
  return opt_arg(x, name, ok);
}

/* The value of a scalar, string or list argument: when binding, the const
 * it is (through views), or NULL after an error if it is computed. */
static const Val *setting_arg(Ctx *x, const char *name, bool *ok) {
  const Val *v = opt_arg(x, name, ok);
  if (!v || !x->binding) return v;
  uint32_t r = root_of(x->c, (uint32_t)(v - x->vals));
  if (x->c->slots[r].kind != SK_CONST && x->c->slots[r].kind != SK_STR) {
    *ok = op_fail(x, "argument '%s' must be a constant", name);
    return NULL;
  }
  x->setting[r] = true;
  return &x->vals[r];
}

/* A numeric scalar argument (default dflt when absent). */
double scalar_arg(Ctx *x, const char *name, double dflt, bool *ok) {
  const Val *v = setting_arg(x, name, ok);
  if (!v) return dflt;
  if (v->st == ST_STR || v->n != 1) {
    *ok = op_fail(x, "argument '%s' must be a scalar", name);
    return dflt;
  }
  return ld(v, 0);
}

const char *string_arg(Ctx *x, const char *name, const char *dflt, bool *ok) {
  const Val *v = setting_arg(x, name, ok);
  if (!v) return dflt;
  if (v->st != ST_STR) {
    *ok = op_fail(x, "argument '%s' must be a string", name);
    return dflt;
  }
  return v->str;
}

/* An integer list argument; *n = 0 and false returned when absent. */
bool ints_arg(Ctx *x, const char *name, int64_t *buf, uint32_t max, uint32_t *n, bool *ok) {
  return ints_of(x, name, setting_arg(x, name, ok), buf, max, n, ok);
}

/* The integers of value v (argument `name`, NULL when absent), as ints_arg. */
bool ints_of(Ctx *x, const char *name, const Val *v, int64_t *buf, uint32_t max, uint32_t *n, bool *ok) {
  *n = 0;
  if (!v) return false;
  if (v->st == ST_STR || v->n > (int64_t)max) {
    *ok = op_fail(x, "argument '%s' must be a list of at most %u integers", name, max);
    return false;
  }
  for (int64_t i = 0; i < v->n; i++) buf[i] = to_index(ld(v, i));
  *n = (uint32_t)v->n;
  return true;
}

/* v, or when binding and v is a const (through views), the const, whose
 * elements are set already; *is_const says which. */
const Val *const_or_run(Ctx *x, const Val *v, bool *is_const) {
  if (!v) return v;
  uint32_t r = root_of(x->c, (uint32_t)(v - x->vals));
  bool k = x->binding && (x->c->slots[r].kind == SK_CONST || x->c->slots[r].kind == SK_STR);
  if (!k) *is_const = false;
  return k ? &x->vals[r] : v;
}

bool norm_axis(Ctx *x, int64_t axis, uint32_t rank, uint32_t *out) {
  int64_t a = axis < 0 ? axis + (int64_t)rank : axis;
  if (a < 0 || a >= (int64_t)rank) return op_fail(x, "axis %lld is out of range for rank %u", (long long)axis, rank);
  *out = (uint32_t)a;
  return true;
}

/* Strides of `in` broadcast to the shape of `out` (NumPy rules: aligned at
 * the right, size-1 dims stretch with stride 0). */
bool bcast_strides(Ctx *x, const Val *in, const Val *out, int64_t *bst) {
  if (in->rank > out->rank) return op_fail(x, "an operand of rank %u does not broadcast to rank %u", in->rank, out->rank);
  int64_t st_[MIL_MAX_RANK];
  strides_of(in->dims, in->rank, st_);
  uint32_t lead = out->rank - in->rank;
  for (uint32_t i = 0; i < out->rank; i++) {
    if (i < lead) {
      bst[i] = 0;
      continue;
    }
    int64_t d = in->dims[i - lead];
    if (d != out->dims[i] && d != 1) {
      char a[128], b[128];
      shape_str(in->dims, in->rank, a, sizeof a);
      shape_str(out->dims, out->rank, b, sizeof b);
      return op_fail(x, "an operand of shape %s does not broadcast to %s", a, b);
    }
    bst[i] = d == 1 ? 0 : st_[i - lead];
  }
  return true;
}
