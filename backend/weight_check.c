/*
 * Checks params loaded from weight files before anything is emitted.
 *
 * A param declared as safetensors("model.safetensors", "wte.weight") or
 * npy("w.npy") names a file the compiler will read much later; a missing
 * file, a wrong tensor name or a shape that disagrees with the declaration
 * should be reported at the declaration, with the path as the user wrote it,
 * before any work is done. Only headers are read here (see weights.h).
 */
#include "weights_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for one probe message; longer ones are cut. */
#define WEIGHT_ERR_LEN 512

/* Relative paths start at the module's directory; a "." or missing base_dir
 * leaves them as written. Returns a heap string. */
bool weights_dtype_loadable(OrionDType from, IrDType to) {
  switch (from) {
  case ORION_DT_FP16:
  case ORION_DT_FP32:
  case ORION_DT_BF16:
  case ORION_DT_FP64:
    return to == DT_FP16 || to == DT_FP32;
  case ORION_DT_INT32:
  case ORION_DT_INT64: /* narrowed to int32 at load time, with a range check */
    return to == DT_INT32;
  case ORION_DT_INT8:
    return to == DT_INT8;
  case ORION_DT_UINT8:
    return to == DT_UINT8;
  case ORION_DT_BOOL:
    return to == DT_BOOL;
  default:
    return false;
  }
}

char *weights_resolve_path(const IrModule *m, const char *path) {
  const char *base = m->base_dir;
  if (path[0] == '/' || !base || !base[0] || strcmp(base, ".") == 0) return xstrdup(path);
  size_t blen = strlen(base), plen = strlen(path);
  bool slash = base[blen - 1] != '/';
  char *full = xmalloc(blen + slash + plen + 1);
  memcpy(full, base, blen);
  if (slash) full[blen] = '/';
  memcpy(full + blen + slash, path, plen + 1);
  return full;
}

/* Opens the resolved path once up front so that "cannot open" names the path
 * as the user wrote it; the probe only mentions the path it was given. */
bool weights_check_openable(Diag *d, const IrValue *param, const char *resolved) {
  int fd = open(resolved, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    diag_error(d, param->loc, "cannot read weights for '%s': cannot open '%s': %s", param->name, param->src.path,
               strerror(errno));
    return false;
  }
  struct stat st;
  bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  close(fd);
  if (!regular) {
    diag_error(d, param->loc, "cannot read weights for '%s': '%s' is not a regular file", param->name,
               param->src.path);
    return false;
  }
  return true;
}

static bool check_param(IrModule *m, IrValueId v, Diag *d) {
  const IrValue *param = ir_value(m, v);
  const IrParamSource *src = &param->src;
  bool safetensors = src->kind == SRC_SAFETENSORS;
  if (!src->path || (safetensors && !src->key)) ice("param '%s' names a weight file without a path or key", param->name);

  char *resolved = weights_resolve_path(m, src->path);
  WeightInfo info;
  char err[WEIGHT_ERR_LEN];
  bool ok = weights_check_openable(d, param, resolved);
  if (ok) {
    ok = safetensors ? weights_probe_safetensors(resolved, src->key, &info, err, sizeof err)
                     : weights_probe_npy(resolved, &info, err, sizeof err);
    if (!ok) diag_error(d, param->loc, "cannot read weights for '%s' from '%s': %s", param->name, src->path, err);
  }
  free(resolved);
  return ok && weights_check_fits(d, param, &info);
}

bool weights_check_fits(Diag *d, const IrValue *param, const WeightInfo *info) {
  const IrParamSource *src = &param->src;
  bool safetensors = src->kind == SRC_SAFETENSORS;
  bool ok = true;
  const IrType *t = &param->type;
  bool same_shape = info->rank == t->rank;
  for (uint32_t i = 0; same_shape && i < info->rank; i++) same_shape = info->dims[i] == t->dims[i];
  if (!same_shape) {
    StrBuf declared, held;
    sb_init(&declared);
    sb_init(&held);
    ir_type_print(&declared, t);
    sb_putc(&held, '[');
    for (uint32_t i = 0; i < info->rank; i++) sb_printf(&held, "%s%lld", i ? "," : "", (long long)info->dims[i]);
    sb_putc(&held, ']');
    if (safetensors)
      diag_error(d, param->loc, "shape mismatch for '%s': declared %s but '%s' holds '%s' as %s", param->name,
                 declared.data, src->path, src->key, held.data);
    else
      diag_error(d, param->loc, "shape mismatch for '%s': declared %s but '%s' holds %s", param->name, declared.data,
                 src->path, held.data);
    sb_free(&declared);
    sb_free(&held);
    ok = false;
  }
  if (!weights_dtype_loadable(info->dtype, t->dtype)) {
    const char *declared = ir_dtype_name(t->dtype), *held = weight_file_dtype_name(info->dtype);
    if (safetensors)
      diag_error(d, param->loc, "dtype mismatch for '%s': declared %s but '%s' in '%s' is %s", param->name, declared,
                 src->key, src->path, held);
    else
      diag_error(d, param->loc, "dtype mismatch for '%s': declared %s but '%s' is %s", param->name, declared,
                 src->path, held);
    ok = false;
  }
  return ok;
}

bool weights_check_sources(IrModule *m, Diag *d) {
  bool ok = true;
  for (IrValueId v = ir_value_id(1); v.id < m->nvalues; v.id++) {
    const IrValue *val = ir_value(m, v);
    if (diag_should_stop(d)) return false; /* the rest went unchecked */
    if (val->dead || val->kind != VK_PARAM) continue;
    if (val->src.kind != SRC_SAFETENSORS && val->src.kind != SRC_NPY) continue;
    if (!check_param(m, v, d)) ok = false;
  }
  return ok;
}

bool weights_check_values(IrModule *m, const WeightLoadOptions *opt, Diag *d) {
  bool ok = true;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    const IrFunc *fn = &m->funcs[f];
    if (fn->dead) continue;
    for (uint32_t i = 0; i < fn->ndecls; i++) {
      if (diag_should_stop(d)) return false; /* the rest went unchecked */
      IrValueId v = fn->decls[i];
      const IrValue *val = ir_value(m, v);
      if (val->dead || val->kind != VK_PARAM) continue;
      /* One weight at a time: the check costs one weight's memory, not the package's. */
      size_t nbytes;
      void *data = weights_materialize(m, v, opt, d, &nbytes);
      if (!data) ok = false;
      free(data);
    }
  }
  return ok;
}
