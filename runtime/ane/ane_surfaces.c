/*
 * The surface plan and the boundary copies (ane_surfaces.h).
 */
#include "ane_surfaces.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/mil_reader.h"

static uint64_t element_count(uint32_t rank, const int64_t *dims) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= (uint64_t)dims[i];
  return n;
}

static bool check_tensor(const OrionTensorInfo *t, const char *kind, char *why, size_t len) {
  if (t->dtype != MIL_DT_FP16 && t->dtype != MIL_DT_FP32) {
    snprintf(why, len, "the ane backend cannot bind %s '%s': the device's surfaces hold fp16 (or fp32 converted at "
                       "the boundary), not %s", kind, t->name, mil_dtype_name(t->dtype));
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) {
      snprintf(why, len, "the ane backend cannot bind %s '%s': its shape is not known", kind, t->name);
      return false;
    }
  uint64_t need = element_count(t->rank, t->dims) * 2;
  if (t->surface_bytes && need > t->surface_bytes) {
    snprintf(why, len, "the ane backend cannot bind %s '%s': %" PRIu64 " bytes of fp16 do not fit its %" PRIu64
                       "-byte surface", kind, t->name, need, t->surface_bytes);
    return false;
  }
  return true;
}

/* slot[i] = t[i]'s binding, each of 0..n-1 exactly once. */
static bool plan_slots(uint32_t *slot, const OrionTensorInfo *const *t, uint32_t n, const char *kind,
                       uint64_t *bytes, char *why, size_t len) {
  bool *taken = calloc(n ? n : 1, sizeof *taken);
  bool ok = true;
  for (uint32_t i = 0; ok && i < n; i++) {
    ok = check_tensor(t[i], kind, why, len);
    if (!ok) break;
    uint32_t b = t[i]->binding;
    if (b >= n || taken[b]) {
      snprintf(why, len, "the ane backend cannot bind %s '%s': binding %" PRIu32 " is %s", kind, t[i]->name, b,
               b >= n ? "out of range" : "taken twice");
      ok = false;
      break;
    }
    taken[b] = true;
    slot[i] = b;
    /* A bare model directory has no manifest size: the tensor's own fp16 bytes. */
    uint64_t size = t[i]->surface_bytes ? t[i]->surface_bytes : element_count(t[i]->rank, t[i]->dims) * 2;
    if (size > *bytes) *bytes = size;
  }
  free(taken);
  return ok;
}

bool ane_surface_plan(AneSurfacePlan *plan, const OrionTensorInfo *const *in, uint32_t nin,
                      const OrionTensorInfo *const *out, uint32_t nout, uint64_t min_surface_bytes, char *why,
                      size_t len) {
  memset(plan, 0, sizeof *plan);
  plan->ninputs = nin;
  plan->noutputs = nout;
  plan->input_slot = calloc(nin ? nin : 1, sizeof *plan->input_slot);
  plan->output_slot = calloc(nout ? nout : 1, sizeof *plan->output_slot);
  plan->surface_bytes = min_surface_bytes;
  bool ok = plan->input_slot && plan->output_slot &&
            plan_slots(plan->input_slot, in, nin, "input", &plan->surface_bytes, why, len) &&
            plan_slots(plan->output_slot, out, nout, "output", &plan->surface_bytes, why, len);
  if (!ok) ane_surface_plan_free(plan);
  return ok;
}

void ane_surface_plan_free(AneSurfacePlan *plan) {
  free(plan->input_slot);
  free(plan->output_slot);
  memset(plan, 0, sizeof *plan);
}

void ane_surface_pack(void *surface, uint64_t surface_bytes, const OrionTensor *t) {
  uint64_t n = element_count(t->rank, t->dims);
  uint16_t *h = surface;
  if (t->dtype == MIL_DT_FP32) fp16_from_float_array(h, t->data, n);
  else memcpy(h, t->data, n * sizeof *h);
  memset(h + n, 0, surface_bytes - n * sizeof *h);
}

void ane_surface_unpack(const void *surface, const OrionTensor *t) {
  uint64_t n = element_count(t->rank, t->dims);
  if (t->dtype == MIL_DT_FP32) fp16_to_float_array(t->data, surface, n);
  else memcpy(t->data, surface, n * sizeof(uint16_t));
}
