/*
 * io-legalize: decides how each function's inputs and outputs meet the ANE
 * and records it as the function's binding table (IrFunc.bindings, printed as
 * "// io" comments), which the MIL emitter and the package manifest use as
 * they find it:
 *
 *  - the MIL name of every input and output (the emitter's naming rule,
 *    mil_name_claim, applied here first, so the emitter only claims the
 *    names of everything else after them);
 *  - the binding index of each: the device binds surfaces in ASCII order of
 *    their MIL names, not in declared order (constraints ANE003, ANE019), and
 *    a MIL name can sort differently from the .oir name ('a.b' before 'a_a',
 *    but as MIL 'a_b' after it);
 *  - each tensor's bytes and the one surface size of the function: surfaces
 *    must all have the same size (ANE002, ANE018) and at least the target's
 *    minimum (ANE004), so small tensors are padded up to it.
 *
 * It also checks: inputs or outputs whose MIL names differ only in case are
 * an error, since reports disagree on whether the order is case-sensitive;
 * a binding order other than the declared one is a note.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "orion/passes.h"
#include "pass_util.h"

/* ---- the MIL naming rule ---- */

/* Reserved words of Apple's MIL parser (coremltools' NameSanitizer). */
static const char *const reserved[] = {"any",   "bool",  "program", "func",   "tensor", "list",   "dict",
                                       "tuple", "true",  "false",   "string", "bf16",   "fp16",   "fp32",
                                       "fp64",  "int8",  "int16",   "int32",  "int64",  "uint8",  "uint16",
                                       "uint32", "uint64", "state", "BLOBFILE", NULL};

const char *mil_name_claim(IrModule *m, StrMap *used, const char *want) {
  StrBuf sb;
  sb_init(&sb);
  for (const char *p = want; *p; p++) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
    sb_putc(&sb, ok ? c : '_');
  }
  if (!sb.len || (sb.data[0] >= '0' && sb.data[0] <= '9')) {
    StrBuf p;
    sb_init(&p);
    sb_printf(&p, "v_%s", sb.data ? sb.data : "");
    sb_free(&sb);
    sb = p;
  }
  for (const char *const *r = reserved; *r; r++)
    if (!strcmp(sb.data, *r)) {
      sb_puts(&sb, "_");
      break;
    }
  const char *name = arena_strdup(&m->arena, sb.data);
  for (uint32_t n = 1; strmap_get(used, name); n++) name = arena_printf(&m->arena, "%s_%u", sb.data, n);
  strmap_put(used, name, 1);
  sb_free(&sb);
  return name;
}

/* ---- the binding table ---- */

static uint64_t value_bytes(IrModule *m, IrValueId v) {
  const IrType *t = &ir_value(m, v)->type;
  return ir_type_elements(t) * ir_dtype_size(t->dtype);
}

typedef struct NameIndex {
  const char *name;
  uint32_t index;
} NameIndex;

static int name_index_cmp(const void *a, const void *b) {
  return strcmp(((const NameIndex *)a)->name, ((const NameIndex *)b)->name);
}

/* Binding indices: position in ASCII order of the MIL names. */
static void assign_bindings(IrBinding *b, uint32_t n) {
  NameIndex *order = xmalloc(sizeof *order * (n ? n : 1));
  for (uint32_t i = 0; i < n; i++) order[i] = (NameIndex){b[i].mil_name, i};
  qsort(order, n, sizeof *order, name_index_cmp);
  for (uint32_t i = 0; i < n; i++) b[order[i].index].binding = i;
  free(order);
}

const IrBindingTable *io_bindings_compute(IrModule *m, IrFuncId f, uint64_t min_surface_bytes) {
  IrFunc *fn = ir_func(m, f);
  IrBindingTable *t = arena_alloc(&m->arena, sizeof *t);
  uint32_t nin = fn->ninputs, nout = fn->noutputs;
  *t = (IrBindingTable){.ninputs = nin, .noutputs = nout, .min_surface_bytes = min_surface_bytes};
  t->inputs = arena_alloc(&m->arena, sizeof *t->inputs * (nin ? nin : 1));
  t->outputs = arena_alloc(&m->arena, sizeof *t->outputs * (nout ? nout : 1));
  /* Inputs, then outputs, keep the names they were written with where MIL
   * allows: they are what callers bind. The emitter names everything else
   * after these, in the same table. */
  StrMap used;
  strmap_init(&used);
  uint64_t largest = min_surface_bytes;
  for (uint32_t i = 0; i < nin; i++) {
    IrValueId v = fn->inputs[i];
    const char *name = ir_value(m, v)->name;
    t->inputs[i] = (IrBinding){name, mil_name_claim(m, &used, name), 0, value_bytes(m, v)};
    largest = t->inputs[i].bytes > largest ? t->inputs[i].bytes : largest;
  }
  for (uint32_t i = 0; i < nout; i++) {
    const IrOutput *o = &fn->outputs[i];
    t->outputs[i] = (IrBinding){o->name, mil_name_claim(m, &used, o->name), 0, value_bytes(m, o->value)};
    largest = t->outputs[i].bytes > largest ? t->outputs[i].bytes : largest;
  }
  strmap_free(&used);
  assign_bindings(t->inputs, nin);
  assign_bindings(t->outputs, nout);
  t->surface_bytes = (largest + 63) & ~(uint64_t)63;
  fn->bindings = t;
  return t;
}

bool io_bindings_current(IrModule *m, IrFuncId f) {
  const IrFunc *fn = ir_func(m, f);
  const IrBindingTable *t = fn->bindings;
  if (!t || t->ninputs != fn->ninputs || t->noutputs != fn->noutputs) return false;
  for (uint32_t i = 0; i < fn->ninputs; i++)
    if (strcmp(t->inputs[i].name, ir_value(m, fn->inputs[i])->name) || t->inputs[i].bytes != value_bytes(m, fn->inputs[i]))
      return false;
  for (uint32_t i = 0; i < fn->noutputs; i++)
    if (strcmp(t->outputs[i].name, fn->outputs[i].name) || t->outputs[i].bytes != value_bytes(m, fn->outputs[i].value))
      return false;
  return true;
}

static bool same_table(const IrBindingTable *a, const IrBindingTable *b) {
  if (a->ninputs != b->ninputs || a->noutputs != b->noutputs || a->surface_bytes != b->surface_bytes ||
      a->min_surface_bytes != b->min_surface_bytes)
    return false;
  for (int io = 0; io < 2; io++) {
    const IrBinding *x = io ? a->outputs : a->inputs, *y = io ? b->outputs : b->inputs;
    for (uint32_t i = 0; i < (io ? a->noutputs : a->ninputs); i++)
      if (strcmp(x[i].name, y[i].name) || strcmp(x[i].mil_name, y[i].mil_name) || x[i].binding != y[i].binding ||
          x[i].bytes != y[i].bytes)
        return false;
  }
  return true;
}

/* ---- checks ---- */

/* Case-folded ASCII order of MIL names, then declared order. */
static int folded_cmp(const void *a, const void *b) {
  const NameIndex *x = a, *y = b;
  for (const char *p = x->name, *q = y->name;; p++, q++) {
    int c = tolower((unsigned char)*p) - tolower((unsigned char)*q);
    if (c) return c;
    if (!*p) break;
  }
  return x->index < y->index ? -1 : x->index > y->index;
}

static bool same_ignoring_case(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

static void check(IrModule *m, IrFuncId f, PassCtx *ctx, bool outputs) {
  IrFunc *fn = ir_func(m, f);
  const IrBinding *b = outputs ? fn->bindings->outputs : fn->bindings->inputs;
  uint32_t n = outputs ? fn->noutputs : fn->ninputs;
  bool declared_order = true;
  for (uint32_t i = 0; i < n; i++) declared_order &= b[i].binding == i;
  /* Names equal but for case are neighbours once sorted ignoring case
   * (sorting keeps this linear-logarithmic for functions with huge interfaces). */
  NameIndex *folded = xmalloc(sizeof *folded * (n ? n : 1));
  for (uint32_t i = 0; i < n; i++) folded[i] = (NameIndex){b[i].mil_name, i};
  qsort(folded, n, sizeof *folded, folded_cmp);
  for (uint32_t k = 0; k + 1 < n; k++)
    if (same_ignoring_case(folded[k].name, folded[k + 1].name))
      diag_error(ctx->d, fn->loc, "%s '%s' and '%s' of '%s' differ only in case; the ANE's binding order for them is not known",
                 outputs ? "outputs" : "inputs", b[folded[k].index].name, b[folded[k + 1].index].name, fn->name);
  free(folded);
  if (!declared_order)
    diag_remark(ctx->d, fn->loc, "the %s of '%s' bind in alphabetical order on the ANE, not in declared order; the package manifest records the order [%s]",
                outputs ? "outputs" : "inputs", fn->name, outputs ? "ANE003" : "ANE019");
}

bool pass_io_legalize(IrModule *m, PassCtx *ctx) {
  uint32_t before = ctx->d->nerrors;
  uint64_t min_surface = ctx->opt && ctx->opt->target_min_surface_bytes ? ctx->opt->target_min_surface_bytes
                                                                        : IO_DEFAULT_MIN_SURFACE_BYTES;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    const IrBindingTable *old = ir_func(m, f)->bindings;
    const IrBindingTable *now = io_bindings_compute(m, f, min_surface);
    if (!old || !same_table(old, now)) ctx->changed = true;
    check(m, f, ctx, false);
    check(m, f, ctx, true);
  }
  return ctx->d->nerrors == before;
}
