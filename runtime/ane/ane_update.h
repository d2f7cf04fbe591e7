/*
 * Weight updates on the ANE, and the self-test that picks how (issue 15).
 * Reports disagree on what works (peers.md §4.9): overwriting the weight
 * files and reloading is ignored on some builds, patching the compiled
 * program's data is not reproduced, weights as inputs always work but run
 * slower, and recompiling works but spends the compile budget. So the
 * backend asks the running OS build: the self-test applies a known weight
 * change to a probe program by each strategy in ane_update_order, runs the
 * probe, compares with a freshly compiled program with the new weights, and
 * picks the first that matches; the choice is cached per OS build and ANE
 * architecture (ane_update_cache.h). Pure C over the ops tables; see
 * docs/ane-backend.md.
 */
#ifndef ORION_ANE_UPDATE_H
#define ORION_ANE_UPDATE_H

#include "ane_compile.h"
#include "orion/runtime.h"

/* What a strategy needs besides the lifecycle. `weights` are the caller's
 * own handles (a weight dictionary, a patched file, a buffer): this module
 * never looks inside. An op a device cannot do may be NULL: that strategy
 * then fails without being tried. */
typedef struct AneUpdateOps {
  void *ctx;
  /* The probe program with those weights, as constants or as inputs. */
  const AneProgramSource *(*probe_source)(void *ctx, const void *weights, bool as_inputs);
  /* Overwrites the program's weight files on disk (the reference's delta reload). */
  bool (*write_weight_files)(void *ctx, void *program, const void *weights, AneDeviceError *err);
  /* Writes the weights into the compiled program's data (the image load reads). */
  bool (*patch_data)(void *ctx, void *program, const void *weights, AneDeviceError *err);
  /* Binds the weights as the inputs of a program compiled with weights as inputs. */
  bool (*bind_weights)(void *ctx, void *program, const void *weights, AneDeviceError *err);
  /* Runs the probe input through the program: n fp16 outputs. */
  bool (*evaluate)(void *ctx, void *program, uint16_t *out, size_t n, AneDeviceError *err);
} AneUpdateOps;

/* The self-test's order, cheapest per update first: reloading the files
 * (an unload and a load), patching the data (the same, plus writing the
 * image), weights as inputs (nothing per update, but every evaluation is
 * slower and the program must be compiled that way), recompiling (a compile
 * per update, from the budget). */
#define ANE_UPDATE_STRATEGIES 4
extern const OrionReloadStrategy ane_update_order[ANE_UPDATE_STRATEGIES];

/* "reload-files", "patch-data", "inputs", "recompile"; NULL for the others. */
const char *ane_update_strategy_name(OrionReloadStrategy s);
bool ane_update_strategy_from_name(const char *name, OrionReloadStrategy *out);

/* Applies new weights to a loaded program by strategy s (INPUTS: a program
 * compiled with weights as inputs). RECOMPILE charges the budget (from a
 * reservation when from_reserve). On failure the program may be unloaded. */
bool ane_update_apply(OrionReloadStrategy s, const AneDeviceOps *dev, const AneUpdateOps *up, AneBudget *budget,
                      const AneRetryPolicy *retry, void *program, const AneProgramSource *src,
                      const void *weights, bool from_reserve, Diag *d);

/* One compile for the fresh reference, one per strategy's probe and one
 * more for recompiling: the self-test reserves them before it starts, so
 * that it can never spend the compiles the rest of the process was
 * promised (a retried compile draws on the same reservation), and gives
 * back what it did not use. */
#define ANE_SELF_TEST_COMPILES (2u + ANE_UPDATE_STRATEGIES)
#define ANE_PROBE_MAX_OUTPUTS 65536u

typedef struct AneSelfTest {
  const void *old_weights, *new_weights; /* handles for AneUpdateOps */
  size_t outputs;                        /* fp16 outputs of the probe (1..ANE_PROBE_MAX_OUTPUTS) */
  /* Largest difference accepted, in units in the last place of fp16 (0: bit-exact). */
  uint32_t tolerance_ulps;
  const char *os_build, *ane_arch;
  const char *cache_dir; /* NULL: $XDG_CACHE_HOME/orion, else $HOME/.cache/orion */
  AneGetenv *env;        /* where XDG_CACHE_HOME and HOME are read (NULL: getenv) */
  bool rerun;            /* ignore a cached choice */
} AneSelfTest;

typedef struct AneSelfTestResult {
  OrionReloadStrategy strategy;
  bool from_cache;
  uint64_t compiles; /* device compiles the self-test made */
  char cache_path[1024];
  char tried[1024]; /* "reload-files: stale output; patch-data: ..." for -v and errors */
} AneSelfTestResult;

/* The strategy for this OS build: the cached choice, else the self-test's
 * (then cached). False after reporting when no strategy matches. */
bool ane_update_self_test(const AneDeviceOps *dev, const AneUpdateOps *up, AneBudget *budget,
                          const AneRetryPolicy *retry, const AneSelfTest *test, AneSelfTestResult *res, Diag *d);

#endif
