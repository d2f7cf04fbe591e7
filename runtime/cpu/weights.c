/*
 * Weight updates without re-planning: cpu_reload_weights, cpu_set_weight;
 * and the fp32 copies of fp16 weights that the programs of one context
 * share.
 */
#include "cpu_internal.h"
#include "orion/parallel.h"


static void detach_locked(CpuContext *ctx, Slot *sl) {
  SharedCopy *e = sl->shared;
  sl->shared = NULL;
  if (--e->users) return;
  SharedCopy **at = &ctx->shared;
  while (*at != e) at = &(*at)->next;
  *at = e->next;
  free(e->data);
  free(e);
}

void shared_detach(CpuProgram *c, uint32_t slot) {
  Slot *sl = &c->slots[slot];
  if (!sl->shared) return;
  pthread_mutex_lock(&c->ctx->shared_mu);
  detach_locked(c->ctx, sl);
  pthread_mutex_unlock(&c->ctx->shared_mu);
  c->vals[slot].p = NULL;
}

/* A conversion is skipped only when the copy was made from the weight's
 * current version by another program's prepare or reload since this slot
 * last took it up: a program that reloads twice converts twice, as it did
 * with a copy of its own. With `now` (prepare) the copy is converted here,
 * under the lock; a reload converts after (in pieces on two threads): the
 * caller does not run or prepare the context's other programs meanwhile,
 * which read the copy too (as they read the weight data being changed). */
float *shared_fp32_copy(CpuProgram *c, uint32_t slot, const OrionWeight *w, bool now, bool *convert) {
  CpuContext *ctx = c->ctx;
  Slot *sl = &c->slots[slot];
  Val *v = &c->vals[slot];
  uint64_t version = orion_weights_version(c->prog);
  if (sl->owned) free(v->p);
  sl->owned = false;
  pthread_mutex_lock(&ctx->shared_mu);
  SharedCopy *e = ctx->shared;
  while (e && !(e->src == w->data && e->n == v->n)) e = e->next;
  bool again = e && sl->shared == e && sl->seen == e->epoch; /* this slot took the last conversion up already */
  if (sl->shared && sl->shared != e) detach_locked(ctx, sl);
  if (!e) {
    e = xcalloc(1, sizeof *e);
    *e = (SharedCopy){.next = ctx->shared, .src = w->data, .n = v->n, .data = alloc_elems(v->n, 4)};
    ctx->shared = e;
  }
  if (sl->shared != e) e->users++, sl->shared = e;
  *convert = e->epoch == 0 || e->version != version || again;
  if (*convert) e->epoch++, e->version = version;
  sl->seen = e->epoch;
  if (*convert && now) { /* at prepare: no other program of the context reads it before it is whole */
    h2f(e->data, w->data, v->n);
    *convert = false;
  }
  pthread_mutex_unlock(&ctx->shared_mu);
  v->p = e->data;
  return e->data;
}

/* One piece of the fp16 -> fp32 conversions of a reload. */
typedef struct H2fPiece {
  float *dst;
  const void *src;
  int64_t n;
} H2fPiece;

static void h2f_piece(void *ctx, size_t i) {
  const H2fPiece *p = (const H2fPiece *)ctx + i;
  h2f(p->dst, p->src, p->n);
}

/* Pieces of at most this many elements, so both threads get a share of one
 * large table (a 50,257-word embedding is 39M of GPT-2's 124M). */
#define H2F_PIECE (1 << 20)

/* Binding reads only the settings (scalar, string and list arguments) from
 * consts' values; the jobs hold the values and read their pointers when they
 * run. So a reload binds again only if a weight, or a constexpr computed
 * from weights, is a setting. */
static bool weights_reach_a_setting(const CpuProgram *c) {
  if (!c->setting) return true;
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->setting[s] && c->slots[s].kind == SK_CONST && c->slots[s].weight >= 0) return true;
  for (uint32_t si = 0; si < c->f->nstmts; si++)
    if (!c->ops[si] && c->mil[si] && find_cx(c->mil[si]->id) && c->setting[c->base[si]]) return true;
  return false;
}

/* An fp16 weight the plan keeps as fp32 (for sgemm) is converted again,
 * unless another program of the context converted the same data already
 * (shared_fp32_copy); the conversions, most of a training step's weight
 * take-up in ane numerics, run in pieces on two threads. The rest is
 * re-pointed or copied in place. */
bool cpu_reload_weights(CpuProgram *c, Diag *d) {
  bool ok = true;
  H2fPiece *pieces = NULL;
  size_t npieces = 0, cap = 0;
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (c->slots[s].kind != SK_CONST || c->slots[s].weight < 0) continue;
    const OrionWeight *w = orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight);
    Val *v = &c->vals[s];
    size_t es = w->dtype == MIL_DT_FP16 ? 2 : w->dtype == MIL_DT_INT8 || w->dtype == MIL_DT_UINT8 ? 1 : 4;
    if (w->size != (uint64_t)v->n * es || (v->st == ST_H16 && w->dtype != MIL_DT_FP16)) {
      diag_error(d, c->f->stmts[w->stmt].loc, "weight '%s' changed its size or type; reloading needs a new plan",
                 w->name);
      ok = false;
      continue;
    }
    if (v->st != ST_F32 || w->dtype != MIL_DT_FP16) {
      const_from_weight(c, s, w);
      continue;
    }
    bool convert;
    float *dst = shared_fp32_copy(c, s, w, false, &convert);
    for (int64_t at = 0; convert && at < v->n; at += H2F_PIECE) {
      if (npieces == cap) {
        cap = cap ? 2 * cap : 64;
        pieces = xrealloc(pieces, cap * sizeof *pieces);
      }
      int64_t n = v->n - at < H2F_PIECE ? v->n - at : H2F_PIECE;
      pieces[npieces++] = (H2fPiece){dst + at, (const unsigned char *)w->data + 2 * at, n};
    }
  }
  parallel_for_two(npieces, h2f_piece, pieces);
  free(pieces);
  return ok && eval_constexprs(c, d) && (!weights_reach_a_setting(c) || bind_all(c, d));
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
