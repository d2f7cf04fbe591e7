/*
 * Reads a training checkpoint and refuses anything that is not exactly what
 * the writer wrote: the manifest's own checksum first, then every file's
 * size and checksum, then every tensor's name, dtype and shape (with pkgio's
 * safetensors parser, the one the package tools use). Nothing is returned
 * until all of it has passed, so a partial or corrupted checkpoint never
 * loads as a valid one.
 */
#include "checkpoint_internal.h"

#include "orion/weight_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EXACT_INTEGER (1ull << 53)
#define MAX_MANIFEST_BYTES (64u << 20)

typedef struct Reader {
  const char *dir; /* the checkpoint directory */
  Diag *d;
} Reader;

static bool bad(Reader *r, const char *file, const char *fmt, ...) ORION_PRINTF(3, 4);

/* "checkpoint 'DIR/FILE': ..." and false. */
static bool bad(Reader *r, const char *file, const char *fmt, ...) {
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  if (file) diag_error(r->d, (SrcSpan){0}, "checkpoint '%s/%s': %s", r->dir, file, sb.data);
  else diag_error(r->d, (SrcSpan){0}, "checkpoint '%s': %s", r->dir, sb.data);
  sb_free(&sb);
  return false;
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

/* ---- files ---------------------------------------------------------------- */

typedef struct Mapped {
  uint8_t *data;
  size_t len;
} Mapped;

/* Maps DIR/name and checks it against the manifest's size and checksum. */
static bool map_checked(Reader *r, const char *name, uint64_t bytes, const char *xxh64, Mapped *m) {
  *m = (Mapped){0};
  char *path = join(r->dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  free(path);
  if (fd < 0) {
    if (errno == ENOENT) return bad(r, name, "missing (a partial checkpoint)");
    return bad(r, name, "cannot open: %s", strerror(errno));
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!ok) {
    close(fd);
    return bad(r, name, "not a regular file");
  }
  if ((uint64_t)st.st_size != bytes) {
    close(fd);
    return bad(r, name, "%llu bytes where the manifest says %llu (a partial or corrupted checkpoint)",
               (unsigned long long)st.st_size, (unsigned long long)bytes);
  }
  if (bytes == 0 || bytes > SIZE_MAX) {
    close(fd);
    return bad(r, name, "an impossible size of %llu bytes", (unsigned long long)bytes);
  }
  void *p = mmap(NULL, (size_t)bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return bad(r, name, "cannot map: %s", strerror(errno));
  CkptHash h;
  ckpt_hash_init(&h);
  ckpt_hash_update(&h, p, (size_t)bytes);
  char hex[17];
  ckpt_hash_hex(&h, hex);
  if (strcmp(hex, xxh64) != 0) {
    munmap(p, (size_t)bytes);
    return bad(r, name, "checksum mismatch: XXH64 %s where the manifest says %s (a corrupted checkpoint)", hex, xxh64);
  }
  m->data = p;
  m->len = (size_t)bytes;
  return true;
}

static void unmap(Mapped *m) {
  if (m->data) munmap(m->data, m->len);
  *m = (Mapped){0};
}

/* ---- the manifest ------------------------------------------------------------- */

/* Verifies the manifest's own checksum (of the text before its last member)
 * and parses it. */
static cJSON *read_manifest(Reader *r) {
  char *path = join(r->dir, CKPT_MANIFEST);
  char *text = NULL;
  size_t len = 0;
  const char *err = NULL;
  bool ok = read_file(path, MAX_MANIFEST_BYTES, &text, &len, &err);
  free(path);
  if (!ok) {
    bad(r, CKPT_MANIFEST, "cannot read: %s%s", err, errno == ENOENT ? " (not a checkpoint, or a partial one)" : "");
    return NULL;
  }
  /* text = BODY CKPT_SELF_SEP HEX16 "\"\n}\n"; the checksum is of BODY "\n}". */
  const char *tail = "\"\n}\n";
  size_t sep = strlen(CKPT_SELF_SEP), tl = strlen(tail);
  char *at = NULL;
  for (char *s = strstr(text, CKPT_SELF_SEP); s; s = strstr(s + 1, CKPT_SELF_SEP)) at = s;
  if (!at || (size_t)(at - text) + sep + 16 + tl != len || memcmp(at + sep + 16, tail, tl) != 0) {
    free(text);
    bad(r, CKPT_MANIFEST, "does not end in its checksum (a partial or corrupted checkpoint)");
    return NULL;
  }
  char want[17];
  memcpy(want, at + sep, 16);
  want[16] = 0;
  CkptHash h;
  ckpt_hash_init(&h);
  ckpt_hash_update(&h, text, (size_t)(at - text));
  ckpt_hash_update(&h, "\n}", 2);
  char hex[17];
  ckpt_hash_hex(&h, hex);
  if (strcmp(hex, want) != 0) {
    free(text);
    bad(r, CKPT_MANIFEST, "checksum mismatch: XXH64 %s where the manifest says %s (a corrupted checkpoint)", hex, want);
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    bad(r, CKPT_MANIFEST, "not a JSON object");
    return NULL;
  }
  return root;
}

static bool get_count(Reader *r, const cJSON *o, const char *key, uint64_t *v) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
  double x = cJSON_IsNumber(e) ? e->valuedouble : -1;
  if (!(x >= 0 && x <= (double)MAX_EXACT_INTEGER && x == floor(x)))
    return bad(r, CKPT_MANIFEST, "'%s' is missing or not a whole number", key);
  *v = (uint64_t)x;
  return true;
}

static const char *get_string(Reader *r, const cJSON *o, const char *key) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(e)) {
    bad(r, CKPT_MANIFEST, "'%s' is missing or not a string", key);
    return NULL;
  }
  return e->valuestring;
}

/* A lowercase hex digit's value, or -1 (the writer writes lowercase). */
static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

static bool get_hex(Reader *r, const cJSON *o, const char *key, const uint8_t **out, size_t *n) {
  const char *s = get_string(r, o, key);
  if (!s) return false;
  size_t len = strlen(s);
  if (len % 2 || len / 2 > ORION_CKPT_MAX_BLOB) return bad(r, CKPT_MANIFEST, "'%s' is not hex bytes", key);
  uint8_t *p = xmalloc(len / 2 + 1);
  for (size_t i = 0; i < len / 2; i++) {
    int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(p);
      return bad(r, CKPT_MANIFEST, "'%s' is not hex bytes", key);
    }
    p[i] = (uint8_t)(hi << 4 | lo);
  }
  *out = p;
  *n = len / 2;
  return true;
}

/* The checkpoint's fields from the manifest, tensors still without data. */
static bool take_fields(Reader *r, const cJSON *root, const char *expected_id, OrionCheckpoint *c) {
  const char *format = get_string(r, root, "format");
  if (!format) return false;
  if (strcmp(format, CKPT_FORMAT_NAME) != 0) return bad(r, CKPT_MANIFEST, "not an orion checkpoint (format '%s')", format);
  uint64_t version;
  if (!get_count(r, root, "format_version", &version)) return false;
  if (version != ORION_CKPT_FORMAT_VERSION)
    return bad(r, CKPT_MANIFEST, "format version %llu, this orion reads version %d", (unsigned long long)version,
               ORION_CKPT_FORMAT_VERSION);
  const char *id = get_string(r, root, "package");
  if (!id) return false;
  if (!ckpt_valid_id(id)) return bad(r, CKPT_MANIFEST, "the package identity is not 1 to 128 printable characters");
  if (expected_id && strcmp(id, expected_id) != 0)
    return bad(r, NULL, "belongs to package '%s', not to this package '%s'", id, expected_id);
  c->package_id = xstrdup(id);
  if (!get_count(r, root, "step", &c->step)) return false;

  const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
  if (!cJSON_IsObject(opt)) return bad(r, CKPT_MANIFEST, "'optimizer' is missing or not an object");
  const char *name = get_string(r, opt, "name");
  if (!name) return false;
  if (!ckpt_plain_name(name)) return bad(r, CKPT_MANIFEST, "optimizer name '%s' is not 1 to 64 of [a-z0-9_]", name);
  c->optimizer = xstrdup(name);
  const cJSON *hyper = cJSON_GetObjectItemCaseSensitive(opt, "hyper"), *e;
  if (!cJSON_IsObject(hyper)) return bad(r, CKPT_MANIFEST, "'optimizer.hyper' is missing or not an object");
  cJSON_ArrayForEach(e, hyper) {
    if (c->nhyper == ORION_CKPT_MAX_HYPER) return bad(r, CKPT_MANIFEST, "more than %d hyper-parameters", ORION_CKPT_MAX_HYPER);
    if (!ckpt_plain_name(e->string) || !cJSON_IsNumber(e))
      return bad(r, CKPT_MANIFEST, "hyper-parameter '%s' is not a name with a number", e->string ? e->string : "");
    c->hyper[c->nhyper].name = xstrdup(e->string);
    c->hyper[c->nhyper++].value = e->valuedouble;
  }
  const cJSON *slots = cJSON_GetObjectItemCaseSensitive(opt, "slots");
  if (!cJSON_IsArray(slots)) return bad(r, CKPT_MANIFEST, "'optimizer.slots' is missing or not an array");
  cJSON_ArrayForEach(e, slots) {
    if (c->nslots == ORION_CKPT_MAX_SLOTS) return bad(r, CKPT_MANIFEST, "more than %d state slots", ORION_CKPT_MAX_SLOTS);
    if (!cJSON_IsString(e) || !ckpt_plain_name(e->valuestring))
      return bad(r, CKPT_MANIFEST, "a state slot name is not 1 to 64 of [a-z0-9_]");
    c->slot_names[c->nslots++] = xstrdup(e->valuestring);
  }

  const cJSON *ls = cJSON_GetObjectItemCaseSensitive(root, "loss_scale");
  if (!cJSON_IsObject(ls)) return bad(r, CKPT_MANIFEST, "'loss_scale' is missing or not an object");
  const cJSON *scale = cJSON_GetObjectItemCaseSensitive(ls, "scale");
  if (!cJSON_IsNumber(scale) || !(scale->valuedouble > 0)) return bad(r, CKPT_MANIFEST, "'loss_scale.scale' is not a positive number");
  c->loss_scale.scale = scale->valuedouble;
  if (!get_count(r, ls, "good_steps", &c->loss_scale.good_steps) ||
      !get_count(r, ls, "skipped_steps", &c->loss_scale.skipped_steps))
    return false;
  if (!get_hex(r, root, "data_position", &c->data_position, &c->data_position_len) ||
      !get_hex(r, root, "rng_state", &c->rng_state, &c->rng_state_len))
    return false;

  const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
  int nt = cJSON_IsArray(tensors) ? cJSON_GetArraySize(tensors) : 0;
  if (nt <= 0) return bad(r, CKPT_MANIFEST, "'tensors' is missing or empty");
  c->weights = xcalloc((size_t)nt, sizeof *c->weights);
  cJSON_ArrayForEach(e, tensors) {
    OrionCkptTensor *t = &c->weights[c->nweights++];
    const char *tn = get_string(r, e, "name");
    if (!tn) return false;
    t->name = xstrdup(tn);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape"), *dim;
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > ORION_MAX_RANK)
      return bad(r, CKPT_MANIFEST, "tensor '%s' has no shape of rank 0 to %d", tn, ORION_MAX_RANK);
    cJSON_ArrayForEach(dim, shape) {
      double x = cJSON_IsNumber(dim) ? dim->valuedouble : 0;
      if (!(x >= 1 && x <= (double)MAX_EXACT_INTEGER && x == floor(x)))
        return bad(r, CKPT_MANIFEST, "tensor '%s' has a dimension that is not a positive whole number", tn);
      t->dims[t->rank++] = (int64_t)x;
    }
  }
  return true;
}

/* ---- tensors ------------------------------------------------------------------ */

/* Every tensor of the manifest from a verified safetensors file, fp32 of the
 * manifest's shape, copied out. */
static bool take_tensors(Reader *r, const char *file, const Mapped *m, const OrionCheckpoint *c, float **out) {
  for (uint32_t i = 0; i < c->nweights; i++) {
    const OrionCkptTensor *t = &c->weights[i];
    WeightInfo info;
    char err[256];
    if (!weights_parse_safetensors(m->data, m->len, t->name, &info, err, sizeof err))
      return bad(r, file, "%s", err);
    bool same = info.dtype == ORION_DT_FP32 && info.rank == t->rank;
    for (uint32_t k = 0; same && k < t->rank; k++) same = info.dims[k] == t->dims[k];
    if (!same) return bad(r, file, "tensor '%s' is not fp32 of the manifest's shape", t->name);
    out[i] = xmalloc(info.nbytes ? (size_t)info.nbytes : 1);
    memcpy(out[i], m->data + info.data_offset, (size_t)info.nbytes);
  }
  return true;
}

/* The file entry of the manifest named `name`. */
static bool file_entry(Reader *r, const cJSON *files, const char *name, uint64_t *bytes, const char **xxh64) {
  const cJSON *e;
  cJSON_ArrayForEach(e, files) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) continue;
    if (!get_count(r, e, "bytes", bytes)) return false;
    *xxh64 = get_string(r, e, "xxh64");
    if (!*xxh64) return false;
    if (strlen(*xxh64) != 16) return bad(r, CKPT_MANIFEST, "the checksum of '%s' is not 16 hex digits", name);
    return true;
  }
  return bad(r, CKPT_MANIFEST, "lists no file '%s'", name);
}

static bool load_file(Reader *r, const cJSON *files, const char *name, const OrionCheckpoint *c, float **out) {
  uint64_t bytes = 0;
  const char *xxh64 = NULL;
  Mapped m;
  if (!file_entry(r, files, name, &bytes, &xxh64) || !map_checked(r, name, bytes, xxh64, &m)) return false;
  bool ok = take_tensors(r, name, &m, c, out);
  unmap(&m);
  return ok;
}

/* ---- finding the checkpoint -------------------------------------------------------- */

/* `path` itself when it holds a manifest, else the checkpoint its `latest`
 * names (a plain name inside it). */
static char *resolve(const char *path, Diag *d) {
  char *manifest = join(path, CKPT_MANIFEST);
  struct stat st;
  bool direct = stat(manifest, &st) == 0;
  free(manifest);
  if (direct) return xstrdup(path);
  char *latest = join(path, CKPT_LATEST);
  char target[PATH_MAX];
  ssize_t n = readlink(latest, target, sizeof target - 1);
  free(latest);
  if (n < 0) {
    if (stat(path, &st) != 0)
      diag_error(d, (SrcSpan){0}, "checkpoint '%s': cannot read: %s", path, strerror(errno));
    else
      diag_error(d, (SrcSpan){0}, "'%s' is not a checkpoint: it has no " CKPT_MANIFEST " and no '" CKPT_LATEST "' link",
                 path);
    return NULL;
  }
  target[n] = 0;
  if (!target[0] || strchr(target, '/') || !strcmp(target, ".") || !strcmp(target, "..")) {
    diag_error(d, (SrcSpan){0}, "checkpoint '%s/" CKPT_LATEST "' points to '%s', not to a checkpoint beside it", path,
               target);
    return NULL;
  }
  return join(path, target);
}

void orion_ckpt_free(OrionCheckpoint *c) {
  free((void *)(uintptr_t)c->package_id);
  free((void *)(uintptr_t)c->optimizer);
  free((void *)(uintptr_t)c->data_position);
  free((void *)(uintptr_t)c->rng_state);
  for (uint32_t i = 0; i < c->nhyper; i++) free((void *)(uintptr_t)c->hyper[i].name);
  for (uint32_t s = 0; s < c->nslots; s++) {
    free((void *)(uintptr_t)c->slot_names[s]);
    if (c->state[s])
      for (uint32_t i = 0; i < c->nweights; i++) free(c->state[s][i]);
    free(c->state[s]);
  }
  for (uint32_t i = 0; i < c->nweights; i++) {
    free((void *)(uintptr_t)c->weights[i].name);
    free(c->weights[i].data);
  }
  free(c->weights);
  *c = (OrionCheckpoint){0};
}

bool orion_ckpt_load(const char *path, const char *expected_package_id, OrionCheckpoint *out, Diag *d) {
  *out = (OrionCheckpoint){0};
  char *dir = resolve(path, d);
  if (!dir) return false;
  Reader r = {.dir = dir, .d = d};
  OrionCheckpoint c = {0};
  cJSON *root = read_manifest(&r);
  bool ok = root && take_fields(&r, root, expected_package_id, &c);
  const cJSON *files = root ? cJSON_GetObjectItemCaseSensitive(root, "files") : NULL;
  if (ok && !cJSON_IsArray(files)) ok = bad(&r, CKPT_MANIFEST, "'files' is missing or not an array");
  if (ok) {
    float **weights = xcalloc(c.nweights, sizeof *weights);
    ok = load_file(&r, files, CKPT_WEIGHTS, &c, weights);
    for (uint32_t i = 0; i < c.nweights; i++) c.weights[i].data = weights[i];
    free(weights);
  }
  for (uint32_t s = 0; ok && s < c.nslots; s++) {
    char file[96];
    ckpt_slot_file(c.slot_names[s], file, sizeof file);
    c.state[s] = xcalloc(c.nweights, sizeof *c.state[s]);
    ok = load_file(&r, files, file, &c, c.state[s]);
  }
  cJSON_Delete(root);
  free(dir);
  if (!ok) {
    orion_ckpt_free(&c);
    return false;
  }
  *out = c;
  return true;
}
