/*
 * Values the training contract names that the programs return in parts:
 * split-concat splits a concat returned as an output into an output group
 * (the manifest's OutputGroups), so a saved value of the forward or a
 * gradient of the backward may arrive as several outputs. The loop joins
 * each such group into one buffer after the program runs; the backward input
 * or the optimizer then reads that buffer like any other output's.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"

/* The join of `name` in js, made on first use (the contract may name a
 * group twice); js has room for every group of the function. */
static LoopJoin *join_for(Loop *L, uint32_t fn, const PkgGroup *g, LoopJoins *js) {
  for (uint32_t i = 0; i < js->n; i++)
    if (js->at[i].group == g) return &js->at[i];
  LoopJoin *j = &js->at[js->n++];
  j->group = g;
  j->parts = xcalloc(g->nparts, sizeof *j->parts);
  int64_t extent = 0;
  for (uint32_t k = 0; k < g->nparts; k++) {
    j->parts[k] = loop_output_index(L->prog, fn, g->parts[k]);
    if (j->parts[k] == UINT32_MAX) ice("the manifest reader checked the group's parts");
    extent += orion_output(L->prog, fn, j->parts[k])->dims[g->axis];
  }
  OrionTensorInfo whole = *orion_output(L->prog, fn, j->parts[0]); /* a group has parts (the reader checks) */
  whole.dims[g->axis] = extent; /* the contract check joined the parts' types */
  loop_tensor_alloc(&j->whole, &whole);
  return j;
}

OrionTensor *loop_output_tensor(Loop *L, bool backward, const char *name) {
  uint32_t o = loop_output_index(L->prog, backward ? L->bwd : L->fwd, name);
  if (o != UINT32_MAX) return backward ? &L->bwd_out[o] : &L->fwd_out[o];
  const PkgFunction *f = package_function(&L->pkg, backward ? L->contract->backward : L->contract->forward);
  const PkgGroup *g = f ? package_output_group(f, name) : NULL;
  if (!g) return NULL;
  LoopJoins *js = backward ? &L->bwd_joins : &L->fwd_joins;
  if (!js->at) js->at = xcalloc(f->ngroups, sizeof *js->at);
  return &join_for(L, backward ? L->bwd : L->fwd, g, js)->whole;
}

void loop_join_groups(const LoopJoins *js, const OrionTensor *outputs) {
  for (uint32_t i = 0; i < js->n; i++) {
    const LoopJoin *j = &js->at[i];
    const OrionTensor *w = &j->whole;
    uint32_t axis = j->group->axis;
    size_t inner = orion_tensor_dtype_size(w->dtype), outer = 1;
    for (uint32_t r = 0; r < w->rank; r++) {
      if (r < axis) outer *= (size_t)w->dims[r];
      if (r > axis) inner *= (size_t)w->dims[r];
    }
    uint8_t *dst = w->data;
    for (size_t o = 0; o < outer; o++)
      for (uint32_t k = 0; k < j->group->nparts; k++) {
        const OrionTensor *t = &outputs[j->parts[k]];
        size_t row = (size_t)t->dims[axis] * inner;
        memcpy(dst, (const uint8_t *)t->data + o * row, row);
        dst += row;
      }
  }
}

void loop_joins_free(LoopJoins *js) {
  for (uint32_t i = 0; i < js->n; i++) {
    free(js->at[i].parts);
    free(js->at[i].whole.data);
  }
  free(js->at);
  *js = (LoopJoins){0};
}
