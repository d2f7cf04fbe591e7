/*
 * Weight updates without re-planning: cpu_reload_weights, cpu_set_weight.
 */
#include "cpu_internal.h"

bool cpu_reload_weights(CpuProgram *c, Diag *d) {
  bool ok = true;
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0) continue;
    const OrionWeight *w = orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight);
    const Val *v = &c->vals[s];
    size_t es = w->dtype == MIL_DT_FP16 ? 2 : w->dtype == MIL_DT_INT8 || w->dtype == MIL_DT_UINT8 ? 1 : 4;
    if (w->size != (uint64_t)v->n * es || (v->st == ST_H16 && w->dtype != MIL_DT_FP16)) {
      diag_error(d, c->f->stmts[w->stmt].loc, "weight '%s' changed its size or type; reloading needs a new plan",
                 w->name);
      ok = false;
      continue;
    }
    const_from_weight(c, s, w);
  }
  return ok && eval_constexprs(c, d) && bind_all(c, d); /* a setting may have changed */
}

bool cpu_set_weight(CpuProgram *c, const char *const_name, MilDType dtype, const void *data, size_t bytes, Diag *d) {
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0) continue;
    const OrionWeight *w = orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight);
    if (strcmp(w->name, const_name)) continue;
    Val *v = &c->vals[s];
    if (!is_float(v->dt)) {
      diag_error(d, (SrcSpan){0}, "weight '%s' is %s; only fp16 and fp32 weights can be set", const_name,
                 mil_dtype_name(v->dt));
      return false;
    }
    if (dtype != MIL_DT_FP16 && dtype != MIL_DT_FP32) {
      diag_error(d, (SrcSpan){0}, "weight '%s': data of type %s; give fp16 or fp32", const_name, mil_dtype_name(dtype));
      return false;
    }
    size_t es = dtype == MIL_DT_FP16 ? 2 : 4;
    if (bytes != (size_t)v->n * es) {
      diag_error(d, (SrcSpan){0}, "weight '%s' has %lld elements (%zu bytes of %s) but %zu bytes were given",
                 const_name, (long long)v->n, (size_t)v->n * es, mil_dtype_name(dtype), bytes);
      return false;
    }
    const unsigned char *p = data;
    if (v->st == ST_H16) {
      uint16_t *h = const_owned(c, s, 2);
      if (dtype == MIL_DT_FP16) memcpy(h, data, bytes);
      else
        for (int64_t i = 0; i < v->n; i++) {
          float f;
          memcpy(&f, p + 4 * i, 4);
          h[i] = fp16_from_float(f);
        }
      return !c->setting[s] || bind_all(c, d);
    }
    float *o = const_owned(c, s, 4);
    if (dtype == MIL_DT_FP16) {
      h2f(o, data, v->n);
      return !c->setting[s] || bind_all(c, d);
    }
    for (int64_t i = 0; i < v->n; i++) {
      float f;
      memcpy(&f, p + 4 * i, 4);
      o[i] = v->dt == MIL_DT_FP16 ? fp16_to_float(fp16_from_float(f)) : f;
    }
    return !c->setting[s] || bind_all(c, d);
  }
  for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
    const OrionWeight *w = orion_weight(c->prog, c->fn, i);
    if (!strcmp(w->name, const_name)) {
      /* its value is computed from this data at prepare; setting the result alone would be overwritten on reload */
      diag_error(d, (SrcSpan){0}, "weight '%s' is the '%s' of a %s; it can be reloaded but not set", const_name, w->attr,
                 c->f->stmts[w->stmt].op);
      return false;
    }
  }
  diag_error(d, (SrcSpan){0}, "function '%s' has no BLOBFILE weight '%s'", c->f->name, const_name);
  return false;
}
