/*
 * The pass registry: every built-in pass listed once (passes.def style, as
 * data), plus passes registered at run time by plugins.
 */
#include <string.h>

#include "orion/passes.h"

static const PassInfo builtin[] = {
    {"inline", "expand every call into its caller, giving each instance its own weights", 0,
     ANALYSIS_TYPES | ANALYSIS_SRAM | ANALYSIS_BINDINGS, pass_inline},
    {"lora", "linear layers matching --lora get adapter inputs A, B: y + alpha/r * (x A^T) B^T (only with --lora)",
     ANALYSIS_TYPES | ANALYSIS_INLINED, ANALYSIS_TYPES | ANALYSIS_SRAM | ANALYSIS_BINDINGS, pass_lora},
    {"decompose-attention", "sdpa -> matmul, scale, additive mask, softmax, matmul (the ANE ignores sdpa masks)",
     ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM, pass_decompose_attention},
    {"lower-cross-entropy", "cross_entropy -> stable fp32 log-sum-exp minus the target's logit (gathers), masked mean",
     ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM, pass_lower_cross_entropy},
    {"lower-rms-norm", "rms_norm -> mul, reduce_mean, add, rsqrt, mul (MIL has no RMS norm)", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_lower_rms_norm},
    {"lower-layer-norm", "layer_norm -> reduce_mean, sub, mul, rsqrt, mul, add (the ANE rejects wide layer_norm)",
     ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM, pass_lower_layer_norm},
    {"lower-neg", "neg(x) -> mul(x, -1) (MIL has no negation)", ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM,
     pass_lower_neg},
    {"lower-silu", "silu(x) -> x * sigmoid(x)", ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM, pass_lower_silu},
    {"gelu-tanh", "gelu (exact or tanh) -> the tanh formula in mul/add/tanh (the ANE rejects gelu)", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_gelu_tanh},
    {"split-concat", "concat -> sums of products with split weights, or distributed over element-wise ops",
     ANALYSIS_TYPES | ANALYSIS_INLINED, ANALYSIS_TYPES | ANALYSIS_SRAM | ANALYSIS_BINDINGS, pass_split_concat},
    {"split-conv-bias", "conv(x, w, b) -> add(conv(x, w), b) (the ANE path rejects conv bias)", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_split_conv_bias},
    {"lower-linear", "linear with a constant weight -> 1x1 conv in [B, C, 1, S] layout", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_lower_linear},
    {"dce", "delete ops, params, consts and called functions that no output depends on", ANALYSIS_TYPES,
     ANALYSIS_SRAM, pass_dce},
    {"identity-elim", "replace identity and no-op reshape/transpose/cast/mul-by-1/add-of-0 by their operand",
     ANALYSIS_TYPES, ANALYSIS_SRAM, pass_identity_elim},
    {"cast-fusion", "remove round-trip casts, collapse cast chains, fold casts of consts", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_cast_fusion},
    {"const-fold", "compute small element-wise sub-graphs of consts at compile time", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_const_fold},
    {"fold-layout", "collapse reshape-of-reshape and transpose-of-transpose chains", ANALYSIS_TYPES,
     ANALYSIS_TYPES | ANALYSIS_SRAM, pass_fold_layout},
    {"io-legalize", "choose the MIL names, binding order and surface size of inputs and outputs (the binding table)",
     ANALYSIS_TYPES, 0, pass_io_legalize},
    {"sram-annotate", "estimate each op's and each function's SRAM working set; warn over the budget", ANALYSIS_TYPES,
     0, pass_sram_annotate},
    {"fp16-range-guard", "clip fp16 results of ops that can overflow (only with the fp16 range guard option)",
     ANALYSIS_TYPES, ANALYSIS_TYPES | ANALYSIS_SRAM, pass_fp16_range_guard},
};

#define MAX_PLUGIN_PASSES 64
static PassInfo plugins[MAX_PLUGIN_PASSES]; /* filled by pass_register only */
static uint32_t nplugins;

uint32_t pass_count(void) { return (uint32_t)(sizeof builtin / sizeof *builtin) + nplugins; }

const PassInfo *pass_at(uint32_t i) {
  uint32_t nb = (uint32_t)(sizeof builtin / sizeof *builtin);
  return i < nb ? &builtin[i] : i < nb + nplugins ? &plugins[i - nb] : NULL;
}

const PassInfo *pass_lookup(const char *name) {
  for (uint32_t i = 0; i < pass_count(); i++)
    if (!strcmp(pass_at(i)->name, name)) return pass_at(i);
  return NULL;
}

static bool valid_name(const char *s) {
  if (!s || !*s || strlen(s) > 64) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_')) return false;
  return true;
}

bool pass_register(const PassInfo *info, Diag *d) {
  if (!info || !valid_name(info->name) || !info->run || !info->description) {
    diag_error(d, (SrcSpan){0}, "cannot register pass '%s': it needs a name of lowercase letters, digits, '-' or '_', "
               "a description and a run function", info && info->name ? info->name : "(null)");
    return false;
  }
  if (pass_lookup(info->name)) {
    diag_error(d, (SrcSpan){0}, "cannot register pass '%s': a pass of that name exists", info->name);
    return false;
  }
  if (nplugins >= MAX_PLUGIN_PASSES) {
    diag_error(d, (SrcSpan){0}, "cannot register pass '%s': too many plugin passes (limit is %d)", info->name,
               MAX_PLUGIN_PASSES);
    return false;
  }
  plugins[nplugins++] = *info;
  return true;
}
