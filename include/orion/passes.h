/*
 * Passes over the graph IR and the pass manager.
 *
 * Each pass lives in its own file under passes/ and is described by a
 * PassInfo: a name (used by --passes= and --print-after=), a one-line
 * description, the analyses it requires and those it invalidates, and a run
 * function with one signature. The manager runs named pipelines (O0, O1) or
 * an explicit list, repeats groups of passes that enable each other until
 * nothing changes, verifies the IR after every pass on request (naming the
 * pass that broke it), prints the IR after passes, and times them.
 * Out-of-tree passes register through the plugin API (orion/pass_plugin.h).
 * See docs/writing-a-pass.md.
 */
#ifndef ORION_PASSES_H
#define ORION_PASSES_H

#include "orion/ir.h"

/* Analyses: facts about the IR that passes may rely on or destroy. */
enum {
  ANALYSIS_TYPES = 1u << 0,    /* every value has its verified type (ir_verify) */
  ANALYSIS_INLINED = 1u << 1,  /* no calls are left */
  ANALYSIS_SRAM = 1u << 2,     /* SRAM working-set annotations are current */
  ANALYSIS_BINDINGS = 1u << 3, /* each function's I/O binding table (IrFunc.bindings, io-legalize) is current;
                                  the manager drops the tables after a pass that invalidates it changed the IR */
};

typedef struct PassOptions PassOptions;

typedef struct PassCtx {
  Diag *d;
  const PassOptions *opt;
  bool changed; /* set by a pass that modified the IR (drives fixed points) */
} PassCtx;

typedef struct PassInfo {
  const char *name;        /* CLI name, e.g. "dce" */
  const char *description; /* one line */
  unsigned requires;       /* analyses that must hold before it runs */
  unsigned invalidates;    /* analyses that no longer hold after it changed the IR */
  bool (*run)(IrModule *m, PassCtx *ctx); /* false: errors were reported */
} PassInfo;

/* The built-in passes and any registered by plugins. */
const PassInfo *pass_lookup(const char *name);
uint32_t pass_count(void);
const PassInfo *pass_at(uint32_t i);
/* Registers an out-of-tree pass; false if the name is taken or invalid. */
bool pass_register(const PassInfo *info, Diag *d);

/* One --lora=PATTERN:RANK[:ALPHA]: linear layers whose weight (or module,
 * the weight's name without ".weight") matches the fnmatch pattern get
 * adapter inputs of that rank, scaled by alpha / rank. */
typedef struct LoraSpec {
  const char *pattern;
  uint32_t rank;
  double alpha;
} LoraSpec;

/* A layer the lora pass adapted (module name in the module's arena). */
typedef struct LoraLayer {
  const char *module;
  uint32_t rank;
  double alpha;
} LoraLayer;

typedef struct LoraLayers {
  LoraLayer *layers; /* malloc'd: free(layers) */
  uint32_t n, cap;
} LoraLayers;

struct PassOptions {
  uint32_t target_sram_bytes; /* SRAM budget of the target (0: default) */
  bool fp16_range_guard;      /* insert clamps where values can overflow fp16 */
  const LoraSpec *lora;       /* adapters as inputs (the lora pass) */
  uint32_t nlora;
  LoraLayers *lora_layers; /* when set, the lora pass appends each layer it adapts (orionc --train --lora) */
  bool lora_any_float;     /* adapters of fp32 layers too, in the layer's dtype (training on the CPU backend) */
  uint64_t target_min_surface_bytes; /* smallest I/O surface of the target (0: IO_DEFAULT_MIN_SURFACE_BYTES) */
  bool sram_checked_later; /* the constraint check (ANE016) runs after the passes: sram-annotate only estimates */
};

/* The minimum I/O surface every current target has (the constraint table's
 * min_surface_bytes), for io-legalize runs that name no target. */
#define IO_DEFAULT_MIN_SURFACE_BYTES 49152u

typedef struct PassManagerOptions {
  const char *pipeline;    /* "O0", "O1", or NULL with `passes` */
  const char *passes;      /* comma-separated explicit list (overrides pipeline) */
  const char *print_after; /* pass name, "all", or NULL */
  bool verify_each;
  bool time_passes;
  FILE *dump;              /* where --print-after and --time-passes write (stderr if NULL) */
  PassOptions pass_options;
} PassManagerOptions;

/* Checks a pipeline spec (names exist) before anything runs. */
bool passes_check_spec(const PassManagerOptions *o, Diag *d);
/* Runs the pipeline, then verifies. Returns false if a pass failed or broke the IR. */
bool passes_run(IrModule *m, const PassManagerOptions *o, Diag *d);

/* Deletes a function nobody calls any more, with everything it owns (the
 * calls it makes no longer count as callers of their callees). orionc
 * --train keeps only the forward and backward it made this way. */
void pass_delete_func(IrModule *m, IrFuncId f);
/* The passes of a named pipeline, comma-separated, with groups that run to a
 * fixed point in parentheses: "inline,(dce,cast-fusion),..."; NULL if unknown. */
const char *passes_pipeline(const char *name);

/* The pipeline orionc runs unless told otherwise (orion-lint lints .oir files after it too). */
#define PASSES_DEFAULT_PIPELINE "O1"

/* The legalization every program gets before MIL emission: the O0 pipeline. */
bool passes_legalize(IrModule *m, Diag *d);

/* Built-in pass entry points (one file each under passes/). */
bool pass_inline(IrModule *m, PassCtx *ctx);
bool pass_decompose_attention(IrModule *m, PassCtx *ctx);
bool pass_lower_cross_entropy(IrModule *m, PassCtx *ctx);
bool pass_lower_rms_norm(IrModule *m, PassCtx *ctx);
bool pass_lower_layer_norm(IrModule *m, PassCtx *ctx);
bool pass_lower_neg(IrModule *m, PassCtx *ctx);
bool pass_lower_silu(IrModule *m, PassCtx *ctx);
bool pass_gelu_tanh(IrModule *m, PassCtx *ctx);
bool pass_split_concat(IrModule *m, PassCtx *ctx);
bool pass_split_conv_bias(IrModule *m, PassCtx *ctx);
bool pass_lower_linear(IrModule *m, PassCtx *ctx);
bool pass_dce(IrModule *m, PassCtx *ctx);
bool pass_identity_elim(IrModule *m, PassCtx *ctx);
bool pass_cast_fusion(IrModule *m, PassCtx *ctx);
bool pass_const_fold(IrModule *m, PassCtx *ctx);
bool pass_fold_layout(IrModule *m, PassCtx *ctx);
bool pass_sram_annotate(IrModule *m, PassCtx *ctx);
/* sram-annotate's estimate of an op's on-chip working set in bytes: its
 * operands and results resident at once, a gather's table only as the rows
 * it picks, 0 for an op on constants only (the ANE compiler folds it). */
uint64_t passes_op_working_set(IrModule *m, IrOpId op);
bool pass_io_legalize(IrModule *m, PassCtx *ctx);
bool pass_fp16_range_guard(IrModule *m, PassCtx *ctx);
bool pass_lora(IrModule *m, PassCtx *ctx);

/* The MIL name for `want`, claimed in `used` so that it is unique there:
 * characters a MIL identifier cannot hold become '_', a name starting with a
 * digit (or empty) gets "v_" in front, a reserved word of Apple's MIL parser
 * a '_' behind, and a name already taken "_1", "_2", ... The one naming rule
 * of the MIL text: io-legalize names inputs and outputs with it, the emitter
 * everything else. The name lives in m's arena. */
const char *mil_name_claim(IrModule *m, StrMap *used, const char *want);
/* io-legalize's analysis of one function: the MIL names of its inputs (in
 * order), then of its outputs (in order) claimed in one name table, binding
 * indices in ASCII order of those names, each tensor's bytes and the uniform
 * surface size (the largest, at least min_surface_bytes, rounded up to 64).
 * Attached to f (replacing an older table) and returned. */
const IrBindingTable *io_bindings_compute(IrModule *m, IrFuncId f, uint64_t min_surface_bytes);
/* Whether f's table was computed for f as it is now (same inputs and outputs,
 * same sizes); false if it has none. */
bool io_bindings_current(IrModule *m, IrFuncId f);

/* Why split-concat leaves the concat `op` where it stands: "its use by
 * reduce_sum 'n' is neither ..." appended to why (for the ANE001 finding);
 * false if every use can take it apart. */
bool split_concat_blocker(IrModule *m, IrOpId op, StrBuf *why);

#endif
