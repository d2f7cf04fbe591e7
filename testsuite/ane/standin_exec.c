/*
 * The stand-in's compile and evaluate over orion's runtime (standin_exec.h).
 */
#include "standin_exec.h"

#include "ane_budget.h"
#include "ane_weight_inputs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "orion/ane_check.h"
#include "orion/backend.h"
#include "orion/constraint_table.h"
#include "orion/fp16.h"
#include "orion/runtime.h"
#include "orion/support.h"
#include "orion/temporaries.h"

/* orion's runtime, from the process that loaded the stand-in (standin_exec.h). */
#pragma weak orion_open
#pragma weak orion_close
#pragma weak orion_function_count
#pragma weak orion_input_count
#pragma weak orion_input
#pragma weak orion_output_count
#pragma weak orion_output
#pragma weak orion_ane_check
#pragma weak orion_backend_open
#pragma weak orion_backend_close
#pragma weak orion_backend_prepare
#pragma weak orion_exec_run
#pragma weak orion_exec_release
#pragma weak diag_init
#pragma weak srcset_init
#pragma weak srcset_free
#pragma weak sb_init
#pragma weak sb_free
#pragma weak fp16_from_float_array
#pragma weak fp16_to_float_array
#pragma weak constraints_builtin_text
#pragma weak constraints_parse
#pragma weak constraints_target
#pragma weak constraints_find
#pragma weak constraint_figure
#pragma weak constraints_free
#pragma weak temp_make_dir
#pragma weak temp_remove
#pragma weak test_pause_at

#define MODEL_PATH "@model_path/"

struct StandinProgram {
  SourceSet sources;
  Diag diag;
  StrBuf messages; /* the runtime's messages, kept out of the host's stderr */
  OrionProgram *program;
  OrionBackend *cpu;
  OrionExec **execs; /* per function */
  uint32_t nfuncs;
  uint64_t min_surface_bytes;
};

static unsigned long compiles;

unsigned long ane_standin_compile_count(void) { return compiles; }

const char *ane_standin_os_build(void) {
  const char *build = getenv(STANDIN_OS_BUILD_ENV);
  return build && *build ? build : "standin-1";
}

const char *ane_standin_ane_arch(void) {
  const char *arch = getenv(STANDIN_ANE_ARCH_ENV);
  return arch && *arch ? arch : "standin";
}

static bool fail(long *code, char **description, long value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(long *code, char **description, long value, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  *description = malloc((size_t)n + 1);
  va_start(ap, fmt);
  if (*description) vsnprintf(*description, (size_t)n + 1, fmt, ap);
  va_end(ap);
  *code = value;
  return false;
}

/* The first error the runtime reported, as the device's message. */
typedef struct FirstError {
  char text[1024];
} FirstError;

static void keep_first_error(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  (void)span;
  FirstError *e = ctx;
  if (level == DIAG_ERROR && !e->text[0]) snprintf(e->text, sizeof e->text, "%s", message);
}

static bool write_file(const char *dir, const char *rel, uint64_t offset, const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  for (char *slash = strchr(path + strlen(dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return false;
    *slash = '/';
  }
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = true;
  for (uint64_t i = 0; ok && i < offset; i++) ok = fputc(0, f) != EOF;
  ok = ok && fwrite(data, 1, len, f) == len;
  return fclose(f) == 0 && ok;
}

/* The bare model directory: model.mil, and each weight at its key's path. */
static bool write_model(const char *dir, const char *mil, size_t mil_len, const StandinWeight *w, size_t nw) {
  if (!write_file(dir, "model.mil", 0, mil, mil_len)) return false;
  for (size_t i = 0; i < nw; i++) {
    const char *rel = w[i].key + strlen(MODEL_PATH);
    if (strncmp(w[i].key, MODEL_PATH, strlen(MODEL_PATH)) || strstr(rel, "..") || !*rel) return false;
    if (!write_file(dir, rel, w[i].offset, w[i].data, w[i].len)) return false;
  }
  return true;
}

static uint64_t minimum_surface(Diag *d) {
  size_t len;
  const char *text = constraints_builtin_text(&len);
  ConstraintTable *t = constraints_parse("ane_constraints.json", text, len, NULL, d);
  if (!t) return 0;
  uint64_t min = constraints_target(t, MIL_IOS18)->min_surface_bytes;
  constraints_free(t);
  return min;
}

void standin_program_free(StandinProgram *p) {
  if (!p) return;
  for (uint32_t i = 0; p->execs && i < p->nfuncs; i++) orion_exec_release(p->execs[i]);
  free(p->execs);
  orion_backend_close(p->cpu);
  orion_close(p->program);
  sb_free(&p->messages);
  srcset_free(&p->sources);
  free(p);
}

/* Opens, checks and prepares the directory; the device's refusal on failure. */
static bool open_model(StandinProgram *p, const char *dir, long *code, char **description) {
  FirstError first = {{0}};
  p->diag.observe = keep_first_error;
  p->diag.observe_ctx = &first;
  OrionOpenOptions oo = {.verify_checksums = false};
  p->program = orion_open(dir, &oo, &p->diag);
  if (!p->program)
    return fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: the program does not load: %s",
                first.text);
  p->nfuncs = orion_function_count(p->program);
  for (uint32_t fn = 0; fn < p->nfuncs; fn++)
    if (!orion_ane_check(p->program, fn, NULL, &p->diag))
      return fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: %s", first.text);
  p->min_surface_bytes = minimum_surface(&p->diag);
  p->cpu = orion_backend_open("cpu", NULL, &p->diag);
  p->execs = calloc(p->nfuncs ? p->nfuncs : 1, sizeof *p->execs);
  if (!p->min_surface_bytes || !p->cpu || !p->execs)
    return fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: %s", first.text);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  for (uint32_t fn = 0; fn < p->nfuncs; fn++) {
    p->execs[fn] = orion_backend_prepare(p->cpu, p->program, fn, &po, &p->diag);
    if (!p->execs[fn])
      return fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: %s", first.text);
  }
  p->diag.observe = NULL;
  p->diag.observe_ctx = NULL;
  return true;
}

/* A test's deterministic pause (orion/temporaries.h), when the host has it. */
static void pause_at(const char *point) {
  if (test_pause_at) test_pause_at(point);
}

/* Every function of the runtime the stand-in calls, resolved. */
static bool runtime_present(void) {
  void (*const fns[])(void) = {
      (void (*)(void))orion_open, (void (*)(void))orion_close, (void (*)(void))orion_function_count,
      (void (*)(void))orion_input_count, (void (*)(void))orion_input, (void (*)(void))orion_output_count,
      (void (*)(void))orion_output, (void (*)(void))orion_ane_check, (void (*)(void))orion_backend_open,
      (void (*)(void))orion_backend_close, (void (*)(void))orion_backend_prepare, (void (*)(void))orion_exec_run,
      (void (*)(void))orion_exec_release, (void (*)(void))diag_init, (void (*)(void))srcset_init,
      (void (*)(void))srcset_free, (void (*)(void))sb_init, (void (*)(void))sb_free,
      (void (*)(void))fp16_from_float_array, (void (*)(void))fp16_to_float_array,
      (void (*)(void))constraints_builtin_text, (void (*)(void))constraints_parse,
      (void (*)(void))constraints_target, (void (*)(void))constraints_free, (void (*)(void))constraints_find,
      (void (*)(void))constraint_figure, (void (*)(void))temp_make_dir, (void (*)(void))temp_remove};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!fns[i]) return false;
  return true;
}

/* The table's compiles_per_process (ANE005), read once: what the device is
 * reported to allow a process; 0 where it cannot be read. */
static unsigned long table_compile_limit(void) {
  static unsigned long limit;
  static bool read;
  if (read) return limit;
  read = true;
  SourceSet sources;
  Diag d;
  StrBuf quiet; /* a table that does not load is the runtime's to report, at the compile */
  srcset_init(&sources);
  diag_init(&d, &sources);
  sb_init(&quiet);
  d.capture = &quiet;
  size_t len;
  const char *text = constraints_builtin_text(&len);
  ConstraintTable *t = constraints_parse("ane_constraints.json", text, len, NULL, &d);
  const Constraint *rule = t ? constraints_find(t, ANE_LIMITS_RULE) : NULL;
  const ConstraintFigure *figure = rule ? constraint_figure(rule, ANE_FIGURE_COMPILES) : NULL;
  if (figure) limit = (unsigned long)figure->value;
  constraints_free(t);
  sb_free(&quiet);
  srcset_free(&sources);
  return limit;
}

/* The device's compile limit: $ORION_ANE_STANDIN_COMPILE_LIMIT, else the
 * table's (0: none known, in a process without the runtime). False for a
 * malformed value, which the compile reports. */
static bool compile_limit(unsigned long *limit) {
  const char *v = getenv(STANDIN_COMPILE_LIMIT_ENV);
  if (!v || !*v) {
    *limit = runtime_present() ? table_compile_limit() : 0;
    return true;
  }
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (*end || errno || *v < '0' || *v > '9' || n < 1 || n > STANDIN_COMPILE_LIMIT_MAX) return false;
  *limit = n;
  return true;
}

static StandinProgram *build(const char *mil, size_t mil_len, const StandinWeight *weights, size_t nweights,
                             long *code, char **description);

/* A weight given as an input (ane_weight_inputs.h names it) is honoured
 * only under the `inputs` switch; the other switches emulate a device that
 * refuses it at compile, so that the self-test is tested against both. */
static bool weight_inputs_refused(const StandinProgram *p, long *code, char **description) {
  StandinWeightMode mode;
  if (!standin_weight_mode(&mode, code, description)) return true;
  if (mode == STANDIN_WEIGHTS_INPUTS) return false;
  static const char *const names[] = {"baked", "reload", "patch-data"};
  for (uint32_t fn = 0; fn < p->nfuncs; fn++)
    for (uint32_t i = 0; i < orion_input_count(p->program, fn); i++) {
      const char *name = orion_input(p->program, fn, i)->mil_name;
      if (!strncmp(name, ANE_WEIGHT_INPUT_PREFIX, strlen(ANE_WEIGHT_INPUT_PREFIX)))
        return !fail(code, description, STANDIN_ERROR_COMPILE,
                     "ANECCompile() FAILED: input '%s' is a weight given as an input, which this device does not "
                     "take (%s=%s; only inputs takes them)",
                     name, STANDIN_WEIGHTS_ENV, names[mode]);
    }
  return false;
}

StandinProgram *standin_compile(const char *mil, size_t mil_len, const StandinWeight *weights, size_t nweights,
                                long *code, char **description) {
  compiles++;
  unsigned long limit;
  if (!compile_limit(&limit)) {
    fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: %s=%s is not a count from 1 to %lu",
         STANDIN_COMPILE_LIMIT_ENV, getenv(STANDIN_COMPILE_LIMIT_ENV), STANDIN_COMPILE_LIMIT_MAX);
    return NULL;
  }
  StandinProgram *p = build(mil, mil_len, weights, nweights, code, description);
  if (p && weight_inputs_refused(p, code, description)) {
    standin_program_free(p);
    return NULL;
  }
  return p;
}

bool standin_fail_silently(void) {
  unsigned long limit;
  if (compile_limit(&limit) && limit && compiles >= limit) {
    compiles++;
    return true;
  }
  static unsigned long failed;
  const char *v = getenv(STANDIN_SILENT_FAILURES_ENV);
  unsigned long n = v && *v ? strtoul(v, NULL, 10) : 0;
  if (failed >= n) return false;
  failed++;
  compiles++;
  return true;
}

bool standin_weight_mode(StandinWeightMode *mode, long *code, char **description) {
  static const char *const names[] = {"baked", "reload", "patch-data", "inputs"};
  const char *v = getenv(STANDIN_WEIGHTS_ENV);
  *mode = STANDIN_WEIGHTS_BAKED;
  if (!v || !*v) return true;
  for (int i = 0; i < 4; i++)
    if (!strcmp(v, names[i])) {
      *mode = (StandinWeightMode)i;
      return true;
    }
  return fail(code, description, STANDIN_ERROR_COMPILE, "%s=%s is not baked, reload, patch-data or inputs",
              STANDIN_WEIGHTS_ENV, v);
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *data = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n + 1)) && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *len = n >= 0 ? (size_t)n : 0;
  return data;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const StandinWeight *)a)->key, ((const StandinWeight *)b)->key);
}

bool standin_write_data(const char *dir, const StandinWeight *weights, size_t nweights) {
  StandinWeight *sorted = calloc(nweights + 1, sizeof *sorted);
  if (!sorted) return false;
  if (nweights) memcpy(sorted, weights, nweights * sizeof *sorted);
  qsort(sorted, nweights, sizeof *sorted, by_key);
  char path[4096];
  snprintf(path, sizeof path, "%s/data", dir);
  FILE *f = fopen(path, "wb");
  bool ok = f != NULL;
  for (size_t i = 0; ok && i < nweights; i++) ok = fwrite(sorted[i].data, 1, sorted[i].len, f) == sorted[i].len;
  if (f && fclose(f) != 0) ok = false;
  free(sorted);
  return ok;
}

bool standin_reload(StandinProgram **program, const char *dir, StandinWeightMode mode, const char *mil,
                    size_t mil_len, const StandinWeight *weights, size_t nweights, long *code, char **description) {
  StandinWeight *now = calloc(nweights + 1, sizeof *now);
  bool ok = now != NULL;
  if (ok && nweights) memcpy(now, weights, nweights * sizeof *now);
  uint8_t *data = NULL;
  size_t data_len = 0, at = 0;
  char path[4096];
  if (ok && mode == STANDIN_WEIGHTS_PATCH_DATA) { /* the image: the files' bytes in ASCII order of their keys */
    qsort(now, nweights, sizeof *now, by_key);
    snprintf(path, sizeof path, "%s/data", dir);
    data = slurp(path, &data_len);
    ok = data != NULL;
  }
  uint8_t **read = calloc(nweights + 1, sizeof *read);
  ok = ok && read;
  for (size_t i = 0; ok && i < nweights; i++) {
    if (mode == STANDIN_WEIGHTS_PATCH_DATA) {
      ok = data_len - at >= now[i].len;
      if (ok) now[i].data = data + at;
      at += now[i].len;
      continue;
    }
    snprintf(path, sizeof path, "%s/%s", dir, now[i].key + strlen(MODEL_PATH));
    size_t len;
    read[i] = slurp(path, &len);
    ok = read[i] && len == now[i].len;
    if (ok) now[i].data = read[i];
  }
  StandinProgram *fresh = NULL;
  if (ok) fresh = build(mil, mil_len, now, nweights, code, description);
  else
    fail(code, description, STANDIN_ERROR_EVALUATE, "load failed: the program's %s in '%s' cannot be read back",
         mode == STANDIN_WEIGHTS_PATCH_DATA ? "data" : "weight files", dir);
  for (size_t i = 0; read && i < nweights; i++) free(read[i]);
  free(read);
  free(data);
  free(now);
  if (!fresh) return false;
  standin_program_free(*program);
  *program = fresh;
  return true;
}

static StandinProgram *build(const char *mil, size_t mil_len, const StandinWeight *weights, size_t nweights,
                             long *code, char **description) {
  if (!runtime_present()) {
    fail(code, description, STANDIN_ERROR_COMPILE,
         "the stand-in framework needs orion's runtime in the process that loads it (linked with export_dynamic)");
    return NULL;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/orion-ane-standin-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!temp_make_dir(dir)) { /* registered in the host's runtime: an interrupted run removes it */
    fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: cannot make a directory: %s",
         strerror(errno));
    return NULL;
  }
  StandinProgram *p = calloc(1, sizeof *p);
  bool ok = p != NULL;
  if (ok) {
    srcset_init(&p->sources);
    diag_init(&p->diag, &p->sources);
    sb_init(&p->messages);
    p->diag.capture = &p->messages;
    p->diag.error_limit = 0;
    ok = write_model(dir, mil, mil_len, weights, nweights)
             ? open_model(p, dir, code, description)
             : fail(code, description, STANDIN_ERROR_COMPILE, "ANECCompile() FAILED: the weights' keys or files");
  }
  if (ok) pause_at("ane-standin-compile"); /* the compile's directory exists (testsuite/ane/ane_run.sh) */
  /* The program keeps its mapping of the files: removing them is what bakes the weights. */
  temp_remove(dir);
  if (!ok) {
    standin_program_free(p);
    return NULL;
  }
  return p;
}

static int by_mil_name(const OrionTensorInfo *a, const OrionTensorInfo *b) { return strcmp(a->mil_name, b->mil_name); }

/* order[k] = the declared index of the k-th tensor in ASCII order of MIL names. */
static void ascii_order(uint32_t *order, const OrionProgram *p, uint32_t fn, uint32_t n, bool outputs) {
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = 1; i < n; i++)
    for (uint32_t j = i; j > 0; j--) {
      const OrionTensorInfo *a = outputs ? orion_output(p, fn, order[j - 1]) : orion_input(p, fn, order[j - 1]);
      const OrionTensorInfo *b = outputs ? orion_output(p, fn, order[j]) : orion_input(p, fn, order[j]);
      if (by_mil_name(a, b) <= 0) break;
      uint32_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
}

static uint64_t elements(const OrionTensorInfo *t) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->rank; i++) n *= (uint64_t)t->dims[i];
  return n;
}

static bool check_surfaces(const StandinProgram *p, IOSurfaceRef const *s, long n, size_t *size, long *code,
                           char **description) {
  for (long i = 0; i < n; i++) {
    size_t got = IOSurfaceGetAllocSize(s[i]);
    if (got < p->min_surface_bytes)
      return fail(code, description, STANDIN_ERROR_EVALUATE,
                  "program evaluation failed: a surface of %zu bytes is below the %llu-byte minimum [ANE004]", got,
                  (unsigned long long)p->min_surface_bytes);
    if (*size && got != *size)
      return fail(code, description, STANDIN_ERROR_EVALUATE,
                  "program evaluation failed: the request's surfaces are of %zu and %zu bytes, not of one size", *size,
                  got);
    *size = got;
  }
  return true;
}

/* Surface k holds the k-th tensor in ASCII order of MIL names, fp16. */
static bool read_input(IOSurfaceRef s, const OrionTensorInfo *info, OrionTensor *t, size_t surface_bytes) {
  uint64_t n = elements(info);
  if (n * 2 > surface_bytes) return false;
  t->dtype = info->dtype;
  t->rank = info->rank;
  memcpy(t->dims, info->dims, sizeof t->dims);
  t->data = calloc(n ? n : 1, info->dtype == MIL_DT_FP32 ? 4 : 2);
  if (!t->data || IOSurfaceLock(s, kIOSurfaceLockReadOnly, NULL) != 0) return false;
  const uint16_t *h = IOSurfaceGetBaseAddress(s);
  if (info->dtype == MIL_DT_FP32) fp16_to_float_array(t->data, h, n);
  else memcpy(t->data, h, n * 2);
  return IOSurfaceUnlock(s, kIOSurfaceLockReadOnly, NULL) == 0;
}

static bool write_output(IOSurfaceRef s, const OrionTensor *t) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->rank; i++) n *= (uint64_t)t->dims[i];
  if (IOSurfaceLock(s, 0, NULL) != 0) return false;
  uint16_t *h = IOSurfaceGetBaseAddress(s);
  if (t->dtype == MIL_DT_FP32) fp16_from_float_array(h, t->data, n);
  else memcpy(h, t->data, n * 2);
  return IOSurfaceUnlock(s, 0, NULL) == 0;
}

bool standin_evaluate(StandinProgram *p, int64_t procedure, IOSurfaceRef const *inputs, long ninputs,
                      IOSurfaceRef const *outputs, long noutputs, long *code, char **description) {
  if (procedure < 0 || (uint64_t)procedure >= p->nfuncs)
    return fail(code, description, STANDIN_ERROR_EVALUATE, "program evaluation failed: no procedure %lld",
                (long long)procedure);
  uint32_t fn = (uint32_t)procedure;
  pause_at("ane-standin-evaluate"); /* the program is loaded, its directory written (testsuite/ane/ane_run.sh) */
  uint32_t nin = orion_input_count(p->program, fn), nout = orion_output_count(p->program, fn);
  if ((uint64_t)ninputs != nin || (uint64_t)noutputs != nout)
    return fail(code, description, STANDIN_ERROR_EVALUATE,
                "program evaluation failed: the request has %ld inputs and %ld outputs, the program %u and %u",
                ninputs, noutputs, nin, nout);
  size_t size = 0;
  if (!check_surfaces(p, inputs, ninputs, &size, code, description) ||
      !check_surfaces(p, outputs, noutputs, &size, code, description))
    return false;
  uint32_t *in_order = calloc(nin + 1, sizeof *in_order), *out_order = calloc(nout + 1, sizeof *out_order);
  OrionTensor *in = calloc(nin + 1, sizeof *in), *out = calloc(nout + 1, sizeof *out);
  bool ok = in_order && out_order && in && out;
  if (ok) {
    ascii_order(in_order, p->program, fn, nin, false);
    ascii_order(out_order, p->program, fn, nout, true);
  }
  for (uint32_t k = 0; ok && k < nin; k++)
    ok = read_input(inputs[k], orion_input(p->program, fn, in_order[k]), &in[in_order[k]], size);
  for (uint32_t j = 0; ok && j < nout; j++) {
    const OrionTensorInfo *info = orion_output(p->program, fn, j);
    out[j] = (OrionTensor){.dtype = info->dtype, .rank = info->rank};
    memcpy(out[j].dims, info->dims, sizeof out[j].dims);
    out[j].data = calloc(elements(info) + 1, info->dtype == MIL_DT_FP32 ? 4 : 2);
    ok = out[j].data && elements(info) * 2 <= size;
  }
  if (!ok) fail(code, description, STANDIN_ERROR_EVALUATE, "program evaluation failed: the request's surfaces");
  FirstError first = {{0}};
  p->diag.observe = keep_first_error;
  p->diag.observe_ctx = &first;
  if (ok && !orion_exec_run(p->execs[fn], in, out, &p->diag)) {
    fail(code, description, STANDIN_ERROR_EVALUATE, "program evaluation failed: %s", first.text);
    ok = false;
  }
  p->diag.observe = NULL;
  for (uint32_t k = 0; ok && k < nout; k++)
    if (!write_output(outputs[k], &out[out_order[k]]))
      ok = fail(code, description, STANDIN_ERROR_EVALUATE, "program evaluation failed: an output surface's lock");
  for (uint32_t i = 0; in && i < nin; i++) free(in[i].data);
  for (uint32_t i = 0; out && i < nout; i++) free(out[i].data);
  free(in);
  free(out);
  free(in_order);
  free(out_order);
  return ok;
}
