/*
 * The checking backend: every function is prepared twice on the CPU
 * backend, once as the CPU backend runs it (fused) and once with every
 * statement run on its own (unfused); each run does both and requires
 * identical bits in every output. A second implementation of the backend
 * interface, and a tool for finding a fusion that changes results
 * (orion-run --backend=check).
 */
#include "orion/backend.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "backend_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct CheckBackend {
  CpuContext *ctx; /* one pool of threads for every function it prepares, both runs included */
} CheckBackend;

typedef struct CheckExec {
  OrionProgram *prog;
  uint32_t fn;
  CpuProgram *fused, *unfused;
  OrionTensor *shadow; /* the unfused run's outputs */
  uint32_t nout;
} CheckExec;

static bool check_available(char *why, size_t len) {
  (void)why, (void)len;
  return true;
}

static void *check_open(const OrionBackendOptions *opt, Diag *d) {
  CpuContextOptions co = {.threads = opt->threads};
  CpuContext *ctx = cpu_context_open(&co, d);
  if (!ctx) return NULL;
  CheckBackend *b = xcalloc(1, sizeof *b);
  b->ctx = ctx;
  return b;
}

static void check_close(void *impl) {
  CheckBackend *b = impl;
  cpu_context_close(b->ctx);
  free(b);
}

static OrionBackendCaps check_caps(const void *impl) {
  (void)impl;
  return (OrionBackendCaps){.numerics_fp32 = true,
                            .profiling = true,
                            .check_finite = true,
                            .update_strategies = 1u << ORION_RELOAD_REMAP | 1u << ORION_RELOAD_INPUTS,
                            .weights_in_place = true};
}

static bool check_supports(void *impl, const OrionProgram *p, uint32_t fn, Diag *d) {
  (void)impl;
  return cpu_supports(p, fn, d);
}

static void check_release(void *exec) {
  CheckExec *e = exec;
  cpu_free(e->fused);
  cpu_free(e->unfused);
  for (uint32_t i = 0; i < e->nout; i++) orion_tensor_free(&e->shadow[i]);
  free(e->shadow);
  free(e);
}

static void *check_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  const CheckBackend *b = impl;
  CpuOptions co = {.numerics = opt->numerics == ORION_NUMERICS_FP32 ? CPU_NUMERICS_FP32 : CPU_NUMERICS_ANE,
                   .check_finite = opt->check_finite,
                   .profile = opt->profile};
  CheckExec *e = xcalloc(1, sizeof *e);
  e->prog = p;
  e->fn = fn;
  e->fused = cpu_prepare_in(b->ctx, p, fn, &co, d);
  co.unfused = true;
  co.profile = false;
  e->unfused = e->fused ? cpu_prepare_in(b->ctx, p, fn, &co, d) : NULL;
  if (!e->unfused) {
    check_release(e);
    return NULL;
  }
  e->nout = orion_output_count(p, fn);
  e->shadow = xcalloc(e->nout + 1, sizeof *e->shadow);
  for (uint32_t i = 0; i < e->nout; i++) {
    const OrionTensorInfo *info = orion_output(p, fn, i);
    size_t es = orion_tensor_dtype_size(info->dtype);
    e->shadow[i] = (OrionTensor){.dtype = info->dtype, .rank = info->rank};
    memcpy(e->shadow[i].dims, info->dims, sizeof(int64_t) * info->rank);
    e->shadow[i].data = xcalloc(es && info->bytes ? (size_t)(info->bytes / es) : 1, es ? es : 1);
  }
  return e;
}

static double element(const OrionTensor *t, uint64_t i) {
  switch (t->dtype) {
  case MIL_DT_FP16: return (double)fp16_to_float(((const uint16_t *)t->data)[i]);
  case MIL_DT_FP32: return (double)((const float *)t->data)[i];
  case MIL_DT_INT32: return (double)((const int32_t *)t->data)[i];
  default: return (double)((const bool *)t->data)[i];
  }
}

bool check_outputs_identical(const OrionProgram *p, uint32_t fn, const OrionTensor *fused, const OrionTensor *unfused,
                             Diag *d) {
  for (uint32_t i = 0; i < orion_output_count(p, fn); i++) {
    const OrionTensorInfo *info = orion_output(p, fn, i);
    size_t es = orion_tensor_dtype_size(info->dtype);
    uint64_t n = es ? info->bytes / es : 0;
    const unsigned char *a = fused[i].data, *b = unfused[i].data;
    for (uint64_t k = 0; k < n; k++)
      if (memcmp(a + k * es, b + k * es, es)) {
        diag_error(d, (SrcSpan){0},
                   "the fused and the unfused runs differ: output '%s' element %llu is %.9g fused, %.9g unfused",
                   info->name, (unsigned long long)k, element(&fused[i], k), element(&unfused[i], k));
        return false;
      }
  }
  return true;
}

static bool check_run(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  CheckExec *e = exec;
  if (!cpu_run_into(e->fused, in, out, d)) return false;
  if (!cpu_run_into(e->unfused, in, e->shadow, d)) {
    diag_note(d, (SrcSpan){0}, "the fused run succeeded, the unfused one failed");
    return false;
  }
  return check_outputs_identical(e->prog, e->fn, out, e->shadow, d);
}

static bool check_weights_changed(void *exec, Diag *d) {
  CheckExec *e = exec;
  bool a = cpu_reload_weights(e->fused, d);
  bool b = cpu_reload_weights(e->unfused, d);
  return a && b;
}

static uint32_t check_profile_count(const void *exec) { return cpu_profile_count(((const CheckExec *)exec)->fused); }
static const OrionStmtTime *check_profile_stmt(const void *exec, uint32_t i) {
  return cpu_profile_stmt(((const CheckExec *)exec)->fused, i);
}
static void check_profile_reset(void *exec) { cpu_profile_reset(((CheckExec *)exec)->fused); }

const OrionBackendVtable orion_backend_check = {
    .name = "check",
    .description = "the CPU backend run twice, fused and one statement at a time, requiring identical bits",
    .available = check_available,
    .open = check_open,
    .close = check_close,
    .caps = check_caps,
    .supports = check_supports,
    .prepare = check_prepare,
    .run = check_run,
    .weights_changed = check_weights_changed,
    .profile_count = check_profile_count,
    .profile_stmt = check_profile_stmt,
    .profile_reset = check_profile_reset,
    .release = check_release,
};
