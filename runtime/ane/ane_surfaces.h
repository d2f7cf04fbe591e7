/*
 * The ane backend's surfaces for one function: which surface each of the
 * caller's tensors goes to, how big every surface is, and the fp32<->fp16
 * copy at the boundary. The device binds inputs and outputs (each apart) by
 * the manifest's binding index (ASCII order of MIL names, not declared
 * order), needs every surface of a request to have the same allocation
 * size, none below the minimum, and reads fp16 packed channel-first with no
 * stride (peers.md §4.5) — for the [1, C, 1, S] tensors it takes, the
 * row-major order of the tensor itself.
 */
#ifndef ORION_ANE_SURFACES_H
#define ORION_ANE_SURFACES_H

#include "orion/backend.h"

typedef struct AneSurfacePlan {
  uint32_t ninputs, noutputs;
  uint32_t *input_slot;  /* input i (orion_input order) is bound at surface input_slot[i] */
  uint32_t *output_slot; /* likewise for outputs */
  uint64_t surface_bytes; /* every surface's allocation: the largest of the sizes and the minimum */
} AneSurfacePlan;

/* Plans the surfaces of a function whose inputs and outputs are in[0..nin)
 * and out[0..nout) (orion_input/orion_output order). A tensor's size is its
 * manifest surface size, or (a bare model directory has no manifest, e.g.
 * orion-run probe's programs) its own fp16 bytes; every surface gets the
 * largest size, at least min_surface_bytes (0: no padding, which the probe
 * asks for to measure the device's minimum). Refuses, writing into why a
 * clause that names the ane backend and the tensor, a tensor that is
 * neither fp16 nor fp32, of unknown shape, larger in fp16 than its
 * manifest surface, or bindings that are not each of 0..n-1 once. */
bool ane_surface_plan(AneSurfacePlan *plan, const OrionTensorInfo *const *in, uint32_t nin,
                      const OrionTensorInfo *const *out, uint32_t nout, uint64_t min_surface_bytes, char *why,
                      size_t len);
void ane_surface_plan_free(AneSurfacePlan *plan);

/* Copies tensor t (fp16 or fp32, as planned) into a surface of
 * surface_bytes as fp16, zeroing the rest: a reused surface keeps nothing of
 * the previous run. */
void ane_surface_pack(void *surface, uint64_t surface_bytes, const OrionTensor *t);
/* Copies the surface's fp16 values into t (fp16, or converted to fp32). */
void ane_surface_unpack(const void *surface, const OrionTensor *t);

#endif
