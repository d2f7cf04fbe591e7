/*
 * Compiling with replaced weights (orion-run patch --verify): the params a
 * patch names take their values from the patch's files, so that a fresh
 * compile can be compared with the patched package.
 */
#define _GNU_SOURCE
#include "orion/patch.h"
#include "orion/weights.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool override_one(IrModule *m, const char *name, IrParamSourceKind kind, const char *abs, const char *origin,
                         Diag *d) {
  bool found = false;
  for (IrValueId v = ir_value_id(1); v.id < m->nvalues; v.id++) {
    IrValue *val = ir_value(m, v);
    if (val->dead || val->kind != VK_PARAM || m->funcs[val->func].dead || strcmp(val->name, name)) continue;
    /* The param stays the weight it was (tied embeddings stay tied), so the
     * blobs are laid out as in the package being compared with. */
    const char *identity = weights_identity(m, v);
    val->src = (IrParamSource){.kind = kind, .path = arena_strdup(&m->arena, abs),
                               .key = kind == SRC_SAFETENSORS ? arena_strdup(&m->arena, name) : NULL,
                               .identity = identity};
    found = true;
  }
  if (!found) diag_error(d, (SrcSpan){0}, "%s: the program has no weight named '%s'", origin, name);
  return found;
}

bool weights_override(IrModule *m, const char *npy_name, const char *file, Diag *d) {
  char *abs = realpath(file, NULL);
  if (!abs) {
    diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", file, strerror(errno));
    return false;
  }
  bool ok = true;
  if (npy_name) {
    ok = override_one(m, npy_name, SRC_NPY, abs, file, d);
  } else {
    PatchSet s = {0};
    ok = patch_set_add_safetensors(&s, file, d);
    for (uint32_t i = 0; ok && i < s.n; i++) ok = override_one(m, s.tensors[i].name, SRC_SAFETENSORS, abs, file, d);
    patch_set_free(&s);
  }
  free(abs);
  return ok;
}
