/*
 * Preparing a function: slots for every value, consts converted or mapped,
 * the plan made (plan.c, fusion.c) and the pool started; freeing it.
 */
#include "cpu_internal.h"

#include <stdlib.h>

static bool check_type(Diag *d, const MilType *t, SrcSpan loc, const char *what, const char *name, bool allow_string) {
  /* allow_string: a const's result, which may also be a small integer type */
  if (t->kind != MIL_TYPE_TENSOR ||
      !(dtype_held(t->dtype) || (allow_string && (t->dtype == MIL_DT_STRING || dtype_const_ok(t->dtype))))) {
    StrBuf sb;
    sb_init(&sb);
    mil_type_print(t, &sb);
    diag_error(d, loc, "%s '%s' has type %s, which the CPU backend does not support", what, name, sb.data);
    sb_free(&sb);
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) {
      diag_error(d, loc, "%s '%s' has an unknown dimension; programs with flexible shapes are not supported", what,
                 name);
      return false;
    }
  return true;
}

static void const_release(CpuProgram *c, uint32_t slot) {
  shared_detach(c, slot);
  if (c->slots[slot].owned) free(c->vals[slot].p);
  c->slots[slot].owned = false;
  c->vals[slot].p = NULL;
}

/* An owned buffer of the const's n elements of `es` bytes, kept if it has one. */
void *const_owned(CpuProgram *c, uint32_t slot, size_t es) {
  Val *v = &c->vals[slot];
  if (!c->slots[slot].owned) {
    shared_detach(c, slot); /* a value of its own from now on */
    v->p = alloc_elems(v->n, es);
    c->slots[slot].owned = true;
  }
  return v->p;
}

/* (Re)reads BLOBFILE const `slot` from its verified weight: in place when the
 * stored form matches the slot's storage and alignment, else converted into
 * an owned buffer. */
void const_from_weight(CpuProgram *c, uint32_t slot, const OrionWeight *w) {
  Val *v = &c->vals[slot];
  uintptr_t at = (uintptr_t)w->data;
  bool direct = (v->st == ST_H16 && w->dtype == MIL_DT_FP16 && at % 2 == 0) ||
                (v->st == ST_F32 && w->dtype == MIL_DT_FP32 && at % 4 == 0) ||
                (v->st == ST_I32 && v->dt == MIL_DT_INT32 && w->dtype == MIL_DT_INT32 && at % 4 == 0);
  if (direct) {
    const_release(c, slot);
    v->p = (void *)at; /* never written through: consts are operands only */
    return;
  }
  if (v->st == ST_H16) {
    memcpy(const_owned(c, slot, 2), w->data, (size_t)v->n * 2);
    return;
  }
  const unsigned char *p = w->data;
  if (v->st == ST_F32 && w->dtype == MIL_DT_FP16) { /* one copy for every program of the context reading w */
    bool convert;
    shared_fp32_copy(c, slot, w, true, &convert);
    return;
  }
  const_owned(c, slot, 4);
  for (int64_t i = 0; i < v->n; i++) {
    double e;
    switch (w->dtype) {
    case MIL_DT_FP16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      e = (double)fp16_to_float(h);
      break;
    }
    case MIL_DT_FP32: {
      float f;
      memcpy(&f, p + 4 * i, 4);
      e = (double)f;
      break;
    }
    case MIL_DT_INT32: {
      int32_t k;
      memcpy(&k, p + 4 * i, 4);
      e = k;
      break;
    }
    case MIL_DT_INT8: e = (int8_t)p[i]; break;
    default: e = p[i]; break; /* uint8 */
    }
    st(v, i, e);
  }
}

/* Converts const statement si into its slot (BLOBFILE weights later, once
 * their storage is decided). */
static bool prepare_const(CpuProgram *c, uint32_t si, Diag *d) {
  const MilStmt *s = &c->f->stmts[si];
  const MilAttr *val = mil_find_attr(s->attrs, s->nattrs, "val");
  uint32_t slot = c->base[si];
  c->slots[slot].kind = SK_CONST;
  if (!val || s->nresults != 1) {
    diag_error(d, s->loc, "const without a val");
    return false;
  }
  if (val->value->payload == MIL_PAYLOAD_BLOB) {
    for (uint32_t i = 0; i < orion_weight_count(c->prog, c->fn); i++) {
      const OrionWeight *w = orion_weight(c->prog, c->fn, i);
      if (w->stmt == si && !strcmp(w->attr, "val")) {
        c->slots[slot].weight = (int32_t)i;
        return true;
      }
    }
    diag_error(d, s->loc, "const '%s': its BLOBFILE was not loaded", s->results[0].name);
    return false;
  }
  const char *why;
  Val *v = &c->vals[slot];
  if (!literal_val(val->value, v, &why)) {
    diag_error(d, s->loc, "const '%s' %s", s->results[0].name, why);
    return false;
  }
  c->slots[slot].owned = v->st != ST_STR;
  if (v->st == ST_STR) c->slots[slot].kind = SK_STR;
  return true;
}

bool cpu_supports(const OrionProgram *p, uint32_t fn, Diag *d) {
  const MilFunc *f = orion_function_mil(p, fn);
  bool ok = true;
  if (orion_function_has_dynamic_shapes(p, fn)) {
    diag_error(d, f->loc, "function '%s' has flexible shapes; programs with flexible shapes are not supported",
               f->name);
    ok = false;
  }
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    const MilOpInfo *op = mil_op_find(s->op);
    if (op && (op->id == MIL_OP_CONST || find_cx(op->id) || cpu_op(op->id))) continue;
    diag_error(d, s->op_loc, "op '%s' is not supported by the CPU backend", s->op);
    ok = false;
  }
  return ok;
}

CpuProgram *cpu_prepare(OrionProgram *p, uint32_t fn, CpuNumerics mode, Diag *d) {
  CpuOptions o = {.numerics = mode, .threads = 0};
  return cpu_prepare_with(p, fn, &o, d);
}

/* A private context, owned by the program: as many threads as it asks for. */
CpuProgram *cpu_prepare_with(OrionProgram *p, uint32_t fn, const CpuOptions *opt, Diag *d) {
  CpuContext *ctx = cpu_context_open(&(CpuContextOptions){.threads = opt->threads}, d);
  if (!ctx) return NULL;
  CpuProgram *c = cpu_prepare_in(ctx, p, fn, opt, d);
  if (!c) {
    cpu_context_close(ctx);
    return NULL;
  }
  c->owns_ctx = true;
  return c;
}

CpuProgram *cpu_prepare_in(CpuContext *ctx, OrionProgram *p, uint32_t fn, const CpuOptions *opt, Diag *d) {
  CpuProgram *c = xcalloc(1, sizeof *c);
  c->ctx = ctx;
  c->prog = p;
  c->fn = fn;
  c->f = orion_function_mil(p, fn);
  c->mode = opt->numerics;
  c->check_finite = opt->check_finite;
  c->unfused = opt->unfused;
  const MilFunc *f = c->f;
  bool ok = true;
  if (orion_function_has_dynamic_shapes(p, fn)) {
    diag_error(d, f->loc, "function '%s' has flexible shapes; programs with flexible shapes are not supported",
               f->name);
    ok = false;
  }
  /* Slots: parameters, statement results, then one per literal operand. */
  uint32_t nargs = 0, nitems = 0, nlits = 0;
  c->base = xcalloc(f->nstmts + 1, sizeof *c->base);
  c->ops = xcalloc(f->nstmts + 1, sizeof *c->ops);
  c->argbase = xcalloc(f->nstmts + 1, sizeof *c->argbase);
  c->nslots = f->nparams;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    c->base[i] = c->nslots;
    c->nslots += s->nresults;
    c->argbase[i] = nargs;
    nargs += s->nargs;
    for (uint32_t k = 0; k < s->nargs; k++) {
      nitems += s->args[k].nitems;
      for (uint32_t j = 0; j < s->args[k].nitems; j++) nlits += s->args[k].items[j].kind == MIL_OPERAND_LITERAL;
    }
  }
  c->argbase[f->nstmts] = nargs;
  arg_map(c);
  c->argstart = xcalloc(nargs + 1, sizeof *c->argstart);
  c->opslot = xcalloc(nitems + 1, sizeof *c->opslot);
  uint32_t lit = c->nslots;
  c->nslots += nlits;
  c->slots = xcalloc(c->nslots + 1, sizeof *c->slots);
  c->vals = xcalloc(c->nslots + 1, sizeof *c->vals);
  for (uint32_t s = 0; s < c->nslots; s++) c->slots[s].weight = -1, c->slots[s].tile = -1;
  for (uint32_t i = 0; i < f->nparams; i++) {
    c->slots[i].kind = SK_PARAM;
    if (ok && (ok = check_type(d, &f->params[i].type, f->params[i].loc, "input", f->params[i].name, false)))
      val_shape(&c->vals[i], &f->params[i].type);
  }
  uint32_t a = 0, it = 0;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilStmt *s = &f->stmts[i];
    bool is_const = c->mil[i] && c->mil[i]->id == MIL_OP_CONST;
    const OpEntry *e = c->mil[i] ? cpu_op(c->mil[i]->id) : NULL;
    bool types_ok = true;
    for (uint32_t k = 0; types_ok && k < s->nresults; k++) {
      /* quantize, cast and topk's indices may be int8/uint8/int16/uint16 (held as int32, like the small integer
       * consts; each op checks the declared dtype) */
      MilDType rdt = s->results[k].type.dtype;
      bool small_int = e && (e->op == MIL_OP_QUANTIZE || e->op == MIL_OP_CAST || e->op == MIL_OP_TOPK) &&
                       (rdt == MIL_DT_INT8 || rdt == MIL_DT_UINT8 || rdt == MIL_DT_INT16 || rdt == MIL_DT_UINT16);
      types_ok = check_type(d, &s->results[k].type, s->results[k].loc, "value", s->results[k].name, is_const || small_int);
      if (types_ok) val_shape(&c->vals[c->base[i] + k], &s->results[k].type);
      c->slots[c->base[i] + k].kind = SK_RESULT;
    }
    for (uint32_t k = 0; k < s->nargs; k++, a++) {
      c->argstart[a] = it;
      for (uint32_t j = 0; j < s->args[k].nitems; j++, it++) {
        const MilOperand *o = &s->args[k].items[j];
        if (o->kind == MIL_OPERAND_NAME) {
          c->opslot[it] = o->def_stmt == MIL_DEF_PARAM ? o->def_index : c->base[o->def_stmt] + o->def_index;
          continue;
        }
        const char *why;
        c->opslot[it] = lit;
        c->slots[lit].kind = SK_CONST;
        if (!literal_val(o->literal, &c->vals[lit], &why)) {
          diag_error(d, s->op_loc, "%s: a literal operand %s", s->op, why);
          ok = false;
        } else if (c->vals[lit].st == ST_STR) {
          c->slots[lit].kind = SK_STR;
        } else {
          c->slots[lit].owned = true;
        }
        lit++;
      }
    }
    if (is_const) {
      ok = ok && types_ok && prepare_const(c, i, d);
      continue;
    }
    if (c->mil[i] && find_cx(c->mil[i]->id)) {
      c->slots[c->base[i]].kind = SK_CONST; /* evaluated once the consts are read */
      ok = ok && types_ok;
      continue;
    }
    if (!(c->ops[i] = e)) {
      diag_error(d, s->op_loc, "op '%s' is not supported by the CPU backend", s->op);
      ok = false;
      continue;
    }
    ok = ok && types_ok;
    /* reshape and identity of a named value of the same dtype are views. */
    const MilArg *xa = stmt_arg(c, i, SHARED_x);
    if (types_ok && e->family == OF_RESHAPE && s->nresults == 1 && xa &&
        !xa->is_list && xa->nitems == 1 && xa->items[0].kind == MIL_OPERAND_NAME) {
      uint32_t src = c->opslot[c->argstart[a - s->nargs + (uint32_t)(xa - s->args)]];
      if (c->vals[src].dt == s->results[0].type.dtype) {
        c->ops[i] = &view_entry;
        c->slots[c->base[i]].kind = SK_VIEW;
        c->slots[c->base[i]].src = src;
      }
    }
  }
  c->argstart[nargs] = it;
  c->nin = orion_input_count(p, fn);
  c->nout = orion_output_count(p, fn);
  c->in_param = xcalloc(c->nin + 1, sizeof *c->in_param);
  c->out_slot = xcalloc(c->nout + 1, sizeof *c->out_slot);
  c->out_root = xcalloc(c->nout + 1, sizeof *c->out_root);
  c->out_direct = xcalloc(c->nout + 1, sizeof *c->out_direct);
  for (uint32_t i = 0; ok && i < c->nin; i++) {
    const char *name = orion_input(p, fn, i)->mil_name;
    uint32_t k = 0;
    while (k < f->nparams && strcmp(f->params[k].name, name)) k++;
    if (k == f->nparams) {
      diag_error(d, f->loc, "input '%s' is not a parameter of function '%s'", name, f->name);
      ok = false;
    }
    c->in_param[i] = k;
  }
  for (uint32_t i = 0; ok && i < c->nout; i++) {
    const char *name = orion_output(p, fn, i)->mil_name;
    uint32_t k = 0;
    while (k < f->nreturns && strcmp(f->returns[k].name, name)) k++;
    if (k == f->nreturns) {
      diag_error(d, f->loc, "output '%s' is not returned by function '%s'", name, f->name);
      ok = false;
      break;
    }
    const MilOperand *r = &f->returns[k];
    c->out_slot[i] = r->def_stmt == MIL_DEF_PARAM ? r->def_index : c->base[r->def_stmt] + r->def_index;
    if (!dtype_held(c->vals[c->out_slot[i]].dt)) { /* an int8 quantize result, or a const of a small type */
      diag_error(d, f->loc, "output '%s' is %s, which the CPU backend does not return", name,
                 mil_dtype_name(c->vals[c->out_slot[i]].dt));
      ok = false;
      break;
    }
  }
  if (!ok) {
    cpu_free(c);
    return NULL;
  }
  choose_fp16_weights(c);
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->slots[s].kind == SK_CONST && c->slots[s].weight >= 0)
      const_from_weight(c, s, orion_weight(p, fn, (uint32_t)c->slots[s].weight));
  if (!eval_constexprs(c, d)) {
    cpu_free(c);
    return NULL;
  }
  /* sdpa keeps one row of scores per thread, as doubles in the scratch. */
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const MilArg *ka = stmt_arg(c, si, MIL_ARG_SCALED_DOT_PRODUCT_ATTENTION_key);
    if (c->ops[si] && c->ops[si]->family == OF_ATTENTION && ka && ka->nitems == 1) {
      const Val *k = &c->vals[c->opslot[c->argstart[c->argbase[si] + (uint32_t)(ka - f->stmts[si].args)]]];
      int64_t need = k->rank >= 2 ? 2 * k->dims[k->rank - 2] : 0;
      if (need > c->scratch_floats) c->scratch_floats = need;
    }
  }
  plan_fusion(c);
  plan_cast_views(c);
  for (uint32_t i = 0; i < c->nout; i++) {
    uint32_t r = root_of(c, c->out_slot[i]);
    c->out_root[i] = r;
    MilDType dt = c->vals[c->out_slot[i]].dt;
    c->out_direct[i] = c->slots[r].kind == SK_RESULT && (dt == MIL_DT_FP32 || dt == MIL_DT_INT32);
    for (uint32_t k = 0; k < i; k++)
      if (c->out_root[k] == r) c->out_direct[i] = c->out_direct[k] = false;
  }
  choose_fp16_inputs(c); /* before binding: the kernels pick their paths by storage */
  choose_fp16_results(c);
  if (!bind_all(c, d)) {
    cpu_free(c);
    return NULL;
  }
  c->arena_bytes = plan_buffers(c);
  c->arena = try_aligned_alloc(64, c->arena_bytes ? c->arena_bytes : 64);
  if (!c->arena) c->arena = xmalloc(c->arena_bytes ? c->arena_bytes : 64);
  if (opt->profile) {
    c->prof = xcalloc(f->nstmts + 1, sizeof *c->prof);
    c->prof_of = xcalloc(f->nstmts + 1, sizeof *c->prof_of);
    for (uint32_t si = 0; si < f->nstmts; si++) {
      const MilStmt *s = &f->stmts[si];
      c->prof_of[si] = c->ops[si] ? c->nprof : UINT32_MAX;
      if (c->ops[si])
        c->prof[c->nprof++] = (CpuStmtTime){.stmt = si, .op = s->op, .name = s->results[0].name, .loc = s->op_loc};
    }
  }
  /* Per-thread buffers are the program's own: programs of one context run one at a time, but each keeps its
   * sizes. */
  c->nthreads = ctx->pool.n;
  if (c->ntiles) {
    c->tiles = xcalloc(c->nthreads, sizeof *c->tiles);
    for (uint32_t t = 0; t < c->nthreads; t++) c->tiles[t] = xmalloc((size_t)(c->ntiles * c->tile_floats) * sizeof(float));
  }
  /* The packed GEMM (bound above): the activations packed once per product, and each piece's own packing. */
  if (c->gemm_pack_floats) {
    c->gemm_pack = xmalloc((size_t)c->gemm_pack_floats * sizeof(float));
    if (c->scratch_floats < GEMM_PIECE_FLOATS) c->scratch_floats = GEMM_PIECE_FLOATS;
    if (gemm_amx_on() && c->scratch_floats < AMX_PIECE_FLOATS) c->scratch_floats = AMX_PIECE_FLOATS;
    if (c->amxmm && c->scratch_floats < AMXMM_PIECE_FLOATS) c->scratch_floats = AMXMM_PIECE_FLOATS;
  }
  c->scratch = xcalloc(c->nthreads, sizeof *c->scratch);
  for (uint32_t t = 0; c->scratch_floats && t < c->nthreads; t++)
    c->scratch[t] = xmalloc((size_t)c->scratch_floats * sizeof(float));
  return c;
}

uint32_t cpu_threads(const CpuProgram *c) { return c->nthreads; }
uint32_t cpu_profile_count(const CpuProgram *c) { return c->nprof; }
const CpuStmtTime *cpu_profile_stmt(const CpuProgram *c, uint32_t i) { return i < c->nprof ? &c->prof[i] : NULL; }

void cpu_profile_reset(CpuProgram *c) {
  for (uint32_t i = 0; i < c->nprof; i++) c->prof[i].runs = 0, c->prof[i].ms = 0;
}
size_t cpu_planned_bytes(const CpuProgram *c) { return c->arena_bytes; }

void cpu_free(CpuProgram *c) {
  if (!c) return;
  for (uint32_t i = 0; c->slots && i < c->nslots; i++) {
    shared_detach(c, i);
    if (c->slots[i].owned) free(c->vals[i].p);
  }
  if (c->scratch)
    for (uint32_t t = 0; t < c->nthreads; t++) free(c->scratch[t]);
  free(c->scratch);
  free(c->gemm_pack);
  if (c->tiles)
    for (uint32_t t = 0; t < c->nthreads; t++) free(c->tiles[t]);
  free(c->tiles);
  free(c->arena);
  free(c->vals);
  free(c->slots);
  free(c->base);
  free(c->ops);
  free(c->argbase);
  free(c->mil);
  free(c->argposbase);
  free(c->argpos);
  free(c->argstart);
  free(c->opslot);
  free(c->in_param);
  free(c->out_slot);
  free(c->out_root);
  free(c->out_direct);
  free(c->prof);
  free(c->prof_of);
  bound_free(c);
  free(c->bound);
  free(c->setting);
  free(c->fz);
  if (c->owns_ctx) cpu_context_close(c->ctx);
  free(c);
}
