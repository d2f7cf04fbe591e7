/*
 * Patch tensors read from files (orion/patch.h's PatchSet): safetensors and
 * .npy files mapped read-only until patch_set_free. Split from patch.c, which
 * applies them.
 */
#include "orion/patch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A little-endian u64 (safetensors' header length). */
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Maps a whole input file read-only; the descriptor is closed. */
static bool map_file(const char *file, uint8_t **base, size_t *len, const char **err) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    *err = strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  *len = (size_t)st.st_size;
  *base = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  bool ok = !*len || *base != MAP_FAILED;
  if (!ok) *err = strerror(errno);
  close(fd);
  return ok;
}

/* ---- reading patch tensors from files ------------------------------------------------ */

typedef struct PatchMapping {
  void *base;
  size_t len;
} PatchMapping;

static bool map_input(PatchSet *s, const char *file, const uint8_t **data, size_t *len, Diag *d) {
  const char *err = NULL;
  uint8_t *base;
  if (!map_file(file, &base, len, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", file, err);
    return false;
  }
  s->maps = xrealloc(s->maps, (s->nmaps + 1) * sizeof *s->maps);
  s->maps[s->nmaps++] = (PatchMapping){base, *len};
  *data = base;
  return true;
}

static void add_tensor(PatchSet *s, const char *name, const char *origin, const WeightInfo *wi, const uint8_t *base) {
  xgrow((void **)&s->tensors, sizeof *s->tensors, &s->cap, s->n + 1);
  PatchTensor *t = &s->tensors[s->n++];
  *t = (PatchTensor){.name = xstrdup(name), .origin = xstrdup(origin), .dtype = wi->dtype, .rank = wi->rank,
                     .data = base + wi->data_offset, .nbytes = wi->nbytes};
  memcpy(t->dims, wi->dims, sizeof t->dims);
}

bool patch_set_add_safetensors(PatchSet *s, const char *file, Diag *d) {
  const uint8_t *data;
  size_t len;
  if (!map_input(s, file, &data, &len, d)) return false;
  char err[512];
  uint64_t hlen = len >= 8 ? get_u64(data) : 0;
  if (len < 8 || hlen > len - 8) {
    diag_error(d, (SrcSpan){0}, "%s: not a safetensors file (its header length is out of range)", file);
    return false;
  }
  cJSON *h = cJSON_ParseWithLength((const char *)data + 8, (size_t)hlen);
  if (!cJSON_IsObject(h)) {
    diag_error(d, (SrcSpan){0}, "%s: not a safetensors file (its header is not a JSON object)", file);
    cJSON_Delete(h);
    return false;
  }
  bool ok = true;
  uint32_t count = 0;
  for (const cJSON *e = h->child; e; e = e->next) {
    if (!e->string || !strcmp(e->string, "__metadata__")) continue;
    WeightInfo wi;
    if (!weights_parse_safetensors(data, len, e->string, &wi, err, sizeof err)) {
      diag_error(d, (SrcSpan){0}, "%s: %s", file, err);
      ok = false;
      continue;
    }
    add_tensor(s, e->string, file, &wi, data);
    count++;
  }
  cJSON_Delete(h);
  if (ok && !count) {
    diag_error(d, (SrcSpan){0}, "%s: the file holds no tensors", file);
    ok = false;
  }
  return ok;
}

bool patch_set_add_npy(PatchSet *s, const char *name, const char *file, Diag *d) {
  const uint8_t *data;
  size_t len;
  if (!map_input(s, file, &data, &len, d)) return false;
  char err[512];
  WeightInfo wi;
  if (!weights_parse_npy(data, len, &wi, err, sizeof err)) {
    diag_error(d, (SrcSpan){0}, "%s: %s", file, err);
    return false;
  }
  add_tensor(s, name, file, &wi, data);
  return true;
}

void patch_set_free(PatchSet *s) {
  for (uint32_t i = 0; i < s->n; i++) {
    free((void *)(uintptr_t)s->tensors[i].name); /* allocated by add_tensor */
    free((void *)(uintptr_t)s->tensors[i].origin);
  }
  free(s->tensors);
  for (uint32_t i = 0; i < s->nmaps; i++)
    if (s->maps[i].len) munmap(s->maps[i].base, s->maps[i].len);
  free(s->maps);
  memset(s, 0, sizeof *s);
}
