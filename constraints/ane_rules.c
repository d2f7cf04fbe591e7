/*
 * The registry of the ANE rules decided from MIL text and manifests (which
 * code checks which rule, and what it reads), running it, and the weight
 * files the checkers read. orion/ane_rules.h says who uses it.
 */
#include <stdlib.h>
#include <string.h>

#include "ane_rules_internal.h"
#include "orion/pkg_paths.h"

/* ---- registry ---- */

/* One entry per rule of the table whose `check` includes static-package or
 * runtime, in rule order: the test suite asserts that each such rule has an
 * entry, every static-package one a checker, and every entry names a rule. */
static const struct {
  const char *rule;
  AneRuleNeeds needs;
  AneRuleCheck check;     /* NULL for ANE_RULE_AT_RUN */
  const char *at_run_why; /* set for ANE_RULE_AT_RUN */
} rules[] = {
    {"ANE001", ANE_RULE_MIL, check_pkg_concat, NULL},
    {"ANE002", ANE_RULE_MANIFEST, check_pkg_uniform_outputs, NULL},
    {"ANE003", ANE_RULE_MANIFEST, check_pkg_output_order, NULL},
    {"ANE004", ANE_RULE_MANIFEST, check_pkg_min_surface, NULL},
    {"ANE005", ANE_RULE_AT_RUN, NULL, "it counts the compiles of a process, not a property of one program"},
    {"ANE006", ANE_RULE_MIL, check_pkg_sdpa_mask, NULL},
    {"ANE008", ANE_RULE_MIL, check_pkg_blobfile, NULL},
    {"ANE009", ANE_RULE_AT_RUN, NULL, "it is how the ane backend hands the MIL text to Apple's compiler"},
    {"ANE010", ANE_RULE_MIL, check_pkg_gelu, NULL},
    {"ANE011", ANE_RULE_AT_RUN, NULL, "it is how the ane backend hands the weights to Apple's compiler"},
    {"ANE012", ANE_RULE_MIL, check_pkg_transpose_consts, NULL},
    {"ANE013", ANE_RULE_MIL, check_pkg_conv_bias, NULL},
    {"ANE014", ANE_RULE_MIL, check_pkg_returns, NULL},
    {"ANE017", ANE_RULE_AT_RUN, NULL, "the CPU backend's ane numerics compute as the device does (fp16 storage and rounding)"},
    {"ANE018", ANE_RULE_MANIFEST, check_pkg_uniform_inputs, NULL},
    {"ANE019", ANE_RULE_MANIFEST, check_pkg_input_order, NULL},
    {"ANE020", ANE_RULE_AT_RUN, NULL, "it is how the caller's data is written into a surface larger than its tensor"},
};

#define NRULES (sizeof rules / sizeof *rules)

uint32_t ane_rule_count(void) { return (uint32_t)NRULES; }
const char *ane_rule_id(uint32_t i) { return i < NRULES ? rules[i].rule : NULL; }
AneRuleNeeds ane_rule_needs(uint32_t i) { return i < NRULES ? rules[i].needs : ANE_RULE_AT_RUN; }
const char *ane_rule_at_run_reason(uint32_t i) { return i < NRULES ? rules[i].at_run_why : NULL; }

uint32_t ane_rule_find(const char *id) {
  for (uint32_t i = 0; i < NRULES; i++)
    if (!strcmp(rules[i].rule, id)) return i;
  return UINT32_MAX;
}

void ane_rule_summary_lower(const Constraint *rule, StrBuf *out) {
  const char *s = rule->summary;
  /* "The ..." and "A ..." lose their capital; "ANE..." and "gelu ..." are names. */
  bool capital_word = s[0] >= 'A' && s[0] <= 'Z' && !(s[1] >= 'A' && s[1] <= 'Z');
  if (capital_word) {
    sb_putc(out, (char)(s[0] - 'A' + 'a'));
    s++;
  }
  sb_puts(out, s);
}

/* ---- findings ---- */

void ane_rule_emit(AneRuleCtx *c, int level, SrcSpan span, const char *path, const char *op, const char *fmt, ...) {
  StrBuf msg;
  sb_init(&msg);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&msg, fmt, ap);
  va_end(ap);
  AneRuleFinding f = {
      .rule = c->rule,
      .level = level,
      .span = span,
      .path = span.file ? NULL : path,
      .function = c->fn->name,
      .op = op,
      .message = msg.data ? msg.data : "",
  };
  c->in->sink(c->in->sink_ctx, &f);
  sb_free(&msg);
}

/* ---- weight files ---- */

struct AneWeightFile {
  char *relpath;
  const uint8_t *data; /* NULL if it could not be read */
  uint8_t *owned;      /* data when the library read it */
  size_t len;
  const char *err;
  char *refusal; /* err when this library could not read the file (malloc'd: the array moves) */
};

const uint8_t *ane_rule_weight_file(AneRuleCtx *c, const char *relpath, size_t *len, const char **err) {
  for (uint32_t i = 0; i < c->nweights; i++)
    if (!strcmp(c->weights[i].relpath, relpath)) {
      *len = c->weights[i].len;
      *err = c->weights[i].err;
      return c->weights[i].data;
    }
  xgrow((void **)&c->weights, sizeof *c->weights, &c->cap_weights, c->nweights + 1);
  AneWeightFile *w = &c->weights[c->nweights++];
  memset(w, 0, sizeof *w);
  w->relpath = xstrdup(relpath);
  if (c->in->weight_file) w->data = c->in->weight_file(c->in->weight_ctx, relpath, &w->len, &w->err);
  if (!w->data && !w->err) {
    /* Through the directory's descriptor, by the package rule (orion/pkg_paths.h). */
    char why[4096 + 128], *data;
    bool outside = false;
    PkgDir dir;
    const char *derr;
    if (!pkg_dir_open(&dir, c->in->dir, &derr)) snprintf(why, sizeof why, "%s", derr);
    else if (pkg_read_file(&dir, relpath, SIZE_MAX / 2, &data, &w->len, &outside, why, sizeof why))
      w->data = w->owned = (uint8_t *)data;
    pkg_dir_close(&dir);
    if (!w->data) w->err = w->refusal = xstrdup(why);
  }
  *len = w->len;
  *err = w->err;
  return w->data;
}

/* ---- running ---- */

void ane_rules_run(const AneRuleInput *in) {
  AneRuleCtx c = {.in = in, .target = in->target};
  for (size_t k = 0; k < NRULES; k++) {
    if (!rules[k].check || (rules[k].needs == ANE_RULE_MANIFEST && !in->manifest_path)) continue;
    c.rule = constraints_find(in->table, rules[k].rule);
    /* A custom table may leave a rule out; then nothing checks it. */
    if (!c.rule || (in->drops && in->drops(in->sink_ctx, c.rule))) continue;
    for (uint32_t i = 0; i < in->nfunctions; i++) {
      c.fn = &in->functions[i];
      rules[k].check(&c);
    }
  }
  for (uint32_t i = 0; i < c.nweights; i++) {
    free(c.weights[i].relpath);
    free(c.weights[i].owned);
    free(c.weights[i].refusal);
  }
  free(c.weights);
}
