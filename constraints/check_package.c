/*
 * Checkers of the rules that can be decided from a written package: the
 * manifest's bindings and surface sizes, and the MIL text and weight file as
 * the device would receive them. Manifest findings name Manifest.plist;
 * MIL findings point at the line and column in the MIL text. Part of the
 * compiler-free rules library (orion/ane_rules.h): the linter and the
 * runtime's ANE simulation run these same checkers.
 */
#include <stdio.h>
#include <string.h>

#include "ane_rules_internal.h"
#include "orion/blob.h"

/* The source text of a span of the function's MIL text. */
static const char *span_text(AneRuleCtx *c, SrcSpan at, char *buf, size_t size) {
  const SourceFile *sf = srcset_get(c->in->sources, at.file);
  uint32_t end = at.end > sf->len ? (uint32_t)sf->len : at.end;
  int n = end > at.start ? (int)(end - at.start) : 0;
  snprintf(buf, size, "%.*s", n, sf->text + at.start);
  return buf;
}

/* The first result's name, for findings about a statement. */
static const char *result_name(const MilStmt *st) { return st->nresults ? st->results[0].name : "?"; }

/* ANE002 / ANE018: one allocation size for all outputs (inputs). */
static void uniform(AneRuleCtx *c, bool outputs) {
  const AneRuleFunction *f = c->fn;
  const AneRuleIo *t = outputs ? f->outputs : f->inputs;
  uint32_t n = outputs ? f->noutputs : f->ninputs;
  for (uint32_t i = 1; i < n; i++)
    if (t[i].surface_bytes != t[0].surface_bytes) {
      ane_rule_emit(c, ANE_RULE_LEVEL, (SrcSpan){0}, c->in->manifest_path, NULL,
                "%s of '%s' have surfaces of different sizes: '%s' has %llu bytes, '%s' has %llu",
                outputs ? "outputs" : "inputs", f->name, t[0].name, (unsigned long long)t[0].surface_bytes, t[i].name,
                (unsigned long long)t[i].surface_bytes);
      return; /* one finding says it */
    }
}

void check_pkg_uniform_outputs(AneRuleCtx *c) { uniform(c, true); }
void check_pkg_uniform_inputs(AneRuleCtx *c) { uniform(c, false); }

/* ANE003 / ANE019: the device binds surfaces in ASCII order of MIL names;
 * the manifest's Binding must be that position. */
static void order(AneRuleCtx *c, bool outputs) {
  const AneRuleFunction *f = c->fn;
  const AneRuleIo *t = outputs ? f->outputs : f->inputs;
  uint32_t n = outputs ? f->noutputs : f->ninputs;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t rank = 0;
    for (uint32_t j = 0; j < n; j++) rank += strcmp(t[j].mil_name, t[i].mil_name) < 0;
    if (t[i].binding != rank)
      ane_rule_emit(c, ANE_RULE_LEVEL, (SrcSpan){0}, c->in->manifest_path, NULL,
                "%s '%s' of '%s' (MIL name '%s') has binding %u, but the ANE binds it at %u (ASCII order of MIL "
                "names)",
                outputs ? "output" : "input", t[i].name, f->name, t[i].mil_name, t[i].binding, rank);
  }
}

void check_pkg_output_order(AneRuleCtx *c) { order(c, true); }
void check_pkg_input_order(AneRuleCtx *c) { order(c, false); }

/* ANE004: against the table's minimum for the package's target (not the
 * manifest's own MinimumSurfaceBytes, which an older compiler wrote). */
void check_pkg_min_surface(AneRuleCtx *c) {
  const AneRuleFunction *f = c->fn;
  uint64_t min = c->target->min_surface_bytes;
  for (int io = 0; io < 2; io++) {
    const AneRuleIo *t = io ? f->outputs : f->inputs;
    uint32_t n = io ? f->noutputs : f->ninputs;
    for (uint32_t i = 0; i < n; i++)
      if (t[i].surface_bytes < min)
        ane_rule_emit(c, ANE_RULE_LEVEL, (SrcSpan){0}, c->in->manifest_path, NULL,
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
static void check_blob(AneRuleCtx *c, const MilLiteral *l, BadFiles *bad) {
  SrcSpan at = l->blob_offset_loc;
  char err[256];
  const char *rel = l->blob_path + strlen(MODEL_PATH);
  if (strncmp(l->blob_path, MODEL_PATH, strlen(MODEL_PATH)) || !inside(rel)) {
    ane_rule_emit(c, ANE_RULE_LEVEL, l->blob_loc, NULL, NULL,
              "BLOBFILE path '%s' is not a file inside the package (@model_path/...)", l->blob_path);
    return;
  }
  for (uint32_t k = 0; k < bad->n; k++)
    if (!strcmp(bad->names[k], rel)) return;
  size_t len;
  const char *rerr;
  const uint8_t *data = ane_rule_weight_file(c, rel, &len, &rerr);
  BlobFile bf;
  if (!data || !blob_file_open(&bf, data, len, err, sizeof err)) {
    if (!data) ane_rule_emit(c, ANE_RULE_LEVEL, at, NULL, NULL, "cannot read the weight file '%s': %s", rel, rerr);
    else ane_rule_emit(c, ANE_RULE_LEVEL, at, NULL, NULL, "weight file '%s': %s", rel, err);
    if (bad->n < sizeof bad->names / sizeof *bad->names) bad->names[bad->n++] = rel;
    return;
  }
  /* The size the tensor needs, when its type says it. */
  uint32_t code = l->type.kind == MIL_TYPE_TENSOR ? blob_code(l->type.dtype) : 0;
  uint64_t elements = mil_type_elements(&l->type), nbytes = 0;
  bool typed = code && elements != UINT64_MAX && !__builtin_mul_overflow(elements, (uint64_t)blob_dtype_size(code), &nbytes);
  BlobInfo info;
  if (!blob_file_read(&bf, l->blob_offset, &info, err, sizeof err))
    ane_rule_emit(c, ANE_RULE_LEVEL, at, NULL, NULL, "BLOBFILE offset %llu does not point at a blob record of '%s': %s",
              (unsigned long long)l->blob_offset, rel, err);
  else if (typed && !blob_file_read_expect(&bf, l->blob_offset, code, nbytes, &info, err, sizeof err))
    ane_rule_emit(c, ANE_RULE_LEVEL, at, NULL, NULL, "BLOBFILE offset %llu points at a blob that does not fit the "
              "tensor: %s", (unsigned long long)l->blob_offset, err);
}

static void check_blob_attrs(AneRuleCtx *c, const MilAttr *attrs, uint32_t n, BadFiles *bad) {
  for (uint32_t i = 0; i < n; i++)
    if (attrs[i].value->payload == MIL_PAYLOAD_BLOB) check_blob(c, attrs[i].value, bad);
}

/* ANE008: every BLOBFILE of the text (const values, attributes, literal
 * arguments), in source order. Problems with a whole file are reported once. */
void check_pkg_blobfile(AneRuleCtx *c) {
  const MilProgram *p = c->fn->program;
  BadFiles bad = {.n = 0};
  if (p) check_blob_attrs(c, p->attrs, p->nattrs, &bad);
  for (uint32_t fi = 0; fi < c->fn->nfuncs; fi++) {
    const MilFunc *f = &c->fn->funcs[fi];
    check_blob_attrs(c, f->attrs, f->nattrs, &bad);
    for (uint32_t si = 0; si < f->nstmts; si++) {
      const MilStmt *st = &f->stmts[si];
      for (uint32_t a = 0; a < st->nargs; a++)
        for (uint32_t k = 0; k < st->args[a].nitems; k++) {
          const MilOperand *o = &st->args[a].items[k];
          if (o->kind == MIL_OPERAND_LITERAL && o->literal->payload == MIL_PAYLOAD_BLOB)
            check_blob(c, o->literal, &bad);
        }
      check_blob_attrs(c, st->attrs, st->nattrs, &bad);
    }
  }
}

/* ANE012: the ops of the rule (matmul) must bind transpose_x/transpose_y to
 * names, not literals. */
void check_pkg_transpose_consts(AneRuleCtx *c) {
  for (uint32_t fi = 0; fi < c->fn->nfuncs; fi++)
    for (uint32_t si = 0; si < c->fn->funcs[fi].nstmts; si++) {
      const MilStmt *st = &c->fn->funcs[fi].stmts[si];
      bool concerned = false;
      for (uint32_t k = 0; k < c->rule->nops && !concerned; k++) concerned = !strcmp(st->op, constraint_op_name(c->rule->ops[k]));
      if (!concerned) continue;
      for (uint32_t a = 0; a < st->nargs; a++) {
        const MilArg *arg = &st->args[a];
        bool is_name = !arg->is_list && arg->nitems == 1 && arg->items[0].kind == MIL_OPERAND_NAME;
        if ((strcmp(arg->name, "transpose_x") && strcmp(arg->name, "transpose_y")) || is_name || !arg->nitems) continue;
        SrcSpan value = {arg->items[0].loc.file, arg->items[0].loc.start, arg->items[arg->nitems - 1].loc.end};
        char text[128];
        ane_rule_emit(c, ANE_RULE_LEVEL, value, NULL, NULL,
                  "%s of %s '%s' is the literal '%s'; the ANE's MIL parser needs a named bool const", arg->name, st->op,
                  result_name(st), span_text(c, value, text, sizeof text));
      }
    }
}

/* ANE014: every returned name is a parameter or a statement's result (the
 * tolerant reader marks one defined nowhere). */
void check_pkg_returns(AneRuleCtx *c) {
  for (uint32_t fi = 0; fi < c->fn->nfuncs; fi++) {
    const MilFunc *f = &c->fn->funcs[fi];
    for (uint32_t i = 0; i < f->nreturns; i++)
      if (f->returns[i].def_stmt == MIL_DEF_UNDEFINED)
        ane_rule_emit(c, ANE_RULE_LEVEL, f->returns[i].loc, NULL, NULL,
                  "returned name '%s' is not defined by a statement or an input of '%s'", f->returns[i].name, f->name);
  }
}

/* The MIL op type of an op the table names (MIL spells attention out). */
static const char *mil_op_type(IrOpKind k) { return k == OP_SDPA ? "scaled_dot_product_attention" : constraint_op_name(k); }

/* Statements whose op the rule names (and, if `arg` is set, that bind it):
 * MIL from other tools, or edited by hand, can hold what orionc legalizes away. */
static void forbid_mil_ops(AneRuleCtx *c, const char *arg, const char *why) {
  for (uint32_t fi = 0; fi < c->fn->nfuncs; fi++)
    for (uint32_t si = 0; si < c->fn->funcs[fi].nstmts; si++) {
      const MilStmt *st = &c->fn->funcs[fi].stmts[si];
      bool concerned = false;
      for (uint32_t k = 0; k < c->rule->nops && !concerned; k++) concerned = !strcmp(st->op, mil_op_type(c->rule->ops[k]));
      if (!concerned || (arg && !mil_find_arg(st, arg))) continue;
      ane_rule_emit(c, ANE_RULE_LEVEL, st->op_loc, NULL, st->op, "%s '%s' %s", st->op, result_name(st), why);
    }
}

/* ANE001 */
void check_pkg_concat(AneRuleCtx *c) { forbid_mil_ops(c, NULL, "is rejected by the ANE compiler"); }

/* ANE006: MIL's attention takes its mask as attn_mask. */
void check_pkg_sdpa_mask(AneRuleCtx *c) {
  forbid_mil_ops(c, "attn_mask", "has an attn_mask, which the ANE's fused attention ignores (it runs unmasked)");
}

/* ANE010 */
void check_pkg_gelu(AneRuleCtx *c) { forbid_mil_ops(c, NULL, "is not an ANE op"); }

/* ANE013 */
void check_pkg_conv_bias(AneRuleCtx *c) { forbid_mil_ops(c, "bias", "has a bias argument, which the ANE path rejects"); }
