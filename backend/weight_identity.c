/*
 * Which weights are one weight (orion/weights.h, weights_identity): the blob
 * writer shares storage only between blobs of one identity, so that params
 * that merely start equal (every `ones` norm gain, every `zeros` bias) stay
 * patchable one by one, while a tensor read twice from the same file and key
 * (tied embeddings) or one param of several entries is stored once.
 */
#define _GNU_SOURCE /* realpath */
#include "weights_internal.h"

#include <stdlib.h>
#include <string.h>

/* The file as one spelling (symlinks and "." resolved) when it exists, so that
 * two ways of writing its path name one tensor; as written otherwise. */
static const char *canonical_file(IrModule *m, const char *path) {
  char *joined = weights_resolve_path(m, path);
  char *real = realpath(joined, NULL);
  const char *out = arena_strdup(&m->arena, real ? real : joined);
  free(real);
  free(joined);
  return out;
}

const char *weights_identity(IrModule *m, IrValueId param) {
  const IrValue *val = ir_value(m, param);
  if (val->kind != VK_PARAM) return NULL; /* a constant: equal bytes are the same constant */
  const IrParamSource *src = &val->src;
  if (src->identity) return src->identity; /* kept through weights_override */
  /* The path's length keeps path and key apart whatever characters they hold. */
  const char *file;
  switch (src->kind) {
  case SRC_SAFETENSORS:
    file = canonical_file(m, src->path);
    return arena_printf(&m->arena, "safetensors %zu:%s%s", strlen(file), file, src->key);
  case SRC_NPY:
    return arena_printf(&m->arena, "npy %s", canonical_file(m, src->path));
  default:
    /* An initializer is its param's own: the same name in several entries
     * (one instance of a block) is the same param, any other is not. */
    return arena_printf(&m->arena, "param %s", val->name);
  }
}
