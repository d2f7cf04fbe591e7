/*
 * Which weights share a blob (orion/weights.h, weights_identity): one
 * weight read twice (the same safetensors file and key, however its path is
 * spelled; the same param of two entries) and equal constants are stored
 * once; params that merely start equal (two `ones`, a tensor of another key
 * with the same bytes, a param equal to a const) get a blob each, so that a
 * weight update can give them different values. --no-dedup shares nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/compile.h"
#include "orion/manifest.h"

static char dir[64];

static void make_dir(void) { test_dir_make(dir, sizeof dir, "dedup"); }

static void cleanup(void) { test_dir_remove(dir); }

TestSuite(dedup, .init = make_dir, .fini = cleanup);

/* dir/w.safetensors: tensors t and u, both fp16[12] of 0.5 (the same bytes). */
static void write_safetensors(void) {
  static const char header[] = "{\"t\":{\"dtype\":\"F16\",\"shape\":[12],\"data_offsets\":[0,24]},"
                               "\"u\":{\"dtype\":\"F16\",\"shape\":[12],\"data_offsets\":[24,48]}}";
  char path[128];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  uint64_t n = sizeof header - 1;
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(n >> (8 * i));
  fwrite(len, 1, sizeof len, f);
  fwrite(header, 1, n, f);
  for (int i = 0; i < 24; i++) fwrite("\x00\x38", 1, 2, f); /* fp16 0.5, little-endian */
  cr_assert_eq(fclose(f), 0);
}

/* Compiles text (each "DIR" replaced by dir) into dir/m.anepkg and reads its manifest. */
static void compile(const char *text, bool no_dedup, Package *pkg) {
  char src[4096], *o = src;
  for (const char *p = text; *p;) {
    if (!strncmp(p, "DIR", 3)) {
      o += snprintf(o, (size_t)(src + sizeof src - o), "%s", dir);
      p += 3;
    } else {
      *o++ = *p++;
    }
  }
  *o = 0;
  char out[128];
  snprintf(out, sizeof out, "%s/m.anepkg", dir);
  OrionCompileOptions opt;
  orion_compile_options_init(&opt);
  opt.no_dedup = no_dedup;
  Diag d;
  StrBuf msgs;
  diag_init(&d, NULL);
  sb_init(&msgs);
  d.capture = &msgs;
  OrionCompileResult r;
  cr_assert(orion_compile_text("t.oir", src, strlen(src), &opt, out, &r, &d), "%s", msgs.data ? msgs.data : "");
  orion_compile_result_free(&r);
  cr_assert(package_read(out, pkg, &d), "%s", msgs.data ? msgs.data : "");
  cr_assert(package_verify(pkg, &d), "%s", msgs.data ? msgs.data : "");
  sb_free(&msgs);
}

/* The blob offset of weight `name` of function `fn`. */
static uint64_t offset_of(const Package *pkg, const char *fn, const char *name) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++) {
    if (strcmp(pkg->functions[i].name, fn)) continue;
    for (uint32_t k = 0; k < pkg->functions[i].nweights; k++)
      if (!strcmp(pkg->functions[i].weights[k].name, name)) return pkg->functions[i].weights[k].offset;
  }
  cr_assert_fail("no weight '%s' in '%s'", name, fn);
  return 0;
}

/* The number of blobs in the package's weight file (its header's count). */
static uint32_t blob_count(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg/weights/weight.bin", dir);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  uint8_t b[4];
  cr_assert_eq(fread(b, 1, 4, f), 4);
  fclose(f);
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static const char *const model =
    "func main(x: fp16[1,12]) {\n"
    "  param g1: fp16[12] = ones;\n"
    "  param g2: fp16[12] = ones;\n"
    "  param t1: fp16[12] = safetensors(\"DIR/w.safetensors\", \"t\");\n"
    "  param t2: fp16[12] = safetensors(\"DIR/./w.safetensors\", \"t\");\n"
    "  param u: fp16[12] = safetensors(\"DIR/w.safetensors\", \"u\");\n"
    "  param h: fp16[12] = fill(0.5);\n"
    "  const k1: fp16[12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];\n"
    "  const k2: fp16[12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];\n"
    "  const one: fp16[12] = 1;\n"
    "  a = mul(x, g1);\n"
    "  b = mul(a, g2);\n"
    "  c = add(b, t1);\n"
    "  d = add(c, t2);\n"
    "  e = add(d, u);\n"
    "  f = add(e, h);\n"
    "  i = add(f, k1);\n"
    "  j = mul(i, k2);\n"
    "  l = sub(j, one);\n"
    "  return l;\n"
    "}\n";

Test(dedup, params_that_start_equal_get_a_blob_each) {
  write_safetensors();
  Package pkg;
  compile(model, false, &pkg);
  cr_assert_neq(offset_of(&pkg, "main", "g1"), offset_of(&pkg, "main", "g2"), "two `ones` params share a blob");
  cr_assert_neq(offset_of(&pkg, "main", "t1"), offset_of(&pkg, "main", "u"), "another key with equal bytes shares");
  cr_assert_neq(offset_of(&pkg, "main", "t1"), offset_of(&pkg, "main", "h"), "a fill(0.5) shares with a file tensor");
  cr_assert_neq(offset_of(&pkg, "main", "g1"), offset_of(&pkg, "main", "one"), "a param shares with a const");
  package_free(&pkg);
}

Test(dedup, one_source_tensor_is_one_blob) {
  write_safetensors();
  Package pkg;
  compile(model, false, &pkg);
  /* The same file (spelled two ways) and key: tied, one blob. */
  cr_assert_eq(offset_of(&pkg, "main", "t1"), offset_of(&pkg, "main", "t2"));
  /* Equal consts are one constant. */
  cr_assert_eq(offset_of(&pkg, "main", "k1"), offset_of(&pkg, "main", "k2"));
  /* g1 g2 t u h, k one: 7 blobs for 9 weights. */
  cr_assert_eq(blob_count(), 7);
  package_free(&pkg);
}

Test(dedup, no_dedup_shares_nothing) {
  write_safetensors();
  Package pkg;
  compile(model, true, &pkg);
  cr_assert_neq(offset_of(&pkg, "main", "t1"), offset_of(&pkg, "main", "t2"));
  cr_assert_neq(offset_of(&pkg, "main", "k1"), offset_of(&pkg, "main", "k2"));
  cr_assert_eq(blob_count(), 9);
  package_free(&pkg);
}

/* Two entries instantiating one block get params of the same name: the
 * same weights (docs/language.md), stored once; another param of the same
 * initializer is not. */
Test(dedup, the_same_param_of_two_entries_is_one_blob) {
  static const char *const entries =
      "func first(x: fp16[1,12]) {\n"
      "  param w: fp16[12] = ones;\n"
      "  y = mul(x, w);\n"
      "  return y;\n"
      "}\n"
      "func second(x: fp16[1,12]) {\n"
      "  param w: fp16[12] = ones;\n"
      "  param v: fp16[12] = ones;\n"
      "  y = mul(x, w);\n"
      "  z = mul(y, v);\n"
      "  return z;\n"
      "}\n";
  Package pkg;
  compile(entries, false, &pkg);
  cr_assert_eq(offset_of(&pkg, "first", "w"), offset_of(&pkg, "second", "w"));
  cr_assert_neq(offset_of(&pkg, "second", "w"), offset_of(&pkg, "second", "v"));
  cr_assert_eq(blob_count(), 2);
  package_free(&pkg);
  compile(entries, true, &pkg);
  cr_assert_neq(offset_of(&pkg, "first", "w"), offset_of(&pkg, "second", "w"));
  cr_assert_eq(blob_count(), 3);
  package_free(&pkg);
}
