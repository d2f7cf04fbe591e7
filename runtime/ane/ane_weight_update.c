/* Weight updates over the lifecycle and the self-test's probe (ane_weight_update.h). */
#include "ane_weight_update.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/blob.h"
#include "orion/fp16.h"
#include "ane_weight_inputs.h"

#define MODEL_PATH "@model_path/"
#define PROBE_KEY "@model_path/weights/weight.bin"

static const char probe_mil[] =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> x) {\n"
    "        tensor<fp16, [1, 4, 1, 8]> w = const()[name = string(\"w\"), val = tensor<fp16, [1, 4, 1, 8]>(BLOBFILE("
    "path = string(\"" PROBE_KEY "\"), offset = uint64(64)))];\n"
    "        tensor<fp16, [1, 4, 1, 8]> y = mul(x = x, y = w)[name = string(\"y\")];\n"
    "    } -> (y);\n"
    "}\n";

/* The same probe with its weight as an input (ane_weight_inputs.h's form):
 * bound in ASCII order of the names, the weight's surface first. */
static const char probe_inputs_mil[] =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> x, tensor<fp16, [1, 4, 1, 8]> " ANE_WEIGHT_INPUT_PREFIX "w) {\n"
    "        tensor<fp16, [1, 4, 1, 8]> y = mul(x = x, y = " ANE_WEIGHT_INPUT_PREFIX "w)[name = string(\"y\")];\n"
    "    } -> (y);\n"
    "}\n";

static void put32(uint8_t *at, uint32_t v) {
  for (int i = 0; i < 4; i++) at[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *at, uint64_t v) {
  for (int i = 0; i < 8; i++) at[i] = (uint8_t)(v >> (8 * i));
}

/* A weight.bin of one fp16 blob, every value `value` (orion/blob.h's layout). */
static void probe_blob(uint8_t *b, float value) {
  memset(b, 0, ANE_PROBE_BLOB_BYTES);
  put32(b, 1);
  put32(b + 4, BLOB_VERSION);
  uint8_t *meta = b + BLOB_HEADER_SIZE;
  put32(meta + BLOB_META_SENTINEL, BLOB_SENTINEL);
  put32(meta + BLOB_META_DTYPE, BLOB_FP16);
  put64(meta + BLOB_META_SIZE, 2u * ANE_PROBE_VALUES);
  put64(meta + BLOB_META_OFFSET, BLOB_HEADER_SIZE + BLOB_METADATA_SIZE);
  uint16_t h = fp16_from_float(value);
  for (uint32_t i = 0; i < ANE_PROBE_VALUES; i++) {
    b[BLOB_HEADER_SIZE + BLOB_METADATA_SIZE + 2 * i] = (uint8_t)h;
    b[BLOB_HEADER_SIZE + BLOB_METADATA_SIZE + 2 * i + 1] = (uint8_t)(h >> 8);
  }
}

void ane_updater_init(AneUpdater *u, AneLifecycle *lc, uint64_t probe_surface_bytes, const char *os_build,
                      const char *ane_arch) {
  memset(u, 0, sizeof *u);
  u->lc = lc;
  u->probe_surface_bytes = probe_surface_bytes < 2u * ANE_PROBE_VALUES ? 2u * ANE_PROBE_VALUES : probe_surface_bytes;
  u->os_build = os_build;
  u->ane_arch = ane_arch;
  for (int k = 0; k < 2; k++) {
    probe_blob(u->blob[k], k ? 2.0f : 0.5f);
    u->file[k] = (AneWeightFile){.key = PROBE_KEY, .data = u->blob[k], .len = ANE_PROBE_BLOB_BYTES};
    u->set[k] = (AneWeightSet){.files = &u->file[k], .n = 1};
    StrBuf sb;
    sb_init(&sb);
    ane_weight_files_digest(&u->file[k], 1, &sb);
    snprintf(u->digest[k], sizeof u->digest[k], "%s", sb.data);
    sb_free(&sb);
    u->source[k] = (AneLifecycleSource){
        .src = {.name = "the weight-update probe", .mil_text = probe_mil, .mil_len = sizeof probe_mil - 1,
                .weights_digest = u->digest[k], .os_build = os_build, .ane_arch = ane_arch},
        .files = &u->file[k],
        .nfiles = 1};
  }
  u->inputs_source = (AneLifecycleSource){
      .src = {.name = "the weight-update probe (weights as inputs)", .mil_text = probe_inputs_mil,
              .mil_len = sizeof probe_inputs_mil - 1, .weights_digest = "", .os_build = os_build,
              .ane_arch = ane_arch, .weights_as_inputs = true}};
}

/* The inputs variant has no weight files: its weights are what was last
 * bound (first the ones it is asked with). */
static const AneProgramSource *probe_source(void *ctx, const void *weights, bool as_inputs) {
  AneUpdater *u = ctx;
  if (!as_inputs) return &u->source[weights == &u->set[1]].src;
  u->bound = weights;
  return &u->inputs_source.src;
}

static bool is_inputs_probe(const AneDeviceProgram *p) {
  return p->mil_len == sizeof probe_inputs_mil - 1 && !memcmp(p->mil, probe_inputs_mil, p->mil_len);
}

static bool bind_weights(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)program, (void)err;
  ((AneUpdater *)ctx)->bound = weights;
  return true;
}

/* A failure of orion's side (a file, a surface): a rejection, never retried. */
static void failed(AneDeviceError *err, const char *what, const char *detail) {
  *err = (AneDeviceError){.kind = ANE_FAILURE_REJECTED};
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s%s", what, detail);
  size_t n = sb.len < sizeof err->message - 1 ? sb.len : sizeof err->message - 1;
  memcpy(err->message, sb.data, n);
  err->message[n] = '\0';
  sb_free(&sb);
}

/* Writes data into dir/rel through a temporary file renamed over it. */
static bool write_atomically(const char *dir, const char *rel, const void *const *parts, const size_t *lens,
                             uint32_t nparts, AneDeviceError *err) {
  StrBuf path, tmp;
  sb_init(&path);
  sb_init(&tmp);
  sb_printf(&path, "%s/%s", dir, rel);
  sb_printf(&tmp, "%s.orion-tmp", path.data);
  FILE *f = fopen(tmp.data, "wb");
  bool ok = f != NULL;
  for (uint32_t i = 0; ok && i < nparts; i++) ok = fwrite(parts[i], 1, lens[i], f) == lens[i];
  if (f && fclose(f) != 0) ok = false;
  ok = ok && rename(tmp.data, path.data) == 0;
  if (!ok) {
    StrBuf what;
    sb_init(&what);
    sb_printf(&what, "cannot write '%s': ", path.data);
    failed(err, what.data, strerror(errno));
    sb_free(&what);
    (void)remove(tmp.data);
  }
  sb_free(&path);
  sb_free(&tmp);
  return ok;
}

/* The program's copies become the set's (a later recompile compiles them). */
static void take_copies(AneDeviceProgram *p, const AneWeightSet *set) {
  for (uint32_t i = 0; i < p->nfiles; i++) {
    free((void *)(uintptr_t)p->files[i].key);
    free((void *)(uintptr_t)p->files[i].data);
  }
  free(p->files);
  p->files = xcalloc(set->n + 1, sizeof *p->files);
  p->nfiles = set->n;
  for (uint32_t i = 0; i < set->n; i++) {
    void *data = xmalloc(set->files[i].len + 1);
    if (set->files[i].len) memcpy(data, set->files[i].data, set->files[i].len);
    p->files[i] = (AneWeightFile){.key = xstrdup(set->files[i].key), .data = data, .len = set->files[i].len};
  }
}

static bool has_directory(const AneDeviceProgram *p, AneDeviceError *err) {
  if (p->model.dir) return true;
  failed(err, p->what, " has no directory to write its weights into");
  return false;
}

static bool write_weight_files(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)ctx;
  AneDeviceProgram *p = program;
  const AneWeightSet *set = weights;
  if (!has_directory(p, err)) return false;
  for (uint32_t i = 0; i < set->n; i++) {
    const void *part = set->files[i].data;
    size_t len = set->files[i].len;
    if (!write_atomically(p->model.dir, set->files[i].key + strlen(MODEL_PATH), &part, &len, 1, err)) return false;
  }
  take_copies(p, set);
  return true;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const AneWeightFile *)a)->key, ((const AneWeightFile *)b)->key);
}

static bool patch_data(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)ctx;
  AneDeviceProgram *p = program;
  const AneWeightSet *set = weights;
  if (!has_directory(p, err)) return false;
  AneWeightFile *sorted = xcalloc(set->n + 1, sizeof *sorted);
  if (set->n) memcpy(sorted, set->files, set->n * sizeof *sorted);
  qsort(sorted, set->n, sizeof *sorted, by_key);
  const void **parts = xcalloc(set->n + 1, sizeof *parts);
  size_t *lens = xcalloc(set->n + 1, sizeof *lens);
  for (uint32_t i = 0; i < set->n; i++) parts[i] = sorted[i].data, lens[i] = sorted[i].len;
  bool ok = write_atomically(p->model.dir, "data", parts, lens, set->n, err);
  free(parts);
  free(lens);
  free(sorted);
  if (ok) take_copies(p, set);
  return ok;
}

static bool locked(const AneSystem *sys, IOSurfaceRef s, bool write, uint16_t *values, size_t n) {
  uint32_t mode = write ? 0 : kIOSurfaceLockReadOnly;
  if (sys->lock(s, mode, NULL) != 0) return false;
  uint16_t *base = sys->base_address(s);
  if (base && write) memcpy(base, values, n * sizeof *values);
  else if (base) memcpy(values, base, n * sizeof *values);
  return sys->unlock(s, mode, NULL) == 0 && base;
}

static bool evaluate(void *ctx, void *program, uint16_t *out, size_t n, AneDeviceError *err) {
  AneUpdater *u = ctx;
  AneDeviceProgram *p = program;
  const AneFramework *fw = u->lc->fw;
  const AneSystem *sys = u->lc->sys;
  AneRequest r;
  char why[1024];
  uint16_t x[ANE_PROBE_VALUES], w[ANE_PROBE_VALUES];
  for (uint32_t i = 0; i < ANE_PROBE_VALUES; i++) x[i] = fp16_from_float((float)(i + 1));
  if (n > ANE_PROBE_VALUES) n = ANE_PROBE_VALUES;
  bool as_inputs = is_inputs_probe(p) && u->bound;
  if (as_inputs) { /* the bound set's one blob, past its header and metadata */
    const uint8_t *v = (const uint8_t *)((const AneWeightSet *)u->bound)->files[0].data + BLOB_HEADER_SIZE +
                       BLOB_METADATA_SIZE;
    for (uint32_t i = 0; i < ANE_PROBE_VALUES; i++) w[i] = (uint16_t)(v[2 * i] | v[2 * i + 1] << 8);
  }
  bool ok = ane_request_make(&r, fw, sys, as_inputs ? 2 : 1, 1, u->probe_surface_bytes, 0, why, sizeof why);
  /* ASCII order: the weight (orion_weight__w) before x */
  if (ok && (!locked(sys, r.inputs[as_inputs], true, x, ANE_PROBE_VALUES) ||
             (as_inputs && !locked(sys, r.inputs[0], true, w, ANE_PROBE_VALUES)))) {
    snprintf(why, sizeof why, "cannot lock the probe's surface");
    ok = false;
  }
  ok = ok && ane_model_evaluate(&p->model, fw, &r, p->what, why, sizeof why);
  if (ok && !locked(sys, r.outputs[0], false, out, n)) {
    snprintf(why, sizeof why, "cannot lock the probe's surface");
    ok = false;
  }
  ane_request_free(&r, fw, sys); /* zeroed by a failed make: fine */
  if (!ok) failed(err, why, "");
  return ok;
}

AneUpdateOps ane_updater_ops(AneUpdater *u) {
  return (AneUpdateOps){.ctx = u, .probe_source = probe_source, .write_weight_files = write_weight_files,
                        .patch_data = patch_data, .bind_weights = bind_weights, .evaluate = evaluate};
}

static const char *environment(const char *name) { return getenv(name); }

AneSelfTest ane_updater_self_test(AneUpdater *u) {
  return (AneSelfTest){.old_weights = &u->set[0], .new_weights = &u->set[1], .outputs = ANE_PROBE_VALUES,
                       .os_build = u->os_build, .ane_arch = u->ane_arch, .env = environment};
}
