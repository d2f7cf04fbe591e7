/*
 * A function's MIL with its weights as inputs (ane_weight_inputs.h).
 */
#include "ane_weight_inputs.h"

#include "ane_conv_matmul.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_const(const MilStmt *s) { return !strcmp(s->op, "const"); }

static const MilLiteral *blob_attr(const MilStmt *s) {
  for (uint32_t a = 0; a < s->nattrs; a++)
    if (s->attrs[a].value && s->attrs[a].value->payload == MIL_PAYLOAD_BLOB) return s->attrs[a].value;
  return NULL;
}

static uint64_t fp16_bytes(const MilType *t) {
  uint64_t n = 2;
  for (uint32_t i = 0; i < t->rank; i++) n *= (uint64_t)(t->dims[i] < 0 ? 0 : t->dims[i]);
  return n;
}

static bool name_taken(const MilFunc *f, const char *name) {
  for (uint32_t i = 0; i < f->nparams; i++)
    if (!strcmp(f->params[i].name, name)) return true;
  for (uint32_t s = 0; s < f->nstmts; s++)
    for (uint32_t r = 0; r < f->stmts[s].nresults; r++)
      if (!strcmp(f->stmts[s].results[r].name, name)) return true;
  return false;
}

/* Operands refused as inputs: conv's weight (unreliable from an input,
 * peers.md §4.6) and the operands MIL's op definitions take as consts only
 * (linear's weight and bias, the norms' parameters). */
static const struct {
  const char *op, *args;
} const_only[] = {
    {"conv", " weight "},
    {"conv_transpose", " weight "},
    {"linear", " weight bias "},
    {"layer_norm", " gamma beta "},
    {"instance_norm", " gamma beta "},
    {"batch_norm", " mean variance gamma beta "},
};

static bool is_conv(const char *op) { return !strcmp(op, "conv") || !strcmp(op, "conv_transpose"); }

static bool const_only_use(const MilStmt *st, uint32_t arg) {
  char word[80];
  snprintf(word, sizeof word, " %s ", st->args[arg].name);
  for (size_t i = 0; i < sizeof const_only / sizeof *const_only; i++)
    if (!strcmp(st->op, const_only[i].op)) return strstr(const_only[i].args, word) != NULL;
  return false;
}

/* The weight a value is computed from, through any statements (a reshape
 * of W for lower-linear's 1x1 conv), or NULL; seen marks statements
 * already found to depend on none (1) or to be in progress. */
static const char *weight_behind(const MilFunc *f, const MilOperand *o, uint8_t *seen) {
  if (o->kind != MIL_OPERAND_NAME || o->def_stmt >= f->nstmts || seen[o->def_stmt]) return NULL;
  const MilStmt *st = &f->stmts[o->def_stmt];
  if (blob_attr(st)) return st->nresults ? st->results[0].name : "?";
  seen[o->def_stmt] = 1;
  for (uint32_t a = 0; a < st->nargs; a++)
    for (uint32_t i = 0; i < st->args[a].nitems; i++) {
      const char *w = weight_behind(f, &st->args[a].items[i], seen);
      if (w) return w;
    }
  return NULL;
}

static bool refuse(char *why, size_t len, const MilFunc *f, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool refuse(char *why, size_t len, const MilFunc *f, const char *fmt, ...) {
  int n = snprintf(why, len, "function '%s' cannot take its weights as inputs: ", f->name);
  if (n >= 0 && (size_t)n < len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, len - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* Whether a name of f starts with the conv rewrite's names for result res. */
static bool rewrite_names_taken(const MilFunc *f, const char *res) {
  char prefix[512];
  int n = snprintf(prefix, sizeof prefix, "%s%s", res, ANE_CONV_MATMUL_SUFFIX);
  if (n < 0 || (size_t)n >= sizeof prefix) return true;
  for (uint32_t i = 0; i < f->nparams; i++)
    if (!strncmp(f->params[i].name, prefix, (size_t)n)) return true;
  for (uint32_t s = 0; s < f->nstmts; s++)
    for (uint32_t r = 0; r < f->stmts[s].nresults; r++)
      if (!strncmp(f->stmts[s].results[r].name, prefix, (size_t)n)) return true;
  return false;
}

/* A conv whose weight is (or is made from) a weight, written as a matmul
 * instead (ane_conv_matmul.h) when the options allow and it is a 1x1 one. */
static bool conv_rewritten(const AneWeightInputsOptions *opt, const MilFunc *f, uint32_t s, uint8_t *rewrite) {
  const MilStmt *st = &f->stmts[s];
  char why[160];
  if (!opt || !opt->convs_as_matmul || !ane_conv_as_matmul_ok(f, st, why, sizeof why) ||
      rewrite_names_taken(f, st->results[0].name))
    return false;
  rewrite[s] = 1;
  return true;
}

/* Finds the weights, or refuses; w has room for every statement, rewrite
 * (one per statement) marks the convs written as matmuls. */
static bool find_weights(const AneWeightInputsOptions *opt, const MilFunc *f, AneWeightInput *w, uint32_t *n,
                         uint8_t *rewrite, char *why, size_t len) {
  *n = 0;
  for (uint32_t s = 0; s < f->nstmts; s++) {
    const MilStmt *st = &f->stmts[s];
    const MilLiteral *blob = blob_attr(st);
    if (!blob) continue;
    const char *name = st->nresults ? st->results[0].name : "?";
    if (!is_const(st))
      return refuse(why, len, f, "'%s' is read from BLOBFILE by %s, not by a const (it stays baked)", name, st->op);
    const MilType *t = &st->results[0].type;
    if (t->kind != MIL_TYPE_TENSOR || (t->dtype != MIL_DT_FP16 && t->dtype != MIL_DT_FP32))
      return refuse(why, len, f, "'%s' is %s, and a weight input is an fp16 surface (of an fp16 or fp32 input)", name,
                    t->kind == MIL_TYPE_TENSOR ? mil_dtype_name(t->dtype) : "not a tensor");
    w[*n] = (AneWeightInput){.stmt = s, .name = name, .type = *t, .bytes = fp16_bytes(t)};
    size_t l = strlen(ANE_WEIGHT_INPUT_PREFIX) + strlen(name) + 1;
    w[*n].input = xmalloc(l);
    snprintf(w[*n].input, l, "%s%s", ANE_WEIGHT_INPUT_PREFIX, name);
    (*n)++;
    if (name_taken(f, w[*n - 1].input))
      return refuse(why, len, f, "the input name '%s' for weight '%s' is taken", w[*n - 1].input, name);
  }
  uint8_t *seen = xcalloc(f->nstmts + 1, 1);
  for (uint32_t s = 0; s < f->nstmts; s++) {
    const MilStmt *st = &f->stmts[s];
    for (uint32_t a = 0; a < st->nargs; a++)
      for (uint32_t i = 0; i < st->args[a].nitems; i++) {
        const MilOperand *o = &st->args[a].items[i];
        if (!const_only_use(st, a)) continue;
        memset(seen, 0, f->nstmts + 1); /* a weight found marks its path: each use is asked afresh */
        const char *weight = weight_behind(f, o, seen);
        if (!weight || rewrite[s] || (!strcmp(st->args[a].name, "weight") && conv_rewritten(opt, f, s, rewrite)))
          continue;
        free(seen);
        const char *res = st->nresults ? st->results[0].name : "?";
        if (!is_conv(st->op))
          return refuse(why, len, f, "'%s' is (or makes) the %s of %s '%s', which MIL takes as a const only "
                        "(dynamic weights go through matmul)", weight, st->args[a].name, st->op, res);
        return refuse(why, len, f,
                      "'%s' is (or makes) the weight of %s '%s', which the ANE does not reliably take from an input "
                      "(peers.md §4.6: ignored on one device, a compiler crash at batch >= 2 on another; dynamic "
                      "weights go through matmul)",
                      weight, st->op, res);
      }
  }
  free(seen);
  return true;
}

static const AneWeightInput *weight_of(const AneWeightInputs *w, uint32_t stmt) {
  for (uint32_t i = 0; i < w->n; i++)
    if (w->w[i].stmt == stmt) return &w->w[i];
  return NULL;
}

/* Statement st's text with every reference to a weight renamed to its input. */
static void put_stmt(StrBuf *out, const char *text, const MilStmt *st, const AneWeightInputs *w) {
  sb_puts(out, "        ");
  uint32_t at = st->loc.start;
  for (uint32_t a = 0; a < st->nargs; a++)
    for (uint32_t i = 0; i < st->args[a].nitems; i++) {
      const MilOperand *o = &st->args[a].items[i];
      const AneWeightInput *wi = o->kind == MIL_OPERAND_NAME ? weight_of(w, o->def_stmt) : NULL;
      if (!wi || o->loc.start < at) continue;
      sb_putn(out, text + at, o->loc.start - at);
      sb_puts(out, wi->input);
      at = o->loc.end;
    }
  sb_putn(out, text + at, st->loc.end - at);
  /* the statement's span may stop before its ';' */
  if (st->loc.end == st->loc.start || text[st->loc.end - 1] != ';') sb_putc(out, ';');
  sb_putc(out, '\n');
}

/* An operand as written in the output: a weight's input name, or its own. */
static const char *operand_text(const void *ctx, const MilOperand *o) {
  const AneWeightInput *wi = o->kind == MIL_OPERAND_NAME ? weight_of(ctx, o->def_stmt) : NULL;
  return wi ? wi->input : o->name;
}

bool ane_weight_inputs_mil(const MilProgram *prog, const MilFunc *f, const char *text, AneWeightInputs *out,
                           StrBuf *mil, char *why, size_t len) {
  return ane_weight_inputs_mil_with(NULL, prog, f, text, out, mil, why, len);
}

bool ane_weight_inputs_mil_with(const AneWeightInputsOptions *opt, const MilProgram *prog, const MilFunc *f,
                                const char *text, AneWeightInputs *out, StrBuf *mil, char *why, size_t len) {
  *out = (AneWeightInputs){.w = xcalloc(f->nstmts + 1, sizeof *out->w)};
  uint8_t *rewrite = xcalloc(f->nstmts + 1, 1);
  if (!find_weights(opt, f, out->w, &out->n, rewrite, why, len)) {
    free(rewrite);
    ane_weight_inputs_free(out);
    return false;
  }
  sb_printf(mil, "program(%s)\n{\n    func %s<%s>(", prog->version, f->name, f->opset_written);
  for (uint32_t i = 0; i < f->nparams; i++) {
    if (i) sb_puts(mil, ", ");
    mil_type_print(&f->params[i].type, mil);
    sb_printf(mil, " %s", f->params[i].name);
  }
  for (uint32_t i = 0; i < out->n; i++) {
    if (i || f->nparams) sb_puts(mil, ", ");
    mil_type_print(&out->w[i].type, mil);
    sb_printf(mil, " %s", out->w[i].input);
  }
  sb_puts(mil, ") {\n");
  for (uint32_t s = 0; s < f->nstmts; s++)
    if (rewrite[s]) ane_conv_as_matmul_write(f, &f->stmts[s], operand_text, out, mil);
    else if (!weight_of(out, s)) put_stmt(mil, text, &f->stmts[s], out);
  free(rewrite);
  sb_puts(mil, "    } -> (");
  for (uint32_t i = 0; i < f->nreturns; i++) {
    const AneWeightInput *wi = weight_of(out, f->returns[i].def_stmt);
    sb_printf(mil, "%s%s", i ? ", " : "", wi ? wi->input : f->returns[i].name);
  }
  sb_puts(mil, ");\n}\n");
  return true;
}

void ane_weight_inputs_free(AneWeightInputs *w) {
  for (uint32_t i = 0; w->w && i < w->n; i++) free(w->w[i].input);
  free(w->w);
  *w = (AneWeightInputs){0};
}
