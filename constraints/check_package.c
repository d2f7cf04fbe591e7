/*
 * Checkers of the rules that can be decided from a written package: the
 * manifest's bindings and surface sizes, and the MIL text and weight file as
 * the device would receive them. Manifest findings name Manifest.plist;
 * MIL findings point at the line and column in the MIL text.
 */
#include <stdio.h>
#include <string.h>

#include "lint_internal.h"

static const PkgFunction *func(LintCtx *c, uint32_t fn) { return &c->pkg->functions[fn]; }

/* The source text of a span of the function's MIL text. */
static const char *span_text(LintCtx *c, SrcSpan at, char *buf, size_t size) {
  const SourceFile *sf = srcset_get(c->report->sources, at.file);
  uint32_t end = at.end > sf->len ? (uint32_t)sf->len : at.end;
  int n = end > at.start ? (int)(end - at.start) : 0;
  snprintf(buf, size, "%.*s", n, sf->text + at.start);
  return buf;
}

/* The first result's name, for findings about a statement. */
static const char *result_name(const MilStmt *st) { return st->nresults ? st->results[0].name : "?"; }

/* ANE002 / ANE018: one allocation size for all outputs (inputs). */
static void uniform(LintCtx *c, uint32_t fn, bool outputs) {
  const PkgFunction *f = func(c, fn);
  const PkgTensor *t = outputs ? f->outputs : f->inputs;
  uint32_t n = outputs ? f->noutputs : f->ninputs;
  for (uint32_t i = 1; i < n; i++)
    if (t[i].surface_bytes != t[0].surface_bytes) {
      lint_emit(c, LINT_RULE_LEVEL, (SrcSpan){0}, c->manifest_path, f->name,
                "%s of '%s' have surfaces of different sizes: '%s' has %llu bytes, '%s' has %llu",
                outputs ? "outputs" : "inputs", f->name, t[0].name, (unsigned long long)t[0].surface_bytes, t[i].name,
                (unsigned long long)t[i].surface_bytes);
      return; /* one finding says it */
    }
}

void check_pkg_uniform_outputs(LintCtx *c, uint32_t fn) { uniform(c, fn, true); }
void check_pkg_uniform_inputs(LintCtx *c, uint32_t fn) { uniform(c, fn, false); }

/* ANE003 / ANE019: the device binds surfaces in ASCII order of MIL names;
 * the manifest's Binding must be that position. */
static void order(LintCtx *c, uint32_t fn, bool outputs) {
  const PkgFunction *f = func(c, fn);
  const PkgTensor *t = outputs ? f->outputs : f->inputs;
  uint32_t n = outputs ? f->noutputs : f->ninputs;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t rank = 0;
    for (uint32_t j = 0; j < n; j++) rank += strcmp(t[j].mil_name, t[i].mil_name) < 0;
    if (t[i].binding != rank)
      lint_emit(c, LINT_RULE_LEVEL, (SrcSpan){0}, c->manifest_path, f->name,
                "%s '%s' of '%s' (MIL name '%s') has binding %u, but the ANE binds it at %u (ASCII order of MIL "
                "names)",
                outputs ? "output" : "input", t[i].name, f->name, t[i].mil_name, t[i].binding, rank);
  }
}

void check_pkg_output_order(LintCtx *c, uint32_t fn) { order(c, fn, true); }
void check_pkg_input_order(LintCtx *c, uint32_t fn) { order(c, fn, false); }

/* ANE004: against the table's minimum for the package's target (not the
 * manifest's own MinimumSurfaceBytes, which an older compiler wrote). */
void check_pkg_min_surface(LintCtx *c, uint32_t fn) {
  const PkgFunction *f = func(c, fn);
  uint64_t min = c->target->min_surface_bytes;
  for (int io = 0; io < 2; io++) {
    const PkgTensor *t = io ? f->outputs : f->inputs;
    uint32_t n = io ? f->noutputs : f->ninputs;
    for (uint32_t i = 0; i < n; i++)
      if (t[i].surface_bytes < min)
        lint_emit(c, LINT_RULE_LEVEL, (SrcSpan){0}, c->manifest_path, f->name,
                  "%s '%s' of '%s' has a %llu-byte surface, below the %llu-byte minimum of %s", io ? "output" : "input",
                  t[i].name, f->name, (unsigned long long)t[i].surface_bytes, (unsigned long long)min,
                  c->target->chip ? c->target->chip : mil_target_name(c->target->target));
  }
}

#define MODEL_PATH "@model_path/"

/* A package-relative path that stays inside the package. */
static bool inside(const char *rel) {
  if (!rel[0] || rel[0] == '/') return false;
  for (const char *p = rel; p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return false;
    p = p[n] ? p + n + 1 : NULL;
  }
  return true;
}

/* The blob dtype of a MIL dtype (0 for those no blob holds). */
static uint32_t blob_code(MilDType t) {
  switch (t) {
  case MIL_DT_FP16: return BLOB_FP16;
  case MIL_DT_FP32: return BLOB_FP32;
  case MIL_DT_UINT8: return BLOB_UINT8;
  case MIL_DT_INT8: return BLOB_INT8;
  case MIL_DT_BF16: return BLOB_BF16;
  case MIL_DT_INT16: return BLOB_INT16;
  case MIL_DT_UINT16: return BLOB_UINT16;
  case MIL_DT_INT32: return BLOB_INT32;
  case MIL_DT_UINT32: return BLOB_UINT32;
  default: return 0;
  }
}

/* Weight files whose problem was reported (each once). */
typedef struct BadFiles {
  const char *names[8];
  uint32_t n;
} BadFiles;

/* ANE008 for one BLOBFILE literal: it must name a record of the weight
 * file, of the tensor's dtype and size. */
static void check_blob(LintCtx *c, uint32_t fn, const MilLiteral *l, BadFiles *bad) {
  const char *fname = func(c, fn)->name;
  SrcSpan at = l->blob_offset_loc;
  char err[256];
  const char *rel = l->blob_path + strlen(MODEL_PATH);
  if (strncmp(l->blob_path, MODEL_PATH, strlen(MODEL_PATH)) || !inside(rel)) {
    lint_emit(c, LINT_RULE_LEVEL, l->blob_loc, NULL, fname,
              "BLOBFILE path '%s' is not a file inside the package (@model_path/...)", l->blob_path);
    return;
  }
  for (uint32_t k = 0; k < bad->n; k++)
    if (!strcmp(bad->names[k], rel)) return;
  size_t len;
  const char *rerr;
  const uint8_t *data = lint_weight_file(c, rel, &len, &rerr);
  BlobFile bf;
  if (!data || !blob_file_open(&bf, data, len, err, sizeof err)) {
    if (!data) lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "cannot read the weight file '%s': %s", rel, rerr);
    else lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "weight file '%s': %s", rel, err);
    if (bad->n < sizeof bad->names / sizeof *bad->names) bad->names[bad->n++] = rel;
    return;
  }
  /* The size the tensor needs, when its type says it. */
  uint32_t code = l->type.kind == MIL_TYPE_TENSOR ? blob_code(l->type.dtype) : 0;
  uint64_t elements = mil_type_elements(&l->type), nbytes = 0;
  bool typed = code && elements != UINT64_MAX && !__builtin_mul_overflow(elements, (uint64_t)blob_dtype_size(code), &nbytes);
  BlobInfo info;
  if (!blob_file_read(&bf, l->blob_offset, &info, err, sizeof err))
    lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE offset %llu does not point at a blob record of '%s': %s",
              (unsigned long long)l->blob_offset, rel, err);
  else if (typed && !blob_file_read_expect(&bf, l->blob_offset, code, nbytes, &info, err, sizeof err))
    lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE offset %llu points at a blob that does not fit the "
              "tensor: %s", (unsigned long long)l->blob_offset, err);
}

static void check_blob_attrs(LintCtx *c, uint32_t fn, const MilAttr *attrs, uint32_t n, BadFiles *bad) {
  for (uint32_t i = 0; i < n; i++)
    if (attrs[i].value->payload == MIL_PAYLOAD_BLOB) check_blob(c, fn, attrs[i].value, bad);
}

/* ANE008: every BLOBFILE of the text (const values, attributes, literal
 * arguments), in source order. Problems with a whole file are reported once. */
void check_pkg_blobfile(LintCtx *c, uint32_t fn) {
  const MilProgram *p = c->mil[fn];
  BadFiles bad = {.n = 0};
  check_blob_attrs(c, fn, p->attrs, p->nattrs, &bad);
  for (uint32_t fi = 0; fi < p->nfuncs; fi++) {
    const MilFunc *f = &p->funcs[fi];
    check_blob_attrs(c, fn, f->attrs, f->nattrs, &bad);
    for (uint32_t si = 0; si < f->nstmts; si++) {
      const MilStmt *st = &f->stmts[si];
      for (uint32_t a = 0; a < st->nargs; a++)
        for (uint32_t k = 0; k < st->args[a].nitems; k++) {
          const MilOperand *o = &st->args[a].items[k];
          if (o->kind == MIL_OPERAND_LITERAL && o->literal->payload == MIL_PAYLOAD_BLOB)
            check_blob(c, fn, o->literal, &bad);
        }
      check_blob_attrs(c, fn, st->attrs, st->nattrs, &bad);
    }
  }
}

/* ANE012: the ops of the rule (matmul) must bind transpose_x/transpose_y to
 * names, not literals. */
void check_pkg_transpose_consts(LintCtx *c, uint32_t fn) {
  const MilProgram *p = c->mil[fn];
  for (uint32_t fi = 0; fi < p->nfuncs; fi++)
    for (uint32_t si = 0; si < p->funcs[fi].nstmts; si++) {
      const MilStmt *st = &p->funcs[fi].stmts[si];
      bool concerned = false;
      for (uint32_t k = 0; k < c->rule->nops && !concerned; k++) concerned = !strcmp(st->op, ir_op_info(c->rule->ops[k])->name);
      if (!concerned) continue;
      for (uint32_t a = 0; a < st->nargs; a++) {
        const MilArg *arg = &st->args[a];
        bool is_name = !arg->is_list && arg->nitems == 1 && arg->items[0].kind == MIL_OPERAND_NAME;
        if ((strcmp(arg->name, "transpose_x") && strcmp(arg->name, "transpose_y")) || is_name || !arg->nitems) continue;
        SrcSpan value = {arg->items[0].loc.file, arg->items[0].loc.start, arg->items[arg->nitems - 1].loc.end};
        char text[128];
        lint_emit(c, LINT_RULE_LEVEL, value, NULL, func(c, fn)->name,
                  "%s of %s '%s' is the literal '%s'; the ANE's MIL parser needs a named bool const", arg->name, st->op,
                  result_name(st), span_text(c, value, text, sizeof text));
      }
    }
}

/* ANE014: every returned name is a parameter or a statement's result (the
 * tolerant reader marks one defined nowhere). */
void check_pkg_returns(LintCtx *c, uint32_t fn) {
  const MilProgram *p = c->mil[fn];
  for (uint32_t fi = 0; fi < p->nfuncs; fi++) {
    const MilFunc *f = &p->funcs[fi];
    for (uint32_t i = 0; i < f->nreturns; i++)
      if (f->returns[i].def_stmt == MIL_DEF_UNDEFINED)
        lint_emit(c, LINT_RULE_LEVEL, f->returns[i].loc, NULL, func(c, fn)->name,
                  "returned name '%s' is not defined by a statement or an input of '%s'", f->returns[i].name, f->name);
  }
}

/* The MIL op type of an op the table names (MIL spells attention out). */
static const char *mil_op_type(IrOpKind k) { return k == OP_SDPA ? "scaled_dot_product_attention" : ir_op_info(k)->name; }

/* Statements whose op the rule names (and, if `arg` is set, that bind it):
 * MIL from other tools, or edited by hand, can hold what orionc legalizes away. */
static void forbid_mil_ops(LintCtx *c, uint32_t fn, const char *arg, const char *why) {
  const MilProgram *p = c->mil[fn];
  for (uint32_t fi = 0; fi < p->nfuncs; fi++)
    for (uint32_t si = 0; si < p->funcs[fi].nstmts; si++) {
      const MilStmt *st = &p->funcs[fi].stmts[si];
      bool concerned = false;
      for (uint32_t k = 0; k < c->rule->nops && !concerned; k++) concerned = !strcmp(st->op, mil_op_type(c->rule->ops[k]));
      if (!concerned || (arg && !mil_find_arg(st, arg))) continue;
      lint_emit(c, LINT_RULE_LEVEL, st->op_loc, NULL, func(c, fn)->name, "%s '%s' %s", st->op, result_name(st), why);
    }
}

/* ANE001 */
void check_pkg_concat(LintCtx *c, uint32_t fn) { forbid_mil_ops(c, fn, NULL, "is rejected by the ANE compiler"); }

/* ANE006: MIL's attention takes its mask as attn_mask. */
void check_pkg_sdpa_mask(LintCtx *c, uint32_t fn) {
  forbid_mil_ops(c, fn, "attn_mask", "has an attn_mask, which the ANE's fused attention ignores (it runs unmasked)");
}

/* ANE010 */
void check_pkg_gelu(LintCtx *c, uint32_t fn) { forbid_mil_ops(c, fn, NULL, "is not an ANE op"); }

/* ANE013 */
void check_pkg_conv_bias(LintCtx *c, uint32_t fn) { forbid_mil_ops(c, fn, "bias", "has a bias argument, which the ANE path rejects"); }
