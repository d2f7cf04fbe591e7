/*
 * The pass manager: pipelines, fixed points, verification between passes,
 * dumps and timing.
 *
 * A pipeline is text: pass names separated by commas, with groups in
 * parentheses that repeat until none of their passes changes the IR (passes
 * that enable each other). Named pipelines are just such texts.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orion/passes.h"

static const struct {
  const char *name;
  const char *spec;
} pipelines[] = {
    /* Legalization only: what the ANE needs to accept the program. */
    {"O0", "inline,lora,decompose-attention,lower-cross-entropy,lower-rms-norm,lower-layer-norm,lower-neg,lower-silu,gelu-tanh,split-concat,split-conv-bias,"
           "dce,io-legalize,fp16-range-guard,sram-annotate"},
    /* The default: legalization plus clean-ups and ANE-friendly lowerings. */
    {"O1", "inline,lora,(dce,identity-elim,cast-fusion,const-fold,fold-layout),decompose-attention,lower-cross-entropy,"
           "lower-rms-norm,lower-layer-norm,lower-neg,lower-silu,gelu-tanh,split-concat,lower-linear,split-conv-bias,"
           "(dce,identity-elim,cast-fusion,const-fold,fold-layout),io-legalize,fp16-range-guard,sram-annotate"},
};

const char *passes_pipeline(const char *name) {
  for (size_t i = 0; i < sizeof pipelines / sizeof *pipelines; i++)
    if (!strcmp(pipelines[i].name, name)) return pipelines[i].spec;
  return NULL;
}

/* Most passes one pipeline may list, and rounds a fixed point may take. */
#define MAX_PIPELINE_STEPS 128
#define MAX_FIXED_POINT_ROUNDS 16

typedef struct Step {
  const PassInfo *pass;
  int group; /* 0: alone; >0: members of one fixed-point group share the number */
} Step;

static bool parse_spec(const char *spec, Step *steps, uint32_t *n, Diag *d) {
  *n = 0;
  int group = 0, next_group = 1;
  const char *p = spec;
  while (*p) {
    if (*p == ',' || *p == ' ') {
      p++;
      continue;
    }
    if (*p == '(') {
      if (group) {
        diag_error(d, (SrcSpan){0}, "pipeline '%s': groups cannot nest", spec);
        return false;
      }
      group = next_group++;
      p++;
      continue;
    }
    if (*p == ')') {
      if (!group) {
        diag_error(d, (SrcSpan){0}, "pipeline '%s': ')' without '('", spec);
        return false;
      }
      group = 0;
      p++;
      continue;
    }
    size_t len = strcspn(p, ",() ");
    char name[80];
    snprintf(name, sizeof name, "%.*s", (int)(len < 79 ? len : 79), p);
    const PassInfo *pi = pass_lookup(name);
    if (!pi) {
      diag_error(d, (SrcSpan){0}, "unknown pass '%s' (orionc --list-passes shows them)", name);
      return false;
    }
    if (*n >= MAX_PIPELINE_STEPS) {
      diag_error(d, (SrcSpan){0}, "pipeline '%s' is too long (limit is %d passes)", spec, MAX_PIPELINE_STEPS);
      return false;
    }
    steps[(*n)++] = (Step){pi, group};
    p += len;
  }
  if (group) {
    diag_error(d, (SrcSpan){0}, "pipeline '%s': '(' without ')'", spec);
    return false;
  }
  return true;
}

static const char *spec_of(const PassManagerOptions *o, Diag *d) {
  if (o->passes) return o->passes;
  const char *name = o->pipeline ? o->pipeline : "O1";
  const char *spec = passes_pipeline(name);
  if (!spec) diag_error(d, (SrcSpan){0}, "unknown pipeline '%s' (expected O0 or O1)", name);
  return spec;
}

bool passes_check_spec(const PassManagerOptions *o, Diag *d) {
  const char *spec = spec_of(o, d);
  Step steps[MAX_PIPELINE_STEPS];
  uint32_t n;
  if (!spec || !parse_spec(spec, steps, &n, d)) return false;
  if (o->print_after && strcmp(o->print_after, "all") && !pass_lookup(o->print_after)) {
    diag_error(d, (SrcSpan){0}, "unknown pass '%s' in --print-after", o->print_after);
    return false;
  }
  return true;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct Timing {
  const PassInfo *pass;
  double ms;
  uint32_t runs;
} Timing;

static bool has_calls(IrModule *m) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    IR_FOR_EACH_OP(m, f, op) if (ir_op(m, op)->kind == OP_CALL) return true;
  }
  return false;
}

/* What a pass requires must hold when it starts. Types always do (the IR
 * is verified before the pipeline and after every change that invalidates
 * them); "inlined" is a property of the IR, checked here. */
static bool requirements_hold(IrModule *m, const PassInfo *pi, Diag *d) {
  if ((pi->requires & ANALYSIS_INLINED) && has_calls(m)) {
    diag_error(d, (SrcSpan){0}, "pass '%s' requires calls to be inlined; run 'inline' before it", pi->name);
    return false;
  }
  return true;
}

static bool run_one(IrModule *m, const PassManagerOptions *o, const PassInfo *pi, Diag *d, bool *changed,
                    Timing *timing, uint32_t *ntiming) {
  if (!requirements_hold(m, pi, d)) return false;
  PassCtx ctx = {.d = d, .opt = &o->pass_options};
  double t0 = now_ms();
  bool ok = pi->run(m, &ctx);
  double ms = now_ms() - t0;
  uint32_t k = 0;
  while (k < *ntiming && timing[k].pass != pi) k++;
  if (k == *ntiming) timing[(*ntiming)++] = (Timing){pi, 0, 0};
  timing[k].ms += ms;
  timing[k].runs++;
  if (!ok) return false;
  *changed |= ctx.changed;
  /* A binding table that no longer describes the interface must not reach
   * the emitter; it is computed again by the next io-legalize (or by the
   * emitter, the same way). */
  if (ctx.changed && (pi->invalidates & ANALYSIS_BINDINGS))
    for (IrFuncId f = 1; f < m->nfuncs; f++) m->funcs[f].bindings = NULL;
  /* New ops need their types before the next pass can rely on them. */
  if (ctx.changed && (o->verify_each || (pi->invalidates & ANALYSIS_TYPES))) {
    uint32_t before = d->nerrors;
    if (!ir_verify(m, d)) {
      if (d->nerrors == before) diag_error(d, (SrcSpan){0}, "the IR is invalid after pass '%s'", pi->name);
      else diag_note(d, (SrcSpan){0}, "the IR became invalid in pass '%s'", pi->name);
      return false;
    }
  }
  FILE *out = o->dump ? o->dump : stderr;
  if (o->print_after && (!strcmp(o->print_after, "all") || !strcmp(o->print_after, pi->name))) {
    StrBuf sb;
    sb_init(&sb);
    ir_print_module(m, &sb);
    fprintf(out, "// ---- after %s%s ----\n%s", pi->name, ctx.changed ? "" : " (no change)", sb.data ? sb.data : "");
    sb_free(&sb);
  }
  return true;
}

bool passes_run(IrModule *m, const PassManagerOptions *o, Diag *d) {
  const char *spec = spec_of(o, d);
  Step steps[MAX_PIPELINE_STEPS];
  uint32_t n;
  if (!spec || !parse_spec(spec, steps, &n, d)) return false;
  Timing timing[MAX_PIPELINE_STEPS];
  uint32_t ntiming = 0;
  bool ok = true;
  for (uint32_t i = 0; i < n && ok;) {
    if (!steps[i].group) {
      bool changed = false;
      ok = run_one(m, o, steps[i].pass, d, &changed, timing, &ntiming);
      i++;
      continue;
    }
    uint32_t end = i;
    while (end < n && steps[end].group == steps[i].group) end++;
    bool changed = true;
    for (uint32_t round = 0; changed && ok; round++) {
      if (round == MAX_FIXED_POINT_ROUNDS) {
        diag_warning(d, (SrcSpan){0}, "passes '%s'...'%s' still change the IR after %d rounds; stopping",
                     steps[i].pass->name, steps[end - 1].pass->name, MAX_FIXED_POINT_ROUNDS);
        break;
      }
      changed = false;
      for (uint32_t k = i; k < end && ok; k++) ok = run_one(m, o, steps[k].pass, d, &changed, timing, &ntiming);
    }
    i = end;
  }
  if (o->time_passes) {
    FILE *out = o->dump ? o->dump : stderr;
    for (uint32_t k = 0; k < ntiming; k++)
      fprintf(out, "orionc: pass %-22s %9.3f ms (%u run%s)\n", timing[k].pass->name, timing[k].ms, timing[k].runs,
              timing[k].runs == 1 ? "" : "s");
  }
  return ok && ir_verify(m, d);
}

bool passes_legalize(IrModule *m, Diag *d) {
  PassManagerOptions o = {.pipeline = "O0"};
  return passes_run(m, &o, d);
}
