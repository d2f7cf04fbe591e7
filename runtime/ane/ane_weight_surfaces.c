/*
 * A prepared function's weight surfaces (ane_weight_surfaces.h).
 */
#include "ane_weight_surfaces.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

static int by_mil_name(const void *a, const void *b) {
  const OrionTensorInfo *x = *(const OrionTensorInfo *const *)a, *y = *(const OrionTensorInfo *const *)b;
  return strcmp(x->mil_name, y->mil_name);
}

bool ane_weight_surfaces_plan(AneWeightSurfaces *ws, AneSurfacePlan *plan, const OrionProgram *p, uint32_t fn,
                              const char *text, uint64_t min_surface_bytes, char *why, size_t len) {
  *ws = (AneWeightSurfaces){0};
  StrBuf mil;
  sb_init(&mil);
  const AneWeightInputsOptions opt = {.convs_as_matmul = true};
  if (!ane_weight_inputs_mil_with(&opt, orion_function_program(p, fn), orion_function_mil(p, fn), text, &ws->inputs,
                                  &mil, why, len)) {
    sb_free(&mil);
    return false;
  }
  ws->mil = mil.data;
  ws->mil_len = mil.len;
  uint32_t nin = orion_input_count(p, fn), nw = ws->inputs.n, nout = orion_output_count(p, fn);
  ws->first = nin;
  ws->weight = xcalloc(nw + 1, sizeof *ws->weight);
  bool ok = true;
  for (uint32_t i = 0; ok && i < nw; i++) {
    ws->weight[i] = UINT32_MAX;
    for (uint32_t k = 0; k < orion_weight_count(p, fn); k++)
      if (orion_weight(p, fn, k)->stmt == ws->inputs.w[i].stmt) ws->weight[i] = k;
    if (ws->weight[i] == UINT32_MAX) {
      snprintf(why, len, "the ane backend finds no weight '%s' of function '%s' to bind as an input",
               ws->inputs.w[i].name, orion_function_name(p, fn));
      ok = false;
    }
  }
  /* The function's inputs and the weights, bound together in ASCII order of MIL names. */
  OrionTensorInfo *info = xcalloc(nin + nw + 1, sizeof *info);
  const OrionTensorInfo **in = xcalloc(nin + nw + 1, sizeof *in), **sorted = xcalloc(nin + nw + 1, sizeof *sorted);
  const OrionTensorInfo **out = xcalloc(nout + 1, sizeof *out);
  for (uint32_t i = 0; i < nin; i++) info[i] = *orion_input(p, fn, i);
  for (uint32_t i = 0; i < nw; i++) {
    const AneWeightInput *w = &ws->inputs.w[i];
    info[nin + i] = (OrionTensorInfo){.name = w->name, .mil_name = w->input, .dtype = w->type.dtype,
                                      .rank = w->type.rank, .bytes = w->bytes};
    memcpy(info[nin + i].dims, w->type.dims, sizeof info[nin + i].dims);
  }
  for (uint32_t i = 0; i < nin + nw; i++) in[i] = sorted[i] = &info[i];
  qsort(sorted, nin + nw, sizeof *sorted, by_mil_name);
  for (uint32_t k = 0; k < nin + nw; k++) info[sorted[k] - info].binding = k;
  for (uint32_t i = 0; i < nout; i++) out[i] = orion_output(p, fn, i);
  ok = ok && ane_surface_plan(plan, in, nin + nw, out, nout, min_surface_bytes, why, len);
  free(info);
  free(in);
  free(sorted);
  free(out);
  if (!ok) ane_weight_surfaces_free(ws);
  return ok;
}

bool ane_weight_surfaces_write(const AneWeightSurfaces *ws, const AneSurfacePlan *plan, const AneSystem *sys,
                               const AneRequest *r, const OrionProgram *p, uint32_t fn, char *why, size_t len) {
  for (uint32_t i = 0; i < ws->inputs.n; i++) {
    const OrionWeight *w = orion_weight(p, fn, ws->weight[i]);
    uint64_t elements = w->size / (w->dtype == MIL_DT_FP32 ? 4 : 2);
    OrionTensor t = {.dtype = w->dtype, .rank = 1, .dims = {(int64_t)elements}, .data = (void *)(uintptr_t)w->data};
    IOSurfaceRef s = r->inputs[plan->input_slot[ws->first + i]];
    if (sys->lock(s, 0, NULL) != 0) {
      snprintf(why, len, "the ane backend cannot lock the surface of weight '%s'", w->name);
      return false;
    }
    void *base = sys->base_address(s);
    if (base) ane_surface_pack(base, plan->surface_bytes, &t);
    if (sys->unlock(s, 0, NULL) != 0 || !base) {
      snprintf(why, len, "the ane backend cannot write the surface of weight '%s'", w->name);
      return false;
    }
  }
  return true;
}

void ane_weight_surfaces_free(AneWeightSurfaces *ws) {
  ane_weight_inputs_free(&ws->inputs);
  free(ws->weight);
  free(ws->mil);
  *ws = (AneWeightSurfaces){0};
}
