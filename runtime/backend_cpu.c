/*
 * The CPU reference backend behind the backend interface: a thin table over
 * orion/cpu.h. The backend instance is a CpuContext: it owns the one pool
 * of threads (and the OpenBLAS setting) that every function it prepares
 * runs on, one run at a time.
 */
#include "orion/backend.h"
#include "orion/cpu.h"

#include <stdlib.h>

typedef struct CpuBackend {
  CpuContext *ctx; /* the backend instance: one pool of threads for every function it prepares */
} CpuBackend;

static bool cpu_available(char *why, size_t len) {
  (void)why, (void)len;
  return true;
}

static void *cpu_open(const OrionBackendOptions *opt, Diag *d) {
  CpuContextOptions co = {.threads = opt->threads};
  CpuContext *ctx = cpu_context_open(&co, d);
  if (!ctx) return NULL;
  CpuBackend *b = xcalloc(1, sizeof *b);
  b->ctx = ctx;
  return b;
}

static void cpu_close(void *impl) {
  CpuBackend *b = impl;
  cpu_context_close(b->ctx);
  free(b);
}

static OrionBackendCaps cpu_caps(const void *impl) {
  (void)impl;
  return (OrionBackendCaps){
      .numerics_fp32 = true,
      .profiling = true,
      .check_finite = true,
      .update_strategies = 1u << ORION_RELOAD_REMAP | 1u << ORION_RELOAD_INPUTS,
      .inputs_may_alias_outputs = false, /* an op writes an output while later ones may still read inputs */
      .weights_in_place = true,
  };
}

static bool cpu_supports_fn(void *impl, const OrionProgram *p, uint32_t fn, Diag *d) {
  (void)impl;
  return cpu_supports(p, fn, d);
}

static void *cpu_prepare_fn(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  const CpuBackend *b = impl;
  CpuOptions co = {.numerics = opt->numerics == ORION_NUMERICS_FP32 ? CPU_NUMERICS_FP32 : CPU_NUMERICS_ANE,
                   .check_finite = opt->check_finite,
                   .profile = opt->profile};
  return cpu_prepare_in(b->ctx, p, fn, &co, d);
}

static bool cpu_run_fn(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  return cpu_run_into(exec, in, out, d);
}

static bool cpu_weights_changed(void *exec, Diag *d) { return cpu_reload_weights(exec, d); }
static uint32_t cpu_profile_count_fn(const void *exec) { return cpu_profile_count(exec); }
static const OrionStmtTime *cpu_profile_stmt_fn(const void *exec, uint32_t i) { return cpu_profile_stmt(exec, i); }
static void cpu_profile_reset_fn(void *exec) { cpu_profile_reset(exec); }
static void cpu_release(void *exec) { cpu_free(exec); }

const OrionBackendVtable orion_backend_cpu = {
    .name = "cpu",
    .description = "the CPU reference backend: runs the package's MIL with the ANE's fp16 numerics (or fp32)",
    .available = cpu_available,
    .open = cpu_open,
    .close = cpu_close,
    .caps = cpu_caps,
    .supports = cpu_supports_fn,
    .prepare = cpu_prepare_fn,
    .run = cpu_run_fn,
    .weights_changed = cpu_weights_changed,
    .profile_count = cpu_profile_count_fn,
    .profile_stmt = cpu_profile_stmt_fn,
    .profile_reset = cpu_profile_reset_fn,
    .release = cpu_release,
};
