/*
 * Helpers shared by the weight-file check (weight_check.c) and weight
 * materialization (weights_data.c, weights_random.c, weights_file_data.c),
 * so that both resolve paths the same way and word the same problem the
 * same way. Internal to the backend.
 */
#ifndef ORION_WEIGHTS_INTERNAL_H
#define ORION_WEIGHTS_INTERNAL_H

#include "orion/weights.h"

/* The path a param's file source names, made absolute against m->base_dir
 * when relative (a "." or missing base_dir leaves it as written). Heap string. */
char *weights_resolve_path(const IrModule *m, const char *path);

/* Whether `resolved` opens as a regular file; reports at the param otherwise,
 * naming the path as the user wrote it. */
bool weights_check_openable(Diag *d, const IrValue *param, const char *resolved);

/* Whether a file tensor described by `info` fits the param: same shape, and a
 * dtype loadable into the param's. Reports each disagreement at the param. */
bool weights_check_fits(Diag *d, const IrValue *param, const WeightInfo *info);

/* The table of a rope_cos or rope_sin param (docs/language.md section 5):
 * element [p, i] of a [P, HD] fp16 or fp32 param is cos or sin of
 * p * theta^(-2 (i mod HD/2) / HD), computed in double and rounded once to
 * the dtype (Hugging Face's rotate_half layout: both halves of a row hold the
 * same angles). The builder has checked rank, even HD, dtype and theta. */
void weights_rope_table(bool sine, double theta, const IrType *type, void *dst);

#endif
