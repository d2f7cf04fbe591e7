/* The device operations over the lifecycle (ane_device_ops.h). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "ane_device_ops.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "ane_device_info.h"
#include "orion/hash.h"

static void take_failure(AneLifecycle *lc, const AneDeviceProgram *p, AneDeviceError *err) {
  const AneModelFailure *f = &p->model.failure;
  err->code = f->has_code ? f->code : 0;
  /* Not the device (the binding, the directory): a rejection, never retried. */
  err->kind = f->device && !f->has_error ? ANE_FAILURE_TRANSIENT : ANE_FAILURE_REJECTED;
  lc->transient = err->kind == ANE_FAILURE_TRANSIENT;
  size_t n = strnlen(lc->why, sizeof err->message - 1); /* the whole text stays in lc->why */
  memcpy(err->message, lc->why, n);
  err->message[n] = '\0';
}

static void program_free(AneLifecycle *lc, AneDeviceProgram *p) {
  ane_model_free(&p->model, lc->fw);
  for (uint32_t i = 0; i < p->nfiles; i++) {
    free((void *)(uintptr_t)p->files[i].key);
    free((void *)(uintptr_t)p->files[i].data);
  }
  free(p->files);
  free(p->mil);
  free(p->what);
  free(p);
}

static bool op_compile(void *ctx, const AneProgramSource *src, void **program, AneDeviceError *err) {
  AneLifecycle *lc = ctx;
  const AneLifecycleSource *ls = (const AneLifecycleSource *)src;
  AneDeviceProgram *p = xcalloc(1, sizeof *p);
  p->what = xstrdup(src->name);
  p->mil = xmalloc(src->mil_len + 1);
  memcpy(p->mil, src->mil_text, src->mil_len);
  p->mil[src->mil_len] = '\0';
  p->mil_len = src->mil_len;
  p->files = xcalloc(ls->nfiles + 1, sizeof *p->files);
  p->nfiles = ls->nfiles;
  for (uint32_t i = 0; i < ls->nfiles; i++) {
    void *data = xmalloc(ls->files[i].len + 1);
    if (ls->files[i].len) memcpy(data, ls->files[i].data, ls->files[i].len);
    p->files[i] = (AneWeightFile){.key = xstrdup(ls->files[i].key), .data = data, .len = ls->files[i].len};
  }
  lc->why[0] = '\0';
  if (!ane_model_build(&p->model, lc->fw, lc->sys, p->what, p->mil, p->mil_len, p->files, p->nfiles, lc->why,
                       sizeof lc->why)) {
    take_failure(lc, p, err);
    program_free(lc, p);
    return false;
  }
  *program = p;
  return true;
}

/* The model again from its copies: the same MIL and weight files. */
static bool op_recompile(void *ctx, void *program, AneDeviceError *err) {
  AneLifecycle *lc = ctx;
  AneDeviceProgram *p = program;
  ane_model_free(&p->model, lc->fw);
  lc->why[0] = '\0';
  if (ane_model_build(&p->model, lc->fw, lc->sys, p->what, p->mil, p->mil_len, p->files, p->nfiles, lc->why,
                      sizeof lc->why))
    return true;
  take_failure(lc, p, err);
  return false;
}

static bool op_load(void *ctx, void *program, AneDeviceError *err) {
  AneLifecycle *lc = ctx;
  AneDeviceProgram *p = program;
  lc->why[0] = '\0';
  if (ane_model_load(&p->model, lc->fw, lc->sys, p->what, lc->why, sizeof lc->why)) return true;
  take_failure(lc, p, err);
  return false;
}

static void op_unload(void *ctx, void *program) {
  AneLifecycle *lc = ctx;
  ane_model_unload(&((AneDeviceProgram *)program)->model, lc->fw);
}

static void op_release(void *ctx, void *program) { program_free(ctx, program); }

AneDeviceOps ane_lifecycle_ops(AneLifecycle *lc) {
  return (AneDeviceOps){.ctx = lc, .compile = op_compile, .recompile = op_recompile, .load = op_load,
                        .unload = op_unload, .release = op_release};
}

bool ane_device_program_ensure_directory(AneLifecycle *lc, AneDeviceProgram *p, char *why, size_t len) {
  struct stat st;
  if (p->model.dir && stat(p->model.dir, &st) == 0) return true;
  return ane_model_write_directory(&p->model, lc->fw, p->mil, p->mil_len, p->files, p->nfiles, why, len);
}

void ane_weight_files_digest(const AneWeightFile *files, uint32_t n, StrBuf *out) {
  for (uint32_t i = 0; i < n; i++) {
    char hex[65];
    sha256_hex(files[i].data, files[i].len, hex);
    sb_printf(out, "%s %s\n", files[i].key, hex);
  }
}

#if !defined(__APPLE__)
/* The stand-in's answer to `name`, or NULL. */
static const char *standin_says(const AneFramework *fw, const char *name) {
  void *sym = fw->handle ? dlsym(fw->handle, name) : NULL;
  if (!sym) return NULL;
  const char *(*fn)(void);
  memcpy(&fn, &sym, sizeof sym);
  return fn();
}
#endif

void ane_device_os_build(const AneFramework *fw, char *out, size_t len) {
#if defined(__APPLE__)
  (void)fw;
  char build[128] = "";
  size_t n = sizeof build - 1;
  ane_device_name_copy(out, len, sysctlbyname("kern.osversion", build, &n, NULL, 0) == 0 ? build : NULL);
#else
  ane_device_name_copy(out, len, standin_says(fw, "ane_standin_os_build"));
#endif
}

void ane_sleep_ms(void *ctx, uint32_t ms) {
  (void)ctx;
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}
