/*
 * Weight import: a param's bytes from its source (an initializer, or a
 * tensor of a safetensors or .npy file, read with orion/weight_file.h).
 */
#ifndef ORION_WEIGHTS_H
#define ORION_WEIGHTS_H

#include "orion/ir.h"
#include "orion/weight_file.h"

/* Whether a file dtype can be loaded into a param of the IR dtype: by exact
 * match, by float conversion (F16/F32/BF16/F64 -> fp16/fp32), or I64 -> int32
 * (range-checked when the data is read). */
bool weights_dtype_loadable(OrionDType from, IrDType to);

/* Checks every live param whose source is a file: the file exists and parses,
 * the key exists, shape and dtype agree. Paths are relative to m->base_dir.
 * Reports each problem at the param's location; returns false if any. */
bool weights_check_sources(IrModule *m, Diag *d);

/* ---- materialization: a param's bytes in its IR dtype ---- */

typedef struct WeightLoadOptions {
  /* Values beyond fp16's finite range: clamp to +-65504 with a warning
   * (true) or report an error naming the tensor (false, the default). */
  bool clamp_fp16;
  /* Called now and then while a random initializer is generated or float
   * weights are converted from a file, on the calling thread, with how many
   * leading bytes of the destination are done (growing from call to call):
   * lets the caller write them out while the rest is made. NULL: not called. */
  void (*progress)(void *ctx, size_t done);
  void *progress_ctx;
  /* Called before bytes of the destination below `end` are written, from
   * any of the threads making them (a destination whose memory is reused
   * ahead of the writer needs to know); the whole destination is claimed at
   * once except by random initializers and float conversions, which claim
   * as they go. Shares progress_ctx. NULL: not called. */
  void (*claim)(void *ctx, size_t end);
} WeightLoadOptions;

/* Produces the data of a live param in its declared dtype, row-major,
 * little-endian (fp16 as IEEE binary16 bits), from its source:
 *  - zeros, ones, fill(v): the value, rounded once to the dtype;
 *  - normal(seed, mean, std), uniform(seed, low, high): the deterministic
 *    generator documented in docs/weights.md, computed in double and rounded
 *    once to the dtype;
 *  - safetensors/npy: the file's tensor (memory-mapped), converted
 *    F32/F64/BF16/F16 -> fp16 or fp32 with round-to-nearest-even, I64 -> int32
 *    with a range check, others copied.
 * NaN in weights is an error; values beyond fp16's range are an error unless
 * opt->clamp_fp16. Problems are reported at the param's location naming it.
 * Returns a malloc'd buffer of *nbytes bytes, or NULL after reporting. */
void *weights_materialize(IrModule *m, IrValueId param, const WeightLoadOptions *opt, Diag *d, size_t *nbytes);
/* The same into dst, which holds exactly the param's nbytes (for example the
 * place in a mapped weight file where it goes). On failure dst may hold part
 * of the data. */
bool weights_materialize_into(IrModule *m, IrValueId param, const WeightLoadOptions *opt, Diag *d, void *dst,
                              size_t nbytes);

/* Materializes every live param of every live function, one at a time, and
 * drops the bytes: the checks of the values (NaN, fp16 range unless
 * opt->clamp_fp16, int32 range) that writing a package makes, without
 * writing one (orionc --emit=none). Reports as weights_materialize does;
 * returns false if any param failed. */
bool weights_check_values(IrModule *m, const WeightLoadOptions *opt, Diag *d);

/* The values in double, before rounding to a dtype, of elements first ..
 * first+count-1 (first even) of a uniform or normal source, exactly as
 * docs/weights.md defines them: for tests and for tools reproducing weights. */
void weights_random_values(const IrParamSource *src, uint64_t first, size_t count, double *out);

/* The random generator has a portable build and, on x86-64, wider ones
 * (AVX2, AVX-512); the fastest the CPU runs is picked on first use. All give
 * the same bits; tests pick each in turn to check that. Returns false, and
 * changes nothing, if this CPU or build lacks the one asked for. Not to be
 * called while weights are being generated. */
typedef enum WeightsCodePath {
  WEIGHTS_CODE_AUTO,
  WEIGHTS_CODE_PORTABLE,
  WEIGHTS_CODE_AVX2,
  WEIGHTS_CODE_AVX512,
} WeightsCodePath;
bool weights_use_code_path(WeightsCodePath path);

/* What a weight is the same weight as, for sharing its storage: two blobs
 * are stored once only when their bytes and their identities agree. A param
 * from a safetensors file is its file (canonical path) and key, one from a
 * .npy file its file, one from an initializer its own (inlined) name, so
 * that tied embeddings, and one param of several entries, share a blob while
 * params that merely start equal (two `ones`) do not. A const has none (NULL):
 * equal constants are one constant. Arena string of m. */
const char *weights_identity(IrModule *m, IrValueId param);

/* Makes every live param named by a tensor of the safetensors `file` (or,
 * with npy_name, the param of that name) take its value from that file, as
 * if the source had said so: how a fresh compile with the patched weights is
 * made (orion-run patch --verify). Params are matched by their inlined names
 * (the manifest's). */
bool weights_override(IrModule *m, const char *npy_name, const char *file, Diag *d);

#endif
