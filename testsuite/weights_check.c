/* What the weight materialization tests share (test_weights_data.c, test_weights_files.c). */
#include "weights_check.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TempDir tmp;

void tmp_setup(void) {
  strcpy(tmp.path, "/tmp/orion-wdata-XXXXXX");
  cr_assert_not_null(mkdtemp(tmp.path));
}

void tmp_teardown(void) {
  DIR *dir = opendir(tmp.path);
  if (!dir) return;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmp.path, e->d_name);
    remove(p);
  }
  closedir(dir);
  rmdir(tmp.path);
}

static void put_le(uint8_t *p, uint64_t v, int nbytes) {
  for (int i = 0; i < nbytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void write_bytes(const char *name, const void *a, size_t alen, const void *b, size_t blen) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", tmp.path, name);
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(a, 1, alen, f), alen);
  if (blen) cr_assert_eq(fwrite(b, 1, blen, f), blen);
  cr_assert_eq(fclose(f), 0);
}

/* A safetensors file holding one tensor `key` of the given dtype and shape
 * (a JSON list such as "[2,3]"). The header is padded with spaces so that
 * the data starts `misalign` bytes past a multiple of 8. */
void write_safetensors(const char *name, const char *key, const char *dtype, const char *shape,
                              const void *data, size_t nbytes, size_t misalign) {
  char json[512];
  int jlen = snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[0,%zu]}}", key,
                      dtype, shape, nbytes);
  cr_assert(jlen > 0 && (size_t)jlen < sizeof json - 16);
  size_t hlen = (size_t)jlen;
  while ((8 + hlen) % 8 != misalign) json[hlen++] = ' ';
  uint8_t *head = malloc(8 + hlen);
  cr_assert_not_null(head);
  put_le(head, hlen, 8);
  memcpy(head + 8, json, hlen);
  write_bytes(name, head, 8 + hlen, data, nbytes);
  free(head);
}

/* A version 1.0 .npy file with the data starting at a multiple of 64. */
void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t nbytes) {
  char dict[256];
  int dlen = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  cr_assert(dlen > 0 && (size_t)dlen < sizeof dict);
  size_t hlen = (size_t)dlen + 1;
  hlen += (64 - (10 + hlen) % 64) % 64;
  uint8_t *head = malloc(10 + hlen);
  cr_assert_not_null(head);
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  put_le(head + 8, hlen, 2);
  memcpy(head + 10, dict, (size_t)dlen);
  memset(head + 10 + dlen, ' ', hlen - (size_t)dlen - 1);
  head[10 + hlen - 1] = '\n';
  write_bytes(name, head, 10 + hlen, data, nbytes);
  free(head);
}

/* ---- modules ---------------------------------------------------------------- */

void run_begin(Run *r) {
  r->m = ir_module_new();
  r->m->base_dir = tmp.path;
  r->f = ir_func_new(r->m, "main", (SrcSpan){0});
  sb_init(&r->cap);
  diag_init(&r->d, NULL);
  r->d.capture = &r->cap;
}

void run_end(Run *r) {
  ir_module_free(r->m);
  sb_free(&r->cap);
}

const char *diags(const Run *r) { return r->cap.data ? r->cap.data : ""; }

IrValueId add_param(Run *r, IrDType dt, uint8_t rank, const int64_t *dims, IrParamSource src) {
  IrType t = {.dtype = dt, .rank = rank};
  for (uint8_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  return ir_param_new(r->m, r->f, "w", &t, &src, (SrcSpan){0});
}

IrValueId add_vector(Run *r, IrDType dt, int64_t n, IrParamSource src) { return add_param(r, dt, 1, &n, src); }

/* Materializes and expects success with `expected_bytes` bytes and the given
 * diagnostics ("" for none). */
void *load_ok(Run *r, IrValueId v, bool clamp, size_t expected_bytes, const char *expected_diags) {
  WeightLoadOptions opt = {.clamp_fp16 = clamp};
  size_t nbytes = 12345;
  void *data = weights_materialize(r->m, v, &opt, &r->d, &nbytes);
  cr_assert_not_null(data, "failed: %s", diags(r));
  cr_assert_eq(nbytes, expected_bytes);
  cr_assert_str_eq(diags(r), expected_diags);
  return data;
}

/* Materializes and expects failure with exactly these diagnostics. */
void load_fails(Run *r, IrValueId v, bool clamp, const char *expected_diags) {
  WeightLoadOptions opt = {.clamp_fp16 = clamp};
  size_t nbytes = 12345;
  void *data = weights_materialize(r->m, v, &opt, &r->d, &nbytes);
  cr_assert_null(data);
  cr_assert_str_eq(diags(r), expected_diags);
  cr_assert(r->d.nerrors > 0);
}

uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
