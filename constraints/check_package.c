/*
 * Checkers of the rules that can be decided from a written package: the
 * manifest's bindings and surface sizes, and the MIL text and weight file as
 * the device would receive them. Manifest findings name Manifest.plist;
 * MIL findings point at the line and column in the MIL text.
 */
#include <string.h>

#include "lint_internal.h"

static const PkgFunction *func(LintCtx *c, uint32_t fn) { return &c->pkg->functions[fn]; }

static SrcSpan mil_span(LintCtx *c, uint32_t fn, MilRange r) {
  return (SrcSpan){c->mil_file[fn], r.off, r.off + (r.len ? r.len : 1)};
}

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

/* ANE008: every BLOBFILE must name a record of the weight file, of the
 * tensor's dtype and size. Problems with a whole file are reported once. */
void check_pkg_blobfile(LintCtx *c, uint32_t fn) {
  MilScan *s = c->mil[fn];
  const char *fname = func(c, fn)->name;
  const char *bad_files[8];
  uint32_t nbad = 0;
  char err[256];
  for (uint32_t i = 0; i < s->nblobs; i++) {
    const MilScanBlob *b = &s->blobs[i];
    SrcSpan at = mil_span(c, fn, b->offset_tok.len ? b->offset_tok : b->where);
    if (!b->offset_tok.len) {
      lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE has no offset");
      continue;
    }
    if (!b->offset_ok) {
      lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE offset '%s' is not an unsigned integer",
                mil_range_str(s, b->offset_tok));
      continue;
    }
    if (!b->path) {
      lint_emit(c, LINT_RULE_LEVEL, mil_span(c, fn, b->where), NULL, fname, "BLOBFILE has no path");
      continue;
    }
    const char *rel = b->path + strlen(MODEL_PATH);
    if (strncmp(b->path, MODEL_PATH, strlen(MODEL_PATH)) || !inside(rel)) {
      lint_emit(c, LINT_RULE_LEVEL, mil_span(c, fn, b->where), NULL, fname,
                "BLOBFILE path '%s' is not a file inside the package (@model_path/...)", b->path);
      continue;
    }
    bool reported = false;
    for (uint32_t k = 0; k < nbad; k++) reported |= !strcmp(bad_files[k], rel);
    if (reported) continue;
    size_t len;
    const char *rerr;
    const uint8_t *data = lint_weight_file(c, rel, &len, &rerr);
    BlobFile bf;
    bool file_ok = data && blob_file_open(&bf, data, len, err, sizeof err);
    if (!file_ok) {
      if (!data) lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "cannot read the weight file '%s': %s", rel, rerr);
      else lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "weight file '%s': %s", rel, err);
      if (nbad < sizeof bad_files / sizeof *bad_files) bad_files[nbad++] = rel;
      continue;
    }
    BlobInfo info;
    if (!blob_file_read(&bf, b->offset, &info, err, sizeof err))
      lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE offset %llu does not point at a blob record of '%s': %s",
                (unsigned long long)b->offset, rel, err);
    else if (b->typed && !blob_file_read_expect(&bf, b->offset, b->blob_dtype, b->nbytes, &info, err, sizeof err))
      lint_emit(c, LINT_RULE_LEVEL, at, NULL, fname, "BLOBFILE offset %llu points at a blob that does not fit the "
                "tensor: %s", (unsigned long long)b->offset, err);
  }
}

/* ANE012: the ops of the rule (matmul) must bind transpose_x/transpose_y to
 * names, not literals. */
void check_pkg_transpose_consts(LintCtx *c, uint32_t fn) {
  MilScan *s = c->mil[fn];
  for (uint32_t i = 0; i < s->nstmts; i++) {
    const MilScanStmt *st = &s->stmts[i];
    bool concerned = false;
    for (uint32_t k = 0; k < c->rule->nops && !concerned; k++)
      concerned = mil_range_eq(s, st->op, ir_op_info(c->rule->ops[k])->name);
    if (!concerned) continue;
    for (uint32_t a = st->first_arg; a < st->first_arg + st->nargs; a++) {
      const MilScanArg *arg = &s->args[a];
      if ((mil_range_eq(s, arg->key, "transpose_x") || mil_range_eq(s, arg->key, "transpose_y")) && !arg->is_name)
        lint_emit(c, LINT_RULE_LEVEL, mil_span(c, fn, arg->value), NULL, func(c, fn)->name,
                  "%s of %s '%s' is the literal '%s'; the ANE's MIL parser needs a named bool const",
                  mil_range_str(s, arg->key), mil_range_str(s, st->op),
                  st->result.len ? mil_range_str(s, st->result) : "?", mil_range_str(s, arg->value));
    }
  }
}

/* ANE014: every returned name is a parameter or a statement's result. */
void check_pkg_returns(LintCtx *c, uint32_t fn) {
  MilScan *s = c->mil[fn];
  for (uint32_t fi = 0; fi < s->nfuncs; fi++) {
    const MilScanFunc *f = &s->funcs[fi];
    StrMap defined;
    strmap_init(&defined);
    for (uint32_t i = 0; i < f->nparams; i++) strmap_put(&defined, mil_range_str(s, f->params[i]), 1);
    for (uint32_t i = 0; i < f->ndefs; i++) strmap_put(&defined, mil_range_str(s, f->defs[i]), 1);
    const char *mname = mil_range_str(s, f->name);
    for (uint32_t i = 0; i < f->nreturns; i++) {
      const char *r = mil_range_str(s, f->returns[i]);
      if (!strmap_get(&defined, r))
        lint_emit(c, LINT_RULE_LEVEL, mil_span(c, fn, f->returns[i]), NULL, func(c, fn)->name,
                  "returned name '%s' is not defined by a statement or an input of '%s'", r, mname);
    }
    strmap_free(&defined);
  }
}

/* The MIL op type of an op the table names (MIL spells attention out). */
static const char *mil_op_type(IrOpKind k) { return k == OP_SDPA ? "scaled_dot_product_attention" : ir_op_info(k)->name; }

/* Statements whose op the rule names (and, if `arg` is set, that bind it):
 * MIL from other tools, or edited by hand, can hold what orionc legalizes away. */
static void forbid_mil_ops(LintCtx *c, uint32_t fn, const char *arg, const char *why) {
  MilScan *s = c->mil[fn];
  for (uint32_t i = 0; i < s->nstmts; i++) {
    const MilScanStmt *st = &s->stmts[i];
    bool concerned = false, binds = !arg;
    for (uint32_t k = 0; k < c->rule->nops && !concerned; k++) concerned = mil_range_eq(s, st->op, mil_op_type(c->rule->ops[k]));
    for (uint32_t a = st->first_arg; concerned && !binds && a < st->first_arg + st->nargs; a++)
      binds = mil_range_eq(s, s->args[a].key, arg);
    if (!concerned || !binds) continue;
    lint_emit(c, LINT_RULE_LEVEL, mil_span(c, fn, st->op), NULL, func(c, fn)->name, "%s '%s' %s", mil_range_str(s, st->op),
              st->result.len ? mil_range_str(s, st->result) : "?", why);
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
