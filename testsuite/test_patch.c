/*
 * Delta patching through the library (orion/patch.h) with tensors from
 * memory, the journal's integrity check, and orion_reload_weights: a loaded
 * program sees the new weight bytes after a reload, without re-reading its
 * MIL, and refuses a reload when the package was recompiled.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"
#include "orion/patch.h"
#include "orion/runtime.h"
#include "orion/hash.h"

static const char *const program =
    "func main(x: fp16[1,64]) {\n"
    "  param w: fp16[4,64] = fill(0.5);\n"
    "  param b: fp16[4] = zeros;\n"
    "  h = linear(x, w, b);\n"
    "  return h;\n"
    "}\n";

/* The same weights, another graph: a recompile. */
static const char *const program2 =
    "func main(x: fp16[1,64]) {\n"
    "  param w: fp16[4,64] = fill(0.5);\n"
    "  param b: fp16[4] = zeros;\n"
    "  h = linear(x, w, b);\n"
    "  r = relu(h);\n"
    "  return r;\n"
    "}\n";

static char dir[64], pkg[160];

static void compile_with(const char *text) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, pkg, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

static void setup(void) {
  test_dir_make(dir, sizeof dir, "patch");
  snprintf(pkg, sizeof pkg, "%s/m.anepkg", dir);
  compile_with(program);
}

static void teardown(void) { remove_tree(dir); }

static PatchTensor f32_tensor(const char *name, const float *v, uint32_t rank, int64_t d0, int64_t d1) {
  PatchTensor t = {.name = name, .origin = "memory", .dtype = ORION_DT_FP32, .rank = rank, .data = v};
  t.dims[0] = d0;
  t.dims[1] = d1;
  t.nbytes = (uint64_t)(d0 * (rank > 1 ? d1 : 1)) * 4;
  return t;
}

/* The fp16 values of the weight named `name` in the loaded program. */
static const uint16_t *weight_data(OrionProgram *p, const char *name) {
  for (uint32_t i = 0; i < orion_weight_count(p, 0); i++)
    if (!strcmp(orion_weight(p, 0, i)->name, name)) return orion_weight(p, 0, i)->data;
  cr_assert_fail("no weight %s", name);
  return NULL;
}

Test(patch, from_memory_then_reload, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  cr_assert_eq(orion_weights_generation(p), 0);
  cr_assert_eq(weight_data(p, "b")[3], 0);

  const float b[4] = {1, 2, 3, -0.5f};
  PatchTensor t = f32_tensor("b", b, 1, 4, 0);
  PatchStats st;
  PatchOptions po = {.stats = &st};
  cr_assert(package_patch(pkg, &t, 1, &po, &c.d), "%s", c.text.data);
  cr_assert_eq(st.regions, 1);
  cr_assert_eq(st.bytes_changed, 8);
  cr_assert_eq(st.generation, 1);
  cr_assert_not(st.shadow);

  bool changed = false;
  cr_assert(orion_reload_weights(p, NULL, &changed, &c.d), "%s", c.text.data);
  cr_assert(changed);
  cr_assert_eq(orion_weights_generation(p), 1);
  const uint16_t *nb = weight_data(p, "b");
  cr_assert_eq(nb[0], 0x3C00);
  cr_assert_eq(nb[1], 0x4000);
  cr_assert_eq(nb[2], 0x4200);
  cr_assert_eq(nb[3], 0xB800);
  /* w is untouched: 0.5 everywhere. */
  cr_assert_eq(weight_data(p, "w")[255], 0x3800);

  /* Nothing new: no reload. */
  cr_assert(orion_reload_weights(p, NULL, &changed, &c.d));
  cr_assert_not(changed);

  /* Most of the file changed: the shadow copy path, same result for the reader. */
  float w[256];
  for (int i = 0; i < 256; i++) w[i] = (float)i / 4;
  PatchTensor tw = f32_tensor("w", w, 2, 4, 64);
  cr_assert(package_patch(pkg, &tw, 1, &po, &c.d), "%s", c.text.data);
  cr_assert(st.shadow);
  cr_assert(orion_reload_weights(p, NULL, &changed, &c.d), "%s", c.text.data);
  cr_assert(changed);
  cr_assert_eq(weight_data(p, "w")[5], fp16_from_float(1.25f));
  cr_assert_eq(weight_data(p, "b")[1], 0x4000);
  orion_close(p);
  capture_free(&c);
}

Test(patch, reload_refuses_a_recompiled_package, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  /* Recompiled with another program, then patched so that the generation moves. */
  compile_with(program2);
  const float b[4] = {1, 1, 1, 1};
  PatchTensor t = f32_tensor("b", b, 1, 4, 0);
  cr_assert(package_patch(pkg, &t, 1, NULL, &c.d), "%s", c.text.data);
  bool changed = true;
  cr_assert_not(orion_reload_weights(p, NULL, &changed, &c.d));
  cr_assert_not(changed);
  cr_assert(strstr(c.text.data, "its MIL changed, not only its weights (recompiled? open it again)"), "%s", c.text.data);
  /* The program still holds its old weights. */
  cr_assert_eq(weight_data(p, "w")[0], 0x3800);
  orion_close(p);
  capture_free(&c);
}

Test(patch, errors_name_the_tensor_and_write_nothing, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  char *before;
  size_t blen;
  const char *err;
  char wpath[256];
  snprintf(wpath, sizeof wpath, "%s/weights/weight.bin", pkg);
  cr_assert(read_file(wpath, 1u << 20, &before, &blen, &err));
  const float bad[4] = {1, 2, 1e6f, 4};
  PatchTensor t = f32_tensor("b", bad, 1, 4, 0);
  cr_assert_not(package_patch(pkg, &t, 1, NULL, &c.d));
  cr_assert_str_eq(c.text.data, "test: error: memory: weight 'b' has the value 1000000 at index 2, beyond fp16's range "
                                "(largest is 65504; --clamp-fp16 clamps)\n");
  char *after;
  size_t alen;
  cr_assert(read_file(wpath, 1u << 20, &after, &alen, &err));
  cr_assert_eq(alen, blen);
  cr_assert_eq(memcmp(before, after, blen), 0);
  free(before);
  free(after);
  capture_free(&c);
}

Test(patch, journal_integrity) {
  /* A minimal valid journal: header, empty manifest, no regions, checksum. */
  uint8_t j[48] = "ORIONJ01";
  j[8] = 1; /* generation */
  cr_assert_not(patch_journal_valid(j, sizeof j)); /* no checksum yet */
  uint64_t h = XXH64(j, 40, 0);
  for (int i = 0; i < 8; i++) j[40 + i] = (uint8_t)(h >> (8 * i));
  cr_assert(patch_journal_valid(j, sizeof j));
  j[8] = 2; /* any change breaks the checksum */
  cr_assert_not(patch_journal_valid(j, sizeof j));
  cr_assert_not(patch_journal_valid(j, 7));
}

Test(program_cache, hits_by_content_and_evicts_the_least_recently_used, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  /* Three packages: pkg, a copy of it under another path (same content), and two others. */
  char copy[160], other[160], third[160], cmd[512];
  snprintf(copy, sizeof copy, "%s/copy.anepkg", dir);
  snprintf(other, sizeof other, "%s/other.anepkg", dir);
  snprintf(third, sizeof third, "%s/third.anepkg", dir);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", pkg, copy);
  cr_assert_eq(system(cmd), 0);
  char saved[160];
  memcpy(saved, pkg, sizeof saved);
  snprintf(pkg, sizeof pkg, "%s", other);
  compile_with(program2);
  snprintf(pkg, sizeof pkg, "%s", third);
  compile_with("func main(x: fp16[1,4]) {\n  y = relu(x);\n  return y;\n}\n");
  memcpy(pkg, saved, sizeof saved);

  OrionProgramCache *cache = orion_program_cache_new(2);
  OrionProgram *a = orion_program_cache_acquire(cache, pkg, NULL, &c.d);
  cr_assert_not_null(a, "%s", c.text.data);
  OrionProgram *a2 = orion_program_cache_acquire(cache, copy, NULL, &c.d);
  cr_assert_eq(a2, a, "the same content under another path is the same program");
  orion_program_cache_release(cache, a);
  orion_program_cache_release(cache, a2);
  OrionProgram *b = orion_program_cache_acquire(cache, other, NULL, &c.d);
  cr_assert_not_null(b, "%s", c.text.data);
  cr_assert_neq(b, a);
  /* Full, and b is held: the third program evicts a, the least recently used free one. */
  OrionProgram *t = orion_program_cache_acquire(cache, third, NULL, &c.d);
  cr_assert_not_null(t, "%s", c.text.data);
  OrionProgramCacheStats s = orion_program_cache_stats(cache);
  cr_assert_eq(s.hits, 1);
  cr_assert_eq(s.misses, 3);
  cr_assert_eq(s.evictions, 1);
  cr_assert_eq(s.resident, 2);
  /* Both resident programs are held: nothing can be loaded. */
  cr_assert_null(orion_program_cache_acquire(cache, pkg, NULL, &c.d));
  cr_assert(strstr(c.text.data, "all 2 resident programs are in use"), "%s", c.text.data);
  /* A patched package is another program. */
  orion_program_cache_release(cache, t);
  const float bias[4] = {1, 1, 1, 1};
  PatchTensor pt = f32_tensor("b", bias, 1, 4, 0);
  cr_assert(package_patch(other, &pt, 1, NULL, &c.d), "%s", c.text.data);
  OrionProgram *b2 = orion_program_cache_acquire(cache, other, NULL, &c.d);
  cr_assert_not_null(b2, "%s", c.text.data);
  cr_assert_neq(b2, b);
  orion_program_cache_free(cache);
  capture_free(&c);
}

/* h = x W^T + b, run on the CPU backend. */
static void run_cpu(CpuProgram *cpu, const uint16_t *x, uint16_t *h) {
  Diag d;
  SourceSet s;
  srcset_init(&s);
  diag_init(&d, &s);
  CpuTensor in = {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 64}, .data = (void *)(uintptr_t)x};
  CpuTensor out = {0};
  cr_assert(cpu_run(cpu, &in, &out, &d));
  memcpy(h, out.data, 4 * sizeof *h);
  cpu_tensor_free(&out);
  srcset_free(&s);
}

Test(patch, the_cpu_backend_computes_with_reloaded_weights, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  CpuProgram *cpu = cpu_prepare(p, 0, CPU_NUMERICS_ANE, &c.d);
  cr_assert_not_null(cpu, "%s", c.text.data);
  uint16_t x[64], h[4];
  for (int i = 0; i < 64; i++) x[i] = i == 0 ? 0x4000 : 0; /* x = [2, 0, ...] */
  run_cpu(cpu, x, h);
  cr_assert_eq(h[0], 0x3C00); /* 2 * 0.5 + 0 */
  /* New bias from memory through the package, then reload: 2 * 0.5 + 3 = 4. */
  const float b[4] = {3, 3, 3, 3};
  PatchTensor t = f32_tensor("b", b, 1, 4, 0);
  cr_assert(package_patch(pkg, &t, 1, NULL, &c.d), "%s", c.text.data);
  run_cpu(cpu, x, h);
  cr_assert_eq(h[0], 0x3C00, "the prepared program keeps its weights until reloaded");
  bool changed;
  cr_assert(orion_reload_weights(p, NULL, &changed, &c.d), "%s", c.text.data);
  cr_assert(cpu_reload_weights(cpu, &c.d), "%s", c.text.data);
  run_cpu(cpu, x, h);
  cr_assert_eq(h[0], 0x4400);
  cr_assert_eq(h[3], 0x4400);
  cpu_free(cpu);
  orion_close(p);
  capture_free(&c);
}

/* The finite check reads fp16 four at a time, then the rest one by one: a NaN
 * or an infinity anywhere is found and named. */
Test(patch, non_finite_fp16_found_at_every_position, .init = setup, .fini = teardown) {
  static const int at[] = {0, 1, 2, 3, 4, 5, 127, 252, 254, 255};
  for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
    Capture c;
    capture_init(&c, "test");
    uint16_t w[256];
    for (int k = 0; k < 256; k++) w[k] = 0x3800;
    w[at[i]] = i % 2 ? 0x7C00 : 0xFE01; /* +inf, or a NaN */
    PatchTensor t = {.name = "w", .origin = "memory", .dtype = ORION_DT_FP16, .rank = 2, .dims = {4, 64}, .data = w,
                     .nbytes = sizeof w};
    cr_assert_not(package_patch(pkg, &t, 1, NULL, &c.d));
    char want[160];
    if (i % 2)
      snprintf(want, sizeof want, "test: error: memory: weight 'w' has the value inf at index %d, which fp16 cannot hold\n", at[i]);
    else
      snprintf(want, sizeof want, "test: error: memory: weight 'w' has NaN at index %d\n", at[i]);
    cr_assert_str_eq(c.text.data, want);
    capture_free(&c);
  }
}

/* The strategies for backends that bake weights in are part of the API; this
 * runtime says which it can carry out. */
Test(patch, reload_strategies, .init = setup, .fini = teardown) {
  Capture c;
  capture_init(&c, "test");
  OrionProgram *p = orion_open(pkg, NULL, &c.d);
  cr_assert_not_null(p, "%s", c.text.data);
  const float b[4] = {2, 2, 2, 2};
  PatchTensor t = f32_tensor("b", b, 1, 4, 0);
  cr_assert(package_patch(pkg, &t, 1, NULL, &c.d), "%s", c.text.data);
  bool changed = true;
  OrionOpenOptions inputs = {.verify_checksums = true, .reload = ORION_RELOAD_INPUTS};
  cr_assert(orion_reload_weights(p, &inputs, &changed, &c.d));
  cr_assert_not(changed);
  cr_assert_eq(orion_weights_generation(p), 0, "nothing reloaded");
  OrionOpenOptions files = {.verify_checksums = true, .reload = ORION_RELOAD_RELOAD_FILES};
  cr_assert_not(orion_reload_weights(p, &files, &changed, &c.d));
  cr_assert_str_eq(c.text.data, "test: error: reloading weights by loading the compiled program again needs the ANE "
                                "backend, which runs only on macOS; the CPU backend remaps (ORION_RELOAD_REMAP)\n");
  OrionOpenOptions remap = {.verify_checksums = true, .reload = ORION_RELOAD_REMAP};
  cr_assert(orion_reload_weights(p, &remap, &changed, &c.d));
  cr_assert(changed);
  cr_assert_eq(orion_weights_generation(p), 1);
  cr_assert_eq(weight_data(p, "b")[0], 0x4000);
  orion_close(p);
  capture_free(&c);
}
