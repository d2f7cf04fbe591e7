/*
 * Weight import: safetensors and numpy .npy files.
 *
 * Probing reads and validates only the header (shape, dtype, where the data
 * lies); it never reads past the end of the file and rejects every offset,
 * size or shape that does not fit. Used by the compiler to check params
 * against the files they name before anything is emitted.
 */
#ifndef ORION_WEIGHTS_H
#define ORION_WEIGHTS_H

#include "orion/ir.h"

/* Element types found in weight files. */
typedef enum WeightFileDType {
  WF_F16, WF_F32, WF_BF16, WF_I32, WF_I8, WF_U8, WF_BOOL, WF_F64, WF_I64, WF_COUNT
} WeightFileDType;

const char *weight_file_dtype_name(WeightFileDType t); /* "F16", "F32", ... (safetensors spelling) */
/* Element i of float file data (F16, BF16, F32 or F64, little-endian) as a
 * double: exact, since each widens exactly. For messages and checks, not for
 * bulk conversion. */
double weight_file_float_value(const void *data, WeightFileDType t, uint64_t i);
/* n float values of file dtype t (F16, BF16, F32, F64) into dst of dtype
 * DT_FP16 or DT_FP32, each rounded once to nearest even (vectorized, a chunk
 * at a time). No checks: NaN stays NaN, values beyond the range become
 * infinities; callers scan the result. */
void weights_convert_floats(const void *src, WeightFileDType t, uint64_t n, IrDType dt, void *dst);
size_t weight_file_dtype_size(WeightFileDType t);

typedef struct WeightInfo {
  WeightFileDType dtype;
  uint32_t rank;
  int64_t dims[IR_MAX_RANK];
  uint64_t data_offset; /* absolute byte offset of the tensor's data in the file */
  uint64_t nbytes;      /* elements * dtype size */
} WeightInfo;

/* Header parsers over bytes in memory (the fuzz targets call these).
 * On failure they return false and write a lowercase message to err. */
bool weights_parse_safetensors(const uint8_t *data, size_t len, const char *key, WeightInfo *out, char *err,
                               size_t errlen);
bool weights_parse_npy(const uint8_t *data, size_t len, WeightInfo *out, char *err, size_t errlen);

/* The same on files (memory-mapped). */
bool weights_probe_safetensors(const char *path, const char *key, WeightInfo *out, char *err, size_t errlen);
bool weights_probe_npy(const char *path, WeightInfo *out, char *err, size_t errlen);

/* Whether a file dtype can be loaded into a param of the IR dtype: by exact
 * match, by float conversion (F16/F32/BF16/F64 -> fp16/fp32), or I64 -> int32
 * (range-checked when the data is read). */
bool weights_dtype_loadable(WeightFileDType from, IrDType to);

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

#endif
