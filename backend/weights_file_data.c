/*
 * Weight materialization of file tensors (safetensors, .npy): the file is
 * memory-mapped, its header parsed again from the mapping itself (so every
 * offset used was checked against the bytes actually mapped, whatever
 * happened to the file since the check), and the tensor converted to the
 * param's dtype with a single round-to-nearest-even on every core (the
 * conversion itself is the package I/O library's, pkgio/float_convert.c,
 * which the patcher uses too; this file adds the slices, threads and
 * checks). Part of weight materialization (weights_data_internal.h).
 */
#include "weights_data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "weights_file_data.c copies little-endian file data as it is: a big-endian host needs byte swaps"
#endif

/* Room for one header-parser message; longer ones are cut. */
#define WEIGHT_ERR_LEN 512

/* ---- file data: conversions ------------------------------------------------- */

/* Whether k fp16 values hold no NaN or infinity (the common case, no branches). */
static bool fp16_chunk_finite(const uint16_t *h, size_t k) {
  unsigned special = 0;
  for (size_t i = 0; i < k; i++) special |= (h[i] & FP16_EXP_MASK) == FP16_EXP_MASK;
  return !special;
}

static bool fp32_chunk_finite(const float *f, size_t k) {
  unsigned special = 0;
  for (size_t i = 0; i < k; i++) {
    uint32_t u;
    memcpy(&u, &f[i], sizeof u);
    special |= (u & FP32_EXP_MASK) == FP32_EXP_MASK;
  }
  return !special;
}

/* The slow path of a chunk of fp16 output with a NaN or infinity in it: a
 * NaN came from a NaN; an infinity from a value too large or an infinity. */
static void fp16_chunk_fix(WeightOut *o, uint64_t at, size_t k, const uint8_t *src, OrionDType t) {
  uint16_t *h = (uint16_t *)o->data + at;
  for (size_t i = 0; i < k; i++) {
    if ((h[i] & FP16_EXP_MASK) != FP16_EXP_MASK) continue;
    if (h[i] & 0x3FFu) weights_note_nan(o, at + i);
    else h[i] = weights_note_over(o, at + i, weight_file_float_value(src, t, at + i), t != ORION_DT_FP64);
  }
}

/* The same for fp32 output: infinities in the file stay (fp32 holds them);
 * a finite F64 value that became one is out of range. */
static void fp32_chunk_fix(WeightOut *o, uint64_t at, size_t k, const uint8_t *src, OrionDType t) {
  const float *f = (const float *)o->data + at;
  for (size_t i = 0; i < k; i++) {
    if (isnan(f[i])) weights_note_nan(o, at + i);
    else if (isinf(f[i]) && t == ORION_DT_FP64 && isfinite(weight_file_float_value(src, t, at + i)))
      weights_note_over(o, at + i, weight_file_float_value(src, t, at + i), false);
  }
}

/* A float conversion's source, for its slices. */
typedef struct FileFloats {
  const uint8_t *src;
  OrionDType t;
} FileFloats;

static void fp16_slice(WeightOut *o, uint64_t begin, uint64_t end, const void *arg) {
  const FileFloats *f = arg;
  uint16_t *out = o->data;
  for (uint64_t at = begin; at < end; at += CHUNK) {
    size_t k = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
    weights_convert_floats(f->src + at * orion_dtype_size(f->t), f->t, k, ORION_DT_FP16, out + at);
    if (!fp16_chunk_finite(out + at, k)) fp16_chunk_fix(o, at, k, f->src, f->t);
  }
}

static void fp32_slice(WeightOut *o, uint64_t begin, uint64_t end, const void *arg) {
  const FileFloats *f = arg;
  float *out = o->data;
  for (uint64_t at = begin; at < end; at += CHUNK) {
    size_t k = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
    weights_convert_floats(f->src + at * orion_dtype_size(f->t), f->t, k, ORION_DT_FP32, out + at);
    if (!fp32_chunk_finite(out + at, k)) fp32_chunk_fix(o, at, k, f->src, f->t);
  }
}

/* I64 -> int32: stops at the first value out of range. */
static bool narrow_i64(WeightOut *o, const uint8_t *src) {
  int32_t *out = o->data;
  for (uint64_t i = 0; i < o->n; i++) {
    int64_t x;
    memcpy(&x, src + 8 * i, sizeof x);
    if (x < INT32_MIN || x > INT32_MAX) {
      StrBuf what;
      sb_init(&what);
      weights_describe_source(&what, &o->param->src);
      diag_error(o->d, o->param->loc, "weight '%s' from %s has the value %lld at index %llu, outside int32",
                 o->param->name, what.data, (long long)x, (unsigned long long)i);
      sb_free(&what);
      return false;
    }
    out[i] = (int32_t)x;
  }
  return true;
}

static bool convert(WeightOut *o, const uint8_t *src, OrionDType t) {
  switch (o->dtype) {
  case DT_FP16:
  case DT_FP32: {
    /* On every core: reading a checkpoint is most of such a compile. */
    FileFloats f = {src, t};
    weights_run_slices(o, o->dtype == DT_FP16 ? fp16_slice : fp32_slice, &f);
    return weights_report_problems(o);
  }
  case DT_INT32:
    if (t == ORION_DT_INT64) return narrow_i64(o, src);
    memcpy(o->data, src, (size_t)o->n * 4);
    return true;
  case DT_BOOL: {
    /* Any nonzero byte is true, as numpy reads it; the output is 0 or 1. */
    uint8_t *out = o->data;
    for (uint64_t i = 0; i < o->n; i++) out[i] = src[i] != 0;
    return true;
  }
  default: /* int8, uint8: same bytes */
    memcpy(o->data, src, (size_t)o->n);
    return true;
  }
}

/* ---- file data: mapping ----------------------------------------------------- */

typedef struct Mapping {
  const uint8_t *data;
  size_t len;
  void *base; /* NULL for an empty file, which mmap cannot map */
} Mapping;

/* Maps `path` read-only; messages name `shown`, the path as written. */
static bool map_weights(const char *path, const char *shown, Mapping *mp, char *err, size_t errlen) {
  static const uint8_t empty[1];
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open '%s': %s", shown, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX) {
    snprintf(err, errlen, "'%s' is not a regular file that can be mapped", shown);
    close(fd);
    return false;
  }
  mp->len = (size_t)st.st_size;
  mp->base = NULL;
  mp->data = empty;
  if (mp->len > 0) {
    void *p = mmap(NULL, mp->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      snprintf(err, errlen, "cannot map '%s': %s", shown, strerror(errno));
      close(fd);
      return false;
    }
    mp->base = p;
    mp->data = p;
  }
  close(fd); /* the mapping stays valid */
  return true;
}

bool weights_read_file(WeightOut *o, IrModule *m) {
  const IrValue *p = o->param;
  const IrParamSource *src = &p->src;
  bool safetensors = src->kind == SRC_SAFETENSORS;
  if (!src->path || (safetensors && !src->key)) ice("param '%s' names a weight file without a path or key", p->name);

  char *resolved = weights_resolve_path(m, src->path);
  Mapping map;
  char err[WEIGHT_ERR_LEN];
  bool ok = weights_check_openable(o->d, p, resolved);
  if (ok && !map_weights(resolved, src->path, &map, err, sizeof err)) {
    diag_error(o->d, p->loc, "cannot read weights for '%s' from '%s': %s", p->name, src->path, err);
    ok = false;
  }
  free(resolved);
  if (!ok) return false;

  /* The header is read again from this mapping: the offsets come out
   * checked against the bytes in hand, not the file as it was earlier. */
  WeightInfo info;
  ok = safetensors ? weights_parse_safetensors(map.data, map.len, src->key, &info, err, sizeof err)
                   : weights_parse_npy(map.data, map.len, &info, err, sizeof err);
  if (!ok) diag_error(o->d, p->loc, "cannot read weights for '%s' from '%s': %s", p->name, src->path, err);
  else ok = weights_check_fits(o->d, p, &info);
  if (ok) {
    /* Equal shapes and the parser's size check make this hold; the
     * conversions read exactly n elements, so check it once here. */
    if (info.data_offset > map.len || info.nbytes > map.len - info.data_offset ||
        info.nbytes != o->n * weight_file_dtype_size(info.dtype))
      ice("tensor of param '%s' does not fit its mapping", p->name);
    const uint8_t *data = map.data + info.data_offset;
    if (map.base && info.nbytes) {
      /* Read-ahead: the tensor is read once, front to back. Advice only. */
      uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
      uintptr_t start = (uintptr_t)data & ~(page - 1);
      (void)posix_madvise((void *)start, (size_t)((uintptr_t)data + info.nbytes - start), POSIX_MADV_SEQUENTIAL);
    }
    ok = convert(o, data, info.dtype);
  }
  if (map.base) munmap(map.base, map.len);
  return ok;
}
