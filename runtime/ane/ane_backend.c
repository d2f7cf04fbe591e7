/*
 * The ane backend behind the backend interface (orion/backend.h), where it
 * is built (meson: ane_standin_enabled; macOS later): the framework opened
 * and bound at ane_framework_path() (ane_framework.h), a prepared function
 * being one compiled and loaded program with its surfaces (ane_model.h) on
 * the function's surface plan (ane_surfaces.h). Elsewhere the registry's
 * entry is the placeholder, runtime/backend_ane.c.
 *
 * The program handed to the device is the function's MIL file as it was
 * read (from the SourceSet of the Diag given to prepare, copied) and the
 * program's weight files as they are now (orion_program_weight_file_at:
 * after a reload or a training step's write, the new bytes), so a weight
 * change is a recompile. That is the only update strategy for now; the
 * others and their self-test come with the budget and cache modules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ane_framework.h"
#include "ane_iosurface.h"
#include "ane_model.h"
#include "ane_parts.h"
#include "ane_surfaces.h"
#include "ane_unavailable.h"
#include "loader_internal.h"
#include "orion/ane_check.h"
#include "orion/backend.h"
#include "orion/constraint_table.h"
#include "orion/mil_reader.h"

typedef struct AneExec AneExec;

typedef struct AneBackend {
  AneFramework fw;
  AneSystem sys;
  ConstraintTable *table; /* the minimum surface per target */
  AneExec *execs;         /* the prepared functions, for the directories they share */
} AneBackend;

struct AneExec {
  AneBackend *b;
  AneExec *next;
  OrionProgram *p;
  uint32_t fn;
  char what[256]; /* "function 'main'" */
  char *mil; /* a copy: recompiles outlive the caller's Diag */
  size_t mil_len;
  uint32_t procedure; /* the function's index in its MIL file */
  AneSurfacePlan plan;
  AneModel model;
  AneRequest request;
  AneParts *parts; /* set: the function runs in parts (ane_parts.h) and nothing above is used */
};

/* Off macOS the only framework there can be is a stand-in that
 * $ORION_ANE_FRAMEWORK names; without it the backend says what the
 * placeholder says. */
static bool bind(AneFramework *fw, AneSystem *sys, char *why, size_t len) {
#if !defined(__APPLE__)
  const char *env = getenv(ANE_FRAMEWORK_ENV);
  if (!env || !*env) {
    snprintf(why, len, "%s", ORION_ANE_NOT_MACOS);
    return false;
  }
#endif
  if (!ane_framework_open(fw, NULL, why, len)) return false;
  if (ane_system_bind(sys, fw->handle, fw->path, why, len)) return true;
  ane_framework_close(fw);
  return false;
}

static bool ane_available(char *why, size_t len) {
  AneFramework fw;
  AneSystem sys;
  if (!bind(&fw, &sys, why, len)) return false;
  ane_framework_close(&fw);
  return true;
}

static void *ane_open(const OrionBackendOptions *opt, Diag *d) {
  (void)opt;
  AneBackend *b = xcalloc(1, sizeof *b);
  char why[1024];
  if (!bind(&b->fw, &b->sys, why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    free(b);
    return NULL;
  }
  size_t len;
  const char *text = constraints_builtin_text(&len);
  b->table = constraints_parse("ane_constraints.json", text, len, NULL, d);
  if (!b->table) {
    ane_framework_close(&b->fw);
    free(b);
    return NULL;
  }
  return b;
}

static void ane_close(void *impl) {
  AneBackend *b = impl;
  constraints_free(b->table);
  ane_framework_close(&b->fw);
  free(b);
}

static void ane_describe(const void *impl, char *out, size_t len) {
  const AneBackend *b = impl;
  snprintf(out, len, "framework '%s'; descriptor factory +%s (probed in order: +%s, +%s); %s", b->fw.path,
           b->fw.descriptor_from_mil_name, "modelWithMILText:weights:optionsPlist:isMILModel:",
           "modelWithMILText:weights:optionsPlist:", "update strategy: recompile");
}

static OrionBackendCaps ane_caps(const void *impl) {
  (void)impl;
  return (OrionBackendCaps){
      .numerics_fp32 = false, /* the device computes in fp16 */
      .update_strategies = 1u << ORION_RELOAD_RECOMPILE,
      .inputs_may_alias_outputs = true, /* inputs are copied into the device's surfaces first */
  };
}

static bool ane_supports(void *impl, const OrionProgram *p, uint32_t fn, Diag *d) {
  (void)impl;
  return orion_ane_check(p, fn, NULL, d);
}

/* The program's weight files under their @model_path keys (the caller frees the keys and the array). */
static AneWeightFile *weight_files(const OrionProgram *p, uint32_t *n) {
  *n = orion_program_weight_file_count(p);
  AneWeightFile *w = xcalloc(*n + 1, sizeof *w);
  for (uint32_t i = 0; i < *n; i++) {
    const char *rel;
    w[i].data = orion_program_weight_file_at(p, i, &rel, &w[i].len);
    size_t klen = strlen("@model_path/") + strlen(rel) + 1;
    char *key = xmalloc(klen);
    snprintf(key, klen, "@model_path/%s", rel);
    w[i].key = key;
  }
  return w;
}

static bool compile(AneExec *e, Diag *d) {
  uint32_t n;
  AneWeightFile *w = weight_files(e->p, &n);
  char why[2048];
  bool ok = ane_model_compile(&e->model, &e->b->fw, &e->b->sys, e->what, e->mil, e->mil_len, w, n, why, sizeof why);
  if (!ok) diag_error(d, (SrcSpan){0}, "%s", why);
  for (uint32_t i = 0; i < n; i++) free((void *)(uintptr_t)w[i].key);
  free(w);
  return ok;
}

static uint64_t minimum_surface(const AneBackend *b, const OrionProgram *p) {
  const Package *pkg = orion_program_manifest(p);
  MilTarget target = MIL_IOS18;
  if (pkg && pkg->target) (void)mil_target_from_name(pkg->target, &target);
  return constraints_target(b->table, target)->min_surface_bytes;
}

static void ane_release(void *exec);

static void *ane_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *d) {
  (void)opt;
  AneBackend *b = impl;
  const MilProgram *prog = orion_function_program(p, fn);
  const SourceFile *src = d->sources ? srcset_get(d->sources, prog->file) : NULL;
  if (!src) {
    diag_error(d, (SrcSpan){0}, "the ane backend needs the MIL text of '%s' (the Diag's SourceSet the program was "
               "opened with)", orion_function_name(p, fn));
    return NULL;
  }
  AneExec *e = xcalloc(1, sizeof *e);
  e->b = b;
  e->p = p;
  e->fn = fn;
  /* Hook: int32/bool values cannot be on the device's surfaces; their statements run on the CPU and the rest
   * as device segments of their own (ane_parts.h). Other functions take the single-program path below. */
  if (ane_parts_wanted(p, fn)) {
    e->parts = ane_parts_prepare(p, fn, src->text, src->len, opt, d);
    if (e->parts) return e;
    free(e);
    return NULL;
  }
  snprintf(e->what, sizeof e->what, "function '%s'", orion_function_name(p, fn));
  e->mil = xmalloc(src->len + 1);
  memcpy(e->mil, src->text, src->len + 1);
  e->mil_len = src->len;
  e->procedure = (uint32_t)(orion_function_mil(p, fn) - prog->funcs);
  uint32_t nin = orion_input_count(p, fn), nout = orion_output_count(p, fn);
  const OrionTensorInfo **in = xcalloc(nin + 1, sizeof *in), **out = xcalloc(nout + 1, sizeof *out);
  for (uint32_t i = 0; i < nin; i++) in[i] = orion_input(p, fn, i);
  for (uint32_t i = 0; i < nout; i++) out[i] = orion_output(p, fn, i);
  char why[2048];
  bool ok = ane_surface_plan(&e->plan, in, nin, out, nout, minimum_surface(b, p), why, sizeof why);
  free(in);
  free(out);
  if (!ok) diag_error(d, (SrcSpan){0}, "%s", why);
  ok = ok && compile(e, d);
  if (ok && !ane_request_make(&e->request, &b->fw, &b->sys, nin, nout, e->plan.surface_bytes, e->procedure, why,
                              sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    ok = false;
  }
  e->next = b->execs;
  b->execs = e;
  if (!ok) {
    ane_release(e);
    return NULL;
  }
  return e;
}

static bool locked_copy(const AneSystem *sys, IOSurfaceRef s, bool write, uint64_t bytes, const OrionTensor *t) {
  uint32_t mode = write ? 0 : kIOSurfaceLockReadOnly;
  if (sys->lock(s, mode, NULL) != 0) return false;
  void *base = sys->base_address(s);
  if (base && write) ane_surface_pack(base, bytes, t);
  else if (base) ane_surface_unpack(base, t);
  return sys->unlock(s, mode, NULL) == 0 && base;
}

static bool ane_run(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  AneExec *e = exec;
  if (e->parts) return ane_parts_run(e->parts, in, out, d); /* hook: ane_parts.h */
  const AneSystem *sys = &e->b->sys;
  for (uint32_t i = 0; i < e->plan.ninputs; i++)
    if (!locked_copy(sys, e->request.inputs[e->plan.input_slot[i]], true, e->plan.surface_bytes, &in[i])) {
      diag_error(d, (SrcSpan){0}, "the ane backend cannot lock the surface of input '%s'",
                 orion_input(e->p, e->fn, i)->name);
      return false;
    }
  char why[2048];
  if (!ane_model_evaluate(&e->model, &e->b->fw, &e->request, e->what, why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s", why);
    return false;
  }
  for (uint32_t i = 0; i < e->plan.noutputs; i++)
    if (!locked_copy(sys, e->request.outputs[e->plan.output_slot[i]], false, e->plan.surface_bytes, &out[i])) {
      diag_error(d, (SrcSpan){0}, "the ane backend cannot lock the surface of output '%s'",
                 orion_output(e->p, e->fn, i)->name);
      return false;
    }
  return true;
}

/* Frees e's model; its directory stays while another prepared function's
 * model uses it (equal MIL and weights give one hexStringIdentifier: two
 * functions of one MIL file, or a recompile to the same weights). */
static void free_model(AneExec *e) {
  for (const AneExec *o = e->b->execs; o && e->model.dir; o = o->next)
    if (o != e && o->model.dir && !strcmp(o->model.dir, e->model.dir)) {
      free(e->model.dir);
      e->model.dir = NULL;
    }
  ane_model_free(&e->model, &e->b->fw);
}

/* Recompiles from the program's current weights; the surfaces and the
 * request stay (they do not depend on the model). */
static bool ane_weights_changed(void *exec, Diag *d) {
  AneExec *e = exec;
  if (e->parts) return ane_parts_weights_changed(e->parts, d); /* hook: ane_parts.h */
  free_model(e);
  return compile(e, d);
}

static uint32_t ane_profile_count(const void *exec) {
  (void)exec;
  return 0;
}

static const OrionStmtTime *ane_profile_stmt(const void *exec, uint32_t i) {
  (void)exec, (void)i;
  return NULL;
}

static void ane_profile_reset(void *exec) { (void)exec; }

static void ane_release(void *exec) {
  AneExec *e = exec;
  if (e->parts) { /* hook: ane_parts.h; never in the list of execs */
    ane_parts_free(e->parts);
    free(e);
    return;
  }
  for (AneExec **at = &e->b->execs; *at; at = &(*at)->next)
    if (*at == e) {
      *at = e->next;
      break;
    }
  ane_request_free(&e->request, &e->b->fw, &e->b->sys);
  free_model(e);
  ane_surface_plan_free(&e->plan);
  free(e->mil);
  free(e);
}

const OrionBackendVtable orion_backend_ane = {
    .name = "ane",
    .description = "Apple's Neural Engine through AppleNeuralEngine.framework (here: its Linux stand-in, "
                   "$ORION_ANE_FRAMEWORK)",
    .available = ane_available,
    .open = ane_open,
    .close = ane_close,
    .caps = ane_caps,
    .supports = ane_supports,
    .prepare = ane_prepare,
    .run = ane_run,
    .weights_changed = ane_weights_changed,
    .profile_count = ane_profile_count,
    .profile_stmt = ane_profile_stmt,
    .profile_reset = ane_profile_reset,
    .release = ane_release,
    .describe = ane_describe,
};
