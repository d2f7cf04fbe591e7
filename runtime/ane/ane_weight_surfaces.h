/*
 * The ane backend's side of the `inputs` weight-update strategy: a prepared
 * function compiled with its weights as inputs (ane_weight_inputs.h) has a
 * surface per weight after its own inputs, in the same request, bound in
 * ASCII order of MIL names with them and of the one allocation size
 * (ane_surfaces.h: a weight's size is its own fp16 bytes, so the largest
 * weight may set every surface's size). An update writes the program's
 * current weight bytes into those surfaces: no compile, no unload; the next
 * evaluation reads them.
 */
#ifndef ORION_ANE_WEIGHT_SURFACES_H
#define ORION_ANE_WEIGHT_SURFACES_H

#include "ane_iosurface.h"
#include "ane_model.h"
#include "ane_surfaces.h"
#include "ane_weight_inputs.h"
#include "orion/runtime.h"

typedef struct AneWeightSurfaces {
  AneWeightInputs inputs;
  uint32_t *weight; /* orion_weight index of each input */
  uint32_t first;   /* plan input index of the first weight: the function's own inputs come before */
  char *mil;        /* the function as MIL with its weights as inputs */
  size_t mil_len;
} AneWeightSurfaces;

/* Function fn of p (MIL text `text`, as it was read) with its weights as
 * inputs: the MIL and a surface plan over its inputs, then the weights, and
 * its outputs (min_surface_bytes as ane_surface_plan). False, with why, when
 * a weight cannot be an input or the plan refuses: the caller compiles the
 * function with its weights as consts instead. */
bool ane_weight_surfaces_plan(AneWeightSurfaces *ws, AneSurfacePlan *plan, const OrionProgram *p, uint32_t fn,
                              const char *text, uint64_t min_surface_bytes, char *why, size_t len);
/* Writes the program's weights as they are now into their surfaces of r. */
bool ane_weight_surfaces_write(const AneWeightSurfaces *ws, const AneSurfacePlan *plan, const AneSystem *sys,
                               const AneRequest *r, const OrionProgram *p, uint32_t fn, char *why, size_t len);
void ane_weight_surfaces_free(AneWeightSurfaces *ws);

#endif
