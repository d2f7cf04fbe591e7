/*
 * The ane backend's surface plan and boundary copies (runtime/ane/
 * ane_surfaces.h): slots from the manifest's bindings (not declared order),
 * one uniform size no smaller than the minimum, the exact refusals, and
 * fp32 -> fp16 -> fp32 through a reused surface whose padding is zeroed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "ane_surfaces.h"
#include "orion/fp16.h"

static OrionTensorInfo fp16_tensor(const char *name, uint32_t binding, int64_t c, int64_t s, uint64_t surface) {
  return (OrionTensorInfo){.name = name, .mil_name = name, .dtype = MIL_DT_FP16, .rank = 4,
                           .dims = {1, c, 1, s}, .binding = binding, .bytes = (uint64_t)(c * s * 2),
                           .surface_bytes = surface};
}

Test(plan, slots_follow_the_bindings_and_every_surface_gets_the_largest_size) {
  /* Declared x then mask; in ASCII order of MIL names mask binds first. */
  OrionTensorInfo x = fp16_tensor("x", 1, 768, 32, 49152), mask = fp16_tensor("mask", 0, 256, 32, 16384);
  OrionTensorInfo y = fp16_tensor("y", 0, 768, 32, 49152);
  const OrionTensorInfo *in[] = {&x, &mask}, *out[] = {&y};
  AneSurfacePlan plan;
  char why[512] = "";
  cr_assert(ane_surface_plan(&plan, in, 2, out, 1, 16384, why, sizeof why), "%s", why);
  cr_assert_eq(plan.ninputs, 2);
  cr_assert_eq(plan.noutputs, 1);
  cr_assert_eq(plan.input_slot[0], 1);
  cr_assert_eq(plan.input_slot[1], 0);
  cr_assert_eq(plan.output_slot[0], 0);
  cr_assert_eq(plan.surface_bytes, 49152);
  ane_surface_plan_free(&plan);
  cr_assert_null(plan.input_slot);
}

Test(plan, the_minimum_surface_wins_over_smaller_manifest_sizes) {
  OrionTensorInfo x = fp16_tensor("x", 0, 64, 16, 2048), y = fp16_tensor("y", 0, 64, 16, 2048);
  const OrionTensorInfo *in[] = {&x}, *out[] = {&y};
  AneSurfacePlan plan;
  char why[512] = "";
  cr_assert(ane_surface_plan(&plan, in, 1, out, 1, 49152, why, sizeof why), "%s", why);
  cr_assert_eq(plan.surface_bytes, 49152);
  ane_surface_plan_free(&plan);
}

/* A bare model directory's tensors (no manifest size): their own fp16
 * bytes, the largest for every surface, padded to the minimum unless it is 0. */
Test(plan, without_a_manifest_size_a_surface_is_the_tensors_own_bytes) {
  OrionTensorInfo a = fp16_tensor("a", 0, 64, 32, 0), b = fp16_tensor("b", 1, 128, 32, 0);
  OrionTensorInfo y = fp16_tensor("y", 0, 64, 32, 0);
  const OrionTensorInfo *in[] = {&a, &b}, *out[] = {&y};
  AneSurfacePlan plan;
  char why[512] = "";
  cr_assert(ane_surface_plan(&plan, in, 2, out, 1, 0, why, sizeof why), "%s", why);
  cr_assert_eq(plan.surface_bytes, 8192, "b's 128 x 32 fp16, for every surface");
  ane_surface_plan_free(&plan);
  cr_assert(ane_surface_plan(&plan, in, 1, out, 1, 0, why, sizeof why), "%s", why);
  cr_assert_eq(plan.surface_bytes, 4096);
  ane_surface_plan_free(&plan);
  cr_assert(ane_surface_plan(&plan, in, 2, out, 1, 49152, why, sizeof why), "%s", why);
  cr_assert_eq(plan.surface_bytes, 49152, "padded to the minimum");
  ane_surface_plan_free(&plan);
}

static void refused(const OrionTensorInfo *x, const OrionTensorInfo *x2, const char *want) {
  OrionTensorInfo y = fp16_tensor("y", 0, 64, 16, 2048);
  const OrionTensorInfo *in[] = {x, x2}, *out[] = {&y};
  AneSurfacePlan plan;
  char why[512] = "";
  cr_assert_not(ane_surface_plan(&plan, in, x2 ? 2 : 1, out, 1, 16384, why, sizeof why));
  cr_assert_str_eq(why, want);
  cr_assert_null(plan.input_slot);
}

Test(plan, refusals_name_the_tensor) {
  OrionTensorInfo a = fp16_tensor("a", 0, 64, 16, 2048), b = fp16_tensor("b", 0, 64, 16, 2048);
  refused(&a, &b, "the ane backend cannot bind input 'b': binding 0 is taken twice");
  b.binding = 2;
  refused(&a, &b, "the ane backend cannot bind input 'b': binding 2 is out of range");
  a.surface_bytes = 1024;
  refused(&a, NULL, "the ane backend cannot bind input 'a': 2048 bytes of fp16 do not fit its 1024-byte surface");
  a.surface_bytes = 2048;
  a.dims[3] = -1;
  refused(&a, NULL, "the ane backend cannot bind input 'a': its shape is not known");
  a.dims[3] = 16;
  a.dtype = MIL_DT_INT32;
  refused(&a, NULL,
          "the ane backend cannot bind input 'a': the device's surfaces hold fp16 (or fp32 converted at the "
          "boundary), not int32");
}

Test(copy, fp32_goes_in_as_fp16_with_the_padding_zeroed_and_comes_back) {
  float values[6] = {1.0f, -2.5f, 0.1f, 65504.0f, 70000.0f, 3.0e-8f};
  OrionTensor t = {.dtype = MIL_DT_FP32, .rank = 4, .dims = {1, 3, 1, 2}, .data = values};
  uint16_t surface[16];
  memset(surface, 0xff, sizeof surface); /* a reused surface: the last run's bytes */
  ane_surface_pack(surface, sizeof surface, &t);
  for (int i = 0; i < 6; i++) cr_assert_eq(surface[i], fp16_from_float(values[i]), "element %d", i);
  cr_assert_eq(surface[4], 0x7c00); /* past fp16's range: +inf, as the device rounds */
  for (int i = 6; i < 16; i++) cr_assert_eq(surface[i], 0, "padding %d", i);
  float back[6];
  OrionTensor r = t;
  r.data = back;
  ane_surface_unpack(surface, &r);
  for (int i = 0; i < 6; i++) cr_assert_eq(back[i], fp16_to_float(surface[i]), "element %d", i);
  cr_assert_eq(back[1], -2.5f);
}

Test(copy, fp16_is_copied_bit_for_bit) {
  uint16_t values[4] = {0x3c00, 0x7e00, 0x8001, 0xfbff};
  OrionTensor t = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {2, 2}, .data = values};
  uint16_t surface[8], back[4];
  ane_surface_pack(surface, sizeof surface, &t);
  cr_assert_eq(memcmp(surface, values, sizeof values), 0);
  OrionTensor r = t;
  r.data = back;
  ane_surface_unpack(surface, &r);
  cr_assert_eq(memcmp(back, values, sizeof values), 0);
}
