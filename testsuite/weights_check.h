/*
 * The weight materialization tests' shared helpers (weights_check.c): a
 * scratch directory per test, weight files written byte by byte into it, and
 * modules of one param materialized with exact diagnostics.
 */
#ifndef ORION_TEST_WEIGHTS_CHECK_H
#define ORION_TEST_WEIGHTS_CHECK_H

#include "orion/weights.h"

typedef struct TempDir {
  char path[64];
} TempDir;

/* The running test's directory (tmp_setup ... tmp_teardown). */
extern TempDir tmp;

void tmp_setup(void);
void tmp_teardown(void);
void write_bytes(const char *name, const void *a, size_t alen, const void *b, size_t blen);
/* A safetensors file holding one tensor `key` of the given dtype and shape
 * (a JSON list such as "[2,3]"). The header is padded with spaces so that
 * the data starts `misalign` bytes past a multiple of 8. */
void write_safetensors(const char *name, const char *key, const char *dtype, const char *shape, const void *data,
                       size_t nbytes, size_t misalign);
/* A version 1.0 .npy file with the data starting at a multiple of 64. */
void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t nbytes);

typedef struct Run {
  IrModule *m;
  IrFuncId f;
  StrBuf cap;
  Diag d;
} Run;

void run_begin(Run *r);
void run_end(Run *r);
const char *diags(const Run *r);
IrValueId add_param(Run *r, IrDType dt, uint8_t rank, const int64_t *dims, IrParamSource src);
IrValueId add_vector(Run *r, IrDType dt, int64_t n, IrParamSource src);
/* Materializes and expects success with `expected_bytes` bytes and the given
 * diagnostics ("" for none). */
void *load_ok(Run *r, IrValueId v, bool clamp, size_t expected_bytes, const char *expected_diags);
/* Materializes and expects failure with exactly these diagnostics. */
void load_fails(Run *r, IrValueId v, bool clamp, const char *expected_diags);
uint32_t f32_bits(float f);
float bits_f32(uint32_t u);

#endif
