/*
 * The partition of a function for the ane backend (ane_partition.h).
 */
#include "ane_partition.h"
#include "ane_partition_cost.h"

#include <stdlib.h>
#include <string.h>

static bool is_const(const MilStmt *s) { return !strcmp(s->op, "const"); }

static bool surface_dtype(const MilType *t) {
  return t && t->kind == MIL_TYPE_TENSOR && (t->dtype == MIL_DT_FP16 || t->dtype == MIL_DT_FP32);
}

const MilType *ane_value_type(const MilFunc *f, const AneValue *v) {
  if (v->def_stmt == MIL_DEF_PARAM) return &f->params[v->def_index].type;
  if (v->def_stmt >= f->nstmts) return NULL;
  return &f->stmts[v->def_stmt].results[v->def_index].type;
}

/* A value computed at run time (a parameter or a non-const result), not a literal or a const. */
static bool runtime_value(const MilFunc *f, const MilOperand *o) {
  if (o->kind != MIL_OPERAND_NAME) return false;
  if (o->def_stmt == MIL_DEF_PARAM) return true;
  return o->def_stmt < f->nstmts && !is_const(&f->stmts[o->def_stmt]);
}

bool ane_partition_stmt_on_cpu(const MilFunc *f, uint32_t s) {
  const MilStmt *st = &f->stmts[s];
  if (is_const(st)) return false;
  for (uint32_t r = 0; r < st->nresults; r++)
    if (!surface_dtype(&st->results[r].type)) return true;
  for (uint32_t a = 0; a < st->nargs; a++)
    for (uint32_t i = 0; i < st->args[a].nitems; i++) {
      const MilOperand *o = &st->args[a].items[i];
      if (!runtime_value(f, o)) continue;
      AneValue v = {o->name, o->def_stmt, o->def_index};
      if (!surface_dtype(ane_value_type(f, &v))) return true;
    }
  return false;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const AneValue *)a)->name, ((const AneValue *)b)->name);
}

static bool has_value(const AneValue *v, uint32_t n, const MilOperand *o) {
  for (uint32_t i = 0; i < n; i++)
    if (v[i].def_stmt == o->def_stmt && v[i].def_index == o->def_index) return true;
  return false;
}

static bool has_index(const uint32_t *v, uint32_t n, uint32_t x) {
  for (uint32_t i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* Whether result (s, r) is read by a statement outside segment seg or returned. */
static bool used_outside(const MilFunc *f, const uint32_t *seg_of, uint32_t seg, uint32_t s, uint32_t r) {
  for (uint32_t i = 0; i < f->nreturns; i++)
    if (f->returns[i].def_stmt == s && f->returns[i].def_index == r) return true;
  for (uint32_t t = s + 1; t < f->nstmts; t++) {
    if (seg_of[t] == seg || seg_of[t] == UINT32_MAX) continue;
    const MilStmt *st = &f->stmts[t];
    for (uint32_t a = 0; a < st->nargs; a++)
      for (uint32_t i = 0; i < st->args[a].nitems; i++) {
        const MilOperand *o = &st->args[a].items[i];
        if (o->kind == MIL_OPERAND_NAME && o->def_stmt == s && o->def_index == r) return true;
      }
  }
  return false;
}

/* The inputs, consts and outputs of segment seg. */
static void fill_segment(AneSegment *g, const MilFunc *f, const uint32_t *seg_of, uint32_t seg) {
  g->inputs = calloc(1, sizeof *g->inputs);
  g->consts = calloc(1, sizeof *g->consts);
  g->outputs = calloc(1, sizeof *g->outputs);
  uint32_t cap_in = 1, cap_c = 1, cap_out = 1;
  for (uint32_t k = 0; k < g->nstmts; k++) {
    const MilStmt *st = &f->stmts[g->stmts[k]];
    for (uint32_t a = 0; a < st->nargs; a++)
      for (uint32_t i = 0; i < st->args[a].nitems; i++) {
        const MilOperand *o = &st->args[a].items[i];
        if (o->kind != MIL_OPERAND_NAME) continue;
        if (o->def_stmt < f->nstmts && is_const(&f->stmts[o->def_stmt])) {
          if (has_index(g->consts, g->nconsts, o->def_stmt)) continue;
          if (g->nconsts == cap_c) g->consts = realloc(g->consts, (cap_c *= 2) * sizeof *g->consts);
          g->consts[g->nconsts++] = o->def_stmt;
        } else if (o->def_stmt == MIL_DEF_PARAM || (o->def_stmt < f->nstmts && seg_of[o->def_stmt] != seg)) {
          if (has_value(g->inputs, g->ninputs, o)) continue;
          if (g->ninputs == cap_in) g->inputs = realloc(g->inputs, (cap_in *= 2) * sizeof *g->inputs);
          g->inputs[g->ninputs++] = (AneValue){o->name, o->def_stmt, o->def_index};
        }
      }
    for (uint32_t r = 0; r < st->nresults; r++)
      if (used_outside(f, seg_of, seg, g->stmts[k], r)) {
        if (g->noutputs == cap_out) g->outputs = realloc(g->outputs, (cap_out *= 2) * sizeof *g->outputs);
        g->outputs[g->noutputs++] = (AneValue){st->results[r].name, g->stmts[k], r};
      }
  }
  /* consts in statement order, as they were written */
  for (uint32_t i = 1; i < g->nconsts; i++)
    for (uint32_t j = i; j > 0 && g->consts[j - 1] > g->consts[j]; j--) {
      uint32_t t = g->consts[j];
      g->consts[j] = g->consts[j - 1];
      g->consts[j - 1] = t;
    }
  qsort(g->inputs, g->ninputs, sizeof *g->inputs, by_name);
  qsort(g->outputs, g->noutputs, sizeof *g->outputs, by_name);
}

static void free_segment(AneSegment *g) {
  free(g->stmts);
  free(g->consts);
  free(g->inputs);
  free(g->outputs);
}

/* Whether every run-time value statement s reads is made already. */
static bool ready(const MilFunc *f, const bool *done, uint32_t s) {
  const MilStmt *st = &f->stmts[s];
  for (uint32_t a = 0; a < st->nargs; a++)
    for (uint32_t i = 0; i < st->args[a].nitems; i++) {
      const MilOperand *o = &st->args[a].items[i];
      if (runtime_value(f, o) && o->def_stmt != MIL_DEF_PARAM && !done[o->def_stmt]) return false;
    }
  return true;
}

/* The next statement to place: the first ready one of the current segment's
 * placement, else the first ready one (which starts a segment). */
static uint32_t next_stmt(const MilFunc *f, const bool *done, const bool *cpu, bool have, bool on_cpu) {
  uint32_t first = UINT32_MAX;
  for (uint32_t s = 0; s < f->nstmts; s++) {
    if (done[s] || !ready(f, done, s)) continue;
    if (have && cpu[s] == on_cpu) return s;
    if (first == UINT32_MAX) first = s;
  }
  return first;
}

void ane_partition_plan(AnePartition *part, const MilFunc *f) { ane_partition_plan_placed(part, f, NULL, NULL); }

/* One list schedule, with the statements marked in moved on the CPU too. */
static void plan_once(AnePartition *part, const MilFunc *f, const bool *moved) {
  *part = (AnePartition){0};
  uint32_t *seg_of = malloc((f->nstmts + 1) * sizeof *seg_of);
  bool *done = calloc(f->nstmts + 1, sizeof *done), *cpu = calloc(f->nstmts + 1, sizeof *cpu);
  part->segs = calloc(f->nstmts + 1, sizeof *part->segs);
  uint32_t nsegs = 0, left = 0;
  for (uint32_t s = 0; s < f->nstmts; s++) {
    seg_of[s] = UINT32_MAX;
    done[s] = is_const(&f->stmts[s]);
    cpu[s] = ane_partition_stmt_on_cpu(f, s) || (moved[s] && !done[s]);
    part->cpu_stmts += cpu[s];
    left += !done[s];
  }
  /* A list schedule, not statement order: a statement joins the current
   * segment whenever its inputs are made, so that independent statements of
   * one placement (the loss's target arithmetic, a reshape between two CPU
   * statements) do not cut the other placement's run. */
  for (; left; left--) {
    bool have = nsegs > 0;
    uint32_t s = next_stmt(f, done, cpu, have, have && !part->segs[nsegs - 1].on_device);
    if (s == UINT32_MAX) break; /* a cycle: the reader's SSA check rules it out */
    if (!have || part->segs[nsegs - 1].on_device == cpu[s]) {
      part->segs[nsegs].on_device = !cpu[s];
      part->segs[nsegs].stmts = malloc((f->nstmts + 1) * sizeof(uint32_t));
      nsegs++;
    }
    AneSegment *g = &part->segs[nsegs - 1];
    g->stmts[g->nstmts++] = s;
    seg_of[s] = nsegs - 1;
    done[s] = true;
  }
  free(done);
  free(cpu);
  for (uint32_t i = 0; i < nsegs; i++) fill_segment(&part->segs[i], f, seg_of, i);
  /* A segment that hands nothing on is dead code: nothing reads it. */
  for (uint32_t i = 0; i < nsegs; i++) {
    if (part->segs[i].noutputs) {
      part->segs[part->nsegs++] = part->segs[i];
      continue;
    }
    for (uint32_t k = 0; k < part->segs[i].nstmts; k++)
      part->cpu_stmts -= !part->segs[i].on_device;
    free_segment(&part->segs[i]);
  }
  free(seg_of);
}

void ane_partition_plan_placed(AnePartition *part, const MilFunc *f, const uint32_t *placed,
                               const AneCostModel *cost) {
  bool *moved = calloc(f->nstmts + 1, sizeof *moved);
  for (uint32_t s = 0; placed && s < f->nstmts; s++) moved[s] = placed[s] != 0;
  plan_once(part, f, moved);
  /* Each round moves at least one statement, so it ends. */
  for (bool again = cost != NULL; again;) {
    again = false;
    for (uint32_t i = 1; i + 1 < part->nsegs; i++) {
      const AneSegment *g = &part->segs[i];
      if (!g->on_device || part->segs[i - 1].on_device || part->segs[i + 1].on_device || ane_segment_pays(f, g, cost))
        continue;
      for (uint32_t k = 0; k < g->nstmts; k++) moved[g->stmts[k]] = true;
      again = true;
    }
    if (again) {
      ane_partition_free(part);
      plan_once(part, f, moved);
    }
  }
  free(moved);
}

void ane_partition_free(AnePartition *part) {
  for (uint32_t i = 0; i < part->nsegs; i++) free_segment(&part->segs[i]);
  free(part->segs);
  *part = (AnePartition){0};
}

static void put_stmt(StrBuf *out, const char *text, const MilStmt *st) {
  sb_puts(out, "        ");
  sb_putn(out, text + st->loc.start, st->loc.end - st->loc.start);
  /* the statement's span may stop before its ';' */
  if (st->loc.end == st->loc.start || text[st->loc.end - 1] != ';') sb_putc(out, ';');
  sb_putc(out, '\n');
}

void ane_partition_mil(const AnePartition *part, uint32_t seg, const MilProgram *prog, const MilFunc *f,
                       const char *text, StrBuf *out) {
  const AneSegment *g = &part->segs[seg];
  sb_printf(out, "program(%s)\n{\n    func main<%s>(", prog->version, f->opset_written);
  for (uint32_t i = 0; i < g->ninputs; i++) {
    if (i) sb_puts(out, ", ");
    mil_type_print(ane_value_type(f, &g->inputs[i]), out);
    sb_printf(out, " %s", g->inputs[i].name);
  }
  sb_puts(out, ") {\n");
  for (uint32_t i = 0; i < g->nconsts; i++) put_stmt(out, text, &f->stmts[g->consts[i]]);
  for (uint32_t i = 0; i < g->nstmts; i++) put_stmt(out, text, &f->stmts[g->stmts[i]]);
  sb_puts(out, "    } -> (");
  for (uint32_t i = 0; i < g->noutputs; i++) sb_printf(out, "%s%s", i ? ", " : "", g->outputs[i].name);
  sb_puts(out, ");\n}\n");
}
