/*
 * The outputs split-concat split: the manifest's OutputGroups name an output
 * as written in the .oir and the outputs that, concatenated along an axis,
 * make it. orion-run writes the whole output, as the program's author named
 * it, instead of its parts.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "orion-run.h"

static size_t element_size(MilDType t) {
  return t == MIL_DT_FP16 ? 2 : t == MIL_DT_FP32 || t == MIL_DT_INT32 ? 4 : t == MIL_DT_BOOL ? sizeof(bool) : 0;
}

static uint32_t find_output(const char *const *names, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (names[i] && !strcmp(names[i], name)) return i;
  return UINT32_MAX;
}

/* Joins one group into outputs[at[0]]; the other parts' slots are emptied. */
static bool join(const PkgGroup *g, const uint32_t *at, OrionTensor *outputs, Diag *d) {
  const OrionTensor *first = &outputs[at[0]];
  uint32_t axis = g->axis;
  size_t esize = element_size(first->dtype);
  if (!esize) ice("output '%s' has a dtype no backend returns", g->parts[0]);
  if (axis >= first->rank) {
    diag_error(d, (SrcSpan){0}, "output group '%s': axis %u does not fit its parts", g->name, axis);
    return false;
  }
  OrionTensor whole = *first;
  whole.dims[axis] = 0;
  for (uint32_t k = 0; k < g->nparts; k++) {
    const OrionTensor *t = &outputs[at[k]];
    bool same = t->dtype == first->dtype && t->rank == first->rank;
    for (uint32_t r = 0; same && r < t->rank; r++) same = r == axis || t->dims[r] == first->dims[r];
    if (!same) {
      diag_error(d, (SrcSpan){0}, "output group '%s': its part '%s' does not join the others along axis %u", g->name,
                 g->parts[k], axis);
      return false;
    }
    whole.dims[axis] += t->dims[axis];
  }
  uint64_t outer = 1, inner = esize, total = esize;
  for (uint32_t r = 0; r < whole.rank; r++) {
    if (r < axis) outer *= (uint64_t)whole.dims[r];
    if (r > axis) inner *= (uint64_t)whole.dims[r];
    total *= (uint64_t)whole.dims[r];
  }
  uint8_t *data = xmalloc(total ? (size_t)total : 1);
  uint8_t *dst = data;
  for (uint64_t o = 0; o < outer; o++)
    for (uint32_t k = 0; k < g->nparts; k++) {
      const OrionTensor *t = &outputs[at[k]];
      size_t row = (size_t)((uint64_t)t->dims[axis] * inner);
      memcpy(dst, (const uint8_t *)t->data + o * row, row);
      dst += row;
    }
  for (uint32_t k = 0; k < g->nparts; k++) orion_tensor_free(&outputs[at[k]]);
  whole.data = data;
  outputs[at[0]] = whole;
  return true;
}

bool orion_run_join_output_groups(const char *program, const char *function, OrionTensor *outputs,
                                  const char **names, uint32_t *n, Arena *arena, Diag *d) {
  StrBuf manifest;
  sb_init(&manifest);
  sb_printf(&manifest, "%s/%s", program, PACKAGE_MANIFEST);
  struct stat st;
  bool is_package = stat(manifest.data, &st) == 0;
  sb_free(&manifest);
  if (!is_package) return true; /* a bare directory has no groups */
  Package pkg;
  if (!package_read(program, &pkg, d)) return false;
  const PkgFunction *f = NULL;
  for (uint32_t i = 0; i < pkg.nfunctions; i++)
    if (!strcmp(pkg.functions[i].name, function)) f = &pkg.functions[i];
  bool ok = true;
  for (uint32_t g = 0; ok && f && g < f->ngroups; g++) {
    const PkgGroup *grp = &f->groups[g];
    uint32_t *at = xcalloc(grp->nparts ? grp->nparts : 1, sizeof *at);
    for (uint32_t k = 0; ok && k < grp->nparts; k++) {
      at[k] = find_output(names, *n, grp->parts[k]);
      if (at[k] == UINT32_MAX) {
        diag_error(d, (SrcSpan){0}, "output group '%s': its part '%s' is not an output of '%s'", grp->name,
                   grp->parts[k], function);
        ok = false;
      }
    }
    if (ok && grp->nparts) ok = join(grp, at, outputs, d);
    if (ok) {
      names[at[0]] = arena_strdup(arena, grp->name);
      for (uint32_t k = 1; k < grp->nparts; k++) names[at[k]] = NULL;
    }
    free(at);
  }
  /* Close the gaps the parts left, keeping the order. */
  uint32_t kept = 0;
  for (uint32_t i = 0; i < *n; i++) {
    if (!names[i]) continue;
    outputs[kept] = outputs[i];
    names[kept++] = names[i];
  }
  for (uint32_t i = kept; i < *n; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  *n = kept;
  package_free(&pkg);
  return ok;
}
