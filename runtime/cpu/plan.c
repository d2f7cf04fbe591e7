/*
 * The buffer planner: which fp16 weights and inputs stay in place, and the one arena
 * every intermediate value gets a slice of, laid out from the lifetimes.
 */
#include "cpu_internal.h"

#include <stdlib.h>

uint32_t root_of(const CpuProgram *c, uint32_t s) {
  while (c->slots[s].kind == SK_VIEW) s = c->slots[s].src;
  return s;
}

typedef struct Block {
  int64_t off, size;
  uint32_t slot;
} Block;

/* Lays out the planned buffers (docs/cpu-backend.md, "The plan"); returns the arena size. */
size_t plan_buffers(CpuProgram *c) {
  const MilFunc *f = c->f;
  uint32_t nt = f->nstmts + 1, never = UINT32_MAX;
  for (uint32_t s = 0; s < c->nslots; s++) c->slots[s].last = 0, c->slots[s].off = -1;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    for (uint32_t k = 0; k < f->stmts[si].nresults; k++) c->slots[c->base[si] + k].last = si + 1;
    if (c->fz[si].kind == FZ_ELIDED) continue; /* reads nothing */
    uint32_t a0 = c->argbase[si], a1 = c->argbase[si + 1];
    for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
      uint32_t r = root_of(c, c->opslot[i]);
      if (c->slots[r].last < si + 1) c->slots[r].last = si + 1;
    }
    if (c->fz[si].kind == FZ_LINEAR) { /* and what the elided statements read */
      uint32_t r = root_of(c, c->fz[si].xs);
      if (c->slots[r].last < si + 1) c->slots[r].last = si + 1;
    }
    if (c->fz[si].kind == FZ_XENT_GRAD || c->fz[si].kind == FZ_XENT_PICK) {
      uint32_t read[3] = {c->fz[si].xs, c->fz[si].bs, c->fz[si].ss};
      for (uint32_t k = 0; k < 3; k++) {
        uint32_t r = read[k] == UINT32_MAX ? UINT32_MAX : root_of(c, read[k]);
        if (r != UINT32_MAX && c->slots[r].last < si + 1) c->slots[r].last = si + 1;
      }
    }
    if (c->fz[si].kind == FZ_ATTENTION) { /* q, k, v and the mask, read where the elided statements read them */
      uint32_t read[4] = {c->fz[si].asrc[0], c->fz[si].asrc[1], c->fz[si].asrc[2], c->fz[si].amask};
      for (uint32_t k = 0; k < 4; k++) {
        uint32_t r = read[k] == UINT32_MAX ? UINT32_MAX : root_of(c, read[k]);
        if (r != UINT32_MAX && c->slots[r].last < si + 1) c->slots[r].last = si + 1;
      }
    }
    if (c->fz[si].kind == FZ_GROUP || c->fz[si].kind == FZ_MEMBER) {
      /* A group runs its members tile by tile: what any of them reads or
       * writes stays alive (unshared) until the group's last statement. */
      uint32_t end = c->fz[si].end;
      for (uint32_t k = 0; k < f->stmts[si].nresults; k++)
        if (c->slots[c->base[si] + k].last < end) c->slots[c->base[si] + k].last = end;
      for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
        uint32_t r = root_of(c, c->opslot[i]);
        if (c->slots[r].last < end) c->slots[r].last = end;
      }
    }
  }
  for (uint32_t i = 0; i < c->nout; i++) c->slots[root_of(c, c->out_slot[i])].last = never;
  Block *live = xcalloc(c->nslots + 1, sizeof *live);
  uint32_t nlive = 0;
  int64_t end = 0;
  for (uint32_t t = 0; t < nt; t++) {
    uint32_t s0 = t == 0 ? 0 : c->base[t - 1], s1 = t == 0 ? f->nparams : c->base[t - 1] + f->stmts[t - 1].nresults;
    uint8_t fk = t == 0 ? FZ_NONE : c->fz[t - 1].kind;
    if (fk == FZ_ELIDED || (t > 0 && c->fz[t - 1].epi)) s1 = s0; /* never computed, or by a fused linear */
    if (fk == FZ_LINEAR) s0 = c->fz[t - 1].ys, s1 = s0 + 1; /* computes the later transpose's result instead */
    /* A fused linear's epilogue writes its group's results while the linear runs. */
    uint32_t e0 = fk == FZ_LINEAR && c->fz[t - 1].gfirst ? c->fz[t - 1].gfirst : 0;
    uint32_t e1 = e0 ? c->fz[e0].end : 0, extra = 0;
    for (uint32_t k = e0; k < e1; k++) extra += f->stmts[k].nresults;
    for (uint32_t q = 0, k = e0, kr = 0; q < (s1 - s0) + extra; q++) {
      uint32_t s = s0 + q;
      if (q >= s1 - s0) { /* the epilogue's results, statement by statement */
        while (kr >= f->stmts[k].nresults) k++, kr = 0;
        s = c->base[k] + kr++;
      }
      const Val *v = &c->vals[s];
      bool needs = (c->slots[s].kind == SK_RESULT && c->slots[s].tile < 0) ||
                   (c->slots[s].kind == SK_PARAM && v->st != ST_H16 && (v->dt == MIL_DT_FP16 || v->dt == MIL_DT_BOOL));
      if (!needs) continue;
      int64_t size = ((v->n > 0 ? v->n : 1) * (v->st == ST_H16 ? 2 : 4) + 63) / 64 * 64, cand = 0;
      uint32_t at = 0;
      for (; at < nlive; at++) {
        if (cand + size <= live[at].off) break;
        if (live[at].off + live[at].size > cand) cand = live[at].off + live[at].size;
      }
      memmove(&live[at + 1], &live[at], (nlive - at) * sizeof *live);
      live[at] = (Block){cand, size, s};
      nlive++;
      c->slots[s].off = cand;
      if (cand + size > end) end = cand + size;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nlive; i++)
      if (c->slots[live[i].slot].last > t) live[k++] = live[i];
    nlive = k;
  }
  free(live);
  return (size_t)end;
}

/* Which casts are views: an unfused cast to fp32 of an fp16 or fp32 result
 * held as fp32 (not in a group's tile) has its operand's elements, value for
 * value (fp16 values are floats as they are held; the cast copied them), so
 * it reads them in place: a training backward's fp16 gradients cast to its
 * fp32 outputs, a forward's fp16 logits cast for its loss. After fusion
 * (the fused cross entropy gradient takes its cast in) and before the
 * outputs' roots are found (such a gradient then writes the caller's
 * buffer). */
void plan_cast_views(CpuProgram *c) {
  const MilFunc *f = c->f;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const OpEntry *e = c->ops[si];
    if (!e || e->op != MIL_OP_CAST || c->fz[si].kind != FZ_NONE || f->stmts[si].nresults != 1) continue;
    const MilArg *xa = stmt_arg(c, si, MIL_ARG_CAST_x);
    if (!xa || xa->is_list || xa->nitems != 1 || xa->items[0].kind != MIL_OPERAND_NAME) continue;
    uint32_t src = arg_slot(c, si, MIL_ARG_CAST_x), out = c->base[si];
    if (src == UINT32_MAX) continue;
    const Val *a = &c->vals[src], *o = &c->vals[out];
    uint32_t r = root_of(c, src);
    if (o->dt != MIL_DT_FP32 || (a->dt != MIL_DT_FP16 && a->dt != MIL_DT_FP32) || a->st != ST_F32 ||
        c->vals[r].st != ST_F32 || c->slots[r].kind != SK_RESULT || c->slots[src].tile >= 0 || a->n != o->n)
      continue;
    c->ops[si] = &view_entry;
    c->slots[out].kind = SK_VIEW;
    c->slots[out].src = src;
  }
}

/* Whether matmul si streams const `slot` itself (not a view of it: the
 * matmul binds with the const's storage) against an operand that is no
 * const: of two weights at most one could be read in place, and sgemm on
 * both converted is the faster product then. */
static bool streams_weight(const CpuProgram *c, uint32_t si, uint32_t slot) {
  uint32_t xs = arg_slot(c, si, MIL_ARG_MATMUL_x), ys = arg_slot(c, si, MIL_ARG_MATMUL_y);
  uint32_t other = slot == xs ? ys : xs;
  return c->slots[slot].kind == SK_CONST && other != UINT32_MAX && c->slots[root_of(c, other)].kind != SK_CONST &&
         matmul_reads_fp16(c, si, slot);
}

/* Which consts can stay fp16 in place: fp16 BLOBFILE weights whose every
 * use, through views, is the weight operand of linear or conv (which
 * convert as they go), the table of a gather (which converts the rows it
 * takes), the streamed operand of a matmul with few rows on the other
 * side (gemv_axpy reads it as fp16: GPT-2's Conv1D x·W in decode, which
 * converted read twice the bytes per token), or a matmul's y on the packed
 * GEMM (matmul_packs_fp16). Small ones are converted (no gain). */
void choose_fp16_weights(CpuProgram *c) {
  const MilFunc *f = c->f;
  uint8_t *use = xcalloc(c->nslots + 1, 1); /* bit 1: as a weight, bit 2: otherwise, bit 4: a matmul's, in place */
  for (uint32_t i = 0; i < c->nout; i++) use[c->out_slot[i]] |= 2;
  for (uint32_t si = f->nstmts; si-- > 0;) {
    const MilStmt *s = &f->stmts[si];
    if (!c->ops[si]) continue;
    bool wop = c->ops[si]->family == OF_LINEAR || c->ops[si]->family == OF_CONV;
    const MilArg *weight = wop ? stmt_arg(c, si, SHARED_weight) : NULL;
    /* gather reads its table's rows as fp16 too: a tied embedding (GPT-2's wte, also the classifier) stays fp16. */
    if (c->ops[si]->op == MIL_OP_GATHER) weight = stmt_arg(c, si, MIL_ARG_GATHER_x);
    /* and a matmul's y on the packed GEMM (a backward's dx = dy W): no fp32 copy to convert on each update */
    if (c->ops[si]->op == MIL_OP_MATMUL && matmul_packs_fp16(c, si, arg_slot(c, si, MIL_ARG_MATMUL_y)))
      weight = stmt_arg(c, si, MIL_ARG_MATMUL_y);
    for (uint32_t k = 0; k < s->nargs; k++)
      for (uint32_t j = 0; j < s->args[k].nitems; j++) {
        uint32_t slot = c->opslot[c->argstart[c->argbase[si] + k] + j];
        if (c->ops[si]->family == OF_VIEW) use[slot] |= use[c->base[si]];
        else if (c->ops[si]->family == OF_MATMUL && streams_weight(c, si, slot))
          use[slot] |= 4;
        else use[slot] |= &s->args[k] == weight ? 1 : 2;
      }
  }
  for (uint32_t s = 0; s < c->nslots; s++) {
    const Slot *sl = &c->slots[s];
    Val *v = &c->vals[s];
    if (sl->kind != SK_CONST || sl->weight < 0 || !use[s] || (use[s] & 2) || v->dt != MIL_DT_FP16 || v->n < 4096 ||
        v->rank < 2)
      continue;
    if (orion_weight(c->prog, c->fn, (uint32_t)sl->weight)->dtype != MIL_DT_FP16) continue;
    v->st = ST_H16;
    if (!(use[s] & 1)) continue; /* a matmul streams it without scratch */
    int64_t row = v->dims[0] ? v->n / v->dims[0] : 0;
    if (panel_ld(row) * PANEL > c->scratch_floats) c->scratch_floats = panel_ld(row) * PANEL;
  }
  free(use);
}

/* Whether statement si, one of input s's readers, reads it as fp16 in
 * place: a matmul that streams it, or the elided cast that a fused cross
 * entropy gradient takes in (xent_cast[si]: the kernel converts each row as
 * it goes). */
static bool reads_input_in_place(const CpuProgram *c, uint32_t si, uint32_t s, const bool *xent_cast) {
  if (xent_cast[si]) return arg_slot(c, si, MIL_ARG_CAST_x) == s;
  return c->ops[si]->family == OF_MATMUL && matmul_reads_fp16(c, si, s);
}

/* Which fp16 inputs are read in place (ST_H16, the caller's buffer) rather
 * than converted into the arena on every run: those whose every use is an
 * operand of a matmul that streams it as fp16 (matmul_reads_fp16: decode's
 * q k^T and p v against a KV cache) or the logits of a fused cross entropy
 * gradient (a training backward's saved fp16 logits), so a run converts no
 * cache and no logits. */
void choose_fp16_inputs(CpuProgram *c) {
  const MilFunc *f = c->f;
  bool *ok = xcalloc(c->nslots + 1, sizeof *ok);
  bool *xent_cast = xcalloc(f->nstmts + 1, sizeof *xent_cast);
  for (uint32_t si = 0; si < f->nstmts; si++)
    if (c->fz[si].kind == FZ_XENT_GRAD && c->fz[si].xcast < f->nstmts) xent_cast[c->fz[si].xcast] = true;
  for (uint32_t s = 0; s < f->nparams; s++)
    ok[s] = c->slots[s].kind == SK_PARAM && c->vals[s].dt == MIL_DT_FP16 && c->vals[s].st == ST_F32;
  for (uint32_t i = 0; i < c->nout; i++) ok[c->out_slot[i]] = false;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    if (!c->ops[si]) continue; /* an elided statement counts: a fused linear reads what it read */
    uint32_t a0 = c->argbase[si], a1 = c->argbase[si + 1];
    for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
      uint32_t s = c->opslot[i];
      if (s < f->nparams && ok[s] && !reads_input_in_place(c, si, s, xent_cast)) ok[s] = false;
    }
  }
  /* One at a time: a matmul reads at most one operand in place (the other must be float). */
  for (uint32_t s = 0; s < f->nparams; s++) {
    if (!ok[s]) continue;
    bool still = true;
    for (uint32_t si = 0; still && si < f->nstmts; si++) {
      if (!c->ops[si]) continue;
      uint32_t a0 = c->argbase[si], a1 = c->argbase[si + 1];
      for (uint32_t i = c->argstart[a0]; still && i < c->argstart[a1]; i++)
        if (c->opslot[i] == s) still = reads_input_in_place(c, si, s, xent_cast);
    }
    if (still) c->vals[s].st = ST_H16;
  }
  free(xent_cast);
  free(ok);
}

/* Whether every reader of result `slot`, through views, is a matmul that
 * streams it as its x on the tiles with fp16 storage (matmul_streams_fp16_x). */
static bool only_tiles_read(const CpuProgram *c, uint32_t slot, int depth) {
  const MilFunc *f = c->f;
  bool any = false;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    if (!c->ops[si]) continue;
    uint32_t a0 = c->argbase[si], a1 = c->argbase[si + 1];
    for (uint32_t i = c->argstart[a0]; i < c->argstart[a1]; i++) {
      if (c->opslot[i] != slot) continue;
      any = true;
      uint32_t r = c->base[si];
      if (c->ops[si]->family == OF_VIEW && c->slots[r].kind == SK_VIEW && c->slots[r].src == slot) {
        if (depth > 4 || f->stmts[si].nresults != 1 || !only_tiles_read(c, r, depth + 1)) return false;
      } else if (c->ops[si]->op != MIL_OP_MATMUL || !matmul_streams_fp16_x(c, si, slot)) {
        return false;
      }
    }
  }
  return any;
}

/* Which results are stored as fp16 bits (ST_H16) in the arena: a fused
 * cross entropy gradient rounded to fp16 (ane numerics' dlogits, [1024,
 * 32000] for the llama) whose only readers are the tied classifier's two
 * products on the streamed tiles, which pack fp16 as they pack floats (the
 * same values, so the same bits): half its bytes written and read twice.
 * After choose_fp16_inputs (the outputs' roots are known) and before
 * binding (views take their source's storage, the kernels their paths). */
void choose_fp16_results(CpuProgram *c) {
  const MilFunc *f = c->f;
  for (uint32_t si = 0; si < f->nstmts; si++) {
    const Fused *z = &c->fz[si];
    if (z->kind != FZ_XENT_GRAD || !z->round_out || f->stmts[si].nresults != 1) continue;
    uint32_t o = c->base[si];
    Val *v = &c->vals[o];
    bool out = false;
    for (uint32_t i = 0; i < c->nout; i++) out |= c->out_root[i] == o;
    if (out || c->slots[o].kind != SK_RESULT || c->slots[o].tile >= 0 || v->st != ST_F32 || v->dt != MIL_DT_FP16 ||
        !only_tiles_read(c, o, 0))
      continue;
    v->st = ST_H16;
    int64_t C = v->rank ? v->dims[v->rank - 1] : 0;
    if (3 * C > c->scratch_floats) c->scratch_floats = 3 * C; /* the row as floats after its exps */
  }
}
